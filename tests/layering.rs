//! The pipeline reads one way: every `crate::` path in `src/` names its own module or one on a
//! lower floor (README, "Layout"). A stage that needs something from a higher one means that
//! thing belongs lower down (usually on the ground floor), not that the rule should bend.

use std::path::{Path, PathBuf};

/// Floors, bottom first. A module may use modules on lower floors only (and itself).
const FLOORS: &[&[&str]] = &[
    // The shared vocabulary: address spaces, errors, LLVM's contexts, hashes and encodings,
    // text parsing, the JSON writer.
    &["addr", "error", "json", "llvm", "progress", "text"],
    // The profiled binary and the queries the stages ask of it.
    &["binary"],
    // The pipeline, in data-flow order.
    &["input"],
    &["mapping"],
    &["aggregate"],
    &["profile"],
    &["postpass"],
    // The encodings of a finished profile, both ways (the reader serves commands that start
    // from a profile; neither direction uses the other).
    &["writer", "reader"],
    // Side tools over the stages, used only by the binaries and the front end: the recorder,
    // then the tools that read its traces.
    &["record"],
    &["ab", "order", "remap"],
    // The front end: the run configuration, the driver that wires the stages, the command line.
    &["config"],
    &["driver"],
    &["cli"],
];

fn floor(module: &str) -> Option<usize> {
    FLOORS.iter().position(|f| f.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module names following `crate::` in the code of `text` (comments skipped), with
/// their line numbers; `crate::{a, b::c}` names `a` and `b`.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let code: String = text
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.trim_start().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect()
    };
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = code[from..].find("crate::") {
        let at = from + found;
        from = at + "crate::".len();
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue;
        }
        let line = code[..at].matches('\n').count() + 1;
        let rest = &code[from..];
        if let Some(group) = rest.strip_prefix('{') {
            // Top-level items of the group: split at commas outside nested braces.
            let mut depth = 0;
            let mut item_start = 0;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push((line, ident(&group[item_start..i])));
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push((line, ident(&group[item_start..i])));
                        item_start = i + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.push((line, ident(rest)));
        }
    }
    out.retain(|(_, name)| !name.is_empty());
    out
}

#[test]
fn no_import_runs_back_up_the_pipeline() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut violations = Vec::new();
    for file in &files {
        let rel = file.strip_prefix(&src).unwrap();
        let first = rel.components().next().unwrap().as_os_str().to_str().unwrap();
        // The crate root declares every module; the binaries sit on top of everything.
        if first == "lib.rs" || first == "main.rs" || first == "bin" {
            continue;
        }
        let module = first.trim_end_matches(".rs");
        let Some(own) = floor(module) else {
            violations.push(format!("{}: module `{module}` has no floor in FLOORS", rel.display()));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for (line, used) in crate_paths(&text) {
            if used == module {
                continue;
            }
            match floor(&used) {
                Some(f) if f < own => {}
                Some(_) => violations.push(format!(
                    "{}:{line}: `{module}` uses `crate::{used}`, which is not below it",
                    rel.display()
                )),
                None => violations.push(format!(
                    "{}:{line}: `crate::{used}` is not a module listed in FLOORS",
                    rel.display()
                )),
            }
        }
    }
    assert!(violations.is_empty(), "imports against the layering:\n{}", violations.join("\n"));
}

#[test]
fn the_checker_sees_plain_grouped_and_nested_paths() {
    let text = "use crate::addr::Vaddr;\nuse crate::{\n    llvm,\n    binary::{Binary, CodeView},\n};\n\
                // crate::writer in a comment\nlet x = crate::profile::Profile::default();\n\
                fn f() { foo_crate::x(); }";
    let found = crate_paths(text);
    let names: Vec<(usize, &str)> = found.iter().map(|(l, n)| (*l, n.as_str())).collect();
    assert_eq!(names, [(1, "addr"), (2, "llvm"), (2, "binary"), (7, "profile")]);
}
