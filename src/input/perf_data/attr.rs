//! `perf_event_attr`: the fields that decide how sample bodies and `sample_id_all` trailers are
//! laid out. Attrs of any size are accepted: fields past the end of a short (older) attr read as
//! zero, and bytes past the fields we know (newer perf) are ignored.

use super::bytes::{u32_at, u64_at};

// sample_type bits (include/uapi/linux/perf_event.h).
pub(super) const SAMPLE_IP: u64 = 1 << 0;
pub(super) const SAMPLE_TID: u64 = 1 << 1;
pub(super) const SAMPLE_TIME: u64 = 1 << 2;
pub(super) const SAMPLE_ADDR: u64 = 1 << 3;
pub(super) const SAMPLE_READ: u64 = 1 << 4;
pub(super) const SAMPLE_CALLCHAIN: u64 = 1 << 5;
pub(super) const SAMPLE_ID: u64 = 1 << 6;
pub(super) const SAMPLE_CPU: u64 = 1 << 7;
pub(super) const SAMPLE_PERIOD: u64 = 1 << 8;
pub(super) const SAMPLE_STREAM_ID: u64 = 1 << 9;
pub(super) const SAMPLE_RAW: u64 = 1 << 10;
pub(super) const SAMPLE_BRANCH_STACK: u64 = 1 << 11;
pub(super) const SAMPLE_REGS_USER: u64 = 1 << 12;
pub(super) const SAMPLE_STACK_USER: u64 = 1 << 13;
pub(super) const SAMPLE_WEIGHT: u64 = 1 << 14;
pub(super) const SAMPLE_DATA_SRC: u64 = 1 << 15;
pub(super) const SAMPLE_IDENTIFIER: u64 = 1 << 16;
pub(super) const SAMPLE_TRANSACTION: u64 = 1 << 17;
pub(super) const SAMPLE_REGS_INTR: u64 = 1 << 18;
pub(super) const SAMPLE_PHYS_ADDR: u64 = 1 << 19;
pub(super) const SAMPLE_AUX: u64 = 1 << 20;
pub(super) const SAMPLE_CGROUP: u64 = 1 << 21;
pub(super) const SAMPLE_DATA_PAGE_SIZE: u64 = 1 << 22;
pub(super) const SAMPLE_CODE_PAGE_SIZE: u64 = 1 << 23;
pub(super) const SAMPLE_WEIGHT_STRUCT: u64 = 1 << 24;

// read_format bits.
pub(super) const FORMAT_TOTAL_TIME_ENABLED: u64 = 1 << 0;
pub(super) const FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
pub(super) const FORMAT_ID: u64 = 1 << 2;
pub(super) const FORMAT_GROUP: u64 = 1 << 3;
pub(super) const FORMAT_LOST: u64 = 1 << 4;

// branch_sample_type bits.
pub(super) const BRANCH_HW_INDEX: u64 = 1 << 17;
pub(super) const BRANCH_COUNTERS: u64 = 1 << 19;

/// Size of the first published attr (PERF_ATTR_SIZE_VER0); `size == 0` in an attr means this.
pub(super) const ATTR_SIZE_VER0: usize = 64;

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Attr {
    pub sample_type: u64,
    pub read_format: u64,
    /// Non-sample records end with a trailer of the sample_type's id fields.
    pub sample_id_all: bool,
    pub branch_sample_type: u64,
    pub sample_regs_user: u64,
    pub sample_regs_intr: u64,
}

impl Attr {
    /// Decodes an attr from `data`, which holds exactly the attr bytes the file provides.
    pub(super) fn parse(data: &[u8]) -> Option<Attr> {
        if data.len() < ATTR_SIZE_VER0 {
            return None;
        }
        let field = |pos| u64_at(data, pos).unwrap_or(0);
        Some(Attr {
            sample_type: field(24),
            read_format: field(32),
            sample_id_all: field(40) & (1 << 18) != 0,
            branch_sample_type: field(72),
            sample_regs_user: field(80),
            sample_regs_intr: field(96),
        })
    }

    /// The size an attr claims for itself (its `size` field), as found at the start of `data`.
    pub(super) fn self_size(data: &[u8]) -> Option<usize> {
        match u32_at(data, 4)? {
            0 => Some(ATTR_SIZE_VER0),
            n => usize::try_from(n).ok(),
        }
    }
}

/// Byte offset of the event id in a sample body, if samples carry one. It must agree between all
/// attrs of a file (perf enforces this), so the first attr decides it.
pub(super) fn sample_id_offset(attr: &Attr) -> Option<usize> {
    let has = |bit| attr.sample_type & bit != 0;
    if has(SAMPLE_IDENTIFIER) {
        Some(0)
    } else if has(SAMPLE_ID) {
        let before = [SAMPLE_IP, SAMPLE_TID, SAMPLE_TIME, SAMPLE_ADDR];
        Some(8 * before.iter().filter(|&&b| has(b)).count())
    } else {
        None
    }
}

/// Where records carry their timestamp: the offset in a sample body, and the offset counted back
/// from the end of a non-sample kernel record (the `sample_id_all` trailer is TID, TIME, ID,
/// STREAM_ID, CPU, IDENTIFIER). Like the id, this is the same for all attrs of a file.
pub(super) fn time_offsets(attr: &Attr) -> (Option<usize>, Option<usize>) {
    let has = |bit| attr.sample_type & bit != 0;
    if !has(SAMPLE_TIME) {
        return (None, None);
    }
    let count = |bits: &[u64]| 8 * bits.iter().filter(|&&b| has(b)).count();
    let in_sample = count(&[SAMPLE_IDENTIFIER, SAMPLE_IP, SAMPLE_TID]);
    let from_end = 8 + count(&[SAMPLE_ID, SAMPLE_STREAM_ID, SAMPLE_CPU, SAMPLE_IDENTIFIER]);
    (Some(in_sample), attr.sample_id_all.then_some(from_end))
}
