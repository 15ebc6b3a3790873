//! Profile density report (`ProfileGeneratorBase::calculateAndShowDensity`): warns when the
//! hot functions have too few samples per profiled location for sample PGO to work well.
//!
//! In: the final [`Profile`]. Out: the warning lines (for stderr) and the `--show-density` line
//! (for stdout); the driver prints them.

use crate::profile::model::{FunctionSamples, Profile};

/// `--profile-density-*` / `--show-density`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DensityOptions {
    /// `--profile-density-threshold`.
    pub threshold: i32,
    /// `--profile-density-cutoff-hot` (parts per million).
    pub cutoff_hot: i32,
    /// `--show-density`.
    pub show: bool,
}

impl Default for DensityOptions {
    fn default() -> Self {
        DensityOptions { threshold: 50, cutoff_hot: 990000, show: false }
    }
}

/// What to print after writing the profile.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DensityReport {
    pub density: f64,
    /// `warning: ...` lines for stderr (empty when the density is fine).
    pub warnings: String,
    /// The `--show-density` line for stdout.
    pub stdout: String,
}

/// `calculateDensity`: per top-level profile (inlinees included) density = body samples /
/// body entries; the profile density is the smallest density among the densest functions that
/// together hold the cutoff share of all samples.
pub fn profile_density(profile: &Profile, cutoff_hot: i32) -> f64 {
    fn add(fs: &FunctionSamples, samples: &mut u64, size: &mut u64) {
        *size += fs.body.len() as u64;
        for b in fs.body.values() {
            *samples = samples.wrapping_add(b.count);
        }
        for callee in fs.callsites.values().flat_map(|c| c.values()) {
            add(callee, samples, size);
        }
    }
    let mut total = 0u64;
    let mut list: Vec<(f64, u64)> = Vec::new();
    for fs in profile.functions.values() {
        let (mut samples, mut size) = (0, 0);
        add(fs, &mut samples, &mut size);
        if size == 0 {
            continue;
        }
        total = total.wrapping_add(samples);
        list.push((samples as f64 / size as f64, samples));
    }
    list.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    // LLVM compares in single precision: `Accumulated < Total * (float)Cutoff / 1000000`.
    let target = total as f32 * cutoff_hot as f32 / 1_000_000f32;
    let (mut accumulated, mut density) = (0u64, 0.0);
    for &(d, samples) in &list {
        if (accumulated as f32) >= target {
            break;
        }
        accumulated = accumulated.wrapping_add(samples);
        density = d;
    }
    density
}

/// `calculateAndShowDensity` + `showDensitySuggestion`.
pub fn density_report(profile: &Profile, opts: &DensityOptions) -> DensityReport {
    let density = profile_density(profile, opts.cutoff_hot);
    let mut warnings = String::new();
    if density == 0.0 {
        warnings.push_str(
            "warning: The output profile is empty or the --profile-density-cutoff-hot option is \
             set too low. Please check your command.\n",
        );
    } else if density < opts.threshold as f64 {
        warnings.push_str(&format!(
            "warning: Sample PGO is estimated to optimize better with {:.1}x more samples. Please \
             consider increasing sampling rate or profiling for longer duration to get more \
             samples.\n",
            opts.threshold as f64 / density
        ));
    }
    let stdout = if opts.show {
        format!(
            "Functions with density >= {density:.1} account for {:.2}% total sample counts.\n",
            opts.cutoff_hot as f64 / 10000.0
        )
    } else {
        String::new()
    };
    DensityReport { density, warnings, stdout }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llvm::LineLocation;
    use crate::profile::model::Context;

    fn func(counts: &[u64]) -> FunctionSamples {
        let mut fs = FunctionSamples::new("f");
        for (i, &n) in counts.iter().enumerate() {
            fs.add_body(LineLocation::new(i as u32, 0), n);
        }
        fs
    }

    #[test]
    fn density_is_that_of_the_last_hot_function() {
        let mut p = Profile::default();
        // Densities: a = 1000 (2 entries, 2000 samples), b = 10 (3 entries, 30 samples with the
        // inlinee), c = 1 (1 entry, 1 sample).
        p.functions.insert(Context::base("a"), func(&[1000, 1000]));
        let mut b = func(&[10, 10]);
        *b.callsite_mut(LineLocation::new(1, 0), "x") = func(&[10]);
        p.functions.insert(Context::base("b"), b);
        p.functions.insert(Context::base("c"), func(&[1]));
        p.functions.insert(Context::base("empty"), func(&[]));
        // 99% of 2031 = 2010.69: a (2000) is not enough, b reaches it.
        assert_eq!(profile_density(&p, 990000), 10.0);
        assert_eq!(profile_density(&p, 900000), 1000.0);
        let r = density_report(&p, &DensityOptions { show: true, ..Default::default() });
        assert_eq!(
            r.warnings,
            "warning: Sample PGO is estimated to optimize better with 5.0x more samples. Please \
             consider increasing sampling rate or profiling for longer duration to get more samples.\n"
        );
        assert_eq!(
            r.stdout,
            "Functions with density >= 10.0 account for 99.00% total sample counts.\n"
        );
        let quiet = density_report(&p, &DensityOptions { threshold: 10, ..Default::default() });
        assert_eq!((quiet.warnings.as_str(), quiet.stdout.as_str()), ("", ""));
        let empty = density_report(&Profile::default(), &DensityOptions::default());
        assert!(empty.warnings.starts_with("warning: The output profile is empty"));
    }
}
