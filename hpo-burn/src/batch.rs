//! Batching with dynamic padding.
//!
//! Each batch is padded to its own longest sequence, not to `max_len`: short
//! tweets padded to 512 tokens would spend most of the compute on padding.
//! With length bucketing, examples of similar length are grouped (shuffle,
//! sort within pools of many batches, shuffle the batches) so padding shrinks
//! further while the order stays random across pools.
//!
//! An epoch is planned as *steps* (one optimizer step each, the effective
//! batch); a step is split into micro-batches when it is executed. Halving the
//! micro-batch after an out-of-memory error therefore changes how a step is
//! cut, never which examples it contains: the effective batch is preserved
//! exactly.

use crate::tokenize::Encoded;
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Int, Tensor, TensorData};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// An encoded example with its class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedExample {
    /// Token and segment ids.
    pub encoded: Encoded,
    /// Class index.
    pub label: usize,
}

impl EncodedExample {
    /// Sequence length in tokens.
    pub fn len(&self) -> usize {
        self.encoded.ids.len()
    }

    /// Whether the sequence is empty (never, for BERT encodings).
    pub fn is_empty(&self) -> bool {
        self.encoded.ids.is_empty()
    }
}

/// A padded batch on a device.
#[derive(Debug, Clone)]
pub struct Batch<B: Backend> {
    /// `[batch, len]` token ids.
    pub input_ids: Tensor<B, 2, Int>,
    /// `[batch, len]` segment ids.
    pub segment_ids: Tensor<B, 2, Int>,
    /// `[batch, len]`, true at padding.
    pub mask_pad: Tensor<B, 2, Bool>,
    /// `[batch]` class indices.
    pub labels: Tensor<B, 1, Int>,
    /// Number of examples.
    pub size: usize,
    /// Padded length.
    pub len: usize,
    /// Real (non-padding) tokens.
    pub tokens: usize,
}

/// Pads `examples` to their longest sequence and moves them to `device`.
pub fn make_batch<B: Backend>(
    examples: &[&EncodedExample],
    pad_id: u32,
    device: &B::Device,
) -> Batch<B> {
    let size = examples.len();
    let len = examples.iter().map(|e| e.len()).max().unwrap_or(1).max(1);
    let mut ids = Vec::with_capacity(size * len);
    let mut segs = Vec::with_capacity(size * len);
    let mut mask = Vec::with_capacity(size * len);
    let mut tokens = 0;
    for e in examples {
        let n = e.len();
        tokens += n;
        ids.extend(e.encoded.ids.iter().map(|&i| i as i64));
        ids.extend(std::iter::repeat_n(pad_id as i64, len - n));
        segs.extend(e.encoded.segments.iter().map(|&s| s as i64));
        segs.extend(std::iter::repeat_n(0i64, len - n));
        mask.extend(std::iter::repeat_n(false, n));
        mask.extend(std::iter::repeat_n(true, len - n));
    }
    let labels: Vec<i64> = examples.iter().map(|e| e.label as i64).collect();
    Batch {
        input_ids: Tensor::from_data(TensorData::new(ids, [size, len]), device),
        segment_ids: Tensor::from_data(TensorData::new(segs, [size, len]), device),
        mask_pad: Tensor::from_data(TensorData::new(mask, [size, len]), device),
        labels: Tensor::from_data(TensorData::new(labels, [size]), device),
        size,
        len,
        tokens,
    }
}

/// Groups example indices into batches of `batch_size` (the last may be
/// smaller). `shuffle_seed: None` keeps order (evaluation); `bucket` groups
/// similar lengths together.
pub fn plan_batches(
    lengths: &[usize],
    batch_size: usize,
    shuffle_seed: Option<u64>,
    bucket: bool,
) -> Vec<Vec<usize>> {
    let batch_size = batch_size.max(1);
    let mut idx: Vec<usize> = (0..lengths.len()).collect();
    let mut rng = shuffle_seed.map(ChaCha8Rng::seed_from_u64);
    if let Some(rng) = rng.as_mut() {
        idx.shuffle(rng);
    }
    if bucket {
        // Pools of 50 batches: sorted inside, so padding is small, while
        // which examples meet in a batch still varies with the seed.
        for pool in idx.chunks_mut(batch_size * 50) {
            pool.sort_by_key(|&i| lengths[i]);
        }
    }
    let mut batches: Vec<Vec<usize>> = idx.chunks(batch_size).map(<[usize]>::to_vec).collect();
    if bucket {
        if let Some(rng) = rng.as_mut() {
            batches.shuffle(rng);
        }
    }
    batches
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CpuInference;

    fn ex(ids: &[u32], label: usize) -> EncodedExample {
        EncodedExample {
            encoded: Encoded {
                ids: ids.to_vec(),
                segments: vec![0; ids.len()],
            },
            label,
        }
    }

    #[test]
    fn batch_is_padded_to_its_longest_sequence() {
        let a = ex(&[2, 5, 3], 1);
        let b = ex(&[2, 5, 6, 7, 3], 0);
        let batch = make_batch::<CpuInference>(&[&a, &b], 0, &Default::default());
        assert_eq!((batch.size, batch.len, batch.tokens), (2, 5, 8));
        let ids: Vec<i64> = batch
            .input_ids
            .into_data()
            .convert::<i64>()
            .to_vec()
            .unwrap();
        assert_eq!(ids, vec![2, 5, 3, 0, 0, 2, 5, 6, 7, 3]);
        let mask: Vec<bool> = batch.mask_pad.into_data().to_vec().unwrap();
        assert_eq!(mask[3..5], [true, true]);
        assert!(!mask[5..].iter().any(|&m| m));
    }

    #[test]
    fn planning_covers_every_example_once_and_buckets_reduce_padding() {
        let lengths: Vec<usize> = (0..1000).map(|i| 5 + (i * 37) % 120).collect();
        for bucket in [false, true] {
            let plan = plan_batches(&lengths, 32, Some(3), bucket);
            let mut all: Vec<usize> = plan.iter().flatten().copied().collect();
            all.sort_unstable();
            assert_eq!(all, (0..1000).collect::<Vec<_>>());
            assert_eq!(plan, plan_batches(&lengths, 32, Some(3), bucket));
        }
        let padded = |plan: Vec<Vec<usize>>| -> usize {
            plan.iter()
                .map(|b| b.len() * b.iter().map(|&i| lengths[i]).max().unwrap())
                .sum()
        };
        let plain = padded(plan_batches(&lengths, 32, Some(3), false));
        let bucketed = padded(plan_batches(&lengths, 32, Some(3), true));
        assert!(bucketed < plain, "{bucketed} vs {plain}");
    }
}
