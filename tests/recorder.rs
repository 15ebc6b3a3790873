//! profgen-record end to end: records a small corpus binary under valgrind and checks the
//! perf.data it writes (header, attr, samples, LBR consistency) against the ground truth; then
//! validates every committed `perf-samples/` case the same way. `perf` and `llvm-profgen-19`
//! checks run only when those tools are on PATH; the recording test needs valgrind.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSegment};

const SAMPLE_TYPE: u64 = 0x1 | 0x2 | 0x4 | 0x20 | 0x100 | 0x800;
const PERF_CONTEXT_USER: u64 = (-512i64) as u64;

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
}

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
    branches: Vec<(u64, u64)>,
}

#[derive(Default)]
struct PerfData {
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
    assert_eq!(u32_at(attr, 0), 0, "PERF_TYPE_HARDWARE");
    assert_eq!(u64_at(attr, 24), SAMPLE_TYPE, "sample_type");
    assert_ne!(u64_at(attr, 40) & (1 << 18), 0, "sample_id_all");
    assert_ne!(u64_at(attr, 40) & (1 << 5), 0, "exclude_kernel (cycles:u)");
    assert_eq!(u64_at(attr, 72), 0x9, "branch_sample_type ANY|USER");
    let (data_off, data_size) = (u64_at(&b, 40) as usize, u64_at(&b, 48) as usize);
    let mut pd = PerfData { features: u64_at(&b, 72), ..Default::default() };
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
                let nr = u64_at(r, 32) as usize;
                let callchain: Vec<u64> = (0..nr).map(|i| u64_at(r, 40 + 8 * i)).collect();
                let bo = 40 + 8 * nr;
                let nb = u64_at(r, bo) as usize;
                let branches = (0..nb)
                    .map(|i| (u64_at(r, bo + 8 + 24 * i), u64_at(r, bo + 16 + 24 * i)))
                    .collect();
                assert_eq!(bo + 8 + 24 * nb, r.len(), "sample size at {o}");
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
    for s in &pd.samples {
        assert_eq!(s.callchain[0], PERF_CONTEXT_USER);
        assert_eq!(s.callchain[1], s.ip);
        assert!(s.branches.len() <= 32 && !s.branches.is_empty());
        if let Some(v) = layout.vaddr(s.ip) {
            in_binary += 1;
            assert!(insts.contains_key(&v), "sample ip {v:#x} never executed per truth");
        }
        // Newest first: each branch target runs straight to the next (newer) branch source.
        let mut next_from = s.ip;
        for &(from, to) in &s.branches {
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
    assert!(checked_lbr > 0, "no LBR entry inside {name}");
    let total_lbr: usize = pd.samples.iter().map(|s| s.branches.len()).sum();
    assert!(
        t.branch_total >= total_lbr as u64 / 32,
        "truth has fewer taken branches than one LBR's worth"
    );

    if on_path("perf") {
        for args in [&["script", "-F", "ip,brstack"][..], &["report", "--stdio"][..]] {
            let out = Command::new("perf").args(args).arg("-i").arg(perf_data).output().unwrap();
            assert!(out.status.success(), "perf {args:?} failed");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.trim().is_empty(), "perf {args:?} warned: {err}");
            assert!(!out.stdout.is_empty());
        }
    }
    if on_path("llvm-profgen-19") {
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

#[test]
fn records_corpus_binary_under_valgrind() {
    if !on_path("valgrind") {
        eprintln!("skipped: valgrind not on PATH");
        return;
    }
    let binary = corpus().join("switch_table/switch_table");
    let dir = tempdir("record");
    let (data, truth) = (dir.join("perf.data"), dir.join("truth.txt"));
    let out = Command::new(env!("CARGO_BIN_EXE_profgen-record"))
        .args(["--period", "4999", "--seed", "7", "-o"])
        .arg(&data)
        .arg("--truth")
        .arg(&truth)
        .arg("--")
        .arg(&binary)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains(" samples, 1 process(es), 1 thread(s)"));
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
fn reports_missing_program() {
    if !on_path("valgrind") {
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
    let mut cases: Vec<PathBuf> = std::fs::read_dir(corpus())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("case.toml").is_file())
        // IP-sampling cases are recorded with perf, not by the recorder.
        .filter(|p| {
            let toml = std::fs::read_to_string(p.join("case.toml")).unwrap();
            toml_value(&toml, "kind").as_deref() == Some("lbr-stack")
        })
        .collect();
    cases.sort();
    assert!(cases.len() >= 8, "{} cases", cases.len());
    let mut probes = 0;
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
        assert_eq!(toml_value(&toml, "kind").as_deref(), Some("lbr-stack"));
        if toml_value(&toml, "probes").as_deref() == Some("true") {
            probes += 1;
        }
        let binary = case.join(toml_value(&toml, "binary").unwrap());
        let data = case.join(toml_value(&toml, "perfdata").unwrap());
        let truth = case.join(toml_value(&toml, "truth").unwrap());
        let n = check_recording(&data, &truth, &binary, None);
        assert!(n >= 100, "{}: {n} samples in the binary", case.display());
        let pd = read_perf_data(&data);
        assert!(
            (1000..=2500).contains(&pd.samples.len()),
            "{}: {} samples",
            case.display(),
            pd.samples.len()
        );
    }
    assert!(probes >= 4);
    // Threads and fork are covered by name.
    let threads = read_perf_data(&corpus().join("threads/perf.data"));
    assert_eq!(threads.forks, 1, "one thread created");
    assert_eq!(threads.samples.iter().map(|s| s.pid).collect::<HashSet<_>>().len(), 1);
    assert_eq!(
        threads.samples.iter().map(|s| s.tid).collect::<HashSet<_>>().len(),
        2,
        "both threads sampled"
    );
    let fork = read_perf_data(&corpus().join("fork/perf.data"));
    assert_eq!(
        fork.samples.iter().map(|s| s.pid).collect::<HashSet<_>>().len(),
        2,
        "parent and child sampled"
    );
}
