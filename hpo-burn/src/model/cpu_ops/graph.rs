//! What every op of [`super`] shares: the choice of path by backend, the
//! registration of a node with burn's autodiff graph, and flex tensors made
//! from host buffers.

use crate::host::{cast, contiguous, recast};
use crate::{Cpu, CpuInference};
use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
use burn::backend::autodiff::ops::{Backward, OpsKind};
use burn::tensor::backend::Backend;
use burn::tensor::ops::FloatTensor;
use burn::tensor::{DType, Tensor, TensorPrimitive};
use burn_flex::{Flex, FlexTensor, Layout};

/// An op over `x`, by backend. On [`Cpu`], `train` gets `x` as the
/// autodiff graph's tensor with its values made contiguous (and registers
/// its node with [`record`]); on [`CpuInference`], `infer` gets `x`'s
/// contiguous values and returns the output's; on any other backend, `other`
/// gets `x` as it is.
pub(super) fn dispatch<B: Backend, const DI: usize, const DO: usize>(
    x: Tensor<B, DI>,
    train: impl FnOnce(FloatTensor<Cpu>) -> Tensor<Cpu, DO>,
    infer: impl FnOnce(&FlexTensor) -> FlexTensor,
    other: impl FnOnce(Tensor<B, DI>) -> Tensor<B, DO>,
) -> Tensor<B, DO> {
    let x = match cast::<_, Tensor<Cpu, DI>>(x) {
        Ok(x) => return recast(train(contiguous_node(x.into_primitive()))),
        Err(x) => x,
    };
    match cast::<_, Tensor<CpuInference, DI>>(x) {
        Ok(x) => recast(inference::<DO>(infer(&contiguous(
            x.into_primitive().tensor(),
        )))),
        Err(x) => other(x),
    }
}

/// [`dispatch`] for an op over three tensors (an input and two parameters,
/// say), each handed to the CPU paths contiguous.
pub(super) fn dispatch3<
    B: Backend,
    const D1: usize,
    const D2: usize,
    const D3: usize,
    const DO: usize,
>(
    args: (Tensor<B, D1>, Tensor<B, D2>, Tensor<B, D3>),
    train: impl FnOnce([FloatTensor<Cpu>; 3]) -> Tensor<Cpu, DO>,
    infer: impl FnOnce([&FlexTensor; 3]) -> FlexTensor,
    other: impl FnOnce((Tensor<B, D1>, Tensor<B, D2>, Tensor<B, D3>)) -> Tensor<B, DO>,
) -> Tensor<B, DO> {
    let args = match cast::<_, (Tensor<Cpu, D1>, Tensor<Cpu, D2>, Tensor<Cpu, D3>)>(args) {
        Ok((a, b, c)) => {
            let nodes =
                [a.into_primitive(), b.into_primitive(), c.into_primitive()].map(contiguous_node);
            return recast(train(nodes));
        }
        Err(args) => args,
    };
    match cast::<
        _,
        (
            Tensor<CpuInference, D1>,
            Tensor<CpuInference, D2>,
            Tensor<CpuInference, D3>,
        ),
    >(args)
    {
        Ok((a, b, c)) => {
            let [a, b, c] = [a.into_primitive(), b.into_primitive(), c.into_primitive()]
                .map(|t| contiguous(t.tensor()));
            recast(inference::<DO>(infer([&a, &b, &c])))
        }
        Err(args) => other(args),
    }
}

/// An input of an op as the autodiff graph's tensor, its values made
/// contiguous for the kernels (the node, where its gradient goes, is the
/// same).
fn contiguous_node(t: TensorPrimitive<Cpu>) -> FloatTensor<Cpu> {
    let mut t = t.tensor();
    t.primitive = contiguous(t.primitive);
    t
}

/// An inference op's output values as a tensor.
fn inference<const D: usize>(values: FlexTensor) -> Tensor<CpuInference, D> {
    Tensor::from_primitive(TensorPrimitive::Float(values))
}

/// `output`, computed by `op` from `parents`, as a tensor of the autodiff
/// graph: with `state` kept for `op`'s backward pass when any parent is
/// tracked, as a leaf otherwise.
pub(super) fn record<O: Backward<Flex, N>, const N: usize, const D: usize>(
    op: O,
    parents: [&FloatTensor<Cpu>; N],
    state: O::State,
    output: FlexTensor,
) -> Tensor<Cpu, D> {
    let out = match op
        .prepare::<NoCheckpointing>(parents.map(|p| p.node.clone()))
        .compute_bound()
        .stateful()
    {
        OpsKind::Tracked(prep) => prep.finish(state, output),
        OpsKind::UnTracked(prep) => prep.finish(output),
    };
    Tensor::from_primitive(TensorPrimitive::Float(out))
}

/// A contiguous `f32` flex tensor of `shape` holding `values`.
pub(super) fn flex_tensor(values: Vec<f32>, shape: burn::tensor::Shape) -> FlexTensor {
    FlexTensor::new(
        burn::tensor::Bytes::from_elems(values),
        Layout::contiguous(shape),
        DType::F32,
    )
}

/// Helpers for the ops' tests.
#[cfg(test)]
pub(in crate::model) mod test_support {
    use burn::tensor::backend::Backend;
    use burn::tensor::Tensor;

    pub fn values<B: Backend, const D: usize>(t: Tensor<B, D>) -> Vec<f32> {
        t.into_data().convert::<f32>().to_vec().expect("f32 data")
    }

    pub fn close(a: &[f32], b: &[f32], tol: f32) {
        assert_eq!(a.len(), b.len());
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!(
                (x - y).abs() <= tol * y.abs().max(1.0),
                "element {i}: {x} against {y}"
            );
        }
    }
}
