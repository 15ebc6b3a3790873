//! Bounds-checked little-endian reads over a byte slice, and where a record came from. Every
//! read returns `None` instead of panicking when the slice is too short, so decoders can turn it
//! into a located error ([`Loc`]).

#[derive(Clone, Copy)]
pub(super) struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn new(data: &'a [u8]) -> Self {
        Cursor { data, pos: 0 }
    }

    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    pub(super) fn bytes(&mut self, len: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(len)?;
        let out = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(out)
    }

    /// Skips `len` bytes, where `len` is an input-derived u64 (checked before any conversion).
    pub(super) fn skip(&mut self, len: u64) -> Option<()> {
        let len = usize::try_from(len).ok()?;
        self.bytes(len).map(|_| ())
    }

    pub(super) fn u64(&mut self) -> Option<u64> {
        self.bytes(8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    pub(super) fn u32(&mut self) -> Option<u32> {
        self.bytes(4).map(|b| u32::from_le_bytes(b.try_into().unwrap_or_default()))
    }

    pub(super) fn i32(&mut self) -> Option<i32> {
        self.u32().map(|v| v as i32)
    }
}

pub(super) fn u16_at(data: &[u8], pos: usize) -> Option<u16> {
    let b = data.get(pos..pos.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

pub(super) fn u32_at(data: &[u8], pos: usize) -> Option<u32> {
    Cursor { data, pos }.u32()
}

pub(super) fn u64_at(data: &[u8], pos: usize) -> Option<u64> {
    Cursor { data, pos }.u64()
}

/// A NUL-terminated (and usually NUL-padded) string field; lossy so odd bytes never fail a read.
pub(crate) fn c_str(data: &[u8]) -> std::borrow::Cow<'_, str> {
    // `CStr` finds the NUL a word at a time.
    let s = std::ffi::CStr::from_bytes_until_nul(data).map_or(data, |s| s.to_bytes());
    crate::text::lossy_utf8(s)
}

/// Where a record came from, for error messages.
#[derive(Clone, Copy, Debug)]
pub(super) struct Loc {
    /// File (or stream) offset of the record, or of the compressed record that contained it.
    pub offset: u64,
    /// Offset in the decompressed zstd stream, for records that came out of compressed records.
    pub decompressed: Option<u64>,
}

impl Loc {
    pub(super) fn plain(offset: u64) -> Loc {
        Loc { offset, decompressed: None }
    }
}

/// Asks the CPU to start loading every cache line that holds a byte of `data[bytes]` (of those
/// inside `data`). The range is cut to `data` once, not tested per line: a sample's record spans a dozen lines,
/// and a `step_by` loop with a test per line cost twice the instructions.
#[inline(always)]
pub(super) fn prefetch_lines(data: &[u8], bytes: std::ops::Range<usize>) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let base = data.as_ptr() as usize;
        let end = base + bytes.end.min(data.len());
        let mut line = (base + bytes.start) & !63;
        while line < end {
            // SAFETY: a prefetch is a hint that never faults, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line as *const i8) };
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, bytes);
}
