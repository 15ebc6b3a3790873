//! Post-passes: reshape a freshly built [`Profile`] the way llvm-profgen 19 does before writing.
//!
//! In: the [`Profile`] from [`crate::profile`] (flat CS contexts, or nested non-CS profiles) with
//! the counters and binary it was built from, the [`PostPassOptions`] and the summary options.
//! [`prepare`] reads the fresh profile: the summary [`Thresholds`] and, for the pre-inliner's
//! context costs, a [`ContextSizeOracle`]: the profile stage's
//! [`ContextSizeTracker`](crate::profile::context_size::ContextSizeTracker), filled from the
//! binary's code under each inline context, or
//! [`NoContextSizes`](crate::profile::context_size::NoContextSizes) when sizes come from the
//! profile. Out: the same profile, reshaped in place by [`apply`], and [`PostPassStats`] of what
//! changed. The two are apart so that a caller can read the fresh profile beside the first and do
//! other work beside the second.
//!
//! CS order (`CSProfileGenerator::postProcessProfiles`): pre-inliner → cold-context trim/merge →
//! CS-to-nested conversion → drop `__cxx_global_var_init*` / `__tls_init*`. Non-CS order
//! (`ProfileGenerator::postProcessProfiles`): cold trim → drop the same names.

mod anchors;
mod fixups;
mod nest;
mod preinliner;
mod trie;
mod trim;

pub use anchors::{DirectCalls, add_zero_count_anchors, anchored_functions};
pub use fixups::filter_ambiguous_profiles;
use nest::convert_cs_to_nested;
pub use preinliner::PreInlinerStats;
use preinliner::{Plan, run_preinliner};
pub use trie::context_less_profile;
use trie::{ContextTrie, context_less_merge};
pub use trim::{trim_and_merge_cold_contexts, trim_cold_profiles};

use std::collections::{BTreeMap, BTreeSet};

use crate::aggregate::ContextCounters;
use crate::binary::{Binary, FuncId, FuncSource};
use crate::error::Error;
use crate::llvm::canonical_fn_name;
use crate::profile::context_size::{self, ContextSizeOracle, NoContextSizes};
use crate::profile::summary::{DEFAULT_CUTOFFS, ProfileSummary, SummaryOptions};
use crate::profile::{Context, FunctionSamples, Profile};

/// The options of llvm-profgen 19 that the post-passes read (same names, same defaults). An
/// `Option` is `None` when the option was not given: several llvm-profgen defaults depend on
/// `getNumOccurrences()` (the pre-inliner's own thresholds, cold-context merging being forced off
/// when the pre-inliner runs).
#[derive(Clone, Debug)]
pub struct PostPassOptions {
    /// `--csspgo-preinliner` (default true).
    pub preinliner: bool,
    /// `--use-context-cost-for-preinliner` (default true): sizes from the [`ContextSizeOracle`]
    /// instead of the number of body samples.
    pub use_context_cost: bool,
    /// `--csspgo-replay-preinline` (default false).
    pub replay_preinline: bool,
    /// `--csspgo-preinliner-multiplier-for-previous-inlining` (default 100).
    pub multiplier_for_previous_inlining: i32,
    /// `--sample-profile-hot-inline-threshold` (3000; the pre-inliner uses 1500 unless given).
    pub hot_inline_threshold: Option<u32>,
    /// `--sample-profile-cold-inline-threshold` (45; the pre-inliner uses 0 unless given).
    pub cold_inline_threshold: Option<u32>,
    /// `--sample-profile-inline-growth-limit` (default 12).
    pub inline_growth_limit: u32,
    /// `--sample-profile-inline-limit-min` (default 100).
    pub inline_limit_min: u32,
    /// `--sample-profile-inline-limit-max` (10000; the pre-inliner uses 50000 unless given).
    pub inline_limit_max: Option<u32>,
    /// `--sort-profiled-scc-member` (default true).
    pub sort_profiled_scc_member: bool,
    /// `--trim-cold-profile` (default false).
    pub trim_cold_profile: bool,
    /// `--csprof-merge-cold-context` (true, but off after the pre-inliner unless given).
    pub merge_cold_context: Option<bool>,
    /// `--csprof-max-cold-context-depth` (default 1).
    pub max_cold_context_depth: u32,
    /// `--gen-cs-nested-profile` (default true).
    pub gen_cs_nested_profile: bool,
    /// `--generate-merged-base-profiles` (default false).
    pub generate_merged_base_profiles: bool,
    /// `--update-total-samples` (default false).
    pub update_total_samples: bool,
    /// `--mark-all-context-preinlined` (default false): every context profile is marked
    /// ShouldBeInlined and the profile pre-inlined, after the other post-passes.
    pub mark_all_context_preinlined: bool,
}

impl Default for PostPassOptions {
    fn default() -> Self {
        PostPassOptions {
            preinliner: true,
            use_context_cost: true,
            replay_preinline: false,
            multiplier_for_previous_inlining: 100,
            hot_inline_threshold: None,
            cold_inline_threshold: None,
            inline_growth_limit: 12,
            inline_limit_min: 100,
            inline_limit_max: None,
            sort_profiled_scc_member: true,
            trim_cold_profile: false,
            merge_cold_context: None,
            max_cold_context_depth: 1,
            gen_cs_nested_profile: true,
            generate_merged_base_profiles: false,
            update_total_samples: false,
            mark_all_context_preinlined: false,
        }
    }
}

/// Numbers from the profile summary (`ProfileSummaryBuilder`, §6.8), computed by the caller.
///
/// For CS profiles the summary must be computed on [`context_less_profile`] of the flat profile
/// before any post-pass (`SampleContextTracker::createContextLessProfileMap`: every context
/// profile merged into one profile per leaf function name, then summarised as a non-CS profile).
/// For non-CS profiles it is the summary of the profile itself. `--profile-summary-hot-count` /
/// `--profile-summary-cold-count` replace `hot` / `cold` when given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Thresholds {
    /// MinCount of the first detailed-summary entry with cutoff ≥ 990000 (`getHotCountThreshold`).
    pub hot: u64,
    /// MinCount of the first entry with cutoff ≥ 999999 (`getColdCountThreshold`).
    pub cold: u64,
    /// MinCount of the first entry with cutoff ≥ 100000 (the pre-inliner's normalisation bound).
    pub p10_min_count: u64,
}

/// What the post-passes did, for logging and tests.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PostPassStats {
    pub preinliner: Option<PreInlinerStats>,
    /// Contexts removed or merged away by cold trimming/merging.
    pub cold_profiles_removed: usize,
    pub nested: bool,
    /// Top-level and nested profiles dropped by the `__cxx_global_var_init` / `__tls_init` filter.
    pub ambiguous_profiles_removed: usize,
}

/// What the post-passes read from a fresh profile, its counters and its binary ([`prepare`]),
/// for [`apply`] to reshape that profile with: it is for this profile only, unchanged since
/// (the pre-inliner's trie holds its contexts, its call graph follows its counts).
pub struct Prepared {
    context_sensitive: bool,
    thresholds: Thresholds,
    /// The pre-inliner's context sizes from the binary, when it uses them.
    sizes: Option<context_size::ContextSizeTracker>,
    /// The pre-inliner's trie and call graph, when it runs (the trie built for the context-less
    /// merge).
    plan: Option<Plan>,
}

/// What the post-passes read of the counters, taken by [`sampled`]: the counters can be dropped
/// (and their memory reused by the post-passes) once it is.
pub struct Sampled {
    context_sensitive: bool,
    /// The profiled functions, when the pre-inliner's context costs use them.
    profiled: Option<Vec<FuncId>>,
}

/// What the post-passes as `opts` say read of `counters` of `binary` (see [`prepare`]). Needs
/// only the counters: it can run while the profile is built from them.
pub fn sampled(binary: &Binary, counters: &ContextCounters, opts: &PostPassOptions) -> Sampled {
    let context_sensitive = counters.context_sensitive;
    // The pre-inliner's context costs need every instruction of the profiled functions
    // symbolized; only pay for it when they are used.
    let context_cost = context_sensitive && opts.preinliner && opts.use_context_cost;
    let profiled = context_cost.then(|| context_size::profiled_functions(binary, counters));
    Sampled { context_sensitive, profiled }
}

/// The inputs of the post-passes of `profile`, built from it and what they read of its counters
/// of `binary` ([`sampled`]): thresholds from the profile summary (of the context-less merge for
/// CS profiles) and the pre-inliner's context sizes from the binary when it uses them; with
/// `anchored`, also [`anchored_functions`] of `profile` (its contexts' functions taken from the
/// trie built here). Only reads the profile, so other readers of the fresh profile may run
/// beside it.
pub fn prepare(
    binary: &Binary,
    sampled: Sampled,
    profile: &Profile,
    opts: &PostPassOptions,
    summary: &SummaryOptions,
    anchored: bool,
) -> Result<(Prepared, Option<BTreeSet<String>>), Error> {
    let Sampled { context_sensitive, profiled } = sampled;
    if !context_sensitive {
        let (thresholds, anchored) = rayon::join(
            || thresholds(binary, profile, summary),
            || anchored.then(|| anchored_functions(profile, None)),
        );
        let prepared =
            Prepared { context_sensitive, thresholds: thresholds?, sizes: None, plan: None };
        return Ok((prepared, anchored));
    }
    // Independent, each partly sequential: side by side. The trie is the pre-inliner's
    // too: built here, beside the context sizes, rather than on the pre-inliner's one thread.
    let (read, sizes) = rayon::join(
        || {
            let trie = ContextTrie::of_contexts(&profile.functions);
            let profiles = trie.profiles_of(profile);
            // The pre-inliner's call graph and the anchored functions (of the trie's names and
            // the profiles) read the profiles once more: beside the merge, whose sequential end
            // (the summary) leaves a core idle.
            let (thresholds, (graph, anchored)) = rayon::join(
                || {
                    let merged = context_less_merge(profile, &trie, &profiles);
                    thresholds(binary, &merged, summary)
                },
                || {
                    let graph =
                        opts.preinliner.then(|| preinliner::call_graph(&trie, |s| profiles[s]));
                    (graph, anchored.then(|| anchored_functions(profile, Some(trie.names()))))
                },
            );
            let thresholds = thresholds?;
            let plan = graph.map(|graph| Plan { trie, graph });
            Ok::<_, Error>((thresholds, plan, anchored))
        },
        || profiled.map(|profiled| context_size::context_sizes(binary, &profiled)),
    );
    let (thresholds, plan, anchored) = read?;
    Ok((Prepared { context_sensitive, thresholds, sizes, plan }, anchored))
}

/// What the post-passes are done with but have not freed: the pre-inliner's trie, which holds
/// every context the pre-inliner merged away (~25 ms to free on a large CS profile), and its
/// context sizes (~1M instructions to free on SQLite, on the passes' one busy thread). Dropping
/// it frees them; [`apply`] leaves that to its caller, which can do it where nobody waits for it.
pub struct Spent {
    _trie: Option<ContextTrie>,
    _sizes: Option<context_size::ContextSizeTracker>,
}

/// The post-passes: [`post_process_cs`] or [`post_process_non_cs`] with what [`prepare`] read
/// from `profile`. Also hands back what they no longer need ([`Spent`]), unfreed.
pub fn apply(
    profile: &mut Profile,
    prepared: Prepared,
    opts: &PostPassOptions,
) -> (PostPassStats, Spent) {
    let (stats, spent, ()) = apply_beside(profile, prepared, opts, || ());
    (stats, spent)
}

/// [`apply`], running `beside` on another worker where the passes leave one idle: beside the
/// pre-inliner's walk (one thread) when it runs, else beside all of them. Returns its result
/// too.
pub fn apply_beside<R: Send>(
    profile: &mut Profile,
    prepared: Prepared,
    opts: &PostPassOptions,
    beside: impl FnOnce() -> R + Send,
) -> (PostPassStats, Spent, R) {
    let Prepared { context_sensitive, thresholds, sizes, plan } = prepared;
    let oracle: &dyn ContextSizeOracle = match &sizes {
        Some(sizes) => sizes,
        None => &NoContextSizes,
    };
    let ((stats, trie), beside) = match (context_sensitive, opts.preinliner) {
        (true, true) => {
            let (stats, trie, beside) =
                post_process_cs_with(profile, opts, &thresholds, oracle, plan, beside);
            ((stats, trie), beside.expect("run beside the pre-inliner"))
        }
        (true, false) => rayon::join(
            || {
                let (stats, trie, _) =
                    post_process_cs_with(profile, opts, &thresholds, oracle, plan, || ());
                (stats, trie)
            },
            beside,
        ),
        (false, _) => {
            rayon::join(|| (post_process_non_cs(profile, opts, &thresholds), None), beside)
        }
    };
    (stats, Spent { _trie: trie, _sizes: sizes }, beside)
}

/// Hot and cold count thresholds from the profile summary (`computeSummaryAndThreshold`) of a
/// non-CS (or context-less) profile.
///
/// Profiles of functions only the symbol table knows (e.g. `_start`) are left out: llvm-profgen
/// cannot see them, and their counts would move the thresholds and with them the pre-inlining
/// and trimming of every other function.
fn thresholds(
    binary: &Binary,
    profile: &Profile,
    opts: &SummaryOptions,
) -> Result<Thresholds, Error> {
    let mut symbol_only: hashbrown::HashSet<&str> = binary
        .functions()
        .iter()
        .filter(|f| f.source == FuncSource::Symbol)
        .map(|f| canonical_fn_name(&f.name))
        .collect();
    for f in binary.functions().iter().filter(|f| f.source == FuncSource::Dwarf) {
        symbol_only.remove(canonical_fn_name(&f.name));
    }
    let summary = ProfileSummary::from_top_level(
        profile.functions.values().filter(|fs| !symbol_only.contains(fs.name.as_str())),
        &DEFAULT_CUTOFFS,
    );
    Ok(Thresholds {
        hot: summary.hot_count_threshold(opts)?,
        cold: summary.cold_count_threshold(opts)?,
        p10_min_count: summary.p10_min_count(),
    })
}

/// `CSProfileGenerator::postProcessProfiles` minus the summary (input) and density report.
pub fn post_process_cs(
    profile: &mut Profile,
    opts: &PostPassOptions,
    thresholds: &Thresholds,
    sizes: &dyn ContextSizeOracle,
) -> PostPassStats {
    post_process_cs_with(profile, opts, thresholds, sizes, None, || ()).0
}

/// [`post_process_cs`], the pre-inliner's plan made from the profile when not given; also
/// returns the pre-inliner's spent trie, unfreed, and what `beside` returned when the
/// pre-inliner ran it beside its walk (it runs only then).
fn post_process_cs_with<R: Send>(
    profile: &mut Profile,
    opts: &PostPassOptions,
    thresholds: &Thresholds,
    sizes: &dyn ContextSizeOracle,
    plan: Option<Plan>,
    beside: impl FnOnce() -> R + Send,
) -> (PostPassStats, Option<ContextTrie>, Option<R>) {
    let mut stats = PostPassStats::default();
    let mut merge_cold = opts.merge_cold_context.unwrap_or(true);
    let mut spent_trie = None;
    let mut beside_result = None;
    // The pre-inliner's kept contexts, in context order: nesting takes them as they are, so the
    // profile's map is built from them only for a pass that reads it.
    let mut kept = None;
    if opts.preinliner {
        let (preinlined, trie, contexts, r) =
            run_preinliner(profile, opts, thresholds, sizes, plan, beside);
        stats.preinliner = Some(preinlined);
        spent_trie = Some(trie);
        beside_result = Some(r);
        kept = Some(contexts);
        merge_cold = opts.merge_cold_context.unwrap_or(false);
    }
    if opts.trim_cold_profile || merge_cold {
        put_back(profile, kept.take());
        stats.cold_profiles_removed = trim_and_merge_cold_contexts(
            profile,
            thresholds.hot,
            opts.trim_cold_profile,
            merge_cold,
            opts.max_cold_context_depth,
            opts.preinliner,
        );
    }
    if opts.mark_all_context_preinlined {
        // Upstream llvm-profgen's `--mark-all-context-preinlined`: every context is kept
        // inlined by nesting and by the compiler, replaying the binary's inlining in full.
        let kept_profiles = kept.iter_mut().flatten().map(|(_, fs)| fs);
        for fs in profile.functions.values_mut().chain(kept_profiles) {
            fs.attributes |= crate::profile::attr::SHOULD_BE_INLINED;
        }
        profile.kind.preinlined = true;
    }
    if opts.gen_cs_nested_profile {
        let contexts = kept
            .take()
            .unwrap_or_else(|| std::mem::take(&mut profile.functions).into_iter().collect());
        let merged_base = opts.generate_merged_base_profiles;
        convert_cs_to_nested(profile, contexts, merged_base, spent_trie.as_ref());
        stats.nested = true;
    }
    put_back(profile, kept);
    stats.ambiguous_profiles_removed = filter_ambiguous_profiles(profile);
    (stats, spent_trie, beside_result)
}

/// The pre-inliner's kept contexts (in context order) back into the profile it took them from.
fn put_back(profile: &mut Profile, kept: Option<Vec<(Context, FunctionSamples)>>) {
    if let Some(kept) = kept {
        // Sorted already, so the map checks the order in one pass and builds its nodes in
        // another (it would sort them were they not).
        let mut kept: BTreeMap<Context, FunctionSamples> = kept.into_iter().collect();
        profile.functions.append(&mut kept);
    }
}

/// `ProfileGenerator::postProcessProfiles` minus the summary (input) and density report.
pub fn post_process_non_cs(
    profile: &mut Profile,
    opts: &PostPassOptions,
    thresholds: &Thresholds,
) -> PostPassStats {
    let mut stats = PostPassStats::default();
    if opts.trim_cold_profile {
        stats.cold_profiles_removed = trim_cold_profiles(profile, thresholds.cold);
    }
    stats.ambiguous_profiles_removed = filter_ambiguous_profiles(profile);
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llvm::{ContextFrame, LineLocation};

    fn cs_profile() -> Profile {
        let mut profile = Profile::default();
        profile.kind.context_sensitive = true;
        let mut main = FunctionSamples::new("main");
        main.total_samples = 10;
        main.add_body(LineLocation::new(1, 0), 10);
        profile.functions.insert(Context::base("main"), main);
        let mut foo = FunctionSamples::new("foo");
        foo.total_samples = 1;
        foo.add_body(LineLocation::new(1, 0), 1);
        let ctx = Context::new(vec![
            ContextFrame { func: "main".into(), loc: LineLocation::new(1, 0) },
            ContextFrame { func: "foo".into(), loc: LineLocation::default() },
        ]);
        profile.functions.insert(ctx, foo);
        profile.functions.insert(Context::new(Vec::new()), FunctionSamples::new(""));
        profile
    }

    /// An empty context (never produced by the builders) is dropped instead of swallowing the
    /// top-level profiles; a cold-context depth of 0 keeps the leaf frame.
    #[test]
    fn degenerate_contexts_and_depths_do_not_break_the_passes() {
        let thresholds = Thresholds { hot: 5, cold: 1, p10_min_count: 10 };
        for preinliner in [false, true] {
            let mut profile = cs_profile();
            let opts = PostPassOptions {
                preinliner,
                use_context_cost: false,
                merge_cold_context: Some(true),
                max_cold_context_depth: 0,
                ..Default::default()
            };
            post_process_cs(&mut profile, &opts, &thresholds, &NoContextSizes);
            let names: Vec<(&str, u64)> =
                profile.functions.values().map(|f| (f.name.as_str(), f.total_samples)).collect();
            assert_eq!(names, [("foo", 1), ("main", 10)], "preinliner {preinliner}");
            assert!(!profile.kind.context_sensitive);
        }
    }
}
