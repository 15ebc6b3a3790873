//! File-mode `perf.data` writer for what `perf record -e EVENT:u -b --call-graph fp` produces:
//! one attr (IP|TID|TIME|PERIOD|CALLCHAIN|BRANCH_STACK, branch_sample_type ANY|USER,
//! sample_id_all; CALLCHAIN without `--call-graph`, BRANCH_STACK without `-b` left out), then
//! MMAP2/COMM/FORK/EXIT/SAMPLE records, then the BUILD_ID, EVENT_DESC, CMDLINE and a few
//! descriptive feature sections. Layout follows linux `tools/perf/util/header.c`.

use super::Event;
use crate::input::perf_data::abi::*;

use std::io::{self, Write};

const PERF_MAGIC: u64 = 0x3245_4c49_4652_4550; // "PERFILE2"
const FILE_HEADER_SIZE: u64 = 104;
const ATTR_SIZE: u32 = 128; // PERF_ATTR_SIZE_VER7
pub const SAMPLE_TYPE: u64 =
    SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_PERIOD | SAMPLE_CALLCHAIN | SAMPLE_BRANCH_STACK;

/// One record of the data section, kept with its timestamp so that records produced out of
/// order (forked children are replayed after their parent) can be sorted before writing.
pub struct Record {
    pub time: u64,
    pub bytes: Vec<u8>,
}

/// A DSO whose build id goes to the HEADER_BUILD_ID feature section.
pub struct BuildIdEntry {
    pub build_id: Vec<u8>,
    pub path: String,
}

pub struct Mmap2<'a> {
    pub pid: u32,
    pub tid: u32,
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    pub maj: u32,
    pub min: u32,
    pub ino: u64,
    pub path: &'a str,
}

pub struct Sample<'a> {
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub period: u64,
    /// Without CONTEXT_USER (added here).
    pub callchain: &'a [u64],
    /// (from, to, cycles), newest first.
    pub branches: &'a [(u64, u64, u16)],
}

fn put_u16(b: &mut Vec<u8>, v: u16) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}
fn put_u64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}
/// NUL-terminated string padded to a multiple of 8 bytes (records) or `align` (features).
fn put_str_aligned(b: &mut Vec<u8>, s: &str, align: usize) {
    let len = (s.len() + 1).div_ceil(align) * align;
    b.extend_from_slice(s.as_bytes());
    b.resize(b.len() + len - s.len(), 0);
}

fn header(b: &mut Vec<u8>, kind: u32, misc: u16) {
    put_u32(b, kind);
    put_u16(b, misc);
    put_u16(b, 0); // size, patched by `finish`
}
/// sample_id_all trailer for TID|TIME, then patch the header size.
fn finish(mut b: Vec<u8>, pid: u32, tid: u32, time: u64) -> Vec<u8> {
    put_u32(&mut b, pid);
    put_u32(&mut b, tid);
    put_u64(&mut b, time);
    let size = u16::try_from(b.len()).unwrap_or(u16::MAX);
    b[6..8].copy_from_slice(&size.to_le_bytes());
    b
}

pub fn mmap2(m: &Mmap2, time: u64) -> Record {
    let mut b = Vec::with_capacity(128);
    header(&mut b, RECORD_MMAP2, MISC_USER);
    put_u32(&mut b, m.pid);
    put_u32(&mut b, m.tid);
    put_u64(&mut b, m.start);
    put_u64(&mut b, m.len);
    put_u64(&mut b, m.pgoff);
    put_u32(&mut b, m.maj);
    put_u32(&mut b, m.min);
    put_u64(&mut b, m.ino);
    put_u64(&mut b, 0); // ino_generation
    put_u32(&mut b, 5); // PROT_READ | PROT_EXEC
    put_u32(&mut b, 2); // MAP_PRIVATE
    put_str_aligned(&mut b, m.path, 8);
    Record { time, bytes: finish(b, m.pid, m.tid, time) }
}

pub fn comm(pid: u32, tid: u32, name: &str, exec: bool, time: u64) -> Record {
    let mut b = Vec::with_capacity(48);
    header(&mut b, RECORD_COMM, if exec { MISC_COMM_EXEC } else { 0 });
    put_u32(&mut b, pid);
    put_u32(&mut b, tid);
    put_str_aligned(&mut b, name, 8);
    Record { time, bytes: finish(b, pid, tid, time) }
}

/// FORK (`exit == false`) or EXIT record: (pid, ppid, tid, ptid, time).
pub fn task(exit: bool, pid: u32, ppid: u32, tid: u32, ptid: u32, time: u64) -> Record {
    let mut b = Vec::with_capacity(48);
    header(&mut b, if exit { RECORD_EXIT } else { RECORD_FORK }, 0);
    put_u32(&mut b, pid);
    put_u32(&mut b, ppid);
    put_u32(&mut b, tid);
    put_u32(&mut b, ptid);
    put_u64(&mut b, time);
    Record { time, bytes: finish(b, pid, tid, time) }
}

pub fn sample(s: &Sample) -> Record {
    let mut b = Vec::with_capacity(64 + 8 * s.callchain.len() + 24 * s.branches.len());
    header(&mut b, RECORD_SAMPLE, MISC_USER);
    put_u64(&mut b, s.ip);
    put_u32(&mut b, s.pid);
    put_u32(&mut b, s.tid);
    put_u64(&mut b, s.time);
    put_u64(&mut b, s.period);
    put_u64(&mut b, s.callchain.len() as u64 + 1);
    put_u64(&mut b, CONTEXT_USER);
    for &a in s.callchain {
        put_u64(&mut b, a);
    }
    put_u64(&mut b, s.branches.len() as u64);
    for &(from, to, cycles) in s.branches {
        put_u64(&mut b, from);
        put_u64(&mut b, to);
        // flags: mispred, predicted, in_tx, abort (all 0), then cycles in bits 4..20; perf
        // script shows `/-/-/-/CYCLES/`.
        put_u64(&mut b, u64::from(cycles) << 4);
    }
    let size = u16::try_from(b.len()).unwrap_or(u16::MAX);
    b[6..8].copy_from_slice(&size.to_le_bytes());
    Record { time: s.time, bytes: b }
}

/// What the file says about its samples.
pub struct Layout {
    pub event: Event,
    pub sample_period: u64,
    /// Samples carry CALLCHAIN.
    pub call_stacks: bool,
    /// Samples carry BRANCH_STACK.
    pub branch_stacks: bool,
}

impl Layout {
    fn sample_type(&self) -> u64 {
        let mut t = SAMPLE_TYPE;
        if !self.call_stacks {
            t &= !SAMPLE_CALLCHAIN;
        }
        if !self.branch_stacks {
            t &= !SAMPLE_BRANCH_STACK;
        }
        t
    }
}

fn attr(layout: &Layout) -> Vec<u8> {
    let mut b = Vec::with_capacity(ATTR_SIZE as usize);
    let (kind, config) = layout.event.type_config();
    put_u32(&mut b, kind);
    put_u32(&mut b, ATTR_SIZE);
    put_u64(&mut b, config);
    put_u64(&mut b, layout.sample_period);
    put_u64(&mut b, layout.sample_type());
    put_u64(&mut b, 0); // read_format
    // disabled, inherit, exclude_kernel, exclude_hv, mmap, comm, enable_on_exec, task,
    // sample_id_all, exclude_guest, mmap2, comm_exec
    let flags: u64 = (1 << 0)
        | (1 << 1)
        | (1 << 5)
        | (1 << 6)
        | (1 << 8)
        | (1 << 9)
        | (1 << 12)
        | (1 << 13)
        | (1 << 18)
        | (1 << 20)
        | (1 << 23)
        | (1 << 24);
    put_u64(&mut b, flags);
    put_u32(&mut b, 0); // wakeup_events
    put_u32(&mut b, 0); // bp_type
    put_u64(&mut b, 0); // config1
    put_u64(&mut b, 0); // config2
    put_u64(&mut b, if layout.branch_stacks { BRANCH_ANY | BRANCH_USER } else { 0 });
    put_u64(&mut b, 0); // sample_regs_user
    put_u32(&mut b, 0); // sample_stack_user
    put_u32(&mut b, 0); // clockid
    put_u64(&mut b, 0); // sample_regs_intr
    put_u32(&mut b, 0); // aux_watermark
    put_u16(&mut b, 127); // sample_max_stack
    put_u16(&mut b, 0);
    put_u32(&mut b, 0); // aux_sample_size
    put_u32(&mut b, 0);
    put_u64(&mut b, 0); // sig_data
    debug_assert_eq!(b.len(), ATTR_SIZE as usize);
    b
}

fn feature_string(s: &str) -> Vec<u8> {
    let mut b = Vec::new();
    let len = (s.len() + 1).div_ceil(64) * 64;
    put_u32(&mut b, len as u32);
    put_str_aligned(&mut b, s, 64);
    b
}

/// Descriptive header fields; values of the recording machine.
pub struct HostInfo {
    pub hostname: String,
    pub osrelease: String,
    pub nrcpus: u32,
    pub cmdline: Vec<String>,
}

/// Drops the fields `layout` leaves out of a SAMPLE record written by [`sample`]: CALLCHAIN
/// (`perf record -b` without `-g`) and BRANCH_STACK (without `-b`, the branch stack ends the
/// record); other records are left alone.
fn strip_sample(rec: &mut Vec<u8>, layout: &Layout) {
    if u32::from_le_bytes([rec[0], rec[1], rec[2], rec[3]]) != RECORD_SAMPLE {
        return;
    }
    // header, ip, pid/tid, time, period, then nr and the chain.
    const NR_AT: usize = 40;
    let nr = u64::from_le_bytes(rec[NR_AT..NR_AT + 8].try_into().expect("8 bytes")) as usize;
    if !layout.branch_stacks {
        rec.truncate(NR_AT + 8 + 8 * nr);
    }
    if !layout.call_stacks {
        rec.drain(NR_AT..NR_AT + 8 + 8 * nr);
    }
    let size = u16::try_from(rec.len()).unwrap_or(u16::MAX);
    rec[6..8].copy_from_slice(&size.to_le_bytes());
}

/// Records between two FINISHED_ROUND records.
const ROUND_RECORDS: usize = 4096;

fn finished_round() -> Record {
    let mut bytes = Vec::with_capacity(8);
    header(&mut bytes, FINISHED_ROUND, 0);
    bytes[6..8].copy_from_slice(&8u16.to_le_bytes());
    Record { time: u64::MAX, bytes }
}

/// Writes a complete perf.data: header, attr, `records` sorted by time (stable), features.
pub fn write(
    out: &mut impl Write,
    layout: &Layout,
    mut records: Vec<Record>,
    build_ids: &[BuildIdEntry],
    host: &HostInfo,
) -> io::Result<()> {
    records.sort_by_key(|r| r.time);
    // perf ends each flush of its buffers with FINISHED_ROUND; readers that order events by time
    // rely on it to release queued records.
    let mut with_rounds = Vec::with_capacity(records.len() + records.len() / ROUND_RECORDS + 1);
    for (i, mut r) in records.into_iter().enumerate() {
        strip_sample(&mut r.bytes, layout);
        with_rounds.push(r);
        if (i + 1) % ROUND_RECORDS == 0 {
            with_rounds.push(finished_round());
        }
    }
    with_rounds.push(finished_round());
    let records = with_rounds;
    let attr_offset = FILE_HEADER_SIZE;
    let attr_entry = ATTR_SIZE as u64 + FILE_SECTION_SIZE;
    let data_offset = attr_offset + attr_entry;
    let data_size: u64 = records.iter().map(|r| r.bytes.len() as u64).sum();

    let mut features: Vec<(u32, Vec<u8>)> = Vec::new();
    let mut bid = Vec::new();
    for e in build_ids {
        let start = bid.len();
        header(&mut bid, 0, MISC_USER | MISC_BUILD_ID_SIZE);
        put_u32(&mut bid, u32::MAX); // pid -1: host machine
        let mut id = [0u8; 24];
        let n = e.build_id.len().min(20);
        id[..n].copy_from_slice(&e.build_id[..n]);
        id[20] = n as u8;
        bid.extend_from_slice(&id);
        put_str_aligned(&mut bid, &e.path, 64);
        let size = (bid.len() - start) as u16;
        bid[start + 6..start + 8].copy_from_slice(&size.to_le_bytes());
    }
    features.push((FEAT_BUILD_ID, bid));
    // EVENT_DESC: one event, its attr, no ids, its name.
    let mut desc = Vec::new();
    put_u32(&mut desc, 1);
    put_u32(&mut desc, ATTR_SIZE);
    desc.extend_from_slice(&attr(layout));
    put_u32(&mut desc, 0);
    desc.extend_from_slice(&feature_string(layout.event.perf_name()));
    features.push((FEAT_EVENT_DESC, desc));
    features.push((FEAT_HOSTNAME, feature_string(&host.hostname)));
    features.push((FEAT_OSRELEASE, feature_string(&host.osrelease)));
    features.push((FEAT_VERSION, feature_string("6.1.0 (profgen-record)")));
    features.push((FEAT_ARCH, feature_string("x86_64")));
    let mut nrcpus = Vec::new();
    put_u32(&mut nrcpus, host.nrcpus);
    put_u32(&mut nrcpus, host.nrcpus);
    features.push((FEAT_NRCPUS, nrcpus));
    let mut cmdline = Vec::new();
    put_u32(&mut cmdline, host.cmdline.len() as u32);
    for a in &host.cmdline {
        cmdline.extend_from_slice(&feature_string(a));
    }
    features.push((FEAT_CMDLINE, cmdline));

    let mut h = Vec::with_capacity(FILE_HEADER_SIZE as usize);
    put_u64(&mut h, PERF_MAGIC);
    put_u64(&mut h, FILE_HEADER_SIZE);
    put_u64(&mut h, attr_entry);
    put_u64(&mut h, attr_offset);
    put_u64(&mut h, attr_entry);
    put_u64(&mut h, data_offset);
    put_u64(&mut h, data_size);
    put_u64(&mut h, 0); // event_types
    put_u64(&mut h, 0);
    let mut bits = [0u64; 4];
    for (f, _) in &features {
        bits[(*f / 64) as usize] |= 1 << (f % 64);
    }
    for w in bits {
        put_u64(&mut h, w);
    }
    out.write_all(&h)?;
    let mut a = attr(layout);
    put_u64(&mut a, data_offset); // ids section: empty
    put_u64(&mut a, 0);
    out.write_all(&a)?;
    for r in &records {
        out.write_all(&r.bytes)?;
    }
    // Feature index (sorted by feature bit) then the feature bodies.
    features.sort_by_key(|(f, _)| *f);
    let mut pos = data_offset + data_size + FILE_SECTION_SIZE * features.len() as u64;
    let mut index = Vec::new();
    for (_, body) in &features {
        put_u64(&mut index, pos);
        put_u64(&mut index, body.len() as u64);
        pos += body.len() as u64;
    }
    out.write_all(&index)?;
    for (_, body) in &features {
        out.write_all(body)?;
    }
    Ok(())
}
