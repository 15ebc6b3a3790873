//! The sample profile encodings' constants (`SampleProf.h`): magic numbers, the version, the
//! extbinary section types and their flags. The writers and the reader both use them, so they
//! live here rather than in either.

/// `SPVersion()`.
pub const VERSION: u64 = 103;

/// `SPMagic(format)`: "SPROF42" followed by the format byte.
pub fn magic(format: u8) -> u64 {
    u64::from_be_bytes([b'S', b'P', b'R', b'O', b'F', b'4', b'2', format])
}

/// The format byte of the raw binary encoding (`SPF_Binary`).
pub const FORMAT_BINARY: u8 = 0xff;
/// The format byte of the extensible binary encoding (`SPF_Ext_Binary`).
pub const FORMAT_EXT_BINARY: u8 = 0x04;

/// `SecType` values.
pub mod sec {
    pub const PROF_SUMMARY: u64 = 1;
    pub const NAME_TABLE: u64 = 2;
    pub const PROFILE_SYMBOL_LIST: u64 = 3;
    pub const FUNC_OFFSET_TABLE: u64 = 4;
    pub const FUNC_METADATA: u64 = 5;
    pub const CS_NAME_TABLE: u64 = 6;
    pub const LBR_PROFILE: u64 = 0x20;
}

/// Section flags: the common ones in the low 32 bits, the section-specific ones stored shifted
/// left by 32 in the header.
pub mod flag {
    /// Common: the section is zlib-compressed.
    pub const COMPRESS: u64 = 1;
    pub const NAME_MD5: u64 = 1;
    pub const NAME_FIXED_LENGTH_MD5: u64 = 2;
    pub const NAME_UNIQ_SUFFIX: u64 = 4;
    pub const SUMMARY_PARTIAL: u64 = 1;
    pub const SUMMARY_FULL_CONTEXT: u64 = 2;
    pub const SUMMARY_FS_DISCRIMINATOR: u64 = 4;
    pub const SUMMARY_IS_PRE_INLINED: u64 = 16;
    pub const METADATA_IS_PROBE_BASED: u64 = 1;
    pub const METADATA_HAS_ATTRIBUTE: u64 = 2;
    pub const FUNC_OFFSET_ORDERED: u64 = 1;
}

/// `FunctionSamples::UniqSuffix`.
pub const UNIQ_SUFFIX: &str = ".__uniq.";

/// `FunctionSamples::UnknownIndirectCallee`: the callee of an indirect call site in stale
/// profile matching.
pub const UNKNOWN_INDIRECT_CALLEE: &str = "unknown.indirect.callee";
