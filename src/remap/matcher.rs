//! The call-anchor matching of LLVM's stale-profile matcher (`SampleProfileMatcher`, LLVM 19 and
//! main): the anchors of the new code and of the profile are aligned by a longest common
//! subsequence of callee names (Myers' greedy diff, `longestCommonSequence`), then every other
//! location follows an anchor (`matchNonCallsiteLocs`): locations after a matched anchor follow
//! it with the same line delta, and of the locations between two matched anchors the second half
//! is re-matched backwards from the later one.

use crate::llvm::LineLocation;
use crate::llvm::sample_prof::UNKNOWN_INDIRECT_CALLEE;
use crate::profile::FunctionSamples;
use std::collections::BTreeMap;

/// New-code location → profile location, for every new location (identity included).
pub type LocationMap = BTreeMap<LineLocation, LineLocation>;

/// `longestCommonSequence`: the matched pairs (location in `a` → location in `b`) of a longest
/// common subsequence of the two anchor lists, elements compared by `same` (see [`myers_lcs`]).
pub fn longest_common_sequence(
    a: &[(LineLocation, &str)],
    b: &[(LineLocation, &str)],
    same: impl Fn(&str, &str) -> bool,
) -> BTreeMap<LineLocation, LineLocation> {
    let pairs = myers_lcs(a.len(), b.len(), |i, j| same(a[i].1, b[j].1), usize::MAX)
        .expect("no trace limit");
    let mut matched = BTreeMap::new();
    // LLVM inserts while backtracking from the end: of a location listed twice, the later pair.
    for &(i, j) in pairs.iter().rev() {
        matched.entry(a[i].0).or_insert(b[j].0);
    }
    matched
}

/// The index pairs `(i, j)`, in order, of a longest common subsequence of two sequences of
/// lengths `n` and `m` whose elements `eq(i, j)` compares: the first shortest edit script Myers'
/// greedy algorithm finds, backtracked from the end, as LLVM's `longestCommonSequence` does (its
/// choices among equally long answers are part of `--llvm-matching`'s output). Time
/// O((n + m) · D) and a trace of about D² entries for D edits; `None` when the trace would
/// exceed `max_trace` entries.
pub fn myers_lcs(
    n: usize,
    m: usize,
    eq: impl Fn(usize, usize) -> bool,
    max_trace: usize,
) -> Option<Vec<(usize, usize)>> {
    let (n, m) = (n as i64, m as i64);
    let max = n + m;
    if max == 0 {
        return Some(Vec::new());
    }
    let idx = |k: i64| (k + max) as usize;
    let mut v = vec![-1i64; 2 * max as usize + 1];
    v[idx(1)] = 0;
    // trace[d]: the furthest x of diagonals -d-1..=d+1 before step d (what backtracking reads).
    let mut trace: Vec<Vec<i64>> = Vec::new();
    let mut cells = 0usize;
    for depth in 0..=max {
        let (lo, hi) = ((-depth - 1).max(-max), (depth + 1).min(max));
        cells = cells.saturating_add((hi - lo + 1) as usize);
        if cells > max_trace {
            return None;
        }
        trace.push(v[idx(lo)..=idx(hi)].to_vec());
        let mut k = -depth;
        while k <= depth {
            let mut x = if k == -depth || (k != depth && v[idx(k - 1)] < v[idx(k + 1)]) {
                v[idx(k + 1)]
            } else {
                v[idx(k - 1)] + 1
            };
            let mut y = x - k;
            while x < n && y < m && eq(x as usize, y as usize) {
                x += 1;
                y += 1;
            }
            v[idx(k)] = x;
            if x >= n && y >= m {
                return Some(backtrack(&trace, n, m, max));
            }
            k += 2;
        }
    }
    Some(Vec::new())
}

fn backtrack(trace: &[Vec<i64>], n: i64, m: i64, max: i64) -> Vec<(usize, usize)> {
    let mut pairs = Vec::new();
    let (mut x, mut y) = (n, m);
    let mut depth = trace.len() as i64 - 1;
    while x > 0 || y > 0 {
        let lo = (-depth - 1).max(-max);
        let p = |k: i64| trace[depth as usize][(k - lo) as usize];
        let k = x - y;
        let prev_k = if k == -depth || (k != depth && p(k - 1) < p(k + 1)) { k + 1 } else { k - 1 };
        let prev_x = p(prev_k);
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            x -= 1;
            y -= 1;
            pairs.push((x as usize, y as usize));
        }
        if depth == 0 {
            break;
        }
        x = prev_x;
        y = prev_y;
        depth -= 1;
    }
    pairs.reverse();
    pairs
}

/// `findProfileAnchors`: the call sites a profile records, by location: call targets of body
/// samples and inlinee names (several callees at one location: an indirect call). Zero-count
/// callees are skipped where a sampled one exists (LLVM main); line offsets with bit 15 set
/// (lines before the function's start) are not anchors.
pub fn profile_anchors(fs: &FunctionSamples) -> BTreeMap<LineLocation, String> {
    let mut out: BTreeMap<LineLocation, String> = BTreeMap::new();
    let mut insert = |loc: LineLocation, name: &str| {
        out.entry(loc)
            .and_modify(|n| {
                if n != name {
                    *n = UNKNOWN_INDIRECT_CALLEE.to_string()
                }
            })
            .or_insert_with(|| name.to_string());
    };
    for (loc, b) in &fs.body {
        if loc.is_before_start() {
            continue;
        }
        let sampled = b.call_targets.values().any(|&n| n != 0);
        for (name, &n) in &b.call_targets {
            if !(sampled && n == 0) {
                insert(*loc, name);
            }
        }
    }
    for (loc, callees) in &fs.callsites {
        if loc.is_before_start() {
            continue;
        }
        let sampled = callees.values().any(|c| c.total_samples != 0);
        for (name, c) in callees {
            if !(sampled && c.total_samples == 0) {
                insert(*loc, name);
            }
        }
    }
    out
}

/// `runStaleProfileMatching` + `matchNonCallsiteLocs`: for every location of the new code
/// (`new_locations`, with the callee of each call site), the profile location to read.
/// `profile` holds the profile's anchors; `same` compares a new callee with a profile callee.
pub fn match_locations(
    new_locations: &BTreeMap<LineLocation, Option<String>>,
    profile: &BTreeMap<LineLocation, String>,
    same: impl Fn(&str, &str) -> bool,
) -> LocationMap {
    let new_anchors: Vec<(LineLocation, &str)> = new_locations
        .iter()
        .filter_map(|(l, c)| c.as_deref().filter(|c| !c.is_empty()).map(|c| (*l, c)))
        .collect();
    let profile_anchors: Vec<(LineLocation, &str)> =
        profile.iter().map(|(l, c)| (*l, c.as_str())).collect();
    let mut map: LocationMap = new_locations.keys().map(|l| (*l, *l)).collect();
    if new_anchors.is_empty() || profile_anchors.is_empty() {
        return map;
    }
    let matched = longest_common_sequence(&new_anchors, &profile_anchors, same);
    let mut delta: u32 = 0;
    let mut pending: Vec<LineLocation> = Vec::new();
    for &loc in new_locations.keys() {
        if let Some(&to) = matched.get(&loc) {
            map.insert(loc, to);
            delta = to.line_offset.wrapping_sub(loc.line_offset);
            for l in &pending[pending.len().div_ceil(2)..] {
                map.insert(
                    *l,
                    LineLocation::new(l.line_offset.wrapping_add(delta), l.discriminator),
                );
            }
            pending.clear();
        } else {
            map.insert(
                loc,
                LineLocation::new(loc.line_offset.wrapping_add(delta), loc.discriminator),
            );
            pending.push(loc);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(n: u32) -> LineLocation {
        LineLocation::new(n, 0)
    }

    fn locs(spec: &[(u32, Option<&str>)]) -> BTreeMap<LineLocation, Option<String>> {
        spec.iter().map(|(n, c)| (l(*n), c.map(str::to_string))).collect()
    }

    /// The example in LLVM's `runStaleProfileMatching` comment.
    #[test]
    fn llvm_documented_example() {
        let new =
            locs(&[(1, None), (2, Some("foo")), (3, None), (5, None), (6, Some("bar")), (7, None)]);
        let prof: BTreeMap<_, _> = [(l(3), "foo".to_string()), (l(8), "bar".to_string())].into();
        let map = match_locations(&new, &prof, |a, b| a == b);
        let got: Vec<(u32, u32)> =
            map.iter().map(|(a, b)| (a.line_offset, b.line_offset)).collect();
        assert_eq!(got, [(1, 1), (2, 3), (3, 4), (5, 7), (6, 8), (7, 9)]);
    }

    #[test]
    fn lcs_pairs_in_order_and_skips_inserted_and_removed_calls() {
        let a = [(l(1), "a"), (l(2), "x"), (l(3), "b"), (l(4), "c")];
        let b = [(l(10), "a"), (l(11), "b"), (l(12), "y"), (l(13), "c")];
        let m = longest_common_sequence(&a, &b, |x, y| x == y);
        let got: Vec<(u32, u32)> = m.iter().map(|(a, b)| (a.line_offset, b.line_offset)).collect();
        assert_eq!(got, [(1, 10), (3, 11), (4, 13)]);
        // Nothing in common, or an empty side: nothing matched.
        assert!(longest_common_sequence(&a[..1], &b[1..2], |x, y| x == y).is_empty());
        assert!(longest_common_sequence(&a, &[], |x, y| x == y).is_empty());
    }

    #[test]
    fn myers_trace_grows_with_the_edits_not_the_lengths() {
        // 20000 elements, one removed and one inserted: 2 edits, a trace of 3 + 5 + 7 entries
        // (a table over both sequences would have 400M cells).
        let a: Vec<u32> = (0..20000).collect();
        let mut b = a.clone();
        b.remove(10);
        b.insert(500, 7);
        let pairs = myers_lcs(a.len(), b.len(), |i, j| a[i] == b[j], 15).unwrap();
        assert_eq!(pairs.len(), 19999);
        assert!(pairs.contains(&(9, 9)) && pairs.contains(&(11, 10)));
        assert!(pairs.contains(&(500, 499)) && pairs.contains(&(501, 501)));
        assert!(!pairs.iter().any(|p| p.1 == 500));
        assert_eq!(myers_lcs(a.len(), b.len(), |i, j| a[i] == b[j], 14), None);
        // Nothing in common: 6 edits, 61 trace entries (diagonals clamped to -6..=6).
        assert_eq!(myers_lcs(3, 3, |_, _| false, 61), Some(Vec::new()));
        assert_eq!(myers_lcs(3, 3, |_, _| false, 60), None);
        assert_eq!(myers_lcs(0, 0, |_, _| true, 0), Some(Vec::new()));
    }

    #[test]
    fn repeated_callees_pair_with_the_nearest_occurrence_of_the_diff() {
        // new: f g f ; profile: f f. Myers keeps the first f, deletes g, keeps the last f.
        let a = [(l(1), "f"), (l(2), "g"), (l(3), "f")];
        let b = [(l(5), "f"), (l(9), "f")];
        let m = longest_common_sequence(&a, &b, |x, y| x == y);
        let got: Vec<(u32, u32)> = m.iter().map(|(a, b)| (a.line_offset, b.line_offset)).collect();
        assert_eq!(got, [(1, 5), (3, 9)]);
    }

    #[test]
    fn lines_inserted_between_anchors_split_evenly() {
        // Two lines were inserted before `bar`: 4 non-anchors between foo (2) and bar.
        let new = locs(&[
            (2, Some("foo")),
            (3, None),
            (4, None),
            (5, None),
            (6, None),
            (7, Some("bar")),
            (8, None),
        ]);
        let prof: BTreeMap<_, _> = [(l(2), "foo".to_string()), (l(5), "bar".to_string())].into();
        let map = match_locations(&new, &prof, |a, b| a == b);
        let got: Vec<(u32, u32)> =
            map.iter().map(|(a, b)| (a.line_offset, b.line_offset)).collect();
        // 3, 4 follow foo (delta 0); 5, 6 follow bar backwards (delta -2); 8 after bar.
        assert_eq!(got, [(2, 2), (3, 3), (4, 4), (5, 3), (6, 4), (7, 5), (8, 6)]);
    }

    #[test]
    fn profile_anchors_of_targets_and_inlinees() {
        let mut fs = FunctionSamples::new("f");
        fs.add_call_target(l(1), &"a".into(), 5);
        fs.add_call_target(l(2), &"a".into(), 5);
        fs.add_call_target(l(2), &"b".into(), 1);
        fs.add_call_target(l(3), &"c".into(), 0);
        fs.add_call_target(l(3), &"d".into(), 4);
        fs.callsite_mut(l(4), "e").total_samples = 0;
        fs.add_call_target(LineLocation::new(0x8001, 0), &"z".into(), 1);
        let a = profile_anchors(&fs);
        let got: Vec<(u32, &str)> = a.iter().map(|(l, n)| (l.line_offset, n.as_str())).collect();
        assert_eq!(got, [(1, "a"), (2, UNKNOWN_INDIRECT_CALLEE), (3, "d"), (4, "e")]);
    }
}
