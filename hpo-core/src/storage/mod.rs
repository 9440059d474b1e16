//! Durable study state.
//!
//! Two implementations: [`InMemoryStorage`] (one process, gone at exit) and
//! [`SqliteStorage`] (one file in Optuna 5.0's schema, several processes,
//! heartbeats), and with the `postgres` feature `PostgresStorage` (one
//! PostgreSQL database in the same schema, many machines).
//! [`storage_from_url`] opens any of them from a URL (`sqlite:study.db`,
//! `postgresql://user@host/db`). Every storage passes the
//! same conformance suite (`storage::conformance`, feature `testing`).
//!
//! # The contract
//!
//! * **Thread and process safety.** Every method may be called from several
//!   threads at once (`Storage: Send + Sync`); persistent storages must also be
//!   safe when several processes use the same database.
//! * **Trial numbers** are assigned by the storage: unique and contiguous
//!   (0, 1, 2, ...) within a study, whatever the concurrency.
//! * **Ownership.** A RUNNING trial belongs to the worker that created it with
//!   [`Storage::create_trial`] or claimed it with [`Storage::claim_waiting_trial`];
//!   only that worker writes its parameters, intermediate values, attributes and
//!   final state. A WAITING trial is claimed by exactly one worker.
//! * **Finished trials never change.** Any write to a COMPLETE, PRUNED or FAIL
//!   trial fails with [`crate::Error::TrialFinished`]. This is also the fence
//!   against a worker that was presumed dead: once its trial has been failed by
//!   heartbeat expiry, its late writes are rejected.
//! * **Reads are cheap.** [`Storage::trial_snapshot`] is called before and
//!   after every trial; implementations cache finished trials (they never
//!   change) and fetch only what changed. Its cost must not grow with the
//!   study: the built-in storages keep the study's finished front (trials
//!   `0..k`, all finished) in a [`crate::trial::SettledTrials`] and share it with every
//!   snapshot, so a snapshot after a few new trials copies only the trials
//!   from the first unfinished one on ([`TrialSnapshot::copied`]). A trial
//!   that stays RUNNING (a killed worker, with heartbeats off) holds the front
//!   back: later trials are copied until it finishes or is failed as stale.
//!   [`Storage::trials`] is the same list as a new vector (O(trials)).
//! * **Atomicity.** Every method is one transaction: a crash leaves either the
//!   old or the new state, never half of a change. Steps that must not be
//!   separated by a crash are one method: [`Storage::start_trial`] (a trial and
//!   its first heartbeat), [`Storage::fail_stale_trial`] (a stale trial's
//!   failure and its retry copy), [`Storage::create_trial`] with a template
//!   (a trial and all its details), [`Storage::finish_trial`] (state, values
//!   and attributes).

mod codec;
mod finished;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod sqlite;
mod url;

#[cfg(any(test, feature = "testing"))]
pub mod conformance;

pub use self::memory::InMemoryStorage;
#[cfg(feature = "postgres")]
pub use self::postgres::{PostgresOptions, PostgresStats, PostgresStorage};
pub use self::sqlite::{SqliteOptions, SqliteStats, SqliteStorage};
pub use self::url::{redact, scrub, sqlite_file, storage_from_url, storage_from_url_read_only};

use crate::direction::Direction;
use crate::distribution::Distribution;
use crate::error::Result;
use crate::trial::{FrozenTrial, TrialSnapshot, TrialState};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// Fails unless `state` is one [`Storage::finish_trial`] accepts (COMPLETE,
/// PRUNED or FAIL); shared by every implementation.
pub(crate) fn require_finished(state: TrialState) -> Result<()> {
    if state.is_finished() {
        Ok(())
    } else {
        Err(crate::Error::InvalidOperation(format!(
            "finish_trial needs a finished state, got {state}"
        )))
    }
}

/// Fails unless `internal` lies in `dist`, as [`Storage::set_trial_param`]
/// requires; shared by every implementation.
pub(crate) fn require_in_distribution(internal: f64, dist: &Distribution) -> Result<()> {
    if dist.contains(internal) {
        Ok(())
    } else {
        Err(crate::Error::OutOfDistribution {
            value: internal.to_string(),
            distribution: dist.to_json(),
        })
    }
}

/// A study as listed by a storage.
#[derive(Debug, Clone, PartialEq)]
pub struct StudySummary {
    /// Storage id.
    pub id: u64,
    /// Unique name.
    pub name: String,
    /// One direction per objective.
    pub directions: Vec<Direction>,
}

/// Where studies and trials live. See the [module docs](self) for the contract.
pub trait Storage: Send + Sync {
    /// Creates a study; fails with [`crate::Error::StudyExists`] if the name is taken.
    fn create_study(&self, name: &str, directions: &[Direction]) -> Result<u64>;

    /// Looks a study up by name.
    fn find_study(&self, name: &str) -> Result<Option<StudySummary>>;

    /// Every study, by id.
    fn studies(&self) -> Result<Vec<StudySummary>>;

    /// Deletes a study and all its trials.
    fn delete_study(&self, study_id: u64) -> Result<()>;

    /// Sets a study user attribute (JSON value).
    fn set_study_user_attr(&self, study_id: u64, key: &str, value: &Value) -> Result<()>;

    /// Sets a study system attribute (JSON value).
    fn set_study_system_attr(&self, study_id: u64, key: &str, value: &Value) -> Result<()>;

    /// The study's user attributes.
    fn study_user_attrs(&self, study_id: u64) -> Result<BTreeMap<String, Value>>;

    /// The study's system attributes.
    fn study_system_attrs(&self, study_id: u64) -> Result<BTreeMap<String, Value>>;

    /// Creates a trial with the next number. Without a template it is RUNNING
    /// and started now; with one, it copies the template's state, params,
    /// values, attributes and intermediate values (id, number and, for RUNNING,
    /// the start time are the storage's). Returns the stored record.
    fn create_trial(&self, study_id: u64, template: Option<&FrozenTrial>) -> Result<FrozenTrial>;

    /// Atomically moves the oldest WAITING trial of the study to RUNNING and
    /// returns it; `None` when there is none. Two callers never get the same trial.
    fn claim_waiting_trial(&self, study_id: u64) -> Result<Option<FrozenTrial>>;

    /// Starts a trial for a worker: claims the oldest WAITING trial as
    /// [`Storage::claim_waiting_trial`] does, or else creates a new RUNNING
    /// trial, and with `heartbeat` records its first heartbeat, all in one
    /// transaction: a crash never leaves a RUNNING trial that has no
    /// heartbeat yet.
    fn start_trial(&self, study_id: u64, heartbeat: bool) -> Result<FrozenTrial>;

    /// Fails a stale RUNNING trial and enqueues its retry, in one transaction.
    ///
    /// Sets `system_attrs` and the FAIL state as [`Storage::finish_trial`]
    /// does (failing with [`crate::Error::TrialFinished`] if the trial is no
    /// longer RUNNING: another worker reaped it, or its owner finished it),
    /// then calls `retry` with the failed record; a template it returns is
    /// created as [`Storage::create_trial`] would, in the same transaction,
    /// so a crash leaves either the RUNNING trial or the failed trial with its
    /// copy, never a failed trial without its retry. Returns the failed
    /// record and the copy.
    fn fail_stale_trial(
        &self,
        trial_id: u64,
        system_attrs: &[(String, Value)],
        retry: &dyn Fn(&FrozenTrial) -> Option<FrozenTrial>,
    ) -> Result<(Arc<FrozenTrial>, Option<FrozenTrial>)>;

    /// Records a parameter of a RUNNING trial (internal value and declared distribution).
    fn set_trial_param(
        &self,
        trial_id: u64,
        name: &str,
        internal: f64,
        dist: &Distribution,
    ) -> Result<()>;

    /// Records an intermediate value; a step already present is overwritten.
    fn set_trial_intermediate_value(&self, trial_id: u64, step: u64, value: f64) -> Result<()>;

    /// Sets a trial user attribute.
    fn set_trial_user_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()>;

    /// Sets a trial system attribute.
    fn set_trial_system_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()>;

    /// Finishes a RUNNING trial in one transaction: sets `system_attrs`, the
    /// values and the final state, and stamps the completion time. Fails with
    /// [`crate::Error::TrialFinished`] if the trial is not RUNNING.
    fn finish_trial(
        &self,
        trial_id: u64,
        state: TrialState,
        values: Option<&[f64]>,
        system_attrs: &[(String, Value)],
    ) -> Result<Arc<FrozenTrial>>;

    /// One trial by id.
    fn trial(&self, trial_id: u64) -> Result<Arc<FrozenTrial>>;

    /// Every trial of the study, ordered by number.
    fn trials(&self, study_id: u64) -> Result<Vec<Arc<FrozenTrial>>>;

    /// Every trial of the study, ordered by number, as a snapshot that
    /// shares the finished trials instead of copying them: the same trials
    /// as [`Storage::trials`]. Studies call it before and after every trial,
    /// so it must cost O(trials changed since the last call and unfinished
    /// trials), not O(trials); see "Reads are cheap" in the [module
    /// docs](self). The provided method wraps [`Storage::trials`] (O(trials));
    /// every built-in storage overrides it.
    fn trial_snapshot(&self, study_id: u64) -> Result<TrialSnapshot> {
        Ok(TrialSnapshot::from(self.trials(study_id)?))
    }

    /// Records that the worker owning a RUNNING trial is alive. Storages
    /// without heartbeat support ignore it.
    fn record_heartbeat(&self, _trial_id: u64) -> Result<()> {
        Ok(())
    }

    /// RUNNING trials of the study whose last heartbeat is older than
    /// `grace`, and RUNNING trials with no heartbeat at all that started more
    /// than `grace` ago (a worker killed before its first heartbeat, or a
    /// file written by a tool without heartbeats), ordered by number.
    fn stale_trials(&self, _study_id: u64, _grace: Duration) -> Result<Vec<u64>> {
        Ok(Vec::new())
    }

    /// This handle gives up a RUNNING trial it created to another process
    /// (the process executor hands each trial to a worker): a storage that
    /// keeps the trials it owns in memory must read this one from the
    /// database from now on, since someone else writes it. Storages that keep
    /// nothing ignore it.
    fn release_trial(&self, _trial_id: u64) -> Result<()> {
        Ok(())
    }
}

impl<S: Storage + ?Sized> Storage for Arc<S> {
    fn create_study(&self, name: &str, directions: &[Direction]) -> Result<u64> {
        (**self).create_study(name, directions)
    }
    fn find_study(&self, name: &str) -> Result<Option<StudySummary>> {
        (**self).find_study(name)
    }
    fn studies(&self) -> Result<Vec<StudySummary>> {
        (**self).studies()
    }
    fn delete_study(&self, study_id: u64) -> Result<()> {
        (**self).delete_study(study_id)
    }
    fn set_study_user_attr(&self, study_id: u64, key: &str, value: &Value) -> Result<()> {
        (**self).set_study_user_attr(study_id, key, value)
    }
    fn set_study_system_attr(&self, study_id: u64, key: &str, value: &Value) -> Result<()> {
        (**self).set_study_system_attr(study_id, key, value)
    }
    fn study_user_attrs(&self, study_id: u64) -> Result<BTreeMap<String, Value>> {
        (**self).study_user_attrs(study_id)
    }
    fn study_system_attrs(&self, study_id: u64) -> Result<BTreeMap<String, Value>> {
        (**self).study_system_attrs(study_id)
    }
    fn create_trial(&self, study_id: u64, template: Option<&FrozenTrial>) -> Result<FrozenTrial> {
        (**self).create_trial(study_id, template)
    }
    fn claim_waiting_trial(&self, study_id: u64) -> Result<Option<FrozenTrial>> {
        (**self).claim_waiting_trial(study_id)
    }
    fn start_trial(&self, study_id: u64, heartbeat: bool) -> Result<FrozenTrial> {
        (**self).start_trial(study_id, heartbeat)
    }
    fn fail_stale_trial(
        &self,
        trial_id: u64,
        system_attrs: &[(String, Value)],
        retry: &dyn Fn(&FrozenTrial) -> Option<FrozenTrial>,
    ) -> Result<(Arc<FrozenTrial>, Option<FrozenTrial>)> {
        (**self).fail_stale_trial(trial_id, system_attrs, retry)
    }
    fn set_trial_param(
        &self,
        trial_id: u64,
        name: &str,
        internal: f64,
        dist: &Distribution,
    ) -> Result<()> {
        (**self).set_trial_param(trial_id, name, internal, dist)
    }
    fn set_trial_intermediate_value(&self, trial_id: u64, step: u64, value: f64) -> Result<()> {
        (**self).set_trial_intermediate_value(trial_id, step, value)
    }
    fn set_trial_user_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()> {
        (**self).set_trial_user_attr(trial_id, key, value)
    }
    fn set_trial_system_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()> {
        (**self).set_trial_system_attr(trial_id, key, value)
    }
    fn finish_trial(
        &self,
        trial_id: u64,
        state: TrialState,
        values: Option<&[f64]>,
        system_attrs: &[(String, Value)],
    ) -> Result<Arc<FrozenTrial>> {
        (**self).finish_trial(trial_id, state, values, system_attrs)
    }
    fn trial(&self, trial_id: u64) -> Result<Arc<FrozenTrial>> {
        (**self).trial(trial_id)
    }
    fn trials(&self, study_id: u64) -> Result<Vec<Arc<FrozenTrial>>> {
        (**self).trials(study_id)
    }
    fn trial_snapshot(&self, study_id: u64) -> Result<TrialSnapshot> {
        (**self).trial_snapshot(study_id)
    }
    fn record_heartbeat(&self, trial_id: u64) -> Result<()> {
        (**self).record_heartbeat(trial_id)
    }
    fn stale_trials(&self, study_id: u64, grace: Duration) -> Result<Vec<u64>> {
        (**self).stale_trials(study_id, grace)
    }
    fn release_trial(&self, trial_id: u64) -> Result<()> {
        (**self).release_trial(trial_id)
    }
}
