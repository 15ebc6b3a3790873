//! `profgen order` and `--order-output`: temporal traces read like a profile run's inputs, sampled
//! and ordered into an lld symbol-ordering file.

use super::report::RunReport;
use super::{on_threads, reporter};
use crate::aggregate;
use crate::aggregate::read::ReadOptions;
use crate::aggregate::traces::{FunctionTable, TemporalTraces};
use crate::binary::Binary;
use crate::config::OrderConfig;
use crate::error::Error;
use crate::input::read_file;
use crate::order::reservoir::TraceSample;
use crate::order::{OrderOptions, offer_traces, order_file};
use crate::writer;
use std::path::Path;

/// `profgen order` on `cfg.threads` worker threads: the inputs' temporal traces and the saved
/// ones, sampled together, then the order and/or the sample written.
pub fn run_order(cfg: &OrderConfig) -> Result<RunReport, Error> {
    let reporter = reporter(cfg.read.progress, None);
    let read = ReadOptions { reporter: reporter.clone(), ..cfg.read.clone() };
    let result = on_threads(cfg.threads, || order(cfg, &read));
    reporter.finish();
    result.map(|(mut report, note)| {
        report.warnings.splice(0..0, note);
        report
    })
}

fn order(cfg: &OrderConfig, read: &ReadOptions) -> Result<RunReport, Error> {
    let binary = Binary::load(&cfg.binary, &Default::default())?;
    let mut report = RunReport { warnings: binary.warnings().to_vec(), ..Default::default() };
    let mut sample = TraceSample::new(cfg.options.sampling);
    for path in &cfg.traces {
        let saved = TraceSample::read(&read_file(path)?, path)?;
        sample.merge(saved).map_err(|what| Error::BadFile { path: path.clone(), what })?;
    }
    let table = match &cfg.input {
        Some(input) => {
            let threads = rayon::current_num_threads();
            let mut inputs = aggregate::read::read_traces(&binary, input, read, threads)?;
            report.warnings.append(&mut inputs.warnings);
            let TemporalTraces { table, traces } =
                inputs.traces.take().expect("profgen order reads temporal traces");
            offer_traces(&mut sample, &table, traces);
            report.inputs = inputs;
            table
        }
        None => FunctionTable::of_binary(&binary),
    };
    write_order(
        &sample,
        &table,
        &cfg.options,
        cfg.output.as_deref(),
        cfg.write_traces.as_deref(),
        &mut report,
    )?;
    Ok(report)
}

/// Writes the order of `table`'s functions by `sample` to `order_path` and the sample itself to
/// `traces_path`, each when given.
pub fn write_order(
    sample: &TraceSample,
    table: &FunctionTable,
    opts: &OrderOptions,
    order_path: Option<&Path>,
    traces_path: Option<&Path>,
    report: &mut RunReport,
) -> Result<(), Error> {
    if let Some(path) = traces_path {
        writer::write_bytes_atomically(sample.write().as_bytes(), path)?;
    }
    if let Some(path) = order_path {
        let (text, order) = order_file(sample, table, opts);
        if order.traces == 0 {
            report.warnings.push(format!(
                "no temporal trace (no sample landed in a function of the binary): {} lists the \
                 functions in their original order",
                path.display()
            ));
        }
        writer::write_bytes_atomically(text.as_bytes(), path)?;
        report.order = Some(order);
    }
    Ok(())
}
