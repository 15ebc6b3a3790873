//! Temporal traces from samples: per process, the binary's functions in the order they first
//! appear in a sample.
//!
//! A sample shows more than its IP: its LBR entries are the last taken branches before it
//! (sources and targets ran, oldest last in perf's order), and its call stack holds the callers
//! that were entered before everything else in the sample. Within one sample the functions are
//! put in the order they ran as far as the sample tells:
//!
//! 1. call-stack frames whose function does not appear in the branch stack, outermost first
//!    (entered before the branch window began; the leaf frame is the IP, placed last);
//! 2. the branch stack, oldest entry first, source before target;
//! 3. the IP.
//!
//! Across samples, a process's samples arrive in time order (perf.data is read round by round),
//! and a function keeps the place of the first sample it appears in. Functions are the linker's
//! units, the `.symtab` function symbols: an address inside inlined code counts toward the
//! outermost function, the one whose section the linker moves.

use std::collections::HashMap;
use std::sync::Arc;

use crate::addr::{RuntimeAddr, Vaddr};
use crate::binary::Binary;
use crate::input::Sample;
use crate::mapping::AddressMap;

/// The binary's functions as the linker sees them: one entry per distinct symbol name (static
/// functions of the same name in several files are one entry, as an ordering file names them),
/// in address order of their first symbol.
#[derive(Debug, Clone)]
pub struct FunctionTable {
    names: Vec<Arc<str>>,
    /// Code bytes per entry (all its symbols).
    sizes: Vec<u64>,
    /// (start, end, entry), sorted by start; overlapping symbols keep the first.
    ranges: Vec<(u64, u64, u32)>,
    by_name: HashMap<Arc<str>, u32>,
}

impl FunctionTable {
    /// The function symbols of `binary`.
    pub fn of_binary(binary: &Binary) -> FunctionTable {
        FunctionTable::new(binary.function_symbols().iter().map(|s| (&*s.name, s.addr.0, s.size)))
    }

    /// From function symbols `(name, start, size)` in executable sections; empty symbols are
    /// skipped. Aliases (several names at one address) keep the first name in (address, name)
    /// order.
    pub fn new<'a>(symbols: impl IntoIterator<Item = (&'a str, u64, u64)>) -> FunctionTable {
        let mut syms: Vec<(u64, u64, &str)> = symbols
            .into_iter()
            .filter(|&(_, _, size)| size > 0)
            .map(|(name, start, size)| (start, size, name))
            .collect();
        syms.sort_unstable();
        let mut table = FunctionTable {
            names: Vec::new(),
            sizes: Vec::new(),
            ranges: Vec::new(),
            by_name: HashMap::new(),
        };
        for (start, size, name) in syms {
            if table.ranges.last().is_some_and(|&(s, e, _)| start < e || start == s) {
                continue;
            }
            let entry = match table.by_name.get(name) {
                Some(&e) => e,
                None => {
                    let e = table.names.len() as u32;
                    let name: Arc<str> = Arc::from(name);
                    table.names.push(name.clone());
                    table.sizes.push(0);
                    table.by_name.insert(name, e);
                    e
                }
            };
            table.sizes[entry as usize] += size;
            table.ranges.push((start, start + size, entry));
        }
        table
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn name(&self, entry: u32) -> &Arc<str> {
        &self.names[entry as usize]
    }

    /// Code sizes in bytes, by entry.
    pub fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    pub fn entry_of_name(&self, name: &str) -> Option<u32> {
        self.by_name.get(name).copied()
    }

    /// The function containing `addr`.
    pub fn entry_at(&self, addr: Vaddr) -> Option<u32> {
        let i = self.ranges.partition_point(|&(s, _, _)| s <= addr.0);
        self.ranges[..i].last().filter(|&&(_, e, _)| addr.0 < e).map(|&(_, _, f)| f)
    }
}

/// One process's trace so far.
struct ProcessTrace {
    start_time: u64,
    seen: std::collections::HashSet<u32>,
    functions: Vec<u32>,
}

/// A finished trace: functions by entry of the [`FunctionTable`], in first-appearance order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessFunctions {
    pub pid: i64,
    pub start_time: u64,
    pub functions: Vec<u32>,
}

/// The temporal traces of a run's inputs, by entry of their function table.
#[derive(Debug, Clone)]
pub struct TemporalTraces {
    pub table: FunctionTable,
    pub traces: Vec<ProcessFunctions>,
}

/// Builds traces from the samples of one input, in the order they are read (the order of
/// their timestamps: perf.data is read round by round).
pub struct TraceCollector<'t> {
    table: &'t FunctionTable,
    /// Functions kept per trace (the later ones could never be used).
    max_length: usize,
    live: HashMap<i64, ProcessTrace>,
    done: Vec<ProcessFunctions>,
    scratch: Vec<u32>,
    in_branches: Vec<u32>,
}

impl<'t> TraceCollector<'t> {
    pub fn new(table: &'t FunctionTable, max_length: usize) -> Self {
        TraceCollector {
            table,
            max_length,
            live: HashMap::new(),
            done: Vec::new(),
            scratch: Vec::new(),
            in_branches: Vec::new(),
        }
    }

    /// Adds a sample; `map` translates its addresses (the state when it was read).
    pub fn sample(&mut self, map: &AddressMap, s: &Sample<'_>) {
        let table = self.table;
        let entry = |a: RuntimeAddr| map.to_vaddr(s.pid, a).and_then(|v| table.entry_at(v));
        // 2. branch stack, oldest first (perf lists it newest first).
        self.in_branches.clear();
        for b in s.branches.iter().rev() {
            self.in_branches.extend(entry(b.source));
            self.in_branches.extend(entry(b.target));
        }
        // 1. callers not in the branch stack, outermost first. Frames above the leaf are return
        // addresses: the call is the byte before.
        self.scratch.clear();
        for frame in s.callchain.iter().skip(1).rev() {
            if let Some(f) = entry(RuntimeAddr(frame.0.wrapping_sub(1)))
                && !self.in_branches.contains(&f)
            {
                self.scratch.push(f);
            }
        }
        self.scratch.extend_from_slice(&self.in_branches);
        // 3. the IP.
        self.scratch.extend(entry(s.ip));
        if self.scratch.is_empty() {
            return;
        }
        let pid = i64::from(s.pid.unwrap_or(0));
        let trace = self.live.entry(pid).or_insert_with(|| ProcessTrace {
            start_time: s.time.unwrap_or(0),
            seen: Default::default(),
            functions: Vec::new(),
        });
        for &f in &self.scratch {
            if trace.functions.len() >= self.max_length {
                break;
            }
            if trace.seen.insert(f) {
                trace.functions.push(f);
            }
        }
    }

    /// The process ended (exit of its main thread) or replaced its image (exec): a later
    /// process with the same pid starts a new trace.
    pub fn end_process(&mut self, pid: i32) {
        if let Some(t) = self.live.remove(&i64::from(pid)) {
            self.done.push(ProcessFunctions {
                pid: i64::from(pid),
                start_time: t.start_time,
                functions: t.functions,
            });
        }
    }

    /// Every trace, finished ones first, then the still-running processes by pid.
    pub fn finish(mut self) -> Vec<ProcessFunctions> {
        let mut live: Vec<(i64, ProcessTrace)> = self.live.drain().collect();
        live.sort_unstable_by_key(|(pid, _)| *pid);
        self.done.extend(live.into_iter().map(|(pid, t)| ProcessFunctions {
            pid,
            start_time: t.start_time,
            functions: t.functions,
        }));
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Branch;
    use crate::addr::FileOffset;
    use crate::binary::Segment;
    use crate::input::{BranchStack, MmapEvent, RawBranch, RawWord};
    use crate::mapping::{AddressMapper, BinaryIdentity};

    /// Processes 1, 2 and 7 map the binary's code (vaddr 0x1000-0x2000) at its own addresses.
    fn mapper() -> AddressMapper {
        let segments = vec![Segment {
            vaddr: Vaddr(0x1000),
            memsz: 0x1000,
            offset: FileOffset(0x1000),
            filesz: 0x1000,
            executable: true,
        }];
        let identity = BinaryIdentity { build_id: None, file_name: "prog".into(), segments };
        let mut m = AddressMapper::new(identity, None);
        for pid in [1, 2, 7] {
            m.on_mmap(&MmapEvent {
                pid: Some(pid),
                tid: Some(pid),
                start: RuntimeAddr(0x1000),
                len: 0x1000,
                pgoff: FileOffset(0x1000),
                executable: true,
                path: "/bin/prog".into(),
                build_id: None,
                record: None,
            });
        }
        m
    }

    fn table() -> FunctionTable {
        FunctionTable::new([
            ("main", 0x1000, 0x100),
            ("a", 0x1100, 0x40),
            ("b", 0x1140, 0x40),
            ("c", 0x1180, 0x40),
            ("c_alias", 0x1180, 0x40),
            ("helper", 0x1200, 0x10),
            ("helper", 0x1300, 0x20), // a second static `helper`
            ("empty", 0x1400, 0),
        ])
    }

    #[test]
    fn function_table_merges_names_and_skips_aliases_and_empty_symbols() {
        let t = table();
        let names: Vec<&str> = (0..t.len() as u32).map(|e| &**t.name(e)).collect();
        assert_eq!(names, ["main", "a", "b", "c", "helper"]);
        assert_eq!(t.sizes(), &[0x100, 0x40, 0x40, 0x40, 0x30]);
        assert_eq!(t.entry_at(Vaddr(0x1310)), Some(4));
        assert_eq!(t.entry_at(Vaddr(0x1210)), None);
        assert_eq!(t.entry_at(Vaddr(0xfff)), None);
        assert_eq!(t.entry_of_name("c_alias"), None);
    }

    fn sample<'a>(
        pid: i32,
        time: u64,
        ip: u64,
        callchain: &'a [RawWord],
        branches: &'a [RawBranch],
    ) -> Sample<'a> {
        Sample {
            pid: Some(pid),
            tid: Some(pid),
            time: Some(time),
            ip: RuntimeAddr(ip),
            ..Sample::with_stacks(callchain, branches)
        }
    }

    fn br(source: u64, target: u64) -> Branch<RuntimeAddr> {
        Branch { source: RuntimeAddr(source), target: RuntimeAddr(target) }
    }

    /// The trace of one sample of process 7 at time 50; `chain` leaf first.
    fn one_sample(ip: u64, chain: &[u64], branches: &[Branch<RuntimeAddr>]) -> ProcessFunctions {
        let t = table();
        let mapper = mapper();
        let mut c = TraceCollector::new(&t, 100);
        let chain: Vec<RawWord> = chain.iter().map(|a| a.to_le_bytes()).collect();
        let branches: Vec<RawBranch> = branches.iter().map(|&b| BranchStack::entry(b, 0)).collect();
        c.sample(mapper.map(), &sample(7, 50, ip, &chain, &branches));
        let mut traces = c.finish();
        assert_eq!(traces.len(), 1);
        traces.remove(0)
    }

    #[test]
    fn one_sample_orders_callers_then_branches_then_the_ip() {
        // In c, called from b, called from main (return addresses 0x1150 and 0x1010); the
        // branch stack (newest first) shows main calling a, a returning, then main calling b
        // (which is in the branch stack, so it takes its place there) and b calling c.
        let branches =
            [br(0x1148, 0x1180), br(0x100c, 0x1140), br(0x1130, 0x1008), br(0x1004, 0x1100)];
        let trace = one_sample(0x1190, &[0x1190, 0x1150, 0x1010], &branches);
        assert_eq!(trace.functions, [0, 1, 2, 3]); // main, a, b, c
        assert_eq!((trace.pid, trace.start_time), (7, 50));
    }

    #[test]
    fn callers_outside_the_branch_window_come_first() {
        // IP in helper, called from c, called from main; the branch stack only shows c calling
        // a and a returning. main and c were entered before the window: main, c, then a.
        let branches = [br(0x1110, 0x118c), br(0x1184, 0x1100)];
        let trace = one_sample(0x1204, &[0x1204, 0x1190, 0x1020], &branches);
        assert_eq!(trace.functions, [0, 3, 1, 4]); // main, c, a, helper
    }

    #[test]
    fn functions_keep_their_first_sample_and_processes_their_own_traces() {
        let t = table();
        let mapper = mapper();
        let map = mapper.map();
        let mut c = TraceCollector::new(&t, 3);
        c.sample(map, &sample(1, 10, 0x1100, &[], &[])); // a
        c.sample(map, &sample(2, 11, 0x1140, &[], &[])); // b in another process
        c.sample(map, &sample(1, 12, 0x1010, &[], &[])); // main
        c.sample(map, &sample(1, 13, 0x1104, &[], &[])); // a again
        c.end_process(1);
        c.sample(map, &sample(1, 14, 0x1180, &[], &[])); // pid 1 reused: a new trace
        c.sample(map, &sample(2, 15, 0x9999, &[], &[])); // outside the binary
        c.sample(map, &sample(2, 16, 0x1180, &[], &[])); // c
        c.sample(map, &sample(2, 17, 0x1100, &[], &[])); // a
        c.sample(map, &sample(2, 18, 0x1000, &[], &[])); // main: over max_length 3
        let traces = c.finish();
        let got: Vec<(i64, u64, Vec<u32>)> =
            traces.into_iter().map(|t| (t.pid, t.start_time, t.functions)).collect();
        assert_eq!(got, vec![(1, 10, vec![1, 0]), (1, 14, vec![3]), (2, 11, vec![2, 3, 1])]);
    }
}
