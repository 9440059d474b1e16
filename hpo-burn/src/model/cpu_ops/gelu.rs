//! The exact GELU on the CPU: Cephes' `expf` and an erf written to
//! vectorise, threaded, one autodiff node.

use super::graph::{dispatch, flex_tensor, record};
use crate::host::contiguous;
use crate::kernels;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{unary, Backward, Ops};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use burn_flex::{Flex, FlexTensor};

/// The exact GELU, `x · Φ(x)`: hpo's fused, threaded kernels on the CPU
/// backend, burn's `gelu` elsewhere.
pub fn gelu<B: Backend, const D: usize>(x: Tensor<B, D>) -> Tensor<B, D> {
    dispatch(
        x,
        |x| {
            record(
                GeluBackward,
                [&x],
                x.primitive.clone(),
                gelu_forward(&x.primitive),
            )
        },
        gelu_forward,
        burn::tensor::activation::gelu,
    )
}

/// GELU of a flex tensor into a new buffer.
fn gelu_forward(x: &FlexTensor) -> FlexTensor {
    let shape = x.layout().shape().clone();
    let src: &[f32] = x.storage();
    let n = shape.num_elements();
    let mut out = vec![0.0f32; n];
    kernels::gelu_into(&src[..n], &mut out);
    flex_tensor(out, shape)
}

/// `grad · gelu'(x)`, written over `grad`'s buffer when nothing else holds it.
fn gelu_backward(x: &FlexTensor, grad: FlexTensor) -> FlexTensor {
    let mut grad = contiguous(grad);
    let n = grad.layout().num_elements();
    let src: &[f32] = x.storage();
    kernels::gelu_backward_in_place(&src[..n], &mut grad.storage_mut::<f32>()[..n]);
    grad
}

/// The GELU node of the autodiff graph: its state is the input, from which
/// the backward pass computes the derivative.
#[derive(Debug)]
struct GeluBackward;

impl Backward<Flex, 1> for GeluBackward {
    type State = FlexTensor;

    fn backward(self, ops: Ops<FlexTensor, 1>, grads: &mut Gradients, _: &mut Checkpointer) {
        let x = ops.state;
        unary::<Flex, _>(ops.parents, ops.node, grads, |grad| gelu_backward(&x, grad));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cpu_ops::graph::test_support::{close, values};
    use crate::{Cpu, CpuInference};
    use burn::tensor::{Distribution, TensorData};
    #[test]
    fn gelu_on_the_cpu_matches_burns_in_value_and_gradient() {
        let device = Default::default();
        let data =
            Tensor::<CpuInference, 3>::random([3, 17, 40], Distribution::Normal(0.0, 3.0), &device)
                .into_data();
        // Forward, inference backend.
        let x = Tensor::<CpuInference, 3>::from_data(data.clone(), &device);
        close(
            &values(gelu(x.clone())),
            &values(burn::tensor::activation::gelu(x)),
            3e-7,
        );
        // Forward and gradient, autodiff backend; a transposed input takes
        // the non-contiguous path.
        let run = |ours: bool| {
            let x = Tensor::<Cpu, 3>::from_data(data.clone(), &device).require_grad();
            let t = x.clone().swap_dims(1, 2);
            let y = if ours {
                gelu(t)
            } else {
                burn::tensor::activation::gelu(t)
            };
            let w = Tensor::<Cpu, 3>::from_data(
                TensorData::new(
                    (0..2040).map(|i| (i % 13) as f32 - 6.0).collect(),
                    [3, 40, 17],
                ),
                &device,
            );
            let loss = (y.clone() * w).sum();
            let grads = loss.backward();
            (values(y), values(x.grad(&grads).expect("a gradient")))
        };
        let (ours_y, ours_g) = run(true);
        let (burn_y, burn_g) = run(false);
        close(&ours_y, &burn_y, 3e-7);
        close(&ours_g, &burn_g, 3e-6);
    }
}
