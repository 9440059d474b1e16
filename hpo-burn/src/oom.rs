//! Out-of-memory recovery: classifying failures and recording what did not fit.
//!
//! A backend reports an allocation failure in one of two ways: as a panic
//! from deep inside a kernel launch or allocation (CubeCL's CUDA runtime, the
//! system allocator's `handle_alloc_error` is an abort and cannot be caught),
//! or as an [`ExecutionError`](burn::tensor::backend::ExecutionError) from
//! `B::sync`. Both are turned into one [`Error`] by [`classify`], so the
//! training loop's ladder (halve the micro-batch, double accumulation,
//! restart the epoch from its starting weights) has one thing to match on:
//! [`Error::OutOfMemory`]. The simulated device
//! ([`MemoryGuard`](crate::memory::MemoryGuard)) raises that same variant.
//!
//! A failure that poisons the device, such as a CUDA device-side assert, is
//! [`Error::Device`]: the ladder does not retry it (every later launch on that
//! context fails too), the trial fails with the cause, and an executor that
//! isolates trials in worker processes starts a fresh one.

use crate::error::Error;
use std::any::Any;

const OOM_MARKERS: &[&str] = &[
    "out of memory",
    "outofmemory",
    "out_of_memory",
    "cuda_error_out_of_memory",
    "memory allocation",
    "failed to allocate",
    "cannot allocate",
    "alloc error",
];

const POISON_MARKERS: &[&str] = &[
    "device-side assert",
    "cuda_error_assert",
    "cuda_error_illegal_address",
    "cuda_error_launch_failed",
    "illegal memory access",
    "unspecified launch failure",
    "device lost",
    "cuda_error_ecc_uncorrectable",
];

/// Classifies a failure message from a backend.
pub fn classify(message: &str) -> Error {
    let lower = message.to_ascii_lowercase();
    if POISON_MARKERS.iter().any(|m| lower.contains(m)) {
        Error::Device(message.to_string())
    } else if OOM_MARKERS.iter().any(|m| lower.contains(m)) {
        Error::OutOfMemory(message.to_string())
    } else {
        Error::Device(format!("backend panicked: {message}"))
    }
}

/// The message of a caught panic payload.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(e) = payload.downcast_ref::<Error>() {
        e.to_string()
    } else {
        "panic with a non-string payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification() {
        assert!(matches!(
            classify("CUDA_ERROR_OUT_OF_MEMORY: out of memory"),
            Error::OutOfMemory(_)
        ));
        assert!(matches!(
            classify("Failed to allocate 2 GiB on device"),
            Error::OutOfMemory(_)
        ));
        assert!(matches!(
            classify("device-side assert triggered"),
            Error::Device(_)
        ));
        let other = classify("index out of bounds").to_string();
        assert!(
            other.contains("backend panicked: index out of bounds"),
            "{other}"
        );
    }

    #[test]
    fn panic_payloads() {
        let p = std::panic::catch_unwind(|| std::panic::panic_any("boom".to_string())).unwrap_err();
        assert_eq!(panic_message(p.as_ref()), "boom");
    }
}
