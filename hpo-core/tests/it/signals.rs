//! Ctrl-C and SIGTERM sent to a real study, as a terminal and a scheduler
//! send them: the study is a child process (this test binary re-invoked on
//! the ignored test `signals::study_entry`, in a process group of its own),
//! its workers this binary again on `signals::worker_entry`. Each trial's
//! behaviour is its enqueued `mode`; each trial writes its worker's pid to
//! a file, so the test can signal the workers and check they are gone.

use hpo_core::executor::{self, Batch, MemoryEstimator, ProcessConfig, Shape, GIB};
use hpo_core::signals::{self, StopSignal};
use hpo_core::storage::SqliteStorage;
use hpo_core::trial::{FAILED_TRIAL_ATTR, FIXED_PARAMS_ATTR, RETRY_HISTORY_ATTR};
use hpo_core::{
    Error, FailureKind, FrozenTrial, Optimize, ParamValue, RandomSampler, Storage, Study, Trial,
    TrialError, TrialState,
};
use rustix::process::{kill_process, kill_process_group, Pid, Signal};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MODES: [&str; 4] = ["sleep", "stubborn", "short", "quick"];
/// Generous: a loaded 2-core machine starts processes slowly.
const PATIENCE: Duration = Duration::from_secs(90);

struct Env {
    dir: PathBuf,
    url: String,
    name: String,
}

impl Env {
    fn new(tag: &str) -> Env {
        let name = format!("signals-{tag}-{}", std::process::id());
        let dir = std::env::temp_dir().join(format!("hpo-{name}"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite:{}", dir.join("study.db").display());
        Env { dir, url, name }
    }

    fn study(&self) -> Study {
        study_on(&self.url, &self.name)
    }

    fn marker(&self, what: &str) -> PathBuf {
        self.dir.join(what)
    }

    /// The study as a child process in a process group of its own (its
    /// pid is the group's id), as a shell starts a foreground job.
    fn spawn(&self, mode: &str, trials: usize, extra: &[(&str, &str)]) -> Child {
        use std::os::unix::process::CommandExt;
        let log = std::fs::File::create(self.marker("study.log")).unwrap();
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(entry_args("signals::study_entry"))
            .env("HPO_SIG_URL", &self.url)
            .env("HPO_SIG_STUDY", &self.name)
            .env("HPO_SIG_DIR", &self.dir)
            .env("HPO_SIG_RUN", mode)
            .env("HPO_SIG_TRIALS", trials.to_string())
            .stdout(Stdio::null())
            .stderr(log)
            .process_group(0);
        for (k, v) in extra {
            cmd.env(k, v);
        }
        cmd.spawn().unwrap()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.marker("study.log")).unwrap_or_default()
    }

    fn trials(&self) -> Vec<Arc<FrozenTrial>> {
        let storage = SqliteStorage::open(self.dir.join("study.db")).unwrap();
        let id = storage.find_study(&self.name).unwrap().unwrap().id;
        storage.trials(id).unwrap()
    }

    /// The pids of the workers (or, in-process, the study) that started
    /// trials, by trial number.
    fn pids(&self) -> BTreeMap<u64, i32> {
        let mut out = BTreeMap::new();
        for e in std::fs::read_dir(&self.dir).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(n) = name.strip_prefix("pid-") {
                if let Ok(pid) = std::fs::read_to_string(e.path()).unwrap().parse() {
                    out.insert(n.parse().unwrap(), pid);
                }
            }
        }
        out
    }

    /// Waits until `n` trials are in their objective (RUNNING, pid written).
    fn wait_running(&self, child: &mut Child, n: usize) -> BTreeMap<u64, i32> {
        let t0 = Instant::now();
        loop {
            let pids = self.pids();
            let running = self
                .trials()
                .iter()
                .filter(|t| t.state == TrialState::Running)
                .count();
            if pids.len() >= n && running >= n {
                return pids;
            }
            if let Some(status) = child.try_wait().unwrap() {
                panic!("the study ended early ({status}):\n{}", self.log());
            }
            assert!(
                t0.elapsed() < PATIENCE,
                "{n} trials never ran:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // Nothing outlives a test, whatever it asserted.
        for pid in self.pids().values() {
            if let Some(pid) = Pid::from_raw(*pid) {
                let _ = kill_process(pid, Signal::KILL);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn entry_args(entry: &str) -> Vec<String> {
    [
        entry,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ]
    .map(String::from)
    .to_vec()
}

fn study_on(url: &str, name: &str) -> Study {
    Study::builder()
        .name(name)
        .storage_url(url)
        .sampler(RandomSampler::seeded(3))
        .heartbeat(Duration::from_millis(200), Duration::from_secs(10))
        .load_if_exists(true)
        .build()
        .unwrap()
}

fn enqueue(study: &Study, modes: &[&str]) {
    for mode in modes {
        study.enqueue([("mode", ParamValue::from(*mode))]).unwrap();
    }
}

fn group_of(child: &Child) -> Pid {
    Pid::from_raw(i32::try_from(child.id()).unwrap()).unwrap()
}

/// Waits for the child's exit.
fn wait_exit(child: &mut Child, within: Duration, env: &Env) -> (ExitStatus, Duration) {
    let t0 = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return (status, t0.elapsed());
        }
        if t0.elapsed() > within {
            let _ = child.kill();
            panic!("the study did not end within {within:?}:\n{}", env.log());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether `pid` is a live process (a zombie is not: it has ended, and
/// only its parent's reaping is left).
fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z')),
        Err(_) => false,
    }
}

fn assert_gone(pids: &BTreeMap<u64, i32>, env: &Env) {
    let t0 = Instant::now();
    while pids.values().any(|p| alive(*p)) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "workers left behind: {pids:?}\n{}",
            env.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Each trial in `started` was failed as interrupted, and a WAITING copy of
/// its configuration points back at it.
fn assert_interrupted_with_copies(trials: &[Arc<FrozenTrial>], started: &[u64]) {
    for t in trials {
        assert_ne!(
            t.state,
            TrialState::Running,
            "trial {} left RUNNING",
            t.number
        );
    }
    for &n in started {
        let t = &trials[n as usize];
        assert_eq!(t.state, TrialState::Fail, "{t:?}");
        assert_eq!(t.failure(), Some(FailureKind::Interrupted), "{t:?}");
        assert!(t.fail_reason().unwrap().contains("interrupted"), "{t:?}");
        let copies: Vec<_> = trials
            .iter()
            .filter(|c| {
                c.state == TrialState::Waiting
                    && c.system_attrs.get(RETRY_HISTORY_ATTR) == Some(&serde_json::json!([n]))
            })
            .collect();
        assert_eq!(copies.len(), 1, "trial {n}'s retry copy: {trials:#?}");
        assert_eq!(copies[0].params(), t.params());
        assert_eq!(
            copies[0].system_attrs[FAILED_TRIAL_ATTR],
            serde_json::json!(n)
        );
        assert!(
            !copies[0].system_attrs.contains_key(executor::DEVICE_ATTR),
            "{:?}",
            copies[0].system_attrs
        );
    }
}

/// The trials of `mode` never started: `n` of them wait for the next run,
/// as they were enqueued or as the copy of a trial sampled ahead and given
/// back.
fn assert_waiting(trials: &[Arc<FrozenTrial>], mode: &str, n: usize) {
    let mode_of = |t: &FrozenTrial| match t.params().get("mode") {
        Some(v) => v.to_json_value(),
        None => t.system_attrs[FIXED_PARAMS_ATTR]["mode"].clone(),
    };
    let waiting = trials
        .iter()
        .filter(|t| t.state == TrialState::Waiting && mode_of(t) == serde_json::json!(mode))
        .count();
    assert_eq!(waiting, n, "{trials:#?}");
}

/// Every trial is one micro-batch of 1 GiB; the mode is the enqueued one.
struct OneGib;

impl MemoryEstimator for OneGib {
    fn propose(&self, trial: &mut Trial) -> Result<Shape, TrialError> {
        trial.suggest_categorical("mode", &MODES)?;
        Ok(Shape::new("test", Batch::new(1, 1)))
    }

    fn peak_bytes(&self, _params: &BTreeMap<String, ParamValue>, _batch: Batch) -> u64 {
        GIB
    }
}

fn marker_dir() -> PathBuf {
    PathBuf::from(std::env::var("HPO_SIG_DIR").unwrap())
}

/// Waits for a file, for at most a minute.
fn wait_for(path: &Path) {
    let t0 = Instant::now();
    while !path.exists() && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn objective(trial: &mut Trial) -> Result<f64, TrialError> {
    let mode = trial.suggest_categorical("mode", &MODES)?;
    let dir = marker_dir();
    let pid = std::process::id().to_string();
    std::fs::write(dir.join(format!("pid-{}", trial.number())), pid).unwrap();
    match mode {
        // Runs long, and does not report: nothing but the end of its
        // process stops it.
        "sleep" => std::thread::sleep(Duration::from_secs(60)),
        // As "sleep", and ignores SIGTERM, even its coordinator's.
        "stubborn" => {
            ignore_sigterm();
            std::thread::sleep(Duration::from_secs(60));
        }
        // Finishes half a second after the test has sent SIGTERM.
        "short" => {
            wait_for(&dir.join("sigterm-sent"));
            std::thread::sleep(Duration::from_millis(500));
        }
        _ => {}
    }
    Ok(1.0)
}

#[allow(unsafe_code)]
fn ignore_sigterm() {
    // SAFETY: SIG_IGN is a valid disposition for SIGTERM.
    unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
}

/// The worker: runs the trial its coordinator assigned and exits.
#[test]
#[ignore = "run by the signal tests as a worker process"]
fn worker_entry() {
    executor::worker_main(objective).unwrap();
    panic!("worker_entry runs only as a worker started by the executor");
}

/// The study to interrupt: `HPO_SIG_RUN` is `processes` (two worker
/// processes) or `threads` (two threads of this process). It installs the
/// handlers, records when it has seen SIGINT (file `seen-sigint`), and exits
/// with the signal's status, as `hpo::cli` does.
#[test]
#[ignore = "run by the signal tests as the study's process"]
fn study_entry() {
    signals::install().unwrap();
    signals::install().unwrap(); // idempotent
    let dir = marker_dir();
    let env = |k: &str| std::env::var(k).unwrap();
    let ms = |k: &str, default: u64| {
        Duration::from_millis(std::env::var(k).map_or(default, |v| v.parse().unwrap()))
    };
    let study = study_on(&env("HPO_SIG_URL"), &env("HPO_SIG_STUDY"));
    let seen = dir.join("seen-sigint");
    std::thread::spawn(move || loop {
        if signals::state() == signals::State::Interrupted {
            std::fs::write(&seen, "").unwrap();
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    });
    let trials: usize = env("HPO_SIG_TRIALS").parse().unwrap();
    let mut opts = Optimize::new()
        .trials(trials)
        .term_grace(ms("HPO_SIG_GRACE_MS", 20_000));
    if env("HPO_SIG_RUN") == "processes" {
        let config = ProcessConfig::new(env("HPO_SIG_URL"), Arc::new(OneGib))
            .budget(8 * GIB)
            .max_workers(2)
            .lookahead(1)
            .kill_grace(ms("HPO_SIG_KILL_GRACE_MS", 10_000))
            .worker_args(entry_args("signals::worker_entry"));
        opts = opts.processes(config);
    } else {
        let exit_marker = dir.join("before-exit");
        opts = opts.jobs(2).before_exit(move |_, signal| {
            std::fs::write(&exit_marker, signal.name()).unwrap();
        });
    }
    match study.optimize_with(opts, objective) {
        Err(Error::Interrupted { signal }) => std::process::exit(signal.exit_code()),
        other => panic!("the study was to be interrupted: {other:?}"),
    }
}

/// Ctrl-C in a terminal: SIGINT to the study's process group, mid-trial.
/// The workers (in groups of their own) are stopped by the coordinator,
/// their trials failed as interrupted with a retry copy each, and the study
/// exits 130 leaving nothing RUNNING and no worker behind.
#[test]
fn sigint_to_the_group_stops_a_study_with_workers_cleanly() {
    let env = Env::new("int");
    enqueue(&env.study(), &["sleep", "sleep", "quick", "quick"]);
    let mut child = env.spawn("processes", 4, &[]);
    let pids = env.wait_running(&mut child, 2);
    kill_process_group(group_of(&child), Signal::INT).unwrap();
    let (status, _) = wait_exit(&mut child, Duration::from_secs(60), &env);
    assert_eq!(status.code(), Some(130), "{status}:\n{}", env.log());
    let trials = env.trials();
    let started: Vec<u64> = pids.keys().copied().collect();
    assert_eq!(started, [0, 1], "{trials:#?}");
    assert_interrupted_with_copies(&trials, &started);
    assert_waiting(&trials, "quick", 2);
    assert_gone(&pids, &env);
}

/// A second Ctrl-C ends the study at once: its workers ignore even the
/// coordinator's SIGTERM, so the cleanup the first one started would wait
/// for SIGKILL; the second one does not wait, leaves the trials for the
/// heartbeats to reap, and the orphaned workers exit by themselves.
#[test]
fn a_second_sigint_ends_the_study_at_once() {
    let env = Env::new("twice");
    enqueue(&env.study(), &["stubborn", "stubborn"]);
    let mut child = env.spawn("processes", 2, &[("HPO_SIG_KILL_GRACE_MS", "30000")]);
    let pids = env.wait_running(&mut child, 2);
    kill_process_group(group_of(&child), Signal::INT).unwrap();
    // The first one handled (two signals at once can merge into one).
    wait_for(&env.marker("seen-sigint"));
    assert!(env.marker("seen-sigint").exists(), "{}", env.log());
    kill_process_group(group_of(&child), Signal::INT).unwrap();
    let (status, took) = wait_exit(&mut child, Duration::from_secs(60), &env);
    assert_eq!(status.code(), Some(130), "{status}:\n{}", env.log());
    // The cleanup would have taken 5 s (SIGKILL after the stop's grace).
    assert!(took < Duration::from_secs(4), "{took:?}");
    let running = env
        .trials()
        .iter()
        .filter(|t| t.state == TrialState::Running)
        .count();
    assert_eq!(running, 2, "no cleanup after the second SIGINT");
    assert_gone(&pids, &env);
}

/// SIGTERM as Slurm sends it, to every process of the step: the workers
/// leave it to the coordinator, which starts nothing new and gives the
/// running trials the grace period. The trial that finishes within it
/// completes; the one that does not is failed with its retry copy; the
/// study exits 143.
#[test]
fn sigterm_gives_running_trials_the_grace_period() {
    let env = Env::new("term");
    enqueue(&env.study(), &["short", "sleep", "quick"]);
    let grace = Duration::from_secs(4);
    let grace_ms = grace.as_millis().to_string();
    let mut child = env.spawn("processes", 3, &[("HPO_SIG_GRACE_MS", grace_ms.as_str())]);
    let pids = env.wait_running(&mut child, 2);
    let sent = Instant::now();
    kill_process_group(group_of(&child), Signal::TERM).unwrap();
    for pid in pids.values() {
        kill_process(Pid::from_raw(*pid).unwrap(), Signal::TERM).unwrap();
    }
    std::fs::write(env.marker("sigterm-sent"), "").unwrap();
    let (status, _) = wait_exit(&mut child, Duration::from_secs(60), &env);
    let took = sent.elapsed();
    assert_eq!(status.code(), Some(143), "{status}:\n{}", env.log());
    assert!(took >= grace, "the grace was not given: {took:?}");
    let trials = env.trials();
    assert_eq!(trials[0].state, TrialState::Complete, "{trials:#?}");
    assert_interrupted_with_copies(&trials, &[1]);
    assert_waiting(&trials, "quick", 1);
    assert_gone(&pids, &env);
}

/// Ctrl-C on a study whose trials run on its own threads: their objectives
/// cannot be stopped, so the watcher fails their trials with retry copies,
/// runs the `before_exit` hooks and ends the process with status 130.
#[test]
fn sigint_stops_an_in_process_study_cleanly() {
    let env = Env::new("threads");
    enqueue(&env.study(), &["sleep", "sleep", "quick"]);
    let mut child = env.spawn("threads", 3, &[]);
    let pids = env.wait_running(&mut child, 2);
    kill_process_group(group_of(&child), Signal::INT).unwrap();
    let (status, _) = wait_exit(&mut child, Duration::from_secs(60), &env);
    assert_eq!(status.code(), Some(130), "{status}:\n{}", env.log());
    let trials = env.trials();
    assert_interrupted_with_copies(&trials, &[0, 1]);
    assert_waiting(&trials, "quick", 1);
    assert_eq!(
        std::fs::read_to_string(env.marker("before-exit")).unwrap(),
        StopSignal::Interrupt.name()
    );
    assert_gone(&pids, &env);
}
