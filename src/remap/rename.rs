//! Renames: which new function without profile a profiled function the new build lacks became,
//! judged by [`similarity`] (call anchors in order, else line locations, or agreeing probe
//! checksums).
//!
//! Comparing every profiled function the new build lacks with every new function without
//! profile is quadratic, and each comparison aligns two call sequences. Between two builds of a
//! Rust program every mangled name changes its hash: thousands of profiled functions by tens of
//! thousands of new ones (716 s, 1.7 GB on a 132 MiB binary). [`RenameIndex`] indexes the new
//! functions by checksum, by callee and by own line location, and a profiled function is
//! compared only with those that can pass the threshold: to share more than T% of its `n`
//! anchors (an alignment never matches more than the callees both have), a new function must
//! call one of any `n - ceil((T+1)·n/100) + 1` of them, taken rarest first (prefix filtering);
//! the same for location sets (a Jaccard index above T% needs that share of the old set). The
//! filter drops only pairs whose similarity is below the threshold: the renames are those of
//! comparing every pair. [`MAX_COMPARED`] bounds the rest (many new functions calling the same
//! few common callees).

use super::RemapOptions;
use super::matcher;
use crate::binary::anchors::FunctionAnchors;
use crate::llvm::sample_prof::UNKNOWN_INDIRECT_CALLEE;
use crate::llvm::{LineLocation, stable_fn_name};
use crate::profile::FunctionSamples;
use hashbrown::{HashMap, HashSet};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// At most this many new functions are compared with one profiled function: those with the most
/// anchors (or locations) in common.
pub const MAX_COMPARED: usize = 256;

/// Line-location sets smaller than this (on either side) say too little to judge a rename by.
const MIN_LOCATIONS: usize = 5;

/// The callees of statically known calls, in location order, by [`stable_fn_name`].
fn known_callees<'a>(callees: impl Iterator<Item = &'a str>) -> impl Iterator<Item = Cow<'a, str>> {
    callees.filter(|c| *c != UNKNOWN_INDIRECT_CALLEE).map(stable_fn_name)
}

/// The fewest common elements that can give a share above `threshold` percent of `n`.
fn needed(n: usize, threshold: u32) -> usize {
    ((threshold as usize + 1) * n).div_ceil(100)
}

/// The number of common elements of two sorted sequences (multisets).
fn common<T: Ord>(a: &[T], b: &[T]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => (i, j, n) = (i + 1, j + 1, n + 1),
        }
    }
    n
}

/// The new functions without profile, indexed by what [`similarity`] compares.
pub struct RenameIndex<'a> {
    threshold: u32,
    min_anchors: usize,
    by_checksum: HashMap<u64, Vec<usize>>,
    /// A Rust name's [`stable_fn_name`] (when it has hashes) → the functions of that name.
    by_path: HashMap<Cow<'a, str>, Vec<usize>>,
    /// Callee → the functions with at least `min_anchors` known calls that call it (once each).
    by_callee: HashMap<Cow<'a, str>, Vec<usize>>,
    /// Per function: its known callees, sorted.
    callees: Vec<Vec<Cow<'a, str>>>,
    /// Own location → the functions without checksum with at least [`MIN_LOCATIONS`] of them.
    by_location: HashMap<LineLocation, Vec<usize>>,
    /// Per function: its own locations, sorted.
    locations: Vec<Vec<LineLocation>>,
}

impl<'a> RenameIndex<'a> {
    /// Indexes `functions` (the new functions without profile, by name).
    pub fn new(functions: &[(&'a String, &'a FunctionAnchors)], opts: &RemapOptions) -> Self {
        let mut index = RenameIndex {
            threshold: opts.similarity_threshold,
            min_anchors: opts.min_anchors,
            by_checksum: HashMap::new(),
            by_path: HashMap::new(),
            by_callee: HashMap::new(),
            callees: Vec::with_capacity(functions.len()),
            by_location: HashMap::new(),
            locations: Vec::with_capacity(functions.len()),
        };
        for (i, (name, f)) in functions.iter().enumerate() {
            if let path @ Cow::Owned(_) = stable_fn_name(name) {
                index.by_path.entry(path).or_default().push(i);
            }
            if let Some(c) = f.checksum {
                index.by_checksum.entry(c).or_default().push(i);
            }
            let mut callees: Vec<Cow<str>> =
                known_callees(f.locations.values().filter_map(|c| c.as_deref())).collect();
            callees.sort_unstable();
            if callees.len() >= opts.min_anchors {
                let mut distinct = callees.clone();
                distinct.dedup();
                for c in distinct {
                    index.by_callee.entry(c.clone()).or_default().push(i);
                }
            }
            let locations: Vec<LineLocation> =
                f.locations.keys().copied().filter(|l| !l.is_before_start()).collect();
            if f.checksum.is_none() && locations.len() >= MIN_LOCATIONS {
                for l in &locations {
                    index.by_location.entry(*l).or_default().push(i);
                }
            }
            index.callees.push(callees);
            index.locations.push(locations);
        }
        index
    }

    /// The functions (indices, ascending) whose [`similarity`] with a profiled function can be
    /// above the threshold: its probe `checksum`, call `anchors` and `locations` as given to
    /// [`similarity`]. At most [`MAX_COMPARED`] (beyond agreeing checksums), most in common first.
    pub fn candidates(
        &self,
        checksum: Option<u64>,
        anchors: &BTreeMap<LineLocation, String>,
        locations: &BTreeSet<LineLocation>,
    ) -> Vec<usize> {
        let mut found: HashMap<usize, usize> = HashMap::new();
        let mut callees: Vec<Cow<str>> =
            known_callees(anchors.values().map(String::as_str)).collect();
        callees.sort_unstable();
        let few_anchors = callees.len() < self.min_anchors;
        if !few_anchors {
            let df = |c: &Cow<str>| self.by_callee.get(c).map_or(0, Vec::len);
            for i in self.prefix_postings(&callees, &self.by_callee, df) {
                let n = common(&callees, &self.callees[i]);
                if n >= needed(callees.len(), self.threshold) {
                    found.insert(i, n);
                }
            }
        }
        let own_locations: Vec<LineLocation> =
            locations.iter().copied().filter(|l| !l.is_before_start()).collect();
        if own_locations.len() >= MIN_LOCATIONS {
            let df = |l: &LineLocation| self.by_location.get(l).map_or(0, Vec::len);
            for i in self.prefix_postings(&own_locations, &self.by_location, df) {
                if !few_anchors && self.callees[i].len() >= self.min_anchors {
                    continue; // compared by anchors
                }
                let n = common(&own_locations, &self.locations[i]);
                if n >= needed(own_locations.len(), self.threshold) {
                    let e = found.entry(i).or_default();
                    *e = (*e).max(n);
                }
            }
        }
        let mut ranked: Vec<(usize, usize)> = found.into_iter().collect();
        ranked.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(MAX_COMPARED);
        let mut out: Vec<usize> = ranked.into_iter().map(|(i, _)| i).collect();
        if let Some(same) = checksum.and_then(|c| self.by_checksum.get(&c)) {
            out.extend(same);
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The functions listed under any of the first `n - needed(n) + 1` elements of the sorted
    /// `elements` (`n` of them), rarest first (`df`: how many functions list an element).
    fn prefix_postings<T: Ord + std::hash::Hash>(
        &self,
        elements: &[T],
        postings: &HashMap<T, Vec<usize>>,
        df: impl Fn(&T) -> usize,
    ) -> HashSet<usize> {
        let need = needed(elements.len(), self.threshold);
        let mut out = HashSet::new();
        if need > elements.len() || need == 0 {
            return out;
        }
        let mut by_rarity: Vec<&T> = elements.iter().collect();
        by_rarity.sort_by_key(|e| (df(e), *e));
        for e in &by_rarity[..elements.len() - need + 1] {
            out.extend(postings.get(*e).into_iter().flatten().copied());
        }
        out
    }

    /// The functions whose name is `name` but for its Rust hashes ([`stable_fn_name`]).
    pub fn same_path(&self, name: &str) -> &[usize] {
        match stable_fn_name(name) {
            Cow::Owned(path) => self.by_path.get(path.as_str()).map_or(&[], Vec::as_slice),
            Cow::Borrowed(_) => &[],
        }
    }
}

/// Whether two names are one function: equal, or but for their Rust hashes.
pub fn same_function(a: &str, b: &str) -> bool {
    a == b || stable_fn_name(a) == stable_fn_name(b)
}

/// The similarity (percent) of a profiled function and a new function, when it is above the
/// threshold ([`score`]).
pub fn similarity(
    fs: &FunctionSamples,
    anchors: &BTreeMap<LineLocation, String>,
    locations: &BTreeSet<LineLocation>,
    code: &FunctionAnchors,
    opts: &RemapOptions,
) -> Option<u32> {
    let same_checksum = code.checksum.is_some() && code.checksum == fs.checksum;
    score(fs, anchors, locations, code, opts)
        .filter(|s| *s > opts.similarity_threshold || same_checksum)
}

/// The similarity (percent) of a profiled function and a new function: the share of the
/// profile's call anchors found in order in the new function (callees by [`stable_fn_name`]),
/// when both have enough anchors; for line profiles of functions with too few calls, the
/// overlap (Jaccard) of their location sets (`locations`: the old function's), when both have
/// at least five; agreeing probe checksums are 100. `None`: too little to compare.
pub fn score(
    fs: &FunctionSamples,
    anchors: &BTreeMap<LineLocation, String>,
    locations: &BTreeSet<LineLocation>,
    code: &FunctionAnchors,
    opts: &RemapOptions,
) -> Option<u32> {
    if code.checksum.is_some() && code.checksum == fs.checksum {
        return Some(100);
    }
    fn known<'a>((l, c): (&LineLocation, &'a str)) -> Option<(LineLocation, Cow<'a, str>)> {
        (c != UNKNOWN_INDIRECT_CALLEE).then(|| (*l, stable_fn_name(c)))
    }
    let new: Vec<(LineLocation, Cow<str>)> = code
        .locations
        .iter()
        .filter_map(|(l, c)| c.as_deref().and_then(|c| known((l, c))))
        .collect();
    let old: Vec<(LineLocation, Cow<str>)> =
        anchors.iter().filter_map(|(l, c)| known((l, c))).collect();
    if new.len() < opts.min_anchors || old.len() < opts.min_anchors {
        if code.checksum.is_some() {
            return None;
        }
        let old: BTreeSet<&LineLocation> =
            locations.iter().filter(|l| !l.is_before_start()).collect();
        let new: BTreeSet<&LineLocation> =
            code.locations.keys().filter(|l| !l.is_before_start()).collect();
        if old.len() < MIN_LOCATIONS || new.len() < MIN_LOCATIONS {
            return None;
        }
        let common = old.intersection(&new).count();
        let union = old.len() + new.len() - common;
        return Some((common * 100 / union) as u32);
    }
    let new: Vec<(LineLocation, &str)> = new.iter().map(|(l, c)| (*l, c.as_ref())).collect();
    let old: Vec<(LineLocation, &str)> = old.iter().map(|(l, c)| (*l, c.as_ref())).collect();
    let matched = matcher::longest_common_sequence(&new, &old, |a, b| a == b).len();
    Some((matched * 100 / old.len()) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn function(calls: &[&str], lines: &[u32], checksum: Option<u64>) -> FunctionAnchors {
        let mut f = FunctionAnchors { checksum, ..Default::default() };
        for (i, c) in calls.iter().enumerate() {
            f.add(LineLocation::new(100 + i as u32, 0), Some(c));
        }
        for l in lines {
            f.add(LineLocation::new(*l, 0), None);
        }
        f
    }

    fn anchors(f: &FunctionAnchors) -> BTreeMap<LineLocation, String> {
        f.locations.iter().filter_map(|(l, c)| c.clone().map(|c| (*l, c))).collect()
    }

    #[test]
    fn rename_search_skips_functions_sharing_only_common_callees() {
        let mut new: Vec<FunctionAnchors> = (0..5000)
            .map(|i| function(&["malloc", "free", "memcpy", &format!("f{i}")], &[], None))
            .collect();
        new.push(function(&["malloc", "free", "memcpy", "parse", "emit"], &[], None));
        let names: Vec<String> = (0..new.len()).map(|i| format!("new{i}")).collect();
        let refs: Vec<(&String, &FunctionAnchors)> = names.iter().zip(&new).collect();
        let opts = RemapOptions::default();
        let index = RenameIndex::new(&refs, &opts);
        let old = function(&["malloc", "free", "memcpy", "parse", "emit"], &[], None);
        let found =
            index.candidates(None, &anchors(&old), &old.locations.keys().copied().collect());
        assert_eq!(found, vec![5000]);
    }

    #[test]
    fn rename_search_compares_at_most_max_compared_functions() {
        let new: Vec<FunctionAnchors> =
            (0..1000).map(|_| function(&["a", "b", "c"], &[], None)).collect();
        let names: Vec<String> = (0..new.len()).map(|i| format!("new{i}")).collect();
        let refs: Vec<(&String, &FunctionAnchors)> = names.iter().zip(&new).collect();
        let index = RenameIndex::new(&refs, &RemapOptions::default());
        let old = function(&["a", "b", "c"], &[], None);
        let found = index.candidates(None, &anchors(&old), &BTreeSet::new());
        assert_eq!(found, (0..MAX_COMPARED).collect::<Vec<_>>());
    }

    /// Small vocabularies, so that many pairs pass the threshold: every function the index leaves
    /// out is one [`similarity`] rejects.
    #[test]
    fn rename_index_misses_no_similar_function() {
        let mut seed = 12345u64;
        let mut next = |n: u64| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) % n
        };
        let callees = ["a", "b", "c", "d", "e", "f"];
        let mut random_function = || {
            let calls: Vec<&str> =
                (0..next(7)).map(|_| callees[next(callees.len() as u64) as usize]).collect();
            let lines: Vec<u32> = (0..next(9)).map(|_| next(12) as u32).collect();
            let checksum = (next(4) == 0).then(|| next(3));
            function(&calls, &lines, checksum)
        };
        let new: Vec<FunctionAnchors> = (0..300).map(|_| random_function()).collect();
        let old: Vec<FunctionAnchors> = (0..300).map(|_| random_function()).collect();
        let names: Vec<String> = (0..new.len()).map(|i| format!("new{i}")).collect();
        let refs: Vec<(&String, &FunctionAnchors)> = names.iter().zip(&new).collect();
        for threshold in [0, 50, 80, 100] {
            let opts = RemapOptions { similarity_threshold: threshold, ..Default::default() };
            let index = RenameIndex::new(&refs, &opts);
            let mut similar = 0;
            for o in &old {
                let fs = FunctionSamples { checksum: o.checksum, ..FunctionSamples::new("old") };
                let (a, l) = (anchors(o), o.locations.keys().copied().collect());
                let found = index.candidates(o.checksum, &a, &l);
                for (i, n) in new.iter().enumerate() {
                    let sim = similarity(&fs, &a, &l, n, &opts);
                    similar += usize::from(sim.is_some());
                    assert!(sim.is_none() || found.contains(&i), "{o:?} ~ {n:?}: {sim:?}");
                }
            }
            assert!(similar > 1000, "threshold {threshold}: {similar} similar pairs");
        }
    }
}
