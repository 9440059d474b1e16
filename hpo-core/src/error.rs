//! The one error type of `hpo-core`.

use std::path::PathBuf;

/// Result with [`Error`] as the default error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the study engine.
///
/// Messages name the offending value and, where there is one, the fix.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A distribution's parameters are inconsistent (for example `low > high`).
    #[error("invalid distribution: {0}")]
    InvalidDistribution(String),

    /// A value is not inside the distribution it was checked against.
    #[error("value {value} is outside the distribution {distribution}")]
    OutOfDistribution {
        /// The value, as text.
        value: String,
        /// The distribution, as Optuna-style JSON.
        distribution: String,
    },

    /// A narrowed support (from a search-space constraint) leaves nothing to sample.
    #[error("empty support for parameter `{name}`: {reason}")]
    EmptySupport {
        /// The parameter.
        name: String,
        /// Why the support is empty.
        reason: String,
    },

    /// The same parameter name was suggested twice with different distributions.
    #[error(
        "parameter `{name}` was already suggested in trial {trial} with {previous}; \
         it cannot be suggested again with {requested}"
    )]
    ConflictingDistribution {
        /// The parameter.
        name: String,
        /// The trial number.
        trial: u64,
        /// The distribution it was first suggested with.
        previous: String,
        /// The conflicting distribution.
        requested: String,
    },

    /// `distribution_json` or another persisted JSON document could not be read.
    #[error("cannot parse {what}: {reason}")]
    Parse {
        /// What was being parsed.
        what: String,
        /// Why it failed.
        reason: String,
        /// The parser's own error (JSON, TOML, dates), when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },

    /// No study has this id in the storage (it was deleted, or the id comes
    /// from another storage).
    #[error("no study with id {0} in this storage; it may have been deleted by another process")]
    StudyIdNotFound(u64),

    /// A study with this name does not exist in the storage.
    #[error(
        "no study named `{0}` in this storage; create it, or check the name and the storage URL"
    )]
    StudyNotFound(String),

    /// A study with this name exists and `load_if_exists` was false.
    #[error(
        "a study named `{0}` already exists; set `load_if_exists(true)` to resume it, \
         or choose another name"
    )]
    StudyExists(String),

    /// The study's stored directions differ from the ones requested.
    #[error("study `{name}` was created with directions {stored:?}, not {requested:?}")]
    DirectionMismatch {
        /// Study name.
        name: String,
        /// Directions in the storage.
        stored: Vec<crate::Direction>,
        /// Directions asked for.
        requested: Vec<crate::Direction>,
    },

    /// No trial with this id exists.
    #[error("no trial with id {0} in this storage")]
    TrialNotFound(u64),

    /// A trial was modified after it finished, or finished twice.
    #[error("trial {number} is already {state:?} and can no longer be changed")]
    TrialFinished {
        /// The trial number.
        number: u64,
        /// Its state.
        state: crate::TrialState,
    },

    /// An operation that needs a finished trial found none.
    #[error("study `{0}` has no completed trial yet")]
    NoCompletedTrials(String),

    /// An operation is not valid for this study (for example `best_trial` on a
    /// multi-objective study).
    #[error("{0}")]
    InvalidOperation(String),

    /// A configuration value (sampler, pruner, study option) is invalid.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),

    /// A storage URL is malformed or names an unknown scheme.
    #[error("invalid storage URL `{url}`: {reason}")]
    InvalidStorageUrl {
        /// The URL.
        url: String,
        /// Why it is rejected.
        reason: String,
    },

    /// A storage backend failed.
    #[error("storage error{}: {message}", path.as_ref().map(|p| format!(" on {}", p.display())).unwrap_or_default())]
    Storage {
        /// The file or database concerned, if any.
        path: Option<PathBuf>,
        /// What failed.
        message: String,
        /// Why, when a lower layer (SQLite, the operating system) said so.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },

    /// A storage file cannot be used: it is not SQLite, not a study database,
    /// has an unsupported schema version, or is read-only. Nothing was written to it.
    #[error("cannot use {} as a study database: it {reason}", path.display())]
    UnusableStorageFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it, and what to do.
        reason: String,
        /// Why, when the operating system or SQLite said so.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
    },

    /// A database server (PostgreSQL) failed or refused an operation. The
    /// target is the URL without its password.
    #[error("database error on {target}: {message}")]
    Database {
        /// The database, as a URL without the password.
        target: String,
        /// What failed, with the server's message (the whole chain of causes).
        message: String,
        /// What the server or the client library reported.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },

    /// A database (PostgreSQL) cannot be used as a study database: it holds
    /// other tables, or an Optuna schema of another version. Nothing was written.
    #[error("cannot use {target} as a study database: it {reason}")]
    UnusableDatabase {
        /// The database, as a URL without the password.
        target: String,
        /// What is wrong with it, and what to do.
        reason: String,
    },

    /// Another process held the database locked for longer than the busy
    /// timeout (SQLite's `SQLITE_BUSY`/`SQLITE_LOCKED` after every retry).
    #[error(
        "{} is locked by another process: its SQLite lock was still held after the busy \
         timeout of {timeout:?}; let that process finish (or stop it), or raise the timeout \
         (`?timeout=SECONDS` in the URL, `SqliteOptions::busy_timeout`)",
        path.display()
    )]
    StorageLocked {
        /// The database file.
        path: PathBuf,
        /// How long each attempt waited for the lock.
        timeout: std::time::Duration,
        /// SQLite's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// A storage opened read-only was asked to write.
    #[error(
        "cannot write to {}: the storage was opened read-only (`?mode=ro`, \
         `SqliteStorage::open_read_only`); open it without read-only mode to write",
        path.display()
    )]
    StorageReadOnly {
        /// The database file.
        path: PathBuf,
    },

    /// An artifact store's location cannot be used: an unsupported scheme, or
    /// a storage (in memory, PostgreSQL) with no folder beside it.
    #[error("no artifact store at `{location}`: {reason}")]
    ArtifactLocation {
        /// The location as given (a URL without its password).
        location: String,
        /// Why, and what to give instead.
        reason: String,
    },

    /// Reading or writing a file of an artifact store (or a file uploaded to
    /// it, or downloaded from it) failed.
    #[error("artifact store: {message} ({})", path.display())]
    ArtifactIo {
        /// The file or folder concerned.
        path: PathBuf,
        /// What was being done.
        message: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },

    /// An artifact id read from a trial's attributes is not a plain file
    /// name, so it cannot name a file inside the store; nothing was read.
    #[error(
        "artifact id `{id}` is refused: {reason}; an id is a plain file name of letters, \
         digits, `-`, `_` and `.` (the attribute may have been written by hand or corrupted)"
    )]
    InvalidArtifactId {
        /// The id, escaped for printing.
        id: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A trial has no artifact of this name.
    #[error(
        "trial {trial} has no artifact named `{name}`{}",
        if available.is_empty() { "; it has none".to_owned() } else { format!("; it has {}", available.join(", ")) }
    )]
    ArtifactNotFound {
        /// The trial number.
        trial: u64,
        /// The name asked for.
        name: String,
        /// The names it has.
        available: Vec<String>,
    },

    /// A trial's artifact is registered but its file is not in the store.
    #[error(
        "artifact `{name}` (id {id}) of trial {trial} is registered but its file is not in the \
         store {}: it was removed by a cleanup policy (`ArtifactStore::clean`) or by hand, or \
         the store is not the one the trial uploaded to",
        store.display()
    )]
    ArtifactRemoved {
        /// The trial number.
        trial: u64,
        /// The artifact's name.
        name: String,
        /// The artifact's id (its file name in the store).
        id: String,
        /// The store's folder.
        store: PathBuf,
    },

    /// SIGINT or SIGTERM stopped the study (with the handlers of
    /// [`signals::install`](crate::signals::install)): nothing new was
    /// started, and the trials still running were failed as
    /// [`FailureKind::Interrupted`](crate::FailureKind::Interrupted), each with
    /// its WAITING retry copy. A program ends with
    /// [`StopSignal::exit_code`](crate::signals::StopSignal::exit_code).
    #[error(
        "the study was stopped by {signal}: nothing new was started and its running trials \
         were failed as interrupted, each re-enqueued for the next run; exit with status {}",
        signal.exit_code()
    )]
    Interrupted {
        /// The signal that stopped it.
        signal: crate::signals::StopSignal,
    },

    /// A signal handler could not be installed.
    #[error("{message}: {source}")]
    Signals {
        /// What was being done.
        message: String,
        /// What the operating system said.
        #[source]
        source: std::io::Error,
    },

    /// A lock guarding shared state was poisoned by a panic in another thread.
    #[error("internal state poisoned by a panic in another thread: {0}")]
    Poisoned(String),
}

impl Error {
    /// A storage error without a path or a cause.
    pub fn storage(message: impl Into<String>) -> Self {
        Error::Storage {
            path: None,
            message: message.into(),
            source: None,
        }
    }

    /// A storage error without a path, keeping its cause.
    pub fn storage_caused(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Storage {
            path: None,
            message: message.into(),
            source: Some(Box::new(source)),
        }
    }
}

impl<T> From<std::sync::PoisonError<T>> for Error {
    fn from(e: std::sync::PoisonError<T>) -> Self {
        Error::Poisoned(e.to_string())
    }
}
