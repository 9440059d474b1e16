//! Attention's scaled, masked softmax on the CPU: one row-wise kernel
//! forward, one backward.

use super::graph::{dispatch, flex_tensor, record};
use crate::host::contiguous;
use crate::kernels;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{unary, Backward, Ops};
use burn::tensor::activation::softmax;
use burn::tensor::backend::Backend;
use burn::tensor::{Bool, Tensor};
use burn_flex::{Flex, FlexTensor};

/// The value burn's path sets masked (padding) attention scores to before
/// the softmax; its exponential is zero in f32, as for burn's attention.
const MASKED_SCORE: f32 = -1.0e4;

/// Attention probabilities: `softmax(scores / divisor)` over the keys (last
/// dimension) of `[batch, heads, len, len]` scores, keys where `mask_pad`
/// (`[batch, 1, 1, len]`) is true (padding) getting probability zero. On the
/// CPU backend one threaded kernel forward and one backward (burn computes it
/// as a division, a mask fill that first copies the broadcast scores
/// element by element, and a softmax of four passes, each on one thread);
/// burn's ops elsewhere. The two agree except for a row whose keys are all
/// padding, which has no probabilities here (zeros) and uniform ones in
/// burn's; a batch never has such a row (the first token is never padding).
pub fn attention_probs<B: Backend>(
    scores: Tensor<B, 4>,
    mask_pad: Tensor<B, 4, Bool>,
    divisor: f32,
) -> Tensor<B, 4> {
    let burns = |scores: Tensor<B, 4>, mask_pad| {
        softmax(
            scores.div_scalar(divisor).mask_fill(mask_pad, MASKED_SCORE),
            3,
        )
    };
    if !crate::host::is_cpu::<B>() {
        return burns(scores, mask_pad);
    }
    let [batch, heads, len_q, len_k] = scores.dims();
    let masked = match mask_pad.clone().into_data().to_vec::<bool>() {
        Ok(m) if m.len() == batch * len_k => m,
        _ => return burns(scores, mask_pad),
    };
    let shape = SoftmaxShape {
        len_k,
        rows_per_sequence: heads * len_q,
        divisor,
    };
    dispatch(
        scores,
        |s| {
            let probs = attention_probs_forward(&s.primitive, &masked, shape);
            record(AttentionProbsBackward, [&s], (probs.clone(), shape), probs)
        },
        |s| attention_probs_forward(s, &masked, shape),
        |s| burns(s, mask_pad),
    )
}

/// How [`attention_probs`]' scores split into rows and sequences.
#[derive(Debug, Clone, Copy)]
struct SoftmaxShape {
    len_k: usize,
    rows_per_sequence: usize,
    divisor: f32,
}

/// The probabilities of contiguous flex scores into a new buffer.
fn attention_probs_forward(
    scores: &FlexTensor,
    masked: &[bool],
    shape: SoftmaxShape,
) -> FlexTensor {
    let dims = scores.layout().shape().clone();
    let n = dims.num_elements();
    let mut out = vec![0.0f32; n];
    kernels::masked_softmax_forward(
        &scores.storage::<f32>()[..n],
        masked,
        shape.len_k,
        shape.rows_per_sequence,
        shape.divisor,
        &mut out,
    );
    flex_tensor(out, dims)
}

/// The masked softmax's node: its state is the probabilities it computed.
#[derive(Debug)]
struct AttentionProbsBackward;

impl Backward<Flex, 1> for AttentionProbsBackward {
    type State = (FlexTensor, SoftmaxShape);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (probs, shape) = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| {
            let mut grad = contiguous(grad);
            let n = grad.layout().num_elements();
            kernels::masked_softmax_backward_in_place(
                &mut grad.storage_mut::<f32>()[..n],
                &probs.storage::<f32>()[..n],
                shape.len_k,
                shape.divisor,
            );
            grad
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cpu_ops::graph::test_support::{close, values};
    use crate::{Cpu, CpuInference};
    use burn::tensor::{Distribution, TensorData};
    #[test]
    fn attention_probs_on_the_cpu_match_burns_in_value_and_gradient() {
        let device = Default::default();
        let (batch, heads, len) = (3, 2, 7);
        let data = Tensor::<CpuInference, 4>::random(
            [batch, heads, len, len],
            Distribution::Normal(0.0, 4.0),
            &device,
        )
        .into_data();
        // Sequence 0 has no padding, 1 two padded keys, 2 six.
        let pad: Vec<bool> = (0..batch * len)
            .map(|i| (i / len == 1 && i % len >= 5) || (i / len == 2 && i % len >= 1))
            .collect();
        let w: Vec<f32> = (0..batch * heads * len * len)
            .map(|i| (i % 11) as f32 - 5.0)
            .collect();
        let divisor = 8f32.sqrt();
        let run = |ours: bool| {
            let mask = Tensor::<Cpu, 1, Bool>::from_data(
                TensorData::new(pad.clone(), [batch * len]),
                &device,
            )
            .reshape([batch, 1, 1, len]);
            let x = Tensor::<Cpu, 4>::from_data(data.clone(), &device).require_grad();
            let p = if ours {
                attention_probs(x.clone(), mask, divisor)
            } else {
                softmax(
                    x.clone().div_scalar(divisor).mask_fill(mask, MASKED_SCORE),
                    3,
                )
            };
            let weights = Tensor::<Cpu, 4>::from_data(
                TensorData::new(w.clone(), [batch, heads, len, len]),
                &device,
            );
            let grads = (p.clone() * weights).sum().backward();
            (values(p), values(x.grad(&grads).expect("a gradient")))
        };
        let (ours, burns) = (run(true), run(false));
        close(&ours.0, &burns.0, 1e-6);
        close(&ours.1, &burns.1, 1e-5);
        // Padded keys get nothing, and every row sums to one.
        for (r, row) in ours.0.chunks(len).enumerate() {
            let b = r / (heads * len);
            for (j, &p) in row.iter().enumerate() {
                if pad[b * len + j] {
                    assert_eq!(p, 0.0);
                }
            }
            assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
        }
        // The inference backend computes the same probabilities.
        let mask = Tensor::<CpuInference, 1, Bool>::from_data(
            TensorData::new(pad.clone(), [batch * len]),
            &device,
        )
        .reshape([batch, 1, 1, len]);
        let x = Tensor::<CpuInference, 4>::from_data(data.clone(), &device);
        assert_eq!(values(attention_probs(x, mask, divisor)), ours.0);
    }
}
