//! Raw binary encoding (`SampleProfileWriterRawBinary`, format byte 0xff) and the pieces it
//! shares with extbinary: the summary record and the function body record.
//!
//! ```text
//! ULEB magic(FORMAT_BINARY)  ULEB version(103)  summary  name table (count, NUL-terminated names)
//! per top-level profile: ULEB head samples, body record
//! body record := name idx, total, #body, (line, discr, count, #targets, (name idx, count)*)*,
//!                #inlinees, (line, discr, body record)*
//! ```

use super::{NameIndex, collect_names, sorted_profiles};
use crate::llvm::LineLocation;
use crate::llvm::leb128::write_uleb128;
use crate::llvm::sample_prof::{FORMAT_BINARY, VERSION, magic};
use crate::profile::model::{FunctionSamples, Profile};
use crate::profile::summary::ProfileSummary;

pub fn encode(profile: &Profile) -> Vec<u8> {
    let mut out = Vec::new();
    write_uleb128(&mut out, magic(FORMAT_BINARY));
    write_uleb128(&mut out, VERSION);
    write_summary(&mut out, &ProfileSummary::compute(profile));
    let (names, index) = collect_names(profile);
    write_uleb128(&mut out, names.len() as u64);
    for name in &names {
        out.extend_from_slice(name.as_bytes());
        out.push(0);
    }
    for (ctx, fs) in sorted_profiles(profile) {
        write_uleb128(&mut out, fs.head_samples);
        write_body(&mut out, index.of(ctx.leaf()), fs, &index);
    }
    out
}

/// `writeSummary`.
pub(crate) fn write_summary(out: &mut Vec<u8>, s: &ProfileSummary) {
    write_uleb128(out, s.total_count);
    write_uleb128(out, s.max_count);
    write_uleb128(out, s.max_function_count);
    write_uleb128(out, s.num_counts as u64);
    write_uleb128(out, s.num_functions as u64);
    write_uleb128(out, s.detailed.len() as u64);
    for e in &s.detailed {
        write_uleb128(out, e.cutoff as u64);
        write_uleb128(out, e.min_count);
        write_uleb128(out, e.num_counts);
    }
}

/// `writeBody`: `own_idx` is the profile's name (or CS context) index; nested profiles always
/// use their name index.
pub(crate) fn write_body(out: &mut Vec<u8>, own_idx: u64, fs: &FunctionSamples, names: &NameIndex) {
    write_uleb128(out, own_idx);
    write_uleb128(out, fs.total_samples);
    write_uleb128(out, fs.body.len() as u64);
    for (loc, sample) in &fs.body {
        write_loc(out, *loc);
        write_uleb128(out, sample.count);
        write_uleb128(out, sample.call_targets.len() as u64);
        let mut targets: Vec<_> = sample.call_targets.iter().collect();
        targets.sort_by(|a, b| b.1.cmp(a.1));
        for (name, count) in targets {
            write_uleb128(out, names.of(name));
            write_uleb128(out, *count);
        }
    }
    write_uleb128(out, fs.callsites.values().map(|c| c.len() as u64).sum());
    for (loc, callees) in &fs.callsites {
        for (name, callee) in callees {
            write_loc(out, *loc);
            write_body(out, names.of(name), callee, names);
        }
    }
}

pub(crate) fn write_loc(out: &mut Vec<u8>, loc: LineLocation) {
    write_uleb128(out, loc.line_offset as u64);
    write_uleb128(out, loc.discriminator as u64);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::model::Context;

    #[test]
    fn raw_binary_layout() {
        let mut f = FunctionSamples::new("f");
        f.total_samples = 3;
        f.head_samples = 1;
        f.add_body(LineLocation::new(1, 0), 3);
        f.add_call_target(LineLocation::new(1, 0), &"g".into(), 3);
        let mut p = Profile::default();
        p.functions.insert(Context::base("f"), f);
        let bytes = encode(&p);
        let mut expect = vec![0xff, 0xe5, 0xd0, 0xb1, 0xf4, 0xc9, 0x94, 0xa8, 0x53, 0x67];
        // Summary: total 3, max 3, max head 1, 1 count, 1 function, 16 entries.
        expect.extend([3, 3, 1, 1, 1, 16]);
        let mut entries = Vec::new();
        for c in crate::profile::summary::DEFAULT_CUTOFFS {
            write_uleb128(&mut entries, c as u64);
            // 3 × cutoff / 1e6 rounds down to 0 below 33.3%: nothing taken yet.
            entries.extend(if 3 * c < 1_000_000 { [0, 0] } else { [3, 1] });
        }
        expect.extend(entries);
        expect.extend([2, b'f', 0, b'g', 0]);
        // head 1, name f, total 3, 1 body record (1.0: 3, 1 target g:3), no inlinees.
        expect.extend([1, 0, 3, 1, 1, 0, 3, 1, 1, 3, 0]);
        assert_eq!(bytes, expect);
    }
}
