//! `profgen`: thin command-line front end over the library (see `profgen::driver`).

use profgen::config::{Binaries, Command};
use profgen::driver::RunReport;
use std::process::ExitCode;

/// jemalloc instead of glibc malloc: each thread allocates and frees through a cache of its own
/// (glibc makes a thread wait on another's arena lock for every free of memory that thread
/// allocated: unwinding's merged counters, the CS builds' leaves, the post-passes' buffers), and
/// freed pages are reused rather than trimmed and faulted in again (SQLite CS minor faults 57k ->
/// 40k). Alternating runs: Lua CS -5% at one thread, -9% at two; SQLite CS -9%, -12%.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start (`_RJEM_MALLOC_CONF` in the environment still applies
/// after them). One arena for all threads: what one phase's threads free, the next phase's
/// threads reuse, as the arenas trimmed between phases do with glibc
/// ([`profgen::aggregate::read::release_freed_heap`]); with jemalloc's default (four arenas per
/// core) SQLite CS peaks at ~120 MiB, with two at 110-114, with one at 103-105 (glibc ~95).
#[cfg(not(target_env = "msvc"))]
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8; 10] = b"narenas:1\0";

fn main() -> ExitCode {
    profgen::aggregate::read::map_large_allocations();
    let command = match profgen::cli::parse(std::env::args_os()) {
        Ok(command) => command,
        Err(e) => {
            let _ = e.print();
            // clap uses 0 for --help/--version and 2 for usage errors.
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    // --quiet: warnings and errors only.
    let quiet = matches!(&command, Command::Profile(cfg) if cfg.run.quiet);
    let print_run = |report: &RunReport, summary: Option<String>| {
        print_run(report, summary.filter(|_| !quiet), quiet)
    };
    // Ok: the exit code of a run that wrote its output (0, or 3 when inputs were skipped).
    let result = match &command {
        Command::Profile(cfg) => match cfg.binaries {
            Binaries::One(_) => {
                // The run's warnings are printed also when it fails.
                let (report, result) = profgen::driver::run(cfg);
                let summary = cfg.input.is_some() && !cfg.show_disassembly_only && result.is_ok();
                print_run(&report, summary.then(|| report.summary_line()));
                result.map(|()| report.exit_code())
            }
            Binaries::Store(_) => profgen::driver::run_store(cfg).map(|reports| {
                let mut written = 0;
                for b in &reports {
                    let r = &b.report;
                    let line = (r.inputs.samples.read > 0).then(|| named(&b.name, r.summary_line()));
                    written += usize::from(line.is_some());
                    print_run(r, line);
                }
                eprintln!("profgen: {written} profiles written");
                0
            }),
        },
        Command::Order(cfg) => profgen::driver::run_order(cfg).map(|report| {
            print_run(&report, cfg.input.is_some().then(|| report.samples_line()));
            report.exit_code()
        }),
        Command::Aggregate(cfg) => profgen::driver::run_aggregate(cfg).map(|r| {
            for w in &r.warnings {
                eprintln!("warning: {w}");
            }
            for b in &r.binaries {
                print_run(&b.report, Some(named(&b.name, b.report.samples_line())));
            }
            if r.unprofiled > 0 {
                eprintln!(
                    "profgen: {} executables mapped by the inputs are not in the binary store (listed in the aggregate)",
                    r.unprofiled
                );
            }
            r.exit_code()
        }),
        Command::Remap(cfg) => profgen::driver::remap(cfg).map(|(r, warnings)| {
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            eprintln!("{}", r.summary_line());
            0
        }),
        Command::Merge(cfg) => profgen::driver::run_merge(cfg).map(|r| {
            eprintln!(
                "profgen: merged {} aggregates of {} inputs: {} binaries",
                r.inputs, r.perf_inputs, r.binaries
            );
            0
        }),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("profgen: error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

/// A run's warnings, then its summary line and the function order's.
fn print_run(report: &RunReport, summary: Option<String>, quiet: bool) {
    if !quiet {
        for n in &report.notes {
            eprintln!("note: {n}");
        }
    }
    for w in &report.warnings {
        eprintln!("warning: {w}");
    }
    if let Some(line) = summary {
        eprintln!("{line}");
    }
    if let Some(order) = &report.order {
        eprintln!("{}", order.summary_line());
    }
    if let Some(times) = &report.phase_times {
        eprint!("{times}");
    }
}

/// `profgen: NAME: …` from a summary line `profgen: …`.
fn named(name: &str, line: String) -> String {
    match line.strip_prefix("profgen: ") {
        Some(rest) => format!("profgen: {name}: {rest}"),
        None => line,
    }
}
