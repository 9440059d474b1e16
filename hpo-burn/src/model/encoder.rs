//! BERT's encoder layers, written out for the CPU's sake.
//!
//! The layout is the original BERT one (post-norm): `norm_1(x +
//! dropout(attention(x)))`, then `norm_2(x + dropout(ffn(x)))`, the
//! feed-forward network `linear_outer(dropout(gelu(linear_inner(x))))` with
//! the exact GELU, attention dropout on the attention probabilities
//! (dropout masks drawn in bulk on the CPU: [`Dropout`]). Module
//! and field names are those of burn's `TransformerEncoder`, so records and
//! the checkpoint mapping of [`crate::pretrained`] are unchanged.
//!
//! Why not burn's `TransformerEncoder`: it hands every linear layer a
//! `[batch, len, width]` tensor, which burn multiplies as `batch` separate
//! `[len, width]` products; the weight gradient is then `batch` products
//! with an inner dimension of `len` (a few dozen tokens), summed afterwards
//! over a `[batch, width, width_out]` buffer. Here the hidden states stay a
//! `[batch · len, width]` matrix between layers, so each linear layer is one
//! product forward, one for the input gradient and one for the weight
//! gradient (inner dimension `batch · len`), with no per-example buffer to
//! sum. Only attention splits the matrix into sequences and heads. (burn's
//! attention also applies its dropout to the scores before the softmax;
//! BERT applies it to the probabilities, as here.)

use super::config::Relative;
use super::cpu_ops::{attention_probs, gelu, layer_norm, linear, merge_heads, split_heads};
use super::matmul::matmul;
use super::Dropout;
use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor, TensorData};

/// Sizes of an [`Encoder`].
#[derive(Debug, Clone, Copy)]
pub struct EncoderConfig {
    /// Hidden width.
    pub width: usize,
    /// Feed-forward inner width.
    pub intermediate: usize,
    /// Attention heads (`width` must be a multiple).
    pub heads: usize,
    /// Number of layers.
    pub layers: usize,
    /// Dropout probability (residuals, feed-forward, attention probabilities).
    pub dropout: f64,
    /// Layer norm epsilon.
    pub layer_norm_eps: f64,
    /// DeBERTa's disentangled attention, if any.
    pub relative: Option<Relative>,
}

impl EncoderConfig {
    /// Builds the encoder on `device` with freshly initialised weights.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Encoder<B> {
        let norm = || {
            LayerNormConfig::new(self.width)
                .with_epsilon(self.layer_norm_eps)
                .init(device)
        };
        let dropout = || Dropout::new(self.dropout);
        let square = || LinearConfig::new(self.width, self.width).init(device);
        let layers = (0..self.layers)
            .map(|_| EncoderLayer {
                mha: SelfAttention {
                    query: square(),
                    key: square(),
                    value: square(),
                    output: square(),
                    dropout: dropout(),
                    n_heads: self.heads,
                },
                pwff: FeedForward {
                    linear_inner: LinearConfig::new(self.width, self.intermediate).init(device),
                    linear_outer: LinearConfig::new(self.intermediate, self.width).init(device),
                    dropout: dropout(),
                },
                norm_1: norm(),
                norm_2: norm(),
                norm_eps: self.layer_norm_eps,
                dropout: dropout(),
            })
            .collect();
        let relative = self.relative.map(|r| RelativePositions {
            embeddings: EmbeddingConfig::new(2 * r.span(), self.width).init(device),
            norm: r.norm.then(norm),
            norm_eps: self.layer_norm_eps,
            buckets: r.buckets,
            max_distance: r.max_distance,
        });
        Encoder { layers, relative }
    }
}

/// A stack of post-norm BERT layers: each linear layer multiplies all the
/// batch's tokens as one `[batch · len, width]` matrix.
#[derive(Module, Debug)]
pub struct Encoder<B: Backend> {
    /// The layers, first to last.
    pub layers: Vec<EncoderLayer<B>>,
    /// DeBERTa's relative position embeddings, shared by every layer.
    pub relative: Option<RelativePositions<B>>,
}

/// DeBERTa's relative positions: embeddings of (log-bucketed) distances
/// between a query and a key, shared by every layer, which projects them
/// with its own query and key projections (`share_att_key`).
#[derive(Module, Debug)]
pub struct RelativePositions<B: Backend> {
    /// `[2 · span, width]`: distances `-span..span`.
    pub embeddings: Embedding<B>,
    /// Layer norm over the embeddings (`norm_rel_ebd = "layer_norm"`).
    pub norm: Option<LayerNorm<B>>,
    /// The norm's epsilon.
    pub norm_eps: f64,
    /// Log buckets (0: raw distances).
    pub buckets: usize,
    /// The largest distance the buckets cover.
    pub max_distance: usize,
}

impl<B: Backend> RelativePositions<B> {
    fn span(&self) -> usize {
        Relative {
            buckets: self.buckets,
            max_distance: self.max_distance,
            norm: false,
        }
        .span()
    }

    /// The (normed) embeddings and, for a sequence of `len`, the row of
    /// them each (query, key) pair reads, as gather indices `[batch,
    /// heads, len, len]` for content-to-position and, transposed, for
    /// position-to-content.
    fn prepare(&self, batch: usize, heads: usize, len: usize) -> RelativeInputs<B> {
        let weight = self.embeddings.weight.val();
        let device = weight.device();
        let table = match &self.norm {
            Some(norm) => layer_norm(norm, self.norm_eps, weight),
            None => weight,
        };
        let span = self.span();
        let index = relative_index(len, self.buckets, self.max_distance, span);
        let transposed: Vec<i64> = (0..len * len)
            .map(|t| index[(t % len) * len + t / len])
            .collect();
        let gather = |v: Vec<i64>| {
            Tensor::<B, 2, Int>::from_data(TensorData::new(v, [len, len]), &device)
                .reshape([1, 1, len, len])
                .repeat_dim(0, batch)
                .repeat_dim(1, heads)
        };
        RelativeInputs {
            table,
            c2p: gather(index),
            p2c: gather(transposed),
        }
    }
}

/// What every layer's disentangled attention reads: the relative
/// embeddings and the gather indices of [`RelativePositions::prepare`].
#[derive(Debug, Clone)]
struct RelativeInputs<B: Backend> {
    table: Tensor<B, 2>,
    c2p: Tensor<B, 4, Int>,
    p2c: Tensor<B, 4, Int>,
}

/// DeBERTa's relative position of query `i` and key `j` as a row of the
/// `2 · span` embeddings: `bucket(i - j) + span`, clamped to the table.
/// Distances below half the buckets are kept; longer ones are bucketed on
/// a log scale up to `max_distance` (transformers' `make_log_bucket_position`,
/// computed in `f32` as there).
pub fn relative_index(len: usize, buckets: usize, max_distance: usize, span: usize) -> Vec<i64> {
    let bucket = |rel: i64| -> i64 {
        if buckets == 0 {
            return rel;
        }
        let mid = (buckets / 2) as i64;
        let abs = if rel < mid && rel > -mid {
            mid - 1
        } else {
            rel.abs()
        };
        if abs <= mid {
            return rel;
        }
        let (midf, absf) = (mid as f32, abs as f32);
        let ratio = ((max_distance as f32 - 1.0) / midf).ln();
        let log_pos = ((absf / midf).ln() / ratio * (midf - 1.0)).ceil() + midf;
        log_pos as i64 * rel.signum()
    };
    let top = 2 * span as i64 - 1;
    let mut index = Vec::with_capacity(len * len);
    for i in 0..len as i64 {
        for j in 0..len as i64 {
            index.push((bucket(i - j) + span as i64).clamp(0, top));
        }
    }
    index
}

/// One encoder layer: self-attention and feed-forward, each followed by a
/// residual add and a layer norm.
#[derive(Module, Debug)]
pub struct EncoderLayer<B: Backend> {
    /// Multi-head self-attention.
    pub mha: SelfAttention<B>,
    /// Position-wise feed-forward network.
    pub pwff: FeedForward<B>,
    /// Layer norm after the attention residual.
    pub norm_1: LayerNorm<B>,
    /// Layer norm after the feed-forward residual.
    pub norm_2: LayerNorm<B>,
    /// Both norms' epsilon (burn's `LayerNorm` keeps its own private).
    pub norm_eps: f64,
    /// Dropout on both sub-layers' outputs, before the residual add.
    pub dropout: Dropout,
}

/// Multi-head self-attention over `[batch · len, width]` hidden states.
#[derive(Module, Debug)]
pub struct SelfAttention<B: Backend> {
    /// Query projection `[width, width]`.
    pub query: Linear<B>,
    /// Key projection `[width, width]`.
    pub key: Linear<B>,
    /// Value projection `[width, width]`.
    pub value: Linear<B>,
    /// Output projection `[width, width]`.
    pub output: Linear<B>,
    /// Dropout on the attention probabilities.
    pub dropout: Dropout,
    /// Number of heads.
    pub n_heads: usize,
}

/// The feed-forward network `linear_outer(dropout(gelu(linear_inner(x))))`.
#[derive(Module, Debug)]
pub struct FeedForward<B: Backend> {
    /// `[width, intermediate]`.
    pub linear_inner: Linear<B>,
    /// `[intermediate, width]`.
    pub linear_outer: Linear<B>,
    /// Dropout after the GELU.
    pub dropout: Dropout,
}

impl<B: Backend> Encoder<B> {
    /// Runs the layers over `x` `[batch, len, width]`; `mask_pad` `[batch,
    /// len]` is true at padding positions, which no position attends to.
    pub fn forward(&self, x: Tensor<B, 3>, mask_pad: Tensor<B, 2, Bool>) -> Tensor<B, 3> {
        let [batch, len, width] = x.dims();
        let inputs = self.layer_inputs(mask_pad);
        let mut h = x.reshape([batch * len, width]);
        for layer in &self.layers {
            h = layer.forward(h, &inputs);
        }
        h.reshape([batch, len, width])
    }

    /// What every layer reads for a batch whose padding is `mask_pad`
    /// `[batch, len]`, besides the hidden states.
    pub fn layer_inputs(&self, mask_pad: Tensor<B, 2, Bool>) -> LayerInputs<B> {
        let [batch, len] = mask_pad.dims();
        let heads = self.layers.first().map_or(1, |l| l.mha.n_heads);
        LayerInputs {
            shape: Shape { batch, len },
            mask: mask_pad.reshape([batch, 1, 1, len]),
            relative: self.relative.as_ref().map(|r| r.prepare(batch, heads, len)),
        }
    }
}

/// How the rows of a `[batch · len, width]` matrix split into sequences.
#[derive(Debug, Clone, Copy)]
struct Shape {
    batch: usize,
    len: usize,
}

/// What every encoder layer reads for one batch besides its hidden states:
/// how the rows split into sequences, the padding mask, and DeBERTa's
/// relative positions ([`Encoder::layer_inputs`]).
#[derive(Debug, Clone)]
pub struct LayerInputs<B: Backend> {
    shape: Shape,
    mask: Tensor<B, 4, Bool>,
    relative: Option<RelativeInputs<B>>,
}

impl<B: Backend> LayerInputs<B> {
    /// DeBERTa's (normed) relative embeddings `[2 · span, width]`, shared by
    /// every layer; `None` for the other families.
    pub fn relative_table(&self) -> Option<Tensor<B, 2>> {
        self.relative.as_ref().map(|r| r.table.clone())
    }

    /// The same inputs with `table` in place of the relative embeddings
    /// (unchanged when there are none).
    pub fn with_relative_table(mut self, table: Tensor<B, 2>) -> Self {
        if let Some(r) = &mut self.relative {
            r.table = table;
        }
        self
    }

    /// The same inputs as tensors of another backend (the autodiff
    /// backend's inner one, or back): the mask and gather indices as they
    /// are, the relative embeddings through `table`.
    pub fn map<B2: Backend>(
        self,
        table: impl FnOnce(Tensor<B, 2>) -> Tensor<B2, 2>,
        mask: impl FnOnce(Tensor<B, 4, Bool>) -> Tensor<B2, 4, Bool>,
        index: impl Fn(Tensor<B, 4, Int>) -> Tensor<B2, 4, Int>,
    ) -> LayerInputs<B2> {
        LayerInputs {
            shape: self.shape,
            mask: mask(self.mask),
            relative: self.relative.map(|r| RelativeInputs {
                table: table(r.table),
                c2p: index(r.c2p),
                p2c: index(r.p2c),
            }),
        }
    }
}

impl<B: Backend> EncoderLayer<B> {
    /// The layer over `h` `[batch · len, width]` (the rows of a batch's
    /// hidden states), with the batch's [`LayerInputs`].
    pub fn forward(&self, h: Tensor<B, 2>, inputs: &LayerInputs<B>) -> Tensor<B, 2> {
        let (shape, mask) = (inputs.shape, inputs.mask.clone());
        // DeBERTa drops out the relative embeddings in every layer.
        let relative = inputs.relative.as_ref().map(|r| RelativeInputs {
            table: self.dropout.forward(r.table.clone()),
            ..r.clone()
        });
        let attended = self.mha.forward(h.clone(), shape, mask, relative);
        let h = layer_norm(
            &self.norm_1,
            self.norm_eps,
            h + self.dropout.forward(attended),
        );
        let fed = self.pwff.forward(h.clone());
        layer_norm(&self.norm_2, self.norm_eps, h + self.dropout.forward(fed))
    }
}

impl<B: Backend> SelfAttention<B> {
    fn forward(
        &self,
        h: Tensor<B, 2>,
        shape: Shape,
        mask: Tensor<B, 4, Bool>,
        relative: Option<RelativeInputs<B>>,
    ) -> Tensor<B, 2> {
        let width = h.dims()[1];
        let Shape { batch, len } = shape;
        let d_k = width / self.n_heads;
        let heads = |t: Tensor<B, 2>| split_heads(t, batch, len, self.n_heads);
        let q = heads(linear(&self.query, h.clone()));
        let k = heads(linear(&self.key, h.clone()));
        let v = heads(linear(&self.value, h));
        let mut scores = matmul(q.clone(), k.clone().swap_dims(2, 3));
        let mut divisor = (d_k as f32).sqrt();
        if let Some(r) = relative {
            // Disentangled attention: content-to-position `q_i · pk_(i,j)`
            // and position-to-content `k_j · pq_(i,j)`, the positions'
            // keys and queries projected by this layer's own projections,
            // all three terms scaled by sqrt(3 d_k).
            let rows = r.table.dims()[0];
            let positions = |layer: &Linear<B>| {
                // `[1, heads, d, rows]`: broadcast over the batch by the
                // product, not copied for every sequence.
                split_heads(linear(layer, r.table.clone()), 1, rows, self.n_heads).swap_dims(2, 3)
            };
            let c2p = q.matmul(positions(&self.key)).gather(3, r.c2p);
            let p2c = k.matmul(positions(&self.query)).gather(3, r.p2c);
            scores = scores + c2p + p2c.swap_dims(2, 3);
            divisor = (3.0 * d_k as f32).sqrt();
        }
        let probs = self.dropout.forward(attention_probs(scores, mask, divisor));
        let context = merge_heads(matmul(probs, v));
        linear(&self.output, context)
    }
}

impl<B: Backend> FeedForward<B> {
    fn forward(&self, h: Tensor<B, 2>) -> Tensor<B, 2> {
        let inner = gelu(linear(&self.linear_inner, h));
        linear(&self.linear_outer, self.dropout.forward(inner))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cpu, CpuInference};
    use burn::module::EmptyRecord;
    use burn::nn::transformer::{
        TransformerEncoder, TransformerEncoderConfig, TransformerEncoderInput,
    };
    use burn::tensor::Distribution;

    /// Without dropout the layers compute what burn's post-norm
    /// `TransformerEncoder` computes with the same weights, in inference and
    /// under autodiff.
    #[test]
    fn matches_burns_post_norm_encoder_with_the_same_weights() {
        let worst = largest_difference_from_burn::<CpuInference>();
        assert!(worst < 1e-5, "inference: largest difference {worst}");
        let worst = largest_difference_from_burn::<Cpu>();
        assert!(worst < 1e-5, "autodiff: largest difference {worst}");
    }

    fn largest_difference_from_burn<B: Backend>() -> f32 {
        let device = Default::default();
        B::seed(&device, 11);
        let (width, heads, layers) = (16, 4, 2);
        let burn_encoder = TransformerEncoderConfig::new(width, 24, heads, layers)
            .with_norm_first(false)
            .with_dropout(0.0)
            .init::<B>(&device);
        let x = Tensor::<B, 3>::random([3, 5, width], Distribution::Normal(0.0, 1.0), &device);
        let mask = Tensor::<B, 2, Bool>::from_data(
            [
                [false, false, false, false, false],
                [false, false, false, true, true],
                [false, true, true, true, true],
            ],
            &device,
        );
        // burn initialises parameters lazily: run burn's encoder before
        // taking its weights, or a copy would draw weights of its own.
        let expected =
            burn_encoder.forward(TransformerEncoderInput::new(x.clone()).mask_pad(mask.clone()));
        let ours = EncoderConfig {
            width,
            intermediate: 24,
            heads,
            layers,
            dropout: 0.0,
            layer_norm_eps: 1e-5,
            relative: None,
        }
        .init::<B>(&device)
        .load_record(same_weights(burn_encoder));
        let got = ours.forward(x, mask);
        let e: Vec<f32> = expected.into_data().to_vec().expect("f32 data");
        let g: Vec<f32> = got.into_data().to_vec().expect("f32 data");
        assert_eq!(e.len(), g.len());
        e.iter()
            .zip(&g)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max)
    }

    /// burn's encoder's weights as a record of ours.
    fn same_weights<B: Backend>(burn_encoder: TransformerEncoder<B>) -> EncoderRecord<B> {
        EncoderRecord {
            layers: burn_encoder
                .layers
                .into_iter()
                .map(|l| EncoderLayerRecord {
                    mha: SelfAttentionRecord {
                        query: l.mha.query.into_record(),
                        key: l.mha.key.into_record(),
                        value: l.mha.value.into_record(),
                        output: l.mha.output.into_record(),
                        dropout: EmptyRecord,
                        n_heads: EmptyRecord,
                    },
                    pwff: FeedForwardRecord {
                        linear_inner: l.pwff.linear_inner.into_record(),
                        linear_outer: l.pwff.linear_outer.into_record(),
                        dropout: EmptyRecord,
                    },
                    norm_1: l.norm_1.into_record(),
                    norm_2: l.norm_2.into_record(),
                    norm_eps: EmptyRecord,
                    dropout: EmptyRecord,
                })
                .collect(),
            relative: None,
        }
    }
}
