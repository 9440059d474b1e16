//! Read-only mode: not a byte written, no `-wal`/`-shm` left, writes refused;
//! and a writer that leaves an Optuna file's journal mode as it found it.

use hpo_core::storage::{storage_from_url, SqliteStorage};
use hpo_core::{Direction, Error, Storage, TrialState};
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

fn dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hpo-ro-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", path.display()))
}

fn fixture_copy(d: &Path) -> PathBuf {
    let p = d.join("optuna.db");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/optuna_5_0_schema_ref.db"),
        &p,
    )
    .unwrap();
    let mut perms = std::fs::metadata(&p).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&p, perms).unwrap();
    p
}

/// A study file written by hpo (WAL mode), closed.
fn hpo_file(d: &Path) -> PathBuf {
    let p = d.join("hpo.db");
    let s = SqliteStorage::open(&p).unwrap();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    for i in 0..5 {
        let t = s.create_trial(id, None).unwrap();
        s.finish_trial(t.id, TrialState::Complete, Some(&[f64::from(i)]), &[])
            .unwrap();
    }
    drop(s);
    p
}

fn snapshot(p: &Path) -> (Vec<u8>, SystemTime) {
    (
        std::fs::read(p).unwrap(),
        std::fs::metadata(p).unwrap().modified().unwrap(),
    )
}

/// Reads everything through a read-only handle, tries a write, and checks
/// the file is byte for byte and time for time as it was, alone.
fn read_without_writing(p: &Path, open: impl Fn(&Path) -> std::sync::Arc<dyn Storage>) -> usize {
    let before = snapshot(p);
    let s = open(p);
    let mut n = 0;
    for study in s.studies().unwrap() {
        n += s.trials(study.id).unwrap().len();
        s.study_user_attrs(study.id).unwrap();
    }
    let first = s.studies().unwrap()[0].id;
    let err = s.create_trial(first, None).unwrap_err();
    assert!(matches!(err, Error::StorageReadOnly { .. }), "{err}");
    assert!(err.to_string().contains("opened read-only"), "{err}");
    assert!(s.create_study("new", &[Direction::Minimize]).is_err());
    drop(s);
    assert_eq!(snapshot(p), before, "the file was written");
    for suffix in ["-wal", "-shm", "-journal"] {
        assert!(!sibling(p, suffix).exists(), "{suffix} left behind");
    }
    n
}

#[test]
fn read_only_never_writes_a_byte() {
    let d = dir("bytes");
    let hpo = hpo_file(&d);
    let optuna = fixture_copy(&d);
    for p in [&hpo, &optuna] {
        let n = read_without_writing(p, |p| {
            std::sync::Arc::new(SqliteStorage::open_read_only(p).unwrap())
        });
        assert!(n > 0);
        let url = format!("sqlite:{}?mode=ro", p.display());
        let m = read_without_writing(p, |_| storage_from_url(&url).unwrap());
        assert_eq!(n, m);
    }
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn read_only_refuses_missing_and_empty_files_without_creating_them() {
    let d = dir("missing");
    let p = d.join("nothing.db");
    let err = SqliteStorage::open_read_only(&p).unwrap_err().to_string();
    assert!(err.contains("does not exist"), "{err}");
    assert!(!p.exists(), "a file was created");
    std::fs::write(&p, b"").unwrap();
    let err = SqliteStorage::open_read_only(&p).unwrap_err().to_string();
    assert!(err.contains("is empty"), "{err}");
    assert_eq!(std::fs::read(&p).unwrap().len(), 0);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn read_only_follows_a_live_writer() {
    let d = dir("live");
    let p = hpo_file(&d);
    // Opened while no writer runs: an immutable handle.
    let reader = SqliteStorage::open_read_only(&p).unwrap();
    let id = reader.find_study("s").unwrap().unwrap().id;
    assert_eq!(reader.trials(id).unwrap().len(), 5);
    // A writer starts: the reader sees its commits.
    let writer = SqliteStorage::open(&p).unwrap();
    let t = writer.create_trial(id, None).unwrap();
    writer
        .finish_trial(t.id, TrialState::Complete, Some(&[9.0]), &[])
        .unwrap();
    assert_eq!(reader.trials(id).unwrap().len(), 6);
    // A reader opened while the writer runs reads through its WAL.
    let second = SqliteStorage::open_read_only(&p).unwrap();
    assert_eq!(second.trials(id).unwrap().len(), 6);
    let t = writer.create_trial(id, None).unwrap();
    assert_eq!(second.trials(id).unwrap().len(), 7);
    assert_eq!(second.trial(t.id).unwrap().state, TrialState::Running);
    drop(second);
    drop(reader);
    drop(writer);
    // The writer, last to close, leaves the file alone.
    assert!(!sibling(&p, "-wal").exists());
    assert!(!sibling(&p, "-shm").exists());
    std::fs::remove_dir_all(&d).unwrap();
}

fn journal_mode(p: &Path) -> String {
    let c = Connection::open(p).unwrap();
    c.query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap()
}

#[test]
fn a_writer_leaves_an_optuna_files_journal_mode_as_it_found_it() {
    let d = dir("journal");
    let p = fixture_copy(&d);
    assert_eq!(journal_mode(&p), "delete");
    let header = |p: &Path| std::fs::read(p).unwrap()[18..20].to_vec();
    assert_eq!(header(&p), vec![1, 1], "rollback-journal file format");
    {
        let s = SqliteStorage::open(&p).unwrap();
        let id = s.find_study("single_obj").unwrap().unwrap().id;
        let t = s.create_trial(id, None).unwrap();
        s.finish_trial(t.id, TrialState::Complete, Some(&[0.5]), &[])
            .unwrap();
        assert_eq!(header(&p), vec![2, 2], "WAL while writing");
    }
    assert_eq!(header(&p), vec![1, 1], "back to rollback-journal mode");
    assert_eq!(journal_mode(&p), "delete");
    assert!(!sibling(&p, "-wal").exists());
    // What was written is there.
    let s = SqliteStorage::open_read_only(&p).unwrap();
    let id = s.find_study("single_obj").unwrap().unwrap().id;
    assert_eq!(
        s.trials(id).unwrap().last().unwrap().values,
        Some(vec![0.5])
    );
    drop(s);
    // hpo's own files stay in WAL mode.
    let own = hpo_file(&d);
    assert_eq!(journal_mode(&own), "wal");
    std::fs::remove_dir_all(&d).unwrap();
}
