//! Text parsing helpers shared by the line-oriented inputs (perf script, unsymbolized
//! profiles): numbers and trimming with the exact rules of LLVM's `StringRef`, on bytes, so
//! that a line is never required to be valid UTF-8.

/// `bytes` as text, invalid sequences replaced as `String::from_utf8_lossy` replaces them. Text
/// is nearly always valid UTF-8, which `from_utf8` checks in a fraction of the time
/// `from_utf8_lossy` takes to walk its chunks.
pub fn lossy_utf8(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(s) => std::borrow::Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}

/// StringRef::getAsInteger(16): the whole string, hex digits of either case, no `0x`, no overflow.
pub fn parse_hex(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        acc.checked_mul(16)?.checked_add(u64::from(d))
    })
}

/// StringRef::getAsInteger(10) for u64: the whole string, digits only.
pub fn parse_dec(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// StringRef's default trim set.
fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

pub fn trim_start(s: &[u8]) -> &[u8] {
    let n = s.iter().position(|&b| !is_ws(b)).unwrap_or(s.len());
    &s[n..]
}

pub fn trim_end(s: &[u8]) -> &[u8] {
    let n = s.iter().rposition(|&b| !is_ws(b)).map_or(0, |i| i + 1);
    &s[..n]
}

pub fn trim(s: &[u8]) -> &[u8] {
    trim_end(trim_start(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn number_parsing() {
        assert_eq!(parse_hex(b"ffffffffffffffff"), Some(u64::MAX));
        assert_eq!(parse_hex(b"10000000000000000"), None);
        assert_eq!(parse_hex(b"0x10"), None);
        assert_eq!(parse_hex(b"AbC"), Some(0xabc));
        assert_eq!(parse_dec(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_dec(b"18446744073709551616"), None);
        assert_eq!(parse_dec(b" 1"), None);
    }

    #[test]
    fn trims_llvms_whitespace_set() {
        assert_eq!(trim(b" \t\x0bab c\r\n"), b"ab c");
        assert_eq!(trim_start(b"\x0c x"), b"x");
        assert_eq!(trim_end(b"x \n"), b"x");
    }
}
