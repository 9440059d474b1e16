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
//! while the backend was failing: [`PanicWatch`] remembers the counts when a
//! run starts and [`PanicWatch::check`] turns any new backend panic into
//! [`Error::BackendPanics`] (out of memory when one of them reported a failed
//! allocation, see [`crate::oom::is_out_of_memory`]); [`PanicWatch::settle`]
//! makes such an allocation failure the run's error whatever the calling
//! thread saw next.
//!
//! The evidence belongs to the run, not to the process: a run watches only
//! the backend threads of its own device ([`BackendThreads`]). cubecl names
//! its threads after the device (`DSD-<type>-<index>`), so a run on CUDA
//! device 1 is not failed by an allocation that failed on device 0, and a
//! run on the CPU (whose thread pool hands a panic back to the thread that
//! asked, where the training loop classifies it) watches none: two CPU
//! trials on threads of one process cannot fail each other.

use crate::error::{Error, Result};
use crate::oom::is_out_of_memory;
use std::collections::HashMap;
use std::panic::PanicHookInfo;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};

static INSTALL: Once = Once::new();
static PANICS: AtomicU64 = AtomicU64::new(0);
static OOM_PANICS: AtomicU64 = AtomicU64::new(0);
static UNPRINTED: AtomicU64 = AtomicU64::new(0);
static LAST: Mutex<Option<(String, String)>> = Mutex::new(None);
/// Counts by thread key: `<type>-<index>` of cubecl's device threads, `""`
/// for unnamed threads.
static BY_KEY: Mutex<Option<HashMap<String, Counts>>> = Mutex::new(None);

#[derive(Debug, Clone, Default)]
struct Counts {
    panics: u64,
    oom: u64,
    last: Option<(String, String)>,
    last_oom: Option<(String, String)>,
}

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

/// The device part of a backend thread's name (`DSD-0-1` → `0-1`), `""` for
/// an unnamed thread.
fn thread_key(name: &str) -> String {
    name.strip_prefix("DSD-")
        .or_else(|| name.strip_prefix("DSU-"))
        .unwrap_or("")
        .to_owned()
}

/// Which backend threads' panics belong to a run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum BackendThreads {
    /// None: the CPU backend, whose thread pool hands a panic back to the
    /// thread that asked (and the training loop classifies it there).
    #[default]
    None,
    /// cubecl's device-service threads of one device, by the `<type>-<index>`
    /// of their names (`"0-1"`: CUDA device 1), and unnamed helper threads.
    Cubecl(String),
    /// Every backend thread.
    All,
}

impl BackendThreads {
    /// The threads of CUDA device `index` of this process (cubecl's CUDA
    /// runtime has device type 0).
    pub fn cuda(index: usize) -> Self {
        BackendThreads::Cubecl(format!("0-{index}"))
    }

    /// The threads of the device a backend computes on: cubecl's of that
    /// CUDA device (`cuda` feature), none on the CPU.
    pub fn of_device<B: burn::tensor::backend::Backend>(device: &B::Device) -> Self {
        #[cfg(feature = "cuda")]
        {
            let any: &dyn std::any::Any = device;
            if let Some(d) = any.downcast_ref::<burn::backend::cuda::CudaDevice>() {
                return BackendThreads::cuda(d.index);
            }
        }
        let _ = device;
        BackendThreads::None
    }

    fn covers(&self, key: &str) -> bool {
        match self {
            BackendThreads::None => false,
            BackendThreads::All => true,
            BackendThreads::Cubecl(k) => key.is_empty() || key == k,
        }
    }
}

fn record(thread: &str, info: &PanicHookInfo<'_>) {
    let message = payload_text(info);
    let oom = is_out_of_memory(&message);
    if oom {
        OOM_PANICS.fetch_add(1, Ordering::SeqCst);
    }
    if let Ok(mut by_key) = BY_KEY.lock() {
        let c = by_key
            .get_or_insert_with(HashMap::new)
            .entry(thread_key(thread))
            .or_default();
        c.panics += 1;
        c.last = Some((thread.to_owned(), message.clone()));
        if oom {
            c.oom += 1;
            c.last_oom = c.last.clone();
        }
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

/// The panics counted so far, on every backend thread.
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

fn snapshot() -> HashMap<String, Counts> {
    BY_KEY
        .lock()
        .ok()
        .and_then(|m| m.clone())
        .unwrap_or_default()
}

/// What happened on a run's backend threads since it started.
struct Seen {
    panics: u64,
    oom: u64,
    last: Option<(String, String)>,
    last_oom: Option<(String, String)>,
}

/// Watches one run for panics on its backend threads.
#[derive(Debug, Clone)]
pub struct PanicWatch {
    threads: BackendThreads,
    start: HashMap<String, Counts>,
}

impl PanicWatch {
    /// Installs the guard and watches every backend thread from now on.
    pub fn start() -> Self {
        Self::start_for(BackendThreads::All)
    }

    /// Installs the guard and watches `threads` from now on.
    pub fn start_for(threads: BackendThreads) -> Self {
        install();
        PanicWatch {
            threads,
            start: snapshot(),
        }
    }

    fn seen(&self) -> Seen {
        let mut seen = Seen {
            panics: 0,
            oom: 0,
            last: None,
            last_oom: None,
        };
        for (key, now) in snapshot() {
            if !self.threads.covers(&key) {
                continue;
            }
            let before = self.start.get(&key).cloned().unwrap_or_default();
            let panics = now.panics.saturating_sub(before.panics);
            let oom = now.oom.saturating_sub(before.oom);
            seen.panics += panics;
            seen.oom += oom;
            if panics > 0 {
                seen.last = now.last;
            }
            if oom > 0 {
                seen.last_oom = now.last_oom;
            }
        }
        seen
    }

    /// Whether one of this run's backend threads reported a failed
    /// allocation since the watch started. On cubecl 0.10 the device is
    /// then unusable for the rest of the process: every later operation
    /// fails, with messages that need not mention memory ("Memory page 0
    /// doesn't exist", a failed read, a NaN loss).
    pub fn saw_allocation_failure(&self) -> bool {
        self.seen().oom > 0
    }

    /// The out-of-memory error this run ends with once one of its backend
    /// threads reported a failed allocation, whatever the calling thread saw
    /// next (`then`): [`Error::BackendPanics`] with `out_of_memory`, so that
    /// an executor relaunches the trial smaller in a fresh process.
    pub fn out_of_memory(&self, then: &Error) -> Error {
        let seen = self.seen();
        let (thread, message) = seen.last_oom.unwrap_or_default();
        Error::BackendPanics {
            count: seen.panics,
            out_of_memory: true,
            thread,
            message: format!("{message} (the run then saw: {then})"),
        }
    }

    /// OOM evidence wins: an error returned by a run during which one of its
    /// backend threads failed an allocation becomes
    /// [`PanicWatch::out_of_memory`], unless it already says out of memory.
    /// Results and other errors pass.
    pub fn settle<T>(&self, result: Result<T>) -> Result<T> {
        match result {
            Err(e) if !e.is_out_of_memory() && self.saw_allocation_failure() => {
                Err(self.out_of_memory(&e))
            }
            other => other,
        }
    }

    /// [`Error::BackendPanics`] if one of this run's backend threads
    /// panicked since the watch started.
    pub fn check(&self) -> Result<()> {
        let seen = self.seen();
        if seen.panics == 0 {
            return Ok(());
        }
        let (thread, message) = seen.last.unwrap_or_default();
        Err(Error::BackendPanics {
            count: seen.panics,
            out_of_memory: seen.oom > 0,
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

    #[test]
    fn a_run_watches_its_own_devices_threads() {
        assert_eq!(thread_key("DSD-0-1"), "0-1");
        assert_eq!(thread_key("DSU-0-1"), "0-1");
        assert_eq!(thread_key("<unnamed>"), "");
        let cuda1 = BackendThreads::cuda(1);
        assert!(cuda1.covers("0-1") && cuda1.covers(""));
        assert!(!cuda1.covers("0-0"));
        assert!(!BackendThreads::None.covers("0-1") && !BackendThreads::None.covers(""));
        assert!(BackendThreads::All.covers("0-0") && BackendThreads::All.covers(""));
    }
}
