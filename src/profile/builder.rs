//! Shared plumbing of the non-CS builders: top-level profiles by function name, and the walk
//! from an outermost function down through inlined call sites to the profile of the innermost
//! frame (llvm-profgen's `getLeafProfileAndAddTotalSamples`).

use super::{Context, FunctionSamples, Profile, ProfileKind};
use crate::addr::Vaddr;
use crate::aggregate::Counters;
use crate::binary::Binary;
use crate::llvm::LineLocation;
use std::collections::BTreeMap;

/// Top-level profiles by function name while building.
#[derive(Default)]
pub struct TopLevelProfiles {
    functions: BTreeMap<String, FunctionSamples>,
}

impl TopLevelProfiles {
    pub fn top_level(&mut self, name: &str) -> &mut FunctionSamples {
        if !self.functions.contains_key(name) {
            self.functions.insert(name.to_string(), FunctionSamples::new(name));
        }
        self.functions.get_mut(name).expect("inserted above")
    }

    /// The profile of the innermost frame: `outer` is the outermost function, `inlined` the
    /// (call site in the caller, callee) steps inward. Every level's total grows by `total`;
    /// `checksum` gives a level its `!CFGChecksum` (probe profiles).
    pub fn leaf_profile<'n>(
        &mut self,
        outer: &str,
        inlined: impl Iterator<Item = (LineLocation, &'n str)>,
        total: u64,
        checksum: impl Fn(&str) -> Option<u64>,
    ) -> &mut FunctionSamples {
        let mut fs = self.top_level(outer);
        fs.add_total(total);
        if fs.checksum.is_none() {
            fs.checksum = checksum(outer);
        }
        for (site, callee) in inlined {
            fs = fs.callsite_mut(site, callee);
            fs.add_total(total);
            if fs.checksum.is_none() {
                fs.checksum = checksum(callee);
            }
        }
        fs
    }

    pub fn into_profile(self, kind: ProfileKind) -> Profile {
        Profile {
            kind,
            functions: self
                .functions
                .into_iter()
                .map(|(name, fs)| (Context::base(name.as_str()), fs))
                .collect(),
            symbol_list: None,
        }
    }
}

/// Ranges with a zero-count range added for every range of each sampled function (or of all
/// functions), so that unexecuted code appears with count 0 (`preprocessRangeCounter`).
pub fn zero_filled_ranges(
    binary: &Binary,
    counters: &Counters,
    fill_all: bool,
) -> Vec<((Vaddr, Vaddr), u64)> {
    let mut ranges = counters.ranges.clone();
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
        let mut sampled: Vec<_> = counters
            .ranges
            .keys()
            .filter_map(|(s, _)| binary.func_range(*s))
            .map(|r| r.func)
            .collect();
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

/// Branches sorted, so that building never depends on hash order.
pub fn sorted_branches(counters: &Counters) -> Vec<((Vaddr, Vaddr), u64)> {
    let mut v: Vec<_> = counters.branches.iter().map(|(&k, &n)| (k, n)).collect();
    v.sort_unstable();
    v
}
