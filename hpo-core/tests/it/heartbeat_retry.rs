//! Heartbeats, stale trials and the retry policy, in one process: "dead"
//! workers are simulated by trials whose heartbeats simply stop.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).

use hpo_core::storage::SqliteStorage;
use hpo_core::trial::{FAILED_TRIAL_ATTR, RETRY_HISTORY_ATTR};
use hpo_core::{
    Distribution, Error, FailureKind, FloatDistribution, InMemoryStorage, RetryPolicy, Storage,
    Study, TrialState,
};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const BEAT: Duration = Duration::from_millis(10);
const GRACE: Duration = Duration::from_millis(40);

fn storages() -> Vec<Arc<dyn Storage>> {
    vec![
        Arc::new(InMemoryStorage::new()),
        Arc::new(SqliteStorage::in_memory().unwrap()),
    ]
}

fn reaper(storage: &Arc<dyn Storage>, max_retries: u32) -> Study {
    Study::builder()
        .name("s")
        .storage(Arc::clone(storage))
        .heartbeat(BEAT, GRACE)
        .retry(RetryPolicy { max_retries })
        .load_if_exists(true)
        .build()
        .unwrap()
}

/// Waits (without asserting on time) until `n` trials are stale.
fn wait_stale(storage: &Arc<dyn Storage>, study: u64, n: usize) {
    while storage.stale_trials(study, GRACE).unwrap().len() < n {
        std::thread::sleep(BEAT);
    }
}

#[test]
fn stale_trials_are_failed_and_retried_until_the_policy_gives_up() {
    for storage in storages() {
        let study = reaper(&storage, 2);
        let sid = study.id();
        let x = Distribution::Float(FloatDistribution::new(0.0, 1.0).unwrap());
        // A worker starts trial 0, sets a parameter, beats once and dies.
        let t = storage.create_trial(sid, None).unwrap();
        storage.set_trial_param(t.id, "x", 0.25, &x).unwrap();
        storage
            .set_trial_user_attr(t.id, "note", &json!("first"))
            .unwrap();
        storage.record_heartbeat(t.id).unwrap();
        wait_stale(&storage, sid, 1);
        assert_eq!(study.fail_stale_trials().unwrap(), vec![0]);
        assert!(
            study.fail_stale_trials().unwrap().is_empty(),
            "failed once only"
        );

        let trials = study.trials().unwrap();
        assert_eq!(trials[0].state, TrialState::Fail);
        assert_eq!(trials[0].failure(), Some(FailureKind::Stale));
        assert!(trials[0].fail_reason().unwrap().contains("no heartbeat"));
        let copy = &trials[1];
        assert_eq!(copy.state, TrialState::Waiting);
        assert_eq!(copy.internal_params, trials[0].internal_params);
        assert_eq!(copy.user_attrs["note"], json!("first"));
        assert_eq!(copy.system_attrs[FAILED_TRIAL_ATTR], json!(0));
        assert_eq!(copy.system_attrs[RETRY_HISTORY_ATTR], json!([0]));
        assert!(!copy.system_attrs.contains_key(FailureKind::ATTR));

        // The copy is claimed by another worker that dies too: retried again.
        let c = storage.claim_waiting_trial(sid).unwrap().unwrap();
        assert_eq!(c.number, 1);
        storage.record_heartbeat(c.id).unwrap();
        wait_stale(&storage, sid, 1);
        assert_eq!(study.fail_stale_trials().unwrap(), vec![1]);
        let again = study.trials().unwrap()[2].clone();
        assert_eq!(
            again.system_attrs[FAILED_TRIAL_ATTR],
            json!(0),
            "the chain's first trial"
        );
        assert_eq!(again.system_attrs[RETRY_HISTORY_ATTR], json!([0, 1]));

        // Third failure: two retries used up, the configuration is given up.
        let c = storage.claim_waiting_trial(sid).unwrap().unwrap();
        storage.record_heartbeat(c.id).unwrap();
        wait_stale(&storage, sid, 1);
        assert_eq!(study.fail_stale_trials().unwrap(), vec![2]);
        let trials = study.trials().unwrap();
        assert_eq!(trials.len(), 3);
        assert!(trials
            .iter()
            .all(|t| t.failure() == Some(FailureKind::Stale)));
    }
}

#[test]
fn optimize_beats_while_the_objective_runs() {
    // A wide margin between interval and grace keeps this robust on a loaded machine.
    let (beat, grace) = (Duration::from_millis(20), Duration::from_millis(500));
    for storage in storages() {
        let study = Study::builder()
            .name("s")
            .storage(Arc::clone(&storage))
            .heartbeat(beat, grace)
            .build()
            .unwrap();
        let sid = study.id();
        let watcher = Arc::clone(&storage);
        study
            .optimize(1, move |t| -> Result<f64, hpo_core::TrialError> {
                // Three grace periods long: without heartbeats it would be stale.
                for _ in 0..6 {
                    std::thread::sleep(grace / 2);
                    assert!(watcher.stale_trials(sid, grace).unwrap().is_empty());
                }
                Ok(t.suggest_float("x", 0.0, 1.0)?)
            })
            .unwrap();
        let trials = study.trials().unwrap();
        assert_eq!(trials.len(), 1);
        assert_eq!(
            trials[0].state,
            TrialState::Complete,
            "{:?}",
            trials[0].fail_reason()
        );
        assert!(matches!(
            storage.record_heartbeat(trials[0].id),
            Err(Error::TrialFinished { .. })
        ));
    }
}

#[test]
fn a_late_tell_of_a_stale_trial_returns_the_stale_record() {
    for storage in storages() {
        // The slow worker beats rarely; the reaper's grace is short.
        let slow = Study::builder()
            .name("s")
            .storage(Arc::clone(&storage))
            .heartbeat(Duration::from_secs(5), Duration::from_secs(60))
            .build()
            .unwrap();
        let reaper = reaper(&storage, 0);
        let trial = slow.ask().unwrap();
        wait_stale(&storage, slow.id(), 1);
        assert_eq!(reaper.fail_stale_trials().unwrap(), vec![0]);
        assert_eq!(reaper.trials().unwrap().len(), 1, "max_retries 0: no copy");
        let told = slow.tell(trial, 1.0).unwrap();
        assert_eq!(told.state, TrialState::Fail);
        assert_eq!(told.failure(), Some(FailureKind::Stale));
        assert_eq!(told.values, None);
    }
}

#[test]
fn heartbeat_settings_are_checked() {
    let err = |b: hpo_core::StudyBuilder| b.build().unwrap_err().to_string();
    let e = err(Study::builder().retry(RetryPolicy { max_retries: 1 }));
    assert!(e.contains("set `heartbeat(interval, grace)`"), "{e}");
    let e = err(Study::builder().heartbeat(Duration::from_secs(10), Duration::from_secs(5)));
    assert!(e.contains("shorter than the grace period"), "{e}");
    let e = err(Study::builder().heartbeat(Duration::ZERO, Duration::from_secs(5)));
    assert!(e.contains("must be positive"), "{e}");
}

#[test]
fn a_running_trial_that_never_beat_is_reaped_after_the_grace_period() {
    for storage in storages() {
        let study = reaper(&storage, 1);
        let sid = study.id();
        // A worker killed between creating its trial and its first heartbeat,
        // or a tool that writes no heartbeats.
        let t = storage.create_trial(sid, None).unwrap();
        assert!(
            storage.stale_trials(sid, GRACE).unwrap().is_empty(),
            "not before the grace period"
        );
        wait_stale(&storage, sid, 1);
        assert_eq!(study.fail_stale_trials().unwrap(), vec![t.number]);
        let trials = study.trials().unwrap();
        assert_eq!(trials[0].failure(), Some(FailureKind::Stale));
        assert_eq!(trials[1].state, TrialState::Waiting, "retried");
        assert_eq!(trials[1].system_attrs[RETRY_HISTORY_ATTR], json!([0]));
    }
}

#[test]
fn ask_writes_the_first_heartbeat_with_the_trial() {
    let dir = std::env::temp_dir().join(format!("hpo-first-beat-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("s.db");
    let storage: Arc<dyn Storage> = Arc::new(SqliteStorage::open(&path).unwrap());
    // The heartbeat thread's first beat is an hour away: any row is the one
    // written with the trial.
    let study = Study::builder()
        .name("s")
        .storage(Arc::clone(&storage))
        .heartbeat(Duration::from_secs(3600), Duration::from_secs(7200))
        .build()
        .unwrap();
    study
        .enqueue([("x", hpo_core::ParamValue::from(0.5))])
        .unwrap();
    let claimed = study.ask().unwrap();
    let created = study.ask().unwrap();
    let c = rusqlite::Connection::open(&path).unwrap();
    for id in [claimed.id(), created.id()] {
        let beats: i64 = c
            .query_row(
                "SELECT COUNT(*) FROM trial_heartbeats WHERE trial_id = ?1",
                [id as i64],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(beats, 1, "trial {id} has its first heartbeat");
    }
    study.tell(claimed, 1.0).unwrap();
    study.tell(created, 1.0).unwrap();
    drop(study);
    drop(storage);
    std::fs::remove_dir_all(&dir).unwrap();
}
