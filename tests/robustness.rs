//! Bad input never crashes profgen or loses work (issue 7): the real `profgen` binary, and the
//! library in-process for the many-variant loops, on damaged copies of the committed samples.
//! Every run ends in exit 0 (with a warning where data was lost) or a clear error (exit 1 for
//! bad input, 2 for bad usage), never a panic or a signal, and never a partial profile at
//! `--output`: a failed run leaves whatever was there before untouched.

mod common;

use common::{
    PERF_ATTR_ENTRY, PERF_HEADER, PROFGEN, first_records, fixture, leftovers, perf_data_file,
    profgen, profgen_command, record_starts, run, run_with_deadline, sample, scratch,
    small_perf_data, stderr, write,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use profgen::error::Error;

/// Runs the pipeline in-process, as `main` does after parsing the command line.
fn run_lib(
    opts: &[&str],
    files: &[(&str, &Path)],
    out: &Path,
) -> Result<profgen::driver::RunReport, Error> {
    let mut argv: Vec<std::ffi::OsString> = vec!["profgen".into(), "--no-progress".into()];
    argv.extend(opts.iter().map(Into::into));
    for (opt, path) in files {
        argv.push(opt.into());
        argv.push(path.into());
    }
    argv.extend(["--format".into(), "text".into(), "--output".into(), out.into()]);
    let profgen::config::Command::Profile(cfg) =
        profgen::cli::parse(argv).expect("valid command line")
    else {
        panic!("a profile command line parsed as another command");
    };
    let (report, result) = profgen::driver::run(&cfg);
    result.map(|()| report)
}

/// Asserts a failed run: exit 1, a last line `profgen: error: <message naming file>` (after the
/// run's warnings, if any), nothing at `out`. Returns that line.
fn assert_bad_input(o: &Output, names: &Path, out: &Path) -> String {
    let all = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{all}");
    let err = format!("{}\n", all.lines().last().unwrap_or_default());
    assert!(err.starts_with("profgen: error: "), "{all}");
    assert!(
        err.contains(&names.display().to_string()),
        "error does not name {}: {err}",
        names.display()
    );
    assert!(!out.exists(), "a failed run left {}", out.display());
    err
}

/// Deterministic xorshift64 stream.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn flip_bits(&mut self, bytes: &mut [u8], max_flips: usize) {
        for _ in 0..1 + self.below(max_flips) {
            let at = self.below(bytes.len());
            bytes[at] ^= 1 << self.below(8);
        }
    }
}

#[test]
fn small_perf_data_is_complete_and_profiles() {
    let dir = scratch("small");
    let data = write(&dir, "small.data", &small_perf_data());
    let out = dir.join("out.prof");
    let o = profgen(
        &[],
        &[("--binary", &sample("inline_chain/inline_chain")), ("--perfdata", &data)],
        &out,
    );
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(
        err.ends_with(
            "profgen: 55 samples read, 6 used (5 distinct stacks), 49 dropped (49 outside the binary); \
             binary matched by build id; LBR windows weighted by 1/cycles (sampled by cycles); \
             2 functions in the profile\n"
        ),
        "{err}"
    );
    let profile = std::fs::read_to_string(&out).unwrap();
    assert!(profile.starts_with("compute:1353:1\n"), "{profile}");
}

/// Cutting a perf.data at every record boundary (and inside every record header) gives exit 3,
/// a warning naming the file and the byte offset of the cut, and the profile of the records
/// before it.
#[test]
fn truncation_at_every_record_boundary_keeps_the_records_before_it() {
    let dir = scratch("truncation");
    let whole = small_perf_data();
    let (_, _, starts) = record_starts(&whole);
    let binary = sample("inline_chain/inline_chain");
    let out = dir.join("out.prof");
    let mut last_used = 0;
    for &start in &starts[1..] {
        for cut in [start, start + 3] {
            let data = write(&dir, "cut.data", &whole[..cut]);
            let _ = std::fs::remove_file(&out);
            let report = run_lib(&[], &[("--binary", &binary), ("--perfdata", &data)], &out)
                .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
            let expected = format!("{}: input truncated at byte offset {start}: ", data.display());
            assert!(
                report.warnings.iter().any(|w| w.starts_with(&expected)),
                "cut at {cut}: {:?}",
                report.warnings
            );
            assert!(out.exists(), "cut at {cut}: no profile written");
            assert_eq!(report.exit_code(), 3, "cut at {cut}");
            assert!(
                report.inputs.samples.used >= last_used,
                "cut at {cut}: fewer samples than an earlier cut"
            );
            last_used = report.inputs.samples.used;
        }
    }
    assert_eq!(last_used, 5, "the last cut drops only the last sample in the binary");

    // The same through the binary: exit 3 (written, but not every input read in full), the
    // warning on stderr, a profile at --output.
    let cut = starts[30];
    let data = write(&dir, "cut.data", &whole[..cut]);
    let _ = std::fs::remove_file(&out);
    let o = profgen(&[], &[("--binary", &binary), ("--perfdata", &data)], &out);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "warning: {}: input truncated at byte offset {cut}: ",
            data.display()
        )),
        "{}",
        stderr(&o)
    );
    assert!(out.exists(), "no profile written");

    // A cut inside the header leaves nothing to read: an error, and no output.
    let data = write(&dir, "cut.data", &whole[..100]);
    let _ = std::fs::remove_file(&out);
    let o = profgen(&[], &[("--binary", &binary), ("--perfdata", &data)], &out);
    assert_bad_input(&o, &data, &out);
}

/// Random bit flips in the perf.data, the binary, a perf script and an unsymbolized profile:
/// every run ends in a profile or an error, never a panic, and a failed run writes nothing.
#[test]
fn bit_flips_end_in_a_profile_or_an_error() {
    let dir = scratch("flips");
    let out = dir.join("out.prof");
    let perf_data = small_perf_data();
    let binary = std::fs::read(sample("inline_chain/inline_chain")).unwrap();
    let loop_bin = fixture("unsymbolized/loop");
    let script = std::fs::read(fixture("unsymbolized/loop.hybrid.perfscript")).unwrap();
    let raw = std::fs::read(fixture("unsymbolized/loop.hybrid.raw")).unwrap();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut ok, mut failed) = (0, 0);
    let mut check = |result: Result<profgen::driver::RunReport, Error>, what: &str, out: &Path| {
        match result {
            Ok(_) => {
                ok += 1;
                assert!(out.exists(), "{what}: exit 0 without a profile");
            }
            Err(e) => {
                failed += 1;
                assert_eq!(e.exit_code(), 1, "{what}: {e}");
                assert!(!out.exists(), "{what}: a failed run left a profile");
            }
        }
        let _ = std::fs::remove_file(out);
    };
    let good_binary = sample("inline_chain/inline_chain");
    let data = write(&dir, "good.data", &perf_data);
    // `runs` runs, each on a copy of `original` with bits flipped, written to `dir/name`.
    let mut flipped = |original: &[u8], runs: usize, name: &str, run: &dyn Fn(&Path) -> _| {
        for i in 0..runs {
            let mut bytes = original.to_vec();
            rng.flip_bits(&mut bytes, 4);
            let path = write(&dir, name, &bytes);
            check(run(&path), &format!("{name} flip {i}"), &out);
        }
    };
    flipped(&perf_data, 120, "flip.data", &|data| {
        run_lib(&[], &[("--binary", &good_binary), ("--perfdata", data)], &out)
    });
    flipped(&binary, 60, "inline_chain", &|bin| {
        run_lib(&[], &[("--binary", bin), ("--perfdata", &data)], &out)
    });
    flipped(&script, 60, "flip.perfscript", &|s| {
        run_lib(&[], &[("--binary", &loop_bin), ("--perfscript", s)], &out)
    });
    flipped(&raw, 60, "flip.raw", &|r| {
        run_lib(&[], &[("--binary", &loop_bin), ("--unsymbolized-profile", r)], &out)
    });
    // Both outcomes occur, so the loop exercises both paths.
    assert!(ok > 0 && failed > 0, "{ok} profiles, {failed} errors");
    assert_eq!(leftovers(&dir, &[]).len(), 5, "{:?}", leftovers(&dir, &[]));
}

#[test]
fn empty_and_junk_files_are_clear_errors() {
    let dir = scratch("junk");
    let out = dir.join("out.prof");
    let binary = sample("inline_chain/inline_chain");
    let perf_data = sample("inline_chain/perf.data");
    let empty = write(&dir, "empty", b"");
    let junk = write(&dir, "junk", &b"\x7fELF? no: just some junk bytes\n\xff\x00".repeat(64));
    for bad in [&empty, &junk] {
        let o = profgen(&[], &[("--binary", &binary), ("--perfdata", bad)], &out);
        let err = assert_bad_input(&o, bad, &out);
        assert!(err.contains("perf.data"), "{err}");
        let o = profgen(&[], &[("--binary", bad), ("--perfdata", &perf_data)], &out);
        let err = assert_bad_input(&o, bad, &out);
        assert!(err.contains("ELF"), "{err}");
    }
    let o = profgen(&[], &[("--binary", &binary), ("--unsymbolized-profile", &junk)], &out);
    let err = assert_bad_input(&o, &junk, &out);
    assert!(err.contains("Invalid raw profile at line 1: "), "{err}");
    // An empty unsymbolized profile has no counters: the empty profile, with a warning.
    let o = profgen(&[], &[("--binary", &binary), ("--unsymbolized-profile", &empty)], &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("warning: the profile is empty"), "{}", stderr(&o));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
    std::fs::remove_file(&out).unwrap();
    let o = profgen(&[], &[("--binary", &binary), ("--perfdata", &empty)], &out);
    assert_eq!(
        stderr(&o),
        format!(
            "profgen: error: {}: not a perf.data file: 0 bytes is too short for the 16-byte perf.data header\n",
            empty.display()
        )
    );
    // An empty perf script identifies no kind (llvm-profgen's text).
    let o = profgen(&[], &[("--binary", &binary), ("--perfscript", &empty)], &out);
    let err = assert_bad_input(&o, &empty, &out);
    assert!(err.contains("Invalid perf script input!"), "{err}");
}

#[test]
fn missing_files_are_clear_errors() {
    let dir = scratch("missing");
    let out = dir.join("out.prof");
    let missing = dir.join("no-such-file");
    let binary = sample("inline_chain/inline_chain");
    for files in [
        [("--binary", missing.as_path()), ("--perfdata", &sample("inline_chain/perf.data"))],
        [("--binary", &binary), ("--perfdata", &missing)],
        [("--binary", &binary), ("--perfscript", &missing)],
        [("--binary", &binary), ("--unsymbolized-profile", &missing)],
    ] {
        let o = profgen(&[], &files, &out);
        let err = assert_bad_input(&o, &missing, &out);
        assert!(err.ends_with("No such file or directory (os error 2)\n"), "{err}");
    }
    // An output directory that does not exist: the error names the output.
    let nowhere = dir.join("no-such-dir/out.prof");
    let o = profgen(
        &[],
        &[("--binary", &binary), ("--perfdata", &sample("inline_chain/perf.data"))],
        &nowhere,
    );
    assert_bad_input(&o, &nowhere, &nowhere);
}

#[test]
fn usage_errors_exit_2() {
    let o = Command::new(PROFGEN).args(["--binary", "x"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let o = Command::new(PROFGEN)
        .args(["--binary", "x", "--output", "y", "--no-such-option"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn truncated_and_corrupt_elf_are_clear_errors() {
    let dir = scratch("elf");
    let out = dir.join("out.prof");
    let perf_data = sample("inline_chain/perf.data");
    let elf = std::fs::read(sample("inline_chain/inline_chain")).unwrap();
    let u64_at = |at: usize| u64::from_le_bytes(elf[at..at + 8].try_into().unwrap()) as usize;
    let u16_at = |at: usize| usize::from(u16::from_le_bytes([elf[at], elf[at + 1]]));
    let (shoff, shentsize, shnum) = (u64_at(0x28), u16_at(0x3a), u16_at(0x3c));

    for cut in [16, 64, elf.len() / 2, shoff + 10, elf.len() - 1] {
        let bin = write(&dir, "inline_chain", &elf[..cut]);
        let o = profgen(&[], &[("--binary", &bin), ("--perfdata", &perf_data)], &out);
        let err = assert_bad_input(&o, &bin, &out);
        assert!(err.contains("ELF"), "cut at {cut}: {err}");
    }

    // Section headers pointing outside the file, or a section header table past the end.
    let mut far = elf.clone();
    far[0x28..0x30].copy_from_slice(&(elf.len() as u64 * 2).to_le_bytes());
    let mut many = elf.clone();
    many[0x3c..0x3e].copy_from_slice(&u16::MAX.to_le_bytes());
    let mut bad_sections = elf.clone();
    for i in 1..shnum {
        let sh = shoff + i * shentsize;
        bad_sections[sh + 0x18..sh + 0x20].copy_from_slice(&(u64::MAX - 7).to_le_bytes()); // sh_offset
        bad_sections[sh + 0x20..sh + 0x28].copy_from_slice(&(1u64 << 40).to_le_bytes()); // sh_size
    }
    for (name, bytes) in [("far", far), ("many", many), ("bad_sections", bad_sections)] {
        let bin = write(&dir, "inline_chain", &bytes);
        let o = profgen(&[], &[("--binary", &bin), ("--perfdata", &perf_data)], &out);
        let err = assert_bad_input(&o, &bin, &out);
        assert!(err.contains("ELF") || err.contains("section"), "{name}: {err}");
    }
}

/// Samples from another program: an error saying what the input maps instead, most-sampled
/// first, and no profile; an existing profile at --output is left alone.
#[test]
fn wrong_binary_says_what_the_input_holds() {
    let dir = scratch("wrong");
    let out = write(&dir, "out.prof", b"previous profile\n");
    let binary = sample("inline_chain/inline_chain");
    let perf_data = sample("recursion/perf.data");
    let o = profgen(&[], &[("--binary", &binary), ("--perfdata", &perf_data)], &out);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "profgen: error: {}: no mmap event in {} maps this binary (build id 897d38e34fceaca90e60860b40c301399db5a5e3, \
             file name inline_chain), and no sample lands in it; executables mapped in the input, most-sampled first: \
             /work/wt-acc/perf-samples/recursion/recursion (build id 1c0f5e5cb7aa5011d866cdf7134999149c06afc5, 1168 samples), \
             /usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 (build id 7ebc65e52f2bbea498b4040fa92f7238377aaba9, 122 samples), \
             /usr/lib/x86_64-linux-gnu/libc.so.6 (build id 93ac61ec5a8eb1396f9fbd350e3169a558528a40, 4 samples), \
             /usr/libexec/valgrind/vgpreload_core-amd64-linux.so (build id adf1388be4d8781737b0c83fe111a5a9c6e930aa, 0 samples)\n",
            binary.display(),
            perf_data.display()
        )
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "previous profile\n");
    assert_eq!(leftovers(&dir, &[&out]), Vec::<PathBuf>::new());

    // The binary is mapped but no sample lands in it (the samples are in the main program):
    // a warning naming where they are, and the (empty) profile.
    let lib = sample("shared_lib/libshapes.so");
    // Cut right after the library's mmap, which the recorder writes when its first instruction
    // runs: the library is mapped, and no sample has landed in it yet.
    let full = std::fs::read(sample("shared_lib/perf.data")).unwrap();
    let (_, _, starts) = record_starts(&full);
    let lib_mmap = starts
        .iter()
        .position(|&at| {
            u32::from_le_bytes(full[at..at + 4].try_into().unwrap()) == 10 && {
                let size = usize::from(u16::from_le_bytes([full[at + 6], full[at + 7]]));
                full[at..at + size].windows(12).any(|w| w == b"libshapes.so")
            }
        })
        .unwrap();
    let data = write(&dir, "shared.data", &first_records(&full, lib_mmap + 1));
    let report = run_lib(&[], &[("--binary", &lib), ("--perfdata", &data)], &out).unwrap();
    assert!(
        report.inputs.samples.read > 0 && report.inputs.samples.used == 0,
        "{:?}",
        report.inputs.samples
    );
    assert!(
        report.warnings.iter().any(|w| w.starts_with(&format!("no sample lands in {} (it is mapped); executables mapped in the input, most-sampled first: ", lib.display()))),
        "{:?}",
        report.warnings
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "");
}

#[test]
fn garbage_in_a_perf_script_is_warned_about_or_rejected() {
    let dir = scratch("script");
    let out = dir.join("out.prof");
    let binary = fixture("unsymbolized/loop");
    let mut script = std::fs::read(fixture("unsymbolized/loop.lbr.perfscript")).unwrap();
    script
        .extend_from_slice(b"garbage line\n     0xzz 0x1/0x2/P/-/-/0\n\xff\xfe\x00 binary junk\n");
    let s = write(&dir, "garbage.perfscript", &script);
    let o = profgen(&[], &[("--binary", &binary), ("--perfscript", &s)], &out);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(out.exists());

    // Only garbage: no line says what the script holds.
    let s = write(&dir, "only-garbage.perfscript", b"garbage line\n\xff\xfe\x00 binary junk\n");
    let _ = std::fs::remove_file(&out);
    let o = profgen(&[], &[("--binary", &binary), ("--perfscript", &s)], &out);
    let err = assert_bad_input(&o, &s, &out);
    assert!(err.contains("Invalid perf script input!"), "{err}");
}

#[test]
fn garbage_in_an_unsymbolized_profile_names_the_line() {
    let dir = scratch("raw");
    let out = dir.join("out.prof");
    let binary = fixture("unsymbolized/loop");
    let mut raw = std::fs::read(fixture("unsymbolized/loop.lbr.raw")).unwrap();
    raw.extend_from_slice(b"garbage\n");
    let r = write(&dir, "garbage.raw", &raw);
    let o = profgen(&[], &[("--binary", &binary), ("--unsymbolized-profile", &r)], &out);
    let err = assert_bad_input(&o, &r, &out);
    assert!(err.contains("Invalid raw profile at line 13: garbage"), "{err}");
}

/// Pipe mode from stdin (`--perfdata -`), cut inside the last record: a warning with the offset,
/// the profile of the records before it, and exit 3.
#[test]
fn truncated_pipe_on_stdin_warns_and_profiles() {
    use std::io::Write;
    use std::process::Stdio;
    let dir = scratch("stdin");
    let out = dir.join("out.prof");
    let bytes = std::fs::read(sample("ip-nopie-pipe-zstd/perf.data")).unwrap();
    let mut child = Command::new(PROFGEN)
        .args(["--leading-ip-only", "--perfdata", "-", "--format", "text", "--binary"])
        .arg(sample("ip-nopie-pipe-zstd/prog"))
        .arg("--output")
        .arg(&out)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(&bytes[..bytes.len() - 5]).unwrap();
    let o = child.wait_with_output().unwrap();
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("warning: -: input truncated at byte offset "), "{err}");
    assert!(out.exists());
}

/// A compressed debug section claiming 3 GiB from 106 bytes is ignored with a warning instead of
/// being allocated: allocation sizes taken from input are bounded by the input's size.
#[test]
fn compressed_section_size_is_bounded_by_the_file() {
    use profgen::binary::{Binary, LoadOptions};
    let path = fixture("robustness/loop_zlib_bomb");
    let binary = Binary::load(&path, &LoadOptions::default()).unwrap();
    assert_eq!(
        binary.warnings(),
        [format!(
            "{}: .debug_info: compressed section claims 3221225472 bytes uncompressed from 106 bytes (more than 1032:1); ignored",
            path.display()
        )]
    );
    // The symbol table still gives the functions.
    assert!(binary.functions().iter().any(|f| &*f.name == "main"));
}

/// A corrupt pseudo probe id (any u32) in a function of the profile: its call anchors, which
/// fill in every id below the largest one recorded, stop at a bound linear in the probes and
/// say so, instead of filling in four billion ids.
#[test]
fn huge_probe_id_is_not_filled_in_as_anchors() {
    let (bin, e, text) = run_implausible_binary("recursion_huge_probe_id", "recursion/perf.data");
    let warning = format!(
        "warning: {}: pseudo probe id 4294967280 of fib is implausibly large for the 23 probes \
         of .pseudo_probe; only the ids recorded there are its stale-matching anchors\n",
        bin.display()
    );
    assert!(e.contains(&warning), "{e}");
    // The added probe is at fib's entry, where it takes the entry's samples.
    assert!(text.contains("\nfib:5436:1804\n") && text.contains("\n 4294967280: 900\n"), "{text}");
}

/// Executable sections describing the same addresses again: only the first is disassembled,
/// and a warning counts the others, so the work grows with the code, not with the copies.
#[test]
fn overlapping_text_sections_are_disassembled_once() {
    let (bin, e, _) =
        run_implausible_binary("inline_chain_overlapping_text", "inline_chain/perf.data");
    let warning = format!(
        "warning: {}: executable sections overlapping one at a lower address are not \
         disassembled: 2, the first .text at 0x10000000\n",
        bin.display()
    );
    assert!(e.contains(&warning), "{e}");
}

/// A run on the crafted binary `tests/fixtures/robustness/<name>` with the committed sample
/// `perf_data`, in a capped address space ([`profgen_capped`]); asserts it succeeds and returns
/// the binary's path, the run's stderr and the text profile.
fn run_implausible_binary(name: &str, perf_data: &str) -> (PathBuf, String, String) {
    let dir = scratch(name);
    let out = dir.join("out.txt");
    let bin = fixture(&format!("robustness/{name}"));
    let o = profgen_capped(&[], &[("--binary", &bin), ("--perfdata", &sample(perf_data))], &out);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    let text = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    (bin, e, text)
}

/// A run (`--leading-ip-only`) on the crafted recording `tests/fixtures/robustness/<name>` with
/// `inline_chain`'s binary, in a capped address space ([`profgen_capped`]); returns the
/// recording's path, the run's exit code and its stderr.
fn run_crafted_recording(name: &str) -> (PathBuf, Option<i32>, String) {
    let dir = scratch(name);
    let perf_data = fixture(&format!("robustness/{name}"));
    let binary = sample("inline_chain/inline_chain");
    let files = [("--binary", binary.as_path()), ("--perfdata", &perf_data)];
    let o = profgen_capped(&["--leading-ip-only"], &files, &dir.join("out.txt"));
    std::fs::remove_dir_all(&dir).unwrap();
    (perf_data, o.status.code(), stderr(&o))
}

/// Address space a run on a deep or implausible input may use, with one worker: a few times what
/// profgen needs (under 64 MiB; the time order's 64 MiB of copied records take about 430 MiB),
/// far below what depth² frames, a copy per reference or an unbounded recursion would take.
const DEEP_INPUT_ADDRESS_SPACE: u64 = 512 << 20;

/// [`profgen`] with one worker and its address space capped at [`DEEP_INPUT_ADDRESS_SPACE`]: a
/// run that needs more dies of a failed allocation (a signal), which [`run`] rejects.
fn profgen_capped(opts: &[&str], files: &[(&str, &Path)], out: &Path) -> Output {
    capped(profgen_command(&[opts, &["--threads", "1"]].concat(), files, out))
}

/// [`run`]s `cmd` with its address space capped at [`DEEP_INPUT_ADDRESS_SPACE`].
fn capped(mut cmd: Command) -> Output {
    cap_address_space(&mut cmd);
    run(cmd)
}

/// Caps `cmd`'s address space at [`DEEP_INPUT_ADDRESS_SPACE`].
fn cap_address_space(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setrlimit is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: DEEP_INPUT_ADDRESS_SPACE,
                rlim_max: DEEP_INPUT_ADDRESS_SPACE,
            };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The first sample of `unsymbolized/loop.hybrid.perfscript` (leaf in `foo`, LBR through `bar`
/// and back) with its caller frame (`main`'s call of `foo`) repeated `callers` times.
fn deep_call_chain_script(callers: usize) -> Vec<u8> {
    let text = std::fs::read_to_string(fixture("unsymbolized/loop.hybrid.perfscript")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let (mmap, leaf, caller, external, lbr) = (lines[0], lines[2], lines[3], lines[4], lines[5]);
    assert!(lbr.starts_with(" 0x") && caller.trim() == "55555555579e", "{text}");
    let mut out = format!("{mmap}\n\n{leaf}\n");
    for _ in 0..callers {
        out.push_str(caller);
        out.push('\n');
    }
    out.push_str(&format!("{external}\n{lbr}\n"));
    out.into_bytes()
}

/// A perf script sample whose call chain is 100,000 frames deep used to overflow the unwinder's
/// stack (one recursion per frame). Its contexts keep their innermost 1024 frames: the profile
/// is exactly that of the same sample with 1024 callers, and a warning says so.
#[test]
fn perf_script_call_chain_of_100000_frames_keeps_its_innermost_1024() {
    let dir = scratch("deep_chain");
    let binary = fixture("unsymbolized/loop");
    let deep = write(&dir, "deep.perfscript", &deep_call_chain_script(100_000));
    let at_bound = write(&dir, "at_bound.perfscript", &deep_call_chain_script(1024));
    let below = write(&dir, "below.perfscript", &deep_call_chain_script(1022));
    let warning = "warning: 1 samples have call stacks deeper than 1024 frames: their contexts keep the \
         innermost 1024\n";
    // Recursion compression off, so every frame stays in the contexts; and on (the default),
    // where the repeated caller collapses.
    for opts in [&["--compress-recursion=0"][..], &[]] {
        let profile_of = |script: &Path, name: &str| {
            let out = dir.join(name);
            let o = profgen_capped(opts, &[("--binary", &binary), ("--perfscript", script)], &out);
            assert_eq!(o.status.code(), Some(0), "{opts:?} {name}: {}", stderr(&o));
            (std::fs::read_to_string(&out).unwrap(), stderr(&o))
        };
        let (deep_profile, deep_err) = profile_of(&deep, "deep.prof");
        let (bound_profile, bound_err) = profile_of(&at_bound, "at_bound.prof");
        let (below_profile, below_err) = profile_of(&below, "below.prof");
        assert_eq!(deep_profile, bound_profile, "{opts:?}");
        assert!(deep_err.contains(warning) && bound_err.contains(warning), "{deep_err}");
        assert!(!below_err.contains("deeper than"), "{below_err}");
        // Compression off, 1022 callers keep every frame, so the profile differs.
        assert_eq!(deep_profile == below_profile, opts.is_empty(), "{opts:?}");
    }
}

/// An unsymbolized profile of distinct frames, `depth` callers deep then `foo`.
fn deep_unsymbolized(depth: usize) -> Vec<u8> {
    let callers: Vec<String> = (0..depth).map(|i| format!("f{i}:{}", i % 7)).collect();
    format!("[{} @ foo]\n  1\n  740-763:4\n  0\n", callers.join(" @ ")).into_bytes()
}

/// Unsymbolized contexts of 13,000 frames overflowed the stack in the nesting post-pass, and one
/// of 1,000,000 frames (8 MB) grew to several GB first (one profile per caller, each holding its
/// own copy of the context). They keep their innermost 1024 callers: the profile is exactly that
/// of the context cut by hand, in every output shape, and a run fits in 512 MiB.
#[test]
fn unsymbolized_contexts_of_13000_and_1000000_frames_keep_their_innermost_1024() {
    let dir = scratch("deep_unsymbolized");
    let binary = fixture("unsymbolized/loop");
    for depth in [13_000, 1_000_000] {
        let whole = deep_unsymbolized(depth);
        let deep = write(&dir, "deep.raw", &whole);
        // The same context cut to its innermost 1024 callers.
        let cut: Vec<u8> = {
            let text = String::from_utf8(whole).unwrap();
            let frames: Vec<&str> = text[1..text.find(']').unwrap()].split(" @ ").collect();
            let kept = frames[frames.len() - 1025..].join(" @ ");
            format!("[{kept}]\n  1\n  740-763:4\n  0\n").into_bytes()
        };
        let cut = write(&dir, "cut.raw", &cut);
        for opts in [
            &[][..],
            &["--gen-cs-nested-profile=0"],
            &["--csspgo-preinliner=0"],
            &[
                "--csspgo-preinliner=0",
                "--gen-cs-nested-profile=0",
                "--csprof-merge-cold-context=0",
            ],
        ] {
            let profile_of = |input: &Path, name: &str| {
                let out = dir.join(name);
                let o = profgen_capped(
                    opts,
                    &[("--binary", &binary), ("--unsymbolized-profile", input)],
                    &out,
                );
                assert_eq!(o.status.code(), Some(0), "{depth} {opts:?} {name}: {}", stderr(&o));
                (std::fs::read_to_string(&out).unwrap(), stderr(&o))
            };
            let (deep_profile, deep_err) = profile_of(&deep, "deep.prof");
            let (cut_profile, cut_err) = profile_of(&cut, "cut.prof");
            assert_eq!(deep_profile, cut_profile, "{depth} {opts:?}");
            assert!(
                deep_err.starts_with(&format!(
                    "warning: {}: 1 contexts are deeper than 1024 frames: they keep the innermost 1024\n",
                    deep.display()
                )),
                "{deep_err}"
            );
            assert!(!cut_err.contains("deeper than"), "{cut_err}");
            // Without the pre-inliner (which merges these cold contexts into base profiles),
            // every caller is a profile of its own: 1024 nested levels, or 1025 contexts.
            if opts.contains(&"--csspgo-preinliner=0") {
                let deepest = if opts.contains(&"--gen-cs-nested-profile=0") {
                    cut_profile.lines().filter(|l| l.starts_with('[')).count()
                } else {
                    cut_profile.lines().map(|l| l.len() - l.trim_start().len()).max().unwrap_or(0)
                };
                assert!(deepest >= 1024, "{depth} {opts:?}: {deepest}");
            }
        }
    }
}

/// A perf script naming a new event on each of its 160,000 LBR lines (10 MB) reads in time
/// linear in its lines: the events were looked up by a scan of the names seen, which took over a
/// minute.
#[test]
fn perf_script_naming_an_event_per_line_reads_in_linear_time() {
    let dir = scratch("event-per-line");
    let binary = sample("inline_chain/inline_chain");
    let mut script = String::from(
        "PERF_RECORD_MMAP2 1/1: [0x400000(0x100000) @ 0 08:01 1 0]: r-xp /bin/inline_chain\n",
    );
    for i in 0..160_000 {
        script.push_str(&format!("e{i}:  0x401000/0x401010/P/-/-/0  0x401020/0x401030/P/-/-/0\n"));
    }
    let s = write(&dir, "events.script", script.as_bytes());
    let out = dir.join("out.txt");
    let cmd =
        profgen_command(&["--threads", "1"], &[("--binary", &binary), ("--perfscript", &s)], &out);
    let o = run_with_deadline(cmd, 30);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A file-mode perf.data of 10,000 events, each claiming the whole file (800 KB) as its ids:
/// the ids are read once, those of events past the file's worth are dropped with a warning each
/// (before, every event's were read: 20 s, quadratic in the file's size).
#[test]
fn attr_ids_overlapping_are_read_once() {
    const EVENTS: usize = 10_000;
    let dir = scratch("overlapping-ids");
    let len = PERF_HEADER + EVENTS * PERF_ATTR_ENTRY + 8;
    // sample_type IP | TID | ID: samples name their event by id; each event's ids are the file.
    let attrs = vec![(1 | 2 | 64, [0, len as u64]); EVENTS];
    let finished_round = [68, 0, 0, 0, 0, 0, 8, 0];
    let data = perf_data_file(&attrs, &finished_round, &[]);
    assert_eq!(data.len(), len);
    let perf_data = write(&dir, "perf.data", &data);
    let out = dir.join("out.txt");
    let binary = sample("inline_chain/inline_chain");
    let cmd = profgen_command(
        &["--threads", "1"],
        &[("--binary", &binary), ("--perfdata", &perf_data)],
        &out,
    );
    let o = run_with_deadline(cmd, 10);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    let warning = format!(
        "warning: {}: at byte offset 184: ids of event 1 ({len} bytes at 0) overlap those of \
         earlier events, which together take more than the file's {len} bytes; its samples \
         cannot be told apart\n",
        perf_data.display()
    );
    assert!(e.contains(&warning), "{e}");
    assert_eq!(e.matches("overlap those of earlier events").count(), EVENTS - 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Records copied to be queued for time order (from a stream or compressed data) are bounded by
/// the memory they take: `pipe_zstd_unreleased_round` (23 KB) inflates, after its one finished
/// round, to 17 million 16-byte samples, which were queued up to 256 MiB by their length
/// (1 GiB with their locations and entries, 1.4 GB of address space) and aborted. Its first
/// 5.6 million (past 1024 times its size: see `zstd_data_inflating_past_perf_compression_is_cut`)
/// are read.
#[test]
fn records_queued_for_time_order_are_bounded_by_their_memory() {
    let (_, code, e) = run_crafted_recording("pipe_zstd_unreleased_round");
    // The samples lie in no mapping: an empty profile of a cut input.
    assert_eq!(code, Some(3), "{e}");
    assert!(e.contains("5636096 samples are in no mapped file"), "{e}");
    let warning = "over 67108864 bytes of copied records (a stream or compressed data) without a \
                   finished round; time order is approximate\n";
    assert!(e.contains(warning), "{e}");
    assert!(e.contains("input truncated at byte offset 160: compressed data inflating"), "{e}");
}

/// zstd data is decoded up to 1024 times the compressed bytes read (and 64 MiB), perf's own
/// compressing about ten to one: past that the input is cut, so a file's decoding time stays
/// linear in its size. `pipe_zstd_ratio_bomb` (6.9 KB) inflates to 80 MB of records profgen
/// skips; a 67 KB file of the same kind to 800 MB took 4 s.
#[test]
fn zstd_data_inflating_past_perf_compression_is_cut() {
    let (perf_data, code, e) = run_crafted_recording("pipe_zstd_ratio_bomb");
    assert_eq!(code, Some(3), "{e}");
    let warning = format!(
        "warning: {}: input truncated at byte offset 152: compressed data inflating to over \
         74448896 bytes from 6735 compressed bytes, past 1024 times their size and 64 MiB (not \
         perf's compression); the compressed records from here on are skipped; using the events \
         before it\n",
        perf_data.display()
    );
    assert!(e.contains(&warning), "{e}");
    assert!(e.contains("1 inputs (0 skipped, 1 truncated)"), "{e}");
}

/// Unsigned LEB128, for crafting binary profiles.
fn uleb(mut v: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// An extbinary profile whose section headers overlap is refused, naming the sections: 100
/// headers over one 400 KB context table read it 100 times, past 1 GiB.
#[test]
fn extbinary_sections_overlapping_are_refused() {
    use profgen::llvm::sample_prof::{FORMAT_EXT_BINARY, VERSION, magic, sec};
    let path = Path::new("overlap.extbinary");
    let mut names = Vec::new();
    uleb(1, &mut names);
    names.extend(b"f\0");
    // One context: one frame, `f` at line 0.
    let contexts = [1, 1, 0, 0, 0];
    let mut data = Vec::new();
    uleb(magic(FORMAT_EXT_BINARY), &mut data);
    uleb(VERSION, &mut data);
    let count_at = data.len();
    data.extend(3u64.to_le_bytes());
    let at = (data.len() + 3 * 32) as u64;
    let table = at + names.len() as u64;
    for (ty, offset, size) in [
        (sec::NAME_TABLE, at, names.len()),
        (sec::CS_NAME_TABLE, table, contexts.len()),
        (sec::CS_NAME_TABLE, table, contexts.len()),
    ] {
        for v in [ty, 0, offset, size as u64] {
            data.extend(v.to_le_bytes());
        }
    }
    data.extend(&names);
    data.extend(contexts);
    let err = profgen::reader::read_profile(&data, path).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "overlap.extbinary: at byte offset {table}: section 6 at {table}..+5 overlaps section 6 at {table}..+5"
        )
    );
    // Without the third header, it reads.
    data[count_at] = 2;
    let read = profgen::reader::read_profile(&data, path).unwrap();
    assert_eq!(read.profile.functions.len(), 0);
}

/// A binary profile names a function by its index in a name table: its references share the
/// name. An extbinary profile of one 100,000-byte name and one context of 10,000 frames naming
/// it (130 KB), and an aggregate of the same, take memory linear in their size: a copy of the
/// name per frame took over 1 GiB and aborted.
#[test]
fn binary_profiles_share_their_names() {
    use profgen::llvm::sample_prof::sec;
    const NAME: usize = 100_000;
    const FRAMES: usize = 10_000;
    let dir = scratch("shared-names");
    let mut names = Vec::new();
    uleb(1, &mut names);
    names.extend(vec![b'f'; NAME]);
    names.push(0);
    let mut contexts = vec![1];
    uleb(FRAMES as u64, &mut contexts);
    contexts.extend([0; 3].repeat(FRAMES)); // name 0, line 0, discriminator 0
    let profile = extbinary_of(&[(sec::NAME_TABLE, 0, &names), (sec::CS_NAME_TABLE, 0, &contexts)]);
    let profile = write(&dir, "names.extbinary", &profile);
    let binary = fixture("unsymbolized/loop");
    let out = dir.join("remapped.prof");
    let mut cmd = Command::new(PROFGEN);
    cmd.arg("remap").arg("--profile").arg(&profile).arg("--binary").arg(&binary);
    cmd.arg("-o").arg(&out);
    let o = capped(cmd);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    // The aggregate: one name, one context of the frames.
    let pga = aggregate_of_contexts(&[&vec![b'f'; NAME]], &one_context_of(FRAMES, &[0; 3]));
    let pga = write(&dir, "names.pga", &pga);
    let mut cmd = Command::new(PROFGEN);
    cmd.arg("merge").arg("-o").arg(dir.join("merged.pga")).arg(&pga);
    let o = capped(cmd);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An extbinary profile of `sections` (type, LLVM's section flags, bytes), one after another.
fn extbinary_of(sections: &[(u64, u32, &[u8])]) -> Vec<u8> {
    use profgen::llvm::sample_prof::{FORMAT_EXT_BINARY, VERSION, magic};
    let mut profile = Vec::new();
    uleb(magic(FORMAT_EXT_BINARY), &mut profile);
    uleb(VERSION, &mut profile);
    profile.extend((sections.len() as u64).to_le_bytes());
    let mut at = (profile.len() + sections.len() * 32) as u64;
    for (ty, flags, bytes) in sections {
        for v in [*ty, u64::from(*flags) << 32, at, bytes.len() as u64] {
            profile.extend(v.to_le_bytes());
        }
        at += bytes.len() as u64;
    }
    for (_, _, bytes) in sections {
        profile.extend(*bytes);
    }
    profile
}

/// A binary profile's inlinees find their profile by the callee's shared name: `profgen remap`
/// of an extbinary profile of one 1 MiB name inlined 1,000,000 times at one call site of itself
/// (7 MB) takes well under a second. Each inlinee looked its callee up by text, reading the
/// name (a terabyte in all: minutes).
#[test]
fn binary_profile_inlinees_find_their_callee_by_shared_name() {
    use profgen::llvm::sample_prof::sec;
    const INLINEES: usize = 1_000_000;
    let dir = scratch("shared-inlinees");
    let mut names = Vec::new();
    uleb(1, &mut names);
    names.extend(vec![b'f'; 1 << 20]);
    names.push(0);
    // Head samples, name 0, total samples, no body records, the inlinees: each at line 1 of
    // name 0, without samples, body records or inlinees of its own.
    let mut profiles = vec![0, 0, 0, 0];
    uleb(INLINEES as u64, &mut profiles);
    profiles.extend([1, 0, 0, 0, 0, 0].repeat(INLINEES));
    let profile = extbinary_of(&[(sec::NAME_TABLE, 0, &names), (sec::LBR_PROFILE, 0, &profiles)]);
    let profile = write(&dir, "inlinees.extbinary", &profile);
    // The default (extbinary) output: writing it looks each inlinee's name up.
    let err = remap_capped(&profile, &dir.join("remapped.prof"), "extbinary");
    // The function is not in the binary.
    let summary = "profgen remap: 1 functions: 0 carried exactly, 0 matched by anchors (0 \
                   renamed), 1 dropped; samples: 0 exact, 0 matched, 0 dropped\n";
    assert!(err.ends_with(summary), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `profgen remap` of `profile` onto `unsymbolized/loop` into `out` in `format`, capped and with a
/// 30 s deadline: its stderr.
fn remap_capped(profile: &Path, out: &Path, format: &str) -> String {
    let mut cmd = Command::new(PROFGEN);
    cmd.arg("remap").arg("--profile").arg(profile);
    cmd.arg("--binary").arg(fixture("unsymbolized/loop"));
    cmd.arg("--format").arg(format).arg("-o").arg(out);
    cap_address_space(&mut cmd);
    let o = run_with_deadline(cmd, 30);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    stderr(&o)
}

/// Two 1 MiB names differing in their last byte, named at 300,000 places of one function of an
/// extbinary profile (call targets of one line, inlinees at one call site; one name twice in the
/// name table, two equal texts not shared) (7 MB): `profgen remap` takes well under a second,
/// the names in their texts' order. Each place compared the two texts (a third of a terabyte:
/// minutes); now a name's text is placed among the others once, and compares by its label.
#[test]
fn names_sharing_a_long_prefix_are_ordered_without_reading_it() {
    use profgen::llvm::sample_prof::sec;
    const PLACES: usize = 300_000;
    let dir = scratch("long-prefix");
    let long = |last: u8| [vec![b'f'; 1 << 20], vec![last]].concat();
    let (a, b) = (long(b'a'), long(b'b'));
    let mut names = Vec::new();
    uleb(4, &mut names);
    for name in [&b"main"[..], &a, &b, &a] {
        names.extend(name);
        names.push(0);
    }
    // `main` (name 0): head samples, name, total samples; body records at line 1 of count 1,
    // each calling one copy of A and B once; inlinees at line 1 (A, B, A's copy), without
    // samples, body records or inlinees.
    let mut profiles = vec![0, 0, 0];
    uleb(PLACES as u64, &mut profiles);
    for i in 0..PLACES {
        let (x, y) = [(1, 2), (2, 3), (3, 2), (2, 1)][i % 4];
        profiles.extend([1, 0, 1, 2, x, 1, y, 1]);
    }
    uleb(PLACES as u64, &mut profiles);
    for i in 0..PLACES {
        profiles.extend([1, 0, 1 + (i % 3) as u8, 0, 0, 0]);
    }
    let profile = extbinary_of(&[(sec::NAME_TABLE, 0, &names), (sec::LBR_PROFILE, 0, &profiles)]);
    let profile = write(&dir, "long-prefix.extbinary", &profile);
    let remapped = dir.join("remapped.prof");
    let err = remap_capped(&profile, &remapped, "text");
    let out = std::fs::read_to_string(&remapped).unwrap();
    let (a, b) = (String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
    assert!(out == format!("main:0:0\n 1: {PLACES} {a}:{PLACES} {b}:{PLACES}\n"), "differs");
    // A and B are not in the binary: their inlinees are dropped.
    let summary = format!(
        "profgen remap: 3 functions: 1 carried exactly, 0 matched by anchors (0 renamed), 2 \
         dropped; samples: {PLACES} exact, 0 matched, 0 dropped\n"
    );
    assert!(err.ends_with(&summary), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `profgen remap` of an extbinary CS profile of 20,000 contexts `c:i @ A` and `c:i @ B`, A and
/// B two 1 MiB names differing in their last byte (2.4 MB), takes well under a second: the
/// contexts are ordered without reading the names, and renaming and flattening them copy each
/// name once. Every frame's name was copied (20 GB) and compared by text.
#[test]
fn remap_of_contexts_copies_each_name_once() {
    use profgen::llvm::sample_prof::{flag, sec};
    const CONTEXTS: u64 = 20_000;
    let dir = scratch("long-contexts");
    let mut names = Vec::new();
    uleb(3, &mut names);
    for last in [b'a', b'b'] {
        names.extend(vec![b'f'; 1 << 20]);
        names.extend([last, 0]);
    }
    names.extend(b"c\0");
    let mut contexts = Vec::new();
    uleb(CONTEXTS, &mut contexts);
    for i in 0..CONTEXTS / 2 {
        for leaf in [0, 1] {
            contexts.extend([2, 2]); // two frames, `c` at line i
            uleb(i, &mut contexts);
            contexts.extend([0, leaf, 0, 0]);
        }
    }
    // Each context's profile: head samples, context index, total samples, no body records or
    // inlinees.
    let mut profiles = Vec::new();
    for i in 0..CONTEXTS {
        profiles.push(1);
        uleb(i, &mut profiles);
        profiles.extend([1, 0, 0]);
    }
    let full_context = flag::SUMMARY_FULL_CONTEXT as u32;
    let profile = extbinary_of(&[
        (sec::PROF_SUMMARY, full_context, &[0; 6]),
        (sec::NAME_TABLE, 0, &names),
        (sec::CS_NAME_TABLE, 0, &contexts),
        (sec::LBR_PROFILE, 0, &profiles),
    ]);
    let profile = write(&dir, "contexts.extbinary", &profile);
    let remapped = dir.join("remapped.prof");
    let err = remap_capped(&profile, &remapped, "text");
    let out = std::fs::read_to_string(&remapped).unwrap();
    // Neither leaf is in the binary.
    assert_eq!(out, "");
    let summary = format!(
        "profgen remap: 2 functions: 0 carried exactly, 0 matched by anchors (0 renamed), 2 \
         dropped; samples: 0 exact, 0 matched, 0 dropped; {CONTEXTS} contexts dropped\n"
    );
    assert!(err.ends_with(&summary), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An aggregate (.pga) of one context-sensitive binary (build id 01, file name `a`, no samples)
/// naming the functions `names` (in increasing order) in `contexts` (their count, then each as
/// `src/aggregate/pga.rs` lays it out).
fn aggregate_of_contexts(names: &[&[u8]], contexts: &[u8]) -> Vec<u8> {
    let mut payload = vec![0, 0, 1, 1, 1, 1, b'a'];
    payload.extend([0; 2 + 7 + 1 + 4 + 1 + 5 + 1]);
    payload.push(1); // context sensitive
    payload.extend([0; 4]);
    uleb(names.len() as u64, &mut payload);
    for name in names {
        uleb(name.len() as u64, &mut payload);
        payload.extend(*name);
    }
    payload.extend(contexts);
    payload.push(0); // nothing unprofiled
    let mut pga = b"\x89PGA\r\n\x1a\n".to_vec();
    pga.extend(2u32.to_le_bytes());
    pga.extend(0u32.to_le_bytes());
    pga.extend((payload.len() as u64).to_le_bytes());
    pga.extend(<md5::Md5 as md5::Digest>::digest(&payload));
    pga.extend(payload);
    pga
}

/// One context (for [`aggregate_of_contexts`]) of `frames` times the encoded `frame`, without
/// ranges or branches.
fn one_context_of(frames: usize, frame: &[u8]) -> Vec<u8> {
    let mut context = vec![1, 2];
    uleb(frames as u64, &mut context);
    context.extend(frame.repeat(frames));
    context.extend([0, 0]);
    context
}

/// Reading, merging and writing aggregates hash and compare each distinct name's text a bounded
/// number of times, not once per frame: `profgen merge` of two copies of one 1 MB name in a
/// context of 1,000,000 frames (4 MB each), and of two 1 MB names differing in their last byte
/// in 200,000 contexts, each pair of them comparing the two (4.4 MB), each take well under a
/// second. Each name was hashed (and compared) per frame: the first merge took minutes.
#[test]
fn aggregate_names_are_hashed_once_per_name() {
    const NAME: usize = 1 << 20;
    let dir = scratch("pga-long-names");
    let merge = |inputs: &[&Path], out: &Path| {
        let mut cmd = Command::new(PROFGEN);
        cmd.arg("merge").arg("-o").arg(out).args(inputs);
        cap_address_space(&mut cmd);
        let o = run_with_deadline(cmd, 30);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    };
    // One name in 1,000,000 frames; the merge of two copies has the same (empty) counters.
    let one = aggregate_of_contexts(&[&vec![b'f'; NAME]], &one_context_of(1_000_000, &[0; 3]));
    let one_path = write(&dir, "one.pga", &one);
    let out = dir.join("merged.pga");
    merge(&[&one_path, &one_path], &out);
    assert!(std::fs::read(&out).unwrap() == one, "the merge of two copies differs from one");
    // Contexts `c:i @ A` and `c:i @ B` (name indices 0, 1 and 2), in order: checking the order
    // and sorting compare A with B.
    let (a, b) =
        ([vec![b'f'; NAME], b"a".to_vec()].concat(), [vec![b'f'; NAME], b"b".to_vec()].concat());
    let mut contexts = Vec::new();
    uleb(200_000, &mut contexts);
    for i in 0..100_000 {
        for callee in [1, 2] {
            contexts.extend([2, 2, 0]);
            uleb(i, &mut contexts);
            contexts.extend([0, callee, 0, 0, 0, 0]);
        }
    }
    let two = aggregate_of_contexts(&[b"c", &a, &b], &contexts);
    let two_path = write(&dir, "two.pga", &two);
    merge(&[&two_path], &out);
    assert!(std::fs::read(&out).unwrap() == two, "the merge of one aggregate differs from it");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `profgen remap` on a text profile nested 600 inlinees deep (180 KB): memory and time grow
/// linearly with the profile. Matching flattened every function's profiles with their whole
/// subtrees (600²/2 inlinee copies: 760 MB) and renaming cloned each subtree once per level.
#[test]
fn remap_of_a_deeply_nested_profile_stays_linear() {
    let dir = scratch("remap-deep");
    let mut text = String::from("main:100:1\n");
    for depth in 1..=600 {
        text.push_str(&format!("{}1: f{depth}:1\n", " ".repeat(depth)));
    }
    let profile = write(&dir, "deep.prof", text.as_bytes());
    let out = dir.join("remapped.prof");
    let mut cmd = Command::new(PROFGEN);
    cmd.arg("remap").arg("--profile").arg(&profile);
    cmd.arg("--binary").arg(fixture("unsymbolized/loop"));
    cmd.arg("--format").arg("text").arg("-o").arg(&out);
    let o = capped(cmd);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stderr(&o).contains("601 functions: 1 carried exactly"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An aggregate names each binary's file, and a profile run over a binary store writes
/// `OUT/NAME-BUILDID.prof`: a name with a `/` (`/tmp/x`, `../x`) is refused when the
/// aggregate is read, naming the file and offset. Before, an aggregate whose entry had a stored
/// binary's build id and the name `/tmp/x` had its profile written to `/tmp/x-BUILDID.prof`,
/// outside `--output-dir`.
#[test]
fn aggregate_file_names_stay_in_the_output_dir() {
    use md5::{Digest, Md5};
    let dir = scratch("pga-file-name");
    let binary = sample("inline_chain/inline_chain");
    let real = dir.join("real.pga");
    let mut cmd = Command::new(PROFGEN);
    cmd.arg("aggregate").arg("--binary").arg(&binary);
    cmd.arg("--perfdata").arg(sample("inline_chain/perf.data")).arg("-o").arg(&real);
    assert_eq!(run(cmd).status.code(), Some(0));
    let store = dir.join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::copy(&binary, store.join("inline_chain")).unwrap();
    let escaped = dir.join("escaped");
    for name in [escaped.to_str().unwrap(), "../escaped"] {
        let bytes = std::fs::read(&real).unwrap();
        let at = bytes.windows(13).position(|w| w == b"\x0cinline_chain").unwrap();
        let mut crafted = bytes[..at].to_vec();
        crafted.push(name.len() as u8);
        crafted.extend(name.as_bytes());
        crafted.extend(&bytes[at + 13..]);
        let payload = crafted[40..].to_vec();
        crafted[16..24].copy_from_slice(&(payload.len() as u64).to_le_bytes());
        crafted[24..40].copy_from_slice(&Md5::digest(&payload));
        let pga = write(&dir, "crafted.pga", &crafted);
        let out = dir.join("out");
        let mut cmd = Command::new(PROFGEN);
        cmd.arg("--binaries").arg(&store).arg("--aggregate").arg(&pga);
        cmd.arg("--output-dir").arg(&out);
        let o = run(cmd);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{name}: {e}");
        let error = format!(
            "profgen: error: {}: at byte offset {at}: file name {name:?} is a path, not a file name\n",
            pga.display()
        );
        assert!(e.ends_with(&error), "{name}: {e}");
        assert!(
            std::fs::read_dir(&dir)
                .unwrap()
                .all(|f| { !f.unwrap().file_name().to_string_lossy().starts_with("escaped") })
        );
        assert!(std::fs::read_dir(&out).is_ok_and(|mut f| f.next().is_none()) || !out.exists());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `profgen aggregate --binaries` looks up the build ids of the executables an input maps in
/// its build-id list by path: 60,000 mapped libraries and 60,000 listed build ids (12 MB) read
/// in well under the deadline (a scan of the list per library took 10.7 s).
#[test]
fn mapped_executables_find_their_build_ids_by_path() {
    const FILES: u64 = 60_000;
    let dir = scratch("mapped-build-ids");
    let le = |v: u64| v.to_le_bytes();
    let record = |rtype: u32, body: &[u8]| {
        let mut r = rtype.to_le_bytes().to_vec();
        r.extend(0u16.to_le_bytes());
        r.extend((8 + body.len() as u16).to_le_bytes());
        r.extend(body);
        r
    };
    let mut data = Vec::new();
    let mut build_ids = Vec::new();
    for i in 0..FILES {
        // An executable MMAP2 of pid 1, and a build id for another path.
        let mut mmap =
            [le(1), le(0x10000 * (i + 1)), le(0x1000), le(0), [0; 8], [0; 8], [0; 8]].concat();
        mmap.extend(5u32.to_le_bytes()); // prot: read, exec
        mmap.extend(2u32.to_le_bytes());
        mmap.extend(format!("/usr/lib/a/lib{i:08}.so\0\0\0\0\0\0\0").as_bytes());
        data.extend(record(10, &mmap));
        let mut id = 1i32.to_le_bytes().to_vec();
        id.extend([7; 24]);
        id.extend(format!("/usr/lib/b/lib{i:08}.so\0\0\0\0\0\0\0").as_bytes());
        build_ids.extend(record(67, &id));
    }
    // sample_type IP | TID, no ids; the build ids feature (bit 2).
    let file = perf_data_file(&[(1 | 2, [0, 0])], &data, &[(2, &build_ids)]);
    let perf_data = write(&dir, "perf.data", &file);
    let store = dir.join("store");
    std::fs::create_dir(&store).unwrap();
    std::fs::copy(sample("inline_chain/inline_chain"), store.join("inline_chain")).unwrap();
    let mut cmd = Command::new(PROFGEN);
    cmd.arg("aggregate").arg("--binaries").arg(&store).arg("--perfdata").arg(&perf_data);
    cmd.arg("-o").arg(dir.join("out.pga"));
    let o = run_with_deadline(cmd, 5);
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{e}");
    assert!(
        e.contains("60000 executables mapped by the inputs are not in the binary store"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `perf_data` (one event, samples without ids) with its samples naming their event by
/// identifier and, after each sample, an attr record repeating the event under the same id: the
/// same samples, each read under a new attr of the same layout.
fn with_attr_record_per_sample(perf_data: &[u8]) -> Vec<u8> {
    let u64_at = |d: &[u8], at: usize| u64::from_le_bytes(d[at..at + 8].try_into().unwrap());
    let attrs_at = u64_at(perf_data, 24) as usize;
    let attr_len = u32::from_le_bytes(perf_data[attrs_at + 4..attrs_at + 8].try_into().unwrap());
    let mut attr = perf_data[attrs_at..attrs_at + attr_len as usize].to_vec();
    let sample_type = u64_at(&attr, 24);
    assert_eq!(sample_type & (0x40 | 0x10000), 0, "samples without ids");
    attr[24..32].copy_from_slice(&(sample_type | 0x10000).to_le_bytes()); // IDENTIFIER
    let sample_id_all = u64_at(&attr, 40) & 1 << 18 != 0;
    let id = 7u64.to_le_bytes();
    let header = |kind: u32, misc: &[u8], size: usize| {
        let mut h = kind.to_le_bytes().to_vec();
        h.extend(misc);
        h.extend((size as u16).to_le_bytes());
        h
    };
    let mut attr_record = header(64, &[0, 0], 8 + attr.len() + 8);
    attr_record.extend(&attr);
    attr_record.extend(id);
    let (data_at, data_len, starts) = record_starts(perf_data);
    let end = data_at + data_len;
    let mut data = Vec::new();
    for (i, &at) in starts.iter().enumerate() {
        let rec = &perf_data[at..starts.get(i + 1).copied().unwrap_or(end)];
        let (kind, size) = (u32::from(rec[0]), rec.len());
        match kind {
            9 => {
                data.extend(header(9, &rec[4..6], size + 8));
                data.extend(id);
                data.extend(&rec[8..]);
                data.extend(&attr_record);
            }
            1..64 if sample_id_all => {
                data.extend(header(kind, &rec[4..6], size + 8));
                data.extend(&rec[8..]);
                data.extend(id);
            }
            _ => data.extend(rec),
        }
    }
    // The file as it was, its attr rewritten with new ids, then the new data section and a copy
    // of the feature table (which follows the data section).
    let mut out = perf_data.to_vec();
    out[attrs_at..attrs_at + attr.len()].copy_from_slice(&attr);
    let ids_at = out.len() as u64;
    out.extend(id);
    let ids = attrs_at + attr.len();
    out[ids..ids + 16].copy_from_slice(&[ids_at.to_le_bytes(), 8u64.to_le_bytes()].concat());
    let features: u32 = perf_data[72..104].iter().map(|b| b.count_ones()).sum();
    let table = perf_data[end..end + 16 * features as usize].to_vec();
    let new_data_at = out.len() as u64;
    out[40..56]
        .copy_from_slice(&[new_data_at.to_le_bytes(), (data.len() as u64).to_le_bytes()].concat());
    out.extend(data);
    out.extend(table);
    out
}

/// Attr records in a perf.data file's data section (perf writes them only in pipe mode) gave
/// the events they add attr indices the workers' sample decoders did not know: at two threads
/// the samples after the first such record were dropped (1,171 of the 1,294 here, silently),
/// so the profile differed from the one-thread run. Such samples are now read by the reading
/// thread, and both runs write the profile of the file without the attr records.
#[test]
fn attr_records_in_the_data_section_lose_no_samples_at_two_threads() {
    let dir = scratch("attr-records");
    let original = sample("recursion/perf.data");
    let crafted = with_attr_record_per_sample(&std::fs::read(&original).unwrap());
    let perf_data = write(&dir, "perf.data", &crafted);
    let binary = sample("recursion/recursion");
    let profile = |input: &Path, threads: &str| {
        let out = dir.join(format!("{threads}.txt"));
        let o =
            profgen(&["--threads", threads], &[("--binary", &binary), ("--perfdata", input)], &out);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{e}");
        assert!(e.contains("profgen: 1294 samples read, 1170 used"), "{e}");
        std::fs::read(&out).unwrap()
    };
    let expected = profile(&original, "1");
    assert_eq!(profile(&perf_data, "1"), expected);
    assert_eq!(profile(&perf_data, "2"), expected);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `binary` with the symbol-table size of its function symbol `name` set to `size` (a 64-bit
/// little-endian ELF).
fn with_symbol_size(binary: &[u8], name: &str, size: u64) -> Vec<u8> {
    let u64_at = |at: usize| u64::from_le_bytes(binary[at..at + 8].try_into().unwrap());
    let u32_at = |at: usize| u32::from_le_bytes(binary[at..at + 4].try_into().unwrap());
    let (shoff, shnum) = (u64_at(0x28) as usize, u16::from_le_bytes([binary[0x3c], binary[0x3d]]));
    let section = |i: usize| shoff + i * 64;
    let symtab = (0..shnum as usize).map(section).find(|&s| u32_at(s + 4) == 2).unwrap();
    let strtab = section(u32_at(symtab + 40) as usize);
    let (syms, syms_len, names) =
        (u64_at(symtab + 24) as usize, u64_at(symtab + 32) as usize, u64_at(strtab + 24) as usize);
    let sym = (syms..syms + syms_len)
        .step_by(24)
        .find(|&s| {
            let at = names + u32_at(s) as usize;
            binary[at..].split(|&b| b == 0).next() == Some(name.as_bytes())
        })
        .unwrap();
    let mut out = binary.to_vec();
    out[sym + 16..sym + 24].copy_from_slice(&size.to_le_bytes());
    out
}

/// The profiled functions (the pre-inliner's context sizes) were marked in a bitmap of a bit per
/// byte of the function ranges' extent: a symbol whose size reaches the end of the address space
/// asked for 2^57 bytes and aborted the run. The bitmap covers the code the binary's instruction
/// index does (addresses outside are searched for), and the profile is the one of the unaltered
/// symbol (which no sample reaches).
#[test]
fn a_function_symbol_spanning_the_address_space_is_no_allocation_of_its_size() {
    let dir = scratch("huge-symbol");
    let perf_data = sample("recursion/perf.data");
    let original = sample("recursion/recursion");
    let binary = write(
        &dir,
        "recursion",
        &with_symbol_size(&std::fs::read(&original).unwrap(), "_fini", 1 << 60),
    );
    let profile = |binary: &Path| {
        let out = dir.join("out.txt");
        let o = profgen(&[], &[("--binary", binary), ("--perfdata", &perf_data)], &out);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(0), "{e}");
        assert!(e.contains("profgen: 1294 samples read, 1170 used"), "{e}");
        std::fs::read(&out).unwrap()
    };
    assert_eq!(profile(&binary), profile(&original));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Samples whose event the file does not name (two events, and samples that carry no id to tell
/// them apart) were skipped without a word: the run wrote an empty profile and said only how many
/// samples it read. They are counted in a warning now, the same at one and two threads.
#[test]
fn samples_of_no_known_event_are_warned_about() {
    let dir = scratch("no-known-event");
    let le = |v: u64| v.to_le_bytes();
    let mut data = Vec::new();
    for ip in [0x401000u64, 0x401010, 0x401020] {
        // PERF_RECORD_SAMPLE (9), user mode: ip, then pid and tid.
        data.extend([9u32.to_le_bytes(), [2, 0, 24, 0]].concat());
        data.extend([le(ip), le(7 | 7 << 32)].concat());
    }
    // Two events of sample_type IP | TID, neither with ids.
    let file = perf_data_file(&[(1 | 2, [0, 0]), (1 | 2, [0, 0])], &data, &[]);
    let perf_data = write(&dir, "perf.data", &file);
    let binary = sample("inline_chain/inline_chain");
    for threads in ["1", "2"] {
        let out = dir.join(format!("{threads}.txt"));
        let o = profgen(
            &["--threads", threads],
            &[("--binary", &binary), ("--perfdata", &perf_data)],
            &out,
        );
        let e = stderr(&o);
        let warning = format!(
            "warning: {}: 3 samples skipped: they name no event of the file (several events and \
             samples without an id, or an id no event lists)",
            perf_data.display()
        );
        assert!(e.contains(&warning), "{e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
