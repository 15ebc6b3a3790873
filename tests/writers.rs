//! Writer tests: profiles built in code are written in every format and checked against golden
//! files (`PROFGEN_BLESS=1` regenerates them) and, when the LLVM 19 tools are on PATH, against
//! the oracle:
//! (a) `llvm-profdata-19 merge --sample --text` of our binary encodings equals that of our text;
//! (b) `llvm-profdata-19 show --sample --show-sec-info-only` lists our section table and flags;
//! (c) llvm-profgen-19 re-reading our text (`--llvm-sample-profile`, post-passes off) writes the
//!     same bytes as we do, except for the order of FuncMetadata records (a hash-map order in
//!     LLVM; compared as a multiset);
//! (d) `show --detailed-summary` of our extbinary (stored summary) equals LLVM's own summary of
//!     our text.

mod common;

use common::{have, scratch};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use profgen::llvm::{ContextFrame, LineLocation, md5_guid};
use profgen::profile::model::{Context, FunctionSamples, Profile, ProfileKind, attr};
use profgen::writer::density::{DensityOptions, density_report};
use profgen::writer::{OutputFormat, UNSUPPORTED_FORMAT, WriteOptions, encode_profile};

// ---------------------------------------------------------------------------------------------
// Profile construction helpers.

/// Body entries `(line, discr, count, [(target, count)])`.
type Body<'a> = &'a [(u32, u32, u64, &'a [(&'a str, u64)])];

/// A profile with `body` entries `(line, discr, count, [(target, count)])`.
fn func(name: &str, total: u64, head: u64, body: Body) -> FunctionSamples {
    let mut fs = FunctionSamples::new(name);
    fs.total_samples = total;
    fs.head_samples = head;
    for &(line, discr, count, targets) in body {
        let loc = LineLocation::new(line, discr);
        fs.add_body(loc, count);
        for &(t, n) in targets {
            fs.add_call_target(loc, &t.into(), n);
        }
    }
    fs
}

fn inline(parent: &mut FunctionSamples, line: u32, discr: u32, callee: FunctionSamples) {
    let name = callee.name.clone();
    parent.callsites.entry(LineLocation::new(line, discr)).or_default().insert(name, callee);
}

fn with_meta(mut fs: FunctionSamples, checksum: Option<u64>, attributes: u32) -> FunctionSamples {
    fs.checksum = checksum;
    fs.attributes = attributes;
    fs
}

/// `main:2 @ foo:5.1 @ bar` → context frames.
fn ctx(s: &str) -> Context {
    Context::new(
        s.split(" @ ")
            .map(|f| {
                let (func, loc) = f.split_once(':').unwrap_or((f, "0"));
                let (line, discr) = loc.split_once('.').unwrap_or((loc, "0"));
                ContextFrame {
                    func: func.to_string().into(),
                    loc: LineLocation::new(line.parse().unwrap(), discr.parse().unwrap()),
                }
            })
            .collect(),
    )
}

fn profile(kind: ProfileKind, functions: Vec<(&str, FunctionSamples)>) -> Profile {
    Profile {
        kind,
        functions: functions.into_iter().map(|(c, fs)| (ctx(c), fs)).collect(),
        symbol_list: None,
    }
}

struct Case {
    name: &'static str,
    profile: Profile,
    use_md5: bool,
    /// llvm-profgen options that reproduce the profile from its text; `None` when llvm-profgen
    /// cannot (it crashes on an empty profile and derives FS discriminators from the binary).
    profgen_args: Option<&'static [&'static str]>,
    /// Expected `--show-sec-info-only` flags per section, in layout order.
    sec_flags: [&'static str; 7],
}

const CS_ARGS: &[&str] =
    &["--csspgo-preinliner=0", "--gen-cs-nested-profile=0", "--csprof-merge-cold-context=0"];

fn line_nested() -> Profile {
    let mut main = func("main", 420, 7, &[(1, 0, 15, &[]), (2, 0, 15, &[("foo", 15)])]);
    let mut foo_profile = func(
        "foo",
        200,
        0,
        &[(1, 0, 100, &[]), (3, 1, 30, &[("bar", 10), ("baz", 10), ("abc", 20)])],
    );
    inline(&mut foo_profile, 3, 1, func("bar", 60, 0, &[(1, 0, 60, &[])]));
    inline(&mut foo_profile, 3, 1, func("baz", 6, 0, &[(0, 0, 6, &[])]));
    inline(&mut foo_profile, 65516, 0, func("qux", 1, 0, &[(2, 3, 1, &[])]));
    inline(&mut main, 2, 0, foo_profile);
    profile(
        ProfileKind::default(),
        vec![
            ("main", main),
            ("zed", func("zed", 420, 3, &[(1, 0, 5, &[])])),
            ("bar", func("bar", 100, 9, &[(0, 0, 9, &[]), (1, 0, 0, &[])])),
            ("aaa", func("aaa", 0, 0, &[])),
        ],
    )
}

/// Deterministic pseudo-random profiles: ties in totals and call-target counts, names that are
/// prefixes of each other, large counts and line/discriminator values.
struct Lcg(u64);

impl Lcg {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
    fn count(&mut self) -> u64 {
        let n = self.below(100);
        self.pick(&[0, 1, 7, 7, 1000, 1 << 33, (1 << 32) + 1, n])
    }
    fn loc(&mut self) -> LineLocation {
        let line = if self.below(4) == 0 { self.below(0x10000) } else { self.below(20) };
        let discr = if self.below(3) == 0 { self.below(1 << 20) } else { 0 };
        LineLocation::new(line as u32, discr as u32)
    }
}

const NAMES: &[&str] =
    &["a", "ab", "a.b", "b", "_Z3fooi", "_Z3fooil", "foo.llvm.123", "main", "zz_long_name"];

fn random_samples(
    rng: &mut Lcg,
    name: &str,
    depth: u32,
    probe: bool,
    attrs: &[u32],
) -> FunctionSamples {
    let mut fs = FunctionSamples::new(name);
    fs.total_samples = rng.count();
    fs.head_samples = rng.count();
    for _ in 0..rng.below(6) {
        let loc = rng.loc();
        fs.add_body(loc, rng.count());
        for _ in 0..rng.below(4) {
            let (target, n) = (rng.pick(NAMES), rng.count());
            fs.add_call_target(loc, &target.into(), n);
        }
    }
    if depth < 3 {
        for _ in 0..rng.below(4) {
            let (loc, callee) = (rng.loc(), rng.pick(NAMES));
            let mut inlinee = random_samples(rng, callee, depth + 1, probe, attrs);
            inlinee.head_samples = 0;
            fs.callsites.entry(loc).or_default().insert(callee.into(), inlinee);
        }
    }
    if probe {
        // Real profiles carry one checksum per function (LLVM drops merges of mismatching ones).
        fs.checksum = Some(md5_guid(name) >> 8);
    }
    fs.attributes = rng.pick(attrs);
    fs
}

fn random_nested(seed: u64, kind: ProfileKind, attrs: &[u32]) -> Profile {
    let mut rng = Lcg(seed);
    let mut functions = std::collections::BTreeMap::new();
    for &name in NAMES {
        if rng.below(5) != 0 {
            functions.insert(
                Context::base(name),
                random_samples(&mut rng, name, 0, kind.probe_based, attrs),
            );
        }
    }
    Profile { kind, functions, symbol_list: None }
}

fn random_cs(seed: u64, kind: ProfileKind) -> Profile {
    let mut rng = Lcg(seed);
    let mut functions = std::collections::BTreeMap::new();
    for _ in 0..40 {
        let mut frames: Vec<ContextFrame> = (0..rng.below(4))
            .map(|_| ContextFrame { func: rng.pick(NAMES).into(), loc: rng.loc() })
            .collect();
        let leaf = rng.pick(NAMES);
        frames.push(ContextFrame { func: leaf.to_string().into(), loc: LineLocation::default() });
        let mut fs = random_samples(&mut rng, leaf, 3, kind.probe_based, &[0, attr::WAS_INLINED]);
        fs.total_samples = rng.pick(&[0, 5, 5, 100, 1 << 35]);
        functions.insert(Context::new(frames), fs);
    }
    Profile { kind, functions, symbol_list: None }
}

fn cs_probe_flat() -> Profile {
    let cs_probe = ProfileKind { context_sensitive: true, probe_based: true, ..Default::default() };
    profile(
        cs_probe,
        vec![
            (
                "main:2 @ foo",
                with_meta(
                    func(
                        "foo",
                        75,
                        0,
                        &[(1, 0, 0, &[]), (2, 0, 15, &[]), (5, 0, 15, &[("bar", 15)])],
                    ),
                    Some(563090744358526),
                    attr::WAS_INLINED,
                ),
            ),
            (
                "main:2 @ foo:5 @ bar",
                with_meta(
                    func("bar", 30, 15, &[(1, 0, 15, &[]), (4, 0, 15, &[])]),
                    Some(72617220756),
                    0,
                ),
            ),
            (
                "main",
                with_meta(
                    func("main", 20, 0, &[(1, 0, 10, &[]), (2, 0, 10, &[("foo", 10)])]),
                    Some(1234),
                    0,
                ),
            ),
            (
                "bar",
                with_meta(
                    func("bar", 30, 2, &[(1, 0, 15, &[]), (4, 0, 15, &[])]),
                    Some(72617220756),
                    0,
                ),
            ),
        ],
    )
}

fn cases() -> Vec<Case> {
    let probe = ProfileKind { probe_based: true, ..Default::default() };
    let cs_probe: ProfileKind =
        ProfileKind { context_sensitive: true, probe_based: true, ..Default::default() };
    // A ShouldBeInlined attribute only comes from the pre-inliner, which also marks the profile.
    let cs_line = ProfileKind { context_sensitive: true, preinlined: true, ..Default::default() };
    let preinlined = ProfileKind { probe_based: true, preinlined: true, ..Default::default() };

    let mut probe_main = with_meta(
        func("main", 75, 5, &[(1, 0, 5, &[]), (2, 0, 15, &[("foo", 15)]), (3, 0, 0, &[])]),
        Some(1111),
        0,
    );
    let mut probe_foo = with_meta(
        func("foo", 50, 0, &[(1, 0, 15, &[]), (5, 0, 15, &[("bar", 15)])]),
        Some(563090744358526),
        0,
    );
    inline(
        &mut probe_foo,
        5,
        0,
        with_meta(func("bar", 20, 0, &[(1, 0, 15, &[]), (4, 0, 5, &[])]), Some(72617220756), 0),
    );
    inline(&mut probe_main, 2, 0, probe_foo);

    let mut pre_main =
        with_meta(func("main", 100, 10, &[(1, 0, 10, &[]), (2, 0, 0, &[])]), Some(1), 0);
    let mut pre_foo = with_meta(
        func("foo", 60, 0, &[(1, 0, 30, &[]), (2, 0, 30, &[("bar", 30)])]),
        Some(2),
        attr::SHOULD_BE_INLINED,
    );
    inline(
        &mut pre_foo,
        2,
        0,
        with_meta(
            func("bar", 30, 0, &[(1, 0, 30, &[])]),
            Some(3),
            attr::SHOULD_BE_INLINED | attr::WAS_INLINED,
        ),
    );
    inline(&mut pre_main, 2, 0, pre_foo);
    inline(
        &mut pre_main,
        3,
        0,
        with_meta(func("baz", 40, 0, &[(1, 0, 40, &[])]), Some(4), attr::DUPLICATED_INTO_BASE),
    );

    let mut symbols = line_nested();
    symbols.symbol_list = Some(vec!["main".into(), "foo".into(), "bar".into()]);

    let uniq = "_ZL3foov.__uniq.334154460836426447066042049082945760258";
    let mut uniq_main = func("main", 30, 1, &[(1, 0, 10, &[(uniq, 10)])]);
    inline(&mut uniq_main, 2, 0, func(uniq, 20, 0, &[(1, 0, 20, &[])]));

    let fs = ProfileKind { fs_discriminator: true, ..Default::default() };
    vec![
        Case {
            name: "empty",
            profile: Profile::default(),
            use_md5: false,
            profgen_args: None,
            sec_flags: ["{}", "{}", "{}", "{}", "{}", "{}", "{}"],
        },
        Case {
            name: "fs_discriminator",
            profile: profile(fs, vec![("main", func("main", 10, 1, &[(1, 7, 10, &[])]))]),
            use_md5: false,
            profgen_args: None,
            sec_flags: ["{fs-discriminator}", "{}", "{}", "{}", "{}", "{}", "{}"],
        },
        Case {
            name: "stress_line",
            profile: random_nested(1, ProfileKind::default(), &[0]),
            use_md5: false,
            profgen_args: Some(&[]),
            sec_flags: ["{}", "{}", "{}", "{}", "{}", "{}", "{}"],
        },
        Case {
            name: "stress_preinlined_probe",
            profile: random_nested(2, preinlined, &[0, 1, 2, 3, 4, 6]),
            use_md5: false,
            profgen_args: Some(&[]),
            sec_flags: ["{preInlined}", "{}", "{}", "{}", "{}", "{}", "{probe,attr}"],
        },
        Case {
            name: "stress_cs_probe",
            profile: random_cs(3, cs_probe),
            use_md5: false,
            profgen_args: Some(CS_ARGS),
            sec_flags: ["{context}", "{}", "{}", "{ordered}", "{}", "{}", "{probe,attr}"],
        },
        Case {
            name: "line_nested",
            profile: line_nested(),
            use_md5: false,
            profgen_args: Some(&[]),
            sec_flags: ["{}", "{}", "{}", "{}", "{}", "{}", "{}"],
        },
        Case {
            name: "line_nested_md5",
            profile: line_nested(),
            use_md5: true,
            profgen_args: Some(&["--use-md5"]),
            sec_flags: ["{}", "{fixlenmd5}", "{}", "{}", "{}", "{}", "{}"],
        },
        Case {
            name: "symbol_list",
            profile: symbols,
            use_md5: false,
            profgen_args: Some(&["--populate-profile-symbol-list"]),
            sec_flags: ["{}", "{}", "{}", "{}", "{}", "{}", "{}"],
        },
        Case {
            name: "uniq_names",
            profile: profile(ProfileKind::default(), vec![("main", uniq_main)]),
            use_md5: false,
            profgen_args: Some(&[]),
            sec_flags: ["{}", "{uniq}", "{}", "{}", "{}", "{}", "{}"],
        },
        Case {
            name: "probe_nested",
            profile: profile(
                probe,
                vec![
                    ("main", probe_main),
                    (
                        "bar",
                        with_meta(
                            func("bar", 30, 15, &[(1, 0, 15, &[]), (4, 0, 15, &[])]),
                            Some(72617220756),
                            0,
                        ),
                    ),
                ],
            ),
            use_md5: false,
            profgen_args: Some(&[]),
            sec_flags: ["{}", "{}", "{}", "{}", "{}", "{}", "{probe}"],
        },
        Case {
            name: "preinlined_nested",
            profile: profile(
                preinlined,
                vec![
                    ("main", pre_main),
                    ("baz", with_meta(func("baz", 40, 40, &[(1, 0, 40, &[])]), Some(4), 0)),
                ],
            ),
            use_md5: false,
            profgen_args: Some(&[]),
            sec_flags: ["{preInlined}", "{}", "{}", "{}", "{}", "{}", "{probe,attr}"],
        },
        Case {
            name: "cs_probe",
            profile: cs_probe_flat(),
            use_md5: false,
            profgen_args: Some(CS_ARGS),
            sec_flags: ["{context}", "{}", "{}", "{ordered}", "{}", "{}", "{probe,attr}"],
        },
        Case {
            name: "cs_probe_md5",
            profile: cs_probe_flat(),
            use_md5: true,
            profgen_args: Some(&[
                "--csspgo-preinliner=0",
                "--gen-cs-nested-profile=0",
                "--csprof-merge-cold-context=0",
                "--use-md5",
            ]),
            sec_flags: ["{context}", "{fixlenmd5}", "{}", "{ordered}", "{}", "{}", "{probe,attr}"],
        },
        Case {
            name: "cs_line",
            profile: profile(
                cs_line,
                vec![
                    (
                        "main:1 @ foo",
                        func(
                            "foo",
                            45,
                            0,
                            &[(2, 1, 15, &[]), (3, 0, 15, &[]), (3, 1, 15, &[("bar", 15)])],
                        ),
                    ),
                    (
                        "main:1 @ foo:3.1 @ bar",
                        with_meta(
                            func(
                                "bar",
                                45,
                                15,
                                &[(0, 0, 15, &[]), (1, 0, 15, &[]), (5, 0, 15, &[])],
                            ),
                            None,
                            attr::WAS_INLINED,
                        ),
                    ),
                    (
                        "main:1.2 @ foo",
                        with_meta(
                            func("foo", 3, 0, &[(1, 0, 3, &[])]),
                            None,
                            attr::SHOULD_BE_INLINED,
                        ),
                    ),
                    ("bar", func("bar", 0, 15, &[])),
                ],
            ),
            use_md5: false,
            profgen_args: Some(CS_ARGS),
            sec_flags: ["{context,preInlined}", "{}", "{}", "{ordered}", "{}", "{}", "{attr}"],
        },
    ]
}

// ---------------------------------------------------------------------------------------------
// Tool plumbing.

fn run(cmd: &mut Command) -> (bool, Vec<u8>, String) {
    let out = cmd.output().expect("tool runs");
    (out.status.success(), out.stdout, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn profdata(args: &[&str], input: &Path) -> String {
    let (ok, stdout, stderr) = run(Command::new("llvm-profdata-19").args(args).arg(input));
    assert!(ok, "llvm-profdata-19 {args:?} {}: {stderr}", input.display());
    String::from_utf8(stdout).unwrap()
}

/// A small ELF with DWARF functions main/foo/bar for llvm-profgen's `--binary`.
fn test_binary() -> Option<&'static Path> {
    static BIN: OnceLock<Option<PathBuf>> = OnceLock::new();
    BIN.get_or_init(|| {
        have("clang-19").then_some(())?;
        let dir = scratch("bin");
        let src = dir.join("a.c");
        std::fs::write(
            &src,
            "int bar(int x){return x*3;}\nint foo(int x){int s=0;for(int i=0;i<x;i++)s+=bar(i);return s;}\nint main(){return foo(10);}\n",
        )
        .unwrap();
        let bin = dir.join("a.out");
        let (ok, _, stderr) = run(Command::new("clang-19").args(["-O0", "-g", "-o"]).arg(&bin).arg(&src));
        assert!(ok, "clang-19: {stderr}");
        Some(bin)
    })
    .as_deref()
}

fn golden(case: &str, ext: &str, actual: &[u8]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/writers")
        .join(format!("{case}.{ext}"));
    if std::env::var_os("PROFGEN_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (PROFGEN_BLESS=1 creates it)", path.display()));
    assert!(expected == actual, "{case}.{ext} differs from golden {}", path.display());
}

// ---------------------------------------------------------------------------------------------
// Extbinary section parsing (for the metadata comparison and the section table check).

fn uleb(data: &[u8], pos: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let b = data[*pos];
        *pos += 1;
        v |= ((b & 0x7f) as u64) << shift;
        if b & 0x80 == 0 {
            return v;
        }
        shift += 7;
    }
}

/// (type, flags, offset, size) of each section, in header order.
fn sections(data: &[u8]) -> Vec<[u64; 4]> {
    let mut pos = 0;
    uleb(data, &mut pos);
    uleb(data, &mut pos);
    let u64_at = |p: usize| u64::from_le_bytes(data[p..p + 8].try_into().unwrap());
    let n = u64_at(pos) as usize;
    (0..n).map(|i| std::array::from_fn(|j| u64_at(pos + 8 + i * 32 + j * 8))).collect()
}

/// The top-level FuncMetadata records as byte strings, sorted.
fn metadata_records(data: &[u8]) -> Vec<Vec<u8>> {
    let secs = sections(data);
    let cs = secs[0][1] >> 32 & 2 != 0;
    let meta = secs[6];
    let (probe, attrs) = (meta[1] >> 32 & 1 != 0, meta[1] >> 32 & 2 != 0);
    fn record(d: &[u8], pos: &mut usize, probe: bool, attrs: bool, cs: bool) {
        uleb(d, pos);
        if probe {
            uleb(d, pos);
        }
        if attrs {
            uleb(d, pos);
        }
        if !cs {
            for _ in 0..uleb(d, pos) {
                uleb(d, pos);
                uleb(d, pos);
                record(d, pos, probe, attrs, cs);
            }
        }
    }
    let payload = &data[meta[2] as usize..(meta[2] + meta[3]) as usize];
    let mut pos = 0;
    let mut records = Vec::new();
    while pos < payload.len() {
        let start = pos;
        record(payload, &mut pos, probe, attrs, cs);
        records.push(payload[start..pos].to_vec());
    }
    records.sort();
    records
}

/// Bytes with the FuncMetadata payload removed (its header entry stays).
fn without_metadata(data: &[u8]) -> Vec<u8> {
    let meta = sections(data)[6];
    let mut v = data.to_vec();
    v.drain(meta[2] as usize..(meta[2] + meta[3]) as usize);
    v
}

// ---------------------------------------------------------------------------------------------
// Tests.

#[test]
fn writes_match_goldens() {
    for case in cases() {
        let opts = WriteOptions { use_md5: case.use_md5 };
        let text = encode_profile(&case.profile, OutputFormat::Text, &opts).unwrap();
        let ext = encode_profile(&case.profile, OutputFormat::ExtBinary, &opts).unwrap();
        golden(case.name, "txt", &text);
        golden(case.name, "extbinary", &ext);
        let raw = encode_profile(&case.profile, OutputFormat::Binary, &opts);
        if case.profile.kind.context_sensitive || case.profile.kind.probe_based {
            let err = raw.unwrap_err().to_string();
            assert_eq!(err, UNSUPPORTED_FORMAT, "{}", case.name);
        } else {
            golden(case.name, "binary", &raw.unwrap());
        }
        let sec_types: Vec<u64> = sections(&ext).iter().map(|s| s[0]).collect();
        assert_eq!(sec_types, [1, 2, 6, 4, 32, 3, 5], "{}", case.name);
    }
}

#[test]
fn gcc_format_is_rejected() {
    let err =
        encode_profile(&line_nested(), OutputFormat::Gcc, &WriteOptions::default()).unwrap_err();
    assert_eq!(err.to_string(), UNSUPPORTED_FORMAT);
}

#[test]
fn profdata_reads_what_we_write() {
    if !have("llvm-profdata-19") {
        eprintln!("note: llvm-profdata-19 not on PATH; skipping oracle checks");
        return;
    }
    let dir = scratch("profdata");
    for case in cases() {
        let opts = WriteOptions { use_md5: case.use_md5 };
        let txt = dir.join(format!("{}.txt", case.name));
        let ext = dir.join(format!("{}.extbinary", case.name));
        std::fs::write(&txt, encode_profile(&case.profile, OutputFormat::Text, &opts).unwrap())
            .unwrap();
        std::fs::write(
            &ext,
            encode_profile(&case.profile, OutputFormat::ExtBinary, &opts).unwrap(),
        )
        .unwrap();

        // (a) Same profile in every encoding. MD5 profiles lose their names, so compare them
        // against the text converted to an MD5 extbinary by llvm-profdata itself.
        let canon = |p: &Path| profdata(&["merge", "--sample", "--text", "-o", "-"], p);
        // llvm-profdata cannot read an empty text profile.
        let empty = case.profile.functions.is_empty();
        let reference = if empty {
            String::new()
        } else if case.use_md5 {
            let md5 = dir.join(format!("{}.profdata-md5", case.name));
            profdata(
                &["merge", "--sample", "--extbinary", "--use-md5", "-o", md5.to_str().unwrap()],
                &txt,
            );
            canon(&md5)
        } else {
            canon(&txt)
        };
        assert_eq!(canon(&ext), reference, "{}: extbinary", case.name);
        if let Ok(raw) = encode_profile(&case.profile, OutputFormat::Binary, &opts) {
            let bin = dir.join(format!("{}.binary", case.name));
            std::fs::write(&bin, raw).unwrap();
            let text_canon = if empty { String::new() } else { canon(&txt) };
            assert_eq!(canon(&bin), text_canon, "{}: binary (no MD5 form)", case.name);
        }

        // (b) Section table: llvm-profdata's view equals our header, flags as expected.
        let bytes = std::fs::read(&ext).unwrap();
        let names = [
            "ProfileSummarySection",
            "NameTableSection",
            "CSNameTableSection",
            "FuncOffsetTableSection",
            "LBRProfileSection",
            "ProfileSymbolListSection",
            "FunctionMetadata",
        ];
        let mut expected: String = sections(&bytes)
            .iter()
            .zip(names)
            .zip(case.sec_flags)
            .map(|((s, name), flags)| {
                format!("{name} - Offset: {}, Size: {}, Flags: {flags}\n", s[2], s[3])
            })
            .collect();
        let total: u64 = sections(&bytes).iter().map(|s| s[3]).sum();
        expected += &format!(
            "Header Size: 242\nTotal Sections Size: {total}\nFile Size: {}\n",
            bytes.len()
        );
        assert_eq!(
            profdata(&["show", "--sample", "--show-sec-info-only"], &ext),
            expected,
            "{}",
            case.name
        );

        // (d) Stored summary equals LLVM's summary of the same profile.
        let summary = |p: &Path| {
            let s = profdata(&["show", "--sample", "--detailed-summary"], p);
            s[s.find("Total functions:").expect("summary printed")..].to_string()
        };
        if !empty {
            assert_eq!(summary(&ext), summary(&txt), "{}: summary", case.name);
        }

        if case.profile.symbol_list.is_some() {
            let list = profdata(&["show", "--sample", "--show-prof-sym-list"], &ext);
            assert!(list.contains("bar\nfoo\nmain\n"), "{}: {list}", case.name);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn llvm_profgen_writes_the_same_bytes() {
    if !have("llvm-profgen-19") {
        eprintln!("note: llvm-profgen-19 not on PATH; skipping byte comparison");
        return;
    }
    let Some(binary) = test_binary() else {
        eprintln!("note: clang-19 not on PATH (needed for a --binary); skipping byte comparison");
        return;
    };
    let dir = scratch("profgen");
    let mut density_warnings = 0;
    for case in cases() {
        let Some(profgen_args) = case.profgen_args else {
            continue;
        };
        let opts = WriteOptions { use_md5: case.use_md5 };
        let txt = dir.join(format!("{}.txt", case.name));
        let ours_text = encode_profile(&case.profile, OutputFormat::Text, &opts).unwrap();
        std::fs::write(&txt, &ours_text).unwrap();
        for format in [OutputFormat::Text, OutputFormat::ExtBinary, OutputFormat::Binary] {
            let fmt = match format {
                OutputFormat::Text => "text",
                OutputFormat::ExtBinary => "extbinary",
                _ => "binary",
            };
            let out = dir.join(format!("{}.profgen.{fmt}", case.name));
            let (ok, _, stderr) = run(Command::new("llvm-profgen-19")
                .arg(format!("--llvm-sample-profile={}", txt.display()))
                .arg(format!("--binary={}", binary.display()))
                .arg(format!("--output={}", out.display()))
                .arg(format!("--format={fmt}"))
                .args(profgen_args));
            let ours = encode_profile(&case.profile, format, &opts);
            let Ok(ours) = ours else {
                assert!(
                    !ok && stderr.contains(UNSUPPORTED_FORMAT),
                    "{}: {fmt}: {stderr}",
                    case.name
                );
                continue;
            };
            assert!(ok, "{}: llvm-profgen-19 --format={fmt}: {stderr}", case.name);
            // The density report llvm-profgen printed for this profile equals ours.
            let density_lines: String = stderr
                .lines()
                .filter(|l| {
                    l.contains("Sample PGO is estimated") || l.contains("output profile is empty")
                })
                .map(|l| format!("{l}\n"))
                .collect();
            let ours_density = density_report(&case.profile, &DensityOptions::default());
            assert_eq!(density_lines, ours_density.warnings, "{}: density", case.name);
            density_warnings += usize::from(!density_lines.is_empty());
            let theirs = std::fs::read(&out).unwrap();
            if format == OutputFormat::ExtBinary {
                assert_eq!(
                    metadata_records(&ours),
                    metadata_records(&theirs),
                    "{}: FuncMetadata",
                    case.name
                );
                assert!(
                    without_metadata(&ours) == without_metadata(&theirs),
                    "{}: {fmt} bytes differ",
                    case.name
                );
            } else {
                assert!(ours == theirs, "{}: {fmt} bytes differ", case.name);
            }
        }
    }
    // Each text/extbinary/binary run prints the report; most of our small profiles are sparse.
    assert!(density_warnings > 10, "only {density_warnings} density warnings seen");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn profile_files_are_replaced_atomically() {
    use profgen::writer::write_profile_file;
    let dir = scratch("files");
    let path = dir.join("out.prof");
    std::fs::write(&path, b"old contents").unwrap();
    let opts = WriteOptions::default();
    let p = line_nested();
    write_profile_file(&p, OutputFormat::ExtBinary, &opts, &path).unwrap();
    assert_eq!(
        std::fs::read(&path).unwrap(),
        encode_profile(&p, OutputFormat::ExtBinary, &opts).unwrap()
    );

    // An unwritable format fails before touching the destination and names it.
    let err = write_profile_file(&cs_probe_flat(), OutputFormat::Binary, &opts, &path).unwrap_err();
    assert_eq!(err.to_string(), format!("{}: {UNSUPPORTED_FORMAT}", path.display()));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        encode_profile(&p, OutputFormat::ExtBinary, &opts).unwrap()
    );

    // A destination directory that does not exist: an I/O error naming the path, no leftovers.
    let missing = dir.join("no-such-dir").join("out.prof");
    let err = write_profile_file(&p, OutputFormat::Text, &opts, &missing).unwrap_err();
    assert!(err.to_string().starts_with(&format!("{}: ", missing.display())), "{err}");
    let leftovers: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, [std::ffi::OsString::from("out.prof")]);

    // A destination that is a directory cannot be replaced: error, and the temp file is removed.
    let err = write_profile_file(&p, OutputFormat::Text, &opts, &dir).unwrap_err();
    assert!(err.to_string().starts_with(&format!("{}: ", dir.display())), "{err}");
    let leftovers: Vec<_> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, [std::ffi::OsString::from("out.prof")]);
    let _ = std::fs::remove_dir_all(&dir);
}
