//! A store of binaries to profile, found by build id: a directory of executables (each file's
//! `.note.gnu.build-id` read once), or a debuginfod-style tree where the executable with build id
//! `abcdef…` is `.build-id/ab/cdef…` (and its debug info, when split off, `.build-id/ab/cdef….debug`,
//! as under `/usr/lib/debug`).
//!
//! A fleet job profiles whatever its hosts ran: `profgen aggregate --binaries DIR` aggregates the
//! samples of every executable of the store its inputs map, and the final run writes one profile
//! per binary of the store the aggregates have samples for. Executables without a build id are
//! found by file name (as the mapping stage matches them).

use super::{elf, hex, unpadded_build_id};
use crate::error::Error;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where a binary of the store is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredBinary {
    pub path: PathBuf,
    /// Separate debug info (`…debug` beside it in a build-id tree).
    pub debug: Option<PathBuf>,
}

#[derive(Debug)]
enum Layout {
    /// `ROOT/.build-id/xx/rest` (or `ROOT` is the `.build-id` directory itself).
    BuildIdTree(PathBuf),
    /// Executables found in a directory (and its subdirectories).
    Indexed { by_id: BTreeMap<Vec<u8>, PathBuf>, by_name: BTreeMap<String, Vec<PathBuf>> },
}

/// A directory of binaries or a build-id tree (see the module docs).
#[derive(Debug)]
pub struct BinaryStore {
    root: PathBuf,
    layout: Layout,
    /// Files of an indexed directory that could not be read as ELF executables (not fatal: a
    /// store may hold other files).
    pub skipped: Vec<String>,
}

/// The GNU build id of the ELF file at `path`, without loading more than its headers and notes.
pub fn read_build_id(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let data = super::map_file(path)?;
    let obj = elf::parse(&data).map_err(|what| Error::BadFile { path: path.into(), what })?;
    Ok(object::Object::build_id(&obj).ok().flatten().map(<[u8]>::to_vec))
}

impl BinaryStore {
    /// Opens the store at `root`: a build-id tree when `root` is named `.build-id` or holds one,
    /// else every regular file under `root` that is an ELF image, indexed by build id and name.
    pub fn open(root: &Path) -> Result<BinaryStore, Error> {
        let io = |source| Error::Io { path: root.to_path_buf(), source };
        if !std::fs::metadata(root).map_err(io)?.is_dir() {
            return Err(Error::BadFile {
                path: root.to_path_buf(),
                what: "a binary store is a directory (of binaries, or a .build-id tree)".into(),
            });
        }
        let tree = if root.file_name().is_some_and(|n| n == ".build-id") {
            Some(root.to_path_buf())
        } else {
            Some(root.join(".build-id")).filter(|t| t.is_dir())
        };
        if let Some(tree) = tree {
            return Ok(BinaryStore {
                root: root.to_path_buf(),
                layout: Layout::BuildIdTree(tree),
                skipped: Vec::new(),
            });
        }
        let mut files = Vec::new();
        collect_files(root, &mut files)?;
        files.sort();
        let mut by_id = BTreeMap::new();
        let mut by_name: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
        let mut skipped = Vec::new();
        for path in files {
            match read_build_id(&path) {
                Ok(id) => {
                    let name = path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    by_name.entry(name).or_default().push(path.clone());
                    if let Some(id) = id {
                        by_id.entry(id).or_insert(path);
                    }
                }
                Err(e) => skipped.push(e.to_string()),
            }
        }
        Ok(BinaryStore {
            root: root.to_path_buf(),
            layout: Layout::Indexed { by_id, by_name },
            skipped,
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How many binaries of an indexed directory are called `file_name` (a name that several
    /// have cannot identify one).
    pub fn count_named(&self, file_name: &str) -> usize {
        match &self.layout {
            Layout::Indexed { by_name, .. } => by_name.get(file_name).map_or(0, Vec::len),
            Layout::BuildIdTree(_) => 0,
        }
    }

    /// The binary with `build_id`, or (only when the build id is unknown) the one named
    /// `file_name`; `None` when the store has none, or several of that name.
    pub fn find(&self, build_id: Option<&[u8]>, file_name: &str) -> Option<StoredBinary> {
        match (&self.layout, build_id) {
            (Layout::BuildIdTree(tree), Some(id)) if id.len() >= 2 => {
                let id = hex(unpadded_build_id(id));
                let path = tree.join(&id[..2]).join(&id[2..]);
                let debug = tree.join(&id[..2]).join(format!("{}.debug", &id[2..]));
                path.is_file()
                    .then(|| StoredBinary { path, debug: debug.is_file().then_some(debug) })
            }
            (Layout::BuildIdTree(_), _) => None,
            (Layout::Indexed { by_id, .. }, Some(id)) => by_id
                .get(unpadded_build_id(id))
                .map(|p| StoredBinary { path: p.clone(), debug: None }),
            (Layout::Indexed { by_name, .. }, None) => {
                match by_name.get(file_name).map(Vec::as_slice) {
                    Some([one]) => Some(StoredBinary { path: one.clone(), debug: None }),
                    _ => None,
                }
            }
        }
    }
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let io = |source| Error::Io { path: dir.to_path_buf(), source };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        // Symlinks to files are followed, to directories not (loops); FIFOs and devices are
        // skipped (opening one could block).
        let kind = entry.file_type().map_err(io)?;
        let path = entry.path();
        if kind.is_dir() {
            collect_files(&path, out)?;
        } else if kind.is_file()
            || (kind.is_symlink() && path.metadata().is_ok_and(|m| m.is_file()))
        {
            out.push(path);
        }
    }
    Ok(())
}
