//! Profile generation, the post-passes and the writers on arbitrary counters: an unsymbolized
//! profile (`--unsymbolized-profile`, the counters' text form) over the binaries the committed
//! seeds were made from, address contexts on the pseudo-probe one, frame contexts on the DWARF
//! one. Each stage walks contexts, context tries or nested profiles; contexts can be as deep as
//! the input allows (`a @ ` is a frame), and seeds hold contexts of 2,000 frames.
//!
//! Post-passes as llvm-profgen runs them by default, and without pre-inliner, cold-context
//! merging and nesting (every context kept, written flat); text and extbinary encodings.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profgen::aggregate::unsymbolized::{UnsymbolizedOptions, read_unsymbolized};
use profgen::binary::{Binary, LoadOptions};
use profgen::postpass::{self, PostPassOptions};
use profgen::profile::summary::SummaryOptions;
use profgen::profile::{self, ProfileOptions};
use profgen::writer::{self, OutputFormat, WriteOptions};
use std::path::Path;
use std::sync::OnceLock;

/// DWARF, then pseudo probes.
const BINARIES: [&str; 2] =
    ["tests/fixtures/unsymbolized/loop", "tests/fixtures/unsymbolized/loop_probe"];

fn binary(probes: bool) -> &'static Binary {
    static LOADED: OnceLock<Vec<Binary>> = OnceLock::new();
    let loaded = LOADED.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        BINARIES
            .iter()
            .map(|b| Binary::load(&root.join(b), &LoadOptions::default()).expect("fixture loads"))
            .collect()
    });
    &loaded[usize::from(probes)]
}

fuzz_target!(|data: &[u8]| {
    let flat = PostPassOptions {
        preinliner: false,
        gen_cs_nested_profile: false,
        merge_cold_context: Some(false),
        ..PostPassOptions::default()
    };
    for probes in [false, true] {
        let binary = binary(probes);
        let base = UnsymbolizedOptions::default().base(binary);
        let Ok((counters, _)) = read_unsymbolized(data, Path::new("fuzz.raw"), base, probes) else {
            continue;
        };
        for post in [PostPassOptions::default(), flat.clone()] {
            let opts = ProfileOptions::default();
            let mut profile = profile::generate(binary, &counters, &opts, &mut Vec::new());
            let summary = SummaryOptions::default();
            let Ok((prepared, _anchored)) = postpass::prepare(
                binary,
                postpass::sampled(binary, &counters, &post),
                &profile,
                &post,
                &summary,
                true,
            ) else {
                continue;
            };
            postpass::apply(&mut profile, prepared, &post);
            for format in [OutputFormat::Text, OutputFormat::ExtBinary] {
                let _ = writer::encode_profile(&profile, format, &WriteOptions::default());
            }
        }
    }
});
