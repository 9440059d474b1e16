//! Threshold pruning: a guard against divergence.

use super::{check_at_least, step_due, Decision, Pruner, PrunerConfig};
use crate::error::{Error, Result};
use crate::trial::FrozenTrial;
use crate::view::StudyView;
use serde::{Deserialize, Serialize};

/// Settings of a [`ThresholdPruner`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ThresholdConfig {
    /// Prune when the latest value is below this (none: no lower bound).
    pub lower: Option<f64>,
    /// Prune when the latest value is above this (none: no upper bound).
    pub upper: Option<f64>,
    /// No pruning before this step.
    pub n_warmup_steps: u64,
    /// Check every `interval_steps` steps after the warm-up (at least 1).
    pub interval_steps: u64,
}

impl Default for ThresholdConfig {
    fn default() -> Self {
        ThresholdConfig {
            lower: None,
            upper: None,
            n_warmup_steps: 0,
            interval_steps: 1,
        }
    }
}

impl ThresholdConfig {
    /// Validates the settings and builds the pruner.
    pub fn init(self) -> Result<ThresholdPruner> {
        ThresholdPruner::new(self)
    }
}

/// Prunes when the latest reported value leaves `[lower, upper]` or is NaN
/// (Optuna's `ThresholdPruner`). Independent of other trials and of the
/// direction.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ThresholdPruner {
    lower: f64,
    upper: f64,
    config: ThresholdConfig,
}

impl ThresholdPruner {
    /// A pruner with `config`, or [`Error::InvalidConfig`] naming the bad setting.
    pub fn new(config: ThresholdConfig) -> Result<Self> {
        const NAME: &str = "ThresholdPruner";
        if config.lower.is_none() && config.upper.is_none() {
            return Err(Error::InvalidConfig(format!(
                "{NAME}: set `lower`, `upper` or both"
            )));
        }
        for (name, v) in [("lower", config.lower), ("upper", config.upper)] {
            if v.is_some_and(f64::is_nan) {
                return Err(Error::InvalidConfig(format!("{NAME}: `{name}` is NaN")));
            }
        }
        let lower = config.lower.unwrap_or(f64::NEG_INFINITY);
        let upper = config.upper.unwrap_or(f64::INFINITY);
        if lower > upper {
            return Err(Error::InvalidConfig(format!(
                "{NAME}: `lower` ({lower}) is larger than `upper` ({upper})"
            )));
        }
        check_at_least("interval_steps", config.interval_steps, 1, NAME)?;
        Ok(ThresholdPruner {
            lower,
            upper,
            config,
        })
    }

    /// The settings.
    pub fn config(&self) -> &ThresholdConfig {
        &self.config
    }
}

impl Pruner for ThresholdPruner {
    fn prune(&self, _study: &StudyView<'_>, trial: &FrozenTrial) -> Result<Decision> {
        let c = &self.config;
        let Some((_, latest)) = step_due(trial, c.n_warmup_steps, c.interval_steps) else {
            return Ok(Decision::keep());
        };
        Ok(Decision::from(
            latest.is_nan() || latest < self.lower || latest > self.upper,
        ))
    }

    fn to_config(&self) -> Option<PrunerConfig> {
        Some(PrunerConfig::Threshold(self.config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pruner::testing::*;
    use crate::trial::TrialState;

    #[test]
    fn table() {
        let nan = f64::NAN;
        let both = ThresholdConfig {
            lower: Some(0.0),
            upper: Some(1.0),
            ..Default::default()
        };
        // (config, curve (steps 0..), expected)
        let cases: Vec<(ThresholdConfig, Vec<f64>, bool)> = vec![
            (both, vec![0.5], false),
            (both, vec![0.0], false), // bounds are inclusive
            (both, vec![1.0], false),
            (both, vec![-0.1], true),
            (both, vec![1.1], true),
            (both, vec![2.0, 0.5], false), // only the latest value counts
            (both, vec![0.5, nan], true),  // NaN always prunes
            (
                ThresholdConfig {
                    upper: None,
                    ..both
                },
                vec![1e9],
                false,
            ),
            (
                ThresholdConfig {
                    lower: None,
                    ..both
                },
                vec![-1e9],
                false,
            ),
            (
                ThresholdConfig {
                    n_warmup_steps: 2,
                    ..both
                },
                vec![9.0, 9.0],
                false,
            ), // step 1 < 2
            (
                ThresholdConfig {
                    n_warmup_steps: 2,
                    ..both
                },
                vec![9.0, 9.0, 9.0],
                true,
            ),
            (
                ThresholdConfig {
                    n_warmup_steps: 2,
                    ..both
                },
                vec![0.5, 0.5, nan],
                true,
            ),
            // interval 2 from warm-up 0: checks at 0, 2, 4: step 3 is skipped.
            (
                ThresholdConfig {
                    interval_steps: 2,
                    ..both
                },
                vec![9.0, 9.0, 9.0, 9.0],
                false,
            ),
            (
                ThresholdConfig {
                    interval_steps: 2,
                    ..both
                },
                vec![9.0, 9.0, 9.0, 9.0, 9.0],
                true,
            ),
        ];
        // Direction does not matter: run both.
        for d in DIRECTIONS {
            for (c, curve, expected) in &cases {
                let p = c.init().unwrap();
                assert_eq!(
                    p.prune(&view("s", &[d], &[]), &running(0, curve))
                        .unwrap()
                        .prune,
                    *expected,
                    "{c:?} {curve:?}"
                );
            }
        }
        // Missing steps: warm-up 0, interval 5; reported 0, 3, 7: 7 is the
        // first report at or after check point 5.
        let p = ThresholdConfig {
            interval_steps: 5,
            ..both
        }
        .init()
        .unwrap();
        let t = trial(0, TrialState::Running, &[(0, 0.5), (3, 9.0), (7, 9.0)]);
        assert!(
            p.prune(
                &view("s", &[crate::direction::Direction::Minimize], &[]),
                &t
            )
            .unwrap()
            .prune
        );
        let t = trial(0, TrialState::Running, &[(0, 0.5), (3, 9.0)]);
        assert!(
            !p.prune(
                &view("s", &[crate::direction::Direction::Minimize], &[]),
                &t
            )
            .unwrap()
            .prune
        );
    }

    #[test]
    fn rejects_bad_settings() {
        for (c, needle) in [
            (ThresholdConfig::default(), "set `lower`, `upper` or both"),
            (
                ThresholdConfig {
                    lower: Some(2.0),
                    upper: Some(1.0),
                    ..Default::default()
                },
                "larger than `upper`",
            ),
            (
                ThresholdConfig {
                    lower: Some(f64::NAN),
                    ..Default::default()
                },
                "`lower` is NaN",
            ),
            (
                ThresholdConfig {
                    upper: Some(1.0),
                    interval_steps: 0,
                    ..Default::default()
                },
                "interval_steps",
            ),
        ] {
            let err = c.init().unwrap_err();
            assert!(err.to_string().contains(needle), "{err}");
        }
    }
}
