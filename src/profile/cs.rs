//! Context-sensitive profile generation (llvm-profgen's `CSProfileGenerator`, reference §6.5).
//!
//! In: [`ContextCounters`] from the virtual unwinder and the binary model. Out: a flat CS
//! [`Profile`] keyed by full calling contexts (`[main:1 @ foo:2 @ bar]`), before the
//! post-passes (pre-inliner, trimming, nesting).

/// Base discriminator of a raw DWARF discriminator (`getBaseDiscriminatorFromDiscriminator`);
/// flow-sensitive discriminators are used as they are.
pub fn base_discriminator(d: u32, fs: bool) -> u32 {
    if fs { d } else { prefix_decode(d) }
}

/// Duplication factor (unroll/vectorization copies) of a raw DWARF discriminator; at least 1.
pub fn duplication_factor(d: u32, fs: bool) -> u32 {
    if fs {
        return 1;
    }
    let next = if d & 1 == 0 { d >> if d & 0x40 != 0 { 14 } else { 7 } } else { d >> 1 };
    prefix_decode(next).max(1)
}

/// `getUnsignedFromPrefixEncoding`.
fn prefix_decode(u: u32) -> u32 {
    if u & 1 != 0 {
        return 0;
    }
    let u = u >> 1;
    if u & 0x20 != 0 { ((u >> 1) & 0xfe0) | (u & 0x1f) } else { u & 0x1f }
}

/// `FunctionSamples::getCanonicalFnName` with the default "selected" policy: strips a trailing
/// `.llvm.<x>` or `.part.<x>` suffix (`.__uniq.` suffixes are kept).
pub fn canonical_fn_name(name: &str) -> &str {
    let mut cand = name;
    for suffix in [".llvm.", ".part."] {
        // Only when the suffix starts the last dot component.
        if let Some(pos) = cand.rfind(suffix) {
            if !cand[pos + suffix.len()..].contains('.') {
                cand = &cand[..pos];
            }
        }
    }
    cand
}
