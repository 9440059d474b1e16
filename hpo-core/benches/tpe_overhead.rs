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
//! These two run on a *random* history. The **TPE-grown** protocol (Optuna's
//! way of measuring overhead) instead grows one study with the sampler itself,
//! `ask` + ten `suggest_*` + `tell` with the objective per trial, until N
//! trials have finished, then times `repeats` more `ask` + ten `suggest_*`
//! (and, separately, their `tell`) at that size; the study then keeps growing
//! to the next size. A TPE-grown history clusters around the optimum, so more
//! bad-group kernels lie near each candidate than in a random one, and it costs
//! more. It runs for the default settings and for [`TpeConfig::optuna`] (24
//! candidates, no group decomposition), each with seed 1, and records a hash of
//! every proposal's bits, which must not change when only speed does.
//!
//! Writes `bench/results/tpe_overhead.json` and `.md` and prints the tables.
//!
//! ```text
//! cargo bench -p hpo-core --bench tpe_overhead [-- --sizes 100,500,1000,2000,5000 --repeats 30 --sampler-only]
//! cargo bench -p hpo-core --bench tpe_overhead -- --grown-only --sizes 2000,5000 --repeats 30
//! ```

#[path = "support/cpu_clock.rs"]
mod cpu_clock;

use anyhow::{bail, Context, Result};
use cpu_clock::thread_cpu_s;
use hpo_core::{
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

/// Ten `suggest_*` on the benchmark's space; returns the values in internal units.
fn suggest_all(t: &mut hpo_core::Trial) -> Result<BTreeMap<String, f64>> {
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
    Ok(p)
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
        let p = suggest_all(&mut t)?;
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

/// One size of the TPE-grown protocol, in milliseconds.
struct GrownRow {
    n: usize,
    /// `ask` + ten `suggest_*`: median and mean.
    median: f64,
    mean: f64,
    /// The `tell` that follows: median.
    tell_median: f64,
}

/// The TPE-grown protocol for one configuration: grows a study with `cfg`
/// to each of `sizes` (ascending) finished trials and times `repeats`
/// further trials there. Returns the rows and an FNV-1a hash of every
/// trial's parameter bits, by number, at the end.
fn grown(cfg: TpeConfig, sizes: &[usize], repeats: usize) -> Result<(Vec<GrownRow>, u64)> {
    let study = Study::builder()
        .direction(Direction::Minimize)
        .sampler(TpeSampler::with_config(cfg)?)
        .build()?;
    let mut done = 0usize;
    let mut rows = Vec::new();
    for n in sizes {
        while done < *n {
            let mut t = study.ask()?;
            let p = suggest_all(&mut t)?;
            study.tell(t, objective(&p))?;
            done += 1;
        }
        let mut asks = Vec::with_capacity(repeats);
        let mut tells = Vec::with_capacity(repeats);
        for _ in 0..repeats {
            let t0 = thread_cpu_s();
            let mut t = study.ask()?;
            let p = suggest_all(&mut t)?;
            let t1 = thread_cpu_s();
            study.tell(t, objective(&p))?;
            tells.push(thread_cpu_s() - t1);
            asks.push(t1 - t0);
            done += 1;
        }
        asks.sort_by(f64::total_cmp);
        tells.sort_by(f64::total_cmp);
        let row = GrownRow {
            n: *n,
            median: asks[asks.len() / 2] * 1e3,
            mean: asks.iter().sum::<f64>() / asks.len() as f64 * 1e3,
            tell_median: tells[tells.len() / 2] * 1e3,
        };
        eprintln!(
            "grown {n}: median {:.3} ms, min {:.3} ms",
            row.median,
            asks[0] * 1e3
        );
        rows.push(row);
    }
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for t in study.trials()? {
        for (k, v) in &t.internal_params {
            for b in k.bytes().chain(v.to_bits().to_le_bytes()) {
                hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    Ok((rows, hash))
}

fn main() -> Result<()> {
    let mut sizes = vec![100usize, 500, 1000, 2000, 5000];
    let mut repeats = 30usize;
    let mut sampler_only = false;
    let mut random = true;
    let mut grown_protocol = true;
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
            "--sampler-only" => {
                sampler_only = true;
                grown_protocol = false;
            }
            "--grown-only" => random = false,
            "--bench" => {}
            other => bail!("unknown argument `{other}`"),
        }
    }
    if repeats == 0 {
        bail!("--repeats must be at least 1");
    }
    sizes.sort_unstable();
    // The machine's load around the run (Linux), for the record: other
    // processes on the same cores slow a thread's CPU time too.
    let load = || {
        std::fs::read_to_string("/proc/loadavg")
            .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    let load_start = load();
    let space = space()?;
    let optuna_ms: BTreeMap<usize, f64> = [(1000, 36.0), (2000, 61.0)].into_iter().collect();
    let mut md = String::new();
    let mut rows = Vec::new();
    if random {
        writeln!(md, "**Random history.** CPU time per suggestion, 10-D space (6 floats, 2 log-floats, 1 int, 1 categorical of 4), default TpeSampler, history of N random trials; median of {repeats}.\n")?;
        writeln!(md, "| trials in history | sampler: median ms | sampler: mean ms | first call (reads history) ms | ask + 10 suggests + tell: median ms | Optuna 5.0 ms |")?;
        writeln!(md, "|---|---|---|---|---|---|")?;
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
    }
    let mut grown_json = serde_json::Map::new();
    if grown_protocol {
        if !md.is_empty() {
            writeln!(md)?;
        }
        writeln!(md, "**TPE-grown history** (Optuna's protocol). One study per configuration (seed 1) grown by the sampler itself, ask + 10 suggests + tell with the objective, to N finished trials; then {repeats} more trials timed there (median and mean of ask + 10 suggests; median of the tell after them).\n")?;
        writeln!(md, "| config | trials in history | ask + 10 suggests: median ms | ask + 10 suggests: mean ms | tell: median ms |")?;
        writeln!(md, "|---|---|---|---|---|")?;
        let configs = [
            ("default", TpeConfig::seeded(1)),
            (
                "optuna",
                TpeConfig {
                    seed: Some(1),
                    ..TpeConfig::optuna()
                },
            ),
        ];
        let mut hashes = Vec::new();
        for (name, cfg) in configs {
            let (grown_rows, hash) = grown(cfg.clone(), &sizes, repeats)?;
            let mut jrows = Vec::new();
            for r in &grown_rows {
                writeln!(
                    md,
                    "| {name} | {} | {:.3} | {:.3} | {:.3} |",
                    r.n, r.median, r.mean, r.tell_median
                )?;
                jrows.push(json!({
                    "n_trials": r.n, "ask_suggests_median_ms": r.median,
                    "ask_suggests_mean_ms": r.mean, "tell_median_ms": r.tell_median,
                }));
            }
            grown_json.insert(
                name.into(),
                json!({"config": cfg, "rows": jrows, "proposals_fnv1a": format!("{hash:016x}")}),
            );
            hashes.push(format!("{name} `{hash:016x}`"));
        }
        writeln!(
            md,
            "\nFNV-1a hash of every proposal's bits (seed 1, these sizes and repeats): {}.",
            hashes.join(", ")
        )?;
    }
    print!("{md}");
    let out = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("bench/results");
    std::fs::create_dir_all(&out)?;
    let meta = json!({
        "command": "cargo bench -p hpo-core --bench tpe_overhead", "repeats": repeats, "clock": "CLOCK_THREAD_CPUTIME_ID",
        "config": TpeConfig::default(), "targets_ms": {"2000": 0.5, "5000": 1.0},
        "loadavg_start": load_start, "loadavg_end": load(),
    });
    std::fs::write(
        out.join("tpe_overhead.json"),
        serde_json::to_string_pretty(&json!({
            "meta": meta,
            "random_history": {"protocol": "random start-up history; sampler alone and ask + 10 suggests + tell", "rows": rows},
            "tpe_grown": {"protocol": "study grown by the sampler itself (ask + 10 suggests + tell); timed: ask + 10 suggests", "configs": grown_json},
        }))?,
    )?;
    std::fs::write(out.join("tpe_overhead.md"), &md)?;
    Ok(())
}
