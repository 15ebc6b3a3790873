//! `profgen`: thin command-line front end over the library (see `profgen::driver`).

use std::process::ExitCode;

fn main() -> ExitCode {
    let cfg = match profgen::cli::parse(std::env::args_os()) {
        Ok(cfg) => cfg,
        Err(e) => {
            let _ = e.print();
            // clap uses 0 for --help/--version and 2 for usage errors.
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    match profgen::driver::run(&cfg) {
        Ok(report) => {
            for w in &report.warnings {
                eprintln!("warning: {w}");
            }
            if cfg.input.is_some() && !cfg.show_disassembly_only {
                eprintln!("{}", report.summary_line());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("profgen: error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}
