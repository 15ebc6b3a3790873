//! Non-context probe-based profile (LBR-only samples on a binary with pseudo probes): every probe
//! at an instruction of a fall-through range gets the range's count, nested under its inline
//! context; call probes at branch sources give call targets. Mirrors llvm-profgen's
//! `ProfileGenerator::generateProbeBasedProfile`.

use super::builder::{TopLevelProfiles, sorted_branches, zero_filled_ranges};
use super::ranges::disjoint_ranges;
use super::{Profile, ProfileKind};
use crate::aggregate::Counters;
use crate::binary::Binary;
use crate::binary::probes::{Probe, ProbeInfo};
use crate::llvm::{LineLocation, md5_guid};
use hashbrown::HashMap;

/// The profile of `probe`'s function under its inline context.
fn probe_profile<'p>(
    b: &'p mut TopLevelProfiles,
    probes: &ProbeInfo,
    probe: &Probe,
    total: u64,
) -> &'p mut super::FunctionSamples {
    let (sites, (leaf_name, _)) = probes.inline_context(probe);
    let checksum = |name: &str| probes.desc(md5_guid(name)).map(|d| d.hash);
    // Frames: callers with their call-site probe ids, then the probe's own function.
    let names: Vec<&str> =
        sites.iter().map(|(n, _)| &**n).chain(std::iter::once(&*leaf_name)).collect();
    let inlined = sites
        .iter()
        .zip(&names[1..])
        .map(|((_, site), callee)| (LineLocation::new(*site, 0), *callee));
    b.leaf_profile(names[0], inlined, total, checksum)
}

/// Builds the non-CS probe-based profile from LBR counters.
pub fn build(
    binary: &Binary,
    probes: &ProbeInfo,
    counters: &Counters,
    fill_zero_for_all_funcs: bool,
) -> Profile {
    // Probe counts, keyed by the probe's position in the decoded probe table.
    let mut probe_counts: HashMap<usize, u64> = HashMap::new();
    let table = probes.probes();
    let ranges = zero_filled_ranges(binary, counters, fill_zero_for_all_funcs);
    for (start, end, count) in disjoint_ranges(ranges.into_iter()) {
        for addr in binary.insts_in(start, end) {
            let at = probes.probes_at(addr);
            if at.is_empty() {
                continue;
            }
            let first = table.partition_point(|p| p.addr < addr);
            for i in first..first + at.len() {
                let c = probe_counts.entry(i).or_default();
                *c = c.saturating_add(count);
            }
        }
    }
    let mut counted: Vec<_> = probe_counts.into_iter().collect();
    counted.sort_unstable();

    let mut b = TopLevelProfiles::default();
    for (i, count) in counted {
        let probe = &table[i];
        let fs = probe_profile(&mut b, probes, probe, count);
        fs.add_body(LineLocation::new(probe.index, probe.discriminator), count);
        if probe.index == 1 {
            fs.add_head(count);
        }
    }

    for ((src, dst), count) in sorted_branches(counters) {
        let Some(callee) = binary.callee_name(dst) else { continue };
        let Some(call) = probes.call_probe_at(src) else { continue };
        let fs = probe_profile(&mut b, probes, call, 0);
        fs.add_call_target(LineLocation::new(call.index, call.discriminator), &callee, count);
    }

    b.into_profile(ProfileKind { probe_based: true, ..Default::default() })
}
