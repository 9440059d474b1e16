//! Model sizes: presets and explicit dimensions.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Named encoder sizes, from Google's BERT miniatures (Turc et al. 2019) up to
/// BERT-large.
///
/// | preset | layers | hidden | heads | intermediate |
/// | --- | --- | --- | --- | --- |
/// | tiny | 2 | 128 | 2 | 512 |
/// | mini | 4 | 256 | 4 | 1024 |
/// | small | 4 | 512 | 8 | 2048 |
/// | medium | 8 | 512 | 8 | 2048 |
/// | base | 12 | 768 | 12 | 3072 |
/// | large | 24 | 1024 | 16 | 4096 |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// 2 layers, hidden 128.
    Tiny,
    /// 4 layers, hidden 256.
    Mini,
    /// 4 layers, hidden 512.
    Small,
    /// 8 layers, hidden 512.
    Medium,
    /// 12 layers, hidden 768 (BERT-base).
    Base,
    /// 24 layers, hidden 1024 (BERT-large); the "heavy" model.
    Large,
}

impl Preset {
    /// Every preset, smallest first.
    pub const ALL: [Preset; 6] = [
        Preset::Tiny,
        Preset::Mini,
        Preset::Small,
        Preset::Medium,
        Preset::Base,
        Preset::Large,
    ];

    /// The lowercase name used in configs and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Tiny => "tiny",
            Preset::Mini => "mini",
            Preset::Small => "small",
            Preset::Medium => "medium",
            Preset::Base => "base",
            Preset::Large => "large",
        }
    }

    /// `(layers, hidden, heads, intermediate)`.
    pub fn dims(self) -> (usize, usize, usize, usize) {
        match self {
            Preset::Tiny => (2, 128, 2, 512),
            Preset::Mini => (4, 256, 4, 1024),
            Preset::Small => (4, 512, 8, 2048),
            Preset::Medium => (8, 512, 8, 2048),
            Preset::Base => (12, 768, 12, 3072),
            Preset::Large => (24, 1024, 16, 4096),
        }
    }

    /// Whether this is a "heavy" model in the seed study's sense (large).
    pub fn is_heavy(self) -> bool {
        matches!(self, Preset::Large)
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "heavy" => Ok(Preset::Large),
            other => Preset::ALL
                .into_iter()
                .find(|p| p.name() == other)
                .ok_or_else(|| {
                    Error::config(format!(
                        "unknown model preset {s:?}; expected one of tiny, mini, small, medium, base, large (heavy)"
                    ))
                }),
        }
    }
}

/// How the encoder's output becomes one vector per sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Pooling {
    /// The `[CLS]` position (BERT's pooler input).
    #[default]
    Cls,
    /// The mean over non-padding positions; learns much faster from scratch.
    Mean,
}

/// DeBERTa's disentangled attention: each layer's scores gain a
/// content-to-position and a position-to-content term from shared relative
/// position embeddings (`2 · span` rows), projected by the layer's own query
/// and key projections (DeBERTa-v3's `share_att_key`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relative {
    /// Log-bucketed distances (`position_buckets`): the span is this many
    /// buckets; 0 for raw distances, whose span is `max_distance`.
    pub buckets: usize,
    /// The largest distance the buckets cover (`max_relative_positions`).
    pub max_distance: usize,
    /// A layer norm over the relative embeddings (`norm_rel_ebd`).
    pub norm: bool,
}

impl Relative {
    /// Relative embeddings on each side of distance 0.
    pub fn span(&self) -> usize {
        if self.buckets > 0 {
            self.buckets
        } else {
            self.max_distance
        }
    }
}

fn yes() -> bool {
    true
}

/// Everything needed to build a [`BertClassifier`](super::BertClassifier).
///
/// Built from a [`Preset`] or explicit dimensions, then adjusted with the
/// `with_*` methods; [`ModelConfig::init`](super::BertClassifier) builds the
/// module on a device, burn style.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    /// Token vocabulary size.
    pub vocab_size: usize,
    /// Position embeddings (rows of the table).
    pub max_position: usize,
    /// The first position id: 0, or RoBERTa's `pad_token_id + 1` (see
    /// [`crate::family::Family`]); the longest sequence is
    /// [`max_len`](Self::max_len).
    #[serde(default)]
    pub position_offset: usize,
    /// Number of segment (token type) ids; 2 for (criterion, text) pairs.
    pub type_vocab_size: usize,
    /// Encoder layers.
    pub layers: usize,
    /// Hidden width (d_model).
    pub hidden: usize,
    /// Attention heads; must divide `hidden`.
    pub heads: usize,
    /// Feed-forward width.
    pub intermediate: usize,
    /// Dropout in the embeddings and encoder.
    pub dropout: f64,
    /// Layer-norm epsilon (BERT: 1e-12).
    pub layer_norm_eps: f64,
    /// Hidden layers in the classification head (0 = linear head on the pooled output).
    pub head_layers: usize,
    /// Width of each hidden head layer.
    pub head_width: usize,
    /// Dropout before each head layer.
    pub head_dropout: f64,
    /// Output classes.
    pub num_classes: usize,
    /// Pooling before the pooler's dense layer.
    #[serde(default)]
    pub pooling: Pooling,
    /// Absolute position embeddings added to the tokens' (BERT, RoBERTa;
    /// not DeBERTa-v3, whose positions are only relative).
    #[serde(default = "yes")]
    pub absolute_positions: bool,
    /// DeBERTa's disentangled attention, if any.
    #[serde(default)]
    pub relative: Option<Relative>,
    /// The pooler's activation is the exact GELU (DeBERTa's context
    /// pooler) instead of `tanh` (BERT, RoBERTa).
    #[serde(default)]
    pub pooler_gelu: bool,
}

impl ModelConfig {
    /// A config with explicit encoder dimensions and a linear head.
    pub fn new(
        vocab_size: usize,
        num_classes: usize,
        layers: usize,
        hidden: usize,
        heads: usize,
        intermediate: usize,
    ) -> Self {
        ModelConfig {
            vocab_size,
            max_position: 512,
            position_offset: 0,
            type_vocab_size: 2,
            layers,
            hidden,
            heads,
            intermediate,
            dropout: 0.1,
            layer_norm_eps: 1e-12,
            head_layers: 0,
            head_width: hidden,
            head_dropout: 0.1,
            num_classes,
            pooling: Pooling::Cls,
            absolute_positions: true,
            relative: None,
            pooler_gelu: false,
        }
    }

    /// The longest sequence the model takes: its positions from
    /// `position_offset` on.
    pub fn max_len(&self) -> usize {
        self.max_position.saturating_sub(self.position_offset)
    }

    /// Sets the pooling.
    pub fn with_pooling(mut self, pooling: Pooling) -> Self {
        self.pooling = pooling;
        self
    }

    /// A config from a preset.
    pub fn preset(preset: Preset, vocab_size: usize, num_classes: usize) -> Self {
        let (layers, hidden, heads, intermediate) = preset.dims();
        ModelConfig::new(vocab_size, num_classes, layers, hidden, heads, intermediate)
    }

    /// Sets the classification head: `layers` hidden layers of `width`.
    pub fn with_head(mut self, layers: usize, width: usize) -> Self {
        self.head_layers = layers;
        self.head_width = width;
        self
    }

    /// Sets the encoder dropout.
    pub fn with_dropout(mut self, p: f64) -> Self {
        self.dropout = p;
        self
    }

    /// Sets the head dropout.
    pub fn with_head_dropout(mut self, p: f64) -> Self {
        self.head_dropout = p;
        self
    }

    /// Sets the longest sequence the position embeddings cover.
    pub fn with_max_position(mut self, n: usize) -> Self {
        self.max_position = n;
        self
    }

    /// Number of trainable parameters (exact for this architecture).
    pub fn num_params(&self) -> usize {
        let h = self.hidden;
        let positions = if self.absolute_positions {
            self.max_position
        } else {
            0
        };
        let relative = self
            .relative
            .map_or(0, |r| 2 * r.span() * h + if r.norm { 2 * h } else { 0 });
        let embeddings =
            (self.vocab_size + positions + self.type_vocab_size) * h + 2 * h + relative;
        let layer = 4 * (h * h + h)
            + (h * self.intermediate + self.intermediate)
            + (self.intermediate * h + h)
            + 4 * h;
        let pooler = h * h + h;
        let mut head = 0;
        let mut width_in = h;
        for _ in 0..self.head_layers {
            head += width_in * self.head_width + self.head_width;
            width_in = self.head_width;
        }
        head += width_in * self.num_classes + self.num_classes;
        embeddings + self.layers * layer + pooler + head
    }

    /// Checks the dimensions; every problem is named.
    pub fn validate(&self) -> Result<()> {
        let mut problems = Vec::new();
        for (name, v) in [
            ("vocab_size", self.vocab_size),
            ("max_position", self.max_position),
            ("layers", self.layers),
            ("hidden", self.hidden),
            ("heads", self.heads),
            ("intermediate", self.intermediate),
            ("num_classes", self.num_classes),
        ] {
            if v == 0 {
                problems.push(format!("{name} must be positive"));
            }
        }
        if self.heads > 0 && !self.hidden.is_multiple_of(self.heads) {
            problems.push(format!(
                "hidden {} is not divisible by heads {}",
                self.hidden, self.heads
            ));
        }
        if let Some(r) = self.relative {
            if r.span() == 0 {
                problems.push("relative attention needs buckets or a max_distance".into());
            }
        }
        if self.head_layers > 0 && self.head_width == 0 {
            problems.push("head_width must be positive when head_layers > 0".into());
        }
        for (name, p) in [
            ("dropout", self.dropout),
            ("head_dropout", self.head_dropout),
        ] {
            if !(0.0..1.0).contains(&p) {
                problems.push(format!("{name} {p} is outside [0, 1)"));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::config(problems.join("; ")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_and_heavy_is_large() {
        assert_eq!("heavy".parse::<Preset>().unwrap(), Preset::Large);
        assert_eq!("Mini".parse::<Preset>().unwrap(), Preset::Mini);
        let err = "huge".parse::<Preset>().unwrap_err().to_string();
        assert!(err.contains("huge"), "{err}");
        assert!(Preset::Large.is_heavy() && !Preset::Base.is_heavy());
    }

    #[test]
    fn base_preset_has_bert_base_parameter_count() {
        // BERT-base uncased: 30522 vocab, 512 positions; ~109.5M parameters
        // with the pooler (110M in the paper).
        let n = ModelConfig::preset(Preset::Base, 30522, 2).num_params();
        assert!((109_000_000..110_500_000).contains(&n), "{n}");
    }

    #[test]
    fn validate_names_every_problem() {
        let mut c = ModelConfig::new(100, 2, 2, 130, 4, 64);
        c.dropout = 1.5;
        let err = c.validate().unwrap_err().to_string();
        assert!(
            err.contains("not divisible") && err.contains("dropout 1.5"),
            "{err}"
        );
    }
}
