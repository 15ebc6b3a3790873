//! Reader: an LLVM sample profile file back into a [`Profile`], the inverse of [`crate::writer`].
//!
//! In: the bytes of a text, raw binary or extbinary profile (LLVM 19's `SampleProfileReader`
//! formats, detected by their magic). Out: the [`Profile`] and what the file said about itself
//! ([`ProfileFile`]: its format, whether names are MD5 hashes). Reading what [`crate::writer`]
//! wrote and writing it again gives the same bytes.
//!
//! Why here: the reader builds the profile data model ([`crate::profile`]) from the encodings'
//! constants ([`crate::llvm::sample_prof`], shared with the writers), so it sits on the writers'
//! floor, above the pipeline that never reads profiles back; the commands that do (`profgen
//! remap`) sit above it.

pub mod binary;
pub mod text;

use crate::error::{Error, Result};
use crate::llvm::leb128::read_uleb128;
use crate::llvm::sample_prof::{FORMAT_BINARY, FORMAT_EXT_BINARY, magic};
use crate::profile::model::Profile;
use std::path::Path;

/// The encoding a profile file was in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileFormat {
    Text,
    Binary,
    ExtBinary,
}

/// A profile read from a file, with what the file said about itself.
#[derive(Clone, Debug)]
pub struct ProfileFile {
    pub profile: Profile,
    pub format: FileFormat,
    /// The name table held MD5 hashes (`--use-md5`): every name in `profile` is the decimal
    /// GUID, as llvm-profdata prints it.
    pub md5_names: bool,
}

/// Reads a profile from `bytes`; `path` names the file in errors.
pub fn read_profile(bytes: &[u8], path: &Path) -> Result<ProfileFile> {
    let mut pos = 0;
    let leading = read_uleb128(bytes, &mut pos).ok();
    if leading == Some(magic(FORMAT_EXT_BINARY)) {
        return binary::read_ext_binary(bytes, path);
    }
    if leading == Some(magic(FORMAT_BINARY)) {
        return binary::read_raw_binary(bytes, path);
    }
    if bytes.starts_with(&magic(FORMAT_BINARY).to_le_bytes()[..4]) {
        return Err(Error::BadFile {
            path: path.to_path_buf(),
            what: "unsupported binary sample profile encoding".into(),
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| Error::Malformed {
        path: path.to_path_buf(),
        offset: e.valid_up_to() as u64,
        what: "not a binary sample profile, and not UTF-8 text".into(),
    })?;
    text::read_text(text, path)
}

/// Reads the profile file at `path`.
pub fn read_profile_file(path: &Path) -> Result<ProfileFile> {
    let bytes =
        std::fs::read(path).map_err(|source| Error::Io { path: path.to_path_buf(), source })?;
    read_profile(&bytes, path)
}
