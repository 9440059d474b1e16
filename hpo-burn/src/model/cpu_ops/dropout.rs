//! Dropout on the CPU: the mask drawn and applied in one threaded pass, and
//! drawn again in the backward pass.

use super::graph::{dispatch, flex_tensor, record};
use crate::host::contiguous;
use crate::kernels::DropoutMask;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{unary, Backward, Ops};
use burn::tensor::backend::Backend;
use burn::tensor::{Tensor, TensorData};
use burn_flex::{Flex, FlexTensor};

/// `x` with `mask`'s dropout applied (see [`crate::kernels::DropoutMask`]): on the
/// CPU backend one threaded pass forward and one backward, the mask drawn
/// again in the backward pass instead of kept; elsewhere the mask is made
/// on the host and multiplied in with burn's ops. hpo's [`crate::model::Dropout`]
/// calls it on the CPU only (a GPU draws burn's masks on the device).
pub fn dropout<B: Backend, const D: usize>(x: Tensor<B, D>, mask: DropoutMask) -> Tensor<B, D> {
    dispatch(
        x,
        |x| {
            record(
                DropoutBackward,
                [&x],
                mask,
                dropout_forward(&x.primitive, mask),
            )
        },
        |x| dropout_forward(x, mask),
        |x| {
            let shape = x.shape();
            let mut factors = vec![1.0f32; shape.num_elements()];
            mask.apply_in_place(&mut factors);
            let device = x.device();
            x * Tensor::from_data(TensorData::new(factors, shape), &device)
        },
    )
}

/// `x · mask` of a contiguous flex tensor into a new buffer.
fn dropout_forward(x: &FlexTensor, mask: DropoutMask) -> FlexTensor {
    let shape = x.layout().shape().clone();
    let n = shape.num_elements();
    let mut out = vec![0.0f32; n];
    mask.apply_into(&x.storage::<f32>()[..n], &mut out);
    flex_tensor(out, shape)
}

/// The dropout node of the autodiff graph: its state is the mask's seed and
/// threshold, from which the backward pass draws the mask again.
#[derive(Debug)]
struct DropoutBackward;

impl Backward<Flex, 1> for DropoutBackward {
    type State = DropoutMask;

    fn backward(self, ops: Ops<DropoutMask, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let mask = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| {
            let mut grad = contiguous(grad);
            let n = grad.layout().num_elements();
            mask.apply_in_place(&mut grad.storage_mut::<f32>()[..n]);
            grad
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cpu_ops::graph::test_support::values;
    use crate::{Cpu, CpuInference};
    use burn::tensor::Distribution;
    #[test]
    fn dropout_on_the_cpu_applies_the_mask_forward_and_backward() {
        let device = Default::default();
        let mask = DropoutMask::new(0.3, 99);
        let data =
            Tensor::<CpuInference, 3>::random([4, 9, 33], Distribution::Normal(0.0, 1.0), &device)
                .into_data();
        let w: Vec<f32> = (0..4 * 9 * 33).map(|i| (i % 13) as f32 - 6.0).collect();
        // A transposed input takes the non-contiguous path; the mask is
        // laid over the transposed (output) order.
        let x = Tensor::<Cpu, 3>::from_data(data.clone(), &device).require_grad();
        let t = x.clone().swap_dims(1, 2);
        let t_values = values(t.clone());
        let y = dropout(t, mask);
        let weights = Tensor::<Cpu, 3>::from_data(TensorData::new(w.clone(), [4, 33, 9]), &device);
        let grads = (y.clone() * weights).sum().backward();
        let y = values(y);
        for (i, (&yi, &ti)) in y.iter().zip(&t_values).enumerate() {
            assert_eq!(yi, ti * mask.factor(i), "output {i}");
        }
        // d/dt = w · mask, then transposed back to x's order.
        let dt = Tensor::<CpuInference, 3>::from_data(
            TensorData::new(
                (0..w.len())
                    .map(|i| w[i] * mask.factor(i))
                    .collect::<Vec<f32>>(),
                [4, 33, 9],
            ),
            &device,
        );
        assert_eq!(
            values(x.grad(&grads).expect("a gradient")),
            values(dt.swap_dims(1, 2))
        );
        // Inference backend: the same forward values.
        let xi = Tensor::<CpuInference, 3>::from_data(data, &device).swap_dims(1, 2);
        assert_eq!(values(dropout(xi, mask)), y);
    }
}
