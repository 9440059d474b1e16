//! Sample efficiency of hpo's samplers on the five problems of Optuna's
//! `bench/reference/optuna/sample_efficiency.py`, printed beside Optuna 5.0's
//! figures from `sample_efficiency_summary.json`.
//!
//! 200 trials x 10 seeds per sampler (sequential ask/tell, in-memory storage);
//! median and IQR (numpy-style linear percentiles) of the best value so far
//! after 50, 100 and 200 trials. Writes `bench/results/sample_efficiency.json`
//! and `.md`, and prints the markdown table.
//!
//! ```text
//! cargo bench --bench sample_efficiency [-- --trials 200 --seeds 10 --samplers 'tpe;tpe_independent;random']
//! ```

use anyhow::{bail, Context, Result};
use hpo::{Direction, RandomSampler, Sampler, Study, TpeConfig, TpeSampler};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::f64::consts::PI;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

const CHECKPOINTS: [usize; 3] = [50, 100, 200];

/// One problem: its search space and objective.
struct Problem {
    name: &'static str,
    optimum: f64,
    run: fn(&mut hpo::Trial) -> hpo::Result<f64>,
}

fn floats(t: &mut hpo::Trial, d: usize, lo: f64, hi: f64) -> hpo::Result<Vec<f64>> {
    (0..d)
        .map(|i| t.suggest_float(&format!("x{i}"), lo, hi))
        .collect()
}

fn branin(t: &mut hpo::Trial) -> hpo::Result<f64> {
    let x1 = t.suggest_float("x0", -5.0, 10.0)?;
    let x2 = t.suggest_float("x1", 0.0, 15.0)?;
    let (a, b, c) = (1.0, 5.1 / (4.0 * PI * PI), 5.0 / PI);
    let (r, s, tt) = (6.0, 10.0, 1.0 / (8.0 * PI));
    Ok(a * (x2 - b * x1 * x1 + c * x1 - r).powi(2) + s * (1.0 - tt) * x1.cos() + s)
}

fn hartmann6(t: &mut hpo::Trial) -> hpo::Result<f64> {
    const A: [[f64; 6]; 4] = [
        [10.0, 3.0, 17.0, 3.5, 1.7, 8.0],
        [0.05, 10.0, 17.0, 0.1, 8.0, 14.0],
        [3.0, 3.5, 1.7, 10.0, 17.0, 8.0],
        [17.0, 8.0, 0.05, 10.0, 0.1, 14.0],
    ];
    const P: [[f64; 6]; 4] = [
        [1312.0, 1696.0, 5569.0, 124.0, 8283.0, 5886.0],
        [2329.0, 4135.0, 8307.0, 3736.0, 1004.0, 9991.0],
        [2348.0, 1451.0, 3522.0, 2883.0, 3047.0, 6650.0],
        [4047.0, 8828.0, 8732.0, 5743.0, 1091.0, 381.0],
    ];
    const ALPHA: [f64; 4] = [1.0, 1.2, 3.0, 3.2];
    let x = floats(t, 6, 0.0, 1.0)?;
    let mut v = 0.0;
    for i in 0..4 {
        let s: f64 = (0..6)
            .map(|j| A[i][j] * (x[j] - 1e-4 * P[i][j]).powi(2))
            .sum();
        v -= ALPHA[i] * (-s).exp();
    }
    Ok(v)
}

fn rosenbrock(t: &mut hpo::Trial) -> hpo::Result<f64> {
    let x = floats(t, 10, -5.0, 10.0)?;
    Ok(x.windows(2)
        .map(|w| 100.0 * (w[1] - w[0] * w[0]).powi(2) + (1.0 - w[0]).powi(2))
        .sum())
}

fn styblinski_tang(t: &mut hpo::Trial) -> hpo::Result<f64> {
    let x = floats(t, 10, -5.0, 5.0)?;
    Ok(0.5
        * x.iter()
            .map(|v| v.powi(4) - 16.0 * v * v + 5.0 * v)
            .sum::<f64>())
}

fn mixed(t: &mut hpo::Trial) -> hpo::Result<f64> {
    let x = floats(t, 4, -5.0, 5.0)?;
    let lr = t.suggest_float_log("lr", 1e-4, 1.0)?;
    let k = t.suggest_int("k", 1, 20)?;
    let act = t.suggest_categorical("act", &["relu", "tanh", "sigmoid", "gelu"])?;
    let pen = match act {
        "relu" => 1.0,
        "tanh" => 0.5,
        "sigmoid" => 2.0,
        _ => 0.0,
    };
    Ok(x.iter().map(|v| (v - 0.5).powi(2)).sum::<f64>()
        + (lr.log10() + 2.0).powi(2)
        + ((k as f64 - 7.0) / 5.0).powi(2)
        + pen)
}

const PROBLEMS: [Problem; 5] = [
    Problem {
        name: "branin_2d",
        optimum: 0.397887,
        run: branin,
    },
    Problem {
        name: "hartmann6_6d",
        optimum: -3.32237,
        run: hartmann6,
    },
    Problem {
        name: "rosenbrock_10d",
        optimum: 0.0,
        run: rosenbrock,
    },
    Problem {
        name: "styblinski_tang_10d",
        optimum: -391.6617,
        run: styblinski_tang,
    },
    Problem {
        name: "mixed_7d",
        optimum: 0.0,
        run: mixed,
    },
];

/// The samplers this benchmark knows, by name.
fn make_sampler(name: &str, seed: u64) -> Result<Box<dyn Sampler>> {
    Ok(match name {
        "tpe" => Box::new(TpeSampler::seeded(seed)),
        "tpe_independent" => Box::new(TpeSampler::with_config(TpeConfig {
            multivariate: Some(false),
            ..TpeConfig::seeded(seed)
        })?),
        "tpe_optuna" => Box::new(TpeSampler::with_config(TpeConfig {
            seed: Some(seed),
            ..TpeConfig::optuna()
        })?),
        "random" => Box::new(RandomSampler::seeded(seed)),
        // `tpe{"n_ei_candidates": 64}`: TPE with settings merged over the defaults.
        spec if spec.starts_with("tpe{") => {
            let mut cfg: TpeConfig = serde_json::from_str(&spec[3..])
                .with_context(|| format!("sampler spec `{spec}`"))?;
            cfg.seed = Some(seed);
            Box::new(TpeSampler::with_config(cfg)?)
        }
        other => bail!(
            "unknown sampler `{other}` (tpe, tpe_optuna, tpe_independent, random, tpe{{json}})"
        ),
    })
}

/// Optuna's sampler with the same role.
fn optuna_name(name: &str) -> &str {
    match name {
        "tpe" | "tpe_optuna" => "tpe_default",
        other => other,
    }
}

fn run(problem: &Problem, sampler: &str, seed: u64, n_trials: usize) -> Result<Vec<f64>> {
    let study = Study::builder()
        .direction(Direction::Minimize)
        .sampler(Arc::<dyn Sampler>::from(make_sampler(sampler, seed)?))
        .build()?;
    let mut best = f64::INFINITY;
    let mut out = Vec::with_capacity(n_trials);
    for _ in 0..n_trials {
        let mut trial = study.ask()?;
        let v = (problem.run)(&mut trial)?;
        study.tell(trial, v)?;
        best = best.min(v);
        out.push(best);
    }
    Ok(out)
}

/// numpy.percentile with linear interpolation.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let (i, f) = (pos.floor() as usize, pos.fract());
    if i + 1 < sorted.len() {
        sorted[i] + f * (sorted[i + 1] - sorted[i])
    } else {
        sorted[i]
    }
}

fn stats(values: &[f64]) -> Value {
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    let (q25, med, q75) = (
        percentile(&s, 25.0),
        percentile(&s, 50.0),
        percentile(&s, 75.0),
    );
    json!({"median": med, "q25": q25, "q75": q75, "iqr": q75 - q25, "min": s[0], "max": s[s.len() - 1]})
}

fn fmt(x: f64) -> String {
    if x.abs() >= 1000.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.4}")
    }
}

fn main() -> Result<()> {
    let mut n_trials = 200usize;
    let mut n_seeds = 10u64;
    let mut samplers = "tpe;tpe_optuna;tpe_independent;random".to_owned();
    let mut problems = PROBLEMS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(",");
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--trials" => n_trials = args.next().context("--trials N")?.parse()?,
            "--seeds" => n_seeds = args.next().context("--seeds N")?.parse()?,
            "--samplers" => samplers = args.next().context("--samplers a;b")?,
            "--problems" => problems = args.next().context("--problems a,b")?,
            "--bench" => {}
            other => bail!("unknown argument `{other}`"),
        }
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let reference: Value = serde_json::from_str(
        &std::fs::read_to_string(
            root.join("bench/reference/optuna/sample_efficiency_summary.json"),
        )
        .context("reading Optuna's reference figures")?,
    )?;
    let checkpoints: Vec<usize> = CHECKPOINTS
        .iter()
        .copied()
        .filter(|c| *c <= n_trials)
        .collect();

    let mut summary: BTreeMap<String, BTreeMap<String, Value>> = BTreeMap::new();
    let mut md = String::new();
    writeln!(
        md,
        "{} trials x {} seeds; median [q25, q75] of the best value so far (minimisation).\n",
        n_trials, n_seeds
    )?;
    write!(md, "| problem | sampler |")?;
    for c in &checkpoints {
        write!(md, " hpo @{c} | Optuna @{c} |")?;
    }
    writeln!(md)?;
    write!(md, "|---|---|")?;
    for _ in &checkpoints {
        write!(md, "---|---|")?;
    }
    writeln!(md)?;
    let t0 = Instant::now();
    for p in PROBLEMS
        .iter()
        .filter(|p| problems.split(',').any(|n| n == p.name))
    {
        for s in samplers.split(';') {
            let started = Instant::now();
            let runs: Vec<Vec<f64>> = (0..n_seeds)
                .map(|seed| run(p, s, seed, n_trials))
                .collect::<Result<_>>()?;
            let mut row = BTreeMap::new();
            write!(md, "| {} (optimum {}) | {} |", p.name, fmt(p.optimum), s)?;
            for c in &checkpoints {
                let at: Vec<f64> = runs.iter().map(|r| r[c - 1]).collect();
                let st = stats(&at);
                let opt = &reference["summary"][p.name][optuna_name(s)][c.to_string()];
                let cell = |v: &Value| match (
                    v["median"].as_f64(),
                    v["q25"].as_f64(),
                    v["q75"].as_f64(),
                ) {
                    (Some(m), Some(a), Some(b)) => format!("{} [{}, {}]", fmt(m), fmt(a), fmt(b)),
                    _ => "-".to_owned(),
                };
                write!(md, " {} | {} |", cell(&st), cell(opt))?;
                row.insert(c.to_string(), st);
            }
            writeln!(md)?;
            row.insert(
                "mean_run_s".into(),
                json!(started.elapsed().as_secs_f64() / n_seeds as f64),
            );
            summary
                .entry(p.name.to_owned())
                .or_default()
                .insert(s.to_owned(), json!(row));
            eprintln!(
                "{} / {} done in {:.1}s",
                p.name,
                s,
                started.elapsed().as_secs_f64()
            );
        }
    }
    // Verdict against the targets: TPE median at or below Optuna's default TPE, and below random.
    let mut verdict = String::new();
    if samplers.split(';').any(|s| s == "tpe") {
        writeln!(verdict, "\n| problem | checkpoint | hpo TPE | Optuna TPE | hpo random | TPE <= Optuna | TPE < random |")?;
        writeln!(verdict, "|---|---|---|---|---|---|---|")?;
        for (p, rows) in &summary {
            for c in &checkpoints {
                let ours = rows
                    .get("tpe")
                    .and_then(|r| r[c.to_string()]["median"].as_f64());
                let theirs =
                    reference["summary"][p]["tpe_default"][c.to_string()]["median"].as_f64();
                let rand = rows
                    .get("random")
                    .and_then(|r| r[c.to_string()]["median"].as_f64());
                if let (Some(o), Some(t)) = (ours, theirs) {
                    writeln!(
                        verdict,
                        "| {p} | {c} | {} | {} | {} | {} | {} |",
                        fmt(o),
                        fmt(t),
                        rand.map_or("-".into(), fmt),
                        if o <= t { "yes" } else { "no" },
                        rand.map_or("-", |r| if o < r { "yes" } else { "no" }),
                    )?;
                }
            }
        }
    }
    md.push_str(&verdict);
    print!("{md}");
    let out = root.join("bench/results");
    std::fs::create_dir_all(&out)?;
    let meta = json!({
        "n_trials": n_trials, "seeds": (0..n_seeds).collect::<Vec<_>>(), "checkpoints": checkpoints,
        "samplers": samplers, "wall_s": t0.elapsed().as_secs_f64(),
        "command": "cargo bench --bench sample_efficiency",
        "reference": "bench/reference/optuna/sample_efficiency_summary.json (Optuna 5.0.0)",
    });
    std::fs::write(
        out.join("sample_efficiency.json"),
        serde_json::to_string_pretty(&json!({"meta": meta, "summary": summary}))?,
    )?;
    std::fs::write(out.join("sample_efficiency.md"), &md)?;
    Ok(())
}
