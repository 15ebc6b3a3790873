//! Lengths and control-flow kinds of the common x86-64 encodings, decoded here instead of by
//! capstone: `cs_disasm_iter` always prints an instruction's text too (Intel syntax, which we
//! never read), and that printing plus capstone's general decoder cost ~2,500 instructions per
//! decoded instruction, most of a probe binary's load.
//!
//! Only a table of encodings is known here: optional `0x66`/`0x2e` prefixes (no prefix on a
//! branch), an optional REX, then a one-byte or `0x0f` two-byte opcode from the lists below,
//! ModRM/SIB/displacement and immediate. Anything else (`f2`/`f3`/`67`/other segment prefixes,
//! VEX/EVEX, x87, the `0f38`/`0f3a` maps, rare or invalid opcodes, ModRM forms LLVM rejects,
//! truncated bytes, more than 15 bytes) is `None`, and the caller asks capstone, so the decoded
//! stream is exactly capstone's: the tests compare both on every encoding this table accepts
//! (all ModRM bytes, SIB forms, prefixes and REX) and on the whole text of the bench and corpus
//! binaries.

use super::InstKind;

/// Length of the instruction at the start of `b` and its kind, when it is one of the
/// encodings this module knows; `None` sends the caller to capstone.
pub fn decode(b: &[u8]) -> Option<(usize, InstKind)> {
    let mut i = 0;
    let mut opsize16 = false;
    while let Some(&p @ (0x66 | 0x2e)) = b.get(i) {
        opsize16 |= p == 0x66;
        i += 1;
    }
    let prefixed = i > 0;
    let rex = b.get(i).copied().filter(|r| r & 0xf0 == 0x40);
    i += usize::from(rex.is_some());
    let rex_w = rex.is_some_and(|r| r & 8 != 0);
    let op = *b.get(i)?;
    i += 1;
    // movsxd: capstone knows the REX.W form (movslq) only.
    if op == 0x63 && !rex_w {
        return None;
    }
    let spec = if op == 0x0f {
        let op2 = *b.get(i)?;
        i += 1;
        two_byte(op2, opsize16)?
    } else {
        one_byte(op)?
    };
    let imm_len = |imm: Imm| match imm {
        Imm::None => 0,
        Imm::B => 1,
        Imm::W => 2,
        Imm::D => 4,
        Imm::Z if opsize16 && !rex_w => 2,
        Imm::Z => 4,
        Imm::V if rex_w => 8,
        Imm::V if opsize16 => 2,
        Imm::V => 4,
    };
    let (imm, kind) = match spec {
        Spec::Plain(imm, kind) => {
            if kind != Other && (prefixed || rex.is_some()) {
                return None;
            }
            (imm, kind)
        }
        Spec::ModRm(imm) => {
            i += modrm_len(b, i)?;
            (imm, Other)
        }
        Spec::Group(operands) => {
            let modrm = *b.get(i)?;
            let (imm, kind) = operands(modrm >> 3 & 7, modrm >> 6 == 3)?;
            if kind != Other && prefixed {
                return None;
            }
            i += modrm_len(b, i)?;
            (imm, kind)
        }
    };
    let len = i + imm_len(imm);
    (len <= b.len() && len <= 15).then_some((len, kind))
}

/// Bytes taken by the ModRM byte at `b[i]`, its SIB byte and displacement, with 64-bit
/// addressing.
fn modrm_len(b: &[u8], i: usize) -> Option<usize> {
    let modrm = *b.get(i)?;
    let (md, rm) = (modrm >> 6, modrm & 7);
    if md == 3 {
        return Some(1);
    }
    let mut len = 1;
    if rm == 4 {
        len += 1;
        if md == 0 && *b.get(i + 1)? & 7 == 5 {
            len += 4;
        }
    } else if md == 0 && rm == 5 {
        len += 4;
    }
    Some(len + [0, 1, 4][md as usize])
}

/// Immediate operand sizes: byte, word, dword, `Iz` (16 under `0x66` without REX.W, else 32)
/// and `Iv` (16/32/64).
#[derive(Clone, Copy)]
enum Imm {
    None,
    B,
    W,
    D,
    Z,
    V,
}

/// An opcode's operands: an immediate only; a ModRM operand and an immediate; or a ModRM
/// operand whose `reg` field and register form (`mod == 3`) decide validity, immediate and kind.
enum Spec {
    Plain(Imm, InstKind),
    ModRm(Imm),
    Group(fn(u8, bool) -> Option<(Imm, InstKind)>),
}

use InstKind::{Call, ConditionalJump, DirectJump, IndirectJump, Other, Return};

fn plain(imm: Imm) -> Option<Spec> {
    Some(Spec::Plain(imm, Other))
}

fn modrm(imm: Imm) -> Option<Spec> {
    Some(Spec::ModRm(imm))
}

fn one_byte(op: u8) -> Option<Spec> {
    match op {
        // ALU r/m forms, then AL/eAX with an immediate (x6/x7 are prefixes or invalid).
        0x00..=0x3f if op & 7 <= 3 => modrm(Imm::None),
        0x00..=0x3f if op & 7 == 4 => plain(Imm::B),
        0x00..=0x3f if op & 7 == 5 => plain(Imm::Z),
        0x50..=0x5f | 0x90..=0x99 | 0xcc => plain(Imm::None),
        0x84..=0x8b => modrm(Imm::None),
        0x68 | 0xa9 => plain(Imm::Z),
        0x6a | 0xa8 | 0xb0..=0xb7 => plain(Imm::B),
        0x69 | 0x81 => modrm(Imm::Z),
        0x6b | 0x80 | 0x83 => modrm(Imm::B),
        0x70..=0x7f => Some(Spec::Plain(Imm::B, ConditionalJump)),
        // lea: memory operand only.
        0x63 => modrm(Imm::None),
        0x8d => Some(Spec::Group(|_, reg_form| (!reg_form).then_some((Imm::None, Other)))),
        0x8f => Some(Spec::Group(|reg, _| (reg == 0).then_some((Imm::None, Other)))),
        0xb8..=0xbf => plain(Imm::V),
        // Shifts and rotates; /6 (an undocumented alias) goes to capstone.
        0xc0 | 0xc1 => Some(Spec::Group(|reg, _| (reg != 6).then_some((Imm::B, Other)))),
        0xd0..=0xd3 => Some(Spec::Group(|reg, _| (reg != 6).then_some((Imm::None, Other)))),
        0xc2 => Some(Spec::Plain(Imm::W, Return)),
        0xc3 => Some(Spec::Plain(Imm::None, Return)),
        // mov r/m, imm (/0 only: c6 f8 / c7 f8 are xabort / xbegin).
        0xc6 => Some(Spec::Group(|reg, _| (reg == 0).then_some((Imm::B, Other)))),
        0xc7 => Some(Spec::Group(|reg, _| (reg == 0).then_some((Imm::Z, Other)))),
        0xe8 => Some(Spec::Plain(Imm::D, Call)),
        0xe9 => Some(Spec::Plain(Imm::D, DirectJump)),
        0xeb => Some(Spec::Plain(Imm::B, DirectJump)),
        // test (/0, with an immediate), not, neg, mul, imul, div, idiv; /1 goes to capstone.
        0xf6 => Some(Spec::Group(|reg, _| match reg {
            0 => Some((Imm::B, Other)),
            1 => None,
            _ => Some((Imm::None, Other)),
        })),
        0xf7 => Some(Spec::Group(|reg, _| match reg {
            0 => Some((Imm::Z, Other)),
            1 => None,
            _ => Some((Imm::None, Other)),
        })),
        0xfe => Some(Spec::Group(|reg, _| (reg <= 1).then_some((Imm::None, Other)))),
        // inc, dec, indirect call and jump, push; far forms and /7 go to capstone.
        0xff => Some(Spec::Group(|reg, _| match reg {
            0 | 1 | 6 => Some((Imm::None, Other)),
            2 => Some((Imm::None, Call)),
            4 => Some((Imm::None, IndirectJump)),
            _ => None,
        })),
        _ => None,
    }
}

/// The `0x0f` map; `opsize16` (a `0x66` prefix) selects the SSE forms of MMX/SSE opcodes,
/// which some opcodes have only one of.
fn two_byte(op: u8, opsize16: bool) -> Option<Spec> {
    match op {
        0x05 | 0x0b | 0x31 | 0xa2 | 0xc8..=0xcf => plain(Imm::None),
        0x80..=0x8f => Some(Spec::Plain(Imm::D, ConditionalJump)),
        // nop r/m (/0).
        0x1f => Some(Spec::Group(|reg, _| (reg == 0).then_some((Imm::None, Other)))),
        // SSE moves and arithmetic, packed single (none) or double (0x66).
        0x10
        | 0x11
        | 0x14
        | 0x15
        | 0x28
        | 0x29
        | 0x2e
        | 0x2f
        | 0x51
        | 0x54..=0x59
        | 0x5a
        | 0x5b
        | 0x5c..=0x5f => modrm(Imm::None),
        0xc2 | 0xc6 => modrm(Imm::B),
        0x40..=0x4f | 0x90..=0x9f => modrm(Imm::None),
        0xa3
        | 0xa5
        | 0xab
        | 0xad
        | 0xaf
        | 0xb0
        | 0xb1
        | 0xb3
        | 0xb6
        | 0xb7
        | 0xbb..=0xbf
        | 0xc0
        | 0xc1 => modrm(Imm::None),
        0xa4 | 0xac => modrm(Imm::B),
        0xba => Some(Spec::Group(|reg, _| (reg >= 4).then_some((Imm::B, Other)))),
        // MMX (none) / SSE2 integer (0x66).
        0x60..=0x6b | 0x6e | 0x6f | 0x74..=0x76 | 0x7e | 0x7f => modrm(Imm::None),
        0x6c | 0x6d | 0xd6 if opsize16 => modrm(Imm::None),
        0x70 => modrm(Imm::B),
        0xd1..=0xd5 | 0xd8..=0xdf | 0xe0..=0xe5 | 0xe8..=0xef | 0xf1..=0xf6 | 0xf8..=0xfe => {
            modrm(Imm::None)
        }
        _ => None,
    }
}
