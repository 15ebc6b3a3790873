//! Helpers shared by the integration tests: paths into the repository, tool detection, scratch
//! directories; [`oracle`] holds those of the oracle tests. Each test file includes this module
//! and uses part of it.
#![allow(dead_code)]

pub mod oracle;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `profgen` binary under test.
pub const PROFGEN: &str = env!("CARGO_BIN_EXE_profgen");

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tests/fixtures/<rel>`.
pub fn fixture(rel: &str) -> PathBuf {
    root().join("tests/fixtures").join(rel)
}

/// `perf-samples/<rel>` (the committed corpus).
pub fn sample(rel: &str) -> PathBuf {
    root().join("perf-samples").join(rel)
}

/// Whether `tool --version` runs and succeeds (a tool on PATH can still be a broken wrapper,
/// as Debian's `perf` is without the kernel's tools).
pub fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok_and(|o| o.status.success())
}

/// A fresh, empty scratch directory for the test `name` of this test process.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("profgen-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A sample profile in canonical text form (`llvm-profdata-19 merge --sample --text`), to compare
/// profiles of any encoding.
pub fn llvm_canonical(path: &Path) -> String {
    let o = Command::new("llvm-profdata-19")
        .args(["merge", "--sample", "--text"])
        .arg(path)
        .args(["-o", "-"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "llvm-profdata-19 failed on {}: {}",
        path.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}
