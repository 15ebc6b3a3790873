//! LEB128, the variable-length integers of LLVM's binary formats (`.pseudo_probe` sections,
//! binary and extbinary sample profiles) and of profgen's aggregate files; and zigzag, which maps
//! small signed deltas to small unsigned values for them (aggregate files, in-memory stack keys).

/// Why a LEB128 value could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leb128Error {
    /// The data ended inside the value.
    End,
    /// More than ten bytes: the value does not fit in 64 bits.
    TooLong,
}

/// `d` as an unsigned value that is small when `|d|` is: 0, -1, 1, -2, ... become 0, 1, 2, 3, ...
#[inline]
pub fn zigzag(d: i64) -> u64 {
    ((d << 1) ^ (d >> 63)) as u64
}

/// The value [`zigzag`] mapped to `z`.
#[inline]
pub fn unzigzag(z: u64) -> i64 {
    ((z >> 1) as i64) ^ -((z & 1) as i64)
}

/// Appends `v` as unsigned LEB128.
#[inline]
pub fn write_uleb128(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` as signed LEB128.
pub fn write_sleb128(out: &mut Vec<u8>, mut v: i64) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        let done = (v == 0 && byte & 0x40 == 0) || (v == -1 && byte & 0x40 != 0);
        out.push(if done { byte } else { byte | 0x80 });
        if done {
            return;
        }
    }
}

/// Reads an unsigned LEB128 value at `*pos`, advancing `*pos` past every byte read (to the end
/// of `data` when it ends inside the value).
#[inline]
pub fn read_uleb128(data: &[u8], pos: &mut usize) -> Result<u64, Leb128Error> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let &b = data.get(*pos).ok_or(Leb128Error::End)?;
        *pos += 1;
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(Leb128Error::TooLong)
}

/// Reads a signed LEB128 value at `*pos`, advancing `*pos` like [`read_uleb128`].
pub fn read_sleb128(data: &[u8], pos: &mut usize) -> Result<i64, Leb128Error> {
    let mut value = 0i64;
    let mut shift = 0;
    loop {
        let &b = data.get(*pos).ok_or(Leb128Error::End)?;
        *pos += 1;
        if shift < 64 {
            value |= i64::from(b & 0x7f) << shift;
        }
        shift += 7;
        if b & 0x80 == 0 {
            if shift < 64 && b & 0x40 != 0 {
                value |= -1i64 << shift;
            }
            return Ok(value);
        }
        if shift >= 70 {
            return Err(Leb128Error::TooLong);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uleb(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        write_uleb128(&mut out, v);
        out
    }

    #[test]
    fn unsigned_encoding() {
        assert_eq!(uleb(0), [0]);
        assert_eq!(uleb(127), [0x7f]);
        assert_eq!(uleb(128), [0x80, 0x01]);
        assert_eq!(uleb(103), [0x67]);
        assert_eq!(
            uleb(0x5350524F46343204),
            [0x84, 0xe4, 0xd0, 0xb1, 0xf4, 0xc9, 0x94, 0xa8, 0x53]
        );
        assert_eq!(uleb(u64::MAX).len(), 10);
    }

    #[test]
    fn round_trips_and_errors() {
        for v in [0, 1, 63, 64, 127, 128, 0x1234_5678, u64::MAX] {
            let enc = uleb(v);
            let mut pos = 0;
            assert_eq!(read_uleb128(&enc, &mut pos), Ok(v));
            assert_eq!(pos, enc.len());
        }
        for v in [0, 1, -1, 63, 64, -64, -65, i64::MIN, i64::MAX] {
            let mut enc = Vec::new();
            write_sleb128(&mut enc, v);
            let mut pos = 0;
            assert_eq!(read_sleb128(&enc, &mut pos), Ok(v), "{v}");
            assert_eq!(pos, enc.len());
        }
        let mut pos = 0;
        assert_eq!(read_uleb128(&[0x80, 0x80], &mut pos), Err(Leb128Error::End));
        assert_eq!(pos, 2);
        let mut pos = 0;
        assert_eq!(read_uleb128(&[0xff; 11], &mut pos), Err(Leb128Error::TooLong));
        assert_eq!(pos, 10);
        let mut pos = 0;
        assert_eq!(read_sleb128(&[0xff; 11], &mut pos), Err(Leb128Error::TooLong));
        assert_eq!(pos, 10);
    }
}
