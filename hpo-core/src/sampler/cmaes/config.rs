//! Settings of the CMA-ES sampler, with Optuna 5.0's defaults.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Settings of [`super::CmaEsSampler`].
///
/// The defaults are Optuna 5.0's `CmaEsSampler()`: full-covariance CMA-ES on
/// the numeric parameters, one start-up trial, the default population size
/// `4 + floor(3 ln n)`, a step size of a sixth of each parameter's range, no
/// restarts. Persisted with serde; every field has a default, so `{}` is a
/// valid configuration.
///
/// Combinations Optuna rejects are rejected here too, with
/// [`Error::InvalidConfig`]: `lr_adapt` with `separable` or `with_margin`,
/// and `separable` with `with_margin`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CmaEsConfig {
    /// Finished trials sampled independently (at random) before CMA-ES starts
    /// (default 1).
    pub n_startup_trials: usize,
    /// Trials per generation; `None` (default): `4 + floor(3 ln n)` for `n`
    /// parameters. At least 2.
    pub popsize: Option<usize>,
    /// The initial step size as a fraction of every parameter's range (in
    /// log units for log parameters); `None` (default): 1/6.
    pub sigma0: Option<f64>,
    /// Separable CMA-ES: a diagonal covariance, learned faster, for
    /// parameters that barely interact (Optuna's `use_separable_cma`).
    pub separable: bool,
    /// CMA-ES with margin for integer and stepped parameters, so they keep
    /// moving once the step size falls below their step (Optuna's `with_margin`).
    pub with_margin: bool,
    /// Learning-rate adaptation (LRA-CMA-ES), for multimodal and noisy
    /// objectives (Optuna's `lr_adapt`).
    pub lr_adapt: bool,
    /// IPOP restarts: when a run converges (`cmaes`'s stopping rules), start
    /// again from a random mean with the population multiplied by
    /// `inc_popsize` (default false; Optuna 5.0 has removed its
    /// `restart_strategy="ipop"`, this is its 4.x behaviour).
    pub ipop: bool,
    /// Population growth factor of each IPOP restart (default 2, at least 2).
    pub inc_popsize: usize,
    /// Count PRUNED trials with their last intermediate value as solutions
    /// (default false).
    pub consider_pruned_trials: bool,
    /// Start the distribution from the study's own finished trials (the
    /// WS-CMA-ES estimate from their best tenth, as
    /// [`super::CmaEsSampler::with_source_trials`] does from another study's)
    /// instead of the box's centre, when CMA-ES begins in a study that
    /// already has trials over its search space: [`crate::AutoSampler`]'s
    /// switch from the GP. Default false (Optuna's behaviour). Needs the full
    /// covariance and no `sigma0`.
    pub warm_start_from_study: bool,
    /// Random seed; `None` seeds from the operating system.
    pub seed: Option<u64>,
}

impl Default for CmaEsConfig {
    fn default() -> Self {
        CmaEsConfig {
            n_startup_trials: 1,
            popsize: None,
            sigma0: None,
            separable: false,
            with_margin: false,
            lr_adapt: false,
            ipop: false,
            inc_popsize: 2,
            consider_pruned_trials: false,
            warm_start_from_study: false,
            seed: None,
        }
    }
}

impl CmaEsConfig {
    /// The default configuration with a seed.
    pub fn seeded(seed: u64) -> Self {
        CmaEsConfig {
            seed: Some(seed),
            ..CmaEsConfig::default()
        }
    }

    /// Checks the settings; the error names the offending field and value.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::InvalidConfig(m));
        if let Some(p) = self.popsize {
            if p < 2 {
                return bad(format!(
                    "CMA-ES `popsize` must be at least 2 (half of it are the parents), got {p}"
                ));
            }
        }
        if let Some(s) = self.sigma0 {
            if !(s.is_finite() && s > 0.0) {
                return bad(format!(
                    "CMA-ES `sigma0` must be a positive fraction of each parameter's range, got {s}"
                ));
            }
        }
        if self.inc_popsize < 2 {
            return bad(format!(
                "CMA-ES `inc_popsize` must be at least 2 (each IPOP restart grows the population), got {}",
                self.inc_popsize
            ));
        }
        if self.lr_adapt && (self.separable || self.with_margin) {
            return bad(
                "CMA-ES `lr_adapt` works with the full covariance only: turn off `separable` and `with_margin`, or `lr_adapt`"
                    .into(),
            );
        }
        if self.warm_start_from_study {
            if let Some(m) = self.warm_start_conflict("CMA-ES `warm_start_from_study`") {
                return bad(m);
            }
        }
        if self.separable && self.with_margin {
            return bad(
                "CMA-ES `separable` and `with_margin` cannot be combined (as in Optuna): choose one"
                    .into(),
            );
        }
        Ok(())
    }

    /// Why a warm start (`what`, for the message) cannot work with these
    /// settings, if it cannot: it sets the covariance and the step size
    /// itself, as in Optuna.
    pub(super) fn warm_start_conflict(&self, what: &str) -> Option<String> {
        if self.separable {
            return Some(format!(
                "{what} needs the full covariance: turn off `separable`"
            ));
        }
        if self.sigma0.is_some() {
            return Some(format!(
                "{what} sets the step size itself: leave `sigma0` unset"
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_optunas_and_read_from_empty_json() {
        let c: CmaEsConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(c, CmaEsConfig::default());
        assert_eq!(c.n_startup_trials, 1);
        assert!(c.validate().is_ok());
        assert!(serde_json::from_str::<CmaEsConfig>(r#"{"restart": "ipop"}"#).is_err());
    }

    #[test]
    fn bad_settings_name_the_problem() {
        let msg = |c: CmaEsConfig| c.validate().unwrap_err().to_string();
        let d = CmaEsConfig::default;
        assert!(msg(CmaEsConfig {
            popsize: Some(1),
            ..d()
        })
        .contains("`popsize` must be at least 2"));
        assert!(msg(CmaEsConfig {
            sigma0: Some(0.0),
            ..d()
        })
        .contains("`sigma0`"));
        assert!(msg(CmaEsConfig {
            sigma0: Some(f64::NAN),
            ..d()
        })
        .contains("NaN"));
        assert!(msg(CmaEsConfig {
            inc_popsize: 1,
            ..d()
        })
        .contains("`inc_popsize`"));
        assert!(msg(CmaEsConfig {
            lr_adapt: true,
            separable: true,
            ..d()
        })
        .contains("`lr_adapt`"));
        assert!(msg(CmaEsConfig {
            lr_adapt: true,
            with_margin: true,
            ..d()
        })
        .contains("`lr_adapt`"));
        assert!(msg(CmaEsConfig {
            separable: true,
            with_margin: true,
            ..d()
        })
        .contains("cannot be combined"));
        assert!(msg(CmaEsConfig {
            warm_start_from_study: true,
            separable: true,
            ..d()
        })
        .contains("`warm_start_from_study` needs the full covariance"));
        assert!(msg(CmaEsConfig {
            warm_start_from_study: true,
            sigma0: Some(0.2),
            ..d()
        })
        .contains("leave `sigma0` unset"));
    }
}
