//! The live trial handle given to objectives.

use super::StudyCore;
use crate::distribution::{
    CategoricalDistribution, Choice, Distribution, FloatDistribution, IntDistribution, ParamValue,
    Support,
};
use crate::error::{Error, Result};
use crate::trial::{FrozenTrial, TrialSnapshot, RELATIVE_SAMPLE_ATTR};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A running trial: suggest parameters, report progress, ask whether to stop.
///
/// A `Trial` is owned by exactly one worker (the one that created or claimed
/// it); every write goes straight to the study's storage, so a crash loses at
/// most the current step.
pub struct Trial {
    core: Arc<StudyCore>,
    frozen: FrozenTrial,
    /// Finished and running trials of the study as seen when this trial began.
    history: TrialSnapshot,
    relative_space: BTreeMap<String, Distribution>,
    relative_params: BTreeMap<String, f64>,
    fixed: BTreeMap<String, ParamValue>,
}

impl std::fmt::Debug for Trial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trial")
            .field("study", &self.core.name)
            .field("number", &self.frozen.number)
            .field("params", &self.frozen.internal_params)
            .finish_non_exhaustive()
    }
}

impl Trial {
    /// Starts a trial: samples the relative (joint) parameters up front.
    pub(crate) fn start(core: Arc<StudyCore>, frozen: FrozenTrial) -> Result<Trial> {
        let mut trial = Trial::open(core, frozen)?;
        let core = Arc::clone(&trial.core);
        let view = core.sampler_view(&trial.history, &trial.frozen);
        trial.relative_space = core
            .sampler
            .infer_relative_search_space(&view, &trial.frozen);
        if !trial.relative_space.is_empty() {
            let sample =
                core.sampler
                    .sample_relative(&view, &trial.frozen, &trial.relative_space)?;
            trial.relative_params = sample.params;
            // The sampler's bookkeeping (CMA-ES's state), stored before the
            // objective runs so that the next trial, in any process, sees it.
            for (key, value) in sample.system_attrs {
                trial.set_system_attr(&key, value)?;
            }
        }
        Ok(trial)
    }

    /// Continues a trial that another process started and handed over
    /// (after [`Trial::record_relative_sample`]): its joint values are the
    /// ones drawn there, read back from the trial, never drawn again, so
    /// the sampler's bookkeeping stays as it was written.
    pub(crate) fn resume(core: Arc<StudyCore>, frozen: FrozenTrial) -> Result<Trial> {
        let mut trial = Trial::open(core, frozen)?;
        let Some(recorded) = trial.frozen.system_attrs.get(RELATIVE_SAMPLE_ATTR) else {
            return Ok(trial);
        };
        let bad = |reason: String| Error::Parse {
            what: format!(
                "system attribute `{RELATIVE_SAMPLE_ATTR}` of trial {}",
                trial.frozen.number
            ),
            reason,
            source: None,
        };
        let entries = recorded
            .as_object()
            .ok_or_else(|| bad(format!("expected an object, found {recorded}")))?;
        let mut space = BTreeMap::new();
        let mut params = BTreeMap::new();
        for (name, entry) in entries {
            let value = entry.get("value").and_then(Value::as_f64);
            let dist = entry.get("distribution").and_then(Value::as_str);
            let (Some(value), Some(dist)) = (value, dist) else {
                return Err(bad(format!(
                    "`{name}` needs a numeric \"value\" and a \"distribution\" string, found {entry}"
                )));
            };
            let dist = Distribution::from_json(dist)
                .map_err(|e| bad(format!("the distribution of `{name}`: {e}")))?;
            space.insert(name.clone(), dist);
            params.insert(name.clone(), value);
        }
        trial.relative_space = space;
        trial.relative_params = params;
        Ok(trial)
    }

    /// The handle of `frozen` with the study's history as it is now.
    fn open(core: Arc<StudyCore>, frozen: FrozenTrial) -> Result<Trial> {
        let history = core.storage.trial_snapshot(core.id)?;
        let fixed = frozen.fixed_params();
        Ok(Trial {
            core,
            frozen,
            history,
            relative_space: BTreeMap::new(),
            relative_params: BTreeMap::new(),
            fixed,
        })
    }

    /// Writes the joint values drawn when the trial started that are not
    /// suggested yet to [`RELATIVE_SAMPLE_ATTR`], so that the process the
    /// trial is handed to suggests them as this one would have
    /// ([`Trial::resume`]). Writes nothing when there are none.
    pub(crate) fn record_relative_sample(&mut self) -> Result<()> {
        let pending: serde_json::Map<String, Value> = self
            .relative_params
            .iter()
            .filter(|(name, _)| !self.frozen.distributions.contains_key(*name))
            .filter_map(|(name, value)| {
                let dist = self.relative_space.get(name)?;
                let entry = serde_json::json!({"value": value, "distribution": dist.to_json()});
                Some((name.clone(), entry))
            })
            .collect();
        if pending.is_empty() {
            return Ok(());
        }
        self.set_system_attr(RELATIVE_SAMPLE_ATTR, Value::Object(pending))
    }

    /// The trial's number within its study (0, 1, 2, ...).
    pub fn number(&self) -> u64 {
        self.frozen.number
    }

    /// The storage-wide id of the trial.
    pub fn id(&self) -> u64 {
        self.frozen.id
    }

    /// The study's name.
    pub fn study_name(&self) -> &str {
        &self.core.name
    }

    /// The parameters suggested so far, typed.
    pub fn params(&self) -> BTreeMap<String, ParamValue> {
        self.frozen.params()
    }

    /// The record of this trial as this handle knows it.
    pub fn frozen(&self) -> &FrozenTrial {
        &self.frozen
    }

    /// User attributes set so far.
    pub fn user_attrs(&self) -> &BTreeMap<String, Value> {
        &self.frozen.user_attrs
    }

    /// Suggests a value of `name` from `dist`.
    pub fn suggest(&mut self, name: &str, dist: impl Into<Distribution>) -> Result<ParamValue> {
        self.suggest_within(name, dist, &Support::Full)
    }

    /// Suggests a value of `name` from `dist`, restricted to `support`.
    ///
    /// The declared `dist` is what is stored, so the sampler learns across
    /// conditions; `support` is the part a constraint allows in this trial.
    /// An empty support fails with [`Error::EmptySupport`], which an objective
    /// turns into an Infeasible trial with `?`.
    ///
    /// Suggesting a name again returns the first value; suggesting it with a
    /// different distribution is an error.
    pub fn suggest_within(
        &mut self,
        name: &str,
        dist: impl Into<Distribution>,
        support: &Support,
    ) -> Result<ParamValue> {
        let dist = dist.into();
        if let Some(previous) = self.frozen.distributions.get(name) {
            if *previous != dist {
                return Err(Error::ConflictingDistribution {
                    name: name.to_owned(),
                    trial: self.frozen.number,
                    previous: previous.to_json(),
                    requested: dist.to_json(),
                });
            }
            let internal = self
                .frozen
                .internal_params
                .get(name)
                .copied()
                .unwrap_or(f64::NAN);
            return dist.to_external(internal);
        }
        let support = support.normalize(name, &dist)?;
        let internal = self.choose(name, &dist, &support)?;
        self.core
            .storage
            .set_trial_param(self.frozen.id, name, internal, &dist)?;
        self.frozen
            .internal_params
            .insert(name.to_owned(), internal);
        self.frozen
            .distributions
            .insert(name.to_owned(), dist.clone());
        dist.to_external(internal)
    }

    fn choose(&self, name: &str, dist: &Distribution, support: &Support) -> Result<f64> {
        if let Some(v) = self.fixed.get(name) {
            match dist.to_internal(v) {
                Ok(x) if support.allows(x) => return Ok(x),
                _ => tracing::warn!(
                    trial = self.frozen.number,
                    "enqueued value {v} of `{name}` is outside {dist} or its narrowed support; sampling instead"
                ),
            }
        }
        if dist.is_single() {
            return Ok(dist.snap(match dist {
                Distribution::Float(d) => d.low(),
                Distribution::Int(d) => d.low() as f64,
                Distribution::Categorical(_) => 0.0,
            }));
        }
        if let (Some(x), Some(d)) = (
            self.relative_params.get(name),
            self.relative_space.get(name),
        ) {
            if d == dist && dist.contains(*x) && support.allows(*x) {
                return Ok(*x);
            }
        }
        let view = self.core.sampler_view(&self.history, &self.frozen);
        let x = self
            .core
            .sampler
            .sample_independent(&view, &self.frozen, name, dist, support)?;
        if !dist.contains(x) || !support.allows(x) {
            return Err(Error::InvalidOperation(format!(
                "sampler returned {x} for `{name}`, outside {dist} / {support:?}; this is a sampler bug"
            )));
        }
        Ok(x)
    }

    /// Suggests a float in `[low, high]`.
    pub fn suggest_float(&mut self, name: &str, low: f64, high: f64) -> Result<f64> {
        let d = FloatDistribution::new(low, high)?;
        Ok(self.suggest(name, d)?.as_f64().unwrap_or(f64::NAN))
    }

    /// Suggests a float in `[low, high]` on a log scale.
    pub fn suggest_float_log(&mut self, name: &str, low: f64, high: f64) -> Result<f64> {
        let d = FloatDistribution::log(low, high)?;
        Ok(self.suggest(name, d)?.as_f64().unwrap_or(f64::NAN))
    }

    /// Suggests a float in `low, low + step, ..., high`.
    pub fn suggest_float_step(
        &mut self,
        name: &str,
        low: f64,
        high: f64,
        step: f64,
    ) -> Result<f64> {
        let d = FloatDistribution::stepped(low, high, step)?;
        Ok(self.suggest(name, d)?.as_f64().unwrap_or(f64::NAN))
    }

    /// Suggests an integer in `[low, high]`.
    pub fn suggest_int(&mut self, name: &str, low: i64, high: i64) -> Result<i64> {
        let d = IntDistribution::new(low, high)?;
        self.suggest_i64(name, d)
    }

    /// Suggests an integer in `[low, high]` on a log scale.
    pub fn suggest_int_log(&mut self, name: &str, low: i64, high: i64) -> Result<i64> {
        let d = IntDistribution::log(low, high)?;
        self.suggest_i64(name, d)
    }

    /// Suggests an integer in `low, low + step, ..., high`.
    pub fn suggest_int_step(&mut self, name: &str, low: i64, high: i64, step: i64) -> Result<i64> {
        let d = IntDistribution::stepped(low, high, step)?;
        self.suggest_i64(name, d)
    }

    fn suggest_i64(&mut self, name: &str, d: IntDistribution) -> Result<i64> {
        let v = self.suggest(name, d)?;
        v.as_i64()
            .ok_or_else(|| Error::InvalidOperation(format!("`{name}` is not an int: {v}")))
    }

    /// Suggests one of `choices` and returns it.
    pub fn suggest_categorical<T: Clone + Into<Choice>>(
        &mut self,
        name: &str,
        choices: &[T],
    ) -> Result<T> {
        let d = CategoricalDistribution::new(choices.iter().cloned().map(Into::into))?;
        let v = self.suggest(name, d.clone())?;
        let idx = v.as_choice().and_then(|c| d.index_of(c)).ok_or_else(|| {
            Error::InvalidOperation(format!("`{name}` is not one of its choices"))
        })?;
        choices
            .get(idx)
            .cloned()
            .ok_or_else(|| Error::InvalidOperation(format!("choice index {idx} out of range")))
    }

    /// Reports an intermediate value (for example validation loss after an epoch).
    ///
    /// Reporting a step twice keeps the first value and logs a warning, as Optuna does.
    pub fn report(&mut self, step: u64, value: f64) -> Result<()> {
        if self.frozen.intermediate_values.contains_key(&step) {
            tracing::warn!(
                trial = self.frozen.number,
                step,
                "step already reported; ignoring {value}"
            );
            return Ok(());
        }
        self.core
            .storage
            .set_trial_intermediate_value(self.frozen.id, step, value)?;
        self.frozen.intermediate_values.insert(step, value);
        Ok(())
    }

    /// Whether the study's pruner says this trial should stop now.
    ///
    /// Return `Err(TrialError::Pruned)` from the objective when it does.
    pub fn should_prune(&mut self) -> Result<bool> {
        if self.frozen.intermediate_values.is_empty() {
            return Ok(false);
        }
        let trials = self.core.storage.trial_snapshot(self.core.id)?;
        let decision = {
            let view = self.core.pruner_view(&trials);
            self.core.pruner.prune(&view, &self.frozen)?
        };
        // Bookkeeping the pruner asked for (successive halving's rung values),
        // written before the verdict is acted on, as Optuna does.
        for (key, value) in decision.system_attrs {
            self.set_system_attr(&key, value)?;
        }
        Ok(decision.prune)
    }

    /// Sets a user attribute (any serialisable value, stored as JSON).
    pub fn set_user_attr(&mut self, key: &str, value: impl serde::Serialize) -> Result<()> {
        let v = attr_json(key, value)?;
        self.core
            .storage
            .set_trial_user_attr(self.frozen.id, key, &v)?;
        self.frozen.user_attrs.insert(key.to_owned(), v);
        Ok(())
    }

    /// Sets a system attribute (hpo's own bookkeeping; prefer user attributes).
    pub fn set_system_attr(&mut self, key: &str, value: impl serde::Serialize) -> Result<()> {
        let v = attr_json(key, value)?;
        self.core
            .storage
            .set_trial_system_attr(self.frozen.id, key, &v)?;
        self.frozen.system_attrs.insert(key.to_owned(), v);
        Ok(())
    }

    pub(crate) fn into_parts(self) -> (Arc<StudyCore>, FrozenTrial) {
        (self.core, self.frozen)
    }
}

pub(crate) fn attr_json(key: &str, value: impl serde::Serialize) -> Result<Value> {
    serde_json::to_value(value).map_err(|e| Error::Parse {
        what: format!("attribute `{key}`"),
        reason: "its value cannot be stored as JSON".into(),
        source: Some(Box::new(e)),
    })
}
