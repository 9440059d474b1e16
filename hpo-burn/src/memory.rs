//! Device memory: an analytic peak estimate, measured peaks, device totals,
//! and a memory-capped simulated device.
//!
//! The estimate is what an executor needs *before* starting a trial: will it
//! fit next to the trials already running? It counts, for AdamW training:
//!
//! * weights, gradients and two optimizer moments, one element each per
//!   parameter (plus an f32 master copy under mixed precision);
//! * activations kept for the backward pass, per encoder layer, after
//!   Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large
//!   Transformer Models", section 4.1): `s·b·(8h + 2f)` float elements for
//!   the inputs of the projections, GELU and layer norms, `2·a·s²·b` for the
//!   attention probabilities before and after dropout, and `2·s·b·h + a·s²·b`
//!   one-byte dropout masks (s = sequence length, b = micro-batch, h = hidden,
//!   f = feed-forward width, a = heads); plus embeddings and logits;
//! * for DeBERTa's disentangled attention, per layer its relative table and
//!   the table's two projections, and once the two `[b, a, s, s]` gather
//!   indices and the `3·a·s²·b` relative scores live while a layer runs.
//!
//! It is deliberately simple and documented so that a fitted correction per
//! model family (from measured peaks recorded on trials) can replace the
//! guesswork; it is not a promise about any allocator's fragmentation.

use crate::error::{Error, Result};
use crate::model::ModelConfig;
use serde::{Deserialize, Serialize};

/// Numeric precision of training.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    /// Everything in f32 (the CPU backend).
    #[default]
    F32,
    /// Weights, gradients, optimizer state and activations in 16 bits.
    Half,
    /// 16-bit activations and weights, plus f32 master weights and optimizer state.
    Mixed,
}

impl Precision {
    fn activation_bytes(self) -> u64 {
        match self {
            Precision::F32 => 4,
            Precision::Half | Precision::Mixed => 2,
        }
    }
}

/// An estimate of peak device memory for one training step, by component.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryEstimate {
    /// Model weights (and master copy under mixed precision).
    pub weights: u64,
    /// Gradients.
    pub gradients: u64,
    /// AdamW moments.
    pub optimizer: u64,
    /// Activations kept for the backward pass.
    pub activations: u64,
}

impl MemoryEstimate {
    /// Total bytes.
    pub fn total(&self) -> u64 {
        self.weights + self.gradients + self.optimizer + self.activations
    }
}

/// Estimates peak training memory for `model` at `micro_batch` sequences of
/// `seq_len` tokens, every layer's activations kept for the backward pass.
pub fn estimate_training_memory(
    model: &ModelConfig,
    micro_batch: usize,
    seq_len: usize,
    precision: Precision,
) -> MemoryEstimate {
    estimate_training_memory_with(model, micro_batch, seq_len, precision, false)
}

/// [`estimate_training_memory`], or with `recompute` the same step under
/// activation recomputation ([`crate::train::recompute`]): of the encoder,
/// each layer's input is kept (`s·b·h` per layer), and one layer's
/// activations, its output's gradient and the product the layer's backward
/// pass starts from are alive at a time.
pub fn estimate_training_memory_with(
    model: &ModelConfig,
    micro_batch: usize,
    seq_len: usize,
    precision: Precision,
    recompute: bool,
) -> MemoryEstimate {
    let p = model.num_params() as u64;
    let (weights, gradients, optimizer) = match precision {
        Precision::F32 => (4 * p, 4 * p, 8 * p),
        Precision::Half => (2 * p, 2 * p, 4 * p),
        Precision::Mixed => (6 * p, 2 * p, 8 * p),
    };
    let e = precision.activation_bytes();
    let (s, b) = (seq_len as u64, micro_batch as u64);
    let (h, f, a) = (
        model.hidden as u64,
        model.intermediate as u64,
        model.heads as u64,
    );
    let per_layer =
        e * (s * b * (8 * h + 2 * f) + 2 * a * s * s * b) + 2 * s * b * h + a * s * s * b;
    // Embedding sum, its norm and dropout, pooled output and logits.
    let mut outside = e * (4 * s * b * h + b * (h + model.num_classes as u64)) + s * b * h;
    let mut per_layer = per_layer;
    if let Some(r) = model.relative {
        // DeBERTa: each layer keeps its dropped-out relative table and its
        // two projections (`2·span` rows each); the encoder keeps two
        // `[b, a, s, s]` gather indices (8-byte integers); and while a
        // layer runs, the content-to-position and position-to-content
        // scores and their sum (`3·a·s²·b`) are live beside the kept ones.
        let rows = 2 * r.span() as u64;
        per_layer += e * 3 * rows * h;
        outside += 2 * 8 * a * s * s * b + e * 3 * a * s * s * b;
    }
    let encoder = if recompute {
        (model.layers as u64 + 2) * e * s * b * h + per_layer
    } else {
        model.layers as u64 * per_layer
    };
    MemoryEstimate {
        weights,
        gradients,
        optimizer,
        activations: encoder + outside,
    }
}

/// Where out-of-memory errors come from in a training run.
///
/// `Unlimited` relies on the real backend (an allocation failure surfaces as
/// a panic or an execution error and is classified as out-of-memory);
/// `Simulated` additionally checks every micro-batch against a capacity with
/// the analytic estimate and raises the *same* error before running it, so
/// the recovery ladder is exercised on any machine.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum MemoryGuard {
    /// No cap beyond the device's own.
    #[default]
    Unlimited,
    /// A simulated device of `capacity` bytes.
    Simulated {
        /// Capacity in bytes.
        capacity: u64,
        /// Precision used for the estimate.
        precision: Precision,
    },
}

impl MemoryGuard {
    /// A simulated device with `capacity` bytes, f32 training.
    pub fn simulated(capacity: u64) -> Self {
        MemoryGuard::Simulated {
            capacity,
            precision: Precision::F32,
        }
    }

    /// Checks a micro-batch of `micro_batch` × `seq_len` before it runs
    /// (with activation recomputation when `recompute`).
    pub fn check(
        &self,
        model: &ModelConfig,
        micro_batch: usize,
        seq_len: usize,
        recompute: bool,
    ) -> Result<()> {
        match *self {
            MemoryGuard::Unlimited => Ok(()),
            MemoryGuard::Simulated {
                capacity,
                precision,
            } => {
                let need = estimate_training_memory_with(
                    model,
                    micro_batch,
                    seq_len,
                    precision,
                    recompute,
                )
                .total();
                if need > capacity {
                    Err(Error::OutOfMemory(format!(
                        "simulated device: micro-batch {micro_batch} x {seq_len} tokens needs {} MiB, capacity {} MiB",
                        need >> 20,
                        capacity >> 20
                    )))
                } else {
                    Ok(())
                }
            }
        }
    }
}

/// Memory of one device, from the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceMemory {
    /// Total bytes.
    pub total: u64,
    /// Bytes in use (by every process).
    pub used: u64,
    /// Free bytes.
    pub free: u64,
}

/// Device totals of CUDA device `index` of this process from NVML
/// ([`crate::nvml`]: `libnvidia-ml.so` or `.so.1`, the index mapped through an
/// inherited `CUDA_VISIBLE_DEVICES`).
///
/// Returns an error saying why when unavailable: built without the `cuda`
/// feature, no NVIDIA driver, or no such device. Never panics.
pub fn device_memory(index: u32) -> Result<DeviceMemory> {
    let r = crate::nvml::report(index)?;
    Ok(DeviceMemory {
        total: r.total,
        used: r.used,
        free: r.free,
    })
}

/// Peak resident memory of this process in bytes (Linux `VmHWM`), the
/// closest measurable quantity on the CPU backend, which reports no
/// allocator statistics. `None` where `/proc` is unavailable.
pub fn process_peak_rss() -> Option<u64> {
    proc_status_kib("VmHWM:").map(|k| k * 1024)
}

/// Current resident memory of this process in bytes (Linux `VmRSS`).
pub fn process_rss() -> Option<u64> {
    proc_status_kib("VmRSS:").map(|k| k * 1024)
}

fn proc_status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find(|l| l.starts_with(key))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Preset;

    #[test]
    fn activations_grow_with_batch_and_quadratically_in_attention() {
        let m = ModelConfig::preset(Preset::Base, 30522, 2);
        let a = estimate_training_memory(&m, 8, 128, Precision::F32);
        let b = estimate_training_memory(&m, 16, 128, Precision::F32);
        assert_eq!(a.weights, b.weights);
        assert!(b.activations > 2 * a.activations - a.activations / 10);
        let long = estimate_training_memory(&m, 8, 512, Precision::F32);
        assert!(long.activations > 4 * a.activations);
        // bert-large, batch 48, length 480 in mixed precision does not fit
        // a 24 GB card (the seed study's crash); batch 8 does.
        let large = ModelConfig::preset(Preset::Large, 30522, 2);
        let gib = 1u64 << 30;
        assert!(estimate_training_memory(&large, 48, 480, Precision::Mixed).total() > 24 * gib);
        assert!(estimate_training_memory(&large, 8, 480, Precision::Mixed).total() < 24 * gib);
    }

    /// Recomputation keeps one `s·b·h` input per layer instead of every
    /// layer's activations: BERT-large at 32 x 384 needs under half the
    /// activation memory, and weights, gradients and moments are the same.
    #[test]
    fn recomputation_keeps_layer_inputs_only() {
        for preset in [Preset::Base, Preset::Large] {
            let m = ModelConfig::preset(preset, 30522, 2);
            let kept = estimate_training_memory(&m, 32, 384, Precision::F32);
            let again = estimate_training_memory_with(&m, 32, 384, Precision::F32, true);
            assert_eq!(
                (kept.weights, kept.gradients, kept.optimizer),
                (again.weights, again.gradients, again.optimizer)
            );
            assert!(again.activations * 2 < kept.activations, "{preset:?}");
            // Still more than one layer's worth, and growing with the batch.
            let half = estimate_training_memory_with(&m, 16, 384, Precision::F32, true);
            assert!(half.activations < again.activations);
            assert!(again.activations > kept.activations / m.layers as u64);
        }
    }

    /// DeBERTa-v3-base's disentangled attention costs more than BERT-base
    /// of the same dimensions, and the seed study's worst OOM (DeBERTa-base,
    /// batch 128 x 384, which needed 29 GiB) does not fit 24 GiB.
    #[test]
    fn deberta_pays_for_its_relative_attention() {
        let bert = ModelConfig::new(128_100, 2, 12, 768, 12, 3072);
        let mut deberta = bert.clone();
        deberta.absolute_positions = false;
        deberta.type_vocab_size = 0;
        deberta.pooler_gelu = true;
        deberta.relative = Some(crate::model::Relative {
            buckets: 256,
            max_distance: 512,
            norm: true,
        });
        let (b, d) = (
            estimate_training_memory(&bert, 32, 384, Precision::F32),
            estimate_training_memory(&deberta, 32, 384, Precision::F32),
        );
        assert!(
            d.activations > b.activations + b.activations / 10,
            "{d:?} {b:?}"
        );
        let gib = 1u64 << 30;
        assert!(estimate_training_memory(&deberta, 128, 384, Precision::Mixed).total() > 24 * gib);
        assert!(estimate_training_memory(&deberta, 8, 384, Precision::Mixed).total() < 24 * gib);
    }

    #[test]
    fn simulated_guard_raises_out_of_memory() {
        let m = ModelConfig::preset(Preset::Tiny, 1000, 2);
        let need = estimate_training_memory(&m, 8, 64, Precision::F32).total();
        let guard = MemoryGuard::simulated(need);
        assert!(guard.check(&m, 8, 64, false).is_ok());
        assert!(matches!(
            guard.check(&m, 16, 64, false),
            Err(Error::OutOfMemory(_))
        ));
        assert!(MemoryGuard::Unlimited
            .check(&m, 1 << 20, 512, false)
            .is_ok());
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn device_memory_is_cleanly_unavailable_without_cuda() {
        let e = device_memory(0).unwrap_err().to_string();
        assert!(e.contains("not available"), "{e}");
    }
}
