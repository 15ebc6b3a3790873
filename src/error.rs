//! Errors. Exit code 1 for bad input ([`Error`]), 2 for bad usage (clap and [`Error::Usage`]).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// A malformed input file; `offset` is the byte offset where decoding failed.
    #[error("{path}: at byte offset {offset}: {what}")]
    Malformed { path: PathBuf, offset: u64, what: String },
    #[error("{path}: {what}")]
    BadFile { path: PathBuf, what: String },
    /// A malformed line-oriented text input; `line` is 1-based.
    #[error("{path}:{line}: {what}")]
    BadLine { path: PathBuf, line: u64, what: String },
    /// The input has samples but maps the binary nowhere: a wrong binary for the input.
    /// `found` lists what the input maps instead.
    #[error(
        "{binary}: no mmap event in {input} maps this binary ({identity}), and no sample lands in it; {found}"
    )]
    BinaryNotInInput { binary: PathBuf, input: String, identity: String, found: String },
    /// Every input was skipped (each named in a warning).
    #[error("none of the {inputs} inputs could be used (each is named in a warning above)")]
    NoUsableInput { inputs: usize },
    #[error("{0}")]
    Usage(String),
    /// An operation the requested output cannot express (e.g. a CS profile in raw binary).
    #[error("{0}")]
    Unsupported(String),
}

impl Error {
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Usage(_) => 2,
            _ => 1,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
