//! x86-64 disassembly the way llvm-profgen does it (reference §3.2): every symbol of an
//! executable section is decoded from its address to the next symbol's (or the section end);
//! `.plt*` sections and bytes before a section's first symbol are not decoded; an undecodable
//! byte is skipped and counted as invalid.
//!
//! In: ELF sections and symbols. Out: [`Code`], sorted per-instruction arrays (address, size,
//! kind) plus the derived sets the profile builders query by binary search.

use super::InstKind;
use super::elf::{self, Elf, Symbol};
use capstone::arch::x86::{ArchMode, ArchSyntax, X86Insn};
use capstone::prelude::*;
use object::{Object, ObjectSection, SectionIndex};

/// Decoded instructions of the whole binary, sorted by address.
#[derive(Debug, Default)]
pub struct Code {
    pub addrs: Vec<u64>,
    pub sizes: Vec<u8>,
    pub kinds: Vec<InstKind>,
    /// Addresses of calls, returns and direct unconditional jumps (llvm-profgen's `UncondSet`).
    pub uncond: Vec<u64>,
    /// `(address, target)` of every direct call and direct jump, sorted by address.
    pub branch_targets: Vec<(u64, u64)>,
    /// Sorted, deduplicated prolog/epilog addresses (filled by [`Code::compute_prolog_epilog`]).
    pub prolog_epilog: Vec<u64>,
    /// Bytes that did not decode (each skipped as a 1-byte "instruction").
    pub invalid_bytes: u64,
}

/// An executable section to decode, with its symbols sorted by (address, name).
pub struct TextSection<'data> {
    pub name: &'data str,
    pub addr: u64,
    pub bytes: &'data [u8],
    /// `.plt*`: listed, never decoded.
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
        let syms = by_section[first..].iter().take_while(|(s, _)| *s == idx).map(|(_, sym)| sym.clone()).collect();
        out.push(TextSection { name, addr: section.address(), bytes, skipped, symbols: syms });
    }
    Ok(out)
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
    /// 1 for an undecodable byte.
    pub size: u64,
    /// `None` for an undecodable byte.
    pub insn: Option<&'a capstone::Insn<'a>>,
}

/// Walks the instructions of symbol `i` of `sec` exactly like llvm-profgen's
/// `dissassembleSymbol`: bytes up to the section end are offered to the decoder, so an
/// instruction may run past the next symbol's start.
pub fn walk_symbol(cs: &Capstone, sec: &TextSection<'_>, i: usize, mut f: impl FnMut(Decoded<'_>)) {
    let sec_end = sec.addr + sec.bytes.len() as u64;
    let start = sec.symbols[i].addr;
    let next = sec.symbols.get(i + 1).map_or(sec_end, |s| s.addr).min(sec_end);
    if start < sec.addr {
        return;
    }
    let Ok(mut iter) = cs.disasm_iter(&[], 0) else { return };
    let mut addr = start;
    let mut restart = true;
    while addr < next {
        if restart {
            iter.reset(&sec.bytes[(addr - sec.addr) as usize..], addr);
            restart = false;
        }
        match iter.next() {
            Some(insn) => {
                let size = insn.len() as u64;
                f(Decoded { addr, size, insn: Some(&insn) });
                addr += size.max(1);
            }
            None => {
                f(Decoded { addr, size: 1, insn: None });
                addr += 1;
                restart = true;
            }
        }
    }
}

/// Decodes every text section.
pub fn decode(sections: &[TextSection<'_>]) -> Result<Code, String> {
    let cs = capstone(false)?;
    let mut insts: Vec<(u64, u8, InstKind)> = Vec::new();
    let mut code = Code::default();
    for sec in sections.iter().filter(|s| !s.skipped) {
        for i in 0..sec.symbols.len() {
            walk_symbol(&cs, sec, i, |d| match d.insn {
                Some(insn) => {
                    let (kind, target) = classify(insn.id().0, insn.bytes(), d.addr);
                    insts.push((d.addr, d.size.min(u64::from(u8::MAX)) as u8, kind));
                    if let Some(t) = target {
                        code.branch_targets.push((d.addr, t));
                    }
                }
                None => code.invalid_bytes += 1,
            });
        }
    }
    // Overlapping symbols can decode an address twice; like llvm-profgen's size map, the last
    // decode wins.
    insts.reverse();
    insts.sort_by_key(|i| i.0);
    insts.dedup_by_key(|i| i.0);
    code.branch_targets.reverse();
    code.branch_targets.sort_by_key(|b| b.0);
    code.branch_targets.dedup_by_key(|b| b.0);
    code.addrs = insts.iter().map(|i| i.0).collect();
    code.sizes = insts.iter().map(|i| i.1).collect();
    code.kinds = insts.iter().map(|i| i.2).collect();
    code.uncond = insts.iter().filter(|i| i.2.is_unconditional()).map(|i| i.0).collect();
    Ok(code)
}

/// Instruction kind from the capstone id, and the target of a direct call or jump.
fn classify(id: u32, bytes: &[u8], addr: u64) -> (InstKind, Option<u64>) {
    use X86Insn::*;
    let is = |x: X86Insn| id == x as u32;
    if is(X86_INS_CALL) || is(X86_INS_LCALL) {
        let target = if is(X86_INS_CALL) { direct_target(bytes, addr, 0xe8) } else { None };
        (InstKind::Call, target)
    } else if [X86_INS_RET, X86_INS_RETF, X86_INS_RETFQ, X86_INS_IRET, X86_INS_IRETD, X86_INS_IRETQ]
        .iter()
        .any(|&x| is(x))
    {
        (InstKind::Return, None)
    } else if is(X86_INS_JMP) {
        match direct_target(bytes, addr, 0xe9).or_else(|| direct_target(bytes, addr, 0xeb)) {
            Some(t) => (InstKind::DirectJump, Some(t)),
            None => (InstKind::IndirectJump, None),
        }
    } else if is(X86_INS_LJMP) {
        (InstKind::IndirectJump, None)
    } else if (X86_INS_JAE as u32..=X86_INS_JS as u32).contains(&id)
        || [X86_INS_LOOP, X86_INS_LOOPE, X86_INS_LOOPNE, X86_INS_XBEGIN].iter().any(|&x| is(x))
    {
        (InstKind::ConditionalJump, None)
    } else {
        (InstKind::Other, None)
    }
}

/// Target of a relative branch whose opcode byte (after legacy and REX prefixes) is `opcode`;
/// the displacement is the rest of the instruction.
fn direct_target(bytes: &[u8], addr: u64, opcode: u8) -> Option<u64> {
    let pos = bytes.iter().position(|&b| {
        !matches!(b, 0x66 | 0x67 | 0xf2 | 0xf3 | 0x2e | 0x3e | 0x26 | 0x64 | 0x65 | 0x36 | 0xf0 | 0x40..=0x4f)
    })?;
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

impl Code {
    pub fn index_of(&self, a: u64) -> Option<usize> {
        self.addrs.binary_search(&a).ok()
    }

    /// llvm-profgen's `getIndexForAddr`: first instruction at or after `a`.
    pub fn lower_bound(&self, a: u64) -> usize {
        self.addrs.partition_point(|&x| x < a)
    }

    pub fn branch_target(&self, a: u64) -> Option<u64> {
        self.branch_targets.binary_search_by_key(&a, |b| b.0).ok().map(|i| self.branch_targets[i].1)
    }

    /// Reference §3.4: the first two instructions of every function range, and every return
    /// with the instruction before it.
    pub fn compute_prolog_epilog(&mut self, range_starts: impl Iterator<Item = u64>) {
        let mut set = Vec::new();
        for start in range_starts {
            set.push(start);
            if let Some(&next) = self.addrs.get(self.lower_bound(start) + 1) {
                set.push(next);
            }
        }
        for (i, kind) in self.kinds.iter().enumerate() {
            if *kind == InstKind::Return {
                set.push(self.addrs[i]);
                if i > 0 {
                    set.push(self.addrs[i - 1]);
                }
            }
        }
        set.sort_unstable();
        set.dedup();
        self.prolog_epilog = set;
    }
}
