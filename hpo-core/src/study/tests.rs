use crate::*;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

fn study() -> Study {
    Study::builder()
        .sampler(RandomSampler::seeded(1))
        .build()
        .unwrap()
}

#[test]
fn ask_tell_moves_trial_through_running_to_complete() {
    let s = study();
    let mut t = s.ask().unwrap();
    assert_eq!(t.number(), 0);
    let x = t.suggest_float("x", 0.0, 1.0).unwrap();
    assert_eq!(s.trials().unwrap()[0].state, TrialState::Running);
    let done = s.tell(t, Ok::<f64, TrialError>(x * 2.0)).unwrap();
    assert_eq!(done.state, TrialState::Complete);
    assert_eq!(done.values, Some(vec![x * 2.0]));
    assert!(done.datetime_start.unwrap() <= done.datetime_complete.unwrap());
}

#[test]
fn resuggesting_returns_the_same_value_and_conflicts_are_errors() {
    let s = study();
    let mut t = s.ask().unwrap();
    let a = t.suggest_float("x", 0.0, 1.0).unwrap();
    assert_eq!(t.suggest_float("x", 0.0, 1.0).unwrap(), a);
    let e = t.suggest_float("x", 0.0, 2.0).unwrap_err().to_string();
    assert!(e.contains("`x` was already suggested in trial 0"), "{e}");
    let c = t.suggest_categorical("act", &["relu", "gelu"]).unwrap();
    assert_eq!(t.suggest_categorical("act", &["relu", "gelu"]).unwrap(), c);
}

#[test]
fn a_panicking_objective_fails_only_its_trial() {
    let s = study();
    s.optimize(4, |t| -> Result<f64, TrialError> {
        if t.number() == 1 {
            panic!("boom in trial one");
        }
        Ok(t.number() as f64)
    })
    .unwrap();
    let trials = s.trials().unwrap();
    assert_eq!(trials.len(), 4);
    assert_eq!(trials[1].state, TrialState::Fail);
    assert_eq!(trials[1].failure(), Some(FailureKind::Panic));
    assert!(trials[1]
        .fail_reason()
        .unwrap()
        .contains("boom in trial one"));
    assert!(trials
        .iter()
        .filter(|t| t.number != 1)
        .all(|t| t.state == TrialState::Complete));
}

#[test]
fn non_finite_values_fail_the_trial_with_a_reason() {
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
        let s = study();
        s.optimize(1, |_| Ok::<f64, TrialError>(bad)).unwrap();
        let t = &s.trials().unwrap()[0];
        assert_eq!(t.state, TrialState::Fail);
        assert_eq!(t.failure(), Some(FailureKind::NonFinite));
        assert!(
            t.fail_reason().unwrap().contains("must be finite"),
            "{:?}",
            t.fail_reason()
        );
        assert!(t.values.is_none());
    }
}

#[test]
fn errors_oom_and_infeasible_are_recorded_distinctly() {
    let s = study();
    s.optimize(3, |t| -> Result<f64, TrialError> {
        match t.number() {
            0 => Err(TrialError::Oom {
                config: serde_json::json!({"batch": 48}),
                message: "CUDA out of memory".into(),
            }),
            1 => Err(TrialError::Infeasible("heavy model with batch 48".into())),
            _ => Err(std::io::Error::other("disk on fire").into()),
        }
    })
    .unwrap();
    let ts = s.trials().unwrap();
    assert_eq!(ts[0].failure(), Some(FailureKind::Oom));
    assert_eq!(
        ts[0].system_attrs["oom_config"],
        serde_json::json!({"batch": 48})
    );
    assert_eq!(ts[0].constraint_violation(), Some(1.0));
    assert_eq!(ts[1].failure(), Some(FailureKind::Infeasible));
    assert_eq!(ts[1].constraint_violation(), Some(1.0));
    assert_eq!(ts[2].failure(), Some(FailureKind::Error));
    assert_eq!(ts[2].fail_reason(), Some("disk on fire"));
    assert_eq!(ts[2].constraint_violation(), None);
    assert!(matches!(s.best_trial(), Err(Error::NoCompletedTrials(_))));
}

#[test]
fn an_empty_support_makes_the_trial_infeasible() {
    let s = study();
    s.optimize(1, |t| -> Result<f64, TrialError> {
        let d = IntDistribution::stepped(128, 512, 32)?;
        t.suggest_within("max_len", d, &Support::range(130.0, 150.0))?;
        Ok(0.0)
    })
    .unwrap();
    let t = &s.trials().unwrap()[0];
    assert_eq!(t.failure(), Some(FailureKind::Infeasible));
    assert!(t.fail_reason().unwrap().contains("max_len"));
}

#[test]
fn narrowed_support_is_sampled_but_declared_distribution_is_stored() {
    let s = study();
    let declared = IntDistribution::stepped(128, 512, 32).unwrap();
    s.optimize(30, |t| -> Result<f64, TrialError> {
        let v = t.suggest_within("max_len", declared, &Support::range(0.0, 384.0))?;
        let v = v.as_i64().unwrap();
        assert!((128..=384).contains(&v) && v % 32 == 0, "{v}");
        Ok(v as f64)
    })
    .unwrap();
    for t in s.trials().unwrap() {
        assert_eq!(t.distributions["max_len"], Distribution::Int(declared));
    }
}

#[test]
fn pruned_trials_keep_their_last_intermediate_value() {
    let s = study();
    s.optimize(1, |t| -> Result<f64, TrialError> {
        t.report(0, 0.9)?;
        t.report(1, 0.7)?;
        t.report(1, 0.1)?; // a repeated step keeps the first value
        Err(TrialError::Pruned)
    })
    .unwrap();
    let t = &s.trials().unwrap()[0];
    assert_eq!(t.state, TrialState::Pruned);
    assert_eq!(t.values, Some(vec![0.7]));
    assert_eq!(t.intermediate_values.len(), 2);
}

#[test]
fn best_trial_respects_direction_and_ties_go_to_the_first() {
    for (dir, want) in [(Direction::Minimize, 1), (Direction::Maximize, 0)] {
        let s = Study::builder().direction(dir).build().unwrap();
        let values = [5.0, 1.0, 3.0, 1.0];
        s.optimize(4, |t| Ok::<f64, TrialError>(values[t.number() as usize]))
            .unwrap();
        assert_eq!(s.best_trial().unwrap().number, want);
    }
}

#[test]
fn multi_objective_studies_have_a_pareto_front_and_no_single_best() {
    let s = Study::builder()
        .directions([Direction::Minimize, Direction::Maximize])
        .build()
        .unwrap();
    let points = [[1.0, 1.0], [2.0, 2.0], [2.0, 0.5], [0.5, 0.5]];
    s.optimize(4, |t| {
        Ok::<[f64; 2], TrialError>(points[t.number() as usize])
    })
    .unwrap();
    let front: Vec<u64> = s.best_trials().unwrap().iter().map(|t| t.number).collect();
    assert_eq!(front, vec![0, 1, 3]);
    let e = s.best_trial().unwrap_err().to_string();
    assert!(e.contains("2 objectives"), "{e}");
    // Returning one value to a two-objective study fails that trial.
    s.optimize(1, |_| Ok::<f64, TrialError>(1.0)).unwrap();
    assert_eq!(s.trials().unwrap()[4].state, TrialState::Fail);
}

#[test]
fn enqueued_params_are_used_first_and_others_are_sampled() {
    let s = study();
    let n = s
        .enqueue([
            ("x", ParamValue::Float(0.25)),
            ("act", ParamValue::from("gelu")),
        ])
        .unwrap();
    assert_eq!(n, 0);
    assert_eq!(s.trials().unwrap()[0].state, TrialState::Waiting);
    s.optimize(2, |t| -> Result<f64, TrialError> {
        let x = t.suggest_float("x", 0.0, 1.0)?;
        let act = t.suggest_categorical("act", &["relu", "gelu"])?;
        let y = t.suggest_int("y", 0, 9)?;
        if t.number() == 0 {
            assert_eq!((x, act), (0.25, "gelu"));
        }
        Ok(x + y as f64)
    })
    .unwrap();
    let ts = s.trials().unwrap();
    assert_eq!(ts.len(), 2);
    assert_eq!(ts[0].param("x"), Some(ParamValue::Float(0.25)));
    assert_eq!(
        ts[0].system_attrs["fixed_params"],
        serde_json::json!({"x": 0.25, "act": "gelu"})
    );
}

#[test]
fn enqueued_values_outside_the_distribution_are_sampled_instead() {
    let s = study();
    s.enqueue([("x", ParamValue::Float(5.0))]).unwrap();
    s.optimize(1, |t| {
        t.suggest_float("x", 0.0, 1.0).map_err(TrialError::from)
    })
    .unwrap();
    let x = s.trials().unwrap()[0].param("x").unwrap().as_f64().unwrap();
    assert!((0.0..=1.0).contains(&x));
}

#[test]
fn parallel_optimize_loses_and_duplicates_no_trial_numbers() {
    let s = study();
    let calls = AtomicUsize::new(0);
    s.optimize_with(
        Optimize::new().trials(200).jobs(4),
        |t| -> Result<f64, TrialError> {
            calls.fetch_add(1, Ordering::SeqCst);
            let x = t.suggest_float("x", -1.0, 1.0)?;
            t.report(0, x)?;
            Ok(x * x)
        },
    )
    .unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 200);
    let ts = s.trials().unwrap();
    let numbers: BTreeSet<u64> = ts.iter().map(|t| t.number).collect();
    assert_eq!(numbers, (0..200).collect());
    assert!(ts.iter().all(|t| t.state == TrialState::Complete));
}

#[test]
fn seeded_sequential_studies_are_reproducible() {
    let run = || {
        let s = study();
        s.optimize(20, |t| -> Result<f64, TrialError> {
            Ok(t.suggest_float("x", -5.0, 5.0)? + t.suggest_int("k", 0, 3)? as f64)
        })
        .unwrap();
        s.trials()
            .unwrap()
            .iter()
            .map(|t| t.internal_params.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(run(), run());
}

#[test]
fn callbacks_run_after_each_trial_and_can_stop_the_study() {
    let s = study();
    let seen = Arc::new(AtomicUsize::new(0));
    let seen2 = Arc::clone(&seen);
    s.optimize_with(
        Optimize::new().trials(100).callback(move |study, t| {
            seen2.fetch_add(1, Ordering::SeqCst);
            if t.number == 4 {
                study.stop();
            }
        }),
        |_| Ok::<f64, TrialError>(1.0),
    )
    .unwrap();
    assert_eq!(seen.load(Ordering::SeqCst), 5);
    assert_eq!(s.trials().unwrap().len(), 5);
    // A later optimize call is not affected by the earlier stop.
    s.optimize(2, |_| Ok::<f64, TrialError>(1.0)).unwrap();
    assert_eq!(s.trials().unwrap().len(), 7);
}

#[test]
fn a_timeout_alone_bounds_the_run() {
    let s = study();
    s.optimize_with(Optimize::new().timeout(Duration::from_millis(50)), |_| {
        std::thread::sleep(Duration::from_millis(5));
        Ok::<f64, TrialError>(1.0)
    })
    .unwrap();
    let n = s.trials().unwrap().len();
    assert!(n >= 1, "ran {n} trials");
}

#[test]
fn study_names_are_unique_unless_loading() {
    let storage: Arc<dyn Storage> = Arc::new(InMemoryStorage::new());
    let make = || Study::builder().name("s").storage(Arc::clone(&storage));
    let a = make().direction(Direction::Maximize).build().unwrap();
    a.optimize(1, |_| Ok::<f64, TrialError>(1.0)).unwrap();
    assert!(matches!(make().build(), Err(Error::StudyExists(n)) if n == "s"));
    let b = make().load_if_exists(true).build().unwrap();
    assert_eq!(b.directions(), &[Direction::Maximize]);
    assert_eq!(b.trials().unwrap().len(), 1);
    let e = make()
        .direction(Direction::Minimize)
        .load_if_exists(true)
        .build()
        .unwrap_err();
    assert!(matches!(e, Error::DirectionMismatch { .. }));
    let e = Study::builder()
        .name("nope")
        .storage(Arc::clone(&storage))
        .load()
        .unwrap_err();
    assert!(e.to_string().contains("no study named `nope`"), "{e}");
}

#[test]
fn attributes_are_stored() {
    let s = study();
    s.set_user_attr("owner", "team-a").unwrap();
    assert_eq!(s.user_attrs().unwrap()["owner"], "team-a");
    let mut t = s.ask().unwrap();
    t.set_user_attr("note", serde_json::json!({"a": [1, 2]}))
        .unwrap();
    let n = t.number();
    s.tell(t, Ok::<f64, TrialError>(0.0)).unwrap();
    assert_eq!(
        s.trials().unwrap()[n as usize].user_attrs["note"],
        serde_json::json!({"a": [1, 2]})
    );
}

#[test]
fn finished_trials_reject_late_writes() {
    let s = study();
    let t = s.ask().unwrap();
    let id = t.id();
    s.tell(t, Ok::<f64, TrialError>(0.0)).unwrap();
    let e = s
        .storage()
        .set_trial_intermediate_value(id, 0, 1.0)
        .unwrap_err();
    assert!(matches!(
        e,
        Error::TrialFinished {
            state: TrialState::Complete,
            ..
        }
    ));
}

#[test]
fn frozen_params_are_the_values_the_objective_saw() {
    let s = Study::builder()
        .sampler(RandomSampler::seeded(1))
        .build()
        .unwrap();
    s.optimize(3, |t| -> Result<f64, TrialError> {
        let model = t.suggest_categorical("model", &["bert", "roberta"])?;
        let layers = t.suggest_int("layers", 1, 4)?;
        Ok(layers as f64 + f64::from(model == "bert"))
    })
    .unwrap();
    for t in s.trials().unwrap() {
        let p = t.params();
        let model = p["model"].as_choice().and_then(|c| c.as_str()).unwrap();
        assert!(
            ["bert", "roberta"].contains(&model),
            "typed choice, not an index"
        );
        assert!(
            (1..=4).contains(&p["layers"].as_i64().unwrap()),
            "typed int"
        );
        // The internal form is the category index and the int as f64.
        let index = if model == "bert" { 0.0 } else { 1.0 };
        assert_eq!(t.internal_params["model"], index);
        assert_eq!(
            t.internal_params["layers"],
            p["layers"].as_i64().unwrap() as f64
        );
    }
}

#[test]
fn best_trial_is_right_across_the_settled_front_and_ties() {
    for dir in [Direction::Minimize, Direction::Maximize] {
        let s = Study::builder()
            .direction(dir)
            .sampler(RandomSampler::seeded(1))
            .build()
            .unwrap();
        // A trial that stays RUNNING for a while holds the settled front back.
        let slow = s.ask().unwrap();
        let mut slow = Some(slow);
        for i in 0..300u64 {
            let t = s.ask().unwrap();
            // Values repeat, so ties are common; some trials fail or are pruned.
            let result = match i % 13 {
                5 => Err(TrialError::Failed("no".into())),
                7 => Err(TrialError::Pruned),
                _ => Ok(((i * 37) % 11) as f64),
            };
            s.tell(t, result).unwrap();
            if i == 150 {
                s.tell(slow.take().unwrap(), Ok::<f64, TrialError>(5.0))
                    .unwrap();
            }
            let brute = super::best_of(s.trials().unwrap().iter(), dir).unwrap();
            let best = s.best_trial().unwrap();
            assert_eq!(
                (best.number, best.value()),
                (brute.number, brute.value()),
                "{dir:?} after {i}"
            );
        }
    }
}

/// A trial handed to another process keeps its joint sample: the process
/// that adopts it suggests the recorded values; a damaged record is an
/// error naming the attribute, not a silent re-draw.
#[test]
fn an_adopted_trial_suggests_the_joint_sample_recorded_at_hand_over() {
    let s = Study::builder()
        .sampler(CmaEsSampler::with_config(CmaEsConfig::seeded(3)).unwrap())
        .build()
        .unwrap();
    // CMA-ES samples jointly once a trial has completed.
    s.optimize(2, |t| -> std::result::Result<f64, TrialError> {
        Ok(t.suggest_float("x", -1.0, 1.0)? + t.suggest_float("y", -1.0, 1.0)?)
    })
    .unwrap();
    let mut t = s.ask().unwrap();
    let x = t.suggest_float("x", -1.0, 1.0).unwrap();
    t.record_relative_sample().unwrap();
    let recorded = t.frozen().system_attrs[crate::trial::RELATIVE_SAMPLE_ATTR].clone();
    assert!(recorded.get("x").is_none(), "suggested already: {recorded}");
    let drawn = recorded["y"]["value"].as_f64().unwrap();
    let id = s.hand_over(t).unwrap().id;
    let mut adopted = s.adopt(id).unwrap();
    assert_eq!(adopted.suggest_float("x", -1.0, 1.0).unwrap(), x);
    assert_eq!(adopted.suggest_float("y", -1.0, 1.0).unwrap(), drawn);

    let mut t = s.ask().unwrap();
    t.set_system_attr(crate::trial::RELATIVE_SAMPLE_ATTR, "damaged")
        .unwrap();
    let id = s.hand_over(t).unwrap().id;
    let err = s.adopt(id).unwrap_err().to_string();
    assert!(err.contains("hpo:relative_sample"), "{err}");
}
