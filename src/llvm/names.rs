//! Function names as sample profiles key them.

use std::borrow::Cow;

/// `FunctionSamples::getCanonicalFnName(name, "selected")` with `.__uniq.` suffixes kept:
/// strips `.llvm.<x>`, then `.part.<x>`, when that suffix is the last dot component.
pub fn canonical_fn_name(name: &str) -> &str {
    let mut cand = name;
    for suffix in [".llvm.", ".part."] {
        // A suffix is stripped where its trailing dot is the name's last dot (its last
        // occurrence, tested without a substring search: Rust names are full of dots).
        let Some(last_dot) = memchr::memrchr(b'.', cand.as_bytes()) else {
            return cand;
        };
        if cand[..=last_dot].ends_with(suffix) {
            cand = &cand[..last_dot + 1 - suffix.len()];
        }
    }
    cand
}

/// A Rust symbol's name without the hashes its compiler derives from the crate's build (of its
/// metadata, flags, dependencies): the legacy mangling's `17h<16 hex digits>E` suffix, the v0
/// mangling's crate disambiguators (`Cs<base 62>_`). Two builds of a Rust program name each
/// function with other hashes; this is what stays. Other names are returned as they are.
pub fn stable_fn_name(name: &str) -> Cow<'_, str> {
    let b = name.as_bytes();
    if name.starts_with("_ZN") && b.len() > 23 && b.ends_with(b"E") {
        let hash = &b[b.len() - 20..b.len() - 1];
        if hash.starts_with(b"17h") && hash[3..].iter().all(u8::is_ascii_hexdigit) {
            return Cow::Owned(format!("{}E", &name[..name.len() - 20]));
        }
    }
    if !name.starts_with("_R") || !name.contains("Cs") {
        return Cow::Borrowed(name);
    }
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find("Cs") {
        let after = &rest[at + 2..];
        let digits = after.bytes().take_while(u8::is_ascii_alphanumeric).count();
        out.push_str(&rest[..at + 1]);
        // A disambiguator ends with `_` and a crate name's length follows.
        if after[digits..].starts_with('_')
            && after[digits + 1..].starts_with(|c: char| c.is_ascii_digit())
        {
            rest = &after[digits + 1..];
        } else {
            rest = &rest[at + 1..];
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_names_strip_selected_suffixes() {
        assert_eq!(canonical_fn_name("foo.llvm.1234"), "foo");
        assert_eq!(canonical_fn_name("foo.part.1"), "foo");
        assert_eq!(canonical_fn_name("foo.part.1.llvm.2"), "foo");
        assert_eq!(canonical_fn_name("foo.__uniq.123"), "foo.__uniq.123");
        assert_eq!(canonical_fn_name("foo.__uniq.123.llvm.4"), "foo.__uniq.123");
        assert_eq!(canonical_fn_name("foo.cold"), "foo.cold");
        // Rust names have dots of their own; only the last component counts.
        assert_eq!(canonical_fn_name("a..b$LT$c..d$GT$E.llvm.7"), "a..b$LT$c..d$GT$E");
        assert_eq!(canonical_fn_name("a.llvm.1..b"), "a.llvm.1..b");
        assert_eq!(canonical_fn_name("a.part.1.x"), "a.part.1.x");
        assert_eq!(canonical_fn_name("foo.llvm.1.cold"), "foo.llvm.1.cold");
        assert_eq!(canonical_fn_name("_ZN3fooEv"), "_ZN3fooEv");
    }

    #[test]
    fn stable_names_drop_rust_build_hashes() {
        assert_eq!(
            stable_fn_name("_ZN7profgen6binary6Binary12inline_stack17h4a29f5f9d6b8f1f3E"),
            "_ZN7profgen6binary6Binary12inline_stackE"
        );
        assert_eq!(
            stable_fn_name("_RNvMs6_NtCsgEmfK2I1SDS_4core3numm12wrapping_add"),
            "_RNvMs6_NtC4core3numm12wrapping_add"
        );
        assert_eq!(
            stable_fn_name("_RINvNtCsjrHSEGnQ3l9_3std2fsCs1a_5gimliE"),
            "_RINvNtC3std2fsC5gimliE"
        );
        for other in ["_ZN3fooEv", "main", "_ZN3foo17hxyzE", "_RNvCs", "Csa_1"] {
            assert_eq!(stable_fn_name(other), other);
        }
    }
}
