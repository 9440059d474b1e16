//! CPU time of one TPE suggestion as the history grows, on the 10-D space of
//! Optuna's overhead script (6 floats, 2 log-floats, 1 int, 1 categorical of 4).
//!
//! For each history size N it measures, single-threaded, with the thread's CPU clock:
//!
//! * **sampler**: one joint suggestion (`infer_relative_search_space` +
//!   `sample_relative`, what a trial does when it starts) over a history of N
//!   finished trials; each measured suggestion is then added to the history,
//!   so the incremental path (one new trial per suggestion) is what is timed;
//! * **trial**: a whole `ask` + ten `suggest_*` + `tell` through a `Study`
//!   with in-memory storage whose first N trials were random start-up trials.
//!
//! Writes `bench/results/tpe_overhead.json` and `.md` and prints the table.
//!
//! ```text
//! cargo bench --bench tpe_overhead [-- --sizes 100,500,1000,2000,5000 --repeats 30 --sampler-only]
//! ```
#![allow(unsafe_code)] // clock_gettime, the only way to read a thread's CPU clock.

use anyhow::{bail, Context, Result};
use hpo::{
    CategoricalDistribution, Direction, Distribution, FloatDistribution, FrozenTrial,
    IntDistribution, Sampler, Study, StudyView, TpeConfig, TpeSampler, TrialState,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::json;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

/// CPU time of the calling thread, in seconds.
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, exclusively borrowed timespec for the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

const ACTS: [&str; 4] = ["relu", "tanh", "gelu", "silu"];

fn space() -> Result<BTreeMap<String, Distribution>> {
    let mut s = BTreeMap::new();
    for i in 0..6 {
        s.insert(format!("x{i}"), FloatDistribution::new(-10.0, 10.0)?.into());
    }
    s.insert("lr".into(), FloatDistribution::log(1e-5, 1e-1)?.into());
    s.insert("wd".into(), FloatDistribution::log(1e-6, 1e-2)?.into());
    s.insert("layers".into(), IntDistribution::new(1, 100)?.into());
    s.insert("act".into(), CategoricalDistribution::new(ACTS)?.into());
    Ok(s)
}

/// The objective on internal values.
fn objective(p: &BTreeMap<String, f64>) -> f64 {
    let g = |k: &str| p.get(k).copied().unwrap_or(0.0);
    (0..6)
        .map(|i| (g(&format!("x{i}")) - 1.0).powi(2))
        .sum::<f64>()
        + (g("lr").log10() + 3.0).powi(2)
        + (g("wd").log10() + 4.0).powi(2)
        + ((g("layers") - 20.0) / 10.0).powi(2)
        + g("act")
}

fn finished(
    number: u64,
    params: BTreeMap<String, f64>,
    space: &BTreeMap<String, Distribution>,
) -> Arc<FrozenTrial> {
    let mut t = FrozenTrial::new(number, number, TrialState::Complete);
    t.values = Some(vec![objective(&params)]);
    t.internal_params = params;
    t.distributions = space.clone();
    Arc::new(t)
}

/// Median and mean CPU seconds per suggestion of the sampler alone at history size `n`.
fn sampler_time(
    n: usize,
    repeats: usize,
    space: &BTreeMap<String, Distribution>,
) -> Result<(f64, f64, f64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(n as u64);
    let mut history: Vec<Arc<FrozenTrial>> = (0..n as u64)
        .map(|i| {
            let params = space
                .iter()
                .map(|(k, d)| {
                    let x = match d {
                        Distribution::Float(f) if f.is_log() => {
                            rng.random_range(f.low().ln()..f.high().ln()).exp()
                        }
                        Distribution::Float(f) => rng.random_range(f.low()..f.high()),
                        Distribution::Int(f) => rng.random_range(f.low()..=f.high()) as f64,
                        Distribution::Categorical(c) => {
                            rng.random_range(0..c.choices().len()) as f64
                        }
                    };
                    (k.clone(), x)
                })
                .collect();
            finished(i, params, space)
        })
        .collect();
    let sampler = TpeSampler::seeded(0);
    let dirs = [Direction::Minimize];
    let mut times = Vec::with_capacity(repeats);
    let mut cold = f64::NAN;
    for r in 0..=repeats {
        let number = history.len() as u64;
        let me = FrozenTrial::new(number, number, TrialState::Running);
        let view = StudyView::new("overhead", &dirs, &history);
        let t0 = thread_cpu_s();
        let rel = sampler.infer_relative_search_space(&view, &me);
        let params = sampler.sample_relative(&view, &me, &rel)?.params;
        let dt = thread_cpu_s() - t0;
        if params.len() != space.len() {
            bail!(
                "expected a joint suggestion of {} parameters, got {}",
                space.len(),
                params.len()
            );
        }
        if r == 0 {
            cold = dt; // first call reads the whole history once
        } else {
            times.push(dt);
        }
        history.push(finished(number, params, space));
    }
    times.sort_by(f64::total_cmp);
    let mean = times.iter().sum::<f64>() / times.len() as f64;
    Ok((times[times.len() / 2], mean, cold))
}

/// Median CPU seconds of ask + 10 suggestions + tell after `n` random trials.
fn trial_time(n: usize, repeats: usize) -> Result<f64> {
    let cfg = TpeConfig {
        n_startup_trials: n,
        ..TpeConfig::seeded(1)
    };
    let study = Study::builder()
        .direction(Direction::Minimize)
        .sampler(TpeSampler::with_config(cfg)?)
        .build()?;
    let run = |study: &Study| -> Result<()> {
        let mut t = study.ask()?;
        let mut p = BTreeMap::new();
        for i in 0..6 {
            let k = format!("x{i}");
            p.insert(k.clone(), t.suggest_float(&k, -10.0, 10.0)?);
        }
        p.insert("lr".into(), t.suggest_float_log("lr", 1e-5, 1e-1)?);
        p.insert("wd".into(), t.suggest_float_log("wd", 1e-6, 1e-2)?);
        p.insert("layers".into(), t.suggest_int("layers", 1, 100)? as f64);
        let act = t.suggest_categorical("act", &ACTS)?;
        p.insert(
            "act".into(),
            ACTS.iter().position(|a| *a == act).unwrap_or(0) as f64,
        );
        study.tell(t, objective(&p))?;
        Ok(())
    };
    for _ in 0..n {
        run(&study)?;
    }
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let t0 = thread_cpu_s();
        run(&study)?;
        times.push(thread_cpu_s() - t0);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

fn main() -> Result<()> {
    let mut sizes = vec![100usize, 500, 1000, 2000, 5000];
    let mut repeats = 30usize;
    let mut sampler_only = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--sizes" => {
                sizes = args
                    .next()
                    .context("--sizes a,b")?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--repeats" => repeats = args.next().context("--repeats N")?.parse()?,
            "--sampler-only" => sampler_only = true,
            "--bench" => {}
            other => bail!("unknown argument `{other}`"),
        }
    }
    let space = space()?;
    let optuna_ms: BTreeMap<usize, f64> = [(1000, 36.0), (2000, 61.0)].into_iter().collect();
    let mut md = String::new();
    writeln!(md, "CPU time per suggestion, 10-D space (6 floats, 2 log-floats, 1 int, 1 categorical of 4), default TpeSampler; median of {repeats}.\n")?;
    writeln!(md, "| trials in history | sampler: median ms | sampler: mean ms | first call (reads history) ms | ask + 10 suggests + tell: median ms | Optuna 5.0 ms |")?;
    writeln!(md, "|---|---|---|---|---|---|")?;
    let mut rows = Vec::new();
    for n in &sizes {
        let (median, mean, cold) = sampler_time(*n, repeats, &space)?;
        let trial = if sampler_only {
            f64::NAN
        } else {
            trial_time(*n, repeats)?
        };
        let optuna = optuna_ms
            .get(n)
            .map_or("-".to_owned(), |v| format!("{v:.0}"));
        writeln!(
            md,
            "| {n} | {:.3} | {:.3} | {:.3} | {:.3} | {optuna} |",
            median * 1e3,
            mean * 1e3,
            cold * 1e3,
            trial * 1e3
        )?;
        eprintln!("{n}: {:.3} ms", median * 1e3);
        rows.push(json!({
            "n_trials": n, "sampler_median_ms": median * 1e3, "sampler_mean_ms": mean * 1e3,
            "first_call_ms": cold * 1e3, "trial_median_ms": trial * 1e3, "optuna_ms": optuna_ms.get(n),
        }));
    }
    print!("{md}");
    let out = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("bench/results");
    std::fs::create_dir_all(&out)?;
    let meta = json!({
        "command": "cargo bench --bench tpe_overhead", "repeats": repeats, "clock": "CLOCK_THREAD_CPUTIME_ID",
        "config": TpeConfig::default(), "targets_ms": {"2000": 0.5, "5000": 1.0},
    });
    std::fs::write(
        out.join("tpe_overhead.json"),
        serde_json::to_string_pretty(&json!({"meta": meta, "rows": rows}))?,
    )?;
    std::fs::write(out.join("tpe_overhead.md"), &md)?;
    Ok(())
}
