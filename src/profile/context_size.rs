//! Machine-code size of each profiled function under each inline context
//! (llvm-profgen's `BinarySizeContextTracker`, reference §6.6 step 1), for the pre-inliner's
//! `--use-context-cost-for-preinliner`.
//!
//! In: the [`Binary`] and the functions the samples touch ([`profiled_functions`]). Out: a
//! [`ContextSizeTracker`] (the pre-inliner's `ContextSizeOracle`) holding, per symbolized inline
//! context, the bytes of the instructions there; on probe binaries inlinees that were optimized
//! away but left probes get a known size of 0.
//!
//! The stacks are symbolized the way llvm-profgen's `getFrameLocationStack` does it (not the
//! way profile contexts are built): linkage names as DWARF gives them, raw DWARF discriminators
//! (line-based binaries), and on probe binaries the probe id taken from the DWARF discriminator
//! as line offset with discriminator 0. A context whose call sites do not match is answered
//! from the longest matching prefix, as in LLVM.

use hashbrown::HashMap;
use rayon::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::addr::Vaddr;
use crate::aggregate::{ContextCounters, ContextKey};
use crate::binary::probes::{NodeId as ProbeNodeId, ProbeInfo};
use crate::binary::{Binary, FuncId, InlineSite, SourceFrame};
use crate::llvm::discriminator::probe_index_from_discriminator;
use crate::llvm::{ContextFrame, FuncName, LineLocation, callsite_hash_from_guid, md5_guid};
use crate::profile::VecMap;

/// Size of a function's machine code under a calling context, from the binary
/// (`ProfiledBinary::getFuncSizeForContext`), as the context currently stands in the
/// pre-inliner's trie. The implementation picks the size recorded for the longest matching
/// inline context, as LLVM does.
///
/// `Sync`: the pre-inliner reads it while other work runs beside it.
pub trait ContextSizeOracle: Sync {
    /// The oracle's id of a function name, `None` for one it has no size under: looked up once
    /// per name, not per frame of each query.
    fn name_id(&self, name: &str) -> Option<u32>;

    /// The size for a context given leaf first, each frame's function (by [`Self::name_id`])
    /// with its call site (the leaf's location is ignored). A frame is taken only while the
    /// context still matches.
    fn func_size(&self, leaf_first: &mut dyn Iterator<Item = (Option<u32>, LineLocation)>) -> u32;
}

/// The size oracle for `--use-context-cost-for-preinliner=0`, where sizes come from the profile
/// (number of body samples) and the oracle is never consulted. With context cost on it would
/// make every callee free to inline.
pub struct NoContextSizes;

impl ContextSizeOracle for NoContextSizes {
    fn name_id(&self, _name: &str) -> Option<u32> {
        None
    }

    fn func_size(&self, _leaf_first: &mut dyn Iterator<Item = (Option<u32>, LineLocation)>) -> u32 {
        0
    }
}

/// A trie keyed leaf first: the function itself at (0, 0), then each caller at its call site.
#[derive(Debug)]
pub struct ContextSizeTracker {
    /// Node 0 is the root, whose children are kept by function in `roots`, not in its map.
    nodes: Vec<SizeNode>,
    /// Id of each name recorded (an index into `guids`), by the address of its (shared) text:
    /// the binary's inline stacks share one name per function, so each is looked up by text
    /// and hashed once, not once per instruction context. The name is kept so that its address
    /// stays its own.
    ids: HashMap<usize, (FuncName, u32)>,
    /// The same ids by text, for queries: the pre-inliner's contexts name functions with other
    /// allocations, and a name never recorded has no node.
    names: HashMap<FuncName, u32>,
    /// GUID (`MD5Hash`) of each name, by id.
    guids: Vec<u64>,
    /// The root's child of each name, by id (0 for none): one per function (its key is the
    /// function's at (0, 0)), thousands, each found again for every context whose leaf it is.
    /// A sorted map of them shifted its tail at each new function.
    roots: Vec<usize>,
    /// The root's first child in key order, with its key: what [`Self::first_child`] of the
    /// root answers.
    first_root: Option<(ChildKey, usize)>,
}

/// A child's key: call-site hash, name id and call site.
type ChildKey = (u64, u32, LineLocation);

#[derive(Debug, Default)]
struct SizeNode {
    /// `None` until an instruction (or a known-empty inlinee) is recorded here.
    size: Option<u32>,
    /// Ordered by call-site hash like LLVM's `std::map`, which the sibling fallback relies on;
    /// the name id and location only break (theoretical) ties. Most nodes have a child or two:
    /// a sorted vector, not a B-tree node each. Keys are integers: finding a child copies no
    /// name.
    children: VecMap<ChildKey, usize>,
}

impl Default for ContextSizeTracker {
    fn default() -> Self {
        ContextSizeTracker {
            nodes: vec![SizeNode::default()],
            ids: HashMap::new(),
            names: HashMap::new(),
            guids: Vec::new(),
            roots: Vec::new(),
            first_root: None,
        }
    }
}

impl ContextSizeTracker {
    /// `addInstructionForContext`: `inline_stack` is the instruction's symbolized inline stack,
    /// outermost function first; every frame but the last carries its call-site location (the
    /// last frame's location is ignored).
    pub fn add_instruction(&mut self, inline_stack: &[ContextFrame], size: u32) {
        let node = self.get_or_create(inline_stack.iter().rev().map(|f| (&f.func, f.loc)));
        let n = &mut self.nodes[node];
        n.size = Some(n.size.unwrap_or(0).saturating_add(size));
    }

    /// `trackInlineesOptimizedAway`: an inlinee that has pseudo probes but no instructions left
    /// gets a known size of 0 (so it is free to inline). The stack is leaf first, each frame's
    /// function with its call site in the next (the leaf's location is ignored): the probe
    /// inline tree gives it in that order, and its contexts are not made into frames.
    pub fn mark_known(&mut self, leaf_first: &[(&FuncName, LineLocation)]) {
        let node = self.get_or_create(leaf_first.iter().copied());
        self.nodes[node].size.get_or_insert(0);
    }

    /// The node of an inline stack given leaf first (see [`mark_known`](Self::mark_known)).
    fn get_or_create<'a>(
        &mut self,
        leaf_first: impl Iterator<Item = (&'a FuncName, LineLocation)>,
    ) -> usize {
        let mut node = 0;
        for (i, (func, frame_loc)) in leaf_first.enumerate() {
            let (names, guids, roots) = (&mut self.names, &mut self.guids, &mut self.roots);
            let (_, id) = *self.ids.entry(func.as_ptr() as usize).or_insert_with(|| {
                // Hashed once per text: the binary's units each share their own copy of a name.
                let id = *names.entry(func.clone()).or_insert_with(|| {
                    guids.push(md5_guid(func));
                    roots.push(0);
                    (guids.len() - 1) as u32
                });
                (func.clone(), id)
            });
            let fresh = self.nodes.len();
            if i == 0 {
                node = self.roots[id as usize];
                if node == 0 {
                    let key = Self::key(&self.guids, id, LineLocation::default());
                    if self.first_root.is_none_or(|(first, _)| key < first) {
                        self.first_root = Some((key, fresh));
                    }
                    self.roots[id as usize] = fresh;
                    self.nodes.push(SizeNode::default());
                    node = fresh;
                }
                continue;
            }
            let key = Self::key(&self.guids, id, frame_loc);
            // One search: a new child goes where it ended.
            let slot = self.nodes[node].children.get_or_insert_with(&key, || key);
            if *slot == 0 {
                *slot = fresh;
            }
            node = *slot;
            if node == fresh {
                self.nodes.push(SizeNode::default());
            }
        }
        node
    }

    fn key(guids: &[u64], id: u32, loc: LineLocation) -> ChildKey {
        (callsite_hash_from_guid(guids[id as usize], loc), id, loc)
    }

    /// The child of `node` for function `id` at call site `loc` (the root's at (0, 0)).
    fn child(&self, node: usize, id: Option<u32>, loc: LineLocation) -> Option<usize> {
        let id = id?;
        if node == 0 {
            return Some(self.roots[id as usize]).filter(|&n| n != 0);
        }
        self.nodes[node].children.get(&Self::key(&self.guids, id, loc)).copied()
    }

    /// The first child of `node` in key order.
    fn first_child(&self, node: usize) -> Option<usize> {
        match node {
            0 => self.first_root.map(|(_, n)| n),
            _ => self.nodes[node].children.values().next().copied(),
        }
    }
}

impl ContextSizeOracle for ContextSizeTracker {
    fn name_id(&self, name: &str) -> Option<u32> {
        self.names.get(name).copied()
    }

    /// `getFuncSizeForContext`: walk the context from the leaf outwards, keeping the size of the
    /// deepest matching node that has one; failing that, descend from the last matching node
    /// through first children (the function's size under some other context). No size at all
    /// (an LLVM assertion, undefined in release builds) gives 0.
    fn func_size(&self, leaf_first: &mut dyn Iterator<Item = (Option<u32>, LineLocation)>) -> u32 {
        let mut size = None;
        let mut node = Some(0);
        let mut last_found = 0;
        for (i, (id, frame_loc)) in leaf_first.enumerate() {
            let Some(current) = node else { break };
            last_found = current;
            let loc = if i == 0 { LineLocation::default() } else { frame_loc };
            node = self.child(current, id, loc);
            if let Some(n) = node
                && let Some(s) = self.nodes[n].size
            {
                size = Some(s);
            }
        }
        if size.is_none() {
            let mut current = node.unwrap_or(last_found);
            while size.is_none() {
                let Some(first) = self.first_child(current) else { break };
                current = first;
                size = self.nodes[current].size;
            }
        }
        size.unwrap_or(0)
    }
}

/// The functions llvm-profgen calls "profiled" (`collectFunctionsFromRawProfile`): those
/// containing a range start, a branch source or a branch target of any context, and for probe
/// binaries (address-keyed contexts) every call-stack address. Sorted, no duplicates.
///
/// The addresses are marked in a bitmap of the code (a bit a byte: SQLite's 1.3 MB of text take
/// 160 KB) on rayon's current pool, then each function range's span (the addresses
/// [`Binary::func_range`] answers with it) is looked up there: one pass over the counters without
/// a search per address, so that it is cheap enough to run before the counters are freed rather
/// than beside the profile's build. The bitmap covers [`Binary::dense_code_extent`], not the
/// function ranges' extent (a symbol's size or a DWARF range can stretch that over the whole
/// address space); an address outside it is searched for.
pub fn profiled_functions(binary: &Binary, counters: &ContextCounters) -> Vec<FuncId> {
    let extent = binary.dense_code_extent();
    let (base, len) = (extent.start.0, extent.end.0 - extent.start.0);
    let marks: Vec<AtomicU64> = (0..len.div_ceil(64)).map(|_| AtomicU64::new(0)).collect();
    // Each fold keeps the functions of the addresses it searched for (a repeat of the last one
    // skipped).
    let searched: Vec<FuncId> = counters
        .by_context
        .par_iter()
        .fold(Vec::new, |mut searched, (key, c)| {
            let mut mark = |a: Vaddr| match a.0.checked_sub(base).filter(|&at| at < len) {
                Some(at) => {
                    let (word, bit) = (&marks[(at / 64) as usize], 1 << (at % 64));
                    // Addresses repeat across contexts: most are marked already, and a load
                    // shares the line.
                    if word.load(Relaxed) & bit == 0 {
                        word.fetch_or(bit, Relaxed);
                    }
                }
                None => {
                    if let Some(r) = binary.func_range(a)
                        && searched.last() != Some(&r.func)
                    {
                        searched.push(r.func);
                    }
                }
            };
            if let ContextKey::Addrs(stack) = key {
                stack.iter().for_each(|&a| mark(a));
            }
            c.ranges.keys().for_each(|&(start, _)| mark(start));
            for &(src, dst) in c.branches.keys() {
                mark(src);
                mark(dst);
            }
            searched
        })
        .flatten_iter()
        .collect();
    // Whether any address of `span` in the bitmap is marked, a word at a time.
    let marked = |span: std::ops::Range<Vaddr>| {
        let lo = span.start.0.max(base) - base;
        let hi = span.end.0.min(extent.end.0).max(base) - base;
        lo < hi
            && (lo / 64..=(hi - 1) / 64).any(|w| {
                let (from, to) = (lo.max(w * 64) - w * 64, hi.min(w * 64 + 64) - w * 64);
                let mask = (u64::MAX >> (64 - to)) & (u64::MAX << from);
                marks[w as usize].load(Relaxed) & mask != 0
            })
    };
    let mut funcs: Vec<FuncId> = binary
        .func_range_spans()
        .filter(|(_, span)| marked(span.clone()))
        .map(|(r, _)| r.func)
        .chain(searched)
        .collect();
    funcs.sort_unstable();
    funcs.dedup();
    funcs
}

/// `computeSizeForProfiledFunctions`: the size tracker for `profiled` (see the module
/// documentation).
pub fn context_sizes(binary: &Binary, profiled: &[FuncId]) -> ContextSizeTracker {
    let mut tracker = ContextSizeTracker::default();
    for (context, size) in instruction_bytes_per_context(binary, profiled) {
        tracker.add_instruction(&context, size);
    }
    if let Some(probes) = binary.probes() {
        inlinees_with_probes(binary, probes, profiled, |leaf_first| tracker.mark_known(leaf_first));
    }
    tracker
}

/// `computeInlinedContextSizeForFunc` without the tracker: the inline contexts
/// (`getFrameLocationStack`, root first) of every instruction in the ranges of `profiled`, with
/// the bytes of the instructions under each. A context may come more than once (its sizes add
/// up in the tracker, in any order). Runs of functions are symbolized on rayon's current pool.
fn instruction_bytes_per_context(
    binary: &Binary,
    profiled: &[FuncId],
) -> Vec<(Vec<ContextFrame>, u32)> {
    let probe_discriminators = binary.probes().is_some();
    let run = profiled.len().div_ceil(4 * rayon::current_num_threads()).max(1);
    profiled
        .par_chunks(run)
        .flat_map_iter(|funcs| instruction_bytes(binary, funcs, probe_discriminators))
        .collect()
}

/// [`instruction_bytes_per_context`] for `funcs` (leaf location (0, 0)).
///
/// The context of an instruction is that of its [`InlineSite`] (the leaf location does not
/// count): the bytes are summed per site, in order of first appearance, and each site's frames
/// made once, without the binary's line tables or inline-stack cache (on probe binaries nothing
/// after the pre-inliner reads them, and cached they would stay resident through it).
fn instruction_bytes(
    binary: &Binary,
    funcs: &[FuncId],
    probe_discriminators: bool,
) -> Vec<(Vec<ContextFrame>, u32)> {
    let mut index: HashMap<InlineSite, usize> = HashMap::new();
    let mut sites: Vec<(InlineSite, u32)> = Vec::new();
    // Neighbouring instructions mostly share a site.
    let mut last: Option<(InlineSite, usize)> = None;
    for &f in funcs {
        for &(start, end) in &binary.function(f).ranges {
            let Some(last_byte) = end.0.checked_sub(1).filter(|&l| l >= start.0) else { continue };
            for (site, size) in binary.inst_sites_in(start, Vaddr(last_byte)) {
                let i = match last {
                    Some((prev, i)) if prev == site => i,
                    _ => *index.entry(site).or_insert_with(|| {
                        sites.push((site, 0));
                        sites.len() - 1
                    }),
                };
                sites[i].1 = sites[i].1.saturating_add(u32::from(size));
                last = Some((site, i));
            }
        }
    }
    sites
        .into_iter()
        .map(|(site, size)| {
            let mut context = location_stack(&binary.site_frames(site), probe_discriminators);
            if let Some(leaf) = context.last_mut() {
                leaf.loc = LineLocation::default();
            }
            (context, size)
        })
        .collect()
}

/// `trackInlineesOptimizedAway` for each profiled function's top-level probe record: `each`
/// takes the context (leaf first, as [`ContextSizeTracker::mark_known`] does) of every
/// inline-tree node that kept probes, which the tracker marks as known even when no
/// instruction is left there. One at a time, in one buffer of borrowed names: a vector of
/// frames made for each (allocated, its names cloned, reversed for the tracker to walk back)
/// cost 3.4M instructions on SQLite.
///
/// llvm-profgen keeps one top-level record per function name (`TopLevelProbeFrameMap`, the last
/// one in `unordered_map` order, which for small maps is the first decoded); this takes the
/// first decoded record whose GUID and description name match the function.
fn inlinees_with_probes(
    binary: &Binary,
    probes: &ProbeInfo,
    profiled: &[FuncId],
    mut each: impl FnMut(&[(&FuncName, LineLocation)]),
) {
    let mut top_level: HashMap<&str, ProbeNodeId> = HashMap::new();
    for (i, node) in probes.nodes().iter().enumerate().skip(1) {
        if node.parent == ProbeNodeId::ROOT
            && let Some(desc) = probes.desc(node.guid)
        {
            top_level.entry(&*desc.name).or_insert(ProbeNodeId(i as u32));
        }
    }
    let mut selected: Vec<ProbeNodeId> = profiled
        .iter()
        .filter_map(|&f| {
            let name = &*binary.function(f).name;
            let &top = top_level.get(name)?;
            // The decoder only keeps records of profiled functions' GUIDs.
            (probes.node(top).guid == md5_guid(name)).then_some(top)
        })
        .collect();
    selected.sort_unstable();
    // Each node's function name, looked up once (by GUID, a search): nodes share their callers.
    let names: Vec<Option<FuncName>> = (probes.nodes().iter())
        .map(|n| probes.desc(n.guid).map(|d| d.name.clone().into()))
        .collect();
    let mut context: Vec<(&FuncName, LineLocation)> = Vec::new();
    for i in 1..probes.nodes().len() {
        let id = ProbeNodeId(i as u32);
        if probes.node_probes(id).is_empty()
            || selected.binary_search(&probes.top_level_node(id)).is_err()
        {
            continue;
        }
        // Leaf first: each caller frame's location is the call site of the frame below it.
        context.clear();
        let mut cur = id;
        let mut loc = LineLocation::default();
        let complete = loop {
            let n = probes.node(cur);
            let Some(func) = &names[cur.0 as usize] else { break false };
            context.push((func, loc));
            if n.parent == ProbeNodeId::ROOT {
                break true;
            }
            loc = LineLocation::new(n.callsite, 0);
            cur = n.parent;
        };
        if complete {
            each(&context);
        }
    }
}

/// `getFrameLocationStack(addr, UseProbeDiscriminator)` from the cached inline stack.
fn location_stack(stack: &[SourceFrame], probe_discriminators: bool) -> Vec<ContextFrame> {
    stack
        .iter()
        .map(|f| ContextFrame {
            func: f.func_name.clone().into(),
            loc: if probe_discriminators {
                LineLocation::new(probe_index_from_discriminator(f.discriminator), 0)
            } else {
                LineLocation::new(f.line_offset, f.discriminator)
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llvm::callsite_hash;

    /// [`ContextSizeOracle::func_size`] of `context`, root first, leaf last with location (0, 0).
    fn size_for_context(sizes: &impl ContextSizeOracle, context: &[ContextFrame]) -> u32 {
        sizes.func_size(&mut context.iter().rev().map(|f| (sizes.name_id(&f.func), f.loc)))
    }

    /// `"main:3 @ foo:2.1 @ bar"` → frames, root first.
    fn ctx(s: &str) -> Vec<ContextFrame> {
        s.split(" @ ")
            .map(|f| {
                let (func, loc) = f.split_once(':').unwrap_or((f, "0"));
                let (line, disc) = loc.split_once('.').unwrap_or((loc, "0"));
                ContextFrame {
                    func: func.into(),
                    loc: LineLocation::new(line.parse().unwrap(), disc.parse().unwrap()),
                }
            })
            .collect()
    }

    fn show(context: &[ContextFrame]) -> String {
        let n = context.len();
        let frames: Vec<String> = context
            .iter()
            .enumerate()
            .map(|(i, f)| match (i + 1 == n, f.loc.discriminator) {
                (true, _) => f.func.to_string(),
                (false, 0) => format!("{}:{}", f.func, f.loc.line_offset),
                (false, d) => format!("{}:{}.{d}", f.func, f.loc.line_offset),
            })
            .collect();
        frames.join(" @ ")
    }

    /// A leaf-first stack ([`ContextSizeTracker::mark_known`]) as frames, root first.
    fn root_first(leaf_first: &[(&FuncName, LineLocation)]) -> Vec<ContextFrame> {
        let frames = leaf_first.iter().rev();
        frames.map(|&(func, loc)| ContextFrame { func: func.clone(), loc }).collect()
    }

    /// [`ContextSizeTracker::mark_known`] on a stack given root first.
    fn mark_known(tracker: &mut ContextSizeTracker, context: &[ContextFrame]) {
        let leaf_first: Vec<_> = context.iter().rev().map(|f| (&f.func, f.loc)).collect();
        tracker.mark_known(&leaf_first);
    }

    /// What [`context_sizes`] feeds the tracker, merged per context and sorted.
    fn recorded(binary: &Binary, profiled: &[FuncId]) -> Vec<(String, u32)> {
        let mut merged: std::collections::BTreeMap<String, u32> = std::collections::BTreeMap::new();
        for (context, size) in instruction_bytes_per_context(binary, profiled) {
            *merged.entry(show(&context)).or_default() += size;
        }
        if let Some(probes) = binary.probes() {
            inlinees_with_probes(binary, probes, profiled, |leaf_first| {
                merged.entry(show(&root_first(leaf_first))).or_default();
            });
        }
        merged.into_iter().collect()
    }

    #[test]
    fn longest_matching_context_wins() {
        let mut s = ContextSizeTracker::default();
        s.add_instruction(&ctx("main:3 @ foo:2 @ bar"), 10);
        s.add_instruction(&ctx("foo:2 @ bar"), 20);
        s.add_instruction(&ctx("bar:7"), 30);
        s.add_instruction(&ctx("bar:9"), 20);
        assert_eq!(size_for_context(&s, &ctx("main:3 @ foo:2 @ bar")), 10);
        // More callers than recorded: the deepest recorded context.
        assert_eq!(size_for_context(&s, &ctx("start:1 @ main:3 @ foo:2 @ bar")), 10);
        // A different call site in main: the match stops at `foo:2 @ bar`.
        assert_eq!(size_for_context(&s, &ctx("main:4 @ foo:2 @ bar")), 20);
        // A discriminator is part of the call site; the leaf location is not.
        assert_eq!(size_for_context(&s, &ctx("foo:2.1 @ bar")), 50);
    }

    /// Without a size on the matched path, LLVM pivots to the first child (lowest
    /// `getCallSiteHash`) of the deepest matched node, repeatedly, until one has a size.
    #[test]
    fn sibling_pivot_takes_the_first_child_in_hash_order() {
        let hash = |f: &str, line: u32| callsite_hash(f, LineLocation::new(line, 0));
        let mut s = ContextSizeTracker::default();
        s.add_instruction(&ctx("a:1 @ baz"), 7);
        s.add_instruction(&ctx("b:2 @ baz"), 9);
        assert_ne!(hash("a", 1), hash("b", 2));
        let first = if hash("a", 1) < hash("b", 2) { 7 } else { 9 };
        // `baz` matches (without a size), `c:5` does not: pivot below `baz`.
        assert_eq!(size_for_context(&s, &ctx("c:5 @ baz")), first);
        assert_eq!(size_for_context(&s, &ctx("baz")), first);

        // The pivot descends through size-less nodes.
        let mut s = ContextSizeTracker::default();
        s.add_instruction(&ctx("x:1 @ y:2 @ qux"), 4);
        assert_eq!(size_for_context(&s, &ctx("qux")), 4);
        // A partial match pivots from the last matched node: `y:2 @ qux`, then `x:1`.
        assert_eq!(size_for_context(&s, &ctx("z:8 @ y:2 @ qux")), 4);
        // An unknown function pivots from the root (LLVM asserts instead).
        assert_eq!(size_for_context(&s, &ctx("unknown")), 4);
        // A known size of 0 is not replaced by another context's.
        mark_known(&mut s, &ctx("main:3 @ qux"));
        assert_eq!(size_for_context(&s, &ctx("main:3 @ qux")), 0);
    }

    fn corpus_binary(case: &str) -> Binary {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("perf-samples")
            .join(case)
            .join(case);
        Binary::load(&path, &Default::default()).unwrap()
    }

    fn all_dwarf_functions(binary: &Binary) -> Vec<FuncId> {
        (0..binary.functions().len() as u32)
            .map(FuncId)
            .filter(|&f| binary.function(f).source == crate::binary::FuncSource::Dwarf)
            .collect()
    }

    /// Line-based binary without inlining: each function's size is its DWARF range
    /// (run: 0x401130..0x4011a9, main: 0x4011b0..0x4013f7).
    #[test]
    fn line_based_binary_sizes_are_instruction_bytes() {
        let b = corpus_binary("switch_table");
        let all = all_dwarf_functions(&b);
        assert_eq!(recorded(&b, &all), [("main".to_string(), 583), ("run".to_string(), 121)]);
        let s = context_sizes(&b, &all);
        assert_eq!(size_for_context(&s, &ctx("main:6 @ run")), 121);
    }

    /// Probe binary: call sites are probe ids from the DWARF discriminators; `noop` left no
    /// instructions, only its probe, and gets a known size of 0. `work` is push/mov/pop/ret
    /// (6 bytes), `add1` its lea/inc (5 bytes).
    #[test]
    fn probe_binary_sizes_include_optimized_away_inlinees() {
        let b = corpus_binary("optimized_away");
        let uniq = ".__uniq.7287361354840707079468367352127977448";
        let expected = [
            ("main".to_string(), 71),
            ("work".to_string(), 6),
            (format!("work:2 @ _ZL4noopi{uniq}"), 0),
            (format!("work:3 @ _ZL4add1i{uniq}"), 5),
        ];
        assert_eq!(recorded(&b, &all_dwarf_functions(&b)), expected);
        let s = context_sizes(&b, &all_dwarf_functions(&b));
        assert_eq!(size_for_context(&s, &ctx(&format!("main:5 @ work:2 @ _ZL4noopi{uniq}"))), 0);
        // Only profiled functions are measured.
        let work: Vec<FuncId> = all_dwarf_functions(&b)
            .into_iter()
            .filter(|&f| &*b.function(f).name == "work")
            .collect();
        assert_eq!(recorded(&b, &work), expected[1..]);
    }

    /// Call sites keep their raw DWARF discriminators (6 and 8 = base 3 and 4), as in
    /// llvm-profgen-19: a query with the base discriminator misses and pivots to the first
    /// copy in hash order (tests/fixtures/context_size/README.md).
    #[test]
    fn line_based_call_sites_keep_raw_discriminators() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/context_size/disc");
        let b = Binary::load(&path, &Default::default()).unwrap();
        let all = all_dwarf_functions(&b);
        let recorded = recorded(&b, &all);
        let size_of = |c: &str| recorded.iter().find(|(k, _)| k == c).map(|&(_, n)| n);
        assert_eq!(size_of("work:2.6 @ big"), Some(246), "{recorded:?}");
        assert_eq!(size_of("work:2.8 @ big"), Some(170), "{recorded:?}");
        let s = context_sizes(&b, &all);
        assert_eq!(size_for_context(&s, &ctx("main:5.2 @ work:2.6 @ big")), 246);
        assert_eq!(size_for_context(&s, &ctx("main:5.2 @ work:2.8 @ big")), 170);
        assert_eq!(size_for_context(&s, &ctx("main:5.2 @ work:2.3 @ big")), 246);
        assert_eq!(size_for_context(&s, &ctx("main:5.2 @ work:2.4 @ big")), 246);
    }

    /// Range starts, branch ends and (address-keyed contexts only) call-stack addresses.
    #[test]
    fn profiled_functions_are_those_the_counters_touch() {
        let b = corpus_binary("switch_table");
        let names = |c: &ContextCounters| -> Vec<String> {
            let mut v: Vec<String> = profiled_functions(&b, c)
                .into_iter()
                .map(|f| b.function(f).name.to_string())
                .collect();
            v.sort();
            v
        };
        let (start, run, main) = (Vaddr(0x401050), Vaddr(0x401140), Vaddr(0x401200));
        let mut c = ContextCounters::default();
        c.counters_mut(ContextKey::Frames(Vec::new())).add_range(run, Vaddr(0x401150), 3);
        assert_eq!(names(&c), ["run"]);
        c.counters_mut(ContextKey::Frames(Vec::new())).add_branch(main, Vaddr(0x401130), 1);
        assert_eq!(names(&c), ["main", "run"]);
        let mut c = ContextCounters::default();
        c.counters_mut(ContextKey::Addrs(vec![start, Vaddr::EXTERNAL])).add_range(run, run, 1);
        assert_eq!(names(&c), ["_start", "run"]);
    }

    fn stack(frames: &[(&str, u32)]) -> Vec<ContextFrame> {
        frames
            .iter()
            .map(|&(f, l)| ContextFrame { func: f.into(), loc: LineLocation::new(l, 0) })
            .collect()
    }

    #[test]
    fn longest_recorded_context_wins() {
        let mut sizes = ContextSizeTracker::default();
        // foo on its own: 2 instructions; foo inlined into main at line 3: 5 bytes.
        sizes.add_instruction(&stack(&[("foo", 7)]), 4);
        sizes.add_instruction(&stack(&[("foo", 8)]), 6);
        sizes.add_instruction(&stack(&[("main", 3), ("foo", 1)]), 5);
        let ctx = |frames: &[(&str, u32)]| {
            let mut s = stack(frames);
            s.last_mut().unwrap().loc = LineLocation::default();
            s
        };
        assert_eq!(size_for_context(&sizes, &ctx(&[("foo", 0)])), 10);
        assert_eq!(size_for_context(&sizes, &ctx(&[("main", 3), ("foo", 0)])), 5);
        // Deeper than anything recorded: the deepest match with a size.
        assert_eq!(size_for_context(&sizes, &ctx(&[("x", 1), ("main", 3), ("foo", 0)])), 5);
        // Other call site: the context-less size.
        assert_eq!(size_for_context(&sizes, &ctx(&[("main", 4), ("foo", 0)])), 10);
    }

    #[test]
    fn falls_back_to_a_size_under_another_context_then_zero() {
        let mut sizes = ContextSizeTracker::default();
        // bar exists only inlined into main.
        sizes.add_instruction(&stack(&[("main", 2), ("bar", 1)]), 3);
        mark_known(&mut sizes, &stack(&[("main", 5), ("gone", 0)]));
        let ctx = stack(&[("other", 1), ("bar", 0)]);
        assert_eq!(size_for_context(&sizes, &ctx), 3);
        assert_eq!(size_for_context(&sizes, &stack(&[("main", 5), ("gone", 0)])), 0);
        let empty = ContextSizeTracker::default();
        assert_eq!(size_for_context(&empty, &stack(&[("unknown", 0)])), 0);
    }
}
