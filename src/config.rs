//! What a `profgen` command is asked to do, as plain option structs: [`crate::cli`] builds every
//! stage's options once from the command line, [`crate::driver`] hands each stage its own.
//! Nothing below the front end knows about clap.

use crate::aggregate::read::{Input, ReadOptions};
use crate::binary::{DumpOptions, LoadOptions};
use crate::order::OrderOptions;
use crate::postpass::PostPassOptions;
use crate::profile::ProfileOptions;
use crate::profile::summary::SummaryOptions;
use crate::remap::RemapOptions;
use crate::writer::density::DensityOptions;
use crate::writer::{OutputFormat, WriteOptions};
use std::path::PathBuf;

/// A parsed command line (one per process: the size of its largest variant does not matter).
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Command {
    /// Profile generation: `profgen [OPTIONS]`, llvm-profgen's command line.
    Profile(Config),
    /// Start-up function order: `profgen order [OPTIONS]`.
    Order(OrderConfig),
    /// `profgen aggregate`: inputs → counters per binary → an aggregate file.
    Aggregate(AggregateConfig),
    /// `profgen merge`: aggregate files → one aggregate file.
    Merge(MergeConfig),
    /// `profgen remap`: an old build's profile carried onto a new build.
    Remap(RemapConfig),
}

/// `profgen remap`: profile + new binary (+ old binary) → remapped profile and report.
#[derive(Clone, Debug)]
pub struct RemapConfig {
    /// The profile made for the old build (text, binary or extbinary).
    pub profile: PathBuf,
    /// The new build.
    pub binary: PathBuf,
    /// The old build the profile was made for: its call sites complete the profile's anchors.
    pub old_binary: Option<PathBuf>,
    pub load: LoadOptions,
    pub remap: RemapOptions,
    /// Match locations by call anchors only, as LLVM does, also when the old build is given
    /// (otherwise its code is aligned with the new build's: `remap::content`).
    pub llvm_matching: bool,
    /// Add zero-count call anchors of the new build (as `--zero-count-anchors` does).
    pub zero_count_anchors: bool,
    pub format: OutputFormat,
    pub write: WriteOptions,
    /// `--output` (`-` = stdout).
    pub output: PathBuf,
    /// `--report`: the per-function report (`-` = stderr).
    pub report: Option<PathBuf>,
}

/// Which binaries are profiled.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binaries {
    /// `--binary`.
    One(PathBuf),
    /// `--binaries DIR`: every binary of the store (a directory of binaries or a build-id tree,
    /// see [`crate::binary::store`]) that the inputs have samples of.
    Store(PathBuf),
}

/// Profile generation: binary and inputs → counters → profile → post-passes → output.
#[derive(Clone, Debug)]
pub struct Config {
    /// With [`Binaries::Store`], one profile per binary, written into the directory
    /// `output.path`.
    pub binaries: Binaries,
    pub load: LoadOptions,
    /// `None` only with `--show-disassembly-only` / `--show-pseudo-probe` style runs.
    pub input: Option<Input>,
    /// Worker threads, at least 1.
    pub threads: usize,
    pub read: ReadOptions,
    /// `--skip-symbolization`: write the counters as an unsymbolized profile (addresses relative
    /// to `read.unsymbolized`) to `output.path` instead of a profile.
    pub skip_symbolization: bool,
    pub profile: ProfileOptions,
    pub output: OutputOptions,
    /// `--show-disassembly-only`: print the disassembly and stop.
    pub show_disassembly_only: bool,
    /// `--show-pseudo-probe`: print the decoded pseudo probes.
    pub show_pseudo_probe: bool,
    pub disassembly: DumpOptions,
    /// `--order-output`: also write a symbol ordering file from the same samples (the read
    /// options then keep temporal traces).
    pub order: Option<OrderOutput>,
    pub run: RunOptions,
}

/// How a run reports on itself (front-end options; the stages never see them).
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// `--quiet`: no progress and no summary line; warnings and errors only.
    pub quiet: bool,
    /// `--time-profgen`: the time each phase took, on stderr.
    pub time_phases: bool,
    /// `--warn-not-symbolized`: warn about sampled addresses without a function or a line.
    pub warn_not_symbolized: bool,
    /// `--report`: where to write the JSON run report.
    pub report: Option<PathBuf>,
}

/// Where and how a function order is written.
#[derive(Clone, Debug)]
pub struct OrderOutput {
    pub options: OrderOptions,
    /// The symbol ordering file (`-` = stdout).
    pub path: PathBuf,
}

/// `profgen order`: temporal traces from the inputs and from saved trace samples → a sample of
/// traces → a function order.
#[derive(Clone, Debug)]
pub struct OrderConfig {
    pub binary: PathBuf,
    /// perf.data or perf script input; `None` when only saved traces are given.
    pub input: Option<Input>,
    /// `--traces`: trace samples written by earlier runs (`--write-traces`), merged in.
    pub traces: Vec<PathBuf>,
    pub threads: usize,
    pub read: ReadOptions,
    pub options: OrderOptions,
    /// `--output`: the symbol ordering file.
    pub output: Option<PathBuf>,
    /// `--write-traces`: the merged trace sample, for later merges.
    pub write_traces: Option<PathBuf>,
}

/// `profgen aggregate`: the inputs' counters for each binary, written as an aggregate file
/// ([`crate::aggregate::pga`]).
#[derive(Clone, Debug)]
pub struct AggregateConfig {
    pub binaries: Binaries,
    pub load: LoadOptions,
    /// perf.data files and directories, or one perf script (with [`Binaries::One`]).
    pub input: Input,
    pub threads: usize,
    pub read: ReadOptions,
    /// The aggregate file to write.
    pub output: PathBuf,
    /// `--report`: where the JSON report goes.
    pub report: Option<PathBuf>,
}

/// `profgen merge`: aggregate files summed into one.
#[derive(Clone, Debug)]
pub struct MergeConfig {
    pub inputs: Vec<PathBuf>,
    pub output: PathBuf,
}

/// What happens to a generated profile: post-passes, symbol list, density report, encoding.
#[derive(Clone, Debug)]
pub struct OutputOptions {
    pub postpass: PostPassOptions,
    pub summary: SummaryOptions,
    /// `--populate-profile-symbol-list`.
    pub populate_profile_symbol_list: bool,
    pub density: DensityOptions,
    /// `--zero-count-anchors` (default on, off with `--llvm-compatible`): every unsampled direct
    /// call site gets its callee with count 0 (anchors for the compiler's stale-profile matching).
    pub zero_count_anchors: bool,
    pub format: OutputFormat,
    pub write: WriteOptions,
    /// `--output` (`-` = stdout), or with a binary store, `--output-dir`.
    pub path: PathBuf,
}
