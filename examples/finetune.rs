//! finetune: a real fine-tuning study in a hundred lines. A pretrained
//! transformer (all-MiniLM-L6-v2, its first 3 layers, fetched once into the
//! cache) is fine-tuned on the shipped VADER tweets; trials run in worker
//! processes admitted by memory, are pruned by the median rule, and keep
//! their models as artifacts; the best is scored on a held-out split.
//!
//! ```text
//! cargo run --release --example finetune
//! cargo run --release --example finetune -- --trials 12 --jobs 1 --memory-budget 4GiB
//! cargo run --release --features cuda --example finetune -- --device cuda:0
//! ```

use clap::Parser;
use hpo::artifact::KeepArtifacts;
use hpo::cli::{StudyArgs, StudyRunner};
use hpo::{Direction, MedianPruner, SearchSpace, Trial, TrialError};
use hpo_burn::burn::tensor::backend::AutodiffBackend;
use hpo_burn::estimator::{Sizing, TrainingEstimator};
use hpo_burn::experiment::{
    checkpoints, fine_tune, light_and_heavy, score_best, DeviceArg, Lengths, OnBackend, Splits,
};
use hpo_burn::{Pooling, Preset, RunSpec, TextTask, TrainConfig, TsvSpec};
use std::path::PathBuf;
use std::sync::Arc;

// ANCHOR: args
/// Fine-tune a small pretrained transformer on the shipped tweets.
#[derive(Parser)]
struct Args {
    #[command(flatten)]
    study: StudyArgs,
    /// `cpu`, or `cuda:N` (needs `--features cuda`).
    #[arg(long, default_value = "cpu")]
    device: DeviceArg,
    /// Epochs per trial.
    #[arg(long, default_value_t = 2)]
    epochs: usize,
    /// Train on at most this many examples (0 = all).
    #[arg(long, default_value_t = 1200)]
    train_limit: usize,
}
// ANCHOR_END: args

// ANCHOR: space
/// What the search chooses.
#[hpo::search_space]
#[derive(Debug, Clone)]
struct Space {
    #[param(float(1e-5..=2e-4, log))]
    lr: f64,
    #[param(choice(8, 16, 32))]
    batch_size: usize,
    #[param(float(0.0..=0.2))]
    dropout: f64,
    #[param(float(0.0..=0.2))]
    warmup: f64,
}

/// The run a trial asks for at sequence length `len` (the objective and the
/// memory estimate both call it, so they see the same configuration).
fn spec(trial: &mut Trial, epochs: usize, seed: u64, len: usize) -> Result<RunSpec, TrialError> {
    let s = Space::sample(trial)?;
    Ok(RunSpec {
        preset: Preset::Tiny, // ignored: the checkpoint's dimensions win
        head_layers: 0,
        head_width: 0,
        dropout: s.dropout,
        pooling: Pooling::Mean,
        train: TrainConfig {
            epochs,
            learning_rate: s.lr,
            micro_batch: s.batch_size,
            max_len: len,
            warmup_ratio: s.warmup,
            balanced_loss: true,
            seed: seed + trial.number(),
            ..TrainConfig::default()
        },
    })
}
// ANCHOR_END: space

// ANCHOR: study
/// The study, on whichever backend `--device` needs.
struct Finetune<'a> {
    args: &'a Args,
    task: Arc<TextTask>,
    splits: Splits,
}

impl OnBackend for Finetune<'_> {
    type Output = anyhow::Result<()>;

    fn run<B: AutodiffBackend>(self, device: B::Device) -> anyhow::Result<()> {
        let (args, task) = (self.args, &self.task);
        let (epochs, seed) = (args.epochs, args.study.seed);
        // Long enough for 99% of the training texts, whatever the data.
        let len = Lengths::for_task(task, &[99])?.at[0].1;
        let sized = Arc::clone(task);
        let estimator = TrainingEstimator::new(move |trial| {
            Ok(Sizing::of_run(&sized, &spec(trial, epochs, seed, len)?)?)
        });
        let runner = StudyRunner::new(&args.study)
            .default_storage("sqlite:///finetune.db")
            .default_study("finetune")
            .default_trials(6)
            .direction(Direction::Maximize)
            .pruner(MedianPruner::default())
            .space::<Space>()
            .space_data(format!("length {len} (99th percentile)"))
            .metric("macro-F1")
            .keep_artifacts(KeepArtifacts::Best(1))
            .workers(Arc::new(estimator), args.device.memory()?);
        let store = runner.artifact_store()?;
        let done = runner.run(|trial| {
            let spec = spec(trial, epochs, seed, len)?;
            Ok(fine_tune::<B>(trial, task, spec, &device, Some(&store))?.value)
        })?;
        let held_out = score_best::<B::InnerBackend>(
            &done.study,
            &store,
            |_| Ok(Arc::clone(task)),
            &self.splits.test,
            &device,
        )?;
        if let Some(h) = held_out {
            println!(
                "best trial #{}: validation macro-F1 {:.4}, held-out macro-F1 {:.4} ({} examples)",
                h.trial.number,
                h.trial.value().unwrap_or(f64::NAN),
                h.metrics.macro_f1,
                self.splits.test.examples.len()
            );
        }
        Ok(())
    }
}
// ANCHOR_END: study

// ANCHOR: main
fn main() -> anyhow::Result<()> {
    run(&Args::parse())
}

fn run(args: &Args) -> anyhow::Result<()> {
    let tweets = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/vader/tweets.tsv");
    let spec = TsvSpec::single("text", "label").with_positive("neg");
    let splits = Splits::load(&tweets, &spec, 0.1, 0.1, args.train_limit, args.study.seed)?;
    // all-MiniLM-L6-v2 from the cache; its first 3 layers are the "light" backbone.
    let classes = splits.train.classes.len();
    let (light, _) = light_and_heavy(&checkpoints(&[])?, 3, classes)?;
    let (train, valid) = (splits.train.clone(), splits.valid.clone());
    let task = Arc::new(TextTask::new(train, valid, Some(light), 0)?);
    args.device.run(Finetune { args, task, splits })?
}
// ANCHOR_END: main

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole example on a tiny configuration: two one-epoch trials on
    /// 32 examples, in this process, then the held-out score from the
    /// stored model.
    #[test]
    fn a_tiny_study_runs_end_to_end() {
        let dir = std::env::temp_dir().join(format!("finetune-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite:{}", dir.join("study.db").display());
        let args = Args::try_parse_from([
            "finetune",
            "--storage",
            &url,
            "--trials",
            "2",
            "--jobs",
            "in-process",
            "--epochs",
            "1",
            "--train-limit",
            "32",
        ])
        .unwrap();
        run(&args).unwrap();
        let study = hpo::Study::builder()
            .name("finetune")
            .storage_url(&url)
            .load()
            .unwrap();
        let best = study.best_trial().unwrap();
        let store = hpo::artifact::ArtifactStore::beside(&url).unwrap();
        let saved =
            hpo_burn::experiment::load_model::<hpo_burn::Cpu>(&store, &best, &Default::default());
        assert_eq!(saved.unwrap().card.max_len, 48);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
