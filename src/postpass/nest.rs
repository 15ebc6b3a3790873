//! CS → nested conversion (`ProfileConverter::convertCSProfiles`, `--gen-cs-nested-profile`):
//! each context profile moves into its parent context's profile as an inlinee at its call site,
//! replacing the parent's call-target count there; contexts without a parent profile become
//! top-level profiles.

use std::collections::BTreeMap;

use super::trie::merge_samples;
use crate::llvm::{LineLocation, callsite_hash};
use crate::profile::{Context, FunctionSamples, Profile, attr};

/// A frame trie node; children ordered by call-site hash as in LLVM, which decides which
/// profile reaches a shared top-level name first (and so whose attributes it keeps).
#[derive(Default)]
struct FrameNode {
    callsite: LineLocation,
    func: String,
    samples: Option<FunctionSamples>,
    children: BTreeMap<(u64, String, LineLocation), FrameNode>,
}

/// Converts a flat CS profile into a nested one (`context_sensitive` becomes false).
/// `merged_base`: `--generate-merged-base-profiles`, also merge every nested profile into its
/// function's top-level profile, marking the nested copy DuplicatedIntoBase.
pub fn convert_cs_to_nested(profile: &mut Profile, merged_base: bool) {
    let mut root = FrameNode::default();
    // An empty context has no function; it would land on the root and swallow every top-level
    // profile, so it is dropped.
    for (context, fs) in
        std::mem::take(&mut profile.functions).into_iter().filter(|(c, _)| !c.0.is_empty())
    {
        let mut node = &mut root;
        let mut loc = LineLocation::default();
        for frame in &context.0 {
            let key = (callsite_hash(&frame.func, loc), frame.func.clone(), loc);
            node = node.children.entry(key).or_insert_with(|| FrameNode {
                callsite: loc,
                func: frame.func.clone(),
                ..Default::default()
            });
            loc = frame.loc;
        }
        node.samples = Some(fs);
    }
    let mut top_level: BTreeMap<String, FunctionSamples> = BTreeMap::new();
    convert(&mut root, &mut top_level, merged_base);
    profile.functions =
        top_level.into_iter().map(|(name, fs)| (Context::base(&name), fs)).collect();
    profile.kind.context_sensitive = false;
}

fn convert(
    node: &mut FrameNode,
    top_level: &mut BTreeMap<String, FunctionSamples>,
    merged_base: bool,
) {
    for child in node.children.values_mut() {
        convert(child, top_level, merged_base);
        let Some(child_fs) = child.samples.take() else {
            continue;
        };
        match node.samples.as_mut() {
            Some(parent) => {
                parent.add_total(child_fs.total_samples);
                let removed = remove_call_target_and_body(parent, child.callsite, &child.func);
                parent.total_samples = parent.total_samples.saturating_sub(removed);
                if merged_base {
                    merge_samples(top_level.entry(child.func.clone()).or_default(), &child_fs);
                }
                let callees = parent.callsites.entry(child.callsite).or_default();
                let nested = callees.entry(child.func.clone()).or_insert(child_fs);
                if merged_base {
                    nested.attributes |= attr::DUPLICATED_INTO_BASE;
                }
            }
            None => merge_samples(top_level.entry(child.func.clone()).or_default(), &child_fs),
        }
    }
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
