//! `perf script` text reader, accepting what llvm-profgen-19 accepts with `--perfscript`.
//!
//! In: the text of `perf script --show-mmap-events -F [event,]ip,brstack` (the whole file as
//! bytes). Out: a stream of [`PerfEvent::Mmap`] and [`PerfEvent::Sample`] plus a
//! [`ScriptReport`] with the sniffed [`ScriptKind`], counts and warnings worded like llvm-profgen's.
//!
//! The grammar follows LLVM 19's `PerfReader.cpp` (reference §2.2): the same type sniffing, mmap
//! line shapes, aggregated-count lines, `event:` fields, LBR token rules, hybrid frame blocks and
//! warning texts with 1-based line numbers. The reader only parses: it emits raw runtime
//! addresses and leaves address canonicalization, the external-address sentinel and llvm's
//! binary-dependent filters (both-ends-external LBR entries, invalid return addresses,
//! prolog/epilog leaves, empty LBR stacks) to the mapping and aggregation stages.
//!
//! Deliberate differences from llvm-profgen-19, all on inputs it mishandles:
//! - CRLF line ends are accepted everywhere (llvm drops CRLF hybrid samples and keeps `\r` in
//!   mmap paths).
//! - Hybrid frame lines may carry perf's symbol text (`\t  4005dc main+0x1c (/bin/app)`); llvm
//!   drops such samples and, because its sniffing then finds no frames, misreads the whole file
//!   as LBR-only.
//! - In hybrid scripts an `event:` line before the frames (what `perf script -F event,ip,brstack`
//!   prints for call-chain samples) names the sample's event, so `--perf-event` filtering works;
//!   llvm never sees it and warns on every sample.
//! - With `--leading-ip-only`, scripts without any brstack (`perf script -F ip`) are read as
//!   [`ScriptKind::IpOnly`] instead of failing with `Invalid perf script input!`; tab-indented
//!   call-chain blocks there form one sample whose IP is the first frame.
//! - Blank lines never produce warnings.
//!
//! Kept as in llvm: a brstack line with a single entry and no leading IP (the hybrid form) is not
//! recognised by the sniffer (the 1-entry LBR quirk), so a hybrid script whose brstack lines all
//! have one entry is rejected; once the kind is known, one-entry lines parse normally. Being
//! "better" here would change which kind other scripts sniff as.
//!
//! Event contract: sample lines carry no pid in this format, so [`Sample::pid`] is `None`;
//! scripts carry no period, so [`Sample::period`] is 1; [`Sample::ip`] is the leading IP (0 when a
//! line has none) or the leaf frame; samples are emitted even when their LBR stack is empty (llvm
//! drops those, after discarding both-ends-external entries).

use std::path::Path;

use hashbrown::HashMap;
use memchr::memmem;

use super::{BranchStack, CallChain, MmapEvent, PerfEvent, RawBranch, RawWord, Sample};
use crate::addr::{Branch, FileOffset, RuntimeAddr};
use crate::error::{Error, Result};
use crate::text::{parse_dec, parse_hex, trim, trim_end, trim_start};

/// What the script holds, decided before parsing (llvm's `checkPerfScriptType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScriptKind {
    /// One line per sample: `[event:] [ip] from/to/... from/to/...` (llvm `PerfContent::LBR`).
    Lbr,
    /// Call-stack frame lines, leaf first, then a brstack line starting with ` 0x`
    /// (llvm `PerfContent::LBRStack`, "hybrid").
    LbrStack,
    /// No brstack anywhere: sample IPs (and call chains) only. Only with `leading_ip_only`.
    IpOnly,
}

/// The perf-script parts of llvm-profgen's options (§1.3).
#[derive(Clone, Debug, Default)]
pub struct ScriptOptions {
    /// `--perf-event` / `--perf-events`: keep only samples whose `event:` field is one of these.
    pub perf_events: Vec<String>,
    /// `--leading-ip-only`: LBR entries are not parsed when a sample IP is present, and scripts
    /// without brstack are accepted.
    pub leading_ip_only: bool,
    /// Upstream llvm-profgen's `[buildid:]0xADDR` addresses: an address whose build-id prefix is
    /// not this one (hex, any case) is outside the binary; `None` when the binary has no filter
    /// build id (an executable without `--filter-build-id`). Unprefixed addresses are kept.
    pub filter_build_id: Option<String>,
}

/// The address perf script addresses outside the binary (another DSO's build id) become: never
/// in a mapping of the binary.
const OTHER_DSO: u64 = 0;

/// Warnings kept verbatim in [`ScriptReport::warnings`]; the rest are only counted.
pub const MAX_WARNINGS: usize = 1000;

/// Counts and diagnostics of one read.
#[derive(Clone, Debug)]
pub struct ScriptReport {
    pub kind: ScriptKind,
    pub lines: u64,
    pub mmaps: u64,
    /// [`PerfEvent::Sample`]s emitted (each stands for `repeat` samples).
    pub samples: u64,
    /// LBR entries in the emitted samples.
    pub branches: u64,
    /// Sample records dropped by the grammar: bad leading IP, `--perf-event` mismatch, hybrid
    /// frame blocks broken by a non-frame line or without frames.
    pub dropped_samples: u64,
    /// Event names seen in `event:` fields; [`Sample::attr_index`] indexes this (0 without one).
    pub event_names: Vec<String>,
    /// Warning messages without the `warning: ` prefix, in input order.
    pub warnings: Vec<String>,
    /// Warnings beyond [`MAX_WARNINGS`].
    pub warnings_omitted: u64,
}

impl ScriptReport {
    /// The warnings to show: the reader's own, then how many more were omitted.
    pub fn into_warnings(self) -> Vec<String> {
        let mut warnings = self.warnings;
        if self.warnings_omitted > 0 {
            warnings.push(format!("{} more perf script warnings omitted", self.warnings_omitted));
        }
        warnings
    }
}

/// Reads a whole perf script, calling `on_event` for every mmap line and sample.
///
/// Errors (naming `path`): `Invalid perf script input!` when no line identifies the kind, and
/// `'Hybrid perf sample is corrupted, No LBR sample line` when the file ends inside a frame block.
pub fn read_perf_script(
    text: &[u8],
    path: &Path,
    opts: &ScriptOptions,
    mut on_event: impl FnMut(PerfEvent<'_>),
) -> Result<ScriptReport> {
    let kind = sniff_kind(text, opts.leading_ip_only).ok_or_else(|| Error::BadFile {
        path: path.to_path_buf(),
        what: "Invalid perf script input!".into(),
    })?;
    let mut parser = Parser {
        opts,
        report: ScriptReport {
            kind,
            lines: 0,
            mmaps: 0,
            samples: 0,
            branches: 0,
            dropped_samples: 0,
            event_names: Vec::new(),
            warnings: Vec::new(),
            warnings_omitted: 0,
        },
        frames: Vec::new(),
        branches: Vec::new(),
        pending_event: None,
        event_indexes: HashMap::new(),
    };
    let mut lines = Lines::new(text);
    while let Some(line) = lines.cur {
        if is_mmap_line(line) {
            parser.mmap(line, &mut on_event);
            lines.advance();
            continue;
        }
        // An optional aggregated count precedes a sample.
        let mut repeat = 1;
        if let Some(n) = parse_dec(line) {
            repeat = n;
            lines.advance();
        }
        match kind {
            ScriptKind::Lbr => parser.lbr_sample(&mut lines, repeat, &mut on_event),
            ScriptKind::LbrStack => {
                parser.hybrid_sample(&mut lines, repeat, path, &mut on_event)?
            }
            ScriptKind::IpOnly => parser.ip_only_sample(&mut lines, repeat, &mut on_event),
        }
    }
    parser.report.lines = lines.line_no;
    Ok(parser.report)
}

/// llvm's `checkPerfScriptType`: skip an aggregated count, count the frame lines that follow; the
/// first brstack line decides LBR + stack (frames before it) or LBR-only.
fn sniff_kind(text: &[u8], leading_ip_only: bool) -> Option<ScriptKind> {
    let mut lines = Lines::new(text);
    let mut saw_ip = false;
    while let Some(line) = lines.cur {
        if parse_dec(line).is_some() {
            lines.advance();
        }
        let mut frames = 0u64;
        while let Some(line) = lines.cur {
            if parse_frame(line).is_none() {
                break;
            }
            frames += 1;
            lines.advance();
        }
        saw_ip |= frames > 0;
        if let Some(line) = lines.cur {
            if is_lbr_line(line) {
                return Some(if frames > 0 { ScriptKind::LbrStack } else { ScriptKind::Lbr });
            }
            saw_ip |= is_event_ip_line(line);
            lines.advance();
        }
    }
    (leading_ip_only && saw_ip).then_some(ScriptKind::IpOnly)
}

/// What a `[event:] [ip] lbr...` line held.
enum LineSample {
    /// A sample: the leading IP if present and the event index; entries are in `Parser::branches`.
    Sample { ip: Option<u64>, event: Option<usize> },
    /// Dropped (invalid leading IP or filtered event).
    Dropped,
    /// No sample on this line (blank, or only an event name).
    Nothing,
}

struct Parser<'o> {
    opts: &'o ScriptOptions,
    report: ScriptReport,
    /// Reused per sample, so parsing allocates nothing per sample.
    frames: Vec<RawWord>,
    /// With each entry's cycle count in its flags.
    branches: Vec<RawBranch>,
    /// Event named by an `event:` line that precedes a frame block.
    pending_event: Option<usize>,
    /// Each name of [`ScriptReport::event_names`] to its index: a script may name an event per
    /// line, and a scan of the names per line took quadratic time (160,000 names: over a minute).
    event_indexes: HashMap<Box<[u8]>, usize>,
}

impl Parser<'_> {
    fn warn(&mut self, msg: String) {
        if self.report.warnings.len() < MAX_WARNINGS {
            self.report.warnings.push(msg);
        } else {
            self.report.warnings_omitted += 1;
        }
    }

    fn event_index(&mut self, name: &[u8]) -> usize {
        if let Some(&i) = self.event_indexes.get(name) {
            return i;
        }
        let names = &mut self.report.event_names;
        names.push(String::from_utf8_lossy(name).into_owned());
        self.event_indexes.insert(name.into(), names.len() - 1);
        names.len() - 1
    }

    fn warn_unfiltered_event(&mut self, line_no: u64, line: &[u8]) {
        self.warn(format!(
            "No --perf-event filter was specified, but an \"event\" field was found in line {line_no}: {}",
            String::from_utf8_lossy(line)
        ));
    }

    /// An `event:` line before a frame block: the event of the next sample.
    fn set_pending_event(&mut self, name: &[u8], line_no: u64, line: &[u8]) {
        self.pending_event = Some(self.event_index(name));
        if self.opts.perf_events.is_empty() {
            self.warn_unfiltered_event(line_no, line);
        }
    }

    /// llvm's `--perf-event` handling, with its warnings; false = drop the sample. An event from
    /// an earlier `event:` line (`on_line` false) was warned about there.
    fn event_allowed(
        &mut self,
        event: Option<usize>,
        on_line: bool,
        line_no: u64,
        line: &[u8],
    ) -> bool {
        let filter = &self.opts.perf_events;
        match event {
            Some(_) if filter.is_empty() => {
                if on_line {
                    self.warn_unfiltered_event(line_no, line);
                }
                true
            }
            Some(i) => filter.iter().any(|f| *f == self.report.event_names[i]),
            None if !filter.is_empty() => {
                self.warn(format!(
                    "A --perf-event filter was specified, but no \"event\" field found in line {line_no}: {}",
                    String::from_utf8_lossy(line)
                ));
                true
            }
            None => true,
        }
    }

    fn mmap(&mut self, line: &[u8], on_event: &mut impl FnMut(PerfEvent<'_>)) {
        match parse_mmap(line) {
            Some(ev) => {
                self.report.mmaps += 1;
                on_event(PerfEvent::Mmap(ev));
            }
            None => {
                self.warn(format!("Cannot parse mmap event: {} ", String::from_utf8_lossy(line)))
            }
        }
    }

    /// llvm's `extractLBRStack` for one line: `[event:] [ip] from/to/... ...`, tokens split on
    /// spaces. `outer_event` is an event named on an earlier line (hybrid and IP-only blocks).
    fn parse_line(&mut self, line: &[u8], line_no: u64, outer_event: Option<usize>) -> LineSample {
        self.branches.clear();
        let mut tokens = trim_end(line).split(|&b| b == b' ').filter(|t| !t.is_empty()).peekable();
        if tokens.peek().is_none() {
            return LineSample::Nothing;
        }
        let mut event = outer_event;
        let event_token = tokens.next_if(|t| t.ends_with(b":"));
        if let Some(tok) = event_token {
            let name = trim_start(tok);
            let name = &name[..name.iter().rposition(|&b| b != b':').map_or(0, |i| i + 1)];
            event = Some(self.event_index(name));
        }
        if !self.event_allowed(event, event_token.is_some(), line_no, line) {
            return LineSample::Dropped;
        }
        let mut ip = None;
        if let Some(tok) = tokens.next_if(|t| !t.contains(&b'/')) {
            let (id, addr) = split_build_id(tok);
            let addr = if id.is_some() { addr.strip_prefix(b"0x").unwrap_or(addr) } else { addr };
            match parse_hex(addr) {
                Some(v) => ip = Some(self.own(id, v)),
                None => {
                    self.warn_invalid_lbr(line_no, line);
                    return LineSample::Dropped;
                }
            }
        }
        if self.opts.leading_ip_only && (ip.is_some() || event.is_some()) {
            // llvm ignores the LBR entries of a line that has a sample IP in this mode.
            return LineSample::Sample { ip, event };
        }
        for tok in tokens {
            match parse_lbr_entry(tok) {
                Some(((from_id, from), (to_id, to))) => {
                    let b = Branch {
                        source: RuntimeAddr(self.own(from_id, from)),
                        target: RuntimeAddr(self.own(to_id, to)),
                    };
                    self.branches.push(BranchStack::entry(b, lbr_entry_cycles(tok)));
                }
                None => {
                    // llvm keeps the entries before a broken one.
                    self.warn_invalid_lbr(line_no, line);
                    break;
                }
            }
        }
        if ip.is_none() && self.branches.is_empty() {
            return LineSample::Nothing;
        }
        LineSample::Sample { ip, event }
    }

    /// `addr` as read, or [`OTHER_DSO`] when its build-id prefix names another binary.
    fn own(&self, id: Option<&[u8]>, addr: u64) -> u64 {
        match id {
            Some(id)
                if !self
                    .opts
                    .filter_build_id
                    .as_deref()
                    .is_some_and(|f| f.as_bytes().eq_ignore_ascii_case(id)) =>
            {
                OTHER_DSO
            }
            _ => addr,
        }
    }

    fn warn_invalid_lbr(&mut self, line_no: u64, line: &[u8]) {
        self.warn(format!(
            "Invalid address in LBR record at line {line_no}: {}",
            String::from_utf8_lossy(line)
        ));
    }

    fn emit(
        &mut self,
        ip: u64,
        repeat: u64,
        event: Option<usize>,
        has_callchain: bool,
        on_event: &mut impl FnMut(PerfEvent<'_>),
    ) {
        self.report.samples += 1;
        self.report.branches += self.branches.len() as u64;
        on_event(PerfEvent::Sample(Sample {
            pid: None,
            tid: None,
            time: None,
            attr_index: event.unwrap_or(0),
            ip: RuntimeAddr(ip),
            period: 1,
            repeat,
            callchain: CallChain(&self.frames),
            branches: BranchStack(&self.branches),
            has_callchain,
            record: None,
        }));
    }

    /// LBR-only: one line per sample. A line without a leading IP gets IP 0.
    fn lbr_sample(
        &mut self,
        lines: &mut Lines<'_>,
        repeat: u64,
        on_event: &mut impl FnMut(PerfEvent<'_>),
    ) {
        let Some(line) = lines.cur else { return };
        self.frames.clear();
        match self.parse_line(line, lines.line_no, None) {
            LineSample::Sample { ip, event } => {
                self.emit(ip.unwrap_or(0), repeat, event, false, on_event)
            }
            LineSample::Dropped => self.report.dropped_samples += 1,
            LineSample::Nothing => {}
        }
        lines.advance();
    }

    /// LBR + call stack (llvm's `HybridPerfReader::parseSample`): frame lines, leaf first, until a
    /// line starting with ` 0x`, which is the brstack line.
    fn hybrid_sample(
        &mut self,
        lines: &mut Lines<'_>,
        repeat: u64,
        path: &Path,
        on_event: &mut impl FnMut(PerfEvent<'_>),
    ) -> Result<()> {
        self.frames.clear();
        let first_line = lines.line_no;
        while let Some(line) = lines.cur {
            if is_brstack_line(line) {
                break;
            }
            if let Some((id, addr)) = parse_frame_with_id(line) {
                self.frames.push(CallChain::word(RuntimeAddr(self.own(id, addr))));
                lines.advance();
                continue;
            }
            // A non-frame line ends the block: before any frame it is a separator or an event
            // line; after frames llvm drops the sample. Either way a brstack line right after it
            // belongs to no usable sample.
            if self.frames.is_empty() {
                if let Some(name) = event_only(line) {
                    self.set_pending_event(name, lines.line_no, line);
                }
            } else {
                self.report.dropped_samples += 1;
                self.pending_event = None;
            }
            lines.advance();
            if lines.cur.is_some_and(is_brstack_line) {
                self.report.dropped_samples += u64::from(self.frames.is_empty());
                self.pending_event = None;
                lines.advance();
            }
            return Ok(());
        }
        let outer_event = self.pending_event.take();
        let Some(line) = lines.cur else {
            if self.frames.is_empty() {
                return Ok(());
            }
            return Err(Error::BadLine {
                path: path.to_path_buf(),
                line: first_line,
                what: "'Hybrid perf sample is corrupted, No LBR sample line".into(),
            });
        };
        if self.frames.is_empty() {
            // A brstack line without frames: llvm's empty call stack drops the sample.
            self.report.dropped_samples += 1;
            lines.advance();
            return Ok(());
        }
        match self.parse_line(line, lines.line_no, outer_event) {
            LineSample::Sample { event, .. } => {
                let ip = u64::from_le_bytes(self.frames[0]);
                self.emit(ip, repeat, event, true, on_event);
            }
            LineSample::Nothing => {
                self.emit(u64::from_le_bytes(self.frames[0]), repeat, outer_event, true, on_event)
            }
            LineSample::Dropped => self.report.dropped_samples += 1,
        }
        lines.advance();
        Ok(())
    }

    /// IP-only scripts: `[event:] ip` lines, or tab-indented call-chain blocks (IP = first frame).
    fn ip_only_sample(
        &mut self,
        lines: &mut Lines<'_>,
        repeat: u64,
        on_event: &mut impl FnMut(PerfEvent<'_>),
    ) {
        let Some(line) = lines.cur else { return };
        self.frames.clear();
        self.branches.clear();
        let first_line = lines.line_no;
        if line.starts_with(b"\t") && parse_frame(line).is_some() {
            while let Some((id, addr)) =
                lines.cur.filter(|l| l.starts_with(b"\t")).and_then(parse_frame_with_id)
            {
                self.frames.push(CallChain::word(RuntimeAddr(self.own(id, addr))));
                lines.advance();
            }
            let event = self.pending_event.take();
            if self.event_allowed(event, false, first_line, line) {
                self.emit(u64::from_le_bytes(self.frames[0]), repeat, event, true, on_event);
            } else {
                self.report.dropped_samples += 1;
            }
            return;
        }
        if let Some(name) = event_only(line) {
            self.set_pending_event(name, lines.line_no, line);
            lines.advance();
            return;
        }
        self.pending_event = None;
        match self.parse_line(line, lines.line_no, None) {
            // `leading_ip_only` holds in this mode, so a line with an IP has no entries parsed.
            LineSample::Sample { ip: Some(ip), event } => {
                self.emit(ip, repeat, event, false, on_event)
            }
            // Stray brstack lines (e.g. a hybrid script whose one-entry LBR lines did not sniff).
            LineSample::Sample { ip: None, .. } | LineSample::Nothing => {}
            LineSample::Dropped => self.report.dropped_samples += 1,
        }
        lines.advance();
    }
}

/// Line cursor with llvm's `TraceStream` semantics: 1-based line numbers, no empty line after a
/// final `\n`. A trailing `\r` is removed.
struct Lines<'a> {
    text: &'a [u8],
    pos: usize,
    line_no: u64,
    cur: Option<&'a [u8]>,
}

impl<'a> Lines<'a> {
    fn new(text: &'a [u8]) -> Self {
        let mut lines = Lines { text, pos: 0, line_no: 0, cur: None };
        lines.advance();
        lines
    }

    fn advance(&mut self) {
        let Some(rest) = self.text.get(self.pos..).filter(|r| !r.is_empty()) else {
            self.cur = None;
            return;
        };
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        self.pos += end + 1;
        self.line_no += 1;
        let line = &rest[..end];
        self.cur = Some(line.strip_suffix(b"\r").unwrap_or(line));
    }
}

/// llvm's `isMMapEvent`: at least 50 bytes, not starting with a digit, containing
/// `PERF_RECORD_MMAP`.
fn is_mmap_line(line: &[u8]) -> bool {
    line.len() >= 50
        && !line[0].is_ascii_digit()
        && memmem::find(line, b"PERF_RECORD_MMAP").is_some()
}

/// llvm's `isLBRSample`: after trimming and splitting on spaces into at most 3 pieces (skipping
/// an `event:` piece), piece #2 starts with `0x` and contains `/`.
fn is_lbr_line(line: &[u8]) -> bool {
    let (mut pieces, mut n) = split3(trim(line));
    if n < 2 {
        return false;
    }
    // An event piece has a `:`; so has a build-id prefixed address (`buildid:ADDR...`).
    if pieces[0].contains(&b':') && !is_prefixed_address(pieces[0]) {
        (pieces, n) = split3(trim_start(pieces[1]));
        if n < 2 {
            return false;
        }
    }
    split_build_id(pieces[1]).1.starts_with(b"0x") && pieces[1].contains(&b'/')
}

/// The brstack line of an LBR + call-stack sample: llvm-profgen-19's ` 0x` start, or upstream's
/// build-id prefixed first entry (` buildid:0x.../`).
fn is_brstack_line(line: &[u8]) -> bool {
    if line.starts_with(b" 0x") {
        return true;
    }
    let Some(first) = line.strip_prefix(b" ").map(trim_start) else { return false };
    let first = &first[..first.iter().position(|&b| b == b' ').unwrap_or(first.len())];
    let (id, rest) = split_build_id(first);
    id.is_some() && rest.starts_with(b"0x") && first.contains(&b'/')
}

/// Whether `tok` starts with a build-id prefixed address: hex digits, `:`, an optional `0x` and
/// hex digits up to the end or a `/` (event names, `cycles:` or `cpu/event=0x3c/u:`, never do).
fn is_prefixed_address(tok: &[u8]) -> bool {
    let (Some(id), rest) = split_build_id(tok) else { return false };
    let rest = rest.strip_prefix(b"0x").unwrap_or(rest);
    let addr = &rest[..rest.iter().position(|&b| b == b'/').unwrap_or(rest.len())];
    !id.is_empty() && id.iter().all(u8::is_ascii_hexdigit) && parse_hex(addr).is_some()
}

/// Upstream llvm-profgen's `[buildid:]ADDR`: the build id before a `:`, if any, and the rest.
fn split_build_id(tok: &[u8]) -> (Option<&[u8]>, &[u8]) {
    match memchr::memchr(b':', tok) {
        Some(i) => (Some(&tok[..i]), &tok[i + 1..]),
        None => (None, tok),
    }
}

/// `[event:] ip` with nothing else: an IP-only sample line.
fn is_event_ip_line(line: &[u8]) -> bool {
    let mut tokens = trim(line).split(|&b| b == b' ').filter(|t| !t.is_empty());
    let mut tok = tokens.next();
    if tok.is_some_and(|t| t.ends_with(b":")) {
        tok = tokens.next();
    }
    tok.and_then(parse_hex).is_some() && tokens.next().is_none()
}

/// A line holding only `name:` (perf's event field before a call chain); returns the name.
fn event_only(line: &[u8]) -> Option<&[u8]> {
    let t = trim(line);
    let name = t.strip_suffix(b":")?;
    (!name.is_empty() && !name.iter().any(|b| b.is_ascii_whitespace())).then_some(name)
}

/// StringRef::split(" ", MaxSplit = 2, KeepEmpty = false): empty pieces are dropped but still use
/// up a split.
fn split3(mut s: &[u8]) -> ([&[u8]; 3], usize) {
    let mut pieces: [&[u8]; 3] = [&[]; 3];
    let mut n = 0;
    for _ in 0..2 {
        let Some(i) = memchr::memchr(b' ', s) else { break };
        if i > 0 {
            pieces[n] = &s[..i];
            n += 1;
        }
        s = &s[i + 1..];
    }
    if !s.is_empty() {
        pieces[n] = s;
        n += 1;
    }
    (pieces, n)
}

/// A call-stack frame line: a hex address, optionally followed (on an indented line) by perf's
/// symbol text. A line that continues with LBR entries is a sample line, not a frame.
fn parse_frame(line: &[u8]) -> Option<u64> {
    parse_frame_with_id(line).map(|(_, addr)| addr)
}

/// [`parse_frame`], with the frame's build-id prefix (`buildid:ADDR`, `buildid:0xADDR`).
fn parse_frame_with_id(line: &[u8]) -> Option<(Option<&[u8]>, u64)> {
    let t = trim(line);
    let split = t.iter().position(|&b| b == b' ' || b == b'\t').unwrap_or(t.len());
    let (id, addr) = split_build_id(&t[..split]);
    let addr = if id.is_some() { addr.strip_prefix(b"0x").unwrap_or(addr) } else { addr };
    let addr = parse_hex(addr)?;
    let rest = trim_start(&t[split..]);
    if rest.is_empty() {
        return Some((id, addr));
    }
    let indented = line.first().is_some_and(|&b| b == b' ' || b == b'\t');
    let lbr_follows = split_build_id(rest).1.starts_with(b"0x") && rest.contains(&b'/');
    (indented && !lbr_follows).then_some((id, addr))
}

/// An address as perf script text gives it, with its build-id prefix if any.
type PrefixedAddr<'a> = (Option<&'a [u8]>, u64);

/// `[buildid:]0xfrom/[buildid:]0xto/flags...` → (from, to); as in llvm the first two characters
/// of an unprefixed address are not checked.
fn parse_lbr_entry(tok: &[u8]) -> Option<(PrefixedAddr<'_>, PrefixedAddr<'_>)> {
    let mut fields = tok.split(|&b| b == b'/');
    let from = fields.next().and_then(lbr_address)?;
    let to = fields.next().and_then(lbr_address)?;
    Some((from, to))
}

/// The cycle count of an LBR entry (`FROM/TO/M/X/A/CYCLES[/TYPE]`), 0 when it has none.
fn lbr_entry_cycles(tok: &[u8]) -> u64 {
    let field = tok.split(|&b| b == b'/').nth(5).unwrap_or_default();
    std::str::from_utf8(field).ok().and_then(|s| s.parse().ok()).unwrap_or(0)
}

/// One address of an LBR entry, with its build-id prefix.
fn lbr_address(f: &[u8]) -> Option<PrefixedAddr<'_>> {
    match split_build_id(f) {
        (Some(id), a) => Some((Some(id), parse_hex(a.strip_prefix(b"0x").unwrap_or(a))?)),
        (None, a) => Some((None, parse_hex(a.get(2..)?)?)),
    }
}

/// `PERF_RECORD_MMAP2 <pid>/<tid>: [<0xaddr>(<0xlen>) @ <0xpgoff|0> <anything>]: <perm> <path>`
/// or `PERF_RECORD_MMAP <pid>/<tid>: [<0xaddr>(<0xlen>) @ <0xpgoff|0>]: <perm> <path>`, found
/// anywhere in the line; hex digits lowercase as llvm's patterns demand.
fn parse_mmap(line: &[u8]) -> Option<MmapEvent<'static>> {
    let (mmap2, rest) = if let Some(i) = memmem::find(line, b"PERF_RECORD_MMAP2 ") {
        (true, &line[i + 18..])
    } else {
        let i = memmem::find(line, b"PERF_RECORD_MMAP ")?;
        (false, &line[i + 17..])
    };
    let (pid, rest) = take_signed_dec(rest)?;
    let rest = rest.strip_prefix(b"/")?;
    let (tid, rest) = take_while(rest, |b| b.is_ascii_digit());
    let tid = i32::try_from(parse_dec(tid)?).ok()?;
    let rest = rest.strip_prefix(b": [")?;
    let (start, rest) = take_lower_hex(rest)?;
    let rest = rest.strip_prefix(b"(")?;
    let (len, rest) = take_lower_hex(rest)?;
    let rest = rest.strip_prefix(b") @ ")?;
    let (pgoff, rest) = match take_lower_hex(rest) {
        Some(v) => v,
        None => (0, rest.strip_prefix(b"0")?),
    };
    let (perm, path) = if mmap2 {
        // `<pgoff> <dev inode generation...>]: perm path`; llvm's greedy `.*` takes the last
        // `]: perm ` that fits.
        let rest = rest.strip_prefix(b" ")?;
        memmem::rfind_iter(rest, b"]: ").find_map(|i| perm_and_path(&rest[i + 3..]))?
    } else {
        perm_and_path(rest.strip_prefix(b"]: ")?)?
    };
    Some(MmapEvent {
        pid: Some(pid),
        tid: Some(tid),
        start: RuntimeAddr(start),
        len,
        pgoff: FileOffset(pgoff),
        executable: perm.contains(&b'x'),
        path: String::from_utf8_lossy(path).into_owned().into(),
        build_id: None,
        record: None,
    })
}

/// `[-a-z]+ (.*)`
fn perm_and_path(s: &[u8]) -> Option<(&[u8], &[u8])> {
    let (perm, rest) = take_while(s, |b| b == b'-' || b.is_ascii_lowercase());
    if perm.is_empty() {
        return None;
    }
    Some((perm, rest.strip_prefix(b" ")?))
}

fn take_while(s: &[u8], pred: impl Fn(u8) -> bool) -> (&[u8], &[u8]) {
    let n = s.iter().position(|&b| !pred(b)).unwrap_or(s.len());
    s.split_at(n)
}

/// `-?[0-9]+` as an i32.
fn take_signed_dec(s: &[u8]) -> Option<(i32, &[u8])> {
    let (neg, body) = match s.strip_prefix(b"-") {
        Some(b) => (true, b),
        None => (false, s),
    };
    let (digits, rest) = take_while(body, |b| b.is_ascii_digit());
    let v = i64::try_from(parse_dec(digits)?).ok()?;
    let v = i32::try_from(if neg { -v } else { v }).ok()?;
    Some((v, rest))
}

/// `0x[a-f0-9]+`
fn take_lower_hex(s: &[u8]) -> Option<(u64, &[u8])> {
    let body = s.strip_prefix(b"0x")?;
    let (digits, rest) = take_while(body, |b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    Some((parse_hex(digits)?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Owned copy of an event, for assertions.
    #[derive(Debug, PartialEq, Eq)]
    enum Ev {
        Mmap(MmapEvent<'static>),
        Sample {
            ip: u64,
            repeat: u64,
            event: usize,
            chain: Vec<u64>,
            lbr: Vec<(u64, u64)>,
            stack: bool,
        },
    }

    fn read(text: &str, opts: &ScriptOptions) -> Result<(Vec<Ev>, ScriptReport)> {
        let mut evs = Vec::new();
        let report = read_perf_script(text.as_bytes(), Path::new("t.script"), opts, |ev| {
            evs.push(match ev {
                PerfEvent::Mmap(m) => Ev::Mmap(m.into_owned()),
                PerfEvent::Sample(s) => Ev::Sample {
                    ip: s.ip.0,
                    repeat: s.repeat,
                    event: s.attr_index,
                    chain: s.callchain.iter().map(|a| a.0).collect(),
                    lbr: s.branches.iter().map(|b| (b.source.0, b.target.0)).collect(),
                    stack: s.has_callchain,
                },
                other => panic!("unexpected event {other:?}"),
            })
        })?;
        Ok((evs, report))
    }

    fn lbr(ip: u64, lbr: &[(u64, u64)]) -> Ev {
        Ev::Sample { ip, repeat: 1, event: 0, chain: vec![], lbr: lbr.to_vec(), stack: false }
    }

    #[test]
    fn reference_lbr_line() {
        let text = "     5629ec742901 0x5629ec7428f4/0x5629ec742901/P/-/-/19/  0x5629ec742967/0x5629ec7428d0/P/-/-/1/\n";
        let (evs, report) = read(text, &ScriptOptions::default()).unwrap();
        assert_eq!(report.kind, ScriptKind::Lbr);
        assert_eq!(
            evs,
            vec![lbr(
                0x5629ec742901,
                &[(0x5629ec7428f4, 0x5629ec742901), (0x5629ec742967, 0x5629ec7428d0)]
            )]
        );
        assert_eq!((report.samples, report.branches, report.lines), (1, 2, 1));
        assert!(report.warnings.is_empty());
    }

    #[test]
    fn reference_hybrid_sample() {
        let text = "\n\t          4005dc\n\t          400634\n\t    7f68c5788793\n 0x4005c8/0x4005dc/P/-/-/0  0x40062f/0x4005b0/P/-/-/0\n\n";
        let (evs, report) = read(text, &ScriptOptions::default()).unwrap();
        assert_eq!(report.kind, ScriptKind::LbrStack);
        assert_eq!(
            evs,
            vec![Ev::Sample {
                ip: 0x4005dc,
                repeat: 1,
                event: 0,
                chain: vec![0x4005dc, 0x400634, 0x7f68c5788793],
                lbr: vec![(0x4005c8, 0x4005dc), (0x40062f, 0x4005b0)],
                stack: true,
            }]
        );
        assert_eq!(report.dropped_samples, 0);
    }

    /// Upstream's `[buildid:]0xADDR` addresses: another build id's addresses become
    /// [`OTHER_DSO`]; the filter's own and unprefixed ones stay.
    #[test]
    fn build_id_prefixed_addresses_are_filtered() {
        let hybrid = "\n\taa11:4005dc\n\tbb22:0x400634\n\t7f68c5788793\n bb22:0x4005c8/aa11:0x4005dc/P/-/-/0  0x40062f/AA11:0x4005b0/P/-/-/0\n\n";
        let lbr_line = "aa11:4005dc aa11:0x4005c8/bb22:0x4005dc/P/-/-/0  0x40062f/0x4005b0/P\n";
        let opts = ScriptOptions { filter_build_id: Some("aa11".into()), ..Default::default() };
        let (evs, report) = read(hybrid, &opts).unwrap();
        assert_eq!(report.kind, ScriptKind::LbrStack);
        assert_eq!(
            evs,
            vec![Ev::Sample {
                ip: 0x4005dc,
                repeat: 1,
                event: 0,
                chain: vec![0x4005dc, OTHER_DSO, 0x7f68c5788793],
                lbr: vec![(OTHER_DSO, 0x4005dc), (0x40062f, 0x4005b0)],
                stack: true,
            }]
        );
        let (evs, report) = read(lbr_line, &opts).unwrap();
        assert_eq!(report.kind, ScriptKind::Lbr);
        assert_eq!(evs, vec![lbr(0x4005dc, &[(0x4005c8, OTHER_DSO), (0x40062f, 0x4005b0)])]);
        // No filter (an executable): every prefixed address is another DSO's.
        let (evs, _) = read(lbr_line, &ScriptOptions::default()).unwrap();
        assert_eq!(evs, vec![lbr(OTHER_DSO, &[(OTHER_DSO, OTHER_DSO), (0x40062f, 0x4005b0)])]);
    }

    #[test]
    fn mmap_lines() {
        let text = "PERF_RECORD_MMAP2 2113428/2113428: [0x7fd4efb57000(0x204000) @ 0 08:04 19532229 3585508847]: r-xp /usr/lib64/libdl-2.17.so\n\
                    PERF_RECORD_MMAP -1/0: [0xffffffff81000000(0x120bb08) @ 0xffffffff81000000]: x [kernel.kallsyms]_text\n\
                    prog 11524 [000] 1.5: PERF_RECORD_MMAP2 11524/11524: [0x55de1a513000(0x1000) @ 0x1000 fe:00 10010723 3744702046]: r--p /tmp/a b]: x c\r\n\
                    PERF_RECORD_MMAP2 5/5: [0x7FD4EFB57000(0x1000) @ 0 08:04 1 2]: r-xp /upper/case/hex\n\
                    \x20    40062f 0x40062f/0x400640/P/-/-/0  0x400650/0x400660/P/-/-/0\n";
        let (evs, report) = read(text, &ScriptOptions::default()).unwrap();
        let mmap = |pid, tid, start, len, pgoff, executable, path: &str| {
            Ev::Mmap(MmapEvent {
                pid: Some(pid),
                tid: Some(tid),
                start: RuntimeAddr(start),
                len,
                pgoff: FileOffset(pgoff),
                executable,
                path: path.to_string().into(),
                build_id: None,
                record: None,
            })
        };
        assert_eq!(
            evs[..3],
            [
                mmap(
                    2113428,
                    2113428,
                    0x7fd4efb57000,
                    0x204000,
                    0,
                    true,
                    "/usr/lib64/libdl-2.17.so"
                ),
                mmap(
                    -1,
                    0,
                    0xffffffff81000000,
                    0x120bb08,
                    0xffffffff81000000,
                    true,
                    "[kernel.kallsyms]_text"
                ),
                // The greedy `.*` of llvm's pattern takes the last `]: perm ` of the line.
                mmap(11524, 11524, 0x55de1a513000, 0x1000, 0x1000, true, "c"),
            ]
        );
        assert_eq!(report.mmaps, 3);
        assert_eq!(
            report.warnings,
            [
                "Cannot parse mmap event: PERF_RECORD_MMAP2 5/5: [0x7FD4EFB57000(0x1000) @ 0 08:04 1 2]: r-xp /upper/case/hex "
            ]
        );
        assert_eq!(report.samples, 1);
    }

    #[test]
    fn aggregated_counts_and_malformed_tokens() {
        let text = "3\n 40062f 0x40062f/0x400640/P/-/-/0  0x400650/0x400660/P/-/-/0\n\
                    40062g 0x1/0x2/P\n\
                    \x20 400700 0x400700/0x400710/P 0x4007zz/0x400720/P 0x400730/0x400740\n\
                    \x20 0x400800/0x400810/P nonsense\n\
                    \n";
        let (evs, report) = read(text, &ScriptOptions::default()).unwrap();
        assert_eq!(
            evs,
            vec![
                Ev::Sample {
                    ip: 0x40062f,
                    repeat: 3,
                    event: 0,
                    chain: vec![],
                    lbr: vec![(0x40062f, 0x400640), (0x400650, 0x400660)],
                    stack: false
                },
                lbr(0x400700, &[(0x400700, 0x400710)]),
                lbr(0, &[(0x400800, 0x400810)]),
            ]
        );
        assert_eq!(
            report.warnings,
            [
                "Invalid address in LBR record at line 3: 40062g 0x1/0x2/P",
                "Invalid address in LBR record at line 4:   400700 0x400700/0x400710/P 0x4007zz/0x400720/P 0x400730/0x400740",
                "Invalid address in LBR record at line 5:   0x400800/0x400810/P nonsense",
            ]
        );
        assert_eq!((report.dropped_samples, report.lines), (1, 6));
    }

    #[test]
    fn event_fields_and_filter() {
        let text = "cycles:      40062f 0x40062f/0x400640/P/-/-/0  0x400650/0x400660/P/-/-/0\n\
                    br_inst_retired.near_taken:u:      400700 0x400700/0x400710/P/-/-/0\n\
                    \x20     400800 0x400800/0x400810/P/-/-/0\n";
        let (evs, report) = read(text, &ScriptOptions::default()).unwrap();
        assert_eq!(evs.len(), 3);
        assert_eq!(report.event_names, ["cycles", "br_inst_retired.near_taken:u"]);
        assert!(matches!(evs[1], Ev::Sample { event: 1, .. }));
        assert_eq!(report.warnings.len(), 2);
        assert_eq!(
            report.warnings[0],
            "No --perf-event filter was specified, but an \"event\" field was found in line 1: \
             cycles:      40062f 0x40062f/0x400640/P/-/-/0  0x400650/0x400660/P/-/-/0"
        );

        let opts = ScriptOptions { perf_events: vec!["cycles".into()], ..Default::default() };
        let (evs, report) = read(text, &opts).unwrap();
        assert_eq!(
            evs,
            vec![
                lbr(0x40062f, &[(0x40062f, 0x400640), (0x400650, 0x400660)]),
                lbr(0x400800, &[(0x400800, 0x400810)]),
            ]
        );
        assert_eq!(report.dropped_samples, 1);
        assert_eq!(
            report.warnings,
            [
                "A --perf-event filter was specified, but no \"event\" field found in line 3:       400800 0x400800/0x400810/P/-/-/0"
            ]
        );
    }

    /// The warnings llvm-profgen-19 printed for this script with `--perf-event=cycles`, in order.
    #[test]
    fn warnings_match_llvm_profgen() {
        let mmap = "PERF_RECORD_MMAP2 4242/4242: [0x555555555000(0x1000) @ 0 08:01 1234 0]:";
        let text = format!(
            "{mmap} r-xp /tmp/fx/loop\n\
             \x20    55555555576b 0x55555555573a/0x555555555768/P/-/-/0 0x555555555763/0x555555555730/P/-/-/0\n\
             zz 0x1/0x2\n\
             \x20    55555555576b 0x55555555573a/0x555555555768/P/-/-/0 0xq/0x555555555730/P/-/-/0\n\
             {mmap} r-xp /tmp/fx/loop X\n\
             {mmap}  /tmp/fx/loop\n"
        );
        let opts = ScriptOptions { perf_events: vec!["cycles".into()], ..Default::default() };
        let (evs, report) = read(&text, &opts).unwrap();
        let filter = "A --perf-event filter was specified, but no \"event\" field found in line";
        assert_eq!(
            report.warnings,
            [
                format!("{filter} 2:      55555555576b 0x55555555573a/0x555555555768/P/-/-/0 0x555555555763/0x555555555730/P/-/-/0"),
                format!("{filter} 3: zz 0x1/0x2"),
                "Invalid address in LBR record at line 3: zz 0x1/0x2".to_string(),
                format!("{filter} 4:      55555555576b 0x55555555573a/0x555555555768/P/-/-/0 0xq/0x555555555730/P/-/-/0"),
                "Invalid address in LBR record at line 4:      55555555576b 0x55555555573a/0x555555555768/P/-/-/0 0xq/0x555555555730/P/-/-/0".to_string(),
                format!("Cannot parse mmap event: {mmap}  /tmp/fx/loop "),
            ]
        );
        assert!(matches!(&evs[3], Ev::Mmap(m) if m.path == "/tmp/fx/loop X"));
        assert!(matches!(&evs[2], Ev::Sample { lbr, .. } if lbr.len() == 1));
    }

    #[test]
    fn hybrid_event_line_names_the_sample() {
        let text = "cycles: \n\t  4005dc\n 0x4005c8/0x4005dc/P/-/-/0  0x40062f/0x4005b0/P/-/-/0\n\
                    instructions: \n\t  400634\n 0x400600/0x400634/P/-/-/0  0x40062f/0x4005b0/P/-/-/0\n";
        let opts = ScriptOptions { perf_events: vec!["instructions".into()], ..Default::default() };
        let (evs, report) = read(text, &opts).unwrap();
        assert_eq!(report.kind, ScriptKind::LbrStack);
        assert_eq!(evs.len(), 1);
        assert!(matches!(&evs[0], Ev::Sample { ip: 0x400634, event: 1, .. }));
        assert_eq!(report.dropped_samples, 1);
        assert!(report.warnings.is_empty());
    }

    #[test]
    fn hybrid_frames_with_symbols_and_crlf() {
        let text = "\r\n\t  4005dc main+0x1c (/tmp/app)\r\n\t  400634 [unknown] (/tmp/app)\r\n 0x4005c8/0x4005dc/P/-/-/0  0x40062f/0x4005b0/P/-/-/0\r\n\r\n";
        let (evs, report) = read(text, &ScriptOptions::default()).unwrap();
        assert_eq!(report.kind, ScriptKind::LbrStack);
        assert_eq!(
            evs,
            vec![Ev::Sample {
                ip: 0x4005dc,
                repeat: 1,
                event: 0,
                chain: vec![0x4005dc, 0x400634],
                lbr: vec![(0x4005c8, 0x4005dc), (0x40062f, 0x4005b0)],
                stack: true,
            }]
        );
    }

    #[test]
    fn hybrid_broken_blocks_are_dropped() {
        // The first sample must be intact: llvm's sniffer needs frames right before a brstack line.
        let text = "2\n\t  400634\n\t  400700\n 0x400600/0x400634/P/-/-/0  0x40062f/0x4005b0/P/-/-/0\n\
                    \n\t  4005dc\n\n 0x4005c8/0x4005dc/P/-/-/0  0x40062f/0x4005b0/P/-/-/0\n\
                    \n 0x4005c8/0x4005dc/P/-/-/0  0x40062f/0x4005b0/P/-/-/0\n";
        let (evs, report) = read(text, &ScriptOptions::default()).unwrap();
        assert_eq!(
            evs,
            vec![Ev::Sample {
                ip: 0x400634,
                repeat: 2,
                event: 0,
                chain: vec![0x400634, 0x400700],
                lbr: vec![(0x400600, 0x400634), (0x40062f, 0x4005b0)],
                stack: true,
            }]
        );
        assert_eq!(report.dropped_samples, 2);
    }

    #[test]
    fn hybrid_missing_lbr_line_is_fatal() {
        let text = "\n\t  4005dc\n\t  400634\n 0x4005c8/0x4005dc/P/-/-/0  0x40062f/0x4005b0/P/-/-/0\n\n\t  4005dc\n\t  400634\n";
        let err = read(text, &ScriptOptions::default()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.script:6: 'Hybrid perf sample is corrupted, No LBR sample line"
        );
    }

    #[test]
    fn sniffing() {
        let invalid = |text: &str, opts: &ScriptOptions| {
            let err = read(text, opts).unwrap_err();
            assert_eq!(err.to_string(), "t.script: Invalid perf script input!");
        };
        // A single-entry brstack line without a leading IP is not recognised (llvm's 1-entry LBR
        // quirk) ...
        invalid("\n\t  4005dc\n 0x4005c8/0x4005dc/P/-/-/0\n", &ScriptOptions::default());
        invalid(" 0x4005c8/0x4005dc/P/-/-/0\n", &ScriptOptions::default());
        // ... but parses once another line fixed the kind, and a leading IP makes it a match.
        let text = "\n\t  4005dc\n 0x4005c8/0x4005dc/P/-/-/0\n\n\t  400634\n 0x1/0x2/P 0x3/0x4/P\n";
        let (evs, report) = read(text, &ScriptOptions::default()).unwrap();
        assert_eq!(report.kind, ScriptKind::LbrStack);
        assert!(
            matches!(&evs[0], Ev::Sample { ip: 0x4005dc, lbr, .. } if lbr == &[(0x4005c8, 0x4005dc)])
        );
        let (_, report) =
            read("  40062f 0x40062f/0x400640/P/-/-/0\n", &ScriptOptions::default()).unwrap();
        assert_eq!(report.kind, ScriptKind::Lbr);
        // An event field needs two spaces after it to be skipped by llvm's sniffer.
        invalid("cycles: 40062f 0x40062f/0x400640/P 0x1/0x2/P\n", &ScriptOptions::default());
        let (_, report) =
            read("cycles:  40062f 0x40062f/0x400640/P 0x1/0x2/P\n", &ScriptOptions::default())
                .unwrap();
        assert_eq!(report.kind, ScriptKind::Lbr);
        // IP-only scripts need --leading-ip-only.
        let ip_only = "     40062f\n     400700\n";
        invalid(ip_only, &ScriptOptions::default());
        invalid("", &ScriptOptions::default());
    }

    #[test]
    fn ip_only_scripts() {
        let opts = ScriptOptions { leading_ip_only: true, ..Default::default() };
        let text = "PERF_RECORD_MMAP2 1/1: [0x400000(0x1000) @ 0 08:04 1 2]: r-xp /tmp/app\n\
                    \x20    40062f\n4\ncycles:      400700\n\
                    cycles: \n\t  4005dc\n\t  400634\n\n";
        let (evs, report) = read(text, &opts).unwrap();
        assert_eq!(report.kind, ScriptKind::IpOnly);
        assert_eq!(evs.len(), 4);
        assert_eq!(evs[1], lbr(0x40062f, &[]));
        assert_eq!(
            evs[2],
            Ev::Sample {
                ip: 0x400700,
                repeat: 4,
                event: 0,
                chain: vec![],
                lbr: vec![],
                stack: false
            }
        );
        assert_eq!(
            evs[3],
            Ev::Sample {
                ip: 0x4005dc,
                repeat: 1,
                event: 0,
                chain: vec![0x4005dc, 0x400634],
                lbr: vec![],
                stack: true
            }
        );
        let unfiltered =
            "No --perf-event filter was specified, but an \"event\" field was found in line";
        assert_eq!(
            report.warnings,
            [format!("{unfiltered} 4: cycles:      400700"), format!("{unfiltered} 5: cycles: ")]
        );

        // A hybrid script with one-entry LBR lines only: the call chains are the samples.
        let text = "\n\t  4005dc\n 0x4005c8/0x4005dc/P/-/-/0\n\n\t  400634\n 0x400600/0x400634/P\n";
        let (evs, report) = read(text, &opts).unwrap();
        assert_eq!(report.kind, ScriptKind::IpOnly);
        let ips: Vec<_> = evs
            .iter()
            .map(|e| if let Ev::Sample { ip, lbr, .. } = e { (*ip, lbr.len()) } else { (0, 9) })
            .collect();
        assert_eq!(ips, [(0x4005dc, 0), (0x400634, 0)]);

        // With an LBR script, leading-ip-only keeps the IP and skips the entries, as llvm does.
        let text = "  40062f 0x40062f/0x400640/P 0x4zz/0x2/P\n  400700 0x400700/0x400710/P 0x400720/0x400730/P\n";
        let (evs, report) = read(text, &opts).unwrap();
        assert_eq!(report.kind, ScriptKind::Lbr);
        assert_eq!(evs, vec![lbr(0x40062f, &[]), lbr(0x400700, &[])]);
        assert!(report.warnings.is_empty());
    }

    #[test]
    fn warnings_are_capped() {
        let mut text = String::from("  40062f 0x40062f/0x400640/P 0x1/0x2/P\n");
        for _ in 0..MAX_WARNINGS + 5 {
            text.push_str("zz 0x1/0x2/P\n");
        }
        let (_, report) = read(&text, &ScriptOptions::default()).unwrap();
        assert_eq!(report.warnings.len(), MAX_WARNINGS);
        assert_eq!(report.warnings_omitted, 5);
        assert_eq!(report.dropped_samples, MAX_WARNINGS as u64 + 5);
    }

    /// Deterministic mutations (truncation, byte flips, spliced separators) never panic.
    #[test]
    fn junk_never_panics() {
        let seeds = [
            "PERF_RECORD_MMAP2 1/1: [0x400000(0x1000) @ 0 08:04 1 2]: r-xp /tmp/app\n3\n  40062f 0x40062f/0x400640/P 0x1/0x2/P\n",
            "cycles: \n\t  4005dc main (/a)\n\t  400634\n 0x4005c8/0x4005dc/P/-/-/0  0x40062f/0x4005b0/P\n\n",
        ];
        let mut state = 0x9e3779b97f4a7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let alphabet = b" \t\n\r/:0x@[]()-9af";
        for seed in seeds {
            for _ in 0..2000 {
                let mut text = seed.as_bytes().to_vec();
                for _ in 0..(next() % 6) {
                    let at = (next() % text.len() as u64) as usize;
                    match next() % 3 {
                        0 => text[at] = alphabet[(next() % alphabet.len() as u64) as usize],
                        1 => text.truncate(at.max(1)),
                        _ => text.insert(at, alphabet[(next() % alphabet.len() as u64) as usize]),
                    }
                }
                for opts in [
                    ScriptOptions::default(),
                    ScriptOptions {
                        leading_ip_only: true,
                        perf_events: vec!["cycles".into()],
                        ..Default::default()
                    },
                ] {
                    let _ = read_perf_script(&text, Path::new("j"), &opts, |_| {});
                }
            }
        }
    }

    #[test]
    fn signed_number_parsing() {
        assert_eq!(take_signed_dec(b"-12/3"), Some((-12, &b"/3"[..])));
    }
}
