//! Opening a database: checks before the first write, pragmas, the schema of
//! a new file, read-only handles, and leaving a foreign file's journal mode
//! as it was found.

use super::connection::{Counters, Inner};
use super::options::SqliteOptions;
use super::{schema, SqliteStorage};
use crate::error::{Error, Result};
use rusqlite::{Connection, OpenFlags};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Journal modes a file may be restored to (what `PRAGMA journal_mode` reports).
const JOURNAL_MODES: [&str; 5] = ["delete", "truncate", "persist", "memory", "off"];

/// The `-wal` file SQLite keeps next to a WAL-mode database while it is open.
pub(super) fn wal_file(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// A read-only connection; `immutable` for a WAL-mode file that no writer
/// has open (no `-wal`): SQLite then takes no lock and creates no `-shm`.
pub(super) fn read_only_connection(path: &Path, immutable: bool) -> Result<Connection> {
    let unusable = |reason: String| Error::UnusableStorageFile {
        path: path.to_path_buf(),
        reason,
        source: None,
    };
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    if !immutable {
        return Connection::open_with_flags(path, flags)
            .map_err(|e| schema::unusable_caused(path, "cannot be opened read-only", e));
    }
    let absolute = std::fs::canonicalize(path)
        .map_err(|e| schema::unusable_caused(path, "cannot be resolved to an absolute path", e))?;
    let mut uri = url::Url::from_file_path(&absolute).map_err(|()| {
        unusable("cannot be written as a `file:` URI for SQLite (is the path valid UTF-8?)".into())
    })?;
    uri.set_query(Some("immutable=1"));
    Connection::open_with_flags(uri.as_str(), flags | OpenFlags::SQLITE_OPEN_URI)
        .map_err(|e| schema::unusable_caused(path, "cannot be opened read-only", e))
}

impl SqliteStorage {
    /// Opens (creating if needed) the study database at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens an existing study database for reading only (`?mode=ro` in a URL).
    ///
    /// Not a byte of the file is written, on open, on read or on drop, and
    /// no `-wal` or `-shm` file is created: a file in rollback-journal mode
    /// (Optuna's default) is read under SQLite's shared lock; a WAL-mode file
    /// that no writer has open is read as an immutable file (no lock, no
    /// `-shm`), and the handle switches to an ordinary read-only connection
    /// as soon as a writer's `-wal` appears; a WAL-mode file a writer has open
    /// is read through the writer's `-wal` and `-shm`, which exist already.
    /// So it works on a read-only mount. Every write fails with
    /// [`Error::StorageReadOnly`]. A missing or empty file, or one that is
    /// not a study database, is an [`Error::UnusableStorageFile`].
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteOptions::default().read_only(true))
    }

    /// Opens the study database at `path`.
    ///
    /// A missing or empty file gets Optuna's schema in one transaction; an
    /// Optuna study database (schema version 12) that holds nothing but
    /// Optuna's tables and indexes is used as it is, after SQLite's
    /// `quick_check`. A file that is not SQLite, a SQLite file that is not
    /// such a study database (another program's tables, a view, a trigger,
    /// an index of its own), a newer or older schema, a damaged file, or a
    /// read-only file is an [`Error::UnusableStorageFile`], and nothing is
    /// written to it. With [`SqliteOptions::read_only`], see
    /// [`SqliteStorage::open_read_only`].
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let unusable = |reason: String| Error::UnusableStorageFile {
            path: path.clone(),
            reason,
            source: None,
        };
        let header = match std::fs::metadata(&path) {
            Ok(meta) => {
                if meta.is_dir() {
                    return Err(unusable(
                        "is a directory; give the path of a database file".into(),
                    ));
                }
                let header = schema::check_header(&path)?;
                if meta.permissions().readonly() && !options.read_only {
                    return Err(unusable(
                        "is read-only; hpo writes trials to its storage, so make the file writable, \
                         copy it, or open it read-only (`?mode=ro`) to read it"
                            .into(),
                    ));
                }
                header
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !options.read_only => None,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(unusable(
                    "does not exist; read-only mode reads an existing study database".into(),
                ))
            }
            Err(e) => return Err(schema::unusable_caused(&path, "cannot be inspected", e)),
        };
        if options.read_only {
            let Some(header) = header else {
                return Err(unusable(
                    "is empty: there is no study to read in read-only mode".into(),
                ));
            };
            let immutable = header.wal && !wal_file(&path).exists();
            let conn = read_only_connection(&path, immutable)?;
            return Self::setup(conn, Some(path), &options, immutable);
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags)
            .map_err(|e| schema::unusable_caused(&path, "cannot be opened", e))?;
        Self::setup(conn, Some(path), &options, false)
    }

    /// A private in-memory database (`sqlite::memory:`), gone when dropped.
    pub fn in_memory() -> Result<Self> {
        let conn = Connection::open_in_memory()
            .map_err(|e| Error::storage_caused("cannot open an in-memory SQLite database", e))?;
        Self::setup(conn, None, &SqliteOptions::default(), false)
    }

    fn setup(
        #[allow(unused_mut)] mut conn: Connection,
        path: Option<PathBuf>,
        options: &SqliteOptions,
        immutable: bool,
    ) -> Result<Self> {
        let shown = path.clone().unwrap_or_else(|| PathBuf::from(":memory:"));
        let timeout = options.busy_timeout;
        let sql_err = |e: rusqlite::Error| schema::read_error(&shown, timeout, e);
        conn.busy_timeout(timeout).map_err(sql_err)?;
        #[cfg(feature = "testing")]
        super::crash::arm(&mut conn).map_err(sql_err)?;
        // Classify and check before writing anything (the WAL pragma writes the header).
        let kind = schema::inspect(&conn, &shown, timeout)?;
        if kind != schema::FileKind::Empty {
            schema::quick_check(&conn, &shown, timeout)?;
        }
        let mut restore_journal = None;
        if options.read_only {
            if kind == schema::FileKind::Empty {
                return Err(Error::UnusableStorageFile {
                    path: shown,
                    reason: "holds no study database: there is nothing to read in read-only mode"
                        .into(),
                    source: None,
                });
            }
        } else if path.is_some() {
            let before: String = conn
                .query_row("PRAGMA journal_mode", [], |r| r.get(0))
                .map_err(sql_err)?;
            let before = before.to_ascii_lowercase();
            let mode: String = conn
                .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
                .map_err(|e| {
                    if schema::is_busy(&e) {
                        return sql_err(e);
                    }
                    schema::unusable_caused(
                        &shown,
                        "cannot be switched to WAL mode: is it on a read-only file system or \
                         in a read-only directory? Open it read-only (`?mode=ro`) to read it",
                        e,
                    )
                })?;
            if !mode.eq_ignore_ascii_case("wal") {
                return Err(Error::UnusableStorageFile {
                    path: shown.clone(),
                    reason: format!("stays in journal mode `{mode}` instead of WAL"),
                    source: None,
                });
            }
            if kind != schema::FileKind::Empty && JOURNAL_MODES.contains(&before.as_str()) {
                restore_journal = Some(before);
            }
        }
        if !options.read_only {
            let sync = if options.synchronous_full {
                "FULL"
            } else {
                "NORMAL"
            };
            conn.execute_batch(&format!("PRAGMA synchronous = {sync};"))
                .map_err(sql_err)?;
        }
        let storage = SqliteStorage {
            path,
            inner: Mutex::new(Inner {
                conn,
                counters: Counters::default(),
                caches: HashMap::new(),
                owned: HashMap::new(),
                claim_from: HashMap::new(),
                immutable,
            }),
            read_only: options.read_only,
            busy_timeout: timeout,
            restore_journal,
        };
        if kind == schema::FileKind::Empty {
            storage.op(|db| {
                db.write_txn(|conn, _| {
                    // Another process may have created it since we looked.
                    let objects: i64 =
                        conn.query_row("SELECT COUNT(*) FROM sqlite_master", [], |r| r.get(0))?;
                    if objects == 0 {
                        schema::create(conn)?;
                    }
                    Ok(())
                })
            })?;
            // Validate what is there now (ours or the other process's).
            let g = storage.lock()?;
            schema::inspect(&g.conn, &shown, timeout)?;
        }
        Ok(storage)
    }
}

impl Drop for SqliteStorage {
    /// Puts an existing file this storage switched to WAL back into the
    /// journal mode it had (Optuna's files are in `delete` mode). That needs
    /// the file to itself: while another connection has it open the switch
    /// fails within a short timeout and the file stays in WAL mode, which
    /// SQLite and Optuna read all the same.
    fn drop(&mut self) {
        let Some(mode) = self.restore_journal.take() else {
            return;
        };
        let Ok(inner) = self.inner.get_mut() else {
            return;
        };
        let _ = inner.conn.busy_timeout(Duration::from_millis(100));
        let restored = inner
            .conn
            .query_row(&format!("PRAGMA journal_mode = {mode}"), [], |r| {
                r.get::<_, String>(0)
            });
        match restored {
            Ok(now) if now.eq_ignore_ascii_case(&mode) => {
                tracing::debug!(path = ?self.path, "journal mode restored to {mode}")
            }
            Ok(now) => tracing::debug!(path = ?self.path, "journal mode stays {now}"),
            Err(e) => tracing::debug!(
                path = ?self.path,
                "journal mode stays WAL (another connection has the file open): {e}"
            ),
        }
    }
}
