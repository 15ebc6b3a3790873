//! What a run did: the summary line, the exit code and the `--report` JSON document.

use super::fleet::AggregateReport;
use crate::aggregate::read::{InputOutcome, InputsReport};
use crate::aggregate::samples::SampleStats;
use crate::config::{AggregateConfig, Binaries, Config};
use crate::error::Error;
use crate::json::Json;
use crate::mapping::MatchedBy;
use crate::order::OrderReport;
use crate::progress::Phase;
use std::path::Path;
use std::time::Duration;

/// What a run did, for the summary line, the `--report` file and tests.
#[derive(Debug, Default)]
pub struct RunReport {
    /// The binary's build id (hex), once it is loaded.
    pub build_id: Option<String>,
    pub inputs: InputsReport,
    pub functions_in_profile: usize,
    /// Every warning of the run, in the order the stages gave them.
    pub warnings: Vec<String>,
    /// What making the function order did, when one was written.
    pub order: Option<OrderReport>,
    /// Facts about the run that are not warnings (`note: ` lines on stderr).
    pub notes: Vec<String>,
    /// `--time-profgen`: the time-per-phase table.
    pub phase_times: Option<String>,
}

impl RunReport {
    /// One line: samples read, used, and dropped by reason; functions in the profile.
    pub fn summary_line(&self) -> String {
        format!("{}; {} functions in the profile", self.samples_line(), self.functions_in_profile)
    }

    /// The exit code of a run that wrote its output: [`EXIT_INCOMPLETE`] when an input was
    /// skipped or read only up to a cut, else 0.
    pub fn exit_code(&self) -> u8 {
        if self.inputs.skipped() + self.inputs.truncated() > 0 { EXIT_INCOMPLETE } else { 0 }
    }

    /// Inputs skipped or truncated (when any), samples read, used, and dropped by reason, and
    /// how the binary was recognised.
    pub fn samples_line(&self) -> String {
        let s = &self.inputs.samples;
        let mut dropped = Vec::new();
        for (n, why) in [
            (s.outside_binary, "outside the binary"),
            (s.no_branch_stack, "without branch stack"),
            (s.other_process, "of other processes"),
            (s.other_event, "of other events"),
        ] {
            if n > 0 {
                dropped.push(format!("{n} {why}"));
            }
        }
        let dropped_total = s.read - s.used;
        let mut line = String::from("profgen: ");
        let (skipped, truncated) = (self.inputs.skipped(), self.inputs.truncated());
        if skipped + truncated > 0 {
            line.push_str(&format!(
                "{} inputs ({skipped} skipped, {truncated} truncated); ",
                self.inputs.inputs.len()
            ));
        }
        line.push_str(&format!("{} samples read, {} used", s.read, s.used));
        if self.inputs.distinct_samples > 0 {
            line.push_str(&format!(" ({} distinct stacks)", self.inputs.distinct_samples));
        }
        line.push_str(&format!(", {dropped_total} dropped"));
        if !dropped.is_empty() {
            line.push_str(&format!(" ({})", dropped.join(", ")));
        }
        if self.inputs.not_unwound > 0 {
            line.push_str(&format!("; {} samples not unwound (stack sampled in a prolog/epilog, or no branch in the binary)", self.inputs.not_unwound));
        }
        match self.inputs.matched_by {
            Some(MatchedBy::BuildId) => line.push_str("; binary matched by build id"),
            Some(MatchedBy::FileName) => line.push_str("; binary matched by file name"),
            None => {}
        }
        if !self.inputs.weighting.is_empty() {
            line.push_str(&format!("; LBR windows {}", self.inputs.weighting.join(", ")));
        }
        line
    }
}

/// Exit code of a run that wrote its output without reading every input to its end: some were
/// skipped (`--keep-going`, or files in a `--perfdata` directory), or truncated.
pub const EXIT_INCOMPLETE: u8 = 3;

/// The `--report` document (README, "Run report"): what the run did, per input and in total,
/// how long each phase took, every warning, and how it ended.
pub(super) fn run_report_json(
    cfg: &Config,
    report: &RunReport,
    result: &Result<(), Error>,
    phases: &[(Phase, Duration)],
) -> Json {
    let mut totals = input_totals(&report.inputs);
    totals.push(("functions_in_profile", Json::Int(report.functions_in_profile as u64)));
    let (exit_code, error) = ending(result, report.exit_code());
    Json::Obj(vec![
        ("version", Json::Int(1)),
        ("exit_code", exit_code),
        ("error", error),
        (
            "binary",
            Json::Obj(vec![
                (
                    "path",
                    match &cfg.binaries {
                        Binaries::One(p) | Binaries::Store(p) => path_json(p),
                    },
                ),
                ("build_id", report.build_id.clone().map_or(Json::Null, Json::Str)),
            ]),
        ),
        ("output", path_json(&cfg.output.path)),
        ("inputs", inputs_json(&report.inputs)),
        ("totals", Json::Obj(totals)),
        ("phases", phases_json(phases)),
        ("warnings", strings_json(&report.warnings)),
    ])
}

/// The `profgen aggregate --report` document (README, "Run report"): the run report's keys per
/// binary aggregated, and how the run ended.
pub(super) fn aggregate_report_json(
    cfg: &AggregateConfig,
    report: &AggregateReport,
    result: &Result<(), Error>,
    phases: &[(Phase, Duration)],
) -> Json {
    let binaries = report.binaries.iter().map(|b| {
        let r = &b.report;
        Json::Obj(vec![
            ("name", Json::Str(b.name.clone())),
            ("build_id", r.build_id.clone().map_or(Json::Null, Json::Str)),
            ("inputs", inputs_json(&r.inputs)),
            ("totals", Json::Obj(input_totals(&r.inputs))),
            ("warnings", strings_json(&r.warnings)),
        ])
    });
    let (exit_code, error) = ending(result, report.exit_code());
    Json::Obj(vec![
        ("version", Json::Int(1)),
        ("exit_code", exit_code),
        ("error", error),
        ("output", path_json(&cfg.output)),
        ("binaries", Json::Arr(binaries.collect())),
        (
            "inputs_skipped",
            Json::Arr(
                report
                    .skipped
                    .iter()
                    .map(|(p, why)| {
                        Json::Obj(vec![("path", path_json(p)), ("error", Json::Str(why.clone()))])
                    })
                    .collect(),
            ),
        ),
        ("executables_not_in_store", Json::Int(report.unprofiled as u64)),
        ("phases", phases_json(phases)),
        ("warnings", strings_json(&report.warnings)),
    ])
}

fn path_json(p: &Path) -> Json {
    Json::Str(p.display().to_string())
}

fn strings_json(v: &[String]) -> Json {
    Json::Arr(v.iter().cloned().map(Json::Str).collect())
}

fn matched_json(m: Option<MatchedBy>) -> Json {
    match m {
        Some(MatchedBy::BuildId) => Json::Str("build_id".into()),
        Some(MatchedBy::FileName) => Json::Str("file_name".into()),
        None => Json::Null,
    }
}

fn samples_json(s: &SampleStats) -> Json {
    Json::Obj(vec![
        ("read", Json::Int(s.read)),
        ("used", Json::Int(s.used)),
        (
            "dropped",
            Json::Obj(vec![
                ("outside_binary", Json::Int(s.outside_binary)),
                ("without_branch_stack", Json::Int(s.no_branch_stack)),
                ("other_process", Json::Int(s.other_process)),
                ("other_event", Json::Int(s.other_event)),
            ]),
        ),
    ])
}

/// One object per input: how it was read, its samples, binary match and warnings.
fn inputs_json(report: &InputsReport) -> Json {
    let inputs = report.inputs.iter().map(|i| {
        let (status, error, truncated) = match &i.outcome {
            InputOutcome::Read => ("read", Json::Null, Json::Null),
            InputOutcome::Truncated(t) => (
                "truncated",
                Json::Null,
                Json::Obj(vec![
                    ("offset", Json::Int(t.offset)),
                    ("reason", Json::Str(t.reason.clone())),
                ]),
            ),
            InputOutcome::Skipped(e) => ("skipped", Json::Str(e.clone()), Json::Null),
            InputOutcome::Failed(e) => ("failed", Json::Str(e.clone()), Json::Null),
        };
        Json::Obj(vec![
            ("path", path_json(&i.path)),
            ("status", Json::Str(status.into())),
            ("error", error),
            ("truncated_at", truncated),
            ("samples", samples_json(&i.samples)),
            ("binary_matched_by", matched_json(i.matched_by)),
            ("warnings", strings_json(&i.warnings)),
        ])
    });
    Json::Arr(inputs.collect())
}

/// The totals over the inputs: how many ended how, samples, stacks and the binary match.
fn input_totals(report: &InputsReport) -> Vec<(&'static str, Json)> {
    let count = |status: fn(&InputOutcome) -> bool| {
        Json::Int(report.inputs.iter().filter(|i| status(&i.outcome)).count() as u64)
    };
    vec![
        (
            "inputs",
            Json::Obj(vec![
                ("total", Json::Int(report.inputs.len() as u64)),
                ("read", count(|o| matches!(o, InputOutcome::Read))),
                ("truncated", count(|o| matches!(o, InputOutcome::Truncated(_)))),
                ("skipped", count(|o| matches!(o, InputOutcome::Skipped(_)))),
                ("failed", count(|o| matches!(o, InputOutcome::Failed(_)))),
            ]),
        ),
        ("samples", samples_json(&report.samples)),
        ("distinct_stacks", Json::Int(report.distinct_samples as u64)),
        ("samples_not_unwound", Json::Int(report.not_unwound)),
        ("binary_matched_by", matched_json(report.matched_by)),
    ]
}

fn phases_json(phases: &[(Phase, Duration)]) -> Json {
    let phases = phases.iter().map(|(phase, t)| {
        Json::Obj(vec![
            ("name", Json::Str(phase.name().to_string())),
            ("seconds", Json::Num(t.as_secs_f64())),
        ])
    });
    Json::Arr(phases.collect())
}

/// `(exit_code, error)` of a run that ended with `result`; `written` is the exit code when it
/// wrote its output.
fn ending(result: &Result<(), Error>, written: u8) -> (Json, Json) {
    match result {
        Ok(()) => (Json::Int(u64::from(written)), Json::Null),
        Err(e) => (Json::Int(e.exit_code() as u64), Json::Str(e.to_string())),
    }
}
