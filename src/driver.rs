//! Runs a `profgen` command by wiring the stages: binary → inputs → counters → profile →
//! post-passes → writer. Each step is a library call that another command can reuse:
//! [`read_counters`] (inputs → counters and the run report), [`crate::profile::generate`]
//! (counters → profile) and [`finish_profile`] (post-passes → output). `profgen order`
//! ([`run_order`]) reads the same inputs for their temporal traces and writes a function order
//! ([`write_order`]), which a profile run can also do on the side (`--order-output`).

use crate::aggregate::ContextCounters;
use crate::aggregate::read::{Input, InputsReport, ReadOptions};
use crate::aggregate::traces::{FunctionTable, TemporalTraces};
use crate::aggregate::unsymbolized::{UnsymbolizedOptions, write_unsymbolized};
use crate::binary::Binary;
use crate::config::{Config, OrderConfig, OutputOptions};
use crate::error::Error;
use crate::input::read_file;
use crate::mapping::MatchedBy;
use crate::order::reservoir::TraceSample;
use crate::order::{OrderOptions, OrderReport, offer_traces, order_file};
use crate::profile::{self, Profile};
use crate::writer::{self, OutputFormat, USE_MD5_IGNORED};
use crate::{aggregate, postpass};
use std::path::Path;

/// What a run did, for the summary line and for tests.
#[derive(Debug, Default)]
pub struct RunReport {
    pub inputs: InputsReport,
    pub functions_in_profile: usize,
    /// Every warning of the run, in the order the stages gave them.
    pub warnings: Vec<String>,
    /// What making the function order did, when one was written.
    pub order: Option<OrderReport>,
}

impl RunReport {
    /// One line: samples read, used, and dropped by reason; functions in the profile.
    pub fn summary_line(&self) -> String {
        format!("{}; {} functions in the profile", self.samples_line(), self.functions_in_profile)
    }

    /// Samples read, used, and dropped by reason, and how the binary was recognised.
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
        let mut line = format!("profgen: {} samples read, {} used", s.read, s.used);
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

/// Runs profile generation on `cfg.threads` worker threads. Warnings are returned in the report
/// (and printed by `main`).
pub fn run(cfg: &Config) -> Result<RunReport, Error> {
    on_threads(cfg.threads, || generate(cfg))
}

/// Runs `job` on a pool of `n` worker threads.
fn on_threads<T>(n: usize, job: impl FnOnce() -> Result<T, Error> + Send) -> Result<T, Error>
where
    T: Send,
{
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map_err(|e| Error::Usage(format!("cannot start {n} worker threads: {e}")))?
        .install(job)
}

fn generate(cfg: &Config) -> Result<RunReport, Error> {
    let binary = Binary::load(&cfg.binary, &cfg.load)?;
    let mut report = RunReport { warnings: binary.warnings().to_vec(), ..Default::default() };
    if cfg.show_disassembly_only || cfg.show_pseudo_probe {
        show_binary(cfg, &binary)?;
    }
    let Some(input) = cfg.input.as_ref().filter(|_| !cfg.show_disassembly_only) else {
        return Ok(report);
    };
    let counters = read_counters(&binary, input, &cfg.read, cfg.threads, &mut report)?;
    if cfg.skip_symbolization {
        write_unsymbolized_file(&binary, &counters, &cfg.read.unsymbolized, &cfg.output.path)?;
    } else {
        let profile = profile::generate(&binary, &counters, &cfg.profile, &mut report.warnings);
        finish_profile(&binary, &counters, profile, &cfg.output, &mut report)?;
    }
    if let (Some(order), Some(traces)) = (&cfg.order, report.inputs.traces.take()) {
        let mut sample = TraceSample::new(order.options.sampling);
        offer_traces(&mut sample, &traces.table, traces.traces);
        write_order(&sample, &traces.table, &order.options, Some(&order.path), None, &mut report)?;
    }
    Ok(report)
}

/// `profgen order` on `cfg.threads` worker threads: the inputs' temporal traces and the saved
/// ones, sampled together, then the order and/or the sample written.
pub fn run_order(cfg: &OrderConfig) -> Result<RunReport, Error> {
    on_threads(cfg.threads, || order(cfg))
}

fn order(cfg: &OrderConfig) -> Result<RunReport, Error> {
    let binary = Binary::load(&cfg.binary, &Default::default())?;
    let mut report = RunReport { warnings: binary.warnings().to_vec(), ..Default::default() };
    let mut sample = TraceSample::new(cfg.options.sampling);
    for path in &cfg.traces {
        let saved = TraceSample::read(&read_file(path)?, path)?;
        sample.merge(saved).map_err(|what| Error::BadFile { path: path.clone(), what })?;
    }
    let table = match &cfg.input {
        Some(input) => {
            let mut inputs = aggregate::read::read_traces(&binary, input, &cfg.read, cfg.threads)?;
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
    let (counters, mut inputs) = aggregate::read::read_counters(binary, input, opts, threads)?;
    report.warnings.append(&mut inputs.warnings);
    report.inputs = inputs;
    Ok(counters)
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
    report.functions_in_profile = profile.functions.len();
    if profile.functions.is_empty() {
        report.warnings.push(format!(
            "the profile is empty: no sample fell into a function of {}",
            binary.path().display()
        ));
    }
    if opts.write.use_md5 && opts.format != OutputFormat::ExtBinary {
        report.warnings.push(USE_MD5_IGNORED.to_string());
    }
    writer::write_profile_file(&profile, opts.format, &opts.write, &opts.path)
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
