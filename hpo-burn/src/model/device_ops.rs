//! Linear layers and layer norm on every backend but the CPU (CUDA): burn's
//! ops, arranged so that the parameters' gradients are summed in two stages.
//!
//! A bias or a norm's scale is broadcast over all `rows` of a `[rows, width]`
//! activation, so burn's backward pass sums its gradient over `rows` in one
//! reduction along a strided axis: `width` outputs, each a loop over up to
//! 16,384 elements. On an H100 each such sum took ~2 ms (cubecl 0.10's
//! reduction without autotuning; `bench/gpu/check.sh`'s profile step), ten of
//! them per BERT layer: 0.24 s of a 0.73 s BERT-base 32 x 512 step, as much
//! as all its matrix products. Viewing the activation as `[a, b, width]`
//! (`a x b = rows`, `a` near `sqrt(rows)`) makes burn sum over `a` first
//! (`b x width` outputs, enough to fill the device) and then over `b`, with
//! the same values up to rounding.

use burn::nn::{LayerNorm, Linear};
use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// `(a, b)` with `a x b = rows` and `a` the largest divisor of `rows` not
/// above its square root (`(1, rows)` for a prime).
pub(crate) fn split_rows(rows: usize) -> (usize, usize) {
    let mut a = (rows as f64).sqrt().floor() as usize;
    while a > 1 && !rows.is_multiple_of(a) {
        a -= 1;
    }
    let a = a.max(1);
    (a, rows / a.max(1))
}

/// `layer`'s `x · W + b` for `[rows, in]` inputs: the product by
/// [`super::matmul::matmul`] (a kernel chosen by shape on CUDA), the bias added over a `[a, b, out]` view of its rows.
pub fn linear<B: Backend>(layer: &Linear<B>, x: Tensor<B, 2>) -> Tensor<B, 2> {
    let Some(bias) = &layer.bias else {
        return layer.forward(x);
    };
    let [rows, _] = x.dims();
    let out = layer.weight.dims()[1];
    let (a, b) = split_rows(rows);
    let y = super::matmul::matmul(x, layer.weight.val()).reshape([a, b, out]);
    (y + bias.val().reshape([1, 1, out])).reshape([rows, out])
}

/// burn's layer norm over the last dimension of `x`, computed on a
/// `[a, b, width]` view of its rows.
pub fn layer_norm<B: Backend, const D: usize>(
    norm: &LayerNorm<B>,
    x: Tensor<B, D>,
) -> Tensor<B, D> {
    let dims = x.dims();
    let width = dims[D - 1];
    let rows = dims[..D - 1].iter().product::<usize>();
    let (a, b) = split_rows(rows);
    norm.forward(x.reshape([a, b, width])).reshape(dims)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::model::cpu_ops::graph::test_support::{close, values};
    use burn::backend::autodiff::checkpoint::strategy::BalancedCheckpointing;
    use burn::backend::Autodiff;
    use burn::nn::{LayerNormConfig, LinearConfig};
    use burn::tensor::{Distribution, TensorData};

    /// A CPU backend that is not [`crate::Cpu`]: its tensors take the path
    /// CUDA's take.
    type Other = Autodiff<crate::CpuInference, BalancedCheckpointing>;

    #[test]
    fn rows_split_near_the_square_root() {
        assert_eq!(split_rows(16384), (128, 128));
        assert_eq!(split_rows(32 * 384), (96, 128));
        assert_eq!(split_rows(37), (1, 37));
        assert_eq!(split_rows(1), (1, 1));
        assert_eq!(split_rows(0), (1, 0));
        assert_eq!(split_rows(6), (2, 3));
    }

    fn input(rows: usize, width: usize) -> TensorData {
        Tensor::<crate::CpuInference, 2>::random(
            [rows, width],
            Distribution::Normal(0.0, 1.0),
            &Default::default(),
        )
        .into_data()
    }

    fn weights(rows: usize, width: usize) -> Tensor<Other, 2> {
        let w: Vec<f32> = (0..rows * width).map(|i| (i % 7) as f32 - 3.0).collect();
        Tensor::from_data(TensorData::new(w, [rows, width]), &Default::default())
    }

    #[test]
    fn linear_matches_burns_in_value_and_gradients() {
        let device = Default::default();
        let (rows, d_in, d_out) = (24, 10, 13);
        let layer = LinearConfig::new(d_in, d_out).init::<Other>(&device);
        let data = input(rows, d_in);
        let run = |ours: bool| {
            let x = Tensor::<Other, 2>::from_data(data.clone(), &device).require_grad();
            let y = if ours {
                linear(&layer, x.clone())
            } else {
                layer.forward(x.clone())
            };
            let grads = (y.clone() * weights(rows, d_out)).sum().backward();
            let bias = layer.bias.as_ref().unwrap();
            (
                values(y),
                values(x.grad(&grads).unwrap()),
                values(layer.weight.val().grad(&grads).unwrap()),
                values(bias.val().grad(&grads).unwrap()),
            )
        };
        let (ours, burns) = (run(true), run(false));
        close(&ours.0, &burns.0, 1e-6);
        close(&ours.1, &burns.1, 1e-5);
        close(&ours.2, &burns.2, 1e-5);
        close(&ours.3, &burns.3, 1e-5);
    }

    #[test]
    fn layer_norm_matches_burns_in_value_and_gradients() {
        let device = Default::default();
        let (rows, width) = (30, 16);
        let norm = LayerNormConfig::new(width).init::<Other>(&device);
        let data = input(rows, width);
        let run = |ours: bool| {
            let x = Tensor::<Other, 2>::from_data(data.clone(), &device).require_grad();
            let y = if ours {
                layer_norm(&norm, x.clone())
            } else {
                norm.forward(x.clone())
            };
            let grads = (y.clone() * weights(rows, width)).sum().backward();
            (
                values(y),
                values(x.grad(&grads).unwrap()),
                values(norm.gamma.val().grad(&grads).unwrap()),
                values(norm.beta.as_ref().unwrap().val().grad(&grads).unwrap()),
            )
        };
        let (ours, burns) = (run(true), run(false));
        close(&ours.0, &burns.0, 1e-5);
        close(&ours.1, &burns.1, 1e-4);
        close(&ours.2, &burns.2, 1e-4);
        close(&ours.3, &burns.3, 1e-4);
    }
}
