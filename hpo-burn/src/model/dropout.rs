//! Dropout whose masks the CPU backend draws in bulk.
//!
//! burn's `Dropout` asks the backend for a Bernoulli tensor, which the CPU
//! backend fills one element at a time through a generic distribution
//! sampler over a ChaCha generator, then multiplies twice (by the mask,
//! then by `1 / keep`). On the `cpu_training` benchmark that sampling took
//! about a tenth of the CPU time (the book's performance page). Here, on the
//! CPU backend, each mask is drawn in one pass from a SplitMix64 stream whose
//! seed comes from the backend's own seeded generator (so a run stays
//! reproducible under `Backend::seed`), already scaled (`0` or `1 / keep`),
//! and applied with one multiplication. Other backends (CUDA) keep burn's
//! dropout, which draws the mask on the device.

use burn::module::Module;
use burn::tensor::backend::Backend;
use burn::tensor::{Distribution, Int, Tensor, TensorData};

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
        let shape = input.shape();
        let mask = mask(shape.num_elements(), self.prob, seed);
        input * Tensor::<B, D>::from_data(TensorData::new(mask, shape), &device)
    }
}

/// `n` mask values: `0.0` with probability `prob`, `1 / (1 - prob)`
/// otherwise, from a SplitMix64 stream started at `seed` (32 bits per
/// element, compared with `prob` scaled to 2^32).
fn mask(n: usize, prob: f64, seed: u64) -> Vec<f32> {
    let keep_scale = (1.0 / (1.0 - prob)) as f32;
    // An element is dropped when its 32 random bits fall below this.
    let threshold = (prob * 4_294_967_296.0).min(4_294_967_295.0) as u64;
    let mut state = seed;
    let mut out = Vec::with_capacity(n);
    let value = |bits: u64| {
        if bits < threshold {
            0.0
        } else {
            keep_scale
        }
    };
    // Each 64-bit draw gives two elements: its low half, then its high one.
    while out.len() < n {
        let r = splitmix64(&mut state);
        out.push(value(r & 0xffff_ffff));
        if out.len() < n {
            out.push(value(r >> 32));
        }
    }
    out
}

/// One step of SplitMix64 (Steele, Lea and Flood 2014).
fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Cpu, CpuInference};

    #[test]
    fn masks_drop_the_right_share_and_scale_the_rest() {
        let m = mask(200_001, 0.1, 7);
        assert_eq!(m.len(), 200_001);
        let dropped = m.iter().filter(|&&v| v == 0.0).count() as f64 / m.len() as f64;
        // 200k Bernoulli(0.1) draws: sd of the share is 0.00067.
        assert!((dropped - 0.1).abs() < 0.004, "dropped share {dropped}");
        let scale = 1.0 / 0.9f32;
        assert!(m.iter().all(|&v| v == 0.0 || v == scale));
        assert_ne!(mask(1000, 0.1, 7), mask(1000, 0.1, 8));
        assert_eq!(mask(1000, 0.1, 7), mask(1000, 0.1, 7));
        assert!(mask(1000, 0.0, 7).iter().all(|&v| v == 1.0));
    }

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
