//! Command-line behaviour: llvm-profgen option spellings, usage errors (exit 2), debug listings.

mod common;

use common::{PROFGEN, have, root, scratch};
use std::process::{Command, Output};

fn profgen(args: &[&str]) -> Output {
    Command::new(PROFGEN).current_dir(root()).args(args).output().unwrap()
}

#[test]
fn conflicting_inputs_are_a_usage_error() {
    let o = profgen(&["--binary", "x", "--perfdata", "a", "--perfscript", "b", "-o", "/dev/null"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains(
        "`--perfscript`, `--perfdata` and `--unsymbolized-profile` cannot be used together."
    ));
}

#[test]
fn missing_output_is_a_usage_error() {
    let o = profgen(&["--binary", "x", "--perfdata", "a"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("for the --output option: must be specified at least once!")
    );
}

#[test]
fn compress_recursion_below_minus_one_is_rejected() {
    let o = profgen(&[
        "--binary",
        "x",
        "--perfdata",
        "a",
        "-o",
        "/dev/null",
        "--compress-recursion=-2",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("Value of --compress-recursion should >= -1")
    );
}

#[test]
fn llvm_style_single_dash_options_and_boolean_values_are_accepted() {
    let out = scratch("single-dash").join("out.txt");
    let o = profgen(&[
        "-binary=perf-samples/ip-inline-pie/prog",
        "-perfdata",
        "perf-samples/ip-inline-pie/perf.data",
        "-leading-ip-only=1",
        "-use-offset=false",
        "-format=text",
        &format!("-output={}", out.display()),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(
        text,
        std::fs::read_to_string(
            root().join("perf-samples/ip-inline-pie/expected/leading-ip-only.txt")
        )
        .unwrap()
    );
    std::fs::remove_file(out).unwrap();
}

#[test]
fn use_md5_with_text_format_warns_like_llvm_profgen() {
    let out = scratch("md5").join("out.txt");
    let o = profgen(&[
        "--binary=perf-samples/ip-inline-pie/prog",
        "--perfdata=perf-samples/ip-inline-pie/perf.data",
        "--leading-ip-only",
        "--use-md5",
        "--format=text",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("warning: -use-md5 is ignored. Specify --format=extbinary to enable it")
    );
    std::fs::remove_file(out).unwrap();
}

#[test]
fn disassembly_listing_with_probes_equals_llvm_profgen_19() {
    let bin = "perf-samples/inline_chain/inline_chain";
    let o = profgen(&[
        "--binary",
        bin,
        "--show-disassembly-only",
        "--show-pseudo-probe",
        "-o",
        "/dev/null",
    ]);
    assert!(o.status.success());
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
    let ours = String::from_utf8(o.stdout).unwrap();
    assert!(ours.starts_with("Pseudo Probe Desc:\nGUID: "), "{ours}");
    if !have("llvm-profgen-19") {
        eprintln!("note: llvm-profgen-19 not installed; oracle comparison skipped");
        return;
    }
    let llvm = Command::new("llvm-profgen-19")
        .current_dir(root())
        .args([
            "--binary",
            bin,
            "--show-disassembly-only",
            "--show-pseudo-probe",
            "-o",
            "/dev/null",
        ])
        .output()
        .unwrap();
    assert_eq!(ours, String::from_utf8(llvm.stdout).unwrap());
}

#[test]
fn a_directory_of_recordings_is_the_same_as_listing_them() {
    let dir = scratch("dir");
    let hosts = dir.join("hosts");
    std::fs::create_dir(&hosts).unwrap();
    let data = root().join("perf-samples/ip-inline-pie/perf.data");
    std::fs::copy(&data, hosts.join("host1.data")).unwrap();
    std::fs::copy(&data, hosts.join("host2.data")).unwrap();
    std::fs::write(hosts.join("notes.txt"), "not a recording\n").unwrap();
    let run = |inputs: &[&str], out: &str| {
        let mut args = vec![
            "--binary",
            "perf-samples/ip-inline-pie/prog",
            "--leading-ip-only",
            "--format=text",
            "-o",
            out,
        ];
        for i in inputs {
            args.extend(["--perfdata", i]);
        }
        let o = profgen(&args);
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        // The directory's notes.txt is skipped: exit 3.
        assert_eq!(o.status.code(), Some(if inputs.len() == 1 { 3 } else { 0 }), "{stderr}");
        (std::fs::read_to_string(out).unwrap(), stderr)
    };
    let listed_out = dir.join("listed.prof");
    let dir_out = dir.join("dir.prof");
    let d = data.to_str().unwrap();
    let (listed, _) = run(&[d, d], listed_out.to_str().unwrap());
    let (from_dir, stderr) = run(&[hosts.to_str().unwrap()], dir_out.to_str().unwrap());
    assert_eq!(from_dir, listed);
    assert!(
        stderr.contains(&format!(
            "warning: {}: at byte offset 0: expected the perf.data magic \"PERFILE2\", found \"not a re\"; skipped\n",
            hosts.join("notes.txt").display()
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("profgen: 3 inputs (1 skipped, 0 truncated); 9448 samples read"),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--pid` and `--perf-event` that match no sample say so and how many each dropped, rather
/// than that no sample has a branch stack (what the samples left, none, would have lacked).
#[test]
fn filters_that_keep_no_sample_are_named_not_blamed_on_branch_stacks() {
    let out = scratch("filters-keep-nothing").join("out.prof");
    let out = out.to_str().unwrap();
    let data = "perf-samples/threads/perf.data";
    let base = ["--binary", "perf-samples/threads/threads", "--perfdata", data, "-o", out];
    let error = |extra: &[&str]| {
        let o = profgen(&[&base[..], extra].concat());
        assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stderr).trim_end().to_string()
    };
    let events = "of other events than --perf-event cycles (`perf evlist -i FILE` lists the \
                  input's events, with their modifiers such as cycles:u)";
    assert_eq!(
        error(&["--perf-event", "cycles"]),
        format!(
            "profgen: error: {data}: the filters keep no sample: of 1950 samples read, 1950 {events}"
        )
    );
    assert_eq!(
        error(&["--pid", "1"]),
        format!(
            "profgen: error: {data}: the filters keep no sample: of 1950 samples read, 1950 of \
             other processes than --pid 1"
        )
    );
    assert_eq!(
        error(&["--pid", "1", "--perf-event", "cycles"]),
        format!(
            "profgen: error: {data}: the filters keep no sample: of 1950 samples read, 1950 of \
             other processes than --pid 1 and 0 {events}"
        )
    );
}
