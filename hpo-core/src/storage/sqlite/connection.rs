//! The connection: one per storage behind a mutex, the busy-retry loop and
//! `BEGIN IMMEDIATE` transactions.

use super::SqliteStorage;
use crate::error::{Error, Result};
use crate::storage::finished::FinishedTrials;
use crate::trial::FrozenTrial;
use rusqlite::{Connection, ErrorCode};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::MutexGuard;
use std::time::Duration;

/// How many times a busy database is retried after the busy timeout expired.
const BUSY_RETRIES: u32 = 20;

pub(super) struct Inner {
    pub(super) conn: Connection,
    pub(super) counters: Counters,
    /// Per-study cache of finished trials.
    pub(super) caches: HashMap<u64, StudyCache>,
    /// RUNNING trials this storage created or claimed, with their study ids:
    /// only the owner writes them, so the in-memory record is the stored one.
    pub(super) owned: HashMap<u64, (u64, FrozenTrial)>,
    /// Per study, the trial id from which a WAITING trial may still exist:
    /// a trial that was not WAITING when looked at never becomes WAITING, so
    /// each claim looks only at the trials added since the last look.
    pub(super) claim_from: HashMap<u64, i64>,
    /// The connection is a read-only one opened with `immutable=1` (see
    /// [`SqliteStorage::open_read_only`]).
    pub(super) immutable: bool,
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) statements: Cell<u64>,
    pub(super) commits: Cell<u64>,
    pub(super) busy_retries: Cell<u64>,
    pub(super) trials_loaded: Cell<u64>,
}

impl Counters {
    pub(super) fn statement(&self) {
        self.statements.set(self.statements.get() + 1);
    }
    pub(super) fn commit(&self) {
        self.commits.set(self.commits.get() + 1);
    }
}

#[derive(Default)]
pub(super) struct StudyCache {
    /// Finished trials by number.
    pub(super) finished: FinishedTrials,
    /// Every trial of the study with a smaller id is finished and cached.
    pub(super) low_water: i64,
}

/// An error inside a storage operation: SQLite's (retried when busy) or ours.
pub(super) enum OpError {
    Sql(rusqlite::Error),
    Hpo(Error),
}

impl From<rusqlite::Error> for OpError {
    fn from(e: rusqlite::Error) -> Self {
        OpError::Sql(e)
    }
}

impl From<Error> for OpError {
    fn from(e: Error) -> Self {
        OpError::Hpo(e)
    }
}

pub(super) type OpResult<T> = std::result::Result<T, OpError>;

pub(super) use super::schema::is_busy;
impl SqliteStorage {
    pub(super) fn lock(&self) -> Result<MutexGuard<'_, Inner>> {
        Ok(self.inner.lock()?)
    }

    /// Runs `f` on the connection, retrying while the database is busy.
    pub(super) fn op<T>(&self, mut f: impl FnMut(&mut Inner) -> OpResult<T>) -> Result<T> {
        let mut g = self.lock()?;
        if g.immutable {
            self.leave_immutable(&mut g)?;
        }
        let mut attempt = 0;
        loop {
            match f(&mut g) {
                Ok(v) => return Ok(v),
                Err(OpError::Hpo(e)) => return Err(e),
                Err(OpError::Sql(e)) if is_busy(&e) && attempt < BUSY_RETRIES => {
                    attempt += 1;
                    g.counters
                        .busy_retries
                        .set(g.counters.busy_retries.get() + 1);
                    tracing::debug!(attempt, "SQLite database busy; retrying");
                    std::thread::sleep(Duration::from_millis(5 << attempt.min(6)));
                }
                Err(OpError::Sql(e)) => return Err(self.sql_error(e)),
            }
        }
    }

    /// A SQLite error as hpo reports it: a lock held too long, a write to a
    /// read-only storage, or anything else with the file's path.
    pub(super) fn sql_error(&self, e: rusqlite::Error) -> Error {
        let path = self
            .path
            .clone()
            .unwrap_or_else(|| std::path::PathBuf::from(":memory:"));
        if is_busy(&e) {
            return Error::StorageLocked {
                path,
                timeout: self.busy_timeout,
                source: Box::new(e),
            };
        }
        if self.read_only && e.sqlite_error_code() == Some(ErrorCode::ReadOnly) {
            return Error::StorageReadOnly { path };
        }
        Error::Storage {
            path: self.path.clone(),
            message: "a SQLite statement failed".into(),
            source: Some(Box::new(e)),
        }
    }

    /// A read-only handle opened `immutable` (a WAL-mode file with no writer)
    /// switches to an ordinary read-only connection as soon as a writer has
    /// appeared (its `-wal` file exists), so it sees the writer's commits.
    fn leave_immutable(&self, g: &mut Inner) -> Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if !super::open::wal_file(path).exists() {
            return Ok(());
        }
        let conn = super::open::read_only_connection(path, false)?;
        conn.busy_timeout(self.busy_timeout)
            .map_err(|e| self.sql_error(e))?;
        g.conn = conn;
        g.immutable = false;
        Ok(())
    }
}

impl Inner {
    /// Runs `f` in one `BEGIN IMMEDIATE` transaction; rolls back on error.
    pub(super) fn write_txn<T>(
        &mut self,
        f: impl FnOnce(&Connection, &Counters) -> OpResult<T>,
    ) -> OpResult<T> {
        self.txn(|db| f(&db.conn, &db.counters))
    }

    /// [`Inner::write_txn`] with the reads of [`Inner`] (trial loading) available inside.
    pub(super) fn txn<T>(&mut self, f: impl FnOnce(&Inner) -> OpResult<T>) -> OpResult<T> {
        self.counters.statement();
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        match f(self) {
            Ok(v) => {
                self.counters.statement();
                if let Err(e) = self.conn.execute_batch("COMMIT") {
                    let _ = self.conn.execute_batch("ROLLBACK");
                    return Err(e.into());
                }
                self.counters.commit();
                Ok(v)
            }
            Err(e) => {
                self.counters.statement();
                let _ = self.conn.execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }
}
