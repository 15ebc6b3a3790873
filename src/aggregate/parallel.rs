//! Parallel aggregation of one input stream: the reading thread finds the records, orders them and
//! tracks mappings (all inherently sequential), and hands the samples to worker threads in
//! batches; the workers translate addresses and count distinct samples into their own maps,
//! merged at the end. A sample whose record lies in the mapped file is handed out by position
//! ([`Sample::record`]): the reading thread only checks its layout and notes where its call chain
//! and branch stack lie, and the worker reads them in place ([`SampleBodies`]), so the per-entry
//! work is spread over the workers. Once the mapper defers its events, a sample whose fields lie
//! at fixed offsets and fill its record is handed out by its place alone ([`PlacedHead`]): the
//! reading thread reads only its stacks' counts and queues such samples a run at a time, the
//! worker reads the whole sample. Other samples
//! (compressed records, streams, perf script) are copied into the batch.
//!
//! Every worker keeps its own copy of the address map and replays the reading thread's mapper's
//! log ([`MapStep`]s, shared) up to the point where each sample was read, so the result equals a
//! sequential run's whatever the scheduling, and a change costs what it changes (not a copy of
//! the whole map: a system-wide recording maps thousands of processes). Once a sample has landed
//! in the binary the mapper defers its events (see [`AddressMapper::defer_events`]): the copies
//! apply them, so that with many processes the mapping is not the reading thread's work (it
//! still matches each mmap event against the binary, once for all the copies).
//!
//! The reading thread aggregates the batches the channel has no room for itself, so that
//! `--threads N` is N threads (the reader and N - 1 workers) that never wait while there is work.
//! It takes only batches read under one state of the map (no change between their samples),
//! which is the state of its mapper's map when the batch is full, and reduces its held samples
//! before its map changes ([`BatchSender::before_change`]); once the mapper defers events, that
//! state is the reading thread's own copy, caught up from the log then. A batch with changes
//! waits for room in the channel instead (with many processes, replaying every change into a
//! copy of the reader's own made two threads slower than one). The samples it holds past its
//! limit go to a worker, which holds them with its own and reduces each distinct one once
//! ([`BatchSender::hand_off`]), read under the map at their log position like a batch. Once it
//! has read the input, it aggregates the batches still queued beside the workers, and its last
//! ones the channel had no room for, under a copy of a worker's map ([`CopyRequest`]), after a
//! share of the held samples that worker was reducing ([`Lump`]).
//!
//! Memory stays bounded: the channel holds at most two batches per thread, and the log drops
//! the changes every copy of the map has applied. The reader keeps the pages of records handed
//! out by position until their batch is aggregated ([`NeededInput`]), and only those: a batch
//! ends once its records span [`BATCH_SPAN`] bytes of input, and a batch a worker is slow on (one
//! that reduces its held samples) keeps its own span mapped, not all the input read after it.
//! A worker without a batch maps the input the reading thread is about to read, a few MiB ahead
//! ([`NeededInput::populate_ahead`]): the kernel's part of the reading thread's work. In a file
//! without rounds it also walks the records there ([`SampleBodies::walk_ahead`]): the reading
//! thread sends none while it queues a reorder window's half (16 MiB), and before the first batch
//! (32 MiB) the worker walks past the window's half first.

use super::samples::{AggregatedSamples, Aggregator, HeldSamples, SampleOptions, SampleStats};
use crate::addr::RuntimeAddr;
use crate::binary::Binary;
use crate::input::perf_data::{PageReleaser, SampleBodies, WalkAhead};
use crate::input::{BranchStack, CallChain, Deferred, PlacedSample, RawBranch, RawWord, Sample};
use crate::mapping::{AddressMap, AddressMapper, MapStep};
use std::collections::VecDeque;
use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex};

/// Samples per batch: large enough to make channel traffic negligible.
const BATCH_SAMPLES: usize = 4096;
/// Samples the first batch holds: the workers wait for it (a full batch took the reading thread
/// about a twentieth of a 100,000-process input), so it is small, and each next one may hold
/// twice as many, up to [`BATCH_SAMPLES`].
const FIRST_BATCH_SAMPLES: usize = 256;
/// Input a batch's records handed out by position may span before the batch is sent: the pages
/// the reader keeps mapped for it (at 1 MiB a batch holds about a thousand 900-byte LBR +
/// call-stack records, still far beyond the channel's cost).
const BATCH_SPAN: usize = 1 << 20;
/// Samples a batch holds before its span can end it: time order interleaves the per-CPU buffers
/// of a round, so consecutive samples may lie a round apart in the input (whose pages the reorder
/// queue holds anyway); without a floor, a multi-CPU recording's batches would be a few samples.
const MIN_SPAN_BATCH_SAMPLES: usize = 256;
/// Steps of the mapper's log a batch holds before it is sent: an input of many processes logs
/// a few per sample, and a vector of steps past 1 MiB would be a fresh mapping per batch (see
/// [`crate::aggregate::read::map_large_allocations`]), its pages faulted in by the reading thread.
const BATCH_STEPS: usize = (1 << 19) / size_of::<MapStep>();
/// Batches the channel holds per thread: enough for the reader to run ahead of a worker's batch.
const QUEUED_PER_THREAD: usize = 2;

/// Whether a batch of `len` samples whose records span `span` bytes of input, filled while the
/// mapper logged `steps` steps, is to be sent: it holds `limit` samples, spans enough input, or
/// holds enough steps.
#[inline(always)]
fn sends(limit: usize, len: usize, span: usize, steps: usize) -> bool {
    // The steps first: the same for every sample of a run.
    steps >= BATCH_STEPS || len >= limit || (len >= MIN_SPAN_BATCH_SAMPLES && span >= BATCH_SPAN)
}

/// The fixed-size part of a sample; its call chain and branches follow in the batch's
/// shared vectors, or (`record`) lie in the input, for the worker to read in place.
struct SampleHead {
    record: Option<Deferred>,
    pid: Option<i32>,
    tid: Option<i32>,
    ip: RuntimeAddr,
    period: u64,
    repeat: u64,
    has_callchain: bool,
    callchain_len: u32,
    branches_len: u32,
    /// How many of the batch's steps of the log come before it.
    steps: u32,
}

/// A sample handed out by its place alone ([`PerfEvent::Placed`](crate::input::PerfEvent::Placed)):
/// the worker reads it whole ([`SampleBodies::sample`]).
#[derive(Clone, Copy)]
struct PlacedHead {
    record: usize,
    attr: u16,
    /// The record's size.
    len: u16,
    /// As [`SampleHead::steps`].
    steps: u32,
}

/// A batch holds samples of one kind: all [`PlacedHead`]s, or all [`SampleHead`]s.
#[derive(Default)]
struct Batch {
    heads: Vec<SampleHead>,
    placed: Vec<PlacedHead>,
    callchains: Vec<RawWord>,
    branches: Vec<RawBranch>,
    /// The log position at which the batch starts: changes before it are in the shared log.
    log_start: u64,
    /// The mapper's log while the batch was filled (shared with the [`ChangeLog`]); each sample
    /// says how many of these came before it ([`SampleHead::steps`], [`PlacedHead::steps`]).
    changes: Arc<Vec<MapStep>>,
    /// Sequence number, and the input its records handed out by position lie in (see
    /// [`InFlight`]).
    seq: u64,
    span: Option<Range<usize>>,
    /// Samples the reading thread held, read under the map at `log_start`, for the worker to
    /// hold with its own and reduce (see [`BatchSender::hand_off`]).
    held: Option<HeldSamples>,
}

/// The emptied vectors of aggregated batches, for the reading thread's next batches: freed by a
/// worker and allocated afresh, they were handed back to the system in between and faulted in
/// again by the reading thread (with many processes, over a third of the run's page faults).
#[derive(Default)]
struct Spares {
    heads: Vec<Vec<SampleHead>>,
    placed: Vec<Vec<PlacedHead>>,
    steps: Vec<Vec<MapStep>>,
}

/// Spare vectors of each kind kept: the reading thread takes one per batch.
const SPARES: usize = 2;

impl Spares {
    /// Keeps the vectors of `batch`, aggregated, if there is room (the steps once no other
    /// batch or copy of the map holds them).
    fn keep(&mut self, batch: Batch) {
        let Batch { mut heads, mut placed, changes, .. } = batch;
        if self.heads.len() < SPARES && heads.capacity() > 0 {
            heads.clear();
            self.heads.push(heads);
        }
        if self.placed.len() < SPARES && placed.capacity() > 0 {
            placed.clear();
            self.placed.push(placed);
        }
        if self.steps.len() < SPARES
            && let Some(mut steps) = Arc::into_inner(changes)
            && steps.capacity() > 0
        {
            steps.clear();
            self.steps.push(steps);
        }
    }
}

/// The batches handed out by position and not yet aggregated: `(seq, span)`.
type InFlight = Mutex<Vec<(u64, Range<usize>)>>;

/// A record starts at most this far before the end of the input it lies in (its size is a u16).
const MAX_RECORD: usize = 1 << 16;

/// The input that samples handed out by position still need (the batch being filled and the
/// batches not yet aggregated), and how far the reading thread has read. The pages before that
/// and outside those spans are dropped by whichever thread finishes a batch (so that the reading
/// thread, the one that cannot be split, does not spend its time unmapping them), and by the
/// reading thread itself when no batch has done so for [`DROP_BACKSTOP`] bytes. Dropping a page
/// still needed (the spans are read without a lock) costs only mapping it again: the file's bytes
/// are unchanged.
pub struct NeededInput {
    /// `(start, end)` of the batch being filled (`start == end`: none), written by the reading
    /// thread alone. The two loads of a thread dropping pages are not ordered with the stores,
    /// so it may miss the span for one drop: the dropped pages are then faulted back in from
    /// the file when the batch is read (see [`PageReleaser`]), a cost, never a wrong byte.
    open: (AtomicUsize, AtomicUsize),
    in_flight: InFlight,
    /// Every record before this input position is queued or handed out.
    consumed: AtomicUsize,
    /// `consumed` when pages were last dropped.
    dropped_at: AtomicUsize,
    /// Every record before this input position has been read.
    read: AtomicUsize,
    /// The input before this is mapped ahead of the reading thread (see
    /// [`populate_ahead`](Self::populate_ahead)).
    populated: AtomicUsize,
    /// The length of the input (0: not known).
    len: usize,
    /// A batch has been sent: a worker walks the input ahead of the reading thread
    /// ([`SampleBodies::walk_ahead`]) only as far as it is mapped from then on.
    batched: AtomicBool,
}

/// Input left to read below which the workers hold fewer samples ([`Aggregator::hold_less`]):
/// what a worker holds when the input ends it reduces alone while the reading thread waits (up
/// to 16 MiB of raw words: 5-16 ms on Lua CS, SQLite CS and LBR + call-stack inputs), whereas
/// the reduction of what it holds on entering this stretch overlaps the reading of it.
const ENDING: usize = 16 << 20;

/// Input read between two drops of pages by the threads that finish batches: each drop
/// interrupts the other cores running the process (their TLBs are flushed), so not after every
/// batch; but each step's pages stay resident until the next (the reading thread reports how far
/// it has consumed every 1 MiB).
const DROP_STEP: usize = 1 << 20;
/// Input past the reading thread's position that an idle worker maps ahead of it: the reading
/// thread sends batches only when a round ends, so a worker done with them maps the next rounds
/// while the reading thread walks them (pages it would map a little later anyway: lbr's peak RSS
/// is unchanged).
const POPULATE_AHEAD: usize = 8 << 20;
/// Input an idle worker maps at a time before it looks for a batch again.
const POPULATE_STEP: usize = 1 << 20;
/// How long a worker with nothing to do waits for a batch before it looks at the input again
/// while the walk ahead is on (the reading thread reads ~1 MiB meanwhile).
const WALK_POLL: std::time::Duration = std::time::Duration::from_micros(500);

/// Input read since pages were last dropped past which the reading thread drops them itself:
/// inputs with few samples finish few batches.
const DROP_BACKSTOP: usize = 8 << 20;

impl NeededInput {
    /// Nothing read yet of an input of `len` bytes (0: not known).
    fn new(len: usize) -> Self {
        NeededInput {
            open: (AtomicUsize::new(0), AtomicUsize::new(0)),
            in_flight: InFlight::default(),
            consumed: AtomicUsize::new(0),
            dropped_at: AtomicUsize::new(0),
            read: AtomicUsize::new(0),
            populated: AtomicUsize::new(0),
            len,
            batched: AtomicBool::new(false),
        }
    }

    /// Sets `out` to the spans of input still needed.
    fn spans(&self, out: &mut Vec<Range<usize>>) {
        out.clear();
        let (start, end) = (self.open.0.load(Relaxed), self.open.1.load(Relaxed));
        if start < end {
            out.push(start..end);
        }
        if let Ok(in_flight) = self.in_flight.lock() {
            out.extend(in_flight.iter().map(|(_, span)| span.clone()));
        }
    }

    /// The reading thread has read the records before `read`, and every record before `upto` is
    /// queued or handed out; the pages no sample needs are dropped by the threads that finish
    /// batches, or here when none has for a while.
    pub fn consumed(&self, upto: usize, read: usize, pages: &PageReleaser<'_>) {
        self.consumed.store(upto, Relaxed);
        self.read.store(read, Relaxed);
        self.drop_pages(pages, DROP_BACKSTOP, &mut Vec::new());
    }

    /// Drops the pages before `consumed` that no batch needs, if the reading thread has read
    /// `step` bytes since pages were last dropped (`spans` is scratch space).
    fn drop_pages(&self, pages: &PageReleaser<'_>, step: usize, spans: &mut Vec<Range<usize>>) {
        let upto = self.consumed.load(Relaxed);
        if upto.saturating_sub(self.dropped_at.load(Relaxed)) < step {
            return;
        }
        self.spans(spans);
        if pages.release_before_except(upto, spans) {
            self.dropped_at.fetch_max(upto, Relaxed);
        }
    }

    /// Maps the next [`POPULATE_STEP`] of input within [`POPULATE_AHEAD`] of the reading thread,
    /// unless mapped already: the kernel's work of the reading thread's page faults (a quarter of
    /// its time on LBR-only input, where the worker waits for it), done by a worker that has no
    /// batch. Returns whether there was any to map.
    fn populate_ahead(&self, pages: &PageReleaser<'_>) -> bool {
        let read = self.read.load(Relaxed);
        let populated = self.populated.load(Relaxed);
        let from = populated.max(read);
        let to = (read + POPULATE_AHEAD).min(self.len);
        if from >= to {
            return false;
        }
        let end = to.min(from + POPULATE_STEP);
        // Another worker took this step: look again.
        if self.populated.compare_exchange(populated, end, Relaxed, Relaxed).is_ok() {
            pages.populate(from..end);
        }
        true
    }

    /// Walks a chunk of the records ahead of the reading thread ([`WalkAhead::walk`]): before
    /// the first batch as far as the walk goes, then only within the input mapped ahead of it
    /// (the walk faults in no page of its own: the peak RSS stays). Returns whether it walked.
    fn walk_ahead(&self, walk: &WalkAhead<'_>) -> bool {
        let until = match self.batched.load(Relaxed) {
            true => self.populated.load(Relaxed),
            false => usize::MAX,
        };
        walk.walk(self.read.load(Relaxed), until)
    }

    fn set_open(&self, span: &Range<usize>) {
        self.open.1.store(span.end, Relaxed);
        self.open.0.store(span.start, Relaxed);
    }

    fn clear_open(&self) {
        self.open.0.store(0, Relaxed);
        self.open.1.store(0, Relaxed);
    }

    /// Whether less than [`ENDING`] of the input is left to read.
    fn ending(&self) -> bool {
        self.len > 0 && self.len - self.consumed.load(Relaxed).min(self.len) < ENDING
    }

    /// Batch `seq` is aggregated: its span is no longer needed.
    fn done(&self, seq: u64) {
        if let Ok(mut in_flight) = self.in_flight.lock() {
            in_flight.retain(|&(s, _)| s != seq);
        }
    }
}

/// The reading thread's mapper's log (map changes, and the events it defers), in order, that
/// some copy of the map has not applied yet.
struct ChangeLog {
    /// Position (counted from the start of the input) of the first step of `chunks[0]`.
    first: u64,
    /// The steps, in the vectors the batches that were filled with them hold.
    chunks: VecDeque<Arc<Vec<MapStep>>>,
    /// How far each copy of the map has applied the log: the workers', then the reading
    /// thread's (`u64::MAX` while it keeps none).
    applied: Vec<u64>,
}

impl ChangeLog {
    /// Drops the steps every copy has applied.
    fn trim(&mut self) {
        let done = self.applied.iter().copied().min().unwrap_or(0);
        while let Some(c) = self.chunks.front()
            && self.first + c.len() as u64 <= done
        {
            self.first += c.len() as u64;
            self.chunks.pop_front();
        }
    }

    /// The steps from log position `from` to `to`.
    fn steps(&self, from: u64, to: u64) -> impl Iterator<Item = &MapStep> {
        let all = self.chunks.iter().flat_map(|c| c.iter());
        all.skip((from - self.first) as usize).take((to - from) as usize)
    }
}

/// How far the reading thread's copy of the map (`BatchSender::copy`) may fall behind the
/// log before it is dropped: the log keeps what the copy has not applied.
const READER_LAG: u64 = 1 << 12;

/// A copy of the address map (a mapper replaying the log) and how far it has replayed the log.
struct Replica {
    mapper: AddressMapper,
    /// Its entry in [`ChangeLog::applied`].
    worker: usize,
    applied: u64,
}

impl Replica {
    /// Brings the map up to log position `to` with steps other batches made, first reducing
    /// `agg`'s held samples under the map they were read with; `records` reads the events
    /// logged by position.
    fn catch_up(
        &mut self,
        agg: &mut Aggregator<'_>,
        log: &Mutex<ChangeLog>,
        to: u64,
        records: Option<&SampleBodies<'_>>,
    ) {
        if self.applied >= to {
            return;
        }
        agg.flush(self.mapper.map());
        // A poisoned lock means another thread panicked; the scope re-raises that panic.
        let Ok(mut log) = log.lock() else { return };
        for step in log.steps(self.applied, to) {
            self.mapper.replay(step, records);
        }
        self.applied = to;
        log.applied[self.worker] = to;
    }
}

impl Batch {
    /// Its samples (of either kind).
    fn len(&self) -> usize {
        self.heads.len() + self.placed.len()
    }

    /// Aggregates the batch into `agg`, first bringing `replica` up to the batch's start, then
    /// replaying the batch's changes between its samples. Answers `request` first, and again
    /// before each sample and between the parts of the held samples it reduces ([`reduce_held`]:
    /// `replica` is the map at its log position at each of these points).
    fn aggregate_into(
        &self,
        agg: &mut Aggregator<'_>,
        replica: &mut Replica,
        log: &Mutex<ChangeLog>,
        bodies: &mut Option<SampleBodies<'_>>,
        request: Option<&CopyRequest<'_>>,
    ) {
        let reduce = |agg: &mut Aggregator<'_>, replica: &Replica, all| {
            reduce_held(agg, replica, request, log, all);
        };
        // All of them if the map is to change (`catch_up` would reduce them at once).
        reduce(agg, replica, self.log_start > replica.applied);
        replica.catch_up(agg, log, self.log_start, bodies.as_ref());
        if let Some(held) = &self.held {
            // Held with this thread's samples (read under the same map), each reduced once: a
            // stack both threads held was reduced by each (sqlite-cs at two threads: 25% more
            // distinct samples reduced than at one). Past the limit, those held are reduced
            // before the rest are held.
            let mut from = 0;
            while from < held.distinct() {
                from = agg.hold_from(held, from);
                reduce(agg, replica, false);
            }
        }
        let all = 0..self.len();
        if self.changes.is_empty() {
            let map = replica.mapper.map();
            self.add_samples(all, &mut (0, 0), agg, map, bodies, |agg| reduce(agg, replica, false));
            return;
        }
        // The samples up to each one that comes after steps, then those steps.
        let (mut next, mut at, mut applied) = (0, (0, 0), 0);
        // Of the one kind the batch holds.
        let placed = self.placed.iter().map(|h| h.steps);
        let steps_before = self.heads.iter().map(|h| h.steps).chain(placed).map(|s| s as usize);
        for (i, upto) in steps_before.chain([self.changes.len()]).enumerate() {
            if upto == applied {
                continue;
            }
            let map = replica.mapper.map();
            self.add_samples(next..i, &mut at, agg, map, bodies, |agg| reduce(agg, replica, false));
            next = i;
            reduce(agg, replica, true);
            for step in &self.changes[applied..upto] {
                replica.mapper.replay(step, bodies.as_ref());
            }
            replica.applied += (upto - applied) as u64;
            applied = upto;
        }
        let (rest, map) = (next..self.len(), replica.mapper.map());
        self.add_samples(rest, &mut at, agg, map, bodies, |agg| reduce(agg, replica, false));
        if let Ok(mut log) = log.lock() {
            // Trimmed here, so that the steps are freed by this thread when it drops the batch
            // (unless another copy still needs them), not by the reading thread.
            log.applied[replica.worker] = replica.applied;
            log.trim();
        }
    }

    /// Adds samples `range` under `map`, calling `between` before each; `at` is where the first
    /// one's call chain and branches start in the batch's vectors, moved past the last one's.
    fn add_samples(
        &self,
        range: Range<usize>,
        at: &mut (usize, usize),
        agg: &mut Aggregator<'_>,
        map: &AddressMap,
        bodies: &mut Option<SampleBodies<'_>>,
        between: impl Fn(&mut Aggregator<'_>),
    ) {
        if let Some(bodies) = bodies.as_mut().filter(|_| !self.placed.is_empty()) {
            let place =
                |h: &PlacedHead| PlacedSample { record: h.record, attr: h.attr, len: h.len };
            bodies.read_placed(&self.placed[range], place, |s| {
                between(agg);
                agg.add(map, s);
            });
            return;
        }
        let (c, b) = at;
        for i in range {
            between(agg);
            let h = &self.heads[i];
            if let (Some(bodies), Some(d)) =
                (bodies.as_ref(), self.heads.get(i + 1).and_then(|n| n.record))
            {
                bodies.prefetch(&d);
            }
            let (cn, bn) = (h.callchain_len as usize, h.branches_len as usize);
            // Built once, with the stacks read in place or from the batch.
            let (callchain, branches) = match (bodies.as_mut(), &h.record) {
                (Some(bodies), Some(d)) => bodies.stacks(d),
                _ => (
                    CallChain(&self.callchains[*c..*c + cn]),
                    BranchStack(&self.branches[*b..*b + bn]),
                ),
            };
            let s = Sample {
                pid: h.pid,
                tid: h.tid,
                time: None,
                attr_index: 0,
                ip: h.ip,
                period: h.period,
                repeat: h.repeat,
                callchain,
                branches,
                has_callchain: h.has_callchain,
                record: None,
            };
            agg.add(map, &s);
            *c += cn;
            *b += bn;
        }
    }
}

/// The reading side: collects samples into batches and sends them to the workers, or aggregates
/// a batch itself when the channel has no room for it (see [`aggregate_in_parallel`]).
pub struct BatchSender<'b, 's> {
    tx: SyncSender<Batch>,
    batch: Batch,
    log: Arc<Mutex<ChangeLog>>,
    /// Log position after the steps taken so far.
    log_end: u64,
    /// The mapper defers its events (see [`AddressMapper::defer_events`]).
    deferring: bool,
    /// Once the mapper defers its events, the reading thread's own copy of its map, for the
    /// batches it aggregates itself: caught up from the log only then (few inputs change their
    /// maps after their first samples), and dropped once [`READER_LAG`] steps behind (an input
    /// of many processes changes its maps all along; its batches all have changes).
    copy: Option<Replica>,
    needed: Arc<NeededInput>,
    spares: Arc<Mutex<Spares>>,
    /// The input's pages, dropped once no batch needs them (with samples handed out by position).
    pages: Option<&'s PageReleaser<'s>>,
    /// The reading thread's own aggregation of the batches it finds no room for, under the
    /// reading thread's map.
    worker: Worker<'b, 's>,
    /// The reading thread's held samples, to go to the workers before any later batch.
    handoff: Option<Batch>,
    /// [`finish`](Self::finish) was called: from then on, a batch the channel has no room for
    /// goes to `left` instead of waiting for room.
    finished: bool,
    /// The last batches, left for this thread to aggregate once it has a copy of a worker's
    /// map, after the batches queued: waiting for room, it waited for a worker that could be
    /// in the middle of reducing a [`Lump`] it could have helped with.
    left: Vec<Batch>,
    /// The reading thread's entry in [`ChangeLog::applied`].
    reader: usize,
    /// Samples the batch being filled may hold (see [`FIRST_BATCH_SAMPLES`]).
    limit: usize,
    /// See [`placing`](Self::placing).
    placing: Option<Arc<AtomicBool>>,
}

/// What a thread that aggregates batches keeps (a worker thread, or the reading thread for the
/// batches it keeps): its aggregator and its reader of samples handed out by position.
struct Worker<'b, 's> {
    agg: Aggregator<'b>,
    bodies: Option<SampleBodies<'s>>,
    /// Scratch space for [`NeededInput::drop_pages`].
    spans: Vec<Range<usize>>,
}

impl Worker<'_, '_> {
    /// Aggregates `batch` under `replica`, a worker thread's copy of the map (see
    /// [`Batch::aggregate_into`]).
    fn aggregate(
        &mut self,
        batch: &Batch,
        (replica, request): (&mut Replica, Option<&CopyRequest<'_>>),
        log: &Mutex<ChangeLog>,
        needed: &NeededInput,
        pages: Option<&PageReleaser<'_>>,
    ) {
        batch.aggregate_into(&mut self.agg, replica, log, &mut self.bodies, request);
        self.done(batch, needed, pages);
    }

    /// Aggregates `batch`, read without a change of the map, under `map` as it was then.
    fn aggregate_unchanged(
        &mut self,
        batch: &Batch,
        map: &AddressMap,
        needed: &NeededInput,
        pages: Option<&PageReleaser<'_>>,
    ) {
        debug_assert!(batch.changes.is_empty());
        let all = 0..batch.len();
        batch.add_samples(all, &mut (0, 0), &mut self.agg, map, &mut self.bodies, |_| {});
        self.done(batch, needed, pages);
    }

    /// `batch` is aggregated: drops the input's pages no batch needs any more.
    fn done(&mut self, batch: &Batch, needed: &NeededInput, pages: Option<&PageReleaser<'_>>) {
        if batch.span.is_some() {
            needed.done(batch.seq);
            if let Some(pages) = pages {
                needed.drop_pages(pages, DROP_STEP, &mut self.spans);
            }
        }
    }
}

impl BatchSender<'_, '_> {
    /// Queues `s`, to be translated with the state of `mapper`'s map when `s` was read (the
    /// mapper must log its changes: [`AddressMapper::log_changes`]).
    pub fn add(&mut self, mapper: &mut AddressMapper, s: &Sample<'_>) {
        self.take_changes(mapper);
        // A batch holds one kind of sample.
        if !self.batch.placed.is_empty() {
            self.flush(mapper);
        }
        let b = &mut self.batch;
        b.heads.push(SampleHead {
            record: s.record,
            pid: s.pid,
            tid: s.tid,
            ip: s.ip,
            period: s.period,
            repeat: s.repeat,
            has_callchain: s.has_callchain,
            callchain_len: s.callchain.len() as u32,
            branches_len: s.branches.len() as u32,
            steps: mapper.changes_logged() as u32,
        });
        b.callchains.extend_from_slice(s.callchain.0);
        b.branches.extend_from_slice(s.branches.0);
        self.queued(mapper, s.record.map(|d| d.record));
    }

    /// Queues the samples of a [`PerfEvent::Placed`](crate::input::PerfEvent::Placed), as
    /// [`add`](Self::add) does a sample, in bulk: no step comes between them.
    pub fn add_placed(&mut self, mapper: &mut AddressMapper, run: &[PlacedSample]) {
        self.take_changes(mapper);
        if !self.batch.heads.is_empty() {
            self.flush(mapper);
        }
        let mut rest = run;
        while !rest.is_empty() {
            // As many as the batch takes before it is full (at least one).
            let steps = mapper.changes_logged();
            let b = &mut self.batch;
            let (mut start, mut end) =
                b.span.as_ref().map_or((usize::MAX, 0), |s| (s.start, s.end));
            let mut taken = 0;
            for p in rest {
                (start, end) = (start.min(p.record), end.max(p.record + MAX_RECORD));
                taken += 1;
                if sends(self.limit, b.placed.len() + taken, end - start, steps) {
                    break;
                }
            }
            let steps = steps as u32;
            let heads = rest[..taken].iter().map(|p| PlacedHead {
                record: p.record,
                attr: p.attr,
                len: p.len,
                steps,
            });
            b.placed.extend(heads);
            rest = &rest[taken..];
            let span = b.span.insert(start..end);
            self.needed.set_open(span);
            if self.full(mapper) {
                self.flush(mapper);
            }
        }
    }

    /// The sample just queued lies at `record` in the input, if there: notes its span, and sends
    /// the batch once full.
    #[inline(always)]
    fn queued(&mut self, mapper: &mut AddressMapper, record: Option<usize>) {
        let b = &mut self.batch;
        if let Some(pos) = record {
            let end = pos + MAX_RECORD;
            let span = b.span.get_or_insert(pos..end);
            *span = span.start.min(pos)..span.end.max(end);
            self.needed.set_open(span);
        }
        if self.full(mapper) {
            self.flush(mapper);
        }
    }

    /// Whether the batch is to be sent: it holds its limit of samples, spans enough input, or
    /// the mapper has logged enough steps.
    #[inline(always)]
    fn full(&self, mapper: &AddressMapper) -> bool {
        let b = &self.batch;
        let span = b.span.as_ref().map_or(0, Range::len);
        sends(self.limit, b.len(), span, mapper.changes_logged())
    }

    /// The flag that has a deferred decode hand samples out by place alone
    /// ([`PerfData::decode_in_time_order_deferred`](crate::input::perf_data::PerfData::decode_in_time_order_deferred)),
    /// set once the mapper defers its events: from then on a sample needs nothing of this
    /// thread's map. For a caller that filters no sample by its fields.
    pub fn placing(&mut self) -> Arc<AtomicBool> {
        self.placing.get_or_insert_default().clone()
    }

    /// Reduces the samples the reading thread holds under `map`, the mapper's map they were read
    /// under: to be called before anything that may change it.
    pub fn before_change(&mut self, map: &AddressMap) {
        self.worker.agg.flush(map);
    }

    /// Sends the last batch: `read` (see [`aggregate_in_parallel`]) ends with this, `mapper`
    /// having seen every event.
    pub fn finish(&mut self, mapper: &mut AddressMapper) {
        self.take_changes(mapper);
        self.finished = true;
        self.flush(mapper);
        // Not sent yet: the last batch had no change (see `flush`), so the map is still the one
        // they were read under, and the workers have the queued batches to aggregate. Once the
        // mapper defers events, that map is the reading thread's copy (if it dropped it, it
        // holds nothing).
        let map = self.copy.as_ref().map_or(mapper.map(), |c| c.mapper.map());
        if let Some(held) = self.handoff.take().and_then(|b| b.held) {
            self.worker.agg.reduce_held(map, &held);
        }
        self.worker.agg.flush(map);
    }

    /// What the samples handed out by position still need of the input.
    pub fn needed(&self) -> Arc<NeededInput> {
        self.needed.clone()
    }

    /// Counts the mapper's steps since the last sample as the batch's, before its next sample
    /// (the mapper keeps them until the batch is sent: see [`flush`](Self::flush)).
    #[inline(always)]
    fn take_changes(&mut self, mapper: &mut AddressMapper) {
        if mapper.defers_events() && !self.deferring {
            // It began deferring after the last sample it had a step before: its map is the
            // state at `log_end`, and stays so.
            self.deferring = true;
            if let Some(placing) = &self.placing {
                placing.store(true, Relaxed);
            }
            let copy = Replica { mapper: mapper.replica(), worker: self.reader, applied: 0 };
            self.copy = Some(Replica { applied: self.log_end, ..copy });
            if let Ok(mut log) = self.log.lock() {
                log.applied[self.reader] = self.log_end;
            }
        }
        self.log_end = self.batch.log_start + mapper.changes_logged() as u64;
    }

    /// Drops the reading thread's copy of the map once it is too far behind, reducing the
    /// samples held under it first.
    fn drop_lagging_copy(&mut self) {
        if let Some(copy) = self.copy.take_if(|c| self.log_end - c.applied > READER_LAG) {
            self.worker.agg.flush(copy.mapper.map());
            if let Ok(mut log) = self.log.lock() {
                log.applied[self.reader] = u64::MAX;
            }
        }
    }

    /// Sends the batch to the workers, with the steps `mapper` logged while it was filled (every
    /// one taken).
    fn flush(&mut self, mapper: &mut AddressMapper) {
        let steps = mapper.changes_logged();
        if self.batch.len() == 0 && steps == 0 {
            return;
        }
        let seq = self.batch.seq + 1;
        self.limit = (2 * self.limit).min(BATCH_SAMPLES);
        self.needed.batched.store(true, Relaxed);
        // Sized like the batch before: growing the vectors sample by sample cost about a tenth
        // of the reading thread's work per sample.
        let b = &self.batch;
        let (mut heads, mut placed) = match self.spares.lock() {
            Ok(mut s) => (s.heads.pop().unwrap_or_default(), s.placed.pop().unwrap_or_default()),
            Err(_) => Default::default(),
        };
        heads.reserve(b.heads.len());
        placed.reserve(b.placed.len());
        let next = Batch {
            heads,
            placed,
            callchains: Vec::with_capacity(b.callchains.len()),
            branches: Vec::with_capacity(b.branches.len()),
            log_start: self.log_end,
            seq,
            ..Batch::default()
        };
        let mut full = std::mem::replace(&mut self.batch, next);
        if let (Some(span), Ok(mut in_flight)) = (full.span.clone(), self.needed.in_flight.lock()) {
            in_flight.push((full.seq, span));
        }
        self.needed.clear_open();
        if steps > 0 {
            // The mapper logs the next batch's steps into a vector sized like this one's.
            let spare = self.spares.lock().ok().and_then(|mut s| s.steps.pop());
            let mut taken = spare.unwrap_or_default();
            taken.reserve(steps);
            mapper.take_changes(&mut taken);
            full.changes = Arc::new(taken);
            if let Ok(mut log) = self.log.lock() {
                log.trim();
                log.chunks.push_back(full.changes.clone());
            }
        }
        // Held samples handed off go before any batch with changes: they were read under the
        // map before those.
        if let Some(held) = self.handoff.take() {
            match self.tx.try_send(held) {
                Err(TrySendError::Full(held)) if full.changes.is_empty() => {
                    self.handoff = Some(held);
                }
                Err(TrySendError::Full(held)) => self.wait_to_send(held),
                _ => {}
            }
        }
        // A batch the channel has no room for is aggregated here when the map did not change
        // while it was read (every change is taken, so `map` is the state its samples were
        // read under): waiting for room would leave a core idle whenever a worker is not
        // running. A batch with changes waits ([`wait_to_send`](Self::wait_to_send)): this
        // thread keeps no map of the past. Once a batch is left (see `finish`), so is every
        // later one.
        let sent = match self.left.is_empty() {
            true => self.tx.try_send(full),
            false => Err(TrySendError::Full(full)),
        };
        match sent {
            Err(TrySendError::Full(full)) if full.changes.is_empty() => {
                // Once the mapper defers events, the map is the reading thread's copy, brought
                // up to `log_end` (if it keeps one).
                let mut copy = self.copy.take();
                let map = match &mut copy {
                    Some(c) => {
                        let records = self.worker.bodies.as_ref();
                        c.catch_up(&mut self.worker.agg, &self.log, self.log_end, records);
                        Some(c.mapper.map())
                    }
                    None => (!self.deferring).then(|| mapper.map()),
                };
                match map {
                    Some(map) => {
                        self.worker.aggregate_unchanged(&full, map, &self.needed, self.pages);
                        self.hand_off(map);
                        if let Ok(mut spares) = self.spares.lock() {
                            spares.keep(full);
                        }
                    }
                    None => self.wait_to_send(full),
                }
                self.copy = copy;
            }
            Err(TrySendError::Full(full)) => self.wait_to_send(full),
            _ => {}
        }
        self.drop_lagging_copy();
    }

    /// Sends `batch`, waiting for room in the channel, and meanwhile drops the input's pages that
    /// no batch needs (every [`DROP_STEP`] of input, as the workers do on finishing a batch):
    /// while the queued batches keep this thread waiting, the pages read since pile up (an input of many
    /// processes, whose batches all change the map, waited so at every batch once the workers
    /// had more to do than the reading thread). `send` fails only once every worker has ended,
    /// by a panic that the scope re-raises. Once [`finish`](Self::finish)ed, the batch is left
    /// for this thread instead ([`BatchSender::left`]).
    fn wait_to_send(&mut self, batch: Batch) {
        if self.finished {
            self.left.push(batch);
            return;
        }
        if let Some(pages) = self.pages {
            self.needed.drop_pages(pages, DROP_STEP, &mut self.worker.spans);
        }
        drop(self.tx.send(batch));
    }

    /// Hands the reading thread's held samples to the workers once past the limit, instead of
    /// reducing them here: that took it 15-30 ms on SQLite, during which it sent no batch and the
    /// workers, done with the queued ones, waited (a worker holds them with its own: see
    /// [`Batch::aggregate_into`]). They go at once if the channel has room, else before the next
    /// batch (see [`flush`](Self::flush)). The batch being filled has no change yet, so
    /// `log_end` and `map` are the state of the map they were read under; so are they for held
    /// samples not sent yet (a batch with changes sends them first).
    fn hand_off(&mut self, map: &AddressMap) {
        let Some(held) = self.worker.agg.take_held() else { return };
        // The workers have not taken the last ones yet: they have work enough.
        if let Some(earlier) = self.handoff.take().and_then(|b| b.held) {
            self.worker.agg.reduce_held(map, &earlier);
        }
        let batch = Batch { log_start: self.log_end, held: Some(held), ..Batch::default() };
        if let Err(TrySendError::Full(batch)) = self.tx.try_send(batch) {
            self.handoff = Some(batch);
        }
    }
}

/// The receiving end of the batches, shared by the workers; the last worker to end drops it, so
/// that a reader waiting for room (see [`BatchSender::flush`]) is not left waiting if the
/// workers panic.
type Batches = Mutex<Option<Receiver<Batch>>>;

/// Counts the workers running; the last one to end (returning or panicking) drops the receiver.
struct Running<'a> {
    count: &'a AtomicUsize,
    rx: &'a Batches,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if self.count.fetch_sub(1, Relaxed) == 1 {
            let mut rx = self.rx.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            drop(rx.take());
        }
    }
}

/// The reading thread's request, once it has read the input, for a copy of a worker's map to
/// aggregate the batches still queued with, beside the workers: with many processes every batch
/// changes the map, so it cannot take them with a map of its own, and a channel's worth of
/// batches was left to the workers while it waited for them to end (an eighth of a
/// 100,000-process run).
struct CopyRequest<'a> {
    wanted: &'a AtomicBool,
    /// Where the first worker to see `wanted` sends its copy; each worker drops its sender as it
    /// ends, so that the reading thread stops waiting when none is left to answer.
    to: SyncSender<Help>,
    /// The reading thread's entry in [`ChangeLog::applied`].
    reader: usize,
}

/// A worker's answer to a [`CopyRequest`]: a copy of its map, and the held samples it is
/// reducing under that map (if any), for the reading thread to take parts of first.
struct Help {
    copy: Replica,
    lump: Option<Arc<Lump>>,
}

impl CopyRequest<'_> {
    /// Sends a copy of `replica` if asked and not sent yet, with `lump`, held samples being
    /// reduced under it; the log keeps the steps after it for the copy. Called between a
    /// worker's samples (its map is exact at each) and between the parts of a lump, so that the
    /// reading thread waits for no more than a sample or a part.
    #[inline]
    fn answer(&self, replica: &Replica, log: &Mutex<ChangeLog>, lump: Option<&Arc<Lump>>) {
        if self.wanted.load(Relaxed) {
            self.send_copy(replica, log, lump);
        }
    }

    #[cold]
    fn send_copy(&self, replica: &Replica, log: &Mutex<ChangeLog>, lump: Option<&Arc<Lump>>) {
        if !self.wanted.swap(false, Relaxed) {
            return;
        }
        // Every copy's entry is at most `replica.applied` (its own), so nothing after it is
        // trimmed yet.
        let Ok(mut log) = log.lock() else { return };
        log.applied[self.reader] = replica.applied;
        drop(log);
        let copy = Replica {
            mapper: replica.mapper.replay_copy(),
            worker: self.reader,
            applied: replica.applied,
        };
        drop(self.to.try_send(Help { copy, lump: lump.cloned() }));
    }
}

/// Reduces the samples `agg` holds under `replica`'s map (all of them, or those past its limit),
/// in parts ([`Lump`]), answering `request` before each part, and before the next sample if
/// there are none. Inlined: a worker calls it before every sample and every step of the log (a
/// recording of many processes has a step or two per sample), mostly with nothing to reduce.
#[inline]
fn reduce_held(
    agg: &mut Aggregator<'_>,
    replica: &Replica,
    request: Option<&CopyRequest<'_>>,
    log: &Mutex<ChangeLog>,
    all: bool,
) {
    match if all { agg.take_all_held() } else { agg.take_held() } {
        Some(held) => reduce_lump(agg, replica, request, log, held),
        None => {
            if let Some(request) = request {
                request.answer(replica, log, None);
            }
        }
    }
}

#[inline(never)]
fn reduce_lump(
    agg: &mut Aggregator<'_>,
    replica: &Replica,
    request: Option<&CopyRequest<'_>>,
    log: &Mutex<ChangeLog>,
    held: HeldSamples,
) {
    let lump = Lump::new(held);
    lump.reduce_answering(agg, replica, request, log);
    if let Some(lump) = Arc::into_inner(lump) {
        agg.reuse(lump.held);
    }
}

/// A worker's held samples reduced in parts, by the worker (with its map in the state they were
/// read under) and, once it has read the input, by the reading thread with a copy of that map
/// ([`Help`]): a worker reduces up to 16 MiB of raw words at once (~25 ms on
/// LBR + call-stack input), and one that began shortly before the input's end kept the reading
/// thread waiting for it, a core idle, about one run in four.
struct Lump {
    held: HeldSamples,
    /// The first distinct held sample no thread has taken yet.
    next: AtomicUsize,
}

/// Distinct held samples taken from a [`Lump`] at a time (~0.1 ms of reducing).
const LUMP_PART: usize = 64;

impl Lump {
    fn new(held: HeldSamples) -> Arc<Lump> {
        Arc::new(Lump { held, next: AtomicUsize::new(0) })
    }

    /// Reduces parts of the lump into `agg` under `map` (the state its samples were read under)
    /// until no part is left, calling `between` before each.
    fn reduce(&self, agg: &mut Aggregator<'_>, map: &AddressMap, between: impl Fn()) {
        let len = self.held.distinct();
        loop {
            between();
            let from = self.next.fetch_add(LUMP_PART, Relaxed);
            if from >= len {
                return;
            }
            agg.reduce_held_part(map, &self.held, from..len.min(from + LUMP_PART));
        }
    }

    /// Reduces the lump under `replica`'s map, answering `request` (with the lump) before each
    /// part.
    fn reduce_answering(
        self: &Arc<Self>,
        agg: &mut Aggregator<'_>,
        replica: &Replica,
        request: Option<&CopyRequest<'_>>,
        log: &Mutex<ChangeLog>,
    ) {
        self.reduce(agg, replica.mapper.map(), || {
            if let Some(request) = request {
                request.answer(replica, log, Some(self));
            }
        });
    }
}

fn work(
    rx: &Batches,
    (log, spares): (&Mutex<ChangeLog>, &Mutex<Spares>),
    needed: &NeededInput,
    pages: Option<&PageReleaser<'_>>,
    (w, replica): (&mut Worker<'_, '_>, &mut Replica),
    request: Option<&CopyRequest<'_>>,
) {
    // A poisoned lock means another worker panicked; the scope re-raises that panic.
    let next = || rx.lock().ok()?.as_ref()?.recv().ok();
    let ready = || rx.lock().ok()?.as_ref()?.try_recv().ok();
    let next_within = |wait| match rx.lock().as_deref() {
        Ok(Some(rx)) => rx.recv_timeout(wait),
        _ => Err(RecvTimeoutError::Disconnected),
    };
    let mut ending = false;
    let walk = w.bodies.as_ref().and_then(|b| b.walk_ahead().cloned());
    let walk = walk.as_deref();
    let first = || !needed.batched.load(Relaxed);
    loop {
        let batch = match ready() {
            Some(batch) => batch,
            // No batch: walk the records ahead of the reading thread (a file without rounds
            // sends none for its first 32 MiB, nor while it queues a window's half anew), and map
            // the input ahead of it, meanwhile; before the first batch, the walk first.
            None if walk.is_some_and(|walk| first() && needed.walk_ahead(walk)) => continue,
            None if pages.is_some_and(|p| needed.populate_ahead(p)) => continue,
            None if walk.is_some_and(|walk| needed.walk_ahead(walk)) => continue,
            // The reading thread moves on meanwhile: look again soon while the walk is on.
            None if walk.is_some_and(WalkAhead::live) => match next_within(WALK_POLL) {
                Ok(batch) => batch,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            },
            None => match next() {
                Some(batch) => batch,
                None => break,
            },
        };
        w.aggregate(&batch, (replica, request), log, needed, pages);
        if let Ok(mut spares) = spares.lock() {
            spares.keep(batch);
        }
        if !ending && needed.ending() {
            ending = true;
            w.agg.hold_less();
        }
    }
}

/// Runs `read` on this thread with a [`BatchSender`] while `threads - 1` workers aggregate the
/// batches; returns `read`'s result and the merged samples and statistics. `read` calls
/// [`BatchSender::before_change`] before each event that may change its mapper's map, and ends
/// with [`BatchSender::finish`]. `by_position` decodes the samples that `read` hands out by
/// position, and drops the input's pages once read. The reading thread aggregates a batch itself
/// when the channel is full, and the batches left queued once it has read the input, so `threads`
/// threads share the work without ever waiting for each other while there is work: a reader waiting for room on a core of its own would leave that
/// core idle, a third thread on two cores would have the scheduler take turns instead.
pub fn aggregate_in_parallel<'b, T>(
    binary: &'b Binary,
    opts: SampleOptions,
    threads: usize,
    initial: &AddressMapper,
    by_position: Option<(&SampleBodies<'_>, &PageReleaser<'_>)>,
    read: impl FnOnce(&mut BatchSender<'b, '_>) -> T,
) -> (T, AggregatedSamples, SampleStats, AddressMapper) {
    let workers = threads.max(2) - 1;
    let (tx, rx) = sync_channel::<Batch>(threads.max(2) * QUEUED_PER_THREAD);
    let rx: Batches = Mutex::new(Some(rx));
    let running = AtomicUsize::new(workers);
    let log = Arc::new(Mutex::new(ChangeLog {
        first: 0,
        chunks: VecDeque::new(),
        applied: (0..=workers).map(|w| if w < workers { 0 } else { u64::MAX }).collect(),
    }));
    let needed = Arc::new(NeededInput::new(by_position.map_or(0, |(_, pages)| pages.mapped_len())));
    let spares = Arc::new(Mutex::new(Spares::default()));
    let pages = by_position.map(|(_, pages)| pages);
    let wanted = AtomicBool::new(false);
    let (copy_tx, copy_rx) = sync_channel::<Help>(1);
    let worker = |agg| Worker {
        agg,
        bodies: by_position.map(|(bodies, _)| bodies.fork()),
        spans: Vec::new(),
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|i| {
                let (rx, needed, running) = (&rx, &*needed, &running);
                let shared = (&*log, &*spares);
                let request = CopyRequest { wanted: &wanted, to: copy_tx.clone(), reader: workers };
                let worker = &worker;
                scope.spawn(move || {
                    let _running = Running { count: running, rx };
                    // Made here while the reading thread fills the first batch, rather than by
                    // the reading thread before it starts: the aggregator's tables are a few
                    // hundred pages written at creation.
                    let mut w = worker(Aggregator::new(binary, opts).reducing_held_in_parts());
                    let mut replica = Replica { mapper: initial.replica(), worker: i, applied: 0 };
                    work(rx, shared, needed, pages, (&mut w, &mut replica), Some(&request));
                    // The reading thread may still wait for the copy (the request is out once
                    // the channel is closed): answered here at the latest.
                    reduce_held(&mut w.agg, &replica, Some(&request), shared.0, true);
                    // Finished here, beside the reading thread's last batches: freeing the
                    // aggregator's tables took the reading thread, after it joined this one,
                    // 2-4 ms with the other core idle. The held-sample buffers are freed by an
                    // idle thread of the pool (see below): freeing them here still kept the
                    // reading thread waiting in the join ~1.3 ms on LBR + call-stack input.
                    let held = w.agg.take_held_buffers();
                    (w.agg.finish(), replica, held)
                })
            })
            .collect();
        let mut sender = BatchSender {
            tx,
            batch: Batch::default(),
            log: log.clone(),
            log_end: 0,
            deferring: false,
            copy: None,
            reader: workers,
            needed: needed.clone(),
            spares: spares.clone(),
            pages,
            worker: worker(Aggregator::new(binary, opts).handing_off_held()),
            handoff: None,
            finished: false,
            left: Vec::new(),
            limit: FIRST_BATCH_SAMPLES,
            placing: None,
        };
        let out = read(&mut sender);
        debug_assert!(sender.finished, "read ends with BatchSender::finish");
        let BatchSender { tx, worker: mut reader, left, .. } = sender;
        // The batches still queued are aggregated beside the workers, under a copy of the map
        // of the first one to see the request (this thread's held samples were reduced in
        // `finish`), after a share of the held samples that worker is reducing under it; then
        // the batches left.
        wanted.store(true, Relaxed);
        drop((tx, copy_tx));
        let mut helped = copy_rx.recv().ok().map(|Help { copy, lump }| {
            if let Some(lump) = lump {
                lump.reduce(&mut reader.agg, copy.mapper.map(), || {});
                // The last to drop the lump frees its words (up to 16 MiB): not this thread.
                rayon::spawn(move || drop(lump));
            }
            copy
        });
        if let Some(copy) = &mut helped {
            reader.agg.reducing_held();
            work(&rx, (&log, &spares), &needed, pages, (&mut reader, copy), None);
            for batch in &left {
                reader.aggregate(batch, (copy, None), &log, &needed, pages);
            }
            reader.agg.flush(copy.mapper.map());
        }
        let mut samples = AggregatedSamples::default();
        let mut stats = SampleStats::default();
        // The copy that replayed the whole log decided the samples without a pid deferred to the
        // copies: the one that aggregated the last batch (the helping copy took over from the
        // worker it copied).
        let mut replayed = helped;
        let mut spent = Vec::with_capacity(workers);
        let joined = handles.into_iter().map(|h| match h.join() {
            Ok((finished, replica, held)) => {
                if replayed.as_ref().is_none_or(|r| replica.applied > r.applied) {
                    replayed = Some(replica);
                }
                spent.push(held);
                finished
            }
            Err(panic) => std::panic::resume_unwind(panic),
        });
        for (agg_samples, agg_stats) in std::iter::once(reader.agg.finish()).chain(joined) {
            stats.merge(&agg_stats);
            samples.merge(agg_samples);
        }
        // This thread runs on the pool (the workers do not): the workers' held-sample buffers
        // are freed by a thread of it idle while this one goes on (merging the workers' maps).
        rayon::spawn(move || drop(spent));
        let replayed = replayed.expect("at least one worker").mapper;
        (out, samples, stats, replayed)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An idle worker maps the input from the reading thread's position on, a step at a time, up
    /// to [`POPULATE_AHEAD`] past it and no further than the input's end.
    #[test]
    fn idle_workers_map_the_input_ahead_of_the_reading_thread() {
        let step = POPULATE_STEP;
        let len = POPULATE_AHEAD + 2 * step + 100;
        let path = std::env::temp_dir().join(format!("profgen-populate-{}", std::process::id()));
        std::fs::File::create(&path).and_then(|f| f.set_len(len as u64)).unwrap();
        let map = crate::input::perf_data::map_file(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let pages = PageReleaser::new(&map);
        let mapped = |needed: &NeededInput| {
            let populated = || needed.populated.load(Relaxed);
            std::iter::from_fn(|| needed.populate_ahead(&pages).then(populated)).collect::<Vec<_>>()
        };

        let needed = NeededInput::new(len);
        let window: Vec<_> = (1..=POPULATE_AHEAD / step).map(|i| i * step).collect();
        assert_eq!(mapped(&needed), window);
        needed.consumed(0, 3 * step + 5, &pages);
        assert_eq!(mapped(&needed), [POPULATE_AHEAD + step, POPULATE_AHEAD + 2 * step, len]);
        needed.consumed(0, len, &pages);
        assert_eq!(mapped(&needed), Vec::<usize>::new());

        // A reading thread past what was mapped: mapping starts where it is.
        let needed = NeededInput::new(len);
        needed.consumed(0, 2 * step + 7, &pages);
        assert_eq!(mapped(&needed)[..2], [3 * step + 7, 4 * step + 7]);
    }
}
