//! The aggregate file (`.pga`): the aggregation stage's output for one or more binaries, keyed
//! by build id, in a compact binary form that merges exactly.
//!
//! A fleet has more perf.data files than one process should read. `profgen aggregate` runs the
//! stages up to here on a shard of them ([`super::read::read_counters`] per binary: address
//! mapping, plausibility checks, unwinding) and writes what came out; `profgen merge` sums
//! aggregates; the normal run reads an aggregate instead of samples and runs the rest (profile,
//! post-passes, writer) once per binary. The stored counters are those one run over all the
//! shard's files would have made, and counters only ever add up, so any grouping and order of
//! merges gives byte-identical files and the final profile equals one run over every file. Why
//! counters after unwinding rather than distinct samples: README, "Fleet scale".
//!
//! What one binary's entry holds: the counters per context ([`ContextCounters`]), the sample
//! counts of the summary line, the normalisation and unwinder statistics behind the warning
//! lines, and how the binary was matched. Contexts are stored as they will be used: call-site
//! addresses for probe binaries, symbolized frames for line binaries. The file also holds the
//! options that shaped the counters (a run or merge with other ones is refused: the counters
//! would not be what it asks for) and the executables its inputs mapped that were not profiled
//! (not in the binary store), so a fleet job can say what it is missing.
//!
//! Layout (all integers little-endian or unsigned LEB128, "uleb"; strings and byte strings are a
//! uleb length and the bytes):
//!
//! ```text
//! header, 40 bytes:
//!   0  magic         89 50 47 41 0d 0a 1a 0a   ("\x89PGA\r\n\x1a\n": binary, survives no text-mode copy)
//!   8  version       u32 = 2
//!   12 flags         u32 = 0 (reserved)
//!   16 payload size  u64
//!   24 checksum      16 bytes, MD5 of the payload
//! payload (40..):
//!   options          uleb n, then n × (name string, value string), names strictly increasing
//!   inputs           uleb: input files aggregated
//!   binaries         uleb n, then n binaries, keys strictly increasing:
//!     key            build id bytes (empty: none, then the binary is keyed by file name)
//!     file name      string
//!     inputs         uleb: input files that mapped the binary
//!     matched by     uleb: 0 never, 1 build id, 2 file name
//!     samples        7 × uleb: read, used, outside binary, no branch stack, other event,
//!                    other process, with call stack
//!     distinct       uleb: distinct samples (stacks) aggregated
//!     normalize      4 × uleb: samples, leaf external, dropped in prolog/epilog, dropped empty
//!                    LBR; then invalid return addresses (address set, below)
//!     unwind         5 × uleb: branches, mismatched external call, paired external, unpaired
//!                    external, mismatched prolog/epilog call; then untracked call sites (set)
//!     context sensitive  uleb 0/1
//!     range weights  4 × uleb: plain and weighted range totals of LBR weighting, each as low
//!                    and high 64 bits (0 for plain counts; the counts are then weights)
//!     names          uleb n, then n strings, strictly increasing: the function names of frames
//!     contexts       uleb n, then n contexts in increasing key order:
//!       key          uleb kind: 0 none; 1 addresses: uleb n + address list; 2 frames: uleb n,
//!                    then n × (uleb name index, uleb line offset, uleb discriminator)
//!       ranges       uleb n, then n × (uleb start − previous start, zigzag end − start, uleb
//!                    count), (start, end) strictly increasing
//!       branches     uleb n, then n × (uleb source − previous source, zigzag target − source,
//!                    uleb count), (source, target) strictly increasing
//!   unprofiled       uleb n, then n × (build id bytes, path string, uleb inputs), keys strictly
//!                    increasing
//!   end of payload   (payload size says where)
//! address list: zigzag deltas from the previous address (from 0); address set: the same,
//!   strictly increasing.
//! ```
//!
//! Reading checks everything: magic, version, size, checksum, every length against the bytes
//! left, canonical order, and nothing after the end; an error names the file and the byte
//! offset. A canonical file re-encodes to the same bytes.

use super::samples::SampleStats;
use super::unwinder::{NormalizeStats, UnwindStats};
use super::weighting::RangeWeights;
use super::{ContextCounters, ContextKey, Counters};
use crate::addr::Vaddr;
use crate::error::Error;
use crate::llvm::leb128::{Leb128Error, read_uleb128, unzigzag, write_uleb128, zigzag};
use crate::llvm::{ContextFrame, FuncName, LineLocation};
use crate::mapping::{MatchedBy, hex};
use md5::{Digest, Md5};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The first 8 bytes of every aggregate file.
pub const MAGIC: [u8; 8] = *b"\x89PGA\r\n\x1a\n";
/// The layout version this code reads and writes.
pub const VERSION: u32 = 2;
const HEADER_SIZE: usize = 40;

/// How an aggregated binary is identified: by build id, or by file name when it has none.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BinaryKey {
    BuildId(Vec<u8>),
    FileName(String),
}

impl BinaryKey {
    /// `build id 0123…` or `file name app`, for messages.
    pub fn describe(&self) -> String {
        match self {
            BinaryKey::BuildId(id) => format!("build id {}", hex(id)),
            BinaryKey::FileName(name) => format!("file name {name} (no build id)"),
        }
    }
}

/// One binary's aggregated counters and the counts behind its summary line and warnings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BinaryAggregate {
    /// File name of the binary (the smallest one seen, when the same build id had several).
    pub file_name: String,
    /// Input files that mapped the binary.
    pub inputs: u64,
    pub matched_by: Option<MatchedBy>,
    pub samples: SampleStats,
    pub distinct_samples: u64,
    pub normalize: NormalizeStats,
    pub unwind: UnwindStats,
    pub counters: ContextCounters,
}

impl BinaryAggregate {
    /// Adds `other`, as one run over both entries' inputs would have counted. One run unwinds
    /// when any sample had a call stack and then ignores its LBR-only samples, so an entry with
    /// call stacks wins over one without.
    pub fn merge(&mut self, other: BinaryAggregate) {
        if other.file_name < self.file_name || self.file_name.is_empty() {
            self.file_name = other.file_name;
        }
        self.inputs = self.inputs.saturating_add(other.inputs);
        self.matched_by = match (self.matched_by, other.matched_by) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.samples.merge(&other.samples);
        self.distinct_samples = self.distinct_samples.saturating_add(other.distinct_samples);
        self.normalize.merge(&other.normalize);
        self.unwind.merge(&other.unwind);
        match (self.counters.context_sensitive, other.counters.context_sensitive) {
            (false, true) => self.counters = other.counters,
            (true, false) => {}
            _ => self.counters.merge(other.counters),
        }
    }
}

/// The content of an aggregate file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Aggregate {
    /// The options that shaped the counters, as (name, value), sorted by name.
    pub options: Vec<(String, String)>,
    /// Input files aggregated.
    pub inputs: u64,
    pub binaries: BTreeMap<BinaryKey, BinaryAggregate>,
    /// Executables the inputs mapped that have no entry (not in the binary store): (build id,
    /// path) → input files that mapped them.
    pub unprofiled: BTreeMap<(Vec<u8>, String), u64>,
}

impl Aggregate {
    /// An empty aggregate of counters shaped by `options`.
    pub fn new(mut options: Vec<(String, String)>) -> Self {
        options.sort();
        Aggregate { options, ..Default::default() }
    }

    /// Adds `other` (read from `other_path`; `self` came from `self_name`, for the message) when
    /// both were made with the same options.
    pub fn merge(
        &mut self,
        other: Aggregate,
        self_name: &str,
        other_path: &Path,
    ) -> Result<(), Error> {
        if other.options != self.options {
            return Err(Error::BadFile {
                path: other_path.to_path_buf(),
                what: format!(
                    "aggregated with {}, but {self_name} with {}: aggregates made with different options cannot be merged",
                    describe_options(&other.options, &self.options),
                    describe_options(&self.options, &other.options),
                ),
            });
        }
        self.inputs = self.inputs.saturating_add(other.inputs);
        for (key, b) in other.binaries {
            match self.binaries.get_mut(&key) {
                Some(mine) => mine.merge(b),
                None => {
                    self.binaries.insert(key, b);
                }
            }
        }
        for (key, n) in other.unprofiled {
            let mine = self.unprofiled.entry(key).or_default();
            *mine = mine.saturating_add(n);
        }
        Ok(())
    }

    /// The entry of the binary with `build_id` (or, without one, `file_name`).
    pub fn find(&self, build_id: Option<&[u8]>, file_name: &str) -> Option<&BinaryAggregate> {
        match build_id {
            Some(id) => self.binaries.get(&BinaryKey::BuildId(id.to_vec())),
            None => self.binaries.get(&BinaryKey::FileName(file_name.to_string())),
        }
    }

    /// The binaries it holds, most samples used first: `app (build id …, N samples)`.
    pub fn describe_binaries(&self) -> String {
        let mut v: Vec<_> = self.binaries.iter().collect();
        v.sort_by(|a, b| b.1.samples.used.cmp(&a.1.samples.used).then(a.0.cmp(b.0)));
        if v.is_empty() {
            return "it holds no binary".to_string();
        }
        let shown: Vec<String> = v
            .iter()
            .take(5)
            .map(|(k, b)| format!("{} ({}, {} samples)", b.file_name, k.describe(), b.samples.used))
            .collect();
        let more = if v.len() > 5 { format!(", {} more", v.len() - 5) } else { String::new() };
        format!("it holds, most-sampled first: {}{more}", shown.join(", "))
    }

    /// The file's bytes (canonical: equal aggregates give equal bytes).
    pub fn encode(&self) -> Vec<u8> {
        let mut p = Vec::new();
        write_uleb128(&mut p, self.options.len() as u64);
        for (k, v) in &self.options {
            put_bytes(&mut p, k.as_bytes());
            put_bytes(&mut p, v.as_bytes());
        }
        write_uleb128(&mut p, self.inputs);
        write_uleb128(&mut p, self.binaries.len() as u64);
        for (key, b) in &self.binaries {
            encode_binary(&mut p, key, b);
        }
        write_uleb128(&mut p, self.unprofiled.len() as u64);
        for ((id, path), n) in &self.unprofiled {
            put_bytes(&mut p, id);
            put_bytes(&mut p, path.as_bytes());
            write_uleb128(&mut p, *n);
        }
        file_from_payload(&p)
    }

    /// Reads an aggregate file's bytes; `path` names it in errors.
    pub fn decode(data: &[u8], path: &Path) -> Result<Aggregate, Error> {
        Aggregate::decode_sharing(data, path, &mut SharedNames::new())
    }

    /// [`Self::decode`], its names' texts shared with `names` (and added there).
    fn decode_sharing(
        data: &[u8],
        path: &Path,
        names: &mut SharedNames,
    ) -> Result<Aggregate, Error> {
        let bad = |offset: usize, what: String| Error::Malformed {
            path: path.to_path_buf(),
            offset: offset as u64,
            what,
        };
        if data.len() < MAGIC.len() || data[..MAGIC.len()] != MAGIC {
            return Err(bad(0, "not a profgen aggregate (.pga): bad magic".into()));
        }
        if data.len() < HEADER_SIZE {
            return Err(bad(
                data.len(),
                format!("header cut short: {} of {HEADER_SIZE} bytes", data.len()),
            ));
        }
        let u32_at = |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"));
        let version = u32_at(8);
        if version != VERSION {
            return Err(bad(
                8,
                format!("format version {version}; this profgen reads version {VERSION}"),
            ));
        }
        let flags = u32_at(12);
        if flags != 0 {
            return Err(bad(12, format!("unknown flags {flags:#x}")));
        }
        let size = u64::from_le_bytes(data[16..24].try_into().expect("8 bytes"));
        let have = (data.len() - HEADER_SIZE) as u64;
        if size != have {
            let what = if size > have { "file cut short" } else { "bytes after the payload" };
            return Err(bad(
                16,
                format!("{what}: header says {size} payload bytes, file has {have}"),
            ));
        }
        let payload = &data[HEADER_SIZE..];
        if Md5::digest(payload)[..] != data[24..40] {
            return Err(bad(24, "checksum mismatch: the file is corrupt".into()));
        }
        let mut r = Reader { data: payload, pos: 0, path, names };
        let agg = r.aggregate()?;
        if r.pos != payload.len() {
            return Err(
                r.bad(format!("{} bytes after the end of the aggregate", payload.len() - r.pos))
            );
        }
        Ok(agg)
    }

    /// Reads the aggregate file at `path`, its names' texts shared with `names`.
    fn read(path: &Path, names: &mut SharedNames) -> Result<Aggregate, Error> {
        let data =
            std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        Aggregate::decode_sharing(&data, path, names)
    }

    /// Reads and merges the aggregate files at `paths`, one at a time (memory holds the merged
    /// result and one input); `None` when `paths` is empty. With `skipped`, a file that cannot be
    /// read or merged is left out and its error collected there; without, the first error is
    /// returned. The files share their names' texts, so the merge compares frames by pointer.
    pub fn read_merged(
        paths: &[PathBuf],
        mut skipped: Option<&mut Vec<Error>>,
    ) -> Result<Option<Aggregate>, Error> {
        let mut merged: Option<(Aggregate, String)> = None;
        let mut names = SharedNames::new();
        for path in paths {
            let result = Aggregate::read(path, &mut names).and_then(|a| match &mut merged {
                None => {
                    merged = Some((a, path.display().to_string()));
                    Ok(())
                }
                Some((m, first)) => m.merge(a, first, path),
            });
            if let Err(e) = result {
                match skipped.as_deref_mut() {
                    Some(list) => list.push(e),
                    None => return Err(e),
                }
            }
        }
        Ok(merged.map(|(a, _)| a))
    }
}

/// An aggregate file around `payload`: the header with its size and checksum. (The fuzz target
/// uses it to reach the payload decoder past the checksum.)
pub fn file_from_payload(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_SIZE + payload.len());
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&Md5::digest(payload));
    out.extend_from_slice(payload);
    out
}

/// `--a=1, --b=2`: the options of `mine` that differ from `theirs`.
pub fn describe_options(mine: &[(String, String)], theirs: &[(String, String)]) -> String {
    let parts: Vec<String> =
        mine.iter().filter(|o| !theirs.contains(o)).map(|(k, v)| format!("--{k}={v}")).collect();
    if parts.is_empty() { "fewer options".to_string() } else { parts.join(", ") }
}

/// Where `name`'s text is: names sharing a text share it.
fn text_address(name: &FuncName) -> usize {
    name.as_ptr() as usize
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    write_uleb128(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_addrs(out: &mut Vec<u8>, addrs: impl ExactSizeIterator<Item = Vaddr>) {
    write_uleb128(out, addrs.len() as u64);
    let mut prev = 0u64;
    for Vaddr(a) in addrs {
        write_uleb128(out, zigzag(a.wrapping_sub(prev) as i64));
        prev = a;
    }
}

fn put_pairs(out: &mut Vec<u8>, map: &hashbrown::HashMap<(Vaddr, Vaddr), u64>) {
    let mut v: Vec<_> = map.iter().map(|(&(a, b), &n)| (a.0, b.0, n)).collect();
    v.sort_unstable();
    write_uleb128(out, v.len() as u64);
    let mut prev = 0u64;
    for (a, b, n) in v {
        write_uleb128(out, a - prev);
        write_uleb128(out, zigzag(b.wrapping_sub(a) as i64));
        write_uleb128(out, n);
        prev = a;
    }
}

fn encode_binary(p: &mut Vec<u8>, key: &BinaryKey, b: &BinaryAggregate) {
    match key {
        BinaryKey::BuildId(id) => put_bytes(p, id),
        BinaryKey::FileName(_) => put_bytes(p, &[]),
    }
    put_bytes(p, b.file_name.as_bytes());
    write_uleb128(p, b.inputs);
    write_uleb128(
        p,
        match b.matched_by {
            None => 0,
            Some(MatchedBy::BuildId) => 1,
            Some(MatchedBy::FileName) => 2,
        },
    );
    let s = &b.samples;
    for n in [
        s.read,
        s.used,
        s.outside_binary,
        s.no_branch_stack,
        s.other_event,
        s.other_process,
        s.with_call_stack,
    ] {
        write_uleb128(p, n);
    }
    write_uleb128(p, b.distinct_samples);
    let n = &b.normalize;
    for v in [n.samples, n.leaf_external, n.dropped_prolog_epilog, n.dropped_empty_lbr] {
        write_uleb128(p, v);
    }
    put_addrs(p, n.invalid_return_addrs.iter().copied());
    let u = &b.unwind;
    for v in [
        u.total_branches,
        u.mismatched_ext_call_branches,
        u.paired_ext_addrs,
        u.unpaired_ext_addrs,
        u.mismatched_pro_epi_branches,
    ] {
        write_uleb128(p, v);
    }
    put_addrs(p, u.untracked_callsites.iter().copied());
    write_uleb128(p, u64::from(b.counters.context_sensitive));
    let w = &b.counters.weights;
    for v in [w.plain, w.weighted] {
        write_uleb128(p, v as u64);
        write_uleb128(p, (v >> 64) as u64);
    }
    // Frames find their name's index by the name's shared text, and contexts sort by those
    // indices (text order, [`StoredKey`]): each distinct text is read a bounded number of
    // times, not once per frame (one 1 MB name in a million frames read a terabyte).
    let mut shared: Vec<&FuncName> = b
        .counters
        .by_context
        .keys()
        .filter_map(|k| match k {
            ContextKey::Frames(f) => Some(f.iter().map(|f| (text_address(&f.func), &f.func))),
            _ => None,
        })
        .flatten()
        .collect::<hashbrown::HashMap<_, _>>()
        .into_values()
        .collect();
    shared.sort_unstable();
    let mut names: Vec<&str> = Vec::new();
    let mut index = hashbrown::HashMap::with_capacity(shared.len());
    for name in shared {
        if names.last() != Some(&name.as_str()) {
            names.push(name.as_str());
        }
        index.insert(text_address(name), names.len() - 1);
    }
    write_uleb128(p, names.len() as u64);
    for name in &names {
        put_bytes(p, name.as_bytes());
    }
    let mut contexts: Vec<_> = b
        .counters
        .by_context
        .iter()
        .map(|(key, c)| {
            let order = match key {
                ContextKey::None => StoredKey::None,
                ContextKey::Addrs(a) => StoredKey::Addrs(a.clone()),
                ContextKey::Frames(frames) => StoredKey::Frames(
                    frames.iter().map(|f| (index[&text_address(&f.func)], f.loc)).collect(),
                ),
            };
            (order, c)
        })
        .collect();
    contexts.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    write_uleb128(p, contexts.len() as u64);
    for (order, c) in contexts {
        match order {
            StoredKey::None => write_uleb128(p, 0),
            StoredKey::Addrs(a) => {
                write_uleb128(p, 1);
                put_addrs(p, a.into_iter());
            }
            StoredKey::Frames(frames) => {
                write_uleb128(p, 2);
                write_uleb128(p, frames.len() as u64);
                for (i, loc) in frames {
                    write_uleb128(p, i as u64);
                    write_uleb128(p, u64::from(loc.line_offset));
                    write_uleb128(p, u64::from(loc.discriminator));
                }
            }
        }
        put_pairs(p, &c.ranges);
        put_pairs(p, &c.branches);
    }
}

/// Function names, one per text: aggregates read together share them, so merging their contexts
/// compares names by pointer rather than by text (a million frames of a 1 MB name are a terabyte).
type SharedNames = hashbrown::HashSet<FuncName>;

/// A context as the file stores it, its frames' names by index in the binary's name table (whose
/// order is the texts'): it sorts as the context does, without reading names.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum StoredKey {
    None,
    Addrs(Vec<Vaddr>),
    Frames(Vec<(usize, LineLocation)>),
}

/// Decoding state over the payload; errors name the file offset (payload position + header).
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
    path: &'a Path,
    names: &'a mut SharedNames,
}

impl Reader<'_> {
    fn bad(&self, what: String) -> Error {
        self.bad_at(self.pos, what)
    }

    fn bad_at(&self, pos: usize, what: String) -> Error {
        Error::Malformed { path: self.path.to_path_buf(), offset: (HEADER_SIZE + pos) as u64, what }
    }

    fn uleb(&mut self, what: &str) -> Result<u64, Error> {
        let at = self.pos;
        read_uleb128(self.data, &mut self.pos).map_err(|e| {
            self.pos = at;
            let why = match e {
                Leb128Error::End => "the file ends inside a LEB128 value",
                Leb128Error::TooLong => "a LEB128 value longer than 64 bits",
            };
            self.bad(format!("{what}: {why}"))
        })
    }

    fn ulebs<const N: usize>(&mut self, what: &str) -> Result<[u64; N], Error> {
        let mut out = [0u64; N];
        for v in &mut out {
            *v = self.uleb(what)?;
        }
        Ok(out)
    }

    fn u32(&mut self, what: &str) -> Result<u32, Error> {
        let at = self.pos;
        let v = self.uleb(what)?;
        u32::try_from(v).map_err(|_| self.bad_at(at, format!("{what} {v} does not fit 32 bits")))
    }

    /// A count of items that take at least `min_bytes` each: never more than the bytes left.
    fn count(&mut self, what: &str, min_bytes: usize) -> Result<usize, Error> {
        let at = self.pos;
        let n = self.uleb(what)?;
        let left = (self.data.len() - self.pos) as u64;
        if n > left / min_bytes as u64 {
            return Err(self.bad_at(at, format!("{what} {n} exceeds the {left} bytes left")));
        }
        Ok(n as usize)
    }

    fn bytes(&mut self, what: &str) -> Result<&[u8], Error> {
        let n = self.count(what, 1)?;
        let b = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(b)
    }

    fn string(&mut self, what: &str) -> Result<String, Error> {
        let at = self.pos;
        let b = self.bytes(what)?;
        String::from_utf8(b.to_vec()).map_err(|_| self.bad_at(at, format!("{what} is not UTF-8")))
    }

    fn flag(&mut self, what: &str) -> Result<bool, Error> {
        let at = self.pos;
        match self.uleb(what)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(self.bad_at(at, format!("{what} is {v}, not 0 or 1"))),
        }
    }

    /// Checks that `item` (starting at `at`) sorts after `prev`, and makes it the new `prev`.
    fn increasing<T: Ord>(
        &self,
        prev: &mut Option<T>,
        item: T,
        at: usize,
        what: &str,
    ) -> Result<(), Error> {
        if prev.as_ref().is_some_and(|p| *p >= item) {
            return Err(self.bad_at(at, format!("{what} out of order (not strictly increasing)")));
        }
        *prev = Some(item);
        Ok(())
    }

    fn addrs(&mut self, what: &str) -> Result<Vec<Vaddr>, Error> {
        let n = self.count(what, 1)?;
        let mut out = Vec::with_capacity(n);
        let mut prev = 0u64;
        for _ in 0..n {
            prev = prev.wrapping_add(unzigzag(self.uleb(what)?) as u64);
            out.push(Vaddr(prev));
        }
        Ok(out)
    }

    fn addr_set(&mut self, what: &str) -> Result<BTreeSet<Vaddr>, Error> {
        let at = self.pos;
        let v = self.addrs(what)?;
        if v.windows(2).any(|w| w[0] >= w[1]) {
            return Err(self.bad_at(at, format!("{what} out of order (not strictly increasing)")));
        }
        Ok(v.into_iter().collect())
    }

    fn pairs(&mut self, what: &str) -> Result<hashbrown::HashMap<(Vaddr, Vaddr), u64>, Error> {
        let n = self.count(what, 3)?;
        let mut out = hashbrown::HashMap::with_capacity(n);
        let (mut a, mut prev) = (0u64, None);
        for _ in 0..n {
            let at = self.pos;
            let d = self.uleb(what)?;
            a = a
                .checked_add(d)
                .ok_or_else(|| self.bad_at(at, format!("{what}: address overflow")))?;
            let b = a.wrapping_add(unzigzag(self.uleb(what)?) as u64);
            let count = self.uleb(what)?;
            self.increasing(&mut prev, (a, b), at, what)?;
            out.insert((Vaddr(a), Vaddr(b)), count);
        }
        Ok(out)
    }

    /// A context and where it sorts; its frames share the names' text (a frame takes three bytes
    /// or more, a copy of its name as many as the name has).
    fn key(&mut self, names: &[FuncName]) -> Result<(ContextKey, StoredKey), Error> {
        let at = self.pos;
        Ok(match self.uleb("context kind")? {
            0 => (ContextKey::None, StoredKey::None),
            1 => {
                let addrs = self.addrs("context addresses")?;
                (ContextKey::Addrs(addrs.clone()), StoredKey::Addrs(addrs))
            }
            2 => {
                let n = self.count("context frames", 3)?;
                let mut frames = Vec::with_capacity(n);
                let mut order = Vec::with_capacity(n);
                for _ in 0..n {
                    let i_at = self.pos;
                    let i = self.uleb("frame name index")?;
                    let func = names.get(i as usize).ok_or_else(|| {
                        self.bad_at(
                            i_at,
                            format!("frame name index {i} is past the {} names", names.len()),
                        )
                    })?;
                    let line_offset = self.u32("frame line offset")?;
                    let discriminator = self.u32("frame discriminator")?;
                    let loc = LineLocation::new(line_offset, discriminator);
                    frames.push(ContextFrame { func: func.clone(), loc });
                    order.push((i as usize, loc));
                }
                (ContextKey::Frames(frames), StoredKey::Frames(order))
            }
            k => return Err(self.bad_at(at, format!("unknown context kind {k}"))),
        })
    }

    fn binary(&mut self) -> Result<(BinaryKey, BinaryAggregate), Error> {
        let id = self.bytes("build id")?.to_vec();
        let at = self.pos;
        let file_name = self.string("file name")?;
        // A profile run over a binary store writes `OUT/NAME-BUILDID.prof`: a path here would
        // put it elsewhere (`/tmp/x` or `../x`), and a binary's file name is never one.
        if file_name.contains('/') {
            return Err(
                self.bad_at(at, format!("file name {file_name:?} is a path, not a file name"))
            );
        }
        let key = if id.is_empty() {
            BinaryKey::FileName(file_name.clone())
        } else {
            BinaryKey::BuildId(id)
        };
        let inputs = self.uleb("inputs")?;
        let at = self.pos;
        let matched_by = match self.uleb("matched by")? {
            0 => None,
            1 => Some(MatchedBy::BuildId),
            2 => Some(MatchedBy::FileName),
            v => return Err(self.bad_at(at, format!("matched by {v}, not 0, 1 or 2"))),
        };
        let s: [u64; 7] = self.ulebs("sample counts")?;
        let samples = SampleStats {
            read: s[0],
            used: s[1],
            outside_binary: s[2],
            no_branch_stack: s[3],
            other_event: s[4],
            other_process: s[5],
            with_call_stack: s[6],
        };
        let distinct_samples = self.uleb("distinct samples")?;
        let n: [u64; 4] = self.ulebs("normalisation counts")?;
        let normalize = NormalizeStats {
            samples: n[0],
            leaf_external: n[1],
            dropped_prolog_epilog: n[2],
            dropped_empty_lbr: n[3],
            invalid_return_addrs: self.addr_set("invalid return addresses")?,
            ..Default::default()
        };
        let u: [u64; 5] = self.ulebs("unwinder counts")?;
        let unwind = UnwindStats {
            total_branches: u[0],
            mismatched_ext_call_branches: u[1],
            paired_ext_addrs: u[2],
            unpaired_ext_addrs: u[3],
            mismatched_pro_epi_branches: u[4],
            untracked_callsites: self.addr_set("untracked call sites")?,
            ..Default::default()
        };
        let context_sensitive = self.flag("context sensitive")?;
        let [plain_lo, plain_hi, weighted_lo, weighted_hi] = self.ulebs("range weights")?;
        let wide = |lo: u64, hi: u64| u128::from(hi) << 64 | u128::from(lo);
        let weights = RangeWeights {
            plain: wide(plain_lo, plain_hi),
            weighted: wide(weighted_lo, weighted_hi),
        };
        let n_names = self.count("function names", 1)?;
        let mut names = Vec::with_capacity(n_names);
        let mut prev = None;
        for _ in 0..n_names {
            let at = self.pos;
            let name = self.string("function name")?;
            let shared = match self.names.get(name.as_str()) {
                Some(shared) => shared.clone(),
                None => {
                    let new = FuncName::from(name);
                    self.names.insert(new.clone());
                    new
                }
            };
            self.increasing(&mut prev, shared.clone(), at, "function names")?;
            names.push(shared);
        }
        let n_contexts = self.count("contexts", 3)?;
        let mut by_context = hashbrown::HashMap::with_capacity(n_contexts);
        let mut prev = None;
        for _ in 0..n_contexts {
            let at = self.pos;
            let (key, order) = self.key(&names)?;
            self.increasing(&mut prev, order, at, "contexts")?;
            let ranges = self.pairs("ranges")?;
            let branches = self.pairs("branches")?;
            by_context.insert(key, Counters { ranges, branches });
        }
        let b = BinaryAggregate {
            file_name,
            inputs,
            matched_by,
            samples,
            distinct_samples,
            normalize,
            unwind,
            counters: ContextCounters { by_context, context_sensitive, weights },
        };
        Ok((key, b))
    }

    fn aggregate(&mut self) -> Result<Aggregate, Error> {
        let n = self.count("options", 2)?;
        let mut options = Vec::with_capacity(n);
        for _ in 0..n {
            let at = self.pos;
            let k = self.string("option name")?;
            let v = self.string("option value")?;
            if options.last().is_some_and(|(p, _): &(String, String)| *p >= k) {
                return Err(
                    self.bad_at(at, "options out of order (not strictly increasing)".into())
                );
            }
            options.push((k, v));
        }
        let inputs = self.uleb("inputs")?;
        let n = self.count("binaries", 20)?;
        let mut binaries = BTreeMap::new();
        let mut prev = None;
        for _ in 0..n {
            let at = self.pos;
            let (key, b) = self.binary()?;
            self.increasing(&mut prev, key.clone(), at, "binaries")?;
            binaries.insert(key, b);
        }
        let n = self.count("unprofiled executables", 3)?;
        let mut unprofiled = BTreeMap::new();
        let mut prev = None;
        for _ in 0..n {
            let at = self.pos;
            let id = self.bytes("build id")?.to_vec();
            let path = self.string("path")?;
            let inputs = self.uleb("inputs")?;
            self.increasing(&mut prev, (id.clone(), path.clone()), at, "unprofiled executables")?;
            unprofiled.insert((id, path), inputs);
        }
        Ok(Aggregate { options, inputs, binaries, unprofiled })
    }
}

#[cfg(test)]
mod tests;
