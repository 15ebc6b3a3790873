//! The filter of ambiguous compiler-generated initialisers, the last post-pass.

use crate::profile::{FunctionSamples, Profile};

/// Functions with several same-named versions whose merged samples would mislead the compiler.
const AMBIGUOUS_PREFIXES: [&str; 2] = ["__cxx_global_var_init", "__tls_init"];

/// `filterAmbiguousProfile`: drops top-level and nested profiles of `__cxx_global_var_init*` and
/// `__tls_init*`. Returns the number of profiles dropped.
pub fn filter_ambiguous_profiles(profile: &mut Profile) -> usize {
    let before = profile.functions.len();
    profile.functions.retain(|_, fs| !is_ambiguous(&fs.name));
    let mut removed = before - profile.functions.len();
    for fs in profile.functions.values_mut() {
        removed += filter_nested(fs);
    }
    removed
}

fn is_ambiguous(name: &str) -> bool {
    AMBIGUOUS_PREFIXES.iter().any(|p| name.starts_with(p))
}

fn filter_nested(fs: &mut FunctionSamples) -> usize {
    let mut removed = 0;
    for callees in fs.callsites.values_mut() {
        let before = callees.len();
        callees.retain(|name, _| !is_ambiguous(name));
        removed += before - callees.len();
        for nested in callees.values_mut() {
            removed += filter_nested(nested);
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llvm::LineLocation;
    use crate::profile::Context;

    fn loc(line: u32, discriminator: u32) -> LineLocation {
        LineLocation::new(line, discriminator)
    }

    #[test]
    fn drops_ambiguous_initialisers_at_every_level() {
        let mut main = FunctionSamples::new("main");
        main.callsite_mut(loc(1, 0), "__tls_init");
        let inner = main.callsite_mut(loc(2, 0), "helper");
        inner.callsite_mut(loc(3, 0), "__cxx_global_var_init.7");
        inner.callsite_mut(loc(4, 0), "kept");
        let mut profile = Profile::default();
        profile.functions.insert(Context::base("main"), main);
        profile.functions.insert(
            Context::base("__cxx_global_var_init"),
            FunctionSamples::new("__cxx_global_var_init"),
        );
        profile
            .functions
            .insert(Context::base("__tls_init_x"), FunctionSamples::new("__tls_init_x"));
        profile.functions.insert(Context::base("_tls_init"), FunctionSamples::new("_tls_init"));
        assert_eq!(filter_ambiguous_profiles(&mut profile), 4);
        let names: Vec<&str> = profile.functions.values().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["_tls_init", "main"]);
        let main = &profile.functions[&Context::base("main")];
        assert!(main.callsites[&loc(1, 0)].is_empty());
        let helper = &main.callsites[&loc(2, 0)]["helper"];
        assert!(helper.callsites[&loc(3, 0)].is_empty());
        assert!(helper.callsites[&loc(4, 0)].contains_key("kept"));
    }
}
