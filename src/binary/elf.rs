//! ELF container: program headers (segments, llvm-profgen's preferred base), build id, sections
//! and symbols.
//!
//! In: the file's bytes. Out: [`ElfInfo`] (owned, no borrows into the file) plus borrowed views of
//! sections and symbols that the disassembler and the DWARF/probe loaders use during loading.

use super::Segment;
use crate::addr::{FileOffset, Vaddr};
use object::elf;
use object::read::elf::{ElfFile64, FileHeader, ProgramHeader};
use object::{Object, ObjectSection, ObjectSymbol, SectionIndex, SymbolKind};

/// llvm-profgen assumes 4 KiB pages when aligning segment addresses.
const PAGE_MASK: u64 = !0xfff;

pub type Elf<'data> = ElfFile64<'data, object::Endianness>;

/// What profgen keeps from the ELF headers.
#[derive(Clone, Debug)]
pub struct ElfInfo {
    pub segments: Vec<Segment>,
    /// Page-aligned vaddr of the first executable PT_LOAD.
    pub preferred_base: Vaddr,
    /// Page-aligned vaddr of the first PT_LOAD whose aligned vaddr is not 0 (llvm-profgen quirk).
    pub first_loadable_address: Vaddr,
    /// Page-aligned file offsets of the executable PT_LOADs (llvm-profgen's `TextSegmentOffsets`).
    pub text_segment_offsets: Vec<FileOffset>,
    pub build_id: Option<Vec<u8>>,
    /// A shared library: `ET_DYN` without a `PT_INTERP` (a PIE executable has one).
    pub shared_library: bool,
}

/// Parses an x86-64 ELF image. `what` errors are plain messages; the caller adds the path.
pub fn parse(data: &[u8]) -> Result<Elf<'_>, String> {
    let elf = Elf::parse(data).map_err(|e| format!("not a valid 64-bit ELF image: {e}"))?;
    let machine = elf.elf_header().e_machine(elf.endian());
    if machine != elf::EM_X86_64 {
        return Err(format!("unsupported ELF machine {machine} (only x86-64 is supported)"));
    }
    Ok(elf)
}

pub fn info(elf: &Elf<'_>) -> Result<ElfInfo, String> {
    let endian = elf.endian();
    let mut segments = Vec::new();
    let mut preferred_base = None;
    let mut first_loadable = 0u64;
    let mut text_segment_offsets = Vec::new();
    for ph in elf.elf_program_headers() {
        if ph.p_type(endian) != elf::PT_LOAD {
            continue;
        }
        let vaddr = ph.p_vaddr(endian);
        let offset = ph.p_offset(endian);
        let executable = ph.p_flags(endian).0 & elf::PF_X.0 != 0;
        segments.push(Segment {
            vaddr: Vaddr(vaddr),
            memsz: ph.p_memsz(endian),
            offset: FileOffset(offset),
            filesz: ph.p_filesz(endian),
            executable,
        });
        // Set only while still 0: a PIE whose first PT_LOAD is at 0 gets the next one's address.
        if first_loadable == 0 {
            first_loadable = vaddr & PAGE_MASK;
        }
        if executable {
            preferred_base.get_or_insert(vaddr & PAGE_MASK);
            text_segment_offsets.push(FileOffset(offset & PAGE_MASK));
        }
    }
    let preferred_base = preferred_base.ok_or_else(|| "no executable segment found".to_string())?;
    let build_id = elf.build_id().ok().flatten().map(<[u8]>::to_vec);
    let interp = elf.elf_program_headers().iter().any(|ph| ph.p_type(endian) == elf::PT_INTERP);
    let shared_library = elf.elf_header().e_type(endian) == elf::ET_DYN && !interp;
    Ok(ElfInfo {
        segments,
        preferred_base: Vaddr(preferred_base),
        first_loadable_address: Vaddr(first_loadable),
        text_segment_offsets,
        build_id,
        shared_library,
    })
}

/// The vaddr that file offset `off` is loaded at, through the PT_LOAD headers.
pub fn file_offset_to_vaddr(segments: &[Segment], off: FileOffset) -> Option<Vaddr> {
    // An mmap's page offset may lie below the segment's unaligned p_offset, in the same page.
    segments
        .iter()
        .find(|s| off.0 >= s.offset.0 & PAGE_MASK && off.0 < s.offset.0.saturating_add(s.filesz))
        .map(|s| Vaddr(s.vaddr.0.wrapping_add(off.0).wrapping_sub(s.offset.0)))
}

/// One `.symtab` symbol that lives in a section.
#[derive(Clone, Debug)]
pub struct Symbol<'data> {
    pub addr: u64,
    pub size: u64,
    pub name: &'data str,
    pub section: SectionIndex,
    /// `STT_FUNC`.
    pub is_func: bool,
}

/// Every `.symtab` symbol with a section, as llvm-profgen collects them for disassembly
/// (section symbols take their section's name). Names that are not UTF-8 are skipped.
pub fn symbols<'data>(elf: &Elf<'data>) -> Vec<Symbol<'data>> {
    let mut out = Vec::new();
    for sym in elf.symbols() {
        let Some(section) = sym.section_index() else {
            continue;
        };
        let name = if sym.kind() == SymbolKind::Section {
            elf.section_by_index(section).ok().and_then(|s| s.name().ok())
        } else {
            sym.name().ok()
        };
        let Some(name) = name else { continue };
        out.push(Symbol {
            addr: sym.address(),
            size: sym.size(),
            name,
            section,
            is_func: sym.kind() == SymbolKind::Text,
        });
    }
    out
}

/// Whether the section has `SHF_EXECINSTR`.
pub fn is_exec_section(
    section: &object::read::elf::ElfSection64<'_, '_, object::Endianness>,
) -> bool {
    matches!(section.flags(), object::SectionFlags::Elf { sh_flags, .. } if sh_flags.0 & elf::SHF_EXECINSTR.0 != 0)
}

/// Largest uncompressed-to-compressed size ratio accepted for a compressed section: deflate's
/// maximum, 1032:1 (debug info compresses about 3-10:1). A bigger claim is corrupt, and the
/// decompressor would allocate (and zero) memory out of all proportion to the file.
const MAX_COMPRESSION_RATIO: u64 = 1032;

/// A section's bytes, decompressed if it is compressed (`SHF_COMPRESSED` or `.zdebug_*`), with the
/// uncompressed size the file claims bounded by the compressed size.
pub fn section_data<'data>(
    section: &object::read::elf::ElfSection64<'data, '_, object::Endianness>,
) -> Result<std::borrow::Cow<'data, [u8]>, String> {
    let compressed = section.compressed_data().map_err(|e| e.to_string())?;
    let limit = (compressed.data.len() as u64).saturating_mul(MAX_COMPRESSION_RATIO);
    if compressed.format != object::CompressionFormat::None && compressed.uncompressed_size > limit
    {
        return Err(format!(
            "compressed section claims {} bytes uncompressed from {} bytes (more than {MAX_COMPRESSION_RATIO}:1)",
            compressed.uncompressed_size,
            compressed.data.len()
        ));
    }
    compressed.decompress().map_err(|e| e.to_string())
}
