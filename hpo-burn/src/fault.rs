//! Replays of how cubecl 0.10 fails on a real GPU, for tests on any machine.
//!
//! Recorded on an H200 (book: "Surviving OOM"): a failed allocation panics
//! on cubecl's device thread (`DSD-0-0`: "called `Result::unwrap()` on an
//! `Err` value: can't allocate buffer of size: 2345466880"), and what the
//! training loop's own thread sees next need not mention memory: a failed
//! read ("Memory page 0 doesn't exist", cubecl issues #1401 and #1531), a
//! panic from a burn reader ("Error while reading data: ... An error
//! happened during execution"), or a NaN loss. A "Memory page" error can
//! also come alone, from a reclaim race (cubecl #1384), with no allocation
//! failure: that is not out of memory.
//!
//! A [`Fault`] replays one of these sequences inside the training loop, at
//! the first micro-batch of a run whose micro-batch is at least the fault's
//! threshold, so a relaunch at half the micro-batch runs clean. Tests arm
//! it in a process with the environment variable [`FAULT_ENV`]
//! (`alloc-then-memory-page@16`: the kind, then the threshold), which also
//! reaches worker processes the executor starts. Nothing happens when the
//! variable is unset. The replayed allocation failure panics on a thread
//! named like cubecl's for a device type cubecl does not use (`DSD-9-0`),
//! and a run with a fault armed watches that thread as its own.

use crate::error::{Error, Result};
use crate::panic_guard::BackendThreads;
use burn::tensor::backend::ExecutionError;

/// The environment variable that arms a [`Fault`] in this process.
pub const FAULT_ENV: &str = "HPO_BURN_FAULT";

/// The allocation failure cubecl-cuda 0.10's device thread panics with.
pub const CUBECL_ALLOC_PANIC: &str =
    "called `Result::unwrap()` on an `Err` value: can't allocate buffer of size: 2345466880";
/// The read error every later operation of a poisoned cubecl client gets.
pub const CUBECL_MEMORY_PAGE: &str = "Memory page 0 doesn't exist";
/// The panic of burn's infallible readers after a failed execution.
pub const BURN_CALL_ERROR: &str = "Error while reading data: use `try_into_scalar` instead to \
     catch the error at runtime: An error happened during execution";

/// One of cubecl 0.10's failure sequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// A failed allocation, then a failed read: "Memory page 0 doesn't exist".
    AllocThenMemoryPage,
    /// A failed allocation, then burn's reader panicking on the calling thread.
    AllocThenCallError,
    /// A failed allocation, then a NaN loss.
    AllocThenNan,
    /// A "Memory page" read error with no allocation failure: not OOM.
    MemoryPageOnly,
}

/// A failure sequence and the smallest micro-batch it fires at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// The sequence.
    pub kind: FaultKind,
    /// It fires in runs whose micro-batch is at least this.
    pub min_micro: usize,
}

/// What the training loop does with an armed fault at a micro-batch.
pub(crate) enum Injected {
    /// The loss read back (NaN).
    Loss(f64),
}

impl Fault {
    /// Parses `kind@min_micro` (`alloc-then-memory-page`, `alloc-then-call-error`,
    /// `alloc-then-nan`, `memory-page-only`).
    pub fn parse(text: &str) -> Result<Self> {
        let (kind, min) = text.split_once('@').unwrap_or((text, "1"));
        let kind = match kind.trim() {
            "alloc-then-memory-page" => FaultKind::AllocThenMemoryPage,
            "alloc-then-call-error" => FaultKind::AllocThenCallError,
            "alloc-then-nan" => FaultKind::AllocThenNan,
            "memory-page-only" => FaultKind::MemoryPageOnly,
            other => {
                return Err(Error::config(format!(
                    "{FAULT_ENV}: unknown fault `{other}` (alloc-then-memory-page, \
                     alloc-then-call-error, alloc-then-nan, memory-page-only)"
                )))
            }
        };
        let min_micro = min.trim().parse().map_err(|_| {
            Error::config(format!("{FAULT_ENV}: `{min}` is not a micro-batch size"))
        })?;
        Ok(Fault { kind, min_micro })
    }

    /// The fault armed in this process, if any.
    pub fn from_env() -> Option<Self> {
        let text = std::env::var(FAULT_ENV).ok()?;
        match Fault::parse(&text) {
            Ok(f) => Some(f),
            Err(e) => {
                tracing::warn!("{e}; no fault armed");
                None
            }
        }
    }

    /// The backend threads a run with this fault armed watches: the replay's.
    pub fn threads() -> BackendThreads {
        BackendThreads::Cubecl("9-0".into())
    }

    /// Replays the sequence at a micro-batch of `micro`: `Ok(None)` when it
    /// does not fire there, else what the calling thread sees.
    pub(crate) fn inject(&self, micro: usize) -> Result<Option<Injected>> {
        if micro < self.min_micro {
            return Ok(None);
        }
        if self.kind != FaultKind::MemoryPageOnly {
            alloc_failure_on_device_thread();
        }
        match self.kind {
            FaultKind::AllocThenMemoryPage | FaultKind::MemoryPageOnly => {
                crate::read::checked::<f64>(
                    "the training loss",
                    Err(ExecutionError::WithContext {
                        reason: CUBECL_MEMORY_PAGE.into(),
                    }),
                )
                .map(|_| None)
            }
            FaultKind::AllocThenCallError => Err(crate::oom::classify(BURN_CALL_ERROR)),
            FaultKind::AllocThenNan => Ok(Some(Injected::Loss(f64::NAN))),
        }
    }
}

/// A panic on a thread named like cubecl's device thread, with its message.
// Panicking on that thread is the replay: it is what cubecl does.
#[allow(clippy::panic)]
fn alloc_failure_on_device_thread() {
    crate::panic_guard::install();
    let spawned = std::thread::Builder::new()
        .name("DSD-9-0".into())
        .spawn(|| std::panic::panic_any(CUBECL_ALLOC_PANIC.to_owned()));
    if let Ok(handle) = spawned {
        let _ = handle.join();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn faults_parse_with_their_threshold() {
        assert_eq!(
            Fault::parse("alloc-then-nan@16").unwrap(),
            Fault {
                kind: FaultKind::AllocThenNan,
                min_micro: 16
            }
        );
        assert_eq!(
            Fault::parse("memory-page-only").unwrap().min_micro,
            1,
            "no threshold: every micro-batch"
        );
        let e = Fault::parse("oops@2").unwrap_err().to_string();
        assert!(e.contains("unknown fault `oops`"), "{e}");
        assert!(Fault::parse("alloc-then-nan@x").is_err());
    }

    #[test]
    fn a_fault_below_its_threshold_does_nothing() {
        let f = Fault::parse("alloc-then-memory-page@8").unwrap();
        assert!(matches!(f.inject(4), Ok(None)));
    }
}
