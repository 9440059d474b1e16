//! A study on a real Slurm cluster: `deploy/slurm/`'s templates submit the
//! `cluster` example as job arrays to the one-node cluster `.ci/slurm.sh`
//! starts, on a PostgreSQL database of each test's own.
//!
//! Where no Slurm answers (`sinfo`), or no PostgreSQL server
//! (`HPO_TEST_POSTGRES`, default `postgresql://postgres@127.0.0.1:5432/test`,
//! reached with `psql`), the tests say so loudly and pass, unless
//! `HPO_REQUIRE_SLURM=1` (CI), which makes them fail.

use hpo::{FrozenTrial, Study, TrialState};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Once, OnceLock};
use std::time::{Duration, Instant};

/// How long one test's job array may take before the test fails.
const ARRAY_LIMIT: Duration = Duration::from_secs(240);

fn required() -> bool {
    std::env::var("HPO_REQUIRE_SLURM").is_ok_and(|v| v == "1")
}

fn server_url() -> String {
    std::env::var("HPO_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgresql://postgres@127.0.0.1:5432/test".to_owned())
}

/// Whether Slurm and PostgreSQL are here; says why not, once, if not.
fn available() -> bool {
    static WHY_NOT: OnceLock<Option<String>> = OnceLock::new();
    let Some(why) = WHY_NOT.get_or_init(why_not) else {
        return true;
    };
    assert!(!required(), "{why}, and HPO_REQUIRE_SLURM=1");
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "\n*** SKIPPING the Slurm tests: {why}. Start a cluster with .ci/slurm.sh (as \
             root); CI sets HPO_REQUIRE_SLURM=1. ***\n"
        );
    });
    false
}

/// Why the tests cannot run here, if they cannot. `sinfo` waits for a
/// controller that does not answer: 10 s at most.
fn why_not() -> Option<String> {
    let slurm = Command::new("timeout")
        .args(["10", "sinfo", "-h", "-o", "%t"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let why = match slurm.as_deref() {
        None => Some("no Slurm cluster answers `sinfo`".to_owned()),
        Some(s) if !["idle", "mix", "alloc"].iter().any(|u| s.starts_with(u)) => {
            Some(format!("the Slurm node is `{s}`, not up"))
        }
        Some(_) => psql(&server_url(), "SELECT 1")
            .err()
            .map(|e| format!("no PostgreSQL server through psql ({e})")),
    };
    why
}

fn psql(url: &str, sql: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .args([url, "-XAtq", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .map_err(|e| format!("cannot run psql: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `cluster` example, built once with PostgreSQL (it sits beside the
/// test binary's folder, in `examples/`), with this test binary's own
/// features where they include PostgreSQL: another feature set would
/// rebuild every dependency, burn included.
fn example() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut features: Vec<&str> = [
            ("postgres", cfg!(feature = "postgres")),
            ("postgres-tls", cfg!(feature = "postgres-tls")),
            ("mlflow", cfg!(feature = "mlflow")),
        ]
        .into_iter()
        .filter_map(|(name, on)| on.then_some(name))
        .collect();
        if !features.iter().any(|f| f.starts_with("postgres")) {
            features.push("postgres");
        }
        let features = features.join(",");
        let status = Command::new(cargo)
            .current_dir(repo())
            .args(["build", "-q", "-p", "hpo", "--features", &features])
            .args(["--example", "cluster"])
            .status()
            .unwrap();
        assert!(status.success(), "cannot build the cluster example");
        let deps = std::env::current_exe().unwrap();
        let exe = deps
            .parent()
            .unwrap()
            .parent()
            .unwrap()
            .join("examples/cluster");
        assert!(exe.exists(), "{} was not built", exe.display());
        exe
    })
}

/// One test's database, dropped at the end, and the files of its jobs.
struct Setup {
    db: String,
    url: String,
    dir: PathBuf,
}

impl Setup {
    fn new(tag: &str) -> Setup {
        static N: AtomicUsize = AtomicUsize::new(0);
        let db = format!(
            "hpo_slurm_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        psql(
            &server_url(),
            &format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"),
        )
        .unwrap();
        psql(&server_url(), &format!("CREATE DATABASE {db}")).unwrap();
        let (base, _) = server_url()
            .rsplit_once('/')
            .map(|(b, d)| (b.to_owned(), d.to_owned()))
            .unwrap();
        // With a password (trust authentication ignores it), which no
        // output may show.
        let url = format!("{base}/{db}").replacen("://postgres@", "://postgres:sekrit@", 1);
        let dir = std::env::temp_dir().join(format!("hpo-slurm-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Setup { db, url, dir }
    }

    /// Writes the environment file the templates source.
    fn env_file(&self, study_trials: usize, sleep_ms: u64, term_grace: u64) -> PathBuf {
        let file = self.dir.join("study.env");
        let text = format!(
            "HPO_STORAGE='{}'\nHPO_STUDY='cluster'\n\
             HPO_EXPERIMENT=({} --sleep-ms {sleep_ms})\n\
             HPO_NODE_FLAGS=(--jobs 1 --term-grace {term_grace})\n\
             HPO_STUDY_TRIALS={study_trials}\n",
            self.url,
            example().display()
        );
        std::fs::write(&file, text).unwrap();
        file
    }

    /// Creates the study with `deploy/slurm/create-study.sh`.
    fn create(&self, env: &Path) {
        let out = Command::new(repo().join("deploy/slurm/create-study.sh"))
            .env("HPO_ENV_FILE", env)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "create-study.sh: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("is ready for `--join`"), "{text}");
        assert!(!text.contains("sekrit"), "the password is printed: {text}");
        assert!(text.contains("postgres:***@"), "{text}");
    }

    /// Submits `deploy/slurm/hpo-study.sbatch` as an array of `tasks`, with
    /// the CI node's resources in place of a GPU node's. Returns the job id.
    fn submit(&self, env: &Path, tasks: usize) -> String {
        let out = Command::new("sbatch")
            .current_dir(&self.dir)
            .args([
                "--parsable",
                &format!("--array=0-{}", tasks - 1),
                "--partition=ci",
                "--gres=none",
                "--cpus-per-task=1",
                "--mem=256M",
                "--time=10",
                &format!("--output={}/task-%a.out", self.dir.display()),
                &format!("--export=ALL,HPO_ENV_FILE={}", env.display()),
            ])
            .arg(repo().join("deploy/slurm/hpo-study.sbatch"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sbatch: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .split(';')
            .next()
            .unwrap()
            .to_owned()
    }

    fn study(&self) -> Study {
        Study::builder()
            .name("cluster")
            .storage_url(&self.url)
            .load()
            .unwrap()
    }

    fn log(&self, task: usize) -> String {
        std::fs::read_to_string(self.dir.join(format!("task-{task}.out"))).unwrap_or_default()
    }

    /// Every task's log; none may show the password.
    fn logs(&self, tasks: usize) -> String {
        let logs: String = (0..tasks)
            .map(|t| format!("--- task {t}:\n{}", self.log(t)))
            .collect();
        assert!(!logs.contains("sekrit"), "the password is printed: {logs}");
        logs
    }

    /// Open connections to this test's database.
    fn connections(&self) -> usize {
        psql(
            &server_url(),
            &format!(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = '{}'",
                self.db
            ),
        )
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
    }
}

impl Drop for Setup {
    fn drop(&mut self) {
        let _ = psql(
            &server_url(),
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.db),
        );
    }
}

/// Each array task's state and exit code (`scontrol show job`), by task id.
fn tasks(job: &str) -> BTreeMap<usize, (String, String)> {
    let out = Command::new("scontrol")
        .args(["-o", "show", "job", job])
        .output()
        .unwrap();
    let mut found = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let field = |key: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .map(str::to_owned)
        };
        if let (Some(task), Some(state), Some(code)) = (
            field("ArrayTaskId=").and_then(|t| t.parse().ok()),
            field("JobState="),
            field("ExitCode="),
        ) {
            found.insert(task, (state, code));
        }
    }
    found
}

/// Waits until no task of `job` is pending or running; `during` is called
/// about every 200 ms meanwhile.
fn wait_for(job: &str, setup: &Setup, n: usize, mut during: impl FnMut()) {
    let t0 = Instant::now();
    loop {
        let states = tasks(job);
        if states.len() == n
            && states.values().all(|(s, _)| {
                !matches!(
                    s.as_str(),
                    "PENDING" | "RUNNING" | "CONFIGURING" | "COMPLETING" | "REQUEUED"
                )
            })
        {
            return;
        }
        if t0.elapsed() > ARRAY_LIMIT {
            let _ = Command::new("scancel").arg(job).status();
            panic!(
                "job {job} still runs after {ARRAY_LIMIT:?}: {states:?}\n{}",
                setup.logs(n)
            );
        }
        during();
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The number of the trial whose configuration `t` runs again (itself for
/// a first attempt): a retry copy's `failed_trial`.
fn lineage(t: &FrozenTrial) -> u64 {
    t.system_attrs
        .get("failed_trial")
        .and_then(|v| v.as_u64())
        .unwrap_or(t.number)
}

/// The study's invariants after its array: numbers contiguous, nothing left
/// RUNNING, exactly `budget` trials COMPLETE or PRUNED, each configuration
/// counted once (a retry copy as its original), every failed trial that
/// ran a configuration retried to the end.
fn check_study(study: &Study, budget: usize, logs: &str) -> Vec<Arc<FrozenTrial>> {
    let trials = study.trials().unwrap();
    let numbers: Vec<u64> = trials.iter().map(|t| t.number).collect();
    assert_eq!(
        numbers,
        (0..trials.len() as u64).collect::<Vec<_>>(),
        "{logs}"
    );
    let running: Vec<u64> = trials
        .iter()
        .filter(|t| t.state == TrialState::Running)
        .map(|t| t.number)
        .collect();
    assert!(running.is_empty(), "left RUNNING: {running:?}\n{logs}");
    let counted: Vec<&Arc<FrozenTrial>> = trials
        .iter()
        .filter(|t| matches!(t.state, TrialState::Complete | TrialState::Pruned))
        .collect();
    assert_eq!(counted.len(), budget, "the study's budget\n{logs}");
    let root = |t: &FrozenTrial| lineage(t);
    let mut done: BTreeMap<u64, usize> = BTreeMap::new();
    for t in &counted {
        *done.entry(root(t)).or_default() += 1;
    }
    let twice: Vec<_> = done.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "configurations finished twice: {twice:?}");
    for t in trials.iter().filter(|t| t.state == TrialState::Fail) {
        if !t.params().is_empty() {
            assert!(
                done.contains_key(&root(t)),
                "trial {} failed ({:?}) and its configuration never finished\n{logs}",
                t.number,
                t.system_attrs.get("fail_reason")
            );
        }
    }
    trials
}

fn task_of(t: &FrozenTrial) -> Option<String> {
    t.user_attrs
        .get("slurm_task")
        .and_then(|v| v.as_str())
        .map(str::to_owned)
}

#[test]
fn four_tasks_share_one_budget_and_finish_each_configuration_once() {
    if !available() {
        return;
    }
    let s = Setup::new("array");
    let env = s.env_file(24, 300, 20);
    s.create(&env);
    let job = s.submit(&env, 4);
    let mut peak = 0;
    wait_for(&job, &s, 4, || peak = peak.max(s.connections()));
    let logs = s.logs(4);
    for (task, (state, code)) in tasks(&job) {
        assert_eq!(
            (state.as_str(), code.as_str()),
            ("COMPLETED", "0:0"),
            "task {task}\n{logs}"
        );
    }
    let trials = check_study(&s.study(), 24, &logs);
    let ran_on: BTreeSet<String> = trials.iter().filter_map(|t| task_of(t)).collect();
    assert!(
        ran_on.len() >= 2,
        "trials ran on tasks {ran_on:?} only\n{logs}"
    );
    // A node holds one connection for its coordinator and one per running
    // worker (here `--jobs 1`), and briefly one more while it checks that
    // its workers will find the study.
    assert!(
        peak <= 4 * 3,
        "{peak} connections for 4 nodes of one worker each"
    );
    eprintln!("slurm: 4 tasks, 24 trials, peak {peak} PostgreSQL connections");
    for task in 0..4 {
        assert!(s.log(task).contains("joined study `cluster`"), "{logs}");
    }
}

/// Waits until task `task` of `job` runs a trial; returns its number.
fn running_on(s: &Setup, job: &str, task: &str) -> u64 {
    let t0 = Instant::now();
    loop {
        let study = s.study();
        if let Some(t) = study.trials().unwrap().iter().find(|t| {
            t.state == TrialState::Running
                && task_of(t).as_deref() == Some(task)
                && lineage(t) == t.number
        }) {
            return t.number;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = Command::new("scancel").arg(job).status();
            panic!("task {task} never ran a trial\n{}", s.logs(2));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_cancelled_task_leaves_nothing_running_and_its_trial_runs_elsewhere() {
    if !available() {
        return;
    }
    let s = Setup::new("scancel");
    // Trials of 4 s, a grace of 1 s: the cancelled trial cannot finish.
    let env = s.env_file(6, 4000, 1);
    s.create(&env);
    let job = s.submit(&env, 2);
    let number = running_on(&s, &job, "1");
    assert!(Command::new("scancel")
        .arg(format!("{job}_1"))
        .status()
        .unwrap()
        .success());
    // The grace period, and time to stop the worker and write the trial.
    std::thread::sleep(Duration::from_secs(4));
    let left: Vec<u64> = s
        .study()
        .trials()
        .unwrap()
        .iter()
        // A retry copy carries its original's user attributes until its
        // own worker writes them: only first attempts are task 1's.
        .filter(|t| {
            t.state == TrialState::Running
                && task_of(t).as_deref() == Some("1")
                && lineage(t) == t.number
        })
        .map(|t| t.number)
        .collect();
    assert!(
        left.is_empty(),
        "RUNNING after the grace period: {left:?}\n{}",
        s.logs(2)
    );
    wait_for(&job, &s, 2, || {});
    let logs = s.logs(2);
    let states = tasks(&job);
    assert_eq!(states[&1].0, "CANCELLED", "{logs}");
    assert_eq!(states[&0], ("COMPLETED".into(), "0:0".into()), "{logs}");
    let trials = check_study(&s.study(), 6, &logs);
    let cut = &trials[number as usize];
    assert_eq!(cut.state, TrialState::Fail, "{logs}");
    assert_eq!(cut.system_attrs["hpo:failure"], "interrupted", "{logs}");
    let copy = trials
        .iter()
        .find(|t| t.number != cut.number && lineage(t) == cut.number)
        .unwrap_or_else(|| panic!("no retry copy of trial {number}\n{logs}"));
    assert_eq!(copy.state, TrialState::Complete, "{logs}");
    assert_eq!(copy.params(), cut.params());
    assert_eq!(task_of(copy).as_deref(), Some("0"), "{logs}");
}

#[test]
fn a_preempted_task_finishes_its_trial_and_a_requeued_one_continues() {
    if !available() {
        return;
    }
    let s = Setup::new("preempt");
    // Trials of 1.5 s, a grace of 20 s: the preempted trial finishes.
    let env = s.env_file(16, 1500, 20);
    s.create(&env);
    let job = s.submit(&env, 2);
    let number = running_on(&s, &job, "1");
    // Preemption as Slurm does it: SIGTERM to every process of the task.
    assert!(Command::new("scancel")
        .args(["--full", "--signal=TERM", &format!("{job}_1")])
        .status()
        .unwrap()
        .success());
    // Task 0 is requeued once it has run a trial: killed, queued again (Slurm
    // holds a requeued job back 2 minutes; the test releases it after 2 s).
    running_on(&s, &job, "0");
    let requeue = format!("{job}_0");
    assert!(Command::new("scontrol")
        .args(["requeue", &requeue])
        .status()
        .unwrap()
        .success());
    // Not in the second of the requeue: slurmd refuses a launch whose
    // credential is no newer (in whole seconds) than the revocation of the
    // killed instance's ("Job credential revoked"), and the task fails.
    let requeued = Instant::now();
    let mut released = false;
    wait_for(&job, &s, 2, || {
        if !released
            && requeued.elapsed() > Duration::from_secs(2)
            && tasks(&job).get(&0).is_some_and(|(st, _)| st == "PENDING")
        {
            released = Command::new("scontrol")
                .args(["update", &format!("jobid={requeue}"), "starttime=now"])
                .status()
                .is_ok_and(|st| st.success());
        }
    });
    let logs = s.logs(2);
    let states = tasks(&job);
    assert_eq!(states[&1], ("FAILED".into(), "143:0".into()), "{logs}");
    assert_eq!(states[&0], ("COMPLETED".into(), "0:0".into()), "{logs}");
    assert!(s.log(1).contains("stopped by SIGTERM"), "{logs}");
    assert!(s.log(0).contains("restart 1"), "task 0 ran again: {logs}");
    let trials = check_study(&s.study(), 16, &logs);
    let preempted = &trials[number as usize];
    assert_eq!(
        preempted.state,
        TrialState::Complete,
        "finished in its grace: {logs}"
    );
    assert_eq!(task_of(preempted).as_deref(), Some("1"));
    // After its requeue, task 0 joined the study again and ran trials.
    assert_eq!(
        s.log(0).matches("joined study `cluster`").count(),
        2,
        "{logs}"
    );
}
