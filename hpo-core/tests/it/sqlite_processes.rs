//! Several processes on one SQLite study file, and a worker killed mid-trial.
//!
//! The workers are this test binary re-invoked on the ignored test
//! `worker_process`, configured through environment variables.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).

use hpo_core::storage::SqliteStorage;
use hpo_core::trial::{FAILED_TRIAL_ATTR, RETRY_HISTORY_ATTR};
use hpo_core::{
    FailureKind, ParamValue, RandomSampler, RetryPolicy, Storage, Study, TrialError, TrialState,
};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const STUDY: &str = "shared";
const BEAT: Duration = Duration::from_millis(100);
const GRACE: Duration = Duration::from_millis(800);

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hpo-proc-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn spawn_worker(db: &Path, trials: usize, hang_at: Option<u64>, marker: Option<&Path>) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "sqlite_processes::worker_process",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env("HPO_WORKER_DB", db)
    .env("HPO_WORKER_TRIALS", trials.to_string())
    .stdout(Stdio::null());
    if let Some(n) = hang_at {
        cmd.env("HPO_WORKER_HANG_AT", n.to_string());
    }
    if let Some(m) = marker {
        cmd.env("HPO_WORKER_MARKER", m);
    }
    cmd.spawn().unwrap()
}

/// The study; `grace` is short only where a crash is simulated, so that a
/// worker stalled by a loaded machine is never mistaken for a dead one.
fn study(storage: Arc<dyn Storage>, seed: u64, grace: Duration) -> Study {
    Study::builder()
        .name(STUDY)
        .storage(storage)
        .sampler(RandomSampler::seeded(seed))
        .heartbeat(BEAT, grace)
        .retry(RetryPolicy { max_retries: 2 })
        .load_if_exists(true)
        .build()
        .unwrap()
}

/// The worker: runs `HPO_WORKER_TRIALS` trials on `HPO_WORKER_DB`; with
/// `HPO_WORKER_HANG_AT=n` it touches `HPO_WORKER_MARKER` and hangs in trial `n`.
#[test]
#[ignore = "run by the other tests as a separate process"]
fn worker_process() {
    let db = std::env::var("HPO_WORKER_DB").expect("HPO_WORKER_DB");
    let trials: usize = std::env::var("HPO_WORKER_TRIALS").unwrap().parse().unwrap();
    let hang_at: Option<u64> = std::env::var("HPO_WORKER_HANG_AT")
        .ok()
        .map(|s| s.parse().unwrap());
    let marker = std::env::var("HPO_WORKER_MARKER").ok();
    let storage: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&db).unwrap());
    let grace = if hang_at.is_some() {
        GRACE
    } else {
        Duration::from_secs(60)
    };
    let study = study(storage, u64::from(std::process::id()), grace);
    study
        .optimize(trials, |t| -> Result<f64, TrialError> {
            let x = t.suggest_float("x", -10.0, 10.0)?;
            let k = t.suggest_int("k", 1, 4)?;
            if Some(t.number()) == hang_at {
                std::fs::write(marker.as_deref().unwrap(), t.number().to_string()).unwrap();
                std::thread::sleep(Duration::from_secs(120));
            }
            Ok(x * x + k as f64)
        })
        .unwrap();
}

#[test]
fn four_processes_share_one_file_without_losing_a_trial() {
    let dir = temp_dir("four");
    let db = dir.join("study.db");
    // Create the file and study first, so the workers all resume it, with 40
    // enqueued trials the workers race to claim.
    let setup = study(Arc::new(SqliteStorage::open(&db).unwrap()), 0, GRACE);
    for i in 0..40 {
        setup
            .enqueue([("x", ParamValue::from(f64::from(i) / 4.0 - 5.0))])
            .unwrap();
    }
    let workers: Vec<Child> = (0..4).map(|_| spawn_worker(&db, 250, None, None)).collect();
    for mut w in workers {
        let status = w.wait().unwrap();
        assert!(status.success(), "a worker failed (lock error?): {status}");
    }
    let storage = SqliteStorage::open(&db).unwrap();
    let id = storage.find_study(STUDY).unwrap().unwrap().id;
    let trials = storage.trials(id).unwrap();
    assert_eq!(trials.len(), 1000, "4 x 250 trials");
    for (i, t) in trials.iter().enumerate() {
        assert_eq!(t.number, i as u64, "numbers are unique and contiguous");
        assert_eq!(t.state, TrialState::Complete, "trial {i}");
        assert_eq!(t.internal_params.len(), 2, "trial {i}");
        assert!(t.value().is_some());
        if i < 40 {
            let fixed = f64::from(i as u32) / 4.0 - 5.0;
            assert_eq!(
                t.internal_params["x"], fixed,
                "enqueued trial {i} ran once, with its params"
            );
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_killed_workers_trial_is_reclaimed_and_retried() {
    let dir = temp_dir("kill");
    let db = dir.join("study.db");
    let marker = dir.join("hanging");
    let hang_at = 5;
    let mut worker = spawn_worker(&db, 100, Some(hang_at), Some(&marker));
    let t0 = Instant::now();
    while !marker.exists() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the worker never reached trial {hang_at}"
        );
        if let Some(status) = worker.try_wait().unwrap() {
            panic!("the worker exited early: {status}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    worker.kill().unwrap(); // SIGKILL: no destructors, no final write.
    worker.wait().unwrap();

    let storage: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&db).unwrap());
    let sid = storage.find_study(STUDY).unwrap().unwrap().id;
    let before = storage.trials(sid).unwrap();
    assert_eq!(before.len() as u64, hang_at + 1);
    let killed = before[hang_at as usize].clone();
    assert_eq!(
        killed.state,
        TrialState::Running,
        "left RUNNING by the killed worker"
    );
    // Wait (without asserting on time) until its heartbeat has expired.
    while storage.stale_trials(sid, GRACE).unwrap().is_empty() {
        std::thread::sleep(BEAT);
    }

    let resumed = study(Arc::clone(&storage), 7, GRACE);
    resumed
        .optimize(3, |t| -> Result<f64, TrialError> {
            let x = t.suggest_float("x", -10.0, 10.0)?;
            let k = t.suggest_int("k", 1, 4)?;
            Ok(x * x + k as f64)
        })
        .unwrap();

    let after = resumed.trials().unwrap();
    for t in &before[..hang_at as usize] {
        assert_eq!(
            after[t.number as usize], *t,
            "COMPLETE trial {} survives unchanged",
            t.number
        );
    }
    let failed = &after[hang_at as usize];
    assert_eq!(failed.state, TrialState::Fail);
    assert_eq!(failed.failure(), Some(FailureKind::Stale));
    let retry = &after[hang_at as usize + 1];
    assert_eq!(retry.state, TrialState::Complete, "the copy ran first");
    assert_eq!(
        retry.internal_params, killed.internal_params,
        "same parameters"
    );
    assert_eq!(retry.system_attrs[FAILED_TRIAL_ATTR], json!(hang_at));
    assert_eq!(retry.system_attrs[RETRY_HISTORY_ATTR], json!([hang_at]));
    assert_eq!(after.len() as u64, hang_at + 4);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A trial handed to another process (the process executor's workers) is
/// read from the file afterwards, not from the creator's in-memory copy.
#[test]
fn a_released_trial_is_read_from_the_file() {
    let dir = temp_dir("release");
    let db = dir.join("study.db");
    let creator = SqliteStorage::open(&db).unwrap();
    let worker = SqliteStorage::open(&db).unwrap();
    let study_id = creator
        .create_study("handed", &[hpo_core::Direction::Minimize])
        .unwrap();
    let t = creator.start_trial(study_id, true).unwrap();
    creator.release_trial(t.id).unwrap();
    worker
        .finish_trial(t.id, TrialState::Complete, Some(&[1.0]), &[])
        .unwrap();
    assert_eq!(creator.trial(t.id).unwrap().state, TrialState::Complete);
    // Without the release the creator would still see its own copy.
    let kept = creator.start_trial(study_id, true).unwrap();
    worker
        .finish_trial(kept.id, TrialState::Complete, Some(&[2.0]), &[])
        .unwrap();
    assert_eq!(creator.trial(kept.id).unwrap().state, TrialState::Running);
}
