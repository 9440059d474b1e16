//! A study's budget across every process and machine that runs it: a number
//! of finished trials counted in storage, and a deadline.
//!
//! [`Optimize::trials`](super::Optimize::trials) counts the trials *one call*
//! starts. A study run by a scheduler on many nodes needs a budget of the
//! *study*: each node runs until the study as a whole has its trials,
//! however many nodes there are, however often one is preempted and
//! requeued. [`StudyBudget`] is that budget. It is recorded in the study
//! ([`Study::set_budget`], system attribute [`BUDGET_ATTR`]) by whoever
//! creates it, so nodes that join later read the same numbers
//! ([`Study::budget`]), and it is enforced before every trial by
//! [`Optimize::study_budget`](super::Optimize::study_budget).
//!
//! # What counts
//!
//! A trial counts once it ends COMPLETE or PRUNED. A FAIL trial does not, and
//! nor does its retry copy until that copy itself ends COMPLETE or PRUNED:
//! a configuration that failed (a preempted node, a crash) and ran again
//! elsewhere counts once.
//!
//! # Why it is never exceeded
//!
//! Trials that may still end counted hold a slot: RUNNING ones, and WAITING
//! ones (enqueued configurations and retry copies, which some process will
//! claim). A process starts a trial only while *counted + running + waiting*
//! is below the budget, or claims a WAITING one while *counted + running* is.
//! Failing a trial together with its retry copy (one transaction) and
//! claiming a WAITING trial leave that sum unchanged; only a newly created
//! trial raises it. Two processes may create one at the same moment: after
//! creating its trial each counts again, and a trial that finds the budget
//! taken by the others gives its slot back at once (it is failed as
//! [`FailureKind::NotStarted`] before any parameter is drawn). Trial numbers
//! are assigned in commit order under the storage's lock, so the later of two
//! always sees the earlier, and at least one of them gives back: the study
//! never holds more slots than its budget. Only configurations enqueued
//! beyond the budget can take it past its number (they are claimed, never
//! dropped).
//!
//! A process whose budget is taken while other processes' trials still run
//! does not leave: one of those may fail, and its retry copy must run. It
//! waits, failing stale trials as [`Study::ask`] does, and leaves once the
//! study has its trials, or the deadline has passed.

use super::Study;
use crate::error::{Error, Result};
use crate::trial::{FailureKind, FrozenTrial, TrialState, FAILED_TRIAL_ATTR, FIXED_PARAMS_ATTR};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The study system attribute holding its [`StudyBudget`] (JSON).
pub const BUDGET_ATTR: &str = "hpo:budget";

/// How often a process whose budget is taken looks again.
pub(crate) const BUDGET_POLL: Duration = Duration::from_secs(1);

/// The `fail_reason` of a trial created just as other processes took the
/// study's last slots.
pub const OVER_BUDGET_REASON: &str = "not started: other processes took the study's last trials \
     of its budget at the same moment; its slot was given back before any parameter was drawn";

/// A budget for a whole study, shared by every process that runs it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StudyBudget {
    /// The study is done once this many of its trials ended COMPLETE or
    /// PRUNED (FAIL trials and retry copies that have not finished do not
    /// count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_trials: Option<usize>,
    /// No trial starts after this time (UTC, by each machine's clock); trials
    /// running then finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline: Option<DateTime<Utc>>,
}

impl StudyBudget {
    /// A budget of `n` counted trials.
    pub fn trials(n: usize) -> Self {
        StudyBudget {
            n_trials: Some(n),
            deadline: None,
        }
    }

    /// This budget with a deadline.
    pub fn until(mut self, deadline: DateTime<Utc>) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Whether it limits anything.
    pub fn is_unlimited(&self) -> bool {
        self.n_trials.is_none() && self.deadline.is_none()
    }

    /// Whether the deadline has passed.
    pub fn past_deadline(&self) -> bool {
        self.deadline.is_some_and(|d| Utc::now() >= d)
    }

    /// What a process may do now, given the study's `tally`.
    pub fn step(&self, tally: &Tally) -> BudgetStep {
        if self.past_deadline() {
            return BudgetStep::Done;
        }
        let Some(n) = self.n_trials else {
            return BudgetStep::Start;
        };
        if tally.counted >= n {
            BudgetStep::Done
        } else if tally.counted + tally.running + tally.waiting < n
            || (tally.waiting > 0 && tally.counted + tally.running < n)
        {
            BudgetStep::Start
        } else {
            BudgetStep::Wait
        }
    }
}

/// A study's trials as its budget sees them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Ended COMPLETE or PRUNED.
    pub counted: usize,
    /// RUNNING, here or in any other process.
    pub running: usize,
    /// WAITING: enqueued, or retry copies of failed trials.
    pub waiting: usize,
    /// FAIL (not counted).
    pub failed: usize,
}

impl Tally {
    /// The tally of `trials`.
    pub fn of(trials: &[std::sync::Arc<FrozenTrial>]) -> Self {
        let mut t = Tally::default();
        for trial in trials {
            match trial.state {
                TrialState::Complete | TrialState::Pruned => t.counted += 1,
                TrialState::Running => t.running += 1,
                TrialState::Waiting => t.waiting += 1,
                TrialState::Fail => t.failed += 1,
            }
        }
        t
    }
}

/// What a process may do under a [`StudyBudget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BudgetStep {
    /// Start (or claim) a trial.
    Start,
    /// Start nothing now: the running and waiting trials hold the rest of the
    /// budget, and one of them may fail and need its slot again.
    Wait,
    /// The study has its trials, or its deadline has passed.
    Done,
}

/// A [`StudyBudget`] looked at from a loop that polls: counts are read
/// again when a trial is about to start, and at most every
/// [`BUDGET_POLL`] otherwise.
#[derive(Debug)]
pub(crate) struct BudgetWatch {
    budget: Option<StudyBudget>,
    last: Option<(std::time::Instant, BudgetStep)>,
}

impl BudgetWatch {
    /// Watches `budget` (`None`: no budget, every step is `Start`).
    pub(crate) fn new(budget: Option<StudyBudget>) -> Self {
        BudgetWatch { budget, last: None }
    }

    /// What the budget allows now: read from storage when the last answer
    /// allowed a start (a trial is about to start), or when it is older
    /// than [`BUDGET_POLL`].
    pub(crate) fn step(&mut self, study: &Study) -> Result<BudgetStep> {
        let Some(budget) = &self.budget else {
            return Ok(BudgetStep::Start);
        };
        if let Some((at, step)) = self.last {
            if step != BudgetStep::Start && at.elapsed() < BUDGET_POLL {
                return Ok(step);
            }
        }
        let step = study.budget_step(budget)?;
        self.last = Some((std::time::Instant::now(), step));
        Ok(step)
    }

    /// The budget watched.
    pub(crate) fn budget(&self) -> Option<&StudyBudget> {
        self.budget.as_ref()
    }

    /// Whether the budget's deadline has passed.
    pub(crate) fn past_deadline(&self) -> bool {
        self.budget.is_some_and(|b| b.past_deadline())
    }
}

impl Study {
    /// The budget recorded in the study ([`BUDGET_ATTR`]), if any.
    pub fn budget(&self) -> Result<Option<StudyBudget>> {
        match self.system_attrs()?.get(BUDGET_ATTR) {
            None => Ok(None),
            Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|e| {
                Error::InvalidConfig(format!(
                    "study `{}`: its `{BUDGET_ATTR}` attribute is not a budget ({e}): {v}",
                    self.name()
                ))
            }),
        }
    }

    /// Records `budget` in the study, for every process that joins it.
    pub fn set_budget(&self, budget: &StudyBudget) -> Result<()> {
        let value = serde_json::to_value(budget)
            .map_err(|e| Error::InvalidConfig(format!("study `{}`: budget: {e}", self.name())))?;
        self.storage()
            .set_study_system_attr(self.id(), BUDGET_ATTR, &value)
    }

    /// The study's trials as a budget counts them, read from storage.
    pub fn tally(&self) -> Result<Tally> {
        Ok(Tally::of(&self.trials()?))
    }

    /// What this process may do under `budget` now. Stale trials are failed
    /// first (with heartbeats on), so that a node killed mid-trial gives
    /// its slot back to the others.
    pub(crate) fn budget_step(&self, budget: &StudyBudget) -> Result<BudgetStep> {
        if budget.n_trials.is_none() {
            return Ok(budget.step(&Tally::default()));
        }
        self.fail_stale_trials()?;
        Ok(budget.step(&self.tally()?))
    }

    /// Called on a trial [`Study::ask`] just returned: whether it fits
    /// `budget`. A trial created (not claimed) while other processes took
    /// the last slots is failed as not started, its slot given back, and
    /// `false` is returned: the caller must drop it without running it.
    pub(crate) fn keep_within(&self, budget: &StudyBudget, trial: &FrozenTrial) -> Result<bool> {
        let Some(n) = budget.n_trials else {
            return Ok(true);
        };
        let claimed = trial.system_attrs.contains_key(FIXED_PARAMS_ATTR)
            || trial.system_attrs.contains_key(FAILED_TRIAL_ATTR);
        if claimed {
            return Ok(true);
        }
        let t = Tally::of(&self.trials()?);
        let held = t.counted + t.running + t.waiting;
        if held <= n {
            return Ok(true);
        }
        self.stop_beating(trial.id)?;
        self.storage().release_trial(trial.id)?;
        let attrs = FailureKind::NotStarted.attrs(OVER_BUDGET_REASON);
        let no_copy = |_: &FrozenTrial| None;
        match self.storage().fail_stale_trial(trial.id, &attrs, &no_copy) {
            Ok((t, _)) => {
                tracing::info!(
                    study = self.name(),
                    "trial {} not started: the study's budget of {n} trials is taken",
                    t.number
                );
                self.track_finished(&t);
            }
            Err(Error::TrialFinished { .. }) => {}
            Err(e) => return Err(e),
        }
        Ok(false)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn tally(counted: usize, running: usize, waiting: usize) -> Tally {
        Tally {
            counted,
            running,
            waiting,
            failed: 0,
        }
    }

    #[test]
    fn trials_start_while_the_held_slots_are_below_the_budget() {
        let b = StudyBudget::trials(10);
        assert_eq!(b.step(&tally(0, 0, 0)), BudgetStep::Start);
        assert_eq!(b.step(&tally(5, 3, 1)), BudgetStep::Start);
        // Every slot held: wait, one of the running may fail.
        assert_eq!(b.step(&tally(5, 5, 0)), BudgetStep::Wait);
        assert_eq!(b.step(&tally(9, 1, 0)), BudgetStep::Wait);
        // A waiting trial holds its slot, and claiming it keeps the count.
        assert_eq!(b.step(&tally(5, 4, 1)), BudgetStep::Start);
        // Enqueued beyond the budget: claimed while the running leave room.
        assert_eq!(b.step(&tally(8, 1, 2)), BudgetStep::Start);
        assert_eq!(b.step(&tally(8, 2, 2)), BudgetStep::Wait);
        assert_eq!(b.step(&tally(10, 0, 0)), BudgetStep::Done);
        assert_eq!(b.step(&tally(12, 0, 3)), BudgetStep::Done);
    }

    #[test]
    fn a_past_deadline_ends_the_study_and_no_budget_starts_always() {
        let past = Utc::now() - chrono::Duration::seconds(1);
        let future = Utc::now() + chrono::Duration::hours(1);
        assert_eq!(
            StudyBudget::trials(10).until(past).step(&tally(0, 0, 0)),
            BudgetStep::Done
        );
        assert_eq!(
            StudyBudget::default()
                .until(future)
                .step(&tally(100, 50, 0)),
            BudgetStep::Start
        );
        assert!(StudyBudget::default().is_unlimited());
        assert!(!StudyBudget::trials(1).is_unlimited());
    }

    #[test]
    fn the_budget_round_trips_through_its_attribute_json() {
        let b = StudyBudget::trials(24).until("2030-01-02T03:04:05Z".parse().unwrap());
        let v = serde_json::to_value(b).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"n_trials": 24, "deadline": "2030-01-02T03:04:05Z"})
        );
        assert_eq!(serde_json::from_value::<StudyBudget>(v).unwrap(), b);
        let none: StudyBudget = serde_json::from_value(serde_json::json!({})).unwrap();
        assert!(none.is_unlimited());
    }
}
