//! Pseudo probes: `.pseudo_probe_desc` (function GUID → name, CFG hash) and `.pseudo_probe`
//! (probes with addresses, and the inline forest they sit in), decoded like LLVM's
//! `MCPseudoProbeDecoder` (reference §4).
//!
//! In: the two sections and the ELF symbols (their MD5 GUIDs give each top-level record's start
//! address). Out: [`ProbeInfo`], probes sorted by address plus the inline tree, all decoded up
//! front (a flat pass over the section; cheap next to disassembly).

use super::disasm::AddrBuckets;
use super::elf::Elf;
use crate::addr::Vaddr;
use crate::llvm::leb128::{Leb128Error, read_sleb128, read_uleb128};
use crate::llvm::md5_guid;
use hashbrown::HashMap;
use object::{Object, ObjectSymbol};
use std::sync::Arc;

/// A `.pseudo_probe_desc` record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncDesc {
    pub guid: u64,
    /// CFG checksum (`!CFGChecksum:`).
    pub hash: u64,
    pub name: Arc<str>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProbeType {
    Block,
    IndirectCall,
    DirectCall,
}

impl ProbeType {
    pub fn is_call(self) -> bool {
        self != ProbeType::Block
    }
    fn name(self) -> &'static str {
        match self {
            ProbeType::Block => "Block",
            ProbeType::IndirectCall => "IndirectCall",
            ProbeType::DirectCall => "DirectCall",
        }
    }
}

/// Index into [`ProbeInfo::nodes`]; node 0 is the dummy root above all top-level functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

impl NodeId {
    pub const ROOT: NodeId = NodeId(0);
}

/// A node of the inline forest: a top-level function body, or a function inlined into its
/// parent at call probe `callsite`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlineNode {
    pub guid: u64,
    pub parent: NodeId,
    /// Probe id of the call site in the parent; 0 for top-level nodes (and the root).
    pub callsite: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe {
    pub addr: Vaddr,
    /// GUID of the function the probe belongs to (its node's GUID).
    pub guid: u64,
    pub index: u32,
    pub kind: ProbeType,
    /// Attribute bits (0x2 sentinel, 0x4 has discriminator).
    pub attr: u8,
    pub discriminator: u32,
    pub node: NodeId,
}

/// A frame of a probe's inline context: function name and call-site probe id (or, for the
/// leaf, the probe's own index).
pub type ProbeFrame = (Arc<str>, u32);

#[derive(Debug, Default)]
pub struct ProbeInfo {
    /// Sorted by GUID; the first record wins on a duplicate GUID.
    descs: Vec<FuncDesc>,
    /// Sorted by address, decode order within an address.
    probes: Vec<Probe>,
    nodes: Vec<InlineNode>,
    /// The same probes grouped by inline node (address order within a node), and where each
    /// node's group starts (one more entry than nodes).
    by_node: Vec<Probe>,
    node_start: Vec<u32>,
    /// The first call probe at each address that has one, as its index in `probes`: call
    /// probes are looked up by branch source for every sampled branch, and a hash probe costs a
    /// fraction of two binary searches over all probes.
    calls: HashMap<Vaddr, u32>,
    /// Where each address bucket's probes start: the CS builder finds the probes of every
    /// sampled range of every context, and a binary search over all probes for the range's
    /// start took most of that.
    buckets: AddrBuckets,
}

/// `slice.partition_point(pred)` for a point near the start: searched in steps that double from
/// the front, then by halves within the last step. A range of addresses holds a few probes, and
/// a search over every probe after its start (most of the table) took a cache miss per step:
/// most of the CS builder's time finding sampled probes. Same point: `pred` holds on a prefix.
fn partition_point_near<T>(slice: &[T], pred: impl Fn(&T) -> bool) -> usize {
    let mut bound = 1;
    while bound <= slice.len() && pred(&slice[bound - 1]) {
        bound *= 2;
    }
    let from = bound / 2;
    from + slice[from..bound.min(slice.len())].partition_point(pred)
}

const ATTR_SENTINEL: u8 = 0x2;
const ATTR_HAS_DISCRIMINATOR: u8 = 0x4;

struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    section: &'static str,
}

impl Cursor<'_> {
    fn err(&self, what: &str) -> String {
        format!("malformed {} at section offset {}: {what}", self.section, self.pos)
    }
    fn u8(&mut self) -> Result<u8, String> {
        let b = *self.data.get(self.pos).ok_or_else(|| self.err("unexpected end"))?;
        self.pos += 1;
        Ok(b)
    }
    fn u64(&mut self) -> Result<u64, String> {
        let bytes =
            self.data.get(self.pos..self.pos + 8).ok_or_else(|| self.err("unexpected end"))?;
        self.pos += 8;
        Ok(u64::from_le_bytes(bytes.try_into().map_err(|_| self.err("unexpected end"))?))
    }
    fn uleb(&mut self) -> Result<u64, String> {
        read_uleb128(self.data, &mut self.pos).map_err(|e| match e {
            Leb128Error::End => self.err("unexpected end"),
            Leb128Error::TooLong => self.err("ULEB128 longer than 64 bits"),
        })
    }
    fn uleb32(&mut self) -> Result<u32, String> {
        let v = self.uleb()?;
        u32::try_from(v).map_err(|_| self.err("value does not fit in 32 bits"))
    }
    fn sleb(&mut self) -> Result<i64, String> {
        read_sleb128(self.data, &mut self.pos).map_err(|e| match e {
            Leb128Error::End => self.err("unexpected end"),
            Leb128Error::TooLong => self.err("SLEB128 longer than 64 bits"),
        })
    }
    fn at_end(&self) -> bool {
        self.pos >= self.data.len()
    }
}

struct Decoder<'a> {
    cur: Cursor<'a>,
    func_starts: &'a HashMap<u64, u64>,
    last_addr: u64,
    addr_based: bool,
    nodes: Vec<InlineNode>,
    children: HashMap<(NodeId, u64, u32), NodeId>,
    probes: Vec<Probe>,
    top_level_count: u32,
}

impl Decoder<'_> {
    /// One function record (`buildAddress2ProbeMap`), recursively with its inlinees.
    fn record(&mut self, parent: NodeId, depth: u32) -> Result<(), String> {
        if depth > 1000 {
            return Err(self.cur.err("inline tree deeper than 1000"));
        }
        let top_level = parent == NodeId::ROOT;
        let site = if top_level { 0 } else { self.cur.uleb32()? };
        let guid = self.cur.u64()?;
        let node = if top_level {
            // Top-level nodes are keyed by a sequence number: repeated GUIDs stay separate.
            self.top_level_count += 1;
            if !self.addr_based
                && let Some(&start) = self.func_starts.get(&guid)
            {
                self.last_addr = start;
            }
            self.add_node(InlineNode { guid, parent, callsite: 0 })
        } else {
            match self.children.get(&(parent, guid, site)) {
                Some(&n) => n,
                None => {
                    let n = self.add_node(InlineNode { guid, parent, callsite: site });
                    self.children.insert((parent, guid, site), n);
                    n
                }
            }
        };
        let nprobes = self.cur.uleb32()?;
        let ninlinees = self.cur.uleb32()?;
        for _ in 0..nprobes {
            let index = self.cur.uleb32()?;
            let value = self.cur.u8()?;
            let kind = match value & 0xf {
                0 => ProbeType::Block,
                1 => ProbeType::IndirectCall,
                2 => ProbeType::DirectCall,
                k => return Err(self.cur.err(&format!("unknown probe type {k}"))),
            };
            let attr = (value & 0x70) >> 4;
            let addr = if value & 0x80 != 0 {
                self.last_addr.wrapping_add(self.cur.sleb()? as u64)
            } else {
                let raw = self.cur.u64()?;
                if attr & ATTR_SENTINEL != 0 {
                    // The field holds the GUID of the split part's symbol.
                    self.func_starts.get(&raw).copied().unwrap_or(raw)
                } else {
                    self.addr_based = true;
                    raw
                }
            };
            let discriminator =
                if attr & ATTR_HAS_DISCRIMINATOR != 0 { self.cur.uleb32()? } else { 0 };
            if attr & ATTR_SENTINEL == 0 {
                self.probes.push(Probe {
                    addr: Vaddr(addr),
                    guid,
                    index,
                    kind,
                    attr,
                    discriminator,
                    node,
                });
            }
            self.last_addr = addr;
        }
        for _ in 0..ninlinees {
            self.record(node, depth + 1)?;
        }
        Ok(())
    }

    fn add_node(&mut self, n: InlineNode) -> NodeId {
        self.nodes.push(n);
        NodeId((self.nodes.len() - 1) as u32)
    }
}

/// `(address, index)` of each of `probes`, sorted: by address, decode order within an address.
/// The keys are distinct, so an unstable sort of them is the stable sort, without moving whole
/// probes; they are first spread by 64-byte address bucket (a counting sort: probes cluster, a
/// bucket holds a few), and each bucket is sorted on its own.
fn addr_order(probes: &[Probe]) -> Vec<(u64, u32)> {
    let (Some(lo), Some(hi)) =
        (probes.iter().map(|p| p.addr.0).min(), probes.iter().map(|p| p.addr.0).max())
    else {
        return Vec::new();
    };
    let shift = AddrBuckets::shift(hi - lo, probes.len());
    let bucket = |a: u64| ((a - lo) >> shift) as usize;
    let mut start = vec![0u32; bucket(hi) + 2];
    for p in probes {
        start[bucket(p.addr.0) + 1] += 1;
    }
    for k in 1..start.len() {
        start[k] += start[k - 1];
    }
    let mut keys = vec![(0, 0); probes.len()];
    let mut next = start.clone();
    for (i, p) in probes.iter().enumerate() {
        let slot = &mut next[bucket(p.addr.0)];
        keys[*slot as usize] = (p.addr.0, i as u32);
        *slot += 1;
    }
    for w in start.windows(2) {
        keys[w[0] as usize..w[1] as usize].sort_unstable();
    }
    keys
}

fn parse_descs(data: &[u8]) -> Result<Vec<FuncDesc>, String> {
    let mut cur = Cursor { data, pos: 0, section: ".pseudo_probe_desc" };
    let mut descs = Vec::new();
    while !cur.at_end() {
        let guid = cur.u64()?;
        let hash = cur.u64()?;
        let len = cur.uleb()?;
        let end = usize::try_from(len)
            .ok()
            .and_then(|l| cur.pos.checked_add(l))
            .filter(|&e| e <= data.len());
        let end = end.ok_or_else(|| cur.err("function name runs past the section end"))?;
        let name = crate::text::lossy_utf8(&data[cur.pos..end]);
        cur.pos = end;
        descs.push(FuncDesc { guid, hash, name: Arc::from(name.as_ref()) });
    }
    descs.sort_by_key(|d| d.guid);
    descs.dedup_by_key(|d| d.guid);
    Ok(descs)
}

impl ProbeInfo {
    /// Whether `obj` has both probe sections.
    pub fn present(obj: &Elf<'_>) -> bool {
        obj.section_by_name(".pseudo_probe_desc").is_some()
            && obj.section_by_name(".pseudo_probe").is_some()
    }

    /// Decodes the probe sections; `None` unless both exist.
    pub fn load(obj: &Elf<'_>) -> Result<Option<ProbeInfo>, String> {
        let (Some(desc), Some(probe)) =
            (obj.section_by_name(".pseudo_probe_desc"), obj.section_by_name(".pseudo_probe"))
        else {
            return Ok(None);
        };
        let desc =
            super::elf::section_data(&desc).map_err(|e| format!(".pseudo_probe_desc: {e}"))?;
        let probe = super::elf::section_data(&probe).map_err(|e| format!(".pseudo_probe: {e}"))?;
        // Every symbol, as llvm-profgen's `populateElfSymbolAddressList`: the last one wins.
        let mut func_starts = HashMap::new();
        for sym in obj.symbols() {
            if let Ok(name) = sym.name() {
                func_starts.insert(md5_guid(name), sym.address());
            }
        }
        func_starts.retain(|_, &mut a| a != 0);
        Ok(Some(Self::decode(&desc, &probe, &func_starts)?))
    }

    /// Decodes section contents; `func_starts` maps MD5(symbol name) to the symbol address.
    pub fn decode(
        desc: &[u8],
        probe: &[u8],
        func_starts: &HashMap<u64, u64>,
    ) -> Result<ProbeInfo, String> {
        let descs = parse_descs(desc)?;
        let mut d = Decoder {
            cur: Cursor { data: probe, pos: 0, section: ".pseudo_probe" },
            func_starts,
            last_addr: 0,
            addr_based: false,
            nodes: vec![InlineNode { guid: 0, parent: NodeId::ROOT, callsite: 0 }],
            children: HashMap::new(),
            probes: Vec::new(),
            top_level_count: 0,
        };
        while !d.cur.at_end() {
            d.record(NodeId::ROOT, 0)?;
        }
        let keys = addr_order(&d.probes);
        let probes: Vec<Probe> = keys.iter().map(|&(_, i)| d.probes[i as usize]).collect();
        // Grouped by node (dense ids) with a counting sort, address order within a node.
        let mut node_start = vec![0u32; d.nodes.len() + 1];
        for p in &probes {
            node_start[p.node.0 as usize + 1] += 1;
        }
        for n in 1..node_start.len() {
            node_start[n] += node_start[n - 1];
        }
        let mut next = node_start.clone();
        let mut order = vec![0u32; probes.len()];
        for (i, p) in probes.iter().enumerate() {
            let slot = &mut next[p.node.0 as usize];
            order[*slot as usize] = i as u32;
            *slot += 1;
        }
        let by_node = order.iter().map(|&i| probes[i as usize]).collect();
        let mut calls = HashMap::new();
        for (i, p) in probes.iter().enumerate().filter(|(_, p)| p.kind.is_call()) {
            // Decode order within an address: the first one is kept.
            calls.entry(p.addr).or_insert(i as u32);
        }
        let buckets = AddrBuckets::new(&probes, |p| p.addr.0);
        Ok(ProbeInfo { descs, probes, nodes: d.nodes, by_node, node_start, calls, buckets })
    }

    pub fn descs(&self) -> &[FuncDesc] {
        &self.descs
    }

    pub fn desc(&self, guid: u64) -> Option<&FuncDesc> {
        self.descs.binary_search_by_key(&guid, |d| d.guid).ok().map(|i| &self.descs[i])
    }

    /// The function name of `guid` from the desc section ("" when it has no desc).
    pub fn func_name(&self, guid: u64) -> Arc<str> {
        self.desc(guid).map_or_else(|| Arc::from(""), |d| d.name.clone())
    }

    /// All probes, sorted by address.
    pub fn probes(&self) -> &[Probe] {
        &self.probes
    }

    /// The probes at exactly `addr` (several when an inlinee's block and its caller's share it).
    pub fn probes_at(&self, addr: Vaddr) -> &[Probe] {
        let first = self.first_at(addr);
        let end = first + partition_point_near(&self.probes[first..], |p| p.addr == addr);
        &self.probes[first..end]
    }

    /// The probes at addresses in `[start, end]`, by address (several at an address in decoding
    /// order).
    pub fn probes_in(&self, start: Vaddr, end: Vaddr) -> &[Probe] {
        let first = self.first_at(start);
        let past = first + partition_point_near(&self.probes[first..], |p| p.addr <= end);
        &self.probes[first..past]
    }

    /// The index of the first probe at or after `addr`.
    fn first_at(&self, addr: Vaddr) -> usize {
        self.buckets.lower_bound(&self.probes, |p| p.addr.0, addr.0)
    }

    /// The first call probe at `addr` (LLVM's `getCallProbeForAddr`).
    pub fn call_probe_at(&self, addr: Vaddr) -> Option<&Probe> {
        self.calls.get(&addr).map(|&i| &self.probes[i as usize])
    }

    /// Every probe of inline node `id`, by address.
    pub fn node_probes(&self, id: NodeId) -> &[Probe] {
        let i = id.0 as usize;
        match (self.node_start.get(i), self.node_start.get(i + 1)) {
            (Some(&a), Some(&b)) => &self.by_node[a as usize..b as usize],
            _ => &[],
        }
    }

    /// Inline tree nodes; [`NodeId::ROOT`] is a dummy.
    pub fn nodes(&self) -> &[InlineNode] {
        &self.nodes
    }

    pub fn node(&self, id: NodeId) -> &InlineNode {
        &self.nodes[id.0 as usize]
    }

    /// The top-level (outlined function) node that `id` is inlined into, or `id` itself.
    pub fn top_level_node(&self, mut id: NodeId) -> NodeId {
        while id != NodeId::ROOT && self.node(id).parent != NodeId::ROOT {
            id = self.node(id).parent;
        }
        id
    }

    /// The probe's inline context as llvm-profgen's `getInlineContextForProbe` builds it:
    /// `(caller name, callsite probe id)` frames root first (a callsite id 0 on a non-last
    /// frame restarts the context), and the leaf `(own function name, probe index)`.
    pub fn inline_context(&self, probe: &Probe) -> (Vec<ProbeFrame>, ProbeFrame) {
        let mut sites = Vec::new();
        let mut n = probe.node;
        while n != NodeId::ROOT && self.node(n).parent != NodeId::ROOT {
            let node = self.node(n);
            sites.push((self.func_name(self.node(node.parent).guid), node.callsite));
            n = node.parent;
        }
        sites.reverse();
        let mut context = Vec::with_capacity(sites.len());
        let last = sites.len().saturating_sub(1);
        for (i, site) in sites.into_iter().enumerate() {
            if site.1 == 0 && i != last {
                context.clear();
                continue;
            }
            context.push(site);
        }
        (context, (self.func_name(probe.guid), probe.index))
    }

    /// LLVM's `MCDecodedPseudoProbe::print` line (without the ` [Probe]:\t` prefix).
    pub fn format_probe(&self, probe: &Probe) -> String {
        let mut s = format!("FUNC: {} Index: {}  ", self.func_name(probe.guid), probe.index);
        if probe.discriminator != 0 {
            s += &format!("Discriminator: {}  ", probe.discriminator);
        }
        s += &format!("Type: {}  ", probe.kind.name());
        let mut sites = Vec::new();
        let mut n = probe.node;
        while n != NodeId::ROOT && self.node(n).parent != NodeId::ROOT {
            let node = self.node(n);
            sites.push(format!(
                "{}:{}",
                self.func_name(self.node(node.parent).guid),
                node.callsite
            ));
            n = node.parent;
        }
        if !sites.is_empty() {
            sites.reverse();
            s += "Inlined: @ ";
            s += &sites.join(" @ ");
        }
        s
    }
}

impl super::Binary {
    /// The `Pseudo Probe Desc:` listing `--show-pseudo-probe` prints (nothing without probes).
    pub fn dump_pseudo_probes(&self, w: &mut impl std::io::Write) -> std::io::Result<()> {
        let Some(info) = self.probes() else {
            return Ok(());
        };
        writeln!(w, "Pseudo Probe Desc:")?;
        for d in info.descs() {
            writeln!(w, "GUID: {} Name: {}", d.guid, d.name)?;
            writeln!(w, "Hash: {}", d.hash)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llvm::leb128::{write_sleb128, write_uleb128};

    fn uleb(v: u64, out: &mut Vec<u8>) {
        write_uleb128(out, v);
    }

    fn desc(records: &[(&str, u64)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (name, hash) in records {
            out.extend(md5_guid(name).to_le_bytes());
            out.extend(hash.to_le_bytes());
            uleb(name.len() as u64, &mut out);
            out.extend(name.as_bytes());
        }
        out
    }

    /// Function record header: GUID, probe count, inlinee count.
    fn header(name: &str, nprobes: u64, ninlinees: u64, out: &mut Vec<u8>) {
        out.extend(md5_guid(name).to_le_bytes());
        uleb(nprobes, out);
        uleb(ninlinees, out);
    }

    fn delta_probe(
        index: u64,
        kind: u8,
        attr: u8,
        delta: i64,
        disc: Option<u64>,
        out: &mut Vec<u8>,
    ) {
        uleb(index, out);
        out.push(0x80 | (attr << 4) | kind);
        write_sleb128(out, delta);
        if let Some(d) = disc {
            uleb(d, out);
        }
    }

    fn starts() -> HashMap<u64, u64> {
        [(md5_guid("foo"), 0x1000), (md5_guid("foo.cold"), 0x2000)].into_iter().collect()
    }

    #[test]
    fn partition_point_near_is_partition_point() {
        // Addresses with repeats, as probes sharing an address have.
        let addrs = [1u64, 3, 3, 3, 4, 8, 8, 9, 12, 12, 12, 12, 15, 20];
        for n in 0..=addrs.len() {
            let slice = &addrs[..n];
            for end in 0..22 {
                let near = partition_point_near(slice, |&a| a <= end);
                assert_eq!(near, slice.partition_point(|&a| a <= end), "{n} probes, end {end}");
                let near = partition_point_near(slice, |&a| a == end);
                let at = slice.iter().take_while(|&&a| a == end).count();
                assert_eq!(near, at, "{n} probes, at {end}");
            }
        }
    }

    /// The bucketed sort is the sort of (address, index) keys: clustered addresses with
    /// repeats, and addresses spread far apart (wide buckets, many probes in one).
    #[test]
    fn addr_order_is_the_sorted_keys() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut rand = |n: u64| {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (state >> 33) % n
        };
        for case in 0..200 {
            let n = rand(300) as usize;
            let probes: Vec<Probe> = (0..n)
                .map(|i| Probe {
                    addr: Vaddr(match case % 3 {
                        0 => 0x1000 + rand(n as u64 * 8 + 1),
                        1 => rand(u64::MAX),
                        _ => [0, u64::MAX, 0x1000 + rand(64)][rand(3) as usize],
                    }),
                    guid: 0,
                    index: i as u32,
                    kind: ProbeType::Block,
                    attr: 0,
                    discriminator: 0,
                    node: NodeId(1),
                })
                .collect();
            let mut keys: Vec<(u64, u32)> =
                probes.iter().enumerate().map(|(i, p)| (p.addr.0, i as u32)).collect();
            keys.sort_unstable();
            assert_eq!(addr_order(&probes), keys, "case {case}");
        }
    }

    #[test]
    fn delta_sentinel_discriminator_and_inlinees() {
        let mut p = Vec::new();
        header("foo", 2, 2, &mut p);
        delta_probe(1, 0, 0, 0, None, &mut p);
        delta_probe(2, 2, ATTR_HAS_DISCRIMINATOR, 5, Some(3), &mut p);
        // bar inlined at foo:2, twice with the same call site: one node.
        for delta in [0, 0x10] {
            uleb(2, &mut p);
            header("bar", 1, 0, &mut p);
            delta_probe(1, 0, 0, delta, None, &mut p);
        }
        // The split part: a sentinel naming `foo.cold`, then a delta from its start.
        header("foo", 2, 0, &mut p);
        uleb(0, &mut p);
        p.push(ATTR_SENTINEL << 4);
        p.extend(md5_guid("foo.cold").to_le_bytes());
        delta_probe(3, 0, 0, 4, None, &mut p);

        let info = ProbeInfo::decode(&desc(&[("foo", 7), ("bar", 9)]), &p, &starts()).unwrap();
        let got: Vec<_> = info
            .probes()
            .iter()
            .map(|p| (p.addr.0, info.func_name(p.guid).to_string(), p.index))
            .collect();
        assert_eq!(
            got,
            [
                (0x1000, "foo".into(), 1),
                (0x1005, "foo".into(), 2),
                (0x1005, "bar".into(), 1),
                (0x1015, "bar".into(), 1),
                (0x2004, "foo".into(), 3),
            ]
        );
        let call = info.call_probe_at(Vaddr(0x1005)).unwrap();
        assert_eq!((call.index, call.kind, call.discriminator), (2, ProbeType::DirectCall, 3));
        assert_eq!(
            info.format_probe(call),
            "FUNC: foo Index: 2  Discriminator: 3  Type: DirectCall  "
        );
        let bar = &info.probes_at(Vaddr(0x1005))[1];
        assert_eq!(info.inline_context(bar), (vec![("foo".into(), 2)], ("bar".into(), 1)));
        assert_eq!(info.format_probe(bar), "FUNC: bar Index: 1  Type: Block  Inlined: @ foo:2");
        assert_eq!(bar.node, info.probes_at(Vaddr(0x1015))[0].node);
        // root, foo, bar, and the second top-level foo record as its own node.
        assert_eq!(info.nodes().len(), 4);
        assert_eq!(info.node(info.top_level_node(bar.node)).guid, md5_guid("foo"));
        assert_ne!(info.probes_at(Vaddr(0x2004))[0].node, info.probes_at(Vaddr(0x1000))[0].node);
        assert_eq!(info.desc(md5_guid("bar")).map(|d| d.hash), Some(9));
    }

    #[test]
    fn legacy_absolute_addresses_disable_symbol_starts() {
        let mut p = Vec::new();
        header("foo", 1, 0, &mut p);
        uleb(1, &mut p);
        p.push(0);
        p.extend(0x3000u64.to_le_bytes());
        header("foo", 1, 0, &mut p);
        delta_probe(2, 0, 0, 1, None, &mut p);
        let info = ProbeInfo::decode(&desc(&[("foo", 7)]), &p, &starts()).unwrap();
        let addrs: Vec<_> = info.probes().iter().map(|p| p.addr.0).collect();
        assert_eq!(addrs, [0x3000, 0x3001]);
    }

    #[test]
    fn callsite_zero_restarts_the_context() {
        let mut p = Vec::new();
        header("foo", 0, 1, &mut p);
        uleb(0, &mut p);
        header("bar", 0, 1, &mut p);
        uleb(4, &mut p);
        header("baz", 1, 0, &mut p);
        delta_probe(1, 0, 0, 0, None, &mut p);
        let info =
            ProbeInfo::decode(&desc(&[("foo", 1), ("bar", 2), ("baz", 3)]), &p, &starts()).unwrap();
        let probe = &info.probes()[0];
        assert_eq!(info.inline_context(probe), (vec![("bar".into(), 4)], ("baz".into(), 1)));
    }

    #[test]
    fn malformed_sections_are_errors() {
        let mut p = Vec::new();
        header("foo", 3, 0, &mut p);
        delta_probe(1, 0, 0, 0, None, &mut p);
        let err = ProbeInfo::decode(&[], &p, &starts()).unwrap_err();
        assert_eq!(
            err,
            format!("malformed .pseudo_probe at section offset {}: unexpected end", p.len())
        );
        let mut bad_type = Vec::new();
        header("foo", 1, 0, &mut bad_type);
        bad_type.extend([1, 0x87, 0]);
        assert!(
            ProbeInfo::decode(&[], &bad_type, &starts())
                .unwrap_err()
                .contains("unknown probe type 7")
        );
        let mut d = desc(&[("foo", 1)]);
        d.truncate(d.len() - 1);
        assert_eq!(
            ProbeInfo::decode(&d, &[], &starts()).unwrap_err(),
            "malformed .pseudo_probe_desc at section offset 17: function name runs past the section end"
        );
    }
}
