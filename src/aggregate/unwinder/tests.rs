//! Unwinder tests on a hand-made code map. Layout (4-byte instructions, O = other):
//!
//! ```text
//! main  100 O  104 jcc  108 call foo  10c O  110 call baz  114 O  118 call fact  11c O  120 ret
//! foo   200 O  204 O    208 call bar  20c O  210 ret
//! bar   300 O  304 O    308 jcc       30c O  310 ret          (300, 304 = prolog)
//! baz   400 O  404 O    408 ret
//! fact  500 O  504 jcc  508 call fact 50c O  510 ret
//! tc    600 O  604 jmp baz                                    (tail call)
//! main2 700 O  704 call tc  708 O  70c ret
//! outer 800 O  804 O(inl) 808 O(inl) 80c O  810 ret           (804, 808: `inl` inlined at line 2)
//! main3 900 call outer  904 O  908 ret
//! ```
//! Line offsets are (address - function start) / 4; `main`'s call site 0x110 has raw
//! discriminator 2 (base discriminator 1).

use super::*;
use crate::aggregate::Counters;
use crate::binary::code_view::{CodeMap, frame};
use hashbrown::HashMap;
use std::collections::BTreeSet;

const EXT: u64 = 1;

fn fake() -> CodeMap {
    use InstKind::*;
    let o = Other;
    let mut code = CodeMap::from_layout(&[
        ("main", 0x100, &[o, ConditionalJump, Call, o, Call, o, Call, o, Return]),
        ("foo", 0x200, &[o, o, Call, o, Return]),
        ("bar", 0x300, &[o, o, ConditionalJump, o, Return]),
        ("baz", 0x400, &[o, o, Return]),
        ("fact", 0x500, &[o, ConditionalJump, Call, o, Return]),
        ("tc", 0x600, &[o, DirectJump]),
        ("main2", 0x700, &[o, Call, o, Return]),
        ("outer", 0x800, &[o, o, o, o, Return]),
        ("main3", 0x900, &[Call, o, Return]),
    ]);
    code.inline.insert(0x804, vec![frame("outer", 2, 0), frame("inl", 1, 0)]);
    code.inline.insert(0x808, vec![frame("outer", 2, 0), frame("inl", 2, 0)]);
    code.discriminators.insert(0x110, 2);
    code.prolog.extend([0x300, 0x304]);
    code
}

fn v(a: u64) -> Vaddr {
    Vaddr(a)
}

fn sample(callchain: &[u64], branches: &[(u64, u64)]) -> HybridSample {
    HybridSample {
        callchain: callchain.iter().map(|&a| v(a)).collect(),
        branches: branches.iter().map(|&(s, t)| Branch { source: v(s), target: v(t) }).collect(),
    }
}

fn addrs(a: &[u64]) -> ContextKey {
    ContextKey::Addrs(a.iter().map(|&x| v(x)).collect())
}

/// `"main:4.1 @ baz"` → frames; "" → the empty (root) context.
fn frames(s: &str) -> ContextKey {
    if s.is_empty() {
        return ContextKey::Frames(Vec::new());
    }
    let parts: Vec<&str> = s.split(" @ ").collect();
    let mut out = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if i + 1 == parts.len() {
            out.push(ContextFrame { func: (*p).into(), loc: LineLocation::default() });
            break;
        }
        let (func, loc) = p.rsplit_once(':').unwrap();
        let (line, discr) = loc.split_once('.').unwrap_or((loc, "0"));
        out.push(ContextFrame {
            func: func.into(),
            loc: LineLocation::new(line.parse().unwrap(), discr.parse().unwrap()),
        });
    }
    ContextKey::Frames(out)
}

type Expected<'a> = &'a [(ContextKey, &'a [(u64, u64, u64)], &'a [(u64, u64, u64)])];

fn expected(e: Expected) -> HashMap<ContextKey, Counters> {
    let mut m = HashMap::new();
    for (k, ranges, branches) in e {
        let c: &mut Counters = m.entry(k.clone()).or_default();
        for &(s, t, n) in *ranges {
            c.add_range(v(s), v(t), n);
        }
        for &(s, t, n) in *branches {
            c.add_branch(v(s), v(t), n);
        }
    }
    m
}

fn run(opts: UnwindOptions, samples: &[(HybridSample, u64)]) -> (ContextCounters, UnwindStats) {
    let code = fake();
    let mut u = Unwinder::new(&code, opts);
    for (s, n) in samples {
        assert!(u.unwind(s, *n));
    }
    u.finish()
}

const NO_SHAPING: ContextShape = ContextShape { compress_recursion: -1, max_context_depth: -1 };
const PROBE: UnwindOptions =
    UnwindOptions { probe_based: true, context: NO_SHAPING, tail_call_frames: false };
const LINE: UnwindOptions =
    UnwindOptions { probe_based: false, context: NO_SHAPING, tail_call_frames: false };

// main → foo → bar, sampled at bar's entry.
fn nested_calls() -> HybridSample {
    sample(&[0x300, 0x208, 0x108], &[(0x208, 0x300), (0x108, 0x200)])
}

#[test]
fn plain_calls_probe_keys_are_call_sites_of_the_parent() {
    let (c, st) = run(PROBE, &[(nested_calls(), 3)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (addrs(&[0x108]), &[(0x200, 0x208, 3)], &[(0x208, 0x300, 3)]),
            (addrs(&[]), &[], &[(0x108, 0x200, 3)])
        ])
    );
    assert_eq!(st, UnwindStats { total_branches: 2, ..Default::default() });
    assert!(c.context_sensitive);
}

#[test]
fn plain_calls_line_keys_are_symbolized_with_leaf_function() {
    let (c, _) = run(LINE, &[(nested_calls(), 3)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (frames("main:2 @ foo"), &[(0x200, 0x208, 3)], &[(0x208, 0x300, 3)]),
            (frames("main"), &[], &[(0x108, 0x200, 3)])
        ])
    );
}

// main calls baz at 0x110 (raw discriminator 2), baz returns, sampled right after the return.
fn call_then_return() -> HybridSample {
    sample(&[0x114], &[(0x408, 0x114), (0x110, 0x400)])
}

#[test]
fn return_pushes_the_callee_frame_probe() {
    let (c, st) = run(PROBE, &[(call_then_return(), 2)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (addrs(&[0x110]), &[(0x400, 0x408, 2)], &[(0x408, 0x114, 2)]),
            (addrs(&[]), &[], &[(0x110, 0x400, 2)])
        ])
    );
    assert_eq!(st.total_branches, 2);
}

#[test]
fn return_pushes_the_callee_frame_line_with_base_discriminator() {
    let (c, _) = run(LINE, &[(call_then_return(), 2)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (frames("main:4.1 @ baz"), &[(0x400, 0x408, 2)], &[(0x408, 0x114, 2)]),
            (frames("main"), &[], &[(0x110, 0x400, 2)])
        ])
    );
}

// main → fact → fact → fact, sampled at the innermost entry.
fn recursion() -> HybridSample {
    sample(
        &[0x500, 0x508, 0x508, 0x508, 0x118],
        &[(0x508, 0x500), (0x508, 0x500), (0x508, 0x500), (0x118, 0x500)],
    )
}

#[test]
fn recursion_is_compressed_in_keys() {
    let (c, _) = run(PROBE, &[(recursion(), 1)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (addrs(&[0x118, 0x508]), &[(0x500, 0x508, 2)], &[(0x508, 0x500, 2)]),
            (addrs(&[0x118]), &[(0x500, 0x508, 1)], &[(0x508, 0x500, 1)]),
            (addrs(&[]), &[], &[(0x118, 0x500, 1)]),
        ])
    );
}

#[test]
fn recursion_without_compression_keeps_every_level() {
    let (c, _) = run(
        UnwindOptions { context: ContextShape { compress_recursion: 0, ..NO_SHAPING }, ..PROBE },
        &[(recursion(), 1)],
    );
    assert_eq!(
        c.by_context,
        expected(&[
            (addrs(&[0x118, 0x508, 0x508]), &[(0x500, 0x508, 1)], &[(0x508, 0x500, 1)]),
            (addrs(&[0x118, 0x508]), &[(0x500, 0x508, 1)], &[(0x508, 0x500, 1)]),
            (addrs(&[0x118]), &[(0x500, 0x508, 1)], &[(0x508, 0x500, 1)]),
            (addrs(&[]), &[], &[(0x118, 0x500, 1)]),
        ])
    );
}

#[test]
fn recursion_line_keys_and_depth_trim() {
    let (c, _) = run(LINE, &[(recursion(), 1)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (frames("main:6 @ fact:2 @ fact"), &[(0x500, 0x508, 2)], &[(0x508, 0x500, 2)]),
            (frames("main:6 @ fact"), &[(0x500, 0x508, 1)], &[(0x508, 0x500, 1)]),
            (frames("main"), &[], &[(0x118, 0x500, 1)]),
        ])
    );
    // Depth 1 keeps only the last caller frame.
    let (c, _) = run(
        UnwindOptions { context: ContextShape { max_context_depth: 1, ..NO_SHAPING }, ..LINE },
        &[(recursion(), 1)],
    );
    assert_eq!(
        c.by_context,
        expected(&[
            (frames("fact:2 @ fact"), &[(0x500, 0x508, 2)], &[(0x508, 0x500, 2)]),
            (frames("main:6 @ fact"), &[(0x500, 0x508, 1)], &[(0x508, 0x500, 1)]),
            (frames("main"), &[], &[(0x118, 0x500, 1)]),
        ])
    );
}

// main2 calls tc, which tail-jumps to baz (no frame for tc on the stack).
fn tail_call() -> HybridSample {
    sample(&[0x400, 0x704], &[(0x604, 0x400), (0x704, 0x600)])
}

#[test]
fn tail_call_is_a_plain_branch_without_frame() {
    let (c, st) = run(PROBE, &[(tail_call(), 1)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (addrs(&[0x704]), &[(0x600, 0x604, 1)], &[(0x604, 0x400, 1)]),
            (addrs(&[]), &[], &[(0x704, 0x600, 1)])
        ])
    );
    assert_eq!(st, UnwindStats { total_branches: 2, ..Default::default() });
    let (c, _) = run(LINE, &[(tail_call(), 1)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (frames("main2:1 @ tc"), &[(0x600, 0x604, 1)], &[(0x604, 0x400, 1)]),
            (frames("main2"), &[], &[(0x704, 0x600, 1)])
        ])
    );
}

// Sampled in main2 after baz returned: main2 → tc, tc tail-jumps to baz, baz returns to main2.
fn tail_call_and_return() -> HybridSample {
    sample(&[0x708], &[(0x408, 0x708), (0x604, 0x400), (0x704, 0x600)])
}

#[test]
fn tail_call_frames_put_the_jump_target_under_the_jumping_frame() {
    // llvm-profgen: baz's body runs in main2's context, its head (the jump) under tc's.
    let (c, _) = run(LINE, &[(tail_call_and_return(), 3)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (frames("main2:1 @ baz"), &[(0x400, 0x408, 3)], &[(0x408, 0x708, 3)]),
            (frames("main2:1 @ tc"), &[(0x600, 0x604, 3)], &[(0x604, 0x400, 3)]),
            (frames("main2"), &[], &[(0x704, 0x600, 3)]),
        ])
    );
    // With tail-call frames both are under tc's jump site.
    let (c, _) =
        run(UnwindOptions { tail_call_frames: true, ..LINE }, &[(tail_call_and_return(), 3)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (frames("main2:1 @ tc:1 @ baz"), &[(0x400, 0x408, 3)], &[(0x408, 0x708, 3)]),
            (frames("main2:1 @ tc"), &[(0x600, 0x604, 3)], &[(0x604, 0x400, 3)]),
            (frames("main2"), &[], &[(0x704, 0x600, 3)]),
        ])
    );
    // Probe contexts are left to the missing-frame inference of the profile stage.
    let probe = UnwindOptions { tail_call_frames: true, ..PROBE };
    assert_eq!(run(probe, &[(tail_call(), 1)]).0, run(PROBE, &[(tail_call(), 1)]).0);
}

#[test]
fn call_stack_missing_a_frame_counts_prolog_epilog_mismatch() {
    // foo's frame is missing from the stack although the LBR shows main → foo → bar.
    let s = sample(&[0x300, 0x108], &[(0x208, 0x300), (0x108, 0x200)]);
    let (c, st) = run(PROBE, &[(s, 1)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (addrs(&[0x108]), &[(0x200, 0x208, 1)], &[(0x208, 0x300, 1)]),
            (addrs(&[]), &[], &[(0x108, 0x200, 1)])
        ])
    );
    assert_eq!(
        st,
        UnwindStats { total_branches: 2, mismatched_pro_epi_branches: 1, ..Default::default() }
    );
}

#[test]
fn truncated_stack_continues_without_context() {
    let s = sample(&[0x300], &[(0x208, 0x300), (0x108, 0x200)]);
    let (c, st) = run(PROBE, &[(s.clone(), 1)]);
    assert_eq!(
        c.by_context,
        expected(&[(addrs(&[]), &[(0x200, 0x208, 1)], &[(0x208, 0x300, 1), (0x108, 0x200, 1)])])
    );
    // The root has no parent frame, so no mismatch is counted.
    assert_eq!(st, UnwindStats { total_branches: 2, ..Default::default() });
    let (c, _) = run(LINE, &[(s, 1)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (frames("foo"), &[(0x200, 0x208, 1)], &[(0x208, 0x300, 1)]),
            (frames("main"), &[], &[(0x108, 0x200, 1)])
        ])
    );
}

#[test]
fn paired_external_call_and_return() {
    // main calls external code at 0x110, it returns to 0x114, main calls fact at 0x118.
    let s = sample(&[0x500, 0x118], &[(0x118, 0x500), (EXT, 0x114), (0x110, EXT)]);
    let (c, st) = run(PROBE, &[(s, 1)]);
    assert_eq!(
        c.by_context,
        expected(&[(addrs(&[]), &[(0x114, 0x118, 1)], &[(0x118, 0x500, 1), (EXT, 0x114, 1)])])
    );
    assert_eq!(st, UnwindStats { total_branches: 3, paired_ext_addrs: 1, ..Default::default() });
    assert_eq!(st.summary(1)[2], (2, 3, "of branches containing paired external address."));
}

#[test]
fn unpaired_external_invalidates_the_rest() {
    let s =
        sample(&[0x500, 0x118], &[(0x118, 0x500), (EXT, 0x114), (0x104, 0x108), (0x120, 0x100)]);
    let (c, st) = run(PROBE, &[(s.clone(), 1)]);
    // After the unpaired external, ranges and branches are still recorded, context-less.
    assert_eq!(
        c.by_context,
        expected(&[(
            addrs(&[]),
            &[(0x114, 0x118, 1), (0x100, 0x104, 1)],
            &[(0x118, 0x500, 1), (EXT, 0x114, 1), (0x104, 0x108, 1), (0x120, 0x100, 1)]
        )])
    );
    assert_eq!(st, UnwindStats { total_branches: 4, unpaired_ext_addrs: 1, ..Default::default() });
    let (c, _) = run(LINE, &[(s, 1)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (frames(""), &[], &[(EXT, 0x114, 1)]),
            (
                frames("main"),
                &[(0x114, 0x118, 1), (0x100, 0x104, 1)],
                &[(0x118, 0x500, 1), (0x104, 0x108, 1), (0x120, 0x100, 1)]
            ),
        ])
    );
}

#[test]
fn external_frame_truncates_the_context_below_it() {
    // main → (external library) → foo → bar.
    let s = sample(&[0x300, 0x208, EXT, 0x108], &[(0x208, 0x300), (EXT, 0x200)]);
    let (c, st) = run(PROBE, &[(s.clone(), 1)]);
    assert_eq!(
        c.by_context,
        expected(&[(addrs(&[]), &[(0x200, 0x208, 1)], &[(0x208, 0x300, 1), (EXT, 0x200, 1)])])
    );
    assert_eq!(st.untracked_callsites, BTreeSet::from([Vaddr::EXTERNAL]));
    assert_eq!(
        st.summary(1)[0],
        (1, 1, "of profiled contexts are truncated due to missing probe for call instruction.")
    );
    let (c, _) = run(LINE, &[(s, 1)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (frames("foo"), &[(0x200, 0x208, 1)], &[(0x208, 0x300, 1)]),
            (frames(""), &[], &[(EXT, 0x200, 1)])
        ])
    );
}

#[test]
fn external_call_without_external_frame_counts_mismatch() {
    let s = sample(&[0x200, 0x108], &[(EXT, 0x200)]);
    let (c, st) = run(PROBE, &[(s, 1)]);
    assert_eq!(c.by_context, expected(&[(addrs(&[]), &[], &[(EXT, 0x200, 1)])]));
    assert_eq!(
        st,
        UnwindStats { total_branches: 1, mismatched_ext_call_branches: 1, ..Default::default() }
    );
}

#[test]
fn backwards_range_invalidates_state() {
    let s = sample(&[0x300, 0x208, 0x108], &[(0x208, 0x300), (0x108, 0x20c)]);
    let (c, st) = run(PROBE, &[(s.clone(), 1)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (addrs(&[0x108]), &[], &[(0x208, 0x300, 1)]),
            (addrs(&[]), &[], &[(0x108, 0x20c, 1)])
        ])
    );
    assert_eq!(st, UnwindStats { total_branches: 2, ..Default::default() });
    let (c, _) = run(LINE, &[(s, 1)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (frames("main:2 @ foo"), &[], &[(0x208, 0x300, 1)]),
            (frames("main"), &[], &[(0x108, 0x20c, 1)])
        ])
    );
}

#[test]
fn range_crossing_an_unconditional_branch_invalidates_state() {
    // [0x10c, 0x118] contains the call at 0x110; the state stays invalid for older entries.
    let s = sample(&[0x500, 0x118], &[(0x118, 0x500), (0x104, 0x10c), (0x508, 0x100)]);
    let (c, _) = run(PROBE, &[(s.clone(), 1)]);
    assert_eq!(
        c.by_context,
        expected(&[(
            addrs(&[]),
            &[(0x100, 0x104, 1)],
            &[(0x118, 0x500, 1), (0x104, 0x10c, 1), (0x508, 0x100, 1)]
        )])
    );
    let (c, _) = run(LINE, &[(s, 1)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (frames("main"), &[(0x100, 0x104, 1)], &[(0x118, 0x500, 1), (0x104, 0x10c, 1)]),
            (frames("fact"), &[], &[(0x508, 0x100, 1)])
        ])
    );
}

#[test]
fn line_ranges_are_split_by_inline_context() {
    // main3 calls outer, which runs through its inlined `inl` and returns.
    let s = sample(&[0x904], &[(0x810, 0x904), (0x900, 0x800)]);
    let (c, _) = run(LINE, &[(s.clone(), 5)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (
                frames("main3:0 @ outer"),
                &[(0x80c, 0x810, 5), (0x800, 0x800, 5)],
                &[(0x810, 0x904, 5)]
            ),
            (frames("main3:0 @ outer:2 @ inl"), &[(0x804, 0x808, 5)], &[]),
            (frames("main3"), &[], &[(0x900, 0x800, 5)]),
        ])
    );
    // Probe binaries record the whole range on the caller's call site.
    let (c, _) = run(PROBE, &[(s, 5)]);
    assert_eq!(
        c.by_context,
        expected(&[
            (addrs(&[0x900]), &[(0x800, 0x810, 5)], &[(0x810, 0x904, 5)]),
            (addrs(&[]), &[], &[(0x900, 0x800, 5)])
        ])
    );
}

#[test]
fn repeated_samples_accumulate_and_unwind_all_matches_sequential() {
    let samples = vec![(nested_calls(), 2), (call_then_return(), 3), (nested_calls(), 4)];
    let (seq, seq_stats) = run(PROBE, &samples);
    let code = fake();
    let (par, par_stats) = unwind_all(&code, &samples, PROBE);
    assert_eq!(par.by_context, seq.by_context);
    assert_eq!(par_stats, seq_stats);
    assert_eq!(seq.by_context[&addrs(&[0x108])].ranges[&(v(0x200), v(0x208))], 6);
}

/// `samples` unwound each by an unwinder of its own, the results summed.
fn run_apart(
    opts: UnwindOptions,
    samples: &[(HybridSample, u64)],
) -> (ContextCounters, UnwindStats) {
    let mut all = ContextCounters { context_sensitive: true, ..Default::default() };
    let mut stats = UnwindStats::default();
    for s in samples {
        let (c, st) = run(opts, std::slice::from_ref(s));
        for (k, c) in c.by_context {
            all.by_context.entry(k).or_default().merge(&c);
        }
        stats.merge(&st);
    }
    (all, stats)
}

#[test]
fn frames_kept_from_sample_to_sample_count_as_fresh_ones() {
    // main → fact recursing 1030 times (deeper than MAX_CONTEXT_FRAMES), sampled at fact's entry.
    let mut deep = vec![0x500];
    deep.extend(std::iter::repeat_n(0x508, 1030));
    deep.push(0x118);
    let deep_call = sample(&deep, &[(0x508, 0x500)]);
    let deep_calls = sample(&deep, &[(0x508, 0x500), (0x508, 0x500)]);
    let samples = [
        (nested_calls(), 2),
        (call_then_return(), 3),
        (recursion(), 1),
        (deep_call, 5),
        (deep_calls, 7),
        (recursion(), 2),
        (nested_calls(), 4),
        (sample(&[0x300, 0x208, EXT, 0x108], &[(0x208, 0x300), (EXT, 0x200)]), 1),
        (call_then_return(), 1),
    ];
    for opts in [PROBE, LINE] {
        let (c, st) = run(opts, &samples);
        let (apart, apart_stats) = run_apart(opts, &samples);
        assert_eq!(c.by_context, apart.by_context, "{opts:?}");
        assert_eq!(st, apart_stats, "{opts:?}");
        // Each deep sample cuts a context, also when the one before it left its frames.
        assert_eq!(st.deep_stacks, 12, "{opts:?}");
    }
}

#[test]
fn unwind_all_merges_many_pieces_as_one_unwinder_counts() {
    // Several chunks: unwound by several unwinders whose contexts merge shard by shard.
    let samples: Vec<_> = (0..2000)
        .map(|i| if i % 3 == 0 { (call_then_return(), 1) } else { (nested_calls(), 2) })
        .collect();
    let (seq, seq_stats) = run(PROBE, &samples);
    let (par, par_stats) = unwind_all(&fake(), &samples, PROBE);
    assert_eq!(par.by_context, seq.by_context);
    assert_eq!(par_stats, seq_stats);
    assert_eq!(seq.by_context[&addrs(&[0x108])].ranges[&(v(0x200), v(0x208))], 2666);
}

#[test]
fn stack_order_groups_samples_by_their_outer_callers_then_all_callers() {
    // The three hashes' bits: outer callers, all but the innermost, all.
    let order = |stack: &[u64]| {
        let o = StackOrder::of(&stack.iter().map(|&a| v(a)).collect::<Vec<_>>()).0;
        [o >> 42, o >> 21 & 0x1f_ffff, o & 0x1f_ffff]
    };
    // Leaf first; the leaf does not count.
    assert_eq!(order(&[0x1, 0xa, 0xb, 0xc]), order(&[0x2, 0xa, 0xb, 0xc]));
    let (all, other_caller) = (order(&[0x1, 0xa, 0xb, 0xc]), order(&[0x1, 0xd, 0xb, 0xc]));
    assert_eq!(all[..2], other_caller[..2]);
    assert_ne!(all[2], other_caller[2]);
    let other_root = order(&[0x1, 0xa, 0xb, 0xd]);
    assert!((0..3).all(|i| all[i] != other_root[i]));
    // Shallow stacks: the missing outer prefixes are the empty one.
    assert_eq!(order(&[0x1]), [0; 3]);
    assert_eq!(order(&[0x1, 0xa])[..2], [0, 0]);
}

#[test]
fn bogus_trace_and_empty_samples_are_rejected() {
    let code = fake();
    let mut u = Unwinder::new(&code, PROBE);
    assert!(!u.unwind(&sample(&[0x500], &[(0x118, 0x300)]), 1));
    assert!(!u.unwind(&sample(&[], &[(0x118, 0x300)]), 1));
    assert!(!u.unwind(&sample(&[0x300], &[]), 1));
    let (c, st) = u.finish();
    assert!(c.by_context.is_empty());
    assert_eq!(st.bogus_traces, vec![(v(0x500), v(0x300))]);
}

#[test]
fn normalisation_maps_return_addresses_and_overwrites_the_leaf() {
    let code = fake();
    let mut st = NormalizeStats::default();
    // Leaf 0x30c in bar, return addresses 0x20c (after foo's call) and 0x10c (after main's).
    let s = normalize_hybrid_sample(
        &code,
        &[v(0x30c), v(0x20c), v(0x10c)],
        &[(v(0x208), v(0x300)), (v(0x108), v(0x200))],
        2,
        false,
        &mut st,
    );
    assert_eq!(s, Some(nested_calls()));
    assert_eq!(st, NormalizeStats { samples: 2, ..Default::default() });
}

#[test]
fn normalisation_truncates_at_invalid_return_address() {
    let code = fake();
    let mut st = NormalizeStats::default();
    // 0x204 follows a non-call instruction: the stack is cut there.
    let s = normalize_hybrid_sample(
        &code,
        &[v(0x30c), v(0x204), v(0x10c)],
        &[(v(0x208), v(0x300))],
        1,
        false,
        &mut st,
    );
    assert_eq!(s, Some(sample(&[0x300], &[(0x208, 0x300)])));
    assert_eq!(st.invalid_return_addrs, BTreeSet::from([v(0x204)]));
    assert_eq!(
        st.summary(1)[1],
        (
            1,
            1,
            "of truncated stack samples due to invalid return address, likely caused by frame pointer omission."
        )
    );
}

#[test]
fn normalisation_merges_external_frames_and_drops_external_root() {
    let code = fake();
    let mut st = NormalizeStats::default();
    // 0xdead0 and 0xdead4 are outside the binary; the external root frame is dropped too.
    let s = normalize_hybrid_sample(
        &code,
        &[v(0x30c), v(0x20c), v(0xdead0), v(0xdead4), v(0x10c), v(0xbeef0)],
        &[(v(0x208), v(0x300)), (v(0xdead8), v(0x200)), (v(0xdead0), v(0xdead4))],
        1,
        false,
        &mut st,
    );
    assert_eq!(s, Some(sample(&[0x300, 0x208, EXT, 0x108], &[(0x208, 0x300), (EXT, 0x200)])));
    // An external leaf is counted, and with a non-empty LBR it is overwritten by the LBR target.
    let s = normalize_hybrid_sample(
        &code,
        &[v(0xdead0), v(0x10c)],
        &[(v(EXT), v(0x200))],
        3,
        false,
        &mut st,
    );
    assert_eq!(s, Some(sample(&[0x200, 0x108], &[(EXT, 0x200)])));
    assert_eq!(st, NormalizeStats { samples: 4, leaf_external: 3, ..Default::default() });
}

#[test]
fn normalisation_drops_prolog_leaves_and_empty_lbr() {
    let code = fake();
    let mut st = NormalizeStats::default();
    assert_eq!(
        normalize_hybrid_sample(
            &code,
            &[v(0x304), v(0x20c)],
            &[(v(0x208), v(0x300))],
            1,
            false,
            &mut st
        ),
        None
    );
    assert_eq!(
        normalize_hybrid_sample(
            &code,
            &[v(0x30c), v(0x20c)],
            &[(v(0xdead0), v(0xdead4))],
            2,
            false,
            &mut st
        ),
        None
    );
    assert_eq!(
        normalize_hybrid_sample(&code, &[], &[(v(0x208), v(0x300))], 4, false, &mut st),
        None
    );
    assert_eq!(
        st,
        NormalizeStats {
            samples: 7,
            dropped_prolog_epilog: 1,
            dropped_empty_lbr: 2,
            ..Default::default()
        }
    );
}

#[test]
fn normalisation_recovers_the_caller_of_prolog_and_epilog_leaves() {
    let mut code = fake();
    code.prolog.insert(0x310);
    let mut st = NormalizeStats::default();
    let calls = [(v(0x208), v(0x300)), (v(0x108), v(0x200))];
    // At bar's second instruction rbp is still foo's: the stack skips foo's call site 0x208,
    // which the unmatched call in the LBR gives back. llvm-profgen's rule drops the sample.
    let prolog = [v(0x304), v(0x10c)];
    assert_eq!(normalize_hybrid_sample(&code, &prolog, &calls, 1, false, &mut st), None);
    assert_eq!(
        normalize_hybrid_sample(&code, &prolog, &calls, 1, true, &mut st),
        Some(nested_calls())
    );
    // At bar's `ret` (rbp popped): the same.
    let epilog = [(v(0x308), v(0x30c)), calls[0], calls[1]];
    let s = normalize_hybrid_sample(&code, &[v(0x310), v(0x10c)], &epilog, 1, true, &mut st);
    assert_eq!(
        s,
        Some(sample(&[0x30c, 0x208, 0x108], &[(0x308, 0x30c), (0x208, 0x300), (0x108, 0x200)]))
    );
    // At main's `ret`: baz's call and return are matched and skipped; main was entered from
    // external code, so nothing is added.
    code.prolog.insert(0x120);
    let main = [(v(0x408), v(0x114)), (v(0x110), v(0x400)), (v(EXT), v(0x100))];
    let s = normalize_hybrid_sample(&code, &[v(0x120)], &main, 1, true, &mut st);
    assert_eq!(s, Some(sample(&[0x114], &[(0x408, 0x114), (0x110, 0x400), (EXT, 0x100)])));
    // No call in the window: the context is cut at the leaf.
    let s = normalize_hybrid_sample(&code, &prolog, &[(v(0x308), v(0x300))], 2, true, &mut st);
    assert_eq!(s, Some(sample(&[0x300, EXT, 0x108], &[(0x308, 0x300)])));
    // Called from external code: the context starts at the leaf.
    let s = normalize_hybrid_sample(&code, &prolog, &[(v(EXT), v(0x300))], 1, true, &mut st);
    assert_eq!(s, Some(sample(&[0x300, EXT, 0x108], &[(EXT, 0x300)])));
    assert_eq!(st, NormalizeStats { samples: 7, dropped_prolog_epilog: 1, ..Default::default() });
}

#[test]
fn held_counts_reach_the_stacks_as_direct_counting_would() {
    // More (stack, kind, pair) keys than slots, each added three times in rounds, so slots are
    // taken over between additions; a count of 0 still makes an entry, sums saturate.
    let mut stacks = Stacks::default();
    // Stacks 0 (the root) to 36.
    for i in 1..37 {
        assert_eq!(stacks.child(ROOT as u32, v(0x9000 + i)), i as u32);
    }
    let mut held = HeldCounts::new();
    let mut want: HashMap<u32, Counters> = HashMap::new();
    let keys: Vec<(u32, bool, u64, u64)> = (0..3 * HeldCounts::SLOTS as u64)
        .map(|i| ((i % 37) as u32, i % 2 == 1, 0x1000 + i / 5, 0x2000 + i % 5))
        .collect();
    for round in 0..3u64 {
        for (i, &(stack, branch, from, to)) in keys.iter().enumerate() {
            let n = match i % 7 {
                0 => 0,
                1 => u64::MAX / 2,
                _ => round + i as u64,
            };
            held.add(&mut stacks, stack, branch, v(from), v(to), n);
            let c = want.entry(stack).or_default();
            if branch { c.add_branch(v(from), v(to), n) } else { c.add_range(v(from), v(to), n) }
        }
    }
    held.drain_into(&mut stacks);
    let got: HashMap<u32, Counters> = stacks.counters.into_iter().collect();
    assert_eq!(got, want);
    // Key 38 (stack 1, a range), key 1 (stack 1, a branch), key 0.
    assert_eq!(got[&1].ranges[&(v(0x1007), v(0x2003))], 3 * 38 + 3);
    assert_eq!(got[&1].branches[&(v(0x1000), v(0x2001))], u64::MAX);
    assert_eq!(got[&0].ranges[&(v(0x1000), v(0x2000))], 0);
}

#[test]
fn memos_answer_as_the_code_does() {
    // Every range over main's and foo's code and every return target, twice (the second time
    // from the slots), and the initial slots' key 0, answered without a query.
    let code = fake();
    let mut u = Unwinder::new(&code, PROBE);
    let addrs: Vec<Vaddr> = (0..=0x214).step_by(4).map(v).collect();
    for _ in 0..2 {
        for &s in &addrs {
            let want = call_site_of(&code, s);
            assert_eq!(u.call_sites.get(s, (s.0, 0), || call_site_of(&code, s)), want, "{s:?}");
            for &e in &addrs {
                let want = code.range_crosses_uncond_branch(s, e);
                let crosses = || code.range_crosses_uncond_branch(s, e);
                assert_eq!(u.crossings.get((s, e), (s.0, e.0), crosses), want, "{s:?}..{e:?}");
            }
        }
    }
    let crosses = |s, e| code.range_crosses_uncond_branch(v(s), v(e));
    assert!(u.crossings.get((v(0x10c), v(0x118)), (0x10c, 0x118), || crosses(0x10c, 0x118)));
    let mut fresh = Unwinder::new(&code, PROBE);
    assert!(!fresh.crossings.get((v(0), v(0)), (0, 0), || unreachable!("in the initial slots")));
    let want = call_site_of(&code, v(0));
    assert_eq!(fresh.call_sites.get(v(0), (0, 0), || unreachable!("in the initial slots")), want);
}

#[test]
fn stacks_intern_each_call_site_once_past_the_recent_lookups() {
    let mut stacks = Stacks::default();
    let keys: Vec<(u32, Vaddr)> =
        (0..3 * RECENT_CHILDREN as u64).map(|i| ((i % 5) as u32, v(0x1000 + 4 * i))).collect();
    let ids: Vec<u32> = keys.iter().map(|&(p, a)| stacks.child(p, a)).collect();
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), keys.len());
    for (&(p, a), &id) in keys.iter().zip(&ids).rev() {
        assert_eq!(stacks.child(p, a), id);
        let (parent, site, _) = stacks.nodes[id as usize];
        assert_eq!((parent, site), (p, a));
    }
    assert_eq!(stacks.nodes.len(), keys.len() + 1);
}
