//! Start-up function order from temporal traces (`profgen order`).
//!
//! Programs whose cost is start-up gain most from the order of functions in `.text`: functions
//! that first run during start-up, placed together, touch fewer pages. LLVM's temporal
//! profiling gets a trace per run from instrumentation and orders functions with balanced
//! partitioning (`llvm-profdata order`); profgen gets the traces from samples instead, which
//! carry timestamps, and whose LBR entries and call stacks show many more functions than the
//! sampled IPs alone.
//!
//! - [`reservoir`]: a fixed-size, seeded random sample of traces that merges exactly.
//! - [`utility`]: the trace prefixes each function belongs to.
//! - [`partition`]: balanced partitioning (recursive bisection with local moves).
//! - [`pages`]: the start-up pages metric measured on a real run.

pub mod pages;
pub mod partition;
pub mod reservoir;
pub mod utility;

use partition::{PartitionConfig, balanced_partition};
use utility::startup_nodes;

/// How traced functions are ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Algorithm {
    /// Balanced partitioning over trace-prefix utilities (`llvm-profdata order`).
    #[default]
    Balanced,
    /// By earliest position in any trace (ties by original order): no partitioning.
    FirstTimestamp,
}

/// The new order of functions `0..sizes.len()` (indices in their original, address order):
/// functions in `traces` first, as `algorithm` orders them, then every other function in its
/// original relative order. Each trace lists distinct function indices in first-run order;
/// `sizes` are code sizes in bytes (0 when unknown).
pub fn order_functions(
    traces: &[Vec<u32>],
    sizes: &[u64],
    algorithm: Algorithm,
    config: &PartitionConfig,
) -> Vec<u32> {
    let nodes = startup_nodes(traces, sizes);
    let mut order = match algorithm {
        Algorithm::FirstTimestamp => nodes.functions.clone(),
        Algorithm::Balanced => balanced_partition(nodes.utilities, config)
            .into_iter()
            .map(|i| nodes.functions[i])
            .collect(),
    };
    let mut placed = vec![false; sizes.len()];
    for &f in &order {
        placed[f as usize] = true;
    }
    order.extend((0..sizes.len() as u32).filter(|&f| !placed[f as usize]));
    order
}

/// The start-up cost of a layout as lld's `BPSectionOrderer` evaluates one: functions laid out
/// back to back in `order` (with `sizes`), the sum over every trace and every step `t` of the
/// number of distinct pages its first `t` functions touch (the area under the page-fault
/// curve). Lower is better.
pub fn page_fault_area(traces: &[Vec<u32>], sizes: &[u64], order: &[u32], page_size: u64) -> u64 {
    let mut pages = vec![(0u64, 0u64); sizes.len()];
    let mut at = 0u64;
    for &f in order {
        let size = sizes[f as usize].max(1);
        pages[f as usize] = (at / page_size, (at + size - 1) / page_size);
        at += size;
    }
    let mut area = 0;
    for trace in traces {
        let mut touched = std::collections::HashSet::new();
        for &f in trace {
            let (first, last) = pages[f as usize];
            touched.extend(first..=last);
            area += touched.len() as u64;
        }
    }
    area
}

#[cfg(test)]
mod tests {
    use super::*;

    fn permutations(n: u32) -> Vec<Vec<u32>> {
        let mut out = Vec::new();
        let mut p: Vec<u32> = (0..n).collect();
        heap_permute(&mut p, n as usize, &mut out);
        out
    }

    fn heap_permute(p: &mut Vec<u32>, k: usize, out: &mut Vec<Vec<u32>>) {
        if k <= 1 {
            out.push(p.clone());
            return;
        }
        for i in 0..k {
            heap_permute(p, k - 1, out);
            let j = if k.is_multiple_of(2) { i } else { 0 };
            p.swap(j, k - 1);
        }
    }

    fn best_area(traces: &[Vec<u32>], sizes: &[u64], page: u64) -> u64 {
        permutations(sizes.len() as u32)
            .iter()
            .map(|o| page_fault_area(traces, sizes, o, page))
            .min()
            .unwrap()
    }

    fn bp() -> PartitionConfig {
        PartitionConfig::default()
    }

    #[test]
    fn start_up_functions_spread_over_the_binary_are_gathered_on_one_page() {
        // 8 functions of 1 KiB (4 per page). Start-up runs the odd ones, in different orders
        // in different runs, then the even ones; the link order interleaves them.
        let sizes = [1024; 8];
        let traces =
            vec![vec![1, 3, 5, 7, 0, 2], vec![3, 1, 7, 5, 2, 4], vec![5, 7, 1, 3, 6, 0, 2, 4]];
        let order = order_functions(&traces, &sizes, Algorithm::Balanced, &bp());
        let mut first_page = order[..4].to_vec();
        first_page.sort_unstable();
        assert_eq!(first_page, vec![1, 3, 5, 7]);
        assert_eq!(
            page_fault_area(&traces, &sizes, &order, 4096),
            best_area(&traces, &sizes, 4096)
        );
        // The default order touches both pages from the second step on.
        assert!(
            page_fault_area(&traces, &sizes, &[0, 1, 2, 3, 4, 5, 6, 7], 4096)
                > page_fault_area(&traces, &sizes, &order, 4096)
        );
    }

    #[test]
    fn balanced_partitioning_beats_first_timestamp_when_runs_disagree() {
        // Two kinds of run (say, two command-line modes) share main (0) and then each runs its
        // own set of functions; interleaved by time, first-timestamp order mixes them on every
        // page, balanced partitioning keeps each mode's functions together. 2 KiB functions,
        // 2 per page; the optimum is known by trying all 7! orders of the traced functions.
        let sizes = [2048; 7];
        let traces = vec![vec![0, 1, 3, 5], vec![0, 2, 4, 6], vec![0, 1, 5, 3], vec![0, 2, 6, 4]];
        let ts = order_functions(&traces, &sizes, Algorithm::FirstTimestamp, &bp());
        assert_eq!(ts, vec![0, 1, 2, 3, 4, 5, 6]);
        let bp_order = order_functions(&traces, &sizes, Algorithm::Balanced, &bp());
        let best = best_area(&traces, &sizes, 4096);
        assert_eq!(page_fault_area(&traces, &sizes, &bp_order, 4096), best);
        assert!(page_fault_area(&traces, &sizes, &ts, 4096) > best);
    }

    #[test]
    fn unseen_functions_follow_in_their_original_order() {
        let order = order_functions(&[vec![4, 2]], &[16; 6], Algorithm::Balanced, &bp());
        assert_eq!(&order[2..], &[0, 1, 3, 5]);
        let ts = order_functions(&[vec![4, 2]], &[16; 6], Algorithm::FirstTimestamp, &bp());
        assert_eq!(ts, vec![4, 2, 0, 1, 3, 5]);
    }

    #[test]
    fn page_fault_area_counts_pages_per_step() {
        // Functions 0 and 1 share page 0, function 2 (6000 bytes) covers pages 0 to 1.
        let sizes = [1000, 1000, 6000];
        assert_eq!(page_fault_area(&[vec![0, 2]], &sizes, &[0, 1, 2], 4096), 1 + 2);
        assert_eq!(page_fault_area(&[vec![0, 1]], &sizes, &[0, 2, 1], 4096), 1 + 2);
    }
}
