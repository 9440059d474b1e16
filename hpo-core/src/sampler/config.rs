//! Persisted sampler settings: one enum naming every sampler of hpo with its
//! settings and seed, from which the same sampler is rebuilt elsewhere (an
//! executor's worker process, a configuration file).

use super::{
    AutoConfig, AutoSampler, CmaEsConfig, CmaEsSampler, GpConfig, GpSampler, GridSampler,
    QmcConfig, QmcSampler, RandomSampler, Sampler, TpeConfig, TpeSampler,
};
use crate::distribution::ParamValue;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Any of hpo's samplers with its settings, as written in a configuration
/// file: `{"sampler": "tpe", "seed": 7}`, `{"sampler": "cma_es", "separable":
/// true}`, `{"sampler": "qmc", "kind": "halton"}` (the tag is `sampler`, since
/// `kind` is a setting of QMC).
///
/// [`Sampler::to_config`] returns one with the seed the sampler actually
/// draws with (one drawn from the operating system included), so that
/// [`SamplerConfig::init`] in another process builds a sampler whose draws
/// are the original's: hpo's samplers draw each trial's values from streams
/// derived from the seed, the trial's number and the parameter, so the two
/// propose the same values from the same history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "sampler", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SamplerConfig {
    /// [`TpeSampler`].
    Tpe(TpeConfig),
    /// [`RandomSampler`].
    Random {
        /// The seed; `None` seeds from the operating system.
        #[serde(default)]
        seed: Option<u64>,
    },
    /// [`QmcSampler`].
    Qmc(QmcConfig),
    /// [`CmaEsSampler`] (a warm start's source trials are not part of the
    /// settings: they shape only the first generation, which the study's
    /// trials record once it is sampled).
    CmaEs(CmaEsConfig),
    /// [`GpSampler`].
    Gp(GpConfig),
    /// [`AutoSampler`].
    Auto(AutoConfig),
    /// [`GridSampler`].
    Grid {
        /// Each parameter's values, as JSON (numbers and strings, as Optuna
        /// writes parameter values).
        space: BTreeMap<String, Vec<Value>>,
        /// The seed of the visiting order.
        seed: u64,
    },
}

impl SamplerConfig {
    /// Validates the settings and builds the sampler.
    pub fn init(&self) -> Result<Arc<dyn Sampler>> {
        Ok(match self {
            SamplerConfig::Tpe(c) => Arc::new(TpeSampler::with_config(c.clone())?),
            SamplerConfig::Random { seed: Some(s) } => Arc::new(RandomSampler::seeded(*s)),
            SamplerConfig::Random { seed: None } => Arc::new(RandomSampler::new()),
            SamplerConfig::Qmc(c) => Arc::new(QmcSampler::with_config(c.clone())),
            SamplerConfig::CmaEs(c) => Arc::new(CmaEsSampler::with_config(c.clone())?),
            SamplerConfig::Gp(c) => Arc::new(GpSampler::with_config(c.clone())?),
            SamplerConfig::Auto(c) => Arc::new(AutoSampler::with_config(c.clone())?),
            SamplerConfig::Grid { space, seed } => {
                let mut typed = Vec::with_capacity(space.len());
                for (name, values) in space {
                    let values = values
                        .iter()
                        .map(|v| {
                            ParamValue::from_json_value(v).ok_or_else(|| {
                                Error::InvalidConfig(format!(
                                    "grid parameter `{name}`: {v} is not a parameter value \
                                     (a number, a string, a boolean or null)"
                                ))
                            })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    typed.push((name.clone(), values));
                }
                Arc::new(GridSampler::new(typed, *seed)?)
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_reads_back_and_builds() {
        let grid = GridSampler::new(
            [
                ("x", vec![ParamValue::Float(0.5), ParamValue::Float(1.0)]),
                ("act", vec![ParamValue::Choice("relu".into())]),
            ],
            3,
        )
        .unwrap();
        let configs = [
            TpeSampler::seeded(1).to_config(),
            RandomSampler::seeded(2).to_config(),
            QmcSampler::with_config(QmcConfig::seeded(3)).to_config(),
            CmaEsSampler::with_config(CmaEsConfig::seeded(4))
                .unwrap()
                .to_config(),
            GpSampler::seeded(5).to_config(),
            AutoSampler::with_config(AutoConfig::seeded(6))
                .unwrap()
                .to_config(),
            grid.to_config(),
        ];
        for c in configs {
            let c = c.expect("hpo's samplers have a config");
            let text = serde_json::to_string(&c).unwrap();
            let back: SamplerConfig = serde_json::from_str(&text).unwrap();
            assert_eq!(back, c, "{text}");
            let rebuilt = back.init().unwrap().to_config();
            assert_eq!(rebuilt, Some(c), "{text}");
        }
    }

    /// The examples of the book's samplers page.
    #[test]
    fn the_books_examples_build() {
        for text in [
            r#"{"sampler": "tpe", "n_startup_trials": 5, "seed": 7}"#,
            r#"{"sampler": "qmc", "kind": "halton", "seed": 7}"#,
            r#"{"sampler": "cma_es", "separable": true}"#,
            r#"{"sampler": "gp", "n_startup_trials": 5, "seed": 7}"#,
            r#"{"sampler": "auto", "gp_until": 250}"#,
            r#"{"sampler": "auto", "mixed": "tpe", "late": "tpe"}"#,
        ] {
            let c: SamplerConfig = serde_json::from_str(text).unwrap();
            c.init().unwrap();
        }
    }

    #[test]
    fn an_unseeded_sampler_hands_on_the_seed_it_draws_with() {
        let configs = [
            TpeSampler::new().to_config(),
            RandomSampler::new().to_config(),
            QmcSampler::new().to_config(),
            CmaEsSampler::new().to_config(),
            GpSampler::new().to_config(),
            AutoSampler::new().to_config(),
        ];
        for c in configs {
            let seed = match c.unwrap() {
                SamplerConfig::Tpe(c) => c.seed,
                SamplerConfig::Random { seed } => seed,
                SamplerConfig::Qmc(c) => c.seed,
                SamplerConfig::CmaEs(c) => c.seed,
                SamplerConfig::Gp(c) => c.seed,
                SamplerConfig::Auto(c) => c.seed,
                other => panic!("unexpected {other:?}"),
            };
            assert!(seed.is_some());
        }
    }

    #[test]
    fn bad_settings_are_refused_by_name() {
        let text = r#"{"sampler": "tpe", "n_ei_candidates": 0}"#;
        let c: SamplerConfig = serde_json::from_str(text).unwrap();
        assert!(c.init().is_err());
        let err = serde_json::from_str::<SamplerConfig>(r#"{"sampler": "tpe", "gama": 0.1}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("gama"), "{err}");
        let err = serde_json::from_str::<SamplerConfig>(r#"{"sampler": "bayes"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bayes"), "{err}");
        let grid = SamplerConfig::Grid {
            space: BTreeMap::from([("x".to_owned(), vec![serde_json::json!([1, 2])])]),
            seed: 0,
        };
        let err = grid.init().err().unwrap().to_string();
        assert!(err.contains("`x`"), "{err}");
    }
}
