//! criteria: fine-tune a pretrained transformer for "does this text match the
//! criterion?", tune it with hpo, and score the best trial on a held-out
//! test split.
//!
//! ```text
//! cargo run --release --example criteria                       # fine-tune all-MiniLM-L6-v2 on the CPU
//! cargo run --release --example criteria -- --trials 20        # run again: the study continues
//! cargo run --release --example criteria -- --save-best best/  # keep the best trial's weights
//! cargo run --release --example criteria -- --pretrained DIR   # your own BERT, RoBERTa or DeBERTa-v3 checkpoint
//! cargo run --release --example criteria -- --from-scratch     # small models trained from scratch
//! cargo run --release --example criteria -- --jobs in-process  # one trial at a time, in this process
//! cargo run --release --features cuda --example criteria -- --device cuda:0 --memory-budget 24GiB
//! ```
//!
//! Trials run in worker processes admitted by memory (`--jobs auto`; on the
//! CPU one per core, see the book's "Parallel trials on one GPU"): an
//! out-of-memory trial is relaunched smaller in a fresh process, and one
//! that cannot fit even alone is recorded infeasible without touching the
//! GPU. Each trial stores its model in the study's artifact store (only the
//! best is kept), from which the best trial is scored on the test split.
//!
//! The study's flags and run are the library's (`hpo::cli`); the data and
//! model flags, the training call and the held-out report are hpo-burn's
//! (`hpo_burn::experiment`). What is left here is the experiment: its
//! search space and the run each trial asks for. The search chooses
//! between a light and a heavy backbone: all-MiniLM-L6-v2 (BERT, 6 layers,
//! Apache-2.0, fetched once into the cache) cut to its first
//! `--light-layers` layers, and the whole of it. The shipped data are the
//! VADER tweets (Hutto & Gilbert 2014, MIT), labelled "negative affect" or
//! not, standing in for one criterion of a text-matching task.

use clap::Parser;
use hpo::artifact::{ArtifactStore, KeepArtifacts};
use hpo::cli::{StudyArgs, StudyRunner};
use hpo::{
    Direction, HyperbandConfig, PatientConfig, PatientPruner, Resource, SearchSpace, Trial,
    TrialError,
};
use hpo_burn::burn::tensor::backend::AutodiffBackend;
use hpo_burn::estimator::{Sizing, TrainingEstimator};
use hpo_burn::experiment::{
    fine_tune, report_best, BackboneArgs, Backbones, DataArgs, OnBackend, Splits,
};
use hpo_burn::{Pooling, RunSpec, TrainConfig, TsvSpec};
use std::path::PathBuf;
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
    /// The data [default: the shipped tweets, label `neg` = matches; at
    /// most 1200 training examples, 500 with --from-scratch].
    #[command(flatten)]
    data: DataArgs,
    /// The backbones and the device.
    #[command(flatten)]
    model: BackboneArgs,
    /// Maximum epochs per trial [default: 1; 2 with --from-scratch].
    #[arg(long)]
    epochs: Option<usize>,
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
    /// into its user attributes `test_macro_f1` and `test_accuracy`: for
    /// comparing trainers over many runs (`bench/replay_config.sh`).
    /// Nothing that chooses trials reads them.
    #[arg(long)]
    score_every_trial: bool,
}
// ANCHOR_END: args

impl Args {
    /// Defaults that depend on the mode: `--from-scratch` keeps the budget
    /// its figures were measured with.
    fn by_mode<T>(&self, fine_tune: T, scratch: T) -> T {
        if self.model.from_scratch {
            scratch
        } else {
            fine_tune
        }
    }
    fn epochs(&self) -> usize {
        self.epochs.unwrap_or(self.by_mode(1, 2))
    }
}

// ANCHOR: space
/// Which backbone a trial fine-tunes (see [`Backbones`]).
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
/// [`hpo_burn::experiment::Lengths`] turns it into tokens at start-up,
/// capped by the checkpoint), so the space fits tweets and news articles
/// alike. The seed study's heavy-model rule (heavy => batch <= 16, length
/// <= 384 of 512) becomes heavy => batch <= 16, length at most the 90th
/// percentile: one constraint line, which narrows the support at sampling
/// time while the stored distributions stay the declared ones.
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

/// A from-scratch trial read as the fields both spaces share.
impl From<FromScratch> for FineTune {
    fn from(c: FromScratch) -> Self {
        let FromScratch {
            backbone,
            lr,
            batch_size,
            length_pct,
            grad_accum,
            ..
        } = c;
        let (head_layers, head_width) = (c.head_layers, c.head_width);
        let (dropout, warmup, weight_decay) = (c.dropout, c.warmup, c.weight_decay);
        FineTune {
            backbone,
            lr,
            batch_size,
            length_pct,
            grad_accum,
            head_layers,
            head_width,
            dropout,
            warmup,
            weight_decay,
        }
    }
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
    let c = if args.model.from_scratch {
        FineTune::from(FromScratch::sample(trial)?)
    } else {
        FineTune::sample(trial)?
    };
    let max_len = (backbones.lengths.tokens(c.length_pct)).ok_or_else(|| {
        TrialError::Failed(format!("no length measured at percentile {}", c.length_pct))
    })?;
    let spec = RunSpec {
        // Ignored when the backbone has a checkpoint: its dimensions win.
        preset: backbones.preset(c.backbone.is_heavy()),
        head_layers: c.head_layers,
        head_width: c.head_width.unwrap_or(0),
        dropout: c.dropout,
        // all-MiniLM-L6-v2 was trained as a mean-pooled sentence encoder;
        // mean pooling also learns far faster from scratch.
        pooling: Pooling::Mean,
        train: TrainConfig {
            epochs: args.epochs(),
            learning_rate: c.lr,
            micro_batch: c.batch_size,
            accumulation: c.grad_accum,
            max_len,
            warmup_ratio: c.warmup,
            weight_decay: c.weight_decay,
            patience: Some(2),
            // The objective is macro-F1: weight the rare class up.
            balanced_loss: true,
            seed: args.study.seed.wrapping_add(trial.number()),
            ..TrainConfig::default()
        },
    };
    Ok((c.backbone, spec))
}

/// One trial: sample, train (at the executor's batch, with OOM recovery),
/// report each epoch to the pruner, keep the model in the artifact store.
fn objective<B: AutodiffBackend>(
    trial: &mut Trial,
    cx: &Criteria<'_>,
    device: &B::Device,
    store: &ArtifactStore,
) -> Result<f64, TrialError> {
    let (backbone, spec) = sample_run(trial, &cx.backbones, cx.args)?;
    let task = cx.backbones.task(backbone.is_heavy());
    let trained = fine_tune::<B>(trial, task, spec, device, Some(store))?;
    if cx.args.score_every_trial {
        let metrics = trained.score(task, &cx.splits.test, device)?;
        trial.set_user_attr("test_macro_f1", metrics.macro_f1)?;
        trial.set_user_attr("test_accuracy", metrics.accuracy)?;
    }
    Ok(trained.value)
}
// ANCHOR_END: objective

// ANCHOR: data
/// The data, split once by seed: test (never seen by a trial), then
/// validation (scores trials), then training (capped at `--train-limit`).
fn load_splits(args: &Args) -> anyhow::Result<Splits> {
    let tweets = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/vader/tweets.tsv");
    let spec = TsvSpec::single("text", "label").with_positive("neg");
    let limit = args.by_mode(1200, 500);
    Ok(args.data.load(&tweets, spec, limit, args.study.seed)?)
}

/// The light and heavy backbones, with the lengths `length_pct` chooses.
fn backbones(args: &Args, splits: &Splits) -> anyhow::Result<Backbones> {
    let percentiles = args.by_mode(&[50, 90, 99][..], &[50, 75, 90, 99]);
    Ok(args.model.backbones(splits, "length_pct", percentiles)?)
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
    let backbones = Arc::new(backbones(&args, &splits)?);
    let device = args.model.device;
    device.run(Criteria {
        args: &args,
        backbones,
        splits: &splits,
    })?
}

/// The study and what every trial needs, on whichever backend `--device`
/// needs.
struct Criteria<'a> {
    args: &'a Args,
    backbones: Arc<Backbones>,
    splits: &'a Splits,
}

// ANCHOR: study
impl OnBackend for Criteria<'_> {
    type Output = anyhow::Result<()>;

    /// Runs the study on backend `B`, then reports the best trial, scored
    /// on the test split from its stored model.
    fn run<B: AutodiffBackend>(self, device: B::Device) -> anyhow::Result<()> {
        let (args, scratch) = (self.args, self.args.model.from_scratch);
        let memory = args.model.device.memory()?;
        let mut runner = StudyRunner::new(&args.study)
            .default_storage("sqlite:///criteria.db")
            .default_study(args.by_mode("criteria", "criteria-scratch"))
            .default_trials(args.by_mode(8, 20))
            .default_timeout(Duration::from_secs(args.by_mode(420, 540)))
            .direction(Direction::Maximize)
            .pruner(pruner(args.epochs())?)
            .metric("macro-F1")
            // The best trial's model is all the report and --save-best need.
            .keep_artifacts(KeepArtifacts::Best(1))
            .workers(Arc::new(estimator(args, &self.backbones)), memory)
            // Recorded with the space: resumed on data that gives other
            // lengths, the study is refused instead of mixing two spaces.
            .space_data(self.backbones.lengths.describe("length_pct"));
        runner = if scratch {
            runner.space::<FromScratch>()
        } else {
            runner
                .space::<FineTune>()
                .warm_start(warm_start().to_params())
        };
        let store = runner.artifact_store()?;
        let done = runner.run(|trial| objective::<B>(trial, &self, &device, &store))?;
        if args.study.is_node() {
            return Ok(()); // one node of many: the report is another process's
        }
        let (test, save) = (&self.splits.test, args.save_best.as_deref());
        report_best::<B::InnerBackend>(&done.study, &store, test, &device, save)?;
        Ok(())
    }
}

/// Hyperband over epochs 1..=epochs, consulted only once a trial's macro-F1
/// stops improving (patience 0: the last epoch was no better).
fn pruner(epochs: usize) -> anyhow::Result<impl hpo::Pruner + 'static> {
    let max_resource = Resource::Steps(epochs as u64);
    let hyperband = HyperbandConfig {
        max_resource,
        ..HyperbandConfig::default()
    }
    .init()?;
    Ok(PatientPruner::new(hyperband, PatientConfig::default())?)
}

/// Each trial sized by the analytic estimate of the run it samples, as the
/// device runs it (on a GPU calibrated to what burn holds, and priced with
/// the GPU's step times), which the executor corrects per backbone from
/// the peaks the workers measure.
fn estimator(args: &Args, backbones: &Arc<Backbones>) -> TrainingEstimator {
    let (args, backbones) = (args.clone(), Arc::clone(backbones));
    let device = args.model.device;
    TrainingEstimator::new(move |trial| {
        let (backbone, spec) = sample_run(trial, &backbones, &args)?;
        let task = backbones.task(backbone.is_heavy());
        Ok(device.sized(Sizing::of_run(task, &spec)?))
    })
}
// ANCHOR_END: study

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
        assert_eq!(a.model.device, hpo_burn::experiment::DeviceArg::Cuda(0));
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
        args.study.worker_launch = Some(hpo::cli::WorkerLaunch::test_entry(entry));
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
            .name(args.by_mode("criteria", "criteria-scratch"))
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
        let launch = args.study.worker_launch.take().unwrap();
        let fault = "alloc-then-memory-page@16";
        args.study.worker_launch = Some(launch.env(hpo_burn::fault::FAULT_ENV, fault));
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
            for key in ["test_macro_f1", "test_accuracy"] {
                let v = t.user_attrs.get(key).and_then(|v| v.as_f64());
                assert!(v.is_some_and(|v| (0.0..=1.0).contains(&v)), "{key}: {t:?}");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// RoBERTa and DeBERTa-v3 checkpoints through `--pretrained`: the
    /// fixture-sized ones hpo-burn's parity tests check against
    /// transformers (2 layers, 64 positions), the first layer the light
    /// backbone; each trial trains and stores its model, and the best is
    /// scored on the test split.
    #[test]
    fn roberta_and_deberta_checkpoints_are_fine_tuned_through_pretrained() {
        for (family, offset) in [("roberta", 2), ("deberta", 0)] {
            let dir = tempfile_dir(&format!("criteria-{family}"));
            std::fs::create_dir_all(&dir).unwrap();
            let storage = format!("sqlite:{}", dir.join("study.db").display());
            let folder = format!(
                "{}/hpo-burn/tests/fixtures/families/{family}",
                env!("CARGO_MANIFEST_DIR")
            );
            let argv = [
                "--pretrained",
                &folder,
                "--light-layers",
                "1",
                "--epochs",
                "1",
                "--train-limit",
                "48",
                "--validation",
                "0.02",
                "--test",
                "0.02",
                "--storage",
                &storage,
                "--jobs",
                "in-process",
                "--trials",
                "2",
            ];
            let a = args(&argv).unwrap();
            let (study, trials) = run_fresh(&a);
            assert_eq!(trials.len(), 2, "{family}");
            let complete = trials.iter().all(|t| t.state == TrialState::Complete);
            assert!(complete, "{family}: {trials:?}");
            let store = ArtifactStore::beside(&storage).unwrap();
            let best = study.best_trial().unwrap();
            let device = Default::default();
            let saved =
                hpo_burn::experiment::load_model::<hpo_burn::Cpu>(&store, &best, &device).unwrap();
            assert!(saved.card.backbone.contains(family), "{:?}", saved.card);
            assert_eq!(saved.card.model.position_offset, offset, "{family}");
            assert_eq!(saved.card.model.relative.is_some(), family == "deberta");
            assert!(saved.card.max_len <= 64, "{:?}", saved.card);
            let _ = std::fs::remove_dir_all(&dir);
        }
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
            backbones(&a, &splits).unwrap().lengths
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
