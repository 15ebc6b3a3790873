//! CS builder tests on hand-made code and probe maps with hand-computed expected profiles.

use super::*;
use crate::aggregate::Counters;
use crate::binary::code_view::{CodeMap, frame};
use crate::llvm::canonical_fn_name;
use crate::profile::BodySample;

fn v(a: u64) -> Vaddr {
    Vaddr(a)
}

fn counters(r: &[(u64, u64, u64)], b: &[(u64, u64, u64)]) -> Counters {
    let mut c = Counters::default();
    for &(s, e, n) in r {
        c.add_range(v(s), v(e), n);
    }
    for &(s, t, n) in b {
        c.add_branch(v(s), v(t), n);
    }
    c
}

/// `"main:2.1 @ foo"` → context frames.
fn ctx(s: &str) -> Vec<ContextFrame> {
    let parts: Vec<&str> = s.split(" @ ").collect();
    parts
        .iter()
        .enumerate()
        .map(|(i, p)| {
            if i + 1 == parts.len() {
                return ContextFrame { func: (*p).into(), loc: LineLocation::default() };
            }
            let (func, loc) = p.rsplit_once(':').unwrap();
            let (line, d) = loc.split_once('.').unwrap_or((loc, "0"));
            ContextFrame {
                func: func.into(),
                loc: LineLocation::new(line.parse().unwrap(), d.parse().unwrap()),
            }
        })
        .collect()
}

/// A body entry: line, discriminator, count, call targets.
type Body<'a> = (u32, u32, u64, &'a [(&'a str, u64)]);

/// Expected profile.
fn fs(
    name: &str,
    total: u64,
    head: u64,
    body: &[Body],
    checksum: Option<u64>,
    attributes: u32,
) -> FunctionSamples {
    let mut f = FunctionSamples::new(name);
    f.total_samples = total;
    f.head_samples = head;
    f.checksum = checksum;
    f.attributes = attributes;
    for &(line, d, n, targets) in body {
        let b = BodySample {
            count: n,
            call_targets: targets.iter().map(|(t, c)| ((*t).into(), *c)).collect(),
        };
        f.body.insert(LineLocation::new(line, d), b);
    }
    f
}

fn profile_map(p: &Profile) -> BTreeMap<String, FunctionSamples> {
    p.functions
        .iter()
        .map(|(c, f)| {
            let s: Vec<String> = c
                .frames()
                .enumerate()
                .map(|(i, (func, loc))| {
                    if i + 1 == c.len() {
                        func.to_string()
                    } else if loc.discriminator != 0 {
                        format!("{func}:{}.{}", loc.line_offset, loc.discriminator)
                    } else {
                        format!("{func}:{}", loc.line_offset)
                    }
                })
                .collect();
            (s.join(" @ "), f.clone())
        })
        .collect()
}

// main: 100 O [main:0]  104 call foo [main:1, raw discriminator 2]  108 O  10c ret
// foo:  200 O  204 O  208 O (same line as 204)  20c O (bar inlined, raw discriminator 0x202:
//       base 1, duplication factor 2)  210 ret [foo:4]
fn line_code() -> CodeMap {
    use InstKind::*;
    let mut c = CodeMap::from_layout(&[
        ("main", 0x100, &[Other, Call, Other, Return]),
        ("foo", 0x200, &[Other, Other, Other, Other, Return]),
    ]);
    c.inline.insert(0x104, vec![frame("main", 1, 2)]);
    c.inline.insert(0x208, vec![frame("foo", 1, 0)]);
    c.inline.insert(0x20c, vec![frame("foo", 2, 0), frame("bar", 1, 0x202)]);
    c
}

fn line_counters() -> ContextCounters {
    let mut cc = ContextCounters { context_sensitive: true, ..Default::default() };
    let foo = ContextKey::Frames(ctx("main:1.1 @ foo"));
    let bar = ContextKey::Frames(ctx("main:1.1 @ foo:2 @ bar"));
    cc.by_context.insert(
        foo,
        counters(
            &[(0x200, 0x208, 10), (0x204, 0x208, 5), (0x210, 0x210, 15)],
            &[(0x210, 0x108, 15)],
        ),
    );
    cc.by_context.insert(bar.clone(), counters(&[(0x20c, 0x20c, 15)], &[]));
    cc.by_context.insert(
        ContextKey::Frames(ctx("main")),
        counters(&[(0x100, 0x104, 15)], &[(0x104, 0x200, 15)]),
    );
    cc.by_context.insert(ContextKey::Frames(Vec::new()), counters(&[], &[(1, 0x100, 2)]));
    cc
}

#[test]
fn line_cs_replicates_llvm_19_raw_discriminator_callee_context() {
    let p = generate_line_cs(&line_code(), &line_counters(), &CsOptions::default());
    assert_eq!(
        p.kind,
        ProfileKind {
            context_sensitive: true,
            probe_based: false,
            preinlined: false,
            fs_discriminator: false
        }
    );
    let m = profile_map(&p);
    let expected = BTreeMap::from([
        // Inferred call count 10 (foo's first body sample) on top of the 15 real calls.
        (
            "main".to_string(),
            fs("main", 40, 2, &[(0, 0, 15, &[]), (1, 1, 25, &[("foo", 25)])], None, 0),
        ),
        (
            "main:1.1 @ foo".to_string(),
            fs(
                "foo",
                85,
                0,
                &[(0, 0, 10, &[]), (1, 0, 15, &[]), (2, 0, 30, &[("bar", 30)]), (4, 0, 15, &[])],
                None,
                0,
            ),
        ),
        (
            "main:1.1 @ foo:2 @ bar".to_string(),
            fs("bar", 15, 0, &[(1, 1, 30, &[])], None, attr::WAS_INLINED),
        ),
        // The stray head-sample context at the raw discriminator.
        ("main:1.2 @ foo".to_string(), fs("foo", 0, 15, &[], None, 0)),
    ]);
    assert_eq!(m, expected);
}

#[test]
fn line_cs_base_discriminator_callee_context_fix() {
    let opts = CsOptions { callee_context_base_discriminator: true, ..CsOptions::default() };
    let m = profile_map(&generate_line_cs(&line_code(), &line_counters(), &opts));
    assert_eq!(
        m["main"],
        fs("main", 30, 2, &[(0, 0, 15, &[]), (1, 1, 15, &[("foo", 15)])], None, 0)
    );
    assert_eq!(m["main:1.1 @ foo"].head_samples, 15);
    assert_eq!(m["main:1.1 @ foo"].total_samples, 85);
    assert_eq!(m.len(), 3);
}

#[test]
fn line_cs_update_total_samples_and_branch_only_context() {
    let mut cc = ContextCounters { context_sensitive: true, ..Default::default() };
    // A context with only a non-call branch still gets a (zero) profile and an inferred count
    // of 1 at its parent's call site.
    cc.by_context
        .insert(ContextKey::Frames(ctx("main:1.1 @ foo")), counters(&[], &[(0x208, 0x204, 3)]));
    cc.by_context.insert(ContextKey::Frames(ctx("main")), counters(&[(0x100, 0x104, 4)], &[]));
    let opts = CsOptions { update_total_samples: true, ..CsOptions::default() };
    let m = profile_map(&generate_line_cs(&line_code(), &cc, &opts));
    assert_eq!(m["main"], fs("main", 9, 0, &[(0, 0, 4, &[]), (1, 1, 5, &[("foo", 1)])], None, 0));
    assert_eq!(m["main:1.1 @ foo"], fs("foo", 0, 0, &[], None, 0));
}

type Node = (u64, Option<(NodeId, u32)>, Vec<Probe>);

/// Probe map: inline-tree nodes and descriptors.
struct Probes {
    at: BTreeMap<u64, Vec<Probe>>,
    /// (guid, inline site, probes) per node.
    nodes: Vec<Node>,
    descs: BTreeMap<u64, (&'static str, u64)>,
}

impl Probes {
    fn new(descs: &[(u64, &'static str, u64)]) -> Probes {
        Probes {
            at: BTreeMap::new(),
            nodes: Vec::new(),
            descs: descs.iter().map(|&(g, n, h)| (g, (n, h))).collect(),
        }
    }
    fn node(
        &mut self,
        guid: u64,
        site: Option<(u32, u32)>,
        probes: &[(u64, u32, ProbeType)],
    ) -> u32 {
        let id = NodeId(self.nodes.len() as u32);
        let ps: Vec<Probe> = probes
            .iter()
            .map(|&(a, index, kind)| Probe {
                addr: v(a),
                guid,
                index,
                kind,
                attr: 0,
                discriminator: 0,
                node: id,
            })
            .collect();
        for p in &ps {
            self.at.entry(p.addr.0).or_default().push(*p);
        }
        self.nodes.push((guid, site.map(|(n, s)| (NodeId(n), s)), ps));
        id.0
    }
}

impl ProbeView for Probes {
    fn probes_at(&self, a: Vaddr) -> &[Probe] {
        self.at.get(&a.0).map_or(&[], |v| v)
    }
    fn probes_in(&self, start: Vaddr, end: Vaddr) -> impl Iterator<Item = (Vaddr, &[Probe])> {
        self.at.range(start.0..=end.0).map(|(&a, at)| (Vaddr(a), &at[..]))
    }
    fn node_probes(&self, n: NodeId) -> &[Probe] {
        &self.nodes[n.0 as usize].2
    }
    fn node_count(&self) -> usize {
        self.nodes.len()
    }
    fn node_guid(&self, n: NodeId) -> u64 {
        self.nodes[n.0 as usize].0
    }
    fn node_inline_site(&self, n: NodeId) -> Option<(NodeId, u32)> {
        self.nodes[n.0 as usize].1
    }
    fn func_desc(&self, guid: u64) -> Option<(&str, u64)> {
        self.descs.get(&guid).copied()
    }
}

// main: 100 [#1]  104 call [#2 call]  108 [#3]  10c ret
// foo:  200 [#1]  204 [#2]  208 [bar #1]  20c [bar #2]  210 [#4]  214 ret [#5]   (bar inlined at #3)
// tc:   300 [#1]  304 jmp foo [#2 call]
fn probe_code() -> (CodeMap, Probes) {
    use InstKind::*;
    use ProbeType::*;
    let code = CodeMap::from_layout(&[
        ("main", 0x100, &[Other, Call, Other, Return]),
        ("foo", 0x200, &[Other, Other, Other, Other, Other, Return]),
        ("tc", 0x300, &[Other, DirectJump]),
    ]);
    let mut p = Probes::new(&[(1, "main", 100), (2, "foo", 200), (3, "bar", 300), (4, "tc", 400)]);
    p.node(1, None, &[(0x100, 1, Block), (0x104, 2, DirectCall), (0x108, 3, Block)]);
    let foo = p.node(
        2,
        None,
        &[(0x200, 1, Block), (0x204, 2, Block), (0x210, 4, Block), (0x214, 5, Block)],
    );
    p.node(3, Some((foo, 3)), &[(0x208, 1, Block), (0x20c, 2, Block)]);
    p.node(4, None, &[(0x300, 1, Block), (0x304, 2, DirectCall)]);
    (code, p)
}

fn addrs(a: &[u64]) -> ContextKey {
    ContextKey::Addrs(a.iter().map(|&x| v(x)).collect())
}

#[test]
fn probe_cs_body_boundary_inlinee_entry_and_zero_probes() {
    let (code, probes) = probe_code();
    let mut cc = ContextCounters { context_sensitive: true, ..Default::default() };
    cc.by_context.insert(addrs(&[0x104]), counters(&[(0x200, 0x210, 10)], &[(0x214, 0x108, 10)]));
    cc.by_context
        .insert(addrs(&[]), counters(&[(0x100, 0x104, 10)], &[(0x104, 0x200, 10), (1, 0x100, 1)]));
    let (p, stats) = generate_probe_cs(&code, &probes, &cc, &CsOptions::default());
    assert_eq!(stats, ProbeCsStats::default());
    assert!(p.kind.probe_based && p.kind.context_sensitive);
    let expected = BTreeMap::from([
        (
            "main".to_string(),
            fs(
                "main",
                20,
                10,
                &[(1, 0, 10, &[]), (2, 0, 10, &[("foo", 10)]), (3, 0, 0, &[])],
                Some(100),
                0,
            ),
        ),
        (
            "main:2 @ foo".to_string(),
            fs(
                "foo",
                40,
                10,
                &[
                    (1, 0, 10, &[]),
                    (2, 0, 10, &[]),
                    (3, 0, 10, &[("bar", 10)]),
                    (4, 0, 10, &[]),
                    (5, 0, 0, &[]),
                ],
                Some(200),
                0,
            ),
        ),
        (
            "main:2 @ foo:3 @ bar".to_string(),
            fs("bar", 20, 10, &[(1, 0, 10, &[]), (2, 0, 10, &[])], Some(300), attr::WAS_INLINED),
        ),
    ]);
    assert_eq!(profile_map(&p), expected);
}

/// Contexts built in parallel runs and merged: the same profile on any number of threads, with
/// a context that two calling contexts reach (recursion compression folds `main:2 @ main:2`).
#[test]
fn probe_cs_is_the_same_on_any_number_of_threads() {
    let (code, probes) = probe_code();
    let mut cc = ContextCounters { context_sensitive: true, ..Default::default() };
    let foo = counters(&[(0x200, 0x210, 10)], &[(0x214, 0x108, 10)]);
    cc.by_context.insert(addrs(&[0x104]), foo.clone());
    cc.by_context.insert(addrs(&[0x104, 0x104]), foo);
    cc.by_context
        .insert(addrs(&[]), counters(&[(0x100, 0x104, 10)], &[(0x104, 0x200, 10), (1, 0x100, 1)]));
    let on = |threads| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        pool.install(|| generate_probe_cs(&code, &probes, &cc, &CsOptions::default()).0)
    };
    let one = on(1);
    let m = profile_map(&one);
    assert_eq!(m["main:2 @ foo"].total_samples, 80);
    assert_eq!(m["main:2 @ foo"].checksum, Some(200));
    assert_eq!(m["main:2 @ foo:3 @ bar"].head_samples, 20);
    for threads in [2, 3] {
        assert_eq!(on(threads), one, "{threads} threads");
    }
}

fn tail_call_counters() -> ContextCounters {
    // main calls tc at 0x104; tc tail-jumps to foo, whose samples are keyed under main's call.
    let mut cc = ContextCounters { context_sensitive: true, ..Default::default() };
    cc.by_context.insert(
        addrs(&[0x104]),
        counters(&[(0x300, 0x304, 5), (0x200, 0x204, 5)], &[(0x304, 0x200, 5)]),
    );
    cc.by_context.insert(addrs(&[]), counters(&[], &[(0x104, 0x300, 5)]));
    cc
}

#[test]
fn probe_cs_infers_missing_tail_call_frame() {
    let (code, probes) = probe_code();
    let (p, _) = generate_probe_cs(&code, &probes, &tail_call_counters(), &CsOptions::default());
    let expected = BTreeMap::from([
        ("main".to_string(), fs("main", 5, 0, &[(2, 0, 5, &[("tc", 5)])], Some(100), 0)),
        (
            "main:2 @ tc".to_string(),
            fs("tc", 10, 5, &[(1, 0, 5, &[]), (2, 0, 5, &[("foo", 5)])], Some(400), 0),
        ),
        (
            "main:2 @ tc:2 @ foo".to_string(),
            fs(
                "foo",
                10,
                5,
                &[(1, 0, 5, &[]), (2, 0, 5, &[]), (4, 0, 0, &[]), (5, 0, 0, &[])],
                Some(200),
                0,
            ),
        ),
    ]);
    assert_eq!(profile_map(&p), expected);
}

#[test]
fn probe_cs_without_inference_keeps_the_tail_called_function_under_the_caller() {
    let (code, probes) = probe_code();
    let opts = CsOptions { infer_missing_frames: false, ..CsOptions::default() };
    let m = profile_map(&generate_probe_cs(&code, &probes, &tail_call_counters(), &opts).0);
    assert_eq!(m.keys().collect::<Vec<_>>(), vec!["main", "main:2 @ foo", "main:2 @ tc"]);
    // Depth 0 of the search finds nothing either.
    let opts = CsOptions { max_search_depth: 0, ..CsOptions::default() };
    let m = profile_map(&generate_probe_cs(&code, &probes, &tail_call_counters(), &opts).0);
    assert!(m.contains_key("main:2 @ foo"));
}

#[test]
fn missing_frame_inference_requires_a_unique_path() {
    use InstKind::*;
    // f calls g (sampled); g tail-calls h at 0x204 and k at 0x208; both h and k tail-call t.
    let code = CodeMap::from_layout(&[
        ("f", 0x100, &[Call, Return]),
        ("g", 0x200, &[Other, DirectJump, IndirectJump]),
        ("h", 0x300, &[DirectJump]),
        ("k", 0x400, &[DirectJump]),
        ("t", 0x500, &[Other, Return]),
    ]);
    let mut cc = ContextCounters::default();
    cc.by_context.insert(
        addrs(&[]),
        counters(&[], &[(0x100, 0x200, 1), (0x204, 0x300, 1), (0x300, 0x500, 1)]),
    );
    let mut inf = MissingFrameInferrer::new(&code, &cc, u32::MAX - 1);
    assert_eq!(
        inf.infer(&code, &[v(0x100), v(0x500)]),
        vec![v(0x100), v(0x204), v(0x300), v(0x500)]
    );
    // Asked again (answered by the pair's first result): the same frames.
    assert_eq!(
        inf.infer(&code, &[v(0x100), v(0x500)]),
        vec![v(0x100), v(0x204), v(0x300), v(0x500)]
    );
    // A second route through k makes the path ambiguous: nothing is inserted.
    cc.by_context.insert(addrs(&[0x100]), counters(&[], &[(0x208, 0x400, 1), (0x400, 0x500, 1)]));
    let mut inf = MissingFrameInferrer::new(&code, &cc, u32::MAX - 1);
    assert_eq!(inf.infer(&code, &[v(0x100), v(0x500)]), vec![v(0x100), v(0x500)]);
    // Directly called callee: nothing to infer; unknown caller: unchanged.
    assert_eq!(inf.infer(&code, &[v(0x100), v(0x204)]), vec![v(0x100), v(0x204)]);
    assert_eq!(inf.infer(&code, &[v(0x500)]), vec![v(0x500)]);
}

#[test]
fn discriminator_decoding_and_canonical_names() {
    assert_eq!((base_discriminator(2, false), duplication_factor(2, false)), (1, 1));
    assert_eq!((base_discriminator(0x202, false), duplication_factor(0x202, false)), (1, 2));
    assert_eq!((base_discriminator(1, false), duplication_factor(1, false)), (0, 1));
    assert_eq!((base_discriminator(0x202, true), duplication_factor(0x202, true)), (0x202, 1));
    assert_eq!(canonical_fn_name("foo.llvm.123"), "foo");
    assert_eq!(canonical_fn_name("foo.part.1.llvm.9"), "foo");
    assert_eq!(canonical_fn_name("foo.__uniq.42"), "foo.__uniq.42");
    assert_eq!(canonical_fn_name("foo.llvm.1.cold"), "foo.llvm.1.cold");
}

#[test]
fn raw_sample_to_line_cs_profile_end_to_end() {
    use crate::aggregate::unwinder::{
        NormalizeStats, UnwindOptions, Unwinder, normalize_hybrid_sample,
    };
    let code = line_code();
    // main calls foo at 0x104; foo (with bar inlined) returns to 0x108, where the sample is taken.
    let mut ns = NormalizeStats::default();
    let s = normalize_hybrid_sample(
        &code,
        &[v(0x108)],
        &[(v(0x210), v(0x108)), (v(0x104), v(0x200))],
        7,
        false,
        &mut ns,
    )
    .unwrap();
    let mut u = Unwinder::new(&code, UnwindOptions::default());
    assert!(u.unwind(&s, 7));
    let (cc, _) = u.finish();
    let m = profile_map(&generate_line_cs(&code, &cc, &CsOptions::default()));
    let expected = BTreeMap::from([
        // llvm-profgen-19 reports 14 calls for 7: 7 inferred from foo's entry line plus 7 from
        // the stray raw-discriminator context.
        ("main".to_string(), fs("main", 7, 0, &[(1, 1, 14, &[("foo", 14)])], None, 0)),
        (
            "main:1.1 @ foo".to_string(),
            fs(
                "foo",
                42,
                0,
                &[(0, 0, 7, &[]), (1, 0, 7, &[]), (2, 0, 14, &[("bar", 14)]), (4, 0, 7, &[])],
                None,
                0,
            ),
        ),
        (
            "main:1.1 @ foo:2 @ bar".to_string(),
            fs("bar", 7, 0, &[(1, 1, 14, &[])], None, attr::WAS_INLINED),
        ),
        ("main:1.2 @ foo".to_string(), fs("foo", 0, 7, &[], None, 0)),
    ]);
    assert_eq!(m, expected);
    // With the fix the call count is the real one and the head samples land on foo's context.
    let opts = CsOptions { callee_context_base_discriminator: true, ..CsOptions::default() };
    let m = profile_map(&generate_line_cs(&code, &cc, &opts));
    assert_eq!(m["main"], fs("main", 0, 0, &[(1, 1, 7, &[("foo", 7)])], None, 0));
    assert_eq!(m["main:1.1 @ foo"].head_samples, 7);
    assert_eq!(m.len(), 3);
}

#[test]
fn probe_cs_unknown_callsite_resets_context_and_missing_desc_is_counted() {
    use ProbeType::*;
    let (code, _) = probe_code();
    let mut cc = ContextCounters { context_sensitive: true, ..Default::default() };
    cc.by_context.insert(addrs(&[0x104]), counters(&[(0x208, 0x208, 3)], &[]));
    // bar inlined into foo at an unknown call site (probe id 0): the context restarts at bar.
    let mut p = Probes::new(&[(1, "main", 100), (2, "foo", 200), (3, "bar", 300)]);
    p.node(1, None, &[(0x104, 2, DirectCall)]);
    let foo = p.node(2, None, &[(0x200, 1, Block)]);
    p.node(3, Some((foo, 0)), &[(0x208, 1, Block)]);
    let (profile, stats) = generate_probe_cs(&code, &p, &cc, &CsOptions::default());
    assert_eq!(stats, ProbeCsStats::default());
    assert_eq!(
        profile_map(&profile),
        BTreeMap::from([(
            "bar".to_string(),
            fs("bar", 3, 3, &[(1, 0, 3, &[])], Some(300), attr::WAS_INLINED)
        )])
    );
    // Without a descriptor for bar the probe cannot be named: skipped and counted.
    let mut p = Probes::new(&[(1, "main", 100), (2, "foo", 200)]);
    p.node(1, None, &[(0x104, 2, DirectCall)]);
    let foo = p.node(2, None, &[(0x200, 1, Block)]);
    p.node(3, Some((foo, 3)), &[(0x208, 1, Block)]);
    let (profile, stats) = generate_probe_cs(&code, &p, &cc, &CsOptions::default());
    assert!(profile.functions.is_empty());
    assert_eq!(stats, ProbeCsStats { probes_without_desc: 1 });
}

#[test]
fn a_context_continues_the_next_only_as_its_callers_context() {
    let key = |frames: &[(u32, u32, u32)]| {
        let mut key = vec![0; frames.len() * FRAME_BYTES];
        for (bytes, &(name, line, discr)) in key.chunks_exact_mut(FRAME_BYTES).zip(frames) {
            Frame { name, loc: LineLocation::new(line, discr) }.write(bytes);
        }
        key
    };
    let callee = key(&[(1, 3, 0), (2, 5, 1), (3, 0, 0)]);
    // The caller's context (its leaf at (0, 0)) and the root's.
    assert!(continues(&key(&[(1, 3, 0), (2, 0, 0)]), &callee));
    assert!(continues(&key(&[(1, 0, 0)]), &callee));
    // Another function, call site or discriminator above the leaf; not shorter; leaf not (0, 0).
    assert!(!continues(&key(&[(1, 3, 0), (4, 0, 0)]), &callee));
    assert!(!continues(&key(&[(1, 4, 0), (2, 0, 0)]), &callee));
    assert!(!continues(&key(&[(1, 3, 1), (2, 0, 0)]), &callee));
    assert!(!continues(&callee, &callee));
    assert!(!continues(&key(&[(1, 3, 0), (2, 5, 0)]), &callee));
    assert!(!continues(&callee, &key(&[(1, 3, 0), (2, 0, 0)])));
}

/// A probe id near u32::MAX (a crafted binary) makes no table of places by id (it would take
/// 16 GiB): every lookup misses the hint and searches. Ids as dense as a compiler gives them
/// keep the table.
#[test]
fn node_locations_with_a_huge_probe_id_make_no_id_table() {
    let mut p = Probes::new(&[(2, "foo", 200)]);
    let sparse =
        p.node(2, None, &[(0x200, 1, ProbeType::Block), (0x204, u32::MAX - 1, ProbeType::Block)]);
    let dense = p.node(2, None, &[(0x300, 1, ProbeType::Block), (0x304, 2, ProbeType::Block)]);
    let sparse = NodeLocs::of(&p, NodeId(sparse));
    assert_eq!((sparse.first.len(), sparse.place(LineLocation::new(1, 0))), (0, usize::MAX));
    let dense = NodeLocs::of(&p, NodeId(dense));
    assert_eq!(dense.first, [u32::MAX, 0, 1]);
    assert_eq!(dense.place(LineLocation::new(2, 0)), 1);
}

#[test]
fn name_repeats_count_pairs_by_distance() {
    let frames = |names: &[u32]| -> Vec<Frame> {
        names.iter().map(|&name| Frame { name, loc: LineLocation::new(7, name) }).collect()
    };
    let mut r = NameRepeats::default();
    let mixed = frames(&[3, 1, 3, 2, 1, 3]);
    assert!(r.any(&mixed, 4));
    // (0, 2), (1, 4) and (2, 5), (0, 5).
    assert_eq!(r.pairs(&mixed, 4), Some(&[0, 0, 1, 2, 0, 1][..]));
    assert!(!r.any(&mixed[1..4], 4));
    assert_eq!(r.pairs(&mixed[1..4], 4), Some(&[0, 0, 0][..]));
    // 36 pairs in 9 frames of one name: within the budget of 4 a frame; 45 in 10 are past it.
    let same = frames(&[0; 10]);
    let want: Vec<u32> = (0..9).map(|d| if d == 0 { 0 } else { 9 - d }).collect();
    assert_eq!(r.pairs(&same[..9], 1), Some(&want[..]));
    assert_eq!(r.pairs(&same, 1), None);
}
