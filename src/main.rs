//! `profgen`: thin command-line front end over the library (see `profgen::driver`).

use profgen::config::Command;
use std::process::ExitCode;

fn main() -> ExitCode {
    let command = match profgen::cli::parse(std::env::args_os()) {
        Ok(command) => command,
        Err(e) => {
            let _ = e.print();
            // clap uses 0 for --help/--version and 2 for usage errors.
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    let result = match &command {
        Command::Profile(cfg) => profgen::driver::run(cfg).map(|report| {
            let summary = cfg.input.is_some() && !cfg.show_disassembly_only;
            (summary.then(|| report.summary_line()), report)
        }),
        Command::Order(cfg) => profgen::driver::run_order(cfg)
            .map(|report| (cfg.input.is_some().then(|| report.samples_line()), report)),
    };
    match result {
        Ok((summary, report)) => {
            for w in &report.warnings {
                eprintln!("warning: {w}");
            }
            if let Some(line) = summary {
                eprintln!("{line}");
            }
            if let Some(order) = &report.order {
                eprintln!("{}", order.summary_line());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("profgen: error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
