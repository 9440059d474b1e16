//! The worker side: the user's binary, re-executed to run one trial.
//!
//! The coordinator starts `std::env::current_exe()` with the same arguments
//! and the environment variable [`WORKER_ENV`] holding a JSON assignment
//! (study name, storage URL, trial id, heartbeat setting, coordinator pid,
//! the settings of the study's pruner and sampler, which the storage does
//! not hold). [`worker_main`] (or `Study::optimize_with` with processes,
//! when it is reached in a worker) opens the study, adopts the RUNNING trial
//! the coordinator handed over, beats for it, runs the objective, records the
//! process's peak memory if the objective did not, tells the result and
//! exits the process.
//!
//! The trial was started in the coordinator: its joint (relative) sample
//! was drawn there, and what the memory estimator did not suggest of it is
//! recorded on the trial, so the worker suggests those values rather than
//! drawing the trial again. Parameters outside it are drawn by the study's
//! sampler rebuilt from its settings with the same seed, whose draws are the
//! coordinator's sampler's for the same history.

use super::{
    is_oom_text, Batch, ACCUMULATION_ATTR, MICRO_BATCH_ATTR, PEAK_BYTES_ATTR, PEAK_RSS_ATTR,
    RECOMPUTE_ATTR,
};
use crate::distribution::{Distribution, Support};
use crate::error::{Error, Result};
use crate::pruner::{Pruner, PrunerConfig};
use crate::sampler::{Sampler, SamplerConfig};
use crate::study::Trial;
use crate::study::{Study, Tracker};
use crate::trial::{FailureKind, FrozenTrial, IntoTrialResult, TrialError, TrialState};
use crate::view::StudyView;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

/// The environment variable that makes a process a worker; its value is the
/// coordinator's JSON assignment.
pub const WORKER_ENV: &str = "HPO_EXECUTOR_WORKER";

/// The environment variable holding, in a worker process, the budget in
/// bytes of the device its trial runs on (the `--memory-budget`, else the
/// device's total): what that process may treat as the card's memory.
/// hpo-burn's CUDA builds size cubecl's memory pages from it, so that a
/// trial reserves on a bigger card what it would on the card the budget
/// stands for.
pub const DEVICE_MEMORY_ENV: &str = "HPO_DEVICE_MEMORY";

/// The device budget the coordinator gave this worker process
/// ([`DEVICE_MEMORY_ENV`]); `None` outside a worker or when unset.
pub fn device_memory() -> Option<u64> {
    std::env::var(DEVICE_MEMORY_ENV)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&b: &u64| b > 0)
}

/// Exit status of a worker whose storage failed (the trial is reaped by heartbeat).
pub(crate) const STORAGE_FAILURE_STATUS: i32 = 3;
/// Exit status of a worker whose coordinator disappeared.
pub(crate) const ORPHAN_STATUS: i32 = 4;

/// What the coordinator asks one worker to do.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Assignment {
    pub(crate) study: String,
    pub(crate) storage: String,
    pub(crate) trial_id: u64,
    /// Heartbeat interval and grace, in milliseconds.
    pub(crate) heartbeat_ms: Option<(u64, u64)>,
    /// Whether an OOM will be relaunched with a smaller batch (then it is not
    /// recorded as a constraint violation).
    pub(crate) relaunchable: bool,
    /// The coordinator's process id; the worker exits when it is gone.
    pub(crate) parent: u32,
    /// Record the process's peak resident memory as the trial's peak when
    /// the objective records none (trials that use host memory only).
    #[serde(default)]
    pub(crate) host_peak: bool,
    /// The study's pruner, rebuilt in the worker (the storage does not hold
    /// it); `None` when it has no [`PrunerConfig`].
    #[serde(default)]
    pub(crate) pruner: Option<PrunerConfig>,
    /// The study's sampler, rebuilt in the worker (the storage does not hold
    /// it); `None` when it has no [`SamplerConfig`].
    #[serde(default)]
    pub(crate) sampler: Option<SamplerConfig>,
}

/// Whether this process is a worker started by the executor.
pub fn is_worker() -> bool {
    std::env::var_os(WORKER_ENV).is_some()
}

fn assignment() -> Result<Option<Assignment>> {
    let Some(raw) = std::env::var_os(WORKER_ENV) else {
        return Ok(None);
    };
    let raw = raw.to_string_lossy();
    serde_json::from_str(&raw)
        .map(Some)
        .map_err(|e| Error::Parse {
            what: format!("the worker assignment in ${WORKER_ENV}"),
            reason: "it is not the executor's JSON; this variable is set by the executor's \
                     coordinator, not by hand"
                .into(),
            source: Some(Box::new(e)),
        })
}

/// The entry point of worker processes; call it first in `main`.
///
/// In a process the executor started, runs the assigned trial with
/// `objective` and exits the process (status 0 once the result is stored).
/// Anywhere else it returns `Ok(())` at once, and `main` goes on to build the
/// study and call [`Study::optimize_with`] with
/// [`Optimize::processes`](crate::Optimize::processes).
pub fn worker_main<F, R>(objective: F) -> Result<()>
where
    F: Fn(&mut Trial) -> R,
    R: IntoTrialResult,
{
    worker_main_with(objective, &[])
}

/// [`worker_main`] with the study's trackers: the worker's study reports
/// its trial to them, and flushes them (each within its own bound) before
/// the process exits. Give the trackers the coordinator's study has (built
/// from the same flags), since the worker opens the study itself.
pub fn worker_main_with<F, R>(objective: F, trackers: &[Arc<dyn Tracker>]) -> Result<()>
where
    F: Fn(&mut Trial) -> R,
    R: IntoTrialResult,
{
    let Some(a) = assignment()? else {
        return Ok(());
    };
    run_and_exit(&a, &objective, None, trackers)
}

/// Runs the assignment and exits with the worker's status. `local` is the
/// study this process built itself, if it built one: its pruner and sampler
/// are used when the coordinator's could not be sent.
pub(crate) fn run_and_exit<F, R>(
    a: &Assignment,
    objective: &F,
    local: Option<&Study>,
    trackers: &[Arc<dyn Tracker>],
) -> !
where
    F: Fn(&mut Trial) -> R + ?Sized,
    R: IntoTrialResult,
{
    // A study built in this process brings its own trackers.
    let trackers: Vec<Arc<dyn Tracker>> = match local {
        Some(s) => s.trackers().to_vec(),
        None => trackers.to_vec(),
    };
    let code = match run_assigned(a, objective, local, &trackers) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("hpo worker for trial id {}: {e}", a.trial_id);
            STORAGE_FAILURE_STATUS
        }
    };
    for t in &trackers {
        t.flush();
    }
    std::process::exit(code)
}

/// The assignment of this process, if it is a worker for `study`.
pub(crate) fn assignment_for(study: &str) -> Result<Option<Assignment>> {
    Ok(assignment()?.filter(|a| a.study == study))
}

fn run_assigned<F, R>(
    a: &Assignment,
    objective: &F,
    local: Option<&Study>,
    trackers: &[Arc<dyn Tracker>],
) -> Result<()>
where
    F: Fn(&mut Trial) -> R + ?Sized,
    R: IntoTrialResult,
{
    watch_parent(a.parent);
    // SIGINT and SIGTERM from a terminal or a scheduler are the
    // coordinator's to act on; its own SIGTERM still ends this process.
    if let Err(e) = crate::signals::install_for_worker(a.parent) {
        tracing::warn!("cannot leave SIGINT and SIGTERM to the coordinator: {e}");
    }
    // The trial prunes as the coordinator's study would: the storage holds
    // no pruner, and a study opened from it alone gets the default one.
    let pruner: std::result::Result<Arc<dyn Pruner>, String> = match (&a.pruner, local) {
        (Some(config), _) => Ok(config.init()?),
        (None, Some(s)) => Ok(Arc::clone(s.pruner())),
        (None, None) => Err(format!(
            "study `{}`: its pruner cannot be rebuilt in a worker process started through \
             `executor::worker_main`: it is not one of hpo's pruners (its `Pruner::to_config` \
             returns None); implement `to_config`, or let workers reach \
             `Study::optimize_with` with the study built as the coordinator builds it",
            a.study
        )),
    };
    // And samples as it would: the storage holds no sampler either.
    let sampler: Arc<dyn Sampler> = match (&a.sampler, local) {
        (Some(config), _) => config.init()?,
        (None, Some(s)) => Arc::clone(s.sampler()),
        (None, None) => Arc::new(Unrebuilt {
            study: a.study.clone(),
        }),
    };
    let mut builder = Study::builder()
        .name(&a.study)
        .storage_url(&a.storage)
        .sampler(sampler);
    if let Ok(p) = &pruner {
        builder = builder.pruner(Arc::clone(p));
    }
    for t in trackers {
        builder = builder.tracker(Arc::clone(t));
    }
    if let Some((interval, grace)) = a.heartbeat_ms {
        builder = builder.heartbeat(
            Duration::from_millis(interval),
            Duration::from_millis(grace),
        );
    }
    let study = builder.load()?;
    let mut trial = study.adopt(a.trial_id)?;
    if let Err(message) = pruner {
        return study
            .finish_outcome(trial, Ok(Err(TrialError::Failed(message))))
            .map(|_| ());
    }
    let outcome = match catch_unwind(AssertUnwindSafe(|| {
        objective(&mut trial).into_trial_result()
    })) {
        Ok(r) => Ok(r),
        Err(payload) => Err(panic_text(payload.as_ref())),
    };
    // An allocation failure, however it surfaced, is an OOM.
    let outcome = match outcome {
        Ok(Err(TrialError::Failed(m))) if is_oom_text(&m) => Ok(Err(oom(&trial, m))),
        Err(m) if is_oom_text(&m) => Ok(Err(oom(
            &trial,
            format!("the objective panicked while allocating: {m}"),
        ))),
        other => other,
    };
    let ignored = crate::signals::ignored_in_worker();
    if ignored > 0 {
        tracing::info!(
            trial = trial.number(),
            "ignored {ignored} SIGINT/SIGTERM not sent by the coordinator: it decides"
        );
    }
    if let Some(rss) = process_peak_bytes() {
        // Best effort: the trial may have been reaped meanwhile.
        let _ = trial.set_system_attr(PEAK_RSS_ATTR, rss);
        if a.host_peak && !trial.frozen().system_attrs.contains_key(PEAK_BYTES_ATTR) {
            let _ = trial.set_system_attr(PEAK_BYTES_ATTR, rss);
        }
    }
    match outcome {
        Ok(Err(TrialError::Oom { config, message })) if a.relaunchable => {
            // The coordinator relaunches it smaller: an attempt, not a
            // constraint violation the sampler should learn from.
            study.stop_beating(trial.id())?;
            let mut attrs = FailureKind::Oom.attrs(message);
            attrs.push((FailureKind::OOM_CONFIG_ATTR.to_owned(), config));
            match study
                .storage()
                .finish_trial(trial.id(), TrialState::Fail, None, &attrs)
            {
                Ok(t) => {
                    study.track_finished(&t);
                    Ok(())
                }
                Err(Error::TrialFinished { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        }
        outcome => study.finish_outcome(trial, outcome).map(|_| ()),
    }
}

/// Stands in for a study's sampler that could not be sent to the worker:
/// the trial's recorded joint sample and what the estimator suggested are
/// all it can use, and any other parameter fails with a message saying why.
struct Unrebuilt {
    study: String,
}

impl Sampler for Unrebuilt {
    fn sample_independent(
        &self,
        _study: &StudyView<'_>,
        trial: &FrozenTrial,
        name: &str,
        _dist: &Distribution,
        _support: &Support,
    ) -> Result<f64> {
        Err(Error::InvalidConfig(format!(
            "study `{}`, trial {}: `{name}` was not suggested before the trial was handed to \
             its worker, and the study's sampler cannot be rebuilt in a worker process \
             started through `executor::worker_main`: it is not one of hpo's samplers (its \
             `Sampler::to_config` returns None); implement `to_config`, suggest `{name}` in the \
             memory estimator, or let workers reach `Study::optimize_with` with the study \
             built as the coordinator builds it",
            self.study, trial.number
        )))
    }
}

fn oom(trial: &Trial, message: String) -> TrialError {
    let mut config = serde_json::Map::new();
    for (k, v) in trial.params() {
        config.insert(k, v.to_json_value());
    }
    if let Some(b) = batch_of(trial) {
        config.insert("micro_batch".into(), Value::from(b.micro));
        config.insert("accumulation".into(), Value::from(b.accumulation));
        if b.recompute {
            config.insert("recompute".into(), Value::from(true));
        }
    }
    TrialError::Oom {
        config: Value::Object(config),
        message,
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}

/// Exits this worker when its coordinator is gone (killed, crashed), so an
/// orphan never holds device memory outside the coordinator's budget; its
/// trial is then failed by heartbeat expiry.
fn watch_parent(parent: u32) {
    #[cfg(unix)]
    {
        let spawned = std::thread::Builder::new()
            .name("hpo-parent-watch".into())
            .spawn(move || loop {
                std::thread::sleep(Duration::from_millis(200));
                if std::os::unix::process::parent_id() != parent {
                    // Not `eprintln!`: the coordinator read this process's
                    // stderr, and with it gone the write fails, which would
                    // panic this thread and leave the orphan running.
                    use std::io::Write;
                    let _ = writeln!(
                        std::io::stderr(),
                        "hpo worker: the coordinator (pid {parent}) is gone; exiting"
                    );
                    std::process::exit(ORPHAN_STATUS);
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot watch the coordinator process: {e}");
        }
    }
    #[cfg(not(unix))]
    let _ = parent;
}

/// The batch the executor runs `trial` with, when it set one (after shrinking
/// to fit, or on an OOM relaunch), with whether to recompute activations.
/// Objectives use it instead of their own batch parameters:
/// `batch_of(trial).unwrap_or(Batch::new(batch, accum))`.
pub fn batch_of(trial: &Trial) -> Option<Batch> {
    let attrs = &trial.frozen().system_attrs;
    let micro = attrs.get(MICRO_BATCH_ATTR)?.as_u64()?;
    let accumulation = attrs.get(ACCUMULATION_ATTR)?.as_u64()?;
    let recompute = attrs
        .get(RECOMPUTE_ATTR)
        .and_then(Value::as_bool)
        .unwrap_or(false);
    Some(
        Batch::new(
            u32::try_from(micro).ok()?,
            u32::try_from(accumulation).ok()?,
        )
        .with_recompute(recompute),
    )
}

/// Records the trial's measured peak device memory (bytes), from which the
/// executor learns its correction. Trials that record none teach it nothing,
/// unless [`ProcessConfig::host_memory`](super::ProcessConfig::host_memory)
/// says their memory is the process's own (then the peak resident memory is
/// used). Every worker records its peak resident memory in
/// [`PEAK_RSS_ATTR`](super::PEAK_RSS_ATTR) for reference.
pub fn record_peak(trial: &mut Trial, bytes: u64) -> Result<()> {
    trial.set_system_attr(PEAK_BYTES_ATTR, bytes)
}

/// This process's peak resident memory in bytes (Linux `VmHWM`).
fn process_peak_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}
