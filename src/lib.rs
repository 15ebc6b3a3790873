//! profgen turns Linux `perf.data` (or `perf script` text) into LLVM sample profiles.
//!
//! The modules follow the data flow:
//!
//! 1. [`input`]: perf.data / perf script / unsymbolized profile → [`input::PerfEvent`]s.
//! 2. [`mapping`]: mmap events + build-id → runtime addresses become binary [`addr::Vaddr`]s.
//! 3. [`aggregate`]: identical samples counted, then LBR ranges/branches and unwinder contexts.
//! 4. [`binary`]: the profiled ELF: segments, instructions, functions, DWARF, pseudo probes.
//! 5. [`profile`]: counters + binary model → [`profile::Profile`].
//! 6. [`postpass`]: trimming, recursion compression, pre-inlining, nesting.
//! 7. [`writer`]: text, binary and extbinary sample profile encodings.
//!
//! [`driver`] wires the stages together for the `profgen` binary; [`record`] is the
//! `profgen-record` software-LBR recorder that produces test data.

pub mod addr;
pub mod aggregate;
pub mod binary;
pub mod cli;
pub mod config;
pub mod driver;
pub mod error;
pub mod input;
pub mod mapping;
pub mod order;
pub mod postpass;
pub mod profile;
pub mod record;
pub mod writer;
