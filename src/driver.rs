//! Runs the pipeline for one `profgen` invocation: binary → inputs (in parallel, one mapper and
//! aggregator per input file, merged at the end) → counters → profile → post-passes → writer.
//! Everything user-visible besides the profile (warnings, the summary line) is produced here.

use crate::aggregate::lbr::lbr_counters;
use crate::aggregate::parallel::aggregate_in_parallel;
use crate::aggregate::samples::{AggregatedSamples, Aggregator, SampleMode, SampleStats, key};
use crate::aggregate::unwinder::{UnwindOptions, unwind_all_with};
use crate::aggregate::{ContextCounters, ContextKey};
use crate::binary::{Binary, FuncSource, LoadOptions};
use crate::config::{Config, Input};
use crate::error::Error;
use crate::input::PerfEvent;
use crate::input::Sample;
use crate::llvm::canonical_fn_name;
use crate::mapping::{
    AddressMap, AddressMapper, BinaryIdentity, MappingStats, MatchedBy, file_name_of, hex,
};
use crate::postpass;
use crate::profile::cs::{CsOptions, generate_line_cs, generate_probe_cs};
use crate::profile::summary::{DEFAULT_CUTOFFS, ProfileSummary};
use crate::profile::{Profile, context_size};
use std::path::Path;
use std::time::{Duration, Instant};

/// What a run did, for the summary line and for tests.
#[derive(Debug, Default)]
pub struct RunReport {
    pub samples: SampleStats,
    pub distinct_samples: usize,
    pub warnings: Vec<String>,
    /// How the binary was recognised in the inputs' mmap events.
    pub matched_by: Option<MatchedBy>,
    pub functions_in_profile: usize,
    /// Samples with call stacks that could not be unwound (leaf in a prolog/epilog, no LBR entry
    /// in the binary).
    pub not_unwound: u64,
}

impl RunReport {
    /// One line: samples read, used, and dropped by reason.
    pub fn summary_line(&self) -> String {
        let s = &self.samples;
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
        let mut line = format!("profgen: {} samples read, {} used", s.read, s.used);
        if self.distinct_samples > 0 {
            line.push_str(&format!(" ({} distinct stacks)", self.distinct_samples));
        }
        line.push_str(&format!(", {dropped_total} dropped"));
        if !dropped.is_empty() {
            line.push_str(&format!(" ({})", dropped.join(", ")));
        }
        if self.not_unwound > 0 {
            line.push_str(&format!("; {} samples not unwound (stack sampled in a prolog/epilog, or no branch in the binary)", self.not_unwound));
        }
        match self.matched_by {
            Some(MatchedBy::BuildId) => line.push_str("; binary matched by build id"),
            Some(MatchedBy::FileName) => line.push_str("; binary matched by file name"),
            None => {}
        }
        line.push_str(&format!("; {} functions in the profile", self.functions_in_profile));
        line
    }
}

/// Shows a spinner on stderr once reading takes longer than a second (never when stderr is not
/// a terminal: indicatif hides itself then).
struct Progress {
    enabled: bool,
    samples: u64,
    start: Instant,
    bar: Option<indicatif::ProgressBar>,
}

impl Progress {
    fn new(enabled: bool) -> Self {
        Progress { enabled, samples: 0, start: Instant::now(), bar: None }
    }
    fn sample(&mut self) {
        self.samples += 1;
        let samples = self.samples;
        if !self.enabled || !samples.is_multiple_of(65536) {
            return;
        }
        if self.bar.is_none() && self.start.elapsed() > Duration::from_secs(1) {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.set_style(
                indicatif::ProgressStyle::with_template("{spinner} {elapsed} {msg}")
                    .expect("static template"),
            );
            self.bar = Some(bar);
        }
        if let Some(bar) = &self.bar {
            bar.set_message(format!("{samples} samples read"));
            bar.tick();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// One input's contribution before merging.
struct InputResult {
    samples: AggregatedSamples,
    stats: SampleStats,
    matched: Option<MatchedBy>,
    warnings: Vec<String>,
    mapping: MappingStats,
    /// The input ended early (truncated perf.data).
    truncated: bool,
}

fn identity_of(binary: &Binary) -> BinaryIdentity {
    BinaryIdentity {
        build_id: binary.build_id().map(<[u8]>::to_vec),
        file_name: file_name_of(binary.path()),
        segments: binary.segments().to_vec(),
    }
}

fn sample_mode(cfg: &Config) -> SampleMode {
    SampleMode {
        leading_ip_only: cfg.leading_ip_only,
        ignore_stack: cfg.ignore_stack_samples,
        sample_period: cfg.sample_period,
    }
}

/// The sequential side of reading one input: mapping state, sample filters, progress, warnings.
struct EventFront<'c, N> {
    cfg: &'c Config,
    binary: &'c Binary,
    mapper: AddressMapper,
    event_names: N,
    /// perf script filters events itself.
    filter_events: bool,
    matched: Option<MatchedBy>,
    progress: Progress,
    warnings: Vec<String>,
    warned_no_mmap: bool,
    /// Samples dropped here, before aggregation.
    filtered: SampleStats,
    /// Whether a sample IP has landed in the binary; until then every sample is attributed to the
    /// executable it is in, to say what the input holds when none lands in the binary.
    ip_in_binary: bool,
}

impl<N: Fn(usize) -> Option<String>> EventFront<'_, N> {
    /// Applies `ev`; samples that pass the filters go to `add` with the current address map.
    fn handle(&mut self, ev: PerfEvent<'_>, add: &mut impl FnMut(&AddressMap, &Sample<'_>)) {
        let cfg = self.cfg;
        match ev {
            PerfEvent::Mmap(m) => {
                if let Some(how) = self.mapper.on_mmap(&m) {
                    if cfg.show_mmap_events {
                        println!("Mmap: Binary {} loaded at {:#x}: ", m.path, m.start.0);
                    }
                    self.matched = Some(self.matched.map_or(how, |h| h.min(how)));
                }
            }
            PerfEvent::Fork { pid, ppid, .. } => self.mapper.on_fork(pid, ppid),
            PerfEvent::Comm { pid, exec: true, .. } => self.mapper.on_exec(pid),
            PerfEvent::Comm { .. } | PerfEvent::Exit { .. } => {}
            PerfEvent::Sample(s) => {
                if cfg.pid.is_some_and(|p| s.pid.is_some_and(|sp| sp != p)) {
                    self.filtered.read += 1;
                    self.filtered.other_process += 1;
                    return;
                }
                if self.filter_events && !cfg.perf_events.is_empty() {
                    let name = (self.event_names)(s.attr_index);
                    if !name.is_some_and(|n| cfg.perf_events.contains(&n)) {
                        self.filtered.read += 1;
                        self.filtered.other_event += 1;
                        return;
                    }
                }
                if s.pid.is_none() && !self.mapper.any_mapping() && !self.warned_no_mmap {
                    self.warned_no_mmap = true;
                    self.mapper.assume_preferred_base();
                    self.warnings.push(format!(
                        "No relevant mmap event is matched for {}, will use preferred address ({:#x}) as the base loading address!",
                        self.mapper.binary_file_name(),
                        self.binary.preferred_base().0
                    ));
                }
                if !self.ip_in_binary {
                    match self.mapper.to_vaddr(s.pid, s.ip) {
                        Some(_) => self.ip_in_binary = true,
                        None => self.mapper.note_unused_sample(s.pid, s.ip),
                    }
                }
                add(self.mapper.map(), &s);
                self.progress.sample();
            }
        }
    }
}

/// Feeds one input's events through a fresh mapper into aggregation: on this thread with one
/// worker, else on `workers` threads fed in batches.
fn aggregate_events(
    cfg: &Config,
    workers: usize,
    binary: &Binary,
    read: impl FnOnce(&mut dyn FnMut(PerfEvent<'_>)) -> Result<Vec<String>, Error>,
    event_names: impl Fn(usize) -> Option<String>,
    pidless: bool,
    build_ids: &[(String, Vec<u8>)],
) -> Result<InputResult, Error> {
    let mut mapper = if pidless {
        AddressMapper::pidless(identity_of(binary), cfg.pid)
    } else {
        AddressMapper::new(identity_of(binary), cfg.pid)
    };
    mapper.add_build_ids(build_ids);
    let mut front = EventFront {
        cfg,
        binary,
        mapper,
        event_names,
        filter_events: !pidless,
        matched: None,
        progress: Progress::new(cfg.progress),
        warnings: Vec::new(),
        warned_no_mmap: false,
        filtered: SampleStats::default(),
        ip_in_binary: false,
    };
    let (reader_warnings, samples, mut stats) = if workers <= 1 {
        let mut agg = Aggregator::new(binary, sample_mode(cfg));
        let r = read(&mut |ev| front.handle(ev, &mut |map, s| agg.add(map, s)));
        (r, agg.samples, agg.stats)
    } else {
        let initial = front.mapper.map().clone();
        aggregate_in_parallel(binary, sample_mode(cfg), workers, &initial, |sender| {
            read(&mut |ev| front.handle(ev, &mut |map, s| sender.add(map, s)))
        })
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
        truncated: false,
    })
}

/// Prints llvm-profgen style warning: `warning: 12.34%(n/total) <msg>`.
pub fn warning_summary(n: u64, total: u64, msg: &str) -> Option<String> {
    (n > 0 && total > 0)
        .then(|| format!("{:.2}%({n}/{total}) {msg}", n as f64 * 100.0 / total as f64))
}

/// Runs profgen on `cfg.threads` worker threads (default: all cores). Warnings are returned in
/// the report (and printed by `main`).
pub fn run(cfg: &Config) -> Result<RunReport, Error> {
    match cfg.threads {
        Some(n) => rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build()
            .map_err(|e| Error::Usage(format!("cannot start {n} worker threads: {e}")))?
            .install(|| run_pipeline(cfg)),
        None => run_pipeline(cfg),
    }
}

fn run_pipeline(cfg: &Config) -> Result<RunReport, Error> {
    let binary = Binary::load(
        &cfg.binary,
        &LoadOptions {
            debug_binary: cfg.debug_binary.clone(),
            use_dwarf_correlation: cfg.use_dwarf_correlation,
        },
    )?;
    let mut report = RunReport::default();
    report.warnings.extend(binary.warnings().iter().cloned());
    if cfg.show_disassembly_only || cfg.show_pseudo_probe {
        show_binary(cfg, &binary)?;
    }
    let Some(input) = cfg.input.as_ref().filter(|_| !cfg.show_disassembly_only) else {
        return Ok(report);
    };
    let counters = match input {
        Input::Unsymbolized(path) => read_unsymbolized(cfg, &binary, path)?,
        Input::PerfData(_) | Input::PerfScript(_) => {
            let samples = read_samples(cfg, &binary, input, &mut report)?;
            report.distinct_samples = samples.len();
            samples_to_counters(cfg, &binary, &samples, &mut report)
        }
    };
    if cfg.skip_symbolization {
        write_unsymbolized(cfg, &binary, &counters)?;
        return Ok(report);
    }
    let mut profile = build_profile(cfg, &binary, &counters, &mut report)?;
    if cfg.populate_profile_symbol_list {
        profile.symbol_list = Some(symbol_list(&binary));
    }
    let density = crate::writer::density::density_report(&profile, &cfg.density);
    print!("{}", density.stdout);
    report
        .warnings
        .extend(density.warnings.lines().map(|l| l.trim_start_matches("warning: ").to_string()));
    report.functions_in_profile = profile.functions.len();
    if profile.functions.is_empty() {
        report.warnings.push(format!(
            "the profile is empty: no sample fell into a function of {}",
            cfg.binary.display()
        ));
    }
    write_profile(cfg, &profile, &mut report)?;
    Ok(report)
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
        let opts = crate::binary::disasm::DumpOptions {
            functions: cfg.disassemble_functions.clone(),
            source_locations: cfg.show_source_locations,
            pseudo_probes: cfg.show_pseudo_probe,
            canonical_names: cfg.show_canonical_fname,
        };
        binary.dump_disassembly(&mut out, &opts)?;
    }
    std::io::Write::flush(&mut out).map_err(io_err)
}

/// `--perfdata DIR` stands for every perf.data file in DIR (files starting with perf's magic,
/// in name order), e.g. a directory of recordings collected from many hosts.
fn expand_perf_data_dirs(given: &[std::path::PathBuf]) -> Result<Vec<std::path::PathBuf>, Error> {
    let mut out = Vec::new();
    for path in given {
        if !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let io_err = |source| Error::Io { path: path.clone(), source };
        let mut found = Vec::new();
        for entry in std::fs::read_dir(path).map_err(io_err)? {
            let p = entry.map_err(io_err)?.path();
            let mut magic = [0u8; 8];
            let is_perf_data = std::fs::File::open(&p)
                .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut magic))
                .is_ok_and(|()| &magic == b"PERFILE2");
            if p.is_file() && is_perf_data {
                found.push(p);
            }
        }
        if found.is_empty() {
            return Err(Error::BadFile {
                path: path.clone(),
                what: "the directory holds no perf.data file".into(),
            });
        }
        found.sort();
        out.extend(found);
    }
    Ok(out)
}

fn read_samples(
    cfg: &Config,
    binary: &Binary,
    input: &Input,
    report: &mut RunReport,
) -> Result<AggregatedSamples, Error> {
    use rayon::prelude::*;
    let results: Vec<Result<InputResult, Error>> = match input {
        Input::PerfData(given) => {
            let paths = expand_perf_data_dirs(given)?;
            // Several files: one per worker; one file: all workers on it.
            if paths.len() > 1 {
                paths.par_iter().map(|p| read_perf_data_file(cfg, 1, binary, p)).collect()
            } else {
                paths
                    .iter()
                    .map(|p| read_perf_data_file(cfg, rayon::current_num_threads(), binary, p))
                    .collect()
            }
        }
        Input::PerfScript(p) => {
            vec![read_perf_script_file(cfg, rayon::current_num_threads(), binary, p)]
        }
        Input::Unsymbolized(_) => unreachable!("unsymbolized input has no samples"),
    };
    let mut samples = AggregatedSamples::default();
    let mut mapping = MappingStats::default();
    let mut truncated = false;
    for r in results {
        let r = r?;
        mapping.merge(r.mapping);
        truncated |= r.truncated;
        samples.merge(r.samples);
        report.samples.merge(&r.stats);
        report.warnings.extend(r.warnings);
        if let Some(m) = r.matched {
            report.matched_by = Some(report.matched_by.map_or(m, |h| h.min(m)));
        }
    }
    if report.samples.read > 0 && report.samples.used == 0 {
        no_sample_in_binary(cfg, binary, input, &mapping, truncated, report)?;
    }
    Ok(samples)
}

/// No sample of the input lands in the binary: say what the input holds instead. A binary the
/// input never maps is the wrong binary (an error, as llvm-profgen's `No relevant mmap event`);
/// a mapped binary without samples, or a truncated input, gives a warning and the empty profile.
fn no_sample_in_binary(
    cfg: &Config,
    binary: &Binary,
    input: &Input,
    mapping: &MappingStats,
    truncated: bool,
    report: &mut RunReport,
) -> Result<(), Error> {
    let found = mapping.what_the_input_maps_instead();
    let for_pid = cfg.pid.map_or(String::new(), |p| format!(" for pid {p}"));
    if mapping.binary_mapped() || truncated {
        let how =
            if mapping.binary_mapped() { "is mapped" } else { "is not mapped in the part read" };
        report.warnings.push(format!(
            "no sample lands in {} (it {how}{for_pid}); {found}",
            binary.path().display()
        ));
        return Ok(());
    }
    let input = match input {
        Input::PerfData(paths) => {
            paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
        }
        Input::PerfScript(p) | Input::Unsymbolized(p) => p.display().to_string(),
    };
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

fn unwind_options(cfg: &Config, binary: &Binary) -> UnwindOptions {
    UnwindOptions {
        probe_based: binary.probes().is_some(),
        max_compression_size: cfg.compress_recursion,
        max_context_depth: cfg.max_context_depth,
    }
}

fn push_warning_summaries(report: &mut RunReport, lines: Vec<(u64, u64, &'static str)>) {
    report
        .warnings
        .extend(lines.into_iter().filter_map(|(n, total, msg)| warning_summary(n, total, msg)));
}

fn samples_to_counters(
    cfg: &Config,
    binary: &Binary,
    samples: &AggregatedSamples,
    report: &mut RunReport,
) -> ContextCounters {
    if !samples.has_call_stacks {
        let mut out = ContextCounters::default();
        *out.counters_mut(ContextKey::None) = lbr_counters(binary, samples);
        return out;
    }
    // Samples were normalised as they were aggregated; unwind the distinct ones in parallel.
    let normalize = &samples.normalize;
    let entries = samples.entries();
    let (counters, unwind) = unwind_all_with(
        binary,
        &entries,
        |(k, n)| (std::borrow::Cow::Owned(key::decode(k)), *n),
        unwind_options(cfg, binary),
    );
    report.not_unwound =
        normalize.dropped_prolog_epilog.saturating_add(normalize.dropped_empty_lbr);
    push_warning_summaries(report, normalize.summary(samples.len() as u64));
    push_warning_summaries(report, unwind.summary(counters.by_context.len() as u64));
    counters
}

fn build_profile(
    cfg: &Config,
    binary: &Binary,
    counters: &ContextCounters,
    report: &mut RunReport,
) -> Result<Profile, Error> {
    if counters.context_sensitive {
        return build_cs_profile(cfg, binary, counters, report);
    }
    let empty = Default::default();
    let c = counters.by_context.get(&ContextKey::None).unwrap_or(&empty);
    let mut profile = match binary.probes() {
        Some(probes) => {
            crate::profile::probe::build(binary, probes, c, cfg.fill_zero_for_all_funcs)
        }
        None => crate::profile::line::build(
            binary,
            c,
            crate::profile::line::LineOptions {
                fill_zero_for_all_funcs: cfg.fill_zero_for_all_funcs,
                leading_ip_only: cfg.leading_ip_only,
            },
        ),
    };
    postpass::update_function_samples(&mut profile, cfg.update_total_samples);
    let thresholds = thresholds(cfg, binary, &profile)?;
    postpass::post_process_non_cs(&mut profile, &cfg.postpass, &thresholds);
    Ok(profile)
}

fn build_cs_profile(
    cfg: &Config,
    binary: &Binary,
    counters: &ContextCounters,
    report: &mut RunReport,
) -> Result<Profile, Error> {
    let opts = CsOptions {
        update_total_samples: cfg.update_total_samples,
        callee_context_base_discriminator: true,
        infer_missing_frames: cfg.infer_missing_frames,
        max_search_depth: cfg.max_search_depth,
        max_compression_size: cfg.compress_recursion,
        max_context_depth: cfg.max_context_depth,
    };
    let mut profile = match binary.probes() {
        Some(probes) => {
            let (profile, stats) = generate_probe_cs(binary, probes, counters, &opts);
            if stats.probes_without_desc > 0 {
                report.warnings.push(format!(
                    "{} probes skipped: a function on their inline chain has no .pseudo_probe_desc entry",
                    stats.probes_without_desc
                ));
            }
            profile
        }
        None => generate_line_cs(binary, counters, &opts),
    };
    // Thresholds come from the context-less merge of the flat CS profile.
    let thresholds = thresholds(cfg, binary, &postpass::context_less_profile(&profile))?;
    // The pre-inliner's context costs need every instruction of the profiled functions
    // symbolized; only pay for it when they are used.
    if cfg.postpass.preinliner && cfg.postpass.use_context_cost {
        let profiled = context_size::profiled_functions(binary, counters);
        let sizes = context_size::context_sizes(binary, &profiled);
        postpass::post_process_cs(&mut profile, &cfg.postpass, &thresholds, &sizes);
    } else {
        postpass::post_process_cs(
            &mut profile,
            &cfg.postpass,
            &thresholds,
            &context_size::NoContextSizes,
        );
    }
    Ok(profile)
}

/// Hot and cold count thresholds from the profile summary (`computeSummaryAndThreshold`) of a
/// non-CS (or context-less) profile.
///
/// Profiles of functions only the symbol table knows (e.g. `_start`) are left out: llvm-profgen
/// cannot see them, and their counts would move the thresholds and with them the pre-inlining
/// and trimming of every other function.
fn thresholds(
    cfg: &Config,
    binary: &Binary,
    profile: &Profile,
) -> Result<postpass::Thresholds, Error> {
    let mut symbol_only: hashbrown::HashSet<&str> = binary
        .functions()
        .iter()
        .filter(|f| f.source == FuncSource::Symbol)
        .map(|f| canonical_fn_name(&f.name))
        .collect();
    for f in binary.functions().iter().filter(|f| f.source == FuncSource::Dwarf) {
        symbol_only.remove(canonical_fn_name(&f.name));
    }
    let summary = ProfileSummary::from_top_level(
        profile.functions.values().filter(|fs| !symbol_only.contains(fs.name.as_str())),
        &DEFAULT_CUTOFFS,
    );
    Ok(postpass::Thresholds {
        hot: summary.hot_count_threshold(&cfg.summary)?,
        cold: summary.cold_count_threshold(&cfg.summary)?,
        p10_min_count: summary.p10_min_count(),
    })
}

/// The extbinary profile symbol list: every function of the binary with code.
fn symbol_list(binary: &Binary) -> Vec<String> {
    let mut names: Vec<String> = binary
        .functions()
        .iter()
        .filter(|f| !f.ranges.is_empty())
        .map(|f| f.name.to_string())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

fn unsymbolized_base(cfg: &Config, binary: &Binary) -> u64 {
    crate::aggregate::unsymbolized::offset_base(
        cfg.use_offset,
        cfg.use_first_loadable_segment_as_base,
        binary.preferred_base(),
        binary.first_loadable_address(),
    )
}

fn read_unsymbolized(cfg: &Config, binary: &Binary, path: &Path) -> Result<ContextCounters, Error> {
    let text = read_file(path)?;
    let base = unsymbolized_base(cfg, binary);
    crate::aggregate::unsymbolized::read_unsymbolized(&text, path, base, binary.probes().is_some())
}

fn write_unsymbolized(
    cfg: &Config,
    binary: &Binary,
    counters: &ContextCounters,
) -> Result<(), Error> {
    let mut text = Vec::new();
    crate::aggregate::unsymbolized::write_unsymbolized(
        counters,
        unsymbolized_base(cfg, binary),
        &mut text,
    )
    .expect("writing to memory cannot fail");
    crate::writer::write_bytes_atomically(&text, &cfg.output)
}

fn write_profile(cfg: &Config, profile: &Profile, report: &mut RunReport) -> Result<(), Error> {
    use crate::writer::{OutputFormat, USE_MD5_IGNORED, WriteOptions, write_profile_file};
    if cfg.use_md5 && cfg.format != OutputFormat::ExtBinary {
        report.warnings.push(USE_MD5_IGNORED.to_string());
    }
    write_profile_file(profile, cfg.format, &WriteOptions { use_md5: cfg.use_md5 }, &cfg.output)
}

/// Reads a whole input file (perf script and unsymbolized inputs are parsed from memory).
fn read_file(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })
}

fn read_perf_script_file(
    cfg: &Config,
    workers: usize,
    binary: &Binary,
    path: &Path,
) -> Result<InputResult, Error> {
    use crate::input::perf_script::{ScriptOptions, read_perf_script};
    let text = read_file(path)?;
    let opts = ScriptOptions {
        perf_events: cfg.perf_events.clone(),
        leading_ip_only: cfg.leading_ip_only,
    };
    // perf script filters events itself; the mapper must not filter them again.
    let mut names = Vec::new();
    let result = aggregate_events(
        cfg,
        workers,
        binary,
        |on_event| {
            let report = read_perf_script(&text, path, &opts, on_event)?;
            let mut warnings = report.warnings;
            if report.warnings_omitted > 0 {
                warnings
                    .push(format!("{} more perf script warnings omitted", report.warnings_omitted));
            }
            names = report.event_names;
            Ok(warnings)
        },
        |_| None,
        true,
        &[],
    );
    let _ = names;
    result
}

fn read_perf_data_file(
    cfg: &Config,
    workers: usize,
    binary: &Binary,
    path: &Path,
) -> Result<InputResult, Error> {
    use crate::input::perf_data::{PerfData, ReadReport, read_perf_data_stream};
    let io_err = |source| Error::Io { path: path.to_path_buf(), source };
    let truncated = std::cell::Cell::new(false);
    let finish = |report: ReadReport| -> Vec<String> {
        truncated.set(report.truncated.is_some());
        let mut warnings = report.warnings;
        if let Some(t) = &report.truncated {
            warnings.push(format!("{}: {t}", path.display()));
        }
        if report.lost_events > 0 {
            warnings.push(format!(
                "{}: the kernel lost {} events while recording",
                path.display(),
                report.lost_events
            ));
        }
        warnings
    };
    let with_truncation = |r: InputResult| InputResult { truncated: truncated.get(), ..r };
    if path.as_os_str() == "-" {
        let stdin = std::io::stdin().lock();
        return aggregate_events(
            cfg,
            workers,
            binary,
            |on_event| Ok(finish(read_perf_data_stream(stdin, path, on_event)?)),
            |_| None,
            false,
            &[],
        )
        .map(with_truncation);
    }
    let file = std::fs::File::open(path).map_err(io_err)?;
    // SAFETY: the file is only read; profgen does not guard against another process truncating
    // it while mapped (perf does not rewrite finished files).
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_err)?;
    let data = PerfData::parse(&map, path)?;
    let event_names = data.info().event_names.clone();
    aggregate_events(
        cfg,
        workers,
        binary,
        |on_event| {
            // Drop the pages already decoded, so resident memory stays flat however large
            // the file (mapped pages count as resident).
            let mut released = 0usize;
            let release = |upto: usize| {
                let upto = upto & !0xfff;
                if upto > released {
                    // SAFETY: the bytes before `upto` are not read again (the reader's
                    // contract); for a read-only file mapping, DONTNEED only drops pages that
                    // would be read back from the file unchanged.
                    let _ = unsafe {
                        map.unchecked_advise_range(
                            memmap2::UncheckedAdvice::DontNeed,
                            released,
                            upto - released,
                        )
                    };
                    released = upto;
                }
            };
            Ok(finish(data.decode_in_time_order_releasing(on_event, release)?))
        },
        |i| event_names.get(i).cloned(),
        false,
        &data.info().build_ids,
    )
    .map(with_truncation)
}
