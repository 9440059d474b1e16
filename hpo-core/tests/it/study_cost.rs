//! The per-trial cost of `Study::optimize` does not grow with the study:
//! counted, not timed. A storage wrapper counts the trial records every read
//! copies (`Storage::trials` copies them all; a `TrialSnapshot` copies only
//! what it does not share, `TrialSnapshot::copied`), and the count per trial
//! late in a large study must stay under a bound that a copy of the study
//! per trial would break many times over.

use hpo_core::distribution::Distribution;
use hpo_core::storage::{SqliteStorage, StudySummary};
use hpo_core::{
    Direction, FrozenTrial, InMemoryStorage, Optimize, RandomSampler, Storage, Study, TrialError,
    TrialSnapshot, TrialState,
};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Forwards to `inner`, counting the trial records each read copies.
struct Counting<S> {
    inner: S,
    copied: AtomicUsize,
}

impl<S: Storage> Storage for Counting<S> {
    fn create_study(&self, name: &str, directions: &[Direction]) -> hpo_core::Result<u64> {
        self.inner.create_study(name, directions)
    }
    fn find_study(&self, name: &str) -> hpo_core::Result<Option<StudySummary>> {
        self.inner.find_study(name)
    }
    fn studies(&self) -> hpo_core::Result<Vec<StudySummary>> {
        self.inner.studies()
    }
    fn delete_study(&self, study_id: u64) -> hpo_core::Result<()> {
        self.inner.delete_study(study_id)
    }
    fn set_study_user_attr(&self, study_id: u64, key: &str, value: &Value) -> hpo_core::Result<()> {
        self.inner.set_study_user_attr(study_id, key, value)
    }
    fn set_study_system_attr(
        &self,
        study_id: u64,
        key: &str,
        value: &Value,
    ) -> hpo_core::Result<()> {
        self.inner.set_study_system_attr(study_id, key, value)
    }
    fn study_user_attrs(&self, study_id: u64) -> hpo_core::Result<BTreeMap<String, Value>> {
        self.inner.study_user_attrs(study_id)
    }
    fn study_system_attrs(&self, study_id: u64) -> hpo_core::Result<BTreeMap<String, Value>> {
        self.inner.study_system_attrs(study_id)
    }
    fn create_trial(
        &self,
        study_id: u64,
        template: Option<&FrozenTrial>,
    ) -> hpo_core::Result<FrozenTrial> {
        self.inner.create_trial(study_id, template)
    }
    fn claim_waiting_trial(&self, study_id: u64) -> hpo_core::Result<Option<FrozenTrial>> {
        self.inner.claim_waiting_trial(study_id)
    }
    fn start_trial(&self, study_id: u64, heartbeat: bool) -> hpo_core::Result<FrozenTrial> {
        self.inner.start_trial(study_id, heartbeat)
    }
    fn fail_stale_trial(
        &self,
        trial_id: u64,
        system_attrs: &[(String, Value)],
        retry: &dyn Fn(&FrozenTrial) -> Option<FrozenTrial>,
    ) -> hpo_core::Result<(Arc<FrozenTrial>, Option<FrozenTrial>)> {
        self.inner.fail_stale_trial(trial_id, system_attrs, retry)
    }
    fn set_trial_param(
        &self,
        trial_id: u64,
        name: &str,
        internal: f64,
        dist: &Distribution,
    ) -> hpo_core::Result<()> {
        self.inner.set_trial_param(trial_id, name, internal, dist)
    }
    fn set_trial_intermediate_value(
        &self,
        trial_id: u64,
        step: u64,
        value: f64,
    ) -> hpo_core::Result<()> {
        self.inner
            .set_trial_intermediate_value(trial_id, step, value)
    }
    fn set_trial_user_attr(&self, trial_id: u64, key: &str, value: &Value) -> hpo_core::Result<()> {
        self.inner.set_trial_user_attr(trial_id, key, value)
    }
    fn set_trial_system_attr(
        &self,
        trial_id: u64,
        key: &str,
        value: &Value,
    ) -> hpo_core::Result<()> {
        self.inner.set_trial_system_attr(trial_id, key, value)
    }
    fn finish_trial(
        &self,
        trial_id: u64,
        state: TrialState,
        values: Option<&[f64]>,
        system_attrs: &[(String, Value)],
    ) -> hpo_core::Result<Arc<FrozenTrial>> {
        self.inner
            .finish_trial(trial_id, state, values, system_attrs)
    }
    fn trial(&self, trial_id: u64) -> hpo_core::Result<Arc<FrozenTrial>> {
        self.inner.trial(trial_id)
    }
    fn trials(&self, study_id: u64) -> hpo_core::Result<Vec<Arc<FrozenTrial>>> {
        let all = self.inner.trials(study_id)?;
        self.copied.fetch_add(all.len(), Ordering::Relaxed);
        Ok(all)
    }
    fn trial_snapshot(&self, study_id: u64) -> hpo_core::Result<TrialSnapshot> {
        let snap = self.inner.trial_snapshot(study_id)?;
        self.copied.fetch_add(snap.copied(), Ordering::Relaxed);
        Ok(snap)
    }
    fn record_heartbeat(&self, trial_id: u64) -> hpo_core::Result<()> {
        self.inner.record_heartbeat(trial_id)
    }
    fn stale_trials(&self, study_id: u64, grace: Duration) -> hpo_core::Result<Vec<u64>> {
        self.inner.stale_trials(study_id, grace)
    }
}

/// An objective that reports two steps and asks the (default, median)
/// pruner after each, so every read of the study path is exercised.
fn objective(t: &mut hpo_core::Trial) -> Result<f64, TrialError> {
    let x = t.suggest_float("x", -10.0, 10.0)?;
    let k = t.suggest_int("k", 1, 4)?;
    for step in 0..2 {
        t.report(step, x * x + k as f64 + step as f64)?;
        if t.should_prune()? {
            return Err(TrialError::Pruned);
        }
    }
    Ok(x * x + k as f64)
}

/// Trial records copied per trial by the last `window` trials of a study
/// grown to `size` trials with `jobs` threads.
fn copied_per_trial<S: Storage + 'static>(
    inner: S,
    size: usize,
    window: usize,
    jobs: usize,
) -> f64 {
    let storage = Arc::new(Counting {
        inner,
        copied: AtomicUsize::new(0),
    });
    let study = Study::builder()
        .name("cost")
        .storage(storage.clone())
        .sampler(RandomSampler::seeded(7))
        .build()
        .unwrap();
    study
        .optimize_with(Optimize::new().trials(size - window).jobs(jobs), objective)
        .unwrap();
    let before = storage.copied.load(Ordering::Relaxed);
    study
        .optimize_with(Optimize::new().trials(window).jobs(jobs), objective)
        .unwrap();
    let after = storage.copied.load(Ordering::Relaxed);
    assert_eq!(study.trials().unwrap().len(), size);
    (after - before) as f64 / window as f64
}

/// Four reads per trial (its start, two `should_prune`, its end), each
/// copying at most one chunk of the settled front (64 trials) plus the
/// running trials: under 300 records, against four times the study's size
/// (12,000 here) when every read copies the study.
const BOUND: f64 = 400.0;

#[test]
fn in_memory_study_reads_do_not_copy_the_study() {
    let per_trial = copied_per_trial(InMemoryStorage::new(), 3000, 200, 1);
    assert!(
        per_trial <= BOUND,
        "{per_trial} trial records copied per trial"
    );
}

#[test]
fn in_memory_study_reads_do_not_copy_the_study_on_four_threads() {
    let per_trial = copied_per_trial(InMemoryStorage::new(), 3000, 200, 4);
    assert!(
        per_trial <= BOUND,
        "{per_trial} trial records copied per trial"
    );
}

#[test]
fn sqlite_study_reads_do_not_copy_the_study() {
    let per_trial = copied_per_trial(SqliteStorage::in_memory().unwrap(), 3000, 200, 1);
    assert!(
        per_trial <= BOUND,
        "{per_trial} trial records copied per trial"
    );
}

#[cfg(feature = "postgres")]
#[test]
fn postgres_study_reads_do_not_copy_the_study() {
    let Some(db) = crate::postgres_server::TestDb::create() else {
        return;
    };
    let per_trial = copied_per_trial(db.fresh_storage(), 1500, 100, 1);
    assert!(
        per_trial <= BOUND,
        "{per_trial} trial records copied per trial"
    );
}
