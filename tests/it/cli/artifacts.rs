//! `hpo copy` carries a study's artifacts (the files its trials stored).

use super::fixture::*;
use hpo::artifact::{ArtifactMeta, ArtifactStore};
use hpo::{Study, Trial, TrialError};
use std::path::Path;

const STUDY: &str = "with files";

/// A SQLite study of three trials, each storing `m.txt` in the store
/// beside the file; the file of trial 1 is then removed (as cleanup would).
fn study_with_artifacts(db: &Path) -> Study {
    let u = url(db);
    let study = Study::builder()
        .name(STUDY)
        .storage_url(&u)
        .build()
        .unwrap();
    let store = ArtifactStore::beside(&u).unwrap();
    study
        .optimize(3, |t: &mut Trial| -> Result<f64, TrialError> {
            store.upload_bytes(t, "m.txt", format!("trial {}", t.number()).as_bytes())?;
            Ok(t.number() as f64)
        })
        .unwrap();
    let t1 = &study.trials().unwrap()[1];
    std::fs::remove_file(store.path(t1, "m.txt").unwrap()).unwrap();
    study
}

fn files(dir: &Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |d| d.count())
}

#[test]
fn copy_carries_the_artifacts_to_the_store_beside_the_destination() {
    let dir = tempdir("copy-artifacts");
    let src = dir.join("src.db");
    study_with_artifacts(&src);
    let dst = dir.join("dst.db");
    let out = ok(&["copy", &url(&src), &url(&dst), STUDY]);
    assert!(out.contains("3 trials"), "{out}");
    assert!(out.contains("2 artifact files (14 bytes)"), "{out}");
    assert!(
        out.contains("1 registered files were not in the source store"),
        "{out}"
    );
    let copied = Study::builder()
        .name(STUDY)
        .storage_url(url(&dst))
        .load()
        .unwrap();
    let store = ArtifactStore::beside(&url(&dst)).unwrap();
    assert_eq!(store.root(), dir.join("dst.db.artifacts"));
    let trials = copied.trials().unwrap();
    assert_eq!(store.read(&trials[2], "m.txt").unwrap(), b"trial 2");
    assert!(store.read(&trials[1], "m.txt").is_err());
    assert_eq!(files(store.root()), 2);
}

#[test]
fn copy_artifacts_to_and_from_explicit_folders() {
    let dir = tempdir("copy-artifacts-explicit");
    let src = dir.join("src.db");
    study_with_artifacts(&src);
    // Move the source store elsewhere: the default finds nothing.
    let elsewhere = dir.join("moved");
    std::fs::rename(dir.join("src.db.artifacts"), &elsewhere).unwrap();
    let out = ok(&["copy", &url(&src), &url(&dir.join("a.db")), STUDY]);
    assert!(out.contains("has no artifact store beside it"), "{out}");
    assert!(out.contains("--artifacts-from"), "{out}");
    assert!(!dir.join("a.db.artifacts").exists());
    // Named explicitly, on both sides (one as a file:// URL).
    let into = dir.join("shared");
    let to = format!("file://{}", into.display());
    let out = ok(&[
        "copy",
        &url(&src),
        &url(&dir.join("b.db")),
        STUDY,
        "--artifacts-from",
        elsewhere.to_str().unwrap(),
        "--artifacts-to",
        &to,
    ]);
    assert!(out.contains("2 artifact files"), "{out}");
    assert_eq!(files(&into), 2);
    assert!(!dir.join("b.db.artifacts").exists());
    // A source folder that does not exist is refused before anything is written.
    let err = fails(
        &[
            "copy",
            &url(&src),
            &url(&dir.join("c.db")),
            STUDY,
            "--artifacts-from",
            dir.join("nowhere").to_str().unwrap(),
        ],
        1,
    );
    assert!(err.contains("no artifact store"), "{err}");
    assert!(!dir.join("c.db").exists());
    let err = fails(
        &[
            "copy",
            &url(&src),
            &url(&dir.join("d.db")),
            STUDY,
            "--artifacts-from",
            "s3://bucket/x",
        ],
        1,
    );
    assert!(err.contains("the `s3` scheme is not supported"), "{err}");
}

#[test]
fn copy_of_a_study_without_a_store_copies_the_study_alone() {
    let dir = tempdir("copy-no-store");
    let out = ok(&[
        "copy",
        &url(&optuna_db()),
        &url(&dir.join("copy.db")),
        OPTUNA_STUDY,
    ]);
    assert!(
        out.contains("no artifact store beside the source; copied the study alone"),
        "{out}"
    );
}

#[test]
fn copy_that_fails_on_an_artifact_leaves_no_study_and_no_file() {
    let dir = tempdir("copy-artifacts-fail");
    let src = dir.join("src.db");
    let study = study_with_artifacts(&src);
    // The destination store holds a folder where trial 2's file must go:
    // the copy of trial 0's file succeeds, then trial 2's fails.
    let t2 = &study.trials().unwrap()[2];
    let id = ArtifactMeta::find(t2, "m.txt").unwrap().artifact_id;
    let into = dir.join("dst.db.artifacts");
    std::fs::create_dir_all(into.join(&id).join("blocker")).unwrap();
    let dst = dir.join("dst.db");
    let err = fails(&["copy", &url(&src), &url(&dst), STUDY], 1);
    assert!(err.contains("cannot rename"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    // No half study, and only the folder that was there before.
    let out = ok(&["studies", &url(&dst)]);
    assert!(!out.contains(STUDY), "{out}");
    let left: Vec<_> = std::fs::read_dir(&into)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, [std::ffi::OsString::from(&id)]);
    // A destination without a folder beside it (in memory) must be named.
    let err = fails(&["copy", &url(&src), "sqlite::memory:", STUDY], 1);
    assert!(err.contains("--artifacts-to"), "{err}");
}
