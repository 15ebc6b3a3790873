//! Measurements: the timer's own cost, timed runs of a command (monotonic wall clock and the
//! child's rusage), CPU pinning, and instruction / misprediction counts under cachegrind.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use super::stats::median;

/// One timed run: wall seconds (monotonic clock around spawn and wait) and CPU seconds (user +
/// system of the child, from `getrusage(RUSAGE_CHILDREN)` before and after the wait).
#[derive(Clone, Copy, Debug)]
pub struct Timed {
    pub wall: f64,
    pub cpu: f64,
}

fn children_cpu() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs `argv` once with stdout and stderr discarded; fails when it exits unsuccessfully.
pub fn run_timed(argv: &[String]) -> Result<Timed> {
    let cpu0 = children_cpu();
    let start = Instant::now();
    let status = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .with_context(|| format!("cannot run {}", argv[0]))?;
    let wall = start.elapsed().as_secs_f64();
    let cpu = children_cpu() - cpu0;
    if !status.success() {
        bail!("`{}` failed ({status})", argv.join(" "));
    }
    Ok(Timed { wall, cpu })
}

/// Runs `argv` once and returns its standard output (for checking that both builds compute the
/// same thing).
pub fn run_output(argv: &[String]) -> Result<Vec<u8>> {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {}", argv[0]))?;
    if !out.status.success() {
        bail!("`{}` failed ({})", argv.join(" "), out.status);
    }
    Ok(out.stdout)
}

/// What the timer and process start-up cost, measured before the trials.
#[derive(Clone, Debug)]
pub struct Calibration {
    /// Mean cost of one `Instant::now()` pair (an empty timed region), ns.
    pub timer_overhead_ns: f64,
    /// Smallest non-zero difference seen between consecutive clock readings, ns.
    pub timer_resolution_ns: f64,
    /// `clock_getres(CLOCK_MONOTONIC)`, ns.
    pub clock_getres_ns: f64,
    /// Median and standard deviation of the wall and CPU time of an empty command (`true`).
    pub empty_wall: f64,
    pub empty_wall_sd: f64,
    pub empty_cpu: f64,
    pub empty_cpu_sd: f64,
    pub empty_runs: usize,
}

pub fn calibrate(empty_runs: usize) -> Result<Calibration> {
    const REGIONS: usize = 200_000;
    let mut total = 0.0;
    let mut resolution = f64::INFINITY;
    for _ in 0..REGIONS {
        let a = Instant::now();
        let b = Instant::now();
        let d = (b - a).as_nanos() as f64;
        total += d;
        if d > 0.0 {
            resolution = resolution.min(d);
        }
    }
    // SAFETY: clock_getres only writes the struct it is given.
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    let empty = ["true".to_string()];
    run_timed(&empty).context("timing the empty command `true`")?;
    let runs: Vec<Timed> = (0..empty_runs).map(|_| run_timed(&empty)).collect::<Result<_>>()?;
    let walls: Vec<f64> = runs.iter().map(|r| r.wall).collect();
    let cpus: Vec<f64> = runs.iter().map(|r| r.cpu).collect();
    let sd = |xs: &[f64]| super::stats::Summary::of(xs, 0.95).sd;
    Ok(Calibration {
        timer_overhead_ns: total / REGIONS as f64,
        timer_resolution_ns: if resolution.is_finite() { resolution } else { 0.0 },
        clock_getres_ns: ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64,
        empty_wall: median(&walls),
        empty_wall_sd: sd(&walls),
        empty_cpu: median(&cpus),
        empty_cpu_sd: sd(&cpus),
        empty_runs,
    })
}

/// Pins the calling thread (and so the children it starts) to one CPU; returns the previous
/// affinity to restore with [`restore_affinity`].
pub fn pin_to_cpu(cpu: usize) -> Result<libc::cpu_set_t> {
    // SAFETY: the cpu_set_t values are plain bitmaps owned here; the calls only read/write them.
    unsafe {
        let mut old: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut old) != 0 {
            bail!("sched_getaffinity: {}", std::io::Error::last_os_error());
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &set) != 0 {
            bail!("sched_setaffinity to CPU {cpu}: {}", std::io::Error::last_os_error());
        }
        Ok(old)
    }
}

pub fn restore_affinity(old: &libc::cpu_set_t) {
    // SAFETY: `old` is the mask sched_getaffinity returned.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), old) };
}

/// Counts of one run under `valgrind --tool=cachegrind --cache-sim=no --branch-sim=yes`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Simulated {
    pub instructions: u64,
    pub branches: u64,
    pub mispredictions: u64,
}

pub fn simulate(valgrind: &str, argv: &[String], out_file: &Path) -> Result<Simulated> {
    let out = Command::new(valgrind)
        .args(["--tool=cachegrind", "--cache-sim=no", "--branch-sim=yes"])
        .arg(format!("--cachegrind-out-file={}", out_file.display()))
        .arg("--")
        .args(argv)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .with_context(|| format!("cannot run {valgrind}"))?;
    if !out.status.success() {
        bail!(
            "cachegrind on `{}` failed ({}):\n{}",
            argv.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let text = std::fs::read_to_string(out_file)
        .with_context(|| format!("reading {}", out_file.display()))?;
    parse_cachegrind(&text)
        .with_context(|| format!("{}: unexpected cachegrind output", out_file.display()))
}

/// Reads the `events:` and `summary:` lines of a cachegrind output file.
pub fn parse_cachegrind(text: &str) -> Result<Simulated> {
    let field =
        |key: &str| text.lines().find_map(|l| l.strip_prefix(key)).map(|v| v.split_whitespace());
    let (Some(events), Some(summary)) = (field("events:"), field("summary:")) else {
        bail!("no `events:` / `summary:` line");
    };
    let counts: Vec<(&str, u64)> = events.zip(summary.map(|v| v.parse().unwrap_or(0))).collect();
    let get = |name: &str| counts.iter().find(|(e, _)| *e == name).map(|&(_, c)| c);
    let (Some(ir), Some(bc), Some(bcm), Some(bi), Some(bim)) =
        (get("Ir"), get("Bc"), get("Bcm"), get("Bi"), get("Bim"))
    else {
        bail!("the events are not Ir Bc Bcm Bi Bim (run with --cache-sim=no --branch-sim=yes)");
    };
    Ok(Simulated { instructions: ir, branches: bc + bi, mispredictions: bcm + bim })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_cachegrind_summaries() {
        let text = "desc: I1 cache: ...\ncmd: ./a.out\nevents: Ir Bc Bcm Bi Bim\nfl=x.c\n\
                    fn=main\n3 10 2 1 0 0\nsummary: 1000 200 17 30 4\n";
        assert_eq!(
            parse_cachegrind(text).unwrap(),
            Simulated { instructions: 1000, branches: 230, mispredictions: 21 }
        );
        let no_branches = "events: Ir\nsummary: 1000\n";
        assert!(
            parse_cachegrind(no_branches).unwrap_err().to_string().contains("--branch-sim=yes")
        );
    }
}
