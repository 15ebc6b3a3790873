//! Address mapping: which runtime addresses belong to the profiled binary, and where they are in
//! its own layout.
//!
//! In: mmap / fork / exec / exit events of the input, and the binary's identity (build id, file
//! name) and program headers. Out: `RuntimeAddr → Vaddr` translation per process.
//!
//! Unlike llvm-profgen-19 (one global load base, matched by file name only), every process keeps
//! its own mappings, a mapping is recognised by build id first (from MMAP2 build-id records or the
//! perf.data build-id table) and by file name only when no build id is known, and the file offset
//! is turned into a vaddr through the program headers rather than by page arithmetic.

use crate::addr::{FileOffset, RuntimeAddr, Vaddr};
use crate::binary::{Segment, unpadded_build_id};
use crate::input::perf_data::SampleBodies;
use crate::input::{MmapEvent, MmapPath};
use hashbrown::HashMap;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

/// How an mmap event was recognised as the profiled binary.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum MatchedBy {
    BuildId,
    FileName,
}

/// Non-overlapping address intervals `[start, end)`, each with a value, by start. A new interval
/// replaces whatever it overlaps (munmap + mmap), in time proportional to what it replaces, so
/// that a process (or a pid-less input) with many mappings costs no rescan per mmap. Most
/// processes map a file once: a single interval is kept in place, and the map is made only for a
/// second one (a recording of many short processes made and freed a map per process).
#[derive(Clone, Debug)]
enum Intervals<T> {
    /// No interval or one: `(start, end, value)`.
    One(Option<(u64, u64, T)>),
    Many(BTreeMap<u64, (u64, T)>),
}

impl<T> Default for Intervals<T> {
    fn default() -> Self {
        Intervals::One(None)
    }
}

impl<T> Intervals<T> {
    /// Removes the intervals overlapping `[start, end)`; true if there were any.
    fn remove_overlapping(&mut self, start: u64, end: u64) -> bool {
        let by_start = match self {
            Intervals::One(one) => {
                // As below: it starts before `start` and reaches into the range, or inside it.
                let overlaps =
                    |&(s, e, _): &(u64, u64, T)| if s < start { e > start } else { s < end };
                let doomed = one.as_ref().is_some_and(overlaps);
                if doomed {
                    *one = None;
                }
                return doomed;
            }
            Intervals::Many(by_start) => by_start,
        };
        // Intervals are disjoint and sorted, so only the last one starting before `start` can
        // reach into the range, and every one starting inside it overlaps.
        let before = by_start.range(..start).next_back();
        let mut doomed: Vec<u64> =
            before.filter(|(_, (e, _))| *e > start).map(|(&s, _)| s).into_iter().collect();
        doomed.extend(by_start.range(start..end.max(start)).map(|(&s, _)| s));
        for s in &doomed {
            by_start.remove(s);
        }
        !doomed.is_empty()
    }

    /// Adds `[start, end)` (empty intervals are never found, so they are not kept).
    fn insert(&mut self, start: u64, end: u64, value: T) {
        self.remove_overlapping(start, end);
        if end <= start {
            return;
        }
        match self {
            Intervals::One(one) => match one.take() {
                None => *one = Some((start, end, value)),
                Some((s, e, v)) => {
                    *self = Intervals::Many(BTreeMap::from([(s, (e, v)), (start, (end, value))]))
                }
            },
            Intervals::Many(by_start) => {
                by_start.insert(start, (end, value));
            }
        }
    }

    /// The interval containing `a`: its start and value.
    fn find(&self, a: u64) -> Option<(u64, &T)> {
        let (start, end, v) = match self {
            Intervals::One(one) => one.as_ref().map(|(s, e, v)| (*s, *e, v))?,
            Intervals::Many(by_start) => {
                by_start.range(..=a).next_back().map(|(&s, (e, v))| (s, *e, v))?
            }
        };
        (start <= a && a < end).then_some((start, v))
    }

    fn len(&self) -> usize {
        match self {
            Intervals::One(one) => usize::from(one.is_some()),
            Intervals::Many(by_start) => by_start.len(),
        }
    }
}

/// What the binary must look like to be matched.
#[derive(Clone, Debug)]
pub struct BinaryIdentity {
    pub build_id: Option<Vec<u8>>,
    /// File name (basename) of `--binary`.
    pub file_name: String,
    pub segments: Vec<Segment>,
}

/// Counts for the end-of-run summary and for diagnosing a wrong binary.
#[derive(Clone, Debug, Default)]
pub struct MappingStats {
    pub matched_by_build_id: u64,
    pub matched_by_name: u64,
    /// Mappings whose file name matched but whose build id differed.
    pub name_match_wrong_build_id: u64,
    /// Executable files mapped in the input that are not the binary, by path (to say what the
    /// input holds instead when no sample lands in the binary).
    pub other_executables: HashMap<String, OtherExecutable>,
    /// Samples given to [`AddressMapper::note_unused_sample`] whose IP is in no mapped file
    /// (kernel, anonymous or JIT code).
    pub unused_samples_in_no_file: u64,
}

/// An executable file mapped in the input that is not the binary.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OtherExecutable {
    /// From the mmap event or the perf.data build-id table.
    pub build_id: Option<Vec<u8>>,
    pub mappings: u64,
    /// Samples given to [`AddressMapper::note_unused_sample`] whose IP it holds.
    pub unused_samples: u64,
}

impl MappingStats {
    pub fn merge(&mut self, other: MappingStats) {
        self.matched_by_build_id =
            self.matched_by_build_id.saturating_add(other.matched_by_build_id);
        self.matched_by_name = self.matched_by_name.saturating_add(other.matched_by_name);
        self.name_match_wrong_build_id =
            self.name_match_wrong_build_id.saturating_add(other.name_match_wrong_build_id);
        self.unused_samples_in_no_file =
            self.unused_samples_in_no_file.saturating_add(other.unused_samples_in_no_file);
        for (path, o) in other.other_executables {
            let mine = self.other_executables.entry(path).or_default();
            mine.build_id = mine.build_id.take().or(o.build_id);
            mine.mappings = mine.mappings.saturating_add(o.mappings);
            mine.unused_samples = mine.unused_samples.saturating_add(o.unused_samples);
        }
    }

    /// How the binary was recognised: by build id if any mapping was (see
    /// [`AddressMapper::on_mmap`]).
    pub fn matched_by(&self) -> Option<MatchedBy> {
        if self.matched_by_build_id > 0 {
            Some(MatchedBy::BuildId)
        } else {
            (self.matched_by_name > 0).then_some(MatchedBy::FileName)
        }
    }

    /// Whether any mmap event mapped the binary.
    pub fn binary_mapped(&self) -> bool {
        self.matched_by_build_id > 0 || self.matched_by_name > 0
    }

    /// The other executables, most-sampled first (then most often mapped, then by path).
    pub fn other_executables_by_samples(&self) -> Vec<(&str, &OtherExecutable)> {
        let mut v: Vec<_> = self.other_executables.iter().map(|(p, o)| (p.as_str(), o)).collect();
        v.sort_unstable_by(|a, b| {
            (b.1.unused_samples, b.1.mappings)
                .cmp(&(a.1.unused_samples, a.1.mappings))
                .then(a.0.cmp(b.0))
        });
        v
    }

    /// For messages when no sample lands in the binary: the other executables (at most five),
    /// most-sampled first, with their build ids, and the samples in no mapped file.
    pub fn what_the_input_maps_instead(&self) -> String {
        const SHOWN: usize = 5;
        let others = self.other_executables_by_samples();
        let mut found: Vec<String> = others
            .iter()
            .take(SHOWN)
            .map(|(path, o)| {
                let id = o
                    .build_id
                    .as_deref()
                    .map_or("no build id".to_string(), |id| format!("build id {}", hex(id)));
                format!("{path} ({id}, {} samples)", o.unused_samples)
            })
            .collect();
        if others.len() > SHOWN {
            found.push(format!("{} more", others.len() - SHOWN));
        }
        let mut text = if found.is_empty() {
            "the input maps no executable file".to_string()
        } else {
            format!("executables mapped in the input, most-sampled first: {}", found.join(", "))
        };
        if self.unused_samples_in_no_file > 0 {
            text.push_str(&format!(
                "; {} samples are in no mapped file (kernel, anonymous or JIT code)",
                self.unused_samples_in_no_file
            ));
        }
        text
    }
}

pub use crate::binary::hex;

/// Where the binary is mapped in one process (or, for pid-less inputs, in all of them).
#[derive(Clone, Debug)]
struct ProcessMaps {
    /// The file offset each mapping starts at.
    maps: Intervals<FileOffset>,
    /// Identifies this version of `maps` within its [`AddressMap`]: a new stamp on every change.
    stamp: u64,
}

/// A change to an [`AddressMap`]. Copies of a map follow the original by replaying its changes
/// (see [`AddressMapper::log_changes`]), which costs what changed rather than a copy of the map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapChange {
    /// The binary is mapped at `[start, end)` of `key`'s address space from file offset `pgoff`,
    /// replacing whatever was mapped there.
    Map { key: Option<i32>, start: RuntimeAddr, end: RuntimeAddr, pgoff: FileOffset },
    /// Another file is mapped at `[start, end)`: the binary's mappings there are gone.
    Unmap { key: Option<i32>, start: RuntimeAddr, end: RuntimeAddr },
    /// `pid` starts with `ppid`'s mappings.
    Fork { pid: i32, ppid: i32 },
    /// `pid` replaced its image (exec) or ended: its mappings are gone.
    Clear { pid: i32 },
    /// See [`AddressMapper::assume_preferred_base`].
    AssumePreferredBase,
}

/// An event a mapper that defers events (see [`AddressMapper::defer_events`]) logs for its
/// copies to apply, as it came.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapEvent {
    /// An executable mapping in a process `--pid` keeps, matched (and counted) by the deferring
    /// mapper, by the position of its record in the mapped input ([`MmapEvent::record`]): the
    /// copies read its addresses there ([`SampleBodies::mmap_span`]) and map the binary there
    /// (`binary`) or unmap it, so that the reading thread neither copies the event nor
    /// allocates a change for another thread to free.
    MmapAt { at: usize, binary: bool },
    /// A new process (not a thread).
    Fork { pid: i32, ppid: i32 },
    /// exec or the end of a process.
    Clear { pid: i32 },
    /// A sample without a pid (see [`AddressMapper::pidless_sample`]).
    PidlessSample,
}

/// One entry of a mapper's log of changes (see [`AddressMapper::log_changes`]): a change it
/// applied (or, deferring, made of an mmap event read elsewhere than the mapped input), or an
/// event it deferred. Two words: an input of many processes logs a few per sample, and the
/// reading thread writes them all. Changes are boxed: a mapper that defers events makes few
/// (those before its first sample in the binary, and mmap events of compressed records or
/// streams).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MapStep {
    Applied(Box<MapChange>),
    Deferred(MapEvent),
}

const _: () = assert!(size_of::<MapStep>() == 16);

/// The translation state at one point of the input. Translations of a process stay valid while
/// its [`ProcessView::stamp`] stays the same, so callers can cache them per process.
#[derive(Clone, Debug)]
pub struct AddressMap {
    identity: Arc<BinaryIdentity>,
    /// Mappings of the binary by pid; inputs without pids (perf script) use the `None` key.
    by_pid: HashMap<Option<i32>, ProcessMaps>,
    /// Pid-less inputs with no mmap event of the binary: treat addresses as vaddrs, as
    /// llvm-profgen does with its preferred base.
    assume_preferred_base: bool,
    /// `--kernel`: the preferred base an address is relative to, instead of file offsets.
    kernel_base: Option<Vaddr>,
    /// The last stamp handed out (stamps start at 1; 0 is never one).
    last_stamp: u64,
    /// Stamp of the processes without mappings, new when `assume_preferred_base` changes.
    unmapped_stamp: u64,
    /// Mappings of the binary in all processes.
    mappings: usize,
    /// See [`generation`](Self::generation).
    generation: u64,
}

/// One process's translations, at the state of the map it came from.
#[derive(Clone, Copy)]
pub struct ProcessView<'m> {
    map: &'m AddressMap,
    maps: Option<&'m ProcessMaps>,
    /// A pid-less sample: addresses outside every mapping may be vaddrs (preferred base).
    preferred_base: bool,
}

impl ProcessView<'_> {
    /// Changes whenever the result of [`to_vaddr`](Self::to_vaddr) may change: equal stamps of
    /// views of one map (or of its copies that follow it through [`MapChange`]s) translate
    /// alike.
    #[inline]
    pub fn stamp(&self) -> u64 {
        let s = self.maps.map_or(self.map.unmapped_stamp, |m| m.stamp);
        (s << 1) | u64::from(self.preferred_base)
    }

    /// The binary vaddr of `addr`, or `None` if it is not in the binary.
    #[inline]
    pub fn to_vaddr(&self, addr: RuntimeAddr) -> Option<Vaddr> {
        let segments = &self.map.identity.segments;
        let Some((start, pgoff)) = self.maps.and_then(|m| m.maps.find(addr.0)) else {
            return self.preferred_base.then_some(Vaddr(addr.0)).filter(|v| {
                segments.iter().any(|s| s.executable && s.vaddr <= *v && v.0 < s.vaddr.0 + s.memsz)
            });
        };
        if let Some(base) = self.map.kernel_base {
            let v = Vaddr(base.0.wrapping_add(addr.0 - start));
            let exec = |s: &&Segment| s.executable && s.vaddr <= v && v.0 < s.vaddr.0 + s.memsz;
            return segments.iter().find(exec).map(|_| v);
        }
        let off = FileOffset(pgoff.0 + (addr.0 - start));
        segments
            .iter()
            .find(|s| s.executable && s.offset <= off && off.0 < s.offset.0 + s.filesz)
            .map(|s| Vaddr(s.vaddr.0 + (off.0 - s.offset.0)))
    }
}

impl AddressMap {
    fn new(identity: BinaryIdentity) -> Self {
        AddressMap {
            identity: Arc::new(identity),
            by_pid: HashMap::new(),
            assume_preferred_base: false,
            kernel_base: None,
            last_stamp: 1,
            unmapped_stamp: 1,
            mappings: 0,
            generation: 0,
        }
    }

    fn new_stamp(&mut self) -> u64 {
        self.last_stamp += 1;
        self.last_stamp
    }

    /// The translations of process `pid`. Inputs without pids (perf script) use the pid-less
    /// mappings for every sample.
    #[inline]
    pub fn process(&self, pid: Option<i32>) -> ProcessView<'_> {
        ProcessView {
            map: self,
            maps: self.by_pid.get(&pid).or_else(|| self.by_pid.get(&None)),
            preferred_base: self.assume_preferred_base && pid.is_none(),
        }
    }

    /// The binary vaddr of `addr` in process `pid`, or `None` if it is not in the binary.
    pub fn to_vaddr(&self, pid: Option<i32>, addr: RuntimeAddr) -> Option<Vaddr> {
        self.process(pid).to_vaddr(addr)
    }

    /// Counts the changes applied: equal generations of one map (or of its copies that follow it
    /// through [`MapChange`]s) translate alike.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Applies `change`; false when it changed nothing.
    pub fn apply(&mut self, change: &MapChange) -> bool {
        let changed = self.apply_change(change);
        self.generation += u64::from(changed);
        changed
    }

    fn apply_change(&mut self, change: &MapChange) -> bool {
        match *change {
            MapChange::Map { key, start, end, pgoff } => {
                let stamp = self.new_stamp();
                let p = self
                    .by_pid
                    .entry(key)
                    .or_insert_with(|| ProcessMaps { maps: Intervals::default(), stamp });
                let before = p.maps.len();
                p.maps.insert(start.0, end.0, pgoff);
                p.stamp = stamp;
                self.mappings = self.mappings + p.maps.len() - before;
                true
            }
            MapChange::Unmap { key, start, end } => {
                let stamp = self.new_stamp();
                let Some(p) = self.by_pid.get_mut(&key) else { return false };
                let before = p.maps.len();
                if !p.maps.remove_overlapping(start.0, end.0) {
                    return false;
                }
                p.stamp = stamp;
                self.mappings -= before - p.maps.len();
                true
            }
            MapChange::Fork { pid, ppid } => {
                if pid == ppid {
                    return false;
                }
                let Some(parent) = self.by_pid.get(&Some(ppid)) else { return false };
                let maps = parent.maps.clone();
                let stamp = self.new_stamp();
                self.mappings += maps.len();
                if let Some(old) = self.by_pid.insert(Some(pid), ProcessMaps { maps, stamp }) {
                    self.mappings -= old.maps.len();
                }
                true
            }
            // Without a lookup when no process has mappings (a recording of many short processes
            // clears each on exec and on exit).
            MapChange::Clear { .. } if self.by_pid.is_empty() => false,
            MapChange::Clear { pid } => match self.by_pid.remove(&Some(pid)) {
                Some(old) => {
                    self.mappings -= old.maps.len();
                    true
                }
                None => false,
            },
            MapChange::AssumePreferredBase => {
                self.assume_preferred_base = true;
                self.unmapped_stamp = self.new_stamp();
                true
            }
        }
    }
}

/// An mmap event as the mapper reads it, its path decoded.
struct MmapView<'e> {
    pid: Option<i32>,
    start: RuntimeAddr,
    len: u64,
    pgoff: FileOffset,
    path: &'e str,
    /// The event's build id, else the one perf recorded for its path.
    known_id: Option<&'e [u8]>,
    /// See [`MmapEvent::record`].
    record: Option<usize>,
}

/// The path of the last mmap event a mapper applied, decoded, and the build id perf recorded for
/// it: with many processes, most map the same few files, and a record's path field that holds
/// these bytes needs no decoding or lookup.
#[derive(Default)]
struct LastPath {
    path: String,
    table_id: Option<Vec<u8>>,
    /// How an event of `path` without a build id of its own matches, once one has.
    table_match: Option<Option<MatchedBy>>,
    /// Whether `path` and `table_id` are those of an event (not the empty start).
    valid: bool,
}

impl LastPath {
    /// Whether `p` is `path`. A record's field holds it when its bytes up to the NUL (or its end)
    /// are `path`'s: `path` came from decoding a field, so it holds no NUL, and being valid
    /// UTF-8, such a field decodes to it.
    fn holds(&self, p: &MmapPath<'_>) -> bool {
        let n = self.path.len();
        self.valid
            && match p {
                MmapPath::Field(field) => {
                    field.get(..n) == Some(self.path.as_bytes())
                        && field.get(n).is_none_or(|&b| b == 0)
                }
                MmapPath::Text(text) => **text == self.path,
            }
    }
}

/// An executable mapping of another file, kept to attribute unused samples to it. The path is
/// shared: forks copy every mapping of their parent.
type OtherMapping = Arc<str>;

/// The pids that may have mappings of the binary in the copies of a deferring mapper's map (see
/// [`AddressMapper::defer_events`]): an exec, exit or fork of any other pid changes nothing
/// there, and is not logged (a recording of many short processes logs an exec and an exit per
/// process, and each copy replays them). Direct-mapped by pid: a slot holds the one pid marked
/// in it, or [`SHARED`](Self::SHARED) once two were (then every pid of the slot may have
/// mappings, for good), so that an unmarked pid never has any, whatever the slots hold.
struct PidMarks {
    slots: Box<[u64; PidMarks::SLOTS]>,
}

impl PidMarks {
    const SLOTS: usize = 1 << 12;
    const EMPTY: u64 = 0;
    const SHARED: u64 = 1;

    /// The marks of the pids with mappings in `map`, the copies' map when the mapper begins
    /// deferring.
    fn of(map: &AddressMap) -> Self {
        let mut marks = PidMarks { slots: Box::new([Self::EMPTY; Self::SLOTS]) };
        for pid in map.by_pid.keys().flatten() {
            marks.mark(*pid);
        }
        marks
    }

    /// The slot of `pid` and the value that says it holds `pid` (never EMPTY or SHARED).
    #[inline]
    fn slot(pid: i32) -> (usize, u64) {
        let h = (pid as u32).wrapping_mul(0x9e37_79b9) >> (32 - Self::SLOTS.trailing_zeros());
        (h as usize % Self::SLOTS, (1 << 32) | u64::from(pid as u32))
    }

    /// `pid` may have mappings from now on.
    #[inline]
    fn mark(&mut self, pid: i32) {
        let (i, held) = Self::slot(pid);
        let s = &mut self.slots[i];
        if *s == Self::EMPTY {
            *s = held;
        } else if *s != held {
            *s = Self::SHARED;
        }
    }

    /// Whether `pid` may have mappings.
    #[inline]
    fn marked(&self, pid: i32) -> bool {
        let (i, held) = Self::slot(pid);
        let s = self.slots[i];
        s == held || s == Self::SHARED
    }

    /// Whether `pid` may have mappings, which are cleared: it has none from now on.
    #[inline]
    fn clear(&mut self, pid: i32) -> bool {
        let (i, held) = Self::slot(pid);
        let s = &mut self.slots[i];
        if *s == held {
            *s = Self::EMPTY;
            return true;
        }
        *s == Self::SHARED
    }
}

/// Tracks the binary's mappings per process through the input's events.
pub struct AddressMapper {
    map: AddressMap,
    /// The changes applied to `map` (and the events deferred) since the last
    /// [`take_changes`](Self::take_changes), when [`log_changes`](Self::log_changes) asked for
    /// them.
    changes: Option<Vec<MapStep>>,
    /// Set when deferring events (see [`defer_events`](Self::defer_events)): the pids that may
    /// have mappings in the copies.
    marks: Option<PidMarks>,
    /// Replaying a [`MapEvent::PidlessSample`] made this copy assume the preferred base.
    assumed_on_replay: bool,
    /// See [`LastPath`].
    last_path: LastPath,
    /// Build ids perf recorded for paths (perf.data build-id table).
    path_build_ids: HashMap<String, Vec<u8>>,
    pid_filter: Option<i32>,
    /// Executable mappings of other files, keyed like the binary's mappings: to attribute
    /// samples to them when none lands in the binary. `None` once a sample has landed in it
    /// (see [`stop_noting_unused_samples`](Self::stop_noting_unused_samples)).
    others_by_pid: Option<HashMap<Option<i32>, Intervals<OtherMapping>>>,
    /// Samples carry no pid (perf script text): every mapping applies to every sample, the last
    /// one mapped winning, as in llvm-profgen.
    perf_script: bool,
    /// `--kernel`: the binary is the kernel image, mapped by `[kernel.kallsyms]` events.
    kernel: bool,
    pub stats: MappingStats,
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

impl AddressMapper {
    /// A mapper for perf script input, whose samples carry no pid: mappings of all processes
    /// apply.
    pub fn for_perf_script(identity: BinaryIdentity, pid_filter: Option<i32>) -> Self {
        AddressMapper { perf_script: true, ..Self::new(identity, pid_filter) }
    }

    pub fn new(identity: BinaryIdentity, pid_filter: Option<i32>) -> Self {
        AddressMapper {
            others_by_pid: Some(HashMap::new()),
            ..Self::fresh(AddressMap::new(identity), pid_filter)
        }
    }

    /// A mapper of `map` with nothing logged, deferred, replayed or counted yet, and none of
    /// the options a caller sets after [`new`](Self::new).
    fn fresh(map: AddressMap, pid_filter: Option<i32>) -> Self {
        AddressMapper {
            map,
            changes: None,
            marks: None,
            assumed_on_replay: false,
            last_path: LastPath::default(),
            path_build_ids: HashMap::new(),
            pid_filter,
            others_by_pid: None,
            perf_script: false,
            kernel: false,
            stats: MappingStats::default(),
        }
    }

    /// A mapper for a kernel image (`--kernel`): the binary is what perf calls
    /// `[kernel.kallsyms]` (or `[kernel.kallsyms]_text` / `_stext`), mapped for every process;
    /// its file offsets mean nothing, an address is `addr - start + preferred base` (llvm-profgen's
    /// kernel rule, which also follows KASLR). `--pid` does not apply to the kernel's mapping.
    pub fn for_kernel(identity: BinaryIdentity, preferred_base: Vaddr, perf_script: bool) -> Self {
        let mut m = AddressMapper { kernel: true, perf_script, ..Self::new(identity, None) };
        m.map.kernel_base = Some(preferred_base);
        m
    }

    /// The current translation state.
    pub fn map(&self) -> &AddressMap {
        &self.map
    }

    /// From now on, keeps every change made to [`map`](Self::map) for
    /// [`take_changes`](Self::take_changes), so that copies of the map can follow it.
    pub fn log_changes(&mut self) {
        self.changes.get_or_insert_with(Vec::new);
    }

    /// The changes logged since the last call, in order (moved into `out`).
    pub fn take_changes(&mut self, out: &mut Vec<MapStep>) {
        match &mut self.changes {
            Some(c) if out.is_empty() => std::mem::swap(out, c),
            Some(c) => out.append(c),
            None => {}
        }
    }

    /// How many changes are waiting for [`take_changes`](Self::take_changes).
    pub fn changes_logged(&self) -> usize {
        self.changes.as_ref().map_or(0, Vec::len)
    }

    fn change(&mut self, change: MapChange) {
        if self.map.apply(&change)
            && let Some(log) = &mut self.changes
        {
            log.push(MapStep::Applied(Box::new(change)));
        }
    }

    /// From now on, logs the events that may change the map ([`MapEvent`]s) instead of
    /// applying them: the map stays as it is, and copies of it apply them
    /// ([`replay`](Self::replay)). An mmap event is still matched here, once, and counted in
    /// this mapper's stats (each copy matching it again cost a thread bounding a recording of
    /// many processes more than it cost here); a sample without a pid is counted in the
    /// copies'. For a reading thread that has more to do than the threads keeping copies; once
    /// it no longer notes unused samples (the copies do not keep the other files' mappings).
    /// Events that change nothing in the copies are not logged (see [`PidMarks`]). Needs
    /// [`log_changes`](Self::log_changes).
    pub fn defer_events(&mut self) {
        debug_assert!(self.changes.is_some() && self.others_by_pid.is_none());
        self.marks = Some(PidMarks::of(&self.map));
    }

    /// Whether events are deferred (see [`defer_events`](Self::defer_events)).
    pub fn defers_events(&self) -> bool {
        self.marks.is_some()
    }

    /// Logs `event` when deferring events; false when it is to be applied here.
    fn deferred(&mut self, event: impl FnOnce() -> MapEvent) -> bool {
        match &mut self.changes {
            Some(log) if self.marks.is_some() => {
                log.push(MapStep::Deferred(event()));
                true
            }
            _ => false,
        }
    }

    /// A mapper that follows this one by replaying its log from this point on: the same
    /// binary and rules, the map as it is now. It matches no mmap event (the log holds what
    /// they change), so it needs no build ids and counts none.
    pub fn replica(&self) -> AddressMapper {
        AddressMapper {
            perf_script: self.perf_script,
            kernel: self.kernel,
            ..Self::fresh(self.map.clone(), self.pid_filter)
        }
    }

    /// A copy of this replaying mapper as it stands: it replays the rest of the log as this one
    /// would (another thread's copy of the map, which then stands for the whole log, the
    /// preferred base it assumed included).
    pub fn replay_copy(&self) -> AddressMapper {
        AddressMapper { assumed_on_replay: self.assumed_on_replay, ..self.replica() }
    }

    /// Applies a step of another mapper's log: a change as it was applied (or made) there, an
    /// event as it would have been (a sample without a pid counted in this mapper's stats).
    /// `records` reads the mmap events logged by position ([`MapEvent::MmapAt`]): the input that
    /// mapper's events came from.
    pub fn replay(&mut self, step: &MapStep, records: Option<&SampleBodies<'_>>) {
        match step {
            MapStep::Applied(change) => {
                self.map.apply(change);
            }
            MapStep::Deferred(MapEvent::MmapAt { at, binary }) => {
                let span = records.and_then(|r| r.mmap_span(*at));
                debug_assert!(span.is_some(), "no mmap record at {at} of the input");
                if let Some((pid, start, len, pgoff)) = span {
                    self.map.apply(&self.mmap_change(Some(pid), start, len, pgoff, *binary));
                }
            }
            MapStep::Deferred(MapEvent::Fork { pid, ppid }) => self.on_fork(*pid, *ppid),
            MapStep::Deferred(MapEvent::Clear { pid }) => self.on_exec(*pid),
            MapStep::Deferred(MapEvent::PidlessSample) => {
                self.assumed_on_replay |= self.pidless_sample();
            }
        }
    }

    /// Whether replaying a [`MapEvent::PidlessSample`] made this mapper assume the preferred
    /// base (see [`pidless_sample`](Self::pidless_sample)).
    pub fn assumed_preferred_base_on_replay(&self) -> bool {
        self.assumed_on_replay
    }

    /// A sample without a pid: with no mapping of the binary known (and none assumed before),
    /// addresses are taken as vaddrs from now on ([`assume_preferred_base`]); true when this
    /// made that assumption. A mapper that defers events logs the sample for its copies to
    /// decide, and answers false.
    ///
    /// [`assume_preferred_base`]: Self::assume_preferred_base
    pub fn pidless_sample(&mut self) -> bool {
        if self.deferred(|| MapEvent::PidlessSample)
            || self.map.assume_preferred_base
            || self.any_mapping()
        {
            return false;
        }
        self.assume_preferred_base();
        true
    }

    /// Registers the perf.data build-id table (`path → build id`).
    pub fn add_build_ids<'a>(&mut self, ids: impl IntoIterator<Item = &'a (String, Vec<u8>)>) {
        for (path, id) in ids {
            self.path_build_ids.insert(path.clone(), id.clone());
        }
        self.last_path.valid = false;
    }

    pub fn binary_file_name(&self) -> &str {
        &self.map.identity.file_name
    }

    /// Whether `ev` maps the profiled binary, and how that was decided.
    fn matches(&self, ev: &MmapView<'_>) -> Option<MatchedBy> {
        if self.kernel {
            let kernel = matches!(
                ev.path,
                "[kernel.kallsyms]" | "[kernel.kallsyms]_text" | "[kernel.kallsyms]_stext"
            );
            return kernel.then_some(MatchedBy::FileName);
        }
        let ours = &self.map.identity;
        match (ev.known_id, ours.build_id.as_deref()) {
            (Some(seen), Some(id)) => build_ids_equal(seen, id).then_some(MatchedBy::BuildId),
            _ => (base_name(ev.path) == ours.file_name).then_some(MatchedBy::FileName),
        }
    }

    /// Whether an mmap event can change anything: an executable mapping of a process `--pid`
    /// keeps (the kernel's applies to all).
    fn keeps(&self, pid: Option<i32>, executable: bool) -> bool {
        let other_pid = self.pid_filter.is_some_and(|p| pid != Some(p)) && !self.kernel;
        executable && !other_pid
    }

    /// Applies an mmap event (when deferring events, logs what it changes: see
    /// [`defer_events`](Self::defer_events)). Returns how it matched when it maps the binary.
    pub fn on_mmap(&mut self, ev: &MmapEvent<'_>) -> Option<MatchedBy> {
        if !self.keeps(ev.pid, ev.executable) {
            return None;
        }
        let mut last = std::mem::take(&mut self.last_path);
        if !last.holds(&ev.path) {
            last.path.clear();
            last.path.push_str(&ev.path.as_str());
            last.table_id = self.path_build_ids.get(&last.path).cloned();
            last.table_match = None;
            last.valid = true;
        }
        let view = MmapView {
            pid: ev.pid,
            start: ev.start,
            len: ev.len,
            pgoff: ev.pgoff,
            path: &last.path,
            known_id: ev.build_id.as_deref().or(last.table_id.as_deref()),
            record: ev.record,
        };
        // Matching depends on the path and the build id alone.
        let matched = match last.table_match.filter(|_| ev.build_id.is_none()) {
            Some(m) => m,
            None => self.matches(&view),
        };
        if ev.build_id.is_none() {
            last.table_match = Some(matched);
        }
        self.apply_mmap(&view, matched);
        self.last_path = last;
        matched
    }

    /// Applies an mmap event that `matched` the binary, or not.
    fn apply_mmap(&mut self, ev: &MmapView<'_>, matched: Option<MatchedBy>) {
        let change = self.mmap_change(ev.pid, ev.start, ev.len, ev.pgoff, matched.is_some());
        let (MapChange::Map { key, start, end, .. } | MapChange::Unmap { key, start, end }) =
            change
        else {
            unreachable!("an mmap maps or unmaps")
        };
        let mut others = self.others_by_pid.as_mut().map(|o| o.entry(key).or_default());
        if let Some(others) = &mut others {
            others.remove_overlapping(start.0, end.0);
        }
        match matched {
            Some(MatchedBy::BuildId) => self.stats.matched_by_build_id += 1,
            Some(MatchedBy::FileName) => self.stats.matched_by_name += 1,
            None => {
                if base_name(ev.path) == self.map.identity.file_name {
                    self.stats.name_match_wrong_build_id += 1;
                }
                if !ev.path.starts_with('[') && !ev.path.starts_with("//anon") {
                    let other = match self.stats.other_executables.get_mut(ev.path) {
                        Some(other) => other,
                        None => {
                            self.stats.other_executables.entry(ev.path.to_string()).or_default()
                        }
                    };
                    other.mappings = other.mappings.saturating_add(1);
                    if other.build_id.is_none() {
                        other.build_id = ev.known_id.map(<[u8]>::to_vec);
                    }
                    if let Some(others) = others {
                        others.insert(start.0, end.0, Arc::from(ev.path));
                    }
                }
            }
        }
        let Some(marks) = &mut self.marks else { return self.change(change) };
        // Deferring: logged for the copies to apply if it may change their map (an unmarked pid
        // has no mapping there to replace), by its record's position when it has one.
        let logged = match key {
            Some(pid) if matched.is_some() => {
                marks.mark(pid);
                true
            }
            Some(pid) => marks.marked(pid),
            None => true,
        };
        if let (true, Some(log)) = (logged, &mut self.changes) {
            log.push(match ev.record {
                Some(at) => MapStep::Deferred(MapEvent::MmapAt { at, binary: matched.is_some() }),
                None => MapStep::Applied(Box::new(change)),
            });
        }
    }

    /// The change an mmap of `[start, start + len)` in `pid` makes: the binary mapped there from
    /// `pgoff` (`binary`), else the binary's mappings there gone. A new mapping replaces
    /// whatever it overlaps (munmap + mmap, or exec reusing addresses); the kernel is mapped in
    /// every process.
    fn mmap_change(
        &self,
        pid: Option<i32>,
        start: RuntimeAddr,
        len: u64,
        pgoff: FileOffset,
        binary: bool,
    ) -> MapChange {
        let key = if self.perf_script || self.kernel { None } else { pid };
        let end = RuntimeAddr(start.0.saturating_add(len));
        match binary {
            true => MapChange::Map { key, start, end, pgoff },
            false => MapChange::Unmap { key, start, end },
        }
    }

    /// A forked child starts with its parent's mappings.
    #[inline]
    pub fn on_fork(&mut self, pid: i32, ppid: i32) {
        if pid == ppid {
            return; // a new thread shares the process's mappings
        }
        if let Some(marks) = &mut self.marks {
            // A parent without mappings in the copies gives the child none there.
            if marks.marked(ppid) {
                marks.mark(pid);
                self.deferred(|| MapEvent::Fork { pid, ppid });
            }
            return;
        }
        self.apply_fork(pid, ppid);
    }

    fn apply_fork(&mut self, pid: i32, ppid: i32) {
        self.change(MapChange::Fork { pid, ppid });
        if let Some(others) = &mut self.others_by_pid {
            let inherited = others.get(&Some(ppid)).cloned().unwrap_or_default();
            others.insert(Some(pid), inherited);
        }
    }

    /// exec replaces the process image: its old mappings are gone.
    #[inline]
    pub fn on_exec(&mut self, pid: i32) {
        if let Some(marks) = &mut self.marks {
            // A process without mappings in the copies has nothing to clear there.
            if marks.clear(pid) {
                self.deferred(|| MapEvent::Clear { pid });
            }
            return;
        }
        self.apply_clear(pid);
    }

    fn apply_clear(&mut self, pid: i32) {
        self.change(MapChange::Clear { pid });
        if let Some(others) = &mut self.others_by_pid {
            others.remove(&Some(pid));
        }
    }

    /// The process ended (its main thread exited): its mappings are gone, as in perf, and memory
    /// stays bounded by the processes alive at once however many a recording sees.
    #[inline]
    pub fn on_exit(&mut self, pid: i32) {
        self.on_exec(pid);
    }

    /// Counts a sample that did not land in the binary against the executable holding its IP,
    /// to say where the samples are when none lands in the binary. The driver calls it only until
    /// the first sample lands in the binary, which keeps the lookup off the common path.
    pub fn note_unused_sample(&mut self, pid: Option<i32>, ip: RuntimeAddr) {
        debug_assert!(self.others_by_pid.is_some(), "a sample was noted after one landed");
        let others_by_pid = self.others_by_pid.as_ref();
        let others = others_by_pid.and_then(|o| o.get(&pid).or_else(|| o.get(&None)));
        let path = others.and_then(|maps| maps.find(ip.0)).map(|(_, path)| path);
        match path.and_then(|p| self.stats.other_executables.get_mut(&**p)) {
            Some(other) => other.unused_samples = other.unused_samples.saturating_add(1),
            None => {
                self.stats.unused_samples_in_no_file =
                    self.stats.unused_samples_in_no_file.saturating_add(1)
            }
        }
    }

    /// A sample has landed in the binary, and no more will be given to
    /// [`note_unused_sample`](Self::note_unused_sample): the other files' mappings are no longer
    /// kept (their counts in `stats` still are). With many processes, keeping them cost a map
    /// entry made and removed per process.
    pub fn stop_noting_unused_samples(&mut self) {
        self.others_by_pid = None;
    }

    /// Whether any mapping of the binary has been seen.
    pub fn any_mapping(&self) -> bool {
        self.map.mappings > 0
    }

    /// For pid-less inputs without any mmap event of the binary: from now on, addresses outside
    /// every mapping are taken to be binary vaddrs already (right for non-PIE binaries).
    pub fn assume_preferred_base(&mut self) {
        self.change(MapChange::AssumePreferredBase);
    }

    /// See [`AddressMap::to_vaddr`].
    pub fn to_vaddr(&self, pid: Option<i32>, addr: RuntimeAddr) -> Option<Vaddr> {
        self.map.to_vaddr(pid, addr)
    }
}

/// perf pads build ids to 20 bytes with zeros; compare the meaningful prefix.
fn build_ids_equal(a: &[u8], b: &[u8]) -> bool {
    let (a, b) = (unpadded_build_id(a), unpadded_build_id(b));
    !a.is_empty() && (a == b)
}

/// The `file_name` for [`BinaryIdentity`] from a path.
pub fn file_name_of(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn identity() -> BinaryIdentity {
        BinaryIdentity {
            build_id: Some(vec![0xab, 0xcd]),
            file_name: "app".into(),
            segments: vec![
                Segment {
                    vaddr: Vaddr(0),
                    memsz: 0x800,
                    offset: FileOffset(0),
                    filesz: 0x800,
                    executable: false,
                },
                Segment {
                    vaddr: Vaddr(0x1800),
                    memsz: 0x1000,
                    offset: FileOffset(0x800),
                    filesz: 0x1000,
                    executable: true,
                },
            ],
        }
    }

    fn mmap(
        pid: i32,
        start: u64,
        pgoff: u64,
        path: &str,
        build_id: Option<Vec<u8>>,
    ) -> MmapEvent<'static> {
        MmapEvent {
            pid: Some(pid),
            tid: Some(pid),
            start: RuntimeAddr(start),
            len: 0x1000,
            pgoff: FileOffset(pgoff),
            executable: true,
            path: path.to_string().into(),
            build_id,
            record: None,
        }
    }

    #[test]
    fn file_offset_goes_through_program_headers_not_page_arithmetic() {
        let mut m = AddressMapper::new(identity(), None);
        // The exec segment's file offset 0x800 differs from its vaddr 0x1800.
        assert_eq!(
            m.on_mmap(&mmap(7, 0x5555_0000_0000, 0x800, "/x/app", None)),
            Some(MatchedBy::FileName)
        );
        assert_eq!(m.to_vaddr(Some(7), RuntimeAddr(0x5555_0000_0010)), Some(Vaddr(0x1810)));
        assert_eq!(m.to_vaddr(Some(7), RuntimeAddr(0x5555_0000_1000)), None);
    }

    #[test]
    fn processes_keep_their_own_load_bases() {
        let mut m = AddressMapper::new(identity(), None);
        m.on_mmap(&mmap(1, 0x1000_0000, 0x800, "/x/app", None));
        m.on_mmap(&mmap(2, 0x2000_0000, 0x800, "/x/app", None));
        assert_eq!(m.to_vaddr(Some(1), RuntimeAddr(0x1000_0004)), Some(Vaddr(0x1804)));
        assert_eq!(m.to_vaddr(Some(2), RuntimeAddr(0x2000_0004)), Some(Vaddr(0x1804)));
        assert_eq!(m.to_vaddr(Some(1), RuntimeAddr(0x2000_0004)), None);
    }

    #[test]
    fn build_id_beats_file_name() {
        let mut m = AddressMapper::new(identity(), None);
        assert_eq!(
            m.on_mmap(&mmap(1, 0x1000, 0x800, "/x/renamed.gen", Some(vec![0xab, 0xcd, 0, 0]))),
            Some(MatchedBy::BuildId)
        );
        assert_eq!(m.on_mmap(&mmap(1, 0x9000, 0x800, "/x/app", Some(vec![0x11]))), None);
        assert_eq!(m.stats.name_match_wrong_build_id, 1);
    }

    #[test]
    fn fork_inherits_and_exec_clears() {
        let mut m = AddressMapper::new(identity(), None);
        m.on_mmap(&mmap(1, 0x1000_0000, 0x800, "/x/app", None));
        m.on_fork(5, 1);
        assert_eq!(m.to_vaddr(Some(5), RuntimeAddr(0x1000_0000)), Some(Vaddr(0x1800)));
        m.on_exec(5);
        assert_eq!(m.to_vaddr(Some(5), RuntimeAddr(0x1000_0000)), None);
    }

    #[test]
    fn perf_script_input_maps_every_process() {
        let mut m = AddressMapper::for_perf_script(identity(), None);
        m.on_mmap(&mmap(1, 0x1000_0000, 0x800, "/x/app", None));
        assert_eq!(m.to_vaddr(None, RuntimeAddr(0x1000_0004)), Some(Vaddr(0x1804)));
        m.on_mmap(&mmap(2, 0x2000_0000, 0x800, "/x/app", None));
        assert_eq!(m.to_vaddr(None, RuntimeAddr(0x2000_0004)), Some(Vaddr(0x1804)));
    }

    #[test]
    fn unused_samples_are_attributed_to_other_executables_most_sampled_first() {
        let mut m = AddressMapper::new(identity(), None);
        m.add_build_ids(&[("/lib/libc.so".to_string(), vec![0x12, 0x34])]);
        m.on_mmap(&mmap(1, 0x1000_0000, 0, "/bin/other", Some(vec![0xee])));
        m.on_mmap(&mmap(1, 0x2000_0000, 0, "/lib/libc.so", None));
        m.on_fork(2, 1);
        m.note_unused_sample(Some(1), RuntimeAddr(0x1000_0010));
        m.note_unused_sample(Some(2), RuntimeAddr(0x2000_0010)); // inherited through fork
        m.note_unused_sample(Some(2), RuntimeAddr(0x2000_0020));
        m.note_unused_sample(Some(1), RuntimeAddr(0xffff_ffff_8100_0000)); // kernel
        m.on_exec(2);
        m.note_unused_sample(Some(2), RuntimeAddr(0x2000_0010)); // gone with the exec
        let others: Vec<_> = m
            .stats
            .other_executables_by_samples()
            .into_iter()
            .map(|(p, o)| (p, o.unused_samples))
            .collect();
        assert_eq!(others, [("/lib/libc.so", 2), ("/bin/other", 1)]);
        assert_eq!(m.stats.unused_samples_in_no_file, 2);
        assert_eq!(
            m.stats.what_the_input_maps_instead(),
            "executables mapped in the input, most-sampled first: /lib/libc.so (build id 1234, 2 samples), \
             /bin/other (build id ee, 1 samples); 2 samples are in no mapped file (kernel, anonymous or JIT code)"
        );
        assert!(!m.stats.binary_mapped());
    }

    #[test]
    fn other_files_are_still_counted_once_samples_land_in_the_binary() {
        let mut m = AddressMapper::new(identity(), None);
        m.stop_noting_unused_samples();
        m.on_mmap(&mmap(1, 0x1000_0000, 0, "/bin/other", Some(vec![0xee])));
        m.on_fork(2, 1);
        m.on_exec(2);
        m.on_mmap(&mmap(2, 0x2000_0000, 0, "/bin/other", None));
        let other = &m.stats.other_executables["/bin/other"];
        assert_eq!((other.mappings, other.build_id.as_deref()), (2, Some(&[0xee][..])));
    }

    #[test]
    fn one_interval_kept_in_place_overlaps_as_in_the_map() {
        let cases = [
            (0x800, 0x1000),
            (0x800, 0x1001),
            (0x1000, 0x1000),
            (0x1800, 0x1800),
            (0xfff, 0xfff),
            (0x1fff, 0x3000),
            (0x2000, 0x3000),
            (0x3000, 0x800),
        ];
        for (start, end) in cases {
            let mut one = Intervals::One(Some((0x1000, 0x2000, 'a')));
            let mut many = Intervals::Many(BTreeMap::from([(0x1000, (0x2000, 'a'))]));
            let removed = one.remove_overlapping(start, end);
            assert_eq!(removed, many.remove_overlapping(start, end), "{start:#x}..{end:#x}");
            assert_eq!((one.len(), many.len()), (usize::from(!removed), usize::from(!removed)));
        }
        let mut iv = Intervals::default();
        iv.insert(0x1000, 0x2000, 'a');
        assert!(matches!(iv, Intervals::One(_)));
        assert_eq!(
            (iv.find(0xfff), iv.find(0x1000), iv.find(0x2000)),
            (None, Some((0x1000, &'a')), None)
        );
        iv.insert(0x1800, 0x2800, 'b');
        assert_eq!((iv.len(), iv.find(0x17ff), iv.find(0x2000)), (1, None, Some((0x1800, &'b'))));
        iv.insert(0x3000, 0x4000, 'c');
        assert_eq!(
            (iv.len(), iv.find(0x1800), iv.find(0x3000)),
            (2, Some((0x1800, &'b')), Some((0x3000, &'c')))
        );
    }

    #[test]
    fn a_mapping_replaces_only_what_it_overlaps() {
        let mut iv = Intervals::default();
        iv.insert(0x1000, 0x2000, 'a');
        iv.insert(0x3000, 0x4000, 'b');
        iv.insert(0x5000, 0x6000, 'c');
        assert_eq!(iv.find(0x1fff), Some((0x1000, &'a')));
        assert_eq!(iv.find(0x2000), None);
        // Reaches into 'a' from above and into 'b': both go, 'c' stays.
        iv.insert(0x1800, 0x3001, 'd');
        assert_eq!(iv.find(0x1000), None);
        assert_eq!(iv.find(0x3000), Some((0x1800, &'d')));
        assert_eq!(iv.find(0x3001), None);
        assert_eq!(iv.find(0x5000), Some((0x5000, &'c')));
        assert!(!iv.remove_overlapping(0x4000, 0x5000));
        // An empty mapping holds nothing and replaces nothing but what contains its address.
        iv.insert(0x5800, 0x5800, 'e');
        assert_eq!(iv.len(), 1);
    }

    #[test]
    fn a_copy_replaying_the_changes_translates_like_the_original() {
        let mut m = AddressMapper::new(identity(), None);
        m.log_changes();
        let mut copy = m.replica();
        m.on_mmap(&mmap(1, 0x1000_0000, 0x800, "/x/app", None));
        m.on_fork(2, 1);
        m.on_mmap(&mmap(2, 0x1000_0000, 0, "/lib/other.so", None)); // replaces pid 2's app
        m.on_mmap(&mmap(3, 0x3000_0000, 0x800, "/x/app", None));
        m.on_exit(3);
        let mut changes = Vec::new();
        m.take_changes(&mut changes);
        assert_eq!(changes.len(), 5);
        assert_eq!(m.changes_logged(), 0);
        for c in &changes {
            assert!(matches!(c, MapStep::Applied(_)));
            copy.replay(c, None);
        }
        for (pid, addr) in [(1, 0x1000_0004), (2, 0x1000_0004), (3, 0x3000_0004), (4, 0x1000_0004)]
        {
            let (a, b) = (m.map().process(Some(pid)), copy.map().process(Some(pid)));
            assert_eq!(a.to_vaddr(RuntimeAddr(addr)), b.to_vaddr(RuntimeAddr(addr)));
        }
        assert_eq!(copy.to_vaddr(Some(1), RuntimeAddr(0x1000_0004)), Some(Vaddr(0x1804)));
        assert_eq!(copy.to_vaddr(Some(2), RuntimeAddr(0x1000_0004)), None);
        assert_eq!(copy.to_vaddr(Some(3), RuntimeAddr(0x3000_0004)), None, "exited");
        assert_eq!(copy.map().generation(), m.map().generation());
    }

    /// Events one mapper defers, replayed by a copy, map as they would have there; the
    /// deferring mapper counts the mmap events it matched as it would have applying them.
    #[test]
    fn a_copy_replaying_deferred_events_maps_like_the_original() {
        let events = |m: &mut AddressMapper| {
            m.on_mmap(&mmap(1, 0x1000_0000, 0x800, "/x/app", None));
            m.on_fork(2, 1);
            m.on_fork(2, 2); // a thread: nothing to log
            m.on_mmap(&mmap(2, 0x1000_0000, 0, "/lib/other.so", Some(vec![0xee])));
            m.on_mmap(&MmapEvent { executable: false, ..mmap(1, 0x5000, 0, "/x/app", None) });
            m.on_mmap(&mmap(4, 0x5000, 0, "/lib/other.so", None)); // nothing to unmap in pid 4
            m.on_mmap(&mmap(3, 0x3000_0000, 0x800, "/x/app", Some(vec![0xab, 0xcd])));
            m.on_exit(3);
            assert!(!m.pidless_sample(), "the binary is mapped, or deferred");
        };
        let mut direct = AddressMapper::new(identity(), None);
        direct.stop_noting_unused_samples();
        events(&mut direct);
        let mut deferring = AddressMapper::new(identity(), None);
        deferring.log_changes();
        deferring.stop_noting_unused_samples();
        let mut copy = deferring.replica();
        deferring.defer_events();
        events(&mut deferring);
        assert!(!deferring.any_mapping());
        let mut steps = Vec::new();
        deferring.take_changes(&mut steps);
        // Read elsewhere than a mapped input, each mmap event is logged as the change it makes.
        let (start, end) = (RuntimeAddr(0x1000_0000), RuntimeAddr(0x1000_1000));
        let pgoff = FileOffset(0x800);
        let change = |c| MapStep::Applied(Box::new(c));
        assert_eq!(
            steps[..3],
            [
                change(MapChange::Map { key: Some(1), start, end, pgoff }),
                MapStep::Deferred(MapEvent::Fork { pid: 2, ppid: 1 }),
                change(MapChange::Unmap { key: Some(2), start, end }),
            ]
        );
        assert_eq!(steps.len(), 6);
        for s in &steps {
            copy.replay(s, None);
        }
        for (pid, addr) in [(1, 0x1000_0004), (2, 0x1000_0004), (3, 0x3000_0004)] {
            let (a, b) = (direct.map().process(Some(pid)), copy.map().process(Some(pid)));
            assert_eq!(a.to_vaddr(RuntimeAddr(addr)), b.to_vaddr(RuntimeAddr(addr)));
        }
        assert_eq!(copy.to_vaddr(Some(1), RuntimeAddr(0x1000_0004)), Some(Vaddr(0x1804)));
        let (d, m, c) = (&direct.stats, &deferring.stats, &copy.stats);
        assert_eq!((d.matched_by_name, d.matched_by_build_id), (1, 1));
        assert_eq!((m.matched_by_name, m.matched_by_build_id), (1, 1));
        assert_eq!((c.matched_by_name, c.matched_by_build_id), (0, 0));
        assert_eq!(d.other_executables["/lib/other.so"].mappings, 2);
        assert_eq!(m.other_executables, d.other_executables);
        assert_eq!(m.matched_by(), Some(MatchedBy::BuildId));
        assert!(!copy.assumed_preferred_base_on_replay());
    }

    /// A deferring mapper logs the execs, exits and forks that may change the copies' maps, and
    /// only those: of pids with mappings there (when it began deferring, or mapped since), or
    /// sharing a slot with one.
    #[test]
    fn a_deferring_mapper_logs_only_execs_exits_and_forks_that_change_the_copies() {
        let mut m = AddressMapper::new(identity(), None);
        m.log_changes();
        m.stop_noting_unused_samples();
        m.on_mmap(&mmap(1, 0x1000_0000, 0x800, "/x/app", None));
        m.take_changes(&mut Vec::new());
        let mut copy = m.replica();
        m.defer_events();
        m.on_exec(7); // nothing mapped: not logged
        m.on_fork(8, 7); // the parent has nothing to inherit: not logged
        m.on_fork(2, 1);
        m.on_mmap(&mmap(3, 0x3000_0000, 0x800, "/x/app", None));
        m.on_exec(3);
        m.on_exit(3); // cleared already: not logged
        m.on_exit(2);
        m.on_exit(1);
        m.on_exit(1);
        // Two pids marked in one slot: both may have mappings from then on.
        let other = (9..).find(|&p| PidMarks::slot(p).0 == PidMarks::slot(3).0).unwrap();
        m.on_mmap(&mmap(3, 0x3000_0000, 0x800, "/x/app", None));
        m.on_exit(other); // its slot holds 3: not logged
        m.on_mmap(&mmap(other, 0x3000_0000, 0x800, "/x/app", None));
        m.on_exit(3);
        m.on_exit(3);
        m.on_exit(other);
        let mut steps = Vec::new();
        m.take_changes(&mut steps);
        let clear = |pid| MapStep::Deferred(MapEvent::Clear { pid });
        let mmaps = |s: &&MapStep| matches!(s, MapStep::Applied(_));
        let logged: Vec<_> = steps.iter().filter(|s| !mmaps(s)).cloned().collect();
        let fork = MapStep::Deferred(MapEvent::Fork { pid: 2, ppid: 1 });
        assert_eq!(logged, [fork, clear(3), clear(2), clear(1), clear(3), clear(3), clear(other)]);
        for s in &steps {
            copy.replay(s, None);
        }
        for pid in [1, 2, 3, 7, 8, other] {
            for addr in [0x1000_0004, 0x3000_0004] {
                assert_eq!(copy.to_vaddr(Some(pid), RuntimeAddr(addr)), None, "pid {pid}");
            }
        }
    }

    /// A sample without a pid, deferred: the copy decides at that point of the log whether
    /// addresses are taken as vaddrs.
    #[test]
    fn a_deferred_pidless_sample_assumes_the_preferred_base_in_the_copy() {
        let mut m = AddressMapper::new(identity(), None);
        m.log_changes();
        m.stop_noting_unused_samples();
        let mut copy = m.replica();
        m.defer_events();
        assert!(!m.pidless_sample());
        let mut steps = Vec::new();
        m.take_changes(&mut steps);
        assert_eq!(steps, [MapStep::Deferred(MapEvent::PidlessSample)]);
        copy.replay(&steps[0], None);
        assert!(copy.assumed_preferred_base_on_replay());
        assert_eq!(copy.to_vaddr(None, RuntimeAddr(0x1810)), Some(Vaddr(0x1810)));
        // Once assumed, a later pid-less sample assumes nothing new.
        assert!(!copy.pidless_sample());
    }

    #[test]
    fn stamps_change_with_the_process_mappings_only() {
        let mut m = AddressMapper::new(identity(), None);
        m.on_mmap(&mmap(1, 0x1000_0000, 0x800, "/x/app", None));
        m.on_mmap(&mmap(2, 0x2000_0000, 0x800, "/x/app", None));
        let (one, two) = (m.map().process(Some(1)).stamp(), m.map().process(Some(2)).stamp());
        assert_ne!(one, two);
        m.on_mmap(&mmap(2, 0x2800_0000, 0x800, "/x/app", None));
        assert_eq!(m.map().process(Some(1)).stamp(), one);
        assert_ne!(m.map().process(Some(2)).stamp(), two);
        // Processes without mappings share one stamp (they translate nothing).
        assert_eq!(m.map().process(Some(8)).stamp(), m.map().process(Some(9)).stamp());
    }

    /// `--kernel`: perf.data's kernel mapping (pid -1, pgoff = start, a KASLR-shifted start)
    /// applies to every process; an address is `addr - start + preferred base`.
    #[test]
    fn kernel_mapping_applies_to_every_process() {
        let base = Vaddr(0x1800);
        let mut m = AddressMapper::for_kernel(identity(), base, false);
        let start = 0xffff_ffff_9a00_0000;
        let mut kernel = mmap(-1, start, start, "[kernel.kallsyms]_text", None);
        kernel.len = 0x0100_0000;
        assert_eq!(m.on_mmap(&mmap(7, 0x5555_0000_0000, 0x800, "/x/app", None)), None);
        assert_eq!(m.on_mmap(&kernel), Some(MatchedBy::FileName));
        assert_eq!(m.to_vaddr(Some(7), RuntimeAddr(start + 0x10)), Some(Vaddr(0x1810)));
        assert_eq!(m.to_vaddr(Some(8), RuntimeAddr(start + 0x10)), Some(Vaddr(0x1810)));
        // Past the binary's executable segment: not the binary's code.
        assert_eq!(m.to_vaddr(Some(7), RuntimeAddr(start + 0x2000)), None);
        assert!(m.stats.binary_mapped());
    }

    #[test]
    fn pid_filter_ignores_other_processes() {
        let mut m = AddressMapper::new(identity(), Some(2));
        assert_eq!(m.on_mmap(&mmap(1, 0x1000_0000, 0x800, "/x/app", None)), None);
        assert!(!m.any_mapping());
    }
}
