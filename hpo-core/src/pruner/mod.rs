//! Pruners: stop unpromising trials early.
//!
//! # The contract
//!
//! [`Pruner::prune`] is called from [`crate::Trial::should_prune`] with a
//! [`StudyView`] of all trials (immutable, never the storage) and the running
//! trial, whose intermediate values include the step just reported. It returns
//! a [`Decision`]: whether the trial should stop now, plus any system
//! attributes the pruner wants recorded on the trial (successive halving's
//! `completed_rung_N`, exactly as Optuna stores them). The objective then
//! returns `Err(TrialError::Pruned)` and the trial is stored PRUNED with its
//! last intermediate value as its value.
//!
//! Pruners are `Send + Sync` and called concurrently from several trials.
//! The only state they keep is what Optuna's pruners cache too (an `auto`
//! resource once it could be estimated), held in a [`std::sync::OnceLock`].
//!
//! A pruner that splits trials into brackets (Hyperband) says so through
//! [`Pruner::bracket`]; the study then shows samplers only the trials of the
//! current trial's bracket. Study and trial code never look at concrete
//! pruners: wrappers such as [`PatientPruner`] forward the hook.
//!
//! # Semantics
//!
//! Every pruner here decides exactly as Optuna 5.0's pruner of the same name
//! for the same settings and the same reported values, in both directions;
//! `tests/pruner_fixtures` replays decisions recorded from Optuna itself.
//! Settings Optuna would reject (and a few it silently accepts, such as
//! `min_resource > max_resource`) are rejected at construction with
//! [`crate::Error::InvalidConfig`].
//!
//! | pruner | decides from | use when |
//! | --- | --- | --- |
//! | [`NopPruner`] | nothing | you want every trial to finish |
//! | [`MedianPruner`] / [`PercentilePruner`] | the trial's best value so far vs the median / a percentile of COMPLETE trials at the same step | cheap, robust default |
//! | [`SuccessiveHalvingPruner`] | the value at geometric rungs vs the top `1/reduction_factor` of all trials that reached the rung | many trials, learning curves that rank early |
//! | [`HyperbandPruner`] | successive halving in several brackets with different aggressiveness | as above, when you do not know how early curves rank |
//! | [`PatientPruner`] | the trial's own lack of progress over `patience` steps, then the wrapped pruner | noisy curves that plateau before improving |
//! | [`ThresholdPruner`] | the latest value against fixed bounds | divergence guards (NaN, loss explosions) |

mod config;
mod hyperband;
mod median;
mod nop;
mod patient;
mod percentile;
mod successive_halving;
mod threshold;

pub use self::config::{PrunerConfig, Resource};
pub use self::hyperband::{HyperbandConfig, HyperbandPruner};
pub use self::median::{MedianConfig, MedianPruner};
pub use self::nop::NopPruner;
pub use self::patient::{PatientConfig, PatientPruner};
pub use self::percentile::{PercentileConfig, PercentilePruner};
pub use self::successive_halving::{SuccessiveHalvingConfig, SuccessiveHalvingPruner};
pub use self::threshold::{ThresholdConfig, ThresholdPruner};

use crate::direction::Direction;
use crate::error::{Error, Result};
use crate::trial::FrozenTrial;
use crate::view::StudyView;
use serde_json::Value;
use std::sync::Arc;

/// A pruner's verdict on a running trial, with bookkeeping to record on it.
#[derive(Debug, Clone, Default, PartialEq)]
#[must_use]
pub struct Decision {
    /// Whether the trial should stop now.
    pub prune: bool,
    /// System attributes to write on the trial before the verdict is
    /// returned (for example `completed_rung_0`), in order.
    pub system_attrs: Vec<(String, Value)>,
}

impl Decision {
    /// Let the trial continue, recording nothing.
    pub const fn keep() -> Self {
        Decision {
            prune: false,
            system_attrs: Vec::new(),
        }
    }

    /// Stop the trial, recording nothing.
    pub const fn stop() -> Self {
        Decision {
            prune: true,
            system_attrs: Vec::new(),
        }
    }
}

impl From<bool> for Decision {
    fn from(prune: bool) -> Self {
        Decision {
            prune,
            system_attrs: Vec::new(),
        }
    }
}

/// Decides from intermediate values whether a running trial should stop.
pub trait Pruner: Send + Sync {
    /// Whether `trial` should be pruned now, and what to record on it.
    fn prune(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Result<Decision>;

    /// The bracket `trial` belongs to, for pruners that partition trials
    /// (default: none, every trial sees every other).
    fn bracket(&self, _study: &StudyView<'_>, _trial: &FrozenTrial) -> Option<u32> {
        None
    }

    /// The settings that rebuild this pruner in another process: the
    /// executor's worker processes prune with the study's pruner rebuilt
    /// from them. `None` (the default) for a pruner that no
    /// [`PrunerConfig`] describes, such as one written outside this crate.
    fn to_config(&self) -> Option<PrunerConfig> {
        None
    }
}

impl<P: Pruner + ?Sized> Pruner for Arc<P> {
    fn prune(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Result<Decision> {
        (**self).prune(study, trial)
    }
    fn bracket(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Option<u32> {
        (**self).bracket(study, trial)
    }
    fn to_config(&self) -> Option<PrunerConfig> {
        (**self).to_config()
    }
}

impl<P: Pruner + ?Sized> Pruner for Box<P> {
    fn prune(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Result<Decision> {
        (**self).prune(study, trial)
    }
    fn bracket(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Option<u32> {
        (**self).bracket(study, trial)
    }
    fn to_config(&self) -> Option<PrunerConfig> {
        (**self).to_config()
    }
}

/// The direction pruning compares in; pruning is single-objective, as in Optuna.
pub(crate) fn single_direction(study: &StudyView<'_>) -> Result<Direction> {
    match study.directions() {
        [d] => Ok(*d),
        ds => Err(Error::InvalidOperation(format!(
            "pruning needs a single-objective study, but study `{}` has {} objectives",
            study.name(),
            ds.len()
        ))),
    }
}

/// The best of `values` in `direction`, ignoring NaN (NaN if all are NaN):
/// numpy's `nanmin` / `nanmax`.
pub(crate) fn nan_best(values: impl IntoIterator<Item = f64>, direction: Direction) -> f64 {
    values
        .into_iter()
        .filter(|v| !v.is_nan())
        .fold(f64::NAN, |best, v| {
            if best.is_nan() || direction.is_better(v, best) {
                v
            } else {
                best
            }
        })
}

/// The last reported `(step, value)` of `trial` if that step is due for a
/// check: at or after the warm-up, and the first report inside its interval
/// of `interval` steps (Optuna's warm-up test plus `_is_first_in_interval_step`).
pub(crate) fn step_due(trial: &FrozenTrial, warmup: u64, interval: u64) -> Option<(u64, f64)> {
    let (step, value) = trial.last_intermediate()?;
    if step < warmup {
        return None;
    }
    let nearest_lower_pruning_step = (step - warmup) / interval * interval + warmup;
    match trial.intermediate_values.range(..step).next_back() {
        Some((&second_last, _)) if second_last >= nearest_lower_pruning_step => None,
        _ => Some((step, value)),
    }
}

/// Checks a count setting that must be at least `min`.
pub(crate) fn check_at_least(name: &str, value: u64, min: u64, pruner: &str) -> Result<()> {
    if value < min {
        return Err(Error::InvalidConfig(format!(
            "{pruner}: `{name}` is {value}, but must be at least {min}"
        )));
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod testing;
