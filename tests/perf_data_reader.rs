//! The perf.data reader against perf itself: decoded events must equal what `perf report -D`
//! (perf's raw record dump) prints for the same fixture. The expected text is committed as
//! `<fixture>.golden`; `PROFGEN_BLESS=1 cargo test --test perf_data_reader` regenerates it with the
//! installed perf. The raw dump is used rather than `perf script -F ip` because perf script prints
//! callchain addresses of PIE binaries relative to their DSO, while the dump shows the recorded
//! values.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use profgen::error::Error;
use profgen::input::PerfEvent;
use profgen::input::perf_data::{PerfData, ReadReport, read_perf_data, read_perf_data_stream};

fn fixture(name: &str) -> PathBuf {
    common::fixture(&format!("perfdata/{name}"))
}

fn blessing() -> bool {
    std::env::var_os("PROFGEN_BLESS").is_some_and(|v| v == "1")
}

/// One line per event, in the golden files' format.
fn canonical(event: &PerfEvent<'_>) -> String {
    match event {
        PerfEvent::Sample(s) => {
            let chain: Vec<String> = s.callchain.iter().map(|a| format!("{:x}", a.0)).collect();
            format!(
                "SAMPLE {} {}/{} {:#x} {} {}",
                s.time.unwrap_or(0),
                s.pid.unwrap_or(-1),
                s.tid.unwrap_or(-1),
                s.ip.0,
                s.period,
                chain.join(",")
            )
        }
        PerfEvent::Mmap(m) => {
            let build_id = m
                .build_id
                .as_ref()
                .map(|id| id.iter().map(|b| format!("{b:02x}")).collect::<String>());
            format!(
                "MMAP {}/{} {:#x} {:#x} {:#x} {} {}{}",
                m.pid.unwrap_or(0),
                m.tid.unwrap_or(0),
                m.start.0,
                m.len,
                m.pgoff.0,
                if m.executable { "x" } else { "-" },
                m.path,
                build_id.map(|id| format!(" build-id={id}")).unwrap_or_default()
            )
        }
        PerfEvent::Comm { pid, tid, exec, name } => {
            format!("COMM {pid}/{tid} {} {name}", if *exec { "exec" } else { "-" })
        }
        PerfEvent::Fork { pid, ppid, tid, ptid } => format!("FORK {pid}/{tid} {ppid}/{ptid}"),
        PerfEvent::Exit { pid, tid } => format!("EXIT {pid}/{tid}"),
        // Only a deferred decode asked to place samples gives these.
        PerfEvent::Placed(run) => format!("PLACED {:#x}..", run[0].record),
    }
}

fn decode(name: &str) -> (Vec<String>, ReadReport) {
    let path = fixture(name);
    let bytes = std::fs::read(&path).expect("fixture");
    let mut lines = Vec::new();
    let report = read_perf_data(&bytes, &path, |e| lines.push(canonical(&e))).expect("decodes");
    (lines, report)
}

/// Converts `perf report -D` output to the canonical lines. Callchains are reduced the way the
/// reader documents: PERF_CONTEXT_* markers dropped, only frames in user context kept (frames
/// before the first marker belong to the sample's cpumode).
fn canonical_from_perf_dump(dump: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = dump.lines().peekable();
    while let Some(line) = lines.next() {
        let Some((prefix, rest)) = line.split_once(": PERF_RECORD_") else {
            continue;
        };
        // `[cpu] time offset [size]`: the cpu is there when the samples record it.
        let prefix: Vec<&str> = prefix.split_whitespace().collect();
        let time = prefix[prefix.len() - 3];
        if let Some(rest) = rest.strip_prefix("SAMPLE(IP, ") {
            // SAMPLE(IP, 0x2): 10453/10453: 0x55ad2abe720b period: 1000000 addr: 0
            let (misc, rest) = rest.split_once("): ").unwrap();
            let misc = u64::from_str_radix(misc.trim_start_matches("0x"), 16).unwrap();
            let f: Vec<&str> = rest.split_whitespace().collect();
            let (pidtid, ip, period) = (f[0].trim_end_matches(':'), f[1], f[3]);
            let mut user = misc & 7 == 2;
            let mut chain = Vec::new();
            while let Some(next) = lines.peek() {
                if next.starts_with("... FP chain") {
                } else if let Some(frame) = next.strip_prefix(".....") {
                    let v =
                        u64::from_str_radix(frame.split_once(": ").unwrap().1.trim(), 16).unwrap();
                    if v >= (-4095i64) as u64 {
                        user = v == (-512i64) as u64;
                    } else if user {
                        chain.push(format!("{v:x}"));
                    }
                } else {
                    break;
                }
                lines.next();
            }
            out.push(format!("SAMPLE {time} {pidtid} {ip} {period} {}", chain.join(",")));
        } else if rest.starts_with("MMAP") {
            // MMAP2 10453/10453: [0x55ad2abe7000(0x1000) @ 0x1000 fe:00 10010834 1108658344]: r-xp /tmp/pdfx/loop
            // MMAP -1/0: [0xffffffff81000000(0x120bb08) @ 0xffffffff81000000]: x [kernel.kallsyms]_text
            let (head, rest) = rest.split_once(": [").unwrap();
            let pidtid = head.split_whitespace().nth(1).unwrap();
            let (start, rest) = rest.split_once('(').unwrap();
            let (len, rest) = rest.split_once(") @ ").unwrap();
            let pgoff = rest.split([' ', ']']).next().unwrap();
            // MMAP2 with a build id: `@ 0x1000 <f6b3...>]` instead of device and inode.
            let build_id = rest
                .split_once(" <")
                .map(|(_, id)| format!(" build-id={}", &id[..id.find('>').unwrap()]));
            let (_, rest) = rest.split_once("]: ").unwrap();
            let (prot, path) = rest.split_once(' ').unwrap();
            let exec = if prot.contains('x') { "x" } else { "-" };
            let pgoff = if pgoff == "0" { "0x0" } else { pgoff };
            out.push(format!(
                "MMAP {pidtid} {start} {len} {pgoff} {exec} {path}{}",
                build_id.unwrap_or_default()
            ));
        } else if let Some(rest) = rest.strip_prefix("COMM") {
            // COMM exec: loop:10453/10453  |  COMM: perf-exec:10453/10453
            let exec = if rest.starts_with(" exec") { "exec" } else { "-" };
            let rest = rest.split_once(": ").unwrap().1;
            let (name, pidtid) = rest.rsplit_once(':').unwrap();
            out.push(format!("COMM {pidtid} {exec} {name}"));
        } else if rest.starts_with("FORK(") || rest.starts_with("EXIT(") {
            // FORK(10453:10453):(10452:10452) = (pid:tid):(ppid:ptid)
            let nums: Vec<&str> = rest[4..]
                .split(|c: char| !c.is_ascii_digit() && c != '-')
                .filter(|s| !s.is_empty())
                .collect();
            out.push(if rest.starts_with("FORK") {
                format!("FORK {}/{} {}/{}", nums[0], nums[1], nums[2], nums[3])
            } else {
                format!("EXIT {}/{}", nums[0], nums[1])
            });
        }
    }
    out
}

fn run_perf(args: &[&str]) -> String {
    let out = Command::new("perf")
        .args(args)
        .output()
        .expect("perf runs (needed only with PROFGEN_BLESS=1)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Returns the golden text for `name.suffix`, regenerating it first when blessing.
fn golden(name: &str, suffix: &str, make: impl FnOnce(&str) -> String) -> String {
    let path = fixture(&format!("{name}.{suffix}"));
    if blessing() {
        std::fs::write(&path, make(fixture(name).to_str().unwrap())).unwrap();
    }
    std::fs::read_to_string(&path).expect("golden file (regenerate with PROFGEN_BLESS=1)")
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// The event kinds in delivery order, with sample times, as `perf script` delivers them.
fn order_from_perf_script(script: &str) -> String {
    let mut out = String::new();
    // Tab-indented lines are callchains (printed in pipe mode whatever -F says).
    for line in script.lines().filter(|l| !l.starts_with('\t') && !l.trim().is_empty()) {
        let Some((_, rest)) = line.trim_start().split_once(char::is_whitespace) else {
            continue;
        };
        let (time, rest) = rest.trim_start().split_once(':').unwrap();
        let kind = match rest.trim().split([' ', ':', '(']).next().unwrap() {
            "" => format!("SAMPLE {}", time.replace('.', "").parse::<u64>().unwrap()),
            k => k.trim_start_matches("PERF_RECORD_").trim_end_matches('2').to_owned(),
        };
        out += &kind;
        out.push('\n');
    }
    out
}

fn order_of(event: &PerfEvent<'_>) -> String {
    match event {
        PerfEvent::Sample(s) => format!("SAMPLE {}", s.time.unwrap_or(0)),
        PerfEvent::Mmap(_) => "MMAP".into(),
        PerfEvent::Comm { .. } => "COMM".into(),
        PerfEvent::Fork { .. } => "FORK".into(),
        PerfEvent::Exit { .. } => "EXIT".into(),
        PerfEvent::Placed(_) => "PLACED".into(),
    }
}

fn check_against_perf(name: &str) -> ReadReport {
    let expected_order = golden(name, "order", |f| {
        let args = [
            "script",
            "-F",
            "pid,time",
            "--ns",
            "--show-mmap-events",
            "--show-task-events",
            "-i",
            f,
        ];
        order_from_perf_script(&run_perf(&args))
    });
    let path = fixture(name);
    let bytes = std::fs::read(&path).unwrap();
    let mut order = String::new();
    read_perf_data(&bytes, &path, |e| {
        order += &order_of(&e);
        order.push('\n');
    })
    .unwrap();
    assert_eq!(order, expected_order, "{name}: delivery order");

    let expected = golden(name, "golden", |f| {
        sorted(canonical_from_perf_dump(&run_perf(&["report", "-D", "-i", f]))).join("\n") + "\n"
    });
    let (lines, report) = decode(name);
    let expected: Vec<String> = expected.lines().map(str::to_owned).collect();
    let actual = sorted(lines);
    assert!(expected.iter().any(|l| l.starts_with("SAMPLE")), "{name}: fixture has samples");
    assert_eq!(actual.len(), expected.len(), "{name}: event count");
    for (a, e) in actual.iter().zip(&expected) {
        assert_eq!(a, e, "{name}");
    }
    assert!(report.truncated.is_none(), "{name}: {:?}", report.truncated);
    assert_eq!(report.unknown_records, 0);
    assert_eq!(report.samples_with_unknown_tail, 0);
    report
}

#[test]
fn file_mode_callchains_match_perf() {
    let report = check_against_perf("cpuclock_g.data");
    assert!(!report.pipe_mode);
    assert_eq!(report.info.event_names, ["cpu-clock"]);
    assert!(report.info.cmdline.iter().any(|a| a == "record"), "{:?}", report.info.cmdline);
    assert!(report.info.build_ids.iter().any(|(p, id)| p.ends_with("/loop") && id.len() == 20));
}

/// Samples taken in the kernel (a syscall per iteration): kernel frames and context markers are
/// removed from the callchain, the user part (from the syscall site outwards) is kept.
#[test]
fn kernel_frames_are_stripped_like_perf_shows() {
    check_against_perf("kernel_frames.data");
    let path = fixture("kernel_frames.data");
    let bytes = std::fs::read(&path).unwrap();
    let (mut kernel_samples, mut user_chains_of_kernel_samples) = (0, 0);
    read_perf_data(&bytes, &path, |e| {
        if let PerfEvent::Sample(s) = e {
            assert!(s.callchain.iter().all(|a| a.0 < 0xffff_8000_0000_0000), "{s:?}");
            if s.ip.0 >= 0xffff_8000_0000_0000 {
                kernel_samples += 1;
                user_chains_of_kernel_samples += usize::from(s.callchain.len() >= 3);
            }
        }
    })
    .unwrap();
    assert!(kernel_samples > 50, "{kernel_samples}");
    assert!(user_chains_of_kernel_samples > 50, "{user_chains_of_kernel_samples}");
}

#[test]
fn mmap2_build_ids_match_perf() {
    let report = check_against_perf("buildid_mmap.data");
    let (lines, _) = decode("buildid_mmap.data");
    assert!(lines.iter().any(|l| l.contains("/tmp/pdfx/loop build-id=")), "{lines:?}");
    assert!(
        report.info.build_ids.is_empty(),
        "perf skips the build-id feature with --buildid-mmap"
    );
}

/// Pipe mode with a HEADER_TRACING_DATA record, whose payload follows it outside its size.
#[test]
fn tracepoint_pipe_matches_perf() {
    let report = check_against_perf("tracepoint_pipe.data");
    assert_eq!(report.info.event_names, ["sched:sched_switch"]);
}

#[test]
fn pipe_mode_matches_perf() {
    let report = check_against_perf("pipe_fp.data");
    assert!(report.pipe_mode);
    assert_eq!(report.info.event_names, ["cpu-clock"]);
}

#[test]
fn zstd_compressed_file_matches_perf() {
    check_against_perf("zstd.data");
}

#[test]
fn zstd_compressed_pipe_matches_perf() {
    check_against_perf("pipe_zstd.data");
}

#[test]
fn two_events_match_perf_and_are_told_apart() {
    let report = check_against_perf("two_events.data");
    let expected = golden("two_events.data", "events", |f| {
        let mut counts = BTreeMap::<String, usize>::new();
        for line in run_perf(&["script", "-F", "event", "-i", f]).lines() {
            *counts.entry(line.trim().trim_end_matches(':').to_owned()).or_default() += 1;
        }
        counts.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
    });
    let path = fixture("two_events.data");
    let bytes = std::fs::read(&path).unwrap();
    let mut per_attr = BTreeMap::<String, usize>::new();
    read_perf_data(&bytes, &path, |e| {
        if let PerfEvent::Sample(s) = e {
            *per_attr.entry(report.info.event_names[s.attr_index].clone()).or_default() += 1;
        }
    })
    .unwrap();
    let actual: String = per_attr.iter().map(|(k, v)| format!("{k} {v}\n")).collect();
    assert_eq!(actual, expected);
}

#[test]
fn stream_reader_matches_slice_reader() {
    for name in ["pipe_fp.data", "pipe_zstd.data", "cpuclock_g.data"] {
        let path = fixture(name);
        let bytes = std::fs::read(&path).unwrap();
        let (expected, expected_report) = decode(name);
        let mut lines = Vec::new();
        // A reader that hands out a few bytes at a time exercises every partial read.
        let reader = Trickle { data: &bytes, step: 7 };
        let report = read_perf_data_stream(reader, &path, |e| lines.push(canonical(&e))).unwrap();
        assert_eq!(lines, expected, "{name}");
        assert_eq!(report.samples, expected_report.samples);
        assert_eq!(report.info.build_ids, expected_report.info.build_ids);
    }
}

struct Trickle<'a> {
    data: &'a [u8],
    step: usize,
}

impl std::io::Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.data.len());
        buf[..n].copy_from_slice(&self.data[..n]);
        self.data = &self.data[n..];
        Ok(n)
    }
}

#[test]
fn split_chunks_decode_to_the_same_events() {
    let path = fixture("two_events.data");
    let bytes = std::fs::read(&path).unwrap();
    let data = PerfData::parse(&bytes, &path).unwrap();
    let mut expected = Vec::new();
    data.decode(data.data_range(), |e| expected.push(canonical(&e))).unwrap();
    assert_eq!(sorted(expected.clone()), sorted(decode("two_events.data").0));
    let chunks = data.split_data(4);
    assert_eq!(chunks.len(), 4);
    let mut lines = Vec::new();
    for chunk in chunks {
        let report = data.decode(chunk, |e| lines.push(canonical(&e))).unwrap();
        assert!(report.truncated.is_none());
    }
    assert_eq!(lines, expected);
}

/// Cutting the file at every record boundary (and inside records) yields the events before the
/// cut and a truncation warning naming the offset; a cut before the first complete record leaves
/// nothing to read, which is an error naming the file and the offset.
#[test]
fn truncation_gives_partial_result_and_warning() {
    for name in ["cpuclock_g.data", "zstd.data"] {
        let path = fixture(name);
        let bytes = std::fs::read(&path).unwrap();
        let data = PerfData::parse(&bytes, &path).unwrap();
        let records = data.split_data(usize::MAX);
        let mut samples_before = 0u64;
        let start = data.data_range().start;
        let first_end =
            start + usize::from(u16::from_le_bytes([bytes[start + 6], bytes[start + 7]]));
        for record in &records {
            for cut in [record.start, record.start + 3, record.end - 1] {
                let read = read_perf_data(&bytes[..cut], &path, |_| {});
                if cut < first_end {
                    let err = read.unwrap_err().to_string();
                    assert!(
                        err.starts_with(&format!("{}: at byte offset {start}: the input ends before its first complete record: ", path.display())),
                        "{name} cut at {cut}: {err}"
                    );
                    continue;
                }
                let report = read.unwrap();
                let t = report.truncated.expect("truncation reported");
                assert!(t.offset <= cut as u64, "{name} cut at {cut}: {t}");
                if name == "cpuclock_g.data" {
                    assert_eq!(t.offset, record.start as u64, "{name} cut at {cut}: {t}");
                    assert_eq!(report.samples, samples_before, "{name} cut at {cut}");
                }
            }
            samples_before += data.decode(record.clone(), |_| {}).unwrap().samples;
        }
        // Cut inside the header, before the data: an error that names the file.
        let err = read_perf_data(&bytes[..100], &path, |_| {}).unwrap_err();
        assert!(err.to_string().contains(name), "{err}");
    }
}

#[test]
fn truncated_pipe_stream_warns() {
    let path = fixture("pipe_fp.data");
    let bytes = std::fs::read(&path).unwrap();
    let cut = bytes.len() - 5;
    let mut samples = 0;
    let report = read_perf_data_stream(&bytes[..cut], &path, |e| {
        samples += matches!(e, PerfEvent::Sample(_)) as u64
    })
    .unwrap();
    let t = report.truncated.expect("truncation reported");
    assert!(t.to_string().starts_with("input truncated at byte offset "), "{t}");
    assert!(t.offset < cut as u64);
    assert_eq!(samples, report.samples);
    assert!(samples > 0);
}

#[test]
fn bit_flips_never_panic() {
    let mut seed = 0x9e3779b97f4a7c15u64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for name in ["cpuclock_g.data", "zstd.data", "pipe_fp.data", "two_events.data"] {
        let path = fixture(name);
        let clean = std::fs::read(&path).unwrap();
        for _ in 0..300 {
            let mut bytes = clean.clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() % bytes.len() as u64) as usize;
                bytes[at] ^= 1 << (next() % 8);
            }
            let _ = read_perf_data(&bytes, &path, |_| {});
            let _ = read_perf_data_stream(&bytes[..], &path, |_| {});
        }
    }
}

#[test]
fn empty_and_junk_inputs_give_clear_errors() {
    let path = Path::new("junk.data");
    let err = read_perf_data(&[], path, |_| {}).unwrap_err();
    assert_eq!(
        err.to_string(),
        "junk.data: not a perf.data file: 0 bytes is too short for the 16-byte perf.data header"
    );
    let junk = b"this is certainly not a perf.data file at all".repeat(4);
    let err = read_perf_data(&junk, path, |_| {}).unwrap_err();
    assert!(matches!(err, Error::Malformed { offset: 0, .. }));
    assert_eq!(
        err.to_string(),
        r#"junk.data: at byte offset 0: expected the perf.data magic "PERFILE2", found "this is ""#
    );
    let err = read_perf_data_stream(&b""[..], path, |_| {}).unwrap_err();
    assert!(err.to_string().contains("too short"), "{err}");

    // A record whose size is smaller than its header is garbage, reported where it sits.
    let mut pipe = b"PERFILE2".to_vec();
    pipe.extend_from_slice(&16u64.to_le_bytes());
    pipe.extend_from_slice(&[9, 0, 0, 0, 0, 0, 4, 0]);
    let err = read_perf_data(&pipe, path, |_| {}).unwrap_err();
    assert_eq!(
        err.to_string(),
        "junk.data: at byte offset 22: record size 4 is smaller than its 8-byte header"
    );
}

const PROPELLER: &str = "/work/shared/data/autofdo/propeller_sample_1.perfdata1";

/// Derived once with
/// `perf script -i propeller_sample_1.perfdata1 -F time,ip,brstack --ns | sed -n 5p`:
/// the first sample (in time order) with a branch stack.
const PROPELLER_FIRST_LBR_TIME: u64 = 914937301714548;
const PROPELLER_FIRST_LBR_IP: u64 = 0x5629ec742901;
#[rustfmt::skip]
const PROPELLER_FIRST_LBR: [(u64, u64); 32] = [
    (0x5629ec7428f4, 0x5629ec742901), (0x5629ec742967, 0x5629ec7428d0), (0x5629ec742a6e, 0x5629ec742957), (0x5629ec742a60, 0x5629ec742a65),
    (0x5629ec742a26, 0x5629ec742a60), (0x5629ec742982, 0x5629ec7429da), (0x5629ec742905, 0x5629ec74296c), (0x5629ec7428f4, 0x5629ec742901),
    (0x5629ec742967, 0x5629ec7428d0), (0x5629ec742a6e, 0x5629ec742957), (0x5629ec742a60, 0x5629ec742a65), (0x5629ec742a26, 0x5629ec742a60),
    (0x5629ec742982, 0x5629ec7429da), (0x5629ec742905, 0x5629ec74296c), (0x5629ec7428f4, 0x5629ec742901), (0x5629ec742967, 0x5629ec7428d0),
    (0x5629ec742a6e, 0x5629ec742957), (0x5629ec742a60, 0x5629ec742a65), (0x5629ec742a26, 0x5629ec742a60), (0x5629ec742982, 0x5629ec7429da),
    (0x5629ec742905, 0x5629ec74296c), (0x5629ec7428f4, 0x5629ec742901), (0x5629ec742967, 0x5629ec7428d0), (0x5629ec742a6e, 0x5629ec742957),
    (0x5629ec742a60, 0x5629ec742a65), (0x5629ec742a26, 0x5629ec742a60), (0x5629ec7429de, 0x5629ec742a12), (0x5629ec742982, 0x5629ec7429da),
    (0x5629ec742905, 0x5629ec74296c), (0x5629ec7428e3, 0x5629ec7428f9), (0x5629ec742967, 0x5629ec7428d0), (0x5629ec742a6e, 0x5629ec742957),
];

/// Real LBR data (perf 4.13, BRANCH_STACK with 32 entries). Counts from `perf script -F ip | wc -l`
/// (3740 samples) and `perf script -F ip,brstack | grep -c /` (3732 with a branch stack).
#[test]
fn propeller_lbr_file_decodes() {
    let path = Path::new(PROPELLER);
    let Ok(bytes) = std::fs::read(path) else {
        eprintln!("skipping: {PROPELLER} not present");
        return;
    };
    let (mut samples, mut with_lbr, mut first) = (0, 0, None);
    let report = read_perf_data(&bytes, path, |e| {
        if let PerfEvent::Sample(s) = e {
            samples += 1;
            if !s.branches.is_empty() {
                with_lbr += 1;
                assert_eq!(s.branches.len(), 32);
                assert!(!s.has_callchain && s.callchain.is_empty());
            }
            if s.time == Some(PROPELLER_FIRST_LBR_TIME) {
                let lbr: Vec<(u64, u64)> =
                    s.branches.iter().map(|b| (b.source.0, b.target.0)).collect();
                first = Some((s.ip.0, lbr));
            }
        }
    })
    .unwrap();
    assert_eq!((samples, with_lbr), (3740, 3732));
    assert_eq!(report.samples, 3740);
    assert!(report.truncated.is_none());
    let (ip, lbr) = first.expect("sample at the expected time");
    assert_eq!(ip, PROPELLER_FIRST_LBR_IP);
    assert_eq!(lbr, PROPELLER_FIRST_LBR);
    let bin = report
        .info
        .build_ids
        .iter()
        .find(|(p, _)| p.ends_with("propeller_sample_1.bin.gen"))
        .unwrap();
    assert_eq!(bin.1[..8], [0x57, 0x2a, 0xc7, 0x24, 0x87, 0xae, 0x19, 0x66]);
}

/// Decode throughput on the real LBR file, in time order and in file order; run in release:
/// `cargo test --release --test perf_data_reader throughput -- --ignored --nocapture`.
#[test]
#[ignore]
fn throughput() {
    let path = Path::new(PROPELLER);
    let Ok(bytes) = std::fs::read(path) else {
        return;
    };
    let rounds = 200;
    for by_time in [true, false] {
        let start = std::time::Instant::now();
        let (mut branches, mut samples) = (0usize, 0u64);
        for _ in 0..rounds {
            let mut count = |e: PerfEvent<'_>| {
                if let PerfEvent::Sample(s) = e {
                    branches += s.branches.len();
                }
            };
            let data = PerfData::parse(&bytes, path).unwrap();
            let report = if by_time {
                data.decode_in_time_order(&mut count)
            } else {
                data.decode(data.data_range(), &mut count)
            };
            samples += report.unwrap().samples;
        }
        let secs = start.elapsed().as_secs_f64();
        println!(
            "{}: {:.0} MB/s, {:.2} M samples/s ({branches} branch entries)",
            if by_time { "time order" } else { "file order" },
            (bytes.len() * rounds) as f64 / 1e6 / secs,
            samples as f64 / 1e6 / secs,
        );
    }
}

/// Compares any perf.data with perf itself (events and delivery order), for files too big to
/// commit: `PROFGEN_PERF_DATA=/path/perf.data cargo test --test perf_data_reader any_file --
/// --ignored`. Needs perf.
#[test]
#[ignore]
fn any_file_matches_perf() {
    let Some(path) = std::env::var_os("PROFGEN_PERF_DATA") else {
        return;
    };
    let path = PathBuf::from(path);
    let f = path.to_str().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let (mut lines, mut order) = (Vec::new(), String::new());
    let report = read_perf_data(&bytes, &path, |e| {
        lines.push(canonical(&e));
        order += &order_of(&e);
        order.push('\n');
    })
    .unwrap();
    let expected = sorted(canonical_from_perf_dump(&run_perf(&["report", "-D", "-i", f])));
    assert_eq!(sorted(lines), expected);
    let args =
        ["script", "-F", "pid,time", "--ns", "--show-mmap-events", "--show-task-events", "-i", f];
    assert_eq!(order, order_from_perf_script(&run_perf(&args)));
    eprintln!("{report:?}");
}
