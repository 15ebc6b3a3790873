//! clang-19 builds corpus programs with profgen's profiles (`-fprofile-sample-use`): it must read
//! them without a warning, apply them (sample-profile remarks), and lay hot code out apart
//! (`.text.hot.` sections appear only with the profile). Skips when clang-19 is not installed.

mod common;

use common::{PROFGEN, have, sample, scratch};
use object::{Object, ObjectSection};
use std::path::Path;
use std::process::Command;

fn section_names(obj: &Path) -> Vec<String> {
    let data = std::fs::read(obj).unwrap();
    let file = object::File::parse(&*data).unwrap();
    file.sections().filter_map(|s| s.name().ok().map(str::to_string)).collect()
}

/// Builds `case`'s source with its own flags plus `extra`; returns (stderr, section names).
fn compile(
    case: &str,
    source: &str,
    flags: &[&str],
    extra: &[&str],
    work: &Path,
    out: &str,
) -> (String, Vec<String>) {
    let obj = work.join(out);
    let o = Command::new("clang-19")
        .current_dir(sample(case))
        .args(["-O2", "-g", "-c", source, "-o"])
        .arg(&obj)
        .args(flags)
        .args(extra)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    (stderr, section_names(&obj))
}

fn check(case: &str, binary: &str, source: &str, flags: &[&str], expected_remark: &str) {
    if !have("clang-19") {
        eprintln!("note: clang-19 not installed; skipped");
        return;
    }
    let work = scratch(&format!("pgo-{case}"));
    let dir = sample(case);
    let profile = work.join("profile.extbinary");
    let o = Command::new(PROFGEN)
        .arg("--binary")
        .arg(dir.join(binary))
        .arg("--perfdata")
        .arg(dir.join("perf.data"))
        .arg("--output")
        .arg(&profile)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));

    let (_, plain) = compile(case, source, flags, &[], &work, "plain.o");
    let use_profile = format!("-fprofile-sample-use={}", profile.display());
    let (stderr, pgo) =
        compile(case, source, flags, &[&use_profile, "-Rpass=sample-profile.*"], &work, "pgo.o");
    assert!(!stderr.contains("warning"), "clang-19 warned about the profile:\n{stderr}");
    assert!(stderr.contains(expected_remark), "profile not applied:\n{stderr}");
    assert!(!plain.iter().any(|s| s.starts_with(".text.hot")), "{plain:?}");
    assert!(pgo.iter().any(|s| s.starts_with(".text.hot")), "no hot section: {pgo:?}");
    std::fs::remove_dir_all(&work).unwrap();
}

#[test]
fn probe_profile_drives_clang_inlining_and_hot_layout() {
    check(
        "inline_chain",
        "inline_chain",
        "inline_chain.c",
        &["-fpseudo-probe-for-profiling"],
        "inlined into 'compute' to match profiling context",
    );
}

#[test]
fn dwarf_profile_drives_clang_branch_weights_and_hot_layout() {
    check(
        "switch_table",
        "switch_table",
        "switch_table.c",
        &["-fdebug-info-for-profiling"],
        "most popular destination for conditional branches",
    );
}
