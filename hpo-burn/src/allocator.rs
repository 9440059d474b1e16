//! Host memory kept for reuse between tensor operations.
//!
//! burn's CPU backend allocates a fresh buffer for nearly every operation's
//! result and frees it soon after. With glibc's defaults, `malloc` serves
//! blocks from 128 KiB up with their own `mmap` and unmaps them on `free`,
//! and it gives the top of the heap back to the kernel past 128 KiB free; the
//! next operation's buffer is then faulted in again page by page, and the
//! kernel zeroes every page first. Issue 20 measured 21.8 million minor page
//! faults and 29 s of system time in an 89 s epoch.
//!
//! [`keep_freed_memory`] tells glibc, once per process, to keep what was
//! freed for the next allocation instead: every block goes through the
//! heap (no per-block `mmap`) and the heap is trimmed only past 1 GiB free.
//! A process's peak resident memory is then about the high-water mark of
//! what training has live at once, as with PyTorch's caching allocators;
//! it does not grow past that, since freed blocks are reused.
//!
//! The trainer calls it before its first epoch. It is set from the program
//! itself (no environment variable to remember) and only where the C library
//! is glibc; elsewhere it does nothing.

use std::sync::OnceLock;

/// Heap space kept free before glibc returns it to the kernel.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 1 << 30;

/// Keeps freed host memory for reuse (see the [module docs](self)).
///
/// Idempotent and thread-safe: the settings are applied by the first call
/// only. Returns whether the C library accepted them (`false` where it is not
/// glibc).
pub fn keep_freed_memory() -> bool {
    static APPLIED: OnceLock<bool> = OnceLock::new();
    *APPLIED.get_or_init(apply)
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn apply() -> bool {
    // SAFETY: `mallopt` only changes glibc's allocator parameters; it is
    // thread-safe (it takes every arena's lock) and has no memory-safety
    // preconditions. A rejected value returns 0 and changes nothing.
    #[allow(unsafe_code)]
    let accepted = unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0) == 1
            && libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    };
    if !accepted {
        tracing::debug!(
            "glibc rejected the allocator settings; freed memory goes back to the kernel"
        );
    }
    accepted
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn apply() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Minor page faults of the calling thread (its own counter, so tests
    /// running beside it do not count).
    fn thread_minor_faults() -> u64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let rest = stat.rsplit_once(')').unwrap().1;
        // Field 10 (minflt); `rest` starts at field 3.
        rest.split_whitespace().nth(7).unwrap().parse().unwrap()
    }

    #[test]
    fn freed_blocks_are_reused_instead_of_faulted_in_again() {
        let applied = keep_freed_memory();
        assert_eq!(applied, cfg!(all(target_os = "linux", target_env = "gnu")));
        assert_eq!(keep_freed_memory(), applied);
        if !applied {
            return;
        }
        // 48 MiB blocks, written and freed 20 times. With glibc's defaults
        // each is a fresh mmap (above the 32 MiB its dynamic threshold can
        // reach), so every one faults in its 12,288 pages again; kept, only
        // the first one does.
        let block = 48 << 20;
        let pages = block as u64 / 4096;
        let touch = || {
            let v = std::hint::black_box(vec![1u8; block]);
            v.iter().step_by(4096).map(|&b| u64::from(b)).sum::<u64>()
        };
        touch();
        let before = thread_minor_faults();
        let mut sum = 0;
        for _ in 0..20 {
            sum += touch();
        }
        let faults = thread_minor_faults() - before;
        assert_eq!(sum, 20 * pages);
        assert!(
            faults < pages,
            "{faults} minor faults for 20 reused blocks of {pages} pages"
        );
    }
}
