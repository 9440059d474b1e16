//! A study stopped by SIGINT or SIGTERM ([`crate::signals`]): its running
//! trials failed as interrupted, each with its retry copy, and the thread
//! that does it for trials running in this process.
//!
//! The process executor's coordinator stops its workers itself and calls
//! [`Study::fail_interrupted`] for each trial they left RUNNING. Trials that
//! run on the study's own threads cannot be stopped from outside: the
//! [`watch`] thread fails them once the signal's policy says so (at once
//! after SIGINT, after the grace period after SIGTERM). Objectives that
//! return after that (a `report` on a failed trial errs, so one that reports
//! as it goes returns soon) let `optimize_with` return
//! [`Error::Interrupted`]; while any is still running, the watcher runs the
//! [`Optimize::before_exit`](super::Optimize::before_exit) hooks and ends the
//! process with the signal's exit status.

use super::optimize::{Callback, ExitHook};
use super::Study;
use crate::error::{Error, Result};
use crate::signals::{self, StopSignal};
use crate::trial::{FailureKind, FrozenTrial};
use std::collections::BTreeSet;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// How many times an interrupted configuration runs again when the study
/// has no [`RetryPolicy`](super::RetryPolicy) (with one, its `max_retries`
/// counts here too): once, so a configuration that a preemption or a Ctrl-C
/// cut short is not lost, and one that is interrupted every time it runs
/// (it hangs, and someone presses Ctrl-C) is not run forever.
pub const INTERRUPTED_RETRIES: u32 = 1;

/// How often the watcher looks at the signals.
const POLL: Duration = Duration::from_millis(20);

impl Study {
    /// Fails the RUNNING trial `trial_id`, stopped by `signal`, as
    /// [`FailureKind::Interrupted`] and, in the same transaction, enqueues
    /// its WAITING retry copy (within the study's retry policy, or
    /// [`INTERRUPTED_RETRIES`] without one), leaving the system attributes
    /// `drop` out of the copy as well as the failure's. `None` when the
    /// trial had finished meanwhile.
    pub(crate) fn fail_interrupted(
        &self,
        trial_id: u64,
        signal: StopSignal,
        drop: &[&str],
    ) -> Result<Option<Arc<FrozenTrial>>> {
        self.stop_beating(trial_id)?;
        let why = match signal {
            StopSignal::Interrupt => "SIGINT (Ctrl-C)",
            StopSignal::Terminate => {
                "SIGTERM (a scheduler's preemption or time limit) and did not finish within \
                 the grace period"
            }
        };
        let attrs = FailureKind::Interrupted.attrs(format!(
            "interrupted: the study was stopped by {why}; a WAITING copy of this configuration \
             runs in the study's next run, unless its retries are used up"
        ));
        let max_retries = self
            .core
            .retry
            .map_or(INTERRUPTED_RETRIES, |p| p.max_retries);
        let retry = |failed: &FrozenTrial| {
            let mut keys = vec![FailureKind::ATTR, FailureKind::REASON_ATTR];
            keys.extend_from_slice(drop);
            let copy = failed.retry_copy(&keys);
            (copy.retry_count() <= max_retries as usize).then_some(copy)
        };
        match self.core.storage.fail_stale_trial(trial_id, &attrs, &retry) {
            Ok((t, copy)) => {
                match copy {
                    Some(c) => tracing::warn!(
                        study = %self.core.name,
                        "trial {} interrupted by {signal}; its configuration waits as trial {}",
                        t.number,
                        c.number
                    ),
                    None => tracing::warn!(
                        study = %self.core.name,
                        "trial {} interrupted by {signal}; not retried: its configuration \
                         failed {} times (max_retries = {max_retries})",
                        t.number,
                        t.retry_count() + 1
                    ),
                }
                self.track_finished(&t);
                Ok(Some(t))
            }
            // Its owner finished it meanwhile.
            Err(Error::TrialFinished { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// The trials an in-process `optimize_with` call is running, shared by its
/// job threads and the [`watch`] thread.
#[derive(Default)]
pub(crate) struct Running {
    inner: Mutex<Jobs>,
    changed: Condvar,
}

#[derive(Default)]
struct Jobs {
    /// Job threads that have not returned yet.
    left: usize,
    /// Trials in an objective.
    trials: BTreeSet<u64>,
    /// Trials failed by the watcher whose objective has not returned.
    stopped: BTreeSet<u64>,
    /// Set once the watcher has stopped the running trials: a trial started
    /// after that must not run.
    closed: Option<StopSignal>,
}

impl Running {
    /// Registry for `jobs` job threads.
    pub(crate) fn new(jobs: usize) -> Self {
        Running {
            inner: Mutex::new(Jobs {
                left: jobs,
                ..Jobs::default()
            }),
            changed: Condvar::new(),
        }
    }

    /// A job thread is about to run the objective on `trial_id`. Returns the
    /// signal that already stopped the study, if one did: the trial must
    /// then be failed instead of run.
    pub(crate) fn enter(&self, trial_id: u64) -> Result<Option<StopSignal>> {
        let mut g = self.inner.lock()?;
        if g.closed.is_none() {
            g.trials.insert(trial_id);
        }
        Ok(g.closed)
    }

    /// The objective on `trial_id` returned.
    pub(crate) fn leave(&self, trial_id: u64) {
        if let Ok(mut g) = self.inner.lock() {
            g.trials.remove(&trial_id);
            g.stopped.remove(&trial_id);
        }
        self.changed.notify_all();
    }

    /// A job thread returned.
    pub(crate) fn job_done(&self) {
        if let Ok(mut g) = self.inner.lock() {
            g.left = g.left.saturating_sub(1);
        }
        self.changed.notify_all();
    }
}

/// The watcher of an in-process `optimize_with` call: returns when its job
/// threads have all returned; when a signal's policy says the running
/// trials must stop, fails them (with their retry copies, calling
/// `callbacks` for each) and, if objectives are still running once every
/// other job thread has returned, runs `before_exit` and ends the process
/// with the signal's exit status.
pub(crate) fn watch(
    study: &Study,
    running: &Running,
    grace: Duration,
    callbacks: &[Callback],
    before_exit: &[ExitHook],
) {
    loop {
        let Ok(g) = running.inner.lock() else { return };
        if g.left == 0 {
            return;
        }
        if let Some(signal) = g.closed {
            // Every job thread left is in an objective whose trial is
            // already failed: nothing can stop it but the end of the process.
            if g.left <= g.stopped.len() {
                drop(g);
                for hook in before_exit {
                    hook(study, signal);
                }
                study.end_tracking();
                std::process::exit(signal.exit_code());
            }
        }
        let Ok((g, _)) = running.changed.wait_timeout(g, POLL) else {
            return;
        };
        if g.closed.is_some() {
            continue;
        }
        drop(g);
        let state = signals::state();
        let Some(signal) = state.signal() else {
            continue;
        };
        if !state.stops_running(grace) {
            continue;
        }
        let ids = {
            let Ok(mut g) = running.inner.lock() else {
                return;
            };
            g.closed = Some(signal);
            let ids = std::mem::take(&mut g.trials);
            g.stopped.clone_from(&ids);
            ids
        };
        for id in ids {
            match study.fail_interrupted(id, signal, &[]) {
                Ok(Some(t)) => {
                    for cb in callbacks {
                        cb(study, &t);
                    }
                }
                Ok(None) => {}
                Err(e) => tracing::error!(
                    study = study.name(),
                    "cannot fail an interrupted trial (id {id}); it stays RUNNING until \
                     heartbeats reap it: {e}"
                ),
            }
        }
    }
}
