//! Fleet scale: `profgen aggregate`, `profgen merge` and the profile run over aggregates.
//!
//! The corpus stands for a fleet: every recording is one host's perf.data, aggregated on its
//! own against a binary store holding every corpus binary (two recordings per binary, two
//! binaries in `shared_lib`'s). The aggregates are merged in random groupings and orders (a
//! seeded stream, so a failure reproduces); every grouping must give the same bytes, and the
//! profile of each binary from the merged aggregate must equal the profile of one run over all
//! of that binary's recordings.

mod common;

use common::{PROFGEN, sample, scratch};
use profgen::ab::layout::SplitMix64;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn profgen(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Output {
    Command::new(PROFGEN).args(args.iter().map(|a| a.as_ref())).output().unwrap()
}

fn ok(o: Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "profgen failed: {err}");
    err
}

/// (binary, recordings) of the corpus cases of `kind` but `except`; `shared_lib`'s library too.
fn corpus(kind: &str, except: &[&str]) -> Vec<(PathBuf, Vec<PathBuf>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(sample("")).unwrap() {
        let dir = entry.unwrap().path();
        if except.iter().any(|e| dir.ends_with(e)) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(dir.join("case.toml")) else { continue };
        let t: toml::Table = text.parse().unwrap();
        if t["kind"].as_str() != Some(kind) {
            continue;
        }
        let mut files = vec![dir.join(t["perfdata"].as_str().unwrap())];
        if let Some(b) = t.get("perfdata_branches") {
            files.push(dir.join(b.as_str().unwrap()));
        }
        out.push((dir.join(t["binary"].as_str().unwrap()), files.clone()));
        if dir.join("libshapes.so").exists() {
            out.push((dir.join("libshapes.so"), files));
        }
    }
    out.sort();
    out
}

/// A binary store of `binaries`: one subdirectory per case (several are called `prog`), symlinks.
fn store(dir: &Path, binaries: &[(PathBuf, Vec<PathBuf>)]) -> PathBuf {
    let store = dir.join("store");
    for (b, _) in binaries {
        let case = b.parent().unwrap().file_name().unwrap();
        std::fs::create_dir_all(store.join(case)).unwrap();
        std::os::unix::fs::symlink(b, store.join(case).join(b.file_name().unwrap())).unwrap();
    }
    store
}

/// Merges `files` in a random tree: repeatedly merges a random group of 1–3 of what is left.
fn random_merge(files: &[PathBuf], dir: &Path, rng: &mut SplitMix64, tag: &str) -> PathBuf {
    let mut left: Vec<PathBuf> = files.to_vec();
    let mut n = 0;
    while left.len() > 1 {
        let k = 1 + (rng.next_u64() % 3) as usize;
        let mut group = Vec::new();
        for _ in 0..k.min(left.len()) {
            let i = (rng.next_u64() % left.len() as u64) as usize;
            group.push(left.swap_remove(i));
        }
        let out = dir.join(format!("{tag}-{n}.pga"));
        n += 1;
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![&"merge", &"-o", &out];
        args.extend(group.iter().map(|g| g as &dyn AsRef<std::ffi::OsStr>));
        ok(profgen(&args));
        left.push(out);
    }
    left.pop().unwrap()
}

/// The aggregates of every recording of `kind` with `opts`, merged in random groupings, give one
/// file, and each binary's profile from it equals one run over its recordings.
fn fleet_equals_one_run(kind: &str, opts: &[&str], name: &str, except: &[&str]) {
    let dir = scratch(name);
    let binaries = corpus(kind, except);
    let store = store(&dir, &binaries);
    let mut recordings: Vec<PathBuf> = binaries.iter().flat_map(|(_, f)| f.clone()).collect();
    recordings.sort();
    recordings.dedup();
    let mut aggregates = Vec::new();
    for (i, r) in recordings.iter().enumerate() {
        let out = dir.join(format!("host{i}.pga"));
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"aggregate", &"--binaries", &store, &"--perfdata", r, &"-o", &out];
        args.extend(opts.iter().map(|o| o as &dyn AsRef<std::ffi::OsStr>));
        ok(profgen(&args));
        aggregates.push(out);
    }
    let mut rng = SplitMix64::new(0x5eed);
    let first = random_merge(&aggregates, &dir, &mut rng, "a");
    let reference = std::fs::read(&first).unwrap();
    for g in 0..3 {
        let other = random_merge(&aggregates, &dir, &mut rng, &format!("g{g}"));
        assert!(std::fs::read(&other).unwrap() == reference, "grouping {g} gave other bytes");
    }
    // Every binary's profile, from the aggregate and from one run over its recordings.
    let out_dir = dir.join("profiles");
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![
        &"--binaries",
        &store,
        &"--aggregate",
        &first,
        &"--output-dir",
        &out_dir,
        &"--format=text",
    ];
    args.extend(opts.iter().map(|o| o as &dyn AsRef<std::ffi::OsStr>));
    ok(profgen(&args));
    let mut compared = 0;
    for (binary, files) in &binaries {
        let direct = dir.join("direct.prof");
        let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> =
            vec![&"--binary", binary, &"--format=text", &"-o", &direct];
        for f in files {
            args.push(&"--perfdata");
            args.push(f);
        }
        args.extend(opts.iter().map(|o| o as &dyn AsRef<std::ffi::OsStr>));
        ok(profgen(&args));
        let id = profgen::binary::store::read_build_id(binary).unwrap().unwrap();
        let name = format!(
            "{}-{}.prof",
            binary.file_name().unwrap().to_string_lossy(),
            profgen::binary::hex(&id)
        );
        let direct = std::fs::read_to_string(&direct).unwrap();
        match std::fs::read_to_string(out_dir.join(&name)) {
            Ok(from_aggregate) => {
                assert_eq!(from_aggregate, direct, "{name}: profile from the aggregate differs");
                compared += 1;
            }
            // No profile is written for a binary without samples; one run's is empty then.
            Err(_) => assert!(direct.trim().is_empty(), "{name}: no profile from the aggregate"),
        }
    }
    assert!(compared >= binaries.len() / 2, "only {compared} profiles compared");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fleet_of_lbr_stack_recordings_equals_one_run() {
    // split_dwarf is in: its DWARF is in prog.dwp beside the file the store's symlink points to.
    fleet_equals_one_run("lbr-stack", &[], "fleet-cs", &[]);
}

#[test]
fn fleet_of_lbr_stack_recordings_equals_one_run_llvm_compatible() {
    let opts = ["--llvm-compatible"];
    fleet_equals_one_run("lbr-stack", &opts, "fleet-cs-compatible", &[]);
}

#[test]
fn fleet_of_lbr_recordings_equals_one_run() {
    fleet_equals_one_run("lbr-stack", &["--ignore-stack-samples"], "fleet-lbr", &[]);
}

/// `ip-nopie-pipe-zstd` has no build id (perf record in pipe mode writes none), and its binary's
/// name, `prog`, is every ip case's: a store holding them all cannot tell which is meant.
#[test]
fn fleet_of_ip_recordings_equals_one_run() {
    fleet_equals_one_run("ip", &["--leading-ip-only"], "fleet-ip", &["ip-nopie-pipe-zstd"]);
}

#[test]
fn inputs_without_build_ids_find_their_binary_by_unique_name() {
    let dir = scratch("fleet-by-name");
    let c = sample("ip-nopie-pipe-zstd");
    let all = corpus("ip", &[]);
    let this: Vec<_> = all.iter().filter(|(b, _)| b.starts_with(&c)).cloned().collect();
    let unique = store(&dir.join("unique"), &this);
    let ambiguous = store(&dir.join("ambiguous"), &all);
    let a = dir.join("a.pga");
    let data = c.join("perf.data");
    let err = ok(profgen(&[
        &"aggregate",
        &"--binaries",
        &unique,
        &"--perfdata",
        &data,
        &"-o",
        &a,
        &"--leading-ip-only",
    ]));
    let id = profgen::binary::hex(
        &profgen::binary::store::read_build_id(&c.join("prog")).unwrap().unwrap(),
    );
    // The input has no build id; the binary has one, which keys it in the aggregate.
    assert!(err.contains(&format!("profgen: prog (build id {id}): 2700 samples read")), "{err}");
    let out = dir.join("out");
    ok(profgen(&[
        &"--binaries",
        &unique,
        &"--aggregate",
        &a,
        &"--output-dir",
        &out,
        &"--leading-ip-only",
        &"--format=text",
    ]));
    let direct = dir.join("direct.prof");
    ok(profgen(&[
        &"--binary",
        &c.join("prog"),
        &"--perfdata",
        &data,
        &"--leading-ip-only",
        &"--format=text",
        &"-o",
        &direct,
    ]));
    let from_aggregate = std::fs::read(out.join(format!("prog-{id}.prof"))).unwrap();
    assert_eq!(from_aggregate, std::fs::read(&direct).unwrap());
    let err = ok(profgen(&[
        &"aggregate",
        &"--binaries",
        &ambiguous,
        &"--perfdata",
        &data,
        &"-o",
        &a,
        &"--leading-ip-only",
    ]));
    assert!(
        err.contains(&format!(
            "warning: {}: /work/main/perf-samples/ip-nopie-pipe-zstd/prog has no build id, and 4 binaries of the store are called prog: not profiled",
            data.display()
        )),
        "{err}"
    );
}

#[test]
fn one_binary_aggregate_gives_the_same_profile() {
    let dir = scratch("fleet-one");
    let c = sample("tailcall");
    let (bin, data, branches) =
        (c.join("tailcall"), c.join("perf.data"), c.join("perf-branches.data"));
    let a = dir.join("a.pga");
    let b = dir.join("b.pga");
    ok(profgen(&[&"aggregate", &"--binary", &bin, &"--perfdata", &data, &"-o", &a]));
    ok(profgen(&[&"aggregate", &"--binary", &bin, &"--perfdata", &branches, &"-o", &b]));
    let from_aggregates = dir.join("agg.prof");
    let err = ok(profgen(&[
        &"--binary",
        &bin,
        &"--aggregate",
        &a,
        &"--aggregate",
        &b,
        &"-o",
        &from_aggregates,
    ]));
    let direct = dir.join("direct.prof");
    let direct_err = ok(profgen(&[
        &"--binary",
        &bin,
        &"--perfdata",
        &data,
        &"--perfdata",
        &branches,
        &"-o",
        &direct,
    ]));
    assert_eq!(std::fs::read(&from_aggregates).unwrap(), std::fs::read(&direct).unwrap());
    // The same summary line and warnings as the run over the perf.data files.
    // The run over perf.data also says how each input's LBR windows were weighted (by its
    // event: these two recordings sample cycles and taken branches); an aggregate holds counts.
    let clause = "; LBR windows weighted by 1/cycles (sampled by cycles), not weighted (sampled by taken branches)";
    assert!(direct_err.contains(clause), "{direct_err}");
    assert_eq!(err, direct_err.replace(clause, ""));
}

#[test]
fn aggregates_with_other_options_are_refused() {
    let dir = scratch("fleet-options");
    let c = sample("inline_chain");
    let bin = c.join("inline_chain");
    let a = dir.join("a.pga");
    let b = dir.join("b.pga");
    ok(profgen(&[&"aggregate", &"--binary", &bin, &"--perfdata", &c.join("perf.data"), &"-o", &a]));
    ok(profgen(&[
        &"aggregate",
        &"--binary",
        &bin,
        &"--perfdata",
        &c.join("perf.data"),
        &"-o",
        &b,
        &"--ignore-stack-samples",
    ]));
    let o = profgen(&[&"merge", &a, &b, &"-o", &dir.join("m.pga")]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "profgen: error: {}: aggregated with --ignore-stack-samples=true, but {} with --ignore-stack-samples=false: aggregates made with different options cannot be merged\n",
            b.display(),
            a.display()
        )
    );
    assert!(!dir.join("m.pga").exists());
    let o = profgen(&[&"--binary", &bin, &"--aggregate", &b, &"-o", &dir.join("p.prof")]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "profgen: error: {} made with --ignore-stack-samples=true, but this run asks for --ignore-stack-samples=false: give the options `profgen aggregate` was given\n",
            b.display()
        )
    );
}

/// `dir/a.pga`, the aggregate of the inline_chain case.
fn inline_chain_aggregate(dir: &Path) -> (PathBuf, PathBuf) {
    let a = dir.join("a.pga");
    let c = sample("inline_chain");
    ok(profgen(&[
        &"aggregate",
        &"--binary",
        &c.join("inline_chain"),
        &"--perfdata",
        &c.join("perf.data"),
        &"-o",
        &a,
    ]));
    (c, a)
}

#[test]
fn a_binary_without_samples_in_the_aggregate_is_named() {
    let dir = scratch("fleet-wrong-binary");
    let (c, a) = inline_chain_aggregate(&dir);
    let other = sample("tailcall/tailcall");
    let o = profgen(&[&"--binary", &other, &"--aggregate", &a, &"-o", &dir.join("p.prof")]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    let id = |p: &Path| {
        profgen::binary::hex(&profgen::binary::store::read_build_id(p).unwrap().unwrap())
    };
    assert_eq!(
        err,
        format!(
            "profgen: error: {}: no sample of this binary (build id {}) in {}; it holds, most-sampled first: inline_chain (build id {}, 1569 samples)\n",
            other.display(),
            id(&other),
            a.display(),
            id(&c.join("inline_chain"))
        )
    );
}

#[test]
fn a_corrupt_aggregate_is_an_error_naming_file_and_offset() {
    let dir = scratch("fleet-corrupt");
    let (c, a) = inline_chain_aggregate(&dir);
    let mut bytes = std::fs::read(&a).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    let bad = dir.join("bad.pga");
    std::fs::write(&bad, &bytes).unwrap();
    let o = profgen(&[&"merge", &a, &bad, &"-o", &dir.join("m.pga")]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "profgen: error: {}: at byte offset 24: checksum mismatch: the file is corrupt\n",
            bad.display()
        )
    );
    std::fs::write(&bad, &bytes[..30]).unwrap();
    let o = profgen(&[
        &"--binary",
        &c.join("inline_chain"),
        &"--aggregate",
        &bad,
        &"-o",
        &dir.join("p"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "profgen: error: {}: at byte offset 30: header cut short: 30 of 40 bytes\n",
            bad.display()
        )
    );
}

#[test]
fn a_build_id_tree_is_a_binary_store() {
    let dir = scratch("fleet-build-id-tree");
    let c = sample("shared_lib");
    let tree = dir.join("debug").join(".build-id");
    for b in [c.join("shared_lib"), c.join("libshapes.so")] {
        let id = profgen::binary::hex(&profgen::binary::store::read_build_id(&b).unwrap().unwrap());
        std::fs::create_dir_all(tree.join(&id[..2])).unwrap();
        std::os::unix::fs::symlink(&b, tree.join(&id[..2]).join(&id[2..])).unwrap();
    }
    let a = dir.join("host.pga");
    let err = ok(profgen(&[
        &"aggregate",
        &"--binaries",
        &dir.join("debug"),
        &"--perfdata",
        &c.join("perf.data"),
        &"-o",
        &a,
    ]));
    assert!(err.contains("profgen: shared_lib (build id "), "{err}");
    assert!(err.contains("profgen: libshapes.so (build id "), "{err}");
    let out = dir.join("out");
    ok(profgen(&[
        &"--binaries",
        &tree,
        &"--aggregate",
        &a,
        &"--output-dir",
        &out,
        &"--format=text",
    ]));
    let mut written: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().split('-').next().unwrap().to_string())
        .collect();
    written.sort();
    assert_eq!(written, ["libshapes.so", "shared_lib"]);
}

/// `--csprof-max-unsymbolized-context-depth` shapes a probe binary's contexts while they are
/// counted: an aggregate records it, a run over the aggregate with it gives the direct run's
/// profile, and one without it is refused.
#[test]
fn unsymbolized_context_depth_is_an_aggregate_option() {
    let dir = scratch("fleet-unsymbolized-depth");
    let c = sample("recursion");
    let (bin, data) = (c.join("recursion"), c.join("perf.data"));
    // Without recursion compression the depth shows in the profile.
    let (depth, compress) = ("--csprof-max-unsymbolized-context-depth=1", "--compress-recursion=0");
    let a = dir.join("a.pga");
    let aggregate = [&"aggregate" as &dyn AsRef<std::ffi::OsStr>, &"--binary", &bin, &"--perfdata"];
    ok(profgen(&[&aggregate[..], &[&data, &depth, &compress, &"-o", &a]].concat()));
    let from_aggregate = dir.join("agg.prof");
    ok(profgen(&[
        &"--binary",
        &bin,
        &"--aggregate",
        &a,
        &depth,
        &compress,
        &"-o",
        &from_aggregate,
    ]));
    let (direct, unlimited) = (dir.join("direct.prof"), dir.join("unlimited.prof"));
    ok(profgen(&[&"--binary", &bin, &"--perfdata", &data, &depth, &compress, &"-o", &direct]));
    ok(profgen(&[&"--binary", &bin, &"--perfdata", &data, &compress, &"-o", &unlimited]));
    let read = |p: &Path| std::fs::read(p).unwrap();
    assert_eq!(read(&from_aggregate), read(&direct));
    assert_ne!(read(&direct), read(&unlimited));
    let p = dir.join("p.prof");
    let o = profgen(&[&"--binary", &bin, &"--aggregate", &a, &compress, &"-o", &p]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&o.stderr),
        format!(
            "profgen: error: {} made with --csprof-max-unsymbolized-context-depth=1, but this run asks for --csprof-max-unsymbolized-context-depth=-1: give the options `profgen aggregate` was given\n",
            a.display()
        )
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--dwp`, `--kernel` and `--filter-build-id` say how one binary is found and mapped: with a
/// binary store they are refused rather than applied to every binary in it.
#[test]
fn options_of_one_binary_are_refused_with_a_binary_store() {
    let dir = scratch("fleet-one-binary-options");
    let c = sample("inline_chain");
    for opt in ["--kernel", "--dwp=x.dwp", "--filter-build-id=00ff"] {
        let o = profgen(&[
            &"aggregate",
            &"--binaries",
            &c,
            &"--perfdata",
            &c.join("perf.data"),
            &opt,
            &"-o",
            &dir.join("a.pga"),
        ]);
        assert_eq!(o.status.code(), Some(2), "{opt}");
        let name = opt.split('=').next().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&o.stderr),
            format!("error: {name} applies to one --binary, not to --binaries\n"),
            "{opt}"
        );
    }
    assert!(!dir.join("a.pga").exists());
    let _ = std::fs::remove_dir_all(&dir);
}
