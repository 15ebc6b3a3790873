//! Progress reporting: the small interface the pipeline calls to say what it is doing (phase
//! changes, bytes consumed per input), and what listens: a display on stderr (only on a
//! terminal) and the per-phase timer of `--time-profgen`.
//!
//! The stages only see a [`Reporter`], a cheap cloneable handle that does nothing by default,
//! so library callers and tests pay nothing; the front end decides what listens.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The phases of a run, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Loading the binary: disassembly, DWARF, pseudo probes.
    Loading,
    /// Reading the inputs and aggregating their samples.
    Reading,
    /// Unwinding the distinct LBR + call-stack samples into contexts.
    Unwinding,
    /// Turning counters into a profile (symbolization).
    Symbolizing,
    /// Pre-inlining, cold trimming, nesting.
    PostProcessing,
    /// Encoding and writing the output.
    Writing,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Loading => "loading the binary",
            Phase::Reading => "reading",
            Phase::Unwinding => "unwinding",
            Phase::Symbolizing => "symbolizing",
            Phase::PostProcessing => "post-passes, writing",
            Phase::Writing => "writing",
        }
    }
}

/// What listens to the pipeline. Called from any thread.
pub trait Sink: Send + Sync {
    /// `phase` begins (the previous one, if any, ends).
    fn phase(&self, phase: Phase);
    /// Input `name` starts being read; `total` is its size in bytes when known. Returns the
    /// input's number for [`consumed`](Self::consumed).
    fn input_started(&self, name: &str, total: Option<u64>) -> usize;
    /// Input `input` has been consumed up to byte `upto` (monotonic per input).
    fn consumed(&self, input: usize, upto: u64);
    /// Input `input` has been read.
    fn input_done(&self, input: usize);
    /// The run is over: clear any display.
    fn finish(&self);
}

/// The handle the stages report through; does nothing unless the front end attached sinks.
#[derive(Clone, Default)]
pub struct Reporter(Vec<Arc<dyn Sink>>);

impl fmt::Debug for Reporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reporter({} sinks)", self.0.len())
    }
}

impl Reporter {
    /// A reporter that tells every sink of `sinks`.
    pub fn new(sinks: Vec<Arc<dyn Sink>>) -> Self {
        Reporter(sinks)
    }
    pub fn phase(&self, phase: Phase) {
        self.0.iter().for_each(|s| s.phase(phase));
    }
    /// Starts input `name` (`total` bytes when known); the returned handle reports on it.
    pub fn input(&self, name: &str, total: Option<u64>) -> InputProgress {
        let ids = self.0.iter().map(|s| s.input_started(name, total)).collect();
        InputProgress { reporter: self.clone(), ids }
    }
    pub fn finish(&self) {
        self.0.iter().for_each(|s| s.finish());
    }
}

/// Progress of one input; says it is done when dropped.
pub struct InputProgress {
    reporter: Reporter,
    ids: Vec<usize>,
}

impl InputProgress {
    /// The input has been consumed up to byte `upto`.
    pub fn consumed(&self, upto: u64) {
        for (s, &id) in self.reporter.0.iter().zip(&self.ids) {
            s.consumed(id, upto);
        }
    }
}

impl Drop for InputProgress {
    fn drop(&mut self) {
        for (s, &id) in self.reporter.0.iter().zip(&self.ids) {
            s.input_done(id);
        }
    }
}

/// `--time-profgen`: how long each phase took.
#[derive(Default)]
pub struct PhaseTimer {
    state: Mutex<TimerState>,
}

#[derive(Default)]
struct TimerState {
    /// Phases begun, with their start; a phase ends where the next begins (or at `end`).
    starts: Vec<(Phase, Instant)>,
    /// When the run finished.
    end: Option<Instant>,
}

impl PhaseTimer {
    /// `(phase, duration)` in run order; a phase entered twice is listed twice.
    pub fn times(&self) -> Vec<(Phase, Duration)> {
        let g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let end = g.end.unwrap_or_else(Instant::now);
        let starts = &g.starts;
        starts
            .iter()
            .enumerate()
            .map(|(i, &(p, t))| (p, starts.get(i + 1).map_or(end, |n| n.1).duration_since(t)))
            .collect()
    }

    /// The table `--time-profgen` prints.
    pub fn table(&self) -> String {
        let times = self.times();
        let total: Duration = times.iter().map(|t| t.1).sum();
        let mut out = String::from("profgen: time per phase (wall clock)\n");
        for (p, d) in &times {
            out.push_str(&format!("  {:<22} {:>9.3} s\n", p.name(), d.as_secs_f64()));
        }
        out.push_str(&format!("  {:<22} {:>9.3} s\n", "total", total.as_secs_f64()));
        out
    }
}

impl Sink for PhaseTimer {
    fn phase(&self, phase: Phase) {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        g.starts.push((phase, Instant::now()));
    }
    fn input_started(&self, _: &str, _: Option<u64>) -> usize {
        0
    }
    fn consumed(&self, _: usize, _: u64) {}
    fn input_done(&self, _: usize) {}
    fn finish(&self) {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        g.end.get_or_insert_with(Instant::now);
    }
}

/// Progress on stderr (a terminal): one line per phase, the finished ones kept with their time;
/// while reading, one line per input with percent and time left from its size.
pub struct Display {
    bars: indicatif::MultiProgress,
    state: Mutex<DisplayState>,
}

#[derive(Default)]
struct DisplayState {
    /// The current phase's line and when it began.
    phase: Option<(Phase, indicatif::ProgressBar, Instant)>,
    inputs: Vec<indicatif::ProgressBar>,
}

impl Default for Display {
    fn default() -> Self {
        Self::new()
    }
}

impl Display {
    /// A display on stderr; draws nothing when stderr is not a terminal.
    pub fn new() -> Self {
        let bars = indicatif::MultiProgress::with_draw_target(
            indicatif::ProgressDrawTarget::stderr_with_hz(4),
        );
        Display { bars, state: Mutex::new(DisplayState::default()) }
    }

    fn end_phase(&self, st: &mut DisplayState) {
        if let Some((p, bar, t)) = st.phase.take() {
            bar.finish_and_clear();
            let _ = self.bars.println(format!(
                "  {:<22} {:>8.2} s",
                p.name(),
                t.elapsed().as_secs_f64()
            ));
        }
    }
}

impl Sink for Display {
    fn phase(&self, phase: Phase) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.end_phase(&mut st);
        let bar = self.bars.add(indicatif::ProgressBar::new_spinner());
        bar.set_style(
            indicatif::ProgressStyle::with_template("{spinner} {msg:<22} {elapsed:>6}")
                .expect("static template"),
        );
        bar.set_message(phase.name());
        bar.enable_steady_tick(Duration::from_millis(250));
        st.phase = Some((phase, bar, Instant::now()));
    }

    fn input_started(&self, name: &str, total: Option<u64>) -> usize {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let bar = match total {
            Some(n) => {
                let bar = indicatif::ProgressBar::new(n);
                bar.set_style(
                    indicatif::ProgressStyle::with_template(
                        "  {msg:.dim} {percent:>3}% {bytes}/{total_bytes}, {eta} left",
                    )
                    .expect("static template"),
                );
                bar
            }
            None => {
                let bar = indicatif::ProgressBar::new_spinner();
                bar.set_style(
                    indicatif::ProgressStyle::with_template("  {msg:.dim} {bytes} read")
                        .expect("static template"),
                );
                bar
            }
        };
        bar.set_message(name.to_string());
        let bar = self.bars.add(bar);
        st.inputs.push(bar);
        st.inputs.len() - 1
    }

    fn consumed(&self, input: usize, upto: u64) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bar) = st.inputs.get(input) {
            bar.set_position(upto.max(bar.position()));
        }
    }

    fn input_done(&self, input: usize) {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(bar) = st.inputs.get(input) {
            bar.finish_and_clear();
        }
    }

    fn finish(&self) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        self.end_phase(&mut st);
        for bar in st.inputs.drain(..) {
            bar.finish_and_clear();
        }
        let _ = self.bars.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_timer_lists_phases_in_order_and_ends_at_finish() {
        let t = Arc::new(PhaseTimer::default());
        let r = Reporter::new(vec![t.clone()]);
        r.phase(Phase::Loading);
        r.phase(Phase::Reading);
        {
            let input = r.input("a", Some(10));
            input.consumed(5);
        }
        r.phase(Phase::Writing);
        r.finish();
        let phases: Vec<Phase> = t.times().into_iter().map(|p| p.0).collect();
        assert_eq!(phases, [Phase::Loading, Phase::Reading, Phase::Writing]);
        let table = t.table();
        assert!(table.contains("loading the binary") && table.contains("total"), "{table}");
        // Finished: the times no longer grow.
        assert_eq!(t.times(), t.times());
    }
}
