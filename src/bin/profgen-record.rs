//! `profgen-record [options] -- program args...`: see [`profgen::record`].

use std::path::PathBuf;

use clap::Parser;

/// Records `perf record -e EVENT -b --call-graph fp`-like perf.data in software (valgrind
/// lackey), plus exact ground-truth instruction and branch counts.
#[derive(Parser)]
#[command(name = "profgen-record")]
struct Args {
    /// Output perf.data.
    #[arg(short, long, default_value = "perf.data")]
    output: PathBuf,
    /// Ground-truth sidecar (text, see `profgen::record::truth`).
    #[arg(long)]
    truth: Option<PathBuf>,
    /// Mean number of events between samples (jittered ±1/8).
    #[arg(long, default_value_t = 10007)]
    period: u64,
    /// Sampling event: cycles (the attr says `cycles:u`; one instruction per cycle),
    /// instructions, branches (taken branches: `br_inst_retired.near_taken:u`) or cpu-clock
    /// (one instruction per nanosecond).
    #[arg(long, default_value = "cycles", value_parser = parse_event)]
    event: profgen::record::Event,
    /// Fill each LBR entry's cycle count (cycles since the previous taken branch), as
    /// Skylake and later do.
    #[arg(long)]
    lbr_cycles: bool,
    /// Record IPs only, without branch stacks (`perf record` without `-b`).
    #[arg(long)]
    no_branch_stack: bool,
    /// Seed for the period jitter.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Valgrind executable.
    #[arg(long, default_value = "valgrind")]
    valgrind: String,
    /// Keep ground truth for system libraries too.
    #[arg(long)]
    truth_all: bool,
    /// Write pids from this value on instead of the real ones (reproducible files).
    #[arg(long)]
    pid_base: Option<u32>,
    /// Record branch stacks only, without call stacks (like `perf record -b` without `-g`).
    #[arg(long)]
    no_call_stack: bool,
    /// Take the first sample of each thread at a random point of its first period (seeded),
    /// as runs on hardware do: runs recorded with different seeds then sample different
    /// instructions from their start (for start-up orders from many runs).
    #[arg(long)]
    random_start: bool,
    /// Program and arguments.
    #[arg(required = true, trailing_var_arg = true)]
    command: Vec<String>,
}

fn parse_event(s: &str) -> Result<profgen::record::Event, String> {
    profgen::record::Event::ALL.iter().find(|(n, _)| *n == s).map(|&(_, e)| e).ok_or_else(|| {
        let names: Vec<&str> = profgen::record::Event::ALL.iter().map(|(n, _)| *n).collect();
        format!("expected one of {}", names.join(", "))
    })
}

fn main() {
    let a = Args::parse();
    let opts = profgen::record::Options {
        command: a.command,
        output: a.output,
        truth: a.truth,
        period: a.period,
        event: a.event,
        lbr_cycles: a.lbr_cycles,
        no_branch_stack: a.no_branch_stack,
        seed: a.seed,
        valgrind: a.valgrind,
        truth_all: a.truth_all,
        pid_base: a.pid_base,
        no_call_stack: a.no_call_stack,
        random_start: a.random_start,
    };
    match profgen::record::record(&opts) {
        Ok(s) => {
            let secs = s.elapsed.as_secs_f64();
            eprintln!(
                "profgen-record: {} instructions, {} samples, {} process(es), {} thread(s) in {:.1}s ({:.0} instructions/s)",
                s.instructions,
                s.samples,
                s.processes,
                s.threads,
                secs,
                s.instructions as f64 / secs.max(1e-9)
            );
        }
        Err(e) => {
            eprintln!("profgen-record: error: {e:#}");
            std::process::exit(1);
        }
    }
}
