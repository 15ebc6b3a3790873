//! Record decoding: turns one perf record (header included) into [`PerfEvent`]s, keeping the
//! per-file state that decoding needs (attrs, id → attr map, zstd stream) and reusable buffers so
//! that samples cost no heap allocation.

use super::abi::*;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

use hashbrown::HashMap;
use zstd::stream::raw::Operation;

use super::ahead::WalkedRecord;
use super::attr::*;
use super::bytes::{Cursor, Loc, u16_at, u32_at, u64_at};
use super::features;
use super::layout::{SampleFields, SampleLayout};
use super::order::{ARENA_LIMIT, COPIED_LIMIT, NO_ROUNDS_WINDOW, PREFETCH_RECORDS, TimeOrder};
use super::{ReadReport, Truncation};
use crate::addr::{FileOffset, RuntimeAddr};
use crate::error::Error;
use crate::input::{
    BranchStack, CallChain, CommName, Deferred, MmapEvent, MmapPath, PerfEvent, PlacedSample,
    RawWord, Sample,
};

// Record types (kernel: include/uapi/linux/perf_event.h; user: tools/lib/perf/include/perf/event.h).

// header.misc bits.

/// Decompressed bytes produced per zstd call; records are cut out of it as they complete.
const ZSTD_CHUNK: usize = 1 << 20;

/// Decompressed bytes allowed per compressed byte read, past the first [`ZSTD_SLACK`]: crafted
/// zstd data inflates ~12,000 times (a 67 KB file to 800 MB, 4 s of decoding), perf's own
/// compressed records about ten times, so the time a file takes stays linear in its size. Past
/// it the input is cut there, as a truncated file is.
const ZSTD_MAX_RATIO: u64 = 1024;
const ZSTD_SLACK: u64 = 64 << 20;

/// Placed samples delivered as one event at most (a run is 16 bytes a sample: it stays in the
/// first-level cache).
const PLACED_RUN: usize = 512;

/// Builds the located error for malformed input.
pub(super) fn malformed(path: &Path, loc: Loc, at: usize, what: impl std::fmt::Display) -> Error {
    match loc.decompressed {
        None => Error::Malformed {
            path: path.to_path_buf(),
            offset: loc.offset.saturating_add(at as u64),
            what: what.to_string(),
        },
        Some(d) => Error::Malformed {
            path: path.to_path_buf(),
            offset: loc.offset,
            what: format!(
                "in the compressed record's data at decompressed byte {}: {what}",
                d.saturating_add(at as u64)
            ),
        },
    }
}

pub(super) struct Decoder<'p> {
    pub(super) path: &'p Path,
    /// The in-memory input whose records `record` may be given by position (empty for streams).
    input: &'p [u8],
    attrs: Vec<Attr>,
    /// Each attr's fixed sample layout, if it has one.
    layouts: Vec<Option<SampleLayout>>,
    ids: HashMap<u64, usize>,
    /// Where samples carry their event id (see [`sample_id_offset`]).
    id_offset: Option<usize>,
    /// Where records carry their timestamp (see [`time_offsets`]).
    time_offsets: (Option<usize>, Option<usize>),
    /// Set when events are delivered in time order rather than file order.
    order: Option<TimeOrder>,
    /// The user frames of a call chain that are not one run in its record, copied.
    callchain: Vec<RawWord>,
    zstd: Option<zstd::stream::raw::Decoder<'static>>,
    zstd_out: Vec<u8>,
    /// Decompressed bytes that do not yet form a whole record (records may span compressed records).
    pending: Vec<u8>,
    /// Decompressed-stream offset of `pending[0]`.
    pending_offset: u64,
    /// Compressed bytes fed to `zstd` so far (see [`ZSTD_MAX_RATIO`]).
    zstd_in: u64,
    /// The compressed data inflated past [`ZSTD_MAX_RATIO`]: the rest of it is skipped.
    zstd_refused: bool,
    /// Samples are skipped, not decoded (a scan for the input's mappings).
    pub(super) skip_samples: bool,
    /// Samples whose record lies in the in-memory input are delivered without their call chain
    /// and branch stack (checked, not copied) and with [`Sample::record`] set, for a worker to
    /// decode in place ([`super::SampleBodies`]).
    pub(super) defer_bodies: bool,
    /// Once set, samples in the input whose fields [fill their record](SampleLayout::fills) are
    /// delivered as [`PerfEvent::Placed`], read no further (only set without `skip_samples`).
    pub(super) placing: Option<Arc<AtomicBool>>,
    /// How many of the attrs a placed sample may have: the header's, the only ones the workers'
    /// [`super::SampleBodies`] know (an attr record in the data section adds others).
    pub(super) placeable_attrs: usize,
    /// Placed samples not delivered yet: delivered as one event before any other event, and
    /// before the decoder returns from `record` (so that every record before the position it
    /// reports as consumed has been delivered).
    run: Vec<PlacedSample>,
    pub(super) report: ReadReport,
}

/// `PerfEvent`s go to this callback; a `&mut dyn` keeps one copy of the decoder code.
pub(super) type Sink<'s> = dyn FnMut(PerfEvent<'_>) + 's;

impl<'p> Decoder<'p> {
    pub(super) fn new(path: &'p Path) -> Self {
        Decoder {
            path,
            input: &[],
            attrs: Vec::new(),
            layouts: Vec::new(),
            ids: HashMap::new(),
            id_offset: None,
            time_offsets: (None, None),
            order: None,
            callchain: Vec::new(),
            zstd: None,
            zstd_out: Vec::new(),
            pending: Vec::new(),
            pending_offset: 0,
            zstd_in: 0,
            zstd_refused: false,
            skip_samples: false,
            defer_bodies: false,
            placing: None,
            placeable_attrs: 0,
            run: Vec::new(),
            report: ReadReport::default(),
        }
    }

    /// A fresh decoder with the same attrs, for decoding another part of the same data section.
    pub(super) fn fork(&self) -> Self {
        let mut d = Decoder::new(self.path);
        d.attrs = self.attrs.clone();
        d.layouts = self.layouts.clone();
        d.ids = self.ids.clone();
        d.id_offset = self.id_offset;
        d.time_offsets = self.time_offsets;
        d.report = self.report.clone();
        d
    }

    /// The fixed layout of each attr's samples, if it has one.
    pub(super) fn layouts(&self) -> &[Option<SampleLayout>] {
        &self.layouts
    }

    pub(super) fn add_attr(&mut self, attr: Attr, ids: impl IntoIterator<Item = u64>) {
        let index = self.attrs.len();
        if index == 0 {
            self.id_offset = sample_id_offset(&attr);
            self.time_offsets = time_offsets(&attr);
        }
        let branch_stack = attr.sample_type & SAMPLE_BRANCH_STACK != 0;
        let info = &mut self.report.info;
        info.branch_stack = Some(info.branch_stack.unwrap_or(false) || branch_stack);
        if branch_stack {
            info.branch_events.push((attr.kind, attr.config));
        }
        self.layouts.push(SampleLayout::of(&attr));
        self.attrs.push(attr);
        for id in ids {
            self.ids.insert(id, index);
        }
        // An id may now name another attr.
        if let Some(order) = self.order.as_mut() {
            order.forget_placed();
        }
    }

    fn malformed(&self, loc: Loc, at: usize, what: impl std::fmt::Display) -> Error {
        malformed(self.path, loc, at, what)
    }

    fn warn(&mut self, loc: Loc, what: String) {
        let at = match loc.decompressed {
            None => format!("byte offset {}", loc.offset),
            Some(d) => format!("byte offset {} (decompressed byte {d})", loc.offset),
        };
        self.report.warnings.push(format!("{}: at {at}: {what}", self.path.display()));
    }

    /// Delivers events in time order from now on (see [`super::order`]). `input` is the
    /// in-memory input that records passed with a position lie in.
    pub(super) fn order_by_time(&mut self, input: &'p [u8]) {
        self.order = Some(TimeOrder::default());
        self.input = input;
    }

    /// Takes one whole record (`rec.len()` equals its header's size, which is at least 8):
    /// decodes it now, or queues it when ordering by time. `input_pos` is the record's position in
    /// the in-memory input, if it lies there. Returns how many payload bytes follow the record
    /// outside its `size` (HEADER_TRACING_DATA and AUXTRACE carry such payloads); the caller
    /// skips them. Inlined, queueing alone: most records are only queued, and a call with the
    /// frame everything else needs (its registers saved and restored) cost ~20 instructions a
    /// record.
    #[inline(always)]
    pub(super) fn record(
        &mut self,
        rec: &[u8],
        input_pos: Option<usize>,
        loc: Loc,
        sink: &mut Sink<'_>,
    ) -> Result<u64, Error> {
        let rtype = u32_at(rec, 0).unwrap_or(0);
        if self.order.is_some()
            && let Some(time) = self.record_time(rtype, rec)
        {
            let placed = match rtype {
                RECORD_SAMPLE => self.placeable_attr(rec, input_pos),
                _ => None,
            };
            self.queue(time, rec, input_pos, loc, placed, sink)?;
            return Ok(0);
        }
        self.record_now(rec, input_pos, loc, sink)
    }

    /// Queues the record `rec` of time `time` (see [`record`](Self::record)), releasing what the
    /// reorder window or the limits say.
    #[inline(always)]
    fn queue(
        &mut self,
        time: u64,
        rec: &[u8],
        input_pos: Option<usize>,
        loc: Loc,
        placed: Option<u16>,
        sink: &mut Sink<'_>,
    ) -> Result<(), Error> {
        if let Some(order) = self.order.as_mut() {
            order.push(time, rec, input_pos, loc, placed);
            if order.past_limits() {
                self.release_early(loc, sink)?;
            }
        }
        Ok(())
    }

    /// Queues the record at `pos` in the input, `rec`, as another decoder walking ahead found it
    /// ([`super::ahead`]): what [`record`](Self::record) does with it, without reading it.
    #[inline]
    pub(super) fn queue_walked(
        &mut self,
        walked: WalkedRecord,
        rec: &[u8],
        pos: usize,
        sink: &mut Sink<'_>,
    ) -> Result<(), Error> {
        let placed = walked.placed.filter(|_| self.placing.is_some());
        self.queue(walked.time, rec, Some(pos), Loc::plain(pos as u64), placed, sink)
    }

    /// Whether records are queued for time ordering, and how many attrs the decoder knows: the
    /// state a decoder walking ahead ([`super::ahead`]) must share for its records to be taken.
    pub(super) fn walk_state(&self) -> (bool, usize) {
        (self.order.is_some(), self.attrs.len())
    }

    /// What [`record`](Self::record) queues of the record `rec` at `pos` in the input: its time,
    /// size and placeable attr; `None` if it is not queued (it has no time).
    #[inline]
    pub(super) fn walked(&self, rec: &[u8]) -> Option<WalkedRecord> {
        let rtype = u32_at(rec, 0)?;
        let time = self.record_time(rtype, rec)?;
        let placed = match rtype {
            RECORD_SAMPLE => self.placeable(rec),
            _ => None,
        };
        Some(WalkedRecord { time, len: rec.len() as u16, placed })
    }

    /// A record [`record`](Self::record) does not queue: a round's end (which releases the
    /// queue first), a record without a time, or any record when not ordering by time.
    #[inline(never)]
    fn record_now(
        &mut self,
        rec: &[u8],
        input_pos: Option<usize>,
        loc: Loc,
        sink: &mut Sink<'_>,
    ) -> Result<u64, Error> {
        if u32_at(rec, 0) == Some(FINISHED_ROUND) && self.order.is_some() {
            let limit = self.order.as_mut().map(TimeOrder::end_round);
            self.release(limit, sink)?;
        }
        let extra = self.deliver(rec, input_pos, loc, sink);
        self.deliver_run(sink);
        extra
    }

    /// The queue is past the reorder window or the arena's limit ([`TimeOrder::past_limits`]):
    /// releases the window's older half, or (warning once) everything.
    #[inline(never)]
    fn release_early(&mut self, loc: Loc, sink: &mut Sink<'_>) -> Result<(), Error> {
        let Some(order) = self.order.as_mut() else { return Ok(()) };
        if let Some(limit) = order.window_limit() {
            return self.release(Some(limit), sink);
        }
        if order.queued_bytes() > ARENA_LIMIT || order.copied_bytes() > COPIED_LIMIT {
            if !std::mem::replace(&mut order.overflowed, true) {
                let what = if order.copied_bytes() > COPIED_LIMIT {
                    format!(
                        "over {COPIED_LIMIT} bytes of copied records (a stream or compressed data) without a finished round; time order is approximate"
                    )
                } else {
                    format!(
                        "over {ARENA_LIMIT} bytes of records without a finished round; time order is approximate"
                    )
                };
                self.warn(loc, what);
            }
            return self.release(None, sink);
        }
        Ok(())
    }

    /// The timestamp of a record that perf would order by time (kernel records with a time).
    fn record_time(&self, rtype: u32, rec: &[u8]) -> Option<u64> {
        match rtype {
            RECORD_SAMPLE => u64_at(rec, 8 + self.time_offsets.0?),
            1..=LAST_KERNEL_RECORD => {
                let at = rec.len().checked_sub(self.time_offsets.1?)?;
                if at < 8 { None } else { u64_at(rec, at) }
            }
            _ => None,
        }
    }

    /// The lowest input position still referenced by records queued for time ordering.
    pub(super) fn oldest_queued_input_pos(&self) -> Option<usize> {
        self.order.as_ref().and_then(TimeOrder::oldest_input_pos)
    }

    /// Decodes the queued records up to `limit` (all without one) in time order.
    fn release(&mut self, limit: Option<u64>, sink: &mut Sink<'_>) -> Result<(), Error> {
        let Some(mut order) = self.order.take() else {
            return Ok(());
        };
        let ready = order.ready(limit);
        let mut result = Ok(());
        let mut i = 0;
        // Until placing turns on (while delivering: at the first sample in the binary), every
        // record is read, placeable or not.
        while i < ready && self.placing.is_some() && !self.placing_on() {
            order.prefetch(self.input, i + PREFETCH_RECORDS, false);
            let (rec, input_pos, loc) = order.get(self.input, i);
            if let Err(e) = self.deliver(rec, input_pos, loc, sink) {
                // Nothing more is delivered.
                (result, i) = (Err(e), ready);
                break;
            }
            i += 1;
        }
        for i in i..ready {
            order.prefetch(self.input, i + PREFETCH_RECORDS, true);
            if let Some((record, attr, len)) = order.placed(i) {
                self.place(PlacedSample { record, attr, len }, sink);
                continue;
            }
            let (rec, input_pos, loc) = order.get(self.input, i);
            if let Err(e) = self.deliver(rec, input_pos, loc, sink) {
                result = Err(e);
                break;
            }
        }
        self.deliver_run(sink);
        order.retire(ready);
        self.order = Some(order);
        result
    }

    /// Whether samples are handed out by their place now (see [`Decoder::placing`]).
    #[inline(always)]
    fn placing_on(&self) -> bool {
        matches!(&self.placing, Some(placing) if placing.load(Relaxed))
    }

    /// The attr of `rec` if it is a sample to be handed out by its place (see
    /// [`Decoder::placing`]).
    #[inline(always)]
    fn placed_attr(&self, rec: &[u8], input_pos: Option<usize>) -> Option<u16> {
        self.placing_on().then(|| self.placeable_attr(rec, input_pos)).flatten()
    }

    /// The attr of `rec` if it is a sample that can be handed out by its place once placing is
    /// on: it lies in the input, its attr is one of the header's, and that attr's fixed layout
    /// fills it. Found when a sample is queued whether placing is on yet or not (its release
    /// asks): the first records of a file without rounds are released only once 32 MiB are
    /// queued, and read again then their headers missed the cache (~37k samples on Lua).
    #[inline(always)]
    fn placeable_attr(&self, rec: &[u8], input_pos: Option<usize>) -> Option<u16> {
        if self.placing.is_none() || input_pos.is_none() || u32_at(rec, 0) != Some(RECORD_SAMPLE) {
            return None;
        }
        self.placeable(rec)
    }

    /// The attr of the sample `rec` (lying in the input) if it can be handed out by its place:
    /// its attr is one of the header's, and that attr's fixed layout fills it.
    #[inline(always)]
    fn placeable(&self, rec: &[u8]) -> Option<u16> {
        let attr = self.sample_attr(&rec[8..]).filter(|&a| a < self.placeable_attrs)?;
        match &self.layouts[attr] {
            Some(layout) if layout.fills(&rec[8..]) => u16::try_from(attr).ok(),
            _ => None,
        }
    }

    /// Queues a sample to be handed out by its place in the run.
    #[inline(always)]
    fn place(&mut self, sample: PlacedSample, sink: &mut Sink<'_>) {
        self.run.push(sample);
        if self.run.len() >= PLACED_RUN {
            self.deliver_run(sink);
        }
    }

    /// Delivers one whole record: a sample as part of a run of [`PerfEvent::Placed`] if it can be
    /// (see [`Decoder::placing`]), else decoded now, after the run before it. Kept apart from
    /// `decode_other`, whose frame (every record type inlined) cost more than the check.
    #[inline(always)]
    fn deliver(
        &mut self,
        rec: &[u8],
        input_pos: Option<usize>,
        loc: Loc,
        sink: &mut Sink<'_>,
    ) -> Result<u64, Error> {
        if let Some(attr) = self.placed_attr(rec, input_pos)
            && let Some(record) = input_pos
        {
            // A record's size is a u16.
            self.place(PlacedSample { record, attr, len: rec.len() as u16 }, sink);
            return Ok(0);
        }
        self.deliver_run(sink);
        let r = &mut self.report;
        r.records = r.records.saturating_add(1);
        // Samples apart from the other record types: in one frame with them, every sample saved
        // and restored the registers and stack their arms need.
        match u32_at(rec, 0).unwrap_or(0) {
            RECORD_SAMPLE => self.decode_sample(rec, input_pos, loc, sink).map(|()| 0),
            rtype => self.decode_other(rtype, rec, input_pos, loc, sink),
        }
    }

    /// Delivers the placed samples not delivered yet, as one event, and counts them.
    #[inline(always)]
    fn deliver_run(&mut self, sink: &mut Sink<'_>) {
        if !self.run.is_empty() {
            let (r, n) = (&mut self.report, self.run.len() as u64);
            r.records = r.records.saturating_add(n);
            r.samples = r.samples.saturating_add(n);
            sink(PerfEvent::Placed(&self.run));
            self.run.clear();
        }
    }

    /// Decodes a sample record now.
    #[inline(never)]
    fn decode_sample(
        &mut self,
        rec: &[u8],
        input_pos: Option<usize>,
        loc: Loc,
        sink: &mut Sink<'_>,
    ) -> Result<(), Error> {
        if self.skip_samples {
            return Ok(());
        }
        let misc = u16_at(rec, 4).unwrap_or(0);
        let deferred = input_pos.filter(|_| self.defer_bodies);
        self.sample(rec, misc, loc, deferred, sink)
    }

    /// Decodes one whole record other than a sample now.
    #[inline(never)]
    fn decode_other(
        &mut self,
        rtype: u32,
        rec: &[u8],
        input_pos: Option<usize>,
        loc: Loc,
        sink: &mut Sink<'_>,
    ) -> Result<u64, Error> {
        let misc = u16_at(rec, 4).unwrap_or(0);
        match rtype {
            RECORD_MMAP | RECORD_MMAP2 => self.mmap(rec, input_pos, loc, sink)?,
            RECORD_COMM => {
                let mut c = Cursor::new(&rec[8..]);
                let (pid, tid) = c
                    .i32()
                    .zip(c.i32())
                    .ok_or_else(|| self.malformed(loc, 8, "COMM record too short for pid/tid"))?;
                let name = CommName(&rec[16..]);
                let exec = misc & MISC_COMM_EXEC != 0;
                sink(PerfEvent::Comm { pid, tid, exec, name });
            }
            RECORD_FORK | RECORD_EXIT => {
                let mut c = Cursor::new(&rec[8..]);
                let ids = (|| Some([c.i32()?, c.i32()?, c.i32()?, c.i32()?]))();
                let [pid, ppid, tid, ptid] = ids.ok_or_else(|| {
                    self.malformed(loc, 8, "FORK/EXIT record too short for its pids")
                })?;
                sink(if rtype == RECORD_FORK {
                    PerfEvent::Fork { pid, ppid, tid, ptid }
                } else {
                    PerfEvent::Exit { pid, tid }
                });
            }
            RECORD_LOST => {
                let lost = u64_at(rec, 16).unwrap_or(0);
                self.report.lost_events = self.report.lost_events.saturating_add(lost);
            }
            HEADER_ATTR => self.header_attr(rec, loc)?,
            HEADER_BUILD_ID => {
                if let Err(e) = features::parse_build_id_event(rec, &mut self.report.info) {
                    self.warn(loc, e);
                }
            }
            HEADER_FEATURE => {
                if let Err(e) = features::parse_feature_record(rec, &mut self.report.info) {
                    self.warn(loc, e);
                }
            }
            HEADER_TRACING_DATA => {
                let size = u32_at(rec, 8)
                    .ok_or_else(|| self.malformed(loc, 8, "TRACING_DATA record too short"))?;
                return Ok(u64::from(size)); // perf: the size includes the padding to 8 bytes
            }
            AUXTRACE => {
                let size = u64_at(rec, 8)
                    .ok_or_else(|| self.malformed(loc, 8, "AUXTRACE record too short"))?;
                return Ok(size);
            }
            COMPRESSED | COMPRESSED2 => {
                if loc.decompressed.is_some() {
                    return Err(self.malformed(
                        loc,
                        0,
                        "compressed record nested in compressed data",
                    ));
                }
                let data = if rtype == COMPRESSED {
                    &rec[8..]
                } else {
                    let size = u64_at(rec, 8)
                        .ok_or_else(|| self.malformed(loc, 8, "COMPRESSED2 record too short"))?;
                    usize::try_from(size)
                        .ok()
                        .and_then(|s| rec.get(16..16usize.checked_add(s)?))
                        .ok_or_else(|| {
                            self.malformed(
                                loc,
                                8,
                                format!("COMPRESSED2 data size {size} exceeds the record"),
                            )
                        })?
                };
                self.decompress(data, loc, sink)?;
            }
            1..=LAST_KERNEL_RECORD | HEADER_ATTR..=LAST_USER_RECORD => {}
            _ => self.report.unknown_records = self.report.unknown_records.saturating_add(1),
        }
        Ok(0)
    }

    /// Pipe mode attr: the attr (its own `size` long), then the ids of its events.
    fn header_attr(&mut self, rec: &[u8], loc: Loc) -> Result<(), Error> {
        let body = &rec[8..];
        let size = Attr::self_size(body)
            .ok_or_else(|| self.malformed(loc, 8, "HEADER_ATTR record too short for an attr"))?;
        let attr = body.get(..size).and_then(Attr::parse).ok_or_else(|| {
            self.malformed(loc, 8, format!("HEADER_ATTR record too short for its {size}-byte attr"))
        })?;
        let ids = body[size..].chunks_exact(8).filter_map(|b| u64_at(b, 0));
        self.add_attr(attr, ids.collect::<Vec<_>>());
        Ok(())
    }

    fn mmap(
        &mut self,
        rec: &[u8],
        input_pos: Option<usize>,
        loc: Loc,
        sink: &mut Sink<'_>,
    ) -> Result<(), Error> {
        let mut ev = mmap_event(rec).map_err(|(at, what)| self.malformed(loc, at, what))?;
        ev.record = input_pos.filter(|_| self.defer_bodies);
        sink(PerfEvent::Mmap(ev));
        Ok(())
    }

    fn sample_attr(&self, body: &[u8]) -> Option<usize> {
        if self.attrs.len() == 1 {
            return Some(0);
        }
        let id = u64_at(body, self.id_offset?)?;
        self.ids.get(&id).copied()
    }

    /// Decodes a sample record; with `deferred` (the record's input position), its call chain and
    /// branch stack are only checked, not copied (see [`Decoder::defer_bodies`]).
    pub(super) fn sample(
        &mut self,
        rec: &[u8],
        misc: u16,
        loc: Loc,
        deferred: Option<usize>,
        sink: &mut Sink<'_>,
    ) -> Result<(), Error> {
        let body = &rec[8..];
        let Some(attr_index) = self.sample_attr(body) else {
            let r = &mut self.report;
            r.samples_without_attr = r.samples_without_attr.saturating_add(1);
            return Ok(());
        };
        let f = match self.layouts[attr_index].as_ref().and_then(|l| l.read(body)) {
            Some(f) => f,
            None => walk_sample(&self.attrs[attr_index], body, self.path, loc)?,
        };
        let has_callchain = self.attrs[attr_index].sample_type & SAMPLE_CALLCHAIN != 0;
        let r = &mut self.report;
        r.samples = r.samples.saturating_add(1);
        if f.end != body.len() {
            // Fields of a newer kernel, or a layout we got wrong: the decoded fields still stand.
            r.samples_with_unknown_tail = r.samples_with_unknown_tail.saturating_add(1);
        }
        let user = misc & MISC_CPUMODE_MASK == MISC_USER;
        let (callchain, branches) = match deferred {
            None => stacks(rec, (f.callchain, f.branches), user, &mut self.callchain),
            Some(_) => (CallChain(&[]), BranchStack(&[])),
        };
        let (pid, tid) = f.pid_tid();
        sink(PerfEvent::Sample(Sample {
            pid,
            tid,
            time: f.time,
            attr_index,
            ip: RuntimeAddr(f.ip),
            period: f.period,
            repeat: 1,
            callchain,
            branches,
            has_callchain,
            record: deferred.map(|record| Deferred {
                record,
                callchain: f.callchain,
                branches: f.branches,
                user,
            }),
        }));
        Ok(())
    }

    /// Feeds a compressed record's zstd data through the stream decoder (one zstd stream spans all
    /// compressed records) and decodes every record that becomes complete.
    fn decompress(&mut self, data: &[u8], loc: Loc, sink: &mut Sink<'_>) -> Result<(), Error> {
        if self.zstd_refused {
            return Ok(());
        }
        let mut zstd = match self.zstd.take() {
            Some(z) => z,
            None => {
                self.zstd_out.resize(ZSTD_CHUNK, 0);
                zstd::stream::raw::Decoder::new().map_err(|e| {
                    self.malformed(loc, 0, format!("cannot start zstd decoder: {e}"))
                })?
            }
        };
        let mut input = data;
        self.zstd_in += data.len() as u64;
        let allowed = self.zstd_in.saturating_mul(ZSTD_MAX_RATIO).saturating_add(ZSTD_SLACK);
        loop {
            let status = zstd
                .run_on_buffers(input, &mut self.zstd_out)
                .map_err(|e| self.malformed(loc, 8, format!("bad zstd data: {e}")))?;
            if status.bytes_read == 0 && status.bytes_written == 0 && !input.is_empty() {
                return Err(self.malformed(loc, 8, "zstd decoder makes no progress on this data"));
            }
            input = &input[status.bytes_read..];
            let inflated = self.pending_offset + (self.pending.len() + status.bytes_written) as u64;
            if inflated > allowed {
                self.zstd_refused = true;
                self.pending.clear();
                if self.report.truncated.is_none() {
                    let reason = format!(
                        "compressed data inflating to over {inflated} bytes from {} compressed bytes, past {ZSTD_MAX_RATIO} times their size and {} MiB (not perf's compression); the compressed records from here on are skipped",
                        self.zstd_in,
                        ZSTD_SLACK >> 20
                    );
                    self.report.truncated = Some(Truncation { offset: loc.offset, reason });
                }
                return Ok(());
            }
            self.pending.extend_from_slice(&self.zstd_out[..status.bytes_written]);
            self.drain_pending(loc, sink)?;
            // Done once all input is consumed and the decoder had no more output to give.
            if input.is_empty() && status.bytes_written < self.zstd_out.len() {
                break;
            }
        }
        self.zstd = Some(zstd);
        Ok(())
    }

    /// Decodes the whole records at the front of `pending`, keeping a trailing partial one.
    fn drain_pending(&mut self, loc: Loc, sink: &mut Sink<'_>) -> Result<(), Error> {
        let pending = std::mem::take(&mut self.pending);
        let mut pos = 0;
        let result = loop {
            let Some(size) = u16_at(&pending, pos + 6) else {
                break Ok(());
            };
            let size = usize::from(size);
            let inner =
                Loc { offset: loc.offset, decompressed: Some(self.pending_offset + pos as u64) };
            if size < 8 {
                break Err(self.malformed(
                    inner,
                    6,
                    format!("record size {size} is smaller than its 8-byte header"),
                ));
            }
            let Some(rec) = pending.get(pos..pos + size) else {
                break Ok(());
            };
            match self.record(rec, None, inner, sink) {
                Ok(0) => pos += size,
                Ok(_) => {
                    break Err(self.malformed(
                        inner,
                        0,
                        "record with out-of-band payload in compressed data",
                    ));
                }
                Err(e) => break Err(e),
            }
        };
        self.pending = pending;
        self.pending.drain(..pos);
        self.pending_offset += pos as u64;
        result
    }

    /// Called at the end of the input: releases queued records; a partial record left in the
    /// decompressed data means the compressed stream was cut short.
    pub(super) fn finish(&mut self, end_offset: u64, sink: &mut Sink<'_>) -> Result<(), Error> {
        self.release(None, sink)?;
        if let Some(late) = self.order.as_ref().map(|o| o.late).filter(|&n| n > 0) {
            self.report.warnings.push(format!(
                "{}: no finished rounds, and {late} records came after newer ones beyond the {} MiB reorder window; time order is approximate",
                self.path.display(),
                NO_ROUNDS_WINDOW >> 20
            ));
        }
        if !self.pending.is_empty() && self.report.truncated.is_none() {
            self.report.truncated = Some(Truncation {
                offset: end_offset,
                reason: format!(
                    "compressed data ends inside a record ({} of its bytes present, decompressed byte {})",
                    self.pending.len(),
                    self.pending_offset
                ),
            });
        }
        Ok(())
    }
}

/// The fields an MMAP and an MMAP2 record (header included) begin with.
pub(super) struct MmapFixed {
    pub pid: i32,
    pub tid: i32,
    pub start: RuntimeAddr,
    pub len: u64,
    pub pgoff: FileOffset,
}

/// The fixed fields of an MMAP or MMAP2 record `rec`, with one bounds check (the copies of a
/// deferring mapper read them again from every mmap record it logs); `None` if it is too short.
#[inline]
pub(super) fn mmap_fixed(rec: &[u8]) -> Option<MmapFixed> {
    let fixed: &[u8; 32] = rec.get(8..40)?.try_into().ok()?;
    let word = |i: usize| u64::from_le_bytes(fixed[i..i + 8].try_into().unwrap_or_default());
    Some(MmapFixed {
        pid: word(0) as u32 as i32,
        tid: (word(0) >> 32) as u32 as i32,
        start: RuntimeAddr(word(8)),
        len: word(16),
        pgoff: FileOffset(word(24)),
    })
}

/// An MMAP or MMAP2 record (`rec`, header included) as an event, its path left in the record;
/// else where in the record it is malformed, and how.
pub(super) fn mmap_event(rec: &[u8]) -> Result<MmapEvent<'_>, (usize, &'static str)> {
    let (rtype, misc) = (u32_at(rec, 0).unwrap_or(0), u16_at(rec, 4).unwrap_or(0));
    let MmapFixed { pid, tid, start, len, pgoff } =
        mmap_fixed(rec).ok_or((8, "MMAP record too short for its fixed fields"))?;
    let (executable, build_id, name_at) = if rtype == RECORD_MMAP {
        (misc & MISC_MMAP_DATA == 0, None, 40)
    } else {
        // MMAP2: 24 bytes of device/inode or build id, then prot and flags.
        let prot = u32_at(rec, 64).ok_or((64, "MMAP2 record too short for prot"))?;
        let build_id = (misc & MISC_MMAP_BUILD_ID != 0).then(|| {
            let size = usize::from(rec[40]).min(20);
            rec[44..44 + size].to_vec()
        });
        (prot & PROT_EXEC != 0, build_id, 72)
    };
    Ok(MmapEvent {
        pid: Some(pid),
        tid: Some(tid),
        start,
        len,
        pgoff,
        executable,
        path: MmapPath::Field(rec.get(name_at..).unwrap_or_default()),
        build_id,
        record: None,
    })
}

/// A sample body's fields, walked in `attr`'s `sample_type` bit by bit: every layout, and the
/// error naming the field a short record ends in (`loc`, `path`: where the record lies).
pub(super) fn walk_sample(
    attr: &Attr,
    body: &[u8],
    path: &Path,
    loc: Loc,
) -> Result<SampleFields, Error> {
    let st = attr.sample_type;
    let has = |bit| st & bit != 0;
    let mut c = Cursor::new(body);
    // Names the field a short body failed to hold.
    let short = |c: &Cursor<'_>, field: &str| {
        malformed(
            path,
            loc,
            8 + c.pos(),
            format!("SAMPLE record ends inside its {field} (sample_type {st:#x})"),
        )
    };
    macro_rules! field {
        ($read:expr, $name:expr) => {
            match $read {
                Some(v) => v,
                None => return Err(short(&c, $name)),
            }
        };
    }
    // A macro rather than a closure: inlined, a field the sample type lacks costs one test.
    macro_rules! u64_if {
        ($bit:expr, $name:expr) => {
            if st & $bit == 0 { None } else { Some(field!(c.u64(), $name)) }
        };
    }
    u64_if!(SAMPLE_IDENTIFIER, "identifier");
    let ip = u64_if!(SAMPLE_IP, "ip").unwrap_or(0);
    let pid_tid = u64_if!(SAMPLE_TID, "pid/tid");
    let time = u64_if!(SAMPLE_TIME, "time");
    u64_if!(SAMPLE_ADDR, "addr");
    u64_if!(SAMPLE_ID, "id");
    u64_if!(SAMPLE_STREAM_ID, "stream_id");
    u64_if!(SAMPLE_CPU, "cpu");
    let period = u64_if!(SAMPLE_PERIOD, "period").unwrap_or(1);
    if has(SAMPLE_READ) {
        field!(skip_read(&mut c, attr.read_format), "read values");
    }

    // Where the call chain and branch stack lie in the record: `array` checked that they do, so
    // offsets and counts fit the record's u16 size.
    let place = |c: &Cursor<'_>, nr: u64| ((8 + c.pos()) as u16, nr as u16);
    let mut callchain = (0, 0);
    if has(SAMPLE_CALLCHAIN) {
        let nr = field!(c.u64(), "callchain length");
        callchain = place(&c, nr);
        field!(array(&mut c, nr, 8), "callchain");
    }
    if has(SAMPLE_RAW) {
        let size = field!(c.u32(), "raw size");
        field!(c.skip(u64::from(size)), "raw data");
    }
    let mut branches = (0, 0);
    if has(SAMPLE_BRANCH_STACK) {
        let nr = field!(c.u64(), "branch stack length");
        if attr.branch_sample_type & BRANCH_HW_INDEX != 0 {
            field!(c.u64(), "branch hw_idx");
        }
        branches = place(&c, nr);
        field!(array(&mut c, nr, 24), "branch stack");
        if attr.branch_sample_type & BRANCH_COUNTERS != 0 {
            field!(array(&mut c, nr, 8), "branch counters");
        }
    }
    if has(SAMPLE_REGS_USER) {
        field!(skip_regs(&mut c, attr.sample_regs_user), "user registers");
    }
    if has(SAMPLE_STACK_USER) {
        let size = field!(c.u64(), "user stack size");
        field!(c.skip(size), "user stack");
        if size != 0 {
            field!(c.u64(), "user stack dyn_size");
        }
    }
    u64_if!(SAMPLE_WEIGHT | SAMPLE_WEIGHT_STRUCT, "weight");
    u64_if!(SAMPLE_DATA_SRC, "data_src");
    u64_if!(SAMPLE_TRANSACTION, "transaction");
    if has(SAMPLE_REGS_INTR) {
        field!(skip_regs(&mut c, attr.sample_regs_intr), "interrupt registers");
    }
    u64_if!(SAMPLE_PHYS_ADDR, "phys_addr");
    u64_if!(SAMPLE_CGROUP, "cgroup");
    u64_if!(SAMPLE_DATA_PAGE_SIZE, "data_page_size");
    u64_if!(SAMPLE_CODE_PAGE_SIZE, "code_page_size");
    if has(SAMPLE_AUX) {
        let size = field!(c.u64(), "aux size");
        field!(c.skip(size), "aux data");
    }
    Ok(SampleFields { ip, pid_tid, time, period, callchain, branches, end: c.pos() })
}

/// The call chain (its user frames) and branch stack of the sample record `rec` (or the input
/// from it on) at `(callchain, branches)`, checked to lie in it as [`SampleFields`] says; `user`:
/// taken in user mode (see [`user_frames`]).
#[inline]
pub(super) fn stacks<'r>(
    rec: &'r [u8],
    (callchain, branches): ((u16, u16), (u16, u16)),
    user: bool,
    copy: &'r mut Vec<RawWord>,
) -> (CallChain<'r>, BranchStack<'r>) {
    let at = |(offset, n): (u16, u16), size: usize| {
        let start = usize::from(offset);
        rec.get(start..start + usize::from(n) * size).unwrap_or_default()
    };
    let ips = at(callchain, 8).as_chunks::<8>().0;
    (CallChain(user_frames(ips, user, copy)), BranchStack(at(branches, 24).as_chunks::<24>().0))
}

/// The user-space frames of a call chain: frames before the first context marker belong to the
/// context the sample was taken in (`in_user`), each marker starts a context. They are one run
/// of the record in the layouts perf writes for user-space samples (a PERF_CONTEXT_USER marker
/// and the frames, or the frames alone); other layouts are copied into `copy`.
#[inline]
pub(super) fn user_frames<'r>(
    ips: &'r [RawWord],
    in_user: bool,
    copy: &'r mut Vec<RawWord>,
) -> &'r [RawWord] {
    let is_marker = |w: &RawWord| u64::from_le_bytes(*w) >= CONTEXT_MAX;
    let run = match ips.split_first() {
        Some((first, rest)) if u64::from_le_bytes(*first) == CONTEXT_USER => rest,
        _ => ips,
    };
    if (in_user || run.len() < ips.len()) && !run.iter().any(is_marker) {
        return run;
    }
    copy.clear();
    let mut user = in_user;
    for w in ips {
        if is_marker(w) {
            user = u64::from_le_bytes(*w) == CONTEXT_USER;
        } else if user {
            copy.push(*w);
        }
    }
    copy
}

/// Takes `nr` elements of `elem` bytes, refusing counts the remaining bytes cannot hold (so no
/// input-derived length is trusted before it is checked against the record).
fn array<'a>(c: &mut Cursor<'a>, nr: u64, elem: u64) -> Option<&'a [u8]> {
    let len = usize::try_from(nr.checked_mul(elem)?).ok()?;
    c.bytes(len)
}

fn skip_regs(c: &mut Cursor<'_>, mask: u64) -> Option<()> {
    let abi = c.u64()?;
    if abi != 0 {
        c.skip(8 * u64::from(mask.count_ones()))?;
    }
    Some(())
}

/// Skips a `read_format` block: one value or a group of them, each with optional id and lost.
fn skip_read(c: &mut Cursor<'_>, format: u64) -> Option<()> {
    let has = |bit| u64::from(format & bit != 0);
    let times = has(FORMAT_TOTAL_TIME_ENABLED) + has(FORMAT_TOTAL_TIME_RUNNING);
    let per_value = 1 + has(FORMAT_ID) + has(FORMAT_LOST);
    if format & FORMAT_GROUP != 0 {
        let nr = c.u64()?;
        c.skip(8 * times)?;
        array(c, nr, 8 * per_value).map(|_| ())
    } else {
        c.skip(8 * (times + per_value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sample of the committed recordings (those outside compressed records) has the same
    /// fields by its attr's fixed layout as by the walk, where the attr has one.
    #[test]
    fn fixed_layouts_read_the_committed_samples_as_the_walk_does() {
        let mut files = Vec::new();
        let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("perf-samples")];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "data") {
                    files.push(path);
                }
            }
        }
        let (mut by_layout, mut walked) = (0, 0);
        for path in &files {
            let bytes = std::fs::read(path).unwrap();
            let data = super::super::PerfData::parse(&bytes, path).unwrap();
            let mut d = data.template.fork();
            let (mut pos, end) = (data.data.start, data.data.end);
            while let Some(size) = u16_at(&bytes, pos + 6).filter(|_| pos < end) {
                let rec = &bytes[pos..pos + usize::from(size)];
                let loc = Loc::plain(pos as u64);
                match u32_at(rec, 0).unwrap() {
                    HEADER_ATTR => d.header_attr(rec, loc).unwrap(),
                    RECORD_SAMPLE => {
                        let body = &rec[8..];
                        let attr = d.sample_attr(body).unwrap();
                        let walk = walk_sample(&d.attrs[attr], body, path, loc).unwrap();
                        if let Some(layout) = d.layouts[attr] {
                            assert_eq!(layout.read(body), Some(walk), "{path:?} at {pos}");
                            by_layout += 1;
                        }
                        walked += 1;
                    }
                    _ => {}
                }
                pos += usize::from(size);
            }
        }
        assert_eq!((files.len(), walked), (34, 72_338), "{files:?}");
        assert_eq!(by_layout, walked);
    }

    /// The user frames of every marker layout; the layouts perf writes for user-space samples
    /// are given in place.
    #[test]
    fn user_frames_of_every_layout() {
        let (kernel, user, guest) = (-128i64 as u64, CONTEXT_USER, -2048i64 as u64);
        let cases: [(&[u64], bool, &[u64], bool); 7] = [
            (&[user, 0x10, 0x20], false, &[0x10, 0x20], true),
            (&[0x10, 0x20], true, &[0x10, 0x20], true),
            (&[0x10, 0x20], false, &[], false),
            (&[kernel, 0xffff_8000, user, 0x10], false, &[0x10], false),
            (&[user, 0x10, kernel, 0xffff_8000, user, 0x20], false, &[0x10, 0x20], false),
            (&[0x10, kernel, 0xffff_8000], true, &[0x10], false),
            (&[user, 0x10, guest, 0x30], false, &[0x10], false),
        ];
        for (chain, in_user, want, in_place) in cases {
            let ips: Vec<RawWord> = chain.iter().map(|a| a.to_le_bytes()).collect();
            let mut copy = Vec::new();
            let got = user_frames(&ips, in_user, &mut copy);
            let got_addrs: Vec<u64> = got.iter().map(|w| u64::from_le_bytes(*w)).collect();
            assert_eq!(got_addrs, want, "{chain:x?} in_user {in_user}");
            let ips_range = ips.as_ptr_range();
            if in_place {
                assert!(got.is_empty() || ips_range.contains(&got.as_ptr()), "{chain:x?}");
            }
        }
    }
}
