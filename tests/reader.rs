//! The profile reader against the writers and against llvm-profdata-19: (a) reading every
//! writer golden (`tests/fixtures/writers`) and writing it again in the same format gives the same
//! bytes; (b) what we read from a file equals what we read from llvm-profdata-19's text view of
//! it, and from the extbinary and binary files llvm-profdata-19 itself writes; (c) malformed
//! files give errors naming the offset or line.

mod common;

use common::{fixture, have, scratch};
use profgen::reader::{FileFormat, read_profile, read_profile_file};
use profgen::writer::{OutputFormat, WriteOptions, encode_profile};
use std::path::{Path, PathBuf};
use std::process::Command;

fn goldens() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture("writers"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !p.to_string_lossy().contains("_md5"))
        .collect();
    files.sort();
    assert!(files.len() >= 30, "writer goldens missing");
    files
}

fn format_of(path: &Path) -> (FileFormat, OutputFormat) {
    match path.extension().unwrap().to_str().unwrap() {
        "txt" => (FileFormat::Text, OutputFormat::Text),
        "binary" => (FileFormat::Binary, OutputFormat::Binary),
        "extbinary" => (FileFormat::ExtBinary, OutputFormat::ExtBinary),
        e => panic!("unexpected golden extension {e}"),
    }
}

#[test]
fn round_trip_through_the_writers_is_byte_identical() {
    for path in goldens() {
        let bytes = std::fs::read(&path).unwrap();
        let read = read_profile(&bytes, &path).unwrap();
        let (file_format, out_format) = format_of(&path);
        assert_eq!(read.format, file_format, "{}", path.display());
        assert!(!read.md5_names);
        let again = encode_profile(&read.profile, out_format, &WriteOptions::default()).unwrap();
        assert!(again == bytes, "{}: written back differently", path.display());
    }
}

#[test]
fn md5_name_tables_read_as_decimal_guids() {
    let path = fixture("writers/line_nested_md5.extbinary");
    let read = read_profile_file(&path).unwrap();
    assert!(read.md5_names);
    assert!(read.profile.functions.keys().all(|c| c.leaf_name().parse::<u64>().is_ok()));
    // The GUIDs are what llvm-profdata prints for the same file.
    // Ties between names order by hash value in LLVM's text output, so compare profiles.
    if have("llvm-profdata-19") {
        let view = read_profile(profdata_text(&path).as_bytes(), &path).unwrap();
        assert_eq!(view.profile.functions, read.profile.functions);
    }
}

fn profdata(args: &[&str], input: &Path) -> Vec<u8> {
    let out = Command::new("llvm-profdata-19").args(args).arg(input).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?} {}: {}",
        input.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

fn profdata_text(input: &Path) -> String {
    String::from_utf8(profdata(&["merge", "--sample", "--text", "-o", "-"], input)).unwrap()
}

#[test]
fn reads_what_llvm_profdata_reads_and_writes() {
    if !have("llvm-profdata-19") {
        eprintln!("note: llvm-profdata-19 not on PATH; skipping oracle checks");
        return;
    }
    let dir = scratch("reader-profdata");
    for path in goldens() {
        let ours = read_profile_file(&path).unwrap().profile;
        if ours.functions.is_empty() {
            continue; // llvm-profdata cannot read an empty text profile
        }
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        // llvm-profdata's text view of the file, read back.
        let text = dir.join(format!("{name}.view.txt"));
        std::fs::write(&text, profdata_text(&path)).unwrap();
        let view = read_profile_file(&text).unwrap().profile;
        assert_eq!(view.functions, ours.functions, "{name}: llvm-profdata's text view");
        // The encodings llvm-profdata itself writes.
        let cs_or_probe = ours.kind.context_sensitive || ours.kind.probe_based;
        for (flag, ext) in [("--extbinary", "extbinary"), ("--binary", "binary")] {
            if ext == "binary" && cs_or_probe {
                continue;
            }
            let out = dir.join(format!("{name}.llvm.{ext}"));
            profdata(&["merge", "--sample", flag, "-o", out.to_str().unwrap()], &path);
            let theirs = read_profile_file(&out).unwrap().profile;
            assert_eq!(theirs.functions, ours.functions, "{name}: llvm-profdata {ext}");
            assert_eq!(theirs.kind.probe_based, ours.kind.probe_based, "{name}: {ext}");
            assert_eq!(theirs.kind.context_sensitive, ours.kind.context_sensitive, "{name}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn malformed_files_name_the_offset_or_line() {
    let path = fixture("writers/line_nested.extbinary");
    let bytes = std::fs::read(&path).unwrap();
    let p = Path::new("cut.prof");
    // Every cut of an extbinary file is an error, never a panic.
    for cut in 1..bytes.len() {
        let err = read_profile(&bytes[..cut], p);
        assert!(err.is_err(), "cut at {cut} read as a profile");
    }
    let err = read_profile(&bytes[..300], p).unwrap_err().to_string();
    assert!(err.starts_with("cut.prof: at byte offset "), "{err}");
    let mut flipped = bytes.clone();
    flipped[9] = 100; // version
    assert_eq!(
        read_profile(&flipped, p).unwrap_err().to_string(),
        "cut.prof: at byte offset 10: unsupported version 100 (expected 103)"
    );
    let err = read_profile(b"main:1:0\n 1: 1\n  2: 1\n", p).unwrap_err().to_string();
    assert_eq!(err, "cut.prof:3: indented deeper than the profile it belongs to: `  2: 1`");
    let err = read_profile(b"\xff\xfe junk", p).unwrap_err().to_string();
    assert!(err.starts_with("cut.prof: at byte offset 0: "), "{err}");
}
