//! The CMA-ES sampler on whole studies: it reaches known optima within a
//! budget, honours integer parameters, and a study resumed by a fresh
//! sampler and storage handle (a new process) continues the search from the
//! stored state instead of restarting it.

use hpo_core::storage::SqliteStorage;
use hpo_core::{CmaEsConfig, CmaEsSampler, Direction, FrozenTrial, Study, TrialError};
use std::path::PathBuf;
use std::sync::Arc;

fn study(config: CmaEsConfig, direction: Direction) -> Study {
    Study::builder()
        .direction(direction)
        .sampler(Arc::new(CmaEsSampler::with_config(config).unwrap()))
        .build()
        .unwrap()
}

fn xs(trial: &mut hpo_core::Trial, n: usize, low: f64, high: f64) -> Result<Vec<f64>, TrialError> {
    (0..n)
        .map(|i| Ok(trial.suggest_float(&format!("x{i}"), low, high)?))
        .collect()
}

fn best(study: &Study) -> f64 {
    study.best_trial().unwrap().value().unwrap()
}

#[test]
fn reaches_the_sphere_optimum_in_5d() {
    // Shifted sphere on [-5, 5]^5, optimum 0 at (1, ..., 1), four seeds each.
    // Full and separable CMA-ES: below 1e-5 in 600 trials (75 generations of
    // 8; the `cmaes` library reaches 3e-8..6e-7 there). Learning-rate
    // adaptation slows convergence on purpose on easy functions: below 1e-3
    // in 1,200 trials (`cmaes`: 3e-7..2e-5).
    for seed in 0..4 {
        for (name, config, budget, target) in [
            ("full", CmaEsConfig::seeded(seed), 600, 1e-5),
            (
                "separable",
                CmaEsConfig {
                    separable: true,
                    ..CmaEsConfig::seeded(seed)
                },
                600,
                1e-5,
            ),
            (
                "lr_adapt",
                CmaEsConfig {
                    lr_adapt: true,
                    ..CmaEsConfig::seeded(seed)
                },
                1200,
                1e-3,
            ),
        ] {
            let s = study(config, Direction::Minimize);
            s.optimize(budget, |t| -> Result<f64, TrialError> {
                Ok(xs(t, 5, -5.0, 5.0)?.iter().map(|x| (x - 1.0).powi(2)).sum())
            })
            .unwrap();
            assert!(best(&s) < target, "{name}, seed {seed}: best {}", best(&s));
        }
    }
}

#[test]
fn reaches_the_rosenbrock_optimum_in_5d() {
    // Rosenbrock on [-2, 2]^5, optimum 0 at (1, ..., 1), maximised as its
    // negative to exercise the direction; 2,500 trials. CMA-ES started at the
    // box's centre ends in the local minimum near (-1, 1, 1, 1, 1) (value
    // 3.93) in some runs, so the statement is a success rate: at least four
    // of five seeds below 1e-6.
    let reached = (0..5)
        .filter(|&seed| {
            let s = study(CmaEsConfig::seeded(seed), Direction::Maximize);
            s.optimize(2500, |t| -> Result<f64, TrialError> {
                let x = xs(t, 5, -2.0, 2.0)?;
                let f: f64 = x
                    .windows(2)
                    .map(|w| 100.0 * (w[1] - w[0] * w[0]).powi(2) + (1.0 - w[0]).powi(2))
                    .sum();
                Ok(-f)
            })
            .unwrap();
            -best(&s) < 1e-6
        })
        .count();
    assert!(
        reached >= 4,
        "only {reached} of 5 seeds reached the optimum"
    );
}

#[test]
fn integer_parameters_stay_integers_and_reach_their_optimum() {
    // Four integers in [0, 20] and a stepped float, optimum at 7 (and 0.25):
    // with margin, every seed finds it exactly within 800 trials (the
    // `cmaes` library's CMAwM on the same problem: 33 of 40 seeds within
    // 400 trials, 10 of 10 within 800).
    for seed in 0..3 {
        let config = CmaEsConfig {
            with_margin: true,
            ..CmaEsConfig::seeded(seed)
        };
        let s = study(config, Direction::Minimize);
        s.optimize(800, |t| -> Result<f64, TrialError> {
            let mut f = 0.0;
            for i in 0..4 {
                let n = t.suggest_int(&format!("n{i}"), 0, 20)?;
                f += ((n - 7) * (n - 7)) as f64;
            }
            let q = t.suggest_float_step("q", 0.0, 1.0, 0.25)?;
            Ok(f + (q - 0.25).abs())
        })
        .unwrap();
        let trials = s.trials().unwrap();
        for t in &trials {
            for i in 0..4 {
                let n = t.internal_params[&format!("n{i}")];
                assert!(n.fract() == 0.0 && (0.0..=20.0).contains(&n), "n{i}={n}");
            }
            assert!((t.internal_params["q"] * 4.0).fract() == 0.0);
        }
        assert_eq!(best(&s), 0.0, "seed {seed}");
        // The sampler stored its state under Optuna's margin keys.
        assert!(trials
            .iter()
            .any(|t| t.system_attrs.contains_key("cmawm:optimizer")));
        assert!(trials
            .iter()
            .any(|t| t.system_attrs.contains_key("x_for_tell")));
    }
}

fn temp_db(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hpo-cmaes-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("study.db")
}

fn objective(t: &mut hpo_core::Trial) -> Result<f64, TrialError> {
    let x = xs(t, 3, -3.0, 3.0)?;
    let k = t.suggest_int("k", 1, 9)?;
    Ok(x.iter().map(|v| (v - 0.5).powi(2)).sum::<f64>() + (k as f64 - 4.0).abs())
}

fn on_file(db: &PathBuf, config: &CmaEsConfig) -> Study {
    Study::builder()
        .name("cmaes")
        .storage(Arc::new(SqliteStorage::open(db).unwrap()))
        .sampler(Arc::new(CmaEsSampler::with_config(config.clone()).unwrap()))
        .direction(Direction::Minimize)
        .load_if_exists(true)
        .build()
        .unwrap()
}

fn params(trials: &[Arc<FrozenTrial>]) -> Vec<Vec<(String, u64)>> {
    trials
        .iter()
        .map(|t| {
            t.internal_params
                .iter()
                .map(|(k, v)| (k.clone(), v.to_bits()))
                .collect()
        })
        .collect()
}

#[test]
fn a_resumed_study_continues_the_search() {
    for (tag, config) in [
        ("full", CmaEsConfig::seeded(4)),
        (
            "sep",
            CmaEsConfig {
                separable: true,
                ..CmaEsConfig::seeded(4)
            },
        ),
        (
            "margin",
            CmaEsConfig {
                with_margin: true,
                ..CmaEsConfig::seeded(4)
            },
        ),
        (
            "lra",
            CmaEsConfig {
                lr_adapt: true,
                ..CmaEsConfig::seeded(4)
            },
        ),
    ] {
        // 60 trials, then a fresh sampler and storage handle for 60 more ...
        let db = temp_db(&format!("resume-{tag}"));
        on_file(&db, &config).optimize(60, objective).unwrap();
        let resumed = on_file(&db, &config);
        resumed.optimize(60, objective).unwrap();
        // ... propose exactly what one uninterrupted study of 120 does.
        let whole_db = temp_db(&format!("whole-{tag}"));
        let whole = on_file(&whole_db, &config);
        whole.optimize(120, objective).unwrap();
        let (r, w) = (resumed.trials().unwrap(), whole.trials().unwrap());
        assert_eq!(params(&r), params(&w), "{tag}: the resumed study diverged");
        // And the search went on: the resumed trials belong to later
        // generations than the first half's, none back at generation 0.
        let prefix = match tag {
            "sep" => "sepcma:",
            "margin" => "cmawm:",
            _ => "cma:",
        };
        let generation = |t: &FrozenTrial| {
            t.system_attrs
                .get(&format!("{prefix}generation"))
                .and_then(|v| v.as_u64())
        };
        let before = r[..60].iter().filter_map(|t| generation(t)).max().unwrap();
        let after: Vec<u64> = r[60..].iter().filter_map(|t| generation(t)).collect();
        assert!(before >= 3, "{tag}: only {before} generations in 60 trials");
        assert!(
            after.iter().all(|g| *g >= before),
            "{tag}: restarted: {after:?}"
        );
    }
}

#[test]
fn several_objectives_are_refused_with_a_clear_error() {
    let s = Study::builder()
        .directions([Direction::Minimize, Direction::Minimize])
        .sampler(Arc::new(
            CmaEsSampler::with_config(CmaEsConfig::seeded(1)).unwrap(),
        ))
        .build()
        .unwrap();
    let mut first = s.ask().unwrap();
    let x = first.suggest_float("x", 0.0, 1.0).unwrap();
    s.tell(first, Ok::<_, TrialError>(vec![x, 1.0 - x]))
        .unwrap();
    let e = s.ask().unwrap_err().to_string();
    assert!(e.contains("CMA-ES optimises one objective"), "{e}");
}

/// Mean distance of the trials' `(x0, x1, x2)` to `(3, 3, 3)`.
fn mean_distance_to_threes(trials: &[Arc<FrozenTrial>]) -> f64 {
    trials
        .iter()
        .map(|t| {
            (0..3)
                .map(|i| (t.internal_params[&format!("x{i}")] - 3.0).powi(2))
                .sum::<f64>()
                .sqrt()
        })
        .sum::<f64>()
        / trials.len() as f64
}

#[test]
fn a_warm_start_begins_near_the_source_studys_good_trials() {
    let f = |t: &mut hpo_core::Trial| -> Result<f64, TrialError> {
        Ok(xs(t, 3, -5.0, 5.0)?.iter().map(|x| (x - 3.0).powi(2)).sum())
    };
    // The source: 200 random trials of the same task.
    let source = Study::builder()
        .direction(Direction::Minimize)
        .sampler(Arc::new(hpo_core::RandomSampler::seeded(1)))
        .build()
        .unwrap();
    source.optimize(200, f).unwrap();
    let trials: Vec<FrozenTrial> = source
        .trials()
        .unwrap()
        .iter()
        .map(|t| (**t).clone())
        .collect();
    // Mean distance to the optimum (3, 3, 3) of the first CMA-ES generation
    // (trials 1..=7; trial 0 is the random start-up trial).
    let first_generation = |sampler: CmaEsSampler| {
        let s = Study::builder()
            .direction(Direction::Minimize)
            .sampler(Arc::new(sampler))
            .build()
            .unwrap();
        s.optimize(8, f).unwrap();
        let ts = s.trials().unwrap();
        mean_distance_to_threes(&ts[1..8])
    };
    for seed in 0..3 {
        let cold = first_generation(CmaEsSampler::with_config(CmaEsConfig::seeded(seed)).unwrap());
        let warm = first_generation(
            CmaEsSampler::with_config(CmaEsConfig::seeded(seed))
                .unwrap()
                .with_source_trials(trials.clone())
                .unwrap(),
        );
        // Cold: centred on the box's middle, 5.2 from the optimum; warm:
        // around the source's best tenth (about 2 away for 200 random trials).
        assert!(warm < cold / 2.0, "seed {seed}: warm {warm}, cold {cold}");
    }
    // Settings Optuna rejects with a warm start, and an unusable source.
    let e = |r: hpo_core::Result<CmaEsSampler>| r.unwrap_err().to_string();
    let sep = CmaEsSampler::with_config(CmaEsConfig {
        separable: true,
        ..CmaEsConfig::seeded(1)
    })
    .unwrap();
    assert!(e(sep.with_source_trials(trials.clone())).contains("turn off `separable`"));
    let sigma = CmaEsSampler::with_config(CmaEsConfig {
        sigma0: Some(0.1),
        ..CmaEsConfig::seeded(1)
    })
    .unwrap();
    assert!(e(sigma.with_source_trials(trials.clone())).contains("leave `sigma0` unset"));
    let plain = CmaEsSampler::with_config(CmaEsConfig::seeded(1)).unwrap();
    assert!(e(plain.with_source_trials(Vec::new())).contains("no source trial"));
}

#[test]
fn a_warm_start_from_the_study_itself_begins_near_its_good_trials() {
    let f = |t: &mut hpo_core::Trial| -> Result<f64, TrialError> {
        Ok(xs(t, 3, -5.0, 5.0)?.iter().map(|x| (x - 3.0).powi(2)).sum())
    };
    // 150 random start-up trials, then the first CMA-ES generation (7
    // trials); its mean distance to the optimum (3, 3, 3).
    let first_generation = |warm: bool, seed: u64| {
        let s = study(
            CmaEsConfig {
                n_startup_trials: 150,
                warm_start_from_study: warm,
                ..CmaEsConfig::seeded(seed)
            },
            Direction::Minimize,
        );
        s.optimize(157, f).unwrap();
        let ts = s.trials().unwrap();
        assert!(ts[150].system_attrs.contains_key("cma:generation"));
        mean_distance_to_threes(&ts[150..157])
    };
    for seed in 0..3 {
        let cold = first_generation(false, seed);
        let warm = first_generation(true, seed);
        // Cold: around the box's middle, 5.2 from the optimum; warm: around
        // the best tenth of the study's own random trials.
        assert!(warm < cold / 2.0, "seed {seed}: warm {warm}, cold {cold}");
    }
}
