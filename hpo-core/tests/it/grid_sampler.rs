//! GridSampler: every point once, then cycling; clear errors for misuse.

// Test helpers outside #[test] functions may unwrap too.

use hpo_core::{GridSampler, ParamValue, Study, TrialError, TrialState};
use std::collections::BTreeSet;

fn grid() -> GridSampler {
    GridSampler::new(
        [
            (
                "lr",
                vec![
                    ParamValue::Float(1e-4),
                    ParamValue::Float(1e-3),
                    ParamValue::Float(1e-2),
                ],
            ),
            (
                "act",
                vec![ParamValue::from("relu"), ParamValue::from("gelu")],
            ),
        ],
        7,
    )
    .unwrap()
}

fn objective(t: &mut hpo_core::Trial) -> Result<f64, TrialError> {
    let lr = t.suggest_float_log("lr", 1e-5, 1e-1)?;
    let act = t.suggest_categorical("act", &["relu", "gelu", "tanh"])?;
    Ok(lr + if act == "gelu" { 0.0 } else { 1.0 })
}

fn points(study: &Study) -> Vec<(String, String)> {
    study
        .trials()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t.param("lr").unwrap().to_string(),
                t.param("act").unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn visits_every_grid_point_exactly_once() {
    let study = Study::builder().sampler(grid()).build().unwrap();
    study.optimize(6, objective).unwrap();
    let pts = points(&study);
    assert_eq!(pts.iter().collect::<BTreeSet<_>>().len(), 6, "{pts:?}");
    assert_eq!(
        study.best_trial().unwrap().param("act"),
        Some(ParamValue::from("gelu"))
    );
}

#[test]
fn parallel_workers_do_not_duplicate_points() {
    let study = Study::builder().sampler(grid()).build().unwrap();
    study
        .optimize_with(hpo_core::Optimize::new().trials(6).jobs(3), objective)
        .unwrap();
    let pts = points(&study);
    assert_eq!(pts.iter().collect::<BTreeSet<_>>().len(), 6, "{pts:?}");
}

#[test]
fn after_the_grid_is_exhausted_points_are_revisited_evenly() {
    let study = Study::builder().sampler(grid()).build().unwrap();
    study.optimize(12, objective).unwrap();
    let pts = points(&study);
    for p in pts.iter().collect::<BTreeSet<_>>() {
        assert_eq!(
            pts.iter().filter(|q| *q == p).count(),
            2,
            "{p:?} in {pts:?}"
        );
    }
}

#[test]
fn the_order_depends_on_the_seed_only() {
    let run = |seed| {
        let g = GridSampler::new([("k", (0..10).map(ParamValue::Int).collect())], seed).unwrap();
        let study = Study::builder().sampler(g).build().unwrap();
        study
            .optimize(10, |t| {
                t.suggest_int("k", 0, 9)
                    .map(|k| k as f64)
                    .map_err(TrialError::from)
            })
            .unwrap();
        study
            .trials()
            .unwrap()
            .iter()
            .map(|t| t.param("k").unwrap().as_i64().unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
    let mut all = run(3);
    all.sort_unstable();
    assert_eq!(all, (0..10).collect::<Vec<_>>());
}

#[test]
fn misuse_fails_the_trial_with_a_clear_reason() {
    let study = Study::builder().sampler(grid()).build().unwrap();
    study
        .optimize(2, |t| -> Result<f64, TrialError> {
            if t.number() == 0 {
                t.suggest_int("layers", 1, 4)?; // not in the grid
            } else {
                t.suggest_float("lr", 0.5, 1.0)?; // grid values outside the distribution
            }
            Ok(0.0)
        })
        .unwrap();
    let ts = study.trials().unwrap();
    assert!(ts.iter().all(|t| t.state == TrialState::Fail));
    assert!(
        ts[0]
            .fail_reason()
            .unwrap()
            .contains("`layers` is not in the grid"),
        "{:?}",
        ts[0].fail_reason()
    );
    assert!(
        ts[1]
            .fail_reason()
            .unwrap()
            .contains("outside the distribution"),
        "{:?}",
        ts[1].fail_reason()
    );
    assert!(GridSampler::new([("x", Vec::new())], 0)
        .unwrap_err()
        .to_string()
        .contains("`x` has no values"));
}

/// A trial that already holds one of the grid's parameters (enqueued here;
/// in an executor's worker, suggested by the memory estimator in the
/// coordinator) is given a point that agrees with it, and the grid is still
/// covered once.
#[test]
fn a_trial_holding_some_grid_parameters_gets_a_point_that_agrees() {
    let study = Study::builder().sampler(grid()).build().unwrap();
    for _ in 0..3 {
        study.enqueue([("act", ParamValue::from("relu"))]).unwrap();
    }
    // `act` first, so the trial holds it when the grid assigns its point.
    study
        .optimize(6, |t| -> Result<f64, TrialError> {
            let act = t.suggest_categorical("act", &["relu", "gelu", "tanh"])?;
            let lr = t.suggest_float_log("lr", 1e-5, 1e-1)?;
            Ok(lr + if act == "gelu" { 0.0 } else { 1.0 })
        })
        .unwrap();
    let trials = points(&study);
    let relu = ParamValue::from("relu").to_string();
    assert!(
        trials[..3].iter().all(|(_, act)| *act == relu),
        "{trials:?}"
    );
    let distinct: BTreeSet<_> = trials.iter().cloned().collect();
    assert_eq!(distinct.len(), 6, "{trials:?}");
}
