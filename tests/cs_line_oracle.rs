//! Hybrid perf script → unwinder → CS line-based profile, compared with llvm-profgen-19's output
//! for the same input (fixtures in tests/fixtures/cs_line, see its README).

use profgen::addr::Vaddr;
use profgen::aggregate::unwinder::{CodeView, HybridSample, NormalizeStats, UnwindOptions, Unwinder, normalize_hybrid_sample};
use profgen::aggregate::{ContextCounters, ContextKey};
use profgen::binary::{FuncId, FuncRange, InstKind, SourceFrame};
use profgen::profile::cs::{CsCodeView, CsOptions, generate_line_cs};
use profgen::profile::{FunctionSamples, LineLocation};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cs_line/");
/// The binary is non-PIE and loaded at its preferred base, so perf addresses are vaddrs.
const BASE: u64 = 0x201000;

struct CodeMap {
    insts: BTreeMap<u64, (InstKind, Vec<SourceFrame>)>,
    prolog: BTreeSet<u64>,
    funcs: Vec<(u64, String)>,
}

fn load_code_map() -> CodeMap {
    let text = std::fs::read_to_string(format!("{DIR}codemap.txt")).unwrap();
    let mut m = CodeMap { insts: BTreeMap::new(), prolog: BTreeSet::new(), funcs: Vec::new() };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("func ") {
            let (a, name) = rest.split_once(' ').unwrap();
            m.funcs.push((u64::from_str_radix(a, 16).unwrap(), name.to_string()));
            continue;
        }
        let (head, frames) = line.split_once(" | ").unwrap();
        let mut parts = head.split(' ');
        let addr = u64::from_str_radix(parts.next().unwrap(), 16).unwrap();
        let kind = match parts.next().unwrap() {
            "C" => InstKind::Call,
            "R" => InstKind::Return,
            "J" => InstKind::DirectJump,
            "I" => InstKind::IndirectJump,
            "B" => InstKind::ConditionalJump,
            _ => InstKind::Other,
        };
        if parts.next() == Some("P") {
            m.prolog.insert(addr);
        }
        let frames = frames
            .split(" ; ")
            .filter(|f| !f.trim().is_empty())
            .map(|f| {
                let v: Vec<&str> = f.trim().split(':').collect();
                SourceFrame { func_name: v[0].into(), line_offset: v[1].parse().unwrap(), discriminator: v[2].parse().unwrap() }
            })
            .collect();
        m.insts.insert(addr, (kind, frames));
    }
    m
}

impl CodeView for CodeMap {
    fn is_code(&self, a: Vaddr) -> bool {
        self.insts.contains_key(&a.0)
    }
    fn inst_kind(&self, a: Vaddr) -> Option<InstKind> {
        self.insts.get(&a.0).map(|i| i.0)
    }
    fn prev_inst(&self, a: Vaddr) -> Option<Vaddr> {
        self.insts.range(..a.0).next_back().map(|(&p, _)| Vaddr(p))
    }
    fn call_addr_from_return_addr(&self, ret: Vaddr) -> Option<Vaddr> {
        self.prev_inst(ret).filter(|&p| self.inst_kind(p) == Some(InstKind::Call))
    }
    fn range_crosses_uncond_branch(&self, start: Vaddr, end: Vaddr) -> bool {
        start < end && self.insts.range(start.0..end.0).any(|(_, i)| i.0.is_unconditional())
    }
    fn is_prolog_or_epilog(&self, a: Vaddr) -> bool {
        self.prolog.contains(&a.0)
    }
    fn inline_stack(&self, a: Vaddr) -> Arc<[SourceFrame]> {
        self.insts.get(&a.0).map_or_else(|| Vec::new().into(), |i| i.1.clone().into())
    }
    fn uses_fs_discriminators(&self) -> bool {
        false
    }
}

impl CsCodeView for CodeMap {
    fn insts_in(&self, start: Vaddr, end: Vaddr) -> impl Iterator<Item = Vaddr> + '_ {
        self.insts.range(start.0..=end.0).map(|(&a, _)| Vaddr(a))
    }
    fn func_range(&self, a: Vaddr) -> Option<FuncRange> {
        let i = self.funcs.iter().rposition(|f| f.0 <= a.0)?;
        let end = self.funcs.get(i + 1).map_or(u64::MAX, |f| f.0);
        Some(FuncRange { start: Vaddr(self.funcs[i].0), end: Vaddr(end), func: FuncId(i as u32), is_entry: true })
    }
    fn entry_func_name(&self, a: Vaddr) -> Option<Arc<str>> {
        self.funcs.iter().find(|f| f.0 == a.0).map(|f| f.1.as_str().into())
    }
}

/// Parses the hybrid perf script (repeat count line, stack lines, brstack line).
fn read_samples(code: &CodeMap, stats: &mut NormalizeStats) -> Vec<(HybridSample, u64)> {
    let text = std::fs::read_to_string(format!("{DIR}s.txt")).unwrap();
    let mut agg: BTreeMap<(Vec<Vaddr>, Vec<(Vaddr, Vaddr)>), u64> = BTreeMap::new();
    let (mut count, mut stack) = (1u64, Vec::new());
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if let Ok(n) = line.parse::<u64>() {
            count = n;
        } else if line.starts_with(" 0x") {
            let lbr: Vec<(Vaddr, Vaddr)> = line
                .split_whitespace()
                .map(|t| {
                    let f: Vec<&str> = t.split('/').collect();
                    (Vaddr(u64::from_str_radix(&f[0][2..], 16).unwrap()), Vaddr(u64::from_str_radix(&f[1][2..], 16).unwrap()))
                })
                .collect();
            if let Some(s) = normalize_hybrid_sample(code, &stack, &lbr, count, stats) {
                *agg.entry((s.stack, s.lbr.iter().map(|b| (b.source, b.target)).collect())).or_default() += count;
            }
            count = 1;
            stack.clear();
        } else {
            stack.push(Vaddr(u64::from_str_radix(line.trim(), 16).unwrap()));
        }
    }
    agg.into_iter()
        .map(|((stack, lbr), n)| {
            let lbr = lbr.into_iter().map(|(source, target)| profgen::aggregate::unwinder::Branch { source, target }).collect();
            (HybridSample { stack, lbr }, n)
        })
        .collect()
}

fn context_string(frames: &[profgen::profile::ContextFrame]) -> String {
    let n = frames.len();
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| match (i + 1 == n, f.loc.discriminator) {
            (true, _) => f.func.clone(),
            (false, 0) => format!("{}:{}", f.func, f.loc.line_offset),
            (false, d) => format!("{}:{}.{}", f.func, f.loc.line_offset, d),
        })
        .collect::<Vec<_>>()
        .join(" @ ")
}

fn unwind() -> (CodeMap, ContextCounters, NormalizeStats, usize) {
    let code = load_code_map();
    let mut stats = NormalizeStats::default();
    let samples = read_samples(&code, &mut stats);
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
        (1, 5, "of truncated stack samples due to invalid return address, likely caused by frame pointer omission.")
    );
    assert_eq!(stats.dropped_prolog_epilog, 1);
    // Render like llvm-profgen's unsymbolized writer: offsets from the preferred base.
    let mut ours = BTreeMap::new();
    for (key, c) in &cc.by_context {
        let ContextKey::Frames(f) = key else { panic!("line-based keys expected") };
        let off = |a: Vaddr| format!("{:x}", a.0.wrapping_sub(BASE));
        let ranges: BTreeSet<String> = c.ranges.iter().map(|(&(s, e), n)| format!("{}-{}:{n}", off(s), off(e))).collect();
        let branches: BTreeSet<String> = c.branches.iter().map(|(&(s, d), n)| format!("{}->{}:{n}", off(s), off(d))).collect();
        ours.insert(context_string(f), (ranges, branches));
    }
    let text = std::fs::read_to_string(format!("{DIR}llvm-profgen-19.unsymbolized.txt")).unwrap();
    let mut theirs = BTreeMap::new();
    let mut lines = text.lines().peekable();
    while let Some(header) = lines.next() {
        let ctx = header.trim_start_matches('[').trim_end_matches(']').to_string();
        let read = |lines: &mut std::iter::Peekable<std::str::Lines>| -> BTreeSet<String> {
            let n: usize = lines.next().unwrap().trim().parse().unwrap();
            (0..n).map(|_| lines.next().unwrap().trim().to_string()).collect()
        };
        let ranges = read(&mut lines);
        let branches = read(&mut lines);
        theirs.insert(ctx, (ranges, branches));
    }
    assert_eq!(ours, theirs);
}

/// Parses llvm-profgen's flat CS text profile.
fn read_cs_text(text: &str) -> BTreeMap<String, FunctionSamples> {
    let mut out = BTreeMap::new();
    let mut cur: Option<(String, FunctionSamples)> = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix('[') {
            out.extend(cur.take());
            let (ctx, nums) = rest.split_once("]:").unwrap();
            let (total, head) = nums.split_once(':').unwrap();
            let leaf = ctx.rsplit(" @ ").next().unwrap();
            let mut fs = FunctionSamples::new(leaf);
            fs.total_samples = total.parse().unwrap();
            fs.head_samples = head.parse().unwrap();
            cur = Some((ctx.to_string(), fs));
            continue;
        }
        let fs = &mut cur.as_mut().unwrap().1;
        let line = line.trim();
        if let Some(a) = line.strip_prefix("!Attributes: ") {
            fs.attributes = a.parse().unwrap();
        } else if let Some(c) = line.strip_prefix("!CFGChecksum: ") {
            fs.checksum = Some(c.parse().unwrap());
        } else {
            let mut parts = line.split_whitespace();
            let loc = parts.next().unwrap().trim_end_matches(':');
            let (l, d) = loc.split_once('.').unwrap_or((loc, "0"));
            let loc = LineLocation::new(l.parse().unwrap(), d.parse().unwrap());
            fs.add_body(loc, parts.next().unwrap().parse().unwrap());
            for t in parts {
                let (name, n) = t.rsplit_once(':').unwrap();
                fs.add_call_target(loc, name, n.parse().unwrap());
            }
        }
    }
    out.extend(cur);
    out
}

#[test]
fn cs_line_profile_matches_llvm_profgen() {
    let (code, cc, _, _) = unwind();
    let profile = generate_line_cs(&code, &cc, &CsOptions::default());
    let ours: BTreeMap<String, FunctionSamples> = profile.functions.iter().map(|(c, f)| (context_string(&c.0), f.clone())).collect();
    let theirs = read_cs_text(&std::fs::read_to_string(format!("{DIR}llvm-profgen-19.cs.txt")).unwrap());
    assert_eq!(ours, theirs);
}
