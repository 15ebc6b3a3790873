//! IP samples → basic-block counts, for context-less profiles made from sample IPs alone.
//!
//! llvm-profgen counts an IP sample as a range of one instruction. A pseudo probe then counts
//! only the samples that hit its own address (the first instruction of its block), and a line
//! sums the samples of all its instructions, so its count grows with the instructions the line
//! compiled to. Under a time-like event (cycles, `cpu-clock`) a block's samples estimate its
//! executions × its instructions. Here each block (split at branches and at direct branch
//! targets, within a function range) gets `samples in it / instructions in it` as one range
//! over the whole block, scaled so that the blocks' counts sum to the samples: every probe of
//! the block gets the block's count, and a line the count of its hottest block, as from LBR
//! ranges. Off under `--llvm-compatible` (README, "Differences from llvm-profgen").

use crate::addr::Vaddr;
use crate::aggregate::Counters;
use crate::binary::{Binary, InstKind};

/// Counters whose single-instruction ranges (sample IPs) are replaced by their blocks' ranges
/// with the estimated counts; branches are kept. Deterministic: blocks are visited in address
/// order and the arithmetic is integer.
pub fn block_counters(binary: &Binary, counters: &Counters) -> Counters {
    let mut ips: Vec<(Vaddr, u64)> = Vec::with_capacity(counters.ranges.len());
    let mut out = Counters { branches: counters.branches.clone(), ..Counters::default() };
    for (&(s, e), &n) in &counters.ranges {
        if s == e {
            ips.push((s, n));
        } else {
            out.add_range(s, e, n);
        }
    }
    ips.sort_unstable();
    // (first instruction, last instruction, samples, instructions) per sampled block.
    let mut blocks: Vec<(Vaddr, Vaddr, u64, u64)> = Vec::new();
    let mut i = 0;
    while i < ips.len() {
        let Some(range) = binary.func_range(ips[i].0) else {
            out.add_range(ips[i].0, ips[i].0, ips[i].1);
            i += 1;
            continue;
        };
        let in_range = ips[i..].partition_point(|&(a, _)| a < range.end);
        for_each_block(binary, range.start, range.end, &ips[i..i + in_range], &mut blocks);
        i += in_range;
    }
    // Block count ∝ samples / instructions; fixed point so that rare blocks keep their share.
    const ONE: u128 = 1 << 20;
    let density = |samples: u64, insts: u64| u128::from(samples) * ONE / u128::from(insts.max(1));
    // Saturating: sample counts weighted by `--sample-period` can be near u64::MAX.
    let total_density =
        blocks.iter().fold(0u128, |t, &(_, _, s, n)| t.saturating_add(density(s, n)));
    let total_samples =
        blocks.iter().fold(0u128, |t, &(_, _, s, _)| t.saturating_add(u128::from(s)));
    for (start, last, samples, insts) in blocks {
        let scaled =
            density(samples, insts).saturating_mul(total_samples).saturating_add(total_density / 2)
                / total_density;
        // A sampled block ran: never 0.
        let count = u64::try_from(scaled).unwrap_or(u64::MAX).max(1);
        out.add_range(start, last, count);
    }
    out
}

/// Appends the blocks of function range `[start, end)` that hold any of `ips` (sorted, all in
/// the range) to `blocks`. A block ends at a control transfer other than a call, or before a
/// direct branch target of the range.
fn for_each_block(
    binary: &Binary,
    start: Vaddr,
    end: Vaddr,
    ips: &[(Vaddr, u64)],
    blocks: &mut Vec<(Vaddr, Vaddr, u64, u64)>,
) {
    let Some(last_byte) = end.0.checked_sub(1).map(Vaddr) else { return };
    let mut targets: Vec<Vaddr> = binary
        .insts_in(start, last_byte)
        .filter_map(|a| binary.branch_target(a))
        .filter(|t| *t > start && *t < end)
        .collect();
    targets.sort_unstable();
    targets.dedup();
    let mut next_ip = ips.iter().peekable();
    let mut block_start = start;
    let (mut samples, mut insts) = (0u64, 0u64);
    let mut insts_iter = binary.insts_in(start, last_byte).peekable();
    while let Some(a) = insts_iter.next() {
        insts += 1;
        let next = insts_iter.peek().copied();
        // IPs that are not instruction starts count for the instruction they fall in.
        while let Some(&&(ip, n)) = next_ip.peek() {
            if next.is_some_and(|next| ip >= next) {
                break;
            }
            samples = samples.saturating_add(n);
            next_ip.next();
        }
        let ends_block =
            binary.inst_kind(a).is_some_and(|k| k.is_transfer() && k != InstKind::Call)
                || next.is_none_or(|next| targets.binary_search(&next).is_ok());
        if ends_block {
            if samples > 0 {
                blocks.push((block_start, a, samples, insts));
            }
            if let Some(next) = next {
                block_start = next;
            }
            samples = 0;
            insts = 0;
            if next_ip.peek().is_none() {
                return;
            }
        }
    }
}
