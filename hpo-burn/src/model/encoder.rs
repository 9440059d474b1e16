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

use super::cpu_ops::{attention_probs, gelu, layer_norm, linear, merge_heads, split_heads};
use super::Dropout;
use burn::module::Module;
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Tensor};

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
        Encoder { layers }
    }
}

/// A stack of post-norm BERT layers: each linear layer multiplies all the
/// batch's tokens as one `[batch · len, width]` matrix.
#[derive(Module, Debug)]
pub struct Encoder<B: Backend> {
    /// The layers, first to last.
    pub layers: Vec<EncoderLayer<B>>,
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
        let shape = Shape { batch, len };
        let mask = mask_pad.reshape([batch, 1, 1, len]);
        let mut h = x.reshape([batch * len, width]);
        for layer in &self.layers {
            h = layer.forward(h, shape, mask.clone());
        }
        h.reshape([batch, len, width])
    }
}

/// How the rows of a `[batch · len, width]` matrix split into sequences.
#[derive(Debug, Clone, Copy)]
struct Shape {
    batch: usize,
    len: usize,
}

impl<B: Backend> EncoderLayer<B> {
    fn forward(&self, h: Tensor<B, 2>, shape: Shape, mask: Tensor<B, 4, Bool>) -> Tensor<B, 2> {
        let attended = self.mha.forward(h.clone(), shape, mask);
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
    fn forward(&self, h: Tensor<B, 2>, shape: Shape, mask: Tensor<B, 4, Bool>) -> Tensor<B, 2> {
        let width = h.dims()[1];
        let Shape { batch, len } = shape;
        let d_k = width / self.n_heads;
        let heads = |t: Tensor<B, 2>| split_heads(t, batch, len, self.n_heads);
        let q = heads(linear(&self.query, h.clone()));
        let k = heads(linear(&self.key, h.clone()));
        let v = heads(linear(&self.value, h));
        let scores = q.matmul(k.swap_dims(2, 3));
        let probs = self
            .dropout
            .forward(attention_probs(scores, mask, (d_k as f32).sqrt()));
        let context = merge_heads(probs.matmul(v));
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
        }
    }
}
