//! The vocabulary every stage shares, as LLVM defines it: calling contexts and line locations of
//! sample profiles, discriminator encodings, function-name canonicalisation, the MD5 GUID and
//! call-site hashes, and LEB128. Nothing here knows about perf data, the binary or a stage.

pub mod context;
pub mod discriminator;
pub mod hash;
pub mod leb128;
pub mod names;
pub mod sample_prof;

pub use context::{
    ContextFrame, ContextShape, FuncName, LineLocation, MAX_CONTEXT_FRAMES, compress_recursion,
    cut_to_max_context, trim_context,
};
pub use hash::{callsite_hash, callsite_hash_from_guid, md5_guid};
pub use names::{canonical_fn_name, stable_fn_name};
