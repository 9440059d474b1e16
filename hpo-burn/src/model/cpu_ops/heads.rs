//! Attention heads split from and merged into the hidden states on the CPU:
//! one block copy each way, forward and backward.

use super::graph::{dispatch, flex_tensor, record};
use crate::host::contiguous;
use crate::kernels;
use crate::Cpu;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{unary, Backward, Ops};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::Tensor;
use burn_flex::{Flex, FlexTensor};

/// `[batch · len, heads · d]` hidden states as `[batch, heads, len, d]`
/// attention heads, contiguous: one threaded copy (and one back in the
/// backward pass) on the CPU backend, where burn-flex copies a transposed
/// view element by element through a strided iterator; a reshape and a
/// transposed view elsewhere.
pub fn split_heads<B: Backend>(
    x: Tensor<B, 2>,
    batch: usize,
    len: usize,
    heads: usize,
) -> Tensor<B, 4> {
    let d = x.dims()[1] / heads.max(1);
    let dims = [batch, len, heads, d];
    dispatch(
        x,
        |x| permute_node(x, dims, true),
        |x| permute_heads(x, dims, true),
        |x| x.reshape(dims).swap_dims(1, 2),
    )
}

/// The inverse of [`split_heads`]: `[batch, heads, len, d]` back to
/// `[batch · len, heads · d]`.
pub fn merge_heads<B: Backend>(x: Tensor<B, 4>) -> Tensor<B, 2> {
    let [batch, heads, len, d] = x.dims();
    let dims = [batch, len, heads, d];
    dispatch(
        x,
        |x| permute_node(x, dims, false),
        |x| permute_heads(x, dims, false),
        |x| x.swap_dims(1, 2).reshape([batch * len, heads * d]),
    )
}

/// The permuted copy of `x` (see [`crate::kernels::permute_heads`]), shaped as the
/// other layout.
fn permute_heads(x: &FlexTensor, dims: [usize; 4], to_heads: bool) -> FlexTensor {
    let [batch, len, heads, d] = dims;
    let n = batch * len * heads * d;
    let x = contiguous(x.clone());
    let mut out = vec![0.0f32; n];
    kernels::permute_heads(&x.storage::<f32>()[..n], &mut out, dims, to_heads);
    let shape = if to_heads {
        burn::tensor::Shape::new([batch, heads, len, d])
    } else {
        burn::tensor::Shape::new([batch * len, heads * d])
    };
    flex_tensor(out, shape)
}

/// The head permutation's node: its backward pass is the inverse copy.
#[derive(Debug)]
struct PermuteHeadsBackward;

impl Backward<Flex, 1> for PermuteHeadsBackward {
    /// `[batch, len, heads, d]` and the forward direction.
    type State = ([usize; 4], bool);

    fn backward(self, ops: Ops<Self::State, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (dims, to_heads) = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| {
            permute_heads(&grad, dims, !to_heads)
        });
    }
}

/// `x` permuted, as the autodiff graph's node.
fn permute_node<const DO: usize>(
    x: FloatTensor<Cpu>,
    dims: [usize; 4],
    to_heads: bool,
) -> Tensor<Cpu, DO> {
    let y = permute_heads(&x.primitive, dims, to_heads);
    record(PermuteHeadsBackward, [&x], (dims, to_heads), y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cpu_ops::graph::test_support::values;
    use crate::CpuInference;
    use burn::tensor::{Distribution, TensorData};
    #[test]
    fn head_permutations_match_reshape_and_transpose_with_gradients() {
        let device = Default::default();
        let data =
            Tensor::<CpuInference, 2>::random([2 * 5, 3 * 4], Distribution::Default, &device)
                .into_data();
        let weights = Tensor::<Cpu, 4>::from_data(
            TensorData::new(
                (0..120).map(|i| (i % 7) as f32 - 3.0).collect(),
                [2, 3, 5, 4],
            ),
            &device,
        );
        let run = |ours: bool| {
            let x = Tensor::<Cpu, 2>::from_data(data.clone(), &device).require_grad();
            let heads = if ours {
                split_heads(x.clone(), 2, 5, 3)
            } else {
                x.clone().reshape([2, 5, 3, 4]).swap_dims(1, 2)
            };
            // Something position-dependent between the two permutations.
            let mixed = heads.clone() * weights.clone();
            let back = if ours {
                merge_heads(mixed)
            } else {
                mixed.swap_dims(1, 2).reshape([10, 12])
            };
            let grads = (back.clone() * back.clone()).sum().backward();
            (
                values(heads),
                values(back),
                values(x.grad(&grads).expect("a gradient")),
            )
        };
        assert_eq!(run(true), run(false));
        let x = Tensor::<CpuInference, 2>::from_data(data.clone(), &device);
        assert_eq!(
            values(merge_heads(split_heads(x.clone(), 2, 5, 3))),
            values(x)
        );
    }
}
