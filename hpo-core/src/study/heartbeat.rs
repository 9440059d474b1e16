//! Heartbeats, stale trials and retries.
//!
//! A worker that crashes or is killed leaves its trial RUNNING forever. With
//! [`StudyBuilder::heartbeat`](super::StudyBuilder::heartbeat), every trial
//! started by [`Study::ask`] gets a thread that records a heartbeat in the
//! storage every `interval` until the trial is told; whoever asks for a trial
//! next first runs [`Study::fail_stale_trials`], which fails (FAIL,
//! [`FailureKind::Stale`]) the RUNNING trials whose heartbeat is older than
//! `grace`. With a [`RetryPolicy`] each such trial is re-enqueued as a WAITING
//! copy with the same parameters, recording its lineage in the system
//! attributes `failed_trial` (the first trial of the chain) and
//! `retry_history` (every failed attempt), as Optuna's
//! `RetryFailedTrialCallback` does, so Optuna tools read the lineage too.
//!
//! Finishing a trial is the fence: once a trial has been failed as stale, its
//! worker's late writes fail with [`Error::TrialFinished`], and a late `tell`
//! returns the stale record instead of an error.

use super::Study;
use crate::error::{Error, Result};
use crate::storage::Storage;
use crate::trial::{FailureKind, FrozenTrial};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often a running trial's worker proves it is alive, and how long
/// silence is tolerated before the trial is failed as stale.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Heartbeat {
    /// Time between heartbeats.
    pub interval: Duration,
    /// Age of the last heartbeat after which a RUNNING trial is stale
    /// (Optuna's default is twice the interval; allow for slow disks).
    pub grace: Duration,
}

/// Whether trials failed as stale are re-run; it also bounds the re-runs of
/// trials failed as interrupted by a signal, which are re-run
/// [`INTERRUPTED_RETRIES`](super::INTERRUPTED_RETRIES) times without a policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// How many times one configuration is retried (Optuna's `max_retry`).
    pub max_retries: u32,
}

/// The thread beating for one running trial; stops when dropped.
pub(crate) struct HeartbeatThread {
    stop: Option<mpsc::Sender<()>>,
    handle: Option<JoinHandle<()>>,
}

impl HeartbeatThread {
    /// Records a heartbeat every `interval` on a new thread (the first one was
    /// written with the trial by [`Storage::start_trial`]).
    pub(crate) fn start(
        storage: Arc<dyn Storage>,
        trial: &FrozenTrial,
        interval: Duration,
    ) -> Result<Self> {
        let (tx, rx) = mpsc::channel::<()>();
        let (id, number) = (trial.id, trial.number);
        let handle = std::thread::Builder::new()
            .name(format!("hpo-heartbeat-{number}"))
            .spawn(move || {
                // Wakes every `interval`; a message or a dropped sender stops it.
                while let Err(RecvTimeoutError::Timeout) = rx.recv_timeout(interval) {
                    match storage.record_heartbeat(id) {
                        Ok(()) => {}
                        // Only a stale-trial reaper ends someone else's
                        // trial, and it fails it: worth a warning. Any other
                        // end is the owner's own, told between two beats.
                        Err(e @ Error::TrialFinished { state, .. }) => {
                            if state == crate::TrialState::Fail {
                                tracing::warn!(trial = number, "heartbeat stopped: {e}");
                            } else {
                                tracing::debug!(trial = number, "heartbeat stopped: {e}");
                            }
                            break;
                        }
                        Err(e) => tracing::warn!(trial = number, "cannot record heartbeat: {e}"),
                    }
                }
            })
            .map_err(|e| {
                Error::storage_caused(
                    format!("cannot start the heartbeat thread of trial {number}"),
                    e,
                )
            })?;
        Ok(HeartbeatThread {
            stop: Some(tx),
            handle: Some(handle),
        })
    }
}

impl Drop for HeartbeatThread {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl Study {
    /// Fails the study's RUNNING trials whose heartbeat is older than the
    /// grace period ([`FailureKind::Stale`]) and, with a [`RetryPolicy`],
    /// enqueues a copy of each. Returns the numbers of the trials it failed.
    ///
    /// Runs at the start of every [`Study::ask`] when heartbeats are on; safe
    /// to call from several processes at once (each stale trial is failed by
    /// exactly one of them). Without heartbeats configured it does nothing.
    pub fn fail_stale_trials(&self) -> Result<Vec<u64>> {
        let Some(hb) = self.core.heartbeat else {
            return Ok(Vec::new());
        };
        let storage = &self.core.storage;
        let mut failed = Vec::new();
        for trial_id in storage.stale_trials(self.core.id, hb.grace)? {
            let attrs = FailureKind::Stale.attrs(format!(
                "no heartbeat for more than {:?}: the worker crashed, was killed or hung",
                hb.grace
            ));
            // Failing it and enqueueing its retry is one transaction.
            let retry = |t: &FrozenTrial| self.retry_template(t);
            let (t, copy) = match storage.fail_stale_trial(trial_id, &attrs, &retry) {
                Ok(out) => out,
                // Another worker failed it first, or its owner finished it meanwhile.
                Err(Error::TrialFinished { .. }) => continue,
                Err(e) => return Err(e),
            };
            tracing::warn!(study = %self.core.name, "trial {} failed as stale: no heartbeat for {:?}", t.number, hb.grace);
            failed.push(t.number);
            self.track_finished(&t);
            if let Some(copy) = copy {
                tracing::info!(study = %self.core.name, "trial {} re-enqueued as trial {}", t.number, copy.number);
            }
        }
        Ok(failed)
    }

    /// The WAITING copy of a failed trial to enqueue, as Optuna's
    /// `RetryFailedTrialCallback` builds it; `None` without a retry policy or
    /// once the policy's retries are used up.
    fn retry_template(&self, failed: &FrozenTrial) -> Option<FrozenTrial> {
        let policy = self.core.retry?;
        let copy = failed.retry_copy(&[FailureKind::ATTR, FailureKind::REASON_ATTR]);
        let attempts = copy.retry_count();
        if attempts > policy.max_retries as usize {
            tracing::warn!(
                study = %self.core.name,
                "trial {} is not retried: {attempts} attempts failed (max_retries = {})",
                failed.number,
                policy.max_retries
            );
            return None;
        }
        Some(copy)
    }
}
