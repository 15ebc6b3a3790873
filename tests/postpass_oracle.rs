//! The post-passes against llvm-profgen 19: each fixture is a CS text profile that
//! `llvm-profgen-19 --llvm-sample-profile` post-processed with the options of its case; the
//! expected outputs and exact commands are in tests/fixtures/postpass/README.md.
//!
//! The text reader and writer here are minimal test-only helpers (enough for these fixtures),
//! and so is the context-less summary that supplies the thresholds.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use profgen::llvm::{ContextFrame, LineLocation, compress_recursion, trim_context};
use profgen::postpass::{self, PostPassOptions, Thresholds};
use profgen::profile::context_size::NoContextSizes;
use profgen::profile::{Context, FunctionSamples, Profile};

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/postpass");

fn parse_loc(s: &str) -> LineLocation {
    match s.split_once('.') {
        Some((l, d)) => LineLocation::new(l.parse().unwrap(), d.parse().unwrap()),
        None => LineLocation::new(s.parse().unwrap(), 0),
    }
}

fn parse_context(s: &str) -> Context {
    let frames: Vec<&str> = s.split(" @ ").collect();
    let mut out = Vec::new();
    for (i, f) in frames.iter().enumerate() {
        if i + 1 == frames.len() {
            out.push(ContextFrame { func: (*f).into(), loc: LineLocation::default() });
        } else {
            let (name, loc) = f.rsplit_once(':').unwrap();
            out.push(ContextFrame { func: name.into(), loc: parse_loc(loc) });
        }
    }
    Context::new(out)
}

/// Reads a text profile (flat CS or nested).
fn read_text(text: &str) -> Profile {
    let mut profile = Profile::default();
    // Stack of (indent of body lines, profile under construction, location in parent).
    let mut stack: Vec<(usize, FunctionSamples, LineLocation)> = Vec::new();
    let mut current_key: Option<Context> = None;
    fn pop_to(
        stack: &mut Vec<(usize, FunctionSamples, LineLocation)>,
        indent: usize,
        profile: &mut Profile,
        key: &Option<Context>,
    ) {
        while stack.last().is_some_and(|(i, _, _)| *i > indent) {
            let (_, fs, loc) = stack.pop().unwrap();
            match stack.last_mut() {
                Some((_, parent, _)) => {
                    parent.callsites.entry(loc).or_default().insert(fs.name.clone(), fs);
                }
                None => {
                    profile.functions.insert(key.clone().unwrap(), fs);
                }
            }
        }
    }
    for line in text.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let indent = line.len() - line.trim_start().len();
        let body = line.trim_start();
        if indent == 0 {
            pop_to(&mut stack, 0, &mut profile, &current_key);
            let mut parts = body.rsplitn(3, ':');
            let head: u64 = parts.next().unwrap().parse().unwrap();
            let total: u64 = parts.next().unwrap().parse().unwrap();
            let name = parts.next().unwrap();
            let context = if let Some(ctx) = name.strip_prefix('[') {
                profile.kind.context_sensitive = true;
                parse_context(ctx.strip_suffix(']').unwrap())
            } else {
                Context::base(name)
            };
            let mut fs = FunctionSamples::new(context.leaf_name());
            fs.total_samples = total;
            fs.head_samples = head;
            current_key = Some(context);
            stack.push((1, fs, LineLocation::default()));
            continue;
        }
        pop_to(&mut stack, indent, &mut profile, &current_key);
        let fs = &mut stack.last_mut().unwrap().1;
        if let Some(v) = body.strip_prefix("!Attributes: ") {
            fs.attributes = v.parse().unwrap();
            continue;
        }
        if let Some(v) = body.strip_prefix("!CFGChecksum: ") {
            fs.checksum = Some(v.parse().unwrap());
            profile.kind.probe_based = true;
            continue;
        }
        let (loc, rest) = body.split_once(": ").unwrap();
        let loc = parse_loc(loc);
        let mut tokens = rest.split(' ');
        let first = tokens.next().unwrap();
        if let Ok(count) = first.parse::<u64>() {
            fs.add_body(loc, count);
            for t in tokens {
                let (callee, n) = t.rsplit_once(':').unwrap();
                fs.add_call_target(loc, &callee.into(), n.parse().unwrap());
            }
        } else {
            let (callee, total) = first.rsplit_once(':').unwrap();
            let mut nested = FunctionSamples::new(callee);
            nested.total_samples = total.parse().unwrap();
            stack.push((indent + 1, nested, loc));
        }
    }
    pop_to(&mut stack, 0, &mut profile, &current_key);
    profile
}

fn loc_str(loc: LineLocation) -> String {
    if loc.discriminator > 0 {
        format!("{}.{}", loc.line_offset, loc.discriminator)
    } else {
        loc.line_offset.to_string()
    }
}

fn context_str(ctx: &Context) -> String {
    let n = ctx.len();
    let parts: Vec<String> = ctx
        .frames()
        .enumerate()
        .map(
            |(i, (func, loc))| {
                if i + 1 == n { func.to_string() } else { format!("{func}:{}", loc_str(loc)) }
            },
        )
        .collect();
    parts.join(" @ ")
}

/// `SampleProfileWriterText` layout.
fn write_text(profile: &Profile) -> String {
    fn write_fs(out: &mut String, fs: &FunctionSamples, indent: usize, probe: bool) {
        for (loc, b) in &fs.body {
            let mut targets: Vec<(&profgen::llvm::FuncName, &u64)> =
                b.call_targets.iter().collect();
            targets.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
            write!(out, "{}{}: {}", " ".repeat(indent + 1), loc_str(*loc), b.count).unwrap();
            for (t, n) in targets {
                write!(out, " {t}:{n}").unwrap();
            }
            out.push('\n');
        }
        for (loc, callees) in &fs.callsites {
            for (name, nested) in callees {
                writeln!(
                    out,
                    "{}{}: {}:{}",
                    " ".repeat(indent + 1),
                    loc_str(*loc),
                    name,
                    nested.total_samples
                )
                .unwrap();
                write_fs(out, nested, indent + 1, probe);
            }
        }
        if probe {
            writeln!(out, "{}!CFGChecksum: {}", " ".repeat(indent + 1), fs.checksum.unwrap_or(0))
                .unwrap();
        }
        if fs.attributes != 0 {
            writeln!(out, "{}!Attributes: {}", " ".repeat(indent + 1), fs.attributes).unwrap();
        }
    }
    let mut sorted: Vec<(&Context, &FunctionSamples)> = profile.functions.iter().collect();
    sorted.sort_by(|a, b| b.1.total_samples.cmp(&a.1.total_samples).then(a.0.cmp(b.0)));
    let mut out = String::new();
    for (ctx, fs) in sorted {
        if profile.kind.context_sensitive {
            write!(out, "[{}]", context_str(ctx)).unwrap();
        } else {
            out.push_str(&fs.name);
        }
        writeln!(out, ":{}:{}", fs.total_samples, fs.head_samples).unwrap();
        write_fs(&mut out, fs, 0, profile.kind.probe_based);
    }
    out
}

/// The context-less summary the caller must compute (§6.6 step 2, §6.8).
fn contextless_thresholds(profile: &Profile) -> Thresholds {
    let merged = postpass::context_less_profile(profile).functions;
    fn counts(fs: &FunctionSamples, out: &mut Vec<u64>) {
        out.extend(fs.body.values().map(|b| b.count));
        for callees in fs.callsites.values() {
            for nested in callees.values() {
                counts(nested, out);
            }
        }
    }
    let mut all = Vec::new();
    for fs in merged.values() {
        counts(fs, &mut all);
    }
    let total: u64 = all.iter().sum();
    let mut freq: BTreeMap<std::cmp::Reverse<u64>, u64> = BTreeMap::new();
    for c in all {
        *freq.entry(std::cmp::Reverse(c)).or_default() += 1;
    }
    let cutoffs = [
        10000, 100000, 200000, 300000, 400000, 500000, 600000, 700000, 800000, 900000, 950000,
        990000, 999000, 999900, 999990, 999999,
    ];
    let mut iter = freq.iter();
    let (mut sum, mut count) = (0u64, 0u64);
    let mut entries = Vec::new();
    for cutoff in cutoffs {
        let desired = (u128::from(total) * cutoff / 1_000_000) as u64;
        while sum < desired {
            let Some((c, f)) = iter.next() else { break };
            count = c.0;
            sum += c.0 * f;
        }
        entries.push((cutoff, count));
    }
    let at = |p: u128| entries.iter().find(|(c, _)| *c >= p).unwrap().1;
    Thresholds { hot: at(990000), cold: at(999999), p10_min_count: at(100000) }
}

/// `--use-context-cost-for-preinliner=0`, which every fixture uses (the binary has none of the
/// profiled functions, so context sizes would be undefined in llvm-profgen).
fn base_opts() -> PostPassOptions {
    PostPassOptions { use_context_cost: false, ..Default::default() }
}

/// Runs every `name | input | llvm-profgen options` line of `dir/cases.txt`: the input through
/// `post_process_cs` (or `post_process_non_cs` for a non-CS input) against `dir/name.expected`.
/// Returns the failing cases, leaving our output next to the expected one as `name.got`.
fn run_cases(dir: &str) -> (usize, Vec<String>) {
    let cases = std::fs::read_to_string(format!("{dir}/cases.txt")).unwrap();
    let mut count = 0;
    let mut failures = Vec::new();
    for line in cases.lines().filter(|l| !l.trim().is_empty() && !l.starts_with('#')) {
        let fields: Vec<&str> = line.splitn(3, '|').map(str::trim).collect();
        let (name, input, flags) = (fields[0], fields[1], fields[2]);
        let mut profile = read_text(&std::fs::read_to_string(format!("{dir}/{input}")).unwrap());
        let thresholds = contextless_thresholds(&profile);
        let opts = opts_from_flags(flags);
        if profile.kind.context_sensitive {
            postpass::post_process_cs(&mut profile, &opts, &thresholds, &NoContextSizes);
        } else {
            postpass::post_process_non_cs(&mut profile, &opts, &thresholds);
        }
        let want = std::fs::read_to_string(format!("{dir}/{name}.expected")).unwrap();
        let got = write_text(&profile);
        if got != want {
            std::fs::write(format!("{dir}/{name}.got"), got).unwrap();
            failures.push(format!("{name}: {input} [{flags}]"));
        }
        count += 1;
    }
    (count, failures)
}

#[test]
fn every_fixture_case_matches_llvm_profgen() {
    let (count, failures) = run_cases(FIXTURES);
    assert!(count >= 60, "only {count} cases");
    assert!(
        failures.is_empty(),
        "failing (see tests/fixtures/postpass/*.got):\n{}",
        failures.join("\n")
    );
}

/// The context of the one sampled range in recursion/*.expected: a perf script whose stack is
/// main → c → c → c → c → a → b → a → b → a → b → a → leaf, profiled with each
/// `--compress-recursion` / `--csprof-max-context-depth` setting.
fn recursion_sample_context(name: &str) -> Context {
    let text = std::fs::read_to_string(format!("{FIXTURES}/recursion/{name}.expected")).unwrap();
    let header = text.lines().find(|l| l.starts_with('[') && l.contains("]:7:")).unwrap();
    parse_context(&header[1..header.find("]:").unwrap()])
}

#[test]
fn recursion_compression_and_depth_trim_match_llvm_profgen() {
    let raw = recursion_sample_context("compress_off");
    assert_eq!(raw.len(), 13);
    for (name, compress, depth) in [
        ("compress_unlimited", -1, -1),
        ("compress_1", 1, -1),
        ("compress_2", 2, -1),
        ("compress_off_depth_3", 0, 3),
        ("depth_2", -1, 2),
        ("depth_0", -1, 0),
    ] {
        // As `getExpandedContext`: the leaf frame is set aside, the callers compressed, then
        // trimmed.
        let mut frames = raw.callers().to_vec();
        compress_recursion(&mut frames, compress);
        trim_context(&mut frames, depth);
        frames.push(ContextFrame { func: raw.leaf_name().into(), loc: Default::default() });
        assert_eq!(Context::new(frames), recursion_sample_context(name), "{name}");
    }
}

/// `updateFunctionSamples` on a non-CS profile: its call-target raise is idempotent, so applying
/// it with `--update-total-samples` to llvm-profgen's plain output must give llvm-profgen's
/// `--update-total-samples` output (per-byte totals become body sums: leaf 20 → 1, a and b
/// 0 → 1).
#[test]
fn non_cs_update_total_samples_matches_llvm_profgen() {
    let text = std::fs::read_to_string(format!("{FIXTURES}/recursion/lbr_only.expected")).unwrap();
    let mut profile = read_text(&text);
    profgen::profile::update::update_function_samples(&mut profile, true);
    let want =
        std::fs::read_to_string(format!("{FIXTURES}/recursion/lbr_only_update_total.expected"))
            .unwrap();
    assert_eq!(write_text(&profile), want);
}

/// Maps llvm-profgen flags (as in cases.txt) onto [`PostPassOptions`].
fn opts_from_flags(flags: &str) -> PostPassOptions {
    let mut o = base_opts();
    for flag in flags.split_whitespace() {
        let (name, value) = flag
            .trim_start_matches('-')
            .split_once('=')
            .unwrap_or((flag.trim_start_matches('-'), "1"));
        let b = value == "1" || value == "true";
        let n = || value.parse::<u32>().unwrap();
        match name {
            "gen-cs-nested-profile" => o.gen_cs_nested_profile = b,
            "csspgo-preinliner" => o.preinliner = b,
            "csprof-max-cold-context-depth" => o.max_cold_context_depth = n(),
            "trim-cold-profile" => o.trim_cold_profile = b,
            "csprof-merge-cold-context" => o.merge_cold_context = Some(b),
            "sample-profile-hot-inline-threshold" => o.hot_inline_threshold = Some(n()),
            "sample-profile-cold-inline-threshold" => o.cold_inline_threshold = Some(n()),
            "sample-profile-inline-limit-max" => o.inline_limit_max = Some(n()),
            "sample-profile-inline-limit-min" => o.inline_limit_min = n(),
            "sample-profile-inline-growth-limit" => o.inline_growth_limit = n(),
            "csspgo-preinliner-multiplier-for-previous-inlining" => {
                o.multiplier_for_previous_inlining = value.parse().unwrap()
            }
            "csspgo-replay-preinline" => o.replay_preinline = b,
            "generate-merged-base-profiles" => o.generate_merged_base_profiles = b,
            "sort-profiled-scc-member" => o.sort_profiled_scc_member = b,
            _ => panic!("unmapped flag {flag}"),
        }
    }
    o
}

/// Differential run over generated cases: `POSTPASS_DIFF_DIR` holds inputs, a cases.txt and
/// expected outputs as written by tests/fixtures/postpass/gen_random_cases.py. Run with
/// `--ignored` when changing the post-passes.
#[test]
#[ignore]
fn differential_against_generated_cases() {
    let dir = std::env::var("POSTPASS_DIFF_DIR").expect("POSTPASS_DIFF_DIR");
    let (count, failures) = run_cases(&dir);
    assert!(failures.is_empty(), "{} of {count} failing:\n{}", failures.len(), failures.join("\n"));
}
