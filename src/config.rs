//! The plain run configuration the core sees. `cli` turns command-line arguments into it;
//! nothing below the driver knows about clap.

pub use crate::writer::OutputFormat;
use std::path::PathBuf;

/// Where samples come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// One or more perf.data files (`-` = stdin, pipe mode).
    PerfData(Vec<PathBuf>),
    PerfScript(PathBuf),
    Unsymbolized(PathBuf),
}

#[derive(Clone, Debug)]
pub struct Config {
    pub binary: PathBuf,
    pub debug_binary: Option<PathBuf>,
    /// `None` only with `--show-disassembly-only` / `--show-pseudo-probe` style runs.
    pub input: Option<Input>,
    pub output: PathBuf,
    pub format: OutputFormat,
    pub pid: Option<i32>,
    pub threads: Option<usize>,

    // Sample interpretation.
    pub ignore_stack_samples: bool,
    pub leading_ip_only: bool,
    pub perf_events: Vec<String>,
    pub sample_period: Option<u64>,
    pub skip_symbolization: bool,
    pub use_offset: bool,
    pub use_first_loadable_segment_as_base: bool,
    pub use_dwarf_correlation: bool,
    pub show_mmap_events: bool,

    // Profile contents.
    pub use_md5: bool,
    pub populate_profile_symbol_list: bool,
    pub fill_zero_for_all_funcs: bool,
    pub update_total_samples: bool,

    // Debug output.
    pub show_disassembly_only: bool,
    pub disassemble_functions: Vec<String>,
    pub show_source_locations: bool,
    pub show_pseudo_probe: bool,
    pub show_canonical_fname: bool,

    pub progress: bool,

    // Context-sensitive shaping (unwinder and CS builders).
    pub compress_recursion: i32,
    pub max_context_depth: i32,
    pub infer_missing_frames: bool,
    pub max_search_depth: u32,

    pub postpass: crate::postpass::PostPassOptions,
    pub summary: crate::profile::summary::SummaryOptions,
    pub density: crate::writer::density::DensityOptions,
}
