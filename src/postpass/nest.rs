//! CS → nested conversion (`ProfileConverter::convertCSProfiles`, `--gen-cs-nested-profile`):
//! each context profile moves into its parent context's profile as an inlinee at its call site,
//! replacing the parent's call-target count there; contexts without a parent profile become
//! top-level profiles.

use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

use super::trie::{ContextTrie, merge_samples};
use hashbrown::HashMap;
use rayon::prelude::*;

use crate::llvm::{FuncName, LineLocation, callsite_hash_from_guid, md5_guid};
use crate::profile::{Context, FunctionSamples, Profile, attr};

/// A frame trie node; children ordered by call-site hash as in LLVM, which decides which
/// profile reaches a shared top-level name first (and so whose attributes it keeps). Nodes live
/// in one vector and are walked with an explicit stack: contexts can be deep.
/// Names are the contexts' shared ones (ordered as their text), copied without their text.
struct FrameNode {
    callsite: LineLocation,
    func: FuncName,
    samples: Option<FunctionSamples>,
    children: BTreeMap<ChildKey, usize>,
}

impl FrameNode {
    fn new(callsite: LineLocation, func: FuncName) -> Self {
        FrameNode { callsite, func, samples: None, children: BTreeMap::new() }
    }
}

const ROOT: usize = 0;

/// Converts the contexts of a flat CS profile, taken out of `profile` (in context order), into
/// a nested `profile` (`context_sensitive` becomes false).
/// `merged_base`: `--generate-merged-base-profiles`, also merge every nested profile into its
/// function's top-level profile, marking the nested copy DuplicatedIntoBase.
///
/// The root's children (contexts by their outermost function, neighbours in context order)
/// convert apart, in parallel: a subtree's nesting touches only its own nodes. What reaches the
/// top level is recorded ([`ToTop`]) and replayed in the order of a walk of the whole trie
/// (root children by key, each subtree's record in its order), which decides which profile of
/// a name comes first there.
///
/// `interned`: the pre-inliner's trie, when it ran; the GUIDs of the contexts' names are looked
/// up there (it interned these contexts' names with their GUIDs) rather than each distinct name
/// hashed again.
pub(super) fn convert_cs_to_nested(
    profile: &mut Profile,
    contexts: Vec<(Context, FunctionSamples)>,
    merged_base: bool,
    interned: Option<&ContextTrie>,
) {
    // An empty context has no function; it would land on the root and swallow every top-level
    // profile, so it is dropped.
    // Each subtree's contexts counted first, then moved into a vector of that size (grown one
    // by one, each of a thousand vectors was reallocated a few times).
    let mut sizes: Vec<usize> = Vec::new();
    let mut last: Option<&FuncName> = None;
    for (context, _) in contexts.iter().filter(|(c, _)| !c.is_empty()) {
        let func = outermost(context);
        match sizes.last_mut() {
            Some(n) if last == Some(func) => *n += 1,
            _ => sizes.push(1),
        }
        last = Some(func);
    }
    let mut contexts = contexts.into_iter().filter(|(c, _)| !c.is_empty());
    let subtrees: Vec<Vec<(Context, FunctionSamples)>> = (sizes.into_iter())
        .map(|n| {
            let mut subtree = Vec::with_capacity(n);
            subtree.extend(contexts.by_ref().take(n));
            subtree
        })
        .collect();
    // Without the trie, GUIDs by the address of the (shared) name's text, each name kept so the
    // address stays its own: frames mostly share one name per function.
    let mut guids: HashMap<usize, (FuncName, u64)> = HashMap::new();
    if interned.is_none() {
        for (context, _) in subtrees.iter().flatten() {
            for (func, _) in context.named_frames() {
                guids
                    .entry(func.as_ptr() as usize)
                    .or_insert_with(|| (func.clone(), md5_guid(func)));
            }
        }
    }
    let guid = |func: &FuncName| match interned.and_then(|t| t.guid_of_shared(func)) {
        Some(guid) => guid,
        None => guids.get(&(func.as_ptr() as usize)).map_or_else(|| md5_guid(func), |g| g.1),
    };
    let mut converted: Vec<(ChildKey, Vec<ToTop>)> = subtrees
        .into_par_iter()
        .map(|contexts| {
            let func = outermost(&contexts[0].0).clone();
            let key = (
                callsite_hash_from_guid(guid(&func), LineLocation::default()),
                func,
                LineLocation::default(),
            );
            (key, convert_subtree(contexts, &guid, merged_base))
        })
        .collect();
    converted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    // By the shared names (ordered as their text): no text copied per profile, and the
    // top-level contexts share them too.
    let mut top_level: BTreeMap<FuncName, FunctionSamples> = BTreeMap::new();
    for to_top in converted.into_iter().flat_map(|(_, to_top)| to_top) {
        match to_top {
            ToTop::Move(func, fs) => match top_level.entry(func) {
                // The first profile of a name moves there when merging it into an empty profile
                // would copy it as it is.
                Entry::Vacant(e) if merges_as_is(&fs) => {
                    e.insert(fs);
                }
                e => merge_samples(e.or_default(), &fs),
            },
            ToTop::Duplicate(func, fs) => merge_samples(top_level.entry(func).or_default(), &fs),
        }
    }
    profile.functions = top_level.into_iter().map(|(func, fs)| (Context::base(func), fs)).collect();
    profile.kind.context_sensitive = false;
}

/// A child's key: LLVM orders children by call-site hash; name and location break ties.
type ChildKey = (u64, FuncName, LineLocation);

/// What a subtree's conversion does to the top level, in order.
enum ToTop {
    /// A profile whose parent has none goes to the top level (moved, or merged into the
    /// profile of its name there).
    Move(FuncName, FunctionSamples),
    /// `merged_base`: a nested profile, as it was when nested, is merged into its name's
    /// top-level profile.
    Duplicate(FuncName, FunctionSamples),
}

/// The outermost function of a (non-empty) context.
fn outermost(context: &Context) -> &FuncName {
    context.named_frames().next().expect("a context has a frame").0
}

/// The root child of `contexts` (all of one outermost function, in order) with its subtree,
/// converted: the trie built and walked as [`convert`] walks it.
fn convert_subtree(
    contexts: Vec<(Context, FunctionSamples)>,
    guid: &impl Fn(&FuncName) -> u64,
    merged_base: bool,
) -> Vec<ToTop> {
    let mut nodes =
        vec![FrameNode::new(LineLocation::default(), outermost(&contexts[0].0).clone())];
    for (context, fs) in contexts {
        let mut node = ROOT;
        let mut loc = LineLocation::default();
        for (func, frame_loc) in context.named_frames() {
            let key = (callsite_hash_from_guid(guid(func), loc), func.clone(), loc);
            let next = nodes.len();
            node = *nodes[node].children.entry(key).or_insert(next);
            if node == next {
                nodes.push(FrameNode::new(loc, func.clone()));
            }
            loc = frame_loc;
        }
        nodes[node].samples = Some(fs);
    }
    let mut to_top = Vec::new();
    convert(&mut nodes, &mut to_top, merged_base);
    to_top
}

/// Depth first from the root: once a child's subtree is converted, the child moves into its
/// parent's profile as an inlinee (or to the top level when the parent has no profile).
fn convert(nodes: &mut [FrameNode], to_top: &mut Vec<ToTop>, merged_base: bool) {
    // (node, its children in order, index of the next one to visit)
    let children = |n: &FrameNode| n.children.values().copied().collect::<Vec<_>>();
    let mut todo: Vec<(usize, Vec<usize>, usize)> = vec![(ROOT, children(&nodes[ROOT]), 0)];
    while let Some((_, kids, next)) = todo.last_mut() {
        if let Some(&child) = kids.get(*next) {
            *next += 1;
            todo.push((child, children(&nodes[child]), 0));
            continue;
        }
        let (child, _, _) = todo.pop().expect("not empty");
        let Some((node, _, _)) = todo.last() else { break };
        let node = *node;
        let Some(child_fs) = nodes[child].samples.take() else {
            continue;
        };
        let (callsite, func) = (nodes[child].callsite, nodes[child].func.clone());
        match nodes[node].samples.as_mut() {
            Some(parent) => {
                parent.add_total(child_fs.total_samples);
                let removed = remove_call_target_and_body(parent, callsite, &func);
                parent.total_samples = parent.total_samples.saturating_sub(removed);
                if merged_base {
                    to_top.push(ToTop::Duplicate(func.clone(), child_fs.clone()));
                }
                let callees = parent.callsites.entry(callsite).or_default();
                let nested = callees.entry(func.clone()).or_insert(child_fs);
                if merged_base {
                    nested.attributes |= attr::DUPLICATED_INTO_BASE;
                }
            }
            None => to_top.push(ToTop::Move(func, child_fs)),
        }
    }
}

/// Whether [`merge_samples`] into an empty profile makes a copy of `fs` equal to it: it does
/// unless a callee map within is empty (the merge makes none).
fn merges_as_is(fs: &FunctionSamples) -> bool {
    fs.callsites.values().all(|callees| !callees.is_empty() && callees.values().all(merges_as_is))
}

/// `FunctionSamples::removeCalledTargetAndBodySample`: drops the call target and subtracts its
/// count from the body sample, erasing the body sample if it reaches zero.
fn remove_call_target_and_body(fs: &mut FunctionSamples, loc: LineLocation, callee: &str) -> u64 {
    let Some(body) = fs.body.get_mut(&loc) else {
        return 0;
    };
    let count = body.call_targets.remove(callee).unwrap_or(0).min(body.count);
    body.count -= count;
    if body.count == 0 {
        fs.body.remove(&loc);
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(name: &str, count: u64) -> FunctionSamples {
        let mut fs = FunctionSamples::new(name);
        fs.total_samples = count;
        fs.head_samples = 1;
        fs.checksum = Some(7);
        fs.attributes = attr::SHOULD_BE_INLINED;
        fs.add_body(LineLocation::new(1, 0), count);
        fs.add_call_target(LineLocation::new(2, 0), &"g".into(), count);
        fs
    }

    /// GUIDs from the trie of the contexts give the nesting the GUIDs hashed from the names.
    #[test]
    fn guids_from_the_trie_nest_as_hashed_ones() {
        use crate::llvm::ContextFrame;
        let frame = |f: &str, l| ContextFrame { func: f.into(), loc: LineLocation::new(l, 0) };
        let mut p = Profile::default();
        p.kind.context_sensitive = true;
        let contexts = [
            vec![frame("main", 0)],
            vec![frame("main", 2), frame("f", 0)],
            vec![frame("main", 2), frame("f", 4), frame("g", 0)],
            vec![frame("main", 3), frame("g", 0)],
            vec![frame("h", 1), frame("g", 0)],
        ];
        for (i, frames) in contexts.into_iter().enumerate() {
            let leaf = frames.last().unwrap().func.to_string();
            p.functions.insert(Context::new(frames), nested(&leaf, 10 + i as u64));
        }
        let trie = ContextTrie::of_contexts(&p.functions);
        let nest = |p: &mut Profile, interned| {
            let contexts = std::mem::take(&mut p.functions).into_iter().collect();
            convert_cs_to_nested(p, contexts, true, interned);
        };
        let mut hashed = p.clone();
        nest(&mut hashed, None);
        nest(&mut p, Some(&trie));
        assert_eq!(p, hashed);
        assert!(p.functions.len() > 1);
    }

    /// Moving a first top-level profile stands for merging it into an empty one exactly when
    /// [`merges_as_is`] says so (a nameless profile's attributes are copied too).
    #[test]
    fn a_profile_merges_as_is_unless_a_callee_map_is_empty() {
        let merged = |fs: &FunctionSamples| {
            let mut to = FunctionSamples::default();
            merge_samples(&mut to, fs);
            to
        };
        let mut fs = nested("f", 5);
        fs.callsites.entry(LineLocation::new(2, 0)).or_default().insert("g".into(), nested("", 3));
        assert!(merges_as_is(&fs));
        assert_eq!(merged(&fs), fs);

        let mut empty_callees = fs.clone();
        empty_callees.callsites.values_mut().for_each(|c| {
            c.values_mut().for_each(|g| {
                g.callsites.entry(LineLocation::new(3, 0)).or_default();
            })
        });
        assert!(!merges_as_is(&empty_callees));
        assert_ne!(merged(&empty_callees), empty_callees);
    }
}
