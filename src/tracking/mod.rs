//! Experiment tracking: a study logged to MLflow as it runs (feature `mlflow`).
//!
//! # Design
//!
//! The study engine knows only the small [`Tracker`](crate::Tracker) hook
//! (hpo-core stays free of HTTP); [`Mlflow`] implements it over MLflow's
//! REST API with a blocking client (`ureq`) on a thread of its own.
//!
//! * **One MLflow experiment per study**, named after it, holding a *parent
//!   run* for the study (running counts of complete, pruned, failed, OOM and
//!   infeasible trials, OOM relaunches, and the best value, logged as each
//!   trial finishes, the step being the number of trials ended) and a
//!   *nested run per trial* (`mlflow.parentRunId`): its parameters, every
//!   intermediate value as the metric `intermediate_value` at its step
//!   (Optuna's `MLflowCallback` logs only the final value), the final
//!   value(s), the duration, the micro-batch and accumulation the executor
//!   ran, OOM retries, peak memory and its estimate, and as tags the
//!   state, failure reason, trial number and study.
//! * **The parent run is created once**: its id is kept in the study's
//!   system attribute [`MLFLOW_ATTR`], so every worker process, every
//!   machine sharing the storage and every resumed run logs under it.
//! * **MLflow never fails or slows a trial.** Hooks only queue a record
//!   (a bounded queue; a full one drops and counts); the thread sends it,
//!   retrying transport errors, 429 and 5xx answers with backoff until the
//!   record's bound ([`MlflowBuilder::bound`], 2 minutes by default) has
//!   passed since it was queued. What could not be sent is counted and
//!   logged once, with the count, when the tracker is flushed (after
//!   `optimize`, and before a worker process exits, which waits at most
//!   [`WORKER_FLUSH`] so that its coordinator is not held up). The study's
//!   own records never depend on MLflow.
//! * **Credentials** come from MLflow's variables:
//!   `MLFLOW_TRACKING_TOKEN` (a bearer token), or `MLFLOW_TRACKING_USERNAME`
//!   and `MLFLOW_TRACKING_PASSWORD` (basic auth), or a `user:password@` in
//!   the URL. They are sent as a header and never printed: messages show
//!   the URL through the same redaction as storage URLs.
//!
//! ```no_run
//! use hpo::tracking::Mlflow;
//! use hpo::Study;
//!
//! # fn main() -> hpo::Result<()> {
//! let study = Study::builder()
//!     .name("quadratic")
//!     .storage_url("sqlite:quadratic.db")
//!     .tracker(Mlflow::new("http://127.0.0.1:5000")?)
//!     .load_if_exists(true)
//!     .build()?;
//! study.optimize(20, |trial| {
//!     let x = trial.suggest_float("x", -10.0, 10.0)?;
//!     trial.report(0, x.abs())?;
//!     Ok((x - 2.0).powi(2))
//! })?;
//! # Ok(())
//! # }
//! ```
//!
//! With [`crate::cli::StudyRunner`] nothing needs writing: `--mlflow URL`
//! (or `MLFLOW_TRACKING_URI`) turns it on, in worker processes too.

mod mlflow;
mod records;
mod rest;

pub use self::mlflow::{Mlflow, MlflowBuilder, DEFAULT_BOUND, MLFLOW_ATTR, WORKER_FLUSH};
