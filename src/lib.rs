//! profgen turns Linux `perf.data` (or `perf script` text) into LLVM sample profiles.
//!
//! The modules follow the data flow, and a module only uses the ones before it in this list
//! (`tests/layering.rs` checks it):
//!
//! 0. The ground floor every stage stands on: [`addr`] (address spaces), [`error`], [`json`]
//!    (the reports' JSON writer), [`llvm`]
//!    (context frames, line locations, discriminators, the MD5 GUID, LEB128), [`text`] (parsing
//!    helpers), [`progress`] (the interface stages report their progress through), and [`binary`], the profiled ELF: segments, instructions, functions, DWARF,
//!    pseudo probes, and the [`binary::CodeView`] queries the stages ask of it.
//! 1. [`input`]: perf.data / perf script → [`input::PerfEvent`]s.
//! 2. [`mapping`]: mmap events + build-id → runtime addresses become binary [`addr::Vaddr`]s.
//! 3. [`aggregate`]: identical samples counted, then LBR ranges/branches and unwinder contexts
//!    ([`aggregate::ContextCounters`], also read and written as unsymbolized profiles).
//! 4. [`profile`]: counters + binary model → [`profile::Profile`].
//! 5. [`postpass`]: pre-inlining, cold-context trimming and merging, nesting.
//! 6. [`writer`]: text, binary and extbinary sample profile encodings; [`reader`] reads them
//!    back (for commands that start from a profile, such as `profgen remap`).
//!
//! Side tools over the stages: [`record`] is the `profgen-record` software-LBR recorder that
//! produces test data; [`order`] computes function orders from temporal traces; [`ab`] is
//! `profgen-ab`, the A/B tool that measures whether a profile makes a program faster; [`remap`]
//! carries a profile of an old build onto a new build (`profgen remap`).
//!
//! The front end: [`cli`] parses the command line once into a [`config::Command`] of plain
//! option structs, one per stage; [`driver`] wires the stages for it, each step a library call
//! that other commands reuse.
//!
//! Names: `*Options` say what a stage is asked to do; `*Stats` count what one component did
//! (merged across workers); `*Report` is what a step returns to its caller: counts together with
//! warnings or facts about the input.

pub mod ab;
pub mod addr;
pub mod aggregate;
pub mod binary;
pub mod cli;
pub mod config;
pub mod driver;
pub mod error;
pub mod input;
pub mod json;
pub mod llvm;
pub mod mapping;
pub mod order;
pub mod postpass;
pub mod profile;
pub mod progress;
pub mod reader;
pub mod record;
pub mod remap;
pub mod text;
pub mod writer;
