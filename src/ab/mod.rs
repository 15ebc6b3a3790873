//! `profgen-ab`: does a build (typically one with `-fprofile-sample-use=`) make a program faster?
//!
//! A side tool, like [`crate::record`]: it is not part of the profile pipeline. It compares a
//! base build with one or more experiment builds of the same program, guarding against the two
//! classic ways of measuring a small difference wrongly:
//!
//! - **Link-layout bias.** Any change moves code, and alignment and cache/TLB placement alone
//!   move a benchmark by a few percent. Every comparison is therefore repeated over N
//!   counterfactual layouts ([`layout`]: random padding, same seed for every build), so a
//!   result holds across layouts rather than for one lucky pair of binaries.
//! - **Timer and start-up cost, and noise.** The timer's overhead and resolution and the cost of
//!   starting an empty process are measured first ([`measure::calibrate`]); start-up is
//!   subtracted, and an effect below the resulting noise floor is not reported as one. Runs are
//!   interleaved (the order rotates every round: AB, BA, ...), pinned to one CPU when possible,
//!   and compared pairwise; intervals are Student's t ([`stats`]). Next to time, a low-noise
//!   metric: instructions and branch mispredictions of one run per build under cachegrind.

pub mod layout;
pub mod measure;
pub mod report;
pub mod stats;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};
use object::{Object, ObjectSection, ObjectSegment};

use measure::{Calibration, Simulated, Timed};

/// One build to compare: a name and a shell command template (see [`Options::base`]).
#[derive(Clone, Debug)]
pub struct Build {
    pub name: String,
    pub template: String,
}

#[derive(Clone, Debug)]
pub struct Options {
    /// The base build, then the experiments. A template is run by `sh -c` after replacing
    /// `{exe}` (the binary to write), `{dir}` (a folder of this build, the same for every
    /// layout, for caches) and `{ldflags}` (link flags that make the layout; they must reach
    /// the link with lld).
    pub builds: Vec<Build>,
    /// The benchmark: program and arguments, `{exe}` replaced by the binary.
    pub bench: Vec<String>,
    /// Counterfactual layouts (seeds 1..=N); 0 compares the default layout only.
    pub layouts: usize,
    pub trials: usize,
    pub work: PathBuf,
    /// CPU to pin the timed runs to (None: not pinned).
    pub cpu: Option<usize>,
    pub time: bool,
    pub simulate: bool,
    pub confidence: f64,
    pub max_page_size: u64,
    pub cc: String,
    pub valgrind: String,
    pub progress: bool,
}

/// Everything measured for one build in one layout.
#[derive(Clone, Debug, Default)]
pub struct Measured {
    pub timed: Vec<Timed>,
    pub sim: Option<Simulated>,
    /// The layout's padding and how faithful it is (None for the default layout).
    pub layout: Option<LayoutCheck>,
}

/// What a counterfactual layout inserted, checked against the default link.
#[derive(Clone, Copy, Debug, Default)]
pub struct LayoutCheck {
    /// `.text` input sections preceded by padding, and the bytes inserted before them.
    pub padded_sections: usize,
    pub padding_bytes: u64,
    /// `.text` input sections with code whose position differs from the default link's, of all.
    pub moved: usize,
    pub text_sections: usize,
    /// Sections that could not be placed exactly ([`layout::Layout::unplaced`]).
    pub unplaced: usize,
}

/// The whole run: per layout (index 0..N) and per build, what was measured.
#[derive(Clone, Debug)]
pub struct Run {
    pub options: Options,
    pub calibration: Option<Calibration>,
    pub pinned: Result<usize, String>,
    pub loadavg: String,
    /// measured[layout][build]
    pub measured: Vec<Vec<Measured>>,
    /// Seeds of the layouts (0: the default layout).
    pub seeds: Vec<u64>,
}

fn progress(o: &Options, msg: &str) {
    if o.progress {
        eprintln!("profgen-ab: {msg}");
    }
}

/// Checks the options a run needs (templates, benchmark, work folder): a usage error.
pub fn check_options(o: &Options) -> Result<()> {
    if o.builds.len() < 2 {
        bail!("need a base build and at least one experiment");
    }
    for b in &o.builds {
        if !b.template.contains("{exe}") {
            bail!("build template {:?} has no {{exe}}", b.name);
        }
        if o.layouts > 0 && !b.template.contains("{ldflags}") {
            bail!("build template {:?} has no {{ldflags}} (needed for --layouts > 0)", b.name);
        }
    }
    if !o.bench.iter().any(|a| a.contains("{exe}")) {
        bail!("the benchmark command has no {{exe}}");
    }
    if o.time && o.trials == 0 {
        bail!("--trials must be at least 1");
    }
    let work = o.work.to_string_lossy();
    if work.chars().any(|c| c.is_whitespace() || "'\"\\$`{}".contains(c)) {
        bail!(
            "--work {work:?}: the path is pasted into shell commands; use one without spaces or quotes"
        );
    }
    Ok(())
}

/// Runs a build template for one layout.
fn build(b: &Build, dir: &Path, exe: &Path, ldflags: &str) -> Result<()> {
    let cmd = b
        .template
        .replace("{exe}", &exe.to_string_lossy())
        .replace("{dir}", &dir.to_string_lossy())
        .replace("{ldflags}", ldflags);
    let out = Command::new("sh").arg("-c").arg(&cmd).output().context("cannot run sh")?;
    if !out.status.success() || !exe.is_file() {
        bail!(
            "build {:?} failed ({}; {} written: {}):\n{cmd}\n{}",
            b.name,
            out.status,
            exe.display(),
            exe.is_file(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// For each output section of an ELF file, the index of the PT_LOAD segment holding it.
fn load_segments(exe: &Path) -> Result<HashMap<String, usize>> {
    let data = std::fs::read(exe).with_context(|| format!("reading {}", exe.display()))?;
    let file = object::File::parse(&*data)
        .with_context(|| format!("{}: not an ELF file", exe.display()))?;
    let segs: Vec<(u64, u64)> =
        file.segments().map(|s| (s.address(), s.address() + s.size())).collect();
    let mut out = HashMap::new();
    for s in file.sections() {
        let (Ok(name), a) = (s.name(), s.address()) else { continue };
        if a == 0 {
            continue;
        }
        if let Some(i) = segs.iter().position(|&(lo, hi)| lo <= a && a < hi.max(lo + 1)) {
            out.insert(name.to_string(), i);
        }
    }
    Ok(out)
}

fn bench_argv(o: &Options, exe: &Path) -> Vec<String> {
    o.bench.iter().map(|a| a.replace("{exe}", &exe.to_string_lossy())).collect()
}

/// Builds every layout of every build, then measures them. See the module docs.
pub fn run(o: &Options) -> Result<Run> {
    check_options(o)?;
    std::fs::create_dir_all(&o.work).with_context(|| format!("creating {}", o.work.display()))?;
    let work = o.work.canonicalize()?;
    let loadavg = std::fs::read_to_string("/proc/loadavg").unwrap_or_default().trim().to_string();
    let calibration = if o.time {
        progress(o, "calibrating the timer and process start-up");
        Some(measure::calibrate(30)?)
    } else {
        None
    };
    let seeds: Vec<u64> = if o.layouts == 0 { vec![0] } else { (1..=o.layouts as u64).collect() };
    let nb = o.builds.len();
    // exes[layout][build]
    let mut exes = vec![Vec::with_capacity(nb); seeds.len()];
    let mut measured = vec![vec![Measured::default(); nb]; seeds.len()];
    for (bi, b) in o.builds.iter().enumerate() {
        let dir = work.join(format!("build-{bi}"));
        std::fs::create_dir_all(&dir)?;
        let default_dir = dir.join("default");
        std::fs::create_dir_all(&default_dir)?;
        let default_map = default_dir.join("map");
        let default_exe = default_dir.join("exe");
        progress(o, &format!("building {} (default layout)", b.name));
        // --no-demangle: the map must name symbols as the ordering file does (mangled).
        build(
            b,
            &dir,
            &default_exe,
            &format!("-Wl,--no-demangle -Wl,-Map={}", default_map.display()),
        )?;
        if o.layouts == 0 {
            exes[0].push(default_exe);
            continue;
        }
        let map_text = std::fs::read_to_string(&default_map).with_context(|| {
            format!("{}: the build did not pass {{ldflags}} to lld", default_map.display())
        })?;
        let map = layout::parse_map(&map_text, &default_map)?;
        let segments = load_segments(&default_exe)?;
        for (li, &seed) in seeds.iter().enumerate() {
            progress(o, &format!("building {} layout {}/{}", b.name, li + 1, seeds.len()));
            let ldir = dir.join(format!("layout-{seed}"));
            std::fs::create_dir_all(&ldir)?;
            let plan = layout::plan(&map, &segments, seed, o.max_page_size);
            let (asm, obj, order, lmap) =
                (ldir.join("pad.s"), ldir.join("pad.o"), ldir.join("order.txt"), ldir.join("map"));
            std::fs::write(&asm, &plan.assembly)?;
            std::fs::write(&order, &plan.ordering)?;
            let st = Command::new(&o.cc).arg("-c").arg(&asm).arg("-o").arg(&obj).status();
            if !st.as_ref().is_ok_and(|s| s.success()) {
                bail!("{} -c {} failed ({st:?})", o.cc, asm.display());
            }
            let exe = ldir.join("exe");
            let ldflags = format!(
                "-Wl,--symbol-ordering-file={} -Wl,--no-warn-symbol-ordering {} -Wl,--no-demangle -Wl,-Map={}",
                order.display(),
                obj.display(),
                lmap.display()
            );
            build(b, &dir, &exe, &ldflags)?;
            let padded = layout::parse_map(&std::fs::read_to_string(&lmap)?, &lmap)?;
            let (moved, total) = layout::fidelity(&map, &padded);
            measured[li][bi].layout = Some(LayoutCheck {
                padded_sections: plan.section_paddings,
                padding_bytes: plan.section_padding_bytes,
                moved,
                text_sections: total,
                unplaced: plan.unplaced,
            });
            exes[li].push(exe);
        }
    }
    // The builds must compute the same thing.
    let reference = run_output_checked(o, &exes[0][0])?;
    for exe in exes.iter().flatten() {
        if run_output_checked(o, exe)? != reference {
            bail!(
                "{} prints something else than {}: the builds do not compute the same thing",
                exe.display(),
                exes[0][0].display()
            );
        }
    }
    if o.simulate {
        for (li, row) in exes.iter().enumerate() {
            for (bi, exe) in row.iter().enumerate() {
                progress(
                    o,
                    &format!("cachegrind: {} layout {}/{}", o.builds[bi].name, li + 1, seeds.len()),
                );
                let out = exe.with_extension("cachegrind");
                measured[li][bi].sim =
                    Some(measure::simulate(&o.valgrind, &bench_argv(o, exe), &out)?);
            }
        }
    }
    let mut pinned = Err("not requested".to_string());
    if o.time {
        let old = match o.cpu.map(measure::pin_to_cpu) {
            Some(Ok(old)) => {
                pinned = Ok(o.cpu.unwrap_or(0));
                Some(old)
            }
            Some(Err(e)) => {
                pinned = Err(format!("{e:#}"));
                None
            }
            None => None,
        };
        let result = time_all(o, &exes, &mut measured);
        if let Some(old) = old {
            measure::restore_affinity(&old);
        }
        result?;
    }
    Ok(Run { options: o.clone(), calibration, pinned, loadavg, measured, seeds })
}

fn run_output_checked(o: &Options, exe: &Path) -> Result<Vec<u8>> {
    measure::run_output(&bench_argv(o, exe))
}

/// Interleaved trials: per layout, one warm-up run of each build, then `trials` rounds in
/// which every build runs once, the order rotating from round to round.
fn time_all(o: &Options, exes: &[Vec<PathBuf>], measured: &mut [Vec<Measured>]) -> Result<()> {
    let nb = o.builds.len();
    for (li, row) in exes.iter().enumerate() {
        let argvs: Vec<Vec<String>> = row.iter().map(|e| bench_argv(o, e)).collect();
        for a in &argvs {
            measure::run_timed(a)?;
        }
        progress(
            o,
            &format!(
                "timing layout {}/{}: {} trials of {} builds",
                li + 1,
                exes.len(),
                o.trials,
                nb
            ),
        );
        for t in 0..o.trials {
            for k in 0..nb {
                let bi = (k + t) % nb;
                let r = measure::run_timed(&argvs[bi])?;
                measured[li][bi].timed.push(r);
            }
        }
    }
    Ok(())
}
