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
//! [`on_cpu_threads`] runs a piece of work *on* one of a pool's threads
//! instead: each split then puts its other half where the second thread can
//! steal it at once, and the calling thread takes its own half itself. The
//! pools are hpo-burn's own, with rayon's default size (`RAYON_NUM_THREADS`,
//! else one thread per core); their threads are named `hpo-cpu-<i>`, so that
//! the panic guard ([`crate::panic_guard`]) treats a panic of the training
//! code there as it would on the caller's thread. Work launched from inside
//! a pool (burn-flex's ops, gemm) stays in it.
//!
//! # One run per pool
//!
//! A pool runs one caller's work at a time: each call leases a pool of its
//! own, made on first need and kept for the next call once this one is done,
//! so a process makes as many pools as it ever has runs at once (one for a
//! single training thread, `k` for `k` trials trained on threads side by
//! side). Sharing one pool between concurrent runs deadlocks: a rayon thread
//! waiting for its half of a split steals whatever job its pool holds, and
//! if that is another run's whole epoch, the other run executes on top of
//! the first one's stack. burn-autodiff's backward pass holds its graph's
//! lock while the ops below it split their work, and every backward pass
//! ends by locking each graph of the process in turn
//! (`GraphCleaner::cleanup_orphaned_entries`): the nested run then waits
//! for a lock that the run beneath it on the same thread holds, forever.
//! (Seen as a hung CI run: two tests training at once on a 2-thread pool.)
//! Jobs never cross pools, so with a pool per run a thread can only ever
//! steal splits of the run it is already part of.

use burn::tensor::backend::Backend;
use rayon::{ThreadPool, ThreadPoolBuilder};
use std::sync::Mutex;

/// Runs `f` on a thread of a CPU pool of hpo-burn's that no other call is
/// using, when `B` is the CPU backend ([`crate::host::is_cpu`]) and the
/// caller is not already on a rayon thread; on the caller's thread otherwise
/// (another backend, a pool that could not be made, or a caller already
/// inside a pool, whose splits then stay in that pool). A panic in `f`
/// reaches the caller.
pub fn on_cpu_threads<B: Backend, R: Send>(f: impl FnOnce() -> R + Send) -> R {
    if !crate::host::is_cpu::<B>() || rayon::current_thread_index().is_some() {
        return f();
    }
    match Lease::take() {
        Some(lease) => lease.install(f),
        None => f(),
    }
}

/// Pools no call is using, ready for the next one.
static IDLE: Mutex<Vec<ThreadPool>> = Mutex::new(Vec::new());

/// One call's exclusive use of a pool; the pool goes back to [`IDLE`] when
/// the lease is dropped (a panic in the work included).
struct Lease(Option<ThreadPool>);

impl Lease {
    /// An idle pool, or a new one; `None` when the operating system refused
    /// its threads (the work then runs on the caller's thread).
    fn take() -> Option<Lease> {
        let idle = IDLE.lock().ok().and_then(|mut idle| idle.pop());
        let pool = match idle {
            Some(pool) => pool,
            None => ThreadPoolBuilder::new()
                .thread_name(|i| format!("hpo-cpu-{i}"))
                .build()
                .map_err(|e| {
                    tracing::warn!(%e, "no CPU thread pool; training runs on the caller's thread")
                })
                .ok()?,
        };
        Some(Lease(Some(pool)))
    }

    /// Runs `f` on the leased pool (the `Option` is only ever empty while
    /// the lease is being dropped).
    fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.0 {
            Some(pool) => pool.install(f),
            None => f(),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if let (Some(pool), Ok(mut idle)) = (self.0.take(), IDLE.lock()) {
            idle.push(pool);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rayon::prelude::*;
    use std::sync::Condvar;
    use std::time::Duration;

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

    /// More concurrent runs than a pool has threads: each is inside its work
    /// at the same moment, so none is queued behind another in a shared pool
    /// (where a waiting thread could pick it up and run it nested).
    #[test]
    fn concurrent_runs_each_get_a_pool_of_their_own() {
        let runs = rayon::current_num_threads() + 2;
        let inside = (Mutex::new(0usize), Condvar::new());
        let all_inside = std::thread::scope(|s| {
            let handles: Vec<_> = (0..runs)
                .map(|_| {
                    s.spawn(|| {
                        on_cpu_threads::<crate::Cpu, _>(|| {
                            let (count, cv) = &inside;
                            let mut n = count.lock().unwrap_or_else(|e| e.into_inner());
                            *n += 1;
                            cv.notify_all();
                            let (n, timeout) = cv
                                .wait_timeout_while(n, Duration::from_secs(20), |n| *n < runs)
                                .unwrap_or_else(|e| e.into_inner());
                            drop(n);
                            !timeout.timed_out()
                        })
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(false))
                .collect::<Vec<bool>>()
        });
        assert!(all_inside.iter().all(|&b| b), "{all_inside:?}");
    }
}
