//! The real LBR recording in `../shared/data/autofdo` (see its ORIGIN.md): recorded under another
//! file name, with program functions that have no DWARF. llvm-profgen-19 finds no relevant mmap
//! event (name match) or, with the binary renamed, drops every sample; profgen matches by build id
//! and profiles `main` and `compute_flag` from the symbol table. Skips when ../shared is absent.

mod common;

use common::{PROFGEN, root, scratch};
use std::path::{Path, PathBuf};
use std::process::Command;

fn shared() -> Option<PathBuf> {
    let d = root().join("../shared/data/autofdo");
    if d.join("propeller_sample_1.perfdata1").exists() {
        Some(d)
    } else {
        eprintln!("note: ../shared/data/autofdo absent; skipped");
        None
    }
}

fn profgen(args: &[&str], out: &Path) -> (String, String) {
    let o = Command::new(PROFGEN).args(args).arg("--output").arg(out).output().unwrap();
    assert!(o.status.success(), "profgen failed: {}", String::from_utf8_lossy(&o.stderr));
    (std::fs::read_to_string(out).unwrap(), String::from_utf8_lossy(&o.stderr).into_owned())
}

#[test]
fn renamed_binary_without_program_dwarf_is_matched_by_build_id_and_profiled_from_symbols() {
    let Some(d) = shared() else { return };
    let w = scratch("text");
    let (text, stderr) = profgen(
        &[
            "--perfdata",
            d.join("propeller_sample_1.perfdata1").to_str().unwrap(),
            "--binary",
            d.join("propeller_sample_1.bin").to_str().unwrap(),
            "--format=text",
        ],
        &w.join("out.txt"),
    );
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/shared/propeller_sample_1.txt");
    if std::env::var_os("PROFGEN_BLESS").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, &text).unwrap();
    }
    assert_eq!(text, std::fs::read_to_string(&golden).unwrap());
    // perf report attributes 74% of sampled IPs to main and 26% to compute_flag.
    let total = |f: &str| -> u64 {
        let line = text.lines().find(|l| l.starts_with(&format!("{f}:"))).unwrap();
        line.split(':').nth(1).unwrap().parse().unwrap()
    };
    let main_share = total("main") as f64 / (total("main") + total("compute_flag")) as f64;
    assert!((0.70..0.80).contains(&main_share), "main share {main_share}");
    assert!(stderr.contains("3740 samples read, 3732 used"), "{stderr}");
    assert!(stderr.contains("binary matched by build id"), "{stderr}");
}

#[test]
fn unsymbolized_counters_equal_llvm_profgen_19_given_the_recorded_name() {
    let Some(d) = shared() else { return };
    if Command::new("llvm-profgen-19").arg("--version").output().is_err()
        || Command::new("perf").arg("--version").output().is_err()
    {
        eprintln!("note: llvm-profgen-19 or perf missing; skipped");
        return;
    }
    let w = scratch("unsym");
    // llvm-profgen matches by file name: give it the binary under its recorded name.
    let renamed = w.join("propeller_sample_1.bin.gen");
    std::fs::copy(d.join("propeller_sample_1.bin"), &renamed).unwrap();
    let perfdata = d.join("propeller_sample_1.perfdata1");
    let (ours, _) = profgen(
        &[
            "--perfdata",
            perfdata.to_str().unwrap(),
            "--binary",
            d.join("propeller_sample_1.bin").to_str().unwrap(),
            "--skip-symbolization",
            "--llvm-compatible",
        ],
        &w.join("ours.raw"),
    );
    let o = Command::new("llvm-profgen-19")
        .current_dir(&w)
        .arg("--perfdata")
        .arg(&perfdata)
        .arg("--binary")
        .arg(&renamed)
        .args(["--skip-symbolization", "--output", "llvm.raw"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(ours, std::fs::read_to_string(w.join("llvm.raw")).unwrap());
}
