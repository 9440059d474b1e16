//! The objective a new user writes compiles as written: a closure ending in
//! `Ok(loss)`, with `?` inside and no type annotation. These tests are
//! mostly about compiling; each also checks that the trials ran and were
//! stored with the outcome the closure meant.

use hpo::{Direction, Optimize, RandomSampler, SearchSpace, Study, Trial, TrialError, TrialState};

#[hpo::search_space]
#[derive(Debug, Clone)]
struct Space {
    #[param(float(-1.0..=1.0))]
    x: f64,
}

fn study() -> Study {
    Study::builder()
        .direction(Direction::Minimize)
        .sampler(RandomSampler::seeded(7))
        .build()
        .unwrap()
}

fn states(study: &Study) -> Vec<TrialState> {
    study.trials().unwrap().iter().map(|t| t.state).collect()
}

#[test]
fn optimize_with_a_typed_space_and_ok() {
    let study = study();
    study
        .optimize_with(Optimize::new().trials(3), |trial| {
            let s = Space::sample(trial)?;
            Ok(s.x * s.x)
        })
        .unwrap();
    assert_eq!(states(&study), vec![TrialState::Complete; 3]);
}

#[test]
fn optimize_with_suggest_and_ok() {
    let study = study();
    let n = 3;
    study
        .optimize(n, |trial| {
            let x = trial.suggest_float("x", -1.0, 1.0)?;
            Ok(x * x)
        })
        .unwrap();
    assert_eq!(states(&study), vec![TrialState::Complete; n]);
}

#[test]
fn other_spellings_still_compile() {
    let study = study();
    // A bare value, for an objective that cannot fail.
    study.optimize(1, |_| 0.5).unwrap();
    // A named function spells the error type out.
    fn named(trial: &mut Trial) -> Result<f64, TrialError> {
        Ok(trial.suggest_float("x", -1.0, 1.0)?.abs())
    }
    study.optimize(1, named).unwrap();
    // A function with an error type of its own, wrapped so `?` converts it.
    fn parses(trial: &mut Trial) -> Result<f64, std::num::ParseFloatError> {
        let _ = trial;
        "0.25".parse()
    }
    study.optimize(1, |trial| Ok(parses(trial)?)).unwrap();
    // An early return of an outcome, and `?` on a std error (a FAIL trial).
    study
        .optimize(1, |trial| {
            let x = trial.suggest_float("x", -1.0, 1.0)?;
            if x > 2.0 {
                return Err(TrialError::Pruned);
            }
            let y: f64 = "not a number".parse()?;
            Ok(x + y)
        })
        .unwrap();
    // `tell` infers the same way.
    let trial = study.ask().unwrap();
    study.tell(trial, Ok(0.75)).unwrap();
    assert_eq!(
        states(&study),
        [
            [TrialState::Complete; 3].as_slice(),
            &[TrialState::Fail],
            &[TrialState::Complete]
        ]
        .concat()
    );
}

#[test]
fn several_objectives_infer_too() {
    let study = Study::builder()
        .directions([Direction::Minimize, Direction::Maximize])
        .sampler(RandomSampler::seeded(7))
        .build()
        .unwrap();
    study
        .optimize(2, |trial| {
            let x = trial.suggest_float("x", 0.0, 1.0)?;
            Ok(vec![x, 1.0 - x])
        })
        .unwrap();
    study
        .optimize(2, |trial| {
            let x = trial.suggest_float("x", 0.0, 1.0)?;
            Ok([x, 1.0 - x])
        })
        .unwrap();
    assert_eq!(states(&study), vec![TrialState::Complete; 4]);
}
