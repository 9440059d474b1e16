//! The embedded default storage: one SQLite file in Optuna's schema.
//!
//! The design is documented on [`SqliteStorage`].

mod codec;
mod schema;

use super::{Storage, StudySummary};
use crate::direction::Direction;
use crate::distribution::Distribution;
use crate::error::{Error, Result};
use crate::trial::{FrozenTrial, TrialState};
use rusqlite::types::ValueRef;
use rusqlite::{params, Connection, ErrorCode, OpenFlags, OptionalExtension};
use serde_json::Value;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How many times a busy database is retried after the busy timeout expired.
const BUSY_RETRIES: u32 = 20;

/// Options for opening a [`SqliteStorage`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    busy_timeout: Duration,
    synchronous_full: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(30),
            synchronous_full: false,
        }
    }
}

impl SqliteOptions {
    /// How long a statement waits for another process's write lock before the
    /// storage backs off and retries (default 30 s).
    pub fn busy_timeout(mut self, timeout: Duration) -> Self {
        self.busy_timeout = timeout;
        self
    }

    /// `synchronous = FULL`: every commit is fsynced, so it also survives a
    /// power loss, at the cost of one fsync per commit. The default, `NORMAL`,
    /// survives process crashes but may lose the last commits on power loss.
    pub fn synchronous_full(mut self, yes: bool) -> Self {
        self.synchronous_full = yes;
        self
    }
}

/// Statements executed and transactions committed by a [`SqliteStorage`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SqliteStats {
    /// SQL statements executed, `BEGIN` and `COMMIT` included.
    pub statements: u64,
    /// Transactions committed (explicit ones and autocommitted writes).
    pub commits: u64,
    /// Operations retried because another process held the database busy
    /// beyond the busy timeout (never surfaced as errors unless retries run out).
    pub busy_retries: u64,
    /// Trial records whose details (params, values, attributes) were read from
    /// the database; finished trials are read at most once per storage.
    pub trials_loaded: u64,
}

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
///   computed inside the statement that inserts the trial (`COUNT(*)` of the
///   study's trials, under the write lock), so numbers are unique and
///   contiguous whatever the number of processes; a WAITING trial is claimed by
///   one `UPDATE ... WHERE state = 'WAITING' RETURNING`, so exactly one worker
///   gets it.
/// * **Few statements per trial.** A typical trial (create, two parameters,
///   finish, two reads) costs about ten statements and four commits, against
///   Optuna's 35 statements and 7 commits; [`SqliteStorage::stats`] counts them.
/// * **Incremental reads.** Finished trials never change, so each storage keeps
///   them in a per-study cache and [`Storage::trials`] reads only the trial
///   rows from the oldest unfinished trial on, and the details of the trials it
///   does not already hold. RUNNING trials owned by this storage are kept
///   write-through in memory (only their owner writes them), so they are not
///   re-read either.
/// * **Durability.** `synchronous = NORMAL` in WAL mode: a committed
///   transaction survives a crash of the process (it is in the WAL, which the
///   OS writes out); after a power loss or OS crash the database is intact but
///   the last transactions before the loss may be rolled back.
///   [`SqliteOptions::synchronous_full`] makes every commit durable on power
///   loss too (an fsync per commit).
/// * **Files hpo may write.** A file is checked before anything is written: it
///   must be new or empty, or an Optuna study database of schema version 12,
///   and writable. Anything else is an [`Error::UnusableStorageFile`].
///
/// Open it with
/// [`SqliteStorage::open`], [`SqliteStorage::in_memory`] or
/// [`crate::storage::storage_from_url`] (`sqlite:study.db`).
///
/// ```
/// use hpo_core::storage::SqliteStorage;
/// use hpo_core::{Direction, RandomSampler, Study, TrialError};
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
/// study.optimize(5, |t| -> Result<f64, TrialError> { Ok(t.suggest_float("x", -1.0, 1.0)?.powi(2)) })?;
/// assert!(study.trials()?.len() >= 5);
/// # std::fs::remove_dir_all(&dir).ok();
/// # Ok(())
/// # }
/// ```
pub struct SqliteStorage {
    path: Option<PathBuf>,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for SqliteStorage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStorage")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

struct Inner {
    conn: Connection,
    counters: Counters,
    /// Per-study cache of finished trials.
    caches: HashMap<u64, StudyCache>,
    /// RUNNING trials this storage created or claimed, with their study ids:
    /// only the owner writes them, so the in-memory record is the stored one.
    owned: HashMap<u64, (u64, FrozenTrial)>,
}

#[derive(Default)]
struct Counters {
    statements: Cell<u64>,
    commits: Cell<u64>,
    busy_retries: Cell<u64>,
    trials_loaded: Cell<u64>,
}

impl Counters {
    fn statement(&self) {
        self.statements.set(self.statements.get() + 1);
    }
    fn commit(&self) {
        self.commits.set(self.commits.get() + 1);
    }
}

#[derive(Default)]
struct StudyCache {
    /// Finished trials by number.
    finished: BTreeMap<u64, Arc<FrozenTrial>>,
    /// Every trial of the study with a smaller id is finished and cached.
    low_water: i64,
}

/// An error inside a storage operation: SQLite's (retried when busy) or ours.
enum OpError {
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

type OpResult<T> = std::result::Result<T, OpError>;

fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e.sqlite_error_code(),
        Some(ErrorCode::DatabaseBusy) | Some(ErrorCode::DatabaseLocked)
    )
}

/// One row of the `trials` table.
struct TrialRow {
    id: i64,
    number: i64,
    state: String,
    start: Option<String>,
    complete: Option<String>,
}

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

    fn setup(conn: Connection, path: Option<PathBuf>, options: &SqliteOptions) -> Result<Self> {
        let shown = path.clone().unwrap_or_else(|| PathBuf::from(":memory:"));
        let sql_err = |e: rusqlite::Error| Error::Storage {
            path: Some(shown.clone()),
            message: e.to_string(),
        };
        conn.busy_timeout(options.busy_timeout).map_err(sql_err)?;
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

    fn lock(&self) -> Result<MutexGuard<'_, Inner>> {
        Ok(self.inner.lock()?)
    }

    /// Runs `f` on the connection, retrying while the database is busy.
    fn op<T>(&self, mut f: impl FnMut(&mut Inner) -> OpResult<T>) -> Result<T> {
        let mut g = self.lock()?;
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
                Err(OpError::Sql(e)) => {
                    return Err(Error::Storage {
                        path: self.path.clone(),
                        message: e.to_string(),
                    })
                }
            }
        }
    }
}

impl Inner {
    /// Runs `f` in one `BEGIN IMMEDIATE` transaction; rolls back on error.
    fn write_txn<T>(
        &mut self,
        f: impl FnOnce(&Connection, &Counters) -> OpResult<T>,
    ) -> OpResult<T> {
        self.counters.statement();
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        match f(&self.conn, &self.counters) {
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

    /// Why a write to `trial_id` changed nothing: the trial is missing or finished.
    fn not_writable(&self, trial_id: u64) -> OpResult<OpError> {
        self.counters.statement();
        let row: Option<(i64, String)> = self
            .conn
            .prepare_cached("SELECT number, state FROM trials WHERE trial_id = ?1")?
            .query_row([trial_id as i64], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        Ok(match row {
            None => OpError::Hpo(Error::TrialNotFound(trial_id)),
            Some((number, state)) => {
                let state: TrialState = state.parse()?;
                OpError::Hpo(Error::TrialFinished {
                    number: number as u64,
                    state,
                })
            }
        })
    }

    /// Reads full records of the given trial rows (one statement for all details).
    fn load(&self, rows: Vec<TrialRow>) -> OpResult<Vec<FrozenTrial>> {
        if rows.is_empty() {
            return Ok(Vec::new());
        }
        let mut trials: HashMap<i64, FrozenTrial> = HashMap::with_capacity(rows.len());
        let mut order = Vec::with_capacity(rows.len());
        for r in rows {
            let mut t = FrozenTrial::new(r.id as u64, r.number as u64, r.state.parse()?);
            t.datetime_start = r.start.as_deref().map(codec::parse_datetime).transpose()?;
            t.datetime_complete = r
                .complete
                .as_deref()
                .map(codec::parse_datetime)
                .transpose()?;
            order.push(r.id);
            trials.insert(r.id, t);
        }
        let loaded = &self.counters.trials_loaded;
        loaded.set(loaded.get() + order.len() as u64);
        let ids = order
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let sql = format!(
            "SELECT trial_id, 0, param_name, param_value, distribution_json FROM trial_params WHERE trial_id IN ({ids}) \
             UNION ALL SELECT trial_id, 1, \"key\", NULL, value_json FROM trial_user_attributes WHERE trial_id IN ({ids}) \
             UNION ALL SELECT trial_id, 2, \"key\", NULL, value_json FROM trial_system_attributes WHERE trial_id IN ({ids}) \
             UNION ALL SELECT trial_id, 3, objective, value, value_type FROM trial_values WHERE trial_id IN ({ids}) \
             UNION ALL SELECT trial_id, 4, step, intermediate_value, intermediate_value_type \
                 FROM trial_intermediate_values WHERE trial_id IN ({ids})"
        );
        self.counters.statement();
        let mut stmt = self.conn.prepare(&sql)?;
        let mut values: HashMap<i64, BTreeMap<i64, f64>> = HashMap::new();
        let mut rows = stmt.query([])?;
        while let Some(r) = rows.next()? {
            let id: i64 = r.get(0)?;
            let kind: i64 = r.get(1)?;
            let Some(t) = trials.get_mut(&id) else {
                continue;
            };
            let real: Option<f64> = match r.get_ref(3)? {
                ValueRef::Null => None,
                ValueRef::Integer(i) => Some(i as f64),
                ValueRef::Real(x) => Some(x),
                other => {
                    return Err(Error::Parse {
                        what: format!("a stored value of trial {}", t.number),
                        reason: format!("expected a number, found {:?}", other.data_type()),
                    }
                    .into())
                }
            };
            let text: String = r.get(4)?;
            match kind {
                0 => {
                    let name: String = r.get(2)?;
                    let dist = Distribution::from_json(&text)?;
                    t.internal_params
                        .insert(name.clone(), real.unwrap_or(f64::NAN));
                    t.distributions.insert(name, dist);
                }
                1 | 2 => {
                    let key: String = r.get(2)?;
                    let v = codec::parse_json(
                        &format!("attribute `{key}` of trial {}", t.number),
                        &text,
                    )?;
                    let map = if kind == 1 {
                        &mut t.user_attrs
                    } else {
                        &mut t.system_attrs
                    };
                    map.insert(key, v);
                }
                3 => {
                    let objective: i64 = r.get(2)?;
                    values
                        .entry(id)
                        .or_default()
                        .insert(objective, codec::decode_float(real, &text)?);
                }
                _ => {
                    let step: i64 = r.get(2)?;
                    t.intermediate_values
                        .insert(step.max(0) as u64, codec::decode_float(real, &text)?);
                }
            }
        }
        for (id, vs) in values {
            if let Some(t) = trials.get_mut(&id) {
                t.values = Some(vs.into_values().collect());
            }
        }
        Ok(order
            .into_iter()
            .filter_map(|id| trials.remove(&id))
            .collect())
    }

    fn trial_row(&self, trial_id: u64) -> OpResult<Option<TrialRow>> {
        self.counters.statement();
        Ok(self
            .conn
            .prepare_cached(
                "SELECT trial_id, number, state, datetime_start, datetime_complete FROM trials WHERE trial_id = ?1",
            )?
            .query_row([trial_id as i64], read_row)
            .optional()?)
    }

    fn study_exists(&self, study_id: u64) -> OpResult<bool> {
        self.counters.statement();
        Ok(self
            .conn
            .prepare_cached("SELECT 1 FROM studies WHERE study_id = ?1")?
            .query_row([study_id as i64], |_| Ok(()))
            .optional()?
            .is_some())
    }

    fn directions(&self, study_id: i64) -> OpResult<Vec<Direction>> {
        self.counters.statement();
        let mut stmt = self.conn.prepare_cached(
            "SELECT direction FROM study_directions WHERE study_id = ?1 ORDER BY objective",
        )?;
        let names = stmt
            .query_map([study_id], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(names
            .iter()
            .map(|n| n.parse())
            .collect::<Result<Vec<Direction>>>()?)
    }

    fn study_attrs(&self, table: &str, study_id: u64) -> OpResult<BTreeMap<String, Value>> {
        self.counters.statement();
        let mut stmt = self.conn.prepare_cached(&format!(
            "SELECT \"key\", value_json FROM {table} WHERE study_id = ?1"
        ))?;
        let rows = stmt
            .query_map([study_id as i64], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let mut out = BTreeMap::new();
        for (k, v) in rows {
            let parsed = codec::parse_json(&format!("study attribute `{k}`"), &v)?;
            out.insert(k, parsed);
        }
        Ok(out)
    }

    fn set_study_attr(&self, table: &str, study_id: u64, key: &str, value: &Value) -> OpResult<()> {
        if !self.study_exists(study_id)? {
            return Err(Error::StudyNotFound(format!("<id {study_id}>")).into());
        }
        self.counters.statement();
        self.conn
            .prepare_cached(&format!(
                "INSERT INTO {table} (study_id, \"key\", value_json) VALUES (?1, ?2, ?3) \
                 ON CONFLICT (study_id, \"key\") DO UPDATE SET value_json = excluded.value_json"
            ))?
            .execute(params![study_id as i64, key, codec::python_json(value)])?;
        self.counters.commit();
        Ok(())
    }

    /// Sets a trial attribute if the trial is not finished (one autocommit statement).
    fn set_trial_attr(
        &mut self,
        table: &str,
        trial_id: u64,
        key: &str,
        value: &Value,
    ) -> OpResult<()> {
        self.counters.statement();
        let changed = self
            .conn
            .prepare_cached(&format!(
                "INSERT INTO {table} (trial_id, \"key\", value_json) SELECT ?1, ?2, ?3 \
                 WHERE EXISTS (SELECT 1 FROM trials WHERE trial_id = ?1 AND state IN ('RUNNING', 'WAITING')) \
                 ON CONFLICT (trial_id, \"key\") DO UPDATE SET value_json = excluded.value_json"
            ))?
            .execute(params![trial_id as i64, key, codec::python_json(value)])?;
        if changed == 0 {
            return Err(self.not_writable(trial_id)?);
        }
        self.counters.commit();
        Ok(())
    }
}

fn read_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TrialRow> {
    Ok(TrialRow {
        id: r.get(0)?,
        number: r.get(1)?,
        state: r.get(2)?,
        start: r.get(3)?,
        complete: r.get(4)?,
    })
}

/// Inserts a trial's params, values, intermediate values and attributes (inside a transaction).
fn insert_details(conn: &Connection, c: &Counters, id: i64, t: &FrozenTrial) -> OpResult<()> {
    for (name, x) in &t.internal_params {
        let dist = t.distributions.get(name).ok_or_else(|| {
            Error::InvalidOperation(format!("template parameter `{name}` has no distribution"))
        })?;
        c.statement();
        conn.prepare_cached(
            "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![id, name, x, dist.to_json()])?;
    }
    if let Some(values) = &t.values {
        insert_values(conn, c, id, values)?;
    }
    for (step, v) in &t.intermediate_values {
        let (x, kind) = codec::encode_float(*v);
        c.statement();
        conn.prepare_cached(
            "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) \
             VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute(params![id, *step as i64, x, kind])?;
    }
    for (table, attrs) in [
        ("trial_user_attributes", &t.user_attrs),
        ("trial_system_attributes", &t.system_attrs),
    ] {
        for (k, v) in attrs {
            c.statement();
            conn.prepare_cached(&format!(
                "INSERT INTO {table} (trial_id, \"key\", value_json) VALUES (?1, ?2, ?3)"
            ))?
            .execute(params![id, k, codec::python_json(v)])?;
        }
    }
    Ok(())
}

fn insert_values(conn: &Connection, c: &Counters, id: i64, values: &[f64]) -> OpResult<()> {
    for (objective, v) in values.iter().enumerate() {
        let (x, kind) = codec::encode_float(*v);
        c.statement();
        conn.prepare_cached("INSERT INTO trial_values (trial_id, objective, value, value_type) VALUES (?1, ?2, ?3, ?4)")?
            .execute(params![id, objective as i64, x, kind])?;
    }
    Ok(())
}

impl Storage for SqliteStorage {
    fn create_study(&self, name: &str, directions: &[Direction]) -> Result<u64> {
        self.op(|db| {
            db.write_txn(|conn, c| {
                c.statement();
                let inserted = conn
                    .prepare_cached("INSERT INTO studies (study_name) VALUES (?1) ON CONFLICT DO NOTHING RETURNING study_id")?
                    .query_row([name], |r| r.get::<_, i64>(0))
                    .optional()?;
                let Some(id) = inserted else {
                    return Err(Error::StudyExists(name.to_owned()).into());
                };
                for (objective, d) in directions.iter().enumerate() {
                    c.statement();
                    conn.prepare_cached(
                        "INSERT INTO study_directions (direction, study_id, objective) VALUES (?1, ?2, ?3)",
                    )?
                    .execute(params![d.as_str(), id, objective as i64])?;
                }
                Ok(id as u64)
            })
        })
    }

    fn find_study(&self, name: &str) -> Result<Option<StudySummary>> {
        self.op(|db| {
            db.counters.statement();
            let id: Option<i64> = db
                .conn
                .prepare_cached("SELECT study_id FROM studies WHERE study_name = ?1")?
                .query_row([name], |r| r.get(0))
                .optional()?;
            match id {
                None => Ok(None),
                Some(id) => Ok(Some(StudySummary {
                    id: id as u64,
                    name: name.to_owned(),
                    directions: db.directions(id)?,
                })),
            }
        })
    }

    fn studies(&self) -> Result<Vec<StudySummary>> {
        self.op(|db| {
            db.counters.statement();
            let rows = db
                .conn
                .prepare_cached("SELECT study_id, study_name FROM studies ORDER BY study_id")?
                .query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            rows.into_iter()
                .map(|(id, name)| {
                    Ok(StudySummary {
                        id: id as u64,
                        name,
                        directions: db.directions(id)?,
                    })
                })
                .collect()
        })
    }

    fn delete_study(&self, study_id: u64) -> Result<()> {
        self.op(|db| {
            db.write_txn(|conn, c| {
                let sid = study_id as i64;
                c.statement();
                let found = conn
                    .prepare_cached("SELECT 1 FROM studies WHERE study_id = ?1")?
                    .query_row([sid], |_| Ok(()))
                    .optional()?;
                if found.is_none() {
                    return Err(Error::StudyNotFound(format!("<id {study_id}>")).into());
                }
                for table in [
                    "trial_params",
                    "trial_values",
                    "trial_intermediate_values",
                    "trial_user_attributes",
                    "trial_system_attributes",
                    "trial_heartbeats",
                ] {
                    c.statement();
                    conn.execute(
                        &format!("DELETE FROM {table} WHERE trial_id IN (SELECT trial_id FROM trials WHERE study_id = ?1)"),
                        [sid],
                    )?;
                }
                for table in ["trials", "study_directions", "study_user_attributes", "study_system_attributes", "studies"]
                {
                    c.statement();
                    conn.execute(&format!("DELETE FROM {table} WHERE study_id = ?1"), [sid])?;
                }
                Ok(())
            })?;
            db.caches.remove(&study_id);
            Ok(())
        })
    }

    fn set_study_user_attr(&self, study_id: u64, key: &str, value: &Value) -> Result<()> {
        self.op(|db| db.set_study_attr("study_user_attributes", study_id, key, value))
    }

    fn set_study_system_attr(&self, study_id: u64, key: &str, value: &Value) -> Result<()> {
        self.op(|db| db.set_study_attr("study_system_attributes", study_id, key, value))
    }

    fn study_user_attrs(&self, study_id: u64) -> Result<BTreeMap<String, Value>> {
        self.op(|db| {
            if !db.study_exists(study_id)? {
                return Err(Error::StudyNotFound(format!("<id {study_id}>")).into());
            }
            db.study_attrs("study_user_attributes", study_id)
        })
    }

    fn study_system_attrs(&self, study_id: u64) -> Result<BTreeMap<String, Value>> {
        self.op(|db| {
            if !db.study_exists(study_id)? {
                return Err(Error::StudyNotFound(format!("<id {study_id}>")).into());
            }
            db.study_attrs("study_system_attributes", study_id)
        })
    }

    fn create_trial(&self, study_id: u64, template: Option<&FrozenTrial>) -> Result<FrozenTrial> {
        let now = codec::now();
        let mut t = match template {
            Some(tpl) => {
                let mut t = tpl.clone();
                match t.state {
                    TrialState::Running => t.datetime_start = Some(now),
                    TrialState::Waiting => t.datetime_start = None,
                    _ => {}
                }
                if t.state.is_finished() && t.datetime_complete.is_none() {
                    t.datetime_complete = Some(now);
                }
                t
            }
            None => {
                let mut t = FrozenTrial::new(0, 0, TrialState::Running);
                t.datetime_start = Some(now);
                t
            }
        };
        let start = t.datetime_start.map(codec::format_datetime);
        let complete = t.datetime_complete.map(codec::format_datetime);
        let insert = |conn: &Connection, c: &Counters| -> OpResult<(i64, i64)> {
            c.statement();
            conn.prepare_cached(
                "INSERT INTO trials (number, study_id, state, datetime_start, datetime_complete) \
                 SELECT (SELECT COUNT(*) FROM trials WHERE study_id = ?1), ?1, ?2, ?3, ?4 \
                 WHERE EXISTS (SELECT 1 FROM studies WHERE study_id = ?1) \
                 RETURNING trial_id, number",
            )?
            .query_row(
                params![study_id as i64, t.state.as_str(), start, complete],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?
            .ok_or_else(|| Error::StudyNotFound(format!("<id {study_id}>")).into())
        };
        let is_bare = template.is_none_or(|tpl| {
            tpl.internal_params.is_empty()
                && tpl.values.is_none()
                && tpl.intermediate_values.is_empty()
                && tpl.user_attrs.is_empty()
                && tpl.system_attrs.is_empty()
        });
        let (id, number) = self.op(|db| {
            if is_bare {
                // One autocommit statement: the number is computed under the write lock.
                let out = insert(&db.conn, &db.counters)?;
                db.counters.commit();
                Ok(out)
            } else {
                db.write_txn(|conn, c| {
                    let (id, number) = insert(conn, c)?;
                    insert_details(conn, c, id, &t)?;
                    Ok((id, number))
                })
            }
        })?;
        t.id = id as u64;
        t.number = number as u64;
        if t.state == TrialState::Running {
            self.lock()?.owned.insert(t.id, (study_id, t.clone()));
        }
        Ok(t)
    }

    fn claim_waiting_trial(&self, study_id: u64) -> Result<Option<FrozenTrial>> {
        self.op(|db| {
            // A lock-free read first: most of the time there is nothing to claim.
            db.counters.statement();
            let waiting = db
                .conn
                .prepare_cached("SELECT 1 FROM trials WHERE study_id = ?1 AND state = 'WAITING' LIMIT 1")?
                .query_row([study_id as i64], |_| Ok(()))
                .optional()?;
            if waiting.is_none() {
                return Ok(None);
            }
            let now = codec::format_datetime(codec::now());
            db.counters.statement();
            let claimed: Option<i64> = db
                .conn
                .prepare_cached(
                    "UPDATE trials SET state = 'RUNNING', datetime_start = ?2 WHERE trial_id = \
                     (SELECT trial_id FROM trials WHERE study_id = ?1 AND state = 'WAITING' ORDER BY number LIMIT 1) \
                     AND state = 'WAITING' RETURNING trial_id",
                )?
                .query_row(params![study_id as i64, now], |r| r.get(0))
                .optional()?;
            db.counters.commit();
            let Some(id) = claimed else { return Ok(None) };
            let row = db.trial_row(id as u64)?.ok_or(Error::TrialNotFound(id as u64))?;
            let t = db.load(vec![row])?.pop().ok_or(Error::TrialNotFound(id as u64))?;
            db.owned.insert(t.id, (study_id, t.clone()));
            Ok(Some(t))
        })
    }

    fn set_trial_param(
        &self,
        trial_id: u64,
        name: &str,
        internal: f64,
        dist: &Distribution,
    ) -> Result<()> {
        if !dist.contains(internal) {
            return Err(Error::OutOfDistribution {
                value: internal.to_string(),
                distribution: dist.to_json(),
            });
        }
        let json = dist.to_json();
        self.op(|db| {
            db.counters.statement();
            let changed = db
                .conn
                .prepare_cached(
                    "INSERT INTO trial_params (trial_id, param_name, param_value, distribution_json) \
                     SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM trials WHERE trial_id = ?1 AND state = 'RUNNING') \
                     ON CONFLICT (trial_id, param_name) DO UPDATE SET param_value = excluded.param_value, \
                     distribution_json = excluded.distribution_json",
                )?
                .execute(params![trial_id as i64, name, internal, json])?;
            if changed == 0 {
                db.owned.remove(&trial_id);
                return Err(db.not_writable(trial_id)?);
            }
            db.counters.commit();
            if let Some((_, t)) = db.owned.get_mut(&trial_id) {
                t.internal_params.insert(name.to_owned(), internal);
                t.distributions.insert(name.to_owned(), dist.clone());
            }
            Ok(())
        })
    }

    fn set_trial_intermediate_value(&self, trial_id: u64, step: u64, value: f64) -> Result<()> {
        let (x, kind) = codec::encode_float(value);
        self.op(|db| {
            db.counters.statement();
            let changed = db
                .conn
                .prepare_cached(
                    "INSERT INTO trial_intermediate_values (trial_id, step, intermediate_value, intermediate_value_type) \
                     SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM trials WHERE trial_id = ?1 AND state = 'RUNNING') \
                     ON CONFLICT (trial_id, step) DO UPDATE SET intermediate_value = excluded.intermediate_value, \
                     intermediate_value_type = excluded.intermediate_value_type",
                )?
                .execute(params![trial_id as i64, step as i64, x, kind])?;
            if changed == 0 {
                db.owned.remove(&trial_id);
                return Err(db.not_writable(trial_id)?);
            }
            db.counters.commit();
            if let Some((_, t)) = db.owned.get_mut(&trial_id) {
                t.intermediate_values.insert(step, value);
            }
            Ok(())
        })
    }

    fn set_trial_user_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()> {
        self.op(|db| {
            db.set_trial_attr("trial_user_attributes", trial_id, key, value)?;
            if let Some((_, t)) = db.owned.get_mut(&trial_id) {
                t.user_attrs.insert(key.to_owned(), value.clone());
            }
            Ok(())
        })
    }

    fn set_trial_system_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()> {
        self.op(|db| {
            db.set_trial_attr("trial_system_attributes", trial_id, key, value)?;
            if let Some((_, t)) = db.owned.get_mut(&trial_id) {
                t.system_attrs.insert(key.to_owned(), value.clone());
            }
            Ok(())
        })
    }

    fn finish_trial(
        &self,
        trial_id: u64,
        state: TrialState,
        values: Option<&[f64]>,
        system_attrs: &[(String, Value)],
    ) -> Result<Arc<FrozenTrial>> {
        crate::storage::require_finished(state)?;
        let now = codec::now();
        let complete = codec::format_datetime(now);
        self.op(|db| {
            let updated = db.write_txn(|conn, c| {
                c.statement();
                let changed = conn
                    .prepare_cached(
                        "UPDATE trials SET state = ?2, datetime_complete = ?3 WHERE trial_id = ?1 AND state = 'RUNNING'",
                    )?
                    .execute(params![trial_id as i64, state.as_str(), complete])?;
                if changed == 0 {
                    return Ok(false);
                }
                if let Some(vs) = values {
                    insert_values(conn, c, trial_id as i64, vs)?;
                }
                for (k, v) in system_attrs {
                    c.statement();
                    conn.prepare_cached(
                        "INSERT INTO trial_system_attributes (trial_id, \"key\", value_json) VALUES (?1, ?2, ?3) \
                         ON CONFLICT (trial_id, \"key\") DO UPDATE SET value_json = excluded.value_json",
                    )?
                    .execute(params![trial_id as i64, k, codec::python_json(v)])?;
                }
                Ok(true)
            })?;
            if !updated {
                db.owned.remove(&trial_id);
                return Err(db.not_writable(trial_id)?);
            }
            match db.owned.remove(&trial_id) {
                Some((study_id, mut t)) => {
                    t.state = state;
                    t.values = values.map(<[f64]>::to_vec);
                    t.datetime_complete = Some(now);
                    for (k, v) in system_attrs {
                        t.system_attrs.insert(k.clone(), v.clone());
                    }
                    // Finished trials never change: the next read need not load it.
                    let t = Arc::new(t);
                    db.caches.entry(study_id).or_default().finished.insert(t.number, Arc::clone(&t));
                    Ok(t)
                }
                None => {
                    let row = db.trial_row(trial_id)?.ok_or(Error::TrialNotFound(trial_id))?;
                    Ok(Arc::new(db.load(vec![row])?.pop().ok_or(Error::TrialNotFound(trial_id))?))
                }
            }
        })
    }

    fn trial(&self, trial_id: u64) -> Result<Arc<FrozenTrial>> {
        self.op(|db| {
            if let Some((_, t)) = db.owned.get(&trial_id) {
                return Ok(Arc::new(t.clone()));
            }
            let row = db
                .trial_row(trial_id)?
                .ok_or(Error::TrialNotFound(trial_id))?;
            let t = db
                .load(vec![row])?
                .pop()
                .ok_or(Error::TrialNotFound(trial_id))?;
            Ok(Arc::new(t))
        })
    }

    fn trials(&self, study_id: u64) -> Result<Vec<Arc<FrozenTrial>>> {
        self.op(|db| {
            if !db.caches.contains_key(&study_id) && !db.study_exists(study_id)? {
                return Err(Error::StudyNotFound(format!("<id {study_id}>")).into());
            }
            let low_water = db.caches.get(&study_id).map_or(0, |c| c.low_water);
            db.counters.statement();
            let rows = db
                .conn
                .prepare_cached(
                    "SELECT trial_id, number, state, datetime_start, datetime_complete FROM trials \
                     WHERE study_id = ?1 AND trial_id >= ?2",
                )?
                .query_map(params![study_id as i64, low_water], read_row)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let cache = db.caches.get(&study_id);
            let mut current: Vec<Arc<FrozenTrial>> = Vec::new();
            let mut to_load = Vec::new();
            let mut new_low = i64::MAX;
            let mut max_id = low_water - 1;
            for row in rows {
                max_id = max_id.max(row.id);
                if cache.is_some_and(|c| c.finished.contains_key(&(row.number as u64))) {
                    continue;
                }
                let finished = row.state.parse::<TrialState>()?.is_finished();
                if !finished {
                    new_low = new_low.min(row.id);
                }
                match db.owned.get(&(row.id as u64)) {
                    Some((_, t)) if row.state == "RUNNING" => current.push(Arc::new(t.clone())),
                    _ => to_load.push(row),
                }
            }
            let loaded = db.load(to_load)?;
            let cache = db.caches.entry(study_id).or_default();
            for t in loaded {
                if t.state.is_finished() {
                    db.owned.remove(&t.id);
                    cache.finished.insert(t.number, Arc::new(t));
                } else {
                    current.push(Arc::new(t));
                }
            }
            cache.low_water = if new_low == i64::MAX {
                max_id + 1
            } else {
                new_low
            };
            let mut all: Vec<Arc<FrozenTrial>> = cache.finished.values().cloned().collect();
            if !current.is_empty() {
                all.extend(current);
                all.sort_by_key(|t| t.number);
            }
            Ok(all)
        })
    }

    fn record_heartbeat(&self, trial_id: u64) -> Result<()> {
        let now = codec::format_datetime(codec::now());
        self.op(|db| {
            db.counters.statement();
            let changed = db
                .conn
                .prepare_cached(
                    "INSERT INTO trial_heartbeats (trial_id, heartbeat) SELECT ?1, ?2 \
                     WHERE EXISTS (SELECT 1 FROM trials WHERE trial_id = ?1 AND state = 'RUNNING') \
                     ON CONFLICT (trial_id) DO UPDATE SET heartbeat = excluded.heartbeat",
                )?
                .execute(params![trial_id as i64, now])?;
            if changed == 0 {
                return Err(db.not_writable(trial_id)?);
            }
            db.counters.commit();
            Ok(())
        })
    }

    fn stale_trials(&self, study_id: u64, grace: Duration) -> Result<Vec<u64>> {
        let now = codec::now();
        self.op(|db| {
            db.counters.statement();
            let rows = db
                .conn
                .prepare_cached(
                    "SELECT t.trial_id, h.heartbeat FROM trials t JOIN trial_heartbeats h ON h.trial_id = t.trial_id \
                     WHERE t.study_id = ?1 AND t.state = 'RUNNING' ORDER BY t.number",
                )?
                .query_map([study_id as i64], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let mut stale = Vec::new();
            for (id, hb) in rows {
                let beat = codec::parse_datetime(&hb)?;
                if (now - beat).to_std().is_ok_and(|age| age > grace) {
                    stale.push(id as u64);
                }
            }
            Ok(stale)
        })
    }
}

#[cfg(test)]
mod tests;
