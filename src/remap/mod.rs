//! `profgen remap`: carries a profile made for an old build onto a new build, the way LLVM's
//! stale-profile matcher would when the compiler reads it (`-salvage-stale-profile`,
//! `-salvage-unused-profile`), done once, ahead of time, and reported.
//!
//! In: a [`Profile`] (read by [`crate::reader`]), the new build's [`CodeAnchors`] (and the old
//! build's, when given: the profile alone only knows the call sites that were sampled, or were
//! written as zero-count anchors). Out: the profile keyed by the new build's locations, with
//! its probe checksums, and a [`RemapReport`].
//!
//! 1. Names: MD5 names are resolved by GUID against the new build's functions; a profiled
//!    function the new build lacks is matched to a new function without profile: one whose name
//!    differs only in its Rust hashes ([`stable_fn_name`]: every name of a Rust program changes
//!    them between builds; the only one of its path on both sides, else the most similar of
//!    them), else one whose call-anchor sequences are similar enough (share of the profile's
//!    anchors found in order, above `similarity_threshold`; probe checksums that agree match at
//!    once), compared only with the new functions [`rename::RenameIndex`] finds can pass the
//!    threshold. Beyond LLVM 19 (whose `-salvage-unused-profile` does this in the compiler, in
//!    LLVM 20+).
//! 2. Locations, per function (the profiles of all its copies flattened, at every inline
//!    level and in every context): unchanged probe checksum, carried as is; otherwise
//!    [`matcher::match_locations`] (LLVM's; callees compared but for their Rust hashes), and
//!    with the old build's code (`--old-binary`, unless `--llvm-matching`)
//!    [`content::content_map`] over it where both builds have an
//!    outlined copy of the function: locations follow their code, new code reads nothing.
//!    Every profile of the function (top-level, inlinee, context) is rewritten through that
//!    map: the new location `L` gets what the profile had at `map(L)` (nothing when `L` is not
//!    in the map), as the compiler would read it.
//!
//! Only the profile's functions are read from the builds (anchors, code shapes): a large binary
//! has tens of thousands of functions, a profile a few hundred. Every function of the new build
//! is read only when the profile names one the new build lacks (step 1 compares it with all of
//! them) or carries a symbol list (the new build's is written).

pub mod content;
pub mod matcher;
pub mod rename;

use crate::binary::anchors::{CodeAnchors, FunctionAnchors};
use crate::binary::shape::FunctionShape;
use crate::error::Error;
use crate::llvm::{
    ContextFrame, FuncName, LineLocation, canonical_fn_name, md5_guid, stable_fn_name,
};
use crate::profile::{Context, FunctionSamples, Profile};
use matcher::{LocationMap, match_locations, profile_anchors};
use rename::{RenameIndex, same_function, score, similarity};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

/// What `profgen remap` is asked to do besides its inputs.
#[derive(Clone, Debug)]
pub struct RemapOptions {
    /// A renamed function matches when more than this percentage of the profile's call anchors
    /// are found, in order, in the new function (LLVM's `-func-profile-similarity-threshold`).
    pub similarity_threshold: u32,
    /// Fewer call anchors than this on either side: too little to judge a rename by
    /// (`-min-call-count-for-cg-matching`).
    pub min_anchors: usize,
}

/// Function name → shape of its outlined copy, for the functions a filter accepts (by
/// canonical name).
pub type ShapesOf<'a> =
    &'a dyn Fn(&dyn Fn(&str) -> bool) -> Result<BTreeMap<String, FunctionShape>, Error>;

/// The code of both builds, for content matching ([`content`]): read for the profiled functions
/// only, once their names in each build are known.
pub struct Shapes<'a> {
    pub old: ShapesOf<'a>,
    pub new: ShapesOf<'a>,
}

impl Default for RemapOptions {
    fn default() -> Self {
        RemapOptions { similarity_threshold: 80, min_anchors: 3 }
    }
}

/// How a profiled function got into the new profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Same locations (and checksum): carried as is.
    Exact,
    /// Locations moved: carried through the anchor matching.
    Matched,
    /// The new build has no function of that name, nor one similar enough: dropped.
    Dropped,
}

/// One profiled function (all its copies) in the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionReport {
    /// The name in the old profile.
    pub name: String,
    /// The new name, when it was matched as renamed.
    pub renamed_to: Option<Rename>,
    pub outcome: Outcome,
    /// Body samples (all copies) carried at the same location, at a matched location, dropped.
    pub exact: u64,
    pub matched: u64,
    pub dropped: u64,
}

/// A profiled function the new build lacks matched to a new function without profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rename {
    /// The new name.
    pub to: String,
    /// How similar the two are (percent, [`rename::score`]); `None` when they have too little
    /// to compare (only possible for the same Rust path).
    pub similarity: Option<u32>,
    /// The names differ only in their Rust hashes ([`stable_fn_name`]).
    pub same_path: bool,
}

/// What remapping did.
#[derive(Clone, Debug, Default)]
pub struct RemapReport {
    /// Every function of the old profile, by name.
    pub functions: Vec<FunctionReport>,
    /// CS contexts dropped because a call site on them has no place in the new build.
    pub contexts_dropped: usize,
    /// Locations were matched by content (both builds' code), not by call anchors alone.
    pub by_content: bool,
}

impl RemapReport {
    /// (functions, samples) per outcome: exact, matched, dropped.
    pub fn totals(&self) -> [(usize, u64); 3] {
        let mut t = [(0, 0); 3];
        for f in &self.functions {
            let i = match f.outcome {
                Outcome::Exact => 0,
                Outcome::Matched => 1,
                Outcome::Dropped => 2,
            };
            t[i].0 += 1;
        }
        for f in &self.functions {
            t[0].1 += f.exact;
            t[1].1 += f.matched;
            t[2].1 += f.dropped;
        }
        t
    }

    /// One line for stderr.
    pub fn summary_line(&self) -> String {
        let [e, m, d] = self.totals();
        let renamed = self.functions.iter().filter(|f| f.renamed_to.is_some()).count();
        let mut line = format!(
            "profgen remap: {} functions: {} carried exactly, {} matched by {} ({renamed} renamed), {} dropped; samples: {} exact, {} matched, {} dropped",
            self.functions.len(),
            e.0,
            m.0,
            if self.by_content { "content" } else { "anchors" },
            d.0,
            e.1,
            m.1,
            d.1
        );
        if self.contexts_dropped > 0 {
            line.push_str(&format!("; {} contexts dropped", self.contexts_dropped));
        }
        line
    }

    /// The per-function report, one line each, most samples first.
    pub fn table(&self) -> String {
        let mut rows: Vec<&FunctionReport> = self.functions.iter().collect();
        rows.sort_by(|a, b| {
            (b.exact + b.matched + b.dropped)
                .cmp(&(a.exact + a.matched + a.dropped))
                .then(a.name.cmp(&b.name))
        });
        let mut out = String::from("# outcome\texact\tmatched\tdropped\tfunction\n");
        for f in rows {
            let outcome = match f.outcome {
                Outcome::Exact => "exact",
                Outcome::Matched => "matched",
                Outcome::Dropped => "dropped",
            };
            out.push_str(&format!(
                "{outcome}\t{}\t{}\t{}\t{}",
                f.exact, f.matched, f.dropped, f.name
            ));
            if let Some(r) = &f.renamed_to {
                out.push_str(&format!(" -> {} (renamed", r.to));
                if r.same_path {
                    out.push_str(", same Rust path");
                }
                if let Some(sim) = r.similarity {
                    out.push_str(&format!(", similarity {sim}%"));
                }
                out.push(')');
            }
            out.push('\n');
        }
        out
    }
}

/// The per-function mapping decided before rewriting.
struct FunctionMap {
    map: LocationMap,
    /// Identity: the profile's locations are the new build's.
    exact: bool,
    checksum: Option<u64>,
    /// Content matching: for each old call site, the one new location that gets its inlinee
    /// profiles (several new locations can read one old location; its body count is a count
    /// per location, but an inlinee's samples must be carried once).
    callsites: Option<BTreeMap<LineLocation, LineLocation>>,
}

/// Whether the new build's function `name` (canonical) can be one `old` (names possibly MD5
/// GUIDs) names: the new build's anchors [`remap_profile`] reads are those of the functions
/// this accepts, unless [`needs_every_function`] says otherwise.
pub fn named_by(old: &Profile, md5_names: bool) -> impl Fn(&str) -> bool + Sync + use<> {
    let names: BTreeSet<String> =
        all_names(old).iter().map(|n| canonical_fn_name(n).to_string()).collect();
    move |name: &str| {
        names.contains(name) || md5_names && names.contains(&md5_guid(name).to_string())
    }
}

/// Whether remapping `old` onto a build whose functions `old` names have the anchors `new`
/// reads every function of the new build: to find where a function the new build lacks went
/// (a renamed function is one without profile), or to write the new build's symbol list.
pub fn needs_every_function(old: &Profile, md5_names: bool, new: &CodeAnchors) -> bool {
    let profile = rename(old, &md5_renames(old, md5_names, new));
    old.symbol_list.is_some() || flatten(&profile).keys().any(|n| !new.functions.contains_key(n))
}

/// The old build's functions [`remap_profile`] reads anchors of (canonical names): those
/// `old` names, MD5 GUIDs resolved against the new build.
pub fn old_functions(old: &Profile, md5_names: bool, new: &CodeAnchors) -> BTreeSet<String> {
    let profile = rename(old, &md5_renames(old, md5_names, new));
    all_names(&profile).iter().map(|n| canonical_fn_name(n).to_string()).collect()
}

/// MD5 names of `old` resolved by GUID against the new build's functions.
fn md5_renames(old: &Profile, md5_names: bool, new: &CodeAnchors) -> BTreeMap<String, String> {
    let mut renames: BTreeMap<String, String> = BTreeMap::new();
    if md5_names {
        let by_guid: BTreeMap<String, &String> =
            new.functions.keys().map(|n| (md5_guid(n).to_string(), n)).collect();
        for name in all_names(old) {
            if let Some(real) = by_guid.get(&name) {
                renames.insert(name, (*real).clone());
            }
        }
    }
    renames
}

/// Remaps `old` (names possibly MD5 GUIDs, `md5_names`) onto the new build. `new` holds the
/// anchors of the functions [`named_by`] accepts, or of every function when
/// [`needs_every_function`]; `old_code` those of [`old_functions`].
pub fn remap_profile(
    old: &Profile,
    md5_names: bool,
    new: &CodeAnchors,
    old_code: Option<&CodeAnchors>,
    shapes: Option<Shapes<'_>>,
    opts: &RemapOptions,
) -> Result<(Profile, RemapReport), Error> {
    // 1. Names.
    let renames = md5_renames(old, md5_names, new);
    let profile = rename(old, &renames);
    let flat = flatten(&profile);
    let mut similar: BTreeMap<String, Rename> = BTreeMap::new();
    let used = all_names(&profile);
    let unused: Vec<&String> = flat.keys().filter(|n| !new.functions.contains_key(*n)).collect();
    let orphans: Vec<(&String, &FunctionAnchors)> =
        new.functions.iter().filter(|(n, _)| !used.contains(*n)).collect();
    let index = RenameIndex::new(&orphans, opts);
    let mut unused_paths: BTreeMap<Cow<str>, usize> = BTreeMap::new();
    for u in &unused {
        *unused_paths.entry(stable_fn_name(u)).or_default() += 1;
    }
    // (same Rust path, similarity, common tail, old name, new name)
    let mut candidates: Vec<(bool, Option<u32>, usize, &String, &String)> = Vec::new();
    for u in &unused {
        let fs = &flat[*u];
        let anchors = old_anchor_list(u, fs, old_code);
        let locations: BTreeSet<LineLocation> = match old_code.and_then(|c| c.get(u)) {
            Some(f) => f.locations.keys().copied().collect(),
            None => fs.body.keys().chain(fs.callsites.keys()).copied().collect(),
        };
        let same_path = index.same_path(u);
        if !same_path.is_empty() {
            // A Rust function whose name only changed its hashes: that function when it is
            // the only one of its path on both sides (however much its code changed), else
            // the most similar of them.
            let only = same_path.len() == 1 && unused_paths[&stable_fn_name(u)] == 1;
            for &i in same_path {
                let (o, f) = orphans[i];
                let sim = if only {
                    score(fs, &anchors, &locations, f, opts)
                } else {
                    similarity(fs, &anchors, &locations, f, opts)
                };
                if only || sim.is_some() {
                    candidates.push((true, sim, common_suffix(u, o), u, o));
                }
            }
            continue;
        }
        for i in index.candidates(fs.checksum, &anchors, &locations) {
            let (o, f) = orphans[i];
            if let Some(sim) = similarity(fs, &anchors, &locations, f, opts) {
                candidates.push((false, Some(sim), common_suffix(u, o), u, o));
            }
        }
    }
    // The same Rust path first, then most similar first; between equals, the names sharing the
    // longest tail (a renamed C++ function keeps its mangled parameter types).
    candidates.sort_by(|a, b| {
        (b.0, b.1, b.2).cmp(&(a.0, a.1, a.2)).then(a.3.cmp(b.3)).then(a.4.cmp(b.4))
    });
    let mut taken: BTreeSet<&String> = BTreeSet::new();
    let mut renamed_names: BTreeMap<String, String> = BTreeMap::new();
    for (same_path, similarity, _, u, o) in candidates {
        if similar.contains_key(u.as_str()) || taken.contains(o) {
            continue;
        }
        taken.insert(o);
        similar.insert(u.clone(), Rename { to: o.clone(), similarity, same_path });
        renamed_names.insert(u.clone(), o.clone());
    }
    let profile = rename(&profile, &renamed_names);
    let flat = flatten(&profile);

    // 2. Locations, per function.
    let mut maps: BTreeMap<String, FunctionMap> = BTreeMap::new();
    let inverse: BTreeMap<&String, &String> = renamed_names.iter().map(|(a, b)| (b, a)).collect();
    let shapes = match shapes {
        Some(s) => {
            let old_names: BTreeSet<&str> =
                flat.keys().map(|n| inverse.get(n).map_or(n.as_str(), |o| o.as_str())).collect();
            let old = (s.old)(&|n| old_names.contains(n))?;
            let new = (s.new)(&|n| flat.contains_key(n))?;
            Some((old, new))
        }
        None => None,
    };
    for (name, fs) in &flat {
        let Some(code) = new.functions.get(name) else { continue };
        if code.checksum.is_some() && code.checksum == fs.checksum {
            let map = code.locations.keys().map(|l| (*l, *l)).collect();
            let checksum = code.checksum;
            maps.insert(name.clone(), FunctionMap { map, exact: true, checksum, callsites: None });
            continue;
        }
        let old_name = inverse.get(name).map_or(name.as_str(), |n| n.as_str());
        let mut anchors: BTreeMap<LineLocation, String> = old_anchor_list(old_name, fs, old_code)
            .into_iter()
            .map(|(l, c)| (l, renamed_names.get(&c).cloned().unwrap_or(c)))
            .collect();
        if old_code.is_some() {
            // What the profile saw stays an anchor where the old build's code says nothing.
            for (l, c) in profile_anchors(fs) {
                anchors.entry(l).or_insert(c);
            }
        }
        let mut map = match_locations(&code.locations, &anchors, same_function);
        let mut callsites = None;
        if let Some((old_shapes, new_shapes)) = &shapes
            && let (Some(o), Some(n)) = (old_shapes.get(old_name), new_shapes.get(name))
        {
            let same = |new: &str, old: &str| {
                same_function(new, renamed_names.get(old).map_or(old, String::as_str))
            };
            map = content::content_map(o, n, same, &map);
            callsites = Some(callsite_targets(&map, fs, code));
        }
        let exact = code.locations.keys().all(|l| map.get(l) == Some(l))
            && map.iter().all(|(a, b)| a == b)
            && fs.checksum == code.checksum;
        let checksum = code.checksum;
        maps.insert(name.clone(), FunctionMap { map, exact, checksum, callsites });
    }

    // 3. Rewrite every profile through its function's map.
    let mut stats: BTreeMap<FuncName, [u64; 3]> = BTreeMap::new();
    let mut out = Profile { kind: profile.kind, symbol_list: None, ..Default::default() };
    let mut contexts_dropped = 0;
    for (ctx, fs) in &profile.functions {
        let Some(new_ctx) = remap_context(ctx, &maps, &new.functions) else {
            contexts_dropped += 1;
            drop_all(fs, &mut stats);
            continue;
        };
        let Some(new_fs) = rewrite(fs, &maps, &mut stats) else { continue };
        match out.functions.get_mut(&new_ctx) {
            Some(existing) => existing.merge(&new_fs),
            None => {
                out.functions.insert(new_ctx, new_fs);
            }
        }
    }
    out.symbol_list = old.symbol_list.as_ref().map(|_| new.functions.keys().cloned().collect());

    let to_old: BTreeMap<&String, &String> = renames
        .iter()
        .map(|(a, b)| (b, a))
        .chain(renamed_names.iter().map(|(a, b)| (b, a)))
        .collect();
    let mut report =
        RemapReport { contexts_dropped, by_content: shapes.is_some(), ..Default::default() };
    for (name, [exact, matched, dropped]) in stats {
        let name = name.to_string();
        let outcome = match maps.get(&name) {
            None => Outcome::Dropped,
            Some(m) if m.exact => Outcome::Exact,
            Some(_) => Outcome::Matched,
        };
        let mut old_name = name.clone();
        while let Some(o) = to_old.get(&old_name) {
            if **o == old_name {
                break;
            }
            old_name = (*o).clone();
        }
        let renamed_to = renamed_names.get(&old_name).and_then(|_| similar.get(&old_name).cloned());
        report.functions.push(FunctionReport {
            name: old_name,
            renamed_to,
            outcome,
            exact,
            matched,
            dropped,
        });
    }
    report.functions.sort_by(|a, b| a.name.cmp(&b.name));
    Ok((out, report))
}

/// For each call site of `fs` that `map` reads, the new location that carries its inlinees: one
/// whose new code calls one of them, else the same location, else the first.
fn callsite_targets(
    map: &LocationMap,
    fs: &FunctionSamples,
    code: &FunctionAnchors,
) -> BTreeMap<LineLocation, LineLocation> {
    let mut out = BTreeMap::new();
    for (from, callees) in &fs.callsites {
        let readers: Vec<LineLocation> =
            map.iter().filter(|(_, f)| *f == from).map(|(to, _)| *to).collect();
        let calls = |to: &&LineLocation| {
            code.locations
                .get(to)
                .and_then(|c| c.as_deref())
                .is_some_and(|c| callees.contains_key(c))
        };
        let pick = readers
            .iter()
            .find(calls)
            .or_else(|| readers.iter().find(|to| *to == from))
            .or(readers.first());
        if let Some(to) = pick {
            out.insert(*from, *to);
        }
    }
    out
}

/// The call anchors of an old function: from the old build's code when given, else what the
/// profile recorded.
fn old_anchor_list(
    name: &str,
    fs: &FunctionSamples,
    old_code: Option<&CodeAnchors>,
) -> BTreeMap<LineLocation, String> {
    match old_code.and_then(|c| c.get(name)) {
        Some(f) => f.locations.iter().filter_map(|(l, c)| c.clone().map(|c| (*l, c))).collect(),
        None => profile_anchors(fs),
    }
}

/// The length of the longest common suffix of two names.
fn common_suffix(a: &str, b: &str) -> usize {
    a.bytes().rev().zip(b.bytes().rev()).take_while(|(x, y)| x == y).count()
}

/// Every function name the profile mentions: profiles at every level, call targets, contexts.
/// Collected as the shared names and copied once each: a copy per mention copied a long name
/// as often as a binary profile refers to it.
fn all_names(p: &Profile) -> BTreeSet<String> {
    fn walk<'a>(fs: &'a FunctionSamples, out: &mut BTreeSet<&'a FuncName>) {
        out.insert(&fs.name);
        for b in fs.body.values() {
            out.extend(b.call_targets.keys());
        }
        for callees in fs.callsites.values() {
            for c in callees.values() {
                walk(c, out);
            }
        }
    }
    let mut out = BTreeSet::new();
    for (ctx, fs) in &p.functions {
        out.extend(ctx.named_frames().map(|(func, _)| func));
        walk(fs, &mut out);
    }
    out.into_iter().map(|n| n.to_string()).collect()
}

/// `p` with every function name in `renames` replaced. Names not renamed stay shared, and each
/// shared name is looked up once: a copy (or lookup) per mention read a long name as often as a
/// binary profile refers to it.
fn rename(p: &Profile, renames: &BTreeMap<String, String>) -> Profile {
    struct Renames<'a> {
        renames: &'a BTreeMap<String, String>,
        /// By the name's text address (the profile holds each name throughout).
        seen: hashbrown::HashMap<usize, FuncName>,
    }
    impl Renames<'_> {
        fn of(&mut self, n: &FuncName) -> FuncName {
            let renames = self.renames;
            let new = self.seen.entry(n.as_ptr() as usize).or_insert_with(|| {
                renames.get(n.as_str()).map_or_else(|| n.clone(), |r| r.as_str().into())
            });
            new.clone()
        }
    }
    fn walk(fs: &FunctionSamples, renames: &mut Renames) -> FunctionSamples {
        // Not a clone of `fs` emptied: that copied each inlinee's whole subtree once per level.
        let mut out = FunctionSamples {
            name: renames.of(&fs.name),
            total_samples: fs.total_samples,
            head_samples: fs.head_samples,
            checksum: fs.checksum,
            attributes: fs.attributes,
            ..Default::default()
        };
        for (loc, b) in &fs.body {
            out.add_body(*loc, b.count);
            for (t, n) in &b.call_targets {
                out.add_call_target(*loc, &renames.of(t), *n);
            }
        }
        for (loc, callees) in &fs.callsites {
            for c in callees.values() {
                let c = walk(c, renames);
                match out.callsites.entry(*loc).or_default().entry(c.name.clone()) {
                    std::collections::btree_map::Entry::Occupied(mut e) => e.get_mut().merge(&c),
                    std::collections::btree_map::Entry::Vacant(e) => {
                        e.insert(c);
                    }
                }
            }
        }
        out
    }
    let mut out =
        Profile { kind: p.kind, symbol_list: p.symbol_list.clone(), ..Default::default() };
    let renames = &mut Renames { renames, seen: Default::default() };
    for (ctx, fs) in &p.functions {
        let ctx = Context::from_frames(
            ctx.named_frames().map(|(func, loc)| ContextFrame { func: renames.of(func), loc }),
        );
        let fs = walk(fs, renames);
        match out.functions.get_mut(&ctx) {
            Some(e) => e.merge(&fs),
            None => {
                out.functions.insert(ctx, fs);
            }
        }
    }
    out
}

/// Every function's profiles merged by name, across contexts and inline levels: each with its
/// own body and its inlinees' totals, what matching reads, but not their bodies and inlinees
/// (each nested profile is merged under its own name; merging whole subtrees made memory grow
/// with the square of the nesting depth: 600 levels, 180 KB of text, took 760 MB).
fn flatten(p: &Profile) -> BTreeMap<String, FunctionSamples> {
    // By the shared names, copied once each: a copy per profile copied a long name as often as
    // a binary profile refers to it.
    fn walk(fs: &FunctionSamples, out: &mut BTreeMap<FuncName, FunctionSamples>) {
        let flat = out.entry(fs.name.clone()).or_insert_with(|| FunctionSamples::new(&fs.name));
        flat.add_total(fs.total_samples);
        flat.add_head(fs.head_samples);
        flat.merge_body(fs);
        if flat.checksum.is_none() {
            flat.checksum = fs.checksum;
        }
        flat.attributes |= fs.attributes;
        for (loc, callees) in &fs.callsites {
            for (name, c) in callees {
                flat.shared_callsite_mut(*loc, name).add_total(c.total_samples);
            }
        }
        for callees in fs.callsites.values() {
            for c in callees.values() {
                walk(c, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    for fs in p.functions.values() {
        walk(fs, &mut out);
    }
    out.into_iter().map(|(name, fs)| (name.to_string(), fs)).collect()
}

/// A CS context's call sites moved to the new build's locations: each caller frame's call site
/// is the new location whose map reads it, a call site to the next frame's function first.
fn remap_context(
    ctx: &Context,
    maps: &BTreeMap<String, FunctionMap>,
    code: &BTreeMap<String, FunctionAnchors>,
) -> Option<Context> {
    if ctx.len() == 1 {
        return Some(ctx.clone());
    }
    let old = ctx.to_vec();
    let mut frames = Vec::with_capacity(old.len());
    for w in old.windows(2) {
        let (caller, callee) = (&w[0], &w[1]);
        let m = maps.get(caller.func.as_str())?;
        let calls = |l: &LineLocation| {
            code.get(caller.func.as_str())
                .and_then(|f| f.locations.get(l))
                .is_some_and(|c| c.as_deref() == Some(callee.func.as_str()))
        };
        let sources: Vec<LineLocation> =
            m.map.iter().filter(|(_, to)| **to == caller.loc).map(|(from, _)| *from).collect();
        let loc = sources.iter().find(|l| calls(l)).or(sources.first())?;
        frames.push(ContextFrame { func: caller.func.clone(), loc: *loc });
    }
    frames.push(old.last().expect("non-empty").clone());
    Some(Context::new(frames))
}

/// Counts every body sample of `fs` and its inlinees as dropped.
fn drop_all(fs: &FunctionSamples, stats: &mut BTreeMap<FuncName, [u64; 3]>) {
    let s = stats.entry(fs.name.clone()).or_default();
    s[2] += fs.body.values().map(|b| b.count).sum::<u64>();
    for callees in fs.callsites.values() {
        for c in callees.values() {
            drop_all(c, stats);
        }
    }
}

/// `fs` through its function's map (None when the new build has no such function).
fn rewrite(
    fs: &FunctionSamples,
    maps: &BTreeMap<String, FunctionMap>,
    stats: &mut BTreeMap<FuncName, [u64; 3]>,
) -> Option<FunctionSamples> {
    let Some(m) = maps.get(fs.name.as_str()) else {
        drop_all(fs, stats);
        return None;
    };
    let mut out = FunctionSamples {
        name: fs.name.clone(),
        total_samples: fs.total_samples,
        head_samples: fs.head_samples,
        checksum: m.checksum.or(fs.checksum),
        attributes: fs.attributes,
        ..Default::default()
    };
    // Which old locations are read, and whether at the same place. Unchanged functions keep
    // every location, also those the new build's code does not show.
    let identity: LocationMap;
    let map = if m.exact {
        identity = fs.body.keys().chain(fs.callsites.keys()).map(|l| (*l, *l)).collect();
        &identity
    } else {
        &m.map
    };
    let mut read: BTreeMap<LineLocation, bool> = BTreeMap::new();
    for (&to, &from) in map {
        if let Some(b) = fs.body.get(&from) {
            out.body.insert(to, b.clone());
        }
        let carried = m.callsites.as_ref().is_none_or(|c| c.get(&from) == Some(&to));
        if let Some(callees) = fs.callsites.get(&from).filter(|_| carried) {
            for c in callees.values() {
                if let Some(c) = rewrite(c, maps, stats) {
                    match out.callsites.entry(to).or_default().entry(c.name.clone()) {
                        std::collections::btree_map::Entry::Occupied(mut e) => {
                            e.get_mut().merge(&c)
                        }
                        std::collections::btree_map::Entry::Vacant(e) => {
                            e.insert(c);
                        }
                    }
                }
            }
        }
        *read.entry(from).or_default() |= to == from;
    }
    for (loc, callees) in &fs.callsites {
        if !read.contains_key(loc) {
            for c in callees.values() {
                drop_all(c, stats);
            }
        }
    }
    let s = stats.entry(fs.name.clone()).or_default();
    for (loc, b) in &fs.body {
        match read.get(loc) {
            Some(true) => s[0] += b.count,
            Some(false) => s[1] += b.count,
            None => s[2] += b.count,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Between two builds of a Rust program every name changes its hash: a function follows its
    /// path (the only one of it) however its code changed, the instances of a generic function
    /// (one path) their most similar one, and call anchors match across the hashes.
    #[test]
    fn rust_functions_follow_their_path_across_hash_changes() {
        let loc = |l| LineLocation::new(l, 0);
        let mut profile = Profile::default();
        let mut parse = FunctionSamples::new("_ZN3app5parse17h0123456789abcdefE");
        parse.add_body(loc(1), 10);
        parse.add_call_target(loc(2), &"_ZN3app4lex17h1111111111111111E".into(), 5);
        profile.functions.insert(Context::base(&parse.name), parse);
        for (hash, callee) in [("aaaaaaaaaaaaaaaa", "a"), ("bbbbbbbbbbbbbbbb", "b")] {
            let mut drop = FunctionSamples::new(format!("_ZN4core3ptr4drop17h{hash}E"));
            for l in 1..4 {
                drop.add_call_target(loc(l), &callee.into(), 1);
            }
            profile.functions.insert(Context::base(&drop.name), drop);
        }
        let mut new = CodeAnchors::default();
        let mut add = |name: &str, calls: &[(u32, &str)]| {
            let f = new.functions.entry(name.to_string()).or_default();
            for (l, c) in calls {
                f.add(loc(*l), Some(c));
            }
        };
        // Code changed: the call moved a line down.
        add("_ZN3app5parse17hfedcba9876543210E", &[(3, "_ZN3app4lex17h2222222222222222E")]);
        add("_ZN3app4lex17h2222222222222222E", &[]);
        add("_ZN4core3ptr4drop17hcccccccccccccccdE", &[(1, "b"), (2, "b"), (3, "b")]);
        add("_ZN4core3ptr4drop17hdddddddddddddddcE", &[(1, "a"), (2, "a"), (3, "a")]);
        let (out, report) =
            remap_profile(&profile, false, &new, None, None, &RemapOptions::default()).unwrap();
        let renamed: Vec<(&str, &str, bool)> = report
            .functions
            .iter()
            .filter_map(|f| f.renamed_to.as_ref().map(|r| (&*f.name, &*r.to, r.same_path)))
            .collect();
        assert_eq!(
            renamed,
            [
                ("_ZN3app5parse17h0123456789abcdefE", "_ZN3app5parse17hfedcba9876543210E", true),
                (
                    "_ZN4core3ptr4drop17haaaaaaaaaaaaaaaaE",
                    "_ZN4core3ptr4drop17hdddddddddddddddcE",
                    true
                ),
                (
                    "_ZN4core3ptr4drop17hbbbbbbbbbbbbbbbbE",
                    "_ZN4core3ptr4drop17hcccccccccccccccdE",
                    true
                ),
            ]
        );
        let parse = &out.functions[&Context::base("_ZN3app5parse17hfedcba9876543210E")];
        assert_eq!(parse.body[&loc(3)].call_targets.len(), 1, "{parse:?}");
    }
}
