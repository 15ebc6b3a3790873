//! `perf_event_attr`: the fields that decide how sample bodies and `sample_id_all` trailers are
//! laid out. Attrs of any size are accepted: fields past the end of a short (older) attr read as
//! zero, and bytes past the fields we know (newer perf) are ignored.

use super::abi::*;

use super::bytes::{u32_at, u64_at};

// sample_type bits (include/uapi/linux/perf_event.h).

// read_format bits.

// branch_sample_type bits.

#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Attr {
    /// `type` and `config`: which event samples.
    pub kind: u32,
    pub config: u64,
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
            kind: u32_at(data, 0).unwrap_or(0),
            config: field(8),
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
