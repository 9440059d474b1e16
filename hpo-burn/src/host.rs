//! Whether a backend computes on this machine's CPU.
//!
//! Some work is organised differently there: dropout masks are drawn in bulk
//! on the host ([`crate::model::Dropout`]), and evaluation splits its batches
//! across rayon's threads ([`crate::train::evaluate`]), because burn-flex runs
//! element-wise ops on one thread. A GPU backend keeps burn's own way.
//!
//! Code generic over a backend reaches the CPU backend's tensors by
//! comparing types at run time: the backend is known at compile
//! time, but a bound naming it would have to be carried by every user.

use burn::backend::flex::FlexDevice;
use burn::tensor::backend::Backend;
use burn_flex::FlexTensor;
use std::any::{Any, TypeId};

/// True when `B` (autodiff or not) computes on the CPU through burn-flex,
/// the backend behind [`crate::Cpu`].
pub fn is_cpu<B: Backend>() -> bool {
    TypeId::of::<B::Device>() == TypeId::of::<FlexDevice>()
}

/// `a` as a `T` when `A` is `T`, `a` back otherwise.
pub(crate) fn cast<A: 'static, T: 'static>(a: A) -> Result<T, A> {
    let mut slot = Some(a);
    let taken = (&mut slot as &mut dyn Any)
        .downcast_mut::<Option<T>>()
        .and_then(Option::take);
    match (taken, slot) {
        (Some(t), _) => Ok(t),
        (None, Some(a)) => Err(a),
        (None, None) => unreachable!("a failed downcast leaves the value in place"),
    }
}

/// The inverse of a successful [`cast`]: `T` back as the caller's `A`.
pub(crate) fn recast<T: 'static, A: 'static>(t: T) -> A {
    match cast::<T, A>(t) {
        Ok(a) => a,
        Err(_) => unreachable!("recast undoes a cast that succeeded, so the types are one"),
    }
}

/// A contiguous, offset-free `f32` tensor: `t` itself when it already is.
pub(crate) fn contiguous(t: FlexTensor) -> FlexTensor {
    if t.is_contiguous() && t.layout().start_offset() == 0 {
        t
    } else {
        t.to_contiguous()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_backends_are_recognised() {
        assert!(is_cpu::<crate::Cpu>());
        assert!(is_cpu::<crate::CpuInference>());
    }

    #[test]
    fn cast_succeeds_only_between_equal_types() {
        assert_eq!(cast::<u32, u32>(7), Ok(7));
        assert_eq!(cast::<u32, i32>(7), Err(7));
        assert_eq!(recast::<u32, u32>(7), 7);
    }
}
