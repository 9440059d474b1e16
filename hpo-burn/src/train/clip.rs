//! Gradient clipping by norm: over all parameters at once (PyTorch's
//! `clip_grad_norm_` over `model.parameters()`, Hugging Face's
//! `max_grad_norm`), or each parameter tensor on its own (burn's
//! `GradientClipping::Norm`).
//!
//! The global norm needs every gradient before any parameter moves, while
//! burn's optimizer adaptor hands the optimizer one parameter at a time. So
//! the trainer computes the norm over the step's accumulated gradients
//! ([`global_norm`]: one read of each gradient, threaded on the CPU) and
//! hands the clip factor to [`super::AdamW`] through a shared
//! [`GradScale`], which the fused CPU step multiplies into the gradient as
//! it reads it: no pass rewrites the gradients.

use crate::error::Result;
use crate::host::{cast, contiguous};
use crate::kernels;
use crate::read;
use crate::CpuInference;
use burn::module::{AutodiffModule, ModuleVisitor, Param};
use burn::optim::GradientsParams;
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::Tensor;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

/// Which gradients a norm clip measures together.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClipScope {
    /// All parameters' gradients as one vector, scaled by one factor
    /// (PyTorch's `clip_grad_norm_(model.parameters(), max)`, the default
    /// of Hugging Face's trainer).
    #[default]
    Global,
    /// Each parameter tensor's gradient scaled to the norm on its own
    /// (burn's `GradientClipping::Norm`).
    PerParameter,
}

/// A gradient scale shared between an optimizer and the loop driving it:
/// every gradient of the next step is multiplied by it. Starts at 1.
#[derive(Debug, Clone)]
pub struct GradScale(Arc<AtomicU32>);

impl Default for GradScale {
    fn default() -> Self {
        Self(Arc::new(AtomicU32::new(1.0f32.to_bits())))
    }
}

impl GradScale {
    /// The factor.
    pub fn get(&self) -> f32 {
        f32::from_bits(self.0.load(Ordering::Relaxed))
    }

    /// Sets the factor for the steps that follow.
    pub fn set(&self, factor: f32) {
        self.0.store(factor.to_bits(), Ordering::Relaxed);
    }
}

/// The factor that brings a gradient of norm `norm` down to `max` (1 when
/// it is already within), as PyTorch's `clip_grad_norm_` computes it.
pub fn clip_factor(max: f32, norm: f32) -> f32 {
    (max / (norm + 1e-6)).min(1.0)
}

/// The Euclidean norm of all of `model`'s gradients in `grads` taken as one
/// vector.
pub fn global_norm<B, M>(model: &M, grads: &GradientsParams) -> Result<f32>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
{
    let mut visitor = SquaredNorms::<B> {
        grads,
        host: 0.0,
        device: None,
    };
    model.visit(&mut visitor);
    let mut total = visitor.host;
    if let Some(sum) = visitor.device {
        total += read::scalar("the gradient norm", sum)?;
    }
    Ok(total.sqrt() as f32)
}

/// Sums the squares of each parameter's gradient: on the host for the CPU
/// backend, as one device tensor elsewhere (read once at the end).
struct SquaredNorms<'a, B: AutodiffBackend> {
    grads: &'a GradientsParams,
    host: f64,
    device: Option<Tensor<B::InnerBackend, 1>>,
}

impl<B: AutodiffBackend> ModuleVisitor<B> for SquaredNorms<'_, B> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let Some(grad) = self.grads.get::<B::InnerBackend, D>(param.id) else {
            return;
        };
        match cast::<Tensor<B::InnerBackend, D>, Tensor<CpuInference, D>>(grad) {
            Ok(grad) => {
                let n = grad.shape().num_elements();
                let flex = contiguous(grad.into_primitive().tensor());
                self.host += kernels::sum_of_squares(&flex.storage::<f32>()[..n]);
            }
            Err(grad) => {
                let sum = grad.square().sum();
                self.device = Some(match self.device.take() {
                    Some(total) => total + sum,
                    None => sum,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cpu, CpuInference};
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::{Distribution, TensorData};

    #[test]
    fn the_scale_is_shared_between_clones() {
        let scale = GradScale::default();
        assert_eq!(scale.get(), 1.0);
        let held = scale.clone();
        scale.set(0.25);
        assert_eq!(held.get(), 0.25);
    }

    #[test]
    fn the_factor_clips_only_long_gradients() {
        assert_eq!(clip_factor(1.0, 0.5), 1.0);
        assert!((clip_factor(1.0, 4.0) - 0.25).abs() < 1e-6);
    }

    #[test]
    fn the_global_norm_covers_every_parameter() {
        let device = Default::default();
        let layer: Linear<Cpu> = LinearConfig::new(37, 5).init(&device);
        let x = Tensor::<Cpu, 2>::random([4, 37], Distribution::Normal(0.0, 3.0), &device);
        let loss = layer.forward(x).square().sum();
        let grads = GradientsParams::from_grads(loss.backward(), &layer);
        let weight: Tensor<CpuInference, 2> = grads.get(layer.weight.id).expect("weight");
        let bias: Tensor<CpuInference, 1> = grads
            .get(layer.bias.as_ref().expect("bias").id)
            .expect("bias");
        let squares = |d: TensorData| -> f64 {
            d.iter::<f32>()
                .map(|v| f64::from(v) * f64::from(v))
                .sum::<f64>()
        };
        let expected = (squares(weight.into_data()) + squares(bias.into_data())).sqrt();
        let norm = global_norm::<Cpu, _>(&layer, &grads).expect("norm");
        assert!(
            (f64::from(norm) - expected).abs() < 1e-5 * expected,
            "{norm} against {expected}"
        );
    }
}
