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

/// `x` through `train` on [`Cpu`], through `infer` on [`CpuInference`],
/// through `other` on any other backend.
pub(super) fn dispatch<B: Backend, const DI: usize, const DO: usize>(
    x: Tensor<B, DI>,
    train: impl FnOnce(Tensor<Cpu, DI>) -> Tensor<Cpu, DO>,
    infer: impl FnOnce(Tensor<CpuInference, DI>) -> Tensor<CpuInference, DO>,
    other: impl FnOnce(Tensor<B, DI>) -> Tensor<B, DO>,
) -> Tensor<B, DO> {
    let x = match cast::<_, Tensor<Cpu, DI>>(x) {
        Ok(x) => return recast(train(x)),
        Err(x) => x,
    };
    match cast::<_, Tensor<CpuInference, DI>>(x) {
        Ok(x) => recast(infer(x)),
        Err(x) => other(x),
    }
}

/// An input of an op as the autodiff graph's tensor, its values made
/// contiguous for the kernels (the node, where its gradient goes, is the
/// same).
pub(super) fn contiguous_node(t: TensorPrimitive<Cpu>) -> FloatTensor<Cpu> {
    let mut t = t.tensor();
    t.primitive = contiguous(t.primitive);
    t
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
pub(super) mod test_support {
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
