//! Options and statistics of a [`SqliteStorage`](super::SqliteStorage).

use std::time::Duration;

/// Options for opening a [`SqliteStorage`](super::SqliteStorage).
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    pub(crate) busy_timeout: Duration,
    pub(crate) synchronous_full: bool,
    pub(crate) read_only: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            busy_timeout: Duration::from_secs(30),
            synchronous_full: false,
            read_only: false,
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

    /// Read-only mode (`?mode=ro` in a URL): the file must be an existing
    /// study database; not a byte of it is written and no `-wal` or `-shm`
    /// file is created (see [`SqliteStorage::open_read_only`](super::SqliteStorage::open_read_only)).
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }
}

/// Statements executed and transactions committed by a [`SqliteStorage`](super::SqliteStorage).
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
