//! The end of a study, for people: the best trial, its parameters, its
//! score on the held-out test split, and, when asked, its model copied out
//! with what is needed to use it elsewhere.

use super::held_out::{score_trial, HeldOut};
use super::saved_model::export_model;
use crate::data::Dataset;
use crate::error::{Error, Result};
use crate::task::TextTask;
use burn::tensor::backend::Backend;
use hpo_core::artifact::ArtifactStore;
use hpo_core::{FrozenTrial, Study};
use std::path::Path;
use std::sync::Arc;

/// Prints `study`'s best trial (validation macro-F1 and parameters, to 4
/// significant digits) and its macro-F1 and accuracy on `test` from the
/// model it stored in `store` with its tokenizer (see
/// [`score_best`](super::score_best); the
/// trials' models are [`super::fine_tune`]'s). With `save_to`, the model is
/// also copied there by [`export_model`], with `best.json`: the study,
/// trial, backbone, parameters at full precision, validation and test
/// scores, sequence length and classes.
///
/// `Ok(None)`, said in one line, when no trial completed or when the best
/// trial's model cannot be read back (a study whose trials stored none);
/// `Err` when saving fails.
pub fn report_best<B: Backend>(
    study: &Study,
    store: &ArtifactStore,
    test: &Dataset,
    device: &B::Device,
    save_to: Option<&Path>,
) -> Result<Option<HeldOut<B>>> {
    let Ok(best) = study.best_trial() else {
        println!("no trial completed");
        return Ok(None);
    };
    let value = best.value().unwrap_or(f64::NAN);
    println!(
        "best trial #{}: validation macro-F1 {value:.4}",
        best.number
    );
    for (name, value) in best.params() {
        println!("  {name} = {}", value.to_short_string());
    }
    let missing = |t: &FrozenTrial| {
        Error::Data(format!(
            "trial #{}'s model was stored without its tokenizer",
            t.number
        ))
    };
    let no_task = |t: &FrozenTrial| -> Result<Arc<TextTask>> { Err(missing(t)) };
    let held_out = match score_trial::<B>(Arc::clone(&best), store, no_task, test, device) {
        Ok(held_out) => held_out,
        Err(e) => {
            println!(
                "(trial #{}'s model cannot be read back from the artifact store {} ({e}), so it \
                 is not scored on the test split)",
                best.number,
                store.root().display()
            );
            return Ok(None);
        }
    };
    let metrics = &held_out.metrics;
    println!(
        "held-out test split ({} examples, seen by no trial): macro-F1 {:.4}, accuracy {:.4}",
        test.examples.len(),
        metrics.macro_f1,
        metrics.accuracy
    );
    if let Some(dir) = save_to {
        let Some(tokenizer) = &held_out.saved.tokenizer else {
            return Err(missing(&held_out.trial));
        };
        let card = export_model(store, &held_out.trial, tokenizer, dir)?;
        let params: serde_json::Map<String, serde_json::Value> = (held_out.trial.params().iter())
            .map(|(k, v)| (k.clone(), v.to_json_value()))
            .collect();
        let record = serde_json::json!({
            "study": study.name(),
            "trial": held_out.trial.number,
            "backbone": card.backbone,
            "params": params,
            "validation_macro_f1": held_out.trial.value(),
            "test_macro_f1": metrics.macro_f1,
            "test_accuracy": metrics.accuracy,
            "max_len": card.max_len,
            "classes": card.classes,
        });
        let path = dir.join("best.json");
        let text = serde_json::to_string_pretty(&record)
            .map_err(|e| Error::Data(format!("cannot write {}: {e}", path.display())))?;
        std::fs::write(&path, text).map_err(|e| Error::io(&path, e))?;
        println!("saved the best trial's model to {}", dir.display());
    }
    Ok(Some(held_out))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::data::{parse_tsv, TsvSpec};
    use crate::experiment::saved_model::{save_model, ModelCard, EXPORTED_FILES};
    use crate::model::{ModelConfig, Preset};
    use crate::tokenize::TextTokenizer;
    use hpo_core::{Direction, TrialError};

    /// The best of two stored trials is scored on the test split and saved
    /// with `best.json`; a study with no complete trial reports nothing.
    #[test]
    fn the_best_stored_model_is_scored_and_saved() {
        let dir = std::env::temp_dir().join(format!("hpo-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let store = ArtifactStore::open(dir.join("store")).unwrap();
        let tsv =
            "text\tlabel\na happy day\tpos\na sad day\tneg\nhappy happy\tpos\nsad sad day\tneg\n";
        let spec = TsvSpec::single("text", "label");
        let test = parse_tsv(tsv, &spec, Path::new("test.tsv")).unwrap();
        let texts = ["a happy day", "a sad day", "happy happy", "sad sad day"];
        let tokenizer = TextTokenizer::train(texts.iter().copied(), 60).unwrap();
        let config = ModelConfig::preset(Preset::Tiny, tokenizer.vocab_size(), 2);
        let card = ModelCard {
            model: config.clone(),
            max_len: 16,
            classes: test.classes.clone(),
            backbone: "tiny".into(),
        };
        let device = Default::default();
        let study = hpo_core::Study::builder()
            .direction(Direction::Maximize)
            .build()
            .unwrap();
        let none = report_best::<crate::Cpu>(&study, &store, &test, &device, None).unwrap();
        assert!(none.is_none(), "no trial completed");
        for value in [0.4, 0.7] {
            let mut trial = study.ask().unwrap();
            trial.suggest_float("lr", 1e-5, 1e-3).unwrap();
            let model = config.init::<crate::Cpu>(&device).unwrap();
            save_model(&store, &mut trial, model, &tokenizer, &card).unwrap();
            study.tell(trial, Ok(value)).unwrap();
        }
        let failed = study.ask().unwrap();
        study
            .tell(failed, Err::<f64, _>(TrialError::Failed("boom".into())))
            .unwrap();
        let out = dir.join("best");
        let held_out = report_best::<crate::Cpu>(&study, &store, &test, &device, Some(&out))
            .unwrap()
            .unwrap();
        assert_eq!(held_out.trial.number, 1, "the better of the two");
        assert!((0.0..=1.0).contains(&held_out.metrics.macro_f1));
        for file in EXPORTED_FILES {
            assert!(out.join(file).is_file(), "{file}");
        }
        let record: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("best.json")).unwrap()).unwrap();
        assert_eq!(record["trial"], 1);
        assert_eq!(record["validation_macro_f1"], 0.7);
        assert_eq!(record["test_macro_f1"], held_out.metrics.macro_f1);
        assert_eq!(record["classes"], serde_json::json!(test.classes));
        assert!(record["params"]["lr"].as_f64().is_some(), "{record}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
