//! Text profiles (`SampleProfileReaderText`): the grammar [`crate::writer::text`] writes.
//!
//! A line's depth is its number of leading spaces: depth 0 is a top-level header (`name:total:
//! head`, or `[context]:total:head` for flat CS profiles), depth d > 0 belongs to the profile
//! opened at depth d - 1: a body line (`loc: count target:count ...`), an inlinee header
//! (`loc: name:total`, `loc: [name]:total` in CS profiles) or metadata (`!CFGChecksum: n`,
//! `!Attributes: n`). Blank lines and `#` comments are skipped.

use super::{FileFormat, ProfileFile};
use crate::error::{Error, Result};
use crate::llvm::{ContextFrame, LineLocation};
use crate::profile::model::{Context, FunctionSamples, Profile, attr};
use std::path::Path;

pub fn read_text(text: &str, path: &Path) -> Result<ProfileFile> {
    let mut profile = Profile::default();
    // The profiles open at each depth: the top-level one, then its inlinees. Built bottom-up:
    // a profile is attached to its parent when a line of a lower depth closes it.
    let mut open: Vec<(Context, LineLocation, FunctionSamples)> = Vec::new();
    let mut any_cs = false;
    let mut any_flat = false;
    for (i, raw) in text.lines().enumerate() {
        let lineno = i as u64 + 1;
        let bad = |what: &str| Error::BadLine {
            path: path.to_path_buf(),
            line: lineno,
            what: format!("{what}: `{raw}`"),
        };
        let line = raw.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let depth = line.len() - line.trim_start_matches(' ').len();
        let body = &line[depth..];
        if depth == 0 {
            close_to(&mut open, 0, &mut profile);
            let (name_part, total, head) = split_header(body).ok_or_else(|| {
                bad("expected a profile header `name:total:head` or `[context]:total:head`")
            })?;
            let ctx = if let Some(inner) =
                name_part.strip_prefix('[').and_then(|s| s.strip_suffix(']'))
            {
                any_cs = true;
                parse_context(inner).ok_or_else(|| bad("malformed context"))?
            } else {
                any_flat = true;
                Context::base(name_part)
            };
            if any_cs && any_flat {
                return Err(bad("CS (`[...]`) and context-less headers mixed"));
            }
            let mut fs = FunctionSamples::new(ctx.leaf());
            fs.total_samples = total;
            fs.head_samples = head;
            open.push((ctx, LineLocation::default(), fs));
            continue;
        }
        if open.is_empty() {
            return Err(bad("indented line before the first profile header"));
        }
        if depth > open.len() {
            return Err(bad("indented deeper than the profile it belongs to"));
        }
        close_to(&mut open, depth, &mut profile);
        let fs = &mut open.last_mut().expect("depth >= 1").2;
        if let Some(meta) = body.strip_prefix('!') {
            let (key, value) = meta.split_once(": ").ok_or_else(|| bad("malformed metadata"))?;
            let n: u64 = value.trim().parse().map_err(|_| bad("metadata value is not a number"))?;
            match key {
                "CFGChecksum" => fs.checksum = Some(n),
                "Attributes" => {
                    fs.attributes = u32::try_from(n).map_err(|_| bad("attributes too large"))?
                }
                _ => return Err(bad("unknown metadata")),
            }
            continue;
        }
        let (loc_str, rest) = body.split_once(": ").ok_or_else(|| bad("expected `loc: ...`"))?;
        let loc =
            parse_loc(loc_str).ok_or_else(|| bad("malformed line offset or discriminator"))?;
        let mut tokens = rest.split(' ').filter(|t| !t.is_empty());
        let first = tokens.next().ok_or_else(|| bad("nothing after the location"))?;
        if let Ok(count) = first.parse::<u64>() {
            fs.add_body(loc, count);
            for t in tokens {
                let (name, n) = t.rsplit_once(':').ok_or_else(|| bad("malformed call target"))?;
                let n: u64 = n.parse().map_err(|_| bad("call target count is not a number"))?;
                fs.add_call_target(loc, &name.into(), n);
            }
        } else {
            let (name, total) = rest.rsplit_once(':').ok_or_else(|| bad("malformed inlinee"))?;
            let name = name.strip_prefix('[').and_then(|n| n.strip_suffix(']')).unwrap_or(name);
            let total: u64 = total.parse().map_err(|_| bad("inlinee total is not a number"))?;
            let mut callee = FunctionSamples::new(name);
            callee.total_samples = total;
            open.push((Context::base(name), loc, callee));
        }
    }
    close_to(&mut open, 0, &mut profile);
    profile.kind.context_sensitive = any_cs;
    let mut probe = false;
    let mut preinlined = false;
    for fs in profile.functions.values() {
        probe |= fs.checksum.is_some();
        visit(fs, &mut |f| preinlined |= f.attributes & attr::SHOULD_BE_INLINED != 0);
    }
    profile.kind.probe_based = probe;
    profile.kind.preinlined = preinlined;
    Ok(ProfileFile { profile, format: FileFormat::Text, md5_names: false })
}

/// Calls `f` on `fs` and every inlinee below it.
fn visit(fs: &FunctionSamples, f: &mut impl FnMut(&FunctionSamples)) {
    f(fs);
    for callees in fs.callsites.values() {
        for c in callees.values() {
            visit(c, f);
        }
    }
}

/// Closes open profiles until `depth` remain, attaching each to its parent (or to the profile).
fn close_to(
    open: &mut Vec<(Context, LineLocation, FunctionSamples)>,
    depth: usize,
    profile: &mut Profile,
) {
    while open.len() > depth {
        let (ctx, loc, fs) = open.pop().expect("len > depth");
        match open.last_mut() {
            Some((_, _, parent)) => {
                parent.callsites.entry(loc).or_default().insert(fs.name.clone(), fs);
            }
            None => match profile.functions.get_mut(&ctx) {
                Some(existing) => existing.merge(&fs),
                None => {
                    profile.functions.insert(ctx, fs);
                }
            },
        }
    }
}

/// `name:total:head` with the name taken up to the second-last `:`.
fn split_header(s: &str) -> Option<(&str, u64, u64)> {
    let (rest, head) = s.rsplit_once(':')?;
    let (name, total) = rest.rsplit_once(':')?;
    if name.is_empty() {
        return None;
    }
    Some((name, total.parse().ok()?, head.parse().ok()?))
}

/// `line[.discriminator]`.
fn parse_loc(s: &str) -> Option<LineLocation> {
    let (line, discr) = match s.split_once('.') {
        Some((l, d)) => (l, d.parse().ok()?),
        None => (s, 0),
    };
    Some(LineLocation::new(line.parse().ok()?, discr))
}

/// `main:1 @ foo:3.1 @ bar`.
fn parse_context(s: &str) -> Option<Context> {
    let parts: Vec<&str> = s.split(" @ ").collect();
    let (leaf, callers) = parts.split_last()?;
    let mut frames = Vec::with_capacity(parts.len());
    for caller in callers {
        let (func, loc) = caller.rsplit_once(':')?;
        frames.push(ContextFrame { func: func.into(), loc: parse_loc(loc)? });
    }
    frames.push(ContextFrame { func: (*leaf).into(), loc: LineLocation::default() });
    Some(Context::new(frames))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_probe_profile_with_targets_and_metadata() {
        let text = "main:100:3\n 1: 3\n 2: 10 foo:7 bar:3\n 3: foo:50\n  1: 50\n  !CFGChecksum: 7\n !CFGChecksum: 9\n";
        let p = read_text(text, Path::new("p.txt")).unwrap().profile;
        assert!(p.kind.probe_based && !p.kind.context_sensitive);
        let main = &p.functions[&Context::base("main")];
        assert_eq!((main.total_samples, main.head_samples, main.checksum), (100, 3, Some(9)));
        assert_eq!(main.body[&LineLocation::new(2, 0)].call_targets["foo"], 7);
        let foo = &main.callsites[&LineLocation::new(3, 0)]["foo"];
        assert_eq!((foo.total_samples, foo.checksum), (50, Some(7)));
    }

    #[test]
    fn errors_name_the_line() {
        let err = read_text("main:1:0\n 1: x y\n", Path::new("p.txt")).unwrap_err();
        assert_eq!(err.to_string(), "p.txt:2: malformed inlinee: ` 1: x y`");
        let err = read_text(" 1: 1\n", Path::new("p.txt")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "p.txt:1: indented line before the first profile header: ` 1: 1`"
        );
    }
}
