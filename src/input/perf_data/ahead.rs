//! Records of an input without rounds walked ahead of the reading thread by an idle worker.
//! Without rounds nothing is released before [`NO_ROUNDS_WINDOW`] bytes are queued, and then
//! nothing again until the window's released half is queued anew, so the workers have nothing to
//! do while the reading thread walks those records one header after the next (a chain of cache
//! misses: each record's size gives the next one's place). An idle worker walks the records
//! ahead of it meanwhile ([`WalkAhead::walk`]): it finds a record there by the headers chaining
//! up from it, and notes each record's time, size and placeable attr (what queueing it reads),
//! in chunks. The reading thread, on reaching the first of a chunk exactly, queues the noted
//! records without reading them; past it without reaching it (a guess off its chain, or a chunk
//! it outran), it walks on alone, and the worker starts again further ahead. Records found from
//! a place on the reading thread's own chain are the ones it would have found, read as it would
//! have read them, so what is queued, released and counted late is the same. A record that is not
//! queued (a round's end, a record without a time) ends the walk for good: an input with rounds
//! sends batches all along.

use std::collections::VecDeque;
use std::ops::Range;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use super::CONSUMED_STEP;
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
/// How far past where it starts the walk goes at most (its notes take ~2% of the bytes walked).
const WALK_LIMIT: usize = 2 * NO_ROUNDS_WINDOW;
/// Inputs smaller than this are not walked ahead.
const MIN_DATA: usize = 4 << 20;

/// The walking thread's place.
#[derive(Default)]
struct Walker {
    /// The next record on its chain (0: none found yet).
    pos: usize,
    /// Where it stops: [`WALK_LIMIT`] past where it started.
    limit: usize,
    /// It met a record that is not queued, or found no chain: it walks no more.
    ended: bool,
}

/// The records of an input walked ahead of the reading thread by another thread (see the
/// module doc): shared by the reading thread's decode and the workers.
pub struct WalkAhead<'a> {
    /// A decoder with the header's attrs, read by the one thread that walks.
    decoder: Decoder<'a>,
    /// Held by the thread walking.
    walker: Mutex<Walker>,
    bytes: &'a [u8],
    data: Range<usize>,
    /// Where the first walk looks for its first record.
    from: usize,
    /// The attrs `decoder` knows: a reading thread that has met others takes nothing.
    attrs: usize,
    chunks: Mutex<VecDeque<Chunk>>,
    stop: AtomicBool,
}

impl<'a> WalkAhead<'a> {
    /// A walk of the records in `data` of `bytes`, first from about half their first reorder
    /// window on, with `decoder` (the header's state), if the data section is large enough.
    pub(super) fn new(decoder: Decoder<'a>, bytes: &'a [u8], data: Range<usize>) -> Option<Self> {
        (data.len() >= MIN_DATA).then(|| WalkAhead {
            attrs: decoder.walk_state().1,
            decoder,
            walker: Mutex::new(Walker::default()),
            bytes,
            from: data.start + data.len().min(NO_ROUNDS_WINDOW) / 2,
            data,
            chunks: Mutex::new(VecDeque::new()),
            stop: AtomicBool::new(false),
        })
    }

    /// Walks a chunk of records before `until`, on from where the last walk ended, or (none yet,
    /// or the reading thread, which reported `read`, is about to pass it) from the first record
    /// found two of its reporting steps past `read` (and past the first window's half): it looks
    /// for walked records where it reports, so it could pass one found nearer unseen. Returns
    /// whether it walked; `false` once the walk has ended or the reading thread has stopped it,
    /// or while another thread walks.
    pub fn walk(&self, read: usize, until: usize) -> bool {
        let Ok(mut w) = self.walker.try_lock() else { return false };
        if w.ended || self.stop.load(Relaxed) {
            return false;
        }
        let decoder = &self.decoder;
        let from = (read + 2 * CONSUMED_STEP).max(self.from);
        if w.pos < from {
            let Some(start) = self.find_start(decoder, from) else {
                w.ended = true;
                return false;
            };
            (w.pos, w.limit) = (start, start + WALK_LIMIT);
        }
        let (start, end) = (w.pos, until.min(w.limit));
        if start >= end {
            return false;
        }
        let mut records = Vec::with_capacity(CHUNK);
        let mut pos = start;
        while records.len() < CHUNK && pos < end {
            let Some(r) = self.record_at(decoder, pos) else {
                w.ended = true;
                break;
            };
            pos += usize::from(r.len);
            records.push(r);
        }
        w.pos = pos;
        if !records.is_empty()
            && let Ok(mut chunks) = self.chunks.lock()
        {
            chunks.push_back(Chunk { start, records });
        }
        true
    }

    /// The first place from `from` on (in steps of 8 bytes from the data's start, as records
    /// lie) from which [`CHAIN`] records chain up, within a record's greatest size.
    fn find_start(&self, decoder: &Decoder<'_>, from: usize) -> Option<usize> {
        let chains = |mut pos| {
            for _ in 0..CHAIN {
                let r = self.record_at(decoder, pos)?;
                pos += usize::from(r.len);
            }
            Some(())
        };
        let from = from - (from - self.data.start) % 8;
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

    /// Where the first walked chunk at or past `pos`, the reading thread's position, starts (the
    /// chunks before it, passed, are dropped).
    pub(super) fn next_start(&self, pos: usize) -> Option<usize> {
        let mut chunks = self.chunks.lock().ok()?;
        while chunks.front().is_some_and(|c| c.start < pos) {
            chunks.pop_front();
        }
        chunks.front().map(|c| c.start)
    }

    /// Whether the walk may walk on (it has not ended, nor been stopped).
    pub fn live(&self) -> bool {
        !self.stop.load(Relaxed) && self.walker.try_lock().map_or(true, |w| !w.ended)
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
        chunks.front().filter(|c| c.start == pos)?;
        chunks.pop_front().map(|c| c.records)
    }

    /// Chunks walked and not taken.
    #[cfg(test)]
    pub(super) fn chunks_left(&self) -> usize {
        self.chunks.lock().map_or(0, |c| c.len())
    }
}
