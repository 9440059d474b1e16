//! Optuna 5.0's RDB schema, and recognising the files hpo may write to.
//!
//! The DDL below is copied verbatim from the `sqlite3 .schema` output of a
//! database written by Optuna 5.0.0 (schema version 12, alembic revision
//! `v3.2.0.a`), so `optuna.load_study` and `optuna-dashboard` accept files
//! created by hpo, and hpo resumes files created by Optuna.
//!
//! Before anything is written, [`inspect`] classifies a file as new (no
//! schema object at all), an Optuna study database of a supported version
//! holding nothing but Optuna's tables and indexes, or something hpo must not
//! touch: each of the latter is a clear error naming the file. [`quick_check`]
//! then refuses a damaged file.

use crate::error::{Error, Result};
use rusqlite::{Connection, OptionalExtension};
use std::path::Path;
use std::time::Duration;

use crate::storage::codec::REQUIRED_TABLES;
pub(crate) use crate::storage::codec::{ALEMBIC_VERSION, LIBRARY_VERSION, SCHEMA_VERSION};

/// Optuna 5.0.0's DDL, table by table, as SQLite stores it.
pub(crate) const DDL: &str = include_str!("schema.sql");

/// What a database file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// No tables yet: hpo creates the schema.
    Empty,
    /// An Optuna (or hpo) study database of the supported schema version.
    Study {
        /// Whether `trial_heartbeats` exists (it does from schema version 7 on).
        has_heartbeats: bool,
    },
}

/// Indexes Optuna 5.0 creates by name (the others are SQLite's automatic
/// `sqlite_autoindex_<table>_<n>` indexes of UNIQUE constraints).
const NAMED_INDEXES: [&str; 2] = ["ix_studies_study_name", "ix_trials_study_id"];

fn unusable(path: &Path, reason: impl Into<String>) -> Error {
    Error::UnusableStorageFile {
        path: path.to_path_buf(),
        reason: reason.into(),
        source: None,
    }
}

/// [`unusable`], keeping what the operating system or SQLite said as the source.
pub(crate) fn unusable_caused(
    path: &Path,
    reason: impl Into<String>,
    source: impl std::error::Error + Send + Sync + 'static,
) -> Error {
    Error::UnusableStorageFile {
        path: path.to_path_buf(),
        reason: reason.into(),
        source: Some(Box::new(source)),
    }
}

/// What the 100-byte header of an existing database file says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    /// The file is in WAL mode (format versions 2 at offsets 18 and 19).
    pub(crate) wal: bool,
}

/// Checks the first bytes of an existing file: a SQLite database starts
/// with `SQLite format 3\0`. `None` for an empty file.
pub(crate) fn check_header(path: &Path) -> Result<Option<Header>> {
    use std::io::Read;
    let mut f =
        std::fs::File::open(path).map_err(|e| unusable_caused(path, "cannot be opened", e))?;
    let mut header = [0u8; 100];
    let mut n = 0;
    while n < header.len() {
        match f.read(&mut header[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(unusable_caused(path, "cannot be read", e)),
        }
    }
    if n == 0 {
        return Ok(None);
    }
    if n < 100 || &header[..16] != b"SQLite format 3\0" {
        return Err(unusable(
            path,
            "is not a SQLite database (its header is not `SQLite format 3`); \
             point the storage at a new file or an Optuna/hpo study database",
        ));
    }
    Ok(Some(Header {
        wal: header[18] == 2 && header[19] == 2,
    }))
}

/// The error for a failed statement while classifying a file: a lock held by
/// another process is named as such; anything else means the file cannot be
/// read as SQLite.
pub(crate) fn read_error(path: &Path, busy_timeout: Duration, e: rusqlite::Error) -> Error {
    if is_busy(&e) {
        return Error::StorageLocked {
            path: path.to_path_buf(),
            timeout: busy_timeout,
            source: Box::new(e),
        };
    }
    if matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::CannotOpen) | Some(rusqlite::ErrorCode::ReadOnly)
    ) {
        return unusable_caused(
            path,
            "cannot be opened for writing: is it on a read-only file system or in a \
             read-only directory? Open it read-only (`?mode=ro`) to read it",
            e,
        );
    }
    unusable_caused(path, "cannot be read as a SQLite database", e)
}

/// Classifies an open database without writing to it.
///
/// Empty means no schema object at all. A study database holds Optuna 5.0's
/// tables and indexes and nothing else (SQLite's own `sqlite_stat*` tables
/// aside): a view, a trigger, another index or another program's table
/// means the file is someone else's, and it is refused.
pub(crate) fn inspect(conn: &Connection, path: &Path, busy_timeout: Duration) -> Result<FileKind> {
    let sql_err = |e: rusqlite::Error| read_error(path, busy_timeout, e);
    let mut stmt = conn
        .prepare("SELECT type, name, tbl_name FROM sqlite_master ORDER BY rowid")
        .map_err(sql_err)?;
    let objects: Vec<(String, String, String)> = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .map_err(sql_err)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql_err)?;
    if objects.is_empty() {
        return Ok(FileKind::Empty);
    }
    let ours = |t: &str| REQUIRED_TABLES.contains(&t) || t == "trial_heartbeats";
    let foreign: Vec<String> = objects
        .iter()
        .filter(|(kind, name, table)| match kind.as_str() {
            "table" => !(ours(name) || name.starts_with("sqlite_stat")),
            "index" => {
                !(NAMED_INDEXES.contains(&name.as_str())
                    || (name.starts_with("sqlite_autoindex_") && ours(table)))
            }
            _ => true,
        })
        .map(|(kind, name, _)| format!("{kind} `{name}`"))
        .collect();
    let tables: Vec<&str> = objects
        .iter()
        .filter(|(kind, ..)| kind == "table")
        .map(|(_, name, _)| name.as_str())
        .collect();
    let missing: Vec<&str> = REQUIRED_TABLES
        .iter()
        .copied()
        .filter(|t| !tables.contains(t))
        .collect();
    if !missing.is_empty() || !foreign.is_empty() {
        let mut what = Vec::new();
        if !foreign.is_empty() {
            let shown = foreign.len().min(5);
            what.push(format!(
                "holds {}{}",
                foreign[..shown].join(", "),
                if foreign.len() > shown {
                    format!(" and {} more objects", foreign.len() - shown)
                } else {
                    String::new()
                }
            ));
        }
        if !missing.is_empty() {
            what.push(format!("lacks the tables {}", missing.join(", ")));
        }
        return Err(unusable(
            path,
            format!(
                "is a SQLite database but not an Optuna/hpo study database (it {}); \
                 hpo will not write to it: point the storage at a new file",
                what.join(" and ")
            ),
        ));
    }
    let version: Option<i64> = conn
        .query_row(
            "SELECT schema_version FROM version_info WHERE version_info_id = 1",
            [],
            |r| r.get(0),
        )
        .optional()
        .map_err(|e| unusable_caused(path, "has no readable schema version in `version_info`", e))?
        .flatten();
    let alembic: Option<String> = conn
        .query_row("SELECT version_num FROM alembic_version", [], |r| r.get(0))
        .optional()
        .map_err(|e| unusable_caused(path, "has no readable `alembic_version`", e))?;
    let found = format!(
        "schema version {} (alembic revision {})",
        version.map_or_else(|| "none".to_owned(), |v| v.to_string()),
        alembic.as_deref().unwrap_or("none")
    );
    let supported = format!(
        "schema version {SCHEMA_VERSION} (alembic revision {ALEMBIC_VERSION}, Optuna {LIBRARY_VERSION})"
    );
    match version {
        Some(v) if v > SCHEMA_VERSION => {
            return Err(unusable(
                path,
                format!("has {found}, newer than the {supported} this hpo supports; upgrade hpo"),
            ))
        }
        Some(v) if v < SCHEMA_VERSION => {
            return Err(unusable(
                path,
                format!(
                    "has the old {found}; this hpo supports {supported}: upgrade the file with \
                     `optuna storage upgrade --storage sqlite:///<file>` first"
                ),
            ))
        }
        Some(_) if alembic.as_deref() == Some(ALEMBIC_VERSION) => {}
        _ => {
            return Err(unusable(
                path,
                format!("has {found}; this hpo supports {supported}"),
            ))
        }
    }
    Ok(FileKind::Study {
        has_heartbeats: tables.contains(&"trial_heartbeats"),
    })
}

/// SQLite's `quick_check`: every page of every table and index is read
/// and checked for consistency (but indexes are not matched against their
/// tables), so a damaged file is refused at open instead of failing at the
/// first read of a bad page mid-study. Reads the whole file, once; the cost
/// on a 100,000-trial study is measured by the storage benchmark.
pub(crate) fn quick_check(conn: &Connection, path: &Path, busy_timeout: Duration) -> Result<()> {
    let corrupt = |detail: String| {
        unusable(
            path,
            format!(
                "is damaged (SQLite's quick_check: {detail}); restore it from a backup, or \
                 salvage what is readable with `sqlite3 <file> .recover` into a new file"
            ),
        )
    };
    let rows: Vec<String> = conn
        .prepare("PRAGMA quick_check(5)")
        .and_then(|mut s| {
            s.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<_>>()
        })
        .map_err(|e| {
            if is_busy(&e) {
                read_error(path, busy_timeout, e)
            } else {
                corrupt(e.to_string())
            }
        })?;
    if rows.len() == 1 && rows[0] == "ok" {
        Ok(())
    } else {
        Err(corrupt(rows.join("; ")))
    }
}

/// SQLite's "busy" and "locked" errors: another connection holds the lock.
pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked)
    )
}

/// Creates the schema in one transaction (the caller holds it).
pub(crate) fn create(conn: &Connection) -> rusqlite::Result<()> {
    conn.execute_batch(DDL)?;
    conn.execute(
        "INSERT INTO version_info (version_info_id, schema_version, library_version) VALUES (1, ?1, ?2)",
        rusqlite::params![SCHEMA_VERSION, LIBRARY_VERSION],
    )?;
    conn.execute(
        "INSERT INTO alembic_version (version_num) VALUES (?1)",
        [ALEMBIC_VERSION],
    )?;
    Ok(())
}
