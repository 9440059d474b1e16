//! Many processes ("machines") on one PostgreSQL study, and a worker killed
//! mid-trial.
//!
//! The workers are this test binary re-invoked on the ignored test
//! `postgres_processes::worker_process`, configured through environment
//! variables; each connects under its own `application_name`
//! (`machine-<i>`), as separate machines would.

use crate::postgres_server::TestDb;
use hpo_core::storage::PostgresStorage;
use hpo_core::trial::{FAILED_TRIAL_ATTR, RETRY_HISTORY_ATTR};
use hpo_core::{
    FailureKind, ParamValue, RandomSampler, RetryPolicy, Storage, Study, TrialError, TrialState,
};
use serde_json::json;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const STUDY: &str = "shared";
const BEAT: Duration = Duration::from_millis(100);
const GRACE: Duration = Duration::from_millis(800);

fn spawn_worker(
    url: &str,
    machine: usize,
    trials: usize,
    hang_at: Option<u64>,
    marker: Option<&Path>,
) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "postgres_processes::worker_process",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(
        "HPO_WORKER_URL",
        format!("{url}?application_name=machine-{machine}"),
    )
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

/// The worker: runs `HPO_WORKER_TRIALS` trials on `HPO_WORKER_URL`; with
/// `HPO_WORKER_HANG_AT=n` it touches `HPO_WORKER_MARKER` and hangs in trial `n`.
#[test]
#[ignore = "run by the other tests as a separate process"]
fn worker_process() {
    let url = std::env::var("HPO_WORKER_URL").expect("HPO_WORKER_URL");
    let trials: usize = std::env::var("HPO_WORKER_TRIALS").unwrap().parse().unwrap();
    let hang_at: Option<u64> = std::env::var("HPO_WORKER_HANG_AT")
        .ok()
        .map(|s| s.parse().unwrap());
    let marker = std::env::var("HPO_WORKER_MARKER").ok();
    let storage: Arc<dyn Storage> = Arc::new(PostgresStorage::open(&url).unwrap());
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

/// 8 machines x 250 trials racing for 80 enqueued trials: exactly 2,000
/// trials numbered 0-1999, each enqueued trial run once with its parameters.
#[test]
fn eight_machines_share_one_study_without_losing_a_trial() {
    let Some(db) = TestDb::create() else { return };
    let setup = study(Arc::new(db.open()), 0, GRACE);
    for i in 0..80 {
        setup
            .enqueue([("x", ParamValue::from(f64::from(i) / 8.0 - 5.0))])
            .unwrap();
    }
    let workers: Vec<Child> = (0..8)
        .map(|m| spawn_worker(&db.url(), m, 250, None, None))
        .collect();
    for mut w in workers {
        let status = w.wait().unwrap();
        assert!(status.success(), "a worker failed: {status}");
    }
    let storage = db.open();
    let id = storage.find_study(STUDY).unwrap().unwrap().id;
    let trials = storage.trials(id).unwrap();
    assert_eq!(trials.len(), 2000, "8 x 250 trials");
    for (i, t) in trials.iter().enumerate() {
        assert_eq!(t.number, i as u64, "numbers are unique and contiguous");
        assert_eq!(t.state, TrialState::Complete, "trial {i}");
        assert_eq!(t.internal_params.len(), 2, "trial {i}");
        assert!(t.value().is_some());
    }
    // Each enqueued value ran exactly once.
    let mut fixed: Vec<f64> = trials
        .iter()
        .take(80)
        .map(|t| t.internal_params["x"])
        .collect();
    fixed.sort_by(f64::total_cmp);
    let expected: Vec<f64> = (0..80).map(|i| f64::from(i) / 8.0 - 5.0).collect();
    assert_eq!(fixed, expected, "the 80 enqueued trials ran once each");
    // And the database itself agrees: no duplicate numbers.
    let dup: i64 = db
        .client()
        .query_one(
            "SELECT count(*) FROM (SELECT number FROM trials GROUP BY study_id, number HAVING count(*) > 1) d",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(dup, 0);
}

/// A worker SIGKILLed mid-trial: another machine reaps its trial after the
/// grace period (by the server's clock) and runs the retry, with lineage.
#[test]
fn a_killed_machines_trial_is_reaped_and_retried() {
    let Some(db) = TestDb::create() else { return };
    drop(study(Arc::new(db.open()), 0, GRACE));
    let dir = std::env::temp_dir().join(format!("hpo-pg-kill-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("hanging");
    let _ = std::fs::remove_file(&marker);
    let hang_at = 5;
    let mut worker = spawn_worker(&db.url(), 0, 100, Some(hang_at), Some(&marker));
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

    let storage: Arc<dyn Storage> = Arc::new(db.open());
    let sid = storage.find_study(STUDY).unwrap().unwrap().id;
    let before = storage.trials(sid).unwrap();
    assert_eq!(before.len() as u64, hang_at + 1);
    let killed = before[hang_at as usize].clone();
    assert_eq!(killed.state, TrialState::Running);
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
        assert_eq!(after[t.number as usize], *t, "trial {} unchanged", t.number);
    }
    let failed = &after[hang_at as usize];
    assert_eq!(failed.state, TrialState::Fail);
    assert_eq!(failed.failure(), Some(FailureKind::Stale));
    let retry = &after[hang_at as usize + 1];
    assert_eq!(retry.state, TrialState::Complete, "the copy ran first");
    assert_eq!(retry.internal_params, killed.internal_params);
    assert_eq!(retry.system_attrs[FAILED_TRIAL_ATTR], json!(hang_at));
    assert_eq!(retry.system_attrs[RETRY_HISTORY_ATTR], json!([hang_at]));
    assert_eq!(after.len() as u64, hang_at + 4);
    let _ = std::fs::remove_dir_all(&dir);
}
