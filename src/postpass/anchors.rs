//! Zero-count call anchors: every direct call site of a profiled function that got no samples
//! gets its callee as a call target with count 0.
//!
//! Why: the compiler's stale-profile matching (`-salvage-stale-profile`) aligns the call sites
//! of the new IR with the call targets and inlinees the profile records, by callee name (a
//! longest common subsequence), then places every other location between two matched anchors.
//! A call that was never sampled leaves no trace in the profile, so its anchor is missing and
//! the sequence can pair the wrong sites (the weak spot the matching's authors name). A count of
//! 0 says nothing about execution the profile did not already say (the site's body count is
//! untouched), and LLVM 19 reads such targets as anchors.
//!
//! Runs last, on the profile as it will be written (after nesting, which would otherwise treat
//! the zero targets as calls to subtract), on every level: top-level and inlinee profiles, and
//! CS contexts (a call site that has a callee context is already an anchor there).

use crate::binary::anchors::CodeAnchors;
use crate::llvm::{ContextFrame, FuncName, LineLocation, canonical_fn_name};
use crate::profile::{Context, FunctionSamples, Profile};
use rayon::prelude::*;
use std::collections::BTreeSet;

/// What [`add_zero_count_anchors`] reads of a binary's anchors: each function's direct calls
/// (its call sites with a statically known callee, in location order) by canonical name, each
/// callee's name one shared text. Made once from the anchors (a function's anchors hold every
/// location, most without a call), read for every profile and inlinee of the function.
pub struct DirectCalls {
    by_function: hashbrown::HashMap<String, Vec<(LineLocation, FuncName)>>,
}

impl DirectCalls {
    /// The direct calls of every function `anchors` has.
    pub fn of(anchors: &CodeAnchors) -> Self {
        let mut callees: hashbrown::HashMap<&str, FuncName> = hashbrown::HashMap::new();
        let by_function = (anchors.functions.iter())
            .map(|(name, f)| {
                let calls = (f.direct_calls())
                    .map(|(loc, callee)| {
                        (loc, callees.entry(callee).or_insert_with(|| callee.into()).clone())
                    })
                    .collect();
                (name.clone(), calls)
            })
            .collect();
        DirectCalls { by_function }
    }

    /// The direct calls of the function named `name` (canonicalised as profiles name it).
    fn get(&self, name: &str) -> Option<&[(LineLocation, FuncName)]> {
        self.by_function.get(canonical_fn_name(name)).map(Vec::as_slice)
    }
}

/// Adds the zero-count call targets; returns how many were added.
pub fn add_zero_count_anchors(profile: &mut Profile, calls: &DirectCalls) -> usize {
    // Call sites that lead to a callee context: every proper prefix of a context, its last frame
    // carrying the call-site location.
    let called_from: BTreeSet<Vec<ContextFrame>> = if profile.kind.context_sensitive {
        profile.functions.keys().filter(|c| c.len() > 1).map(|c| c.callers().to_vec()).collect()
    } else {
        BTreeSet::new()
    };
    // Each profile on its own, on the workers.
    profile
        .functions
        .par_iter_mut()
        .map(|(ctx, fs)| {
            // Nested and non-CS profiles have no callee contexts: no site to make and look up.
            annotate(fs, calls, &|loc| {
                !called_from.is_empty() && {
                    let mut site = ctx.callers().to_vec();
                    site.push(ContextFrame { func: ctx.leaf_name().into(), loc });
                    called_from.contains(&site)
                }
            })
        })
        .sum()
}

/// The canonical names of the functions [`add_zero_count_anchors`] can look anchors up for in
/// `profile` or in what the post-passes make of it: every profile's function, top-level and
/// inlined, at every level, and every function a context names (its frames become inlinee
/// profiles when contexts are nested). Taken before the post-passes, the binary's anchors are
/// read while they run. `context_functions`, when given, are the functions the contexts name
/// (the pre-inliner's trie has them, one per text): then the contexts' frames are not read.
pub fn anchored_functions(
    profile: &Profile,
    context_functions: Option<&[FuncName]>,
) -> BTreeSet<String> {
    type Names<'a> = hashbrown::HashSet<&'a str>;
    fn walk<'a>(fs: &'a FunctionSamples, seen: &mut Names<'a>, out: &mut Names<'a>) {
        for callee in fs.callsites.values().flat_map(|c| c.values()) {
            if seen.insert(&callee.name) {
                out.insert(canonical_fn_name(&callee.name));
            }
            walk(callee, seen, out);
        }
    }
    let (mut seen, mut out) = (Names::new(), Names::new());
    match context_functions {
        Some(functions) => out.extend(functions.iter().map(|f| canonical_fn_name(f))),
        None => context_frame_functions(profile, &mut out),
    }
    for (ctx, fs) in &profile.functions {
        // A profile's function is its context's leaf (named above) unless it is not: mostly the
        // leaf's own shared name, told without reading the text.
        let leaf = !ctx.is_empty() && (fs.name.same(ctx.leaf()) || fs.name == ctx.leaf_name());
        if !leaf && seen.insert(&fs.name) {
            out.insert(canonical_fn_name(&fs.name));
        }
        if !fs.callsites.is_empty() {
            walk(fs, &mut seen, &mut out);
        }
    }
    out.into_iter().map(str::to_string).collect()
}

/// Adds to `out` the canonical name of every function a context of `profile` names.
fn context_frame_functions<'a>(profile: &'a Profile, out: &mut hashbrown::HashSet<&'a str>) {
    let mut seen: hashbrown::HashSet<usize> = hashbrown::HashSet::new();
    let mut note = |func: &'a FuncName| {
        if seen.insert(func.as_ptr() as usize) {
            out.insert(canonical_fn_name(func));
        }
    };
    // A CS profile repeats each function in thousands of contexts: each name is canonicalised
    // once (a context frame's shared text looked at once), and borrowed until the end. Contexts
    // in order share their roots with the one before: its frames are not looked at again, those
    // of a context it extends (the same frames, see `Context::extends`) or else the callers
    // holding the same shared names at the same depths.
    let mut previous: Option<&Context> = None;
    for ctx in profile.functions.keys().filter(|c| !c.is_empty()) {
        let callers = ctx.callers();
        let known = match previous {
            Some(p) if ctx.extends(p) => p.len(),
            Some(p) => {
                callers.iter().zip(p.callers()).take_while(|(a, b)| a.func.same(&b.func)).count()
            }
            None => 0,
        };
        for frame in callers.get(known..).unwrap_or_default() {
            note(&frame.func);
        }
        if known < ctx.len() {
            note(ctx.leaf());
        }
        previous = Some(ctx);
    }
}

/// Annotates `fs` and its inlinees; `has_callee_context(loc)` says whether a CS context below
/// `fs` is called from `loc`.
fn annotate(
    fs: &mut FunctionSamples,
    calls: &DirectCalls,
    has_callee_context: &dyn Fn(LineLocation) -> bool,
) -> usize {
    let mut added = 0;
    for (loc, callee) in calls.get(&fs.name).unwrap_or_default() {
        let loc = *loc;
        let sampled = fs.body.get(&loc).is_some_and(|b| !b.call_targets.is_empty())
            || fs.callsites.get(&loc).is_some_and(|c| !c.is_empty())
            || has_callee_context(loc);
        if !sampled {
            fs.add_call_target(loc, callee, 0);
            added += 1;
        }
    }
    for callees in fs.callsites.values_mut() {
        for callee in callees.values_mut() {
            added += annotate(callee, calls, &|_| false);
        }
    }
    added
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::binary::anchors::FunctionAnchors;
    use crate::profile::Context;

    fn anchors() -> CodeAnchors {
        let mut a = CodeAnchors::default();
        let mut main = FunctionAnchors::default();
        main.add(LineLocation::new(1, 0), None);
        main.add(LineLocation::new(2, 0), Some("foo"));
        main.add(LineLocation::new(3, 0), Some("bar"));
        main.add(LineLocation::new(4, 0), Some("baz"));
        a.functions.insert("main".into(), main);
        let mut foo = FunctionAnchors::default();
        foo.add(LineLocation::new(7, 0), Some("bar"));
        a.functions.insert("foo".into(), foo);
        a
    }

    #[test]
    fn unsampled_direct_calls_get_zero_targets_at_every_level() {
        let mut main = FunctionSamples::new("main");
        main.add_body(LineLocation::new(1, 0), 5);
        main.add_call_target(LineLocation::new(2, 0), &"foo".into(), 5);
        main.callsite_mut(LineLocation::new(3, 0), "bar").total_samples = 4;
        main.callsite_mut(LineLocation::new(5, 0), "foo").add_body(LineLocation::new(1, 0), 3);
        let mut p = Profile::default();
        p.functions.insert(Context::base("main"), main);
        assert_eq!(add_zero_count_anchors(&mut p, &DirectCalls::of(&anchors())), 2);
        let main = &p.functions[&Context::base("main")];
        // 2 (sampled target) and 3 (inlinee) untouched; 4 gets baz:0 on a new 0 body record.
        assert_eq!(main.body[&LineLocation::new(2, 0)].call_targets.len(), 1);
        assert!(!main.body.contains_key(&LineLocation::new(3, 0)));
        assert_eq!(main.body[&LineLocation::new(4, 0)].count, 0);
        assert_eq!(main.body[&LineLocation::new(4, 0)].call_targets["baz"], 0);
        let inl = &main.callsites[&LineLocation::new(5, 0)]["foo"];
        assert_eq!(inl.body[&LineLocation::new(7, 0)].call_targets["bar"], 0);
    }

    /// [`anchored_functions`] of `p`, the same whether its contexts' frames are read or the
    /// functions its trie interned are given.
    fn anchored(p: &Profile) -> Vec<String> {
        let names: Vec<String> = anchored_functions(p, None).into_iter().collect();
        let trie = crate::postpass::trie::ContextTrie::of_contexts(&p.functions);
        let from_trie: Vec<String> =
            anchored_functions(p, Some(trie.names())).into_iter().collect();
        assert_eq!(names, from_trie);
        names
    }

    /// Callers without a profile of their own are named (nesting makes them profiles), as are
    /// inlinees; names are canonical.
    #[test]
    fn anchored_functions_name_every_frame_and_inlinee() {
        let frame = |f: &str, l| ContextFrame { func: f.into(), loc: LineLocation::new(l, 0) };
        let mut p = Profile::default();
        p.kind.context_sensitive = true;
        let mut foo = FunctionSamples::new("foo.llvm.123");
        foo.callsite_mut(LineLocation::new(1, 0), "bar");
        p.functions.insert(Context::new(vec![frame("main", 2), frame("foo.llvm.123", 0)]), foo);
        let baz = Context::new(vec![frame("main", 3), frame("baz", 0)]);
        p.functions.insert(baz, FunctionSamples::new("baz"));
        assert_eq!(anchored(&p), ["bar", "baz", "foo", "main"]);
    }

    /// Contexts that share frames with the one before (a caller's context cut from its callee's,
    /// or the same roots) still name all their frames; a profile whose function is not its
    /// context's leaf names its function too.
    #[test]
    fn anchored_functions_name_frames_shared_with_the_previous_context() {
        let frame = |f: &str, l| ContextFrame { func: f.into(), loc: LineLocation::new(l, 0) };
        let mut p = Profile::default();
        p.kind.context_sensitive = true;
        let long = Context::new(vec![frame("main", 1), frame("foo", 2), frame("bar", 0)]);
        let main = long.callers()[0].clone();
        let other = Context::new(vec![main, frame("baz", 3), frame("qux", 0)]);
        p.functions.insert(long.prefix(2), FunctionSamples::new("foo"));
        p.functions.insert(long, FunctionSamples::new("bar"));
        p.functions.insert(other, FunctionSamples::new("quux.llvm.7"));
        assert_eq!(anchored(&p), ["bar", "baz", "foo", "main", "quux", "qux"]);
    }

    #[test]
    fn cs_call_sites_with_callee_contexts_are_already_anchors() {
        let frame = |f: &str, l| ContextFrame { func: f.into(), loc: LineLocation::new(l, 0) };
        let mut p = Profile::default();
        p.kind.context_sensitive = true;
        p.functions.insert(Context::new(vec![frame("main", 0)]), FunctionSamples::new("main"));
        p.functions.insert(
            Context::new(vec![frame("main", 2), frame("foo", 0)]),
            FunctionSamples::new("foo"),
        );
        assert_eq!(add_zero_count_anchors(&mut p, &DirectCalls::of(&anchors())), 3);
        let main = &p.functions[&Context::new(vec![frame("main", 0)])];
        let targets: Vec<_> =
            main.body.iter().map(|(l, b)| (l.line_offset, b.call_targets.len())).collect();
        assert_eq!(targets, [(3, 1), (4, 1)]);
        let foo = &p.functions[&Context::new(vec![frame("main", 2), frame("foo", 0)])];
        assert_eq!(foo.body[&LineLocation::new(7, 0)].call_targets["bar"], 0);
    }
}
