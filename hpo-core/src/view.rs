//! What samplers and pruners see of a study: immutable trials, never storage.
//!
//! This sits below `sampler/`, `pruner/` and `study/`: the study builds a view,
//! samplers and pruners read it, and neither needs the study module to do so.

use crate::direction::Direction;
use crate::trial::{FrozenTrial, TrialState};
use std::borrow::Cow;
use std::sync::Arc;

/// A read-only view of a study handed to samplers and pruners.
///
/// Holds the study's name, directions and trials (ordered by number, every
/// state, including RUNNING trials for the constant liar). When the pruner
/// assigns trials to brackets (Hyperband), samplers get only the trials of the
/// current trial's bracket, through the pruner's [`crate::Pruner::bracket`] hook.
#[derive(Debug, Clone)]
pub struct StudyView<'a> {
    name: &'a str,
    directions: &'a [Direction],
    trials: Cow<'a, [Arc<FrozenTrial>]>,
}

impl<'a> StudyView<'a> {
    /// A view over borrowed trials.
    pub fn new(name: &'a str, directions: &'a [Direction], trials: &'a [Arc<FrozenTrial>]) -> Self {
        StudyView {
            name,
            directions,
            trials: Cow::Borrowed(trials),
        }
    }

    /// A view over an owned (for example filtered) list of trials.
    pub fn owned(
        name: &'a str,
        directions: &'a [Direction],
        trials: Vec<Arc<FrozenTrial>>,
    ) -> Self {
        StudyView {
            name,
            directions,
            trials: Cow::Owned(trials),
        }
    }

    /// The study name.
    pub fn name(&self) -> &str {
        self.name
    }

    /// The study's directions, one per objective.
    pub fn directions(&self) -> &[Direction] {
        self.directions
    }

    /// The direction of a single-objective study (the first direction).
    pub fn direction(&self) -> Direction {
        self.directions.first().copied().unwrap_or_default()
    }

    /// All trials, ordered by number.
    pub fn trials(&self) -> &[Arc<FrozenTrial>] {
        &self.trials
    }

    /// Trials in any of `states`.
    pub fn trials_in<'s>(
        &'s self,
        states: &'s [TrialState],
    ) -> impl Iterator<Item = &'s Arc<FrozenTrial>> + 's {
        self.trials
            .iter()
            .filter(move |t| states.contains(&t.state))
    }

    /// COMPLETE trials.
    pub fn completed(&self) -> impl Iterator<Item = &Arc<FrozenTrial>> + '_ {
        self.trials
            .iter()
            .filter(|t| t.state == TrialState::Complete)
    }
}
