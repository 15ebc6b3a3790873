//! Executable mappings of a traced process and the ELF files behind them: runtime address →
//! (binary, file offset, ELF vaddr), build ids, and lazily decoded instruction kinds.

use std::collections::HashMap;
use std::fs::File;

use capstone::prelude::*;
use memmap2::Mmap;
use object::{Object, ObjectSegment};

/// What the emulator needs to know about an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Call,
    Ret,
    /// Unconditional jump (direct or indirect): always a taken branch.
    Jump,
    /// `mov rbp, rsp`: the frame pointer of the current frame is now set.
    FpSet,
    /// `pop rbp` / `leave`: the frame pointer is back to the caller's.
    FpClear,
    Other,
}

pub struct BinaryFile {
    pub path: String,
    pub build_id: Option<Vec<u8>>,
    data: Option<Mmap>,
    /// (p_offset, p_filesz, p_vaddr) of PT_LOAD segments.
    segments: Vec<(u64, u64, u64)>,
    /// Ground truth is kept for this binary.
    pub tracked: bool,
}

impl BinaryFile {
    fn open(path: &str, tracked: bool) -> BinaryFile {
        let data = File::open(path).ok().and_then(|f| unsafe { Mmap::map(&f) }.ok());
        let mut build_id = None;
        let mut segments = Vec::new();
        if let Some(obj) = data.as_deref().and_then(|d| object::File::parse(d).ok()) {
            build_id = obj.build_id().ok().flatten().map(<[u8]>::to_vec);
            for s in obj.segments() {
                let (off, size) = s.file_range();
                segments.push((off, size, s.address()));
            }
        }
        BinaryFile { path: path.to_string(), build_id, data, segments, tracked }
    }

    /// ELF virtual address of a file offset, if a PT_LOAD covers it.
    pub fn vaddr(&self, offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|&&(off, size, _)| offset >= off && offset - off < size)
            .map(|&(off, _, vaddr)| vaddr + (offset - off))
    }

    fn bytes_at(&self, offset: u64) -> Option<&[u8]> {
        let d = self.data.as_deref()?;
        let start = usize::try_from(offset).ok()?;
        d.get(start..(start + 16).min(d.len()))
    }
}

#[derive(Clone, Debug)]
pub struct Mapping {
    pub start: u64,
    pub end: u64,
    pub pgoff: u64,
    pub maj: u32,
    pub min: u32,
    pub ino: u64,
    pub bin: usize,
}

/// All binaries seen by the recording (shared by parent and forked children).
pub struct Binaries {
    pub files: Vec<BinaryFile>,
    by_path: HashMap<String, usize>,
    cs: Capstone,
    track_all: bool,
}

impl Binaries {
    pub fn new(track_all: bool) -> anyhow::Result<Binaries> {
        let cs = Capstone::new().x86().mode(arch::x86::ArchMode::Mode64).build()?;
        Ok(Binaries { files: Vec::new(), by_path: HashMap::new(), cs, track_all })
    }

    fn intern(&mut self, path: &str) -> usize {
        if let Some(&i) = self.by_path.get(path) {
            return i;
        }
        // System libraries are mapped and sampled but their truth would dwarf the case's own.
        let system = ["/usr/", "/lib", "/etc/"].iter().any(|p| path.starts_with(p));
        self.files.push(BinaryFile::open(path, self.track_all || !system));
        self.by_path.insert(path.to_string(), self.files.len() - 1);
        self.files.len() - 1
    }

    /// Parses `/proc/PID/maps` text into executable file mappings, skipping valgrind's own tool
    /// (its preload libraries run as client code and are kept).
    pub fn parse_maps(&mut self, text: &str) -> Vec<Mapping> {
        let mut out = Vec::new();
        for line in text.lines() {
            let mut f = line.split_whitespace();
            let (Some(range), Some(perms), Some(off), Some(dev), Some(ino)) =
                (f.next(), f.next(), f.next(), f.next(), f.next())
            else {
                continue;
            };
            let Some(path) = f.next() else { continue };
            if !perms.contains('x') || !path.starts_with('/') {
                continue;
            }
            if path.contains("/valgrind/") && !path.ends_with(".so") {
                continue;
            }
            let Some((s, e)) = range.split_once('-') else {
                continue;
            };
            let (Ok(start), Ok(end), Ok(pgoff)) = (
                u64::from_str_radix(s, 16),
                u64::from_str_radix(e, 16),
                u64::from_str_radix(off, 16),
            ) else {
                continue;
            };
            let (maj, min) = dev
                .split_once(':')
                .map(|(a, b)| {
                    (
                        u32::from_str_radix(a, 16).unwrap_or(0),
                        u32::from_str_radix(b, 16).unwrap_or(0),
                    )
                })
                .unwrap_or((0, 0));
            let bin = self.intern(path);
            out.push(Mapping { start, end, pgoff, maj, min, ino: ino.parse().unwrap_or(0), bin });
        }
        out
    }

    /// Decodes the instruction at file offset `offset` of binary `bin`.
    pub fn decode(&self, bin: usize, offset: u64) -> Kind {
        let Some(bytes) = self.files[bin].bytes_at(offset) else {
            return Kind::Other;
        };
        let Ok(insns) = self.cs.disasm_count(bytes, offset, 1) else {
            return Kind::Other;
        };
        let Some(i) = insns.iter().next() else {
            return Kind::Other;
        };
        // Prefixes (`bnd`, `notrack`, `rep`) come first in capstone mnemonics.
        let m = i.mnemonic().unwrap_or("").rsplit(' ').next().unwrap_or("");
        let ops = i.op_str().unwrap_or("");
        match m {
            "call" => Kind::Call,
            "ret" | "retf" => Kind::Ret,
            "jmp" => Kind::Jump,
            "mov" if ops == "rbp, rsp" => Kind::FpSet,
            "pop" if ops == "rbp" => Kind::FpClear,
            "leave" => Kind::FpClear,
            _ => Kind::Other,
        }
    }
}
