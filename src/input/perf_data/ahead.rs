//! The first reorder window of an input without rounds, walked in two parts. Without rounds
//! nothing is released before [`NO_ROUNDS_WINDOW`] bytes are queued, so the workers have nothing
//! to do while the reading thread walks the window's records one header after the next (a chain
//! of cache misses: each record's size gives the next one's place). An idle worker walks the
//! records from past the window's first half meanwhile ([`WalkAhead::walk`]): it finds a record
//! there by the headers chaining up from it, and notes each record's time, size and placeable
//! attr (what queueing it reads), in chunks. The reading thread, on reaching that record exactly,
//! queues the noted records without reading them; past it without reaching it (a guess off its
//! chain), it walks on alone. Records found from a place on the reading thread's own chain are
//! the ones it would have found, read as it would have read them, so what is queued, released
//! and counted late is the same.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use super::bytes::u16_at;
use super::decode::Decoder;
use super::order::NO_ROUNDS_WINDOW;

/// What queueing a record reads of it ([`Decoder::walked`]).
#[derive(Clone, Copy)]
pub(super) struct WalkedRecord {
    pub time: u64,
    pub len: u16,
    /// Its attr if it is a sample that can be handed out by its place.
    pub placed: Option<u16>,
}

/// Records walked, from `start` on, one after the other.
struct Chunk {
    start: usize,
    records: Vec<WalkedRecord>,
}

/// Records noted at a time: a worker looks for a batch between chunks (~0.1 ms apart).
const CHUNK: usize = 1024;
/// Records from a place whose headers must chain up (a size that is a multiple of 8 and a
/// record with a time, each) for it to be taken as a record's start.
const CHAIN: usize = 32;
/// How far past its start the walk goes at most (its notes take ~2% of the bytes walked).
const WALK_LIMIT: usize = 2 * NO_ROUNDS_WINDOW;
/// Inputs smaller than this are not walked in two parts.
const MIN_DATA: usize = 4 << 20;

/// The records of an input walked ahead of the reading thread by another thread (see the
/// module doc): shared by the reading thread's decode and the workers.
pub struct WalkAhead<'a> {
    /// A decoder with the header's attrs, read by the one thread that walks.
    decoder: Decoder<'a>,
    /// A thread has begun the walk.
    taken: AtomicBool,
    bytes: &'a [u8],
    data: Range<usize>,
    /// Where the walk looks for its first record.
    from: usize,
    /// The attrs `decoder` knows: a reading thread that has met others takes nothing.
    attrs: usize,
    /// The walk's first record (0 until found).
    start: AtomicUsize,
    chunks: Mutex<VecDeque<Chunk>>,
    stop: AtomicBool,
}

impl<'a> WalkAhead<'a> {
    /// A walk of the records in `data` of `bytes` from about half their first reorder window
    /// on, with `decoder` (the header's state), if the data section is large enough.
    pub(super) fn new(decoder: Decoder<'a>, bytes: &'a [u8], data: Range<usize>) -> Option<Self> {
        (data.len() >= MIN_DATA).then(|| WalkAhead {
            attrs: decoder.walk_state().1,
            decoder,
            taken: AtomicBool::new(false),
            bytes,
            from: data.start + data.len().min(NO_ROUNDS_WINDOW) / 2,
            data,
            start: AtomicUsize::new(0),
            chunks: Mutex::new(VecDeque::new()),
            stop: AtomicBool::new(false),
        })
    }

    /// Walks the records ahead of the reading thread, a chunk at a time while `go_on()` says
    /// so and the reading thread has not stopped it; only the first call walks.
    pub fn walk(&self, go_on: impl Fn() -> bool) {
        if self.taken.swap(true, Relaxed) || self.stop.load(Relaxed) {
            return;
        }
        let decoder = &self.decoder;
        let Some(mut pos) = self.find_start(decoder) else { return };
        self.start.store(pos, Relaxed);
        let limit = pos + WALK_LIMIT;
        while pos < limit && !self.stop.load(Relaxed) && go_on() {
            let start = pos;
            let mut records = Vec::with_capacity(CHUNK);
            while records.len() < CHUNK
                && let Some(r) = self.record_at(decoder, pos)
            {
                pos += usize::from(r.len);
                records.push(r);
            }
            let last = records.len() < CHUNK;
            if !records.is_empty()
                && let Ok(mut chunks) = self.chunks.lock()
            {
                chunks.push_back(Chunk { start, records });
            }
            if last {
                break;
            }
        }
    }

    /// The first place from `from` on (in steps of 8 bytes from the data's start, as records
    /// lie) from which [`CHAIN`] records chain up, within a record's greatest size.
    fn find_start(&self, decoder: &Decoder<'_>) -> Option<usize> {
        let chains = |mut pos| {
            for _ in 0..CHAIN {
                let r = self.record_at(decoder, pos)?;
                pos += usize::from(r.len);
            }
            Some(())
        };
        let from = self.from - (self.from - self.data.start) % 8;
        (from..from + (1 << 16)).step_by(8).find(|&pos| chains(pos).is_some())
    }

    /// What queueing the record at `pos` reads, if a whole record whose size is a multiple of 8
    /// lies there and it is queued.
    fn record_at(&self, decoder: &Decoder<'_>, pos: usize) -> Option<WalkedRecord> {
        let size = usize::from(u16_at(self.bytes, pos + 6)?);
        if size < 8 || size % 8 != 0 || pos + size > self.data.end {
            return None;
        }
        decoder.walked(&self.bytes[pos..pos + size])
    }

    /// The reading thread's next look: the input position at which it may take walked records
    /// (`None`: none yet), or that it will not take any (after stopping the walk).
    pub(super) fn start(&self) -> Option<usize> {
        Some(self.start.load(Relaxed)).filter(|&s| s > 0)
    }

    /// Where the walk begins looking for its first record.
    pub(super) fn from(&self) -> usize {
        self.from
    }

    /// Ends the walk: the reading thread takes no more.
    pub(super) fn stop(&self) {
        self.stop.store(true, Relaxed);
    }

    /// Whether `decoder`, the reading thread's, is in the state the records were walked with.
    pub(super) fn matches(&self, decoder: &Decoder<'_>) -> bool {
        decoder.walk_state() == (true, self.attrs)
    }

    /// The walked records from `pos`, the reading thread's position, if a chunk starts there.
    pub(super) fn take(&self, pos: usize) -> Option<Vec<WalkedRecord>> {
        let mut chunks = self.chunks.lock().ok()?;
        let chunk = chunks.pop_front().filter(|c| c.start == pos)?;
        Some(chunk.records)
    }

    /// Chunks walked and not taken.
    #[cfg(test)]
    pub(super) fn chunks_left(&self) -> usize {
        self.chunks.lock().map_or(0, |c| c.len())
    }
}
