//! Where a sample's fields lie in its record. Most events' `sample_type`s have no variable-sized
//! field but the call chain and the branch stack, so every other field sits at an offset worked
//! out once per attr ([`SampleLayout`]): a sample then costs a few loads and length checks
//! instead of a test per `sample_type` bit. The field-by-field walk (`Decoder::sample`) stays for
//! the other layouts, and for every record this one finds short: it names the field and offset.

use super::abi::*;
use super::attr::Attr;
use super::bytes::u64_at;

/// A sample's fields, its call chain and branch stack by place: the offset in the record (header
/// included) of their first entry and the entry count, `(0, 0)` when absent. A record is at most
/// 64 KiB, so both fit a u16.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct SampleFields {
    pub ip: u64,
    /// The TID field: pid in the low half, tid in the high half.
    pub pid_tid: Option<u64>,
    pub time: Option<u64>,
    pub period: u64,
    pub callchain: (u16, u16),
    pub branches: (u16, u16),
    /// The bytes of the body the fields take (a longer body has fields this reader does not know).
    pub end: usize,
}

impl SampleFields {
    /// The pid and tid of the TID field.
    #[inline]
    pub fn pid_tid(&self) -> (Option<i32>, Option<i32>) {
        match self.pid_tid {
            Some(v) => (Some(v as u32 as i32), Some((v >> 32) as u32 as i32)),
            None => (None, None),
        }
    }
}

/// A sample's call chain and branch stack by place ([`SampleFields::callchain`],
/// [`SampleFields::branches`]), and where its fields end ([`SampleFields::end`]).
type Places = ((u16, u16), (u16, u16), usize);

/// The fixed offsets of a sample body whose only variable-sized fields are the call chain and the
/// branch stack (`sample_type` without READ, RAW, REGS_USER, STACK_USER, REGS_INTR and AUX).
#[derive(Clone, Copy, Debug)]
pub(super) struct SampleLayout {
    /// The fixed fields before the call chain, by word (8 bytes) in the body, [`ABSENT`] for a
    /// field the samples lack: a word index is one compare from a read (present or not), a byte
    /// offset's range two and an overflow check.
    ip: u16,
    tid: u16,
    time: u16,
    period: u16,
    /// Bytes of the fixed fields before the call chain.
    head: usize,
    /// Whether the samples record a call chain (see [`crate::input::Sample::has_callchain`]).
    pub(super) callchain: bool,
    branch_stack: bool,
    /// Bytes between the branch stack's count and its entries (hw_idx).
    branch_skip: usize,
    /// Bytes each branch takes (its entry, and its counters word when recorded).
    branch_size: usize,
    /// Bytes of the fixed fields after the branch stack.
    tail: usize,
}

impl SampleLayout {
    /// The layout of `attr`'s samples, if its fields lie at fixed offsets.
    pub(super) fn of(attr: &Attr) -> Option<SampleLayout> {
        let st = attr.sample_type;
        let variable =
            SAMPLE_READ | SAMPLE_RAW | SAMPLE_REGS_USER | SAMPLE_STACK_USER | SAMPLE_REGS_INTR;
        if st & (variable | SAMPLE_AUX) != 0 {
            return None;
        }
        // The fixed fields before the call chain in perf_event.h order, each a u64 (nine at most).
        let mut head = 0;
        let mut field = |bit: u64| {
            if st & bit == 0 {
                return ABSENT;
            }
            head += 8;
            (head / 8 - 1) as u16
        };
        field(SAMPLE_IDENTIFIER);
        let ip = field(SAMPLE_IP);
        let tid = field(SAMPLE_TID);
        let time = field(SAMPLE_TIME);
        field(SAMPLE_ADDR);
        field(SAMPLE_ID);
        field(SAMPLE_STREAM_ID);
        field(SAMPLE_CPU);
        let period = field(SAMPLE_PERIOD);
        let after = [
            SAMPLE_WEIGHT | SAMPLE_WEIGHT_STRUCT,
            SAMPLE_DATA_SRC,
            SAMPLE_TRANSACTION,
            SAMPLE_PHYS_ADDR,
            SAMPLE_CGROUP,
            SAMPLE_DATA_PAGE_SIZE,
            SAMPLE_CODE_PAGE_SIZE,
        ];
        let branch = |bit| attr.branch_sample_type & bit != 0;
        Some(SampleLayout {
            ip,
            tid,
            time,
            period,
            head,
            callchain: st & SAMPLE_CALLCHAIN != 0,
            branch_stack: st & SAMPLE_BRANCH_STACK != 0,
            branch_skip: if branch(BRANCH_HW_INDEX) { 8 } else { 0 },
            branch_size: if branch(BRANCH_COUNTERS) { 32 } else { 24 },
            tail: 8 * after.iter().filter(|&&bits| st & bits != 0).count(),
        })
    }

    /// The fields of `body` (a sample record's, after its header); `None` if a field does not fit
    /// in it (the walk then names which).
    #[inline]
    pub(super) fn read(&self, body: &[u8]) -> Option<SampleFields> {
        let (callchain, branches, end) = self.places(body)?;
        // Inside the head (an absent field's index lies past any body).
        let field = words(body);
        let ip = field(self.ip.into()).unwrap_or(0);
        let pid_tid = field(self.tid.into());
        let time = field(self.time.into());
        let period = field(self.period.into()).unwrap_or(1);
        Some(SampleFields { ip, pid_tid, time, period, callchain, branches, end })
    }

    /// Whether the fields of `body` fill it exactly and name the thread: then the sample can be
    /// read from its place alone, later ([`read_filled`](Self::read_filled)), with nothing to
    /// count or report (see [`crate::input::PerfEvent::Placed`]).
    #[inline(always)]
    pub(super) fn fills(&self, body: &[u8]) -> bool {
        self.tid != ABSENT && self.places(body).is_some_and(|(.., end)| end == body.len())
    }

    /// What [`read`](Self::read) gives for a `body` its fields [fill](Self::fills), without
    /// checking the stacks' counts again (on a body they do not fit, the stacks' places are
    /// wrong but the reads stay inside `body`: a worker reads a sample the reading thread
    /// checked, at about half the cost of `read`).
    #[inline]
    pub(super) fn read_filled(&self, body: &[u8]) -> SampleFields {
        // Every field and entry is a whole number of words: the counts are read by word index.
        let field = words(body);
        let word = |i: usize| field(i).unwrap_or(0);
        let mut pos = self.head;
        let mut stack = |present: bool, skip: usize, size: usize| {
            if !present {
                return (0, 0);
            }
            let nr = word(pos / 8);
            let at = pos + 8 + skip;
            pos = at.wrapping_add((nr as usize).wrapping_mul(size));
            ((8 + at) as u16, nr as u16)
        };
        let callchain = stack(self.callchain, 0, 8);
        let branches = stack(self.branch_stack, self.branch_skip, self.branch_size);
        SampleFields {
            ip: field(self.ip.into()).unwrap_or(0),
            pid_tid: field(self.tid.into()),
            time: field(self.time.into()),
            period: field(self.period.into()).unwrap_or(1),
            callchain,
            branches,
            end: body.len(),
        }
    }

    /// Where the call chain and branch stack of `body` lie and where its fields end; `None` if a
    /// field does not fit.
    #[inline(always)]
    fn places(&self, body: &[u8]) -> Option<Places> {
        if body.len() < self.head {
            return None;
        }
        let mut pos = self.head;
        let callchain = if self.callchain { stack(body, &mut pos, 0, 8)? } else { (0, 0) };
        let branches = if self.branch_stack {
            stack(body, &mut pos, self.branch_skip, self.branch_size)?
        } else {
            (0, 0)
        };
        let end = pos + self.tail;
        if end > body.len() {
            return None;
        }
        Some((callchain, branches, end))
    }
}

/// The word index of a field the samples lack ([`SampleLayout::ip`]): past any body, as a record
/// is less than 64 KiB (8 Ki words).
const ABSENT: u16 = u16::MAX;

/// Reads the words of `body` by index (see [`SampleLayout::ip`]); `None` past the body.
#[inline(always)]
fn words(body: &[u8]) -> impl Fn(usize) -> Option<u64> + '_ {
    let words = body.as_chunks::<8>().0;
    move |i| words.get(i).map(|w| u64::from_le_bytes(*w))
}

/// The count of `body`'s stack entries of `size` bytes at `pos` and where they start in the
/// record (see [`SampleFields::callchain`]); `pos` moved past them. The count is checked against
/// what is left before any use: a count of 2^16 or more is refused first (a record is less than
/// 64 KiB, and an entry at least a byte), so that the entries' length takes no overflow check.
#[inline(always)]
fn stack(body: &[u8], pos: &mut usize, skip: usize, size: usize) -> Option<(u16, u16)> {
    let nr = u64_at(body, *pos)?;
    if nr > u64::from(u16::MAX) {
        return None;
    }
    let at = *pos + 8 + skip;
    let end = at + nr as usize * size;
    if end > body.len() {
        return None;
    }
    *pos = end;
    Some(((8 + at) as u16, nr as u16))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::perf_data::bytes::Loc;
    use crate::input::perf_data::decode::walk_sample;
    use std::path::Path;

    /// The sample_type bits of fixed-size fields and of the two stacks, in perf_event.h order.
    const BITS: [u64; 19] = [
        SAMPLE_IDENTIFIER,
        SAMPLE_IP,
        SAMPLE_TID,
        SAMPLE_TIME,
        SAMPLE_ADDR,
        SAMPLE_ID,
        SAMPLE_STREAM_ID,
        SAMPLE_CPU,
        SAMPLE_PERIOD,
        SAMPLE_CALLCHAIN,
        SAMPLE_BRANCH_STACK,
        SAMPLE_WEIGHT,
        SAMPLE_WEIGHT_STRUCT,
        SAMPLE_DATA_SRC,
        SAMPLE_TRANSACTION,
        SAMPLE_PHYS_ADDR,
        SAMPLE_CGROUP,
        SAMPLE_DATA_PAGE_SIZE,
        SAMPLE_CODE_PAGE_SIZE,
    ];

    /// A body of `attr`'s layout: each fixed field a distinct word, a call chain of 3 frames and
    /// a branch stack of 2 entries.
    fn body(attr: &Attr) -> Vec<u8> {
        let has = |bit| attr.sample_type & bit != 0;
        let branch = |bit| attr.branch_sample_type & bit != 0;
        let mut words = Vec::new();
        for (i, bit) in BITS.into_iter().enumerate() {
            if bit == SAMPLE_WEIGHT_STRUCT && has(SAMPLE_WEIGHT) {
                continue; // one word for either
            }
            if !has(bit) {
                continue;
            }
            match bit {
                SAMPLE_CALLCHAIN => words.extend([3, 0x10, 0x20, 0x30]),
                SAMPLE_BRANCH_STACK => {
                    words.push(2);
                    if branch(BRANCH_HW_INDEX) {
                        words.push(0x77);
                    }
                    words.extend([0x40, 0x41, 0x42, 0x50, 0x51, 0x52]);
                    if branch(BRANCH_COUNTERS) {
                        words.extend([0x61, 0x62]);
                    }
                }
                _ => words.push(0x1000 + i as u64),
            }
        }
        words.iter().flat_map(|w: &u64| w.to_le_bytes()).collect()
    }

    /// On layouts of every fixed field and stack (a spread of the 2^19 sample_types, with and
    /// without hw_idx and branch counters), the fixed layout reads what the walk reads, and
    /// refuses every body the walk finds short (whose error the walk then gives): cut at every
    /// byte, with a word it does not know added, and with a count too large for the body. Only
    /// a whole body with a TID field is one its fields fill.
    #[test]
    fn fixed_layouts_read_what_the_walk_reads() {
        let (path, loc) = (Path::new("t.data"), Loc::plain(0));
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for i in 0..600 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let bits = if i == 0 { (1 << BITS.len()) - 1 } else { state };
            let sample_type = BITS
                .iter()
                .enumerate()
                .filter(|&(b, _)| bits & (1 << b) != 0)
                .fold(0, |st, (_, bit)| st | bit);
            let branch_sample_type = [0, BRANCH_HW_INDEX, BRANCH_COUNTERS][i % 3]
                | if i % 5 == 0 { BRANCH_HW_INDEX } else { 0 };
            let attr = Attr { sample_type, branch_sample_type, ..Attr::default() };
            let layout = SampleLayout::of(&attr).unwrap();
            let full = body(&attr);
            let mut longer = full.clone();
            longer.extend(9u64.to_le_bytes());
            for body in [&full, &longer] {
                let walk = walk_sample(&attr, body, path, loc).unwrap();
                assert_eq!(layout.read(body), Some(walk), "sample_type {sample_type:#x}");
                assert_eq!(walk.end, full.len());
            }
            assert_eq!(layout.fills(&full), sample_type & SAMPLE_TID != 0, "{sample_type:#x}");
            assert_eq!(Some(layout.read_filled(&full)), layout.read(&full), "{sample_type:#x}");
            assert!(!layout.fills(&longer));
            for cut in 0..full.len() {
                let body = &full[..cut];
                assert!(walk_sample(&attr, body, path, loc).is_err(), "{sample_type:#x} {cut}");
                assert_eq!(layout.read(body), None, "sample_type {sample_type:#x} cut at {cut}");
                assert!(!layout.fills(body));
            }
            // The first stack's count (right after the head), larger than the body holds.
            if layout.callchain || layout.branch_stack {
                let mut huge = full.clone();
                huge[layout.head..layout.head + 8].copy_from_slice(&(u64::MAX / 4).to_le_bytes());
                assert!(walk_sample(&attr, &huge, path, loc).is_err());
                assert_eq!(layout.read(&huge), None);
                assert!(!layout.fills(&huge));
            }
        }
    }

    /// A stack count that the body cannot hold is refused as the walk refuses it, whatever its
    /// size: one past what is left, about 2^16 (where the layout refuses a count before reading
    /// the stack's length), with the low 16 bits of a small count, and past usize's multiply.
    #[test]
    fn stack_counts_past_the_body_are_refused_as_the_walk_refuses_them() {
        let (path, loc) = (Path::new("t.data"), Loc::plain(0));
        for (sample_type, branch_sample_type) in [
            (SAMPLE_IP | SAMPLE_TID | SAMPLE_CALLCHAIN, 0),
            (SAMPLE_IP | SAMPLE_TID | SAMPLE_BRANCH_STACK, BRANCH_HW_INDEX),
            (SAMPLE_IP | SAMPLE_TID | SAMPLE_TIME | SAMPLE_CALLCHAIN | SAMPLE_BRANCH_STACK, 0),
            (SAMPLE_TID | SAMPLE_CALLCHAIN | SAMPLE_BRANCH_STACK | SAMPLE_WEIGHT, BRANCH_COUNTERS),
        ] {
            let attr = Attr { sample_type, branch_sample_type, ..Attr::default() };
            let layout = SampleLayout::of(&attr).unwrap();
            let full = body(&attr);
            // The first stack's count, and the branch stack's after a call chain of 3.
            let mut counts = vec![(layout.head, if layout.callchain { 3 } else { 2 })];
            if layout.callchain && layout.branch_stack {
                counts.push((layout.head + 32, 2));
            }
            for (at, n) in counts {
                for count in [n + 1, 0xffff, 0x1_0000, 0x1_0000 + n, u64::MAX / 8 + 1, u64::MAX] {
                    let mut bad = full.clone();
                    bad[at..at + 8].copy_from_slice(&count.to_le_bytes());
                    let what = format!("{sample_type:#x} count {count:#x} at {at}");
                    assert!(walk_sample(&attr, &bad, path, loc).is_err(), "{what}");
                    assert_eq!(layout.read(&bad), None, "{what}");
                    assert!(!layout.fills(&bad), "{what}");
                }
            }
        }
    }

    /// Fields of variable size other than the stacks leave the layout to the walk.
    #[test]
    fn variable_fields_have_no_fixed_layout() {
        let st = SAMPLE_IP | SAMPLE_TID | SAMPLE_BRANCH_STACK;
        assert!(SampleLayout::of(&Attr { sample_type: st, ..Attr::default() }).is_some());
        for bit in [
            SAMPLE_READ,
            SAMPLE_RAW,
            SAMPLE_REGS_USER,
            SAMPLE_STACK_USER,
            SAMPLE_REGS_INTR,
            SAMPLE_AUX,
        ] {
            let attr = Attr { sample_type: st | bit, ..Attr::default() };
            assert!(SampleLayout::of(&attr).is_none(), "{bit:#x}");
        }
    }
}
