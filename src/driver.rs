//! Runs a `profgen` command by wiring the stages: binary → inputs → counters → profile →
//! post-passes → writer. Each step is a library call that another command can reuse:
//! [`read_counters`] (inputs → counters and the run report), [`crate::profile::generate`]
//! (counters → profile) and [`finish_profile`] (post-passes → output). `profgen order`
//! ([`run_order`]) reads the same inputs for their temporal traces and writes a function order
//! ([`write_order`]), which a profile run can also do on the side (`--order-output`).
//!
//! The fleet commands split a profile run in two: `profgen aggregate` ([`run_aggregate`]) stops
//! after [`read_counters`] and writes the counters of each binary to an aggregate file, `profgen
//! merge` ([`run_merge`]) sums such files, and the profile run reads them back as its input
//! ([`Input::Aggregate`]), for one binary or for every binary of a store ([`run_store`]).

use crate::aggregate::ContextCounters;
use crate::aggregate::pga::{Aggregate, BinaryAggregate, BinaryKey};
use crate::aggregate::read::{Input, InputOutcome, InputsReport, ReadOptions, counting_options};
use crate::aggregate::samples::SampleStats;
use crate::aggregate::traces::{FunctionTable, TemporalTraces};
use crate::aggregate::unsymbolized::{UnsymbolizedOptions, write_unsymbolized};
use crate::binary::store::{BinaryStore, StoredBinary};
use crate::binary::{Binary, LoadOptions, hex};
use crate::config::{
    AggregateConfig, Binaries, Config, MergeConfig, OrderConfig, OutputOptions, RemapConfig,
};
use crate::error::Error;
use crate::input::InputFile;
use crate::input::perf_data::MappedFile;
use crate::input::read_file;
use crate::json::Json;
use crate::mapping::{MatchedBy, file_name_of};
use crate::order::reservoir::TraceSample;
use crate::order::{OrderOptions, OrderReport, offer_traces, order_file};
use crate::profile::{self, Profile};
use crate::progress::{Display, Phase, PhaseTimer, Reporter, Sink};
use crate::remap::RemapReport;
use crate::writer::{self, OutputFormat, USE_MD5_IGNORED};
use crate::{aggregate, postpass, reader};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// What a run did, for the summary line, the `--report` file and tests.
#[derive(Debug, Default)]
pub struct RunReport {
    /// The binary's build id (hex), once it is loaded.
    pub build_id: Option<String>,
    pub inputs: InputsReport,
    pub functions_in_profile: usize,
    /// Every warning of the run, in the order the stages gave them.
    pub warnings: Vec<String>,
    /// What making the function order did, when one was written.
    pub order: Option<OrderReport>,
    /// Facts about the run that are not warnings (`note: ` lines on stderr).
    pub notes: Vec<String>,
    /// `--time-profgen`: the time-per-phase table.
    pub phase_times: Option<String>,
}

impl RunReport {
    /// One line: samples read, used, and dropped by reason; functions in the profile.
    pub fn summary_line(&self) -> String {
        format!("{}; {} functions in the profile", self.samples_line(), self.functions_in_profile)
    }

    /// The exit code of a run that wrote its output: [`EXIT_INCOMPLETE`] when an input was
    /// skipped or read only up to a cut, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.inputs.skipped() + self.inputs.truncated() > 0 { EXIT_INCOMPLETE } else { 0 }
    }

    /// Inputs skipped or truncated (when any), samples read, used, and dropped by reason, and
    /// how the binary was recognised.
    pub fn samples_line(&self) -> String {
        let s = &self.inputs.samples;
        let mut dropped = Vec::new();
        for (n, why) in [
            (s.outside_binary, "outside the binary"),
            (s.no_branch_stack, "without branch stack"),
            (s.other_process, "of other processes"),
            (s.other_event, "of other events"),
        ] {
            if n > 0 {
                dropped.push(format!("{n} {why}"));
            }
        }
        let dropped_total = s.read - s.used;
        let mut line = String::from("profgen: ");
        let (skipped, truncated) = (self.inputs.skipped(), self.inputs.truncated());
        if skipped + truncated > 0 {
            line.push_str(&format!(
                "{} inputs ({skipped} skipped, {truncated} truncated); ",
                self.inputs.inputs.len()
            ));
        }
        line.push_str(&format!("{} samples read, {} used", s.read, s.used));
        if self.inputs.distinct_samples > 0 {
            line.push_str(&format!(" ({} distinct stacks)", self.inputs.distinct_samples));
        }
        line.push_str(&format!(", {dropped_total} dropped"));
        if !dropped.is_empty() {
            line.push_str(&format!(" ({})", dropped.join(", ")));
        }
        if self.inputs.not_unwound > 0 {
            line.push_str(&format!("; {} samples not unwound (stack sampled in a prolog/epilog, or no branch in the binary)", self.inputs.not_unwound));
        }
        match self.inputs.matched_by {
            Some(MatchedBy::BuildId) => line.push_str("; binary matched by build id"),
            Some(MatchedBy::FileName) => line.push_str("; binary matched by file name"),
            None => {}
        }
        line
    }
}

/// Exit code of a run that wrote its output without reading every input to its end: some were
/// skipped (`--keep-going`, or files in a `--perfdata` directory), or truncated.
pub const EXIT_INCOMPLETE: u8 = 3;

/// Runs profile generation of one binary on `cfg.threads` worker threads (at most one per core,
/// [`usable_threads`]). Returns what the run did (also when it failed: the inputs read and
/// skipped so far, the warnings, to be printed by `main`) and whether it succeeded; with
/// `cfg.report` the report is also written there as JSON, in either case. Progress goes to
/// stderr when it is a terminal and the options ask.
pub fn run(cfg: &Config) -> (RunReport, Result<(), Error>) {
    let timed = cfg.run.time_phases || cfg.run.report.is_some();
    let timer = timed.then(|| Arc::new(PhaseTimer::default()));
    let reporter = reporter(cfg.read.progress && !cfg.run.quiet, timer.clone());
    let mut report = RunReport::default();
    let result = on_threads(cfg.threads, || generate(cfg, &reporter, &mut report));
    let mut result = result.map(|((), note)| report.warnings.splice(0..0, note).for_each(drop));
    reporter.finish();
    if cfg.run.time_phases {
        report.phase_times = timer.as_ref().map(|t| t.table());
    }
    if let (Some(path), Some(timer)) = (&cfg.run.report, &timer) {
        let json = run_report_json(cfg, &report, &result, &timer.times()).pretty();
        if let Err(e) = writer::write_bytes_atomically(json.as_bytes(), path) {
            result = result.and(Err(e));
        }
    }
    (report, result)
}

/// The progress reporter of a run: a display on stderr when `display` and stderr is a terminal,
/// and the phase timer of `--time-profgen`.
fn reporter(display: bool, timer: Option<Arc<PhaseTimer>>) -> Reporter {
    let mut sinks: Vec<Arc<dyn Sink>> = Vec::new();
    if let Some(t) = timer {
        sinks.push(t);
    }
    if display && std::io::stderr().is_terminal() {
        sinks.push(Arc::new(Display::new()));
    }
    Reporter::new(sinks)
}

/// How many worker threads a request for `n` gets: at most the cores this process may run on
/// (more only add overhead, and thousands of them take seconds and gigabytes to start), and a
/// warning saying so when the request is lowered.
pub fn usable_threads(n: usize) -> (usize, Option<String>) {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    if n <= cores {
        return (n, None);
    }
    let note = format!(
        "--threads {n} lowered to {cores}: this machine runs {cores} threads at once, more would \
         only add overhead"
    );
    (cores, Some(note))
}

/// Runs `job` on a pool of worker threads for a request of `n` ([`usable_threads`]; the job
/// finds the pool's size in `rayon::current_num_threads`); returns its result and the warning
/// to report when the request was lowered.
fn on_threads<T>(
    n: usize,
    job: impl FnOnce() -> Result<T, Error> + Send,
) -> Result<(T, Option<String>), Error>
where
    T: Send,
{
    let (n, note) = usable_threads(n);
    let result = rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map_err(|e| Error::Usage(format!("cannot start {n} worker threads: {e}")))?
        .install(job)?;
    Ok((result, note))
}

fn generate(cfg: &Config, reporter: &Reporter, report: &mut RunReport) -> Result<(), Error> {
    let Binaries::One(path) = &cfg.binaries else {
        return Err(Error::Usage("a binary store profiles with `run_store`".into()));
    };
    reporter.phase(Phase::Loading);
    let binary = Binary::load(path, &cfg.load)?;
    report.build_id = binary.build_id().map(hex);
    report.warnings.extend_from_slice(binary.warnings());
    if cfg.show_disassembly_only || cfg.show_pseudo_probe {
        show_binary(cfg, &binary)?;
    }
    let Some(input) = cfg.input.as_ref().filter(|_| !cfg.show_disassembly_only) else {
        return Ok(());
    };
    reporter.phase(Phase::Reading);
    let read = ReadOptions { reporter: reporter.clone(), ..cfg.read.clone() };
    let counters = read_counters(&binary, input, &read, rayon::current_num_threads(), report)?;
    if cfg.skip_symbolization {
        reporter.phase(Phase::Writing);
        write_unsymbolized_file(&binary, &counters, &cfg.read.unsymbolized, &cfg.output.path)?;
    } else {
        reporter.phase(Phase::Symbolizing);
        let mut opts = cfg.profile;
        // Inputs recorded without branch stacks were read as IP samples: profile them as such.
        opts.line.leading_ip_only |= report.inputs.ip_samples_detected;
        let profile = profile::generate(&binary, &counters, &opts, &mut report.warnings);
        if cfg.run.warn_not_symbolized {
            report.warnings.extend(not_symbolized_warning(&binary, &counters));
        }
        reporter.phase(Phase::PostProcessing);
        finish_profile(&binary, &counters, profile, &cfg.output, report)?;
    }
    if let (Some(order), Some(traces)) = (&cfg.order, report.inputs.traces.take()) {
        let mut sample = TraceSample::new(order.options.sampling);
        offer_traces(&mut sample, &traces.table, traces.traces);
        write_order(&sample, &traces.table, &order.options, Some(&order.path), None, report)?;
    }
    Ok(())
}

/// `profgen order` on `cfg.threads` worker threads: the inputs' temporal traces and the saved
/// ones, sampled together, then the order and/or the sample written.
pub fn run_order(cfg: &OrderConfig) -> Result<RunReport, Error> {
    let reporter = reporter(cfg.read.progress, None);
    let read = ReadOptions { reporter: reporter.clone(), ..cfg.read.clone() };
    let result = on_threads(cfg.threads, || order(cfg, &read));
    reporter.finish();
    result.map(|(mut report, note)| {
        report.warnings.splice(0..0, note);
        report
    })
}

fn order(cfg: &OrderConfig, read: &ReadOptions) -> Result<RunReport, Error> {
    let binary = Binary::load(&cfg.binary, &Default::default())?;
    let mut report = RunReport { warnings: binary.warnings().to_vec(), ..Default::default() };
    let mut sample = TraceSample::new(cfg.options.sampling);
    for path in &cfg.traces {
        let saved = TraceSample::read(&read_file(path)?, path)?;
        sample.merge(saved).map_err(|what| Error::BadFile { path: path.clone(), what })?;
    }
    let table = match &cfg.input {
        Some(input) => {
            let threads = rayon::current_num_threads();
            let mut inputs = aggregate::read::read_traces(&binary, input, read, threads)?;
            report.warnings.append(&mut inputs.warnings);
            let TemporalTraces { table, traces } =
                inputs.traces.take().expect("profgen order reads temporal traces");
            offer_traces(&mut sample, &table, traces);
            report.inputs = inputs;
            table
        }
        None => FunctionTable::of_binary(&binary),
    };
    write_order(
        &sample,
        &table,
        &cfg.options,
        cfg.output.as_deref(),
        cfg.write_traces.as_deref(),
        &mut report,
    )?;
    Ok(report)
}

/// Writes the order of `table`'s functions by `sample` to `order_path` and the sample itself to
/// `traces_path`, each when given.
pub fn write_order(
    sample: &TraceSample,
    table: &FunctionTable,
    opts: &OrderOptions,
    order_path: Option<&Path>,
    traces_path: Option<&Path>,
    report: &mut RunReport,
) -> Result<(), Error> {
    if let Some(path) = traces_path {
        writer::write_bytes_atomically(sample.write().as_bytes(), path)?;
    }
    if let Some(path) = order_path {
        let (text, order) = order_file(sample, table, opts);
        if order.traces == 0 {
            report.warnings.push(format!(
                "no temporal trace (no sample landed in a function of the binary): {} lists the \
                 functions in their original order",
                path.display()
            ));
        }
        writer::write_bytes_atomically(text.as_bytes(), path)?;
        report.order = Some(order);
    }
    Ok(())
}

/// Reads `input` into counters with `threads` workers, adding what it did to `report`.
pub fn read_counters(
    binary: &Binary,
    input: &Input,
    opts: &ReadOptions,
    threads: usize,
    report: &mut RunReport,
) -> Result<ContextCounters, Error> {
    let counters = aggregate::read::read_counters(binary, input, opts, threads, &mut report.inputs);
    report.warnings.append(&mut report.inputs.warnings);
    report.notes.append(&mut report.inputs.notes);
    counters
}

/// Post-processes `profile` (built from `counters` of `binary`) and writes it as `opts` say.
pub fn finish_profile(
    binary: &Binary,
    counters: &ContextCounters,
    mut profile: Profile,
    opts: &OutputOptions,
    report: &mut RunReport,
) -> Result<(), Error> {
    postpass::run(binary, counters, &mut profile, &opts.postpass, &opts.summary)?;
    if opts.populate_profile_symbol_list {
        profile.symbol_list = Some(profile::symbol_list(binary));
    }
    let density = writer::density::density_report(&profile, &opts.density);
    print!("{}", density.stdout);
    report
        .warnings
        .extend(density.warnings.lines().map(|l| l.trim_start_matches("warning: ").to_string()));
    if opts.zero_count_anchors {
        postpass::add_zero_count_anchors(&mut profile, &binary.anchors());
    }
    report.functions_in_profile = profile.functions.len();
    if profile.functions.is_empty() {
        report
            .warnings
            .push(format!("the profile is empty: {}", empty_profile_reason(binary, report)));
    }
    if opts.write.use_md5 && opts.format != OutputFormat::ExtBinary {
        report.warnings.push(USE_MD5_IGNORED.to_string());
    }
    writer::write_profile_file(&profile, opts.format, &opts.write, &opts.path)
}

/// Why a profile came out empty, for the warning that says so.
fn empty_profile_reason(binary: &Binary, report: &RunReport) -> String {
    let s = &report.inputs.samples;
    let name = binary.path().display();
    if binary.functions().is_empty() {
        format!("{name} has no functions (no symbol table and no DWARF: stripped?)")
    } else if s.read == 0 && report.inputs.distinct_samples == 0 {
        "the input has no samples".to_string()
    } else if s.read > 0 && s.used == 0 {
        format!("none of the {} samples read was used (see the summary line for why)", s.read)
    } else {
        format!(
            "no sample fell into a function of {name}, or every profile was trimmed (cold) or \
             filtered"
        )
    }
}

/// `--warn-not-symbolized`: sampled instructions of the binary that have no function or no
/// source line (upstream llvm-profgen warns about addresses in recorded mappings it could not
/// symbolize).
fn not_symbolized_warning(binary: &Binary, counters: &ContextCounters) -> Option<String> {
    let mut missing = std::collections::BTreeSet::new();
    let mut sampled = 0u64;
    for c in counters.by_context.values() {
        for (&(start, end), _) in &c.ranges {
            for a in binary.insts_in(start, end) {
                sampled += 1;
                if binary.inline_stack(a).is_empty() {
                    missing.insert(a.0);
                }
            }
        }
    }
    (!missing.is_empty()).then(|| {
        let first: Vec<String> = missing.iter().take(8).map(|a| format!("{a:#x}")).collect();
        format!(
            "{} of {sampled} sampled instruction addresses of {} could not be symbolized (no \
             function or no line): {}{}",
            missing.len(),
            binary.path().display(),
            first.join(", "),
            if missing.len() > first.len() { ", ..." } else { "" }
        )
    })
}

/// `profgen remap`: reads the profile and the builds, remaps, writes the profile (and the
/// per-function report when asked).
pub fn remap(cfg: &RemapConfig) -> Result<(RemapReport, Vec<String>), Error> {
    let file = reader::read_profile_file(&cfg.profile)?;
    let binary = Binary::load(&cfg.binary, &cfg.load)?;
    let mut warnings = binary.warnings().to_vec();
    let old_code = match &cfg.old_binary {
        Some(path) => {
            let old = Binary::load(path, &LoadOptions::default())?;
            warnings.extend(old.warnings().iter().cloned());
            if old.probes().is_some() != file.profile.kind.probe_based {
                warnings.push(format!(
                    "{}: the profile is {}probe-based but this binary {} pseudo probes",
                    path.display(),
                    if file.profile.kind.probe_based { "" } else { "not " },
                    if old.probes().is_some() { "has" } else { "has no" }
                ));
            }
            Some(old.anchors())
        }
        None => None,
    };
    let new_code = binary.anchors();
    if new_code.probe_based != file.profile.kind.probe_based {
        return Err(Error::BadFile {
            path: cfg.binary.clone(),
            what: format!(
                "the profile {} is {}probe-based, but this binary {} pseudo probes",
                cfg.profile.display(),
                if file.profile.kind.probe_based { "" } else { "not " },
                if new_code.probe_based { "has" } else { "has no" }
            ),
        });
    }
    let (mut profile, report) = crate::remap::remap_profile(
        &file.profile,
        file.md5_names,
        &new_code,
        old_code.as_ref(),
        &cfg.remap,
    );
    if cfg.zero_count_anchors {
        postpass::add_zero_count_anchors(&mut profile, &new_code);
    }
    if cfg.write.use_md5 && cfg.format != OutputFormat::ExtBinary {
        warnings.push(USE_MD5_IGNORED.to_string());
    }
    writer::write_profile_file(&profile, cfg.format, &cfg.write, &cfg.output)?;
    if let Some(path) = &cfg.report {
        let table = report.table();
        if path.as_os_str() == "-" {
            eprint!("{table}");
        } else {
            writer::write_bytes_atomically(table.as_bytes(), path)?;
        }
    }
    Ok((report, warnings))
}

/// `--skip-symbolization`: the counters as llvm-profgen's unsymbolized profile.
fn write_unsymbolized_file(
    binary: &Binary,
    counters: &ContextCounters,
    opts: &UnsymbolizedOptions,
    output: &Path,
) -> Result<(), Error> {
    let mut text = Vec::new();
    write_unsymbolized(counters, opts.base(binary), &mut text)
        .expect("writing to memory cannot fail");
    writer::write_bytes_atomically(&text, output)
}

/// `--show-disassembly-only` and `--show-pseudo-probe` output, on stdout.
fn show_binary(cfg: &Config, binary: &Binary) -> Result<(), Error> {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let io_err = |source| Error::Io { path: "<stdout>".into(), source };
    if cfg.show_pseudo_probe {
        binary.dump_pseudo_probes(&mut out).map_err(io_err)?;
    }
    if cfg.show_disassembly_only {
        binary.dump_disassembly(&mut out, &cfg.disassembly)?;
    }
    std::io::Write::flush(&mut out).map_err(io_err)
}

/// One binary's part of a fleet command: which binary and what its run did.
#[derive(Debug)]
pub struct BinaryReport {
    /// The profile written (profile runs), or the binary's name and build id (aggregates).
    pub name: String,
    pub report: RunReport,
}

/// What `profgen aggregate` did.
#[derive(Debug, Default)]
pub struct AggregateReport {
    /// Per binary aggregated, in the order of the aggregate file.
    pub binaries: Vec<BinaryReport>,
    /// Executables the inputs map that the binary store does not have.
    pub unprofiled: usize,
    /// Input files skipped before the binaries were read (they could not be listed or parsed).
    pub skipped: usize,
    pub warnings: Vec<String>,
}

impl AggregateReport {
    /// 0, or [`EXIT_INCOMPLETE`] when an input was skipped or truncated.
    pub fn exit_code(&self) -> u8 {
        let runs = self.binaries.iter().map(|b| b.report.exit_code());
        if self.skipped > 0 { EXIT_INCOMPLETE } else { runs.max().unwrap_or(0) }
    }
}

/// `profgen aggregate`: reads the inputs into counters for each binary (as a profile run would,
/// up to [`read_counters`]) and writes them as an aggregate file.
pub fn run_aggregate(cfg: &AggregateConfig) -> Result<AggregateReport, Error> {
    let reporter = reporter(cfg.read.progress, None);
    let mut with_progress = cfg.clone();
    with_progress.read.reporter = reporter.clone();
    let result = on_threads(cfg.threads, || aggregate(&with_progress));
    reporter.finish();
    result.map(|(mut report, note)| {
        report.warnings.splice(0..0, note);
        report
    })
}

fn aggregate(cfg: &AggregateConfig) -> Result<AggregateReport, Error> {
    let options = counting_options(&cfg.read, cfg.load.use_dwarf_correlation);
    let mut out = Aggregate::new(options);
    let mut report = AggregateReport::default();
    let jobs: Vec<(StoredBinary, String, Input)> = match (&cfg.binaries, &cfg.input) {
        (Binaries::One(path), input) => {
            let stored = StoredBinary { path: path.clone(), debug: cfg.load.debug_binary.clone() };
            vec![(stored, file_name_of(path), input.clone())]
        }
        (Binaries::Store(dir), Input::PerfData(given)) => {
            let store = BinaryStore::open(dir)?;
            let skipped = store.skipped.iter().map(|e| format!("binary store: skipped {e}"));
            report.warnings.extend(skipped);
            let files = crate::input::perf_data::list_perf_data_files(given);
            let found = binaries_of_inputs(&store, files, &cfg.read, &mut out, &mut report)?;
            report.unprofiled = out.unprofiled.len();
            found.into_iter().map(|(b, name, files)| (b, name, Input::PerfData(files))).collect()
        }
        (Binaries::Store(_), _) => {
            return Err(Error::Usage("--binaries reads perf.data files (--perfdata)".into()));
        }
    };
    for (stored, name, input) in jobs {
        let load = LoadOptions { debug_binary: stored.debug.clone(), ..cfg.load.clone() };
        let binary = Binary::load(&stored.path, &load)?;
        let mut run = RunReport { warnings: binary.warnings().to_vec(), ..Default::default() };
        let threads = rayon::current_num_threads();
        let counters = read_counters(&binary, &input, &cfg.read, threads, &mut run)?;
        let key = match binary.build_id() {
            Some(id) => BinaryKey::BuildId(crate::binary::unpadded_build_id(id).to_vec()),
            None => BinaryKey::FileName(name.clone()),
        };
        let inputs = (run.inputs.inputs.len() - run.inputs.skipped()) as u64;
        if matches!(cfg.binaries, Binaries::One(_)) {
            out.inputs = inputs;
        }
        let i = &run.inputs;
        let entry = BinaryAggregate {
            file_name: name.clone(),
            inputs,
            matched_by: i.matched_by,
            samples: i.samples.clone(),
            distinct_samples: i.distinct_samples as u64,
            normalize: i.normalize.clone(),
            unwind: i.unwind.clone(),
            counters,
        };
        let shown = format!("{name} ({})", key.describe());
        match out.binaries.get_mut(&key) {
            Some(mine) => mine.merge(entry),
            None => {
                out.binaries.insert(key, entry);
            }
        }
        report.binaries.push(BinaryReport { name: shown, report: run });
    }
    writer::write_bytes_atomically(&out.encode(), &cfg.output)?;
    Ok(report)
}

/// Which binaries of `store` the perf.data `files` map, each with the file name it is mapped
/// under and the files that map it; the executables the store does not have go to
/// `out.unprofiled`. A file that cannot be read is skipped or fails the run as
/// `read.keep_going` says; `out.inputs` counts the others.
fn binaries_of_inputs(
    store: &BinaryStore,
    mut files: Vec<InputFile>,
    read: &ReadOptions,
    out: &mut Aggregate,
    report: &mut AggregateReport,
) -> Result<Vec<(StoredBinary, String, Vec<PathBuf>)>, Error> {
    use rayon::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};
    let mapped: Vec<Result<Vec<MappedFile>, Error>> = files
        .par_iter_mut()
        .map(|f| {
            if let Some(e) = f.unusable.take() {
                return Err(e);
            }
            let map = crate::input::perf_data::map_file(&f.path)?;
            crate::input::perf_data::PerfData::parse(&map, &f.path)?.mapped_executables()
        })
        .collect();
    let warnings = &mut report.warnings;
    let mut by_binary: BTreeMap<PathBuf, (StoredBinary, String, Vec<PathBuf>)> = BTreeMap::new();
    for (input, mapped) in files.iter().zip(mapped) {
        let mapped = match mapped {
            Ok(mapped) => mapped,
            Err(e) => {
                warnings.push(read.keep_going.skip(input, e)?);
                report.skipped += 1;
                continue;
            }
        };
        out.inputs += 1;
        let file = &input.path;
        let mut here = BTreeSet::new();
        for MappedFile { path, build_id: id } in mapped {
            let name = path.rsplit('/').next().unwrap_or(&path).to_string();
            match store.find(id.as_deref(), &name) {
                Some(b) => {
                    if here.insert(b.path.clone()) {
                        let entry = by_binary
                            .entry(b.path.clone())
                            .or_insert_with(|| (b, name, Vec::new()));
                        entry.2.push(file.clone());
                    }
                }
                None => {
                    if id.is_none() && store.count_named(&name) > 1 {
                        warnings.push(format!(
                            "{}: {path} has no build id, and {} binaries of the store are called {name}: not profiled",
                            file.display(),
                            store.count_named(&name)
                        ));
                    }
                    let id = id.as_deref().map(crate::binary::unpadded_build_id).unwrap_or(&[]);
                    *out.unprofiled.entry((id.to_vec(), path)).or_default() += 1;
                }
            }
        }
    }
    Ok(by_binary.into_values().collect())
}

/// What `profgen merge` did.
#[derive(Debug, Default)]
pub struct MergeReport {
    pub inputs: usize,
    pub binaries: usize,
    /// Input files the merged aggregates were made from.
    pub perf_inputs: u64,
}

/// `profgen merge`: sums aggregate files (one at a time: memory holds the result and one input).
pub fn run_merge(cfg: &MergeConfig) -> Result<MergeReport, Error> {
    let merged = Aggregate::read_merged(&cfg.inputs, None)?.unwrap_or_default();
    writer::write_bytes_atomically(&merged.encode(), &cfg.output)?;
    Ok(MergeReport {
        inputs: cfg.inputs.len(),
        binaries: merged.binaries.len(),
        perf_inputs: merged.inputs,
    })
}

/// A profile run over a binary store (`--binaries DIR --output-dir OUT`): for each binary the
/// aggregates have samples of and the store has, its profile, `OUT/NAME-BUILDID.prof`.
pub fn run_store(cfg: &Config) -> Result<Vec<BinaryReport>, Error> {
    let (mut reports, note) = on_threads(cfg.threads, || generate_store(cfg))?;
    if let (Some(note), Some(first)) = (note, reports.first_mut()) {
        first.report.warnings.insert(0, note);
    }
    Ok(reports)
}

fn generate_store(cfg: &Config) -> Result<Vec<BinaryReport>, Error> {
    let (Binaries::Store(dir), Some(Input::Aggregate(paths))) = (&cfg.binaries, &cfg.input) else {
        return Err(Error::Usage("--binaries profiles aggregates (--aggregate)".into()));
    };
    let store = BinaryStore::open(dir)?;
    let merged = Aggregate::read_merged(paths, None)?.unwrap_or_default();
    let out_dir = &cfg.output.path;
    std::fs::create_dir_all(out_dir)
        .map_err(|source| Error::Io { path: out_dir.clone(), source })?;
    let mut reports = Vec::new();
    for (key, entry) in &merged.binaries {
        if entry.samples.used == 0 {
            continue;
        }
        let id = match key {
            BinaryKey::BuildId(id) => Some(&id[..]),
            BinaryKey::FileName(_) => None,
        };
        let Some(stored) = store.find(id, &entry.file_name) else {
            reports.push(BinaryReport {
                name: entry.file_name.clone(),
                report: RunReport {
                    warnings: vec![format!(
                        "{} ({}): not in the binary store {}; no profile written",
                        entry.file_name,
                        key.describe(),
                        dir.display()
                    )],
                    ..Default::default()
                },
            });
            continue;
        };
        let load = LoadOptions { debug_binary: stored.debug.clone(), ..cfg.load.clone() };
        let binary = Binary::load(&stored.path, &load)?;
        let mut report = RunReport { warnings: binary.warnings().to_vec(), ..Default::default() };
        let (counters, mut inputs) =
            crate::aggregate::read::counters_from_aggregate(&binary, &merged, paths, &cfg.read)?;
        report.warnings.append(&mut inputs.warnings);
        report.inputs = inputs;
        let profile = profile::generate(&binary, &counters, &cfg.profile, &mut report.warnings);
        let name = match id {
            Some(id) => format!("{}-{}.prof", entry.file_name, hex(id)),
            None => format!("{}.prof", entry.file_name),
        };
        let output = OutputOptions { path: out_dir.join(name), ..cfg.output.clone() };
        finish_profile(&binary, &counters, profile, &output, &mut report)?;
        reports.push(BinaryReport { name: output.path.display().to_string(), report });
    }
    Ok(reports)
}

/// The `--report` document (README, "Run report"): what the run did, per input and in total,
/// how long each phase took, every warning, and how it ended.
fn run_report_json(
    cfg: &Config,
    report: &RunReport,
    result: &Result<(), Error>,
    phases: &[(Phase, Duration)],
) -> Json {
    let path = |p: &Path| Json::Str(p.display().to_string());
    let strings = |v: &[String]| Json::Arr(v.iter().cloned().map(Json::Str).collect());
    let matched = |m: Option<MatchedBy>| match m {
        Some(MatchedBy::BuildId) => Json::Str("build_id".into()),
        Some(MatchedBy::FileName) => Json::Str("file_name".into()),
        None => Json::Null,
    };
    let samples = |s: &SampleStats| {
        Json::Obj(vec![
            ("read", Json::Int(s.read)),
            ("used", Json::Int(s.used)),
            (
                "dropped",
                Json::Obj(vec![
                    ("outside_binary", Json::Int(s.outside_binary)),
                    ("without_branch_stack", Json::Int(s.no_branch_stack)),
                    ("other_process", Json::Int(s.other_process)),
                    ("other_event", Json::Int(s.other_event)),
                ]),
            ),
        ])
    };
    let inputs = report.inputs.inputs.iter().map(|i| {
        let (status, error, truncated) = match &i.outcome {
            InputOutcome::Read => ("read", Json::Null, Json::Null),
            InputOutcome::Truncated(t) => (
                "truncated",
                Json::Null,
                Json::Obj(vec![
                    ("offset", Json::Int(t.offset)),
                    ("reason", Json::Str(t.reason.clone())),
                ]),
            ),
            InputOutcome::Skipped(e) => ("skipped", Json::Str(e.clone()), Json::Null),
            InputOutcome::Failed(e) => ("failed", Json::Str(e.clone()), Json::Null),
        };
        Json::Obj(vec![
            ("path", path(&i.path)),
            ("status", Json::Str(status.into())),
            ("error", error),
            ("truncated_at", truncated),
            ("samples", samples(&i.samples)),
            ("binary_matched_by", matched(i.matched_by)),
            ("warnings", strings(&i.warnings)),
        ])
    });
    let count = |status: fn(&InputOutcome) -> bool| {
        Json::Int(report.inputs.inputs.iter().filter(|i| status(&i.outcome)).count() as u64)
    };
    let totals = Json::Obj(vec![
        (
            "inputs",
            Json::Obj(vec![
                ("total", Json::Int(report.inputs.inputs.len() as u64)),
                ("read", count(|o| matches!(o, InputOutcome::Read))),
                ("truncated", count(|o| matches!(o, InputOutcome::Truncated(_)))),
                ("skipped", count(|o| matches!(o, InputOutcome::Skipped(_)))),
                ("failed", count(|o| matches!(o, InputOutcome::Failed(_)))),
            ]),
        ),
        ("samples", samples(&report.inputs.samples)),
        ("distinct_stacks", Json::Int(report.inputs.distinct_samples as u64)),
        ("samples_not_unwound", Json::Int(report.inputs.not_unwound)),
        ("binary_matched_by", matched(report.inputs.matched_by)),
        ("functions_in_profile", Json::Int(report.functions_in_profile as u64)),
    ]);
    let phases = phases.iter().map(|(phase, t)| {
        Json::Obj(vec![
            ("name", Json::Str(phase.name().to_string())),
            ("seconds", Json::Num(t.as_secs_f64())),
        ])
    });
    let (exit_code, error) = match result {
        Ok(()) => (report.exit_code(), Json::Null),
        Err(e) => (e.exit_code() as u8, Json::Str(e.to_string())),
    };
    Json::Obj(vec![
        ("version", Json::Int(1)),
        ("exit_code", Json::Int(u64::from(exit_code))),
        ("error", error),
        (
            "binary",
            Json::Obj(vec![
                (
                    "path",
                    match &cfg.binaries {
                        Binaries::One(p) | Binaries::Store(p) => path(p),
                    },
                ),
                ("build_id", report.build_id.clone().map_or(Json::Null, Json::Str)),
            ]),
        ),
        ("output", path(&cfg.output.path)),
        ("inputs", Json::Arr(inputs.collect())),
        ("totals", totals),
        ("phases", Json::Arr(phases.collect())),
        ("warnings", strings(&report.warnings)),
    ])
}
