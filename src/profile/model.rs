//! LLVM's sample profile data model (`SampleProf.h`): function profiles with body samples,
//! call targets and nested inlinee profiles, keyed by name or by calling context.

use crate::llvm::{ContextFrame, LineLocation};
use std::collections::BTreeMap;

/// The samples of one source location: its count and the functions called from it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BodySample {
    pub count: u64,
    pub call_targets: BTreeMap<String, u64>,
}

/// A calling context, root first, leaf last. A context of one frame is a base (context-less)
/// profile.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Context(pub Vec<ContextFrame>);

impl Context {
    pub fn base(func: &str) -> Self {
        Context(vec![ContextFrame { func: func.to_string(), loc: LineLocation::default() }])
    }
    pub fn leaf_name(&self) -> &str {
        &self.0.last().expect("a context has a leaf frame").func
    }
}

/// `ContextAttributeMask` bits written as `!Attributes:`.
pub mod attr {
    pub const WAS_INLINED: u32 = 1;
    pub const SHOULD_BE_INLINED: u32 = 2;
    pub const DUPLICATED_INTO_BASE: u32 = 4;
}

/// `FunctionSamples`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionSamples {
    /// Function name (the leaf function for CS profiles).
    pub name: String,
    pub total_samples: u64,
    pub head_samples: u64,
    pub body: BTreeMap<LineLocation, BodySample>,
    /// Inlinee profiles by call-site location, then callee name.
    pub callsites: BTreeMap<LineLocation, BTreeMap<String, FunctionSamples>>,
    /// `!CFGChecksum` of probe-based profiles.
    pub checksum: Option<u64>,
    /// `!Attributes` ([`attr`] bits).
    pub attributes: u32,
}

impl FunctionSamples {
    pub fn new(name: &str) -> Self {
        FunctionSamples { name: name.to_string(), ..Default::default() }
    }

    pub fn add_total(&mut self, n: u64) {
        self.total_samples = self.total_samples.saturating_add(n);
    }
    pub fn add_head(&mut self, n: u64) {
        self.head_samples = self.head_samples.saturating_add(n);
    }
    pub fn add_body(&mut self, loc: LineLocation, n: u64) {
        let b = self.body.entry(loc).or_default();
        b.count = b.count.saturating_add(n);
    }
    /// Raises the body count at `loc` to at least `n` (line-based profiles keep the max over the
    /// instructions of a line).
    pub fn max_body(&mut self, loc: LineLocation, n: u64) {
        let b = self.body.entry(loc).or_default();
        b.count = b.count.max(n);
    }
    pub fn add_call_target(&mut self, loc: LineLocation, callee: &str, n: u64) {
        let b = self.body.entry(loc).or_default();
        let t = b.call_targets.entry(callee.to_string()).or_default();
        *t = t.saturating_add(n);
    }
    /// The nested profile of `callee` inlined at `loc`, created empty if absent.
    pub fn callsite_mut(&mut self, loc: LineLocation, callee: &str) -> &mut FunctionSamples {
        self.callsites
            .entry(loc)
            .or_default()
            .entry(callee.to_string())
            .or_insert_with(|| FunctionSamples::new(callee))
    }

    /// `FunctionSamples::merge`: adds `other`'s counts into `self` (same function).
    pub fn merge(&mut self, other: &FunctionSamples) {
        self.add_total(other.total_samples);
        self.add_head(other.head_samples);
        for (loc, b) in &other.body {
            self.add_body(*loc, b.count);
            for (t, n) in &b.call_targets {
                self.add_call_target(*loc, t, *n);
            }
        }
        for (loc, callees) in &other.callsites {
            for (name, fs) in callees {
                self.callsite_mut(*loc, name).merge(fs);
            }
        }
        if self.checksum.is_none() {
            self.checksum = other.checksum;
        }
        self.attributes |= other.attributes;
    }
}

/// Whole-profile flags that the formats record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProfileKind {
    /// Flat context-sensitive profile: keys are full contexts (`[a:1 @ b]`).
    pub context_sensitive: bool,
    pub probe_based: bool,
    /// The CS pre-inliner ran (ShouldBeInlined attributes are decisions).
    pub preinlined: bool,
    /// Flow-sensitive discriminators.
    pub fs_discriminator: bool,
}

/// A complete sample profile.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    pub kind: ProfileKind,
    /// Top-level profiles by context (a one-frame context for non-CS profiles).
    pub functions: BTreeMap<Context, FunctionSamples>,
    /// Names for the extbinary profile symbol list (`--populate-profile-symbol-list`).
    pub symbol_list: Option<Vec<String>>,
}
