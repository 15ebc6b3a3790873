//! Call anchors: every location of a function, with what is called there, as LLVM's
//! stale-profile matcher sees a function's IR (`SampleProfileMatcher::findIRAnchors`).
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
//!
//! Computed for the functions asked for only (a profile names a few hundred functions of a
//! binary with tens of thousands): a line binary's walk covers just the address ranges where one
//! of them has a frame (its own ranges and those of its inlined copies, from the DWARF address
//! map), in parallel over chunks of ranges.

use super::probes::{NodeId, ProbeType};
use super::{Binary, FuncRange, FuncSource};
use crate::addr::Vaddr;
use crate::llvm::sample_prof::UNKNOWN_INDIRECT_CALLEE;
use crate::llvm::{LineLocation, canonical_fn_name};
use hashbrown::HashMap;
use std::collections::BTreeMap;
use std::sync::Arc;

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
        add_callee(self.locations.entry(loc).or_default(), callee);
    }

    /// Adds the locations and calls of `other` (the result does not depend on the order
    /// anchors are merged or added in: a location's callee only grows, from none to one callee
    /// to unknown).
    fn merge(&mut self, other: FunctionAnchors) {
        for (loc, callee) in other.locations {
            self.add(loc, callee.as_deref());
        }
        self.checksum = self.checksum.or(other.checksum);
    }

    /// The call sites with a statically known callee, in location order.
    pub fn direct_calls(&self) -> impl Iterator<Item = (LineLocation, &str)> {
        self.locations.iter().filter_map(|(loc, c)| match c.as_deref() {
            Some(c) if c != UNKNOWN_INDIRECT_CALLEE => Some((*loc, c)),
            _ => None,
        })
    }
}

/// A location's callee once `callee` is called there too: none, then one callee, then unknown
/// when a second one differs.
fn add_callee(slot: &mut Option<String>, callee: Option<&str>) {
    match (slot.as_deref(), callee) {
        (_, None) => {}
        (None, Some(c)) => *slot = Some(c.to_string()),
        (Some(old), Some(c)) if old != c => *slot = Some(UNKNOWN_INDIRECT_CALLEE.to_string()),
        _ => {}
    }
}

/// The anchors of the wanted functions met in a walk, found by the (interned) name of a frame.
struct Collector<'w> {
    wanted: &'w (dyn Fn(&str) -> bool + Sync),
    /// Name allocation -> index into `functions`, `None` for an unwanted function.
    by_ptr: HashMap<*const u8, Option<usize>>,
    by_name: HashMap<String, usize>,
    functions: Vec<(String, FunctionAnchors)>,
}

impl<'w> Collector<'w> {
    fn new(wanted: &'w (dyn Fn(&str) -> bool + Sync)) -> Self {
        Collector { wanted, by_ptr: HashMap::new(), by_name: HashMap::new(), functions: Vec::new() }
    }

    /// The anchors of the function `name` (any spelling), if it is wanted.
    fn get(&mut self, name: &Arc<str>) -> Option<&mut FunctionAnchors> {
        // Frames share their name's allocation; it outlives the walk (the binary holds it).
        let key = Arc::as_ptr(name) as *const u8;
        let slot = match self.by_ptr.get(&key) {
            Some(&slot) => slot,
            None => {
                let canonical = canonical_fn_name(name);
                let slot = (self.wanted)(canonical).then(|| {
                    *self.by_name.entry(canonical.to_string()).or_insert_with(|| {
                        self.functions.push((canonical.to_string(), FunctionAnchors::default()));
                        self.functions.len() - 1
                    })
                });
                self.by_ptr.insert(key, slot);
                slot
            }
        };
        slot.map(|i| &mut self.functions[i].1)
    }

    fn finish(self) -> CodeAnchors {
        CodeAnchors {
            probe_based: false,
            functions: self.functions.into_iter().collect(),
            warnings: Vec::new(),
        }
    }
}

/// The anchors of every function of a binary, by canonical function name.
#[derive(Clone, Debug, Default)]
pub struct CodeAnchors {
    pub probe_based: bool,
    pub functions: BTreeMap<String, FunctionAnchors>,
    /// What was left out of `functions` because the binary is implausible.
    pub warnings: Vec<String>,
}

impl CodeAnchors {
    /// The anchors of the function named `name` (canonicalised as profiles name it).
    pub fn get(&self, name: &str) -> Option<&FunctionAnchors> {
        self.functions.get(canonical_fn_name(name))
    }
}

impl Binary {
    /// The call anchors of the functions `wanted` accepts (by canonical name; see the module
    /// documentation). Only the code where such a function has a frame is read: its own ranges
    /// and the ranges its inlined copies cover, not the whole binary.
    pub fn anchors(&self, wanted: &(dyn Fn(&str) -> bool + Sync)) -> CodeAnchors {
        match self.probes() {
            Some(_) => self.probe_anchors(wanted),
            None => self.line_anchors(wanted),
        }
    }

    fn probe_anchors(&self, wanted: &(dyn Fn(&str) -> bool + Sync)) -> CodeAnchors {
        let probes = self.probes().expect("probe binary");
        let mut out = CodeAnchors { probe_based: true, ..Default::default() };
        // GUID -> slot of its canonical name (several GUIDs may share one), for the wanted
        // functions only: names are canonicalised once, not once per probe.
        let mut slot_of_name: HashMap<&str, usize> = HashMap::new();
        // (canonical name, the callee at each probe id, whether id 0 was recorded, the ids past
        // what the vectors may still grow by): ids are dense, so a vector by id, made into the
        // anchors' map once, rather than a map insert per probe and then per id again. A probe
        // id is any u32 in a corrupt or hostile section: the vectors' total length stays within
        // twice the probes and inline nodes (a real binary's largest ids, one per IR block or
        // call, are far below), and an id past it is a location without the ids below it.
        type Slot<'n> = (&'n str, Vec<Option<String>>, bool, BTreeMap<u32, Option<String>>);
        let mut slots: Vec<Slot> = Vec::new();
        let mut room = 2 * (probes.probes().len() + probes.nodes().len()) + (1 << 16);
        let mut slot_of_guid: HashMap<u64, usize> = HashMap::new();
        for d in probes.descs().iter().filter(|d| !d.name.is_empty()) {
            let canonical = canonical_fn_name(&d.name);
            if !wanted(canonical) {
                continue;
            }
            let slot = *slot_of_name.entry(canonical).or_insert_with(|| {
                slots.push((canonical, Vec::new(), false, BTreeMap::new()));
                slots.len() - 1
            });
            slot_of_guid.insert(d.guid, slot);
        }
        let mut record = |slot: usize, id: u32, callee: Option<&str>| {
            let (_, calls, zero, far) = &mut slots[slot];
            let i = id as usize;
            if calls.len() <= i {
                let grow = i + 1 - calls.len();
                if grow > room {
                    add_callee(far.entry(id).or_default(), callee);
                    return;
                }
                room -= grow;
                calls.resize(i + 1, None);
            }
            add_callee(&mut calls[i], callee);
            *zero |= i == 0;
        };
        // A node's probes are of its function: one look-up per node rather than per probe.
        for (n, node) in probes.nodes().iter().enumerate() {
            let Some(&slot) = slot_of_guid.get(&node.guid) else { continue };
            for p in probes.node_probes(NodeId(n as u32)) {
                let callee = match p.kind {
                    ProbeType::Block => None,
                    ProbeType::IndirectCall => Some(UNKNOWN_INDIRECT_CALLEE.into()),
                    ProbeType::DirectCall => {
                        self.branch_target(p.addr).and_then(|t| self.callee_name(t))
                    }
                };
                record(slot, p.index, callee.as_deref());
            }
        }
        // Inlined calls: the call site in the parent is an anchor for the inlinee.
        for node in probes.nodes().iter().skip(1) {
            if node.parent == NodeId::ROOT || node.callsite == 0 {
                continue;
            }
            let Some(&slot) = slot_of_guid.get(&probes.node(node.parent).guid) else { continue };
            let callee = probes.func_name(node.guid);
            if callee.is_empty() {
                continue;
            }
            record(slot, node.callsite, Some(canonical_fn_name(&callee)));
        }
        // Probe ids are dense in the IR: ids no copy kept were optimised away, still locations
        // (every id from 1 up to the largest recorded; 0 only when recorded).
        for (name, calls, zero, far) in slots {
            if calls.is_empty() && far.is_empty() {
                continue;
            }
            if let Some(max) = far.keys().next_back() {
                out.warnings.push(format!(
                    "{}: pseudo probe id {max} of {name} is implausibly large for the {} probes \
                     of .pseudo_probe; only the ids recorded there are its stale-matching anchors",
                    self.path().display(),
                    probes.probes().len()
                ));
            }
            let first = usize::from(!zero);
            let locations = (calls.into_iter().enumerate().skip(first))
                .map(|(id, callee)| (LineLocation::new(id as u32, 0), callee))
                .chain(far.into_iter().map(|(id, callee)| (LineLocation::new(id, 0), callee)))
                .collect();
            out.functions.insert(name.to_string(), FunctionAnchors { locations, checksum: None });
        }
        for d in probes.descs() {
            if let Some(f) = out.functions.get_mut(canonical_fn_name(&d.name)) {
                f.checksum = Some(d.hash);
            }
        }
        out
    }

    fn line_anchors(&self, wanted: &(dyn Fn(&str) -> bool + Sync)) -> CodeAnchors {
        use rayon::prelude::*;
        let fs = self.uses_fs_discriminators();
        let spans = self.spans_with_frames_of(wanted);
        // Chunks of spans in parallel; merging is order-free (see `FunctionAnchors::merge`).
        let parts: Vec<CodeAnchors> = spans
            .par_chunks(256)
            .map(|spans| {
                let mut out = Collector::new(wanted);
                for &(range, start, end) in spans {
                    for addr in self.insts_in(start, end).take_while(|a| *a < end) {
                        self.add_line_anchors(&mut out, &range, addr, fs);
                    }
                }
                out.finish()
            })
            .collect();
        let mut out = CodeAnchors::default();
        for part in parts {
            for (name, f) in part.functions {
                match out.functions.get_mut(&name) {
                    Some(existing) => existing.merge(f),
                    None => {
                        out.functions.insert(name, f);
                    }
                }
            }
        }
        out
    }

    /// The anchors the instruction at `addr` of function range `range` gives.
    fn add_line_anchors(&self, out: &mut Collector<'_>, range: &FuncRange, addr: Vaddr, fs: bool) {
        let stack = self.frames_at(addr);
        let Some((leaf, callers)) = stack.split_last() else { return };
        for (caller, callee) in callers.iter().zip(stack.iter().skip(1)) {
            if let Some(f) = out.get(&caller.func_name) {
                f.add(caller.location(fs), Some(canonical_fn_name(&callee.func_name)));
            }
        }
        let Some(f) = out.get(&leaf.func_name) else { return };
        // A direct call to something that is no function of the binary (a PLT stub) has no
        // name to match by: a plain location.
        // A jump to another function's entry is a tail call: a call in the IR.
        let callee = match self.inst_kind(addr) {
            Some(super::InstKind::Call) => match self.branch_target(addr) {
                Some(t) => self.callee_name(t),
                None => Some(UNKNOWN_INDIRECT_CALLEE.into()),
            },
            Some(super::InstKind::DirectJump) => self
                .branch_target(addr)
                .filter(|t| self.func_range(*t).is_none_or(|r| r.func != range.func))
                .and_then(|t| self.callee_name(t)),
            _ => None,
        };
        f.add(leaf.location(fs), callee.as_deref());
    }

    /// The parts `[start, end)` of function ranges where a function `wanted` accepts may have a
    /// frame in the inline stack: DWARF address-map entries whose inline chain names it, and
    /// the ranges of symbol-table functions of that name. In function-range order.
    fn spans_with_frames_of(
        &self,
        wanted: &(dyn Fn(&str) -> bool + Sync),
    ) -> Vec<(FuncRange, Vaddr, Vaddr)> {
        let mut spans: Vec<(u64, u64)> =
            self.debug.as_ref().map(|d| d.ranges_naming(wanted)).unwrap_or_default();
        spans.extend(
            self.func_ranges()
                .iter()
                .filter(|r| {
                    let f = self.function(r.func);
                    f.source == FuncSource::Symbol && wanted(canonical_fn_name(&f.name))
                })
                .map(|r| (r.start.0, r.end.0)),
        );
        spans.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(spans.len());
        for (s, e) in spans {
            match merged.last_mut() {
                Some(last) if s <= last.1 => last.1 = last.1.max(e),
                _ => merged.push((s, e)),
            }
        }
        let mut out = Vec::new();
        for r in self.func_ranges() {
            let first = merged.partition_point(|m| m.1 <= r.start.0);
            for &(s, e) in merged[first..].iter().take_while(|m| m.0 < r.end.0) {
                out.push((*r, Vaddr(s.max(r.start.0)), Vaddr(e.min(r.end.0))));
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
