//! What a study did, for people: each trial's state in words, and the
//! summary printed after a run (states, OOM relaunches, configurations found
//! infeasible before launch, the largest peak memory measured, time per
//! trial).

use crate::executor::{self, GIB};
use crate::{FailureKind, FrozenTrial, TrialState};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

/// The user attribute in which a trial run in this process records its
/// process's peak resident memory (hpo-burn's trainer does).
pub const PROCESS_PEAK_RSS_KEY: &str = "peak_rss_bytes";

/// A trial's state in words: `complete`, `pruned`, `oom`, `infeasible`,
/// `interrupted` (stopped by SIGINT or SIGTERM), `not started` (sampled
/// ahead, never launched), `failed`, `waiting` or `running`.
pub fn state_label(t: &FrozenTrial) -> &'static str {
    match (t.state, t.failure()) {
        (TrialState::Complete, _) => "complete",
        (TrialState::Pruned, _) => "pruned",
        (TrialState::Fail, Some(FailureKind::Oom)) => "oom",
        (TrialState::Fail, Some(FailureKind::Infeasible)) => "infeasible",
        (TrialState::Fail, Some(FailureKind::Interrupted)) => "interrupted",
        (TrialState::Fail, Some(FailureKind::NotStarted)) => "not started",
        // Studies written before the kind existed: recorded as errors.
        (TrialState::Fail, _) if t.fail_reason() == Some(executor::NOT_STARTED_REASON) => {
            "not started"
        }
        (TrialState::Fail, _) => "failed",
        (TrialState::Waiting, _) => "waiting",
        _ => "running",
    }
}

/// The largest peak memory measured on a trial.
#[derive(Debug, Clone, PartialEq)]
pub struct Peak {
    /// Bytes.
    pub bytes: u64,
    /// The trial that measured it.
    pub trial: u64,
    /// Which figure it is: `device allocator`, `worker resident memory` or
    /// `process resident memory`.
    pub what: &'static str,
}

/// What a study's trials came to.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Trials in the study.
    pub trials: usize,
    /// Trials by [`state_label`].
    pub states: BTreeMap<&'static str, usize>,
    /// Trials that are the relaunch of an out-of-memory trial.
    pub oom_relaunches: usize,
    /// Configurations the executor found infeasible before launch (never
    /// given a process).
    pub infeasible_before_launch: usize,
    /// The largest peak memory measured, if any trial measured one.
    pub peak: Option<Peak>,
    /// Mean and longest duration of the finished trials, in seconds.
    pub seconds_per_trial: Option<(f64, f64)>,
}

/// The label [`Summary::after_run`] gives RUNNING trials.
const UNFINISHED: &str = "unfinished";

impl Summary {
    /// The summary of `trials`. `on_device` says what a worker's recorded
    /// peak is: the device allocator's (trials on a GPU) or the worker's
    /// resident memory (trials on the CPU).
    pub fn of(trials: &[Arc<FrozenTrial>], on_device: bool) -> Summary {
        Summary::counting(trials, on_device, false)
    }

    /// The summary printed after a run, when none of the run's own trials
    /// is running any more (it finished, or a signal stopped it): a trial
    /// still RUNNING in the storage is another process's, or was left by an
    /// earlier run that died with it, and is counted as `unfinished`, not
    /// `running` (see [`Summary::unfinished`]).
    pub fn after_run(trials: &[Arc<FrozenTrial>], on_device: bool) -> Summary {
        Summary::counting(trials, on_device, true)
    }

    /// Trials RUNNING in the storage that the run this summary closes was
    /// not running ([`Summary::after_run`]): counted under `unfinished`,
    /// not `running`.
    pub fn unfinished(&self) -> usize {
        self.states.get(UNFINISHED).copied().unwrap_or(0)
    }

    fn counting(trials: &[Arc<FrozenTrial>], on_device: bool, run_ended: bool) -> Summary {
        let mut states = BTreeMap::new();
        for t in trials {
            let label = match t.state {
                TrialState::Running if run_ended => UNFINISHED,
                _ => state_label(t),
            };
            *states.entry(label).or_insert(0) += 1;
        }
        let oom_relaunches = trials
            .iter()
            .filter(|t| t.system_attrs.contains_key(executor::OOM_RETRIES_ATTR))
            .count();
        let infeasible_before_launch = trials
            .iter()
            .filter(|t| {
                t.failure() == Some(FailureKind::Infeasible)
                    && !t.system_attrs.contains_key(executor::DEVICE_ATTR)
            })
            .count();
        let peak = trials
            .iter()
            .filter_map(|t| {
                let system = t
                    .system_attrs
                    .get(executor::PEAK_BYTES_ATTR)
                    .and_then(|v| v.as_u64());
                let process = t
                    .user_attrs
                    .get(PROCESS_PEAK_RSS_KEY)
                    .and_then(|v| v.as_u64());
                let (bytes, what) = match (system, process) {
                    (Some(b), _) if on_device => (b, "device allocator"),
                    (Some(b), _) => (b, "worker resident memory"),
                    (None, Some(b)) => (b, "process resident memory"),
                    (None, None) => return None,
                };
                Some((bytes, t.number, what))
            })
            .max()
            .map(|(bytes, trial, what)| Peak { bytes, trial, what });
        let durations: Vec<f64> = trials
            .iter()
            .filter_map(|t| t.duration())
            .map(|d| d.as_secs_f64())
            .collect();
        let seconds_per_trial = (!durations.is_empty()).then(|| {
            let mean = durations.iter().sum::<f64>() / durations.len() as f64;
            (mean, durations.iter().copied().fold(0.0, f64::max))
        });
        Summary {
            trials: trials.len(),
            states,
            oom_relaunches,
            infeasible_before_launch,
            peak,
            seconds_per_trial,
        }
    }

    /// The memory line: OOM relaunches, infeasible before launch, peak.
    pub fn memory_line(&self) -> String {
        let peak = match &self.peak {
            Some(p) => format!(
                "peak memory used {:.2} GiB ({}, trial #{})",
                p.bytes as f64 / GIB as f64,
                p.what,
                p.trial
            ),
            None => "peak memory used: not measured".to_owned(),
        };
        format!(
            "{} OOM relaunches, {} infeasible before launch, {peak}",
            self.oom_relaunches, self.infeasible_before_launch
        )
    }
}

impl fmt::Display for Summary {
    /// `5 trials: {"complete": 4, "pruned": 1}; 0 OOM relaunches, ...`,
    /// then the time per trial on a second line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} trials: {:?}; {}",
            self.trials,
            self.states,
            self.memory_line()
        )?;
        if let Some((mean, max)) = self.seconds_per_trial {
            write!(f, "\ntime per trial: mean {mean:.1}s, max {max:.1}s")?;
        }
        let unfinished = self.unfinished();
        if unfinished > 0 {
            write!(
                f,
                "\n{} unfinished: RUNNING in the storage but not in this run (another process \
                 runs them, or a run that died left them; with heartbeats they are failed as \
                 stale once their last heartbeat is older than the grace period)",
                unfinished
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::{Direction, Study, TrialError};

    #[test]
    fn states_relaunches_and_peaks_are_counted() {
        let study = Study::builder()
            .direction(Direction::Maximize)
            .build()
            .unwrap();
        let mut t = study.ask().unwrap();
        t.set_system_attr(executor::PEAK_BYTES_ATTR, 3 * GIB)
            .unwrap();
        t.set_system_attr(executor::DEVICE_ATTR, 0).unwrap();
        study
            .tell(
                t,
                Err::<f64, _>(TrialError::Oom {
                    config: serde_json::json!({}),
                    message: "out of memory".into(),
                }),
            )
            .unwrap();
        let mut t = study.ask().unwrap();
        t.set_system_attr(executor::OOM_RETRIES_ATTR, 1).unwrap();
        t.set_system_attr(executor::PEAK_BYTES_ATTR, 2 * GIB)
            .unwrap();
        study.tell(t, Ok::<f64, TrialError>(0.5)).unwrap();
        let t = study.ask().unwrap();
        study
            .tell(t, Err::<f64, _>(TrialError::Infeasible("too big".into())))
            .unwrap();
        let t = study.ask().unwrap();
        study.tell(t, Err::<f64, _>(TrialError::Pruned)).unwrap();
        let trials = study.trials().unwrap();
        let s = Summary::of(&trials, true);
        assert_eq!(s.trials, 4);
        assert_eq!(
            s.states,
            BTreeMap::from([
                ("complete", 1),
                ("infeasible", 1),
                ("oom", 1),
                ("pruned", 1)
            ])
        );
        assert_eq!((s.oom_relaunches, s.infeasible_before_launch), (1, 1));
        assert_eq!(
            s.peak,
            Some(Peak {
                bytes: 3 * GIB,
                trial: 0,
                what: "device allocator"
            })
        );
        let text = s.to_string();
        assert!(
            text.starts_with(
                "4 trials: {\"complete\": 1, \"infeasible\": 1, \"oom\": 1, \"pruned\": 1}; \
                 1 OOM relaunches, 1 infeasible before launch, peak memory used 3.00 GiB \
                 (device allocator, trial #0)\ntime per trial: mean "
            ),
            "{text}"
        );
        assert_eq!(
            Summary::of(&trials, false).peak.unwrap().what,
            "worker resident memory"
        );
        assert_eq!(
            Summary::of(&[], false).memory_line(),
            "0 OOM relaunches, 0 infeasible before launch, peak memory used: not measured"
        );
    }

    /// The resumed study: two trials of this run complete, three of
    /// a run that died are still RUNNING. After the run they are not counted
    /// as running, and an interrupted trial is named as such.
    #[test]
    fn after_a_run_trials_it_is_not_running_are_unfinished() {
        let study = Study::builder().build().unwrap();
        let dead: Vec<_> = (0..3).map(|_| study.ask().unwrap()).collect();
        for _ in 0..2 {
            let t = study.ask().unwrap();
            study.tell(t, Ok::<f64, TrialError>(1.0)).unwrap();
        }
        let mut stopped = FrozenTrial::new(0, 0, TrialState::Fail);
        stopped.system_attrs = FailureKind::Interrupted
            .attrs("interrupted")
            .into_iter()
            .collect();
        let mut trials = study.trials().unwrap();
        trials.push(Arc::new(stopped));
        let s = Summary::after_run(&trials, false);
        assert_eq!(
            s.states,
            BTreeMap::from([("complete", 2), ("interrupted", 1), ("unfinished", 3)])
        );
        assert_eq!(s.unfinished(), 3);
        assert!(
            s.to_string()
                .contains("\n3 unfinished: RUNNING in the storage but not in this run"),
            "{s}"
        );
        let during = Summary::of(&trials, false);
        assert_eq!(during.states.get("running"), Some(&3));
        assert_eq!(during.unfinished(), 0);
        drop(dead);
    }
}
