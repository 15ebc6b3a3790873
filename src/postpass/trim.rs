//! Cold-profile trimming: `SampleContextTrimmer::trimAndMergeColdContextProfiles` for flat CS
//! profiles (`--trim-cold-profile`, `--csprof-merge-cold-context`,
//! `--csprof-max-cold-context-depth`) and `ProfileGenerator::trimColdProfiles` for non-CS ones.

use std::collections::BTreeMap;

use super::trie::merge_samples;
use crate::profile::{Context, FunctionSamples, Profile};

/// Removes contexts whose total is below `threshold` (the summary's *hot* threshold); with
/// `merge` they are first summed into the context of their last `max_cold_depth` frames, and
/// merged results still below the threshold are dropped with `trim` unless that context already
/// exists. With `base_only` (pre-inliner ran, no merging) only base contexts are trimmed.
/// Returns the number of contexts removed.
pub fn trim_and_merge_cold_contexts(
    profile: &mut Profile,
    threshold: u64,
    trim: bool,
    merge: bool,
    max_cold_depth: u32,
    base_only: bool,
) -> usize {
    if (!trim && !merge) || threshold == 0 {
        return 0;
    }
    // Honouring the pre-inliner's decisions is moot once cold contexts get merged anyway.
    let base_only = base_only && !merge;
    let cold: Vec<Context> = profile
        .functions
        .iter()
        .filter(|(ctx, fs)| fs.total_samples < threshold && (!base_only || ctx.len() == 1))
        .map(|(ctx, _)| ctx.clone())
        .collect();
    let removed = cold.len();

    let mut merged: BTreeMap<Context, FunctionSamples> = BTreeMap::new();
    for ctx in cold {
        let Some(fs) = profile.functions.remove(&ctx) else {
            continue;
        };
        if merge {
            // Depth 0 would make an empty context (garbage in llvm-profgen); keep the leaf.
            let merged_ctx = ctx.suffix(max_cold_depth.max(1) as usize);
            // `SampleProfileMap::create` names the profile, so it keeps no attributes.
            let target = merged.entry(merged_ctx).or_insert_with(|| FunctionSamples::new(&fs.name));
            merge_samples(target, &fs);
        }
    }
    for (ctx, fs) in merged {
        if trim && fs.total_samples < threshold && !profile.functions.contains_key(&ctx) {
            continue;
        }
        merge_samples(profile.functions.entry(ctx).or_default(), &fs);
    }
    removed
}

/// Non-CS `--trim-cold-profile`: drops top-level profiles whose total is below `threshold` (the
/// summary's *cold* threshold). Returns the number removed.
pub fn trim_cold_profiles(profile: &mut Profile, threshold: u64) -> usize {
    let before = profile.functions.len();
    profile.functions.retain(|_, fs| fs.total_samples >= threshold);
    before - profile.functions.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_cs_trim_drops_totals_below_the_cold_threshold() {
        let mut profile = Profile::default();
        for (name, total) in [("a", 9), ("b", 10), ("c", 11)] {
            let mut fs = FunctionSamples::new(name);
            fs.total_samples = total;
            profile.functions.insert(Context::base(name), fs);
        }
        assert_eq!(trim_cold_profiles(&mut profile, 10), 1);
        let names: Vec<&str> = profile.functions.values().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["b", "c"]);
    }
}
