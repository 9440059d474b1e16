//! The calling thread's CPU clock, shared by the overhead benchmarks
//! (`tpe_overhead`, `gp_overhead`), which include this file with `#[path]`.
#![allow(unsafe_code)] // clock_gettime, the only way to read a thread's CPU clock.

/// CPU time of the calling thread, in seconds (NaN if the clock cannot be read).
pub fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, exclusively borrowed timespec for the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
