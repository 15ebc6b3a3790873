//! LBR-only counters (no calling context): each distinct sample's branch entries become branch
//! counts, and the straight-line code between consecutive entries becomes fall-through ranges,
//! as llvm-profgen's `computeCounterFromLBR` does.

use super::Counters;
use super::samples::AggregatedSamples;
use crate::addr::Vaddr;
use crate::binary::Binary;

/// A fall-through range is plausible when it runs forward and crosses no call, return or direct
/// jump (perf on some Intel parts duplicates LBR entries, forming long bogus ranges).
pub fn is_valid_fall_through(binary: &Binary, start: Vaddr, end: Vaddr) -> bool {
    start <= end && !binary.range_crosses_uncond_branch(start, end)
}

/// Range and branch counts from LBR entries (or sample IPs in leading-IP mode): the raw pairs
/// aggregation collected, keeping the plausible fall-through ranges.
pub fn lbr_counters(binary: &Binary, samples: &AggregatedSamples) -> Counters {
    let mut c = Counters { branches: samples.raw.branches.clone(), ..Default::default() };
    for (&(start, end), &n) in &samples.raw.ranges {
        if is_valid_fall_through(binary, start, end) {
            c.add_range(start, end, n);
        }
    }
    c
}
