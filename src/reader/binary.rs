//! Raw binary and extbinary profiles (`SampleProfileReaderBinary`, `...ExtBinary`): the layouts
//! [`crate::writer::binary`] and [`crate::writer::extbinary`] describe. The summary is skipped
//! (the writers recompute it from the profiles); every other section is read, and each must be
//! consumed exactly, as LLVM checks.

use super::{FileFormat, ProfileFile};
use crate::error::{Error, Result};
use crate::llvm::leb128::read_uleb128;
use crate::llvm::sample_prof::{VERSION, flag, sec};
use crate::llvm::{ContextFrame, FuncName, LineLocation};
use crate::profile::model::{Context, FunctionSamples, Profile};
use std::path::Path;

/// A position in the file, for errors that name the offset.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
    path: &'a Path,
}

impl<'a> Cursor<'a> {
    fn err(&self, what: impl Into<String>) -> Error {
        Error::Malformed {
            path: self.path.to_path_buf(),
            offset: self.pos as u64,
            what: what.into(),
        }
    }
    fn uleb(&mut self, what: &str) -> Result<u64> {
        let at = self.pos;
        read_uleb128(self.data, &mut self.pos).map_err(|_| {
            self.pos = at;
            self.err(format!("truncated or overlong {what}"))
        })
    }
    fn count(&mut self, what: &str) -> Result<usize> {
        let n = self.uleb(what)?;
        // Every counted item takes at least one byte: larger counts are corrupt, not allocations.
        if n > (self.data.len() - self.pos) as u64 {
            return Err(self.err(format!("{what} {n} exceeds the bytes left")));
        }
        Ok(n as usize)
    }
    fn u32(&mut self, what: &str) -> Result<u32> {
        let at = self.pos;
        let v = self.uleb(what)?;
        u32::try_from(v).map_err(|_| {
            self.pos = at;
            self.err(format!("{what} {v} does not fit in 32 bits"))
        })
    }
    fn u64_le(&mut self, what: &str) -> Result<u64> {
        let bytes = self
            .data
            .get(self.pos..self.pos + 8)
            .ok_or_else(|| self.err(format!("truncated {what}")))?;
        self.pos += 8;
        Ok(u64::from_le_bytes(bytes.try_into().expect("8 bytes")))
    }
    fn cstr(&mut self) -> Result<String> {
        let rest = &self.data[self.pos..];
        let len = memchr::memchr(0, rest).ok_or_else(|| self.err("unterminated name"))?;
        let s = std::str::from_utf8(&rest[..len]).map_err(|_| self.err("name is not UTF-8"))?;
        self.pos += len + 1;
        Ok(s.to_string())
    }
    fn loc(&mut self) -> Result<LineLocation> {
        Ok(LineLocation::new(self.u32("line offset")?, self.u32("discriminator")?))
    }
    /// A name-table reference: the table's name, shared (a reference takes a byte or two, a
    /// copy of the name as many bytes as the name has).
    fn name<'n>(&mut self, names: &'n [FuncName]) -> Result<&'n FuncName> {
        let at = self.pos;
        let i = self.uleb("name index")?;
        names.get(i as usize).ok_or_else(|| {
            self.pos = at;
            self.err(format!("name index {i} out of range ({} names)", names.len()))
        })
    }
    fn magic_and_version(&mut self) -> Result<()> {
        self.uleb("magic")?;
        let v = self.uleb("version")?;
        if v != VERSION {
            return Err(self.err(format!("unsupported version {v} (expected {VERSION})")));
        }
        Ok(())
    }
}

/// The summary record; skipped (recomputed when written).
fn skip_summary(c: &mut Cursor) -> Result<()> {
    for what in ["total count", "max count", "max function count", "count", "function count"] {
        c.uleb(what)?;
    }
    let entries = c.count("summary entries")?;
    for _ in 0..entries * 3 {
        c.uleb("summary entry")?;
    }
    Ok(())
}

/// The body record of a profile (`readProfile`): its name index has been read by the caller.
fn read_body(
    c: &mut Cursor,
    fs: &mut FunctionSamples,
    names: &[FuncName],
    depth: u32,
) -> Result<()> {
    if depth > 1000 {
        return Err(c.err("inlinees nested more than 1000 deep"));
    }
    fs.total_samples = c.uleb("total samples")?;
    let records = c.count("body record count")?;
    for _ in 0..records {
        let loc = c.loc()?;
        let count = c.uleb("sample count")?;
        fs.add_body(loc, count);
        let targets = c.count("call target count")?;
        for _ in 0..targets {
            let name = c.name(names)?;
            let n = c.uleb("call target count")?;
            fs.add_call_target(loc, name, n);
        }
    }
    let inlinees = c.count("inlinee count")?;
    for _ in 0..inlinees {
        let loc = c.loc()?;
        let name = c.name(names)?;
        let callee = fs.shared_callsite_mut(loc, name);
        read_body(c, callee, names, depth + 1)?;
    }
    Ok(())
}

fn read_name_table(c: &mut Cursor, md5: bool) -> Result<Vec<FuncName>> {
    let n = c.count("name count")?;
    let mut names = Vec::with_capacity(n);
    for _ in 0..n {
        let name = if md5 { c.u64_le("MD5 name")?.to_string() } else { c.cstr()? };
        names.push(FuncName::from(name));
    }
    Ok(names)
}

pub fn read_raw_binary(data: &[u8], path: &Path) -> Result<ProfileFile> {
    let mut c = Cursor { data, pos: 0, path };
    c.magic_and_version()?;
    skip_summary(&mut c)?;
    let names = read_name_table(&mut c, false)?;
    let mut profile = Profile::default();
    while c.pos < data.len() {
        let head = c.uleb("head samples")?;
        let name = c.name(&names)?;
        let mut fs = FunctionSamples::new(name);
        fs.head_samples = head;
        read_body(&mut c, &mut fs, &names, 0)?;
        insert_top_level(&mut profile, Context::base(name), fs);
    }
    Ok(ProfileFile { profile, format: FileFormat::Binary, md5_names: false })
}

fn insert_top_level(profile: &mut Profile, ctx: Context, fs: FunctionSamples) {
    match profile.functions.get_mut(&ctx) {
        Some(existing) => existing.merge(&fs),
        None => {
            profile.functions.insert(ctx, fs);
        }
    }
}

struct SecHdr {
    ty: u64,
    flags: u64,
    offset: u64,
    size: u64,
}

pub fn read_ext_binary(data: &[u8], path: &Path) -> Result<ProfileFile> {
    let mut c = Cursor { data, pos: 0, path };
    c.magic_and_version()?;
    let n = c.u64_le("section count")?;
    if n > (data.len() as u64) / 32 {
        return Err(c.err(format!("{n} sections do not fit in the file")));
    }
    let mut hdrs = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let ty = c.u64_le("section type")?;
        let flags = c.u64_le("section flags")?;
        let offset = c.u64_le("section offset")?;
        let size = c.u64_le("section size")?;
        hdrs.push(SecHdr { ty, flags, offset, size });
    }
    // LLVM writes sections one after another. Overlapping ones would read the same bytes again
    // for each header: 100 headers over one 400 KB context table took over 1 GiB.
    let mut spans: Vec<&SecHdr> = hdrs.iter().filter(|h| h.size > 0).collect();
    spans.sort_unstable_by_key(|h| h.offset);
    if let Some(w) = spans.windows(2).find(|w| w[1].offset < w[0].offset.saturating_add(w[0].size))
    {
        return Err(Error::Malformed {
            path: path.to_path_buf(),
            offset: w[1].offset,
            what: format!(
                "section {} at {}..+{} overlaps section {} at {}..+{}",
                w[1].ty, w[1].offset, w[1].size, w[0].ty, w[0].offset, w[0].size
            ),
        });
    }
    let mut profile = Profile::default();
    let mut names: Vec<FuncName> = Vec::new();
    let mut md5_names = false;
    let mut contexts: Vec<Context> = Vec::new();
    // Sections in file order: LLVM reads them in the header's order, and the metadata section
    // comes after the profiles it annotates in every layout LLVM writes.
    for h in &hdrs {
        let start = usize::try_from(h.offset).ok().filter(|&s| s <= data.len());
        let end = start.and_then(|s| s.checked_add(h.size as usize)).filter(|&e| e <= data.len());
        let (Some(start), Some(end)) = (start, end) else {
            return Err(c.err(format!(
                "section {} at {}..+{} is outside the file",
                h.ty, h.offset, h.size
            )));
        };
        if h.flags & flag::COMPRESS != 0 {
            return Err(Error::Malformed {
                path: path.to_path_buf(),
                offset: start as u64,
                what: "compressed extbinary sections are not supported (write the profile uncompressed)".into(),
            });
        }
        let sec_flags = h.flags >> 32;
        let mut s = Cursor { data: &data[..end], pos: start, path };
        match h.ty {
            sec::PROF_SUMMARY => {
                profile.kind.context_sensitive = sec_flags & flag::SUMMARY_FULL_CONTEXT != 0;
                profile.kind.preinlined = sec_flags & flag::SUMMARY_IS_PRE_INLINED != 0;
                profile.kind.fs_discriminator = sec_flags & flag::SUMMARY_FS_DISCRIMINATOR != 0;
                skip_summary(&mut s)?;
            }
            sec::NAME_TABLE => {
                md5_names = sec_flags & flag::NAME_MD5 != 0;
                if md5_names && sec_flags & flag::NAME_FIXED_LENGTH_MD5 == 0 {
                    return Err(s.err("variable-length MD5 name tables are not supported"));
                }
                names = read_name_table(&mut s, md5_names)?;
            }
            sec::CS_NAME_TABLE => {
                let n = s.count("context count")?;
                contexts.reserve(n);
                for _ in 0..n {
                    let frames = s.count("context frame count")?;
                    let mut ctx = Vec::with_capacity(frames);
                    for _ in 0..frames {
                        let func = s.name(&names)?.clone();
                        ctx.push(ContextFrame { func, loc: s.loc()? });
                    }
                    if ctx.is_empty() {
                        return Err(s.err("empty context"));
                    }
                    contexts.push(Context::new(ctx));
                }
            }
            sec::LBR_PROFILE => {
                let cs = profile.kind.context_sensitive;
                while s.pos < end {
                    let head = s.uleb("head samples")?;
                    let at = s.pos;
                    let idx = s.uleb("profile index")? as usize;
                    let Some(ctx) = profile_context(cs, idx, &contexts, &names) else {
                        s.pos = at;
                        return Err(s.err(format!("profile index {idx} out of range")));
                    };
                    let mut fs = FunctionSamples::new(ctx.leaf());
                    fs.head_samples = head;
                    read_body(&mut s, &mut fs, &names, 0)?;
                    insert_top_level(&mut profile, ctx, fs);
                }
            }
            sec::PROFILE_SYMBOL_LIST => {
                let mut list = Vec::new();
                while s.pos < end {
                    list.push(s.cstr()?);
                }
                if !list.is_empty() {
                    profile.symbol_list = Some(list);
                }
            }
            sec::FUNC_OFFSET_TABLE => {
                // Only for random access; the profiles are read in sequence.
                s.pos = end;
            }
            sec::FUNC_METADATA => {
                profile.kind.probe_based = sec_flags & flag::METADATA_IS_PROBE_BASED != 0;
                let has_attributes = sec_flags & flag::METADATA_HAS_ATTRIBUTE != 0;
                let cs = profile.kind.context_sensitive;
                while s.pos < end {
                    let at = s.pos;
                    let idx = s.uleb("profile index")? as usize;
                    let ctx = profile_context(cs, idx, &contexts, &names);
                    let Some(fs) = ctx.and_then(|ctx| profile.functions.get_mut(&ctx)) else {
                        s.pos = at;
                        return Err(s.err(format!("metadata for unknown profile {idx}")));
                    };
                    read_metadata(
                        &mut s,
                        fs,
                        &names,
                        cs,
                        has_attributes,
                        profile.kind.probe_based,
                        0,
                    )?;
                }
            }
            // LLVM skips sections it does not know.
            _ => s.pos = end,
        }
        if s.pos != end {
            return Err(s.err(format!("section {} not consumed exactly", h.ty)));
        }
    }
    Ok(ProfileFile { profile, format: FileFormat::ExtBinary, md5_names })
}

/// The profile a name-table index (context-table index in CS profiles) refers to.
fn profile_context(
    cs: bool,
    idx: usize,
    contexts: &[Context],
    names: &[FuncName],
) -> Option<Context> {
    if cs { contexts.get(idx).cloned() } else { names.get(idx).map(Context::base) }
}

/// `readFuncMetadata` for one profile (and, for nested profiles, its inlinees).
fn read_metadata(
    c: &mut Cursor,
    fs: &mut FunctionSamples,
    names: &[FuncName],
    cs: bool,
    attributes: bool,
    probe: bool,
    depth: u32,
) -> Result<()> {
    if depth > 1000 {
        return Err(c.err("inlinee metadata nested more than 1000 deep"));
    }
    if probe {
        fs.checksum = Some(c.uleb("checksum")?);
    }
    if attributes {
        fs.attributes = c.u32("attributes")?;
    }
    if !cs && (probe || attributes) {
        let n = c.count("inlinee metadata count")?;
        for _ in 0..n {
            let loc = c.loc()?;
            let at = c.pos;
            let name = c.name(names)?;
            let Some(callee) = fs.callsites.get_mut(&loc).and_then(|m| m.get_mut(name)) else {
                c.pos = at;
                return Err(c.err(format!("metadata for an inlinee {name} the profile lacks")));
            };
            read_metadata(c, callee, names, cs, attributes, probe, depth + 1)?;
        }
    }
    Ok(())
}
