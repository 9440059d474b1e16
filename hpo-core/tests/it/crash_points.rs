//! The crash drill: a worker killed at its k-th write, for every k until the
//! study completes, then a fresh worker past the heartbeat grace period.
//!
//! The worker is this test binary re-invoked on the ignored test
//! `crash_points::crashing_worker` with `HPO_TEST_CRASH_AT_WRITE=k` (the
//! SQLite storage aborts the process at its k-th changed row or commit; feature
//! `testing`). It resumes a study that holds one stale RUNNING trial (a worker
//! that died before), so its run covers reaping and retrying as well as
//! enqueueing, claiming, heartbeats, parameters, attributes, intermediate
//! values and finishing. After each crash the file is reopened and the
//! recovery path (`Study::fail_stale_trials`) runs; then the file must hold a
//! consistent study:
//!
//! * SQLite's `integrity_check` is `ok`;
//! * every trial finished before recovery is unchanged after it;
//! * no trial is RUNNING;
//! * every trial failed as stale has exactly one retry copy;
//! * trial numbers are 0, 1, 2, ... with no gap or duplicate.
//!
//! A second drill starts the worker on a file that does not exist yet, so its
//! first writes create the schema and the study: after each crash the file
//! must open again and hold either no study or a consistent one.

use hpo_core::storage::SqliteStorage;
use hpo_core::trial::RETRY_HISTORY_ATTR;
use hpo_core::{
    Distribution, FailureKind, FloatDistribution, ParamValue, RandomSampler, RetryPolicy, Storage,
    Study, TrialError, TrialState,
};
use rusqlite::{Connection, OpenFlags};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

const STUDY: &str = "drill";
const BEAT: Duration = Duration::from_millis(300);
const GRACE: Duration = Duration::from_secs(1);
/// Crash points run at once (each in its own directory and process).
const PARALLEL: usize = 6;

fn study(storage: Arc<dyn Storage>) -> Study {
    Study::builder()
        .name(STUDY)
        .storage(storage)
        .sampler(RandomSampler::seeded(5))
        .heartbeat(BEAT, GRACE)
        .retry(RetryPolicy { max_retries: 10 })
        .load_if_exists(true)
        .build()
        .unwrap()
}

/// The worker: resumes the study, enqueues one trial and runs three.
#[test]
#[ignore = "run by `every_crash_point_leaves_a_consistent_study` as a separate process"]
fn crashing_worker() {
    let db = std::env::var("HPO_DRILL_DB").expect("HPO_DRILL_DB");
    let study = study(Arc::new(SqliteStorage::open(db).unwrap()));
    study.enqueue([("x", ParamValue::from(0.5))]).unwrap();
    study
        .optimize(3, |t| -> Result<f64, TrialError> {
            let x = t.suggest_float("x", -1.0, 1.0)?;
            t.set_user_attr("note", "drill")?;
            t.report(0, x.abs())?;
            Ok(x * x)
        })
        .unwrap();
}

/// A study file holding one stale RUNNING trial with a parameter.
fn template(dir: &Path) -> PathBuf {
    let path = dir.join("template.db");
    {
        let storage = Arc::new(SqliteStorage::open(&path).unwrap());
        let study = study(storage.clone());
        let t = storage.create_trial(study.id(), None).unwrap();
        let d = Distribution::Float(FloatDistribution::new(-1.0, 1.0).unwrap());
        storage.set_trial_param(t.id, "x", -0.25, &d).unwrap();
        storage.record_heartbeat(t.id).unwrap();
    }
    std::thread::sleep(GRACE + Duration::from_millis(200));
    path
}

/// SIGABRT, raised by `std::process::abort` (6 on every Unix hpo runs on).
fn libc_sigabrt() -> i32 {
    6
}

fn integrity(path: &Path) -> String {
    let c = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_WRITE).unwrap();
    c.query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap()
}

/// Runs the worker armed to crash at write `k`; `Ok(true)` when it crashed,
/// `Ok(false)` when it completed, `Err` with what is wrong with the file.
fn crash_at(dir: &Path, template: Option<&Path>, k: usize) -> Result<bool, String> {
    let db = dir.join(format!("k{k}.db"));
    match template {
        Some(t) => {
            std::fs::copy(t, &db).unwrap();
        }
        // The worker creates the file: its first writes are the schema's.
        None => {
            let _ = std::fs::remove_file(&db);
        }
    }
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "crash_points::crashing_worker",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env("HPO_DRILL_DB", &db)
        .env("HPO_TEST_CRASH_AT_WRITE", k.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    let crashed = !status.success();
    if !db.exists() {
        return Ok(crashed);
    }
    {
        use std::os::unix::process::ExitStatusExt;
        if crashed && status.signal() != Some(libc_sigabrt()) {
            return Err(format!(
                "the worker failed without the injected crash: {status}"
            ));
        }
    }
    let ok = integrity(&db);
    if ok != "ok" {
        return Err(format!("integrity_check after the crash: {ok}"));
    }
    // Whatever the crash left, the next open recovers it (a half-created
    // schema is rolled back, an empty database gets the schema again).
    let storage: Arc<dyn Storage> = match SqliteStorage::open(&db) {
        Ok(s) => Arc::new(s),
        Err(e) => return Err(format!("cannot reopen the file: {e}")),
    };
    let Some(sid) = storage.find_study(STUDY).unwrap().map(|s| s.id) else {
        // Killed before the study was created: nothing else to check.
        drop(storage);
        std::fs::remove_file(&db).unwrap();
        return Ok(crashed);
    };
    let before = storage.trials(sid).unwrap();
    // Past the grace period of every heartbeat the worker wrote.
    std::thread::sleep(GRACE + Duration::from_millis(300));
    let recovered = study(Arc::clone(&storage));
    recovered.fail_stale_trials().unwrap();
    let after = storage.trials(sid).unwrap();
    drop(recovered);
    drop(storage);
    let ok = integrity(&db);
    if ok != "ok" {
        return Err(format!("integrity_check after recovery: {ok}"));
    }
    let mut wrong = Vec::new();
    for t in before.iter().filter(|t| t.state.is_finished()) {
        if after
            .get(t.number as usize)
            .map(|a| **a != **t)
            .unwrap_or(true)
        {
            wrong.push(format!("finished trial {} changed in recovery", t.number));
        }
    }
    for (i, t) in after.iter().enumerate() {
        if t.number != i as u64 {
            wrong.push(format!("trial at position {i} has number {}", t.number));
        }
        if t.state == TrialState::Running {
            wrong.push(format!(
                "trial {} is still RUNNING after the grace period",
                t.number
            ));
        }
        if t.state == TrialState::Complete
            && (t.values.is_none() || !t.internal_params.contains_key("x"))
        {
            wrong.push(format!(
                "COMPLETE trial {} lacks its value or param",
                t.number
            ));
        }
        if t.failure() == Some(FailureKind::Stale) {
            let copies = after
                .iter()
                .filter(|c| {
                    c.system_attrs
                        .get(RETRY_HISTORY_ATTR)
                        .and_then(Value::as_array)
                        .and_then(|h| h.last())
                        .and_then(Value::as_u64)
                        == Some(t.number)
                })
                .count();
            if copies != 1 {
                wrong.push(format!(
                    "stale trial {} has {copies} retry copies, not 1",
                    t.number
                ));
            }
        }
    }
    std::fs::remove_file(&db).unwrap();
    if wrong.is_empty() {
        Ok(crashed)
    } else {
        Err(wrong.join("; "))
    }
}

/// Runs the worker crashing at write 1, 2, ... until a run completes;
/// returns the number of crash points and what each wrong one left.
fn drill(tag: &str, with_template: bool) -> (usize, Vec<String>) {
    let dir = std::env::temp_dir().join(format!("hpo-crash-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let template = with_template.then(|| template(&dir));
    let mut failures = Vec::new();
    let mut crashed = 0;
    let mut k = 1;
    loop {
        let batch: Vec<Result<bool, String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (k..k + PARALLEL)
                .map(|k| {
                    let (dir, template) = (&dir, template.as_deref());
                    s.spawn(move || crash_at(dir, template, k))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut completed = false;
        for (i, r) in batch.into_iter().enumerate() {
            match r {
                Ok(true) => crashed += 1,
                Ok(false) => completed = true,
                Err(e) => {
                    crashed += 1;
                    failures.push(format!("crash at write {}: {e}", k + i));
                }
            }
        }
        k += PARALLEL;
        if completed {
            break;
        }
        assert!(k < 1000, "the worker never completed");
    }
    std::fs::remove_dir_all(&dir).unwrap();
    eprintln!(
        "{tag}: {crashed} crash points drilled, {} left the study wrong",
        failures.len()
    );
    (crashed, failures)
}

fn assert_drill(crashed: usize, failures: &[String]) {
    assert!(
        crashed > 20,
        "the drill reached only {crashed} crash points"
    );
    assert!(
        failures.is_empty(),
        "{} of {crashed} crash points left the study wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_crash_point_leaves_a_consistent_study() {
    let (crashed, failures) = drill("resume", true);
    assert_drill(crashed, &failures);
}

#[test]
fn every_crash_point_of_a_new_file_leaves_it_usable() {
    let (crashed, failures) = drill("new", false);
    assert_drill(crashed, &failures);
}
