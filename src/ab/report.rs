//! Turns a [`Run`] into comparisons (paired percentage differences with intervals and a verdict),
//! a Markdown report and a JSON document.

use std::fmt::Write as _;

use super::Run;
use super::stats::Summary;
use crate::json::Json as J;

/// One metric of one experiment against the base.
#[derive(Clone, Debug)]
pub struct Metric {
    pub name: &'static str,
    pub unit: &'static str,
    pub base_mean: f64,
    pub experiment_mean: f64,
    /// Percentage differences (experiment - base) / base: every pair (timing: N layouts × M
    /// trials; simulator: one per layout).
    pub pairs: Summary,
    /// The mean difference of each layout, summarised over layouts: the interval that also
    /// carries the variation between layouts.
    pub layouts: Summary,
    pub verdict: String,
}

#[derive(Clone, Debug)]
pub struct Comparison {
    pub experiment: String,
    pub metrics: Vec<Metric>,
}

/// Wall time of one run less the empty command's start-up cost.
fn wall(run: &Run, t: &super::Timed) -> f64 {
    t.wall - run.calibration.as_ref().map_or(0.0, |c| c.empty_wall)
}

fn cpu(run: &Run, t: &super::Timed) -> f64 {
    t.cpu - run.calibration.as_ref().map_or(0.0, |c| c.empty_cpu)
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// The smallest timing effect (percent of the base's mean time) the instruments resolve, for
/// wall time (`cpu` false) or CPU time: the clock's resolution and overhead plus the
/// uncertainty (95% interval half-width) of the start-up cost subtracted from every run. Below
/// it a difference could come from the instruments rather than from the program.
pub fn noise_floor(run: &Run, cpu_time: bool) -> Option<f64> {
    let c = run.calibration.as_ref()?;
    let get = if cpu_time { cpu } else { wall };
    let base: Vec<f64> =
        run.measured.iter().flat_map(|l| &l[0].timed).map(|t| get(run, t)).collect();
    if base.is_empty() {
        return None;
    }
    let sd = if cpu_time { c.empty_cpu_sd } else { c.empty_wall_sd };
    let n = c.empty_runs.max(2) as f64;
    let startup = super::stats::t_quantile(0.975, n - 1.0) * sd / n.sqrt();
    let clock = if cpu_time { 1e-6 } else { (c.timer_resolution_ns + c.timer_overhead_ns) * 1e-9 };
    Some(100.0 * (clock + startup) / mean(&base))
}

/// The verdict on a difference: significant only when the interval over all pairs and, with
/// two layouts or more, the interval over the per-layout means both exclude 0 (pairs from one
/// layout are not independent, so the first alone is too narrow when layouts matter), and the
/// mean is above the noise floor.
fn verdict(
    pairs: &Summary,
    layouts: &Summary,
    floor: Option<f64>,
    lower: &str,
    higher: &str,
) -> String {
    match pairs.ci {
        None => "no interval (needs at least 2 samples)".into(),
        Some(_) if pairs.includes(0.0) || layouts.includes(0.0) => {
            "no significant difference".into()
        }
        Some(_) if floor.is_some_and(|f| pairs.mean.abs() < f) => {
            format!("below the noise floor ({:.2}%)", floor.unwrap_or(0.0))
        }
        Some(_) if pairs.mean < 0.0 => format!("{lower} by {:.2}%", -pairs.mean),
        Some(_) => format!("{higher} by {:.2}%", pairs.mean),
    }
}

pub fn compare(run: &Run) -> Vec<Comparison> {
    let conf = run.options.confidence;
    let pct = |b: f64, e: f64| 100.0 * (e - b) / b;
    let mut out = Vec::new();
    for (ei, b) in run.options.builds.iter().enumerate().skip(1) {
        let mut metrics = Vec::new();
        type Get = fn(&Run, &super::Timed) -> f64;
        if run.calibration.is_some() {
            for (name, get, is_cpu) in
                [("wall time", wall as Get, false), ("CPU time", cpu as Get, true)]
            {
                let floor = noise_floor(run, is_cpu);
                let (mut pairs, mut per_layout, mut bs, mut es) = (vec![], vec![], vec![], vec![]);
                for l in &run.measured {
                    let d: Vec<f64> = l[0]
                        .timed
                        .iter()
                        .zip(&l[ei].timed)
                        .map(|(x, y)| pct(get(run, x), get(run, y)))
                        .collect();
                    bs.extend(l[0].timed.iter().map(|t| get(run, t)));
                    es.extend(l[ei].timed.iter().map(|t| get(run, t)));
                    per_layout.push(mean(&d));
                    pairs.extend(d);
                }
                let pairs = Summary::of(&pairs, conf);
                let layouts = Summary::of(&per_layout, conf);
                let verdict =
                    verdict(&pairs, &layouts, floor, "experiment faster", "experiment slower");
                metrics.push(Metric {
                    name,
                    unit: "s",
                    base_mean: mean(&bs),
                    experiment_mean: mean(&es),
                    pairs,
                    layouts,
                    verdict,
                });
            }
        }
        if run.measured.iter().all(|l| l[0].sim.is_some() && l[ei].sim.is_some())
            && !run.measured.is_empty()
        {
            type SimGet = fn(&super::Simulated) -> u64;
            for (name, get) in [
                ("instructions (cachegrind)", (|s| s.instructions) as SimGet),
                ("branch mispredictions (cachegrind)", |s| s.mispredictions),
            ] {
                let v = |bi: usize| -> Vec<f64> {
                    run.measured.iter().map(|l| get(&l[bi].sim.unwrap()) as f64).collect()
                };
                let (bv, ev) = (v(0), v(ei));
                let d: Vec<f64> = bv.iter().zip(&ev).map(|(x, y)| pct(*x, *y)).collect();
                let pairs = Summary::of(&d, conf);
                let verdict =
                    verdict(&pairs, &pairs, None, "experiment lower", "experiment higher");
                metrics.push(Metric {
                    name,
                    unit: "",
                    base_mean: mean(&bv),
                    experiment_mean: mean(&ev),
                    layouts: pairs.clone(),
                    pairs,
                    verdict,
                });
            }
        }
        out.push(Comparison { experiment: b.name.clone(), metrics });
    }
    out
}

fn interval(s: &Summary) -> String {
    match s.ci {
        Some((lo, hi)) => format!("[{lo:+.2}, {hi:+.2}]"),
        None => "—".into(),
    }
}

fn value(x: f64, unit: &str) -> String {
    if unit == "s" { format!("{x:.4} s") } else { format!("{x:.4e}") }
}

/// Spread across layouts of one build's mean corrected wall time and its mispredictions:
/// (max - min) / mean, percent.
pub fn layout_spread(run: &Run, bi: usize) -> (Option<f64>, Option<f64>) {
    let spread = |xs: Vec<f64>| {
        if xs.len() < 2 {
            return None;
        }
        let (lo, hi) =
            xs.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &x| (a.min(x), b.max(x)));
        Some(100.0 * (hi - lo) / mean(&xs))
    };
    let walls: Vec<f64> = run
        .measured
        .iter()
        .filter(|l| !l[bi].timed.is_empty())
        .map(|l| mean(&l[bi].timed.iter().map(|t| wall(run, t)).collect::<Vec<_>>()))
        .collect();
    let mis: Vec<f64> =
        run.measured.iter().filter_map(|l| l[bi].sim.map(|s| s.mispredictions as f64)).collect();
    (spread(walls), spread(mis))
}

/// The mean, over layouts, of the 95% interval half-width of one build's per-layout mean wall
/// time, percent of the mean: how much of the spread between layouts noise alone could make.
pub fn within_layout_noise(run: &Run, bi: usize) -> Option<f64> {
    let halves: Vec<f64> = run
        .measured
        .iter()
        .filter_map(|l| {
            let w: Vec<f64> = l[bi].timed.iter().map(|t| wall(run, t)).collect();
            let s = Summary::of(&w, 0.95);
            s.ci.map(|(lo, hi)| 100.0 * (hi - lo) / 2.0 / s.mean)
        })
        .collect();
    (!halves.is_empty()).then(|| mean(&halves))
}

pub fn markdown(run: &Run, comparisons: &[Comparison]) -> String {
    let o = &run.options;
    let conf = (o.confidence * 100.0).round();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## profgen-ab: {}\n",
        o.builds.iter().map(|b| b.name.as_str()).collect::<Vec<_>>().join(" vs ")
    );
    let layouts = if o.layouts == 0 {
        "the default layout only".to_string()
    } else {
        format!("{} counterfactual layouts (shuffle padding, seeds 1..{})", o.layouts, o.layouts)
    };
    let _ = writeln!(
        s,
        "Benchmark: `{}`; {layouts}; {} trials per layout.",
        o.bench.join(" "),
        o.trials
    );
    let floor = |f: Option<f64>| f.map_or("—".to_string(), |f| format!("{f:.3}%"));
    if let Some(c) = &run.calibration {
        let pin = match &run.pinned {
            Ok(cpu) => format!("pinned to CPU {cpu}"),
            Err(e) => format!("not pinned ({e})"),
        };
        let _ = writeln!(
            s,
            "Timer: overhead {:.0} ns, resolution {:.0} ns (clock_getres {:.0} ns); empty command {:.3} ms ± {:.3} ms \
             and {:.3} ms CPU (median ± sd of {}, subtracted from every run); noise floor: wall {}, CPU {}; {pin}; \
             load average at start: {}.",
            c.timer_overhead_ns,
            c.timer_resolution_ns,
            c.clock_getres_ns,
            c.empty_wall * 1e3,
            c.empty_wall_sd * 1e3,
            c.empty_cpu * 1e3,
            c.empty_runs,
            floor(noise_floor(run, false)),
            floor(noise_floor(run, true)),
            run.loadavg
        );
    }
    let _ = writeln!(
        s,
        "\nChange = (experiment − base) / base, percent; negative is faster / fewer. {conf}% Student's t intervals over \
         every pair and over the per-layout means (the latter includes the variation between layouts).\n"
    );
    let _ = writeln!(
        s,
        "| experiment | metric | base | experiment | change % (mean ± sd) | {conf}% CI, pairs (n) | {conf}% CI, layouts (n) | verdict |"
    );
    let _ = writeln!(s, "| --- | --- | ---: | ---: | ---: | --- | --- | --- |");
    for c in comparisons {
        for m in &c.metrics {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {:+.2} ± {:.2} | {} ({}) | {} ({}) | {} |",
                c.experiment,
                m.name,
                value(m.base_mean, m.unit),
                value(m.experiment_mean, m.unit),
                m.pairs.mean,
                m.pairs.sd,
                interval(&m.pairs),
                m.pairs.n,
                interval(&m.layouts),
                m.layouts.n,
                m.verdict
            );
        }
    }
    let _ = writeln!(s, "\n### Per layout\n");
    let _ = writeln!(
        s,
        "| layout | build | wall s (mean of trials) | CPU s | instructions | mispredictions | padded sections (bytes) | .text sections moved |"
    );
    let _ = writeln!(s, "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (li, l) in run.measured.iter().enumerate() {
        for (bi, m) in l.iter().enumerate() {
            let t = |f: fn(&Run, &super::Timed) -> f64| {
                if m.timed.is_empty() {
                    "—".to_string()
                } else {
                    format!("{:.4}", mean(&m.timed.iter().map(|x| f(run, x)).collect::<Vec<_>>()))
                }
            };
            let (ins, mis) = m.sim.map_or(("—".into(), "—".into()), |x| {
                (x.instructions.to_string(), x.mispredictions.to_string())
            });
            let (pad, moved) = m.layout.map_or(("—".into(), "—".into()), |c| {
                let unplaced = if c.unplaced > 0 {
                    format!(", {} unplaced", c.unplaced)
                } else {
                    String::new()
                };
                (
                    format!("{} ({})", c.padded_sections, c.padding_bytes),
                    format!("{} of {}{unplaced}", c.moved, c.text_sections),
                )
            });
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {ins} | {mis} | {pad} | {moved} |",
                run.seeds[li],
                o.builds[bi].name,
                t(wall),
                t(cpu)
            );
        }
    }
    let _ = writeln!(s, "\nSpread across layouts ((max − min) / mean of the per-layout values):\n");
    for (bi, b) in o.builds.iter().enumerate() {
        let (w, m) = layout_spread(run, bi);
        let f = |x: Option<f64>| x.map_or("—".into(), |v| format!("{v:.2}%"));
        let _ = writeln!(
            s,
            "- {}: wall time {} (95% interval of one layout's mean: ±{} on average), mispredictions {}",
            b.name,
            f(w),
            f(within_layout_noise(run, bi)),
            f(m)
        );
    }
    s
}

fn summary_json(s: &Summary) -> J {
    let ci = s.ci.map_or(J::Arr(vec![]), |(lo, hi)| J::Arr(vec![J::Num(lo), J::Num(hi)]));
    J::Obj(vec![
        ("n", J::Num(s.n as f64)),
        ("mean", J::Num(s.mean)),
        ("sd", J::Num(s.sd)),
        ("ci", ci),
        ("confidence", J::Num(s.confidence)),
    ])
}

pub fn json(run: &Run, comparisons: &[Comparison]) -> String {
    let o = &run.options;
    let opt = |x: Option<f64>| x.map_or(J::Num(f64::NAN), J::Num);
    let mut top = vec![
        (
            "builds",
            J::Arr(
                o.builds
                    .iter()
                    .map(|b| {
                        J::Obj(vec![
                            ("name", J::Str(b.name.clone())),
                            ("template", J::Str(b.template.clone())),
                        ])
                    })
                    .collect(),
            ),
        ),
        ("bench", J::Arr(o.bench.iter().map(|a| J::Str(a.clone())).collect())),
        ("layouts", J::Num(o.layouts as f64)),
        ("trials", J::Num(o.trials as f64)),
        ("pinned_cpu", run.pinned.as_ref().map_or(J::Num(f64::NAN), |&c| J::Num(c as f64))),
        ("loadavg", J::Str(run.loadavg.clone())),
        ("noise_floor_wall_percent", opt(noise_floor(run, false))),
        ("noise_floor_cpu_percent", opt(noise_floor(run, true))),
    ];
    if let Some(c) = &run.calibration {
        top.push((
            "calibration",
            J::Obj(vec![
                ("timer_overhead_ns", J::Num(c.timer_overhead_ns)),
                ("timer_resolution_ns", J::Num(c.timer_resolution_ns)),
                ("clock_getres_ns", J::Num(c.clock_getres_ns)),
                ("empty_command_wall_s", J::Num(c.empty_wall)),
                ("empty_command_wall_sd_s", J::Num(c.empty_wall_sd)),
                ("empty_command_cpu_s", J::Num(c.empty_cpu)),
                ("empty_command_cpu_sd_s", J::Num(c.empty_cpu_sd)),
                ("empty_command_runs", J::Num(c.empty_runs as f64)),
            ]),
        ));
    }
    top.push((
        "comparisons",
        J::Arr(
            comparisons
                .iter()
                .map(|c| {
                    J::Obj(vec![
                        ("experiment", J::Str(c.experiment.clone())),
                        (
                            "metrics",
                            J::Arr(
                                c.metrics
                                    .iter()
                                    .map(|m| {
                                        J::Obj(vec![
                                            ("metric", J::Str(m.name.into())),
                                            ("base_mean", J::Num(m.base_mean)),
                                            ("experiment_mean", J::Num(m.experiment_mean)),
                                            ("change_percent_pairs", summary_json(&m.pairs)),
                                            ("change_percent_layouts", summary_json(&m.layouts)),
                                            ("verdict", J::Str(m.verdict.clone())),
                                        ])
                                    })
                                    .collect(),
                            ),
                        ),
                    ])
                })
                .collect(),
        ),
    ));
    let layouts = run
        .measured
        .iter()
        .enumerate()
        .map(|(li, l)| {
            J::Obj(vec![
                ("seed", J::Num(run.seeds[li] as f64)),
                (
                    "builds",
                    J::Arr(
                        l.iter()
                            .enumerate()
                            .map(|(bi, m)| {
                                let mut v = vec![
                                    ("build", J::Str(o.builds[bi].name.clone())),
                                    (
                                        "wall_s",
                                        J::Arr(
                                            m.timed.iter().map(|t| J::Num(wall(run, t))).collect(),
                                        ),
                                    ),
                                    (
                                        "cpu_s",
                                        J::Arr(
                                            m.timed.iter().map(|t| J::Num(cpu(run, t))).collect(),
                                        ),
                                    ),
                                ];
                                if let Some(x) = m.sim {
                                    v.push(("instructions", J::Num(x.instructions as f64)));
                                    v.push(("branches", J::Num(x.branches as f64)));
                                    v.push(("mispredictions", J::Num(x.mispredictions as f64)));
                                }
                                if let Some(c) = m.layout {
                                    v.push(("padded_sections", J::Num(c.padded_sections as f64)));
                                    v.push(("padding_bytes", J::Num(c.padding_bytes as f64)));
                                    v.push(("text_sections_moved", J::Num(c.moved as f64)));
                                    v.push(("text_sections", J::Num(c.text_sections as f64)));
                                    v.push(("unplaced_sections", J::Num(c.unplaced as f64)));
                                }
                                J::Obj(v)
                            })
                            .collect(),
                    ),
                ),
            ])
        })
        .collect();
    top.push(("per_layout", J::Arr(layouts)));
    let spreads = (0..o.builds.len())
        .map(|bi| {
            let (w, m) = layout_spread(run, bi);
            J::Obj(vec![
                ("build", J::Str(o.builds[bi].name.clone())),
                ("wall_percent", opt(w)),
                ("wall_within_layout_ci_half_percent", opt(within_layout_noise(run, bi))),
                ("mispredictions_percent", opt(m)),
            ])
        })
        .collect();
    top.push(("layout_spread", J::Arr(spreads)));
    let mut s = String::new();
    J::Obj(top).write(&mut s);
    s.push('\n');
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_need_both_intervals_and_the_noise_floor() {
        let s = |xs: &[f64]| Summary::of(xs, 0.95);
        let pairs = s(&[3.0, 3.2, 2.8, 3.1, 2.9, 3.0]);
        let (tight, loose) = (s(&[3.0, 3.05, 2.95]), s(&[6.0, -1.0, 4.0]));
        assert_eq!(verdict(&pairs, &tight, None, "faster", "slower"), "slower by 3.00%");
        assert_eq!(verdict(&pairs, &loose, None, "faster", "slower"), "no significant difference");
        assert_eq!(
            verdict(&pairs, &tight, Some(5.0), "faster", "slower"),
            "below the noise floor (5.00%)"
        );
        let neg = s(&[-2.0, -2.2, -1.8]);
        assert_eq!(verdict(&neg, &neg, Some(1.0), "faster", "slower"), "faster by 2.00%");
        assert_eq!(
            verdict(&s(&[1.0]), &s(&[1.0]), None, "a", "b"),
            "no interval (needs at least 2 samples)"
        );
    }
}
