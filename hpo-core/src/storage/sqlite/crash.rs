//! Test-only crash injection (feature `testing`): with the environment
//! variable [`CRASH_AT_WRITE_ENV`] set to `k`, the process aborts at its k-th
//! write to a SQLite storage, counting every changed row and every commit
//! (SQLite's update and commit hooks, so no write path can be missed).
//!
//! The crash-point test (`tests/it/crash_points.rs`) runs a study in a child
//! process for k = 1, 2, ... until the study completes, and checks what each
//! crash leaves. A hook that fires during a row change or just before a
//! commit is a crash inside the transaction; a crash just after a commit is
//! the crash before the next write.

use rusqlite::hooks::Action;
use rusqlite::Connection;
use std::sync::atomic::{AtomicU64, Ordering};

/// The variable that arms the crash: the 1-based index of the write to die at.
pub(super) const CRASH_AT_WRITE_ENV: &str = "HPO_TEST_CRASH_AT_WRITE";

/// Writes counted so far in this process, over all connections.
static WRITES: AtomicU64 = AtomicU64::new(0);

/// Installs the hooks on `conn` when [`CRASH_AT_WRITE_ENV`] is set.
pub(super) fn arm(conn: &mut Connection) -> rusqlite::Result<()> {
    let Some(k) = std::env::var(CRASH_AT_WRITE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    else {
        return Ok(());
    };
    let hit = move || {
        if WRITES.fetch_add(1, Ordering::SeqCst) + 1 == k {
            std::process::abort();
        }
    };
    conn.update_hook(Some(move |_: Action, _: &str, _: &str, _: i64| hit()))?;
    conn.commit_hook(Some(move || {
        hit();
        false
    }))?;
    Ok(())
}
