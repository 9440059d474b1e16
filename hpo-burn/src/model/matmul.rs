//! Matrix products on CUDA: a table of cubek's kernels chosen by shape, or
//! NVIDIA's cuBLAS on request.
//!
//! Without autotuning, burn-cubecl 0.21 runs every product through one
//! kernel (cubek's `SimpleCyclicCmma` with default tiles). [`matmul`] picks
//! the kernel from a small table by shape instead, trying the next entry
//! when one cannot launch on a shape and burn's own product last, and
//! registers its own backward pass (the two gradient products by the same
//! route) with burn's autodiff graph. With `HPO_CUDA_MATMUL=cublas` it runs
//! products through cuBLAS (hpo-burn's `model::cublas`, loaded at run time, queued
//! on cubecl's stream) where the library loads, the table where cuBLAS
//! cannot take a product.
//!
//! The table: on an H100, cubecl's own autotuner timed other kernels far
//! faster than burn's default on BERT's shapes (Hopper's TMA loads with
//! warp-specialised stages, `SpecializedTmaMma`, ran BERT-large's
//! feed-forward product at 143 TFLOP/s where a BERT-base step's products
//! averaged 38; `bench/results/gpu/`), but autotuning itself compiles and
//! times ~28 kernels per shape, minutes per worker process, so the table
//! fixes the choice by shape.
//!
//! Measured on an H200 (`bench/results/gpu_check.md`, 2026-11-27): the
//! table ran each product of a BERT-base 32 x 512 step 1.4-2.1x faster than
//! burn's kernel and trained 1.37x (BERT-base 32 x 512) and 1.41x
//! (BERT-large 16 x 384) faster. cuBLAS ran the large products at 196-316
//! TFLOP/s (the table's best: 84), results within 4.3e-5 relative of
//! burn's, and trained those two shapes 1.28x and 1.12x faster than the
//! table; but `criteria`'s small trials (16-64 texts of 32-56 tokens) took
//! 10-40 % longer with it, trial for trial, several processes sharing the
//! device, which is why it is not the default (the suspects, not yet
//! separated: `super::cublas`'s module documentation). The table's TMA
//! kernels take longer
//! to compile (about 50 s more for a first small trial with an empty kernel
//! cache, nothing once the cache holds them); cuBLAS compiles nothing.
//!
//! `HPO_CUDA_MATMUL=cublas` asks for cuBLAS, `HPO_CUDA_MATMUL=burn` keeps
//! burn's kernel (to compare, or as a way out); any other value, or none,
//! the table. Every other backend (the CPU, CUDA built with fusion, whose
//! tensors are another type) gets burn's product.

use burn::tensor::backend::Backend;
use burn::tensor::Tensor;

/// `lhs · rhs` over the last two dimensions, batched over the others:
/// burn's [`Tensor::matmul`], but on CUDA (burn-cuda without fusion, f32 or
/// bf16, with or without autodiff) by cuBLAS or a kernel chosen by shape
/// when the two have the same batch dimensions (a broadcast product takes
/// burn's).
pub fn matmul<B: Backend, const D: usize>(lhs: Tensor<B, D>, rhs: Tensor<B, D>) -> Tensor<B, D> {
    #[cfg(feature = "cuda")]
    let (lhs, rhs) = match cuda::matmul(lhs, rhs) {
        Ok(out) => return out,
        Err(args) => args,
    };
    lhs.matmul(rhs)
}

/// The kernels a CUDA product can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kernel {
    /// NVIDIA's cuBLAS (`model::cublas`; `HPO_CUDA_MATMUL=cublas`), the
    /// table where it cannot take a product.
    Cublas,
    /// The table of cubek's kernels by shape.
    Table,
    /// burn's own product.
    Burn,
}

/// The kernel `HPO_CUDA_MATMUL` asks for: `burn`, `cublas`, or (anything
/// else, or unset) the table. What runs can differ: cuBLAS that does not
/// load gives the table (`product_kernel`).
pub(crate) fn requested_kernel() -> Kernel {
    match std::env::var("HPO_CUDA_MATMUL").as_deref() {
        Ok("burn") => Kernel::Burn,
        Ok("cublas") => Kernel::Cublas,
        _ => Kernel::Table,
    }
}

/// Which kernel runs CUDA products in this process: `"cublas"`,
/// `"table"` or `"burn"` (`HPO_CUDA_MATMUL`, read once; unset, the table;
/// `cublas` where the library does not load, the table), `"burn"` without
/// the `cuda` feature.
#[cfg(feature = "cuda")]
pub fn product_kernel() -> &'static str {
    match cuda::kernel() {
        Kernel::Cublas => "cublas",
        Kernel::Table => "table",
        Kernel::Burn => "burn",
    }
}

/// Which kernel runs CUDA products: burn's, without the `cuda` feature.
#[cfg(not(feature = "cuda"))]
pub fn product_kernel() -> &'static str {
    "burn"
}

/// The table's classes of products, from what cubecl's autotuner chose on
/// an H100 for BERT-base's shapes (f32, TF32 tensor cores).
#[cfg(any(feature = "cuda", test))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Batched with a short inner dimension (attention's `q · kᵀ`, k = 64):
    /// TMA loads, several rows per plane.
    BatchedThin,
    /// Batched otherwise (attention's `p · v` and the gradients):
    /// TMA loads.
    Batched,
    /// One product of at least 256 x 256 outputs (the linear layers, their
    /// gradients): TMA loads with warp-specialised stages.
    Large,
    /// A small product (the pooler and the head, one row per sequence).
    Small,
}

#[cfg(any(feature = "cuda", test))]
impl Shape {
    fn of(batch: usize, m: usize, n: usize, k: usize) -> Self {
        if batch > 1 {
            if k <= 128 {
                Self::BatchedThin
            } else {
                Self::Batched
            }
        } else if m >= 256 && n >= 256 {
            Self::Large
        } else {
            Self::Small
        }
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::{Kernel, Shape};
    use crate::host::{cast, recast};
    use crate::model::cublas;
    use burn::backend::autodiff::checkpoint::base::Checkpointer;
    use burn::backend::autodiff::checkpoint::strategy::NoCheckpointing;
    use burn::backend::autodiff::grads::Gradients;
    use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
    use burn::backend::Autodiff;
    use burn::cubecl::cuda::CudaRuntime;
    use burn::tensor::ops::{FloatTensor, FloatTensorOps};
    use burn::tensor::{bf16, Tensor, TensorMetadata, TensorPrimitive};
    use burn_cubecl::kernel::matmul::init_matmul_output;
    use burn_cubecl::tensor::CubeTensor;
    use burn_cubecl::{CubeBackend, FloatElement};
    use cubek::matmul::components::tile::TileMatmulKind;
    use cubek::matmul::definition::{MatmulElems, MatmulGlobalElems};
    use cubek::matmul::launch::{launch_ref, Strategy};
    use cubek::matmul::routines::simple::SimpleArgs;
    use cubek::matmul::routines::BlueprintStrategy;
    use cubek::std::InputBinding;
    use std::sync::OnceLock;

    /// burn-cuda's backend without fusion, for float element `F`.
    type Inner<F> = CubeBackend<CudaRuntime, F, i32, u8>;
    type Args<B, const D: usize> = (Tensor<B, D>, Tensor<B, D>);

    /// [`super::requested_kernel`], read once per process, with cuBLAS
    /// where the library loads, else the table (with a warning).
    pub(super) fn kernel() -> Kernel {
        static KERNEL: OnceLock<Kernel> = OnceLock::new();
        *KERNEL.get_or_init(|| match super::requested_kernel() {
            Kernel::Cublas => match cublas::gemm_ready() {
                Ok(()) => Kernel::Cublas,
                Err(why) => {
                    tracing::warn!("HPO_CUDA_MATMUL=cublas, but {why}: products run on the table");
                    Kernel::Table
                }
            },
            other => other,
        })
    }

    /// A product cuBLAS did not take goes to the table; each reason is
    /// logged once per process.
    fn not_by_cublas(why: &str) {
        static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
        if let Ok(mut seen) = SEEN.lock() {
            if !seen.iter().any(|s| s == why) {
                tracing::info!("a product cuBLAS did not take ({why}) runs on the table");
                seen.push(why.to_string());
            }
        }
    }

    /// The product on a backend this path serves, or the arguments back.
    pub(super) fn matmul<B: burn::tensor::backend::Backend, const D: usize>(
        lhs: Tensor<B, D>,
        rhs: Tensor<B, D>,
    ) -> Result<Tensor<B, D>, Args<B, D>> {
        if kernel() == Kernel::Burn || lhs.dims()[..D - 2] != rhs.dims()[..D - 2] {
            return Err((lhs, rhs));
        }
        let args = match by_element::<B, D, f32>((lhs, rhs)) {
            Ok(out) => return Ok(out),
            Err(args) => args,
        };
        by_element::<B, D, bf16>(args)
    }

    fn by_element<B: burn::tensor::backend::Backend, const D: usize, F: FloatElement>(
        args: Args<B, D>,
    ) -> Result<Tensor<B, D>, Args<B, D>> {
        let args = match cast::<_, Args<Autodiff<Inner<F>>, D>>(args) {
            Ok((lhs, rhs)) => return Ok(recast(tracked::<F, D>(lhs, rhs))),
            Err(args) => args,
        };
        match cast::<_, Args<Inner<F>, D>>(args) {
            Ok((lhs, rhs)) => {
                let out =
                    product::<F>(lhs.into_primitive().tensor(), rhs.into_primitive().tensor());
                Ok(recast(Tensor::<Inner<F>, D>::from_primitive(
                    TensorPrimitive::Float(out),
                )))
            }
            Err(args) => Err(args),
        }
    }

    /// The product as a node of burn's autodiff graph, keeping each input
    /// only when the other one's gradient needs it (as burn does).
    fn tracked<F: FloatElement, const D: usize>(
        lhs: Tensor<Autodiff<Inner<F>>, D>,
        rhs: Tensor<Autodiff<Inner<F>>, D>,
    ) -> Tensor<Autodiff<Inner<F>>, D> {
        let lhs: FloatTensor<Autodiff<Inner<F>>> = lhs.into_primitive().tensor();
        let rhs: FloatTensor<Autodiff<Inner<F>>> = rhs.into_primitive().tensor();
        let (lhs_tracked, rhs_tracked) = (lhs.is_tracked(), rhs.is_tracked());
        let out = product::<F>(lhs.primitive.clone(), rhs.primitive.clone());
        let t = match Product
            .prepare::<NoCheckpointing>([lhs.node.clone(), rhs.node.clone()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(
                (
                    rhs_tracked.then_some(lhs.primitive),
                    lhs_tracked.then_some(rhs.primitive),
                ),
                out,
            ),
            OpsKind::UnTracked(prep) => prep.finish(out),
        };
        Tensor::from_primitive(TensorPrimitive::Float(t))
    }

    /// The product's node: its state is the inputs the gradients need.
    #[derive(Debug)]
    struct Product;

    impl<F: FloatElement> Backward<Inner<F>, 2> for Product {
        type State = (
            Option<CubeTensor<CudaRuntime>>,
            Option<CubeTensor<CudaRuntime>>,
        );

        fn backward(self, ops: Ops<Self::State, 2>, grads: &mut Gradients, _: &mut Checkpointer) {
            let (lhs, rhs) = ops.state;
            let [lhs_node, rhs_node] = ops.parents;
            let grad = grads.consume::<Inner<F>>(&ops.node);
            if let (Some(node), Some(rhs)) = (lhs_node, rhs) {
                let d = product::<F>(grad.clone(), transpose::<F>(rhs));
                grads.register::<Inner<F>>(node.id, d);
            }
            if let (Some(node), Some(lhs)) = (rhs_node, lhs) {
                let d = product::<F>(transpose::<F>(lhs), grad);
                grads.register::<Inner<F>>(node.id, d);
            }
        }
    }

    /// The last two dimensions swapped (a view).
    fn transpose<F: FloatElement>(t: CubeTensor<CudaRuntime>) -> CubeTensor<CudaRuntime> {
        let rank = t.shape().num_dims();
        Inner::<F>::float_swap_dims(t, rank - 2, rank - 1)
    }

    /// The table's kernels for a shape, in order.
    fn strategies(shape: Shape) -> Vec<Strategy> {
        let simple_tma = |multi_rows, tile_matmul| {
            BlueprintStrategy::Inferred(SimpleArgs {
                multi_rows,
                tile_matmul,
            })
        };
        match shape {
            Shape::BatchedThin => vec![Strategy::SimpleTmaCmma(simple_tma(
                true,
                TileMatmulKind::Cmma,
            ))],
            Shape::Batched => vec![Strategy::SimpleTmaMma(simple_tma(
                false,
                TileMatmulKind::Mma,
            ))],
            Shape::Large => vec![
                Strategy::SpecializedTmaMma(BlueprintStrategy::Inferred(().into())),
                Strategy::SimpleTmaCmma(simple_tma(true, TileMatmulKind::Cmma)),
            ],
            Shape::Small => vec![Strategy::SpecializedCyclicMma(BlueprintStrategy::Inferred(
                ().into(),
            ))],
        }
    }

    /// `lhs · rhs` by cuBLAS (when `HPO_CUDA_MATMUL=cublas`), else the
    /// first of the table's kernels that launches on the shape, else
    /// burn's product.
    fn product<F: FloatElement>(
        lhs: CubeTensor<CudaRuntime>,
        rhs: CubeTensor<CudaRuntime>,
    ) -> CubeTensor<CudaRuntime> {
        let (ls, rs) = (lhs.shape(), rhs.shape());
        let rank = ls.num_dims();
        let (ld, rd) = (ls.as_slice(), rs.as_slice());
        let batch = ld[..rank - 2].iter().product::<usize>();
        let (m, k, n) = (ld[rank - 2], ld[rank - 1], rd[rank - 1]);
        let dtype = lhs.dtype;
        let out = init_matmul_output(&lhs, &rhs, dtype);
        if kernel() == Kernel::Cublas {
            match cublas::gemm(&lhs, &rhs, &out) {
                Ok(()) => return out,
                Err(why) => not_by_cublas(&why),
            }
        }
        for strategy in strategies(Shape::of(batch, m, n, k)) {
            let mut elems = MatmulElems::from_globals(&MatmulGlobalElems {
                lhs: dtype.into(),
                rhs: dtype.into(),
                out: dtype.into(),
            });
            let launched = launch_ref(
                &strategy,
                &out.client,
                InputBinding::new(lhs.clone().binding(), dtype.into()),
                InputBinding::new(rhs.clone().binding(), dtype.into()),
                out.clone().binding(),
                &mut elems,
            );
            if launched.is_ok() {
                return out;
            }
        }
        Inner::<F>::float_matmul(lhs, rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::cpu_ops::graph::test_support::values;
    use crate::{Cpu, CpuInference};
    use burn::tensor::{Distribution, Tensor};

    #[test]
    fn shapes_fall_in_the_classes_the_autotuner_measured() {
        // BERT-base 32 x 512: the feed-forward product, its weight's
        // gradient, attention's two products, the head.
        assert_eq!(Shape::of(1, 16384, 3072, 768), Shape::Large);
        assert_eq!(Shape::of(1, 768, 3072, 16384), Shape::Large);
        assert_eq!(Shape::of(384, 512, 512, 64), Shape::BatchedThin);
        assert_eq!(Shape::of(384, 512, 64, 512), Shape::Batched);
        assert_eq!(Shape::of(1, 32, 2, 768), Shape::Small);
        assert_eq!(Shape::of(1, 32, 768, 768), Shape::Small);
    }

    #[test]
    fn off_cuda_the_product_is_burns() {
        let device = Default::default();
        let a = Tensor::<CpuInference, 3>::random([2, 5, 7], Distribution::Default, &device);
        let b = Tensor::<CpuInference, 3>::random([2, 7, 3], Distribution::Default, &device);
        assert_eq!(values(matmul(a.clone(), b.clone())), values(a.matmul(b)));
        let a = Tensor::<Cpu, 2>::random([4, 6], Distribution::Default, &device).require_grad();
        let b = Tensor::<Cpu, 2>::random([6, 2], Distribution::Default, &device).require_grad();
        let grads = matmul(a.clone(), b.clone()).sum().backward();
        let ours = values(a.grad(&grads).expect("a's gradient"));
        let grads = a.clone().matmul(b).sum().backward();
        assert_eq!(ours, values(a.grad(&grads).expect("a's gradient")));
    }
}
