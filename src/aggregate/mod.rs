//! Aggregation stage: identical samples are counted first, then each distinct sample is walked
//! once (weighted by its count) into range and branch counters, per calling context when the
//! samples carry call stacks.
//!
//! [`read`] runs the stage: the inputs' events through the address mappers into aggregation, then
//! the distinct samples into counters.
//!
//! In: [`crate::input`] samples, whose runtime addresses the aggregator translates through the
//! [`crate::mapping`] address map current when each was read into binary [`Vaddr`]s
//! ([`Vaddr::EXTERNAL`] for anything that is not an instruction of the binary). Out:
//! [`ContextCounters`], which the profile builders consume, and which [`unsymbolized`] writes
//! (`--skip-symbolization`) and reads back (`--unsymbolized-profile`). Asked for, [`traces`]
//! also keeps per process the order in which functions first appear in the samples (the
//! temporal traces `profgen order` orders functions by).

pub mod lbr;
pub mod parallel;
pub mod pga;
pub mod read;
pub mod samples;
pub mod traces;
pub mod unsymbolized;
pub mod weighting;

use crate::addr::Vaddr;
use crate::llvm::ContextFrame;
use hashbrown::HashMap;
use weighting::RangeWeights;

pub mod unwinder;

/// Fall-through range counts (inclusive [start, end]) and taken-branch counts (source → target).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    pub ranges: HashMap<(Vaddr, Vaddr), u64>,
    pub branches: HashMap<(Vaddr, Vaddr), u64>,
}

/// Adds `n` to the count of `pair` in a range or branch map (saturating).
pub(crate) fn add_count(map: &mut HashMap<(Vaddr, Vaddr), u64>, pair: (Vaddr, Vaddr), n: u64) {
    let c = map.entry(pair).or_default();
    *c = c.saturating_add(n);
}

impl Counters {
    pub fn add_range(&mut self, start: Vaddr, end: Vaddr, n: u64) {
        add_count(&mut self.ranges, (start, end), n);
    }
    pub fn add_branch(&mut self, source: Vaddr, target: Vaddr, n: u64) {
        add_count(&mut self.branches, (source, target), n);
    }
    pub fn merge(&mut self, other: &Counters) {
        for (&(s, e), &n) in &other.ranges {
            self.add_range(s, e, n);
        }
        for (&(s, t), &n) in &other.branches {
            self.add_branch(s, t, n);
        }
    }
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty() && self.branches.is_empty()
    }
}

/// A calling context as the unwinder produces it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ContextKey {
    /// No context: LBR-only samples.
    None,
    /// Probe binaries: call-site addresses, root first (the leaf function is not part of the key).
    Addrs(Vec<Vaddr>),
    /// Line-based binaries: symbolized frames `func:line[.discr]`, root first, leaf function last
    /// without a location, as llvm-profgen prints them (`main:1 @ foo:3.1 @ bar`).
    Frames(Vec<ContextFrame>),
}

/// Counters per context.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ContextCounters {
    pub by_context: HashMap<ContextKey, Counters>,
    /// True when samples had call stacks (CS mode), even if no context survived.
    pub context_sensitive: bool,
    /// With LBR weighting, the counts are fixed-point weights until [`Self::apply_weights`]
    /// scales them by these totals.
    pub weights: RangeWeights,
}

impl ContextCounters {
    pub fn counters_mut(&mut self, key: ContextKey) -> &mut Counters {
        self.by_context.entry(key).or_default()
    }
    /// Scales weighted counts so that their total is the plain count's (hot and cold thresholds
    /// keep their meaning); counts that round to 0 are dropped. Plain counters are unchanged.
    /// Contexts are scaled in parallel, on rayon's current pool (a 128-bit division per count:
    /// on one thread it left the other core idle between unwinding and profile generation);
    /// each count's scaling depends on it alone, so the result is the same.
    pub fn apply_weights(&mut self) {
        use rayon::prelude::*;
        let w = std::mem::take(&mut self.weights);
        if w.weighted == 0 {
            return;
        }
        let contexts: Vec<&mut Counters> = self.by_context.values_mut().collect();
        contexts.into_par_iter().for_each(|c| {
            for map in [&mut c.ranges, &mut c.branches] {
                map.values_mut().for_each(|n| *n = w.scale(*n));
                map.retain(|_, n| *n > 0);
            }
        });
        self.by_context.retain(|_, c| !c.is_empty());
    }
    /// Frees the counters on rayon's current pool: on one thread, the other core idled through
    /// it.
    pub fn free(self) {
        use rayon::prelude::*;
        self.by_context.into_par_iter().for_each(drop);
    }
    pub fn merge(&mut self, other: ContextCounters) {
        self.context_sensitive |= other.context_sensitive;
        self.weights.merge(&other.weights);
        for (k, c) in other.by_context {
            match self.by_context.get_mut(&k) {
                Some(mine) => mine.merge(&c),
                None => {
                    self.by_context.insert(k, c);
                }
            }
        }
    }
}
