//! Text inputs against real files: LLVM's perf scripts, perf's own output for the shared LBR
//! recording, and llvm-profgen-19's unsymbolized profiles (byte-exact round trips).

mod common;

use common::fixture;
use std::path::Path;
use std::process::Command;

use object::{Object, ObjectSegment, SegmentFlags};
use profgen::addr::Vaddr;
use profgen::aggregate::unsymbolized::{offset_base, read_unsymbolized, write_unsymbolized};
use profgen::aggregate::{ContextCounters, ContextKey};
use profgen::input::PerfEvent;
use profgen::input::perf_script::{ScriptKind, ScriptOptions, ScriptReport, read_perf_script};

/// (ip, repeat, call chain, LBR entries)
type OwnedSample = (u64, u64, Vec<u64>, Vec<(u64, u64)>);

/// Mmaps as (pid, start, pgoff, path), and samples.
#[derive(Default)]
struct Collected {
    mmaps: Vec<(Option<i32>, u64, u64, String)>,
    samples: Vec<OwnedSample>,
}

fn read_script(text: &[u8], path: &Path) -> (Collected, ScriptReport) {
    let mut c = Collected::default();
    let report = read_perf_script(text, path, &ScriptOptions::default(), |ev| match ev {
        PerfEvent::Mmap(m) => c.mmaps.push((m.pid, m.start.0, m.pgoff.0, m.path.into_owned())),
        PerfEvent::Sample(s) => {
            assert!(s.pid.is_none());
            c.samples.push((
                s.ip.0,
                s.repeat,
                s.callchain.iter().map(|a| a.0).collect(),
                s.branches.iter().map(|b| (b.source.0, b.target.0)).collect(),
            ))
        }
        other => panic!("unexpected {other:?}"),
    })
    .unwrap();
    (c, report)
}

fn read_fixture_script(rel: &str) -> (Collected, ScriptReport) {
    let path = fixture(rel);
    read_script(&std::fs::read(&path).unwrap(), &path)
}

#[test]
fn llvm_hybrid_script() {
    let (c, report) = read_fixture_script("perfscript/noinline-cs-pseudoprobe.perfscript");
    assert_eq!(report.kind, ScriptKind::LbrStack);
    assert_eq!(
        c.mmaps,
        [(Some(1243676), 0x301000, 0, "/home/noinline-cs-pseudoprobe.perfbin".to_string())]
    );
    assert_eq!(c.samples.len(), 3);
    let (ip, repeat, chain, lbr) = &c.samples[0];
    assert_eq!((*ip, *repeat), (0x30179e, 1));
    assert_eq!(chain, &[0x30179e, 0x3017f9, 0x7f83e84e7793, 0x5541f689495641d7]);
    assert_eq!(lbr.len(), 16);
    assert_eq!((lbr[0], lbr[15]), ((0x3017cf, 0x30179e), (0x3017cf, 0x30179e)));
    assert!(
        c.samples[1..]
            .iter()
            .all(|s| s.0 == 0x3017c4 && s.2.len() == 4 && s.3[0] == (0x30177f, 0x3017c4))
    );
    assert_eq!((report.branches, report.dropped_samples, report.lines), (48, 0, 19));
    assert!(report.warnings.is_empty());
}

#[test]
fn llvm_lbr_script_with_comments() {
    let (c, report) = read_fixture_script("perfscript/multi-process-warning.perfscript");
    assert_eq!(report.kind, ScriptKind::Lbr);
    let path = "/home/multi-process-nocs-noprobe.perfbin".to_string();
    assert_eq!(
        c.mmaps,
        [
            (Some(149754), 0x5ffeb3637000, 0x1000, path.clone()),
            (Some(149755), 0x5caa46c41000, 0x1000, path)
        ]
    );
    let ips: Vec<u64> = c.samples.iter().map(|s| s.0).collect();
    assert_eq!(ips, [0x5ffeb3637150, 0x5caa46c41190, 0x5ffeb3637161]);
    assert!(c.samples.iter().all(|s| s.3.len() == 32 && s.2.is_empty()));
    assert_eq!(c.samples[2].3[0], (0x5ffeb3637161, 0x5ffeb363713c));
    // Exactly what llvm-profgen-19 prints for this file.
    assert_eq!(
        report.warnings,
        [
            "Invalid address in LBR record at line 1: ; Load first process",
            "Invalid address in LBR record at line 4: ; Samples from first process",
            "Invalid address in LBR record at line 7: ; Load second process",
            "Invalid address in LBR record at line 10: ; Samples from both processes",
        ]
    );
}

#[test]
fn own_fixture_scripts() {
    let base = 0x555555554000u64;
    let (c, report) = read_fixture_script("unsymbolized/loop.lbr.perfscript");
    assert_eq!(report.kind, ScriptKind::Lbr);
    assert_eq!(c.mmaps, [(Some(4242), base + 0x1000, 0, "/tmp/loop".to_string())]);
    let summary: Vec<_> = c.samples.iter().map(|s| (s.0 - base, s.1, s.3.len())).collect();
    assert_eq!(summary, [(0x1768, 1, 8), (0x176b, 2, 8)]);
    assert_eq!(c.samples[0].3[6], (0x7ffff7dd0100, base + 0x1790));

    let (c, report) = read_fixture_script("unsymbolized/loop.hybrid.perfscript");
    assert_eq!(report.kind, ScriptKind::LbrStack);
    assert_eq!(c.samples.len(), 4);
    assert_eq!(c.samples[3].2, [base + 0x1734, base + 0x1768, base + 0x179e, 0x7ffff7dd0200]);
    assert_eq!(c.samples[3].3[0], (base + 0x1763, base + 0x1730));
}

/// perf's own `perf script --show-mmap-events -F ip,brstack` output for the shared LBR recording:
/// every sample and LBR entry of the perf.data comes through. `perf report -D` counts 3740
/// PERF_RECORD_SAMPLEs whose `branch stack: nr:` sum to 119424 (8 samples have an empty stack).
#[test]
fn real_perf_script_of_shared_lbr_data() {
    let Some(data) = Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .map(|d| d.join("shared/data/autofdo/propeller_sample_1.perfdata1"))
        .find(|p| p.exists())
    else {
        eprintln!("skipped: shared LBR data not present");
        return;
    };
    let Ok(out) = Command::new("perf")
        .args(["script", "--show-mmap-events", "-F", "ip,brstack", "-i"])
        .arg(&data)
        .output()
    else {
        eprintln!("skipped: perf not available");
        return;
    };
    assert!(out.status.success(), "perf script failed: {}", String::from_utf8_lossy(&out.stderr));
    let (c, report) = read_script(&out.stdout, Path::new("propeller.script"));
    assert_eq!(report.kind, ScriptKind::Lbr);
    assert_eq!((report.samples, report.branches, report.dropped_samples), (3740, 119424, 0));
    assert_eq!(c.samples.iter().filter(|s| s.3.is_empty()).count(), 8);
    assert!(report.warnings.is_empty());
    assert_eq!(report.mmaps, 4);
    assert_eq!(c.mmaps[0].1, 0x5629ec742000);
    assert!(c.mmaps[0].3.ends_with("/propeller_sample_1.bin.gen"));
    // The first sample (after three mmaps and four IP-only samples in ld.so).
    let first_lbr = c.samples.iter().find(|s| !s.3.is_empty()).unwrap();
    assert_eq!(first_lbr.0, 0x5629ec742901);
    assert_eq!(
        first_lbr.3[..2],
        [(0x5629ec7428f4, 0x5629ec742901), (0x5629ec742967, 0x5629ec7428d0)]
    );
}

/// llvm-profgen's bases from the program headers: (page-aligned vaddr of the first executable
/// PT_LOAD, page-aligned vaddr of the first PT_LOAD not at 0).
fn bases(binary: &Path) -> (u64, u64) {
    let data = std::fs::read(binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let is_exec = |s: &object::Segment| matches!(s.flags(), SegmentFlags::Elf { p_flags, .. } if p_flags.0 & object::elf::PF_X.0 != 0);
    let preferred = file.segments().find(is_exec).unwrap().address() & !0xfff;
    let first_loadable = file.segments().map(|s| s.address() & !0xfff).find(|&a| a != 0).unwrap();
    (preferred, first_loadable)
}

fn assert_round_trip(rel: &str, base: u64, probe: bool) -> ContextCounters {
    let path = fixture(rel);
    let text = std::fs::read(&path).unwrap();
    let (counters, _) = read_unsymbolized(&text, &path, base, probe).unwrap();
    let mut out = Vec::new();
    write_unsymbolized(&counters, base, &mut out).unwrap();
    assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(text).unwrap(), "{rel}");
    counters
}

/// Reads llvm-profgen-19's output, writes it again: identical bytes, for relative and absolute
/// addresses, and both forms hold the same counters.
#[test]
fn unsymbolized_oracle_round_trip() {
    for (binary, probe) in [("loop", false), ("loop_probe", true)] {
        let (base, _) = bases(&fixture(&format!("unsymbolized/{binary}")));
        assert_eq!(base, 0x1000);
        for kind in ["lbr", "hybrid"] {
            let rel = format!("unsymbolized/{binary}.{kind}.raw");
            let offset = assert_round_trip(&rel, base, probe);
            assert_eq!(offset.context_sensitive, kind == "hybrid", "{rel}");
            let absolute =
                assert_round_trip(&format!("unsymbolized/{binary}.{kind}.abs.raw"), 0, probe);
            assert_eq!(offset.by_context, absolute.by_context, "{rel}");
        }
    }
}

/// `--use-first-loadable-segment-as-base` on a non-PIE binary, where the two bases differ.
#[test]
fn unsymbolized_first_loadable_base() {
    let (preferred, first_loadable) = bases(&fixture("unsymbolized/loop_nopie"));
    assert_eq!((preferred, first_loadable), (0x201000, 0x200000));
    let base = offset_base(true, false, Vaddr(preferred), Vaddr(first_loadable));
    let by_preferred = assert_round_trip("unsymbolized/loop_nopie.lbr.raw", base, false);
    let base = offset_base(true, true, Vaddr(preferred), Vaddr(first_loadable));
    let by_first = assert_round_trip("unsymbolized/loop_nopie.lbr.first-loadable.raw", base, false);
    assert_eq!(by_preferred.by_context, by_first.by_context);
    let branches = &by_first.by_context[&ContextKey::None].branches;
    assert_eq!(branches[&(Vaddr::EXTERNAL, Vaddr(0x2016c0))], 1);
}

#[test]
fn unsymbolized_probe_contexts_are_addresses() {
    let path = fixture("unsymbolized/loop_probe.hybrid.raw");
    let (counters, _) =
        read_unsymbolized(&std::fs::read(&path).unwrap(), &path, 0x1000, true).unwrap();
    let mut keys: Vec<_> = counters.by_context.keys().cloned().collect();
    keys.sort();
    use ContextKey::Addrs;
    assert_eq!(
        keys,
        [Addrs(vec![]), Addrs(vec![Vaddr(0x1799)]), Addrs(vec![Vaddr(0x1799), Vaddr(0x1763)])]
    );
    let root = &counters.by_context[&Addrs(vec![])];
    assert_eq!(root.branches[&(Vaddr::EXTERNAL, Vaddr(0x1790))], 4);
    let leaf = &counters.by_context[&Addrs(vec![Vaddr(0x1799), Vaddr(0x1763)])];
    assert_eq!(leaf.ranges[&(Vaddr(0x1730), Vaddr(0x173a))], 7);
}
