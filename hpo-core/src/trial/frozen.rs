//! The immutable record of a trial.

use super::{FailureKind, TrialState};
use crate::distribution::{Distribution, ParamValue};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::BTreeMap;

/// A snapshot of a trial as stored: what samplers, pruners and users read.
///
/// [`FrozenTrial::params`] gives the parameters as the objective saw them
/// (typed: floats, ints, choices). Storage and samplers work on the internal
/// `f64` form kept beside the distributions ([`FrozenTrial::internal_params`],
/// as in Optuna's `trial_params` table: category indices, ints as floats).
#[derive(Debug, Clone, PartialEq)]
pub struct FrozenTrial {
    /// Storage-wide unique id.
    pub id: u64,
    /// Number within its study: 0, 1, 2, ... without gaps.
    pub number: u64,
    /// Life-cycle state.
    pub state: TrialState,
    /// Objective values (one per objective) for COMPLETE trials; the last
    /// intermediate value for PRUNED trials, as in Optuna.
    pub values: Option<Vec<f64>>,
    /// When the trial started running.
    pub datetime_start: Option<DateTime<Utc>>,
    /// When the trial finished.
    pub datetime_complete: Option<DateTime<Utc>>,
    /// Parameters in internal form (category index, ints as `f64`), for
    /// samplers and storages; users read [`FrozenTrial::params`].
    pub internal_params: BTreeMap<String, f64>,
    /// Each parameter's declared distribution.
    pub distributions: BTreeMap<String, Distribution>,
    /// Attributes set by the user.
    pub user_attrs: BTreeMap<String, Value>,
    /// Attributes set by hpo (and Optuna): `fixed_params`, `fail_reason`, `constraints`, ...
    pub system_attrs: BTreeMap<String, Value>,
    /// Values reported with [`crate::Trial::report`], by step.
    pub intermediate_values: BTreeMap<u64, f64>,
}

impl FrozenTrial {
    /// An empty trial record with the given identity and state.
    pub fn new(id: u64, number: u64, state: TrialState) -> Self {
        FrozenTrial {
            id,
            number,
            state,
            values: None,
            datetime_start: None,
            datetime_complete: None,
            internal_params: BTreeMap::new(),
            distributions: BTreeMap::new(),
            user_attrs: BTreeMap::new(),
            system_attrs: BTreeMap::new(),
            intermediate_values: BTreeMap::new(),
        }
    }

    /// The typed value of parameter `name`, if it was suggested.
    pub fn param(&self, name: &str) -> Option<ParamValue> {
        let d = self.distributions.get(name)?;
        d.to_external(*self.internal_params.get(name)?).ok()
    }

    /// Every parameter as the objective saw it (typed), by name.
    pub fn params(&self) -> BTreeMap<String, ParamValue> {
        self.internal_params
            .keys()
            .filter_map(|k| Some((k.clone(), self.param(k)?)))
            .collect()
    }

    /// The single objective value, if there is exactly one.
    pub fn value(&self) -> Option<f64> {
        match self.values.as_deref() {
            Some([v]) => Some(*v),
            _ => None,
        }
    }

    /// The last reported step and its value.
    pub fn last_intermediate(&self) -> Option<(u64, f64)> {
        self.intermediate_values
            .iter()
            .next_back()
            .map(|(s, v)| (*s, *v))
    }

    /// Why the trial failed, if it is FAIL and hpo recorded a kind.
    pub fn failure(&self) -> Option<FailureKind> {
        if self.state != TrialState::Fail {
            return None;
        }
        self.system_attrs
            .get(FailureKind::ATTR)?
            .as_str()
            .and_then(FailureKind::parse)
    }

    /// The stored failure message, if any.
    pub fn fail_reason(&self) -> Option<&str> {
        self.system_attrs.get(FailureKind::REASON_ATTR)?.as_str()
    }

    /// Total constraint violation (sum of positive entries of Optuna's
    /// `constraints` system attribute); `None` when no constraints were recorded.
    pub fn constraint_violation(&self) -> Option<f64> {
        let cs = self
            .system_attrs
            .get(FailureKind::CONSTRAINTS_ATTR)?
            .as_array()?;
        Some(
            cs.iter()
                .filter_map(Value::as_f64)
                .map(|c| c.max(0.0))
                .sum(),
        )
    }

    /// Parameters fixed by `Study::enqueue`, in typed form.
    pub fn fixed_params(&self) -> BTreeMap<String, ParamValue> {
        self.system_attrs
            .get(super::FIXED_PARAMS_ATTR)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), ParamValue::from_json_value(v)?)))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The WAITING copy of this failed trial that runs it again, with Optuna's
    /// retry lineage (as its `RetryFailedTrialCallback` builds it): the same
    /// parameters, distributions and user attributes, the system attributes
    /// less `drop` (this attempt's outcome), `failed_trial` naming the first
    /// attempt and `retry_history` every failed attempt so far, this one last.
    /// Used by stale-trial retries and by the executor's out-of-memory relaunch.
    /// The attempt's [`super::RELATIVE_SAMPLE_ATTR`] (what it handed over to a
    /// worker) is not copied: the copy is a new trial, which draws its own
    /// joint sample when it starts.
    pub fn retry_copy(&self, drop: &[&str]) -> FrozenTrial {
        let mut system = self.system_attrs.clone();
        system.remove(super::RELATIVE_SAMPLE_ATTR);
        for key in drop {
            system.remove(*key);
        }
        system
            .entry(super::FAILED_TRIAL_ATTR.to_owned())
            .or_insert_with(|| Value::from(self.number));
        let mut history = match system.remove(super::RETRY_HISTORY_ATTR) {
            Some(Value::Array(h)) => h,
            _ => Vec::new(),
        };
        history.push(Value::from(self.number));
        system.insert(super::RETRY_HISTORY_ATTR.to_owned(), Value::Array(history));
        let mut copy = FrozenTrial::new(0, 0, TrialState::Waiting);
        copy.internal_params = self.internal_params.clone();
        copy.distributions = self.distributions.clone();
        copy.user_attrs = self.user_attrs.clone();
        copy.system_attrs = system;
        copy
    }

    /// How many failed attempts a retry copy's lineage lists
    /// (`retry_history`); 0 for a trial that is no retry.
    pub fn retry_count(&self) -> usize {
        self.system_attrs
            .get(super::RETRY_HISTORY_ATTR)
            .and_then(Value::as_array)
            .map_or(0, Vec::len)
    }

    /// Wall-clock duration, for finished trials.
    pub fn duration(&self) -> Option<std::time::Duration> {
        let (s, e) = (self.datetime_start?, self.datetime_complete?);
        (e - s).to_std().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_copy_keeps_the_configuration_and_drops_the_attempt() {
        let mut t = FrozenTrial::new(3, 7, TrialState::Fail);
        t.internal_params.insert("x".into(), 0.5);
        t.system_attrs
            .insert("cma:generation".into(), Value::from(2));
        t.system_attrs
            .insert(super::super::RELATIVE_SAMPLE_ATTR.into(), Value::Null);
        t.system_attrs
            .insert("fail_reason".into(), Value::from("boom"));
        let copy = t.retry_copy(&["fail_reason"]);
        assert_eq!(copy.state, TrialState::Waiting);
        assert_eq!(copy.internal_params, t.internal_params);
        let keys: Vec<&str> = copy.system_attrs.keys().map(String::as_str).collect();
        assert_eq!(
            keys,
            ["cma:generation", "failed_trial", "retry_history"],
            "{:?}",
            copy.system_attrs
        );
        assert_eq!(copy.system_attrs["failed_trial"], Value::from(7));
    }
}
