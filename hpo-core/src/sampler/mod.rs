//! Samplers: where the next parameters come from.
//!
//! # The contract
//!
//! A sampler sees a [`StudyView`] (immutable trials, never the storage) and the
//! trial being sampled. Per trial, [`Sampler::infer_relative_search_space`] and
//! [`Sampler::sample_relative`] run once when the trial starts (joint,
//! multivariate proposals); every parameter not covered there goes through
//! [`Sampler::sample_independent`] when the objective suggests it.
//! [`Sampler::after_trial`] runs once the trial is stored as finished.
//!
//! A sampler keeps no state of its own that a new process would need: what it
//! must remember between trials (CMA-ES's distribution and generation) it
//! returns with the joint values in a [`RelativeSample`], and the trial writes
//! it to the storage as system attributes before the objective runs, as
//! Optuna's samplers do, so the next trial (in this process or another) reads
//! it back from the history.
//!
//! Values are internal `f64`s (see [`crate::distribution`]). A returned value
//! must lie in the declared distribution *and* in the narrowed [`Support`];
//! the trial checks this and reports a sampler bug otherwise.
//!
//! Samplers are shared by every worker thread (`Send + Sync`); those with
//! state (caches) keep it behind a lock. Random draws come from per-trial
//! streams derived from the seed, the trial's number and the parameter
//! (`stream`), so a seeded sampler gives the same proposals for the same
//! history, never repeats itself when a study is resumed in a new process, and
//! proposes different configurations in processes that share a study.

mod auto;
mod cmaes;
mod config;
mod gp;
mod grid;
mod qmc;
mod random;
mod stream;
mod tpe;
mod transform;

pub use self::auto::{AutoConfig, AutoLate, AutoMixed, AutoSampler, AUTO_CHOICE_ATTR};
pub use self::cmaes::{CmaEsConfig, CmaEsSampler};
pub use self::config::SamplerConfig;
pub use self::gp::{GpConfig, GpSampler};
pub use self::grid::GridSampler;
pub use self::qmc::{QmcConfig, QmcKind, QmcSampler};
pub(crate) use self::random::sample_uniform;
pub use self::random::RandomSampler;
pub use self::tpe::{TpeBandwidth, TpeConfig, TpeSampler, TpeWeights};

use crate::distribution::{Distribution, Support};
use crate::error::Result;
use crate::trial::FrozenTrial;
use crate::view::StudyView;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Joint values proposed for a trial, with bookkeeping to record on it.
#[derive(Debug, Clone, Default, PartialEq)]
#[must_use]
pub struct RelativeSample {
    /// Internal values of some or all of the relative search space's
    /// parameters; the others are sampled independently.
    pub params: BTreeMap<String, f64>,
    /// System attributes written on the trial before its objective runs, in
    /// order (for example CMA-ES's `cma:generation`).
    pub system_attrs: Vec<(String, Value)>,
}

impl From<BTreeMap<String, f64>> for RelativeSample {
    fn from(params: BTreeMap<String, f64>) -> Self {
        RelativeSample {
            params,
            system_attrs: Vec::new(),
        }
    }
}

/// Proposes parameter values from the history of a study.
pub trait Sampler: Send + Sync {
    /// The parameters to sample jointly for `trial` (default: none).
    fn infer_relative_search_space(
        &self,
        _study: &StudyView<'_>,
        _trial: &FrozenTrial,
    ) -> BTreeMap<String, Distribution> {
        BTreeMap::new()
    }

    /// Joint values for `space`, as internal values, and what to record on
    /// the trial (default: nothing).
    fn sample_relative(
        &self,
        _study: &StudyView<'_>,
        _trial: &FrozenTrial,
        _space: &BTreeMap<String, Distribution>,
    ) -> Result<RelativeSample> {
        Ok(RelativeSample::default())
    }

    /// One value of `name` from `dist`, restricted to `support`.
    fn sample_independent(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        name: &str,
        dist: &Distribution,
        support: &Support,
    ) -> Result<f64>;

    /// Called after `trial` is stored as finished.
    fn after_trial(&self, _study: &StudyView<'_>, _trial: &FrozenTrial) {}

    /// The settings that rebuild this sampler, with the seed it draws with,
    /// or `None` (the default) for a sampler that cannot be described by a
    /// [`SamplerConfig`]. The executor sends them to its worker processes,
    /// which open the study from its storage (which holds no sampler) and
    /// sample with the rebuilt sampler whatever the objective suggests
    /// after the memory estimator did.
    fn to_config(&self) -> Option<SamplerConfig> {
        None
    }
}

impl<S: Sampler + ?Sized> Sampler for Arc<S> {
    fn infer_relative_search_space(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
    ) -> BTreeMap<String, Distribution> {
        (**self).infer_relative_search_space(study, trial)
    }
    fn sample_relative(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        space: &BTreeMap<String, Distribution>,
    ) -> Result<RelativeSample> {
        (**self).sample_relative(study, trial, space)
    }
    fn sample_independent(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        name: &str,
        dist: &Distribution,
        support: &Support,
    ) -> Result<f64> {
        (**self).sample_independent(study, trial, name, dist, support)
    }
    fn after_trial(&self, study: &StudyView<'_>, trial: &FrozenTrial) {
        (**self).after_trial(study, trial)
    }
    fn to_config(&self) -> Option<SamplerConfig> {
        (**self).to_config()
    }
}

/// The sampler a study gets when none is set.
pub(crate) fn default_sampler() -> Arc<dyn Sampler> {
    Arc::new(TpeSampler::new())
}

/// Optuna's intersection search space: the parameters every COMPLETE trial
/// has, with the same distribution, less those with a single value.
pub(crate) fn intersection_search_space(study: &StudyView<'_>) -> BTreeMap<String, Distribution> {
    let mut complete = study.trials_in(&[crate::trial::TrialState::Complete]);
    let Some(first) = complete.next() else {
        return BTreeMap::new();
    };
    let mut space = first.distributions.clone();
    for t in complete {
        space.retain(|k, d| t.distributions.get(k) == Some(d));
    }
    space.retain(|_, d| !d.is_single());
    space
}

/// Numeric bounds of `dist` under `support` (internal units; categoricals: index range).
pub(crate) fn bounds(dist: &Distribution, support: &Support) -> (f64, f64) {
    if let Support::Range { low, high } = support {
        return (*low, *high);
    }
    match dist {
        Distribution::Float(d) => (d.low(), d.high()),
        Distribution::Int(d) => (d.low() as f64, d.high() as f64),
        Distribution::Categorical(d) => (0.0, (d.choices().len() - 1) as f64),
    }
}
