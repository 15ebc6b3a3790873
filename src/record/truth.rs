//! Ground-truth sidecar writer. Text, one record per line, sorted, addresses in lowercase hex
//! without `0x`:
//!
//! ```text
//! # profgen-record truth v1
//! instructions <total traced instructions> samples <samples written>
//! binary <index> <build-id hex | -> <tracked 0|1> <path>
//! I <binary> <vaddr> <count>                       executions of the instruction at vaddr
//! B <from binary> <from> <to binary> <to> <count>  taken branches from → to
//! ```
//!
//! Vaddrs are ELF virtual addresses of the binary (as in `objdump -d`), independent of where it
//! was loaded. `I` lines exist only for tracked binaries (by default everything outside /usr,
//! /lib, /etc; `--truth-all` tracks all). A `B` line exists when either end is tracked; an end
//! in no file mapping has binary `-` and its runtime address.

use std::io::{self, Write};

use super::emulate::TruthData;

fn bin(b: u32) -> String {
    if b == u32::MAX { "-".to_string() } else { b.to_string() }
}

pub fn write(w: &mut impl Write, t: &TruthData) -> io::Result<()> {
    writeln!(w, "# profgen-record truth v1")?;
    writeln!(w, "instructions {} samples {}", t.instructions, t.samples)?;
    for (i, (path, id, tracked)) in t.binaries.iter().enumerate() {
        let id = id
            .as_ref()
            .map_or("-".to_string(), |id| id.iter().map(|b| format!("{b:02x}")).collect());
        writeln!(w, "binary {i} {id} {} {path}", u8::from(*tracked))?;
    }
    for &((b, a), c) in &t.insts {
        writeln!(w, "I {b} {a:x} {c}")?;
    }
    for &((fb, f, tb, to), c) in &t.branches {
        writeln!(w, "B {} {f:x} {} {to:x} {c}", bin(fb), bin(tb))?;
    }
    Ok(())
}
