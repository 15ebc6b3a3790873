//! Command line: llvm-profgen's option names and meanings (plus `--threads`), parsed with clap
//! and turned into a plain [`Config`].
//!
//! LLVM's option parser accepts `-opt`, `--opt`, `--opt=v` and `--opt v`, and booleans as
//! `--opt`, `--opt=1/0/true/false`; [`normalize_args`] maps the single-dash spellings onto
//! clap's so scripts written for llvm-profgen keep working.

use crate::config::{Config, Input, OutputFormat};
use clap::{ArgAction, Parser};
use std::ffi::OsString;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "profgen",
    version,
    about = "Generate LLVM sample profiles (AutoFDO, CSSPGO) from Linux perf data",
    after_help = "Exit codes: 0 success, 1 bad input, 2 bad usage."
)]
struct Args {
    /// Profiled executable.
    #[arg(long, value_name = "PATH")]
    binary: Option<PathBuf>,
    /// Read DWARF (functions and symbolization) from this file instead of --binary.
    #[arg(long, value_name = "PATH")]
    debug_binary: Option<PathBuf>,
    /// perf.data input (repeatable; `-` reads pipe-mode data from stdin).
    #[arg(long, visible_alias = "pd", value_name = "PATH", action = ArgAction::Append)]
    perfdata: Vec<PathBuf>,
    /// `perf script -F ip,brstack --show-mmap-events` text input.
    #[arg(long, visible_alias = "ps", value_name = "PATH")]
    perfscript: Option<PathBuf>,
    /// Unsymbolized profile written by --skip-symbolization.
    #[arg(long, visible_alias = "up", value_name = "PATH")]
    unsymbolized_profile: Option<PathBuf>,
    /// Output profile path.
    #[arg(long, short = 'o', value_name = "PATH")]
    output: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "extbinary")]
    format: OutputFormat,
    /// Only use mmap events (and samples) of this process.
    #[arg(long)]
    pid: Option<i32>,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,

    /// Treat LBR + call-stack samples as LBR-only (non-CS profile).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    ignore_stack_samples: bool,
    /// Profile from sample IPs only, ignoring LBR entries.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    leading_ip_only: bool,
    /// Keep only samples of this event (repeatable).
    #[arg(long, action = ArgAction::Append)]
    perf_event: Vec<String>,
    /// Comma-separated list of events to keep.
    #[arg(long, value_delimiter = ',')]
    perf_events: Vec<String>,
    /// Multiply LBR-only sample counts by this period.
    #[arg(long)]
    sample_period: Option<u64>,
    /// Stop after aggregation and write the unsymbolized profile.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    skip_symbolization: bool,
    /// Unsymbolized profile addresses relative to the preferred base.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "true")]
    use_offset: bool,
    /// With --use-offset: relative to the first loadable segment instead.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    use_first_loadable_segment_as_base: bool,
    /// Ignore pseudo probes and use DWARF line correlation.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    use_dwarf_correlation: bool,
    /// Print every mmap event of the binary as it is applied.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    show_mmap_events: bool,
    /// Print per-item warnings instead of summaries.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    show_detailed_warning: bool,

    /// Name table of MD5 hashes (extbinary only).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    use_md5: bool,
    /// Write the profile symbol list (extbinary only).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    populate_profile_symbol_list: bool,
    /// Zero-fill the ranges of all functions, not only sampled ones.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    fill_zero_for_all_funcs: bool,
    /// Recompute total samples as the sum of body samples.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    update_total_samples: bool,

    /// Print the disassembly and exit.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    show_disassembly_only: bool,
    /// With --show-disassembly-only: only these functions.
    #[arg(long, value_delimiter = ',')]
    disassemble_functions: Vec<String>,
    /// With --show-disassembly-only: print source locations.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    show_source_locations: bool,
    /// Print the decoded pseudo probes.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    show_pseudo_probe: bool,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

fn parse_llvm_bool(s: &str) -> Result<bool, String> {
    match s {
        "" | "1" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("'{s}' is invalid value for boolean argument! Try 0 or 1")),
    }
}

/// Maps LLVM's single-dash long options (`-binary=x`, `-output x`) to `--binary=x`; `-o` and
/// anything after `--` are left alone.
pub fn normalize_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut rest = false;
    for (i, a) in args.into_iter().enumerate() {
        let fixed = match a.to_str() {
            Some(s) if i > 0 && !rest && s.len() > 2 && s.starts_with('-') && !s.starts_with("--") => {
                if s.starts_with("-o=") {
                    a.clone()
                } else {
                    OsString::from(format!("-{s}"))
                }
            }
            Some("--") => {
                rest = true;
                a.clone()
            }
            _ => a.clone(),
        };
        out.push(fixed);
    }
    out
}

/// Parses the command line into a [`Config`]. Usage errors come back as clap errors (exit 2).
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Config, clap::Error> {
    let args = Args::try_parse_from(normalize_args(args))?;
    to_config(args)
}

fn usage(msg: impl Into<String>) -> clap::Error {
    clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, format!("{}\n", msg.into()))
}

fn to_config(a: Args) -> Result<Config, clap::Error> {
    let binary = a
        .binary
        .ok_or_else(|| usage("--binary is required"))?;
    let output = a.output.ok_or_else(|| usage("for the --output option: must be specified at least once!"))?;
    let given = [!a.perfdata.is_empty(), a.perfscript.is_some(), a.unsymbolized_profile.is_some()]
        .iter()
        .filter(|g| **g)
        .count();
    if given > 1 {
        return Err(usage("`--perfscript`, `--perfdata` and `--unsymbolized-profile` cannot be used together."));
    }
    let input = if !a.perfdata.is_empty() {
        Some(Input::PerfData(a.perfdata))
    } else if let Some(p) = a.perfscript {
        Some(Input::PerfScript(p))
    } else {
        a.unsymbolized_profile.map(Input::Unsymbolized)
    };
    if input.is_none() && !a.show_disassembly_only && !a.show_pseudo_probe {
        return Err(usage(
            "Perf input file is missing, please use one of --perfscript, --perfdata and --unsymbolized-profile for the input.",
        ));
    }
    if a.show_source_locations && !a.show_disassembly_only {
        return Err(usage("--show-source-locations should work together with --show-disassembly-only!"));
    }
    if a.threads == Some(0) {
        return Err(usage("--threads must be at least 1"));
    }
    let mut perf_events = a.perf_event;
    perf_events.extend(a.perf_events.into_iter().filter(|e| !e.is_empty()));
    Ok(Config {
        binary,
        debug_binary: a.debug_binary,
        input,
        output,
        format: a.format,
        pid: a.pid,
        threads: a.threads,
        ignore_stack_samples: a.ignore_stack_samples,
        leading_ip_only: a.leading_ip_only,
        perf_events,
        sample_period: a.sample_period,
        skip_symbolization: a.skip_symbolization,
        use_offset: a.use_offset,
        use_first_loadable_segment_as_base: a.use_first_loadable_segment_as_base,
        use_dwarf_correlation: a.use_dwarf_correlation,
        show_mmap_events: a.show_mmap_events,
        show_detailed_warning: a.show_detailed_warning,
        use_md5: a.use_md5,
        populate_profile_symbol_list: a.populate_profile_symbol_list,
        fill_zero_for_all_funcs: a.fill_zero_for_all_funcs,
        update_total_samples: a.update_total_samples,
        show_disassembly_only: a.show_disassembly_only,
        disassemble_functions: a.disassemble_functions,
        show_source_locations: a.show_source_locations,
        show_pseudo_probe: a.show_pseudo_probe,
        progress: !a.no_progress,
    })
}
