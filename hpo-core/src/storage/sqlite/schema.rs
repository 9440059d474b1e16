//! Optuna 5.0's RDB schema, and recognising the files hpo may write to.
//!
//! The DDL below is copied verbatim from the `sqlite3 .schema` output of a
//! database written by Optuna 5.0.0 (schema version 12, alembic revision
//! `v3.2.0.a`), so `optuna.load_study` and `optuna-dashboard` accept files
//! created by hpo, and hpo resumes files created by Optuna.
//!
//! Before anything is written, [`inspect`] classifies a file as new (no
//! tables), an Optuna study database of a supported version, or something hpo
//! must not touch: each of the latter is a clear error naming the file.

use crate::error::{Error, Result};
use rusqlite::Connection;
use std::path::Path;

pub(crate) use crate::storage::codec::{ALEMBIC_VERSION, LIBRARY_VERSION, SCHEMA_VERSION};
use crate::storage::codec::REQUIRED_TABLES;

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

fn unusable(path: &Path, reason: impl Into<String>) -> Error {
    Error::UnusableStorageFile {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

/// Checks the first bytes of an existing, non-empty file: a SQLite database
/// starts with `SQLite format 3\0`.
pub(crate) fn check_header(path: &Path) -> Result<()> {
    use std::io::Read;
    let mut f =
        std::fs::File::open(path).map_err(|e| unusable(path, format!("cannot be opened: {e}")))?;
    let mut header = [0u8; 16];
    let n = f
        .read(&mut header)
        .map_err(|e| unusable(path, format!("cannot be read: {e}")))?;
    if n == 0 {
        return Ok(());
    }
    if n < 16 || &header != b"SQLite format 3\0" {
        return Err(unusable(
            path,
            "is not a SQLite database (its header is not `SQLite format 3`); \
             point the storage at a new file or an Optuna/hpo study database",
        ));
    }
    Ok(())
}

/// Classifies an open database without writing to it.
pub(crate) fn inspect(conn: &Connection, path: &Path) -> Result<FileKind> {
    let sql_err =
        |e: rusqlite::Error| unusable(path, format!("cannot be read as a SQLite database: {e}"));
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .map_err(sql_err)?;
    let tables: Vec<String> = stmt
        .query_map([], |r| r.get::<_, String>(0))
        .map_err(sql_err)?
        .collect::<rusqlite::Result<_>>()
        .map_err(sql_err)?;
    if tables.is_empty() {
        return Ok(FileKind::Empty);
    }
    let missing: Vec<&str> = REQUIRED_TABLES
        .iter()
        .copied()
        .filter(|t| !tables.iter().any(|have| have == t))
        .collect();
    if !missing.is_empty() {
        return Err(unusable(
            path,
            format!(
                "is a SQLite database but not an Optuna/hpo study database (missing tables: {}); \
                 hpo will not write to it",
                missing.join(", ")
            ),
        ));
    }
    let version: Option<i64> = conn
        .query_row(
            "SELECT schema_version FROM version_info WHERE version_info_id = 1",
            [],
            |r| r.get(0),
        )
        .map_err(|e| {
            unusable(
                path,
                format!("has no readable schema version in `version_info`: {e}"),
            )
        })?;
    let alembic: Option<String> = conn
        .query_row("SELECT version_num FROM alembic_version", [], |r| r.get(0))
        .map_err(|e| unusable(path, format!("has no readable `alembic_version`: {e}")))?;
    match version {
        Some(v) if v > SCHEMA_VERSION => {
            return Err(unusable(
                path,
                format!(
                    "has schema version {v} (alembic {}), newer than the version {SCHEMA_VERSION} \
                     (Optuna {LIBRARY_VERSION}) this hpo supports; upgrade hpo",
                    alembic.as_deref().unwrap_or("?")
                ),
            ))
        }
        Some(v) if v < SCHEMA_VERSION => {
            return Err(unusable(
                path,
                format!(
                    "has the old schema version {v} (alembic {}); upgrade it with \
                     `optuna storage upgrade --storage sqlite:///<file>` first",
                    alembic.as_deref().unwrap_or("?")
                ),
            ))
        }
        Some(_) => {}
        None => return Err(unusable(path, "has an empty `version_info` table")),
    }
    if alembic.as_deref() != Some(ALEMBIC_VERSION) {
        return Err(unusable(
            path,
            format!(
                "has alembic revision {:?}, expected `{ALEMBIC_VERSION}` for schema version {SCHEMA_VERSION}",
                alembic
            ),
        ));
    }
    Ok(FileKind::Study {
        has_heartbeats: tables.iter().any(|t| t == "trial_heartbeats"),
    })
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
