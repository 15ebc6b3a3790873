//! The fleet job on Spark (scripts/fleet-spark) in local mode, on a small synthetic fleet
//! (scripts/fleet-gen: hosts derived from three corpus recordings, with other pids, load
//! addresses and sample subsets) plus two bad hosts: every binary's profile from the job equals
//! the profile of one `profgen` run over all the hosts' files, and the bad ones are skipped,
//! listed in the job's report, and make it exit 3. Skipped with a note when pyspark or Java is missing
//! (`.ci/run` installs pyspark).

mod common;

use common::{PROFGEN, root, scratch};
use std::process::Command;

fn have_pyspark() -> bool {
    Command::new("python3")
        .args(["-c", "import pyspark"])
        .output()
        .is_ok_and(|o| o.status.success())
        && Command::new("java").arg("-version").output().is_ok_and(|o| o.status.success())
}

#[test]
fn spark_job_in_local_mode_gives_the_single_run_profiles() {
    if !have_pyspark() {
        eprintln!("note: pyspark or java not available; the Spark job is not tested");
        return;
    }
    let dir = scratch("fleet-spark");
    let o = Command::new(root().join("scripts/fleet-gen"))
        .args(["--hosts", "12", "--seed", "3", "--sources", "inline_chain,cpp_virtual,tailcall"])
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "fleet-gen: {}", String::from_utf8_lossy(&o.stderr));
    // Two bad hosts: the job skips them, says so, and profiles the rest.
    let hosts = dir.join("hosts");
    std::fs::write(hosts.join("zz-empty.data"), b"").unwrap();
    std::fs::write(hosts.join("zz-junk.data"), b"not a recording at all\n").unwrap();
    let out = dir.join("out");
    let o = Command::new(root().join("scripts/fleet-spark"))
        .args(["--master", "local[2]", "--files-per-task", "3", "--fan-in", "2"])
        .arg("--profgen")
        .arg(PROFGEN)
        .arg("--inputs")
        .arg(dir.join("hosts"))
        .arg("--binaries")
        .arg(dir.join("store"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "fleet-spark: {err}");
    assert!(err.contains("fleet-spark: 2 inputs skipped, 0 truncated"), "{err}");
    let report: String = std::fs::read_to_string(out.join("report.json")).unwrap();
    assert!(report.contains("\"inputs\": 14"), "{report}");
    assert!(report.contains("\"map_tasks\": 5"), "{report}");
    for (name, why) in [
        (
            "zz-empty.data",
            "not a perf.data file: 0 bytes is too short for the 16-byte perf.data header",
        ),
        ("zz-junk.data", "at byte offset 0: expected the perf.data magic"),
    ] {
        let listed = format!(
            "{}/{name}\",\n   \"error\": \"{}/{name}: {why}",
            hosts.display(),
            hosts.display()
        );
        assert!(report.contains(&listed), "{listed}\n{report}");
    }
    let mut compared = 0;
    for case in ["inline_chain", "cpp_virtual", "tailcall"] {
        let binary = dir.join("store").join(case).join(case);
        let id = profgen::binary::store::read_build_id(&binary).unwrap().unwrap();
        let from_job = std::fs::read(
            out.join("profiles").join(format!("{case}-{}.prof", profgen::binary::hex(&id))),
        )
        .unwrap();
        let direct = dir.join(format!("{case}.prof"));
        let o = Command::new(PROFGEN)
            .arg("--binary")
            .arg(&binary)
            .arg("--perfdata")
            .arg(dir.join("hosts"))
            .arg("-o")
            .arg(&direct)
            .output()
            .unwrap();
        // The directory's bad files are skipped there too (exit 3).
        assert_eq!(o.status.code(), Some(3), "profgen: {}", String::from_utf8_lossy(&o.stderr));
        assert!(from_job == std::fs::read(&direct).unwrap(), "{case}: the job's profile differs");
        compared += 1;
    }
    assert_eq!(compared, 3);
    let _ = std::fs::remove_dir_all(&dir);
}
