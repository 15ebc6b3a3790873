//! Helpers shared by the integration tests: paths into the repository, tool detection, scratch
//! directories; [`oracle`] holds those of the oracle tests. Each test file includes this module
//! and uses part of it.
#![allow(dead_code)]

pub mod oracle;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

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

/// Writes `bytes` to `dir/name`.
pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// Runs the profgen binary; the profile goes to `out` in text format.
pub fn profgen(opts: &[&str], files: &[(&str, &Path)], out: &Path) -> Output {
    run(profgen_command(opts, files, out))
}

/// The command [`profgen`] runs.
pub fn profgen_command(opts: &[&str], files: &[(&str, &Path)], out: &Path) -> Command {
    let mut cmd = Command::new(PROFGEN);
    cmd.args(opts);
    for (opt, path) in files {
        cmd.arg(opt).arg(path);
    }
    cmd.args(["--format", "text", "--output"]).arg(out);
    cmd
}

/// Runs `cmd`: it must end with an exit code (no signal: no abort, no stack overflow), without
/// a panic.
pub fn run(mut cmd: Command) -> Output {
    let output = cmd.output().unwrap();
    check_ended(&output);
    output
}

fn check_ended(output: &Output) {
    assert!(
        output.status.code().is_some(),
        "killed by a signal: {:?}\n{}",
        output.status,
        stderr(output)
    );
    assert!(!stderr(output).contains("panicked"), "{}", stderr(output));
}

/// A run's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Files left in `dir` besides `keep` (temporary outputs must not survive a run).
pub fn leftovers(dir: &Path, keep: &[&Path]) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| !keep.contains(&p.as_path()))
        .collect();
    v.sort();
    v
}

/// Offsets of the file-mode data section and of every record start in it.
pub fn record_starts(perf_data: &[u8]) -> (usize, usize, Vec<usize>) {
    let u64_at = |at: usize| u64::from_le_bytes(perf_data[at..at + 8].try_into().unwrap()) as usize;
    let (data_offset, data_size) = (u64_at(40), u64_at(48));
    let mut starts = Vec::new();
    let mut pos = data_offset;
    while pos < data_offset + data_size {
        starts.push(pos);
        pos += usize::from(u16::from_le_bytes([perf_data[pos + 6], perf_data[pos + 7]]));
    }
    (data_offset, data_size, starts)
}

/// The size of a file-mode perf.data header, and of an attrs-section entry [`perf_data_file`]
/// writes (a 64-byte attr and its ids' file section).
pub const PERF_HEADER: usize = 104;
pub const PERF_ATTR_ENTRY: usize = 64 + 16;

/// A file-mode perf.data laid out as perf writes one: the header, an attrs-section entry per
/// `attrs` element (a 64-byte attr of that sample type, and the file section of its ids: offset,
/// size), the data section `data`, then the feature sections `features` (feature bit, bytes; in
/// increasing bit order), each after the table of their offsets and sizes.
pub fn perf_data_file(
    attrs: &[(u64, [u64; 2])],
    data: &[u8],
    features: &[(u32, &[u8])],
) -> Vec<u8> {
    let le = |v: usize| (v as u64).to_le_bytes();
    let attrs_size = PERF_ATTR_ENTRY * attrs.len();
    let data_at = PERF_HEADER + attrs_size;
    let mut file = b"PERFILE2".to_vec();
    for v in [PERF_HEADER, PERF_ATTR_ENTRY, PERF_HEADER, attrs_size, data_at, data.len(), 0, 0] {
        file.extend(le(v));
    }
    let mut bits = [0u8; 32];
    for (bit, _) in features {
        bits[*bit as usize / 8] |= 1 << (bit % 8);
    }
    file.extend(bits);
    for (sample_type, ids) in attrs {
        let mut attr = [0u8; 64];
        attr[4..8].copy_from_slice(&64u32.to_le_bytes());
        attr[24..32].copy_from_slice(&sample_type.to_le_bytes());
        file.extend(attr);
        file.extend(ids.map(u64::to_le_bytes).concat());
    }
    file.extend(data);
    let mut at = file.len() + 16 * features.len();
    for (_, bytes) in features {
        file.extend([le(at), le(bytes.len())].concat());
        at += bytes.len();
    }
    for (_, bytes) in features {
        file.extend(*bytes);
    }
    file
}

/// A small, complete file-mode perf.data: the first `records` records of a recorded one, with the
/// header's data size and the feature sections after the data moved to match.
pub fn first_records(perf_data: &[u8], records: usize) -> Vec<u8> {
    let (data_offset, data_size, starts) = record_starts(perf_data);
    let old_end = data_offset + data_size;
    let new_end = starts[records];
    let shift = (old_end - new_end) as u64;
    let mut out = perf_data[..new_end].to_vec();
    out[48..56].copy_from_slice(&((new_end - data_offset) as u64).to_le_bytes());
    let features: u32 = perf_data[72..104].iter().map(|b| b.count_ones()).sum();
    let mut table = perf_data[old_end..].to_vec();
    for i in 0..features as usize {
        let at = 16 * i;
        let offset = u64::from_le_bytes(table[at..at + 8].try_into().unwrap());
        table[at..at + 8].copy_from_slice(&(offset - shift).to_le_bytes());
    }
    out.extend_from_slice(&table);
    out
}

/// A 60-record perf.data of `inline_chain`: its mmaps and 55 LBR + stack samples (6 of them in
/// the binary, the others in the dynamic loader).
pub fn small_perf_data() -> Vec<u8> {
    first_records(&std::fs::read(sample("inline_chain/perf.data")).unwrap(), 60)
}

/// Creates a FIFO at `path`.
pub fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

/// [`run`] with a deadline: a run still going after `seconds` is killed and fails the test
/// (something it opened blocks, say a FIFO nobody writes, or it takes time quadratic in its
/// input). Its output is read as it comes, so a run that writes more than a pipe holds does not
/// block on it.
pub fn run_with_deadline(mut cmd: Command, seconds: u64) -> Output {
    use std::process::Stdio;
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    let Ok(output) = finished.recv_timeout(std::time::Duration::from_secs(seconds)) else {
        // SAFETY: `pid` is the child's, not reaped while `wait_with_output` waits for it.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        panic!("{cmd:?} still running after {seconds} s");
    };
    let output = output.unwrap();
    check_ended(&output);
    output
}
