//! One study across many machines: PostgreSQL in Optuna's schema.
//!
//! The design is documented on [`PostgresStorage`].

mod conn;
mod connect;
mod queries;
mod schema;
mod storage_impl;

pub use self::conn::PostgresStats;
pub use self::connect::PostgresOptions;

use self::conn::Inner;
use self::connect::Target;
use crate::error::Result;
use std::collections::HashMap;
use std::sync::Mutex;

/// A study storage in a PostgreSQL database, in Optuna 5.0's schema, shared
/// by every process on every machine that can reach the server.
///
/// # Design
///
/// * **Optuna's schema and conventions.** The tables, enum types and
///   constraints SQLAlchemy creates for Optuna 5.0 (schema version 12,
///   alembic `v3.2.0.a`), and the value conventions of the SQLite storage
///   (the shared `storage::codec` module: non-finite floats as `NULL` plus a
///   type, attribute JSON as Python writes it, naive UTC datetimes), so
///   `optuna.load_study`, optuna-dashboard and existing SQL read hpo studies
///   and hpo resumes Optuna's. A database with no tables gets the schema in
///   one transaction; a database with other tables or another schema version
///   is refused with [`Error::UnusableDatabase`](crate::Error::UnusableDatabase)
///   and nothing is written.
/// * **Trial numbers.** A trial is inserted under a per-study transaction-level
///   advisory lock (`pg_advisory_xact_lock`), its number the study's largest
///   plus one, so numbers are unique and contiguous however many machines
///   write, and trial ids are committed in increasing order (which the
///   incremental reads rely on).
/// * **Claims.** A WAITING (enqueued) trial is claimed by one
///   `UPDATE ... WHERE trial_id = (SELECT ... FOR UPDATE SKIP LOCKED)`, so two
///   workers never get the same trial and none waits on another's claim.
/// * **The database's clock.** Start, completion and heartbeat times are the
///   server's `now()` in UTC, and stale trials are those whose last heartbeat
///   is older than the grace period by the server's clock, so machines whose
///   clocks disagree still agree on who is stale.
/// * **Fencing.** Every write to a trial checks, under a row lock, that the
///   trial is still RUNNING, so a worker presumed dead and reaped cannot write
///   to its failed trial afterwards.
/// * **Few round trips.** Starting a trial (claim or create, first heartbeat)
///   is one request; each parameter, intermediate value or heartbeat is one
///   statement; finishing a trial (state, values, attributes) is one
///   statement. [`PostgresStorage::stats`] counts statements and round trips.
/// * **Incremental reads.** As in the SQLite storage, finished trials are
///   cached per study and never re-read; a read fetches only the trial rows
///   from the oldest unfinished trial on and the details of trials it does
///   not hold; the cached front of finished trials is shared with every
///   [`TrialSnapshot`](crate::TrialSnapshot), not copied.
/// * **Durability.** By default a commit does not wait for the server's disk
///   flush (`synchronous_commit = off` on this storage's connections): a
///   commit is visible to every worker at once and survives any worker's
///   crash, but a crash of the server machine may lose its last fraction of
///   a second of commits (never consistency), as the SQLite storage's default
///   may on power loss. [`PostgresOptions::synchronous_commit`] makes every
///   commit durable (a disk flush per write).
/// * **One connection per handle**, behind a mutex; open one storage per
///   process (threads share it). A connection lost is reopened on the next
///   operation, with retries and doubling waits; transactions the server
///   aborts (deadlock, serialization failure) are run again.
///
/// URLs: `postgresql://user@host:5432/database` (also `postgres://`, and
/// SQLAlchemy's `postgresql+psycopg://`); a password in the URL is used but
/// never printed: errors and logs show the URL without it.
///
/// ```no_run
/// use hpo_core::storage::PostgresStorage;
/// use hpo_core::{RandomSampler, Study};
/// use std::sync::Arc;
///
/// # fn main() -> hpo_core::Result<()> {
/// let storage = Arc::new(PostgresStorage::open("postgresql://hpo@db.internal:5432/studies")?);
/// let study = Study::builder()
///     .name("quadratic")
///     .storage(storage)
///     .sampler(RandomSampler::seeded(1))
///     .load_if_exists(true)
///     .build()?;
/// study.optimize(5, |t| Ok(t.suggest_float("x", -1.0, 1.0)?.powi(2)))?;
/// # Ok(())
/// # }
/// ```
pub struct PostgresStorage {
    target: Target,
    options: PostgresOptions,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for PostgresStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStorage")
            .field("server", &self.target.shown)
            .finish_non_exhaustive()
    }
}

impl PostgresStorage {
    /// Connects to the database a `postgresql://` URL names, creating
    /// Optuna's schema there if the database has no tables.
    pub fn open(url: &str) -> Result<Self> {
        Self::open_with(url, PostgresOptions::default())
    }

    /// [`PostgresStorage::open`] with options (connection retries).
    pub fn open_with(url: &str, options: PostgresOptions) -> Result<Self> {
        let target = Target::parse(url)?;
        let client = target.connect(&options)?;
        let storage = PostgresStorage {
            inner: Mutex::new(Inner {
                client,
                stmts: HashMap::new(),
                stats: PostgresStats::default(),
                caches: HashMap::new(),
                owned: HashMap::new(),
                claim_from: HashMap::new(),
            }),
            target,
            options,
        };
        let shown = storage.target.shown.clone();
        storage.op(|db| db.txn(|db| schema::prepare(db, &shown)))?;
        Ok(storage)
    }

    /// The server and database, as a URL without the password.
    pub fn server(&self) -> &str {
        &self.target.shown
    }

    /// Statements, round trips and commits of this storage so far.
    pub fn stats(&self) -> PostgresStats {
        match self.inner.lock() {
            Ok(g) => g.stats,
            Err(_) => PostgresStats::default(),
        }
    }
}
