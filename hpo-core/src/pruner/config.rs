//! Persisted pruner settings: a resource that may be `"auto"`, and one enum
//! naming every pruner with its settings, for configuration files and CLIs.

use super::{
    HyperbandConfig, MedianConfig, NopPruner, PatientConfig, PatientPruner, PercentileConfig,
    Pruner, SuccessiveHalvingConfig, ThresholdConfig,
};
use crate::error::Result;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Arc;

/// A number of steps, or `"auto"`: estimated from the study's history the
/// first time the pruner needs it, exactly as Optuna does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Resource {
    /// Estimated from the first COMPLETE trials (see each pruner).
    #[default]
    Auto,
    /// A fixed number of steps.
    Steps(u64),
}

impl Serialize for Resource {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Resource::Auto => s.serialize_str("auto"),
            Resource::Steps(n) => s.serialize_u64(*n),
        }
    }
}

impl<'de> Deserialize<'de> for Resource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Steps(u64),
            Text(String),
        }
        match Raw::deserialize(d) {
            Ok(Raw::Steps(n)) => Ok(Resource::Steps(n)),
            Ok(Raw::Text(t)) if t == "auto" => Ok(Resource::Auto),
            _ => Err(serde::de::Error::custom(
                "a resource is a non-negative number of steps or \"auto\"",
            )),
        }
    }
}

impl From<u64> for Resource {
    fn from(n: u64) -> Self {
        Resource::Steps(n)
    }
}

/// Any pruner with its settings, as written in a configuration file:
/// `{"kind": "hyperband", "min_resource": 3, "max_resource": 100}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum PrunerConfig {
    /// [`NopPruner`].
    Nop,
    /// [`super::MedianPruner`].
    Median(MedianConfig),
    /// [`super::PercentilePruner`].
    Percentile(PercentileConfig),
    /// [`super::SuccessiveHalvingPruner`].
    SuccessiveHalving(SuccessiveHalvingConfig),
    /// [`super::HyperbandPruner`].
    Hyperband(HyperbandConfig),
    /// [`super::ThresholdPruner`].
    Threshold(ThresholdConfig),
    /// [`PatientPruner`] around `wrapped` (or alone, pruning on patience only).
    Patient {
        /// The patience settings.
        #[serde(flatten)]
        config: PatientConfig,
        /// The pruner consulted once patience runs out.
        #[serde(default)]
        wrapped: Option<Box<PrunerConfig>>,
    },
}

impl PrunerConfig {
    /// Validates the settings and builds the pruner.
    pub fn init(&self) -> Result<Arc<dyn Pruner>> {
        Ok(match self {
            PrunerConfig::Nop => Arc::new(NopPruner),
            PrunerConfig::Median(c) => Arc::new(c.init()?),
            PrunerConfig::Percentile(c) => Arc::new(c.init()?),
            PrunerConfig::SuccessiveHalving(c) => Arc::new(c.init()?),
            PrunerConfig::Hyperband(c) => Arc::new(c.init()?),
            PrunerConfig::Threshold(c) => Arc::new(c.init()?),
            PrunerConfig::Patient { config, wrapped } => match wrapped {
                Some(w) => Arc::new(PatientPruner::new(w.init()?, *config)?),
                None => Arc::new(PatientPruner::alone(*config)?),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_serde() {
        assert_eq!(serde_json::to_string(&Resource::Auto).unwrap(), "\"auto\"");
        assert_eq!(serde_json::to_string(&Resource::Steps(3)).unwrap(), "3");
        assert_eq!(
            serde_json::from_str::<Resource>("\"auto\"").unwrap(),
            Resource::Auto
        );
        assert_eq!(
            serde_json::from_str::<Resource>("7").unwrap(),
            Resource::Steps(7)
        );
        for bad in ["\"max\"", "-1", "1.5"] {
            let err = serde_json::from_str::<Resource>(bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains("\"auto\""), "{bad}: {err}");
        }
    }

    #[test]
    fn seed_config_round_trips_and_builds() {
        let text = r#"{"kind": "patient", "patience": 4,
            "wrapped": {"kind": "hyperband", "min_resource": 3, "max_resource": 100, "reduction_factor": 3}}"#;
        let c: PrunerConfig = serde_json::from_str(text).unwrap();
        let PrunerConfig::Patient {
            config,
            wrapped: Some(w),
        } = &c
        else {
            panic!("{c:?}")
        };
        assert_eq!(config.patience, 4);
        assert_eq!(config.min_delta, 0.0);
        assert_eq!(
            **w,
            PrunerConfig::Hyperband(HyperbandConfig {
                min_resource: 3,
                max_resource: Resource::Steps(100),
                reduction_factor: 3,
                bootstrap_count: 0
            })
        );
        let back: PrunerConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert!(c.init().is_ok());
    }

    /// Every pruner of this crate gives back the settings it was built
    /// from (what a worker process rebuilds it with), non-default ones
    /// included; a wrapper around a pruner without settings has none.
    #[test]
    fn every_pruner_gives_back_its_settings() {
        let configs = [
            PrunerConfig::Nop,
            PrunerConfig::Median(MedianConfig {
                n_startup_trials: 2,
                n_warmup_steps: 3,
                interval_steps: 4,
                n_min_trials: 5,
            }),
            PrunerConfig::Percentile(PercentileConfig {
                percentile: 25.0,
                n_startup_trials: 1,
                n_warmup_steps: 2,
                interval_steps: 3,
                n_min_trials: 4,
            }),
            PrunerConfig::SuccessiveHalving(SuccessiveHalvingConfig {
                min_resource: Resource::Steps(2),
                reduction_factor: 3,
                min_early_stopping_rate: 1,
                bootstrap_count: 0,
            }),
            PrunerConfig::Hyperband(HyperbandConfig {
                min_resource: 1,
                max_resource: Resource::Auto,
                reduction_factor: 2,
                bootstrap_count: 0,
            }),
            PrunerConfig::Threshold(ThresholdConfig {
                lower: Some(-1.0),
                upper: None,
                n_warmup_steps: 1,
                interval_steps: 2,
            }),
            PrunerConfig::Patient {
                config: PatientConfig {
                    patience: 2,
                    min_delta: 0.5,
                },
                wrapped: Some(Box::new(PrunerConfig::Median(MedianConfig::default()))),
            },
            PrunerConfig::Patient {
                config: PatientConfig::default(),
                wrapped: None,
            },
        ];
        for c in configs {
            assert_eq!(c.init().unwrap().to_config().as_ref(), Some(&c));
        }

        struct Own;
        impl Pruner for Own {
            fn prune(
                &self,
                _: &crate::view::StudyView<'_>,
                _: &crate::trial::FrozenTrial,
            ) -> Result<crate::pruner::Decision> {
                Ok(crate::pruner::Decision::keep())
            }
        }
        assert!(Own.to_config().is_none());
        let wrapped = PatientPruner::new(Own, PatientConfig::default()).unwrap();
        assert!(wrapped.to_config().is_none());
    }

    #[test]
    fn bad_nested_settings_are_reported() {
        let c: PrunerConfig = serde_json::from_str(
            r#"{"kind": "patient", "patience": 2, "wrapped": {"kind": "hyperband", "reduction_factor": 1}}"#,
        )
        .unwrap();
        let err = c.init().err().unwrap().to_string();
        assert!(err.contains("reduction_factor"), "{err}");
        assert!(serde_json::from_str::<PrunerConfig>(
            r#"{"kind": "median", "n_warmup_steps": -1}"#
        )
        .is_err());
    }
}
