//! Out-of-memory recovery: classifying failures and recording what did not fit.
//!
//! A backend reports an allocation failure in one of three ways: as a panic
//! on the calling thread from deep inside a kernel launch or allocation (the
//! system allocator's `handle_alloc_error` is an abort and cannot be
//! caught), as panics on the backend's own threads (cubecl's device-service
//! threads, see [`crate::panic_guard`]), or as an
//! [`ExecutionError`](burn::tensor::backend::ExecutionError) when a result
//! is read back ([`crate::read`]). A panic on the calling thread is turned
//! into an [`Error`] by [`classify`], so the training loop's ladder (halve
//! the micro-batch, double accumulation, restart the epoch from its starting
//! weights) has one thing to match on: [`Error::OutOfMemory`]. The simulated
//! device ([`MemoryGuard`](crate::memory::MemoryGuard)) raises that same
//! variant. Execution errors and backend-thread panics become
//! [`Error::Execution`] and [`Error::BackendPanics`] instead, which the
//! ladder does not retry: they leave a GPU unusable for the rest of the
//! process, so only a fresh process (the executor's relaunch) can recover.
//! [`is_out_of_memory`] is the one classification all three share, and it
//! is hpo-core's: the process executor reads workers' errors and stderr
//! with the same markers.
//!
//! A failure that poisons the device, such as a CUDA device-side assert, is
//! [`Error::Device`]: the ladder does not retry it (every later launch on that
//! context fails too), the trial fails with the cause, and an executor that
//! isolates trials in worker processes starts a fresh one.

use crate::error::Error;
use hpo_core::executor::{classify_text, FailureText};
use std::any::Any;

/// Whether a backend's failure message reports an allocation failure
/// (out of memory), as opposed to a poisoned device or any other failure:
/// hpo-core's classifier ([`hpo_core::executor::classify_text`], with
/// cubecl 0.10's real wording), shared with the process executor. A message
/// naming both (a device-side assert after a failed allocation) is not an
/// OOM: the device is gone whatever the batch.
pub fn is_out_of_memory(message: &str) -> bool {
    classify_text(message) == FailureText::OutOfMemory
}

/// Classifies a failure message from a backend.
pub fn classify(message: &str) -> Error {
    match classify_text(message) {
        FailureText::PoisonedDevice => Error::Device(message.to_string()),
        FailureText::OutOfMemory => Error::OutOfMemory(message.to_string()),
        FailureText::Other => Error::Device(format!("backend panicked: {message}")),
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
        // cubecl's device-service thread on a real CUDA OOM (book, "Surviving OOM").
        assert!(matches!(
            classify("can't allocate buffer of size 3221225472"),
            Error::OutOfMemory(_)
        ));
        assert!(!is_out_of_memory("Memory page 0 doesn't exist"));
        assert!(!is_out_of_memory(
            "CUDA_ERROR_ILLEGAL_ADDRESS after failed to allocate"
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
