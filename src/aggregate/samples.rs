//! Sample de-duplication: every sample is reduced to the binary addresses that matter (LBR
//! entries, call stack) and counted; identical samples are walked once, weighted by count.
//!
//! In: [`Sample`]s and the [`AddressMap`] current when each was read. Out: [`AggregatedSamples`],
//! a map from an encoded sample to its count. Memory grows with the number of distinct samples,
//! not with the input.

use super::unwinder::{HybridSample, NormalizeStats, StackOrder, normalize_into};
use super::weighting::{
    CycleWeights, RangeWeights, SpanCache, Weighting, external_span, window_weight,
};
use super::{Counters, add_count};
use crate::addr::{Branch, RuntimeAddr, Vaddr};
use crate::binary::Binary;
use crate::input::{BranchStack, RawBranch, RawWord, Sample};
use crate::mapping::{AddressMap, ProcessView};
use hashbrown::{DefaultHashBuilder, HashMap, HashTable};
use std::hash::BuildHasher;
use std::ops::Range;
use std::sync::OnceLock;

/// How samples are to be read.
#[derive(Clone, Copy, Debug, Default)]
pub struct SampleOptions {
    /// Use only the sample IP (`--leading-ip-only`).
    pub leading_ip_only: bool,
    /// Drop call stacks (`--ignore-stack-samples`).
    pub ignore_stack: bool,
    /// `--sample-period`.
    pub sample_period: Option<u64>,
    /// `--llvm-compatible`: read and count samples exactly as llvm-profgen-19 does. Every
    /// departure of profgen's counting from llvm-profgen-19 that is not a fix of a listed bug
    /// (README, "Differences from llvm-profgen") is gated on this being false.
    pub llvm_compatible: bool,
    /// How LBR windows are weighted (decided for the run from `--lbr-weighting` and the events).
    pub weighting: Weighting,
}

/// Why samples were not used; reported in the summary line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampleStats {
    pub read: u64,
    pub used: u64,
    /// No LBR entry (or, with `--leading-ip-only`, no IP) in the binary.
    pub outside_binary: u64,
    /// No branch stack in a sample where one is needed.
    pub no_branch_stack: u64,
    /// Filtered by `--perf-event`.
    pub other_event: u64,
    /// Filtered by `--pid`.
    pub other_process: u64,
    /// Samples with a call stack.
    pub with_call_stack: u64,
}

impl SampleStats {
    pub fn merge(&mut self, o: &SampleStats) {
        self.read += o.read;
        self.used += o.used;
        self.outside_binary += o.outside_binary;
        self.no_branch_stack += o.no_branch_stack;
        self.other_event += o.other_event;
        self.other_process += o.other_process;
        self.with_call_stack += o.with_call_stack;
    }
}

/// Distinct normalised call-stack samples are kept as compact byte keys: the stack length, then
/// every address (stack leaf first, then the LBR entries' sources and targets, newest first) as
/// the zigzag delta from the previous one. Neighbouring addresses are close, so a key takes a few
/// bytes per address instead of eight; memory is what bounds CS aggregation. Values are prefix
/// varints (7 bits a byte like LEB128, the length in the first byte's trailing zeros): written
/// and read as one 8-byte word, without a loop per byte.
pub mod key {
    use crate::addr::Branch;
    use crate::addr::Vaddr;
    use crate::aggregate::unwinder::HybridSample;
    use crate::llvm::leb128::{unzigzag, zigzag};

    /// The most bytes a value takes: a zero byte, then the value's eight.
    const MAX_LEN: usize = 9;

    /// Encodes `h` into `out` (cleared first).
    pub fn encode(h: &HybridSample, out: &mut Vec<u8>) {
        // Room for the longest values, written in place and cut to what they took.
        out.clear();
        out.resize(MAX_LEN * (1 + h.callchain.len() + 2 * h.branches.len()), 0);
        let mut at = put(out, 0, h.callchain.len() as u64);
        let mut prev = 0u64;
        let mut put_addr = |out: &mut [u8], a: Vaddr| {
            let d = a.0.wrapping_sub(prev) as i64;
            prev = a.0;
            at = put(out, at, zigzag(d));
        };
        for &a in &h.callchain {
            put_addr(out, a);
        }
        for b in &h.branches {
            put_addr(out, b.source);
            put_addr(out, b.target);
        }
        out.truncate(at);
    }

    /// Writes `z` at `at` in `out` (which has [`MAX_LEN`] bytes of room there); returns where it
    /// ends. A value of `n` 7-bit groups (n ≤ 8) is `z << n` with bit `n - 1` set: its first
    /// byte has `n - 1` trailing zeros. Longer ones are a zero byte and the eight bytes of `z`.
    #[inline(always)]
    fn put(out: &mut [u8], at: usize, z: u64) -> usize {
        let Some(room) = out.get_mut(at..).and_then(|r| r.first_chunk_mut::<MAX_LEN>()) else {
            return at;
        };
        let n = LEN[(z | 1).ilog2() as usize];
        if n == MAX_LEN {
            room[0] = 0;
            room[1..].copy_from_slice(&z.to_le_bytes());
        } else {
            room[..8].copy_from_slice(&((z << n) | (1 << (n - 1))).to_le_bytes());
        }
        at + n
    }

    /// The bytes [`put`] writes for a value whose highest set bit is `i`: a table rather than a
    /// division by 7.
    const LEN: [usize; 64] = {
        let mut len = [MAX_LEN; 64];
        let mut i = 0;
        while i < 56 {
            len[i] = i / 7 + 1;
            i += 1;
        }
        len
    };

    /// The value bits of an `n`-byte value (n < [`MAX_LEN`]): `7 * n` of them.
    const VALUE_MASK: [u64; MAX_LEN] = {
        let mut mask = [0; MAX_LEN];
        let mut n = 1;
        while n < MAX_LEN {
            mask[n] = u64::MAX >> (64 - 7 * n);
            n += 1;
        }
        mask
    };

    /// The length and value of a value of at most eight bytes, from the word it starts;
    /// `None` for a nine-byte one (its first byte is 0, so the word has eight trailing zeros or
    /// more). A value's first byte is otherwise not 0, so the word's trailing zeros are its.
    #[inline(always)]
    fn short_value(word: u64) -> Option<(usize, u64)> {
        let n = word.trailing_zeros() as usize + 1;
        (n < MAX_LEN).then(|| (n, (word >> n) & VALUE_MASK[n]))
    }

    /// The value [`put`] wrote at `*at`, moving `*at` past it; `None` at the end of `key`.
    #[inline(always)]
    fn get(key: &[u8], at: &mut usize) -> Option<u64> {
        // Most values: a whole word left to read, and at most eight bytes.
        if let Some(w) = key.get(*at..).and_then(|r| r.first_chunk::<8>())
            && let Some((n, z)) = short_value(u64::from_le_bytes(*w))
        {
            *at += n;
            return Some(z);
        }
        let rest = key.get(*at..)?;
        let &first = rest.first()?;
        let le = |bytes: &[u8]| bytes.iter().rev().fold(0, |w, &b| w << 8 | u64::from(b));
        if first == 0 {
            *at += MAX_LEN;
            return rest.get(1..MAX_LEN).map(le);
        }
        // The last values of a key: fewer than eight bytes left.
        let n = first.trailing_zeros() as usize + 1;
        let (n, z) = short_value(le(rest.get(..n)?))?;
        *at += n;
        Some(z)
    }

    /// The sample [`encode`] stored: its call stack appended to `callchain`, its LBR entries
    /// read as they are taken.
    pub fn decode<'k>(key: &'k [u8], callchain: &mut Vec<Vaddr>) -> Branches<'k> {
        Branches(Reader::new(key, callchain))
    }

    /// How many addresses the call stack of the sample [`encode`] stored has.
    pub fn stack_len(key: &[u8]) -> usize {
        get(key, &mut 0).unwrap_or(0) as usize
    }

    /// The LBR entries of a stored sample, newest first.
    pub struct Branches<'k>(Reader<'k>);

    impl<'k> Branches<'k> {
        /// Where the entries not taken yet start in the key.
        pub fn position(&self) -> usize {
            self.0.at
        }
        /// The entries of `key` from `position` on, `last` being the address before them (the
        /// call stack's last, [`Vaddr`] 0 for none): as [`decode`] left them, without decoding
        /// the call stack again.
        pub fn resume(key: &'k [u8], position: usize, last: Vaddr) -> Self {
            Branches(Reader { key, at: position, prev: last.0 })
        }
    }

    impl Iterator for Branches<'_> {
        type Item = Branch<Vaddr>;

        #[inline(always)]
        fn next(&mut self) -> Option<Branch<Vaddr>> {
            if let Some((source, target)) = self.0.next_pair() {
                return Some(Branch { source, target });
            }
            // The last entries (less than 16 bytes left), or after a value of nine bytes.
            Some(Branch { source: self.0.next()?, target: self.0.next()? })
        }
    }

    /// A key's addresses in order, each from the previous one.
    struct Reader<'k> {
        key: &'k [u8],
        at: usize,
        prev: u64,
    }

    impl<'k> Reader<'k> {
        /// A reader past the call stack, which it appends to `callchain`.
        fn new(key: &'k [u8], callchain: &mut Vec<Vaddr>) -> Self {
            let mut r = Reader { key, at: 0, prev: 0 };
            // Keys are only ever made by `encode`, so they are well-formed.
            let n_stack = get(key, &mut r.at).unwrap_or(0) as usize;
            for _ in 0..n_stack {
                let Some(a) = r.next() else { break };
                callchain.push(a);
            }
            r
        }

        #[inline]
        fn next(&mut self) -> Option<Vaddr> {
            let z = get(self.key, &mut self.at)?;
            Some(self.add(z))
        }

        /// The next two addresses, when 16 bytes are left and each takes at most eight: read
        /// from one 16-byte window, with no end check per value. `None` (nothing read)
        /// otherwise.
        #[inline(always)]
        fn next_pair(&mut self) -> Option<(Vaddr, Vaddr)> {
            let window = self.key.get(self.at..)?.first_chunk::<16>()?;
            let word =
                |at: usize| window.get(at..at + 8)?.first_chunk().map(|w| u64::from_le_bytes(*w));
            let (n1, z1) = short_value(word(0)?)?;
            // The second value starts within eight bytes: its word is in the window (a load,
            // where shifting the window as one u128 took several instructions).
            let (n2, z2) = short_value(word(n1)?)?;
            self.at += n1 + n2;
            let source = self.add(z1);
            Some((source, self.add(z2)))
        }

        /// The address `z` (a zigzag delta) leads to from the last one.
        #[inline(always)]
        fn add(&mut self, z: u64) -> Vaddr {
            self.prev = self.prev.wrapping_add(unzigzag(z) as u64);
            Vaddr(self.prev)
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn decode(key: &[u8]) -> HybridSample {
            // Filled first: decoding appends to what the buffer held.
            let mut callchain = vec![Vaddr(1)];
            let branches = super::decode(key, &mut callchain).collect();
            assert_eq!(callchain.remove(0), Vaddr(1));
            HybridSample { callchain, branches }
        }

        #[test]
        fn round_trips_any_addresses() {
            let h = HybridSample {
                callchain: vec![Vaddr(0x401000), Vaddr::EXTERNAL, Vaddr(u64::MAX), Vaddr(0)],
                branches: vec![
                    Branch { source: Vaddr(0x401010), target: Vaddr(0x400ff0) },
                    Branch { source: Vaddr::EXTERNAL, target: Vaddr(0xffff_ffff_ff00_0000) },
                ],
            };
            let mut k = Vec::new();
            encode(&h, &mut k);
            assert_eq!(decode(&k), h);
            // Resumed past the call stack: the same entries.
            let mut stack = Vec::new();
            let first = super::decode(&k, &mut stack);
            let last = stack.last().copied().unwrap_or(Vaddr(0));
            let resumed = Branches::resume(&k, first.position(), last);
            assert_eq!(
                (stack, resumed.collect::<Vec<_>>()),
                (h.callchain.clone(), h.branches.clone())
            );
            // Close addresses take one or two bytes each.
            let near = HybridSample {
                callchain: vec![Vaddr(0x401000)],
                branches: vec![Branch { source: Vaddr(0x401020), target: Vaddr(0x401008) }],
            };
            encode(&near, &mut k);
            assert_eq!(k.len(), 1 + 4 + 1 + 1);
            assert_eq!(decode(&k), near);
        }

        #[test]
        fn long_samples_round_trip_with_values_of_every_size() {
            // Entries read in pairs from 16-byte windows, then one by one: values of one to
            // nine bytes, a nine-byte one as either value of a pair and near the end.
            let deltas = [3u64, 1 << 10, 1 << 20, 1 << 40, 1 << 55, 1 << 60, 7, u64::MAX / 3];
            for shift in 0..deltas.len() {
                let mut a = 0x40_0000u64;
                let mut next = |i: usize| {
                    a = a.wrapping_add(deltas[(i + shift) % deltas.len()]);
                    Vaddr(a)
                };
                let h = HybridSample {
                    callchain: (0..5).map(&mut next).collect(),
                    branches: (0..40)
                        .map(|i| Branch { source: next(2 * i), target: next(2 * i + 1) })
                        .collect(),
                };
                let mut k = Vec::new();
                encode(&h, &mut k);
                assert_eq!(decode(&k), h, "shift {shift}");
            }
        }

        #[test]
        fn values_take_a_byte_per_seven_bits() {
            let mut out = [0xff; 2 * MAX_LEN];
            for (z, len) in [
                (0, 1),
                (127, 1),
                (128, 2),
                (0x3fff, 2),
                (0x4000, 3),
                (0x1234_5678, 5),
                ((1 << 56) - 1, 8),
                (1 << 56, 9),
                (u64::MAX, 9),
            ] {
                // Written before another value, and as the last bytes of a key.
                let end = put(&mut out, 0, z);
                assert_eq!(end, len, "{z:#x}");
                assert_eq!(put(&mut out, end, 5), end + 1);
                let mut at = 0;
                assert_eq!(get(&out, &mut at), Some(z), "{z:#x}");
                assert_eq!((at, get(&out, &mut at)), (len, Some(5)));
                at = 0;
                assert_eq!(get(&out[..len], &mut at), Some(z), "{z:#x} at the end");
                assert_eq!((at, get(&out[..len], &mut at)), (len, None));
            }
            // The prefix: n - 1 trailing zeros in the first byte of n.
            assert_eq!(put(&mut out, 0, 0x80), 2);
            assert_eq!(out[..2], [0x02, 0x02]);
        }
    }
}

/// Distinct keys (see [`key`]) and their counts, split by hash into [`Stacks::SHARDS`] shards
/// so that the maps of several workers can be merged shard by shard.
#[derive(Default)]
struct Stacks {
    shards: [KeyShard; Stacks::SHARDS],
}

/// Keys kept in records back to back in chunks: a run's hundreds of thousands of keys take a few
/// hundred allocations, not one each (no million frees at the end), and chunks of one size are
/// reused as they are freed (no holes). A record is the key's hash (the same in every map of the
/// run, so merging needs no re-hash), its count, its length (8, 8 and 4 bytes, little-endian),
/// then the key; it never spans two chunks.
#[derive(Default)]
struct KeyShard {
    chunks: Vec<Vec<u8>>,
    /// The records by key: their positions, `chunk << 32 | offset`.
    index: HashTable<u64>,
}

/// Bytes before a record's key.
const HEAD: usize = 20;

/// A record's hash, count and key.
fn record(chunk: &[u8], at: usize) -> (u64, u64, &[u8]) {
    let word = |i: usize| chunk.get(at + i..).and_then(|w| w.first_chunk::<8>()).copied();
    let (hash, count) = (word(0).unwrap_or_default(), word(8).unwrap_or_default());
    let len = chunk.get(at + 16..).and_then(|w| w.first_chunk::<4>()).copied().unwrap_or_default();
    let key = chunk.get(at + HEAD..).and_then(|k| k.get(..u32::from_le_bytes(len) as usize));
    (u64::from_le_bytes(hash), u64::from_le_bytes(count), key.unwrap_or_default())
}

/// The records of `chunk` in order: each one's offset, hash, count and key.
fn records(chunk: &[u8]) -> impl Iterator<Item = (usize, u64, u64, &[u8])> {
    let mut at = 0;
    std::iter::from_fn(move || {
        (at < chunk.len()).then(|| {
            let (hash, count, key) = record(chunk, at);
            let here = at;
            at += HEAD + key.len();
            (here, hash, count, key)
        })
    })
}

impl Stacks {
    const SHARDS: usize = 16;

    /// The hash of `key`, seeded once per process so that every map (of every worker and input)
    /// agrees: merging maps reuses the stored hashes.
    fn hash(key: &[u8]) -> u64 {
        static SEED: OnceLock<DefaultHashBuilder> = OnceLock::new();
        SEED.get_or_init(DefaultHashBuilder::default).hash_one(key)
    }

    /// The shard of a key hashed to `hash`: bits that hashbrown uses neither for its buckets
    /// (the low bits) nor for its tags (the top seven).
    fn shard(hash: u64) -> usize {
        (hash >> 32) as usize % Self::SHARDS
    }

    fn add(&mut self, key: &[u8], count: u64) {
        let hash = Self::hash(key);
        self.shards[Self::shard(hash)].add(hash, key, count);
    }

    fn len(&self) -> usize {
        self.shards.iter().map(|s| s.index.len()).sum()
    }

    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[cfg(test)]
    fn iter(&self) -> impl Iterator<Item = (&[u8], u64)> {
        let chunks = self.shards.iter().flat_map(|s| &s.chunks);
        chunks.flat_map(|c| records(c).map(|(_, _, count, key)| (key, count)))
    }

    /// Sets every count to `f` of it, the shards in parallel.
    fn map_counts(&mut self, f: impl Fn(u64) -> u64 + Sync) {
        use rayon::prelude::*;
        self.shards.par_iter_mut().flat_map_iter(|s| &mut s.chunks).for_each(|chunk| {
            let mut at = 0;
            while at < chunk.len() {
                let (_, count, key) = record(chunk, at);
                let next = at + HEAD + key.len();
                chunk[at + 8..at + 16].copy_from_slice(&f(count).to_le_bytes());
                at = next;
            }
        });
    }

    /// Adds the keys and counts of `others`, shard by shard in parallel (a key is in the same
    /// shard of every map).
    fn merge(&mut self, others: Vec<Stacks>) {
        use rayon::prelude::*;
        let mut from: Vec<Vec<KeyShard>> = (0..Self::SHARDS).map(|_| Vec::new()).collect();
        for other in others {
            for (i, shard) in other.shards.into_iter().enumerate() {
                from[i].push(shard);
            }
        }
        self.shards.par_iter_mut().zip(from).for_each(|(into, from)| {
            for shard in from {
                into.merge(shard);
            }
        });
    }

    /// The records of every shard in [`StackOrder`] (see [`OrderedStacks`]); the call stacks
    /// are decoded and the order sorted in parallel.
    fn ordered<'s>(shards: &[&'s KeyShard]) -> OrderedStacks<'s> {
        use rayon::prelude::*;
        let none = StoredStack { key: &[], count: 0, part: 0, start: 0, len: 0, entries: 0 };
        let mut stacks = vec![none; shards.iter().map(|s| s.index.len()).sum()];
        let mut order = vec![(StackOrder::of(&[]), 0); stacks.len()];
        let (mut rest, mut rest_order, mut first) = (&mut stacks[..], &mut order[..], 0);
        let mut parts = Vec::with_capacity(shards.len());
        for s in shards {
            let (part, tail) = std::mem::take(&mut rest).split_at_mut(s.index.len());
            let (part_order, tail_order) =
                std::mem::take(&mut rest_order).split_at_mut(s.index.len());
            parts.push((s, part, part_order, first));
            (rest, rest_order, first) = (tail, tail_order, first + s.index.len());
        }
        let frames = parts
            .into_par_iter()
            .enumerate()
            .map(|(i, (shard, part, part_order, first))| {
                let stored = || shard.chunks.iter().flat_map(|c| records(c));
                // Sized first (each key starts with its call stack's length): no regrowth.
                let len = stored().map(|(.., key)| key::stack_len(key)).sum();
                let mut frames = Vec::with_capacity(len);
                let slots = part.iter_mut().zip(part_order).zip(first as u32..);
                for (((slot, order), at), (_, _, count, key)) in slots.zip(stored()) {
                    let start = frames.len();
                    let entries = key::decode(key, &mut frames).position();
                    let len = frames.len() - start;
                    *order = (StackOrder::of(&frames[start..]), at);
                    *slot = StoredStack {
                        key,
                        count,
                        part: i as u32,
                        start: start as u32,
                        len: len as u32,
                        entries: entries as u32,
                    };
                }
                frames
            })
            .collect();
        order.par_sort_unstable_by_key(|&(order, _)| order);
        OrderedStacks { frames, stacks, order }
    }
}

/// The stored stacks with their call stacks decoded once (for the order and the walk), and the
/// order unwinding takes them in ([`StackOrder`]).
pub struct OrderedStacks<'s> {
    /// By part (a shard), the call stacks of its stacks one after another.
    frames: Vec<Vec<Vaddr>>,
    /// Every stored stack, shard by shard.
    stacks: Vec<StoredStack<'s>>,
    /// Each stack's order and index in `stacks`, sorted by order.
    pub order: Vec<(StackOrder, u32)>,
}

/// A stored stack: its key and count, where its call stack lies in [`OrderedStacks::frames`],
/// and where its LBR entries start in the key.
#[derive(Clone, Copy)]
struct StoredStack<'s> {
    key: &'s [u8],
    count: u64,
    part: u32,
    start: u32,
    len: u32,
    entries: u32,
}

impl OrderedStacks<'_> {
    /// The count and sample of the stack at `index`: its call stack, its LBR entries as they
    /// are taken (see [`key::decode`]).
    pub fn sample(&self, index: u32) -> (u64, &[Vaddr], key::Branches<'_>) {
        let s = &self.stacks[index as usize];
        let start = s.start as usize;
        let callchain = &self.frames[s.part as usize][start..start + s.len as usize];
        let last = callchain.last().copied().unwrap_or(Vaddr(0));
        (s.count, callchain, key::Branches::resume(s.key, s.entries as usize, last))
    }
}

impl KeyShard {
    /// Bytes of a chunk: the first ones smaller, for inputs with few stacks.
    const CHUNK: usize = 64 << 10;

    fn add(&mut self, hash: u64, key: &[u8], count: u64) {
        let chunks = &self.chunks;
        let alike = |&pos: &u64| {
            let (h, _, k) = record(&chunks[(pos >> 32) as usize], pos as u32 as usize);
            h == hash && k == key
        };
        if let Some(&pos) = self.index.find(hash, alike) {
            let (chunk, at) = (&mut self.chunks[(pos >> 32) as usize], pos as u32 as usize);
            let c = &mut chunk[at + 8..at + 16];
            let sum = u64::from_le_bytes(c.try_into().unwrap_or_default()).saturating_add(count);
            c.copy_from_slice(&sum.to_le_bytes());
            return;
        }
        let need = HEAD + key.len();
        let room = self.chunks.last().map_or(0, |c| c.capacity() - c.len());
        if room < need {
            let last = self.chunks.last().map_or(0, Vec::capacity);
            let size = (2 * last).clamp(4 << 10, Self::CHUNK).max(need);
            self.chunks.push(Vec::with_capacity(size));
        }
        let i = self.chunks.len() - 1;
        let chunk = &mut self.chunks[i];
        let pos = (i as u64) << 32 | chunk.len() as u64;
        chunk.extend_from_slice(&hash.to_le_bytes());
        chunk.extend_from_slice(&count.to_le_bytes());
        chunk.extend_from_slice(&(key.len() as u32).to_le_bytes());
        chunk.extend_from_slice(key);
        let chunks = &self.chunks;
        self.index.insert_unique(hash, pos, |&p| {
            record(&chunks[(p >> 32) as usize], p as u32 as usize).0
        });
    }

    /// Adds the keys and counts of `other`, the smaller into the larger, freeing its chunks as
    /// they are copied.
    fn merge(&mut self, mut other: KeyShard) {
        if other.index.len() > self.index.len() {
            std::mem::swap(self, &mut other);
        }
        drop(other.index);
        for chunk in other.chunks {
            for (_, hash, count, key) in records(&chunk) {
                self.add(hash, key, count);
            }
        }
    }
}

/// What aggregation keeps: samples with call stacks are kept whole (distinct ones, counted) to be
/// unwound later; LBR-only and IP samples need no context, so they are reduced at once to raw
/// counters, and memory stays flat however many samples there are.
#[derive(Default)]
pub struct AggregatedSamples {
    stacks: Stacks,
    /// Maps of other workers and inputs, kept apart until [`merge_worker_maps`] (unwinding is
    /// linear in the counts, so maps of different inputs need not be merged).
    ///
    /// [`merge_worker_maps`]: Self::merge_worker_maps
    merged: Vec<Stacks>,
    /// Straight-line pairs (target of an entry, source of the next newer one) with both ends in
    /// the binary, and branches with an internal target, not yet checked for plausibility (see
    /// [`super::lbr::lbr_counters`]). IP samples give one-instruction pairs.
    pub raw: Counters,
    /// Whether samples carried call stacks (CS input).
    pub has_call_stacks: bool,
    /// What normalising the call stacks changed or dropped.
    pub normalize: NormalizeStats,
    /// Plain and weighted range totals of the windows (see [`super::weighting`]).
    pub weights: RangeWeights,
}

impl AggregatedSamples {
    /// Distinct stacks, counted once per map that holds them.
    pub fn len(&self) -> usize {
        self.maps().map(Stacks::len).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.maps().all(Stacks::is_empty)
    }
    fn maps(&self) -> impl Iterator<Item = &Stacks> {
        std::iter::once(&self.stacks).chain(&self.merged)
    }
    /// The stored keys (see [`key`]) and counts.
    #[cfg(test)]
    pub fn entries(&self) -> Vec<(&[u8], u64)> {
        self.maps().flat_map(Stacks::iter).collect()
    }
    /// The stored stacks in the order they are best unwound in ([`StackOrder`]), found in
    /// parallel.
    pub fn in_stack_order(&self) -> OrderedStacks<'_> {
        let shards: Vec<&KeyShard> = self.maps().flat_map(|m| &m.shards).collect();
        Stacks::ordered(&shards)
    }
    fn add(&mut self, key: &[u8], count: u64) {
        self.stacks.add(key, count);
    }
    /// Puts this input's counts, weighted by `w`, in the run's fixed-point unit (see
    /// [`super::weighting`]).
    pub fn to_run_unit(&mut self, w: Weighting) {
        let (num, den) = super::weighting::to_run_unit(w, &self.weights);
        if den != 1 {
            // Each count is rounded: a stack that several workers counted is summed first, so
            // that it rounds as it does when one thread reads the input.
            self.merge_worker_maps();
        }
        let scale = |v: &mut u64| {
            let x = (u128::from(*v) * num + den / 2) / den;
            *v = u64::try_from(x).unwrap_or(u64::MAX);
        };
        self.raw.ranges.values_mut().for_each(&scale);
        self.raw.branches.values_mut().for_each(&scale);
        for m in std::iter::once(&mut self.stacks).chain(&mut self.merged) {
            m.map_counts(|mut v| {
                scale(&mut v);
                v
            });
        }
        self.weights = RangeWeights::run_unit();
    }
    /// Sums the stacks several workers of one input counted into one map: which worker saw a
    /// stack depends on scheduling, so without this the number of distinct stacks and the
    /// unwinder's per-stack warnings would vary from run to run at two threads or more.
    pub fn merge_worker_maps(&mut self) {
        let merged = std::mem::take(&mut self.merged);
        if !merged.is_empty() {
            self.stacks.merge(merged);
        }
    }
    pub fn merge(&mut self, mut other: AggregatedSamples) {
        self.has_call_stacks |= other.has_call_stacks;
        self.normalize.merge(&other.normalize);
        self.weights.merge(&other.weights);
        self.raw.merge(&other.raw);
        for m in std::iter::once(std::mem::take(&mut other.stacks)).chain(other.merged) {
            if self.stacks.is_empty() {
                self.stacks = m;
            } else if !m.is_empty() {
                self.merged.push(m);
            }
        }
    }
}

/// `N` slots holding `v`, on the heap (the direct-mapped tables of aggregation).
pub(super) fn slots<T: Clone, const N: usize>(v: T) -> Box<[T; N]> {
    vec![v; N].into_boxed_slice().try_into().unwrap_or_else(|_| unreachable!("N slots made"))
}

/// The slot of the pair `(a, b)` in a direct-mapped table of `N` slots (a power of two): the
/// pair mixed by one multiply, the slot taken from the product's top bits (the best mixed). Every
/// direct-mapped cache of aggregation finds its slots here.
#[inline(always)]
pub(super) fn slot_of<const N: usize>(a: u64, b: u64) -> usize {
    const { assert!(N.is_power_of_two() && N > 1) };
    let h = (a ^ b.rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> (64 - N.trailing_zeros())) as usize
}

/// Slots of the tables keyed by a raw LBR entry ([`PairCache`], [`EntryCache`]).
const PAIR_SLOTS: usize = 1 << 13;

/// Remembers recent address translations: LBR entries and call chains repeat the same addresses
/// over and over, and a translation (mapping lookup + instruction-boundary search) costs far more
/// than a cache probe. Direct-mapped; a slot is valid for the process state it was filled in
/// ([`ProcessView::stamp`]), so changes to the mappings need no flush.
struct TranslationCache {
    /// (stamp, runtime address, translation); stamp 0 marks an empty slot. An array, so that a
    /// masked index needs no bounds check.
    slots: Box<[(u64, u64, u64); Self::SLOTS]>,
}

impl TranslationCache {
    const SLOTS: usize = 1 << 14;

    fn new() -> Self {
        TranslationCache { slots: slots((0, 0, 0)) }
    }

    #[inline]
    fn slot(stamp: u64, addr: u64) -> usize {
        slot_of::<{ Self::SLOTS }>(addr, stamp)
    }

    #[inline]
    fn get(&self, stamp: u64, addr: u64) -> Option<u64> {
        let (s, a, v) = self.slots[Self::slot(stamp, addr)];
        (a == addr && s == stamp).then_some(v)
    }

    #[inline]
    fn put(&mut self, stamp: u64, addr: u64, v: u64) {
        self.slots[Self::slot(stamp, addr)] = (stamp, addr, v);
    }

    /// The binary vaddr of `a` if it starts an instruction of `binary`, else the external
    /// sentinel (llvm-profgen's `addressIsCode` test). `stamp` is `process.stamp()`.
    #[inline]
    fn translate(
        &mut self,
        binary: &Binary,
        process: &ProcessView<'_>,
        stamp: u64,
        a: RuntimeAddr,
    ) -> u64 {
        if let Some(v) = self.get(stamp, a.0) {
            return v;
        }
        let v = match process.to_vaddr(a) {
            Some(v) if binary.is_code(v) => v.0,
            _ => Vaddr::EXTERNAL.0,
        };
        self.put(stamp, a.0, v);
        v
    }
}

/// Translations of LBR entries as [`TranslationCache`] makes them, by raw (source, target) pair:
/// the windows of distinct raw samples repeat the same entries, and one probe costs about half
/// of two. Direct-mapped; a slot is valid for the process state it was filled in.
struct PairCache {
    /// (stamp, source, target, translated source, translated target); stamp 0 marks an empty
    /// slot.
    slots: Box<[[u64; 5]; PAIR_SLOTS]>,
}

impl PairCache {
    fn new() -> Self {
        PairCache { slots: slots([0; 5]) }
    }

    /// Keeps the entries of `branches` (raw LBR entries) whose translation is cached for `stamp`
    /// in `kept`, up to the first one missed: returned, with its slot. Out of line and without
    /// calls, so that its loop holds its state in registers (with the misses' translation
    /// inlined, LLVM made one loop of both and spilled it).
    #[inline(never)]
    fn keep_cached(
        &self,
        stamp: u64,
        branches: &mut impl Iterator<Item = (u64, u64)>,
        kept: &mut KeptEntries,
    ) -> Option<(usize, [u64; 2])> {
        // The state in a local, written back once: stored through `kept` at every entry.
        let mut window = kept.window;
        let mut miss = None;
        for (raw_from, raw_to) in branches {
            let slot = slot_of::<PAIR_SLOTS>(stamp ^ raw_from, raw_to);
            match self.slots[slot] {
                [s, f, t, from, to] if s == stamp && f == raw_from && t == raw_to => {
                    window.keep(&mut kept.branches, [raw_from, raw_to], [from, to]);
                }
                _ => {
                    miss = Some((slot, [raw_from, raw_to]));
                    break;
                }
            }
        }
        kept.window = window;
        miss
    }
}

/// The translated LBR entries of a call-stack sample's window as they are kept, newest first,
/// and what is measured on them.
struct KeptEntries {
    /// The entries kept, at `..window.k`: each written at the next kept place of a vector at
    /// least as long as the window, then cut (a push checked the room and stored the length at
    /// each).
    branches: Vec<Branch<Vaddr>>,
    window: KeptWindow,
}

/// What [`KeptEntries`] measures as it keeps entries.
#[derive(Clone, Copy, Default)]
struct KeptWindow {
    /// Entries kept.
    k: usize,
    /// Instructions the window ran outside the binary (libc, the loader): part of its span.
    external: u64,
    /// The raw source of the newer entry, and whether it translated external.
    newer_raw: u64,
    newer_external: bool,
}

impl KeptWindow {
    /// The next (older) entry: `raw` translated to `[from, to]`, kept in `branches` unless
    /// external at both ends.
    #[inline(always)]
    fn keep(
        &mut self,
        branches: &mut [Branch<Vaddr>],
        [raw_from, raw_to]: [u64; 2],
        [from, to]: [u64; 2],
    ) {
        let ext = Vaddr::EXTERNAL.0;
        if self.newer_external && to == ext {
            self.external = self.external.saturating_add(external_span(raw_to, self.newer_raw));
        }
        (self.newer_raw, self.newer_external) = (raw_from, from == ext);
        // External-to-external entries carry nothing (llvm-profgen drops them too).
        if (from != ext || to != ext)
            && let Some(place) = branches.get_mut(self.k)
        {
            *place = Branch { source: Vaddr(from), target: Vaddr(to) };
            self.k += 1;
        }
    }
}

impl KeptEntries {
    /// Keeps the entries of a window of `n` in `branches` (a reused vector: mostly long enough
    /// from the last window).
    fn new(mut branches: Vec<Branch<Vaddr>>, n: usize) -> Self {
        if branches.len() < n {
            branches.resize(n, Branch { source: Vaddr::EXTERNAL, target: Vaddr::EXTERNAL });
        }
        KeptEntries { branches, window: KeptWindow::default() }
    }

    /// The next (older) entry: `raw` translated to `[from, to]`.
    fn keep(&mut self, raw: [u64; 2], translated: [u64; 2]) {
        self.window.keep(&mut self.branches, raw, translated);
    }

    /// The entries kept.
    fn finish(mut self) -> Vec<Branch<Vaddr>> {
        self.branches.truncate(self.window.k);
        self.branches
    }
}

/// Range counts of `--leading-ip-only` samples on their way to [`Counters`]: hot code adds the
/// same few over and over, and adding to a direct-mapped slot costs a fraction of a hash-map
/// update. A slot's count goes to the map when another range takes the slot, and at the end (sums
/// do not depend on the order they are added in).
struct RangeCache {
    slots: Box<[RangeSlot; Self::SLOTS]>,
}

#[derive(Clone, Copy)]
struct RangeSlot {
    start: u64,
    end: u64,
    count: u64,
    /// Whether `count` was added to (a count of 0 still makes a map entry).
    counted: bool,
}

impl RangeSlot {
    const EMPTY: RangeSlot = RangeSlot { start: 0, end: 0, count: 0, counted: false };
}

impl RangeCache {
    const SLOTS: usize = 1 << 12;

    fn new() -> Self {
        RangeCache { slots: slots(RangeSlot::EMPTY) }
    }

    /// Adds `n` to the count of `[start, end]`, moving the count of the range that held its slot
    /// to `map`.
    #[inline(always)]
    fn add(&mut self, map: &mut HashMap<(Vaddr, Vaddr), u64>, start: u64, end: u64, n: u64) {
        let slot = &mut self.slots[slot_of::<{ RangeCache::SLOTS }>(start, end)];
        if slot.start != start || slot.end != end {
            let old = std::mem::replace(slot, RangeSlot { start, end, ..RangeSlot::EMPTY });
            if old.counted {
                add_count(map, (Vaddr(old.start), Vaddr(old.end)), old.count);
            }
        }
        slot.count = slot.count.saturating_add(n);
        slot.counted = true;
    }

    /// Moves every held count into `map`.
    fn drain_into(&mut self, map: &mut HashMap<(Vaddr, Vaddr), u64>) {
        for slot in self.slots.iter_mut() {
            let old = std::mem::replace(slot, RangeSlot::EMPTY);
            if old.counted {
                add_count(map, (Vaddr(old.start), Vaddr(old.end)), old.count);
            }
        }
    }
}

/// LBR entries of LBR-only samples, two consecutive entries of a window to a slot (the window's
/// first and second, third and fourth, …; a last odd one alone), with the source of the newer
/// entry kept before them: one direct-mapped slot holds the two entries' translations, what
/// they add to the window's measures (entries kept, ranges and their instructions), and one
/// count for both entries' branches and ranges (a window adds its weight to all of them). Two
/// entries seen before after the same newer source cost one probe instead of four
/// translations, two range lookups and four counts, and a window half the probes of a slot per
/// entry. Valid for the process state it was filled in ([`ProcessView::stamp`]); the count goes
/// to the branch and range maps when other entries take the slot, and at the end. Exact: a
/// slot is used only for the same stamp, raw entries and newer source it was filled for, and
/// everything else it holds follows from those.
struct EntryCache {
    slots: Box<[EntrySlot; Self::SLOTS]>,
    /// Slots taken over so far.
    misses: u64,
}

/// One slot: what a probe reads first, then the entries' translations and the count.
#[derive(Clone, Copy, Default)]
#[repr(C, align(128))]
struct EntrySlot {
    /// 0: empty (no process state has stamp 0).
    stamp: u64,
    /// The raw (source, target) of the newer entry and of the older one ((0, 0) if alone).
    a: (u64, u64),
    b: (u64, u64),
    /// The translated source of the newer entry kept before the pair (external if none).
    newer: u64,
    /// The same after the pair: the source of its older entry kept, else of its newer one, else
    /// `newer`.
    newer_after: u64,
    /// Instructions in the pair's ranges that count for the window's span (in the binary, not
    /// reversed); [`EntrySlot::UNKNOWN`] if more than a u32 holds (then counted each time).
    span: u32,
    /// Entries kept (not external at both ends), and ranges counted in `span`.
    kept: u8,
    ranges: u8,
    /// [`EntrySlot::ALONE`] and the other flags.
    flags: u8,
    from_a: u64,
    to_a: u64,
    from_b: u64,
    to_b: u64,
    /// 0 until counted (only windows of a weight are).
    count: u64,
    /// Instructions run outside the binary between the two entries (the newer's source and the
    /// older's target external), else 0.
    between: u32,
}

impl EntrySlot {
    const UNKNOWN: u32 = u32::MAX;
    /// The slot holds one entry (the window's last, of an odd count): part of the key.
    const ALONE: u8 = 1;
    /// The newer entry's target is external.
    const A_TO_EXTERNAL: u8 = 2;
    /// The older entry's source is external.
    const B_FROM_EXTERNAL: u8 = 4;
    /// An entry's target is in the binary: the slot is counted.
    const COUNTED: u8 = 8;

    /// Whether an entry translated to `(from, to)` is kept: external-to-external entries carry
    /// nothing (llvm-profgen drops them too).
    fn kept(from: u64, to: u64) -> bool {
        let ext = Vaddr::EXTERNAL.0;
        from != ext || to != ext
    }

    /// Whether the range from an entry's target `to` up to the newer source `newer` counts for
    /// the window's span: both in the binary, not reversed.
    fn spans(to: u64, newer: u64) -> bool {
        let ext = Vaddr::EXTERNAL.0;
        to != ext && newer != ext && to <= newer
    }

    /// The newer source kept before the older entry.
    fn newer_b(&self) -> u64 {
        if Self::kept(self.from_a, self.to_a) { self.from_a } else { self.newer }
    }

    /// Instructions of the pair's ranges that count for the window's span.
    fn count_span(&self, binary: &Binary) -> u64 {
        let range = |to: u64, newer: u64| {
            if Self::spans(to, newer) { binary.inst_count(Vaddr(to), Vaddr(newer)) } else { 0 }
        };
        range(self.to_a, self.newer).wrapping_add(range(self.to_b, self.newer_b()))
    }
}

impl EntryCache {
    const SLOTS: usize = 1 << 12;

    fn new() -> Self {
        EntryCache { slots: slots(EntrySlot::default()), misses: 0 }
    }

    /// The slot of entries `a` (newer) and `b` (older, `None` if `a` is the window's last) after
    /// the newer kept source `newer` in the process state `stamp` (filled by `translate` if no
    /// slot held them: the slot is taken over, its count moved to the maps). The slot is picked
    /// by the raw source of the entry before, `newer_raw`, not by `newer`: that is a translation
    /// the previous probe loaded, and hashing it would chain every probe of a window to the one
    /// before.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn slot(
        &mut self,
        raw: &mut Counters,
        binary: &Binary,
        stamp: u64,
        a: (u64, u64),
        b: Option<(u64, u64)>,
        (newer, newer_raw): (u64, u64),
        translate: impl FnMut(u64) -> u64,
    ) -> (usize, &EntrySlot) {
        let (alone, b_key) = match b {
            Some(b) => (0, b),
            None => (EntrySlot::ALONE, (0, 0)),
        };
        let h = stamp ^ newer_raw.rotate_left(43) ^ a.0 ^ b_key.1.rotate_left(17);
        let i = slot_of::<{ Self::SLOTS }>(h, a.1 ^ b_key.0.rotate_left(31));
        let s = &self.slots[i];
        if s.a == a
            && s.b == b_key
            && s.newer == newer
            && s.stamp == stamp
            && s.flags & EntrySlot::ALONE == alone
        {
            return (i, &self.slots[i]);
        }
        self.take(raw, binary, i, stamp, (a, b), newer, translate);
        (i, &self.slots[i])
    }

    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn take(
        &mut self,
        raw: &mut Counters,
        binary: &Binary,
        i: usize,
        stamp: u64,
        (a, b): ((u64, u64), Option<(u64, u64)>),
        newer: u64,
        mut translate: impl FnMut(u64) -> u64,
    ) {
        self.misses += 1;
        let ext = Vaddr::EXTERNAL.0;
        let (from_a, to_a) = (translate(a.0), translate(a.1));
        let (from_b, to_b) = b.map_or((ext, ext), |b| (translate(b.0), translate(b.1)));
        let mut slot = EntrySlot {
            stamp,
            a,
            b: b.unwrap_or((0, 0)),
            newer,
            from_a,
            to_a,
            from_b,
            to_b,
            ..Default::default()
        };
        let newer_b = slot.newer_b();
        let kept_b = EntrySlot::kept(from_b, to_b);
        slot.newer_after = if kept_b { from_b } else { newer_b };
        slot.kept = u8::from(EntrySlot::kept(from_a, to_a)) + u8::from(kept_b);
        slot.ranges =
            u8::from(EntrySlot::spans(to_a, newer)) + u8::from(EntrySlot::spans(to_b, newer_b));
        slot.span = u32::try_from(slot.count_span(binary)).unwrap_or(EntrySlot::UNKNOWN);
        if let Some(b) = b
            && from_a == ext
            && to_b == ext
        {
            // At most 2^14 + 1.
            slot.between = external_span(b.1, a.0) as u32;
        }
        let flag = |set: bool, f: u8| if set { f } else { 0 };
        slot.flags = flag(b.is_none(), EntrySlot::ALONE)
            | flag(to_a == ext, EntrySlot::A_TO_EXTERNAL)
            | flag(b.is_some() && from_b == ext, EntrySlot::B_FROM_EXTERNAL)
            | flag(to_a != ext || to_b != ext, EntrySlot::COUNTED);
        self.put(raw, i, slot);
    }

    /// Fills slot `i`, moving the count it held to `raw`: for each of its entries, to the branch
    /// if its target is in the binary, and then to the range up to the newer source if that is
    /// too.
    fn put(&mut self, raw: &mut Counters, i: usize, slot: EntrySlot) {
        let old = std::mem::replace(&mut self.slots[i & (Self::SLOTS - 1)], slot);
        if old.count == 0 {
            return;
        }
        let ext = Vaddr::EXTERNAL.0;
        for (from, to, newer) in
            [(old.from_a, old.to_a, old.newer), (old.from_b, old.to_b, old.newer_b())]
        {
            if to != ext {
                add_count(&mut raw.branches, (Vaddr(from), Vaddr(to)), old.count);
                if newer != ext {
                    add_count(&mut raw.ranges, (Vaddr(to), Vaddr(newer)), old.count);
                }
            }
        }
    }

    /// Adds `n` (> 0) to the count of slot `i`.
    #[inline(always)]
    fn add_at(&mut self, i: usize, n: u64) {
        let slot = &mut self.slots[i & (Self::SLOTS - 1)];
        slot.count = slot.count.saturating_add(n);
    }

    /// Measures the window whose slots `found` holds, in order (each still holding its entries).
    /// Out of line, so that its loop has the registers to itself.
    #[inline(never)]
    fn measure(&self, binary: &Binary, found: &FoundSlots) -> LbrWindow {
        let mut window = LbrWindow::default();
        let mut before = (0, false);
        for &i in &found.slots[..found.n] {
            let s = &self.slots[i as usize & (Self::SLOTS - 1)];
            window.measure(binary, s, before);
            before = (s.b.0, s.flags & EntrySlot::B_FROM_EXTERNAL != 0);
        }
        window
    }

    /// Adds `n` (> 0) to the count of each slot of `found` (one with no entry counted moves
    /// nothing to the maps).
    #[inline(always)]
    fn add_to(&mut self, found: &[u32], n: u64) {
        let slots = &mut *self.slots;
        for &i in found {
            let slot = &mut slots[i as usize & (Self::SLOTS - 1)];
            slot.count = slot.count.saturating_add(n);
        }
    }

    /// Moves every held count into `raw`.
    fn drain_into(&mut self, raw: &mut Counters) {
        for i in 0..Self::SLOTS {
            self.put(raw, i, EntrySlot::default());
        }
    }
}

/// Samples not yet reduced, counted by their raw content: a program's hot loops record the same
/// call stack and branch stack over and over, and a raw sample is counted for a fraction of what
/// translating, normalising and encoding it costs. Raw samples are only comparable under one
/// state of the address map, so the owner [`flush`](Aggregator::flush)es before every change.
/// Only samples with call stacks are held: an LBR-only sample is counted for about what holding
/// it costs (its key is 64 words), so it is reduced at once.
///
/// The held samples' words lie back to back in one arena, found by their hash through an index
/// of positions: nothing is allocated or freed per sample, a flush empties the arena in one go,
/// and samples are reduced in the order they first came (no hash-order dependence).
struct Pending {
    /// Every held sample's `[pid, number of return addresses | number of branch entries << 32,
    /// leaf, return addresses…, (source, target)…]`: runtime addresses but the leaf (see
    /// [`Aggregator::leaf`]), as a record holds them: compared with a record's bytes as bytes.
    words: Vec<RawWord>,
    /// The distinct held samples, in the order first seen.
    held: Vec<Held>,
    /// `held` by content, found by [`Held::hash`].
    index: HashTable<Slot>,
    /// Seeds [`raw_hash`]: one seed per process, so that a held sample's hash is also its hash
    /// in another aggregator's table ([`Aggregator::hold_from`]).
    seed: u64,
    /// [`AddressMap::generation`] the samples were read under.
    generation: u64,
    /// Samples held since the last flush (`held.len()` of them distinct).
    samples: u64,
    /// Samples still to reduce at once: when few held samples were alike (most LBR stacks
    /// distinct), holding them costs more than it saves, for a while.
    bypass: u64,
    /// Raw words held before the samples are reduced.
    limit: usize,
    /// Past the limit, the samples stay held until [`Aggregator::take_held`] takes them (for
    /// another aggregator to reduce, or for the owner to reduce in parts).
    taken: bool,
    /// Words presized for past the limit: [`Pending::SAMPLE_ROOM`] or
    /// [`Pending::HAND_OFF_ROOM`].
    room: usize,
}

/// Samples one aggregator held, taken for another to reduce under the same state of the map
/// ([`Aggregator::take_held`], [`Aggregator::reduce_held`]).
pub struct HeldSamples {
    held: Vec<Held>,
    words: Vec<RawWord>,
    /// [`AddressMap::generation`] the samples were read under.
    generation: u64,
}

impl HeldSamples {
    /// Distinct samples held.
    pub fn distinct(&self) -> usize {
        self.held.len()
    }
}

/// A distinct held sample in [`Pending::index`]: its index in [`Pending::held`], and where its
/// words start, so that a lookup compares the words without waiting for the [`Held`] (a cache
/// miss between the index's and the words'); the words' second one tells their length.
#[derive(Clone, Copy)]
struct Slot {
    start: u32,
    held: u32,
}

/// One distinct held sample: where its words are, and the counts of the samples alike.
struct Held {
    hash: u64,
    start: usize,
    len: usize,
    /// Samples, their summed repeat counts, and (with cycle weighting) their summed cycle
    /// weights (their cycle counts differ where their addresses do not).
    n: u64,
    repeat: u64,
    cycles: CycleWeights,
}

impl Pending {
    /// Raw words held before the pending samples are reduced anyway (16 MiB).
    const MAX_WORDS: usize = 2 << 20;
    /// Samples reduced at once after a flush found fewer than one in four alike.
    const BYPASS: u64 = 1 << 16;
    /// Words held past the limit, presized for (more grow the words): by the sample that
    /// crosses it (32 LBR entries take 64 words, a call stack of perf's default 127 frames as
    /// many), or when handing off, by the rest of the batch that crossed it (the reading
    /// thread's batches mostly span at most 1 MiB of records, and a sample's words take fewer
    /// bytes than its record).
    const SAMPLE_ROOM: usize = 1 << 10;
    const HAND_OFF_ROOM: usize = (1 << 20) / size_of::<RawWord>();

    fn new() -> Self {
        Pending {
            words: Vec::new(),
            held: Vec::new(),
            index: HashTable::new(),
            seed: {
                static SEED: OnceLock<u64> = OnceLock::new();
                *SEED.get_or_init(|| DefaultHashBuilder::default().hash_one(0u64))
            },
            generation: 0,
            samples: 0,
            bypass: 0,
            limit: Pending::MAX_WORDS,
            taken: false,
            room: Pending::SAMPLE_ROOM,
        }
    }

    /// Takes the held samples to be reduced, keeping the index's memory; past the limit, when
    /// fewer than one in four were alike, the next samples bypass holding for a while.
    fn take(&mut self) -> HeldSamples {
        let distinct = self.held.len() as u64;
        if self.words.len() > self.limit && 4 * (self.samples - distinct) < self.samples {
            self.bypass = Pending::BYPASS;
        }
        self.samples = 0;
        self.index.clear();
        let (held, words) = (std::mem::take(&mut self.held), std::mem::take(&mut self.words));
        HeldSamples { held, words, generation: self.generation }
    }

    /// Holds a sample of `repeat` samples alike (`cycles` their cycle weights) read in place:
    /// `head` as [`Pending::words`] starts, then the return addresses `callers` and `branches`,
    /// or counts it with the held sample alike. Only a sample not held yet is copied.
    fn hold(
        &mut self,
        head: [u64; 3],
        callers: &[RawWord],
        branches: &[RawBranch],
        repeat: u64,
        cycles: CycleWeights,
    ) {
        self.samples += 1;
        let hash = raw_hash(self.seed, head, callers, branches);
        let all = &self.words;
        let alike = |s: &Slot| holds(all, s.start as usize, head, callers, branches);
        if let Some(s) = self.index.find(hash, alike) {
            self.held[s.held as usize].count(1, repeat, cycles);
            return;
        }
        let start = self.reserve(head.len() + callers.len() + 2 * branches.len());
        let words = &mut self.words;
        words.extend(head.map(u64::to_le_bytes));
        words.extend_from_slice(callers);
        // Sized first, then filled: extending entry by entry checked the room and stored the
        // length at every one.
        let at = words.len();
        words.resize(at + 2 * branches.len(), [0; 8]);
        for (pair, e) in words[at..].as_chunks_mut::<2>().0.iter_mut().zip(branches) {
            let (w, _) = e.as_chunks::<8>();
            *pair = [w[0], w[1]];
        }
        self.push(Held { hash, start, len: self.words.len() - start, n: 1, repeat, cycles });
    }

    /// Holds `h`, held with `words` by another aggregator under the same state of the map, or
    /// adds its counts to the held sample alike.
    fn hold_held(&mut self, h: &Held, words: &[RawWord]) {
        self.samples += h.n;
        let all = &self.words;
        // Equal second words, equal lengths.
        let alike =
            |s: &Slot| all.get(s.start as usize..s.start as usize + words.len()) == Some(words);
        if let Some(s) = self.index.find(h.hash, alike) {
            self.held[s.held as usize].count(h.n, h.repeat, h.cycles);
            return;
        }
        let start = self.reserve(words.len());
        self.words.extend_from_slice(words);
        self.push(Held { start, ..*h });
    }

    /// Room for `len` more words; where they start.
    #[inline]
    fn reserve(&mut self, len: usize) -> usize {
        let words = &mut self.words;
        if words.capacity() == 0 {
            // Room for the limit at once (fresh, or taken along by a hand-off): grown sample by
            // sample, the words were copied at every doubling into fresh pages (jemalloc moves a
            // large block it grows, where glibc remapped it): a third more page faults on an
            // input of distinct LBR stacks.
            words.reserve_exact(self.limit + self.room);
        }
        words.reserve(len);
        words.len()
    }

    /// Adds `h`, whose words were just appended, as a new distinct sample.
    #[inline]
    fn push(&mut self, h: Held) {
        // At most a few times the limit: far below 2^32 words.
        let slot = Slot { start: h.start as u32, held: self.held.len() as u32 };
        let hash = h.hash;
        self.held.push(h);
        let held = &self.held;
        self.index.insert_unique(hash, slot, |s| held[s.held as usize].hash);
    }
}

impl Held {
    /// Counts `n` more samples alike, their repeat counts summing to `repeat`.
    #[inline]
    fn count(&mut self, n: u64, repeat: u64, cycles: CycleWeights) {
        self.n += n;
        self.repeat = self.repeat.saturating_add(repeat);
        self.cycles.add(cycles);
    }
}

/// The 128-bit product's halves folded (foldhash's mixer).
#[inline(always)]
fn fold(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// The hash of a raw sample that [`Pending::hold`] is given, over the words it keeps (the
/// branch entries' flags left out) but the leaf class, two words per multiply: two return
/// addresses, or two branch entries (an entry's source and rotated target folded into one word).
/// The multiplies form one dependent chain, so their number, not the instructions, bounds its
/// time. Without the leaf (`head[2]`), the hash and the index probe need not wait for the leaf's
/// class, whose cache slot is often a cache miss; samples that differ only in their leaf class
/// (a prolog, epilog or external leaf: rare) share a hash, and [`holds`] tells them apart.
#[inline]
fn raw_hash(seed: u64, head: [u64; 3], callers: &[RawWord], branches: &[RawBranch]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = fold(seed ^ head[0], K ^ head[1]);
    let (pairs, odd) = callers.as_chunks::<2>();
    for [a, b] in pairs {
        h = fold(h ^ u64::from_le_bytes(*a), K ^ u64::from_le_bytes(*b));
    }
    if let [a] = odd {
        h = fold(h ^ u64::from_le_bytes(*a), K);
    }
    let entry = |e: &RawBranch| {
        let [source, target, _] = BranchStack::words(e);
        source ^ target.rotate_left(32)
    };
    let (pairs, odd) = branches.as_chunks::<2>();
    for [a, b] in pairs {
        h = fold(h ^ entry(a), K ^ entry(b));
    }
    if let [a] = odd {
        h = fold(h ^ entry(a), K);
    }
    h
}

/// Whether the held sample whose words start at `start` in `all` holds the sample
/// [`Pending::hold`] is given.
#[inline]
fn holds(
    all: &[RawWord],
    start: usize,
    head: [u64; 3],
    callers: &[RawWord],
    branches: &[RawBranch],
) -> bool {
    let Some(h) = all[start..].first_chunk::<3>() else { return false };
    // Equal second words, equal lengths: the words are the held sample's.
    if h.map(u64::from_le_bytes) != head {
        return false;
    }
    let rest = &all[start + 3..start + 3 + callers.len() + 2 * branches.len()];
    let (stack, pairs) = rest.split_at(callers.len());
    // Without an early exit per entry: most samples looked up are held already, so every entry
    // is compared anyway, and this loop is half as long. The words' differences are kept apart,
    // so that an entry is compared as one vector, two entries a step.
    let le = |w: &RawWord| u64::from_le_bytes(*w);
    let mut diff = [0; 4];
    let (pairs, last_pair) = pairs.as_chunks::<4>();
    let (entries, last_entry) = branches.as_chunks::<2>();
    for (p, [a, b]) in pairs.iter().zip(entries) {
        let (a, b) = (BranchStack::words(a), BranchStack::words(b));
        diff[0] |= le(&p[0]) ^ a[0];
        diff[1] |= le(&p[1]) ^ a[1];
        diff[2] |= le(&p[2]) ^ b[0];
        diff[3] |= le(&p[3]) ^ b[1];
    }
    if let ([source, target], [e]) = (last_pair, last_entry) {
        let e = BranchStack::words(e);
        diff[0] |= le(source) ^ e[0];
        diff[1] |= le(target) ^ e[1];
    }
    stack == callers && diff == [0; 4]
}

/// Reduces samples to binary addresses and counts them.
pub struct Aggregator<'b> {
    binary: &'b Binary,
    opts: SampleOptions,
    cache: TranslationCache,
    /// Leaf frames as [`leaf`](Self::leaf) classes them, cached like translations.
    leaves: TranslationCache,
    /// LBR entries' translations, for reducing held samples.
    pairs: PairCache,
    /// Call sites of return addresses (binary addresses: one stamp for all), cached like
    /// translations: call stacks repeat the same callers over and over.
    call_sites: TranslationCache,
    /// An instruction of the binary outside every prolog and epilog (see [`leaf`](Self::leaf)).
    plain_leaf: Option<u64>,
    /// Instruction counts of ranges, for weighting by instructions.
    spans: SpanCache,
    /// Range and branch counts on their way to `samples.raw`: of `--leading-ip-only` samples
    /// and of LBR-only ones.
    ranges: RangeCache,
    entries: EntryCache,
    /// Reused by every LBR-only window (lent out while it is walked): a fresh one per window
    /// zeroed its 256 bytes through a memset call, 9% of an LBR-only run at one thread in the
    /// jemalloc build's code.
    found: Option<Box<FoundSlots>>,
    pending: Pending,
    /// See [`stamp`](Self::stamp): (the map's address, its generation, the pid), and the stamp.
    last_stamp: ((usize, u64, Option<i32>), u64),
    /// Reused buffer: the sample's call stack as translated addresses.
    translated: Vec<u64>,
    /// Reused normalisation and key buffers.
    hybrid: HybridSample,
    key_bytes: Vec<u8>,
    samples: AggregatedSamples,
    stats: SampleStats,
}

impl<'b> Aggregator<'b> {
    pub fn new(binary: &'b Binary, opts: SampleOptions) -> Self {
        Aggregator {
            binary,
            opts,
            cache: TranslationCache::new(),
            leaves: TranslationCache::new(),
            call_sites: TranslationCache::new(),
            pairs: PairCache::new(),
            plain_leaf: binary
                .insts_in(Vaddr(0), Vaddr(u64::MAX))
                .find(|&a| !a.is_external() && !binary.is_prolog_or_epilog(a))
                .map(|a| a.0),
            spans: SpanCache::default(),
            ranges: RangeCache::new(),
            entries: EntryCache::new(),
            found: None,
            pending: Pending::new(),
            // No map lies at address 0.
            last_stamp: ((0, 0, None), 0),
            translated: Vec::new(),
            hybrid: HybridSample { callchain: Vec::new(), branches: Vec::new() },
            key_bytes: Vec::new(),
            samples: AggregatedSamples::default(),
            stats: SampleStats::default(),
        }
    }

    /// [`ProcessView::stamp`] of process `pid` in `map`: remembered for the last process, by
    /// the map's place and [`AddressMap::generation`] (consecutive samples mostly come from one
    /// process, and finding it hashed the pid and probed the map's table per sample).
    #[inline]
    fn stamp(&mut self, map: &AddressMap, pid: Option<i32>) -> u64 {
        let of = (std::ptr::from_ref(map).addr(), map.generation(), pid);
        if self.last_stamp.0 != of {
            self.last_stamp = (of, map.process(pid).stamp());
        }
        self.last_stamp.1
    }

    /// See [`TranslationCache::translate`].
    #[inline]
    fn internal(&mut self, process: &ProcessView<'_>, stamp: u64, a: RuntimeAddr) -> u64 {
        self.cache.translate(self.binary, process, stamp, a)
    }

    /// The leaf frame of a call stack at `a` as normalising reads it: external, a prolog or
    /// epilog address (whose instruction decides how the stack is read), or else one plain
    /// instruction of the binary for all: the leaf is replaced by the newest branch target
    /// anyway, so samples that differ only in where in plain code their IP skidded are held as
    /// one (two to three times fewer distinct raw samples on real programs).
    #[inline]
    fn leaf(&mut self, map: &AddressMap, pid: Option<i32>, a: RuntimeAddr) -> u64 {
        let stamp = self.stamp(map, pid);
        if let Some(v) = self.leaves.get(stamp, a.0) {
            return v;
        }
        let v = match self.internal(&map.process(pid), stamp, a) {
            v if v == Vaddr::EXTERNAL.0 || self.binary.is_prolog_or_epilog(Vaddr(v)) => v,
            v => self.plain_leaf.unwrap_or(v),
        };
        self.leaves.put(stamp, a.0, v);
        v
    }

    /// Counts `s`, read under `map`. Samples may be held raw until the next [`flush`], which
    /// must come before `map` changes.
    ///
    /// [`flush`]: Self::flush
    pub fn add(&mut self, map: &AddressMap, s: &Sample<'_>) {
        self.stats.read += 1;
        if self.opts.leading_ip_only {
            let process = map.process(s.pid);
            let ip = self.internal(&process, process.stamp(), s.ip);
            if ip == Vaddr::EXTERNAL.0 {
                self.stats.outside_binary += 1;
                return;
            }
            let mut count = s.repeat;
            if let Some(p) = self.opts.sample_period {
                count = count.saturating_mul(p);
            }
            self.ranges.add(&mut self.samples.raw.ranges, ip, ip, count);
            self.stats.used += 1;
            return;
        }
        if s.branches.is_empty() {
            self.stats.no_branch_stack += 1;
            return;
        }
        let with_stack = s.has_callchain && !self.opts.ignore_stack && !s.callchain.is_empty();
        if with_stack {
            self.samples.has_call_stacks = true;
            self.stats.with_call_stack += 1;
        }
        let Some((leaf, callers)) = s.callchain.0.split_first().filter(|_| with_stack) else {
            // Holding does not pay for LBR-only samples.
            let process = map.process(s.pid);
            let weighting = self.opts.weighting;
            let cycles = || cycle_weights(weighting, s);
            self.count_lbr(&process, s.branches.0, s.repeat, cycles);
            return;
        };
        let cycles = cycle_weights(self.opts.weighting, s);
        let leaf = self.leaf(map, s.pid, RuntimeAddr(u64::from_le_bytes(*leaf)));
        if self.opts.sample_period.is_some() || self.pending.bypass > 0 {
            self.pending.bypass -= u64::from(self.pending.bypass > 0);
            // Reduced at once: a period is split over the sample's own entries (not a sum over
            // raw samples), and holding does not pay while `Pending::bypass` lasts.
            let process = map.process(s.pid);
            let callers = callers.iter().map(|w| u64::from_le_bytes(*w));
            let branches = s.branches.iter().map(|b| (b.source.0, b.target.0));
            self.reduce(&process, Some(leaf), callers, branches, s.repeat, 1, cycles);
            return;
        }
        let p = &mut self.pending;
        debug_assert!(
            p.held.is_empty() || p.generation == map.generation(),
            "map changed unflushed"
        );
        p.generation = map.generation();
        let pid = s.pid.map_or(u64::MAX, |pid| u64::from(pid as u32));
        let head = [pid, callers.len() as u64 | (s.branches.0.len() as u64) << 32, leaf];
        p.hold(head, callers, s.branches.0, s.repeat, cycles);
        if p.words.len() > p.limit && !p.taken {
            self.flush(map);
        }
    }

    /// Holds samples past the limit until [`take_held`](Self::take_held) takes them: for a
    /// thread that others wait for, which hands its held samples to one of them rather than
    /// reduce them all in one go. Its limit is an eighth of the usual one: the samples handed
    /// off are still in memory while it holds the next ones (the worker holds them again with
    /// its own, so a smaller window here costs little dedup).
    pub fn handing_off_held(mut self) -> Self {
        self.pending.limit = Pending::MAX_WORDS / 8;
        self.pending.taken = true;
        self.pending.room = Pending::HAND_OFF_ROOM;
        self
    }

    /// Holds samples past the limit until [`take_held`](Self::take_held) takes them, at the
    /// usual limit: for a thread that reduces them in parts ([`reduce_held_part`]), between
    /// which another thread may join in.
    ///
    /// [`reduce_held_part`]: Self::reduce_held_part
    pub fn reducing_held_in_parts(mut self) -> Self {
        self.pending.taken = true;
        self
    }

    /// Lowers the limit of held samples to a sixteenth, for the end of the input: the samples
    /// still held when the input ends are reduced by one thread while the others wait, so they
    /// should be few. The next sample reduces those held past the new limit (or
    /// [`take_held`](Self::take_held) takes them).
    pub fn hold_less(&mut self) {
        self.pending.limit = self.pending.limit.min(Pending::MAX_WORDS / 16);
    }

    /// Stops handing off held samples (see [`handing_off_held`](Self::handing_off_held)): the
    /// thread works through the last batches as the workers do, holding as few as they do then
    /// ([`hold_less`](Self::hold_less)).
    pub fn reducing_held(&mut self) {
        self.pending.taken = false;
        self.hold_less();
    }

    /// The held samples, once past the limit, for another aggregator to reduce
    /// ([`reduce_held`](Self::reduce_held)) under the map they were read under.
    pub fn take_held(&mut self) -> Option<HeldSamples> {
        (self.pending.words.len() > self.pending.limit).then(|| self.pending.take())
    }

    /// Every held sample (if any), to be reduced in parts ([`reduce_held_part`]).
    ///
    /// [`reduce_held_part`]: Self::reduce_held_part
    pub fn take_all_held(&mut self) -> Option<HeldSamples> {
        (!self.pending.held.is_empty()).then(|| self.pending.take())
    }

    /// Holds the distinct samples of `held` from `from` on with those held here (read under the
    /// same state of the map), counting each one held here already with it, until past the
    /// limit; returns where it stopped. Adding counts costs a fraction of reducing a sample
    /// again: a stack the reading thread holds is mostly held by the worker it hands it to too.
    pub fn hold_from(&mut self, held: &HeldSamples, from: usize) -> usize {
        let p = &mut self.pending;
        debug_assert!(p.held.is_empty() || p.generation == held.generation, "map changed");
        p.generation = held.generation;
        for (i, h) in held.held.iter().enumerate().skip(from) {
            if p.words.len() > p.limit {
                return i;
            }
            p.hold_held(h, &held.words[h.start..h.start + h.len]);
        }
        held.held.len()
    }

    /// Reduces the samples held raw, under `map` (the map they were read under).
    pub fn flush(&mut self, map: &AddressMap) {
        if let Some(held) = self.take_all_held() {
            self.reduce_held(map, &held);
            self.reuse(held);
        }
    }

    /// Keeps the buffers of `held`, reduced, for the next samples (unless it holds samples
    /// in others already).
    pub fn reuse(&mut self, mut held: HeldSamples) {
        if self.pending.words.capacity() == 0 {
            held.held.clear();
            held.words.clear();
            (self.pending.held, self.pending.words) = (held.held, held.words);
        }
    }

    /// Reduces samples held raw (here or by another aggregator), under `map`: the state of the
    /// map they were read under.
    pub fn reduce_held(&mut self, map: &AddressMap, held: &HeldSamples) {
        self.reduce_held_part(map, held, 0..held.distinct());
    }

    /// Reduces the distinct held samples `part` of `held` (see [`reduce_held`]).
    ///
    /// [`reduce_held`]: Self::reduce_held
    pub fn reduce_held_part(&mut self, map: &AddressMap, held: &HeldSamples, part: Range<usize>) {
        debug_assert_eq!(held.generation, map.generation(), "map changed unflushed");
        let le = |w: &RawWord| u64::from_le_bytes(*w);
        for h in &held.held[part] {
            let key = &held.words[h.start..h.start + h.len];
            let [pid, lens, leaf] = [le(&key[0]), le(&key[1]), le(&key[2])];
            let pid = (pid != u64::MAX).then_some(pid as u32 as i32);
            let (callers, branches) = key[3..].split_at(lens as u32 as usize);
            let branches = branches.as_chunks::<2>().0.iter().map(|[s, t]| (le(s), le(t)));
            let process = map.process(pid);
            let (callers, n) = (callers.iter().map(le), h.n);
            self.reduce(&process, Some(leaf), callers, branches, h.repeat, n, h.cycles);
        }
    }

    /// The held samples' buffers, taken once every sample is [`flush`](Self::flush)ed, to be
    /// freed where no thread waits for it: a worker's grow to 16 MiB, which jemalloc returns to
    /// the system as it frees them (~2 ms of madvise at the end of the reading).
    pub fn take_held_buffers(&mut self) -> impl Send + use<> {
        debug_assert!(self.pending.held.is_empty(), "samples left unflushed");
        std::mem::replace(&mut self.pending, Pending::new())
    }

    /// What was counted, once every sample is [`flush`](Self::flush)ed.
    pub fn finish(mut self) -> (AggregatedSamples, SampleStats) {
        debug_assert!(self.pending.held.is_empty(), "samples left unflushed");
        self.ranges.drain_into(&mut self.samples.raw.ranges);
        self.entries.drain_into(&mut self.samples.raw);
        (self.samples, self.stats)
    }

    /// Translates and counts `n` samples alike (their repeat counts summing to `repeat`, their
    /// cycle weights to `cycles`), whose call stack is `leaf` (see [`Aggregator::leaf`]) and the
    /// return addresses `callers`.
    #[allow(clippy::too_many_arguments)]
    fn reduce(
        &mut self,
        process: &ProcessView<'_>,
        leaf: Option<u64>,
        callers: impl ExactSizeIterator<Item = u64>,
        branches: impl ExactSizeIterator<Item = (u64, u64)>,
        repeat: u64,
        n: u64,
        mut cycles: CycleWeights,
    ) {
        let stamp = process.stamp();
        let mut translated = std::mem::take(&mut self.translated);
        translated.clear();
        translated.extend(leaf);
        for f in callers {
            translated.push(self.internal(process, stamp, RuntimeAddr(f)));
        }
        // The kept entries go straight where normalising reads them.
        let mut kept = KeptEntries::new(std::mem::take(&mut self.hybrid.branches), branches.len());
        let mut branches = branches;
        while let Some((slot, raw)) = self.pairs.keep_cached(stamp, &mut branches, &mut kept) {
            kept.keep(raw, self.translate_pair(process, stamp, slot, raw));
        }
        let external = kept.window.external;
        self.hybrid.branches = kept.finish();
        if self.hybrid.branches.is_empty() {
            self.stats.outside_binary += n;
            self.translated = translated;
            return;
        }
        let mut count = repeat;
        if let Some(p) = self.opts.sample_period {
            count = count.saturating_mul(p);
            cycles = cycles.scaled(count, repeat);
        }
        self.keep_hybrid(&translated, count, cycles, external);
        self.stats.used += n;
        self.translated = translated;
    }

    /// Translates the raw LBR entry `raw` on a miss of [`PairCache`] slot `slot`, filling it
    /// (out of line: a few percent of the entries).
    #[inline(never)]
    fn translate_pair(
        &mut self,
        process: &ProcessView<'_>,
        stamp: u64,
        slot: usize,
        [raw_from, raw_to]: [u64; 2],
    ) -> [u64; 2] {
        let from = self.internal(process, stamp, RuntimeAddr(raw_from));
        let to = self.internal(process, stamp, RuntimeAddr(raw_to));
        self.pairs.slots[slot] = [stamp, raw_from, raw_to, from, to];
        [from, to]
    }

    /// Normalises a sample with a call stack now (return addresses → call sites, leaf → newest
    /// branch target), its translated LBR entries in `self.hybrid.branches`: more samples become
    /// identical, and only the normalised form is kept. Out of line, so that the LBR-only path of
    /// [`add`](Self::add) stays small.
    #[inline(never)]
    fn keep_hybrid(&mut self, callchain: &[u64], count: u64, cycles: CycleWeights, external: u64) {
        let callchain = callchain.iter().map(|&a| Vaddr(a));
        // Translated addresses are instruction starts or external: no second search.
        let is_code = |a: Vaddr| !a.is_external();
        let (binary, sites) = (self.binary, &mut self.call_sites);
        // Binary addresses are alike in every process: one stamp. No instruction starts at the
        // last address: it stands for "not after a call".
        let (stamp, none) = (1, u64::MAX);
        let call_site = |a: Vaddr| {
            let site = sites.get(stamp, a.0).unwrap_or_else(|| {
                let site = binary.call_addr_from_return_addr(a).map_or(none, |s| s.0);
                sites.put(stamp, a.0, site);
                site
            });
            (site != none).then_some(Vaddr(site))
        };
        let (normalize, h) = (&mut self.samples.normalize, &mut self.hybrid);
        let recover = !self.opts.llvm_compatible;
        if normalize_into(binary, is_code, call_site, callchain, count, recover, normalize, h) {
            // The ranges the unwinder will count: between consecutive entries, in the binary.
            let ranges = h
                .branches
                .windows(2)
                .map(|w| (w[1].target, w[0].source))
                .filter(|&(s, e)| !s.is_external() && !e.is_external() && s <= e);
            let w = self.opts.weighting;
            let spans = &mut self.spans;
            // Counted while measuring the span, when the weight needs it.
            let mut n_ranges = None;
            let span = || {
                let (mut n, mut span) = (0, 0);
                for (s, e) in ranges.clone() {
                    n += 1;
                    span += spans.count(binary, s, e);
                }
                n_ranges = Some(n);
                span
            };
            let weight = window_weight(w, span, external, count, cycles);
            if weight > 0 {
                if w != Weighting::Plain {
                    let n = n_ranges.unwrap_or_else(|| ranges.count());
                    self.samples.weights.add_window(w, count, weight, n);
                }
                key::encode(h, &mut self.key_bytes);
                self.samples.add(&self.key_bytes, weight);
            }
        }
    }

    /// Counts an LBR-only sample (`repeat` samples alike, with the cycle weights `cycles`, summed
    /// only once the window is known to count and its entries are in cache) whose
    /// LBR entries are `stack` (runtime addresses, most recent first): the branches with an
    /// internal target, and the straight-line code between consecutive entries (entry i's target
    /// ran up to entry i-1's source). Unless its weight is known up front, the window's slots are
    /// probed first, then measured from the slots found (its spans give the weight) and counted
    /// in them; if a slot taken over replaced one the window found before, the window is walked
    /// again, measuring as it goes, and once more to count.
    fn count_lbr(
        &mut self,
        process: &ProcessView<'_>,
        stack: &[RawBranch],
        repeat: u64,
        cycles: impl FnOnce() -> CycleWeights,
    ) {
        let branches = stack.iter().map(BranchStack::addrs);
        let w = self.opts.weighting;
        if w == Weighting::Plain && self.opts.sample_period.is_none() && repeat > 0 {
            // Plain windows weigh their repeat count (and keep no totals).
            let window = self.walk_lbr(process, branches, Some(repeat));
            self.stats.used += u64::from(window.entries > 0);
            self.stats.outside_binary += u64::from(window.entries == 0);
            return;
        }
        let mut found = self.found.take().unwrap_or_default();
        let probed = self.probe_lbr(process, stack, &mut found);
        let window = if probed && found.n == 1 {
            // Measured in place: a call costs more than one slot's measure.
            let mut window = LbrWindow::default();
            window.measure(self.binary, &self.entries.slots[found.slots[0] as usize], (0, false));
            window
        } else if probed {
            self.entries.measure(self.binary, &found)
        } else {
            self.walk_lbr(process, branches.clone(), None)
        };
        if window.entries == 0 {
            self.found = Some(found);
            self.stats.outside_binary += 1;
            return;
        }
        let mut cycles = cycles();
        let mut count = repeat;
        if let Some(p) = self.opts.sample_period {
            // A period is split over the sample's ranges.
            count = count.saturating_mul(p);
            if window.entries > 1 {
                count /= window.entries - 1;
            }
            cycles = cycles.scaled(count, repeat);
        }
        let weight = window_weight(w, || window.span, window.external, count, cycles);
        if weight > 0 {
            if probed {
                self.entries.add_to(&found.slots[..found.n], weight);
            } else {
                self.walk_lbr(process, branches, Some(weight));
            }
            self.samples.weights.add_window(w, count, weight, window.k);
        }
        self.found = Some(found);
        self.stats.used += 1;
    }

    /// Probes the slots of an LBR-only window (taking over those that miss), noting each in
    /// `found`: true if all are noted and still hold the window's entries (no slot was taken
    /// over after the window found it). Only the probes' state is live across this loop (the
    /// measures are summed after it, from the slots' lines it touched).
    #[inline(always)]
    fn probe_lbr(
        &mut self,
        process: &ProcessView<'_>,
        stack: &[RawBranch],
        found: &mut FoundSlots,
    ) -> bool {
        let (pairs, last) = stack.as_chunks::<2>();
        found.n = pairs.len() + last.len();
        if found.n > FoundSlots::MAX {
            return false;
        }
        let stamp = process.stamp();
        let binary = self.binary;
        let (cache, entries) = (&mut self.cache, &mut self.entries);
        let raw = &mut self.samples.raw;
        let mut translate = |a: u64| cache.translate(binary, process, stamp, RuntimeAddr(a));
        let misses = entries.misses;
        // The newer entry's kept source and raw source.
        let mut newer = (Vaddr::EXTERNAL.0, 0);
        let mut noted = found.slots.iter_mut();
        for ([a, b], note) in pairs.iter().zip(&mut noted) {
            let (a, b) = (BranchStack::addrs(a), BranchStack::addrs(b));
            let (i, s) = entries.slot(raw, binary, stamp, a, Some(b), newer, &mut translate);
            newer = (s.newer_after, b.0);
            *note = i as u32;
        }
        if let ([a], Some(note)) = (last, noted.next()) {
            let (i, _) = entries.slot(
                raw,
                binary,
                stamp,
                BranchStack::addrs(a),
                None,
                newer,
                &mut translate,
            );
            *note = i as u32;
        }
        misses == entries.misses || found.distinct()
    }

    /// One walk over an LBR-only window (see [`count_lbr`](Self::count_lbr)): adds `weight` to
    /// its branches and ranges if given, else measures it.
    #[inline(always)]
    fn walk_lbr(
        &mut self,
        process: &ProcessView<'_>,
        mut branches: impl Iterator<Item = (u64, u64)>,
        weight: Option<u64>,
    ) -> LbrWindow {
        let stamp = process.stamp();
        let binary = self.binary;
        let (cache, entries) = (&mut self.cache, &mut self.entries);
        let raw = &mut self.samples.raw;
        let mut translate = |a: u64| cache.translate(binary, process, stamp, RuntimeAddr(a));
        let mut window = LbrWindow::default();
        // The raw source of the entry before (0 before the first), and whether it is external.
        let mut before = (0, false);
        // The source of the newer entry kept.
        let mut newer_source = Vaddr::EXTERNAL.0;
        while let Some(a) = branches.next() {
            let b = branches.next();
            let newer = (newer_source, before.0);
            let (i, s) = entries.slot(raw, binary, stamp, a, b, newer, &mut translate);
            let flags = s.flags;
            newer_source = s.newer_after;
            match weight {
                Some(n) => {
                    window.entries += u64::from(s.kept);
                    if flags & EntrySlot::COUNTED != 0 {
                        entries.add_at(i, n);
                    }
                }
                None => window.measure(binary, s, before),
            }
            before = match b {
                Some(b) => (b.0, flags & EntrySlot::B_FROM_EXTERNAL != 0),
                None => (a.0, false),
            };
        }
        window
    }
}

/// What a walk over an LBR-only window measured.
#[derive(Default)]
struct LbrWindow {
    /// Entries kept (not external at both ends).
    entries: u64,
    /// Ranges in the binary with start <= end, and the instructions they span.
    k: usize,
    span: u64,
    /// Instructions run outside the binary (libc, the loader): part of the window's span.
    external: u64,
}

impl LbrWindow {
    /// Adds what the window's slot `s` measures, after the slots before it: `before` is the raw
    /// source of the entry before (0 for the first) and whether it is external.
    #[inline(always)]
    fn measure(&mut self, binary: &Binary, s: &EntrySlot, before: (u64, bool)) {
        let flags = s.flags;
        if before.1 && flags & EntrySlot::A_TO_EXTERNAL != 0 {
            self.external += external_span(s.a.1, before.0);
        }
        // No overflow: a slot adds at most 2^15 (a window would need 2^49 entries).
        self.external += u64::from(s.between);
        // Summed for every slot: one with no entry's target in the binary has no range.
        self.entries += u64::from(s.kept);
        self.k += usize::from(s.ranges);
        let span = match s.span {
            EntrySlot::UNKNOWN => s.count_span(binary),
            n => u64::from(n),
        };
        self.span = self.span.wrapping_add(span);
    }
}

/// The slots of an LBR-only window's entries, as probing found them (LBRs hold at most 32
/// entries; windows of more than `2 * MAX` are walked).
struct FoundSlots {
    slots: [u32; Self::MAX],
    n: usize,
}

impl Default for FoundSlots {
    fn default() -> Self {
        FoundSlots { slots: [0; Self::MAX], n: 0 }
    }
}

impl FoundSlots {
    const MAX: usize = 64;

    /// Whether no slot is noted twice (a slot taken over later in the window replaced what the
    /// window found in it before).
    fn distinct(&self) -> bool {
        let slots = &self.slots[..self.n.min(Self::MAX)];
        slots.iter().enumerate().all(|(j, i)| !slots[..j].contains(i))
    }
}

/// The cycle weights of `s` when windows are weighted by cycles (else nothing).
fn cycle_weights(w: Weighting, s: &Sample<'_>) -> CycleWeights {
    match w {
        Weighting::Cycles => CycleWeights::of(s.branches.cycles(), s.repeat),
        _ => CycleWeights::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Branch;
    use crate::binary::{InstKind, LoadOptions};
    use crate::input::BranchStack;
    use crate::mapping::{AddressMapper, BinaryIdentity, file_name_of};

    /// Call-stack samples that differ only in where in plain code their leaf IP lies are held as
    /// one (normalising replaces the leaf by the newest branch target); a prolog leaf and an
    /// external one stay apart; and holding them gives what reducing each at once gives.
    /// The fixture binary, a map that reads addresses as its vaddrs, and its instructions.
    fn fixture() -> (Binary, AddressMapper, Vec<Vaddr>) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/binary/prog_nopie");
        let binary = Binary::load(&path, &LoadOptions::default()).unwrap();
        let identity = BinaryIdentity {
            build_id: binary.build_id().map(<[u8]>::to_vec),
            file_name: file_name_of(binary.path()),
            segments: binary.segments().to_vec(),
        };
        let mut mapper = AddressMapper::for_perf_script(identity, None);
        mapper.assume_preferred_base();
        let insts: Vec<Vaddr> = binary.insts_in(Vaddr(0), Vaddr(u64::MAX)).collect();
        (binary, mapper, insts)
    }

    type CountsByPair = Vec<((Vaddr, Vaddr), u64)>;

    fn sorted(mut counts: CountsByPair) -> CountsByPair {
        counts.sort();
        counts
    }

    /// Counts the LBR-only window `branches` twice, weighted by instructions: the branch and
    /// range counts (sorted) and the range weights. The first sample takes over its slots, the
    /// second finds them.
    fn lbr_only_window_counted_twice(
        binary: &Binary,
        mapper: &AddressMapper,
        branches: &[Branch<RuntimeAddr>],
    ) -> (CountsByPair, CountsByPair, RangeWeights) {
        let branches: Vec<_> = branches.iter().map(|&b| BranchStack::entry(b, 0)).collect();
        let opts = SampleOptions { weighting: Weighting::Instructions, ..Default::default() };
        let mut agg = Aggregator::new(binary, opts);
        for _ in 0..2 {
            agg.add(mapper.map(), &Sample::with_stacks(&[], &branches));
        }
        let (samples, stats) = agg.finish();
        assert_eq!((stats.read, stats.used), (2, 2));
        let counts =
            |m: &HashMap<(Vaddr, Vaddr), u64>| sorted(m.iter().map(|(&k, &n)| (k, n)).collect());
        (counts(&samples.raw.branches), counts(&samples.raw.ranges), samples.weights)
    }

    /// A window of four entries, newest first, the third external to external, the others
    /// between the fixture's instructions.
    fn four_entries(insts: &[Vaddr]) -> [Branch<RuntimeAddr>; 4] {
        let at = |i: usize| RuntimeAddr(insts[i].0);
        [
            Branch { source: at(5), target: at(6) },
            Branch { source: at(2), target: at(3) },
            Branch { source: RuntimeAddr(0x10), target: RuntimeAddr(0x20) },
            Branch { source: at(1), target: at(0) },
        ]
    }

    /// An LBR-only window counts its branches with an internal target and the ranges between
    /// the entries it keeps (an external-to-external entry is dropped, so the entries around it
    /// meet), each by the window's weight: here 1/6 (two ranges of three instructions).
    #[test]
    fn lbr_only_windows_count_branches_and_ranges_by_their_weight() {
        let (binary, mapper, insts) = fixture();
        let (branches, ranges, weights) =
            lbr_only_window_counted_twice(&binary, &mapper, &four_entries(&insts));
        let w = 2 * (super::super::weighting::ONE / 6);
        let pair = |a: usize, b: usize| (insts[a], insts[b]);
        assert_eq!(branches, sorted(vec![(pair(5, 6), w), (pair(2, 3), w), (pair(1, 0), w)]));
        assert_eq!(ranges, sorted(vec![(pair(0, 2), w), (pair(3, 5), w)]));
        assert_eq!(weights, RangeWeights { plain: 4, weighted: 2 * u128::from(w) });
    }

    /// The same with an odd window, whose last entry takes a slot alone, and the
    /// external-to-external entry second, in the slot of the first: here 1/8 (ranges of three,
    /// three and two instructions).
    #[test]
    fn lbr_only_windows_of_odd_length_count_their_last_entry() {
        let (binary, mapper, insts) = fixture();
        let at = |i: usize| RuntimeAddr(insts[i].0);
        let branches = [
            Branch { source: at(5), target: at(6) },
            Branch { source: RuntimeAddr(0x10), target: RuntimeAddr(0x20) },
            Branch { source: at(2), target: at(3) },
            Branch { source: at(1), target: at(0) },
            Branch { source: at(6), target: at(0) },
        ];
        let (branches, ranges, weights) =
            lbr_only_window_counted_twice(&binary, &mapper, &branches);
        let w = 2 * (super::super::weighting::ONE / 8);
        let pair = |a: usize, b: usize| (insts[a], insts[b]);
        let want = vec![(pair(5, 6), w), (pair(2, 3), w), (pair(1, 0), w), (pair(6, 0), w)];
        assert_eq!(branches, sorted(want));
        assert_eq!(ranges, sorted(vec![(pair(3, 5), w), (pair(0, 2), w), (pair(0, 1), w)]));
        assert_eq!(weights, RangeWeights { plain: 6, weighted: 3 * u128::from(w) });
    }

    /// A window of more slots than [`FoundSlots`] holds is walked, measuring as it goes, and
    /// walked again to count: the same counts as a window that fits, whose slots are probed and
    /// then measured (here the first test's window repeated 32 and 33 times: 64 and 66 slots;
    /// the range from a repeat's first target back to the repeat before is reversed: no span,
    /// but the map keeps it).
    #[test]
    fn lbr_only_windows_past_the_found_slots_count_alike() {
        let (binary, mapper, insts) = fixture();
        let repeat = four_entries(&insts);
        for n in [32, 33] {
            let window: Vec<_> = repeat.iter().cycle().take(4 * n as usize).copied().collect();
            let (branches, ranges, weights) =
                lbr_only_window_counted_twice(&binary, &mapper, &window);
            // Two samples, each of 2n ranges of three instructions.
            let w = super::super::weighting::ONE / (6 * n);
            let pair = |a: usize, b: usize| (insts[a], insts[b]);
            let each = 2 * n * w;
            assert_eq!(
                branches,
                sorted(vec![(pair(5, 6), each), (pair(2, 3), each), (pair(1, 0), each)])
            );
            let want = vec![(pair(0, 2), each), (pair(3, 5), each), (pair(6, 1), 2 * (n - 1) * w)];
            assert_eq!(ranges, sorted(want));
            let k = 4 * u128::from(n);
            assert_eq!(weights, RangeWeights { plain: k, weighted: k * u128::from(w) });
        }
    }

    #[test]
    fn samples_differing_in_a_plain_leaf_are_held_as_one() {
        let (binary, mapper, insts) = fixture();
        let plain: Vec<Vaddr> =
            insts.iter().copied().filter(|&a| !binary.is_prolog_or_epilog(a)).take(2).collect();
        let prolog = insts.iter().copied().find(|&a| binary.is_prolog_or_epilog(a)).unwrap();
        let ret = insts.windows(2).find(|w| binary.inst_kind(w[0]) == Some(InstKind::Call));
        let ret = ret.unwrap()[1];
        let branch = Branch { source: RuntimeAddr(plain[0].0), target: RuntimeAddr(plain[1].0) };
        let branches = [BranchStack::entry(branch, 0)];
        let aggregate = |bypass: u64| {
            let mut agg = Aggregator::new(&binary, SampleOptions::default());
            agg.pending.bypass = bypass;
            for leaf in [plain[0], plain[1], prolog, Vaddr(0x10)] {
                let callchain = [leaf.0.to_le_bytes(), ret.0.to_le_bytes()];
                let s = Sample {
                    ip: RuntimeAddr(leaf.0),
                    ..Sample::with_stacks(&callchain, &branches)
                };
                agg.add(mapper.map(), &s);
            }
            let held = (agg.pending.samples, agg.pending.held.len());
            agg.flush(mapper.map());
            let (samples, stats) = agg.finish();
            let mut entries: Vec<(Vec<u8>, u64)> =
                samples.entries().into_iter().map(|(k, n)| (k.to_vec(), n)).collect();
            entries.sort();
            (held, entries, stats)
        };
        let (held, entries, stats) = aggregate(0);
        assert_eq!(held, (4, 3));
        assert_eq!((stats.read, stats.used), (4, 4));
        let (at_once, entries_at_once, stats_at_once) = aggregate(u64::MAX);
        assert_eq!(at_once, (0, 0));
        assert_eq!((entries, stats), (entries_at_once, stats_at_once));
    }

    /// Keys of every size (empty, and longer than a chunk) are kept across chunks and shards, and
    /// maps merge to the summed counts of every key, whichever map is larger.
    #[test]
    fn stored_keys_merge_to_summed_counts() {
        let key = |i: usize| -> Vec<u8> {
            let len = match i % 50 {
                0 => 0,
                1 => KeyShard::CHUNK + i,
                _ => i % 300,
            };
            (0..len).map(|j| (i * 7 + j) as u8).collect()
        };
        let mut want: std::collections::BTreeMap<Vec<u8>, u64> = Default::default();
        let mut maps: Vec<AggregatedSamples> = Vec::new();
        for (m, (from, to, step)) in
            [(0, 3000, 1), (1500, 9000, 2), (0, 400, 7)].into_iter().enumerate()
        {
            let mut worker = AggregatedSamples::default();
            for i in (from..to).step_by(step) {
                let n = (i + m) as u64;
                worker.add(&key(i), n);
                worker.add(&key(i), 1);
                *want.entry(key(i)).or_default() += n + 1;
            }
            maps.push(worker);
        }
        let mut all = AggregatedSamples::default();
        for m in maps {
            all.merge(m);
        }
        all.merge_worker_maps();
        assert_eq!(all.len(), want.len());
        let got: std::collections::BTreeMap<Vec<u8>, u64> =
            all.entries().into_iter().map(|(k, n)| (k.to_vec(), n)).collect();
        assert_eq!(got, want);
    }

    /// Held samples taken past the limit and reduced by another aggregator (a worker, under the
    /// same map), or held there with the worker's own samples first, count as they count reduced
    /// where they were held.
    #[test]
    fn held_samples_handed_off_count_as_reduced_where_held() {
        let (binary, mapper, insts) = fixture();
        let plain: Vec<Vaddr> =
            insts.iter().copied().filter(|&a| !binary.is_prolog_or_epilog(a)).collect();
        let ret = insts.windows(2).find(|w| binary.inst_kind(w[0]) == Some(InstKind::Call));
        let ret = ret.unwrap()[1];
        // Hand-offs: none, reduced as they come, or held with the worker's samples.
        let run = |hand_off: Option<bool>| {
            let mut agg = Aggregator::new(&binary, SampleOptions::default());
            if hand_off.is_some() {
                agg = agg.handing_off_held();
                agg.pending.limit = 40;
            }
            let mut worker = Aggregator::new(&binary, SampleOptions::default());
            if hand_off == Some(true) {
                worker = worker.reducing_held_in_parts();
                worker.pending.limit = 60;
            }
            let map = mapper.map();
            let mut handed = 0;
            // Each sample three times in a row: enough alike that holding is not bypassed; every
            // fifth one the worker's.
            for (n, i) in (0..240).map(|i| i / 3 % 23).enumerate() {
                let (from, to) = (plain[i % plain.len()], plain[(i + 1) % plain.len()]);
                let branches = [BranchStack::entry(
                    Branch { source: RuntimeAddr(from.0), target: RuntimeAddr(to.0) },
                    0,
                )];
                let callchain = [plain[0].0.to_le_bytes(), ret.0.to_le_bytes()];
                let sample = Sample::with_stacks(&callchain, &branches);
                if n % 5 == 4 {
                    worker.add(map, &sample);
                } else {
                    agg.add(map, &sample);
                }
                let Some(held) = agg.take_held() else { continue };
                handed += 1;
                if hand_off == Some(false) {
                    worker.reduce_held(map, &held);
                    continue;
                }
                let mut from = 0;
                while from < held.distinct() {
                    from = worker.hold_from(&held, from);
                    if let Some(past) = worker.take_held() {
                        worker.reduce_held(map, &past);
                        worker.reuse(past);
                    }
                }
            }
            agg.flush(map);
            worker.flush(map);
            let (mut samples, mut stats) = agg.finish();
            let (worker_samples, worker_stats) = worker.finish();
            samples.merge(worker_samples);
            stats.merge(&worker_stats);
            samples.merge_worker_maps();
            let mut entries: Vec<(Vec<u8>, u64)> =
                samples.entries().into_iter().map(|(k, n)| (k.to_vec(), n)).collect();
            entries.sort();
            (handed, entries, stats, samples.weights)
        };
        let unhanded = run(None);
        for hand_off in [false, true] {
            let (handed, entries, stats, weights) = run(Some(hand_off));
            assert!(handed >= 2, "handed off {handed} times");
            assert_eq!((0, entries, stats, weights), unhanded);
        }
    }

    /// A stack that two workers of one input counted is one distinct stack with the summed count,
    /// whichever worker saw it (the summary's distinct stacks and the unwinder's warnings count
    /// per stack: `tests/fleet.rs` saw 273 or 196 distinct stacks at two threads before).
    #[test]
    fn stacks_counted_by_several_workers_are_one_distinct_stack() {
        let mut all = AggregatedSamples::default();
        for n in [2, 3] {
            let mut worker = AggregatedSamples::default();
            worker.add(b"stack", n);
            worker.add(if n == 2 { b"other" } else { b"third" }, 1);
            all.merge(worker);
        }
        assert_eq!(all.len(), 4);
        all.merge_worker_maps();
        assert_eq!(all.len(), 3);
        let mut entries = all.entries();
        entries.sort();
        assert_eq!(entries, [(&b"other"[..], 1), (&b"stack"[..], 5), (&b"third"[..], 1)]);
    }

    /// A stack that several workers counted is scaled to the run unit as one count (each count is
    /// rounded), so the profile does not depend on the thread count.
    #[test]
    fn counts_split_over_workers_round_like_one_count() {
        let scaled = |parts: &[u64]| {
            let mut all = AggregatedSamples::default();
            for &n in parts {
                let mut worker = AggregatedSamples::default();
                worker.add(b"stack", n);
                all.merge(worker);
            }
            // A third of the run unit per count: 2 -> 43690.67, 4 -> 87381.33.
            all.weights = RangeWeights { plain: 1, weighted: 3 };
            all.to_run_unit(Weighting::Cycles);
            all.entries().into_iter().map(|(_, n)| n).collect::<Vec<_>>()
        };
        assert_eq!(scaled(&[4]), [87381]);
        assert_eq!(scaled(&[2, 2]), [87381]);
    }
}
