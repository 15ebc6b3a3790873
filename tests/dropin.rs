//! Drop-in use by build systems: response files, negative numbers, help, the newer upstream
//! options, IP-only input, messages that say why a profile is empty, split DWARF and kernel
//! profiles (the last two also against llvm-profgen-19).

mod common;

use common::{PROFGEN, have, llvm_canonical, root, sample, scratch};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn profgen(args: &[&str]) -> Output {
    Command::new(PROFGEN).current_dir(root()).args(args).output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: &Output) -> String {
    assert!(o.status.success(), "{}", stderr(o));
    stderr(o)
}

fn p(path: &Path) -> &str {
    path.to_str().unwrap()
}

const IP_BIN: &str = "perf-samples/ip-inline-pie/prog";
const IP_DATA: &str = "perf-samples/ip-inline-pie/perf.data";

fn ip_expected() -> String {
    std::fs::read_to_string(root().join("perf-samples/ip-inline-pie/expected/leading-ip-only.txt"))
        .unwrap()
}

#[test]
fn response_files_follow_llvm_gnu_tokenizer_rules() {
    let dir = scratch("rsp");
    let out = dir.join("out.txt");
    // Quotes (single and double) group and are removed, a backslash escapes the next character
    // (also inside quotes), and a nested @file is expanded in place.
    std::fs::write(dir.join("inner.rsp"), "--format\\=text\n'--leading-ip-only'").unwrap();
    std::fs::write(
        dir.join("outer.rsp"),
        format!(
            "--binary \"{}\"\n  --perfdata '{}' @{}\n-o {}\n",
            root().join(IP_BIN).display(),
            root().join(IP_DATA).display(),
            dir.join("inner.rsp").display(),
            out.display()
        ),
    )
    .unwrap();
    ok(&profgen(&[&format!("@{}", dir.join("outer.rsp").display())]));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), ip_expected());

    // A file that includes itself is an error; a missing file stays a literal argument.
    std::fs::write(dir.join("loop.rsp"), format!("@{}", dir.join("loop.rsp").display())).unwrap();
    let o = profgen(&[&format!("@{}", dir.join("loop.rsp").display())]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("recursive expansion of: '"), "{}", stderr(&o));
    let o = profgen(&["@/nonexistent/args.rsp"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("'@/nonexistent/args.rsp'"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gnu_tokenizer_matches_llvm() {
    use profgen::cli::tokenize_gnu_command_line as t;
    let s =
        |v: Vec<Vec<u8>>| v.into_iter().map(|b| String::from_utf8(b).unwrap()).collect::<Vec<_>>();
    assert_eq!(s(t(br#"a "b c" 'd "e"' f\ g"#)), ["a", "b c", "d \"e\"", "f g"]);
    // Backslashes escape inside both kinds of quotes; quotes join with neighbours.
    assert_eq!(s(t(br#"x"y\"z"w 'q\'r'"#)), ["xy\"zw", "q'r"]);
    // Empty arguments are dropped, as LLVM drops them; an unterminated quote runs to the end.
    assert_eq!(s(t(b"'' a \"b c")), ["a", "b c"]);
    assert_eq!(s(t(b"trailing\\")), ["trailing\\"]);
}

#[test]
fn negative_numbers_are_values() {
    let dir = scratch("neg");
    let out = dir.join("out.txt");
    let o = profgen(&[
        "--binary",
        IP_BIN,
        "--perfdata",
        IP_DATA,
        "--leading-ip-only",
        "--format=text",
        "--profile-density-threshold",
        "-10",
        "-csprof-max-context-depth",
        "-1",
        "-o",
        p(&out),
    ]);
    ok(&o);
    assert_eq!(std::fs::read_to_string(&out).unwrap(), ip_expected());
    let o = profgen(&[
        "--binary",
        IP_BIN,
        "--perfdata",
        IP_DATA,
        "-o",
        p(&out),
        "--compress-recursion",
        "-2",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("Value of --compress-recursion should >= -1"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_is_grouped_short_and_hides_expert_options() {
    let help = |flag: &str| {
        let o = profgen(&[flag]);
        assert!(o.status.success(), "{}", stderr(&o));
        String::from_utf8(o.stdout).unwrap()
    };
    let short = help("-h");
    let long = help("--help");
    let hidden = help("--help-hidden");
    for text in [&short, &long, &hidden] {
        // Not a terminal: wrapped at clap's default width.
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(text.contains("Input:") && text.contains("Output:"), "{text}");
    }
    assert!(short.lines().count() < 60, "{short}");
    assert!(!short.contains("--csspgo-preinliner") && short.contains("--perfdata"), "{short}");
    for heading in ["Context-sensitive profiles:", "Profile summary and density:", "Inspection:"] {
        assert!(long.contains(heading), "{heading}: {long}");
    }
    assert!(long.contains("--csspgo-preinliner") && long.contains("--help-hidden"), "{long}");
    assert!(!long.contains("--sample-profile-inline-limit-max"), "{long}");
    assert!(hidden.contains("--sample-profile-inline-limit-max"), "{hidden}");
    assert!(hidden.contains("--csprof-max-unsymbolized-context-depth"), "{hidden}");
}

/// `perf record -g` without `-b`: read as IP samples, with a note, not an empty profile.
#[test]
fn input_without_branch_stacks_is_profiled_from_ips_with_a_note() {
    let dir = scratch("ip-auto");
    let out = dir.join("out.txt");
    let e =
        ok(&profgen(&["--binary", IP_BIN, "--perfdata", IP_DATA, "--format=text", "-o", p(&out)]));
    assert!(e.contains("note: ") && e.contains("recorded no branch stacks"), "{e}");
    assert!(e.contains("as --leading-ip-only"), "{e}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), ip_expected());
    // --basic-events is newer llvm-profgen's name for the same mode.
    let e = ok(&profgen(&[
        "--binary",
        IP_BIN,
        "--perfdata",
        IP_DATA,
        "--basic-events",
        "--format=text",
        "-o",
        p(&out),
    ]));
    assert!(!e.contains("note: "), "{e}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), ip_expected());
    // --quiet: nothing but warnings.
    let e = ok(&profgen(&["--binary", IP_BIN, "--perfdata", IP_DATA, "-q", "-o", p(&out)]));
    assert_eq!(e, "");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn copy_with(dir: &Path, name: &str, tool_args: &[&str], from: &Path) -> PathBuf {
    let to = dir.join(name);
    let o = Command::new("llvm-objcopy-19").args(tool_args).arg(from).arg(&to).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    to
}

#[test]
fn stripped_binaries_and_missing_line_tables_are_named() {
    if !have("llvm-objcopy-19") {
        eprintln!("note: llvm-objcopy-19 not installed; skipped");
        return;
    }
    let dir = scratch("stripped");
    let out = dir.join("out.txt");
    let bin = root().join(IP_BIN);
    // Stripped of everything: the samples land in the binary, but it has no functions.
    let all = copy_with(&dir, "prog", &["--strip-all"], &bin);
    let e =
        ok(&profgen(&["--binary", p(&all), "--perfdata", IP_DATA, "--format=text", "-o", p(&out)]));
    assert!(e.contains("no symbol table and no DWARF (a stripped binary?)"), "{e}");
    assert!(e.contains("the profile is empty: ") && e.contains("stripped?"), "{e}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
    // Symbols without line tables: counts collapse to line offset 0, and profgen says so.
    let debug = copy_with(&dir, "prog", &["--strip-debug"], &bin);
    let e = ok(&profgen(&[
        "--binary",
        p(&debug),
        "--perfdata",
        IP_DATA,
        "--format=text",
        "-o",
        p(&out),
    ]));
    assert!(
        e.contains("no DWARF line tables (built without -g, or stripped with --strip-debug)"),
        "{e}"
    );
    // --warn-not-symbolized lists sampled addresses without a function, here all of them once
    // the symbol table may not be used.
    let e = ok(&profgen(&[
        "--binary",
        p(&debug),
        "--perfdata",
        IP_DATA,
        "--load-function-from-symbol=0",
        "--warn-not-symbolized",
        "-o",
        p(&out),
    ]));
    assert!(
        e.contains("sampled instruction addresses of") && e.contains("could not be symbolized"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_rebuilt_binary_is_refused_with_the_likely_reason() {
    let dir = scratch("rebuilt");
    let out = dir.join("out.prof");
    let mut bytes = std::fs::read(root().join(IP_BIN)).unwrap();
    // Change the build id (the 20 bytes of the NT_GNU_BUILD_ID note) as a rebuild would.
    let header = [&[4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0][..], b"GNU\0"].concat();
    let at = bytes.windows(header.len()).position(|w| w == header).unwrap() + header.len();
    for b in &mut bytes[at..at + 20] {
        *b ^= 0x5a;
    }
    let bin = dir.join("prog");
    std::fs::write(&bin, bytes).unwrap();
    let o =
        profgen(&["--binary", p(&bin), "--perfdata", IP_DATA, "--leading-ip-only", "-o", p(&out)]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains(
            "prog is mapped in the input with another build id: rebuilt since the recording?"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!out.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn time_profgen_prints_the_phases() {
    let dir = scratch("time");
    let out = dir.join("out.prof");
    let e = ok(&profgen(&[
        "--binary",
        "perf-samples/inline_chain/inline_chain",
        "--perfdata",
        "perf-samples/inline_chain/perf.data",
        "--time-profgen",
        "-o",
        p(&out),
    ]));
    let table = e.split("profgen: time per phase (wall clock)\n").nth(1).expect(&e);
    let phases: Vec<&str> =
        table.lines().map(|l| l.trim_start().split("  ").next().unwrap().trim()).collect();
    assert_eq!(
        phases,
        [
            "loading the binary",
            "reading",
            "unwinding",
            "symbolizing",
            "post-passes, writing",
            "total"
        ],
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn text_profile(args: &[&str], out: &Path) -> String {
    let mut all = args.to_vec();
    all.extend(["--format=text", "-o", p(out)]);
    ok(&profgen(&all));
    std::fs::read_to_string(out).unwrap()
}

#[test]
fn probes_come_from_the_debug_binary_when_the_binary_has_none() {
    if !have("llvm-objcopy-19") {
        eprintln!("note: llvm-objcopy-19 not installed; skipped");
        return;
    }
    let dir = scratch("probes-debug");
    let bin = sample("inline_chain/inline_chain");
    let data = sample("inline_chain/perf.data");
    let stripped = copy_with(
        &dir,
        "inline_chain",
        &["--remove-section=.pseudo_probe", "--remove-section=.pseudo_probe_desc"],
        &bin,
    );
    let out = dir.join("out.txt");
    let with_probes = text_profile(&["--binary", p(&bin), "--perfdata", p(&data)], &out);
    let from_debug = text_profile(
        &["--binary", p(&stripped), "--debug-binary", p(&bin), "--perfdata", p(&data)],
        &out,
    );
    assert_eq!(from_debug, with_probes);
    // Without the debug binary the profile is line-based: not the probe profile.
    let lines = text_profile(&["--binary", p(&stripped), "--perfdata", p(&data)], &out);
    assert_ne!(lines, with_probes);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Off is llvm-profgen-19's behaviour, so `--llvm-compatible` implies it unless the option is
/// given.
#[test]
fn load_function_from_symbol_off_is_dwarf_functions_only() {
    let dir = scratch("symbols-off");
    let out = dir.join("out.txt");
    let args = [
        "--binary",
        "perf-samples/switch_table/switch_table",
        "--perfdata",
        "perf-samples/switch_table/perf.data",
        "--ignore-stack-samples",
        "--fill-zero-for-all-funcs",
    ];
    let on = text_profile(&args, &out);
    let mut off_args = args.to_vec();
    off_args.push("--load-function-from-symbol=false");
    let off = text_profile(&off_args, &out);
    assert!(on.lines().any(|l| l.starts_with("_start:")), "{on}");
    assert!(!off.lines().any(|l| l.starts_with("_start:")), "{off}");
    let mut compatible = args.to_vec();
    compatible.push("--llvm-compatible");
    let compatible_off = text_profile(&compatible, &out);
    compatible.push("--load-function-from-symbol");
    let compatible_on = text_profile(&compatible, &out);
    assert!(!compatible_off.lines().any(|l| l.starts_with("_start:")), "{compatible_off}");
    assert!(compatible_on.lines().any(|l| l.starts_with("_start:")), "{compatible_on}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unsymbolized_context_depth_limits_probe_contexts_like_the_context_depth() {
    let dir = scratch("unsym-depth");
    let run = |opt: &str, name: &str| {
        let out = dir.join(name);
        ok(&profgen(&[
            "--binary",
            "perf-samples/recursion/recursion",
            "--perfdata",
            "perf-samples/recursion/perf.data",
            "--skip-symbolization",
            opt,
            "-o",
            p(&out),
        ]));
        std::fs::read_to_string(out).unwrap()
    };
    let by_unsymbolized = run("--csprof-max-unsymbolized-context-depth=1", "a");
    let by_context = run("--csprof-max-context-depth=1", "b");
    let unlimited = run("--csprof-max-unsymbolized-context-depth=-1", "c");
    assert_eq!(by_unsymbolized, by_context);
    assert_ne!(by_unsymbolized, unlimited);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn mark_all_context_preinlined_keeps_every_context_inlined() {
    let dir = scratch("mark-all");
    let out = dir.join("out.txt");
    let args = [
        "--binary",
        "perf-samples/recursion/recursion",
        "--perfdata",
        "perf-samples/recursion/perf.data",
        "--csspgo-preinliner=0",
        "--gen-cs-nested-profile=0",
    ];
    let flat = text_profile(&args, &out);
    let mut marked_args = args.to_vec();
    marked_args.push("--mark-all-context-preinlined");
    let marked = text_profile(&marked_args, &out);
    let contexts = |t: &str| t.lines().filter(|l| l.starts_with('[')).count();
    assert!(contexts(&flat) > 1);
    // Every context profile carries ShouldBeInlined (attribute 2), nothing else changes.
    let attrs: Vec<&str> = marked.lines().filter(|l| l.contains("!Attributes:")).collect();
    assert_eq!(attrs.len(), contexts(&marked), "{marked}");
    assert!(
        attrs.iter().all(|l| l.trim() == "!Attributes: 2" || l.trim() == "!Attributes: 3"),
        "{marked}"
    );
    let strip =
        |t: &str| t.lines().filter(|l| !l.contains("!Attributes:")).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(&marked), strip(&flat));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The split-DWARF build (`-gsplit-dwarf`, packaged by llvm-dwp-19) profiles exactly as the same
/// code with ordinary DWARF, and as llvm-profgen-19 profiles it.
#[test]
fn split_dwarf_package_profiles_like_ordinary_dwarf() {
    let dir = scratch("split");
    let case = sample("split_dwarf");
    let data = case.join("perf.data");
    let out = dir.join("out.txt");
    let split = case.join("prog");
    // prog.dwp is found next to the binary (LLVM's default), or given with --dwp.
    let default = text_profile(&["--binary", p(&split), "--perfdata", p(&data)], &out);
    let moved = dir.join("elsewhere.dwp");
    std::fs::copy(case.join("prog.dwp"), &moved).unwrap();
    std::fs::copy(&split, dir.join("prog")).unwrap();
    let given = text_profile(
        &["--binary", p(&dir.join("prog")), "--dwp", p(&moved), "--perfdata", p(&data)],
        &out,
    );
    assert_eq!(given, default);
    // A symlink to the binary (a binary store, a .build-id tree) finds the package beside the
    // file it points to.
    let link = dir.join("linked");
    std::os::unix::fs::symlink(split.canonicalize().unwrap(), &link).unwrap();
    let linked = text_profile(&["--binary", p(&link), "--perfdata", p(&data)], &out);
    assert_eq!(linked, default);
    // The same code with ordinary DWARF (identical .text) gives the same profile.
    let ordinary = text_profile(
        &[
            "--binary",
            p(&split),
            "--debug-binary",
            p(&case.join("plain/prog")),
            "--perfdata",
            p(&data),
        ],
        &out,
    );
    assert_eq!(default, ordinary);
    assert!(default.contains("main:") && default.lines().count() > 20, "{default}");
    // Without the package, only the skeleton units: a warning, and no line information.
    let e =
        ok(&profgen(&["--binary", p(&dir.join("prog")), "--perfdata", p(&data), "-o", p(&out)]));
    assert!(e.contains("DWO debug information was not loaded for 1 modules"), "{e}");
    if !(have("llvm-profgen-19") && have("llvm-profdata-19") && have("perf")) {
        eprintln!("note: llvm-profgen-19/llvm-profdata-19/perf not installed; oracle skipped");
        return;
    }
    // LBR-only: the default CS profile differs from llvm-profgen-19's by README difference 9 (this
    // is the cpp_virtual program), which tests/corpus.rs covers.
    let (ours, theirs) = (dir.join("ours.prof"), dir.join("llvm.prof"));
    let args = ["--binary", p(&split), "--perfdata", p(&data), "--ignore-stack-samples"];
    ok(&profgen(&[&args[..], &["--llvm-compatible", "-o", p(&ours)]].concat()));
    let script =
        Command::new(root().join("scripts/perf-script-for-llvm")).arg(&data).arg("lbr").output();
    std::fs::write(dir.join("in.perfscript"), script.unwrap().stdout).unwrap();
    let o = Command::new("llvm-profgen-19")
        .current_dir(&dir)
        .args(["--binary", p(&split), "--perfscript", "in.perfscript", "-o", p(&theirs)])
        .arg("--ignore-stack-samples")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(llvm_canonical(&ours), llvm_canonical(&theirs));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A kernel profile: the non-PIE `recursion` case presented as a kernel image loaded at a
/// KASLR-like address through a `[kernel.kallsyms]_text` mmap event (pid -1, pgoff = start), as
/// `perf script` prints kernel recordings; profgen and llvm-profgen-19 give the same profile.
#[test]
fn kernel_profile_through_kallsyms_mapping_equals_llvm_profgen() {
    if !have("perf") {
        eprintln!("note: perf not installed; skipped");
        return;
    }
    let dir = scratch("kernel");
    let case = sample("recursion");
    let bin = case.join("recursion");
    let script = Command::new(root().join("scripts/perf-script-for-llvm"))
        .arg(case.join("perf.data"))
        .arg("lbr")
        .output()
        .unwrap();
    assert!(script.status.success());
    let text = String::from_utf8(script.stdout).unwrap();
    let kernel = kernel_script(&text, "recursion", 0xffff_ffff_8000_0000);
    std::fs::write(dir.join("kernel.perfscript"), &kernel).unwrap();
    let ours = dir.join("ours.txt");
    let script_path = dir.join("kernel.perfscript");
    let args = ["--binary", p(&bin), "--perfscript", p(&script_path)];
    let e = ok(&profgen(&[&args[..], &["--kernel", "--format=text", "-o", p(&ours)]].concat()));
    let profile = std::fs::read_to_string(&ours).unwrap();
    assert!(profile.contains("fib:"), "{e}\n{profile}");
    // The same samples as a user-space recording give the same profile.
    let user = dir.join("user.txt");
    std::fs::write(dir.join("user.perfscript"), &text).unwrap();
    let same = text_profile(
        &["--binary", p(&bin), "--perfscript", p(&dir.join("user.perfscript"))],
        &user,
    );
    assert_eq!(profile, same);
    // A fleet of kernel recordings: `profgen aggregate --kernel` counts the same samples.
    let pga = dir.join("kernel.pga");
    ok(&profgen(&[&["aggregate"][..], &args, &["--kernel", "-o", p(&pga)]].concat()));
    let from_aggregate = dir.join("from-aggregate.txt");
    let from_aggregate =
        text_profile(&["--binary", p(&bin), "--aggregate", p(&pga)], &from_aggregate);
    assert_eq!(from_aggregate, profile);
    // Without --kernel the kernel mapping is not the binary's.
    let o = profgen(&[&args[..], &["-o", p(&ours)]].concat());
    assert!(!o.status.success() || stderr(&o).contains("the profile is empty"), "{}", stderr(&o));
    // A user-space recording has no kernel mapping: llvm-profgen's error.
    let o = profgen(&[
        "--binary",
        p(&bin),
        "--perfscript",
        p(&dir.join("user.perfscript")),
        "--kernel",
        "-o",
        p(&ours),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("Kernel is requested, but no kernel is found in mmap events"),
        "{}",
        stderr(&o)
    );
    if have("llvm-profgen-19") && have("llvm-profdata-19") {
        let theirs = dir.join("llvm.prof");
        let o = Command::new("llvm-profgen-19")
            .current_dir(&dir)
            .args(args)
            .args(["--kernel", "-o", p(&theirs)])
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let ours_bin = dir.join("ours.prof");
        let compatible = ["--kernel", "--llvm-compatible", "-o", p(&ours_bin)];
        ok(&profgen(&[&args[..], &compatible].concat()));
        assert_eq!(llvm_canonical(&ours_bin), llvm_canonical(&theirs));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `text` (perf script with mmap events) with `binary_name`'s executable mapping line replaced by
/// `mmap(line, start, len)` and every address inside it by `addr(prefix, address)` (`prefix` is `0x`
/// or empty, as the token had it).
fn rewrite_script(
    text: &str,
    binary_name: &str,
    mmap: impl Fn(&str, u64, u64) -> String,
    addr: impl Fn(&str, u64) -> String,
) -> String {
    let binary = format!("/{binary_name}");
    let mut range = None;
    let mut out = String::new();
    for line in text.lines() {
        if line.contains("PERF_RECORD_MMAP") && line.ends_with(&binary) && line.contains("r-xp") {
            let inner = &line[line.find('[').unwrap() + 1..];
            let start = u64::from_str_radix(&inner[2..inner.find('(').unwrap()], 16).unwrap();
            let len_at = inner.find('(').unwrap() + 3;
            let len = u64::from_str_radix(&inner[len_at..inner.find(')').unwrap()], 16).unwrap();
            range = Some((start, start + len));
            out.push_str(&mmap(line, start, len));
            out.push('\n');
            continue;
        }
        if line.contains("PERF_RECORD_") {
            out.push_str(line);
            out.push('\n');
            continue;
        }
        let rewrite = |tok: &str| -> String {
            let (pre, hex) = tok.strip_prefix("0x").map_or(("", tok), |h| ("0x", h));
            match (u64::from_str_radix(hex, 16), range) {
                (Ok(a), Some((s, e))) if a >= s && a < e => addr(pre, a),
                _ => tok.to_string(),
            }
        };
        let fields: Vec<String> = line
            .split(' ')
            .map(|f| {
                let parts = f.split('/').enumerate();
                parts
                    .map(|(i, t)| if i < 2 { rewrite(t) } else { t.to_string() })
                    .collect::<Vec<_>>()
                    .join("/")
            })
            .collect();
        out.push_str(&fields.join(" "));
        out.push('\n');
    }
    assert!(range.is_some(), "no mapping of {binary_name} in the script");
    out
}

/// The binary's mapping turned into the kernel's: `[kernel.kallsyms]_text` of pid -1 at
/// `start + shift` with pgoff = start, every address inside it shifted by `shift`.
fn kernel_script(text: &str, binary_name: &str, shift: u64) -> String {
    rewrite_script(
        text,
        binary_name,
        |_, start, len| {
            let k = start + shift;
            format!("PERF_RECORD_MMAP -1/0: [{k:#x}({len:#x}) @ {k:#x}]: x [kernel.kallsyms]_text")
        },
        |pre, a| format!("{pre}{:x}", a + shift),
    )
}

/// Upstream's `--filter-build-id` and `buildid:0xADDR` perf script addresses: the binary's
/// addresses written with a build id count only when the filter names it.
#[test]
fn build_id_prefixed_perf_script_addresses_follow_filter_build_id() {
    if !have("perf") {
        eprintln!("note: perf not installed; skipped");
        return;
    }
    let dir = scratch("filter-build-id");
    let case = sample("switch_table");
    let bin = case.join("switch_table");
    let script = Command::new(root().join("scripts/perf-script-for-llvm"))
        .arg(case.join("perf.data"))
        .arg("lbr")
        .output()
        .unwrap();
    let text = String::from_utf8(script.stdout).unwrap();
    let id = "0123456789abcdef";
    let prefixed = rewrite_script(
        &text,
        "switch_table",
        |line, _, _| line.to_string(),
        |_, a| format!("{id}:0x{a:x}"),
    );
    let (plain, pre) = (dir.join("plain.perfscript"), dir.join("prefixed.perfscript"));
    std::fs::write(&plain, &text).unwrap();
    std::fs::write(&pre, &prefixed).unwrap();
    let out = dir.join("out.txt");
    let args = |script: &Path| {
        vec![
            "--binary".to_string(),
            p(&bin).to_string(),
            "--perfscript".into(),
            p(script).to_string(),
        ]
    };
    let run = |extra: &[&str]| {
        let mut a: Vec<String> = args(&pre);
        a.extend(extra.iter().map(|s| s.to_string()));
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        text_profile(&a, &out)
    };
    let plain_args = args(&plain);
    let plain_args: Vec<&str> = plain_args.iter().map(String::as_str).collect();
    let expected = text_profile(&plain_args, &out);
    assert!(expected.lines().count() > 10, "{expected}");
    assert_eq!(run(&[&format!("--filter-build-id={id}")]), expected);
    assert_eq!(run(&[&format!("--filter-build-id={}", id.to_uppercase())]), expected);
    // An executable has no filter build id of its own: every prefixed address is another DSO's.
    assert_eq!(run(&[]), "");
    assert_eq!(run(&["--filter-build-id=fedcba9876543210"]), "");
    // `profgen aggregate` reads perf script input with the same filter.
    let pga = dir.join("prefixed.pga");
    let filter = format!("--filter-build-id={id}");
    let pre_args = args(&pre);
    let mut aggregate = vec!["aggregate"];
    aggregate.extend(pre_args.iter().map(String::as_str));
    ok(&profgen(&[&aggregate[..], &[&filter, "-o", p(&pga)]].concat()));
    let from_aggregate = text_profile(&["--binary", p(&bin), "--aggregate", p(&pga)], &out);
    assert_eq!(from_aggregate, expected);
    let o = profgen(&[&plain_args[..], &["--filter-build-id=xyz", "-o", p(&out)]].concat());
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--filter-build-id: 'xyz' is not a build id"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// On a terminal (a pseudo-terminal made by `script`), progress shows one line per phase with
/// its time; not on a pipe, and not with --quiet.
#[test]
fn progress_is_shown_per_phase_on_a_terminal_only() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!("note: script (util-linux) not installed; skipped");
        return;
    }
    let dir = scratch("progress");
    let out = dir.join("out.prof");
    let run = |extra: &str| {
        let cmd = format!(
            "{PROFGEN} --binary perf-samples/inline_chain/inline_chain --perfdata \
             perf-samples/inline_chain/perf.data -o {} {extra}",
            out.display()
        );
        let o = Command::new("script")
            .current_dir(root())
            .args(["-qec", &cmd, "/dev/null"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let shown = run("");
    for phase in ["loading the binary", "reading", "unwinding", "symbolizing"] {
        let line = format!("  {phase:<22}");
        assert!(shown.contains(&line), "{phase}: {shown}");
    }
    assert!(shown.contains("profgen: 1619 samples read"), "{shown}");
    let quiet = run("--quiet");
    assert!(!quiet.contains("  reading") && !quiet.contains("samples read"), "{quiet}");
    let no_progress = run("--no-progress");
    assert!(
        !no_progress.contains("  reading") && no_progress.contains("samples read"),
        "{no_progress}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `cargo package` is clean: metadata complete, the tool and its tests in, the corpus out.
#[test]
fn cargo_package_lists_the_tool_without_warnings() {
    let o = Command::new(env!("CARGO"))
        .current_dir(root())
        .args(["package", "--list", "--allow-dirty", "--offline"])
        .output()
        .unwrap();
    let (out, err) = (String::from_utf8_lossy(&o.stdout), stderr(&o));
    assert!(o.status.success(), "{err}");
    assert!(!err.contains("warning"), "{err}");
    let files: Vec<&str> = out.lines().collect();
    for f in ["Cargo.toml", "Cargo.lock", "README.md", "src/main.rs", "src/bin/profgen-record.rs"] {
        assert!(files.contains(&f), "{f} not packaged: {out}");
    }
    assert!(!files.iter().any(|f| f.starts_with("perf-samples/")), "{out}");
}
