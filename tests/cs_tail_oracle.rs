//! Tail calls, recursion and unrolled calls with discriminators: unwinder and CS profiles (line
//! and probe builds) compared with llvm-profgen-19 (fixtures in tests/fixtures/cs_tail_*).

mod common;

use common::oracle::*;
use profgen::aggregate::unwinder::{NormalizeStats, UnwindOptions, Unwinder};
use profgen::aggregate::{ContextCounters, ContextKey};
use profgen::profile::FunctionSamples;
use profgen::profile::cs::{CsOptions, generate_line_cs, generate_probe_cs};
use std::collections::BTreeMap;

fn unwind(dir: &str, probe_based: bool) -> (CodeMap, ContextCounters) {
    let code = load_code_map(dir);
    let samples = read_samples(&code, "cs_tail_line", &mut NormalizeStats::default());
    let mut u = Unwinder::new(&code, UnwindOptions { probe_based, ..UnwindOptions::default() });
    for (s, n) in &samples {
        assert!(u.unwind(s, *n));
    }
    let (cc, _) = u.finish();
    (code, cc)
}

fn key_string(key: &ContextKey) -> String {
    match key {
        ContextKey::Frames(f) => context_string(f),
        ContextKey::Addrs(a) => {
            a.iter().map(|x| format!("0x{:x}", x.0 - BASE)).collect::<Vec<_>>().join(" @ ")
        }
        ContextKey::None => unreachable!(),
    }
}

fn by_name(p: &profgen::profile::Profile) -> BTreeMap<String, FunctionSamples> {
    p.functions.iter().map(|(c, f)| (profile_context_string(c), f.clone())).collect()
}

#[test]
fn unwinder_matches_llvm_profgen_for_line_and_probe_builds() {
    for (dir, probe) in [("cs_tail_line", false), ("cs_tail_probe", true)] {
        let (_, cc) = unwind(dir, probe);
        let ours: BTreeMap<_, _> =
            cc.by_context.iter().map(|(k, c)| (key_string(k), render_counters(c))).collect();
        assert_eq!(
            ours,
            read_unsymbolized(&read_fixture(dir, "llvm-profgen-19.unsymbolized.txt")),
            "{dir}"
        );
    }
}

#[test]
fn cs_line_profile_replicates_raw_discriminator_quirk() {
    let (code, cc) = unwind("cs_tail_line", false);
    let ours = by_name(&generate_line_cs(&code, &cc, &CsOptions::default()));
    let theirs = read_cs_text(&read_fixture("cs_tail_line", "llvm-profgen-19.cs.txt"));
    assert!(theirs.contains_key("main:4.516 @ leaf"));
    assert_eq!(ours, theirs);
}

#[test]
fn cs_line_profile_with_discriminator_fix_has_no_stray_context() {
    let (code, cc) = unwind("cs_tail_line", false);
    let opts = CsOptions { callee_context_base_discriminator: true, ..CsOptions::default() };
    let ours = by_name(&generate_line_cs(&code, &cc, &opts));
    assert!(!ours.contains_key("main:4.516 @ leaf"));
    // The 30 real calls land on the unrolled call site's context as head samples, and the
    // call-site count is no longer inflated by an inferred estimate.
    assert_eq!(ours["main:4.2 @ leaf"].head_samples, 30);
    assert_eq!(ours["main"].body[&profgen::llvm::LineLocation::new(4, 2)].call_targets["leaf"], 30);
}

#[test]
fn cs_probe_profile_with_tail_call_inference_matches_llvm_profgen() {
    let (code, cc) = unwind("cs_tail_probe", true);
    let probes = load_probe_map("cs_tail_probe");
    let (profile, _) = generate_probe_cs(&code, &probes, &cc, &CsOptions::default());
    let ours = by_name(&profile);
    assert!(ours.contains_key("main:5 @ tail:2 @ leaf"));
    assert_eq!(ours, read_cs_text(&read_fixture("cs_tail_probe", "llvm-profgen-19.cs.txt")));
    // Without inference the tail-called leaf hangs directly under main's call to tail.
    let opts = CsOptions { infer_missing_frames: false, ..CsOptions::default() };
    let ours = by_name(&generate_probe_cs(&code, &probes, &cc, &opts).0);
    assert!(ours.contains_key("main:5 @ leaf") && !ours.contains_key("main:5 @ tail:2 @ leaf"));
}
