//! Dropout whose masks the CPU backend draws in bulk, on every core.
//!
//! burn's `Dropout` asks the backend for a Bernoulli tensor, which the CPU
//! backend fills one element at a time through a generic distribution
//! sampler over a ChaCha generator, then multiplies twice (by the mask,
//! then by `1 / keep`), each on one thread. On the `cpu_training` benchmark
//! that took about a tenth of the CPU time (the book's performance page).
//! Here, on the CPU backend, each mask comes from a counter-based SplitMix64
//! stream ([`crate::kernels::DropoutMask`]) whose seed comes from the
//! backend's own seeded generator (so a run stays reproducible under
//! `Backend::seed`); it is drawn and applied in one threaded pass
//! ([`super::cpu_ops::dropout`]), and drawn again in the backward pass
//! rather than kept. Other backends (CUDA) keep burn's dropout, which draws
//! the mask on the device.

use crate::kernels::DropoutMask;
use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Int, Tensor};

/// Dropout with probability `prob` of zeroing an element in training
/// (autodiff) mode, the identity otherwise.
#[derive(Module, Clone, Debug)]
pub struct Dropout {
    /// Probability of zeroing an element.
    pub prob: f64,
}

impl Dropout {
    /// Dropout with probability `prob` (in `[0, 1)`).
    pub fn new(prob: f64) -> Self {
        Self { prob }
    }

    /// Zeroes each element with probability `prob` and scales the others by
    /// `1 / (1 - prob)`, when autodiff is enabled; returns `input` otherwise.
    pub fn forward<B: Backend, const D: usize>(&self, input: Tensor<B, D>) -> Tensor<B, D> {
        let device = input.device();
        if !B::ad_enabled(&device) || self.prob <= 0.0 {
            return input;
        }
        if !crate::host::is_cpu::<B>() {
            return burn::nn::DropoutConfig::new(self.prob)
                .init()
                .forward(input);
        }
        // Two 30-bit draws from the backend's seeded generator seed this
        // mask's stream (the bound must fit the backend's 32-bit ints).
        // Reading them back is a host copy on burn-flex, which has no
        // execution errors to report; the conversion to i64 cannot fail
        // for ints, so the empty fallback is never taken.
        let draws: Vec<i64> = Tensor::<B, 1, Int>::random(
            [2],
            Distribution::Uniform(0.0, f64::from(1u32 << 30)),
            &device,
        )
        .into_data()
        .convert::<i64>()
        .into_vec()
        .unwrap_or_default();
        let seed = draws.iter().fold(0u64, |acc, &d| (acc << 30) ^ d as u64);
        super::cpu_ops::dropout(input, DropoutMask::new(self.prob, seed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cpu, CpuInference};

    #[test]
    fn training_drops_reproducibly_under_the_backend_seed_and_inference_does_not() {
        let device = Default::default();
        let dropout = Dropout::new(0.25);
        let draw = |seed| {
            Cpu::seed(&device, seed);
            let x = Tensor::<Cpu, 2>::ones([64, 64], &device);
            dropout
                .forward(x)
                .into_data()
                .to_vec::<f32>()
                .expect("f32 data")
        };
        let (a, b, c) = (draw(3), draw(3), draw(4));
        assert_eq!(a, b);
        assert_ne!(a, c);
        let dropped = a.iter().filter(|&&v| v == 0.0).count() as f64 / a.len() as f64;
        assert!((dropped - 0.25).abs() < 0.05, "dropped share {dropped}");
        assert!(a.iter().all(|&v| v == 0.0 || (v - 1.0 / 0.75).abs() < 1e-6));

        let x = Tensor::<CpuInference, 2>::ones([8, 8], &device);
        let out: Vec<f32> = dropout.forward(x).into_data().to_vec().expect("f32 data");
        assert!(out.iter().all(|&v| v == 1.0));
    }
}
