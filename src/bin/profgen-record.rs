//! `profgen-record [options] -- program args...`: see [`profgen::record`].

use std::path::PathBuf;

use clap::Parser;

/// Records `perf record -e cycles:u -b --call-graph fp`-like perf.data in software (valgrind
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
    /// Mean instructions between samples (jittered ±1/8).
    #[arg(long, default_value_t = 10007)]
    period: u64,
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
    /// Program and arguments.
    #[arg(required = true, trailing_var_arg = true)]
    command: Vec<String>,
}

fn main() {
    let a = Args::parse();
    let opts = profgen::record::Options {
        command: a.command,
        output: a.output,
        truth: a.truth,
        period: a.period,
        seed: a.seed,
        valgrind: a.valgrind,
        truth_all: a.truth_all,
        pid_base: a.pid_base,
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
