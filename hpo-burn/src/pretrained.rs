//! Starting from a local HuggingFace BERT, RoBERTa or DeBERTa-v3 checkpoint.
//!
//! A checkpoint directory holds `config.json` (dimensions, and `model_type`,
//! which picks the [`Family`]), `vocab.txt` or `tokenizer.json`, and
//! `model.safetensors`. Weights are read with burn's
//! store support ([`SafetensorsStore`]) through [`PyTorchToBurnAdapter`]
//! (which transposes linear weights and maps layer-norm `weight`/`bias` to
//! `gamma`/`beta`) and a key mapping from HuggingFace names to this crate's
//! module tree:
//!
//! | HuggingFace (`bert.`, `roberta.` or `deberta.` prefix optional) | hpo-burn |
//! | --- | --- |
//! | `embeddings.word_embeddings` | `embeddings.token` |
//! | `embeddings.position_embeddings` | `embeddings.position` |
//! | `embeddings.token_type_embeddings` | `embeddings.segment` |
//! | `embeddings.LayerNorm` | `embeddings.norm` |
//! | `encoder.layer.N.attention.self.{query,key,value}` | `encoder.layers.N.mha.{query,key,value}` |
//! | `encoder.layer.N.attention.output.dense` | `encoder.layers.N.mha.output` |
//! | `encoder.layer.N.attention.output.LayerNorm` | `encoder.layers.N.norm_1` |
//! | `encoder.layer.N.intermediate.dense` | `encoder.layers.N.pwff.linear_inner` |
//! | `encoder.layer.N.output.dense` | `encoder.layers.N.pwff.linear_outer` |
//! | `encoder.layer.N.output.LayerNorm` | `encoder.layers.N.norm_2` |
//! | `pooler.dense` | `pooler.dense` |
//! | `encoder.layer.N.attention.self.{query,key,value}_proj` (DeBERTa) | `encoder.layers.N.mha.{query,key,value}` |
//! | `encoder.rel_embeddings`, `encoder.LayerNorm` (DeBERTa) | `encoder.relative.{embeddings,norm}` |
//! | `classifier.dense` (RoBERTa's head) | `pooler.dense` |
//! | `classifier` / `classifier.out_proj` (with [`Checkpoint::load_with_classifier`]) | `head.output` |
//!
//! Loading is strict: every encoder, embedding and pooler tensor must be
//! present with the right shape, or loading fails naming the keys. Only the
//! classification head (`head.*`) starts fresh, and for RoBERTa the head's
//! dense layer (`pooler.*`) when the checkpoint has none. Checkpoint tensors
//! the model does not use (masked-LM heads, `position_ids`) are reported,
//! not loaded.
//!
//! A folder with `pytorch_model.bin` (and `spm.model` or `vocab.json` +
//! `merges.txt`) instead of `model.safetensors` and `tokenizer.json` is
//! refused with the conversion to run: `bench/convert_checkpoint.py`, which
//! writes both with transformers.

use crate::error::{Error, Result};
pub use crate::family::Family;
use crate::model::{BertClassifier, ModelConfig, Relative};
use crate::tokenize::TextTokenizer;
use burn::store::{ModuleSnapshot, PyTorchToBurnAdapter, SafetensorsStore};
use burn::tensor::backend::Backend;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The HuggingFace key mapping, applied in order (regex, replacement).
pub const KEY_MAPPING: [(&str, &str); 20] = [
    (r"^bert\.", ""),
    (r"^roberta\.", ""),
    (r"^deberta\.", ""),
    // Layer norms: PyTorch `weight`/`bias` (or TF-converted `gamma`/`beta`)
    // become burn's `gamma`/`beta` by name, so nothing is reported unused.
    (r"LayerNorm\.weight$", "LayerNorm.gamma"),
    (r"LayerNorm\.bias$", "LayerNorm.beta"),
    (r"^embeddings\.word_embeddings\.", "embeddings.token."),
    (
        r"^embeddings\.position_embeddings\.",
        "embeddings.position.",
    ),
    (
        r"^embeddings\.token_type_embeddings\.",
        "embeddings.segment.",
    ),
    (r"^embeddings\.LayerNorm\.", "embeddings.norm."),
    (
        r"^encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)\.",
        "encoder.layers.$1.mha.$2.",
    ),
    // DeBERTa's projections are named `query_proj`, `key_proj`, `value_proj`.
    (
        r"^encoder\.layer\.(\d+)\.attention\.self\.(query|key|value)_proj\.",
        "encoder.layers.$1.mha.$2.",
    ),
    (
        r"^encoder\.layer\.(\d+)\.attention\.output\.dense\.",
        "encoder.layers.$1.mha.output.",
    ),
    (
        r"^encoder\.layer\.(\d+)\.attention\.output\.LayerNorm\.",
        "encoder.layers.$1.norm_1.",
    ),
    (
        r"^encoder\.layer\.(\d+)\.intermediate\.dense\.",
        "encoder.layers.$1.pwff.linear_inner.",
    ),
    (
        r"^encoder\.layer\.(\d+)\.output\.dense\.",
        "encoder.layers.$1.pwff.linear_outer.",
    ),
    (
        r"^encoder\.layer\.(\d+)\.output\.LayerNorm\.",
        "encoder.layers.$1.norm_2.",
    ),
    (r"^pooler\.dense\.", "pooler.dense."),
    // RoBERTa's classification head: its dense layer is the pooler's place.
    (r"^classifier\.dense\.", "pooler.dense."),
    // DeBERTa's relative position embeddings and their layer norm.
    (
        r"^encoder\.rel_embeddings\.",
        "encoder.relative.embeddings.",
    ),
    (r"^encoder\.LayerNorm\.", "encoder.relative.norm."),
];

/// The classifier's output layer, mapped only by
/// [`Checkpoint::load_with_classifier`]: BERT's `classifier` and RoBERTa's
/// `classifier.out_proj`.
pub const CLASSIFIER_MAPPING: [(&str, &str); 2] = [
    (r"^classifier\.out_proj\.", "head.output."),
    (r"^classifier\.(weight|bias)$", "head.output.$1"),
];

/// The fields of a HuggingFace BERT or RoBERTa `config.json` this crate
/// uses.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HfBertConfig {
    /// The layout (`bert`, `roberta`); `bert` when absent.
    #[serde(default = "default_model_type")]
    pub model_type: String,
    /// The padding token's id (RoBERTa's positions start after it).
    #[serde(default)]
    pub pad_token_id: usize,
    /// Vocabulary size.
    pub vocab_size: usize,
    /// Hidden width.
    pub hidden_size: usize,
    /// Encoder layers.
    pub num_hidden_layers: usize,
    /// Attention heads.
    pub num_attention_heads: usize,
    /// Feed-forward width.
    pub intermediate_size: usize,
    /// Position embeddings.
    #[serde(default = "default_positions")]
    pub max_position_embeddings: usize,
    /// Segment vocabulary.
    #[serde(default = "default_type_vocab")]
    pub type_vocab_size: usize,
    /// Layer-norm epsilon.
    #[serde(default = "default_eps")]
    pub layer_norm_eps: f64,
    /// Hidden dropout.
    #[serde(default = "default_dropout")]
    pub hidden_dropout_prob: f64,
    /// Feed-forward activation; only `gelu` (exact) is supported.
    #[serde(default = "default_act")]
    pub hidden_act: String,
    /// DeBERTa: relative attention on.
    #[serde(default)]
    pub relative_attention: bool,
    /// DeBERTa: log buckets of relative distances (`-1`/`0`: none).
    #[serde(default)]
    pub position_buckets: i64,
    /// DeBERTa: the largest relative distance (`-1`: `max_position_embeddings`).
    #[serde(default)]
    pub max_relative_positions: i64,
    /// DeBERTa: `layer_norm` to normalise the relative embeddings.
    #[serde(default)]
    pub norm_rel_ebd: String,
    /// DeBERTa: the disentangled terms, `["p2c", "c2p"]` or `"p2c|c2p"`.
    #[serde(default)]
    pub pos_att_type: serde_json::Value,
    /// DeBERTa: position queries and keys through the content projections.
    #[serde(default)]
    pub share_att_key: bool,
    /// DeBERTa: absolute position embeddings added to the input (`false`
    /// in v3).
    #[serde(default = "default_true")]
    pub position_biased_input: bool,
    /// DeBERTa: the word embeddings' width, when it differs from
    /// `hidden_size` (not supported).
    #[serde(default)]
    pub embedding_size: Option<usize>,
    /// DeBERTa: the context pooler's activation.
    #[serde(default)]
    pub pooler_hidden_act: Option<String>,
}

fn default_true() -> bool {
    true
}

fn default_model_type() -> String {
    "bert".into()
}
fn default_positions() -> usize {
    512
}
fn default_type_vocab() -> usize {
    2
}
fn default_eps() -> f64 {
    1e-12
}
fn default_dropout() -> f64 {
    0.1
}
fn default_act() -> String {
    "gelu".into()
}

/// A local BERT, RoBERTa or DeBERTa-v3 checkpoint directory, possibly
/// truncated to its first layers.
#[derive(Debug, Clone)]
pub struct Checkpoint {
    /// The directory.
    pub dir: PathBuf,
    /// Its layout, from `config.json`'s `model_type`.
    pub family: Family,
    /// Its `config.json`, with `num_hidden_layers` the layers used (see
    /// [`truncated`](Self::truncated)).
    pub config: HfBertConfig,
    /// Encoder layers stored in the checkpoint.
    pub stored_layers: usize,
}

/// What loading did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadReport {
    /// Model tensors loaded from the checkpoint.
    pub loaded: Vec<String>,
    /// Model tensors left at their fresh initialisation (the head).
    pub fresh: Vec<String>,
    /// Checkpoint tensors the model has no place for.
    pub unused: Vec<String>,
}

impl Checkpoint {
    /// Opens `dir`, reading and checking `config.json`.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        let dir = dir.as_ref().to_path_buf();
        let fail = |message: String| Error::Checkpoint {
            path: dir.clone(),
            message,
        };
        let config_path = dir.join("config.json");
        let text = std::fs::read_to_string(&config_path).map_err(|e| Error::io(&config_path, e))?;
        let config: HfBertConfig = serde_json::from_str(&text)
            .map_err(|e| fail(format!("config.json is not a BERT or RoBERTa config: {e}")))?;
        let family =
            Family::from_model_type(&config.model_type).map_err(|e| fail(e.to_string()))?;
        if config.hidden_act != "gelu" {
            return Err(fail(format!(
                "hidden_act {:?} is not supported (only exact \"gelu\")",
                config.hidden_act
            )));
        }
        if !dir.join("model.safetensors").is_file() {
            return Err(fail(format!(
                "no model.safetensors{}: convert the folder with `python \
                 bench/convert_checkpoint.py {} OUT_DIR` (transformers writes model.safetensors \
                 and tokenizer.json), then use OUT_DIR",
                if dir.join("pytorch_model.bin").is_file() {
                    " (only pytorch_model.bin)"
                } else {
                    ""
                },
                dir.display()
            )));
        }
        if family == Family::Deberta {
            deberta_supported(&config).map_err(fail)?;
        }
        let positions = family.position_offset(config.pad_token_id);
        if config.max_position_embeddings <= positions {
            return Err(fail(format!(
                "max_position_embeddings {} leaves no position after the first {positions}",
                config.max_position_embeddings
            )));
        }
        Ok(Checkpoint {
            dir,
            family,
            stored_layers: config.num_hidden_layers,
            config,
        })
    }

    /// The same checkpoint using only its first `layers` encoder layers
    /// (embeddings, layers `0..layers` and the pooler are loaded; the later
    /// layers are left unread). A cheaper model from the same pretraining,
    /// as in layer-dropping studies of BERT (Sajjad et al. 2023, "On the
    /// effect of dropping layers of pre-trained transformer models").
    pub fn truncated(mut self, layers: usize) -> Result<Self> {
        if layers == 0 || layers > self.stored_layers {
            return Err(Error::config(format!(
                "cannot keep the first {layers} layers of {}: it has {} (choose 1..={})",
                self.dir.display(),
                self.stored_layers,
                self.stored_layers
            )));
        }
        self.config.num_hidden_layers = layers;
        Ok(self)
    }

    /// A name for records: the directory, with `[:k]` when truncated to `k` layers.
    pub fn name(&self) -> String {
        if self.config.num_hidden_layers < self.stored_layers {
            format!("{}[:{}]", self.dir.display(), self.config.num_hidden_layers)
        } else {
            self.dir.display().to_string()
        }
    }

    /// Trainable parameters of a classifier built on this checkpoint with a
    /// linear head over `num_classes` (heavy/light decisions compare these).
    pub fn num_params(&self, num_classes: usize) -> usize {
        self.model_config(num_classes).num_params()
    }

    /// A model config with the checkpoint's dimensions and a linear head.
    pub fn model_config(&self, num_classes: usize) -> ModelConfig {
        let c = &self.config;
        let mut m = ModelConfig::new(
            c.vocab_size,
            num_classes,
            c.num_hidden_layers,
            c.hidden_size,
            c.num_attention_heads,
            c.intermediate_size,
        )
        .with_max_position(c.max_position_embeddings)
        .with_dropout(c.hidden_dropout_prob);
        m.position_offset = self.family.position_offset(c.pad_token_id);
        m.type_vocab_size = c.type_vocab_size;
        if self.family == Family::Deberta {
            m.absolute_positions = c.position_biased_input;
            m.pooler_gelu = true;
            let buckets = usize::try_from(c.position_buckets).unwrap_or(0);
            let max_distance = usize::try_from(c.max_relative_positions)
                .ok()
                .filter(|&d| d > 0)
                .unwrap_or(c.max_position_embeddings);
            m.relative = c.relative_attention.then_some(Relative {
                buckets,
                max_distance,
                norm: c.norm_rel_ebd.split('|').any(|t| t.trim() == "layer_norm"),
            });
        }
        m.layer_norm_eps = c.layer_norm_eps;
        m
    }

    /// The longest sequence the checkpoint takes, special tokens included:
    /// its positions, less RoBERTa's offset (512 for the released BERT and
    /// RoBERTa checkpoints alike).
    pub fn max_len(&self) -> usize {
        let c = &self.config;
        c.max_position_embeddings - self.family.position_offset(c.pad_token_id)
    }

    /// The checkpoint's tokenizer.
    pub fn tokenizer(&self) -> Result<TextTokenizer> {
        TextTokenizer::from_dir(&self.dir)
    }

    /// Loads the checkpoint's weights into `model` (built from
    /// [`model_config`](Self::model_config), head dimensions free).
    pub fn load_into<B: Backend>(
        &self,
        model: BertClassifier<B>,
    ) -> Result<(BertClassifier<B>, LoadReport)> {
        self.load(model, false)
    }

    /// [`load_into`](Self::load_into), and the checkpoint's classifier
    /// output layer into the head (`model` must have no hidden head layer
    /// and the checkpoint's number of classes): a fine-tuned checkpoint
    /// whole, as the parity tests check it against transformers.
    pub fn load_with_classifier<B: Backend>(
        &self,
        model: BertClassifier<B>,
    ) -> Result<(BertClassifier<B>, LoadReport)> {
        self.load(model, true)
    }

    fn load<B: Backend>(
        &self,
        mut model: BertClassifier<B>,
        classifier: bool,
    ) -> Result<(BertClassifier<B>, LoadReport)> {
        let path = self.dir.join("model.safetensors");
        let fail = |message: String| Error::Checkpoint {
            path: path.clone(),
            message,
        };
        let mut store = SafetensorsStore::from_file(&path)
            .with_from_adapter(PyTorchToBurnAdapter)
            .allow_partial(true);
        let extra = if classifier {
            &CLASSIFIER_MAPPING[..]
        } else {
            &[]
        };
        for &(from, to) in KEY_MAPPING.iter().chain(extra) {
            store = store.with_key_remapping(from, to);
        }
        let result = model
            .load_from(&mut store)
            .map_err(|e| fail(format!("cannot read: {e}")))?;
        if !result.errors.is_empty() {
            let errors: Vec<String> = result.errors.iter().map(ToString::to_string).collect();
            return Err(fail(format!(
                "{} tensor(s) do not fit the model: {}",
                errors.len(),
                errors.join("; ")
            )));
        }
        let (fresh, missing): (Vec<String>, Vec<String>) = result
            .missing
            .iter()
            .map(|(p, _)| p.clone())
            .partition(|p| {
                self.family.may_start_fresh(p) && !(classifier && p.starts_with("head.output."))
            });
        if !missing.is_empty() {
            return Err(fail(format!(
                "{} model tensor(s) missing from the checkpoint: {}",
                missing.len(),
                missing.join(", ")
            )));
        }
        if !result.unused.is_empty() {
            tracing::debug!(unused = ?result.unused, "checkpoint tensors not used by the model");
        }
        Ok((
            model,
            LoadReport {
                loaded: result.applied.clone(),
                fresh,
                unused: result.unused.clone(),
            },
        ))
    }
}

/// The DeBERTa-v2/v3 settings hpo-burn's encoder implements (those of the
/// released v3 checkpoints): relative attention with both disentangled
/// terms through shared projections, the GELU context pooler, embeddings as
/// wide as the hidden states. Anything else is named.
fn deberta_supported(c: &HfBertConfig) -> std::result::Result<(), String> {
    let terms: Vec<String> = match &c.pos_att_type {
        serde_json::Value::Array(a) => a
            .iter()
            .filter_map(|v| v.as_str())
            .map(str::to_owned)
            .collect(),
        serde_json::Value::String(s) => s.split('|').map(|t| t.trim().to_owned()).collect(),
        _ => Vec::new(),
    };
    let mut problems = Vec::new();
    if c.relative_attention {
        let mut sorted = terms.clone();
        sorted.sort();
        if sorted != ["c2p", "p2c"] {
            problems.push(format!("pos_att_type {terms:?} (only [\"p2c\", \"c2p\"])"));
        }
        if !c.share_att_key {
            problems.push("share_att_key false (separate position projections)".to_owned());
        }
    }
    if c.embedding_size.is_some_and(|e| e != c.hidden_size) {
        problems.push("embedding_size other than hidden_size".to_owned());
    }
    if c.pooler_hidden_act.as_deref().is_some_and(|a| a != "gelu") {
        problems.push(format!(
            "pooler_hidden_act {:?} (only gelu)",
            c.pooler_hidden_act
        ));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "this DeBERTa configuration is not supported: {}",
            problems.join("; ")
        ))
    }
}
