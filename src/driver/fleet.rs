//! The fleet commands: `profgen aggregate` stops a profile run after the counters and writes
//! them per binary, `profgen merge` sums aggregate files, and a profile run over a binary store
//! writes one profile per binary the aggregates have samples of.

use super::report::{EXIT_INCOMPLETE, RunReport, aggregate_report_json};
use super::{finish_profile, on_threads, read_counters, reporter};
use crate::aggregate::pga::{Aggregate, BinaryAggregate, BinaryKey};
use crate::aggregate::read::{Input, ReadOptions, counting_options};
use crate::binary::store::{BinaryStore, StoredBinary};
use crate::binary::{Binary, LoadOptions, hex};
use crate::config::{AggregateConfig, Binaries, Config, MergeConfig, OutputOptions};
use crate::error::Error;
use crate::input::InputFile;
use crate::input::perf_data::MappedFile;
use crate::mapping::file_name_of;
use crate::profile;
use crate::progress::{Phase, PhaseTimer};
use crate::writer;
use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;

/// One binary's part of a fleet command: which binary and what its run did.
#[derive(Debug)]
pub struct BinaryReport {
    /// The profile written (profile runs), or the binary's name and build id (aggregates).
    pub name: String,
    pub report: RunReport,
}

/// What `profgen aggregate` did.
#[derive(Debug, Default)]
pub struct AggregateReport {
    /// Per binary aggregated, in the order of the aggregate file.
    pub binaries: Vec<BinaryReport>,
    /// Executables the inputs map that the binary store does not have.
    pub unprofiled: usize,
    /// Input files skipped before the binaries were read (they could not be listed or parsed),
    /// with why.
    pub skipped: Vec<(PathBuf, String)>,
    pub warnings: Vec<String>,
}

impl AggregateReport {
    /// 0, or [`EXIT_INCOMPLETE`] when an input was skipped or truncated.
    pub fn exit_code(&self) -> u8 {
        let runs = self.binaries.iter().map(|b| b.report.exit_code());
        if self.skipped.is_empty() { runs.max().unwrap_or(0) } else { EXIT_INCOMPLETE }
    }
}

/// `profgen aggregate`: reads the inputs into counters for each binary (as a profile run would,
/// up to [`read_counters`]) and writes them as an aggregate file. With `cfg.report` the JSON
/// report is also written, when the run fails too.
pub fn run_aggregate(cfg: &AggregateConfig) -> Result<AggregateReport, Error> {
    let timer = cfg.report.is_some().then(|| Arc::new(PhaseTimer::default()));
    let reporter = reporter(cfg.read.progress, timer.clone());
    let mut with_progress = cfg.clone();
    with_progress.read.reporter = reporter.clone();
    let mut report = AggregateReport::default();
    let result = on_threads(cfg.threads, || aggregate(&with_progress, &mut report));
    reporter.finish();
    let mut result = result.map(|((), note)| {
        report.warnings.splice(0..0, note);
    });
    if let (Some(path), Some(timer)) = (&cfg.report, &timer) {
        let json = aggregate_report_json(cfg, &report, &result, &timer.times()).pretty();
        if let Err(e) = writer::write_bytes_atomically(json.as_bytes(), path) {
            result = result.and(Err(e));
        }
    }
    result.map(|()| report)
}

fn aggregate(cfg: &AggregateConfig, report: &mut AggregateReport) -> Result<(), Error> {
    let options = counting_options(&cfg.read, cfg.load.use_dwarf_correlation);
    let mut out = Aggregate::new(options);
    let jobs: Vec<(StoredBinary, String, Input)> = match (&cfg.binaries, &cfg.input) {
        (Binaries::One(path), input) => {
            let stored = StoredBinary { path: path.clone(), debug: cfg.load.debug_binary.clone() };
            vec![(stored, file_name_of(path), input.clone())]
        }
        (Binaries::Store(dir), Input::PerfData(given)) => {
            let store = BinaryStore::open(dir)?;
            let skipped = store.skipped.iter().map(|e| format!("binary store: skipped {e}"));
            report.warnings.extend(skipped);
            let files = crate::input::perf_data::list_perf_data_files(given);
            let found = binaries_of_inputs(&store, files, &cfg.read, &mut out, report)?;
            report.unprofiled = out.unprofiled.len();
            found.into_iter().map(|(b, name, files)| (b, name, Input::PerfData(files))).collect()
        }
        (Binaries::Store(_), _) => {
            return Err(Error::Usage("--binaries reads perf.data files (--perfdata)".into()));
        }
    };
    for (stored, name, input) in jobs {
        let load = LoadOptions { debug_binary: stored.debug.clone(), ..cfg.load.clone() };
        cfg.read.reporter.phase(Phase::Loading);
        let binary = Binary::load(&stored.path, &load)?;
        let mut run = RunReport {
            build_id: binary.build_id().map(hex),
            warnings: binary.warnings().to_vec(),
            ..Default::default()
        };
        cfg.read.reporter.phase(Phase::Reading);
        let threads = rayon::current_num_threads();
        let counters = match read_counters(&binary, &input, &cfg.read, threads, &mut run) {
            Ok(counters) => counters,
            Err(e) => {
                report.binaries.push(BinaryReport { name, report: run });
                return Err(e);
            }
        };
        let key = match binary.build_id() {
            Some(id) => BinaryKey::BuildId(crate::binary::unpadded_build_id(id).to_vec()),
            None => BinaryKey::FileName(name.clone()),
        };
        let inputs = (run.inputs.inputs.len() - run.inputs.skipped()) as u64;
        if matches!(cfg.binaries, Binaries::One(_)) {
            out.inputs = inputs;
        }
        let i = &run.inputs;
        let entry = BinaryAggregate {
            file_name: name.clone(),
            inputs,
            matched_by: i.matched_by,
            samples: i.samples.clone(),
            distinct_samples: i.distinct_samples as u64,
            normalize: i.normalize.clone(),
            unwind: i.unwind.clone(),
            counters,
        };
        let shown = format!("{name} ({})", key.describe());
        match out.binaries.get_mut(&key) {
            Some(mine) => mine.merge(entry),
            None => {
                out.binaries.insert(key, entry);
            }
        }
        report.binaries.push(BinaryReport { name: shown, report: run });
    }
    cfg.read.reporter.phase(Phase::Writing);
    writer::write_bytes_atomically(&out.encode(), &cfg.output)
}

/// Which binaries of `store` the perf.data `files` map, each with the file name it is mapped
/// under and the files that map it; the executables the store does not have go to
/// `out.unprofiled`. A file that cannot be read is skipped or fails the run as
/// `read.keep_going` says; `out.inputs` counts the others.
fn binaries_of_inputs(
    store: &BinaryStore,
    mut files: Vec<InputFile>,
    read: &ReadOptions,
    out: &mut Aggregate,
    report: &mut AggregateReport,
) -> Result<Vec<(StoredBinary, String, Vec<PathBuf>)>, Error> {
    use rayon::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};
    let mapped: Vec<Result<Vec<MappedFile>, Error>> = files
        .par_iter_mut()
        .map(|f| {
            if let Some(e) = f.unusable.take() {
                return Err(e);
            }
            let map = crate::input::perf_data::map_file(&f.path)?;
            crate::input::perf_data::PerfData::parse(&map, &f.path)?.mapped_executables()
        })
        .collect();
    let warnings = &mut report.warnings;
    let mut by_binary: BTreeMap<PathBuf, (StoredBinary, String, Vec<PathBuf>)> = BTreeMap::new();
    for (input, mapped) in files.iter().zip(mapped) {
        let mapped = match mapped {
            Ok(mapped) => mapped,
            Err(e) => {
                let why = e.to_string();
                warnings.push(read.keep_going.skip(input, e)?);
                report.skipped.push((input.path.clone(), why));
                continue;
            }
        };
        out.inputs += 1;
        let file = &input.path;
        let mut here = BTreeSet::new();
        for MappedFile { path, build_id: id } in mapped {
            let name = path.rsplit('/').next().unwrap_or(&path).to_string();
            match store.find(id.as_deref(), &name) {
                Some(b) => {
                    if here.insert(b.path.clone()) {
                        let entry = by_binary
                            .entry(b.path.clone())
                            .or_insert_with(|| (b, name, Vec::new()));
                        entry.2.push(file.clone());
                    }
                }
                None => {
                    if id.is_none() && store.count_named(&name) > 1 {
                        warnings.push(format!(
                            "{}: {path} has no build id, and {} binaries of the store are called {name}: not profiled",
                            file.display(),
                            store.count_named(&name)
                        ));
                    }
                    let id = id.as_deref().map(crate::binary::unpadded_build_id).unwrap_or(&[]);
                    *out.unprofiled.entry((id.to_vec(), path)).or_default() += 1;
                }
            }
        }
    }
    Ok(by_binary.into_values().collect())
}

/// What `profgen merge` did.
#[derive(Debug, Default)]
pub struct MergeReport {
    pub inputs: usize,
    pub binaries: usize,
    /// Input files the merged aggregates were made from.
    pub perf_inputs: u64,
}

/// `profgen merge`: sums aggregate files (one at a time: memory holds the result and one input).
pub fn run_merge(cfg: &MergeConfig) -> Result<MergeReport, Error> {
    let merged = Aggregate::read_merged(&cfg.inputs, None)?.unwrap_or_default();
    writer::write_bytes_atomically(&merged.encode(), &cfg.output)?;
    Ok(MergeReport {
        inputs: cfg.inputs.len(),
        binaries: merged.binaries.len(),
        perf_inputs: merged.inputs,
    })
}

/// A profile run over a binary store (`--binaries DIR --output-dir OUT`): for each binary the
/// aggregates have samples of and the store has, its profile, `OUT/NAME-BUILDID.prof`.
pub fn run_store(cfg: &Config) -> Result<Vec<BinaryReport>, Error> {
    let (mut reports, note) = on_threads(cfg.threads, || generate_store(cfg))?;
    if let (Some(note), Some(first)) = (note, reports.first_mut()) {
        first.report.warnings.insert(0, note);
    }
    Ok(reports)
}

fn generate_store(cfg: &Config) -> Result<Vec<BinaryReport>, Error> {
    let (Binaries::Store(dir), Some(Input::Aggregate(paths))) = (&cfg.binaries, &cfg.input) else {
        return Err(Error::Usage("--binaries profiles aggregates (--aggregate)".into()));
    };
    let store = BinaryStore::open(dir)?;
    let merged = Aggregate::read_merged(paths, None)?.unwrap_or_default();
    let out_dir = &cfg.output.path;
    std::fs::create_dir_all(out_dir)
        .map_err(|source| Error::Io { path: out_dir.clone(), source })?;
    let mut reports = Vec::new();
    for (key, entry) in &merged.binaries {
        if entry.samples.used == 0 {
            continue;
        }
        let id = match key {
            BinaryKey::BuildId(id) => Some(&id[..]),
            BinaryKey::FileName(_) => None,
        };
        let Some(stored) = store.find(id, &entry.file_name) else {
            reports.push(BinaryReport {
                name: entry.file_name.clone(),
                report: RunReport {
                    warnings: vec![format!(
                        "{} ({}): not in the binary store {}; no profile written",
                        entry.file_name,
                        key.describe(),
                        dir.display()
                    )],
                    ..Default::default()
                },
            });
            continue;
        };
        let load = LoadOptions { debug_binary: stored.debug.clone(), ..cfg.load.clone() };
        let binary = Binary::load(&stored.path, &load)?;
        let mut report = RunReport { warnings: binary.warnings().to_vec(), ..Default::default() };
        let (mut counters, mut inputs) =
            crate::aggregate::read::counters_from_aggregate(&binary, &merged, paths, &cfg.read)?;
        counters.apply_weights();
        report.warnings.append(&mut inputs.warnings);
        report.inputs = inputs;
        let (profile, sampled) = profile::generate_beside(
            &binary,
            Cow::Owned(counters),
            &cfg.profile,
            &mut report.warnings,
            |counters| crate::postpass::sampled(&binary, counters, &cfg.output.postpass),
        );
        let name = match id {
            Some(id) => format!("{}-{}.prof", entry.file_name, hex(id)),
            None => format!("{}.prof", entry.file_name),
        };
        let output = OutputOptions { path: out_dir.join(name), ..cfg.output.clone() };
        finish_profile(&binary, sampled, profile, &output, &mut report)?;
        reports.push(BinaryReport { name: output.path.display().to_string(), report });
    }
    Ok(reports)
}
