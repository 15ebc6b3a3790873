//! LLVM's hashes of names and call sites. `MD5Hash` is a function's GUID: the key of
//! `.pseudo_probe_desc` records, the name table of `--use-md5` profiles and the pre-inliner's
//! tie-breaker. `FunctionSamples::getCallSiteHash` orders the children of LLVM's context tries,
//! and so the order in which equal-priority contexts are visited.

use md5::{Digest, Md5};

use super::LineLocation;

/// `llvm::MD5Hash`: the low 64 bits (little-endian) of the name's MD5, a function's GUID.
pub fn md5_guid(name: &str) -> u64 {
    let digest = Md5::digest(name.as_bytes());
    let mut low = [0u8; 8];
    low.copy_from_slice(&digest[..8]);
    u64::from_le_bytes(low)
}

/// `FunctionSamples::getCallSiteHash(Callee, Callsite)` =
/// `SampleContextFrame::getHashCode`: name GUID + location id × 33 (wrapping).
pub fn callsite_hash(callee: &str, loc: LineLocation) -> u64 {
    callsite_hash_from_guid(md5_guid(callee), loc)
}

/// [`callsite_hash`] with the callee's GUID already computed.
pub fn callsite_hash_from_guid(guid: u64, loc: LineLocation) -> u64 {
    let loc_id = (u64::from(loc.discriminator) << 32) | u64::from(loc.line_offset);
    guid.wrapping_add(loc_id << 5).wrapping_add(loc_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_guid_matches_llvm() {
        // The GUID of `main` in LLVM's pseudo-probe tests (15822663052811949562).
        assert_eq!(md5_guid("main"), 0xdb956436e78dd5fa);
    }
}
