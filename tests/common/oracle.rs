//! Helpers of the oracle tests: a code map and probe map derived from a real binary (fixtures),
//! a hybrid perf script reader, and readers for llvm-profgen's outputs.

use profgen::addr::Branch;
use profgen::addr::Vaddr;
use profgen::aggregate::unwinder::{HybridSample, NormalizeStats, normalize_hybrid_sample};
use profgen::binary::InstKind;
pub use profgen::binary::code_view::CodeMap;
use profgen::binary::code_view::frame;
use profgen::llvm::LineLocation;
use profgen::profile::FunctionSamples;
use std::collections::{BTreeMap, BTreeSet};

/// The binaries are non-PIE and loaded at their preferred base, so perf addresses are vaddrs.
pub const BASE: u64 = 0x201000;

/// The text of fixture `dir/name`.
pub fn read_fixture(dir: &str, name: &str) -> String {
    std::fs::read_to_string(super::fixture(&format!("{dir}/{name}"))).unwrap()
}

/// The code map saved in fixture directory `dir` (`codemap.txt`): `func ADDR NAME` lines, then
/// one line per instruction, `ADDR KIND [P] | func:line:discr ; ...` (inline frames outermost
/// first; `P` marks a prolog/epilog address).
pub fn load_code_map(dir: &str) -> CodeMap {
    let text = read_fixture(dir, "codemap.txt");
    let mut m = CodeMap::default();
    let mut starts = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("func ") {
            let (a, name) = rest.split_once(' ').unwrap();
            starts.push((u64::from_str_radix(a, 16).unwrap(), name.to_string()));
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
                frame(v[0], v[1].parse().unwrap(), v[2].parse().unwrap())
            })
            .collect();
        m.insts.insert(addr, kind);
        m.inline.insert(addr, frames);
    }
    // A function runs up to the next one's start.
    for (i, (start, name)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(u64::MAX, |f| f.0);
        m.funcs.push((*start, end, name.clone()));
    }
    m
}

/// Parses `s.txt` of fixture directory `dir`, a hybrid perf script (repeat count line, stack
/// lines, brstack line), into normalised samples aggregated like llvm-profgen does.
pub fn read_samples(
    code: &CodeMap,
    dir: &str,
    stats: &mut NormalizeStats,
) -> Vec<(HybridSample, u64)> {
    let text = read_fixture(dir, "s.txt");
    type Key = (Vec<Vaddr>, Vec<(Vaddr, Vaddr)>);
    let mut agg: BTreeMap<Key, u64> = BTreeMap::new();
    let (mut count, mut stack) = (1u64, Vec::new());
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if let Ok(n) = line.parse::<u64>() {
            count = n;
        } else if line.starts_with(" 0x") {
            let branches: Vec<(Vaddr, Vaddr)> = line
                .split_whitespace()
                .map(|t| {
                    let f: Vec<&str> = t.split('/').collect();
                    (
                        Vaddr(u64::from_str_radix(&f[0][2..], 16).unwrap()),
                        Vaddr(u64::from_str_radix(&f[1][2..], 16).unwrap()),
                    )
                })
                .collect();
            if let Some(s) = normalize_hybrid_sample(code, &stack, &branches, count, false, stats) {
                *agg.entry((
                    s.callchain,
                    s.branches.iter().map(|b| (b.source, b.target)).collect(),
                ))
                .or_default() += count;
            }
            count = 1;
            stack.clear();
        } else {
            stack.push(Vaddr(u64::from_str_radix(line.trim(), 16).unwrap()));
        }
    }
    agg.into_iter()
        .map(|((callchain, branches), n)| {
            let branches =
                branches.into_iter().map(|(source, target)| Branch { source, target }).collect();
            (HybridSample { callchain, branches }, n)
        })
        .collect()
}

pub fn context_string(frames: &[profgen::llvm::ContextFrame]) -> String {
    let n = frames.len();
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| match (i + 1 == n, f.loc.discriminator) {
            (true, _) => f.func.to_string(),
            (false, 0) => format!("{}:{}", f.func, f.loc.line_offset),
            (false, d) => format!("{}:{}.{}", f.func, f.loc.line_offset, d),
        })
        .collect::<Vec<_>>()
        .join(" @ ")
}

/// A profile's context as [`context_string`] spells it (the text writer's form).
pub fn profile_context_string(context: &profgen::profile::Context) -> String {
    let mut s = String::new();
    profgen::writer::text::push_context(&mut s, context);
    s
}

/// Parses llvm-profgen's flat CS text profile.
pub fn read_cs_text(text: &str) -> BTreeMap<String, FunctionSamples> {
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
                fs.add_call_target(loc, &name.into(), n.parse().unwrap());
            }
        }
    }
    out.extend(cur);
    out
}

/// Parses llvm-profgen's unsymbolized profile: context → (ranges, branches) as printed.
pub fn read_unsymbolized(text: &str) -> BTreeMap<String, (BTreeSet<String>, BTreeSet<String>)> {
    let mut out = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(header) = lines.next() {
        let ctx = header.trim_start_matches('[').trim_end_matches(']').to_string();
        let mut read = || -> BTreeSet<String> {
            let n: usize = lines.next().unwrap().trim().parse().unwrap();
            (0..n).map(|_| lines.next().unwrap().trim().to_string()).collect()
        };
        let ranges = read();
        let branches = read();
        out.insert(ctx, (ranges, branches));
    }
    out
}

/// Renders counters like llvm-profgen's unsymbolized writer (offsets from the preferred base).
pub fn render_counters(c: &profgen::aggregate::Counters) -> (BTreeSet<String>, BTreeSet<String>) {
    let off = |a: Vaddr| format!("{:x}", a.0.wrapping_sub(BASE));
    let ranges = c.ranges.iter().map(|(&(s, e), n)| format!("{}-{}:{n}", off(s), off(e))).collect();
    let branches =
        c.branches.iter().map(|(&(s, d), n)| format!("{}->{}:{n}", off(s), off(d))).collect();
    (ranges, branches)
}

use profgen::binary::probes::{NodeId, Probe, ProbeType};
use profgen::profile::cs::ProbeView;

/// Probe map read from `probes.txt`: inline-tree nodes are identified by their inline path.
pub struct ProbeMap {
    at: BTreeMap<u64, Vec<Probe>>,
    /// (guid, inline site) per node.
    nodes: Vec<(u64, Option<(NodeId, u32)>)>,
    node_probes: Vec<Vec<Probe>>,
    descs: BTreeMap<u64, (String, u64)>,
}

pub fn load_probe_map(dir: &str) -> ProbeMap {
    let text = read_fixture(dir, "probes.txt");
    let mut m = ProbeMap {
        at: BTreeMap::new(),
        nodes: Vec::new(),
        node_probes: Vec::new(),
        descs: BTreeMap::new(),
    };
    let mut guid_of: BTreeMap<String, u64> = BTreeMap::new();
    // Inline path (root function, then (caller site, callee) steps) → node.
    let mut node_of: BTreeMap<Vec<(String, u32)>, NodeId> = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f[0] == "desc" {
            let guid: u64 = f[1].parse().unwrap();
            m.descs.insert(guid, (f[3].to_string(), f[2].parse().unwrap()));
            guid_of.insert(f[3].to_string(), guid);
            continue;
        }
        let addr = u64::from_str_radix(f[1], 16).unwrap();
        let kind = match f[3] {
            "Block" => ProbeType::Block,
            "IndirectCall" => ProbeType::IndirectCall,
            _ => ProbeType::DirectCall,
        };
        // `func @ a:1 @ b:2`: a (top level) inlined b at probe 1, b inlined func at probe 2.
        let callers: Vec<(String, u32)> = f[5..]
            .iter()
            .filter(|s| **s != "@")
            .map(|s| {
                let (n, id) = s.rsplit_once(':').unwrap();
                (n.to_string(), id.parse().unwrap())
            })
            .collect();
        let mut path: Vec<(String, u32)> = Vec::new();
        let mut parent: Option<(NodeId, u32)> = None;
        let mut steps: Vec<(String, Option<u32>)> = Vec::new();
        for (i, (n, _)) in callers.iter().enumerate() {
            steps.push((n.clone(), if i == 0 { None } else { Some(callers[i - 1].1) }));
        }
        steps.push((f[4].to_string(), callers.last().map(|c| c.1)));
        let mut node = NodeId(0);
        for (name, site) in steps {
            path.push((name.clone(), site.unwrap_or(0)));
            node = *node_of.entry(path.clone()).or_insert_with(|| {
                m.nodes.push((guid_of[&name], parent.map(|(p, _)| p).zip(site)));
                m.node_probes.push(Vec::new());
                NodeId(m.nodes.len() as u32 - 1)
            });
            parent = Some((node, 0));
        }
        let p = Probe {
            addr: Vaddr(addr),
            guid: 0,
            index: f[2].parse().unwrap(),
            kind,
            attr: 0,
            discriminator: 0,
            node,
        };
        m.at.entry(addr).or_default().push(p);
        m.node_probes[node.0 as usize].push(p);
    }
    m
}

impl ProbeView for ProbeMap {
    fn probes_at(&self, a: Vaddr) -> &[Probe] {
        self.at.get(&a.0).map_or(&[], |v| v)
    }
    fn probes_in(&self, start: Vaddr, end: Vaddr) -> impl Iterator<Item = (Vaddr, &[Probe])> {
        self.at.range(start.0..=end.0).map(|(&a, at)| (Vaddr(a), &at[..]))
    }
    fn node_probes(&self, n: NodeId) -> &[Probe] {
        &self.node_probes[n.0 as usize]
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
        self.descs.get(&guid).map(|(n, h)| (n.as_str(), *h))
    }
}
