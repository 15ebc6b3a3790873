//! DWARF: subprograms (the functions llvm-profgen knows) and inline stacks exactly as
//! `LLVMSymbolizer::symbolizeInlinedCode` + llvm-profgen's `symbolize` produce them
//! (reference §3.5).
//!
//! In: the DWARF sections of the binary (or of `--debug-binary`). Out: [`DebugInfo`], which
//! keeps a compact copy of every subroutine DIE (name, decl line, call line, call
//! discriminator, parent) and an address map built like LLVM's `DWARFUnit::AddrDieMap`. Line
//! tables are parsed lazily per unit on first use, so symbolizing a few hot functions of a huge
//! binary stays cheap. Skeleton units of split DWARF are completed from their `.dwo` files.
//! addr2line's API exposes neither `DW_AT_decl_line` nor discriminators, so this uses gimli
//! directly.

use super::SourceFrame;
use super::elf::Elf;
use crate::llvm::{MAX_CONTEXT_FRAMES, canonical_fn_name};
use gimli::{AttributeValue, DwAt, EndianSlice, RunTimeEndian, UnitOffset};
use hashbrown::HashMap;
use object::Object;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

type Reader<'a> = EndianSlice<'a, RunTimeEndian>;
type Unit<'a> = gimli::Unit<Reader<'a>>;

const NO_PARENT: u32 = u32::MAX;

/// A `DW_TAG_subprogram` or `DW_TAG_inlined_subroutine` DIE.
#[derive(Clone, Debug)]
struct Node {
    /// Linkage name, else name, following abstract_origin/specification.
    name: Option<Arc<str>>,
    decl_line: u64,
    /// `DW_AT_call_line` / `DW_AT_GNU_discriminator` of an inlined subroutine (0 otherwise).
    call_line: u64,
    call_discriminator: u64,
    /// Enclosing subroutine node of an inlined subroutine; none for a subprogram, where LLVM's
    /// inline chain ends.
    parent: u32,
    unit: u32,
}

/// A subprogram DIE with ranges: a function as llvm-profgen-19 loads it (ranges unfiltered).
#[derive(Clone, Debug)]
pub struct Subprogram {
    pub name: Arc<str>,
    pub ranges: Vec<(u64, u64)>,
}

#[derive(Clone, Copy, Debug)]
struct Row {
    addr: u64,
    line: u64,
    discriminator: u64,
}

/// One unit's line table: sequences sorted by end address (LLVM's lookup order).
#[derive(Debug, Default)]
struct LineTable {
    /// `(low, high, first row, row end)`.
    sequences: Vec<(u64, u64, usize, usize)>,
    rows: Vec<Row>,
}

impl LineTable {
    /// LLVM's `lookupAddress`: first sequence ending after `a` that contains it, then the last
    /// row at or before `a`.
    fn lookup(&self, a: u64) -> Option<Row> {
        let s = self.sequences.partition_point(|seq| seq.1 <= a);
        let &(low, _, first, end) = self.sequences.get(s)?;
        if a < low {
            return None;
        }
        let rows = &self.rows[first..end];
        let i = rows.partition_point(|r| r.addr <= a);
        rows.get(i.checked_sub(1)?).copied()
    }
}

struct UnitLines {
    offset: Option<gimli::DebugLineOffset<usize>>,
    address_size: u8,
    table: OnceLock<LineTable>,
}

/// What profgen keeps of the DWARF.
pub struct DebugInfo {
    nodes: Vec<Node>,
    /// `(start, end, node)`, sorted, disjoint: the innermost subroutine DIE per address.
    addr_map: Vec<(u64, u64, u32)>,
    units: Vec<UnitLines>,
    debug_line: Vec<u8>,
    endian: RunTimeEndian,
    pub subprograms: Vec<Subprogram>,
    /// Problems that made part of the DWARF unusable.
    pub warnings: Vec<String>,
}

/// Names, decl line found on a DIE or through its abstract_origin/specification chain.
#[derive(Clone)]
struct Resolved<S = Arc<str>> {
    linkage: Option<S>,
    name: Option<S>,
    decl_line: Option<u64>,
}

impl<S> Default for Resolved<S> {
    fn default() -> Self {
        Resolved { linkage: None, name: None, decl_line: None }
    }
}

/// Per-worker DIE reader; caches parsed units and resolved names of the DIEs it visits
/// (references may cross units).
struct Loader<'d, 'a> {
    dwarf: &'d gimli::Dwarf<Reader<'a>>,
    headers: &'d [gimli::UnitHeader<Reader<'a>>],
    /// Where to look for `.dwo` files besides the skeleton's comp_dir.
    binary_dir: &'d Path,
    /// The split-DWARF package (`.dwp`), looked in before any `.dwo` file.
    package: Option<&'d gimli::DwarfPackage<Reader<'a>>>,
    parsed_units: HashMap<usize, Rc<Unit<'a>>>,
    memo: HashMap<usize, Resolved>,
    names: hashbrown::HashSet<Arc<str>>,
    /// Names by where they are in the section (`.debug_str` holds each string once), so a
    /// string met again is neither validated nor hashed by content.
    names_at: HashMap<(usize, usize), Arc<str>>,
}

/// What one unit contributes; node indices (and parents) are local to the unit.
#[derive(Default)]
struct UnitResult {
    nodes: Vec<Node>,
    /// `(start, end, node)` in DIE order, parents before children.
    ranges: Vec<(u64, u64, u32)>,
    /// `ranges` inserted into an address map of their own (`(start, end, node)` by start),
    /// and whether every insertion was regular (see [`insert_range`]).
    map: Vec<(u64, u64, u32)>,
    regular: bool,
    subprograms: Vec<Subprogram>,
    line_offset: Option<gimli::DebugLineOffset<usize>>,
    address_size: u8,
    /// A skeleton unit whose `.dwo` could not be read: the reason.
    missing_dwo: Option<String>,
    error: Option<String>,
    /// Inlined subroutines nested deeper than [`MAX_CONTEXT_FRAMES`], left out.
    too_deep: u64,
}

impl DebugInfo {
    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Reads all DIEs of `obj`, split units from the package `dwp` (the bytes of a `.dwp` file)
    /// or from `.dwo` files. Address ranges below `preferred_base` (code discarded by the linker)
    /// are left out of the address map.
    pub fn load(
        obj: &Elf<'_>,
        dwp: Option<&[u8]>,
        preferred_base: u64,
        binary_dir: &Path,
    ) -> DebugInfo {
        let endian =
            if obj.is_little_endian() { RunTimeEndian::Little } else { RunTimeEndian::Big };
        let unreadable = std::cell::RefCell::new(Vec::new());
        let load = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, std::convert::Infallible> {
            let data = obj.section_by_name(id.name()).map(|s| super::elf::section_data(&s));
            Ok(match data {
                Some(Ok(data)) => data,
                Some(Err(e)) => {
                    unreadable.borrow_mut().push(format!("{}: {e}; ignored", id.name()));
                    Cow::Borrowed(&[])
                }
                None => Cow::Borrowed(&[]),
            })
        };
        let Ok(sections) = gimli::DwarfSections::load(load);
        let mut warnings = unreadable.into_inner();
        let dwarf = sections.borrow(|s| EndianSlice::new(s, endian));
        let package_obj = match dwp.map(super::elf::parse).transpose() {
            Ok(obj) => obj,
            Err(e) => {
                warnings.push(format!("split-DWARF package: {e}; ignored"));
                None
            }
        };
        let package_sections = package_obj.as_ref().and_then(|p| {
            gimli::DwarfPackageSections::load(|id: gimli::SectionId| {
                let data = id.dwo_name().and_then(|n| p.section_by_name(n));
                Ok::<_, gimli::Error>(
                    data.and_then(|s| super::elf::section_data(&s).ok())
                        .unwrap_or(Cow::Borrowed(&[][..])),
                )
            })
            .ok()
        });
        let package = match package_sections
            .as_ref()
            .map(|s| s.borrow(|s| EndianSlice::new(s, endian), EndianSlice::new(&[], endian)))
        {
            Some(Ok(p)) => Some(p),
            Some(Err(e)) => {
                warnings.push(format!("split-DWARF package: {e}; ignored"));
                None
            }
            None => None,
        };
        let mut headers = Vec::new();
        let mut iter = dwarf.units();
        loop {
            match iter.next() {
                Ok(Some(h)) => headers.push(h),
                Ok(None) => break,
                Err(e) => {
                    warnings.push(format!("malformed .debug_info unit header: {e}"));
                    break;
                }
            }
        }
        let debug_line = obj
            .section_by_name(".debug_line")
            .and_then(|s| super::elf::section_data(&s).ok())
            .map(Cow::into_owned)
            .unwrap_or_default();
        use rayon::prelude::*;
        let mut results: Vec<UnitResult> = (0..headers.len())
            .into_par_iter()
            .map_init(
                || Loader {
                    dwarf: &dwarf,
                    headers: &headers,
                    binary_dir,
                    package: package.as_ref(),
                    parsed_units: HashMap::new(),
                    memo: HashMap::new(),
                    names: hashbrown::HashSet::new(),
                    names_at: HashMap::new(),
                },
                |loader, i| loader.load_unit(i, preferred_base),
            )
            .collect();
        let mut info = DebugInfo {
            nodes: Vec::new(),
            addr_map: Vec::new(),
            units: Vec::new(),
            debug_line,
            endian,
            subprograms: Vec::new(),
            warnings,
        };
        // Merged in unit order, so the address map is built exactly as a sequential walk would.
        let mut unit_maps = Vec::with_capacity(results.len());
        let (mut missing_dwo, mut missing_dwo_count) = (None, 0);
        let mut too_deep = 0u64;
        for (ui, r) in results.iter_mut().enumerate() {
            let first = info.nodes.len() as u32;
            info.nodes.extend(std::mem::take(&mut r.nodes).into_iter().map(|mut n| {
                if n.parent != NO_PARENT {
                    n.parent += first;
                }
                n.unit = ui as u32;
                n
            }));
            let map = std::mem::take(&mut r.map);
            unit_maps.push(UnitMap { first, ranges: &r.ranges, map, regular: r.regular });
            info.subprograms.append(&mut r.subprograms);
            info.units.push(UnitLines {
                offset: r.line_offset,
                address_size: r.address_size,
                table: OnceLock::new(),
            });
            too_deep += r.too_deep;
            if let Some(why) = r.missing_dwo.take() {
                missing_dwo.get_or_insert(why);
                missing_dwo_count += 1;
            }
            if let Some(e) = &r.error {
                let off = headers[ui].offset().0;
                info.warnings
                    .push(format!("malformed DWARF unit at .debug_info offset {off:#x}: {e}"));
            }
        }
        if too_deep > 0 {
            info.warnings.push(format!(
                "{too_deep} inlined subroutines are nested deeper than {MAX_CONTEXT_FRAMES} frames; \
                 their code counts as the innermost inlinee above them"
            ));
        }
        if let Some(first) = missing_dwo {
            info.warnings.push(format!(
                "DWO debug information was not loaded for {missing_dwo_count} modules. Please \
                 check the .o, .dwo or .dwp path. (first: {first})"
            ));
        }
        info.addr_map =
            merge_unit_maps(&unit_maps).unwrap_or_else(|| sequential_addr_map(&unit_maps));
        info
    }

    /// The innermost subroutine DIE covering `a`: addresses with the same node have the same
    /// inline frames but for the leaf frame's line ([`node_frames`](Self::node_frames)).
    pub fn node_at(&self, a: u64) -> Option<u32> {
        let i = self.addr_map.partition_point(|e| e.0 <= a).checked_sub(1)?;
        let (_, end, node) = self.addr_map[i];
        (a < end).then_some(node)
    }

    /// [`node_at`](Self::node_at) of each of `addrs`, which ascend: one search for the first,
    /// then a walk along the map (a function's instructions, each searched, cost more than the
    /// rest of a walk over them).
    pub fn nodes_at(&self, addrs: impl Iterator<Item = u64>) -> impl Iterator<Item = Option<u32>> {
        // Entries starting at or before the last address: the last of them is node_at's.
        let mut at: Option<usize> = None;
        addrs.map(move |a| {
            let map = &self.addr_map;
            let i = at.get_or_insert_with(|| map.partition_point(|e| e.0 <= a));
            while map.get(*i).is_some_and(|e| e.0 <= a) {
                *i += 1;
            }
            let &(_, end, node) = map.get(i.checked_sub(1)?)?;
            (a < end).then_some(node)
        })
    }

    /// The address-map entries `[start, end)` whose inline chain (the innermost subroutine DIE
    /// and the subroutines it is inlined into) has a DIE named `wanted` accepts (by canonical
    /// name): every address where such a function may have a frame. Sorted.
    pub fn ranges_naming(&self, wanted: &(dyn Fn(&str) -> bool + Sync)) -> Vec<(u64, u64)> {
        // A node's parent comes before it (units are walked parents first).
        let mut named = vec![false; self.nodes.len()];
        // Names are shared allocations (interned per unit walker): one test per allocation.
        let mut by_name: HashMap<*const u8, bool> = HashMap::new();
        for (i, n) in self.nodes.iter().enumerate() {
            named[i] = n.name.as_ref().is_some_and(|s| {
                *by_name
                    .entry(Arc::as_ptr(s) as *const u8)
                    .or_insert_with(|| wanted(canonical_fn_name(s)))
            }) || (n.parent != NO_PARENT && named.get(n.parent as usize) == Some(&true));
        }
        self.addr_map.iter().filter(|e| named[e.2 as usize]).map(|e| (e.0, e.1)).collect()
    }

    fn lines(&self, unit: u32) -> Option<&LineTable> {
        let u = self.units.get(unit as usize)?;
        let offset = u.offset?;
        Some(u.table.get_or_init(|| {
            parse_line_table(&self.debug_line, self.endian, offset, u.address_size)
                .unwrap_or_default()
        }))
    }

    /// Inline frames of the addresses of `node` ([`node_at`](Self::node_at)), outermost first;
    /// the leaf frame's line is the line table's at `leaf_at`, or line 0 without it (every
    /// frame but the leaf's location, without a line-table lookup).
    pub fn node_frames(&self, node: u32, leaf_at: Option<u64>) -> Vec<SourceFrame> {
        let leaf_row = leaf_at
            .and_then(|a| self.lines(self.nodes[node as usize].unit).and_then(|t| t.lookup(a)));
        // Innermost first, as LLVM's inlined chain.
        let mut chain = vec![node];
        let mut n = node;
        while self.nodes[n as usize].parent != NO_PARENT && chain.len() <= self.nodes.len() {
            n = self.nodes[n as usize].parent;
            chain.push(n);
        }
        let mut frames = Vec::with_capacity(chain.len());
        for i in (0..chain.len()).rev() {
            let node = &self.nodes[chain[i] as usize];
            let Some(name) = node.name.as_ref().filter(|n| !n.is_empty()) else {
                break;
            };
            let (line, discriminator) = if i == 0 {
                leaf_row.map_or((0, 0), |r| (r.line, r.discriminator))
            } else {
                let callee = &self.nodes[chain[i - 1] as usize];
                (callee.call_line, callee.call_discriminator)
            };
            frames.push(SourceFrame {
                func_name: name.clone(),
                line_offset: (line.wrapping_sub(node.decl_line) & 0xffff) as u32,
                discriminator: discriminator as u32,
            });
        }
        frames
    }
}

impl<'a> Loader<'_, 'a> {
    fn intern(&mut self, s: Reader<'a>) -> Arc<str> {
        let at = (s.slice().as_ptr() as usize, s.len());
        if let Some(a) = self.names_at.get(&at) {
            return a.clone();
        }
        let s = crate::text::lossy_utf8(s.slice());
        let a = match self.names.get(s.as_ref()) {
            Some(a) => a.clone(),
            None => {
                let a: Arc<str> = Arc::from(s.as_ref());
                self.names.insert(a.clone());
                a
            }
        };
        self.names_at.insert(at, a.clone());
        a
    }

    /// `Dwarf::attr_string`, the end of a `.debug_str` string found by `memchr`: gimli's
    /// search goes byte by byte, and Rust's linkage names are long (on profgen-debug the
    /// search was half of the names' cost).
    fn attr_string(
        &self,
        unit: &Unit<'a>,
        value: AttributeValue<Reader<'a>>,
    ) -> gimli::Result<Reader<'a>> {
        let off = match value {
            AttributeValue::DebugStrRef(off) => Some(off),
            AttributeValue::DebugStrOffsetsIndex(i) => self.dwarf.string_offset(unit, i).ok(),
            _ => None,
        };
        let section = gimli::Section::reader(&self.dwarf.debug_str);
        let bytes = off.and_then(|off| section.slice().get(off.0..));
        match bytes.and_then(|b| Some(&b[..memchr::memchr(0, b)?])) {
            Some(s) => Ok(EndianSlice::new(s, gimli::Reader::endian(section))),
            None => self.dwarf.attr_string(unit, value),
        }
    }

    fn unit(&mut self, i: usize) -> gimli::Result<Rc<Unit<'a>>> {
        if let Some(u) = self.parsed_units.get(&i) {
            return Ok(u.clone());
        }
        let unit = Rc::new(self.dwarf.unit(self.headers[i])?);
        self.parsed_units.insert(i, unit.clone());
        Ok(unit)
    }

    fn unit_containing(&self, off: usize) -> Option<usize> {
        let i = self.headers.partition_point(|h| h.offset().0 <= off).checked_sub(1)?;
        Some(i)
    }

    fn load_unit(&mut self, ui: usize, preferred_base: u64) -> UnitResult {
        let mut out = UnitResult::default();
        let unit = match self.unit(ui) {
            Ok(unit) => unit,
            Err(e) => {
                out.error = Some(e.to_string());
                return out;
            }
        };
        // Line tables stay in the main file even for split units.
        out.line_offset = unit.line_program.as_ref().map(|p| p.header().offset());
        out.address_size = unit.header.address_size();
        let walked = if unit.dwo_id.is_some() {
            match self.load_dwo(&unit, preferred_base, &mut out) {
                Ok(()) => Ok(()),
                Err(why) => {
                    out.missing_dwo = Some(why);
                    // The skeleton itself may still describe some code.
                    self.walk_unit(ui, preferred_base, &mut out)
                }
            }
        } else {
            self.walk_unit(ui, preferred_base, &mut out)
        };
        if let Err(e) = walked {
            out.error = Some(e.to_string());
        }
        let subprogram = |node: u32| out.nodes[node as usize].parent == NO_PARENT;
        (out.map, out.regular) = unit_addr_map(&out.ranges, subprogram);
        out
    }

    /// Reads the split compilation unit of skeleton unit `skeleton`: from the package when it has
    /// the unit, else from the `.dwo` file (found in its comp_dir, as given, or next to the
    /// binary).
    fn load_dwo(
        &self,
        skeleton: &Unit<'a>,
        preferred_base: u64,
        out: &mut UnitResult,
    ) -> Result<(), String> {
        if let (Some(package), Some(id)) = (self.package, skeleton.dwo_id) {
            match package.find_cu(id, self.dwarf) {
                Ok(Some(dwo)) => {
                    let what = |e: &dyn std::fmt::Display| format!("split-DWARF package: {e}");
                    return self.walk_split_unit(&dwo, skeleton, preferred_base, out, &what);
                }
                Ok(None) => {}
                Err(e) => return Err(format!("split-DWARF package: {e}")),
            }
        }
        let name = skeleton
            .dwo_name()
            .ok()
            .flatten()
            .and_then(|v| self.dwarf.attr_string(skeleton, v).ok())
            .map(|s| String::from_utf8_lossy(s.slice()).into_owned())
            .ok_or("skeleton unit without DW_AT_dwo_name")?;
        let name_path = Path::new(&name);
        let mut candidates = Vec::new();
        if let Some(dir) = &skeleton.comp_dir {
            candidates.push(Path::new(&*String::from_utf8_lossy(dir.slice())).join(name_path));
        }
        candidates.push(name_path.to_path_buf());
        if let Some(file) = name_path.file_name() {
            candidates.push(self.binary_dir.join(file));
        }
        let (path, file) = candidates
            .iter()
            .find_map(|p| Some((p, std::fs::File::open(p).ok()?)))
            .ok_or_else(|| format!("{name}: not found"))?;
        let what = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
        // SAFETY: read-only mapping, as for the binary itself.
        let data = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| what(&e))?;
        let obj = super::elf::parse(&data).map_err(|e| what(&e))?;
        let endian = gimli::Reader::endian(gimli::Section::reader(&self.dwarf.debug_info));
        let load = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, std::convert::Infallible> {
            let section = id.dwo_name().and_then(|n| obj.section_by_name(n));
            Ok(section
                .and_then(|s| super::elf::section_data(&s).ok())
                .unwrap_or(Cow::Borrowed(&[])))
        };
        let Ok(sections) = gimli::DwarfSections::load(load);
        let mut dwo = sections.borrow(|s| EndianSlice::new(s, endian));
        dwo.make_dwo(self.dwarf);
        self.walk_split_unit(&dwo, skeleton, preferred_base, out, &what)
    }

    /// Walks the split compilation unit of `dwo` whose DWO id is the skeleton's.
    fn walk_split_unit<'b>(
        &self,
        dwo: &gimli::Dwarf<Reader<'b>>,
        skeleton: &Unit<'b>,
        preferred_base: u64,
        out: &mut UnitResult,
        what: &dyn Fn(&dyn std::fmt::Display) -> String,
    ) -> Result<(), String> {
        let mut headers = Vec::new();
        let mut iter = dwo.units();
        while let Some(h) = iter.next().map_err(|e| what(&e))? {
            headers.push(h);
        }
        let index = headers
            .iter()
            .position(|h| matches!(h.type_(), gimli::UnitType::SplitCompilation(id) if Some(id) == skeleton.dwo_id))
            .ok_or_else(|| what(&"no split compilation unit with the skeleton's DWO id"))?;
        let mut unit = dwo.unit(headers[index]).map_err(|e| what(&e))?;
        unit.copy_relocated_attributes(skeleton);
        let mut loader = Loader {
            dwarf: dwo,
            headers: &headers,
            binary_dir: self.binary_dir,
            package: None,
            parsed_units: HashMap::new(),
            memo: HashMap::new(),
            names: hashbrown::HashSet::new(),
            names_at: HashMap::new(),
        };
        loader.parsed_units.insert(index, Rc::new(unit));
        loader.walk_unit(index, preferred_base, out).map_err(|e| what(&e))
    }

    fn walk_unit(
        &mut self,
        ui: usize,
        preferred_base: u64,
        out: &mut UnitResult,
    ) -> gimli::Result<()> {
        let unit = self.unit(ui)?;
        // Raw entries: the attributes of DIEs that are no subroutine (most of them: variables,
        // parameters, types, lexical blocks) are skipped, not parsed into a list.
        let mut raw = unit.entries_raw(None)?;
        let mut entry = gimli::DebuggingInformationEntry::null();
        // (depth, node) of the enclosing subroutine DIEs.
        let mut stack: Vec<(isize, u32)> = Vec::new();
        // One list for every DIE's ranges: a subprogram keeps a copy of its own.
        let mut ranges = Vec::new();
        while !raw.is_empty() {
            let (depth, offset) = (raw.next_depth(), raw.next_offset());
            let Some(abbrev) = raw.read_abbreviation()? else { continue };
            while stack.last().is_some_and(|&(d, _)| d >= depth) {
                stack.pop();
            }
            let tag = abbrev.tag();
            let inlined = tag == gimli::DW_TAG_inlined_subroutine;
            if tag != gimli::DW_TAG_subprogram && !inlined {
                raw.skip_attributes(abbrev.attributes())?;
                continue;
            }
            raw.read_attributes(abbrev.attributes(), &mut entry.attrs)?;
            (entry.tag, entry.has_children, entry.offset, entry.depth) =
                (tag, abbrev.has_children(), offset, depth);
            let entry = &entry;
            // Inline stacks become nested profiles: their depth is bounded like contexts'.
            if inlined && stack.len() >= MAX_CONTEXT_FRAMES {
                out.too_deep += 1;
                continue;
            }
            ranges.clear();
            let mut iter = self.dwarf.die_ranges(&unit, entry)?;
            while let Some(r) = iter.next()? {
                ranges.push((r.begin, r.end));
            }
            let udata = |at: DwAt| entry.attr_value(at).and_then(|v| v.udata_value()).unwrap_or(0);
            let (call_line, call_discriminator) = if inlined {
                (udata(gimli::DW_AT_call_line), udata(gimli::DW_AT_GNU_discriminator))
            } else {
                (0, 0)
            };
            // References (specification, abstract origin) lead to subprograms, never to an
            // inlined subroutine: those need no memo, and the walk has parsed them already.
            let resolved = if inlined {
                self.resolve_entry(ui, &unit, entry, 0)
            } else {
                self.resolve(ui, entry.offset(), Some(entry), 0)
            };
            let name = resolved.linkage.or(resolved.name);
            let parent = if inlined { stack.last().map_or(NO_PARENT, |s| s.1) } else { NO_PARENT };
            let node = out.nodes.len() as u32;
            out.nodes.push(Node {
                name: name.clone(),
                decl_line: resolved.decl_line.unwrap_or(0),
                call_line,
                call_discriminator,
                parent,
                unit: 0,
            });
            stack.push((depth, node));
            for &(lo, hi) in &ranges {
                if hi > lo && lo >= preferred_base {
                    out.ranges.push((lo, hi, node));
                }
            }
            if !inlined
                && let Some(name) = name
                && !ranges.is_empty()
            {
                out.subprograms.push(Subprogram { name, ranges: ranges.clone() });
            }
        }
        Ok(())
    }

    /// LLVM's `findRecursively` for the linkage name, name and decl line: the DIE's own
    /// attribute, else its specification's, else its abstract origin's.
    /// `entry` is the DIE at `off` when the caller has parsed it.
    fn resolve(
        &mut self,
        ui: usize,
        off: UnitOffset<usize>,
        entry: Option<&gimli::DebuggingInformationEntry<Reader<'a>>>,
        depth: u32,
    ) -> Resolved {
        // The header gives the memo's key; the unit (a map lookup) only for a DIE not seen yet.
        let Some(global) = off.to_debug_info_offset(&self.headers[ui]) else {
            return Resolved::default();
        };
        if let Some(r) = self.memo.get(&global.0) {
            return r.clone();
        }
        let Ok(unit) = self.unit(ui) else {
            return Resolved::default();
        };
        // Placeholder against reference cycles.
        self.memo.insert(global.0, Resolved::default());
        let parsed;
        let entry = match entry {
            Some(entry) => entry,
            None => match unit.entry(off) {
                Ok(e) => {
                    parsed = e;
                    &parsed
                }
                Err(_) => return Resolved::default(),
            },
        };
        let out = self.resolve_entry(ui, &unit, entry, depth);
        self.memo.insert(global.0, out.clone());
        out
    }

    /// [`resolve`](Self::resolve) of a parsed DIE, not memoized.
    fn resolve_entry(
        &mut self,
        ui: usize,
        unit: &Unit<'a>,
        entry: &gimli::DebuggingInformationEntry<Reader<'a>>,
        depth: u32,
    ) -> Resolved {
        let mut r: Resolved<Reader<'a>> = Resolved::default();
        for attr in entry.attrs() {
            match attr.name() {
                gimli::DW_AT_linkage_name | gimli::DW_AT_MIPS_linkage_name
                    if r.linkage.is_none() =>
                {
                    if let Ok(s) = self.attr_string(unit, attr.value()) {
                        r.linkage = Some(s);
                    }
                }
                gimli::DW_AT_name if r.name.is_none() => {
                    if let Ok(s) = self.attr_string(unit, attr.value()) {
                        r.name = Some(s);
                    }
                }
                gimli::DW_AT_decl_line => r.decl_line = attr.udata_value(),
                _ => {}
            }
        }
        let mut out = Resolved {
            linkage: r.linkage.map(|s| self.intern(s)),
            name: r.name.map(|s| self.intern(s)),
            decl_line: r.decl_line,
        };
        // Specification first, as LLVM's worklist pops it before the abstract origin.
        let refs = [gimli::DW_AT_specification, gimli::DW_AT_abstract_origin]
            .into_iter()
            .flat_map(|at| entry.attrs().iter().filter(move |a| a.name() == at));
        for attr in refs {
            if out.linkage.is_some() && out.name.is_some() && out.decl_line.is_some() || depth > 64
            {
                break;
            }
            let target = match attr.value() {
                AttributeValue::UnitRef(o) => Some((ui, o)),
                AttributeValue::DebugInfoRef(o) => self.unit_containing(o.0).and_then(|tu| {
                    let header = self.headers[tu];
                    o.to_unit_offset(&header).map(|uo| (tu, uo))
                }),
                _ => None,
            };
            let Some((tu, to)) = target else { continue };
            let t = self.resolve(tu, to, None, depth + 1);
            out.linkage = out.linkage.or(t.linkage);
            out.name = out.name.or(t.name);
            out.decl_line = out.decl_line.or(t.decl_line);
        }
        out
    }
}

/// LLVM's `DWARFUnit::updateAddressDieMap` insertion: parents are inserted before children, and
/// a child's range splits the enclosing entry. Returns whether the insertion was regular: the
/// entry split off at `hi` replaced no other entry (overlapping siblings, in malformed DWARF,
/// can make it replace one that reaches further, so the map covers less than before).
fn insert_range(map: &mut BTreeMap<u64, (u64, u32)>, lo: u64, hi: u64, node: u32) -> bool {
    if let Some((&b_start, b)) = map.range_mut(..=lo).next_back()
        && lo < b.0
    {
        let (b_end, b_node) = *b;
        // The enclosing entry, changed in place: cut at `lo`, or replaced when it starts there.
        if lo > b_start {
            b.0 = lo;
        } else {
            *b = (hi, node);
        }
        let regular = hi >= b_end || map.insert(hi, (b_end, b_node)).is_none();
        if lo > b_start {
            map.insert(lo, (hi, node));
        }
        return regular;
    }
    map.insert(lo, (hi, node));
    true
}

/// A part of the address map (a unit's, or within a unit a subprogram's): its node indices
/// start at `first`; `ranges` in insertion order, and `map`, their own map, built by inserting
/// them in that order, and whether every insertion was regular (see [`insert_range`]).
struct UnitMap<'r> {
    first: u32,
    ranges: &'r [(u64, u64, u32)],
    map: Vec<(u64, u64, u32)>,
    regular: bool,
}

impl<'r> UnitMap<'r> {
    fn new(first: u32, ranges: &'r [(u64, u64, u32)]) -> Self {
        let mut map = BTreeMap::new();
        let mut regular = true;
        for &(lo, hi, node) in ranges {
            regular &= insert_range(&mut map, lo, hi, node);
        }
        let map = map.into_iter().map(|(s, (e, n))| (s, e, n)).collect();
        UnitMap { first, ranges, map, regular }
    }
}

/// A unit's address map from its `ranges` in DIE order, and whether every insertion was
/// regular: each subprogram's ranges (with its inlined subroutines') inserted into a map of
/// their own (in parallel), and those merged like units' maps ([`merge_unit_maps`]), which they mostly can
/// be: functions do not share code (one large unit, SQLite's, took ~1,300 instructions a range
/// in one map, several times what a subprogram's small map takes). One map of all of them
/// otherwise. `subprogram` tells the nodes that start a subprogram's ranges.
fn unit_addr_map(
    ranges: &[(u64, u64, u32)],
    subprogram: impl Fn(u32) -> bool + Sync,
) -> (Vec<(u64, u64, u32)>, bool) {
    use rayon::prelude::*;
    let parts: Vec<UnitMap> = ranges
        .par_chunk_by(|a, b| a.2 == b.2 || !subprogram(b.2))
        .map(|ranges| UnitMap::new(0, ranges))
        .collect();
    // Merged, the parts' insertions each found only their own part's entries: all regular.
    match merge_unit_maps(&parts) {
        Some(map) => (map, true),
        None => {
            let all = UnitMap::new(0, ranges);
            (all.map, all.regular)
        }
    }
}

/// The address map a sequential walk builds: every unit's ranges inserted into one map, in unit
/// order.
fn sequential_addr_map(units: &[UnitMap]) -> Vec<(u64, u64, u32)> {
    let mut map = BTreeMap::new();
    for unit in units {
        for &(lo, hi, node) in unit.ranges {
            insert_range(&mut map, lo, hi, node + unit.first);
        }
    }
    map.into_iter().map(|(start, (end, node))| (start, end, node)).collect()
}

/// The address map of all units from the units' own maps (in unit order, built in parallel),
/// when it equals the map that inserting every
/// unit's ranges into one map in unit order builds: when every insertion was regular (so a
/// unit's entries only ever cover addresses its final map covers; all entries are non-empty)
/// and no two units' maps cover a common address. Then an insertion of one unit never finds,
/// splits or replaces another unit's entry, and the one map is the union of the units' maps.
/// `None` otherwise.
fn merge_unit_maps(units: &[UnitMap]) -> Option<Vec<(u64, u64, u32)>> {
    if !units.iter().all(|u| u.regular) {
        return None;
    }
    // In the order of their first entries the maps mostly follow each other (a function's code
    // is contiguous): then that order is the only sort.
    let mut order: Vec<&UnitMap> = units.iter().filter(|u| !u.map.is_empty()).collect();
    order.sort_unstable_by_key(|u| u.map[0].0);
    // Each unit's covered intervals (its entries are sorted by start; touching ones merged).
    let mut covered: Vec<(u64, u64)> = Vec::new();
    for unit in &order {
        let unit_first = covered.len();
        for &(start, end, _) in &unit.map {
            let len = covered.len();
            match covered.last_mut() {
                Some(last) if len > unit_first && start <= last.1 => last.1 = last.1.max(end),
                _ => covered.push((start, end)),
            }
        }
    }
    if !covered.is_sorted() {
        covered.sort_unstable();
    }
    if covered.windows(2).any(|w| w[1].0 < w[0].1) {
        return None;
    }
    // Disjoint non-empty entries: their starts are distinct, and sorted by them they are in
    // the one order.
    let mut merged = Vec::with_capacity(order.iter().map(|u| u.map.len()).sum());
    for u in order {
        merged.extend(u.map.iter().map(|&(s, e, n)| (s, e, n + u.first)));
    }
    if !merged.is_sorted_by_key(|e| e.0) {
        merged.sort_unstable_by_key(|e| e.0);
    }
    Some(merged)
}

fn parse_line_table(
    debug_line: &[u8],
    endian: RunTimeEndian,
    offset: gimli::DebugLineOffset<usize>,
    address_size: u8,
) -> gimli::Result<LineTable> {
    let section = gimli::DebugLine::new(debug_line, endian);
    let program = section.program(offset, address_size, None, None)?;
    let mut rows = program.rows();
    let mut table = LineTable::default();
    let mut seq_start = 0;
    while let Some((_, row)) = rows.next_row()? {
        if row.end_sequence() {
            let first = table.rows.get(seq_start).map(|r| r.addr);
            match first {
                Some(low) if low < row.address() => {
                    table.sequences.push((low, row.address(), seq_start, table.rows.len()));
                    seq_start = table.rows.len();
                }
                _ => table.rows.truncate(seq_start),
            }
        } else {
            table.rows.push(Row {
                addr: row.address(),
                line: row.line().map_or(0, |l| l.get()),
                discriminator: row.discriminator(),
            });
        }
    }
    table.rows.truncate(seq_start);
    table.sequences.sort_by_key(|s| s.1);
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit's first node index and its ranges.
    type Unit = (u32, Vec<(u64, u64, u32)>);

    /// The units' parts of the address map, as the walk leaves them.
    fn maps(units: &[Unit]) -> Vec<UnitMap<'_>> {
        units.iter().map(|(first, ranges)| UnitMap::new(*first, ranges)).collect()
    }

    /// A random number below `n`, from `state`.
    fn rand(state: &mut u64, n: u64) -> u64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (*state >> 33) % n
    }

    /// Random units of nested, overlapping and out-of-order ranges, placed apart, touching or
    /// overlapping (every third `case`): each unit's first node index and its ranges.
    fn random_units(case: u32, state: &mut u64) -> Vec<Unit> {
        let mut rand = |n: u64| rand(state, n);
        let nunits = 1 + rand(5);
        let mut units = Vec::new();
        let mut first = 0;
        for u in 0..nunits {
            // Units in address order, apart or touching; every third case shuffles them
            // into overlapping windows.
            let base = if case.is_multiple_of(3) { rand(4) * 40 } else { u * 100 + rand(2) * 50 };
            let mut ranges = Vec::new();
            let mut stack: Vec<(u64, u64)> = Vec::new();
            for node in 0..1 + rand(8) as u32 {
                let (lo, hi) = match stack.last() {
                    // A child inside its parent (sometimes running past it).
                    Some(&(plo, phi)) if rand(3) != 0 => {
                        let lo = plo + rand(phi - plo);
                        let past = if rand(5) == 0 { 10 } else { 0 };
                        (lo, lo + 1 + rand(phi - lo + past))
                    }
                    _ => {
                        let lo = base + rand(40);
                        (lo, lo + 1 + rand(20))
                    }
                };
                ranges.push((lo, hi, node));
                stack.push((lo, hi));
                if rand(3) == 0 {
                    stack.pop();
                }
            }
            first += ranges.len() as u32;
            units.push((first - ranges.len() as u32, ranges));
        }
        units
    }

    /// Whenever the units' maps merge, the result is the sequential map.
    #[test]
    fn merged_unit_maps_are_the_sequential_map() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let (mut merged, mut fell_back) = (0, 0);
        for case in 0..3000 {
            let units = random_units(case, &mut state);
            let units = maps(&units);
            match merge_unit_maps(&units) {
                Some(map) => {
                    assert_eq!(map, sequential_addr_map(&units), "case {case}");
                    merged += 1;
                }
                None => fell_back += 1,
            }
        }
        assert!(merged > 500 && fell_back > 500, "{merged} merged, {fell_back} fell back");
    }

    /// A unit's map made of its subprograms' maps is the map of all its ranges inserted in
    /// order, with the same regularity: random units' ranges as one unit, each former unit's
    /// first node a subprogram.
    #[test]
    fn unit_map_by_subprograms_is_the_map_of_all_ranges() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let (mut merged, mut irregular) = (0, 0);
        for case in 0..3000 {
            let units = random_units(case, &mut state);
            let firsts: Vec<u32> = units.iter().map(|u| u.0).collect();
            let ranges: Vec<(u64, u64, u32)> = units
                .iter()
                .flat_map(|(first, r)| r.iter().map(move |&(lo, hi, n)| (lo, hi, n + first)))
                .collect();
            let (map, regular) = unit_addr_map(&ranges, |n| firsts.contains(&n));
            let all = UnitMap::new(0, &ranges);
            assert_eq!((&map, regular), (&all.map, all.regular), "case {case}");
            let parts = ranges.chunk_by(|a, b| a.2 == b.2 || !firsts.contains(&b.2));
            merged += usize::from(
                merge_unit_maps(&parts.map(|r| UnitMap::new(0, r)).collect::<Vec<_>>()).is_some(),
            );
            irregular += usize::from(!regular);
        }
        assert!(merged > 500 && irregular > 50, "{merged} merged, {irregular} irregular");
    }

    /// The walk along the map finds what a search per address finds, from any first address,
    /// through gaps and (in the maps of malformed DWARF) entries running past the next one.
    #[test]
    fn nodes_at_is_node_at_of_each_address() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut overlapping = 0;
        for case in 0..1000 {
            let addr_map = sequential_addr_map(&maps(&random_units(case, &mut state)));
            overlapping += usize::from(addr_map.windows(2).any(|w| w[1].0 < w[0].1));
            let info = DebugInfo {
                nodes: Vec::new(),
                addr_map,
                units: Vec::new(),
                debug_line: Vec::new(),
                endian: RunTimeEndian::Little,
                subprograms: Vec::new(),
                warnings: Vec::new(),
            };
            // Ascending addresses from a random first one, with random steps.
            let mut addrs = vec![rand(&mut state, 200)];
            while addrs.len() < 60 {
                addrs.push(addrs[addrs.len() - 1] + rand(&mut state, 6));
            }
            let walked: Vec<Option<u32>> = info.nodes_at(addrs.iter().copied()).collect();
            let searched: Vec<Option<u32>> = addrs.iter().map(|&a| info.node_at(a)).collect();
            assert_eq!(walked, searched, "case {case}: {:?} at {addrs:?}", info.addr_map);
        }
        assert!(overlapping > 50, "{overlapping} maps with overlapping entries");
    }
}
