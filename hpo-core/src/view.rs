//! What samplers and pruners see of a study: immutable trials, never storage.
//!
//! This sits below `sampler/`, `pruner/` and `study/`: the study builds a view,
//! samplers and pruners read it, and neither needs the study module to do so.

use crate::direction::Direction;
use crate::trial::{FrozenTrial, TrialSnapshot, TrialState};
use std::borrow::Cow;
use std::sync::Arc;

/// A read-only view of a study handed to samplers and pruners.
///
/// Holds the study's name, directions and trials (ordered by number, every
/// state, including RUNNING trials for the constant liar). When the pruner
/// assigns trials to brackets (Hyperband), samplers get only the trials of the
/// current trial's bracket, through the pruner's [`crate::Pruner::bracket`] hook.
///
/// A study hands out views over a [`TrialSnapshot`] of its storage, which
/// shares the finished trials instead of copying them. Reading through
/// [`StudyView::iter`], [`StudyView::iter_from`], [`StudyView::get`],
/// [`StudyView::len`], [`StudyView::completed`] and [`StudyView::trials_in`]
/// costs only what is read; [`StudyView::trials`] returns one contiguous
/// slice, which for a snapshot is built on its first call (O(trials), once
/// per snapshot).
#[derive(Debug, Clone)]
pub struct StudyView<'a> {
    name: &'a str,
    directions: &'a [Direction],
    trials: Trials<'a>,
}

#[derive(Debug, Clone)]
enum Trials<'a> {
    List(Cow<'a, [Arc<FrozenTrial>]>),
    Snapshot(&'a TrialSnapshot),
}

impl<'a> StudyView<'a> {
    /// A view over borrowed trials.
    pub fn new(name: &'a str, directions: &'a [Direction], trials: &'a [Arc<FrozenTrial>]) -> Self {
        StudyView {
            name,
            directions,
            trials: Trials::List(Cow::Borrowed(trials)),
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
            trials: Trials::List(Cow::Owned(trials)),
        }
    }

    /// A view over a storage's snapshot of the study, borrowed, not copied.
    pub fn from_snapshot(
        name: &'a str,
        directions: &'a [Direction],
        trials: &'a TrialSnapshot,
    ) -> Self {
        StudyView {
            name,
            directions,
            trials: Trials::Snapshot(trials),
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

    /// All trials, ordered by number, as one slice (for a view over a
    /// snapshot, built on the first call: prefer [`StudyView::iter`]).
    pub fn trials(&self) -> &[Arc<FrozenTrial>] {
        match &self.trials {
            Trials::List(list) => list,
            Trials::Snapshot(snapshot) => snapshot.as_slice(),
        }
    }

    /// The number of trials.
    pub fn len(&self) -> usize {
        match &self.trials {
            Trials::List(list) => list.len(),
            Trials::Snapshot(snapshot) => snapshot.len(),
        }
    }

    /// Whether the view holds no trial.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The trial at position `index` (ordered by number).
    pub fn get(&self, index: usize) -> Option<&Arc<FrozenTrial>> {
        match &self.trials {
            Trials::List(list) => list.get(index),
            Trials::Snapshot(snapshot) => snapshot.get(index),
        }
    }

    /// All trials, ordered by number.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Arc<FrozenTrial>> + '_ {
        self.iter_from(0)
    }

    /// The trials from position `start` on, ordered by number; costs
    /// nothing for the trials before `start`.
    pub fn iter_from(
        &self,
        start: usize,
    ) -> impl DoubleEndedIterator<Item = &Arc<FrozenTrial>> + '_ {
        let (list, snapshot): (&[Arc<FrozenTrial>], _) = match &self.trials {
            Trials::List(list) => (list.get(start..).unwrap_or_default(), None),
            Trials::Snapshot(snapshot) => (&[], Some(snapshot.iter_from(start))),
        };
        list.iter().chain(snapshot.into_iter().flatten())
    }

    /// Trials in any of `states`.
    pub fn trials_in<'s>(
        &'s self,
        states: &'s [TrialState],
    ) -> impl Iterator<Item = &'s Arc<FrozenTrial>> + 's {
        self.iter().filter(move |t| states.contains(&t.state))
    }

    /// COMPLETE trials.
    pub fn completed(&self) -> impl Iterator<Item = &Arc<FrozenTrial>> + '_ {
        self.iter().filter(|t| t.state == TrialState::Complete)
    }
}
