//! One call that runs a study from its flags: the study opened or resumed,
//! the warm start or `--enqueue`d configurations checked against the space,
//! trials in this process or in worker processes admitted by memory, a line
//! per trial, the progress bar, the summary, and a clean stop on Ctrl-C or
//! a scheduler's SIGTERM.

use super::args::{Jobs, Params, SamplerArg, StudyArgs};
use super::summary::{state_label, Summary};
use crate::artifact::{ArtifactStore, KeepArtifacts};
use crate::executor::{self, Memory, MemoryEstimator, ProcessConfig};
use crate::progress::Bar;
use crate::sampler::{SamplerConfig, TpeConfig};
use crate::signals::{self, StopSignal};
use crate::storage::{redact, storage_from_url};
use crate::study::{Heartbeat, RetryPolicy, StudyBudget, Tally};
use crate::{
    Direction, Error, FrozenTrial, IntoTrialResult, Optimize, Result, SearchSpace, Study,
    StudyBuilder, Tracker, Trial, TrialState,
};
use std::sync::Arc;
use std::time::Duration;

/// A hook that adjusts one of the builders underneath.
type Hook<'a, T> = Box<dyn FnOnce(T) -> T + 'a>;

/// Checks an enqueued configuration against the search space.
type SpaceCheck<'a> = Box<dyn Fn(&Params) -> Result<()> + 'a>;

/// The study system attribute holding the search space the study was
/// created with (its description, one line per parameter and constraint).
pub const SPACE_ATTR: &str = "hpo:space";

/// Runs a study from [`StudyArgs`]. The experiment gives its defaults, its
/// direction and pruner, and (for worker processes) how to size a trial;
/// [`StudyRunner::run`] does the rest:
///
/// ```no_run
/// use hpo::cli::{StudyArgs, StudyRunner};
/// use hpo::{Direction, SearchSpace};
///
/// #[hpo::search_space]
/// #[derive(Debug, Clone)]
/// struct Space {
///     #[param(float(-10.0..=10.0))]
///     x: f64,
/// }
///
/// # fn main() -> hpo::Result<()> {
/// let args = StudyArgs { trials: Some(20), ..StudyArgs::default() };
/// let done = StudyRunner::new(&args)
///     .default_storage("sqlite:///quadratic.db")
///     .default_study("quadratic")
///     .direction(Direction::Minimize)
///     .space::<Space>()
///     .run(|trial| {
///         let s = Space::sample(trial)?;
///         Ok((s.x - 2.0).powi(2))
///     })?;
/// println!("best: {:?}", done.study.best_params()?);
/// # Ok(())
/// # }
/// ```
///
/// Anything else stays reachable through the builders underneath:
/// [`StudyRunner::study_with`], [`StudyRunner::optimize_with`] and
/// [`StudyRunner::processes_with`] adjust the [`StudyBuilder`], the
/// [`Optimize`] settings and the [`ProcessConfig`] just before they are used.
pub struct StudyRunner<'a> {
    args: &'a StudyArgs,
    storage: String,
    study: String,
    trials: Option<usize>,
    timeout: Option<Duration>,
    directions: Vec<Direction>,
    sampler: Option<SamplerConfig>,
    workers: Option<(Arc<dyn MemoryEstimator>, Memory)>,
    space_check: Option<SpaceCheck<'a>>,
    space_text: Option<String>,
    /// What the space depends on at run time (`space_data`).
    space_data: Vec<String>,
    allow_space_change: bool,
    warm_start: Vec<Params>,
    metric: String,
    quiet: bool,
    keep: Option<KeepArtifacts>,
    study_hooks: Vec<Hook<'a, StudyBuilder>>,
    optimize_hooks: Vec<Hook<'a, Optimize>>,
    process_hooks: Vec<Hook<'a, ProcessConfig>>,
    /// `--mlflow` (or `MLFLOW_TRACKING_URI`), once built.
    trackers: Vec<Arc<dyn Tracker>>,
}

/// A finished run: the study and what its trials came to.
pub struct Finished {
    /// The study, with every trial of every run.
    pub study: Study,
    /// How the trials ran.
    pub jobs: Jobs,
    /// The study's summary (all its trials, earlier runs included).
    pub summary: Summary,
}

impl<'a> StudyRunner<'a> {
    /// A runner for the study `args` describe. Defaults: storage
    /// `sqlite:///study.db`, study `study`, no trial limit, no timeout, one
    /// direction (minimize), TPE seeded by `--seed`, trials in this process.
    pub fn new(args: &'a StudyArgs) -> Self {
        StudyRunner {
            args,
            storage: "sqlite:///study.db".to_owned(),
            study: "study".to_owned(),
            trials: None,
            timeout: None,
            directions: vec![Direction::Minimize],
            sampler: None,
            workers: None,
            space_check: None,
            space_text: None,
            space_data: Vec::new(),
            allow_space_change: false,
            warm_start: Vec::new(),
            metric: "value".to_owned(),
            quiet: false,
            keep: None,
            study_hooks: Vec::new(),
            optimize_hooks: Vec::new(),
            process_hooks: Vec::new(),
            trackers: Vec::new(),
        }
    }

    /// The storage URL when `--storage` is not given.
    pub fn default_storage(mut self, url: impl Into<String>) -> Self {
        self.storage = url.into();
        self
    }

    /// The study name when `--study` is not given.
    pub fn default_study(mut self, name: impl Into<String>) -> Self {
        self.study = name.into();
        self
    }

    /// Trials to run when `--trials` is not given (default: no limit, so
    /// give this or a timeout).
    pub fn default_trials(mut self, n: usize) -> Self {
        self.trials = Some(n);
        self
    }

    /// The time budget when `--timeout` is not given (default: none).
    pub fn default_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The sampler when `--sampler` is not given (default: TPE seeded by
    /// `--seed`); its seed is `--seed` unless the settings carry one.
    pub fn default_sampler(mut self, config: SamplerConfig) -> Self {
        self.sampler = Some(config);
        self
    }

    /// The study's direction (default: minimize).
    pub fn direction(mut self, direction: Direction) -> Self {
        self.directions = vec![direction];
        self
    }

    /// The study's directions, for several objectives.
    pub fn directions(mut self, directions: impl IntoIterator<Item = Direction>) -> Self {
        self.directions = directions.into_iter().collect();
        self
    }

    /// The study's pruner (default: the study builder's).
    pub fn pruner(self, pruner: impl crate::Pruner + 'static) -> Self {
        self.study_with(move |b| b.pruner(pruner))
    }

    /// Trials can run in worker processes, each configuration sized by
    /// `estimator` and admitted by `memory` (capped by `--memory-budget`).
    /// Without this, `--jobs` other than `in-process` is refused. Default
    /// `--jobs`: `auto` on a device; on the CPU one worker per core, each
    /// with one core's share of the threads and one trial sampled ahead
    /// (a trial alone keeps about 1.8 of 2 cores busy on burn's CPU
    /// backend, and two side by side finish more trials an hour: the book's
    /// "A study, not a trial").
    pub fn workers(mut self, estimator: Arc<dyn MemoryEstimator>, memory: Memory) -> Self {
        self.workers = Some((estimator, memory));
        self
    }

    /// Enqueued configurations (`--enqueue`, the warm start) are checked
    /// against the space `S` before any is enqueued: a name that is not a
    /// parameter, or a value outside the space, is refused with its name,
    /// and the study is left as it was.
    ///
    /// The space is also recorded in the study ([`SPACE_ATTR`]) when the
    /// study is created, and a study resumed with a different space (other
    /// ranges or choices, such as bounds computed from other data, or
    /// edited code) is refused, naming the lines that differ, instead of
    /// mixing trials of two spaces ([`StudyRunner::allow_space_change`]
    /// lets it through).
    pub fn space<S: SearchSpace + 'a>(mut self) -> Self {
        self.space_check = Some(Box::new(check_enqueued::<S>));
        self.space_text = Some(S::describe().to_string());
        self
    }

    /// A line the space depends on at run time, recorded with it: bounds
    /// computed from the data (lengths at percentiles of the training
    /// texts, say), so that a study resumed on data that would give other
    /// bounds is refused like one resumed with another space (the caller
    /// prints it where it wants). May be given several times.
    pub fn space_data(mut self, line: impl Into<String>) -> Self {
        self.space_data.push(line.into());
        self
    }

    /// Resumes a study even when its recorded space differs from this run's
    /// (and records this run's); default false.
    pub fn allow_space_change(mut self, yes: bool) -> Self {
        self.allow_space_change = yes;
        self
    }

    /// A configuration a new study starts with when no `--enqueue` is given
    /// (Optuna's `enqueue_trial`); may be given several times.
    pub fn warm_start(mut self, params: Params) -> Self {
        self.warm_start.push(params);
        self
    }

    /// What the trial lines call the objective value (default `value`).
    pub fn metric(mut self, name: impl Into<String>) -> Self {
        self.metric = name.into();
        self
    }

    /// Prints nothing: no trial lines, no progress bar, no summary.
    pub fn quiet(mut self, yes: bool) -> Self {
        self.quiet = yes;
        self
    }

    /// Which trials keep their artifacts' files ([`ArtifactStore::clean`]),
    /// applied to [`StudyRunner::artifact_store`] as each trial finishes and
    /// after the study (default: all keep theirs).
    pub fn keep_artifacts(mut self, keep: KeepArtifacts) -> Self {
        self.keep = Some(keep);
        self
    }

    /// The study's artifact store: `--artifacts`, else the folder beside a
    /// SQLite study (an error for other storages, asking for `--artifacts`).
    pub fn artifact_store(&self) -> Result<ArtifactStore> {
        match &self.args.artifacts {
            Some(location) => ArtifactStore::from_location(location),
            None => ArtifactStore::beside(self.storage_url()).map_err(|e| {
                Error::InvalidConfig(format!(
                    "{e}; give the artifact store with `--artifacts PATH`"
                ))
            }),
        }
    }

    /// Adjusts the [`StudyBuilder`] before the study is opened.
    pub fn study_with(mut self, hook: impl FnOnce(StudyBuilder) -> StudyBuilder + 'a) -> Self {
        self.study_hooks.push(Box::new(hook));
        self
    }

    /// Adjusts the [`Optimize`] settings before the study runs.
    pub fn optimize_with(mut self, hook: impl FnOnce(Optimize) -> Optimize + 'a) -> Self {
        self.optimize_hooks.push(Box::new(hook));
        self
    }

    /// Adjusts the worker processes' [`ProcessConfig`] before they start.
    pub fn processes_with(
        mut self,
        hook: impl FnOnce(ProcessConfig) -> ProcessConfig + 'a,
    ) -> Self {
        self.process_hooks.push(Box::new(hook));
        self
    }

    /// The storage URL this run uses.
    pub fn storage_url(&self) -> &str {
        self.args.storage.as_deref().unwrap_or(&self.storage)
    }

    /// The study name this run uses.
    pub fn study_name(&self) -> &str {
        self.args.study.as_deref().unwrap_or(&self.study)
    }

    /// How trials run: `--jobs`, or its default. Flags that cannot work
    /// together are refused, saying what to do.
    pub fn jobs(&self) -> Result<Jobs> {
        let jobs = match (self.args.jobs, &self.workers) {
            (Some(jobs), _) => jobs,
            (None, None) => Jobs::InProcess,
            (None, Some((_, memory))) if memory.is_host() => Jobs::Workers(cpu_cores()),
            (None, Some(_)) => Jobs::Auto,
        };
        let usage = |m: &str| Err(Error::InvalidConfig(m.to_owned()));
        if jobs == Jobs::InProcess {
            if self.args.trial_timeout.is_some() {
                return usage(
                    "--trial-timeout ends worker processes, but trials run in this process \
                     here; add `--jobs auto` or `--jobs N`",
                );
            }
            if self.args.memory_budget.is_some() {
                return usage(
                    "--memory-budget admits worker processes, but trials run in this process \
                     here; add `--jobs auto` or `--jobs N`",
                );
            }
            if self.args.all_gpus {
                return usage(
                    "--all-gpus spreads worker processes over the node's GPUs, but trials run \
                     in this process here; add `--jobs auto` or `--jobs N`",
                );
            }
        } else if self.workers.is_none() {
            return usage(
                "this experiment runs its trials in this process only (it gives no memory \
                 estimate for worker processes); use `--jobs in-process`",
            );
        }
        Ok(jobs)
    }

    /// The sampler's settings: `--sampler`, the experiment's default, or TPE;
    /// seeded by `--seed` unless the settings carry a seed.
    pub fn sampler_config(&self) -> Result<SamplerConfig> {
        let seed = self.args.seed;
        match (&self.args.sampler, &self.sampler) {
            (Some(arg), _) => arg.config(seed).map_err(Error::InvalidConfig),
            (None, Some(config)) => seed_unless_set(config, seed),
            (None, None) => Ok(SamplerConfig::Tpe(TpeConfig::seeded(seed))),
        }
    }

    /// Runs the study. In a worker process the executor started, runs the
    /// trial it was assigned and exits; anywhere else, runs the study and
    /// returns it with its summary (printed unless [`StudyRunner::quiet`]).
    ///
    /// It installs the handlers of [`crate::signals`]: on Ctrl-C (SIGINT)
    /// nothing new starts and the running trials are stopped and failed as
    /// interrupted, each re-enqueued for the next run; on SIGTERM (a
    /// scheduler's) the running trials first get `--term-grace` seconds to
    /// finish. The bar is left, the summary printed, and the process exits
    /// with status 130 (SIGINT) or 143 (SIGTERM), as the signal's default
    /// action would, without returning: what `main` does after the study is
    /// not done for a study that was stopped. A second Ctrl-C ends the
    /// process at once.
    ///
    /// On a scheduler (the book's "A study on a Slurm cluster"): with
    /// `--create` it creates the study, records its budget
    /// (`--study-trials`, `--deadline`) and warm start, and returns without
    /// running a trial; with `--join` it runs the existing study until its
    /// recorded budget is reached across every process, the experiment's
    /// own `default_trials` and `default_timeout` left out, and returns.
    /// A caller that goes on after `run` (a final training, a report) should
    /// do so only where it makes sense once per study, not once per node.
    pub fn run<F, R>(mut self, objective: F) -> Result<Finished>
    where
        F: Fn(&mut Trial) -> R + Sync,
        R: IntoTrialResult,
    {
        self.trackers = self.tracking()?;
        executor::worker_main_with(&objective, &self.trackers)?;
        signals::install()?;
        let jobs = self.jobs()?;
        let (study, earlier) = self.open(jobs)?;
        let budget = self.study_budget(&study)?;
        if !self.args.join {
            self.enqueue(&study, earlier)?;
        }
        if self.args.create {
            return self.created(study, jobs, budget);
        }
        // Under a study budget the experiment's own defaults for one run
        // do not cut a node's share short; the flags still do.
        let (default_trials, default_timeout) = match budget {
            Some(_) => (None, None),
            None => (self.trials, self.timeout),
        };
        let trials = self.args.trials.or(default_trials);
        let timeout = self
            .args
            .timeout
            .map(Duration::from_secs)
            .or(default_timeout);
        if self.args.join && !self.quiet {
            println!(
                "joined study `{}` in {}: {}",
                study.name(),
                redact(self.storage_url()),
                budget_line(budget.as_ref(), &study.tally()?)
            );
        }

        let mut opts = Optimize::new();
        if let Some(b) = budget {
            opts = opts.study_budget(b);
        }
        if let Some(n) = trials {
            opts = opts.trials(n);
        }
        if let Some(t) = timeout {
            opts = opts.timeout(t);
        }
        if let Some(seconds) = self.args.term_grace {
            opts = opts.term_grace(Duration::from_secs(seconds));
        }
        let bar = (!self.quiet).then(|| Bar::new(trials.map(|n| n as u64), timeout));
        if let Some(bar) = &bar {
            let metric = self.metric.clone();
            opts = opts
                .callback(move |_, t| println!("{}", trial_line(t, &metric)))
                .callback(bar.callback());
        }
        let cleaner = match self.keep {
            Some(keep) => Some((self.artifact_store()?, keep)),
            None => None,
        };
        if let Some((store, keep)) = cleaner.clone() {
            opts = opts.callback(move |study, _| {
                if let Err(e) = store.clean(study, keep) {
                    eprintln!("hpo: cleaning the artifact store: {e}");
                }
            });
        }
        let ending = Ending {
            quiet: self.quiet,
            on_device: self.workers.as_ref().is_some_and(|(_, m)| !m.is_host()),
            bar,
            cleaner,
        };
        // In-process objectives that a signal cannot stop: the process ends
        // from the signal watcher, after the same ending.
        let at_exit = ending.clone();
        opts = opts.before_exit(move |study, signal| {
            if let Err(e) = at_exit.report(study, Some(signal)) {
                eprintln!("hpo: {e}");
            }
        });
        if jobs != Jobs::InProcess {
            opts = opts.processes(self.process_config(jobs)?);
        }
        for hook in self.optimize_hooks.drain(..) {
            opts = hook(opts);
        }
        let stopped = match study.optimize_with(opts, &objective) {
            Ok(()) => None,
            Err(Error::Interrupted { signal }) => Some(signal),
            Err(e) => return Err(e),
        };
        let summary = ending.report(&study, stopped)?;
        if let Some(signal) = stopped {
            std::process::exit(signal.exit_code());
        }
        Ok(Finished {
            study,
            jobs,
            summary,
        })
    }

    /// The study, created or resumed, and how many trials earlier runs left
    /// in it. Trials an earlier run left RUNNING are reaped now where
    /// heartbeats can tell, and the resume line says what becomes of them.
    /// With `--join` the study must exist.
    fn open(&mut self, jobs: Jobs) -> Result<(Study, usize)> {
        let url = self.storage_url().to_owned();
        let sampler = self.sampler_config()?.init()?;
        let storage = storage_from_url(&url)?;
        if self.args.join && storage.find_study(self.study_name())?.is_none() {
            return Err(Error::InvalidConfig(format!(
                "there is no study `{}` in {} to join: `--join` runs a study created \
                 beforehand with `--create` (deploy/slurm/create-study.sh); check `--study` \
                 and `--storage`",
                self.study_name(),
                redact(&url)
            )));
        }
        let mut builder = Study::builder()
            .name(self.study_name())
            .storage(storage)
            .directions(self.directions.clone())
            .sampler(sampler)
            .load_if_exists(true);
        if jobs != Jobs::InProcess {
            // Worker processes beat for their trials: one whose worker dies
            // without a word is failed after the grace period, never left
            // RUNNING.
            builder = builder.heartbeat(Duration::from_secs(5), Duration::from_secs(60));
        }
        if self.args.join && jobs != Jobs::InProcess {
            // A node killed mid-trial (SIGKILL after the scheduler's
            // KillWait, a lost machine) leaves its trial to the others,
            // which find it by its heartbeats.
            builder = builder.retry(RetryPolicy { max_retries: 2 });
        }
        for t in &self.trackers {
            builder = builder.tracker(Arc::clone(t));
        }
        for hook in self.study_hooks.drain(..) {
            builder = hook(builder);
        }
        let study = builder.build()?;
        self.check_space(&study)?;
        let found = study.trials()?;
        let earlier = found.len();
        let running = found
            .iter()
            .filter(|t| t.state == TrialState::Running)
            .count();
        // Stale ones are reaped at the first trial anyway; now, so that the
        // resume line can say so.
        let reaped = match (running, study.heartbeat()) {
            (0, _) | (_, None) => 0,
            (_, Some(_)) => study.fail_stale_trials()?.len(),
        };
        if !self.quiet && earlier > 0 {
            println!(
                "study `{}` in {}: {earlier} trials from earlier runs{}",
                study.name(),
                redact(&url),
                resume_note(running, reaped, study.heartbeat(), study.retry_policy())
            );
        }
        Ok((study, earlier))
    }

    /// The study's budget across processes: the one recorded in it, with
    /// `--study-trials` and `--deadline` recorded over it. A study joined
    /// with `--join` must have one.
    fn study_budget(&self, study: &Study) -> Result<Option<StudyBudget>> {
        let recorded = study.budget()?;
        if self.args.join && recorded.is_none_or(|b| b.is_unlimited()) {
            return Err(Error::InvalidConfig(format!(
                "study `{}` has no budget, so the nodes that join it would run until the \
                 scheduler stops them; create it with `--create --study-trials N` (or \
                 `--deadline TIME`)",
                study.name()
            )));
        }
        let mut budget = recorded.unwrap_or_default();
        if self.args.study_trials.is_some() || self.args.deadline.is_some() {
            budget.n_trials = self.args.study_trials.or(budget.n_trials);
            budget.deadline = self.args.deadline.or(budget.deadline);
            study.set_budget(&budget)?;
        }
        Ok((!budget.is_unlimited()).then_some(budget))
    }

    /// `--create`: the study is ready for the nodes that join it.
    fn created(&self, study: Study, jobs: Jobs, budget: Option<StudyBudget>) -> Result<Finished> {
        let trials = study.trials()?;
        if !self.quiet {
            println!(
                "study `{}` in {} is ready for `--join`: {}",
                study.name(),
                redact(self.storage_url()),
                budget_line(budget.as_ref(), &Tally::of(&trials))
            );
        }
        let on_device = self.workers.as_ref().is_some_and(|(_, m)| !m.is_host());
        Ok(Finished {
            summary: Summary::after_run(&trials, on_device),
            study,
            jobs,
        })
    }

    /// The trackers `--mlflow` (or `MLFLOW_TRACKING_URI`) asks for.
    #[cfg(feature = "mlflow")]
    fn tracking(&self) -> Result<Vec<Arc<dyn Tracker>>> {
        let Some(m) = crate::tracking::Mlflow::from_flag_or_env(self.args.mlflow.as_deref())?
        else {
            return Ok(Vec::new());
        };
        if !self.quiet && !executor::is_worker() {
            println!("logging to MLflow at {}", m.url());
        }
        Ok(vec![Arc::new(m)])
    }

    /// The trackers `--mlflow` asks for: none without the `mlflow` feature.
    #[cfg(not(feature = "mlflow"))]
    fn tracking(&self) -> Result<Vec<Arc<dyn Tracker>>> {
        match &self.args.mlflow {
            Some(url) => Err(Error::InvalidConfig(format!(
                "--mlflow {}: this program was built without hpo's `mlflow` feature; \
                 build it with `--features hpo/mlflow` (or `--features mlflow` in hpo itself)",
                redact(url)
            ))),
            None => Ok(Vec::new()),
        }
    }

    /// Records the space in a study that has none recorded; refuses one
    /// recorded differently.
    fn check_space(&self, study: &Study) -> Result<()> {
        let Some(space) = &self.space_text else {
            return Ok(());
        };
        let mut now = space.clone();
        for line in &self.space_data {
            if !now.is_empty() && !now.ends_with('\n') {
                now.push('\n');
            }
            now.push_str(&format!("data: {line}\n"));
        }
        let now = &now;
        let recorded = study.system_attrs()?.get(SPACE_ATTR).cloned();
        match recorded.as_ref().and_then(|v| v.as_str()) {
            Some(before) if before == now => return Ok(()),
            Some(before) if !self.allow_space_change => {
                let old: Vec<&str> = before.lines().collect();
                let new: Vec<&str> = now.lines().collect();
                let mut diff: Vec<String> = old
                    .iter()
                    .filter(|l| !new.contains(l))
                    .map(|l| format!("  - {}", l.trim()))
                    .collect();
                diff.extend(
                    new.iter()
                        .filter(|l| !old.contains(l))
                        .map(|l| format!("  + {}", l.trim())),
                );
                return Err(Error::InvalidConfig(format!(
                    "study `{}` was created with another search space; resuming it would mix \
                     trials of two spaces. Differences (- recorded, + this run):\n{}\n\
                     Give another `--study` name, or restore the space (and the data) it was created with",
                    study.name(),
                    diff.join("\n")
                )));
            }
            _ => {}
        }
        let value = serde_json::Value::String(now.clone());
        study
            .storage()
            .set_study_system_attr(study.id(), SPACE_ATTR, &value)
    }

    /// `--enqueue`'s configurations, else the warm start on a new study;
    /// every one is checked before any is enqueued.
    fn enqueue(&self, study: &Study, earlier: usize) -> Result<()> {
        let given = &self.args.enqueue;
        let list = if !given.is_empty() {
            given
        } else if earlier == 0 {
            &self.warm_start
        } else {
            return Ok(());
        };
        if let Some(check) = &self.space_check {
            for params in list {
                check(params)?;
            }
        }
        for params in list {
            study.enqueue(params.clone())?;
        }
        Ok(())
    }

    /// Worker processes' settings.
    fn process_config(&mut self, jobs: Jobs) -> Result<ProcessConfig> {
        let Some((estimator, memory)) = &self.workers else {
            return Err(Error::InvalidConfig(
                "no memory estimate for worker processes".into(),
            ));
        };
        let config = ProcessConfig::new(self.storage_url(), Arc::clone(estimator));
        let mut config = if self.args.all_gpus {
            let gpus = executor::node_gpus()?;
            if !self.quiet {
                println!("worker processes on this node's GPUs: {}", gpus.join(", "));
            }
            memory.apply_on_gpus(config, self.args.memory_budget, &gpus)?
        } else {
            memory.apply(config, self.args.memory_budget)?
        };
        if let Jobs::Workers(n) = jobs {
            config = config.max_workers(n);
            if memory.is_host() {
                // Each worker gets its share of the cores, so that n
                // workers do not start n x cores threads. Memory does not
                // bind here, so a deep queue of trials sampled ahead would
                // only make the sampler choose them before the results it
                // could learn from: one waits, ready for the next worker.
                config = config.threads_per_worker(cpu_share(n)).lookahead(1);
            }
        }
        if let Some(seconds) = self.args.trial_timeout {
            config = config.trial_timeout(Duration::from_secs(seconds));
        }
        if let Some(launch) = &self.args.worker_launch {
            config = config.worker_args(launch.args.iter().cloned());
            for (key, value) in &launch.env {
                config = config.env(key, value);
            }
        }
        for hook in self.process_hooks.drain(..) {
            config = hook(config);
        }
        Ok(config)
    }
}

/// What a run does once its trials have stopped, normally or by a signal:
/// the bar left (after a signal), the artifact store cleaned, the summary
/// printed.
#[derive(Clone)]
struct Ending {
    quiet: bool,
    on_device: bool,
    bar: Option<Bar>,
    cleaner: Option<(ArtifactStore, KeepArtifacts)>,
}

impl Ending {
    fn report(&self, study: &Study, stopped: Option<StopSignal>) -> Result<Summary> {
        if let (Some(bar), Some(_)) = (&self.bar, stopped) {
            bar.abandon();
        }
        if let Some((store, keep)) = &self.cleaner {
            store.clean(study, *keep)?;
        }
        let summary = Summary::after_run(&study.trials()?, self.on_device);
        if !self.quiet {
            println!("\n{summary}");
            if let Some(signal) = stopped {
                println!("{}", stopped_line(signal));
            }
        }
        Ok(summary)
    }
}

/// The line printed after a study a signal stopped.
fn stopped_line(signal: StopSignal) -> String {
    let how = match signal {
        StopSignal::Interrupt => "SIGINT (Ctrl-C)",
        StopSignal::Terminate => "SIGTERM",
    };
    format!(
        "stopped by {how}: nothing new was started, and the trials still running were failed \
         as interrupted, their configurations waiting for the study's next run; exit status {}",
        signal.exit_code()
    )
}

/// What a study's budget is and how far it has come.
fn budget_line(budget: Option<&StudyBudget>, tally: &Tally) -> String {
    let mut parts = Vec::new();
    match budget.and_then(|b| b.n_trials) {
        Some(n) => parts.push(format!(
            "{} of its {n} trials done (COMPLETE or PRUNED)",
            tally.counted
        )),
        None => parts.push(format!("{} trials done, no trial budget", tally.counted)),
    }
    if let Some(d) = budget.and_then(|b| b.deadline) {
        parts.push(format!(
            "no trial starts after {}",
            d.format("%Y-%m-%d %H:%M:%S UTC")
        ));
    }
    if tally.running > 0 {
        parts.push(format!("{} running", tally.running));
    }
    if tally.waiting > 0 {
        parts.push(format!("{} waiting", tally.waiting));
    }
    parts.join(", ")
}

/// What the resume line adds about the `running` trials an earlier run left
/// RUNNING, `reaped` of which were just failed as stale (empty when none was
/// RUNNING).
fn resume_note(
    running: usize,
    reaped: usize,
    heartbeat: Option<Heartbeat>,
    retry: Option<RetryPolicy>,
) -> String {
    if running == 0 {
        return String::new();
    }
    let Some(hb) = heartbeat else {
        return format!(
            "; {running} of them RUNNING, left as they are: without heartbeats (trials in \
             this process) a trial whose run died cannot be told from one another process is \
             running, and the summary counts them as unfinished, not running"
        );
    };
    let grace = hb.grace;
    let rerun = match retry {
        Some(p) => format!(
            "re-enqueued while a configuration has failed at most {} times",
            p.max_retries
        ),
        None => "not re-run (the study has no retry policy)".to_owned(),
    };
    let mut note = format!("; {running} of them RUNNING");
    if reaped > 0 {
        note.push_str(&format!(
            ", {reaped} without a heartbeat for {grace:?}: failed as stale now, {rerun}"
        ));
    }
    let live = running.saturating_sub(reaped);
    if live > 0 {
        note.push_str(&format!(
            ", {live} with a recent heartbeat: another process may be running them; if not, \
             they are failed as stale once their last heartbeat is {grace:?} old (the \
             summary counts them as unfinished, not running)"
        ));
    }
    note
}

/// `config` seeded with `seed` when it has no seed of its own (a typed
/// config says so with `seed: None`), the way `--sampler` settings are.
fn seed_unless_set(config: &SamplerConfig, seed: u64) -> Result<SamplerConfig> {
    let mut value = serde_json::to_value(config)
        .map_err(|e| Error::InvalidConfig(format!("sampler settings: {e}")))?;
    if let Some(fields) = value.as_object_mut() {
        if fields.get("seed").is_some_and(serde_json::Value::is_null) {
            fields.remove("seed");
        }
    }
    SamplerArg::Config(value)
        .config(seed)
        .map_err(Error::InvalidConfig)
}

/// One line per finished trial: number, state, value, duration, the
/// parameters to 4 significant digits, and the micro-batch x accumulation
/// the executor ran it with when it chose one.
pub fn trial_line(t: &FrozenTrial, metric: &str) -> String {
    let secs = t.duration().map_or(0.0, |d| d.as_secs_f64());
    let value = t.value().map_or("-".to_string(), |v| format!("{v:.4}"));
    let attr = |key| t.system_attrs.get(key).and_then(|v| v.as_u64());
    let batch = match (
        attr(executor::MICRO_BATCH_ATTR),
        attr(executor::ACCUMULATION_ATTR),
    ) {
        (Some(m), Some(a)) => format!("  [run at {m} x {a}]"),
        _ => String::new(),
    };
    format!(
        "trial {:>3} {:<10} {metric} {value:<7} {secs:>5.1}s  {}{batch}",
        t.number,
        state_label(t),
        t.params()
            .iter()
            .map(|(k, v)| format!("{k}={}", v.to_short_string()))
            .collect::<Vec<_>>()
            .join(" ")
    )
}

/// Checks that `params` name parameters of the space `S` with values inside
/// it, by sampling them as a trial would: an enqueued value outside the
/// space would otherwise be replaced by a sampled one with only a warning.
pub fn check_enqueued<S: SearchSpace>(params: &Params) -> Result<()> {
    let study = Study::builder()
        .sampler(crate::RandomSampler::seeded(0))
        .build()?;
    study.enqueue(params.clone())?;
    let mut trial = study.ask()?;
    let sampled = S::sample(&mut trial)
        .map_err(|e| Error::InvalidConfig(format!("--enqueue: {e}")))?
        .to_params();
    for (name, value) in params {
        match sampled.iter().find(|(n, _)| n == name) {
            None => {
                let names: Vec<&str> = sampled.iter().map(|(n, _)| n.as_str()).collect();
                return Err(Error::InvalidConfig(format!(
                    "--enqueue: `{name}` is not a parameter of this study or is inactive in \
                     this configuration (parameters: {})",
                    names.join(", ")
                )));
            }
            Some((_, got)) if !same_value(got, value) => {
                return Err(Error::InvalidConfig(format!(
                    "--enqueue: `{name}` = {value} is outside the search space"
                )))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Whether an enqueued value came back from sampling as itself (a choice of
/// 8 and the integer 8 are one value; floats to rounding).
fn same_value(got: &crate::ParamValue, want: &crate::ParamValue) -> bool {
    match (got.as_f64(), want.as_f64()) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-12 * a.abs().max(b.abs()),
        _ => got.to_json_value() == want.to_json_value(),
    }
}

/// The cores this process may use.
pub fn cpu_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Threads for each of `workers` trials side by side on this machine's cores.
pub fn cpu_share(workers: usize) -> usize {
    (cpu_cores() / workers.max(1)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mlflow_is_refused_without_the_feature_and_its_password_never_shows() {
        let args = StudyArgs {
            mlflow: Some("https://alice:hunter2@mlflow.example/".into()),
            ..StudyArgs::default()
        };
        let got = StudyRunner::new(&args).tracking();
        if cfg!(feature = "mlflow") {
            // Built: a tracker for the URL, shown without its password.
            let trackers = got.unwrap();
            assert_eq!(trackers.len(), 1);
        } else {
            let e = got.err().unwrap().to_string();
            assert!(e.contains("`mlflow` feature"), "{e}");
            assert!(!e.contains("hunter2"), "{e}");
        }
        let none = StudyArgs::default();
        if std::env::var_os("MLFLOW_TRACKING_URI").is_none() {
            assert!(StudyRunner::new(&none).tracking().unwrap().is_empty());
        }
    }

    #[test]
    fn the_resume_line_says_what_becomes_of_trials_left_running() {
        let hb = Heartbeat {
            interval: Duration::from_secs(5),
            grace: Duration::from_secs(60),
        };
        assert_eq!(resume_note(0, 0, Some(hb), None), "");
        let note = resume_note(3, 2, Some(hb), None);
        assert!(
            note.starts_with(
                "; 3 of them RUNNING, 2 without a heartbeat for 60s: failed as stale now, \
                 not re-run (the study has no retry policy), 1 with a recent heartbeat"
            ),
            "{note}"
        );
        let retried = resume_note(1, 1, Some(hb), Some(RetryPolicy { max_retries: 2 }));
        assert!(retried.ends_with("failed at most 2 times"), "{retried}");
        let in_process = resume_note(2, 0, None, None);
        assert!(
            in_process.starts_with("; 2 of them RUNNING, left as they are"),
            "{in_process}"
        );
        assert!(in_process.contains("unfinished, not running"));
    }

    #[test]
    fn a_stopped_run_says_its_exit_status() {
        assert!(stopped_line(StopSignal::Interrupt).starts_with("stopped by SIGINT (Ctrl-C)"));
        assert!(stopped_line(StopSignal::Terminate).ends_with("exit status 143"));
    }
}
