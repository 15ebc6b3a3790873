//! Start-up utilities from temporal traces: which functions should share pages.
//!
//! A trace lists functions in the order they first ran. Its prefixes are what start-up touches
//! by a given moment, so each prefix is a utility: functions of one prefix want to be on the
//! same pages. The prefixes are cut where the prefix doubles in length or in code size (as
//! lld's `BPSectionOrderer` does for temporal profiles; with no sizes, the cuts of
//! `TemporalProfTraceTy::createBPFunctionNodes`: after 1, 2, 4, 8, … functions), so a trace of
//! `n` functions gives `O(log n)` utilities and each function belongs to the prefixes from the
//! first one containing it to the whole trace.
//!
//! The nodes come out sorted by their earliest position in any trace (ties by function index):
//! balanced partitioning starts from that order, which alone is the "first timestamp" order.

use super::partition::UtilityId;

/// Functions of the traces with their utilities, in first-timestamp order.
#[derive(Debug, PartialEq, Eq)]
pub struct StartupNodes {
    /// Function indices, by earliest position in any trace, then index.
    pub functions: Vec<u32>,
    /// `utilities[i]` belong to `functions[i]`, ascending.
    pub utilities: Vec<Vec<UtilityId>>,
}

/// Builds the nodes of every function appearing in `traces` (each trace: distinct function
/// indices in first-execution order). `sizes[f]` is function `f`'s code size in bytes (0 when
/// unknown, which leaves only the length cuts).
pub fn startup_nodes(traces: &[Vec<u32>], sizes: &[u64]) -> StartupNodes {
    let n = sizes.len();
    let mut first_position = vec![usize::MAX; n];
    let mut utilities: Vec<Vec<UtilityId>> = vec![Vec::new(); n];
    let mut first_cut: Vec<UtilityId> = vec![0; n];
    let mut next: UtilityId = 0;
    for trace in traces {
        let (mut size, mut cutoff_size, mut cutoff_len) = (0u64, 1u64, 1usize);
        for (position, &f) in trace.iter().enumerate() {
            let fi = f as usize;
            first_position[fi] = first_position[fi].min(position);
            size += sizes[fi];
            if position >= cutoff_len || size >= cutoff_size {
                next += 1;
                // Unknown sizes (0) never cut by size.
                cutoff_size = (2 * size).max(1);
                cutoff_len *= 2;
            }
            first_cut[fi] = next;
        }
        // Function f belongs to the prefixes first_cut[f] ..= next (the last is the trace).
        for &f in trace {
            utilities[f as usize].extend(first_cut[f as usize]..=next);
        }
        next += 1;
    }
    let mut functions: Vec<u32> =
        (0..n as u32).filter(|&f| first_position[f as usize] != usize::MAX).collect();
    functions.sort_by_key(|&f| (first_position[f as usize], f));
    let utilities = functions
        .iter()
        .map(|&f| {
            let mut u = std::mem::take(&mut utilities[f as usize]);
            u.sort_unstable();
            u.dedup();
            u
        })
        .collect();
    StartupNodes { functions, utilities }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_cuts_match_llvm_without_sizes() {
        // LLVM's BPFunctionNodeTest.Basic inputs (before outlier removal, which partitioning
        // does per bisection): trace 0 1 2 3 is cut after 1 and 2 functions, giving prefixes
        // u0 = {0}, u1 = {0, 1}, u2 = {0, 1, 2, 3}.
        let nodes = startup_nodes(&[vec![0, 1, 2, 3]], &[0; 4]);
        assert_eq!(nodes.functions, vec![0, 1, 2, 3]);
        assert_eq!(nodes.utilities, vec![vec![0, 1, 2], vec![1, 2], vec![2], vec![2]]);

        let nodes = startup_nodes(&[vec![0, 1, 2, 3, 4], vec![4, 2]], &[0; 5]);
        // Function 4 first runs at position 0 of the second trace: it sorts with function 0.
        // Utilities as in LLVM's test: 0 {0,1,2,3}, 1 {1,2,3}, 2 {2,3,5}, 3 {2,3}, 4 {3,4,5}.
        assert_eq!(nodes.functions, vec![0, 4, 1, 2, 3]);
        assert_eq!(
            nodes.utilities,
            vec![vec![0, 1, 2, 3], vec![3, 4, 5], vec![1, 2, 3], vec![2, 3, 5], vec![2, 3]]
        );
    }

    #[test]
    fn size_cuts_close_prefixes_when_the_code_doubles() {
        // Sizes 10, 10, 100, 1, 1: cuts at the first function (10 bytes >= 1), the second
        // (20 >= 20) and the third (120 >= 40); the length cutoff doubles with every cut
        // (2, 4, 8), so the last two functions join the third's prefix.
        let nodes = startup_nodes(&[vec![0, 1, 2, 3, 4]], &[10, 10, 100, 1, 1]);
        assert_eq!(nodes.utilities, vec![vec![1, 2, 3], vec![2, 3], vec![3], vec![3], vec![3]]);
    }

    #[test]
    fn functions_in_no_trace_have_no_node() {
        let nodes = startup_nodes(&[vec![3, 1]], &[0; 5]);
        assert_eq!(nodes.functions, vec![3, 1]);
    }
}
