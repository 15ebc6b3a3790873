//! Hybrid perf script → unwinder → CS line-based profile, compared with llvm-profgen-19's output
//! for the same input (fixtures in tests/fixtures/cs_line, see its README).

mod common;

use common::oracle::*;
use profgen::aggregate::unwinder::{NormalizeStats, UnwindOptions, Unwinder};
use profgen::aggregate::{ContextCounters, ContextKey};
use profgen::profile::FunctionSamples;
use profgen::profile::cs::{CsOptions, generate_line_cs};
use std::collections::BTreeMap;

fn unwind() -> (CodeMap, ContextCounters, NormalizeStats, usize) {
    let code = load_code_map("cs_line");
    let mut stats = NormalizeStats::default();
    let samples = read_samples(&code, "cs_line", &mut stats);
    let mut u = Unwinder::new(&code, UnwindOptions::default());
    for (s, n) in &samples {
        u.unwind(s, *n);
    }
    let (cc, _) = u.finish();
    let n = samples.len();
    (code, cc, stats, n)
}

#[test]
fn unwinder_matches_llvm_profgen_unsymbolized_output() {
    let (_, cc, stats, distinct) = unwind();
    assert_eq!(distinct, 5);
    assert_eq!(
        stats.summary(distinct as u64)[1],
        (
            1,
            5,
            "of truncated stack samples due to invalid return address, likely caused by frame pointer omission."
        )
    );
    assert_eq!(stats.dropped_prolog_epilog, 1);
    let mut ours = BTreeMap::new();
    for (key, c) in &cc.by_context {
        let ContextKey::Frames(f) = key else { panic!("line-based keys expected") };
        ours.insert(context_string(f), render_counters(c));
    }
    assert_eq!(
        ours,
        read_unsymbolized(&read_fixture("cs_line", "llvm-profgen-19.unsymbolized.txt"))
    );
}

#[test]
fn cs_line_profile_matches_llvm_profgen() {
    let (code, cc, _, _) = unwind();
    let profile = generate_line_cs(&code, &cc, &CsOptions::default());
    let ours: BTreeMap<String, FunctionSamples> =
        profile.functions.iter().map(|(c, f)| (profile_context_string(c), f.clone())).collect();
    assert_eq!(ours, read_cs_text(&read_fixture("cs_line", "llvm-profgen-19.cs.txt")));
}
