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
    refused(
        &p,
        "has schema version 13 (alembic revision v3.2.0.a), newer than the schema version 12",
    );
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

#[test]
fn a_database_with_only_a_view_is_not_empty() {
    let d = dir("view");
    let p = d.join("view.db");
    let c = Connection::open(&p).unwrap();
    c.execute_batch("CREATE VIEW answer AS SELECT 42 AS x;")
        .unwrap();
    drop(c);
    let msg = refused(&p, "view `answer`");
    assert!(msg.contains("not an Optuna/hpo study database"), "{msg}");
    std::fs::remove_dir_all(&d).unwrap();
}

/// A study database to which another program added `extra` (DELETE journal
/// mode, so the file alone holds it).
fn study_db_with(d: &Path, tag: &str, extra: &str) -> PathBuf {
    let p = d.join(format!("{tag}.db"));
    SqliteStorage::open(&p).unwrap();
    let c = Connection::open(&p).unwrap();
    c.execute_batch(&format!("PRAGMA journal_mode = DELETE; {extra}"))
        .unwrap();
    drop(c);
    p
}

#[test]
fn a_study_database_with_foreign_objects() {
    let d = dir("foreign");
    for (tag, extra, needle) in [
        (
            "index",
            "CREATE INDEX my_index ON trials (state);",
            "index `my_index`",
        ),
        (
            "trigger",
            "CREATE TRIGGER t AFTER INSERT ON trials BEGIN SELECT 1; END;",
            "trigger `t`",
        ),
        (
            "view",
            "CREATE VIEW best AS SELECT * FROM trial_values;",
            "view `best`",
        ),
        (
            "table",
            "CREATE TABLE app_settings (k TEXT);",
            "table `app_settings`",
        ),
    ] {
        let p = study_db_with(&d, tag, extra);
        refused(&p, needle);
        // Read-only mode refuses it too.
        let err = SqliteStorage::open_read_only(&p).unwrap_err().to_string();
        assert!(err.contains(needle), "{err}");
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn unsupported_schema_versions_are_printed_plainly() {
    let d = dir("versions");
    let p = study_db_with_version(&d, 11);
    let c = Connection::open(&p).unwrap();
    c.execute_batch("UPDATE alembic_version SET version_num = 'v9.9.9.a';")
        .unwrap();
    drop(c);
    let msg = refused(
        &p,
        "has the old schema version 11 (alembic revision v9.9.9.a)",
    );
    assert!(
        msg.contains("supports schema version 12 (alembic revision v3.2.0.a, Optuna 5.0.0)"),
        "{msg}"
    );
    assert!(!msg.contains("Some("), "no debug strings: {msg}");
    // The right version with a foreign alembic revision.
    let p = study_db_with_version(&d, 12);
    let c = Connection::open(&p).unwrap();
    c.execute_batch("UPDATE alembic_version SET version_num = 'v9.9.9.a';")
        .unwrap();
    drop(c);
    let msg = refused(&p, "has schema version 12 (alembic revision v9.9.9.a)");
    assert!(!msg.contains("Some("), "no debug strings: {msg}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_damaged_file_is_refused_at_open() {
    use hpo_core::{Direction, Storage, TrialState};
    let d = dir("corrupt");
    let p = d.join("damaged.db");
    {
        let s = SqliteStorage::open(&p).unwrap();
        let id = s.create_study("s", &[Direction::Minimize]).unwrap();
        for i in 0..2000 {
            let t = s.create_trial(id, None).unwrap();
            s.set_trial_user_attr(t.id, "note", &serde_json::json!(format!("trial {i}")))
                .unwrap();
            s.finish_trial(t.id, TrialState::Complete, Some(&[f64::from(i)]), &[])
                .unwrap();
        }
    }
    let c = Connection::open(&p).unwrap();
    c.execute_batch("PRAGMA journal_mode = DELETE;").unwrap();
    let pages: i64 = c.query_row("PRAGMA page_count", [], |r| r.get(0)).unwrap();
    let size: i64 = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
    drop(c);
    // Scribble over a page in the middle of the file.
    let mut bytes = std::fs::read(&p).unwrap();
    let start = (pages / 2 * size) as usize;
    bytes[start..start + size as usize].fill(0x55);
    std::fs::write(&p, &bytes).unwrap();
    let msg = refused(&p, "is damaged (SQLite's quick_check");
    assert!(msg.contains(".recover"), "says what to do: {msg}");
    let err = SqliteStorage::open_read_only(&p).unwrap_err().to_string();
    assert!(err.contains("is damaged"), "{err}");
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_locked_database_is_reported_as_locked_with_the_timeout() {
    use hpo_core::storage::SqliteOptions;
    use std::time::Duration;
    let d = dir("locked");
    let p = study_db_with_version(&d, 12);
    let holder = Connection::open(&p).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE;").unwrap();
    let before = std::fs::read(&p).unwrap();
    let options = SqliteOptions::default().busy_timeout(Duration::from_millis(200));
    for read_only in [false, true] {
        let err = SqliteStorage::open_with(&p, options.clone().read_only(read_only)).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, Error::StorageLocked { .. }), "{msg}");
        assert!(msg.contains("locked by another process"), "{msg}");
        assert!(msg.contains("busy timeout of 200ms"), "{msg}");
        assert!(
            !msg.contains("cannot be read as a SQLite database"),
            "{msg}"
        );
        assert!(
            std::error::Error::source(&err).is_some(),
            "keeps SQLite's error"
        );
    }
    holder.execute_batch("ROLLBACK;").unwrap();
    drop(holder);
    assert_eq!(std::fs::read(&p).unwrap(), before);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_lock_held_past_every_retry_is_named_with_the_timeout() {
    use hpo_core::storage::SqliteOptions;
    use hpo_core::{Direction, Storage};
    use std::time::Duration;
    let d = dir("held");
    let p = d.join("s.db");
    let options = SqliteOptions::default().busy_timeout(Duration::from_millis(10));
    let s = SqliteStorage::open_with(&p, options).unwrap();
    // Another program holds the write lock (hpo's own writes take it for
    // microseconds; this one never lets go).
    let holder = Connection::open(&p).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE;").unwrap();
    let err = s.create_study("s", &[Direction::Minimize]).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::StorageLocked { .. }), "{msg}");
    assert!(msg.contains("locked by another process"), "{msg}");
    assert!(msg.contains("busy timeout of 10ms"), "{msg}");
    assert!(s.stats().busy_retries >= 20, "retried before giving up");
    holder.execute_batch("ROLLBACK;").unwrap();
    // Once the lock is released the same handle works.
    s.create_study("s", &[Direction::Minimize]).unwrap();
    drop(holder);
    drop(s);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn a_refusal_keeps_what_the_system_said_as_its_source() {
    let d = dir("nodir");
    let p = d.join("no-such-directory").join("study.db");
    let err = SqliteStorage::open(&p).unwrap_err();
    assert!(matches!(err, Error::UnusableStorageFile { .. }), "{err}");
    let source = std::error::Error::source(&err).expect("the cause is kept as the source");
    assert!(
        !err.to_string().contains(&source.to_string()),
        "the cause is not also flattened into the message: {err}"
    );
    assert!(!p.exists(), "nothing was created");
    std::fs::remove_dir_all(&d).unwrap();
}
