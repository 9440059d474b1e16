//! What a failure's text says: out of memory, a poisoned device, or neither.
//!
//! One classifier for every place a failure is read: a trial's error or
//! panic in its worker, the last lines of a dead worker's stderr (the
//! coordinator), and hpo-burn's training loop (panics and read errors from
//! the backend). Its markers are the messages the backends really print:
//!
//! * cubecl-cuda 0.10.0 (burn-cuda 0.21.0), a failed allocation on its
//!   device thread, seen on an NVIDIA H200 on 2026-11-26:
//!   "called `Result::unwrap()` on an `Err` value: can't allocate buffer of
//!   size: 2345466880" (`src/compute/server.rs:124`);
//! * the CUDA driver's `CUDA_ERROR_OUT_OF_MEMORY` and its text "out of
//!   memory"; PyTorch's "CUDA out of memory"; cubecl's `OutOfMemory` error;
//! * Rust's allocator ("memory allocation of N bytes failed") and common
//!   phrasings ("failed to allocate", "cannot allocate").
//!
//! A device that is poisoned (a device-side assert, an illegal address, a
//! failed launch, an uncorrectable ECC error, a lost device) wins over an
//! allocation failure named in the same text: the device is gone whatever
//! the batch, so a smaller relaunch would not help. Texts that only say a
//! cubecl memory page does not exist ("Memory page 0 doesn't exist") are
//! neither: that error follows a failed allocation in the same process
//! (cubecl issues #1401, #1531) but also comes from a reclaim race with no
//! allocation failure (#1384). hpo-burn counts it as out of memory only
//! when it saw the allocation fail in the same run.

/// The allocation-failure phrasings, lowercase.
const OOM_MARKERS: &[&str] = &[
    "out of memory",
    "out_of_memory",
    "outofmemory",
    "can't allocate buffer",
    "can't allocate",
    "cannot allocate",
    "failed to allocate",
    "memory allocation of",
];

/// Phrasings of a device that is unusable for the rest of the process, lowercase.
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

/// What a failure text says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureText {
    /// An allocation failed: a smaller micro-batch may fit.
    OutOfMemory,
    /// The device is unusable for the rest of the process.
    PoisonedDevice,
    /// Anything else.
    Other,
}

/// Classifies an error message, panic text or stderr excerpt.
pub fn classify_text(text: &str) -> FailureText {
    let lower = text.to_ascii_lowercase();
    if POISON_MARKERS.iter().any(|m| lower.contains(m)) {
        FailureText::PoisonedDevice
    } else if OOM_MARKERS.iter().any(|m| lower.contains(m)) {
        FailureText::OutOfMemory
    } else {
        FailureText::Other
    }
}

/// Whether a text reports an allocation failure (and not a poisoned device).
pub fn is_oom_text(text: &str) -> bool {
    classify_text(text) == FailureText::OutOfMemory
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_backend_messages_are_recognised() {
        // cubecl-cuda 0.10's device thread on an H200.
        assert!(is_oom_text(
            "hpo-burn: backend thread 'DSD-0-0' panicked at .../cubecl-cuda-0.10.0/src/compute/\
             server.rs:124: called `Result::unwrap()` on an `Err` value: can't allocate buffer \
             of size: 2345466880"
        ));
        assert!(is_oom_text("CUDA error: out of memory"));
        assert!(is_oom_text("CUDA_ERROR_OUT_OF_MEMORY"));
        assert!(is_oom_text("memory allocation of 1024 bytes failed"));
        assert!(is_oom_text("Failed to allocate 2 GiB on device"));
        assert!(!is_oom_text("index out of bounds"));
        // A page that does not exist is not, by itself, an allocation failure.
        assert_eq!(
            classify_text("Memory page 0 doesn't exist"),
            FailureText::Other
        );
    }

    #[test]
    fn a_poisoned_device_wins_over_an_allocation_failure() {
        assert_eq!(
            classify_text("device-side assert triggered"),
            FailureText::PoisonedDevice
        );
        assert_eq!(
            classify_text("CUDA_ERROR_ILLEGAL_ADDRESS after failed to allocate"),
            FailureText::PoisonedDevice
        );
        assert!(!is_oom_text(
            "CUDA_ERROR_ILLEGAL_ADDRESS after failed to allocate"
        ));
    }
}
