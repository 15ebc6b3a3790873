//! Whole-profile tests on the perf-samples corpus: one test per case × option set.
//!
//! Each test runs the real `profgen` binary, by default and with `--llvm-compatible`, and checks
//! its text profiles against `perf-samples/<case>/expected/<options>.txt` and
//! `<options>.llvm-compatible.txt` (regenerate with `PROFGEN_BLESS=1`), and, when
//! `llvm-profgen-19` and `llvm-profdata-19` are installed, that the canonical form
//! (`llvm-profdata-19 merge --sample --text`) of the `--llvm-compatible` one equals
//! llvm-profgen-19's for the same input, unless the case lists the option set as a deliberate
//! difference (README, "Differences from llvm-profgen").

mod common;

use common::{PROFGEN, have, llvm_canonical as canonical, root, sample, scratch};
use std::path::{Path, PathBuf};
use std::process::Command;

struct Case {
    dir: PathBuf,
    binary: PathBuf,
    perfdata: PathBuf,
    kind: String,
}

/// `recording`: the case.toml key of the perf.data (`perfdata`, or `perfdata_branches` for the
/// taken-branch recording of an lbr-stack case).
fn case_recording(name: &str, recording: &str) -> Case {
    let dir = sample(name);
    let toml: toml::Table =
        std::fs::read_to_string(dir.join("case.toml")).unwrap().parse().unwrap();
    let s = |k: &str| toml[k].as_str().unwrap().to_string();
    Case { binary: dir.join(s("binary")), perfdata: dir.join(s(recording)), kind: s("kind"), dir }
}

fn case(name: &str) -> Case {
    case_recording(name, "perfdata")
}

fn run_profgen(binary: &Path, input: &[&str], opts: &[&str], out: &Path) -> String {
    let o = Command::new(PROFGEN)
        .arg("--binary")
        .arg(binary)
        .args(input)
        .args(opts)
        .arg("--format=text")
        .arg("--output")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "profgen failed: {}", String::from_utf8_lossy(&o.stderr));
    std::fs::read_to_string(out).unwrap()
}

/// llvm-profgen-19's profile for the case, from the `perf script` text
/// `scripts/perf-script-for-llvm` writes: its own `--perfdata` runs this machine's perf 6.x,
/// whose map-relative call-chain addresses llvm-profgen takes as absolute (every frame then
/// looks external), and it rejects IP-only scripts (the script adds a dummy branch per sample,
/// ignored under --leading-ip-only). With --ignore-stack-samples the script has no call stacks,
/// as llvm-profgen's own `perf script -F ip,brstack` run: from a script with stacks it would drop
/// the samples whose stack does not start in the binary.
fn llvm_profile(c: &Case, opts: &[&str], work: &Path) -> PathBuf {
    let script = work.join("llvm.perfscript");
    let kind = if c.kind == "lbr-stack" && opts.contains(&"--ignore-stack-samples") {
        "lbr"
    } else {
        c.kind.as_str()
    };
    let o = Command::new(root().join("scripts").join("perf-script-for-llvm"))
        .arg(&c.perfdata)
        .arg(kind)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "perf-script-for-llvm failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::write(&script, o.stdout).unwrap();
    let out = work.join("llvm.prof");
    let o = Command::new("llvm-profgen-19")
        .current_dir(work)
        .arg("--binary")
        .arg(&c.binary)
        .arg("--perfscript")
        .arg(&script)
        .args(opts)
        .arg("--format=text")
        .arg("--output")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "llvm-profgen-19 failed: {}", String::from_utf8_lossy(&o.stderr));
    out
}

/// Removes the top-level profiles of `functions` from a canonical text profile.
fn without_functions(text: &str, functions: &[&str]) -> String {
    let mut out = String::new();
    let mut keep = true;
    for line in text.lines() {
        if !line.starts_with(' ') {
            let name = line.rsplitn(3, ':').nth(2).unwrap_or(line);
            keep = !functions.contains(&name);
        }
        if keep {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Compares `text` with the golden file `expected/FILE` of the case (written with
/// `PROFGEN_BLESS=1`).
fn check_golden(c: &Case, name: &str, file: &str, text: &str) {
    let golden = c.dir.join("expected").join(file);
    if std::env::var_os("PROFGEN_BLESS").is_some() {
        std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
        std::fs::write(&golden, text).unwrap();
    }
    let expected = std::fs::read_to_string(&golden)
        .unwrap_or_else(|_| panic!("missing {}; run with PROFGEN_BLESS=1", golden.display()));
    assert_eq!(text, expected, "{name}: profile differs from {}", golden.display());
}

/// `deliberately_different`: top-level functions whose profiles differ from llvm-profgen-19's
/// because of a listed llvm-profgen bug (README, "Differences from llvm-profgen"); profgen must
/// profile them, and everything else must be identical.
fn check(name: &str, label: &str, opts: &[&str], deliberately_different: &[&str]) {
    // Labels ending in `-branches` use the taken-branch recording.
    let recording = if label.ends_with("-branches") { "perfdata_branches" } else { "perfdata" };
    let c = case_recording(name, recording);
    let work = scratch(&format!("{name}-{label}"));
    let input = ["--perfdata", c.perfdata.to_str().unwrap()];
    let default = run_profgen(&c.binary, &input, opts, &work.join("default.prof"));
    check_golden(&c, name, &format!("{label}.txt"), &default);
    let ours_path = work.join("ours.prof");
    let compatible: Vec<&str> = opts.iter().copied().chain(["--llvm-compatible"]).collect();
    let ours = run_profgen(&c.binary, &input, &compatible, &ours_path);
    check_golden(&c, name, &format!("{label}.llvm-compatible.txt"), &ours);

    if have("llvm-profgen-19") && have("llvm-profdata-19") && have("perf") {
        let theirs = llvm_profile(&c, opts, &work);
        let ours = canonical(&ours_path);
        for f in deliberately_different {
            assert!(
                ours.lines().any(|l| l.starts_with(&format!("{f}:"))),
                "{name} {label}: expected a profile of {f}"
            );
        }
        assert_eq!(
            without_functions(&ours, deliberately_different),
            without_functions(&canonical(&theirs), deliberately_different),
            "{name} {label}: differs from llvm-profgen-19"
        );
    } else {
        eprintln!(
            "note: llvm-profgen-19/llvm-profdata-19/perf not installed; oracle comparison skipped"
        );
    }
    let _ = std::fs::remove_dir_all(&work);
}

macro_rules! corpus_test {
    ($fn:ident, $case:literal, $label:literal, [$($opt:literal),*]) => {
        corpus_test!($fn, $case, $label, [$($opt),*], deliberately_different = []);
    };
    ($fn:ident, $case:literal, $label:literal, [$($opt:literal),*], deliberately_different = [$($f:literal),*]) => {
        #[test]
        fn $fn() {
            check($case, $label, &[$($opt),*], &[$($f),*]);
        }
    };
}

corpus_test!(
    ip_inline_pie_leading_ip_only,
    "ip-inline-pie",
    "leading-ip-only",
    ["--leading-ip-only"]
);
corpus_test!(
    ip_nopie_pipe_zstd_leading_ip_only,
    "ip-nopie-pipe-zstd",
    "leading-ip-only",
    ["--leading-ip-only"]
);

// LBR-only (non-CS) profiles from the LBR + call-stack recordings.
corpus_test!(inline_chain_ignore_stack, "inline_chain", "ignore-stack", ["--ignore-stack-samples"]);
corpus_test!(recursion_ignore_stack, "recursion", "ignore-stack", ["--ignore-stack-samples"]);
corpus_test!(shared_lib_ignore_stack, "shared_lib", "ignore-stack", ["--ignore-stack-samples"]);
corpus_test!(switch_table_ignore_stack, "switch_table", "ignore-stack", ["--ignore-stack-samples"]);
corpus_test!(tailcall_ignore_stack, "tailcall", "ignore-stack", ["--ignore-stack-samples"]);
corpus_test!(threads_ignore_stack, "threads", "ignore-stack", ["--ignore-stack-samples"]);
// The forked child inherits the mapping without an mmap event of its own; llvm-profgen-19 only
// reads processes with such an event (`perf script --pid`) and loses the child's samples
// (all of child_work, and main's code after the fork in the child).
corpus_test!(
    fork_ignore_stack,
    "fork",
    "ignore-stack",
    ["--ignore-stack-samples"],
    deliberately_different = ["child_work", "main"]
);
corpus_test!(
    indirect_calls_ignore_stack,
    "indirect_calls",
    "ignore-stack",
    ["--ignore-stack-samples"]
);
corpus_test!(
    indirect_calls_ignore_stack_update_total,
    "indirect_calls",
    "ignore-stack-update-total",
    ["--ignore-stack-samples", "--update-total-samples"]
);
// `_start` and `_dl_relocate_static_pie` have no DWARF: the default profiles them from the
// symbol table (its golden lists them), --llvm-compatible does not, as llvm-profgen-19.
corpus_test!(
    switch_table_ignore_stack_fill_zero,
    "switch_table",
    "ignore-stack-fill-zero",
    ["--ignore-stack-samples", "--fill-zero-for-all-funcs"]
);
corpus_test!(
    tailcall_ignore_stack_trim_cold,
    "tailcall",
    "ignore-stack-trim-cold",
    ["--ignore-stack-samples", "--trim-cold-profile"]
);

// Default options: context-sensitive profiles with the pre-inliner using context sizes.
corpus_test!(inline_chain_default, "inline_chain", "default", []);
corpus_test!(recursion_default, "recursion", "default", []);
corpus_test!(shared_lib_default, "shared_lib", "default", []);
corpus_test!(switch_table_default, "switch_table", "default", []);
corpus_test!(tailcall_default, "tailcall", "default", []);
corpus_test!(threads_default, "threads", "default", []);
corpus_test!(fork_default, "fork", "default", []);
corpus_test!(indirect_calls_default, "indirect_calls", "default", []);
// `noop` is inlined into `work` without leaving instructions; only its pseudo probe says it was
// there. With no hot threshold and no bonus for previous inlining, the pre-inliner inlines only
// zero-cost contexts: `noop` (size known to be 0), not `add1`.
corpus_test!(optimized_away_default, "optimized_away", "default", []);
corpus_test!(
    optimized_away_zero_cost_only,
    "optimized_away",
    "zero-cost-only",
    [
        "--sample-profile-hot-inline-threshold=0",
        "--csspgo-preinliner-multiplier-for-previous-inlining=1"
    ]
);

// Line-based CS: llvm-profgen-19 files the head samples of calls made at a discriminated line
// under the wrong context and doubles the call count (README difference 9), which also makes
// its pre-inliner inline `accumulate<long>` into main; everything else is identical.
corpus_test!(
    cpp_virtual_default,
    "cpp_virtual",
    "default",
    [],
    deliberately_different = ["_Z10accumulateIlET_PKS0_i", "main"]
);
corpus_test!(cpp_virtual_ignore_stack, "cpp_virtual", "ignore-stack", ["--ignore-stack-samples"]);

// A comparator that libc's qsort calls and that ends in a tail jump; mutual recursion through
// tail jumps (line-based CS).
corpus_test!(qsort_cmp_default, "qsort_cmp", "default", []);
corpus_test!(qsort_cmp_ignore_stack, "qsort_cmp", "ignore-stack", ["--ignore-stack-samples"]);
corpus_test!(tail_chain_default, "tail_chain", "default", []);
corpus_test!(tail_chain_ignore_stack, "tail_chain", "ignore-stack", ["--ignore-stack-samples"]);

// The taken-branch recordings (`br_inst_retired.near_taken`): every sample's IP is a branch
// target, so many call stacks start in a prolog.
corpus_test!(recursion_default_branches, "recursion", "default-branches", []);
corpus_test!(tailcall_default_branches, "tailcall", "default-branches", []);
corpus_test!(
    cpp_virtual_ignore_stack_branches,
    "cpp_virtual",
    "ignore-stack-branches",
    ["--ignore-stack-samples"]
);

// IP samples with truth (profgen-record, cpu-clock): probe and line builds of one program.
corpus_test!(ip_probes_leading_ip_only, "ip-probes", "leading-ip-only", ["--leading-ip-only"]);
corpus_test!(ip_lines_leading_ip_only, "ip-lines", "leading-ip-only", ["--leading-ip-only"]);

/// `--skip-symbolization` then `--unsymbolized-profile` gives the direct run's profile.
fn check_unsymbolized_round_trip(name: &str, opts: &[&str]) {
    let c = case(name);
    let work = scratch(&format!("{name}-roundtrip"));
    let perfdata = ["--perfdata", c.perfdata.to_str().unwrap()];
    let direct = run_profgen(&c.binary, &perfdata, opts, &work.join("direct.prof"));
    let raw = work.join("unsymbolized.txt");
    let o = Command::new(PROFGEN)
        .arg("--binary")
        .arg(&c.binary)
        .args(perfdata)
        .args(opts)
        .arg("--skip-symbolization")
        .arg("--output")
        .arg(&raw)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let again = run_profgen(
        &c.binary,
        &["--unsymbolized-profile", raw.to_str().unwrap()],
        opts,
        &work.join("again.prof"),
    );
    assert_eq!(again, direct, "{name}: the unsymbolized round trip changed the profile");
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn unsymbolized_round_trip_probe_cs() {
    check_unsymbolized_round_trip("inline_chain", &[]);
}

#[test]
fn unsymbolized_round_trip_line_cs_with_inlined_leaves() {
    check_unsymbolized_round_trip("cpp_virtual", &[]);
}

#[test]
fn unsymbolized_round_trip_lbr_only() {
    check_unsymbolized_round_trip("switch_table", &["--ignore-stack-samples"]);
}

#[test]
fn unsymbolized_round_trip_ip_samples() {
    check_unsymbolized_round_trip("ip-inline-pie", &["--leading-ip-only"]);
}

/// `perf script` text of a recording (as llvm-profgen reads it) gives the same profile as the
/// perf.data itself.
fn check_perfscript_equals_perfdata(name: &str, opts: &[&str]) {
    if !have("perf") {
        eprintln!("note: perf not installed; skipped");
        return;
    }
    let c = case(name);
    let work = scratch(&format!("{name}-perfscript"));
    let script = Command::new(root().join("scripts/perf-script-for-llvm"))
        .arg(&c.perfdata)
        .arg(&c.kind)
        .output()
        .unwrap();
    assert!(script.status.success(), "{}", String::from_utf8_lossy(&script.stderr));
    std::fs::write(work.join("in.perfscript"), &script.stdout).unwrap();
    let from_data = run_profgen(
        &c.binary,
        &["--perfdata", c.perfdata.to_str().unwrap()],
        opts,
        &work.join("data.prof"),
    );
    let from_script = run_profgen(
        &c.binary,
        &["--perfscript", work.join("in.perfscript").to_str().unwrap()],
        opts,
        &work.join("script.prof"),
    );
    assert_eq!(from_script, from_data, "{name}: --perfscript and --perfdata profiles differ");
    let _ = std::fs::remove_dir_all(&work);
}

#[test]
fn perfscript_equals_perfdata_cs() {
    // perf script names no event: the weighting is asked for (the LBR cycle counts are read
    // from both).
    check_perfscript_equals_perfdata("inline_chain", &["--lbr-weighting=cycles"]);
}

#[test]
fn perfscript_equals_perfdata_ip() {
    check_perfscript_equals_perfdata("ip-inline-pie", &["--leading-ip-only"]);
}

/// Under instruction weighting a window that runs through code outside the binary (a call into
/// libc) is sampled for those instructions too: they count in its span, estimated from the
/// addresses at 4 bytes per instruction. fork's `child_work`: two windows of one 4-instruction
/// range each, the second also returning from 400 bytes (101 instructions) outside the binary;
/// 100 samples each, weights 1/4 and 1/105, scaled to the 200 plain range counts: 193 and 7
/// (100 and 100 unweighted).
#[test]
fn windows_through_external_code_weigh_their_external_instructions() {
    let work = scratch("external-span");
    let within = " 0x40132a/0x4012e0/P/-/-/0  0x401315/0x401320/P/-/-/0\n";
    let through_libc = " 0x40133a/0x401346/P/-/-/0  0x7f0000001190/0x401330/P/-/-/0  \
                        0x40131b/0x7f0000001000/P/-/-/0\n";
    let script = work.join("in.perfscript");
    std::fs::write(
        &script,
        "PERF_RECORD_MMAP2 1/1: [0x401000(0x1000) @ 0x1000 00:00 0 0]: r-xp /x/fork\n".to_string()
            + &(within.to_string() + through_libc).repeat(100),
    )
    .unwrap();
    let ranges = |weighting: &str| {
        let out = work.join(format!("{weighting}.raw"));
        let o = Command::new(PROFGEN)
            .current_dir(root())
            .args(["--binary", "perf-samples/fork/fork", "--perfscript"])
            .arg(&script)
            .args(["--skip-symbolization", "--lbr-weighting", weighting, "-o"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let text = std::fs::read_to_string(&out).unwrap();
        text.lines().skip(1).take(2).map(str::to_string).collect::<Vec<_>>()
    };
    assert_eq!(ranges("instructions"), ["320-32a:193", "330-33a:7"]);
    assert_eq!(ranges("none"), ["320-32a:100", "330-33a:100"]);
    let _ = std::fs::remove_dir_all(&work);
}
