//! Text encoding (`SampleProfileWriterText::writeSample`), byte-identical to llvm-profgen's:
//!
//! ```text
//! main:420:7                     name:total:head (CS: [main:1 @ foo]:total:head)
//!  1: 15                         body: line[.discr]: count [target:count ...]
//!  3.1: 30 bar:20 baz:10
//!  3.1: bar:165                  inlinee: header without head samples, one more space
//!   0: 15
//!   !CFGChecksum: 1234           probe-based profiles, every level
//!  !Attributes: 2                when non-zero
//! ```

use std::fmt::Write as _;

use super::sorted_profiles;
use crate::llvm::LineLocation;
use crate::profile::model::{Context, FunctionSamples, Profile, ProfileKind};

pub fn encode(profile: &Profile) -> Vec<u8> {
    let mut out = String::new();
    for (ctx, fs) in sorted_profiles(profile) {
        if profile.kind.context_sensitive {
            out.push('[');
            push_context(&mut out, ctx);
            out.push(']');
        } else {
            out.push_str(ctx.leaf_name());
        }
        let _ = writeln!(out, ":{}:{}", fs.total_samples, fs.head_samples);
        write_contents(&mut out, fs, 0, profile.kind);
    }
    out.into_bytes()
}

/// `SampleContext::toString`: `main:1 @ foo:3.1 @ bar` (the leaf has no location).
pub fn push_context(out: &mut String, ctx: &Context) {
    for frame in ctx.callers() {
        out.push_str(&frame.func);
        out.push(':');
        push_loc(out, frame.loc);
        out.push_str(" @ ");
    }
    out.push_str(ctx.leaf_name());
}

fn push_loc(out: &mut String, loc: LineLocation) {
    let _ = write!(out, "{}", loc.line_offset);
    if loc.discriminator > 0 {
        let _ = write!(out, ".{}", loc.discriminator);
    }
}

/// Body lines, inlinees and metadata of one profile whose header sits at `indent`.
fn write_contents(out: &mut String, fs: &FunctionSamples, indent: usize, kind: ProfileKind) {
    let pad = |out: &mut String, n: usize| out.extend(std::iter::repeat_n(' ', n));
    for (loc, sample) in &fs.body {
        pad(out, indent + 1);
        push_loc(out, *loc);
        let _ = write!(out, ": {}", sample.count);
        let mut targets: Vec<_> = sample.call_targets.iter().collect();
        // Count descending, then name (the map is already name-ordered).
        targets.sort_by(|a, b| b.1.cmp(a.1));
        for (name, count) in targets {
            let _ = write!(out, " {name}:{count}");
        }
        out.push('\n');
    }
    for (loc, callees) in &fs.callsites {
        for (name, callee) in callees {
            pad(out, indent + 1);
            push_loc(out, *loc);
            // LLVM brackets every header of a CS profile, inlinees (context-less) included.
            if kind.context_sensitive {
                let _ = writeln!(out, ": [{name}]:{}", callee.total_samples);
            } else {
                let _ = writeln!(out, ": {name}:{}", callee.total_samples);
            }
            write_contents(out, callee, indent + 1, kind);
        }
    }
    if kind.probe_based {
        pad(out, indent + 1);
        let _ = writeln!(out, "!CFGChecksum: {}", fs.checksum.unwrap_or(0));
    }
    if fs.attributes != 0 {
        pad(out, indent + 1);
        let _ = writeln!(out, "!Attributes: {}", fs.attributes);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llvm::ContextFrame;
    use crate::profile::model::attr;

    #[test]
    fn nested_line_profile() {
        let mut foo = FunctionSamples::new("foo");
        foo.total_samples = 780;
        foo.add_body(LineLocation::new(0, 0), 0);
        foo.add_body(LineLocation::new(3, 1), 15);
        foo.add_call_target(LineLocation::new(3, 1), &"bar".into(), 15);
        foo.add_call_target(LineLocation::new(3, 1), &"baz".into(), 15);
        foo.add_call_target(LineLocation::new(3, 1), &"aaa".into(), 2);
        let inl = foo.callsite_mut(LineLocation::new(3, 2), "bar");
        inl.total_samples = 45;
        inl.add_body(LineLocation::new(1, 0), 45);
        let mut bar = FunctionSamples::new("bar");
        bar.total_samples = 780;
        bar.head_samples = 15;
        let mut p = Profile::default();
        p.functions.insert(Context::base("foo"), foo);
        p.functions.insert(Context::base("bar"), bar);
        let text = String::from_utf8(encode(&p)).unwrap();
        assert_eq!(
            text,
            "bar:780:15\n\
             foo:780:0\n 0: 0\n 3.1: 15 bar:15 baz:15 aaa:2\n 3.2: bar:45\n  1: 45\n"
        );
    }

    #[test]
    fn cs_probe_profile_with_attributes() {
        let ctx = Context::new(vec![
            ContextFrame { func: "main".into(), loc: LineLocation::new(2, 0) },
            ContextFrame { func: "foo".into(), loc: LineLocation::new(5, 3) },
            ContextFrame { func: "bar".into(), loc: LineLocation::default() },
        ]);
        let mut bar = FunctionSamples::new("bar");
        bar.total_samples = 30;
        bar.head_samples = 15;
        bar.add_body(LineLocation::new(1, 0), 15);
        bar.checksum = Some(72617220756);
        bar.attributes = attr::WAS_INLINED;
        let mut p = Profile {
            kind: ProfileKind { context_sensitive: true, probe_based: true, ..Default::default() },
            ..Default::default()
        };
        p.functions.insert(ctx, bar);
        let text = String::from_utf8(encode(&p)).unwrap();
        assert_eq!(
            text,
            "[main:2 @ foo:5.3 @ bar]:30:15\n 1: 15\n !CFGChecksum: 72617220756\n !Attributes: 1\n"
        );
    }

    #[test]
    fn cs_inlinee_headers_are_bracketed_like_llvm() {
        let mut foo = FunctionSamples::new("foo");
        foo.total_samples = 5;
        foo.callsite_mut(LineLocation::new(1, 0), "bar").total_samples = 5;
        let mut p = Profile {
            kind: ProfileKind { context_sensitive: true, ..Default::default() },
            ..Default::default()
        };
        p.functions.insert(Context::base("foo"), foo);
        assert_eq!(String::from_utf8(encode(&p)).unwrap(), "[foo]:5:0\n 1: [bar]:5\n");
    }
}
