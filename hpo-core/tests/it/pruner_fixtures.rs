//! Replays learning curves recorded with Optuna's pruners
//! (`pruner_fixtures/gen_fixtures.py`) through hpo's pruners: every
//! `should_prune` answer, every final trial state and every successive-halving
//! rung record must be the one Optuna produced.

// Test helpers outside #[test] functions may unwrap too.

use hpo_core::{Direction, PrunerConfig, Study, TrialError};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Deserialize)]
struct Fixture {
    optuna_version: String,
    scenarios: Vec<Scenario>,
}

#[derive(Deserialize)]
struct Scenario {
    name: String,
    study_name: String,
    direction: String,
    pruner: PrunerConfig,
    parallel: usize,
    /// Per trial: `[step, value]` pairs, NaN as null.
    curves: Vec<Vec<(u64, Option<f64>)>>,
    decisions: Vec<Vec<bool>>,
    states: Vec<String>,
    rungs: Vec<BTreeMap<String, f64>>,
}

struct Outcome {
    decisions: Vec<Vec<bool>>,
    states: Vec<String>,
    rungs: Vec<BTreeMap<String, f64>>,
}

/// The protocol of `gen_fixtures.py::run`, with hpo.
fn replay(sc: &Scenario) -> Outcome {
    let direction = match sc.direction.as_str() {
        "minimize" => Direction::Minimize,
        _ => Direction::Maximize,
    };
    let study = Study::builder()
        .name(&sc.study_name)
        .direction(direction)
        .pruner(sc.pruner.init().unwrap())
        .build()
        .unwrap();
    let n = sc.curves.len();
    let mut decisions = vec![Vec::new(); n];
    for start in (0..n).step_by(sc.parallel) {
        let group: Vec<usize> = (start..(start + sc.parallel).min(n)).collect();
        let mut trials: BTreeMap<usize, _> = BTreeMap::new();
        for &i in &group {
            let t = study.ask().unwrap();
            assert_eq!(t.number(), i as u64);
            trials.insert(i, t);
        }
        let mut active = group;
        let mut k = 0;
        while !active.is_empty() {
            let mut still = Vec::new();
            for i in active {
                let points = &sc.curves[i];
                let Some(&(step, value)) = points.get(k) else {
                    let last = points.last().and_then(|p| p.1).unwrap_or(f64::NAN);
                    study.tell(trials.remove(&i).unwrap(), last).unwrap();
                    continue;
                };
                let t = trials.get_mut(&i).unwrap();
                t.report(step, value.unwrap_or(f64::NAN)).unwrap();
                let pruned = t.should_prune().unwrap();
                decisions[i].push(pruned);
                if pruned {
                    study
                        .tell(
                            trials.remove(&i).unwrap(),
                            Err::<f64, _>(TrialError::Pruned),
                        )
                        .unwrap();
                } else {
                    still.push(i);
                }
            }
            active = still;
            k += 1;
        }
    }
    let finished = study.trials().unwrap();
    let states = finished
        .iter()
        .map(|t| t.state.as_str().to_owned())
        .collect();
    let rungs = finished
        .iter()
        .map(|t| {
            t.system_attrs
                .iter()
                .filter(|(k, _)| k.starts_with("completed_rung_"))
                .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
                .collect()
        })
        .collect();
    Outcome {
        decisions,
        states,
        rungs,
    }
}

#[test]
fn hpo_prunes_exactly_as_optuna() {
    let text = include_str!("../pruner_fixtures/optuna_decisions.json");
    let fixture: Fixture = serde_json::from_str(text).unwrap();
    assert!(
        fixture.optuna_version.starts_with('5'),
        "{}",
        fixture.optuna_version
    );
    assert!(fixture.scenarios.len() >= 30);
    let mut checks = 0;
    for sc in &fixture.scenarios {
        let got = replay(sc);
        for (i, (want, got)) in sc.decisions.iter().zip(&got.decisions).enumerate() {
            if want != got {
                let first = want
                    .iter()
                    .zip(got)
                    .position(|(a, b)| a != b)
                    .unwrap_or(want.len().min(got.len()));
                panic!(
                    "{}: trial {i} differs from Optuna at check {first} (step {:?}): optuna {:?}, hpo {:?}",
                    sc.name,
                    sc.curves[i].get(first).map(|p| p.0),
                    want.get(first),
                    got.get(first)
                );
            }
            checks += want.len();
        }
        assert_eq!(got.states, sc.states, "{}: trial states", sc.name);
        assert_eq!(got.rungs, sc.rungs, "{}: completed_rung records", sc.name);
    }
    // Make sure the fixture exercised pruning at all.
    let pruned: usize = fixture
        .scenarios
        .iter()
        .map(|s| s.states.iter().filter(|s| *s == "PRUNED").count())
        .sum();
    assert!(
        checks > 10_000 && pruned > 500,
        "{checks} checks, {pruned} pruned"
    );
}

#[test]
fn fixture_covers_every_pruner_in_both_directions() {
    let fixture: Value =
        serde_json::from_str(include_str!("../pruner_fixtures/optuna_decisions.json")).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for sc in fixture["scenarios"].as_array().unwrap() {
        seen.insert((
            sc["pruner"]["kind"].as_str().unwrap().to_owned(),
            sc["direction"].as_str().unwrap().to_owned(),
        ));
    }
    for kind in [
        "nop",
        "median",
        "percentile",
        "successive_halving",
        "hyperband",
        "patient",
        "threshold",
    ] {
        for d in ["minimize", "maximize"] {
            assert!(
                seen.contains(&(kind.to_owned(), d.to_owned())),
                "{kind} {d}"
            );
        }
    }
}
