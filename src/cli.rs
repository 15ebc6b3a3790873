//! Command line: llvm-profgen's option names and meanings (plus `--threads`), parsed with clap
//! and turned into a [`Command`] of plain option structs, once.
//!
//! Profile generation is `profgen [OPTIONS]`, without a subcommand word, as llvm-profgen's
//! command line. A subcommand is added as a [`Command`] variant, a clap `Args` struct of its own
//! and an arm in [`parse`] matching its name as the first argument: `profgen aggregate` and
//! `profgen merge` (the fleet's map and reduce steps) are.
//!
//! LLVM's option parser accepts `-opt`, `--opt`, `--opt=v` and `--opt v`, and booleans as
//! `--opt`, `--opt=1/0/true/false`; [`normalize_args`] maps the single-dash spellings onto
//! clap's so scripts written for llvm-profgen keep working.

use crate::aggregate::read::{Input, KeepGoing, ReadOptions};
use crate::aggregate::samples::SampleOptions;
use crate::aggregate::unsymbolized::UnsymbolizedOptions;
use crate::aggregate::weighting::LbrWeighting;
use crate::binary::{DumpOptions, LoadOptions};
use crate::config::{
    AggregateConfig, Binaries, Command, Config, MergeConfig, OrderConfig, OrderOutput,
    OutputOptions, RemapConfig, RunOptions,
};
use crate::llvm::ContextShape;
use crate::order::partition::PartitionConfig;
use crate::order::reservoir::SamplingParams;
use crate::order::{Algorithm, OrderOptions};
use crate::postpass::PostPassOptions;
use crate::profile::ProfileOptions;
use crate::profile::cs::CsOptions;
use crate::profile::line::LineOptions;
use crate::profile::summary::SummaryOptions;
use crate::remap::RemapOptions;
use crate::writer::density::DensityOptions;
use crate::writer::{OutputFormat, WriteOptions};
use clap::{ArgAction, CommandFactory, Parser, ValueEnum};
use std::ffi::OsString;
use std::path::PathBuf;

/// Help headings, llvm-profgen's grouping; a subcommand's options use the same names.
mod heading {
    pub const INPUT: &str = "Input";
    pub const OUTPUT: &str = "Output";
    pub const CS: &str = "Context-sensitive profiles";
    pub const SUMMARY: &str = "Profile summary and density";
    pub const INSPECT: &str = "Inspection";
    pub const RUN: &str = "Running";
}

/// `-h` lists the common options, `--help` every llvm-profgen option, `--help-hidden` also the
/// expert ones (LLVM's convention); help is wrapped at the terminal's width.
/// The exit codes of the commands that read perf data (README, "Exit codes").
macro_rules! exit_codes_of_reading_commands {
    () => {
        "Exit codes: 0 output written, every input read to its end; 1 bad input, nothing written; \
         2 bad usage; 3 output written, some inputs skipped or truncated."
    };
}

#[derive(Parser, Debug)]
#[command(
    name = "profgen",
    version,
    about = "Generate LLVM sample profiles (AutoFDO, CSSPGO) from Linux perf data",
    after_help = concat!(
        "Options may also come from response files: @FILE (LLVM's GNU quoting rules). \
         `profgen --help` lists every option, `--help-hidden` the expert ones too.\n",
        exit_codes_of_reading_commands!()
    ),
    allow_negative_numbers = true,
    next_line_help = true
)]
struct Args {
    /// Profiled executable.
    #[arg(help_heading = heading::INPUT, long, value_name = "PATH")]
    binary: Option<PathBuf>,
    /// Read DWARF (functions and symbolization) from this file instead of --binary.
    #[arg(help_heading = heading::INPUT, long, value_name = "PATH")]
    debug_binary: Option<PathBuf>,
    /// perf.data input (repeatable; `-` reads pipe-mode data from stdin).
    #[arg(help_heading = heading::INPUT, long, visible_alias = "pd", value_name = "PATH", action = ArgAction::Append)]
    perfdata: Vec<PathBuf>,
    /// `perf script -F ip,brstack --show-mmap-events` text input.
    #[arg(help_heading = heading::INPUT, long, visible_alias = "ps", value_name = "PATH")]
    perfscript: Option<PathBuf>,
    /// Unsymbolized profile written by --skip-symbolization.
    #[arg(help_heading = heading::INPUT, long, visible_alias = "up", value_name = "PATH")]
    unsymbolized_profile: Option<PathBuf>,
    /// Aggregate file written by `profgen aggregate` or `profgen merge` (repeatable: merged).
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, value_name = "PATH", action = ArgAction::Append)]
    aggregate: Vec<PathBuf>,
    /// Instead of --binary: a directory of binaries or a .build-id tree; one profile is written
    /// per binary the inputs have samples of, into --output-dir.
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, value_name = "DIR", conflicts_with = "binary")]
    binaries: Option<PathBuf>,
    /// With --binaries: where the profiles go (`NAME-BUILDID.prof`; created if missing).
    #[arg(help_heading = heading::OUTPUT, hide_short_help = true, long, value_name = "DIR", requires = "binaries", conflicts_with = "output")]
    output_dir: Option<PathBuf>,
    /// Output profile path.
    #[arg(help_heading = heading::OUTPUT, long, short = 'o', value_name = "PATH")]
    output: Option<PathBuf>,
    /// Output format.
    #[arg(help_heading = heading::OUTPUT, long, value_enum, default_value = "extbinary")]
    format: FormatArg,
    /// Worker threads (default: all cores).
    #[arg(help_heading = heading::RUN, long, value_name = "N")]
    threads: Option<usize>,
    #[command(flatten)]
    counting: CountingArgs,
    /// Stop after aggregation and write the unsymbolized profile.
    #[arg(help_heading = heading::OUTPUT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    skip_symbolization: bool,
    /// Unsymbolized profile addresses relative to the preferred base.
    #[arg(help_heading = heading::OUTPUT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "true")]
    use_offset: bool,
    /// With --use-offset: relative to the first loadable segment instead.
    #[arg(help_heading = heading::OUTPUT, hide = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    use_first_loadable_segment_as_base: bool,
    /// Print every mmap event of the binary as it is applied.
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    show_mmap_events: bool,

    /// Name table of MD5 hashes (extbinary only).
    #[arg(help_heading = heading::OUTPUT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    use_md5: bool,
    /// Write the profile symbol list (extbinary only).
    #[arg(help_heading = heading::OUTPUT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    populate_profile_symbol_list: bool,
    /// Zero-fill the ranges of all functions, not only sampled ones.
    #[arg(help_heading = heading::OUTPUT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    fill_zero_for_all_funcs: bool,
    /// Recompute total samples as the sum of body samples.
    #[arg(help_heading = heading::OUTPUT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    update_total_samples: bool,

    /// Print the disassembly and exit.
    #[arg(help_heading = heading::INSPECT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    show_disassembly_only: bool,
    /// With --show-disassembly-only: only these functions.
    #[arg(help_heading = heading::INSPECT, hide_short_help = true, long, value_delimiter = ',')]
    disassemble_functions: Vec<String>,
    /// With --show-disassembly-only: print source locations.
    #[arg(help_heading = heading::INSPECT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    show_source_locations: bool,
    /// With --show-disassembly-only: print canonical function names.
    #[arg(help_heading = heading::INSPECT, hide = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    show_canonical_fname: bool,
    /// Print the decoded pseudo probes.
    #[arg(help_heading = heading::INSPECT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    show_pseudo_probe: bool,
    // Context-sensitive profiles.
    /// Infer frames lost to tail calls (probe-based CS profiles).
    #[arg(help_heading = heading::CS, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "true")]
    infer_missing_frames: bool,
    /// Search depth limit for --infer-missing-frames.
    #[arg(help_heading = heading::CS, hide = true, long, value_name = "N", default_value_t = u32::MAX - 1)]
    max_search_depth: u32,
    /// Merge cold contexts into their base (default: on, off when the pre-inliner runs).
    #[arg(help_heading = heading::CS, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool)]
    csprof_merge_cold_context: Option<bool>,
    /// Frames kept when merging cold contexts.
    #[arg(help_heading = heading::CS, hide_short_help = true, long, value_name = "N", default_value_t = 1)]
    csprof_max_cold_context_depth: u32,
    /// Drop cold profiles (contexts).
    #[arg(help_heading = heading::CS, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    trim_cold_profile: bool,
    /// Convert the CS profile to a nested profile before writing.
    #[arg(help_heading = heading::CS, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "true")]
    gen_cs_nested_profile: bool,
    /// With nesting: also emit merged base profiles.
    #[arg(help_heading = heading::CS, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    generate_merged_base_profiles: bool,
    /// Run the CS pre-inliner.
    #[arg(help_heading = heading::CS, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "true")]
    csspgo_preinliner: bool,
    /// Pre-inliner size cost from the binary's code under each context.
    #[arg(help_heading = heading::CS, hide = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "true")]
    use_context_cost_for_preinliner: bool,
    /// Pre-inline exactly what the profiled binary inlined.
    #[arg(help_heading = heading::CS, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    csspgo_replay_preinline: bool,
    /// Threshold multiplier for call sites inlined in the profiled binary.
    #[arg(help_heading = heading::CS, hide = true, long, value_name = "N", default_value_t = 100)]
    csspgo_preinliner_multiplier_for_previous_inlining: i32,
    /// Hot call-site inline threshold (pre-inliner default 1500).
    #[arg(help_heading = heading::CS, hide = true, long, value_name = "N")]
    sample_profile_hot_inline_threshold: Option<u32>,
    /// Cold call-site inline threshold (pre-inliner default 0).
    #[arg(help_heading = heading::CS, hide = true, long, value_name = "N")]
    sample_profile_cold_inline_threshold: Option<u32>,
    /// Inline size growth limit (× caller size).
    #[arg(help_heading = heading::CS, hide = true, long, value_name = "N", default_value_t = 12)]
    sample_profile_inline_growth_limit: u32,
    /// Lower clamp of the inline size limit.
    #[arg(help_heading = heading::CS, hide = true, long, value_name = "N", default_value_t = 100)]
    sample_profile_inline_limit_min: u32,
    /// Upper clamp of the inline size limit (pre-inliner default 50000).
    #[arg(help_heading = heading::CS, hide = true, long, value_name = "N")]
    sample_profile_inline_limit_max: Option<u32>,
    /// Order SCC members by edge weight in the pre-inliner.
    #[arg(help_heading = heading::CS, hide = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "true")]
    sort_profiled_scc_member: bool,

    /// Hot cutoff (parts per million).
    #[arg(help_heading = heading::SUMMARY, hide = true, long, value_name = "N", default_value_t = 990000)]
    profile_summary_cutoff_hot: u32,
    /// Cold cutoff (parts per million).
    #[arg(help_heading = heading::SUMMARY, hide = true, long, value_name = "N", default_value_t = 999999)]
    profile_summary_cutoff_cold: u32,
    /// Hot count threshold, replacing the derived one.
    #[arg(help_heading = heading::SUMMARY, hide_short_help = true, long, value_name = "N")]
    profile_summary_hot_count: Option<u64>,
    /// Cold count threshold, replacing the derived one.
    #[arg(help_heading = heading::SUMMARY, hide_short_help = true, long, value_name = "N")]
    profile_summary_cold_count: Option<u64>,
    /// Density below which profgen warns that more samples are needed.
    #[arg(help_heading = heading::SUMMARY, hide_short_help = true, long, value_name = "N", default_value_t = 50)]
    profile_density_threshold: i32,
    /// Cutoff (parts per million) for the density computation.
    #[arg(help_heading = heading::SUMMARY, hide = true, long, value_name = "N", default_value_t = 990000)]
    profile_density_cutoff_hot: i32,
    /// Write every direct call site of a profiled function that got no samples as a call target
    /// with count 0: anchors for the compiler's stale-profile matching (-salvage-stale-profile).
    /// Default: on, off with --llvm-compatible.
    #[arg(help_heading = heading::OUTPUT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool)]
    zero_count_anchors: Option<bool>,
    /// Print the profile density.
    #[arg(help_heading = heading::SUMMARY, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    show_density: bool,
    /// No progress bar.
    #[arg(help_heading = heading::RUN, long)]
    no_progress: bool,
    #[command(flatten)]
    binary_input: BinaryInputArgs,
    /// Functions from the symbol table where DWARF has none (off: DWARF functions only, as
    /// llvm-profgen-19). Default: on, off with --llvm-compatible.
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool)]
    load_function_from_symbol: Option<bool>,
    /// Mark every context profile as pre-inlined (ShouldBeInlined), to replay all inlining.
    #[arg(help_heading = heading::CS, hide = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    mark_all_context_preinlined: bool,
    /// Warn about sampled addresses of the binary that have no function or no source line.
    #[arg(help_heading = heading::INSPECT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    warn_not_symbolized: bool,
    /// Print the time each phase took (stderr).
    #[arg(help_heading = heading::RUN, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    time_profgen: bool,
    /// Print nothing on stderr but warnings and errors (no progress, no summary line).
    #[arg(help_heading = heading::RUN, long, short = 'q')]
    quiet: bool,
    /// Every option, the expert ones too.
    #[arg(help_heading = heading::RUN, hide_short_help = true, long, action = ArgAction::HelpLong)]
    help_hidden: Option<bool>,
    /// Also write an lld --symbol-ordering-file of start-up function order, from the same
    /// samples (as `profgen order` with its defaults).
    #[arg(help_heading = heading::OUTPUT, hide_short_help = true, long, value_name = "PATH")]
    order_output: Option<PathBuf>,
    #[command(flatten)]
    batch: BatchArgs,
    /// Write a JSON report of the run (per input: samples, drops, binary match, warnings, or why
    /// it was skipped; per-phase times; totals), also when the run fails.
    #[arg(help_heading = heading::OUTPUT, hide_short_help = true, long, value_name = "PATH")]
    report: Option<PathBuf>,
}

/// Which inputs that cannot be used are skipped rather than failing the run (README, "Exit
/// codes"); the last of the two given counts.
#[derive(clap::Args, Debug)]
struct BatchArgs {
    /// Skip every input that cannot be used, with a warning naming it and why, not only files
    /// found in a --perfdata directory (exit code 3 says some were skipped).
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, overrides_with = "no_keep_going")]
    keep_going: bool,
    /// Fail on any input that cannot be used, files found in a --perfdata directory too.
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, overrides_with = "keep_going")]
    no_keep_going: bool,
}

impl BatchArgs {
    fn keep_going(&self) -> KeepGoing {
        match (self.keep_going, self.no_keep_going) {
            (true, _) => KeepGoing::All,
            (_, true) => KeepGoing::Nothing,
            _ => KeepGoing::DirectoryEntries,
        }
    }
}

/// `profgen order`: start-up function order from sample timestamps.
#[derive(Parser, Debug)]
#[command(
    name = "profgen order",
    about = "Order functions for start-up: temporal traces from samples, balanced partitioning, \
             an lld --symbol-ordering-file",
    after_help = exit_codes_of_reading_commands!()
)]
struct OrderArgs {
    /// Profiled executable (its function symbols are what gets ordered).
    #[arg(long, value_name = "PATH")]
    binary: PathBuf,
    /// perf.data input, or a directory of them (repeatable; `-` reads pipe-mode data from stdin).
    #[arg(long, value_name = "PATH", action = ArgAction::Append)]
    perfdata: Vec<PathBuf>,
    /// `perf script` text input (no process ids: the whole script is one trace).
    #[arg(long, value_name = "PATH", conflicts_with = "perfdata")]
    perfscript: Option<PathBuf>,
    /// Traces saved by --write-traces (repeatable): merged with the inputs' traces exactly as if
    /// all inputs had been read at once.
    #[arg(long, value_name = "PATH", action = ArgAction::Append)]
    traces: Vec<PathBuf>,
    /// The symbol ordering file to write (`-` = stdout).
    #[arg(long, short = 'o', value_name = "PATH")]
    output: Option<PathBuf>,
    /// Write the sample of traces (text) for later merges.
    #[arg(long, value_name = "PATH")]
    write_traces: Option<PathBuf>,
    /// How traced functions are ordered.
    #[arg(long, value_enum, default_value = "balanced")]
    algorithm: AlgorithmArg,
    /// Seed of the trace sampling and of the partitioning.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Traces kept (a random sample of this many when there are more).
    #[arg(long, value_name = "N", default_value_t = SamplingParams::default().capacity)]
    max_traces: usize,
    /// Functions kept per trace (the first ones).
    #[arg(long, value_name = "N", default_value_t = SamplingParams::default().max_length)]
    max_trace_length: usize,
    /// Only use mmap events (and samples) of this process.
    #[arg(long)]
    pid: Option<i32>,
    /// Keep only samples of this event (repeatable).
    #[arg(long, action = ArgAction::Append)]
    perf_event: Vec<String>,
    /// Worker threads (default: all cores).
    #[arg(long, value_name = "N")]
    threads: Option<usize>,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

/// `--algorithm` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum AlgorithmArg {
    /// Balanced partitioning over trace prefixes (llvm-profdata order).
    Balanced,
    /// By earliest position in any trace, without partitioning.
    Timestamp,
}

/// The options that decide what is counted, shared by the profile run and `profgen aggregate`
/// (an aggregate records them; the run that reads it must ask for the same).
#[derive(clap::Args, Debug)]
struct CountingArgs {
    /// Only use mmap events (and samples) of this process.
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, value_name = "N")]
    pid: Option<i32>,
    /// Treat LBR + call-stack samples as LBR-only (non-CS profile).
    #[arg(help_heading = heading::INPUT, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    ignore_stack_samples: bool,
    /// Profile from sample IPs only, ignoring LBR entries.
    #[arg(help_heading = heading::INPUT, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    leading_ip_only: bool,
    /// Newer llvm-profgen's name for --leading-ip-only: a flat profile from sample IPs.
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    basic_events: bool,
    /// Keep only samples of this event (repeatable).
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, action = ArgAction::Append)]
    perf_event: Vec<String>,
    /// Comma-separated list of events to keep.
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, value_delimiter = ',')]
    perf_events: Vec<String>,
    /// Multiply LBR-only sample counts by this period.
    #[arg(help_heading = heading::INPUT, hide = true, long, value_name = "N")]
    sample_period: Option<u64>,
    /// Ignore pseudo probes and use DWARF line correlation.
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    use_dwarf_correlation: bool,
    /// Collapse repeated frame sequences up to this length (-1 unlimited, 0 off).
    #[arg(help_heading = heading::CS, hide_short_help = true, long, value_name = "N", default_value_t = -1, allow_negative_numbers = true)]
    compress_recursion: i32,
    /// Keep only this many caller frames (-1 unlimited).
    #[arg(help_heading = heading::CS, hide_short_help = true, long, value_name = "N", default_value_t = -1, allow_negative_numbers = true)]
    csprof_max_context_depth: i32,
    /// Keep only this many frames of probe-based (address) contexts while unwinding (-1
    /// unlimited; the smaller of this and --csprof-max-context-depth applies).
    #[arg(help_heading = heading::CS, hide = true, long, value_name = "N", default_value_t = -1, allow_negative_numbers = true)]
    csprof_max_unsymbolized_context_depth: i32,
    /// The profile llvm-profgen-19 writes, byte for byte.
    ///
    /// Turns off every difference of profgen's default profile (README, "Differences from
    /// llvm-profgen": accuracy improvements, zero-count anchors); the fixes of llvm-profgen-19's
    /// failures stay.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    llvm_compatible: bool,
    /// How each LBR window's ranges count: auto (from the sampling event: 1/instructions for
    /// instruction events, 1/LBR cycles for cycle events, +1 for taken-branch events, +1 when
    /// unknown), none (+1 per range, llvm-profgen), instructions, cycles or branches.
    /// Default: auto, none with --llvm-compatible.
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, value_enum, value_name = "HOW")]
    lbr_weighting: Option<LbrWeightingArg>,
}

/// `--lbr-weighting` values.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum LbrWeightingArg {
    Auto,
    None,
    Instructions,
    Cycles,
    Branches,
}

/// How the binary is found and mapped, shared by the profile run and `profgen aggregate`: they
/// decide which samples are the binary's, not how they are counted (an aggregate does not record
/// them).
#[derive(clap::Args, Debug)]
struct BinaryInputArgs {
    /// Split-DWARF package of the binary (default: BINARY.dwp when it exists; `.dwo` files are
    /// also found through the skeleton units' DW_AT_dwo_name and comp_dir).
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, value_name = "PATH")]
    dwp: Option<PathBuf>,
    /// The binary is a Linux kernel image (vmlinux): samples are mapped through the
    /// `[kernel.kallsyms]` mmap event; no user-space mapping is needed.
    #[arg(help_heading = heading::INPUT, long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    kernel: bool,
    /// Build id (hex) whose `buildid:0xADDR` perf script addresses belong to the binary
    /// (default: the binary's own for a shared library, none for an executable).
    #[arg(help_heading = heading::INPUT, hide_short_help = true, long, value_name = "HEX")]
    filter_build_id: Option<String>,
}

impl BinaryInputArgs {
    /// These options are about one binary: a binary store (`--binaries`) takes none of them.
    fn check(&self, binaries: &Binaries) -> Result<(), clap::Error> {
        let given = [
            (self.dwp.is_some(), "--dwp"),
            (self.kernel, "--kernel"),
            (self.filter_build_id.is_some(), "--filter-build-id"),
        ];
        match given.iter().find(|(on, _)| *on) {
            Some((_, name)) if matches!(binaries, Binaries::Store(_)) => {
                Err(usage(format!("{name} applies to one --binary, not to --binaries")))
            }
            _ => Ok(()),
        }
    }

    /// `read` with the binary's mapping options.
    fn read_options(&self, read: ReadOptions) -> Result<ReadOptions, clap::Error> {
        let filter_build_id = self.filter_build_id.as_deref().map(parse_build_id).transpose()?;
        Ok(ReadOptions { kernel: self.kernel, filter_build_id, ..read })
    }
}

impl CountingArgs {
    fn check(&self) -> Result<(), clap::Error> {
        if self.compress_recursion < -1 {
            return Err(usage("Value of --compress-recursion should >= -1"));
        }
        Ok(())
    }

    fn context(&self) -> ContextShape {
        ContextShape {
            compress_recursion: self.compress_recursion,
            max_context_depth: self.csprof_max_context_depth,
        }
    }

    /// The read stage's options (`--use-offset` style options at their defaults).
    /// `--leading-ip-only` or its newer name `--basic-events`.
    fn ip_samples(&self) -> bool {
        self.leading_ip_only || self.basic_events
    }

    fn read_options(&self, progress: bool, show_mmap_events: bool) -> ReadOptions {
        let mut perf_events = self.perf_event.clone();
        perf_events.extend(self.perf_events.iter().filter(|e| !e.is_empty()).cloned());
        ReadOptions {
            pid: self.pid,
            perf_events,
            sample: SampleOptions {
                leading_ip_only: self.ip_samples(),
                ignore_stack: self.ignore_stack_samples,
                sample_period: self.sample_period,
                llvm_compatible: self.llvm_compatible,
                ..SampleOptions::default()
            },
            context: self.context(),
            lbr_weighting: match self.lbr_weighting {
                Some(LbrWeightingArg::Auto) => LbrWeighting::Auto,
                Some(LbrWeightingArg::None) => LbrWeighting::None,
                Some(LbrWeightingArg::Instructions) => LbrWeighting::Instructions,
                Some(LbrWeightingArg::Cycles) => LbrWeighting::Cycles,
                Some(LbrWeightingArg::Branches) => LbrWeighting::Branches,
                None if self.llvm_compatible => LbrWeighting::None,
                None => LbrWeighting::Auto,
            },
            max_unsymbolized_context_depth: self.csprof_max_unsymbolized_context_depth,
            show_mmap_events,
            progress,
            ..ReadOptions::default()
        }
    }
}

/// `profgen aggregate`: counters of each binary from the inputs, as an aggregate file.
#[derive(Parser, Debug)]
#[command(
    name = "profgen aggregate",
    about = "Aggregate perf.data into a mergeable aggregate file (.pga), per binary build id",
    after_help = exit_codes_of_reading_commands!()
)]
struct AggregateArgs {
    /// Profiled executable.
    #[arg(help_heading = heading::INPUT, long, value_name = "PATH", required_unless_present = "binaries")]
    binary: Option<PathBuf>,
    /// A directory of binaries or a .build-id tree: every binary in it the inputs map is
    /// aggregated (found by build id, or by file name for inputs without build ids).
    #[arg(help_heading = heading::INPUT, long, value_name = "DIR", conflicts_with = "binary")]
    binaries: Option<PathBuf>,
    /// Read DWARF from this file instead of --binary.
    #[arg(help_heading = heading::INPUT, long, value_name = "PATH", conflicts_with = "binaries")]
    debug_binary: Option<PathBuf>,
    /// perf.data input, or a directory of them (repeatable).
    #[arg(help_heading = heading::INPUT, long, visible_alias = "pd", value_name = "PATH", action = ArgAction::Append)]
    perfdata: Vec<PathBuf>,
    /// `perf script` text input (with --binary).
    #[arg(help_heading = heading::INPUT, long, visible_alias = "ps", value_name = "PATH", conflicts_with_all = ["perfdata", "binaries"])]
    perfscript: Option<PathBuf>,
    /// The aggregate file to write.
    #[arg(help_heading = heading::OUTPUT, long, short = 'o', value_name = "PATH")]
    output: PathBuf,
    /// Worker threads (default: all cores).
    #[arg(help_heading = heading::RUN, long, value_name = "N")]
    threads: Option<usize>,
    #[command(flatten)]
    binary_input: BinaryInputArgs,
    #[command(flatten)]
    counting: CountingArgs,
    #[command(flatten)]
    batch: BatchArgs,
    /// Write a JSON report of the run (per binary and input: samples, drops, binary match,
    /// warnings, or why an input was skipped; per-phase times), also when the run fails.
    #[arg(help_heading = heading::OUTPUT, long, value_name = "PATH")]
    report: Option<PathBuf>,
    /// No progress bar.
    #[arg(help_heading = heading::RUN, long)]
    no_progress: bool,
}

/// `profgen merge`: aggregate files summed into one.
#[derive(Parser, Debug)]
#[command(
    name = "profgen merge",
    about = "Merge aggregate files (.pga): the result is the same for any grouping and order",
    after_help = "Exit codes: 0 success, 1 bad input, 2 bad usage."
)]
struct MergeArgs {
    /// Aggregate files to merge.
    #[arg(value_name = "AGGREGATE", required = true)]
    inputs: Vec<PathBuf>,
    /// The merged aggregate file.
    #[arg(long, short = 'o', value_name = "PATH")]
    output: PathBuf,
}

/// `--format` values, llvm-profgen's names.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum FormatArg {
    Text,
    Binary,
    Extbinary,
    Gcc,
}

impl From<FormatArg> for OutputFormat {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Text => OutputFormat::Text,
            FormatArg::Binary => OutputFormat::Binary,
            FormatArg::Extbinary => OutputFormat::ExtBinary,
            FormatArg::Gcc => OutputFormat::Gcc,
        }
    }
}

fn parse_llvm_bool(s: &str) -> Result<bool, String> {
    match s {
        "" | "1" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "false" | "FALSE" | "False" => Ok(false),
        _ => Err(format!("'{s}' is invalid value for boolean argument! Try 0 or 1")),
    }
}

/// Maps LLVM's single-dash long options (`-binary=x`, `-output x`) to `--binary=x`; `-o`,
/// `-q`, negative numbers (`-10`, a value) and anything after `--` are left alone.
pub fn normalize_args(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut out = Vec::new();
    let mut rest = false;
    for (i, a) in args.into_iter().enumerate() {
        let fixed = match a.to_str() {
            Some("--") => {
                rest = true;
                a
            }
            Some(s)
                if i > 0
                    && !rest
                    && s.len() > 2
                    && s.starts_with('-')
                    && !s.starts_with("--")
                    && !s.starts_with("-o=")
                    && s[1..].parse::<f64>().is_err() =>
            {
                OsString::from(format!("-{s}"))
            }
            _ => a,
        };
        out.push(fixed);
    }
    out
}

/// LLVM's `ExpansionContext::expandResponseFiles` with the GNU tokenizer (what every LLVM tool
/// does with its arguments on Linux): an argument `@FILE` is replaced by the arguments in FILE,
/// whose own `@FILE`s are expanded in turn (relative to the current directory, as LLVM); a FILE
/// that does not exist leaves `@FILE` as a literal argument (libiberty's rule); a file that
/// includes itself, directly or not, is an error.
pub fn expand_response_files(args: Vec<OsString>) -> Result<Vec<OsString>, String> {
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::os::unix::fs::MetadataExt;
    let mut args = args;
    // (identity, path, index one past its expansion) of the files being expanded.
    let mut stack: Vec<((u64, u64), String, usize)> = Vec::new();
    let mut i = 1;
    while i < args.len() {
        while stack.last().is_some_and(|f| i >= f.2) {
            stack.pop();
        }
        let Some(name) = args[i].as_bytes().strip_prefix(b"@").map(std::ffi::OsStr::from_bytes)
        else {
            i += 1;
            continue;
        };
        let shown = name.to_string_lossy().into_owned();
        let meta = match std::fs::metadata(name) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                i += 1;
                continue;
            }
            Err(e) => return Err(format!("cannot open file '{shown}': {e}")),
        };
        let id = (meta.dev(), meta.ino());
        if let Some(f) = stack.iter().find(|f| f.0 == id) {
            return Err(format!("recursive expansion of: '{}'", f.1));
        }
        let bytes = std::fs::read(name).map_err(|e| format!("cannot open file '{shown}': {e}"))?;
        let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&bytes);
        let tokens: Vec<OsString> =
            tokenize_gnu_command_line(bytes).into_iter().map(OsString::from_vec).collect();
        let n = tokens.len();
        for f in &mut stack {
            f.2 = f.2 + n - 1;
        }
        stack.push((id, shown, i + n));
        args.splice(i..=i, tokens);
    }
    Ok(args)
}

/// LLVM's `cl::TokenizeGNUCommandLine`: whitespace separates arguments; a backslash takes the
/// next character literally, also inside single or double quotes; quotes group and are removed
/// (`a'b c'd` is one argument `ab cd`); an unterminated quote runs to the end of the text; an
/// empty argument (`''`) is dropped, as LLVM drops it.
pub fn tokenize_gnu_command_line(src: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut token = Vec::new();
    let mut i = 0;
    while i < src.len() {
        let c = src[i];
        i += 1;
        match c {
            b'\\' if i < src.len() => {
                token.push(src[i]);
                i += 1;
            }
            b'"' | b'\'' => {
                while i < src.len() && src[i] != c {
                    if src[i] == b'\\' && i + 1 < src.len() {
                        i += 1;
                    }
                    token.push(src[i]);
                    i += 1;
                }
                i += 1;
            }
            b' ' | b'\t' | b'\r' | b'\n' => {
                if !token.is_empty() {
                    out.push(std::mem::take(&mut token));
                }
            }
            _ => token.push(c),
        }
    }
    if !token.is_empty() {
        out.push(token);
    }
    out
}

/// `profgen remap`: carry a profile of an old build onto a new build.
#[derive(Parser, Debug)]
#[command(
    name = "profgen remap",
    about = "Carry a sample profile made for an old build onto a new build: functions matched by name (GUID for MD5 names) or, when renamed, by the similarity of their call sequences; locations by call anchors, as LLVM's stale-profile matching does",
    after_help = "Exit codes: 0 success, 1 bad input, 2 bad usage."
)]
struct RemapArgs {
    /// The profile made for the old build (text, binary or extbinary).
    #[arg(long, value_name = "PATH")]
    profile: PathBuf,
    /// The new build (the profile is remapped onto it).
    #[arg(long, value_name = "PATH")]
    binary: PathBuf,
    /// The old build the profile was made for: its call sites complete the profile's anchors,
    /// and its code is aligned with the new build's to place the other locations.
    #[arg(long, value_name = "PATH")]
    old_binary: Option<PathBuf>,
    /// Place the locations between call anchors as LLVM's stale-profile matcher does (split
    /// evenly between the anchors), also with --old-binary.
    #[arg(long)]
    llvm_matching: bool,
    /// Read the new build's DWARF from this file instead of --binary.
    #[arg(long, value_name = "PATH")]
    debug_binary: Option<PathBuf>,
    /// Output profile path (`-` for stdout).
    #[arg(long, short = 'o', value_name = "PATH")]
    output: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "extbinary")]
    format: FormatArg,
    /// Name table of MD5 hashes (extbinary only).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    use_md5: bool,
    /// A function the new build lacks matches a new function without profile when more than
    /// this percentage of its call anchors are found in order in the new one.
    #[arg(long, value_name = "PERCENT", default_value_t = 80, value_parser = clap::value_parser!(u32).range(0..=100))]
    similarity_threshold: u32,
    /// Also write the new build's unsampled direct call sites as zero-count call targets.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_llvm_bool, default_value = "false")]
    zero_count_anchors: bool,
    /// Write the per-function report here (`-` for stderr).
    #[arg(long, value_name = "PATH")]
    report: Option<PathBuf>,
}

/// Parses the command line into a [`Command`]. Usage errors come back as clap errors (exit 2).
pub fn parse(args: impl IntoIterator<Item = OsString>) -> Result<Command, clap::Error> {
    let args = expand_response_files(args.into_iter().collect()).map_err(usage)?;
    match args.get(1).and_then(|a| a.to_str()) {
        Some("order") => {
            let a = OrderArgs::try_parse_from(&args[1..])?;
            return to_order_config(a).map(Command::Order);
        }
        Some("aggregate") => {
            let a = AggregateArgs::try_parse_from(normalize_args(args.into_iter().skip(1)))?;
            return to_aggregate_config(a).map(Command::Aggregate);
        }
        Some("merge") => {
            let a = MergeArgs::try_parse_from(normalize_args(args.into_iter().skip(1)))?;
            return Ok(Command::Merge(MergeConfig { inputs: a.inputs, output: a.output }));
        }
        Some("remap") => {
            let a = RemapArgs::try_parse_from(normalize_args(args.into_iter().skip(1)))?;
            return Ok(Command::Remap(RemapConfig {
                profile: a.profile,
                binary: a.binary,
                old_binary: a.old_binary,
                load: LoadOptions { debug_binary: a.debug_binary, ..Default::default() },
                remap: RemapOptions {
                    similarity_threshold: a.similarity_threshold,
                    ..Default::default()
                },
                llvm_matching: a.llvm_matching,
                zero_count_anchors: a.zero_count_anchors,
                format: a.format.into(),
                write: WriteOptions { use_md5: a.use_md5 },
                output: a.output,
                report: a.report,
            }));
        }
        _ => {}
    }
    let args = normalize_args(args);
    if args.iter().skip(1).any(|a| a == "--help-hidden") {
        // The same options with none hidden: clap prints the long help and exits 0.
        let all = Args::command().mut_args(|a| a.hide(false).hide_short_help(false));
        return Err(all.try_get_matches_from(args).expect_err("--help-hidden prints help"));
    }
    let args = Args::try_parse_from(args)?;
    to_config(args).map(Command::Profile)
}

fn thread_count(given: Option<usize>) -> Result<usize, clap::Error> {
    match given {
        Some(0) => Err(usage("--threads must be at least 1")),
        Some(n) => Ok(n),
        None => Ok(std::thread::available_parallelism().map_or(1, |n| n.get())),
    }
}

fn to_order_config(a: OrderArgs) -> Result<OrderConfig, clap::Error> {
    if a.output.is_none() && a.write_traces.is_none() {
        return Err(usage("nothing to write: give --output (the order) or --write-traces"));
    }
    let input = match (a.perfdata.is_empty(), a.perfscript) {
        (false, _) => Some(Input::PerfData(a.perfdata)),
        (true, Some(p)) => Some(Input::PerfScript(p)),
        (true, None) => None,
    };
    if input.is_none() && a.traces.is_empty() {
        return Err(usage("no traces to order by: give --perfdata, --perfscript or --traces"));
    }
    let sampling =
        SamplingParams { seed: a.seed, capacity: a.max_traces, max_length: a.max_trace_length };
    Ok(OrderConfig {
        binary: a.binary,
        input,
        traces: a.traces,
        threads: thread_count(a.threads)?,
        read: ReadOptions {
            pid: a.pid,
            perf_events: a.perf_event,
            progress: !a.no_progress,
            temporal_traces: Some(sampling.max_length),
            ..ReadOptions::default()
        },
        options: OrderOptions {
            algorithm: match a.algorithm {
                AlgorithmArg::Balanced => Algorithm::Balanced,
                AlgorithmArg::Timestamp => Algorithm::FirstTimestamp,
            },
            sampling,
            partition: PartitionConfig { seed: a.seed, ..PartitionConfig::default() },
        },
        output: a.output,
        write_traces: a.write_traces,
    })
}

fn to_aggregate_config(a: AggregateArgs) -> Result<AggregateConfig, clap::Error> {
    a.counting.check()?;
    let input = match a.perfscript {
        Some(p) => Input::PerfScript(p),
        None if a.perfdata.is_empty() => {
            return Err(usage("no input: give --perfdata (files or directories) or --perfscript"));
        }
        None => Input::PerfData(a.perfdata),
    };
    let binaries = match (a.binary, a.binaries) {
        (Some(b), _) => Binaries::One(b),
        (None, Some(d)) => Binaries::Store(d),
        (None, None) => return Err(usage("give --binary or --binaries")),
    };
    a.binary_input.check(&binaries)?;
    Ok(AggregateConfig {
        binaries,
        load: LoadOptions {
            debug_binary: a.debug_binary,
            dwp: a.binary_input.dwp.clone(),
            use_dwarf_correlation: a.counting.use_dwarf_correlation,
            // As the profile made from the aggregate: llvm-profgen-19 knows DWARF functions only.
            load_function_from_symbol: !a.counting.llvm_compatible,
        },
        input,
        threads: thread_count(a.threads)?,
        read: a.binary_input.read_options(ReadOptions {
            keep_going: a.batch.keep_going(),
            ..a.counting.read_options(!a.no_progress, false)
        })?,
        output: a.output,
        report: a.report,
    })
}

/// `--filter-build-id`: hex digits (an optional `0x` is allowed), as `file` and perf print them.
fn parse_build_id(s: &str) -> Result<Vec<u8>, clap::Error> {
    let hex = s.strip_prefix("0x").unwrap_or(s);
    let bad = || usage(format!("--filter-build-id: '{s}' is not a build id (hex digits)"));
    if hex.is_empty() || !hex.len().is_multiple_of(2) {
        return Err(bad());
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| hex.get(i..i + 2).and_then(|b| u8::from_str_radix(b, 16).ok()).ok_or_else(bad))
        .collect()
}

fn usage(msg: impl Into<String>) -> clap::Error {
    clap::Error::raw(clap::error::ErrorKind::ArgumentConflict, format!("{}\n", msg.into()))
}

fn to_config(a: Args) -> Result<Config, clap::Error> {
    let (binaries, output) = match (a.binary, a.binaries) {
        (Some(b), _) => (
            Binaries::One(b),
            a.output.ok_or_else(|| {
                usage("for the --output option: must be specified at least once!")
            })?,
        ),
        (None, Some(d)) => (
            Binaries::Store(d),
            a.output_dir.ok_or_else(|| usage("--binaries needs --output-dir"))?,
        ),
        (None, None) => return Err(usage("--binary is required")),
    };
    let given = [!a.perfdata.is_empty(), a.perfscript.is_some(), a.unsymbolized_profile.is_some()]
        .iter()
        .filter(|g| **g)
        .count();
    if given > 1 {
        return Err(usage(
            "`--perfscript`, `--perfdata` and `--unsymbolized-profile` cannot be used together.",
        ));
    }
    if given > 0 && !a.aggregate.is_empty() {
        return Err(usage(
            "`--aggregate` cannot be used with `--perfscript`, `--perfdata` or `--unsymbolized-profile`.",
        ));
    }
    let input = if !a.perfdata.is_empty() {
        Some(Input::PerfData(a.perfdata))
    } else if let Some(p) = a.perfscript {
        Some(Input::PerfScript(p))
    } else if !a.aggregate.is_empty() {
        Some(Input::Aggregate(a.aggregate))
    } else {
        a.unsymbolized_profile.map(Input::Unsymbolized)
    };
    if input.is_none() && !a.show_disassembly_only {
        return Err(usage(
            "Perf input file is missing, please use one of --perfscript, --perfdata, --unsymbolized-profile and --aggregate for the input.",
        ));
    }
    if matches!(binaries, Binaries::Store(_)) && !matches!(input, Some(Input::Aggregate(_))) {
        return Err(usage(
            "--binaries profiles aggregates: give --aggregate (see `profgen aggregate`)",
        ));
    }
    if a.show_source_locations && !a.show_disassembly_only {
        return Err(usage(
            "--show-source-locations should work together with --show-disassembly-only!",
        ));
    }
    a.counting.check()?;
    a.binary_input.check(&binaries)?;
    let threads = thread_count(a.threads)?;
    let no_times = matches!(input, Some(Input::Unsymbolized(_) | Input::Aggregate(_)) | None);
    if a.order_output.is_some() && no_times {
        return Err(usage(
            "--order-output needs samples: --perfdata or --perfscript (an unsymbolized profile or an aggregate has no sample times)",
        ));
    }
    let order = a.order_output.map(|path| OrderOutput { options: OrderOptions::default(), path });
    let context = a.counting.context();
    let leading_ip_only = a.counting.ip_samples();
    let read = a.binary_input.read_options(ReadOptions {
        unsymbolized: UnsymbolizedOptions {
            use_offset: a.use_offset,
            use_first_loadable_segment_as_base: a.use_first_loadable_segment_as_base,
        },
        temporal_traces: order.as_ref().map(|o| o.options.sampling.max_length),
        keep_going: a.batch.keep_going(),
        ..a.counting.read_options(!a.no_progress && !a.quiet, a.show_mmap_events)
    })?;
    Ok(Config {
        binaries,
        load: LoadOptions {
            debug_binary: a.debug_binary,
            dwp: a.binary_input.dwp.clone(),
            use_dwarf_correlation: a.counting.use_dwarf_correlation,
            load_function_from_symbol: a
                .load_function_from_symbol
                .unwrap_or(!a.counting.llvm_compatible),
        },
        input,
        threads,
        read,
        skip_symbolization: a.skip_symbolization,
        profile: ProfileOptions {
            line: LineOptions {
                fill_zero_for_all_funcs: a.fill_zero_for_all_funcs,
                leading_ip_only,
            },
            update_total_samples: a.update_total_samples,
            cs: CsOptions {
                update_total_samples: a.update_total_samples,
                // profgen's fix of llvm-profgen-19's raw-discriminator callee contexts (README,
                // "Differences from llvm-profgen").
                callee_context_base_discriminator: true,
                infer_missing_frames: a.infer_missing_frames,
                max_search_depth: a.max_search_depth,
                context,
            },
            llvm_compatible: a.counting.llvm_compatible,
        },
        output: OutputOptions {
            postpass: PostPassOptions {
                preinliner: a.csspgo_preinliner,
                use_context_cost: a.use_context_cost_for_preinliner,
                replay_preinline: a.csspgo_replay_preinline,
                multiplier_for_previous_inlining: a
                    .csspgo_preinliner_multiplier_for_previous_inlining,
                hot_inline_threshold: a.sample_profile_hot_inline_threshold,
                cold_inline_threshold: a.sample_profile_cold_inline_threshold,
                inline_growth_limit: a.sample_profile_inline_growth_limit,
                inline_limit_min: a.sample_profile_inline_limit_min,
                inline_limit_max: a.sample_profile_inline_limit_max,
                sort_profiled_scc_member: a.sort_profiled_scc_member,
                trim_cold_profile: a.trim_cold_profile,
                merge_cold_context: a.csprof_merge_cold_context,
                max_cold_context_depth: a.csprof_max_cold_context_depth,
                gen_cs_nested_profile: a.gen_cs_nested_profile,
                generate_merged_base_profiles: a.generate_merged_base_profiles,
                update_total_samples: a.update_total_samples,
                mark_all_context_preinlined: a.mark_all_context_preinlined,
            },
            summary: SummaryOptions {
                cutoff_hot: a.profile_summary_cutoff_hot,
                cutoff_cold: a.profile_summary_cutoff_cold,
                hot_count: a.profile_summary_hot_count,
                cold_count: a.profile_summary_cold_count,
            },
            populate_profile_symbol_list: a.populate_profile_symbol_list,
            density: DensityOptions {
                threshold: a.profile_density_threshold,
                cutoff_hot: a.profile_density_cutoff_hot,
                show: a.show_density,
            },
            zero_count_anchors: a.zero_count_anchors.unwrap_or(!a.counting.llvm_compatible),
            format: a.format.into(),
            write: WriteOptions { use_md5: a.use_md5 },
            path: output,
        },
        show_disassembly_only: a.show_disassembly_only,
        show_pseudo_probe: a.show_pseudo_probe,
        disassembly: DumpOptions {
            functions: a.disassemble_functions,
            source_locations: a.show_source_locations,
            pseudo_probes: a.show_pseudo_probe,
            canonical_names: a.show_canonical_fname,
        },
        order,
        run: RunOptions {
            quiet: a.quiet,
            time_phases: a.time_profgen,
            warn_not_symbolized: a.warn_not_symbolized,
            report: a.report,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn format_names_match_llvm_profgen() {
        let names: Vec<_> = FormatArg::value_variants()
            .iter()
            .map(|f| f.to_possible_value().unwrap().get_name().to_string())
            .collect();
        assert_eq!(names, ["text", "binary", "extbinary", "gcc"]);
    }
}
