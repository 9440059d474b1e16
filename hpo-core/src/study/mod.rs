//! Studies: create or resume, ask and tell, optimize, read results.

mod budget;
mod builder;
mod heartbeat;
mod interrupt;
mod optimize;
mod pareto;
mod tracker;
mod trial;

pub(crate) use self::budget::BudgetWatch;
pub use self::budget::{BudgetStep, StudyBudget, Tally, BUDGET_ATTR, OVER_BUDGET_REASON};
pub use self::builder::StudyBuilder;
pub use self::heartbeat::{Heartbeat, RetryPolicy};
pub use self::interrupt::INTERRUPTED_RETRIES;
pub use self::optimize::{DynObjective, Limits, Optimize, TrialRunner};
pub use self::tracker::Tracker;
pub use self::trial::Trial;

use crate::direction::Direction;
use crate::view::StudyView;

use crate::distribution::ParamValue;
use crate::error::{Error, Result};
use crate::pruner::Pruner;
use crate::sampler::Sampler;
use crate::storage::Storage;
use crate::trial::{
    FailureKind, FrozenTrial, IntoTrialResult, TrialError, TrialSnapshot, TrialState,
    FIXED_PARAMS_ATTR,
};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Everything a study and its trials share.
pub(crate) struct StudyCore {
    pub(crate) name: String,
    pub(crate) id: u64,
    pub(crate) directions: Vec<Direction>,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) sampler: Arc<dyn Sampler>,
    pub(crate) pruner: Arc<dyn Pruner>,
    pub(crate) stop: AtomicBool,
    pub(crate) heartbeat: Option<Heartbeat>,
    pub(crate) retry: Option<RetryPolicy>,
    /// Heartbeat threads of this handle's running trials, by trial id.
    pub(crate) beats: Mutex<HashMap<u64, heartbeat::HeartbeatThread>>,
    /// How many settled trials (see [`TrialSnapshot::settled_len`]) the best
    /// trial was last looked for among, and the best of them: settled trials
    /// never change, so the next look starts after them.
    pub(crate) best_settled: Mutex<(usize, Option<Arc<FrozenTrial>>)>,
    /// Told of the study's opening and of each trial this handle ends.
    pub(crate) trackers: Vec<Arc<dyn Tracker>>,
}

impl StudyCore {
    /// The view a sampler gets for `trial`: restricted to its pruning bracket, if any.
    pub(crate) fn sampler_view<'a>(
        &'a self,
        history: &'a TrialSnapshot,
        trial: &FrozenTrial,
    ) -> StudyView<'a> {
        let full = StudyView::from_snapshot(&self.name, &self.directions, history);
        match self.pruner.bracket(&full, trial) {
            None => full,
            Some(b) => {
                let same: Vec<_> = history
                    .iter()
                    .filter(|t| self.pruner.bracket(&full, t) == Some(b))
                    .cloned()
                    .collect();
                StudyView::owned(&self.name, &self.directions, same)
            }
        }
    }

    pub(crate) fn pruner_view<'a>(&'a self, trials: &'a TrialSnapshot) -> StudyView<'a> {
        StudyView::from_snapshot(&self.name, &self.directions, trials)
    }

    /// The best COMPLETE trial of `history` for `dir` (ties: lowest number),
    /// looking at each settled trial once over the life of this study handle.
    pub(crate) fn best_in(
        &self,
        history: &TrialSnapshot,
        dir: Direction,
    ) -> Result<Option<Arc<FrozenTrial>>> {
        let mut g = self.best_settled.lock()?;
        let (seen, best) = &mut *g;
        let settled = history.settled_len();
        if settled < *seen {
            // Not the front seen before (a storage without a settled front).
            *seen = 0;
            *best = None;
        }
        let newly = history.iter_from(*seen).take(settled - *seen);
        *best = best_of(best.iter().chain(newly), dir);
        *seen = settled;
        Ok(best_of(best.iter().chain(history.iter_from(settled)), dir))
    }
}

/// How a trial ended, before it is written.
pub(crate) enum Finish {
    Result(Result<Vec<f64>, TrialError>),
    Panic(String),
}

/// A study: a named set of trials in a storage, with a sampler and a pruner.
///
/// `Study` is cheap to clone (it is a handle) and `Send + Sync`; several
/// threads, and with a persistent storage several processes, can run trials of
/// the same study at once.
#[derive(Clone)]
pub struct Study {
    core: Arc<StudyCore>,
}

impl std::fmt::Debug for Study {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Study")
            .field("name", &self.core.name)
            .field("directions", &self.core.directions)
            .finish_non_exhaustive()
    }
}

impl Study {
    /// Starts building a study (name, storage, sampler, pruner, directions).
    pub fn builder() -> StudyBuilder {
        StudyBuilder::default()
    }

    /// The study's name.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// The storage's id of the study.
    pub fn id(&self) -> u64 {
        self.core.id
    }

    /// One direction per objective.
    pub fn directions(&self) -> &[Direction] {
        &self.core.directions
    }

    /// The storage this study lives in.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.core.storage
    }

    /// The heartbeat setting of this study handle
    /// ([`StudyBuilder::heartbeat`]), if it has one.
    pub fn heartbeat(&self) -> Option<Heartbeat> {
        self.core.heartbeat
    }

    /// The retry policy of this study handle ([`StudyBuilder::retry`]), if
    /// it has one.
    pub fn retry_policy(&self) -> Option<RetryPolicy> {
        self.core.retry
    }

    /// The sampler.
    pub fn sampler(&self) -> &Arc<dyn Sampler> {
        &self.core.sampler
    }

    /// The pruner.
    pub fn pruner(&self) -> &Arc<dyn Pruner> {
        &self.core.pruner
    }

    /// Starts a trial: claims an enqueued (WAITING) trial if there is one,
    /// otherwise creates a new RUNNING trial. The caller owns it until [`Study::tell`].
    ///
    /// With heartbeats on, first fails stale trials ([`Study::fail_stale_trials`])
    /// and then beats for the new trial on its own thread until it is told.
    pub fn ask(&self) -> Result<Trial> {
        let storage = &self.core.storage;
        if self.core.heartbeat.is_some() {
            self.fail_stale_trials()?;
        }
        // Claim or create, with the first heartbeat in the same transaction.
        let frozen = storage.start_trial(self.core.id, self.core.heartbeat.is_some())?;
        if let Some(hb) = self.core.heartbeat {
            let beat =
                heartbeat::HeartbeatThread::start(Arc::clone(storage), &frozen, hb.interval)?;
            self.core.beats.lock()?.insert(frozen.id, beat);
        }
        Trial::start(Arc::clone(&self.core), frozen)
    }

    /// Finishes a trial with what its objective returned, and returns the stored record.
    pub fn tell(&self, trial: Trial, result: impl IntoTrialResult) -> Result<Arc<FrozenTrial>> {
        self.finish(trial, Finish::Result(result.into_trial_result()))
    }

    pub(crate) fn finish(&self, trial: Trial, finish: Finish) -> Result<Arc<FrozenTrial>> {
        let (core, frozen) = trial.into_parts();
        let n_obj = core.directions.len();
        let fail = |kind: FailureKind, reason: String| {
            let mut attrs = kind.attrs(reason);
            if kind.is_constraint_violation() {
                attrs.push((
                    FailureKind::CONSTRAINTS_ATTR.to_owned(),
                    Value::from(vec![1.0]),
                ));
            }
            (TrialState::Fail, None, attrs)
        };
        let (state, values, attrs): (TrialState, Option<Vec<f64>>, Vec<(String, Value)>) =
            match finish {
                Finish::Result(Ok(values)) if values.len() != n_obj => fail(
                    FailureKind::Error,
                    format!(
                        "the objective returned {} values but the study has {n_obj} objectives",
                        values.len()
                    ),
                ),
                Finish::Result(Ok(values)) => match values.iter().find(|v| !v.is_finite()) {
                    Some(bad) => fail(
                        FailureKind::NonFinite,
                        format!(
                            "the objective returned {bad}; values must be finite (got {values:?})"
                        ),
                    ),
                    None => (TrialState::Complete, Some(values), Vec::new()),
                },
                Finish::Result(Err(TrialError::Pruned)) => {
                    // Optuna's convention: the last intermediate value, unless it is NaN.
                    let values = match (n_obj, frozen.last_intermediate()) {
                        (1, Some((_, v))) if !v.is_nan() => Some(vec![v]),
                        _ => None,
                    };
                    (TrialState::Pruned, values, Vec::new())
                }
                Finish::Result(Err(TrialError::Oom { config, message })) => {
                    let (s, v, mut a) = fail(FailureKind::Oom, message);
                    a.push((FailureKind::OOM_CONFIG_ATTR.to_owned(), config));
                    (s, v, a)
                }
                Finish::Result(Err(TrialError::Infeasible(m))) => fail(FailureKind::Infeasible, m),
                Finish::Result(Err(TrialError::Failed(m))) => fail(FailureKind::Error, m),
                Finish::Panic(m) => {
                    fail(FailureKind::Panic, format!("the objective panicked: {m}"))
                }
            };
        // Stop beating first, so a heartbeat never races the final write.
        let beat = core.beats.lock()?.remove(&frozen.id);
        drop(beat);
        let finished = match core
            .storage
            .finish_trial(frozen.id, state, values.as_deref(), &attrs)
        {
            // Presumed dead and failed as stale by another worker, or failed
            // as interrupted when a signal stopped the study: its record stands.
            Err(Error::TrialFinished { .. })
                if core
                    .storage
                    .trial(frozen.id)?
                    .failure()
                    .is_some_and(|k| !k.blames_configuration()) =>
            {
                let stored = core.storage.trial(frozen.id)?;
                tracing::warn!(
                    study = %core.name,
                    "trial {} was failed as {} before it finished",
                    frozen.number,
                    stored.failure().map_or("stale", FailureKind::as_str)
                );
                stored
            }
            other => other?,
        };
        let history = core.storage.trial_snapshot(core.id)?;
        let view = core.sampler_view(&history, &finished);
        core.sampler.after_trial(&view, &finished);
        self.log_finished(&finished, &history);
        self.track_finished(&finished);
        Ok(finished)
    }

    fn log_finished(&self, t: &FrozenTrial, history: &TrialSnapshot) {
        // Formatting and the best-trial look-up cost time; skip them when
        // nobody listens (the common case in benchmarks and libraries).
        let enabled = if t.state == TrialState::Fail {
            tracing::enabled!(tracing::Level::WARN)
        } else {
            tracing::enabled!(tracing::Level::INFO)
        };
        if !enabled {
            return;
        }
        let params: Vec<String> = t.params().iter().map(|(k, v)| format!("{k}={v}")).collect();
        match t.state {
            TrialState::Complete => {
                let best = match self.core.directions.as_slice() {
                    [dir] => self.core.best_in(history, *dir).ok().flatten(),
                    _ => None,
                }
                .map(|b| {
                    format!(
                        "; best is trial {} with value {:?}",
                        b.number,
                        b.value().unwrap_or(f64::NAN)
                    )
                })
                .unwrap_or_default();
                tracing::info!(
                    study = %self.core.name,
                    "trial {} finished with values {:?} and parameters {{{}}}{best}",
                    t.number,
                    t.values.as_deref().unwrap_or_default(),
                    params.join(", ")
                );
            }
            TrialState::Pruned => {
                tracing::info!(study = %self.core.name, "trial {} pruned at step {:?}", t.number, t.last_intermediate().map(|(s, _)| s))
            }
            _ => tracing::warn!(
                study = %self.core.name,
                "trial {} failed ({}): {}",
                t.number,
                t.failure().map_or("unknown", |k| k.as_str()),
                t.fail_reason().unwrap_or("")
            ),
        }
    }

    /// Runs `n_trials` trials of `objective` in this thread.
    ///
    /// ```
    /// # use hpo_core::Study;
    /// # fn main() -> hpo_core::Result<()> {
    /// let study = Study::builder().build()?;
    /// study.optimize(10, |trial| {
    ///     let x = trial.suggest_float("x", -1.0, 1.0)?;
    ///     Ok(x * x)
    /// })?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// A trial whose objective errs, panics or returns a non-finite value is
    /// stored FAIL and the study goes on; only storage errors stop it.
    pub fn optimize<F, R>(&self, n_trials: usize, objective: F) -> Result<()>
    where
        F: Fn(&mut Trial) -> R + Sync,
        R: IntoTrialResult,
    {
        self.optimize_with(Optimize::new().trials(n_trials), objective)
    }

    /// Asks the running [`Study::optimize`] loops to stop after their current trials.
    pub fn stop(&self) {
        self.core.stop.store(true, Ordering::SeqCst);
    }

    /// Adds a WAITING trial whose parameters are fixed to `params` (a warm
    /// start from a known-good configuration). Parameters not named are sampled.
    /// Returns the trial's number.
    pub fn enqueue<K: Into<String>>(
        &self,
        params: impl IntoIterator<Item = (K, ParamValue)>,
    ) -> Result<u64> {
        let mut fixed = serde_json::Map::new();
        for (k, v) in params {
            fixed.insert(k.into(), v.to_json_value());
        }
        let mut template = FrozenTrial::new(0, 0, TrialState::Waiting);
        template
            .system_attrs
            .insert(FIXED_PARAMS_ATTR.to_owned(), Value::Object(fixed));
        Ok(self
            .core
            .storage
            .create_trial(self.core.id, Some(&template))?
            .number)
    }

    /// All trials, ordered by number.
    pub fn trials(&self) -> Result<Vec<Arc<FrozenTrial>>> {
        self.core.storage.trials(self.core.id)
    }

    /// The best COMPLETE trial of a single-objective study (ties: lowest number).
    pub fn best_trial(&self) -> Result<Arc<FrozenTrial>> {
        let dir = self.single_direction("best_trial")?;
        let history = self.core.storage.trial_snapshot(self.core.id)?;
        self.core
            .best_in(&history, dir)?
            .ok_or_else(|| Error::NoCompletedTrials(self.core.name.clone()))
    }

    /// The best objective value of a single-objective study.
    pub fn best_value(&self) -> Result<f64> {
        let t = self.best_trial()?;
        t.value()
            .ok_or_else(|| Error::NoCompletedTrials(self.core.name.clone()))
    }

    /// The parameters of the best trial, typed.
    pub fn best_params(&self) -> Result<BTreeMap<String, ParamValue>> {
        Ok(self.best_trial()?.params())
    }

    /// The Pareto-optimal COMPLETE trials (for any number of objectives).
    pub fn best_trials(&self) -> Result<Vec<Arc<FrozenTrial>>> {
        let complete: Vec<_> = self
            .trials()?
            .into_iter()
            .filter(|t| t.state == TrialState::Complete)
            .collect();
        Ok(pareto::front(&complete, &self.core.directions))
    }

    /// Sets a study user attribute.
    pub fn set_user_attr(&self, key: &str, value: impl serde::Serialize) -> Result<()> {
        let v = self::trial::attr_json(key, value)?;
        self.core.storage.set_study_user_attr(self.core.id, key, &v)
    }

    /// The study's user attributes.
    pub fn user_attrs(&self) -> Result<BTreeMap<String, Value>> {
        self.core.storage.study_user_attrs(self.core.id)
    }

    /// The study's system attributes.
    pub fn system_attrs(&self) -> Result<BTreeMap<String, Value>> {
        self.core.storage.study_system_attrs(self.core.id)
    }

    fn single_direction(&self, what: &str) -> Result<Direction> {
        match self.core.directions.as_slice() {
            [d] => Ok(*d),
            ds => Err(Error::InvalidOperation(format!(
                "`{what}` needs a single-objective study, but `{}` has {} objectives; use `best_trials`",
                self.core.name,
                ds.len()
            ))),
        }
    }
}

/// The best COMPLETE trial in `trials` for `dir` (ties: lowest number).
pub(crate) fn best_of<'a>(
    trials: impl IntoIterator<Item = &'a Arc<FrozenTrial>>,
    dir: Direction,
) -> Option<Arc<FrozenTrial>> {
    let mut best: Option<&Arc<FrozenTrial>> = None;
    for t in trials
        .into_iter()
        .filter(|t| t.state == TrialState::Complete)
    {
        let Some(v) = t.value() else { continue };
        match best.and_then(|b| b.value()) {
            Some(bv) if !dir.is_better(v, bv) => {}
            _ => best = Some(t),
        }
    }
    best.cloned()
}

#[cfg(test)]
mod tests;
