//! ELF loading: program headers, symbols, disassembly, DWARF and `.pseudo_probe` decoding, then
//! the queries the pipeline makes of every function (inline stacks, probes, instruction walks).
#![no_main]

use libfuzzer_sys::fuzz_target;
use profgen::binary::{Binary, LoadOptions};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    for use_dwarf_correlation in [false, true] {
        let opts = LoadOptions { use_dwarf_correlation, ..Default::default() };
        let Ok(binary) = Binary::from_bytes(data, Path::new("fuzz.elf"), &opts) else {
            return;
        };
        for range in binary.func_ranges().iter().take(64) {
            for a in binary.insts_in(range.start, range.end).take(256) {
                let _ = binary.inline_stack(a);
                let _ = binary.call_addr_from_return_addr(a);
                let _ = binary.branch_target(a);
            }
        }
        if let Some(probes) = binary.probes() {
            for p in probes.probes().iter().take(256) {
                let _ = probes.inline_context(p);
            }
            let _ = binary.dump_pseudo_probes(&mut std::io::sink());
        }
    }
});
