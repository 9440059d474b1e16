//! Activation recomputation (Hugging Face's `gradient_checkpointing`): one
//! micro-batch's forward and backward pass that keeps, of the encoder, only
//! each layer's input, and computes each layer again, one at a time, when
//! the backward pass reaches it.
//!
//! An ordinary step keeps every layer's activations from the forward pass
//! to the backward pass, `L · s·b·(8h + 2f) + 2·L·a·s²·b` floats and more
//! ([`crate::memory`]). Here:
//!
//! 1. the embeddings run under autodiff (their graph is kept: a few
//!    `[b, s, h]` tensors), then the layers run on the inference backend,
//!    with no graph, their dropout masks recorded ([`record_masks`]) and
//!    each layer's input kept (`L · s·b·h` floats);
//! 2. the pooler, head and loss run under autodiff from the last hidden
//!    states as a leaf, and are differentiated: the gradient of the last
//!    hidden states;
//! 3. from the last layer to the first, the layer runs again under autodiff
//!    from its kept input (a leaf), replaying its recorded masks
//!    ([`replay_masks`]), and `sum(output · gradient)` is differentiated:
//!    the layer's parameter gradients and its input's gradient, the next
//!    layer down's output gradient; only this one layer's activations are
//!    alive at a time;
//! 4. the embeddings' kept graph (and DeBERTa's relative embeddings, which
//!    every layer reads and whose gradient the layers sum) is differentiated
//!    last.
//!
//! Every pass is burn's own backward over a graph of its own, so the CPU
//! backend's fused kernels ([`crate::model::cpu_ops`]) run as in an ordinary
//! step, and any backend works. (A recompute *inside* one backward pass, as
//! burn's checkpointing strategies or PyTorch's do, cannot: burn 0.21's
//! graph client locks every graph while one backward runs, so a nested
//! backward deadlocks, and burn's strategies are a backend type that hpo's
//! CPU kernels are not written for.) The price is one more forward pass of
//! the encoder: about a third more time per step.
//!
//! Gradients equal an ordinary step's to rounding, dropout included (the
//! tests below, and `tests/it/recompute.rs` for every model family).

use crate::batch::Batch;
use crate::error::{Error, Result};
use crate::model::{record_masks, replay_masks, BertClassifier};
use burn::module::AutodiffModule;
use burn::optim::{GradientsAccumulator, GradientsParams};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;

/// The value `loss` reports and the parameter gradients of the loss it
/// returns for `batch`, with the encoder's activations recomputed layer by
/// layer in the backward pass (see the module's documentation).
///
/// `loss` gets the logits and gives back what the caller wants reported
/// (the loss read back, say) and the scalar to differentiate.
pub fn recomputed_gradients<B: AutodiffBackend, T>(
    model: &BertClassifier<B>,
    batch: Batch<B>,
    loss: impl FnOnce(Tensor<B, 2>) -> Result<(T, Tensor<B, 1>)>,
) -> Result<(T, GradientsParams)> {
    let [size, len] = batch.input_ids.dims();
    let embedded = model.embed(batch.input_ids, batch.segment_ids);
    let width = embedded.dims()[2];
    let embedded = embedded.reshape([size * len, width]);
    let inputs = model.encoder.layer_inputs(batch.mask_pad.clone());

    // 1. The layers without a graph, keeping inputs and masks.
    let inference = inputs
        .clone()
        .map(|t| t.inner(), |m| m.inner(), |i| i.inner());
    let mut kept = Vec::with_capacity(model.encoder.layers.len());
    let mut h = embedded.clone().inner();
    for layer in &model.encoder.layers {
        let layer = layer.valid();
        let (next, masks) = record_masks(|| layer.forward(h.clone(), &inference));
        kept.push((h, masks));
        h = next;
    }

    // 2. The head.
    let last = Tensor::<B, 2>::from_inner(h).require_grad();
    let logits = model.classify(last.clone().reshape([size, len, width]), batch.mask_pad);
    let (reported, scalar) = loss(logits)?;
    let grads = scalar.backward();
    let mut gradient = input_gradient(&last, &grads)?;
    let mut total = GradientsAccumulator::<BertClassifier<B>>::new();
    total.accumulate(model, GradientsParams::from_grads(grads, model));

    // 3. The layers again, last first.
    let table = inference.relative_table();
    let mut table_gradient = None;
    for (layer, (input, masks)) in model.encoder.layers.iter().zip(kept).rev() {
        let x = Tensor::<B, 2>::from_inner(input).require_grad();
        let leaf = table
            .clone()
            .map(|t| Tensor::<B, 2>::from_inner(t).require_grad());
        let layer_inputs = match &leaf {
            Some(t) => inputs.clone().with_relative_table(t.clone()),
            None => inputs.clone(),
        };
        let out = replay_masks(&masks, || layer.forward(x.clone(), &layer_inputs));
        let grads = (out * Tensor::from_inner(gradient)).sum().backward();
        gradient = input_gradient(&x, &grads)?;
        if let Some(t) = &leaf {
            let g = input_gradient(t, &grads)?;
            table_gradient = Some(match table_gradient {
                Some(sum) => g + sum,
                None => g,
            });
        }
        total.accumulate(model, GradientsParams::from_grads(grads, model));
    }

    // 4. The embeddings, and the relative embeddings every layer read.
    let mut root = (embedded * Tensor::from_inner(gradient)).sum();
    if let (Some(t), Some(g)) = (inputs.relative_table(), table_gradient) {
        root = root + (t * Tensor::from_inner(g)).sum();
    }
    let grads = root.backward();
    total.accumulate(model, GradientsParams::from_grads(grads, model));
    Ok((reported, total.grads()))
}

/// The gradient a backward pass left on the leaf `x`.
fn input_gradient<B: AutodiffBackend, const D: usize>(
    x: &Tensor<B, D>,
    grads: &B::Gradients,
) -> Result<Tensor<B::InnerBackend, D>> {
    x.grad(grads).ok_or_else(|| {
        Error::Device(
            "activation recomputation: the backward pass left no gradient on a layer's input"
                .into(),
        )
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::batch::{make_batch, EncodedExample};
    use crate::model::{ModelConfig, Pooling, Preset};
    use crate::tokenize::Encoded;
    use crate::Cpu;
    use burn::nn::loss::CrossEntropyLossConfig;

    fn examples() -> Vec<EncodedExample> {
        (0..5)
            .map(|i| EncodedExample {
                encoded: Encoded {
                    ids: (0..(6 + 3 * i))
                        .map(|t| (7 * t + i) as u32 % 90 + 2)
                        .collect(),
                    segments: vec![0; 6 + 3 * i],
                },
                label: i % 3,
            })
            .collect()
    }

    /// Every parameter's gradient, by name order of the record.
    fn gradients<B: AutodiffBackend>(
        model: &BertClassifier<B>,
        grads: &GradientsParams,
    ) -> Vec<Vec<f32>> {
        use burn::module::{Module, ModuleVisitor, Param};
        struct Collect<'a>(&'a GradientsParams, Vec<Vec<f32>>);
        impl<B: AutodiffBackend> ModuleVisitor<B> for Collect<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
                let g = self.0.get::<B::InnerBackend, D>(param.id);
                self.1.push(
                    g.map(|g| g.into_data().to_vec().unwrap())
                        .unwrap_or_default(),
                );
            }
        }
        let mut c = Collect(grads, Vec::new());
        model.visit(&mut c);
        c.1
    }

    /// The loss and every gradient of one micro-batch of `model`, with or
    /// without recomputation, its dropout masks replayed from `masks` (so
    /// that neither run draws from the backend's generator, which tests on
    /// other threads draw from too).
    fn step(
        model: &BertClassifier<Cpu>,
        recompute: bool,
        masks: &crate::model::MaskTape,
    ) -> (f64, Vec<Vec<f32>>) {
        let device = Default::default();
        let exs = examples();
        let refs: Vec<&EncodedExample> = exs.iter().collect();
        let criterion = CrossEntropyLossConfig::new().init::<Cpu>(&device);
        let batch = make_batch::<Cpu>(&refs, 0, &device);
        let labels = batch.labels.clone();
        let loss = |logits| -> Result<_> {
            let l = criterion.forward(logits, labels);
            let v = l.clone().into_scalar() as f64;
            Ok((v, l))
        };
        let (value, grads) = replay_masks(masks, || {
            if recompute {
                recomputed_gradients(model, batch, loss).unwrap()
            } else {
                let logits = model.forward(
                    batch.input_ids.clone(),
                    batch.segment_ids.clone(),
                    batch.mask_pad.clone(),
                );
                let (v, l) = loss(logits).unwrap();
                (v, GradientsParams::from_grads(l.backward(), model))
            }
        });
        (value, gradients(model, &grads))
    }

    /// A model whose parameters are all drawn (burn draws a parameter when
    /// it is first read).
    fn model(config: &ModelConfig) -> BertClassifier<Cpu> {
        let model = config.init::<Cpu>(&Default::default()).unwrap();
        let _ = model.valid();
        model
    }

    fn tiny(preset_dropout: f64, relative: bool) -> ModelConfig {
        let mut c = ModelConfig::preset(Preset::Tiny, 100, 3);
        c.dropout = preset_dropout;
        c.head_dropout = preset_dropout;
        c.pooling = Pooling::Cls;
        if relative {
            c.absolute_positions = false;
            c.type_vocab_size = 0;
            c.relative = Some(crate::model::Relative {
                buckets: 8,
                max_distance: 16,
                norm: true,
            });
            c.pooler_gelu = true;
        }
        c
    }

    #[test]
    fn recomputed_gradients_equal_an_ordinary_steps_dropout_included() {
        let masks = |k: u64| crate::model::MaskTape::new((0..64).map(|i| 1000 * k + i).collect());
        for relative in [false, true] {
            let model = model(&tiny(0.2, relative));
            let (loss, plain) = step(&model, false, &masks(1));
            let (loss_r, recomputed) = step(&model, true, &masks(1));
            assert!(
                (loss - loss_r).abs() <= 1e-6 * loss.abs().max(1.0),
                "{loss} against {loss_r}"
            );
            assert_eq!(plain.len(), recomputed.len());
            let mut compared = 0;
            for (i, (a, b)) in plain.iter().zip(&recomputed).enumerate() {
                assert_eq!(a.len(), b.len(), "parameter {i} (relative {relative})");
                let scale = a.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-6);
                for (x, y) in a.iter().zip(b) {
                    assert!(
                        (x - y).abs() <= 1e-4 * scale,
                        "parameter {i}: {x} against {y} (relative {relative})"
                    );
                }
                compared += usize::from(!a.is_empty());
            }
            assert!(compared > 10, "only {compared} parameters had gradients");
            // Dropout really dropped: other masks give another loss.
            let (other, _) = step(&model, true, &masks(2));
            assert_ne!(loss_r, other);
        }
    }
}
