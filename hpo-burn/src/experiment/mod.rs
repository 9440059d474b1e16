//! A text-classification experiment in a few lines: the pieces an
//! experiment crate needs around hpo's study runner (`hpo::cli` in the
//! `hpo` crate), so that the objective of a fine-tuning study is its search
//! space plus a handful of lines.
//!
//! * [`DeviceArg`]: `cpu` or `cuda:N`, the backend that goes with it
//!   ([`DeviceArg::run`] runs an [`OnBackend`] job on it, after checking the
//!   CUDA runtime), and the memory worker processes are admitted by
//!   ([`DeviceArg::memory`]);
//! * [`DataArgs`] and [`BackboneArgs`] (feature `cli`): the data and model
//!   flags as clap argument groups an experiment flattens into its own, and
//!   the [`Splits`] and [`Backbones`] they make;
//! * [`checkpoints`] and [`light_and_heavy`]: the pretrained backbones, from
//!   the user's folders or fetched once into the cache;
//! * [`Splits`]: the data split once by seed into train, validation and a
//!   held-out test split;
//! * [`Lengths`]: sequence lengths at percentiles of the training texts'
//!   token lengths, so that a space's length choices fit the data;
//! * [`fine_tune`]: one trial's training call, at the batch the executor
//!   chose, its model stored as the trial's artifacts;
//! * [`saved_model`]: those artifacts, written and read back;
//! * [`score_best`]: the best trial's stored model on the test split, after
//!   the study, whatever process trained it, and [`report_best`], which
//!   says so and saves the model when asked.
//!
//! The memory estimate for the executor is [`crate::estimator::TrainingEstimator`]
//! over the same sampling the objective does, ending in
//! [`crate::estimator::Sizing::of_run`].

#[cfg(feature = "cli")]
mod backbone_args;
mod backbones;
#[cfg(feature = "cli")]
mod data_args;
mod device;
mod fine_tune;
mod held_out;
mod lengths;
mod report;
pub mod saved_model;
mod splits;

#[cfg(feature = "cli")]
pub use self::backbone_args::BackboneArgs;
pub use self::backbones::{checkpoints, light_and_heavy, Backbones};
#[cfg(feature = "cli")]
pub use self::data_args::DataArgs;
pub use self::device::{DeviceArg, OnBackend};
pub use self::fine_tune::{fine_tune, Trained};
pub use self::held_out::{score_best, score_trial, HeldOut};
pub use self::lengths::Lengths;
pub use self::report::report_best;
pub use self::saved_model::{export_model, load_model, save_model, ModelCard, SavedModel};
pub use self::splits::Splits;
