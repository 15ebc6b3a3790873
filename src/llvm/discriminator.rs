//! LLVM's discriminator encodings: how a DWARF line-table discriminator packs a base
//! discriminator, a duplication factor or a pseudo-probe id (`DILocation`,
//! `PseudoProbeDwarfDiscriminator`).

/// Base discriminator of a raw DWARF discriminator
/// (`DILocation::getBaseDiscriminatorFromDiscriminator`). A pseudo-probe discriminator (low bits
/// `0b111`, written by `-fpseudo-probe-for-profiling`) yields the DWARF base discriminator packed
/// into it (bit 28 set, bits 18:16), else its probe id; flow-sensitive discriminators (`fs`) are
/// used as they are.
pub fn base_discriminator(raw: u32, fs: bool) -> u32 {
    if is_probe_discriminator(raw) {
        if raw & PROBE_HAS_DWARF_BASE != 0 {
            return (raw >> 16) & 0x7;
        }
        return probe_index_from_discriminator(raw);
    }
    if fs { raw } else { prefix_decode(raw) }
}

const PROBE_HAS_DWARF_BASE: u32 = 1 << 28;

/// `PseudoProbeDwarfDiscriminator::isPseudoProbeDiscriminator`.
pub fn is_probe_discriminator(raw: u32) -> bool {
    raw & 0x7 == 0x7
}

/// `PseudoProbeDwarfDiscriminator::extractProbeIndex`: bits 18:3, or 15:3 when bits 18:16 hold a
/// DWARF base discriminator.
pub fn probe_index_from_discriminator(raw: u32) -> u32 {
    if raw & PROBE_HAS_DWARF_BASE != 0 { (raw >> 3) & 0x1fff } else { (raw >> 3) & 0xffff }
}

/// Duplication factor (unroll/vectorization copies) of a raw DWARF discriminator
/// (`getDuplicationFactorFromDiscriminator`); at least 1, always 1 with FS discriminators.
pub fn duplication_factor(raw: u32, fs: bool) -> u32 {
    if fs {
        return 1;
    }
    let rest = if raw & 1 != 0 { raw >> 1 } else { raw >> if raw & 0x40 != 0 { 14 } else { 7 } };
    let factor = prefix_decode(rest);
    if factor == 0 { 1 } else { factor }
}

/// `getUnsignedFromPrefixEncoding`: bit 0 set means "no value"; bit 6 (after the shift,
/// bit 5) says a second 7-bit group follows.
fn prefix_decode(u: u32) -> u32 {
    if u & 1 != 0 {
        return 0;
    }
    let u = u >> 1;
    if u & 0x20 != 0 { ((u >> 1) & 0xfe0) | (u & 0x1f) } else { u & 0x1f }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// LLVM's `DILocation::encodeDiscriminator(BD, DF, 0)`.
    fn encode(bd: u32, df: u32) -> u32 {
        let prefix = |u: u32| {
            if u > 0x1f { ((u & 0xfe0) << 1) | (u & 0x1f) | 0x20 } else { u }
        };
        let component = |c: u32| if c == 0 { 1 } else { prefix(c) << 1 };
        let bits = |c: u32| {
            if c == 0 {
                1
            } else if c > 0x1f {
                14
            } else {
                7
            }
        };
        if df == 0 { component(bd) } else { component(bd) | (component(df) << bits(bd)) }
    }

    #[test]
    fn discriminator_components() {
        assert_eq!((base_discriminator(2, false), duplication_factor(2, false)), (1, 1));
        // Probe discriminators as clang-19 writes them (prog_probe's line table): DirectCall
        // probe 2 with DWARF base discriminator 0 packed in; without bit 28, the probe id.
        assert_eq!(probe_index_from_discriminator(0x1b20_0017), 2);
        assert_eq!(base_discriminator(0x1b20_0017, false), 0);
        assert_eq!(base_discriminator(0x1b23_0017, false), 3);
        assert_eq!(probe_index_from_discriminator(0x1b23_0017), 2);
        assert_eq!(base_discriminator(0x0b23_0017, false), 0x6002);
        assert_eq!(encode(3, 8), 2054);
        for (bd, df) in [(0, 0), (1, 0), (3, 8), (0, 2), (40, 0), (40, 3), (31, 100), (4000, 7)] {
            let raw = encode(bd, df);
            assert_eq!(base_discriminator(raw, false), bd, "{raw}");
            assert_eq!(duplication_factor(raw, false), df.max(1), "{raw}");
        }
    }
}
