//! One conformance suite run against every sampler: values always inside the
//! declared distribution and the narrowed support, seeded reproducibility,
//! conditional search spaces and every distribution kind.

use hpo_core::{
    AutoConfig, AutoSampler, CategoricalDistribution, CmaEsConfig, CmaEsSampler, Direction,
    FloatDistribution, GpConfig, GpSampler, GridSampler, IntDistribution, ParamValue, QmcConfig,
    QmcKind, QmcSampler, RandomSampler, Sampler, Study, Support, TpeConfig, TpeSampler, TrialError,
    TrialState,
};
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the sampler under test can be asked.
#[derive(Clone, Copy)]
struct Caps {
    /// Any parameter, any distribution, narrowed supports, conditional parameters.
    general: bool,
}

/// The objective: every distribution kind, narrowed supports and a
/// conditional branch; checks every value against its distribution and support.
fn general_objective(trial: &mut hpo_core::Trial) -> Result<f64, TrialError> {
    let x = trial.suggest_float("x", -5.0, 5.0)?;
    let lr = trial.suggest_float_log("lr", 1e-5, 1.0)?;
    let q = trial.suggest_float_step("q", 0.0, 1.0, 0.125)?;
    let n = trial.suggest_int("n", 1, 10)?;
    let units = trial.suggest_int_log("units", 1, 1024)?;
    let batch = trial.suggest_int_step("batch", 8, 128, 8)?;
    let model = trial.suggest_categorical("model", &["small", "base", "large"])?;
    // A constraint narrows the batch and the length for the large model.
    let (max_len, support) = if model == "large" {
        (256.0, Support::range(64.0, 256.0))
    } else {
        (512.0, Support::Full)
    };
    let len = trial
        .suggest_within("len", IntDistribution::stepped(64, 512, 64)?, &support)?
        .as_i64()
        .ok_or_else(|| TrialError::failed("len is not an int"))?;
    let opt = trial.suggest_within(
        "opt",
        CategoricalDistribution::new(["adam", "sgd", "lion", "adamw"])?,
        &if model == "small" {
            Support::choices([1, 3])
        } else {
            Support::Full
        },
    )?;
    let drop = trial
        .suggest_within(
            "drop",
            FloatDistribution::new(0.0, 0.5)?,
            &Support::range(0.1, 0.2),
        )?
        .as_f64()
        .ok_or_else(|| TrialError::failed("drop is not a float"))?;
    // Conditional parameters.
    let extra = if model == "small" {
        trial.suggest_float("small_only", 0.0, 1.0)?
    } else {
        trial.suggest_int("big_only", 0, 3)? as f64
    };
    let ok = (-5.0..=5.0).contains(&x)
        && (1e-5..=1.0).contains(&lr)
        && (q * 8.0).fract() == 0.0
        && (1..=10).contains(&n)
        && (1..=1024).contains(&units)
        && batch % 8 == 0
        && (64..=512).contains(&len)
        && len % 64 == 0
        && (len as f64) <= max_len
        && (0.1..=0.2).contains(&drop)
        && (model != "small"
            || matches!(
                opt.as_choice().and_then(|c| c.as_str()),
                Some("sgd" | "adamw")
            ));
    if !ok {
        return Err(TrialError::failed(format!(
            "value outside its support: x={x} lr={lr} q={q} n={n} units={units} batch={batch} len={len} drop={drop} opt={opt}"
        )));
    }
    Ok((x - 1.0).powi(2) + lr.log10().abs() + q + n as f64 / 10.0 + extra + drop)
}

/// Only the grid's parameters, with the grid's values.
fn grid_objective(trial: &mut hpo_core::Trial) -> Result<f64, TrialError> {
    let x = trial.suggest_float("x", 0.0, 1.0)?;
    let n = trial.suggest_int("n", 1, 4)?;
    let c = trial.suggest_categorical("c", &["a", "b"])?;
    Ok(x + n as f64 + if c == "a" { 0.0 } else { 1.0 })
}

fn run(
    make: &dyn Fn(u64) -> Box<dyn Sampler>,
    caps: Caps,
    seed: u64,
    n: usize,
    jobs: usize,
) -> Vec<Arc<hpo_core::FrozenTrial>> {
    let study = Study::builder()
        .direction(Direction::Minimize)
        .sampler(Arc::<dyn Sampler>::from(make(seed)))
        .build()
        .unwrap();
    let opts = hpo_core::Optimize::new().trials(n).jobs(jobs);
    if caps.general {
        study.optimize_with(opts, general_objective).unwrap();
    } else {
        study.optimize_with(opts, grid_objective).unwrap();
    }
    study.trials().unwrap()
}

fn conformance(make: impl Fn(u64) -> Box<dyn Sampler>, caps: Caps) {
    let n = 40;
    // Every value inside its distribution and support: no trial fails.
    let trials = run(&make, caps, 1, n, 1);
    assert_eq!(trials.len(), n);
    for t in &trials {
        assert_eq!(
            t.state,
            TrialState::Complete,
            "trial {} failed: {:?}",
            t.number,
            t.fail_reason()
        );
        for (name, x) in &t.internal_params {
            assert!(
                t.distributions[name].contains(*x),
                "{name}={x} outside {}",
                t.distributions[name]
            );
        }
    }
    if caps.general {
        // Conditional parameters appear exactly in their branch.
        for t in &trials {
            let small = t.param("model") == Some(ParamValue::Choice("small".into()));
            assert_eq!(t.internal_params.contains_key("small_only"), small);
            assert_eq!(t.internal_params.contains_key("big_only"), !small);
        }
    }
    // Seeded and sequential: reproducible.
    let params = |ts: &[Arc<hpo_core::FrozenTrial>]| {
        ts.iter()
            .map(|t| t.internal_params.clone())
            .collect::<Vec<BTreeMap<_, _>>>()
    };
    assert_eq!(params(&trials), params(&run(&make, caps, 1, n, 1)));
    // A different seed gives a different sequence.
    assert_ne!(params(&trials), params(&run(&make, caps, 2, n, 1)));
    // Rebuilt from its settings, as an executor's worker rebuilds it: the
    // same proposals.
    let config = make(1)
        .to_config()
        .expect("every sampler of hpo describes itself");
    let rebuilt = |_| -> Box<dyn Sampler> { Box::new(config.init().unwrap()) };
    assert_eq!(params(&trials), params(&run(&rebuilt, caps, 1, n, 1)));
    // Parallel workers: no failures, no lost trials.
    let par = run(&make, caps, 3, 20, 2);
    assert_eq!(par.len(), 20);
    assert!(par.iter().all(|t| t.state == TrialState::Complete));
}

const GENERAL: Caps = Caps { general: true };

/// A sampler seeded from the operating system hands on the seed it draws
/// with: rebuilt from its settings it proposes what it proposes.
#[test]
fn an_unseeded_sampler_rebuilt_from_its_settings_proposes_the_same() {
    let samplers: [Arc<dyn Sampler>; 5] = [
        Arc::new(
            TpeSampler::with_config(TpeConfig {
                n_startup_trials: 5,
                ..TpeConfig::default()
            })
            .unwrap(),
        ),
        Arc::new(RandomSampler::new()),
        Arc::new(QmcSampler::new()),
        Arc::new(CmaEsSampler::new()),
        Arc::new(GpSampler::with_config(quick_gp(None)).unwrap()),
    ];
    for original in samplers {
        let config = original.to_config().unwrap();
        let rebuilt = config.init().unwrap();
        let first = run(&|_| Box::new(Arc::clone(&original)), GENERAL, 0, 20, 1);
        let second = run(&|_| Box::new(Arc::clone(&rebuilt)), GENERAL, 0, 20, 1);
        let params = |ts: &[Arc<hpo_core::FrozenTrial>]| {
            ts.iter()
                .map(|t| t.internal_params.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(params(&first), params(&second), "{config:?}");
    }
}

/// GP settings that keep a debug-build test short.
fn quick_gp(seed: Option<u64>) -> GpConfig {
    GpConfig {
        seed,
        n_startup_trials: 5,
        n_preliminary_samples: 128,
        n_local_search: 3,
        ..GpConfig::default()
    }
}

#[test]
fn gp_sampler_conforms() {
    conformance(
        |s| Box::new(GpSampler::with_config(quick_gp(Some(s))).unwrap()),
        GENERAL,
    );
}

#[test]
fn auto_sampler_conforms() {
    // (gp_until 12: past it, with this conditional space, TPE all along;
    // the GP's share is the GP sampler's own conformance above.)
    conformance(
        |s| {
            Box::new(
                AutoSampler::with_config(AutoConfig {
                    gp_until: 12,
                    ..AutoConfig::seeded(s)
                })
                .unwrap(),
            )
        },
        GENERAL,
    );
}

#[test]
fn random_sampler_conforms() {
    conformance(|s| Box::new(RandomSampler::seeded(s)), GENERAL);
}

#[test]
fn tpe_sampler_conforms() {
    // Few start-up trials so most of the suite exercises the model.
    conformance(
        |s| {
            Box::new(
                TpeSampler::with_config(TpeConfig {
                    n_startup_trials: 5,
                    ..TpeConfig::seeded(s)
                })
                .unwrap(),
            )
        },
        GENERAL,
    );
}

#[test]
fn tpe_sampler_conforms_in_every_mode() {
    for cfg in [
        TpeConfig {
            multivariate: Some(false),
            ..TpeConfig::default()
        },
        TpeConfig {
            group: false,
            ..TpeConfig::default()
        },
        TpeConfig {
            constant_liar: false,
            ..TpeConfig::optuna()
        },
        TpeConfig {
            bandwidth: hpo_core::TpeBandwidth::Scott,
            ..TpeConfig::default()
        },
    ] {
        conformance(
            move |s| {
                Box::new(
                    TpeSampler::with_config(TpeConfig {
                        n_startup_trials: 5,
                        seed: Some(s),
                        ..cfg.clone()
                    })
                    .unwrap(),
                )
            },
            GENERAL,
        );
    }
}

#[test]
fn cmaes_sampler_conforms_in_every_variant() {
    let variants = [
        CmaEsConfig::default(),
        CmaEsConfig {
            separable: true,
            ..CmaEsConfig::default()
        },
        CmaEsConfig {
            with_margin: true,
            ..CmaEsConfig::default()
        },
        CmaEsConfig {
            lr_adapt: true,
            ..CmaEsConfig::default()
        },
        // A small population restarting at once: exercises IPOP restarts.
        CmaEsConfig {
            ipop: true,
            popsize: Some(2),
            ..CmaEsConfig::default()
        },
        // Warm-started from the study's own start-up trials.
        CmaEsConfig {
            warm_start_from_study: true,
            n_startup_trials: 5,
            with_margin: true,
            ..CmaEsConfig::default()
        },
    ];
    for cfg in variants {
        conformance(
            move |s| {
                Box::new(
                    CmaEsSampler::with_config(CmaEsConfig {
                        seed: Some(s),
                        ..cfg.clone()
                    })
                    .unwrap(),
                )
            },
            GENERAL,
        );
    }
}

#[test]
fn qmc_sampler_conforms() {
    for kind in [QmcKind::Sobol, QmcKind::Halton] {
        conformance(
            move |s| {
                Box::new(QmcSampler::with_config(QmcConfig {
                    kind,
                    ..QmcConfig::seeded(s)
                }))
            },
            GENERAL,
        );
    }
}

#[test]
fn grid_sampler_conforms_on_its_grid() {
    let grid = || {
        vec![
            (
                "x",
                vec![
                    ParamValue::Float(0.0),
                    ParamValue::Float(0.5),
                    ParamValue::Float(1.0),
                ],
            ),
            (
                "n",
                vec![ParamValue::Int(1), ParamValue::Int(2), ParamValue::Int(4)],
            ),
            (
                "c",
                vec![
                    ParamValue::Choice("a".into()),
                    ParamValue::Choice("b".into()),
                ],
            ),
        ]
    };
    conformance(
        |s| Box::new(GridSampler::new(grid(), s).unwrap()),
        Caps { general: false },
    );
}
