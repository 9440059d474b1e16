//! A study's budget across processes (`StudyBudget`): several handles on one
//! SQLite study, each its own storage as separate processes would have,
//! stop together at the budget, never past it.

use hpo_core::study::{StudyBudget, OVER_BUDGET_REASON};
use hpo_core::{Optimize, ParamValue, RandomSampler, Study, TrialError, TrialState};
use std::path::PathBuf;
use std::time::Duration;

fn temp_db(tag: &str) -> (PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("hpo-budget-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("study.db");
    let url = format!("sqlite:{}", db.display());
    (dir, url)
}

fn open(url: &str, seed: u64) -> Study {
    Study::builder()
        .name("budget")
        .storage_url(url)
        .sampler(RandomSampler::seeded(seed))
        .load_if_exists(true)
        .build()
        .unwrap()
}

#[test]
fn four_handles_stop_together_at_the_budget_and_failures_do_not_count() {
    let (dir, url) = temp_db("four");
    let study = open(&url, 0);
    study.set_budget(&StudyBudget::trials(30)).unwrap();
    assert_eq!(study.budget().unwrap(), Some(StudyBudget::trials(30)));
    std::thread::scope(|s| {
        for seed in 1..=4 {
            let url = url.clone();
            s.spawn(move || {
                let handle = open(&url, seed);
                let budget = handle.budget().unwrap().unwrap();
                // Far more trials than the budget: the budget stops it.
                let opts = Optimize::new().trials(1000).study_budget(budget);
                handle
                    .optimize_with(opts, |trial| {
                        let x = trial.suggest_float("x", 0.0, 1.0)?;
                        std::thread::sleep(Duration::from_millis(3));
                        if x < 0.2 {
                            return Err(TrialError::Failed("an unlucky draw".into()));
                        }
                        if x > 0.9 {
                            return Err(TrialError::Pruned);
                        }
                        Ok(x)
                    })
                    .unwrap();
            });
        }
    });
    let trials = study.trials().unwrap();
    let counted = trials
        .iter()
        .filter(|t| matches!(t.state, TrialState::Complete | TrialState::Pruned))
        .count();
    assert_eq!(counted, 30);
    let numbers: Vec<u64> = trials.iter().map(|t| t.number).collect();
    assert_eq!(numbers, (0..trials.len() as u64).collect::<Vec<_>>());
    for t in &trials {
        assert!(matches!(
            t.state,
            TrialState::Complete | TrialState::Pruned | TrialState::Fail
        ));
        // A trial given back at the budget's edge drew no parameter.
        if t.system_attrs.get("fail_reason").and_then(|v| v.as_str()) == Some(OVER_BUDGET_REASON) {
            assert!(t.params().is_empty(), "{t:?}");
        }
    }
    assert!(
        trials.iter().any(|t| t.state == TrialState::Fail),
        "the objective fails a fifth of its trials"
    );
    // Run again, the study is done: nothing starts.
    let again = open(&url, 9);
    again
        .optimize_with(
            Optimize::new().study_budget(StudyBudget::trials(30)),
            |_| Ok(0.0),
        )
        .unwrap();
    assert_eq!(again.trials().unwrap().len(), trials.len());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_deadline_in_the_past_starts_nothing_and_enqueued_trials_hold_their_slot() {
    let (dir, url) = temp_db("deadline");
    let study = open(&url, 0);
    let past = chrono::Utc::now() - chrono::TimeDelta::seconds(5);
    study
        .optimize_with(
            Optimize::new().study_budget(StudyBudget::default().until(past)),
            |_| Ok(1.0),
        )
        .unwrap();
    assert!(study.trials().unwrap().is_empty());
    // Three enqueued configurations on a budget of three: they are what
    // runs, and nothing is sampled beside them.
    for x in [0.1, 0.2, 0.3] {
        study.enqueue([("x", ParamValue::from(x))]).unwrap();
    }
    let t = study.tally().unwrap();
    assert_eq!((t.counted, t.waiting), (0, 3));
    study
        .optimize_with(
            Optimize::new().study_budget(StudyBudget::trials(3)),
            |trial| Ok(trial.suggest_float("x", 0.0, 1.0)?),
        )
        .unwrap();
    let values: Vec<f64> = study
        .trials()
        .unwrap()
        .iter()
        .filter_map(|t| t.value())
        .collect();
    assert_eq!(values, [0.1, 0.2, 0.3]);
    let _ = std::fs::remove_dir_all(dir);
}
