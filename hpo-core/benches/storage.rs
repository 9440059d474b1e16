//! SQLite storage throughput: completed trials per second with a trivial
//! objective and the random sampler, 500 trials shared by 1, 2 and 4
//! processes on one study file, with statements and commits per trial.
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
//! runs three times and the median is reported. Throughput is completed trials
//! divided by the time from the first worker's first trial to the last
//! worker's last one (process start-up excluded).

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
