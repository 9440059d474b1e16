//! The storage conformance suite: the [`Storage`] contract as executable checks.
//!
//! Every storage runs the same suite (as Optuna's `optuna/testing/storages.py`
//! does), so a property proved for one holds for all. Each property is a
//! public function taking a factory of fresh, empty storages; [`run_all`] runs
//! them all, and [`storage_conformance_tests!`](crate::storage_conformance_tests)
//! generates one `#[test]` per property:
//!
//! ```ignore
//! hpo_core::storage_conformance_tests!(in_memory, hpo_core::InMemoryStorage::new);
//! ```
//!
//! The checks panic on violation (they are test code).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::Storage;
use crate::direction::Direction;
use crate::distribution::{
    CategoricalDistribution, Choice, Distribution, FloatDistribution, IntDistribution,
};
use crate::trial::FIXED_PARAMS_ATTR;
use crate::trial::{FrozenTrial, TrialSnapshot, TrialState};
use crate::Error;
use serde_json::json;
use std::collections::BTreeSet;
use std::time::Duration;

/// Runs every property against storages made by `make`.
pub fn run_all<S: Storage>(make: impl Fn() -> S) {
    studies_are_created_found_and_deleted(&make);
    study_attributes_round_trip(&make);
    trial_numbers_are_contiguous_under_threads(&make);
    waiting_trials_are_claimed_exactly_once(&make);
    finished_trials_are_immutable(&make);
    trial_attributes_round_trip(&make);
    intermediate_values_round_trip(&make);
    non_finite_values_round_trip(&make);
    distributions_round_trip(&make);
    enqueued_trials_keep_fixed_params(&make);
    templates_are_copied(&make);
    reads_see_running_trials_change(&make);
    heartbeats_mark_stale_trials(&make);
    start_trial_claims_or_creates(&make);
    stale_trials_fail_with_their_retry(&make);
    unknown_ids_are_errors(&make);
    snapshots_match_trials(&make);
    snapshots_share_finished_trials(&make);
}

/// Generates one `#[test]` per conformance property for a storage factory.
///
/// With `guard:`, each test first evaluates the guard (an `Option`); `None`
/// skips the test (the guard explains why), and the factory is called with
/// a reference to the guard's value (for example a test database dropped
/// when the test ends):
///
/// ```ignore
/// hpo_core::storage_conformance_tests!(postgres, |db: &TestDb| db.storage(), guard: TestDb::create());
/// ```
#[macro_export]
macro_rules! storage_conformance_tests {
    ($module:ident, $make:expr, guard: $guard:expr) => {
        $crate::storage_conformance_tests!(@module $module, $guard, $make);
    };
    ($module:ident, $make:expr) => {
        $crate::storage_conformance_tests!(@module $module, ::core::option::Option::Some(()), |_: &()| ($make)());
    };
    (@module $module:ident, $guard:expr, $make:expr) => {
        mod $module {
            #[allow(unused_imports)]
            use super::*;
            $crate::storage_conformance_tests!(@tests $guard, $make;
                studies_are_created_found_and_deleted,
                study_attributes_round_trip,
                trial_numbers_are_contiguous_under_threads,
                waiting_trials_are_claimed_exactly_once,
                finished_trials_are_immutable,
                trial_attributes_round_trip,
                intermediate_values_round_trip,
                non_finite_values_round_trip,
                distributions_round_trip,
                enqueued_trials_keep_fixed_params,
                templates_are_copied,
                reads_see_running_trials_change,
                heartbeats_mark_stale_trials,
                start_trial_claims_or_creates,
                stale_trials_fail_with_their_retry,
                unknown_ids_are_errors,
                snapshots_match_trials,
                snapshots_share_finished_trials);
        }
    };
    (@tests $guard:expr, $make:expr; $($name:ident),*) => {
        $(
            #[test]
            fn $name() {
                let ::core::option::Option::Some(guard) = $guard else { return };
                let make = $make;
                $crate::storage::conformance::$name(&|| make(&guard));
            }
        )*
    };
}

fn float(low: f64, high: f64) -> Distribution {
    Distribution::Float(FloatDistribution::new(low, high).unwrap())
}

fn finish<S: Storage>(s: &S, id: u64, value: f64) -> FrozenTrial {
    (*s.finish_trial(id, TrialState::Complete, Some(&[value]), &[])
        .unwrap())
    .clone()
}

/// Studies: create, find by name, list, refuse a duplicate name, delete.
pub fn studies_are_created_found_and_deleted<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    assert!(s.find_study("a").unwrap().is_none());
    let a = s.create_study("a", &[Direction::Minimize]).unwrap();
    let b = s
        .create_study("b", &[Direction::Minimize, Direction::Maximize])
        .unwrap();
    assert_ne!(a, b);
    assert!(
        matches!(s.create_study("a", &[Direction::Maximize]), Err(Error::StudyExists(n)) if n == "a")
    );
    let found = s.find_study("b").unwrap().unwrap();
    assert_eq!(found.id, b);
    assert_eq!(found.name, "b");
    assert_eq!(
        found.directions,
        vec![Direction::Minimize, Direction::Maximize]
    );
    let names: Vec<String> = s.studies().unwrap().into_iter().map(|st| st.name).collect();
    assert_eq!(names, vec!["a".to_owned(), "b".to_owned()]);
    let t = s.create_trial(a, None).unwrap();
    finish(&s, t.id, 1.0);
    s.delete_study(a).unwrap();
    assert!(s.find_study("a").unwrap().is_none());
    assert!(s.find_study("b").unwrap().is_some());
    assert!(matches!(s.delete_study(a), Err(Error::StudyIdNotFound(_))));
    // The name is free again.
    let a2 = s.create_study("a", &[Direction::Maximize]).unwrap();
    assert!(s.trials(a2).unwrap().is_empty());
    assert_eq!(
        s.find_study("a").unwrap().unwrap().directions,
        vec![Direction::Maximize]
    );
}

/// Study user and system attributes: JSON values, overwritten by key.
pub fn study_attributes_round_trip<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    s.set_study_user_attr(id, "owner", &json!("bench")).unwrap();
    s.set_study_user_attr(id, "tags", &json!(["ref", 1, 2.5, null]))
        .unwrap();
    s.set_study_user_attr(id, "owner", &json!("me")).unwrap();
    s.set_study_system_attr(id, "study:metric_names", &json!(["loss"]))
        .unwrap();
    let user = s.study_user_attrs(id).unwrap();
    assert_eq!(user.len(), 2);
    assert_eq!(user["owner"], json!("me"));
    assert_eq!(user["tags"], json!(["ref", 1, 2.5, null]));
    assert_eq!(
        s.study_system_attrs(id).unwrap()["study:metric_names"],
        json!(["loss"])
    );
}

/// Trial numbers are unique and contiguous per study with several threads
/// creating trials in two studies at once.
pub fn trial_numbers_are_contiguous_under_threads<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let a = s.create_study("a", &[Direction::Minimize]).unwrap();
    let b = s.create_study("b", &[Direction::Minimize]).unwrap();
    std::thread::scope(|scope| {
        for w in 0..4u64 {
            let s = &s;
            scope.spawn(move || {
                for i in 0..25u64 {
                    let study = if (w + i) % 2 == 0 { a } else { b };
                    let t = s.create_trial(study, None).unwrap();
                    finish(s, t.id, (w * 100 + i) as f64);
                }
            });
        }
    });
    let mut ids = BTreeSet::new();
    for study in [a, b] {
        let trials = s.trials(study).unwrap();
        assert_eq!(trials.len(), 50);
        for (i, t) in trials.iter().enumerate() {
            assert_eq!(t.number, i as u64, "numbers must be 0..n in order");
            assert_eq!(t.state, TrialState::Complete);
            assert!(ids.insert(t.id), "trial id {} used twice", t.id);
        }
    }
}

/// Each WAITING trial is claimed by exactly one of several racing workers,
/// oldest first, and becomes RUNNING with a start time.
pub fn waiting_trials_are_claimed_exactly_once<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let waiting = FrozenTrial::new(0, 0, TrialState::Waiting);
    for _ in 0..20 {
        s.create_trial(id, Some(&waiting)).unwrap();
    }
    let first = s.claim_waiting_trial(id).unwrap().unwrap();
    assert_eq!(first.number, 0, "the oldest WAITING trial is claimed first");
    assert_eq!(first.state, TrialState::Running);
    assert!(first.datetime_start.is_some());
    let claimed = std::sync::Mutex::new(vec![first.id]);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                while let Some(t) = s.claim_waiting_trial(id).unwrap() {
                    assert_eq!(t.state, TrialState::Running);
                    claimed.lock().unwrap().push(t.id);
                }
            });
        }
    });
    let claimed = claimed.into_inner().unwrap();
    let distinct: BTreeSet<_> = claimed.iter().copied().collect();
    assert_eq!(claimed.len(), 20, "every WAITING trial is claimed once");
    assert_eq!(distinct.len(), 20, "no trial is claimed twice");
    assert!(s
        .trials(id)
        .unwrap()
        .iter()
        .all(|t| t.state == TrialState::Running));
    assert!(s.claim_waiting_trial(id).unwrap().is_none());
}

/// Any write to a finished trial fails with `TrialFinished`, and the trial is unchanged.
pub fn finished_trials_are_immutable<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    for state in [TrialState::Complete, TrialState::Pruned, TrialState::Fail] {
        let t = s.create_trial(id, None).unwrap();
        let values = (state == TrialState::Complete).then_some(&[1.0][..]);
        let done = s
            .finish_trial(t.id, state, values, &[("k".into(), json!(1))])
            .unwrap();
        assert_eq!(done.state, state);
        assert!(done.datetime_complete.is_some());
        let finished = |r: crate::Result<()>| {
            assert!(
                matches!(r, Err(Error::TrialFinished { number, state: st }) if number == t.number && st == state),
                "expected TrialFinished for trial {} in state {state}, got {r:?}",
                t.number
            )
        };
        finished(s.set_trial_param(t.id, "x", 0.5, &float(0.0, 1.0)));
        finished(s.set_trial_intermediate_value(t.id, 0, 1.0));
        finished(s.set_trial_user_attr(t.id, "a", &json!(1)));
        finished(s.set_trial_system_attr(t.id, "a", &json!(1)));
        finished(
            s.finish_trial(t.id, TrialState::Complete, Some(&[2.0]), &[])
                .map(|_| ()),
        );
        finished(s.record_heartbeat(t.id));
        assert_eq!(*s.trial(t.id).unwrap(), *done);
    }
    assert!(matches!(
        s.finish_trial(
            s.create_trial(id, None).unwrap().id,
            TrialState::Running,
            None,
            &[]
        ),
        Err(Error::InvalidOperation(_))
    ));
}

/// Trial user and system attributes on RUNNING and WAITING trials.
pub fn trial_attributes_round_trip<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let t = s.create_trial(id, None).unwrap();
    s.set_trial_user_attr(t.id, "note", &json!("trial 0"))
        .unwrap();
    s.set_trial_user_attr(t.id, "nested", &json!({"a": [1, 2], "b": null}))
        .unwrap();
    s.set_trial_user_attr(t.id, "note", &json!("again"))
        .unwrap();
    s.set_trial_system_attr(t.id, "sys", &json!(1.5)).unwrap();
    let w = s
        .create_trial(id, Some(&FrozenTrial::new(0, 0, TrialState::Waiting)))
        .unwrap();
    s.set_trial_user_attr(w.id, "queued", &json!(true)).unwrap();
    let done = s
        .finish_trial(
            t.id,
            TrialState::Complete,
            Some(&[0.0]),
            &[("fin".into(), json!("x"))],
        )
        .unwrap();
    for got in [
        done,
        s.trial(t.id).unwrap(),
        s.trials(id).unwrap()[0].clone(),
    ] {
        assert_eq!(got.user_attrs.len(), 2);
        assert_eq!(got.user_attrs["note"], json!("again"));
        assert_eq!(got.user_attrs["nested"], json!({"a": [1, 2], "b": null}));
        assert_eq!(got.system_attrs["sys"], json!(1.5));
        assert_eq!(got.system_attrs["fin"], json!("x"));
    }
    assert_eq!(s.trial(w.id).unwrap().user_attrs["queued"], json!(true));
}

/// Intermediate values by step; a step written again is overwritten.
pub fn intermediate_values_round_trip<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let t = s.create_trial(id, None).unwrap();
    for step in 0..5 {
        s.set_trial_intermediate_value(t.id, step, 10.0 - step as f64)
            .unwrap();
    }
    s.set_trial_intermediate_value(t.id, 2, 0.125).unwrap();
    s.set_trial_intermediate_value(t.id, 1000, 0.5).unwrap();
    let got = s.trial(t.id).unwrap();
    let expected: Vec<(u64, f64)> = vec![
        (0, 10.0),
        (1, 9.0),
        (2, 0.125),
        (3, 7.0),
        (4, 6.0),
        (1000, 0.5),
    ];
    assert_eq!(
        got.intermediate_values
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect::<Vec<_>>(),
        expected
    );
    let done = s
        .finish_trial(t.id, TrialState::Pruned, Some(&[0.5]), &[])
        .unwrap();
    assert_eq!(done.intermediate_values.len(), 6);
    assert_eq!(s.trials(id).unwrap()[0].values, Some(vec![0.5]));
}

/// Infinite and NaN values survive as objective and intermediate values.
pub fn non_finite_values_round_trip<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s
        .create_study("s", &[Direction::Minimize, Direction::Maximize])
        .unwrap();
    let t = s.create_trial(id, None).unwrap();
    s.set_trial_intermediate_value(t.id, 0, f64::INFINITY)
        .unwrap();
    s.set_trial_intermediate_value(t.id, 1, f64::NEG_INFINITY)
        .unwrap();
    s.set_trial_intermediate_value(t.id, 2, f64::NAN).unwrap();
    s.set_trial_intermediate_value(t.id, 3, -0.0).unwrap();
    s.finish_trial(
        t.id,
        TrialState::Complete,
        Some(&[f64::INFINITY, f64::NEG_INFINITY]),
        &[],
    )
    .unwrap();
    let got = s.trials(id).unwrap()[0].clone();
    assert_eq!(got.values, Some(vec![f64::INFINITY, f64::NEG_INFINITY]));
    assert_eq!(got.intermediate_values[&0], f64::INFINITY);
    assert_eq!(got.intermediate_values[&1], f64::NEG_INFINITY);
    assert!(got.intermediate_values[&2].is_nan());
    assert_eq!(got.intermediate_values[&3], 0.0);
}

/// Every distribution kind and its internal value come back exactly.
pub fn distributions_round_trip<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let dists: Vec<(&str, Distribution, f64)> = vec![
        ("x", float(-10.0, 10.0), 0.1 + 0.2),
        (
            "x_step",
            Distribution::Float(FloatDistribution::stepped(0.0, 1.0, 0.25).unwrap()),
            0.75,
        ),
        (
            "lr",
            Distribution::Float(FloatDistribution::log(1e-5, 0.1).unwrap()),
            2.972334644335654e-05,
        ),
        (
            "n_layers",
            Distribution::Int(IntDistribution::new(1, 8).unwrap()),
            3.0,
        ),
        (
            "units",
            Distribution::Int(IntDistribution::log(16, 512).unwrap()),
            189.0,
        ),
        (
            "k_step",
            Distribution::Int(IntDistribution::stepped(0, 10, 2).unwrap()),
            6.0,
        ),
        (
            "act",
            Distribution::Categorical(
                CategoricalDistribution::new(["relu", "tanh", "gelu"]).unwrap(),
            ),
            2.0,
        ),
        (
            "mixed",
            Distribution::Categorical(
                CategoricalDistribution::new(vec![
                    Choice::Null,
                    Choice::Bool(true),
                    Choice::Int(3),
                    Choice::Float(1.5),
                    Choice::Str("s".into()),
                ])
                .unwrap(),
            ),
            4.0,
        ),
    ];
    let t = s.create_trial(id, None).unwrap();
    for (name, d, x) in &dists {
        s.set_trial_param(t.id, name, *x, d).unwrap();
    }
    assert!(matches!(
        s.set_trial_param(t.id, "bad", 11.0, &float(0.0, 1.0)),
        Err(Error::OutOfDistribution { .. })
    ));
    let running = s.trials(id).unwrap()[0].clone();
    finish(&s, t.id, 0.0);
    for got in [running, s.trials(id).unwrap()[0].clone()] {
        assert_eq!(got.internal_params.len(), dists.len());
        for (name, d, x) in &dists {
            assert_eq!(
                got.internal_params[*name].to_bits(),
                x.to_bits(),
                "value of {name}"
            );
            assert_eq!(&got.distributions[*name], d, "distribution of {name}");
        }
    }
}

/// An enqueued trial (WAITING, `fixed_params` system attribute) keeps its
/// attribute through claiming.
pub fn enqueued_trials_keep_fixed_params<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let mut tpl = FrozenTrial::new(0, 0, TrialState::Waiting);
    let fixed = json!({"x": 0.5, "lr": 0.001, "n_layers": 3, "act": "relu"});
    tpl.system_attrs
        .insert(FIXED_PARAMS_ATTR.into(), fixed.clone());
    let w = s.create_trial(id, Some(&tpl)).unwrap();
    assert_eq!(w.state, TrialState::Waiting);
    assert!(w.datetime_start.is_none());
    let stored = s.trial(w.id).unwrap();
    assert_eq!(stored.state, TrialState::Waiting);
    assert_eq!(stored.system_attrs[FIXED_PARAMS_ATTR], fixed);
    let c = s.claim_waiting_trial(id).unwrap().unwrap();
    assert_eq!(c.id, w.id);
    assert_eq!(c.system_attrs[FIXED_PARAMS_ATTR], fixed);
    let fp = c.fixed_params();
    assert_eq!(fp.len(), 4);
    let done = finish(&s, c.id, 1.0);
    assert_eq!(done.system_attrs[FIXED_PARAMS_ATTR], fixed);
}

/// A template's params, values, intermediate values and attributes are copied.
pub fn templates_are_copied<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let mut tpl = FrozenTrial::new(0, 0, TrialState::Complete);
    tpl.internal_params.insert("x".into(), 0.25);
    tpl.distributions.insert("x".into(), float(0.0, 1.0));
    tpl.values = Some(vec![3.5]);
    tpl.intermediate_values.insert(0, 4.0);
    tpl.user_attrs.insert("u".into(), json!([1, "two"]));
    tpl.system_attrs.insert("s".into(), json!({"k": 1}));
    s.create_trial(id, None).unwrap();
    let made = s.create_trial(id, Some(&tpl)).unwrap();
    assert_eq!(made.number, 1);
    let got = s.trial(made.id).unwrap();
    assert_eq!(got.state, TrialState::Complete);
    assert_eq!(got.internal_params, tpl.internal_params);
    assert_eq!(got.distributions, tpl.distributions);
    assert_eq!(got.values, tpl.values);
    assert_eq!(got.intermediate_values, tpl.intermediate_values);
    assert_eq!(got.user_attrs, tpl.user_attrs);
    assert_eq!(got.system_attrs, tpl.system_attrs);
    assert!(got.datetime_complete.is_some());
    assert!(matches!(
        s.set_trial_user_attr(made.id, "late", &json!(1)),
        Err(Error::TrialFinished { .. })
    ));
}

/// `trials` reflects writes to RUNNING trials made after an earlier read,
/// including writes through a second handle on the same storage.
pub fn reads_see_running_trials_change<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let t0 = s.create_trial(id, None).unwrap();
    finish(&s, t0.id, 2.0);
    let t1 = s.create_trial(id, None).unwrap();
    assert_eq!(s.trials(id).unwrap().len(), 2);
    s.set_trial_param(t1.id, "x", 0.5, &float(0.0, 1.0))
        .unwrap();
    s.set_trial_intermediate_value(t1.id, 0, 1.0).unwrap();
    let read = s.trials(id).unwrap();
    assert_eq!(read[1].internal_params["x"], 0.5);
    assert_eq!(read[1].intermediate_values[&0], 1.0);
    finish(&s, t1.id, 1.0);
    let t2 = s.create_trial(id, None).unwrap();
    let read = s.trials(id).unwrap();
    assert_eq!(
        read.iter().map(|t| t.number).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert_eq!(read[1].state, TrialState::Complete);
    assert_eq!(read[1].values, Some(vec![1.0]));
    assert_eq!(read[2].id, t2.id);
    assert_eq!(read[2].state, TrialState::Running);
    let one = s.trial(t1.id).unwrap();
    assert_eq!(*one, *read[1]);
}

/// RUNNING trials whose last heartbeat is older than the grace period are
/// stale, and so are RUNNING trials that never beat and started longer ago
/// than the grace period; finished trials never are.
pub fn heartbeats_mark_stale_trials<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let beating = s.create_trial(id, None).unwrap();
    let silent = s.create_trial(id, None).unwrap();
    let done = s.create_trial(id, None).unwrap();
    s.record_heartbeat(beating.id).unwrap();
    s.record_heartbeat(done.id).unwrap();
    finish(&s, done.id, 0.0);
    assert!(s
        .stale_trials(id, Duration::from_secs(3600))
        .unwrap()
        .is_empty());
    std::thread::sleep(Duration::from_millis(30));
    let stale = s.stale_trials(id, Duration::from_millis(5)).unwrap();
    // Storages without heartbeat support report nothing; those with it report
    // both RUNNING trials, in number order.
    assert!(
        stale.is_empty() || stale == vec![beating.id, silent.id],
        "stale: {stale:?}"
    );
    s.record_heartbeat(beating.id).unwrap();
    s.record_heartbeat(silent.id).unwrap();
    assert!(s
        .stale_trials(id, Duration::from_secs(3600))
        .unwrap()
        .is_empty());
}

/// `start_trial` claims the oldest WAITING trial, else creates a RUNNING one,
/// with or without a first heartbeat.
pub fn start_trial_claims_or_creates<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let fresh = s.start_trial(id, false).unwrap();
    assert_eq!((fresh.number, fresh.state), (0, TrialState::Running));
    let mut tpl = FrozenTrial::new(0, 0, TrialState::Waiting);
    tpl.user_attrs.insert("k".into(), json!(1));
    let w1 = s.create_trial(id, Some(&tpl)).unwrap();
    let w2 = s.create_trial(id, Some(&tpl)).unwrap();
    let a = s.start_trial(id, true).unwrap();
    assert_eq!(a.id, w1.id, "the oldest WAITING trial first");
    assert_eq!(a.state, TrialState::Running);
    assert!(a.datetime_start.is_some());
    assert_eq!(a.user_attrs["k"], json!(1), "claimed with its record");
    let b = s.start_trial(id, false).unwrap();
    assert_eq!(b.id, w2.id);
    let c = s.start_trial(id, true).unwrap();
    assert_eq!((c.number, c.state), (3, TrialState::Running));
    // Its heartbeat is fresh: not stale under a generous grace.
    assert!(s
        .stale_trials(id, Duration::from_secs(3600))
        .unwrap()
        .is_empty());
    s.record_heartbeat(c.id).unwrap();
    finish(&s, c.id, 1.0);
    let numbers: Vec<u64> = s.trials(id).unwrap().iter().map(|t| t.number).collect();
    assert_eq!(numbers, vec![0, 1, 2, 3]);
}

/// `fail_stale_trial` fails a RUNNING trial with its attributes and creates
/// the retry copy the callback returns; a trial no longer RUNNING is refused
/// and nothing is created.
pub fn stale_trials_fail_with_their_retry<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let t = s.create_trial(id, None).unwrap();
    s.set_trial_param(t.id, "x", 0.5, &float(0.0, 1.0)).unwrap();
    let attrs = [("why".to_owned(), json!("stale"))];
    let retry = |failed: &FrozenTrial| {
        assert_eq!(failed.state, TrialState::Fail);
        assert_eq!(failed.system_attrs["why"], json!("stale"));
        let mut copy = FrozenTrial::new(0, 0, TrialState::Waiting);
        copy.internal_params = failed.internal_params.clone();
        copy.distributions = failed.distributions.clone();
        copy.system_attrs
            .insert("retry_of".into(), json!(failed.number));
        Some(copy)
    };
    let (failed, copy) = s.fail_stale_trial(t.id, &attrs, &retry).unwrap();
    assert_eq!(failed.state, TrialState::Fail);
    assert!(failed.datetime_complete.is_some());
    assert_eq!(failed.internal_params["x"], 0.5);
    let copy = copy.unwrap();
    assert_eq!((copy.number, copy.state), (1, TrialState::Waiting));
    assert_eq!(copy.internal_params["x"], 0.5);
    let stored = s.trials(id).unwrap();
    assert_eq!(stored.len(), 2);
    assert_eq!(*stored[0], *failed);
    assert_eq!(stored[1].system_attrs["retry_of"], json!(0));
    assert_eq!(stored[1].internal_params["x"], 0.5);
    // Reaped twice (another worker was first): refused, the callback not run.
    let never = |_: &FrozenTrial| -> Option<FrozenTrial> { panic!("retry of a finished trial") };
    assert!(matches!(
        s.fail_stale_trial(t.id, &attrs, &never),
        Err(Error::TrialFinished { number: 0, .. })
    ));
    // No retry wanted: the trial is failed, nothing is created.
    let u = s.start_trial(id, false).unwrap();
    assert_eq!(u.id, copy.id, "the copy is claimable");
    let (_, none) = s.fail_stale_trial(u.id, &attrs, &|_| None).unwrap();
    assert!(none.is_none());
    assert_eq!(s.trials(id).unwrap().len(), 2);
}

/// Unknown study and trial ids are errors, not panics or empty answers.
pub fn unknown_ids_are_errors<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let missing_study = id + 1000;
    assert!(matches!(
        s.create_trial(missing_study, None),
        Err(Error::StudyIdNotFound(_))
    ));
    assert!(matches!(
        s.trials(missing_study),
        Err(Error::StudyIdNotFound(_))
    ));
    assert!(matches!(
        s.trial(987_654),
        Err(Error::TrialNotFound(987_654))
    ));
    assert!(matches!(
        s.set_trial_param(987_654, "x", 0.5, &float(0.0, 1.0)),
        Err(Error::TrialNotFound(987_654))
    ));
    assert!(matches!(
        s.finish_trial(987_654, TrialState::Complete, Some(&[1.0]), &[]),
        Err(Error::TrialNotFound(987_654))
    ));
}

/// The trials of `id` by value, from [`Storage::trials`].
fn trial_values<S: Storage>(s: &S, id: u64) -> Vec<FrozenTrial> {
    s.trials(id)
        .unwrap()
        .iter()
        .map(|t| (**t).clone())
        .collect()
}

/// The trials of a snapshot by value, checking its settled front on the way.
fn snapshot_values(snap: &TrialSnapshot) -> Vec<FrozenTrial> {
    assert!(snap.settled_len() <= snap.len());
    for (i, t) in snap.iter().enumerate() {
        assert_eq!(t.number, i as u64, "a snapshot is ordered by number");
        if i < snap.settled_len() {
            assert!(t.state.is_finished(), "settled trial {i} is {}", t.state);
        }
        assert!(std::ptr::eq(snap.get(i).unwrap(), t));
    }
    assert_eq!(snap.as_slice().len(), snap.len());
    snap.iter().map(|t| (**t).clone()).collect()
}

/// `trial_snapshot` holds the same trials as `trials` whatever the mix of
/// states and the order in which trials finish, and a snapshot never
/// changes after it was taken.
pub fn snapshots_match_trials<S: Storage>(make: &impl Fn() -> S) {
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let other = s.create_study("other", &[Direction::Maximize]).unwrap();
    assert!(s.trial_snapshot(id).unwrap().is_empty());
    let mut running = Vec::new();
    let mut taken: Vec<(TrialSnapshot, Vec<FrozenTrial>)> = Vec::new();
    for round in 0..150u64 {
        let t = s.create_trial(id, None).unwrap();
        s.set_trial_param(t.id, "x", 0.25, &float(0.0, 1.0))
            .unwrap();
        running.push(t.id);
        if round % 7 == 3 {
            let mut tpl = FrozenTrial::new(0, 0, TrialState::Waiting);
            tpl.user_attrs.insert("round".into(), json!(round));
            s.create_trial(id, Some(&tpl)).unwrap();
        }
        if round % 11 == 5 {
            if let Some(claimed) = s.claim_waiting_trial(id).unwrap() {
                running.push(claimed.id);
            }
        }
        if round % 5 == 0 {
            s.create_trial(other, None).unwrap();
        }
        // Finish out of order: the newest trial, and every third round the
        // oldest running one, which lets the settled front move on.
        if round % 2 == 0 {
            let newest = running.pop().unwrap();
            finish(&s, newest, round as f64);
        }
        if round % 3 == 0 && !running.is_empty() {
            let oldest = running.remove(0);
            s.finish_trial(oldest, TrialState::Pruned, None, &[])
                .unwrap();
        }
        let snap = s.trial_snapshot(id).unwrap();
        let values = snapshot_values(&snap);
        assert_eq!(values, trial_values(&s, id), "round {round}");
        if round % 10 == 0 {
            taken.push((snap, values));
        }
    }
    for t in running {
        finish(&s, t, 0.0);
    }
    while let Some(t) = s.claim_waiting_trial(id).unwrap() {
        finish(&s, t.id, 0.0);
    }
    let snap = s.trial_snapshot(id).unwrap();
    assert_eq!(snapshot_values(&snap), trial_values(&s, id));
    assert_eq!(
        snap.settled_len(),
        snap.len(),
        "every trial is finished, but the front stops at {:?}",
        snap.get(snap.settled_len())
    );
    assert_eq!(
        snapshot_values(&s.trial_snapshot(other).unwrap()),
        trial_values(&s, other)
    );
    for (snap, values) in taken {
        assert_eq!(
            snapshot_values(&snap),
            values,
            "a snapshot changed after it was taken"
        );
    }
}

/// Taking a snapshot after one more trial copies a bounded number of
/// trials, not the study: the finished trials are shared (the cost contract
/// of "Reads are cheap" in the [storage docs](super)).
pub fn snapshots_share_finished_trials<S: Storage>(make: &impl Fn() -> S) {
    // A bound well above one chunk of the settled front plus the running
    // trials, and well below the size of the study.
    const BOUND: usize = 100;
    let s = make();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let slow = s.create_trial(id, None).unwrap();
    for _ in 0..300 {
        let t = s.start_trial(id, false).unwrap();
        finish(&s, t.id, 1.0);
    }
    // A trial that stays RUNNING holds the front back until it finishes.
    finish(&s, slow.id, 0.0);
    let mut copied = Vec::new();
    for _ in 0..3 * BOUND {
        let held = s.trial_snapshot(id).unwrap();
        let t = s.start_trial(id, false).unwrap();
        let during = s.trial_snapshot(id).unwrap();
        finish(&s, t.id, 2.0);
        let after = s.trial_snapshot(id).unwrap();
        assert_eq!(during.len(), held.len() + 1);
        assert_eq!(after.len(), during.len());
        copied.extend([during.copied(), after.copied()]);
    }
    let worst = copied.iter().copied().max().unwrap_or_default();
    assert!(
        worst <= BOUND,
        "a snapshot of a study of {} trials copied {worst} of them; the finished front must be shared",
        s.trials(id).unwrap().len()
    );
}
