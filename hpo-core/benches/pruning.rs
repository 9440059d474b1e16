//! Pruning benchmark: what each pruner saves in training steps and what it
//! costs in the best final value found, on a family of noisy learning curves.
//!
//! Run: `cargo bench -p hpo-core --bench pruning` (add `-- --quick` for a
//! smoke run). Writes `bench/results/pruning.json` and
//! `bench/results/pruning.md` at the workspace root and prints the table.
//!
//! # The workload
//!
//! A trial samples `lr` log-uniformly in `[1e-4, 1e-1]` and `width`
//! uniformly in `[0, 1]`, then "trains" for `T = 100` epochs, reporting a
//! validation loss after each epoch `t = 1..=T`:
//!
//! ```text
//! u        = log10(lr)                                  in [-4, -1]
//! floor    = 0.10 + 0.08 (u + 3)^2 + 0.15 (width - 0.7)^2   best at lr = 1e-3, width = 0.7
//! rate     = 0.03 + 0.3 * 10^(0.7 (u + 1))              large lr learns fast
//! loss(t)  = floor + (1 - floor) exp(-rate t) + noise,  noise ~ N(0, 0.02^2) per epoch
//! ```
//!
//! Learning rates above 0.05 diverge after epoch 10: their loss then climbs
//! by 0.05 an epoch (a guard such as a threshold pruner catches them).
//! Large learning rates converge fast to a poor floor; the best configs
//! (lr near 1e-3) are slow starters. That is the trap of eager pruning:
//! early rungs rank the curves in the wrong order. The objective value is
//! the loss reported at epoch `T`; the *true* final loss of a config is its
//! noise-free `loss(T)`.
//!
//! Every pruner sees the same configurations in the same order (a seeded
//! random sampler, which ignores history), so differences come from pruning
//! alone. Per pruner and study seed we record the epochs trained (steps
//! reported), the share of trials pruned, the best final loss among COMPLETE
//! trials, and the true final loss of that best trial (what you would
//! actually get by retraining it; the global optimum is about 0.11).
//!
//! Starting a trial is not free (process, model and data loading, CUDA
//! context): we charge [`STARTUP`] = 2 epochs per trial, so `cost` = epochs +
//! 2 x trials. Two budgets: the same number of trials for every pruner (what
//! pruning saves), and the same cost as the unpruned study (what the saved
//! epochs buy when spent on more trials, start-ups included).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use hpo_core::{Direction, PrunerConfig, RandomSampler, Study, TrialError};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution as _, Normal};
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

const EPOCHS: u64 = 100;
const NOISE: f64 = 0.02;
/// Cost of starting a trial (process, model and data loading, CUDA context), in epochs.
const STARTUP: u64 = 2;

fn floor(lr: f64, width: f64) -> f64 {
    let u = lr.log10();
    0.10 + 0.08 * (u + 3.0).powi(2) + 0.15 * (width - 0.7).powi(2)
}

fn rate(lr: f64) -> f64 {
    0.03 + 0.3 * 10f64.powf(0.7 * (lr.log10() + 1.0))
}

/// Learning rates above this diverge after epoch 10 (the loss climbs by 0.05 an epoch).
const DIVERGES_ABOVE: f64 = 0.05;

fn true_loss(lr: f64, width: f64, t: u64) -> f64 {
    let f = floor(lr, width);
    let converging = f + (1.0 - f) * (-rate(lr) * t as f64).exp();
    if lr > DIVERGES_ABOVE && t > 10 {
        converging + 0.05 * (t - 10) as f64
    } else {
        converging
    }
}

struct Run {
    steps: u64,
    trials: usize,
    pruned: usize,
    best_final: f64,
    true_final: f64,
}

/// How long a study runs.
#[derive(Clone, Copy)]
enum Budget {
    /// A fixed number of trials.
    Trials(usize),
    /// Trials are started until this cost (epochs plus [`STARTUP`] per trial) is spent.
    Cost(u64),
}

fn run(pruner: &PrunerConfig, seed: u64, budget: Budget) -> Run {
    let study = Study::builder()
        .name(format!("pruning-bench-{seed}"))
        .direction(Direction::Minimize)
        .sampler(RandomSampler::seeded(seed))
        .pruner(pruner.init().unwrap())
        .build()
        .unwrap();
    let steps = AtomicU64::new(0);
    // True final loss per trial number.
    let truth = Arc::new(Mutex::new(Vec::new()));
    let objective = |trial: &mut hpo_core::Trial| -> Result<f64, TrialError> {
        let lr = trial.suggest_float_log("lr", 1e-4, 1e-1)?;
        let width = trial.suggest_float("width", 0.0, 1.0)?;
        truth
            .lock()
            .unwrap()
            .push((trial.number(), true_loss(lr, width, EPOCHS)));
        let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(1_000_003) ^ trial.number());
        let noise = Normal::new(0.0, NOISE).unwrap();
        let mut loss = f64::NAN;
        for epoch in 1..=EPOCHS {
            loss = true_loss(lr, width, epoch) + noise.sample(&mut rng);
            steps.fetch_add(1, Ordering::Relaxed);
            trial.report(epoch, loss)?;
            if trial.should_prune()? {
                return Err(TrialError::Pruned);
            }
        }
        Ok(loss)
    };
    match budget {
        Budget::Trials(n) => study.optimize(n, objective).unwrap(),
        Budget::Cost(c) => {
            let mut started = 0;
            while steps.load(Ordering::Relaxed) + STARTUP * started < c {
                started += 1;
                study.optimize(1, objective).unwrap();
            }
        }
    }
    let trials = study.trials().unwrap();
    let truth = truth.lock().unwrap();
    let true_of = |n: u64| {
        truth
            .iter()
            .find(|(m, _)| *m == n)
            .map(|(_, v)| *v)
            .unwrap()
    };
    let best = study.best_trial().unwrap();
    Run {
        steps: steps.load(Ordering::Relaxed),
        trials: trials.len(),
        pruned: trials
            .iter()
            .filter(|t| t.state == hpo_core::TrialState::Pruned)
            .count(),
        best_final: best.value().unwrap(),
        true_final: true_of(best.number),
    }
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len() as f64
}

fn sd(xs: &[f64]) -> f64 {
    let m = mean(xs);
    (xs.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (xs.len() as f64 - 1.0).max(1.0)).sqrt()
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (n_trials, seeds) = if quick { (30, 2u64) } else { (100, 10u64) };
    let configs: Vec<(&str, &str)> = vec![
        ("none", r#"{"kind": "nop"}"#),
        ("median (Optuna default)", r#"{"kind": "median"}"#),
        (
            "median, 10 startup, 20 warm-up",
            r#"{"kind": "median", "n_startup_trials": 10, "n_warmup_steps": 20}"#,
        ),
        (
            "percentile 25",
            r#"{"kind": "percentile", "percentile": 25.0}"#,
        ),
        (
            "successive halving (auto, rf 4)",
            r#"{"kind": "successive_halving"}"#,
        ),
        (
            "hyperband (3, 100, rf 3)",
            r#"{"kind": "hyperband", "min_resource": 3, "max_resource": 100, "reduction_factor": 3}"#,
        ),
        (
            "seed: patient 4 + hyperband (3, 100, rf 3)",
            r#"{"kind": "patient", "patience": 4, "wrapped": {"kind": "hyperband", "min_resource": 3, "max_resource": 100, "reduction_factor": 3}}"#,
        ),
        (
            "hyperband (10, 100, rf 3)",
            r#"{"kind": "hyperband", "min_resource": 10, "max_resource": 100, "reduction_factor": 3}"#,
        ),
        (
            "patient 10 + hyperband (10, 100, rf 3)",
            r#"{"kind": "patient", "patience": 10, "wrapped": {"kind": "hyperband", "min_resource": 10, "max_resource": 100, "reduction_factor": 3}}"#,
        ),
        (
            "threshold (loss > 0.9 after 10)",
            r#"{"kind": "threshold", "upper": 0.9, "n_warmup_steps": 10}"#,
        ),
    ];
    let cost_budget = n_trials as u64 * (EPOCHS + STARTUP);
    let modes = [
        (
            "same_trials",
            Budget::Trials(n_trials),
            format!("Same number of trials ({n_trials} per study)"),
        ),
        (
            "same_cost",
            Budget::Cost(cost_budget),
            format!(
                "Same compute ({cost_budget} epoch-equivalents per study incl. start-ups; \
                 trials started until it is spent)"
            ),
        ),
    ];
    let mut doc_modes = serde_json::Map::new();
    let mut md = format!(
        "Workload: `hpo-core/benches/pruning.rs` ({EPOCHS} epochs per trial, noise sd {NOISE}); \
         a trial start-up costs {STARTUP} epochs (`cost` = epochs + {STARTUP} x trials); \
         mean ± sd over {seeds} study seeds. Command: `cargo bench -p hpo-core --bench pruning`.\n"
    );
    for (key, budget, title) in &modes {
        let mut rows = Vec::new();
        let mut baseline_steps = None;
        md.push_str(&format!(
            "\n**{title}**\n\n\
             | pruner | epochs | cost | vs none | trials | pruned | best reported final loss | true final loss of best trial |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n"
        ));
        for (label, text) in &configs {
            let pruner: PrunerConfig = serde_json::from_str(text).unwrap();
            let runs: Vec<Run> = (0..seeds).map(|s| run(&pruner, s, *budget)).collect();
            let steps: Vec<f64> = runs.iter().map(|r| r.steps as f64).collect();
            let trials: Vec<f64> = runs.iter().map(|r| r.trials as f64).collect();
            let pruned: Vec<f64> = runs
                .iter()
                .map(|r| r.pruned as f64 / r.trials as f64)
                .collect();
            let best: Vec<f64> = runs.iter().map(|r| r.best_final).collect();
            let truth: Vec<f64> = runs.iter().map(|r| r.true_final).collect();
            let cost: Vec<f64> = runs
                .iter()
                .map(|r| (r.steps + STARTUP * r.trials as u64) as f64)
                .collect();
            let base = *baseline_steps.get_or_insert(mean(&cost));
            md.push_str(&format!(
                "| {label} | {:.0} | {:.0} | {:.0}% | {:.0} | {:.0}% | {:.4} ± {:.4} | {:.4} ± {:.4} |\n",
                mean(&steps),
                mean(&cost),
                100.0 * mean(&cost) / base,
                mean(&trials),
                100.0 * mean(&pruned),
                mean(&best),
                sd(&best),
                mean(&truth),
                sd(&truth),
            ));
            rows.push(json!({
                "pruner": label,
                "config": pruner,
                "mean_epochs": mean(&steps),
                "mean_cost": mean(&cost),
                "cost_vs_none": mean(&cost) / base,
                "mean_trials": mean(&trials),
                "mean_pruned_share": mean(&pruned),
                "mean_best_final": mean(&best),
                "sd_best_final": sd(&best),
                "mean_true_final_of_best": mean(&truth),
                "sd_true_final_of_best": sd(&truth),
                "per_seed": runs.iter().map(|r| json!({
                    "epochs": r.steps, "trials": r.trials, "pruned": r.pruned,
                    "best_final": r.best_final, "true_final_of_best": r.true_final,
                })).collect::<Vec<_>>(),
            }));
            eprintln!("{key}: {label} done");
        }
        doc_modes.insert((*key).to_owned(), json!({"title": title, "rows": rows}));
    }
    print!("{md}");
    let doc = json!({
        "benchmark": "pruning",
        "command": "cargo bench -p hpo-core --bench pruning",
        "workload": {
            "epochs": EPOCHS, "startup_cost_epochs": STARTUP, "n_trials": n_trials, "seeds": seeds, "noise_sd": NOISE,
            "curve": "loss(t) = floor + (1 - floor) exp(-rate t) + N(0, noise_sd^2), lr > 0.05 diverges after epoch 10; see hpo-core/benches/pruning.rs",
        },
        "modes": doc_modes,
    });
    if !quick {
        let out = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/results");
        std::fs::create_dir_all(&out).unwrap();
        std::fs::write(
            out.join("pruning.json"),
            serde_json::to_string_pretty(&doc).unwrap() + "\n",
        )
        .unwrap();
        std::fs::write(out.join("pruning.md"), md).unwrap();
    }
}
