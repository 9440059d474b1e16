//! Files hpo must refuse, each with an error naming the file and the problem,
//! and left byte for byte as they were.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).

use hpo_core::storage::SqliteStorage;
use hpo_core::Error;
use rusqlite::Connection;
use std::path::{Path, PathBuf};

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hpo-bad-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Opens `path`, expects a refusal mentioning `needle`, and checks the file is unchanged.
fn refused(path: &Path, needle: &str) -> String {
    let before = std::fs::read(path).unwrap();
    let err = SqliteStorage::open(path).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::UnusableStorageFile { .. }), "{msg}");
    assert!(
        msg.contains(&path.display().to_string()),
        "names the file: {msg}"
    );
    assert!(msg.contains(needle), "says `{needle}`: {msg}");
    assert_eq!(
        std::fs::read(path).unwrap(),
        before,
        "the file was modified"
    );
    assert!(
        !path.with_extension("db-wal").exists(),
        "a WAL file was created"
    );
    msg
}

#[test]
fn a_file_that_is_not_sqlite() {
    let d = dir("text");
    let p = d.join("notes.db");
    std::fs::write(&p, "these are my notes, not a database\n".repeat(10)).unwrap();
    refused(&p, "is not a SQLite database");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_sqlite_file_that_is_not_a_study_database() {
    let d = dir("other");
    let p = d.join("app.db");
    let c = Connection::open(&p).unwrap();
    c.execute_batch("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users VALUES (1, 'a');")
        .unwrap();
    drop(c);
    refused(&p, "not an Optuna/hpo study database");
    std::fs::remove_dir_all(&d).unwrap();
}

fn study_db_with_version(d: &Path, version: i64) -> PathBuf {
    let p = d.join(format!("v{version}.db"));
    SqliteStorage::open(&p).unwrap();
    let c = Connection::open(&p).unwrap();
    // Leave rollback-journal mode so the file alone holds the database.
    c.execute_batch(&format!(
        "PRAGMA journal_mode = DELETE; UPDATE version_info SET schema_version = {version};"
    ))
    .unwrap();
    drop(c);
    p
}

#[test]
fn a_newer_schema_version() {
    let d = dir("newer");
    let p = study_db_with_version(&d, 13);
    refused(&p, "has schema version 13 (alembic revision v3.2.0.a), newer than the schema version 12");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_older_schema_version() {
    let d = dir("older");
    let p = study_db_with_version(&d, 11);
    refused(&p, "optuna storage upgrade");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_read_only_file() {
    let d = dir("ro");
    let p = study_db_with_version(&d, 12);
    let mut perms = std::fs::metadata(&p).unwrap().permissions();
    perms.set_readonly(true);
    std::fs::set_permissions(&p, perms.clone()).unwrap();
    refused(&p, "read-only");
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&p, perms).unwrap();
    // Once writable it opens.
    SqliteStorage::open(&p).unwrap();
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_directory_and_an_empty_file() {
    let d = dir("dir");
    let err = SqliteStorage::open(&d).unwrap_err().to_string();
    assert!(err.contains("is a directory"), "{err}");
    // An empty file holds nothing to lose: it becomes a study database.
    let p = d.join("empty.db");
    std::fs::write(&p, b"").unwrap();
    SqliteStorage::open(&p).unwrap();
    SqliteStorage::open(&p).unwrap();
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn study_lookups_fail_clearly() {
    use hpo_core::{Direction, Study};
    use std::sync::Arc;
    let d = dir("lookup");
    let storage = Arc::new(SqliteStorage::open(d.join("s.db")).unwrap());
    let err = Study::builder()
        .name("missing")
        .storage(storage.clone())
        .load()
        .unwrap_err();
    assert!(
        matches!(err, Error::StudyNotFound(ref n) if n == "missing"),
        "{err}"
    );
    Study::builder()
        .name("taken")
        .storage(storage.clone())
        .build()
        .unwrap();
    let err = Study::builder()
        .name("taken")
        .storage(storage.clone())
        .build()
        .unwrap_err();
    assert!(
        matches!(err, Error::StudyExists(ref n) if n == "taken"),
        "{err}"
    );
    let err = Study::builder()
        .name("taken")
        .storage(storage)
        .direction(Direction::Maximize)
        .load_if_exists(true)
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::DirectionMismatch { .. }), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}
