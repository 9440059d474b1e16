//! The coordinator: asks for trials, admits them, launches and watches workers.
//!
//! It never touches a device itself, so nothing a worker does can crash it.
//! Each admitted trial is handed to a fresh worker process; the coordinator
//! polls the workers' exits and enforces the trial timeout. A worker that
//! ends without telling its trial (signal, non-zero status, panic in a
//! `panic = "abort"` build, hang) gets its trial failed here, with the exit
//! and the last lines of its standard error as system attributes. An OOM
//! (told by the worker, or read from its stderr) is relaunched with a smaller
//! micro-batch as a WAITING trial with lineage.
//!
//! Workers run in a process group of their own, so a terminal's Ctrl-C
//! reaches the coordinator alone, and they ignore SIGINT and SIGTERM from
//! anyone but the coordinator (a scheduler signals every process of the
//! step). With the handlers of [`crate::signals`] the coordinator stops the
//! study: nothing new starts, and the workers are stopped (after SIGTERM,
//! once the grace period has passed) with their trials failed as
//! interrupted, each with its retry copy.

use super::admission::{AdmissionPolicy, Candidate, Launch, Scheduler, Step, TrialEnd};
use super::devices::DeviceBudget;
use super::fold::LineFolder;
use super::worker::{
    self, Assignment, DEVICE_MEMORY_ENV, ORPHAN_STATUS, STORAGE_FAILURE_STATUS, WORKER_ENV,
};
use super::{
    batch_of, fit_options, is_oom_text, smaller_option, Batch, MemoryEstimator, ACCUMULATION_ATTR,
    DEVICE_ATTR, ESTIMATE_BYTES_ATTR, EXIT_ATTR, MICRO_BATCH_ATTR, NOT_STARTED_REASON,
    OOM_RETRIES_ATTR, PEAK_BYTES_ATTR, PEAK_RSS_ATTR, PREDICTED_BYTES_ATTR, RECOMPUTE_ATTR,
    RESERVED_BYTES_ATTR, STDERR_ATTR,
};
use crate::distribution::ParamValue;
use crate::error::{Error, Result};
use crate::pruner::PrunerConfig;
use crate::sampler::{Sampler, SamplerConfig};
use crate::signals::{self, StopSignal};
use crate::study::Trial;
use crate::study::{BudgetStep, BudgetWatch, DynObjective, Limits, Study, TrialRunner};
use crate::trial::{FailureKind, FrozenTrial, TrialError, TrialState};
use serde_json::Value;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Trials sampled ahead by default for samplers whose proposals do not
/// depend on results (random, QMC, grid): the most packing choice.
pub const LOOKAHEAD_INDEPENDENT: usize = 8;
/// Trials sampled ahead by default for samplers that learn from results
/// (TPE, CMA-ES, and any sampler hpo cannot describe).
pub const LOOKAHEAD_LEARNING: usize = 2;

/// Default time between SIGTERM and SIGKILL for a worker past its trial
/// timeout ([`ProcessConfig::kill_grace`]).
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(10);

/// The longest time between SIGTERM and SIGKILL for a worker stopped because
/// a signal stopped the study (at most [`ProcessConfig::kill_grace`]): after
/// SIGTERM's grace period of 20 s, a scheduler's SIGKILL is only 10 s away.
const STOP_KILL_GRACE: Duration = Duration::from_secs(5);

/// System attributes of one attempt that an interrupted trial's retry copy
/// leaves out: where and how that attempt ran.
const ATTEMPT_ATTRS: [&str; 8] = [
    EXIT_ATTR,
    STDERR_ATTR,
    PEAK_BYTES_ATTR,
    PEAK_RSS_ATTR,
    DEVICE_ATTR,
    ESTIMATE_BYTES_ATTR,
    RESERVED_BYTES_ATTR,
    PREDICTED_BYTES_ATTR,
];

/// Settings of the process executor, given to
/// [`Optimize::processes`](crate::Optimize::processes).
///
/// ```
/// # use hpo_core::executor::{ProcessConfig, GIB, MemoryEstimator};
/// # fn make(estimator: std::sync::Arc<dyn MemoryEstimator>) -> ProcessConfig {
/// ProcessConfig::new("sqlite:study.db", estimator)
///     .budget(24 * GIB) // reproduce a 24 GB card, even on a bigger one
///     .headroom(GIB / 2)
///     .context(GIB / 2) // one CUDA context per worker process
///     .trial_timeout(std::time::Duration::from_secs(3600))
/// # }
/// ```
#[derive(Clone)]
pub struct ProcessConfig {
    storage_url: String,
    estimator: Arc<dyn MemoryEstimator>,
    totals: Vec<u64>,
    headroom: u64,
    context: u64,
    admission: AdmissionPolicy,
    trial_timeout: Option<Duration>,
    kill_grace: Duration,
    lookahead: Option<usize>,
    max_workers: Option<usize>,
    visible: Vec<String>,
    stderr_lines: usize,
    worker_args: Option<Vec<String>>,
    host_memory: bool,
    env: Vec<(String, String)>,
    poll: Duration,
}

impl std::fmt::Debug for ProcessConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProcessConfig")
            .field("totals", &self.totals)
            .field("headroom", &self.headroom)
            .field("context", &self.context)
            .field("admission", &self.admission)
            .field("trial_timeout", &self.trial_timeout)
            .field("kill_grace", &self.kill_grace)
            .field("lookahead", &self.lookahead)
            .field("max_workers", &self.max_workers)
            .field("visible_devices", &self.visible)
            .field("host_memory", &self.host_memory)
            .field("env", &self.env)
            .finish_non_exhaustive()
    }
}

impl ProcessConfig {
    /// Workers reach the study at `storage_url` (a file or database: an
    /// in-memory study cannot be shared between processes), and
    /// `estimator` sizes each configuration. Set the memory with
    /// [`ProcessConfig::budget`] or [`ProcessConfig::devices`].
    pub fn new(storage_url: impl Into<String>, estimator: Arc<dyn MemoryEstimator>) -> Self {
        ProcessConfig {
            storage_url: storage_url.into(),
            estimator,
            totals: Vec::new(),
            headroom: 0,
            context: 0,
            admission: AdmissionPolicy::default(),
            trial_timeout: None,
            kill_grace: DEFAULT_KILL_GRACE,
            lookahead: None,
            max_workers: None,
            visible: Vec::new(),
            stderr_lines: 20,
            worker_args: None,
            host_memory: false,
            env: Vec::new(),
            poll: Duration::from_millis(20),
        }
    }

    /// One device with `total` bytes (the device's total, or less to
    /// reproduce a smaller card).
    pub fn budget(mut self, total: u64) -> Self {
        self.totals = vec![total];
        self
    }

    /// Several devices, one total each; the trials placed on device `i` run
    /// with `CUDA_VISIBLE_DEVICES=i` (see [`ProcessConfig::visible_devices`]).
    pub fn devices(mut self, totals: impl IntoIterator<Item = u64>) -> Self {
        self.totals = totals.into_iter().collect();
        self
    }

    /// Bytes of each device kept free (default 0).
    pub fn headroom(mut self, bytes: u64) -> Self {
        self.headroom = bytes;
        self
    }

    /// Device memory each worker process costs before its trial allocates
    /// anything (a CUDA context; default 0).
    pub fn context(mut self, bytes: u64) -> Self {
        self.context = bytes;
        self
    }

    /// Admission settings: safety margin, queue policy, micro-batch floor.
    pub fn admission(mut self, policy: AdmissionPolicy) -> Self {
        self.admission = policy;
        self
    }

    /// A trial still running after `timeout` is failed as hung: its worker
    /// gets SIGTERM, then SIGKILL if it has not exited after the grace
    /// period ([`ProcessConfig::kill_grace`]) (default: no timeout).
    pub fn trial_timeout(mut self, timeout: Duration) -> Self {
        self.trial_timeout = Some(timeout);
        self
    }

    /// How long a worker past its trial timeout has between SIGTERM and
    /// SIGKILL (default [`DEFAULT_KILL_GRACE`]).
    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.kill_grace = grace;
        self
    }

    /// How many trials are sampled ahead and queued for admission, among
    /// which the scheduler picks the one that packs the memory best.
    ///
    /// The default depends on the study's sampler. Every trial sampled ahead
    /// is one more trial in flight for the sampler: proposed without the
    /// results that arrive before it starts. Samplers whose proposals do not
    /// depend on results (random search, QMC, a grid) lose nothing by it and
    /// get 8; the others (TPE, CMA-ES, and samplers hpo cannot describe,
    /// `Sampler::to_config` returning `None`) get 2. On the sampler suite
    /// TPE needs 1.2-1.3 times the trials of a sequential run to reach its
    /// result with 4 trials in flight and 1.6-1.9 times with 8, while the
    /// simulated 24 GB workload runs 8 % fewer useful trials an hour with
    /// 2 sampled ahead than with 8 (the book's Parallel trials chapter).
    pub fn lookahead(mut self, n: usize) -> Self {
        self.lookahead = Some(n.max(1));
        self
    }

    /// The trials sampled ahead for a study sampled by `sampler`: the set
    /// [`ProcessConfig::lookahead`], or the default for that sampler.
    pub fn lookahead_for(&self, sampler: &dyn Sampler) -> usize {
        self.lookahead.unwrap_or(match sampler.to_config() {
            Some(
                SamplerConfig::Random { .. } | SamplerConfig::Qmc(_) | SamplerConfig::Grid { .. },
            ) => LOOKAHEAD_INDEPENDENT,
            _ => LOOKAHEAD_LEARNING,
        })
    }

    /// What `CUDA_VISIBLE_DEVICES` says to the workers of each device, in
    /// the order of [`ProcessConfig::devices`] (default: the device's index,
    /// `0` for a single [`ProcessConfig::budget`]). For one budget on GPU 3:
    /// `.budget(total).visible_devices(["3"])`.
    pub fn visible_devices(mut self, ids: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.visible = ids.into_iter().map(Into::into).collect();
        self
    }

    /// At most `n` worker processes at once (at least 1), on top of admission
    /// by memory (default: as many as the memory admits). A fixed count, as
    /// `--jobs N` is in the `criteria` example.
    pub fn max_workers(mut self, n: usize) -> Self {
        self.max_workers = Some(n.max(1));
        self
    }

    /// The arguments workers are started with (default: this process's own).
    pub fn worker_args(mut self, args: impl IntoIterator<Item = impl Into<String>>) -> Self {
        self.worker_args = Some(args.into_iter().map(Into::into).collect());
        self
    }

    /// The trials use host memory, not a device's: a worker that records no
    /// peak reports its process's peak resident memory, and the budget is the
    /// machine's memory (default false: on a GPU the host figure says nothing
    /// about device memory).
    pub fn host_memory(mut self, yes: bool) -> Self {
        self.host_memory = yes;
        self
    }

    /// Sets `key=value` in every worker process's environment (on top of
    /// this process's environment and the executor's own variables, which
    /// win over it). Setting a key again replaces its value.
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        self.env.retain(|(k, _)| *k != key);
        self.env.push((key, value.into()));
        self
    }

    /// Each worker process's share of the CPU: sets the sizes of the thread
    /// pools the CPU backends start, rayon's (`RAYON_NUM_THREADS`: burn's
    /// CPU backends) and OpenMP's (`OMP_NUM_THREADS`: LibTorch, BLAS
    /// libraries), to `n` (at least 1). Without it every worker starts one
    /// thread per core, and `k` workers ask for `k` times the cores. A user
    /// variable of the same name is overridden in the workers.
    pub fn threads_per_worker(self, n: usize) -> Self {
        let n = n.max(1).to_string();
        self.env("RAYON_NUM_THREADS", n.clone())
            .env("OMP_NUM_THREADS", n)
    }

    fn budgets(&self) -> Result<Vec<DeviceBudget>> {
        if self.totals.is_empty() {
            return Err(Error::InvalidConfig(
                "the process executor needs a memory budget: `ProcessConfig::budget(bytes)` \
                 or `ProcessConfig::devices([...])`"
                    .into(),
            ));
        }
        Ok(self
            .totals
            .iter()
            .enumerate()
            .map(|(i, &t)| DeviceBudget::new(format!("device {i}"), t, self.headroom, self.context))
            .collect())
    }

    fn check_url(&self, study: &Study) -> Result<()> {
        let url = self.storage_url.trim();
        let lower = url.to_ascii_lowercase();
        if lower.starts_with("memory:")
            || lower.starts_with("inmemory:")
            || lower.ends_with(":memory:")
        {
            return Err(Error::InvalidConfig(format!(
                "study `{}`: an in-memory study cannot run trials in worker processes (`{url}`: \
                 each process would see its own empty database); store it in a file, \
                 for example `sqlite:study.db`",
                study.name()
            )));
        }
        let storage = crate::storage::storage_from_url(url)?;
        match storage.find_study(study.name())? {
            Some(found) if found.id == study.id() => Ok(()),
            _ => Err(Error::InvalidConfig(format!(
                "study `{}` is not in the storage `{url}` its workers would open; \
                 build the study on that storage (an in-memory study cannot run trials in \
                 worker processes)",
                study.name()
            ))),
        }
    }
}

/// A trial asked by the coordinator and waiting for admission.
struct Held {
    trial: Trial,
    family: String,
}

/// A worker process and what it runs.
struct Worker {
    child: Child,
    trial_id: u64,
    number: u64,
    started: Instant,
    stderr: Arc<Mutex<VecDeque<String>>>,
    reader: Option<JoinHandle<()>>,
    launch: Launch<u64>,
    timed_out: bool,
    /// When SIGTERM was sent after the trial timeout, or to stop the study.
    terminated: Option<Instant>,
    /// The signal that stopped the study, once this worker was stopped for it.
    stopped: Option<StopSignal>,
}

impl TrialRunner for ProcessConfig {
    fn run(
        &self,
        study: &Study,
        limits: Limits,
        callback: &dyn Fn(&Study, &FrozenTrial),
        objective: DynObjective<'_>,
    ) -> Result<()> {
        optimize_processes(study, self, limits, callback, objective)
    }
}

/// Runs `Study::optimize_with` with processes.
fn optimize_processes(
    study: &Study,
    config: &ProcessConfig,
    limits: Limits,
    callback: &dyn Fn(&Study, &FrozenTrial),
    objective: DynObjective<'_>,
) -> Result<()> {
    if let Some(a) = worker::assignment_for(study.name())? {
        worker::run_and_exit(&a, objective, Some(study), &[]);
    }
    config.check_url(study)?;
    // Read once: every assignment carries the same settings.
    let pruner = study.pruner().to_config();
    if pruner.is_none() {
        tracing::warn!(
            study = study.name(),
            "the study's pruner has no `Pruner::to_config`: workers rebuild it only where \
             they build the study themselves and reach `Study::optimize_with`; trials of \
             workers started through `executor::worker_main` fail"
        );
    }
    let sampler = study.sampler().to_config();
    if sampler.is_none() {
        tracing::warn!(
            study = study.name(),
            "the study's sampler has no `Sampler::to_config`: workers rebuild it only where \
             they build the study themselves and reach `Study::optimize_with`; in workers \
             started through `executor::worker_main`, a parameter the memory estimator did \
             not suggest fails its trial"
        );
    }
    let Some(hb) = study.heartbeat() else {
        return Err(Error::InvalidConfig(format!(
            "study `{}`: worker processes need heartbeats, so that a trial whose worker or \
             coordinator dies is not left RUNNING; set `StudyBuilder::heartbeat(interval, grace)`",
            study.name()
        )));
    };
    let mut c = Coordinator {
        study,
        config,
        sched: Scheduler::new(config.budgets()?, config.admission),
        held: HashMap::new(),
        workers: Vec::new(),
        heartbeat_ms: (
            u64::try_from(hb.interval.as_millis()).unwrap_or(u64::MAX),
            u64::try_from(hb.grace.as_millis()).unwrap_or(u64::MAX),
        ),
        callback,
        relaunches_pending: 0,
        pruner,
        sampler,
        lookahead: config.lookahead_for(study.sampler().as_ref()),
        budget: BudgetWatch::new(limits.study_budget),
    };
    c.run(limits)
}

struct Coordinator<'a> {
    study: &'a Study,
    config: &'a ProcessConfig,
    sched: Scheduler<u64>,
    held: HashMap<u64, Held>,
    workers: Vec<Worker>,
    heartbeat_ms: (u64, u64),
    callback: &'a dyn Fn(&Study, &FrozenTrial),
    relaunches_pending: usize,
    /// The study's pruner settings, sent with every assignment.
    pruner: Option<PrunerConfig>,
    /// The study's sampler settings, sent with every assignment.
    sampler: Option<SamplerConfig>,
    /// Trials sampled ahead ([`ProcessConfig::lookahead_for`] the study's sampler).
    lookahead: usize,
    /// The study's budget across processes ([`Limits::study_budget`]).
    budget: BudgetWatch,
}

impl Coordinator<'_> {
    fn run(&mut self, limits: Limits) -> Result<()> {
        let result = self.drive(limits);
        if result.is_err() {
            self.shutdown();
        }
        result
    }

    fn drive(&mut self, limits: Limits) -> Result<()> {
        let t0 = Instant::now();
        let mut started = 0usize;
        loop {
            let mut busy = false;
            // 0. Out of time (this call's, or the study's deadline), asked
            // to stop, or a signal: nothing starts from
            // now on. Trials sampled ahead and still queued are given back
            // (see `give_back_held`), and OOM relaunch copies wait, enqueued,
            // for the study's next run.
            let signals = signals::state();
            let signal = signals.signal();
            if self.study.stop_requested()
                || limits.timed_out(t0)
                || signal.is_some()
                || self.budget.past_deadline()
            {
                self.relaunches_pending = 0;
                if !self.held.is_empty() {
                    self.give_back_held()?;
                    busy = true;
                }
            }
            // After SIGINT, or SIGTERM's grace period: the workers are stopped.
            if let Some(signal) = signal.filter(|_| signals.stops_running(limits.term_grace)) {
                self.stop_workers(signal);
            }
            // 1. Sample ahead: ask for trials and queue them for admission.
            while self.held.len() < self.lookahead {
                let wanted = !self.study.stop_requested()
                    && signal.is_none()
                    && limits.n_trials.is_none_or(|n| started < n)
                    && !limits.timed_out(t0)
                    && self.budget.step(self.study)? == BudgetStep::Start;
                if !wanted && self.relaunches_pending == 0 {
                    break;
                }
                if self.ask_one()? {
                    self.relaunches_pending = self.relaunches_pending.saturating_sub(1);
                } else {
                    started += 1;
                    if !wanted {
                        // Another process claimed our relaunch copies.
                        self.relaunches_pending = 0;
                    }
                }
                busy = true;
            }
            // 2. Admit and launch.
            loop {
                if self
                    .config
                    .max_workers
                    .is_some_and(|n| self.workers.len() >= n)
                {
                    break;
                }
                match self.sched.decide() {
                    Some(Step::Launch(l)) => self.launch(l)?,
                    Some(Step::Infeasible { key, reason }) => self.infeasible(key, reason)?,
                    None => break,
                }
                busy = true;
            }
            if !self.held.is_empty() && !self.sched.devices().any_in_rotation() {
                return Err(Error::InvalidOperation(format!(
                    "every device was taken out of rotation ({}); {} sampled trials were not run",
                    (0..self.sched.devices().len())
                        .filter_map(|d| self.sched.devices().out_of_rotation(d))
                        .collect::<Vec<_>>()
                        .join("; "),
                    self.held.len()
                )));
            }
            // 3. Watch the workers.
            let mut i = 0;
            while i < self.workers.len() {
                let w = &mut self.workers[i];
                let status = match w.child.try_wait() {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(trial = w.number, "cannot poll worker: {e}");
                        None
                    }
                };
                let kill_grace = match w.stopped {
                    Some(_) => self.config.kill_grace.min(STOP_KILL_GRACE),
                    None => self.config.kill_grace,
                };
                let status = match (status, self.config.trial_timeout, w.terminated) {
                    (Some(s), _, _) => Some(s),
                    // Past the grace after SIGTERM: SIGKILL.
                    (None, _, Some(at)) if at.elapsed() > kill_grace => {
                        tracing::warn!(
                            trial = w.number,
                            pid = w.child.id(),
                            "the worker did not exit within {kill_grace:?} of SIGTERM; killing it"
                        );
                        let _ = w.child.kill();
                        w.child.wait().ok()
                    }
                    (None, Some(t), None) if w.started.elapsed() > t => {
                        w.timed_out = true;
                        w.terminated = Some(Instant::now());
                        if !terminate(&w.child) {
                            let _ = w.child.kill();
                        }
                        None
                    }
                    _ => None,
                };
                match status {
                    Some(s) => {
                        let w = self.workers.swap_remove(i);
                        self.ended(w, s)?;
                        busy = true;
                    }
                    None => i += 1,
                }
            }
            if self.workers.is_empty()
                && self.held.is_empty()
                && self.sched.queued() == 0
                && self.relaunches_pending == 0
            {
                if let Some(signal) = signal {
                    return Err(Error::Interrupted { signal });
                }
                // Under a study budget a process with nothing left to run
                // waits while other processes' trials hold the rest of it:
                // one of them may fail, and its retry copy must run.
                if self.study.stop_requested()
                    || limits.n_trials.is_some_and(|n| started >= n)
                    || limits.timed_out(t0)
                    || self.budget.step(self.study)? == BudgetStep::Done
                {
                    return Ok(());
                }
            }
            if !busy {
                std::thread::sleep(self.config.poll);
            }
        }
    }

    /// Stops every worker not stopped yet because `signal` stopped the
    /// study: SIGTERM from the coordinator (the one sender a worker obeys),
    /// SIGKILL if it has not exited after [`STOP_KILL_GRACE`]. Its trial is
    /// failed as interrupted once it has exited (see [`Coordinator::ended`]).
    fn stop_workers(&mut self, signal: StopSignal) {
        for w in &mut self.workers {
            // Already on its way out: stopped before, or past its timeout
            // (its trial fails as timed out, which it is).
            if w.stopped.is_some() || w.timed_out {
                continue;
            }
            tracing::info!(
                trial = w.number,
                pid = w.child.id(),
                "stopping the worker: {signal}"
            );
            w.stopped = Some(signal);
            w.terminated = Some(Instant::now());
            if !terminate(&w.child) {
                let _ = w.child.kill();
            }
        }
    }

    /// Asks for one trial, proposes its configuration and queues it. Returns
    /// whether it was an OOM relaunch.
    fn ask_one(&mut self) -> Result<bool> {
        let mut trial = self.study.ask()?;
        let relaunch = trial.frozen().system_attrs.contains_key(OOM_RETRIES_ATTR);
        if let Some(budget) = self.budget.budget() {
            if !self.study.keep_within(budget, trial.frozen())? {
                // Other processes took the study's last slots meanwhile.
                return Ok(relaunch);
            }
        }
        match self.config.estimator.propose(&mut trial) {
            Err(e) => {
                let t = self.study.tell(trial, Err::<f64, _>(e))?;
                (self.callback)(self.study, &t);
            }
            Ok(shape) => {
                let batch = batch_of(&trial).unwrap_or(shape.batch);
                let params = trial.params();
                let estimator = Arc::clone(&self.config.estimator);
                let options = fit_options(batch, self.config.admission.min_micro_batch, |b| {
                    estimator.relative_time(&params, b)
                });
                let candidate =
                    Candidate::with_options(trial.id(), shape.family.clone(), options, |b| {
                        estimator.peak_bytes(&params, b)
                    });
                self.sched.push(candidate);
                self.held.insert(
                    trial.id(),
                    Held {
                        trial,
                        family: shape.family,
                    },
                );
            }
        }
        Ok(relaunch)
    }

    /// Ends every trial that was sampled ahead but not launched when the
    /// study's time ran out or it was stopped: each is failed with that
    /// reason and, in the same transaction, a WAITING copy of its
    /// configuration is enqueued (with the retry lineage of
    /// [`FrozenTrial::retry_copy`]), so the study's next run starts with it
    /// and no sampled configuration is lost. Without this the queue would
    /// keep launching up to `lookahead` trials after the timeout.
    fn give_back_held(&mut self) -> Result<()> {
        self.sched.drop_queued();
        let ids: Vec<u64> = self.held.keys().copied().collect();
        for id in ids {
            let Some(h) = self.held.remove(&id) else {
                continue;
            };
            let frozen = self.study.hand_over(h.trial)?;
            // No worker takes it over: its heartbeat stops here, before the
            // trial is failed, or its next beat would find the trial failed
            // and warn as if a stale-trial reaper had ended it.
            self.study.stop_beating(frozen.id)?;
            let attrs = FailureKind::NotStarted.attrs(NOT_STARTED_REASON);
            let retry = |t: &FrozenTrial| {
                Some(t.retry_copy(&[FailureKind::ATTR, FailureKind::REASON_ATTR]))
            };
            match self
                .study
                .storage()
                .fail_stale_trial(frozen.id, &attrs, &retry)
            {
                Ok((t, copy)) => {
                    tracing::info!(
                        trial = t.number,
                        copy = copy.map(|c| c.number),
                        "sampled ahead but not started before the study stopped; its configuration waits for the next run"
                    );
                    self.study.track_finished(&t);
                    (self.callback)(self.study, &t);
                }
                // Someone else ended it (a stale-trial reaper): nothing to give back.
                Err(Error::TrialFinished { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    fn infeasible(&mut self, key: u64, reason: String) -> Result<()> {
        let Some(h) = self.held.remove(&key) else {
            return Ok(());
        };
        tracing::warn!(trial = h.trial.number(), family = %h.family, "infeasible before launch: {reason}");
        let t = self
            .study
            .tell(h.trial, Err::<f64, _>(TrialError::Infeasible(reason)))?;
        (self.callback)(self.study, &t);
        Ok(())
    }

    fn launch(&mut self, l: Launch<u64>) -> Result<()> {
        let Some(mut h) = self.held.remove(&l.key) else {
            self.sched.end(&l.key, &TrialEnd::default());
            return Ok(());
        };
        h.trial.set_system_attr(MICRO_BATCH_ATTR, l.batch.micro)?;
        h.trial
            .set_system_attr(ACCUMULATION_ATTR, l.batch.accumulation)?;
        if l.batch.recompute {
            h.trial.set_system_attr(RECOMPUTE_ATTR, true)?;
        }
        h.trial.set_system_attr(DEVICE_ATTR, l.device)?;
        h.trial.set_system_attr(ESTIMATE_BYTES_ATTR, l.estimate)?;
        h.trial.set_system_attr(RESERVED_BYTES_ATTR, l.reserved)?;
        h.trial.set_system_attr(PREDICTED_BYTES_ATTR, l.predicted)?;
        // What the estimator did not suggest of the trial's joint sample,
        // for the worker to suggest from.
        h.trial.record_relative_sample()?;
        let relaunchable = self.smaller(&h.trial.params(), l.batch).is_some();
        let frozen = self.study.hand_over(h.trial)?;
        let assignment = Assignment {
            study: self.study.name().to_owned(),
            storage: self.config.storage_url.clone(),
            trial_id: frozen.id,
            heartbeat_ms: Some(self.heartbeat_ms),
            relaunchable,
            parent: std::process::id(),
            host_peak: self.config.host_memory,
            pruner: self.pruner.clone(),
            sampler: self.sampler.clone(),
        };
        match self.spawn(&assignment, l.device) {
            Ok((child, stderr, reader)) => {
                tracing::info!(
                    trial = frozen.number,
                    pid = child.id(),
                    device = l.device,
                    micro_batch = l.batch.micro,
                    "worker started (reserved {:.2} GiB)",
                    l.reserved as f64 / super::GIB as f64
                );
                self.workers.push(Worker {
                    child,
                    trial_id: frozen.id,
                    number: frozen.number,
                    started: Instant::now(),
                    stderr,
                    reader: Some(reader),
                    launch: l,
                    timed_out: false,
                    terminated: None,
                    stopped: None,
                });
                Ok(())
            }
            Err(e) => {
                self.study.stop_beating(frozen.id)?;
                self.sched.end(&l.key, &TrialEnd::default());
                let attrs = FailureKind::Error.attrs(format!("cannot start a worker process: {e}"));
                let t =
                    self.study
                        .storage()
                        .finish_trial(frozen.id, TrialState::Fail, None, &attrs)?;
                self.study.track_finished(&t);
                (self.callback)(self.study, &t);
                Ok(())
            }
        }
    }

    #[allow(clippy::type_complexity)]
    fn spawn(
        &self,
        a: &Assignment,
        device: usize,
    ) -> std::io::Result<(Child, Arc<Mutex<VecDeque<String>>>, JoinHandle<()>)> {
        let exe = std::env::current_exe()?;
        let args = self
            .config
            .worker_args
            .clone()
            .unwrap_or_else(|| std::env::args().skip(1).collect());
        let json = serde_json::to_string(a).map_err(std::io::Error::other)?;
        let visible = self
            .config
            .visible
            .get(device)
            .cloned()
            .unwrap_or_else(|| device.to_string());
        // The memory the worker may use on its device: the device's budget
        // (hpo's patched cubecl-cuda sizes its memory pages from it, so a
        // trial on a bigger card reserves as on the card the budget stands for).
        let budget = self.config.totals.get(device).copied().unwrap_or(0);
        let mut command = Command::new(exe);
        // A process group of its own: a terminal's Ctrl-C (SIGINT to the
        // foreground group) reaches the coordinator, which decides.
        #[cfg(unix)]
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command
            .args(args)
            .envs(self.config.env.iter().map(|(k, v)| (k, v)))
            .env(WORKER_ENV, json)
            .env("CUDA_VISIBLE_DEVICES", visible)
            .env("HPO_DEVICE", device.to_string())
            .env(DEVICE_MEMORY_ENV, budget.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        // The worker's stdout is forwarded line by line (through the
        // coordinator's own stdout, so a test harness captures it too).
        if let Some(out) = child.stdout.take() {
            std::thread::Builder::new()
                .name(format!("hpo-worker-stdout-{}", a.trial_id))
                .spawn(move || {
                    for line in BufReader::new(out).lines() {
                        let Ok(line) = line else { break };
                        println!("{line}");
                    }
                })?;
        }
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        let keep = self.config.stderr_lines;
        let sink = Arc::clone(&tail);
        let pipe = child.stderr.take();
        let number = a.trial_id;
        let reader = std::thread::Builder::new()
            .name(format!("hpo-worker-stderr-{number}"))
            .spawn(move || {
                let Some(pipe) = pipe else { return };
                // A failing backend repeats one line thousands of times:
                // folded, the kept tail still holds the cause.
                let mut folder = LineFolder::default();
                let emit = |lines: Vec<String>| {
                    for line in lines {
                        eprintln!("{line}");
                        if let Ok(mut t) = sink.lock() {
                            t.push_back(line);
                            while t.len() > keep {
                                t.pop_front();
                            }
                        }
                    }
                };
                for line in BufReader::new(pipe).lines() {
                    let Ok(line) = line else { break };
                    emit(folder.push(line));
                }
                emit(folder.flush());
            })?;
        Ok((child, tail, reader))
    }

    /// A worker exited (or was killed after the timeout): record, learn, relaunch.
    fn ended(&mut self, mut w: Worker, status: ExitStatus) -> Result<()> {
        if let Some(r) = w.reader.take() {
            let _ = r.join();
        }
        let tail = w
            .stderr
            .lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default();
        self.study.stop_beating(w.trial_id)?;
        let storage = Arc::clone(self.study.storage());
        let mut record = storage.trial(w.trial_id)?;
        // Where an OOM of this run goes next (nowhere at the floor).
        let smaller = self.smaller(&record.params(), w.launch.batch);
        let mut device_fault = None;
        if let Some(signal) = w.stopped.filter(|_| record.state == TrialState::Running) {
            // Stopped with the study: its configuration waits for the next run.
            record = match self
                .study
                .fail_interrupted(w.trial_id, signal, &ATTEMPT_ATTRS)?
            {
                Some(t) => t,
                None => storage.trial(w.trial_id)?,
            };
        } else if record.state == TrialState::Running {
            let cause = if w.timed_out {
                format!(
                    "did not finish within the trial timeout of {:?} and was killed",
                    self.config.trial_timeout.unwrap_or_default()
                )
            } else {
                describe(status)
            };
            // OOM evidence wins, also over a timeout: a GPU process can hang
            // after a failed allocation (cubecl's device thread is gone), and
            // what it needs is the same as any OOM, a smaller relaunch.
            let oom = is_oom_text(&tail);
            let kind = if oom {
                FailureKind::Oom
            } else if tail.contains("panicked") {
                FailureKind::Panic
            } else {
                FailureKind::Error
            };
            if !oom && !w.timed_out && signal_of(status).is_some() {
                device_fault = Some(cause.clone());
            }
            let reason = if tail.is_empty() {
                format!("the worker process {cause} without finishing its trial")
            } else {
                format!("the worker process {cause} without finishing its trial; last lines of its stderr:\n{tail}")
            };
            tracing::warn!(trial = w.number, "{reason}");
            let mut attrs = kind.attrs(reason);
            attrs.push((EXIT_ATTR.to_owned(), Value::from(cause)));
            attrs.push((STDERR_ATTR.to_owned(), Value::from(tail)));
            let relaunchable = smaller.is_some();
            if oom {
                let mut config = serde_json::Map::new();
                for (k, v) in record.params() {
                    config.insert(k, v.to_json_value());
                }
                config.insert("micro_batch".into(), Value::from(w.launch.batch.micro));
                config.insert(
                    "accumulation".into(),
                    Value::from(w.launch.batch.accumulation),
                );
                if w.launch.batch.recompute {
                    config.insert("recompute".into(), Value::from(true));
                }
                attrs.push((
                    FailureKind::OOM_CONFIG_ATTR.to_owned(),
                    Value::Object(config),
                ));
                if !relaunchable {
                    attrs.push((
                        FailureKind::CONSTRAINTS_ATTR.to_owned(),
                        Value::from(vec![1.0]),
                    ));
                }
            }
            record = match storage.finish_trial(w.trial_id, TrialState::Fail, None, &attrs) {
                // Ended here, not by its worker: reported from here.
                Ok(t) => {
                    self.study.track_finished(&t);
                    t
                }
                // Reaped as stale meanwhile: its record stands.
                Err(Error::TrialFinished { .. }) => storage.trial(w.trial_id)?,
                Err(e) => return Err(e),
            };
        } else if let Some(code) = status.code() {
            if code == STORAGE_FAILURE_STATUS || code == ORPHAN_STATUS {
                tracing::warn!(
                    trial = w.number,
                    "worker exited with status {code} after its trial ended"
                );
            }
        }
        let oom = record.failure() == Some(FailureKind::Oom);
        let measured = record
            .system_attrs
            .get(PEAK_BYTES_ATTR)
            .and_then(Value::as_u64);
        if self.sched.end(
            &w.trial_id,
            &TrialEnd {
                measured,
                oom,
                device_fault,
            },
        ) {
            tracing::warn!(device = w.launch.device, "device out of rotation");
        }
        if oom {
            if let Some(smaller) = smaller {
                self.relaunch(&record, smaller)?;
            }
        }
        (self.callback)(self.study, &record);
        Ok(())
    }

    /// What an OOM of `params` at `failed` is relaunched with: the fastest
    /// way to run it that needs less memory ([`smaller_option`]).
    fn smaller(&self, params: &BTreeMap<String, ParamValue>, failed: Batch) -> Option<Batch> {
        let estimator = &self.config.estimator;
        smaller_option(
            failed,
            self.config.admission.min_micro_batch,
            |b| estimator.relative_time(params, b),
            |b| estimator.peak_bytes(params, b),
        )
    }

    /// Re-enqueues an OOM trial's configuration with a smaller batch.
    fn relaunch(&mut self, failed: &FrozenTrial, batch: Batch) -> Result<()> {
        let mut template = failed.retry_copy(&[
            FailureKind::ATTR,
            FailureKind::REASON_ATTR,
            FailureKind::OOM_CONFIG_ATTR,
            FailureKind::CONSTRAINTS_ATTR,
            EXIT_ATTR,
            STDERR_ATTR,
            PEAK_BYTES_ATTR,
            DEVICE_ATTR,
            ESTIMATE_BYTES_ATTR,
            RESERVED_BYTES_ATTR,
        ]);
        let retries = template.retry_count();
        let system = &mut template.system_attrs;
        system.insert(OOM_RETRIES_ATTR.to_owned(), Value::from(retries));
        system.insert(MICRO_BATCH_ATTR.to_owned(), Value::from(batch.micro));
        system.insert(
            ACCUMULATION_ATTR.to_owned(),
            Value::from(batch.accumulation),
        );
        if batch.recompute {
            system.insert(RECOMPUTE_ATTR.to_owned(), Value::from(true));
        } else {
            system.remove(RECOMPUTE_ATTR);
        }
        let copy = self
            .study
            .storage()
            .create_trial(self.study.id(), Some(&template))?;
        self.relaunches_pending += 1;
        tracing::info!(
            "trial {} ran out of memory; relaunched as trial {} with micro-batch {} x {} accumulation{}",
            failed.number,
            copy.number,
            batch.micro,
            batch.accumulation,
            if batch.recompute {
                ", activations recomputed"
            } else {
                ""
            }
        );
        Ok(())
    }

    /// On a coordinator error: kill the workers (their trials are reaped by
    /// heartbeat expiry) and fail the trials that were never launched.
    fn shutdown(&mut self) {
        for mut w in self.workers.drain(..) {
            let _ = w.child.kill();
            let _ = w.child.wait();
            let _ = self.study.stop_beating(w.trial_id);
        }
        for (_, h) in self.held.drain() {
            let _ = self.study.tell(
                h.trial,
                Err::<f64, _>(TrialError::Failed(
                    "the coordinator stopped before this trial was launched".into(),
                )),
            );
        }
    }
}

#[cfg(unix)]
fn signal_of(status: ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[cfg(not(unix))]
fn signal_of(_status: ExitStatus) -> Option<i32> {
    None
}

/// Sends SIGTERM to a worker (Unix), so that it can let go of the device
/// before SIGKILL; false where it could not be sent.
fn terminate(child: &Child) -> bool {
    #[cfg(unix)]
    {
        use rustix::process::{kill_process, Pid, Signal};
        let Some(pid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) else {
            return false;
        };
        kill_process(pid, Signal::TERM).is_ok()
    }
    #[cfg(not(unix))]
    {
        let _ = child;
        false
    }
}

/// "was killed by signal 9 (SIGKILL)", "exited with status 101".
fn describe(status: ExitStatus) -> String {
    if let Some(sig) = signal_of(status) {
        let name = match sig {
            4 => " (SIGILL)",
            6 => " (SIGABRT: abort)",
            7 => " (SIGBUS)",
            9 => " (SIGKILL)",
            11 => " (SIGSEGV)",
            15 => " (SIGTERM)",
            _ => "",
        };
        return format!("was killed by signal {sig}{name}");
    }
    match status.code() {
        Some(c) => format!("exited with status {c}"),
        None => "ended without an exit status".to_owned(),
    }
}
