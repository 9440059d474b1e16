//! # hpo-core: the study engine
//!
//! Studies, trials, distributions, samplers, pruners and storages, with no
//! dependency on any training framework or GPU library.
//!
//! ## Design
//!
//! * **One small interface per concept**, its contract written on it:
//!   [`Sampler`], [`Pruner`], [`Storage`]. Samplers and pruners see immutable
//!   [`FrozenTrial`]s through a [`StudyView`], never the storage, so they can be
//!   tested on hand-built histories and cannot corrupt a study.
//! * **Optuna's data model.** Trial states, the internal `f64` representation
//!   of parameters, `distribution_json`, `fixed_params`, `constraints` and the
//!   convention that a pruned trial's value is its last intermediate value are
//!   Optuna's, so a study written by hpo reads like one written by Optuna.
//! * **Failures are data.** An objective returns `Result<f64, TrialError>`;
//!   errors, panics and non-finite values fail *that trial* with a recorded
//!   reason, and out-of-memory or infeasible configurations are recorded as
//!   constraint violations that samplers learn to avoid. Only storage errors
//!   stop a study.
//! * **Durable by choice, compatible by default.** [`SqliteStorage`] keeps
//!   studies in one file in Optuna's schema, safe for several processes, with
//!   heartbeats that fail and retry the trials of crashed workers; Optuna and
//!   optuna-dashboard read hpo studies and hpo resumes Optuna's.
//! * **Trials in processes, admitted by memory.** [`executor`] runs each trial
//!   in a fresh worker process (the user's binary, re-executed), admits trials
//!   while their estimated peaks fit a device budget, learns the estimates'
//!   error from measured peaks, and relaunches an out-of-memory trial with a
//!   smaller micro-batch; a simulated device drives the same code in tests and
//!   benchmarks.
//! * **Files outlive their trials.** An [`ArtifactStore`] keeps what a trial
//!   produces (weights, predictions) in a folder beside the study, registered
//!   on the trial in Optuna's format, so the best trial's files are fetched
//!   after the study from any process; cleanup keeps what the user's
//!   [`KeepArtifacts`] policy says.
//! * **Tracking is a hook.** A [`Tracker`] registered on the study builder
//!   is told of each trial's end by the process that wrote it (a thread,
//!   a worker process, or the coordinator for a worker that died), after
//!   the record is stored; it queues and cannot fail the trial. The
//!   facade's MLflow client implements it, so no HTTP client is built here.
//! * **Narrowed supports.** A constraint may restrict a parameter's range or
//!   choices at sampling time ([`Support`]); the declared distribution is what
//!   is stored, so the sampler keeps learning across conditions.
//!
//! ## Example
//!
//! ```
//! use hpo_core::{Direction, RandomSampler, Study};
//!
//! # fn main() -> hpo_core::Result<()> {
//! let study = Study::builder()
//!     .name("quadratic")
//!     .direction(Direction::Minimize)
//!     .sampler(RandomSampler::seeded(42))
//!     .build()?;
//! study.optimize(50, |trial| {
//!     let x = trial.suggest_float("x", -10.0, 10.0)?;
//!     let layers = trial.suggest_int("layers", 1, 4)?;
//!     Ok((x - 2.0).powi(2) + layers as f64)
//! })?;
//! let best = study.best_trial()?;
//! assert!(best.value().unwrap() < 10.0);
//! # Ok(())
//! # }
//! ```

pub mod artifact;
pub mod direction;
pub mod distribution;
mod error;
pub mod executor;
pub mod pruner;
pub mod sampler;
pub mod signals;
pub mod space;
pub mod storage;
pub mod study;
pub mod trial;
pub mod view;

pub use crate::artifact::{ArtifactMeta, ArtifactStore, CleanReport, KeepArtifacts};
pub use crate::direction::Direction;
pub use crate::distribution::{
    CategoricalDistribution, Choice, Distribution, FloatDistribution, IntDistribution, ParamValue,
    Support,
};
pub use crate::error::{Error, Result};
pub use crate::pruner::{
    Decision, HyperbandConfig, HyperbandPruner, MedianConfig, MedianPruner, NopPruner,
    PatientConfig, PatientPruner, PercentileConfig, PercentilePruner, Pruner, PrunerConfig,
    Resource, SuccessiveHalvingConfig, SuccessiveHalvingPruner, ThresholdConfig, ThresholdPruner,
};
pub use crate::sampler::{
    AutoConfig, AutoLate, AutoMixed, AutoSampler, CmaEsConfig, CmaEsSampler, GpConfig, GpSampler,
    GridSampler, QmcConfig, QmcKind, QmcSampler, RandomSampler, RelativeSample, Sampler,
    SamplerConfig, TpeBandwidth, TpeConfig, TpeSampler, TpeWeights,
};
pub use crate::space::{ChoiceEnum, ParamDescription, ParamKind, SearchSpace, SpaceDescription};
pub use crate::storage::{InMemoryStorage, SqliteStorage, Storage, StudySummary};
pub use crate::study::{
    Heartbeat, Optimize, RetryPolicy, Study, StudyBudget, StudyBuilder, Tracker, Trial,
};
pub use crate::trial::{
    FailureKind, FrozenTrial, IntoTrialResult, TrialError, TrialOutcome, TrialSnapshot, TrialState,
};
pub use crate::view::StudyView;
