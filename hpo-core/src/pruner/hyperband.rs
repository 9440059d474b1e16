//! Hyperband (Li et al. 2018) over asynchronous successive halving, as in Optuna.
//!
//! Hyperband runs `n_brackets = floor(log_rf(max_resource / min_resource)) + 1`
//! successive-halving pruners side by side; bracket `b` starts pruning at
//! `min_resource * rf^b` steps, so bracket 0 is the most aggressive and the
//! last bracket barely prunes. Each trial belongs to one bracket, chosen from
//! `crc32("{study_name}_{trial_number}") % total_budget` (Python's
//! `binascii.crc32`, so a trial lands in the same bracket as under Optuna),
//! where bracket `b`'s budget is `ceil(n_brackets * rf^s / (s + 1))` with
//! `s = n_brackets - 1 - b`.
//!
//! A trial competes only with the trials of its own bracket. Optuna filters
//! the study for that in study and trial code (`_filter_study`); here the
//! filtering happens inside [`HyperbandPruner::prune`], and the study learns a
//! trial's bracket through [`Pruner::bracket`] to show samplers the same subset.

use super::{
    check_at_least, Decision, Pruner, PrunerConfig, Resource, SuccessiveHalvingConfig,
    SuccessiveHalvingPruner,
};
use crate::error::{Error, Result};
use crate::trial::{FrozenTrial, TrialState};
use crate::view::StudyView;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// Settings of a [`HyperbandPruner`] (Optuna's defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HyperbandConfig {
    /// Step of the first rung of the most aggressive bracket (at least 1).
    pub min_resource: u64,
    /// The step count of a trial that runs to the end, or `"auto"`: the
    /// largest last step among COMPLETE trials plus one, fixed the first time
    /// a trial is checked after some trial completed.
    pub max_resource: Resource,
    /// Rungs are this factor apart (at least 2).
    pub reduction_factor: u64,
    /// Passed to each bracket's successive halving; needs a fixed `max_resource`.
    pub bootstrap_count: u64,
}

impl Default for HyperbandConfig {
    fn default() -> Self {
        HyperbandConfig {
            min_resource: 1,
            max_resource: Resource::Auto,
            reduction_factor: 3,
            bootstrap_count: 0,
        }
    }
}

impl HyperbandConfig {
    /// Validates the settings and builds the pruner.
    pub fn init(self) -> Result<HyperbandPruner> {
        HyperbandPruner::new(self)
    }
}

/// The brackets, once `max_resource` is known.
#[derive(Debug)]
struct Brackets {
    /// Trial allocation budget per bracket.
    budgets: Vec<u64>,
    total: u64,
    pruners: Vec<SuccessiveHalvingPruner>,
}

impl Brackets {
    fn new(config: &HyperbandConfig, max_resource: u64) -> Result<Brackets> {
        let rf = config.reduction_factor;
        // Python's math.log(max / min, rf), bit for bit.
        let ratio = max_resource as f64 / config.min_resource as f64;
        let n = (ratio.ln() / (rf as f64).ln()).floor() + 1.0;
        // Fewer than one bracket (auto max_resource below min_resource): Optuna
        // then never prunes; so do we.
        let n_brackets = if n >= 1.0 { n as u64 } else { 0 };
        let mut budgets = Vec::new();
        let mut pruners = Vec::new();
        for b in 0..n_brackets {
            let s = n_brackets - 1 - b;
            let budget = u32::try_from(s)
                .ok()
                .and_then(|s32| rf.checked_pow(s32))
                .and_then(|p| p.checked_mul(n_brackets))
                .map(|x| x.div_ceil(s + 1))
                .ok_or_else(|| {
                    Error::InvalidConfig(format!(
                        "HyperbandPruner: {n_brackets} brackets with reduction_factor {rf} overflow the \
                         trial budget; use a smaller max_resource / min_resource ratio"
                    ))
                })?;
            budgets.push(budget);
            pruners.push(SuccessiveHalvingPruner::new(SuccessiveHalvingConfig {
                min_resource: Resource::Steps(config.min_resource),
                reduction_factor: rf,
                min_early_stopping_rate: b,
                bootstrap_count: config.bootstrap_count,
            })?);
        }
        Ok(Brackets {
            total: budgets.iter().sum(),
            budgets,
            pruners,
        })
    }

    fn bracket_of(&self, study_name: &str, number: u64) -> Option<usize> {
        if self.total == 0 {
            return None;
        }
        let mut n = u64::from(crc32(format!("{study_name}_{number}").as_bytes())) % self.total;
        for (b, budget) in self.budgets.iter().enumerate() {
            if n < *budget {
                return Some(b);
            }
            n -= budget;
        }
        None
    }
}

/// Prunes by Hyperband (Optuna's `HyperbandPruner`).
#[derive(Debug)]
pub struct HyperbandPruner {
    config: HyperbandConfig,
    brackets: OnceLock<Brackets>,
}

impl HyperbandPruner {
    /// A pruner with `config`, or [`Error::InvalidConfig`] naming the bad setting.
    pub fn new(config: HyperbandConfig) -> Result<Self> {
        const NAME: &str = "HyperbandPruner";
        check_at_least("reduction_factor", config.reduction_factor, 2, NAME)?;
        check_at_least("min_resource", config.min_resource, 1, NAME)?;
        let brackets = OnceLock::new();
        match config.max_resource {
            Resource::Steps(max) => {
                if max < config.min_resource {
                    return Err(Error::InvalidConfig(format!(
                        "{NAME}: `min_resource` ({}) is larger than `max_resource` ({max})",
                        config.min_resource
                    )));
                }
                // Known now: brackets exist from the first trial on.
                let _ = brackets.set(Brackets::new(&config, max)?);
            }
            Resource::Auto if config.bootstrap_count > 0 => {
                return Err(Error::InvalidConfig(format!(
                    "{NAME}: `bootstrap_count` is {} but `max_resource` is \"auto\"; \
                     bootstrapping needs a fixed `max_resource`",
                    config.bootstrap_count
                )));
            }
            Resource::Auto => {}
        }
        Ok(HyperbandPruner { config, brackets })
    }

    /// The settings.
    pub fn config(&self) -> &HyperbandConfig {
        &self.config
    }

    /// The number of brackets, once `max_resource` is known.
    pub fn n_brackets(&self) -> Option<usize> {
        self.brackets.get().map(|b| b.pruners.len())
    }

    /// The brackets, resolving an `"auto"` `max_resource` from `study` if possible.
    fn brackets(&self, study: &StudyView<'_>) -> Result<Option<&Brackets>> {
        if let Some(b) = self.brackets.get() {
            return Ok(Some(b));
        }
        let Some(last) = study
            .trials_in(&[TrialState::Complete])
            .filter_map(|t| t.last_intermediate().map(|(s, _)| s))
            .max()
        else {
            return Ok(None);
        };
        let built = Brackets::new(&self.config, last.saturating_add(1))?;
        Ok(Some(self.brackets.get_or_init(|| built)))
    }
}

impl Pruner for HyperbandPruner {
    fn prune(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Result<Decision> {
        let Some(brackets) = self.brackets(study)? else {
            return Ok(Decision::keep());
        };
        let name = study.name();
        let Some(b) = brackets.bracket_of(name, trial.number) else {
            return Ok(Decision::keep());
        };
        let same: Vec<_> = study
            .iter()
            .filter(|t| brackets.bracket_of(name, t.number) == Some(b))
            .cloned()
            .collect();
        let bracket_study = StudyView::owned(name, study.directions(), same);
        match brackets.pruners.get(b) {
            Some(p) => p.prune(&bracket_study, trial),
            None => Ok(Decision::keep()),
        }
    }

    fn bracket(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Option<u32> {
        // As in Optuna, brackets exist once `prune` could size them; until
        // then every trial sees every other.
        let b = self
            .brackets
            .get()?
            .bracket_of(study.name(), trial.number)?;
        u32::try_from(b).ok()
    }

    fn to_config(&self) -> Option<PrunerConfig> {
        Some(PrunerConfig::Hyperband(self.config))
    }
}

/// CRC-32 (IEEE 802.3, reflected, as zlib and Python's `binascii.crc32`).
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direction::Direction;
    use crate::pruner::successive_halving::completed_rung_key;
    use crate::pruner::testing::*;
    use serde_json::Value;
    use std::sync::Arc;

    #[test]
    fn crc32_matches_binascii() {
        // python3 -c 'import binascii; print(binascii.crc32(b"..."))'
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b"seed_0"), 897_200_907);
        assert_eq!(crc32(b"seed_17"), 3_829_651_576);
    }

    #[test]
    fn brackets_and_budgets() {
        // Seed settings: min 3, max 100, rf 3: log3(33.3) = 3.19 -> 4 brackets;
        // budgets ceil(4 * 3^s / (s + 1)) for s = 3, 2, 1, 0: 27, 12, 6, 4 (total 49).
        let p = HyperbandConfig {
            min_resource: 3,
            max_resource: Resource::Steps(100),
            ..Default::default()
        }
        .init()
        .unwrap();
        let b = p.brackets.get().unwrap();
        assert_eq!(b.budgets, [27, 12, 6, 4]);
        assert_eq!(b.total, 49);
        // "seed_0": 897200907 % 49 = 29 -> 29 - 27 = 2 < 12 -> bracket 1.
        assert_eq!(b.bracket_of("seed", 0), Some(1));
        // Exact powers: log_3(9) = 2 -> 3 brackets (budgets 9/3*3=9, 3*3/2=5 (4.5), 3).
        let q = HyperbandConfig {
            min_resource: 1,
            max_resource: Resource::Steps(9),
            ..Default::default()
        }
        .init()
        .unwrap();
        assert_eq!(q.brackets.get().unwrap().budgets, [9, 5, 3]);
        // min == max: one bracket.
        let one = HyperbandConfig {
            min_resource: 5,
            max_resource: Resource::Steps(5),
            ..Default::default()
        }
        .init()
        .unwrap();
        assert_eq!(one.n_brackets(), Some(1));
    }

    #[test]
    fn bracket_hook_and_filtering() {
        let p = HyperbandConfig {
            min_resource: 1,
            max_resource: Resource::Steps(9),
            ..Default::default()
        }
        .init()
        .unwrap();
        let d = Direction::Minimize;
        let b = p.brackets.get().unwrap();
        // Find two trial numbers in bracket 0 and one in another bracket.
        let numbers: Vec<u64> = (0..100).collect();
        let in0: Vec<u64> = numbers
            .iter()
            .copied()
            .filter(|n| b.bracket_of("s", *n) == Some(0))
            .take(2)
            .collect();
        let other = numbers
            .iter()
            .copied()
            .find(|n| b.bracket_of("s", *n) != Some(0))
            .unwrap();
        // A rival in another bracket with a better rung-0 value must not count:
        // the running trial (bracket 0, rung 0 at step 1) is alone in its bracket.
        let mut rival = trial(other, TrialState::Complete, &steps(&[0.0, 0.0]));
        rival
            .system_attrs
            .insert(completed_rung_key(0), Value::from(0.0));
        let hist = vec![Arc::new(rival)];
        let t = running(in0[0], &[5.0, 5.0]);
        assert_eq!(p.bracket(&view("s", &[d], &hist), &t), Some(0));
        assert!(!p.prune(&view("s", &[d], &hist), &t).unwrap().prune);
        // The same rival in bracket 0 prunes it (competing {0, 5}: index 0 -> 0).
        let mut rival0 = trial(in0[1], TrialState::Complete, &steps(&[0.0, 0.0]));
        rival0
            .system_attrs
            .insert(completed_rung_key(0), Value::from(0.0));
        let hist0 = vec![Arc::new(rival0)];
        assert!(p.prune(&view("s", &[d], &hist0), &t).unwrap().prune);
    }

    #[test]
    fn auto_max_resource() {
        let d = Direction::Minimize;
        let p = HyperbandConfig::default().init().unwrap();
        assert_eq!(p.bracket(&view("s", &[d], &[]), &running(0, &[1.0])), None);
        assert_eq!(
            p.prune(&view("s", &[d], &[]), &running(0, &[1.0; 30]))
                .unwrap(),
            Decision::keep()
        );
        assert_eq!(p.n_brackets(), None);
        // A COMPLETE trial with last step 26: max 27, log3(27) = 3 -> 4 brackets
        // (Python's math.log(27, 3) is exactly 3.0 here, and so is ours).
        let hist = vec![complete(0, &[1.0; 27])];
        let _ = p
            .prune(&view("s", &[d], &hist), &running(1, &[1.0]))
            .unwrap();
        assert_eq!(p.n_brackets(), Some(4));
        // Auto max below min_resource: no brackets, never prunes.
        let q = HyperbandConfig {
            min_resource: 10,
            ..Default::default()
        }
        .init()
        .unwrap();
        let short = vec![complete(0, &[1.0; 3])];
        assert_eq!(
            q.prune(&view("s", &[d], &short), &running(1, &[9.0; 20]))
                .unwrap(),
            Decision::keep()
        );
        assert_eq!(q.n_brackets(), Some(0));
    }

    #[test]
    fn rejects_bad_settings() {
        for (c, needle) in [
            (
                HyperbandConfig {
                    reduction_factor: 1,
                    ..Default::default()
                },
                "`reduction_factor` is 1",
            ),
            (
                HyperbandConfig {
                    min_resource: 0,
                    ..Default::default()
                },
                "`min_resource` is 0",
            ),
            (
                HyperbandConfig {
                    min_resource: 10,
                    max_resource: Resource::Steps(5),
                    ..Default::default()
                },
                "larger than `max_resource`",
            ),
            (
                HyperbandConfig {
                    bootstrap_count: 2,
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
