//! [`CmaEsSampler`]: the [`crate::Sampler`] implementation.

use super::cma::{default_popsize, Cma};
use super::config::CmaEsConfig;
use super::margin::CmaWm;
use super::sep::SepCma;
use super::state::{Keys, Optimizer, State, X_FOR_TELL};
use super::warm::warm_start;
use crate::direction::Direction;
use crate::distribution::{Distribution, Support};
use crate::error::{Error, Result};
use crate::sampler::sample_uniform;
use crate::sampler::stream::{os_seed, trial_rng};
use crate::sampler::transform::{bounds_with, transform, untransform};
use crate::sampler::{intersection_search_space, RelativeSample, Sampler, SamplerConfig};
use crate::trial::{FrozenTrial, TrialState};
use crate::view::StudyView;
use rand::Rng;
use serde_json::Value;
use std::collections::BTreeMap;

/// Samples numeric parameters with CMA-ES (covariance matrix adaptation
/// evolution strategy), after Optuna 5.0's `CmaEsSampler`.
///
/// CMA-ES samples each generation of `popsize` trials from a multivariate
/// normal distribution, then moves the distribution's mean towards the best
/// half and reshapes its covariance along the directions that paid off. It
/// shines on continuous spaces of a few to a few tens of parameters with
/// budgets of hundreds of trials or more, where TPE's independent
/// per-parameter view misses interactions.
///
/// The relative search space is the float and integer parameters every
/// COMPLETE trial has (Optuna's intersection search space); categoricals,
/// conditional parameters, the start-up trials and values outside a narrowed
/// support are sampled uniformly at random. Variants ([`CmaEsConfig`]):
/// separable CMA-ES, CMA-ES with margin for integers, learning-rate
/// adaptation, IPOP restarts, and a warm start from another study's trials
/// ([`CmaEsSampler::with_source_trials`]).
///
/// The distribution is stored in the study (trial system attributes), so a
/// study resumed in a new process continues the same search. Single-objective
/// studies only.
///
/// ```
/// use hpo_core::{CmaEsConfig, CmaEsSampler, Direction, Study};
/// use std::sync::Arc;
///
/// # fn main() -> hpo_core::Result<()> {
/// let study = Study::builder()
///     .direction(Direction::Minimize)
///     .sampler(Arc::new(CmaEsSampler::with_config(CmaEsConfig::seeded(1))?))
///     .build()?;
/// study.optimize(300, |trial| {
///     let x = trial.suggest_float("x", -5.0, 5.0)?;
///     let y = trial.suggest_float("y", -5.0, 5.0)?;
///     Ok((x - 1.0).powi(2) + 10.0 * (y + 2.0).powi(2))
/// })?;
/// let best = study.best_trial()?;
/// assert!(best.value().unwrap_or(f64::MAX) < 1e-4);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct CmaEsSampler {
    config: CmaEsConfig,
    seed: u64,
    keys: Keys,
    /// Trials of an earlier, similar study to warm-start from.
    source: Vec<FrozenTrial>,
}

impl Default for CmaEsSampler {
    fn default() -> Self {
        Self::new()
    }
}

/// One coordinate: a parameter, its distribution and its range in
/// transformed units (mapped onto `[0, 1]` for CMA-ES).
struct Axis<'a> {
    name: &'a str,
    dist: &'a Distribution,
    lo: f64,
    hi: f64,
}

impl Axis<'_> {
    fn unit(&self, internal: f64) -> f64 {
        ((transform(self.dist, internal) - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
    }

    fn value(&self, u: f64) -> f64 {
        untransform(self.dist, self.lo + u * (self.hi - self.lo))
    }
}

impl CmaEsSampler {
    /// A sampler with Optuna's defaults, seeded from the operating system.
    pub fn new() -> Self {
        Self::build(CmaEsConfig::default())
    }

    /// A sampler with `config`; fails on the settings
    /// [`CmaEsConfig::validate`] rejects.
    pub fn with_config(config: CmaEsConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self::build(config))
    }

    fn build(config: CmaEsConfig) -> Self {
        let seed = config.seed.unwrap_or_else(os_seed);
        let prefix = if config.separable {
            "sepcma:"
        } else if config.with_margin {
            "cmawm:"
        } else {
            "cma:"
        };
        CmaEsSampler {
            keys: Keys::new(prefix),
            config,
            seed,
            source: Vec::new(),
        }
    }

    /// The same sampler keeping its state under `prefix` instead of
    /// Optuna's keys, so that two CMA-ES runs of one study (AutoSampler's
    /// early and late ones) do not continue each other.
    pub(crate) fn keyed(mut self, prefix: &str) -> Self {
        self.keys = Keys::new(prefix);
        self
    }

    /// Warm-starts CMA-ES (WS-CMA-ES, Nomura et al., 2021) from the best
    /// tenth of `trials`, typically another study's on a similar task: the
    /// initial mean and covariance are those of the good solutions found
    /// there. Only COMPLETE trials (and PRUNED ones, with
    /// `consider_pruned_trials`) over exactly the same search space count.
    /// Fails for separable CMA-ES or a set `sigma0` (as Optuna), or when no
    /// trial is usable.
    pub fn with_source_trials(
        mut self,
        trials: impl IntoIterator<Item = FrozenTrial>,
    ) -> Result<Self> {
        if let Some(m) = self.config.warm_start_conflict("a CMA-ES warm start") {
            return Err(Error::InvalidConfig(m));
        }
        self.source = trials
            .into_iter()
            .filter(|t| self.solution_value(t, Direction::Minimize).is_some())
            .collect();
        if self.source.is_empty() {
            return Err(Error::InvalidConfig(
                "no source trial for the CMA-ES warm start is COMPLETE with a value".into(),
            ));
        }
        Ok(self)
    }

    /// The settings.
    pub fn config(&self) -> &CmaEsConfig {
        &self.config
    }

    /// `trial`'s value to minimise, when it counts as a solution.
    fn solution_value(&self, trial: &FrozenTrial, direction: Direction) -> Option<f64> {
        let v = match trial.state {
            TrialState::Complete => trial.value(),
            TrialState::Pruned if self.config.consider_pruned_trials => {
                trial.last_intermediate().map(|(_, v)| v)
            }
            _ => None,
        }?;
        if v.is_nan() {
            return None;
        }
        Some(if direction == Direction::Maximize {
            -v
        } else {
            v
        })
    }

    /// The newest stored state among finished trials, if any parses.
    fn restore(&self, finished: &[(&FrozenTrial, f64)]) -> Option<State> {
        finished.iter().rev().find_map(|(t, _)| {
            let value = t.system_attrs.get(&self.keys.optimizer)?;
            match serde_json::from_value::<State>(value.clone()) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(
                        trial = t.number,
                        "ignoring an unreadable CMA-ES state `{}`: {e}",
                        self.keys.optimizer
                    );
                    None
                }
            }
        })
    }

    /// A new run: around `mean` (a restart's random point) when given, else
    /// warm-started from the source trials, or from the study's own
    /// `history` with [`CmaEsConfig::warm_start_from_study`], else from the
    /// box's centre; with `popsize`.
    fn optimizer(
        &self,
        axes: &[Axis<'_>],
        mean: Option<Vec<f64>>,
        history: &[(&FrozenTrial, f64)],
        popsize: usize,
    ) -> Result<Optimizer> {
        let n = axes.len();
        let bounds = vec![(0.0, 1.0); n];
        let (mean, sigma, cov) = match mean {
            Some(m) => (m, self.sigma0(), None),
            None if !self.source.is_empty() => {
                let source = self
                    .source
                    .iter()
                    .filter_map(|t| Some((t, self.solution_value(t, Direction::Minimize)?)));
                let (m, s, c) = warm_start(solutions(axes, source)).ok_or_else(|| {
                    Error::InvalidConfig(format!(
                        "no source trial of the CMA-ES warm start has this study's search space ({})",
                        axes.iter().map(|a| a.name).collect::<Vec<_>>().join(", ")
                    ))
                })?;
                (m, s, Some(c))
            }
            None => {
                let own = self
                    .config
                    .warm_start_from_study
                    .then(|| warm_start(solutions(axes, history.iter().map(|(t, v)| (*t, *v)))))
                    .flatten();
                match own {
                    Some((m, s, c)) => (m, s, Some(c)),
                    None => (vec![0.5; n], self.sigma0(), None),
                }
            }
        };
        let sigma = sigma.max(1e-8);
        if self.config.separable && n > 1 {
            return Ok(Optimizer::Separable(SepCma::new(
                mean, sigma, bounds, popsize,
            )));
        }
        let cma = Cma::new(
            mean,
            sigma,
            cov,
            bounds.clone(),
            popsize,
            self.config.lr_adapt,
        );
        if self.config.with_margin {
            let steps: Vec<f64> = axes.iter().map(|a| margin_step(a.dist)).collect();
            return Ok(Optimizer::Margin(CmaWm::new(cma, bounds, &steps)));
        }
        Ok(Optimizer::Full(cma))
    }

    fn sigma0(&self) -> f64 {
        self.config.sigma0.unwrap_or(1.0 / 6.0)
    }

    /// The point trial `t` was evaluated at, in unit coordinates.
    fn solution_point(&self, axes: &[Axis<'_>], t: &FrozenTrial) -> Option<Vec<f64>> {
        if self.config.with_margin {
            let raw = t.system_attrs.get(X_FOR_TELL)?.as_array()?;
            let x: Option<Vec<f64>> = raw.iter().map(|v| v.as_u64().map(f64::from_bits)).collect();
            return x.filter(|x| x.len() == axes.len());
        }
        axes.iter()
            .map(|a| t.internal_params.get(a.name).map(|x| a.unit(*x)))
            .collect()
    }
}

/// `(point in unit coordinates, value to minimise)` of the trials over
/// exactly the search space of `axes`, for a warm start.
fn solutions<'t>(
    axes: &[Axis<'_>],
    trials: impl Iterator<Item = (&'t FrozenTrial, f64)>,
) -> Vec<(Vec<f64>, f64)> {
    trials
        .filter(|(t, _)| {
            t.distributions.len() == axes.len()
                && axes
                    .iter()
                    .all(|a| t.distributions.get(a.name) == Some(a.dist))
        })
        .filter_map(|(t, v)| {
            let x = axes
                .iter()
                .map(|a| t.internal_params.get(a.name).map(|x| a.unit(*x)))
                .collect::<Option<Vec<f64>>>()?;
            Some((x, v))
        })
        .collect()
}

/// A coordinate's step in unit coordinates for CMA-ES with margin (0: continuous).
fn margin_step(dist: &Distribution) -> f64 {
    let (low, high, step) = match dist {
        Distribution::Float(d) => match d.step() {
            Some(s) => (d.low(), d.high(), s),
            None => return 0.0,
        },
        Distribution::Int(d) if !d.is_log() => (d.low() as f64, d.high() as f64, d.step() as f64),
        _ => return 0.0,
    };
    if high > low {
        step / (high - low)
    } else {
        1.0
    }
}

impl Sampler for CmaEsSampler {
    fn infer_relative_search_space(
        &self,
        study: &StudyView<'_>,
        _trial: &FrozenTrial,
    ) -> BTreeMap<String, Distribution> {
        let mut space = intersection_search_space(study);
        space.retain(|_, d| !matches!(d, Distribution::Categorical(_)));
        space
    }

    fn sample_relative(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        space: &BTreeMap<String, Distribution>,
    ) -> Result<RelativeSample> {
        if space.is_empty() {
            return Ok(RelativeSample::default());
        }
        if study.directions().len() != 1 {
            return Err(Error::InvalidOperation(format!(
                "CMA-ES optimises one objective, but study `{}` has {}; use TPE or random sampling",
                study.name(),
                study.directions().len()
            )));
        }
        let direction = study.direction();
        let finished: Vec<(&FrozenTrial, f64)> = study
            .trials()
            .iter()
            .filter_map(|t| Some((t.as_ref(), self.solution_value(t, direction)?)))
            .collect();
        if finished.len() < self.config.n_startup_trials {
            return Ok(RelativeSample::default());
        }
        let axes: Vec<Axis<'_>> = space
            .iter()
            .map(|(name, dist)| {
                let (lo, hi) = bounds_with(dist, !self.config.with_margin);
                Axis { name, dist, lo, hi }
            })
            .collect();
        let names: Vec<String> = space.keys().cloned().collect();
        let mut state = match self.restore(&finished) {
            Some(s) => s,
            None => State {
                params: names.clone(),
                generation: 0,
                restarts: 0,
                optimizer: self.optimizer(
                    &axes,
                    None,
                    &finished,
                    self.config
                        .popsize
                        .unwrap_or_else(|| default_popsize(axes.len())),
                )?,
            },
        };
        if state.params != names || state.optimizer.dim() != axes.len() {
            tracing::warn!(
                trial = trial.number,
                "the search space changed since CMA-ES started ({:?} now, {:?} before): \
                 sampling independently",
                names,
                state.params
            );
            return Ok(RelativeSample::default());
        }
        let mut attrs = Vec::new();
        let popsize = state.optimizer.popsize();
        let generation_trials: Vec<(Vec<f64>, f64)> = finished
            .iter()
            .filter(|(t, _)| {
                t.system_attrs
                    .get(&self.keys.generation)
                    .and_then(Value::as_u64)
                    == Some(state.generation)
            })
            .filter_map(|(t, v)| Some((self.solution_point(&axes, t)?, *v)))
            .take(popsize)
            .collect();
        if generation_trials.len() == popsize {
            state.optimizer.tell(generation_trials);
            state.generation += 1;
            if self.config.ipop && state.optimizer.should_stop() {
                let mut rng = trial_rng(self.seed, trial.number, "cma:restart");
                let mean: Vec<f64> = (0..axes.len()).map(|_| rng.random::<f64>()).collect();
                let popsize = popsize.saturating_mul(self.config.inc_popsize);
                state.optimizer = self.optimizer(&axes, Some(mean), &finished, popsize)?;
                state.restarts += 1;
                tracing::info!(
                    trial = trial.number,
                    "CMA-ES converged; IPOP restart {} with population {popsize}",
                    state.restarts
                );
            }
            let json = serde_json::to_value(&state).map_err(|e| Error::Parse {
                what: "the CMA-ES state".into(),
                reason: "it cannot be written as JSON".into(),
                source: Some(Box::new(e)),
            })?;
            attrs.push((self.keys.optimizer.clone(), json));
        }
        let mut rng = trial_rng(self.seed, trial.number, "cma");
        let (x, raw) = state.optimizer.ask(&mut rng);
        if self.config.with_margin {
            let bits: Vec<u64> = raw.iter().map(|v| v.to_bits()).collect();
            attrs.push((X_FOR_TELL.to_owned(), Value::from(bits)));
        }
        attrs.push((self.keys.generation.clone(), Value::from(state.generation)));
        let params = axes
            .iter()
            .zip(x)
            .map(|(a, u)| (a.name.to_owned(), a.value(u)))
            .collect();
        Ok(RelativeSample {
            params,
            system_attrs: attrs,
        })
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
        Some(SamplerConfig::CmaEs(CmaEsConfig {
            seed: Some(self.seed),
            ..self.config.clone()
        }))
    }
}
