//! Trial states and the reasons a trial can fail.

use std::fmt;
use std::str::FromStr;

/// The life-cycle state of a trial, with Optuna's names and meaning.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrialState {
    /// Enqueued (fixed parameters) or admitted, not started.
    Waiting,
    /// Claimed by a worker, which alone may write to it.
    Running,
    /// Finished with objective values.
    Complete,
    /// Stopped early by a pruner.
    Pruned,
    /// Failed: error, panic, non-finite value, out of memory, infeasible or stale.
    Fail,
}

impl TrialState {
    /// Optuna's enum member name (`"COMPLETE"`), as stored in the `trials.state` column.
    pub fn as_str(self) -> &'static str {
        match self {
            TrialState::Waiting => "WAITING",
            TrialState::Running => "RUNNING",
            TrialState::Complete => "COMPLETE",
            TrialState::Pruned => "PRUNED",
            TrialState::Fail => "FAIL",
        }
    }

    /// Whether the trial has ended (COMPLETE, PRUNED or FAIL); finished trials never change.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            TrialState::Complete | TrialState::Pruned | TrialState::Fail
        )
    }
}

impl fmt::Display for TrialState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for TrialState {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "WAITING" => TrialState::Waiting,
            "RUNNING" => TrialState::Running,
            "COMPLETE" => TrialState::Complete,
            "PRUNED" => TrialState::Pruned,
            "FAIL" => TrialState::Fail,
            other => {
                return Err(crate::Error::Parse {
                    what: "trial state".into(),
                    reason: format!("unknown state `{other}`"),
                    source: None,
                })
            }
        })
    }
}

/// Why a FAIL trial failed, stored in the system attribute [`FailureKind::ATTR`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The objective returned an error.
    Error,
    /// The objective panicked.
    Panic,
    /// The objective returned NaN or an infinite value.
    NonFinite,
    /// The configuration did not fit in device memory (a constraint violation).
    Oom,
    /// The configuration violates the search space's constraints (a constraint violation).
    Infeasible,
    /// The worker stopped sending heartbeats (crashed or was killed).
    Stale,
    /// SIGINT or SIGTERM stopped the study while the trial ran (see
    /// [`crate::signals`]); a WAITING retry copy runs it again.
    Interrupted,
    /// Sampled ahead but never started: the study's time ran out or it was
    /// stopped before a worker was free; a WAITING copy runs it next time.
    NotStarted,
}

impl FailureKind {
    /// System attribute holding the failure kind.
    pub const ATTR: &'static str = "hpo:failure";
    /// System attribute holding the human-readable reason (Optuna's key).
    pub const REASON_ATTR: &'static str = "fail_reason";
    /// System attribute holding constraint values (Optuna's key; > 0 means violated).
    pub const CONSTRAINTS_ATTR: &'static str = "constraints";
    /// System attribute holding the configuration that ran out of memory.
    pub const OOM_CONFIG_ATTR: &'static str = "oom_config";

    /// Stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Error => "error",
            FailureKind::Panic => "panic",
            FailureKind::NonFinite => "non_finite",
            FailureKind::Oom => "oom",
            FailureKind::Infeasible => "infeasible",
            FailureKind::Stale => "stale",
            FailureKind::Interrupted => "interrupted",
            FailureKind::NotStarted => "not_started",
        }
    }

    /// Parses a stored name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "error" => FailureKind::Error,
            "panic" => FailureKind::Panic,
            "non_finite" => FailureKind::NonFinite,
            "oom" => FailureKind::Oom,
            "infeasible" => FailureKind::Infeasible,
            "stale" => FailureKind::Stale,
            "interrupted" => FailureKind::Interrupted,
            "not_started" => FailureKind::NotStarted,
            _ => return None,
        })
    }

    /// The system attributes that record a failure of this kind:
    /// [`FailureKind::ATTR`] and [`FailureKind::REASON_ATTR`] with `reason`
    /// (a vector, so callers can add attributes of their own).
    pub fn attrs(self, reason: impl Into<String>) -> Vec<(String, serde_json::Value)> {
        vec![
            (
                Self::ATTR.to_owned(),
                serde_json::Value::from(self.as_str()),
            ),
            (
                Self::REASON_ATTR.to_owned(),
                serde_json::Value::from(reason.into()),
            ),
        ]
    }

    /// Whether the failure says something about the trial's configuration:
    /// false for a trial whose worker stopped beating or that a signal
    /// stopped, which would have gone on had it been left alone, and for
    /// one that never started.
    pub fn blames_configuration(self) -> bool {
        !matches!(
            self,
            FailureKind::Stale | FailureKind::Interrupted | FailureKind::NotStarted
        )
    }

    /// Whether samplers should treat this failure as a constraint violation
    /// (learn to avoid the region) rather than ignore it.
    pub fn is_constraint_violation(self) -> bool {
        matches!(self, FailureKind::Oom | FailureKind::Infeasible)
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failure_kinds_round_trip_and_say_whom_they_blame() {
        let all = [
            FailureKind::Error,
            FailureKind::Panic,
            FailureKind::NonFinite,
            FailureKind::Oom,
            FailureKind::Infeasible,
            FailureKind::Stale,
            FailureKind::Interrupted,
            FailureKind::NotStarted,
        ];
        for k in all {
            assert_eq!(FailureKind::parse(k.as_str()), Some(k));
        }
        assert_eq!(FailureKind::Interrupted.as_str(), "interrupted");
        let blamed: Vec<_> = all.iter().filter(|k| k.blames_configuration()).collect();
        assert_eq!(
            blamed.len(),
            5,
            "all but stale, interrupted and not started"
        );
        assert_eq!(FailureKind::NotStarted.as_str(), "not_started");
        assert!(!FailureKind::Interrupted.is_constraint_violation());
    }
}
