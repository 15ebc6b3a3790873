//! Replays a lackey trace: per thread a 32-entry software LBR and a shadow call stack, a
//! jittered instruction countdown that emits samples, and exact ground-truth counters.
//!
//! In: trace lines of one process. Out: perf records ([`perf_data::Record`]) and counts.
//! Time is the process's instruction count (a forked child continues from the fork's time).

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::BufRead;

use super::Event;
use super::binaries::{Binaries, Kind, Mapping};
use super::perf_data::{self, BuildIdEntry, Record};

const LBR_SIZE: usize = 32;
const MAX_STACK: usize = 127;
const NO_BIN: u32 = u32::MAX;
/// Valgrind's `--max-threads` default is 500; larger ids in a trace line are garbage.
const MAX_VG_THREADS: usize = 10_000;

#[derive(Clone, Copy)]
struct Inst {
    kind: Kind,
    /// Binary index and ELF vaddr, or `NO_BIN` when no file mapping covers the address.
    bin: u32,
    vaddr: u64,
}

#[derive(Clone)]
struct Frame {
    /// Return address into the caller (0 for the thread's root frame).
    ret: u64,
    /// The frame has done `mov rbp, rsp`: an FP unwinder sees its return address.
    fp: bool,
}

#[derive(Clone)]
struct Thread {
    tid: u32,
    stack: Vec<Frame>,
    /// (from, to, cycles since the previous taken branch), newest last.
    lbr: VecDeque<(u64, u64, u16)>,
    /// Instructions retired since the last taken branch (cycles at one instruction per cycle).
    since_branch: u64,
    prev: Option<(u64, u64, Inst)>,
    countdown: u64,
    period: u64,
    exited: bool,
}

impl Thread {
    fn new(tid: u32) -> Thread {
        Thread {
            tid,
            stack: vec![Frame { ret: 0, fp: false }],
            lbr: VecDeque::with_capacity(LBR_SIZE),
            since_branch: 0,
            prev: None,
            countdown: 0,
            period: 0,
            exited: false,
        }
    }

    /// A return to `target`: unwind to the frame returning there (longjmp-like skips included).
    fn pop_to(&mut self, target: u64) {
        let n = self.stack.len();
        if let Some(i) = (1..n).rev().take(16).find(|&i| self.stack[i].ret == target) {
            self.stack.truncate(i);
        } else if n > 1 {
            self.stack.pop();
        }
    }
}

pub struct Process {
    /// The pid written to perf.data (the real one unless pids are renumbered).
    pub pid: u32,
    /// The pid of the traced process (its `/proc` entry and trace file name).
    pub real_pid: u32,
    ppid: u32,
    ptid: u32,
    comm: String,
    /// Sorted by start.
    maps: Vec<Mapping>,
    emitted: HashSet<u64>,
    cache: HashMap<u64, Inst>,
    checked_pages: HashSet<u64>,
    /// Indexed by valgrind thread id (1-based).
    threads: Vec<Option<Thread>>,
    cur: usize,
    pending_tids: VecDeque<u32>,
    time: u64,
    /// `/proc/PID/maps` can be read (the process is running while its trace streams in).
    live: bool,
    /// Forked child: its first thread starts as a copy of the forking thread.
    fork_thread: Option<Thread>,
}

impl Process {
    pub fn new_root(real_pid: u32, pid: u32, comm: &str) -> Process {
        Process {
            pid,
            real_pid,
            ppid: pid,
            ptid: pid,
            comm: comm.chars().take(15).collect(),
            maps: Vec::new(),
            emitted: HashSet::new(),
            cache: HashMap::new(),
            checked_pages: HashSet::new(),
            threads: Vec::new(),
            cur: 1,
            pending_tids: VecDeque::new(),
            time: 0,
            live: true,
            fork_thread: None,
        }
    }

    /// The pid to show for the root process.
    pub fn root_pid(real_pid: u32, pid_base: Option<u32>) -> u32 {
        pid_base.unwrap_or(real_pid)
    }

    pub fn thread_count(&self) -> usize {
        self.threads.iter().flatten().count()
    }
}

/// Exact counts for the ground-truth sidecar.
pub struct TruthData {
    pub binaries: Vec<(String, Option<Vec<u8>>, bool)>,
    pub insts: Vec<((u32, u64), u64)>,
    /// ((from bin, from), (to bin, to)); `NO_BIN` ends carry runtime addresses.
    pub branches: Vec<((u32, u64, u32, u64), u64)>,
    pub instructions: u64,
    pub samples: u64,
}

pub struct Recorder {
    bins: Binaries,
    records: Vec<Record>,
    insts: HashMap<(u32, u64), u64>,
    branches: HashMap<(u32, u64, u32, u64), u64>,
    used_bins: HashSet<usize>,
    period: u64,
    event: Event,
    /// Fill each branch entry's cycle count, as Skylake and later LBRs do.
    lbr_cycles: bool,
    rng: u64,
    /// Start each thread's first period at a random point of a whole period.
    random_start: bool,
    instructions: u64,
    samples: u64,
    /// Renumber processes from this pid (threads: pid + n) for reproducible files.
    pid_base: Option<u32>,
    pub pending_children: VecDeque<Process>,
}

impl Recorder {
    pub fn new(
        period: u64,
        seed: u64,
        truth_all: bool,
        pid_base: Option<u32>,
        event: Event,
        lbr_cycles: bool,
        random_start: bool,
    ) -> anyhow::Result<Recorder> {
        Ok(Recorder {
            bins: Binaries::new(truth_all)?,
            records: Vec::new(),
            insts: HashMap::new(),
            branches: HashMap::new(),
            used_bins: HashSet::new(),
            period,
            event,
            lbr_cycles,
            rng: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
            random_start,
            instructions: 0,
            samples: 0,
            pid_base,
            pending_children: VecDeque::new(),
        })
    }

    /// Next period: mean `period`, uniformly ±1/8 so samples do not alias loop trip counts.
    fn next_period(&mut self) -> u64 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let eighth = self.period / 8;
        (self.period - eighth + self.rng % (2 * eighth + 1)).max(1)
    }

    /// A thread's first countdown with `random_start`: uniform in 1..=period. On hardware the
    /// first overflow of a run falls anywhere in a period (cycle counts differ from run to run),
    /// so runs sample different instructions from their start; with jittered periods alone,
    /// runs recorded with different seeds sample nearly the same ones for the first periods.
    fn first_countdown(&mut self) -> u64 {
        self.next_period();
        1 + self.rng % self.period
    }

    pub fn start_process(&mut self, p: &mut Process) {
        if p.fork_thread.is_none() {
            self.records.push(perf_data::comm(p.pid, p.pid, &p.comm, true, 0));
        } else {
            self.records.push(perf_data::task(false, p.pid, p.ppid, p.pid, p.ptid, p.time));
        }
    }

    pub fn end_process(&mut self, p: &mut Process) {
        for t in p.threads.iter_mut().flatten() {
            if !t.exited {
                t.exited = true;
                self.records.push(perf_data::task(true, p.pid, p.pid, t.tid, t.tid, p.time));
            }
        }
    }

    fn refresh_maps(&mut self, p: &mut Process) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{}/maps", p.real_pid)) else {
            p.live = false;
            return;
        };
        let mut maps = self.bins.parse_maps(&text);
        maps.sort_by_key(|m| m.start);
        p.maps = maps;
        p.cache.clear();
    }

    /// MMAP2 for a mapping when its first instruction runs: how far valgrind ran ahead of the
    /// `/proc` snapshot then cannot change the output.
    fn emit_map(&mut self, p: &mut Process, m: &Mapping) {
        if !p.emitted.insert(m.start) {
            return;
        }
        self.used_bins.insert(m.bin);
        let path = &self.bins.files[m.bin].path;
        self.records.push(perf_data::mmap2(
            &perf_data::Mmap2 {
                pid: p.pid,
                tid: p.pid,
                start: m.start,
                len: m.end - m.start,
                pgoff: m.pgoff,
                maj: m.maj,
                min: m.min,
                ino: m.ino,
                path,
            },
            p.time,
        ));
    }

    fn find_map(p: &Process, addr: u64) -> Option<&Mapping> {
        let i = p.maps.partition_point(|m| m.start <= addr);
        p.maps[..i].last().filter(|m| addr < m.end)
    }

    fn lookup(&mut self, p: &mut Process, addr: u64) -> Inst {
        if let Some(i) = p.cache.get(&addr) {
            return *i;
        }
        if Self::find_map(p, addr).is_none() && p.live && p.checked_pages.insert(addr >> 12) {
            self.refresh_maps(p);
        }
        let inst = match Self::find_map(p, addr).cloned() {
            Some(m) => {
                self.emit_map(p, &m);
                let off = addr - m.start + m.pgoff;
                let f = &self.bins.files[m.bin];
                match f.vaddr(off) {
                    Some(vaddr) => {
                        Inst { kind: self.bins.decode(m.bin, off), bin: m.bin as u32, vaddr }
                    }
                    None => Inst { kind: Kind::Other, bin: NO_BIN, vaddr: addr },
                }
            }
            None => Inst { kind: Kind::Other, bin: NO_BIN, vaddr: addr },
        };
        p.cache.insert(addr, inst);
        inst
    }

    fn tracked(&self, bin: u32) -> bool {
        bin != NO_BIN && self.bins.files[bin as usize].tracked
    }

    fn thread<'p>(&mut self, p: &'p mut Process) -> &'p mut Thread {
        let n = p.cur.max(1);
        if p.threads.len() <= n {
            p.threads.resize(n + 1, None);
        }
        if p.threads[n].is_none() {
            let t = if n == 1 {
                match p.fork_thread.take() {
                    Some(mut t) => {
                        // The child's counter is a fresh inherited event: new period.
                        t.tid = p.pid;
                        t.prev = None;
                        t.period = 0;
                        t
                    }
                    None => Thread::new(p.pid),
                }
            } else {
                let real = p.pending_tids.pop_front();
                let tid = match (self.pid_base, real) {
                    (None, Some(tid)) => tid,
                    _ => p.pid.wrapping_add(n as u32 - 1),
                };
                self.records.push(perf_data::task(false, p.pid, p.pid, tid, p.pid, p.time));
                self.records.push(perf_data::comm(p.pid, tid, &p.comm, false, p.time));
                Thread::new(tid)
            };
            p.threads[n] = Some(t);
        }
        if p.threads[n].as_ref().is_some_and(|t| t.period == 0) {
            let period = self.next_period();
            let countdown = if self.random_start { self.first_countdown() } else { period };
            let t = p.threads[n].as_mut().expect("created above");
            t.period = period;
            t.countdown = countdown;
        }
        p.threads[n].as_mut().expect("created above")
    }

    fn instruction(&mut self, p: &mut Process, addr: u64, size: u64) {
        let inst = self.lookup(p, addr);
        let t = self.thread(p);
        let mut taken = false;
        if let Some((paddr, psize, pinst)) = t.prev {
            // lackey prints each iteration of a `rep` instruction: not a branch, not a new one.
            if addr == paddr && pinst.kind == Kind::Other {
                return;
            }
            let fall = paddr.wrapping_add(psize);
            taken = addr != fall || matches!(pinst.kind, Kind::Call | Kind::Ret | Kind::Jump);
            match pinst.kind {
                Kind::Call => t.stack.push(Frame { ret: fall, fp: false }),
                Kind::Ret => t.pop_to(addr),
                Kind::FpSet => t.stack.last_mut().expect("root frame").fp = true,
                Kind::FpClear => t.stack.last_mut().expect("root frame").fp = false,
                // Undecodable code (e.g. valgrind's redirections) returning to the caller.
                Kind::Other | Kind::Jump => {
                    if taken && t.stack.len() > 1 && t.stack.last().is_some_and(|f| f.ret == addr) {
                        t.stack.pop();
                    }
                }
            }
            // The previous instruction has retired.
            t.since_branch += 1;
            if taken {
                if t.lbr.len() == LBR_SIZE {
                    t.lbr.pop_front();
                }
                // Cycles from the previous branch to this one, at one instruction per cycle.
                let cycles = if self.lbr_cycles { t.since_branch.min(0xffff) as u16 } else { 0 };
                t.lbr.push_back((paddr, addr, cycles));
                t.since_branch = 0;
                if self.tracked(pinst.bin) || self.tracked(inst.bin) {
                    let key = (pinst.bin, pinst.vaddr, inst.bin, inst.vaddr);
                    let c = self.branches.entry(key).or_insert(0);
                    *c = c.saturating_add(1);
                }
            }
        }
        t.prev = Some((addr, size, inst));
        if self.tracked(inst.bin) {
            let c = self.insts.entry((inst.bin, inst.vaddr)).or_insert(0);
            *c = c.saturating_add(1);
        }
        p.time += 1;
        self.instructions += 1;
        // A taken-branch event overflows on the branch: the sample shows it as the newest LBR
        // entry and its target as the IP.
        if self.event == Event::Branches && !taken {
            return;
        }
        let t = p.threads[p.cur.max(1)].as_mut().expect("current thread");
        t.countdown -= 1;
        if t.countdown == 0 {
            self.samples += 1;
            // An FP unwinder finds a frame's return address only once that frame set rbp.
            let mut chain = Vec::with_capacity(16);
            chain.push(addr);
            chain.extend(
                t.stack[1..].iter().rev().filter(|f| f.fp).map(|f| f.ret).take(MAX_STACK - 1),
            );
            let branches: Vec<(u64, u64, u16)> = t.lbr.iter().rev().copied().collect();
            let (tid, period) = (t.tid, t.period);
            self.records.push(perf_data::sample(&perf_data::Sample {
                ip: addr,
                pid: p.pid,
                tid,
                time: p.time,
                period,
                callchain: &chain,
                branches: &branches,
            }));
            let next = self.next_period();
            let t = p.threads[p.cur.max(1)].as_mut().expect("current thread");
            t.period = next;
            t.countdown = next;
        }
    }

    /// Processes one trace stream to its end.
    pub fn run_stream(&mut self, p: &mut Process, mut r: impl BufRead) -> anyhow::Result<()> {
        if p.live {
            self.refresh_maps(p);
        }
        let mut line = Vec::with_capacity(256);
        loop {
            line.clear();
            if r.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            match line.first() {
                Some(b'I') => {
                    if let Some((addr, size)) = parse_inst(&line) {
                        self.instruction(p, addr, size);
                    }
                }
                Some(b' ') => {} // memory accesses
                _ => self.control_line(p, &line),
            }
        }
        Ok(())
    }

    fn control_line(&mut self, p: &mut Process, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        if let Some(i) = text.find("SYSCALL[") {
            self.syscall(p, &text[i..]);
        }
        if let Some(i) = text.find("SCHED[") {
            let rest = &text[i + 6..];
            if rest.contains("acquired lock")
                && let Some(n) = rest.split(']').next().and_then(|n| n.parse::<usize>().ok())
                && n <= MAX_VG_THREADS
            {
                p.cur = n;
            }
        }
    }

    fn syscall(&mut self, p: &mut Process, s: &str) {
        // SYSCALL[pid,vgtid](nr) name ( args ) --> result
        let Some((head, rest)) = s.split_once(')') else {
            return;
        };
        let Some((ids, nr)) = head.split_once("](") else {
            return;
        };
        let Ok(nr) = nr.parse::<u32>() else { return };
        let Some(vgtid) = ids.split(',').nth(1).and_then(|t| t.parse::<usize>().ok()) else {
            return;
        };
        match nr {
            56 | 435 => {
                if let Some(i) = rest.find("created child ") {
                    let child: String =
                        rest[i + 14..].chars().take_while(|c| c.is_ascii_digit()).collect();
                    if let Ok(child) = child.parse::<u32>() {
                        self.fork(p, vgtid, child);
                    }
                    return;
                }
                // CLONE_THREAD in sys_clone's first argument; clone3 without a fork message.
                let flags = rest
                    .trim_start()
                    .strip_prefix("sys_clone ( ")
                    .and_then(|a| a.split(',').next())
                    .and_then(|f| u64::from_str_radix(f.trim(), 16).ok());
                let is_thread = flags.is_none_or(|f| f & 0x10000 != 0);
                if is_thread && let Some(i) = rest.find("Success(0x") {
                    let hex: String =
                        rest[i + 10..].chars().take_while(|c| c.is_ascii_hexdigit()).collect();
                    if let Ok(tid) = u32::from_str_radix(&hex, 16)
                        && tid != 0
                    {
                        p.pending_tids.push_back(tid);
                    }
                }
            }
            60 => {
                if let Some(Some(t)) = p.threads.get_mut(vgtid)
                    && !t.exited
                {
                    t.exited = true;
                    self.records.push(perf_data::task(true, p.pid, p.pid, t.tid, t.tid, p.time));
                }
            }
            231 => self.end_process(p),
            _ => {}
        }
    }

    fn fork(&mut self, p: &mut Process, vgtid: usize, child: u32) {
        let forking = p.threads.get(vgtid).and_then(|t| t.clone());
        let ptid = forking.as_ref().map_or(p.pid, |t| t.tid);
        let shown = match self.pid_base.as_mut() {
            Some(next) => {
                *next += 100;
                *next
            }
            None => child,
        };
        let mut c = Process::new_root(child, shown, &p.comm);
        c.ppid = p.pid;
        c.ptid = ptid;
        c.maps = p.maps.clone();
        // perf copies the parent's maps into the child on FORK: no MMAP2 needed for them.
        c.emitted = p.emitted.clone();
        c.cache = p.cache.clone();
        c.time = p.time;
        c.live = false;
        c.fork_thread = Some(forking.unwrap_or_else(|| Thread::new(shown)));
        self.start_process(&mut c);
        self.pending_children.push_back(c);
    }

    /// Records, build ids of mapped binaries, and the truth counts (sorted).
    pub fn finish(self) -> (Vec<Record>, Vec<BuildIdEntry>, TruthData) {
        let mut used: Vec<usize> = self.used_bins.iter().copied().collect();
        used.sort_unstable();
        let build_ids = used
            .iter()
            .filter_map(|&b| {
                let f = &self.bins.files[b];
                f.build_id
                    .as_ref()
                    .map(|id| BuildIdEntry { build_id: id.clone(), path: f.path.clone() })
            })
            .collect();
        let mut insts: Vec<_> = self.insts.into_iter().collect();
        insts.sort_unstable();
        let mut branches: Vec<_> = self.branches.into_iter().collect();
        branches.sort_unstable();
        let binaries = self
            .bins
            .files
            .iter()
            .map(|f| (f.path.clone(), f.build_id.clone(), f.tracked))
            .collect();
        let truth = TruthData {
            binaries,
            insts,
            branches,
            instructions: self.instructions,
            samples: self.samples,
        };
        (self.records, build_ids, truth)
    }
}

/// `I  0401ab70,3` → (0x401ab70, 3).
/// Address and size of a lackey `I  ADDR,SIZE` line.
pub fn parse_inst(line: &[u8]) -> Option<(u64, u64)> {
    let rest = line.get(3..)?;
    let mut addr = 0u64;
    let mut i = 0;
    while i < rest.len() && rest[i] != b',' {
        let d = (rest[i] as char).to_digit(16)?;
        addr = addr.checked_mul(16)? + d as u64;
        i += 1;
    }
    let mut size = 0u64;
    for &c in rest.get(i + 1..)? {
        if !c.is_ascii_digit() {
            break;
        }
        size = size * 10 + (c - b'0') as u64;
    }
    (size > 0).then_some((addr, size))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offline(pid: u32) -> Process {
        let mut p = Process::new_root(pid, pid, "t");
        p.live = false;
        p
    }

    #[test]
    fn follows_threads_and_forks_from_control_lines() {
        let mut r = Recorder::new(1000, 1, false, None, Event::Cycles, false, false).unwrap();
        let mut p = offline(100);
        let trace = "\
SYSCALL[100,1](56) sys_clone ( 3d0f00, 0x5229f70, 0x522a990 ) --> [pre-success] Success(0x2957) --100--   SCHED[1]: releasing lock (VG_(vg_yield)) -> VgTs_Yielding
--100--   SCHED[2]:  acquired lock (thread_wrapper(starting new thread))
I  1000,2
SYSCALL[100,2](60) exit( 0 ) --> [pre-success] Success(0x0)
--100--   SCHED[1]:  acquired lock (VG_(vg_yield))
SYSCALL[100,1](56) sys_clone ( 1200011, 0x0, 0x0, 0x4a27a10, 0x0 )   clone(fork): process 100 created child 200
SYSCALL[100,1](231) exit_group( 0 ) --> [pre-success] Success(0x0)
";
        r.run_stream(&mut p, trace.as_bytes()).unwrap();
        assert_eq!(p.cur, 1);
        let tids: Vec<(u32, bool)> =
            p.threads.iter().flatten().map(|t| (t.tid, t.exited)).collect();
        assert_eq!(tids, [(0x2957, true)]);
        assert_eq!(r.pending_children.len(), 1);
        assert_eq!((r.pending_children[0].pid, r.pending_children[0].ppid), (200, 100));
        // COMM of the new thread, FORK (thread), EXIT (thread), FORK (child process).
        let kinds: Vec<u32> = r
            .records
            .iter()
            .map(|rec| u32::from_le_bytes(rec.bytes[0..4].try_into().unwrap()))
            .collect();
        assert_eq!(kinds, [7, 3, 4, 7]);
    }

    #[test]
    fn lbr_holds_taken_branches_newest_first() {
        let mut r = Recorder::new(4, 1, false, None, Event::Cycles, false, false).unwrap();
        let mut p = offline(100);
        // 1000 (2 bytes) falls through to 1002; 1002 jumps to 2000; 2000 jumps back to 1000.
        let trace = "I  1000,2\nI  1002,3\nI  2000,1\nI  1000,2\nI  1002,3\nI  2000,1\n";
        r.run_stream(&mut p, trace.as_bytes()).unwrap();
        assert_eq!(r.instructions, 6);
        // Period 4 with jitter ±0: one sample, at the 4th instruction (1000).
        assert_eq!(r.samples, 1);
        let b = &r.records[0].bytes;
        let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
        assert_eq!(u64_at(8), 0x1000, "ip");
        assert_eq!(u64_at(40), 2, "callchain: PERF_CONTEXT_USER, ip");
        assert_eq!((u64_at(48), u64_at(56)), (crate::input::perf_data::abi::CONTEXT_USER, 0x1000));
        assert_eq!(u64_at(64), 2, "two taken branches");
        assert_eq!((u64_at(72), u64_at(80)), (0x2000, 0x1000));
        assert_eq!((u64_at(96), u64_at(104)), (0x1002, 0x2000));
    }

    /// The instruction (1-based) of the first sample over 200 straight-line instructions, period
    /// 64, for each seed.
    fn first_samples(random_start: bool) -> Vec<u64> {
        let trace: String = (0..200).map(|i| format!("I  {:x},4\n", 0x1000 + 4 * i)).collect();
        (1..=20)
            .map(|seed| {
                let mut r =
                    Recorder::new(64, seed, false, None, Event::Cycles, false, random_start)
                        .unwrap();
                r.run_stream(&mut offline(100), trace.as_bytes()).unwrap();
                let ip = u64::from_le_bytes(r.records[0].bytes[8..16].try_into().unwrap());
                (ip - 0x1000) / 4 + 1
            })
            .collect()
    }

    #[test]
    fn random_start_spreads_the_first_sample_over_a_whole_period() {
        // Jittered periods alone: the first sample is within 64 ± 8 for every seed.
        assert!(first_samples(false).iter().all(|i| (56..=72).contains(i)));
        let random = first_samples(true);
        assert!(random.iter().all(|i| (1..=64).contains(i)), "{random:?}");
        assert!(random.iter().filter(|&&i| i < 32).count() >= 5, "{random:?}");
        assert_eq!(random, first_samples(true), "seeded");
    }

    #[test]
    fn parses_instruction_lines() {
        assert_eq!(parse_inst(b"I  0401ab70,3\n"), Some((0x401ab70, 3)));
        assert_eq!(parse_inst(b"I  1fff000778,15"), Some((0x1fff000778, 15)));
        assert_eq!(parse_inst(b"I  zz,3"), None);
        assert_eq!(parse_inst(b"I  0401ab70,\n"), None);
    }
}
