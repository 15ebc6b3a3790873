//! Start-up function ordering end to end: `profgen order` on corpus recordings (trace
//! extraction, sampling and merging of traces, the ordering file lld reads), `--order-output`
//! next to a profile, and the start-up pages metric (`profgen-pages`, needs valgrind).

mod common;

use common::{PROFGEN, have, root, scratch};
use std::path::Path;
use std::process::{Command, Output};

fn profgen(args: &[&str]) -> Output {
    Command::new(PROFGEN).current_dir(root()).args(args).output().unwrap()
}

/// Runs profgen and returns its stdout; fails the test when it fails.
fn profgen_ok(args: &[&str]) -> String {
    let o = profgen(args);
    assert!(o.status.success(), "profgen {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

const STARTUP: &str = "perf-samples/startup/startup";
const STARTUP_DATA: &str = "perf-samples/startup/perf.data";
const STARTUP_BRANCHES: &str = "perf-samples/startup/perf-branches.data";

/// `profgen order` on the startup case's cycles recording, with `extra` options.
fn order_startup(extra: &[&str]) -> String {
    profgen_ok(&[&["order", "--binary", STARTUP, "--perfdata", STARTUP_DATA][..], extra].concat())
}

/// The symbol names of an ordering file, without its comment lines.
fn names(order: &str) -> Vec<&str> {
    order.lines().filter(|l| !l.starts_with('#')).collect()
}

/// startup.c's function `i` of the start-up phase, named in octal like the source.
fn started(i: u32) -> String {
    format!("f{:03o}", (i * 389 + 17) % 512)
}

/// Every function symbol of the binary in address order (what `nm -n` lists as code).
fn functions_by_address(binary: &str) -> Vec<String> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(root().join(binary)).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let mut syms: Vec<(u64, String)> = obj
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
        .map(|s| (s.address(), s.name().unwrap().to_string()))
        .collect();
    syms.sort();
    syms.into_iter().map(|(_, n)| n).collect()
}

#[test]
fn trace_of_the_startup_case_is_the_order_the_program_first_runs_its_functions() {
    // startup.c runs _start, main, then functions pick(0..160) once each, then a loop over
    // pick(31 j) for j < 8, two of which (j = 6, 7) start-up did not run. The recordings sample
    // every 397 instructions (cycles) or 19 taken branches; their LBR entries and call stacks
    // show every one of these functions, in the order they first ran. The rest of the binary
    // follows in address order.
    let mut expected = vec!["_start".to_string(), "main".to_string()];
    expected.extend((0..160).map(started));
    expected.extend([started(6 * 31), started(7 * 31)]);
    let rest: Vec<String> =
        functions_by_address(STARTUP).into_iter().filter(|f| !expected.contains(f)).collect();
    expected.extend(rest);
    for data in [STARTUP_DATA, STARTUP_BRANCHES] {
        let out = profgen_ok(&[
            "order",
            "--binary",
            STARTUP,
            "--perfdata",
            data,
            "--algorithm",
            "timestamp",
            "-o",
            "-",
        ]);
        assert!(out.starts_with(
            "# profgen order: 514 functions, the first 164 by first timestamp of 1 temporal trace\n\
             # for lld --symbol-ordering-file (with -ffunction-sections)\n"
        ));
        assert_eq!(names(&out), expected, "{data}");
    }
}

#[test]
fn inlined_functions_count_toward_the_function_they_are_inlined_into() {
    // stage1..stage3 are always_inline: their code lives in compute, which is what the linker
    // moves. _start never shows in a sample here, so it keeps its place after the traced ones.
    let out = profgen_ok(&[
        "order",
        "--binary",
        "perf-samples/inline_chain/inline_chain",
        "--perfdata",
        "perf-samples/inline_chain/perf.data",
        "-o",
        "-",
    ]);
    assert_eq!(names(&out), ["main", "compute", "_start"]);
}

#[test]
fn order_output_next_to_a_profile_is_what_profgen_order_writes() {
    let dir = scratch("next-to-profile");
    let (prof, order) = (dir.join("p.prof"), dir.join("order.txt"));
    let o = Command::new(PROFGEN)
        .current_dir(root())
        .args(["--binary", STARTUP, "--perfdata", STARTUP_DATA, "--format", "text", "-o"])
        .arg(&prof)
        .arg("--order-output")
        .arg(&order)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("; 163 functions in the profile\n"), "{err}");
    assert!(
        err.ends_with(
            "profgen order: 1 trace used (1 seen), 164 of 514 functions ordered by it; pages \
             their functions span (mean per trace, estimated): 36.0 in the original order, 12.0 \
             ordered\n"
        ),
        "{err}"
    );
    assert!(std::fs::read_to_string(&prof).unwrap().contains("main:"));
    let alone = order_startup(&["-o", "-"]);
    assert_eq!(std::fs::read_to_string(&order).unwrap(), alone);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn merging_saved_traces_equals_reading_every_input_at_once() {
    let dir = scratch("merge");
    let t = |n: &str| dir.join(n).to_str().unwrap().to_string();
    let inputs = [STARTUP_DATA, STARTUP_BRANCHES, "perf-samples/startup/perf.data"];
    // Samples of one trace each, then all of them read at once, with room for two traces only:
    // which two is the seed's choice, the same however the inputs are grouped.
    for (i, data) in inputs.iter().enumerate() {
        profgen_ok(&[
            "order",
            "--binary",
            STARTUP,
            "--perfdata",
            data,
            "--max-traces",
            "2",
            "--seed",
            "3",
            "--write-traces",
            &t(&format!("{i}.traces")),
        ]);
    }
    let mut all = vec!["order", "--binary", STARTUP, "--max-traces", "2", "--seed", "3"];
    for data in &inputs {
        all.extend(["--perfdata", data]);
    }
    let (at_once, at_once_traces) = (t("at-once.txt"), t("at-once.traces"));
    profgen_ok(&[&all[..], &["-o", &at_once, "--write-traces", &at_once_traces]].concat());
    let (a, b, c) = (t("0.traces"), t("1.traces"), t("2.traces"));
    // The same sampling parameters, the given inputs, both outputs.
    let run = |inputs: &[&str], order: &str, traces: &str| {
        let fixed = ["order", "--binary", STARTUP, "--max-traces", "2", "--seed", "3"];
        let o = profgen(&[&fixed[..], inputs, &["-o", order, "--write-traces", traces]].concat());
        assert!(o.status.success(), "{}", stderr(&o));
        stderr(&o)
    };
    let (merged, merged_traces) = (t("merged.txt"), t("merged.traces"));
    let err = run(
        &["--traces", &c, "--traces", &a, "--perfdata", STARTUP_BRANCHES],
        &merged,
        &merged_traces,
    );
    assert!(err.contains("profgen order: 2 traces used (3 seen)"), "{err}");
    let read = |p: &str| std::fs::read_to_string(p).unwrap();
    assert_eq!(read(&merged), read(&at_once));
    assert_eq!(read(&merged_traces), read(&at_once_traces));
    assert!(read(&merged_traces).starts_with(
        "# profgen temporal traces v1\nseed 3 capacity 2 max-length 10000 seen 3\ntrace 1000 "
    ));
    // Traces alone (no perf.data) merge the same way.
    let (only, only_traces) = (t("only.txt"), t("only.traces"));
    run(&["--traces", &b, "--traces", &a, "--traces", &c], &only, &only_traces);
    assert_eq!(read(&only), read(&at_once));
    assert_eq!(read(&only_traces), read(&at_once_traces));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn saved_traces_with_other_sampling_parameters_are_refused() {
    let dir = scratch("params");
    let saved = dir.join("a.traces");
    let saved = saved.to_str().unwrap();
    order_startup(&["--write-traces", saved]);
    let o = profgen(&["order", "--binary", STARTUP, "--traces", saved, "--seed", "1", "-o", "-"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "profgen: error: {saved}: traces were sampled with seed 0, 100 traces of at most \
             10000 functions but this run samples with seed 1, 100 traces of at most 10000 \
             functions\n"
        )
    );
    std::fs::write(dir.join("bad.traces"), "# profgen temporal traces v1\nseed 0\n").unwrap();
    let bad = dir.join("bad.traces");
    let o = profgen(&["order", "--binary", STARTUP, "--traces", bad.to_str().unwrap(), "-o", "-"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        format!(
            "profgen: error: {}:2: expected `seed S capacity C max-length L seen N`, found \
             `seed 0`\n",
            bad.display()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn order_usage_errors() {
    let o = profgen(&["order", "--binary", STARTUP, "--perfdata", STARTUP_DATA]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("nothing to write: give --output (the order) or --write-traces"));
    let o = profgen(&["order", "--binary", STARTUP, "-o", "-"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no traces to order by: give --perfdata, --perfscript or --traces")
    );
    let o = profgen(&[
        "--binary",
        STARTUP,
        "--unsymbolized-profile",
        "x",
        "-o",
        "/dev/null",
        "--order-output",
        "o.txt",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--order-output needs samples"), "{}", stderr(&o));
    let o =
        profgen(&["order", "--binary", STARTUP, "--perfdata", "x", "--algorithm", "x", "-o", "-"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn wrong_binary_for_the_traces_is_an_error_naming_what_the_input_maps() {
    let o = profgen(&[
        "order",
        "--binary",
        "perf-samples/inline_chain/inline_chain",
        "--perfdata",
        STARTUP_DATA,
        "-o",
        "-",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr(&o);
    assert!(
        err.contains("no mmap event in perf-samples/startup/perf.data maps this binary"),
        "{err}"
    );
    assert!(o.stdout.is_empty());
}

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

/// The number of code pages a whole run executes, from profgen-pages' first line.
fn pages_executed(text: &str) -> u64 {
    let first = text.lines().next().unwrap();
    let (head, _) = first.split_once(" code pages executed").unwrap();
    head.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn relinked_with_the_order_the_startup_case_touches_fewer_pages() {
    if !have("valgrind") || !have("clang-19") || !have("ld.lld-19") {
        eprintln!("skipped: needs valgrind, clang-19 and lld-19");
        return;
    }
    let dir = scratch("relink");
    let order = dir.join("order.txt");
    order_startup(&["-o", order.to_str().unwrap()]);
    // The build of case.toml, plus the ordering file.
    let ordered = dir.join("startup");
    let o = Command::new("clang-19")
        .current_dir(root().join("perf-samples/startup"))
        .args(["-O2", "-g", "-fdebug-compilation-dir=.", "-fno-omit-frame-pointer"])
        .args(["-mno-omit-leaf-frame-pointer", "-fdebug-info-for-profiling"])
        .args(["-ffunction-sections", "-fuse-ld=lld", "startup.c", "-o"])
        .arg(&ordered)
        .arg(format!("-Wl,--symbol-ordering-file={}", order.display()))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    // lld followed the file: the start-up functions come first, in its order.
    let file_order: Vec<String> =
        names(&std::fs::read_to_string(&order).unwrap()).iter().map(|s| s.to_string()).collect();
    let linked = functions_by_address(ordered.to_str().unwrap());
    let linked_startup: Vec<&String> =
        linked.iter().filter(|f| file_order[..164].contains(f)).collect();
    assert_eq!(linked_startup, file_order[..164].iter().collect::<Vec<_>>());
    let before = pages_executed(&pages(&root().join(STARTUP), &[]));
    let after = pages_executed(&pages(&ordered, &[]));
    // All 38 pages of code by default; about 15 ordered (the 160 start-up functions need 11).
    assert_eq!(before, 38);
    assert!(after <= 16, "{after} pages after ordering");
    let _ = std::fs::remove_dir_all(&dir);
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
    assert!(lines[0].ends_with(" instructions, 1 code pages executed"), "{text}");
    assert_eq!(lines[1], "cutoff\tinstructions\tpages");
    assert!(lines[2].starts_with("1%\t") && lines[2].ends_with("\t0"), "{text}");
    assert!(lines[3].starts_with("100%\t") && lines[3].ends_with("\t1"), "{text}");
    assert_eq!(lines[4], "1000\t1000\t0");
    // --stop-after ends the program there: the pages of a long run's start, cheaply.
    let text = pages(&root().join(STARTUP), &["--stop-after", "200000"]);
    assert!(text.starts_with(&format!(
        "# {}: 200000 instructions (stopped there), ",
        root().join(STARTUP).display()
    )));
    assert!(text.lines().last().unwrap().starts_with("200000\t200000\t"), "{text}");
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
