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
    let mut old_shapes = None;
    let old_code = match &cfg.old_binary {
        Some(path) => {
            let old = Binary::load(path, &LoadOptions::default())?;
            if !cfg.llvm_matching {
                old_shapes = Some(old.shapes(|_| true)?);
            }
            warnings.extend(old.warnings().iter().cloned());
            if old.probes().is_some() != file.profile.kind.probe_based {
                warnings.push(format!(
                    "{}: the profile is {}probe-based but this binary {} pseudo probes",
                    path.display(),
                    if file.profile.kind.probe_based { "" } else { "not " },
                    if old.probes().is_some() { "has" } else { "has no" }
                ));
            }
            Some(old.anchors(&|_| true))
        }
        None => None,
    };
    let new_code = binary.anchors(&|_| true);
    if new_code.probe_based != file.profile.kind.probe_based {
        return Err(Error::BadFile {
            path: cfg.binary.clone(),
            what: format!(
                "the profile {} is {}probe-based, but this binary {} pseudo probes",
                cfg.profile.display(),
                if file.profile.kind.probe_based { "" } else { "not " },
                if new_code.probe_based { "has" } else { "has no" }
            ),
        });
    }
    let new_shapes = match old_shapes {
        Some(_) => Some(binary.shapes(|_| true)?),
        None => None,
    };
    let shapes = old_shapes
        .as_ref()
        .zip(new_shapes.as_ref())
        .map(|(old, new)| crate::remap::Shapes { old, new });
    let (mut profile, report) = crate::remap::remap_profile(
        &file.profile,
        file.md5_names,
        &new_code,
        old_code.as_ref(),
        shapes,
        &cfg.remap,
    );
    if cfg.zero_count_anchors {
        postpass::add_zero_count_anchors(&mut profile, &new_code);
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
