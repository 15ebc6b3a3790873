//! Binary model: what profgen knows about the profiled ELF.
//!
//! In: the `--binary` path (and optional `--debug-binary`). Out: a read-only [`Binary`] that the
//! aggregation and profile stages query: program segments (file offset ↔ vaddr), every decoded
//! instruction with its kind, functions (from DWARF and, where DWARF lacks them, the symbol
//! table), source locations with inline chains, and decoded pseudo probes.
//!
//! All addresses are binary virtual addresses ([`Vaddr`]).
//!
//! Loading ([`Binary::load`]) decodes every instruction and reads every subprogram and
//! inlined-subroutine DIE up front (in parallel); line tables are parsed per unit on first use
//! and inline stacks are cached per function range, so [`Binary::inline_stack`] is cheap to call
//! from many threads. Lookups are binary searches over sorted vectors.
//!
//! Deliberate difference from llvm-profgen-19: code that no DWARF subprogram covers gets a
//! [`FuncSource::Symbol`] function from its `STT_FUNC` symbol, whose inline stack is one frame
//! `(symbol name, 0, 0)`. Split DWARF is read from the `.dwp` package (`--dwp`, else
//! `BINARY.dwp` beside the binary or beside the file a symlinked binary points to), then from
//! `.dwo` files (skeleton comp_dir, the name as given, or next to the binary's real file); a
//! warning names the first unit it cannot read.

pub mod anchors;
pub mod code_view;
pub mod disasm;
pub mod dwarf;
pub mod elf;
pub mod probes;
pub mod shape;
pub mod store;
mod x86_length;

pub use code_view::CodeView;
pub use disasm::DumpOptions;

use crate::addr::{FileOffset, Vaddr};
use crate::error::Error;
use crate::llvm::discriminator::base_discriminator;
use crate::llvm::{FuncName, LineLocation};
use hashbrown::HashMap;
use object::Object;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

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
    pub name: FuncName,
    /// Half-open [start, end) ranges, sorted.
    pub ranges: Vec<(Vaddr, Vaddr)>,
    pub source: FuncSource,
}

/// A `.symtab` function symbol of executable code: what a linker's symbol ordering file names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionSymbol {
    pub name: Arc<str>,
    pub addr: Vaddr,
    pub size: u64,
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

/// What an instruction's inline stack depends on but for the leaf frame's location
/// ([`Binary::inline_site`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InlineSite {
    /// The innermost DWARF subroutine DIE covering the instruction.
    Dwarf(u32),
    /// A symbol-table function no DWARF covers: one frame.
    Symbol(FuncId),
    /// No frames.
    None,
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

impl SourceFrame {
    /// The frame's location as sample profiles key it: line offset and base discriminator.
    pub fn location(&self, fs_discriminators: bool) -> LineLocation {
        LineLocation::new(
            self.line_offset,
            base_discriminator(self.discriminator, fs_discriminators),
        )
    }
}

/// Inline stacks of one function range's instructions, in address order.
type RangeStacks = Box<[Arc<[SourceFrame]>]>;

/// The profiled binary, loaded once and shared read-only by every worker.
pub struct Binary {
    path: PathBuf,
    elf: elf::ElfInfo,
    code: disasm::Code,
    functions: Vec<Function>,
    function_symbols: Vec<FunctionSymbol>,
    /// Sorted by start, disjoint starts.
    func_ranges: Vec<FuncRange>,
    /// Per function range, the inline stacks of its instructions, computed on first use.
    range_frames: Vec<OnceLock<RangeStacks>>,
    debug: Option<dwarf::DebugInfo>,
    probes: Option<probes::ProbeInfo>,
    fs_discriminators: bool,
    warnings: Vec<String>,
    empty_stack: Arc<[SourceFrame]>,
}

/// How to load a [`Binary`].
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// Separate file with the DWARF (`--debug-binary`); its pseudo probes are used too when the
    /// binary has none (stripped of them).
    pub debug_binary: Option<PathBuf>,
    /// Split-DWARF package (`--dwp`); by default `<DWARF file>.dwp` when it exists.
    pub dwp: Option<PathBuf>,
    /// Ignore pseudo probes and use DWARF lines (`--use-dwarf-correlation`).
    pub use_dwarf_correlation: bool,
    /// Functions from the symbol table for code no DWARF function covers
    /// (`--load-function-from-symbol`, default on).
    pub load_function_from_symbol: bool,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            debug_binary: None,
            dwp: None,
            use_dwarf_correlation: false,
            load_function_from_symbol: true,
        }
    }
}

/// A build id as perf and `file` print it.
pub fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// `id` without the zero bytes perf pads build ids with (to 20 bytes).
pub fn unpadded_build_id(id: &[u8]) -> &[u8] {
    let n = id.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
    &id[..n]
}

pub(crate) fn map_file(path: &Path) -> Result<memmap2::Mmap, Error> {
    let io = |source| Error::Io { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    // SAFETY: the file is only read; a concurrent truncation by another process is outside what
    // profgen can defend against (as for every mmap-based reader).
    unsafe { memmap2::Mmap::map(&file) }.map_err(io)
}

impl Binary {
    /// Loads the ELF at `path` (and the DWARF of `opts.debug_binary`). Errors name the file.
    pub fn load(path: &Path, opts: &LoadOptions) -> Result<Binary, Error> {
        Self::from_bytes(&map_file(path)?, path, opts)
    }

    /// Loads the ELF image `data`; `path` names it in errors and warnings (and is what
    /// [`path`](Self::path) returns). `opts.debug_binary` is still read from its path.
    pub fn from_bytes(data: &[u8], path: &Path, opts: &LoadOptions) -> Result<Binary, Error> {
        let bad = |what: String| Error::BadFile { path: path.to_path_buf(), what };
        let obj = elf::parse(data).map_err(bad)?;
        let elf_info = elf::info(&obj).map_err(bad)?;
        let symbols = elf::symbols(&obj);
        let function_symbols = symbols
            .iter()
            .filter(|s| {
                s.is_func
                    && s.size > 0
                    && obj.section_by_index(s.section).is_ok_and(|sec| elf::is_exec_section(&sec))
            })
            .map(|s| FunctionSymbol { name: Arc::from(s.name), addr: Vaddr(s.addr), size: s.size })
            .collect();
        let mut sections = disasm::text_sections(&obj, &symbols).map_err(bad)?;
        let overlapping = disasm::skip_overlapping(&mut sections);
        let base = elf_info.preferred_base.0;
        let dbg_data = opts.debug_binary.as_deref().map(map_file).transpose()?;
        let dbg_obj = match (&dbg_data, &opts.debug_binary) {
            (Some(data), Some(dbg_path)) => Some(
                elf::parse(data).map_err(|what| Error::BadFile { path: dbg_path.clone(), what })?,
            ),
            _ => None,
        };
        let dwarf_path = opts.debug_binary.as_deref().unwrap_or(path);
        // A symlinked binary (a binary store, a `.build-id` tree) has its split DWARF beside the
        // file it points to, not beside the link.
        let real_dwarf_path = std::fs::canonicalize(dwarf_path).ok();
        let dwarf_paths = [Some(dwarf_path), real_dwarf_path.as_deref()];
        // LLVM's default package is `<DWARF file>.dwp`, used when it exists.
        let default_dwp = || {
            dwarf_paths
                .iter()
                .flatten()
                .map(|p| PathBuf::from(format!("{}.dwp", p.display())))
                .find(|dwp| dwp.is_file())
        };
        let dwp_path = opts.dwp.clone().or_else(default_dwp);
        let dwp_data = dwp_path.as_deref().map(map_file).transpose()?;
        let load_probes = || match (opts.use_dwarf_correlation, &dbg_obj, &opts.debug_binary) {
            (true, ..) => Ok(None),
            // A binary stripped of its probes: upstream reads them from --debug-binary.
            (false, Some(dbg), Some(dbg_path)) if !probes::ProbeInfo::present(&obj) => {
                probes::ProbeInfo::load(dbg)
                    .map_err(|what| Error::BadFile { path: dbg_path.clone(), what })
            }
            (false, ..) => probes::ProbeInfo::load(&obj).map_err(bad),
        };
        // Disassembly, DWARF and probes are independent; the first two are the bulk of the
        // loading time. The DWARF, on a binary of one large unit a single task (SQLite's), is
        // what a second worker takes first, with the functions made of it; this one decodes the
        // probes (one task too), then the disassembly's chunks, which the other takes its share
        // of once done.
        let symbol_functions = if opts.load_function_from_symbol { &symbols[..] } else { &[] };
        let ((probes, code), (debug, functions, func_ranges, no_entry)) = rayon::join(
            || rayon::join(load_probes, || disasm::decode(&sections)),
            || {
                let real = real_dwarf_path.as_deref().unwrap_or(dwarf_path);
                let dir = real.parent().unwrap_or(Path::new("."));
                let dwp = dwp_data.as_deref();
                let debug =
                    dwarf::DebugInfo::load(dbg_obj.as_ref().unwrap_or(&obj), dwp, base, dir);
                let (functions, mut func_ranges) =
                    build_functions(&debug.subprograms, symbol_functions, &sections, base);
                mark_entries(&functions, &mut func_ranges, &sections);
                let no_entry = no_entry_warning(&debug.subprograms, &functions, &func_ranges);
                (debug, functions, func_ranges, no_entry)
            },
        );
        let mut code = code.map_err(bad)?;
        let probes = probes?;
        let mut warnings: Vec<String> =
            debug.warnings.iter().map(|w| format!("{}: {w}", dwarf_path.display())).collect();
        warnings.extend(no_entry);
        if let Some(first) = overlapping.first() {
            warnings.push(format!(
                "{}: executable sections overlapping one at a lower address are not \
                 disassembled: {}, the first {first}",
                path.display(),
                overlapping.len()
            ));
        }
        code.compute_prolog_epilog(func_ranges.iter().map(|r| r.start.0));

        if symbols.is_empty() && debug.is_empty() {
            warnings.push(format!(
                "{}: no symbol table and no DWARF (a stripped binary?): profgen cannot tell its \
                 functions apart, so no sample can be attributed; give the unstripped binary, or \
                 its debug file with --debug-binary",
                dwarf_path.display()
            ));
        } else if debug.is_empty()
            && debug.warnings.is_empty()
            && probes.is_none()
            && !functions.is_empty()
        {
            // DWARF that is there but unusable has its own warning above.
            warnings.push(format!(
                "{}: no DWARF line tables (built without -g, or stripped with --strip-debug) and \
                 no pseudo probes: every count of a function falls on its line offset 0; give \
                 the unstripped binary or --debug-binary, or build with -g",
                dwarf_path.display()
            ));
        }
        let fs_discriminators = symbols.iter().any(|s| {
            s.name == "__llvm_fs_discriminator__"
                && obj.section_by_index(s.section).is_ok_and(|sec| !elf::is_exec_section(&sec))
        });
        Ok(Binary {
            path: path.to_path_buf(),
            function_symbols,
            elf: elf_info,
            code,
            range_frames: (0..func_ranges.len()).map(|_| OnceLock::new()).collect(),
            functions,
            func_ranges,
            debug: (!debug.is_empty()).then_some(debug),
            probes,
            fs_discriminators,
            warnings,
            empty_stack: Arc::from(Vec::new()),
        })
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Whether the binary is a shared library (not an executable, PIE or not).
    pub fn is_shared_library(&self) -> bool {
        self.elf.shared_library
    }
    /// GNU build id (`.note.gnu.build-id`), if present.
    pub fn build_id(&self) -> Option<&[u8]> {
        self.elf.build_id.as_deref()
    }
    pub fn segments(&self) -> &[Segment] {
        &self.elf.segments
    }
    /// Page-aligned vaddr of the first executable PT_LOAD (llvm-profgen's `PreferredBase`).
    pub fn preferred_base(&self) -> Vaddr {
        self.elf.preferred_base
    }
    /// llvm-profgen's `FirstLoadableAddress` (see reference §2.3, including its quirk).
    pub fn first_loadable_address(&self) -> Vaddr {
        self.elf.first_loadable_address
    }
    /// Page-aligned file offsets of the executable PT_LOADs (llvm-profgen's
    /// `TextSegmentOffsets`), in program-header order.
    pub fn text_segment_offsets(&self) -> &[FileOffset] {
        &self.elf.text_segment_offsets
    }
    /// The vaddr that file offset `off` is loaded at, through the PT_LOAD headers (an offset in
    /// the page before a segment's unaligned `p_offset` counts as that segment's).
    pub fn file_offset_to_vaddr(&self, off: FileOffset) -> Option<Vaddr> {
        elf::file_offset_to_vaddr(&self.elf.segments, off)
    }
    /// Problems found while loading that left part of the binary unusable (for the driver to
    /// print as warnings).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }
    /// Number of bytes in code that did not decode.
    pub fn invalid_inst_bytes(&self) -> u64 {
        self.code.invalid_bytes
    }
    /// Whether `a` is the first byte of a decoded instruction.
    pub fn is_code(&self, a: Vaddr) -> bool {
        self.code.is_inst_start(a.0)
    }
    pub fn inst_kind(&self, a: Vaddr) -> Option<InstKind> {
        self.code.index_of(a.0).map(|i| self.code.kinds[i])
    }
    pub fn inst_size(&self, a: Vaddr) -> Option<u64> {
        self.code.index_of(a.0).map(|i| u64::from(self.code.sizes[i]))
    }
    /// Start addresses of all decoded instructions within [start, end] (inclusive), ascending.
    pub fn insts_in(&self, start: Vaddr, end: Vaddr) -> impl Iterator<Item = Vaddr> + '_ {
        let first = self.code.lower_bound(start.0);
        self.code.addrs[first..].iter().take_while(move |&&a| a <= end.0).map(|&a| Vaddr(a))
    }
    /// An address range over the code for which a bitmap of a bit a byte is no larger than the
    /// binary's own instruction index (empty where code is spread thinly).
    pub fn dense_code_extent(&self) -> Range<Vaddr> {
        let r = self.code.dense_extent();
        Vaddr(r.start)..Vaddr(r.end)
    }
    /// How many decoded instructions start within [start, end] (inclusive).
    pub fn inst_count(&self, start: Vaddr, end: Vaddr) -> u64 {
        self.inst_indices(start, end).len() as u64
    }
    /// The indices (in the decoded code) of the instructions starting within [start, end]
    /// (inclusive).
    fn inst_indices(&self, start: Vaddr, end: Vaddr) -> Range<usize> {
        if start > end {
            return 0..0;
        }
        let first = self.code.lower_bound(start.0);
        first..self.code.lower_bound(end.0.saturating_add(1)).max(first)
    }
    /// The first instruction after `a`.
    pub fn next_inst(&self, a: Vaddr) -> Option<Vaddr> {
        let i = self.code.lower_bound(a.0.checked_add(1)?);
        self.code.addrs.get(i).map(|&x| Vaddr(x))
    }
    /// The last instruction before `a`.
    pub fn prev_inst(&self, a: Vaddr) -> Option<Vaddr> {
        let i = self.code.lower_bound(a.0).checked_sub(1)?;
        Some(Vaddr(self.code.addrs[i]))
    }
    /// Whether a call, return or direct unconditional jump starts in [start, end).
    pub fn range_crosses_uncond_branch(&self, start: Vaddr, end: Vaddr) -> bool {
        // More of them start before `end` than before `start`.
        let rank = |a: Vaddr| self.code.uncond_rank.get(self.code.lower_bound(a.0)).copied();
        start < end && rank(end) > rank(start)
    }
    /// The call instruction before return address `ret`, if the instruction before it is a call
    /// ([`Vaddr::EXTERNAL`] maps to itself, as in llvm-profgen).
    pub fn call_addr_from_return_addr(&self, ret: Vaddr) -> Option<Vaddr> {
        if ret.is_external() {
            return Some(ret);
        }
        let prev = self.code.lower_bound(ret.0).checked_sub(1)?;
        (self.code.kinds[prev] == InstKind::Call).then_some(Vaddr(self.code.addrs[prev]))
    }
    /// Target of the direct call, direct jump or conditional jump at `a`.
    pub fn branch_target(&self, a: Vaddr) -> Option<Vaddr> {
        self.code.branch_target(a.0).map(Vaddr)
    }
    /// The function a branch to `target` calls: the canonical name of the function whose entry
    /// `target` is (`getCalleeNameForAddress`); `None` for branches into the middle of code or
    /// into a `.cold` part.
    pub fn callee_name(&self, target: Vaddr) -> Option<FuncName> {
        let range = self.func_range_at_start(target).filter(|r| r.is_entry)?;
        Some(FuncName::canonical(&self.function(range.func).name))
    }
    /// llvm-profgen's prolog/epilog set (reference §3.4).
    pub fn is_prolog_or_epilog(&self, a: Vaddr) -> bool {
        self.code.prolog_epilog.binary_search(&a.0).is_ok()
    }
    pub fn functions(&self) -> &[Function] {
        &self.functions
    }
    /// The sized function symbols of executable sections, in `.symtab` order.
    pub fn function_symbols(&self) -> &[FunctionSymbol] {
        &self.function_symbols
    }
    pub fn function(&self, id: FuncId) -> &Function {
        &self.functions()[id.0 as usize]
    }
    /// All function ranges, sorted by start.
    pub fn func_ranges(&self) -> &[FuncRange] {
        &self.func_ranges
    }
    fn func_range_index(&self, a: Vaddr) -> Option<usize> {
        range_index(&self.func_ranges, a)
    }
    /// The function range containing `a`.
    pub fn func_range(&self, a: Vaddr) -> Option<&FuncRange> {
        self.func_range_index(a).map(|i| &self.func_ranges[i])
    }
    /// [`Self::func_range`] of `a`, with the addresses that find the same range: its own, cut
    /// where a range starting inside it begins (ranges from malformed DWARF may overlap, and the
    /// last one starting at or before an address answers). A caller looking up neighbouring
    /// addresses skips the search for those.
    pub fn func_range_span(&self, a: Vaddr) -> Option<(&FuncRange, Range<Vaddr>)> {
        let i = self.func_range_index(a)?;
        Some((&self.func_ranges[i], answer_span(&self.func_ranges, i)))
    }
    /// Every function range with the addresses for which [`Self::func_range`] finds it (see
    /// [`Self::func_range_span`]), in address order.
    pub fn func_range_spans(&self) -> impl Iterator<Item = (&FuncRange, Range<Vaddr>)> {
        let ranges = &self.func_ranges;
        (0..ranges.len()).map(|i| (&ranges[i], answer_span(ranges, i)))
    }
    /// The function range starting exactly at `a`.
    pub fn func_range_at_start(&self, a: Vaddr) -> Option<&FuncRange> {
        let i = self.func_ranges.binary_search_by_key(&a, |r| r.start).ok()?;
        Some(&self.func_ranges[i])
    }
    /// Inline frames of the instruction at `a`, outermost first; empty when `a` has no line info
    /// (for symbol-table-only functions: one frame with line offset 0). Cached per function
    /// range; cheap to call from many threads.
    pub fn inline_stack(&self, a: Vaddr) -> Arc<[SourceFrame]> {
        if let Some(ri) = self.func_range_index(a)
            && let Some(idx) = self.code.index_of(a.0)
        {
            let range = &self.func_ranges[ri];
            let first = self.code.lower_bound(range.start.0);
            let stacks = self.range_frames[ri].get_or_init(|| {
                let end = self.code.lower_bound(range.end.0);
                let mut out: Vec<Arc<[SourceFrame]>> = Vec::with_capacity(end - first);
                for &addr in &self.code.addrs[first..end] {
                    let frames = self.compute_inline_stack(Vaddr(addr));
                    // Neighbouring instructions mostly share a stack: share the allocation.
                    match out.last() {
                        Some(prev) if **prev == *frames => out.push(prev.clone()),
                        _ => out.push(Arc::from(frames)),
                    }
                }
                out.into_boxed_slice()
            });
            return stacks[idx - first].clone();
        }
        let frames = self.compute_inline_stack(a);
        if frames.is_empty() { self.empty_stack.clone() } else { Arc::from(frames) }
    }
    /// [`inline_stack`](Self::inline_stack) without filling the cache: from the cache when the
    /// function range's stacks are there, else computed for `a` alone (for walks the cache would
    /// outlive: over a few instructions of many functions, such as the inlined copies of one
    /// function).
    pub fn frames_at(&self, a: Vaddr) -> std::borrow::Cow<'_, [SourceFrame]> {
        if let Some(ri) = self.func_range_index(a)
            && let Some(stacks) = self.range_frames[ri].get()
            && let Some(idx) = self.code.index_of(a.0)
        {
            let first = self.code.lower_bound(self.func_ranges[ri].start.0);
            return std::borrow::Cow::Borrowed(&stacks[idx - first]);
        }
        std::borrow::Cow::Owned(self.compute_inline_stack(a))
    }
    fn compute_inline_stack(&self, a: Vaddr) -> Vec<SourceFrame> {
        self.site_frames_at(self.inline_site(a), Some(a))
    }
    /// What the inline stack at `a` depends on but for its leaf frame's location: one binary
    /// search, for walks over many instructions that need every frame but that location
    /// ([`site_frames`](Self::site_frames)).
    pub fn inline_site(&self, a: Vaddr) -> InlineSite {
        match self.debug.as_ref().and_then(|d| d.node_at(a.0)) {
            Some(node) => InlineSite::Dwarf(node),
            None => self.site_without_node(a),
        }
    }

    /// [`inline_site`](Self::inline_site) and size of every decoded instruction starting within
    /// [start, end] (inclusive), ascending: the DWARF address map searched once, then walked.
    pub fn inst_sites_in(
        &self,
        start: Vaddr,
        end: Vaddr,
    ) -> impl Iterator<Item = (InlineSite, u8)> + '_ {
        let insts = self.inst_indices(start, end);
        let addrs = self.code.addrs[insts.clone()].iter().copied();
        let mut nodes = self.debug.as_ref().map(|d| d.nodes_at(addrs));
        insts.map(move |i| {
            let site = match nodes.as_mut().and_then(|n| n.next().flatten()) {
                Some(node) => InlineSite::Dwarf(node),
                None => self.site_without_node(Vaddr(self.code.addrs[i])),
            };
            (site, self.code.sizes[i])
        })
    }

    /// The site of an address no DWARF subroutine covers.
    fn site_without_node(&self, a: Vaddr) -> InlineSite {
        match self.func_range(a) {
            Some(r) if self.function(r.func).source == FuncSource::Symbol => {
                InlineSite::Symbol(r.func)
            }
            _ => InlineSite::None,
        }
    }
    /// The inline stack of the instructions at `site`, outermost first, the leaf frame's location
    /// left out (DWARF frames at line 0, no line-table lookup): equal to
    /// [`inline_stack`](Self::inline_stack) of each of them but for that location.
    pub fn site_frames(&self, site: InlineSite) -> Vec<SourceFrame> {
        self.site_frames_at(site, None)
    }
    fn site_frames_at(&self, site: InlineSite, leaf_at: Option<Vaddr>) -> Vec<SourceFrame> {
        match (site, &self.debug) {
            (InlineSite::Dwarf(node), Some(debug)) => debug.node_frames(node, leaf_at.map(|a| a.0)),
            (InlineSite::Symbol(f), _) => vec![SourceFrame {
                func_name: self.function(f).name.shared_text().clone(),
                line_offset: 0,
                discriminator: 0,
            }],
            _ => Vec::new(),
        }
    }
    /// Decoded pseudo probes, when the binary has `.pseudo_probe` and `.pseudo_probe_desc` and
    /// `use_dwarf_correlation` is off.
    pub fn probes(&self) -> Option<&probes::ProbeInfo> {
        self.probes.as_ref()
    }
    /// Whether the binary uses flow-sensitive discriminators (`__llvm_fs_discriminator__`).
    pub fn uses_fs_discriminators(&self) -> bool {
        self.fs_discriminators
    }
}

/// The range of `ranges` (sorted by start) that holds `a`: the last one starting at or before it,
/// if it reaches `a`.
fn range_index(ranges: &[FuncRange], a: Vaddr) -> Option<usize> {
    let i = ranges.partition_point(|r| r.start <= a).checked_sub(1)?;
    (a < ranges[i].end).then_some(i)
}

/// The addresses for which [`range_index`] finds range `i`.
fn answer_span(ranges: &[FuncRange], i: usize) -> Range<Vaddr> {
    let r = &ranges[i];
    r.start..ranges.get(i + 1).map_or(r.end, |next| next.start.min(r.end))
}

/// Functions from DWARF subprograms (llvm-profgen-19's rules, reference §3.1) plus symbol-table
/// functions (`STT_FUNC`, size > 0) for code no DWARF function covers.
fn build_functions(
    subprograms: &[dwarf::Subprogram],
    symbols: &[elf::Symbol<'_>],
    sections: &[disasm::TextSection<'_>],
    base: u64,
) -> (Vec<Function>, Vec<FuncRange>) {
    let mut b = FunctionsBuilder::default();
    for sp in subprograms {
        for &(start, end) in &sp.ranges {
            if end > start && start >= base {
                b.add(&sp.name, FuncSource::Dwarf, start, end);
            }
        }
    }
    let mut dwarf_ranges: Vec<(u64, u64)> = b.ranges.iter().map(|r| (r.start.0, r.end.0)).collect();
    dwarf_ranges.sort_unstable();
    let covered = |a: u64| {
        let i = dwarf_ranges.partition_point(|r| r.0 <= a);
        i > 0 && a < dwarf_ranges[i - 1].1
    };
    let decoded: Vec<_> = sections
        .iter()
        .filter(|s| !s.skipped)
        .map(|s| s.symbols.first().map(|f| f.section))
        .collect();
    let mut func_syms: Vec<&elf::Symbol<'_>> = symbols
        .iter()
        .filter(|s| s.is_func && s.size > 0 && s.addr >= base && decoded.contains(&Some(s.section)))
        .collect();
    func_syms.sort_by(|a, b| (a.addr, a.name).cmp(&(b.addr, b.name)));
    let mut last_end = 0;
    for sym in func_syms {
        if sym.addr < last_end || covered(sym.addr) {
            continue;
        }
        let next_dwarf = dwarf_ranges
            .get(dwarf_ranges.partition_point(|r| r.0 <= sym.addr))
            .map_or(u64::MAX, |r| r.0);
        let end = sym.addr.saturating_add(sym.size).min(next_dwarf);
        last_end = end;
        b.add(&Arc::from(sym.name), FuncSource::Symbol, sym.addr, end);
    }
    for f in &mut b.functions {
        f.ranges.sort();
    }
    b.ranges.sort_by_key(|r| r.start);
    (b.functions, b.ranges)
}

#[derive(Default)]
struct FunctionsBuilder {
    functions: Vec<Function>,
    /// Same-named functions of one source merge (llvm-profgen's `BinaryFunctions[name]`).
    by_name: HashMap<(Arc<str>, bool), FuncId>,
    starts: HashMap<u64, ()>,
    ranges: Vec<FuncRange>,
}

impl FunctionsBuilder {
    fn add(&mut self, name: &Arc<str>, source: FuncSource, start: u64, end: u64) {
        let functions = &mut self.functions;
        let id = *self.by_name.entry((name.clone(), source == FuncSource::Symbol)).or_insert_with(
            || {
                functions.push(Function { name: name.clone().into(), ranges: Vec::new(), source });
                FuncId((functions.len() - 1) as u32)
            },
        );
        functions[id.0 as usize].ranges.push((Vaddr(start), Vaddr(end)));
        // First DIE wins on a duplicate start.
        if self.starts.insert(start, ()).is_none() {
            self.ranges.push(FuncRange {
                start: Vaddr(start),
                end: Vaddr(end),
                func: id,
                is_entry: false,
            });
        }
    }
}

/// llvm-profgen-19's `warnNoFuncEntry` summary over the DWARF functions (the total counts every
/// subprogram name, also those whose ranges were all dropped).
fn no_entry_warning(
    subprograms: &[dwarf::Subprogram],
    functions: &[Function],
    ranges: &[FuncRange],
) -> Option<String> {
    let total = subprograms.iter().map(|s| &s.name).collect::<hashbrown::HashSet<_>>().len();
    let at_start = |a: Vaddr| {
        let i = ranges.binary_search_by_key(&a, |r| r.start).ok()?;
        Some(&ranges[i])
    };
    let missing = functions
        .iter()
        .filter(|f| f.source == FuncSource::Dwarf)
        .filter(|f| !f.ranges.iter().any(|r| at_start(r.0).is_some_and(|fr| fr.is_entry)))
        .count();
    (missing > 0).then(|| {
        format!(
            "{:.2}%({missing}/{total}) of functions failed to determine function entry due to \
             inconsistent name from symbol table and dwarf info.",
            missing as f64 * 100.0 / total as f64
        )
    })
}

/// llvm-profgen's `setIsFuncEntry`, run for every symbol of every decoded text section: the
/// range containing the symbol is an entry if its function has one range, or if the symbol's
/// canonical name is the function's name.
fn mark_entries(
    functions: &[Function],
    ranges: &mut [FuncRange],
    sections: &[disasm::TextSection<'_>],
) {
    for sym in sections.iter().filter(|s| !s.skipped).flat_map(|s| &s.symbols) {
        let i = ranges.partition_point(|r| r.start.0 <= sym.addr);
        let Some(r) = i.checked_sub(1).map(|i| &mut ranges[i]) else {
            continue;
        };
        if sym.addr >= r.end.0 {
            continue;
        }
        let func = &functions[r.func.0 as usize];
        if func.ranges.len() == 1
            || (!r.is_entry && *func.name == *crate::llvm::canonical_fn_name(sym.name))
        {
            r.is_entry = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn func_range_spans_stop_where_an_overlapping_range_begins() {
        let r = |start, end, f| FuncRange {
            start: Vaddr(start),
            end: Vaddr(end),
            func: FuncId(f),
            is_entry: true,
        };
        // A range nested in another (malformed DWARF), one after a gap, one touching it.
        let ranges =
            [r(0x100, 0x200, 0), r(0x150, 0x180, 1), r(0x300, 0x310, 2), r(0x310, 0x320, 3)];
        let spans: Vec<_> = (0..ranges.len()).map(|i| answer_span(&ranges, i)).collect();
        assert_eq!(spans[0], Vaddr(0x100)..Vaddr(0x150));
        assert_eq!(spans[1], Vaddr(0x150)..Vaddr(0x180));
        assert_eq!(spans[2], Vaddr(0x300)..Vaddr(0x310));
        assert_eq!(spans[3], Vaddr(0x310)..Vaddr(0x320));
        for a in (0xf0..0x330).map(Vaddr) {
            let by_span = spans.iter().position(|s| s.contains(&a));
            assert_eq!(range_index(&ranges, a), by_span, "{a:?}");
        }
    }

    #[test]
    fn no_entry_warning_counts_dwarf_functions_without_entry_range() {
        let name = |s: &str| Arc::<str>::from(s);
        let subprograms = [
            dwarf::Subprogram { name: name("foo"), ranges: vec![(0x10, 0x20), (0x40, 0x50)] },
            dwarf::Subprogram { name: name("bar"), ranges: vec![(0x20, 0x30)] },
            // All ranges dropped (below the base), still counted by llvm-profgen.
            dwarf::Subprogram { name: name("gone"), ranges: vec![(0x0, 0x8)] },
        ];
        let func = |n: &str, ranges: &[(u64, u64)]| Function {
            name: name(n).into(),
            ranges: ranges.iter().map(|&(s, e)| (Vaddr(s), Vaddr(e))).collect(),
            source: FuncSource::Dwarf,
        };
        let functions = [func("foo", &[(0x10, 0x20), (0x40, 0x50)]), func("bar", &[(0x20, 0x30)])];
        let range = |s: u64, e: u64, f: u32, is_entry: bool| FuncRange {
            start: Vaddr(s),
            end: Vaddr(e),
            func: FuncId(f),
            is_entry,
        };
        let mut ranges = vec![
            range(0x10, 0x20, 0, false),
            range(0x20, 0x30, 1, true),
            range(0x40, 0x50, 0, false),
        ];
        assert_eq!(
            no_entry_warning(&subprograms, &functions, &ranges).as_deref(),
            Some(
                "33.33%(1/3) of functions failed to determine function entry due to inconsistent \
                 name from symbol table and dwarf info."
            )
        );
        ranges[2].is_entry = true;
        assert_eq!(no_entry_warning(&subprograms, &functions, &ranges), None);
    }
}
