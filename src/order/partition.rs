//! Balanced partitioning: orders nodes so that nodes sharing utilities sit close together.
//!
//! The algorithm of "Optimizing Function Layout for Mobile Applications" (Hoag, Lee, Savoldi,
//! Ahmed, Sagi; LCTES 2023) as `llvm/lib/Support/BalancedPartitioning.cpp` implements it:
//! recursive bisection of the node set into two halves of equal cardinality; each bisection
//! starts from the input order split in the middle and then runs rounds of local moves. A
//! round computes, for every node, the gain of moving it to the other half under the uniform
//! log-gap cost of the utilities it belongs to, sorts both halves by gain and swaps the best
//! pairs while the pair's total gain is positive (each move skipped with a small probability,
//! which helps leave local optima). The halves are then bisected on their own, down to a fixed
//! depth; below it (and at single nodes) the input order is kept.
//!
//! A utility is a set of nodes that would like to share a page (for start-up: the functions of
//! one trace prefix, see [`super::utility`]). With `x` of its nodes in the left half and `y` in
//! the right, its cost is `-(x·log2(x+1) + y·log2(y+1))`: the log of the expected gap between
//! consecutive members, summed, up to a term that does not depend on the split. Lower is better;
//! it is lowest when a utility's nodes are all on one side.
//!
//! Deterministic: every bisection draws from its own generator seeded from the configured seed
//! and the bucket number, so the result does not depend on the thread count or on scheduling.

use std::collections::HashMap;

/// Names one utility (a set of nodes that benefit from being placed together).
pub type UtilityId = u32;

/// Parameters; defaults are LLVM's (`BalancedPartitioningConfig`).
#[derive(Clone, Debug)]
pub struct PartitionConfig {
    /// Depth of the recursive bisection; below it the input order is kept.
    pub split_depth: u32,
    /// Maximum rounds of local moves per bisection (fewer when a round moves nothing).
    pub iterations_per_split: u32,
    /// Probability that a move is skipped.
    pub skip_probability: f64,
    /// Seed of the move-skipping generators.
    pub seed: u64,
}

impl Default for PartitionConfig {
    fn default() -> Self {
        PartitionConfig {
            split_depth: 18,
            iterations_per_split: 40,
            skip_probability: 0.1,
            seed: 0,
        }
    }
}

/// Sub-problems at least this large are bisected in parallel (rayon's current pool).
const PARALLEL_MIN_NODES: usize = 1024;

struct Node {
    input_index: u32,
    bucket: u32,
    utilities: Vec<UtilityId>,
}

/// The order of `utilities.len()` nodes, node `i` having the utilities `utilities[i]`: returns
/// the input indices in their new order. The input order matters: it is the starting point of
/// every bisection and the order kept where nothing distinguishes two nodes.
pub fn balanced_partition(utilities: Vec<Vec<UtilityId>>, config: &PartitionConfig) -> Vec<usize> {
    let mut nodes: Vec<Node> = utilities
        .into_iter()
        .enumerate()
        .map(|(i, mut u)| {
            u.sort_unstable();
            u.dedup();
            Node { input_index: i as u32, bucket: 0, utilities: u }
        })
        .collect();
    bisect(&mut nodes, 0, 1, config);
    nodes.into_iter().map(|n| n.input_index as usize).collect()
}

fn bisect(nodes: &mut [Node], depth: u32, root_bucket: u32, config: &PartitionConfig) {
    if nodes.len() <= 1 || depth >= config.split_depth {
        nodes.sort_unstable_by_key(|n| n.input_index);
        return;
    }
    let mut rng = SplitMix64::new(config.seed, root_bucket);
    let (left, right) = (2 * root_bucket, 2 * root_bucket + 1);
    // Start from the input order, split in the middle.
    nodes.sort_unstable_by_key(|n| n.input_index);
    let mid = nodes.len().div_ceil(2);
    for (i, n) in nodes.iter_mut().enumerate() {
        n.bucket = if i < mid { left } else { right };
    }
    run_iterations(nodes, left, config, &mut rng);
    // Left bucket first, each side in its current order.
    nodes.sort_by_key(|n| n.bucket != left);
    let mid = nodes.iter().take_while(|n| n.bucket == left).count();
    let (l, r) = nodes.split_at_mut(mid);
    if l.len() + r.len() >= PARALLEL_MIN_NODES {
        rayon::join(|| bisect(l, depth + 1, left, config), || bisect(r, depth + 1, right, config));
    } else {
        bisect(l, depth + 1, left, config);
        bisect(r, depth + 1, right, config);
    }
}

/// How many nodes of one utility are in each half, and the cached gains of moving one across.
#[derive(Clone, Default)]
struct Signature {
    left: u32,
    right: u32,
    gain_left_to_right: f64,
    gain_right_to_left: f64,
    gain_valid: bool,
}

fn run_iterations(nodes: &mut [Node], left: u32, config: &PartitionConfig, rng: &mut SplitMix64) {
    // Utilities with one node, or with every node of this sub-problem, cannot be improved by any
    // split: drop them (for good: the same holds in every sub-problem below) and number the
    // others densely, in order of first appearance.
    let mut degree: HashMap<UtilityId, u32> = HashMap::new();
    for n in nodes.iter() {
        for &u in &n.utilities {
            *degree.entry(u).or_insert(0) += 1;
        }
    }
    let all = nodes.len() as u32;
    let mut dense: HashMap<UtilityId, UtilityId> = HashMap::new();
    for n in nodes.iter_mut() {
        n.utilities.retain(|u| {
            let d = degree[u];
            d > 1 && d < all
        });
        for u in n.utilities.iter_mut() {
            let next = dense.len() as UtilityId;
            *u = *dense.entry(*u).or_insert(next);
        }
    }
    let mut signatures = vec![Signature::default(); dense.len()];
    for n in nodes.iter() {
        for &u in &n.utilities {
            let s = &mut signatures[u as usize];
            if n.bucket == left {
                s.left += 1;
            } else {
                s.right += 1;
            }
        }
    }
    for _ in 0..config.iterations_per_split {
        if run_iteration(nodes, left, &mut signatures, config, rng) == 0 {
            break;
        }
    }
}

/// One round of moves; returns how many had a positive gain (made or skipped). LLVM counts the
/// moves made, so a round whose few moves were all skipped ends the bisection early; counting
/// attempts stops only when nothing is left to gain.
fn run_iteration(
    nodes: &mut [Node],
    left: u32,
    signatures: &mut [Signature],
    config: &PartitionConfig,
    rng: &mut SplitMix64,
) -> usize {
    for s in signatures.iter_mut().filter(|s| !s.gain_valid) {
        let cost = log_cost(s.left, s.right);
        s.gain_left_to_right =
            if s.left > 0 { cost - log_cost(s.left - 1, s.right + 1) } else { 0.0 };
        s.gain_right_to_left =
            if s.right > 0 { cost - log_cost(s.left + 1, s.right - 1) } else { 0.0 };
        s.gain_valid = true;
    }
    let mut left_gains = Vec::new();
    let mut right_gains = Vec::new();
    for (i, n) in nodes.iter().enumerate() {
        let from_left = n.bucket == left;
        let gain = move_gain(n, from_left, signatures);
        if from_left { left_gains.push((gain, i)) } else { right_gains.push((gain, i)) }
    }
    // Largest gain first; stable, so equal gains keep the current order.
    left_gains.sort_by(|a, b| b.0.total_cmp(&a.0));
    right_gains.sort_by(|a, b| b.0.total_cmp(&a.0));
    let mut attempted = 0;
    for (&(lg, li), &(rg, ri)) in left_gains.iter().zip(&right_gains) {
        if lg + rg <= 0.0 {
            break;
        }
        attempted += 2;
        // Each move is skipped on its own: the halves may end up a little unbalanced, which is
        // what lets two nodes of the same utility, swapped in every round, separate.
        for i in [li, ri] {
            if rng.next_f64() > config.skip_probability {
                move_node(&mut nodes[i], left, signatures);
            }
        }
    }
    attempted
}

/// The gain of moving `n` to the other half: the sum of its utilities' cached gains.
fn move_gain(n: &Node, from_left: bool, signatures: &[Signature]) -> f64 {
    n.utilities
        .iter()
        .map(|&u| {
            let s = &signatures[u as usize];
            if from_left { s.gain_left_to_right } else { s.gain_right_to_left }
        })
        .sum()
}

fn move_node(n: &mut Node, left: u32, signatures: &mut [Signature]) {
    let from_left = n.bucket == left;
    n.bucket = if from_left { left + 1 } else { left };
    for &u in &n.utilities {
        let s = &mut signatures[u as usize];
        if from_left {
            s.left -= 1;
            s.right += 1;
        } else {
            s.left += 1;
            s.right -= 1;
        }
        s.gain_valid = false;
    }
}

/// The uniform log-gap cost of a utility with `x` nodes in the left half and `y` in the right.
fn log_cost(x: u32, y: u32) -> f64 {
    let (x, y) = (f64::from(x), f64::from(y));
    -(x * (x + 1.0).log2() + y * (y + 1.0).log2())
}

/// SplitMix64 (Steele, Lea, Flood): small, fast, and good enough to decide skipped moves.
struct SplitMix64(u64);

impl SplitMix64 {
    fn new(seed: u64, stream: u32) -> Self {
        let mut g = SplitMix64(seed ^ u64::from(stream).wrapping_mul(0xd1b5_4a32_d192_ed03));
        g.next_u64();
        g
    }

    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seeded(seed: u64) -> PartitionConfig {
        PartitionConfig { seed, ..PartitionConfig::default() }
    }

    #[test]
    fn log_cost_prefers_utilities_on_one_side() {
        // 4 nodes of one utility: all on one side beats any mixed split.
        assert!(log_cost(4, 0) < log_cost(3, 1));
        assert!(log_cost(3, 1) < log_cost(2, 2));
        assert_eq!(log_cost(4, 0), log_cost(0, 4));
        assert_eq!(log_cost(1, 0), -1.0);
    }

    #[test]
    fn move_gain_sums_the_cached_gains_of_the_nodes_utilities() {
        // LLVM's BalancedPartitioningTest.MoveGain, same signatures and expectations.
        let sig = |l, r, lr, rl| Signature {
            left: l,
            right: r,
            gain_left_to_right: lr,
            gain_right_to_left: rl,
            gain_valid: true,
        };
        let sigs = [sig(10, 10, 10.0, 10.0), sig(15, 5, 20.0, 0.0), sig(5, 15, 0.0, 30.0)];
        let node = |u: &[u32]| Node { input_index: 0, bucket: 0, utilities: u.to_vec() };
        assert_eq!(move_gain(&node(&[]), true, &sigs), 0.0);
        assert_eq!(move_gain(&node(&[0, 1, 2]), true, &sigs), 30.0);
        assert_eq!(move_gain(&node(&[0, 1, 2]), false, &sigs), 40.0);
        assert_eq!(move_gain(&node(&[1, 2]), false, &sigs), 30.0);
        assert_eq!(move_gain(&node(&[]), false, &sigs), 0.0);
    }

    #[test]
    fn llvm_basic_case() {
        // LLVM's BalancedPartitioningTest.Basic: ids 0, 2, 1, 3, 4 in input order, sharing
        // utilities {1, 2} (ids 0, 1) and {3, 4} (ids 2, 3, and 4 with 4 only).
        let ids = [0, 2, 1, 3, 4];
        let utilities = vec![vec![1, 2], vec![3, 4], vec![1, 2], vec![3, 4], vec![4]];
        let order: Vec<usize> =
            balanced_partition(utilities, &seeded(0)).into_iter().map(|i| ids[i]).collect();
        assert_eq!(order, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn groups_sharing_utilities_end_up_adjacent() {
        // Utility 100 joins the even nodes, 200 the odd ones; the input order interleaves
        // them. Moves are skipped at random (which is what breaks the symmetric swap of whole
        // halves), so the local search is a heuristic: it separates the groups for the default
        // seed and for nearly every other.
        let utilities: Vec<Vec<u32>> =
            (0..8).map(|i| if i % 2 == 0 { vec![100] } else { vec![200] }).collect();
        let separated = |order: &[usize]| {
            order[..4].iter().all(|i| i % 2 == order[0] % 2)
                && order[4..].iter().all(|i| i % 2 == order[4] % 2)
        };
        assert_eq!(balanced_partition(utilities.clone(), &seeded(0)), [1, 3, 5, 7, 0, 2, 4, 6]);
        let good = (0..200)
            .filter(|&seed| separated(&balanced_partition(utilities.clone(), &seeded(seed))))
            .count();
        assert!(good >= 185, "{good} of 200 seeds separate the groups");
    }

    #[test]
    fn nested_utilities_give_the_nested_order() {
        // Prefix-like utilities: A = {0..4}, B = {0, 1}, C = {4, 5}. The best orders (least
        // log-gap cost) are those where each utility's nodes are contiguous. The input is
        // shuffled so the partitioner has to move nodes to get there.
        let mut utilities = vec![Vec::new(); 8];
        for (u, members) in [(1u32, &[0usize, 1, 2, 3][..]), (2, &[0, 1]), (3, &[4, 5])] {
            for &m in members {
                utilities[m].push(u);
            }
        }
        let perm = [5usize, 2, 7, 0, 4, 3, 6, 1];
        let shuffled: Vec<Vec<u32>> = perm.iter().map(|&p| utilities[p].clone()).collect();
        let order = |seed| -> Vec<usize> {
            balanced_partition(shuffled.clone(), &seeded(seed))
                .into_iter()
                .map(|i| perm[i])
                .collect()
        };
        let best = |order: &[usize]| {
            let at = |n: usize| order.iter().position(|&x| x == n).unwrap();
            [&[0, 1, 2, 3][..], &[0, 1], &[4, 5]].iter().all(|members| {
                let pos: Vec<usize> = members.iter().map(|&m| at(m)).collect();
                pos.iter().max().unwrap() - pos.iter().min().unwrap() == members.len() - 1
            })
        };
        assert_eq!(order(0), [2, 0, 1, 3, 7, 5, 4, 6]);
        assert!(best(&order(0)));
        let good = (0..200).filter(|&seed| best(&order(seed))).count();
        assert!(good >= 185, "{good} of 200 seeds find a best order");
    }

    #[test]
    fn same_seed_same_order_and_skips_depend_on_the_seed_only() {
        let utilities: Vec<Vec<u32>> = (0..3000u32).map(|i| vec![i % 37]).collect();
        let cfg = PartitionConfig { seed: 7, ..PartitionConfig::default() };
        let a = balanced_partition(utilities.clone(), &cfg);
        let one_thread = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
        let b = one_thread.install(|| balanced_partition(utilities.clone(), &cfg));
        assert_eq!(a, b);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..3000).collect::<Vec<_>>());
        // Utility i % 37 groups nodes 37 apart: a good order puts each residue class together.
        let together = a.windows(2).filter(|w| w[0] % 37 == w[1] % 37).count();
        assert!(together > 2500, "only {together} neighbours share the residue");
    }

    #[test]
    fn split_depth_zero_keeps_the_input_order() {
        let utilities: Vec<Vec<u32>> = (0..6).map(|i| vec![i % 2]).collect();
        let cfg = PartitionConfig { split_depth: 0, ..seeded(0) };
        assert_eq!(balanced_partition(utilities, &cfg), vec![0, 1, 2, 3, 4, 5]);
    }
}
