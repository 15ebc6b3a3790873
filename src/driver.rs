//! Runs a `profgen` command by wiring the stages: binary → inputs → counters → profile →
//! post-passes → writer. Each step is a library call that another command can reuse:
//! [`read_counters`] (inputs → counters and the run report), [`crate::profile::generate`]
//! (counters → profile) and [`finish_profile`] (post-passes → output).

use crate::aggregate::ContextCounters;
use crate::aggregate::read::{Input, InputsReport, ReadOptions};
use crate::aggregate::unsymbolized::{UnsymbolizedOptions, write_unsymbolized};
use crate::binary::Binary;
use crate::config::{Config, OutputOptions};
use crate::error::Error;
use crate::mapping::MatchedBy;
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
}

impl RunReport {
    /// One line: samples read, used, and dropped by reason.
    pub fn summary_line(&self) -> String {
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
        line.push_str(&format!("; {} functions in the profile", self.functions_in_profile));
        line
    }
}

/// Runs profile generation on `cfg.threads` worker threads. Warnings are returned in the report
/// (and printed by `main`).
pub fn run(cfg: &Config) -> Result<RunReport, Error> {
    let n = cfg.threads;
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .map_err(|e| Error::Usage(format!("cannot start {n} worker threads: {e}")))?
        .install(|| generate(cfg))
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
        return Ok(report);
    }
    let profile = profile::generate(&binary, &counters, &cfg.profile, &mut report.warnings);
    finish_profile(&binary, &counters, profile, &cfg.output, &mut report)?;
    Ok(report)
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
