//! Layer norm on the CPU: one row-wise kernel forward, one backward for x,
//! gamma and beta.

use super::graph::{dispatch3, flex_tensor, record};
use crate::host::contiguous;
use crate::kernels;
use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops};
use burn::nn::LayerNorm;
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;
use burn_flex::{Flex, FlexTensor};

/// Layer norm over the last dimension with `norm`'s weights and `eps`:
/// hpo's fused, threaded kernels on the CPU backend (burn's autodiff backend
/// computes it as about eight ops forward and fifteen backward, each over
/// the whole tensor on one thread), burn's `LayerNorm` elsewhere (over
/// [`crate::model::device_ops::layer_norm`]'s view of the rows). `eps` is
/// the one `norm` was made with (burn keeps it private).
pub fn layer_norm<B: Backend, const D: usize>(
    norm: &LayerNorm<B>,
    eps: f64,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    let Some(beta) = &norm.beta else {
        return norm.forward(x);
    };
    dispatch3(
        (x, norm.gamma.val(), beta.val()),
        |[x, gamma, beta]| {
            let (y, normalized, rstd) =
                layer_norm_forward(&x.primitive, &gamma.primitive, &beta.primitive, eps);
            let state = (normalized, rstd, gamma.primitive.clone());
            record(LayerNormBackward, [&x, &gamma, &beta], state, y)
        },
        |[x, gamma, beta]| layer_norm_forward(x, gamma, beta, eps).0,
        |(x, _, _)| crate::model::device_ops::layer_norm(norm, x),
    )
}

/// Layer norm forward on contiguous flex tensors: `(y, x̂, 1/σ per row)`.
fn layer_norm_forward(
    x: &FlexTensor,
    gamma: &FlexTensor,
    beta: &FlexTensor,
    eps: f64,
) -> (FlexTensor, FlexTensor, FlexTensor) {
    let shape = x.layout().shape().clone();
    let n = shape.num_elements();
    let width = gamma.layout().num_elements();
    let rows = n / width.max(1);
    let (mut y, mut normalized, mut rstd) = (vec![0.0f32; n], vec![0.0f32; n], vec![0.0f32; rows]);
    kernels::layer_norm_forward(
        &x.storage::<f32>()[..n],
        &gamma.storage::<f32>()[..width],
        &beta.storage::<f32>()[..width],
        eps as f32,
        &mut y,
        &mut normalized,
        &mut rstd,
    );
    (
        flex_tensor(y, shape.clone()),
        flex_tensor(normalized, shape),
        flex_tensor(rstd, burn::tensor::Shape::new([rows])),
    )
}

/// The layer norm node of the autodiff graph: its state is `x̂`, each row's
/// `1/σ` and `gamma`.
#[derive(Debug)]
struct LayerNormBackward;

impl Backward<Flex, 3> for LayerNormBackward {
    type State = (FlexTensor, FlexTensor, FlexTensor);

    fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
        let (normalized, rstd, gamma) = ops.state;
        let [x_node, gamma_node, beta_node] = ops.parents;
        let mut dy = contiguous(grads.consume::<Flex>(&ops.node));
        let n = normalized.layout().num_elements();
        let width = gamma.layout().num_elements();
        let rows = rstd.layout().num_elements();
        let (dgamma, dbeta) = kernels::layer_norm_backward_in_place(
            &mut dy.storage_mut::<f32>()[..n],
            &normalized.storage::<f32>()[..n],
            &rstd.storage::<f32>()[..rows],
            &gamma.storage::<f32>()[..width],
        );
        let row = || burn::tensor::Shape::new([width]);
        if let Some(node) = x_node {
            grads.register::<Flex>(node.id, dy);
        }
        if let Some(node) = gamma_node {
            grads.register::<Flex>(node.id, flex_tensor(dgamma, row()));
        }
        if let Some(node) = beta_node {
            grads.register::<Flex>(node.id, flex_tensor(dbeta, row()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cpu_ops::graph::test_support::{close, values};
    use crate::{Cpu, CpuInference};
    use burn::tensor::{Distribution, TensorData};
    #[test]
    fn layer_norm_on_the_cpu_matches_burns_in_value_and_gradients() {
        use burn::module::Param;
        use burn::nn::LayerNormConfig;
        let device = Default::default();
        let eps = 1e-5;
        let data =
            Tensor::<CpuInference, 2>::random([150, 48], Distribution::Normal(1.0, 2.0), &device)
                .into_data();
        let weights = |seed: usize| {
            TensorData::new(
                (0..48)
                    .map(|i| ((i * 7 + seed) % 11) as f32 / 5.0 - 1.0)
                    .collect(),
                [48],
            )
        };
        // Inference backend, forward.
        let mut norm = LayerNormConfig::new(48)
            .with_epsilon(eps)
            .init::<CpuInference>(&device);
        norm.gamma = Param::from_tensor(Tensor::from_data(weights(1), &device));
        norm.beta = Some(Param::from_tensor(Tensor::from_data(weights(2), &device)));
        let x = Tensor::<CpuInference, 2>::from_data(data.clone(), &device);
        close(
            &values(layer_norm(&norm, eps, x.clone())),
            &values(norm.forward(x)),
            2e-5,
        );
        // Autodiff backend: output and the gradients of x, gamma and beta.
        let run = |ours: bool| {
            let mut norm = LayerNormConfig::new(48)
                .with_epsilon(eps)
                .init::<Cpu>(&device);
            norm.gamma = Param::from_tensor(Tensor::from_data(weights(1), &device));
            norm.beta = Some(Param::from_tensor(Tensor::from_data(weights(2), &device)));
            let x = Tensor::<Cpu, 2>::from_data(data.clone(), &device).require_grad();
            let y = if ours {
                layer_norm(&norm, eps, x.clone())
            } else {
                norm.forward(x.clone())
            };
            let w = Tensor::<Cpu, 2>::from_data(
                TensorData::new(
                    (0..7200).map(|i| (i % 13) as f32 - 6.0).collect(),
                    [150, 48],
                ),
                &device,
            );
            let grads = (y.clone() * w).sum().backward();
            let beta = norm.beta.as_ref().expect("beta");
            (
                values(y),
                values(x.grad(&grads).expect("x's gradient")),
                values(norm.gamma.val().grad(&grads).expect("gamma's gradient")),
                values(beta.val().grad(&grads).expect("beta's gradient")),
            )
        };
        let (ours, burns) = (run(true), run(false));
        close(&ours.0, &burns.0, 2e-5);
        close(&ours.1, &burns.1, 1e-4);
        close(&ours.2, &burns.2, 1e-4);
        close(&ours.3, &burns.3, 1e-4);
    }
}
