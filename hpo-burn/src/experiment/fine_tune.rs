//! One trial's training call: the run the trial sampled, at the batch the
//! executor says, with its model kept as the trial's artifacts.

use super::saved_model::{save_model, ModelCard};
use crate::memory::MemoryGuard;
use crate::model::BertClassifier;
use crate::task::{run_with_model, RunSpec, TextTask};
use crate::train::Metrics;
use burn::module::AutodiffModule;
use burn::tensor::backend::AutodiffBackend;
use hpo_core::artifact::ArtifactStore;
use hpo_core::{executor, Trial, TrialError};

/// What a trained trial gives back.
#[derive(Debug)]
pub struct Trained<B: AutodiffBackend> {
    /// The objective: the best validation macro-F1 of the run.
    pub value: f64,
    /// The model at its best epoch, for inference.
    pub model: BertClassifier<B::InnerBackend>,
    /// The sequence length it ran at.
    pub max_len: usize,
}

impl<B: AutodiffBackend> Trained<B> {
    /// The model's metrics on `data` (a held-out split), encoded with
    /// `task`'s tokenizer at the length it trained at.
    pub fn score(
        &self,
        task: &TextTask,
        data: &crate::data::Dataset,
        device: &B::Device,
    ) -> crate::Result<Metrics> {
        task.evaluate(&self.model, data, self.max_len, device)
    }
}

/// Trains `spec` on `task` as `trial`: at the micro-batch and accumulation
/// the executor chose when it chose one (after an OOM, or to fit: the same
/// effective batch), recomputing activations when it said so, reporting each epoch to the pruner, and, when `store`
/// is given, storing the model as the trial's artifacts (see
/// [`super::saved_model`]) so any process can use it after the study.
///
/// `?` on the result records a pruned run as pruned, an exhausted OOM
/// ladder as OOM (a constraint violation for the sampler), and anything
/// else as failed: never a crashed study.
pub fn fine_tune<B: AutodiffBackend>(
    trial: &mut Trial,
    task: &TextTask,
    mut spec: RunSpec,
    device: &B::Device,
    store: Option<&ArtifactStore>,
) -> Result<Trained<B>, TrialError> {
    if let Some(batch) = executor::batch_of(trial) {
        spec.train.micro_batch = batch.micro as usize;
        spec.train.accumulation = batch.accumulation as usize;
        spec.train.recompute = batch.recompute;
    }
    let (model, report) =
        run_with_model::<B, _>(task, &spec, MemoryGuard::Unlimited, device, trial)?;
    let model = model.valid();
    let max_len = spec.train.max_len;
    if let Some(store) = store {
        let card = ModelCard {
            model: spec.model_config(task),
            max_len,
            classes: task.train.classes.clone(),
            backbone: spec.model_name(task),
        };
        save_model(store, trial, model.clone(), &task.tokenizer, &card).map_err(|e| {
            TrialError::Failed(format!("trained, but the model could not be stored: {e}"))
        })?;
    }
    Ok(Trained {
        value: report.best_macro_f1,
        model,
        max_len,
    })
}
