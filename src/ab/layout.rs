//! Counterfactual link layouts ("shuffle padding") built with what lld-19 has.
//!
//! The method (lld 20's `--randomize-section-padding=SEED`): before each input section of
//! `.text` insert, with probability 1/16, padding as large as the section's alignment; at the
//! start of each PT_LOAD segment insert a random 0..max-page-size padding. Function order
//! otherwise stays as the compiler and linker chose.
//!
//! lld-19 has no such flag, so a layout is made from the linker's own default link of the same
//! objects: its `-Map` lists every input section in output order with its alignment and
//! symbols. From it we generate an object with one padding section per insertion (`.text`
//! padding filled with `int3`, retained with `SHF_GNU_RETAIN`) and a `--symbol-ordering-file`
//! that lists one symbol of every `.text` input section in the default order, with the padding
//! symbols interleaved. For the other segments' first padded output section (`.rodata`,
//! `.data.rel.ro`, `.data`, `.bss`) only the segment padding is ordered, which lld places first
//! while the unordered rest keeps its default order. [`fidelity`] checks the result against the
//! default link.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use anyhow::{Result, bail};

/// One input section of the link map.
#[derive(Clone, Debug, PartialEq)]
pub struct InputSection {
    /// `file:(section)` as the map prints it: the identity used to compare layouts.
    pub id: String,
    pub vma: u64,
    pub size: u64,
    pub align: u64,
    /// Symbols the map lists in it, in map order.
    pub symbols: Vec<String>,
}

/// One output section of the link map with its input sections in output order.
#[derive(Clone, Debug, PartialEq)]
pub struct OutputSection {
    pub name: String,
    pub vma: u64,
    pub size: u64,
    pub inputs: Vec<InputSection>,
}

/// Parses an lld `-Map` file (`VMA LMA Size Align Out In Symbol` columns).
pub fn parse_map(text: &str, path: &Path) -> Result<Vec<OutputSection>> {
    let mut lines = text.lines().enumerate();
    let header = lines.next().map(|(_, l)| l).unwrap_or("");
    let (Some(col_out), Some(col_in), Some(col_sym)) = (
        header.find(" Out ").map(|i| i + 1),
        header.find(" In ").map(|i| i + 1),
        header.find(" Symbol"),
    ) else {
        bail!(
            "{}: not an lld map file (no `VMA LMA Size Align Out In Symbol` header)",
            path.display()
        );
    };
    let col_sym = col_sym + 1;
    let mut out: Vec<OutputSection> = Vec::new();
    for (no, line) in lines {
        if line.trim().is_empty() || line.len() <= col_out {
            continue;
        }
        let bad = || format!("{}:{}: malformed map line {line:?}", path.display(), no + 1);
        // VMA, LMA and Size are hexadecimal, Align decimal.
        let fields: Vec<&str> = line[..col_out].split_whitespace().collect();
        let hex = |i: usize| fields.get(i).and_then(|f| u64::from_str_radix(f, 16).ok());
        let (Some(vma), Some(size), Some(align)) =
            (hex(0), hex(2), fields.get(3).and_then(|f| f.parse().ok()))
        else {
            bail!(bad())
        };
        let rest = &line[col_out..];
        let depth = rest.len() - rest.trim_start().len();
        let name = rest.trim().to_string();
        if depth >= col_sym - col_out {
            if let Some(isec) = out.last_mut().and_then(|o| o.inputs.last_mut()) {
                isec.symbols.push(name);
            }
        } else if depth >= col_in - col_out {
            let Some(osec) = out.last_mut() else { bail!(bad()) };
            osec.inputs.push(InputSection { id: name, vma, size, align, symbols: Vec::new() });
        } else {
            out.push(OutputSection { name, vma, size, inputs: Vec::new() });
        }
    }
    if out.is_empty() {
        bail!("{}: the map lists no output section", path.display());
    }
    Ok(out)
}

/// A deterministic pseudo-random stream (SplitMix64): the same seed gives the same layout on
/// every machine.
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Output sections whose first input section may carry a segment-start padding, as in lld 20.
fn paddable(name: &str) -> bool {
    name.starts_with(".text") || matches!(name, ".rodata" | ".data.rel.ro" | ".data" | ".bss")
}

/// A generated layout: the padding object's assembly, the ordering file and what was inserted.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub assembly: String,
    pub ordering: String,
    /// (output section, bytes) of every segment-start padding.
    pub segment_padding: Vec<(String, u64)>,
    /// Padding inserted before `.text` input sections: count and bytes.
    pub section_paddings: usize,
    pub section_padding_bytes: u64,
    /// `.text` input sections with code that cannot be placed exactly: without a symbol (lld
    /// puts them after the ordered ones), or whose names all belong to earlier sections too
    /// (same-named static functions: lld puts them next to the first).
    pub unplaced: usize,
}

/// Plans the layout for `seed` from the default link's map. `load_segments` gives, for each
/// output section name, the index of the PT_LOAD that holds it (sections in no PT_LOAD are
/// absent).
pub fn plan(
    map: &[OutputSection],
    load_segments: &HashMap<String, usize>,
    seed: u64,
    max_page_size: u64,
) -> Layout {
    let mut rng = SplitMix64::new(seed);
    let mut asm = String::from("# profgen-ab layout padding (generated)\n");
    let mut ordering = String::new();
    let mut layout = Layout {
        assembly: String::new(),
        ordering: String::new(),
        segment_padding: Vec::new(),
        section_paddings: 0,
        section_padding_bytes: 0,
        unplaced: 0,
    };
    let mut pads = 0usize;
    let mut add_pad = |asm: &mut String, ordering: &mut String, section: &str, bytes: u64| {
        let sym = format!("__profgen_ab_pad_{pads}");
        let (flags, fill) = match section {
            s if s.starts_with(".text") => ("axR\",@progbits", "0xcc"),
            ".rodata" => ("aR\",@progbits", "0"),
            ".bss" => ("awR\",@nobits", ""),
            _ => ("awR\",@progbits", "0"),
        };
        let body = if fill.is_empty() {
            format!(".zero {bytes}")
        } else {
            format!(".fill {bytes}, 1, {fill}")
        };
        let _ = writeln!(
            asm,
            ".section {section}.profgen_ab_pad_{pads},\"{flags}\n.p2align 0\n.globl {sym}\n.hidden {sym}\n{sym}:\n{body}"
        );
        let _ = writeln!(ordering, "{sym}");
        pads += 1;
    };
    // Names that occur more than once cannot place one section precisely; prefer unique ones.
    let mut count: HashMap<&str, usize> = HashMap::new();
    for s in map.iter().flat_map(|o| &o.inputs).flat_map(|i| &i.symbols) {
        *count.entry(s.as_str()).or_default() += 1;
    }
    let mut listed: HashSet<&str> = HashSet::new();
    let mut current_segment = None;
    for osec in map {
        if !paddable(&osec.name) {
            continue;
        }
        let Some(&segment) = load_segments.get(&osec.name) else { continue };
        if current_segment != Some(segment) {
            current_segment = Some(segment);
            let bytes = rng.next_u64() % max_page_size.max(1);
            layout.segment_padding.push((osec.name.clone(), bytes));
            add_pad(&mut asm, &mut ordering, &osec.name, bytes);
        }
        if !osec.name.starts_with(".text") {
            continue;
        }
        for isec in &osec.inputs {
            if rng.next_u64().is_multiple_of(16) {
                layout.section_paddings += 1;
                layout.section_padding_bytes += isec.align;
                add_pad(&mut asm, &mut ordering, &osec.name, isec.align);
            }
            let pick = isec
                .symbols
                .iter()
                .find(|s| count[s.as_str()] == 1)
                .or_else(|| isec.symbols.iter().find(|s| !listed.contains(s.as_str())));
            match pick {
                Some(s) => {
                    listed.insert(s);
                    let _ = writeln!(ordering, "{s}");
                }
                None if isec.size > 0 => layout.unplaced += 1,
                None => {}
            }
        }
    }
    layout.assembly = asm;
    layout.ordering = ordering;
    layout
}

/// How far a padded link is from the default one in `.text`: the number of non-padding input
/// sections with code whose position in the sequence changed, out of all of them. Sections are
/// known by their name and first symbol, not by their file: a compiler driver that compiles and
/// links in one step names its objects randomly.
pub fn fidelity(default: &[OutputSection], padded: &[OutputSection]) -> (usize, usize) {
    let seq = |m: &[OutputSection]| -> Vec<String> {
        m.iter()
            .filter(|o| o.name.starts_with(".text"))
            .flat_map(|o| &o.inputs)
            .filter(|i| !i.id.contains("profgen_ab_pad_") && i.size > 0)
            .map(|i| {
                let section = i.id.rfind(":(").map_or(i.id.as_str(), |p| &i.id[p..]);
                format!("{section} {}", i.symbols.first().map_or("", String::as_str))
            })
            .collect()
    };
    let (a, b) = (seq(default), seq(padded));
    let moved = a.iter().zip(&b).filter(|(x, y)| x != y).count() + a.len().abs_diff(b.len());
    (moved, a.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAP: &str = "             VMA              LMA     Size Align Out     In      Symbol
             560              560       20    16 .rodata
             560              560        4     4         <internal>:(.rodata.cst4)
             570              570       10    16         m.o:(.rodata.tab)
             570              570       10     1                 tab
            1660             1660      157    16 .text
            1660             1660       22    16         Scrt1.o:(.text)
            1660             1660       22     1                 _start
            1682             1682        0     1         crti.o:(.text)
            1750             1750       1c    16         m.o:(.text.g)
            1750             1750       1c     1                 g
            1770             1770        d    16         a.o:(.text.helper)
            1770             1770        d     1                 helper
            1780             1780        d    32         b.o:(.text.helper)
            1780             1780        d     1                 helper
            17a0             17a0        4    16         c.o:(.text)
            39d8             39d8       10     8 .data
            39d8             39d8        4     1         Scrt1.o:(.data)
";

    #[test]
    fn parses_lld_maps() {
        let m = parse_map(MAP, Path::new("m.map")).unwrap();
        assert_eq!(
            m.iter().map(|o| o.name.as_str()).collect::<Vec<_>>(),
            [".rodata", ".text", ".data"]
        );
        let text = &m[1];
        assert_eq!((text.vma, text.size, text.inputs.len()), (0x1660, 0x157, 6));
        assert_eq!(
            text.inputs[2],
            InputSection {
                id: "m.o:(.text.g)".into(),
                vma: 0x1750,
                size: 0x1c,
                align: 16,
                symbols: vec!["g".into()]
            }
        );
        assert!(
            parse_map("hello\n", Path::new("x"))
                .unwrap_err()
                .to_string()
                .contains("x: not an lld map")
        );
        let bad = MAP.replacen(
            "             560              560       20",
            "              zz              560       20",
            1,
        );
        assert!(
            parse_map(&bad, Path::new("b.map"))
                .unwrap_err()
                .to_string()
                .starts_with("b.map:2: malformed")
        );
    }

    #[test]
    fn plans_padding_in_default_order() {
        let m = parse_map(MAP, Path::new("m.map")).unwrap();
        let segs = HashMap::from([(".rodata".into(), 0), (".text".into(), 1), (".data".into(), 2)]);
        let l = plan(&m, &segs, 7, 4096);
        // One segment padding per PT_LOAD, at its first paddable output section.
        assert_eq!(
            l.segment_padding.iter().map(|(s, _)| s.as_str()).collect::<Vec<_>>(),
            [".rodata", ".text", ".data"]
        );
        assert!(l.segment_padding.iter().all(|&(_, b)| b < 4096));
        // Every .text section with a symbol is listed in map order; the duplicate `helper` once
        // (b.o's follows a.o's); c.o's symbol-less code cannot be ordered.
        let syms: Vec<&str> =
            l.ordering.lines().filter(|s| !s.starts_with("__profgen_ab_pad_")).collect();
        assert_eq!(syms, ["_start", "g", "helper"]);
        assert_eq!(l.unplaced, 2);
        assert_eq!(l.ordering.lines().count(), 3 + 3 + l.section_paddings);
        assert_eq!(l.assembly.matches(".section").count(), 3 + l.section_paddings);
        // Same seed, same layout; the padding is seed dependent.
        assert_eq!(plan(&m, &segs, 7, 4096), l);
        assert_ne!(plan(&m, &segs, 8, 4096).segment_padding, l.segment_padding);
        // With probability 1/16 per section, over many seeds about 1/16 of sections get padding.
        let padded: usize = (0..1600).map(|s| plan(&m, &segs, s, 4096).section_paddings).sum();
        let rate = padded as f64 / (1600.0 * 6.0);
        assert!((rate - 1.0 / 16.0).abs() < 0.015, "padding rate {rate}");
    }

    #[test]
    fn fidelity_counts_moved_sections() {
        let m = parse_map(MAP, Path::new("m.map")).unwrap();
        assert_eq!(fidelity(&m, &m), (0, 5));
        let mut swapped = m.clone();
        swapped[1].inputs.swap(2, 3);
        assert_eq!(fidelity(&m, &swapped), (2, 5));
        // Another object file name (a one-step compile and link) is the same section.
        let mut renamed = m.clone();
        renamed[1].inputs[2].id = "/tmp/m-1234.o:(.text.g)".into();
        assert_eq!(fidelity(&m, &renamed), (0, 5));
    }
}
