//! The context trie of `SampleContextTracker`: one node per calling context, children ordered
//! by `getCallSiteHash` as LLVM's `std::map<uint64_t, ContextTrieNode>` orders them, with the
//! promote-and-merge operation the pre-inliner uses to build base profiles.

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::llvm_hash::callsite_hash;
use crate::profile::{Context, ContextFrame, FunctionSamples, LineLocation, Profile};

/// `ContextStateMask` bits.
pub(crate) mod state {
    pub const RAW: u32 = 1;
    pub const SYNTHETIC: u32 = 2;
    pub const INLINED: u32 = 4;
    pub const MERGED: u32 = 8;
}

pub(crate) type NodeId = usize;
pub(crate) type SampleId = usize;
pub(crate) const ROOT: NodeId = 0;

/// Child key: LLVM keys by the hash alone; name and location only break (theoretical) ties.
type ChildKey = (u64, String, LineLocation);

pub(crate) struct Node {
    pub func: String,
    pub callsite: LineLocation,
    pub parent: Option<NodeId>,
    children: BTreeMap<ChildKey, NodeId>,
    pub samples: Option<SampleId>,
}

pub(crate) struct Sample {
    pub fs: FunctionSamples,
    pub state: u32,
}

pub(crate) struct ContextTrie {
    nodes: Vec<Node>,
    pub samples: Vec<Sample>,
    sample_node: Vec<NodeId>,
    /// `FuncToCtxtProfiles`: every profile of a function, in breadth-first trie order.
    func_to_profiles: HashMap<String, Vec<SampleId>>,
}

impl ContextTrie {
    /// A trie holding only the root (no profiles): the shape other per-context data (the
    /// binary's context sizes) is keyed by.
    pub fn new() -> Self {
        let root = Node {
            func: String::new(),
            callsite: LineLocation::default(),
            parent: None,
            children: BTreeMap::new(),
            samples: None,
        };
        ContextTrie {
            nodes: vec![root],
            samples: Vec::new(),
            sample_node: Vec::new(),
            func_to_profiles: HashMap::new(),
        }
    }

    /// Number of nodes, root included; node ids are `0..node_count()`.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Builds the trie from a flat CS profile, taking its profiles out of `profile`.
    pub fn from_profile(profile: &mut Profile) -> Self {
        let mut trie = ContextTrie::new();
        // An empty context has no function to attach to; it is dropped.
        let contexts = std::mem::take(&mut profile.functions)
            .into_iter()
            .filter(|(c, _)| !c.0.is_empty());
        for (context, fs) in contexts {
            let node = trie.get_or_create_path(&context);
            let id = trie.samples.len();
            trie.samples.push(Sample {
                fs,
                state: state::RAW,
            });
            trie.sample_node.push(node);
            trie.nodes[node].samples = Some(id);
        }
        for node in trie.bfs() {
            if let Some(s) = trie.nodes[node].samples {
                let name = trie.nodes[node].func.clone();
                trie.func_to_profiles.entry(name).or_default().push(s);
            }
        }
        trie
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }

    pub fn node_of(&self, sample: SampleId) -> NodeId {
        self.sample_node[sample]
    }

    /// Children in LLVM's iteration order.
    pub fn children(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        self.nodes[id].children.values().copied()
    }

    /// Breadth-first order from the root (`SampleContextTracker::Iterator`), root included.
    pub fn bfs(&self) -> Vec<NodeId> {
        let mut order = Vec::new();
        let mut queue = VecDeque::from([ROOT]);
        while let Some(n) = queue.pop_front() {
            order.push(n);
            queue.extend(self.children(n));
        }
        order
    }

    fn get_or_create_path(&mut self, context: &Context) -> NodeId {
        let mut node = ROOT;
        let mut loc = LineLocation::default();
        for frame in &context.0 {
            node = self.get_or_create_child(node, loc, &frame.func);
            loc = frame.loc;
        }
        node
    }

    /// `getChildContext(CallSite, Name)`.
    pub fn child(&self, parent: NodeId, loc: LineLocation, func: &str) -> Option<NodeId> {
        // Scan the children with this hash (no key allocation: lookups are hot).
        let hash = callsite_hash(func, loc);
        self.nodes[parent]
            .children
            .range((hash, String::new(), LineLocation::default())..)
            .take_while(|((h, _, _), _)| *h == hash)
            .find(|((_, name, l), _)| name == func && *l == loc)
            .map(|(_, &id)| id)
    }

    /// `getOrCreateChildContext(CallSite, Name)`.
    pub fn get_or_create_child(&mut self, parent: NodeId, loc: LineLocation, func: &str) -> NodeId {
        if let Some(c) = self.child(parent, loc, func) {
            return c;
        }
        let id = self.nodes.len();
        self.nodes.push(Node {
            func: func.to_string(),
            callsite: loc,
            parent: Some(parent),
            children: BTreeMap::new(),
            samples: None,
        });
        self.attach(parent, id);
        id
    }

    fn attach(&mut self, parent: NodeId, child: NodeId) {
        let n = &self.nodes[child];
        let key = (
            callsite_hash(&n.func, n.callsite),
            n.func.clone(),
            n.callsite,
        );
        self.nodes[parent].children.insert(key, child);
        self.nodes[child].parent = Some(parent);
    }

    fn detach(&mut self, child: NodeId) {
        if let Some(parent) = self.nodes[child].parent.take() {
            let n = &self.nodes[child];
            let key = (
                callsite_hash(&n.func, n.callsite),
                n.func.clone(),
                n.callsite,
            );
            self.nodes[parent].children.remove(&key);
        }
    }

    /// The node's current context, root first, leaf location (0, 0).
    pub fn context_of(&self, mut node: NodeId) -> Vec<ContextFrame> {
        let mut frames = Vec::new();
        let mut loc = LineLocation::default();
        while node != ROOT {
            let n = &self.nodes[node];
            frames.push(ContextFrame {
                func: n.func.clone(),
                loc,
            });
            loc = n.callsite;
            match n.parent {
                Some(p) => node = p,
                None => break,
            }
        }
        frames.reverse();
        frames
    }

    /// `getBaseSamplesFor(Name, MergeContext=true)`: promotes every context profile of `name`
    /// that is neither inlined nor already merged to the top level, merging them there.
    pub fn base_samples_for(&mut self, name: &str) -> Option<SampleId> {
        let mut base = self.child(ROOT, LineLocation::default(), name);
        let profiles = self.func_to_profiles.get(name).cloned().unwrap_or_default();
        for s in profiles {
            if self.samples[s].state & (state::INLINED | state::MERGED) != 0 {
                continue;
            }
            let from = self.sample_node[s];
            if Some(from) == base {
                continue;
            }
            base = Some(self.promote_merge(from, ROOT));
        }
        base.and_then(|b| self.nodes[b].samples)
    }

    /// `promoteMergeContextSamplesTree(FromNode, ToNodeParent)`.
    fn promote_merge(&mut self, from: NodeId, to_parent: NodeId) -> NodeId {
        let move_to_root = to_parent == ROOT;
        let new_loc = if move_to_root {
            LineLocation::default()
        } else {
            self.nodes[from].callsite
        };
        let func = self.nodes[from].func.clone();
        match self.child(to_parent, new_loc, &func) {
            None => {
                // `moveContextSamples`: the whole subtree moves; its profiles become synthetic.
                self.detach(from);
                self.nodes[from].callsite = new_loc;
                self.attach(to_parent, from);
                let mut queue = VecDeque::from([from]);
                while let Some(n) = queue.pop_front() {
                    if let Some(s) = self.nodes[n].samples {
                        self.sample_node[s] = n;
                        self.samples[s].state |= state::SYNTHETIC;
                    }
                    queue.extend(self.children(n));
                }
                from
            }
            Some(to) => {
                self.merge_node(from, to);
                let children: Vec<NodeId> = self.children(from).collect();
                for child in children {
                    self.promote_merge(child, to);
                }
                self.nodes[from].children.clear();
                if move_to_root {
                    self.detach(from);
                }
                to
            }
        }
    }

    /// `mergeContextNode`.
    fn merge_node(&mut self, from: NodeId, to: NodeId) {
        match (self.nodes[from].samples, self.nodes[to].samples) {
            (Some(f), Some(t)) => {
                let from_fs = std::mem::take(&mut self.samples[f].fs);
                merge_samples(&mut self.samples[t].fs, &from_fs);
                self.samples[t].state |= state::SYNTHETIC;
                self.samples[f].state |= state::MERGED;
                if from_fs.attributes & crate::profile::attr::SHOULD_BE_INLINED != 0 {
                    self.samples[t].fs.attributes |= crate::profile::attr::SHOULD_BE_INLINED;
                }
                self.samples[f].fs = from_fs;
            }
            (Some(f), None) => {
                self.nodes[to].samples = Some(f);
                self.sample_node[f] = to;
                self.samples[f].state |= state::SYNTHETIC;
            }
            _ => {}
        }
    }

    /// Drops the profile of a node (the pre-inliner's final cleanup).
    pub fn clear_samples(&mut self, node: NodeId) {
        self.nodes[node].samples = None;
    }

    /// `convertToProfileMap`: every node with a profile becomes a flat context.
    pub fn into_profile(mut self, profile: &mut Profile) {
        for node in self.bfs() {
            if let Some(s) = self.nodes[node].samples {
                let context = Context(self.context_of(node));
                let fs = std::mem::take(&mut self.samples[s].fs);
                profile.functions.insert(context, fs);
            }
        }
    }
}

/// `FunctionSamples::merge`: counts add; an empty (fresh) target takes the source's name and
/// context attributes, an existing target keeps its own; a different non-zero checksum makes
/// LLVM refuse the whole merge (`hash_mismatch`).
pub(crate) fn merge_samples(to: &mut FunctionSamples, from: &FunctionSamples) {
    if to.name.is_empty() {
        to.name = from.name.clone();
        to.attributes = from.attributes;
    }
    match (to.checksum.unwrap_or(0), from.checksum.unwrap_or(0)) {
        (0, _) => to.checksum = from.checksum,
        (a, b) if a != b => return,
        _ => {}
    }
    to.add_total(from.total_samples);
    to.add_head(from.head_samples);
    for (loc, b) in &from.body {
        to.add_body(*loc, b.count);
        for (t, n) in &b.call_targets {
            to.add_call_target(*loc, t, *n);
        }
    }
    for (loc, callees) in &from.callsites {
        for (name, fs) in callees {
            let nested = to
                .callsites
                .entry(*loc)
                .or_default()
                .entry(name.clone())
                .or_default();
            merge_samples(nested, fs);
        }
    }
}

/// `SampleContextTracker::createContextLessProfileMap`: every context profile merged into one
/// profile per leaf function, in breadth-first trie order (which decides, e.g., which profile
/// survives a checksum mismatch). This is what the CS summary must be computed on.
pub fn context_less_profile(profile: &Profile) -> Profile {
    // Breadth-first order of a trie whose children are ordered by key = depth first, then the
    // keys along the path.
    let mut ordered: Vec<(usize, Vec<ChildKey>, &FunctionSamples)> = profile
        .functions
        .iter()
        .filter(|(context, _)| !context.0.is_empty())
        .map(|(context, fs)| {
            let mut loc = LineLocation::default();
            let keys = context
                .0
                .iter()
                .map(|frame| {
                    let key = (callsite_hash(&frame.func, loc), frame.func.clone(), loc);
                    loc = frame.loc;
                    key
                })
                .collect();
            (context.0.len(), keys, fs)
        })
        .collect();
    ordered.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
    let mut merged: BTreeMap<String, FunctionSamples> = BTreeMap::new();
    for (_, keys, fs) in ordered {
        let name = &keys.last().expect("a context has a leaf frame").1;
        merge_samples(merged.entry(name.clone()).or_default(), fs);
    }
    Profile {
        kind: crate::profile::ProfileKind {
            context_sensitive: false,
            ..profile.kind
        },
        functions: merged
            .into_iter()
            .map(|(name, fs)| (Context::base(&name), fs))
            .collect(),
        symbol_list: None,
    }
}
