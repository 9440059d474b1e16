//! Linear layers on the CPU: burn-flex's products, with the bias, its
//! gradient and the weight's transposed copy in threaded kernels.

use super::graph::{dispatch3, flex_tensor, record};
use crate::host::contiguous;
use crate::kernels;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::nn::Linear;
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensorOps;
use burn::tensor::Tensor;
use burn_flex::{Flex, FlexTensor};

/// `layer`'s affine map `x · W + b` of `[rows, in]` inputs. On the CPU
/// backend the product is burn-flex's (gemm, threaded), the bias is added
/// and its gradient summed by threaded kernels, and the input's gradient
/// multiplies by a transposed copy of `W` made on every core: given `W`'s
/// transposed view, as burn's backward pass does, gemm first repacks the
/// whole of `W` on the calling thread, which left the other core idle (the
/// book's performance page). Elsewhere [`crate::model::device_ops::linear`];
/// burn's `Linear` for a layer without a bias.
pub fn linear<B: Backend>(layer: &Linear<B>, x: Tensor<B, 2>) -> Tensor<B, 2> {
    let Some(bias) = &layer.bias else {
        return layer.forward(x);
    };
    dispatch3(
        (x, layer.weight.val(), bias.val()),
        |[x, w, b]| {
            let y = linear_forward(&x.primitive, &w.primitive, &b.primitive);
            let state = (x.primitive.clone(), w.primitive.clone());
            record(LinearBackward, [&x, &w, &b], state, y)
        },
        |[x, w, b]| linear_forward(x, w, b),
        |(x, _, _)| crate::model::device_ops::linear(layer, x),
    )
}

/// `x · w + b` on contiguous flex tensors.
fn linear_forward(x: &FlexTensor, w: &FlexTensor, b: &FlexTensor) -> FlexTensor {
    let mut y = contiguous(Flex::float_matmul(x.clone(), w.clone()));
    let n = y.layout().num_elements();
    let width = b.layout().num_elements();
    kernels::add_row_in_place(
        &mut y.storage_mut::<f32>()[..n],
        &b.storage::<f32>()[..width],
    );
    y
}

/// The linear layer's node: its state is the input and the weight.
#[derive(Debug)]
struct LinearBackward;

impl Backward<Flex, 3> for LinearBackward {
    type State = (FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (x, w) = ops.state;
        let [x_node, w_node, b_node] = ops.parents;
        let dy = contiguous(grads.consume::<Flex>(&ops.node));
        let [d_in, d_out] = [0, 1].map(|i| w.layout().shape()[i]);
        if let Some(node) = b_node {
            let rows = dy.layout().num_elements();
            let sums = kernels::column_sums(&dy.storage::<f32>()[..rows], d_out);
            grads.register::<Flex>(
                node.id,
                flex_tensor(sums, burn::tensor::Shape::new([d_out])),
            );
        }
        if let Some(node) = w_node {
            let dw = Flex::float_matmul(Flex::float_swap_dims(x, 0, 1), dy.clone());
            grads.register::<Flex>(node.id, dw);
        }
        if let Some(node) = x_node {
            let mut wt = vec![0.0f32; d_in * d_out];
            kernels::transpose_into(&w.storage::<f32>()[..d_in * d_out], d_in, d_out, &mut wt);
            let wt = flex_tensor(wt, burn::tensor::Shape::new([d_out, d_in]));
            grads.register::<Flex>(node.id, Flex::float_matmul(dy, wt));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cpu_ops::graph::test_support::{close, values};
    use crate::{Cpu, CpuInference};
    use burn::module::AutodiffModule;
    use burn::tensor::{Distribution, TensorData};
    #[test]
    fn linear_on_the_cpu_matches_burns_in_value_and_gradients() {
        use burn::nn::LinearConfig;
        let device = Default::default();
        Cpu::seed(&device, 21);
        // Widths that are not multiples of the SIMD width or the tiles.
        let (rows, d_in, d_out) = (37, 45, 70);
        let layer = LinearConfig::new(d_in, d_out).init::<Cpu>(&device);
        let data = Tensor::<CpuInference, 2>::random(
            [rows, d_in],
            Distribution::Normal(0.0, 1.0),
            &device,
        )
        .into_data();
        let w: Vec<f32> = (0..rows * d_out).map(|i| (i % 9) as f32 - 4.0).collect();
        let run = |ours: bool| {
            let x = Tensor::<Cpu, 2>::from_data(data.clone(), &device).require_grad();
            let y = if ours {
                linear(&layer, x.clone())
            } else {
                layer.forward(x.clone())
            };
            let weights =
                Tensor::<Cpu, 2>::from_data(TensorData::new(w.clone(), [rows, d_out]), &device);
            let grads = (y.clone() * weights).sum().backward();
            let bias = layer.bias.as_ref().expect("a bias");
            (
                values(y),
                values(x.grad(&grads).expect("x's gradient")),
                values(layer.weight.val().grad(&grads).expect("W's gradient")),
                values(bias.val().grad(&grads).expect("b's gradient")),
            )
        };
        let (ours, burns) = (run(true), run(false));
        close(&ours.0, &burns.0, 1e-6);
        close(&ours.1, &burns.1, 1e-5);
        close(&ours.2, &burns.2, 1e-5);
        close(&ours.3, &burns.3, 1e-5);
        let x = Tensor::<CpuInference, 2>::from_data(data, &device);
        let inference = layer.valid();
        close(
            &values(linear(&inference, x.clone())),
            &values(inference.forward(x)),
            1e-6,
        );
    }
}
