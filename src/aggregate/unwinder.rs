//! Virtual unwinder: hybrid samples (LBR stack + call stack) → per-context range and branch
//! counters (llvm-profgen's `VirtualUnwinder`, reference §5).
//!
//! In: [`HybridSample`]s already normalised by [`normalize_hybrid_sample`] and aggregated (each
//! distinct sample once, with its repeat count). Out: [`ContextCounters`] keyed by
//! [`ContextKey::Addrs`] (probe binaries: call-site addresses, the leaf function is recovered
//! from the probes later) or [`ContextKey::Frames`] (line binaries: the symbolized, inline-expanded
//! context), plus [`UnwindStats`] for the warning summary.
//!
//! The LBR is walked newest to oldest, i.e. backwards in time: a call pops the leaf frame, a
//! return pushes the callee frame, and the fall-through range between two branches is recorded on
//! the frame that executed it. Frames form a trie per sample so each (context, range) pair is
//! recorded once before keys are computed.
//!
//! Deliberate differences from llvm-profgen-19 (both only in corner cases):
//! - a return whose target does not follow a call has no caller call site; llvm-profgen creates
//!   a frame at address 0, which its context walk mistakes for the trie root (it then pops a
//!   real frame, so sibling contexts depend on hash order); profgen cuts the context there like
//!   at an external frame;
//! - `WasLeafInlined` of a line-based key is true if any sampled address yielding that key had
//!   the leaf inlined (llvm-profgen keeps whichever key instance was inserted first).
//!
//! Closer to what ran than llvm-profgen-19, off under `--llvm-compatible` (README, "Differences
//! from llvm-profgen", B and C):
//! - a sample whose stack was taken in a prolog or epilog is kept, with the caller's call site
//!   the frame-pointer walk missed taken from the LBR (llvm-profgen drops the whole sample);
//! - line-based contexts: code run after a tail jump moves under the jumping function's frame,
//!   where the jump's head samples are ([`UnwindOptions::tail_call_frames`]).

use crate::addr::{Branch, Vaddr};
use crate::aggregate::samples::{slot_of, slots};
use crate::aggregate::{ContextCounters, ContextKey, Counters, add_count};
use crate::binary::{CodeView, InstKind, SourceFrame};
use crate::llvm::discriminator::base_discriminator;
use crate::llvm::{ContextFrame, ContextShape, LineLocation, MAX_CONTEXT_FRAMES};
use hashbrown::hash_map::RawEntryMut;
use std::collections::BTreeSet;

/// The most LBR entries of a sample the unwinder walks (the newest; hardware records at most 64,
/// Intel's architectural LBR). Each entry can open a context as deep as the stack, so this and
/// [`MAX_CONTEXT_FRAMES`] bound what one sample can make the unwinder hold.
pub const MAX_BRANCHES: usize = 128;

/// A normalised LBR + call stack sample, the aggregation key of hybrid samples.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct HybridSample {
    /// Leaf first; non-leaf frames are call-site addresses; [`Vaddr::EXTERNAL`] for frames
    /// outside the binary (consecutive ones merged). The leaf is `lbr[0].target`.
    pub callchain: Vec<Vaddr>,
    /// Newest first; never both ends external.
    pub branches: Vec<Branch<Vaddr>>,
}

/// Where a sample goes in the unwinding order: by its callers (root first) without their
/// innermost two frames, then without the innermost one, then all of them (the top 22, 21 and 21
/// bits of a hash of each, in one word: hundreds of thousands are sorted). Samples unwound next to
/// each other then count into the same call-site stacks, so a worker's share of consecutive
/// samples makes mostly its own stacks: per worker fewer stacks to hold, convert and merge (in
/// any order the counts are the same, so hashes that collide cost only locality).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StackOrder(u64);

impl StackOrder {
    /// The order of a sample with this call stack (leaf first, as [`HybridSample::callchain`]).
    pub fn of(callchain: &[Vaddr]) -> Self {
        let callers = callchain.get(1..).unwrap_or_default();
        let step = |h: u64, a: &Vaddr| (h.rotate_left(5) ^ a.0).wrapping_mul(0x517c_c1b7_2722_0a95);
        // Root first; a prefix missing from a shallow stack hashes as 0.
        let outer = callers.get(2..).unwrap_or_default().iter().rev().fold(0, step);
        let inner = callers.get(1).map_or(outer, |a| step(outer, a));
        let all = callers.first().map_or(inner, |a| step(inner, a));
        StackOrder((outer >> 42) << 42 | (inner >> 43) << 21 | all >> 43)
    }
}

/// Why samples were changed or dropped during normalisation (reference §2.2).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NormalizeStats {
    /// Every hybrid sample seen (`NumTotalSample`), weighted by repeat count.
    pub samples: u64,
    /// Samples whose leaf frame is outside the binary.
    pub leaf_external: u64,
    /// Distinct return addresses not preceded by a call; the stack was cut there.
    pub invalid_return_addrs: BTreeSet<Vaddr>,
    /// Samples dropped because the leaf was in a prolog or epilog.
    pub dropped_prolog_epilog: u64,
    /// Samples dropped because no LBR entry survived (both ends external, or none at all).
    pub dropped_empty_lbr: u64,
    /// Samples with more than [`MAX_BRANCHES`] LBR entries, cut to the newest ones.
    pub long_lbr: u64,
}

impl NormalizeStats {
    pub fn merge(&mut self, other: &NormalizeStats) {
        self.samples = self.samples.saturating_add(other.samples);
        self.leaf_external = self.leaf_external.saturating_add(other.leaf_external);
        self.invalid_return_addrs.extend(other.invalid_return_addrs.iter().copied());
        self.dropped_prolog_epilog =
            self.dropped_prolog_epilog.saturating_add(other.dropped_prolog_epilog);
        self.dropped_empty_lbr = self.dropped_empty_lbr.saturating_add(other.dropped_empty_lbr);
        self.long_lbr = self.long_lbr.saturating_add(other.long_lbr);
    }

    /// `(count, total, message)` for the driver's `warning: %.2f%%(n/total) msg` lines, in
    /// llvm-profgen's order; `distinct_samples` is the number of aggregated samples.
    pub fn summary(&self, distinct_samples: u64) -> Vec<(u64, u64, &'static str)> {
        vec![
            (
                self.leaf_external,
                self.samples,
                "of samples have leaf external frame in call stack.",
            ),
            (
                self.invalid_return_addrs.len() as u64,
                distinct_samples,
                "of truncated stack samples due to invalid return address, likely caused by frame pointer omission.",
            ),
        ]
    }
}

/// A raw hybrid sample (call stack leaf first as return addresses, LBR newest first, both in
/// binary addresses; anything that is not an instruction start counts as external) → the
/// unwinder's [`HybridSample`], or `None` when it is dropped. `repeat` weights the statistics.
/// `recover_prolog_epilog`: keep samples whose stack was taken in a prolog or epilog, with the
/// caller's call site taken from the LBR (llvm-profgen drops them).
pub fn normalize_hybrid_sample<C: CodeView + ?Sized>(
    code: &C,
    raw_callchain: &[Vaddr],
    raw_branches: &[(Vaddr, Vaddr)],
    repeat: u64,
    recover_prolog_epilog: bool,
    stats: &mut NormalizeStats,
) -> Option<HybridSample> {
    // Addresses that are not instruction starts become external; entries with both ends
    // external are dropped.
    let ext = |a: Vaddr| if code.is_code(a) { a } else { Vaddr::EXTERNAL };
    let branches = raw_branches
        .iter()
        .map(|&(s, t)| Branch { source: ext(s), target: ext(t) })
        .filter(|b| !(b.source.is_external() && b.target.is_external()))
        .collect();
    let mut out = HybridSample { callchain: Vec::with_capacity(raw_callchain.len()), branches };
    normalize_into(
        code,
        |a| code.is_code(a),
        |a| code.call_addr_from_return_addr(a),
        raw_callchain.iter().copied(),
        repeat,
        recover_prolog_epilog,
        stats,
        &mut out,
    )
    .then_some(out)
}

/// [`normalize_hybrid_sample`] into a reused `out` (its vectors keep their capacity), whose
/// `branches` the caller has filled with the sample's LBR entries (newest first, each end an
/// instruction start or [`Vaddr::EXTERNAL`], none external at both ends: the aggregator writes
/// them as it translates them, without a second copy); false when the sample is dropped.
/// `is_code` is [`CodeView::is_code`], or a cheaper test when the caller already knows
/// (addresses translated to an instruction start or [`Vaddr::EXTERNAL`]); `call_site` is
/// [`CodeView::call_addr_from_return_addr`] (of an instruction start), or a cache of it.
#[allow(clippy::too_many_arguments)]
pub fn normalize_into<C: CodeView + ?Sized>(
    code: &C,
    is_code: impl Fn(Vaddr) -> bool,
    mut call_site: impl FnMut(Vaddr) -> Option<Vaddr>,
    raw_callchain: impl Iterator<Item = Vaddr>,
    repeat: u64,
    recover_prolog_epilog: bool,
    stats: &mut NormalizeStats,
    out: &mut HybridSample,
) -> bool {
    stats.samples = stats.samples.saturating_add(repeat);
    let stack = &mut out.callchain;
    stack.clear();
    for a in raw_callchain {
        if !is_code(a) {
            if stack.is_empty() {
                stats.leaf_external = stats.leaf_external.saturating_add(repeat);
            }
            if stack.last() != Some(&Vaddr::EXTERNAL) {
                stack.push(Vaddr::EXTERNAL);
            }
            continue;
        }
        if stack.is_empty() {
            stack.push(a);
            continue;
        }
        match call_site(a) {
            Some(call) => stack.push(call),
            None => {
                stats.invalid_return_addrs.insert(a);
                break;
            }
        }
    }
    if stack.len() > 1 && stack.last() == Some(&Vaddr::EXTERNAL) {
        stack.pop();
    }
    let Some(&leaf) = stack.first() else { return false };
    // A frame-pointer stack taken at the first two instructions of a function (before `mov
    // rbp, rsp`) or at its `ret` (after `pop rbp`) lacks the caller's call site. llvm-profgen
    // drops such samples, LBR included; recovering them takes the call site from the LBR.
    let mut caller_missing = false;
    if code.is_prolog_or_epilog(leaf) {
        if !recover_prolog_epilog {
            stats.dropped_prolog_epilog = stats.dropped_prolog_epilog.saturating_add(repeat);
            return false;
        }
        caller_missing = lacks_caller_frame(code, leaf);
    }
    if out.branches.len() > MAX_BRANCHES {
        stats.long_lbr = stats.long_lbr.saturating_add(repeat);
        out.branches.truncate(MAX_BRANCHES);
    }
    let Some(first) = out.branches.first() else {
        stats.dropped_empty_lbr = stats.dropped_empty_lbr.saturating_add(repeat);
        return false;
    };
    // The sampled IP skews behind the last branch; the LBR target is the precise leaf.
    out.callchain[0] = first.target;
    if caller_missing {
        // A call site beyond the window (a long chain of tail jumps) or in external code is
        // unknown: the context is cut at the leaf, as at an external frame, and the counts kept.
        match entering_call_site(code, &out.branches).filter(|s| !s.is_external()) {
            Some(site) => out.callchain.insert(1, site),
            None if out.callchain.len() > 1 && !out.callchain[1].is_external() => {
                out.callchain.insert(1, Vaddr::EXTERNAL)
            }
            None => {}
        }
    }
    true
}

/// Whether a frame-pointer stack sampled at `leaf` (in llvm-profgen's prolog/epilog set) lacks
/// the caller's call site: at a `ret` (rbp already popped) or at the first two instructions of a
/// function's entry (rbp not yet set). The instruction before a `ret` still has its frame.
fn lacks_caller_frame<C: CodeView + ?Sized>(code: &C, leaf: Vaddr) -> bool {
    if code.inst_kind(leaf) == Some(InstKind::Return) {
        return true;
    }
    let Some(start) = code.func_range(leaf).map(|r| r.start) else { return false };
    (leaf == start || code.prev_inst(leaf) == Some(start)) && code.entry_func_name(start).is_some()
}

/// The call that entered the newest LBR entry's frame: walking back in time, the first call not
/// matched by a later return ([`Vaddr::EXTERNAL`] for a call from external code). `None` when
/// the window does not reach it.
fn entering_call_site<C: CodeView + ?Sized>(code: &C, branches: &[Branch<Vaddr>]) -> Option<Vaddr> {
    let mut depth = 0u32;
    for &b in branches {
        match branch_kind(code, b, code.inst_kind(b.source)) {
            BranchKind::Return => depth += 1,
            BranchKind::Call if depth == 0 => return Some(b.source),
            BranchKind::Call => depth -= 1,
            BranchKind::Other(_) => {}
        }
    }
    None
}

/// What an LBR entry does to the call stack.
#[derive(Clone, Copy, PartialEq, Eq)]
enum BranchKind {
    /// A call instruction, or a branch from external code to an address that does not follow a
    /// call.
    Call,
    /// A return instruction, or a branch from external code to an address after a call.
    Return,
    /// Any other branch, with its source's instruction kind.
    Other(Option<InstKind>),
}

/// The kind of branch `b`, whose source's instruction is of kind `source` ([`CodeView::inst_kind`]).
fn branch_kind<C: CodeView + ?Sized>(
    code: &C,
    b: Branch<Vaddr>,
    source: Option<InstKind>,
) -> BranchKind {
    match source {
        Some(InstKind::Call) => BranchKind::Call,
        Some(InstKind::Return) => BranchKind::Return,
        _ if b.source.is_external() => match code.call_addr_from_return_addr(b.target) {
            Some(_) => BranchKind::Return,
            None => BranchKind::Call,
        },
        kind => BranchKind::Other(kind),
    }
}

/// The call site of return target `ret`, external when the instruction before it is no call.
fn call_site_of<C: CodeView + ?Sized>(code: &C, ret: Vaddr) -> Vaddr {
    code.call_addr_from_return_addr(ret).unwrap_or(Vaddr::EXTERNAL)
}

/// A jump (source instruction kind `kind`) from one function to another's entry (a tail call).
fn is_tail_jump<C: CodeView + ?Sized>(code: &C, b: Branch<Vaddr>, kind: Option<InstKind>) -> bool {
    matches!(kind, Some(InstKind::DirectJump | InstKind::IndirectJump))
        && code.entry_func_name(b.target).is_some()
        && code.func_range(b.source).map(|r| r.func) != code.func_range(b.target).map(|r| r.func)
}

/// How contexts are keyed and shaped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnwindOptions {
    /// Key contexts by call-site addresses (probe binaries) instead of symbolized frames.
    pub probe_based: bool,
    /// Recursion compression and depth limit of the contexts.
    pub context: ContextShape,
    /// Line-based: code run after a tail jump seen in the LBR gets the jumping function's frame
    /// in its context (`main:3 @ dispatch:5 @ step_c`), where the jump's head samples go;
    /// llvm-profgen leaves it in the caller's context (`main:3 @ step_c`), whose missing head
    /// samples its call-site inference then invents. Off under `--llvm-compatible`.
    pub tail_call_frames: bool,
}

/// Unwinder statistics (reference §5.6), summed over samples.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnwindStats {
    pub total_branches: u64,
    pub mismatched_ext_call_branches: u64,
    pub paired_ext_addrs: u64,
    pub unpaired_ext_addrs: u64,
    pub mismatched_pro_epi_branches: u64,
    /// Non-leaf frames whose context was cut (external frames).
    pub untracked_callsites: BTreeSet<Vaddr>,
    /// Samples whose stack leaf is too far from the newest LBR target (stack tip, LBR tip).
    pub bogus_traces: Vec<(Vaddr, Vaddr)>,
    /// Samples (weighted by repeat count) with a context deeper than [`MAX_CONTEXT_FRAMES`] call
    /// sites, cut to the innermost ones.
    pub deep_stacks: u64,
}

impl UnwindStats {
    pub fn merge(&mut self, o: &UnwindStats) {
        self.total_branches = self.total_branches.saturating_add(o.total_branches);
        self.mismatched_ext_call_branches =
            self.mismatched_ext_call_branches.saturating_add(o.mismatched_ext_call_branches);
        self.paired_ext_addrs = self.paired_ext_addrs.saturating_add(o.paired_ext_addrs);
        self.unpaired_ext_addrs = self.unpaired_ext_addrs.saturating_add(o.unpaired_ext_addrs);
        self.mismatched_pro_epi_branches =
            self.mismatched_pro_epi_branches.saturating_add(o.mismatched_pro_epi_branches);
        self.untracked_callsites.extend(o.untracked_callsites.iter().copied());
        self.bogus_traces.extend(o.bogus_traces.iter().copied());
        self.deep_stacks = self.deep_stacks.saturating_add(o.deep_stacks);
    }

    /// `(count, total, message)` for the driver's `warning: %.2f%%(n/total) msg` lines, in
    /// llvm-profgen's order (lines with count or total 0 are not printed); `num_contexts` is the
    /// number of keys in the resulting [`ContextCounters`].
    pub fn summary(&self, num_contexts: u64) -> Vec<(u64, u64, &'static str)> {
        let b = self.total_branches;
        vec![
            (
                self.untracked_callsites.len() as u64,
                num_contexts,
                "of profiled contexts are truncated due to missing probe for call instruction.",
            ),
            (
                self.mismatched_ext_call_branches,
                b,
                "of branches'source is a call instruction but doesn't match call frame stack, likely due to unwinding error of external frame.",
            ),
            (
                self.paired_ext_addrs.saturating_mul(2),
                b,
                "of branches containing paired external address.",
            ),
            (
                self.unpaired_ext_addrs,
                b,
                "of branches containing external address but doesn't have another external address to pair, likely due to interrupt jmp or broken perf script.",
            ),
            (
                self.mismatched_pro_epi_branches,
                b,
                "of branches'source is a call instruction but doesn't match call frame stack, likely due to frame in prolog/epilog.",
            ),
        ]
    }
}

/// llvm-profgen's `inlineContextEqual`: same inline frames except the innermost location;
/// addresses without line info never match.
fn inline_context_equal(x: &[SourceFrame], y: &[SourceFrame]) -> bool {
    !x.is_empty() && x.len() == y.len() && x[..x.len() - 1] == y[..y.len() - 1]
}

/// Symbolized context of a call-site stack (root first, leaf last): every address's inline
/// frames with base discriminators, recursion-compressed and trimmed except the leaf, whose
/// location is dropped. Empty when any address lacks line info.
pub fn expanded_context<C: CodeView + ?Sized>(
    code: &C,
    stack: &[Vaddr],
    opts: &UnwindOptions,
) -> Vec<ContextFrame> {
    let mut frames = Vec::new();
    let fs = code.uses_fs_discriminators();
    for &a in stack {
        let inl = code.inline_stack(a);
        if inl.is_empty() {
            return Vec::new();
        }
        frames.extend(inl.iter().map(|f| ContextFrame {
            func: f.func_name.clone().into(),
            loc: LineLocation::new(f.line_offset, base_discriminator(f.discriminator, fs)),
        }));
    }
    let Some(mut leaf) = frames.pop() else {
        return frames;
    };
    leaf.loc = LineLocation::default();
    opts.context.apply(&mut frames);
    frames.push(leaf);
    frames
}

const ROOT: usize = 0;

/// A frame of the per-sample trie; `addr` is the call site (or, for a leaf, any address in the
/// function).
struct Frame {
    addr: Vaddr,
    parent: usize,
    children: Vec<(Vaddr, usize)>,
    /// With tail-call frames, the counts wait here until the walk is over (see [`Trie::node`]).
    ranges: Vec<(Vaddr, Vaddr, u64)>,
    branches: Vec<(Vaddr, Vaddr, u64)>,
    /// The [`Stacks`] node of the frame's context, [`UNKNOWN`] until [`Trie::node`] asks (and
    /// for a frame deeper than [`MAX_CONTEXT_FRAMES`] that records nothing).
    node: u32,
    /// How many call sites the context has (frames below the root or the innermost external
    /// frame above, this one included); [`UNKNOWN`] until asked.
    depth: u32,
    /// Probe-based: the frame that walking back over a return from a callee of this call site
    /// enters, [`ROOT`] until one does (see [`Trie::callee`]).
    callee: usize,
}

impl Frame {
    fn has_counts(&self) -> bool {
        !self.ranges.is_empty() || !self.branches.is_empty()
    }
}

/// The frames of one sample (with tail-call frames), or of the samples since the last `reset`
/// (without: see [`Trie::enter`]). Reused so that unwinding allocates nothing once the frames'
/// vectors have grown: only `frames[..len]` are live.
#[derive(Default)]
struct Trie {
    frames: Vec<Frame>,
    len: usize,
    /// With tail-call frames: the frames of each activation on the walk's current stack, the
    /// innermost last; activation `i` is `active[starts[i]..]` up to the next start.
    active: Vec<usize>,
    starts: Vec<usize>,
    /// Whether a frame that recorded counts had its context cut to [`MAX_CONTEXT_FRAMES`].
    cut: bool,
    /// Whether an external frame has callees (their contexts are cut there): children are
    /// never taken from a frame without giving it another, so noted as they are added rather
    /// than by a walk of every frame at the end.
    external_callees: bool,
    /// [`Trie::node`]'s frames without a depth yet, and a deep context's call sites.
    chain: Vec<usize>,
    sites: Vec<Vaddr>,
    /// Without tail-call frames: the frames of the last sample's call stack, root first.
    stack: Vec<usize>,
}

/// How many frames a trie kept from sample to sample may grow to before it starts afresh: a
/// frame's children are searched one by one, and neighbouring samples share only some.
const KEPT_FRAMES: usize = 1 << 10;

impl Trie {
    fn reset(&mut self) {
        self.len = 0;
        self.add(Vaddr(0), ROOT);
        let root = &mut self.frames[ROOT];
        (root.node, root.depth) = (ROOT as u32, 0);
        self.active.clear();
        self.starts.clear();
        self.cut = false;
        self.external_callees = false;
    }
    /// The [`Stacks`] node of frame `f`'s context: the call sites from the root, or from below
    /// the innermost external frame above `f` (not a call context the compiler sees: contexts
    /// start afresh there), down to `f`'s own; only the innermost [`MAX_CONTEXT_FRAMES`] of a
    /// deeper one (then `cut` is set). Each frame's node is found once, from its caller's by one
    /// child lookup. A frame's context is its path from the root, so this holds only while
    /// frames stay where they are: with tail-call frames, ask once the walk is over.
    #[inline]
    fn node(&mut self, stacks: &mut Stacks, f: usize) -> u32 {
        match self.frames[f].node {
            UNKNOWN => self.find_node(stacks, f),
            n => n,
        }
    }
    /// The leaf frame of a sample with call stack `callchain` (leaf first), without tail-call
    /// frames: the frames of earlier samples are kept, so the frames of this one's callers, and
    /// of what its walk meets, are mostly found with their nodes (a frame's node and depth follow
    /// from its path from the root alone, and frames stay where they are made; neighbouring
    /// samples ([`StackOrder`]) share most of their callers). After a sample that cut a deep
    /// context the trie starts afresh, so that finding that node again sets `cut` again.
    fn enter(&mut self, callchain: &[Vaddr]) -> usize {
        if self.len == 0 || self.len > KEPT_FRAMES || self.cut {
            self.reset();
            self.stack.clear();
        }
        self.external_callees = false;
        let frames = &self.frames;
        let same = (self.stack.iter().zip(callchain.iter().rev()))
            .take_while(|&(&f, &a)| frames[f].addr == a)
            .count();
        self.stack.truncate(same);
        let mut leaf = self.stack.last().copied().unwrap_or(ROOT);
        for &a in callchain.iter().rev().skip(same) {
            leaf = self.child(leaf, a);
            self.stack.push(leaf);
        }
        leaf
    }
    #[inline(never)]
    fn find_node(&mut self, stacks: &mut Stacks, f: usize) -> u32 {
        let mut chain = std::mem::take(&mut self.chain);
        chain.clear();
        let mut k = f;
        // The root's and external frames' depths are known from the start.
        while self.frames[k].depth == UNKNOWN {
            chain.push(k);
            k = self.frames[k].parent;
        }
        for &c in chain.iter().rev() {
            let p = &self.frames[self.frames[c].parent];
            let (parent, depth) = (p.node, p.depth + 1);
            let f = &mut self.frames[c];
            // A deeper context is not its caller's extended: no node unless it records.
            f.node = if depth as usize <= MAX_CONTEXT_FRAMES {
                stacks.child(parent, f.addr)
            } else {
                UNKNOWN
            };
            f.depth = depth;
        }
        self.chain = chain;
        if self.frames[f].node == UNKNOWN {
            // Deeper than MAX_CONTEXT_FRAMES: `f` and its innermost callers (none external).
            self.cut = true;
            let mut sites = std::mem::take(&mut self.sites);
            sites.clear();
            let mut k = f;
            while sites.len() < MAX_CONTEXT_FRAMES {
                sites.push(self.frames[k].addr);
                k = self.frames[k].parent;
            }
            sites.reverse();
            self.frames[f].node = stacks.of(&sites);
            self.sites = sites;
        }
        self.frames[f].node
    }
    /// A new child of `parent`, even if one at `addr` exists: frames of different activations
    /// must not share a node when an activation may later move under a tail-call frame.
    fn fresh_child(&mut self, parent: usize, addr: Vaddr) -> usize {
        let id = self.add(addr, parent);
        self.link(parent, addr, id);
        id
    }
    /// Makes frame `id` (at `addr`) a child of `parent`.
    fn link(&mut self, parent: usize, addr: Vaddr, id: usize) {
        let p = &mut self.frames[parent];
        self.external_callees |= p.addr.is_external();
        p.children.push((addr, id));
    }
    /// Moves the frames of the innermost activation (children of `parent`) under `to`.
    fn move_activation(&mut self, parent: usize, to: usize) {
        let start = self.starts.last().copied().unwrap_or(0);
        let moved = &self.active[start..];
        self.frames[parent].children.retain(|(_, c)| !moved.contains(c));
        self.external_callees |= self.frames[to].addr.is_external() && !moved.is_empty();
        for &n in moved {
            self.frames[n].parent = to;
            let addr = self.frames[n].addr;
            self.frames[to].children.push((addr, n));
        }
        self.active.truncate(start);
    }
    fn add(&mut self, addr: Vaddr, parent: usize) -> usize {
        let id = self.len;
        self.len += 1;
        // An external frame's context is empty: contexts start afresh below it.
        let (node, depth) = if addr.is_external() { (ROOT as u32, 0) } else { (UNKNOWN, UNKNOWN) };
        match self.frames.get_mut(id) {
            Some(f) => {
                f.addr = addr;
                f.parent = parent;
                f.children.clear();
                f.ranges.clear();
                f.branches.clear();
                (f.node, f.depth) = (node, depth);
                f.callee = ROOT;
            }
            None => self.frames.push(Frame {
                addr,
                parent,
                children: Vec::new(),
                ranges: Vec::new(),
                branches: Vec::new(),
                node,
                depth,
                callee: ROOT,
            }),
        }
        id
    }
    fn child(&mut self, parent: usize, addr: Vaddr) -> usize {
        if let Some(&(_, c)) = self.frames[parent].children.iter().find(|(a, _)| *a == addr) {
            return c;
        }
        let id = self.add(addr, parent);
        self.link(parent, addr, id);
        id
    }
    /// Probe-based: the callee frame under call site `parent` that walking back over a return
    /// from `addr` (inside the binary) enters: one per call site, whichever return it was (its
    /// address is the first one's). Probe-based counts go to the leaf's caller's frame and a
    /// leaf gets callees only once it has switched to a call site, so a callee frame's address
    /// is in no context; the walk compares it only with call sites, which no return is. So one
    /// frame serves every return, found without a search of `parent`'s children (where each
    /// return instruction had a frame of its own).
    #[inline(always)]
    fn callee(&mut self, parent: usize, addr: Vaddr) -> usize {
        match self.frames[parent].callee {
            ROOT => self.new_callee(parent, addr),
            c => c,
        }
    }
    #[inline(never)]
    fn new_callee(&mut self, parent: usize, addr: Vaddr) -> usize {
        let id = self.add(addr, parent);
        self.external_callees |= self.frames[parent].addr.is_external();
        self.frames[parent].callee = id;
        id
    }
}

/// The walk state of one sample.
struct State<'s> {
    trie: &'s mut Trie,
    leaf: usize,
    ip: Vaddr,
    invalid: bool,
    /// Track activations for [`UnwindOptions::tail_call_frames`].
    tail_frames: bool,
    /// Probe-based: the leaf whose caller's [`Stacks`] node [`State::caller_node`] last found,
    /// and that node (both of an LBR entry's counts go there, and the leaf mostly stays).
    caller: (usize, u32),
}

impl State<'_> {
    fn parent(&self) -> usize {
        self.trie.frames[self.leaf].parent
    }
    /// The [`Stacks`] node of the leaf's caller's frame, where probe-based counts go. Exact:
    /// frames do not move without tail-call frames, so a frame's caller and node stay.
    #[inline(always)]
    fn caller_node(&mut self, stacks: &mut Stacks) -> u32 {
        if self.caller.0 != self.leaf {
            let p = self.parent();
            self.caller = (self.leaf, self.trie.node(stacks, p));
        }
        self.caller.1
    }
    /// Replaces the leaf by its sibling at `addr`.
    fn switch_to(&mut self, addr: Vaddr) {
        if self.trie.frames[self.leaf].addr != addr {
            let p = self.parent();
            if self.tail_frames {
                self.leaf = self.trie.fresh_child(p, addr);
                self.trie.active.push(self.leaf);
            } else {
                self.leaf = self.trie.child(p, addr);
            }
        }
    }
    /// Probe-based: the callee frame under the leaf that a return from `addr` enters.
    #[inline(always)]
    fn push_callee(&mut self, addr: Vaddr) {
        self.leaf = self.trie.callee(self.leaf, addr);
    }
    /// A callee frame at `addr` under the leaf (a new activation).
    fn push(&mut self, addr: Vaddr) {
        self.leaf = self.trie.child(self.leaf, addr);
        if self.tail_frames {
            self.trie.starts.push(self.trie.active.len());
            self.trie.active.push(self.leaf);
        }
    }
    /// Back to the caller's frame (the activation the leaf's was called from).
    fn pop(&mut self) {
        self.leaf = self.parent();
        if self.tail_frames {
            if let Some(start) = self.trie.starts.pop() {
                self.trie.active.truncate(start);
            }
            if self.trie.starts.is_empty() {
                // The caller's activation started before the walk: it begins here.
                self.trie.active.clear();
                self.trie.starts.push(0);
                self.trie.active.push(self.leaf);
            }
        }
    }
    /// Walking back over a tail jump from `site` into the leaf's function: the activation run
    /// since then moves under the jumping function's frame, which becomes the leaf.
    fn tail_jump(&mut self, site: Vaddr) {
        let p = self.parent();
        let jumper = self.trie.fresh_child(p, site);
        self.trie.move_activation(p, jumper);
        self.trie.active.push(jumper);
        self.leaf = jumper;
    }
}

/// Unwinds samples into context counters; feed it every aggregated sample, then [`finish`].
///
/// [`finish`]: Unwinder::finish
pub struct Unwinder<'c, C: CodeView + ?Sized> {
    code: &'c C,
    opts: UnwindOptions,
    /// Counters by call-site stack (root first): turned into contexts once at the end, since
    /// making a context (inline expansion, symbolization, recursion compression) costs far more
    /// than counting, and many samples share a stack.
    by_stack: Stacks,
    /// Counts on their way to `by_stack`.
    held: HeldCounts,
    /// [`CodeView::range_crosses_uncond_branch`] by range.
    crossings: Memo<(Vaddr, Vaddr), bool>,
    /// [`CodeView::inst_kind`] by LBR source.
    kinds: Memo<Vaddr, Option<InstKind>>,
    /// [`CodeView::call_addr_from_return_addr`] by return target, external when none.
    call_sites: Memo<Vaddr, Vaddr>,
    stats: UnwindStats,
    trie: Trie,
}

/// Answers of a [`CodeView`] query by key, direct-mapped: LBR entries' addresses and the
/// fall-through ranges between them repeat from sample to sample, and a probe costs a fraction
/// of the instruction-index lookups. A slot holds (key, answer); the initial slots hold one key
/// with its own answer.
struct Memo<K, V> {
    slots: Box<[(K, V); MEMO_SLOTS]>,
}

const MEMO_SLOTS: usize = 1 << 12;

impl<K: Copy + PartialEq, V: Copy> Memo<K, V> {
    fn new(key: K, answer: V) -> Self {
        Memo { slots: slots((key, answer)) }
    }

    /// The answer for `key` (hashed as the pair `hash`), asked of `query` on a miss.
    #[inline(always)]
    fn get(&mut self, key: K, hash: (u64, u64), query: impl FnOnce() -> V) -> V {
        let slot = &mut self.slots[slot_of::<MEMO_SLOTS>(hash.0, hash.1)];
        if slot.0 != key {
            *slot = (key, query());
        }
        slot.1
    }
}

/// Range and branch counts by stack on their way to [`Stacks::counters`]: neighbouring samples
/// (unwound in [`StackOrder`]) add the same few (stack, range) pairs over and over, and adding to
/// a direct-mapped slot costs a fraction of a counter lookup and a hash-map update. A slot's
/// count goes to the map when another pair takes the slot, and at the end (saturating sums do not
/// depend on the order they are added in).
struct HeldCounts {
    slots: Box<[HeldCount; Self::SLOTS]>,
}

/// `stack` is the [`Stacks`] node shifted left by one, plus 1 for a branch (0 for a range);
/// [`HeldCount::EMPTY`] for a free slot.
#[derive(Clone, Copy)]
struct HeldCount {
    stack: u64,
    from: Vaddr,
    to: Vaddr,
    count: u64,
}

impl HeldCount {
    const EMPTY: HeldCount = HeldCount { stack: u64::MAX, from: Vaddr(0), to: Vaddr(0), count: 0 };
}

impl HeldCounts {
    const SLOTS: usize = 1 << 12;

    fn new() -> Self {
        HeldCounts { slots: slots(HeldCount::EMPTY) }
    }

    /// Adds `n` to the count of range (`branch` false) or branch `(from, to)` of `stack`.
    #[inline(always)]
    fn add(
        &mut self,
        stacks: &mut Stacks,
        stack: u32,
        branch: bool,
        from: Vaddr,
        to: Vaddr,
        n: u64,
    ) {
        let key = (stack as u64) << 1 | branch as u64;
        let i = slot_of::<{ HeldCounts::SLOTS }>(
            from.0 ^ key.wrapping_mul(0x2545_f491_4f6c_dd1d),
            to.0,
        );
        let slot = &mut self.slots[i];
        if slot.stack == key && slot.from == from && slot.to == to {
            slot.count = slot.count.saturating_add(n);
            return;
        }
        let old = std::mem::replace(slot, HeldCount { stack: key, from, to, count: n });
        stacks.add(old);
    }

    /// Moves every held count into `stacks`.
    fn drain_into(&mut self, stacks: &mut Stacks) {
        for slot in self.slots.iter_mut() {
            stacks.add(std::mem::replace(slot, HeldCount::EMPTY));
        }
    }
}

/// A [`Frame::node`] or [`Frame::depth`] not found yet.
const UNKNOWN: u32 = u32::MAX;

/// The call-site stacks an unwinder met, as a trie of interned nodes (a stack is its innermost
/// node; the empty stack is [`ROOT`]), with the counters of each. A frame's stack extends its
/// caller's by one call site, so finding it costs one lookup, not hashing the whole stack.
struct Stacks {
    /// (parent, call site, index in `counters` or [`UNKNOWN`]) of each node; the root's parent
    /// and call site are unused.
    nodes: Vec<(u32, Vaddr, u32)>,
    children: hashbrown::HashMap<(u32, Vaddr), u32>,
    /// Recent `children` lookups, direct-mapped: (parent, child, call site), parent
    /// [`UNKNOWN`] when free. Neighbouring samples walk the same stacks.
    recent: Box<[(u32, u32, Vaddr); RECENT_CHILDREN]>,
    /// (node, its counters) of the nodes with counts, found from the node (ids are dense: an
    /// index, not a hash lookup, per count added).
    counters: Vec<(u32, Counters)>,
}

const RECENT_CHILDREN: usize = 1 << 12;

/// Slots of [`Stacks::into_contexts`]' test for repeated call sites.
const SEEN_SITES: usize = 1 << 10;

/// The pairs a stack's range and branch maps are first made with room for.
const STACK_PAIRS: usize = 7;

impl Default for Stacks {
    fn default() -> Self {
        Stacks {
            nodes: vec![(0, Vaddr(0), UNKNOWN)],
            children: Default::default(),
            recent: slots((UNKNOWN, 0, Vaddr(0))),
            counters: Default::default(),
        }
    }
}

impl Stacks {
    /// The stack of `parent`'s with `site` called last.
    #[inline]
    fn child(&mut self, parent: u32, site: Vaddr) -> u32 {
        let i = slot_of::<RECENT_CHILDREN>(
            u64::from(parent).wrapping_mul(0x2545_f491_4f6c_dd1d),
            site.0,
        );
        let (p, id, a) = self.recent[i];
        if p == parent && a == site {
            return id;
        }
        let id = self.intern(parent, site);
        self.recent[i] = (parent, id, site);
        id
    }
    #[inline(never)]
    fn intern(&mut self, parent: u32, site: Vaddr) -> u32 {
        let next = self.nodes.len() as u32;
        let id = *self.children.entry((parent, site)).or_insert(next);
        if id == next {
            self.nodes.push((parent, site, UNKNOWN));
        }
        id
    }
    /// Adds a [`HeldCounts`] slot's count to its stack's counters (nothing for a free slot).
    #[inline(never)]
    fn add(&mut self, h: HeldCount) {
        if h.stack == HeldCount::EMPTY.stack {
            return;
        }
        let node = (h.stack >> 1) as u32;
        let i = &mut self.nodes[node as usize].2;
        if *i == UNKNOWN {
            *i = self.counters.len() as u32;
            // Room for seven pairs of each kind: most stacks' maps end with two to seven
            // (SQLite's and Lua's), so most would grow twice from empty.
            let c = Counters {
                ranges: hashbrown::HashMap::with_capacity(STACK_PAIRS),
                branches: hashbrown::HashMap::with_capacity(STACK_PAIRS),
            };
            self.counters.push((node, c));
        }
        let c = &mut self.counters[*i as usize].1;
        let map = if h.stack & 1 == 1 { &mut c.branches } else { &mut c.ranges };
        add_count(map, (h.from, h.to), h.count);
    }
    /// The node of `stack` (root first).
    fn of(&mut self, stack: &[Vaddr]) -> u32 {
        stack.iter().fold(ROOT as u32, |n, &a| self.child(n, a))
    }
    /// The counters by context: each stack's context computed once, stacks that shape into the
    /// same context (recursion compression, depth limit, inlining) summed.
    fn into_contexts<C: CodeView + ?Sized>(
        self,
        code: &C,
        opts: &UnwindOptions,
        into: &mut ContextShards,
    ) {
        let mut stack = Vec::new();
        // Call sites met by this stack's pass (a stamp per pass: as many as there are stacks).
        let mut seen = slots::<_, SEEN_SITES>((0u32, Vaddr(0)));
        for (pass, (mut n, c)) in (1u32..).zip(self.counters) {
            stack.clear();
            while n != ROOT as u32 {
                let (parent, site, _) = self.nodes[n as usize];
                stack.push(site);
                n = parent;
            }
            stack.reverse();
            let key = if opts.probe_based {
                // Most stacks repeat no call site, and recursion compression searches each for
                // repeats (n·ln n comparisons): a site whose slot this pass took already may
                // repeat (or only share the slot), and the stack is searched as before.
                let distinct = stack.iter().all(|&a| {
                    let slot = &mut seen[slot_of::<SEEN_SITES>(a.0, 0)];
                    std::mem::replace(slot, (pass, a)).0 != pass
                });
                let mut addrs = stack.clone();
                if distinct {
                    opts.context.apply_to_distinct(&mut addrs);
                } else {
                    opts.context.apply(&mut addrs);
                }
                ContextKey::Addrs(addrs)
            } else {
                ContextKey::Frames(expanded_context(code, &stack, opts))
            };
            into.add(key, c);
        }
    }
}

/// Counters by context in shards by the context's hash: the workers' counters merge shard by
/// shard in parallel. Each entry keeps its key's hash (keys are whole stacks: hashing one again
/// per merge costs more than the lookup).
struct ContextShards {
    hasher: hashbrown::DefaultHashBuilder,
    shards: Vec<hashbrown::HashTable<(u64, ContextKey, Counters)>>,
}

/// How many [`ContextShards`]: several per thread, for balance.
const SHARDS: usize = 16;

impl ContextShards {
    /// Empty shards; all that are merged share `hasher`.
    fn new(hasher: hashbrown::DefaultHashBuilder) -> Self {
        ContextShards { hasher, shards: (0..SHARDS).map(|_| Default::default()).collect() }
    }
    fn add(&mut self, key: ContextKey, c: Counters) {
        use std::hash::BuildHasher;
        let hash = self.hasher.hash_one(&key);
        // Bits the tables do not index by.
        let shard = (hash >> 40) as usize % SHARDS;
        add_context(&mut self.shards[shard], hash, key, c);
    }
    /// The sums of `all`'s counters (shards made with `hasher`), shard by shard in parallel:
    /// each shard's counters are added into the largest one's.
    fn merge_all(hasher: hashbrown::DefaultHashBuilder, all: Vec<ContextShards>) -> Self {
        use rayon::prelude::*;
        let mut by_shard: Vec<Vec<_>> =
            (0..SHARDS).map(|_| Vec::with_capacity(all.len())).collect();
        for c in all {
            for (i, shard) in c.shards.into_iter().enumerate() {
                by_shard[i].push(shard);
            }
        }
        let shards = by_shard
            .into_par_iter()
            .map(|mut tables| {
                let largest = (0..tables.len()).max_by_key(|&i| tables[i].len());
                let mut mine = largest.map(|i| tables.swap_remove(i)).unwrap_or_default();
                for (hash, key, c) in tables.into_iter().flatten() {
                    add_context(&mut mine, hash, key, c);
                }
                mine
            })
            .collect();
        ContextShards { hasher, shards }
    }
    /// One map of all shards' counters, on one thread while the others wait: each key goes in
    /// by the hash its shard kept (the map takes the shards' hasher), without a search, since
    /// a key is in one shard only.
    fn into_counters(self) -> ContextCounters {
        let len = self.shards.iter().map(|s| s.len()).sum();
        let mut by_context = hashbrown::HashMap::with_capacity_and_hasher(len, self.hasher);
        for (hash, key, c) in self.shards.into_iter().flatten() {
            let RawEntryMut::Vacant(v) = by_context.raw_entry_mut().from_hash(hash, |_| false)
            else {
                unreachable!("no key matches")
            };
            v.insert_hashed_nocheck(hash, key, c);
        }
        ContextCounters { by_context, context_sensitive: true, ..Default::default() }
    }
}

/// Adds the counters `c` of `key` (whose hash is `hash`) into `table`, the smaller counters into
/// the larger.
fn add_context(
    table: &mut hashbrown::HashTable<(u64, ContextKey, Counters)>,
    hash: u64,
    key: ContextKey,
    mut c: Counters,
) {
    match table.find_mut(hash, |(h, k, _)| *h == hash && *k == key) {
        Some((_, _, mine)) => {
            let size = |c: &Counters| c.ranges.len() + c.branches.len();
            if size(mine) < size(&c) {
                std::mem::swap(mine, &mut c);
            }
            mine.merge(&c);
        }
        None => {
            table.insert_unique(hash, (hash, key, c), |(h, _, _)| *h);
        }
    }
}

impl<'c, C: CodeView + ?Sized> Unwinder<'c, C> {
    pub fn new(code: &'c C, opts: UnwindOptions) -> Self {
        Unwinder {
            code,
            opts,
            by_stack: Stacks::default(),
            held: HeldCounts::new(),
            crossings: Memo::new(
                (Vaddr(0), Vaddr(0)),
                code.range_crosses_uncond_branch(Vaddr(0), Vaddr(0)),
            ),
            kinds: Memo::new(Vaddr(0), code.inst_kind(Vaddr(0))),
            call_sites: Memo::new(Vaddr(0), call_site_of(code, Vaddr(0))),
            stats: UnwindStats::default(),
            trie: Trie::default(),
        }
    }

    /// Unwinds one aggregated sample seen `repeat` times. Returns false when the sample was
    /// rejected (empty stack or LBR, or a bogus trace).
    pub fn unwind(&mut self, sample: &HybridSample, repeat: u64) -> bool {
        self.unwind_parts(&sample.callchain, sample.branches.iter().copied(), repeat)
    }

    /// [`Self::unwind`] of the sample with call stack `callchain` and LBR entries `branches`
    /// (newest first): a stored sample's entries are decoded as the walk takes them, not into a
    /// vector the walk then reads.
    pub fn unwind_parts(
        &mut self,
        callchain: &[Vaddr],
        mut branches: impl Iterator<Item = Branch<Vaddr>>,
        repeat: u64,
    ) -> bool {
        let (Some(&leaf_addr), Some(first)) = (callchain.first(), branches.next()) else {
            return false;
        };
        // Stack leaf and LBR tip must be close (always true once the leaf is overwritten).
        if leaf_addr < first.target || leaf_addr >= Vaddr(first.target.0.saturating_add(0x100)) {
            self.stats.bogus_traces.push((leaf_addr, first.target));
            return false;
        }
        let mut trie = std::mem::take(&mut self.trie);
        let tail_frames = self.opts.tail_call_frames && !self.opts.probe_based;
        let leaf = if tail_frames {
            trie.reset();
            let leaf = callchain.iter().rev().fold(ROOT, |f, &a| trie.child(f, a));
            trie.starts.push(0);
            trie.active.push(leaf);
            leaf
        } else {
            trie.enter(callchain)
        };
        let mut st = State {
            trie: &mut trie,
            leaf,
            ip: leaf_addr,
            invalid: false,
            tail_frames,
            caller: (usize::MAX, ROOT as u32),
        };
        let (mut br, mut taken) = (first, 0u64);
        loop {
            // The range between the newest target and the sample IP is incomplete: skip it.
            if taken > 0 {
                self.unwind_linear(&mut st, br.target, repeat);
            }
            taken += 1;
            let kind = if st.invalid {
                None
            } else {
                let code = self.code;
                let kind =
                    self.kinds.get(br.source, (br.source.0, 0), || code.inst_kind(br.source));
                Some(branch_kind(code, br, kind))
            };
            if kind == Some(BranchKind::Call) {
                self.unwind_call(&mut st, br.source);
            } else if kind == Some(BranchKind::Return) {
                self.unwind_return(&mut st, br);
            } else if let Some(BranchKind::Other(inst)) = kind {
                if st.tail_frames && is_tail_jump(self.code, br, inst) {
                    st.tail_jump(br.source);
                } else if !self.opts.probe_based {
                    // Probe-based counts go to the caller's frame: a leaf frame at the jump
                    // would count nothing and have no callees (a return switches to the call
                    // site first), so the walk stays in the frame it has.
                    st.switch_to(br.source);
                }
                st.ip = br.source;
            } else {
                // The rest of the trace has no usable stack: continue context-less.
                st.leaf = ROOT;
                st.ip = br.source;
                st.trie.active.clear();
                st.trie.starts.clear();
                st.push(br.source);
            }
            self.record_branch(&mut st, br, repeat);
            let Some(next) = branches.next() else { break };
            br = next;
        }
        self.stats.total_branches = self.stats.total_branches.saturating_add(taken);
        self.finish_sample(&mut trie, tail_frames);
        if trie.cut {
            self.stats.deep_stacks = self.stats.deep_stacks.saturating_add(repeat);
        }
        self.trie = trie;
        true
    }

    /// A call `src` seen walking back: back to the caller's frame.
    fn unwind_call(&mut self, st: &mut State, src: Vaddr) {
        let parent = st.parent();
        if parent == ROOT || st.trie.frames[parent].addr != src {
            // The caller frame is missing (stack taken in a prolog/epilog, or external code):
            // stay in the caller's function at the call site.
            st.switch_to(src);
            if parent != ROOT {
                if src.is_external() {
                    self.stats.mismatched_ext_call_branches += 1;
                } else {
                    self.stats.mismatched_pro_epi_branches += 1;
                }
            }
        } else {
            st.pop();
        }
        st.ip = src;
    }

    fn unwind_return(&mut self, st: &mut State, br: Branch<Vaddr>) {
        // A return target not after a call gives no caller call site; llvm-profgen keys such a
        // frame as address 0 and corrupts the context walk; profgen cuts the context there like
        // an external frame.
        let call = if br.target.is_external() {
            Vaddr::EXTERNAL
        } else {
            let code = self.code;
            self.call_sites.get(br.target, (br.target.0, 0), || call_site_of(code, br.target))
        };
        st.switch_to(call);
        if self.opts.probe_based && !br.source.is_external() {
            st.push_callee(br.source);
        } else {
            st.push(br.source);
        }
        st.ip = br.source;
    }

    /// The fall-through range from the LBR entry's `target` to the next entry's source (`st.ip`).
    fn unwind_linear(&mut self, st: &mut State, target: Vaddr, repeat: u64) {
        let mut end = st.ip;
        if end.is_external() && target.is_external() {
            // Ran into external code and came back: the frames below stay valid.
            self.stats.paired_ext_addrs += 1;
            return;
        }
        if end.is_external() || target.is_external() {
            self.stats.unpaired_ext_addrs += 1;
            st.invalid = true;
            return;
        }
        let code = self.code;
        let crosses = || code.range_crosses_uncond_branch(target, end);
        if target > end || self.crossings.get((target, end), (target.0, end.0), crosses) {
            st.invalid = true;
            return;
        }
        if self.opts.probe_based {
            let node = st.caller_node(&mut self.by_stack);
            self.held.add(&mut self.by_stack, node, false, target, end, repeat);
            return;
        }
        // Split the range where the inline context changes: each piece belongs to its own frame.
        let mut prev_stack = self.code.inline_stack(st.ip);
        while st.ip > target {
            let prev = st.ip;
            let Some(ip) = self.code.prev_inst(prev) else { break };
            st.ip = ip;
            let stack = self.code.inline_stack(ip);
            let same = inline_context_equal(&prev_stack, &stack);
            prev_stack = stack;
            if !same {
                st.switch_to(prev);
                self.record(st, st.leaf, false, (prev, end), repeat);
                end = ip;
            }
        }
        let ip = st.ip;
        st.switch_to(ip);
        self.record(st, st.leaf, false, (ip, end), repeat);
    }

    fn record_branch(&mut self, st: &mut State, br: Branch<Vaddr>, repeat: u64) {
        if br.target.is_external() {
            return;
        }
        if br.source.is_external() {
            // External → internal: kept context-less, it becomes the callee's head samples.
            self.record(st, ROOT, true, (br.source, br.target), repeat);
        } else if self.opts.probe_based {
            let node = st.caller_node(&mut self.by_stack);
            self.held.add(&mut self.by_stack, node, true, br.source, br.target, repeat);
        } else {
            let leaf = st.leaf;
            self.record(st, leaf, true, (br.source, br.target), repeat);
        }
    }

    /// Adds `n` to the count of range (`branch` false) or branch `pair` in `frame`'s context.
    /// Frames stay where they are made unless tail-call frames may move them, so their contexts
    /// are known at once; otherwise the count waits in the frame until [`Self::finish_sample`].
    #[inline(always)]
    fn record(&mut self, st: &mut State, frame: usize, branch: bool, pair: (Vaddr, Vaddr), n: u64) {
        if st.tail_frames {
            let f = &mut st.trie.frames[frame];
            let counts = if branch { &mut f.branches } else { &mut f.ranges };
            counts.push((pair.0, pair.1, n));
            return;
        }
        let stack = st.trie.node(&mut self.by_stack, frame);
        self.held.add(&mut self.by_stack, stack, branch, pair.0, pair.1, n);
    }

    /// Once a sample's walk is over: external frames with callees are noted (their callees'
    /// contexts are cut there), and with tail-call frames the counts waiting in its frames go to
    /// their contexts.
    fn finish_sample(&mut self, trie: &mut Trie, tail_frames: bool) {
        if trie.external_callees {
            self.stats.untracked_callsites.insert(Vaddr::EXTERNAL);
        }
        if !tail_frames {
            return;
        }
        for f in 0..trie.len {
            if !trie.frames[f].has_counts() {
                continue;
            }
            let stack = trie.node(&mut self.by_stack, f);
            let frame = &trie.frames[f];
            for &(s, e, n) in &frame.ranges {
                self.held.add(&mut self.by_stack, stack, false, s, e, n);
            }
            for &(s, t, n) in &frame.branches {
                self.held.add(&mut self.by_stack, stack, true, s, t, n);
            }
        }
    }
}

impl<C: CodeView + ?Sized> Unwinder<'_, C> {
    /// The counters per context, and what unwinding met.
    pub fn finish(self) -> (ContextCounters, UnwindStats) {
        let (contexts, stats) = self.into_contexts(Default::default());
        (contexts.into_counters(), stats)
    }

    fn into_contexts(
        mut self,
        hasher: hashbrown::DefaultHashBuilder,
    ) -> (ContextShards, UnwindStats) {
        self.held.drain_into(&mut self.by_stack);
        let mut contexts = ContextShards::new(hasher);
        self.by_stack.into_contexts(self.code, &self.opts, &mut contexts);
        (contexts, self.stats)
    }
}

/// Unwinds every aggregated sample (in parallel chunks) and merges the results.
pub fn unwind_all<C: CodeView + Sync + ?Sized>(
    code: &C,
    samples: &[(HybridSample, u64)],
    opts: UnwindOptions,
) -> (ContextCounters, UnwindStats) {
    unwind_all_with(
        code,
        samples,
        |u, (s, n)| {
            u.unwind(s, *n);
        },
        opts,
    )
}

/// [`unwind_all`] over any stored form of the samples: `unwind` unwinds an item's sample with
/// the unwinder it is given (decoding it if need be), so no second copy of all samples is made.
pub fn unwind_all_with<C: CodeView + Sync + ?Sized, T: Sync>(
    code: &C,
    items: &[T],
    unwind: impl Fn(&mut Unwinder<C>, &T) + Sync,
    opts: UnwindOptions,
) -> (ContextCounters, UnwindStats) {
    use rayon::prelude::*;
    use std::sync::Mutex;
    // One unwinder per thread, kept from chunk to chunk (not one per piece of work rayon splits
    // off, a dozen or more at 2 threads once it steals): each keeps its direct-mapped caches warm
    // and its own counters by stack, so a stack met by several pieces of one thread is turned
    // into a context once, and no unwinder is made, drained and merged per piece. A thread runs
    // one chunk at a time, so its slot is free when it takes it. Exact: counts are summed, in
    // any grouping; the unwinders' contexts merge shard by shard as before.
    let slots: Vec<_> =
        (0..rayon::current_num_threads()).map(|_| Mutex::new(None::<Unwinder<C>>)).collect();
    // Every chunk a piece of its own: rayon runs a piece it has not split on one thread, and
    // left to split as it likes, its last pieces were a quarter of the stacks each, which one
    // thread unwound at the end while the other had nothing left to take.
    items.par_chunks(256).with_max_len(1).for_each(|chunk| {
        let i = rayon::current_thread_index().unwrap_or(0) % slots.len();
        let mut slot = slots[i].lock().unwrap_or_else(|e| e.into_inner());
        let u = slot.get_or_insert_with(|| Unwinder::new(code, opts));
        for item in chunk {
            unwind(u, item);
        }
    });
    // Each thread turns the unwinder it filled into contexts (a broadcast, not a parallel
    // iterator that may hand a thread the other's): that frees the counters merged into a context
    // met before on the thread that allocated them, without taking another thread's allocator
    // lock (taken for every such free when the threads were crossed, half of the conversion's
    // time at two threads), and no thread waits to be woken for its share.
    // The slots are those of the threads of the pool the chunks ran on, which broadcasts.
    let hasher = hashbrown::DefaultHashBuilder::default();
    let converted = rayon::broadcast(|ctx| {
        let slot =
            slots.get(ctx.index()).map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).take());
        slot.flatten().map(|u| u.into_contexts(hasher.clone()))
    });
    let (mut all, mut stats) = (Vec::new(), UnwindStats::default());
    for (c, s) in converted.into_iter().flatten() {
        all.push(c);
        stats.merge(&s);
    }
    let contexts = ContextShards::merge_all(hasher, all);
    // Which thread met a bogus trace varies: listed in one order.
    stats.bogus_traces.sort_unstable();
    (contexts.into_counters(), stats)
}

#[cfg(test)]
mod tests;
