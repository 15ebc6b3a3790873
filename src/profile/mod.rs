//! Profile stage: the LLVM sample profile data model and the builders that fill it from the
//! aggregated counters and the binary model.
//!
//! In: [`crate::aggregate`] counters + [`crate::binary::Binary`]. Out: a [`Profile`], which the
//! post-passes reshape and the writers encode.

pub mod builder;
pub mod context_size;
pub mod cs;
pub mod line;
pub mod model;
pub mod probe;
pub mod ranges;
pub mod summary;

pub use model::*;
