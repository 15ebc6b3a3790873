//! The context trie of `SampleContextTracker`: one node per calling context, children ordered
//! by `getCallSiteHash` as LLVM's `std::map<uint64_t, ContextTrieNode>` orders them, with the
//! promote-and-merge operation the pre-inliner uses to build base profiles.

use std::collections::{BTreeMap, VecDeque};
use std::mem::MaybeUninit;

use hashbrown::HashMap;
use rayon::prelude::*;

use crate::llvm::{ContextFrame, FuncName, LineLocation, callsite_hash_from_guid, md5_guid};
use crate::profile::{Context, FunctionSamples, Profile, VecMap};

/// `ContextStateMask` bits.
pub(crate) mod state {
    pub const RAW: u8 = 1;
    pub const INLINED: u8 = 4;
    pub const MERGED: u8 = 8;
    /// Not LLVM's: the context has its leaf's function in a caller frame too. Promotions only
    /// cut contexts' leading frames, so only such a profile can lie in the subtree of its
    /// function's base profile ([`super::ContextTrie::base_samples_for`]).
    pub const RECURSIVE: u8 = 0x80;
}

pub(crate) type NodeId = usize;
pub(crate) type SampleId = usize;
/// An interned function name.
pub(crate) type FuncId = u32;
pub(crate) const ROOT: NodeId = 0;
/// No node ([`ContextTrie::top_level`]).
const NO_NODE: NodeId = NodeId::MAX;

/// Child key: LLVM keys by the call-site hash alone; the name only breaks (theoretical) ties.
/// The location is implied, so the search compares two fields, not four: the hash is the name's
/// GUID plus 33 times the location's id (wrapping), and 33 is odd, so a name and a hash give
/// one location.
type ChildKey = (u64, FuncId);

/// 48 bytes, not 72: the walk's steps each read a node (its children, parent and profile), a
/// cold line or two, so the links are 32-bit ([`Link`]).
pub(crate) struct Node {
    pub func: FuncId,
    parent: Link,
    samples: Link,
    pub callsite: LineLocation,
    children: Children,
}

#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Node>() == 48);

impl Node {
    pub fn parent(&self) -> Option<NodeId> {
        self.parent.get()
    }

    /// The node's profile.
    pub fn samples(&self) -> Option<SampleId> {
        self.samples.get()
    }
}

/// A node or sample id, or none. 32 bits: ids index the trie's vectors, which would need
/// hundreds of bytes a context (its profile, its frames) times 2^32 to overflow one.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Link(u32);

impl Link {
    const NONE: Link = Link(u32::MAX);

    fn new(id: Option<usize>) -> Link {
        id.map_or(Link::NONE, |id| Link(u32::try_from(id).expect("under 2^32 trie ids")))
    }

    fn get(self) -> Option<usize> {
        (self != Link::NONE).then_some(self.0 as usize)
    }
}

/// A node's children, sorted by key: nodes mostly have a child or two, and a sorted vector
/// costs a fraction of a map's allocation (the trie has a node per context, and promotion
/// copies whole subtrees).
type Children = VecMap<ChildKey, NodeId>;

pub(crate) struct ContextTrie {
    nodes: Vec<Node>,
    /// The root's children, by function (`NO_NODE` where none; the root's own child vector
    /// stays empty): a top-level context is one per function, and the walk looks one up per
    /// promotion and adds one per new base profile, a search and a shift in a sorted vector of
    /// thousands.
    top_level: Vec<NodeId>,
    pub samples: Vec<FunctionSamples>,
    /// Each sample's `state` bits, apart from its profile: the walk checks every context of a
    /// function ([`ContextTrie::base_samples_for`]) and skips most, which read from the
    /// profiles' headers was a cold line each.
    pub states: Vec<u8>,
    sample_node: Vec<NodeId>,
    names: Vec<FuncName>,
    /// GUID (`MD5Hash`) of each interned name.
    guids: Vec<u64>,
    name_ids: HashMap<FuncName, FuncId>,
    /// Ids by the address of a name's shared text (contexts mostly share one name per
    /// function), each with its name kept so that the address stays its own.
    ids_by_address: HashMap<usize, (FuncName, FuncId)>,
    /// `FuncToCtxtProfiles`: every profile of a function, in breadth-first trie order.
    func_to_profiles: Vec<Vec<SampleId>>,
    /// The contexts the trie was built from (sample `i` is `contexts[i]`'s profile): the
    /// profile's keys, moved in with the profiles ([`ContextTrie::take_profiles`]) and kept to be
    /// freed with the trie (freed during the passes, they slowed them). Moved, not copied: a
    /// copy, and a dropped key, each touch the shared frames' count, a cache miss per context.
    contexts: Vec<Context>,
}

impl ContextTrie {
    /// Builds the trie from a flat CS profile, taking its profiles out of `profile`.
    #[cfg(test)]
    pub fn from_profile(profile: &mut Profile) -> Self {
        let mut trie = ContextTrie::of_contexts(&profile.functions);
        trie.take_profiles(profile);
        trie
    }

    /// The trie of the contexts of `functions` (a flat CS profile's) without their profiles,
    /// which [`ContextTrie::take_profiles`] moves in: the trie is built while the profile is
    /// still read by others, and gives the context-less merge its order
    /// ([`context_less_merge`]).
    pub fn of_contexts(functions: &BTreeMap<Context, FunctionSamples>) -> Self {
        let root = Node {
            func: 0,
            callsite: LineLocation::default(),
            parent: Link::NONE,
            samples: Link::NONE,
            children: Children::default(),
        };
        // Sized up front: grown by doubling, these vectors would be reallocated past the heap
        // the flat profile frees while it moves in.
        // An empty context has no function to attach to; it is dropped.
        let contexts: Vec<&Context> = functions.keys().filter(|c| !c.is_empty()).collect();
        let shared = shared_with_previous(&contexts);
        let profiles = contexts.len();
        // With room for the nodes the pre-inliner's walk adds (one per context it moves to a
        // new place, and the copies recursion makes: ~7.4k on sqlite-cs's ~26k contexts), which
        // grown there would copy the whole trie on the walk's one thread.
        let mut nodes = Vec::with_capacity(1 + path_nodes(&contexts, &shared) + profiles / 2);
        nodes.push(root);
        let mut trie = ContextTrie {
            nodes,
            top_level: Vec::new(),
            samples: Vec::new(),
            states: Vec::with_capacity(profiles),
            sample_node: Vec::with_capacity(profiles),
            names: Vec::new(),
            guids: Vec::new(),
            name_ids: HashMap::new(),
            ids_by_address: HashMap::new(),
            func_to_profiles: Vec::new(),
            contexts: Vec::with_capacity(profiles),
        };
        // Contexts in order: a context shares its leading nodes with the one before it, and
        // adds a node for each frame past them.
        let mut path: Vec<NodeId> = Vec::new();
        // How many of `path`'s nodes are each function's, kept as the path changes: a context
        // is recursive when its leaf's function is on it twice.
        let mut on_path: Vec<u32> = Vec::new();
        for (context, shared) in contexts.into_iter().zip(shared) {
            for &n in &path[shared..] {
                on_path[trie.nodes[n].func as usize] -= 1;
            }
            path.truncate(shared);
            trie.extend_path(&mut path, context);
            on_path.resize(trie.names.len(), 0);
            for &n in &path[shared..] {
                on_path[trie.nodes[n].func as usize] += 1;
            }
            let node = *path.last().expect("a context has a leaf frame");
            let id = trie.sample_node.len();
            trie.sample_node.push(node);
            let recursive = on_path[trie.nodes[node].func as usize] > 1;
            trie.states.push(if recursive { state::RAW | state::RECURSIVE } else { state::RAW });
            trie.nodes[node].samples = Link::new(Some(id));
        }
        trie.guids = trie.names.par_iter().map(|name| md5_guid(name)).collect();
        trie.link_children();
        let mut per_func = vec![0usize; trie.names.len()];
        for &node in &trie.sample_node {
            per_func[trie.nodes[node].func as usize] += 1;
        }
        trie.func_to_profiles = per_func.into_iter().map(Vec::with_capacity).collect();
        for node in trie.bfs() {
            if let Some(s) = trie.nodes[node].samples() {
                let func = trie.nodes[node].func as usize;
                trie.func_to_profiles[func].push(s);
            }
        }
        trie
    }

    /// Gives each node below the root its place among its parent's children, every parent's
    /// children made at once, sized and sorted by key, rather than inserted one by one (a
    /// reallocation as each small vector grows).
    fn link_children(&mut self) {
        let n = self.nodes.len();
        // Children by parent, in creation order: `start[p]..start[p + 1]` of `by_parent`.
        let mut start = vec![0usize; n + 1];
        for node in &self.nodes[1..] {
            start[node.parent().expect("below the root") + 1] += 1;
        }
        for p in 0..n {
            start[p + 1] += start[p];
        }
        let mut next = start.clone();
        let mut by_parent = vec![ROOT; n - 1];
        for (id, node) in self.nodes.iter().enumerate().skip(1) {
            let p = node.parent().expect("below the root");
            by_parent[next[p]] = id;
            next[p] += 1;
        }
        self.top_level = vec![NO_NODE; self.names.len()];
        for &c in &by_parent[start[ROOT]..start[ROOT + 1]] {
            self.top_level[self.nodes[c].func as usize] = c;
        }
        for p in 1..n {
            let kids = &by_parent[start[p]..start[p + 1]];
            if kids.is_empty() {
                continue;
            }
            let children: Children = (kids.iter())
                .map(|&c| (self.key(self.nodes[c].func, self.nodes[c].callsite), c))
                .collect();
            debug_assert_eq!(children.len(), kids.len(), "a node's children have distinct keys");
            self.nodes[p].children = children;
        }
    }

    /// Moves the profiles of `profile` and their contexts into the trie
    /// [`ContextTrie::of_contexts`] built from those contexts: `profile` must be the one the trie
    /// was built from, unchanged since (checked in full by debug builds).
    ///
    /// The last quarter is moved on another worker, into its place in the same vectors: the
    /// pre-inliner takes its order beside this (on sqlite-cs about half as long), so the whole
    /// move on this worker was the longer side.
    pub fn take_profiles(&mut self, profile: &mut Profile) {
        let mut functions = std::mem::take(&mut profile.functions);
        // An empty context (never made by the builders) sorts first; it has no node.
        if functions.first_key_value().is_some_and(|(c, _)| c.is_empty()) {
            functions.pop_first();
        }
        let n = functions.len();
        assert_eq!(n, self.sample_node.len(), "the trie is built from this profile");
        let later = match functions.keys().nth_back(n / 4) {
            Some(first) => functions.split_off(&first.clone()),
            None => BTreeMap::new(),
        };
        let mut samples: Vec<FunctionSamples> = Vec::with_capacity(n);
        self.contexts.clear();
        self.contexts.reserve(n);
        let first = functions.len();
        let (c_first, c_later) = self.contexts.spare_capacity_mut()[..n].split_at_mut(first);
        let (s_first, s_later) = samples.spare_capacity_mut()[..n].split_at_mut(first);
        rayon::join(
            || move_into(functions, c_first, s_first),
            || move_into(later, c_later, s_later),
        );
        // SAFETY: move_into wrote all of both parts' slots, the first `n` of each vector.
        unsafe {
            self.contexts.set_len(n);
            samples.set_len(n);
        }
        debug_assert!(
            (self.contexts.iter().zip(&self.sample_node))
                .all(|(c, &node)| Context::new(self.context_of(node)) == *c),
            "the trie is built from this profile"
        );
        self.samples = samples;
    }

    /// The profiles of `profile`, whose contexts the trie was built from, by sample id.
    pub fn profiles_of<'a>(&self, profile: &'a Profile) -> Vec<&'a FunctionSamples> {
        let profiles: Vec<&FunctionSamples> =
            profile.functions.iter().filter(|(c, _)| !c.is_empty()).map(|(_, fs)| fs).collect();
        assert_eq!(profiles.len(), self.sample_node.len(), "the trie is built from this profile");
        profiles
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }

    pub fn name(&self, func: FuncId) -> &str {
        &self.names[func as usize]
    }

    /// The interned functions' names, by id.
    pub fn names(&self) -> &[FuncName] {
        &self.names
    }

    pub fn guid(&self, func: FuncId) -> u64 {
        self.guids[func as usize]
    }

    /// The GUID of `name` when the trie interned that very shared text (see
    /// [`ContextTrie::intern`]), without hashing it.
    pub fn guid_of_shared(&self, name: &FuncName) -> Option<u64> {
        let &(_, id) = self.ids_by_address.get(&(name.as_ptr() as usize))?;
        Some(self.guid(id))
    }

    /// Nodes, by id (the root is 0).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Interned functions, by id.
    pub fn func_count(&self) -> usize {
        self.names.len()
    }

    fn intern(&mut self, name: &FuncName) -> FuncId {
        if let Some(&(_, id)) = self.ids_by_address.get(&(name.as_ptr() as usize)) {
            return id;
        }
        let id = match self.name_ids.get(name.as_str()) {
            Some(&id) => id,
            None => {
                let id = self.names.len() as FuncId;
                self.names.push(name.clone());
                self.name_ids.insert(name.clone(), id);
                id
            }
        };
        self.ids_by_address.insert(name.as_ptr() as usize, (name.clone(), id));
        id
    }

    fn key(&self, func: FuncId, loc: LineLocation) -> ChildKey {
        (callsite_hash_from_guid(self.guid(func), loc), func)
    }

    pub fn node_of(&self, sample: SampleId) -> NodeId {
        self.sample_node[sample]
    }

    /// Children in LLVM's iteration order; not the root's ([`ContextTrie::top_level_nodes`]).
    pub fn children(&self, id: NodeId) -> impl Iterator<Item = NodeId> + '_ {
        debug_assert_ne!(id, ROOT, "the root's children are kept by function");
        self.nodes[id].children.values().copied()
    }

    /// The root's children, unordered.
    fn top_level_nodes(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.top_level.iter().copied().filter(|&n| n != NO_NODE)
    }

    /// Breadth-first order from the root (`SampleContextTracker::Iterator`), root included.
    pub fn bfs(&self) -> Vec<NodeId> {
        // The order is its own queue: nodes are appended as they are reached.
        let mut order = Vec::with_capacity(self.nodes.len());
        order.push(ROOT);
        let mut top: Vec<(ChildKey, NodeId)> = (self.top_level_nodes())
            .map(|n| (self.key(self.nodes[n].func, self.nodes[n].callsite), n))
            .collect();
        top.sort_unstable();
        order.extend(top.into_iter().map(|(_, n)| n));
        let mut next = 1;
        while let Some(&n) = order.get(next) {
            next += 1;
            order.extend(self.children(n));
        }
        order
    }

    /// Extends `path` (the nodes of `context`'s first `path.len()` frames, shared with the
    /// context before it in order) with a new node for every further frame, not yet among its
    /// parent's children ([`ContextTrie::link_children`]). New: contexts sharing a path are
    /// neighbours in their order ([`shared_nodes`]), so no earlier context has these nodes.
    fn extend_path(&mut self, path: &mut Vec<NodeId>, context: &Context) {
        let depth = path.len();
        let mut node = path.last().copied().unwrap_or(ROOT);
        let mut loc = match depth.checked_sub(1) {
            Some(d) => context.callers().get(d).map_or(LineLocation::default(), |f| f.loc),
            None => LineLocation::default(),
        };
        for (func, frame_loc) in context.named_frames().skip(depth) {
            let func = self.intern(func);
            let id = self.nodes.len();
            self.nodes.push(Node {
                func,
                callsite: loc,
                parent: Link::new(Some(node)),
                samples: Link::NONE,
                children: Children::default(),
            });
            node = id;
            path.push(node);
            loc = frame_loc;
        }
    }

    /// The key of a top-level context of `func`: the root's children are kept by function, so
    /// its hash is never read (and not computed).
    fn top_key(func: FuncId) -> ChildKey {
        (0, func)
    }

    /// The child of `parent` under `key` (its function's and call site's: callers pass the key
    /// they have, so that the walk does not hash every moved node again).
    fn child(&self, parent: NodeId, key: ChildKey) -> Option<NodeId> {
        if parent == ROOT {
            return Some(self.top_level[key.1 as usize]).filter(|&n| n != NO_NODE);
        }
        self.nodes[parent].children.get(&key).copied()
    }

    /// Makes `child` the child of `parent` under `key`, its function's and call site's.
    fn attach(&mut self, parent: NodeId, child: NodeId, key: ChildKey) {
        let (func, loc) = (self.nodes[child].func, self.nodes[child].callsite);
        debug_assert_eq!(key.1, func, "the child's key");
        if parent == ROOT {
            debug_assert_eq!(loc, LineLocation::default(), "top-level contexts have no call site");
            self.top_level[func as usize] = child;
        } else {
            debug_assert_eq!(key, self.key(func, loc), "the child's key");
            self.nodes[parent].children.insert(key, child);
        }
        self.nodes[child].parent = Link::new(Some(parent));
    }

    fn detach(&mut self, child: NodeId) {
        let Some(parent) = self.nodes[child].parent() else { return };
        self.nodes[child].parent = Link::NONE;
        let func = self.nodes[child].func;
        if parent == ROOT {
            self.top_level[func as usize] = NO_NODE;
        } else {
            let key = self.key(func, self.nodes[child].callsite);
            self.nodes[parent].children.remove(&key);
        }
    }

    /// The node's current context, root first, leaf location (0, 0).
    pub fn context_of(&self, node: NodeId) -> Vec<ContextFrame> {
        let mut frames: Vec<ContextFrame> = (self.frames_leaf_first(node))
            .map(|(func, loc)| ContextFrame { func: self.names[func as usize].clone(), loc })
            .collect();
        frames.reverse();
        frames
    }

    /// The frames of the node's current context, leaf first (leaf location (0, 0)): each
    /// function with its call site, up its ancestors.
    pub fn frames_leaf_first(
        &self,
        node: NodeId,
    ) -> impl Iterator<Item = (FuncId, LineLocation)> + '_ {
        let mut next = (node != ROOT).then_some((node, LineLocation::default()));
        std::iter::from_fn(move || {
            let (node, loc) = next?;
            let n = &self.nodes[node];
            next = n.parent().filter(|&p| p != ROOT).map(|p| (p, n.callsite));
            Some((n.func, loc))
        })
    }

    /// `getBaseSamplesFor(Name, MergeContext=true)`: promotes every context profile of `name`
    /// that is neither inlined nor already merged to the top level, merging them there.
    pub fn base_samples_for(&mut self, func: FuncId) -> Option<SampleId> {
        let mut base = self.child(ROOT, Self::top_key(func));
        for i in 0..self.func_to_profiles[func as usize].len() {
            let s = self.func_to_profiles[func as usize][i];
            if self.states[s] & (state::INLINED | state::MERGED) != 0 {
                continue;
            }
            let from = self.sample_node[s];
            if Some(from) == base {
                continue;
            }
            // Only a context under the base profile's own subtree (recursion) can see a
            // moved subtree's original again; any other is moved, not copied.
            let recursive = self.states[s] & state::RECURSIVE != 0;
            let copy = base.is_some_and(|b| recursive && self.is_ancestor(b, from));
            debug_assert!(recursive || base.is_none_or(|b| !self.is_ancestor(b, from)));
            base = Some(self.promote_merge(from, ROOT, Self::top_key(func), copy));
        }
        base.and_then(|b| self.nodes[b].samples())
    }

    /// `promoteMergeContextSamplesTree(FromNode, ToNodeParent)`.
    ///
    /// Mirrors LLVM's container semantics, which matter when a recursive context is promoted
    /// into its own ancestor: a moved subtree is *copied* and the original stays in its parent's
    /// child map until that map is cleared, and the children of `from` are walked like a
    /// `std::map` iterator, so nodes inserted behind the cursor during the walk are visited too.
    /// One divergence: LLVM then destroys copies whose profiles a later promotion still points
    /// to (use after free; llvm-profgen 19 crashes on some such inputs, which need recursive
    /// contexts that recursion compression would have removed). Here those profiles stay
    /// reachable and end up in their base profile.
    ///
    /// Copying matters only when the destination lies in the subtree being promoted; otherwise
    /// (`copy` false) the originals are never reached again (detached from the root, or in a
    /// child map cleared before anything looks there), so subtrees are moved instead.
    ///
    /// `key` is `from`'s key under `to_parent`: its key in its own parent's children, or
    /// [`ContextTrie::top_key`] at the root.
    fn promote_merge(
        &mut self,
        from: NodeId,
        to_parent: NodeId,
        key: ChildKey,
        copy: bool,
    ) -> NodeId {
        let move_to_root = to_parent == ROOT;
        let new_loc =
            if move_to_root { LineLocation::default() } else { self.nodes[from].callsite };
        let to = match self.child(to_parent, key) {
            None => self.move_subtree(from, to_parent, new_loc, key, copy),
            Some(to) => {
                self.merge_node(from, to);
                let mut cursor: Option<ChildKey> = None;
                while let Some((&key, &child)) =
                    self.nodes[from].children.first_after(cursor.as_ref())
                {
                    cursor = Some(key);
                    self.promote_merge(child, to, key, copy);
                }
                self.nodes[from].children = Children::default();
                to
            }
        };
        if move_to_root {
            self.detach(from);
        }
        to
    }

    /// `moveContextSamples`: copies the subtree under `to_parent` at `loc` (with `copy`; else
    /// a new node takes over the children); its profiles now live there. (LLVM also marks them
    /// synthetic, which nothing here reads.)
    fn move_subtree(
        &mut self,
        from: NodeId,
        to_parent: NodeId,
        loc: LineLocation,
        key: ChildKey,
        copy: bool,
    ) -> NodeId {
        if copy {
            let copy = self.copy_subtree(from, loc);
            self.attach(to_parent, copy, key);
            // Every profile of the subtree is now the copy's: the originals stay reachable
            // until the promotion that copied them ends.
            let mut queue = VecDeque::from([copy]);
            while let Some(n) = queue.pop_front() {
                if let Some(s) = self.nodes[n].samples() {
                    self.sample_node[s] = n;
                }
                queue.extend(self.children(n));
            }
            return copy;
        }
        // Only the moved node is new: the nodes below it keep their ids, and each is its
        // profile's node already (a node shares its profile only with the originals of a copy,
        // which no promotion without copying reaches).
        let moved = self.nodes.len();
        let children = std::mem::take(&mut self.nodes[from].children);
        for &child in children.values() {
            self.nodes[child].parent = Link::new(Some(moved));
        }
        let samples = self.nodes[from].samples;
        self.nodes.push(Node {
            func: self.nodes[from].func,
            callsite: loc,
            parent: Link::NONE,
            samples,
            children,
        });
        if let Some(s) = samples.get() {
            self.sample_node[s] = moved;
        }
        self.attach(to_parent, moved, key);
        debug_assert!(self.profiles_point_here(moved), "a moved profile's node is its own");
        moved
    }

    /// Whether every profile in the subtree of `node` has its node there.
    fn profiles_point_here(&self, node: NodeId) -> bool {
        let mut queue = VecDeque::from([node]);
        while let Some(n) = queue.pop_front() {
            if self.nodes[n].samples().is_some_and(|s| self.sample_node[s] != n) {
                return false;
            }
            queue.extend(self.children(n));
        }
        true
    }

    fn copy_subtree(&mut self, node: NodeId, callsite: LineLocation) -> NodeId {
        let copy = self.nodes.len();
        self.nodes.push(Node {
            func: self.nodes[node].func,
            callsite,
            parent: Link::NONE,
            samples: self.nodes[node].samples,
            children: Children::with_capacity(self.nodes[node].children.len()),
        });
        let children: Vec<(ChildKey, NodeId)> =
            self.nodes[node].children.iter().map(|(&key, &child)| (key, child)).collect();
        for (key, child) in children {
            let child_copy = self.copy_subtree(child, self.nodes[child].callsite);
            self.attach(copy, child_copy, key);
        }
        copy
    }

    /// Whether `node` lies in the subtree of `ancestor` (itself included).
    fn is_ancestor(&self, ancestor: NodeId, mut node: NodeId) -> bool {
        loop {
            if node == ancestor {
                return true;
            }
            match self.nodes[node].parent() {
                Some(p) => node = p,
                None => return false,
            }
        }
    }

    /// `mergeContextNode`.
    fn merge_node(&mut self, from: NodeId, to: NodeId) {
        match (self.nodes[from].samples(), self.nodes[to].samples()) {
            (Some(f), Some(t)) => {
                // A node sharing its profile with the target (a copy's original, in recursion)
                // leaves it as it is.
                if let Ok([from, to]) = self.samples.get_disjoint_mut([f, t]) {
                    merge_samples(to, from);
                    to.attributes |= from.attributes & crate::profile::attr::SHOULD_BE_INLINED;
                }
                self.states[f] |= state::MERGED;
            }
            (Some(f), None) => {
                self.nodes[to].samples = Link::new(Some(f));
                self.sample_node[f] = to;
            }
            _ => {}
        }
    }

    /// `convertToProfileMap`: every node with a profile that `keep` keeps (given the node and
    /// its sample) becomes a flat context, its profile moved there. Returns them in [`Context`]
    /// order, and how many profiles `keep` dropped (left in the trie).
    ///
    /// A node's context shares the frames of one made for an ancestor when the node lies on the
    /// ancestor's first-child line, which the ancestor's frames run down to; so a chain of nested
    /// contexts costs its depth, not depth²/2. The contexts are made in order
    /// ([`ContextTrie::in_context_order`]), so that a map is built from them in one pass rather
    /// than by an insert (a search from the top) each, and nesting takes them as they are.
    pub fn take_kept_profiles(
        &mut self,
        keep: impl Fn(&Self, NodeId, SampleId) -> bool,
    ) -> (Vec<(Context, FunctionSamples)>, usize) {
        let mut dropped = 0;
        // For each node on a line made so far: the line's context and the node's depth on it.
        let mut on_line: Vec<Option<(usize, usize)>> = vec![None; self.nodes.len()];
        let mut lines: Vec<Context> = Vec::new();
        // The kept ones first, so that the profiles (large entries) are moved once, into a
        // vector of their number.
        let mut kept: Vec<(NodeId, SampleId)> = Vec::new();
        for node in self.in_context_order() {
            let Some(s) = self.nodes[node].samples() else { continue };
            if keep(self, node, s) {
                kept.push((node, s));
            } else {
                dropped += 1;
            }
        }
        let mut moved: Vec<(Context, FunctionSamples)> = Vec::with_capacity(kept.len());
        for (node, s) in kept {
            let (line, depth) = match on_line[node] {
                Some(at) => at,
                None => {
                    let mut frames = self.context_of(node);
                    let depth = frames.len();
                    let mut n = node;
                    on_line[n] = Some((lines.len(), frames.len()));
                    while let Some(child) = self.children(n).next() {
                        let c = &self.nodes[child];
                        frames.last_mut().expect("below the root").loc = c.callsite;
                        frames.push(ContextFrame {
                            func: self.names[c.func as usize].clone(),
                            loc: LineLocation::default(),
                        });
                        on_line[child] = Some((lines.len(), frames.len()));
                        n = child;
                    }
                    lines.push(Context::new(frames));
                    (lines.len() - 1, depth)
                }
            };
            let fs = std::mem::take(&mut self.samples[s]);
            moved.push((lines[line].prefix(depth), fs));
        }
        (moved, dropped)
    }

    /// Every node but the root, parents before children and in the order their contexts
    /// ([`ContextTrie::context_of`]) compare: contexts compare frame by frame, each frame by
    /// function name and then by the call site into the next frame (the leaf's is (0, 0)), so a
    /// node's context comes before its descendants' and siblings order by (call site, name);
    /// the root's children, whose call site is not in their contexts, by name.
    fn in_context_order(&self) -> Vec<NodeId> {
        let mut order = Vec::with_capacity(self.nodes.len());
        let mut stack: Vec<NodeId> = Vec::new();
        let mut siblings: Vec<NodeId> = Vec::new();
        let visit = |node: NodeId, stack: &mut Vec<NodeId>, siblings: &mut Vec<NodeId>| {
            siblings.clear();
            if node == ROOT {
                siblings.extend(self.top_level_nodes());
                siblings.sort_by(|&a, &b| {
                    self.name(self.nodes[a].func).cmp(self.name(self.nodes[b].func))
                });
            } else {
                siblings.extend(self.children(node));
                siblings.sort_by(|&a, &b| {
                    let (a, b) = (&self.nodes[a], &self.nodes[b]);
                    a.callsite
                        .cmp(&b.callsite)
                        .then_with(|| self.name(a.func).cmp(self.name(b.func)))
                });
            }
            // Popped last to first.
            stack.extend(siblings.iter().rev());
        };
        visit(ROOT, &mut stack, &mut siblings);
        while let Some(node) = stack.pop() {
            order.push(node);
            visit(node, &mut stack, &mut siblings);
        }
        order
    }
}

/// Moves a part of a profile's map, in order, into its slots of the trie's contexts and
/// samples ([`ContextTrie::take_profiles`]), filling them all.
fn move_into(
    part: BTreeMap<Context, FunctionSamples>,
    contexts: &mut [MaybeUninit<Context>],
    samples: &mut [MaybeUninit<FunctionSamples>],
) {
    assert!(part.len() == contexts.len() && part.len() == samples.len(), "one slot each");
    for ((context, fs), (c, s)) in part.into_iter().zip(contexts.iter_mut().zip(samples)) {
        c.write(context);
        s.write(fs);
    }
}

/// For each of `contexts` (in order), how many of its trie nodes the one before it has
/// ([`shared_nodes`]).
fn shared_with_previous(contexts: &[&Context]) -> Vec<usize> {
    let mut shared = Vec::with_capacity(contexts.len());
    shared.extend(contexts.first().map(|_| 0));
    shared.extend(contexts.windows(2).map(|pair| shared_nodes(pair[0], pair[1])));
    shared
}

/// The trie nodes of `contexts` (in order, each sharing `shared` nodes with the one before):
/// a context adds a node per frame past the path it shares with the one before it, since
/// contexts sharing a path are neighbours in that order.
fn path_nodes(contexts: &[&Context], shared: &[usize]) -> usize {
    contexts.iter().zip(shared).map(|(c, &shared)| c.len() - shared).sum()
}

/// How many of `b`'s trie nodes are `a`'s: a node is fixed by the functions of the frames down
/// to it and the call sites of the frames above it.
fn shared_nodes(a: &Context, b: &Context) -> usize {
    if b.extends(a) {
        return a.len();
    }
    let mut shared = 0;
    for ((fa, la), (fb, lb)) in a.named_frames().zip(b.named_frames()) {
        if fa != fb {
            break;
        }
        shared += 1;
        if la != lb {
            break;
        }
    }
    shared
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
    to.merge_body(from);
    for (loc, callees) in &from.callsites {
        for (name, fs) in callees {
            let nested = to.callsites.entry(*loc).or_default().entry(name.clone()).or_default();
            merge_samples(nested, fs);
        }
    }
}

/// `SampleContextTracker::createContextLessProfileMap`: every context profile merged into one
/// profile per leaf function, in breadth-first trie order (which decides, e.g., which profile
/// survives a checksum mismatch). This is what the CS summary must be computed on.
pub fn context_less_profile(profile: &Profile) -> Profile {
    let trie = ContextTrie::of_contexts(&profile.functions);
    context_less_merge(profile, &trie, &trie.profiles_of(profile))
}

/// [`context_less_profile`] with the trie of `profile`'s contexts
/// ([`ContextTrie::of_contexts`]), which orders each function's profiles breadth-first, and
/// their profiles by sample id ([`ContextTrie::profiles_of`]). Functions in parallel.
pub(crate) fn context_less_merge(
    profile: &Profile,
    trie: &ContextTrie,
    samples: &[&FunctionSamples],
) -> Profile {
    let mut funcs: Vec<(FuncId, &[SampleId])> = (0..trie.func_count() as FuncId)
        .map(|f| (f, trie.func_to_profiles[f as usize].as_slice()))
        .filter(|(_, profiles)| !profiles.is_empty())
        .collect();
    // A merge's cost follows its profiles: big functions first keeps the workers even.
    funcs.sort_by_key(|(_, profiles)| std::cmp::Reverse(profiles.len()));
    let merged: Vec<(Context, FunctionSamples)> = funcs
        .into_par_iter()
        .map(|(func, profiles)| {
            let mut fs = FunctionSamples::default();
            for &s in profiles {
                merge_samples(&mut fs, samples[s]);
            }
            (Context::base(trie.name(func)), fs)
        })
        .collect();
    Profile {
        kind: crate::profile::ProfileKind { context_sensitive: false, ..profile.kind },
        functions: merged.into_iter().collect(),
        symbol_list: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context(spec: &[(&str, u32)]) -> Context {
        Context::new(
            spec.iter()
                .map(|&(f, l)| ContextFrame { func: f.into(), loc: LineLocation::new(l, 0) })
                .collect(),
        )
    }

    fn profile(contexts: &[(&[(&str, u32)], u64)]) -> Profile {
        let mut profile = Profile::default();
        for &(spec, total) in contexts {
            let mut fs = FunctionSamples::new(spec.last().unwrap().0);
            fs.total_samples = total;
            fs.add_body(LineLocation::new(1, 0), total);
            profile.functions.insert(context(spec), fs);
        }
        profile
    }

    /// `f`'s base profile from `profile`: every context as text with its total and body count.
    fn promoted(mut profile: Profile, func: &str) -> Vec<(String, u64, u64)> {
        let mut trie = ContextTrie::from_profile(&mut profile);
        let id = (0..trie.func_count() as FuncId).find(|&f| trie.name(f) == func).unwrap();
        trie.base_samples_for(id).expect("a base profile");
        let (kept, _) = trie.take_kept_profiles(|_, _, _| true);
        (kept.iter())
            .map(|(c, fs)| {
                let text: Vec<String> =
                    c.frames().map(|(f, l)| format!("{f}:{}", l.line_offset)).collect();
                (text.join(" @ "), fs.total_samples, fs.body[&LineLocation::new(1, 0)].count)
            })
            .collect()
    }

    /// The context-less merge sums every context of a function; when checksums differ the
    /// breadth-first first profile (the shorter context here, though it sorts after the longer
    /// one in map order) wins and the mismatching one is left out, as LLVM's merge refuses it.
    #[test]
    fn context_less_merge_sums_in_breadth_first_order() {
        let mut p = profile(&[(&[("a", 1), ("g", 0)], 5), (&[("g", 0)], 2), (&[("h", 0)], 1)]);
        let merged = |p: &Profile| -> Vec<(String, u64, Option<u64>)> {
            (context_less_profile(p).functions.values())
                .map(|fs| (fs.name.to_string(), fs.total_samples, fs.checksum))
                .collect()
        };
        assert_eq!(merged(&p), [("g".to_string(), 7, None), ("h".to_string(), 1, None)]);
        for (checksum, fs) in [7, 9].into_iter().zip(p.functions.values_mut()) {
            fs.checksum = Some(checksum);
        }
        // Map order: `a:1 @ g` (checksum 7), then `g` (checksum 9).
        assert_eq!(merged(&p)[0], ("g".to_string(), 2, Some(9)));
    }

    /// Contexts of `f` under other functions move to the top level with their callees,
    /// merging where the base profile has the same callee; the callers keep their own profile.
    #[test]
    fn promotion_moves_subtrees_and_merges_into_existing_nodes() {
        let p = profile(&[
            (&[("main", 1), ("f", 0)], 10),
            (&[("main", 1), ("f", 2), ("g", 0)], 5),
            (&[("x", 3), ("f", 0)], 4),
            (&[("x", 3), ("f", 2), ("g", 0)], 3),
            (&[("x", 0)], 1),
        ]);
        assert_eq!(
            promoted(p, "f"),
            [
                ("f:0".to_string(), 14, 14),
                ("f:2 @ g:0".to_string(), 8, 8),
                ("x:0".to_string(), 1, 1)
            ]
        );
    }

    /// A recursive context promoted into its own base profile's subtree (copied, as LLVM
    /// copies it): its callees merge into the base profile's or move there.
    #[test]
    fn recursive_promotion_merges_into_the_base_subtree() {
        let p = profile(&[
            (&[("f", 0)], 1),
            (&[("f", 1), ("g", 0)], 3),
            (&[("f", 1), ("g", 2), ("f", 0)], 6),
            (&[("f", 1), ("g", 2), ("f", 1), ("g", 0)], 2),
            (&[("f", 1), ("g", 2), ("f", 3), ("h", 0)], 4),
        ]);
        assert_eq!(
            promoted(p, "f"),
            [
                ("f:0".to_string(), 7, 7),
                ("f:1 @ g:0".to_string(), 5, 5),
                ("f:3 @ h:0".to_string(), 4, 4)
            ]
        );
    }

    /// Nodes come out of [`ContextTrie::in_context_order`] in the order of their contexts, which
    /// the trie's own child order (by call-site hash) does not follow, so that
    /// `take_kept_profiles` gives the contexts sorted.
    #[test]
    fn nodes_in_context_order() {
        let mut p = profile(&[
            (&[("main", 0)], 1),
            (&[("main", 1), ("f", 0)], 1),
            (&[("main", 1), ("f", 2), ("g", 0)], 1),
            (&[("main", 1), ("f", 2), ("b", 0)], 1),
            (&[("main", 1), ("a", 0)], 1),
            (&[("main", 3), ("f", 0)], 1),
            (&[("main", 2), ("z", 0)], 1),
            (&[("b", 0)], 1),
            (&[("b", 7), ("c", 0)], 1),
        ]);
        let trie = ContextTrie::from_profile(&mut p);
        let contexts: Vec<Context> =
            trie.in_context_order().into_iter().map(|n| Context::new(trie.context_of(n))).collect();
        assert_eq!(contexts.len(), trie.node_count() - 1);
        assert!(contexts.windows(2).all(|w| w[0] < w[1]), "{contexts:?}");
    }

    /// The trie is sized from the contexts: a node per distinct path, whether contexts share
    /// frames ([`Context::prefix`]) or only equal ones, and a path ending where another goes on
    /// (`main:1 @ f` beside `main:1 @ f:2 @ g`) or turns at a call site (`main:2 @ f`).
    #[test]
    fn node_count_is_known_before_building() {
        let mut p = profile(&[
            (&[("main", 0)], 1),
            (&[("main", 1), ("f", 0)], 1),
            (&[("main", 1), ("f", 2), ("g", 0)], 1),
            (&[("main", 1), ("f", 3), ("g", 0)], 1),
            (&[("main", 2), ("f", 0)], 1),
            (&[("x", 1), ("f", 0)], 1),
        ]);
        let deep = context(&[("y", 1), ("f", 2), ("g", 0)]);
        for c in [deep.prefix(1), deep.prefix(2), deep] {
            p.functions.insert(c, FunctionSamples::new("y"));
        }
        let contexts: Vec<&Context> = p.functions.keys().collect();
        let expected = path_nodes(&contexts, &shared_with_previous(&contexts));
        let trie = ContextTrie::from_profile(&mut p);
        // main, main:1 @ f, its g at 2 and at 3, main:2 @ f, x, x:1 @ f, y, y:1 @ f, its g.
        assert_eq!((expected, trie.nodes.len()), (10, 11));
        assert_eq!(trie.nodes.capacity(), trie.nodes.len() + trie.samples.len() / 2);
    }
}
