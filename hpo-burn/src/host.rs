//! Whether a backend computes on this machine's CPU.
//!
//! Some work is organised differently there: dropout masks are drawn in bulk
//! on the host ([`crate::model::Dropout`]), and evaluation splits its batches
//! across rayon's threads ([`crate::train::evaluate`]), because burn-flex runs
//! element-wise ops on one thread. A GPU backend keeps burn's own way.

use burn::backend::flex::FlexDevice;
use burn::tensor::backend::Backend;
use std::any::TypeId;

/// True when `B` (autodiff or not) computes on the CPU through burn-flex,
/// the backend behind [`crate::Cpu`].
pub fn is_cpu<B: Backend>() -> bool {
    TypeId::of::<B::Device>() == TypeId::of::<FlexDevice>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_backends_are_recognised() {
        assert!(is_cpu::<crate::Cpu>());
        assert!(is_cpu::<crate::CpuInference>());
    }
}
