//! The Tree-structured Parzen Estimator (TPE), after Optuna 5.0.
//!
//! TPE ranks finished trials, calls the best few "good" and the rest "bad",
//! fits a Parzen estimator (a kernel density) to each group, and proposes the
//! candidate (drawn from the good density) that maximises good / bad — the
//! expected-improvement criterion of Bergstra et al. (2011) as analysed by
//! Watanabe (2023), "Tree-structured Parzen Estimator: understanding its
//! algorithm components".
//!
//! The module is split by concept:
//!
//! * [`config`](TpeConfig) — settings with Optuna's defaults (serde).
//! * `truncnorm` — truncated normal masses and sampling, accurate in the tails.
//! * `parzen` — the Parzen estimator: kernels per distribution kind, step-aware
//!   truncated Gaussians, Optuna's categorical kernel, sampling inside a
//!   narrowed support.
//! * `observations` — per-study observation arrays kept incrementally, and the
//!   good/bad split (pruned trials after complete ones, constraint violations
//!   always bad).
//! * `group` — group decomposition and intersection of the relative search space.
//! * `sampler` — [`TpeSampler`], the [`crate::Sampler`] implementation.
//!
//! ## Faithful to Optuna, and where it differs
//!
//! Bandwidths (multivariate Scott-like rule, univariate neighbour gaps), the
//! magic clip, prior kernel and weight, the ramp of observation weights, gamma,
//! the categorical kernel, start-up trials, group decomposition and the
//! constant liar follow Optuna 5.0. Differences: trials that failed with a
//! constraint violation (OOM, infeasible) are observations that are always
//! bad, where Optuna needs a `constraints_func` and may count infeasible trials
//! as good when too few feasible ones exist; several objectives use whole
//! non-dominated fronts cut by normalised loss instead of hypervolume subset
//! selection, with uniform weights; the group decomposition is computed from
//! every trial the sampler has seen in the study, also when a pruner hands it
//! only one bracket's trials.
//!
//! ## Cost
//!
//! Finished trials never change, so they are read once. A suggestion costs a
//! pass over the trial list to pick up newly finished trials, a linear-time
//! selection for the split, and `O(candidates x observations x dimensions)`
//! arithmetic with per-kernel constants precomputed.

mod config;
mod group;
mod observations;
mod parzen;
mod sampler;
mod truncnorm;

pub use self::config::{TpeBandwidth, TpeConfig, TpeWeights};
pub use self::sampler::TpeSampler;
