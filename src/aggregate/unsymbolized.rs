//! llvm-profgen's unsymbolized profile: the text `--skip-symbolization` writes and
//! `--unsymbolized-profile` reads (reference §2.4).
//!
//! In (writer): [`ContextCounters`] from aggregation. Out: the exact bytes llvm-profgen-19 writes.
//! In (reader): that text. Out: [`ContextCounters`] again, so a run can resume after unwinding.
//!
//! ```text
//! [main:1 @ foo]        <- CS only: one header per context, sorted by this string
//!   2                   <- number of ranges; 2-space indent inside contexts, none otherwise
//!   183-1ae:15          <- inclusive range start-end:count, hex without 0x
//!   1b3-1b5:15
//!   2                   <- number of branches
//!   1ae->140:15         <- source->target:count
//!   1b5->183:18
//! ```
//!
//! Addresses are written minus a base (`--use-offset`, default: the preferred text base;
//! `--use-first-loadable-segment-as-base`: the first loadable segment; `--use-offset=0`: 0),
//! with 64-bit wrap-around, so the external sentinel 1 becomes e.g. `fffffffffffff001`; the reader
//! adds the base back. Entries are sorted by their absolute addresses, as llvm's `std::map` does,
//! which puts the sentinel first. Context headers: line-based contexts as `main:1 @ foo:3.1 @ bar`
//! (leaf without location), probe contexts as call-site offsets `0x7f4 @ 0x7bf`.
//!
//! Differences from llvm-profgen-19, on inputs it mishandles: probe contexts are read back as
//! addresses (llvm segfaults on them); a frame's location is split at its last `:` (llvm takes the
//! first, mangling names that contain `:`); CRLF line ends and blank lines between blocks are
//! accepted; counts saturate instead of wrapping; two contexts with the same header text are
//! merged (llvm keeps one of them); CS contexts without counts are not written (llvm never has
//! any). The empty CS context (external callers at the root of the unwinder's frame trie) is
//! written `[]`; it is read back as the empty key of the profile's style, and
//! [`ContextKey::None`] in a CS profile is written the same way.

use std::io::{self, Write};
use std::path::Path;

use super::{ContextCounters, ContextKey, Counters};
use crate::addr::Vaddr;
use crate::binary::Binary;
use crate::error::{Error, Result};
use crate::llvm::{ContextFrame, LineLocation, MAX_CONTEXT_FRAMES};
use crate::text::{parse_dec, parse_hex, trim_start};

/// Where the addresses of an unsymbolized profile are relative to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UnsymbolizedOptions {
    /// `--use-offset` (default true): relative to the preferred base.
    pub use_offset: bool,
    /// `--use-first-loadable-segment-as-base`: with `use_offset`, relative to the first loadable
    /// segment instead.
    pub use_first_loadable_segment_as_base: bool,
}

impl Default for UnsymbolizedOptions {
    fn default() -> Self {
        UnsymbolizedOptions { use_offset: true, use_first_loadable_segment_as_base: false }
    }
}

impl UnsymbolizedOptions {
    /// The [`offset_base`] of `binary`.
    pub fn base(&self, binary: &Binary) -> u64 {
        offset_base(
            self.use_offset,
            self.use_first_loadable_segment_as_base,
            binary.preferred_base(),
            binary.first_loadable_address(),
        )
    }
}

/// The value subtracted from every address on writing and added back on reading.
///
/// `preferred_base` is the page-aligned vaddr of the first executable segment,
/// `first_loadable` llvm's FirstLoadableAddress (page-aligned first PT_LOAD vaddr, skipping one
/// at 0).
pub fn offset_base(
    use_offset: bool,
    use_first_loadable_segment_as_base: bool,
    preferred_base: Vaddr,
    first_loadable: Vaddr,
) -> u64 {
    match (use_offset, use_first_loadable_segment_as_base) {
        (false, _) => 0,
        (true, false) => preferred_base.0,
        (true, true) => first_loadable.0,
    }
}

/// Writes `counters` as llvm-profgen-19's `--skip-symbolization` output.
pub fn write_unsymbolized(
    counters: &ContextCounters,
    base: u64,
    out: &mut impl Write,
) -> io::Result<()> {
    if !counters.context_sensitive {
        // LBR-only: one context-less block, present even when empty.
        let mut all = Counters::default();
        for c in counters.by_context.values() {
            all.merge(c);
        }
        return write_counters(&all, base, "", out);
    }
    let mut by_header: Vec<(String, &Counters)> = counters
        .by_context
        .iter()
        .filter(|(_, c)| !c.is_empty())
        .map(|(key, c)| (context_string(key, base), c))
        .collect();
    by_header.sort_by(|a, b| a.0.cmp(&b.0));
    let mut i = 0;
    while i < by_header.len() {
        let header = &by_header[i].0;
        let same = by_header[i..].iter().take_while(|(h, _)| h == header).count();
        writeln!(out, "[{header}]")?;
        if same == 1 {
            write_counters(by_header[i].1, base, "  ", out)?;
        } else {
            let mut merged = Counters::default();
            for (_, c) in &by_header[i..i + same] {
                merged.merge(c);
            }
            write_counters(&merged, base, "  ", out)?;
        }
        i += same;
    }
    Ok(())
}

/// llvm's context key text (`SampleContext::getContextString` / the probe address form).
fn context_string(key: &ContextKey, base: u64) -> String {
    let mut s = String::new();
    match key {
        ContextKey::None => {}
        ContextKey::Frames(frames) => {
            for (i, f) in frames.iter().enumerate() {
                if i > 0 {
                    s.push_str(" @ ");
                }
                s.push_str(&f.func);
                if i + 1 < frames.len() {
                    s.push_str(&format!(":{}", f.loc.line_offset));
                    if f.loc.discriminator != 0 {
                        s.push_str(&format!(".{}", f.loc.discriminator));
                    }
                }
            }
        }
        ContextKey::Addrs(addrs) => {
            for (i, a) in addrs.iter().enumerate() {
                if i > 0 {
                    s.push_str(" @ ");
                }
                s.push_str(&format!("0x{:x}", a.0.wrapping_sub(base)));
            }
        }
    }
    s
}

fn write_counters(c: &Counters, base: u64, indent: &str, out: &mut impl Write) -> io::Result<()> {
    for (map, sep) in [(&c.ranges, "-"), (&c.branches, "->")] {
        let mut entries: Vec<_> = map.iter().map(|(&(a, b), &n)| (a.0, b.0, n)).collect();
        entries.sort_unstable();
        writeln!(out, "{indent}{}", entries.len())?;
        for (a, b, n) in entries {
            writeln!(out, "{indent}{:x}{sep}{:x}:{n}", a.wrapping_sub(base), b.wrapping_sub(base))?;
        }
    }
    Ok(())
}

/// Reads an unsymbolized profile. `probe_contexts` says how CS headers are keyed: call-site
/// addresses ([`ContextKey::Addrs`], pseudo-probe binaries) or frames ([`ContextKey::Frames`]).
/// Returns the counters and the warnings (contexts cut to [`MAX_CONTEXT_FRAMES`] callers).
///
/// Errors name `path` and use llvm's texts: `Invalid raw profile at line N: <line>`, or
/// `Invalid raw profile!` when the file ends early.
pub fn read_unsymbolized(
    text: &[u8],
    path: &Path,
    base: u64,
    probe_contexts: bool,
) -> Result<(ContextCounters, Vec<String>)> {
    let mut reader = Reader { text, pos: 0, line_no: 0, path, base };
    let mut result = ContextCounters::default();
    let mut cut_contexts = 0u64;
    while let Some(line) = reader.next_line() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (key, count_line) = if line.starts_with(b"[") {
            result.context_sensitive = true;
            let inner = line[1..].strip_suffix(b"]").ok_or_else(|| reader.invalid(line))?;
            let (key, cut) =
                parse_context(inner, base, probe_contexts).ok_or_else(|| reader.invalid(line))?;
            cut_contexts += u64::from(cut);
            (key, reader.line_or_eof()?)
        } else {
            (ContextKey::None, line)
        };
        let counters = result.counters_mut(key);
        reader.read_entries(count_line, b"-", counters, false)?;
        let count_line = reader.line_or_eof()?;
        reader.read_entries(count_line, b"->", counters, true)?;
    }
    let mut warnings = Vec::new();
    if cut_contexts > 0 {
        warnings.push(format!(
            "{}: {cut_contexts} contexts are deeper than {MAX_CONTEXT_FRAMES} frames: they keep the innermost {MAX_CONTEXT_FRAMES}",
            path.display()
        ));
    }
    Ok((result, warnings))
}

/// A header's inside: `0x7f4 @ 0x7bf` (probe) or `main:1 @ foo:3.1 @ bar` (frames). A context
/// with more than [`MAX_CONTEXT_FRAMES`] callers keeps the innermost ones (the `bool` says it was
/// cut); the frames cut are still checked, but never held.
fn parse_context(inner: &[u8], base: u64, probe_contexts: bool) -> Option<(ContextKey, bool)> {
    let inner = std::str::from_utf8(inner).ok()?;
    let parts = || inner.rsplit(" @ ").filter(|_| !inner.is_empty());
    // Probe contexts are call sites only; frame contexts end with the leaf function.
    let keep = MAX_CONTEXT_FRAMES + usize::from(!probe_contexts);
    let cut = parts().nth(keep).is_some();
    if probe_contexts {
        let addr = |p: &str| parse_hex(p.strip_prefix("0x")?.as_bytes());
        if cut && !parts().skip(keep).all(|p| addr(p).is_some()) {
            return None;
        }
        let mut addrs = parts()
            .take(keep)
            .map(|p| Some(Vaddr(addr(p)?.wrapping_add(base))))
            .collect::<Option<Vec<_>>>()?;
        addrs.reverse();
        return Some((ContextKey::Addrs(addrs), cut));
    }
    let mut frames: Vec<ContextFrame> = parts()
        .take(keep)
        .map(|p| {
            let (func, loc) =
                match p.rsplit_once(':').and_then(|(f, l)| Some((f, parse_location(l)?))) {
                    Some(split) => split,
                    None => (p, LineLocation::default()),
                };
            ContextFrame { func: func.into(), loc }
        })
        .collect();
    frames.reverse();
    Some((ContextKey::Frames(frames), cut))
}

/// `line[.discriminator]`, decimal.
fn parse_location(s: &str) -> Option<LineLocation> {
    let (line, discr) = match s.split_once('.') {
        Some((l, d)) => (l, parse_dec(d.as_bytes())?),
        None => (s, 0),
    };
    let line = parse_dec(line.as_bytes())?;
    Some(LineLocation::new(u32::try_from(line).ok()?, u32::try_from(discr).ok()?))
}

struct Reader<'a> {
    text: &'a [u8],
    pos: usize,
    line_no: u64,
    path: &'a Path,
    base: u64,
}

impl<'a> Reader<'a> {
    fn next_line(&mut self) -> Option<&'a [u8]> {
        let rest = self.text.get(self.pos..).filter(|r| !r.is_empty())?;
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        self.pos += end + 1;
        self.line_no += 1;
        let line = &rest[..end];
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    }

    fn invalid(&self, line: &[u8]) -> Error {
        Error::BadFile {
            path: self.path.to_path_buf(),
            what: format!(
                "Invalid raw profile at line {}: {}",
                self.line_no,
                String::from_utf8_lossy(line)
            ),
        }
    }

    fn line_or_eof(&mut self) -> Result<&'a [u8]> {
        self.next_line().ok_or_else(|| Error::BadFile {
            path: self.path.to_path_buf(),
            what: "Invalid raw profile!".into(),
        })
    }

    /// `count_line` holds N, then N lines `a<sep>b:count` follow; N is not trusted for allocation.
    fn read_entries(
        &mut self,
        count_line: &[u8],
        sep: &[u8],
        counters: &mut Counters,
        branches: bool,
    ) -> Result<()> {
        let n = parse_dec(trim_start(count_line)).ok_or_else(|| self.invalid(count_line))?;
        for _ in 0..n {
            let line = self.line_or_eof()?;
            let (a, b, count) =
                parse_entry(trim_start(line), sep).ok_or_else(|| self.invalid(line))?;
            let (a, b) = (Vaddr(a.wrapping_add(self.base)), Vaddr(b.wrapping_add(self.base)));
            if branches {
                counters.add_branch(a, b, count);
            } else {
                counters.add_range(a, b, count);
            }
        }
        Ok(())
    }
}

/// `a<sep>b:count`, split at the first `:` and the first `sep` as llvm does.
fn parse_entry(line: &[u8], sep: &[u8]) -> Option<(u64, u64, u64)> {
    let colon = memchr::memchr(b':', line)?;
    let count = parse_dec(&line[colon + 1..])?;
    let pair = &line[..colon];
    let at = memchr::memmem::find(pair, sep)?;
    Some((parse_hex(&pair[..at])?, parse_hex(&pair[at + sep.len()..])?, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(func: &str, line: u32, discr: u32) -> ContextFrame {
        ContextFrame { func: func.into(), loc: LineLocation::new(line, discr) }
    }

    fn written(c: &ContextCounters, base: u64) -> String {
        let mut out = Vec::new();
        write_unsymbolized(c, base, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    fn read(text: &str, base: u64, probe: bool) -> Result<ContextCounters> {
        read_unsymbolized(text.as_bytes(), Path::new("p.raw"), base, probe).map(|(c, _)| c)
    }

    /// Reference §2.4, three identical samples of a loop calling `bar`, base 0x1000.
    fn reference_counters(key_outer: ContextKey, key_inner: ContextKey) -> ContextCounters {
        let mut c = ContextCounters { context_sensitive: true, ..Default::default() };
        let outer = c.counters_mut(key_outer);
        outer.add_range(Vaddr(0x1183), Vaddr(0x11ae), 15);
        outer.add_range(Vaddr(0x11b3), Vaddr(0x11b5), 15);
        outer.add_branch(Vaddr(0x11b5), Vaddr(0x1183), 18);
        outer.add_branch(Vaddr(0x11ae), Vaddr(0x1140), 15);
        let inner = c.counters_mut(key_inner);
        inner.add_range(Vaddr(0x1140), Vaddr(0x1160), 15);
        inner.add_branch(Vaddr(0x1160), Vaddr(0x11b3), 15);
        c
    }

    #[test]
    fn reference_examples() {
        let mut lbr = ContextCounters::default();
        let c = lbr.counters_mut(ContextKey::None);
        for (s, e) in [(0x1183, 0x11ae), (0x1140, 0x1160), (0x11b3, 0x11b5)] {
            c.add_range(Vaddr(s), Vaddr(e), 15);
        }
        c.add_branch(Vaddr(0x1160), Vaddr(0x11b3), 15);
        c.add_branch(Vaddr(0x11ae), Vaddr(0x1140), 15);
        c.add_branch(Vaddr(0x11b5), Vaddr(0x1183), 18);
        let lbr_text =
            "3\n140-160:15\n183-1ae:15\n1b3-1b5:15\n3\n160->1b3:15\n1ae->140:15\n1b5->183:18\n";
        assert_eq!(written(&lbr, 0x1000), lbr_text);

        let probe = reference_counters(
            ContextKey::Addrs(vec![Vaddr(0x11d4)]),
            ContextKey::Addrs(vec![Vaddr(0x11d4), Vaddr(0x11ae)]),
        );
        let probe_text = "[0x1d4]\n  2\n  183-1ae:15\n  1b3-1b5:15\n  2\n  1ae->140:15\n  1b5->183:18\n\
                          [0x1d4 @ 0x1ae]\n  1\n  140-160:15\n  1\n  160->1b3:15\n";
        assert_eq!(written(&probe, 0x1000), probe_text);

        let lines = reference_counters(
            ContextKey::Frames(vec![frame("main", 1, 0), frame("foo", 0, 0)]),
            ContextKey::Frames(vec![frame("main", 1, 0), frame("foo", 3, 1), frame("bar", 0, 0)]),
        );
        let lines_text = "[main:1 @ foo]\n  2\n  183-1ae:15\n  1b3-1b5:15\n  2\n  1ae->140:15\n  1b5->183:18\n\
                          [main:1 @ foo:3.1 @ bar]\n  1\n  140-160:15\n  1\n  160->1b3:15\n";
        assert_eq!(written(&lines, 0x1000), lines_text);

        assert_eq!(read(lbr_text, 0x1000, false).unwrap().by_context, lbr.by_context);
        assert_eq!(read(probe_text, 0x1000, true).unwrap().by_context, probe.by_context);
        assert_eq!(read(lines_text, 0x1000, false).unwrap().by_context, lines.by_context);
    }

    #[test]
    fn external_sentinel_wraps_and_sorts_first() {
        let mut c = ContextCounters::default();
        let k = c.counters_mut(ContextKey::None);
        k.add_branch(Vaddr(0x1140), Vaddr(0x1150), 2);
        k.add_branch(Vaddr::EXTERNAL, Vaddr(0x1140), 1);
        let text = "0\n2\nfffffffffffff001->140:1\n140->150:2\n";
        assert_eq!(written(&c, 0x1000), text);
        assert_eq!(written(&c, 0), "0\n2\n1->1140:1\n1140->1150:2\n");
        let back = read(text, 0x1000, false).unwrap();
        assert!(!back.context_sensitive);
        assert_eq!(back.by_context, c.by_context);
    }

    #[test]
    fn empty_profiles() {
        assert_eq!(written(&ContextCounters::default(), 0x1000), "0\n0\n");
        let mut cs = ContextCounters { context_sensitive: true, ..Default::default() };
        cs.counters_mut(ContextKey::Frames(vec![frame("main", 0, 0)]));
        assert_eq!(written(&cs, 0x1000), "");
        let back = read("", 0, false).unwrap();
        assert!(back.by_context.is_empty() && !back.context_sensitive);
    }

    #[test]
    fn empty_context_and_duplicate_headers() {
        let mut c = ContextCounters { context_sensitive: true, ..Default::default() };
        c.counters_mut(ContextKey::None).add_branch(Vaddr::EXTERNAL, Vaddr(0x1790), 4);
        c.counters_mut(ContextKey::Frames(vec![])).add_branch(Vaddr::EXTERNAL, Vaddr(0x1790), 1);
        c.counters_mut(ContextKey::Frames(vec![frame("main", 0, 0)])).add_range(
            Vaddr(0x1790),
            Vaddr(0x1799),
            4,
        );
        let text = written(&c, 0x1000);
        assert_eq!(
            text,
            "[]\n  0\n  1\n  fffffffffffff001->790:5\n[main]\n  1\n  790-799:4\n  0\n"
        );
        let back = read(&text, 0x1000, false).unwrap();
        assert!(back.context_sensitive);
        assert_eq!(
            back.by_context[&ContextKey::Frames(vec![])].branches
                [&(Vaddr::EXTERNAL, Vaddr(0x1790))],
            5
        );
    }

    #[test]
    fn frame_names_with_colons_round_trip() {
        let mut c = ContextCounters { context_sensitive: true, ..Default::default() };
        let key = ContextKey::Frames(vec![frame("ns::f", 7, 2), frame("a:b", 0, 0)]);
        c.counters_mut(key.clone()).add_range(Vaddr(0x10), Vaddr(0x20), u64::MAX);
        let text = written(&c, 0);
        assert_eq!(text, "[ns::f:7.2 @ a:b]\n  1\n  10-20:18446744073709551615\n  0\n");
        let back = read(&text, 0, false).unwrap();
        assert_eq!(back.by_context, c.by_context);
    }

    #[test]
    fn counts_saturate_and_crlf_is_accepted() {
        let text = "2\r\n10-20:18446744073709551615\r\n10-20:5\r\n0\r\n\r\n";
        let back = read(text, 0, false).unwrap();
        assert_eq!(
            back.by_context[&ContextKey::None].ranges[&(Vaddr(0x10), Vaddr(0x20))],
            u64::MAX
        );
    }

    #[test]
    fn errors_name_file_and_line() {
        let err = |text: &str, probe| read(text, 0x1000, probe).unwrap_err().to_string();
        assert_eq!(err("1\n140-160\n0\n", false), "p.raw: Invalid raw profile at line 2: 140-160");
        assert_eq!(
            err("1\n140_160:1\n0\n", false),
            "p.raw: Invalid raw profile at line 2: 140_160:1"
        );
        assert_eq!(
            err("1\n140-160:x\n0\n", false),
            "p.raw: Invalid raw profile at line 2: 140-160:x"
        );
        assert_eq!(
            err("0\n1\n140-160:1\n", false),
            "p.raw: Invalid raw profile at line 3: 140-160:1"
        );
        assert_eq!(err("x\n", false), "p.raw: Invalid raw profile at line 1: x");
        assert_eq!(err("[main\n0\n0\n", false), "p.raw: Invalid raw profile at line 1: [main");
        assert_eq!(
            err("[main:1 @ bar]\n0\n0\n", true),
            "p.raw: Invalid raw profile at line 1: [main:1 @ bar]"
        );
        // The entry count is not trusted: a huge one just runs into the end of the file.
        assert_eq!(err("99999999999999999\n1-2:3\n", false), "p.raw: Invalid raw profile!");
        assert_eq!(err("[0x10]\n  1\n", true), "p.raw: Invalid raw profile!");
        assert_eq!(err("1\n10-20:1\n", false), "p.raw: Invalid raw profile!");
    }

    /// Deterministic mutations of a valid profile never panic.
    #[test]
    fn junk_never_panics() {
        let seed =
            b"[main:1 @ foo:3.1 @ bar]\n  1\n  140-160:15\n  1\n  160->1b3:15\n[0x1d4 @ 0x1ae]\n  0\n  0\n";
        let mut state = 0x2545f4914f6cdd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet = b" \n\r-:>@[].0x9f";
        for _ in 0..3000 {
            let mut text = seed.to_vec();
            for _ in 0..(next() % 5) {
                let at = (next() % text.len() as u64) as usize;
                match next() % 3 {
                    0 => text[at] = alphabet[(next() % alphabet.len() as u64) as usize],
                    1 => text.truncate(at.max(1)),
                    _ => text.insert(at, alphabet[(next() % alphabet.len() as u64) as usize]),
                }
            }
            for probe in [false, true] {
                if let Ok((c, _)) = read_unsymbolized(&text, Path::new("j"), 0x1000, probe) {
                    let mut out = Vec::new();
                    write_unsymbolized(&c, 0x1000, &mut out).unwrap();
                }
            }
        }
    }

    #[test]
    fn offset_base_choice() {
        assert_eq!(offset_base(true, false, Vaddr(0x1000), Vaddr(0x400000)), 0x1000);
        assert_eq!(offset_base(true, true, Vaddr(0x1000), Vaddr(0x400000)), 0x400000);
        assert_eq!(offset_base(false, true, Vaddr(0x1000), Vaddr(0x400000)), 0);
    }
}
