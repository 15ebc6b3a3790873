//! Streaming `perf.data` reader: bytes (file mode, mmap'd by the caller) or any `Read` (pipe mode,
//! `perf record -o -`) in, [`PerfEvent`]s out through a callback, plus a [`ReadReport`].
//!
//! Why our own container parser instead of `linux-perf-data`: we need the branch stack (its sample
//! parser skips it), byte offsets for every error, zero-copy over an mmap'd file, no per-record
//! allocation, and control over what a truncated or corrupt file yields (partial result +
//! warning). The format is small: a header with attr and feature sections, then a stream of
//! 8-byte-header records. Sample bodies are decoded from each attr's `sample_type` in the order of
//! the kernel's `perf_event.h` (mirrored by perf's `evsel__parse_sample`).
//!
//! Covered: file and pipe mode; attrs of any size; several attrs (event id via
//! `PERF_SAMPLE_IDENTIFIER`/`PERF_SAMPLE_ID`); `PERF_RECORD_COMPRESSED` (one zstd stream across
//! all compressed records, records may span them) and `COMPRESSED2` (same data after a size
//! field; newer perf than ours, so untested against a real file); features build-id, cmdline and
//! event_desc; MMAP/MMAP2 (incl. build-id variant), COMM, FORK, EXIT, SAMPLE, LOST. Other known
//! record types are skipped, unknown ones are skipped and counted. Little-endian files only.
//!
//! What the events hold:
//! - Samples: `callchain` is the user part of PERF_SAMPLE_CALLCHAIN, leaf first, with
//!   PERF_CONTEXT_* markers and kernel/hypervisor/guest frames removed (frames before the first
//!   marker count as the sample's cpumode). For a user-mode sample `callchain[0]` is the sample IP;
//!   for a kernel-mode sample it is the user address the kernel was entered from. `branches` is
//!   the branch stack in perf order (newest first). `period` is 1 when not recorded.
//! - Mmaps: `executable` is `prot & PROT_EXEC` for MMAP2 and "not PERF_RECORD_MISC_MMAP_DATA" for
//!   MMAP (perf's synthesized kernel MMAP2 has prot 0). Build ids from MMAP2 have their real length.
//! - [`InputInfo::build_ids`]: files without PERF_RECORD_MISC_BUILD_ID_SIZE (older perf) store 20
//!   bytes, zero-padded, as perf prints them; compare ignoring trailing zero bytes.
//!
//! Order: perf writes per-CPU buffers one after another within a "round", so file order is not
//! time order, and a sample can precede the mmap of its binary. [`read_perf_data`],
//! [`read_perf_data_stream`] and [`PerfData::decode_in_time_order`] deliver events in time order
//! exactly like perf script (module `order`); [`PerfData::decode`] keeps file order.
//!
//! Parallel decoding (file mode): [`PerfData::split_data`] cuts the data section into ranges of
//! whole records, and [`PerfData::decode`] decodes one range with its own state (file order; a
//! caller that needs mmaps before samples can take the mmaps from a first pass).

pub mod abi;
mod ahead;
mod attr;
mod bytes;
mod decode;
mod features;
mod layout;
mod order;
#[cfg(test)]
mod tests;

use std::fmt;
use std::io::{self, Read};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use abi::{FILE_HEADER_SIZE, MAGIC};
pub use ahead::WalkAhead;
use attr::Attr;
pub(crate) use bytes::c_str;
use bytes::{Loc, prefetch_lines, u16_at, u32_at, u64_at};
use decode::{Decoder, Sink, malformed};

use crate::addr::{FileOffset, RuntimeAddr};
use crate::error::Error;
use crate::input::{
    BranchStack, CallChain, Deferred, InputFile, InputInfo, PerfEvent, PlacedSample, RawWord,
    Sample,
};
const PIPE_HEADER_SIZE: u64 = 16;
/// How often (in input bytes) [`PerfData::decode_in_time_order_releasing`] reports progress:
/// also how far the pages its caller releases lag behind.
const CONSUMED_STEP: usize = 1 << 20;
/// How far ahead of the record being read the input's pages are touched.
const PREFETCH_AHEAD: usize = 4096;
/// perf's `perf_file_attr`: the attr followed by the (offset, size) section of its ids.
const IDS_SECTION_SIZE: usize = 16;

/// What a read produced besides events.
#[derive(Clone, Debug, Default)]
pub struct ReadReport {
    pub info: InputInfo,
    pub pipe_mode: bool,
    /// Records decoded, including those inside compressed records.
    pub records: u64,
    pub samples: u64,
    /// Records of a type this reader does not know (skipped).
    pub unknown_records: u64,
    /// Samples whose event id matched no attr (skipped).
    pub samples_without_attr: u64,
    /// Samples with bytes after every field their `sample_type` names (sample_type bits newer
    /// than this reader); decoded anyway.
    pub samples_with_unknown_tail: u64,
    /// Sum of PERF_RECORD_LOST counts: events the kernel dropped while recording.
    pub lost_events: u64,
    /// Set when the input ended early; the events before it were delivered.
    pub truncated: Option<Truncation>,
    /// Non-fatal problems (bad feature sections and the like), each naming file and offset.
    pub warnings: Vec<String>,
}

impl ReadReport {
    /// The warnings to show for `path`: the reader's own, then the truncation, lost events and
    /// samples of no known event.
    pub fn into_warnings(self, path: &Path) -> Vec<String> {
        let mut warnings = self.warnings;
        if let Some(t) = &self.truncated {
            warnings.push(format!("{}: {t}", path.display()));
        }
        if self.lost_events > 0 {
            warnings.push(format!(
                "{}: the kernel lost {} events while recording",
                path.display(),
                self.lost_events
            ));
        }
        if self.samples_without_attr > 0 {
            warnings.push(format!(
                "{}: {} samples skipped: they name no event of the file (several events and \
                 samples without an id, or an id no event lists)",
                path.display(),
                self.samples_without_attr
            ));
        }
        warnings
    }
}

/// Where and why reading stopped early.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Truncation {
    /// Offset of the first byte that could not be used (the start of the incomplete record).
    pub offset: u64,
    pub reason: String,
}

impl fmt::Display for Truncation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "input truncated at byte offset {}: {}; using the events before it",
            self.offset, self.reason
        )
    }
}

/// Reads a whole perf.data held in memory (file or pipe mode), delivering events in time order.
pub fn read_perf_data(
    bytes: &[u8],
    path: &Path,
    on_event: impl FnMut(PerfEvent<'_>),
) -> Result<ReadReport, Error> {
    PerfData::parse(bytes, path)?.decode_in_time_order(on_event)
}

/// Reads perf.data from a stream such as stdin, delivering events in time order. Pipe mode is
/// decoded as it arrives, holding at most about two rounds of records for ordering; a file-mode
/// stream is read into memory first (its header points backwards and forwards).
pub fn read_perf_data_stream(
    mut reader: impl Read,
    path: &Path,
    mut on_event: impl FnMut(PerfEvent<'_>),
) -> Result<ReadReport, Error> {
    let io_err = |source| Error::Io { path: path.to_path_buf(), source };
    let mut header = [0u8; PIPE_HEADER_SIZE as usize];
    let got = read_full(&mut reader, &mut header).map_err(io_err)?;
    let is_pipe = got == header.len() && check_magic(&header, path)? == PIPE_HEADER_SIZE;
    if !is_pipe {
        let mut all = header[..got].to_vec();
        reader.read_to_end(&mut all).map_err(io_err)?;
        return read_perf_data(&all, path, on_event);
    }
    let mut reader = io::BufReader::with_capacity(1 << 20, reader);
    let mut decoder = Decoder::new(path);
    decoder.report.pipe_mode = true;
    decoder.order_by_time(&[]);
    let sink: &mut Sink<'_> = &mut on_event;
    let mut offset = PIPE_HEADER_SIZE;
    let mut rec = Vec::with_capacity(usize::from(u16::MAX));
    loop {
        let mut head = [0u8; 8];
        let got = read_full(&mut reader, &mut head).map_err(io_err)?;
        if got == 0 {
            break;
        }
        if got < head.len() {
            decoder.report.truncated =
                Some(cut(offset, format!("record header cut short ({got} of 8 bytes)")));
            break;
        }
        let size = usize::from(u16::from_le_bytes([head[6], head[7]]));
        if size < head.len() {
            return Err(malformed(
                path,
                Loc::plain(offset),
                6,
                format!("record size {size} is smaller than its 8-byte header"),
            ));
        }
        rec.clear();
        rec.extend_from_slice(&head);
        rec.resize(size, 0);
        let got = read_full(&mut reader, &mut rec[8..]).map_err(io_err)?;
        if got < size - 8 {
            let rtype = u32::from_le_bytes([head[0], head[1], head[2], head[3]]);
            decoder.report.truncated = Some(cut(
                offset,
                format!(
                    "record of type {rtype} and {size} bytes cut short after {} bytes",
                    got + 8
                ),
            ));
            break;
        }
        let extra = decoder.record(&rec, None, Loc::plain(offset), sink)?;
        offset += size as u64;
        if extra > 0 {
            let skipped =
                io::copy(&mut (&mut reader).take(extra), &mut io::sink()).map_err(io_err)?;
            if skipped < extra {
                decoder.report.truncated = Some(cut(
                    offset,
                    format!(
                        "payload of {extra} bytes after a record cut short after {skipped} bytes"
                    ),
                ));
                break;
            }
            offset += extra;
        }
    }
    decoder.finish(offset, sink)?;
    cut_before_first_record(path, &decoder.report)?;
    Ok(decoder.report)
}

/// Maps a perf.data file read-only, for [`PerfData::parse`].
pub fn map_file(path: &Path) -> Result<memmap2::Mmap, Error> {
    let io_err = |source| Error::Io { path: path.to_path_buf(), source };
    let file = std::fs::File::open(path).map_err(io_err)?;
    // SAFETY: the file is only read; profgen does not guard against another process truncating
    // it while mapped (perf does not rewrite finished files).
    unsafe { memmap2::Mmap::map(&file) }.map_err(io_err)
}

/// Drops the pages of a mapped input that will not be read again, for the `on_consumed` of
/// [`PerfData::decode_in_time_order_releasing`], so resident memory stays flat however large the
/// file (mapped pages count as resident). Shared by the threads that finish with the input's
/// records: one drops pages at a time, another finding it busy leaves them to the next call.
pub struct PageReleaser<'m> {
    map: &'m memmap2::Mmap,
    /// Every page before this (page-aligned) position is released.
    released: Mutex<usize>,
}

const PAGE: usize = 4096;

impl<'m> PageReleaser<'m> {
    pub fn new(map: &'m memmap2::Mmap) -> Self {
        PageReleaser { map, released: Mutex::new(0) }
    }

    /// The length of the mapped input.
    pub fn mapped_len(&self) -> usize {
        self.map.len()
    }

    /// Releases the pages before `upto`.
    pub fn release_before(&self, upto: usize) {
        self.release_before_except(upto, &mut []);
    }

    /// Releases the pages before `upto` but those that overlap a range of `held` (input still to
    /// be read): a range read late (a batch a worker is slow on) keeps only its own pages, not
    /// all those after it. Does nothing, and says so (`false`), while another thread releases
    /// pages.
    pub fn release_before_except(&self, upto: usize, held: &mut [Range<usize>]) -> bool {
        let Ok(mut released) = self.released.try_lock() else { return false };
        let (free, now) = free_pages(*released, upto, held);
        for r in free {
            self.advise(r.start, r.end);
        }
        *released = now;
        true
    }

    /// Has the kernel map the pages of `range`, by reading a byte of each: its work of a first
    /// read's page faults (it maps the pages around each fault), done by a thread with nothing
    /// else to do rather than by the one that reads the records there. (`MADV_POPULATE_READ`
    /// costs more: it walks the page tables page by page besides.)
    pub fn populate(&self, range: Range<usize>) {
        let to = range.end.min(self.map.len());
        for at in (range.start..to).step_by(PAGE) {
            std::hint::black_box(self.map[at]);
        }
    }

    /// Drops the pages of `[from, to)` (page-aligned).
    fn advise(&self, from: usize, to: usize) {
        let to = to.min(self.map.len() & !(PAGE - 1));
        if to > from {
            // SAFETY: the mapping is a read-only file mapping, so DONTNEED only drops pages that a
            // later read faults back in from the file unchanged: a page dropped while still
            // needed (a span a caller missed) costs a fault, not a wrong byte.
            let _ = unsafe {
                self.map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, from, to - from)
            };
        }
    }
}

/// The whole pages from `released` (page-aligned) to `upto` that overlap no range of `held`
/// (sorted here), and how far from the start every page is then free.
fn free_pages(
    released: usize,
    upto: usize,
    held: &mut [Range<usize>],
) -> (Vec<Range<usize>>, usize) {
    held.sort_unstable_by_key(|r| r.start);
    let floor = |p: usize| p & !(PAGE - 1);
    let mut free = Vec::new();
    let (mut from, mut prefix_end) = (released, floor(upto).max(released));
    for r in held.iter().filter(|r| r.end > released && r.start < upto) {
        prefix_end = prefix_end.min(floor(r.start).max(released));
        if floor(r.start) > from {
            free.push(from..floor(r.start));
        }
        from = from.max(r.end.next_multiple_of(PAGE));
    }
    if floor(upto) > from {
        free.push(from..floor(upto));
    }
    (free, prefix_end)
}

/// `--perfdata` arguments → files: `DIR` stands for every entry of DIR in name order (e.g. a
/// directory of recordings collected from many hosts), other paths for themselves. Directory
/// entries are not opened here: one that is not a regular file (symlinks followed) comes back
/// unusable, so a FIFO never blocks the run; whether a regular file is a perf.data is found when
/// it is read. A directory that cannot be listed, or is empty, is itself unusable.
pub fn list_perf_data_files(given: &[PathBuf]) -> Vec<InputFile> {
    let mut out = Vec::new();
    for path in given {
        let named = |unusable| InputFile { unusable, ..InputFile::named(path) };
        if !path.is_dir() {
            out.push(named(None));
            continue;
        }
        let entries = std::fs::read_dir(path)
            .and_then(|dir| dir.map(|e| e.map(|e| e.path())).collect::<std::io::Result<Vec<_>>>());
        let mut entries = match entries {
            Ok(entries) if entries.is_empty() => {
                out.push(named(Some(Error::BadFile {
                    path: path.clone(),
                    what: "the directory is empty".into(),
                })));
                continue;
            }
            Ok(entries) => entries,
            Err(source) => {
                out.push(named(Some(Error::Io { path: path.clone(), source })));
                continue;
            }
        };
        entries.sort();
        out.extend(entries.into_iter().map(|p| {
            let unusable = match std::fs::metadata(&p) {
                Ok(m) if m.is_file() => None,
                Ok(m) => Some(Error::BadFile {
                    path: p.clone(),
                    what: format!("not a regular file but {}", file_kind(&m.file_type())),
                }),
                Err(source) => Some(Error::Io { path: p.clone(), source }),
            };
            InputFile { path: p, in_directory: true, unusable }
        }));
    }
    out
}

/// What a file that is not a regular file is, for messages.
pub fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else {
        "a special file"
    }
}

/// An executable file an input maps (see [`PerfData::mapped_executables`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MappedFile {
    pub path: String,
    pub build_id: Option<Vec<u8>>,
}

/// A parsed perf.data held in memory: header, attrs and features decoded, records not yet.
pub struct PerfData<'a> {
    bytes: &'a [u8],
    data: Range<usize>,
    /// Decoder state after the header (attrs, info, warnings); cloned for every decode.
    template: Decoder<'a>,
}

impl<'a> PerfData<'a> {
    pub fn parse(bytes: &'a [u8], path: &'a Path) -> Result<Self, Error> {
        let header_size = check_magic(bytes, path)?;
        let mut template = Decoder::new(path);
        if header_size == PIPE_HEADER_SIZE {
            template.report.pipe_mode = true;
            let data = PIPE_HEADER_SIZE as usize..bytes.len();
            return Ok(PerfData { bytes, data, template });
        }
        if header_size < FILE_HEADER_SIZE as u64 || bytes.len() < FILE_HEADER_SIZE {
            return Err(malformed(
                path,
                Loc::plain(8),
                0,
                format!(
                    "expected a perf.data file header of at least {FILE_HEADER_SIZE} bytes (header says {header_size}, file has {})",
                    bytes.len()
                ),
            ));
        }
        let section =
            |at: usize| (u64_at(bytes, at).unwrap_or(0), u64_at(bytes, at + 8).unwrap_or(0));
        parse_attrs(bytes, path, section(24), &mut template)?;

        let (data_offset, mut data_size) = section(40);
        let len = bytes.len() as u64;
        if data_size == 0 && data_offset < len {
            // perf writes the sizes when it finishes; a killed `perf record` leaves them zero.
            template.report.warnings.push(format!(
                "{}: header has data size 0 (recording not finished?); reading records up to the end of the file",
                path.display()
            ));
            data_size = len - data_offset;
        } else if data_size == 0 {
            template.report.truncated = Some(cut(
                len,
                format!(
                    "header has data size 0 and the file ends at the data section ({len} bytes): recording not finished"
                ),
            ));
        }
        let data_end = data_offset.saturating_add(data_size);
        if data_end > len {
            template.report.truncated = Some(cut(
                len.max(data_offset.min(len)),
                format!(
                    "data section [{data_offset}, {data_end}) extends past the end of the file ({len} bytes)"
                ),
            ));
        } else if template.report.truncated.is_none() {
            parse_features(bytes, path, data_end, &mut template);
        }
        let data = clamp(data_offset, len)..clamp(data_end, len);
        Ok(PerfData { bytes, data, template })
    }

    pub fn info(&self) -> &InputInfo {
        &self.template.report.info
    }

    pub fn is_pipe(&self) -> bool {
        self.template.report.pipe_mode
    }

    /// Byte range of the records (clipped to the file).
    pub fn data_range(&self) -> Range<usize> {
        self.data.clone()
    }

    /// Splits the data section into at most `max_chunks` ranges of whole records, for decoding in
    /// parallel. Returns a single range when records depend on earlier ones: pipe mode (attrs
    /// arrive as records) or compressed records (one zstd stream runs through all of them).
    pub fn split_data(&self, max_chunks: usize) -> Vec<Range<usize>> {
        let whole = vec![self.data.clone()];
        if self.is_pipe() || max_chunks <= 1 {
            return whole;
        }
        let target = (self.data.len() / max_chunks).max(1);
        let mut cuts = vec![self.data.start];
        let mut pos = self.data.start;
        while pos < self.data.end {
            let rtype = u32_at(self.bytes, pos).unwrap_or(0);
            let size = usize::from(u16_at(self.bytes, pos + 6).unwrap_or(0));
            if rtype == abi::COMPRESSED || rtype == abi::COMPRESSED2 {
                return whole;
            }
            if size < 8 || rtype == abi::HEADER_TRACING_DATA || rtype == abi::AUXTRACE {
                break; // let one decoder meet (and report) it
            }
            pos += size;
            if pos - cuts[cuts.len() - 1] >= target && pos < self.data.end {
                cuts.push(pos);
            }
        }
        cuts.push(self.data.end);
        cuts.windows(2).map(|w| w[0]..w[1]).collect()
    }

    /// Decodes all records, delivering events in time order like perf script.
    pub fn decode_in_time_order(
        &self,
        mut on_event: impl FnMut(PerfEvent<'_>),
    ) -> Result<ReadReport, Error> {
        self.decode_range(self.data_range(), true, &mut on_event, &mut |_, _| {})
    }

    /// [`decode_in_time_order`](Self::decode_in_time_order), also telling `on_consumed(upto,
    /// read)` from time to time that the input before `upto` will not be read again, so a caller
    /// that mapped the file can drop those pages and keep its memory flat, and that the records
    /// before `read` have been read. `on_event` is taken as the decoder's own `&mut dyn` (a caller
    /// holding one passes it on, rather than through a second indirect call that copies every
    /// event).
    /// Once `placing` (if given) is set, the samples whose fields fill their record and name its
    /// thread come in runs as [`PerfEvent::Placed`], only checked that far, for
    /// [`SampleBodies::read_placed`] to read whole.
    pub fn decode_in_time_order_releasing(
        &self,
        on_event: &mut dyn FnMut(PerfEvent<'_>),
        mut on_consumed: impl FnMut(usize, usize),
        placing: Option<Arc<AtomicBool>>,
    ) -> Result<ReadReport, Error> {
        let decoder = self.placing_decoder(placing);
        self.decode_with(decoder, self.data_range(), true, on_event, &mut on_consumed)
    }

    /// [`decode_in_time_order_releasing`](Self::decode_in_time_order_releasing), deferring sample
    /// bodies: samples come without their call chain and branch stack (checked, not copied), with
    /// [`Sample::record`] set, for [`SampleBodies`] to decode on other threads. Samples inside
    /// compressed records, and all samples in pipe mode, are decoded whole. Once `placing` (if
    /// given) is set, the samples whose fields fill their record and name its thread come in
    /// runs as [`PerfEvent::Placed`], only checked that far. With `ahead` (this input's, from
    /// [`SampleBodies::walk_ahead`]), records another thread walked are queued as it noted them.
    pub fn decode_in_time_order_deferred(
        &self,
        on_event: &mut dyn FnMut(PerfEvent<'_>),
        mut on_consumed: impl FnMut(usize, usize),
        placing: Option<Arc<AtomicBool>>,
        ahead: Option<&WalkAhead<'_>>,
    ) -> Result<ReadReport, Error> {
        let mut decoder = self.placing_decoder(placing);
        decoder.defer_bodies = !self.is_pipe();
        let (range, sink) = (self.data_range(), on_event);
        let report = self.decode_walking(decoder, range, true, sink, &mut on_consumed, ahead);
        if let Some(ahead) = ahead {
            ahead.stop();
        }
        report
    }

    /// A decoder that hands samples out by place once `placing` (if given) is set.
    fn placing_decoder(&self, placing: Option<Arc<AtomicBool>>) -> Decoder<'a> {
        let mut decoder = self.template.fork();
        decoder.placing = placing;
        decoder.placeable_attrs = decoder.layouts().len();
        decoder
    }

    /// A decoder of the sample records that a deferred decode hands out by position; `None` in
    /// pipe mode, whose attrs arrive as records (its samples are not deferred).
    pub fn sample_bodies(&self) -> Option<SampleBodies<'a>> {
        let layouts = self.template.layouts().to_vec();
        (!self.is_pipe()).then(|| {
            // The walk notes placeable samples as a deferred decode finds them.
            let mut decoder = self.template.fork();
            decoder.placeable_attrs = layouts.len();
            let ahead = WalkAhead::new(decoder, self.bytes, self.data.clone());
            SampleBodies {
                bytes: self.bytes,
                layouts,
                copy: Vec::new(),
                ahead: ahead.map(Arc::new),
            }
        })
    }

    /// Decodes the records in `range` (the whole [`data_range`](Self::data_range) or a piece from
    /// [`split_data`](Self::split_data)) in file order. The report includes the header's info and
    /// warnings.
    pub fn decode(
        &self,
        range: Range<usize>,
        mut on_event: impl FnMut(PerfEvent<'_>),
    ) -> Result<ReadReport, Error> {
        self.decode_range(range, false, &mut on_event, &mut |_, _| {})
    }

    /// The executable files the input maps (MMAP/MMAP2 events with PROT_EXEC, anonymous and
    /// `[…]` mappings left out), each with its build id when the event or the build-id table
    /// gives one, in the order first mapped. Samples are skipped, not decoded, so this costs a
    /// small part of a full read: what a job that profiles several binaries reads first, to know
    /// which of them the input holds.
    pub fn mapped_executables(&self) -> Result<Vec<MappedFile>, Error> {
        let mut found: Vec<MappedFile> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut on_event = |ev: PerfEvent<'_>| {
            if let PerfEvent::Mmap(m) = ev {
                let path = m.path.into_owned();
                let named = !path.starts_with('[') && !path.starts_with("//anon");
                if m.executable && named && seen.insert((path.clone(), m.build_id.clone())) {
                    found.push(MappedFile { path, build_id: m.build_id });
                }
            }
        };
        let mut decoder = self.template.fork();
        decoder.skip_samples = true;
        let report =
            self.decode_with(decoder, self.data_range(), false, &mut on_event, &mut |_, _| {})?;
        // The first build id listed for each path, by path: a scan of the list per mapped file
        // took time quadratic in the input (60,000 of each, 12 MB: 10.7 s).
        let mut known: hashbrown::HashMap<&str, &Vec<u8>> = hashbrown::HashMap::new();
        for (path, id) in &report.info.build_ids {
            known.entry(path.as_str()).or_insert(id);
        }
        for f in &mut found {
            if f.build_id.is_none() {
                f.build_id = known.get(f.path.as_str()).map(|id| (*id).clone());
            }
        }
        Ok(found)
    }

    fn decode_range(
        &self,
        range: Range<usize>,
        by_time: bool,
        sink: &mut Sink<'_>,
        on_consumed: &mut dyn FnMut(usize, usize),
    ) -> Result<ReadReport, Error> {
        self.decode_with(self.template.fork(), range, by_time, sink, on_consumed)
    }

    /// Decodes the records in `range` with `decoder` (a fork of the template, set up).
    fn decode_with(
        &self,
        decoder: Decoder<'a>,
        range: Range<usize>,
        by_time: bool,
        sink: &mut Sink<'_>,
        on_consumed: &mut dyn FnMut(usize, usize),
    ) -> Result<ReadReport, Error> {
        self.decode_walking(decoder, range, by_time, sink, on_consumed, None)
    }

    /// [`decode_with`](Self::decode_with), taking the records `ahead` walked where they start.
    fn decode_walking(
        &self,
        mut decoder: Decoder<'a>,
        range: Range<usize>,
        by_time: bool,
        sink: &mut Sink<'_>,
        on_consumed: &mut dyn FnMut(usize, usize),
        mut ahead: Option<&WalkAhead<'_>>,
    ) -> Result<ReadReport, Error> {
        if by_time {
            decoder.order_by_time(self.bytes);
        }
        let end = range.end.min(self.data.end);
        let data = self.bytes.get(range.start..end).unwrap_or_default();
        let mut pos = 0;
        let mut reported = 0;
        // Where the walked records start (relative to `range`), once known; and the next
        // position at which to report progress or look for them.
        let mut take_at = usize::MAX;
        let mut look_at = CONSUMED_STEP;
        while pos < data.len() {
            // A load ahead has the kernel map the page there (and the pages around it) before the
            // walk gets there. Lines are not prefetched: the walk reads each record's first lines
            // in file order, which the CPU's own prefetchers follow, and the rest of a record is
            // read where it is counted, with hints of its own (`TimeOrder::prefetch`,
            // `SampleBodies::prefetch`); loading every line here as well cost more than it saved.
            if let Some(b) = data.get(pos + PREFETCH_AHEAD) {
                std::hint::black_box(*b);
            }
            let loc = Loc::plain((range.start + pos) as u64);
            let Some(size) = u16_at(data, pos + 6) else {
                let left = data.len() - pos;
                decoder.report.truncated =
                    Some(cut(loc.offset, format!("record header cut short ({left} of 8 bytes)")));
                break;
            };
            let size = usize::from(size);
            if size < 8 {
                return Err(malformed(
                    decoder.path,
                    loc,
                    6,
                    format!("record size {size} is smaller than its 8-byte header"),
                ));
            }
            let Some(rec) = data.get(pos..pos + size) else {
                let rtype = u32_at(data, pos).unwrap_or(0);
                let left = data.len() - pos;
                decoder.report.truncated = Some(cut(
                    loc.offset,
                    format!("record of type {rtype} and {size} bytes cut short after {left} bytes"),
                ));
                break;
            };
            let extra = decoder.record(rec, Some(range.start + pos), loc, sink)?;
            pos += size;
            let left = (data.len() - pos) as u64;
            if extra > left {
                decoder.report.truncated = Some(cut(
                    (range.start + pos) as u64,
                    format!("payload of {extra} bytes after a record cut short after {left} bytes"),
                ));
                pos = data.len();
                break;
            }
            pos += extra as usize;
            if pos >= look_at {
                if pos - reported >= CONSUMED_STEP {
                    reported = pos;
                    consumed(&decoder, on_consumed, range.start + pos);
                }
                if let Some(walk) = ahead {
                    if pos == take_at && walk.matches(&decoder) {
                        // Queued as `record` would, reporting progress as this loop does.
                        while let Some(records) = walk.take(range.start + pos) {
                            for r in records {
                                let len = usize::from(r.len);
                                let Some(rec) = data.get(pos..pos + len) else { break };
                                decoder.queue_walked(r, rec, range.start + pos, sink)?;
                                pos += len;
                                if pos - reported >= CONSUMED_STEP {
                                    reported = pos;
                                    consumed(&decoder, on_consumed, range.start + pos);
                                }
                            }
                        }
                    }
                    take_at = match walk.matches(&decoder) {
                        true => walk
                            .next_start(range.start + pos)
                            .map_or(usize::MAX, |s| s - range.start),
                        // Its attrs changed: nothing walked can be taken.
                        false => {
                            walk.stop();
                            ahead = None;
                            usize::MAX
                        }
                    };
                }
                look_at = (reported + CONSUMED_STEP).min(take_at);
            }
        }
        decoder.finish((range.start + pos) as u64, sink)?;
        if range.start == self.data.start {
            cut_before_first_record(decoder.path, &decoder.report)?;
        }
        Ok(decoder.report)
    }
}

/// Tells `on_consumed` that the records before `read` are read, and which input the queue of
/// `decoder` still holds.
fn consumed(decoder: &Decoder<'_>, on_consumed: &mut dyn FnMut(usize, usize), read: usize) {
    on_consumed(decoder.oldest_queued_input_pos().unwrap_or(read), read);
}

/// Reads the call chains and branch stacks of the samples that a deferred decode
/// ([`PerfData::decode_in_time_order_deferred`]) handed out by position; one per worker thread.
pub struct SampleBodies<'a> {
    bytes: &'a [u8],
    /// The fixed layout of each attr's samples, if it has one: a worker reads such a sample
    /// whole ([`sample`](Self::sample)).
    layouts: Vec<Option<layout::SampleLayout>>,
    /// The user frames of a call chain that are not one run in its record, copied.
    copy: Vec<RawWord>,
    /// The input's records walked ahead of the reading thread (an input large enough).
    ahead: Option<Arc<WalkAhead<'a>>>,
}

impl<'a> SampleBodies<'a> {
    /// Another reader of the same input, for another thread.
    pub fn fork(&self) -> Self {
        SampleBodies {
            bytes: self.bytes,
            layouts: self.layouts.clone(),
            copy: Vec::new(),
            ahead: self.ahead.clone(),
        }
    }

    /// The walk of the input's records ahead of the reading thread, for a worker with nothing
    /// else to do ([`WalkAhead::walk`]) and the reading thread's decode.
    pub fn walk_ahead(&self) -> Option<&Arc<WalkAhead<'a>>> {
        self.ahead.as_ref()
    }

    /// Asks the CPU to load the call chain and branch stack of the deferred sample `d`, a hint
    /// for the sample after the one being counted: the reading thread read only the record's
    /// first lines, and counting a sample takes about a memory latency, so its bytes are in
    /// cache when its turn comes rather than each line stalling the count.
    pub fn prefetch(&self, d: &Deferred) {
        // One run of lines from the first to the end of the last (what lies between, if anything,
        // is a few words of the same record: cheaper than a second loop).
        let start = d.record + usize::from(d.callchain.0.min(d.branches.0));
        let end = (d.record + usize::from(d.branches.0) + usize::from(d.branches.1) * 24)
            .max(d.record + usize::from(d.callchain.0) + usize::from(d.callchain.1) * 8);
        prefetch_lines(self.bytes, start..end);
    }

    /// The `len` bytes of the record at `record`, a hint as in [`prefetch`](Self::prefetch).
    #[inline]
    pub fn prefetch_record(&self, record: usize, len: usize) {
        prefetch_lines(self.bytes, record..record + len);
    }

    /// The sample of a [`PerfEvent::Placed`] (its `record`, `attr` and `len`), read by the
    /// attr's layout: the reading thread checked that its fields fill the record, so it is
    /// read without checking them again. Inlined in [`read_placed`](Self::read_placed):
    /// called, its frame and the returned Option<Sample> cost ~20 instructions a sample.
    #[inline(always)]
    pub fn sample(&mut self, record: usize, attr: usize, len: usize) -> Option<Sample<'_>> {
        let layout = self.layouts.get(attr)?.as_ref()?;
        let rec = self.bytes.get(record..record.checked_add(len)?)?;
        let f = layout.read_filled(rec.get(8..)?);
        let user = u16_at(rec, 4)? & abi::MISC_CPUMODE_MASK == abi::MISC_USER;
        let (callchain, branches) =
            decode::stacks(rec, (f.callchain, f.branches), user, &mut self.copy);
        let (pid, tid) = f.pid_tid();
        Some(Sample {
            pid,
            tid,
            time: f.time,
            attr_index: attr,
            ip: RuntimeAddr(f.ip),
            period: f.period,
            repeat: 1,
            callchain,
            branches,
            has_callchain: layout.callchain,
            record: None,
        })
    }

    /// Reads the samples of a run handed out by place ([`PerfEvent::Placed`], or a batch's:
    /// `place` gives each one's) in order, each as [`sample`](Self::sample) does, and gives them
    /// to `add`, asking for the next one's record ahead: the loop of the workers and of a
    /// one-thread read alike.
    #[inline(always)]
    pub fn read_placed<P>(
        &mut self,
        run: &[P],
        place: impl Fn(&P) -> PlacedSample,
        mut add: impl FnMut(&Sample<'_>),
    ) {
        for (i, p) in run.iter().enumerate() {
            if let Some(n) = run.get(i + 1).map(&place) {
                self.prefetch_record(n.record, n.len.into());
            }
            let p = place(p);
            if let Some(s) = self.sample(p.record, p.attr.into(), p.len.into()) {
                add(&s);
            }
        }
    }

    /// The pid, start, length and file offset of the mmap event whose record lies at `record`
    /// (an [`MmapEvent::record`](crate::input::MmapEvent::record) of this input, whose decode
    /// checked it): what a copy of a deferring mapper's map applies; `None` if no MMAP record lies
    /// there.
    #[inline]
    pub fn mmap_span(&self, record: usize) -> Option<(i32, RuntimeAddr, u64, FileOffset)> {
        let size = usize::from(u16_at(self.bytes, record.checked_add(6)?)?);
        let rec = self.bytes.get(record..record.checked_add(size)?)?;
        let rtype = u32_at(rec, 0)?;
        if rtype != abi::RECORD_MMAP && rtype != abi::RECORD_MMAP2 {
            return None;
        }
        let f = decode::mmap_fixed(rec)?;
        Some((f.pid, f.start, f.len, f.pgoff))
    }

    /// The call chain and branch stack of the deferred sample `d`, read in place where
    /// [`Sample::record`] says (the reading thread checked that they lie there).
    #[inline]
    pub fn stacks(&mut self, d: &Deferred) -> (CallChain<'_>, BranchStack<'_>) {
        let rec = self.bytes.get(d.record..).unwrap_or_default();
        decode::stacks(rec, (d.callchain, d.branches), d.user, &mut self.copy)
    }
}

/// A read that stopped at a cut before any complete record has nothing to give: an error, not
/// an empty result (whose empty profile would replace the last good one).
fn cut_before_first_record(path: &Path, report: &ReadReport) -> Result<(), Error> {
    match &report.truncated {
        Some(t) if report.records == 0 => Err(Error::Malformed {
            path: path.to_path_buf(),
            offset: t.offset,
            what: format!("the input ends before its first complete record: {}", t.reason),
        }),
        _ => Ok(()),
    }
}

fn cut(offset: u64, reason: String) -> Truncation {
    Truncation { offset, reason }
}

fn clamp(v: u64, len: u64) -> usize {
    v.min(len) as usize
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
fn read_full(reader: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Checks the magic and returns the header size (16 in pipe mode).
fn check_magic(bytes: &[u8], path: &Path) -> Result<u64, Error> {
    let bad = |what: String| Error::BadFile { path: path.to_path_buf(), what };
    if bytes.len() < PIPE_HEADER_SIZE as usize {
        return Err(bad(format!(
            "not a perf.data file: {} bytes is too short for the 16-byte perf.data header",
            bytes.len()
        )));
    }
    match &bytes[..8] {
        m if m == MAGIC => {}
        b"2ELIFREP" => return Err(bad("big-endian perf.data files are not supported".into())),
        b"PERFFILE" => {
            return Err(bad(
                "version 1 perf.data files are not supported (expected PERFILE2)".into()
            ));
        }
        m => {
            return Err(malformed(
                path,
                Loc::plain(0),
                0,
                format!(
                    "expected the perf.data magic \"PERFILE2\", found {:?}",
                    String::from_utf8_lossy(m)
                ),
            ));
        }
    }
    Ok(u64_at(bytes, 8).unwrap_or(0))
}

/// File-mode attrs section: `perf_file_attr` entries of the header's `attr_size` bytes each.
fn parse_attrs(
    bytes: &[u8],
    path: &Path,
    (offset, size): (u64, u64),
    decoder: &mut Decoder<'_>,
) -> Result<(), Error> {
    let entry_size = u64_at(bytes, 16).unwrap_or(0);
    let min = (abi::ATTR_SIZE_VER0 + IDS_SECTION_SIZE) as u64;
    if entry_size < min || entry_size > u64::from(u16::MAX) {
        return Err(malformed(
            path,
            Loc::plain(16),
            0,
            format!("expected an attr size of at least {min} bytes, found {entry_size}"),
        ));
    }
    let section = usize::try_from(offset)
        .ok()
        .zip(usize::try_from(size).ok())
        .and_then(|(o, s)| bytes.get(o..o.checked_add(s)?))
        .ok_or_else(|| {
            malformed(
                path,
                Loc::plain(24),
                0,
                format!(
                    "attrs section [{offset}, +{size}) extends past the end of the file ({} bytes)",
                    bytes.len()
                ),
            )
        })?;
    let entry_size = entry_size as usize;
    if section.is_empty() {
        return Err(malformed(
            path,
            Loc::plain(24),
            0,
            "expected at least one event attr, the attrs section is empty",
        ));
    }
    // perf writes each event's ids apart, so together they fit in the file; ids sections
    // claiming more overlap, and reading each in full took time quadratic in the file's size
    // (10,000 events each naming the whole 800 KB file as its ids: 20 s).
    let mut ids_left = bytes.len();
    for (i, entry) in section.chunks_exact(entry_size).enumerate() {
        let at = offset + (i * entry_size) as u64;
        let attr_bytes = &entry[..entry_size - IDS_SECTION_SIZE];
        let attr = Attr::parse(attr_bytes)
            .ok_or_else(|| malformed(path, Loc::plain(at), 0, "attr shorter than 64 bytes"))?;
        let ids_at = entry_size - IDS_SECTION_SIZE;
        let (ids_offset, ids_size) =
            (u64_at(entry, ids_at).unwrap_or(0), u64_at(entry, ids_at + 8).unwrap_or(0));
        let ids = usize::try_from(ids_offset)
            .ok()
            .zip(usize::try_from(ids_size).ok())
            .and_then(|(o, s)| bytes.get(o..o.checked_add(s)?));
        let Some(ids) = ids else {
            decoder.report.warnings.push(format!(
                "{}: at byte offset {at}: ids of event {i} lie outside the file; its samples cannot be told apart",
                path.display()
            ));
            decoder.add_attr(attr, []);
            continue;
        };
        let Some(left) = ids_left.checked_sub(ids.len()) else {
            decoder.report.warnings.push(format!(
                "{}: at byte offset {at}: ids of event {i} ({ids_size} bytes at {ids_offset}) overlap those of earlier events, which together take more than the file's {} bytes; its samples cannot be told apart",
                path.display(),
                bytes.len()
            ));
            decoder.add_attr(attr, []);
            continue;
        };
        ids_left = left;
        decoder
            .add_attr(attr, ids.chunks_exact(8).filter_map(|b| u64_at(b, 0)).collect::<Vec<_>>());
    }
    Ok(())
}

/// Feature sections: a table of (offset, size) right after the data, one per set feature bit.
fn parse_features(bytes: &[u8], path: &Path, table_at: u64, decoder: &mut Decoder<'_>) {
    let mut entry = table_at;
    for bit in 0..256u32 {
        let word = u64_at(bytes, 72 + 8 * (bit as usize / 64)).unwrap_or(0);
        if word & (1 << (bit % 64)) == 0 {
            continue;
        }
        let at = entry;
        entry += IDS_SECTION_SIZE as u64;
        let section = usize::try_from(at)
            .ok()
            .and_then(|at| Some((u64_at(bytes, at)?, u64_at(bytes, at + 8)?)));
        let data = section.and_then(|(o, s)| {
            let o = usize::try_from(o).ok()?;
            bytes.get(o..o.checked_add(usize::try_from(s).ok()?)?)
        });
        let result = match data {
            Some(data) => features::parse_feature(bit, data, &mut decoder.report.info),
            None => Err("section lies outside the file".into()),
        };
        if let Err(e) = result {
            decoder
                .report
                .warnings
                .push(format!("{}: at byte offset {at}: feature {bit}: {e}", path.display()));
        }
    }
}
