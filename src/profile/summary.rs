//! Profile summary and hot/cold count thresholds, computed exactly like LLVM's
//! `SampleProfileSummaryBuilder` (`ProfileSummaryBuilder.cpp`).
//!
//! In: a [`Profile`] (or any set of top-level [`FunctionSamples`]). Out: a [`ProfileSummary`]
//! that the extbinary/binary writers serialize and that the post-passes query for the hot, cold
//! and 10%-cutoff counts. The arithmetic mirrors LLVM's integer widths (u64 totals and u32 count
//! tallies wrap, the cutoff product is 128-bit) so that the numbers are byte-identical.

use std::collections::BTreeMap;

use super::model::{FunctionSamples, Profile, attr};
use crate::error::{Error, Result};

/// `ProfileSummary::Scale`: cutoffs are parts per million.
pub const SCALE: u32 = 1_000_000;

/// `ProfileSummaryBuilder::DefaultCutoffs`.
pub const DEFAULT_CUTOFFS: [u32; 16] = [
    10000, 100000, 200000, 300000, 400000, 500000, 600000, 700000, 800000, 900000, 950000, 990000,
    999000, 999900, 999990, 999999,
];

/// One detailed-summary entry: the counts needed to reach `cutoff` parts per million of the
/// total are the `num_counts` largest, the smallest of them being `min_count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SummaryEntry {
    pub cutoff: u32,
    pub min_count: u64,
    pub num_counts: u64,
}

/// `--profile-summary-*` options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SummaryOptions {
    /// `--profile-summary-cutoff-hot` (parts per million).
    pub cutoff_hot: u32,
    /// `--profile-summary-cutoff-cold` (parts per million).
    pub cutoff_cold: u32,
    /// `--profile-summary-hot-count`: replaces the derived hot threshold.
    pub hot_count: Option<u64>,
    /// `--profile-summary-cold-count`: replaces the derived cold threshold.
    pub cold_count: Option<u64>,
}

impl Default for SummaryOptions {
    fn default() -> Self {
        SummaryOptions {
            cutoff_hot: 990000,
            cutoff_cold: 999999,
            hot_count: None,
            cold_count: None,
        }
    }
}

/// `ProfileSummary` of kind `PSK_Sample`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProfileSummary {
    /// Sum of all body counts (wrapping, like LLVM's `uint64_t +=`).
    pub total_count: u64,
    pub max_count: u64,
    /// Largest head-sample count of a top-level profile.
    pub max_function_count: u64,
    /// Number of body counts, zeros included (LLVM keeps it in a `uint32_t`).
    pub num_counts: u32,
    /// Number of top-level profiles (after flattening CS profiles by function name).
    pub num_functions: u32,
    /// One entry per cutoff, ascending.
    pub detailed: Vec<SummaryEntry>,
}

impl ProfileSummary {
    /// `computeSummaryForProfiles`: flat context-sensitive profiles are first merged by leaf
    /// function name (the "context-less" summary LLVM uses by default for CS profiles).
    pub fn compute(profile: &Profile) -> Self {
        if profile.kind.context_sensitive {
            let mut merged: BTreeMap<&str, FunctionSamples> = BTreeMap::new();
            for (ctx, fs) in &profile.functions {
                let base = merged
                    .entry(ctx.leaf_name())
                    .or_insert_with(|| FunctionSamples::new(ctx.leaf()));
                // `FunctionSamples::merge` refuses (hash_mismatch) a profile whose checksum
                // differs from the non-zero one already merged. LLVM's winner depends on its
                // hash-map order; ours is the first context in context order.
                let base_sum = base.checksum.unwrap_or(0);
                if base_sum != 0 && base_sum != fs.checksum.unwrap_or(0) {
                    continue;
                }
                base.merge(fs);
                if base_sum == 0 {
                    base.checksum = fs.checksum;
                }
            }
            Self::from_top_level(merged.values(), &DEFAULT_CUTOFFS)
        } else {
            Self::from_top_level(profile.functions.values(), &DEFAULT_CUTOFFS)
        }
    }

    /// The summary of these top-level profiles as they are (no flattening).
    pub fn from_top_level<'a>(
        profiles: impl IntoIterator<Item = &'a FunctionSamples>,
        cutoffs: &[u32],
    ) -> Self {
        let mut b = Builder::default();
        for fs in profiles {
            b.add_record(fs, false);
        }
        b.finish(cutoffs)
    }

    /// `getEntryForPercentile`: the first entry whose cutoff is at least `percentile`;
    /// percentile 0 gives the "nothing is hot" entry `(0, u64::MAX, 0)`.
    pub fn entry_for_percentile(&self, percentile: u32) -> Result<SummaryEntry> {
        if percentile == 0 {
            return Ok(SummaryEntry { cutoff: 0, min_count: u64::MAX, num_counts: 0 });
        }
        self.detailed.iter().find(|e| e.cutoff >= percentile).copied().ok_or_else(|| {
            Error::Usage(format!(
                "Desired percentile {percentile} exceeds the maximum cutoff of the profile summary"
            ))
        })
    }

    /// `getHotCountThreshold`: counts at or above it are hot.
    pub fn hot_count_threshold(&self, opts: &SummaryOptions) -> Result<u64> {
        let derived = self.entry_for_percentile(opts.cutoff_hot)?.min_count;
        Ok(opts.hot_count.unwrap_or(derived))
    }

    /// `getColdCountThreshold`: counts at or below it are cold.
    pub fn cold_count_threshold(&self, opts: &SummaryOptions) -> Result<u64> {
        let derived = self.entry_for_percentile(opts.cutoff_cold)?.min_count;
        Ok(opts.cold_count.unwrap_or(derived))
    }

    /// MinCount of the 10% cutoff: the pre-inliner's normalization upper bound.
    pub fn p10_min_count(&self) -> u64 {
        self.entry_for_percentile(100000).map_or(0, |e| e.min_count)
    }
}

#[derive(Default)]
struct Builder {
    total_count: u64,
    max_count: u64,
    max_function_count: u64,
    num_counts: u32,
    num_functions: u32,
    /// Count → how many times it occurs: hashed, since a profile's ~10^5 counts take few
    /// distinct values; `finish` sorts only those.
    frequencies: hashbrown::HashMap<u64, u32>,
}

impl Builder {
    fn add_count(&mut self, count: u64) {
        self.total_count = self.total_count.wrapping_add(count);
        self.max_count = self.max_count.max(count);
        self.num_counts = self.num_counts.wrapping_add(1);
        let f = self.frequencies.entry(count).or_default();
        *f = f.wrapping_add(1);
    }

    /// `SampleProfileSummaryBuilder::addRecord`: every body count (zeros included), recursing
    /// into inlinees except those already merged into their base profile.
    fn add_record(&mut self, fs: &FunctionSamples, is_callsite: bool) {
        if !is_callsite {
            self.num_functions = self.num_functions.wrapping_add(1);
            self.max_function_count = self.max_function_count.max(fs.head_samples);
        } else if fs.attributes & attr::DUPLICATED_INTO_BASE != 0 {
            return;
        }
        for b in fs.body.values() {
            self.add_count(b.count);
        }
        for callees in fs.callsites.values() {
            for callee in callees.values() {
                self.add_record(callee, true);
            }
        }
    }

    /// `computeDetailedSummary`.
    fn finish(self, cutoffs: &[u32]) -> ProfileSummary {
        let mut cutoffs = cutoffs.to_vec();
        cutoffs.sort_unstable();
        let mut counts: Vec<(u64, u32)> = self.frequencies.into_iter().collect();
        counts.sort_unstable_by_key(|&(count, _)| std::cmp::Reverse(count));
        let mut counts = counts.into_iter();
        let (mut counts_seen, mut curr_sum, mut count) = (0u32, 0u64, 0u64);
        let mut detailed = Vec::with_capacity(cutoffs.len());
        for cutoff in cutoffs {
            let desired = (self.total_count as u128 * cutoff as u128 / SCALE as u128) as u64;
            while curr_sum < desired {
                let Some((c, freq)) = counts.next() else {
                    break;
                };
                count = c;
                curr_sum = curr_sum.wrapping_add(c.wrapping_mul(freq as u64));
                counts_seen = counts_seen.wrapping_add(freq);
            }
            detailed.push(SummaryEntry {
                cutoff,
                min_count: count,
                num_counts: counts_seen as u64,
            });
        }
        ProfileSummary {
            total_count: self.total_count,
            max_count: self.max_count,
            max_function_count: self.max_function_count,
            num_counts: self.num_counts,
            num_functions: self.num_functions,
            detailed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llvm::{ContextFrame, LineLocation};
    use crate::profile::model::{Context, ProfileKind};

    fn func(name: &str, head: u64, counts: &[(u32, u64)]) -> FunctionSamples {
        let mut fs = FunctionSamples::new(name);
        fs.head_samples = head;
        for &(line, n) in counts {
            fs.add_body(LineLocation::new(line, 0), n);
            fs.add_total(n);
        }
        fs
    }

    #[test]
    fn cutoffs_take_largest_counts_first() {
        // Counts 100, 50, 0, 10 → total 160.
        let mut main = func("main", 7, &[(1, 100), (2, 50), (3, 0)]);
        let inl = func("inl", 0, &[(1, 10)]);
        main.callsites.entry(LineLocation::new(2, 0)).or_default().insert("inl".into(), inl);
        let s = ProfileSummary::from_top_level([&main], &DEFAULT_CUTOFFS);
        assert_eq!((s.total_count, s.max_count, s.num_counts), (160, 100, 4));
        assert_eq!((s.num_functions, s.max_function_count), (1, 7));
        let e = |c: u32| s.detailed.iter().find(|e| e.cutoff == c).copied().unwrap();
        // 1%: desired 1 → 100 alone.
        assert_eq!(e(10000), SummaryEntry { cutoff: 10000, min_count: 100, num_counts: 1 });
        // 70%: desired 112 → 100 + 50.
        assert_eq!(e(700000), SummaryEntry { cutoff: 700000, min_count: 50, num_counts: 2 });
        // 95%: desired 152 → + 10.
        assert_eq!(e(950000), SummaryEntry { cutoff: 950000, min_count: 10, num_counts: 3 });
        // 99.9999%: desired 159 → still 3 counts; the zero is never needed.
        assert_eq!(e(999999), SummaryEntry { cutoff: 999999, min_count: 10, num_counts: 3 });
        let opts = SummaryOptions::default();
        assert_eq!(s.hot_count_threshold(&opts).unwrap(), 10);
        assert_eq!(s.cold_count_threshold(&opts).unwrap(), 10);
        assert_eq!(s.p10_min_count(), 100);
        let forced = SummaryOptions { hot_count: Some(0), cold_count: Some(5), ..opts };
        assert_eq!(s.hot_count_threshold(&forced).unwrap(), 0);
        assert_eq!(s.cold_count_threshold(&forced).unwrap(), 5);
    }

    #[test]
    fn zero_desired_repeats_previous_entry() {
        let f = func("f", 0, &[(1, 5), (2, 0)]);
        let s = ProfileSummary::from_top_level([&f], &DEFAULT_CUTOFFS);
        // total 5: 1% → desired 0, nothing taken.
        assert_eq!(s.detailed[0], SummaryEntry { cutoff: 10000, min_count: 0, num_counts: 0 });
        assert_eq!(s.detailed[1], SummaryEntry { cutoff: 100000, min_count: 0, num_counts: 0 });
        // 20% → desired 1.
        assert_eq!(s.detailed[2], SummaryEntry { cutoff: 200000, min_count: 5, num_counts: 1 });
        assert!(s.entry_for_percentile(1_000_000).is_err());
        assert_eq!(s.entry_for_percentile(0).unwrap().min_count, u64::MAX);
    }

    #[test]
    fn duplicated_inlinees_are_skipped_and_cs_is_flattened() {
        let mut f = func("f", 3, &[(1, 4)]);
        let mut dup = func("g", 0, &[(1, 4)]);
        dup.attributes = attr::DUPLICATED_INTO_BASE;
        f.callsites.entry(LineLocation::new(1, 0)).or_default().insert("g".into(), dup);
        let s = ProfileSummary::from_top_level([&f], &DEFAULT_CUTOFFS);
        assert_eq!((s.total_count, s.num_counts), (4, 1));

        let mut p = Profile {
            kind: ProfileKind { context_sensitive: true, ..Default::default() },
            ..Default::default()
        };
        let ctx = Context::new(vec![
            ContextFrame { func: "main".into(), loc: LineLocation::new(1, 0) },
            ContextFrame { func: "g".into(), loc: LineLocation::default() },
        ]);
        p.functions.insert(ctx, func("g", 2, &[(1, 6), (2, 1)]));
        p.functions.insert(Context::base("g"), func("g", 3, &[(1, 4)]));
        let s = ProfileSummary::compute(&p);
        // One merged function g: line 1 = 10, line 2 = 1, head 5.
        assert_eq!((s.num_functions, s.max_function_count), (1, 5));
        assert_eq!((s.total_count, s.max_count, s.num_counts), (11, 10, 2));
    }
}
