//! Pruners inside a study: what gets stored, and what samplers see.

// Test helpers outside #[test] functions may unwrap too.

use hpo_core::distribution::Support;
use hpo_core::{
    Direction, Distribution, FrozenTrial, HyperbandConfig, Pruner, RandomSampler, Resource,
    Sampler, Study, StudyView, TrialError, TrialState,
};
use std::sync::{Arc, Mutex};

/// Curve of trial `x`: `x + 1 / (step + 1)`; small `x` is better.
fn objective(trial: &mut hpo_core::Trial) -> Result<f64, TrialError> {
    let x = trial.suggest_float("x", 0.0, 1.0)?;
    let mut last = f64::NAN;
    for step in 0..30 {
        last = x + 1.0 / (step as f64 + 1.0);
        trial.report(step, last)?;
        if trial.should_prune()? {
            return Err(TrialError::Pruned);
        }
    }
    Ok(last)
}

#[test]
fn pruned_trials_store_last_value_and_rung_records() -> hpo_core::Result<()> {
    let hb = HyperbandConfig {
        min_resource: 1,
        max_resource: Resource::Steps(27),
        ..Default::default()
    }
    .init()?;
    let study = Study::builder()
        .name("stored")
        .direction(Direction::Minimize)
        .sampler(RandomSampler::seeded(3))
        .pruner(hb)
        .build()?;
    study.optimize(40, objective)?;
    let trials = study.trials()?;
    let pruned: Vec<_> = trials
        .iter()
        .filter(|t| t.state == TrialState::Pruned)
        .collect();
    assert!(!pruned.is_empty());
    for t in &pruned {
        // Optuna's convention: a pruned trial's value is its last intermediate value.
        assert_eq!(
            t.value(),
            t.last_intermediate().map(|(_, v)| v),
            "trial {}",
            t.number
        );
    }
    // Rung records written through `Decision::system_attrs` reach the storage.
    assert!(trials
        .iter()
        .any(|t| t.system_attrs.contains_key("completed_rung_0")));
    Ok(())
}

/// Records, for each sampled trial, the numbers of the trials its view held.
#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<(u64, Vec<u64>)>>,
    inner: Option<RandomSampler>,
}

impl Sampler for Recorder {
    fn sample_independent(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        name: &str,
        dist: &Distribution,
        support: &Support,
    ) -> hpo_core::Result<f64> {
        self.seen.lock().unwrap().push((
            trial.number,
            study.trials().iter().map(|t| t.number).collect(),
        ));
        self.inner
            .as_ref()
            .unwrap()
            .sample_independent(study, trial, name, dist, support)
    }
}

#[test]
fn samplers_see_only_the_trials_own_hyperband_bracket() -> hpo_core::Result<()> {
    let pruner = Arc::new(
        HyperbandConfig {
            min_resource: 1,
            max_resource: Resource::Steps(27),
            ..Default::default()
        }
        .init()?,
    );
    let recorder = Arc::new(Recorder {
        inner: Some(RandomSampler::seeded(1)),
        ..Default::default()
    });
    let study = Study::builder()
        .name("brackets")
        .direction(Direction::Minimize)
        .sampler(Arc::clone(&recorder))
        .pruner(pruner.clone())
        .build()?;
    study.optimize(30, objective)?;
    let all = study.trials()?;
    let full = StudyView::new("brackets", study.directions(), &all);
    let bracket = |n: u64| pruner.bracket(&full, &all[n as usize]);
    let seen = recorder.seen.lock().unwrap();
    assert_eq!(seen.len(), 30);
    let mut filtered = false;
    for (n, visible) in seen.iter() {
        assert!(
            visible.iter().all(|v| bracket(*v) == bracket(*n)),
            "trial {n} saw {visible:?}"
        );
        filtered |= (0..*n).any(|m| bracket(m) != bracket(*n));
    }
    assert!(
        filtered,
        "some earlier trial should have been in another bracket"
    );
    Ok(())
}

#[test]
fn default_pruner_is_median() -> hpo_core::Result<()> {
    // Five good trials complete; a sixth that is worse than their median at
    // step 0 is pruned at once, as under Optuna's default MedianPruner.
    let study = Study::builder()
        .name("default")
        .direction(Direction::Minimize)
        .build()?;
    for i in 0..5 {
        let mut t = study.ask()?;
        t.report(0, i as f64)?;
        assert!(!t.should_prune()?);
        study.tell(t, i as f64)?;
    }
    let mut bad = study.ask()?;
    bad.report(0, 10.0)?;
    assert!(bad.should_prune()?);
    let mut good = study.ask()?;
    good.report(0, 1.0)?;
    assert!(!good.should_prune()?);
    Ok(())
}

#[test]
fn a_trial_pruned_on_nan_has_no_value_as_in_optuna() -> hpo_core::Result<()> {
    let guard = hpo_core::ThresholdConfig {
        upper: Some(1.0),
        ..Default::default()
    }
    .init()?;
    let study = Study::builder().name("nan").pruner(guard).build()?;
    let mut t = study.ask()?;
    t.report(0, 0.5)?;
    assert!(!t.should_prune()?);
    t.report(1, f64::NAN)?;
    assert!(t.should_prune()?);
    let done = study.tell(t, Err::<f64, _>(TrialError::Pruned))?;
    assert_eq!(done.state, TrialState::Pruned);
    assert_eq!(done.values, None);
    Ok(())
}
