//! Binary model: what profgen knows about the profiled ELF.
//!
//! In: the `--binary` path (and optional `--debug-binary`). Out: a read-only [`Binary`] that the
//! aggregation and profile stages query: program segments (file offset ↔ vaddr), every decoded
//! instruction with its kind, functions (from DWARF and, where DWARF lacks them, the symbol
//! table), source locations with inline chains, and decoded pseudo probes.
//!
//! All addresses are binary virtual addresses ([`Vaddr`]).

pub mod disasm;
pub mod dwarf;
pub mod elf;
pub mod probes;

use crate::addr::{FileOffset, Vaddr};
use std::sync::Arc;

/// A PT_LOAD program header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    pub vaddr: Vaddr,
    pub memsz: u64,
    pub offset: FileOffset,
    pub filesz: u64,
    pub executable: bool,
}

/// What kind of control transfer an instruction is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InstKind {
    /// Not a control transfer.
    Other,
    /// Direct or indirect call.
    Call,
    Return,
    /// Direct unconditional jump.
    DirectJump,
    /// Indirect jump (jump table, tail call through a pointer).
    IndirectJump,
    ConditionalJump,
}

impl InstKind {
    /// llvm-profgen's `UncondSet`: calls, returns and direct unconditional jumps.
    pub fn is_unconditional(self) -> bool {
        matches!(self, InstKind::Call | InstKind::Return | InstKind::DirectJump)
    }
    /// llvm-profgen's `addressIsTransfer`.
    pub fn is_transfer(self) -> bool {
        self != InstKind::Other
    }
}

/// Index into [`Binary::functions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FuncId(pub u32);

/// Where a function's name and ranges came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FuncSource {
    Dwarf,
    /// The symbol table, for code DWARF does not describe (llvm-profgen-19 drops such code).
    Symbol,
}

#[derive(Clone, Debug)]
pub struct Function {
    /// Linkage name (DWARF linkage name, else DWARF name, else symbol name).
    pub name: Arc<str>,
    /// Half-open [start, end) ranges, sorted.
    pub ranges: Vec<(Vaddr, Vaddr)>,
    pub source: FuncSource,
}

/// One contiguous address range of a function (a function split into `foo` and `foo.cold` has
/// two).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FuncRange {
    pub start: Vaddr,
    /// Exclusive.
    pub end: Vaddr,
    pub func: FuncId,
    /// Whether a branch to `start` enters the function (false for `.cold` parts).
    pub is_entry: bool,
}

/// One frame of a symbolized address, as a sample profile locates it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceFrame {
    /// Linkage name of the function this frame is in.
    pub func_name: Arc<str>,
    /// `(line - decl_line) & 0xffff`.
    pub line_offset: u32,
    /// Raw DWARF discriminator; decode with [`dwarf::base_discriminator`] and
    /// [`dwarf::duplication_factor`].
    pub discriminator: u32,
}

/// The profiled binary, loaded once and shared read-only by every worker.
pub struct Binary {
    // Filled in by the binary-model work.
}

/// How to load a [`Binary`].
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Separate file with the DWARF (`--debug-binary`).
    pub debug_binary: Option<std::path::PathBuf>,
    /// Ignore pseudo probes and use DWARF lines (`--use-dwarf-correlation`).
    pub use_dwarf_correlation: bool,
}

impl Binary {
    /// Loads `path` from its bytes (the caller maps the file). Errors name the file.
    pub fn load(_path: &std::path::Path, _opts: &LoadOptions) -> Result<Binary, crate::error::Error> {
        todo!()
    }
    pub fn path(&self) -> &std::path::Path {
        todo!()
    }
    /// GNU build id (`.note.gnu.build-id`), if present.
    pub fn build_id(&self) -> Option<&[u8]> {
        todo!()
    }
    pub fn segments(&self) -> &[Segment] {
        todo!()
    }
    /// Page-aligned vaddr of the first executable PT_LOAD (llvm-profgen's `PreferredBase`).
    pub fn preferred_base(&self) -> Vaddr {
        todo!()
    }
    /// llvm-profgen's `FirstLoadableAddress` (see reference §2.3, including its quirk).
    pub fn first_loadable_address(&self) -> Vaddr {
        todo!()
    }
    /// The vaddr that file offset `off` is loaded at, through the PT_LOAD headers.
    pub fn file_offset_to_vaddr(&self, _off: FileOffset) -> Option<Vaddr> {
        todo!()
    }
    /// Whether `a` is the first byte of a decoded instruction.
    pub fn is_code(&self, _a: Vaddr) -> bool {
        todo!()
    }
    pub fn inst_kind(&self, _a: Vaddr) -> Option<InstKind> {
        todo!()
    }
    pub fn inst_size(&self, _a: Vaddr) -> Option<u64> {
        todo!()
    }
    /// Start addresses of all decoded instructions within [start, end] (inclusive), ascending.
    pub fn insts_in(&self, _start: Vaddr, _end: Vaddr) -> impl Iterator<Item = Vaddr> + '_ {
        std::iter::empty()
    }
    pub fn next_inst(&self, _a: Vaddr) -> Option<Vaddr> {
        todo!()
    }
    pub fn prev_inst(&self, _a: Vaddr) -> Option<Vaddr> {
        todo!()
    }
    /// Whether a call, return or direct unconditional jump starts in [start, end).
    pub fn range_crosses_uncond_branch(&self, _start: Vaddr, _end: Vaddr) -> bool {
        todo!()
    }
    /// The call instruction before return address `ret`, if the instruction before it is a call.
    pub fn call_addr_from_return_addr(&self, _ret: Vaddr) -> Option<Vaddr> {
        todo!()
    }
    /// llvm-profgen's prolog/epilog set (reference §3.4).
    pub fn is_prolog_or_epilog(&self, _a: Vaddr) -> bool {
        todo!()
    }
    pub fn functions(&self) -> &[Function] {
        todo!()
    }
    pub fn function(&self, id: FuncId) -> &Function {
        &self.functions()[id.0 as usize]
    }
    /// The function range containing `a`.
    pub fn func_range(&self, _a: Vaddr) -> Option<&FuncRange> {
        todo!()
    }
    /// The function range starting exactly at `a`.
    pub fn func_range_at_start(&self, _a: Vaddr) -> Option<&FuncRange> {
        todo!()
    }
    /// Inline frames of the instruction at `a`, outermost first; empty when `a` has no line info
    /// (for symbol-table-only functions: one frame with line offset 0).
    pub fn inline_stack(&self, _a: Vaddr) -> Arc<[SourceFrame]> {
        todo!()
    }
    /// Decoded pseudo probes, when the binary has `.pseudo_probe` and `.pseudo_probe_desc` and
    /// `use_dwarf_correlation` is off.
    pub fn probes(&self) -> Option<&probes::ProbeInfo> {
        todo!()
    }
    /// Whether the binary uses flow-sensitive discriminators (`__llvm_fs_discriminator__`).
    pub fn uses_fs_discriminators(&self) -> bool {
        todo!()
    }
}
