//! Binary model against the oracles: llvm-profgen-19 listings (disassembly, source locations,
//! pseudo probes) and objdump (instruction kinds), on the fixtures in tests/fixtures/binary.

mod common;

use common::scratch;
use profgen::addr::{FileOffset, Vaddr};
use profgen::binary::probes::ProbeType;
use profgen::binary::*;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    common::fixture(&format!("binary/{name}"))
}

fn load(name: &str) -> Binary {
    Binary::load(&fixture(name), &LoadOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn read(name: &str) -> String {
    std::fs::read_to_string(fixture(name)).unwrap()
}

fn dump(b: &Binary, opts: &DumpOptions) -> String {
    let mut out = Vec::new();
    if opts.pseudo_probes {
        b.dump_pseudo_probes(&mut out).unwrap();
    }
    b.dump_disassembly(&mut out, opts).unwrap();
    String::from_utf8(out).unwrap()
}

/// llvm-profgen prints the path it was given; the fixtures were made from inside the directory.
fn with_short_path(listing: &str, name: &str) -> String {
    listing.replace(
        &format!("Disassembly of {}:", fixture(name).display()),
        &format!("Disassembly of {name}:"),
    )
}

#[test]
fn segments_and_preferred_addresses() {
    let pie = load("prog_pie");
    assert_eq!(pie.segments().len(), 4);
    assert_eq!(pie.preferred_base(), Vaddr(0x1000));
    // The first PT_LOAD is at 0, so llvm-profgen takes the next one.
    assert_eq!(pie.first_loadable_address(), Vaddr(0x1000));
    assert_eq!(pie.text_segment_offsets(), &[FileOffset(0x1000)]);
    assert_eq!(pie.file_offset_to_vaddr(FileOffset(0x1010)), Some(Vaddr(0x1010)));
    // The RW segment starts at file offset 0x2dd0 / vaddr 0x3dd0; its page offset maps too.
    assert_eq!(pie.file_offset_to_vaddr(FileOffset(0x2dd0)), Some(Vaddr(0x3dd0)));
    assert_eq!(pie.file_offset_to_vaddr(FileOffset(0x2000)), Some(Vaddr(0x2000)));
    assert_eq!(pie.file_offset_to_vaddr(FileOffset(0x100000)), None);

    let nopie = load("prog_nopie");
    assert_eq!(nopie.preferred_base(), Vaddr(0x401000));
    assert_eq!(nopie.first_loadable_address(), Vaddr(0x400000));
    assert_eq!(nopie.file_offset_to_vaddr(FileOffset(0x1000)), Some(Vaddr(0x401000)));
    let text = nopie.segments().iter().find(|s| s.executable).unwrap();
    assert_eq!(
        (text.vaddr, text.offset, text.filesz),
        (Vaddr(0x401000), FileOffset(0x1000), 0x2b9)
    );
}

/// Expected value from `readelf -n`.
#[test]
fn build_id() {
    let hex: String =
        load("prog_pie").build_id().unwrap().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, "15c64ffe3108131d88bc49faece7f3182cfc8c58");
}

/// Compares a `--show-source-locations` listing with llvm-profgen's line by line.
/// llvm-profgen-19 has no location for code without DWARF; profgen gives symbol-table
/// functions one frame `name:0`.
fn assert_listing_matches(b: &Binary, name: &str, opts: &DumpOptions, reference: &str) {
    let mine = with_short_path(&dump(b, opts), name);
    let reference = read(reference);
    let (mine, reference): (Vec<_>, Vec<_>) = (mine.lines().collect(), reference.lines().collect());
    assert_eq!(mine.len(), reference.len(), "{name}: line count");
    for (m, r) in mine.iter().zip(&reference) {
        if m == r {
            continue;
        }
        let addr = u64::from_str_radix(r.trim_start().split(':').next().unwrap(), 16).unwrap();
        let range = b.func_range(Vaddr(addr)).unwrap_or_else(|| panic!("{name}: {m} vs {r}"));
        let func = b.function(range.func);
        assert_eq!(func.source, FuncSource::Symbol, "{name}: {m} vs {r}");
        assert_eq!(*m, format!("{}{}:0", r, func.name), "{name}");
    }
}

#[test]
fn disassembly_and_source_locations_match_llvm_profgen() {
    let opts = DumpOptions { source_locations: true, ..Default::default() };
    for name in ["prog_pie", "prog_nopie", "prog_gcc"] {
        assert_listing_matches(&load(name), name, &opts, &format!("{name}.srcloc"));
    }
    // With probes, line offsets are the probe ids packed in the discriminators.
    let opts = DumpOptions { source_locations: true, pseudo_probes: true, ..Default::default() };
    assert_listing_matches(&load("prog_probe"), "prog_probe", &opts, "prog_probe.srcloc");
}

#[test]
fn split_dwarf_is_read_from_the_dwo() {
    let b = load("prog_split");
    assert!(b.warnings().is_empty(), "{:?}", b.warnings());
    let opts = DumpOptions { source_locations: true, ..Default::default() };
    assert_listing_matches(&b, "prog_split", &opts, "prog_split.srcloc");
    let work = b.func_range(Vaddr(0x1150)).unwrap();
    assert_eq!(b.function(work.func).source, FuncSource::Dwarf);

    // Without its .dwo (name changed in a copy), the functions come from the symbol table.
    let dir = scratch("split");
    let mut bytes = std::fs::read(fixture("prog_split")).unwrap();
    let name = b"prog_split-prog.dwo";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap();
    bytes[at + name.len() - 1] = b'X';
    let copy = dir.join("prog_split");
    std::fs::write(&copy, &bytes).unwrap();
    let b = Binary::load(&copy, &LoadOptions::default()).unwrap();
    assert_eq!(
        b.warnings(),
        [format!(
            "{}: DWO debug information was not loaded for 1 modules. Please check the .o, \
             .dwo or .dwp path. (first: prog_split-prog.dwX: not found)",
            copy.display()
        )]
    );
    assert!(b.functions().iter().all(|f| f.source == FuncSource::Symbol));

    // A checkout elsewhere: comp_dir (the directory the fixture was built in, recorded in the
    // skeleton unit) does not exist, the .dwo is found next to the binary.
    let mut bytes = std::fs::read(fixture("prog_split")).unwrap();
    let comp_dir_tail = b"tests/fixtures/binary";
    let mut patched = 0;
    while let Some(at) = bytes.windows(comp_dir_tail.len()).position(|w| w == comp_dir_tail) {
        bytes[at] = b'#';
        patched += 1;
    }
    assert!(patched > 0);
    std::fs::write(&copy, &bytes).unwrap();
    std::fs::copy(fixture("prog_split-prog.dwo"), dir.join("prog_split-prog.dwo")).unwrap();
    let b = Binary::load(&copy, &LoadOptions::default()).unwrap();
    assert!(b.warnings().is_empty(), "{:?}", b.warnings());
    assert_eq!(b.inline_stack(Vaddr(0x11ac)).len(), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn disassembly_of_selected_functions_matches_llvm_profgen() {
    let b = load("prog_gcc");
    let opts =
        DumpOptions { functions: vec!["work.cold".into(), "main".into()], ..Default::default() };
    assert_eq!(with_short_path(&dump(&b, &opts), "prog_gcc"), read("prog_gcc.funcs"));
}

#[test]
fn inline_stacks() {
    let b = load("prog_pie");
    let frames = |a: u64| -> Vec<(String, u32, u32)> {
        b.inline_stack(Vaddr(a))
            .iter()
            .map(|f| (f.func_name.to_string(), f.line_offset, f.discriminator))
            .collect()
    };
    // work (decl line 19) inlines mid (line 21 → offset 3, decl 13), which loops with a
    // vectorizer discriminator.
    assert_eq!(frames(0x11ac), [("work".into(), 3, 0), ("mid".into(), 2, 2054)]);
    // A line-0 row before work's decl line wraps.
    assert_eq!(frames(0x1190), [("work".into(), 65518, 0)]);
    assert_eq!(frames(0x1290), [("main".into(), 0, 0)]);
    // Symbol-table function, and code outside any function.
    assert_eq!(frames(0x1060), [("_start".into(), 0, 0)]);
    assert!(frames(0x1090).is_empty());
    // Mid-instruction addresses are symbolized too (uncached path).
    assert_eq!(frames(0x11ad), frames(0x11ac));
    assert_eq!(profgen::llvm::discriminator::base_discriminator(2054, false), 3);
    assert_eq!(profgen::llvm::discriminator::duplication_factor(2054, false), 8);
}

#[test]
fn inline_stack_is_consistent_across_threads() {
    use rayon::prelude::*;
    let b = load("prog_nopie");
    let addrs: Vec<Vaddr> = b.insts_in(Vaddr(0), Vaddr(u64::MAX)).collect();
    let sequential: Vec<_> = addrs.iter().map(|&a| b.inline_stack(a).to_vec()).collect();
    let fresh = load("prog_nopie");
    let parallel: Vec<_> = addrs.par_iter().map(|&a| fresh.inline_stack(a).to_vec()).collect();
    assert_eq!(sequential, parallel);
}

/// Instruction kinds from objdump's mnemonics.
fn objdump_kind(mnemonic: &str, operands: &str) -> InstKind {
    match mnemonic {
        "call" => InstKind::Call,
        "ret" => InstKind::Return,
        "jmp" if operands.starts_with('*') => InstKind::IndirectJump,
        "jmp" => InstKind::DirectJump,
        m if m.starts_with('j') || m.starts_with("loop") => InstKind::ConditionalJump,
        _ => InstKind::Other,
    }
}

#[test]
fn instruction_kinds_match_objdump() {
    for name in ["prog_pie", "prog_nopie", "prog_gcc"] {
        let b = load(name);
        let mut checked = 0;
        let mut seen = [false; 5];
        for line in read(&format!("{name}.objdump")).lines() {
            let Some((addr, rest)) = line.trim_start().split_once(":\t") else {
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            let mut words = rest.split_whitespace();
            let mut mnemonic = words.next().unwrap_or("");
            if matches!(mnemonic, "bnd" | "notrack" | "cs" | "ds" | "data16") {
                mnemonic = words.next().unwrap_or("");
            }
            let Some(kind) = b.inst_kind(Vaddr(addr)) else {
                continue;
            };
            assert_eq!(kind, objdump_kind(mnemonic, words.next().unwrap_or("")), "{name} {line}");
            if let Some(i) = [
                InstKind::Call,
                InstKind::Return,
                InstKind::DirectJump,
                InstKind::IndirectJump,
                InstKind::ConditionalJump,
            ]
            .iter()
            .position(|&k| k == kind)
            {
                seen[i] = true;
            }
            checked += 1;
        }
        assert!(checked > 100, "{name}: only {checked} instructions compared");
        assert_eq!(seen, [true; 5], "{name}: every transfer kind occurs");
    }
}

#[test]
fn address_helpers() {
    let b = load("prog_pie");
    assert!(b.is_code(Vaddr(0x1230)) && !b.is_code(Vaddr(0x1231)));
    assert_eq!(b.inst_size(Vaddr(0x1230)), Some(5));
    assert_eq!(b.inst_kind(Vaddr(0x1230)), Some(InstKind::Call));
    assert_eq!(b.branch_target(Vaddr(0x1230)), Some(Vaddr(0x1050)));
    assert_eq!(b.branch_target(Vaddr(0x1209)), Some(Vaddr(0x1279)));
    assert_eq!(b.branch_target(Vaddr(0x1152)), Some(Vaddr(0x127e)), "jle");
    assert_eq!(b.call_addr_from_return_addr(Vaddr(0x1235)), Some(Vaddr(0x1230)));
    assert_eq!(b.call_addr_from_return_addr(Vaddr(0x12b5)), Some(Vaddr(0x12b0)));
    assert_eq!(b.call_addr_from_return_addr(Vaddr(0x12bb)), None);
    assert_eq!(b.call_addr_from_return_addr(Vaddr::EXTERNAL), Some(Vaddr::EXTERNAL));
    assert_eq!(b.next_inst(Vaddr(0x1290)), Some(Vaddr(0x1291)));
    assert_eq!(b.prev_inst(Vaddr(0x1291)), Some(Vaddr(0x1290)));
    assert_eq!(b.prev_inst(Vaddr(0x1292)), Some(Vaddr(0x1291)));
    assert_eq!(
        b.insts_in(Vaddr(0x1290), Vaddr(0x1298)).collect::<Vec<_>>(),
        [Vaddr(0x1290), Vaddr(0x1291), Vaddr(0x1293), Vaddr(0x1298)]
    );
    // [0x1203, 0x1209) holds only a conditional jump; 0x1209 is a direct jmp.
    assert!(!b.range_crosses_uncond_branch(Vaddr(0x1203), Vaddr(0x1209)));
    assert!(b.range_crosses_uncond_branch(Vaddr(0x1203), Vaddr(0x120a)));
    // Prolog: first two instructions of main; epilog: `pop %rcx; ret`.
    for a in [0x1290, 0x1291, 0x12bd, 0x12be] {
        assert!(b.is_prolog_or_epilog(Vaddr(a)), "{a:x}");
    }
    assert!(!b.is_prolog_or_epilog(Vaddr(0x1293)));
}

#[test]
fn functions_from_dwarf_and_symbols() {
    let b = load("prog_pie");
    let names: Vec<_> = b
        .func_ranges()
        .iter()
        .map(|r| {
            (
                r.start.0,
                r.end.0,
                b.function(r.func).name.to_string(),
                b.function(r.func).source,
                r.is_entry,
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            (0x1050, 0x1057, "report".into(), FuncSource::Dwarf, true),
            (0x1060, 0x1082, "_start".into(), FuncSource::Symbol, true),
            (0x1150, 0x1281, "work".into(), FuncSource::Dwarf, true),
            (0x1290, 0x12bf, "main".into(), FuncSource::Dwarf, true),
        ]
    );
    assert_eq!(b.func_range(Vaddr(0x1280)).map(|r| r.start), Some(Vaddr(0x1150)));
    assert_eq!(b.func_range(Vaddr(0x1281)), None);
    assert_eq!(b.func_range_at_start(Vaddr(0x1290)).map(|r| r.end), Some(Vaddr(0x12bf)));
    assert_eq!(b.func_range_at_start(Vaddr(0x1291)), None);
}

#[test]
fn split_function_has_one_entry_range() {
    let b = load("prog_gcc");
    let work = b.functions().iter().find(|f| &*f.name == "work").unwrap();
    assert_eq!(work.ranges, [(Vaddr(0x1057), Vaddr(0x107a)), (Vaddr(0x11b0), Vaddr(0x1207))]);
    assert!(!b.func_range(Vaddr(0x1057)).unwrap().is_entry, "work.cold is not an entry");
    assert!(b.func_range(Vaddr(0x11b0)).unwrap().is_entry);
    assert_eq!(b.function(b.func_range(Vaddr(0x1060)).unwrap().func).name.as_str(), "work");
}

#[test]
fn pseudo_probes_match_llvm_profgen() {
    for name in ["prog_probe", "prog_probe_nopie"] {
        let b = load(name);
        let mine = with_short_path(
            &dump(&b, &DumpOptions { pseudo_probes: true, ..Default::default() }),
            name,
        );
        assert_eq!(mine, read(&format!("{name}.probes")), "{name}");
    }
}

#[test]
fn probe_queries() {
    let b = load("prog_probe");
    let p = b.probes().expect("probe binary");
    assert_eq!(profgen::llvm::md5_guid("main"), 15822663052811949562);
    let main = p.desc(15822663052811949562).unwrap();
    assert_eq!((main.name.as_ref(), main.hash), ("main", 563022579651808));
    // `callq report` in work is DirectCall probe 7.
    let call = p.call_probe_at(Vaddr(0x11b6)).unwrap();
    assert_eq!((call.index, call.kind), (7, ProbeType::DirectCall));
    assert_eq!(p.inline_context(call), (vec![], ("work".into(), 7)));
    // At 0x115d: work:4, then mid:1 and mid:2 (mid inlined at work:5).
    let at = p.probes_at(Vaddr(0x115d));
    assert_eq!(at.iter().map(|p| p.index).collect::<Vec<_>>(), [4, 1, 2]);
    let mid = "_ZL3midi.__uniq.209043448395238328353871160106749095556";
    assert_eq!(p.inline_context(&at[1]), (vec![("work".into(), 5)], (mid.into(), 1)));
    let top = p.top_level_node(at[1].node);
    assert_eq!(p.node(top).guid, profgen::llvm::md5_guid("work"));
    assert!(p.call_probe_at(Vaddr(0x115d)).is_none());
    // --use-dwarf-correlation ignores probes.
    let opts = LoadOptions { use_dwarf_correlation: true, ..Default::default() };
    assert!(Binary::load(&fixture("prog_probe"), &opts).unwrap().probes().is_none());
    assert!(load("prog_pie").probes().is_none());
}

#[test]
fn debug_binary_supplies_dwarf() {
    let dir = scratch("debug-binary");
    // A copy of prog_pie without debug sections is enough to show the DWARF comes from elsewhere:
    // strip the .debug_* section names so no DWARF is found in the main file.
    let mut bytes = std::fs::read(fixture("prog_pie")).unwrap();
    let needle = b".debug_";
    let mut i = 0;
    while let Some(pos) = bytes[i..].windows(needle.len()).position(|w| w == needle) {
        bytes[i + pos + 1] = b'X';
        i += pos + needle.len();
    }
    let stripped = dir.join("stripped");
    std::fs::write(&stripped, &bytes).unwrap();
    let alone = Binary::load(&stripped, &LoadOptions::default()).unwrap();
    assert!(alone.functions().iter().all(|f| f.source == FuncSource::Symbol));
    let opts = LoadOptions { debug_binary: Some(fixture("prog_pie")), ..Default::default() };
    let with_debug = Binary::load(&stripped, &opts).unwrap();
    assert_eq!(with_debug.inline_stack(Vaddr(0x11ac)).len(), 2);
    assert_eq!(with_debug.functions().len(), load("prog_pie").functions().len());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn truncated_or_corrupt_elf_is_an_error_not_a_panic() {
    let dir = scratch("corrupt");
    let bytes = std::fs::read(fixture("prog_probe")).unwrap();
    let path = dir.join("bad");
    for len in [0, 4, 63, 64, 200, 1000, 4096, 8192, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&path, &bytes[..len]).unwrap();
        if let Err(e) = Binary::load(&path, &LoadOptions::default()) {
            assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        }
    }
    std::fs::write(&path, &bytes[..10]).unwrap();
    let e = Binary::load(&path, &LoadOptions::default()).err().expect("10 bytes are no ELF");
    assert!(e.to_string().starts_with(&format!("{}: not a valid", path.display())), "{e}");
    // Corrupt bytes after the headers (sections, DWARF, probes): any outcome but a panic.
    let mut seed = 0x9e3779b97f4a7c15u64;
    for _ in 0..300 {
        let mut corrupt = bytes.clone();
        for _ in 0..8 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = 64 + (seed as usize) % (corrupt.len() - 64);
            corrupt[at] = (seed >> 32) as u8;
        }
        std::fs::write(&path, &corrupt).unwrap();
        if let Ok(b) = Binary::load(&path, &LoadOptions::default()) {
            for a in b.insts_in(Vaddr(0), Vaddr(u64::MAX)) {
                b.inline_stack(a);
            }
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn propeller_sample_functions_come_from_symbols() {
    let path = Path::new("/work/shared/data/autofdo/propeller_sample_1.bin");
    if !path.exists() {
        eprintln!("skipping: {} not present", path.display());
        return;
    }
    let b = Binary::load(path, &LoadOptions::default()).unwrap();
    let hex: String = b.build_id().unwrap().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(hex, "572ac72487ae1966");
    assert_eq!(b.preferred_base(), Vaddr(0x1000));
    let find = |name: &str| {
        b.functions().iter().find(|f| &*f.name == name).unwrap_or_else(|| panic!("{name}"))
    };
    assert_eq!(find("main").source, FuncSource::Symbol);
    assert_eq!(find("compute_flag").source, FuncSource::Symbol);
    assert_eq!(find("compute_flag").ranges, [(Vaddr(0x18d0), Vaddr(0x1906))]);
    assert_eq!(find("__libc_csu_init").source, FuncSource::Dwarf);
    let stack = b.inline_stack(Vaddr(0x18d0));
    assert_eq!(
        (stack.len(), stack[0].func_name.as_ref(), stack[0].line_offset),
        (1, "compute_flag", 0)
    );
}

/// IP samples → block counts (`profile::ip_blocks`): each block gets samples / instructions,
/// scaled so that the blocks sum to the samples (13 here); LBR ranges and branches pass through.
#[test]
fn ip_samples_count_for_their_blocks() {
    use profgen::aggregate::Counters;
    let b = load("prog_pie");
    let mut c = Counters::default();
    // `work`: 1150 test; 1152 jle | ... | 11b7 movdqa; 11bb je | 11bd movdqa | 11c1 (a je target).
    for (ip, n) in [(0x1150, 6), (0x11b7, 2), (0x11bb, 2), (0x11bd, 3)] {
        c.add_range(Vaddr(ip), Vaddr(ip), n);
    }
    c.add_range(Vaddr(0x1158), Vaddr(0x1189), 7);
    c.add_branch(Vaddr(0x1152), Vaddr(0x127e), 1);
    let out = profgen::profile::ip_blocks::block_counters(&b, &c);
    let mut ranges: Vec<_> = out.ranges.iter().map(|(&(s, e), &n)| (s.0, e.0, n)).collect();
    ranges.sort_unstable();
    // Densities 6/2, 4/2, 3/1 (sum 8): 3*13/8 = 4.9 -> 5, 2*13/8 = 3.3 -> 3.
    assert_eq!(
        ranges,
        [(0x1150, 0x1152, 5), (0x1158, 0x1189, 7), (0x11b7, 0x11bb, 3), (0x11bd, 0x11bd, 5)]
    );
    assert_eq!(out.branches, c.branches);
}
