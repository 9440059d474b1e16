//! Parallel trials in isolated worker processes, admitted by device memory.
//!
//! # Why processes
//!
//! On a GPU an out-of-memory error or a device-side assert poisons the
//! process that hit it: every later step in that process fails too. A study
//! that runs its trials as threads of one process therefore dies with its
//! first OOM. With [`Optimize::processes`](crate::Optimize::processes) each
//! trial runs in a fresh *worker process*: the user's own binary, re-executed
//! with an environment variable ([`WORKER_ENV`]) naming the study, its
//! storage URL and the trial. The worker adopts the trial, heartbeats, runs
//! the objective, tells the result and exits. Whatever happens to a worker
//! (a signal, a non-zero exit, a panic, a hang past the timeout) fails only
//! its trial, with the cause recorded in the trial's system attributes; the
//! study goes on and a fresh worker takes the next trial.
//!
//! # The pieces
//!
//! * [`MemoryEstimator`] (user-supplied): draws a configuration on a trial
//!   and says its peak device memory at a given micro-batch.
//! * [`Scheduler`] (`admission`): admits a trial while the sum of the running
//!   trials' reservations plus its own fits a device's budget (usable memory
//!   minus headroom minus a per-process context cost), shrinks a
//!   configuration that cannot fit alone (micro-batch halved, accumulation
//!   doubled: the same effective batch) and records one that still cannot
//!   fit as Infeasible without launching it. Queue order: [`QueuePolicy`].
//! * [`Correction`]: a per-family factor from estimate to measured peak
//!   (and one per micro-batch of the family, once measured), fitted from
//!   finished trials, so a systematic under-estimate stops causing OOMs
//!   after a few trials.
//! * [`DeviceSet`]: one budget per device, best-fit placement, and a device
//!   that keeps failing taken out of rotation with a logged reason.
//! * `relaunch`: an OOM (from the error, the panic text or a worker that died
//!   while allocating) re-enqueues the same configuration as a WAITING trial
//!   with the micro-batch halved, lineage in `failed_trial` /
//!   `retry_history` / [`OOM_RETRIES_ATTR`]; at the floor it ends as Oom.
//! * `simulated` (feature `simulator`): a simulated device whose workload is read from a TOML or
//!   JSON file. A discrete-event simulation drives the *same* scheduler,
//!   correction and relaunch code as the real coordinator, in tests and in
//!   the `executor` benchmark.
//!
//! # Using it
//!
//! ```no_run
//! use hpo_core::executor::{self, Batch, MemoryEstimator, ProcessConfig, Shape, GIB};
//! use hpo_core::{Optimize, ParamValue, Study, Trial, TrialError};
//! use std::collections::BTreeMap;
//! use std::sync::Arc;
//!
//! struct Estimator;
//! impl MemoryEstimator for Estimator {
//!     fn propose(&self, trial: &mut Trial) -> Result<Shape, TrialError> {
//!         let batch = trial.suggest_categorical("batch", &[8i64, 16, 32])?;
//!         let family = trial.suggest_categorical("model", &["base", "large"])?;
//!         Ok(Shape::new(family, Batch::new(batch as u32, 1)))
//!     }
//!     fn peak_bytes(&self, _params: &BTreeMap<String, ParamValue>, batch: Batch) -> u64 {
//!         u64::from(batch.micro) * GIB / 4
//!     }
//! }
//!
//! fn objective(trial: &mut Trial) -> Result<f64, TrialError> {
//!     let batch = trial.suggest_categorical("batch", &[8i64, 16, 32])?;
//!     let _model = trial.suggest_categorical("model", &["base", "large"])?;
//!     // The executor may have shrunk the micro-batch after an OOM.
//!     let run = executor::batch_of(trial).unwrap_or(Batch::new(batch as u32, 1));
//!     Ok(f64::from(run.effective()))
//! }
//!
//! fn main() -> Result<(), Box<dyn std::error::Error>> {
//!     // In a worker process this runs the assigned trial and exits.
//!     executor::worker_main(objective)?;
//!     let study = Study::builder()
//!         .name("bert")
//!         .storage_url("sqlite:bert.db")
//!         .heartbeat(std::time::Duration::from_secs(5), std::time::Duration::from_secs(30))
//!         .load_if_exists(true)
//!         .build()?;
//!     let config = ProcessConfig::new("sqlite:bert.db", Arc::new(Estimator)).budget(24 * GIB);
//!     study.optimize_with(Optimize::new().trials(100).processes(config), objective)?;
//!     Ok(())
//! }
//! ```

mod admission;
mod coordinator;
mod correction;
mod devices;
mod failure;
mod fold;
mod host;
mod memory;
mod node;
mod relaunch;
#[cfg(feature = "simulator")]
pub mod simulated;
mod worker;

pub use self::admission::{
    correction_family, AdmissionPolicy, Candidate, Launch, QueuePolicy, Scheduler, Step, TrialEnd,
};
pub use self::coordinator::{
    ProcessConfig, DEFAULT_KILL_GRACE, LOOKAHEAD_INDEPENDENT, LOOKAHEAD_LEARNING,
};
pub use self::correction::Correction;
pub use self::devices::{DeviceBudget, DeviceSet};
pub use self::failure::{classify_text, is_oom_text, FailureText};
pub use self::host::{cgroup_memory_limit, host_budget};
pub use self::memory::Memory;
pub use self::node::{gpus_from, node_gpus};
pub use self::relaunch::{fit_options, shrink, shrink_ladder, smaller_option};
pub use self::worker::{
    batch_of, device_memory, is_worker, record_peak, worker_main, worker_main_with,
    DEVICE_MEMORY_ENV, WORKER_ENV,
};

use crate::distribution::ParamValue;
use crate::study::Trial;
use crate::trial::TrialError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One gibibyte, in bytes.
pub const GIB: u64 = 1 << 30;

/// System attribute: the micro-batch the executor runs the trial with.
pub const MICRO_BATCH_ATTR: &str = "hpo:micro_batch";
/// System attribute: the gradient accumulation steps the executor runs the trial with.
pub const ACCUMULATION_ATTR: &str = "hpo:accumulation";
/// System attribute: `true` when the executor runs the trial with activation
/// recomputation ([`Batch::recompute`]); absent otherwise.
pub const RECOMPUTE_ATTR: &str = "hpo:recompute";
/// System attribute: how many times this configuration was relaunched after an OOM.
pub const OOM_RETRIES_ATTR: &str = "oom_retries";
/// System attribute: the measured peak device memory of the trial, in bytes.
pub const PEAK_BYTES_ATTR: &str = "hpo:peak_bytes";
/// System attribute: the worker process's peak resident (host) memory, in bytes.
pub const PEAK_RSS_ATTR: &str = "hpo:peak_rss_bytes";
/// System attribute: the estimated peak the trial was admitted with (before correction), in bytes.
pub const ESTIMATE_BYTES_ATTR: &str = "hpo:estimate_bytes";
/// System attribute: the memory reserved for the trial at admission (corrected, with margin and context), in bytes.
pub const RESERVED_BYTES_ATTR: &str = "hpo:reserved_bytes";
/// System attribute: the executor's prediction of the trial's device
/// footprint at admission (the corrected estimate before the safety margin,
/// plus the process context; [`Launch::predicted`]), in bytes: what the
/// driver's per-process figure is compared with.
pub const PREDICTED_BYTES_ATTR: &str = "hpo:predicted_bytes";
/// System attribute: the device index the trial ran on.
pub const DEVICE_ATTR: &str = "hpo:device";
/// System attribute: how the worker process ended when it died without telling its trial.
pub const EXIT_ATTR: &str = "hpo:exit";
/// System attribute: the last lines of a dead worker's standard error.
pub const STDERR_ATTR: &str = "hpo:stderr_tail";
/// The `fail_reason` of a trial that was sampled ahead but never launched:
/// the study's time ran out, or it was stopped, first. A WAITING copy of its
/// configuration is enqueued with it, for the study's next run.
pub const NOT_STARTED_REASON: &str = "sampled ahead but not started: the study's time ran out or it was stopped before a worker was free; a WAITING copy of this configuration runs in the study's next run";

/// A micro-batch and its gradient accumulation (their product is the
/// effective batch), and whether activations are recomputed in the backward
/// pass instead of kept (the other memory lever, where the estimator offers
/// it: [`MemoryEstimator::relative_time`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Batch {
    /// Examples per forward/backward pass (what device memory scales with).
    pub micro: u32,
    /// Passes accumulated per optimizer step.
    pub accumulation: u32,
    /// Activation recomputation (gradient checkpointing): less memory, more
    /// time per example.
    #[serde(default)]
    pub recompute: bool,
}

impl Batch {
    /// A batch of `micro` examples per pass, `accumulation` passes per step,
    /// activations kept.
    pub fn new(micro: u32, accumulation: u32) -> Self {
        Batch {
            micro,
            accumulation,
            recompute: false,
        }
    }

    /// The same batch with activation recomputation on or off.
    pub fn with_recompute(self, recompute: bool) -> Self {
        Batch { recompute, ..self }
    }

    /// Examples per optimizer step.
    pub fn effective(&self) -> u32 {
        self.micro.saturating_mul(self.accumulation)
    }
}

/// What the executor needs to know of a configuration: its model family (the
/// unit of the learned [`Correction`]) and its batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// Model family, for example `"bert-large"`.
    pub family: String,
    /// The batch the configuration asks for.
    pub batch: Batch,
}

impl Shape {
    /// A shape.
    pub fn new(family: impl Into<String>, batch: Batch) -> Self {
        Shape {
            family: family.into(),
            batch,
        }
    }
}

/// Estimates a configuration's peak device memory before it runs.
///
/// Supplied by the user (hpo-burn derives one from its run spec and the
/// analytic estimate). The coordinator calls [`MemoryEstimator::propose`] on
/// a trial it has asked for; the worker's objective later makes the same
/// `suggest_*` calls and gets the same values back. Estimates need not be
/// exact: the executor learns a per-family correction from measured peaks.
///
/// Called from the coordinator's thread only; `Send + Sync` so that a
/// configuration can be shared.
pub trait MemoryEstimator: Send + Sync {
    /// Draws the configuration on `trial` with the same `suggest_*` calls the
    /// objective makes (for a typed space, `Config::sample(trial)`), and says
    /// its family and batch. An error (an empty support, say) fails the trial
    /// without launching it.
    fn propose(&self, trial: &mut Trial) -> Result<Shape, TrialError>;

    /// Peak device memory in bytes of the configuration `params` run at
    /// `batch`, excluding the per-process context (the budget accounts for it).
    fn peak_bytes(&self, params: &BTreeMap<String, ParamValue>, batch: Batch) -> u64;

    /// Training time per example of `params` at `batch`, in any unit the
    /// estimator keeps the same across batches, or `None` when the
    /// configuration cannot run at `batch` (activation recomputation not
    /// offered, say). When a configuration does not fit as asked, the
    /// executor runs it the fastest way that fits among the micro-batches of
    /// its shrink ladder, with and without recomputation
    /// ([`fit_options`]).
    ///
    /// The default offers no recomputation and prices every micro-batch the
    /// same: the largest micro-batch that fits is taken.
    fn relative_time(&self, params: &BTreeMap<String, ParamValue>, batch: Batch) -> Option<f64> {
        let _ = params;
        (!batch.recompute).then_some(1.0)
    }
}
