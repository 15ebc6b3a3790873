//! LBR-only counters (no calling context): each distinct sample's branch entries become branch
//! counts, and the straight-line code between consecutive entries becomes fall-through ranges,
//! as llvm-profgen's `computeCounterFromLBR` does.

use super::samples::AggregatedSamples;
use super::Counters;
use crate::addr::Vaddr;
use crate::binary::Binary;

/// A fall-through range is plausible when it runs forward and crosses no call, return or direct
/// jump (perf on some Intel parts duplicates LBR entries, forming long bogus ranges).
pub fn is_valid_fall_through(binary: &Binary, start: Vaddr, end: Vaddr) -> bool {
    start <= end && !binary.range_crosses_uncond_branch(start, end)
}

/// Range and branch counts from LBR entries (or sample IPs in leading-IP mode).
pub fn lbr_counters(binary: &Binary, samples: &AggregatedSamples, leading_ip_only: bool) -> Counters {
    let mut c = Counters::default();
    for (s, n) in samples.iter() {
        if leading_ip_only {
            if let Some((ip, _)) = s.branches().next() {
                c.add_range(ip, ip, n);
            }
            continue;
        }
        // Entries are most recent first: the code after entry i's target ran up to the source
        // of entry i-1.
        let mut end: Option<Vaddr> = None;
        for (src, dst) in s.branches() {
            if !dst.is_external() {
                c.add_branch(src, dst, n);
                if let Some(e) = end.filter(|e| !e.is_external()) {
                    if is_valid_fall_through(binary, dst, e) {
                        c.add_range(dst, e, n);
                    }
                }
            }
            end = Some(src);
        }
    }
    c
}
