//! SQLite storage throughput: completed trials per second with a trivial
//! objective and the random sampler, 500 trials shared by 1, 2 and 4
//! processes on one study file, with statements and commits per trial; and
//! the study-size sweep: trials per second once the study already holds
//! 1,000, 10,000 and 100,000 trials, on 1 and 4 processes, through the storage
//! alone (`start_trial`, two `set_trial_param`, `finish_trial`: the per-trial
//! write path) and through `Study::optimize`; plus the cost of the checks at
//! open (`quick_check`) and of restoring an Optuna file's journal mode, on the
//! 100,000-trial file.
//!
//! ```sh
//! cargo bench -p hpo-core --bench storage
//! cargo bench -p hpo-core --features postgres --bench storage -- --storage postgresql://postgres@127.0.0.1:5432/test
//! ```
//!
//! With `--storage URL` (a `postgresql://` URL; feature `postgres`) it measures
//! the PostgreSQL storage instead: 800 trials shared by 1, 4 and 8 processes
//! on one study, in a database `hpo_bench_<pid>` it creates on that server
//! and drops afterwards, with statements and round trips per trial, and
//! writes `bench/results/storage_postgres.json` and `.md` (with the figures of
//! `bench/optuna_storage_bench.py`, Optuna 5.0 on the same server, when its
//! `bench/results/optuna_storage_postgres.json` exists).
//!
//! Writes `bench/results/storage.json` and `bench/results/storage.md`. The
//! processes are this binary re-executed with `--worker`; each configuration
//! runs three times (each size-sweep configuration five) and the median is
//! reported. Throughput is completed trials divided by the time from the
//! first worker's first trial to the last worker's last one (process
//! start-up excluded). In the size sweep each worker first reads the whole
//! study once (a new process's warm-up) and the workers start their timed
//! trials together once all have warmed up, so one worker's warm-up does not
//! fall in another's window.

use anyhow::{bail, Context, Result};
use hpo_core::storage::{SqliteOptions, SqliteStorage};
use hpo_core::{Direction, RandomSampler, Study, TrialError};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

const TRIALS: usize = 500;
const REPEATS: usize = 3;
const STUDY: &str = "bench";

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn open(db: &Path, full: bool) -> Result<SqliteStorage> {
    Ok(SqliteStorage::open_with(
        db,
        SqliteOptions::default().synchronous_full(full),
    )?)
}

/// One worker process: runs `n` trials and prints its measurements as JSON.
fn worker(db: &Path, n: usize, full: bool, seed: u64) -> Result<()> {
    let storage = Arc::new(open(db, full)?);
    let study = Study::builder()
        .name(STUDY)
        .storage(storage.clone())
        .sampler(RandomSampler::seeded(seed))
        .load()?;
    let before = storage.stats();
    let start = now_secs();
    let outcome = study.optimize(n, |t| -> Result<f64, TrialError> {
        let x = t.suggest_float("x", -10.0, 10.0)?;
        let k = t.suggest_int("k", 1, 4)?;
        Ok(x * x + k as f64)
    });
    let end = now_secs();
    let after = storage.stats();
    let report = json!({
        "start": start,
        "end": end,
        "trials": n,
        "statements": after.statements - before.statements,
        "commits": after.commits - before.commits,
        "busy_retries": after.busy_retries - before.busy_retries,
        "error": outcome.err().map(|e| e.to_string()),
    });
    println!("{report}");
    Ok(())
}

/// Study sizes of the sweep.
const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
/// Trials timed per window, per path (split between the processes).
const WINDOW: [(&str, usize); 2] = [("storage", 2000), ("study", 2000)];
/// Windows per configuration of the sweep (the median is reported): more
/// than the throughput rows, as a window lasts about a second and the
/// machine is shared.
const SWEEP_REPEATS: usize = 5;

/// The 1-, 5- and 15-minute load averages, as the kernel reports them.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg").map_or_else(
        |_| "unknown".to_owned(),
        |s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    )
}

/// Signals that this worker is warmed up (a file `ready-<seed>` in
/// `barrier`) and waits for the go (a file `go`), so that no worker's timed
/// trials overlap another's warm-up read.
fn wait_for_go(barrier: &Path, seed: u64) -> Result<()> {
    std::fs::write(barrier.join(format!("ready-{seed}")), b"")?;
    while !barrier.join("go").exists() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    Ok(())
}

/// One worker of the size sweep: `n` trials through `path`, timed after a
/// warm-up read (a new process reads the whole study once; that cost is
/// per process, not per trial) and after every worker has warmed up.
fn sweep_worker(db: &Path, n: usize, path: &str, seed: u64, barrier: &Path) -> Result<()> {
    use hpo_core::{Distribution, FloatDistribution, IntDistribution, Storage, TrialState};
    let storage = Arc::new(open(db, false)?);
    let sid = storage.find_study(STUDY)?.context("no study")?.id;
    storage.claim_waiting_trial(sid)?;
    let (start, outcome) = if path == "storage" {
        let dx = Distribution::Float(FloatDistribution::new(-10.0, 10.0)?);
        let dk = Distribution::Int(IntDistribution::new(1, 4)?);
        let mut state = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        wait_for_go(barrier, seed)?;
        let start = now_secs();
        let mut run = || -> hpo_core::Result<()> {
            for _ in 0..n {
                let t = storage.start_trial(sid, false)?;
                let x = next() * 20.0 - 10.0;
                let k = (next() * 4.0).floor().min(3.0) + 1.0;
                storage.set_trial_param(t.id, "x", x, &dx)?;
                storage.set_trial_param(t.id, "k", k, &dk)?;
                storage.finish_trial(t.id, TrialState::Complete, Some(&[x * x + k]), &[])?;
            }
            Ok(())
        };
        let outcome = run();
        (start, outcome)
    } else {
        let study = Study::builder()
            .name(STUDY)
            .storage(storage.clone())
            .sampler(RandomSampler::seeded(seed))
            .load()?;
        study.trials()?;
        wait_for_go(barrier, seed)?;
        let start = now_secs();
        let outcome = study
            .optimize(n, |t| -> Result<f64, TrialError> {
                let x = t.suggest_float("x", -10.0, 10.0)?;
                let k = t.suggest_int("k", 1, 4)?;
                Ok(x * x + k as f64)
            })
            .map(|_| ());
        (start, outcome)
    };
    let end = now_secs();
    println!(
        "{}",
        json!({"start": start, "end": end, "trials": n, "error": outcome.err().map(|e| e.to_string())})
    );
    Ok(())
}

/// Adds finished trials (two params and a value, as the workers write) until
/// the study holds `size`; one storage call per trial.
fn prefill(db: &Path, size: usize) -> Result<()> {
    use hpo_core::{
        Distribution, FloatDistribution, FrozenTrial, IntDistribution, Storage, TrialState,
    };
    let storage = open(db, false)?;
    let sid = match storage.find_study(STUDY)? {
        Some(s) => s.id,
        None => storage.create_study(STUDY, &[Direction::Minimize])?,
    };
    let have = storage.trials(sid)?.len();
    let mut tpl = FrozenTrial::new(0, 0, TrialState::Complete);
    tpl.distributions.insert(
        "x".into(),
        Distribution::Float(FloatDistribution::new(-10.0, 10.0)?),
    );
    tpl.distributions
        .insert("k".into(), Distribution::Int(IntDistribution::new(1, 4)?));
    for i in have..size {
        let x = (i % 2000) as f64 / 100.0 - 10.0;
        let k = (i % 4 + 1) as f64;
        tpl.internal_params.insert("x".into(), x);
        tpl.internal_params.insert("k".into(), k);
        tpl.values = Some(vec![x * x + k]);
        storage.create_trial(sid, Some(&tpl))?;
    }
    Ok(())
}

/// Copies a closed study file (its WAL is checkpointed on close).
fn copy_db(from: &Path, to: &Path) -> Result<()> {
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", to.display()));
    }
    std::fs::copy(from, to)?;
    Ok(())
}

struct SweepRow {
    size: usize,
    path: &'static str,
    processes: usize,
    trials_per_s: f64,
}

/// One timed window: `processes` workers add `window` trials to a copy of
/// the `size`-trial study; the result is checked for lost or duplicated trials.
fn sweep_run(
    template: &Path,
    db: &Path,
    size: usize,
    path: &str,
    processes: usize,
    window: usize,
) -> Result<f64> {
    copy_db(template, db)?;
    let barrier = db.with_extension("barrier");
    let _ = std::fs::remove_dir_all(&barrier);
    std::fs::create_dir_all(&barrier)?;
    let exe = std::env::current_exe()?;
    let per = window / processes;
    let mut children = (0..processes)
        .map(|i| {
            Command::new(&exe)
                .arg("--sweep-worker")
                .arg(db)
                .arg(per.to_string())
                .arg(path)
                .arg((i + 1).to_string())
                .arg(&barrier)
                .stdout(Stdio::piped())
                .spawn()
                .context("spawning a worker")
        })
        .collect::<Result<Vec<_>>>()?;
    // Every worker warmed up, then all start at once.
    while std::fs::read_dir(&barrier)?.count() < processes {
        for child in &mut children {
            if let Some(status) = child.try_wait()? {
                bail!("a sweep worker exited before its window: {status}");
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::fs::write(barrier.join("go"), b"")?;
    let mut reports = Vec::new();
    for child in children {
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!("a sweep worker failed: {}", out.status);
        }
        let text = String::from_utf8(out.stdout)?;
        let report: Value = serde_json::from_str(text.lines().last().context("no report")?)?;
        if !report["error"].is_null() {
            bail!("a sweep worker failed: {}", report["error"]);
        }
        reports.push(report);
    }
    let start = reports
        .iter()
        .filter_map(|r| r["start"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let end = reports
        .iter()
        .filter_map(|r| r["end"].as_f64())
        .fold(0.0, f64::max);
    let c = rusqlite::Connection::open(db)?;
    let (count, distinct, max): (i64, i64, i64) = c.query_row(
        "SELECT COUNT(*), COUNT(DISTINCT number), MAX(number) FROM trials",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let expected = (size + per * processes) as i64;
    if count != expected || distinct != expected || max != expected - 1 {
        bail!("lost or duplicated trials: {count} rows, {distinct} numbers, max {max}, expected {expected}");
    }
    Ok((per * processes) as f64 / (end - start))
}

/// The size sweep and the open-time costs on the largest file.
fn sweep(dir: &Path) -> Result<(Vec<SweepRow>, Value)> {
    let base = dir.join("sweep-base.db");
    let run_db = dir.join("sweep-run.db");
    let mut templates = Vec::new();
    for size in SIZES {
        let t0 = std::time::Instant::now();
        prefill(&base, size)?;
        let template = dir.join(format!("sweep-{size}.db"));
        copy_db(&base, &template)?;
        eprintln!(
            "prefilled {size} trials in {:.1} s",
            t0.elapsed().as_secs_f64()
        );
        templates.push((size, template));
    }
    // Repeats outermost and sizes interleaved, so that a change in the load
    // of the (shared) machine does not pass for an effect of the size.
    let load_before = load_average();
    let mut runs: Vec<(usize, &'static str, usize, Vec<f64>)> = Vec::new();
    for _ in 0..SWEEP_REPEATS {
        for (size, template) in &templates {
            for (path, window) in WINDOW {
                for processes in [1, 4] {
                    let rate = sweep_run(template, &run_db, *size, path, processes, window)?;
                    match runs
                        .iter_mut()
                        .find(|r| (r.0, r.1, r.2) == (*size, path, processes))
                    {
                        Some(r) => r.3.push(rate),
                        None => runs.push((*size, path, processes, vec![rate])),
                    }
                }
            }
        }
    }
    let load_after = load_average();
    let mut rows = Vec::new();
    for (size, path, processes, mut rates) in runs {
        rates.sort_by(f64::total_cmp);
        let trials_per_s = rates[rates.len() / 2];
        eprintln!("size {size}, {path}, {processes} process(es): {trials_per_s:.0} trials/s");
        rows.push(SweepRow {
            size,
            path,
            processes,
            trials_per_s,
        });
    }
    let largest = templates.pop();
    let (size, template) = largest.context("no sizes")?;
    let bytes = std::fs::metadata(&template)?.len();
    // quick_check alone, and a whole read-only open (which runs it).
    let c = rusqlite::Connection::open(&template)?;
    let t = std::time::Instant::now();
    let ok: String = c.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    let quick_check_ms = t.elapsed().as_secs_f64() * 1e3;
    drop(c);
    if ok != "ok" {
        bail!("quick_check: {ok}");
    }
    let t = std::time::Instant::now();
    drop(SqliteStorage::open_read_only(&template)?);
    let open_ro_ms = t.elapsed().as_secs_f64() * 1e3;
    let t = std::time::Instant::now();
    drop(open(&template, false)?);
    let open_wal_ms = t.elapsed().as_secs_f64() * 1e3;
    // The same file in Optuna's rollback-journal mode: open switches it to
    // WAL, drop switches it back.
    let optuna = dir.join("sweep-optuna.db");
    copy_db(&template, &optuna)?;
    rusqlite::Connection::open(&optuna)?.query_row("PRAGMA journal_mode = DELETE", [], |r| {
        r.get::<_, String>(0)
    })?;
    let t = std::time::Instant::now();
    drop(open(&optuna, false)?);
    let open_restore_ms = t.elapsed().as_secs_f64() * 1e3;
    let mode: String =
        rusqlite::Connection::open(&optuna)?.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    let checks = json!({
        "trials": size,
        "file_mb": ((bytes as f64 / 1e6) * 10.0).round() / 10.0,
        "quick_check_ms": quick_check_ms.round(),
        "open_read_only_ms": open_ro_ms.round(),
        "open_and_close_wal_file_ms": open_wal_ms.round(),
        "open_and_close_delete_mode_file_ms": open_restore_ms.round(),
        "delete_mode_file_journal_after_close": mode,
        "sweep_load_average_before": load_before,
        "sweep_load_average_after": load_after,
        "cores": std::thread::available_parallelism().map_or(0, |n| n.get()),
    });
    Ok((rows, checks))
}

struct Row {
    processes: usize,
    synchronous: &'static str,
    trials_per_s: f64,
    statements_per_trial: f64,
    commits_per_trial: f64,
    busy_retries: u64,
    errors: usize,
    complete: usize,
}

fn run(dir: &Path, processes: usize, full: bool) -> Result<Row> {
    let db = dir.join(format!(
        "bench-{processes}-{}.db",
        if full { "full" } else { "normal" }
    ));
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{ext}", db.display()));
    }
    {
        let storage = Arc::new(open(&db, full)?);
        Study::builder()
            .name(STUDY)
            .storage(storage)
            .direction(Direction::Minimize)
            .build()?;
    }
    let exe = std::env::current_exe()?;
    let per = TRIALS / processes;
    let children = (0..processes)
        .map(|i| {
            Command::new(&exe)
                .arg("--worker")
                .arg(&db)
                .arg(per.to_string())
                .arg(if full { "full" } else { "normal" })
                .arg(i.to_string())
                .stdout(Stdio::piped())
                .spawn()
                .context("spawning a worker")
        })
        .collect::<Result<Vec<_>>>()?;
    let mut reports = Vec::new();
    for child in children {
        let out = child.wait_with_output()?;
        if !out.status.success() {
            bail!("a worker failed: {}", out.status);
        }
        let text = String::from_utf8(out.stdout)?;
        let line = text.lines().last().context("a worker printed nothing")?;
        reports.push(serde_json::from_str::<Value>(line)?);
    }
    let start = reports
        .iter()
        .filter_map(|r| r["start"].as_f64())
        .fold(f64::INFINITY, f64::min);
    let end = reports
        .iter()
        .filter_map(|r| r["end"].as_f64())
        .fold(0.0, f64::max);
    let sum = |k: &str| reports.iter().filter_map(|r| r[k].as_u64()).sum::<u64>();
    let errors = reports.iter().filter(|r| !r["error"].is_null()).count();
    let storage = open(&db, full)?;
    let id = hpo_core::Storage::find_study(&storage, STUDY)?
        .context("study vanished")?
        .id;
    let trials = hpo_core::Storage::trials(&storage, id)?;
    let complete = trials
        .iter()
        .filter(|t| t.state == hpo_core::TrialState::Complete)
        .count();
    let numbers_ok = trials.iter().enumerate().all(|(i, t)| t.number == i as u64);
    if !numbers_ok || complete != per * processes {
        bail!(
            "lost or duplicated trials: {} complete of {}",
            complete,
            per * processes
        );
    }
    let n = (per * processes) as f64;
    Ok(Row {
        processes,
        synchronous: if full { "FULL" } else { "NORMAL" },
        trials_per_s: n / (end - start),
        statements_per_trial: sum("statements") as f64 / n,
        commits_per_trial: sum("commits") as f64 / n,
        busy_retries: sum("busy_retries"),
        errors,
        complete,
    })
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args
        .iter()
        .position(|a| a == "--storage" || a == "--pg-worker")
    {
        return postgres_bench::main(&args[i..]);
    }
    if args.get(1).map(String::as_str) == Some("--worker") {
        let db = PathBuf::from(&args[2]);
        let n: usize = args[3].parse()?;
        let full = args[4] == "full";
        let seed: u64 = args[5].parse()?;
        return worker(&db, n, full, seed);
    }
    if args.get(1).map(String::as_str) == Some("--prefill") {
        // For profiling by hand: a study file of N finished trials.
        return prefill(Path::new(&args[2]), args[3].parse()?);
    }
    if args.get(1).map(String::as_str) == Some("--sweep-worker") {
        let db = PathBuf::from(&args[2]);
        let n: usize = args[3].parse()?;
        let seed: u64 = args[5].parse()?;
        return sweep_worker(&db, n, &args[4], seed, Path::new(&args[6]));
    }
    let dir = std::env::temp_dir().join(format!("hpo-storage-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let mut rows = Vec::new();
    for (processes, full) in [(1, false), (2, false), (4, false), (1, true), (2, true)] {
        // The machine is shared: report the median of three runs.
        let mut runs = (0..REPEATS)
            .map(|_| run(&dir, processes, full))
            .collect::<Result<Vec<_>>>()?;
        runs.sort_by(|a, b| a.trials_per_s.total_cmp(&b.trials_per_s));
        let row = runs.swap_remove(REPEATS / 2);
        eprintln!(
            "{} process(es), synchronous={}: {:.0} trials/s",
            row.processes, row.synchronous, row.trials_per_s
        );
        rows.push(row);
    }
    let reads = read_costs(&dir, 5000)?;
    let (sweep_rows, checks) = sweep(&dir)?;
    std::fs::remove_dir_all(&dir)?;

    let json_rows: Vec<Value> = rows
        .iter()
        .map(|r| {
            json!({
                "processes": r.processes,
                "synchronous": r.synchronous,
                "trials": TRIALS,
                "complete": r.complete,
                "trials_per_s": (r.trials_per_s * 10.0).round() / 10.0,
                "statements_per_trial": (r.statements_per_trial * 100.0).round() / 100.0,
                "commits_per_trial": (r.commits_per_trial * 100.0).round() / 100.0,
                "busy_retries": r.busy_retries,
                "errors": r.errors,
            })
        })
        .collect();
    let doc = json!({
        "benchmark": "storage",
        "objective": "x^2 + k, x float in [-10, 10], k int in [1, 4]; RandomSampler",
        "repeats": REPEATS,
        "statistic": "median trials/s of the repeats; counts from that run",
        "sqlite": rusqlite_version(),
        "optuna_5_0_reference": {"trials_per_s_1_process": 13.4, "trials_per_s_2_processes": 12.3,
                                  "statements_per_trial": 35, "commits_per_trial": 7},
        "rows": json_rows,
        "reads": reads,
        "size_sweep": sweep_rows.iter().map(|r| json!({
            "study_size": r.size,
            "path": r.path,
            "processes": r.processes,
            "window_trials": WINDOW.iter().find(|(p, _)| *p == r.path).map_or(0, |(_, w)| *w),
            "windows": SWEEP_REPEATS,
            "trials_per_s": r.trials_per_s.round(),
        })).collect::<Vec<_>>(),
        "open_checks": checks,
    });
    let mut md = String::from(
        "| processes | synchronous | trials/s | statements/trial | commits/trial | busy retries | errors |\n\
         | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in &rows {
        md.push_str(&format!(
            "| {} | {} | {:.0} | {:.1} | {:.1} | {} | {} |\n",
            r.processes,
            r.synchronous,
            r.trials_per_s,
            r.statements_per_trial,
            r.commits_per_trial,
            r.busy_retries,
            r.errors
        ));
    }
    md.push_str(
        "| 1 | Optuna 5.0 (rollback journal, FULL) | 13.4 | 35 | 7 | | |\n\
         | 2 | Optuna 5.0 (rollback journal, FULL) | 12.3 | 35 | 7 | | |\n",
    );
    md.push_str(&format!(
        "\nReading a study of {} finished trials from a second handle: first read {:.1} ms \
         ({} trials loaded); after one more trial, the next read {:.3} ms ({} trial loaded).\n",
        reads["trials"],
        reads["first_read_ms"].as_f64().unwrap_or(f64::NAN),
        reads["first_read_loaded"],
        reads["next_read_ms"].as_f64().unwrap_or(f64::NAN),
        reads["next_read_loaded"],
    ));
    md.push_str(&sweep_table(&sweep_rows, &checks));
    let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/results");
    std::fs::create_dir_all(&out)?;
    std::fs::write(
        out.join("storage.json"),
        serde_json::to_string_pretty(&doc)? + "\n",
    )?;
    std::fs::write(out.join("storage.md"), &md)?;
    print!("{md}");
    Ok(())
}

/// The cost of `trials()` on a large study: the first read by a second
/// handle loads everything once; the next reads only what changed.
fn read_costs(dir: &Path, n: usize) -> Result<Value> {
    use hpo_core::{
        Distribution, FloatDistribution, FrozenTrial, IntDistribution, Storage, TrialState,
    };
    let db = dir.join("reads.db");
    let writer = open(&db, false)?;
    let id = writer.create_study("reads", &[Direction::Minimize])?;
    let mut tpl = FrozenTrial::new(0, 0, TrialState::Complete);
    tpl.distributions.insert(
        "x".into(),
        Distribution::Float(FloatDistribution::new(-10.0, 10.0)?),
    );
    tpl.distributions
        .insert("k".into(), Distribution::Int(IntDistribution::new(1, 4)?));
    for i in 0..n {
        tpl.internal_params
            .insert("x".into(), (i % 20) as f64 - 10.0);
        tpl.internal_params.insert("k".into(), (i % 4 + 1) as f64);
        tpl.values = Some(vec![i as f64]);
        writer.create_trial(id, Some(&tpl))?;
    }
    let reader = open(&db, false)?;
    let t0 = std::time::Instant::now();
    let first = reader.trials(id)?.len();
    let first_ms = t0.elapsed().as_secs_f64() * 1e3;
    let loaded_first = reader.stats().trials_loaded;
    let t = writer.create_trial(id, None)?;
    writer.finish_trial(t.id, TrialState::Complete, Some(&[0.0]), &[])?;
    let t1 = std::time::Instant::now();
    let next = reader.trials(id)?.len();
    let next_ms = t1.elapsed().as_secs_f64() * 1e3;
    if first != n || next != n + 1 {
        bail!(
            "read {first} then {next} trials, expected {n} then {}",
            n + 1
        );
    }
    Ok(json!({
        "trials": n,
        "first_read_ms": (first_ms * 10.0).round() / 10.0,
        "first_read_loaded": loaded_first,
        "next_read_ms": (next_ms * 1000.0).round() / 1000.0,
        "next_read_loaded": reader.stats().trials_loaded - loaded_first,
    }))
}

fn rusqlite_version() -> String {
    hpo_core::storage::SqliteStorage::sqlite_version()
}

/// The PostgreSQL mode (`--storage URL`).
#[cfg(feature = "postgres")]
mod postgres_bench {
    use super::{now_secs, STUDY};
    use anyhow::{bail, Context, Result};
    use hpo_core::storage::{PostgresOptions, PostgresStorage};
    use hpo_core::{Direction, RandomSampler, Storage, Study, TrialError, TrialState};
    use serde_json::{json, Value};
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::sync::Arc;

    const TRIALS: usize = 800;
    const PROCESSES: [usize; 3] = [1, 4, 8];

    pub fn main(args: &[String]) -> Result<()> {
        match args.first().map(String::as_str) {
            Some("--pg-worker") => worker(
                &args[1],
                args[2].parse()?,
                args[3].parse()?,
                args[4] == "sync",
            ),
            _ => {
                let url = args.get(1).context("--storage needs a postgresql:// URL")?;
                bench(url)
            }
        }
    }

    /// One worker process: runs `n` trials and prints its measurements as JSON.
    fn worker(url: &str, n: usize, seed: u64, sync: bool) -> Result<()> {
        let options = PostgresOptions::default().synchronous_commit(sync);
        let storage = Arc::new(PostgresStorage::open_with(url, options)?);
        let study = Study::builder()
            .name(STUDY)
            .storage(storage.clone())
            .sampler(RandomSampler::seeded(seed))
            .load()?;
        let before = storage.stats();
        let start = now_secs();
        let outcome = study.optimize(n, |t| -> Result<f64, TrialError> {
            let x = t.suggest_float("x", -10.0, 10.0)?;
            let k = t.suggest_int("k", 1, 4)?;
            Ok(x * x + k as f64)
        });
        let end = now_secs();
        let after = storage.stats();
        println!(
            "{}",
            json!({
                "start": start,
                "end": end,
                "statements": after.statements - before.statements,
                "round_trips": after.round_trips - before.round_trips,
                "commits": after.commits - before.commits,
                "retries": after.retries - before.retries,
                "error": outcome.err().map(|e| e.to_string()),
            })
        );
        Ok(())
    }

    /// An admin connection and the URL of a fresh database on the same server.
    fn fresh_database(url: &str, name: &str) -> Result<(postgres::Client, String)> {
        let mut admin = postgres::Client::connect(url, postgres::NoTls)?;
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
        admin.batch_execute(&format!("CREATE DATABASE {name}"))?;
        let base = url.split('?').next().unwrap_or(url);
        let (server, _) = base.rsplit_once('/').context("the URL names no database")?;
        Ok((admin, format!("{server}/{name}")))
    }

    fn run(url: &str, processes: usize, sync: bool) -> Result<Value> {
        let name = format!("hpo_bench_{}", std::process::id());
        let (mut admin, db) = fresh_database(url, &name)?;
        Study::builder()
            .name(STUDY)
            .storage(Arc::new(PostgresStorage::open(&db)?))
            .direction(Direction::Minimize)
            .build()?;
        let exe = std::env::current_exe()?;
        let per = TRIALS / processes;
        let children = (0..processes)
            .map(|i| {
                Command::new(&exe)
                    .args(["--pg-worker", &format!("{db}?application_name=machine-{i}")])
                    .arg(per.to_string())
                    .arg(i.to_string())
                    .arg(if sync { "sync" } else { "async" })
                    .stdout(Stdio::piped())
                    .spawn()
                    .context("spawning a worker")
            })
            .collect::<Result<Vec<_>>>()?;
        let mut reports = Vec::new();
        for child in children {
            let out = child.wait_with_output()?;
            if !out.status.success() {
                bail!("a worker failed: {}", out.status);
            }
            let text = String::from_utf8(out.stdout)?;
            let line = text.lines().last().context("a worker printed nothing")?;
            reports.push(serde_json::from_str::<Value>(line)?);
        }
        let start = reports
            .iter()
            .filter_map(|r| r["start"].as_f64())
            .fold(f64::INFINITY, f64::min);
        let end = reports
            .iter()
            .filter_map(|r| r["end"].as_f64())
            .fold(0.0, f64::max);
        let sum = |k: &str| reports.iter().filter_map(|r| r[k].as_u64()).sum::<u64>();
        let errors = reports.iter().filter(|r| !r["error"].is_null()).count();
        let storage = PostgresStorage::open(&db)?;
        let id = storage.find_study(STUDY)?.context("study vanished")?.id;
        let trials = storage.trials(id)?;
        let complete = trials
            .iter()
            .filter(|t| t.state == TrialState::Complete)
            .count();
        let numbers_ok = trials.iter().enumerate().all(|(i, t)| t.number == i as u64);
        drop(storage);
        admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))?;
        if !numbers_ok || complete != per * processes {
            bail!(
                "lost or duplicated trials: {complete} complete of {}",
                per * processes
            );
        }
        let n = (per * processes) as f64;
        Ok(json!({
            "processes": processes,
            "synchronous_commit": sync,
            "trials": per * processes,
            "trials_per_s": ((n / (end - start)) * 10.0).round() / 10.0,
            "statements_per_trial": (sum("statements") as f64 / n * 100.0).round() / 100.0,
            "round_trips_per_trial": (sum("round_trips") as f64 / n * 100.0).round() / 100.0,
            "commits_per_trial": (sum("commits") as f64 / n * 100.0).round() / 100.0,
            "retries": sum("retries"),
            "errors": errors,
        }))
    }

    fn bench(url: &str) -> Result<()> {
        let mut rows = Vec::new();
        let configs = PROCESSES
            .iter()
            .map(|&p| (p, false))
            .chain(PROCESSES.iter().map(|&p| (p, true)));
        for (processes, sync) in configs {
            // The machine is shared: report the median of the repeats.
            let mut runs = (0..super::REPEATS)
                .map(|_| run(url, processes, sync))
                .collect::<Result<Vec<_>>>()?;
            runs.sort_by(|a, b| {
                a["trials_per_s"]
                    .as_f64()
                    .unwrap_or(0.0)
                    .total_cmp(&b["trials_per_s"].as_f64().unwrap_or(0.0))
            });
            let row = runs.swap_remove(super::REPEATS / 2);
            eprintln!(
                "{processes} process(es), synchronous_commit={sync}: {} trials/s",
                row["trials_per_s"]
            );
            rows.push(row);
        }
        let out = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/results");
        std::fs::create_dir_all(&out)?;
        let optuna: Option<Value> =
            std::fs::read_to_string(out.join("optuna_storage_postgres.json"))
                .ok()
                .and_then(|t| serde_json::from_str(&t).ok());
        let mut admin = postgres::Client::connect(url, postgres::NoTls)?;
        let server: String = admin.query_one("SELECT version()", &[])?.get(0);
        let doc = json!({
            "benchmark": "storage_postgres",
            "objective": "x^2 + k, x float in [-10, 10], k int in [1, 4]; RandomSampler",
            "server": server,
            "trials": TRIALS,
            "repeats": super::REPEATS,
            "statistic": "median trials/s of the repeats; counts from that run",
            "rows": rows,
            "optuna": optuna,
        });
        let mut md = String::from(
            "| processes | synchronous_commit | hpo trials/s | statements/trial | round trips/trial | commits/trial | retries | errors | Optuna 5.0 trials/s | ratio |\n\
             | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
        );
        for r in &rows {
            let p = r["processes"].as_u64().unwrap_or(0);
            let ours = r["trials_per_s"].as_f64().unwrap_or(f64::NAN);
            let theirs = optuna.as_ref().and_then(|o| {
                o["rows"]
                    .as_array()?
                    .iter()
                    .find(|x| x["processes"].as_u64() == Some(p))?["trials_per_s"]
                    .as_f64()
            });
            let sync = if r["synchronous_commit"].as_bool() == Some(true) {
                "on"
            } else {
                "off (default)"
            };
            md.push_str(&format!(
                "| {p} | {sync} | {ours:.0} | {:.1} | {:.1} | {:.1} | {} | {} | {} | {} |\n",
                r["statements_per_trial"].as_f64().unwrap_or(f64::NAN),
                r["round_trips_per_trial"].as_f64().unwrap_or(f64::NAN),
                r["commits_per_trial"].as_f64().unwrap_or(f64::NAN),
                r["retries"],
                r["errors"],
                theirs.map_or("not measured".to_owned(), |t| format!("{t:.1}")),
                theirs.map_or(String::new(), |t| format!("{:.0}x", ours / t)),
            ));
        }
        md.push_str(&format!(
            "\nServer: {server}, on the same machine as the workers. Optuna 5.0 \
             (`bench/optuna_storage_bench.py`, psycopg) runs with the server's default \
             `synchronous_commit = on`.\n"
        ));
        std::fs::write(
            out.join("storage_postgres.json"),
            serde_json::to_string_pretty(&doc)? + "\n",
        )?;
        std::fs::write(out.join("storage_postgres.md"), &md)?;
        print!("{md}");
        Ok(())
    }
}

/// The PostgreSQL mode needs the `postgres` feature.
#[cfg(not(feature = "postgres"))]
mod postgres_bench {
    pub fn main(_args: &[String]) -> anyhow::Result<()> {
        anyhow::bail!(
            "--storage needs the PostgreSQL storage: \
             cargo bench -p hpo-core --features postgres --bench storage -- --storage URL"
        )
    }
}

/// The size sweep as markdown: trials/s per study size, and 100k against 1k.
fn sweep_table(rows: &[SweepRow], checks: &Value) -> String {
    let rate = |size: usize, path: &str, p: usize| {
        rows.iter()
            .find(|r| r.size == size && r.path == path && r.processes == p)
            .map_or(f64::NAN, |r| r.trials_per_s)
    };
    let mut md = format!(
        "\nTrials per second once the study already holds N trials (median of {SWEEP_REPEATS} windows; \
         `storage`: start_trial + 2 params + finish_trial; `study`: Study::optimize with the random sampler; \
         load average of the machine ({} cores) {} before the sweep, {} after):\n\n\
         | path | processes | 1,000 | 10,000 | 100,000 | 100k / 1k |\n| --- | ---: | ---: | ---: | ---: | ---: |\n",
        checks["cores"],
        checks["sweep_load_average_before"].as_str().unwrap_or("?"),
        checks["sweep_load_average_after"].as_str().unwrap_or("?"),
    );
    for (path, _) in WINDOW {
        for p in [1, 4] {
            let (a, b, c) = (
                rate(1_000, path, p),
                rate(10_000, path, p),
                rate(100_000, path, p),
            );
            md.push_str(&format!(
                "| {path} | {p} | {a:.0} | {b:.0} | {c:.0} | {:.2} |\n",
                c / a
            ));
        }
    }
    md.push_str(&format!(
        "\nOn the {}-trial file ({} MB): `PRAGMA quick_check` {} ms; a read-only open (which runs it) {} ms; \
         open and close of the WAL file {} ms; of the same file in rollback-journal mode, switched to WAL \
         and back on close, {} ms (journal mode after close: {}).\n",
        checks["trials"], checks["file_mb"], checks["quick_check_ms"], checks["open_read_only_ms"],
        checks["open_and_close_wal_file_ms"], checks["open_and_close_delete_mode_file_ms"],
        checks["delete_mode_file_journal_after_close"].as_str().unwrap_or("?"),
    ));
    md
}
