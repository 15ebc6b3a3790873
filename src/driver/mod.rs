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

mod fleet;
mod order;
mod remap;
mod report;

pub use fleet::{AggregateReport, BinaryReport, MergeReport, run_aggregate, run_merge, run_store};
pub use order::{run_order, write_order};
pub use remap::remap;
pub use report::{EXIT_INCOMPLETE, RunReport};

use crate::aggregate::ContextCounters;
use crate::aggregate::read::{Input, ReadOptions};
use crate::aggregate::unsymbolized::{UnsymbolizedOptions, write_unsymbolized};
use crate::binary::{Binary, hex};
use crate::config::{Binaries, Config, OutputOptions};
use crate::error::Error;
use crate::order::offer_traces;
use crate::order::reservoir::TraceSample;
use crate::profile::{self, Profile};
use crate::progress::{Display, Phase, PhaseTimer, Reporter, Sink};
use crate::writer::{self, OutputFormat, USE_MD5_IGNORED};
use crate::{aggregate, postpass};
use report::run_report_json;
use std::borrow::Cow;
use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

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
pub(super) fn reporter(display: bool, timer: Option<Arc<PhaseTimer>>) -> Reporter {
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
pub(super) fn on_threads<T>(
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
    let mut counters = read_counters(&binary, input, &read, rayon::current_num_threads(), report)?;
    counters.apply_weights();
    if cfg.skip_symbolization {
        reporter.phase(Phase::Writing);
        write_unsymbolized_file(&binary, &counters, &cfg.read.unsymbolized, &cfg.output.path)?;
    } else {
        reporter.phase(Phase::Symbolizing);
        let mut opts = cfg.profile;
        // Inputs recorded without branch stacks were read as IP samples: profile them as such.
        opts.line.leading_ip_only |= report.inputs.ip_samples_detected;
        let not_symbolized =
            cfg.run.warn_not_symbolized.then(|| not_symbolized_warning(&binary, &counters));
        // What the post-passes need of the counters is read while the profile is built; the
        // counters are freed there, once read (the post-passes reuse their memory).
        let (profile, sampled) = profile::generate_beside(
            &binary,
            Cow::Owned(counters),
            &opts,
            &mut report.warnings,
            |counters| postpass::sampled(&binary, counters, &cfg.output.postpass),
        );
        aggregate::read::release_freed_heap();
        report.warnings.extend(not_symbolized.flatten());
        reporter.phase(Phase::PostProcessing);
        finish_profile(&binary, sampled, profile, &cfg.output, report)?;
    }
    if let (Some(order), Some(traces)) = (&cfg.order, report.inputs.traces.take()) {
        let mut sample = TraceSample::new(order.options.sampling);
        offer_traces(&mut sample, &traces.table, traces.traces);
        write_order(&sample, &traces.table, &order.options, Some(&order.path), None, report)?;
    }
    // The binary model is freed like the profile (see finish_profile): profgen's own with its
    // DWARF took ~30 ms.
    rayon::spawn(move || drop(binary));
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

/// Post-processes `profile` (built from counters of `binary`, of which the post-passes read
/// `sampled`) and writes it as `opts` say.
pub fn finish_profile(
    binary: &Binary,
    sampled: postpass::Sampled,
    mut profile: Profile,
    opts: &OutputOptions,
    report: &mut RunReport,
) -> Result<(), Error> {
    // The binary's anchors depend only on which functions the fresh profile can name: those
    // are read with the post-passes' inputs (their trie names the contexts' functions), the
    // anchors beside the post-passes (the pre-inliner's walk, on one thread; started there, not
    // before the passes, so that the other worker is free for the pre-inliner's start).
    // prepare runs on this worker, which then runs the post-passes: the trie they reshape comes
    // from its heap arena (prepared on another worker, the pre-inliner measured 2-3 ms slower).
    let (prepared, wanted) = postpass::prepare(
        binary,
        sampled,
        &profile,
        &opts.postpass,
        &opts.summary,
        opts.zero_count_anchors,
    )?;
    let (_, spent, anchored) =
        postpass::apply_beside(&mut profile, prepared, &opts.postpass, || {
            // Only their direct calls are read; the anchors are freed here, beside the walk.
            wanted.map(|wanted| {
                let anchors = binary.anchors(&|name| wanted.contains(name));
                (postpass::DirectCalls::of(&anchors), anchors.warnings)
            })
        });
    let calls = anchored.map(|(calls, warnings)| {
        report.warnings.extend(warnings);
        calls
    });
    if opts.populate_profile_symbol_list {
        profile.symbol_list = Some(profile::symbol_list(binary));
    }
    let density = writer::density::density_report(&profile, &opts.density);
    print!("{}", density.stdout);
    report
        .warnings
        .extend(density.warnings.lines().map(|l| l.trim_start_matches("warning: ").to_string()));
    if let Some(calls) = &calls {
        postpass::add_zero_count_anchors(&mut profile, calls);
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
    let bytes = writer::encode_profile_file(&profile, opts.format, &opts.write, &opts.path)?;
    // The profile is freed by a worker nobody waits for while its bytes are written and synced
    // (on a large binary, freeing took longer than the write), and the process may exit before
    // it is done: the system frees it at once. The anchors' direct calls too: freed once added,
    // they would hold up the encoding.
    rayon::spawn(move || drop((profile, calls)));
    let written = writer::write_bytes_atomically(&bytes, &opts.path);
    // The pre-inliner's spent trie is freed last, the same way: freed any earlier, it slowed
    // the passes and the encoding beside it (they contend for the cores and the allocator).
    rayon::spawn(move || drop(spent));
    written
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
