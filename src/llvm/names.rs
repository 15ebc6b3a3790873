//! Function names as sample profiles key them.

/// `FunctionSamples::getCanonicalFnName(name, "selected")` with `.__uniq.` suffixes kept:
/// strips `.llvm.<x>`, then `.part.<x>`, when that suffix is the last dot component.
pub fn canonical_fn_name(name: &str) -> &str {
    // Most names have no dot at all (called per frame of large binaries' walks).
    if memchr::memchr(b'.', name.as_bytes()).is_none() {
        return name;
    }
    let mut cand = name;
    for suffix in [".llvm.", ".part."] {
        let Some(it) = cand.rfind(suffix) else {
            continue;
        };
        let last_dot = cand.rfind('.');
        if last_dot == Some(it) || last_dot == Some(it + suffix.len() - 1) {
            cand = &cand[..it];
        }
    }
    cand
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
        assert_eq!(canonical_fn_name("foo.llvm.1.cold"), "foo.llvm.1.cold");
        assert_eq!(canonical_fn_name("_ZN3fooEv"), "_ZN3fooEv");
    }
}
