//! Artifacts: trials in worker processes store files, a fresh process
//! fetches the best trial's after the study; cleanup policies; the sweep of
//! orphans; a worker killed mid-upload leaves nothing registered.
//!
//! Workers are this test binary re-invoked on the ignored test
//! `artifacts::worker_entry`; the store they upload to is `HPO_ART_STORE`
//! (a folder) or, without it, the one beside `HPO_ART_URL`'s SQLite file.

use hpo_core::artifact::{
    ArtifactMeta, ArtifactStore, KeepArtifacts, ARTIFACTS_ATTR_PREFIX, DEFAULT_ORPHAN_GRACE,
};
use hpo_core::executor::{self, Batch, MemoryEstimator, ProcessConfig, Shape, GIB};
use hpo_core::{
    Direction, Error, FrozenTrial, Optimize, ParamValue, RandomSampler, Study, Trial, TrialError,
    TrialState,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const BEAT: Duration = Duration::from_millis(100);
const GRACE: Duration = Duration::from_millis(1500);

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hpo-art-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Every trial runs alone at micro-batch 1, one GiB.
struct OneGib;

impl MemoryEstimator for OneGib {
    fn propose(&self, trial: &mut Trial) -> Result<Shape, TrialError> {
        trial.suggest_float("x", -3.0, 3.0)?;
        Ok(Shape::new("test", Batch::new(1, 1)))
    }

    fn peak_bytes(&self, _params: &BTreeMap<String, ParamValue>, _batch: Batch) -> u64 {
        GIB
    }
}

/// The store a worker uploads to, from its environment.
fn worker_store() -> ArtifactStore {
    match std::env::var("HPO_ART_STORE") {
        Ok(location) => ArtifactStore::from_location(&location).unwrap(),
        Err(_) => ArtifactStore::beside(&std::env::var("HPO_ART_URL").unwrap()).unwrap(),
    }
}

/// Stores `weights.bin` (from a file) and `value.txt` (bytes); with
/// `HPO_ART_HANG=1`, first starts uploading `stuck.bin` from a pipe that
/// never ends, so the executor's timeout kills the worker mid-upload.
fn objective(trial: &mut Trial) -> Result<f64, TrialError> {
    let x = trial.suggest_float("x", -3.0, 3.0)?;
    let value = (x - 1.0).powi(2);
    let store = worker_store();
    if std::env::var("HPO_ART_HANG").is_ok_and(|v| v == "1") {
        let fifo = store
            .root()
            .with_extension(format!("fifo-{}", trial.number()));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let writer = fifo.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut w = std::fs::OpenOptions::new()
                .write(true)
                .open(writer)
                .unwrap();
            w.write_all(&[7u8; 4096]).unwrap();
            w.flush().unwrap();
            std::thread::sleep(Duration::from_secs(60)); // never closes
        });
        store.upload(trial, "stuck.bin", &fifo)?;
        unreachable!("the upload from a pipe that never ends returned");
    }
    let weights = std::env::temp_dir().join(format!(
        "hpo-art-weights-{}-{}",
        std::process::id(),
        trial.number()
    ));
    std::fs::write(
        &weights,
        format!("weights of trial {} at x={x:?}", trial.number()),
    )?;
    // ANCHOR: upload
    store.upload(trial, "weights.bin", &weights)?; // a file, copied into the store
    store.upload_bytes(trial, "value.txt", format!("{value:?}").as_bytes())?;
    // ANCHOR_END: upload
    std::fs::remove_file(&weights)?;
    Ok(value)
}

/// The worker: runs the trial its coordinator assigned and exits.
#[test]
#[ignore = "run by the other tests as a worker process"]
fn worker_entry() {
    executor::worker_main(objective).unwrap();
    panic!("worker_entry runs only as a worker started by the executor");
}

fn config(url: &str) -> ProcessConfig {
    ProcessConfig::new(url, Arc::new(OneGib))
        .budget(2 * GIB)
        .trial_timeout(Duration::from_secs(20))
        .worker_args([
            "artifacts::worker_entry",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("HPO_ART_URL", url)
}

fn study_on(url: &str, name: &str) -> Study {
    Study::builder()
        .name(name)
        .storage_url(url)
        .direction(Direction::Minimize)
        .sampler(RandomSampler::seeded(3))
        .heartbeat(BEAT, GRACE)
        .load_if_exists(true)
        .build()
        .unwrap()
}

/// After a study run in worker processes, a fresh `Study::load` in this
/// process finds the best trial's files, whole, in `store`.
fn assert_best_files_fetched(url: &str, name: &str, store: &ArtifactStore, dir: &Path) {
    let study = Study::builder().name(name).storage_url(url).load().unwrap();
    let trials = study.trials().unwrap();
    assert_eq!(trials.len(), 4);
    for t in &trials {
        assert_eq!(t.state, TrialState::Complete, "{:?}", t.fail_reason());
        let names: Vec<String> = ArtifactMeta::list(t)
            .unwrap()
            .into_iter()
            .map(|m| m.filename)
            .collect();
        assert_eq!(names, ["value.txt", "weights.bin"]);
    }
    // ANCHOR: fetch
    let best = study.best_trial().unwrap();
    let value = String::from_utf8(store.read(&best, "value.txt").unwrap()).unwrap();
    let dest = dir.join("best-weights.bin");
    let n = store.download(&best, "weights.bin", &dest).unwrap(); // atomic at `dest`
                                                                  // ANCHOR_END: fetch
    assert_eq!(value.parse::<f64>().unwrap(), best.value().unwrap());
    let x = best.param("x").unwrap().as_f64().unwrap();
    let weights = std::fs::read_to_string(&dest).unwrap();
    assert_eq!(n, weights.len() as u64);
    assert_eq!(
        weights,
        format!("weights of trial {} at x={x:?}", best.number)
    );
    assert!(store
        .path(&best, "weights.bin")
        .unwrap()
        .starts_with(store.root()));
    // Two files per trial and nothing else: no temporary file was left.
    assert_eq!(std::fs::read_dir(store.root()).unwrap().count(), 8);
}

#[test]
fn artifacts_of_worker_processes_are_fetched_after_the_study() {
    let dir = temp_dir("workers");
    let url = format!("sqlite:{}", dir.join("study.db").display());
    let name = format!("artifacts-{}", std::process::id());
    let study = study_on(&url, &name);
    study
        .optimize_with(Optimize::new().trials(4).processes(config(&url)), objective)
        .unwrap();
    drop(study);
    // The default store, beside the study file.
    let store = ArtifactStore::beside(&url).unwrap();
    assert_eq!(store.root(), dir.join("study.db.artifacts"));
    assert_best_files_fetched(&url, &name, &store, &dir);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_worker_killed_mid_upload_leaves_nothing_registered() {
    let dir = temp_dir("killed");
    let url = format!("sqlite:{}", dir.join("study.db").display());
    let study = study_on(&url, "killed");
    let config = config(&url)
        .trial_timeout(Duration::from_secs(2))
        .env("HPO_ART_HANG", "1");
    study
        .optimize_with(Optimize::new().trials(1).processes(config), objective)
        .unwrap();
    let trial = study.trials().unwrap().pop().unwrap();
    assert_eq!(trial.state, TrialState::Fail);
    assert!(ArtifactMeta::all(&trial).unwrap().is_empty());
    assert!(!trial
        .system_attrs
        .keys()
        .any(|k| k.starts_with(ARTIFACTS_ATTR_PREFIX)));
    let store = ArtifactStore::beside(&url).unwrap();
    // What the killed upload left: a temporary file, which a sweep past
    // the grace removes (and one within it spares).
    let left: Vec<_> = std::fs::read_dir(store.root()).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
    let spared = store
        .sweep_orphans(study.storage().as_ref(), DEFAULT_ORPHAN_GRACE)
        .unwrap();
    assert!(spared.orphans.is_empty());
    let swept = store
        .sweep_orphans(study.storage().as_ref(), Duration::ZERO)
        .unwrap();
    assert_eq!(swept.orphans.len(), 1);
    assert_eq!(swept.bytes, 4096);
    assert_eq!(std::fs::read_dir(store.root()).unwrap().count(), 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A study of 8 in-process trials, x = 0..8 (value (x-3)^2, minimised):
/// trials 0-4 COMPLETE, 5 PRUNED, 6 FAIL, 7 left RUNNING; each stores
/// `m.bin`, trial 7 after the others finished.
fn mixed_study(store: &ArtifactStore, directions: &[Direction]) -> (Study, Vec<Arc<FrozenTrial>>) {
    let study = Study::builder()
        .directions(directions.iter().copied())
        .build()
        .unwrap();
    for i in 0..8i64 {
        let mut t = study.ask().unwrap();
        t.suggest_int("x", 0, 10).unwrap();
        store.upload_bytes(&mut t, "m.bin", &[i as u8; 10]).unwrap();
        let value = ((i - 3) * (i - 3)) as f64;
        let values: Vec<f64> = directions.iter().map(|_| value).collect();
        let result: Result<Vec<f64>, TrialError> = match i {
            5 => Err(TrialError::Pruned),
            6 => Err(TrialError::Failed("boom".into())),
            7 => {
                drop(t); // never told: still RUNNING
                continue;
            }
            _ => Ok(values),
        };
        study.tell(t, result).unwrap();
    }
    let trials = study.trials().unwrap();
    assert_eq!(trials[7].state, TrialState::Running);
    (study, trials)
}

fn kept(store: &ArtifactStore, trials: &[Arc<FrozenTrial>]) -> Vec<u64> {
    trials
        .iter()
        .filter(|t| store.path(t, "m.bin").is_ok())
        .map(|t| t.number)
        .collect()
}

#[test]
fn artifacts_cleanup_keeps_what_the_policy_says() {
    let dir = temp_dir("clean");
    for (policy, expect) in [
        (KeepArtifacts::All, vec![0, 1, 2, 3, 4, 5, 6, 7]),
        (KeepArtifacts::Finished, vec![0, 1, 2, 3, 4, 7]),
        // Values 9, 4, 1, 0, 1: best 3, then 2 and 4 tie (lower number first).
        (KeepArtifacts::Best(2), vec![2, 3, 7]),
        (KeepArtifacts::Best(0), vec![7]),
        (KeepArtifacts::Pareto, vec![3, 7]),
    ] {
        let store = ArtifactStore::open(dir.join(format!("{policy:?}"))).unwrap();
        let (study, trials) = mixed_study(&store, &[Direction::Minimize]);
        let report = store.clean(&study, policy).unwrap();
        assert_eq!(kept(&store, &trials), expect, "{policy:?}");
        assert_eq!(report.removed.len(), 8 - expect.len(), "{policy:?}");
        assert_eq!(report.bytes, 10 * (8 - expect.len() as u64));
        // The attribute stays; the lookup says the file was removed.
        for t in trials.iter().filter(|t| !expect.contains(&t.number)) {
            let err = store.read(t, "m.bin").unwrap_err();
            assert!(matches!(err, Error::ArtifactRemoved { .. }), "{err}");
            assert!(err.to_string().contains("removed by a cleanup policy"));
        }
        // Cleaning again removes nothing more.
        assert!(store.clean(&study, policy).unwrap().removed.is_empty());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn artifacts_cleanup_of_a_multi_objective_study_keeps_the_pareto_front() {
    let dir = temp_dir("clean-multi");
    let store = ArtifactStore::open(&dir).unwrap();
    let (study, trials) = mixed_study(&store, &[Direction::Minimize, Direction::Minimize]);
    let err = store.clean(&study, KeepArtifacts::Best(2)).unwrap_err();
    assert!(err.to_string().contains("KeepArtifacts::Pareto"), "{err}");
    assert_eq!(
        kept(&store, &trials).len(),
        8,
        "the refusal removed nothing"
    );
    store.clean(&study, KeepArtifacts::Pareto).unwrap();
    assert_eq!(kept(&store, &trials), [3, 7]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn artifacts_orphans_older_than_the_grace_are_swept() {
    let dir = temp_dir("orphans");
    let store = ArtifactStore::open(&dir).unwrap();
    let (study, trials) = mixed_study(&store, &[Direction::Minimize]);
    // A file no trial references (a crash between rename and register),
    // and a file that is not an artifact at all.
    let orphan = "0190b6c4-0000-7000-8000-00000000beef";
    std::fs::write(dir.join(orphan), b"lost").unwrap();
    std::fs::write(dir.join(".hpo-tmp-crashed"), b"half").unwrap();
    std::fs::write(dir.join("README"), b"mine").unwrap();
    let storage = study.storage();
    assert!(store
        .sweep_orphans(storage.as_ref(), DEFAULT_ORPHAN_GRACE)
        .unwrap()
        .orphans
        .is_empty());
    let report = store
        .sweep_orphans(storage.as_ref(), Duration::ZERO)
        .unwrap();
    assert_eq!(report.orphans, [".hpo-tmp-crashed", orphan]);
    assert_eq!(report.bytes, 8);
    assert!(dir.join("README").exists());
    // Every registered file stays, the running trial's included.
    assert_eq!(kept(&store, &trials), [0, 1, 2, 3, 4, 5, 6, 7]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn artifacts_written_like_optuna_are_read_and_hpos_read_like_optunas() {
    // The value Python Optuna 5.0 stores for `upload_artifact(file_path="model.pt")`
    // in `trial_system_attributes.value_json`, read through a SQLite study.
    let dir = temp_dir("optuna");
    let store = ArtifactStore::open(dir.join("store")).unwrap();
    let url = format!("sqlite:{}", dir.join("s.db").display());
    let study = study_on(&url, "optuna");
    let mut t = study.ask().unwrap();
    let id = "0b5e5a4e-3c4f-4b9e-9a51-2f1a9f0c8d7e";
    let value_json = r#""{\"artifact_id\": \"0b5e5a4e-3c4f-4b9e-9a51-2f1a9f0c8d7e\", \"filename\": \"model.pt\", \"mimetype\": \"application/octet-stream\", \"encoding\": null}""#;
    let value: serde_json::Value = serde_json::from_str(value_json).unwrap();
    t.set_system_attr(&format!("artifacts:{id}"), value)
        .unwrap();
    std::fs::write(store.root().join(id), b"torch").unwrap();
    let mine = store.upload_bytes(&mut t, "preds.csv", b"a,b").unwrap();
    study.tell(t, 1.0).unwrap();
    let frozen = study.best_trial().unwrap();
    assert_eq!(store.read(&frozen, "model.pt").unwrap(), b"torch");
    // The stored text of hpo's attribute is what Optuna would store.
    let conn = rusqlite::Connection::open(dir.join("s.db")).unwrap();
    let stored: String = conn
        .query_row(
            "SELECT value_json FROM trial_system_attributes WHERE key = ?1",
            [mine.attr_key()],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        stored,
        format!(
            r#""{{\"artifact_id\": \"{}\", \"filename\": \"preds.csv\", \"mimetype\": \"text/csv\", \"encoding\": null}}""#,
            mine.artifact_id
        )
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The same on PostgreSQL (the multi-machine storage): no folder beside the
/// database, so the store is given explicitly, here as a `file://` URL.
#[cfg(feature = "postgres")]
#[test]
fn artifacts_of_worker_processes_on_postgres_in_an_explicit_store() {
    let Some(db) = crate::postgres_server::TestDb::create() else {
        return;
    };
    let url = db.url();
    let err = ArtifactStore::beside(&url).unwrap_err().to_string();
    assert!(
        err.contains("give the artifact store's location explicitly"),
        "{err}"
    );
    let dir = temp_dir("postgres");
    let location = format!("file://{}", dir.join("shared-store").display());
    let name = "artifacts-pg";
    let study = study_on(&url, name);
    study
        .optimize_with(
            Optimize::new()
                .trials(4)
                .processes(config(&url).env("HPO_ART_STORE", &location)),
            objective,
        )
        .unwrap();
    drop(study);
    let store = ArtifactStore::from_location(&location).unwrap();
    assert_eq!(store.root(), dir.join("shared-store"));
    assert_best_files_fetched(&url, name, &store, &dir);
    // Cleanup through the same storage.
    let study = study_on(&url, name);
    let report = store.clean(&study, KeepArtifacts::Best(1)).unwrap();
    assert_eq!(report.removed.len(), 6, "3 trials x 2 files");
    let best = study.best_trial().unwrap();
    assert_eq!(ArtifactMeta::list(&best).unwrap().len(), 2);
    store.path(&best, "value.txt").unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
