//! Unsymbolized profile reader (`--unsymbolized-profile`), address- and frame-keyed contexts,
//! with and without an offset base; what it reads must write back without failing. Contexts can
//! be as deep as the input allows (`a @ ` is a frame); seeds hold contexts of 2,000 frames.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profgen::aggregate::unsymbolized::{read_unsymbolized, write_unsymbolized};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.raw");
    for (base, probes) in [(0, true), (0, false), (0x40_0000, true)] {
        if let Ok((counters, _)) = read_unsymbolized(data, path, base, probes) {
            let mut out = Vec::new();
            write_unsymbolized(&counters, base, &mut out).expect("writing to memory cannot fail");
        }
    }
});
