//! Panics on the backend's own threads: the first is logged, the rest counted.
//!
//! On a GPU, burn-cuda runs kernels and allocations on cubecl's
//! device-service threads (named `DSU-<type>-<index>` and
//! `DSD-<type>-<index>`). When an allocation fails there, that thread panics,
//! and it panics again on every later allocation: thousands of panic
//! messages on stderr for one out-of-memory (the book's "Surviving OOM"
//! chapter records it on an H100). The caller only hears of it when it reads
//! a result back ([`crate::read`]), and may not hear of it at all.
//!
//! [`install`] (called by the training loop, idempotent) puts a panic hook in
//! front of the one already installed. A panic on a *backend thread* (one
//! whose name is cubecl's, or one with no name, which is how cubecl's
//! helper threads and burn's thread pools are spawned) is printed once, with
//! its thread, location and message; every later one is only counted, and
//! [`report`] prints the count once, when the run ends. Panics on any other
//! thread (the main thread, test threads, named user threads) go to the
//! previous hook untouched.
//!
//! The counts also make a run fail instead of returning numbers computed
//! while the backend was failing: [`PanicWatch`] remembers the count when a
//! run starts and [`PanicWatch::check`] turns any new backend panic into
//! [`Error::BackendPanics`] (out of memory when one of them reported a failed
//! allocation, see [`crate::oom::is_out_of_memory`]).

use crate::error::{Error, Result};
use crate::oom::is_out_of_memory;
use std::panic::PanicHookInfo;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

static INSTALL: Once = Once::new();
static PANICS: AtomicU64 = AtomicU64::new(0);
static OOM_PANICS: AtomicU64 = AtomicU64::new(0);
static UNPRINTED: AtomicU64 = AtomicU64::new(0);
static LAST: Mutex<Option<(String, String)>> = Mutex::new(None);

/// Puts the backend-thread panic guard in front of the current panic hook,
/// once per process; later calls do nothing. Panics on threads that are not
/// the backend's still reach the previous hook.
pub fn install() {
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let thread = std::thread::current();
            if is_backend_thread(thread.name()) {
                record(thread.name().unwrap_or("<unnamed>"), info);
            } else {
                previous(info);
            }
        }));
    });
}

/// Whether a thread of this name belongs to the backend: cubecl's
/// device-service threads (`DSU-…`, `DSD-…`) and unnamed threads. The main
/// thread and every named thread are someone else's.
pub fn is_backend_thread(name: Option<&str>) -> bool {
    match name {
        None => true,
        Some(n) => n.starts_with("DSU-") || n.starts_with("DSD-"),
    }
}

fn record(thread: &str, info: &PanicHookInfo<'_>) {
    let message = payload_text(info);
    if is_out_of_memory(&message) {
        OOM_PANICS.fetch_add(1, Ordering::SeqCst);
    }
    if let Ok(mut last) = LAST.lock() {
        *last = Some((thread.to_owned(), message.clone()));
    }
    if PANICS.fetch_add(1, Ordering::SeqCst) == 0 {
        let location = info
            .location()
            .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
        eprintln!(
            "hpo-burn: backend thread '{thread}' panicked{location}: {message}\n\
             hpo-burn: further panics on backend threads are counted, not printed; \
             the count is reported when the run ends"
        );
    } else {
        UNPRINTED.fetch_add(1, Ordering::SeqCst);
    }
}

fn payload_text(info: &PanicHookInfo<'_>) -> String {
    let payload = info.payload();
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a non-string panic payload".to_owned()
    }
}

/// Backend-thread panics seen by the guard since the process started.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BackendPanics {
    /// How many.
    pub count: u64,
    /// How many of them reported a failed allocation.
    pub out_of_memory: u64,
    /// The thread and message of the last one.
    pub last: Option<(String, String)>,
}

/// The panics counted so far.
pub fn backend_panics() -> BackendPanics {
    BackendPanics {
        count: PANICS.load(Ordering::SeqCst),
        out_of_memory: OOM_PANICS.load(Ordering::SeqCst),
        last: LAST.lock().ok().and_then(|l| l.clone()),
    }
}

/// Prints how many backend-thread panics were counted and not printed since
/// the last report, if any, and returns that number. Called when a run ends.
pub fn report() -> u64 {
    let unprinted = UNPRINTED.swap(0, Ordering::SeqCst);
    if unprinted > 0 {
        eprintln!("hpo-burn: {unprinted} more panics on backend threads were not printed");
        tracing::warn!(
            count = unprinted,
            "more panics on backend threads were not printed"
        );
    }
    unprinted
}

/// Watches one run for backend-thread panics.
#[derive(Debug, Clone, Copy)]
pub struct PanicWatch {
    start: u64,
    start_oom: u64,
}

impl PanicWatch {
    /// Installs the guard and remembers the counts now.
    pub fn start() -> Self {
        install();
        PanicWatch {
            start: PANICS.load(Ordering::SeqCst),
            start_oom: OOM_PANICS.load(Ordering::SeqCst),
        }
    }

    /// [`Error::BackendPanics`] if a backend thread panicked since [`PanicWatch::start`].
    pub fn check(&self) -> Result<()> {
        let now = backend_panics();
        let count = now.count.saturating_sub(self.start);
        if count == 0 {
            return Ok(());
        }
        let (thread, message) = now.last.unwrap_or_default();
        Err(Error::BackendPanics {
            count,
            out_of_memory: now.out_of_memory > self.start_oom,
            thread,
            message,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_threads_are_cubecls_and_unnamed_ones() {
        assert!(is_backend_thread(Some("DSD-0-0")));
        assert!(is_backend_thread(Some("DSU-3-1")));
        assert!(is_backend_thread(None));
        assert!(!is_backend_thread(Some("main")));
        assert!(!is_backend_thread(Some("panic_guard::tests::x")));
    }
}
