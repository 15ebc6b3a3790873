//! Code shapes: the instructions of each function's outlined copy, as content that survives a
//! rebuild, and the profile locations each instruction belongs to.
//!
//! `profgen remap --old-binary` aligns an old function's instructions with the new one's to
//! carry each location's count to where its code went (see `remap::content`); this module says,
//! per instruction, what it is and which locations it counts for:
//! - content: a normalised opcode (mnemonic and operand shape, registers and constants left
//!   out, since register allocation and stack offsets change with any edit; conditional jumps
//!   are one token, since layout flips their sense), the callee of calls and tail jumps;
//! - its basic block (leaders: entries, branch targets, instructions after a branch);
//! - locations: line binaries, the function's own frame of the instruction's inline stack (the
//!   line, or the call site of inlined code); probe binaries, the block probes of the function
//!   (and inlined call-site probes) at the start of its stretch of the basic block, and the
//!   call probe at a call. A probe placed after a block's first instructions still counts the
//!   whole block.
//!
//! NOPs (alignment padding) are no part of a shape.

use super::probes::{NodeId, ProbeType};
use super::{Binary, InstKind, disasm, map_file};
use crate::addr::Vaddr;
use crate::error::Error;
use crate::llvm::{LineLocation, canonical_fn_name};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One instruction of a function's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeInst {
    /// Normalised opcode, e.g. `mov (r,r,i),r`; `jcc`; `call` / `jmp` for calls and jumps.
    pub opcode: Arc<str>,
    /// The callee of a direct call or tail jump (canonical name); `None` otherwise.
    pub callee: Option<Arc<str>>,
    /// Index of its basic block in the function (address order).
    pub block: u32,
    /// The function's locations this instruction counts for (line binaries: one; probe
    /// binaries: the block probes of its stretch).
    pub locations: Vec<LineLocation>,
    /// Probe binaries: the call probe of a call instruction.
    pub call_probe: Option<LineLocation>,
}

/// The instructions of one function's outlined copy (all its ranges), in address order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionShape {
    pub insts: Vec<ShapeInst>,
    /// Per basic block, the blocks control can go to next (jump targets inside the function,
    /// the next block unless the block ends in a jump or a return); block 0 is the entry.
    pub successors: Vec<Vec<u32>>,
}

impl Binary {
    /// The shapes of the outlined copies of the functions `wanted` accepts (by canonical name).
    /// Functions that are only inlined have none. Reads the binary's file again for the
    /// instruction bytes.
    pub fn shapes(
        &self,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<BTreeMap<String, FunctionShape>, Error> {
        let data = map_file(self.path())?;
        let cs = disasm::capstone(true)
            .map_err(|what| Error::BadFile { path: self.path().to_path_buf(), what })?;
        let mut ranges: BTreeMap<String, Vec<(Vaddr, Vaddr)>> = BTreeMap::new();
        for r in self.func_ranges() {
            let name = canonical_fn_name(&self.function(r.func).name);
            if wanted(name) {
                ranges.entry(name.to_string()).or_default().push((r.start, r.end));
            }
        }
        let mut out = BTreeMap::new();
        for (name, ranges) in ranges {
            let shape = self.shape_of(&name, &ranges, &data, &cs);
            if !shape.insts.is_empty() {
                out.insert(name, shape);
            }
        }
        Ok(out)
    }

    fn bytes_at<'d>(&self, data: &'d [u8], a: Vaddr, len: u64) -> Option<&'d [u8]> {
        let seg = self
            .segments()
            .iter()
            .find(|s| a.0 >= s.vaddr.0 && a.0 + len <= s.vaddr.0 + s.filesz)?;
        let off = (seg.offset.0 + (a.0 - seg.vaddr.0)) as usize;
        data.get(off..off + len as usize)
    }

    fn shape_of(
        &self,
        name: &str,
        ranges: &[(Vaddr, Vaddr)],
        data: &[u8],
        cs: &capstone::Capstone,
    ) -> FunctionShape {
        struct Raw {
            addr: Vaddr,
            kind: InstKind,
            opcode: Arc<str>,
            callee: Option<Arc<str>>,
            target: Option<u64>,
        }
        let inside = |a: u64| ranges.iter().any(|(s, e)| a >= s.0 && a < e.0);
        let mut raw: Vec<Raw> = Vec::new();
        for &(start, end) in ranges {
            for addr in self.insts_in(start, end) {
                if addr >= end {
                    break;
                }
                let (Some(kind), Some(size)) = (self.inst_kind(addr), self.inst_size(addr)) else {
                    continue;
                };
                let Some(bytes) = self.bytes_at(data, addr, size) else { continue };
                let Ok(insns) = cs.disasm_count(bytes, addr.0, 1) else { continue };
                let Some(insn) = insns.iter().next() else { continue };
                let mnemonic = insn.mnemonic().unwrap_or("");
                if mnemonic.starts_with("nop") {
                    continue;
                }
                let target = self.branch_target(addr).map(|t| t.0);
                let (opcode, callee): (String, Option<Arc<str>>) = match kind {
                    InstKind::Call => ("call".into(), callee(self, target)),
                    InstKind::DirectJump if target.is_some_and(|t| !inside(t)) => {
                        ("call".into(), callee(self, target))
                    }
                    InstKind::DirectJump => ("jmp".into(), None),
                    InstKind::ConditionalJump => ("jcc".into(), None),
                    _ => (normalise(mnemonic, insn.op_str().unwrap_or("")), None),
                };
                raw.push(Raw { addr, kind, opcode: Arc::from(opcode), callee, target });
            }
        }
        // Basic blocks.
        let targets: BTreeSet<u64> = raw.iter().filter_map(|r| r.target).collect();
        let mut block = 0u32;
        let mut blocks = Vec::with_capacity(raw.len());
        for (i, r) in raw.iter().enumerate() {
            let after_branch =
                i > 0 && !matches!(raw[i - 1].kind, InstKind::Other | InstKind::Call);
            let new_range = i > 0 && ranges.iter().any(|(s, _)| *s == r.addr);
            if i > 0 && (after_branch || new_range || targets.contains(&r.addr.0)) {
                block += 1;
            }
            blocks.push(block);
        }
        let block_at: BTreeMap<u64, u32> =
            raw.iter().zip(&blocks).map(|(r, b)| (r.addr.0, *b)).collect();
        let mut successors = vec![Vec::new(); blocks.last().map_or(0, |b| *b as usize + 1)];
        for (i, r) in raw.iter().enumerate() {
            let b = blocks[i];
            let next = blocks.get(i + 1).copied();
            if next == Some(b) {
                continue;
            }
            let succ = &mut successors[b as usize];
            let falls_through =
                matches!(r.kind, InstKind::Other | InstKind::Call | InstKind::ConditionalJump);
            if let Some(t) = r.target.and_then(|t| block_at.get(&t))
                && r.kind != InstKind::Call
            {
                succ.push(*t);
            }
            if falls_through && let Some(n) = next {
                succ.push(n);
            }
            succ.sort_unstable();
            succ.dedup();
        }
        let locations = match self.probes() {
            Some(_) => {
                self.probe_locations(name, &raw.iter().map(|r| r.addr).collect::<Vec<_>>(), &blocks)
            }
            None => {
                let fs = self.uses_fs_discriminators();
                raw.iter()
                    .map(|r| {
                        let stack = self.inline_stack(r.addr);
                        match stack.first() {
                            Some(f) if canonical_fn_name(&f.func_name) == name => {
                                (vec![f.location(fs)], None)
                            }
                            _ => (Vec::new(), None),
                        }
                    })
                    .collect()
            }
        };
        let insts = raw
            .into_iter()
            .zip(blocks)
            .zip(locations)
            .map(|((r, block), (locations, call_probe))| ShapeInst {
                opcode: r.opcode,
                callee: r.callee,
                block,
                locations,
                call_probe,
            })
            .collect();
        FunctionShape { insts, successors }
    }

    /// Probe binaries: the locations of each instruction (see the module documentation).
    fn probe_locations(
        &self,
        name: &str,
        addrs: &[Vaddr],
        blocks: &[u32],
    ) -> Vec<(Vec<LineLocation>, Option<LineLocation>)> {
        let probes = self.probes().expect("probe binary");
        // The probes of `name`'s top-level copy at an address: block probes, and the call-site
        // probe of inlined code; call probes apart.
        let at = |a: Vaddr| -> (Vec<LineLocation>, Vec<LineLocation>) {
            let (mut block, mut call) = (Vec::new(), Vec::new());
            for p in probes.probes_at(a) {
                let top = probes.top_level_node(p.node);
                if top == NodeId::ROOT
                    || canonical_fn_name(&probes.func_name(probes.node(top).guid)) != name
                {
                    continue;
                }
                if p.node == top {
                    let loc = LineLocation::new(p.index, 0);
                    match p.kind {
                        ProbeType::Block => block.push(loc),
                        _ => call.push(loc),
                    }
                } else {
                    let mut n = p.node;
                    while probes.node(n).parent != top {
                        n = probes.node(n).parent;
                    }
                    block.push(LineLocation::new(probes.node(n).callsite, 0));
                }
            }
            block.sort();
            block.dedup();
            (block, call)
        };
        let per: Vec<_> = addrs.iter().map(|a| at(*a)).collect();
        let mut out = Vec::with_capacity(addrs.len());
        let mut i = 0;
        while i < addrs.len() {
            let end = i + blocks[i..].iter().take_while(|b| **b == blocks[i]).count();
            // Each probe address starts a stretch; the first stretch reaches back to the block's
            // start.
            let mut current = (i..end)
                .find(|&k| !per[k].0.is_empty())
                .map(|k| per[k].0.clone())
                .unwrap_or_default();
            for (block, call) in &per[i..end] {
                if !block.is_empty() {
                    current = block.clone();
                }
                out.push((current.clone(), call.first().copied()));
            }
            i = end;
        }
        out
    }
}

fn callee(binary: &Binary, target: Option<u64>) -> Option<Arc<str>> {
    let name = binary.callee_name(Vaddr(target?))?;
    Some(Arc::from(canonical_fn_name(&name)))
}

/// The mnemonic and the operand shape of an AT&T instruction: registers become `r`, numbers
/// `i`, the punctuation of memory operands stays (`movq (%r15,%rax,8), %rdi` → `movq (r,r,i),r`).
fn normalise(mnemonic: &str, ops: &str) -> String {
    let mut out = String::with_capacity(mnemonic.len() + 12);
    out.push_str(mnemonic);
    out.push(' ');
    let mut chars = ops.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '%' | '$' | '-' | '0'..='9' => {
                let kind = if c == '%' { 'r' } else { 'i' };
                while chars.peek().is_some_and(|c| c.is_ascii_alphanumeric()) {
                    chars.next();
                }
                if !out.ends_with(kind) {
                    out.push(kind);
                }
            }
            ' ' => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operand_shapes_leave_registers_and_constants_out() {
        assert_eq!(normalise("movq", "(%r15,%rax,8), %rdi"), "movq (r,r,i),r");
        assert_eq!(normalise("movq", "(%r12,%rax,8), %rdi"), "movq (r,r,i),r");
        assert_eq!(normalise("addl", "$3, %r14d"), "addl i,r");
        assert_eq!(normalise("leaq", "11290(%rip), %r15"), "leaq i(r),r");
        assert_eq!(normalise("movl", "-0x10(%rbp), %eax"), "movl i(r),r");
        assert_eq!(normalise("retq", ""), "retq ");
    }
}
