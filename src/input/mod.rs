//! Input stage: every supported input format is turned into one stream of [`PerfEvent`]s.
//!
//! - [`perf_data`]: binary `perf.data` (file and pipe mode, zstd-compressed records).
//! - [`perf_script`]: `perf script -F ip,brstack --show-mmap-events` text, as llvm-profgen reads it.
//!
//! llvm-profgen's unsymbolized profile (`--unsymbolized-profile`) holds counters, not events: it
//! is read by [`crate::aggregate::unsymbolized`].
//!
//! Events borrow from the reader's buffers; consumers copy what they keep.

pub mod perf_data;
pub mod perf_script;

use crate::addr::{Branch, FileOffset, RuntimeAddr};
use crate::error::Error;
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// Reads a whole input file (perf script and unsymbolized profiles are parsed from memory).
pub fn read_file(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })
}

/// An input file of a run, as the command line gives it or a directory lists it.
#[derive(Debug)]
pub struct InputFile {
    pub path: PathBuf,
    /// Found in a directory given as input, rather than named itself.
    pub in_directory: bool,
    /// Why it cannot be read, when that is known without opening it.
    pub unusable: Option<Error>,
}

impl InputFile {
    /// A file named on the command line.
    pub fn named(path: &Path) -> Self {
        InputFile { path: path.to_path_buf(), in_directory: false, unusable: None }
    }
}

/// A mapping of a file (or anonymous memory) into a process.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct MmapEvent<'a> {
    /// `None` when the input carries no process ids that apply to samples (perf script text).
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub start: RuntimeAddr,
    pub len: u64,
    pub pgoff: FileOffset,
    /// Executable mapping (PROT_EXEC); perf script marks it with an `x` in the permissions.
    pub executable: bool,
    pub path: MmapPath<'a>,
    /// Build id carried by MMAP2 records written with `PERF_RECORD_MISC_MMAP_BUILD_ID`.
    pub build_id: Option<Vec<u8>>,
    /// Where the record lies in the mapped input, when a deferred decode
    /// ([`perf_data::PerfData::decode_in_time_order_deferred`]) read it there: another thread can
    /// read the event again from it ([`perf_data::SampleBodies::mmap`]).
    pub record: Option<usize>,
}

#[cfg(test)]
impl MmapEvent<'_> {
    /// A copy that owns its path, to keep past the reader's callback.
    pub(crate) fn into_owned(self) -> MmapEvent<'static> {
        let MmapEvent { pid, tid, start, len, pgoff, executable, path, build_id, record } = self;
        let path = MmapPath::Text(Cow::Owned(path.into_owned()));
        MmapEvent { pid, tid, start, len, pgoff, executable, path, build_id, record }
    }
}

/// The file a mapping maps: a perf.data record's NUL-terminated name field, decoded when read (a
/// reading thread that leaves the mappings to other threads never reads it), or perf script text.
#[derive(Clone, Debug)]
pub enum MmapPath<'a> {
    Field(&'a [u8]),
    Text(Cow<'a, str>),
}

impl MmapPath<'_> {
    /// The path; in a record's field, up to its NUL, invalid UTF-8 replaced.
    pub fn as_str(&self) -> Cow<'_, str> {
        match self {
            MmapPath::Field(field) => perf_data::c_str(field),
            MmapPath::Text(text) => Cow::Borrowed(text),
        }
    }

    pub fn into_owned(self) -> String {
        self.as_str().into_owned()
    }
}

impl PartialEq for MmapPath<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for MmapPath<'_> {}

impl PartialEq<&str> for MmapPath<'_> {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl From<&str> for MmapPath<'_> {
    fn from(path: &str) -> Self {
        MmapPath::Text(Cow::Owned(path.to_string()))
    }
}

impl From<String> for MmapPath<'_> {
    fn from(path: String) -> Self {
        MmapPath::Text(Cow::Owned(path))
    }
}

impl std::fmt::Display for MmapPath<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.as_str())
    }
}

/// A little-endian u64 as a perf record holds it. Records lie unaligned in the input, so call
/// chains and branch stacks are slices of these, read in place rather than copied out.
pub type RawWord = [u8; 8];
/// A `perf_branch_entry` as a perf record holds it: from, to and flags, little-endian u64s.
pub type RawBranch = [u8; 24];

/// The user-space frames of a sample's call chain, leaf first, as the record holds them.
#[derive(Clone, Copy, Debug, Default)]
pub struct CallChain<'a>(pub &'a [RawWord]);

impl<'a> CallChain<'a> {
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = RuntimeAddr> + ExactSizeIterator + 'a {
        self.0.iter().map(|w| RuntimeAddr(u64::from_le_bytes(*w)))
    }
    /// The frame as a record holds it.
    pub fn word(a: RuntimeAddr) -> RawWord {
        a.0.to_le_bytes()
    }
}

/// A sample's last branch records, most recent first (perf order), as the record holds them.
#[derive(Clone, Copy, Debug, Default)]
pub struct BranchStack<'a>(pub &'a [RawBranch]);

impl<'a> BranchStack<'a> {
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = Branch<RuntimeAddr>> + ExactSizeIterator + Clone + 'a {
        self.0.iter().map(|e| {
            let (source, target) = Self::addrs(e);
            Branch { source: RuntimeAddr(source), target: RuntimeAddr(target) }
        })
    }
    /// Core cycles the entries span: the sum of every entry's cycle count but the oldest's (an
    /// entry counts the cycles since the entry before it); 0 when the entries carry none.
    pub fn cycles(&self) -> u64 {
        let newer = &self.0[..self.0.len().saturating_sub(1)];
        // Most recordings carry none: the fields ORed tell that for less than their sum.
        let any = newer.iter().fold(0, |any, e| any | Self::words(e)[2]);
        if (any >> 4) & 0xffff == 0 {
            return 0;
        }
        newer.iter().map(|e| (Self::words(e)[2] >> 4) & 0xffff).sum()
    }
    /// An entry as a record holds it, with `cycles` in the flags' 16-bit cycles field (perf
    /// script prints that field; larger counts are clamped).
    pub fn entry(b: Branch<RuntimeAddr>, cycles: u64) -> RawBranch {
        let mut e = [0; 24];
        e[..8].copy_from_slice(&b.source.0.to_le_bytes());
        e[8..16].copy_from_slice(&b.target.0.to_le_bytes());
        e[16..].copy_from_slice(&(cycles.min(0xffff) << 4).to_le_bytes());
        e
    }
    /// The words of an entry read in place: source, target and flags.
    #[inline(always)]
    pub fn words(e: &RawBranch) -> [u64; 3] {
        let (words, _) = e.as_chunks::<8>();
        std::array::from_fn(|i| u64::from_le_bytes(words[i]))
    }
    /// An entry's source and target, read in place.
    #[inline(always)]
    pub fn addrs(e: &RawBranch) -> (u64, u64) {
        let [source, target, _] = Self::words(e);
        (source, target)
    }
}

/// A sample, with the parts profgen uses decoded; the call chain and branch stack are read in
/// place. Slices borrow from the reader.
#[derive(Clone, Debug)]
pub struct Sample<'a> {
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub time: Option<u64>,
    /// Index of the event (perf_event_attr) that produced the sample.
    pub attr_index: usize,
    /// Sample IP (leading IP).
    pub ip: RuntimeAddr,
    pub period: u64,
    /// How many identical samples this stands for (perf script's aggregated-count lines); 1 for
    /// perf.data.
    pub repeat: u64,
    /// User-space call chain, leaf first; `callchain[0]` is the sampled IP when present.
    /// Context markers (PERF_CONTEXT_*) and kernel frames are removed.
    pub callchain: CallChain<'a>,
    /// Last branch records, most recent first (perf order).
    pub branches: BranchStack<'a>,
    /// Whether the input recorded call chains at all (distinguishes LBR-only from LBR + stack).
    pub has_callchain: bool,
    /// Set when decoding was deferred: where in the mapped input the call chain and branch
    /// stack lie (empty here), for a worker thread to read them in place
    /// ([`perf_data::SampleBodies`]).
    pub record: Option<Deferred>,
}

#[cfg(test)]
impl<'a> Sample<'a> {
    /// A perf.data-like sample of one event with these stacks (tests set the other fields).
    pub fn with_stacks(callchain: &'a [RawWord], branches: &'a [RawBranch]) -> Self {
        Sample {
            pid: None,
            tid: None,
            time: None,
            attr_index: 0,
            ip: RuntimeAddr(0),
            period: 1,
            repeat: 1,
            callchain: CallChain(callchain),
            branches: BranchStack(branches),
            has_callchain: !callchain.is_empty(),
            record: None,
        }
    }
}

/// Where a deferred sample's call chain and branch stack lie in the mapped input: its record's
/// position, and within the record the offset and count of the call chain's frames (context
/// markers included) and of the branch entries (a record is at most 64 KiB).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deferred {
    pub record: usize,
    pub callchain: (u16, u16),
    pub branches: (u16, u16),
    /// Whether frames before the call chain's first context marker are user frames (the sample
    /// was taken in user mode).
    pub user: bool,
}

/// A COMM record's name field as it lies in the record (NUL-terminated, padded): decoded only
/// when shown, since mapping never reads it.
#[derive(Clone, Copy, Debug)]
pub struct CommName<'a>(pub(crate) &'a [u8]);

impl<'a> CommName<'a> {
    /// The name up to its NUL; invalid UTF-8 replaced.
    pub fn to_str(&self) -> Cow<'a, str> {
        perf_data::c_str(self.0)
    }
}

impl std::fmt::Display for CommName<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_str())
    }
}

/// Everything the later stages need from an input stream.
#[derive(Clone, Debug)]
pub enum PerfEvent<'a> {
    Mmap(MmapEvent<'a>),
    /// A thread got a (new) command name; `exec` is set when this was an exec, which replaces the
    /// process's mappings.
    Comm {
        pid: i32,
        tid: i32,
        exec: bool,
        name: CommName<'a>,
    },
    Fork {
        pid: i32,
        ppid: i32,
        tid: i32,
        ptid: i32,
    },
    Exit {
        pid: i32,
        tid: i32,
    },
    Sample(Sample<'a>),
    /// A run of consecutive samples handed out by their place alone (only a decode that was asked
    /// to gives these: [`perf_data::PerfData::decode_in_time_order_releasing`] and `_deferred`).
    Placed(&'a [PlacedSample]),
}

/// A sample handed out by its place alone: the decoder checked that the fields of attr `attr`
/// fill the `len`-byte record at input position `record` exactly and name its thread, and read
/// nothing else; its reader reads it whole ([`perf_data::SampleBodies::read_placed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacedSample {
    pub record: usize,
    pub attr: u16,
    pub len: u16,
}

/// Facts about an input file gathered while reading it (from the perf.data header).
#[derive(Clone, Debug, Default)]
pub struct InputInfo {
    /// (path, build id) pairs from the build-id feature section.
    pub build_ids: Vec<(String, Vec<u8>)>,
    pub cmdline: Vec<String>,
    /// Names of the events (attrs), by attr index.
    pub event_names: Vec<String>,
    /// Whether any attr samples branch stacks (`PERF_SAMPLE_BRANCH_STACK`); `None` before the
    /// first attr is known (pipe mode carries them in the stream).
    pub branch_stack: Option<bool>,
    /// `(type, config)` of every attr that samples branch stacks: the events whose samples
    /// carry LBR windows.
    pub branch_events: Vec<(u32, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stack's cycles are its entries' cycle counts but the oldest's: 0 when they carry none,
    /// whatever their other flag bits.
    #[test]
    fn branch_stack_cycles_are_the_newer_entries_counts_alone() {
        let b = Branch { source: RuntimeAddr(0x10), target: RuntimeAddr(0x20) };
        // The mispredicted, predicted and abort bits, and the top bit of the flags word.
        let flagged = |cycles| {
            let mut e = BranchStack::entry(b, cycles);
            e[16] |= 0b1011;
            e[23] |= 0x80;
            e
        };
        assert_eq!(BranchStack(&[flagged(0), flagged(0), flagged(7)]).cycles(), 0);
        let some = [flagged(3), flagged(0), flagged(0xffff), flagged(7)];
        assert_eq!(BranchStack(&some).cycles(), 3 + 0xffff);
        assert_eq!(BranchStack(&[flagged(7)]).cycles(), 0);
        assert_eq!(BranchStack(&[]).cycles(), 0);
    }
}
