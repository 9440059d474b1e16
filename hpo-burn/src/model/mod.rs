//! The BERT-style encoder classifier.
//!
//! Token, position and segment embeddings are summed and layer-normalised,
//! run through the post-norm [`Encoder`] (the original BERT layout:
//! `norm(x + attention(x))`, `norm(x + ffn(x))`, exact GELU), pooled
//! BERT style (`tanh(dense(h_CLS))`), then classified by a head of 0..n hidden
//! layers with dropout. Field names mirror the module tree that
//! [`crate::pretrained`] maps HuggingFace keys onto.

mod config;
pub mod cpu_ops;
#[cfg(any(feature = "cuda", test))]
mod cublas;
pub mod device_ops;
mod dropout;
mod encoder;
pub mod matmul;

pub use self::config::{ModelConfig, Pooling, Preset, Relative};
pub use self::dropout::{record_masks, replay_masks, Dropout, MaskTape};
pub use self::encoder::{
    Encoder, EncoderConfig, EncoderLayer, FeedForward, LayerInputs, RelativePositions,
    SelfAttention,
};

use self::cpu_ops::gelu;
use self::cpu_ops::{embed, layer_norm};
use crate::error::Result;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::tanh;
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor};

/// Token + position + segment embeddings, layer norm and dropout.
#[derive(Module, Debug)]
pub struct Embeddings<B: Backend> {
    /// Token embeddings `[vocab, hidden]`.
    pub token: Embedding<B>,
    /// Position embeddings `[max_position, hidden]` (none in DeBERTa-v3,
    /// whose positions are relative, in the encoder).
    pub position: Option<Embedding<B>>,
    /// Segment (token type) embeddings `[type_vocab, hidden]` (none when
    /// `type_vocab_size` is 0, as in DeBERTa-v3).
    pub segment: Option<Embedding<B>>,
    /// Layer norm over the sum.
    pub norm: LayerNorm<B>,
    /// The norm's epsilon (burn's `LayerNorm` keeps its own private).
    pub norm_eps: f64,
    /// The first position id (RoBERTa's start after its padding id).
    pub position_offset: usize,
    /// Dropout after the norm.
    pub dropout: Dropout,
}

/// The pooler: `tanh(dense(h_CLS))` (BERT; RoBERTa's head begins the
/// same), or `gelu(dense(h_CLS))` (DeBERTa's context pooler).
#[derive(Module, Debug)]
pub struct Pooler<B: Backend> {
    /// `[hidden, hidden]`.
    pub dense: Linear<B>,
    /// GELU instead of `tanh`.
    pub gelu: bool,
}

/// Classification head: hidden layers (GELU) with dropout, then the output layer.
#[derive(Module, Debug)]
pub struct Head<B: Backend> {
    /// Hidden layers, possibly none.
    pub hidden: Vec<Linear<B>>,
    /// Output layer to the classes.
    pub output: Linear<B>,
    /// Dropout before every layer.
    pub dropout: Dropout,
}

/// A BERT-style encoder with a classification head.
///
/// Generic over any burn [`Backend`]; training uses an autodiff backend and
/// evaluation its inner backend (`model.valid()`), which also disables dropout.
#[derive(Module, Debug)]
pub struct BertClassifier<B: Backend> {
    /// Embedding block.
    pub embeddings: Embeddings<B>,
    /// Encoder layers.
    pub encoder: Encoder<B>,
    /// Pooler over the `[CLS]` position.
    pub pooler: Pooler<B>,
    /// Classification head.
    pub head: Head<B>,
    /// Longest sequence the position embeddings cover.
    pub max_position: usize,
    /// Mean-pool instead of taking `[CLS]` (see [`Pooling`]).
    pub mean_pool: bool,
}

impl ModelConfig {
    /// Builds the model on `device` with freshly initialised weights
    /// (seed the backend first for reproducible initialisation).
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<BertClassifier<B>> {
        self.validate()?;
        let h = self.hidden;
        let embeddings = Embeddings {
            token: EmbeddingConfig::new(self.vocab_size, h).init(device),
            position: self
                .absolute_positions
                .then(|| EmbeddingConfig::new(self.max_position, h).init(device)),
            segment: (self.type_vocab_size > 0)
                .then(|| EmbeddingConfig::new(self.type_vocab_size, h).init(device)),
            norm: LayerNormConfig::new(h)
                .with_epsilon(self.layer_norm_eps)
                .init(device),
            norm_eps: self.layer_norm_eps,
            position_offset: self.position_offset,
            dropout: Dropout::new(self.dropout),
        };
        let encoder = EncoderConfig {
            width: h,
            intermediate: self.intermediate,
            heads: self.heads,
            layers: self.layers,
            dropout: self.dropout,
            layer_norm_eps: self.layer_norm_eps,
            relative: self.relative,
        }
        .init(device);
        let mut hidden = Vec::with_capacity(self.head_layers);
        let mut width_in = h;
        for _ in 0..self.head_layers {
            hidden.push(LinearConfig::new(width_in, self.head_width).init(device));
            width_in = self.head_width;
        }
        let head = Head {
            hidden,
            output: LinearConfig::new(width_in, self.num_classes).init(device),
            dropout: Dropout::new(self.head_dropout),
        };
        Ok(BertClassifier {
            embeddings,
            encoder,
            pooler: Pooler {
                dense: LinearConfig::new(h, h).init(device),
                gelu: self.pooler_gelu,
            },
            head,
            max_position: self.max_position,
            mean_pool: self.pooling == Pooling::Mean,
        })
    }
}

impl<B: Backend> BertClassifier<B> {
    /// The longest sequence the model takes: its positions less the first
    /// position id (RoBERTa's offset).
    pub fn max_len(&self) -> usize {
        self.max_position
            .saturating_sub(self.embeddings.position_offset)
    }

    /// The encoder's last hidden states `[batch, len, hidden]` (HuggingFace's
    /// `last_hidden_state`).
    ///
    /// `input_ids` and `segment_ids` are `[batch, len]`; `mask_pad` is true at
    /// padding positions. `len` must not exceed the model's `max_position`
    /// less its `position_offset`
    /// (the batcher truncates to it).
    pub fn encode(
        &self,
        input_ids: Tensor<B, 2, Int>,
        segment_ids: Tensor<B, 2, Int>,
        mask_pad: Tensor<B, 2, Bool>,
    ) -> Tensor<B, 3> {
        self.encoder
            .forward(self.embed(input_ids, segment_ids), mask_pad)
    }

    /// The embedding block's output `[batch, len, hidden]`, the first
    /// encoder layer's input: embeddings summed, normed and dropped out.
    pub fn embed(
        &self,
        input_ids: Tensor<B, 2, Int>,
        segment_ids: Tensor<B, 2, Int>,
    ) -> Tensor<B, 3> {
        let e = &self.embeddings;
        let offset = e.position_offset;
        let x = match (&e.position, &e.segment) {
            (Some(position), Some(segment)) => {
                embed(&e.token, position, segment, offset, input_ids, segment_ids)
            }
            (position, segment) => {
                let [batch, len] = input_ids.dims();
                let device = input_ids.device();
                let mut x = e.token.forward(input_ids);
                if let Some(position) = position {
                    let range = offset as i64..(offset + len) as i64;
                    let ids = Tensor::<B, 1, Int>::arange(range, &device)
                        .reshape([1, len])
                        .repeat_dim(0, batch);
                    x = x + position.forward(ids);
                }
                if let Some(segment) = segment {
                    x = x + segment.forward(segment_ids);
                }
                x
            }
        };
        e.dropout.forward(layer_norm(&e.norm, e.norm_eps, x))
    }

    /// The mean of the last hidden states over non-padding positions
    /// `[batch, hidden]` (sentence-transformers' mean pooling).
    pub fn mean_pool(hidden: Tensor<B, 3>, mask_pad: Tensor<B, 2, Bool>) -> Tensor<B, 2> {
        let [batch, len, width] = hidden.dims();
        let keep = mask_pad.bool_not().float().reshape([batch, len, 1]);
        let count = keep.clone().sum_dim(1).reshape([batch, 1]).clamp_min(1.0);
        (hidden * keep).sum_dim(1).reshape([batch, width]) / count
    }

    /// Class logits `[batch, classes]`; inputs as for [`encode`](Self::encode).
    pub fn forward(
        &self,
        input_ids: Tensor<B, 2, Int>,
        segment_ids: Tensor<B, 2, Int>,
        mask_pad: Tensor<B, 2, Bool>,
    ) -> Tensor<B, 2> {
        let x = self.encode(input_ids, segment_ids, mask_pad.clone());
        self.classify(x, mask_pad)
    }

    /// Class logits `[batch, classes]` from the encoder's last hidden states
    /// `[batch, len, hidden]`: pooled, then the pooler and the head.
    pub fn classify(&self, x: Tensor<B, 3>, mask_pad: Tensor<B, 2, Bool>) -> Tensor<B, 2> {
        let [batch, _, hidden] = x.dims();
        let pooled = if self.mean_pool {
            Self::mean_pool(x, mask_pad)
        } else {
            x.narrow(1, 0, 1).reshape([batch, hidden])
        };
        let dense = self.pooler.dense.forward(pooled);
        let mut h = if self.pooler.gelu {
            gelu(dense)
        } else {
            tanh(dense)
        };
        for layer in &self.head.hidden {
            h = gelu(layer.forward(self.head.dropout.forward(h)));
        }
        self.head.output.forward(self.head.dropout.forward(h))
    }
}
