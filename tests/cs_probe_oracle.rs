//! Hybrid perf script → unwinder → CS probe-based profile on a pseudo-probe build of the same
//! program, compared with llvm-profgen-19's output (fixtures in tests/fixtures/cs_probe).

mod common;

use common::oracle::*;
use profgen::aggregate::unwinder::{NormalizeStats, UnwindOptions, Unwinder};
use profgen::aggregate::{ContextCounters, ContextKey};
use profgen::profile::FunctionSamples;
use profgen::profile::cs::{CsOptions, ProbeCsStats, generate_probe_cs};
use std::collections::BTreeMap;

fn unwind() -> (CodeMap, ContextCounters) {
    let code = load_code_map("cs_probe");
    let samples = read_samples(&code, "cs_line", &mut NormalizeStats::default());
    let mut u =
        Unwinder::new(&code, UnwindOptions { probe_based: true, ..UnwindOptions::default() });
    for (s, n) in &samples {
        u.unwind(s, *n);
    }
    let (cc, _) = u.finish();
    (code, cc)
}

#[test]
fn probe_unwinder_matches_llvm_profgen_unsymbolized_output() {
    let (_, cc) = unwind();
    let mut ours = BTreeMap::new();
    for (key, c) in &cc.by_context {
        let ContextKey::Addrs(a) = key else { panic!("address keys expected") };
        let ctx: Vec<String> = a.iter().map(|x| format!("0x{:x}", x.0 - BASE)).collect();
        ours.insert(ctx.join(" @ "), render_counters(c));
    }
    assert_eq!(
        ours,
        read_unsymbolized(&read_fixture("cs_probe", "llvm-profgen-19.unsymbolized.txt"))
    );
}

#[test]
fn cs_probe_profile_matches_llvm_profgen() {
    let (code, cc) = unwind();
    let probes = load_probe_map("cs_probe");
    for infer in [true, false] {
        let opts = CsOptions { infer_missing_frames: infer, ..CsOptions::default() };
        let (profile, stats) = generate_probe_cs(&code, &probes, &cc, &opts);
        assert_eq!(stats, ProbeCsStats::default());
        let ours: BTreeMap<String, FunctionSamples> =
            profile.functions.iter().map(|(c, f)| (profile_context_string(c), f.clone())).collect();
        assert_eq!(ours, read_cs_text(&read_fixture("cs_probe", "llvm-profgen-19.cs.txt")));
    }
}
