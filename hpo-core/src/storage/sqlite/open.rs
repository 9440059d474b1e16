//! Opening a database: checks before the first write, pragmas, the schema of a new file.

use super::connection::{Counters, Inner};
use super::options::SqliteOptions;
use super::{schema, SqliteStorage};
use crate::error::{Error, Result};
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

impl SqliteStorage {
    /// Opens (creating if needed) the study database at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens the study database at `path`.
    ///
    /// A missing or empty file gets Optuna's schema in one transaction; an
    /// Optuna study database (schema version 12) is used as it is. A file
    /// that is not SQLite, a SQLite file that is not a study database, a newer
    /// or older schema, or a read-only file is an [`Error::UnusableStorageFile`],
    /// and nothing is written to it.
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let unusable = |reason: String| Error::UnusableStorageFile {
            path: path.clone(),
            reason,
        };
        match std::fs::metadata(&path) {
            Ok(meta) => {
                if meta.is_dir() {
                    return Err(unusable(
                        "is a directory; give the path of a database file".into(),
                    ));
                }
                schema::check_header(&path)?;
                if meta.permissions().readonly() {
                    return Err(unusable(
                        "is read-only; hpo writes trials to its storage, so make the file writable \
                         or copy it"
                            .into(),
                    ));
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(unusable(format!("cannot be inspected: {e}"))),
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags)
            .map_err(|e| unusable(format!("cannot be opened: {e}")))?;
        Self::setup(conn, Some(path), &options)
    }

    /// A private in-memory database (`sqlite::memory:`), gone when dropped.
    pub fn in_memory() -> Result<Self> {
        let conn = Connection::open_in_memory()
            .map_err(|e| Error::storage(format!("cannot open in-memory SQLite: {e}")))?;
        Self::setup(conn, None, &SqliteOptions::default())
    }

    fn setup(
        #[allow(unused_mut)] mut conn: Connection,
        path: Option<PathBuf>,
        options: &SqliteOptions,
    ) -> Result<Self> {
        let shown = path.clone().unwrap_or_else(|| PathBuf::from(":memory:"));
        let sql_err = |e: rusqlite::Error| Error::Storage {
            path: Some(shown.clone()),
            message: e.to_string(),
        };
        conn.busy_timeout(options.busy_timeout).map_err(sql_err)?;
        #[cfg(feature = "testing")]
        super::crash::arm(&mut conn).map_err(sql_err)?;
        // Classify before writing anything (the WAL pragma writes the header).
        let kind = schema::inspect(&conn, &shown)?;
        if path.is_some() {
            let mode: String = conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(|e| Error::UnusableStorageFile {
                    path: shown.clone(),
                    reason: format!(
                        "cannot be switched to WAL mode (is it or its directory read-only?): {e}"
                    ),
                })?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(Error::UnusableStorageFile {
                    path: shown.clone(),
                    reason: format!("stays in journal mode `{mode}` instead of WAL"),
                });
            }
        }
        let sync = if options.synchronous_full {
            "FULL"
        } else {
            "NORMAL"
        };
        conn.execute_batch(&format!("PRAGMA synchronous = {sync};"))
            .map_err(sql_err)?;
        let storage = SqliteStorage {
            path,
            inner: Mutex::new(Inner {
                conn,
                counters: Counters::default(),
                caches: HashMap::new(),
                owned: HashMap::new(),
                claim_from: HashMap::new(),
            }),
        };
        if kind == schema::FileKind::Empty {
            storage.op(|db| {
                db.write_txn(|conn, _| {
                    // Another process may have created it since we looked.
                    let tables: i64 = conn.query_row(
                        "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'studies'",
                        [],
                        |r| r.get(0),
                    )?;
                    if tables == 0 {
                        schema::create(conn)?;
                    }
                    Ok(())
                })
            })?;
            // Validate what is there now (ours or the other process's).
            let g = storage.lock()?;
            schema::inspect(&g.conn, &shown)?;
        }
        Ok(storage)
    }
}
