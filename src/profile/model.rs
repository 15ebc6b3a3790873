//! LLVM's sample profile data model (`SampleProf.h`): function profiles with body samples,
//! call targets and nested inlinee profiles, keyed by name or by calling context.

use crate::llvm::{ContextFrame, FuncName, LineLocation};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The samples of one source location: its count and the functions called from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BodySample {
    pub count: u64,
    pub call_targets: CallTargets,
}

/// The functions called from a source location, with their counts: a vector sorted by name.
/// Most call sites have one or two targets, where a map would allocate a whole node per site.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CallTargets(Vec<(String, u64)>);

impl CallTargets {
    fn find(&self, name: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(n, _)| n.as_str().cmp(name))
    }
    pub fn get(&self, name: &str) -> Option<&u64> {
        self.find(name).ok().map(|i| &self.0[i].1)
    }
    /// Adds `n` to the count of `name` (saturating), inserting it at 0 first if absent.
    pub fn add(&mut self, name: &str, n: u64) {
        match self.find(name) {
            Ok(i) => self.0[i].1 = self.0[i].1.saturating_add(n),
            Err(i) => {
                // Exact growth: lists stay short, and there is one per call site.
                self.0.reserve_exact(1);
                self.0.insert(i, (name.to_string(), n));
            }
        }
    }
    /// Removes `name`, returning its count.
    pub fn remove(&mut self, name: &str) -> Option<u64> {
        self.find(name).ok().map(|i| self.0.remove(i).1)
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// `(name, count)` in name order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (&String, &u64)> + '_ {
        self.0.iter().map(|(name, n)| (name, n))
    }
    pub fn keys(&self) -> impl ExactSizeIterator<Item = &String> + '_ {
        self.0.iter().map(|(name, _)| name)
    }
    pub fn values(&self) -> impl ExactSizeIterator<Item = &u64> + '_ {
        self.0.iter().map(|(_, n)| n)
    }
}

impl std::ops::Index<&str> for CallTargets {
    type Output = u64;
    fn index(&self, name: &str) -> &u64 {
        self.get(name).expect("a call target of this name")
    }
}

impl FromIterator<(String, u64)> for CallTargets {
    /// Later counts of a repeated name replace earlier ones, as a map's would.
    fn from_iter<I: IntoIterator<Item = (String, u64)>>(iter: I) -> Self {
        let mut targets: Vec<(String, u64)> = iter.into_iter().collect();
        targets.reverse();
        targets.sort_by(|a, b| a.0.cmp(&b.0));
        targets.dedup_by(|later, first| later.0 == first.0);
        targets.shrink_to_fit();
        CallTargets(targets)
    }
}

impl<'a> IntoIterator for &'a CallTargets {
    type Item = (&'a String, &'a u64);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, u64)>,
        fn(&'a (String, u64)) -> (&'a String, &'a u64),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(name, n)| (name, n))
    }
}

/// A calling context, root first, leaf last (whose location is (0, 0)). A context of one frame
/// is a base (context-less) profile.
///
/// The frames live in a shared buffer, and a caller's context made with [`Context::parent`]
/// shares it: the chain of contexts a deep one implies (llvm-profgen creates a profile for every
/// caller of a context without head samples) holds the frames once, not depth²/2 times. The
/// buffer's frame at the leaf position may carry a call-site location (from the longer context
/// it was cut from); it is never read. Equality, order and hash are those of the frames, root
/// first, as LLVM orders `SampleContext`s.
#[derive(Clone)]
pub struct Context {
    frames: Arc<[ContextFrame]>,
    len: usize,
}

impl Context {
    pub fn new(frames: Vec<ContextFrame>) -> Self {
        let len = frames.len();
        Context { frames: frames.into(), len }
    }
    pub fn base(func: &str) -> Self {
        Context::new(vec![ContextFrame { func: func.into(), loc: LineLocation::default() }])
    }
    /// Frames, leaf included.
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn leaf_name(&self) -> &str {
        &self.frames[..self.len].last().expect("a context has a leaf frame").func
    }
    /// Every frame but the leaf, root first, each at its call site.
    pub fn callers(&self) -> &[ContextFrame] {
        &self.frames[..self.len.saturating_sub(1)]
    }
    /// `(function, location)` of every frame, root first; the leaf's location is (0, 0).
    pub fn frames(&self) -> impl ExactSizeIterator<Item = (&str, LineLocation)> + '_ {
        self.named_frames().map(|(func, loc)| (func.as_str(), loc))
    }
    /// [`Context::frames`] with the shared names: equal names compare without reading them.
    pub fn named_frames(&self) -> impl ExactSizeIterator<Item = (&FuncName, LineLocation)> + '_ {
        self.frames[..self.len].iter().enumerate().map(|(i, f)| {
            let loc = if i + 1 == self.len { LineLocation::default() } else { f.loc };
            (&f.func, loc)
        })
    }
    /// The frames, the leaf's location (0, 0).
    pub fn to_vec(&self) -> Vec<ContextFrame> {
        let leaf = self.len.saturating_sub(1);
        (self.frames[..self.len].iter().enumerate())
            .map(|(i, f)| ContextFrame {
                func: f.func.clone(),
                loc: if i == leaf { LineLocation::default() } else { f.loc },
            })
            .collect()
    }
    /// The context of the leaf's caller (the leaf dropped, the caller's call site becoming the
    /// new leaf), sharing this context's frames; `None` for a base or empty context.
    pub fn parent(&self) -> Option<Context> {
        (self.len > 1).then(|| self.prefix(self.len - 1))
    }
    /// The outermost `len` frames (at most all), sharing this context's frames.
    pub fn prefix(&self, len: usize) -> Context {
        Context { frames: self.frames.clone(), len: len.min(self.len) }
    }
    /// The innermost `n` frames (all when `n` is larger), as a context of their own.
    pub fn suffix(&self, n: usize) -> Context {
        let mut frames = self.frames[self.len - n.min(self.len)..self.len].to_vec();
        if let Some(leaf) = frames.last_mut() {
            leaf.loc = LineLocation::default();
        }
        Context::new(frames)
    }
    /// Whether `prefix` was made from this context's frames ([`Context::prefix`], or this one from
    /// its): then it is this context or one of its callers' without comparing frames.
    pub fn extends(&self, prefix: &Context) -> bool {
        Arc::ptr_eq(&self.frames, &prefix.frames) && prefix.len <= self.len
    }
    /// Same buffer and length: equal without comparing frames.
    fn same(&self, other: &Context) -> bool {
        Arc::ptr_eq(&self.frames, &other.frames) && self.len == other.len
    }
}

impl PartialEq for Context {
    fn eq(&self, other: &Self) -> bool {
        self.same(other) || (self.len == other.len && self.named_frames().eq(other.named_frames()))
    }
}

impl Eq for Context {}

impl Ord for Context {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.frames, &other.frames) {
            // One is a prefix of the other: the shorter one is smaller (its leaf location (0, 0)
            // is at most the call site the longer one has there).
            return self.len.cmp(&other.len);
        }
        self.named_frames().cmp(other.named_frames())
    }
}

impl PartialOrd for Context {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::hash::Hash for Context {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.len);
        for f in self.named_frames() {
            f.hash(state);
        }
    }
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.frames()).finish()
    }
}

/// `ContextAttributeMask` bits written as `!Attributes:`.
pub mod attr {
    pub const WAS_INLINED: u32 = 1;
    pub const SHOULD_BE_INLINED: u32 = 2;
    pub const DUPLICATED_INTO_BASE: u32 = 4;
}

/// `FunctionSamples`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionSamples {
    /// Function name (the leaf function for CS profiles).
    pub name: String,
    pub total_samples: u64,
    pub head_samples: u64,
    pub body: BTreeMap<LineLocation, BodySample>,
    /// Inlinee profiles by call-site location, then callee name.
    pub callsites: BTreeMap<LineLocation, BTreeMap<String, FunctionSamples>>,
    /// `!CFGChecksum` of probe-based profiles.
    pub checksum: Option<u64>,
    /// `!Attributes` ([`attr`] bits).
    pub attributes: u32,
}

impl FunctionSamples {
    pub fn new(name: &str) -> Self {
        FunctionSamples { name: name.to_string(), ..Default::default() }
    }

    pub fn add_total(&mut self, n: u64) {
        self.total_samples = self.total_samples.saturating_add(n);
    }
    pub fn add_head(&mut self, n: u64) {
        self.head_samples = self.head_samples.saturating_add(n);
    }
    pub fn add_body(&mut self, loc: LineLocation, n: u64) {
        let b = self.body.entry(loc).or_default();
        b.count = b.count.saturating_add(n);
    }
    /// Raises the body count at `loc` to at least `n` (line-based profiles keep the max over the
    /// instructions of a line).
    pub fn max_body(&mut self, loc: LineLocation, n: u64) {
        let b = self.body.entry(loc).or_default();
        b.count = b.count.max(n);
    }
    pub fn add_call_target(&mut self, loc: LineLocation, callee: &str, n: u64) {
        self.body.entry(loc).or_default().call_targets.add(callee, n);
    }
    /// The nested profile of `callee` inlined at `loc`, created empty if absent.
    pub fn callsite_mut(&mut self, loc: LineLocation, callee: &str) -> &mut FunctionSamples {
        self.callsites
            .entry(loc)
            .or_default()
            .entry(callee.to_string())
            .or_insert_with(|| FunctionSamples::new(callee))
    }

    /// `FunctionSamples::merge`: adds `other`'s counts into `self` (same function).
    pub fn merge(&mut self, other: &FunctionSamples) {
        self.add_total(other.total_samples);
        self.add_head(other.head_samples);
        for (loc, b) in &other.body {
            self.add_body(*loc, b.count);
            for (t, n) in &b.call_targets {
                self.add_call_target(*loc, t, *n);
            }
        }
        for (loc, callees) in &other.callsites {
            for (name, fs) in callees {
                self.callsite_mut(*loc, name).merge(fs);
            }
        }
        if self.checksum.is_none() {
            self.checksum = other.checksum;
        }
        self.attributes |= other.attributes;
    }
}

/// Whole-profile flags that the formats record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProfileKind {
    /// Flat context-sensitive profile: keys are full contexts (`[a:1 @ b]`).
    pub context_sensitive: bool,
    pub probe_based: bool,
    /// The CS pre-inliner ran (ShouldBeInlined attributes are decisions).
    pub preinlined: bool,
    /// Flow-sensitive discriminators.
    pub fs_discriminator: bool,
}

/// A complete sample profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    pub kind: ProfileKind,
    /// Top-level profiles by context (a one-frame context for non-CS profiles).
    pub functions: BTreeMap<Context, FunctionSamples>,
    /// Names for the extbinary profile symbol list (`--populate-profile-symbol-list`).
    pub symbol_list: Option<Vec<String>>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    fn frames(spec: &[(&str, u32)]) -> Vec<ContextFrame> {
        spec.iter()
            .map(|&(f, l)| ContextFrame { func: f.into(), loc: LineLocation::new(l, 0) })
            .collect()
    }

    /// The frames as LLVM compares them: the leaf's location is (0, 0).
    fn logical(c: &Context) -> Vec<(String, LineLocation)> {
        c.frames().map(|(f, l)| (f.to_string(), l)).collect()
    }

    #[test]
    fn callers_contexts_share_frames_and_compare_as_their_frames() {
        let deep = Context::new(frames(&[("main", 1), ("a", 2), ("b", 0), ("c", 7)]));
        let parent = deep.parent().unwrap();
        assert!(deep.extends(&parent) && !parent.extends(&deep));
        assert_eq!(
            logical(&parent),
            [
                ("main".into(), LineLocation::new(1, 0)),
                ("a".into(), LineLocation::new(2, 0)),
                ("b".into(), LineLocation::default())
            ]
        );
        // The same context made on its own frames is equal, with the same hash.
        let own = Context::new(frames(&[("main", 1), ("a", 2), ("b", 0)]));
        assert_eq!(parent, own);
        let hasher = std::collections::hash_map::RandomState::new();
        assert_eq!(hasher.hash_one(&parent), hasher.hash_one(&own));
        // Order: as the frame lists, whether the buffers are shared or not.
        let others = [
            Context::new(frames(&[("main", 1), ("a", 2)])),
            Context::new(frames(&[("main", 1), ("a", 3), ("b", 0)])),
            Context::new(frames(&[("main", 0)])),
            Context::new(frames(&[("main", 1), ("a", 2), ("b", 0), ("c", 0)])),
            Context::base("b"),
        ];
        let mut all: Vec<Context> = others.to_vec();
        all.extend([deep.clone(), parent.clone(), parent.parent().unwrap(), deep.prefix(1)]);
        for x in &all {
            for y in &all {
                assert_eq!(x.cmp(y), logical(x).cmp(&logical(y)), "{x:?} {y:?}");
                assert_eq!(x == y, logical(x) == logical(y), "{x:?} {y:?}");
            }
        }
        assert_eq!(deep.suffix(2), Context::new(frames(&[("b", 0), ("c", 0)])));
        assert_eq!(deep.suffix(9), deep);
    }
}
