//! Time ordering the way perf script delivers events (perf's `ordered_events`): perf writes each
//! CPU's buffer in turn, so file order is not time order. Timed records are queued (copied into
//! one reused arena, so nothing is allocated per record once it has grown); at each
//! FINISHED_ROUND the records up to the newest timestamp of the *previous* round are released in
//! time order, because a round can still hold records older than its own newest ones. Records of
//! an in-memory input are queued by position instead of copied.
//!
//! Without rounds (perf before 2.6.35, recorders that never flush per CPU) perf sorts the whole
//! file; holding it all would keep a 1 GB file resident. Until a first round shows up, the queue
//! is a bounded reorder window instead: past [`NO_ROUNDS_WINDOW`] bytes its older half (by time)
//! is released. A file in time order comes out exactly as perf script orders it; a record older
//! than one already released ("late") is delivered with the next release, and counted so that the
//! reader can say time order was approximate.

use super::bytes::{Loc, prefetch_lines, u64_at};

/// Past this much queued data without a usable round the queue is released early (perf's
/// ordered_events does the same when it runs out of its memory budget).
pub(super) const ARENA_LIMIT: usize = 256 << 20;

/// Heap bytes of copied records (from a stream or compressed data, with their [`Loc`] and
/// entry) past which the queue is released early like past [`ARENA_LIMIT`]: copies cost the
/// process about four times their bytes (arena and spare, grown by doubling), so 256 MiB of
/// copied 16-byte samples, which the records of one 23 KB compressed record inflate to, took
/// over 1.4 GB of address space.
pub(super) const COPIED_LIMIT: usize = 64 << 20;

/// Queued bytes past which an input without rounds releases its older half (see the module doc).
pub(super) const NO_ROUNDS_WINDOW: usize = 32 << 20;

/// Bytes of a record's start that [`TimeOrder::prefetch`] loads ahead of decoding it.
const PREFETCHED_LEN: usize = 192;
/// How many records ahead of the one being released its lines are prefetched.
pub(super) const PREFETCH_RECORDS: usize = 4;

/// A queued record. Small, since releases sort the queue and move what stays: records with
/// equal timestamps keep their arrival order by the sort's stability (the records still queued
/// from earlier rounds lie before the newer ones, in order), not by a sequence number; and a
/// record's [`Loc`] is its input position, or lies in the arena before the record.
struct Queued {
    time: u64,
    start: usize,
    len: u16,
    /// Whether `start` indexes the caller's input rather than the arena.
    in_input: bool,
    /// The attr of a sample to be handed out by its place once placing is on, found when it was
    /// queued (its header lines hot from reading its time), so that its release reads nothing of
    /// it again; `None`: any other record, or one to be checked at release.
    placed: Option<u16>,
}

/// Bytes before each record in the arena: its [`Loc`], as the offset, then 0 (no decompressed
/// offset) or 1 and the decompressed offset.
const ARENA_LOC: usize = 24;

/// The heap bytes a copied record of `len` bytes takes queued: its copy, its [`Loc`], its entry.
fn copied_size(len: usize) -> usize {
    ARENA_LOC + len + std::mem::size_of::<Queued>()
}

fn loc_bytes(loc: Loc) -> [u8; ARENA_LOC] {
    let mut b = [0; ARENA_LOC];
    b[..8].copy_from_slice(&loc.offset.to_le_bytes());
    if let Some(d) = loc.decompressed {
        b[8] = 1;
        b[16..].copy_from_slice(&d.to_le_bytes());
    }
    b
}

fn loc_from(b: &[u8]) -> Loc {
    let word = |at| u64_at(b, at).unwrap_or(0);
    Loc { offset: word(0), decompressed: (word(8) == 1).then(|| word(16)) }
}

#[derive(Default)]
pub(super) struct TimeOrder {
    queue: Vec<Queued>,
    /// Whether the queued records may be out of time order (a record came older than the
    /// newest one queued before it): else the sort is skipped, a stable sort of records in
    /// order leaving them as they are.
    unsorted: bool,
    /// Whether the queue was sorted since it was last empty: else its records from the input
    /// are in file order, as queued.
    reordered: bool,
    arena: Vec<u8>,
    spare: Vec<u8>,
    next_flush: u64,
    max_time: u64,
    /// Bytes of all queued records, copied or not (bounds both memory and the input range that
    /// must stay mapped).
    queued_len: usize,
    /// Heap bytes the queued copies take (see [`COPIED_LIMIT`]).
    copied_len: usize,
    /// The lowest input position a queued record points into: kept as records come and go,
    /// since the reader asks for it every MiB read and the queue holds thousands of records.
    oldest_in_input: Option<usize>,
    /// Whether the queue has had to be released early (warned about once).
    pub(super) overflowed: bool,
    /// Whether a FINISHED_ROUND has been seen (else the queue is a bounded window).
    pub(super) rounds: bool,
    /// The newest time released so far by the window, and how many records came in older.
    released_time: u64,
    pub(super) late: u64,
    /// Queued samples placed before this input position are checked again at release (the
    /// attrs changed after they were queued): placed samples lie in the input, queued in file
    /// order, so forgetting is one store, not a pass over the queue per attr record.
    placed_from: usize,
    /// The end of the last record queued from the input.
    input_end: usize,
}

impl TimeOrder {
    /// Queues `rec` (at most 64 KiB, its size being a u16); `input_pos` is its position in the
    /// input when it lies there (not copied), and then `loc` is that position; `placed` is the
    /// attr of a sample to be handed out by its place ([`placed`](Self::placed)).
    #[inline]
    pub(super) fn push(
        &mut self,
        time: u64,
        rec: &[u8],
        input_pos: Option<usize>,
        loc: Loc,
        placed: Option<u16>,
    ) {
        let (in_input, start) = match input_pos {
            Some(pos) => {
                debug_assert!(loc.offset == pos as u64 && loc.decompressed.is_none());
                self.oldest_in_input = Some(self.oldest_in_input.map_or(pos, |o| o.min(pos)));
                (true, pos)
            }
            None => {
                self.arena.extend_from_slice(&loc_bytes(loc));
                self.arena.extend_from_slice(rec);
                self.copied_len += copied_size(rec.len());
                (false, self.arena.len() - rec.len())
            }
        };
        if time < self.released_time {
            self.late += 1;
        }
        if in_input {
            self.input_end = self.input_end.max(start + rec.len());
        }
        self.queue.push(Queued { time, start, len: rec.len() as u16, in_input, placed });
        self.queued_len += rec.len();
        // Every record queued (or released) is at most `max_time` old.
        if time < self.max_time {
            self.unsorted = true;
        } else {
            self.max_time = time;
        }
    }

    /// Sorts the queued records by time, stably (records of equal time in arrival order), unless
    /// they are in order.
    fn sort(&mut self) {
        if std::mem::take(&mut self.unsorted) {
            self.reordered = true;
            self.queue.sort_by_key(|q| q.time);
        }
    }

    /// The lowest input position a queued record still points into.
    pub(super) fn oldest_input_pos(&self) -> Option<usize> {
        self.oldest_in_input
    }

    pub(super) fn queued_bytes(&self) -> usize {
        self.queued_len
    }

    /// Whether the queue is past the reorder window (without rounds), [`ARENA_LIMIT`] or
    /// [`COPIED_LIMIT`]: some records are to be released now
    /// ([`window_limit`](Self::window_limit)).
    #[inline]
    pub(super) fn past_limits(&self) -> bool {
        (!self.rounds && self.queued_len > NO_ROUNDS_WINDOW)
            || self.queued_len > ARENA_LIMIT
            || self.copied_len > COPIED_LIMIT
    }

    pub(super) fn copied_bytes(&self) -> usize {
        self.copied_len
    }

    /// At a FINISHED_ROUND: the limit up to which records may be released now.
    pub(super) fn end_round(&mut self) -> u64 {
        self.rounds = true;
        std::mem::replace(&mut self.next_flush, self.max_time)
    }

    /// Without rounds, once the window is full: the time up to which the older half of the
    /// queued bytes lies (records at that time included), remembered for counting late records.
    pub(super) fn window_limit(&mut self) -> Option<u64> {
        if self.rounds || self.queued_len <= NO_ROUNDS_WINDOW {
            return None;
        }
        self.sort();
        let mut bytes = 0;
        let half = self.queue.iter().position(|q| {
            bytes += usize::from(q.len);
            bytes >= self.queued_len / 2
        })?;
        let limit = self.queue[half].time;
        self.released_time = self.released_time.max(limit);
        Some(limit)
    }

    /// Sorts the queue (stably: records of equal time in arrival order) and returns how many
    /// records (from the front) have `time <= limit` (all of them without a limit).
    pub(super) fn ready(&mut self, limit: Option<u64>) -> usize {
        self.sort();
        match limit {
            Some(limit) => self.queue.partition_point(|q| q.time <= limit),
            None => self.queue.len(),
        }
    }

    /// The `i`th queued record, with its position when it lies in `input` (the input that
    /// `push` positions refer to).
    pub(super) fn get<'s>(&'s self, input: &'s [u8], i: usize) -> (&'s [u8], Option<usize>, Loc) {
        let q = &self.queue[i];
        let end = q.start + usize::from(q.len);
        if q.in_input {
            let rec = input.get(q.start..end).unwrap_or_default();
            return (rec, Some(q.start), Loc::plain(q.start as u64));
        }
        let rec = self.arena.get(q.start..end).unwrap_or_default();
        let loc = self.arena.get(q.start - ARENA_LOC..q.start).unwrap_or_default();
        (rec, None, loc_from(loc))
    }

    /// The `i`th queued record's input position, attr and size if it was queued as a sample to
    /// be handed out by its place.
    #[inline]
    pub(super) fn placed(&self, i: usize) -> Option<(usize, u16, u16)> {
        let q = &self.queue[i];
        self.placed_attr(q).map(|attr| (q.start, attr, q.len))
    }

    /// `q`'s attr if it is still to be handed out by its place.
    #[inline]
    fn placed_attr(&self, q: &Queued) -> Option<u16> {
        q.placed.filter(|_| q.start >= self.placed_from)
    }

    /// The attrs or layouts changed: the samples queued so far are checked again at release.
    pub(super) fn forget_placed(&mut self) {
        self.placed_from = self.input_end;
    }

    /// Prefetches the first lines of the `i`th queued record (its fixed fields and, in the usual
    /// layouts, the counts of its call chain and branch stack), if there is one and its release
    /// reads it (not a sample handed out by place while `placing`): released in time order,
    /// records are read out of file order, long after their header was.
    #[inline]
    pub(super) fn prefetch(&self, input: &[u8], i: usize, placing: bool) {
        let read = |q: &&Queued| !placing || self.placed_attr(q).is_none();
        if let Some(q) = self.queue.get(i).filter(read) {
            let from = if q.in_input { input } else { &self.arena };
            prefetch_lines(from, q.start..q.start + usize::from(q.len).min(PREFETCHED_LEN));
        }
    }

    /// Drops the first `n` (released) records and compacts the arena around the rest.
    pub(super) fn retire(&mut self, n: usize) {
        for q in &self.queue[..n] {
            self.queued_len -= usize::from(q.len);
            if !q.in_input {
                self.copied_len -= copied_size(usize::from(q.len));
            }
        }
        self.queue.drain(..n);
        self.reordered &= !self.queue.is_empty();
        if self.copied_len == 0 && !self.reordered {
            // Nothing copied is left to compact, and the records left are in file order: the
            // first is the oldest in the input (a pass over the thousands left took a round's
            // release ~6 instructions a record).
            self.arena.clear();
            self.oldest_in_input = self.queue.first().map(|q| q.start);
            return;
        }
        self.spare.clear();
        self.oldest_in_input = None;
        for q in self.queue.iter_mut() {
            if q.in_input {
                self.oldest_in_input =
                    Some(self.oldest_in_input.map_or(q.start, |o| o.min(q.start)));
                continue;
            }
            self.spare
                .extend_from_slice(&self.arena[q.start - ARENA_LOC..q.start + usize::from(q.len)]);
            q.start = self.spare.len() - usize::from(q.len);
        }
        std::mem::swap(&mut self.arena, &mut self.spare);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The oldest queued input position, kept as records are queued and retired, is the lowest
    /// position of the records still queued (copied records count for nothing), after releases
    /// that keep records from anywhere in the input.
    #[test]
    fn oldest_input_position_is_the_lowest_still_queued() {
        let input = vec![0u8; 64 * 40];
        let mut order = TimeOrder::default();
        let scan = |o: &TimeOrder| o.queue.iter().filter(|q| q.in_input).map(|q| q.start).min();
        // Rounds of 8 records in input order whose times interleave with the next round's; every
        // third is a copy (as from compressed data).
        let mut seen = Vec::new();
        for round in 0..5u64 {
            for i in 0..8u64 {
                let pos = (round * 8 + i) as usize * 64;
                let time = 1000 + round * 50 + (i * 37) % 80;
                let rec = &input[pos..pos + 64];
                if i % 3 == 2 {
                    order.push(
                        time,
                        rec,
                        None,
                        Loc { offset: 0, decompressed: Some(pos as u64) },
                        None,
                    );
                } else {
                    order.push(time, rec, Some(pos), Loc::plain(pos as u64), None);
                }
                assert_eq!(order.oldest_input_pos(), scan(&order));
            }
            let limit = order.end_round();
            let n = order.ready(Some(limit));
            order.retire(n);
            assert_eq!(order.oldest_input_pos(), scan(&order));
            seen.push(order.oldest_input_pos());
        }
        assert_eq!(seen, [0, 9, 17, 25, 33].map(|r| Some(r * 64)));
        let n = order.ready(None);
        order.retire(n);
        assert_eq!(order.oldest_input_pos(), None);

        // In time order and none copied (retire takes the first left), then a round out of
        // order (it scans the queue until it is empty again).
        let mut order = TimeOrder::default();
        for round in 0..5u64 {
            for i in 0..8u64 {
                let pos = (round * 8 + i) as usize * 64;
                let time = match round {
                    3 => 1000 + round * 50 + (i * 37) % 80,
                    _ => 1000 + round * 50 + i * 10,
                };
                order.push(time, &input[pos..pos + 64], Some(pos), Loc::plain(pos as u64), None);
            }
            let limit = order.end_round();
            let n = order.ready(Some(limit));
            order.retire(n);
            assert_eq!(order.oldest_input_pos(), scan(&order));
        }
        let n = order.ready(None);
        order.retire(n);
        assert_eq!(order.oldest_input_pos(), None);
    }

    /// A sample queued to be handed out by its place comes back so, until the attrs change (an
    /// id may name another attr then): every queued record is then checked at release, also
    /// once sorted into time order.
    #[test]
    fn placed_samples_are_kept_until_the_attrs_change() {
        let input = [0u8; 64];
        let mut order = TimeOrder::default();
        order.push(1, &input[..16], Some(0), Loc::plain(0), Some(3));
        order.push(2, &input[16..32], Some(16), Loc::plain(16), None);
        assert_eq!((order.placed(0), order.placed(1)), (Some((0, 3, 16)), None));
        order.forget_placed();
        order.push(3, &input[32..48], Some(32), Loc::plain(32), Some(1));
        let placed: Vec<_> = (0..3).map(|i| order.placed(i)).collect();
        assert_eq!(placed, [None, None, Some((32, 1, 16))]);
        // Sorted into time order, each keeps what it was queued as.
        order.push(0, &input[48..64], Some(48), Loc::plain(48), Some(2));
        assert_eq!(order.ready(None), 4);
        let placed: Vec<_> = (0..4).map(|i| order.placed(i)).collect();
        assert_eq!(placed, [Some((48, 2, 16)), None, None, Some((32, 1, 16))]);
    }

    /// Rounds release what a stable sort of everything queued releases, in that order, whether
    /// the records come in time order (no sort) or not.
    #[test]
    fn rounds_release_what_a_sort_of_the_queue_does() {
        let input = [0u8; 8];
        let round = 1003;
        let check = |times: &dyn Fn(u64) -> u64| {
            let mut order = TimeOrder::default();
            // (time, arrival) of the records queued, by the old way: sort all, release a prefix.
            let (mut model, mut model_max, mut model_flush) = (Vec::new(), 0, 0);
            let released = |order: &mut TimeOrder, limit: Option<u64>, model: &mut Vec<_>| {
                model.sort_by_key(|&(t, _)| t);
                let n = order.ready(limit);
                let want = limit.map_or(model.len(), |l| model.partition_point(|&(t, _)| t <= l));
                assert_eq!(n, want);
                for (i, (t, arrival)) in model.drain(..n).enumerate() {
                    assert_eq!(order.queue[i].time, t);
                    assert_eq!(order.get(&input, i).2.offset, arrival);
                }
                order.retire(n);
            };
            for k in 0..5 * round {
                let time = times(k);
                order.push(time, &input, None, Loc::plain(k), None);
                model.push((time, k));
                model_max = model_max.max(time);
                if k % round == round - 1 {
                    let limit = order.end_round();
                    assert_eq!(limit, std::mem::replace(&mut model_flush, model_max));
                    released(&mut order, Some(limit), &mut model);
                }
            }
            released(&mut order, None, &mut model);
            assert!(order.queue.is_empty() && model.is_empty());
        };
        // In time order, two records a time.
        check(&|k| k / 2);
        // Out of order within a round, each round overlapping the one before.
        check(&|k| (k % 1000) * 7 % 1000 + k / 1000 * 500);
    }
}
