//! Held-out scoring after the study: the best trial's stored model on the
//! test split, whatever process trained it.

use super::saved_model::{load_model, SavedModel};
use crate::data::Dataset;
use crate::error::Result;
use crate::task::{evaluate_with, TextTask};
use crate::train::Metrics;
use burn::tensor::backend::Backend;
use hpo_core::artifact::ArtifactStore;
use hpo_core::{FrozenTrial, Study};
use std::sync::Arc;

/// The best trial scored on a held-out split.
#[derive(Debug)]
pub struct HeldOut<B: Backend> {
    /// The study's best trial.
    pub trial: Arc<FrozenTrial>,
    /// Its model, read back from the store.
    pub saved: SavedModel<B>,
    /// Its metrics on the held-out split.
    pub metrics: Metrics,
}

/// Scores `study`'s best trial on `test`: its model is read back from
/// `store`, and `test` is encoded with the tokenizer stored with it (or,
/// for a model stored without one by other code than [`super::fine_tune`],
/// with the tokenizer of the task `task_of` picks for the trial: the
/// backbone it fine-tuned). `Ok(None)` when no trial has completed.
pub fn score_best<B: Backend>(
    study: &Study,
    store: &ArtifactStore,
    task_of: impl Fn(&FrozenTrial) -> Result<Arc<TextTask>>,
    test: &Dataset,
    device: &B::Device,
) -> Result<Option<HeldOut<B>>> {
    let Ok(trial) = study.best_trial() else {
        return Ok(None);
    };
    score_trial(trial, store, task_of, test, device).map(Some)
}

/// Scores `trial` on `test` from the model it stored in `store`, as
/// [`score_best`] does the study's best.
pub fn score_trial<B: Backend>(
    trial: Arc<FrozenTrial>,
    store: &ArtifactStore,
    task_of: impl Fn(&FrozenTrial) -> Result<Arc<TextTask>>,
    test: &Dataset,
    device: &B::Device,
) -> Result<HeldOut<B>> {
    let saved = load_model::<B>(store, &trial, device)?;
    let task;
    let tokenizer = match &saved.tokenizer {
        Some(stored) => stored,
        None => {
            task = task_of(&trial)?;
            &task.tokenizer
        }
    };
    let metrics = evaluate_with(
        tokenizer,
        &saved.card.classes,
        &saved.model,
        test,
        saved.card.max_len,
        device,
    )?;
    Ok(HeldOut {
        trial,
        saved,
        metrics,
    })
}
