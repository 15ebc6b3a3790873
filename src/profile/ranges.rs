//! Overlapping fall-through ranges → disjoint segments (llvm-profgen's `findDisjointRanges`).
//!
//! The profile builders attribute a range's count to every instruction in it; overlapping ranges
//! must first be cut at every boundary so each byte is counted once with the sum of the ranges
//! covering it.

use crate::addr::Vaddr;

#[derive(Default)]
struct Boundary {
    /// Sum of the counts of ranges starting here; `None` when no range starts here.
    begin: Option<u64>,
    /// Sum of the counts of ranges ending here; `None` when no range ends here.
    end: Option<u64>,
    zero_range_begins: u32,
    zero_range_ends: u32,
}

/// Cuts inclusive `[start, end]` ranges with counts into disjoint inclusive segments, ascending,
/// each with the sum of the counts of the ranges covering it.
///
/// A point where one range ends and another begins becomes its own one-byte segment. Gaps
/// covered only by a zero-count range are emitted with count 0 (the builders use zero ranges to
/// make every instruction of a function appear); gaps covered by no range are not emitted.
/// Ranges with `start > end` are ignored.
pub fn disjoint_ranges(
    ranges: impl Iterator<Item = ((Vaddr, Vaddr), u64)>,
) -> Vec<(Vaddr, Vaddr, u64)> {
    let mut scratch = RangeScratch::default();
    disjoint_ranges_in(ranges, &mut scratch);
    scratch.out
}

/// [`disjoint_ranges`]' buffers, reused from context to context (two allocations a context
/// otherwise, and their frees).
#[derive(Default)]
pub struct RangeScratch {
    /// (address, whether a range ends there, count), grouped by address: a sort of one vector
    /// instead of a tree per context.
    events: Vec<(u64, bool, u64)>,
    out: Vec<(Vaddr, Vaddr, u64)>,
}

/// [`disjoint_ranges`] into `scratch`'s buffers: the segments are borrowed from it.
pub fn disjoint_ranges_in(
    ranges: impl Iterator<Item = ((Vaddr, Vaddr), u64)>,
    scratch: &mut RangeScratch,
) -> &[(Vaddr, Vaddr, u64)] {
    let RangeScratch { events, out } = scratch;
    events.clear();
    out.clear();
    events.reserve(2 * ranges.size_hint().0);
    for ((start, end), count) in ranges {
        if start > end {
            continue;
        }
        events.push((start.0, false, count));
        events.push((end.0, true, count));
    }
    events.sort_unstable_by_key(|e| e.0);

    // At most one segment starts at each range's start and one ends at each range's end: room
    // for them all up front spares the vector's growth (one reallocation in four, per context).
    out.reserve(events.len());
    // Start of the segment being built, `None` when no range is open.
    let mut seg_start: Option<u64> = None;
    let mut zero_depth: u32 = 0;
    let mut count: u64 = 0;
    for at in events.chunk_by(|a, b| a.0 == b.0) {
        let addr = at[0].0;
        let mut p = Boundary::default();
        for &(_, is_end, n) in at {
            let (sum, zeros) = if is_end {
                (&mut p.end, &mut p.zero_range_ends)
            } else {
                (&mut p.begin, &mut p.zero_range_begins)
            };
            *sum = Some(sum.unwrap_or(0).saturating_add(n));
            *zeros += u32::from(n == 0);
        }
        if let Some(begin) = p.begin {
            if let Some(s) = seg_start {
                // `s > addr - 1` happens right after a one-byte end point; nothing to emit.
                if addr > s {
                    out.push((Vaddr(s), Vaddr(addr - 1), count));
                }
            }
            count = count.saturating_add(begin);
            seg_start = Some(addr);
            zero_depth += p.zero_range_begins;
        }
        if let Some(end) = p.end {
            let s = seg_start.unwrap_or(addr);
            out.push((Vaddr(s), Vaddr(addr), count));
            count = count.saturating_sub(end);
            zero_depth = zero_depth.saturating_sub(p.zero_range_ends);
            seg_start = addr.checked_add(1);
            if count == 0 && zero_depth == 0 {
                seg_start = None;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: &[(u64, u64, u64)]) -> Vec<(u64, u64, u64)> {
        disjoint_ranges(input.iter().map(|&(s, e, c)| ((Vaddr(s), Vaddr(e)), c)))
            .into_iter()
            .map(|(s, e, c)| (s.0, e.0, c))
            .collect()
    }

    #[test]
    fn single_range_is_unchanged() {
        assert_eq!(run(&[(0x10, 0x20, 5)]), vec![(0x10, 0x20, 5)]);
    }

    #[test]
    fn nested_ranges_sharing_a_start() {
        // Reference example: A..B:100 and A..C:200.
        assert_eq!(
            run(&[(0x10, 0x20, 100), (0x10, 0x30, 200)]),
            vec![(0x10, 0x20, 300), (0x21, 0x30, 200)]
        );
    }

    #[test]
    fn touching_point_becomes_its_own_segment() {
        assert_eq!(
            run(&[(0x10, 0x20, 100), (0x20, 0x30, 200)]),
            vec![(0x10, 0x1f, 100), (0x20, 0x20, 300), (0x21, 0x30, 200)]
        );
    }

    #[test]
    fn gap_between_ranges_is_not_emitted() {
        assert_eq!(
            run(&[(0x10, 0x20, 10), (0x30, 0x40, 20)]),
            vec![(0x10, 0x20, 10), (0x30, 0x40, 20)]
        );
    }

    #[test]
    fn zero_range_fills_gaps_with_zero() {
        // Reference example: B..C:100, D..E:200 inside A..F:0.
        assert_eq!(
            run(&[(0x12, 0x20, 100), (0x30, 0x40, 200), (0x10, 0x50, 0)]),
            vec![
                (0x10, 0x11, 0),
                (0x12, 0x20, 100),
                (0x21, 0x2f, 0),
                (0x30, 0x40, 200),
                (0x41, 0x50, 0)
            ]
        );
    }

    #[test]
    fn identical_ranges_sum() {
        assert_eq!(run(&[(0x10, 0x20, 3), (0x10, 0x20, 4)]), vec![(0x10, 0x20, 7)]);
    }

    #[test]
    fn one_byte_ranges() {
        assert_eq!(
            run(&[(0x10, 0x10, 3), (0x10, 0x14, 1)]),
            vec![(0x10, 0x10, 4), (0x11, 0x14, 1)]
        );
    }

    #[test]
    fn inner_range_ending_before_outer_range_continues() {
        // Outer 0x10..0x30:1, inner 0x18..0x1f:2, then a range starting right after the inner end.
        assert_eq!(
            run(&[(0x10, 0x30, 1), (0x18, 0x1f, 2), (0x20, 0x28, 4)]),
            vec![(0x10, 0x17, 1), (0x18, 0x1f, 3), (0x20, 0x28, 5), (0x29, 0x30, 1)]
        );
    }

    #[test]
    fn inverted_ranges_are_ignored_and_counts_saturate() {
        assert_eq!(run(&[(0x20, 0x10, 3)]), vec![]);
        assert_eq!(run(&[(0x10, 0x20, u64::MAX), (0x10, 0x20, 5)]), vec![(0x10, 0x20, u64::MAX)]);
    }

    #[test]
    fn range_ending_at_the_top_of_the_address_space() {
        assert_eq!(run(&[(u64::MAX - 1, u64::MAX, 2)]), vec![(u64::MAX - 1, u64::MAX, 2)]);
    }
}
