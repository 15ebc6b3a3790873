//! Profile stage: the LLVM sample profile data model and the builders that fill it from the
//! aggregated counters and the binary model.
//!
//! In: [`crate::aggregate`] counters + [`crate::binary::Binary`]. Out: a [`Profile`], which the
//! post-passes reshape and the writers encode. [`generate`] picks the builder: [`line`] or
//! [`probe`] for context-less counters (then [`update`]), [`cs`] for counters per context.

pub mod builder;
pub mod context_size;
pub mod cs;
pub mod ip_blocks;
pub mod line;
pub mod model;
pub mod probe;
pub mod ranges;
pub mod summary;
pub mod update;

pub use model::*;

use crate::aggregate::{ContextCounters, ContextKey};
use crate::binary::Binary;
use std::borrow::Cow;

/// Options of profile generation, for every kind of profile.
#[derive(Clone, Copy, Debug, Default)]
pub struct ProfileOptions {
    /// Context-less profiles (`fill_zero_for_all_funcs` also applies to probe-based ones).
    pub line: line::LineOptions,
    /// `--update-total-samples` for context-less profiles ([`update::update_function_samples`]).
    pub update_total_samples: bool,
    /// Context-sensitive profiles.
    pub cs: cs::CsOptions,
    /// `--llvm-compatible`: build profiles exactly as llvm-profgen-19 does (as
    /// [`crate::aggregate::samples::SampleOptions::llvm_compatible`] for counting).
    pub llvm_compatible: bool,
}

/// The profile of `counters`, before the post-passes. Warnings are added to `warnings`.
pub fn generate(
    binary: &Binary,
    counters: &ContextCounters,
    opts: &ProfileOptions,
    warnings: &mut Vec<String>,
) -> Profile {
    generate_beside(binary, Cow::Borrowed(counters), opts, warnings, |_| ()).0
}

/// [`generate`], and `beside`'s result: `beside` reads the counters while the profile is built
/// (a probe CS profile: once its contexts are, see [`cs::generate_probe_cs_beside`]). Owned
/// counters are freed once the profile no longer reads them.
pub fn generate_beside<R: Send>(
    binary: &Binary,
    counters: Cow<'_, ContextCounters>,
    opts: &ProfileOptions,
    warnings: &mut Vec<String>,
    beside: impl FnOnce(&ContextCounters) -> R + Send,
) -> (Profile, R) {
    // A probe CS build frees owned counters itself, once it has read them.
    if let Some(probes) = binary.probes().filter(|_| counters.context_sensitive) {
        let (profile, stats, r) =
            cs::generate_probe_cs_beside(binary, probes, counters, &opts.cs, beside);
        if stats.probes_without_desc > 0 {
            warnings.push(format!(
                "{} probes skipped: a function on their inline chain has no .pseudo_probe_desc entry",
                stats.probes_without_desc
            ));
        }
        return (profile, r);
    }
    let generated = if counters.context_sensitive {
        rayon::join(|| cs::generate_line_cs(binary, &counters, &opts.cs), || beside(&counters))
    } else {
        let empty = Default::default();
        let mut c = counters.by_context.get(&ContextKey::None).unwrap_or(&empty);
        let mut line = opts.line;
        let blocks;
        if line.leading_ip_only && !opts.llvm_compatible {
            blocks = ip_blocks::block_counters(binary, c);
            c = &blocks;
            // IP samples count for their block ([`ip_blocks`]); lines then keep their hottest
            // block's count, as from LBR ranges.
            line.leading_ip_only = false;
        }
        let mut profile = match binary.probes() {
            Some(probes) => probe::build(binary, probes, c, line.fill_zero_for_all_funcs),
            None => line::build(binary, c, line),
        };
        update::update_function_samples(&mut profile, opts.update_total_samples);
        (profile, beside(&counters))
    };
    if let Cow::Owned(counters) = counters {
        counters.free();
    }
    generated
}

/// The extbinary profile symbol list (`--populate-profile-symbol-list`): every function of the
/// binary with code.
pub fn symbol_list(binary: &Binary) -> Vec<String> {
    let mut names: Vec<String> = binary
        .functions()
        .iter()
        .filter(|f| !f.ranges.is_empty())
        .map(|f| f.name.to_string())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}
