//! Ops that hpo computes itself on the CPU backend, each with its backward
//! pass; every other backend keeps burn's.
//!
//! burn-flex runs element-wise ops and reductions on one thread, each into a
//! new buffer, and copies transposed views element by element; burn's
//! autodiff composes layer norm from about eight such ops forward and
//! fifteen backward, and its exact GELU calls libm's `erff` and `expf` per
//! element. On [`crate::Cpu`] (training) and [`crate::CpuInference`]
//! (evaluation), [`linear`], [`embed`], [`gelu`], [`layer_norm`], [`split_heads`],
//! [`merge_heads`], [`attention_probs`] and [`dropout`] run [`crate::kernels`]' threaded kernels instead, each
//! registered with burn's autodiff graph as one op whose backward pass is
//! one fused kernel too. On any other backend (CUDA) they are burn's ops
//! (linear layers and layer norm as [`super::device_ops`] arranges them).
//!
//! Which backend a tensor lives on is a type, known at compile time but not
//! expressible as a bound the model could carry without every user naming
//! it; the dispatch compares types at run time ([`std::any::Any`]), which
//! costs a pointer comparison per call.

mod attention;
mod dropout;
mod embed;
mod gelu;
pub(super) mod graph;
mod heads;
mod layer_norm;
mod linear;

pub use attention::attention_probs;
pub use dropout::dropout;
pub use embed::embed;
pub use gelu::gelu;
pub use heads::{merge_heads, split_heads};
pub use layer_norm::layer_norm;
pub use linear::linear;
