//! The CS pre-inliner (`CSPreInliner.cpp`, `ProfiledCallGraph.h`, `SCCIterator.h`): estimates
//! the compiler's top-down inlining from the context profile, keeps the contexts it would inline
//! (marked ShouldBeInlined) and merges every other context into its function's base profile.

use std::collections::{HashMap, HashSet, VecDeque};

use rayon::prelude::*;

use super::trie::{ContextTrie, FuncId, NodeId, ROOT, SampleId, state};
use super::{PostPassOptions, Thresholds};
use crate::llvm::LineLocation;
use crate::profile::context_size::ContextSizeOracle;
use crate::profile::{Context, FunctionSamples, Profile, attr};

/// Counts for the report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PreInlinerStats {
    pub inlined: usize,
    pub not_inlined: usize,
    /// Contexts dropped at the end because their profile now lives in the base profile.
    pub contexts_dropped: usize,
}

/// What the pre-inliner reads from the flat profile before it changes it: the context trie
/// ([`ContextTrie::of_contexts`]) and the profiled call graph ([`call_graph`]) of its profiles,
/// read only, so made beside other readers of the fresh profile. The top-down order (which
/// needs the cold threshold) is made from the graph when the pre-inliner starts, beside the
/// profiles' move into the trie.
pub(crate) struct Plan {
    pub trie: ContextTrie,
    pub graph: CallGraph,
}

/// The profiled call graph (`ProfiledCallGraph`) before its cold edges are trimmed: functions
/// in name order (LLVM's `std::set`s are keyed by name), each with its callees in that order and
/// the weight of each call edge summed over every trie edge between the two.
pub(crate) struct CallGraph {
    /// Function ids by rank in name order.
    by_name: Vec<FuncId>,
    /// By caller rank: (callee rank + 1, weight), by callee rank (graph node 0 is the root).
    edges: Vec<Vec<(usize, u64)>>,
}

/// The [`CallGraph`] of `trie` and its profiles, `profile` giving the profile of a sample id.
/// Each trie edge below the root's children weighs its call count ([`edge_weight`]), 0 where
/// the caller or the callee has no profile. Each edge reads two profiles, mostly cache misses,
/// and no other edge: the nodes are taken in parallel, and the weights summed by sorting the
/// edges (saturating sums of counts do not depend on the order: every one is the sum capped at
/// `u64::MAX`).
pub(crate) fn call_graph<'a>(
    trie: &ContextTrie,
    profile: impl Fn(SampleId) -> &'a FunctionSamples + Sync,
) -> CallGraph {
    let mut by_name: Vec<FuncId> = (0..trie.func_count() as FuncId).collect();
    by_name.par_sort_unstable_by(|&a, &b| trie.name(a).cmp(trie.name(b)));
    let mut rank = vec![0u32; by_name.len()];
    for (r, &f) in by_name.iter().enumerate() {
        rank[f as usize] = r as u32;
    }
    // Every node below a root child is the callee of one trie edge: (caller rank, callee rank)
    // as one key, and the edge's weight; other nodes sort last.
    const NO_EDGE: u64 = u64::MAX;
    let mut calls: Vec<(u64, u64)> = (0..trie.node_count())
        .into_par_iter()
        .with_min_len(4096)
        .map(|n| {
            let node = trie.node(n);
            let Some(caller) = node.parent().filter(|&p| p != ROOT) else {
                return (NO_EDGE, 0);
            };
            let caller_node = trie.node(caller);
            let weight = match (caller_node.samples(), node.samples()) {
                (Some(caller), Some(callee)) => {
                    edge_weight(profile(caller), profile(callee), node.callsite)
                }
                _ => 0,
            };
            let key = u64::from(rank[caller_node.func as usize]) << 32
                | u64::from(rank[node.func as usize]);
            (key, weight)
        })
        .collect();
    calls.par_sort_unstable_by_key(|&(key, _)| key);
    let edges_end = calls.partition_point(|&(key, _)| key != NO_EDGE);
    let mut edges: Vec<Vec<(usize, u64)>> = vec![Vec::new(); by_name.len()];
    for group in calls[..edges_end].chunk_by(|a, b| a.0 == b.0) {
        let weight = group.iter().fold(0u64, |w, &(_, e)| w.saturating_add(e));
        let (caller, callee) = ((group[0].0 >> 32) as usize, group[0].0 as u32 as usize);
        edges[caller].push((callee + 1, weight));
    }
    CallGraph { by_name, edges }
}

/// `CSPreInliner::run` on a flat CS profile: takes its contexts, returns the kept ones in
/// context order (a flat CS profile's) and sets `preinlined`. `plan`, when given, is [`Plan`] of
/// this very profile, unchanged since: its trie and its call graph (which follows the counts)
/// are used as they are. `beside` runs on another worker during the walk (which has one thread),
/// its result returned.
///
/// Also returns the spent context trie (it still holds the flat profile's contexts and every
/// profile merged away), for the caller to free where nobody waits for it.
pub(crate) fn run_preinliner<R: Send>(
    profile: &mut Profile,
    opts: &PostPassOptions,
    thresholds: &Thresholds,
    sizes: &dyn ContextSizeOracle,
    plan: Option<Plan>,
    beside: impl FnOnce() -> R + Send,
) -> (PreInlinerStats, ContextTrie, Vec<(Context, FunctionSamples)>, R) {
    let order =
        |graph: &CallGraph| top_down_order(graph, thresholds.cold, opts.sort_profiled_scc_member);
    let (mut trie, order) = match plan {
        Some(Plan { mut trie, graph }) => {
            // The order (one thread) beside the move; the move first, so that the trie's
            // profiles are allocated on this worker, which walks them.
            let ((), order) = rayon::join(|| trie.take_profiles(profile), || order(&graph));
            (trie, order)
        }
        None => {
            let mut trie = ContextTrie::of_contexts(&profile.functions);
            trie.take_profiles(profile);
            let order = order(&call_graph(&trie, |s| &trie.samples[s]));
            (trie, order)
        }
    };
    let name_ids = match opts.use_context_cost {
        true => trie.names().iter().map(|name| sizes.name_id(name)).collect(),
        false => Vec::new(),
    };
    let mut inliner = PreInliner {
        opts,
        thresholds,
        sizes,
        name_ids,
        hot_threshold: opts.hot_inline_threshold.unwrap_or(1500),
        cold_threshold: opts.cold_inline_threshold.unwrap_or(0),
        limit_max: opts.inline_limit_max.unwrap_or(50000),
        stats: PreInlinerStats::default(),
    };
    let ((), beside) = rayon::join(
        || {
            for func in order {
                inliner.process_function(&mut trie, func);
            }
        },
        beside,
    );
    // Contexts not inlined were merged into their base profile: dropped, not moved back.
    let (kept, dropped) = trie.take_kept_profiles(|trie, node, sample| {
        trie.node(node).parent() == Some(ROOT) || trie.states[sample] & state::INLINED != 0
    });
    inliner.stats.contexts_dropped = dropped;
    profile.kind.preinlined = true;
    (inliner.stats, trie, kept, beside)
}

struct PreInliner<'a> {
    opts: &'a PostPassOptions,
    thresholds: &'a Thresholds,
    sizes: &'a dyn ContextSizeOracle,
    /// The size oracle's id of each of the trie's names.
    name_ids: Vec<Option<u32>>,
    hot_threshold: u32,
    cold_threshold: u32,
    limit_max: u32,
    stats: PreInlinerStats,
}

/// `ProfiledInlineCandidate`.
struct Candidate {
    sample: SampleId,
    callsite_count: u64,
    size_cost: u64,
    guid: u64,
}

impl Candidate {
    /// `ProfiledCandidateComparer(self, other)`: true when `self` has lower priority.
    fn less(&self, other: &Candidate) -> bool {
        // Zero-size callees first: they cost nothing.
        if (self.size_cost == 0 || other.size_cost == 0) && self.size_cost != other.size_cost {
            return other.size_cost == 0;
        }
        if self.callsite_count != other.callsite_count {
            return self.callsite_count < other.callsite_count;
        }
        if self.size_cost != other.size_cost {
            return self.size_cost > other.size_cost;
        }
        self.guid < other.guid
    }
}

/// `std::priority_queue` (libstdc++ `push_heap` / `pop_heap`), so that candidates the comparer
/// considers equal pop in the same order as in llvm-profgen.
#[derive(Default)]
struct CandidateQueue(Vec<Candidate>);

impl CandidateQueue {
    fn push(&mut self, c: Candidate) {
        self.0.push(c);
        let last = self.0.len() - 1;
        self.sift_up(0, last);
    }

    fn sift_up(&mut self, top: usize, mut hole: usize) {
        while hole > top {
            let parent = (hole - 1) / 2;
            if !self.0[parent].less(&self.0[hole]) {
                break;
            }
            self.0.swap(parent, hole);
            hole = parent;
        }
    }

    fn pop(&mut self) -> Option<Candidate> {
        let last = self.0.pop()?;
        if self.0.is_empty() {
            return Some(last);
        }
        let top = std::mem::replace(&mut self.0[0], last);
        // `__adjust_heap`: move the hole to a leaf along the larger children, then sift up.
        let len = self.0.len();
        let mut hole = 0;
        let mut child = 0;
        while child < (len - 1) / 2 {
            child = 2 * (child + 1);
            if self.0[child].less(&self.0[child - 1]) {
                child -= 1;
            }
            self.0.swap(hole, child);
            hole = child;
        }
        if len.is_multiple_of(2) && child == (len - 2) / 2 {
            child = 2 * (child + 1);
            self.0.swap(hole, child - 1);
            hole = child - 1;
        }
        self.sift_up(0, hole);
        Some(top)
    }
}

impl PreInliner<'_> {
    fn func_size(&self, trie: &ContextTrie, node: NodeId) -> u64 {
        if self.opts.use_context_cost {
            let mut leaf_first =
                trie.frames_leaf_first(node).map(|(func, loc)| (self.name_ids[func as usize], loc));
            u64::from(self.sizes.func_size(&mut leaf_first))
        } else {
            trie.node(node).samples().map_or(0, |s| trie.samples[s].body.len() as u64)
        }
    }

    /// `getInlineCandidates`: the profiled children of the caller's trie node.
    fn push_candidates(&self, trie: &ContextTrie, queue: &mut CandidateQueue, caller: SampleId) {
        let caller_node = trie.node_of(caller);
        let caller_fs = &trie.samples[caller];
        for child in trie.children(caller_node) {
            let Some(callee) = trie.node(child).samples() else {
                continue;
            };
            let callee_fs = &trie.samples[callee];
            queue.push(Candidate {
                sample: callee,
                callsite_count: edge_weight(caller_fs, callee_fs, trie.node(child).callsite),
                size_cost: self.func_size(trie, child),
                guid: trie.guid(trie.node(child).func),
            });
        }
    }

    fn should_inline(&self, trie: &ContextTrie, c: &Candidate) -> bool {
        let was_inlined = trie.samples[c.sample].attributes & attr::WAS_INLINED != 0;
        if self.opts.replay_preinline {
            return was_inlined;
        }
        let cold_count = self.thresholds.cold;
        let mut threshold = self.cold_threshold;
        if c.callsite_count > cold_count {
            // Linear in the hotness between the cold threshold and the 10% cutoff, capped at 1.
            let upper = self.thresholds.p10_min_count as f64;
            let lower = cold_count as f64;
            let hotness = ((c.callsite_count as f64 - lower) / (upper - lower)).min(1.0);
            // `+ 1` keeps hot call sites inlinable when the cold threshold is 0. C++ converts the
            // double to `unsigned int` (saturating here where C++ is undefined).
            threshold = (f64::from(self.hot_threshold) * hotness * 100.0
                + f64::from(self.cold_threshold)
                + 1.0) as u32;
            if was_inlined {
                threshold =
                    threshold.wrapping_mul(self.opts.multiplier_for_previous_inlining as u32);
            }
        }
        c.size_cost < u64::from(threshold)
    }

    /// `processFunction`.
    fn process_function(&mut self, trie: &mut ContextTrie, func: FuncId) {
        let Some(base) = trie.base_samples_for(func) else {
            return;
        };
        let func_size = self.func_size(trie, trie.node_of(base)) as u32;
        let mut final_size = func_size;
        let size_limit = func_size
            .wrapping_mul(self.opts.inline_growth_limit)
            .min(self.limit_max)
            .max(self.opts.inline_limit_min);
        let mut queue = CandidateQueue::default();
        self.push_candidates(trie, &mut queue, base);
        while final_size < size_limit {
            let Some(c) = queue.pop() else { break };
            if self.should_inline(trie, &c) {
                trie.states[c.sample] |= state::INLINED;
                trie.samples[c.sample].attributes |= attr::SHOULD_BE_INLINED;
                final_size = final_size.wrapping_add(c.size_cost as u32);
                self.push_candidates(trie, &mut queue, c.sample);
                self.stats.inlined += 1;
            } else {
                self.stats.not_inlined += 1;
            }
        }
    }
}

/// Call count of a trie edge: the larger of the caller's call-target count for the callee at
/// the call site and the callee's head-sample estimate.
fn edge_weight(caller: &FunctionSamples, callee: &FunctionSamples, callsite: LineLocation) -> u64 {
    let callsite_count = caller
        .body
        .get(&callsite)
        .and_then(|b| b.call_targets.get(&callee.name))
        .copied()
        .unwrap_or(0);
    callsite_count.max(head_samples_estimate(callee))
}

/// `FunctionSamples::getHeadSamplesEstimate` for CS profiles.
pub(crate) fn head_samples_estimate(fs: &FunctionSamples) -> u64 {
    if fs.head_samples > 0 {
        return fs.head_samples;
    }
    let first_body = fs.body.iter().next();
    let first_callsite = fs.callsites.iter().next();
    let count = match (first_body, first_callsite) {
        (Some((bl, b)), cs) if cs.is_none_or(|(cl, _)| bl < cl) => b.count,
        (_, Some((_, callees))) => callees.values().map(head_samples_estimate).sum(),
        _ => 0,
    };
    if count > 0 { count } else { u64::from(fs.total_samples > 0) }
}

/// `CSPreInliner::buildTopDownOrder` on the profiled call graph (`graph`, edges up to the cold
/// threshold trimmed): Tarjan SCCs from a synthetic root, nodes and edges visited in
/// function-name order, members of each SCC optionally ordered by `scc_member_iterator`, whole
/// order reversed.
fn top_down_order(graph: &CallGraph, cold_threshold: u64, sort_scc: bool) -> Vec<FuncId> {
    let by_name = &graph.by_name;
    // Graph node 0 is the root; the function of rank `r` is node `r + 1`.
    let mut adj: Vec<Vec<(usize, u64)>> = vec![(1..=by_name.len()).map(|n| (n, 0)).collect()];
    for callees in &graph.edges {
        // Trimming stabilises the order from run to run; a threshold of 0 trims nothing.
        adj.push(
            callees
                .iter()
                .copied()
                .filter(|&(_, w)| cold_threshold == 0 || w > cold_threshold)
                .collect(),
        );
    }

    let mut order = Vec::new();
    for scc in tarjan_sccs(&adj) {
        let members = if sort_scc { sort_scc_members(&adj, &scc) } else { scc };
        order.extend(members.into_iter().filter(|&n| n != 0).map(|n| by_name[n - 1]));
    }
    order.reverse();
    order
}

/// `scc_iterator` from node 0: SCCs in reverse topological order, each in stack-pop order.
fn tarjan_sccs(adj: &[Vec<(usize, u64)>]) -> Vec<Vec<usize>> {
    const DONE: u32 = u32::MAX;
    let mut visit_num = vec![0u32; adj.len()];
    let mut counter = 0;
    let mut scc_stack = Vec::new();
    // (node, next child index, min visited)
    let mut visit_stack: Vec<(usize, usize, u32)> = Vec::new();
    let mut sccs = Vec::new();
    let mut visit = |n: usize,
                     visit_num: &mut Vec<u32>,
                     scc_stack: &mut Vec<usize>,
                     vs: &mut Vec<(usize, usize, u32)>| {
        counter += 1;
        visit_num[n] = counter;
        scc_stack.push(n);
        vs.push((n, 0, counter));
    };
    visit(0, &mut visit_num, &mut scc_stack, &mut visit_stack);
    while let Some(&(node, next, _)) = visit_stack.last() {
        if next < adj[node].len() {
            visit_stack.last_mut().expect("non-empty").1 += 1;
            let child = adj[node][next].0;
            if visit_num[child] == 0 {
                visit(child, &mut visit_num, &mut scc_stack, &mut visit_stack);
            } else {
                let top = visit_stack.last_mut().expect("non-empty");
                top.2 = top.2.min(visit_num[child]);
            }
            continue;
        }
        let (node, _, min) = visit_stack.pop().expect("non-empty");
        if let Some(parent) = visit_stack.last_mut() {
            parent.2 = parent.2.min(min);
        }
        if min != visit_num[node] {
            continue;
        }
        let mut scc = Vec::new();
        loop {
            let n = scc_stack.pop().expect("node on the SCC stack");
            visit_num[n] = DONE;
            scc.push(n);
            if n == node {
                break;
            }
        }
        sccs.push(scc);
    }
    sccs
}

/// `scc_member_iterator`: maximum spanning forest by Kruskal (edges by descending weight,
/// stable), then Kahn's walk from the forest roots, reversed.
fn sort_scc_members(adj: &[Vec<(usize, u64)>], scc: &[usize]) -> Vec<usize> {
    if scc.len() <= 1 {
        return scc.to_vec();
    }
    let members: HashSet<usize> = scc.iter().copied().collect();
    // Edges as (source, index in source's list); stable sort keeps insertion order on ties.
    let mut sorted: Vec<(usize, usize)> = Vec::new();
    for &n in scc {
        for (i, &(t, _)) in adj[n].iter().enumerate() {
            if members.contains(&t) {
                sorted.push((n, i));
            }
        }
    }
    sorted.sort_by(|a, b| adj[b.0][b.1].1.cmp(&adj[a.0][a.1].1));

    let mut group: HashMap<usize, usize> = scc.iter().map(|&n| (n, n)).collect();
    let mut rank: HashMap<usize, u32> = scc.iter().map(|&n| (n, 0)).collect();
    fn find(group: &mut HashMap<usize, usize>, n: usize) -> usize {
        let g = group[&n];
        if g == n {
            return n;
        }
        let root = find(group, g);
        group.insert(n, root);
        root
    }
    let mut mst: HashSet<(usize, usize)> = HashSet::new();
    for &(s, i) in &sorted {
        let t = adj[s][i].0;
        let (g1, g2) = (find(&mut group, s), find(&mut group, t));
        if g1 == g2 {
            continue;
        }
        if rank[&g1] < rank[&g2] {
            group.insert(g1, g2);
        } else {
            group.insert(g2, g1);
            if rank[&g1] == rank[&g2] {
                *rank.get_mut(&g1).expect("member") += 1;
            }
        }
        mst.insert((s, i));
    }

    let mut incoming: HashMap<usize, HashSet<(usize, usize)>> = HashMap::new();
    for &(s, i) in &mst {
        incoming.entry(adj[s][i].0).or_default().insert((s, i));
    }
    let mut visited: HashSet<usize> = HashSet::new();
    let mut queue = VecDeque::new();
    for &(s, _) in &sorted {
        if !visited.contains(&s) && incoming.get(&s).is_none_or(|e| e.is_empty()) {
            queue.push_back(s);
            visited.insert(s);
        }
    }
    let mut nodes = Vec::new();
    while let Some(n) = queue.pop_front() {
        nodes.push(n);
        for (i, &(t, _)) in adj[n].iter().enumerate() {
            let inc = incoming.entry(t).or_default();
            inc.remove(&(n, i));
            if mst.contains(&(n, i)) && inc.is_empty() {
                queue.push_back(t);
            }
        }
    }
    nodes.reverse();
    nodes
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::llvm::ContextFrame;
    use std::collections::BTreeMap;

    /// Sizes by context string; records every query.
    struct Sizes {
        sizes: HashMap<&'static str, u32>,
        queries: Mutex<Vec<String>>,
    }

    impl ContextSizeOracle for Sizes {
        /// Ids are places in `NAMES`.
        fn name_id(&self, name: &str) -> Option<u32> {
            NAMES.iter().position(|&n| n == name).map(|i| i as u32)
        }

        fn func_size(
            &self,
            leaf_first: &mut dyn Iterator<Item = (Option<u32>, LineLocation)>,
        ) -> u32 {
            let mut key: Vec<String> = leaf_first
                .enumerate()
                .map(|(i, (id, loc))| {
                    let name = NAMES[id.expect("a name of NAMES") as usize];
                    if i == 0 { name.to_string() } else { format!("{name}:{}", loc.line_offset) }
                })
                .collect();
            key.reverse();
            let key = key.join(" @ ");
            self.queries.lock().unwrap().push(key.clone());
            self.sizes[key.as_str()]
        }
    }

    /// The names the tests' contexts use.
    const NAMES: [&str; 3] = ["main", "foo", "bar"];

    fn context(frames: &[(&str, u32)]) -> Context {
        Context::new(
            frames
                .iter()
                .map(|&(f, l)| ContextFrame { func: f.into(), loc: LineLocation::new(l, 0) })
                .collect(),
        )
    }

    fn samples(name: &str, total: u64, head: u64, calls: &[(u32, &str, u64)]) -> FunctionSamples {
        let mut fs = FunctionSamples::new(name);
        fs.total_samples = total;
        fs.head_samples = head;
        fs.add_body(LineLocation::new(1, 0), head);
        for &(line, callee, n) in calls {
            fs.add_body(LineLocation::new(line, 0), n);
            fs.add_call_target(LineLocation::new(line, 0), &callee.into(), n);
        }
        fs
    }

    /// main (size 10, so limit max(100, 10 × 12) = 120) inlines foo (size 200, far below the
    /// hot threshold 1500 × 0.1 × 100 + 1); the budget is then spent, so foo's callee bar is
    /// not inlined and its context is merged into bar's base profile.
    #[test]
    fn context_sizes_drive_the_budget() {
        let mut profile = Profile::default();
        profile.kind.context_sensitive = true;
        profile
            .functions
            .insert(context(&[("main", 0)]), samples("main", 300, 0, &[(1, "foo", 100)]));
        profile.functions.insert(
            context(&[("main", 1), ("foo", 0)]),
            samples("foo", 200, 100, &[(2, "bar", 100)]),
        );
        profile
            .functions
            .insert(context(&[("main", 1), ("foo", 2), ("bar", 0)]), samples("bar", 100, 100, &[]));
        let sizes = Sizes {
            sizes: HashMap::from([
                ("main", 10),
                ("main:1 @ foo", 200),
                ("main:1 @ foo:2 @ bar", 1),
                ("bar", 1),
            ]),
            queries: Mutex::new(Vec::new()),
        };
        let thresholds = Thresholds { hot: 100, cold: 0, p10_min_count: 1000 };
        let (stats, _, kept, ()) = run_preinliner(
            &mut profile,
            &PostPassOptions::default(),
            &thresholds,
            &sizes,
            None,
            || (),
        );

        assert_eq!(stats, PreInlinerStats { inlined: 1, not_inlined: 0, contexts_dropped: 0 });
        assert_eq!(
            *sizes.queries.lock().unwrap(),
            ["main", "main:1 @ foo", "main:1 @ foo:2 @ bar", "bar"]
        );
        assert!(profile.kind.preinlined);
        assert!(profile.functions.is_empty());
        let kept: BTreeMap<Context, FunctionSamples> = kept.into_iter().collect();
        let keys: Vec<&Context> = kept.keys().collect();
        assert_eq!(
            keys,
            [
                &context(&[("bar", 0)]),
                &context(&[("main", 0)]),
                &context(&[("main", 1), ("foo", 0)])
            ]
        );
        let foo = &kept[&context(&[("main", 1), ("foo", 0)])];
        assert_eq!(foo.attributes, attr::SHOULD_BE_INLINED);
        assert_eq!(kept[&context(&[("bar", 0)])].attributes, 0);
    }

    #[test]
    fn head_estimate_prefers_head_then_first_location() {
        let mut fs = FunctionSamples::new("f");
        fs.total_samples = 7;
        assert_eq!(head_samples_estimate(&fs), 1);
        fs.add_body(LineLocation::new(3, 0), 0);
        fs.callsite_mut(LineLocation::new(2, 0), "g").add_body(LineLocation::new(1, 0), 4);
        fs.callsite_mut(LineLocation::new(2, 0), "h").head_samples = 5;
        assert_eq!(head_samples_estimate(&fs), 9);
        fs.add_body(LineLocation::new(1, 0), 6);
        assert_eq!(head_samples_estimate(&fs), 6);
        fs.head_samples = 2;
        assert_eq!(head_samples_estimate(&fs), 2);
    }
}
