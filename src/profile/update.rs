//! `updateFunctionSamples`, the last step of generating a non-CS profile from perf data (the CS
//! builders do the same as they finish).

use super::{FunctionSamples, Profile};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llvm::LineLocation;
    use crate::profile::Context;

    fn loc(line: u32, discriminator: u32) -> LineLocation {
        LineLocation::new(line, discriminator)
    }

    /// §6.3's verified LBR-only example: foo calls bar in a loop; with
    /// `--update-total-samples` llvm-profgen writes totals 45 and 45.
    #[test]
    fn non_cs_update_totals_matches_verified_example() {
        let mut foo = FunctionSamples::new("foo");
        foo.total_samples = 780;
        for (l, d, n) in [(0, 0, 0), (2, 1, 15), (3, 0, 15), (3, 1, 15), (3, 2, 0), (4, 0, 0)] {
            foo.add_body(loc(l, d), n);
        }
        foo.add_call_target(loc(3, 1), &"bar".into(), 15);
        let mut bar = FunctionSamples::new("bar");
        bar.total_samples = 495;
        bar.head_samples = 15;
        for l in [0, 1, 5] {
            bar.add_body(loc(l, 0), 15);
        }
        let mut profile = Profile::default();
        profile.functions.insert(Context::base("foo"), foo);
        profile.functions.insert(Context::base("bar"), bar);
        update_function_samples(&mut profile, true);
        assert_eq!(profile.functions[&Context::base("foo")].total_samples, 45);
        assert_eq!(profile.functions[&Context::base("bar")].total_samples, 45);
        assert_eq!(profile.functions[&Context::base("bar")].head_samples, 15);
    }

    fn profile_with_short_call_count(cs: bool) -> Profile {
        let mut fs = FunctionSamples::new("main");
        fs.total_samples = 100;
        fs.add_body(loc(1, 0), 5);
        fs.add_call_target(loc(1, 0), &"a".into(), 6);
        fs.add_call_target(loc(1, 0), &"b".into(), 2);
        // An inlinee whose call targets also exceed its body count: LLVM 19 leaves it alone.
        let nested = fs.callsite_mut(loc(2, 0), "c");
        nested.total_samples = 3;
        nested.add_body(loc(1, 0), 3);
        nested.add_call_target(loc(1, 0), &"d".into(), 9);
        let mut profile = Profile::default();
        profile.kind.context_sensitive = cs;
        profile.functions.insert(Context::base("main"), fs);
        profile
    }

    #[test]
    fn callsite_counts_are_raised_at_top_level_only() {
        let mut profile = profile_with_short_call_count(false);
        update_function_samples(&mut profile, false);
        let fs = &profile.functions[&Context::base("main")];
        assert_eq!(fs.body[&loc(1, 0)].count, 8);
        assert_eq!(fs.callsites[&loc(2, 0)]["c"].body[&loc(1, 0)].count, 3);
        assert_eq!(fs.total_samples, 100);
    }

    #[test]
    fn totals_are_recomputed_after_the_raise_for_non_cs_and_before_it_for_cs() {
        let mut non_cs = profile_with_short_call_count(false);
        update_function_samples(&mut non_cs, true);
        assert_eq!(non_cs.functions[&Context::base("main")].total_samples, 8 + 3);
        let mut cs = profile_with_short_call_count(true);
        update_function_samples(&mut cs, true);
        let fs = &cs.functions[&Context::base("main")];
        assert_eq!(fs.total_samples, 5 + 3);
        assert_eq!(fs.body[&loc(1, 0)].count, 8);
    }
}
