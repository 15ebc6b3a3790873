//! The start-up pages metric: how many distinct 4 KiB pages of a binary's code a run executes
//! before a given point (its first N instructions, or the first K% of them), counted exactly
//! from a full instruction trace.
//!
//! The trace comes from valgrind's lackey (`--trace-mem=yes` prints every executed instruction's
//! address and size, the same stream `profgen-record` replays); addresses are turned into the
//! binary's virtual addresses through `/proc/PID/maps` of the running process, read whenever an
//! instruction lands outside the mappings known so far. Only the traced process counts (not
//! children). Pages are ELF virtual-address pages of the binary's executable mappings: `.text`
//! plus the small `.init`, `.plt` and `.fini` around it. An instruction straddling a page
//! boundary touches both pages.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, bail};

use crate::record::binaries::{Binaries, Mapping};
use crate::record::emulate::parse_inst;

pub const PAGE_SIZE: u64 = 4096;

/// When each code page of the binary was first executed, in instructions since the start.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PageTouches {
    first_touch: HashMap<u64, u64>,
    instructions: u64,
}

impl PageTouches {
    /// One executed instruction; `in_binary` is its virtual address and size when it belongs
    /// to the measured binary.
    pub fn execute(&mut self, in_binary: Option<(u64, u64)>) {
        if let Some((vaddr, size)) = in_binary {
            let first = vaddr / PAGE_SIZE;
            let last = (vaddr + size.max(1) - 1) / PAGE_SIZE;
            for page in first..=last {
                self.first_touch.entry(page).or_insert(self.instructions);
            }
        }
        self.instructions += 1;
    }

    /// Instructions executed by the process (in any binary).
    pub fn instructions(&self) -> u64 {
        self.instructions
    }

    /// Distinct pages of the binary executed within the first `instructions` instructions.
    pub fn pages_within(&self, instructions: u64) -> usize {
        self.first_touch.values().filter(|&&t| t < instructions).count()
    }

    /// The instruction count at `percent` % of the run (rounded up).
    pub fn at_percent(&self, percent: f64) -> u64 {
        ((self.instructions as f64) * percent / 100.0).ceil() as u64
    }
}

/// What to run and which binary to measure.
pub struct MeasureOptions {
    pub binary: PathBuf,
    pub command: Vec<String>,
    pub valgrind: String,
    /// Stop the program after this many instructions (the pages of a long run's start).
    pub stop_after: Option<u64>,
}

/// Runs `opts.command` under lackey and records when each code page of `opts.binary` is first
/// executed. The program's standard output goes to standard error.
pub fn measure(opts: &MeasureOptions) -> anyhow::Result<PageTouches> {
    if opts.command.is_empty() {
        bail!("no command to run");
    }
    let target = Target::new(&opts.binary)?;
    // lackey logs to fd 3, our pipe; the program's own stdout is moved to stderr. `exec` keeps
    // the pid, so /proc/<child pid>/maps is valgrind's (the program's) address space.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"exec "$@" 3>&1 1>&2"#)
        .arg("sh")
        .arg(&opts.valgrind)
        .args(["--tool=lackey", "--trace-mem=yes", "--log-fd=3"])
        .args(&opts.command)
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", opts.valgrind))?;
    let pid = child.id();
    let stdout = child.stdout.take().context("valgrind's log pipe")?;
    let mut maps = LiveMaps::new(pid)?;
    let mut touches = PageTouches::default();
    let mut reader = std::io::BufReader::with_capacity(1 << 20, stdout);
    let mut line = Vec::with_capacity(128);
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if line.first() != Some(&b'I') {
            continue;
        }
        if let Some((addr, size)) = parse_inst(&line) {
            touches.execute(maps.vaddr_in(&target, addr).map(|v| (v, size)));
            if opts.stop_after.is_some_and(|n| touches.instructions() >= n) {
                // Killing valgrind (the child itself: sh exec'd it) ends the program and the log.
                let _ = child.kill();
                let _ = child.wait();
                return Ok(touches);
            }
        }
    }
    let status = child.wait()?;
    if !status.success() {
        eprintln!("profgen-pages: warning: the measured command exited with {status}");
    }
    if touches.instructions() == 0 {
        bail!("valgrind traced no instruction (is {} installed?)", opts.valgrind);
    }
    Ok(touches)
}

/// The measured binary: recognised in the maps by path or build id.
struct Target {
    path: PathBuf,
    build_id: Option<Vec<u8>>,
}

impl Target {
    fn new(binary: &Path) -> anyhow::Result<Target> {
        let path = binary
            .canonicalize()
            .with_context(|| format!("{}: cannot resolve the path", binary.display()))?;
        let data = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        let obj = object::File::parse(&*data)
            .with_context(|| format!("{}: not an ELF file", path.display()))?;
        let build_id = object::Object::build_id(&obj).ok().flatten().map(<[u8]>::to_vec);
        Ok(Target { path, build_id })
    }
}

/// The traced process's executable mappings, refreshed from `/proc` on a miss.
struct LiveMaps {
    pid: u32,
    binaries: Binaries,
    maps: Vec<Mapping>,
    /// Per binary index: is it the target.
    is_target: Vec<bool>,
    /// Pages already looked up in a fresh `/proc` read without success.
    checked: std::collections::HashSet<u64>,
}

impl LiveMaps {
    fn new(pid: u32) -> anyhow::Result<LiveMaps> {
        Ok(LiveMaps {
            pid,
            binaries: Binaries::new(false)?,
            maps: Vec::new(),
            is_target: Vec::new(),
            checked: Default::default(),
        })
    }

    fn find(&self, addr: u64) -> Option<&Mapping> {
        let i = self.maps.partition_point(|m| m.start <= addr);
        self.maps[..i].last().filter(|m| addr < m.end)
    }

    fn refresh(&mut self, target: &Target) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{}/maps", self.pid)) else {
            return;
        };
        let mut maps = self.binaries.parse_maps(&text);
        maps.sort_by_key(|m| m.start);
        self.maps = maps;
        for f in &self.binaries.files[self.is_target.len()..] {
            let same_path = Path::new(&f.path).canonicalize().is_ok_and(|p| p == target.path);
            let same_id = f.build_id.is_some() && f.build_id == target.build_id;
            self.is_target.push(same_path || same_id);
        }
    }

    /// The ELF virtual address of runtime `addr` when it is in the target binary.
    fn vaddr_in(&mut self, target: &Target, addr: u64) -> Option<u64> {
        if self.find(addr).is_none() && self.checked.insert(addr / PAGE_SIZE) {
            self.refresh(target);
        }
        let m = self.find(addr)?;
        if !self.is_target[m.bin] {
            return None;
        }
        self.binaries.files[m.bin].vaddr(addr - m.start + m.pgoff)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_are_counted_at_their_first_execution() {
        let mut t = PageTouches::default();
        t.execute(Some((0x1000, 4))); // page 1 at instruction 0
        t.execute(None); // a library
        t.execute(Some((0x1ffe, 4))); // straddles pages 1 and 2: page 2 at instruction 2
        t.execute(Some((0x1004, 4)));
        t.execute(Some((0x5000, 1))); // page 5 at instruction 4
        assert_eq!(t.instructions(), 5);
        assert_eq!((0..=5).map(|n| t.pages_within(n)).collect::<Vec<_>>(), vec![0, 1, 1, 2, 2, 3]);
        assert_eq!(t.at_percent(50.0), 3);
        assert_eq!(t.at_percent(100.0), 5);
    }
}
