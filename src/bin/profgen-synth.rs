//! `profgen-synth`: perf.data files that real recordings produce but that are slow to record
//! here, for `scripts/bench` and the regression tests.
//!
//! - `processes N --binary B -o OUT`: a system-wide recording of N short-lived processes, each
//!   exec'd, mapping B once (MMAP2 with B's build id), taking one LBR sample in B and exiting.
//! - `no-rounds IN -o OUT`: IN without its FINISHED_ROUND records, as perf before 2.6.35 and
//!   profgen-record before it wrote rounds left them (readers must then order events by time
//!   without perf's round boundaries).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use profgen::binary::{Binary, FuncRange, LoadOptions};
use profgen::input::perf_data::abi::FINISHED_ROUND;
use profgen::record::Event;
use profgen::record::perf_data::{self, BuildIdEntry, HostInfo, Layout, Mmap2, Sample};

/// Writes synthetic perf.data files (see the subcommands).
#[derive(Parser)]
#[command(name = "profgen-synth", after_help = "Exit codes: 0 success, 1 failure, 2 bad usage.")]
struct Args {
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand)]
enum What {
    /// N processes, each exec'd, mapping --binary once, with one LBR sample in it, exiting.
    Processes {
        /// How many processes.
        n: u32,
        /// The binary every process maps (its first executable segment).
        #[arg(long)]
        binary: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
    },
    /// The input without its FINISHED_ROUND records (as older perf wrote files).
    NoRounds {
        input: PathBuf,
        #[arg(short, long)]
        output: PathBuf,
    },
}

fn main() {
    let a = Args::parse();
    let result = match a.what {
        What::Processes { n, binary, output } => processes(n, &binary, &output),
        What::NoRounds { input, output } => no_rounds(&input, &output),
    };
    if let Err(e) = result {
        eprintln!("profgen-synth: error: {e:#}");
        std::process::exit(1);
    }
}

fn processes(n: u32, binary_path: &Path, output: &Path) -> anyhow::Result<()> {
    let binary = Binary::load(binary_path, &LoadOptions::default())?;
    let Some(seg) = binary.segments().iter().find(|s| s.executable) else {
        bail!("{} has no executable segment", binary_path.display());
    };
    // Two branches to `main` (or the segment's first function), the newer one from its second
    // instruction: a taken branch and a range of two instructions.
    let in_segment = |r: &&FuncRange| r.start >= seg.vaddr && r.start.0 < seg.vaddr.0 + seg.memsz;
    let ranges = binary.func_ranges().iter();
    let Some(entry) = ranges
        .clone()
        .filter(in_segment)
        .find(|r| &*binary.function(r.func).name == "main")
        .or_else(|| ranges.clone().find(in_segment))
        .map(|r| r.start)
    else {
        bail!("{} has no function in its executable segment", binary_path.display());
    };
    let second = binary.next_inst(entry).unwrap_or(entry);
    let page = |a: u64| a & !0xfff;
    let (map_vaddr, map_offset) = (page(seg.vaddr.0), page(seg.offset.0));
    let len = seg.vaddr.0 + seg.memsz - map_vaddr;
    let path = std::fs::canonicalize(binary_path)?.to_string_lossy().into_owned();
    let mut records = Vec::with_capacity(4 * n as usize);
    for i in 0..n {
        let (pid, time) = (1000 + i, 1_000_000 + 10 * u64::from(i));
        // Every process at its own load address, as ASLR places them.
        let base = 0x5500_0000_0000 + (u64::from(i) << 24);
        let runtime = |v: u64| base + v;
        records.push(perf_data::comm(pid, pid, "worker", true, time));
        records.push(perf_data::mmap2(
            &Mmap2 {
                pid,
                tid: pid,
                start: runtime(map_vaddr),
                len,
                pgoff: map_offset,
                maj: 8,
                min: 1,
                ino: 42,
                path: &path,
            },
            time + 1,
        ));
        records.push(perf_data::sample(&Sample {
            ip: runtime(entry.0),
            pid,
            tid: pid,
            time: time + 2,
            period: 1,
            callchain: &[],
            branches: &[
                (runtime(second.0), runtime(entry.0), 0),
                (runtime(second.0), runtime(entry.0), 0),
            ],
        }));
        records.push(perf_data::task(true, pid, pid, pid, pid, time + 3));
    }
    let layout =
        Layout { event: Event::Cycles, sample_period: 1, call_stacks: false, branch_stacks: true };
    let build_ids: Vec<BuildIdEntry> = binary
        .build_id()
        .map(|id| BuildIdEntry { build_id: id.to_vec(), path: path.clone() })
        .into_iter()
        .collect();
    let host = HostInfo {
        hostname: "synth".into(),
        osrelease: "6.1.0".into(),
        nrcpus: 1,
        cmdline: ["perf", "record", "-a", "-b"].map(String::from).to_vec(),
    };
    let file = std::fs::File::create(output).with_context(|| output.display().to_string())?;
    let mut out = BufWriter::new(file);
    perf_data::write(&mut out, &layout, records, &build_ids, &host)?;
    out.flush().with_context(|| output.display().to_string())
}

fn u64_at(b: &[u8], at: usize) -> anyhow::Result<u64> {
    let bytes = b.get(at..at + 8).context("file too short for its perf.data header")?;
    Ok(u64::from_le_bytes(bytes.try_into()?))
}

/// Copies `input` without its FINISHED_ROUND records: the data section shrinks, so the feature
/// sections behind it move and their index is rewritten.
fn no_rounds(input: &Path, output: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(input).with_context(|| input.display().to_string())?;
    if bytes.get(..8) != Some(b"PERFILE2") || u64_at(&bytes, 8)? != 104 {
        bail!("{}: not a file-mode perf.data", input.display());
    }
    let (data_offset, data_size) = (u64_at(&bytes, 40)? as usize, u64_at(&bytes, 48)? as usize);
    let data_end = data_offset + data_size;
    let mut data = Vec::with_capacity(data_size);
    let mut pos = data_offset;
    while pos < data_end {
        let rtype = u32::from_le_bytes(bytes[pos..pos + 4].try_into()?);
        let size = usize::from(u16::from_le_bytes(bytes[pos + 6..pos + 8].try_into()?));
        if size < 8 || pos + size > data_end {
            bail!("{}: bad record at byte offset {pos}", input.display());
        }
        if rtype != FINISHED_ROUND {
            data.extend_from_slice(&bytes[pos..pos + size]);
        }
        pos += size;
    }
    let removed = (data_size - data.len()) as u64;
    let mut out = bytes[..data_offset].to_vec();
    out[48..56].copy_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(&data);
    // The feature index: one (offset, size) pair per set feature bit, offsets past the data.
    let features: u32 = (0..4)
        .map(|w| u64_at(&bytes, 72 + 8 * w).map(u64::count_ones))
        .sum::<anyhow::Result<u32>>()?;
    let mut rest = bytes[data_end..].to_vec();
    for f in 0..features as usize {
        let at = 16 * f;
        let offset = u64_at(&rest, at)?;
        rest[at..at + 8].copy_from_slice(&(offset - removed).to_le_bytes());
    }
    out.extend_from_slice(&rest);
    std::fs::write(output, out).with_context(|| output.display().to_string())
}
