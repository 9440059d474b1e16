//! `hpo::cli`: a study run from its flags through `StudyRunner::run`, in
//! this process and in worker processes (this test binary re-invoked on the
//! ignored test `runner::worker_entry`).

use clap::Parser;
use hpo::cli::{Jobs, StudyArgs, StudyRunner, WorkerLaunch};
use hpo::executor::{self, Batch, Memory, MemoryEstimator, Shape, GIB};
use hpo::{Direction, ParamValue, SearchSpace, Study, Trial, TrialError, TrialState};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

#[hpo::search_space]
#[derive(Debug, Clone, PartialEq)]
struct Quadratic {
    #[param(float(-4.0..=4.0))]
    x: f64,
    #[param(choice(1, 2, 4))]
    batch: u32,
}

fn objective(trial: &mut Trial) -> Result<f64, TrialError> {
    let q = Quadratic::sample(trial)?;
    if let Some(run) = executor::batch_of(trial) {
        // In a worker: the executor says which batch to run.
        trial.set_user_attr("ran_at", run.micro)?;
    }
    Ok((q.x - 1.0).powi(2) + f64::from(q.batch) * 1e-3)
}

/// Sizes a configuration at 10 MiB per example of batch.
struct Estimator;

impl MemoryEstimator for Estimator {
    fn propose(&self, trial: &mut Trial) -> Result<Shape, TrialError> {
        let q = Quadratic::sample(trial)?;
        Ok(Shape::new("quadratic", Batch::new(q.batch, 1)))
    }

    fn peak_bytes(&self, _params: &BTreeMap<String, ParamValue>, batch: Batch) -> u64 {
        u64::from(batch.micro) * (10 << 20)
    }
}

#[derive(Parser)]
struct Cmd {
    #[command(flatten)]
    study: StudyArgs,
}

fn args(argv: &[&str]) -> StudyArgs {
    Cmd::try_parse_from(["exp"].iter().chain(argv))
        .unwrap()
        .study
}

fn temp_db(tag: &str, pid: u32) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("hpo-runner-{tag}-{pid}"));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("study.db");
    (db.clone(), format!("sqlite:{}", db.display()))
}

/// The study `quadratic` of `url`, as stored.
fn quadratic(url: &str) -> Study {
    Study::builder()
        .name("quadratic")
        .storage_url(url)
        .load()
        .unwrap()
}

fn runner(args: &StudyArgs) -> StudyRunner<'_> {
    StudyRunner::new(args)
        .default_study("quadratic")
        .default_trials(6)
        .direction(Direction::Minimize)
        .space::<Quadratic>()
        .quiet(true)
}

#[test]
fn a_study_runs_in_this_process_from_its_flags() {
    let (db, url) = temp_db("in-process", std::process::id());
    let _ = std::fs::remove_file(&db);
    let a = args(&[
        "--storage",
        &url,
        "--jobs",
        "in-process",
        "--sampler",
        "random",
    ]);
    let warm = vec![
        ("x".to_owned(), ParamValue::from(1.0)),
        ("batch".to_owned(), ParamValue::from(2i64)),
    ];
    let done = runner(&a).warm_start(warm.clone()).run(objective).unwrap();
    assert_eq!(done.jobs, Jobs::InProcess);
    assert_eq!(done.summary.trials, 6);
    assert_eq!(done.summary.states.get("complete"), Some(&6));
    let trials = done.study.trials().unwrap();
    // The warm start ran first, as given.
    assert_eq!(trials[0].params().get("x"), Some(&ParamValue::from(1.0)));
    // Running again continues the study, without a second warm start.
    let more = args(&["--storage", &url, "--jobs", "in-process", "--trials", "2"]);
    let done = runner(&more).warm_start(warm).run(objective).unwrap();
    assert_eq!(done.summary.trials, 8);
    let again = done.study.trials().unwrap();
    assert_eq!(
        again
            .iter()
            .filter(|t| t.params().get("x") == Some(&ParamValue::from(1.0)))
            .count(),
        1
    );
    let _ = std::fs::remove_dir_all(db.parent().unwrap());
}

#[test]
fn bad_flags_and_configurations_are_refused_leaving_the_study_as_it_was() {
    let (db, url) = temp_db("refused", std::process::id());
    let _ = std::fs::remove_file(&db);
    let err = |argv: &[&str]| {
        let a = args(argv);
        runner(&a)
            .run(objective)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    // No memory estimate: worker processes are refused.
    let e = err(&["--storage", &url, "--jobs", "2"]);
    assert!(e.contains("use `--jobs in-process`"), "{e}");
    let e = err(&["--storage", &url, "--memory-budget", "1GiB"]);
    assert!(e.contains("--memory-budget admits worker processes"), "{e}");
    let e = err(&["--storage", &url, "--trial-timeout", "9"]);
    assert!(e.contains("--trial-timeout ends worker processes"), "{e}");
    // One bad configuration among good ones: nothing is enqueued.
    let e = err(&[
        "--storage",
        &url,
        "--enqueue",
        r#"{"x": 0.5}"#,
        "--enqueue",
        r#"{"x": 9.0}"#,
    ]);
    assert!(e.contains("`x` = 9 is outside the search space"), "{e}");
    let e = err(&["--storage", &url, "--enqueue", r#"{"y": 1}"#]);
    assert!(e.contains("`y` is not a parameter"), "{e}");
    let e = err(&["--storage", &url, "--enqueue", r#"{"batch": 3}"#]);
    assert!(e.contains("`batch` = 3"), "{e}");
    let study = quadratic(&url);
    assert!(study.trials().unwrap().is_empty());
    let _ = std::fs::remove_dir_all(db.parent().unwrap());
}

/// The flags of the worker-process study, the same in the test and in its
/// workers (which find the database by their coordinator's pid).
fn worker_flags(coordinator: u32) -> (PathBuf, Vec<String>) {
    let (db, url) = temp_db("workers", coordinator);
    let mut flags = two_workers(&url);
    flags.extend(
        [
            "--trial-timeout",
            "60",
            "--enqueue",
            r#"{"x": 1.0, "batch": 4}"#,
        ]
        .map(String::from),
    );
    (db, flags)
}

/// Four trials of the study at `url` on two worker processes, as `criteria`
/// runs on the CPU.
fn two_workers(url: &str) -> Vec<String> {
    [
        "--storage",
        url,
        "--jobs",
        "2",
        "--memory-budget",
        "1GiB",
        "--trials",
        "4",
    ]
    .map(String::from)
    .to_vec()
}

fn run_workers(coordinator: u32) -> hpo::Result<hpo::cli::Finished> {
    let (_, flags) = worker_flags(coordinator);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let mut a = args(&flags);
    // The workers are this test binary on its worker entry, started the
    // way an experiment's tests start theirs.
    let launch = hpo::cli::WorkerLaunch::test_entry("runner::worker_entry");
    a.worker_launch = Some(launch.env("HPO_RUNNER_WORKER_MARK", "set"));
    runner(&a)
        .workers(Arc::new(Estimator), Memory::Host)
        .run(objective)
}

#[test]
#[ignore = "run by trials_run_in_worker_processes_from_the_flags as a worker process"]
fn worker_entry() {
    assert!(executor::is_worker(), "only a worker process runs this");
    assert_eq!(
        std::env::var("HPO_RUNNER_WORKER_MARK").as_deref(),
        Ok("set"),
        "the launch's environment reaches the worker"
    );
    run_workers(std::os::unix::process::parent_id()).unwrap();
    panic!("a worker exits once its trial is stored");
}

#[test]
fn trials_run_in_worker_processes_from_the_flags() {
    let (db, _) = worker_flags(std::process::id());
    let _ = std::fs::remove_file(&db);
    let done = run_workers(std::process::id()).unwrap();
    assert_eq!(done.jobs, Jobs::Workers(2));
    assert_eq!(
        done.summary.states.get("complete"),
        Some(&4),
        "{:?}",
        done.summary
    );
    for t in done.study.trials().unwrap().iter() {
        assert_eq!(t.state, TrialState::Complete);
        // Launched by the executor in a worker that measured its memory.
        for key in [executor::DEVICE_ATTR, executor::PEAK_BYTES_ATTR] {
            assert!(
                t.system_attrs.contains_key(key),
                "trial {} lacks {key}",
                t.number
            );
        }
        assert!(t.user_attrs.contains_key("ran_at"), "{t:?}");
    }
    let peak = done.summary.peak.clone().unwrap();
    assert_eq!(peak.what, "worker resident memory");
    assert!(peak.bytes > 0 && peak.bytes < 4 * GIB, "{peak:?}");
    // The enqueued configuration ran first.
    let first = &done.study.trials().unwrap()[0];
    assert_eq!(
        first.params().get("batch").and_then(ParamValue::as_f64),
        Some(4.0)
    );
    let _ = std::fs::remove_dir_all(db.parent().unwrap());
}

/// The same parameters as `Quadratic`, with `x` over another range: what a
/// space with bounds computed from other data, or edited code, looks like.
#[hpo::search_space]
#[derive(Debug, Clone, PartialEq)]
struct Wider {
    #[param(float(-8.0..=8.0))]
    x: f64,
    #[param(choice(1, 2, 4))]
    batch: u32,
}

#[test]
fn a_study_resumed_with_another_space_is_refused() {
    let (db, url) = temp_db("space", std::process::id());
    let _ = std::fs::remove_file(&db);
    let a = args(&["--storage", &url, "--jobs", "in-process", "--trials", "2"]);
    runner(&a).run(objective).unwrap();
    let recorded = quadratic(&url).system_attrs().unwrap();
    assert!(recorded[hpo::cli::SPACE_ATTR]
        .as_str()
        .is_some_and(|s| s.contains("float[-4, 4]")));
    let wider = |allow| {
        StudyRunner::new(&a)
            .default_study("quadratic")
            .space::<Wider>()
            .allow_space_change(allow)
            .quiet(true)
            .run(|trial| {
                let w = Wider::sample(trial)?;
                Ok(w.x * w.x)
            })
    };
    let e = wider(false)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        e.contains("study `quadratic` was created with another search space"),
        "{e}"
    );
    assert!(e.contains("- x") && e.contains("+ x"), "{e}");
    let study = quadratic(&url);
    assert_eq!(study.trials().unwrap().len(), 2, "nothing ran");
    // Let through on purpose, the new space is recorded.
    let done = wider(true).unwrap();
    assert_eq!(done.summary.trials, 4);
    let _ = std::fs::remove_dir_all(db.parent().unwrap());
}

/// Bounds computed from the data are part of the recorded space: resumed on
/// data that gives other bounds, a study is refused; on the same, it resumes.
#[test]
fn a_study_resumed_on_data_that_changes_its_space_is_refused() {
    let (db, url) = temp_db("space-data", std::process::id());
    let _ = std::fs::remove_file(&db);
    let a = args(&["--storage", &url, "--jobs", "in-process", "--trials", "1"]);
    let with = |line: &str| runner(&a).space_data(line).run(objective);
    with("length_pct 50 -> 24 tokens, 99 -> 64").unwrap();
    let recorded = quadratic(&url).system_attrs().unwrap();
    assert!(recorded[hpo::cli::SPACE_ATTR]
        .as_str()
        .is_some_and(|s| s.ends_with("data: length_pct 50 -> 24 tokens, 99 -> 64\n")));
    with("length_pct 50 -> 24 tokens, 99 -> 64").unwrap();
    let e = with("length_pct 50 -> 512 tokens, 99 -> 512")
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(e.contains("another search space"), "{e}");
    assert!(
        e.contains("- data: length_pct 50 -> 24 tokens")
            && e.contains("+ data: length_pct 50 -> 512"),
        "{e}"
    );
    assert!(e.contains("(and the data)"), "{e}");
    let study = quadratic(&url);
    assert_eq!(
        study.trials().unwrap().len(),
        2,
        "the refused run ran nothing"
    );
    let _ = std::fs::remove_dir_all(db.parent().unwrap());
}

#[test]
fn an_experiments_default_sampler_is_seeded_by_the_flag_unless_it_has_a_seed() {
    use hpo::sampler::{GpConfig, SamplerConfig};
    let a = args(&["--seed", "7"]);
    let unseeded = SamplerConfig::Gp(GpConfig {
        seed: None,
        ..GpConfig::default()
    });
    let config = runner(&a)
        .default_sampler(unseeded)
        .sampler_config()
        .unwrap();
    assert!(
        matches!(&config, SamplerConfig::Gp(c) if c.seed == Some(7)),
        "{config:?}"
    );
    let seeded = SamplerConfig::Gp(GpConfig {
        seed: Some(3),
        ..GpConfig::default()
    });
    let config = runner(&a).default_sampler(seeded).sampler_config().unwrap();
    assert!(
        matches!(&config, SamplerConfig::Gp(c) if c.seed == Some(3)),
        "{config:?}"
    );
}

/// The flags of the study interrupted below.
fn interrupted_flags(dir: &std::path::Path) -> Vec<String> {
    two_workers(&format!("sqlite:{}", dir.join("study.db").display()))
}

/// An objective that writes its process's pid and sleeps: nothing but the
/// end of its process stops it.
fn sleeping(trial: &mut Trial) -> Result<f64, TrialError> {
    let q = Quadratic::sample(trial)?;
    let dir = PathBuf::from(std::env::var("HPO_RUNNER_DIR").unwrap());
    let pid = std::process::id().to_string();
    std::fs::write(dir.join(format!("pid-{}", trial.number())), pid).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(60));
    Ok(q.x)
}

/// An experiment's `main`, coordinator and workers alike (as `criteria`
/// is): `StudyRunner::run` with worker processes.
#[test]
#[ignore = "run by ctrl_c_stops_a_study_with_worker_processes_cleanly"]
fn interrupted_study_entry() {
    let dir = PathBuf::from(std::env::var("HPO_RUNNER_DIR").unwrap());
    let flags = interrupted_flags(&dir);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let a = args(&flags);
    runner(&a)
        .quiet(false)
        .workers(Arc::new(Estimator), Memory::Host)
        .processes_with(|c| {
            c.worker_args(WorkerLaunch::test_entry("runner::interrupted_study_entry").args)
        })
        .run(sleeping)
        .unwrap();
    panic!("the study was to be interrupted");
}

/// The issue's `criteria` run, interrupted as a terminal does it (SIGINT
/// to the whole process group) mid-trial: the study exits 130 after its
/// summary, with no trial RUNNING, each interrupted trial failed with its
/// retry copy, and no worker left behind.
#[test]
fn ctrl_c_stops_a_study_with_worker_processes_cleanly() {
    use std::os::unix::process::CommandExt;
    use std::time::{Duration, Instant};
    let dir = std::env::temp_dir().join(format!("hpo-runner-ctrl-c-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("stdout");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "runner::interrupted_study_entry",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("HPO_RUNNER_DIR", &dir)
        .stdout(std::fs::File::create(&out).unwrap())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    let pids = |dir: &std::path::Path| -> Vec<i32> {
        std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| {
                let e = e.unwrap();
                let name = e.file_name().to_string_lossy().into_owned();
                name.starts_with("pid-")
                    .then(|| std::fs::read_to_string(e.path()).unwrap().parse().ok())
                    .flatten()
            })
            .collect()
    };
    let t0 = Instant::now();
    while pids(&dir).len() < 2 {
        assert!(child.try_wait().unwrap().is_none(), "the study ended early");
        assert!(t0.elapsed() < Duration::from_secs(120), "no trial started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let workers = pids(&dir);
    let group = i32::try_from(child.id()).unwrap();
    // SAFETY: kill(2) with a negative pid signals that process group.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::kill(-group, libc::SIGINT) };
    assert_eq!(rc, 0);
    let t0 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("the study did not stop");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let printed = std::fs::read_to_string(&out).unwrap();
    assert_eq!(status.code(), Some(130), "{status}\n{printed}");
    assert!(printed.contains("\"interrupted\": 2"), "{printed}");
    assert!(printed.contains("stopped by SIGINT (Ctrl-C)"), "{printed}");
    let study = Study::builder()
        .name("quadratic")
        .storage_url(format!("sqlite:{}", dir.join("study.db").display()))
        .load()
        .unwrap();
    let trials = study.trials().unwrap();
    assert!(
        trials.iter().all(|t| t.state != TrialState::Running),
        "{trials:#?}"
    );
    let interrupted: Vec<_> = trials
        .iter()
        .filter(|t| t.failure() == Some(hpo::FailureKind::Interrupted))
        .collect();
    assert_eq!(interrupted.len(), 2, "{trials:#?}");
    for t in interrupted {
        let copy = trials.iter().find(|c| {
            c.state == TrialState::Waiting
                && c.system_attrs.get(hpo::trial::FAILED_TRIAL_ATTR)
                    == Some(&serde_json::json!(t.number))
        });
        assert_eq!(copy.map(|c| c.params()), Some(t.params()), "{trials:#?}");
    }
    for pid in workers {
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s.contains(") Z")),
            "worker {pid} left behind"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn nodes_join_a_created_study_and_stop_together_at_its_budget() {
    let (db, url) = temp_db("join", std::process::id());
    let _ = std::fs::remove_file(&db);
    let err = |argv: &[&str]| {
        runner(&args(argv))
            .run(objective)
            .err()
            .unwrap()
            .to_string()
    };
    // Joining a study nobody created is refused, and creates nothing.
    let e = err(&["--storage", &url, "--join"]);
    assert!(e.contains("there is no study `quadratic`"), "{e}");
    assert!(
        e.contains("`--join` runs a study created beforehand"),
        "{e}"
    );
    // A study without a budget cannot be joined: its nodes would never stop.
    let plain = args(&["--storage", &url, "--create"]);
    runner(&plain).run(objective).unwrap();
    let e = err(&["--storage", &url, "--join"]);
    assert!(e.contains("has no budget"), "{e}");
    // --create records the budget and the warm start, and runs nothing.
    let create = args(&["--storage", &url, "--create", "--study-trials", "9"]);
    let warm = vec![("x".to_owned(), ParamValue::from(1.0))];
    let done = runner(&create)
        .warm_start(warm.clone())
        .run(objective)
        .unwrap();
    assert_eq!(done.summary.trials, 1, "the warm start waits");
    assert_eq!(
        done.study.budget().unwrap(),
        Some(hpo::StudyBudget::trials(9))
    );
    // Three nodes join at once; the experiment's default of 6 trials per
    // run does not cut any short, and the warm start is not enqueued again.
    std::thread::scope(|s| {
        for _ in 0..3 {
            let (url, warm) = (url.clone(), warm.clone());
            s.spawn(move || {
                let join = args(&["--storage", &url, "--join", "--sampler", "random"]);
                runner(&join)
                    .warm_start(warm.clone())
                    .run(objective)
                    .unwrap();
            });
        }
    });
    let trials = quadratic(&url).trials().unwrap();
    let complete = trials
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .count();
    assert_eq!(complete, 9, "{trials:?}");
    assert_eq!(
        trials
            .iter()
            .filter(|t| t.params().get("x") == Some(&ParamValue::from(1.0)))
            .count(),
        1
    );
    let _ = std::fs::remove_dir_all(db.parent().unwrap());
}

/// A study of `flags` on worker processes of this test binary (on
/// `budget_worker_entry`).
fn run_on_workers(flags: &[&str]) -> hpo::cli::Finished {
    let a = args(flags);
    runner(&a)
        .workers(Arc::new(Estimator), Memory::Host)
        .processes_with(|c| {
            c.worker_args(WorkerLaunch::test_entry("runner::budget_worker_entry").args)
        })
        .run(objective)
        .unwrap()
}

#[test]
#[ignore = "run by the study-budget tests as a worker process"]
fn budget_worker_entry() {
    assert!(executor::is_worker(), "only a worker process runs this");
    let a = args(&[]);
    runner(&a)
        .workers(Arc::new(Estimator), Memory::Host)
        .run(objective)
        .unwrap();
    panic!("a worker exits once its trial is stored");
}

#[test]
fn worker_processes_stop_at_the_study_budget() {
    let (db, url) = temp_db("budget-workers", std::process::id());
    let _ = std::fs::remove_file(&db);
    // The coordinator's budget, not the experiment's default of 6 trials.
    let done = run_on_workers(&[
        "--storage",
        &url,
        "--jobs",
        "2",
        "--memory-budget",
        "1GiB",
        "--study-trials",
        "5",
    ]);
    assert_eq!(
        done.summary.states.get("complete"),
        Some(&5),
        "{:?}",
        done.summary
    );
    assert_eq!(done.study.trials().unwrap().len(), 5);
    assert_eq!(
        done.study.budget().unwrap(),
        Some(hpo::StudyBudget::trials(5))
    );
    let _ = std::fs::remove_dir_all(db.parent().unwrap());
}

/// Worker processes (one process start per trial) get six seconds: more
/// than the experiment's default of 6 trials fit even on a loaded 2-core
/// machine, where two seconds once fitted 6 or fewer.
#[test]
fn worker_processes_start_nothing_after_the_study_deadline() {
    let (db, url) = temp_db("deadline-workers", std::process::id());
    let _ = std::fs::remove_file(&db);
    let t0 = std::time::Instant::now();
    // No trial budget: the deadline, two seconds away, ends the study.
    let done = run_on_workers(&[
        "--storage",
        &url,
        "--jobs",
        "2",
        "--memory-budget",
        "1GiB",
        "--deadline",
        "+6s",
    ]);
    assert!(t0.elapsed() < std::time::Duration::from_secs(30));
    let deadline = done.study.budget().unwrap().unwrap().deadline.unwrap();
    let trials = done.study.trials().unwrap();
    assert!(trials.len() > 6, "more than the experiment's default ran");
    for t in trials.iter().filter(|t| t.state == TrialState::Complete) {
        assert!(t.datetime_start.unwrap() <= deadline, "{t:?}");
    }
    assert!(trials.iter().all(|t| t.state != TrialState::Running));
    let _ = std::fs::remove_dir_all(db.parent().unwrap());
}
