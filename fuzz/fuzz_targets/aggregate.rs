//! Aggregate file reader (`.pga`): the raw bytes (header checks), and the bytes as a payload
//! behind a valid header and checksum (the decoder proper). What decodes must encode, decode to
//! the same aggregate, and merge with itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use profgen::aggregate::pga::{Aggregate, file_from_payload};
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("fuzz.pga");
    let _ = Aggregate::decode(data, path);
    if let Ok(a) = Aggregate::decode(&file_from_payload(data), path) {
        let again = Aggregate::decode(&a.encode(), path).expect("an encoded aggregate decodes");
        assert_eq!(again, a);
        let mut twice = a.clone();
        twice.merge(a, "a", path).expect("the same options");
        let _ = twice.encode();
    }
});
