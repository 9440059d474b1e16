//! The process executor: real worker processes for crashes, OOM relaunch and
//! a killed coordinator; the simulated device for admission, correction and
//! placement.
//!
//! Workers are this test binary re-invoked on the ignored test
//! `executor::worker_entry`; a coordinator to kill is the binary re-invoked
//! on `executor::coordinator_entry`. Each trial's behaviour is its enqueued
//! `mode` parameter.

use hpo_core::executor::simulated::{simulate, Policy, Workload};
use hpo_core::executor::{
    self, AdmissionPolicy, Batch, MemoryEstimator, ProcessConfig, QueuePolicy, Shape,
    ACCUMULATION_ATTR, EXIT_ATTR, GIB, MICRO_BATCH_ATTR, OOM_RETRIES_ATTR, RECOMPUTE_ATTR,
    STDERR_ATTR,
};
use hpo_core::pruner::{Decision, MedianPruner, NopPruner, Pruner};
use hpo_core::storage::SqliteStorage;
use hpo_core::trial::{FAILED_TRIAL_ATTR, RELATIVE_SAMPLE_ATTR, RETRY_HISTORY_ATTR};
use hpo_core::view::StudyView;
use hpo_core::{
    CmaEsConfig, CmaEsSampler, Distribution, FailureKind, FrozenTrial, GridSampler, Optimize,
    ParamValue, QmcSampler, RandomSampler, RetryPolicy, Sampler, Storage, Study, Support,
    TpeConfig, TpeSampler, Trial, TrialError, TrialState,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MODES: [&str; 11] = [
    "ok",
    "slow",
    "panic",
    "abort",
    "signal",
    "hang",
    "oom",
    "oom_told",
    "report",
    "extra",
    "recompute_only",
];
const BEAT: Duration = Duration::from_millis(100);
const GRACE: Duration = Duration::from_millis(1500);

fn worker_args() -> Vec<&'static str> {
    vec![
        "executor::worker_entry",
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]
}

/// Where a study's workers leave one file per trial they ran.
fn marker_dir(study: &str) -> PathBuf {
    std::env::temp_dir().join(format!("hpo-exec-ran-{study}"))
}

fn temp_db(tag: &str) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("hpo-exec-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("study.db");
    let url = format!("sqlite:{}", db.display());
    (db, url)
}

/// One GiB per example of micro-batch.
struct TestEstimator;

impl MemoryEstimator for TestEstimator {
    fn propose(&self, trial: &mut Trial) -> Result<Shape, TrialError> {
        trial.suggest_categorical("mode", &MODES)?;
        let batch = trial.suggest_int("batch", 1, 64)?;
        Ok(Shape::new("test", Batch::new(batch as u32, 1)))
    }

    fn peak_bytes(&self, _params: &BTreeMap<String, ParamValue>, batch: Batch) -> u64 {
        u64::from(batch.micro) * GIB
    }
}

fn objective(trial: &mut Trial) -> Result<f64, TrialError> {
    let mode = trial.suggest_categorical("mode", &MODES)?;
    let batch = trial.suggest_int("batch", 1, 64)?;
    let run = executor::batch_of(trial).expect("the executor sets the batch");
    let dir = marker_dir(trial.study_name());
    std::fs::create_dir_all(&dir).unwrap();
    // What the worker was told its GPU is.
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").unwrap_or_default();
    std::fs::write(dir.join(format!("ran-{}", trial.number())), visible).unwrap();
    // And the memory it may treat as its card's.
    let memory = executor::device_memory().map_or("-".to_owned(), |b| b.to_string());
    std::fs::write(dir.join(format!("memory-{}", trial.number())), memory).unwrap();
    // The thread pools it was sized for.
    let pools = ["RAYON_NUM_THREADS", "OMP_NUM_THREADS", "HPO_TEST_EXTRA"]
        .map(|k| std::env::var(k).unwrap_or_else(|_| "-".into()))
        .join(" ");
    std::fs::write(dir.join(format!("threads-{}", trial.number())), pools).unwrap();
    executor::record_peak(trial, u64::from(run.micro) * GIB).unwrap();
    let value = f64::from(run.effective()) + batch as f64 / 1000.0;
    match mode {
        "ok" => Ok(value),
        "slow" => {
            let start = now_ms();
            std::thread::sleep(Duration::from_millis(300));
            let span = format!("{start} {}", now_ms());
            std::fs::write(dir.join(format!("span-{}", trial.number())), span).unwrap();
            Ok(value)
        }
        "panic" => panic!("boom in trial {}", trial.number()),
        "abort" => {
            eprintln!("about to abort in trial {}", trial.number());
            std::process::abort()
        }
        "signal" => {
            let pid = std::process::id().to_string();
            Command::new("kill").args(["-KILL", &pid]).status().unwrap();
            std::thread::sleep(Duration::from_secs(30));
            Ok(value)
        }
        "hang" => {
            std::thread::sleep(Duration::from_secs(60));
            Ok(value)
        }
        // Dies while allocating, as a CUDA OOM poisons a process.
        "oom" if run.micro > 4 => {
            eprintln!(
                "CUDA error: out of memory (tried to allocate {} GiB)",
                run.micro
            );
            std::process::abort()
        }
        // Fits only with activation recomputation, at any micro-batch.
        "recompute_only" if !run.recompute => {
            eprintln!("CUDA error: out of memory (activations kept)");
            std::process::abort()
        }
        // Says so, as an objective that catches it would.
        "oom_told" if run.micro > 4 => Err(TrialError::Oom {
            config: json!({"micro_batch": run.micro}),
            message: "out of memory".into(),
        }),
        // Reports its batch at step 0 (the study minimises) and stops if
        // the study's pruner says so.
        "report" => {
            trial.report(0, batch as f64)?;
            if trial.should_prune()? {
                return Err(TrialError::Pruned);
            }
            Ok(value)
        }
        // Parameters the estimator does not suggest: drawn in the worker.
        "extra" => {
            let x = trial.suggest_float("x", -1.0, 1.0)?;
            let k = trial.suggest_int("k", 0, 9)?;
            Ok(x * x + k as f64)
        }
        _ => Ok(value),
    }
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// The worker: runs the trial its coordinator assigned and exits.
#[test]
#[ignore = "run by the other tests as a worker process"]
fn worker_entry() {
    executor::worker_main(objective).unwrap();
    panic!("worker_entry runs only as a worker started by the executor");
}

/// A coordinator to be killed: runs `HPO_EXEC_TRIALS` trials on `HPO_EXEC_DB`.
#[test]
#[ignore = "run by the other tests as a coordinator process"]
fn coordinator_entry() {
    let db = std::env::var("HPO_EXEC_DB").unwrap();
    let name = std::env::var("HPO_EXEC_STUDY").unwrap();
    let n: usize = std::env::var("HPO_EXEC_TRIALS").unwrap().parse().unwrap();
    let url = format!("sqlite:{db}");
    let study = study_on(&url, &name);
    study
        .optimize_with(
            Optimize::new().trials(n).processes(config(&url, 3)),
            objective,
        )
        .unwrap();
}

fn study_on(url: &str, name: &str) -> Study {
    Study::builder()
        .name(name)
        .storage_url(url)
        .sampler(RandomSampler::seeded(1))
        .heartbeat(BEAT, GRACE)
        .retry(RetryPolicy { max_retries: 2 })
        .load_if_exists(true)
        .build()
        .unwrap()
}

/// Room for `parallel` trials of micro-batch 1.
fn config(url: &str, parallel: u64) -> ProcessConfig {
    ProcessConfig::new(url, Arc::new(TestEstimator))
        .budget(parallel * GIB)
        .trial_timeout(Duration::from_secs(20))
        .worker_args(worker_args())
}

fn enqueue(study: &Study, mode: &str, batch: i64) -> u64 {
    study
        .enqueue([
            ("mode", ParamValue::from(mode)),
            ("batch", ParamValue::from(batch)),
        ])
        .unwrap()
}

fn by_number(study: &Study) -> Vec<Arc<FrozenTrial>> {
    study.trials().unwrap()
}

/// A pruner written outside hpo (no settings to rebuild it from): prunes
/// every trial that reports.
struct StopAll;

impl Pruner for StopAll {
    fn prune(&self, _: &StudyView<'_>, _: &FrozenTrial) -> hpo_core::Result<Decision> {
        Ok(Decision::stop())
    }
}

/// A worker that builds its study itself, with a pruner hpo cannot
/// rebuild, and reaches `optimize_with`: its trial prunes with that pruner.
#[test]
#[ignore = "run by executor_workers_prune_with_the_studys_pruner as a worker process"]
fn worker_entry_own_study() {
    let url = std::env::var("HPO_EXEC_URL").unwrap();
    let name = std::env::var("HPO_EXEC_STUDY").unwrap();
    let study = Study::builder()
        .name(&name)
        .storage_url(&url)
        .pruner(StopAll)
        .sampler(OwnSampler(RandomSampler::seeded(5)))
        .heartbeat(BEAT, GRACE)
        .load()
        .unwrap();
    study
        .optimize_with(
            Optimize::new().trials(1).processes(config(&url, 2)),
            objective,
        )
        .unwrap();
    panic!("worker_entry_own_study runs only as a worker started by the executor");
}

/// The storage holds no pruner, so a worker once opened the study with the
/// default one (median) whatever the coordinator's study was built with.
/// Five trials report 1..5 at step 0 and complete; the sixth reports 60,
/// which the median pruner stops and `NopPruner` lets finish. A pruner
/// that cannot be rebuilt fails the trial with a message saying why.
#[test]
fn executor_workers_prune_with_the_studys_pruner() {
    let cases: [(&str, Arc<dyn Pruner>, TrialState); 3] = [
        ("nop", Arc::new(NopPruner), TrialState::Complete),
        (
            "median",
            Arc::new(MedianPruner::default()),
            TrialState::Pruned,
        ),
        ("own", Arc::new(StopAll), TrialState::Fail),
    ];
    for (tag, pruner, last) in cases {
        let (_db, url) = temp_db(&format!("prune-{tag}"));
        let name = format!("prune-{tag}-{}", std::process::id());
        let study = Study::builder()
            .name(&name)
            .storage_url(&url)
            .sampler(RandomSampler::seeded(1))
            .pruner(pruner)
            .heartbeat(BEAT, GRACE)
            .build()
            .unwrap();
        let firsts: &[i64] = if tag == "own" { &[] } else { &[1, 2, 3, 4, 5] };
        for &b in firsts {
            enqueue(&study, "report", b);
        }
        enqueue(&study, "report", 60);
        study
            .optimize_with(
                Optimize::new()
                    .trials(firsts.len() + 1)
                    // One at a time, in the order enqueued.
                    .processes(config(&url, 64).max_workers(1).lookahead(1)),
                objective,
            )
            .unwrap();
        let trials = by_number(&study);
        let states: Vec<_> = trials.iter().map(|t| t.state).collect();
        let (last_trial, firsts_run) = trials.split_last().unwrap();
        assert_eq!(last_trial.params()["batch"], ParamValue::from(60));
        assert!(
            firsts_run.iter().all(|t| t.state == TrialState::Complete),
            "{tag}: {states:?}"
        );
        assert_eq!(last_trial.state, last, "{tag}: {states:?}");
        if last == TrialState::Fail {
            let why = last_trial.fail_reason().unwrap_or_default();
            assert!(why.contains("Pruner::to_config"), "{tag}: {why}");
        }
    }

    // The same kind of pruner in a worker that builds the study itself, and
    // a sampler hpo cannot rebuild either: the worker's own are used (the
    // second trial's `x` and `k` are drawn there, as the sampler draws them).
    let (_db, url) = temp_db("prune-own-study");
    let name = format!("prune-own-study-{}", std::process::id());
    let study = Study::builder()
        .name(&name)
        .storage_url(&url)
        .pruner(StopAll)
        .sampler(OwnSampler(RandomSampler::seeded(5)))
        .heartbeat(BEAT, GRACE)
        .build()
        .unwrap();
    enqueue(&study, "report", 1);
    enqueue(&study, "extra", 1);
    let worker = config(&url, 2)
        .worker_args([
            "executor::worker_entry_own_study",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("HPO_EXEC_URL", &url)
        .env("HPO_EXEC_STUDY", &name);
    study
        .optimize_with(Optimize::new().trials(2).processes(worker), objective)
        .unwrap();
    let trials = by_number(&study);
    let states: Vec<_> = trials.iter().map(|t| t.state).collect();
    assert_eq!(
        states,
        [TrialState::Pruned, TrialState::Complete],
        "{:?}",
        trials.iter().map(|t| t.fail_reason()).collect::<Vec<_>>()
    );
    let in_process = Study::builder()
        .sampler(RandomSampler::seeded(5))
        .build()
        .unwrap();
    in_process
        .optimize(2, |t| -> Result<f64, TrialError> {
            Ok(t.suggest_float("x", -1.0, 1.0)? + t.suggest_int("k", 0, 9)? as f64)
        })
        .unwrap();
    let drawn = in_process.trials().unwrap();
    assert_eq!(trials[1].param("x"), drawn[1].param("x"));
    assert_eq!(trials[1].param("k"), drawn[1].param("k"));
}

/// A sampler written outside hpo (no settings to rebuild it from).
struct OwnSampler(RandomSampler);

impl Sampler for OwnSampler {
    fn sample_independent(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        name: &str,
        dist: &Distribution,
        support: &Support,
    ) -> hpo_core::Result<f64> {
        self.0.sample_independent(study, trial, name, dist, support)
    }
}

/// A new study file for `tag`, sampled by `sampler`: its URL and the study.
fn sampled_study(tag: &str, sampler: Arc<dyn Sampler>) -> (String, Study) {
    let (_db, url) = temp_db(tag);
    let name = format!("{tag}-{}", std::process::id());
    let study = Study::builder()
        .name(&name)
        .storage_url(&url)
        .sampler(sampler)
        .heartbeat(BEAT, GRACE)
        .build()
        .unwrap();
    (url, study)
}

/// `n` trials of mode "extra" (the objective suggests `x` and `k`, which the
/// estimator does not), one worker at a time.
fn run_extra(tag: &str, sampler: Arc<dyn Sampler>, modes: &[&str]) -> Study {
    let (url, study) = sampled_study(&format!("sample-{tag}"), sampler);
    for mode in modes {
        study.enqueue([("mode", ParamValue::from(*mode))]).unwrap();
    }
    study
        .optimize_with(
            Optimize::new()
                .trials(modes.len())
                .processes(config(&url, 64).max_workers(1).lookahead(1)),
            objective,
        )
        .unwrap();
    study
}

/// The storage holds no sampler either, so a worker once drew what the
/// memory estimator had not suggested with an unseeded default TPE,
/// whatever the study's sampler, and drew the trial's joint sample again.
/// Workers now sample as the study's sampler: independent draws are the
/// ones it makes in-process, the joint sample drawn in the coordinator is
/// the one suggested, and a sampler that cannot be rebuilt fails only the
/// trials that need it, saying why.
#[test]
fn executor_workers_sample_with_the_studys_sampler() {
    let complete = |study: &Study| {
        let trials = by_number(study);
        for t in &trials {
            assert_eq!(t.state, TrialState::Complete, "{:?}", t.fail_reason());
        }
        trials
    };

    // Independent draws: those of the same seeded sampler in-process.
    let n = 6;
    let study = run_extra("random", Arc::new(RandomSampler::seeded(5)), &["extra"; 6]);
    let in_process = Study::builder()
        .sampler(RandomSampler::seeded(5))
        .build()
        .unwrap();
    in_process
        .optimize(n, |t| -> Result<f64, TrialError> {
            let x = t.suggest_float("x", -1.0, 1.0)?;
            let k = t.suggest_int("k", 0, 9)?;
            Ok(x + k as f64)
        })
        .unwrap();
    let drawn = |ts: &[Arc<FrozenTrial>]| -> Vec<(Option<ParamValue>, Option<ParamValue>)> {
        ts.iter().map(|t| (t.param("x"), t.param("k"))).collect()
    };
    assert_eq!(
        drawn(&complete(&study)),
        drawn(&in_process.trials().unwrap())
    );

    // The joint sample: CMA-ES and TPE draw `batch`, `x` and `k` together
    // when the coordinator starts the trial; the estimator suggests
    // `batch`, the worker `x` and `k`, exactly as drawn (TPE drawing again
    // in the worker, after the trial before it finished, would draw others).
    let n = 8;
    let joint_samplers: [(&str, Arc<dyn Sampler>); 2] = [
        (
            "cmaes",
            Arc::new(CmaEsSampler::with_config(CmaEsConfig::seeded(5)).unwrap()),
        ),
        (
            "tpe",
            Arc::new(
                TpeSampler::with_config(TpeConfig {
                    n_startup_trials: 2,
                    ..TpeConfig::seeded(5)
                })
                .unwrap(),
            ),
        ),
    ];
    for (tag, sampler) in joint_samplers {
        let study = run_extra(tag, sampler, &["extra"; 8]);
        let trials = complete(&study);
        let mut joint = 0;
        for t in &trials {
            let Some(recorded) = t.system_attrs.get(RELATIVE_SAMPLE_ATTR) else {
                continue;
            };
            joint += 1;
            assert!(recorded.get("batch").is_none(), "{tag}: {recorded}");
            for name in ["x", "k"] {
                assert_eq!(
                    Some(t.internal_params[name]),
                    recorded[name]["value"].as_f64(),
                    "{tag}: trial {} `{name}`: {recorded}",
                    t.number
                );
            }
        }
        assert!(
            joint >= n / 2,
            "{tag}: {joint} of {n} trials sampled jointly"
        );
    }

    // A sampler hpo cannot rebuild: a trial that needs it fails, saying
    // why; one whose parameters the estimator suggested runs.
    let study = run_extra(
        "own",
        Arc::new(OwnSampler(RandomSampler::seeded(5))),
        &["ok", "extra"],
    );
    let trials = by_number(&study);
    assert_eq!(trials[0].state, TrialState::Complete);
    assert_eq!(trials[1].state, TrialState::Fail);
    let why = trials[1].fail_reason().unwrap_or_default();
    assert!(
        why.contains("Sampler::to_config") && why.contains("`x`"),
        "{why}"
    );
}

#[test]
fn executor_worker_crashes_fail_their_trial_and_the_study_goes_on() {
    let (_db, url) = temp_db("crash");
    let name = format!("crash-{}", std::process::id());
    let study = study_on(&url, &name);
    let modes = [
        "ok", "panic", "ok", "abort", "ok", "signal", "ok", "hang", "ok",
    ];
    for m in modes {
        enqueue(&study, m, 1);
    }
    let cfg = config(&url, 2).trial_timeout(Duration::from_millis(2500));
    study
        .optimize_with(
            Optimize::new().trials(modes.len()).processes(cfg),
            objective,
        )
        .unwrap();
    let trials = by_number(&study);
    assert_eq!(trials.len(), modes.len(), "no relaunch, no extra trial");
    for (t, mode) in trials.iter().zip(modes) {
        let reason = t.fail_reason().unwrap_or("");
        match mode {
            "ok" => assert_eq!(t.state, TrialState::Complete, "trial {}", t.number),
            "panic" => {
                assert_eq!(t.failure(), Some(FailureKind::Panic));
                assert!(reason.contains("boom in trial"), "{reason}");
            }
            "abort" => {
                assert_eq!(t.state, TrialState::Fail);
                assert!(t.system_attrs[EXIT_ATTR]
                    .as_str()
                    .unwrap()
                    .contains("signal 6"));
                assert!(
                    reason.contains("about to abort"),
                    "stderr tail kept: {reason}"
                );
            }
            "signal" => {
                assert_eq!(t.state, TrialState::Fail);
                assert!(
                    t.system_attrs[EXIT_ATTR]
                        .as_str()
                        .unwrap()
                        .contains("signal 9"),
                    "{:?}",
                    t.system_attrs
                );
                assert!(t.system_attrs.contains_key(STDERR_ATTR));
            }
            "hang" => assert_timed_out(t),
            _ => unreachable!(),
        }
    }
}

/// A trial failed because its worker ran past the trial timeout.
fn assert_timed_out(t: &FrozenTrial) {
    assert_eq!(t.state, TrialState::Fail, "{t:?}");
    let exit = t.system_attrs[EXIT_ATTR].as_str().unwrap();
    assert!(exit.contains("timeout"), "{:?}", t.system_attrs);
}

/// Every trial is one micro-batch of 1 GiB.
struct OneGib;

impl MemoryEstimator for OneGib {
    fn propose(&self, _trial: &mut Trial) -> Result<Shape, TrialError> {
        Ok(Shape::new("test", Batch::new(1, 1)))
    }

    fn peak_bytes(&self, _params: &BTreeMap<String, ParamValue>, _batch: Batch) -> u64 {
        GIB
    }
}

/// A worker that ignores SIGTERM: it becomes a shell that traps it and
/// sleeps (an ignored signal stays ignored across `exec`), as a process
/// stuck in a driver call would. Only SIGKILL ends it.
#[test]
#[ignore = "run by executor_a_worker_that_ignores_sigterm_is_killed_after_the_grace"]
fn stubborn_worker_entry() {
    use std::os::unix::process::CommandExt;
    executor::worker_main(|_trial: &mut Trial| -> Result<f64, TrialError> {
        let e = Command::new("sh")
            .args(["-c", "trap '' TERM; exec sleep 60"])
            .exec();
        panic!("could not exec the shell: {e}");
    })
    .unwrap();
    panic!("stubborn_worker_entry runs only as a worker started by the executor");
}

/// A trial past its timeout gets SIGTERM, and SIGKILL once the grace has
/// passed: a worker that ignores SIGTERM still ends, and its trial fails as
/// timed out.
#[test]
fn executor_a_worker_that_ignores_sigterm_is_killed_after_the_grace() {
    let (_db, url) = temp_db("stubborn");
    let name = format!("stubborn-{}", std::process::id());
    let study = study_on(&url, &name);
    let (timeout, grace) = (Duration::from_millis(1500), Duration::from_millis(1500));
    let cfg = ProcessConfig::new(&url, Arc::new(OneGib))
        .budget(2 * GIB)
        .trial_timeout(timeout)
        .kill_grace(grace)
        .worker_args([
            "executor::stubborn_worker_entry",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ]);
    let started = Instant::now();
    study
        .optimize_with(Optimize::new().trials(1).processes(cfg), |_: &mut Trial| {
            Ok::<f64, TrialError>(0.0)
        })
        .unwrap();
    assert_timed_out(&by_number(&study)[0]);
    // SIGTERM alone did not end it: the grace passed before SIGKILL.
    assert!(
        started.elapsed() >= timeout + grace,
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn executor_real_workers_run_in_parallel_within_the_budget() {
    let (_db, url) = temp_db("parallel");
    let name = format!("parallel-{}", std::process::id());
    let study = study_on(&url, &name);
    for _ in 0..8 {
        enqueue(&study, "slow", 1);
    }
    // 1 GiB x 1.05 margin each: two fit in 3 GiB, three do not.
    study
        .optimize_with(
            Optimize::new().trials(8).processes(config(&url, 3)),
            objective,
        )
        .unwrap();
    let trials = by_number(&study);
    assert!(trials.iter().all(|t| t.state == TrialState::Complete));
    let mut edges = Vec::new();
    for t in &trials {
        let span =
            std::fs::read_to_string(marker_dir(&name).join(format!("span-{}", t.number))).unwrap();
        let (a, b) = span.split_once(' ').unwrap();
        edges.push((a.parse::<u128>().unwrap(), 1i32));
        edges.push((b.parse::<u128>().unwrap(), -1i32));
        let reserved = t.system_attrs[executor::RESERVED_BYTES_ATTR]
            .as_u64()
            .unwrap();
        assert!(reserved > GIB && reserved < 3 * GIB / 2, "{reserved}");
        // The prediction is the reservation without the margin.
        let predicted = t.system_attrs[executor::PREDICTED_BYTES_ATTR]
            .as_u64()
            .unwrap();
        assert!(predicted >= GIB && predicted < reserved, "{predicted}");
    }
    edges.sort();
    let mut running = 0;
    let mut most = 0;
    for (_, d) in edges {
        running += d;
        most = most.max(running);
    }
    assert_eq!(
        most, 2,
        "two trials at a time: admitted by memory, and in parallel"
    );
}

#[test]
fn executor_max_workers_caps_the_processes_below_what_memory_admits() {
    let (_db, url) = temp_db("max-workers");
    let name = format!("max-workers-{}", std::process::id());
    let study = study_on(&url, &name);
    for _ in 0..6 {
        enqueue(&study, "slow", 1);
    }
    // Memory for six at once, but at most two worker processes.
    study
        .optimize_with(
            Optimize::new()
                .trials(6)
                .processes(config(&url, 7).max_workers(2)),
            objective,
        )
        .unwrap();
    let trials = by_number(&study);
    assert!(trials.iter().all(|t| t.state == TrialState::Complete));
    let mut edges = Vec::new();
    for t in &trials {
        let span =
            std::fs::read_to_string(marker_dir(&name).join(format!("span-{}", t.number))).unwrap();
        let (a, b) = span.split_once(' ').unwrap();
        edges.push((a.parse::<u128>().unwrap(), 1i32));
        edges.push((b.parse::<u128>().unwrap(), -1i32));
    }
    edges.sort();
    let mut running = 0;
    let mut most = 0;
    for (_, d) in edges {
        running += d;
        most = most.max(running);
    }
    assert!(most <= 2, "{most} trials ran at once with max_workers(2)");
}

#[test]
fn executor_workers_see_the_gpu_they_are_placed_on_and_its_budget() {
    let (_db, url) = temp_db("visible");
    for (visible, expected) in [(None, "0"), (Some("3"), "3")] {
        let name = format!("visible-{expected}-{}", std::process::id());
        let study = study_on(&url, &name);
        enqueue(&study, "ok", 1);
        let mut cfg = config(&url, 2);
        if let Some(v) = visible {
            cfg = cfg.visible_devices([v]);
        }
        study
            .optimize_with(Optimize::new().trials(1).processes(cfg), objective)
            .unwrap();
        let told = std::fs::read_to_string(marker_dir(&name).join("ran-0")).unwrap();
        assert_eq!(told, expected);
        // The device's budget, not the machine's memory: hpo's cubecl-cuda
        // sizes its memory pages from it.
        let memory = std::fs::read_to_string(marker_dir(&name).join("memory-0")).unwrap();
        assert_eq!(memory, (2 * GIB).to_string());
    }
    // Several devices: each worker is told its own device's budget.
    let name = format!("visible-budgets-{}", std::process::id());
    let study = study_on(&url, &name);
    enqueue(&study, "ok", 3);
    let cfg = ProcessConfig::new(&url, Arc::new(TestEstimator))
        .devices([GIB, 5 * GIB])
        .visible_devices(["0", "1"])
        .trial_timeout(Duration::from_secs(20))
        .worker_args(worker_args());
    study
        .optimize_with(Optimize::new().trials(1).processes(cfg), objective)
        .unwrap();
    // Three GiB fit only on the second device.
    let told = std::fs::read_to_string(marker_dir(&name).join("ran-0")).unwrap();
    let memory = std::fs::read_to_string(marker_dir(&name).join("memory-0")).unwrap();
    assert_eq!((told.as_str(), memory), ("1", (5 * GIB).to_string()));
}

#[test]
fn executor_workers_get_their_share_of_the_threads_and_the_env_they_are_given() {
    let (_db, url) = temp_db("threads");
    let cases = [
        (None, "- - -"),
        (Some(1), "1 1 x"),
        (Some(3), "3 3 x"),
        // 0 is taken as 1: a worker always has a thread.
        (Some(0), "1 1 x"),
    ];
    for (i, (threads, expected)) in cases.into_iter().enumerate() {
        let name = format!("threads-{i}-{}", std::process::id());
        let study = study_on(&url, &name);
        enqueue(&study, "ok", 1);
        let mut cfg = config(&url, 2);
        if let Some(n) = threads {
            // Set twice: the second value replaces the first.
            cfg = cfg
                .env("HPO_TEST_EXTRA", "y")
                .threads_per_worker(n)
                .env("HPO_TEST_EXTRA", "x");
        }
        study
            .optimize_with(Optimize::new().trials(1).processes(cfg), objective)
            .unwrap();
        let told = std::fs::read_to_string(marker_dir(&name).join("threads-0")).unwrap();
        assert_eq!(told, expected, "threads_per_worker({threads:?})");
    }
}

#[test]
fn executor_timeout_launches_nothing_more_and_gives_back_what_it_sampled_ahead() {
    let (_db, url) = temp_db("give-back");
    let name = format!("give-back-{}", std::process::id());
    let study = study_on(&url, &name);
    for _ in 0..8 {
        enqueue(&study, "slow", 1);
    }
    // One worker at a time, eight sampled ahead, each trial 300 ms: the
    // study's time (150 ms) runs out with trials still queued.
    let cfg = config(&url, 2).max_workers(1).lookahead(8);
    study
        .optimize_with(
            Optimize::new()
                .trials(8)
                .timeout(Duration::from_millis(150))
                .processes(cfg.clone()),
            objective,
        )
        .unwrap();
    let trials = by_number(&study);
    let given_back: Vec<_> = trials
        .iter()
        .filter(|t| t.fail_reason() == Some(executor::NOT_STARTED_REASON))
        .collect();
    let complete = trials
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .count();
    let waiting: Vec<_> = trials
        .iter()
        .filter(|t| t.state == TrialState::Waiting)
        .collect();
    let states: Vec<_> = trials
        .iter()
        .map(|t| (t.number, t.state, t.fail_reason().map(str::to_owned)))
        .collect();
    assert!(!given_back.is_empty(), "{states:?}");
    assert_eq!(complete + given_back.len(), 8, "{states:?}");
    assert_eq!(waiting.len(), given_back.len(), "{states:?}");
    assert_eq!(trials.len(), 8 + waiting.len(), "nothing else: {states:?}");
    for t in &given_back {
        // Never started: no sampler may read it as a verdict on its configuration.
        assert_eq!(t.failure(), Some(FailureKind::NotStarted));
        assert!(!FailureKind::NotStarted.blames_configuration());
        // Its configuration waits, with its lineage, for the next run.
        let copy = waiting
            .iter()
            .find(|w| w.system_attrs.get(FAILED_TRIAL_ATTR) == Some(&json!(t.number)))
            .unwrap_or_else(|| panic!("no WAITING copy of trial {}", t.number));
        assert_eq!(copy.params(), t.params());
    }
    // The next run starts with them.
    study
        .optimize_with(
            Optimize::new().trials(waiting.len()).processes(cfg),
            objective,
        )
        .unwrap();
    let after: Vec<_> = by_number(&study)
        .iter()
        .map(|t| (t.number, t.state))
        .collect();
    assert!(
        after
            .iter()
            .all(|(_, s)| matches!(s, TrialState::Complete | TrialState::Fail)),
        "{after:?}"
    );
    assert_eq!(
        after
            .iter()
            .filter(|(_, s)| *s == TrialState::Complete)
            .count(),
        8,
        "every configuration ran once: {after:?}"
    );
}

/// How far ahead the coordinator samples depends on the sampler: a trial
/// sampled ahead is proposed without the results that arrive before it
/// starts, which costs samplers that learn from results (2 ahead) and not
/// those that do not (8 ahead); a set lookahead wins.
#[test]
fn executor_samples_ahead_as_far_as_the_sampler_can_afford() {
    let cfg = config("sqlite:unused.db", 2);
    let learning: [Arc<dyn Sampler>; 3] = [
        Arc::new(TpeSampler::seeded(1)),
        Arc::new(CmaEsSampler::with_config(CmaEsConfig::seeded(1)).unwrap()),
        Arc::new(OwnSampler(RandomSampler::seeded(1))),
    ];
    for s in &learning {
        assert_eq!(cfg.lookahead_for(s.as_ref()), executor::LOOKAHEAD_LEARNING);
    }
    let grid = GridSampler::new([("x", vec![ParamValue::Int(1)])], 1).unwrap();
    let independent: [Arc<dyn Sampler>; 3] = [
        Arc::new(RandomSampler::seeded(1)),
        Arc::new(QmcSampler::new()),
        Arc::new(grid),
    ];
    for s in &independent {
        assert_eq!(
            cfg.lookahead_for(s.as_ref()),
            executor::LOOKAHEAD_INDEPENDENT
        );
    }
    assert_eq!(
        cfg.clone()
            .lookahead(5)
            .lookahead_for(&TpeSampler::seeded(1)),
        5
    );
    assert_eq!(
        (
            executor::LOOKAHEAD_LEARNING,
            executor::LOOKAHEAD_INDEPENDENT
        ),
        (2, 8)
    );

    // Run: one worker at a time, trials of 300 ms, the study's time out
    // after 150 ms: what was sampled ahead is given back, and that is the
    // sampler's lookahead.
    let cases: [(&str, Arc<dyn Sampler>, usize); 2] = [
        ("tpe", Arc::new(TpeSampler::seeded(1)), 2),
        ("random", Arc::new(RandomSampler::seeded(1)), 8),
    ];
    for (tag, sampler, ahead) in cases {
        let (url, study) = sampled_study(&format!("ahead-{tag}"), sampler);
        for _ in 0..12 {
            enqueue(&study, "slow", 1);
        }
        study
            .optimize_with(
                Optimize::new()
                    .trials(12)
                    .timeout(Duration::from_millis(150))
                    .processes(config(&url, 2).max_workers(1)),
                objective,
            )
            .unwrap();
        let given_back = by_number(&study)
            .iter()
            .filter(|t| t.fail_reason() == Some(executor::NOT_STARTED_REASON))
            .count();
        assert_eq!(given_back, ahead, "{tag}");
    }
}

#[test]
fn executor_oom_relaunch_keeps_the_effective_batch_and_records_lineage() {
    let (_db, url) = temp_db("oom");
    let name = format!("oom-{}", std::process::id());
    let study = study_on(&url, &name);
    let died = enqueue(&study, "oom", 16);
    let told = enqueue(&study, "oom_told", 16);
    study
        .optimize_with(
            Optimize::new().trials(2).processes(config(&url, 64)),
            objective,
        )
        .unwrap();
    let trials = by_number(&study);
    assert_eq!(trials.len(), 6, "two configurations, three attempts each");
    for first in [died, told] {
        let chain: Vec<_> = trials
            .iter()
            .filter(|t| {
                t.number == first || t.system_attrs.get(FAILED_TRIAL_ATTR) == Some(&json!(first))
            })
            .collect();
        assert_eq!(chain.len(), 3, "{chain:#?}");
        let micro: Vec<_> = chain
            .iter()
            .map(|t| t.system_attrs[MICRO_BATCH_ATTR].as_u64().unwrap())
            .collect();
        let accum: Vec<_> = chain
            .iter()
            .map(|t| t.system_attrs[ACCUMULATION_ATTR].as_u64().unwrap())
            .collect();
        assert_eq!(micro, [16, 8, 4]);
        assert_eq!(accum, [1, 2, 4], "same effective batch of 16");
        for t in &chain[..2] {
            assert_eq!(t.failure(), Some(FailureKind::Oom), "{:?}", t.system_attrs);
            assert!(
                t.constraint_violation().is_none(),
                "a relaunched attempt is not a constraint violation"
            );
        }
        let last = chain[2];
        assert_eq!(last.state, TrialState::Complete);
        assert_eq!(last.value(), Some(16.0 + 0.016));
        assert_eq!(last.internal_params, chain[0].internal_params);
        assert_eq!(
            last.system_attrs[RETRY_HISTORY_ATTR],
            json!([chain[0].number, chain[1].number])
        );
        assert_eq!(last.system_attrs[OOM_RETRIES_ATTR], json!(2));
    }
}

#[test]
fn executor_oom_at_the_floor_ends_as_oom() {
    let (_db, url) = temp_db("floor");
    let name = format!("floor-{}", std::process::id());
    let study = study_on(&url, &name);
    enqueue(&study, "oom", 10); // 10 -> 5, and 5 is odd: the floor.
    study
        .optimize_with(
            Optimize::new().trials(1).processes(config(&url, 64)),
            objective,
        )
        .unwrap();
    let trials = by_number(&study);
    assert_eq!(trials.len(), 2);
    let last = &trials[1];
    assert_eq!(last.failure(), Some(FailureKind::Oom));
    assert_eq!(last.system_attrs[MICRO_BATCH_ATTR], json!(5));
    assert_eq!(last.constraint_violation(), Some(1.0), "for the sampler");
}

#[test]
fn executor_an_infeasible_config_never_launches_and_a_big_one_is_shrunk() {
    let (_db, url) = temp_db("infeasible");
    let name = format!("infeasible-{}", std::process::id());
    let study = study_on(&url, &name);
    let never = enqueue(&study, "ok", 64);
    let shrunk = enqueue(&study, "ok", 32);
    let cfg = config(&url, 8).admission(AdmissionPolicy {
        min_micro_batch: 16,
        ..Default::default()
    });
    study
        .optimize_with(Optimize::new().trials(2).processes(cfg), objective)
        .unwrap();
    let trials = by_number(&study);
    let t = &trials[never as usize];
    assert_eq!(t.failure(), Some(FailureKind::Infeasible), "{t:?}");
    assert!(t.fail_reason().unwrap().contains("not launched"));
    assert!(
        !marker_dir(&name).join(format!("ran-{never}")).exists(),
        "no worker ever ran it"
    );
    // 32 GiB > 8: shrunk to micro-batch 16 (16 GiB)? Still too big: infeasible too.
    let t = &trials[shrunk as usize];
    assert_eq!(t.failure(), Some(FailureKind::Infeasible));

    // With a lower floor the same configuration is shrunk to fit and runs.
    let again = enqueue(&study, "ok", 32);
    let cfg = config(&url, 8).admission(AdmissionPolicy {
        min_micro_batch: 1,
        ..Default::default()
    });
    study
        .optimize_with(Optimize::new().trials(1).processes(cfg), objective)
        .unwrap();
    let t = &study.trials().unwrap()[again as usize];
    assert_eq!(t.state, TrialState::Complete);
    assert_eq!(
        t.system_attrs[MICRO_BATCH_ATTR],
        json!(4),
        "32 -> 4 fits 8 GiB with margin"
    );
    assert_eq!(t.system_attrs[ACCUMULATION_ATTR], json!(8));
    assert!(marker_dir(&name).join(format!("ran-{again}")).exists());
}

/// [`TestEstimator`]'s sizes, a quarter of them with activation
/// recomputation, which costs a third more time per example; a pass costs
/// as much as 16 examples more, so halving the micro-batch is dear.
struct RecomputeEstimator;

impl MemoryEstimator for RecomputeEstimator {
    fn propose(&self, trial: &mut Trial) -> Result<Shape, TrialError> {
        TestEstimator.propose(trial)
    }

    fn peak_bytes(&self, params: &BTreeMap<String, ParamValue>, batch: Batch) -> u64 {
        let kept = TestEstimator.peak_bytes(params, batch);
        if batch.recompute {
            kept / 4
        } else {
            kept
        }
    }

    fn relative_time(&self, _params: &BTreeMap<String, ParamValue>, batch: Batch) -> Option<f64> {
        let per_example = 1.0 + 16.0 / f64::from(batch.micro);
        Some(per_example * if batch.recompute { 1.33 } else { 1.0 })
    }
}

#[test]
fn executor_recomputes_activations_where_that_is_faster_than_a_smaller_micro_batch() {
    let (_db, url) = temp_db("recompute");
    let name = format!("recompute-{}", std::process::id());
    let study = study_on(&url, &name);
    let with = |gib: u64| {
        ProcessConfig::new(&url, Arc::new(RecomputeEstimator))
            .budget(gib * GIB)
            .trial_timeout(Duration::from_secs(20))
            .worker_args(worker_args())
    };
    // 16 GiB as asked does not fit 8; recomputing at 16 (4 GiB, 2.66 per
    // example) is faster than micro-batch 4 (4 GiB, 5.0), and the worker
    // is told (it would die otherwise).
    let fitted = enqueue(&study, "recompute_only", 16);
    study
        .optimize_with(Optimize::new().trials(1).processes(with(8)), objective)
        .unwrap();
    let t = &study.trials().unwrap()[fitted as usize];
    assert_eq!(t.state, TrialState::Complete, "{:?}", t.system_attrs);
    assert_eq!(t.system_attrs[MICRO_BATCH_ATTR], json!(16));
    assert_eq!(t.system_attrs[ACCUMULATION_ATTR], json!(1));
    assert_eq!(t.system_attrs[RECOMPUTE_ATTR], json!(true));
    assert!(!t.system_attrs.contains_key(OOM_RETRIES_ATTR));

    // Admitted as asked where it fits, then out of memory: relaunched at
    // the same micro-batch with recomputation, not at half of it.
    let first = enqueue(&study, "recompute_only", 16);
    study
        .optimize_with(Optimize::new().trials(1).processes(with(64)), objective)
        .unwrap();
    let trials = by_number(&study);
    let chain: Vec<_> = trials
        .iter()
        .filter(|t| {
            t.number == first || t.system_attrs.get(FAILED_TRIAL_ATTR) == Some(&json!(first))
        })
        .collect();
    assert_eq!(chain.len(), 2, "{chain:#?}");
    assert_eq!(chain[0].failure(), Some(FailureKind::Oom));
    assert!(!chain[0].system_attrs.contains_key(RECOMPUTE_ATTR));
    let last = chain[1];
    assert_eq!(last.state, TrialState::Complete);
    assert_eq!(last.system_attrs[MICRO_BATCH_ATTR], json!(16));
    assert_eq!(last.system_attrs[RECOMPUTE_ATTR], json!(true));
    assert_eq!(last.value(), Some(16.0 + 0.016), "same effective batch");
}

#[test]
fn executor_an_in_memory_study_cannot_use_processes() {
    let study = Study::builder().heartbeat(BEAT, GRACE).build().unwrap();
    let err = study
        .optimize_with(
            Optimize::new().trials(1).processes(config("memory:", 1)),
            objective,
        )
        .unwrap_err();
    assert!(err.to_string().contains("in-memory"), "{err}");
    // A file URL that does not hold this (in-memory) study is refused too.
    let (_db, url) = temp_db("mem");
    let err = study
        .optimize_with(
            Optimize::new().trials(1).processes(config(&url, 1)),
            objective,
        )
        .unwrap_err();
    assert!(err.to_string().contains("in-memory"), "{err}");
    assert!(study.trials().unwrap().is_empty(), "nothing ran");
}

#[test]
fn executor_settings_that_cannot_work_are_refused_before_anything_runs() {
    let (_db, url) = temp_db("settings");
    let name = format!("settings-{}", std::process::id());
    let study = study_on(&url, &name);
    let no_budget = ProcessConfig::new(&url, Arc::new(TestEstimator)).worker_args(worker_args());
    let err = study
        .optimize_with(Optimize::new().trials(1).processes(no_budget), objective)
        .unwrap_err();
    assert!(err.to_string().contains("memory budget"), "{err}");

    let no_heartbeat = Study::builder()
        .name(format!("{name}-nohb"))
        .storage_url(&url)
        .build()
        .unwrap();
    let err = no_heartbeat
        .optimize_with(
            Optimize::new().trials(1).processes(config(&url, 1)),
            objective,
        )
        .unwrap_err();
    assert!(err.to_string().contains("heartbeat"), "{err}");
    assert!(study.trials().unwrap().is_empty());
    assert!(no_heartbeat.trials().unwrap().is_empty());
}

#[test]
fn executor_kill_9_of_the_coordinator_then_restart_loses_nothing() {
    let (db, url) = temp_db("kill9");
    let name = format!("kill9-{}", std::process::id());
    let study = study_on(&url, &name);
    let n = 24;
    for _ in 0..n {
        enqueue(&study, "slow", 1);
    }
    let mut coordinator = Command::new(std::env::current_exe().unwrap())
        .args([
            "executor::coordinator_entry",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("HPO_EXEC_DB", &db)
        .env("HPO_EXEC_STUDY", &name)
        .env("HPO_EXEC_TRIALS", n.to_string())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let storage = SqliteStorage::open(&db).unwrap();
    let complete = |s: &SqliteStorage| {
        s.trials(study.id())
            .unwrap()
            .into_iter()
            .filter(|t| t.state == TrialState::Complete)
            .collect::<Vec<_>>()
    };
    let t0 = Instant::now();
    while complete(&storage).len() < 4 {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "the coordinator made no progress"
        );
        assert!(
            coordinator.try_wait().unwrap().is_none(),
            "the coordinator ended early"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    coordinator.kill().unwrap(); // SIGKILL
    coordinator.wait().unwrap();
    let before = complete(&storage);
    let running = storage
        .trials(study.id())
        .unwrap()
        .iter()
        .filter(|t| t.state == TrialState::Running)
        .count();
    assert!(running > 0, "killed mid-study");

    // After the grace period the restarted coordinator reaps what the dead
    // one (and its orphaned workers) left RUNNING, and runs the rest.
    // Orphaned workers notice the dead coordinator at their own pace (slowly
    // on a loaded machine), so a trial may go stale only after a first reap:
    // restart until nothing is RUNNING or WAITING, as an operator would.
    for _ in 0..6 {
        std::thread::sleep(GRACE + GRACE / 2);
        study.fail_stale_trials().unwrap();
        let count = |state| {
            study
                .trials()
                .unwrap()
                .iter()
                .filter(|t| t.state == state)
                .count()
        };
        let (waiting, running) = (count(TrialState::Waiting), count(TrialState::Running));
        if waiting == 0 && running == 0 {
            break;
        }
        if waiting > 0 {
            study
                .optimize_with(
                    Optimize::new().trials(waiting).processes(config(&url, 3)),
                    objective,
                )
                .unwrap();
        }
    }

    let after = study.trials().unwrap();
    for (i, t) in after.iter().enumerate() {
        assert_eq!(t.number, i as u64, "numbers contiguous");
        assert_ne!(t.state, TrialState::Running, "trial {i} left RUNNING");
        assert_ne!(t.state, TrialState::Waiting, "trial {i} never ran");
    }
    for t in &before {
        assert_eq!(
            **t, *after[t.number as usize],
            "COMPLETE trial {} kept",
            t.number
        );
    }
    let done = after
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .count();
    assert_eq!(done, n, "every enqueued configuration completed once");
}

fn seed_workload() -> Workload {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/workloads/seed_24gb.toml");
    Workload::from_path(&path).unwrap()
}

#[test]
fn executor_shipped_workload_is_calibrated_on_the_seed_observations() {
    let w = seed_workload();
    let coef = w.activation_coefficients().unwrap();
    let fam = |n: &str| w.family.iter().find(|f| f.name == n).unwrap().clone();
    let ctx = w.device[0].context_gib;
    let large = w.true_peak(&fam("bert-large"), 16, 384, coef) as f64 / GIB as f64 + ctx;
    let base = w.true_peak(&fam("bert-base"), 32, 512, coef) as f64 / GIB as f64 + ctx;
    assert!((large - 14.0).abs() < 0.01, "{large}");
    assert!((base - 12.0).abs() < 0.01, "{base}");
    assert_eq!(w.trials, 5000);
    assert_eq!(w.device[0].usable_gib, 23.56);
    // JSON reads the same.
    let json = serde_json::to_string(&w).unwrap();
    assert_eq!(Workload::from_json_str(&json).unwrap(), w);
    assert!(Workload::from_toml_str("seed = 1").is_err());
}

#[test]
fn executor_admission_never_exceeds_the_simulated_budget() {
    let mut w = seed_workload();
    w.trials = 400;
    for queue in [
        QueuePolicy::Fifo,
        QueuePolicy::Backfill { max_bypass: 4 },
        QueuePolicy::BestFit,
    ] {
        let r = simulate(&w, Policy::Executor { queue }).unwrap();
        assert!(
            r.max_reserved_share <= 1.0,
            "{queue:?}: {}",
            r.max_reserved_share
        );
        assert!(r.max_reserved_share > 0.8, "it does pack");
        assert_eq!(r.lost, 0);
        assert_eq!(r.crashed_studies, 0);
        assert_eq!(r.useful, 400, "{queue:?}: {r:?}");
    }
}

#[test]
fn executor_learned_correction_stops_a_forty_percent_underestimate() {
    let mut w = seed_workload();
    w.trials = 600;
    // Every estimate exact, except deberta-large's: 40 % under the truth.
    for f in &mut w.family {
        f.estimate_noise = 0.0;
        f.estimate_factor = if f.name == "deberta-large" { 0.6 } else { 1.0 };
    }
    let policy = Policy::Executor {
        queue: QueuePolicy::Backfill { max_bypass: 8 },
    };
    let deberta_ooms = |r: &hpo_core::executor::simulated::Report| -> Vec<usize> {
        r.oom_log
            .iter()
            .filter(|(_, f, _)| f == "deberta-large")
            .map(|(_, _, k)| *k)
            .collect()
    };
    let learned = simulate(&w, policy).unwrap();
    let ooms = deberta_ooms(&learned);
    assert!(
        ooms.iter().all(|&k| k < 5),
        "OOMs stop within the family's first few trials: {ooms:?}"
    );
    assert_eq!(learned.lost, 0);
    assert_eq!(learned.fit_alone_not_useful, 0);

    // Without learning the same stream keeps running out of memory.
    w.executor.learn = false;
    let blind = simulate(&w, policy).unwrap();
    let blind_ooms = deberta_ooms(&blind);
    assert!(
        blind_ooms.iter().filter(|&&k| k >= 5).count() >= 5,
        "the under-estimate bites without correction: {blind_ooms:?}"
    );
    assert!(blind.oom_events > 2 * learned.oom_events.max(1));
}

#[test]
fn executor_placement_across_two_simulated_devices() {
    let mut w = seed_workload();
    w.trials = 300;
    let second = w.device[0].clone();
    w.device.push(second);
    let r = simulate(
        &w,
        Policy::Executor {
            queue: QueuePolicy::Backfill { max_bypass: 8 },
        },
    )
    .unwrap();
    assert_eq!(r.launches_per_device.len(), 2);
    assert!(
        r.launches_per_device.iter().all(|&n| n > 50),
        "{:?}",
        r.launches_per_device
    );
    assert!(r.max_reserved_share <= 1.0);
    assert_eq!(r.useful, 300);

    // A faulty second device leaves rotation; everything still completes on the first.
    w.device[1].faulty = true;
    let r = simulate(
        &w,
        Policy::Executor {
            queue: QueuePolicy::Backfill { max_bypass: 8 },
        },
    )
    .unwrap();
    assert_eq!(r.retired_devices.len(), 1, "{:?}", r.retired_devices);
    assert!(r.retired_devices[0].starts_with("sim:1"));
    // Retired after three consecutive faults (a few more were launched
    // before the third fault was seen).
    assert!(
        (3..=8).contains(&r.launches_per_device[1]),
        "{:?}",
        r.launches_per_device
    );
    assert_eq!(r.useful, 300);
    assert_eq!(r.lost, 0);

    // A single faulty device is never retired (that would stop the study):
    // its trials fail, each configuration up to the attempt limit.
    w.device.remove(0);
    w.trials = 20;
    let r = simulate(
        &w,
        Policy::Executor {
            queue: QueuePolicy::Backfill { max_bypass: 8 },
        },
    )
    .unwrap();
    assert!(r.retired_devices.is_empty());
    assert_eq!(r.device_failed, 20);
    assert_eq!(r.lost, 0);
}

/// What a CUDA worker process holds beside its allocations, as the GPU
/// checks' executor added it until 2026-11-27's fourth check
/// (hpo_burn::CUDA_CONTEXT_BYTES, which hpo-core does not depend on; 575 MB
/// since, 640 MB with cuBLAS): the recorded peaks of `gpu_peaks.json` and
/// the launch runs that name no context of their own.
const GPU_CONTEXT: u64 = 560_000_000;

/// A scheduler for replaying a GPU check: one device with room for
/// everything and the checks' context, so the replay follows the recorded
/// order and never chooses it.
fn gpu_replay_scheduler<K: Clone + Eq + std::hash::Hash>() -> executor::Scheduler<K> {
    gpu_replay_scheduler_with(GPU_CONTEXT)
}

/// [`gpu_replay_scheduler`] charging `context` bytes per worker.
fn gpu_replay_scheduler_with<K: Clone + Eq + std::hash::Hash>(
    context: u64,
) -> executor::Scheduler<K> {
    executor::Scheduler::new(
        vec![executor::DeviceBudget::new("gpu", 1 << 40, 0, context)],
        AdmissionPolicy::default(),
    )
}

/// The context the recorded runs without a `context` of their own were
/// admitted with.
fn recorded_context() -> u64 {
    GPU_CONTEXT
}

/// The runs of a GPU check fixture in `tests/data/` (`{"runs": {name: run}}`).
fn gpu_fixture_runs<R: serde::de::DeserializeOwned>(file: &str) -> BTreeMap<String, R> {
    #[derive(serde::Deserialize)]
    struct Fixture<R> {
        runs: BTreeMap<String, R>,
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file);
    let fixture: Fixture<R> =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    fixture.runs
}

/// One trial the GPU check ran, as `tests/data/gpu_peaks.json` keeps it.
#[derive(serde::Deserialize)]
struct DevicePeak {
    study: String,
    backbone: String,
    micro_batch: u32,
    estimate: u64,
    measured: u64,
    nvml: u64,
}

/// The executor's predictions for the trials the GPU check ran, replayed in
/// the order they ran, each study with a fresh scheduler (as each `criteria`
/// run has): for each trial, its prediction against NVML's per-process peak,
/// `predicted / nvml - 1`. `keyed` is the executor's rule (a factor per
/// micro-batch, [`executor::Correction::factor_at`]); without it, the
/// family's factor alone ([`executor::Correction::factor`]), the rule before.
fn replay_device_peaks(trials: &[DevicePeak], keyed: bool) -> Vec<f64> {
    let fresh = gpu_replay_scheduler::<usize>;
    let mut errors = Vec::new();
    let (mut sched, mut family_only, mut study) = (fresh(), executor::Correction::new(), "");
    for (key, t) in trials.iter().enumerate() {
        if t.study != study {
            (sched, family_only, study) = (fresh(), executor::Correction::new(), &t.study);
        }
        let batch = Batch::new(t.micro_batch, 1);
        sched.push(executor::Candidate::new(
            key,
            t.backbone.clone(),
            batch,
            t.micro_batch,
            |_| t.estimate,
        ));
        let Some(executor::Step::Launch(l)) = sched.decide() else {
            panic!("trial {key} was not launched");
        };
        assert_eq!((l.batch, l.estimate), (batch, t.estimate));
        let predicted = if keyed {
            l.predicted
        } else {
            (t.estimate as f64 * family_only.factor(&t.backbone)).ceil() as u64 + GPU_CONTEXT
        };
        errors.push(predicted as f64 / t.nvml as f64 - 1.0);
        sched.end(
            &key,
            &executor::TrialEnd {
                measured: Some(t.measured),
                ..Default::default()
            },
        );
        family_only.observe(&t.backbone, t.estimate, t.measured);
    }
    errors
}

/// Issue 34, item 4, replayed on what two GPUs did: the executor's
/// prediction (corrected, before the margin) within 15% of NVML's figure.
/// On the H200 the ratio measured/estimate fell with the micro-batch
/// (1.15-1.23 at 16, 1.02-1.08 at 32, 0.84 at 64), so one factor per
/// backbone over-reserved the large micro-batches; a factor per micro-batch
/// brings 2 more of 21 within 15% there, and costs none on the H100.
#[test]
fn executor_predictions_replayed_on_the_gpu_checks_peaks() {
    #[derive(serde::Deserialize)]
    struct Run {
        trials: Vec<DevicePeak>,
    }
    let runs: BTreeMap<String, Run> = gpu_fixture_runs("gpu_peaks.json");
    let within = |errors: &[f64]| errors.iter().filter(|e| e.abs() <= 0.15).count();
    let mut counts = BTreeMap::new();
    for (name, run) in &runs {
        let keyed = replay_device_peaks(&run.trials, true);
        let family = replay_device_peaks(&run.trials, false);
        assert_eq!(keyed.len(), run.trials.len());
        assert!(
            within(&keyed) >= within(&family),
            "{name}: {keyed:?} {family:?}"
        );
        counts.insert(
            name.as_str(),
            (within(&keyed), within(&family), keyed.len()),
        );
    }
    assert_eq!(counts["h200_nov27_call1"], (14, 12, 21), "{counts:?}");
    assert_eq!(counts["h100_call1"], (21, 21, 23), "{counts:?}");
}

/// One thing the coordinator did in a GPU check's `--jobs` run, as
/// `tests/data/gpu_launches.json` keeps it.
#[derive(serde::Deserialize)]
#[serde(untagged)]
enum DeviceEvent {
    Launch {
        launch: u64,
        family: String,
        micro: u32,
        accumulation: u32,
        estimate: u64,
        predicted: u64,
    },
    End {
        end: u64,
        measured: u64,
    },
}

/// The executor's recorded predictions on a real GPU (`hpo:predicted_bytes`,
/// issue 34's item 4) are what its `Scheduler` computes from the measured
/// peaks, replayed in the order the coordinator launched and ended the
/// trials, several running at once: six H200 calls, `--jobs auto` and
/// `--jobs 2` each. A change to the learned correction that would predict
/// otherwise for these trials fails here, before it reaches a device.
#[test]
fn the_gpu_checks_recorded_predictions_replay_exactly() {
    #[derive(serde::Deserialize)]
    struct Run {
        events: Vec<DeviceEvent>,
        /// The per-worker context the run's executor charged.
        #[serde(default = "recorded_context")]
        context: u64,
    }
    let runs: BTreeMap<String, Run> = gpu_fixture_runs("gpu_launches.json");
    assert_eq!(runs.len(), 12);
    for (name, run) in &runs {
        let mut sched = gpu_replay_scheduler_with::<u64>(run.context);
        let (mut launches, mut learned) = (0, 0);
        for event in &run.events {
            match event {
                DeviceEvent::Launch {
                    launch,
                    family,
                    micro,
                    accumulation,
                    estimate,
                    predicted,
                } => {
                    let batch = Batch::new(*micro, *accumulation);
                    sched.push(executor::Candidate::new(
                        *launch,
                        family.clone(),
                        batch,
                        *micro,
                        |_| *estimate,
                    ));
                    let Some(executor::Step::Launch(l)) = sched.decide() else {
                        panic!("{name}: trial {launch} was not launched");
                    };
                    assert_eq!((l.key, l.batch), (*launch, batch), "{name}");
                    assert_eq!(l.predicted, *predicted, "{name}: trial {launch}");
                    launches += 1;
                    learned += usize::from(l.predicted != estimate + run.context);
                }
                DeviceEvent::End { end, measured } => {
                    sched.end(
                        end,
                        &executor::TrialEnd {
                            measured: Some(*measured),
                            ..Default::default()
                        },
                    );
                }
            }
        }
        // Every run launched at least 14 trials (the shortest, 85 s of
        // --jobs 2, 14), most of them predicted with a factor learned from
        // earlier ones (not the estimate alone).
        assert!(
            launches >= 14 && learned * 2 > launches,
            "{name}: {learned} of {launches}"
        );
    }
}
