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
pub struct MmapEvent {
    /// `None` when the input carries no process ids that apply to samples (perf script text).
    pub pid: Option<i32>,
    pub tid: Option<i32>,
    pub start: RuntimeAddr,
    pub len: u64,
    pub pgoff: FileOffset,
    /// Executable mapping (PROT_EXEC); perf script marks it with an `x` in the permissions.
    pub executable: bool,
    pub path: String,
    /// Build id carried by MMAP2 records written with `PERF_RECORD_MISC_MMAP_BUILD_ID`.
    pub build_id: Option<Vec<u8>>,
}

/// A sample, with the parts profgen uses decoded. Slices borrow from the reader.
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
    pub callchain: &'a [RuntimeAddr],
    /// Last branch records, most recent first (perf order).
    pub branches: &'a [Branch<RuntimeAddr>],
    /// Core cycles the LBR entries span: the sum of every entry's cycle count but the oldest's
    /// (an entry counts the cycles since the entry before it); 0 when the entries carry none.
    pub lbr_cycles: u64,
    /// Whether the input recorded call chains at all (distinguishes LBR-only from LBR + stack).
    pub has_callchain: bool,
    /// Set when decoding was deferred: the position of the sample's record in the mapped input,
    /// whose call chain and branch stack are left undecoded (empty here, `lbr_cycles` 0) for a
    /// worker thread to decode in place ([`perf_data::SampleBodies`]).
    pub record: Option<usize>,
}

/// Everything the later stages need from an input stream.
#[derive(Clone, Debug)]
pub enum PerfEvent<'a> {
    Mmap(MmapEvent),
    /// A thread got a (new) command name; `exec` is set when this was an exec, which replaces the
    /// process's mappings.
    Comm {
        pid: i32,
        tid: i32,
        exec: bool,
        name: &'a str,
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
