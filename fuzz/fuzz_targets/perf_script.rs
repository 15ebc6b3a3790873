//! perf script text parser, with and without `--leading-ip-only` and an event filter.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profgen::input::perf_script::{ScriptOptions, read_perf_script};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.script");
    for opts in [
        ScriptOptions::default(),
        ScriptOptions { leading_ip_only: true, ..Default::default() },
        ScriptOptions { perf_events: vec!["cycles".into()], ..Default::default() },
    ] {
        let _ = read_perf_script(data, path, &opts, |_| {});
    }
});
