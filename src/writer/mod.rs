//! Writers: encode a finished [`Profile`] as an LLVM sample profile.
//!
//! In: the post-processed [`Profile`] and the output options. Out: bytes identical to what
//! `llvm-profgen` (LLVM 19's `SampleProfWriter`) writes for the same profile, in one of three
//! encodings: [`text`], [`extbinary`] (the default) and raw [`binary`]. Every encoder builds the
//! whole output in memory (extbinary needs back-patched offsets anyway); [`write_profile_file`]
//! then writes it to an exclusively created temporary file next to the target and renames it, so
//! a failed run never leaves a partial profile and nothing planted in the directory is followed.
//! [`density`] holds the profile density report, printed before the profile is written.

pub mod binary;
pub mod density;
pub mod extbinary;
pub mod text;

use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::llvm::FuncName;
use crate::profile::model::{Context, FunctionSamples, Profile};

/// `--format` (`text`, `binary`, `extbinary`, `gcc`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum OutputFormat {
    Text,
    /// Raw binary (`SPF_Binary`): only for non-CS, non-probe profiles.
    Binary,
    #[default]
    ExtBinary,
    /// Accepted by the option parser, never writable.
    Gcc,
}

/// Writer options besides the format.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    /// `--use-md5`: extbinary name table holds MD5 hashes (ignored by other formats; the driver
    /// prints llvm-profgen's warning).
    pub use_md5: bool,
}

/// llvm-profgen's warning (printed as `warning: ...`) for `--use-md5` with a format other than
/// extbinary.
pub const USE_MD5_IGNORED: &str = "-use-md5 is ignored. Specify --format=extbinary to enable it";

/// The message llvm-profgen prints for `--format=gcc` and for CS/probe profiles in raw binary.
pub const UNSUPPORTED_FORMAT: &str = "Profile encoding format unsupported for writing operations";

/// Encodes `profile` in `format`.
pub fn encode_profile(
    profile: &Profile,
    format: OutputFormat,
    opts: &WriteOptions,
) -> Result<Vec<u8>> {
    match format {
        OutputFormat::Text => Ok(text::encode(profile)),
        OutputFormat::ExtBinary => Ok(extbinary::encode(profile, opts.use_md5)),
        OutputFormat::Binary if !profile.kind.context_sensitive && !profile.kind.probe_based => {
            Ok(binary::encode(profile))
        }
        OutputFormat::Binary | OutputFormat::Gcc => {
            Err(Error::Unsupported(UNSUPPORTED_FORMAT.into()))
        }
    }
}

/// Encodes `profile` and writes it to `out`; `out_name` names the destination in errors.
pub fn write_profile(
    profile: &Profile,
    format: OutputFormat,
    opts: &WriteOptions,
    out: &mut dyn Write,
    out_name: &Path,
) -> Result<()> {
    let bytes = encode_profile(profile, format, opts).map_err(|e| with_path(e, out_name))?;
    out.write_all(&bytes)
        .and_then(|()| out.flush())
        .map_err(|source| Error::Io { path: out_name.to_path_buf(), source })
}

/// Writes the profile to `path` atomically: a temporary file in the same directory, renamed over
/// `path` once complete. `-` writes to stdout; an existing non-regular destination (e.g.
/// `/dev/stdout`, a FIFO) is written directly since it cannot be replaced by a rename.
pub fn write_profile_file(
    profile: &Profile,
    format: OutputFormat,
    opts: &WriteOptions,
    path: &Path,
) -> Result<()> {
    write_bytes_atomically(&encode_profile_file(profile, format, opts, path)?, path)
}

/// [`encode_profile`] for the file `path`: errors name it.
pub fn encode_profile_file(
    profile: &Profile,
    format: OutputFormat,
    opts: &WriteOptions,
    path: &Path,
) -> Result<Vec<u8>> {
    encode_profile(profile, format, opts).map_err(|e| with_path(e, path))
}

/// Writes `bytes` to `path` through a temporary file in the same directory (created with
/// `O_EXCL` under a random name, synced, given the permissions of the file it replaces) renamed
/// at the end; `-` and non-regular destinations are written directly.
pub fn write_bytes_atomically(bytes: &[u8], path: &Path) -> Result<()> {
    let io_err = |p: &Path| {
        let p = p.to_path_buf();
        move |source| Error::Io { path: p, source }
    };
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        return out.write_all(bytes).and_then(|()| out.flush()).map_err(io_err(path));
    }
    let existing = std::fs::metadata(path).ok();
    if existing.as_ref().is_some_and(|m| !m.is_file()) {
        return std::fs::write(path, bytes).map_err(io_err(path));
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let (tmp_path, mut tmp) = create_exclusive_temp(dir, path)?;
    let mode = existing.map_or_else(default_file_mode, |m| m.permissions());
    let written = tmp
        .write_all(bytes)
        .and_then(|()| tmp.set_permissions(mode))
        .and_then(|()| tmp.sync_all())
        .and_then(|()| std::fs::rename(&tmp_path, path));
    if let Err(source) = written {
        let _ = std::fs::remove_file(&tmp_path);
        return Err(Error::Io { path: path.to_path_buf(), source });
    }
    // The rename is durable once the directory is.
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// Creates `.NAME.RANDOM.tmp` in `dir` with `O_CREAT|O_EXCL` and mode 0600: nothing another user
/// planted in the directory (a symlink, a FIFO, a file) is followed or opened, and the name cannot
/// be predicted. Errors name `out`, the file the user asked for.
fn create_exclusive_temp(dir: &Path, out: &Path) -> Result<(PathBuf, std::fs::File)> {
    use std::hash::{BuildHasher, RandomState};
    use std::os::unix::fs::OpenOptionsExt;
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut last = None;
    for attempt in 0u32..64 {
        // RandomState's keys come from the OS's random source.
        let tag = RandomState::new().hash_one((std::process::id(), attempt));
        let tmp = dir.join(format!(".{name}.{tag:016x}.tmp"));
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
            Err(source) => return Err(Error::Io { path: out.to_path_buf(), source }),
        }
    }
    Err(Error::Io { path: out.to_path_buf(), source: last.expect("64 attempts") })
}

/// The permissions a newly created file gets: 0666 less the process umask.
fn default_file_mode() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: umask only swaps the process's file mode mask; the second call restores it. No
    // other thread creates files while the profile is written.
    let mask = unsafe {
        let m = libc::umask(0o022);
        libc::umask(m);
        m
    };
    std::fs::Permissions::from_mode(0o666 & !mask)
}

fn with_path(e: Error, path: &Path) -> Error {
    match e {
        Error::Unsupported(what) => Error::BadFile { path: path.to_path_buf(), what },
        e => e,
    }
}

/// Top-level profiles in LLVM's `sortFuncProfiles` order: total samples descending, ties by
/// context (the map's order, which matches `SampleContext::operator<`).
pub(crate) fn sorted_profiles(profile: &Profile) -> Vec<(&Context, &FunctionSamples)> {
    let mut v: Vec<_> = profile.functions.iter().collect();
    v.sort_by_key(|(_, fs)| std::cmp::Reverse(fs.total_samples));
    v
}

/// Every name the binary encodings index: context frames (or function names), call targets and
/// inlinee names, recursively (`addContext` + `addNames`), sorted byte-wise like
/// `std::set<FunctionId>`, with each one's index in that order.
///
/// A profile's names are a few thousand texts used many times over: each shared text is taken
/// once by its address, and only the distinct texts are sorted, rather than every use searched
/// for in a set (a text compare per level).
pub(crate) fn collect_names(profile: &Profile) -> (Vec<&str>, NameIndex) {
    /// Each distinct text gets an id as met; the ids become indices once the texts are sorted,
    /// rewritten in place in the map by address.
    #[derive(Default)]
    struct Names<'a> {
        /// The shared texts met, by address.
        by_addr: hashbrown::HashMap<usize, u64>,
        /// The distinct texts (several shared texts may spell one).
        by_text: hashbrown::HashMap<&'a str, u64>,
    }
    impl<'a> Names<'a> {
        fn add(&mut self, name: &'a FuncName) {
            if let hashbrown::hash_map::Entry::Vacant(e) =
                self.by_addr.entry(name.as_ptr() as usize)
            {
                let next = self.by_text.len() as u64;
                e.insert(*self.by_text.entry(name.as_str()).or_insert(next));
            }
        }
        fn add_profile(&mut self, fs: &'a FunctionSamples) {
            for b in fs.body.values() {
                for name in b.call_targets.keys() {
                    self.add(name);
                }
            }
            for callees in fs.callsites.values() {
                for (name, callee) in callees {
                    self.add(name);
                    self.add_profile(callee);
                }
            }
        }
    }
    let mut names = Names::default();
    for (ctx, fs) in &profile.functions {
        if profile.kind.context_sensitive {
            for (func, _) in ctx.named_frames() {
                names.add(func);
            }
        } else {
            names.add(ctx.leaf());
        }
        names.add_profile(fs);
    }
    let Names { mut by_addr, by_text } = names;
    let mut texts: Vec<(&str, u64)> = by_text.iter().map(|(&t, &id)| (t, id)).collect();
    texts.sort_unstable_by_key(|&(text, _)| text);
    let mut index = vec![0; texts.len()];
    for (i, &(_, id)) in texts.iter().enumerate() {
        index[id as usize] = i as u64;
    }
    for id in by_addr.values_mut() {
        *id = index[*id as usize];
    }
    (texts.into_iter().map(|(t, _)| t).collect(), NameIndex { by_addr })
}

/// Name → index in the sorted name table. The encoders look a name up for every context frame,
/// call target and inlinee, by its shared text's address, without reading it.
pub(crate) struct NameIndex {
    by_addr: hashbrown::HashMap<usize, u64>,
}

impl NameIndex {
    /// The index of a name [`collect_names`] took (one of the profile's shared texts).
    pub(crate) fn of(&self, name: &FuncName) -> u64 {
        self.by_addr[&(name.as_ptr() as usize)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_profile_streams_the_encoding_and_names_the_destination() {
        let mut p = Profile::default();
        p.functions.insert(Context::base("f"), FunctionSamples::new("f"));
        let mut out = Vec::new();
        let name = Path::new("out.prof");
        write_profile(&p, OutputFormat::Text, &WriteOptions::default(), &mut out, name).unwrap();
        assert_eq!(out, b"f:0:0\n");
        p.kind.probe_based = true;
        let err = write_profile(&p, OutputFormat::Binary, &WriteOptions::default(), &mut out, name)
            .unwrap_err();
        assert_eq!(err.to_string(), format!("out.prof: {UNSUPPORTED_FORMAT}"));
    }
}
