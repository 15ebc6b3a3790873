//! Reading the inputs into counters: every input's events go through its own address mapper
//! (process mappings, `--pid` and `--perf-event` filters) into aggregation, on this thread or on
//! worker threads fed in batches; several input files are read in parallel, one per worker, and
//! merged. The distinct samples then become [`ContextCounters`] (LBR-only ranges and branches, or
//! unwound per context). An unsymbolized profile is read as counters directly.
//!
//! In: the [`Binary`], the [`Input`] and [`ReadOptions`]. Out: [`ContextCounters`] and an
//! [`InputsReport`] (sample counts, how the binary was matched, warnings).

use super::lbr::lbr_counters;
use super::parallel::{NeededInput, aggregate_in_parallel};
use super::pga::{self, Aggregate};
use super::samples::{AggregatedSamples, Aggregator, SampleOptions, SampleStats};
use super::traces::{FunctionTable, ProcessFunctions, TemporalTraces, TraceCollector};
use super::unsymbolized::{self, UnsymbolizedOptions};
use super::unwinder::{
    MAX_BRANCHES, NormalizeStats, UnwindOptions, UnwindStats, Unwinder, unwind_all_with,
};
use super::weighting::{LbrWeighting, Weighting, event_unit};
use super::{ContextCounters, ContextKey};
use crate::binary::Binary;
use crate::error::Error;
use crate::input::perf_data::Truncation;
use crate::input::perf_data::{self, PageReleaser, PerfData, SampleBodies, read_perf_data_stream};
use crate::input::perf_script::{ScriptOptions, read_perf_script};
use crate::input::{InputFile, PerfEvent, Sample, read_file};
use crate::llvm::{ContextShape, MAX_CONTEXT_FRAMES};
use crate::mapping::{AddressMapper, BinaryIdentity, MappingStats, MatchedBy, file_name_of, hex};
use crate::progress::{Phase, Reporter};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;

/// Where samples come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// One or more perf.data files or directories of them (`-` = stdin, pipe mode).
    PerfData(Vec<PathBuf>),
    PerfScript(PathBuf),
    Unsymbolized(PathBuf),
    /// Aggregate files (`profgen aggregate`, `profgen merge`), merged.
    Aggregate(Vec<PathBuf>),
}

/// How the inputs are read and their samples interpreted.
#[derive(Clone, Debug)]
pub struct ReadOptions {
    /// `--pid`: only this process's mappings and samples.
    pub pid: Option<i32>,
    /// `--perf-event`: keep only samples of these events (all when empty).
    pub perf_events: Vec<String>,
    pub sample: SampleOptions,
    /// Shaping of the unwinder's contexts.
    pub context: ContextShape,
    /// Where the addresses of an unsymbolized profile are relative to.
    pub unsymbolized: UnsymbolizedOptions,
    /// `--show-mmap-events`: print every mmap event of the binary as it is applied.
    pub show_mmap_events: bool,
    /// Whether the front end shows progress (it attaches a display to `reporter`).
    pub progress: bool,
    /// Where reading reports its progress (bytes consumed per input, the unwinding phase).
    pub reporter: Reporter,
    /// Keep each process's temporal trace (the binary's functions in the order they first
    /// appear in a sample), of at most this many functions.
    pub temporal_traces: Option<usize>,
    /// `--kernel`: the binary is a kernel image, mapped by the `[kernel.kallsyms]` mmap events.
    pub kernel: bool,
    /// `--filter-build-id`: perf script addresses prefixed `buildid:` belong to the binary only
    /// with this build id (`None`: the binary's own for a shared library, none otherwise).
    pub filter_build_id: Option<Vec<u8>>,
    /// `--csprof-max-unsymbolized-context-depth` (-1: no limit): probe-based contexts keep at
    /// most this many frames (with `context.max_context_depth`, the smaller applies).
    pub max_unsymbolized_context_depth: i32,
    /// Which inputs that cannot be used are skipped rather than failing the run.
    pub keep_going: KeepGoing,
    /// `--lbr-weighting`: how LBR windows are weighted (see [`super::weighting`]).
    pub lbr_weighting: LbrWeighting,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            pid: None,
            perf_events: Vec::new(),
            sample: SampleOptions::default(),
            context: ContextShape::default(),
            unsymbolized: UnsymbolizedOptions::default(),
            show_mmap_events: false,
            progress: false,
            reporter: Reporter::default(),
            temporal_traces: None,
            kernel: false,
            filter_build_id: None,
            max_unsymbolized_context_depth: -1,
            keep_going: KeepGoing::default(),
            lbr_weighting: LbrWeighting::default(),
        }
    }
}

/// Which inputs that cannot be used (unreadable, empty, not a perf.data, corrupt, a directory
/// entry that is not a regular file) are skipped, with a warning naming each and why, instead of
/// failing the run. A truncated input is not skipped in any mode: the events before the cut are
/// used, with a warning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeepGoing {
    /// Files found in a directory given as `--perfdata` are skipped; a named input that cannot
    /// be used is an error.
    #[default]
    DirectoryEntries,
    /// Every input (`--keep-going`).
    All,
    /// None: any input that cannot be used is an error, directory entries too
    /// (`--no-keep-going`).
    Nothing,
}

impl KeepGoing {
    /// `file` could not be used because of `e`: the warning that skips it, when this mode skips
    /// it, else the error.
    pub fn skip(self, file: &InputFile, e: Error) -> Result<String, Error> {
        let skips = match self {
            KeepGoing::DirectoryEntries => file.in_directory,
            KeepGoing::All => true,
            KeepGoing::Nothing => false,
        };
        if skips { Ok(format!("{e}; skipped")) } else { Err(e) }
    }
}

/// What became of one input.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InputOutcome {
    /// Read to its end.
    Read,
    /// Read up to a cut (perf killed, a partial copy): the events before it were used.
    Truncated(Truncation),
    /// Not used, and why (the error, naming the file).
    Skipped(String),
    /// Could not be used, which ended the run: the error.
    Failed(String),
}

/// One input's part of the run.
#[derive(Clone, Debug)]
pub struct InputReport {
    pub path: PathBuf,
    pub outcome: InputOutcome,
    pub samples: SampleStats,
    /// How the binary was recognised in this input's mmap events.
    pub matched_by: Option<MatchedBy>,
    /// This input's warnings (also in [`InputsReport::warnings`]).
    pub warnings: Vec<String>,
}

impl InputReport {
    fn new(path: &Path, outcome: InputOutcome) -> Self {
        InputReport {
            path: path.to_path_buf(),
            outcome,
            samples: SampleStats::default(),
            matched_by: None,
            warnings: Vec::new(),
        }
    }
}

/// What reading the inputs did, for the summary line and the warnings.
#[derive(Debug, Default)]
pub struct InputsReport {
    pub samples: SampleStats,
    pub distinct_samples: usize,
    /// How the binary was recognised in the inputs' mmap events.
    pub matched_by: Option<MatchedBy>,
    /// Samples with call stacks that could not be unwound (leaf in a prolog/epilog, no LBR entry
    /// in the binary).
    pub not_unwound: u64,
    /// What normalising the call stacks changed or dropped.
    pub normalize: NormalizeStats,
    /// What the unwinder met.
    pub unwind: UnwindStats,
    pub warnings: Vec<String>,
    /// The temporal traces, when [`ReadOptions::temporal_traces`] asks for them: every input's,
    /// inputs in the order given.
    pub traces: Option<TemporalTraces>,
    /// No input recorded branch stacks, so samples were read as IP samples (as
    /// `--leading-ip-only`); the profile must be built in that mode too.
    pub ip_samples_detected: bool,
    /// Facts worth a line on stderr that are not warnings.
    pub notes: Vec<String>,
    /// How the inputs' LBR windows were weighted, and why: each different one once, in input
    /// order (for the summary line; empty for IP samples and counters read back).
    pub weighting: Vec<String>,
    /// Every input, in command-line (and directory-name) order.
    pub inputs: Vec<InputReport>,
}

impl InputsReport {
    /// Inputs skipped because they could not be used.
    pub fn skipped(&self) -> usize {
        self.inputs.iter().filter(|i| matches!(i.outcome, InputOutcome::Skipped(_))).count()
    }
    /// Inputs read only up to a cut.
    pub fn truncated(&self) -> usize {
        self.inputs.iter().filter(|i| matches!(i.outcome, InputOutcome::Truncated(_))).count()
    }
}

/// Reads `input` into counters with `workers` threads, recording in `report` what it did (also
/// when it fails: the inputs read and skipped so far, and the one that failed).
pub fn read_counters(
    binary: &Binary,
    input: &Input,
    opts: &ReadOptions,
    workers: usize,
    report: &mut InputsReport,
) -> Result<ContextCounters, Error> {
    Ok(match input {
        Input::Unsymbolized(path) => {
            let base = opts.unsymbolized.base(binary);
            let read = read_file(path).and_then(|text| {
                unsymbolized::read_unsymbolized(&text, path, base, binary.probes().is_some())
            });
            let (counters, warnings) = read.inspect_err(|e| {
                report.inputs.push(InputReport::new(path, InputOutcome::Failed(e.to_string())));
            })?;
            report.inputs.push(InputReport {
                warnings: warnings.clone(),
                ..InputReport::new(path, InputOutcome::Read)
            });
            report.warnings.extend(warnings);
            counters
        }
        Input::PerfData(_) | Input::PerfScript(_) => {
            let samples = read_samples(binary, input, opts, workers, report)?;
            release_freed_heap();
            report.distinct_samples = samples.len();
            if samples.has_call_stacks {
                opts.reporter.phase(Phase::Unwinding);
            }
            let counters = samples_to_counters(binary, &samples, opts, report);
            drop(samples);
            release_freed_heap();
            counters
        }
        Input::Aggregate(paths) => read_aggregates(binary, paths, opts, report)?,
    })
}

/// Gives the heap memory freed by a parallel phase back to the system. glibc keeps what a thread
/// frees in that thread's arena, for that thread to reuse: the reading workers' held raw samples
/// and tables, the unwinding workers' maps, would stay resident through the later phases, which
/// allocate on other threads (Lua CS at 2 threads: peak RSS 93-102 -> 75 MiB; 1 thread: 60 MiB).
/// The profgen binary allocates through jemalloc (src/main.rs), which reuses freed pages across
/// threads itself; there this and [`map_large_allocations`] touch only what C libraries (capstone,
/// zstd) allocate through glibc. Library users on glibc get the effect described.
pub fn release_freed_heap() {
    // SAFETY: malloc_trim only hands free pages of the allocator's arenas back to the system.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Serves heap blocks of 1 MiB and more from mappings of their own, handed back to the system
/// when freed. glibc's default raises that threshold to the largest block freed so far (up to
/// 32 MiB); past it, large vectors come from the heap, where one allocated after a phase freed
/// its structures piecewise (the pre-inliner's trie after the flat CS profile moved into it)
/// extends the heap past the holes left, and a worker's arena keeps them after its phase.
/// Process-wide; `main` sets it first. SQLite CS peak RSS 101 -> 97 MB at one thread, 114 -> 98
/// MB at two; the cost is page faults on fresh mappings (minor faults +10% at one thread, +13%
/// at two).
pub fn map_large_allocations() {
    // SAFETY: mallopt only changes glibc's allocation policy, before any thread is started.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// Reads `input` for its temporal traces only, without counters (`profgen order`);
/// `opts.temporal_traces` says how long they may get.
pub fn read_traces(
    binary: &Binary,
    input: &Input,
    opts: &ReadOptions,
    workers: usize,
) -> Result<InputsReport, Error> {
    let mut report = InputsReport::default();
    match input {
        Input::Unsymbolized(path) => {
            return Err(Error::BadFile {
                path: path.clone(),
                what: "an unsymbolized profile has no sample times to make temporal traces from"
                    .into(),
            });
        }
        Input::Aggregate(paths) => {
            return Err(Error::BadFile {
                path: paths[0].clone(),
                what: "an aggregate has no sample times to make temporal traces from".into(),
            });
        }
        Input::PerfData(_) | Input::PerfScript(_) => {}
    }
    let samples = read_samples(binary, input, opts, workers, &mut report)?;
    report.distinct_samples = samples.len();
    Ok(report)
}

/// The binary's counters from aggregate files, merged.
fn read_aggregates(
    binary: &Binary,
    paths: &[PathBuf],
    opts: &ReadOptions,
    report: &mut InputsReport,
) -> Result<ContextCounters, Error> {
    let merged = Aggregate::read_merged(paths, None)?.unwrap_or_default();
    let (counters, r) = counters_from_aggregate(binary, &merged, paths, opts)?;
    *report = r;
    report.inputs = paths.iter().map(|p| InputReport::new(p, InputOutcome::Read)).collect();
    Ok(counters)
}

/// The counters of `binary` in `merged` (read from `paths`) and the report of the runs that
/// made them, after checking that they were shaped by the options this run asks for.
pub fn counters_from_aggregate(
    binary: &Binary,
    merged: &Aggregate,
    paths: &[PathBuf],
    opts: &ReadOptions,
) -> Result<(ContextCounters, InputsReport), Error> {
    // Whether contexts were keyed by addresses or frames shows in the counters (checked below).
    let dwarf = merged.options.iter().any(|(k, v)| k == "use-dwarf-correlation" && v == "true");
    let wanted = counting_options(opts, dwarf);
    let names = || paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
    if merged.options != wanted {
        return Err(Error::Usage(format!(
            "{} made with {}, but this run asks for {}: give the options `profgen aggregate` was given",
            names(),
            pga::describe_options(&merged.options, &wanted),
            pga::describe_options(&wanted, &merged.options),
        )));
    }
    let name = file_name_of(binary.path());
    let Some(entry) = merged.find(binary.build_id(), &name) else {
        let identity = match binary.build_id() {
            Some(id) => format!("build id {}", hex(id)),
            None => format!("no build id, file name {name}"),
        };
        return Err(Error::BadFile {
            path: binary.path().to_path_buf(),
            what: format!(
                "no sample of this binary ({identity}) in {}; {}",
                names(),
                merged.describe_binaries()
            ),
        });
    };
    let probe_based = binary.probes().is_some();
    let other_kind = entry.counters.by_context.keys().any(|k| match k {
        ContextKey::Addrs(_) => !probe_based,
        ContextKey::Frames(_) => probe_based,
        ContextKey::None => false,
    });
    if other_kind {
        let (theirs, ours) = if probe_based { ("frames", "probe") } else { ("probes", "line") };
        return Err(Error::Usage(format!(
            "{} keyed this binary's contexts by {theirs}, but this run makes a {ours}-based profile: give the --use-dwarf-correlation `profgen aggregate` was given",
            names()
        )));
    }
    let mut report = InputsReport {
        samples: entry.samples.clone(),
        distinct_samples: entry.distinct_samples as usize,
        matched_by: entry.matched_by,
        normalize: entry.normalize.clone(),
        unwind: entry.unwind.clone(),
        ..Default::default()
    };
    report.unwind.deep_stacks = entry.counters.weights.scale(report.unwind.deep_stacks);
    if entry.counters.context_sensitive {
        add_unwind_warnings(&mut report, entry.counters.by_context.len());
    }
    Ok((entry.counters.clone(), report))
}

/// The options that shape counters, as an aggregate file records them: counters made with other
/// ones are not what a run asks for. `use_dwarf_correlation` decides whether the contexts of a
/// pseudo-probe binary are call-site addresses or symbolized frames.
pub fn counting_options(opts: &ReadOptions, use_dwarf_correlation: bool) -> Vec<(String, String)> {
    let s = &opts.sample;
    let mut events = opts.perf_events.clone();
    events.sort();
    events.dedup();
    let mut v: Vec<(String, String)> = [
        ("compress-recursion", opts.context.compress_recursion.to_string()),
        ("csprof-max-context-depth", opts.context.max_context_depth.to_string()),
        ("csprof-max-unsymbolized-context-depth", opts.max_unsymbolized_context_depth.to_string()),
        ("ignore-stack-samples", s.ignore_stack.to_string()),
        ("lbr-weighting", opts.lbr_weighting.name().to_string()),
        ("leading-ip-only", s.leading_ip_only.to_string()),
        ("llvm-compatible", s.llvm_compatible.to_string()),
        ("perf-events", events.join(",")),
        ("pid", opts.pid.map_or(String::new(), |p| p.to_string())),
        ("sample-period", s.sample_period.map_or(String::new(), |p| p.to_string())),
        ("use-dwarf-correlation", use_dwarf_correlation.to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    v.sort();
    v
}

/// One input's contribution before merging.
struct InputResult {
    samples: AggregatedSamples,
    stats: SampleStats,
    matched: Option<MatchedBy>,
    warnings: Vec<String>,
    mapping: MappingStats,
    /// Where the input ended early (truncated perf.data).
    truncated: Option<Truncation>,
    traces: Vec<ProcessFunctions>,
    /// How its LBR windows were weighted, and why.
    weighting: (Weighting, String),
}

fn identity_of(binary: &Binary) -> BinaryIdentity {
    BinaryIdentity {
        build_id: binary.build_id().map(<[u8]>::to_vec),
        file_name: file_name_of(binary.path()),
        segments: binary.segments().to_vec(),
    }
}

/// The sequential side of reading one input: mapping state, sample filters, progress, warnings.
struct EventFront<'c, N> {
    opts: &'c ReadOptions,
    binary: &'c Binary,
    mapper: AddressMapper,
    event_names: N,
    /// perf script filters events itself.
    filter_events: bool,
    matched: Option<MatchedBy>,
    warnings: Vec<String>,
    warned_no_mmap: bool,
    /// Samples dropped here, before aggregation.
    filtered: SampleStats,
    /// Whether a sample IP has landed in the binary; until then every sample is attributed to the
    /// executable it is in, to say what the input holds when none lands in the binary.
    ip_in_binary: bool,
    /// Once a sample lands in the binary, the mapper defers its events to the workers' copies
    /// of the map (see [`AddressMapper::defer_events`]): with many processes, mapping was a
    /// fifth of the reading thread's work.
    defer_when_in_binary: bool,
    /// At one thread, the flag that has the decode hand samples out by place alone, set once a
    /// sample lands in the binary: from then on `handle` only adds a sample that names its
    /// process (as a placed one does), under the map as it stands.
    place_when_in_binary: Option<Arc<AtomicBool>>,
    traces: Option<TraceCollector<'c>>,
}

impl<N: Fn(usize) -> Option<String>> EventFront<'_, N> {
    /// No mapping of the binary is known for a sample without a pid: addresses are taken as
    /// vaddrs from now on.
    fn warn_no_mmap(&mut self) {
        self.warned_no_mmap = true;
        self.warnings.push(format!(
            "No relevant mmap event is matched for {}, will use preferred address ({:#x}) as the base loading address!",
            self.mapper.binary_file_name(),
            self.binary.preferred_base().0
        ));
    }

    /// Whether handling `ev` may change the mapper's map: held samples are reduced under the map
    /// they were read with, so before such an event (a sample without mappings may make the map
    /// assume the preferred base).
    fn may_change_map(&self, ev: &PerfEvent<'_>) -> bool {
        let sample = matches!(ev, PerfEvent::Sample(_));
        !self.mapper.defers_events() && (!sample || !self.mapper.any_mapping())
    }

    /// Applies `ev`; samples that pass the filters go to `add` with the current address map.
    fn handle(&mut self, ev: PerfEvent<'_>, add: &mut impl FnMut(&mut AddressMapper, &Sample<'_>)) {
        let opts = self.opts;
        match ev {
            PerfEvent::Mmap(m) => {
                let (path, start) =
                    opts.show_mmap_events.then(|| (m.path.clone(), m.start.0)).unzip();
                if let Some(how) = self.mapper.on_mmap(&m) {
                    if let (Some(path), Some(start)) = (path, start) {
                        println!("Mmap: Binary {path} loaded at {start:#x}: ");
                    }
                    self.matched = Some(self.matched.map_or(how, |h| h.min(how)));
                }
            }
            PerfEvent::Fork { pid, ppid, .. } => self.mapper.on_fork(pid, ppid),
            PerfEvent::Comm { pid, exec: true, .. } => {
                if let Some(t) = &mut self.traces {
                    t.end_process(pid);
                }
                self.mapper.on_exec(pid)
            }
            PerfEvent::Exit { pid, tid } if pid == tid => {
                if let Some(t) = &mut self.traces {
                    t.end_process(pid);
                }
                self.mapper.on_exit(pid);
            }
            PerfEvent::Exit { .. } => {}
            PerfEvent::Comm { .. } => {}
            // Only decoded when `aggregate_events` asks, which takes them before this.
            PerfEvent::Placed(_) => unreachable!("a placed sample outside parallel reading"),
            PerfEvent::Sample(s) => {
                if opts.pid.is_some_and(|p| s.pid.is_some_and(|sp| sp != p)) {
                    self.filtered.read += 1;
                    self.filtered.other_process += 1;
                    return;
                }
                if self.filter_events && !opts.perf_events.is_empty() {
                    let name = (self.event_names)(s.attr_index);
                    if !name.is_some_and(|n| opts.perf_events.contains(&n)) {
                        self.filtered.read += 1;
                        self.filtered.other_event += 1;
                        return;
                    }
                }
                if s.pid.is_none() && !self.warned_no_mmap && self.mapper.pidless_sample() {
                    self.warn_no_mmap();
                }
                let mut landed = false;
                if !self.ip_in_binary {
                    match self.mapper.to_vaddr(s.pid, s.ip) {
                        Some(_) => {
                            (self.ip_in_binary, landed) = (true, true);
                            self.mapper.stop_noting_unused_samples();
                        }
                        None => self.mapper.note_unused_sample(s.pid, s.ip),
                    }
                }
                if let Some(t) = &mut self.traces {
                    t.sample(self.mapper.map(), &s);
                }
                add(&mut self.mapper, &s);
                if landed && self.defer_when_in_binary {
                    self.mapper.defer_events();
                }
                if let Some(placing) = self.place_when_in_binary.as_ref().filter(|_| landed) {
                    placing.store(true, Relaxed);
                }
            }
        }
    }
}

/// How `read` is to deliver samples: whole, or (when the workers can decode them from the
/// mapped input) by position, telling [`NeededInput`] how far it has read (the threads that
/// aggregate the batches drop the pages no sample needs any more); and the flag that has it
/// hand samples out by place alone once set ([`BatchSender::placing`], or at one thread
/// [`EventFront::place_when_in_binary`]).
type Deferral<'n> = (Option<&'n NeededInput>, Option<Arc<AtomicBool>>);

/// Feeds one input's events through a fresh mapper into aggregation: on this thread with one
/// worker, else on `workers` threads fed in batches; with `by_position`, the workers decode the
/// samples themselves and drop the input's pages once read (unless temporal traces need the
/// samples whole on the reading thread).
/// `perf_script` inputs carry no process ids that apply to samples and filter events themselves.
/// With `functions`, the temporal traces of the input's processes are kept too.
#[allow(clippy::too_many_arguments)]
fn aggregate_events(
    opts: &ReadOptions,
    workers: usize,
    binary: &Binary,
    functions: Option<&FunctionTable>,
    by_position: Option<(SampleBodies<'_>, &PageReleaser<'_>)>,
    read: impl FnOnce(&mut dyn FnMut(PerfEvent<'_>), Deferral<'_>) -> Result<Vec<String>, Error>,
    event_names: impl Fn(usize) -> Option<String>,
    perf_script: bool,
    build_ids: &[(String, Vec<u8>)],
) -> Result<InputResult, Error> {
    let mut mapper = if opts.kernel {
        AddressMapper::for_kernel(identity_of(binary), binary.preferred_base(), perf_script)
    } else if perf_script {
        AddressMapper::for_perf_script(identity_of(binary), opts.pid)
    } else {
        AddressMapper::new(identity_of(binary), opts.pid)
    };
    mapper.add_build_ids(build_ids);
    let mut front = EventFront {
        opts,
        binary,
        mapper,
        event_names,
        filter_events: !perf_script,
        matched: None,
        warnings: Vec::new(),
        warned_no_mmap: false,
        filtered: SampleStats::default(),
        ip_in_binary: false,
        defer_when_in_binary: false,
        place_when_in_binary: None,
        traces: functions
            .zip(opts.temporal_traces)
            .map(|(table, max_length)| TraceCollector::new(table, max_length)),
    };
    // Samples are read in place (by the workers, or by place at one thread) unless the temporal
    // traces need them whole here; by place alone only when no filter reads their fields here.
    let by_position = by_position.filter(|_| front.traces.is_none());
    let unfiltered = opts.pid.is_none() && opts.perf_events.is_empty();
    let (reader_warnings, samples, mut stats) = if workers <= 1 {
        let mut agg = Aggregator::new(binary, opts.sample);
        let mut bodies = by_position.filter(|_| unfiltered).map(|(bodies, _)| bodies);
        front.place_when_in_binary = bodies.as_ref().map(|_| Arc::default());
        let placing = front.place_when_in_binary.clone();
        let r = read(
            &mut |ev| {
                // Read as the workers read them: what `handle` would do is only `add`.
                if let (PerfEvent::Placed(run), Some(bodies)) = (&ev, bodies.as_mut()) {
                    let map = front.mapper.map();
                    bodies.read_placed(run, |p| *p, |s| agg.add(map, s));
                    return;
                }
                if front.may_change_map(&ev) {
                    agg.flush(front.mapper.map());
                }
                front.handle(ev, &mut |mapper, s| agg.add(mapper.map(), s))
            },
            (None, placing),
        );
        agg.flush(front.mapper.map());
        let (samples, stats) = agg.finish();
        (r, samples, stats)
    } else {
        front.mapper.log_changes();
        front.defer_when_in_binary =
            front.traces.is_none() && !opts.show_mmap_events && !perf_script;
        let initial = front.mapper.replica();
        let by_position = by_position.as_ref().map(|(bodies, pages)| (bodies, *pages));
        let parallel =
            aggregate_in_parallel(binary, opts.sample, workers, &initial, by_position, |sender| {
                let needed = sender.needed();
                let placing = unfiltered.then(|| sender.placing());
                let deferral = match by_position {
                    Some(_) => (Some(&*needed), placing),
                    None => (None, None),
                };
                let r = read(
                    &mut |ev| {
                        // Read by the workers alone: what `handle` would do is only `add`.
                        if let PerfEvent::Placed(run) = ev {
                            sender.add_placed(&mut front.mapper, run);
                            return;
                        }
                        if front.may_change_map(&ev) {
                            sender.before_change(front.mapper.map());
                        }
                        front.handle(ev, &mut |mapper, s| sender.add(mapper, s))
                    },
                    deferral,
                );
                sender.finish(&mut front.mapper);
                r
            });
        let (r, samples, stats, replayed) = parallel;
        // The samples without a pid the mapper deferred were decided by the copy that replayed
        // the whole log (the mmap events it deferred it matched and counted itself).
        if replayed.assumed_preferred_base_on_replay() {
            front.warn_no_mmap();
        }
        (r, samples, stats)
    };
    let mut warnings = front.warnings;
    warnings.extend(reader_warnings?);
    stats.merge(&front.filtered);
    if front.matched.is_none() && stats.read > 0 && front.mapper.stats.name_match_wrong_build_id > 0
    {
        warnings.push(format!(
            "{} is mapped in the input, but with a different build id than {}",
            front.mapper.binary_file_name(),
            binary.path().display()
        ));
    }
    Ok(InputResult {
        samples,
        stats,
        matched: front.matched,
        warnings,
        mapping: front.mapper.stats,
        truncated: None,
        traces: front.traces.map(TraceCollector::finish).unwrap_or_default(),
        weighting: (opts.sample.weighting, String::new()),
    })
}

/// Reads every input, in parallel when there are several, and merges what they hold. An input
/// that cannot be used is skipped with a warning when `opts.keep_going` allows it, else its
/// error ends the run; a run with no input left is an error.
fn read_samples(
    binary: &Binary,
    input: &Input,
    opts: &ReadOptions,
    workers: usize,
    report: &mut InputsReport,
) -> Result<AggregatedSamples, Error> {
    use rayon::prelude::*;
    let table = opts.temporal_traces.map(|_| FunctionTable::of_binary(binary));
    let functions = table.as_ref();
    let (files, perf_script) = match input {
        Input::PerfData(given) => (perf_data::list_perf_data_files(given), false),
        Input::PerfScript(p) => (vec![InputFile::named(p)], true),
        Input::Unsymbolized(_) | Input::Aggregate(_) => {
            unreachable!("unsymbolized and aggregate inputs have no samples")
        }
    };
    let ip_opts;
    let mut opts = opts;
    if !perf_script && !opts.sample.leading_ip_only && without_branch_stacks(&files) {
        ip_opts = ReadOptions {
            sample: SampleOptions { leading_ip_only: true, ..opts.sample },
            ..opts.clone()
        };
        opts = &ip_opts;
        report.ip_samples_detected = true;
        let usable = files.iter().filter(|f| f.unusable.is_none());
        report.notes.push(format!(
            "{} recorded no branch stacks (perf record without -b or --call-graph lbr): \
             profiling from the sample IPs, as --leading-ip-only",
            usable.map(|f| f.path.display().to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    // Counts are weighted (fixed-point, see super::weighting) unless asked not to.
    let weighted = !opts.sample.leading_ip_only && opts.lbr_weighting != LbrWeighting::None;
    // Several files: one per worker; one file: all workers on it.
    let usable = files.iter().filter(|f| f.unusable.is_none()).count();
    let per_file = if usable > 1 { 1 } else { workers };
    let read = |f: &mut InputFile| match f.unusable.take() {
        Some(e) => Err(e),
        None if perf_script => read_perf_script_file(opts, per_file, binary, functions, &f.path),
        None => read_perf_data_file(opts, per_file, binary, functions, &f.path),
    };
    let results: Vec<(InputFile, Result<InputResult, Error>)> = files
        .into_par_iter()
        .with_max_len(1)
        .map(|mut f| {
            let r = read(&mut f);
            (f, r)
        })
        .collect();
    let mut samples = AggregatedSamples::default();
    let mut mapping = MappingStats::default();
    let mut traces = Vec::new();
    for (file, r) in results {
        let mut r = match r {
            Ok(r) => r,
            Err(e) => {
                let why = e.to_string();
                match opts.keep_going.skip(&file, e) {
                    Ok(warning) => {
                        report.warnings.push(warning);
                        let skipped = InputOutcome::Skipped(why);
                        report.inputs.push(InputReport::new(&file.path, skipped));
                        continue;
                    }
                    Err(e) => {
                        let failed = InputOutcome::Failed(why);
                        report.inputs.push(InputReport::new(&file.path, failed));
                        return Err(e);
                    }
                }
            }
        };
        traces.extend(r.traces);
        mapping.merge(r.mapping);
        r.samples.merge_worker_maps();
        if weighted {
            r.samples.to_run_unit(r.weighting.0);
            if !report.weighting.contains(&r.weighting.1) {
                report.weighting.push(r.weighting.1.clone());
            }
        }
        samples.merge(r.samples);
        report.samples.merge(&r.stats);
        report.warnings.extend(r.warnings.iter().cloned());
        if let Some(m) = r.matched {
            report.matched_by = Some(report.matched_by.map_or(m, |h| h.min(m)));
        }
        let outcome = r.truncated.map_or(InputOutcome::Read, InputOutcome::Truncated);
        report.inputs.push(InputReport {
            samples: r.stats,
            matched_by: r.matched,
            warnings: r.warnings,
            ..InputReport::new(&file.path, outcome)
        });
    }
    if report.skipped() == report.inputs.len() {
        return Err(Error::NoUsableInput { inputs: report.inputs.len() });
    }
    let truncated = report.truncated() > 0;
    let s = &report.samples;
    let first_input = || match input {
        Input::PerfData(paths) | Input::Aggregate(paths) => {
            paths.first().cloned().unwrap_or_default()
        }
        Input::PerfScript(p) | Input::Unsymbolized(p) => p.clone(),
    };
    // Said first: with every sample filtered out, none is left to have a branch stack.
    if s.read > 0 && s.other_process + s.other_event == s.read {
        return Err(Error::BadFile { path: first_input(), what: filters_keep_nothing(opts, s) });
    }
    if s.read > 0 && s.used == 0 && s.no_branch_stack == s.read - s.other_process - s.other_event {
        return Err(Error::BadFile {
            path: first_input(),
            what: "no sample has a branch stack (recorded without -b or --call-graph lbr?): \
                   give --leading-ip-only (or --basic-events) for a profile from the sample IPs"
                .into(),
        });
    }
    if opts.kernel && report.samples.read > 0 && !mapping.binary_mapped() {
        return Err(Error::BadFile {
            path: input_paths(input).into(),
            what: "Kernel is requested, but no kernel is found in mmap events \
                   ([kernel.kallsyms], [kernel.kallsyms]_text or _stext)"
                .into(),
        });
    }
    if report.samples.read > 0 && report.samples.used == 0 {
        no_sample_in_binary(binary, input, opts.pid, &mapping, truncated, report)?;
    }
    report.traces = table.map(|table| TemporalTraces { table, traces });
    Ok(samples)
}

/// The weighting `asked` gives for one input whose branch-stack sampling events are `events`
/// (`None`: not known, as for perf script text and streams), and why: `auto` weights by the
/// events' unit, and by none (+1 per range) when it is unknown or the events differ in unit.
fn input_weighting(asked: LbrWeighting, events: Option<&[(u32, u64)]>) -> (Weighting, String) {
    let by = |w: Weighting| match w {
        Weighting::Plain => "not weighted".to_string(),
        _ => format!("weighted by 1/{}", w.name()),
    };
    if let Some(w) = Weighting::asked(asked) {
        return (w, format!("{} (--lbr-weighting={})", by(w), asked.name()));
    }
    let none = |why: &str| (Weighting::Plain, format!("not weighted ({why})"));
    let Some(events) = events else {
        return none("sampling event not recorded in the input; see --lbr-weighting");
    };
    let mut units: Vec<_> = events.iter().map(|&(kind, config)| event_unit(kind, config)).collect();
    units.sort_by_key(|u| u.map(LbrWeighting::name));
    units.dedup();
    match units[..] {
        [Some(LbrWeighting::Branches)] => none("sampled by taken branches"),
        [Some(u)] => {
            let w = Weighting::asked(u).unwrap_or_default();
            (w, format!("{} (sampled by {})", by(w), u.name()))
        }
        [] => none("no event samples branch stacks"),
        [_] => none("unknown sampling event; see --lbr-weighting"),
        _ => none("events of different units; see --lbr-weighting"),
    }
}

/// Whether every perf.data file of `files` records samples without branch stacks, by its attrs
/// (stdin, pipes, pipe-mode files, files without sampling attrs and files that cannot be read,
/// whose reading says why, say nothing).
fn without_branch_stacks(files: &[InputFile]) -> bool {
    let mut any = false;
    let regular = |f: &&InputFile| {
        f.unusable.is_none() && std::fs::metadata(&f.path).is_ok_and(|m| m.is_file())
    };
    for path in files.iter().filter(regular).map(|f| &f.path) {
        let Ok(map) = perf_data::map_file(path) else { continue };
        match PerfData::parse(&map, path).map(|d| d.info().branch_stack) {
            Ok(Some(false)) => any = true,
            Ok(_) => return false,
            Err(_) => {}
        }
    }
    any
}

/// No sample of the input lands in the binary: say what the input holds instead. A binary the
/// input never maps is the wrong binary (an error, as llvm-profgen's `No relevant mmap event`);
/// a mapped binary without samples, or a truncated input, gives a warning and the empty profile.
fn no_sample_in_binary(
    binary: &Binary,
    input: &Input,
    pid: Option<i32>,
    mapping: &MappingStats,
    truncated: bool,
    report: &mut InputsReport,
) -> Result<(), Error> {
    let mut found = mapping.what_the_input_maps_instead();
    if mapping.name_match_wrong_build_id > 0 {
        found.push_str(&format!(
            "; {} is mapped in the input with another build id: rebuilt since the recording?",
            file_name_of(binary.path())
        ));
    }
    let for_pid = pid.map_or(String::new(), |p| format!(" for pid {p}"));
    if mapping.binary_mapped() || truncated {
        let how =
            if mapping.binary_mapped() { "is mapped" } else { "is not mapped in the part read" };
        report.warnings.push(format!(
            "no sample lands in {} (it {how}{for_pid}); {found}",
            binary.path().display()
        ));
        return Ok(());
    }
    let input = input_paths(input);
    let identity = match binary.build_id() {
        Some(id) => format!("build id {}, file name {}", hex(id), file_name_of(binary.path())),
        None => format!("no build id, file name {}", file_name_of(binary.path())),
    };
    Err(Error::BinaryNotInInput {
        binary: binary.path().to_path_buf(),
        input: format!("{input}{for_pid}"),
        identity,
        found,
    })
}

/// Why `--pid` / `--perf-event` left no sample: how many each filter dropped.
fn filters_keep_nothing(opts: &ReadOptions, s: &SampleStats) -> String {
    let mut dropped = Vec::new();
    if let Some(pid) = opts.pid {
        dropped.push(format!("{} of other processes than --pid {pid}", s.other_process));
    }
    if !opts.perf_events.is_empty() {
        dropped.push(format!(
            "{} of other events than --perf-event {} (`perf evlist -i FILE` lists the input's \
             events, with their modifiers such as cycles:u)",
            s.other_event,
            opts.perf_events.join(",")
        ));
    }
    format!("the filters keep no sample: of {} samples read, {}", s.read, dropped.join(" and "))
}

/// The input files, for messages.
fn input_paths(input: &Input) -> String {
    match input {
        Input::PerfData(paths) | Input::Aggregate(paths) => {
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        }
        Input::PerfScript(p) | Input::Unsymbolized(p) => p.display().to_string(),
    }
}

/// llvm-profgen's warning line: `12.34%(n/total) <msg>` (printed after `warning: `).
pub fn warning_summary(n: u64, total: u64, msg: &str) -> Option<String> {
    (n > 0 && total > 0)
        .then(|| format!("{:.2}%({n}/{total}) {msg}", n as f64 * 100.0 / total as f64))
}

fn push_warning_summaries(report: &mut InputsReport, lines: Vec<(u64, u64, &'static str)>) {
    report
        .warnings
        .extend(lines.into_iter().filter_map(|(n, total, msg)| warning_summary(n, total, msg)));
}

/// The distinct samples → counters: LBR-only samples need no context; samples with call stacks
/// (normalised as they were aggregated) are unwound, the distinct ones in parallel.
fn samples_to_counters(
    binary: &Binary,
    samples: &AggregatedSamples,
    opts: &ReadOptions,
    report: &mut InputsReport,
) -> ContextCounters {
    if !samples.has_call_stacks {
        let mut out = ContextCounters { weights: samples.weights, ..Default::default() };
        *out.counters_mut(ContextKey::None) = lbr_counters(binary, samples);
        return out;
    }
    let normalize = &samples.normalize;
    let entries = samples.in_stack_order();
    let probe_based = binary.probes().is_some();
    let mut context = opts.context;
    if probe_based && opts.max_unsymbolized_context_depth != -1 {
        // Upstream's AddressStack::getContextKey: the smaller of the two depths (-1 = none).
        let limit = opts.max_unsymbolized_context_depth;
        let depth = context.max_context_depth;
        context.max_context_depth = if depth == -1 { limit } else { depth.min(limit) };
    }
    let opts =
        UnwindOptions { probe_based, context, tail_call_frames: !opts.sample.llvm_compatible };
    let unwind_stack = |u: &mut Unwinder<_>, &(_, i): &(_, u32)| {
        let (count, callchain, branches) = entries.sample(i);
        u.unwind_parts(callchain, branches, count);
    };
    let (mut counters, unwind) = unwind_all_with(binary, &entries.order, unwind_stack, opts);
    counters.weights = samples.weights;
    report.normalize = normalize.clone();
    report.unwind = unwind;
    // Unwinding counted weights: deep stacks back in samples.
    report.unwind.deep_stacks = samples.weights.scale(report.unwind.deep_stacks);
    add_unwind_warnings(report, counters.by_context.len());
    counters
}

/// The samples not unwound and llvm-profgen's warning lines, from the normalisation and unwinder
/// statistics in `report`; `contexts` is how many contexts the counters have.
fn add_unwind_warnings(report: &mut InputsReport, contexts: usize) {
    let n = &report.normalize;
    report.not_unwound = n.dropped_prolog_epilog.saturating_add(n.dropped_empty_lbr);
    let lines = n.summary(report.distinct_samples as u64);
    push_warning_summaries(report, lines);
    let lines = report.unwind.summary(contexts as u64);
    push_warning_summaries(report, lines);
    if report.normalize.long_lbr > 0 {
        report.warnings.push(format!(
            "{} samples have more than {MAX_BRANCHES} LBR entries: the newest {MAX_BRANCHES} are used",
            report.normalize.long_lbr
        ));
    }
    if report.unwind.deep_stacks > 0 {
        report.warnings.push(format!(
            "{} samples have call stacks deeper than {MAX_CONTEXT_FRAMES} frames: their contexts keep the innermost {MAX_CONTEXT_FRAMES}",
            report.unwind.deep_stacks
        ));
    }
}

fn read_perf_script_file(
    opts: &ReadOptions,
    workers: usize,
    binary: &Binary,
    functions: Option<&FunctionTable>,
    path: &Path,
) -> Result<InputResult, Error> {
    let progress = opts.reporter.input(&path.display().to_string(), None);
    let text = read_file(path)?;
    progress.consumed(text.len() as u64);
    // Upstream's default filter: a shared library's own build id, none for an executable.
    let filter = match &opts.filter_build_id {
        Some(id) => Some(id.as_slice()),
        None => binary.build_id().filter(|_| binary.is_shared_library()),
    };
    let script_opts = ScriptOptions {
        perf_events: opts.perf_events.clone(),
        leading_ip_only: opts.sample.leading_ip_only,
        filter_build_id: filter.map(hex),
    };
    let (opts, (weighting, why)) = weighted_by(opts, None);
    let opts = &opts;
    aggregate_events(
        opts,
        workers,
        binary,
        functions,
        None,
        |on_event, _| Ok(read_perf_script(&text, path, &script_opts, on_event)?.into_warnings()),
        |_| None,
        true,
        &[],
    )
    .map(|r| InputResult { weighting: (weighting, why), ..r })
}

/// `opts` with the LBR weighting of an input whose sampling events are `events`, and the
/// weighting with why.
fn weighted_by(
    opts: &ReadOptions,
    events: Option<&[(u32, u64)]>,
) -> (ReadOptions, (Weighting, String)) {
    let (weighting, why) = input_weighting(opts.lbr_weighting, events);
    let sample = SampleOptions { weighting, ..opts.sample };
    (ReadOptions { sample, ..opts.clone() }, (weighting, why))
}

fn read_perf_data_file(
    opts: &ReadOptions,
    workers: usize,
    binary: &Binary,
    functions: Option<&FunctionTable>,
    path: &Path,
) -> Result<InputResult, Error> {
    let truncated = std::cell::Cell::new(None);
    let finish = |report: perf_data::ReadReport| -> Vec<String> {
        truncated.set(report.truncated.clone());
        report.into_warnings(path)
    };
    let with_truncation = |r: InputResult| InputResult { truncated: truncated.take(), ..r };
    // Standard input, or a named pipe (`<(perf record -o - ...)`): read as a stream, since it
    // cannot be mapped.
    let stream: Option<(Box<dyn std::io::Read>, String)> = if path.as_os_str() == "-" {
        Some((Box::new(std::io::stdin().lock()), "<stdin>".into()))
    } else if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        let file = std::fs::File::open(path)
            .map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
        Some((Box::new(file), path.display().to_string()))
    } else {
        None
    };
    if let Some((stream, name)) = stream {
        let _progress = opts.reporter.input(&name, None);
        let (opts, weighting) = weighted_by(opts, None);
        return aggregate_events(
            &opts,
            workers,
            binary,
            functions,
            None,
            |on_event, _| Ok(finish(read_perf_data_stream(stream, path, on_event)?)),
            |_| None,
            false,
            &[],
        )
        .map(|r| InputResult { weighting, ..with_truncation(r) });
    }
    let map = perf_data::map_file(path)?;
    let data = PerfData::parse(&map, path)?;
    let pages = perf_data::PageReleaser::new(&map);
    let bodies = data.sample_bodies();
    let ahead = bodies.as_ref().and_then(|b| b.walk_ahead().cloned());
    let event_names = data.info().event_names.clone();
    let (opts, weighting) = weighted_by(opts, Some(&data.info().branch_events));
    let opts = &opts;
    aggregate_events(
        opts,
        workers,
        binary,
        functions,
        bodies.map(|bodies| (bodies, &pages)),
        |on_event, deferral| {
            let progress = opts.reporter.input(&path.display().to_string(), Some(map.len() as u64));
            let (needed, placing) = deferral;
            let consumed = |upto: usize, read: usize| {
                match needed {
                    // Records handed out by position are read again by the workers.
                    Some(needed) => needed.consumed(upto, read, &pages),
                    None => pages.release_before(upto),
                }
                progress.consumed(upto as u64);
            };
            Ok(finish(match needed {
                Some(_) => data.decode_in_time_order_deferred(
                    on_event,
                    consumed,
                    placing,
                    ahead.as_deref(),
                )?,
                None => data.decode_in_time_order_releasing(on_event, consumed, placing)?,
            }))
        },
        |i| event_names.get(i).cloned(),
        false,
        &data.info().build_ids,
    )
    .map(|r| InputResult { weighting, ..with_truncation(r) })
}
