//! Function sizes under inline contexts for `--use-context-cost-for-preinliner`
//! (`BinarySizeContextTracker` in ProfiledBinary.cpp): the binary model feeds every instruction
//! of the profiled functions with its inline stack; the pre-inliner asks for the size of a
//! function under a calling context and gets the longest recorded match.

use std::collections::BTreeMap;

use super::llvm_hash::callsite_hash;
use super::preinliner::ContextSizeOracle;
use crate::profile::{ContextFrame, LineLocation};

/// A trie keyed leaf first: the function itself at (0, 0), then each caller at its call site.
#[derive(Debug)]
pub struct ContextSizeTracker {
    nodes: Vec<SizeNode>,
}

#[derive(Debug, Default)]
struct SizeNode {
    /// `None` until an instruction (or a known-empty inlinee) is recorded here.
    size: Option<u32>,
    /// Ordered by call-site hash like LLVM's `std::map`, which the sibling fallback relies on.
    children: BTreeMap<(u64, String, LineLocation), usize>,
}

impl Default for ContextSizeTracker {
    fn default() -> Self {
        ContextSizeTracker { nodes: vec![SizeNode::default()] }
    }
}

impl ContextSizeTracker {
    /// `addInstructionForContext`: `inline_stack` is the instruction's symbolized inline stack,
    /// outermost function first; every frame but the last carries its call-site location (the
    /// last frame's location is ignored).
    pub fn add_instruction(&mut self, inline_stack: &[ContextFrame], size: u32) {
        let node = self.get_or_create(inline_stack);
        let n = &mut self.nodes[node];
        n.size = Some(n.size.unwrap_or(0).saturating_add(size));
    }

    /// `trackInlineesOptimizedAway`: an inlinee that has pseudo probes but no instructions left
    /// gets a known size of 0 (so it is free to inline). Same stack convention as
    /// [`add_instruction`](Self::add_instruction).
    pub fn mark_known(&mut self, inline_stack: &[ContextFrame]) {
        let node = self.get_or_create(inline_stack);
        self.nodes[node].size.get_or_insert(0);
    }

    fn get_or_create(&mut self, inline_stack: &[ContextFrame]) -> usize {
        let mut node = 0;
        for (i, frame) in inline_stack.iter().rev().enumerate() {
            let loc = if i == 0 { LineLocation::default() } else { frame.loc };
            let key = (callsite_hash(&frame.func, loc), frame.func.clone(), loc);
            node = match self.nodes[node].children.get(&key) {
                Some(&child) => child,
                None => {
                    let child = self.nodes.len();
                    self.nodes.push(SizeNode::default());
                    self.nodes[node].children.insert(key, child);
                    child
                }
            };
        }
        node
    }

    fn child(&self, node: usize, func: &str, loc: LineLocation) -> Option<usize> {
        let key = (callsite_hash(func, loc), func.to_string(), loc);
        self.nodes[node].children.get(&key).copied()
    }
}

impl ContextSizeOracle for ContextSizeTracker {
    /// `getFuncSizeForContext`: walk the context from the leaf outwards, keeping the size of the
    /// deepest matching node that has one; failing that, descend from the last matching node
    /// through first children (the function's size under some other context). No size at all
    /// (an LLVM assertion, undefined in release builds) gives 0.
    fn func_size_for_context(&self, context: &[ContextFrame]) -> u32 {
        let mut size = None;
        let mut node = Some(0);
        let mut last_found = 0;
        for (i, frame) in context.iter().rev().enumerate() {
            let Some(current) = node else { break };
            last_found = current;
            let loc = if i == 0 { LineLocation::default() } else { frame.loc };
            node = self.child(current, &frame.func, loc);
            if let Some(n) = node
                && let Some(s) = self.nodes[n].size
            {
                size = Some(s);
            }
        }
        if size.is_none() {
            let mut current = node.unwrap_or(last_found);
            while size.is_none() {
                let Some(&first) = self.nodes[current].children.values().next() else {
                    break;
                };
                current = first;
                size = self.nodes[current].size;
            }
        }
        size.unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(frames: &[(&str, u32)]) -> Vec<ContextFrame> {
        frames
            .iter()
            .map(|&(f, l)| ContextFrame { func: f.to_string(), loc: LineLocation::new(l, 0) })
            .collect()
    }

    #[test]
    fn longest_recorded_context_wins() {
        let mut sizes = ContextSizeTracker::default();
        // foo on its own: 2 instructions; foo inlined into main at line 3: 5 bytes.
        sizes.add_instruction(&stack(&[("foo", 7)]), 4);
        sizes.add_instruction(&stack(&[("foo", 8)]), 6);
        sizes.add_instruction(&stack(&[("main", 3), ("foo", 1)]), 5);
        let ctx = |frames: &[(&str, u32)]| {
            let mut s = stack(frames);
            s.last_mut().unwrap().loc = LineLocation::default();
            s
        };
        assert_eq!(sizes.func_size_for_context(&ctx(&[("foo", 0)])), 10);
        assert_eq!(sizes.func_size_for_context(&ctx(&[("main", 3), ("foo", 0)])), 5);
        // Deeper than anything recorded: the deepest match with a size.
        assert_eq!(sizes.func_size_for_context(&ctx(&[("x", 1), ("main", 3), ("foo", 0)])), 5);
        // Other call site: the context-less size.
        assert_eq!(sizes.func_size_for_context(&ctx(&[("main", 4), ("foo", 0)])), 10);
    }

    #[test]
    fn falls_back_to_a_size_under_another_context_then_zero() {
        let mut sizes = ContextSizeTracker::default();
        // bar exists only inlined into main.
        sizes.add_instruction(&stack(&[("main", 2), ("bar", 1)]), 3);
        sizes.mark_known(&stack(&[("main", 5), ("gone", 0)]));
        let ctx = stack(&[("other", 1), ("bar", 0)]);
        assert_eq!(sizes.func_size_for_context(&ctx), 3);
        assert_eq!(sizes.func_size_for_context(&stack(&[("main", 5), ("gone", 0)])), 0);
        let empty = ContextSizeTracker::default();
        assert_eq!(empty.func_size_for_context(&stack(&[("unknown", 0)])), 0);
    }
}
