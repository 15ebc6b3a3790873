//! Scale and parallelism: the same counters whatever the number of reading workers, inputs with
//! very many processes in time linear in their size, and `--threads` requests beyond what the
//! machine runs lowered with a warning. Timing goals live in `scripts/bench`; these tests guard
//! the algorithms (a quadratic one takes minutes here, the linear one well under a second).

mod common;

use common::{PROFGEN, root, sample, scratch};
use profgen::aggregate::ContextCounters;
use profgen::aggregate::read::{Input, InputsReport, ReadOptions, read_counters};
use profgen::binary::{Binary, LoadOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

fn read(
    binary: &Binary,
    data: &Path,
    opts: &ReadOptions,
    workers: usize,
) -> (ContextCounters, InputsReport) {
    let input = Input::PerfData(vec![data.to_path_buf()]);
    let mut report = InputsReport::default();
    let counters = read_counters(binary, &input, opts, workers, &mut report).unwrap();
    (counters, report)
}

/// Every committed perf.data with the binary it profiles and whether it holds IP samples
/// (`--leading-ip-only`).
fn corpus_inputs() -> Vec<(PathBuf, PathBuf, bool)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(root().join("perf-samples")).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(text) = std::fs::read_to_string(dir.join("case.toml")) else { continue };
        let case: toml::Table = toml::from_str(&text).unwrap();
        let binary = dir.join(case["binary"].as_str().unwrap());
        let ip = case["kind"].as_str() == Some("ip");
        for key in ["perfdata", "perfdata_branches"] {
            if let Some(data) = case.get(key).and_then(|v| v.as_str()) {
                out.push((binary.clone(), dir.join(data), ip));
            }
        }
    }
    out.sort();
    out
}

/// The parallel reader (batches, per-worker address maps following the reading thread's map
/// changes) gives what the sequential one gives, on every corpus recording.
#[test]
fn counters_are_identical_for_any_number_of_reading_workers() {
    let inputs = corpus_inputs();
    assert!(inputs.len() >= 10, "corpus recordings found: {}", inputs.len());
    for (binary_path, data, ip) in inputs {
        let binary = Binary::load(&binary_path, &LoadOptions::default()).unwrap();
        let mut opts = ReadOptions::default();
        opts.sample.leading_ip_only = ip;
        let (one, one_report) = read(&binary, &data, &opts, 1);
        assert!(one_report.samples.used > 0, "{}: no sample used", data.display());
        for workers in [2, 3, 8] {
            let (many, report) = read(&binary, &data, &opts, workers);
            let what = format!("{} with {workers} workers", data.display());
            assert_eq!(many.by_context, one.by_context, "{what}");
            assert_eq!(report.samples, one_report.samples, "{what}");
        }
    }
}

/// `profgen-synth processes N`: N processes, each exec'd, mapping the binary at its own
/// address, with one sample, exiting.
fn many_processes(n: u32, binary: &Path, dir: &Path) -> PathBuf {
    let out = dir.join(format!("processes-{n}.data"));
    let o = Command::new(env!("CARGO_BIN_EXE_profgen-synth"))
        .args(["processes", &n.to_string(), "--binary"])
        .arg(binary)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "profgen-synth: {}", String::from_utf8_lossy(&o.stderr));
    out
}

/// A system-wide recording of 100,000 processes (one mmap and one sample each): every mmap
/// used to copy the whole address map for the workers and rescan the process's mappings, so
/// 100,000 processes did not finish in minutes. Now each change costs what it changes: the
/// generous bound here is hundreds of times what the linear algorithm needs.
#[test]
fn hundred_thousand_processes_are_read_in_linear_time_at_any_worker_count() {
    let dir = scratch("many-processes");
    let binary_path = sample("inline_chain/inline_chain");
    let data = many_processes(100_000, &binary_path, &dir);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let binary = Binary::load(&binary_path, &LoadOptions::default()).unwrap();
        let opts = ReadOptions::default();
        let runs: Vec<_> = [1, 2, 4].map(|workers| read(&binary, &data, &opts, workers)).into();
        let _ = tx.send(runs);
    });
    let runs = rx.recv_timeout(Duration::from_secs(120)).expect("reading took over two minutes");
    for (counters, report) in &runs {
        assert_eq!(report.samples.read, 100_000);
        assert_eq!(report.samples.used, 100_000);
        assert_eq!(counters.by_context, runs[0].0.by_context);
        // Matched on the reading thread once it defers the mapping to the workers' copies.
        assert_eq!(report.matched_by, runs[0].1.matched_by);
        assert!(report.matched_by.is_some());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--threads` beyond the cores the process may use is lowered to them, with a warning; the
/// profile is the one of any other thread count.
#[test]
fn threads_beyond_the_cores_are_lowered_with_a_warning() {
    let dir = scratch("threads-cap");
    let binary = sample("inline_chain/inline_chain");
    let data = sample("inline_chain/perf.data");
    let cores = std::thread::available_parallelism().unwrap().get();
    let run = |threads: &str, out: &Path| {
        let o = Command::new(PROFGEN)
            .arg("--binary")
            .arg(&binary)
            .arg("--perfdata")
            .arg(&data)
            .args(["--threads", threads, "--format=text", "-o"])
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stderr).unwrap()
    };
    let stderr = run("100000", &dir.join("many.prof"));
    assert!(
        stderr.contains(&format!(
            "warning: --threads 100000 lowered to {cores}: this machine runs {cores} threads at once"
        )),
        "{stderr}"
    );
    let stderr = run("1", &dir.join("one.prof"));
    assert!(!stderr.contains("lowered"), "{stderr}");
    assert_eq!(
        std::fs::read(dir.join("many.prof")).unwrap(),
        std::fs::read(dir.join("one.prof")).unwrap()
    );
    let _ = std::fs::remove_dir_all(&dir);
}
