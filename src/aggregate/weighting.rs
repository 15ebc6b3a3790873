//! The LBR range estimator: how much each LBR window's ranges (and branches) count.
//!
//! llvm-profgen adds 1 to every range of every sampled window. A sample is taken every N events;
//! when the event counts instructions or cycles, a window is sampled with probability
//! proportional to the instructions (cycles) it spans, so code with long straight runs between
//! taken branches fills more sampled windows per execution than branchy code and is over-counted
//! (perf-samples/QUALITY.md: 62% error on cpp_virtual under `cycles`). Weighting each window by
//! the inverse of its span in the event's unit removes that bias; when the event counts taken
//! branches, every window spans the same number of them and the plain count is already unbiased.
//! A span counts the window's code outside the binary too (libc, the loader: sampled like the
//! rest), estimated from its addresses; without it every window calling into libc is
//! over-weighted (Lua's CS probe profile: 14.4% off instead of 5.9%, README "Evaluation").
//!
//! Weights are integers, [`ONE`]`/span` per sample, summed as integers (associative: the same
//! totals at any thread count and in any merge order). Each input is weighted by its own event
//! and, once read, scaled so that its weighted range total equals its plain one ([`to_run_unit`]):
//! inputs sampled by different events then add up in one unit, and aggregates of any grouping
//! of inputs sum to what one run over them counts. Counts stay fixed-point ([`RUN_ONE`] per
//! plain count) until [`super::ContextCounters::apply_weights`] rounds them, at the end.

use crate::addr::Vaddr;
use crate::aggregate::samples::{slot_of, slots};
use crate::binary::Binary;
use crate::input::perf_data::abi::{
    HW_CPU_CYCLES, HW_INSTRUCTIONS, HW_REF_CPU_CYCLES, RAW_BR_INST_RETIRED_NEAR_TAKEN,
    SW_CPU_CLOCK, SW_TASK_CLOCK, TYPE_HARDWARE, TYPE_RAW, TYPE_SOFTWARE,
};

/// `--lbr-weighting`: what the user asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LbrWeighting {
    /// From the sampling event in the perf.data attrs; none when it is unknown.
    #[default]
    Auto,
    /// +1 per range, as llvm-profgen.
    None,
    /// 1/instructions in the window's ranges.
    Instructions,
    /// 1/the LBR cycle counts of the window (1/instructions for windows without them).
    Cycles,
    /// Taken-branch sampling: +1 per range (the plain count is unbiased).
    Branches,
}

impl LbrWeighting {
    /// The option's spelling.
    pub fn name(self) -> &'static str {
        match self {
            LbrWeighting::Auto => "auto",
            LbrWeighting::None => "none",
            LbrWeighting::Instructions => "instructions",
            LbrWeighting::Cycles => "cycles",
            LbrWeighting::Branches => "branches",
        }
    }
}

/// How windows are weighted in a run, once decided.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Weighting {
    /// Every window counts 1 (no weighting, or taken-branch sampling).
    #[default]
    Plain,
    Instructions,
    Cycles,
}

impl Weighting {
    /// What the option asks for when it names a weighting (`auto` decides from the events).
    pub fn asked(w: LbrWeighting) -> Option<Weighting> {
        match w {
            LbrWeighting::Auto => None,
            LbrWeighting::None | LbrWeighting::Branches => Some(Weighting::Plain),
            LbrWeighting::Instructions => Some(Weighting::Instructions),
            LbrWeighting::Cycles => Some(Weighting::Cycles),
        }
    }

    /// The name an aggregate file records it under (`lbr-weighting-used`).
    pub fn name(self) -> &'static str {
        match self {
            Weighting::Plain => "none",
            Weighting::Instructions => "instructions",
            Weighting::Cycles => "cycles",
        }
    }
}

/// What a sampling event (perf_event_attr `type`, `config`) counts, as far as LBR windows go:
/// `None` for events whose unit is unknown.
pub fn event_unit(kind: u32, config: u64) -> Option<LbrWeighting> {
    match (kind, config) {
        // Hybrid CPUs put the PMU type in the upper 32 bits of hardware configs.
        (TYPE_HARDWARE, c) => match c & 0xffff_ffff {
            HW_CPU_CYCLES | HW_REF_CPU_CYCLES => Some(LbrWeighting::Cycles),
            HW_INSTRUCTIONS => Some(LbrWeighting::Instructions),
            _ => None,
        },
        // Time, as cycles.
        (TYPE_SOFTWARE, SW_CPU_CLOCK | SW_TASK_CLOCK) => Some(LbrWeighting::Cycles),
        // Intel raw codes (event | umask << 8): inst_retired.any(_p) / prec_dist,
        // cpu_clk_unhalted.thread(_p).
        (TYPE_RAW, RAW_BR_INST_RETIRED_NEAR_TAKEN) => Some(LbrWeighting::Branches),
        (TYPE_RAW, 0x00c0 | 0x01c0) => Some(LbrWeighting::Instructions),
        (TYPE_RAW, 0x003c) => Some(LbrWeighting::Cycles),
        _ => None,
    }
}

/// Fixed-point one: a window spanning `s` units weighs `ONE / s` per sample.
pub const ONE: u64 = 1 << 32;

/// Fixed-point one of the run's counts while weighted: one plain range count.
pub const RUN_ONE: u64 = 1 << 16;

/// Sums of range counts over an input's windows: plain (+1 per range per sample) and weighted.
/// Counters in the run's unit carry `{plain: 1, weighted: RUN_ONE}` (or a multiple: merged
/// counters sum them), and plain counters zeros.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RangeWeights {
    pub plain: u128,
    pub weighted: u128,
}

impl RangeWeights {
    /// Adds a window seen `n` times with `k` ranges, weighing `weight` ([`window_weight`]) under
    /// `w` (plain counts keep no totals).
    pub fn add_window(&mut self, w: Weighting, n: u64, weight: u64, k: usize) {
        if w == Weighting::Plain {
            return;
        }
        let k = k as u128;
        self.plain = self.plain.saturating_add(u128::from(n) * k);
        self.weighted = self.weighted.saturating_add(u128::from(weight) * k);
    }
    pub fn merge(&mut self, o: &RangeWeights) {
        self.plain = self.plain.saturating_add(o.plain);
        self.weighted = self.weighted.saturating_add(o.weighted);
    }
    /// The totals of counters in the run's fixed-point unit.
    pub fn run_unit() -> Self {
        RangeWeights { plain: 1, weighted: u128::from(RUN_ONE) }
    }
    /// `n` scaled by plain / weighted, rounded to the nearest integer.
    pub fn scale(&self, n: u64) -> u64 {
        if self.weighted == 0 {
            return n;
        }
        let v = (u128::from(n) * self.plain + self.weighted / 2) / self.weighted;
        u64::try_from(v).unwrap_or(u64::MAX)
    }
}

/// The cycle part of samples' weights: `ONE / cycles` per sample whose LBR entries carry cycle
/// counts, summed, and how many samples carry none (weighted by instructions instead).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CycleWeights {
    pub weighted: u64,
    pub without: u64,
}

impl CycleWeights {
    /// `repeat` samples whose LBR entries span `lbr_cycles` cycles (0: not recorded).
    pub fn of(lbr_cycles: u64, repeat: u64) -> Self {
        match lbr_cycles {
            0 => CycleWeights { weighted: 0, without: repeat },
            c => CycleWeights { weighted: repeat.saturating_mul(ONE / c), without: 0 },
        }
    }
    pub fn add(&mut self, o: CycleWeights) {
        self.weighted = self.weighted.saturating_add(o.weighted);
        self.without = self.without.saturating_add(o.without);
    }
    /// The weights of `count` where these are of `repeat` samples (`--sample-period`).
    pub fn scaled(self, count: u64, repeat: u64) -> Self {
        let s = |v: u64| {
            let x = u128::from(v) * u128::from(count) / u128::from(repeat.max(1));
            u64::try_from(x).unwrap_or(u64::MAX)
        };
        CycleWeights { weighted: s(self.weighted), without: s(self.without) }
    }
}

/// Instruction counts of ranges, remembered: hot code repeats the same ranges in window after
/// window, and a lookup here costs a fraction of the two searches of [`Binary::inst_count`].
/// Direct-mapped.
pub struct SpanCache {
    /// (start, end, instructions); start 0 marks an empty slot (no range starts at 0).
    slots: Box<[(u64, u64, u64); SpanCache::SLOTS]>,
}

impl Default for SpanCache {
    fn default() -> Self {
        SpanCache { slots: slots((0, 0, 0)) }
    }
}

impl SpanCache {
    const SLOTS: usize = 1 << 12;

    /// Instructions in [start, end] of `binary`.
    pub fn count(&mut self, binary: &Binary, start: Vaddr, end: Vaddr) -> u64 {
        let slot = &mut self.slots[slot_of::<{ SpanCache::SLOTS }>(start.0, end.0)];
        if slot.0 == start.0 && slot.1 == end.0 {
            return slot.2;
        }
        let n = binary.inst_count(start, end);
        *slot = (start.0, end.0, n);
        n
    }
}

/// Bytes per instruction assumed for code outside the binary, which profgen does not
/// disassemble (x86-64 code averages 3.5-4).
const EXTERNAL_BYTES_PER_INSTRUCTION: u64 = 4;

/// Estimated instructions of a range run outside the binary, from its runtime addresses: a
/// window through libc is sampled for those too. 0 for what is no plausible straight-line run
/// (reversed, or longer than 64 KiB).
pub fn external_span(start: u64, end: u64) -> u64 {
    match end.checked_sub(start) {
        Some(bytes) if bytes < 1 << 16 => bytes / EXTERNAL_BYTES_PER_INSTRUCTION + 1,
        _ => 0,
    }
}

/// The weight of a window seen `n` times, whose ranges in the binary span `span()` instructions
/// (asked for only when needed) plus `external` instructions run outside the binary, with the
/// cycle weights `cycles` (cycle weighting); 0 when it spans nothing measurable (no instruction
/// in a range of the binary, and no cycle count). A window with a weight goes to the totals
/// ([`RangeWeights::add_window`]).
pub fn window_weight(
    w: Weighting,
    span: impl FnOnce() -> u64,
    external: u64,
    n: u64,
    cycles: CycleWeights,
) -> u64 {
    let by_instructions = |n: u64| {
        let span = span();
        if span == 0 {
            return 0;
        }
        n.saturating_mul(ONE / span.saturating_add(external))
    };
    match w {
        Weighting::Plain => n,
        Weighting::Cycles if cycles.without == 0 => cycles.weighted,
        Weighting::Cycles => cycles.weighted.saturating_add(by_instructions(cycles.without)),
        Weighting::Instructions => by_instructions(n),
    }
}

/// The factor that puts one input's counts, weighted by `w` with the range totals `totals`, in
/// the run's fixed-point unit: `(numerator, denominator)` of [`RUN_ONE`] `× plain / weighted`
/// (exactly `RUN_ONE` for plain counts; 0 when nothing weighable was seen).
pub fn to_run_unit(w: Weighting, totals: &RangeWeights) -> (u128, u128) {
    match w {
        Weighting::Plain => (u128::from(RUN_ONE), 1),
        _ if totals.weighted == 0 => (0, 1),
        _ => (u128::from(RUN_ONE) * totals.plain, totals.weighted),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_map_to_their_units() {
        assert_eq!(event_unit(0, 0), Some(LbrWeighting::Cycles));
        assert_eq!(event_unit(0, 1), Some(LbrWeighting::Instructions));
        // A hybrid CPU's cpu_core PMU (type 8) in the upper half of a hardware config.
        assert_eq!(event_unit(0, 8 << 32 | 1), Some(LbrWeighting::Instructions));
        assert_eq!(event_unit(4, 0x20c4), Some(LbrWeighting::Branches));
        assert_eq!(event_unit(4, 0x01c0), Some(LbrWeighting::Instructions));
        assert_eq!(event_unit(1, 0), Some(LbrWeighting::Cycles));
        // All branches (taken or not), cache misses: no known unit.
        assert_eq!(event_unit(0, 4), None);
        assert_eq!(event_unit(4, 0x00c4), None);
        assert_eq!(event_unit(3, 0), None);
    }

    #[test]
    fn inputs_scale_to_the_plain_total_in_the_run_unit() {
        // Plain counts: exactly RUN_ONE each, whatever the totals.
        assert_eq!(to_run_unit(Weighting::Plain, &RangeWeights::default()), (1 << 16, 1));
        // Two windows of 2 ranges: 1 sample spanning 4 instructions, 3 spanning 1.
        let mut t = RangeWeights::default();
        for (n, span) in [(1u64, 4u64), (3, 1)] {
            t.plain += u128::from(n) * 2;
            t.weighted += u128::from(n * (ONE / span)) * 2;
        }
        let (num, den) = to_run_unit(Weighting::Instructions, &t);
        let run = |w: u64| (u128::from(w) * num + den / 2) / den;
        // Range totals: plain 8 = (1/4 + 3) × 2 weighted, scaled.
        let total = 2 * run(ONE / 4) + 2 * run(3 * ONE);
        assert_eq!((total + (1 << 15)) >> 16, 8);
        assert_eq!(RangeWeights::run_unit().scale(total as u64), 8);
        assert_eq!(to_run_unit(Weighting::Cycles, &RangeWeights::default()), (0, 1));
    }

    #[test]
    fn external_ranges_count_four_bytes_per_instruction() {
        assert_eq!(external_span(0x7f00_0000_1000, 0x7f00_0000_1190), 101);
        assert_eq!(external_span(0x1000, 0x1000), 1);
        // Reversed, or too long for a straight-line run: nothing.
        assert_eq!(external_span(0x1010, 0x1000), 0);
        assert_eq!(external_span(0x1000, 0x1000 + (1 << 16)), 0);
    }

    #[test]
    fn cycle_weights_fall_back_for_samples_without_counts() {
        let mut c = CycleWeights::of(8, 2);
        c.add(CycleWeights::of(0, 3));
        assert_eq!(c, CycleWeights { weighted: 2 * (ONE / 8), without: 3 });
        assert_eq!(c.scaled(4, 2), CycleWeights { weighted: 4 * (ONE / 8), without: 6 });
    }
}
