//! `profgen remap` end to end on the corpus cases with a next version (`perf-samples/<case>/next`:
//! edited source built and recorded again), against golden files (regenerate with
//! `PROFGEN_BLESS=1 cargo test --release --test remap`); its command-line errors; and zero-count
//! call anchors read by llvm-profdata-19 and clang-19 without a warning.

mod common;

use common::{PROFGEN, have, root, sample, scratch};
use std::path::Path;
use std::process::{Command, Output};

const CASES: [(&str, &str); 3] = [
    ("cpp_virtual", "cpp_virtual.cpp"),
    ("indirect_calls", "indirect_calls.c"),
    ("tail_chain", "tail_chain.c"),
];

fn run(args: &[&str]) -> Output {
    Command::new(PROFGEN).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn golden(name: &str, actual: &str) {
    let path = root().join("tests/fixtures/remap").join(name);
    if std::env::var_os("PROFGEN_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (PROFGEN_BLESS=1 writes it)", path.display()));
    assert!(expected == actual, "{name}: differs from the golden file\n{actual}");
}

/// profgen's text profile of the old build of `case` (the goldens take it `--llvm-compatible`:
/// they test remapping, not profgen's default counting).
fn stale_profile(case: &str, dir: &Path, extra: &[&str]) -> String {
    let out = dir.join(format!("{case}.stale.txt"));
    let bin = sample(&format!("{case}/{case}"));
    let data = sample(&format!("{case}/perf.data"));
    let mut args = vec!["--no-progress", "--format", "text"];
    args.extend_from_slice(extra);
    args.extend(["--binary", bin.to_str().unwrap(), "--perfdata", data.to_str().unwrap()]);
    args.extend(["-o", out.to_str().unwrap()]);
    let o = run(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    out.to_str().unwrap().to_string()
}

/// Both location matchings: by content (the default with `--old-binary`, goldens `CASE.txt`) and
/// LLVM's call anchors alone (`--llvm-matching`, goldens `CASE.llvm.txt`).
#[test]
fn remaps_the_corpus_next_versions_exactly() {
    let dir = scratch("remap-golden");
    for ((case, _), llvm) in CASES.iter().flat_map(|c| [(*c, false), (*c, true)]) {
        let suffix = if llvm { ".llvm" } else { "" };
        let stale = stale_profile(case, &dir, &["--llvm-compatible"]);
        let new_bin = sample(&format!("{case}/next/{case}"));
        let old_bin = sample(&format!("{case}/{case}"));
        let out = dir.join(format!("{case}{suffix}.remap.txt"));
        let report = dir.join(format!("{case}{suffix}.report"));
        let mut args = vec![
            "remap",
            "--profile",
            &stale,
            "--binary",
            new_bin.to_str().unwrap(),
            "--old-binary",
            old_bin.to_str().unwrap(),
            "--format",
            "text",
            "-o",
            out.to_str().unwrap(),
            "--report",
            report.to_str().unwrap(),
        ];
        if llvm {
            args.push("--llvm-matching");
        }
        let o = run(&args);
        assert!(o.status.success(), "{case}: {}", stderr(&o));
        let summary = stderr(&o);
        assert!(summary.starts_with("profgen remap: "), "{summary}");
        let text = std::fs::read_to_string(&out).unwrap();
        golden(&format!("{case}{suffix}.txt"), &text);
        let report = std::fs::read_to_string(&report).unwrap() + &summary;
        golden(&format!("{case}{suffix}.report"), &report);
        // The remapped profile reads back through llvm-profdata-19 unchanged.
        if have("llvm-profdata-19") {
            let view = Command::new("llvm-profdata-19")
                .args(["merge", "--sample", "--text", "-o", "-"])
                .arg(&out)
                .output()
                .unwrap();
            assert!(view.status.success() && view.stderr.is_empty(), "{case}: {}", stderr(&view));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn remap_onto_the_same_build_changes_nothing() {
    let dir = scratch("remap-self");
    for (case, _) in CASES {
        let stale = stale_profile(case, &dir, &["--llvm-compatible"]);
        let bin = sample(&format!("{case}/{case}"));
        let out = dir.join(format!("{case}.self.txt"));
        let o = run(&[
            "remap",
            "--profile",
            &stale,
            "--binary",
            bin.to_str().unwrap(),
            "--format=text",
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&stale).unwrap(), "{case}");
        assert!(stderr(&o).contains("matched by anchors (0 renamed), 0 dropped"), "{}", stderr(&o));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn command_line_errors() {
    let dir = scratch("remap-cli");
    let out = dir.join("out.prof");
    let out = out.to_str().unwrap();
    let probe_bin = sample("indirect_calls/indirect_calls");
    let line_bin = sample("cpp_virtual/cpp_virtual");
    // Usage: exit 2.
    let o = run(&["remap", "--binary", line_bin.to_str().unwrap(), "-o", out]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--profile <PATH>"), "{}", stderr(&o));
    let o = run(&[
        "remap",
        "--profile",
        "x",
        "--binary",
        "y",
        "-o",
        out,
        "--similarity-threshold",
        "101",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("101 is not in 0..=100"), "{}", stderr(&o));
    // Bad input: exit 1, the file named, nothing written.
    let missing = dir.join("missing.prof");
    let o = run(&[
        "remap",
        "--profile",
        missing.to_str().unwrap(),
        "--binary",
        line_bin.to_str().unwrap(),
        "-o",
        out,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with(&format!("profgen: error: {}: ", missing.display())),
        "{}",
        stderr(&o)
    );
    let junk = dir.join("junk.prof");
    std::fs::write(&junk, "main:1:0\n 1 1\n").unwrap();
    let o = run(&[
        "remap",
        "--profile",
        junk.to_str().unwrap(),
        "--binary",
        line_bin.to_str().unwrap(),
        "-o",
        out,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!("profgen: error: {}:2: expected `loc: ...`: ` 1 1`\n", junk.display())
    );
    // A probe profile onto a binary without probes.
    let stale = stale_profile("indirect_calls", &dir, &["--llvm-compatible"]);
    let o = run(&["remap", "--profile", &stale, "--binary", line_bin.to_str().unwrap(), "-o", out]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "profgen: error: {}: the profile {stale} is probe-based, but this binary has no pseudo probes\n",
            line_bin.display()
        )
    );
    // Raw binary cannot hold a probe profile.
    let o = run(&[
        "remap",
        "--profile",
        &stale,
        "--binary",
        probe_bin.to_str().unwrap(),
        "--format",
        "binary",
        "-o",
        out,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("Profile encoding format unsupported"), "{}", stderr(&o));
    assert!(!Path::new(out).exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Zero-count anchors: written where a direct call was not sampled, read by llvm-profdata-19 and
/// clang-19 (line and probe profiles, extbinary) without a warning.
#[test]
fn zero_count_anchors_are_read_without_warnings() {
    let dir = scratch("remap-anchors");
    let profile = |extra: &[&str]| {
        std::fs::read_to_string(stale_profile("cpp_virtual", &dir, extra)).unwrap()
    };
    // Off under --llvm-compatible, on by default, and either way as asked for.
    let plain = profile(&["--llvm-compatible"]);
    let za = profile(&["--llvm-compatible", "--zero-count-anchors"]);
    let default = profile(&[]);
    let default_off = profile(&["--zero-count-anchors=false"]);
    // The inlined constructors in main were never sampled: anchors at their call sites.
    assert!(!plain.contains("_ZN6SquareC2El:0"));
    assert!(!default_off.contains("_ZN6SquareC2El:0"));
    assert!(default.contains("\n 1: 0 _ZN6SquareC2El:0\n"), "{default}");
    assert!(za.starts_with("main:206833:0\n 1: 0 _ZN6SquareC2El:0\n 1.1: 0 _ZN6SquareC2El:0\n 2: 0 _ZN8TriangleC2Ell:0\n"), "{za}");
    if !have("llvm-profdata-19") || !have("clang-19") {
        eprintln!("note: llvm-profdata-19 or clang-19 missing; skipping the oracle checks");
        return;
    }
    for (case, source) in
        [("cpp_virtual", "cpp_virtual.cpp"), ("indirect_calls", "indirect_calls.c")]
    {
        let prof = dir.join(format!("{case}.za.extbinary"));
        let bin = sample(&format!("{case}/{case}"));
        let data = sample(&format!("{case}/perf.data"));
        let o = run(&[
            "--no-progress",
            "--zero-count-anchors",
            "--binary",
            bin.to_str().unwrap(),
            "--perfdata",
            data.to_str().unwrap(),
            "-o",
            prof.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let show = Command::new("llvm-profdata-19")
            .args(["show", "--sample"])
            .arg(&prof)
            .output()
            .unwrap();
        assert!(show.status.success() && show.stderr.is_empty(), "{case}: {}", stderr(&show));
        let probes = case == "indirect_calls";
        let compiler = if source.ends_with(".cpp") { "clang++-19" } else { "clang-19" };
        let cc = Command::new(compiler)
            .current_dir(sample(case))
            .args(["-O2", "-g", "-c", "-o"])
            .arg(dir.join(format!("{case}.o")))
            .arg(if probes { "-fpseudo-probe-for-profiling" } else { "-fdebug-info-for-profiling" })
            .arg(format!("-fprofile-sample-use={}", prof.display()))
            .arg(source)
            .output()
            .unwrap();
        assert!(cc.status.success() && cc.stderr.is_empty(), "{case}: {}", stderr(&cc));
    }
    let _ = std::fs::remove_dir_all(&dir);
}
