//! perf.data reader: the same bytes as a file held in memory (file or pipe mode, time-ordered and
//! chunked file-order decoding) and as a stream (pipe mode decoded as it arrives).
#![no_main]

use libfuzzer_sys::fuzz_target;
use profgen::input::perf_data::{PerfData, read_perf_data, read_perf_data_stream};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.data");
    let _ = read_perf_data(data, path, |_| {});
    let _ = read_perf_data_stream(data, path, |_| {});
    if let Ok(parsed) = PerfData::parse(data, path) {
        for chunk in parsed.split_data(4) {
            let _ = parsed.decode(chunk, |_| {});
        }
    }
});
