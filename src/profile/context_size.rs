//! Machine-code size of each profiled function under each inline context
//! (llvm-profgen's `BinarySizeContextTracker`, reference §6.6 step 1), for the pre-inliner's
//! `--use-context-cost-for-preinliner`.
//!
//! In: the [`Binary`] and the functions the samples touch ([`profiled_functions`]). Out:
//! [`ContextSizes`], a [`ContextSizeOracle`]: every instruction of a profiled function adds its
//! bytes to the trie node of its symbolized inline stack, stored callee first ("reverse" trie:
//! the root's children are functions, their children the callers they were inlined into, …), so
//! that a query finds the longest matching inline context. On probe binaries inlinees that
//! were optimized away but left probes get a known size of 0.
//!
//! The stacks are symbolized the way llvm-profgen's `getFrameLocationStack` does it (not the
//! way profile contexts are built): linkage names as DWARF gives them, raw DWARF discriminators
//! (line-based binaries), and on probe binaries the probe id taken from the DWARF discriminator
//! as line offset with discriminator 0. A context whose call sites do not match is answered
//! from the longest matching prefix, as in LLVM.

use std::sync::Arc;

use hashbrown::HashMap;

use crate::addr::Vaddr;
use crate::aggregate::{ContextCounters, ContextKey};
use crate::binary::probes::{NodeId as ProbeNodeId, ProbeInfo};
use crate::binary::{Binary, FuncId, SourceFrame};
use crate::postpass::trie::{ContextTrie, NodeId, ROOT};
use crate::postpass::ContextSizeOracle;
use crate::profile::{ContextFrame, LineLocation};

/// The functions llvm-profgen calls "profiled" (`collectFunctionsFromRawProfile`): those
/// containing a range start, a branch source or a branch target of any context, and for probe
/// binaries (address-keyed contexts) every call-stack address. Sorted, no duplicates.
pub fn profiled_functions(binary: &Binary, counters: &ContextCounters) -> Vec<FuncId> {
    let mut funcs = Vec::new();
    let mut add = |a: Vaddr| {
        if let Some(r) = binary.func_range(a) {
            funcs.push(r.func);
        }
    };
    for (key, c) in &counters.by_context {
        if let ContextKey::Addrs(stack) = key {
            stack.iter().for_each(|&a| add(a));
        }
        c.ranges.keys().for_each(|&(start, _)| add(start));
        for &(src, dst) in c.branches.keys() {
            add(src);
            add(dst);
        }
    }
    funcs.sort_unstable();
    funcs.dedup();
    funcs
}

/// `PseudoProbeDwarfDiscriminator::extractProbeIndex` (LLVM 19): bits [18:3], or [15:3] when
/// bit 28 says a DWARF base discriminator is packed into [18:16].
fn probe_index_from_discriminator(d: u32) -> u32 {
    if d & 0x1000_0000 != 0 { (d >> 3) & 0x1fff } else { (d >> 3) & 0xffff }
}

/// Function sizes per inline context; see the module documentation.
pub struct ContextSizes {
    trie: ContextTrie,
    /// Per trie node: the bytes recorded for that context, `None` when nothing was recorded
    /// (LLVM's `std::optional<uint32_t> FuncSize`).
    sizes: Vec<Option<u32>>,
}

impl Default for ContextSizes {
    fn default() -> Self {
        ContextSizes { trie: ContextTrie::new(), sizes: vec![None] }
    }
}

impl ContextSizes {
    /// `computeSizeForProfiledFunctions`: every instruction of every range of `profiled`, plus
    /// `trackInlineesOptimizedAway` for their top-level probe records on probe binaries.
    pub fn build(binary: &Binary, profiled: &[FuncId]) -> ContextSizes {
        let mut sizes = ContextSizes::default();
        let probes = binary.probes();
        // Neighbouring instructions mostly differ at most in the leaf location, which the trie
        // ignores; other repeats are found by the address of the binary's shared stack (kept
        // alive in the map, so the address stays unique). Each distinct context walks the trie
        // once.
        let mut node_of_stack: HashMap<*const SourceFrame, (Arc<[SourceFrame]>, NodeId)> = HashMap::new();
        let mut last: Option<(Arc<[SourceFrame]>, NodeId)> = None;
        for &f in profiled {
            for &(start, end) in &binary.function(f).ranges {
                let Some(last_byte) = end.0.checked_sub(1).filter(|&l| l >= start.0) else { continue };
                for addr in binary.insts_in(start, Vaddr(last_byte)) {
                    let stack = binary.inline_stack(addr);
                    let node = match &last {
                        Some((s, n)) if same_context(s, &stack) => *n,
                        _ => {
                            let n = match node_of_stack.get(&stack.as_ptr()) {
                                Some(&(_, n)) => n,
                                None => {
                                    let frames = location_stack(&stack, probes.is_some());
                                    let n = sizes.node_for_context(&frames);
                                    node_of_stack.insert(stack.as_ptr(), (stack.clone(), n));
                                    n
                                }
                            };
                            last = Some((stack, n));
                            n
                        }
                    };
                    let size = binary.inst_size(addr).map_or(0, |s| u32::try_from(s).unwrap_or(u32::MAX));
                    sizes.add_size(node, size);
                }
            }
        }
        if let Some(probes) = probes {
            sizes.track_inlinees_optimized_away(binary, probes, profiled);
        }
        sizes
    }

    /// `addInstructionForContext`: adds `size` bytes to `context` (root first; the leaf
    /// frame's location is ignored). Size 0 marks the context as known.
    pub fn add_instruction_for_context(&mut self, context: &[ContextFrame], size: u32) {
        let node = self.node_for_context(context);
        self.add_size(node, size);
    }

    /// The reverse-trie node of `context`: leaf function at (0, 0) under the root, then each
    /// caller at its call site.
    fn node_for_context(&mut self, context: &[ContextFrame]) -> NodeId {
        let mut node = ROOT;
        for (i, frame) in context.iter().enumerate().rev() {
            let loc = if i + 1 == context.len() { LineLocation::default() } else { frame.loc };
            node = self.trie.get_or_create_child(node, loc, &frame.func);
        }
        self.sizes.resize(self.trie.node_count(), None);
        node
    }

    fn add_size(&mut self, node: NodeId, size: u32) {
        let s = self.sizes[node].get_or_insert(0);
        *s = s.saturating_add(size);
    }

    /// `trackInlineesOptimizedAway` for each profiled function's top-level probe record: every
    /// inline-tree node that kept probes gets its context marked known (size 0 added).
    ///
    /// llvm-profgen keeps one top-level record per function name (`TopLevelProbeFrameMap`, the
    /// last one in `unordered_map` order, which for small maps is the first decoded); this
    /// takes the first decoded record whose GUID and description name match the function.
    fn track_inlinees_optimized_away(&mut self, binary: &Binary, probes: &ProbeInfo, profiled: &[FuncId]) {
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
                (probes.node(top).guid == crate::postpass::md5_hash(name)).then_some(top)
            })
            .collect();
        selected.sort_unstable();
        for i in 1..probes.nodes().len() {
            let id = ProbeNodeId(i as u32);
            if probes.node_probes(id).is_empty() || selected.binary_search(&probes.top_level_node(id)).is_err() {
                continue;
            }
            // The probe inline context, leaf first: each frame's location is the call site of
            // the frame below it.
            let mut context = Vec::new();
            let mut cur = id;
            let mut loc = LineLocation::default();
            let complete = loop {
                let n = probes.node(cur);
                let Some(desc) = probes.desc(n.guid) else { break false };
                context.push(ContextFrame { func: desc.name.to_string(), loc });
                if n.parent == ProbeNodeId::ROOT {
                    break true;
                }
                loc = LineLocation::new(n.callsite, 0);
                cur = n.parent;
            };
            if complete {
                context.reverse();
                self.add_instruction_for_context(&context, 0);
            }
        }
    }

    /// `getFuncSizeForContext`: the size recorded for the longest match of `context` (root
    /// first, leaf last) in the trie; when nothing along the matched path has a size, the
    /// size of the first descendant (in child order) of the deepest matched node that has one;
    /// 0 when even that fails (LLVM asserts).
    pub fn func_size_for_context(&self, context: &[ContextFrame]) -> u32 {
        let mut cur = Some(ROOT);
        let mut prev = None;
        let mut size = None;
        for (i, frame) in context.iter().enumerate().rev() {
            let Some(node) = cur else { break };
            prev = Some(node);
            let loc = if i + 1 == context.len() { LineLocation::default() } else { frame.loc };
            cur = self.trie.child(node, loc, &frame.func);
            if let Some(s) = cur.and_then(|n| self.sizes[n]) {
                size = Some(s);
            }
        }
        // Pivot to the sizes of the same function under other contexts.
        let mut node = cur.or(prev);
        while size.is_none() {
            let Some(first) = node.and_then(|n| self.trie.children(n).next()) else { break };
            size = self.sizes[first];
            node = Some(first);
        }
        size.unwrap_or(0)
    }
}

impl ContextSizeOracle for ContextSizes {
    fn func_size_for_context(&self, context: &[ContextFrame]) -> u32 {
        ContextSizes::func_size_for_context(self, context)
    }
}

/// Whether two inline stacks give the same size context: same functions, same call sites (the
/// leaf location does not count). Discriminators are compared raw, which for probe binaries is
/// finer than needed and only costs a trie walk.
fn same_context(a: &[SourceFrame], b: &[SourceFrame]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).enumerate().all(|(i, (x, y))| {
            x.func_name == y.func_name
                && (i + 1 == a.len() || (x.line_offset, x.discriminator) == (y.line_offset, y.discriminator))
        })
}

/// `getFrameLocationStack(addr, UseProbeDiscriminator)` from the cached inline stack.
fn location_stack(stack: &[SourceFrame], probe_discriminators: bool) -> Vec<ContextFrame> {
    stack
        .iter()
        .map(|f| ContextFrame {
            func: f.func_name.to_string(),
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
    use crate::postpass::llvm_hash::callsite_hash;

    /// `"main:3 @ foo:2.1 @ bar"` → frames, root first.
    fn ctx(s: &str) -> Vec<ContextFrame> {
        s.split(" @ ")
            .map(|f| {
                let (func, loc) = f.split_once(':').unwrap_or((f, "0"));
                let (line, disc) = loc.split_once('.').unwrap_or((loc, "0"));
                ContextFrame { func: func.to_string(), loc: LineLocation::new(line.parse().unwrap(), disc.parse().unwrap()) }
            })
            .collect()
    }

    impl ContextSizes {
        /// Every context with a recorded size, root first, sorted.
        fn recorded(&self) -> Vec<(String, u32)> {
            let mut out = Vec::new();
            for (id, size) in self.sizes.iter().enumerate() {
                let Some(size) = size else { continue };
                // The trie path is leaf first; each node's call site is its own frame's location.
                let mut frames = Vec::new();
                let mut n = id;
                while n != ROOT {
                    let node = self.trie.node(n);
                    let loc = node.callsite;
                    frames.push(if loc == LineLocation::default() {
                        node.func.clone()
                    } else if loc.discriminator == 0 {
                        format!("{}:{}", node.func, loc.line_offset)
                    } else {
                        format!("{}:{}.{}", node.func, loc.line_offset, loc.discriminator)
                    });
                    n = node.parent.unwrap();
                }
                out.push((frames.join(" @ "), *size));
            }
            out.sort();
            out
        }
    }

    #[test]
    fn sizes_add_up_per_context_and_leaf_location_is_ignored() {
        let mut s = ContextSizes::default();
        s.add_instruction_for_context(&ctx("main:3 @ foo:2.1 @ bar:7"), 4);
        s.add_instruction_for_context(&ctx("main:3 @ foo:2.1 @ bar:9"), 3);
        s.add_instruction_for_context(&ctx("bar:1"), 50);
        assert_eq!(s.func_size_for_context(&ctx("main:3 @ foo:2.1 @ bar")), 7);
        assert_eq!(s.func_size_for_context(&ctx("bar")), 50);
        assert_eq!(s.recorded(), [("bar".to_string(), 50), ("main:3 @ foo:2.1 @ bar".to_string(), 7)]);
    }

    #[test]
    fn longest_matching_context_wins() {
        let mut s = ContextSizes::default();
        s.add_instruction_for_context(&ctx("main:3 @ foo:2 @ bar"), 10);
        s.add_instruction_for_context(&ctx("foo:2 @ bar"), 20);
        s.add_instruction_for_context(&ctx("bar"), 50);
        assert_eq!(s.func_size_for_context(&ctx("main:3 @ foo:2 @ bar")), 10);
        // More callers than recorded: the deepest recorded context.
        assert_eq!(s.func_size_for_context(&ctx("start:1 @ main:3 @ foo:2 @ bar")), 10);
        // A different call site in main: the match stops at `foo:2 @ bar`.
        assert_eq!(s.func_size_for_context(&ctx("main:4 @ foo:2 @ bar")), 20);
        // A discriminator is part of the call site.
        assert_eq!(s.func_size_for_context(&ctx("main:3 @ foo:2.1 @ bar")), 50);
    }

    #[test]
    fn known_zero_size_is_not_replaced_by_another_context() {
        let mut s = ContextSizes::default();
        s.add_instruction_for_context(&ctx("other:1 @ gone"), 20);
        s.add_instruction_for_context(&ctx("main:3 @ gone"), 0);
        assert_eq!(s.func_size_for_context(&ctx("main:3 @ gone")), 0);
        assert_eq!(s.func_size_for_context(&ctx("other:1 @ gone")), 20);
    }

    /// Without a size on the matched path, LLVM pivots to the first child (lowest
    /// `getCallSiteHash`) of the deepest matched node, repeatedly, until one has a size.
    #[test]
    fn sibling_pivot_takes_the_first_child_in_hash_order() {
        let hash = |f: &str, line: u32| callsite_hash(f, LineLocation::new(line, 0));
        let mut s = ContextSizes::default();
        s.add_instruction_for_context(&ctx("a:1 @ baz"), 7);
        s.add_instruction_for_context(&ctx("b:2 @ baz"), 9);
        assert_ne!(hash("a", 1), hash("b", 2));
        let first = if hash("a", 1) < hash("b", 2) { 7 } else { 9 };
        // `baz` matches (without a size), `c:5` does not: pivot below `baz`.
        assert_eq!(s.func_size_for_context(&ctx("c:5 @ baz")), first);
        assert_eq!(s.func_size_for_context(&ctx("baz")), first);

        // The pivot descends through size-less nodes.
        let mut s = ContextSizes::default();
        s.add_instruction_for_context(&ctx("x:1 @ y:2 @ qux"), 4);
        assert_eq!(s.func_size_for_context(&ctx("qux")), 4);
        // A partial match pivots from the last matched node: `y:2 @ qux`, then `x:1`.
        assert_eq!(s.func_size_for_context(&ctx("z:8 @ y:2 @ qux")), 4);
        // An unknown function pivots from the root (LLVM asserts instead).
        assert_eq!(s.func_size_for_context(&ctx("unknown")), 4);
        assert_eq!(ContextSizes::default().func_size_for_context(&ctx("unknown")), 0);
    }

    #[test]
    fn probe_index_from_discriminator_follows_llvm_19() {
        // id 5, factor 100, direct call: [18:3] holds the id.
        let plain = (5 << 3) | (100 << 19) | (2 << 26) | 0x7;
        assert_eq!(probe_index_from_discriminator(plain), 5);
        // With a DWARF base discriminator (3) packed into [18:16] and bit 28 set.
        let packed = plain | (1 << 28) | (3 << 16);
        assert_eq!(probe_index_from_discriminator(packed), 5);
        // Without bit 28 the same bits belong to the id.
        assert_eq!(probe_index_from_discriminator(plain | (3 << 16)), 5 | (3 << 13));
    }

    fn corpus_binary(case: &str) -> Binary {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("perf-samples").join(case).join(case);
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
        let s = ContextSizes::build(&b, &all_dwarf_functions(&b));
        assert_eq!(s.recorded(), [("main".to_string(), 583), ("run".to_string(), 121)]);
    }

    /// Probe binary: call sites are probe ids from the DWARF discriminators; `noop` left no
    /// instructions, only its probe, and gets a known size of 0. `work` is push/mov/pop/ret
    /// (6 bytes), `add1` its lea/inc (5 bytes).
    #[test]
    fn probe_binary_sizes_include_optimized_away_inlinees() {
        let b = corpus_binary("optimized_away");
        let s = ContextSizes::build(&b, &all_dwarf_functions(&b));
        let uniq = ".__uniq.7287361354840707079468367352127977448";
        let expected = [
            ("main".to_string(), 71),
            ("work".to_string(), 6),
            (format!("work:2 @ _ZL4noopi{uniq}"), 0),
            (format!("work:3 @ _ZL4add1i{uniq}"), 5),
        ];
        assert_eq!(s.recorded(), expected);
        // Only profiled functions are measured.
        let work: Vec<FuncId> = all_dwarf_functions(&b).into_iter().filter(|&f| &*b.function(f).name == "work").collect();
        let s = ContextSizes::build(&b, &work);
        assert_eq!(s.recorded(), expected[1..]);
    }

    /// Range starts, branch ends and (address-keyed contexts only) call-stack addresses.
    #[test]
    fn profiled_functions_are_those_the_counters_touch() {
        let b = corpus_binary("switch_table");
        let names = |c: &ContextCounters| -> Vec<String> {
            let mut v: Vec<String> = profiled_functions(&b, c).into_iter().map(|f| b.function(f).name.to_string()).collect();
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

    /// Call sites keep their raw DWARF discriminators (6 and 8 = base 3 and 4), as in
    /// llvm-profgen-19: a query with the base discriminator misses and pivots to the first
    /// copy in hash order (tests/fixtures/context_size/README.md).
    #[test]
    fn line_based_call_sites_keep_raw_discriminators() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/context_size/disc");
        let b = Binary::load(&path, &Default::default()).unwrap();
        let s = ContextSizes::build(&b, &all_dwarf_functions(&b));
        let recorded = s.recorded();
        let size_of = |c: &str| recorded.iter().find(|(k, _)| k == c).map(|&(_, n)| n);
        assert_eq!(size_of("work:2.6 @ big"), Some(246), "{recorded:?}");
        assert_eq!(size_of("work:2.8 @ big"), Some(170), "{recorded:?}");
        assert_eq!(s.func_size_for_context(&ctx("main:5.2 @ work:2.6 @ big")), 246);
        assert_eq!(s.func_size_for_context(&ctx("main:5.2 @ work:2.8 @ big")), 170);
        assert_eq!(s.func_size_for_context(&ctx("main:5.2 @ work:2.3 @ big")), 246);
        assert_eq!(s.func_size_for_context(&ctx("main:5.2 @ work:2.4 @ big")), 246);
    }
}
