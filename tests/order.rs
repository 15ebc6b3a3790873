//! Start-up function ordering end to end: the start-up pages metric (`profgen-pages`, needs
//! valgrind).

mod common;

use common::{have, root};
use std::path::Path;
use std::process::Command;

fn pages(binary: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_profgen-pages"))
        .arg("--binary")
        .arg(binary)
        .args(args)
        .arg("--")
        .arg(binary)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn start_up_pages_counts_the_binarys_code_pages_by_first_execution() {
    if !have("valgrind") {
        eprintln!("skipped: valgrind not on PATH");
        return;
    }
    // All of recursion's code (0x401000-0x401249) is one page, first run after ld.so and
    // libc's start-up, well after the first 1% of the run.
    let binary = root().join("perf-samples/recursion/recursion");
    let text =
        pages(&binary, &["--at-percent", "1", "--at-percent", "100", "--at-instructions", "1000"]);
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].ends_with(" code pages executed") && lines[0].contains(" instructions, 1 "));
    assert_eq!(lines[1], "cutoff\tinstructions\tpages");
    assert!(lines[2].starts_with("1%\t") && lines[2].ends_with("\t0"), "{text}");
    assert!(lines[3].starts_with("100%\t") && lines[3].ends_with("\t1"), "{text}");
    assert_eq!(lines[4], "1000\t1000\t0");
}

#[test]
fn start_up_pages_rejects_percentages_out_of_range() {
    let out = Command::new(env!("CARGO_BIN_EXE_profgen-pages"))
        .args(["--binary", "x", "--at-percent", "150", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "profgen-pages: error: --at-percent 150 is not between 0 and 100\n"
    );
}
