//! profgen-record end to end: records a small corpus binary under valgrind and checks the
//! perf.data it writes (header, attr, samples, LBR consistency) against the ground truth; then
//! validates every committed `perf-samples/` case the same way. `perf` and `llvm-profgen-19`
//! checks run only when those tools are on PATH; the recording test needs valgrind.

mod common;

use common::have;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSegment};

/// IP | TID | TIME | PERIOD, plus CALLCHAIN and BRANCH_STACK unless left out.
const SAMPLE_IP_TID_TIME_PERIOD: u64 = 0x1 | 0x2 | 0x4 | 0x100;
const SAMPLE_CALLCHAIN: u64 = 0x20;
const SAMPLE_BRANCH_STACK: u64 = 0x800;
const PERF_CONTEXT_USER: u64 = (-512i64) as u64;

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}
fn c_str(b: &[u8]) -> String {
    String::from_utf8_lossy(b.split(|&c| c == 0).next().unwrap()).into_owned()
}

struct Mmap {
    start: u64,
    len: u64,
    pgoff: u64,
    path: String,
}

struct Sample {
    ip: u64,
    pid: u32,
    tid: u32,
    period: u64,
    callchain: Vec<u64>,
    /// (from, to, cycles), newest first.
    branches: Vec<(u64, u64, u64)>,
}

#[derive(Default)]
struct PerfData {
    /// perf_event_attr type and config.
    event: (u32, u64),
    sample_type: u64,
    mmaps: Vec<Mmap>,
    samples: Vec<Sample>,
    comms: usize,
    forks: usize,
    exits: usize,
    /// FINISHED_ROUND records.
    rounds: usize,
    features: u64,
}

/// Minimal independent reader for what profgen-record writes.
fn read_perf_data(path: &Path) -> PerfData {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[0..8], b"PERFILE2", "{}: magic", path.display());
    assert_eq!(u64_at(&b, 8), 104, "header size");
    let attr_off = u64_at(&b, 24) as usize;
    assert_eq!(u64_at(&b, 32), u64_at(&b, 16), "one attr");
    let attr = &b[attr_off..];
    let sample_type = u64_at(attr, 24);
    assert_eq!(
        sample_type & !(SAMPLE_CALLCHAIN | SAMPLE_BRANCH_STACK),
        SAMPLE_IP_TID_TIME_PERIOD,
        "sample_type"
    );
    assert_ne!(u64_at(attr, 40) & (1 << 18), 0, "sample_id_all");
    assert_ne!(u64_at(attr, 40) & (1 << 5), 0, "exclude_kernel (:u)");
    let branch_sample_type = if sample_type & SAMPLE_BRANCH_STACK != 0 { 0x9 } else { 0 };
    assert_eq!(u64_at(attr, 72), branch_sample_type, "branch_sample_type ANY|USER");
    let (data_off, data_size) = (u64_at(&b, 40) as usize, u64_at(&b, 48) as usize);
    let mut pd = PerfData {
        event: (u32_at(attr, 0), u64_at(attr, 8)),
        sample_type,
        features: u64_at(&b, 72),
        ..Default::default()
    };
    let mut o = data_off;
    while o < data_off + data_size {
        let (kind, size) = (u32_at(&b, o), u16_at(&b, o + 6) as usize);
        assert!(size >= 8 && o + size <= data_off + data_size, "record at {o}");
        let r = &b[o + 8..o + size];
        match kind {
            10 => pd.mmaps.push(Mmap {
                start: u64_at(r, 8),
                len: u64_at(r, 16),
                pgoff: u64_at(r, 24),
                path: c_str(&r[64..]),
            }),
            3 => pd.comms += 1,
            7 => pd.forks += 1,
            4 => pd.exits += 1,
            68 => pd.rounds += 1,
            9 => {
                let mut at = 32;
                let mut callchain = Vec::new();
                if sample_type & SAMPLE_CALLCHAIN != 0 {
                    let nr = u64_at(r, at) as usize;
                    callchain = (0..nr).map(|i| u64_at(r, at + 8 + 8 * i)).collect();
                    at += 8 + 8 * nr;
                }
                let mut branches = Vec::new();
                if sample_type & SAMPLE_BRANCH_STACK != 0 {
                    let nb = u64_at(r, at) as usize;
                    let entry = |i: usize| at + 8 + 24 * i;
                    branches = (0..nb)
                        .map(|i| {
                            let flags = u64_at(r, entry(i) + 16);
                            (u64_at(r, entry(i)), u64_at(r, entry(i) + 8), (flags >> 4) & 0xffff)
                        })
                        .collect();
                    at = entry(nb);
                }
                assert_eq!(at, r.len(), "sample size at {o}");
                pd.samples.push(Sample {
                    ip: u64_at(r, 0),
                    pid: u32_at(r, 8),
                    tid: u32_at(r, 12),
                    period: u64_at(r, 24),
                    callchain,
                    branches,
                });
            }
            other => panic!("unexpected record type {other} at {o}"),
        }
        o += size;
    }
    assert_eq!(o, data_off + data_size);
    pd
}

struct Truth {
    instructions: u64,
    samples: u64,
    /// Per binary basename: instruction counts and taken branches (same-binary ends only).
    insts: HashMap<String, HashMap<u64, u64>>,
    branches: HashMap<String, HashSet<(u64, u64)>>,
    branch_total: u64,
}

fn read_truth(path: &Path) -> Truth {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("# profgen-record truth v1"));
    let head: Vec<&str> = lines.next().unwrap().split(' ').collect();
    let mut t = Truth {
        instructions: head[1].parse().unwrap(),
        samples: head[3].parse().unwrap(),
        insts: HashMap::new(),
        branches: HashMap::new(),
        branch_total: 0,
    };
    let mut names = BTreeMap::new();
    for l in lines {
        let f: Vec<&str> = l.split(' ').collect();
        let hex = |s: &str| u64::from_str_radix(s, 16).unwrap();
        match f[0] {
            "binary" => {
                let name = Path::new(f[4]).file_name().unwrap().to_string_lossy().into_owned();
                names.insert(f[1].to_string(), name);
            }
            "I" => {
                let c: u64 = f[3].parse().unwrap();
                assert!(c > 0);
                t.insts.entry(names[f[1]].clone()).or_default().insert(hex(f[2]), c);
            }
            "B" => {
                t.branch_total += f[5].parse::<u64>().unwrap();
                if f[1] == f[3] && f[1] != "-" {
                    t.branches
                        .entry(names[f[1]].clone())
                        .or_default()
                        .insert((hex(f[2]), hex(f[4])));
                }
            }
            other => panic!("bad truth line kind {other}"),
        }
    }
    t
}

/// Runtime address → ELF vaddr for one mapped binary.
struct Layout {
    maps: Vec<(u64, u64, u64)>,
    segments: Vec<(u64, u64, u64)>,
}

impl Layout {
    fn new(pd: &PerfData, binary: &Path) -> Layout {
        let name = binary.file_name().unwrap().to_string_lossy();
        let maps: Vec<_> = pd
            .mmaps
            .iter()
            .filter(|m| Path::new(&m.path).file_name().is_some_and(|n| n.to_string_lossy() == name))
            .map(|m| (m.start, m.len, m.pgoff))
            .collect();
        assert!(!maps.is_empty(), "no MMAP2 for {name}");
        let data = std::fs::read(binary).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let segments =
            obj.segments().map(|s| (s.file_range().0, s.file_range().1, s.address())).collect();
        Layout { maps, segments }
    }
    fn vaddr(&self, addr: u64) -> Option<u64> {
        let &(start, _, pgoff) = self.maps.iter().find(|&&(s, l, _)| addr >= s && addr < s + l)?;
        let off = addr - start + pgoff;
        let &(fo, _, va) = self.segments.iter().find(|&&(fo, fs, _)| off >= fo && off < fo + fs)?;
        Some(off - fo + va)
    }
}

/// Checks one recording against its truth; returns the number of samples in `binary`.
fn check_recording(perf_data: &Path, truth: &Path, binary: &Path, period: Option<u64>) -> usize {
    let pd = read_perf_data(perf_data);
    let t = read_truth(truth);
    let name = binary.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(pd.samples.len() as u64, t.samples, "sample count in truth header");
    assert!(pd.comms >= 1 && pd.exits >= 1, "COMM/EXIT records");
    assert_ne!(pd.features & (1 << 2), 0, "HEADER_BUILD_ID feature");
    // The countdown restarts at each sample: the periods add up to the traced instructions,
    // minus what each thread had not yet counted down at its end.
    let periods: u64 = pd.samples.iter().map(|s| s.period).sum();
    assert!(periods <= t.instructions, "{periods} > {}", t.instructions);
    if let Some(p) = period {
        let tasks = pd.samples.iter().map(|s| s.tid).collect::<HashSet<_>>().len() as u64 + 1;
        assert!(t.instructions - periods <= tasks * (p + p / 8), "unsampled tail too long");
        assert!(pd.samples.iter().all(|s| s.period >= p - p / 8 && s.period <= p + p / 8));
    }
    let layout = Layout::new(&pd, binary);
    let insts = &t.insts[&name];
    let branches = &t.branches[&name];
    let (mut in_binary, mut checked_lbr) = (0, 0);
    let has_lbr = pd.sample_type & SAMPLE_BRANCH_STACK != 0;
    let branch_event = pd.event == (4, 0x20c4);
    for s in &pd.samples {
        if pd.sample_type & SAMPLE_CALLCHAIN != 0 {
            assert_eq!(s.callchain[0], PERF_CONTEXT_USER);
            assert_eq!(s.callchain[1], s.ip);
        }
        if let Some(v) = layout.vaddr(s.ip) {
            in_binary += 1;
            assert!(insts.contains_key(&v), "sample ip {v:#x} never executed per truth");
        }
        if !has_lbr {
            continue;
        }
        assert!(s.branches.len() <= 32 && !s.branches.is_empty());
        if branch_event {
            // The counter overflows on a taken branch: it is the newest entry, and the IP its
            // target.
            assert_eq!(s.branches[0].1, s.ip, "taken-branch sample IP");
        }
        // Newest first: each branch target runs straight to the next (newer) branch source.
        let mut next_from = s.ip;
        for &(from, to, _) in &s.branches {
            if let (Some(f), Some(tv)) = (layout.vaddr(from), layout.vaddr(to)) {
                assert!(branches.contains(&(f, tv)), "LBR {f:#x}->{tv:#x} not in truth");
                checked_lbr += 1;
                if let Some(nf) = layout.vaddr(next_from) {
                    assert!(tv <= nf, "LBR target {tv:#x} after next source {nf:#x}");
                }
            }
            next_from = from;
        }
    }
    if has_lbr {
        assert!(checked_lbr > 0, "no LBR entry inside {name}");
        let total_lbr: usize = pd.samples.iter().map(|s| s.branches.len()).sum();
        assert!(
            t.branch_total >= total_lbr as u64 / 32,
            "truth has fewer taken branches than one LBR's worth"
        );
    }

    if have("perf") {
        for args in [&["script", "-F", "ip,brstack"][..], &["report", "--stdio"][..]] {
            let out = Command::new("perf").args(args).arg("-i").arg(perf_data).output().unwrap();
            assert!(out.status.success(), "perf {args:?} failed");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.trim().is_empty(), "perf {args:?} warned: {err}");
            assert!(!out.stdout.is_empty());
        }
    }
    // llvm-profgen-19 rejects perf scripts without branch stacks.
    if has_lbr && have("llvm-profgen-19") {
        let dir = tempdir("profgen");
        let prof = dir.join("out.prof");
        let out = Command::new("llvm-profgen-19")
            .arg("--perfdata")
            .arg(perf_data.canonicalize().unwrap())
            .arg("--binary")
            .arg(binary.canonicalize().unwrap())
            .arg("--output")
            .arg(&prof)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(out.status.success(), "llvm-profgen-19: {}", String::from_utf8_lossy(&out.stderr));
        assert!(std::fs::metadata(&prof).unwrap().len() > 0, "empty llvm-profgen profile");
        let _ = std::fs::remove_dir_all(&dir);
    }
    in_binary
}

fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "profgen-test-{tag}-{}-{:?}",
        std::process::id(),
        std::thread::current().id()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("perf-samples")
}

fn toml_value(toml: &str, key: &str) -> Option<String> {
    toml.lines()
        .find_map(|l| l.strip_prefix(&format!("{key} = ")))
        .map(|v| v.trim_matches('"').to_string())
}

/// Records `binary` with `args` into a scratch directory: (directory, perf.data, truth, stderr).
fn record(tag: &str, binary: &Path, args: &[&str]) -> (PathBuf, PathBuf, PathBuf, String) {
    let dir = tempdir(tag);
    let (data, truth) = (dir.join("perf.data"), dir.join("truth.txt"));
    let out = Command::new(env!("CARGO_BIN_EXE_profgen-record"))
        .args(args)
        .arg("-o")
        .arg(&data)
        .arg("--truth")
        .arg(&truth)
        .arg("--")
        .arg(binary)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{err}");
    (dir, data, truth, err)
}

#[test]
fn records_corpus_binary_under_valgrind() {
    if !have("valgrind") {
        eprintln!("skipped: valgrind not on PATH");
        return;
    }
    let binary = corpus().join("switch_table/switch_table");
    let (dir, data, truth, err) = record("record", &binary, &["--period", "4999", "--seed", "7"]);
    assert!(err.contains(" samples, 1 process(es), 1 thread(s)"), "{err}");
    let n = check_recording(&data, &truth, &binary, Some(4999));
    assert!(n > 200, "only {n} samples in the binary");
    // The interpreter's dispatch loop dominates: most samples are in the binary itself.
    let pd = read_perf_data(&data);
    assert!(n * 10 > pd.samples.len() * 8, "{n} of {}", pd.samples.len());
    // Like perf, the recorder closes its rounds, so readers can order events by time.
    assert!(pd.rounds >= 1, "no FINISHED_ROUND records");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn records_taken_branch_samples_with_cycle_counts() {
    if !have("valgrind") {
        eprintln!("skipped: valgrind not on PATH");
        return;
    }
    let binary = corpus().join("tailcall/tailcall");
    let args = ["--event", "branches", "--lbr-cycles", "--period", "997"];
    let (dir, data, truth, _) = record("record-branches", &binary, &args);
    let n = check_recording(&data, &truth, &binary, None);
    assert!(n > 100, "only {n} samples in the binary");
    let pd = read_perf_data(&data);
    assert_eq!(pd.event, (4, 0x20c4), "raw br_inst_retired.near_taken");
    // A range from one branch target to the next branch holds at least the branch, and no
    // more instructions than bytes.
    for s in &pd.samples {
        for (older, newer) in s.branches[1..].iter().zip(&s.branches) {
            assert!(newer.2 >= 1, "cycles of {:#x}", newer.0);
            if older.1 <= newer.0 && newer.0 - older.1 < 0x1000 {
                assert!(newer.2 <= newer.0 - older.1 + 1, "cycles of {:#x}", newer.0);
            }
        }
    }
    if have("perf") {
        let out = Command::new("perf").args(["evlist", "-i"]).arg(&data).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "br_inst_retired.near_taken:u");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn reports_missing_program() {
    if !have("valgrind") {
        eprintln!("skipped: valgrind not on PATH");
        return;
    }
    let dir = tempdir("missing");
    let out = Command::new(env!("CARGO_BIN_EXE_profgen-record"))
        .arg("-o")
        .arg(dir.join("perf.data"))
        .arg("/nonexistent/program")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("profgen-record: error: valgrind exited"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn committed_corpus_cases_are_valid() {
    // Cases recorded by profgen-record have a truth file; the other IP cases come from perf.
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.toml").is_file())
        .filter(|p| {
            let toml = std::fs::read_to_string(p.join("case.toml")).unwrap();
            toml_value(&toml, "truth").is_some()
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 14, "{} cases", cases.len());
    let (mut probes, mut ip_cases) = (0, 0);
    for case in &cases {
        let toml = std::fs::read_to_string(case.join("case.toml")).unwrap();
        for key in [
            "description",
            "binary",
            "perfdata",
            "truth",
            "sources",
            "build",
            "record",
            "probes",
            "kind",
        ] {
            assert!(toml_value(&toml, key).is_some(), "{}: no {key}", case.display());
        }
        let kind = toml_value(&toml, "kind").unwrap();
        if toml_value(&toml, "probes").as_deref() == Some("true") {
            probes += 1;
        }
        let binary = case.join(toml_value(&toml, "binary").unwrap());
        // lbr-stack cases: cycles with LBR cycle counts, and taken branches.
        let recordings: &[(&str, &str, (u32, u64))] = match kind.as_str() {
            "lbr-stack" => &[
                ("perfdata", "truth", (0, 0)),
                ("perfdata_branches", "truth_branches", (4, 0x20c4)),
            ],
            "ip" => {
                ip_cases += 1;
                &[("perfdata", "truth", (1, 0))]
            }
            other => panic!("{}: kind {other}", case.display()),
        };
        for &(data_key, truth_key, event) in recordings {
            let data = case.join(toml_value(&toml, data_key).unwrap());
            let truth = case.join(toml_value(&toml, truth_key).unwrap());
            let n = check_recording(&data, &truth, &binary, None);
            assert!(n >= 100, "{}: {n} samples in the binary", data.display());
            let pd = read_perf_data(&data);
            assert_eq!(pd.event, event, "{}: event", data.display());
            let expected = if kind == "ip" { 5000..=12000 } else { 1000..=2500 };
            assert!(
                expected.contains(&pd.samples.len()),
                "{}: {} samples",
                data.display(),
                pd.samples.len()
            );
            if kind == "ip" {
                assert!(pd.samples.iter().all(|s| s.branches.is_empty() && s.callchain.is_empty()));
            }
            // --lbr-cycles on the cycles recordings: every range holds at least its branch.
            if kind == "lbr-stack" {
                let with_cycles = pd.samples.iter().flat_map(|s| &s.branches).all(|b| b.2 >= 1);
                assert_eq!(with_cycles, event == (0, 0), "{}: LBR cycle counts", data.display());
            }
        }
    }
    assert!(probes >= 6 && ip_cases >= 2, "{probes} probe cases, {ip_cases} IP cases");
    // Threads and fork are covered by name.
    for data in ["threads/perf.data", "threads/perf-branches.data"] {
        let threads = read_perf_data(&corpus().join(data));
        assert_eq!(threads.forks, 1, "one thread created");
        assert_eq!(threads.samples.iter().map(|s| s.pid).collect::<HashSet<_>>().len(), 1);
        assert_eq!(
            threads.samples.iter().map(|s| s.tid).collect::<HashSet<_>>().len(),
            2,
            "both threads sampled"
        );
    }
    for data in ["fork/perf.data", "fork/perf-branches.data"] {
        let fork = read_perf_data(&corpus().join(data));
        assert_eq!(
            fork.samples.iter().map(|s| s.pid).collect::<HashSet<_>>().len(),
            2,
            "parent and child sampled"
        );
    }
}
