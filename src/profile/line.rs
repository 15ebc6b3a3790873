//! Non-context (AutoFDO-style) line-based profile: fall-through ranges give body samples per
//! source line, with inlined code nested under its call sites; branches to function entries give
//! call targets and head samples. Mirrors llvm-profgen's `ProfileGenerator` for binaries without
//! pseudo probes.

use super::ranges::disjoint_ranges;
use super::{Context, FunctionSamples, LineLocation, Profile, ProfileKind};
use crate::addr::Vaddr;
use crate::aggregate::Counters;
use crate::binary::dwarf::{base_discriminator, canonical_fn_name, duplication_factor};
use crate::binary::{Binary, SourceFrame};
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, Default)]
pub struct LineOptions {
    /// Zero-fill every function's ranges, not only those of sampled functions.
    pub fill_zero_for_all_funcs: bool,
    /// Body counts are summed per line instead of maxed (IP samples carry no duplication).
    pub leading_ip_only: bool,
}

/// Top-level profiles by function name while building.
#[derive(Default)]
struct Builder {
    functions: BTreeMap<String, FunctionSamples>,
}

impl Builder {
    fn top_level(&mut self, name: &str) -> &mut FunctionSamples {
        self.functions.entry(name.to_string()).or_insert_with(|| FunctionSamples::new(name))
    }

    /// The profile of the innermost frame, creating the nesting; every level's total grows by
    /// `total` (`getLeafProfileAndAddTotalSamples`).
    fn leaf_profile(&mut self, frames: &[SourceFrame], total: u64) -> &mut FunctionSamples {
        let mut fs = self.top_level(&frames[0].func_name);
        fs.add_total(total);
        for pair in frames.windows(2) {
            let site = LineLocation::new(pair[0].line_offset, base_discriminator(pair[0].discriminator));
            fs = fs.callsite_mut(site, &pair[1].func_name);
            fs.add_total(total);
        }
        fs
    }
}

fn leaf_location(f: &SourceFrame) -> LineLocation {
    LineLocation::new(f.line_offset, base_discriminator(f.discriminator))
}

/// Ranges with zero-count ranges added for every range of each sampled function (or all
/// functions), so unexecuted lines appear with count 0.
fn zero_filled_ranges(binary: &Binary, counters: &Counters, fill_all: bool) -> Vec<((Vaddr, Vaddr), u64)> {
    let mut ranges: hashbrown::HashMap<(Vaddr, Vaddr), u64> = counters.ranges.clone();
    let mut add_zero = |start: Vaddr, end: Vaddr| {
        ranges.entry((start, Vaddr(end.0 - 1))).or_insert(0);
    };
    if fill_all {
        for f in binary.functions() {
            for &(s, e) in &f.ranges {
                add_zero(s, e);
            }
        }
    } else {
        let mut sampled: Vec<_> = counters.ranges.keys().filter_map(|(s, _)| binary.func_range(*s)).map(|r| r.func).collect();
        sampled.sort_unstable();
        sampled.dedup();
        for id in sampled {
            for &(s, e) in &binary.function(id).ranges {
                add_zero(s, e);
            }
        }
    }
    let mut v: Vec<_> = ranges.into_iter().collect();
    v.sort_unstable();
    v
}

/// Builds the non-CS line-based profile from LBR counters.
pub fn build(binary: &Binary, counters: &Counters, opts: LineOptions) -> Profile {
    let mut b = Builder::default();

    // Body samples: every instruction of every disjoint segment.
    let segments = disjoint_ranges(zero_filled_ranges(binary, counters, opts.fill_zero_for_all_funcs).into_iter());
    for (start, end, count) in segments {
        for addr in binary.insts_in(start, end) {
            let frames = binary.inline_stack(addr);
            let Some(leaf) = frames.last() else { continue };
            // Totals are per byte, as llvm-profgen counts them.
            let size = binary.inst_size(addr).unwrap_or(1);
            let fs = b.leaf_profile(&frames, count.saturating_mul(size));
            let loc = leaf_location(leaf);
            if opts.leading_ip_only {
                fs.add_body(loc, count);
            } else {
                fs.max_body(loc, count.saturating_mul(duplication_factor(leaf.discriminator) as u64));
            }
        }
    }

    // Call targets and head samples: branches that land on a function entry.
    let mut branches: Vec<_> = counters.branches.iter().map(|(&k, &n)| (k, n)).collect();
    branches.sort_unstable();
    for ((src, dst), count) in branches {
        let Some(range) = binary.func_range_at_start(dst).filter(|r| r.is_entry) else { continue };
        let callee = canonical_fn_name(&binary.function(range.func).name).to_string();
        if !src.is_external() {
            let frames = binary.inline_stack(src);
            if let Some(leaf) = frames.last() {
                let loc = leaf_location(leaf);
                b.leaf_profile(&frames, 0).add_call_target(loc, &callee, count);
            }
        }
        b.top_level(&callee).add_head(count);
    }

    Profile {
        kind: ProfileKind { fs_discriminator: binary.uses_fs_discriminators(), ..Default::default() },
        functions: b.functions.into_iter().map(|(name, fs)| (Context::base(&name), fs)).collect(),
        symbol_list: None,
    }
}
