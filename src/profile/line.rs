//! Non-context (AutoFDO-style) line-based profile: fall-through ranges give body samples per
//! source line, with inlined code nested under its call sites; branches to function entries give
//! call targets and head samples. Mirrors llvm-profgen's `ProfileGenerator` for binaries without
//! pseudo probes.

use super::builder::{TopLevelProfiles, sorted_branches, zero_filled_ranges};
use super::ranges::disjoint_ranges;
use super::{Profile, ProfileKind};
use crate::aggregate::Counters;
use crate::binary::{Binary, SourceFrame};
use crate::llvm::LineLocation;
use crate::llvm::discriminator::duplication_factor;

#[derive(Clone, Copy, Debug, Default)]
pub struct LineOptions {
    /// Zero-fill every function's ranges, not only those of sampled functions.
    pub fill_zero_for_all_funcs: bool,
    /// Body counts are summed per line instead of maxed (IP samples carry no duplication).
    pub leading_ip_only: bool,
}

fn location(f: &SourceFrame, fs: bool) -> LineLocation {
    f.location(fs)
}

/// The profile of the innermost frame of `frames` (outermost first).
fn leaf_profile<'p>(
    b: &'p mut TopLevelProfiles,
    frames: &[SourceFrame],
    total: u64,
    fs: bool,
) -> &'p mut super::FunctionSamples {
    let inlined = frames.windows(2).map(|w| (location(&w[0], fs), &*w[1].func_name));
    b.leaf_profile(&frames[0].func_name, inlined, total, |_| None)
}

/// Builds the non-CS line-based profile from LBR counters.
pub fn build(binary: &Binary, counters: &Counters, opts: LineOptions) -> Profile {
    let mut b = TopLevelProfiles::default();
    let fs = binary.uses_fs_discriminators();

    let ranges = zero_filled_ranges(binary, counters, opts.fill_zero_for_all_funcs);
    for (start, end, count) in disjoint_ranges(ranges.into_iter()) {
        for addr in binary.insts_in(start, end) {
            let frames = binary.inline_stack(addr);
            let Some(leaf) = frames.last() else { continue };
            // Totals are per byte, as llvm-profgen counts them.
            let size = binary.inst_size(addr).unwrap_or(1);
            let profile = leaf_profile(&mut b, &frames, count.saturating_mul(size), fs);
            if opts.leading_ip_only {
                profile.add_body(location(leaf, fs), count);
            } else {
                // Lines keep the max over their instructions, scaled back up where the compiler
                // duplicated the code (unrolling, vectorisation).
                let factor = u64::from(duplication_factor(leaf.discriminator, fs));
                profile.max_body(location(leaf, fs), count.saturating_mul(factor));
            }
        }
    }

    for ((src, dst), count) in sorted_branches(counters) {
        let Some(callee) = binary.callee_name(dst) else { continue };
        if !src.is_external() {
            let frames = binary.inline_stack(src);
            if let Some(leaf) = frames.last() {
                leaf_profile(&mut b, &frames, 0, fs).add_call_target(
                    location(leaf, fs),
                    &callee,
                    count,
                );
            }
        }
        // Every branch to the entry counts as a head sample, whatever its source.
        b.top_level(&callee).add_head(count);
    }

    b.into_profile(ProfileKind { fs_discriminator: fs, ..Default::default() })
}
