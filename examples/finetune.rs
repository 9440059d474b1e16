//! finetune: a real fine-tuning study in about a hundred lines. A pretrained
//! transformer (all-MiniLM-L6-v2's first 3 layers, fetched once, or
//! `--pretrained DIR`) is fine-tuned on the shipped tweets (or `--data
//! TSV`) in worker processes admitted by memory, pruned by the median rule;
//! the best trial's stored model is scored on a held-out split.
//!
//! ```text
//! cargo run --release --example finetune -- --trials 12 --memory-budget 4GiB
//! cargo run --release --features cuda --example finetune -- --device cuda:0
//! ```

use clap::Parser;
use hpo::artifact::KeepArtifacts;
use hpo::cli::{StudyArgs, StudyRunner};
use hpo::{Direction, MedianPruner, SearchSpace, Trial, TrialError};
use hpo_burn::burn::tensor::backend::AutodiffBackend;
use hpo_burn::estimator::{Sizing, TrainingEstimator};
use hpo_burn::experiment::{fine_tune, report_best, BackboneArgs, Backbones, DataArgs, OnBackend};
use hpo_burn::{Pooling, RunSpec, TrainConfig, TsvSpec};
use std::path::PathBuf;
use std::sync::Arc;

// ANCHOR: args
/// Fine-tune a small pretrained transformer on labelled texts.
#[derive(Parser, Clone)]
struct Args {
    #[command(flatten)]
    study: StudyArgs,
    #[command(flatten)]
    data: DataArgs,
    #[command(flatten)]
    model: BackboneArgs,
    /// Epochs per trial.
    #[arg(long, default_value_t = 2)]
    epochs: usize,
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

/// The run a trial asks for (the objective and the memory estimate both
/// call it, so they see the same configuration): the light backbone, long
/// enough for 99% of the training texts.
fn spec(trial: &mut Trial, args: &Args, backbones: &Backbones) -> Result<RunSpec, TrialError> {
    let s = Space::sample(trial)?;
    Ok(RunSpec {
        preset: backbones.preset(false), // from scratch only: a checkpoint's dimensions win
        dropout: s.dropout,
        pooling: Pooling::Mean,
        train: TrainConfig {
            epochs: args.epochs,
            learning_rate: s.lr,
            micro_batch: s.batch_size,
            max_len: backbones.lengths.at[0].1,
            warmup_ratio: s.warmup,
            balanced_loss: true,
            seed: args.study.seed + trial.number(),
            ..TrainConfig::default()
        },
        ..RunSpec::default()
    })
}
// ANCHOR_END: space

// ANCHOR: study
/// The study, on whichever backend `--device` needs: the data and the
/// backbone, the runner, the held-out report.
impl OnBackend for &Args {
    type Output = anyhow::Result<()>;

    fn run<B: AutodiffBackend>(self, device: B::Device) -> anyhow::Result<()> {
        let tweets = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("data/vader/tweets.tsv");
        let spec_of = TsvSpec::single("text", "label").with_positive("neg");
        let splits = self.data.load(&tweets, spec_of, 1200, self.study.seed)?;
        let backbones = Arc::new(self.model.backbones(&splits, "length", &[99])?);
        let (args, sized) = (self.clone(), Arc::clone(&backbones));
        let device_arg = self.model.device;
        let estimator = TrainingEstimator::new(move |trial| {
            Ok(device_arg.sized(Sizing::of_run(&sized.light, &spec(trial, &args, &sized)?)?))
        });
        let runner = StudyRunner::new(&self.study)
            .default_storage("sqlite:///finetune.db")
            .default_study("finetune")
            .default_trials(6)
            .direction(Direction::Maximize)
            .pruner(MedianPruner::default())
            .space::<Space>()
            .space_data(backbones.lengths.describe("length"))
            .metric("macro-F1")
            .keep_artifacts(KeepArtifacts::Best(1))
            .workers(Arc::new(estimator), self.model.device.memory()?);
        let store = runner.artifact_store()?;
        let done = runner.run(|trial| {
            let spec = spec(trial, self, &backbones)?;
            Ok(fine_tune::<B>(trial, &backbones.light, spec, &device, Some(&store))?.value)
        })?;
        if !self.study.is_node() {
            report_best::<B::InnerBackend>(&done.study, &store, &splits.test, &device, None)?;
        }
        Ok(())
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.model.device.run(&args)?
}
// ANCHOR_END: study

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
        args.model.device.run(&args).unwrap().unwrap();
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
