//! Quasi-Monte Carlo sampling: low-discrepancy sequences instead of random
//! draws, after Optuna 5.0's `QMCSampler`.
//!
//! Random search leaves gaps and clumps; a low-discrepancy sequence covers
//! the space evenly from the first few points on, which is what a
//! space-filling search (or the start-up phase of a model-based one) wants.
//! Two sequences, both computed per point from its index:
//!
//! * `sobol` — Sobol with Joe & Kuo's direction numbers (`joe_kuo`, up to
//!   1024 parameters), scrambled by a random linear matrix and a digital
//!   shift. Its first `2^m` points are a net: prefer budgets that are powers
//!   of two.
//! * `halton` — Halton in the first prime bases, scrambled by random digit
//!   permutations; any number of parameters.
//!
//! # Where it differs from Optuna
//!
//! Optuna keeps a counter in the study's system attributes and gives each new
//! trial the next point. Here the point's index is the trial's number: the
//! trial that starts `n`-th gets point `n`, with nothing to store, so a study
//! resumed in a new process continues the sequence where it stopped, and
//! processes sharing a study (with the same seed) draw different points of
//! one sequence. Trial 0, sampled before anything defines the search space,
//! is drawn at random, so its point is skipped. Scrambling is on by default
//! (Optuna: off); the plain sequences start at the origin.

mod halton;
mod joe_kuo;
pub(in crate::sampler) mod sobol;

use self::halton::Halton;
use self::sobol::Sobol;
use super::random::sample_uniform;
use super::stream::{os_seed, trial_rng};
use super::transform::from_unit;
use super::{RelativeSample, Sampler, SamplerConfig};
use crate::distribution::{Distribution, Support};
use crate::error::Result;
use crate::trial::{FrozenTrial, TrialState};
use crate::view::StudyView;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Which low-discrepancy sequence a [`QmcSampler`] follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum QmcKind {
    /// The Sobol sequence (Joe & Kuo's direction numbers, at most 1024
    /// parameters). Optuna's default.
    #[default]
    Sobol,
    /// The Halton sequence (prime bases, any number of parameters).
    Halton,
}

/// Settings of [`QmcSampler`] (serde; every field has a default, so `{}` is
/// a valid configuration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QmcConfig {
    /// The sequence (default Sobol).
    pub kind: QmcKind,
    /// Randomise the sequence with the seed (default true; Optuna: false).
    /// Unscrambled sequences ignore the seed and start at the box's corner.
    pub scramble: bool,
    /// Seed of the scrambling and of the independent (random) draws; `None`
    /// seeds from the operating system. Processes sharing a study must share
    /// the seed to draw from one sequence.
    pub seed: Option<u64>,
}

impl Default for QmcConfig {
    fn default() -> Self {
        QmcConfig {
            kind: QmcKind::Sobol,
            scramble: true,
            seed: None,
        }
    }
}

impl QmcConfig {
    /// The default configuration with a seed.
    pub fn seeded(seed: u64) -> Self {
        QmcConfig {
            seed: Some(seed),
            ..QmcConfig::default()
        }
    }
}

/// A point source, built once per number of dimensions.
#[derive(Debug)]
enum Sequence {
    Sobol(Sobol),
    Halton(Halton),
}

impl Sequence {
    fn dims(&self) -> usize {
        match self {
            Sequence::Sobol(s) => s.dims(),
            Sequence::Halton(h) => h.dims(),
        }
    }

    fn point(&self, index: u64) -> Vec<f64> {
        match self {
            Sequence::Sobol(s) => s.point(index),
            Sequence::Halton(h) => h.point(index),
        }
    }
}

/// Samples the search space along a scrambled Sobol or Halton sequence.
///
/// The search space is the first finished trial's parameters (every kind:
/// a categorical takes one coordinate, split evenly among its choices), as
/// Optuna's `QMCSampler` infers it; trial number `n` gets the sequence's
/// point `n`. Parameters outside that space (conditional ones), values
/// outside a narrowed support, and the first trial are drawn uniformly at
/// random, as [`super::RandomSampler`] would.
///
/// ```
/// use hpo_core::{Direction, QmcConfig, QmcSampler, Study};
/// use std::sync::Arc;
///
/// # fn main() -> hpo_core::Result<()> {
/// let study = Study::builder()
///     .direction(Direction::Minimize)
///     .sampler(Arc::new(QmcSampler::with_config(QmcConfig::seeded(7))))
///     .build()?;
/// study.optimize(32, |trial| {
///     let x = trial.suggest_float("x", -5.0, 5.0)?;
///     let lr = trial.suggest_float_log("lr", 1e-5, 1e-1)?;
///     let layers = trial.suggest_int("layers", 1, 8)?;
///     Ok((x - 1.0).powi(2) + lr.log10().abs() + layers as f64)
/// })?;
/// assert_eq!(study.trials()?.len(), 32);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct QmcSampler {
    config: QmcConfig,
    seed: u64,
    /// The last sequence built (rebuilt when the number of dimensions changes).
    cache: Mutex<Option<Arc<Sequence>>>,
}

impl Default for QmcSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl QmcSampler {
    /// A scrambled Sobol sampler seeded from the operating system.
    pub fn new() -> Self {
        Self::with_config(QmcConfig::default())
    }

    /// A sampler with `config`.
    pub fn with_config(config: QmcConfig) -> Self {
        let seed = config.seed.unwrap_or_else(os_seed);
        QmcSampler {
            config,
            seed,
            cache: Mutex::new(None),
        }
    }

    /// The settings.
    pub fn config(&self) -> &QmcConfig {
        &self.config
    }

    /// The sequence in `d` dimensions.
    fn sequence(&self, d: usize) -> Result<Arc<Sequence>> {
        let mut cache = self.cache.lock()?;
        if let Some(seq) = cache.as_ref().filter(|s| s.dims() == d) {
            return Ok(Arc::clone(seq));
        }
        // One generator per dimension, on a stream no trial uses.
        let seed = self.seed;
        let rng =
            |tag: &'static str| move |j: usize| trial_rng(seed, u64::MAX, &format!("{tag}{j}"));
        let seq = Arc::new(match (self.config.kind, self.config.scramble) {
            (QmcKind::Sobol, false) => Sequence::Sobol(Sobol::new(d)?),
            (QmcKind::Sobol, true) => Sequence::Sobol(Sobol::scrambled(d, rng("qmc:sobol:"))?),
            (QmcKind::Halton, false) => Sequence::Halton(Halton::new(d)),
            (QmcKind::Halton, true) => Sequence::Halton(Halton::scrambled(d, rng("qmc:halton:"))),
        });
        *cache = Some(Arc::clone(&seq));
        Ok(seq)
    }
}

impl Sampler for QmcSampler {
    fn infer_relative_search_space(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
    ) -> BTreeMap<String, Distribution> {
        let finished = [TrialState::Complete, TrialState::Pruned];
        if let Some(first) = study.trials_in(&finished).next() {
            return first.distributions.clone();
        }
        // Nothing finished yet (parallel start): what the running trials use.
        let mut space = BTreeMap::new();
        for t in study.trials_in(&[TrialState::Running]) {
            if t.id != trial.id {
                space.extend(t.distributions.iter().map(|(k, d)| (k.clone(), d.clone())));
            }
        }
        space
    }

    fn sample_relative(
        &self,
        _study: &StudyView<'_>,
        trial: &FrozenTrial,
        space: &BTreeMap<String, Distribution>,
    ) -> Result<RelativeSample> {
        if space.is_empty() {
            return Ok(RelativeSample::default());
        }
        let point = self.sequence(space.len())?.point(trial.number);
        let params: BTreeMap<String, f64> = space
            .iter()
            .zip(point)
            .map(|((name, dist), u)| (name.clone(), from_unit(dist, u)))
            .collect();
        Ok(params.into())
    }

    fn sample_independent(
        &self,
        _study: &StudyView<'_>,
        trial: &FrozenTrial,
        name: &str,
        dist: &Distribution,
        support: &Support,
    ) -> Result<f64> {
        let mut rng = trial_rng(self.seed, trial.number, name);
        Ok(sample_uniform(&mut rng, dist, support))
    }
    fn to_config(&self) -> Option<SamplerConfig> {
        Some(SamplerConfig::Qmc(QmcConfig {
            seed: Some(self.seed),
            ..self.config.clone()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_reads_from_json_with_defaults() {
        let c: QmcConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(c, QmcConfig::default());
        let c: QmcConfig =
            serde_json::from_str(r#"{"kind": "halton", "scramble": false, "seed": 3}"#).unwrap();
        assert_eq!(c.kind, QmcKind::Halton);
        assert!(!c.scramble);
        let e = serde_json::from_str::<QmcConfig>(r#"{"kind": "latin"}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("latin"), "{e}");
        assert!(serde_json::from_str::<QmcConfig>(r#"{"scrambled": true}"#).is_err());
    }

    #[test]
    fn the_sequence_depends_on_seed_and_kind() {
        let point = |config: QmcConfig| {
            QmcSampler::with_config(config)
                .sequence(3)
                .unwrap()
                .point(5)
        };
        let a = point(QmcConfig::seeded(1));
        assert_eq!(a, point(QmcConfig::seeded(1)));
        assert_ne!(a, point(QmcConfig::seeded(2)));
        assert_ne!(
            a,
            point(QmcConfig {
                kind: QmcKind::Halton,
                ..QmcConfig::seeded(1)
            })
        );
        // Unscrambled sequences ignore the seed.
        let plain = |seed| QmcConfig {
            scramble: false,
            ..QmcConfig::seeded(seed)
        };
        assert_eq!(point(plain(1)), point(plain(2)));
    }
}
