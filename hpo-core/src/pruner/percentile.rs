//! Percentile pruning: stop a trial whose best value so far is worse than a
//! percentile of the COMPLETE trials' values at the same step.

use super::{check_at_least, nan_best, single_direction, step_due, Decision, Pruner, PrunerConfig};
use crate::direction::Direction;
use crate::error::{Error, Result};
use crate::trial::FrozenTrial;
use crate::view::StudyView;
use serde::{Deserialize, Serialize};

/// Settings of a [`PercentilePruner`] (Optuna's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PercentileConfig {
    /// The percentile in `[0, 100]`: a trial is pruned when its best value so
    /// far is worse than this percentile of the completed trials at the
    /// current step (for maximisation the percentile counts from the top, so
    /// `25.0` keeps the best quarter in both directions).
    pub percentile: f64,
    /// Pruning is off until this many trials are COMPLETE.
    pub n_startup_trials: u64,
    /// Pruning is off until a trial reports a step `>= n_warmup_steps`.
    pub n_warmup_steps: u64,
    /// Check every `interval_steps` steps after the warm-up (at least 1); a
    /// check point with no reported value is postponed to the next report.
    pub interval_steps: u64,
    /// At least this many completed trials must have reported the current
    /// step for a check to happen (at least 1).
    pub n_min_trials: u64,
}

impl Default for PercentileConfig {
    fn default() -> Self {
        PercentileConfig {
            percentile: 50.0,
            n_startup_trials: 5,
            n_warmup_steps: 0,
            interval_steps: 1,
            n_min_trials: 1,
        }
    }
}

impl PercentileConfig {
    /// Validates the settings and builds the pruner.
    pub fn init(self) -> Result<PercentilePruner> {
        PercentilePruner::new(self)
    }
}

/// Prunes a trial whose best intermediate value is worse than a percentile of
/// the COMPLETE trials' values at the same step (Optuna's `PercentilePruner`).
///
/// A trial whose reported values are all NaN is pruned at its first check.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PercentilePruner {
    config: PercentileConfig,
}

impl PercentilePruner {
    /// A pruner with `config`, or [`Error::InvalidConfig`] naming the bad setting.
    pub fn new(config: PercentileConfig) -> Result<Self> {
        Self::validate(&config, "PercentilePruner")?;
        Ok(PercentilePruner { config })
    }

    /// A pruner from settings already validated.
    pub(crate) const fn from_valid(config: PercentileConfig) -> Self {
        PercentilePruner { config }
    }

    pub(crate) fn validate(config: &PercentileConfig, pruner: &str) -> Result<()> {
        let p = config.percentile;
        if !(0.0..=100.0).contains(&p) {
            return Err(Error::InvalidConfig(format!(
                "{pruner}: `percentile` is {p}, but must be between 0 and 100 inclusive"
            )));
        }
        check_at_least("interval_steps", config.interval_steps, 1, pruner)?;
        check_at_least("n_min_trials", config.n_min_trials, 1, pruner)?;
        Ok(())
    }

    /// The settings.
    pub fn config(&self) -> &PercentileConfig {
        &self.config
    }
}

impl Pruner for PercentilePruner {
    fn prune(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Result<Decision> {
        let c = &self.config;
        let n_completed = study.completed().count() as u64;
        if n_completed == 0 || n_completed < c.n_startup_trials {
            return Ok(Decision::keep());
        }
        let Some((step, _)) = step_due(trial, c.n_warmup_steps, c.interval_steps) else {
            return Ok(Decision::keep());
        };
        let direction = single_direction(study)?;
        let best = nan_best(trial.intermediate_values.values().copied(), direction);
        if best.is_nan() {
            return Ok(Decision::stop());
        }
        let at_step: Vec<f64> = study
            .completed()
            .filter_map(|t| t.intermediate_values.get(&step).copied())
            .collect();
        if (at_step.len() as u64) < c.n_min_trials {
            return Ok(Decision::keep());
        }
        let q = match direction {
            Direction::Minimize => c.percentile,
            Direction::Maximize => 100.0 - c.percentile,
        };
        let p = nan_percentile(at_step, q);
        // Comparisons with NaN are false: no completed value at this step, keep.
        Ok(Decision::from(match direction {
            Direction::Maximize => best < p,
            Direction::Minimize => best > p,
        }))
    }

    fn to_config(&self) -> Option<PrunerConfig> {
        Some(PrunerConfig::Percentile(self.config))
    }
}

/// numpy's `nanpercentile(values, q)` with the default `linear` method,
/// operation for operation so results agree to the last bit.
pub(crate) fn nan_percentile(mut values: Vec<f64>, q: f64) -> f64 {
    values.retain(|v| !v.is_nan());
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let last = n - 1;
    let virtual_index = last as f64 * (q / 100.0);
    // numpy: indexes at or above the last one take the last value (index -1).
    let (prev, next, prev_f) = if virtual_index >= last as f64 {
        (last, last, -1.0)
    } else {
        let floor = virtual_index.floor();
        let i = floor as usize;
        (i, i + 1, floor)
    };
    let gamma = virtual_index - prev_f;
    lerp(values[prev], values[next], gamma)
}

/// numpy's `_lerp`.
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    let diff = b - a;
    if t >= 0.5 {
        b - diff * (1.0 - t)
    } else {
        a + diff * t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pruner::testing::*;
    use crate::trial::TrialState;

    #[test]
    fn percentile_matches_numpy_linear() {
        // numpy.percentile([1, 2, 3, 4], q): index = 3 * q / 100.
        let v = vec![4.0, 1.0, 3.0, 2.0];
        assert_eq!(nan_percentile(v.clone(), 50.0), 2.5); // index 1.5
        assert_eq!(nan_percentile(v.clone(), 25.0), 1.75); // index 0.75
        assert_eq!(nan_percentile(v.clone(), 0.0), 1.0);
        assert_eq!(nan_percentile(v.clone(), 100.0), 4.0);
        assert_eq!(nan_percentile(vec![f64::NAN, 3.0, 1.0], 50.0), 2.0); // NaN dropped
        assert!(nan_percentile(vec![f64::NAN], 50.0).is_nan());
        assert_eq!(nan_percentile(vec![7.0], 10.0), 7.0);
    }

    /// Completed curves (minimisation; the maximisation run negates every value):
    ///
    /// | trial | step 0 | step 1 | step 2 |
    /// |   0   |   1    |   1    |   -    |
    /// |   1   |   2    |   2    |   -    |
    /// |   2   |   3    |   3    |   5    |
    /// |   3   |   4    |   4    |   -    |
    ///
    /// 25th percentile at step 1 = 1.75, at step 2 = 5 (one value).
    fn history(d: crate::direction::Direction) -> Vec<std::sync::Arc<FrozenTrial>> {
        let m = |v: f64| mirror(d, v);
        vec![
            complete(0, &[m(1.0), m(1.0)]),
            complete(1, &[m(2.0), m(2.0)]),
            complete(2, &[m(3.0), m(3.0), m(5.0)]),
            complete(3, &[m(4.0), m(4.0)]),
        ]
    }

    #[test]
    fn table() {
        let nan = f64::NAN;
        // (name, config, running curve (min form), expected)
        let base = PercentileConfig {
            percentile: 25.0,
            n_startup_trials: 0,
            ..Default::default()
        };
        let cases: Vec<(&str, PercentileConfig, Vec<f64>, bool)> = vec![
            ("best 1.5 beats 1.75 at step 1", base, vec![1.5, 1.9], false),
            (
                "best 1.8 worse than 1.75 at step 1",
                base,
                vec![1.8, 1.9],
                true,
            ),
            (
                "best over steps counts, not the last",
                base,
                vec![1.0, 9.0],
                false,
            ),
            (
                "equal to the percentile is kept",
                base,
                vec![1.75, 1.75],
                false,
            ),
            (
                "step 2: best 4.9 < 5 kept",
                base,
                vec![9.0, 9.0, 4.9],
                false,
            ),
            (
                "step 3: nobody completed there, kept",
                base,
                vec![9.0, 9.0, 9.0, 9.0],
                false,
            ),
            (
                "startup: 5 trials needed, 4 complete",
                PercentileConfig {
                    n_startup_trials: 5,
                    ..base
                },
                vec![9.0, 9.0],
                false,
            ),
            (
                "warm-up: step 1 < 2",
                PercentileConfig {
                    n_warmup_steps: 2,
                    ..base
                },
                vec![9.0, 9.0],
                false,
            ),
            (
                "warm-up over at step 2: 6 > 5",
                PercentileConfig {
                    n_warmup_steps: 2,
                    ..base
                },
                vec![9.0, 9.0, 6.0],
                true,
            ),
            (
                "n_min_trials 2 at step 2 (one value)",
                PercentileConfig {
                    n_min_trials: 2,
                    ..base
                },
                vec![9.0, 9.0, 6.0],
                false,
            ),
            ("all NaN prunes", base, vec![nan, nan], true),
            ("NaN ignored in best", base, vec![1.0, nan], false),
            (
                "median 2.5 at step 1",
                PercentileConfig {
                    percentile: 50.0,
                    ..base
                },
                vec![2.6, 2.6],
                true,
            ),
            (
                "percentile 100 = worst 4",
                PercentileConfig {
                    percentile: 100.0,
                    ..base
                },
                vec![3.9, 3.9],
                false,
            ),
        ];
        for d in DIRECTIONS {
            let hist = history(d);
            for (name, config, curve, expected) in &cases {
                let curve: Vec<f64> = curve.iter().map(|v| mirror(d, *v)).collect();
                let t = running(9, &curve);
                let pruner = PercentilePruner::new(*config).unwrap();
                let got = pruner.prune(&view("s", &[d], &hist), &t).unwrap().prune;
                assert_eq!(got, *expected, "{name} ({d:?})");
            }
        }
    }

    #[test]
    fn interval_checks_first_step_of_each_window() {
        // warm-up 1, interval 3: check points 1, 4, 7, ... A bad trial is
        // pruned only at the first reported step at or after a check point.
        let d = crate::direction::Direction::Minimize;
        let hist: Vec<_> = (0..3).map(|i| complete(i, &[0.0; 10])).collect();
        let config = PercentileConfig {
            percentile: 50.0,
            n_startup_trials: 0,
            n_warmup_steps: 1,
            interval_steps: 3,
            n_min_trials: 1,
        };
        let pruner = PercentilePruner::new(config).unwrap();
        // Steps reported every step: checks at 1, 4, 7.
        let every: Vec<bool> = (0..9u64)
            .map(|last| {
                let t = trial(
                    9,
                    TrialState::Running,
                    &(0..=last).map(|s| (s, 1.0)).collect::<Vec<_>>(),
                );
                pruner.prune(&view("s", &[d], &hist), &t).unwrap().prune
            })
            .collect();
        assert_eq!(
            every,
            [false, true, false, false, true, false, false, true, false]
        );
        // Missing steps: reported 0, 2, 3, 5, 6: 2 is the first at/after 1,
        // 5 the first at/after 4; 3 and 6 are not first in their window.
        let sparse = [0u64, 2, 3, 5, 6];
        let got: Vec<bool> = (0..sparse.len())
            .map(|k| {
                let t = trial(
                    9,
                    TrialState::Running,
                    &sparse[..=k].iter().map(|&s| (s, 1.0)).collect::<Vec<_>>(),
                );
                pruner.prune(&view("s", &[d], &hist), &t).unwrap().prune
            })
            .collect();
        assert_eq!(got, [false, true, false, true, false]);
    }

    #[test]
    fn multi_objective_studies_are_an_error() {
        let dirs = [Direction::Minimize, Direction::Maximize];
        let hist = vec![complete(0, &[1.0])];
        let p = PercentileConfig {
            n_startup_trials: 0,
            ..Default::default()
        }
        .init()
        .unwrap();
        let err = p
            .prune(&view("mo", &dirs, &hist), &running(1, &[2.0]))
            .unwrap_err();
        assert!(
            err.to_string()
                .contains("single-objective study, but study `mo` has 2"),
            "{err}"
        );
    }

    #[test]
    fn rejects_bad_settings() {
        for (config, needle) in [
            (
                PercentileConfig {
                    percentile: -1.0,
                    ..Default::default()
                },
                "percentile",
            ),
            (
                PercentileConfig {
                    percentile: 100.5,
                    ..Default::default()
                },
                "percentile",
            ),
            (
                PercentileConfig {
                    percentile: f64::NAN,
                    ..Default::default()
                },
                "percentile",
            ),
            (
                PercentileConfig {
                    interval_steps: 0,
                    ..Default::default()
                },
                "interval_steps",
            ),
            (
                PercentileConfig {
                    n_min_trials: 0,
                    ..Default::default()
                },
                "n_min_trials",
            ),
        ] {
            let err = PercentilePruner::new(config).unwrap_err();
            assert!(matches!(err, Error::InvalidConfig(_)), "{err}");
            assert!(err.to_string().contains(needle), "{err}");
        }
    }
}
