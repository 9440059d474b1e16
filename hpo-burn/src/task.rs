//! A text-classification task ready for trials: split data, a tokenizer,
//! optionally a pretrained checkpoint, and the per-trial run.

use crate::batch::EncodedExample;
use crate::data::{Dataset, Text};
use crate::error::{Error, Result};
use crate::memory::MemoryGuard;
use crate::model::{BertClassifier, ModelConfig, Pooling, Preset};
use crate::pretrained::Checkpoint;
use crate::tokenize::TextTokenizer;
use crate::train::{evaluate, FitReport, Metrics, TrainConfig, TrainData, Trainer, TrialSink};
use burn::tensor::backend::{AutodiffBackend, Backend};
use serde::{Deserialize, Serialize};

/// Vocabulary size trained when no checkpoint is given.
pub const DEFAULT_TRAINED_VOCAB: usize = 8000;

/// Train and validation data with the tokenizer they are encoded with.
#[derive(Debug, Clone)]
pub struct TextTask {
    /// Training split.
    pub train: Dataset,
    /// Validation split.
    pub valid: Dataset,
    /// The tokenizer (the checkpoint's, or trained on `train`).
    pub tokenizer: TextTokenizer,
    /// The pretrained starting point, if any.
    pub checkpoint: Option<Checkpoint>,
    /// Every training example's length in tokens, untruncated (computed once).
    train_lengths: std::sync::OnceLock<Vec<usize>>,
}

impl TextTask {
    /// A task on `train` / `valid`; without a checkpoint a WordPiece
    /// vocabulary of up to `vocab_size` is trained on the training texts only.
    pub fn new(
        train: Dataset,
        valid: Dataset,
        checkpoint: Option<Checkpoint>,
        vocab_size: usize,
    ) -> Result<Self> {
        if train.classes != valid.classes {
            return Err(Error::Data("train and validation classes differ".into()));
        }
        let tokenizer = match &checkpoint {
            Some(c) => c.tokenizer()?,
            None => {
                let texts = train.examples.iter().flat_map(|e| match &e.text {
                    Text::Single(t) => vec![t.as_str()],
                    Text::Pair { criterion, text } => vec![criterion.as_str(), text.as_str()],
                });
                TextTokenizer::train(texts.collect::<Vec<_>>().into_iter(), vocab_size)?
            }
        };
        Ok(TextTask {
            train,
            valid,
            tokenizer,
            checkpoint,
            train_lengths: std::sync::OnceLock::new(),
        })
    }

    /// The longest training example in tokens (special tokens included,
    /// before truncation): batches are padded to their own longest
    /// sequence, so a run at `max_len` never sees a batch longer than
    /// `max_len.min(longest_train_tokens())`, and that is what its memory
    /// is sized for.
    pub fn longest_train_tokens(&self) -> Result<usize> {
        Ok(self
            .train_token_lengths()?
            .iter()
            .copied()
            .max()
            .unwrap_or(0))
    }

    /// Every training example's length in tokens (special tokens included,
    /// before truncation), in the split's order: what the memory estimate
    /// and [`crate::experiment::Lengths`] read. Tokenizes the split once,
    /// then remembers.
    pub fn train_token_lengths(&self) -> Result<&[usize]> {
        if let Some(lengths) = self.train_lengths.get() {
            return Ok(lengths);
        }
        // Long enough that nothing is cut: the length itself is wanted.
        let lengths = self
            .encode_dataset(&self.train, 1 << 20)?
            .iter()
            .map(EncodedExample::len)
            .collect();
        Ok(self.train_lengths.get_or_init(|| lengths))
    }

    /// Tokenizes both splits at `max_len`.
    pub fn encode(&self, max_len: usize) -> Result<(Vec<EncodedExample>, Vec<EncodedExample>)> {
        Ok((
            self.encode_dataset(&self.train, max_len)?,
            self.encode_dataset(&self.valid, max_len)?,
        ))
    }

    /// Tokenizes any data set (for example a held-out test split that the
    /// task itself does not hold) with this task's tokenizer.
    pub fn encode_dataset(&self, data: &Dataset, max_len: usize) -> Result<Vec<EncodedExample>> {
        encode_with(&self.tokenizer, data, max_len)
    }

    /// Metrics of a trained (inference) `model` on `data`, encoded at
    /// `max_len` with this task's tokenizer. `data` must have the task's classes.
    pub fn evaluate<B: Backend>(
        &self,
        model: &BertClassifier<B>,
        data: &Dataset,
        max_len: usize,
        device: &B::Device,
    ) -> Result<Metrics> {
        evaluate_with(
            &self.tokenizer,
            &self.train.classes,
            model,
            data,
            max_len,
            device,
        )
    }
}

/// `data` tokenized with `tokenizer`, cut at `max_len`.
fn encode_with(
    tokenizer: &TextTokenizer,
    data: &Dataset,
    max_len: usize,
) -> Result<Vec<EncodedExample>> {
    let texts: Vec<&Text> = data.examples.iter().map(|e| &e.text).collect();
    Ok(tokenizer
        .encode_all(&texts, max_len)?
        .into_iter()
        .zip(&data.examples)
        .map(|(encoded, e)| EncodedExample {
            encoded,
            label: e.label,
        })
        .collect())
}

/// Metrics of a trained (inference) `model` on `data`, encoded at
/// `max_len` with the `tokenizer` it was trained with. `data` must have the
/// model's `classes`.
pub(crate) fn evaluate_with<B: Backend>(
    tokenizer: &TextTokenizer,
    classes: &[String],
    model: &BertClassifier<B>,
    data: &Dataset,
    max_len: usize,
    device: &B::Device,
) -> Result<Metrics> {
    if data.classes != classes {
        return Err(Error::Data(format!(
            "evaluation classes {:?} differ from the model's {classes:?}",
            data.classes
        )));
    }
    let examples = encode_with(tokenizer, data, max_len.min(model.max_len()))?;
    evaluate(
        model,
        &examples,
        tokenizer.pad_id(),
        classes.len(),
        64,
        device,
    )
}

/// The model-side choices of one trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpec {
    /// Encoder size (ignored when the task has a checkpoint: its dimensions win).
    pub preset: Preset,
    /// Hidden layers in the head.
    pub head_layers: usize,
    /// Width of the head's hidden layers.
    pub head_width: usize,
    /// Dropout in encoder and head.
    pub dropout: f64,
    /// Pooling of the encoder output.
    pub pooling: Pooling,
    /// Training hyperparameters.
    pub train: TrainConfig,
}

/// The tiny preset, no hidden head layer, dropout 0.1, `[CLS]` pooling and
/// [`TrainConfig::default`]: set what a trial chooses, `..RunSpec::default()`
/// for the rest.
impl Default for RunSpec {
    fn default() -> Self {
        RunSpec {
            preset: Preset::Tiny,
            head_layers: 0,
            head_width: 0,
            dropout: 0.1,
            pooling: Pooling::Cls,
            train: TrainConfig::default(),
        }
    }
}

impl RunSpec {
    /// The model config this spec builds for `task`.
    pub fn model_config(&self, task: &TextTask) -> ModelConfig {
        let classes = task.train.classes.len();
        let base = match &task.checkpoint {
            Some(c) => c.model_config(classes),
            None => ModelConfig::preset(self.preset, task.tokenizer.vocab_size(), classes)
                .with_max_position(self.train.max_len.max(128)),
        };
        base.with_head(self.head_layers, self.head_width)
            .with_dropout(self.dropout)
            .with_head_dropout(self.dropout)
            .with_pooling(self.pooling)
    }

    /// A name for the model in records.
    pub fn model_name(&self, task: &TextTask) -> String {
        match &task.checkpoint {
            Some(c) => c.name(),
            None => self.preset.name().to_string(),
        }
    }
}

/// Builds the model (from the checkpoint when the task has one), tokenizes,
/// and trains, reporting to `sink`. The return value's `best_macro_f1` is
/// the trial's objective.
pub fn run<B: AutodiffBackend, S: TrialSink>(
    task: &TextTask,
    spec: &RunSpec,
    guard: MemoryGuard,
    device: &B::Device,
    sink: &mut S,
) -> Result<FitReport> {
    Ok(run_with_model::<B, S>(task, spec, guard, device, sink)?.1)
}

/// [`run`], also returning the trained model at its best epoch (to evaluate
/// on a held-out split or to save with a burn recorder).
pub fn run_with_model<B: AutodiffBackend, S: TrialSink>(
    task: &TextTask,
    spec: &RunSpec,
    guard: MemoryGuard,
    device: &B::Device,
    sink: &mut S,
) -> Result<(BertClassifier<B>, FitReport)> {
    let model_config = spec.model_config(task);
    B::seed(device, spec.train.seed);
    let mut model = model_config.init::<B>(device)?;
    if let Some(c) = &task.checkpoint {
        model = c.load_into(model)?.0;
    }
    let (train, valid) = task.encode(spec.train.max_len.min(model_config.max_len()))?;
    let trainer = Trainer::<B>::new(
        spec.train.clone(),
        model_config,
        spec.model_name(task),
        device.clone(),
    )
    .with_guard(guard);
    let data = TrainData {
        train: &train,
        valid: &valid,
        pad_id: task.tokenizer.pad_id(),
        classes: task.train.classes.len(),
    };
    trainer.fit(model, data, sink)
}
