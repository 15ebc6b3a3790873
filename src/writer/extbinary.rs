//! Extensible binary encoding (`SampleProfileWriterExtBinary`, default section layout), as
//! llvm-profgen writes it: never compressed, never partial.
//!
//! ```text
//! ULEB magic(FORMAT_EXT_BINARY)  ULEB version(103)  u64 #sections (7)
//! 7 × {u64 type, u64 flags, u64 offset, u64 size}      in layout order (below)
//! payloads, in write order: summary, names, CS names, profiles, symbol list, offsets, metadata
//! ```
//!
//! FuncMetadata records are written in context (name) order: LLVM iterates its hash map there,
//! an order that depends on the insertion history; readers look every record up by its name or
//! context index, so the order carries no meaning. All other bytes match llvm-profgen's.

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::binary::{write_body, write_loc, write_summary};
use super::{NameIndex, collect_names, sorted_profiles};
use crate::llvm::leb128::write_uleb128;
use crate::llvm::md5_guid;
use crate::llvm::sample_prof::{FORMAT_EXT_BINARY, UNIQ_SUFFIX, VERSION, flag, magic, sec};
use crate::profile::model::{Context, FunctionSamples, Profile, ProfileKind};
use crate::profile::summary::ProfileSummary;

/// `SectionHdrLayout` of `DefaultLayout`.
const LAYOUT: [u64; 7] = [
    sec::PROF_SUMMARY,
    sec::NAME_TABLE,
    sec::CS_NAME_TABLE,
    sec::FUNC_OFFSET_TABLE,
    sec::LBR_PROFILE,
    sec::PROFILE_SYMBOL_LIST,
    sec::FUNC_METADATA,
];

/// `writeDefaultLayout`: payloads are written in this order of layout indices (the offset
/// table can only be written once the profiles' offsets are known).
const WRITE_ORDER: [usize; 7] = [0, 1, 2, 4, 5, 3, 6];

#[derive(Clone, Copy, Default)]
struct SecHdr {
    flags: u64,
    offset: u64,
    size: u64,
}

pub fn encode(profile: &Profile, use_md5: bool) -> Vec<u8> {
    let kind = profile.kind;
    let cs = kind.context_sensitive;
    let ((names, name_idx), summary) =
        rayon::join(|| collect_names(profile), || ProfileSummary::compute(profile));
    // CS profiles are referenced through the context table, sorted by context.
    let ctx_idx: BTreeMap<&Context, u64> =
        if cs { profile.functions.keys().zip(0..).collect() } else { BTreeMap::new() };
    let own_idx = |ctx: &Context| {
        if cs { ctx_idx[ctx] } else { name_idx.of(ctx.leaf()) }
    };
    let sorted = sorted_profiles(profile);

    let mut out = Vec::new();
    write_uleb128(&mut out, magic(FORMAT_EXT_BINARY));
    write_uleb128(&mut out, VERSION);
    out.extend_from_slice(&(LAYOUT.len() as u64).to_le_bytes());
    let hdr_table = out.len();
    out.resize(hdr_table + LAYOUT.len() * 32, 0xff);

    let mut hdrs = [SecHdr::default(); 7];
    let mut offsets: Vec<(&Context, u64)> = Vec::with_capacity(sorted.len());
    // The metadata section, encoded beside the profiles (its records need only the indices).
    let mut metadata = Vec::new();
    for layout_idx in WRITE_ORDER {
        let start = out.len();
        let mut flags = 0;
        match LAYOUT[layout_idx] {
            sec::PROF_SUMMARY => {
                if cs {
                    flags |= flag::SUMMARY_FULL_CONTEXT;
                }
                if kind.preinlined {
                    flags |= flag::SUMMARY_IS_PRE_INLINED;
                }
                if kind.fs_discriminator {
                    flags |= flag::SUMMARY_FS_DISCRIMINATOR;
                }
                write_summary(&mut out, &summary);
            }
            sec::NAME_TABLE => {
                write_uleb128(&mut out, names.len() as u64);
                if use_md5 {
                    flags |= flag::NAME_MD5 | flag::NAME_FIXED_LENGTH_MD5;
                    for name in &names {
                        out.extend_from_slice(&md5_guid(name).to_le_bytes());
                    }
                } else {
                    if names.iter().any(|n| n.contains(UNIQ_SUFFIX)) {
                        flags |= flag::NAME_UNIQ_SUFFIX;
                    }
                    for name in &names {
                        out.extend_from_slice(name.as_bytes());
                        out.push(0);
                    }
                }
            }
            sec::CS_NAME_TABLE => {
                write_uleb128(&mut out, ctx_idx.len() as u64);
                for ctx in ctx_idx.keys() {
                    write_uleb128(&mut out, ctx.len() as u64);
                    for (func, loc) in ctx.named_frames() {
                        write_uleb128(&mut out, name_idx.of(func));
                        write_loc(&mut out, loc);
                    }
                }
            }
            sec::LBR_PROFILE => {
                // Each profile encoded on the workers, then laid out in order. Into a buffer
                // each worker reuses, the bytes then copied out at their size (grown from empty,
                // each profile's vector was reallocated as it doubled).
                let (encoded, ()) = rayon::join(
                    || {
                        (sorted.par_iter())
                            .map_init(Vec::new, |buf, &(ctx, fs)| {
                                buf.clear();
                                write_uleb128(buf, fs.head_samples);
                                write_body(buf, own_idx(ctx), fs, &name_idx);
                                buf.to_vec()
                            })
                            .collect::<Vec<Vec<u8>>>()
                    },
                    || {
                        if metadata_flags(kind) != 0 {
                            for (ctx, fs) in &profile.functions {
                                write_metadata(&mut metadata, own_idx(ctx), fs, profile, &name_idx);
                            }
                        }
                    },
                );
                let lbr_start = out.len();
                for (&(ctx, _), bytes) in sorted.iter().zip(&encoded) {
                    offsets.push((ctx, (out.len() - lbr_start) as u64));
                    out.extend_from_slice(bytes);
                }
            }
            sec::PROFILE_SYMBOL_LIST => {
                if let Some(list) = &profile.symbol_list {
                    let sorted: std::collections::BTreeSet<&str> =
                        list.iter().map(String::as_str).collect();
                    for name in sorted {
                        out.extend_from_slice(name.as_bytes());
                        out.push(0);
                    }
                }
            }
            sec::FUNC_OFFSET_TABLE => {
                write_uleb128(&mut out, offsets.len() as u64);
                if cs {
                    flags |= flag::FUNC_OFFSET_ORDERED;
                    offsets.sort_by(|a, b| a.0.cmp(b.0));
                }
                for &(ctx, offset) in &offsets {
                    write_uleb128(&mut out, own_idx(ctx));
                    write_uleb128(&mut out, offset);
                }
            }
            sec::FUNC_METADATA => {
                flags |= metadata_flags(kind);
                out.extend_from_slice(&metadata);
            }
            _ => unreachable!("LAYOUT lists only known sections"),
        }
        hdrs[layout_idx] =
            SecHdr { flags: flags << 32, offset: start as u64, size: (out.len() - start) as u64 };
    }

    for (i, (ty, h)) in LAYOUT.iter().zip(&hdrs).enumerate() {
        let at = hdr_table + i * 32;
        for (j, v) in [*ty, h.flags, h.offset, h.size].into_iter().enumerate() {
            out[at + j * 8..at + j * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
    }
    out
}

/// The metadata section's flags; its records are written only when there are any.
fn metadata_flags(kind: ProfileKind) -> u64 {
    let mut flags = 0;
    if kind.probe_based {
        flags |= flag::METADATA_IS_PROBE_BASED;
    }
    if kind.context_sensitive || kind.preinlined {
        flags |= flag::METADATA_HAS_ATTRIBUTE;
    }
    flags
}

/// `writeFuncMetadata`: checksum (probe-based), attributes (CS or pre-inlined) and, for nested
/// profiles, the same for every inlinee keyed by call site.
fn write_metadata(
    out: &mut Vec<u8>,
    idx: u64,
    fs: &FunctionSamples,
    profile: &Profile,
    names: &NameIndex,
) {
    let kind = profile.kind;
    write_uleb128(out, idx);
    if kind.probe_based {
        write_uleb128(out, fs.checksum.unwrap_or(0));
    }
    if kind.context_sensitive || kind.preinlined {
        write_uleb128(out, fs.attributes as u64);
    }
    if !kind.context_sensitive {
        write_uleb128(out, fs.callsites.values().map(|c| c.len() as u64).sum());
        for (loc, callees) in &fs.callsites {
            for (name, callee) in callees {
                write_loc(out, *loc);
                write_metadata(out, names.of(name), callee, profile, names);
            }
        }
    }
}
