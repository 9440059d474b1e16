//! `hpo::tracking::Mlflow` against a real MLflow tracking server (started
//! from the project's venv, SQLite backend in a temporary folder): every
//! trial's run, parameters, metric history and tags read back through
//! MLflow's REST API, from threads and from worker processes; a server
//! stopped mid-study loses nothing within the bound; 500s are retried; a
//! token never shows in a log line. Skipped without MLflow in the venv
//! unless `HPO_REQUIRE_MLFLOW=1` (CI).

use crate::servers::{python_with, temp_dir, Server};
use clap::Parser;
use hpo::cli::{StudyArgs, StudyRunner, WorkerLaunch};
use hpo::executor::{self, Batch, Memory, MemoryEstimator, Shape};
use hpo::tracking::{Mlflow, MLFLOW_ATTR};
use hpo::{Direction, Optimize, ParamValue, Study, Trial, TrialError, TrialState};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

/// One server for the tests that only read back (MLflow takes up to a
/// minute to start); each test logs to its own experiment.
fn shared() -> Option<&'static str> {
    static SERVER: OnceLock<Option<Server>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            let py = python_with("mlflow", "HPO_REQUIRE_MLFLOW")?;
            Some(Server::mlflow(&py, &temp_dir("mlflow-shared")))
        })
        .as_ref()
        .map(|s| s.url.as_str())
}

/// A GET or POST on MLflow's REST API.
fn api(url: &str, method: &str, path: &str, body: Value) -> Value {
    let full = format!("{url}/api/2.0/mlflow/{path}");
    let resp = if method == "GET" {
        let mut req = ureq::get(&full);
        for (k, v) in body.as_object().unwrap() {
            req = req.query(k, v.as_str().unwrap());
        }
        req.call()
    } else {
        ureq::post(&full).send_json(body)
    };
    resp.unwrap_or_else(|e| panic!("{path}: {e}"))
        .into_json()
        .unwrap()
}

/// The runs of the experiment named `name`: the parent, and the trials'
/// runs by trial number.
fn runs(url: &str, name: &str) -> (Value, BTreeMap<u64, Value>) {
    let exp = api(
        url,
        "GET",
        "experiments/get-by-name",
        json!({ "experiment_name": name }),
    );
    let id = exp["experiment"]["experiment_id"].as_str().unwrap();
    let kind = exp["experiment"]["tags"]
        .as_array()
        .and_then(|tags| tags.iter().find(|t| t["key"] == "mlflow.experimentKind"))
        .map(|t| t["value"].clone());
    assert_eq!(kind, Some(json!("custom_model_development")), "{exp}");
    let found = api(
        url,
        "POST",
        "runs/search",
        json!({ "experiment_ids": [id], "max_results": 1000 }),
    );
    let mut parent = None;
    let mut trials = BTreeMap::new();
    for run in found["runs"].as_array().cloned().unwrap_or_default() {
        match tag(&run, "hpo.trial_number") {
            Some(n) => {
                let old = trials.insert(n.parse::<u64>().unwrap(), run);
                assert!(old.is_none(), "trial {n} logged twice");
            }
            None => {
                assert!(parent.is_none(), "two parent runs");
                parent = Some(run);
            }
        }
    }
    (parent.expect("a parent run"), trials)
}

fn tag(run: &Value, key: &str) -> Option<String> {
    run["data"]["tags"]
        .as_array()?
        .iter()
        .find(|t| t["key"] == key)
        .and_then(|t| t["value"].as_str())
        .map(str::to_owned)
}

fn param(run: &Value, key: &str) -> Option<String> {
    run["data"]["params"]
        .as_array()?
        .iter()
        .find(|t| t["key"] == key)
        .and_then(|t| t["value"].as_str())
        .map(str::to_owned)
}

fn metric(run: &Value, key: &str) -> Option<f64> {
    run["data"]["metrics"]
        .as_array()?
        .iter()
        .find(|t| t["key"] == key)
        .and_then(|t| t["value"].as_f64())
}

fn run_id(run: &Value) -> String {
    run["info"]["run_id"].as_str().unwrap().to_owned()
}

/// `(step, value)` of every point of `key` in the run's history.
fn history(url: &str, run: &Value, key: &str) -> Vec<(u64, f64)> {
    let h = api(
        url,
        "GET",
        "metrics/get-history",
        json!({ "run_id": run_id(run), "metric_key": key }),
    );
    let mut points: Vec<(u64, f64)> = h["metrics"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|m| {
            (
                m["step"]
                    .as_str()
                    .map_or_else(|| m["step"].as_u64().unwrap_or(0), |s| s.parse().unwrap()),
                m["value"].as_f64().unwrap(),
            )
        })
        .collect();
    points.sort_by_key(|p| p.0);
    points
}

/// Checks that every trial of `study` has its run under the study's
/// parent, with its parameters, intermediate values at their steps,
/// state and final value; returns the runs.
fn assert_logged(url: &str, study: &Study) -> (Value, BTreeMap<u64, Value>) {
    let (parent, runs) = runs(url, study.name());
    let kept = study.system_attrs().unwrap()[MLFLOW_ATTR]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(run_id(&parent), kept, "the parent kept in the study");
    let trials = study.trials().unwrap();
    assert_eq!(
        runs.keys().copied().collect::<Vec<_>>(),
        trials.iter().map(|t| t.number).collect::<Vec<_>>(),
        "one run per trial"
    );
    for t in &trials {
        let run = &runs[&t.number];
        assert_eq!(tag(run, "mlflow.parentRunId"), Some(kept.clone()));
        assert_eq!(tag(run, "hpo.study").as_deref(), Some(study.name()));
        assert_eq!(
            tag(run, "hpo.state").as_deref(),
            Some(hpo::cli::state_label(t))
        );
        let status = run["info"]["status"].as_str().unwrap();
        let expected = match t.state {
            TrialState::Complete => "FINISHED",
            TrialState::Pruned => "KILLED",
            _ => "FAILED",
        };
        assert_eq!(status, expected, "trial {}", t.number);
        for (name, value) in t.params() {
            assert_eq!(param(run, &name), Some(value.to_string()), "{name}");
        }
        let steps: Vec<(u64, f64)> = t
            .intermediate_values
            .iter()
            .map(|(s, v)| (*s, *v))
            .collect();
        assert_eq!(history(url, run, "intermediate_value"), steps);
        assert_eq!(metric(run, "value"), t.value(), "trial {}", t.number);
        if let Some(reason) = t.fail_reason() {
            assert_eq!(tag(run, "hpo.fail_reason").as_deref(), Some(reason));
        }
    }
    let count = |s: TrialState| trials.iter().filter(|t| t.state == s).count() as f64;
    assert_eq!(
        metric(&parent, "complete"),
        Some(count(TrialState::Complete))
    );
    assert_eq!(metric(&parent, "pruned"), Some(count(TrialState::Pruned)));
    assert_eq!(metric(&parent, "trials_ended"), Some(trials.len() as f64));
    assert_eq!(
        metric(&parent, "best_value"),
        Some(study.best_value().unwrap())
    );
    assert_eq!(parent["info"]["status"], "FINISHED");
    (parent, runs)
}

/// Reports three steps; trial 2 is pruned, trial 3 fails.
fn objective(trial: &mut Trial) -> Result<f64, TrialError> {
    let x = trial.suggest_float("x", -4.0, 4.0)?;
    let layers = trial.suggest_int("layers", 1, 3)?;
    for step in 0..3 {
        trial.report(step * 10, (x - 1.0).powi(2) + 1.0 / (step + 1) as f64)?;
    }
    match trial.number() {
        2 => Err(TrialError::Pruned),
        3 => Err(TrialError::Failed("the loss diverged".into())),
        _ => Ok((x - 1.0).powi(2) + layers as f64),
    }
}

#[test]
fn trials_on_threads_are_logged_with_their_history() {
    let Some(url) = shared() else { return };
    let study = Study::builder()
        .name("threads")
        .tracker(Mlflow::new(url).unwrap())
        .build()
        .unwrap();
    study
        .optimize_with(Optimize::new().trials(6).jobs(2), objective)
        .unwrap();
    let (_, runs) = assert_logged(url, &study);
    let failed = &runs[&3];
    assert_eq!(tag(failed, "hpo.failure").as_deref(), Some("error"));
    // A second run of the study logs under the same parent.
    study.optimize(2, objective).unwrap();
    assert_logged(url, &study);
}

/// Sizes a configuration at 1 MiB per example of batch.
struct Estimator;

impl MemoryEstimator for Estimator {
    fn propose(&self, trial: &mut Trial) -> Result<Shape, TrialError> {
        let _ = trial.suggest_float("x", -4.0, 4.0)?;
        let batch = trial.suggest_categorical("batch", &[2i64, 4])?;
        Ok(Shape::new("q", Batch::new(batch as u32, 1)))
    }

    fn peak_bytes(&self, _params: &BTreeMap<String, ParamValue>, batch: Batch) -> u64 {
        u64::from(batch.micro) << 20
    }
}

fn worker_objective(trial: &mut Trial) -> Result<f64, TrialError> {
    let x = trial.suggest_float("x", -4.0, 4.0)?;
    let batch = trial.suggest_categorical("batch", &[2i64, 4])?;
    trial.report(1, x.abs())?;
    trial.report(2, x.abs() / 2.0)?;
    Ok((x - 1.0).powi(2) + batch as f64 * 1e-3)
}

#[derive(Parser)]
struct Cmd {
    #[command(flatten)]
    study: StudyArgs,
}

/// The study on worker processes, the same in the test and its workers
/// (which find the database by their coordinator's pid and the server in
/// `HPO_TEST_MLFLOW`).
fn run_workers(coordinator: u32, url: &str) -> hpo::Result<hpo::cli::Finished> {
    let dir = std::env::temp_dir().join(format!("hpo-it-mlflow-workers-{coordinator}"));
    std::fs::create_dir_all(&dir).unwrap();
    let storage = format!("sqlite:{}", dir.join("study.db").display());
    let argv = [
        "exp",
        "--storage",
        &storage,
        "--study",
        "workers",
        "--jobs",
        "2",
        "--memory-budget",
        "1GiB",
        "--trials",
        "4",
        "--mlflow",
        url,
    ];
    let mut args = Cmd::try_parse_from(argv).unwrap().study;
    let launch = WorkerLaunch::test_entry("tracking::worker_entry");
    args.worker_launch = Some(launch.env("HPO_TEST_MLFLOW", url));
    StudyRunner::new(&args)
        .direction(Direction::Minimize)
        .quiet(true)
        .workers(Arc::new(Estimator), Memory::Host)
        .run(worker_objective)
}

#[test]
#[ignore = "run by trials_in_worker_processes_are_logged_by_their_workers as a worker process"]
fn worker_entry() {
    assert!(executor::is_worker(), "only a worker process runs this");
    let url = std::env::var("HPO_TEST_MLFLOW").unwrap();
    run_workers(std::os::unix::process::parent_id(), &url).unwrap();
    panic!("a worker exits once its trial is stored");
}

#[test]
fn trials_in_worker_processes_are_logged_by_their_workers() {
    let Some(url) = shared() else { return };
    let dir = std::env::temp_dir().join(format!("hpo-it-mlflow-workers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let done = run_workers(std::process::id(), url).unwrap();
    assert_eq!(done.summary.states.get("complete"), Some(&4));
    let (_, runs) = assert_logged(url, &done.study);
    for run in runs.values() {
        // What the executor ran, measured in the worker.
        assert!(metric(run, "micro_batch").is_some(), "{run}");
        assert_eq!(metric(run, "accumulation"), Some(1.0));
        assert!(metric(run, "peak_bytes").unwrap() > 0.0);
        assert!(metric(run, "estimate_bytes").unwrap() > 0.0);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_stopped_mid_study_loses_nothing_within_the_bound() {
    let Some(py) = python_with("mlflow", "HPO_REQUIRE_MLFLOW") else {
        return;
    };
    let mut server = Server::mlflow(&py, &temp_dir("mlflow-restart"));
    let url = server.url.clone();
    let tracker = Mlflow::builder(&url)
        .bound(Duration::from_secs(400))
        .build()
        .unwrap();
    let study = Study::builder()
        .name("restarted")
        .tracker(tracker.clone())
        .build()
        .unwrap();
    study.optimize(3, objective).unwrap();
    server.stop();
    // Trials go on while the server is down: queued, not waited for.
    let t0 = std::time::Instant::now();
    for _ in 0..3 {
        let mut trial = study.ask().unwrap();
        let v = objective(&mut trial);
        study.tell(trial, v).unwrap();
    }
    let told = t0.elapsed();
    assert!(
        told < Duration::from_secs(5),
        "three trials took {told:?} with MLflow down: they waited for it"
    );
    server.restart();
    study.optimize(1, objective).unwrap();
    assert_eq!(tracker.dropped(), 0);
    assert_logged(&url, &study);
}

/// A proxy in front of `upstream` that answers the first `fail` requests
/// with 500 and remembers every request's `Authorization` header.
fn flaky_proxy(upstream: &str, fail: usize) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_owned();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let served = Arc::new(AtomicUsize::new(0));
    let seen2 = Arc::clone(&seen);
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let Some((head, body)) = read_request(&mut conn) else {
                continue;
            };
            let auth = head
                .lines()
                .find(|l| l.to_ascii_lowercase().starts_with("authorization:"))
                .map(|l| l["authorization:".len()..].trim().to_owned())
                .unwrap_or_default();
            seen2.lock().unwrap().push(auth);
            if served.fetch_add(1, Ordering::SeqCst) < fail {
                let _ = conn.write_all(
                    b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
                continue;
            }
            let mut up = TcpStream::connect(&upstream).unwrap();
            let head: Vec<&str> = head
                .lines()
                .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                .collect();
            let request = format!("{}\r\nConnection: close\r\n\r\n", head.join("\r\n"));
            up.write_all(request.as_bytes()).unwrap();
            up.write_all(&body).unwrap();
            let mut answer = Vec::new();
            let _ = up.read_to_end(&mut answer);
            let _ = conn.write_all(&answer);
        }
    });
    (url, seen)
}

/// The head (request line and headers, without the blank line) and body.
fn read_request(conn: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if conn.read(&mut byte).ok()? == 0 {
            return None;
        }
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf[..buf.len() - 4]).into_owned();
    let len = head
        .lines()
        .find_map(|l| {
            let l = l.to_ascii_lowercase();
            l.strip_prefix("content-length:")
                .map(|n| n.trim().parse::<usize>().unwrap_or(0))
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    conn.read_exact(&mut body).ok()?;
    Some((head, body))
}

/// Log lines, captured.
#[derive(Clone, Default)]
struct Lines(Arc<Mutex<Vec<u8>>>);

impl Write for Lines {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn server_errors_are_retried_and_the_token_never_shows() {
    let Some(upstream) = shared() else { return };
    const TOKEN: &str = "tok-3f9a1c7e-secret";
    let (proxy, seen) = flaky_proxy(upstream, 5);
    let lines = Lines::default();
    let writer = lines.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        let tracker = Mlflow::builder(&proxy).token(TOKEN).build().unwrap();
        let study = Study::builder()
            .name("flaky")
            .tracker(tracker.clone())
            .build()
            .unwrap();
        study.optimize(3, objective).unwrap();
        assert_eq!(tracker.dropped(), 0, "the 500s were retried");
        assert_logged(upstream, &study);

        // A server that never answers: given up after the bound, logged once
        // with the count.
        let dead = format!("http://127.0.0.1:{}", crate::servers::free_port());
        let down = Mlflow::builder(&dead)
            .token(TOKEN)
            .bound(Duration::from_millis(500))
            .build()
            .unwrap();
        let lost = Study::builder()
            .name("lost")
            .tracker(down.clone())
            .build()
            .unwrap();
        lost.optimize(2, objective).unwrap();
    });
    let seen = seen.lock().unwrap();
    assert!(seen.len() > 5);
    assert!(
        seen.iter().all(|a| a == &format!("Bearer {TOKEN}")),
        "every request carries the token: {seen:?}"
    );
    let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("HTTP 500"), "retries are logged:\n{text}");
    let warnings: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("could not be sent"))
        .collect();
    assert_eq!(warnings.len(), 1, "{text}");
    // The opening, two trials and the end of the run.
    assert!(warnings[0].contains("4 record(s)"), "{}", warnings[0]);
    assert!(!text.contains(TOKEN), "the token was logged:\n{text}");
}
