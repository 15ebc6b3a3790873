//! The output file is replaced safely (issue 10): the temporary file is created exclusively under
//! an unpredictable name, so nothing planted in the output directory by another user (a symlink
//! or a FIFO at a name the old `.NAME.PID.tmp` scheme would have used) is followed, opened or
//! waited on; the new profile gets the old file's permissions, or the umask's.

mod common;

use common::{PROFGEN, mkfifo, sample, scratch};
use std::os::unix::fs::{FileTypeExt, PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use profgen::writer::write_bytes_atomically;

/// Runs `write_bytes_atomically` on another thread; fails the test if it has not returned in 20 s
/// (a FIFO opened for writing blocks until a reader comes).
fn write_with_deadline(bytes: &'static [u8], out: PathBuf) -> profgen::error::Result<()> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(write_bytes_atomically(bytes, &out)));
    rx.recv_timeout(Duration::from_secs(20)).expect("writing the profile hung")
}

/// The name the old scheme used for a process with pid `pid`.
fn old_temp_name(out: &Path, pid: u32) -> PathBuf {
    out.with_file_name(format!(".{}.{pid}.tmp", out.file_name().unwrap().to_string_lossy()))
}

fn umask() -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line =
        status.lines().find(|l| l.starts_with("Umask:")).expect("Umask in /proc/self/status");
    u32::from_str_radix(line["Umask:".len()..].trim(), 8).unwrap()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn symlink_at_the_old_temp_name_is_not_followed() {
    let dir = scratch("symlink");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = dir.join("app.prof");
    let planted = old_temp_name(&out, std::process::id());
    symlink(&victim, &planted).unwrap();

    write_with_deadline(b"profile", out.clone()).unwrap();

    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    assert_eq!(mode(&victim), 0o600);
    assert_eq!(std::fs::read_link(&planted).unwrap(), victim);
    assert_eq!(std::fs::read(&out).unwrap(), b"profile");
}

#[test]
fn fifo_at_the_old_temp_name_does_not_hang() {
    let dir = scratch("fifo");
    let out = dir.join("app.prof");
    let planted = old_temp_name(&out, std::process::id());
    mkfifo(&planted);

    write_with_deadline(b"profile", out.clone()).unwrap();

    assert!(std::fs::symlink_metadata(&planted).unwrap().file_type().is_fifo());
    assert_eq!(std::fs::read(&out).unwrap(), b"profile");
}

/// The real binary, with a symlink or a FIFO planted at the old name for each of the next 2,000
/// pids the kernel hands out (the child's pid is among them unless that many processes start in
/// between).
#[test]
fn names_the_old_scheme_could_produce_are_left_alone_by_the_binary() {
    let dir = scratch("binary");
    let victim = dir.join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let out = dir.join("app.prof");
    let last: u32 =
        std::fs::read_to_string("/proc/sys/kernel/ns_last_pid").unwrap().trim().parse().unwrap();
    for pid in last + 1..last + 2001 {
        let planted = old_temp_name(&out, pid);
        if pid % 2 == 0 {
            symlink(&victim, &planted).unwrap();
        } else {
            mkfifo(&planted);
        }
    }
    let (status, pid) = run_profgen(&out);
    assert!(status.success());
    assert!((last + 1..last + 2001).contains(&pid), "pid {pid} outside the planted window");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    // The same profile as a run in a clean directory.
    let clean = scratch("binary-clean").join("app.prof");
    assert!(run_profgen(&clean).0.success());
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&clean).unwrap());
}

/// Runs profgen on a committed sample with a 60 s deadline; its exit status and pid.
fn run_profgen(out: &Path) -> (std::process::ExitStatus, u32) {
    let sample = sample("inline_chain");
    let mut child = Command::new(PROFGEN)
        .arg("--binary")
        .arg(sample.join("inline_chain"))
        .arg("--perfdata")
        .arg(sample.join("perf.data"))
        .args(["--no-progress", "--format", "text", "--output"])
        .arg(out)
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return (s, child.id());
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("profgen (pid {}) hung writing {}", child.id(), out.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn new_profile_keeps_the_permissions_of_the_file_it_replaces() {
    let dir = scratch("keep-mode");
    let out = dir.join("app.prof");
    std::fs::write(&out, b"old").unwrap();
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o640)).unwrap();
    write_with_deadline(b"new", out.clone()).unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), b"new");
    assert_eq!(mode(&out), 0o640);
}

#[test]
fn new_profile_gets_the_umask_permissions_and_leaves_no_temporary_file() {
    let dir = scratch("umask");
    let out = dir.join("app.prof");
    write_with_deadline(b"new", out.clone()).unwrap();
    assert_eq!(mode(&out), 0o666 & !umask());
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("app.prof")]);
}

#[test]
fn unwritable_directory_is_an_error_naming_it() {
    let dir = scratch("missing");
    let out = dir.join("no-such-dir/app.prof");
    let err = write_with_deadline(b"new", out.clone()).unwrap_err().to_string();
    assert_eq!(err, format!("{}: No such file or directory (os error 2)", out.display()));
}
