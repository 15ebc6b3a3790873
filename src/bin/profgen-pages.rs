//! `profgen-pages --binary BIN [--at-percent K]... [--at-instructions N]... -- program args...`:
//! see [`profgen::order::pages`].

use std::path::PathBuf;

use clap::Parser;

/// Counts the distinct 4 KiB code pages of a binary that a run executes before given points
/// (its first N instructions, or the first K% of them), exactly, from a valgrind lackey
/// instruction trace. Prints a table on standard output; the program's own output goes to
/// standard error.
#[derive(Parser)]
#[command(name = "profgen-pages", after_help = "Exit codes: 0 success, 1 failure, 2 bad usage.")]
struct Args {
    /// The binary whose code pages are counted (matched in the process by path or build id).
    #[arg(long)]
    binary: PathBuf,
    /// Count pages executed within the first K% of the run's instructions (repeatable).
    /// Default: 1, 5, 10, 25, 50 and 100 when no --at-instructions is given either.
    #[arg(long, value_name = "K")]
    at_percent: Vec<f64>,
    /// Count pages executed within the first N instructions (repeatable).
    #[arg(long, value_name = "N")]
    at_instructions: Vec<u64>,
    /// Stop the program after N instructions: measures the start of a long run cheaply
    /// (only --at-instructions cutoffs then).
    #[arg(long, value_name = "N", conflicts_with = "at_percent")]
    stop_after: Option<u64>,
    /// Valgrind executable.
    #[arg(long, default_value = "valgrind")]
    valgrind: String,
    /// Program and arguments.
    #[arg(required = true, trailing_var_arg = true)]
    command: Vec<String>,
}

fn main() {
    let a = Args::parse();
    if let Some(k) = a.at_percent.iter().find(|k| !(0.0..=100.0).contains(*k)) {
        eprintln!("profgen-pages: error: --at-percent {k} is not between 0 and 100");
        std::process::exit(2);
    }
    let opts = profgen::order::pages::MeasureOptions {
        binary: a.binary.clone(),
        command: a.command,
        valgrind: a.valgrind,
        stop_after: a.stop_after,
    };
    let touches = match profgen::order::pages::measure(&opts) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("profgen-pages: error: {e:#}");
            std::process::exit(1);
        }
    };
    let mut percents = a.at_percent;
    if percents.is_empty() && a.at_instructions.is_empty() && a.stop_after.is_none() {
        percents = vec![1.0, 5.0, 10.0, 25.0, 50.0, 100.0];
    }
    let total = touches.instructions();
    let stopped = if a.stop_after.is_some_and(|n| total >= n) { " (stopped there)" } else { "" };
    println!(
        "# {}: {} instructions{stopped}, {} code pages executed",
        a.binary.display(),
        total,
        touches.pages_within(total)
    );
    println!("cutoff\tinstructions\tpages");
    for k in percents {
        let n = touches.at_percent(k);
        println!("{k}%\t{n}\t{}", touches.pages_within(n));
    }
    let mut at_instructions = a.at_instructions;
    if let Some(n) = a.stop_after.filter(|n| !at_instructions.contains(n)) {
        at_instructions.push(n);
    }
    for n in at_instructions {
        println!("{n}\t{}\t{}", n.min(total), touches.pages_within(n));
    }
}
