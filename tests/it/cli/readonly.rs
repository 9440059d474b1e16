//! Reading a study never changes its file.

use super::fixture::*;
use std::path::Path;

/// Every read-only invocation on `study` in `db`.
fn read_only_runs(db: &Path, study: &str) {
    let u = url(db);
    let dir = db.parent().unwrap();
    let svg = dir.join("p.svg");
    let html = dir.join("r.html");
    let svg = svg.to_str().unwrap();
    ok(&["studies", &u]);
    ok(&["trials", &u, study]);
    ok(&["trials", &u, study, "--format", "json", "--sort", "value"]);
    let _ = hpo().args(["best", &u, study]).output().unwrap();
    ok(&["watch", &u, study, "--once"]);
    ok(&["export", &u, study, "--format", "csv"]);
    ok(&["importance", &u, study]);
    for kind in [
        "history",
        "slice",
        "parallel-coordinate",
        "importance",
        "intermediate",
        "timeline",
        "memory",
    ] {
        // Plots without data fail; the file must stay untouched either way.
        let _ = hpo()
            .args(["plot", &u, study, kind, "-o", svg])
            .output()
            .unwrap();
    }
    ok(&["report", &u, study, "-o", html.to_str().unwrap()]);
    let _ = fails(&["trials", &u, "no such study"], 1);
}

fn snapshot(db: &Path) -> Vec<(String, Vec<u8>)> {
    let dir = db.parent().unwrap();
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_str()
                .unwrap()
                .starts_with(db.file_name().unwrap().to_str().unwrap())
        })
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn hpo_written_file_is_byte_identical_after_every_read() {
    let db = copy_of(hpo_db(), "ro-hpo");
    let before = snapshot(&db);
    read_only_runs(&db, HPO_STUDY);
    read_only_runs(&db, PARETO_STUDY);
    let after = snapshot(&db);
    assert_eq!(
        before.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        after.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        "files appeared or vanished next to the database"
    );
    assert!(before == after, "the study database changed");
}

#[test]
fn optuna_written_study_content_is_unchanged_after_every_read() {
    let db = copy_of(&optuna_db(), "ro-optuna-content");
    let export = || ok(&["export", &url(&db), OPTUNA_STUDY]);
    let before = export();
    read_only_runs(&db, OPTUNA_STUDY);
    assert_eq!(export(), before);
}

#[test]
fn optuna_written_file_is_byte_identical_after_every_read() {
    // Optuna 5.0 leaves its SQLite files in WAL mode, as hpo does.
    let db = copy_of(&optuna_db(), "ro-optuna");
    let before = snapshot(&db);
    read_only_runs(&db, OPTUNA_STUDY);
    let after = snapshot(&db);
    assert!(before == after, "the Optuna study database changed");
}

/// A study file in rollback-journal mode (Optuna's own reference file, older
/// Optuna versions, `PRAGMA journal_mode = DELETE`) stays byte-identical: a
/// writer would switch it to WAL (header bytes 18-19), the read-only mode
/// never does.
#[test]
fn rollback_journal_file_is_byte_identical_after_every_read() {
    let db = copy_of(&optuna_db(), "ro-delete");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        let mode: String = c
            .query_row("PRAGMA journal_mode = DELETE", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "delete");
    }
    let before = snapshot(&db);
    read_only_runs(&db, OPTUNA_STUDY);
    let after = snapshot(&db);
    assert!(
        before == after,
        "the rollback-journal study database changed"
    );
}
