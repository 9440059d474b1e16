//! The sampler suite of issue 17: its problems, the rule that splits them into
//! a tuning half and a held-out half, the runner, and the paired comparison
//! with Optuna's reference runs.
//!
//! * **Problems.** The 24 noiseless BBOB functions ([`super::bbob`]) as float
//!   parameters `x0..x{d-1}` in [-5, 5], and eight mixed spaces of the shape
//!   users write ([`Mixed`]; 3 to 8 are fine-tuning spaces of the seed
//!   study's shape, [`super::finetune`]): a categorical model choice with dependent
//!   ranges, log-scaled learning rates, integer and stepped parameters, and
//!   regions that fail or are infeasible (5-15 % of uniformly random
//!   trials in spaces 1 and 2, 16-45 % in the fine-tuning spaces). Every problem is a deterministic function of its parameters, so
//!   every sampler, and Optuna through `bench/optuna_suite.py`, sees the same
//!   problem.
//! * **The split** ([`half`]), fixed before any tuning: odd function numbers
//!   are the tuning half, even numbers the held-out half. The mixed spaces are
//!   numbered 1 to 8 and follow the same rule. Defaults may be tuned on the
//!   tuning half only; they are judged on the held-out half.
//! * **The runner** ([`run`], [`run_suite`]): one in-memory study per
//!   (problem, sampler, seed), sequential ask/tell or with several trials in
//!   flight ([`drive`]: the executor's pattern, the constant liar at work),
//!   the best feasible value so far recorded at each checkpoint of finished
//!   trials.
//! * **The comparison** ([`compare`]): per problem, hpo's runs against
//!   Optuna's paired by seed index (the two use different random streams, so
//!   the pairing is by position only), Wilcoxon's signed-rank test, exact,
//!   two-sided; a difference not significant at the given level is a tie.
//!
//! Included with `#[path]` by `benches/sampler_suite.rs` and hpo-core's
//! integration tests (`tests/it/sampler_suite.rs`).

use super::bbob::Bbob;
use super::finetune;
use anyhow::{bail, Context, Result};
use hpo_core::{
    AutoConfig, AutoSampler, CmaEsConfig, CmaEsSampler, Direction, FrozenTrial, GpConfig,
    GpSampler, QmcConfig, QmcSampler, RandomSampler, Sampler, Study, TpeConfig, TpeSampler, Trial,
    TrialError, TrialState,
};
use serde_json::Value;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::Arc;

/// The samplers the suite runs by default, by name: hpo's default TPE, TPE
/// with Optuna 5.0's settings, random, scrambled Sobol QMC and CMA-ES (all
/// defaults, seeded). `gp` (the GP sampler) is run when named.
pub const SAMPLERS: [&str; 5] = ["tpe", "tpe_optuna", "random", "qmc", "cmaes"];

/// The budgets (trials) at which best-so-far values are reported.
pub const BUDGETS: [usize; 3] = [50, 100, 200];

/// Which half of the suite a problem belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Half {
    /// Odd numbers: defaults may be tuned on these problems.
    Tuning,
    /// Even numbers: defaults are judged on these problems, never tuned on them.
    HeldOut,
}

impl Half {
    /// The name used in the JSON and the tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Half::Tuning => "tuning",
            Half::HeldOut => "held_out",
        }
    }
}

/// The split rule: odd BBOB function numbers (and mixed spaces 1, 3, 5, 7)
/// are the tuning half, even ones (and mixed spaces 2, 4, 6, 8) the held-out
/// half.
pub fn half(problem: &Problem) -> Half {
    let number = match problem {
        Problem::Bbob(f) => f.function(),
        Problem::Mixed(m) => m.number(),
    };
    if number % 2 == 1 {
        Half::Tuning
    } else {
        Half::HeldOut
    }
}

/// The mixed and conditional spaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mixed {
    /// Space 1 (tuning half): `model` in {mlp, gbm, svm}, each with its own
    /// parameters and ranges (the learning rates are log-scaled and their
    /// ranges depend on the model); an MLP too large for memory is
    /// infeasible, a GBM too large times out, an SVM with large C and gamma
    /// does not converge. Minimum 0.10 (mlp, 4 layers, 256 units).
    ModelChoice,
    /// Space 2 (held-out half): a training schedule; batch size categorical,
    /// learning rate log-scaled with an optimum that moves with the batch
    /// size, integer warm-up epochs, steps in steps of 500, log weight decay;
    /// learning rates too high for the warm-up diverge (a failed trial).
    /// Minimum `0.2 + 0.5 exp(-20)`.
    Schedule,
    /// Space 3 (tuning): fine-tuning one of six transformers on a 24 GB
    /// card ([`finetune::finetune`]).
    FineTune,
    /// Space 4 (held-out): family x size, precision, size-specific
    /// parameters, 16 GB ([`finetune::family_size`]).
    FamilySize,
    /// Space 5 (tuning): the optimiser as a choice with its own parameters,
    /// 12 GB ([`finetune::optimizer`]).
    Optimizer,
    /// Space 6 (held-out): long documents, 512-position models fail past
    /// 512 tokens, 24 GB ([`finetune::long_docs`]).
    LongDocs,
    /// Space 7 (tuning): a small data set where large models overfit, 8 GB
    /// ([`finetune::small_data`]).
    SmallData,
    /// Space 8 (held-out): an 11 GB card, fp16, a schedule as a choice
    /// ([`finetune::small_card`]).
    SmallCard,
}

impl Mixed {
    /// Every space, by number.
    pub const ALL: [Mixed; 8] = [
        Mixed::ModelChoice,
        Mixed::Schedule,
        Mixed::FineTune,
        Mixed::FamilySize,
        Mixed::Optimizer,
        Mixed::LongDocs,
        Mixed::SmallData,
        Mixed::SmallCard,
    ];

    /// The fine-tuning spaces of the seed study's shape (3 to 8).
    pub const FINETUNE: [Mixed; 6] = [
        Mixed::FineTune,
        Mixed::FamilySize,
        Mixed::Optimizer,
        Mixed::LongDocs,
        Mixed::SmallData,
        Mixed::SmallCard,
    ];

    /// The space's number, which decides its half.
    pub fn number(self) -> u8 {
        match self {
            Mixed::ModelChoice => 1,
            Mixed::Schedule => 2,
            Mixed::FineTune => 3,
            Mixed::FamilySize => 4,
            Mixed::Optimizer => 5,
            Mixed::LongDocs => 6,
            Mixed::SmallData => 7,
            Mixed::SmallCard => 8,
        }
    }

    /// The problem's name.
    pub fn name(self) -> &'static str {
        match self {
            Mixed::ModelChoice => "mixed1_model_choice",
            Mixed::Schedule => "mixed2_schedule",
            Mixed::FineTune => "mixed3_finetune",
            Mixed::FamilySize => "mixed4_family_size",
            Mixed::Optimizer => "mixed5_optimizer",
            Mixed::LongDocs => "mixed6_long_docs",
            Mixed::SmallData => "mixed7_small_data",
            Mixed::SmallCard => "mixed8_small_card",
        }
    }

    /// The smallest value the objective takes.
    pub fn optimum(self) -> f64 {
        match self {
            Mixed::ModelChoice => 0.10,
            Mixed::Schedule => 0.2 + 0.5 * (-20.0_f64).exp(),
            Mixed::FineTune => 0.08,
            Mixed::FamilySize => 0.10,
            Mixed::Optimizer => 0.088,
            Mixed::LongDocs => 0.07,
            Mixed::SmallData => 0.105,
            Mixed::SmallCard => 0.09,
        }
    }

    /// Suggests the space's parameters and evaluates it: the outer error is a
    /// suggestion the study refused (a bug), the inner one the trial's own
    /// failure or infeasibility.
    fn evaluate(self, t: &mut Trial) -> hpo_core::Result<Result<f64, TrialError>> {
        Ok(match self {
            Mixed::ModelChoice => match t.suggest_categorical("model", &["mlp", "gbm", "svm"])? {
                "mlp" => {
                    let layers = t.suggest_int("mlp_layers", 1, 8)?;
                    let units = t.suggest_int_log("mlp_units", 16, 512)?;
                    let dropout = t.suggest_float("mlp_dropout", 0.0, 0.5)?;
                    let lr = t.suggest_float_log("mlp_lr", 1e-5, 1e-1)?;
                    if layers * units > 2048 {
                        Err(TrialError::Infeasible(format!(
                            "out of memory: {layers} layers of {units} units"
                        )))
                    } else {
                        let l = layers as f64;
                        Ok(0.10
                            + 0.05 * (lr.log10() + 2.5 + 0.15 * l).powi(2)
                            + 0.01 * ((units as f64).log2() - 8.0).powi(2)
                            + 0.01 * (l - 4.0).powi(2)
                            + 0.2 * (dropout - 0.1 - 0.02 * l).powi(2))
                    }
                }
                "gbm" => {
                    let depth = t.suggest_int("gbm_depth", 2, 12)?;
                    let n = t.suggest_int_step("gbm_n_estimators", 50, 1000, 50)?;
                    let subsample = t.suggest_float("gbm_subsample", 0.5, 1.0)?;
                    let lr = t.suggest_float_log("gbm_lr", 1e-3, 1.0)?;
                    if depth * n > 8000 {
                        Err(TrialError::Failed(format!(
                            "timed out: depth {depth} x {n} trees"
                        )))
                    } else {
                        let ln = (n as f64).log10();
                        Ok(0.12
                            + 0.05 * (lr.log10() + ln - 1.5).powi(2)
                            + 0.005 * (depth as f64 - 6.0).powi(2)
                            + 0.3 * (subsample - 0.8).powi(2)
                            + 0.02 * (ln - 2.7).powi(2))
                    }
                }
                _ => {
                    let c = t.suggest_float_log("svm_c", 1e-3, 1e3)?;
                    let gamma = t.suggest_float_log("svm_gamma", 1e-4, 10.0)?;
                    let (lc, lg) = (c.log10(), gamma.log10());
                    if lc + lg > 2.0 {
                        Err(TrialError::Failed(format!(
                            "did not converge: C {c}, gamma {gamma}"
                        )))
                    } else {
                        Ok(0.15
                            + 0.03 * (lc - 1.0).powi(2)
                            + 0.05 * (lg + 2.0 + 0.3 * (lc - 1.0)).powi(2))
                    }
                }
            },
            Mixed::Schedule => {
                let batch = t.suggest_categorical("batch_size", &[16_i64, 32, 64, 128, 256])?;
                let lr = t.suggest_float_log("lr", 1e-5, 1.0)?;
                let warmup = t.suggest_int("warmup_epochs", 0, 10)?;
                let steps = t.suggest_int_step("steps", 500, 5000, 500)?;
                let wd = t.suggest_float_log("weight_decay", 1e-6, 1e-1)?;
                if lr.log10() > -1.0 + 0.08 * warmup as f64 {
                    Err(TrialError::Failed(format!(
                        "diverged: lr {lr} with {warmup} warm-up epochs"
                    )))
                } else {
                    let b = batch as f64;
                    let lr_opt = -3.0 + 0.3 * (b / 16.0).log2();
                    Ok(0.2
                        + 0.04 * (lr.log10() - lr_opt).powi(2)
                        + 0.5 * (-(steps as f64 / 1000.0) * (b / 64.0)).exp()
                        + 0.02 * (wd.log10() + 4.0).powi(2)
                        + 0.002 * (warmup as f64 - 3.0).powi(2))
                }
            }
            Mixed::FineTune => finetune::finetune(t)?,
            Mixed::FamilySize => finetune::family_size(t)?,
            Mixed::Optimizer => finetune::optimizer(t)?,
            Mixed::LongDocs => finetune::long_docs(t)?,
            Mixed::SmallData => finetune::small_data(t)?,
            Mixed::SmallCard => finetune::small_card(t)?,
        })
    }
}

/// One problem of the suite.
#[derive(Debug, Clone)]
pub enum Problem {
    /// A BBOB function, instance and dimension (boxed: its matrices make it
    /// large beside a [`Mixed`]).
    Bbob(Box<Bbob>),
    /// A mixed or conditional space.
    Mixed(Mixed),
}

impl Problem {
    /// The problem's name in the JSON and the tables:
    /// `bbob_f07_i1_d5`, `mixed1_model_choice`.
    pub fn name(&self) -> String {
        match self {
            Problem::Bbob(f) => format!("bbob_f{:02}_i{}_d{}", f.function(), f.instance(), f.dim()),
            Problem::Mixed(m) => m.name().to_string(),
        }
    }

    /// The smallest value the objective takes.
    pub fn optimum(&self) -> f64 {
        match self {
            Problem::Bbob(f) => f.f_opt(),
            Problem::Mixed(m) => m.optimum(),
        }
    }

    /// Suggests the problem's parameters on `trial` and evaluates it. The
    /// outer error is a suggestion the study refused; the inner one is the
    /// problem's own failed or infeasible trial.
    pub fn evaluate(&self, trial: &mut Trial) -> hpo_core::Result<Result<f64, TrialError>> {
        match self {
            Problem::Bbob(f) => {
                let (lo, hi) = f.domain();
                let x = (0..f.dim())
                    .map(|i| trial.suggest_float(&format!("x{i}"), lo, hi))
                    .collect::<hpo_core::Result<Vec<f64>>>()?;
                Ok(Ok(f.eval(&x)))
            }
            Problem::Mixed(m) => m.evaluate(trial),
        }
    }
}

/// The sampler called `name` with `seed`: one of [`SAMPLERS`], or a variant
/// written `tpe:{json}` / `cmaes:{json}`, whose JSON sets fields of
/// `TpeConfig` / `CmaEsConfig` over the defaults (how defaults are tuned:
/// `tpe:{"n_ei_candidates":24}` is the default TPE with 24 candidates).
pub fn make_sampler(name: &str, seed: u64) -> Result<Arc<dyn Sampler>> {
    if let Some((base, json)) = name.split_once(':') {
        let bad = || format!("sampler variant `{name}`");
        return Ok(match base {
            "tpe" => {
                let cfg: TpeConfig = serde_json::from_str(json).with_context(bad)?;
                Arc::new(TpeSampler::with_config(TpeConfig {
                    seed: Some(seed),
                    ..cfg
                })?)
            }
            "cmaes" => {
                let cfg: CmaEsConfig = serde_json::from_str(json).with_context(bad)?;
                Arc::new(CmaEsSampler::with_config(CmaEsConfig {
                    seed: Some(seed),
                    ..cfg
                })?)
            }
            "auto" => {
                let cfg: AutoConfig = serde_json::from_str(json).with_context(bad)?;
                Arc::new(AutoSampler::with_config(AutoConfig {
                    seed: Some(seed),
                    ..cfg
                })?)
            }
            "gp" => {
                let cfg: GpConfig = serde_json::from_str(json).with_context(bad)?;
                Arc::new(GpSampler::with_config(GpConfig {
                    seed: Some(seed),
                    ..cfg
                })?)
            }
            other => bail!(
                "no variants of sampler `{other}` (give tpe:{{..}}, cmaes:{{..}} or gp:{{..}})"
            ),
        });
    }
    Ok(match name {
        "tpe" => Arc::new(TpeSampler::seeded(seed)),
        "tpe_optuna" => Arc::new(TpeSampler::with_config(TpeConfig {
            seed: Some(seed),
            ..TpeConfig::optuna()
        })?),
        "random" => Arc::new(RandomSampler::seeded(seed)),
        "qmc" => Arc::new(QmcSampler::with_config(QmcConfig::seeded(seed))),
        "cmaes" => Arc::new(CmaEsSampler::with_config(CmaEsConfig::seeded(seed))?),
        "gp" => Arc::new(GpSampler::seeded(seed)),
        "auto" => Arc::new(AutoSampler::with_config(AutoConfig::seeded(seed))?),
        other => bail!(
            "unknown sampler `{other}` (give {}, gp or auto)",
            SAMPLERS.join(", ")
        ),
    })
}

/// The Optuna sampler that `name` (one of ours, or a variant) is compared with:
/// its namesake, Optuna's default TPE for `tpe_optuna` and for the
/// AutoSampler (Optuna's default sampler, what a user would otherwise get).
pub fn optuna_counterpart(name: &str) -> &str {
    let base = name.split_once(':').map_or(name, |(b, _)| b);
    match base {
        "tpe_optuna" | "auto" => "tpe",
        other => other,
    }
}

/// Drives `study` through `n_trials` finished trials with `in_flight` of
/// them RUNNING at once, as an executor with `in_flight` workers whose trials
/// all take equally long would: it asks until `in_flight` trials are running,
/// calling `evaluate` on each right after its ask (so its parameters are in
/// the study before the next ask, where the sampler sees them as RUNNING),
/// then tells the oldest (first in, first out) and asks again, until
/// `n_trials` have been asked; then it tells the rest. `finished` sees each
/// trial as told, in ask order. With `in_flight` 1 this is the sequential
/// ask / evaluate / tell loop. The outer error is a refused ask, suggestion
/// or tell.
pub fn drive(
    study: &Study,
    n_trials: usize,
    in_flight: usize,
    mut evaluate: impl FnMut(&mut Trial) -> Result<Result<f64, TrialError>>,
    mut finished: impl FnMut(&FrozenTrial),
) -> Result<()> {
    if in_flight == 0 {
        bail!("in-flight trials must be at least 1");
    }
    let mut running: VecDeque<(Trial, Result<f64, TrialError>)> =
        VecDeque::with_capacity(in_flight);
    let mut asked = 0;
    loop {
        while running.len() < in_flight && asked < n_trials {
            let mut trial = study.ask()?;
            let result = evaluate(&mut trial)?;
            running.push_back((trial, result));
            asked += 1;
        }
        let Some((trial, result)) = running.pop_front() else {
            return Ok(());
        };
        finished(&*study.tell(trial, result)?);
    }
}

/// One study: `n_trials` finished trials of `problem` under `sampler` seeded
/// with `seed`, `in_flight` of them running at once ([`drive`]; 1 is the
/// sequential loop); the best feasible value after each finished trial
/// (`None` until the first feasible one).
pub fn run(
    problem: &Problem,
    sampler: &str,
    seed: u64,
    n_trials: usize,
    in_flight: usize,
) -> Result<Vec<Option<f64>>> {
    let study = Study::builder()
        .direction(Direction::Minimize)
        .sampler(make_sampler(sampler, seed)?)
        .build()?;
    let mut best: Option<f64> = None;
    let mut out = Vec::with_capacity(n_trials);
    drive(
        &study,
        n_trials,
        in_flight,
        |trial| {
            problem
                .evaluate(trial)
                .with_context(|| format!("{} under {sampler}", problem.name()))
        },
        |told| {
            if let (TrialState::Complete, Some(&[v])) = (told.state, told.values.as_deref()) {
                best = Some(best.map_or(v, |b| b.min(v)));
            }
            out.push(best);
        },
    )?;
    Ok(out)
}

/// What a suite run covers.
#[derive(Debug, Clone)]
pub struct Spec {
    /// BBOB function numbers (1..=24).
    pub functions: Vec<u8>,
    /// BBOB instances (COCO's numbers).
    pub instances: Vec<u32>,
    /// BBOB dimensions.
    pub dims: Vec<usize>,
    /// The mixed spaces to include.
    pub mixed: Vec<Mixed>,
    /// Sampler names, from [`SAMPLERS`].
    pub samplers: Vec<String>,
    /// The seeds of each (problem, sampler), usually `0..n`.
    pub seeds: std::ops::Range<u64>,
    /// Trial counts at which the best value so far is recorded, ascending;
    /// the last is the length of every study (in finished trials).
    pub checkpoints: Vec<usize>,
    /// Trials running at once in each study (1: sequential; see [`drive`]).
    pub in_flight: usize,
}

impl Spec {
    /// The problems, BBOB first (by function, instance, dimension).
    pub fn problems(&self) -> Result<Vec<Problem>> {
        let mut out = Vec::new();
        for &f in &self.functions {
            for &i in &self.instances {
                for &d in &self.dims {
                    let f = Bbob::new(f, i, d).map_err(anyhow::Error::msg)?;
                    out.push(Problem::Bbob(Box::new(f)));
                }
            }
        }
        out.extend(self.mixed.iter().map(|&m| Problem::Mixed(m)));
        Ok(out)
    }
}

/// One study's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The problem's name.
    pub problem: String,
    /// Its half.
    pub half: Half,
    /// Its optimum value.
    pub optimum: f64,
    /// The sampler's name.
    pub sampler: String,
    /// The seed.
    pub seed: u64,
    /// Trials that were running at once (1: sequential).
    pub in_flight: usize,
    /// The best value so far at each of the spec's checkpoints.
    pub best: Vec<Option<f64>>,
    /// The whole best-so-far trajectory, one value per trial.
    pub trajectory: Vec<Option<f64>>,
}

/// Runs every (problem, sampler, seed) of `spec` on `threads` threads (each
/// study is sequential and seeded, so the records do not depend on the
/// thread count), calling `progress` after each (problem, sampler) with a
/// line to print. Records come back in the spec's order.
pub fn run_suite(
    spec: &Spec,
    threads: usize,
    progress: impl Fn(&str) + Sync,
) -> Result<Vec<Record>> {
    let n = *spec.checkpoints.last().context("no checkpoints")?;
    let problems = spec.problems()?;
    let jobs: Vec<(usize, &str)> = (0..problems.len())
        .flat_map(|p| spec.samplers.iter().map(move |s| (p, s.as_str())))
        .collect();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let job = |(p, s): (usize, &str)| -> Result<Vec<Record>> {
        let problem = &problems[p];
        let started = std::time::Instant::now();
        let mut out = Vec::new();
        for seed in spec.seeds.clone() {
            let trajectory = run(problem, s, seed, n, spec.in_flight)?;
            let best = spec.checkpoints.iter().map(|c| trajectory[c - 1]).collect();
            out.push(Record {
                problem: problem.name(),
                half: half(problem),
                optimum: problem.optimum(),
                sampler: s.to_owned(),
                seed,
                in_flight: spec.in_flight,
                best,
                trajectory,
            });
        }
        progress(&format!(
            "{} / {s} / {} in flight: {} seeds in {:.1}s",
            problem.name(),
            spec.in_flight,
            spec.seeds.end - spec.seeds.start,
            started.elapsed().as_secs_f64()
        ));
        Ok(out)
    };
    let mut done: Vec<(usize, Vec<Record>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                scope.spawn(|| -> Result<Vec<(usize, Vec<Record>)>> {
                    let mut mine = Vec::new();
                    loop {
                        let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&j) = jobs.get(k) else {
                            return Ok(mine);
                        };
                        mine.push((k, job(j)?));
                    }
                })
            })
            .collect();
        let mut all = Vec::new();
        for w in workers {
            match w.join() {
                Ok(r) => all.extend(r?),
                Err(_) => bail!("a suite thread panicked"),
            }
        }
        Ok(all)
    })?;
    done.sort_by_key(|(k, _)| *k);
    Ok(done.into_iter().flat_map(|(_, r)| r).collect())
}

/// A missing value (no feasible trial yet) as the worst possible one.
pub fn or_worst(v: Option<f64>) -> f64 {
    v.unwrap_or(f64::MAX)
}

/// numpy.percentile with linear interpolation, on sorted values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q / 100.0 * (sorted.len() - 1) as f64;
    let (i, f) = (pos.floor() as usize, pos.fract());
    if i + 1 < sorted.len() && f > 0.0 {
        sorted[i] + f * (sorted[i + 1] - sorted[i])
    } else {
        sorted[i]
    }
}

/// The median of `values`.
pub fn median(values: &[f64]) -> f64 {
    let mut s = values.to_vec();
    s.sort_by(f64::total_cmp);
    percentile(&s, 50.0)
}

/// Wilcoxon's signed-rank test, exact and two-sided, on paired differences:
/// zeros are dropped (Wilcoxon's convention), tied magnitudes share their
/// average rank, and the null distribution of W+ is counted exactly over all
/// sign patterns of those ranks. Returns (p-value, W+, W-).
pub fn wilcoxon(diffs: &[f64]) -> (f64, f64, f64) {
    let mut d: Vec<f64> = diffs.iter().copied().filter(|v| *v != 0.0).collect();
    let n = d.len();
    if n == 0 {
        return (1.0, 0.0, 0.0);
    }
    d.sort_by(|a, b| a.abs().total_cmp(&b.abs()));
    // Doubled average ranks, so ties stay integers.
    let mut ranks2 = vec![0usize; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && d[j + 1].abs() == d[i].abs() {
            j += 1;
        }
        // Ranks i+1..=j+1 average to (i + j + 2) / 2; doubled: i + j + 2.
        for r in &mut ranks2[i..=j] {
            *r = i + j + 2;
        }
        i = j + 1;
    }
    let w_plus2: usize = d
        .iter()
        .zip(&ranks2)
        .filter(|(v, _)| **v > 0.0)
        .map(|(_, r)| r)
        .sum();
    let total2: usize = ranks2.iter().sum();
    // counts[s]: sign patterns whose doubled W+ is s.
    let mut counts = vec![0.0_f64; total2 + 1];
    counts[0] = 1.0;
    for &r in &ranks2 {
        for s in (r..=total2).rev() {
            counts[s] += counts[s - r];
        }
    }
    let all = 2f64.powi(n as i32);
    let low: f64 = counts[..=w_plus2].iter().sum::<f64>() / all;
    let high: f64 = counts[w_plus2..].iter().sum::<f64>() / all;
    let p = (2.0 * low.min(high)).min(1.0);
    (p, w_plus2 as f64 / 2.0, (total2 - w_plus2) as f64 / 2.0)
}

/// How hpo's sampler fared against Optuna's on one problem and budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Significantly lower (better) values.
    Better,
    /// No significant difference.
    Tie,
    /// Significantly higher (worse) values.
    Worse,
}

impl Verdict {
    /// The name used in the JSON and the tables.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Better => "better",
            Verdict::Tie => "tie",
            Verdict::Worse => "worse",
        }
    }
}

/// Compares `ours` with `theirs` (minimisation), paired by index: Wilcoxon's
/// signed-rank test at level `alpha`; not significant is a tie. Returns the
/// verdict and the p-value.
pub fn compare(ours: &[f64], theirs: &[f64], alpha: f64) -> (Verdict, f64) {
    let diffs: Vec<f64> = ours
        .iter()
        .zip(theirs)
        .map(|(a, b)| if a == b { 0.0 } else { a - b })
        .collect();
    let (p, w_plus, w_minus) = wilcoxon(&diffs);
    let verdict = if p >= alpha {
        Verdict::Tie
    } else if w_plus < w_minus {
        Verdict::Better
    } else {
        Verdict::Worse
    };
    (verdict, p)
}

/// Optuna's runs: (problem, sampler, budget) -> best value by seed
/// (`f64::MAX` where no trial was feasible yet).
pub type Reference = BTreeMap<(String, String, usize), BTreeMap<u64, f64>>;

/// Reads a reference file written by `bench/optuna_suite.py`: its runs and
/// its `meta`. A missing file is an empty reference.
pub fn read_reference(path: &Path) -> Result<(Reference, Value)> {
    let mut out = Reference::new();
    if !path.exists() {
        return Ok((out, Value::Null));
    }
    let json: Value = serde_json::from_str(
        &std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
    )
    .with_context(|| format!("parsing {}", path.display()))?;
    for r in json["runs"].as_array().context("reference: no `runs`")? {
        let (Some(p), Some(s), Some(seed)) = (
            r["problem"].as_str(),
            r["sampler"].as_str(),
            r["seed"].as_u64(),
        ) else {
            bail!("reference run without problem, sampler or seed: {r}");
        };
        for (budget, v) in r["best"]
            .as_object()
            .context("reference run without `best`")?
        {
            out.entry((p.to_owned(), s.to_owned(), budget.parse()?))
                .or_default()
                .insert(seed, v.as_f64().unwrap_or(f64::MAX));
        }
    }
    Ok((out, json["meta"].clone()))
}
