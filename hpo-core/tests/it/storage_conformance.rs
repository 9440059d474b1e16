//! The storage conformance suite against every storage in hpo-core.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).

use hpo_core::storage::{InMemoryStorage, SqliteStorage};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh database file per call, under the target's temporary directory.
fn fresh_file() -> SqliteStorage {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir: PathBuf = std::env::temp_dir().join(format!("hpo-conformance-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.db", N.fetch_add(1, Ordering::SeqCst)));
    let _ = std::fs::remove_file(&path);
    SqliteStorage::open(path).unwrap()
}

fn sqlite_in_memory() -> SqliteStorage {
    SqliteStorage::in_memory().unwrap()
}

hpo_core::storage_conformance_tests!(in_memory, InMemoryStorage::new);
hpo_core::storage_conformance_tests!(sqlite_memory, sqlite_in_memory);
hpo_core::storage_conformance_tests!(sqlite_file, fresh_file);

#[test]
fn run_all_covers_every_property() {
    hpo_core::storage::conformance::run_all(InMemoryStorage::new);
}
