//! TPE behaviour on problems with a known answer, against random search, with
//! fixed seeds (deterministic, so no flaky thresholds).

use hpo_core::{
    Direction, Optimize, RandomSampler, Sampler, Study, TpeSampler, TrialError, TrialState,
};
use std::collections::BTreeSet;
use std::sync::Arc;

fn study(sampler: Box<dyn Sampler>) -> Study {
    Study::builder()
        .direction(Direction::Minimize)
        .sampler(Arc::<dyn hpo_core::Sampler>::from(sampler))
        .build()
        .unwrap()
}

const OPTIMUM: f64 = 2.3;

/// Best distance to the optimum of a 1-D quadratic after `n` trials.
fn quadratic(sampler: Box<dyn Sampler>, n: usize) -> f64 {
    let s = study(sampler);
    s.optimize(n, |t| -> Result<f64, TrialError> {
        let x = t.suggest_float("x", -10.0, 10.0)?;
        Ok((x - OPTIMUM).powi(2))
    })
    .unwrap();
    s.best_value().unwrap().sqrt()
}

#[test]
fn tpe_finds_a_known_optimum_better_than_random() {
    let seeds = 0..6u64;
    let tpe: Vec<f64> = seeds
        .clone()
        .map(|s| quadratic(Box::new(TpeSampler::seeded(s)), 60))
        .collect();
    let random: Vec<f64> = seeds
        .map(|s| quadratic(Box::new(RandomSampler::seeded(s)), 60))
        .collect();
    let wins = tpe.iter().zip(&random).filter(|(t, r)| t < r).count();
    assert!(
        wins >= 4,
        "TPE beat random in {wins} of 6 seeds: tpe {tpe:?} random {random:?}"
    );
    let median = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        (v[2] + v[3]) / 2.0
    };
    assert!(
        median(&tpe) * 3.0 < median(&random),
        "tpe {tpe:?} random {random:?}"
    );
}

/// Out-of-memory trials when `x * y > 100` (about half of the box); the optimum (4, 16) fits.
fn oom_count(sampler: Box<dyn Sampler>, n: usize) -> usize {
    let s = study(sampler);
    s.optimize(n, |t| -> Result<f64, TrialError> {
        let x = t.suggest_float("x", 1.0, 10.0)?;
        let y = t.suggest_int("batch", 1, 64)?;
        if x * y as f64 > 100.0 {
            return Err(TrialError::Oom {
                config: serde_json::json!({"x": x, "batch": y}),
                message: "too big".into(),
            });
        }
        Ok((x - 4.0).powi(2) + ((y as f64 - 16.0) / 8.0).powi(2))
    })
    .unwrap();
    s.trials()
        .unwrap()
        .iter()
        .filter(|t| t.state == TrialState::Fail)
        .count()
}

#[test]
fn tpe_learns_to_avoid_out_of_memory_regions() {
    let n = 60;
    let tpe: usize = (0..4)
        .map(|s| oom_count(Box::new(TpeSampler::seeded(s)), n))
        .sum();
    let random: usize = (0..4)
        .map(|s| oom_count(Box::new(RandomSampler::seeded(s)), n))
        .sum();
    // Random search keeps hitting the out-of-memory half of the box.
    assert!(random > 4 * n / 3, "random OOMs {random}");
    assert!(2 * tpe < random, "TPE OOMs {tpe}, random {random}");
}

#[test]
fn parallel_optimize_with_tpe_loses_no_trials() {
    let s = study(Box::new(TpeSampler::seeded(9)));
    s.optimize_with(
        Optimize::new().trials(30).jobs(2),
        |t| -> Result<f64, TrialError> {
            let x = t.suggest_float("x", -1.0, 1.0)?;
            let k = t.suggest_categorical("k", &["a", "b", "c"])?;
            Ok(x * x + if k == "b" { 0.0 } else { 1.0 })
        },
    )
    .unwrap();
    let trials = s.trials().unwrap();
    assert_eq!(trials.len(), 30);
    let numbers: BTreeSet<u64> = trials.iter().map(|t| t.number).collect();
    assert_eq!(numbers, (0..30).collect());
    assert!(trials.iter().all(|t| t.state == TrialState::Complete));
    assert!(s.best_value().unwrap() < 1.0);
}

#[test]
fn one_sampler_serves_several_studies() {
    let shared: Arc<dyn Sampler> = Arc::new(TpeSampler::seeded(4));
    for (name, target) in [("a", -3.0), ("b", 3.0)] {
        let s = Study::builder()
            .name(name)
            .sampler(Arc::clone(&shared))
            .build()
            .unwrap();
        s.optimize(40, |t| -> Result<f64, TrialError> {
            let x = t.suggest_float("x", -5.0, 5.0)?;
            Ok((x - target).powi(2))
        })
        .unwrap();
        // Each study's observations are its own: both find their optimum.
        assert!(
            s.best_value().unwrap() < 0.05,
            "{name}: {}",
            s.best_value().unwrap()
        );
    }
}

#[test]
fn multi_objective_studies_sample_and_improve() {
    let s = Study::builder()
        .directions([Direction::Minimize, Direction::Minimize])
        .sampler(TpeSampler::seeded(2))
        .build()
        .unwrap();
    s.optimize(40, |t| -> Result<[f64; 2], TrialError> {
        let x = t.suggest_float("x", 0.0, 1.0)?;
        let y = t.suggest_float("y", 0.0, 1.0)?;
        Ok([x + y, (1.0 - x) + y])
    })
    .unwrap();
    let trials = s.trials().unwrap();
    assert!(trials.iter().all(|t| t.state == TrialState::Complete));
    // The Pareto front needs y near 0: TPE's later half should get closer than its random start.
    let y = |t: &Arc<hpo_core::FrozenTrial>| t.internal_params["y"];
    let early: f64 = trials[..10].iter().map(y).sum::<f64>() / 10.0;
    let late: f64 = trials[30..].iter().map(y).sum::<f64>() / 10.0;
    assert!(late < early, "mean y early {early}, late {late}");
    assert!(!s.best_trials().unwrap().is_empty());
}
