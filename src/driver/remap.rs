//! `profgen remap`: an old build's profile carried onto a new build.

use crate::binary::{Binary, LoadOptions};
use crate::config::RemapConfig;
use crate::error::Error;
use crate::remap::RemapReport;
use crate::writer::{self, OutputFormat, USE_MD5_IGNORED};
use crate::{postpass, reader};

/// `profgen remap`: reads the profile and the builds, remaps, writes the profile (and the
/// per-function report when asked).
pub fn remap(cfg: &RemapConfig) -> Result<(RemapReport, Vec<String>), Error> {
    let file = reader::read_profile_file(&cfg.profile)?;
    let binary = Binary::load(&cfg.binary, &cfg.load)?;
    let mut warnings = binary.warnings().to_vec();
    // Anchors of the functions the profile names; of every function when it names some the new
    // build lacks (renamed ones are looked for among all the others).
    let profile = &file.profile;
    let mut new_code = binary.anchors(&crate::remap::named_by(profile, file.md5_names));
    if crate::remap::needs_every_function(profile, file.md5_names, &new_code) {
        new_code = binary.anchors(&|_| true);
    }
    warnings.append(&mut new_code.warnings);
    if new_code.probe_based != profile.kind.probe_based {
        return Err(Error::BadFile {
            path: cfg.binary.clone(),
            what: format!(
                "the profile {} is {}probe-based, but this binary {} pseudo probes",
                cfg.profile.display(),
                if profile.kind.probe_based { "" } else { "not " },
                if new_code.probe_based { "has" } else { "has no" }
            ),
        });
    }
    let old = match &cfg.old_binary {
        Some(path) => {
            let old = Binary::load(path, &LoadOptions::default())?;
            warnings.extend(old.warnings().iter().cloned());
            if old.probes().is_some() != profile.kind.probe_based {
                warnings.push(format!(
                    "{}: the profile is {}probe-based but this binary {} pseudo probes",
                    path.display(),
                    if profile.kind.probe_based { "" } else { "not " },
                    if old.probes().is_some() { "has" } else { "has no" }
                ));
            }
            let names = crate::remap::old_functions(profile, file.md5_names, &new_code);
            let mut code = old.anchors(&|n| names.contains(n));
            warnings.append(&mut code.warnings);
            Some((old, code))
        }
        None => None,
    };
    let old_shapes = |wanted: &dyn Fn(&str) -> bool| match &old {
        Some((old, _)) => old.shapes(wanted),
        None => Ok(Default::default()),
    };
    let new_shapes = |wanted: &dyn Fn(&str) -> bool| binary.shapes(wanted);
    let shapes = (old.is_some() && !cfg.llvm_matching)
        .then_some(crate::remap::Shapes { old: &old_shapes, new: &new_shapes });
    let (mut profile, report) = crate::remap::remap_profile(
        profile,
        file.md5_names,
        &new_code,
        old.as_ref().map(|(_, code)| code),
        shapes,
        &cfg.remap,
    )?;
    if cfg.zero_count_anchors {
        postpass::add_zero_count_anchors(&mut profile, &postpass::DirectCalls::of(&new_code));
    }
    if cfg.write.use_md5 && cfg.format != OutputFormat::ExtBinary {
        warnings.push(USE_MD5_IGNORED.to_string());
    }
    writer::write_profile_file(&profile, cfg.format, &cfg.write, &cfg.output)?;
    if let Some(path) = &cfg.report {
        let table = report.table();
        if path.as_os_str() == "-" {
            eprint!("{table}");
        } else {
            writer::write_bytes_atomically(table.as_bytes(), path)?;
        }
    }
    Ok((report, warnings))
}
