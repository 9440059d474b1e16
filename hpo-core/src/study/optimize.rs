//! The optimize loop: sequential or thread-parallel, with a budget and callbacks.

use super::budget::{BudgetStep, StudyBudget, BUDGET_POLL};
use super::interrupt::{self, Running};
use super::Trial;
use super::{Finish, Study};
use crate::error::{Error, Result};
use crate::signals::{self, StopSignal, DEFAULT_TERM_GRACE};
use crate::trial::{FailureKind, FrozenTrial, IntoTrialResult, TrialError};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A callback run after each finished trial (in the thread that ran it).
pub type Callback = Box<dyn Fn(&Study, &FrozenTrial) + Send + Sync>;

/// A hook run before a signal ends the process ([`Optimize::before_exit`]).
pub(crate) type ExitHook = Box<dyn Fn(&Study, StopSignal) + Send + Sync>;

/// How long and how wide [`Study::optimize_with`] runs.
///
/// Stops when [`Optimize::trials`] trials have been started by this call, when
/// the [`Optimize::timeout`] has elapsed (checked before each trial starts; a
/// running trial is not interrupted), or when [`Study::stop`] is called,
/// whichever comes first. With neither a trial count nor a timeout it runs
/// until stopped. With the handlers of [`signals::install`], SIGINT and
/// SIGTERM stop it too, and it returns [`Error::Interrupted`] (see
/// [`crate::signals`] for what happens to the running trials).
///
/// ```
/// # use hpo_core::Optimize;
/// # use std::time::Duration;
/// let opts = Optimize::new().trials(100).timeout(Duration::from_secs(600)).jobs(4);
/// ```
#[derive(Default)]
pub struct Optimize {
    n_trials: Option<usize>,
    timeout: Option<Duration>,
    n_jobs: usize,
    callbacks: Vec<Callback>,
    runner: Option<Arc<dyn TrialRunner>>,
    term_grace: Option<Duration>,
    before_exit: Vec<ExitHook>,
    study_budget: Option<StudyBudget>,
}

/// The trial budget of one [`Study::optimize_with`] call, as a
/// [`TrialRunner`] receives it.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Stop after this many trials started by the call.
    pub n_trials: Option<usize>,
    /// Stop starting trials after this long.
    pub timeout: Option<Duration>,
    /// After SIGTERM, how long running trials may go on before they are
    /// failed as interrupted ([`Optimize::term_grace`]).
    pub term_grace: Duration,
    /// The budget of the whole study, across processes
    /// ([`Optimize::study_budget`]).
    pub study_budget: Option<StudyBudget>,
}

impl Default for Limits {
    /// No trial count, no timeout, [`DEFAULT_TERM_GRACE`].
    fn default() -> Self {
        Limits {
            n_trials: None,
            timeout: None,
            term_grace: DEFAULT_TERM_GRACE,
            study_budget: None,
        }
    }
}

impl Limits {
    /// Whether the timeout has passed for a call that started at `start`.
    pub fn timed_out(&self, start: Instant) -> bool {
        self.timeout.is_some_and(|t| start.elapsed() >= t)
    }
}

/// An objective with its result type erased, as a [`TrialRunner`] receives it.
pub type DynObjective<'a> =
    &'a (dyn Fn(&mut Trial) -> std::result::Result<Vec<f64>, TrialError> + Sync);

/// Runs the trials of [`Study::optimize_with`] somewhere other than this
/// process's threads. The process executor's `ProcessConfig` (module
/// `executor`, which sits above `study/`) is the implementation hpo ships;
/// `study/` only knows this trait, so the dependency points one way.
pub trait TrialRunner: Send + Sync + std::fmt::Debug {
    /// Runs trials of `study` within `limits`, calling `callback` after each
    /// finished trial, until the limits are reached or [`Study::stop`] is called.
    fn run(
        &self,
        study: &Study,
        limits: Limits,
        callback: &dyn Fn(&Study, &FrozenTrial),
        objective: DynObjective<'_>,
    ) -> Result<()>;
}

impl std::fmt::Debug for Optimize {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Optimize")
            .field("n_trials", &self.n_trials)
            .field("timeout", &self.timeout)
            .field("n_jobs", &self.n_jobs)
            .field("callbacks", &self.callbacks.len())
            .field("runner", &self.runner)
            .field("term_grace", &self.term_grace)
            .field("before_exit", &self.before_exit.len())
            .field("study_budget", &self.study_budget)
            .finish()
    }
}

impl Optimize {
    /// No limit yet, one thread, no callbacks.
    pub fn new() -> Self {
        Self::default()
    }

    /// Stop after `n` trials started by this call.
    pub fn trials(mut self, n: usize) -> Self {
        self.n_trials = Some(n);
        self
    }

    /// Stop starting trials once `timeout` has elapsed.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Run trials on `n` threads (default 1). With one thread and a seeded
    /// sampler a study is reproducible; with several, trial order depends on timing.
    pub fn jobs(mut self, n: usize) -> Self {
        self.n_jobs = n;
        self
    }

    /// Runs each trial in its own worker process, admitted by device memory:
    /// pass an `executor::ProcessConfig` (see [`crate::executor`]); `jobs` is
    /// then ignored. Threads remain the in-process option.
    pub fn processes(mut self, runner: impl TrialRunner + 'static) -> Self {
        self.runner = Some(Arc::new(runner));
        self
    }

    /// Adds a callback run after each finished trial.
    pub fn callback(mut self, f: impl Fn(&Study, &FrozenTrial) + Send + Sync + 'static) -> Self {
        self.callbacks.push(Box::new(f));
        self
    }

    /// After SIGTERM (with the handlers of [`signals::install`]), how long
    /// the running trials may go on before they are failed as interrupted
    /// and re-enqueued (default [`DEFAULT_TERM_GRACE`]; keep it well inside
    /// the scheduler's time between SIGTERM and SIGKILL, Slurm's `KillWait`).
    pub fn term_grace(mut self, grace: Duration) -> Self {
        self.term_grace = Some(grace);
        self
    }

    /// Runs until the *study* has its trials or its deadline has passed,
    /// counted in storage across every process and machine that runs it
    /// (see [`StudyBudget`]): trials that ended COMPLETE or PRUNED count,
    /// FAIL trials and their retry copies do not. A process whose budget is
    /// taken while other processes' trials still run waits for them (one may
    /// fail and need its slot again), then returns. Combines with
    /// [`Optimize::trials`] and [`Optimize::timeout`], which bound this call.
    /// The budget a study was created with is [`Study::budget`].
    pub fn study_budget(mut self, budget: StudyBudget) -> Self {
        self.study_budget = Some(budget);
        self
    }

    /// Adds a hook run when a signal ends the process from inside
    /// [`Study::optimize_with`]: trials running on this process's threads
    /// cannot be stopped, so once SIGINT or SIGTERM has failed them (see
    /// [`crate::signals`]) and their objectives have not returned, the
    /// process exits with the signal's status after running these hooks.
    /// Give here what the caller would do after `optimize_with` returned
    /// [`Error::Interrupted`] (restore the terminal, print a summary); the
    /// hooks run on the watcher thread. Worker processes never need them:
    /// their coordinator stops them and returns.
    pub fn before_exit(mut self, f: impl Fn(&Study, StopSignal) + Send + Sync + 'static) -> Self {
        self.before_exit.push(Box::new(f));
        self
    }
}

impl Study {
    /// Runs `objective` under `opts` (trial budget, timeout, threads, callbacks).
    ///
    /// `objective` returns what [`IntoTrialResult`] accepts: `Ok(loss)` from a
    /// closure needs no annotation (its error type is [`TrialError`]), and
    /// `?` inside converts any `std::error::Error`.
    pub fn optimize_with<F, R>(&self, opts: Optimize, objective: F) -> Result<()>
    where
        F: Fn(&mut Trial) -> R + Sync,
        R: IntoTrialResult,
    {
        self.core.stop.store(false, Ordering::SeqCst);
        let limits = Limits {
            n_trials: opts.n_trials,
            timeout: opts.timeout,
            term_grace: opts.term_grace.unwrap_or(DEFAULT_TERM_GRACE),
            study_budget: opts.study_budget.filter(|b| !b.is_unlimited()),
        };
        if let Some(runner) = &opts.runner {
            let callback = |study: &Study, trial: &FrozenTrial| {
                for cb in &opts.callbacks {
                    cb(study, trial);
                }
            };
            let erased = |trial: &mut Trial| objective(trial).into_trial_result();
            let ran = runner.run(self, limits, &callback, &erased);
            self.end_tracking();
            return ran;
        }
        let started = AtomicUsize::new(0);
        let first_error: Mutex<Option<Error>> = Mutex::new(None);
        let t0 = Instant::now();
        let jobs = opts.n_jobs.max(1);
        // Only with the handlers installed can a signal stop the trials.
        let running = signals::installed().then(|| Running::new(jobs));
        let worker = || {
            loop {
                if self.core.stop.load(Ordering::SeqCst) || !signals::state().admits() {
                    break;
                }
                if let Some(budget) = &limits.study_budget {
                    match self.budget_step(budget) {
                        Ok(BudgetStep::Start) => {}
                        Ok(BudgetStep::Done) => break,
                        Ok(BudgetStep::Wait) => {
                            std::thread::sleep(BUDGET_POLL);
                            continue;
                        }
                        Err(e) => {
                            if let Ok(mut slot) = first_error.lock() {
                                slot.get_or_insert(e);
                            }
                            self.stop();
                            break;
                        }
                    }
                }
                if let Some(n) = opts.n_trials {
                    if started.fetch_add(1, Ordering::SeqCst) >= n {
                        break;
                    }
                }
                if limits.timed_out(t0) {
                    break;
                }
                match self.run_one(&objective, running.as_ref(), limits.study_budget.as_ref()) {
                    Ok(Some(finished)) => {
                        for cb in &opts.callbacks {
                            cb(self, &finished);
                        }
                    }
                    // Failed by the watcher, which told the callbacks.
                    Ok(None) => {}
                    Err(e) => {
                        if let Ok(mut slot) = first_error.lock() {
                            slot.get_or_insert(e);
                        }
                        self.stop();
                        break;
                    }
                }
            }
            if let Some(r) = &running {
                r.job_done();
            }
        };
        std::thread::scope(|s| {
            if let Some(r) = &running {
                let (callbacks, hooks) = (&opts.callbacks, &opts.before_exit);
                s.spawn(move || interrupt::watch(self, r, limits.term_grace, callbacks, hooks));
            }
            if jobs == 1 {
                worker();
            } else {
                for _ in 0..jobs {
                    s.spawn(worker);
                }
            }
        });
        self.end_tracking();
        if let Some(e) = first_error.into_inner()? {
            return Err(e);
        }
        match signals::state().signal() {
            Some(signal) => Err(Error::Interrupted { signal }),
            None => Ok(()),
        }
    }

    /// Runs one trial; objective failures become FAIL trials, storage errors
    /// are returned. `None` when a signal stopped the study and its watcher
    /// failed the trial (and told the callbacks), or when the trial was
    /// created just as other processes took the last slots of `budget`.
    fn run_one<F, R>(
        &self,
        objective: &F,
        running: Option<&Running>,
        budget: Option<&StudyBudget>,
    ) -> Result<Option<Arc<FrozenTrial>>>
    where
        F: Fn(&mut Trial) -> R + Sync,
        R: IntoTrialResult,
    {
        let mut trial = self.ask()?;
        let id = trial.id();
        if let Some(budget) = budget {
            if !self.keep_within(budget, trial.frozen())? {
                return Ok(None);
            }
        }
        if let Some(signal) = running.map(|r| r.enter(id)).transpose()?.flatten() {
            // Started just as the watcher stopped the others.
            drop(trial);
            return self.fail_interrupted(id, signal, &[]);
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            objective(&mut trial).into_trial_result()
        }));
        let finish = match outcome {
            Ok(r) => Finish::Result(r),
            Err(payload) => Finish::Panic(panic_message(payload.as_ref())),
        };
        let finished = self.finish(trial, finish);
        if let Some(r) = running {
            r.leave(id);
        }
        let finished = finished?;
        Ok((finished.failure() != Some(FailureKind::Interrupted)).then_some(finished))
    }
}

/// Hooks for the process executor (`crate::executor`): a trial asked by the
/// coordinator is handed to a worker process, which adopts it.
impl Study {
    /// Whether [`Study::stop`] was called.
    pub(crate) fn stop_requested(&self) -> bool {
        self.core.stop.load(Ordering::SeqCst)
    }

    /// Gives up this handle's ownership of a RUNNING trial without finishing
    /// it; its heartbeat goes on until [`Study::stop_beating`]. The storage
    /// reads it from the database from now on (another process writes it).
    pub(crate) fn hand_over(&self, trial: Trial) -> Result<FrozenTrial> {
        let frozen = trial.into_parts().1;
        self.core.storage.release_trial(frozen.id)?;
        Ok(frozen)
    }

    /// Stops the heartbeat this handle keeps for `trial_id`, if any.
    pub(crate) fn stop_beating(&self, trial_id: u64) -> Result<()> {
        let beat = self.core.beats.lock()?.remove(&trial_id);
        drop(beat);
        Ok(())
    }

    /// Takes over a RUNNING trial handed over by another process, beating for
    /// it; its joint values are those the other process drew (see
    /// [`Trial::resume`]).
    pub(crate) fn adopt(&self, trial_id: u64) -> Result<Trial> {
        let frozen = self.core.storage.trial(trial_id)?;
        if frozen.state != crate::TrialState::Running {
            return Err(Error::TrialFinished {
                number: frozen.number,
                state: frozen.state,
            });
        }
        if let Some(hb) = self.core.heartbeat {
            let beat = super::heartbeat::HeartbeatThread::start(
                Arc::clone(&self.core.storage),
                &frozen,
                hb.interval,
            )?;
            self.core.beats.lock()?.insert(frozen.id, beat);
        }
        Trial::resume(Arc::clone(&self.core), (*frozen).clone())
    }

    /// Finishes `trial` with an objective's outcome, or with a panic message.
    pub(crate) fn finish_outcome(
        &self,
        trial: Trial,
        outcome: std::result::Result<std::result::Result<Vec<f64>, crate::TrialError>, String>,
    ) -> Result<Arc<FrozenTrial>> {
        let finish = match outcome {
            Ok(r) => Finish::Result(r),
            Err(m) => Finish::Panic(m),
        };
        self.finish(trial, finish)
    }
}

/// The message of a panic payload (`&str` or `String`), or a placeholder.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}
