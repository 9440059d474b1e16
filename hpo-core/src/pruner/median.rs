//! The median stopping rule: percentile pruning at the 50th percentile.

use super::percentile::{PercentileConfig, PercentilePruner};
use super::{Decision, Pruner, PrunerConfig};
use crate::error::Result;
use crate::trial::FrozenTrial;
use crate::view::StudyView;
use serde::{Deserialize, Serialize};

/// Settings of a [`MedianPruner`] (Optuna's defaults: 5 startup trials, no
/// warm-up, check every step, one completed trial at the step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MedianConfig {
    /// Pruning is off until this many trials are COMPLETE.
    pub n_startup_trials: u64,
    /// Pruning is off until a trial reports a step `>= n_warmup_steps`.
    pub n_warmup_steps: u64,
    /// Check every `interval_steps` steps after the warm-up (at least 1).
    pub interval_steps: u64,
    /// At least this many completed trials must have reported the current step.
    pub n_min_trials: u64,
}

impl Default for MedianConfig {
    fn default() -> Self {
        MedianConfig {
            n_startup_trials: 5,
            n_warmup_steps: 0,
            interval_steps: 1,
            n_min_trials: 1,
        }
    }
}

impl MedianConfig {
    /// Validates the settings and builds the pruner.
    pub fn init(self) -> Result<MedianPruner> {
        MedianPruner::new(self)
    }
}

/// Prunes a trial whose best intermediate value is worse than the median of
/// the COMPLETE trials' values at the same step (Optuna's `MedianPruner`,
/// and, as in Optuna, the study's default pruner).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MedianPruner {
    inner: PercentilePruner,
}

impl MedianPruner {
    /// A median pruner with `config`, or [`crate::Error::InvalidConfig`].
    pub fn new(config: MedianConfig) -> Result<Self> {
        let MedianConfig {
            n_startup_trials,
            n_warmup_steps,
            interval_steps,
            n_min_trials,
        } = config;
        let p = PercentileConfig {
            percentile: 50.0,
            n_startup_trials,
            n_warmup_steps,
            interval_steps,
            n_min_trials,
        };
        PercentilePruner::validate(&p, "MedianPruner")?;
        Ok(MedianPruner {
            inner: PercentilePruner::from_valid(p),
        })
    }
}

impl Default for MedianPruner {
    /// Optuna's defaults (`MedianConfig::default()`).
    fn default() -> Self {
        // Optuna's defaults, valid by construction (checked in the tests below).
        MedianPruner {
            inner: PercentilePruner::from_valid(PercentileConfig::default()),
        }
    }
}

impl Pruner for MedianPruner {
    fn prune(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Result<Decision> {
        self.inner.prune(study, trial)
    }

    fn to_config(&self) -> Option<PrunerConfig> {
        let c = self.inner.config();
        Some(PrunerConfig::Median(MedianConfig {
            n_startup_trials: c.n_startup_trials,
            n_warmup_steps: c.n_warmup_steps,
            interval_steps: c.interval_steps,
            n_min_trials: c.n_min_trials,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pruner::testing::*;

    #[test]
    fn default_is_valid_and_matches_optuna() {
        assert!(MedianConfig::default().init().is_ok());
        assert_eq!(
            MedianPruner::default(),
            MedianConfig::default().init().unwrap()
        );
    }

    /// Completed step-0 values 1..=5 (median 3); startup 5 is met at 5 trials.
    #[test]
    fn table() {
        for d in DIRECTIONS {
            let hist: Vec<_> = (0..5)
                .map(|i| complete(i, &[mirror(d, (i + 1) as f64)]))
                .collect();
            let four = &hist[..4];
            let pruner = MedianPruner::default();
            // (history, running value, expected)
            let cases: [(&[_], f64, bool); 4] = [
                (&hist, 3.5, true),  // worse than the median 3
                (&hist, 3.0, false), // equal: kept
                (&hist, 2.0, false),
                (four, 9.0, false), // only 4 of 5 startup trials complete
            ];
            for (h, v, expected) in cases {
                let t = running(9, &[mirror(d, v)]);
                assert_eq!(
                    pruner.prune(&view("s", &[d], h), &t).unwrap().prune,
                    expected,
                    "{v} {d:?}"
                );
            }
        }
    }

    #[test]
    fn rejects_zero_interval() {
        let err = MedianConfig {
            interval_steps: 0,
            ..Default::default()
        }
        .init()
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("MedianPruner: `interval_steps` is 0"),
            "{err}"
        );
    }
}
