//! Calling contexts as LLVM's sample profiles spell them (`SampleContextFrame`, `LineLocation`)
//! and the two ways llvm-profgen shapes them: recursion compression (`--compress-recursion`) and
//! depth trim (`--csprof-max-context-depth`), ports of `CSProfileGenerator::compressRecursionContext`
//! and `trimContext`. The unwinder shapes call-site addresses with them, the CS builders frames.

use std::fmt;
use std::sync::Arc;

/// `LineLocation`: line offset from the function's start line (or probe id) and discriminator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct LineLocation {
    pub line_offset: u32,
    pub discriminator: u32,
}

impl LineLocation {
    pub fn new(line_offset: u32, discriminator: u32) -> Self {
        LineLocation { line_offset, discriminator }
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
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContextFrame {
    pub func: FuncName,
    pub loc: LineLocation,
}

/// A function name in a context frame, shared: contexts repeat a few thousand names in millions
/// of frames, so a frame holds a reference, copying one copies no text, and frames made from the
/// same name compare equal without reading it. Equality, order and hash are the text's.
#[derive(Clone)]
pub struct FuncName(Arc<str>);

impl FuncName {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for FuncName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for FuncName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for FuncName {
    fn from(s: &str) -> Self {
        FuncName(s.into())
    }
}

impl From<String> for FuncName {
    fn from(s: String) -> Self {
        FuncName(s.into())
    }
}

impl From<Arc<str>> for FuncName {
    fn from(s: Arc<str>) -> Self {
        FuncName(s)
    }
}

impl PartialEq for FuncName {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Eq for FuncName {}

impl PartialEq<str> for FuncName {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for FuncName {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl Ord for FuncName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.0, &other.0) {
            return std::cmp::Ordering::Equal;
        }
        self.0.cmp(&other.0)
    }
}

impl PartialOrd for FuncName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

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
        cut_to_max_context(callers);
        compress_recursion(callers, self.compress_recursion);
        trim_context(callers, self.max_context_depth);
    }

    /// [`Self::apply`] to callers known to repeat no element, which recursion compression leaves
    /// as they are: a caller that can tell cheaply skips its quadratic search for repeats.
    pub fn apply_to_distinct<T>(&self, callers: &mut Vec<T>) {
        cut_to_max_context(callers);
        trim_context(callers, self.max_context_depth);
    }
}

/// Removes adjacent repeated sequences of up to `max_size` elements (-1: no limit, 0: off), for
/// lengths 1, 2, … in turn, e.g. `a b a b c` → `a b c`. Same in-place scan as LLVM, so the
/// surviving copy of each repetition is the one LLVM keeps.
///
/// The scan compares elements O(n²) times; it runs over small ids of the distinct elements
/// (frames compare by name, and a copy of one clones it), and the result is mapped back.
pub fn compress_recursion<T: PartialEq + Clone>(context: &mut Vec<T>, max_size: i32) {
    if max_size == 0 || context.len() < 2 {
        return;
    }
    let mut distinct: Vec<usize> = Vec::with_capacity(context.len());
    let mut ids: Vec<u32> = Vec::with_capacity(context.len());
    for (i, x) in context.iter().enumerate() {
        let id = distinct.iter().position(|&d| context[d] == *x).unwrap_or_else(|| {
            distinct.push(i);
            distinct.len() - 1
        });
        ids.push(id as u32);
    }
    // A repeated sequence repeats its elements: without one, there is nothing to compress.
    if distinct.len() == context.len() {
        return;
    }
    compress_in_place(&mut ids, max_size);
    // Nothing removed: every copy was onto itself.
    if ids.len() < context.len() {
        let old = std::mem::take(context);
        context.extend(ids.iter().map(|&id| old[distinct[id as usize]].clone()));
    }
}

/// [`compress_recursion`]'s scan on any elements.
fn compress_in_place<T: PartialEq + Clone>(context: &mut Vec<T>, max_size: i32) {
    let half = context.len() / 2;
    let mut max_dedup = if max_size < 0 { half } else { (max_size as usize).min(half) };
    let mut size = 1;
    while size <= max_dedup {
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
        size += 1;
        max_dedup = max_dedup.min(end / 2);
    }
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

    #[test]
    fn shapes_distinct_callers_as_apply_does() {
        let shape = ContextShape { compress_recursion: -1, max_context_depth: 2 };
        let (mut all, mut distinct) = (vec![1, 2, 3, 4], vec![1, 2, 3, 4]);
        shape.apply(&mut all);
        shape.apply_to_distinct(&mut distinct);
        assert_eq!(all, [3, 4]);
        assert_eq!(distinct, all);
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
