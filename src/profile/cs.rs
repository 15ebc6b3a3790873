//! Context-sensitive profile generation (llvm-profgen's `CSProfileGenerator`, reference §6.5).
//!
//! In: [`ContextCounters`] from the virtual unwinder and the binary model. Out: a flat CS
//! [`Profile`] keyed by full calling contexts (`[main:1 @ foo:2 @ bar]`), before the
//! post-passes (pre-inliner, trimming, nesting).
//!
//! Matches llvm-profgen-19 output (checked against it in `tests/cs_*_oracle.rs`), except:
//! - [`CsOptions::callee_context_base_discriminator`] fixes LLVM 19's raw-discriminator callee
//!   contexts: `CsOptions::default()` leaves it off (LLVM's behaviour, which the oracle tests
//!   compare against), profgen's command line turns it on (README, "Differences from
//!   llvm-profgen", 9);
//! - probes whose inline chain names a function without `.pseudo_probe_desc` entry are skipped
//!   and counted ([`ProbeCsStats`]) where llvm-profgen dereferences a null descriptor;
//! - tail-call inference walks edges in address/function order (llvm-profgen: hash order), which
//!   only matters when a cached search result depends on the walk order.

use crate::addr::Vaddr;
use crate::aggregate::{ContextCounters, ContextKey, Counters};
use crate::binary::probes::{NodeId, Probe, ProbeInfo, ProbeType};
use crate::binary::{CodeView, FuncId, InstKind};
use crate::llvm::discriminator::{base_discriminator, duplication_factor};
use crate::llvm::{ContextFrame, ContextShape, FuncName, LineLocation};
use crate::profile::model::attr;
use crate::profile::ranges::{RangeScratch, disjoint_ranges, disjoint_ranges_in};
use crate::profile::{Context, FunctionSamples, Profile, ProfileKind, VecMap};
use hashbrown::HashMap;
use rayon::prelude::*;
use std::borrow::{Borrow, Cow};
use std::collections::{BTreeMap, BTreeSet};
use std::hash::{BuildHasher, Hash};
use std::sync::OnceLock;

/// What the probe-based CS builder needs from the decoded `.pseudo_probe` and
/// `.pseudo_probe_desc` sections.
pub trait ProbeView {
    /// Probes at instruction address `a`, in decoding order.
    fn probes_at(&self, a: Vaddr) -> &[Probe];
    /// The addresses in `[start, end]` that have probes, ascending, each with its probes in
    /// decoding order.
    fn probes_in(&self, start: Vaddr, end: Vaddr) -> impl Iterator<Item = (Vaddr, &[Probe])>;
    /// Every probe of an inline-tree node.
    fn node_probes(&self, n: NodeId) -> &[Probe];
    /// How many inline-tree nodes there are: every probe's node is below it.
    fn node_count(&self) -> usize;
    /// GUID of the node's function.
    fn node_guid(&self, n: NodeId) -> u64;
    /// For an inlined node: the parent node and the call-site probe id in it. `None` for
    /// top-level nodes (function bodies that were not inlined).
    fn node_inline_site(&self, n: NodeId) -> Option<(NodeId, u32)>;
    /// `.pseudo_probe_desc` entry: function name and CFG checksum.
    fn func_desc(&self, guid: u64) -> Option<(&str, u64)>;

    /// The first call probe at `a` (`getCallProbeForAddr`); asked for every sampled branch and
    /// call site, so a view with an index by address should answer from it.
    fn call_probe_at(&self, a: Vaddr) -> Option<Probe> {
        self.probes_at(a).iter().find(|p| p.kind.is_call()).copied()
    }
}

impl ProbeView for ProbeInfo {
    fn probes_at(&self, a: Vaddr) -> &[Probe] {
        ProbeInfo::probes_at(self, a)
    }
    fn probes_in(&self, start: Vaddr, end: Vaddr) -> impl Iterator<Item = (Vaddr, &[Probe])> {
        let probes = ProbeInfo::probes_in(self, start, end);
        probes.chunk_by(|a, b| a.addr == b.addr).map(|at| (at[0].addr, at))
    }
    fn node_probes(&self, n: NodeId) -> &[Probe] {
        ProbeInfo::node_probes(self, n)
    }
    fn node_count(&self) -> usize {
        self.nodes().len()
    }
    fn node_guid(&self, n: NodeId) -> u64 {
        self.node(n).guid
    }
    fn node_inline_site(&self, n: NodeId) -> Option<(NodeId, u32)> {
        let node = self.node(n);
        (node.parent != NodeId::ROOT).then_some((node.parent, node.callsite))
    }
    fn func_desc(&self, guid: u64) -> Option<(&str, u64)> {
        self.desc(guid).map(|d| (&*d.name, d.hash))
    }
    fn call_probe_at(&self, a: Vaddr) -> Option<Probe> {
        ProbeInfo::call_probe_at(self, a).copied()
    }
}

/// Options of CS profile generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CsOptions {
    /// `--update-total-samples`.
    pub update_total_samples: bool,
    /// Line-based: create the callee context of a call at the caller's *base* discriminator,
    /// like body contexts. llvm-profgen-19 uses the raw discriminator (reference §8.6), which
    /// strands the call's head samples in a context no body sample reaches and doubles the
    /// caller's call-site count through inference. Off = identical to llvm-profgen-19; the
    /// command line turns it on.
    pub callee_context_base_discriminator: bool,
    /// `--infer-missing-frames` (probe-based only).
    pub infer_missing_frames: bool,
    /// `--max-search-depth`.
    pub max_search_depth: u32,
    /// Recursion compression and depth limit of the contexts.
    pub context: ContextShape,
}

impl Default for CsOptions {
    fn default() -> Self {
        CsOptions {
            update_total_samples: false,
            callee_context_base_discriminator: false,
            infer_missing_frames: true,
            max_search_depth: u32::MAX - 1,
            context: ContextShape::default(),
        }
    }
}

/// Flat CS profiles by full context while they are built; hashed (contexts are long, comparing
/// them in a tree costs more), sorted when finished. Each profile has a slot, so that a builder
/// that resolved a context once adds to its profile without hashing the context again. Each
/// context's hash is kept: profiles built apart with clones of one hasher merge without hashing
/// their contexts again. `K` is the context: a [`Context`] (line-based) or a [`FrameKey`]
/// (probe-based).
struct ContextProfiles<K> {
    hasher: hashbrown::DefaultHashBuilder,
    /// Slots, found by their contexts' hashes.
    slots: hashbrown::HashTable<usize>,
    profiles: Vec<(K, FunctionSamples)>,
    /// The hash of each slot's context.
    hashes: Vec<u64>,
}

/// The shard (of `n`) of a context hashed to `hash`: bits the hash tables do not use for the
/// bucket (low bits) or the tag (top 7), so that a shard's table spreads as an unsharded one.
fn shard_of(hash: u64, n: usize) -> usize {
    ((hash >> 32) % n as u64) as usize
}

impl<K: Eq + Hash> ContextProfiles<K> {
    /// Empty profiles hashing contexts with `hasher`.
    fn with_hasher(hasher: hashbrown::DefaultHashBuilder) -> Self {
        ContextProfiles {
            hasher,
            slots: hashbrown::HashTable::new(),
            profiles: Vec::new(),
            hashes: Vec::new(),
        }
    }

    /// Room for `total` profiles in all (no growth until then): a table grown by doubling
    /// copies its profiles each time.
    fn reserve_total(&mut self, total: usize) {
        let n = total.saturating_sub(self.profiles.len());
        self.profiles.reserve_exact(n);
        self.hashes.reserve_exact(n);
        let hashes = &self.hashes;
        self.slots.reserve(n, |&i| hashes[i]);
    }

    /// The slot of `ctx` (hashed to `hash`), if it has a profile.
    fn find<Q: Eq + ?Sized>(&self, ctx: &Q, hash: u64) -> Option<usize>
    where
        K: Borrow<Q>,
    {
        self.slots.find(hash, |&i| self.profiles[i].0.borrow() == ctx).copied()
    }

    /// The slot of `ctx` (hashed to `hash`), made with `make` if it has no profile yet.
    fn find_or_insert<Q: Eq + ?Sized>(
        &mut self,
        ctx: &Q,
        hash: u64,
        make: impl FnOnce() -> (K, FunctionSamples),
    ) -> usize
    where
        K: Borrow<Q>,
    {
        let (profiles, hashes) = (&self.profiles, &self.hashes);
        match self.slots.entry(hash, |&i| profiles[i].0.borrow() == ctx, |&i| hashes[i]) {
            hashbrown::hash_table::Entry::Occupied(e) => *e.get(),
            hashbrown::hash_table::Entry::Vacant(e) => {
                let slot = profiles.len();
                e.insert(slot);
                self.profiles.push(make());
                self.hashes.push(hash);
                slot
            }
        }
    }

    /// The slot of `ctx`'s profile, made with `make` (the context and its empty profile) if
    /// need be.
    fn slot_with<Q: Eq + Hash + ?Sized>(
        &mut self,
        ctx: &Q,
        was_inlined: bool,
        make: impl FnOnce() -> (K, FunctionSamples),
    ) -> usize
    where
        K: Borrow<Q>,
    {
        let hash = self.hasher.hash_one(ctx);
        let slot = self.find_or_insert(ctx, hash, make);
        if was_inlined {
            self.profiles[slot].1.attributes |= attr::WAS_INLINED;
        }
        slot
    }

    fn at(&mut self, slot: usize) -> &mut FunctionSamples {
        &mut self.profiles[slot].1
    }

    /// Reorders the profiles by [`shard_of`] their contexts' hashes into `n` shards, in place
    /// (a run's contexts are distinct: their order does not matter); returns where each
    /// shard's profiles end.
    fn partition(&mut self, n: usize) -> Vec<usize> {
        let mut sizes = vec![0; n];
        for &hash in &self.hashes {
            sizes[shard_of(hash, n)] += 1;
        }
        // Where each shard starts (its next place) and ends.
        let (mut next, mut ends) = (Vec::with_capacity(n), Vec::with_capacity(n));
        let mut at = 0;
        for size in sizes {
            next.push(at);
            at += size;
            ends.push(at);
        }
        // Each swap puts one profile in its shard's next place.
        for s in 0..n {
            while next[s] < ends[s] {
                let i = next[s];
                let t = shard_of(self.hashes[i], n);
                if t != s {
                    self.profiles.swap(i, next[t]);
                    self.hashes.swap(i, next[t]);
                }
                next[t] += 1;
            }
        }
        // The slots no longer match the profiles: the table is freed.
        self.slots = hashbrown::HashTable::new();
        ends
    }

    /// Adds the profiles built from later contexts (hashed by a clone of this hasher), taking
    /// the new ones out of `later`: counts add up (saturating sums, in any order), a checksum
    /// they set replaces this one's, as the later context's would have.
    fn merge(&mut self, later: &mut [(K, FunctionSamples)], hashes: &[u64])
    where
        K: Default,
    {
        for ((ctx, fs), &hash) in later.iter_mut().zip(hashes) {
            match self.find(ctx, hash) {
                Some(slot) => {
                    let mine = &mut self.profiles[slot].1;
                    let checksum = fs.checksum.or(mine.checksum);
                    mine.merge(fs);
                    mine.checksum = checksum;
                    // Freed here, in the shards' parallel merge, rather than with its run
                    // after the merge, on one thread.
                    (*ctx, *fs) = Default::default();
                }
                None => {
                    let hashes = &self.hashes;
                    self.slots.insert_unique(hash, self.profiles.len(), |&i| hashes[i]);
                    self.profiles.push((std::mem::take(ctx), std::mem::take(fs)));
                    self.hashes.push(hash);
                }
            }
        }
    }

    /// `updateFunctionSamples`: optional total recomputation, then body counts raised to their
    /// call-target sums; on rayon's current pool.
    fn update(&mut self, update_total_samples: bool)
    where
        K: Send,
    {
        self.profiles.par_iter_mut().for_each(|(_, fs)| {
            if update_total_samples {
                fs.total_samples = fs.body.values().fold(0u64, |t, b| t.saturating_add(b.count));
            }
            for b in fs.body.values_mut() {
                let targets = b.call_targets.values().fold(0u64, |t, n| t.saturating_add(*n));
                b.count = b.count.max(targets);
            }
        });
    }
}

impl ContextProfiles<Context> {
    /// The slot of `ctx`'s profile, created empty if need be.
    fn slot(&mut self, ctx: &Context, was_inlined: bool) -> usize {
        self.slot_with(ctx, was_inlined, || (ctx.clone(), FunctionSamples::new(ctx.leaf())))
    }

    fn get_or_create(&mut self, ctx: &Context, was_inlined: bool) -> &mut FunctionSamples {
        let slot = self.slot(ctx, was_inlined);
        self.at(slot)
    }

    /// `populateInferredFunctionSamples`: a context without head samples (e.g. inlined in the
    /// binary, so no call was seen) gives its parent an estimated call count at its call site.
    /// Children before parents, as in llvm-profgen's post-order walk.
    fn infer_callsite_samples(&mut self) {
        // Contexts without head samples by length; heads never change here, and a parent
        // created here has none, so it joins the next shorter length.
        let mut by_len: Vec<Vec<Context>> = Vec::new();
        for (ctx, fs) in &self.profiles {
            if fs.head_samples == 0 && ctx.len() >= 2 {
                by_len.resize_with(by_len.len().max(ctx.len() + 1), Vec::new);
                by_len[ctx.len()].push(ctx.clone());
            }
        }
        for len in (2..by_len.len()).rev() {
            let mut at_len = std::mem::take(&mut by_len[len]);
            // In key order, as a walk over the map would meet them.
            at_len.sort_unstable();
            at_len.dedup();
            for ctx in at_len {
                let slot = self.find(&ctx, self.hasher.hash_one(&ctx)).expect("a profile");
                let fs = &self.profiles[slot].1;
                let mut estimate = head_samples_estimate(fs);
                if estimate == 0 && fs.body.is_empty() {
                    estimate = 1;
                }
                let callee = ctx.leaf().clone();
                let callsite = ctx.callers()[len - 2].loc;
                let parent = ctx.parent().expect("at least two frames");
                let p = self.get_or_create(&parent, false);
                p.add_call_target(callsite, &callee, estimate);
                p.add_body(callsite, estimate);
                p.add_total(estimate);
                if p.head_samples == 0 && len > 2 {
                    by_len[len - 1].push(parent);
                }
            }
        }
    }

    /// Updated ([`Self::update`]) and sorted on rayon's current pool.
    fn finish(mut self, kind: ProfileKind, update_total_samples: bool) -> Profile {
        self.update(update_total_samples);
        let mut profiles = self.profiles;
        // Contexts are distinct: the BTreeMap then only checks the order.
        profiles.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Profile { kind, functions: profiles.into_iter().collect(), symbol_list: None }
    }
}

/// `FunctionSamples::getHeadSamplesEstimate` for a flat CS profile without head samples: the
/// first body sample, at least 1 when the profile has samples.
fn head_samples_estimate(fs: &FunctionSamples) -> u64 {
    let first = fs.body.values().next().map_or(0, |b| b.count);
    if first != 0 { first } else { u64::from(fs.total_samples > 0) }
}

/// CS line-based profile (`generateLineNumBasedProfile`) from [`ContextKey::Frames`] counters.
/// llvm-profgen's `WasLeafInlined` for a line-based context: whether the context's leaf function
/// is an inlined copy, read off the inline stack of the context's code. Derived from the binary
/// (not carried by the counters) so that unsymbolized profiles round-trip to the same profile.
fn leaf_was_inlined<C: CodeView + ?Sized>(code: &C, c: &crate::aggregate::Counters) -> bool {
    let in_range = c.ranges.keys().min().and_then(|&(s, e)| code.insts_in(s, e).next());
    let at_branch = || c.branches.keys().map(|&(s, _)| s).filter(|s| !s.is_external()).min();
    in_range.or_else(at_branch).is_some_and(|a| code.inline_stack(a).len() > 1)
}

pub fn generate_line_cs<C: CodeView + ?Sized>(
    code: &C,
    counters: &ContextCounters,
    opts: &CsOptions,
) -> Profile {
    let fs_discr = code.uses_fs_discriminators();
    let mut profiles = ContextProfiles::with_hasher(Default::default());
    let mut keys: Vec<&ContextKey> = counters.by_context.keys().collect();
    keys.sort();
    for key in keys {
        let ContextKey::Frames(ctx) = key else { continue };
        let c = &counters.by_context[key];
        let context = Context::new(ctx.clone());
        if !ctx.is_empty() {
            let fs = profiles.get_or_create(&context, leaf_was_inlined(code, c));
            for (start, end, n) in disjoint_ranges(c.ranges.iter().map(|(&r, &n)| (r, n))) {
                // Zero segments are gaps that belong to no range of this context.
                if n == 0 {
                    continue;
                }
                for a in code.insts_in(start, end) {
                    let Some(leaf) = code.inline_stack(a).last().cloned() else { continue };
                    let loc = LineLocation::new(
                        leaf.line_offset,
                        base_discriminator(leaf.discriminator, fs_discr),
                    );
                    // Lines keep the max over their instructions, scaled back for unrolled copies.
                    let scaled = n.saturating_mul(u64::from(duplication_factor(
                        leaf.discriminator,
                        fs_discr,
                    )));
                    fs.max_body(loc, scaled);
                    fs.add_total(n);
                }
            }
        }
        let mut branches: Vec<(&(Vaddr, Vaddr), &u64)> = c.branches.iter().collect();
        branches.sort();
        for (&(src, dst), &n) in branches {
            let Some(callee) = code.entry_func_name(dst) else { continue };
            let callee = FuncName::canonical(&callee);
            let mut callsite = LineLocation::default();
            // A call from a context-less (external) source enters the callee's base context.
            if !ctx.is_empty()
                && let Some(leaf) = code.inline_stack(src).last()
            {
                let base = base_discriminator(leaf.discriminator, fs_discr);
                profiles.get_or_create(&context, false).add_call_target(
                    LineLocation::new(leaf.line_offset, base),
                    &callee,
                    n,
                );
                let discr =
                    if opts.callee_context_base_discriminator { base } else { leaf.discriminator };
                callsite = LineLocation::new(leaf.line_offset, discr);
            }
            let mut callee_ctx = ctx.clone();
            if let Some(last) = callee_ctx.last_mut() {
                last.loc = callsite;
            }
            callee_ctx.push(ContextFrame { func: callee, loc: LineLocation::default() });
            profiles.get_or_create(&Context::new(callee_ctx), false).add_head(n);
        }
    }
    profiles.infer_callsite_samples();
    let kind = ProfileKind {
        context_sensitive: true,
        probe_based: false,
        preinlined: false,
        fs_discriminator: fs_discr,
    };
    profiles.finish(kind, opts.update_total_samples)
}

/// Probe-based CS generation problems that llvm-profgen would crash on; counted, not fatal.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProbeCsStats {
    /// Probes skipped because a function on their inline chain has no `.pseudo_probe_desc`.
    pub probes_without_desc: u64,
}

/// CS probe-based profile (`generateProbeBasedProfile`) from [`ContextKey::Addrs`] counters.
///
/// Contexts are handled in key order, in blocks: the sampled probes of each context are found in
/// parallel (rayon's current pool), tail-call inference then runs on one thread in the order the
/// sequential builder would query it (its caches make results depend on that order), and the
/// profiles are built in parallel per run of contexts and merged in order, while the next block
/// is sampled and inferred (so inference, sequential, overlaps the build). Every merge is a sum,
/// except the checksum, which the later context sets as it would have sequentially: the profile
/// does not depend on the number of threads.
pub fn generate_probe_cs<C, P>(
    code: &C,
    probes: &P,
    counters: &ContextCounters,
    opts: &CsOptions,
) -> (Profile, ProbeCsStats)
where
    C: CodeView + Sync + ?Sized,
    P: ProbeView + Sync + ?Sized,
{
    let (profile, stats, ()) =
        generate_probe_cs_beside(code, probes, Cow::Borrowed(counters), opts, |_| ());
    (profile, stats)
}

/// [`generate_probe_cs`], and `beside`'s result: `beside` reads the counters once the contexts'
/// profiles are built, before the profile's contexts and map are made of them. Owned counters
/// are freed right after it: the run's peak was there, with them in memory (SQLite CS: 12 MB of
/// a 79 MB heap).
pub fn generate_probe_cs_beside<C, P, R: Send>(
    code: &C,
    probes: &P,
    owned: Cow<'_, ContextCounters>,
    opts: &CsOptions,
    beside: impl FnOnce(&ContextCounters) -> R + Send,
) -> (Profile, ProbeCsStats, R)
where
    C: CodeView + Sync + ?Sized,
    P: ProbeView + Sync + ?Sized,
{
    let counters = &*owned;
    let (mut inferrer, keys) = rayon::join(
        || {
            let infer = opts.infer_missing_frames;
            infer.then(|| MissingFrameInferrer::new(code, counters, opts.max_search_depth))
        },
        || {
            let mut keys: Vec<(&[Vaddr], &Counters)> = counters
                .by_context
                .iter()
                .filter_map(|(k, c)| match k {
                    ContextKey::Addrs(sites) => Some((&sites[..], c)),
                    _ => None,
                })
                .collect();
            // Distinct keys: the order is the same for any sort.
            keys.par_sort_unstable_by(|a, b| a.0.cmp(b.0));
            keys
        },
    );
    // One hasher for the runs' profiles, so that their merge reuses their hashes. The merge is
    // sharded by context hash, the shards merged in parallel: each context is in one shard,
    // which merges its runs in order, and the shards' profiles are sorted when finished.
    let hasher = hashbrown::DefaultHashBuilder::default();
    let shard_count = rayon::current_num_threads();
    let mut shards: Vec<ContextProfiles<FrameKey>> =
        (0..shard_count).map(|_| ContextProfiles::with_hasher(hasher.clone())).collect();
    let mut stats = ProbeCsStats::default();
    let shared_names = SharedNames::default();
    let node_locs: Vec<OnceLock<NodeLocs>> =
        (0..probes.node_count()).map(|_| OnceLock::new()).collect();
    // Sampled leaves and tail-call inference (sequential) of one block run while the block
    // before is built (parallel) and merged. The contexts none of whose queries can infer a
    // frame are found beside their leaves, in parallel: only the others are queried in order
    // (a query that cannot infer changes no cache).
    let sample = |block: &[(&[Vaddr], &Counters)], inferrer: Option<&mut MissingFrameInferrer>| {
        let shared = inferrer.as_deref();
        let (leaves, may_infer): (Vec<SampledLeaves>, Vec<bool>) = block
            .par_iter()
            .map_init(
                || (LeafScratch::default(), (&[][..], 0)),
                |(scratch, before), &(sites, c)| {
                    let l = SampledLeaves::of(code, probes, c, scratch);
                    let may = shared.is_some_and(|inf| l.may_infer(code, inf, sites, before));
                    (l, may)
                },
            )
            .unzip();
        let inferred: Vec<InferredSites> = match inferrer {
            Some(inf) => {
                let mut scratch = InferScratch::default();
                (block.iter().zip(&leaves).zip(may_infer))
                    .map(|((&(sites, _), l), may)| match may {
                        true => l.infer(code, inf, sites, &mut scratch),
                        false => InferredSites::default(),
                    })
                    .collect()
            }
            None => vec![InferredSites::default(); block.len()],
        };
        (leaves, inferred)
    };
    // Builders between runs: a run takes one (or makes one) and puts it back, so that the
    // node-indexed arrays and the caches of what depends on the binary alone (inline chains,
    // names) are made once per worker rather than once per run. Exact: each cache
    // maps its key to one value whichever run asks.
    let idle: std::sync::Mutex<Vec<ProbeCsBuilder<P>>> = Default::default();
    let build = |block: &[(&[Vaddr], &Counters)],
                 leaves: &mut [SampledLeaves],
                 inferred: &mut [InferredSites]| {
        // Several runs per worker, for balance.
        let run_len = block.len().div_ceil(4 * rayon::current_num_threads()).max(1);
        block
            .par_chunks(run_len)
            .zip(leaves.par_chunks_mut(run_len))
            .zip(inferred.par_chunks_mut(run_len))
            .map(|((keys, leaves), inferred)| {
                let taken = idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
                let mut g = taken.unwrap_or_else(|| ProbeCsBuilder {
                    probes,
                    opts,
                    profiles: ContextProfiles::with_hasher(hasher.clone()),
                    stats: ProbeCsStats::default(),
                    resolved: ResolvedHere::new(probes.node_count()),
                    shared_names: &shared_names,
                    names: HashMap::new(),
                    name_table: Vec::new(),
                    key: Vec::new(),
                    repeats: NameRepeats::default(),
                    inline_context_of: vec![0; probes.node_count()],
                    inline_contexts: Vec::new(),
                    buffers: Default::default(),
                    sampled_nodes: Vec::new(),
                    bodies: Vec::new(),
                    inlined_calls: Vec::new(),
                    node_locs: &node_locs,
                    last_run: (0, 0),
                });
                // Room for as many profiles a context as the builder's last run made (capacity
                // only: the same profiles), sparing most of the tables' growth.
                let (profiles, contexts) = g.last_run;
                g.profiles.reserve_total((keys.len() * profiles).div_ceil(contexts.max(1)));
                for ((&(sites, _), l), inf) in keys.iter().zip(leaves).zip(inferred) {
                    g.resolved.clear();
                    g.body_samples(code, sites, inf, l);
                    g.boundary_samples(code, sites, inf, l);
                    // Freed here, in parallel, rather than after the block on one thread
                    // (and reused by this worker's next allocations).
                    *l = SampledLeaves::default();
                    *inf = InferredSites::default();
                }
                g.last_run = (g.profiles.profiles.len(), keys.len());
                let fresh = ContextProfiles::with_hasher(hasher.clone());
                let mut run = std::mem::replace(&mut g.profiles, fresh);
                let stats = std::mem::take(&mut g.stats);
                idle.lock().unwrap_or_else(|e| e.into_inner()).push(g);
                let ends = run.partition(shard_count);
                (run, ends, stats)
            })
            .collect::<Vec<(ContextProfiles<FrameKey>, Vec<usize>, ProbeCsStats)>>()
    };
    // The first block's sampling and inference overlap nothing: the blocks start small and
    // double up to KEY_BLOCK, each built while the next (at most twice as large) is sampled.
    let mut blocks: Vec<&[(&[Vaddr], &Counters)]> = Vec::new();
    let (mut rest, mut len) = (&keys[..], KEY_BLOCK / 8);
    while !rest.is_empty() {
        let (block, after) = rest.split_at(len.min(rest.len()));
        blocks.push(block);
        (rest, len) = (after, (2 * len).min(KEY_BLOCK));
    }
    let mut sampled = blocks.first().map(|b| sample(b, inferrer.as_mut()));
    let mut done = 0;
    for (i, block) in blocks.iter().enumerate() {
        done += block.len();
        let (mut leaves, mut inferred) = sampled.take().expect("the block was sampled");
        let next = blocks.get(i + 1);
        let ((), next_sampled) = rayon::join(
            || {
                // Merged in order: the profile does not depend on the number of runs.
                let mut runs = build(block, &mut leaves, &mut inferred);
                type Part<'r> = (&'r mut [(FrameKey, FunctionSamples)], &'r [u64]);
                let mut by_shard: Vec<Vec<Part>> = Vec::new();
                by_shard.resize_with(shard_count, Vec::new);
                for (run, ends, s) in &mut runs {
                    stats.probes_without_desc += s.probes_without_desc;
                    let (mut profiles, mut hashes) = (&mut run.profiles[..], &run.hashes[..]);
                    let mut start = 0;
                    for (shard, &end) in by_shard.iter_mut().zip(ends.iter()) {
                        let (part, rest) = profiles.split_at_mut(end - start);
                        let (part_hashes, rest_hashes) = hashes.split_at(end - start);
                        shard.push((part, part_hashes));
                        (profiles, hashes, start) = (rest, rest_hashes, end);
                    }
                }
                shards.par_iter_mut().zip(by_shard).for_each(|(shard, parts)| {
                    // A shard about to grow is sized for all contexts at the rate of those done
                    // (grown by doubling, it was copied about once a block).
                    let most =
                        shard.profiles.len() + parts.iter().map(|p| p.0.len()).sum::<usize>();
                    if most > shard.profiles.capacity() {
                        shard.reserve_total(most * keys.len() / done);
                    }
                    for (part, hashes) in parts {
                        shard.merge(part, hashes);
                    }
                });
                // What the merge left of the runs is freed on both cores, not on this one.
                runs.into_par_iter().for_each(drop);
            },
            || next.map(|b| sample(b, inferrer.as_mut())),
        );
        sampled = next_sampled;
    }
    let kind = ProfileKind {
        context_sensitive: true,
        probe_based: true,
        preinlined: false,
        fs_discriminator: false,
    };
    // The builders borrow the names and the probes' locations: freed first, the locations and
    // the inferrer beside the profile's map build rather than after it.
    drop(idle);
    let names = shared_names.into_inner().unwrap_or_else(|e| e.into_inner()).names;
    drop(blocks);
    drop(keys);
    let r = beside(counters);
    if let Cow::Owned(counters) = owned {
        counters.free();
    }
    let update = opts.update_total_samples;
    let spent = (inferrer, node_locs);
    let profile = ContextProfiles::<FrameKey>::finish(shards, &names, kind, update, spent);
    (profile, stats, r)
}

/// Contexts per block of [`generate_probe_cs`]: bounds the sampled probes held at once.
const KEY_BLOCK: usize = 4096;

/// The leaf probes one context's counters sample, in the order the builder visits them.
#[derive(Default)]
struct SampledLeaves {
    /// Block probes with their summed counts, by (address, position at it); no zero counts.
    blocks: Vec<(Probe, u64)>,
    /// Call probes at sampled branch sources, with the branch target and count, by branch.
    calls: Vec<(Probe, Vaddr, u64)>,
}

/// [`SampledLeaves::of`]'s buffers, reused from context to context: the leaves are gathered
/// there and copied out at their final size, rather than grown each time.
#[derive(Default)]
struct LeafScratch {
    blocks: Vec<(Probe, u64)>,
    calls: Vec<(Probe, Vaddr, u64)>,
    ranges: RangeScratch,
}

impl SampledLeaves {
    fn of<C: CodeView + ?Sized, P: ProbeView + ?Sized>(
        code: &C,
        probes: &P,
        c: &Counters,
        scratch: &mut LeafScratch,
    ) -> Self {
        // The segments are disjoint and ascending: each probe is met once, in order, with the
        // count of its segment. Only probes at instruction starts count.
        let LeafScratch { blocks, calls, ranges } = scratch;
        blocks.clear();
        calls.clear();
        for &(start, end, n) in disjoint_ranges_in(c.ranges.iter().map(|(&r, &n)| (r, n)), ranges) {
            // Zero counts come from gaps that belong to no range of this context.
            if n == 0 {
                continue;
            }
            for (a, at) in probes.probes_in(start, end) {
                if code.is_code(a) {
                    let block = at.iter().filter(|p| p.kind == ProbeType::Block);
                    blocks.extend(block.map(|&p| (p, n)));
                }
            }
        }
        // Only the branches from call probes are kept: filtered before they are sorted, by
        // branch (a call probe is at its branch's source; each branch is met once).
        calls.extend(
            c.branches
                .iter()
                .filter_map(|(&(src, dst), &n)| Some((probes.call_probe_at(src)?, dst, n))),
        );
        calls.sort_unstable_by_key(|&(call, dst, _)| (call.addr, dst));
        SampledLeaves { blocks: blocks.to_vec(), calls: calls.to_vec() }
    }

    /// Whether [`Self::infer`] may infer a frame for this context (`sites`): false when none
    /// of its queries can, whatever was queried before ([`MissingFrameInferrer::may_infer`]).
    /// `before`: the sites of the context checked before (contexts come sorted: mostly they
    /// share leading sites) with how many of its leading pairs of sites cannot infer, which
    /// those shared need not be checked again; updated to this context's.
    fn may_infer<'s, C: CodeView + ?Sized>(
        &self,
        code: &C,
        inferrer: &MissingFrameInferrer,
        sites: &'s [Vaddr],
        before: &mut (&'s [Vaddr], usize),
    ) -> bool {
        let func = |a: Vaddr| code.func_range(a).map(|r| r.func);
        let may = |from: Vaddr, to: Vaddr| {
            inferrer.may_infer_from(from) && inferrer.may_infer(from, func(to))
        };
        let (prev, prev_cannot) = *before;
        let shared = prev.iter().zip(sites).take_while(|(a, b)| a == b).count();
        // The pairs of sites that cannot infer, leading: those of the shared sites are known.
        let mut cannot = prev_cannot.min(shared.saturating_sub(1));
        while cannot + 1 < sites.len() && !may(sites[cannot], sites[cannot + 1]) {
            cannot += 1;
        }
        *before = (sites, cannot);
        if cannot + 1 < sites.len() {
            return true;
        }
        let Some(&last) = sites.last() else { return false };
        if !inferrer.may_infer_from(last) {
            return false;
        }
        self.leaf_funcs(code).any(|(func, _)| inferrer.may_infer(last, func))
    }

    /// The leaf probes' functions, each with the leaf's address, in the order the builder meets
    /// them; a leaf in the same function as the one before is left out (most leaves are, and
    /// the span of the last function found answers for them without a look-up).
    fn leaf_funcs<'s, C: CodeView + ?Sized>(
        &'s self,
        code: &'s C,
    ) -> impl Iterator<Item = (Option<FuncId>, Vaddr)> + 's {
        let leaves = self.blocks.iter().map(|(p, _)| p).chain(self.calls.iter().map(|(p, ..)| p));
        let mut span: Option<std::ops::Range<Vaddr>> = None;
        leaves.filter_map(move |leaf| {
            if span.as_ref().is_some_and(|s| s.contains(&leaf.addr)) {
                return None;
            }
            let found = code.func_range_span(leaf.addr);
            span = found.as_ref().map(|(_, s)| s.clone());
            Some((found.map(|(r, _)| r.func), leaf.addr))
        })
    }

    /// Tail-call inference for every leaf function, queried in the order the builder meets
    /// them. A query depends on the leaf only through its function, and a repeated query
    /// changes no cache, so one per function gives the sequential builder's results; the
    /// calling context's own pairs of frames are the same for every leaf, inferred once.
    fn infer<C: CodeView + ?Sized>(
        &self,
        code: &C,
        inferrer: &mut MissingFrameInferrer,
        sites: &[Vaddr],
        scratch: &mut InferScratch,
    ) -> InferredSites {
        let mut out = InferredSites::default();
        let Some(&last) = sites.last() else {
            // No call site: nothing to infer above the leaf.
            return out;
        };
        let InferScratch { prefix, tail, funcs } = scratch;
        prefix.clear();
        funcs.clear();
        for w in sites.windows(2) {
            inferrer.infer_between(code, w[0], w[1], prefix);
        }
        // Nothing inferred above the last call site.
        let plain = prefix.len() + 1 == sites.len();
        for (func, addr) in self.leaf_funcs(code) {
            if funcs.contains(&func) {
                continue;
            }
            funcs.push(func);
            tail.clear();
            inferrer.infer_between(code, last, addr, tail);
            // A leaf function whose sites are the context's own is not listed.
            if plain && tail.len() == 1 {
                continue;
            }
            let mut ctx = Vec::with_capacity(prefix.len() + tail.len());
            ctx.extend_from_slice(prefix);
            ctx.extend_from_slice(tail);
            out.by_func.push((func, ctx));
        }
        out
    }
}

/// [`SampledLeaves::infer`]'s buffers, reused from context to context.
#[derive(Default)]
struct InferScratch {
    /// The call sites above the last, with their inferred frames.
    prefix: Vec<Vaddr>,
    /// The last call site with the frames inferred under it for one leaf function.
    tail: Vec<Vaddr>,
    /// The leaf functions queried.
    funcs: Vec<Option<FuncId>>,
}

/// A context's call sites with inferred tail-call frames, by leaf function: the functions
/// whose sites differ from the context's own (empty without inference or when it added no
/// frame).
#[derive(Clone, Default)]
struct InferredSites {
    by_func: Vec<(Option<FuncId>, Vec<Vaddr>)>,
}

/// The functions a context names more than once, found by marks by name index (reused from
/// context to context).
#[derive(Default)]
struct NameRepeats {
    /// By name index: the pass that last met the name ([`Self::stamp`]).
    seen: Vec<u32>,
    /// The current pass's mark in `seen`, never 0.
    stamp: u32,
    /// By name index: where the current pass last met the name (where `seen` holds its mark).
    last: Vec<u32>,
    /// By frame: the frame before it with the same name, or [`NameRepeats::NONE`].
    prev: Vec<u32>,
    /// By distance: the pairs of frames that far apart with the same name.
    pairs: Vec<u32>,
}

impl NameRepeats {
    const NONE: u32 = u32::MAX;

    /// Starts a pass over a context of names below `names`; returns its mark.
    fn next_pass(&mut self, names: usize) -> u32 {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.seen.fill(0);
            self.stamp = 1;
        }
        self.seen.resize(names, 0);
        self.stamp
    }

    /// Whether two of `frames` name the same function.
    fn any(&mut self, frames: &[Frame], names: usize) -> bool {
        let stamp = self.next_pass(names);
        let seen = &mut self.seen;
        frames.iter().any(|f| std::mem::replace(&mut seen[f.name as usize], stamp) == stamp)
    }

    /// For each distance `p`, the positions `k` where `frames[k]` and `frames[k + p]` name the
    /// same function: at least those where the frames are equal, which recursion compression
    /// needs `p` of for a square of length `p` ([`ContextShape::apply_bounded`]). Mostly a few
    /// pairs, where a context's search for squares tests about n·ln n pairs; `None` past
    /// `4 * frames.len()` of them (deep recursion), which compression cuts short anyway.
    fn pairs(&mut self, frames: &[Frame], names: usize) -> Option<&[u32]> {
        let stamp = self.next_pass(names);
        self.last.resize(names, 0);
        self.prev.clear();
        self.pairs.clear();
        self.pairs.resize(frames.len(), 0);
        let mut budget = 4 * frames.len();
        for (i, f) in frames.iter().enumerate() {
            let name = f.name as usize;
            let met = std::mem::replace(&mut self.seen[name], stamp) == stamp;
            let mut k = if met { self.last[name] } else { Self::NONE };
            self.last[name] = i as u32;
            self.prev.push(k);
            while k != Self::NONE {
                budget = budget.checked_sub(1)?;
                self.pairs[i - k as usize] += 1;
                k = self.prev[k as usize];
            }
        }
        Some(&self.pairs)
    }
}

/// A context frame of the probe-based builder: the function is an index into the names of
/// [`SharedNames`] (one per distinct text), so that frames compare, hash and copy as integers.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Frame {
    name: u32,
    loc: LineLocation,
}

impl Frame {
    /// Writes the frame's [`FrameKey`] bytes into `bytes` ([`FRAME_BYTES`] of them).
    fn write(&self, bytes: &mut [u8]) {
        bytes[0..4].copy_from_slice(&self.name.to_be_bytes());
        bytes[4..8].copy_from_slice(&self.loc.line_offset.to_be_bytes());
        bytes[8..12].copy_from_slice(&self.loc.discriminator.to_be_bytes());
    }

    /// The frame of [`FRAME_BYTES`] key bytes.
    fn decode(bytes: &[u8]) -> Frame {
        let word = |i: usize| u32::from_be_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
        Frame { name: word(0), loc: LineLocation::new(word(4), word(8)) }
    }
}

/// A context as the probe-based builder keys its profiles: its [`Frame`]s, root first, the
/// leaf's location (0, 0), each as [`FRAME_BYTES`] big-endian bytes (name, line offset,
/// discriminator). Contexts are long and share long roots: bytes hash and compare in bulk, and
/// once the names are ranks by text ([`ContextProfiles::finish`]), contexts order as their
/// bytes do.
type FrameKey = Box<[u8]>;

/// Bytes of a [`Frame`] in a [`FrameKey`].
const FRAME_BYTES: usize = 12;

/// A leaf probe's context as the builder uses it: the slot of its profile (whose context
/// it is) and the checksum of the leaf's function.
#[derive(Clone, Copy)]
struct LeafProfile {
    slot: usize,
    checksum: u64,
}

struct ProbeCsBuilder<'a, P: ProbeView + ?Sized> {
    probes: &'a P,
    opts: &'a CsOptions,
    profiles: ContextProfiles<FrameKey>,
    stats: ProbeCsStats,
    /// What was resolved in the current calling context.
    resolved: ResolvedHere,
    shared_names: &'a SharedNames,
    /// [`Self::name`] by GUID, kept across the builder's runs.
    names: HashMap<u64, Option<u32>>,
    /// The names the builder met, by their index.
    name_table: Vec<Option<FuncName>>,
    /// The key of a context being looked up, reused.
    key: Vec<u8>,
    /// Which functions the context being resolved names more than once.
    repeats: NameRepeats,
    /// By node index: 1 + the index in `inline_contexts` of the node's expansion, 0 before it is
    /// made.
    inline_context_of: Vec<u32>,
    /// [`Self::push_inline_context`]'s expansions, kept across the builder's runs.
    inline_contexts: Vec<Option<InlineContext>>,
    /// The call probes and frames of the context being resolved, reused.
    buffers: (Vec<Probe>, Vec<Frame>),
    /// [`Self::body_samples`]' sampled function instances and body samples, reused.
    sampled_nodes: Vec<(usize, NodeId)>,
    bodies: Vec<(usize, NodeId, LineLocation, u64)>,
    /// (caller's slot, call site, callee's name index, count) of the inlined callees' entries.
    inlined_calls: Vec<(usize, LineLocation, u32, u64)>,
    /// The locations of an inline node's probes, by node index, made once for all runs (the
    /// first run that needs one makes it).
    node_locs: &'a [OnceLock<NodeLocs>],
    /// The profiles and contexts of the builder's last run.
    last_run: (usize, usize),
}

/// The locations of an inline node's probes, made once for all runs.
struct NodeLocs {
    locs: VecMap<LineLocation, ()>,
    /// By probe id: the place in `locs` of its first location, `u32::MAX` for none.
    first: Vec<u32>,
}

impl NodeLocs {
    fn of<P: ProbeView + ?Sized>(probes: &P, node: NodeId) -> Self {
        let locs: VecMap<LineLocation, ()> = probes
            .node_probes(node)
            .iter()
            .map(|p| (LineLocation::new(p.index, p.discriminator), ()))
            .collect();
        let ids = locs.keys().last().map_or(0, |l| l.line_offset as usize + 1);
        // Probe ids come from the binary: a table for ids far sparser than a function's probes
        // (a crafted index near u32::MAX) would be gigabytes; without one, `place` misses and
        // every lookup searches.
        let ids = if ids <= 4 * locs.len() + 64 { ids } else { 0 };
        let mut first = vec![u32::MAX; ids];
        for (i, l) in locs.keys().enumerate().rev() {
            if let Some(f) = first.get_mut(l.line_offset as usize) {
                *f = i as u32;
            }
        }
        NodeLocs { locs, first }
    }

    /// Where `loc` mostly is among the node's locations: the place of its probe id's first
    /// (most ids have one, at discriminator 0); past them all for an id the node lacks.
    fn place(&self, loc: LineLocation) -> usize {
        self.first.get(loc.line_offset as usize).map_or(usize::MAX, |&i| i as usize)
    }
}

/// What [`ProbeCsBuilder`] resolved in one calling context (cleared for the next).
struct ResolvedHere {
    /// The leaf contexts, by the leaf's function (for tail-call inference) and inline node: every
    /// probe of a function instance shares one, and resolving (inline chains, recursion
    /// compression) is the costly part. With the probes without descriptor each met.
    by_func: HashMap<(Option<FuncId>, NodeId), (Option<LeafProfile>, u64)>,
    /// The same when inference added no frame (so the function does not matter): by node
    /// index, `stamp << 32 | i` for the `i`th of `leaves`; other stamps are other contexts'.
    by_node: Vec<u64>,
    leaves: Vec<(Option<LeafProfile>, u64)>,
    /// This context's mark in `by_node`, never 0.
    stamp: u32,
    /// The frames of the call sites, by which sites (`None`: the context's own, `Some(i)`: the
    /// `i`th of [`InferredSites::by_func`]): a range of `frames`, `None` when a call probe on
    /// them has no descriptor. Every leaf under the same sites starts with these frames.
    callers: Vec<(Option<usize>, Option<std::ops::Range<usize>>)>,
    frames: Vec<Frame>,
}

impl ResolvedHere {
    fn new(nodes: usize) -> Self {
        ResolvedHere {
            by_func: HashMap::new(),
            by_node: vec![0; nodes],
            leaves: Vec::new(),
            stamp: 0,
            callers: Vec::new(),
            frames: Vec::new(),
        }
    }

    fn clear(&mut self) {
        self.by_func.clear();
        self.leaves.clear();
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.by_node.fill(0);
            self.stamp = 1;
        }
        self.callers.clear();
        self.frames.clear();
    }

    /// The leaf context resolved for `node`'s probes, when inference added no frame.
    fn of_node(&self, node: NodeId) -> Option<(Option<LeafProfile>, u64)> {
        let entry = self.by_node[node.0 as usize];
        ((entry >> 32) as u32 == self.stamp).then(|| self.leaves[entry as u32 as usize])
    }

    fn set_node(&mut self, node: NodeId, leaf: (Option<LeafProfile>, u64)) {
        self.by_node[node.0 as usize] = u64::from(self.stamp) << 32 | self.leaves.len() as u64;
        self.leaves.push(leaf);
    }
}

/// A probe's inline chain as context frames, root first, its own frame last (whose location
/// is the probe's id, set on use). `resets`: an unknown call site (id 0) above the probe cut
/// the chain, so the frames collected before it are dropped too. `checksum`: the CFG checksum
/// of the probe's function (its `.pseudo_probe_desc` entry, found once per node rather than by
/// a search over every descriptor per leaf resolved).
struct InlineContext {
    resets: bool,
    frames: Vec<Frame>,
    checksum: u64,
}

impl<P: ProbeView + ?Sized> ProbeCsBuilder<'_, P> {
    fn body_samples<C: CodeView + ?Sized>(
        &mut self,
        code: &C,
        sites: &[Vaddr],
        inferred: &InferredSites,
        leaves: &SampledLeaves,
    ) {
        // (profile slot, inline node) of the sampled function instances.
        let mut sampled_nodes = std::mem::take(&mut self.sampled_nodes);
        sampled_nodes.clear();
        // (profile slot, inline node, location, count) of the body samples, added at the end.
        let mut bodies = std::mem::take(&mut self.bodies);
        bodies.clear();
        // Added after the explicit zeros, in room they leave: added before, a call site grew
        // the caller's body, which the zeros then remade.
        let mut inlined_calls = std::mem::take(&mut self.inlined_calls);
        inlined_calls.clear();
        for &(probe, n) in &leaves.blocks {
            let Some(leaf) = self.leaf_probe_context(code, sites, inferred, &probe) else {
                continue;
            };
            let fs = self.profiles.at(leaf.slot);
            fs.checksum = Some(leaf.checksum);
            let loc = LineLocation::new(probe.index, probe.discriminator);
            bodies.push((leaf.slot, probe.node, loc, n));
            fs.add_total(n);
            if probe.index == 1 {
                fs.add_head(n);
                // An inlined callee's entry count is its inliner's call count at the call site.
                let inliner = self
                    .probes
                    .node_inline_site(probe.node)
                    .and_then(|(parent, _)| self.probes.func_desc(self.probes.node_guid(parent)));
                let key = &self.profiles.profiles[leaf.slot].0;
                if let (Some((_, inliner_hash)), true) = (inliner, key.len() >= 2 * FRAME_BYTES) {
                    let (callers, leaf_frame) = key.split_at(key.len() - FRAME_BYTES);
                    let callee = Frame::decode(leaf_frame).name;
                    // The caller's context: its call site becomes its leaf, at (0, 0).
                    let mut parent = std::mem::take(&mut self.key);
                    parent.clear();
                    parent.extend_from_slice(callers);
                    let caller = parent.len() - FRAME_BYTES;
                    let callsite = Frame::decode(&parent[caller..]).loc;
                    // The name's bytes stay; the location's become (0, 0).
                    parent[caller + 4..].fill(0);
                    let slot = self.key_slot(&parent, false);
                    self.key = parent;
                    let p = &mut self.profiles.profiles[slot].1;
                    p.checksum = Some(inliner_hash);
                    p.add_total(n);
                    inlined_calls.push((slot, callsite, callee, n));
                }
            }
            sampled_nodes.push((leaf.slot, probe.node));
        }
        // Unsampled probes of a sampled function instance get explicit zeros, so the compiler
        // can tell "not executed" from "optimized away". First, so that the body samples below
        // add in place (each of their locations is a probe of a node sampled in their profile).
        // With room for the slot's inlined calls' distinct call sites it lacks: they are not
        // among its node's probes (an inlined call leaves no call probe).
        sampled_nodes.sort_unstable();
        sampled_nodes.dedup();
        inlined_calls.sort_unstable_by_key(|&(slot, callsite, ..)| (slot, callsite));
        let mut calls = &inlined_calls[..];
        for &(slot, node) in &sampled_nodes {
            calls = &calls[calls.partition_point(|c| c.0 < slot)..];
            let here = &calls[..calls.partition_point(|c| c.0 == slot)];
            let fs = &mut self.profiles.profiles[slot].1;
            let lacks = |c: &&[(usize, LineLocation, u32, u64)]| fs.body.get(&c[0].1).is_none();
            let room = here.chunk_by(|a, b| a.1 == b.1).filter(lacks).count();
            let probes = self.probes;
            let locs = self.node_locs[node.0 as usize].get_or_init(|| NodeLocs::of(probes, node));
            fs.ensure_bodies(&locs.locs, room);
        }
        // Each location is in its profile now: found, not inserted (saturating sums do not
        // depend on the order of their terms). A profile's body is mostly its node's probes
        // alone: a location is mostly where it is among them.
        for &(slot, node, loc, n) in &bodies {
            let locs = self.node_locs[node.0 as usize].get().expect("made above");
            self.profiles.at(slot).add_body_near(locs.place(loc), loc, n);
        }
        for &(slot, callsite, callee, n) in &inlined_calls {
            // The name's text read in place: no copy of it per call counted.
            let callee = self.name_table[callee as usize].as_ref();
            let p = &mut self.profiles.profiles[slot].1;
            p.add_body(callsite, n);
            p.add_call_target(callsite, callee.expect("a name the builder met"), n);
        }
        self.inlined_calls = inlined_calls;
        self.bodies = bodies;
        self.sampled_nodes = sampled_nodes;
    }

    fn boundary_samples<C: CodeView + ?Sized>(
        &mut self,
        code: &C,
        sites: &[Vaddr],
        inferred: &InferredSites,
        leaves: &SampledLeaves,
    ) {
        for &(call, dst, n) in &leaves.calls {
            let Some(leaf) = self.leaf_probe_context(code, sites, inferred, &call) else {
                continue;
            };
            let fs = self.profiles.at(leaf.slot);
            fs.checksum = Some(leaf.checksum);
            fs.add_body(LineLocation::new(call.index, 0), n);
            fs.add_total(n);
            if let Some(callee) = code.entry_func_name(dst) {
                fs.add_call_target(
                    LineLocation::new(call.index, call.discriminator),
                    &FuncName::canonical(&callee),
                    n,
                );
            }
        }
    }

    /// `getContextNodeForLeafProbe`: call sites (with inferred tail-call frames) expanded through
    /// their call probes' inline contexts, then the leaf probe's inline context. It depends on
    /// the probe only through its inline node and (for inference) its function, so it is
    /// resolved once per calling context and such pair, with the slot of its profile.
    fn leaf_probe_context<C: CodeView + ?Sized>(
        &mut self,
        code: &C,
        sites: &[Vaddr],
        inferred: &InferredSites,
        leaf: &Probe,
    ) -> Option<LeafProfile> {
        // The leaf's function matters only to pick its inferred frames.
        let by_node = inferred.by_func.is_empty();
        let func = if by_node { None } else { code.func_range(leaf.addr).map(|r| r.func) };
        let known = if by_node {
            self.resolved.of_node(leaf.node)
        } else {
            self.resolved.by_func.get(&(func, leaf.node)).copied()
        };
        if let Some((leaf, without_desc)) = known {
            self.stats.probes_without_desc += without_desc;
            return leaf;
        }
        let which = inferred.by_func.iter().position(|(f, _)| *f == func);
        let sites = which.map_or(sites, |i| &inferred.by_func[i].1[..]);
        let before = self.stats.probes_without_desc;
        let resolved = self.resolve_leaf_probe_context(which, sites, leaf);
        let without_desc = self.stats.probes_without_desc - before;
        if by_node {
            self.resolved.set_node(leaf.node, (resolved, without_desc));
        } else {
            self.resolved.by_func.insert((func, leaf.node), (resolved, without_desc));
        }
        resolved
    }

    /// The context of `leaf` under `sites` (call sites, tail-call frames inferred; `which`
    /// sites of the context, as in [`ResolvedHere::callers`]).
    fn resolve_leaf_probe_context(
        &mut self,
        which: Option<usize>,
        sites: &[Vaddr],
        leaf: &Probe,
    ) -> Option<LeafProfile> {
        let (mut calls, mut frames) = std::mem::take(&mut self.buffers);
        calls.clear();
        frames.clear();
        let ctx = self.resolve_into(which, sites, leaf, &mut calls, &mut frames);
        self.buffers = (calls, frames);
        ctx
    }

    /// [`Self::resolve_leaf_probe_context`] with buffers for the call probes and the frames.
    fn resolve_into(
        &mut self,
        which: Option<usize>,
        sites: &[Vaddr],
        leaf: &Probe,
        calls: &mut Vec<Probe>,
        frames: &mut Vec<Frame>,
    ) -> Option<LeafProfile> {
        // The call sites' frames do not depend on the leaf: made once per sites. Exact: they
        // come from the call probes alone, and a failed expansion (a call probe without
        // descriptor) fails every leaf under them, counting one probe each, before the leaf's
        // own chain is looked at.
        match self.resolved.callers.iter().find(|(w, _)| *w == which) {
            Some((_, Some(range))) => {
                frames.extend_from_slice(&self.resolved.frames[range.clone()])
            }
            Some((_, None)) => {
                self.stats.probes_without_desc += 1;
                return None;
            }
            None => {
                let expanded = self.push_call_site_frames(sites, calls, frames);
                let here = &mut self.resolved;
                let start = here.frames.len();
                here.frames.extend_from_slice(frames);
                here.callers.push((which, expanded.map(|()| start..here.frames.len())));
                expanded?;
            }
        }
        let checksum = self.push_inline_context(leaf, frames)?;
        let mut leaf_frame = frames.pop()?;
        leaf_frame.loc = LineLocation::default();
        // Most contexts repeat no function, so no frame: seen marks tell in one pass.
        let (names, repeats) = (self.name_table.len(), &mut self.repeats);
        if repeats.any(frames, names) {
            self.opts.context.apply_bounded(frames, move |c| repeats.pairs(c, names));
        } else {
            self.opts.context.apply_to_distinct(frames);
        }
        frames.push(leaf_frame);
        let was_inlined = self.probes.node_inline_site(leaf.node).is_some();
        Some(LeafProfile { slot: self.context_slot(frames, was_inlined), checksum })
    }

    /// Pushes the frames of the call sites: each call probe's inline context, root first, from
    /// the leaf side up to the first call site without a call probe.
    fn push_call_site_frames(
        &mut self,
        sites: &[Vaddr],
        calls: &mut Vec<Probe>,
        frames: &mut Vec<Frame>,
    ) -> Option<()> {
        for &a in sites.iter().rev() {
            let Some(call) = self.probes.call_probe_at(a) else { break };
            calls.push(call);
        }
        for call in calls.iter().rev() {
            self.push_inline_context(call, frames)?;
        }
        Some(())
    }

    /// The slot of the profile of `frames` (a resolved context).
    fn context_slot(&mut self, frames: &[Frame], was_inlined: bool) -> usize {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        // Sized once and written in place: contexts are tens of frames, a push per field
        // checks the capacity each time.
        key.resize(frames.len() * FRAME_BYTES, 0);
        for (bytes, f) in key.chunks_exact_mut(FRAME_BYTES).zip(frames) {
            f.write(bytes);
        }
        let slot = self.key_slot(&key, was_inlined);
        self.key = key;
        slot
    }

    /// The slot of the profile of the context of `key`.
    fn key_slot(&mut self, key: &[u8], was_inlined: bool) -> usize {
        let names = &self.name_table;
        self.profiles.slot_with(key, was_inlined, || {
            let leaf = Frame::decode(&key[key.len() - FRAME_BYTES..]);
            let leaf = names[leaf.name as usize].as_ref().expect("a name the builder met");
            (key.into(), FunctionSamples::new(leaf))
        })
    }

    /// Appends the probe's inline chain, root first, ending with (probe's function, probe id).
    /// An unknown call site (id 0) above the leaf clears everything collected so far. Returns
    /// the checksum of the probe's function; `None` (counted) when a function on the chain has
    /// no `.pseudo_probe_desc`.
    fn push_inline_context(&mut self, probe: &Probe, out: &mut Vec<Frame>) -> Option<u64> {
        let node = probe.node.0 as usize;
        if self.inline_context_of[node] == 0 {
            let expanded = self.inline_context(probe.node);
            self.inline_contexts.push(expanded);
            self.inline_context_of[node] = self.inline_contexts.len() as u32;
        }
        let Some(ctx) = &self.inline_contexts[self.inline_context_of[node] as usize - 1] else {
            self.stats.probes_without_desc += 1;
            return None;
        };
        if ctx.resets {
            out.clear();
        }
        out.extend_from_slice(&ctx.frames);
        out.last_mut().expect("the probe's own frame").loc = LineLocation::new(probe.index, 0);
        Some(ctx.checksum)
    }

    /// The inline chain of a probe of `node` ([`InlineContext`]); `None` when a function on it
    /// has no `.pseudo_probe_desc` name.
    fn inline_context(&mut self, node: NodeId) -> Option<InlineContext> {
        let mut chain = Vec::new();
        let mut n = node;
        while let Some((parent, site)) = self.probes.node_inline_site(n) {
            chain.push((parent, site));
            n = parent;
        }
        chain.reverse();
        let mut resolved = Vec::with_capacity(chain.len() + 1);
        for (parent, site) in chain {
            resolved.push((self.name(self.probes.node_guid(parent)), site));
        }
        resolved.push((self.name(self.probes.node_guid(node)), 0));
        if resolved.iter().any(|(n, _)| n.is_none()) {
            return None;
        }
        // The node's name was found, so its descriptor is there.
        let (_, checksum) = self.probes.func_desc(self.probes.node_guid(node))?;
        let mut out =
            InlineContext { resets: false, frames: Vec::with_capacity(resolved.len()), checksum };
        let last = resolved.len() - 1;
        for (i, (func, id)) in resolved.into_iter().enumerate() {
            if id == 0 && i != last {
                out.resets = true;
                out.frames.clear();
                continue;
            }
            out.frames.push(Frame { name: func?, loc: LineLocation::new(id, 0) });
        }
        Some(out)
    }

    /// The `.pseudo_probe_desc` name of `guid`, as its index in [`SharedNames`] (shared by
    /// every run), looked up in the builder's index first.
    fn name(&mut self, guid: u64) -> Option<u32> {
        if let Some(&n) = self.names.get(&guid) {
            return n;
        }
        let probes = self.probes;
        let mut shared = self.shared_names.lock().unwrap_or_else(|e| e.into_inner());
        let id = shared.id(guid, || probes.func_desc(guid).map(|(n, _)| n));
        if let Some(id) = id {
            let i = id as usize;
            if self.name_table.len() <= i {
                self.name_table.resize(i + 1, None);
            }
            self.name_table[i] = Some(shared.names[i].clone());
        }
        drop(shared);
        self.names.insert(guid, id);
        id
    }
}

/// Function names shared by the runs of [`generate_probe_cs`]: an index per distinct text, so
/// that contexts built apart hash, compare and merge as integers.
#[derive(Default)]
struct NameIndex {
    by_guid: HashMap<u64, Option<u32>>,
    by_text: HashMap<FuncName, u32>,
    /// The names by index.
    names: Vec<FuncName>,
}

impl NameIndex {
    /// The index of `guid`'s name (`name` gives it, `None` without one).
    fn id<'n>(&mut self, guid: u64, name: impl FnOnce() -> Option<&'n str>) -> Option<u32> {
        if let Some(&id) = self.by_guid.get(&guid) {
            return id;
        }
        let id = name().map(|text| match self.by_text.get(text) {
            Some(&id) => id,
            None => {
                let name = FuncName::from(text);
                let id = self.names.len() as u32;
                self.names.push(name.clone());
                self.by_text.insert(name, id);
                id
            }
        });
        self.by_guid.insert(guid, id);
        id
    }
}

/// [`NameIndex`] as the runs share it.
type SharedNames = std::sync::Mutex<NameIndex>;

impl ContextProfiles<FrameKey> {
    /// The profile of the `shards` (distinct contexts) by [`Context`]s, updated
    /// ([`Self::update`]) and sorted on rayon's current pool. `names`: the frames' names by
    /// index. `spent` is freed while the map is built.
    fn finish(
        mut shards: Vec<Self>,
        names: &[FuncName],
        kind: ProfileKind,
        update_total_samples: bool,
        spent: impl Send,
    ) -> Profile {
        shards.par_iter_mut().for_each(|s| s.update(update_total_samples));
        // Names by text: frames with names replaced by their ranks order as the contexts do.
        let mut by_text: Vec<u32> = (0..names.len() as u32).collect();
        by_text.par_sort_unstable_by(|&a, &b| names[a as usize].cmp(&names[b as usize]));
        let mut rank = vec![0u32; names.len()];
        for (r, &id) in by_text.iter().enumerate() {
            rank[id as usize] = r as u32;
        }
        shards.par_iter_mut().flat_map(|s| s.profiles.par_iter_mut()).for_each(|(key, _)| {
            for frame in key.chunks_exact_mut(FRAME_BYTES) {
                let name = Frame::decode(frame).name;
                frame[..4].copy_from_slice(&rank[name as usize].to_be_bytes());
            }
        });
        // The shards' profiles sorted in place through references: they are moved once, into
        // the profile, rather than gathered into one vector first.
        let total: usize = shards.iter().map(|s| s.profiles.len()).sum();
        let mut profiles: Vec<&mut (FrameKey, FunctionSamples)> = Vec::with_capacity(total);
        profiles.extend(shards.iter_mut().flat_map(|s| s.profiles.iter_mut()));
        profiles.par_sort_unstable_by(|a, b| a.0.cmp(&b.0));
        // A context whose next one continues it (a caller's context, then its callee's at that
        // call site) is made as a prefix of the next one's frames: fewer frames to build, and
        // such neighbours then compare by length alone (the BTreeMap below checks each pair).
        // Exact: the prefix has the same frames and a leaf location of (0, 0), as its key says.
        let n = profiles.len();
        let continued = |i: usize| i + 1 < n && continues(&profiles[i].0, &profiles[i + 1].0);
        let chain_end: Vec<bool> = (0..n).into_par_iter().map(|i| !continued(i)).collect();
        let mut end = vec![0; n];
        for i in (0..n).rev() {
            end[i] = if chain_end[i] { i } else { end[i + 1] };
        }
        let built: Vec<Option<Context>> = profiles
            .par_iter()
            .zip(&chain_end)
            .map(|((key, _), &last)| {
                let frames = key.chunks_exact(FRAME_BYTES).map(|bytes| {
                    let f = Frame::decode(bytes);
                    ContextFrame {
                        func: names[by_text[f.name as usize] as usize].clone(),
                        loc: f.loc,
                    }
                });
                last.then(|| Context::from_frames(frames))
            })
            .collect();
        let profiles: Vec<(Context, FunctionSamples)> = profiles
            .into_par_iter()
            .zip(end)
            .map(|((key, fs), end)| {
                let longest = built[end].as_ref().expect("a context ending its chain is built");
                // The key is freed here, as the profile is made.
                let frames = std::mem::take(key).len() / FRAME_BYTES;
                (longest.prefix(frames), std::mem::take(fs))
            })
            .collect();
        // Contexts are distinct: the BTreeMap then only checks the order. That is sequential:
        // the other core frees what the build is done with meanwhile.
        let (functions, ()) = rayon::join(
            || profiles.into_iter().collect(),
            || {
                drop((built, spent));
                shards.into_par_iter().for_each(drop);
            },
        );
        Profile { kind, functions, symbol_list: None }
    }
}

/// Whether the context of `key` is that of a caller in the context of `next`: the same frames up
/// to its leaf's function, its leaf at (0, 0) where `next` has the call site.
fn continues(key: &[u8], next: &[u8]) -> bool {
    let named = key.len().saturating_sub(8);
    key.len() < next.len() && key[..named] == next[..named] && key[named..].iter().all(|&b| b == 0)
}

/// Recovers call frames lost to tail calls (llvm-profgen's `MissingFrameInferrer`, reference
/// §5.5): between a call site and the next frame, if the callee is reachable from the call's
/// sampled targets through exactly one chain of sampled tail calls, that chain's jump sites are
/// inserted as frames.
pub struct MissingFrameInferrer {
    call_edges: BTreeMap<Vaddr, BTreeSet<FuncId>>,
    tail_call_edges: BTreeMap<Vaddr, BTreeSet<FuncId>>,
    tail_call_targets: BTreeSet<FuncId>,
    tail_calls_by_func: BTreeMap<FuncId, Vec<Vaddr>>,
    /// The call sites one of whose sampled callees has tail calls: a query from another one
    /// infers nothing (each callee's search ends at once, caching nothing).
    inferring_sites: hashbrown::HashSet<Vaddr>,
    max_depth: u32,
    depth: u32,
    visiting: BTreeSet<FuncId>,
    unique_paths: BTreeMap<(FuncId, FuncId), Vec<Vaddr>>,
    non_unique_paths: BTreeMap<(FuncId, FuncId), u64>,
    /// The sites inferred between each (call site, next frame's address) queried: a query's
    /// result is fixed by its first run (a repeated one finds the searches it made cached, and
    /// changes no cache), and contexts repeat their callers' pairs.
    between: HashMap<(Vaddr, Vaddr), Vec<Vaddr>>,
}

/// A sampled branch as [`MissingFrameInferrer::new`] keeps it: a call with its target's
/// function, or a tail call with the functions of its source and target.
#[derive(Clone, Copy)]
enum Edge {
    Call(Option<FuncId>),
    TailCall(FuncId, Option<FuncId>),
}

impl MissingFrameInferrer {
    /// Call and tail-call edges come from the sampled branches of all contexts: a call
    /// instruction's sampled targets, and for jumps leaving their function range (direct jumps to
    /// another function, indirect jumps) the sampled targets in other ranges. Each distinct branch
    /// is classified once (contexts repeat them), on rayon's current pool.
    pub fn new<C: CodeView + Sync + ?Sized>(
        code: &C,
        counters: &ContextCounters,
        max_depth: u32,
    ) -> Self {
        // The distinct branches, sorted: contexts repeat most of each other's (SQLite CS: 97K
        // branches, 12K distinct), so they are gathered into a set and only the distinct ones
        // sorted (sorting all of them was most of this function's time).
        let mut distinct: hashbrown::HashSet<(Vaddr, Vaddr)> = hashbrown::HashSet::new();
        for c in counters.by_context.values() {
            distinct.extend(c.branches.keys().copied());
        }
        let mut branches: Vec<(Vaddr, Vaddr)> = distinct.into_iter().collect();
        branches.par_sort_unstable();
        let edges: Vec<(Vaddr, Edge)> = branches
            .par_iter()
            .filter_map(|&(from, to)| {
                let from_range = code.func_range(from)?;
                let to_range = code.func_range(to);
                let to_func = to_range.map(|t| t.func);
                let edge = match code.inst_kind(from) {
                    Some(InstKind::Call) => Edge::Call(to_func),
                    Some(InstKind::DirectJump)
                        if to_range.is_some_and(|t| t.func != from_range.func) =>
                    {
                        Edge::TailCall(from_range.func, to_func)
                    }
                    Some(InstKind::IndirectJump)
                        if to_range.map(|t| t.start) != Some(from_range.start) =>
                    {
                        Edge::TailCall(from_range.func, to_func)
                    }
                    _ => return None,
                };
                Some((from, edge))
            })
            .collect();
        let mut inf = MissingFrameInferrer {
            call_edges: BTreeMap::new(),
            tail_call_edges: BTreeMap::new(),
            tail_call_targets: BTreeSet::new(),
            tail_calls_by_func: BTreeMap::new(),
            inferring_sites: hashbrown::HashSet::new(),
            max_depth,
            depth: 0,
            visiting: BTreeSet::new(),
            unique_paths: BTreeMap::new(),
            non_unique_paths: BTreeMap::new(),
            between: HashMap::new(),
        };
        // By source, ascending: each tail-call site is listed once under its function, in
        // address order. A source's instruction kind decides its edges' kind.
        let mut last_tail_call = None;
        for (from, edge) in edges {
            match edge {
                Edge::Call(to) => {
                    if let Some(f) = to {
                        inf.call_edges.entry(from).or_default().insert(f);
                    }
                }
                Edge::TailCall(from_func, to) => {
                    if let Some(f) = to {
                        inf.tail_call_edges.entry(from).or_default().insert(f);
                        inf.tail_call_targets.insert(f);
                    }
                    if last_tail_call != Some(from) {
                        inf.tail_calls_by_func.entry(from_func).or_default().push(from);
                        last_tail_call = Some(from);
                    }
                }
            }
        }
        let has_tail_calls = |f: &FuncId| inf.tail_calls_by_func.contains_key(f);
        inf.inferring_sites = (inf.call_edges.iter())
            .filter(|(_, callees)| callees.iter().any(has_tail_calls))
            .map(|(&site, _)| site)
            .collect();
        inf
    }

    /// Whether a query from call site `from` may infer a frame (see [`Self::may_infer`]).
    fn may_infer_from(&self, from: Vaddr) -> bool {
        self.inferring_sites.contains(&from)
    }

    /// Whether the query from call site `from` to a frame in function `to` may infer a frame,
    /// whatever was queried before: when not, it infers none and changes no cache.
    fn may_infer(&self, from: Vaddr, to: Option<FuncId>) -> bool {
        to.is_some_and(|to| self.callees_to_search(from, to).is_some())
    }

    /// The sampled callees of `from` to search for a chain of tail calls to `to`; `None` when
    /// there is nothing to search.
    fn callees_to_search(&self, from: Vaddr, to: FuncId) -> Option<&BTreeSet<FuncId>> {
        let callees = self.call_edges.get(&from)?;
        // A direct call of the next frame's function needs no inference.
        (!callees.contains(&to) && self.tail_call_targets.contains(&to)).then_some(callees)
    }

    /// `context` = call sites root first, then the leaf address; returns it with inferred
    /// tail-call sites inserted.
    pub fn infer<C: CodeView + ?Sized>(&mut self, code: &C, context: &[Vaddr]) -> Vec<Vaddr> {
        if context.len() <= 1 {
            return context.to_vec();
        }
        let mut out = Vec::with_capacity(context.len());
        for w in context.windows(2) {
            self.infer_between(code, w[0], w[1], &mut out);
        }
        out.extend(context.last());
        out
    }

    /// Pushes `from` onto `path`, then the tail-call sites inferred between it and `to`.
    fn infer_between<C: CodeView + ?Sized>(
        &mut self,
        code: &C,
        from: Vaddr,
        to: Vaddr,
        path: &mut Vec<Vaddr>,
    ) {
        path.push(from);
        let pos = path.len();
        if let Some(sites) = self.between.get(&(from, to)) {
            path.extend_from_slice(sites);
            return;
        }
        self.search_between(code, from, to, path);
        self.between.insert((from, to), path[pos..].to_vec());
    }

    /// [`Self::infer_between`]'s search, `from` pushed.
    fn search_between<C: CodeView + ?Sized>(
        &mut self,
        code: &C,
        from: Vaddr,
        to: Vaddr,
        path: &mut Vec<Vaddr>,
    ) {
        let pos = path.len();
        let Some(to_func) = code.func_range(to).map(|r| r.func) else { return };
        let Some(callees) = self.callees_to_search(from, to_func) else { return };
        let callees = callees.clone();
        self.visiting.clear();
        self.depth = 0;
        let mut paths = 0;
        for callee in callees {
            paths += self.unique_path_from_func(callee, to_func, path);
            if paths > 1 {
                break;
            }
        }
        if paths != 1 {
            path.truncate(pos);
        }
    }

    fn unique_path_from_func(&mut self, from: FuncId, to: FuncId, path: &mut Vec<Vaddr>) -> u64 {
        if from == to {
            return 1;
        }
        // A cycle; checked before the cache because cached results may include this path.
        if self.visiting.contains(&from) {
            return 0;
        }
        if let Some(p) = self.unique_paths.get(&(from, to)) {
            path.extend_from_slice(p);
            return 1;
        }
        if let Some(&n) = self.non_unique_paths.get(&(from, to)) {
            return n;
        }
        let pos = path.len();
        if self.depth == self.max_depth {
            return 0;
        }
        let Some(sites) = self.tail_calls_by_func.get(&from).cloned() else { return 0 };
        self.depth += 1;
        self.visiting.insert(from);
        let mut paths = 0;
        for site in sites {
            paths += self.unique_path_from_site(site, to, path);
            if paths > 1 {
                break;
            }
        }
        self.depth -= 1;
        self.visiting.remove(&from);
        if paths == 1 {
            self.unique_paths.insert((from, to), path[pos..].to_vec());
        } else {
            path.truncate(pos);
            self.non_unique_paths.insert((from, to), paths);
        }
        paths
    }

    fn unique_path_from_site(&mut self, site: Vaddr, to: FuncId, path: &mut Vec<Vaddr>) -> u64 {
        let Some(targets) = self.tail_call_edges.get(&site).cloned() else { return 0 };
        path.push(site);
        let mut paths = 0;
        for t in targets {
            paths += self.unique_path_from_func(t, to, path);
            if paths > 1 {
                break;
            }
        }
        if paths != 1 {
            path.pop();
        }
        paths
    }
}

#[cfg(test)]
mod tests;
