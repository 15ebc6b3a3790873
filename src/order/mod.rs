//! Start-up function order from temporal traces (`profgen order`).
//!
//! Programs whose cost is start-up gain most from the order of functions in `.text`: functions
//! that first run during start-up, placed together, touch fewer pages. LLVM's temporal
//! profiling gets a trace per run from instrumentation and orders functions with balanced
//! partitioning (`llvm-profdata order`); profgen gets the traces from samples instead, which
//! carry timestamps, and whose LBR entries and call stacks show many more functions than the
//! sampled IPs alone.
//!
//! The traces themselves are collected while the inputs are read
//! ([`crate::aggregate::traces`]); here they are sampled, partitioned and written out:
//!
//! - [`reservoir`]: a fixed-size, seeded random sample of traces that merges exactly.
//! - [`utility`]: the trace prefixes each function belongs to.
//! - [`partition`]: balanced partitioning (recursive bisection with local moves).
//! - [`pages`]: the start-up pages metric measured on a real run.

pub mod pages;
pub mod partition;
pub mod reservoir;
pub mod utility;

use std::collections::HashSet;
use std::fmt::Write as _;

use crate::aggregate::traces::{FunctionTable, ProcessFunctions};
use partition::{PartitionConfig, balanced_partition};
use reservoir::{SamplingParams, TemporalTrace, TraceSample};
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

/// How a function order is made from traces.
#[derive(Clone, Debug, Default)]
pub struct OrderOptions {
    pub algorithm: Algorithm,
    pub sampling: SamplingParams,
    pub partition: PartitionConfig,
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

/// Offers the traces collected from one input to `sample`, with the table's names.
pub fn offer_traces(
    sample: &mut TraceSample,
    table: &FunctionTable,
    traces: Vec<ProcessFunctions>,
) {
    for t in traces {
        sample.offer(TemporalTrace {
            pid: t.pid,
            start_time: t.start_time,
            functions: t.functions.iter().map(|&f| table.name(f).to_string()).collect(),
        });
    }
}

/// What [`order_file`] did, for the summary line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OrderReport {
    /// Traces used, and traces seen by the sample.
    pub traces: usize,
    pub traces_seen: u64,
    /// Functions of the binary placed by the traces, and all of them.
    pub ordered: usize,
    pub functions: usize,
    /// Names in the traces that the binary does not have (traces of another build).
    pub unknown_names: usize,
    /// Mean 4 KiB pages a trace's functions span, laid out back to back in the original order
    /// and in the new one (an estimate: the real layout adds alignment and other sections).
    pub pages_before: f64,
    pub pages_after: f64,
}

impl OrderReport {
    pub fn summary_line(&self) -> String {
        format!(
            "profgen order: {} used ({} seen), {} of {} functions ordered by {}{}; pages their \
             functions span (mean per trace, estimated): {:.1} in the original order, {:.1} \
             ordered",
            traces(self.traces),
            self.traces_seen,
            self.ordered,
            self.functions,
            if self.traces == 1 { "it" } else { "them" },
            if self.unknown_names > 0 {
                format!(", {} names not in the binary", self.unknown_names)
            } else {
                String::new()
            },
            self.pages_before,
            self.pages_after
        )
    }
}

fn traces(n: usize) -> String {
    format!("{n} trace{}", if n == 1 { "" } else { "s" })
}

/// The lld `--symbol-ordering-file` for `table`'s functions ordered by `sample`'s traces: one
/// symbol per line, after `#` comment lines saying how it was made.
pub fn order_file(
    sample: &TraceSample,
    table: &FunctionTable,
    opts: &OrderOptions,
) -> (String, OrderReport) {
    let mut unknown = HashSet::new();
    let traces: Vec<Vec<u32>> = sample
        .traces()
        .map(|t| {
            let mut seen = HashSet::new();
            t.functions
                .iter()
                .filter_map(|name| match table.entry_of_name(name) {
                    Some(f) => seen.insert(f).then_some(f),
                    None => {
                        unknown.insert(name.as_str());
                        None
                    }
                })
                .collect()
        })
        .collect();
    let order = order_functions(&traces, table.sizes(), opts.algorithm, &opts.partition);
    let ordered = traces.iter().flatten().collect::<HashSet<_>>().len();
    let original: Vec<u32> = (0..table.len() as u32).collect();
    let report = OrderReport {
        traces: traces.len(),
        traces_seen: sample.seen(),
        ordered,
        functions: table.len(),
        unknown_names: unknown.len(),
        pages_before: mean_pages(&traces, table.sizes(), &original),
        pages_after: mean_pages(&traces, table.sizes(), &order),
    };
    let how = match opts.algorithm {
        Algorithm::Balanced => "balanced partitioning",
        Algorithm::FirstTimestamp => "first timestamp",
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "# profgen order: {} functions, the first {ordered} by {how} of {} temporal {}",
        order.len(),
        traces.len(),
        if traces.len() == 1 { "trace" } else { "traces" }
    );
    let _ = writeln!(out, "# for lld --symbol-ordering-file (with -ffunction-sections)");
    for f in order {
        let _ = writeln!(out, "{}", table.name(f));
    }
    (out, report)
}

/// Mean over `traces` of the distinct 4 KiB pages their functions span when laid out back to
/// back in `order` (0 without traces).
fn mean_pages(traces: &[Vec<u32>], sizes: &[u64], order: &[u32]) -> f64 {
    if traces.is_empty() {
        return 0.0;
    }
    let spans = layout_pages(sizes, order, 4096);
    let total: usize = traces
        .iter()
        .map(|t| {
            t.iter()
                .flat_map(|&f| spans[f as usize].0..=spans[f as usize].1)
                .collect::<HashSet<_>>()
                .len()
        })
        .sum();
    total as f64 / traces.len() as f64
}

/// The first and last page of every function laid out back to back in `order`.
fn layout_pages(sizes: &[u64], order: &[u32], page_size: u64) -> Vec<(u64, u64)> {
    let mut pages = vec![(0u64, 0u64); sizes.len()];
    let mut at = 0u64;
    for &f in order {
        let size = sizes[f as usize].max(1);
        pages[f as usize] = (at / page_size, (at + size - 1) / page_size);
        at += size;
    }
    pages
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The start-up cost of a layout as lld's `BPSectionOrderer` evaluates one: functions laid out
    /// back to back in `order` (with `sizes`), the sum over every trace and every step `t` of the
    /// number of distinct pages its first `t` functions touch (the area under the page-fault
    /// curve). Lower is better.
    fn page_fault_area(traces: &[Vec<u32>], sizes: &[u64], order: &[u32], page_size: u64) -> u64 {
        let pages = layout_pages(sizes, order, page_size);
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

    #[test]
    fn order_file_lists_traced_functions_first_then_the_rest_in_address_order() {
        let table = FunctionTable::new([
            ("main", 0x1000, 0x100),
            ("init_a", 0x1100, 0x2000),
            ("cold", 0x3100, 0x3000),
            ("init_b", 0x6100, 0x800),
            ("exit", 0x6900, 0x10),
        ]);
        let mut sample = TraceSample::new(SamplingParams::default());
        let trace = |f: &[u32]| ProcessFunctions { pid: 1, start_time: 5, functions: f.to_vec() };
        offer_traces(&mut sample, &table, vec![trace(&[0, 3, 1])]);
        sample.offer(TemporalTrace {
            pid: 2,
            start_time: 9,
            functions: vec!["main".into(), "gone_in_this_build".into(), "init_b".into()],
        });
        let opts = OrderOptions { algorithm: Algorithm::FirstTimestamp, ..Default::default() };
        let (text, report) = order_file(&sample, &table, &opts);
        assert_eq!(
            text,
            "# profgen order: 5 functions, the first 3 by first timestamp of 2 temporal traces\n\
             # for lld --symbol-ordering-file (with -ffunction-sections)\n\
             main\ninit_b\ninit_a\ncold\nexit\n"
        );
        // Back to back in the original order, main, init_b and init_a span pages 0-2 and 5, main
        // and init_b pages 0 and 5; ordered, pages 0-2 and page 0.
        assert_eq!(
            report,
            OrderReport {
                traces: 2,
                traces_seen: 2,
                ordered: 3,
                functions: 5,
                unknown_names: 1,
                pages_before: 3.0,
                pages_after: 2.0,
            }
        );
    }
}
