//! x86-64 disassembly the way llvm-profgen does it (reference §3.2): every symbol of an
//! executable section is decoded from its address to the next symbol's (or the section end);
//! `.plt*` sections and bytes before a section's first symbol are not decoded; an undecodable
//! byte is skipped and counted as invalid. The common encodings' lengths and kinds come from
//! [`x86_length`]'s table, the rest from capstone (whose iterator also prints each
//! instruction's text, most of the cost); the dump prints through capstone.
//!
//! In: ELF sections and symbols. Out: [`Code`], sorted per-instruction arrays (address, size,
//! kind) plus the derived sets the profile builders query by binary search.

use super::elf::{self, Elf, Symbol};
use super::{InstKind, x86_length};
use capstone::arch::x86::{ArchMode, ArchSyntax, X86Insn};
use capstone::prelude::*;
use object::{Object, ObjectSection, SectionIndex};

/// Decoded instructions of the whole binary, sorted by address.
#[derive(Debug, Default)]
pub struct Code {
    pub addrs: Vec<u64>,
    pub sizes: Vec<u8>,
    pub kinds: Vec<InstKind>,
    /// `uncond_rank[i]`: how many of the first `i` instructions are calls, returns or direct
    /// unconditional jumps (llvm-profgen's `UncondSet`); one more entry than instructions, so
    /// that whether a range holds one is two lookups.
    pub uncond_rank: Vec<u32>,
    /// `(address, target)` of every direct call, direct jump and conditional jump, sorted by
    /// address.
    pub branch_targets: Vec<(u64, u64)>,
    /// Sorted, deduplicated prolog/epilog addresses: [`decode`] lists the returns and the
    /// instructions before them, [`Code::compute_prolog_epilog`] adds the function starts.
    pub prolog_epilog: Vec<u64>,
    /// Bytes that did not decode (each skipped as a 1-byte "instruction").
    pub invalid_bytes: u64,
    /// Lookup index over `addrs` (see [`Code::lower_bound`]).
    index: AddrIndex,
}

/// The lookup index over the code's sorted instruction addresses: the buckets of
/// [`AddrBuckets`], and where code is dense (64-byte buckets) a bitmap per bucket of the bytes
/// that start an instruction: the test is one bit, the search a bit count. Return addresses, LBR
/// entries and instruction-boundary checks all come through here, once or more per sample frame
/// (LBR-only input: 64 per sample).
#[derive(Debug, Default)]
struct AddrIndex {
    buckets: AddrBuckets,
    /// With 64-byte buckets, bit `i` of `bits[k]` is set when an instruction starts at
    /// `base + (k << 6) + i`; empty with wider buckets.
    bits: Vec<u64>,
}

impl AddrIndex {
    fn new(addrs: &[u64]) -> Self {
        let buckets = AddrBuckets::new(addrs, |&a| a);
        let mut bits = Vec::new();
        if buckets.shift == 6 {
            bits = vec![0u64; buckets.starts.len() - 1];
            for &a in addrs {
                let off = a - buckets.base;
                bits[(off >> 6) as usize] |= 1 << (off & 63);
            }
        }
        AddrIndex { buckets, bits }
    }

    /// The bucket bitmap holding `a` and `a`'s bit in it, where code is dense.
    #[inline(always)]
    fn bit(&self, a: u64) -> Option<(u64, u32)> {
        let off = a.wrapping_sub(self.buckets.base);
        self.bits.get((off >> 6) as usize).map(|&w| (w, (off & 63) as u32))
    }
}

/// Where each `1 << shift`-byte bucket of a sorted address list's range starts in it: a lower
/// bound is one table read and a search among the few entries of one bucket instead of a binary
/// search over the whole list (instructions, pseudo probes).
#[derive(Debug, Default)]
pub(super) struct AddrBuckets {
    base: u64,
    shift: u32,
    /// `starts[k]`: index of the first entry at or after `base + (k << shift)`; one more entry
    /// than buckets, the last being the entry count. Empty for an empty list.
    starts: Vec<u32>,
}

impl AddrBuckets {
    /// Buckets of 64 bytes (a few entries each), wider when the entries are spread so thinly
    /// that the table would outgrow them. `items` are sorted by `addr`.
    pub(super) fn new<T>(items: &[T], addr: impl Fn(&T) -> u64) -> Self {
        let (Some(first), Some(last)) = (items.first().map(&addr), items.last().map(&addr)) else {
            return AddrBuckets::default();
        };
        let Ok(n) = u32::try_from(items.len()) else { return AddrBuckets::default() };
        let span = last - first + 1;
        let shift = Self::shift(span, items.len());
        let buckets = (span >> shift) as usize + 1;
        let mut starts = Vec::with_capacity(buckets + 1);
        let mut i = 0usize;
        for k in 0..buckets as u64 {
            let at = first + (k << shift);
            while i < items.len() && addr(&items[i]) < at {
                i += 1;
            }
            starts.push(i as u32);
        }
        starts.push(n);
        AddrBuckets { base: first, shift, starts }
    }

    /// The bucket width (a shift) for `len` entries over `span` bytes: 64 bytes, wider when the
    /// entries are spread so thinly that the table would outgrow them.
    pub(super) fn shift(span: u64, len: usize) -> u32 {
        let mut shift = 6;
        while (span >> shift) > 2 * len as u64 + 1024 {
            shift += 1;
        }
        shift
    }

    /// The index of the first of `items` (the list the buckets were made of) at or after `a`.
    #[inline]
    pub(super) fn lower_bound<T>(&self, items: &[T], addr: impl Fn(&T) -> u64, a: u64) -> usize {
        let Some(k) = a.checked_sub(self.base).map(|off| (off >> self.shift) as usize) else {
            return 0;
        };
        match (self.starts.get(k), self.starts.get(k + 1)) {
            (Some(&lo), Some(&hi)) => {
                let (lo, hi) = (lo as usize, hi as usize);
                lo + items[lo..hi].partition_point(|x| addr(x) < a)
            }
            _ => items.partition_point(|x| addr(x) < a),
        }
    }
}

/// An executable section to decode, with its symbols sorted by (address, name).
pub struct TextSection<'data> {
    pub name: &'data str,
    pub addr: u64,
    pub bytes: &'data [u8],
    /// `.plt*`, and sections overlapping another ([`skip_overlapping`]): listed, never decoded.
    pub skipped: bool,
    pub symbols: Vec<Symbol<'data>>,
}

/// The executable sections of `elf` with size > 0, in section-header order, each with its
/// symbols stable-sorted by (address, name) as llvm-profgen sorts `SymbolInfoTy`.
pub fn text_sections<'data>(
    obj: &Elf<'data>,
    symbols: &[Symbol<'data>],
) -> Result<Vec<TextSection<'data>>, String> {
    let mut by_section: Vec<(SectionIndex, Symbol<'data>)> =
        symbols.iter().map(|s| (s.section, s.clone())).collect();
    by_section.sort_by(|a, b| (a.0.0, a.1.addr, a.1.name).cmp(&(b.0.0, b.1.addr, b.1.name)));
    let mut out = Vec::new();
    for section in obj.sections() {
        if !elf::is_exec_section(&section) || section.size() == 0 {
            continue;
        }
        let name = section.name().unwrap_or("");
        let skipped = name.starts_with(".plt");
        let bytes = if skipped {
            &[][..]
        } else {
            section.data().map_err(|e| format!("section {name}: {e}"))?
        };
        let idx = section.index();
        let first = by_section.partition_point(|(s, _)| s.0 < idx.0);
        let syms = by_section[first..]
            .iter()
            .take_while(|(s, _)| *s == idx)
            .map(|(_, sym)| sym.clone())
            .collect();
        out.push(TextSection { name, addr: section.address(), bytes, skipped, symbols: syms });
    }
    Ok(out)
}

/// Marks as skipped each section whose addresses overlap a section's at a lower address (or at
/// the same one, earlier in the header table), and names them. Linkers never overlap
/// executable sections, but a file can describe the same bytes any number of times: decoding
/// every copy made the work and memory grow with the copies, not the code.
pub fn skip_overlapping(sections: &mut [TextSection<'_>]) -> Vec<String> {
    let mut order: Vec<usize> = (0..sections.len()).filter(|&i| !sections[i].skipped).collect();
    order.sort_by_key(|&i| sections[i].addr);
    let mut end = 0;
    let mut overlapping = Vec::new();
    for i in order {
        let s = &mut sections[i];
        if s.addr < end {
            s.skipped = true;
            overlapping.push(format!("{} at {:#x}", s.name, s.addr));
        } else {
            end = s.addr.saturating_add(s.bytes.len() as u64);
        }
    }
    overlapping
}

pub fn capstone(att_syntax: bool) -> Result<Capstone, String> {
    let mut builder = Capstone::new().x86().mode(ArchMode::Mode64);
    if att_syntax {
        builder = builder.syntax(ArchSyntax::Att);
    }
    builder.build().map_err(|e| format!("cannot initialise the disassembler: {e}"))
}

/// One decoded (or undecodable) instruction as the walk reports it.
pub struct Decoded<'a> {
    pub addr: u64,
    /// 1 for an undecodable byte or a lock prefix.
    pub size: u64,
    pub insn: DecodedInsn<'a>,
}

pub enum DecodedInsn<'a> {
    Insn(&'a capstone::Insn<'a>),
    /// LLVM's disassembler decodes a `lock` prefix as an instruction of its own.
    LockPrefix,
    Invalid,
}

/// Walks the instruction starts of symbol `i` of `sec` exactly like llvm-profgen's
/// `dissassembleSymbol`: `step(addr, bytes)` gets the bytes from `addr` up to the section end
/// (so an instruction may run past the next symbol's start) and returns the size of the
/// instruction it decoded there, 1 for an undecodable byte.
fn walk_starts<'data>(
    sec: &TextSection<'data>,
    i: usize,
    mut step: impl FnMut(u64, &'data [u8]) -> u64,
) {
    let sec_end = sec.addr + sec.bytes.len() as u64;
    let start = sec.symbols[i].addr;
    let next = sec.symbols.get(i + 1).map_or(sec_end, |s| s.addr).min(sec_end);
    if start < sec.addr {
        return;
    }
    let mut addr = start;
    while addr < next {
        addr += step(addr, &sec.bytes[(addr - sec.addr) as usize..]).max(1);
    }
}

/// LLVM's disassembler decodes a `lock` prefix as an instruction of its own.
fn is_lock_prefix(bytes: &[u8]) -> bool {
    bytes.first() == Some(&0xf0)
}

/// Walks the instructions of symbol `i` of `sec` as capstone decodes them (see
/// [`walk_starts`]).
pub fn walk_symbol(cs: &Capstone, sec: &TextSection<'_>, i: usize, mut f: impl FnMut(Decoded<'_>)) {
    let Ok(mut iter) = cs.disasm_iter(&[], 0) else {
        return;
    };
    walk_starts(sec, i, |addr, bytes| {
        if is_lock_prefix(bytes) {
            f(Decoded { addr, size: 1, insn: DecodedInsn::LockPrefix });
            return 1;
        }
        iter.reset(bytes, addr);
        match iter.next() {
            Some(insn) => {
                let size = insn.len() as u64;
                f(Decoded { addr, size, insn: DecodedInsn::Insn(&insn) });
                size
            }
            None => {
                f(Decoded { addr, size: 1, insn: DecodedInsn::Invalid });
                1
            }
        }
    });
}

/// Address, size, kind and direct target of one instruction.
type DecodedInst = (u64, u8, InstKind, Option<u64>);

/// A run of instructions as [`Code`]'s arrays: a chunk's, made by its worker, so that the
/// sequential end only copies them one after the other.
struct Columns {
    addrs: Vec<u64>,
    sizes: Vec<u8>,
    kinds: Vec<InstKind>,
    /// [`Code::uncond_rank`] after each instruction, counted from the run's start.
    uncond_rank: Vec<u32>,
    branch_targets: Vec<(u64, u64)>,
    /// Each return, after the instruction before it when that is in the run: ascending.
    returns: Vec<u64>,
}

impl Columns {
    /// The arrays of `insts`, each allocated at its size.
    fn new(insts: &[DecodedInst]) -> Self {
        let mut uncond = 0u32;
        Columns {
            addrs: insts.iter().map(|i| i.0).collect(),
            sizes: insts.iter().map(|i| i.1).collect(),
            kinds: insts.iter().map(|i| i.2).collect(),
            uncond_rank: (insts.iter())
                .map(|i| {
                    uncond = uncond.saturating_add(u32::from(i.2.is_unconditional()));
                    uncond
                })
                .collect(),
            branch_targets: insts.iter().filter_map(|i| Some((i.0, i.3?))).collect(),
            returns: Self::returns(insts),
        }
    }

    fn returns(insts: &[DecodedInst]) -> Vec<u64> {
        let mut returns = Vec::new();
        for (k, i) in insts.iter().enumerate() {
            if i.2 == InstKind::Return {
                if k > 0 {
                    returns.push(insts[k - 1].0);
                }
                returns.push(i.0);
            }
        }
        returns
    }

    /// The instructions back as tuples; their targets were listed in the same order.
    fn insts(&self) -> impl Iterator<Item = DecodedInst> + '_ {
        let mut targets = self.branch_targets.iter().peekable();
        (self.addrs.iter().zip(&self.sizes).zip(&self.kinds)).map(move |((&a, &size), &kind)| {
            let target = targets.next_if(|t| t.0 == a).map(|t| t.1);
            (a, size, kind, target)
        })
    }
}

/// `parts`' `column`s one after the other.
fn concat<T: Copy>(parts: &[&Columns], column: impl Fn(&Columns) -> &[T]) -> Vec<T> {
    let mut out = Vec::with_capacity(parts.iter().map(|p| column(p).len()).sum());
    for part in parts {
        out.extend_from_slice(column(part));
    }
    out
}

/// Decodes every text section, in parallel over chunks of symbols.
pub fn decode(sections: &[TextSection<'_>]) -> Result<Code, String> {
    decode_with(sections, true)
}

/// [`decode`], the common encodings by [`x86_length`] when `known_encodings`, all others (and
/// all of them otherwise) by capstone.
fn decode_with(sections: &[TextSection<'_>], known_encodings: bool) -> Result<Code, String> {
    use rayon::prelude::*;
    const SYMBOLS_PER_CHUNK: usize = 64;
    let chunks: Vec<(&TextSection<'_>, std::ops::Range<usize>)> = sections
        .iter()
        .filter(|s| !s.skipped)
        .flat_map(|sec| {
            (0..sec.symbols.len())
                .step_by(SYMBOLS_PER_CHUNK)
                .map(move |i| (sec, i..(i + SYMBOLS_PER_CHUNK).min(sec.symbols.len())))
        })
        .collect();
    capstone(false)?;
    // A chunk at a time, so that a worker done with the DWARF can still take a share of the
    // last ones. Each is decoded into a list sized for it (instructions of two bytes on
    // average at most: growing it would copy it several times), then copied into arrays of
    // their size.
    let decoded: Vec<(Columns, bool, u64)> = chunks
        .par_iter()
        .with_max_len(1)
        .map_init(
            || capstone(false).ok(),
            |cs, (sec, symbols)| {
                let mut invalid = 0;
                let Some(cs) = cs else {
                    return (Columns::new(&[]), true, invalid);
                };
                let Ok(mut iter) = cs.disasm_iter(&[], 0) else {
                    return (Columns::new(&[]), true, invalid);
                };
                let sec_end = sec.addr + sec.bytes.len() as u64;
                let end = sec.symbols.get(symbols.end).map_or(sec_end, |s| s.addr).min(sec_end);
                let start = sec.symbols[symbols.start].addr.max(sec.addr);
                let mut insts = Vec::with_capacity((end.saturating_sub(start) / 2) as usize);
                for i in symbols.clone() {
                    walk_starts(sec, i, |addr, bytes| {
                        let (size, kind) = if is_lock_prefix(bytes) {
                            (1, InstKind::Other)
                        } else if let Some(known) =
                            known_encodings.then(|| x86_length::decode(bytes)).flatten()
                        {
                            known
                        } else {
                            iter.reset(bytes, addr);
                            let Some(insn) = iter.next() else {
                                invalid += 1;
                                return 1;
                            };
                            (insn.len(), classify(insn.id().0, insn.bytes(), addr))
                        };
                        let target = branch_target(kind, &bytes[..size], addr);
                        insts.push((addr, size.min(usize::from(u8::MAX)) as u8, kind, target));
                        size as u64
                    });
                }
                (Columns::new(&insts), insts.is_sorted_by(|a, b| a.0 < b.0), invalid)
            },
        )
        .collect();
    // A section's symbols are sorted and each is decoded only up to the next one's address, so
    // a chunk's instructions ascend; when the chunks also follow each other in address order
    // (sections in address order), concatenated they are the sorted, distinct list, and
    // nothing is copied into one list, sorted and deduplicated.
    let in_order = decoded.iter().all(|d| d.1)
        && (decoded.iter().filter_map(|d| Some((*d.0.addrs.first()?, *d.0.addrs.last()?))))
            .is_sorted_by(|a, b| a.1 < b.0);
    let sorted;
    let parts: Vec<&Columns> = if in_order {
        decoded.iter().map(|d| &d.0).collect()
    } else {
        let mut insts: Vec<_> = decoded.iter().flat_map(|d| d.0.insts()).collect();
        // Overlapping symbols can decode an address twice; like llvm-profgen's size map, the
        // last decode wins.
        insts.reverse();
        insts.sort_by_key(|i| i.0);
        insts.dedup_by_key(|i| i.0);
        sorted = Columns::new(&insts);
        vec![&sorted]
    };
    // The arrays are copied in parallel: this end waits for the last chunk, and the other
    // worker is idle by then.
    let ((addrs, index), ((sizes, kinds), (uncond_rank, (branch_targets, returns)))) = rayon::join(
        || {
            let addrs = concat(&parts, |p| &p.addrs);
            let index = AddrIndex::new(&addrs);
            (addrs, index)
        },
        || {
            rayon::join(
                || (concat(&parts, |p| &p.sizes), concat(&parts, |p| &p.kinds)),
                || {
                    let n = parts.iter().map(|p| p.uncond_rank.len()).sum::<usize>();
                    let mut rank = Vec::with_capacity(n + 1);
                    rank.push(0u32);
                    for part in &parts {
                        let before = *rank.last().unwrap_or(&0);
                        rank.extend(part.uncond_rank.iter().map(|&r| before.saturating_add(r)));
                    }
                    // A run's first return follows the previous run's last instruction.
                    let mut returns = Vec::new();
                    let mut last = None;
                    for part in &parts {
                        if part.kinds.first() == Some(&InstKind::Return)
                            && let Some(before) = last
                        {
                            returns.push(before);
                        }
                        returns.extend_from_slice(&part.returns);
                        last = part.addrs.last().copied().or(last);
                    }
                    (rank, (concat(&parts, |p| &p.branch_targets), returns))
                },
            )
        },
    );
    Ok(Code {
        addrs,
        sizes,
        kinds,
        uncond_rank,
        branch_targets,
        prolog_epilog: returns,
        invalid_bytes: decoded.iter().map(|d| d.2).sum(),
        index,
    })
}

/// Instruction kind from the capstone id (and, for a jump, whether it is direct).
fn classify(id: u32, bytes: &[u8], addr: u64) -> InstKind {
    use X86Insn::*;
    let is = |x: X86Insn| id == x as u32;
    if is(X86_INS_CALL) || is(X86_INS_LCALL) {
        InstKind::Call
    } else if [X86_INS_RET, X86_INS_RETF, X86_INS_RETFQ, X86_INS_IRET, X86_INS_IRETD, X86_INS_IRETQ]
        .iter()
        .any(|&x| is(x))
    {
        InstKind::Return
    } else if is(X86_INS_JMP) {
        match branch_target(InstKind::DirectJump, bytes, addr) {
            Some(_) => InstKind::DirectJump,
            None => InstKind::IndirectJump,
        }
    } else if is(X86_INS_LJMP) {
        InstKind::IndirectJump
    } else if (X86_INS_JAE as u32..=X86_INS_JS as u32).contains(&id)
        || [X86_INS_LOOP, X86_INS_LOOPE, X86_INS_LOOPNE, X86_INS_XBEGIN].iter().any(|&x| is(x))
    {
        InstKind::ConditionalJump
    } else {
        InstKind::Other
    }
}

/// The target of a direct call or jump of kind `kind` at `addr` encoded as `bytes`.
fn branch_target(kind: InstKind, bytes: &[u8], addr: u64) -> Option<u64> {
    match kind {
        InstKind::Call => direct_target(bytes, addr, 0xe8),
        InstKind::DirectJump => {
            direct_target(bytes, addr, 0xe9).or_else(|| direct_target(bytes, addr, 0xeb))
        }
        InstKind::ConditionalJump => conditional_target(bytes, addr),
        _ => None,
    }
}

/// Target of a relative branch whose opcode byte (after legacy and REX prefixes) is `opcode`;
/// the displacement is the rest of the instruction.
fn direct_target(bytes: &[u8], addr: u64, opcode: u8) -> Option<u64> {
    let pos = bytes.iter().position(|&b| !is_prefix(b))?;
    if bytes[pos] != opcode {
        return None;
    }
    let disp = &bytes[pos + 1..];
    let rel: i64 = match *disp {
        [a] => i64::from(a as i8),
        [a, b] => i64::from(i16::from_le_bytes([a, b])),
        [a, b, c, d] => i64::from(i32::from_le_bytes([a, b, c, d])),
        _ => return None,
    };
    Some(addr.wrapping_add(bytes.len() as u64).wrapping_add(rel as u64))
}

/// Target of a conditional jump: `Jcc rel8` (0x70-0x7f), `Jcc rel32` (0x0f 0x80-0x8f; a 0x66
/// prefix does not shorten it in 64-bit mode), `loop*`/`jrcxz` (0xe0-0xe3, rel8), and `xbegin`
/// (0xc7 0xf8: rel32, rel16 under 0x66), whose target is the abort handler.
fn conditional_target(bytes: &[u8], addr: u64) -> Option<u64> {
    let pos = bytes.iter().position(|&b| !is_prefix(b))?;
    let rel: i64 = match bytes[pos..] {
        [0x70..=0x7f | 0xe0..=0xe3, a] => i64::from(a as i8),
        [0xc7, 0xf8, a, b] => i64::from(i16::from_le_bytes([a, b])),
        [0x0f, 0x80..=0x8f, a, b, c, d] | [0xc7, 0xf8, a, b, c, d] => {
            i64::from(i32::from_le_bytes([a, b, c, d]))
        }
        _ => return None,
    };
    Some(addr.wrapping_add(bytes.len() as u64).wrapping_add(rel as u64))
}

/// Legacy prefixes and REX.
fn is_prefix(b: u8) -> bool {
    matches!(
        b,
        0x66 | 0x67 | 0xf2 | 0xf3 | 0x2e | 0x3e | 0x26 | 0x64 | 0x65 | 0x36 | 0xf0 | 0x40..=0x4f
    )
}

/// The first opcode byte after the prefixes.
fn opcode_byte(bytes: &[u8]) -> Option<u8> {
    bytes.iter().copied().find(|&b| !is_prefix(b))
}

/// Whether the instruction ends with `v` encoded at the full operand width (an imm16/imm32
/// rather than a sign-extended imm8).
fn full_width_imm(bytes: &[u8], v: u64, width: u32) -> bool {
    let n = (width / 8) as usize;
    width > 8
        && bytes.len() > n
        && bytes[bytes.len() - n..].iter().rev().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
            == v
}

impl Code {
    #[inline]
    pub fn index_of(&self, a: u64) -> Option<usize> {
        if let Some((w, bit)) = self.index.bit(a) {
            return (w >> bit & 1 != 0).then(|| self.lower_bound(a));
        }
        let i = self.lower_bound(a);
        (self.addrs.get(i) == Some(&a)).then_some(i)
    }

    /// The addresses the index keeps a bit a byte for (where code is dense; empty otherwise):
    /// no more than the instruction count's bytes-per-bit table the index already is.
    pub fn dense_extent(&self) -> std::ops::Range<u64> {
        let base = self.index.buckets.base;
        base..base.saturating_add(self.index.bits.len() as u64 * 64)
    }

    /// Whether an instruction starts at `a`.
    #[inline]
    pub fn is_inst_start(&self, a: u64) -> bool {
        match self.index.bit(a) {
            Some((w, bit)) => w >> bit & 1 != 0,
            None => self.index_of(a).is_some(),
        }
    }

    /// llvm-profgen's `getIndexForAddr`: first instruction at or after `a`. Where code is dense
    /// a table read and a bit count, inlined into the callers (several per LBR entry).
    #[inline]
    pub fn lower_bound(&self, a: u64) -> usize {
        let ix = &self.index;
        if let Some((w, bit)) = ix.bit(a) {
            // `bit` is only found for `a` at or above `base`, in 64-byte buckets.
            let k = (a.wrapping_sub(ix.buckets.base) >> 6) as usize;
            return ix.buckets.starts[k] as usize + (w & ((1 << bit) - 1)).count_ones() as usize;
        }
        self.lower_bound_sparse(a)
    }

    /// [`Self::lower_bound`] outside the bitmaps: a search within the address's bucket.
    #[inline(never)]
    fn lower_bound_sparse(&self, a: u64) -> usize {
        self.index.buckets.lower_bound(&self.addrs, |&x| x, a)
    }

    pub fn branch_target(&self, a: u64) -> Option<u64> {
        self.branch_targets.binary_search_by_key(&a, |b| b.0).ok().map(|i| self.branch_targets[i].1)
    }

    /// Reference §3.4: the first two instructions of every function range, and every return
    /// with the instruction before it (listed by [`decode`]).
    pub fn compute_prolog_epilog(&mut self, range_starts: impl Iterator<Item = u64>) {
        let mut starts = Vec::new();
        for start in range_starts {
            starts.push(start);
            if let Some(&next) = self.addrs.get(self.lower_bound(start) + 1) {
                starts.push(next);
            }
        }
        starts.sort_unstable();
        // Two ascending runs, which the stable sort merges.
        let mut set = std::mem::take(&mut self.prolog_epilog);
        set.extend(starts);
        set.sort();
        set.dedup();
        self.prolog_epilog = set;
    }
}

/// What `--show-disassembly-only` prints besides the instructions.
#[derive(Clone, Debug, Default)]
pub struct DumpOptions {
    /// `--disassemble-functions`: only these symbols (empty: all).
    pub functions: Vec<String>,
    /// `--show-source-locations`: the inline stack of each instruction.
    pub source_locations: bool,
    /// `--show-pseudo-probe`: probes before the instructions they are at, and probe ids as
    /// line offsets in source locations.
    pub pseudo_probes: bool,
    /// `--show-canonical-fname`.
    pub canonical_names: bool,
}

impl super::Binary {
    /// llvm-profgen's `--show-disassembly-only` listing. Instruction text is capstone's AT&T
    /// syntax with immediates and displacements in decimal, like LLVM's printer; operand
    /// spelling can still differ in corner cases.
    pub fn dump_disassembly(
        &self,
        w: &mut impl std::io::Write,
        opts: &DumpOptions,
    ) -> Result<(), crate::error::Error> {
        let path = self.path();
        let data = super::map_file(path)?;
        let bad = |what: String| crate::error::Error::BadFile { path: path.to_path_buf(), what };
        let io = |source| crate::error::Error::Io { path: path.to_path_buf(), source };
        let obj = elf::parse(&data).map_err(bad)?;
        let symbols = elf::symbols(&obj);
        let sections = text_sections(&obj, &symbols).map_err(bad)?;
        let cs = capstone(true).map_err(bad)?;
        write!(w, "\nDisassembly of {}:\n", path.display()).map_err(io)?;
        for sec in &sections {
            let size = obj.section_by_name(sec.name).map_or(sec.bytes.len() as u64, |s| s.size());
            write!(
                w,
                "\nDisassembly of section {} [{:#x}, {:#x}]:\n\n",
                sec.name,
                sec.addr,
                sec.addr + size
            )
            .map_err(io)?;
            if sec.skipped {
                continue;
            }
            for (i, sym) in sec.symbols.iter().enumerate() {
                let name = if opts.canonical_names {
                    crate::llvm::canonical_fn_name(sym.name)
                } else {
                    sym.name
                };
                if !opts.functions.is_empty() && !opts.functions.iter().any(|f| f == name) {
                    continue;
                }
                let mut out = format!("<{name}>:\n");
                walk_symbol(&cs, sec, i, |d| self.dump_line(&mut out, &d, opts));
                out.push('\n');
                w.write_all(out.as_bytes()).map_err(io)?;
            }
        }
        Ok(())
    }

    fn dump_line(&self, out: &mut String, d: &Decoded<'_>, opts: &DumpOptions) {
        use std::fmt::Write as _;
        let addr = crate::addr::Vaddr(d.addr);
        if opts.pseudo_probes
            && let Some(probes) = self.probes()
        {
            for p in probes.probes_at(addr) {
                let _ = writeln!(out, " [Probe]:\t{}", probes.format_probe(p));
            }
        }
        let _ = write!(out, "{:8x}:", d.addr);
        let start = out.len();
        match d.insn {
            DecodedInsn::Insn(insn) => out.push_str(&format_insn(insn)),
            DecodedInsn::LockPrefix => out.push_str("\tlock"),
            DecodedInsn::Invalid => out.push_str("\t<unknown>"),
        }
        if opts.source_locations {
            let width = out[start..].chars().count();
            out.extend(std::iter::repeat_n(' ', 40usize.saturating_sub(width)));
            let frames = self.inline_stack(addr);
            let mut first = true;
            for f in frames.iter().rev() {
                if !first {
                    out.push_str(" @ ");
                }
                first = false;
                let name = if opts.canonical_names {
                    crate::llvm::canonical_fn_name(&f.func_name)
                } else {
                    &f.func_name
                };
                let (line, disc) = if opts.pseudo_probes {
                    (crate::llvm::discriminator::probe_index_from_discriminator(f.discriminator), 0)
                } else {
                    (f.line_offset, f.discriminator)
                };
                let _ = write!(out, "{name}:{line}");
                if disc != 0 {
                    let _ = write!(out, ".{disc}");
                }
            }
        }
        out.push('\n');
    }
}

/// An instruction as LLVM's AT&T printer writes it after the address: `\tmnemonic\toperands`.
fn format_insn(insn: &capstone::Insn<'_>) -> String {
    let mut out = String::new();
    out.push('\t');
    let mnemonic = insn.mnemonic().unwrap_or("");
    // LLVM prints a rep prefix as `rep\t` before the instruction's own tab.
    let (prefix, mnemonic) = match mnemonic.split_once(' ') {
        Some((p, m)) if p.starts_with("rep") => (Some(p), m),
        _ => (None, mnemonic),
    };
    if let Some(p) = prefix {
        out.push_str(p);
        out.push_str("\t\t");
    }
    out.push_str(mnemonic);
    let ops = insn.op_str().unwrap_or("");
    if !ops.is_empty() {
        out.push('\t');
        let mut ops = llvm_operands(ops, insn.id().0, mnemonic, insn.bytes());
        // String instructions name the destination segment.
        if matches!(opcode_byte(insn.bytes()), Some(0x6c | 0x6d | 0xa4..=0xa7 | 0xaa..=0xaf)) {
            ops = ops.replace("(%rdi)", "%es:(%rdi)");
        }
        // For register-register xchg (86/87 /r) LLVM prints `rm, reg`, capstone `reg, rm`.
        if mnemonic.starts_with("xchg")
            && matches!(opcode_byte(insn.bytes()), Some(0x86 | 0x87))
            && let Some((a, b)) = ops.split_once(", ")
            && a.starts_with('%')
            && b.starts_with('%')
        {
            ops = format!("{b}, {a}");
        }
        out.push_str(&ops);
    }
    out
}

/// Rewrites capstone's hexadecimal immediates (`$0x10`) and displacements (`0x10(%rip)`) in
/// decimal as LLVM prints them; branch targets stay hexadecimal.
fn llvm_operands(ops: &str, id: u32, mnemonic: &str, insn_bytes: &[u8]) -> String {
    // LLVM prints the shift-by-one forms (D0/D1) without the implicit `$1`.
    let ops = match opcode_byte(insn_bytes) {
        Some(0xd0 | 0xd1) => ops.strip_prefix("$1, ").unwrap_or(ops),
        _ => ops,
    };
    let width = match mnemonic.as_bytes().last() {
        Some(b'b') => 8,
        Some(b'w') => 16,
        Some(b'l') => 32,
        _ => 64,
    };
    let is_branch_target = !ops.starts_with('$') && !ops.contains('(') && !ops.contains('%');
    let relative = [X86Insn::X86_INS_CALL, X86Insn::X86_INS_JMP].iter().any(|&x| id == x as u32)
        || classify(id, &[], 0) == InstKind::ConditionalJump;
    if relative && is_branch_target {
        return ops.to_string();
    }
    let mut out = String::with_capacity(ops.len());
    let bytes = ops.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let neg = bytes[i] == b'-';
        let num_at = if neg { i + 1 } else { i };
        let boundary = i == 0 || matches!(bytes[i - 1], b'$' | b' ' | b',' | b':' | b'*');
        let (radix, digits_at) =
            if ops[num_at..].starts_with("0x") { (16, num_at + 2) } else { (10, num_at) };
        let digits_end = ops[digits_at..]
            .find(|c: char| !c.is_ascii_hexdigit() || (radix == 10 && !c.is_ascii_digit()))
            .map_or(ops.len(), |e| digits_at + e);
        if boundary
            && digits_end > digits_at
            && let Ok(v) = u64::from_str_radix(&ops[digits_at..digits_end], radix)
        {
            // LLVM prints an immediate sign-extended from its encoding (so imm8 forms and
            // 64-bit operations show negative values) but a full-width 16/32-bit immediate
            // unsigned; capstone prints the bits (in hex, or in decimal for some 64-bit values).
            let imm = i > 0 && bytes[i - 1] == b'$';
            if neg {
                out.push('-');
                out.push_str(&v.to_string());
            } else if imm
                && width < 64
                && v < 1 << width
                && v >= 1 << (width - 1)
                && !full_width_imm(insn_bytes, v, width)
            {
                out.push_str(&(v as i64 - (1i64 << width)).to_string());
            } else if imm && v > i64::MAX as u64 {
                out.push_str(&(v as i64).to_string());
            } else {
                out.push_str(&v.to_string());
            }
            i = digits_end;
            continue;
        }
        // LLVM writes memory operands without spaces: `(%rax,%rcx,4)`.
        if bytes[i] == b' '
            && i > 0
            && bytes[i - 1] == b','
            && ops[..i].rfind('(') > ops[..i].rfind(')')
        {
            i += 1;
            continue;
        }
        out.push(bytes[i] as char);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes one instruction and renders it as the dump does.
    fn render(bytes: &[u8]) -> String {
        let cs = capstone(true).unwrap();
        let insns = cs.disasm_count(bytes, 0x1000, 1).unwrap();
        let insn = insns.iter().next().unwrap();
        format_insn(insn).trim_start_matches('\t').to_string()
    }

    fn kind_of(bytes: &[u8]) -> (InstKind, Option<u64>) {
        let cs = capstone(false).unwrap();
        let insns = cs.disasm_count(bytes, 0x1000, 1).unwrap();
        let insn = insns.iter().next().unwrap();
        assert_eq!(insn.len(), bytes.len());
        let kind = classify(insn.id().0, insn.bytes(), 0x1000);
        (kind, branch_target(kind, insn.bytes(), 0x1000))
    }

    /// The bucket index finds what a binary search over all instructions finds, for code packed
    /// densely, with gaps between sections, and spread so thin that buckets widen.
    #[test]
    fn indexed_lookups_match_a_binary_search() {
        let layouts: [Vec<u64>; 4] = [
            (0..500).map(|i| 0x1000 + 4 * i + i % 3).collect(),
            (0..200)
                .map(|i| 0x40_0000 + 5 * i)
                .chain((0..200).map(|i| 0x60_0000 + 2 * i))
                .collect(),
            vec![0x10, 0x1_0000_0000, 0x2_0000_0000],
            vec![],
        ];
        for addrs in layouts {
            let code =
                Code { index: AddrIndex::new(&addrs), addrs: addrs.clone(), ..Code::default() };
            let probes = addrs
                .iter()
                .flat_map(|&a| [a.saturating_sub(1), a, a + 1, a + 64, a.wrapping_sub(64)])
                .chain([0, 1, u64::MAX, 0x50_0000]);
            for a in probes {
                assert_eq!(code.lower_bound(a), addrs.partition_point(|&x| x < a), "{a:#x}");
                assert_eq!(code.index_of(a), addrs.binary_search(&a).ok(), "{a:#x}");
                assert_eq!(code.is_inst_start(a), addrs.binary_search(&a).is_ok(), "{a:#x}");
            }
        }
    }

    /// Buckets over addresses that repeat (several probes at one address) find the first of
    /// them, as a binary search does.
    #[test]
    fn buckets_find_the_first_of_repeated_addresses() {
        let layouts: [Vec<u64>; 3] = [
            (0..300).map(|i| 0x2000 + 7 * (i / 3)).collect(),
            [0x100, 0x100, 0x100, 0x5000, 0x5000, 0x9_0000_0000].into(),
            vec![0x40; 5],
        ];
        for addrs in layouts {
            let buckets = AddrBuckets::new(&addrs, |&a| a);
            let probes = addrs
                .iter()
                .flat_map(|&a| [a.saturating_sub(1), a, a + 1, a + 64, a.wrapping_sub(64)])
                .chain([0, u64::MAX]);
            for a in probes {
                let got = buckets.lower_bound(&addrs, |&x| x, a);
                assert_eq!(got, addrs.partition_point(|&x| x < a), "{a:#x}");
            }
        }
    }

    #[test]
    fn instruction_kinds() {
        use InstKind::*;
        assert_eq!(kind_of(&[0xe8, 0x10, 0, 0, 0]), (Call, Some(0x1015)));
        assert_eq!(kind_of(&[0xff, 0xd0]), (Call, None));
        assert_eq!(kind_of(&[0xff, 0x15, 0, 0, 0, 0]), (Call, None));
        assert_eq!(kind_of(&[0xc3]), (Return, None));
        assert_eq!(kind_of(&[0xc2, 8, 0]), (Return, None));
        assert_eq!(kind_of(&[0xf3, 0xc3]), (Return, None));
        assert_eq!(kind_of(&[0xcb]), (Return, None));
        assert_eq!(kind_of(&[0x48, 0xcf]), (Return, None));
        assert_eq!(kind_of(&[0xe9, 0xfb, 0xff, 0xff, 0xff]), (DirectJump, Some(0x1000)));
        assert_eq!(kind_of(&[0xeb, 0xfe]), (DirectJump, Some(0x1000)));
        assert_eq!(kind_of(&[0xff, 0xe0]), (IndirectJump, None));
        assert_eq!(kind_of(&[0x3e, 0xff, 0xe0]), (IndirectJump, None));
        assert_eq!(kind_of(&[0xff, 0x25, 0, 0, 0, 0]), (IndirectJump, None));
        assert_eq!(kind_of(&[0x74, 0x02]), (ConditionalJump, Some(0x1004)));
        assert_eq!(kind_of(&[0x0f, 0x8f, 0, 1, 0, 0]), (ConditionalJump, Some(0x1106)));
        assert_eq!(kind_of(&[0xe3, 0x02]), (ConditionalJump, Some(0x1004)));
        assert_eq!(kind_of(&[0x67, 0xe3, 0x02]), (ConditionalJump, Some(0x1005)));
        assert_eq!(kind_of(&[0xe2, 0xfe]), (ConditionalJump, Some(0x1000)));
        assert_eq!(kind_of(&[0xe1, 0xfe]), (ConditionalJump, Some(0x1000)));
        assert_eq!(kind_of(&[0xe0, 0xfe]), (ConditionalJump, Some(0x1000)));
        // Encodings whose targets were once read back from capstone's text: a 0x66-prefixed
        // Jcc keeps its rel32 (rel8 is unchanged), bnd Jcc, and xbegin with rel32 and with rel16.
        assert_eq!(kind_of(&[0x66, 0x0f, 0x84, 0x10, 0, 0, 0]), (ConditionalJump, Some(0x1017)));
        assert_eq!(kind_of(&[0x66, 0x74, 0x10]), (ConditionalJump, Some(0x1013)));
        assert_eq!(
            kind_of(&[0xf2, 0x0f, 0x85, 0xf0, 0xff, 0xff, 0xff]),
            (ConditionalJump, Some(0xff7))
        );
        assert_eq!(kind_of(&[0xc7, 0xf8, 0x10, 0, 0, 0]), (ConditionalJump, Some(0x1016)));
        assert_eq!(kind_of(&[0xc7, 0xf8, 0xfa, 0xff, 0xff, 0xff]), (ConditionalJump, Some(0x1000)));
        assert_eq!(kind_of(&[0x66, 0xc7, 0xf8, 0x10, 0]), (ConditionalJump, Some(0x1015)));
        assert_eq!(kind_of(&[0x66, 0xc7, 0xf8, 0xfb, 0xff]), (ConditionalJump, Some(0x1000)));
        assert_eq!(kind_of(&[0x90]), (Other, None));
        assert_eq!(kind_of(&[0x0f, 0x05]), (Other, None));
    }

    /// `bytes` decoded as `.text` at 0x1000 holding one function `f` of their size.
    fn decode_function(bytes: &[u8]) -> Code {
        let symbol = Symbol {
            addr: 0x1000,
            size: bytes.len() as u64,
            name: "f",
            section: SectionIndex(1),
            is_func: true,
        };
        let sec = TextSection {
            name: ".text",
            addr: 0x1000,
            bytes,
            skipped: false,
            symbols: vec![symbol],
        };
        decode(std::slice::from_ref(&sec)).unwrap()
    }

    /// A section is skipped when it starts inside one at a lower address, or at the same one
    /// earlier in the header table; `.plt` sections (never decoded) do not count.
    #[test]
    fn sections_overlapping_a_lower_one_are_skipped() {
        let bytes = [0x90u8; 0x100];
        let sec = |name, addr, len: usize, skipped| TextSection {
            name,
            addr,
            bytes: &bytes[..len],
            skipped,
            symbols: Vec::new(),
        };
        let mut sections = [
            sec(".b", 0x2080, 0x10, false),
            sec(".plt", 0x1000, 0, true),
            sec(".a", 0x2000, 0x100, false),
            sec(".a2", 0x2000, 0x10, false),
            sec(".c", 0x2100, 0x10, false),
            sec(".in_plt", 0x1000, 0x10, false),
        ];
        assert_eq!(skip_overlapping(&mut sections), [".a2 at 0x2000", ".b at 0x2080"]);
        let kept: Vec<&str> = sections.iter().filter(|s| !s.skipped).map(|s| s.name).collect();
        assert_eq!(kept, [".a", ".c", ".in_plt"]);
    }

    /// Capstone's length and kind of the instruction at the start of `bytes`, if it decodes.
    fn capstone_decode(cs: &Capstone, bytes: &[u8]) -> Option<(usize, InstKind)> {
        let insns = cs.disasm_count(bytes, 0x1000, 1).ok()?;
        let insn = insns.iter().next()?;
        Some((insn.len(), classify(insn.id().0, insn.bytes(), 0x1000)))
    }

    /// Every encoding `x86_length` accepts (under each prefix set and REX, with every ModRM
    /// byte and SIB form its opcode takes) has capstone's length and kind, and none of its
    /// truncations is accepted.
    #[test]
    fn known_encodings_decode_as_capstone_does() {
        let cs = capstone(false).unwrap();
        let prefixes: [&[u8]; 5] =
            [&[], &[0x66], &[0x2e], &[0x66, 0x2e], &[0x66, 0x66, 0x66, 0x2e]];
        let rexes: [&[u8]; 5] = [&[], &[0x40], &[0x41], &[0x48], &[0x4f]];
        // After the ModRM byte: a SIB byte without (0x00) or with (0x25) a disp32 base, then
        // displacement and immediate bytes.
        let tail = [0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, 0x99, 0xaa, 0xbb, 0xcc];
        let opcodes = (0..=255u8).map(|o| vec![o]).chain((0..=255u8).map(|o| vec![0x0f, o]));
        let mut checked = 0;
        for op in opcodes {
            for (pfx, rex) in prefixes.iter().flat_map(|p| rexes.iter().map(move |r| (p, r))) {
                let at = |modrm: u8, sib: u8| [pfx, rex, &op[..], &[modrm, sib], &tail].concat();
                // An opcode without a ModRM byte decodes the same whatever follows it.
                let plain = x86_length::decode(&at(0x05, 0)).is_some()
                    && x86_length::decode(&at(0x05, 0)) == x86_length::decode(&at(0xc0, 0));
                for modrm in 0..=255u8 {
                    for sib in [0x00, 0x25] {
                        if (plain && (modrm, sib) != (0, 0))
                            || (sib == 0x25 && (modrm & 7 != 4 || modrm >> 6 == 3))
                        {
                            continue;
                        }
                        let bytes = at(modrm, sib);
                        let Some(known) = x86_length::decode(&bytes) else { continue };
                        assert_eq!(Some(known), capstone_decode(&cs, &bytes), "{bytes:02x?}");
                        assert_eq!(x86_length::decode(&bytes[..known.0 - 1]), None, "{bytes:02x?}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 1_000_000, "{checked} encodings checked");
    }

    /// The ELF files to compare the decoders on: the bench binaries ($PROFGEN_BENCH_DIR,
    /// default ~/.cache/profgen/bench, as scripts/bench builds them; absent ones are skipped)
    /// and every ELF file of the corpus.
    fn elf_files() -> Vec<std::path::PathBuf> {
        let bench =
            std::env::var_os("PROFGEN_BENCH_DIR").map(std::path::PathBuf::from).or_else(|| {
                std::env::var_os("HOME")
                    .map(|h| std::path::Path::new(&h).join(".cache/profgen/bench"))
            });
        let mut files: Vec<_> = [
            "lua-cs.bin/lua",
            "sqlite-cs.bin/sqlite-bench",
            "sqlite-dwarf.bin/sqlite-bench",
            "profgen-debug",
            "workload",
        ]
        .iter()
        .filter_map(|name| Some(bench.as_ref()?.join(name)))
        .filter(|p| p.exists())
        .collect();
        let mut dirs = vec![std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("perf-samples")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    dirs.push(path);
                } else if is_elf(&path) {
                    files.push(path);
                }
            }
        }
        files.sort();
        files
    }

    fn is_elf(path: &std::path::Path) -> bool {
        use std::io::Read;
        let mut magic = [0; 4];
        std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut magic)).is_ok()
            && &magic == b"\x7fELF"
    }

    /// Decoding with `x86_length` gives capstone's instructions, kinds, targets and invalid
    /// bytes over the whole text of every bench and corpus binary; and at every byte offset
    /// of their first 256 KiB of each text section (instructions that were never emitted,
    /// made of other instructions' bytes), what `x86_length` accepts is what capstone decodes.
    #[test]
    fn binaries_decode_as_with_capstone_alone() {
        let cs = capstone(false).unwrap();
        let files = elf_files();
        assert!(files.len() >= 20, "corpus binaries missing: {files:?}");
        for path in files {
            let data = std::fs::read(&path).unwrap();
            let Ok(obj) = elf::parse(&data) else { continue };
            let symbols = elf::symbols(&obj);
            let sections = text_sections(&obj, &symbols).unwrap();
            let fields = |c: Code| {
                (c.addrs, c.sizes, c.kinds, c.uncond_rank, c.branch_targets, c.invalid_bytes)
            };
            assert_eq!(
                fields(decode_with(&sections, true).unwrap()),
                fields(decode_with(&sections, false).unwrap()),
                "{}",
                path.display()
            );
            for sec in sections.iter().filter(|s| !s.skipped) {
                for off in 0..sec.bytes.len().min(256 << 10) {
                    let bytes = &sec.bytes[off..];
                    if let Some(known) = x86_length::decode(bytes) {
                        assert_eq!(Some(known), capstone_decode(&cs, bytes), "{bytes:02x?}");
                    }
                }
            }
        }
    }

    /// The prolog/epilog set of every corpus binary (its symbols as the function starts) is
    /// the first two instructions of each start and every return with the instruction before
    /// it, whichever chunk the return begins.
    #[test]
    fn prolog_epilog_is_starts_and_returns() {
        for path in elf_files() {
            let data = std::fs::read(&path).unwrap();
            let Ok(obj) = elf::parse(&data) else { continue };
            let symbols = elf::symbols(&obj);
            let sections = text_sections(&obj, &symbols).unwrap();
            let mut code = decode(&sections).unwrap();
            let starts: Vec<u64> = symbols.iter().map(|s| s.addr).collect();
            let mut want = Vec::new();
            for &start in &starts {
                want.push(start);
                want.extend(code.addrs.get(code.lower_bound(start) + 1));
            }
            for (i, kind) in code.kinds.iter().enumerate() {
                if *kind == InstKind::Return {
                    want.extend(i.checked_sub(1).map(|i| code.addrs[i]));
                    want.push(code.addrs[i]);
                }
            }
            want.sort_unstable();
            want.dedup();
            code.compute_prolog_epilog(starts.into_iter());
            assert_eq!(code.prolog_epilog, want, "{}", path.display());
        }
    }

    /// Sections out of address order, or overlapping, are sorted: the same code as sections in
    /// order, and at an address decoded twice the last decode.
    #[test]
    fn sections_out_of_order_or_overlapping_are_sorted() {
        let sec = |addr: u64, bytes: &'static [u8]| TextSection {
            name: ".text",
            addr,
            bytes,
            skipped: false,
            symbols: vec![Symbol {
                addr,
                size: bytes.len() as u64,
                name: "f",
                section: SectionIndex(1),
                is_func: true,
            }],
        };
        let fields = |c: Code| (c.addrs, c.sizes, c.kinds, c.uncond_rank, c.branch_targets);
        let (nop_ret, call_ret): (&[u8], &[u8]) = (&[0x90, 0xc3], &[0xe8, 0, 0, 0, 0, 0xc3]);
        let in_order = fields(decode(&[sec(0x1000, nop_ret), sec(0x2000, call_ret)]).unwrap());
        assert_eq!(in_order.0, [0x1000, 0x1001, 0x2000, 0x2005]);
        let swapped = fields(decode(&[sec(0x2000, call_ret), sec(0x1000, nop_ret)]).unwrap());
        assert_eq!(swapped, in_order);
        let overlap = decode(&[sec(0x1000, nop_ret), sec(0x1000, &[0xc3])]).unwrap();
        assert_eq!(overlap.addrs, [0x1000, 0x1001]);
        assert_eq!(overlap.kinds, [InstKind::Return, InstKind::Return]);
        // A return first in its chunk follows the previous chunk's last instruction.
        let mut two = decode(&[sec(0x1000, nop_ret), sec(0x2000, &[0xc3])]).unwrap();
        two.compute_prolog_epilog(std::iter::empty());
        assert_eq!(two.prolog_epilog, [0x1000, 0x1001, 0x2000]);
    }

    #[test]
    fn lock_prefix_is_its_own_instruction() {
        // lock incl (%rax); ret — as llvm-profgen-19 decodes it: lock, incl, ret.
        let bytes = [0xf0, 0xff, 0x00, 0xc3];
        let code = decode_function(&bytes);
        assert_eq!(code.addrs, [0x1000, 0x1001, 0x1003]);
        assert_eq!(code.sizes, [1, 2, 1]);
        assert_eq!(code.kinds, [InstKind::Other, InstKind::Other, InstKind::Return]);
    }

    #[test]
    fn undecodable_bytes_are_skipped_one_at_a_time() {
        // Two invalid bytes (06 is not an x86-64 instruction), then ret.
        let bytes = [0x06, 0x06, 0xc3];
        let code = decode_function(&bytes);
        assert_eq!((code.addrs.as_slice(), code.invalid_bytes), (&[0x1002][..], 2));
    }

    #[test]
    fn operands_print_like_llvm() {
        assert_eq!(
            render(&[0x48, 0xba, 0, 0, 0, 0, 0, 0, 0, 0x80]),
            "movabsq\t$-9223372036854775808, %rdx"
        );
        assert_eq!(
            render(&[0x48, 0xc7, 0x44, 0x24, 0x30, 0xff, 0xff, 0xff, 0xff]),
            "movq\t$-1, 48(%rsp)"
        );
        assert_eq!(render(&[0xb8, 0xff, 0xff, 0xff, 0xff]), "movl\t$4294967295, %eax");
        assert_eq!(render(&[0x83, 0xe2, 0xfc]), "andl\t$-4, %edx");
        assert_eq!(render(&[0x66, 0x3d, 0x00, 0xff]), "cmpw\t$65280, %ax");
        assert_eq!(render(&[0xc6, 0x00, 0xff]), "movb\t$-1, (%rax)");
        assert_eq!(render(&[0xd1, 0xfe]), "sarl\t%esi");
        assert_eq!(render(&[0x48, 0x8d, 0x04, 0x40]), "leaq\t(%rax,%rax,2), %rax");
        assert_eq!(render(&[0xff, 0x15, 0x3f, 0x2f, 0, 0]), "callq\t*12095(%rip)");
        assert_eq!(render(&[0xf3, 0x48, 0xab]), "rep\t\tstosq\t%rax, %es:(%rdi)");
        assert_eq!(render(&[0x4c, 0x63, 0x1f]), "movslq\t(%rdi), %r11");
        assert_eq!(render(&[0xf2, 0x0f, 0x10, 0x47, 0x08]), "movsd\t8(%rdi), %xmm0");
        // Expected texts from `llvm-mc-19 --disassemble`.
        assert_eq!(render(&[0x48, 0x87, 0xde]), "xchgq\t%rsi, %rbx");
        assert_eq!(render(&[0x48, 0x87, 0xf3]), "xchgq\t%rbx, %rsi");
    }
}
