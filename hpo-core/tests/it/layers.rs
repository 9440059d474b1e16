//! The layers of hpo-core point one way (the book's architecture page draws
//! them): `study/` and `space/` sit on top of `sampler/`, `pruner/` and
//! `storage/`, which sit on `view`, `trial/`, `direction` and
//! `distribution/`; `executor/` and `artifact/` sit on top of `study/`;
//! `signals` sits at the bottom, beside `error.rs`. This test reads the
//! sources and fails when a lower module imports a higher one, so the
//! diagram stays true.

use std::path::{Path, PathBuf};

/// Top-level modules (file or folder under `src/`) and the modules each may
/// not name, directly (`crate::study`) or through a crate-root re-export.
const RULES: &[(&str, &[&str])] = &[
    (
        "distribution",
        &[
            "direction",
            "trial",
            "view",
            "sampler",
            "pruner",
            "storage",
            "study",
            "space",
            "artifact",
        ],
    ),
    (
        "direction",
        &[
            "distribution",
            "trial",
            "view",
            "sampler",
            "pruner",
            "storage",
            "study",
            "space",
            "artifact",
        ],
    ),
    (
        "trial",
        &[
            "view", "sampler", "pruner", "storage", "study", "space", "artifact",
        ],
    ),
    (
        "view",
        &["sampler", "pruner", "storage", "study", "space", "artifact"],
    ),
    (
        "sampler",
        &["pruner", "storage", "study", "space", "artifact"],
    ),
    (
        "pruner",
        &["sampler", "storage", "study", "space", "artifact"],
    ),
    (
        "storage",
        &["sampler", "pruner", "study", "space", "artifact"],
    ),
    ("study", &["space", "executor", "artifact"]),
    // Beside `error.rs` at the bottom: the handlers' state, read by the
    // study's loops and the executor.
    (
        "signals",
        &[
            "distribution",
            "direction",
            "trial",
            "view",
            "sampler",
            "pruner",
            "storage",
            "study",
            "space",
            "artifact",
            "executor",
        ],
    ),
];

/// Crate-root re-exports, by the module that defines them (a lower module
/// writing `crate::Study` imports `study/` just the same).
const ROOT_NAMES: &[(&str, &[&str])] = &[
    (
        "study",
        &[
            "Study",
            "StudyBuilder",
            "Optimize",
            "Trial",
            "Heartbeat",
            "RetryPolicy",
        ],
    ),
    (
        "space",
        &[
            "SearchSpace",
            "ChoiceEnum",
            "SpaceDescription",
            "ParamDescription",
            "ParamKind",
        ],
    ),
    (
        "sampler",
        &[
            "Sampler",
            "RandomSampler",
            "GridSampler",
            "TpeSampler",
            "TpeConfig",
        ],
    ),
    (
        "pruner",
        &["Pruner", "MedianPruner", "PrunerConfig", "Decision"],
    ),
    (
        "storage",
        &[
            "Storage",
            "SqliteStorage",
            "InMemoryStorage",
            "StudySummary",
        ],
    ),
    ("view", &["StudyView"]),
    (
        "artifact",
        &[
            "ArtifactStore",
            "ArtifactMeta",
            "KeepArtifacts",
            "CleanReport",
        ],
    ),
];

fn rust_files(path: &Path, out: &mut Vec<PathBuf>) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).unwrap() {
            rust_files(&entry.unwrap().path(), out);
        }
    } else if path.extension().is_some_and(|e| e == "rs") {
        out.push(path.to_owned());
    }
}

/// Code lines of a file: doc comments and comments may link anywhere.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim_start()))
        .filter(|(_, l)| !l.starts_with("//"))
}

/// Whether `line` names `crate::<name>` as a whole path segment, either
/// directly or inside a `crate::{...}` group.
fn names(line: &str, name: &str) -> bool {
    let segment = |rest: &str| {
        rest.strip_prefix(name)
            .is_some_and(|after| !after.starts_with(|c: char| c.is_alphanumeric() || c == '_'))
    };
    line.match_indices("crate::").any(|(i, _)| {
        let whole_word = line[..i]
            .chars()
            .next_back()
            .is_none_or(|c| !(c.is_alphanumeric() || c == '_'));
        if !whole_word {
            return false;
        }
        let rest = &line[i + "crate::".len()..];
        if segment(rest) {
            return true;
        }
        // `crate::{a, b::c, Name}`: look inside the group.
        rest.strip_prefix('{')
            .is_some_and(|group| group.split(['}', ',']).map(str::trim).any(&segment))
    })
}

#[test]
fn lower_layers_never_import_higher_ones() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut broken = Vec::new();
    for (module, forbidden) in RULES {
        let mut files = Vec::new();
        let dir = src.join(module);
        if dir.is_dir() {
            rust_files(&dir, &mut files);
        } else {
            files.push(src.join(format!("{module}.rs")));
        }
        assert!(
            !files.is_empty() && files[0].exists(),
            "no sources for `{module}`"
        );
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in code_lines(&text) {
                for higher in *forbidden {
                    let mut hit = names(line, higher);
                    if let Some((_, roots)) = ROOT_NAMES.iter().find(|(m, _)| m == higher) {
                        hit |= roots.iter().any(|r| names(line, r));
                    }
                    if hit {
                        broken.push(format!(
                            "{}:{n}: `{module}` must not import `{higher}`: {line}",
                            file.strip_prefix(&src).unwrap().display()
                        ));
                    }
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "layer violations:\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_checker_sees_direct_grouped_and_root_imports() {
    assert!(names("use crate::study::Study;", "study"));
    assert!(names("use crate::{distribution::X, study};", "study"));
    assert!(names("    let s: crate::Study = x;", "Study"));
    assert!(!names("use crate::study_helpers::X;", "study"));
    assert!(!names("use crate::StudyView;", "Study"));
    assert!(!names("use other_crate::study::X;", "study"));
}
