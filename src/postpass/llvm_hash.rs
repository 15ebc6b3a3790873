//! The LLVM hashes whose values decide iteration orders that the post-passes must reproduce:
//! `MD5Hash` (function GUIDs, the pre-inliner's tie-breaker) and `hash_combine` of two `u64`s
//! (`FunctionSamples::getCallSiteHash`, the key that orders the children of LLVM's context
//! tries). LLVM 19 release builds hash with a fixed seed, so these orders are stable.

use md5::{Digest, Md5};

use crate::profile::LineLocation;

/// `llvm::MD5Hash`: the low 64 bits (little-endian) of the name's MD5.
pub fn md5_hash(name: &str) -> u64 {
    let digest = Md5::digest(name.as_bytes());
    let mut low = [0u8; 8];
    low.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(low)
}

/// `hash_combine(a, b)` for two `uint64_t`s: `hash_short` of 16 bytes = `hash_9to16_bytes`.
fn hash_combine_u64(a: u64, b: u64) -> u64 {
    const SEED: u64 = 0xff51_afd7_ed55_8ccd;
    const LEN: u64 = 16;
    hash_16_bytes(SEED ^ a, (b.wrapping_add(LEN)).rotate_right(LEN as u32)) ^ b
}

fn hash_16_bytes(low: u64, high: u64) -> u64 {
    const K_MUL: u64 = 0x9ddf_ea08_eb38_2d69;
    let mut a = (low ^ high).wrapping_mul(K_MUL);
    a ^= a >> 47;
    let mut b = (high ^ a).wrapping_mul(K_MUL);
    b ^= b >> 47;
    b.wrapping_mul(K_MUL)
}

/// `FunctionSamples::getCallSiteHash(Callee, Callsite)`.
pub fn callsite_hash(callee: &str, loc: LineLocation) -> u64 {
    let loc_hash = (u64::from(loc.discriminator) << 32) | u64::from(loc.line_offset);
    hash_combine_u64(md5_hash(callee), loc_hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_hash_matches_llvm_guid() {
        // The GUID of `main` in LLVM's pseudo-probe tests (15822663052811949562).
        assert_eq!(md5_hash("main"), 0xdb956436e78dd5fa);
    }
}
