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
/// The artifact holding the tokenizer the model was trained with (a
/// vocabulary trained from scratch differs from process to process, so the
/// tokenizer travels with the model).
pub const TOKENIZER_ARTIFACT: &str = "tokenizer.json";

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
    /// The tokenizer it was trained with (`None` for a model stored
    /// without one).
    pub tokenizer: Option<TextTokenizer>,
}

/// Stores `model`, trained with `tokenizer`, as the artifacts of `trial`
/// in `store`.
pub fn save_model<B: Backend>(
    store: &ArtifactStore,
    trial: &mut Trial,
    model: BertClassifier<B>,
    tokenizer: &TextTokenizer,
    card: &ModelCard,
) -> Result<()> {
    let recorder = NamedMpkBytesRecorder::<FullPrecisionSettings>::new();
    let bytes = recorder
        .record(model.into_record(), ())
        .map_err(|e| Error::Data(format!("cannot serialise the model: {e}")))?;
    let card_json = serde_json::to_vec_pretty(card)
        .map_err(|e| Error::Data(format!("cannot write the model card: {e}")))?;
    // The weights and tokenizer first: a model card names a complete model.
    store.upload_bytes(trial, WEIGHTS_ARTIFACT, &bytes)?;
    store.upload_bytes(trial, TOKENIZER_ARTIFACT, tokenizer.to_json()?.as_bytes())?;
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
    let tokenizer = match hpo_core::ArtifactMeta::find(trial, TOKENIZER_ARTIFACT) {
        Ok(_) => {
            let bytes = store.read(trial, TOKENIZER_ARTIFACT)?;
            let text = String::from_utf8(bytes).map_err(|e| {
                Error::Data(format!(
                    "trial #{}'s {TOKENIZER_ARTIFACT}: {e}",
                    trial.number
                ))
            })?;
            Some(TextTokenizer::from_json(&text)?)
        }
        Err(_) => None,
    };
    Ok(SavedModel {
        model,
        card,
        tokenizer,
    })
}

/// The files [`export_model`] writes.
pub const EXPORTED_FILES: [&str; 4] = [
    "model.mpk",
    "model.json",
    "model_config.json",
    "tokenizer.json",
];

/// Copies the model `trial` stored with [`save_model`] out of `store` into
/// `dir`, with what is needed to use it elsewhere: `model.mpk` (burn's
/// `NamedMpkFileRecorder` format at full precision), `model.json` (its
/// [`ModelCard`]), `model_config.json` and `tokenizer.json` (the stored
/// one; `tokenizer` for a model stored without one). Returns the card.
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
    if hpo_core::ArtifactMeta::find(trial, TOKENIZER_ARTIFACT).is_ok() {
        store.download(trial, TOKENIZER_ARTIFACT, dir.join("tokenizer.json"))?;
    } else {
        tokenizer.save(dir.join("tokenizer.json"))?;
    }
    Ok(card)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::Preset;

    #[test]
    fn a_model_and_its_tokenizer_come_back_as_stored() {
        let dir = std::env::temp_dir().join(format!("hpo-saved-model-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = ArtifactStore::open(&dir).unwrap();
        let texts = ["a happy day", "a sad day", "happy happy", "sad sad day"];
        let tokenizer = TextTokenizer::train(texts.iter().copied(), 60).unwrap();
        let config = ModelConfig::preset(Preset::Tiny, tokenizer.vocab_size(), 2);
        let device = Default::default();
        let model = config.init::<crate::Cpu>(&device).unwrap();
        let card = ModelCard {
            model: config,
            max_len: 16,
            classes: vec!["no".into(), "yes".into()],
            backbone: "tiny".into(),
        };
        let weights = |m: &BertClassifier<crate::Cpu>| {
            m.embeddings
                .token
                .weight
                .val()
                .into_data()
                .to_vec::<f32>()
                .unwrap()
        };
        // Parameters are drawn on first use: draw them before the copy saved.
        let before = weights(&model);
        let study = hpo_core::Study::builder().build().unwrap();
        let mut trial = study.ask().unwrap();
        save_model(&store, &mut trial, model.clone(), &tokenizer, &card).unwrap();
        let frozen = study.tell(trial, Ok(0.5)).unwrap();
        let back = load_model::<crate::Cpu>(&store, &frozen, &device).unwrap();
        assert_eq!(back.card, card);
        assert_eq!(
            back.tokenizer.unwrap().to_json().unwrap(),
            tokenizer.to_json().unwrap()
        );
        assert_eq!(before, weights(&back.model), "the same weights");
        let out = dir.join("export");
        export_model(&store, &frozen, &tokenizer, &out).unwrap();
        for file in EXPORTED_FILES {
            assert!(out.join(file).is_file(), "{file}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
