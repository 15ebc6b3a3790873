//! [`CodeView`]: the queries the stages above ask of the profiled binary's code (instruction
//! kinds and boundaries, function ranges, inline stacks). [`Binary`] answers them from the ELF
//! file; [`CodeMap`] answers them from tables, so that the unwinder and the profile builders can
//! be tested on hand-made layouts and on code maps saved as fixtures.

use super::{Binary, FuncId, FuncRange, InstKind, SourceFrame};
use crate::addr::Vaddr;
use crate::llvm::FuncName;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::sync::Arc;

/// What the unwinder and the CS profile builders need to know about the profiled binary's code.
pub trait CodeView {
    /// Whether `a` is the first byte of a decoded instruction.
    fn is_code(&self, a: Vaddr) -> bool;
    fn inst_kind(&self, a: Vaddr) -> Option<InstKind>;
    /// The instruction before `a`.
    fn prev_inst(&self, a: Vaddr) -> Option<Vaddr>;
    /// The call instruction right before return address `ret`, if that instruction is a call.
    fn call_addr_from_return_addr(&self, ret: Vaddr) -> Option<Vaddr>;
    /// Whether a call, return or direct unconditional jump starts in `[start, end)`.
    fn range_crosses_uncond_branch(&self, start: Vaddr, end: Vaddr) -> bool;
    /// llvm-profgen's prolog/epilog address set (reference §3.4).
    fn is_prolog_or_epilog(&self, a: Vaddr) -> bool;
    /// Inline frames at `a`, outermost first, raw discriminators; empty without line info.
    fn inline_stack(&self, a: Vaddr) -> Arc<[SourceFrame]>;
    fn uses_fs_discriminators(&self) -> bool;
    /// Start addresses of the instructions in `[start, end]` (inclusive), ascending.
    fn insts_in(&self, start: Vaddr, end: Vaddr) -> impl Iterator<Item = Vaddr> + '_;
    /// The function range containing `a`.
    fn func_range(&self, a: Vaddr) -> Option<FuncRange>;
    /// [`Binary::func_range_span`]: the range containing `a` and the addresses that find it.
    fn func_range_span(&self, a: Vaddr) -> Option<(FuncRange, Range<Vaddr>)>;
    /// Name of the function entered by a branch to `a`: a function range that starts exactly at
    /// `a` and is the function's entry (llvm-profgen's `getCalleeNameForAddress`, before
    /// canonicalisation).
    fn entry_func_name(&self, a: Vaddr) -> Option<FuncName>;
}

impl CodeView for Binary {
    fn is_code(&self, a: Vaddr) -> bool {
        Binary::is_code(self, a)
    }
    fn inst_kind(&self, a: Vaddr) -> Option<InstKind> {
        Binary::inst_kind(self, a)
    }
    fn prev_inst(&self, a: Vaddr) -> Option<Vaddr> {
        Binary::prev_inst(self, a)
    }
    fn call_addr_from_return_addr(&self, ret: Vaddr) -> Option<Vaddr> {
        Binary::call_addr_from_return_addr(self, ret)
    }
    fn range_crosses_uncond_branch(&self, start: Vaddr, end: Vaddr) -> bool {
        Binary::range_crosses_uncond_branch(self, start, end)
    }
    fn is_prolog_or_epilog(&self, a: Vaddr) -> bool {
        Binary::is_prolog_or_epilog(self, a)
    }
    fn inline_stack(&self, a: Vaddr) -> Arc<[SourceFrame]> {
        Binary::inline_stack(self, a)
    }
    fn uses_fs_discriminators(&self) -> bool {
        Binary::uses_fs_discriminators(self)
    }
    fn insts_in(&self, start: Vaddr, end: Vaddr) -> impl Iterator<Item = Vaddr> + '_ {
        Binary::insts_in(self, start, end)
    }
    fn func_range(&self, a: Vaddr) -> Option<FuncRange> {
        Binary::func_range(self, a).copied()
    }
    fn func_range_span(&self, a: Vaddr) -> Option<(FuncRange, Range<Vaddr>)> {
        Binary::func_range_span(self, a).map(|(r, span)| (*r, span))
    }
    fn entry_func_name(&self, a: Vaddr) -> Option<FuncName> {
        let r = self.func_range_at_start(a).filter(|r| r.is_entry)?;
        Some(self.function(r.func).name.clone())
    }
}

/// A [`CodeView`] described by tables instead of decoded from an ELF file: the hand-made
/// layouts of the unit tests and the code maps the oracle tests load from fixtures. Behaves like
/// [`Binary`] on the queries (external return addresses map to themselves, return addresses are
/// not required to be instruction starts).
#[derive(Clone, Debug, Default)]
pub struct CodeMap {
    pub insts: BTreeMap<u64, InstKind>,
    /// (start, end, name), sorted by start, not overlapping.
    pub funcs: Vec<(u64, u64, String)>,
    /// Inline frames of an address, outermost first, replacing the default one-frame stack.
    pub inline: BTreeMap<u64, Vec<SourceFrame>>,
    /// Raw discriminators of addresses with the default stack (0 when absent).
    pub discriminators: BTreeMap<u64, u32>,
    pub prolog: BTreeSet<u64>,
}

/// A source frame with a raw discriminator.
pub fn frame(func: &str, line: u32, discr: u32) -> SourceFrame {
    SourceFrame { func_name: func.into(), line_offset: line, discriminator: discr }
}

impl CodeMap {
    /// Functions given as (name, start, instruction kinds), of 4-byte instructions; an address
    /// without `inline` frames has one frame with line offset `(address - start) / 4`.
    pub fn from_layout(funcs: &[(&str, u64, &[InstKind])]) -> CodeMap {
        let mut m = CodeMap::default();
        for &(name, start, kinds) in funcs {
            for (i, k) in kinds.iter().enumerate() {
                m.insts.insert(start + 4 * i as u64, *k);
            }
            m.funcs.push((start, start + 4 * kinds.len() as u64, name.to_string()));
        }
        m
    }

    fn func_index(&self, a: u64) -> Option<usize> {
        let i = self.funcs.partition_point(|f| f.0 <= a).checked_sub(1)?;
        (a < self.funcs[i].1).then_some(i)
    }
}

impl CodeView for CodeMap {
    fn is_code(&self, a: Vaddr) -> bool {
        self.insts.contains_key(&a.0)
    }
    fn inst_kind(&self, a: Vaddr) -> Option<InstKind> {
        self.insts.get(&a.0).copied()
    }
    fn prev_inst(&self, a: Vaddr) -> Option<Vaddr> {
        self.insts.range(..a.0).next_back().map(|(&p, _)| Vaddr(p))
    }
    fn call_addr_from_return_addr(&self, ret: Vaddr) -> Option<Vaddr> {
        if ret.is_external() {
            return Some(ret);
        }
        self.prev_inst(ret).filter(|&p| self.inst_kind(p) == Some(InstKind::Call))
    }
    fn range_crosses_uncond_branch(&self, start: Vaddr, end: Vaddr) -> bool {
        start < end && self.insts.range(start.0..end.0).any(|(_, k)| k.is_unconditional())
    }
    fn is_prolog_or_epilog(&self, a: Vaddr) -> bool {
        self.prolog.contains(&a.0)
    }
    fn inline_stack(&self, a: Vaddr) -> Arc<[SourceFrame]> {
        if let Some(v) = self.inline.get(&a.0) {
            return v.clone().into();
        }
        match self.func_index(a.0) {
            Some(i) if self.is_code(a) => {
                let (start, _, name) = &self.funcs[i];
                let d = self.discriminators.get(&a.0).copied().unwrap_or(0);
                vec![frame(name, ((a.0 - start) / 4) as u32, d)].into()
            }
            _ => Vec::new().into(),
        }
    }
    fn uses_fs_discriminators(&self) -> bool {
        false
    }
    fn insts_in(&self, start: Vaddr, end: Vaddr) -> impl Iterator<Item = Vaddr> + '_ {
        self.insts.range(start.0..=end.0).map(|(&a, _)| Vaddr(a))
    }
    fn func_range(&self, a: Vaddr) -> Option<FuncRange> {
        let i = self.func_index(a.0)?;
        let (s, e, _) = self.funcs[i];
        Some(FuncRange { start: Vaddr(s), end: Vaddr(e), func: FuncId(i as u32), is_entry: true })
    }
    fn func_range_span(&self, a: Vaddr) -> Option<(FuncRange, Range<Vaddr>)> {
        // `funcs` do not overlap: every address of a range finds it.
        let r = CodeView::func_range(self, a)?;
        Some((r, r.start..r.end))
    }
    fn entry_func_name(&self, a: Vaddr) -> Option<FuncName> {
        self.funcs.iter().find(|f| f.0 == a.0).map(|f| f.2.as_str().into())
    }
}
