//! Patience: consult a pruner only once a trial has stopped improving.

use super::{nan_best, single_direction, Decision, Pruner, PrunerConfig};
use crate::direction::Direction;
use crate::error::{Error, Result};
use crate::trial::FrozenTrial;
use crate::view::StudyView;
use serde::{Deserialize, Serialize};

/// Settings of a [`PatientPruner`].
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct PatientConfig {
    /// How many reported steps without improvement to tolerate.
    pub patience: u64,
    /// The least change that counts as an improvement (finite, `>= 0`).
    pub min_delta: f64,
}

/// Wraps a pruner and consults it only when the trial has not improved over
/// its last `patience + 1` reported values (Optuna's `PatientPruner`).
///
/// With reported values `v_1 .. v_n` (in step order) and `n > patience + 1`,
/// the trial "has stalled" when the best of `v_1 .. v_(n-patience-1)`, moved by
/// `min_delta` in its favour, beats the best of the last `patience + 1`
/// values (NaN ignored; all NaN on either side never stalls). Then the
/// wrapped pruner decides; without one, the trial is pruned.
pub struct PatientPruner<P = Box<dyn Pruner>> {
    wrapped: Option<P>,
    config: PatientConfig,
}

impl<P> std::fmt::Debug for PatientPruner<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PatientPruner")
            .field("config", &self.config)
            .field(
                "wrapped",
                &self.wrapped.as_ref().map(|_| std::any::type_name::<P>()),
            )
            .finish()
    }
}

impl<P: Pruner> PatientPruner<P> {
    /// Patience in front of `wrapped`.
    pub fn new(wrapped: P, config: PatientConfig) -> Result<Self> {
        Self::validate(&config)?;
        Ok(PatientPruner {
            wrapped: Some(wrapped),
            config,
        })
    }

    fn validate(config: &PatientConfig) -> Result<()> {
        let d = config.min_delta;
        if !(d >= 0.0 && d.is_finite()) {
            return Err(Error::InvalidConfig(format!(
                "PatientPruner: `min_delta` is {d}, but must be a finite number >= 0"
            )));
        }
        Ok(())
    }

    /// The wrapped pruner, if any.
    pub fn wrapped(&self) -> Option<&P> {
        self.wrapped.as_ref()
    }

    /// The settings.
    pub fn config(&self) -> &PatientConfig {
        &self.config
    }
}

impl PatientPruner<Box<dyn Pruner>> {
    /// Patience alone: prunes as soon as the trial stalls.
    pub fn alone(config: PatientConfig) -> Result<Self> {
        Self::validate(&config)?;
        Ok(PatientPruner {
            wrapped: None,
            config,
        })
    }
}

impl<P: Pruner> PatientPruner<P> {
    fn stalled(&self, trial: &FrozenTrial, direction: Direction) -> bool {
        let values: Vec<f64> = trial.intermediate_values.values().copied().collect();
        let window = match usize::try_from(self.config.patience)
            .ok()
            .and_then(|p| p.checked_add(1))
        {
            Some(w) if values.len() > w => w,
            _ => return false,
        };
        let (before, after) = values.split_at(values.len() - window);
        let before = nan_best(before.iter().copied(), direction);
        let after = nan_best(after.iter().copied(), direction);
        // Comparisons with NaN are false, as with numpy.
        match direction {
            Direction::Minimize => before + self.config.min_delta < after,
            Direction::Maximize => before - self.config.min_delta > after,
        }
    }
}

impl<P: Pruner> Pruner for PatientPruner<P> {
    fn prune(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Result<Decision> {
        if trial.intermediate_values.is_empty() {
            return Ok(Decision::keep());
        }
        let direction = single_direction(study)?;
        if !self.stalled(trial, direction) {
            return Ok(Decision::keep());
        }
        match &self.wrapped {
            Some(p) => p.prune(study, trial),
            None => Ok(Decision::stop()),
        }
    }

    fn bracket(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Option<u32> {
        self.wrapped.as_ref()?.bracket(study, trial)
    }

    /// Patience around the wrapped pruner's settings; `None` when the
    /// wrapped pruner has none.
    fn to_config(&self) -> Option<PrunerConfig> {
        let wrapped = match &self.wrapped {
            Some(p) => Some(Box::new(p.to_config()?)),
            None => None,
        };
        Some(PrunerConfig::Patient {
            config: self.config,
            wrapped,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pruner::testing::*;
    use crate::pruner::{HyperbandConfig, Resource};

    #[test]
    fn table() {
        let nan = f64::NAN;
        // Patience alone (prunes when stalled). Minimisation form; the
        // maximisation run negates the values.
        // (patience, min_delta, curve, expected)
        let cases: Vec<(u64, f64, Vec<f64>, bool)> = vec![
            // patience 2: needs more than 3 values.
            (2, 0.0, vec![1.0, 2.0, 3.0], false),
            // before {1}, after {2,3,4}: 1 < 2 -> stalled.
            (2, 0.0, vec![1.0, 2.0, 3.0, 4.0], true),
            // before {1}, after {2, 0.5, 4}: 1 < 0.5 false.
            (2, 0.0, vec![1.0, 2.0, 0.5, 4.0], false),
            // equal best is not an improvement but not "worse" either: 1 < 1 false.
            (2, 0.0, vec![1.0, 2.0, 1.0, 4.0], false),
            // min_delta 0.5: before 1 + 0.5 < after 1.2 false -> kept (not stalled).
            (2, 0.5, vec![1.0, 2.0, 1.2, 4.0], false),
            // min_delta 0.1: 1.1 < 1.2 -> stalled.
            (2, 0.1, vec![1.0, 2.0, 1.2, 4.0], true),
            // patience 0: before {1, 2}, after {3}: 1 < 3 -> stalled.
            (0, 0.0, vec![1.0, 2.0, 3.0], true),
            // NaN ignored: before {1, NaN} -> 1, after {NaN, 3} -> 3: stalled.
            (1, 0.0, vec![1.0, nan, nan, 3.0], true),
            // all-NaN window never stalls.
            (1, 0.0, vec![1.0, 2.0, nan, nan], false),
        ];
        for d in DIRECTIONS {
            for (patience, min_delta, curve, expected) in &cases {
                let curve: Vec<f64> = curve.iter().map(|v| mirror(d, *v)).collect();
                let p = PatientPruner::alone(PatientConfig {
                    patience: *patience,
                    min_delta: *min_delta,
                })
                .unwrap();
                let got = p
                    .prune(&view("s", &[d], &[]), &running(0, &curve))
                    .unwrap()
                    .prune;
                assert_eq!(got, *expected, "{patience} {min_delta} {curve:?} {d:?}");
            }
        }
    }

    #[test]
    fn missing_steps_use_reported_order() {
        // Steps 0, 5, 7, 20 with patience 1: before {v0, v5}, after {v7, v20}.
        let d = crate::direction::Direction::Minimize;
        let t = trial(
            0,
            crate::trial::TrialState::Running,
            &[(0, 1.0), (5, 0.5), (7, 0.9), (20, 0.8)],
        );
        let p = PatientPruner::alone(PatientConfig {
            patience: 1,
            min_delta: 0.0,
        })
        .unwrap();
        assert!(p.prune(&view("s", &[d], &[]), &t).unwrap().prune);
    }

    #[test]
    fn forwards_decision_and_bracket() {
        let d = crate::direction::Direction::Minimize;
        let hb = HyperbandConfig {
            min_resource: 1,
            max_resource: Resource::Steps(9),
            ..Default::default()
        }
        .init()
        .unwrap();
        let p = PatientPruner::new(
            hb,
            PatientConfig {
                patience: 0,
                min_delta: 0.0,
            },
        )
        .unwrap();
        let t = running(3, &[1.0]);
        assert!(p.bracket(&view("s", &[d], &[]), &t).is_some());
        assert_eq!(
            p.bracket(&view("s", &[d], &[]), &t),
            p.wrapped().unwrap().bracket(&view("s", &[d], &[]), &t)
        );
        // Stalled at step 1 (1 < 2): the wrapped pruner decides and its rung
        // record is passed through.
        let t = running(3, &[1.0, 2.0]);
        let inner = p
            .wrapped()
            .unwrap()
            .prune(&view("s", &[d], &[]), &t)
            .unwrap();
        assert_eq!(p.prune(&view("s", &[d], &[]), &t).unwrap(), inner);
    }

    #[test]
    fn rejects_bad_min_delta() {
        for bad in [-0.1, f64::NAN, f64::INFINITY] {
            let err = PatientPruner::alone(PatientConfig {
                patience: 1,
                min_delta: bad,
            })
            .unwrap_err();
            assert!(err.to_string().contains("min_delta"), "{err}");
        }
    }
}
