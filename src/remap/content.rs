//! Content matching (beyond LLVM; needs the old build): a function's locations carried by the
//! code they cover rather than by their position between call anchors.
//!
//! LLVM's matcher ([`super::matcher`]) knows only the call sites; every other location follows
//! the nearest matched call by its line delta, the locations between two calls split evenly, so
//! code inserted between calls takes a neighbour's count and a function without calls keeps
//! its probe ids or line offsets whatever they now mean. With both builds' code
//! ([`FunctionShape`]) the instructions themselves can be aligned:
//!
//! 0. A location whose own code is much the same in both builds (its old and new instructions
//!    share a common subsequence at least half as long as their mean length) stays where it
//!    is: a rebuild that changes code generation but not the source must not move counts.
//! 1. The calls of the two copies are aligned first (longest common subsequence by callee),
//!    then the instructions between each pair of matched calls (longest common subsequence of
//!    normalised opcodes): code that moved keeps its partner, code that is new has none.
//! 2. Any other new location reads the old location most of its aligned instructions belong to
//!    (several probes of one block pair with the old block's probes in order).
//! 3. A new location none of whose instructions found a partner (a line inserted into a block,
//!    a probe of a block whose code changed) reads the old block its basic block is aligned
//!    with: the old location that lies most wholly in that block, so it gets the block's count;
//!    or, when its block has no partner, the partner of a block that runs exactly as often
//!    (one dominates the other and is postdominated by it, both in the same loops).
//! 4. Any other location is new code that need not run when the old code did: it reads
//!    nothing.
//!
//! Locations the new copy has no instruction for (probe ids optimised away, lines only in
//! inlined copies) keep LLVM's mapping. Sequences too different to align (more than
//! about 2000 edits between two matched calls, see [`MAX_TRACE`]) are left unaligned there,
//! which also falls back to blocks and then to nothing.

use super::matcher::{LocationMap, myers_lcs};
use crate::binary::shape::{FunctionShape, ShapeInst};
use crate::llvm::LineLocation;
use std::collections::{BTreeMap, BTreeSet};

/// The largest Myers trace kept to align two instruction sequences (between two matched
/// calls): 4M entries, 32 MB, about 2000 edits.
pub const MAX_TRACE: usize = 1 << 22;

/// New location → old location for every location of `new`'s code, from the alignment of the
/// two copies (see the module documentation), and for the other locations `fallback`'s
/// mapping. `same_callee(new, old)` compares call targets (old names after renames).
pub fn content_map(
    old: &FunctionShape,
    new: &FunctionShape,
    same_callee: impl Fn(&str, &str) -> bool,
    fallback: &LocationMap,
) -> LocationMap {
    let aligned = align(&old.insts, &new.insts, &same_callee);
    let mut map: LocationMap = BTreeMap::new();
    let with_code: BTreeSet<LineLocation> =
        new.insts.iter().flat_map(|i| i.locations.iter().chain(&i.call_probe).copied()).collect();
    for (l, o) in fallback {
        if !with_code.contains(l) {
            map.insert(*l, *o);
        }
    }
    // 0. A location whose code is much the same in both builds stays where it is.
    let (old_code, new_code) = (code_by_location(old), code_by_location(new));
    for (l, n) in &new_code {
        if let Some(o) = old_code.get(l)
            && 4 * lcs(o.len(), n.len(), |a, b| same_inst(o[a], n[b], &same_callee)).len()
                >= o.len() + n.len()
        {
            map.insert(*l, *l);
        }
    }
    // 2. Votes of aligned instructions.
    let mut votes: BTreeMap<LineLocation, BTreeMap<LineLocation, u32>> = BTreeMap::new();
    for (n, o) in aligned.iter().enumerate() {
        let Some(o) = *o else { continue };
        let (n, o) = (&new.insts[n], &old.insts[o]);
        for l in &n.locations {
            let v = votes.entry(*l).or_default();
            for ol in &o.locations {
                *v.entry(*ol).or_default() += 1;
            }
        }
        // A call probe reads the call probe of the call it is aligned with.
        if let (Some(l), Some(ol)) = (n.call_probe, o.call_probe) {
            *votes.entry(l).or_default().entry(ol).or_default() += 1;
        }
    }
    // 3. Blocks: each new block's partner, the old block most of its aligned instructions are in.
    let mut block_votes: BTreeMap<u32, BTreeMap<u32, u32>> = BTreeMap::new();
    for (n, o) in aligned.iter().enumerate() {
        if let Some(o) = *o {
            *block_votes
                .entry(new.insts[n].block)
                .or_default()
                .entry(old.insts[o].block)
                .or_default() += 1;
        }
    }
    let block_partner: BTreeMap<u32, u32> =
        block_votes.iter().filter_map(|(b, v)| best(v).map(|o| (*b, o))).collect();
    let representative = representatives(old);
    // New locations whose instructions tie between the same old locations (several probes of
    // one block) pair with them in order, each keeping its own id where that is among them.
    let mut tied: BTreeMap<Vec<LineLocation>, Vec<LineLocation>> = BTreeMap::new();
    for (l, v) in &votes {
        let max = v.values().max().copied().unwrap_or(0);
        let top: Vec<LineLocation> =
            v.iter().filter(|(_, n)| **n == max).map(|(k, _)| *k).collect();
        if !top.is_empty() {
            tied.entry(top).or_default().push(*l);
        }
    }
    let kept: BTreeSet<LineLocation> = tied
        .iter()
        .flat_map(|(c, ls)| ls.iter().filter(|l| c.contains(l)))
        .chain(map.iter().filter(|(l, o)| l == o).map(|(l, _)| l))
        .copied()
        .collect();
    tied.values_mut().for_each(|ls| ls.retain(|l| !map.contains_key(l)));
    for (candidates, locations) in &tied {
        let rest: Vec<LineLocation> =
            candidates.iter().filter(|c| !kept.contains(c)).copied().collect();
        let mut next = rest.iter().cycle();
        for l in locations {
            let to =
                if candidates.contains(l) { *l } else { *next.next().unwrap_or(&candidates[0]) };
            map.insert(*l, to);
        }
    }
    let mut flow: Option<Flow> = None;
    for l in with_code {
        if map.contains_key(&l) {
            continue;
        }
        let blocks: BTreeSet<u32> =
            new.insts.iter().filter(|i| i.locations.contains(&l)).map(|i| i.block).collect();
        let read = |b: &u32| block_partner.get(b).and_then(|o| representative.get(o));
        let to = blocks.iter().find_map(read).or_else(|| {
            let flow = flow.get_or_insert_with(|| Flow::new(&new.successors));
            blocks
                .iter()
                .find_map(|b| flow.equivalents(*b as usize).find_map(|e| read(&(e as u32))))
        });
        if let Some(to) = to {
            map.insert(l, *to);
        }
    }
    map
}

/// Each location's normalised opcodes, in address order.
fn code_by_location(shape: &FunctionShape) -> BTreeMap<LineLocation, Vec<&ShapeInst>> {
    let mut out: BTreeMap<LineLocation, Vec<&ShapeInst>> = BTreeMap::new();
    for i in &shape.insts {
        for l in i.locations.iter().chain(&i.call_probe) {
            out.entry(*l).or_default().push(i);
        }
    }
    out
}

/// Whether an old and a new instruction are the same code (the same callee for calls).
fn same_inst(o: &ShapeInst, n: &ShapeInst, same_callee: &impl Fn(&str, &str) -> bool) -> bool {
    o.opcode == n.opcode
        && match (&o.callee, &n.callee) {
            (Some(a), Some(b)) => same_callee(b, a),
            (None, None) => true,
            _ => false,
        }
}

/// The key with the most votes, the smallest on a tie.
fn best<K: Ord + Copy>(votes: &BTreeMap<K, u32>) -> Option<K> {
    let max = *votes.values().max()?;
    votes.iter().find(|(_, v)| **v == max).map(|(k, _)| *k)
}

/// Per old block, the location whose count is that block's: the one with the largest share of
/// its instructions in the block (then the most instructions there, then the smallest).
fn representatives(old: &FunctionShape) -> BTreeMap<u32, LineLocation> {
    let mut total: BTreeMap<LineLocation, u32> = BTreeMap::new();
    let mut in_block: BTreeMap<u32, BTreeMap<LineLocation, u32>> = BTreeMap::new();
    for i in &old.insts {
        for l in &i.locations {
            *total.entry(*l).or_default() += 1;
            *in_block.entry(i.block).or_default().entry(*l).or_default() += 1;
        }
    }
    in_block
        .into_iter()
        .filter_map(|(b, locs)| {
            let pick = locs
                .iter()
                .max_by(|(la, na), (lb, nb)| {
                    // n / total, compared without division.
                    (u64::from(**na) * u64::from(total[*lb]))
                        .cmp(&(u64::from(**nb) * u64::from(total[*la])))
                        .then(na.cmp(nb))
                        .then(lb.cmp(la))
                })
                .map(|(l, _)| *l)?;
            Some((b, pick))
        })
        .collect()
}

/// Dominators, postdominators and loops of a function's blocks: which blocks must run as often
/// as a given one.
struct Flow {
    idom: Vec<Option<usize>>,
    /// Immediate postdominators; index `n` (one past the blocks) is the exit all returns reach.
    ipdom: Vec<Option<usize>>,
    /// Per block, the headers of the natural loops it is in.
    loops: Vec<BTreeSet<usize>>,
}

impl Flow {
    fn new(successors: &[Vec<u32>]) -> Flow {
        let n = successors.len();
        let succ: Vec<Vec<usize>> =
            successors.iter().map(|s| s.iter().map(|b| *b as usize).collect()).collect();
        let mut preds = vec![Vec::new(); n];
        for (v, ws) in succ.iter().enumerate() {
            for &w in ws {
                preds[w].push(v);
            }
        }
        let idom = immediate_dominators(&succ, 0);
        let mut reverse = preds.clone();
        reverse.push((0..n).filter(|&v| succ[v].is_empty()).collect());
        let ipdom = immediate_dominators(&reverse, n);
        let mut loops = vec![BTreeSet::new(); n];
        for (v, ws) in succ.iter().enumerate() {
            for &h in ws {
                if !dominates(&idom, h, v) {
                    continue;
                }
                // Back edge v → h: the loop is h and what reaches v without passing h.
                let mut body = vec![v];
                loops[h].insert(h);
                while let Some(x) = body.pop() {
                    if loops[x].insert(h) {
                        body.extend(preds[x].iter().copied());
                    }
                }
            }
        }
        Flow { idom, ipdom, loops }
    }

    /// The blocks that run exactly as often as `b` (`a` dominates `b`, `b` postdominates `a`,
    /// or the other way round, both in the same loops), nearest first.
    fn equivalents(&self, b: usize) -> impl Iterator<Item = usize> + '_ {
        let same_loops = move |a: usize| self.loops.get(a) == self.loops.get(b);
        let dominators = ancestors(&self.idom, b).filter(move |&a| dominates(&self.ipdom, b, a));
        let postdominators = ancestors(&self.ipdom, b)
            .filter(move |&a| a < self.idom.len() && dominates(&self.idom, b, a));
        dominators.chain(postdominators).filter(move |&a| same_loops(a))
    }
}

/// The ancestors of `x` in the tree `idom`, nearest first.
fn ancestors(idom: &[Option<usize>], mut x: usize) -> impl Iterator<Item = usize> + '_ {
    std::iter::from_fn(move || {
        let p = idom.get(x).copied().flatten().filter(|p| *p != x)?;
        x = p;
        Some(p)
    })
}

/// Whether `a` dominates `b` in the tree `idom`.
fn dominates(idom: &[Option<usize>], a: usize, mut b: usize) -> bool {
    loop {
        if a == b {
            return true;
        }
        match idom.get(b).copied().flatten() {
            Some(p) if p != b => b = p,
            _ => return false,
        }
    }
}

/// Immediate dominators from `entry` (Cooper, Harvey and Kennedy's iteration); `entry` is its
/// own, unreachable nodes have none.
fn immediate_dominators(succ: &[Vec<usize>], entry: usize) -> Vec<Option<usize>> {
    let n = succ.len();
    if entry >= n {
        return vec![None; n];
    }
    let mut postorder = Vec::with_capacity(n);
    let mut seen = vec![false; n];
    seen[entry] = true;
    let mut stack = vec![(entry, 0usize)];
    while let Some((v, i)) = stack.last_mut() {
        if let Some(&w) = succ[*v].get(*i) {
            *i += 1;
            if !seen[w] {
                seen[w] = true;
                stack.push((w, 0));
            }
        } else {
            postorder.push(*v);
            stack.pop();
        }
    }
    let mut number = vec![usize::MAX; n];
    for (k, v) in postorder.iter().enumerate() {
        number[*v] = k;
    }
    let mut preds = vec![Vec::new(); n];
    for (v, ws) in succ.iter().enumerate() {
        for &w in ws {
            preds[w].push(v);
        }
    }
    let mut idom = vec![None; n];
    idom[entry] = Some(entry);
    let mut changed = true;
    while changed {
        changed = false;
        for &v in postorder.iter().rev().filter(|v| **v != entry) {
            let mut new: Option<usize> = None;
            for &p in preds[v].iter().filter(|p| idom[**p].is_some()) {
                new = Some(match new {
                    None => p,
                    Some(mut q) => {
                        let mut p = p;
                        while p != q {
                            while number[p] < number[q] {
                                p = idom[p].expect("processed");
                            }
                            while number[q] < number[p] {
                                q = idom[q].expect("processed");
                            }
                        }
                        p
                    }
                });
            }
            if new != idom[v] {
                idom[v] = new;
                changed = true;
            }
        }
    }
    idom
}

/// For each new instruction, its partner among the old ones (see the module documentation).
fn align(
    old: &[ShapeInst],
    new: &[ShapeInst],
    same_callee: &impl Fn(&str, &str) -> bool,
) -> Vec<Option<usize>> {
    let same = |o: &ShapeInst, n: &ShapeInst| same_inst(o, n, same_callee);
    let old_calls: Vec<usize> = (0..old.len()).filter(|&i| old[i].callee.is_some()).collect();
    let new_calls: Vec<usize> = (0..new.len()).filter(|&i| new[i].callee.is_some()).collect();
    let mut anchors: Vec<(usize, usize)> =
        lcs(old_calls.len(), new_calls.len(), |a, b| same(&old[old_calls[a]], &new[new_calls[b]]))
            .into_iter()
            .map(|(a, b)| (old_calls[a], new_calls[b]))
            .collect();
    anchors.push((old.len(), new.len()));
    let mut out = vec![None; new.len()];
    let (mut o0, mut n0) = (0, 0);
    for (o1, n1) in anchors {
        for (a, b) in lcs(o1 - o0, n1 - n0, |a, b| same(&old[o0 + a], &new[n0 + b])) {
            out[n0 + b] = Some(o0 + a);
        }
        if n1 < new.len() {
            out[n1] = Some(o1);
        }
        (o0, n0) = (o1 + 1, n1 + 1);
    }
    out
}

/// The pairs of a longest common subsequence of `a` (length `n`) and `b` (length `m`), as
/// index pairs in order (LLVM's Myers diff); nothing when the edit script is too long to trace
/// in [`MAX_TRACE`] entries.
fn lcs(n: usize, m: usize, eq: impl Fn(usize, usize) -> bool) -> Vec<(usize, usize)> {
    myers_lcs(n, m, eq, MAX_TRACE).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn l(n: u32) -> LineLocation {
        LineLocation::new(n, 0)
    }

    /// Instructions from `(opcode, callee, block, location)`.
    fn shape(spec: &[(&str, Option<&str>, u32, u32)]) -> FunctionShape {
        FunctionShape {
            insts: spec
                .iter()
                .map(|(op, callee, block, loc)| ShapeInst {
                    opcode: (*op).into(),
                    callee: callee.map(Into::into),
                    block: *block,
                    locations: vec![l(*loc)],
                    call_probe: None,
                })
                .collect(),
            successors: Vec::new(),
        }
    }

    fn pairs(map: &LocationMap) -> Vec<(u32, u32)> {
        map.iter().map(|(a, b)| (a.line_offset, b.line_offset)).collect()
    }

    #[test]
    fn lcs_pairs_in_order() {
        let a = b"xabcy";
        let b = b"abzc";
        let got = lcs(a.len(), b.len(), |i, j| a[i] == b[j]);
        assert_eq!(got, [(1, 0), (2, 1), (3, 3)]);
        assert!(lcs(0, 3, |_, _| true).is_empty());
    }

    #[test]
    fn inserted_code_reads_nothing_and_moved_code_keeps_its_count() {
        // Old: line 1 (load), line 2 (multiply), line 3 (call f), line 4 (store).
        let mut old = shape(&[
            ("mov (r),r", None, 0, 1),
            ("imul r,r", None, 0, 2),
            ("call", Some("f"), 0, 3),
            ("mov r,(r)", None, 1, 4),
            ("retq ", None, 1, 4),
        ]);
        old.successors = vec![vec![1], vec![]];
        // New: the load moved to line 4 and now guards a new block (line 2: a call of g), the
        // multiply moved to line 6 after an added instruction (line 5).
        let mut new = shape(&[
            ("mov (r),r", None, 0, 4),
            ("cmp i,r", None, 0, 4),
            ("jcc", None, 0, 4),
            ("call", Some("g"), 1, 2),
            ("add r,r", None, 2, 5),
            ("imul r,r", None, 2, 6),
            ("call", Some("f"), 2, 7),
            ("mov r,(r)", None, 3, 8),
            ("retq ", None, 3, 8),
        ]);
        new.successors = vec![vec![1, 2], vec![2], vec![3], vec![]];
        // LLVM's mapping would have said something for every location; here only for those
        // without code (line 9).
        let fallback: LocationMap = [(l(2), l(1)), (l(9), l(5))].into();
        let map = content_map(&old, &new, |a, b| a == b, &fallback);
        // 2 is new code that need not run (nothing); 4, 6 found their instructions; 5 (an
        // added instruction in a block the old build has) reads that block's location: 1, 2
        // and 3 lie wholly in it, 1 is the smallest; 7 is the call, 8 the store.
        assert_eq!(pairs(&map), [(4, 1), (5, 1), (6, 2), (7, 3), (8, 4), (9, 5)]);
    }

    #[test]
    fn probes_sharing_a_block_read_the_same_old_probe() {
        // op_mul of indirect_calls: one block with probe 1; the new build has probes 1 and 4
        // at the same address (the new branch became a select).
        let mut old = shape(&[("imul r,r", None, 0, 1), ("retq ", None, 0, 1)]);
        old.successors = vec![vec![]];
        let mut new =
            shape(&[("cmp i,r", None, 0, 1), ("imul r,r", None, 0, 1), ("retq ", None, 0, 1)]);
        new.successors = vec![vec![]];
        for i in &mut new.insts {
            i.locations.push(l(4));
        }
        let map = content_map(&old, &new, |a, b| a == b, &BTreeMap::new());
        assert_eq!(pairs(&map), [(1, 1), (4, 1)]);
    }

    #[test]
    fn blocks_that_run_as_often_as_another() {
        // indirect_calls' new main, in layout order: 0 entry (jumps to 2), 1 loop body (exits
        // to 4 or falls to 2), 2 the loop's new test (back to 1, or falls to 3), 3 the new rare
        // block (back to 1), 4 exit.
        let flow = Flow::new(&[vec![2], vec![2, 4], vec![1, 3], vec![1], vec![]]);
        let eq = |b| flow.equivalents(b).collect::<Vec<_>>();
        assert_eq!(eq(2), [1]);
        assert_eq!(eq(1), [2]);
        assert_eq!(eq(3), Vec::<usize>::new());
        // Entry and exit run once; the loop's blocks do not run as often as they do.
        assert_eq!(eq(0), [4]);
        assert_eq!(eq(4), [0]);
    }

    #[test]
    fn a_new_block_runs_as_often_as_the_aligned_block_it_is_equivalent_to() {
        // Old: a loop of one block (line 2) between entry (1) and exit (3).
        let mut old = shape(&[
            ("mov i,r", None, 0, 1),
            ("add r,r", None, 1, 2),
            ("jcc", None, 1, 2),
            ("retq ", None, 2, 3),
        ]);
        old.successors = vec![vec![1], vec![1, 2], vec![]];
        // New: the loop also runs a new test (line 5, its own block 2), and a rare block
        // (line 6) that test guards.
        let mut new = shape(&[
            ("mov i,r", None, 0, 1),
            ("jmp", None, 0, 1),
            ("add r,r", None, 1, 2),
            ("jcc", None, 1, 2),
            ("test i,r", None, 2, 5),
            ("jcc", None, 2, 5),
            ("xor r,r", None, 3, 6),
            ("jmp", None, 3, 6),
            ("retq ", None, 4, 3),
        ]);
        new.successors = vec![vec![2], vec![2, 4], vec![1, 3], vec![1], vec![]];
        let map = content_map(&old, &new, |a, b| a == b, &BTreeMap::new());
        assert_eq!(pairs(&map), [(1, 1), (2, 2), (3, 3), (5, 2)]);
    }

    #[test]
    fn a_location_whose_code_barely_changed_stays() {
        // Line 1 kept two of its four instructions (enough: it stays); the other two now count
        // for line 2, whose old code is gone, so line 2 reads line 1.
        let mut old = shape(&[
            ("mov (r),r", None, 0, 1),
            ("xor r,r", None, 0, 1),
            ("shl i,r", None, 0, 1),
            ("add r,r", None, 0, 1),
            ("xor r,r", None, 0, 2),
        ]);
        let mut new = shape(&[
            ("mov (r),r", None, 0, 2),
            ("xor r,r", None, 0, 1),
            ("shl i,r", None, 0, 1),
            ("add r,r", None, 0, 2),
        ]);
        (old.successors, new.successors) = (vec![vec![]], vec![vec![]]);
        let map = content_map(&old, &new, |a, b| a == b, &BTreeMap::new());
        assert_eq!(pairs(&map), [(1, 1), (2, 1)]);
    }

    #[test]
    fn renamed_callees_still_anchor() {
        let mut old = shape(&[("call", Some("old_name"), 0, 1), ("ret", None, 0, 2)]);
        let mut new = shape(&[("call", Some("new_name"), 0, 3), ("ret", None, 0, 4)]);
        (old.successors, new.successors) = (vec![vec![]], vec![vec![]]);
        let same = |n: &str, o: &str| n == if o == "old_name" { "new_name" } else { o };
        let map = content_map(&old, &new, same, &BTreeMap::new());
        assert_eq!(pairs(&map), [(3, 1), (4, 2)]);
    }
}
