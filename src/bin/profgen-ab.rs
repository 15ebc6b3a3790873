//! `profgen-ab [options] --base CMD --experiment NAME=CMD -- BENCH {exe} ARGS...`: see
//! [`profgen::ab`]. Exit codes: 0 report written, 1 a build, run or measurement failed,
//! 2 bad usage.

use std::path::PathBuf;

use clap::Parser;
use profgen::ab;

/// Compares builds of a program over counterfactual link layouts with interleaved, paired,
/// calibrated timing and cachegrind counts.
#[derive(Parser)]
#[command(name = "profgen-ab")]
struct Args {
    /// Base build command (run by `sh -c`): `{exe}` is the binary to write, `{ldflags}` link
    /// flags that must reach lld, `{dir}` a folder of this build kept across layouts.
    #[arg(long)]
    base: String,
    /// Experiment build, `NAME=COMMAND` (or just COMMAND); repeatable: every experiment is
    /// compared with the base in the same interleaved rounds.
    #[arg(long = "experiment", required = true)]
    experiments: Vec<String>,
    /// Counterfactual layouts (padding seeds 1..=N); 0 compares the default layouts only.
    #[arg(long, default_value_t = 5)]
    layouts: usize,
    /// Timed trials of every build per layout.
    #[arg(long, default_value_t = 10)]
    trials: usize,
    /// Working folder (builds, layouts, cachegrind files).
    #[arg(long, default_value = "profgen-ab-work")]
    work: PathBuf,
    /// CPU to pin timed runs to (`none`: not pinned; default: the last CPU).
    #[arg(long)]
    cpu: Option<String>,
    /// Skip the timed runs (cachegrind counts only).
    #[arg(long)]
    no_time: bool,
    /// Skip cachegrind (timed runs only).
    #[arg(long)]
    no_sim: bool,
    /// Confidence level of the intervals.
    #[arg(long, default_value_t = 0.95)]
    confidence: f64,
    /// Upper bound of the segment-start padding (lld's max-page-size on x86-64).
    #[arg(long, default_value_t = 4096)]
    max_page_size: u64,
    /// Compiler used to assemble the padding object.
    #[arg(long, default_value = "clang-19")]
    cc: String,
    #[arg(long, default_value = "valgrind")]
    valgrind: String,
    /// Also write the Markdown report here (it always goes to stdout).
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Write the JSON report here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long)]
    quiet: bool,
    /// Benchmark command; `{exe}` is replaced by each build's binary.
    #[arg(required = true, trailing_var_arg = true)]
    bench: Vec<String>,
}

fn usage(msg: &str) -> ! {
    eprintln!("profgen-ab: error: {msg}");
    std::process::exit(2);
}

fn main() {
    let a = Args::parse();
    let cpu = match a.cpu.as_deref() {
        Some("none") => None,
        Some(c) => Some(
            c.parse()
                .unwrap_or_else(|_| usage(&format!("--cpu {c:?}: not a CPU number or `none`"))),
        ),
        None => Some(std::thread::available_parallelism().map_or(0, |n| n.get() - 1)),
    };
    if !(a.confidence > 0.0 && a.confidence < 1.0) {
        usage("--confidence must be between 0 and 1");
    }
    if a.no_time && a.no_sim {
        usage("--no-time and --no-sim leave nothing to measure");
    }
    let mut builds = vec![ab::Build { name: "base".into(), template: a.base }];
    for (i, e) in a.experiments.iter().enumerate() {
        let (name, template) = match e.split_once('=') {
            Some((n, t)) if !n.is_empty() && !n.contains(char::is_whitespace) => {
                (n.to_string(), t.to_string())
            }
            _ if a.experiments.len() == 1 => ("experiment".to_string(), e.clone()),
            _ => (format!("experiment{}", i + 1), e.clone()),
        };
        builds.push(ab::Build { name, template });
    }
    let opts = ab::Options {
        builds,
        bench: a.bench,
        layouts: a.layouts,
        trials: a.trials,
        work: a.work,
        cpu,
        time: !a.no_time,
        simulate: !a.no_sim,
        confidence: a.confidence,
        max_page_size: a.max_page_size,
        cc: a.cc,
        valgrind: a.valgrind,
        progress: !a.quiet,
    };
    if let Err(e) = ab::check_options(&opts) {
        usage(&format!("{e:#}"));
    }
    let run = match ab::run(&opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("profgen-ab: error: {e:#}");
            std::process::exit(1);
        }
    };
    let comparisons = ab::report::compare(&run);
    let md = ab::report::markdown(&run, &comparisons);
    print!("{md}");
    for (path, text) in [(a.markdown, md), (a.json, ab::report::json(&run, &comparisons))] {
        if let Some(p) = path
            && let Err(e) = std::fs::write(&p, text)
        {
            eprintln!("profgen-ab: error: writing {}: {e}", p.display());
            std::process::exit(1);
        }
    }
}
