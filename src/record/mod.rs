//! `profgen-record`: records LBR + frame-pointer call-stack `perf.data` without LBR hardware.
//!
//! In: a command line. The program runs under valgrind's lackey (`--trace-mem=yes`), whose
//! per-instruction `I  addr,size` lines, plus `--trace-syscalls`/`--trace-sched` lines for
//! clone/exit and thread switches, stream through a FIFO (never a regular file) into
//! [`emulate`]. Forked children write their own `%p` log (in /dev/shm when present) which is
//! replayed after the parent. Mappings come from `/proc/PID/maps` of the (still running)
//! valgrind process whenever an address is not covered yet.
//!
//! Out: a file-mode perf.data as `perf record -e EVENT -b --call-graph fp` would write it
//! ([`perf_data`]), and a ground-truth sidecar ([`truth`]) with exact instruction and
//! taken-branch counts per binary. The sampling [`Event`] counts instructions (the emulated
//! machine retires one instruction per cycle, so `cycles` and `cpu-clock` count the same) or taken
//! branches, and the attr names it as perf would, so that readers can tell which it was.

pub mod binaries;
pub mod emulate;
pub mod perf_data;
pub mod truth;

use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use crate::input::perf_data::abi::{
    HW_CPU_CYCLES, HW_INSTRUCTIONS, RAW_BR_INST_RETIRED_NEAR_TAKEN, SW_CPU_CLOCK, TYPE_HARDWARE,
    TYPE_RAW, TYPE_SOFTWARE,
};

/// The sampling event: what the period counts, and how the perf.data attr names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// `cycles:u` (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES): one cycle per instruction.
    Cycles,
    /// `instructions:u` (PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS).
    Instructions,
    /// `br_inst_retired.near_taken:u`: Intel's raw event 0xc4, umask 0x20 (PERF_TYPE_RAW
    /// config 0x20c4), which AutoFDO recommends: every taken branch counts.
    Branches,
    /// `cpu-clock:u` (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK): time, one instruction per
    /// nanosecond.
    CpuClock,
}

impl Event {
    pub const ALL: [(&'static str, Event); 4] = [
        ("cycles", Event::Cycles),
        ("instructions", Event::Instructions),
        ("branches", Event::Branches),
        ("cpu-clock", Event::CpuClock),
    ];

    /// The event as `perf record -e` spells it.
    pub fn perf_name(self) -> &'static str {
        match self {
            Event::Cycles => "cycles:u",
            Event::Instructions => "instructions:u",
            Event::Branches => "br_inst_retired.near_taken:u",
            Event::CpuClock => "cpu-clock:u",
        }
    }

    /// `perf_event_attr` (type, config).
    pub fn type_config(self) -> (u32, u64) {
        match self {
            Event::Cycles => (TYPE_HARDWARE, HW_CPU_CYCLES),
            Event::Instructions => (TYPE_HARDWARE, HW_INSTRUCTIONS),
            Event::Branches => (TYPE_RAW, RAW_BR_INST_RETIRED_NEAR_TAKEN),
            Event::CpuClock => (TYPE_SOFTWARE, SW_CPU_CLOCK),
        }
    }
}

pub struct Options {
    pub command: Vec<String>,
    pub output: PathBuf,
    pub truth: Option<PathBuf>,
    /// Mean number of events between samples.
    pub period: u64,
    pub event: Event,
    /// Fill each branch entry's cycle count (Skylake and later LBRs do).
    pub lbr_cycles: bool,
    /// Leave branch stacks out (IP sampling, `perf record` without `-b`).
    pub no_branch_stack: bool,
    pub seed: u64,
    pub valgrind: String,
    /// Keep ground truth for system libraries too.
    pub truth_all: bool,
    /// Write pids from this value on (forked children +100 each, threads pid + n) instead of
    /// the real ones, so that re-recording gives identical files.
    pub pid_base: Option<u32>,
    /// Leave call stacks out (`perf record -b` without `-g`).
    pub no_call_stack: bool,
    /// Start the first period at a random point (see `--random-start`).
    pub random_start: bool,
}

pub struct Summary {
    pub instructions: u64,
    pub samples: u64,
    pub processes: usize,
    pub threads: usize,
    pub elapsed: Duration,
}

fn scratch_dir() -> anyhow::Result<PathBuf> {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = base.join(format!("profgen-record-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

/// Runs the recording end to end and writes `opts.output` (and `opts.truth`).
pub fn record(opts: &Options) -> anyhow::Result<Summary> {
    let started = Instant::now();
    if opts.command.is_empty() {
        bail!("no command to record");
    }
    if opts.period == 0 {
        bail!("--period must be positive");
    }
    let dir = scratch_dir()?;
    let result = record_in(opts, &dir, started);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn record_in(opts: &Options, dir: &Path, started: Instant) -> anyhow::Result<Summary> {
    // The shell creates the FIFO named after its own pid and execs valgrind, which keeps the pid,
    // so valgrind's `--log-file=DIR/t.%p` opens the FIFO; forked children get regular files.
    let log = format!("--log-file={}/t.%p", dir.display());
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"mkfifo "$0/t.$$" && exec "$@""#)
        .arg(dir)
        .arg(&opts.valgrind)
        .args(["--tool=lackey", "--trace-mem=yes", "--trace-syscalls=yes", "--trace-sched=yes"])
        .arg(log)
        .args(&opts.command)
        .spawn()
        .with_context(|| format!("starting {}", opts.valgrind))?;
    let pid = child.id();
    let fifo = dir.join(format!("t.{pid}"));
    // Opening a FIFO blocks until valgrind opens it: do it aside so a failing start is noticed.
    let (tx, rx) = mpsc::channel();
    let fifo_path = fifo.clone();
    std::thread::spawn(move || {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !fifo_path.exists() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(2));
        }
        let _ = tx.send(File::open(&fifo_path));
    });
    let file = loop {
        match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(f) => break f.with_context(|| format!("opening {}", fifo.display()))?,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                if let Some(status) = child.try_wait()? {
                    bail!("valgrind exited ({status}) before writing its trace");
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => bail!("FIFO opener thread died"),
        }
    };

    let comm = Path::new(&opts.command[0])
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut rec = emulate::Recorder::new(
        opts.period,
        opts.seed,
        opts.truth_all,
        opts.pid_base,
        opts.event,
        opts.lbr_cycles,
        opts.random_start,
    )?;
    let shown = emulate::Process::root_pid(pid, opts.pid_base);
    let mut root = emulate::Process::new_root(pid, shown, &comm);
    rec.start_process(&mut root);
    rec.run_stream(&mut root, BufReader::with_capacity(1 << 20, file))?;
    rec.end_process(&mut root);
    let status = child.wait()?;
    if !status.success() {
        eprintln!("profgen-record: warning: traced command exited with {status}");
    }
    let mut processes = 1;
    let mut threads = root.thread_count();
    while let Some(mut p) = rec.pending_children.pop_front() {
        let path = dir.join(format!("t.{}", p.real_pid));
        let Ok(file) = File::open(&path) else {
            eprintln!("profgen-record: warning: no trace for forked child {}", p.pid);
            continue;
        };
        rec.run_stream(&mut p, BufReader::with_capacity(1 << 20, file))?;
        rec.end_process(&mut p);
        processes += 1;
        threads += p.thread_count();
    }

    let host = perf_data::HostInfo {
        hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        osrelease: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_default(),
        nrcpus: std::thread::available_parallelism().map(|n| n.get() as u32).unwrap_or(1),
        cmdline: ["perf", "record", "-e", opts.event.perf_name()]
            .into_iter()
            .chain((!opts.no_branch_stack).then_some("-b"))
            .chain(
                if opts.no_call_stack { &[][..] } else { &["--call-graph", "fp"][..] }
                    .iter()
                    .copied(),
            )
            .chain(["--"])
            .map(str::to_string)
            .chain(opts.command.iter().cloned())
            .collect(),
    };
    let (records, build_ids, summary) = rec.finish();
    let out = File::create(&opts.output)
        .with_context(|| format!("creating {}", opts.output.display()))?;
    let mut out = BufWriter::new(out);
    let layout = perf_data::Layout {
        event: opts.event,
        sample_period: opts.period,
        call_stacks: !opts.no_call_stack,
        branch_stacks: !opts.no_branch_stack,
    };
    perf_data::write(&mut out, &layout, records, &build_ids, &host)?;
    out.flush()?;
    if let Some(t) = &opts.truth {
        let f = File::create(t).with_context(|| format!("creating {}", t.display()))?;
        let mut w = BufWriter::new(f);
        truth::write(&mut w, &summary)?;
        w.flush()?;
    }
    Ok(Summary {
        instructions: summary.instructions,
        samples: summary.samples,
        processes,
        threads,
        elapsed: started.elapsed(),
    })
}
