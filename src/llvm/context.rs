//! Calling contexts as LLVM's sample profiles spell them (`SampleContextFrame`, `LineLocation`)
//! and the two ways llvm-profgen shapes them: recursion compression (`--compress-recursion`) and
//! depth trim (`--csprof-max-context-depth`), ports of `CSProfileGenerator::compressRecursionContext`
//! and `trimContext`. The unwinder shapes call-site addresses with them, the CS builders frames.

use std::fmt;
use std::sync::Arc;

use super::canonical_fn_name;

/// `LineLocation`: line offset from the function's start line (or probe id) and discriminator.
/// Ordered by line, then discriminator. In C's layout, so that [`LineLocation::bytes`] is
/// one load.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C)]
pub struct LineLocation {
    pub line_offset: u32,
    pub discriminator: u32,
}

// Compared as one word: the derived field-by-field compares took two loads and two branches
// per key in the profile merges' loops over body samples (the pre-inliner's walk).
impl PartialEq for LineLocation {
    fn eq(&self, other: &Self) -> bool {
        self.bytes() == other.bytes()
    }
}

impl Eq for LineLocation {}

// As derived: field by field, so that hashes stay what they were.
impl std::hash::Hash for LineLocation {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.line_offset.hash(state);
        self.discriminator.hash(state);
    }
}

impl Ord for LineLocation {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.word().cmp(&other.word())
    }
}

impl PartialOrd for LineLocation {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl LineLocation {
    pub fn new(line_offset: u32, discriminator: u32) -> Self {
        LineLocation { line_offset, discriminator }
    }

    /// The two fields as they lie in memory (little-endian): one load.
    fn bytes(&self) -> u64 {
        u64::from(self.line_offset) | (u64::from(self.discriminator) << 32)
    }

    /// The line in the high half: words order as (line, discriminator) pairs do.
    fn word(&self) -> u64 {
        self.bytes().rotate_left(32)
    }

    /// Whether the location is a line before the function's start (LLVM keeps the offset's low
    /// 16 bits, so a negative one has bit 15 set): line 0 of compiler-made code, no part of
    /// the function's own shape.
    pub fn is_before_start(&self) -> bool {
        self.line_offset & 0x8000 != 0
    }
}

/// One frame of a calling context: a function and the location in it (the call site for every
/// frame but the leaf, whose location is (0, 0)).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ContextFrame {
    pub func: FuncName,
    pub loc: LineLocation,
}

/// By the name's [`FuncName::text_hash`]: a context's hash reads no name text.
impl std::hash::Hash for ContextFrame {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.func.text_hash());
        self.loc.hash(state);
    }
}

/// A function name in a context frame, shared: contexts repeat a few thousand names in millions
/// of frames, so a frame holds a reference, copying one copies no text, and frames made from the
/// same name compare equal without reading it. Equality, order and hash are the text's; the text
/// is also hashed once when the name is made, and frames hash that ([`ContextFrame`]), so hashing a
/// context costs its frames, not the length of their names (a crafted aggregate of one 1 MB name
/// in a million frames hashed a terabyte).
#[derive(Clone)]
pub struct FuncName {
    text: Arc<str>,
    hash: u64,
}

/// The text's hash, one hasher for the process (seeded at random, as hashbrown's maps are): equal
/// texts get equal hashes wherever their names were made.
fn text_hash(text: &str) -> u64 {
    use std::hash::BuildHasher;
    static SEED: std::sync::OnceLock<hashbrown::DefaultHashBuilder> = std::sync::OnceLock::new();
    SEED.get_or_init(hashbrown::DefaultHashBuilder::default).hash_one(text)
}

impl FuncName {
    pub fn as_str(&self) -> &str {
        &self.text
    }
    /// The text's hash, made with the name: equal texts give equal values.
    pub fn text_hash(&self) -> u64 {
        self.hash
    }
    /// The shared text.
    pub fn shared_text(&self) -> &Arc<str> {
        &self.text
    }
    /// Whether both hold the same shared text (then they are equal without reading it).
    pub fn same(&self, other: &FuncName) -> bool {
        Arc::ptr_eq(&self.text, &other.text)
    }
    /// `name`'s canonical form ([`canonical_fn_name`]): `name` itself when that is already
    /// canonical (most names are).
    pub fn canonical(name: &FuncName) -> FuncName {
        match canonical_fn_name(name) {
            c if c.len() == name.len() => name.clone(),
            c => FuncName::from(c),
        }
    }
}

/// The empty name (a fresh profile's): one shared allocation, as `Arc<str>`'s default.
impl Default for FuncName {
    fn default() -> Self {
        FuncName::from(Arc::<str>::default())
    }
}

impl std::ops::Deref for FuncName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.text
    }
}

impl From<&str> for FuncName {
    fn from(s: &str) -> Self {
        FuncName::from(Arc::<str>::from(s))
    }
}

impl From<String> for FuncName {
    fn from(s: String) -> Self {
        FuncName::from(Arc::<str>::from(s))
    }
}

impl From<&FuncName> for FuncName {
    fn from(s: &FuncName) -> Self {
        s.clone()
    }
}

impl From<Arc<str>> for FuncName {
    fn from(text: Arc<str>) -> Self {
        FuncName { hash: text_hash(&text), text }
    }
}

impl PartialEq for FuncName {
    fn eq(&self, other: &Self) -> bool {
        self.same(other) || (self.hash == other.hash && self.text == other.text)
    }
}

impl Eq for FuncName {}

impl PartialEq<str> for FuncName {
    fn eq(&self, other: &str) -> bool {
        &*self.text == other
    }
}

impl PartialEq<&str> for FuncName {
    fn eq(&self, other: &&str) -> bool {
        &*self.text == *other
    }
}

/// Names whose first this many bytes agree are ordered by their [`LongNames`] labels: comparing
/// texts costs their common prefix, and a crafted profile of two 1 MB names differing in their
/// last byte, inlined or called at a million places, compared them once per place (a terabyte).
const COMPARED_PREFIX: usize = 256;

impl Ord for FuncName {
    // Inline as before: sorting the profiles compares names millions of times, mostly short.
    #[inline]
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if self.same(other) {
            return std::cmp::Ordering::Equal;
        }
        let (a, b) = (self.text.as_bytes(), other.text.as_bytes());
        if a.len() < COMPARED_PREFIX || b.len() < COMPARED_PREFIX {
            return a.cmp(b);
        }
        self.cmp_long(other)
    }
}

impl FuncName {
    /// [`Ord::cmp`] of two names of at least [`COMPARED_PREFIX`] bytes.
    #[inline(never)]
    fn cmp_long(&self, other: &Self) -> std::cmp::Ordering {
        let (a, b) =
            (&self.text.as_bytes()[..COMPARED_PREFIX], &other.text.as_bytes()[..COMPARED_PREFIX]);
        match a.cmp(b) {
            std::cmp::Ordering::Equal => LONG_NAMES.with_borrow_mut(|l| l.cmp(self, other)),
            by_prefix => by_prefix,
        }
    }
}

thread_local! {
    static LONG_NAMES: std::cell::RefCell<LongNames> = std::cell::RefCell::default();
}

/// Labels in text order for the names [`FuncName`]'s order meets with a long common prefix (one
/// table per thread): each name's text is placed once, by text compares, when first met; after
/// that it is found by its allocation's address and compares by label. Relabelling spreads the
/// labels evenly when two neighbours leave no room between them.
#[derive(Default)]
struct LongNames {
    /// The texts met, by address: the weak reference keeps the address from being reused while
    /// the entry lasts; the slot is the text's.
    by_address: hashbrown::HashMap<usize, (std::sync::Weak<str>, usize)>,
    /// Per slot, its text (held) and label; `None` for a free slot.
    slots: Vec<Option<(Arc<str>, u64)>>,
    free: Vec<usize>,
    /// The used slots in text order: labels increase along it.
    order: Vec<usize>,
    /// `by_address`'s size at which the names no longer held are swept out.
    sweep_at: usize,
}

impl LongNames {
    fn cmp(&mut self, a: &FuncName, b: &FuncName) -> std::cmp::Ordering {
        let (a, b) = (self.slot(&a.text), self.slot(&b.text));
        self.label(a).cmp(&self.label(b))
    }

    fn label(&self, slot: usize) -> u64 {
        self.slots[slot].as_ref().expect("a used slot").1
    }

    fn text(&self, slot: usize) -> &str {
        &self.slots[slot].as_ref().expect("a used slot").0
    }

    /// The slot of `text`'s text, placed in order if new.
    fn slot(&mut self, text: &Arc<str>) -> usize {
        let address = text.as_ptr() as usize;
        if let Some((_, slot)) = self.by_address.get(&address) {
            return *slot;
        }
        if self.by_address.len() >= self.sweep_at {
            self.sweep();
        }
        let slot = match self.order.binary_search_by(|&s| self.text(s).cmp(text)) {
            Ok(at) => self.order[at],
            Err(at) => self.place(text, at),
        };
        self.by_address.insert(address, (Arc::downgrade(text), slot));
        slot
    }

    /// A slot for a new text at `at` in `order`, labelled between its neighbours.
    fn place(&mut self, text: &Arc<str>, at: usize) -> usize {
        let low = at.checked_sub(1).map_or(0, |i| self.label(self.order[i]));
        let high = self.order.get(at).map_or(u64::MAX, |&s| self.label(s));
        let slot = self.free.pop().unwrap_or(self.slots.len());
        if slot == self.slots.len() {
            self.slots.push(None);
        }
        self.slots[slot] = Some((text.clone(), low + (high - low) / 2));
        self.order.insert(at, slot);
        if high - low < 2 {
            let step = u64::MAX / (self.order.len() as u64 + 1);
            for (i, &s) in self.order.iter().enumerate() {
                self.slots[s].as_mut().expect("a used slot").1 = step * (i as u64 + 1);
            }
        }
        slot
    }

    /// Drops the addresses of names no longer held (a slot's own text held by nothing else), and
    /// the texts no address refers to.
    fn sweep(&mut self) {
        let slots = &self.slots;
        self.by_address.retain(|&address, (name, slot)| {
            let own = slots[*slot].as_ref().is_some_and(|(t, _)| t.as_ptr() as usize == address);
            name.strong_count() > usize::from(own)
        });
        let mut used = vec![false; self.slots.len()];
        for (_, slot) in self.by_address.values() {
            used[*slot] = true;
        }
        for (slot, used) in used.into_iter().enumerate() {
            if !used && self.slots[slot].take().is_some() {
                self.free.push(slot);
            }
        }
        self.order.retain(|&s| self.slots[s].is_some());
        self.sweep_at = (2 * self.by_address.len()).max(1024);
    }
}

impl PartialOrd for FuncName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl std::borrow::Borrow<str> for FuncName {
    fn borrow(&self) -> &str {
        &self.text
    }
}

/// `str`'s hash, as [`Borrow<str>`](std::borrow::Borrow) requires (maps keyed by names are
/// looked up by text).
impl std::hash::Hash for FuncName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl fmt::Debug for FuncName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for FuncName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self)
    }
}

/// The most caller frames a context keeps (profgen's bound, not llvm-profgen's): a deeper call
/// stack keeps its innermost frames, cut before recursion compression. It bounds every recursion
/// over contexts, context tries and nested profiles, and the work a context costs (one profile
/// per caller, as llvm-profgen creates them, each compared and walked frame by frame), whatever
/// the depth of the input's stacks. Real recordings stay below it: the kernel's default
/// `perf_event_max_stack` is 127.
pub const MAX_CONTEXT_FRAMES: usize = 1024;

/// Cuts `callers` (root first) to its innermost [`MAX_CONTEXT_FRAMES`]; true if it was deeper.
pub fn cut_to_max_context<T>(callers: &mut Vec<T>) -> bool {
    let excess = callers.len().saturating_sub(MAX_CONTEXT_FRAMES);
    callers.drain(..excess);
    excess > 0
}

/// How contexts are shaped: llvm-profgen applies [`compress_recursion`] and then [`trim_context`]
/// to the *callers* only: set the leaf frame aside (its location becomes (0, 0)), shape, push the
/// leaf back. Callers beyond [`MAX_CONTEXT_FRAMES`] are cut first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContextShape {
    /// `--compress-recursion`: longest repeated sequence collapsed (-1 = unlimited, 0 = off).
    pub compress_recursion: i32,
    /// `--csprof-max-context-depth`: caller frames kept (-1 = unlimited).
    pub max_context_depth: i32,
}

impl Default for ContextShape {
    fn default() -> Self {
        ContextShape { compress_recursion: -1, max_context_depth: -1 }
    }
}

impl ContextShape {
    /// Cuts `callers` (root first, without the leaf) to [`MAX_CONTEXT_FRAMES`], compresses
    /// recursion in them, then trims them.
    pub fn apply<T: PartialEq + Clone>(&self, callers: &mut Vec<T>) {
        self.apply_bounded(callers, |_| None);
    }

    /// [`Self::apply`] with a bound on the squares the callers can hold: `pairs`, given the
    /// callers once cut, returns for each distance `p` at least the number of positions `k` with
    /// `callers[k] == callers[k + p]` (`None`: no bound). A length `p` with fewer than `p` of them
    /// holds no square, so recursion compression does not search it.
    pub fn apply_bounded<'p, T: PartialEq + Clone>(
        &self,
        callers: &mut Vec<T>,
        pairs: impl FnOnce(&[T]) -> Option<&'p [u32]>,
    ) {
        cut_to_max_context(callers);
        let bound = pairs(callers);
        compress_bounded(callers, self.compress_recursion, bound);
        trim_context(callers, self.max_context_depth);
    }

    /// [`Self::apply`] to callers known to repeat no element, which recursion compression leaves
    /// as they are: a caller that can tell in one pass skips its search for squares (about
    /// n·ln n comparisons).
    pub fn apply_to_distinct<T>(&self, callers: &mut Vec<T>) {
        cut_to_max_context(callers);
        trim_context(callers, self.max_context_depth);
    }
}

/// Removes adjacent repeated sequences of up to `max_size` elements (-1: no limit, 0: off), for
/// lengths 1, 2, … in turn, e.g. `a b a b c` → `a b c`. Same in-place scan per length as LLVM,
/// so the surviving copy of each repetition is the one LLVM keeps.
///
/// LLVM scans every length up to half the context, n²/4 comparisons. A scan changes nothing
/// unless the context holds a square of its length ([`compress_pass`]), so lengths without one
/// ([`has_square`], about n/length comparisons each) are skipped: about n·ln n comparisons for
/// a context without repeats.
pub fn compress_recursion<T: PartialEq + Clone>(context: &mut Vec<T>, max_size: i32) {
    compress_bounded(context, max_size, None);
}

/// [`compress_recursion`] skipping the lengths that `pairs` (counts of equal pairs by distance, see
/// [`ContextShape::apply_bounded`]) shows hold no square, until a pass compresses: the counts are
/// of the context before it.
fn compress_bounded<T: PartialEq + Clone>(
    context: &mut Vec<T>,
    max_size: i32,
    mut pairs: Option<&[u32]>,
) {
    let limit = usize::try_from(max_size).unwrap_or(usize::MAX);
    let mut size = 1;
    while size <= limit && 2 * size <= context.len() {
        let may = pairs.is_none_or(|c| c.get(size).is_some_and(|&n| n as usize >= size));
        if may && has_square(context, size) {
            compress_pass(context, size);
            pairs = None;
        }
        size += 1;
    }
}

/// Whether `c` holds a square of period `p`: `p` consecutive positions `k` with
/// `c[k] == c[k + p]`. Any `p` consecutive positions hold one `i` with `i % p == p - 1`: only
/// those are tested, the run of matches extended around each that matches.
fn has_square<T: PartialEq>(c: &[T], p: usize) -> bool {
    let same = |k: usize| c[k] == c[k + p];
    let mut i = p - 1;
    while i + p < c.len() {
        if same(i) {
            let mut down = 1;
            while down < p && down <= i && same(i - down) {
                down += 1;
            }
            let mut up = 0;
            while down + up < p && i + 1 + up + p < c.len() && same(i + 1 + up) {
                up += 1;
            }
            if down + up == p {
                return true;
            }
        }
        i += p;
    }
    false
}

/// LLVM's scan for repeats of `size` elements. Until it meets `size` consecutive positions
/// `k` with `context[k] == context[k + size]` (a square), every copy is onto itself: a context
/// without such a square is left as it is.
fn compress_pass<T: PartialEq + Clone>(context: &mut Vec<T>, size: usize) {
    // `right` is the last element of the left half of the current 2*size window; `end`
    // is where the next kept element goes.
    let mut right = size - 1;
    let mut end = size;
    let mut left_boundary = 0;
    while right + size < context.len() {
        // Longest common suffix of the two halves, scanning back to `left_boundary`.
        let mut left = right as isize;
        while left >= left_boundary as isize
            && context[left as usize] == context[left as usize + size]
        {
            left -= 1;
        }
        let duplicated = left < left_boundary as isize;
        left_boundary = right + 1;
        if duplicated {
            right += size;
        } else {
            // Keep the part of the right half that differs, then slide past it.
            let new_right = (left + size as isize) as usize;
            copy_forward(context, right + 1..new_right + 1, end);
            end += new_right - right;
            right = new_right;
        }
    }
    let len = context.len();
    copy_forward(context, right + 1..len, end);
    end += len - right - 1;
    context.truncate(end);
}

/// `std::copy` to an earlier position: later scans read the source range after the copy, as
/// LLVM's in-place algorithm does.
fn copy_forward<T: Clone>(v: &mut [T], src: std::ops::Range<usize>, dest: usize) {
    for (i, from) in src.enumerate() {
        v[dest + i] = v[from].clone();
    }
}

/// Keeps the last `depth` elements (-1 or a depth at least the length: unchanged; 0: empty).
pub fn trim_context<T>(context: &mut Vec<T>, depth: i32) {
    if depth < 0 || depth as usize >= context.len() {
        return;
    }
    context.drain(..context.len() - depth as usize);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names sharing a long prefix order as their texts: through relabelling (each name placed
    /// between the first and the last one placed, halving the room there), sweeps (more names
    /// made and dropped than a sweep waits for) and equal texts in two allocations.
    #[test]
    fn long_names_order_as_their_texts() {
        let prefix = "p".repeat(COMPARED_PREFIX);
        let name = |s: &str| FuncName::from(format!("{prefix}{s}"));
        let first = name("a");
        let mut names = vec![first.clone()];
        for k in 0..200 {
            let n = name(&format!("{}b", "a".repeat(k)));
            assert_eq!(n.cmp(&first), std::cmp::Ordering::Greater);
            names.push(n);
        }
        for i in 0..3000 {
            let dropped = name(&format!("{i}"));
            assert_eq!(dropped.cmp(&first), dropped.as_str().cmp(first.as_str()));
        }
        assert!(LONG_NAMES.with_borrow(|l| l.by_address.len()) < 2 * 1024);
        names.push(name("ab"));
        names.push(name(""));
        for a in &names {
            for b in &names {
                assert_eq!(a.cmp(b), a.as_str().cmp(b.as_str()), "{} {}", &a[256..], &b[256..]);
            }
        }
    }

    fn compressed(s: &str, max: i32) -> String {
        let mut v: Vec<char> = s.chars().collect();
        compress_recursion(&mut v, max);
        v.into_iter().collect()
    }

    #[test]
    fn compresses_adjacent_repeats_by_increasing_length() {
        assert_eq!(compressed("ababc", -1), "abc");
        assert_eq!(compressed("fff", -1), "f");
        assert_eq!(compressed("aabb", -1), "ab");
        assert_eq!(compressed("abcabcabcd", -1), "abcd");
        assert_eq!(compressed("xabcbcbcy", -1), "xabcy");
        assert_eq!(compressed("abab", 0), "abab");
        assert_eq!(compressed("aaabab", 1), "abab");
        assert_eq!(compressed("aaabab", 2), "ab");
        assert_eq!(compressed("abcabc", 2), "abcabc");
        assert_eq!(compressed("", -1), "");
        assert_eq!(compressed("a", -1), "a");
        // Length-1 pass first: "abba" → "aba", which has no repeat of length 1 or 2 left.
        assert_eq!(compressed("abba", -1), "aba");
        assert_eq!(compressed("abcbc", -1), "abc");
        assert_eq!(compressed("abab", 1), "abab");
        assert_eq!(compressed("aabab", 1), "abab");
        assert_eq!(compressed("abcabcx", -1), "abcx");
        assert_eq!(compressed("abcabcx", 2), "abcabcx");
        assert_eq!(compressed("xyz", 0), "xyz");
    }

    #[test]
    fn matches_llvms_algorithm_on_random_sequences() {
        // Outputs of LLVM 19's `compressRecursionContext` (compiled from ProfileGenerator.h) on
        // random inputs; 3000 such cases agreed when this port was written.
        let cases: [(i32, &[u8], &[u8]); 5] = [
            (3, &[0, 1, 0, 1, 0, 1, 0, 1, 1, 0], &[0, 1, 0]),
            (5, &[2, 2, 1, 2, 2, 1, 2, 1, 1, 2, 1, 2, 1, 2], &[2, 1, 2]),
            (-1, &[1, 0, 0, 1, 0, 0, 1, 0, 0, 1, 1, 0, 1, 0], &[1, 0]),
            (2, &[2, 2, 2, 0, 0, 2, 0, 0, 2, 2, 2, 2, 2], &[2, 0, 2]),
            (5, &[0, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1, 0], &[0, 1, 0]),
        ];
        for (limit, input, want) in cases {
            let mut v = input.to_vec();
            compress_recursion(&mut v, limit);
            assert_eq!(v, want, "{input:?} limit {limit}");
        }
    }

    /// LLVM's `compressRecursionContext` loop: the scan of every length up to half the context
    /// (shrinking as it does), none skipped.
    fn llvm_compress(context: &mut Vec<u8>, max_size: i32) {
        let half = context.len() / 2;
        let mut max_dedup = if max_size < 0 { half } else { (max_size as usize).min(half) };
        let mut size = 1;
        while size <= max_dedup {
            compress_pass(context, size);
            size += 1;
            max_dedup = max_dedup.min(context.len() / 2);
        }
    }

    /// xorshift64*: a fixed stream of test inputs.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
        }
    }

    /// Recursion-shaped stacks: a root, runs of self-recursion and of mutual recursion through
    /// cycles of several lengths (whole and cut short), nested and interleaved, random frames
    /// between them.
    fn recursive_stack(rng: &mut Rng) -> Vec<u8> {
        let mut v = vec![0];
        for _ in 0..1 + rng.below(6) {
            let cycle: Vec<u8> = (0..1 + rng.below(9)).map(|_| rng.below(12) as u8).collect();
            let times = 1 + rng.below(40) as usize;
            let inner = rng.below(3) == 0;
            for t in 0..times {
                v.extend_from_slice(&cycle);
                if inner && t % 3 == 1 {
                    v.extend(std::iter::repeat_n(20 + rng.below(3) as u8, rng.below(5) as usize));
                }
            }
            v.extend_from_slice(&cycle[..rng.below(cycle.len() as u64) as usize]);
            v.extend((0..rng.below(4)).map(|_| rng.below(16) as u8));
        }
        v
    }

    /// Words rich in repeats or free of them: Thue–Morse (overlap-free, squares of every
    /// power-of-two period), the ternary square-free word of its differences, Fibonacci (runs
    /// everywhere).
    fn classic_words(n: usize) -> [Vec<u8>; 3] {
        let thue_morse: Vec<u8> = (0..n as u32 + 1).map(|i| (i.count_ones() % 2) as u8).collect();
        let square_free: Vec<u8> = thue_morse.windows(2).map(|w| w[1] + 1 - w[0]).collect();
        let mut fibonacci = vec![0u8];
        let mut previous = vec![1u8];
        while fibonacci.len() < n {
            let next = [&fibonacci[..], &previous[..]].concat();
            previous = std::mem::replace(&mut fibonacci, next);
        }
        fibonacci.truncate(n);
        [thue_morse[..n].to_vec(), square_free, fibonacci]
    }

    /// For each distance, the pairs of `c` that far apart equal on a coarser equality (halves):
    /// the kind of bound [`ContextShape::apply_bounded`] takes.
    fn coarse_pairs(c: &[u8]) -> Vec<u32> {
        let mut pairs = vec![0; c.len()];
        for (p, count) in pairs.iter_mut().enumerate().skip(1) {
            *count = c.iter().zip(&c[p..]).filter(|(x, y)| *x / 2 == *y / 2).count() as u32;
        }
        pairs
    }

    #[test]
    fn skipping_lengths_without_squares_matches_every_scan() {
        let check = |input: &[u8], limit: i32| {
            let (mut fast, mut every) = (input.to_vec(), input.to_vec());
            compress_recursion(&mut fast, limit);
            llvm_compress(&mut every, limit);
            assert_eq!(fast, every, "{input:?} limit {limit}");
            let mut bounded = input.to_vec();
            compress_bounded(&mut bounded, limit, Some(&coarse_pairs(input)));
            assert_eq!(bounded, every, "{input:?} limit {limit}, bounded");
        };
        let limits = [-1, 0, 1, 2, 3, 4, 7, 100];
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..20_000 {
            let letters = 1 + rng.below(4);
            let input: Vec<u8> = (0..rng.below(48)).map(|_| rng.below(letters) as u8).collect();
            check(&input, limits[rng.below(limits.len() as u64) as usize]);
        }
        for _ in 0..3_000 {
            let input = recursive_stack(&mut rng);
            check(&input, limits[rng.below(limits.len() as u64) as usize]);
            check(&input, -1);
        }
        for n in [1, 2, 5, 16, 31, 64, 100, 257, 600] {
            for word in classic_words(n) {
                for limit in limits {
                    check(&word, limit);
                }
            }
        }
        for k in [1, 2, 3, 10, 127, 500, 1024] {
            let self_recursion: Vec<u8> = [&[1][..], &vec![2; k], &[3, 2, 2, 4]].concat();
            check(&self_recursion, -1);
            check(&self_recursion, 1);
            for cycle in 2..9u8 {
                let mutual: Vec<u8> = (0..k * cycle as usize).map(|i| i as u8 % cycle).collect();
                check(&[&[9][..], &mutual, &mutual[..cycle as usize / 2]].concat(), -1);
                check(&mutual, cycle as i32 - 1);
            }
        }
    }

    #[test]
    fn shapes_distinct_callers_as_apply_does() {
        let shape = ContextShape { compress_recursion: -1, max_context_depth: 2 };
        let (mut all, mut distinct) = (vec![1, 2, 3, 4], vec![1, 2, 3, 4]);
        shape.apply(&mut all);
        shape.apply_to_distinct(&mut distinct);
        assert_eq!(all, [3, 4]);
        assert_eq!(distinct, all);
        // The bound is counted on the callers once cut.
        let mut deep: Vec<u8> = (0..MAX_CONTEXT_FRAMES + 5).map(|i| (i % 2) as u8).collect();
        let mut bounded = deep.clone();
        ContextShape::default().apply(&mut deep);
        let mut pairs = Vec::new();
        ContextShape::default().apply_bounded(&mut bounded, |c| {
            pairs = coarse_pairs(c);
            Some(&pairs)
        });
        assert_eq!((deep.as_slice(), bounded.as_slice()), (&[1, 0][..], &[1, 0][..]));
        let mut deep: Vec<usize> = (0..MAX_CONTEXT_FRAMES + 5).collect();
        ContextShape::default().apply_to_distinct(&mut deep);
        assert_eq!(deep.len(), MAX_CONTEXT_FRAMES);
        assert_eq!(deep[0], 5);
    }

    #[test]
    fn trims_to_the_last_elements() {
        let mut v = vec![1, 2, 3, 4];
        trim_context(&mut v, -1);
        assert_eq!(v, [1, 2, 3, 4]);
        trim_context(&mut v, 4);
        assert_eq!(v, [1, 2, 3, 4]);
        trim_context(&mut v, 2);
        assert_eq!(v, [3, 4]);
        trim_context(&mut v, 0);
        assert!(v.is_empty());
    }
}
