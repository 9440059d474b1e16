//! A trial's trained model as artifacts of the study
//! ([`hpo_core::artifact::ArtifactStore`]): the weights (`model.mpk`, burn's
//! named MessagePack record at full precision) and what is needed to use
//! them (`model.json`: the model's configuration, the sequence length it was
//! trained at, the class names, the backbone). Written from whichever
//! process trained the trial (a worker's memory dies with it), read back
//! from any process after the study.

use crate::error::{Error, Result};
use crate::model::{BertClassifier, ModelConfig};
use crate::tokenize::TextTokenizer;
use burn::module::Module;
use burn::record::{FullPrecisionSettings, NamedMpkBytesRecorder, Recorder};
use burn::tensor::backend::Backend;
use hpo_core::artifact::ArtifactStore;
use hpo_core::{FrozenTrial, Trial};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The artifact holding a trial's weights.
pub const WEIGHTS_ARTIFACT: &str = "model.mpk";
/// The artifact describing them ([`ModelCard`]).
pub const CARD_ARTIFACT: &str = "model.json";

/// What a saved model is: everything but its weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCard {
    /// The model's configuration ([`ModelConfig::init`] builds it).
    pub model: ModelConfig,
    /// The sequence length it was trained at (texts are cut to it).
    pub max_len: usize,
    /// Its classes, in label order.
    pub classes: Vec<String>,
    /// The backbone it was fine-tuned from (checkpoint or preset name).
    pub backbone: String,
}

/// A model read back from a trial's artifacts.
#[derive(Debug)]
pub struct SavedModel<B: Backend> {
    /// The trained model, for inference.
    pub model: BertClassifier<B>,
    /// What it is.
    pub card: ModelCard,
}

/// Stores `model` as the artifacts of `trial` in `store`.
pub fn save_model<B: Backend>(
    store: &ArtifactStore,
    trial: &mut Trial,
    model: BertClassifier<B>,
    card: &ModelCard,
) -> Result<()> {
    let recorder = NamedMpkBytesRecorder::<FullPrecisionSettings>::new();
    let bytes = recorder
        .record(model.into_record(), ())
        .map_err(|e| Error::Data(format!("cannot serialise the model: {e}")))?;
    let card_json = serde_json::to_vec_pretty(card)
        .map_err(|e| Error::Data(format!("cannot write the model card: {e}")))?;
    // The weights first: a model card names a complete model.
    store.upload_bytes(trial, WEIGHTS_ARTIFACT, &bytes)?;
    store.upload_bytes(trial, CARD_ARTIFACT, &card_json)?;
    Ok(())
}

/// Reads back the model `trial` stored with [`save_model`], on `device`.
pub fn load_model<B: Backend>(
    store: &ArtifactStore,
    trial: &FrozenTrial,
    device: &B::Device,
) -> Result<SavedModel<B>> {
    let card: ModelCard =
        serde_json::from_slice(&store.read(trial, CARD_ARTIFACT)?).map_err(|e| {
            Error::Data(format!(
                "trial #{}'s {CARD_ARTIFACT} is not a model card: {e}",
                trial.number
            ))
        })?;
    let bytes = store.read(trial, WEIGHTS_ARTIFACT)?;
    let recorder = NamedMpkBytesRecorder::<FullPrecisionSettings>::new();
    let record = recorder.load(bytes, device).map_err(|e| {
        Error::Data(format!(
            "trial #{}'s {WEIGHTS_ARTIFACT} does not load as its model card says: {e}",
            trial.number
        ))
    })?;
    let model = card.model.init::<B>(device)?.load_record(record);
    Ok(SavedModel { model, card })
}

/// Copies the model `trial` stored with [`save_model`] out of `store` into
/// `dir`, with what is needed to use it elsewhere: `model.mpk` (burn's
/// `NamedMpkFileRecorder` format at full precision), `model.json` (its
/// [`ModelCard`]), `model_config.json` and `tokenizer.json`. Returns the card.
pub fn export_model(
    store: &ArtifactStore,
    trial: &FrozenTrial,
    tokenizer: &TextTokenizer,
    dir: &Path,
) -> Result<ModelCard> {
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    store.download(trial, WEIGHTS_ARTIFACT, dir.join("model.mpk"))?;
    store.download(trial, CARD_ARTIFACT, dir.join("model.json"))?;
    let card: ModelCard = serde_json::from_slice(&store.read(trial, CARD_ARTIFACT)?)
        .map_err(|e| Error::Data(format!("trial #{}'s {CARD_ARTIFACT}: {e}", trial.number)))?;
    let config = serde_json::to_string_pretty(&card.model)
        .map_err(|e| Error::Data(format!("cannot write the model config: {e}")))?;
    let path = dir.join("model_config.json");
    std::fs::write(&path, config).map_err(|e| Error::io(&path, e))?;
    tokenizer.save(dir.join("tokenizer.json"))?;
    Ok(card)
}
