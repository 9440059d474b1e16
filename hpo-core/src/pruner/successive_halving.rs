//! Asynchronous successive halving (ASHA, Li et al. 2018), as in Optuna.
//!
//! Rung `r` sits at step `min_resource * reduction_factor^(min_early_stopping_rate + r)`.
//! The first time a trial is checked at or after a rung's step, its value
//! there is recorded in the trial's system attribute `completed_rung_r` (the
//! value reported at the step being checked, which is the rung step itself
//! when `should_prune` is called after every report). The trial goes on to
//! the next rung only if its value is among the top `1/reduction_factor` of
//! all values recorded for that rung so far, its own included; otherwise it
//! is pruned.
//!
//! Why system attributes and not a recomputation from intermediate values:
//! a trial's rung value is the value at the step where the pruner *was
//! called*, which depends on how often the objective calls `should_prune`
//! and on wrappers such as [`super::PatientPruner`] that consult this pruner
//! only once patience runs out. Recording it, as Optuna does, is the only way
//! to take Optuna's decisions, and keeps studies readable by Optuna in both
//! directions. The attributes travel in [`Decision::system_attrs`].

use super::{check_at_least, single_direction, Decision, Pruner, PrunerConfig, Resource};
use crate::direction::Direction;
use crate::error::{Error, Result};
use crate::trial::{FrozenTrial, TrialState};
use crate::view::StudyView;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::OnceLock;

/// Settings of a [`SuccessiveHalvingPruner`] (Optuna's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SuccessiveHalvingConfig {
    /// Step of the first rung (at least 1), or `"auto"`: the largest last
    /// step among COMPLETE trials divided by 100 (at least 1), estimated the
    /// first time a COMPLETE trial exists and then kept.
    pub min_resource: Resource,
    /// Rungs are this factor apart and keep the top `1/reduction_factor`
    /// (at least 2).
    pub reduction_factor: u64,
    /// Skips the first rungs: the first rung is at
    /// `min_resource * reduction_factor^min_early_stopping_rate`.
    pub min_early_stopping_rate: u64,
    /// A trial is pruned at a rung until more than this many trials
    /// (itself included) have reached it. Needs a fixed `min_resource`.
    pub bootstrap_count: u64,
}

impl Default for SuccessiveHalvingConfig {
    fn default() -> Self {
        SuccessiveHalvingConfig {
            min_resource: Resource::Auto,
            reduction_factor: 4,
            min_early_stopping_rate: 0,
            bootstrap_count: 0,
        }
    }
}

impl SuccessiveHalvingConfig {
    /// Validates the settings and builds the pruner.
    pub fn init(self) -> Result<SuccessiveHalvingPruner> {
        SuccessiveHalvingPruner::new(self)
    }
}

/// Prunes by asynchronous successive halving (Optuna's `SuccessiveHalvingPruner`).
///
/// A NaN value at a rung prunes the trial.
#[derive(Debug)]
pub struct SuccessiveHalvingPruner {
    config: SuccessiveHalvingConfig,
    /// `min_resource`, once known (fixed at construction, or estimated).
    min_resource: OnceLock<u64>,
}

impl SuccessiveHalvingPruner {
    /// A pruner with `config`, or [`Error::InvalidConfig`] naming the bad setting.
    pub fn new(config: SuccessiveHalvingConfig) -> Result<Self> {
        const NAME: &str = "SuccessiveHalvingPruner";
        check_at_least("reduction_factor", config.reduction_factor, 2, NAME)?;
        let min_resource = OnceLock::new();
        match config.min_resource {
            Resource::Steps(n) => {
                check_at_least("min_resource", n, 1, NAME)?;
                let _ = min_resource.set(n);
            }
            Resource::Auto if config.bootstrap_count > 0 => {
                return Err(Error::InvalidConfig(format!(
                    "{NAME}: `bootstrap_count` is {} but `min_resource` is \"auto\"; \
                     bootstrapping needs a fixed `min_resource`",
                    config.bootstrap_count
                )));
            }
            Resource::Auto => {}
        }
        Ok(SuccessiveHalvingPruner {
            config,
            min_resource,
        })
    }

    /// The settings.
    pub fn config(&self) -> &SuccessiveHalvingConfig {
        &self.config
    }

    /// `min_resource`, estimating it from `study` if it is `"auto"` and not yet known.
    fn min_resource(&self, study: &StudyView<'_>) -> Option<u64> {
        if let Some(m) = self.min_resource.get() {
            return Some(*m);
        }
        let last_step = study
            .trials_in(&[TrialState::Complete])
            .filter_map(|t| t.last_intermediate().map(|(s, _)| s))
            .max()?;
        Some(*self.min_resource.get_or_init(|| (last_step / 100).max(1)))
    }

    /// The step of rung `rung`, `None` past `u64::MAX` (never reached).
    fn rung_step(&self, min_resource: u64, rung: u64) -> Option<u64> {
        let exp = u32::try_from(self.config.min_early_stopping_rate.checked_add(rung)?).ok()?;
        min_resource.checked_mul(self.config.reduction_factor.checked_pow(exp)?)
    }
}

/// The system attribute holding a trial's value at rung `rung` (Optuna's key).
pub fn completed_rung_key(rung: u64) -> String {
    format!("completed_rung_{rung}")
}

/// The first rung `trial` has not completed yet.
fn current_rung(trial: &FrozenTrial) -> u64 {
    let mut rung = 0;
    while trial.system_attrs.contains_key(&completed_rung_key(rung)) {
        rung += 1;
    }
    rung
}

/// Whether `value` is in the top `1/reduction_factor` of `competing` (which
/// includes it); the first `reduction_factor - 1` trials at a rung need to be
/// the best so far.
fn promotable(
    value: f64,
    mut competing: Vec<f64>,
    reduction_factor: u64,
    direction: Direction,
) -> bool {
    let idx = ((competing.len() as u64 / reduction_factor).saturating_sub(1)) as usize;
    competing.sort_by(f64::total_cmp);
    match direction {
        Direction::Maximize => competing.iter().rev().nth(idx).is_some_and(|c| value >= *c),
        Direction::Minimize => competing.get(idx).is_some_and(|c| value <= *c),
    }
}

impl Pruner for SuccessiveHalvingPruner {
    fn prune(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Result<Decision> {
        let Some((step, value)) = trial.last_intermediate() else {
            return Ok(Decision::keep());
        };
        let Some(min_resource) = self.min_resource(study) else {
            return Ok(Decision::keep());
        };
        let direction = single_direction(study)?;
        let mut decision = Decision::keep();
        let mut rung = current_rung(trial);
        loop {
            match self.rung_step(min_resource, rung) {
                Some(rung_step) if step >= rung_step => {}
                _ => return Ok(decision),
            }
            if value.is_nan() {
                decision.prune = true;
                return Ok(decision);
            }
            let key = completed_rung_key(rung);
            // Every trial of the view that reached this rung; the running
            // trial's own copy cannot have `key` yet (it is its current rung).
            let mut competing: Vec<f64> = study
                .iter()
                .filter_map(|t| t.system_attrs.get(&key).and_then(Value::as_f64))
                .collect();
            competing.push(value);
            decision.system_attrs.push((key, Value::from(value)));
            if competing.len() as u64 <= self.config.bootstrap_count
                || !promotable(value, competing, self.config.reduction_factor, direction)
            {
                decision.prune = true;
                return Ok(decision);
            }
            rung += 1;
        }
    }

    fn to_config(&self) -> Option<PrunerConfig> {
        Some(PrunerConfig::SuccessiveHalving(self.config))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pruner::testing::*;
    use std::sync::Arc;

    fn at_rungs(
        number: u64,
        state: TrialState,
        rungs: &[f64],
        curve: &[(u64, f64)],
    ) -> Arc<FrozenTrial> {
        let mut t = trial(number, state, curve);
        for (r, v) in rungs.iter().enumerate() {
            t.system_attrs
                .insert(completed_rung_key(r as u64), Value::from(*v));
        }
        Arc::new(t)
    }

    fn config(min_resource: u64, reduction_factor: u64) -> SuccessiveHalvingConfig {
        SuccessiveHalvingConfig {
            min_resource: Resource::Steps(min_resource),
            reduction_factor,
            ..Default::default()
        }
    }

    /// min_resource 1, reduction_factor 2: rungs at steps 1, 2, 4, 8.
    /// Other trials recorded (minimisation form) rung 0 = {1, 2, 3},
    /// rung 1 = {1, 2}.
    /// (name, running curve at steps 0.., rung values already on the running
    /// trial, expected prune, expected newly recorded rungs)
    type Case = (&'static str, Vec<f64>, Vec<f64>, bool, Vec<u64>);

    #[test]
    fn table() {
        let nan = f64::NAN;
        let cases: Vec<Case> = vec![
            (
                "step 0 below rung 0 (step 1)",
                vec![9.0],
                vec![],
                false,
                vec![],
            ),
            // rung 0: competing {1,2,3,1.5}: 4/2-1 = index 1 -> 1.5: 1.5 <= 1.5 promoted;
            (
                "rung 0 promoted at step 1",
                vec![9.0, 1.5],
                vec![],
                false,
                vec![0],
            ),
            // rung 0: {1,2,3,2.5} index 1 -> 2: 2.5 > 2 pruned
            (
                "rung 0 pruned at step 1",
                vec![9.0, 2.5],
                vec![],
                true,
                vec![0],
            ),
            // rung 1 at step 2: {1,2,1.5}: 3/2-1 = 0 -> 1: 1.5 > 1 pruned
            (
                "rung 1 pruned at step 2",
                vec![9.0, 1.5, 1.5],
                vec![1.5],
                true,
                vec![1],
            ),
            (
                "rung 1 promoted at step 2",
                vec![9.0, 1.5, 0.5],
                vec![1.5],
                false,
                vec![1],
            ),
            (
                "step 3 between rungs 1 and 2",
                vec![9.0, 1.5, 0.5, 0.5],
                vec![1.5, 0.5],
                false,
                vec![],
            ),
            // rung 2 at step 4: nobody else there: competing {0.4}, index 0: promoted
            (
                "alone at rung 2",
                vec![9.0, 1.5, 0.5, 0.5, 0.4],
                vec![1.5, 0.5],
                false,
                vec![2],
            ),
            ("NaN at a rung prunes", vec![9.0, nan], vec![], true, vec![]),
            (
                "NaN between rungs does not",
                vec![9.0, 1.0, 1.0, nan],
                vec![1.0, 1.0],
                false,
                vec![],
            ),
        ];
        for d in DIRECTIONS {
            let m = |v: f64| mirror(d, v);
            let hist = vec![
                at_rungs(
                    0,
                    TrialState::Complete,
                    &[m(1.0), m(1.0)],
                    &steps(&[0.0; 9]),
                ),
                at_rungs(1, TrialState::Pruned, &[m(2.0), m(2.0)], &steps(&[0.0; 3])),
                at_rungs(2, TrialState::Pruned, &[m(3.0)], &steps(&[0.0; 2])),
            ];
            let pruner = config(1, 2).init().unwrap();
            for (name, curve, own, expected, recorded) in &cases {
                let curve: Vec<f64> = curve.iter().map(|v| m(*v)).collect();
                let own: Vec<f64> = own.iter().map(|v| m(*v)).collect();
                let t = at_rungs(9, TrialState::Running, &own, &steps(&curve));
                let got = pruner.prune(&view("s", &[d], &hist), &t).unwrap();
                assert_eq!(got.prune, *expected, "{name} ({d:?})");
                let keys: Vec<String> = recorded.iter().map(|r| completed_rung_key(*r)).collect();
                let got_keys: Vec<String> =
                    got.system_attrs.iter().map(|(k, _)| k.clone()).collect();
                assert_eq!(got_keys, keys, "{name} ({d:?})");
            }
        }
    }

    #[test]
    fn one_check_can_cross_several_rungs() {
        // Missing steps: reported 0 then 5; rungs at 1, 2, 4 all crossed at
        // step 5 with the value at step 5. Alone in the study: promoted thrice.
        let d = Direction::Minimize;
        let pruner = config(1, 2).init().unwrap();
        let t = trial(0, TrialState::Running, &[(0, 3.0), (5, 2.0)]);
        let got = pruner.prune(&view("s", &[d], &[]), &t).unwrap();
        assert!(!got.prune);
        let want: Vec<(String, Value)> = (0..3)
            .map(|r| (completed_rung_key(r), Value::from(2.0)))
            .collect();
        assert_eq!(got.system_attrs, want);
    }

    #[test]
    fn min_early_stopping_rate_and_bootstrap() {
        // min_resource 2, factor 3, rate 1: first rung at 6.
        let d = Direction::Minimize;
        let c = SuccessiveHalvingConfig {
            min_early_stopping_rate: 1,
            ..config(2, 3)
        };
        let p = c.init().unwrap();
        let t5 = running(0, &[1.0; 6]);
        let t6 = running(0, &[1.0; 7]);
        assert_eq!(
            p.prune(&view("s", &[d], &[]), &t5).unwrap(),
            Decision::keep()
        );
        assert_eq!(
            p.prune(&view("s", &[d], &[]), &t6)
                .unwrap()
                .system_attrs
                .len(),
            1
        );
        // bootstrap 2: the first two trials at a rung are pruned, the third is judged.
        let b = SuccessiveHalvingConfig {
            bootstrap_count: 2,
            ..config(1, 2)
        }
        .init()
        .unwrap();
        let hist = vec![at_rungs(0, TrialState::Pruned, &[5.0], &steps(&[5.0; 2]))];
        assert!(
            b.prune(&view("s", &[d], &hist), &running(1, &[1.0, 1.0]))
                .unwrap()
                .prune
        );
        let hist2 = vec![
            hist[0].clone(),
            at_rungs(1, TrialState::Pruned, &[1.0], &steps(&[1.0; 2])),
        ];
        // competing {5, 1, 1}: 3/2-1 = 0 -> 1: 1 <= 1 promoted
        assert!(
            !b.prune(&view("s", &[d], &hist2), &running(2, &[1.0, 1.0]))
                .unwrap()
                .prune
        );
    }

    #[test]
    fn auto_min_resource_waits_for_a_complete_trial_then_stays() {
        let d = Direction::Minimize;
        let p = SuccessiveHalvingConfig::default().init().unwrap();
        let long = running(0, &[1.0; 400]);
        // No COMPLETE trial: never prunes, nothing recorded, nothing cached.
        let running_only = vec![Arc::new(running(1, &[1.0; 500]))];
        assert_eq!(
            p.prune(&view("s", &[d], &running_only), &long).unwrap(),
            Decision::keep()
        );
        assert!(p.min_resource.get().is_none());
        // COMPLETE trial with last step 250: min_resource 2, kept from now on.
        let hist = vec![complete(1, &[1.0; 251])];
        let _ = p.prune(&view("s", &[d], &hist), &long).unwrap();
        assert_eq!(p.min_resource.get(), Some(&2));
        let hist = vec![complete(1, &[1.0; 1001])];
        let _ = p.prune(&view("s", &[d], &hist), &long).unwrap();
        assert_eq!(p.min_resource.get(), Some(&2));
    }

    #[test]
    fn rejects_bad_settings() {
        for (c, needle) in [
            (config(1, 1), "`reduction_factor` is 1"),
            (config(0, 3), "`min_resource` is 0"),
            (
                SuccessiveHalvingConfig {
                    bootstrap_count: 1,
                    ..Default::default()
                },
                "bootstrap_count",
            ),
        ] {
            let err = c.init().unwrap_err();
            assert!(
                matches!(err, Error::InvalidConfig(_)) && err.to_string().contains(needle),
                "{err}"
            );
        }
    }
}
