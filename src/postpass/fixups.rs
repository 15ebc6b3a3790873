//! Small whole-profile fix-ups: `updateFunctionSamples` (end of generation) and the filter of
//! ambiguous compiler-generated initialisers.

use crate::profile::{FunctionSamples, Profile};

/// Functions with several same-named versions whose merged samples would mislead the compiler.
const AMBIGUOUS_PREFIXES: [&str; 2] = ["__cxx_global_var_init", "__tls_init"];

/// `updateFunctionSamples`, the last step of generating a profile from perf data: raise every
/// body count to the sum of its call targets (`updateCallsiteSamples`) and, with
/// `--update-total-samples`, recompute totals. CS generation recomputes totals first, non-CS
/// last. Quirk kept from LLVM 19: the call-target raise does not recurse into nested inlinees.
pub fn update_function_samples(profile: &mut Profile, update_total: bool) {
    let cs = profile.kind.context_sensitive;
    for fs in profile.functions.values_mut() {
        if cs && update_total {
            update_total_samples(fs);
        }
        update_callsite_samples(fs);
        if !cs && update_total {
            update_total_samples(fs);
        }
    }
}

fn update_callsite_samples(fs: &mut FunctionSamples) {
    for body in fs.body.values_mut() {
        let targets = body.call_targets.values().fold(0u64, |a, n| a.saturating_add(*n));
        body.count = body.count.max(targets);
    }
}

/// `FunctionSamples::updateTotalSamples`: Σ body counts + Σ nested totals, recursively.
fn update_total_samples(fs: &mut FunctionSamples) {
    let mut total = fs.body.values().fold(0u64, |a, b| a.saturating_add(b.count));
    for callees in fs.callsites.values_mut() {
        for nested in callees.values_mut() {
            update_total_samples(nested);
            total = total.saturating_add(nested.total_samples);
        }
    }
    fs.total_samples = total;
}

/// `filterAmbiguousProfile`: drops top-level and nested profiles of `__cxx_global_var_init*` and
/// `__tls_init*`. Returns the number of profiles dropped.
pub fn filter_ambiguous_profiles(profile: &mut Profile) -> usize {
    let before = profile.functions.len();
    profile.functions.retain(|_, fs| !is_ambiguous(&fs.name));
    let mut removed = before - profile.functions.len();
    for fs in profile.functions.values_mut() {
        removed += filter_nested(fs);
    }
    removed
}

fn is_ambiguous(name: &str) -> bool {
    AMBIGUOUS_PREFIXES.iter().any(|p| name.starts_with(p))
}

fn filter_nested(fs: &mut FunctionSamples) -> usize {
    let mut removed = 0;
    for callees in fs.callsites.values_mut() {
        let before = callees.len();
        callees.retain(|name, _| !is_ambiguous(name));
        removed += before - callees.len();
        for nested in callees.values_mut() {
            removed += filter_nested(nested);
        }
    }
    removed
}
