//! LLVM's sample profile data model (`SampleProf.h`): function profiles with body samples,
//! call targets and nested inlinee profiles, keyed by name or by calling context.

use crate::llvm::{ContextFrame, FuncName, LineLocation};
use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The samples of one source location: its count and the functions called from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BodySample {
    pub count: u64,
    pub call_targets: CallTargets,
}

/// The functions called from a source location, by name, with their counts. Most locations
/// call nothing: the empty map is one null word, so a body sample takes 16 bytes, not 32
/// (the body samples are the bulk of a CS profile's memory). Most that call have one target,
/// held in that one allocation (a map would add its vector: 39k allocations on SQLite).
/// Names are shared [`FuncName`]s: profiles built from one binary share each callee's text, so
/// merges of their call targets (the pre-inliner's walk) compare pointers rather than reading
/// the texts.
#[derive(Clone, Default)]
pub struct CallTargets(Option<Box<Targets>>);

/// Call targets, at least one: one, or a map of any number (made a map by a second target;
/// a removal does not turn it back, and equality reads the entries, not the form).
#[derive(Clone)]
enum Targets {
    One((FuncName, u64)),
    Many(VecMap<FuncName, u64>),
}

impl Targets {
    fn entries(&self) -> &[(FuncName, u64)] {
        match self {
            Targets::One(one) => std::slice::from_ref(one),
            Targets::Many(map) => &map.0,
        }
    }
    /// The targets as a map; one target becomes its first entry, with room for a second.
    fn map(&mut self) -> &mut VecMap<FuncName, u64> {
        let map = match std::mem::replace(self, Targets::Many(VecMap::default())) {
            Targets::One(one) => {
                let mut entries = Vec::with_capacity(2);
                entries.push(one);
                VecMap(entries)
            }
            Targets::Many(map) => map,
        };
        *self = Targets::Many(map);
        match self {
            Targets::Many(map) => map,
            Targets::One(_) => unreachable!("made a map above"),
        }
    }
}

impl CallTargets {
    fn entries(&self) -> &[(FuncName, u64)] {
        self.0.as_deref().map_or(&[], Targets::entries)
    }
    pub fn get(&self, callee: &str) -> Option<&u64> {
        match self.0.as_deref()? {
            Targets::One((name, n)) => (name.as_str() == callee).then_some(n),
            Targets::Many(map) => map.get(callee),
        }
    }
    /// The count of `callee`, inserted as 0 if absent.
    pub fn get_or_insert(&mut self, callee: &FuncName) -> &mut u64 {
        let targets =
            &mut **self.0.get_or_insert_with(|| Box::new(Targets::One((callee.clone(), 0))));
        if let Targets::One((name, _)) = targets
            && name != callee
        {
            targets.map();
        }
        match targets {
            Targets::One((_, n)) => n,
            Targets::Many(map) => map.get_or_insert_with(callee, || callee.clone()),
        }
    }
    pub fn remove(&mut self, callee: &str) -> Option<u64> {
        let (n, emptied) = match self.0.as_deref_mut()? {
            Targets::One((name, n)) => {
                let found = name.as_str() == callee;
                (found.then_some(*n), found)
            }
            Targets::Many(map) => {
                let n = map.remove(callee);
                (n, map.is_empty())
            }
        };
        if emptied {
            self.0 = None;
        }
        n
    }
    /// Adds `other`'s counts (see [`VecMap::merge_from`]). Inline: most body lines have no
    /// call targets, and profile merges ask once per line.
    #[inline]
    pub fn merge(&mut self, other: &CallTargets) {
        if let Some(theirs) = other.0.as_deref() {
            self.merge_targets(theirs);
        }
    }
    fn merge_targets(&mut self, theirs: &Targets) {
        let Some(mine) = self.0.as_deref_mut() else {
            self.0 = Some(Box::new(theirs.clone()));
            return;
        };
        match (mine, theirs) {
            (Targets::One((m, n)), Targets::One((k, w))) if m == k => *n = n.saturating_add(*w),
            (mine, theirs) => mine
                .map()
                .merge_from(theirs.entries(), FuncName::clone, |n, m| *n = n.saturating_add(*m)),
        }
    }
    pub fn len(&self) -> usize {
        self.entries().len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
    /// Entries in name order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&FuncName, &u64)> + ExactSizeIterator {
        self.entries().iter().map(|(k, v)| (k, v))
    }
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &FuncName> + ExactSizeIterator {
        self.entries().iter().map(|(k, _)| k)
    }
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &u64> + ExactSizeIterator {
        self.entries().iter().map(|(_, v)| v)
    }
}

impl fmt::Debug for CallTargets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl std::ops::Index<&str> for CallTargets {
    type Output = u64;
    fn index(&self, callee: &str) -> &u64 {
        self.get(callee).expect("a call target of this name")
    }
}

impl PartialEq for CallTargets {
    fn eq(&self, other: &Self) -> bool {
        self.entries() == other.entries()
    }
}

impl Eq for CallTargets {}

impl FromIterator<(FuncName, u64)> for CallTargets {
    fn from_iter<I: IntoIterator<Item = (FuncName, u64)>>(iter: I) -> Self {
        let mut map: VecMap<FuncName, u64> = iter.into_iter().collect();
        CallTargets(match map.len() {
            0 => None,
            1 => map.0.pop().map(|one| Box::new(Targets::One(one))),
            _ => Some(Box::new(Targets::Many(map))),
        })
    }
}

impl<'a> IntoIterator for &'a CallTargets {
    type Item = (&'a FuncName, &'a u64);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (FuncName, u64)>,
        fn(&'a (FuncName, u64)) -> (&'a FuncName, &'a u64),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.entries().iter().map(|(k, v)| (k, v))
    }
}

/// A map built once and read in key order: a vector of entries sorted by key. Profiles hold
/// one per source location (call targets) and one per context (body samples), mostly small,
/// where a B-tree would allocate a whole node for a handful of entries.
#[derive(Clone, PartialEq, Eq)]
pub struct VecMap<K, V>(Vec<(K, V)>);

impl<K, V> Default for VecMap<K, V> {
    fn default() -> Self {
        VecMap(Vec::new())
    }
}

impl<K: fmt::Debug, V: fmt::Debug> fmt::Debug for VecMap<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Ord, V> VecMap<K, V> {
    fn find<Q: Ord + ?Sized>(&self, key: &Q) -> Result<usize, usize>
    where
        K: Borrow<Q>,
    {
        // Entries mostly arrive in key order: check the end first.
        match self.0.last() {
            Some((last, _)) if last.borrow() < key => Err(self.0.len()),
            _ => self.0.binary_search_by(|(k, _)| k.borrow().cmp(key)),
        }
    }
    pub fn get<Q: Ord + ?Sized>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &self.0[i].1)
    }
    pub fn get_mut<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<&mut V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| &mut self.0[i].1)
    }
    pub fn contains_key<Q: Ord + ?Sized>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
    {
        self.find(key).is_ok()
    }
    /// The value at `key`, inserted as `V::default()` under `make()`'s key if absent.
    pub fn get_or_insert_with<Q: Ord + ?Sized>(
        &mut self,
        key: &Q,
        make: impl FnOnce() -> K,
    ) -> &mut V
    where
        K: Borrow<Q>,
        V: Default,
    {
        let i = match self.find(key) {
            Ok(i) => i,
            Err(i) => {
                // Growth by a quarter: most maps stay small, and the slack of large ones is
                // bounded while inserts stay amortized O(1) in copies.
                if self.0.len() == self.0.capacity() {
                    self.0.reserve_exact((self.0.len() / 4).max(1));
                }
                self.0.insert(i, (make(), V::default()));
                i
            }
        };
        &mut self.0[i].1
    }
    /// [`Self::get_or_insert_with`], looking at index `hint` first: one compare instead of a
    /// search when the caller knows where the key mostly is.
    pub fn get_or_insert_near<Q: Ord + ?Sized>(
        &mut self,
        hint: usize,
        key: &Q,
        make: impl FnOnce() -> K,
    ) -> &mut V
    where
        K: Borrow<Q>,
        V: Default,
    {
        if self.0.get(hint).is_some_and(|(k, _)| k.borrow() == key) {
            return &mut self.0[hint].1;
        }
        self.get_or_insert_with(key, make)
    }
    /// Inserts or replaces; returns the value replaced.
    pub fn insert(&mut self, key: K, value: V) -> Option<V> {
        match self.find(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (key, value));
                None
            }
        }
    }
    pub fn remove<Q: Ord + ?Sized>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
    {
        self.find(key).ok().map(|i| self.0.remove(i).1)
    }
    /// Merges `other`'s entries (in key order, as a map's) in, key by key: `add(mine, theirs)` on
    /// the value at each of `other`'s keys, inserted as `V::default()` under `key(theirs)` where
    /// absent. Adds in place while every key is present (mostly all are: a context's lines are
    /// mostly in the profile it merges into); from the first new key on, one walk over both maps
    /// (inserting entry by entry shifts the tail once per new key).
    pub fn merge_from<W>(
        &mut self,
        other: &[(K, W)],
        key: impl Fn(&K) -> K,
        mut add: impl FnMut(&mut V, &W),
    ) where
        V: Default,
    {
        // Mostly both hold the same keys: add pairwise while they match, one compare an entry.
        let mut i = 0;
        for ((m, v), (k, w)) in self.0.iter_mut().zip(other) {
            if *m != *k {
                break;
            }
            add(v, w);
            i += 1;
        }
        let mut rest = other[i..].iter();
        let first_new = 'keys: loop {
            let Some(e) = rest.next() else { return };
            let (k, w) = e;
            // `<` then `==`, not one `cmp`: a three-way result made of a word compare (line
            // locations) took three more instructions per key to branch on.
            while let Some((m, v)) = self.0.get_mut(i) {
                if *m < *k {
                    i += 1;
                } else if *m == *k {
                    add(v, w);
                    i += 1;
                    continue 'keys;
                } else {
                    break;
                }
            }
            break e;
        };
        self.merge_new_keys(i, first_new, rest, key, add);
    }
    /// [`Self::merge_from`] from `other`'s first key absent here (`first_new`, met at index
    /// `i` of mine), followed by `rest`. A walk forward adds to the keys present and counts the
    /// new ones; then from the end, each run of mine past the next new key moves as one block
    /// to its final place, and the key's entry is made below it: in place when the vector has
    /// room, else into a new one of the merged size, mine before the first new key copied
    /// there as one block. Rebuilt entry by entry, every merge copied all of mine one at a
    /// time; grown in place (a realloc), the growth copied them before the moves. Out of line:
    /// few merges have new keys (3k of 65k on SQLite's pre-inliner), and inlined, it gave
    /// every merge a larger stack frame to set up.
    #[cold]
    #[inline(never)]
    fn merge_new_keys<'o, W: 'o>(
        &mut self,
        i: usize,
        first_new: &'o (K, W),
        rest: std::slice::Iter<'o, (K, W)>,
        key: impl Fn(&K) -> K,
        mut add: impl FnMut(&mut V, &W),
    ) where
        V: Default,
    {
        let len = self.0.len();
        let (mut j, mut new) = (i, 1);
        for (k, w) in rest.clone() {
            while j < len && self.0[j].0 < *k {
                j += 1;
            }
            match self.0.get_mut(j) {
                Some((m, v)) if *m == *k => add(v, w),
                _ => new += 1,
            }
        }
        let mut fresh = Vec::new();
        if self.0.capacity() - len < new {
            fresh.reserve_exact(len + new);
        }
        let from = self.0.as_mut_ptr();
        let to = if fresh.capacity() > 0 { fresh.as_mut_ptr() } else { from };
        // SAFETY: mine from `i` on are moved with raw copies, from `from` to `to` (the same
        // vector, or a new one of room for `len + new`): each of mine in `i..len` is copied
        // once, to a place in `i..len + new` of `to` not yet written (or to itself), the new
        // keys' entries fill the places left, and in a new vector mine before `i` are copied to
        // theirs, so that all of `to`'s `0..len + new` hold one entry each at the end. Until
        // then mine's length is `i` and the new vector's 0: a panic in `key` or `add` leaks the
        // entries past `i`, never drops one twice.
        unsafe {
            self.0.set_len(i);
            // Mine still to move are `i..r` (those in `s..r` greater than the key at hand),
            // the places of `to` from `w` on are final: `w - r` new keys are still to place.
            let (mut r, mut s, mut w) = (len, len, len + new);
            for (k, theirs) in std::iter::once(first_new).chain(rest).rev() {
                while s > i && (*from.add(s - 1)).0 > *k {
                    s -= 1;
                }
                if s > i && (*from.add(s - 1)).0 == *k {
                    // Present: added to above, and moved with the run it is in.
                    s -= 1;
                    continue;
                }
                // A new key past those counted would write over mine not moved yet: a
                // broken key order (mine or theirs) panics here, with the entries leaked.
                assert!(w > r, "VecMap keys out of order: more new keys than counted");
                std::ptr::copy(from.add(s), to.add(w - (r - s)), r - s);
                w -= r - s + 1;
                r = s;
                to.add(w).write((key(k), V::default()));
                add(&mut (*to.add(w)).1, theirs);
                if w == r {
                    // The rest of theirs are present, and mine before here in place.
                    break;
                }
            }
            assert_eq!(w, r, "VecMap keys out of order: fewer new keys than counted");
            if to == from {
                self.0.set_len(len + new);
            } else {
                std::ptr::copy_nonoverlapping(from, to, r);
                self.0.set_len(0);
                fresh.set_len(len + new);
                self.0 = fresh;
            }
        }
    }
    /// Gives each of `other`'s keys an entry, `V::default()` where absent; present values stay;
    /// with room for `room` more entries after them (the caller's inserts to come: one
    /// allocation, not a growth). In place: the absent keys' entries are appended, then mine
    /// are moved back to their places from the end (a new vector and the old one's free
    /// cost an allocator call more).
    pub fn ensure_keys<W>(&mut self, other: &VecMap<K, W>, room: usize)
    where
        K: Clone,
        V: Default,
    {
        let present = self.0.iter().filter(|(m, _)| other.find(m).is_ok()).count();
        let absent = other.len() - present;
        self.0.reserve_exact(absent + room);
        if absent == 0 {
            return;
        }
        let mut mine = self.0.len();
        if mine == 0 {
            self.0.extend(other.0.iter().map(|(k, _)| (k.clone(), V::default())));
            return;
        }
        // Placeholders at the end: the holes are [mine, to). From the end, the greater of
        // mine's last unmoved entry and theirs' last unplaced key fills the last hole (a key of
        // theirs equal to mine's is present: passed). While holes remain, theirs has keys left.
        self.0.extend(other.0[..absent].iter().map(|(k, _)| (k.clone(), V::default())));
        let (mut to, mut theirs) = (self.0.len(), other.len());
        while mine < to {
            to -= 1;
            let k = &other.0[theirs - 1].0;
            let m = mine.checked_sub(1).map(|i| &self.0[i].0);
            if m.is_some_and(|m| m >= k) {
                if m == Some(k) {
                    theirs -= 1;
                }
                mine -= 1;
                self.0.swap(mine, to);
            } else {
                theirs -= 1;
                self.0[to] = (k.clone(), V::default());
            }
        }
    }
    /// The first entry whose key is greater than `after` (the first of all with `None`).
    pub fn first_after(&self, after: Option<&K>) -> Option<(&K, &V)> {
        let i = after.map_or(0, |key| self.0.partition_point(|(k, _)| k <= key));
        self.0.get(i).map(|(k, v)| (k, v))
    }
}

impl<K, V> VecMap<K, V> {
    pub fn with_capacity(n: usize) -> Self {
        VecMap(Vec::with_capacity(n))
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn clear(&mut self) {
        self.0.clear();
    }
    /// Entries in key order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&K, &V)> + ExactSizeIterator + '_ {
        self.0.iter().map(|(k, v)| (k, v))
    }
    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &K> + ExactSizeIterator + '_ {
        self.0.iter().map(|(k, _)| k)
    }
    pub fn values(&self) -> impl DoubleEndedIterator<Item = &V> + ExactSizeIterator + '_ {
        self.0.iter().map(|(_, v)| v)
    }
    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut V> + ExactSizeIterator + '_ {
        self.0.iter_mut().map(|(_, v)| v)
    }
}

impl<K: Ord + Borrow<Q>, Q: Ord + ?Sized, V> std::ops::Index<&Q> for VecMap<K, V> {
    type Output = V;
    fn index(&self, key: &Q) -> &V {
        self.get(key).expect("an entry at this key")
    }
}

impl<K: Ord, V> FromIterator<(K, V)> for VecMap<K, V> {
    /// A repeated key keeps its last value, as a map's would.
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut entries: Vec<(K, V)> = iter.into_iter().collect();
        entries.reverse();
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        entries.dedup_by(|later, first| later.0 == first.0);
        entries.shrink_to_fit();
        VecMap(entries)
    }
}

impl<'a, K, V> IntoIterator for &'a VecMap<K, V> {
    type Item = (&'a K, &'a V);
    type IntoIter = std::iter::Map<std::slice::Iter<'a, (K, V)>, fn(&'a (K, V)) -> (&'a K, &'a V)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
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
    /// [`Context::new`] from an iterator of frames, collected straight into the shared slice.
    pub fn from_frames(frames: impl Iterator<Item = ContextFrame>) -> Self {
        let frames: Arc<[ContextFrame]> = frames.collect();
        Context { len: frames.len(), frames }
    }
    pub fn base(func: impl Into<FuncName>) -> Self {
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
        self.leaf()
    }
    /// The leaf's function, its shared name.
    pub fn leaf(&self) -> &FuncName {
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
        self.named_frames().map(|(func, loc)| ContextFrame { func: func.clone(), loc }).collect()
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
        // [`Context::named_frames`] compared in order, by hand: sorting the profiles compares
        // contexts along their shared roots millions of times.
        let (a, b) = (&self.frames[..self.len], &other.frames[..other.len]);
        let loc_at = |frames: &[ContextFrame], i: usize| {
            if i + 1 == frames.len() { LineLocation::default() } else { frames[i].loc }
        };
        for i in 0..a.len().min(b.len()) {
            let by_frame = a[i].func.cmp(&b[i].func).then_with(|| loc_at(a, i).cmp(&loc_at(b, i)));
            if by_frame.is_ne() {
                return by_frame;
            }
        }
        a.len().cmp(&b.len())
    }
}

impl PartialOrd for Context {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// By the names' [`FuncName::text_hash`], as [`ContextFrame`]'s: hashing a context reads no name
/// text.
impl std::hash::Hash for Context {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_usize(self.len);
        for (func, loc) in self.named_frames() {
            state.write_u64(func.text_hash());
            loc.hash(state);
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
    /// Function name (the leaf function for CS profiles), shared: the profiles of a function
    /// share its context frames' text, so a profile allocates no name of its own, and the
    /// name the pre-inliner's call-graph edges look up is one text many profiles read (mostly
    /// cached), not a cold allocation per profile.
    pub name: FuncName,
    pub total_samples: u64,
    pub head_samples: u64,
    pub body: VecMap<LineLocation, BodySample>,
    /// Inlinee profiles by call-site location, then callee name (the inlinee's own `name`'s
    /// text, shared).
    pub callsites: BTreeMap<LineLocation, BTreeMap<FuncName, FunctionSamples>>,
    /// `!CFGChecksum` of probe-based profiles.
    pub checksum: Option<u64>,
    /// `!Attributes` ([`attr`] bits).
    pub attributes: u32,
}

impl FunctionSamples {
    pub fn new(name: impl Into<FuncName>) -> Self {
        FunctionSamples { name: name.into(), ..Default::default() }
    }

    pub fn add_total(&mut self, n: u64) {
        self.total_samples = self.total_samples.saturating_add(n);
    }
    pub fn add_head(&mut self, n: u64) {
        self.head_samples = self.head_samples.saturating_add(n);
    }
    /// The body sample at `loc`, created empty if absent.
    pub fn body_mut(&mut self, loc: LineLocation) -> &mut BodySample {
        self.body.get_or_insert_with(&loc, || loc)
    }
    /// A body sample at each of `locs`, with count 0 where absent, and room for `room` more.
    pub fn ensure_bodies(&mut self, locs: &VecMap<LineLocation, ()>, room: usize) {
        self.body.ensure_keys(locs, room);
    }
    pub fn add_body(&mut self, loc: LineLocation, n: u64) {
        let b = self.body_mut(loc);
        b.count = b.count.saturating_add(n);
    }
    /// [`Self::add_body`] where the body likely holds `loc` at index `hint`.
    pub fn add_body_near(&mut self, hint: usize, loc: LineLocation, n: u64) {
        let b = self.body.get_or_insert_near(hint, &loc, || loc);
        b.count = b.count.saturating_add(n);
    }
    /// Raises the body count at `loc` to at least `n` (line-based profiles keep the max over the
    /// instructions of a line).
    pub fn max_body(&mut self, loc: LineLocation, n: u64) {
        let b = self.body_mut(loc);
        b.count = b.count.max(n);
    }
    pub fn add_call_target(&mut self, loc: LineLocation, callee: &FuncName, n: u64) {
        let t = self.body_mut(loc).call_targets.get_or_insert(callee);
        *t = t.saturating_add(n);
    }
    /// The nested profile of `callee` inlined at `loc`, created empty if absent.
    pub fn callsite_mut(&mut self, loc: LineLocation, callee: &str) -> &mut FunctionSamples {
        self.callsite_by(loc, callee, || callee.into())
    }

    /// [`Self::callsite_mut`] of a shared name, found by it (a name sharing a key's text equals
    /// it without reading the text) and sharing its text: a binary profile names a function by
    /// index, and one long name in a million inlinees was read (or copied) once per inlinee.
    pub fn shared_callsite_mut(
        &mut self,
        loc: LineLocation,
        callee: &FuncName,
    ) -> &mut FunctionSamples {
        self.callsite_by(loc, callee, || callee.clone())
    }

    fn callsite_by<Q>(
        &mut self,
        loc: LineLocation,
        callee: &Q,
        name: impl FnOnce() -> FuncName,
    ) -> &mut FunctionSamples
    where
        FuncName: std::borrow::Borrow<Q>,
        Q: Ord + ?Sized,
    {
        let callees = self.callsites.entry(loc).or_default();
        if !callees.contains_key(callee) {
            let name = name();
            return callees.entry(name.clone()).or_insert_with(|| FunctionSamples::new(name));
        }
        callees.get_mut(callee).expect("present")
    }

    /// Adds `other`'s body counts and call targets into `self`'s.
    pub fn merge_body(&mut self, other: &FunctionSamples) {
        self.body.merge_from(
            &other.body.0,
            |loc| *loc,
            |to, from| {
                to.count = to.count.saturating_add(from.count);
                to.call_targets.merge(&from.call_targets);
            },
        );
    }

    /// `FunctionSamples::merge`: adds `other`'s counts into `self` (same function).
    pub fn merge(&mut self, other: &FunctionSamples) {
        self.add_total(other.total_samples);
        self.add_head(other.head_samples);
        self.merge_body(other);
        for (loc, callees) in &other.callsites {
            for (name, fs) in callees {
                self.shared_callsite_mut(*loc, name).merge(fs);
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

    /// Entries stay in key order whatever the insertion order; a repeated key collected keeps
    /// its last value, as a `BTreeMap` would.
    #[test]
    fn vec_map_keeps_key_order_like_a_btree_map() {
        let mut m: VecMap<String, u64> = VecMap::default();
        for (name, n) in [("m", 1), ("b", 2), ("z", 3), ("b", 4), ("a", 5)] {
            *m.get_or_insert_with(name, || name.to_string()) += n;
        }
        let got: Vec<(&str, u64)> = m.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(got, [("a", 5), ("b", 6), ("m", 1), ("z", 3)]);
        assert_eq!(m.remove("m"), Some(1));
        assert_eq!((m.len(), m["z"], m.get("m")), (3, 3, None));
        let collected: VecMap<u32, u32> = [(3, 1), (1, 2), (3, 4)].into_iter().collect();
        assert_eq!(collected.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>(), [(1, 2), (3, 4)]);
        // A hint is only a first look: right, wrong, past the end or absent key, the same map.
        let mut near = collected;
        for (hint, key) in [(1, 3), (0, 3), (1, 1), (9, 1), (usize::MAX, 2), (0, 0)] {
            *near.get_or_insert_near(hint, &key, || key) += 10;
        }
        let got: Vec<(u32, u32)> = near.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(got, [(0, 10), (1, 22), (2, 10), (3, 24)]);
    }

    /// Call targets keep name order; removing the last one leaves the empty (null) map, equal
    /// to a fresh one.
    #[test]
    fn call_targets_are_a_map_that_is_null_when_empty() {
        assert_eq!(std::mem::size_of::<BodySample>(), 16);
        let mut t = CallTargets::default();
        for (name, n) in [("m", 1), ("b", 2), ("m", 3)] {
            *t.get_or_insert(&name.into()) += n;
        }
        let got: Vec<(&str, u64)> = t.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!((got, t.len(), t["m"]), (vec![("b", 2), ("m", 4)], 2, 4));
        assert_eq!((t.remove("b"), t.remove("x"), t.remove("m")), (Some(2), None, Some(4)));
        assert!(t.is_empty() && t == CallTargets::default() && t.get("m").is_none());
        let collected: CallTargets = [("z".into(), 1), ("a".into(), 2)].into_iter().collect();
        assert_eq!(collected.keys().collect::<Vec<_>>(), ["a", "z"]);
        assert!(std::iter::empty().collect::<CallTargets>().is_empty());
    }

    /// One target is held apart from a map's vector: the forms are equal when their entries
    /// are, and inserts, merges and removals across them give what a map's would.
    #[test]
    fn call_targets_of_one_and_of_a_map_agree() {
        let of =
            |e: &[(&str, u64)]| -> CallTargets { e.iter().map(|&(k, n)| (k.into(), n)).collect() };
        let entries = |t: &CallTargets| -> Vec<(String, u64)> {
            t.iter().map(|(k, n)| (k.to_string(), *n)).collect()
        };
        let mut map = of(&[("f", 1), ("g", 2)]);
        assert_eq!(map.remove("g"), Some(2));
        assert_eq!((&map, map.len(), map.get("f")), (&of(&[("f", 1)]), 1, Some(&1)));
        let mut one = of(&[("f", 1)]);
        for (theirs, want) in [
            (of(&[("f", 2)]), vec![("f", 3)]),
            (map.clone(), vec![("f", 4)]),
            (of(&[("a", 5)]), vec![("a", 5), ("f", 4)]),
            (of(&[("a", 1), ("z", 1)]), vec![("a", 6), ("f", 4), ("z", 1)]),
        ] {
            one.merge(&theirs);
            let want: Vec<(String, u64)> = want.iter().map(|&(k, n)| (k.into(), n)).collect();
            assert_eq!(entries(&one), want);
        }
        map.merge(&of(&[("f", u64::MAX)]));
        assert_eq!(map["f"], u64::MAX);
        let mut fresh = CallTargets::default();
        fresh.merge(&of(&[("b", 1)]));
        *fresh.get_or_insert(&"b".into()) += 1;
        *fresh.get_or_insert(&"a".into()) += 1;
        assert_eq!(entries(&fresh), [("a".to_string(), 1), ("b".to_string(), 2)]);
        assert_eq!(
            (map.remove("x"), map.remove("f"), map.is_empty()),
            (None, Some(u64::MAX), true)
        );
        assert_eq!((one.remove("x"), of(&[("f", 1)]).remove("f")), (None, Some(1)));
    }

    /// A merge adds at shared keys and inserts the others in key order, whether or not any key
    /// is new; its result is what adding entry by entry gives.
    #[test]
    fn vec_map_merge_adds_and_inserts_in_key_order() {
        let map = |e: &[(u32, u64)]| -> VecMap<u32, u64> { e.iter().copied().collect() };
        let entries = |m: &VecMap<u32, u64>| m.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>();
        let mut m = map(&[(2, 1), (5, 1), (9, 1)]);
        m.merge_from(&map(&[(2, 3), (9, 4)]).0, |k| *k, |v, w| *v += w);
        assert_eq!(entries(&m), [(2, 4), (5, 1), (9, 5)]);
        m.merge_from(&map(&[(1, 1), (5, 2), (7, 3), (12, 6)]).0, |k| *k, |v, w| *v += w);
        assert_eq!(entries(&m), [(1, 1), (2, 4), (5, 3), (7, 3), (9, 5), (12, 6)]);
        let mut empty = VecMap::default();
        empty.merge_from(&m.0, |k| *k, |v: &mut u64, w| *v += w);
        assert_eq!(entries(&empty), entries(&m));
        // New keys first, after present ones, last, or none, against a B-tree.
        let mut big = map(&(0..300).map(|k| (k * 3, 1)).collect::<Vec<_>>());
        let mut model: std::collections::BTreeMap<u32, u64> =
            big.iter().map(|(k, v)| (*k, *v)).collect();
        for keys in [vec![0, 1, 2, 3, 897], vec![6, 7, 500, 501, 502, 901], vec![3, 96, 384, 897]] {
            let other = map(&keys.iter().map(|&k| (k, u64::from(k) + 1)).collect::<Vec<_>>());
            big.merge_from(&other.0, |k| *k, |v, w| *v += w);
            for k in keys {
                *model.entry(k).or_default() += u64::from(k) + 1;
            }
            assert_eq!(entries(&big), model.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
        }
    }

    /// A merge with new keys into a map with room for them moves its entries in place (without
    /// room, into a new vector): the same entries either way.
    #[test]
    fn vec_map_merge_with_new_keys_in_place_keeps_key_order() {
        let other: Vec<(u32, u64)> = vec![(0, 1), (4, 2), (5, 3), (8, 4), (9, 5), (20, 6)];
        for room in [0, 6, 20] {
            let mut m = VecMap::with_capacity(4 + room);
            for k in [4, 6, 8, 10] {
                *m.get_or_insert_with(&k, || k) += 10;
            }
            let before = m.0.as_ptr();
            m.merge_from(&other, |k| *k, |v, w| *v += w);
            let got: Vec<(u32, u64)> = m.iter().map(|(k, v)| (*k, *v)).collect();
            let want = [(0, 1), (4, 12), (5, 3), (6, 10), (8, 14), (9, 5), (10, 10), (20, 6)];
            assert_eq!(got, want, "room {room}");
            assert_eq!(m.0.as_ptr() == before, room >= 4, "in place with room {room}");
        }
    }

    /// A map whose keys are out of order (a broken invariant) makes the in-place merge count
    /// new keys one way and place them another: it panics, leaking entries, rather than write
    /// over entries not moved yet or leave places unwritten.
    #[test]
    #[should_panic(expected = "VecMap keys out of order")]
    fn vec_map_merge_into_keys_out_of_order_panics_rather_than_corrupts() {
        let mut m = VecMap(vec![(1u32, String::from("a")), (3, "b".into()), (2, "c".into())]);
        m.merge_from(&[(0u32, 1u8), (2, 2)], |k| *k, |v, _| v.push('+'));
    }

    /// Ensuring keys inserts default values at the absent ones only, in key order, wherever they
    /// fall among the present ones; a map with all the keys is unchanged.
    #[test]
    fn vec_map_ensure_keys_inserts_defaults_at_absent_keys() {
        let map = |e: &[(u32, u64)]| -> VecMap<u32, u64> { e.iter().copied().collect() };
        let keys = |k: &[u32]| -> VecMap<u32, ()> { k.iter().map(|&k| (k, ())).collect() };
        let entries = |m: &VecMap<u32, u64>| m.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>();
        let mut m = map(&[(3, 1), (7, 2), (20, 3)]);
        m.ensure_keys(&keys(&[1, 3, 5, 6, 7, 9, 30]), 2);
        assert!(m.0.capacity() >= 10);
        let want = [(1, 0), (3, 1), (5, 0), (6, 0), (7, 2), (9, 0), (20, 3), (30, 0)];
        assert_eq!(entries(&m), want);
        m.ensure_keys(&keys(&[1, 20, 30]), 0);
        assert_eq!(entries(&m), want);
        let mut empty = VecMap::default();
        empty.ensure_keys(&keys(&[4, 8]), 1);
        assert!(empty.0.capacity() >= 3);
        assert_eq!(entries(&empty), [(4, 0), (8, 0)]);
        empty.ensure_keys(&keys(&[]), 0);
        assert_eq!(entries(&empty), [(4, 0), (8, 0)]);
        // Against a B-tree, with mine before, among and after theirs.
        let mut big = map(&(0..50).map(|k| (k * 7, u64::from(k) + 1)).collect::<Vec<_>>());
        let mut model: std::collections::BTreeMap<u32, u64> =
            big.iter().map(|(k, v)| (*k, *v)).collect();
        for ks in [vec![0, 1, 2, 3], (100..140).collect(), vec![343, 344, 400, 1000]] {
            big.ensure_keys(&keys(&ks), 0);
            for k in ks {
                model.entry(k).or_default();
            }
            assert_eq!(entries(&big), model.iter().map(|(k, v)| (*k, *v)).collect::<Vec<_>>());
        }
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
