//! The threads training runs on when the backend is the CPU.
//!
//! burn-flex, gemm and [`crate::kernels`] split their work with rayon. Called
//! from a thread outside rayon's pool (the program's main thread, say), every
//! split is handed to the pool as a job from outside: the caller blocks on a
//! latch, a sleeping worker is woken to run the job, and the caller is woken
//! again when it is done. A training step makes thousands of such calls, many
//! of them short (a gemm of a few hundred microseconds), and too often one
//! worker finishes the whole job before the other is awake. On the
//! `cpu_training` benchmark (book: performance) half the epoch then ran on one
//! core.
//!
//! [`on_cpu_threads`] runs a piece of work *on* one of the pool's threads
//! instead: each split then puts its other half where the second thread can
//! steal it at once, and the calling thread takes its own half itself. The
//! pool is hpo-burn's own, made once per process with rayon's default size
//! (`RAYON_NUM_THREADS`, else one thread per core); its threads are named
//! `hpo-cpu-<i>`, so that the panic guard ([`crate::panic_guard`]) treats a
//! panic of the training code there as it would on the caller's thread.
//! Work launched from inside it (burn-flex's ops, gemm) stays in it.

use burn::tensor::backend::Backend;
use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::OnceLock;

/// Runs `f` on a thread of hpo-burn's CPU pool when `B` is the CPU backend
/// ([`crate::host::is_cpu`]) and the caller is not already on a rayon
/// thread; on the caller's thread otherwise (another backend, a pool that
/// could not be made, or a caller already inside a pool). A panic in `f`
/// reaches the caller.
pub fn on_cpu_threads<B: Backend, R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if !crate::host::is_cpu::<B>() || rayon::current_thread_index().is_some() {
        return f();
    }
    match pool() {
        Some(pool) => pool.install(f),
        None => f(),
    }
}

/// The pool, made on first use; `None` when the operating system refused
/// its threads (the work then runs on the caller's thread).
fn pool() -> Option<&'static ThreadPool> {
    static POOL: OnceLock<Option<ThreadPool>> = OnceLock::new();
    POOL.get_or_init(|| {
        ThreadPoolBuilder::new()
            .thread_name(|i| format!("hpo-cpu-{i}"))
            .build()
            .map_err(
                |e| tracing::warn!(%e, "no CPU thread pool; training runs on the caller's thread"),
            )
            .ok()
    })
    .as_ref()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;

    #[test]
    fn cpu_work_runs_on_the_named_pool_with_everything_it_splits() {
        let name = || std::thread::current().name().map(str::to_owned);
        let on_pool = on_cpu_threads::<crate::Cpu, _>(name);
        assert!(
            on_pool
                .as_deref()
                .is_some_and(|n| n.starts_with("hpo-cpu-")),
            "{on_pool:?}"
        );
        // Splits made inside stay inside: every piece runs on the pool.
        let names: Vec<Option<String>> =
            on_cpu_threads::<crate::Cpu, _>(|| (0..64).into_par_iter().map(|_| name()).collect());
        assert!(names
            .iter()
            .all(|n| n.as_deref().is_some_and(|n| n.starts_with("hpo-cpu-"))));
        // Already on a pool thread: no second hop.
        let nested = on_cpu_threads::<crate::Cpu, _>(|| on_cpu_threads::<crate::Cpu, _>(name));
        assert!(nested.as_deref().is_some_and(|n| n.starts_with("hpo-cpu-")));
        // A panic reaches the caller.
        let caught =
            std::panic::catch_unwind(|| on_cpu_threads::<crate::Cpu, ()>(|| panic!("boom")));
        assert!(caught.is_err());
    }
}
