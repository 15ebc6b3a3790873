//! Call anchors: every location of every function of the binary, with what is called there, as
//! LLVM's stale-profile matcher sees a function's IR (`SampleProfileMatcher::findIRAnchors`).
//!
//! Probe binaries: a function's locations are its probe ids (1 up to the largest id any copy of
//! the function has, ids are dense in the IR), a call probe is an anchor whose callee is the
//! function inlined at that probe (inline tree) or the target of the call instruction at the
//! probe's address. Binaries without probes: a function's locations are the (line offset, base
//! discriminator) of its instructions in every copy (outlined and inlined), a call instruction
//! (or a jump to another function's entry: a tail call) is an anchor at its location, and an
//! inlined call an anchor at its call site.
//!
//! Used twice: zero-count call targets written into profiles (every call site is an anchor the
//! compiler can match, sampled or not), and `profgen remap` (the new build's anchors, and the
//! old build's when it is given).

use super::Binary;
use super::probes::{NodeId, ProbeType};
use crate::llvm::sample_prof::UNKNOWN_INDIRECT_CALLEE;
use crate::llvm::{LineLocation, canonical_fn_name};
use std::collections::BTreeMap;

/// The locations of one function and the callee of each call site.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionAnchors {
    /// Every location; `Some(callee)` at call sites. Calls whose target is not known statically,
    /// or several different callees at one location, give [`UNKNOWN_INDIRECT_CALLEE`].
    pub locations: BTreeMap<LineLocation, Option<String>>,
    /// The CFG checksum of probe binaries (`.pseudo_probe_desc`).
    pub checksum: Option<u64>,
}

impl FunctionAnchors {
    /// Records a location, and the call at it if any.
    pub fn add(&mut self, loc: LineLocation, callee: Option<&str>) {
        let slot = self.locations.entry(loc).or_default();
        match (slot.as_deref(), callee) {
            (_, None) => {}
            (None, Some(c)) => *slot = Some(c.to_string()),
            (Some(old), Some(c)) if old != c => *slot = Some(UNKNOWN_INDIRECT_CALLEE.to_string()),
            _ => {}
        }
    }

    /// The call sites with a statically known callee, in location order.
    pub fn direct_calls(&self) -> impl Iterator<Item = (LineLocation, &str)> {
        self.locations.iter().filter_map(|(loc, c)| match c.as_deref() {
            Some(c) if c != UNKNOWN_INDIRECT_CALLEE => Some((*loc, c)),
            _ => None,
        })
    }
}

/// The anchors of every function of a binary, by canonical function name.
#[derive(Clone, Debug, Default)]
pub struct CodeAnchors {
    pub probe_based: bool,
    pub functions: BTreeMap<String, FunctionAnchors>,
}

impl CodeAnchors {
    /// The anchors of the function named `name` (canonicalised as profiles name it).
    pub fn get(&self, name: &str) -> Option<&FunctionAnchors> {
        self.functions.get(canonical_fn_name(name))
    }

    fn entry(&mut self, name: &str) -> &mut FunctionAnchors {
        self.functions.entry(canonical_fn_name(name).to_string()).or_default()
    }
}

impl Binary {
    /// The call anchors of every function (see the module documentation).
    pub fn anchors(&self) -> CodeAnchors {
        match self.probes() {
            Some(_) => self.probe_anchors(),
            None => self.line_anchors(),
        }
    }

    fn probe_anchors(&self) -> CodeAnchors {
        let probes = self.probes().expect("probe binary");
        let mut out = CodeAnchors { probe_based: true, ..Default::default() };
        let name_of = |guid: u64| probes.func_name(guid);
        let mut max_id: BTreeMap<String, u32> = BTreeMap::new();
        for p in probes.probes() {
            let name = name_of(p.guid);
            if name.is_empty() {
                continue;
            }
            let callee = match p.kind {
                ProbeType::Block => None,
                ProbeType::IndirectCall => Some(UNKNOWN_INDIRECT_CALLEE.to_string()),
                ProbeType::DirectCall => {
                    self.branch_target(p.addr).and_then(|t| self.callee_name(t))
                }
            };
            out.entry(&name).add(LineLocation::new(p.index, 0), callee.as_deref());
            let m = max_id.entry(canonical_fn_name(&name).to_string()).or_default();
            *m = (*m).max(p.index);
        }
        // Inlined calls: the call site in the parent is an anchor for the inlinee.
        for node in probes.nodes().iter().skip(1) {
            if node.parent == NodeId::ROOT || node.callsite == 0 {
                continue;
            }
            let parent = name_of(probes.node(node.parent).guid);
            let callee = name_of(node.guid);
            if parent.is_empty() || callee.is_empty() {
                continue;
            }
            out.entry(&parent)
                .add(LineLocation::new(node.callsite, 0), Some(canonical_fn_name(&callee)));
            let m = max_id.entry(canonical_fn_name(&parent).to_string()).or_default();
            *m = (*m).max(node.callsite);
        }
        // Probe ids are dense in the IR: ids no copy kept were optimised away, still locations.
        for (name, max) in max_id {
            let f = out.functions.entry(name).or_default();
            for id in 1..=max {
                f.add(LineLocation::new(id, 0), None);
            }
        }
        for d in probes.descs() {
            if let Some(f) = out.functions.get_mut(canonical_fn_name(&d.name)) {
                f.checksum = Some(d.hash);
            }
        }
        out
    }

    fn line_anchors(&self) -> CodeAnchors {
        let fs = self.uses_fs_discriminators();
        let mut out = CodeAnchors::default();
        for range in self.func_ranges() {
            for addr in self.insts_in(range.start, range.end) {
                let stack = self.inline_stack(addr);
                let Some((leaf, callers)) = stack.split_last() else { continue };
                for (caller, callee) in callers.iter().zip(stack.iter().skip(1)) {
                    out.entry(&caller.func_name)
                        .add(caller.location(fs), Some(canonical_fn_name(&callee.func_name)));
                }
                // A direct call to something that is no function of the binary (a PLT stub)
                // has no name to match by: a plain location.
                // A jump to another function's entry is a tail call: a call in the IR.
                let callee = match self.inst_kind(addr) {
                    Some(super::InstKind::Call) => match self.branch_target(addr) {
                        Some(t) => self.callee_name(t),
                        None => Some(UNKNOWN_INDIRECT_CALLEE.to_string()),
                    },
                    Some(super::InstKind::DirectJump) => self
                        .branch_target(addr)
                        .filter(|t| self.func_range(*t).is_none_or(|r| r.func != range.func))
                        .and_then(|t| self.callee_name(t)),
                    _ => None,
                };
                out.entry(&leaf.func_name).add(leaf.location(fs), callee.as_deref());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_callees_at_one_location_are_indirect() {
        let mut f = FunctionAnchors::default();
        let l = LineLocation::new(3, 0);
        f.add(l, None);
        f.add(l, Some("foo"));
        f.add(l, None);
        assert_eq!(f.direct_calls().collect::<Vec<_>>(), [(l, "foo")]);
        f.add(l, Some("foo"));
        assert_eq!(f.locations[&l].as_deref(), Some("foo"));
        f.add(l, Some("bar"));
        assert_eq!(f.locations[&l].as_deref(), Some(UNKNOWN_INDIRECT_CALLEE));
        assert_eq!(f.direct_calls().count(), 0);
    }
}
