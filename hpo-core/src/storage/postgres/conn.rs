//! One connection per storage behind a mutex: prepared statements cached
//! per connection, statements and round trips counted, reconnection after
//! the server went away, and retries of transactions the server aborted
//! (serialization failures, deadlocks).

use super::connect::{PostgresOptions, Target};
use super::PostgresStorage;
use crate::error::{Error, Result};
use crate::storage::finished::FinishedTrials;
use crate::trial::FrozenTrial;
use postgres::types::ToSql;
use postgres::{Client, GenericClient, Row, Statement};
use std::collections::HashMap;
use std::sync::MutexGuard;
use std::time::Duration;

/// How many times an operation the server aborted (serialization failure,
/// deadlock) is run again.
const ABORT_RETRIES: u32 = 10;

/// Statements, round trips and transactions of a [`PostgresStorage`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PostgresStats {
    /// SQL statements executed (`BEGIN` and `COMMIT` included, each
    /// statement of a multi-statement request counted).
    pub statements: u64,
    /// Requests sent to the server and answered (preparing a statement,
    /// executing one, a multi-statement request: one each).
    pub round_trips: u64,
    /// Transactions committed (explicit ones and single-statement writes).
    pub commits: u64,
    /// Operations run again after the server aborted them (serialization
    /// failure, deadlock) or after a reconnection.
    pub retries: u64,
    /// Trial records whose details were read from the database; finished
    /// trials are read at most once per storage.
    pub trials_loaded: u64,
}

pub(super) struct Inner {
    pub(super) client: Client,
    pub(super) stmts: HashMap<String, Statement>,
    pub(super) stats: PostgresStats,
    /// Per-study cache of finished trials.
    pub(super) caches: HashMap<u64, StudyCache>,
    /// RUNNING trials this storage created or claimed, with their study
    /// ids: only the owner writes them, so the in-memory record is the stored one.
    pub(super) owned: HashMap<u64, (u64, FrozenTrial)>,
    /// Per study, the trial id from which a WAITING trial may still exist.
    pub(super) claim_from: HashMap<u64, i32>,
}

#[derive(Default)]
pub(super) struct StudyCache {
    /// Finished trials by number.
    pub(super) finished: FinishedTrials,
    /// Every trial of the study with a smaller id is finished and cached.
    pub(super) low_water: i32,
}

/// An error inside an operation: the server's (maybe retried) or ours.
pub(super) enum OpError {
    Pg(postgres::Error),
    Hpo(Error),
}

impl From<postgres::Error> for OpError {
    fn from(e: postgres::Error) -> Self {
        OpError::Pg(e)
    }
}

impl From<Error> for OpError {
    fn from(e: Error) -> Self {
        OpError::Hpo(e)
    }
}

pub(super) type OpResult<T> = std::result::Result<T, OpError>;

/// A storage id as the schema's `INTEGER` (32-bit) column.
pub(super) fn id32(id: u64) -> Result<i32> {
    i32::try_from(id).map_err(|_| {
        Error::InvalidOperation(format!("id {id} is beyond the schema's 32-bit INTEGER ids"))
    })
}

/// A connection (or a transaction on it) with the statement cache and the
/// counters: every query goes through here.
pub(super) struct Db<'a, C: GenericClient> {
    pub(super) c: &'a mut C,
    pub(super) stmts: &'a mut HashMap<String, Statement>,
    pub(super) stats: &'a mut PostgresStats,
}

impl<C: GenericClient> Db<'_, C> {
    fn prepare(&mut self, sql: &str) -> OpResult<Statement> {
        if let Some(s) = self.stmts.get(sql) {
            return Ok(s.clone());
        }
        self.stats.round_trips += 1;
        let s = self.c.prepare(sql)?;
        self.stmts.insert(sql.to_owned(), s.clone());
        Ok(s)
    }

    fn count(&mut self) {
        self.stats.statements += 1;
        self.stats.round_trips += 1;
    }

    pub(super) fn query(&mut self, sql: &str, p: &[&(dyn ToSql + Sync)]) -> OpResult<Vec<Row>> {
        let s = self.prepare(sql)?;
        self.count();
        Ok(self.c.query(&s, p)?)
    }

    pub(super) fn query_opt(
        &mut self,
        sql: &str,
        p: &[&(dyn ToSql + Sync)],
    ) -> OpResult<Option<Row>> {
        let s = self.prepare(sql)?;
        self.count();
        Ok(self.c.query_opt(&s, p)?)
    }

    pub(super) fn execute(&mut self, sql: &str, p: &[&(dyn ToSql + Sync)]) -> OpResult<u64> {
        let s = self.prepare(sql)?;
        self.count();
        Ok(self.c.execute(&s, p)?)
    }

    /// Several statements without parameters in one round trip, as one
    /// transaction; returns the rows of the last statement, as text. Only
    /// for SQL built from numbers and constants, never from user strings.
    pub(super) fn batch(&mut self, sql: &str, statements: u64) -> OpResult<Vec<Vec<String>>> {
        self.stats.statements += statements;
        self.stats.round_trips += 1;
        let mut rows = Vec::new();
        let mut last = Vec::new();
        for m in self.c.simple_query(sql)? {
            match m {
                postgres::SimpleQueryMessage::Row(r) => rows.push(
                    (0..r.len())
                        .map(|i| r.get(i).unwrap_or_default().to_owned())
                        .collect(),
                ),
                postgres::SimpleQueryMessage::CommandComplete(_) => {
                    last = std::mem::take(&mut rows);
                }
                _ => {}
            }
        }
        Ok(last)
    }
}

impl Inner {
    pub(super) fn db(&mut self) -> Db<'_, Client> {
        Db {
            c: &mut self.client,
            stmts: &mut self.stmts,
            stats: &mut self.stats,
        }
    }

    /// Runs `f` in one transaction; rolls back when it fails.
    pub(super) fn txn<T>(
        &mut self,
        f: impl FnOnce(&mut Db<'_, postgres::Transaction<'_>>) -> OpResult<T>,
    ) -> OpResult<T> {
        self.stats.statements += 1;
        self.stats.round_trips += 1;
        let mut tx = self.client.transaction()?;
        let mut db = Db {
            c: &mut tx,
            stmts: &mut self.stmts,
            stats: &mut self.stats,
        };
        let out = f(&mut db)?;
        self.stats.statements += 1;
        self.stats.round_trips += 1;
        tx.commit()?;
        self.stats.commits += 1;
        Ok(out)
    }
}

/// An [`Error::Database`] whose message is the whole chain of causes
/// (`postgres::Error` alone says only "db error").
pub(super) fn database_error(target: &str, e: postgres::Error) -> Error {
    let mut message = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        message.push_str(": ");
        message.push_str(&c.to_string());
        cause = c.source();
    }
    Error::Database {
        target: target.to_owned(),
        message,
        source: Box::new(e),
    }
}

/// Whether the server aborted the operation and running it again is safe:
/// serialization failures and deadlocks roll the whole transaction back.
fn is_retryable(e: &postgres::Error) -> bool {
    e.code()
        .is_some_and(|c| matches!(c.code(), "40001" | "40P01"))
}

impl PostgresStorage {
    pub(super) fn lock(&self) -> Result<MutexGuard<'_, Inner>> {
        Ok(self.inner.lock()?)
    }

    /// Runs `f` on the connection (reconnecting first if the server closed
    /// it), running it again when the server aborted it.
    pub(super) fn op<T>(&self, mut f: impl FnMut(&mut Inner) -> OpResult<T>) -> Result<T> {
        let mut g = self.lock()?;
        if g.client.is_closed() {
            self.reconnect(&mut g, &self.options)?;
        }
        let mut attempt = 0;
        loop {
            match f(&mut g) {
                Ok(v) => return Ok(v),
                Err(OpError::Hpo(e)) => return Err(e),
                Err(OpError::Pg(e)) if is_retryable(&e) && attempt < ABORT_RETRIES => {
                    attempt += 1;
                    g.stats.retries += 1;
                    tracing::debug!(attempt, "PostgreSQL aborted a transaction ({e}); retrying");
                    std::thread::sleep(Duration::from_millis(2 << attempt.min(6)));
                }
                Err(OpError::Pg(e)) => return Err(database_error(&self.target.shown, e)),
            }
        }
    }

    /// A fresh connection after the old one closed: cached statements
    /// belong to the old one, and owned trials stay owned (the server keeps
    /// them RUNNING until a reaper fails them).
    fn reconnect(&self, g: &mut Inner, options: &PostgresOptions) -> Result<()> {
        tracing::warn!(server = %self.target.shown, "PostgreSQL connection lost; reconnecting");
        g.client = Target::connect(&self.target, options)?;
        g.stmts.clear();
        g.stats.retries += 1;
        Ok(())
    }
}
