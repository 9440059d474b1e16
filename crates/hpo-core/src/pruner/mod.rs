//! Pruners: stop unpromising trials early.
//!
//! # The contract
//!
//! [`Pruner::prune`] is called from [`crate::Trial::should_prune`] with a
//! [`StudyView`] of all trials (immutable, never the storage) and the running
//! trial, whose intermediate values include the step just reported. It returns
//! whether the trial should stop now; the objective then returns
//! `Err(TrialError::Pruned)` and the trial is stored PRUNED with its last
//! intermediate value as its value.
//!
//! A pruner that splits trials into brackets (Hyperband) says so through
//! [`Pruner::bracket`]; the study then shows samplers only the trials of the
//! current trial's bracket. Study and trial code never look at concrete pruners.

use crate::error::Result;
use crate::study::StudyView;
use crate::trial::FrozenTrial;
use std::sync::Arc;

/// Decides from intermediate values whether a running trial should stop.
pub trait Pruner: Send + Sync {
    /// Whether `trial` should be pruned now.
    fn prune(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Result<bool>;

    /// The bracket `trial` belongs to, for pruners that partition trials
    /// (default: none, every trial sees every other).
    fn bracket(&self, _study: &StudyView<'_>, _trial: &FrozenTrial) -> Option<u32> {
        None
    }
}

impl<P: Pruner + ?Sized> Pruner for Arc<P> {
    fn prune(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Result<bool> {
        (**self).prune(study, trial)
    }
    fn bracket(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Option<u32> {
        (**self).bracket(study, trial)
    }
}

/// Never prunes.
#[derive(Debug, Clone, Copy, Default)]
pub struct NopPruner;

impl Pruner for NopPruner {
    fn prune(&self, _study: &StudyView<'_>, _trial: &FrozenTrial) -> Result<bool> {
        Ok(false)
    }
}
