//! Batch input (issues 10 and 17): a `--perfdata` directory skips, with a warning naming each and
//! why, every entry it cannot use (never opening one that is not a regular file, so a FIFO never
//! hangs the run) and profiles the rest; `--keep-going` gives named inputs the same treatment,
//! `--no-keep-going` makes any bad file fatal; exit 3 says some input was skipped or truncated;
//! a file cut before its first record is an error, never an empty profile over the last good
//! one; `--report` writes a JSON account of the run.

mod common;

use common::{
    mkfifo, profgen_command, record_starts, run_with_deadline, sample, scratch, small_perf_data,
    stderr, write,
};
use std::path::{Path, PathBuf};
use std::process::Output;

/// Long enough for any of these runs; a FIFO that is opened blocks forever.
const DEADLINE_SECONDS: u64 = 60;

fn binary() -> PathBuf {
    sample("inline_chain/inline_chain")
}

/// Runs profgen on `inputs` (each as `--perfdata`) with `opts`; text profile to `out`.
fn profgen(opts: &[&str], inputs: &[&Path], out: &Path) -> Output {
    let binary = binary();
    let mut files = vec![("--binary", binary.as_path())];
    files.extend(inputs.iter().map(|p| ("--perfdata", *p)));
    run_with_deadline(profgen_command(opts, &files, out), DEADLINE_SECONDS)
}

/// The last line of stderr, for a failed run.
fn error_line(o: &Output) -> String {
    stderr(o).lines().last().unwrap_or_default().to_string()
}

/// A directory holding every kind of entry a fleet collection can end up with: two good
/// recordings, one cut mid-way (usable up to the cut), and seven that cannot be used.
struct Hosts {
    dir: PathBuf,
    good: [PathBuf; 2],
    truncated: PathBuf,
    /// The data section's offset (where `header_only` ends) and the recording's length.
    data_offset: usize,
    data_end: usize,
    corrupt_at: usize,
    truncated_len: usize,
}

fn hosts(name: &str) -> Hosts {
    let dir = scratch(name).join("hosts");
    std::fs::create_dir(&dir).unwrap();
    let data = small_perf_data();
    let (data_offset, data_size, starts) = record_starts(&data);
    let good = [write(&dir, "a_good.data", &data), write(&dir, "z_good.data", &data)];
    write(&dir, "b_empty.data", b"");
    write(&dir, "c_notes.txt", b"not a recording at all\n");
    let mut corrupt = data.clone();
    let corrupt_at = starts[5];
    corrupt[corrupt_at + 6..corrupt_at + 8].copy_from_slice(&3u16.to_le_bytes());
    write(&dir, "d_corrupt.data", &corrupt);
    write(&dir, "e_header_only.data", &data[..data_offset]);
    let truncated_len = starts[30];
    let truncated = write(&dir, "f_truncated.data", &data[..truncated_len]);
    mkfifo(&dir.join("g_fifo"));
    std::fs::create_dir(dir.join("h_subdir")).unwrap();
    std::os::unix::fs::symlink("/nonexistent", dir.join("i_dangling")).unwrap();
    Hosts {
        dir,
        good,
        truncated,
        data_offset,
        data_end: data_offset + data_size,
        corrupt_at,
        truncated_len,
    }
}

impl Hosts {
    /// The warnings, in name order, of every entry skipped or truncated.
    fn warnings(&self) -> String {
        let d = self.dir.display();
        let (off, end, trunc) = (self.data_offset, self.data_end, self.truncated_len);
        [
            format!(
                "{d}/b_empty.data: not a perf.data file: 0 bytes is too short for the 16-byte perf.data header; skipped"
            ),
            format!(
                "{d}/c_notes.txt: at byte offset 0: expected the perf.data magic \"PERFILE2\", found \"not a re\"; skipped"
            ),
            format!(
                "{d}/d_corrupt.data: at byte offset {}: record size 3 is smaller than its 8-byte header; skipped",
                self.corrupt_at + 6
            ),
            format!(
                "{d}/e_header_only.data: at byte offset {off}: the input ends before its first complete record: data section [{off}, {end}) extends past the end of the file ({off} bytes); skipped"
            ),
            format!(
                "{d}/f_truncated.data: input truncated at byte offset {trunc}: data section [{off}, {end}) extends past the end of the file ({trunc} bytes); using the events before it"
            ),
            format!("{d}/g_fifo: not a regular file but a FIFO; skipped"),
            format!("{d}/h_subdir: not a regular file but a directory; skipped"),
            format!("{d}/i_dangling: No such file or directory (os error 2); skipped"),
        ]
        .iter()
        .map(|w| format!("warning: {w}\n"))
        .collect()
    }
}

/// Every entry of the directory that cannot be used is skipped with a warning saying why (the
/// FIFO without being opened), the truncated recording gives the events before its cut, and
/// the rest is profiled: the profile of naming the usable files, exit 3, and the summary line
/// counts the skipped and truncated inputs.
#[test]
fn a_directory_skips_every_file_it_cannot_use_and_says_why() {
    let h = hosts("directory");
    let out = h.dir.with_file_name("dir.prof");
    let o = profgen(&[], &[&h.dir], &out);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.starts_with(&h.warnings()), "{err}");
    assert!(
        err.ends_with(
            "profgen: 10 inputs (7 skipped, 1 truncated); 138 samples read, 12 used (10 distinct stacks), \
             126 dropped (126 outside the binary); binary matched by build id; \
             LBR windows weighted by 1/cycles (sampled by cycles); 2 functions in the profile\n"
        ),
        "{err}"
    );
    let named = h.dir.with_file_name("named.prof");
    let o = profgen(&[], &[&h.good[0], &h.truncated, &h.good[1]], &named);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), std::fs::read_to_string(&named).unwrap());
}

/// `--no-keep-going`: the first entry (in name order) that cannot be used fails the run, exit 1,
/// and the profile at `--output` stays as it was. The FIFO is still never opened.
#[test]
fn no_keep_going_makes_any_bad_file_in_a_directory_fatal() {
    let h = hosts("strict");
    let out = write(&h.dir.with_file_name(""), "app.prof", b"last good profile\n");
    let o = profgen(&["--no-keep-going"], &[&h.dir], &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        error_line(&o),
        format!(
            "profgen: error: {}/b_empty.data: not a perf.data file: 0 bytes is too short for the 16-byte perf.data header",
            h.dir.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "last good profile\n");
    // The last of `--keep-going` / `--no-keep-going` counts.
    let o = profgen(&["--no-keep-going", "--keep-going"], &[&h.dir], &out);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let o = profgen(&["--keep-going", "--no-keep-going"], &[&h.dir], &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

/// A named input that cannot be used is fatal by default (exit 1, nothing written);
/// `--keep-going` skips it with a warning and profiles the rest (exit 3).
#[test]
fn named_inputs_fail_by_default_and_are_skipped_with_keep_going() {
    let h = hosts("named");
    let corrupt = h.dir.join("d_corrupt.data");
    let out = h.dir.with_file_name("out.prof");
    let o = profgen(&[], &[&h.good[0], &corrupt], &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        error_line(&o),
        format!(
            "profgen: error: {}: at byte offset {}: record size 3 is smaller than its 8-byte header",
            corrupt.display(),
            h.corrupt_at + 6
        )
    );
    assert!(!out.exists());

    let o = profgen(&["--keep-going"], &[&h.good[0], &corrupt], &out);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.starts_with(&format!(
            "warning: {}: at byte offset {}: record size 3 is smaller than its 8-byte header; skipped\n",
            corrupt.display(),
            h.corrupt_at + 6
        )),
        "{err}"
    );
    assert!(
        err.contains("\nprofgen: 2 inputs (1 skipped, 0 truncated); 55 samples read, "),
        "{err}"
    );
    let alone = h.dir.with_file_name("alone.prof");
    let o = profgen(&[], &[&h.good[0]], &alone);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), std::fs::read_to_string(&alone).unwrap());
}

/// When every input is skipped there is nothing to profile: exit 1 and the last good profile
/// stays, rather than an empty profile replacing it.
#[test]
fn a_run_with_every_input_skipped_fails_and_keeps_the_last_profile() {
    let h = hosts("all_skipped");
    let out = write(&h.dir.with_file_name(""), "app.prof", b"last good profile\n");
    let bad = [h.dir.join("b_empty.data"), h.dir.join("e_header_only.data")];
    let o = profgen(&["--keep-going"], &[&bad[0], &bad[1]], &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        error_line(&o),
        "profgen: error: none of the 2 inputs could be used (each is named in a warning above)"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "last good profile\n");
}

/// A header whose data section starts at or past the end of the file (a copy cut right after
/// the header, or a corrupt offset) leaves no record to read: an error naming the file and the
/// offset, exit 1, and the last good profile stays (it used to be replaced by an empty one).
#[test]
fn a_data_section_past_the_end_of_the_file_is_an_error_not_an_empty_profile() {
    let h = hosts("past_end");
    let out = write(&h.dir.with_file_name(""), "app.prof", b"last good profile\n");
    let data = small_perf_data();
    let mut far = data.clone();
    far[40..48].copy_from_slice(&(data.len() as u64 + 100).to_le_bytes());
    let far = write(&h.dir.with_file_name(""), "far.data", &far);
    let header_only = h.dir.join("e_header_only.data");
    let (off, end) = (h.data_offset, h.data_end);
    for (input, expected) in [
        (
            &header_only,
            format!(
                "at byte offset {off}: the input ends before its first complete record: data section [{off}, {end}) extends past the end of the file ({off} bytes)"
            ),
        ),
        (
            &far,
            format!(
                "at byte offset {len}: the input ends before its first complete record: data section [{}, {}) extends past the end of the file ({len} bytes)",
                data.len() + 100,
                data.len() + 100 + end - off,
                len = data.len()
            ),
        ),
    ] {
        let o = profgen(&[], &[input], &out);
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert_eq!(error_line(&o), format!("profgen: error: {}: {expected}", input.display()));
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "last good profile\n");
    }
}

/// A named FIFO (`--perfdata <(perf record -o - ...)`) is read as a stream, like `-`.
#[test]
fn a_named_fifo_is_read_as_a_stream() {
    let dir = scratch("named_fifo");
    let fifo = dir.join("pipe");
    mkfifo(&fifo);
    let data = sample("ip-nopie-pipe-zstd/perf.data");
    let writer = {
        let (fifo, data) = (fifo.clone(), data.clone());
        std::thread::spawn(move || std::fs::write(&fifo, std::fs::read(data).unwrap()).unwrap())
    };
    let prog = sample("ip-nopie-pipe-zstd/prog");
    let run = |input: &Path, out: &Path| {
        let files = [("--binary", prog.as_path()), ("--perfdata", input)];
        run_with_deadline(profgen_command(&["--leading-ip-only"], &files, out), DEADLINE_SECONDS)
    };
    let (from_fifo, from_file) = (dir.join("fifo.prof"), dir.join("file.prof"));
    let o = run(&fifo, &from_fifo);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    writer.join().unwrap();
    let o = run(&data, &from_file);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(&from_fifo).unwrap(), std::fs::read(&from_file).unwrap());
}

/// The report with its (varying) phase times replaced by 0.
fn report_without_times(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| match line.split_once("\"seconds\": ") {
            Some((head, t)) => {
                assert!(t.parse::<f64>().is_ok_and(|t| t >= 0.0), "{line}");
                format!("{head}\"seconds\": 0\n")
            }
            None => format!("{line}\n"),
        })
        .collect()
}

/// `--report`: per input its status, samples read, used and dropped by reason, how the binary
/// was matched, its warnings, or why it was skipped; totals; phase times; every warning; the
/// exit code. Written atomically next to nothing else.
#[test]
fn report_accounts_for_every_input_of_a_batch() {
    let dir = scratch("report").join("hosts");
    std::fs::create_dir(&dir).unwrap();
    let data = small_perf_data();
    let (off, size, starts) = record_starts(&data);
    write(&dir, "a.data", &data);
    write(&dir, "b.data", b"");
    write(&dir, "c.data", &data[..starts[30]]);
    mkfifo(&dir.join("d.fifo"));
    let top = dir.with_file_name("");
    let (out, report) = (top.join("app.prof"), top.join("run.json"));
    let o = profgen(&["--report", report.to_str().unwrap()], &[&dir], &out);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let d = dir.display();
    let truncation = format!(
        "input truncated at byte offset {cut}: data section [{off}, {end}) extends past the end of the file ({cut} bytes); using the events before it",
        cut = starts[30],
        end = off + size
    );
    let samples = |read, used| {
        format!(
            r#"{{
        "read": {read},
        "used": {used},
        "dropped": {{
          "outside_binary": {},
          "without_branch_stack": 0,
          "other_process": 0,
          "other_event": 0
        }}
      }}"#,
            read - used
        )
    };
    let expected = format!(
        r#"{{
  "version": 1,
  "exit_code": 3,
  "error": null,
  "binary": {{
    "path": "{binary}",
    "build_id": "897d38e34fceaca90e60860b40c301399db5a5e3"
  }},
  "output": "{out}",
  "inputs": [
    {{
      "path": "{d}/a.data",
      "status": "read",
      "error": null,
      "truncated_at": null,
      "samples": {a_samples},
      "binary_matched_by": "build_id",
      "warnings": []
    }},
    {{
      "path": "{d}/b.data",
      "status": "skipped",
      "error": "{d}/b.data: not a perf.data file: 0 bytes is too short for the 16-byte perf.data header",
      "truncated_at": null,
      "samples": {no_samples},
      "binary_matched_by": null,
      "warnings": []
    }},
    {{
      "path": "{d}/c.data",
      "status": "truncated",
      "error": null,
      "truncated_at": {{
        "offset": {cut},
        "reason": "data section [{off}, {end}) extends past the end of the file ({cut} bytes)"
      }},
      "samples": {c_samples},
      "binary_matched_by": null,
      "warnings": [
        "{d}/c.data: {truncation}"
      ]
    }},
    {{
      "path": "{d}/d.fifo",
      "status": "skipped",
      "error": "{d}/d.fifo: not a regular file but a FIFO",
      "truncated_at": null,
      "samples": {no_samples},
      "binary_matched_by": null,
      "warnings": []
    }}
  ],
  "totals": {{
    "inputs": {{
      "total": 4,
      "read": 1,
      "truncated": 1,
      "skipped": 2,
      "failed": 0
    }},
    "samples": {total_samples},
    "distinct_stacks": 5,
    "samples_not_unwound": 0,
    "binary_matched_by": "build_id",
    "functions_in_profile": 2
  }},
  "phases": [
    {{
      "name": "loading the binary",
      "seconds": 0
    }},
    {{
      "name": "reading",
      "seconds": 0
    }},
    {{
      "name": "unwinding",
      "seconds": 0
    }},
    {{
      "name": "symbolizing",
      "seconds": 0
    }},
    {{
      "name": "post-passes, writing",
      "seconds": 0
    }}
  ],
  "warnings": [
    "{d}/b.data: not a perf.data file: 0 bytes is too short for the 16-byte perf.data header; skipped",
    "{d}/c.data: {truncation}",
    "{d}/d.fifo: not a regular file but a FIFO; skipped"
  ]
}}
"#,
        binary = binary().display(),
        out = out.display(),
        a_samples = samples(55, 6),
        c_samples = samples(28, 0),
        no_samples = samples(0, 0),
        total_samples = samples(83, 6).replace("\n  ", "\n"),
        cut = starts[30],
        end = off + size,
    );
    assert_eq!(report_without_times(&report), expected);
    let mut left: Vec<PathBuf> =
        std::fs::read_dir(&top).unwrap().map(|e| e.unwrap().path()).collect();
    left.sort();
    assert_eq!(left, [out, dir.clone(), report]);
}

/// A failed run still writes its report: the input that ended it (`failed`, with the error),
/// exit code 1, and no output.
#[test]
fn report_of_a_failed_run_names_the_input_that_ended_it() {
    let dir = scratch("report_failed");
    let empty = write(&dir, "empty.data", b"");
    let (out, report) = (dir.join("app.prof"), dir.join("run.json"));
    let o = profgen(&["--report", report.to_str().unwrap()], &[&empty], &out);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = report_without_times(&report);
    let error = format!(
        "{}: not a perf.data file: 0 bytes is too short for the 16-byte perf.data header",
        empty.display()
    );
    assert!(
        text.starts_with(&format!(
            "{{\n  \"version\": 1,\n  \"exit_code\": 1,\n  \"error\": \"{error}\",\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("      \"status\": \"failed\",\n      \"error\": \"{error}\",\n")),
        "{text}"
    );
    assert!(
        text.contains("  \"phases\": [\n    {\n      \"name\": \"loading the binary\",\n      \"seconds\": 0\n    },\n    {\n      \"name\": \"reading\",\n      \"seconds\": 0\n    }\n  ],\n"),
        "{text}"
    );
    assert!(!out.exists());
}

/// `profgen aggregate` applies the same policy to the files of a directory: the bad ones are
/// skipped with the same warnings (exit 3, the aggregate written), or fail the run with
/// `--no-keep-going`.
#[test]
fn aggregate_skips_the_files_of_a_directory_it_cannot_use() {
    let h = hosts("aggregate");
    let out = h.dir.with_file_name("hosts.pga");
    let aggregate = |opts: &[&str]| {
        let mut cmd = std::process::Command::new(common::PROFGEN);
        cmd.arg("aggregate").arg("--binary").arg(binary()).arg("--perfdata").arg(&h.dir);
        cmd.args(opts).arg("-o").arg(&out);
        run_with_deadline(cmd, DEADLINE_SECONDS)
    };
    let o = aggregate(&[]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.starts_with(&h.warnings()), "{err}");
    assert!(out.exists());
    std::fs::remove_file(&out).unwrap();
    let o = aggregate(&["--no-keep-going"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!out.exists());
}

/// `profgen aggregate --report`: the run report's account per binary aggregated (every input
/// with its status and why, totals), the phases and the exit code; also when the run fails.
#[test]
fn aggregate_report_accounts_for_every_input() {
    let h = hosts("aggregate_report");
    let (out, report) = (h.dir.with_file_name("hosts.pga"), h.dir.with_file_name("run.json"));
    let aggregate = |opts: &[&str]| {
        let mut cmd = std::process::Command::new(common::PROFGEN);
        cmd.arg("aggregate").arg("--binary").arg(binary()).arg("--perfdata").arg(&h.dir);
        cmd.args(opts).arg("--report").arg(&report).arg("-o").arg(&out);
        run_with_deadline(cmd, DEADLINE_SECONDS)
    };
    let o = aggregate(&[]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let text = report_without_times(&report);
    assert!(
        text.starts_with(&format!(
            "{{\n  \"version\": 1,\n  \"exit_code\": 3,\n  \"error\": null,\n  \"output\": \"{}\",\n  \"binaries\": [\n    {{\n      \"name\": \"inline_chain (build id ",
            out.display()
        )),
        "{text}"
    );
    let d = h.dir.display();
    for (file, status) in [
        ("a_good.data", "read"),
        ("b_empty.data", "skipped"),
        ("f_truncated.data", "truncated"),
        ("g_fifo", "skipped"),
        ("z_good.data", "read"),
    ] {
        let entry = format!("\"path\": \"{d}/{file}\",\n          \"status\": \"{status}\",\n");
        assert!(text.contains(&entry), "{entry}\n{text}");
    }
    let totals = "\"inputs\": {\n          \"total\": 10,\n          \"read\": 2,\n          \"truncated\": 1,\n          \"skipped\": 7,\n          \"failed\": 0\n        },";
    assert!(text.contains(totals), "{text}");
    assert!(
        text.contains("\"phases\": [\n    {\n      \"name\": \"loading the binary\",\n      \"seconds\": 0\n    },\n    {\n      \"name\": \"reading\",\n      \"seconds\": 0\n    },\n    {\n      \"name\": \"unwinding\",\n      \"seconds\": 0\n    },\n    {\n      \"name\": \"writing\",\n      \"seconds\": 0\n    }\n  ],"),
        "{text}"
    );
    // Failed: the report says why, and lists the input that ended it.
    std::fs::remove_file(&out).unwrap();
    let o = aggregate(&["--no-keep-going"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let text = report_without_times(&report);
    let error = format!(
        "{d}/b_empty.data: not a perf.data file: 0 bytes is too short for the 16-byte perf.data header"
    );
    assert!(
        text.starts_with(&format!(
            "{{\n  \"version\": 1,\n  \"exit_code\": 1,\n  \"error\": \"{error}\",\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!("\"status\": \"failed\",\n          \"error\": \"{error}\",\n")),
        "{text}"
    );
    assert!(!out.exists());
}
