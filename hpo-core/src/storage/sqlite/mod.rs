//! The embedded default storage: one SQLite file in Optuna's schema.
//!
//! The design is documented on [`SqliteStorage`].

mod connection;
#[cfg(feature = "testing")]
mod crash;
mod open;
mod options;
mod queries;
mod schema;
mod storage_impl;

pub use self::options::{SqliteOptions, SqliteStats};

use self::connection::Inner;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// A study storage in one SQLite file (or in memory), in Optuna's schema.
///
/// # Design
///
/// * **Optuna's schema and conventions.** Tables, columns, indexes and value
///   encodings are Optuna 5.0's (modules `schema` and `codec`), so `optuna.load_study`
///   and `optuna-dashboard` read hpo studies and hpo resumes Optuna's.
/// * **Safe for several processes.** The file is in WAL mode (readers never
///   block the writer), every connection waits on a busy timeout and retries a
///   busy database, single-row changes are single autocommit statements, and
///   every multi-row change is one short `BEGIN IMMEDIATE` transaction, so the
///   write lock is taken up front and held for microseconds. A trial number is
///   computed inside the statement that inserts the trial (the study's newest
///   trial's number plus one, one index look-up under the write lock), so
///   numbers are unique and contiguous whatever the number of processes; a
///   WAITING trial is claimed by one `UPDATE ... WHERE state = 'WAITING'
///   RETURNING`, so exactly one worker gets it.
/// * **Crash-safe steps.** Steps that a crash must not separate are one
///   transaction: a trial and its first heartbeat
///   ([`Storage::start_trial`](crate::storage::Storage::start_trial)), a stale
///   trial's failure and its retry copy
///   ([`Storage::fail_stale_trial`](crate::storage::Storage::fail_stale_trial)),
///   a trial with its details, a trial's final state with its values and
///   attributes. `tests/it/crash_points.rs` kills a worker at every write and
///   checks the study after recovery.
/// * **Cost independent of the study's size.** Claims and stale-trial
///   look-ups read only the trials added since the last look, through the
///   `(study_id, trial_id)` index; numbering is one index look-up.
/// * **Few statements per trial.** A typical trial (create, two parameters,
///   finish, two reads) costs about ten statements and four commits, against
///   Optuna's 35 statements and 7 commits; [`SqliteStorage::stats`] counts them.
/// * **Incremental reads.** Finished trials never change, so each storage keeps
///   them in a per-study cache and [`Storage::trials`](crate::storage::Storage::trials) reads only the trial
///   rows from the oldest unfinished trial on, and the details of the trials it
///   does not already hold. RUNNING trials owned by this storage are kept
///   write-through in memory (only their owner writes them), so they are not
///   re-read either, until [`Storage::release_trial`](crate::storage::Storage::release_trial)
///   hands one to another process. The cached front of finished trials (trials `0..k`, all
///   finished) is shared with every [`TrialSnapshot`](crate::TrialSnapshot)
///   ([`Storage::trial_snapshot`](crate::storage::Storage::trial_snapshot))
///   rather than copied, so a read costs what changed, not the study's size.
/// * **Durability.** `synchronous = NORMAL` in WAL mode: a committed
///   transaction survives a crash of the process (it is in the WAL, which the
///   OS writes out); after a power loss or OS crash the database is intact but
///   the last transactions before the loss may be rolled back.
///   [`SqliteOptions::synchronous_full`] makes every commit durable on power
///   loss too (an fsync per commit).
/// * **Files hpo may write.** A file is checked before anything is written: it
///   must be new or empty (no schema object at all), or an Optuna study
///   database of schema version 12 holding nothing but Optuna's tables and
///   indexes, pass SQLite's `quick_check`, and be writable. Anything else is
///   an [`Error::UnusableStorageFile`](crate::Error::UnusableStorageFile). An
///   existing file's journal mode is restored when the storage is dropped
///   (if no other connection has the file open then).
/// * **Read-only mode.** [`SqliteStorage::open_read_only`] never writes a byte
///   of the file and creates no `-wal`/`-shm` file.
///
/// Open it with
/// [`SqliteStorage::open`], [`SqliteStorage::open_read_only`], [`SqliteStorage::in_memory`] or
/// [`crate::storage::storage_from_url`] (`sqlite:study.db`).
///
/// ```
/// use hpo_core::storage::SqliteStorage;
/// use hpo_core::{Direction, RandomSampler, Study};
/// use std::sync::Arc;
///
/// # fn main() -> hpo_core::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("hpo-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).ok();
/// let path = dir.join("study.db");
/// let storage = Arc::new(SqliteStorage::open(&path)?);
/// let study = Study::builder()
///     .name("quadratic")
///     .storage(storage.clone())
///     .sampler(RandomSampler::seeded(1))
///     .load_if_exists(true)
///     .build()?;
/// study.optimize(5, |t| Ok(t.suggest_float("x", -1.0, 1.0)?.powi(2)))?;
/// assert!(study.trials()?.len() >= 5);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub struct SqliteStorage {
    path: Option<PathBuf>,
    inner: Mutex<Inner>,
    /// Opened read-only: every write is refused.
    read_only: bool,
    /// How long a statement waits for a lock held by another connection.
    busy_timeout: Duration,
    /// The journal mode an existing file had before this storage switched
    /// it to WAL, restored on drop.
    restore_journal: Option<String>,
}

impl std::fmt::Debug for SqliteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStorage")
            .field("path", &self.path)
            .field("read_only", &self.read_only)
            .finish_non_exhaustive()
    }
}

impl SqliteStorage {
    /// The version of the SQLite library in use (bundled with hpo).
    pub fn sqlite_version() -> String {
        rusqlite::version().to_owned()
    }

    /// The database file, `None` for an in-memory database.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Statements executed and commits made by this storage so far.
    pub fn stats(&self) -> SqliteStats {
        match self.inner.lock() {
            Ok(g) => SqliteStats {
                statements: g.counters.statements.get(),
                commits: g.counters.commits.get(),
                busy_retries: g.counters.busy_retries.get(),
                trials_loaded: g.counters.trials_loaded.get(),
            },
            Err(_) => SqliteStats::default(),
        }
    }
}

#[cfg(test)]
mod tests;
