//! A per-thread pool of scratch vectors for the estimators' large arrays.
//!
//! A suggestion over a long history builds arrays of one entry per
//! observation and dimension (megabytes at 5,000 trials) and frees them at
//! its end. The allocator then returns that memory to the system, and the
//! next suggestion pays a page fault per 4 KiB page to get it back, a
//! noticeable share of its time. Vectors taken from this pool and given back
//! after use keep their memory across suggestions instead. Only the buffers
//! are reused, never their contents: a taken vector is always empty.
//!
//! Each thread keeps at most [`MAX_KEPT`] vectors of each element type; any
//! vector beyond that is simply freed.

use std::cell::RefCell;

/// Vectors kept per element type and thread.
const MAX_KEPT: usize = 96;

thread_local! {
    static F64S: RefCell<Vec<Vec<f64>>> = const { RefCell::new(Vec::new()) };
    static U32S: RefCell<Vec<Vec<u32>>> = const { RefCell::new(Vec::new()) };
}

/// Takes from `pool` an empty vector with room for `cap` elements: the
/// smallest kept one that is large enough, else a new one.
fn take<T>(pool: &RefCell<Vec<Vec<T>>>, cap: usize) -> Vec<T> {
    let Ok(mut kept) = pool.try_borrow_mut() else {
        return Vec::with_capacity(cap);
    };
    let best = kept
        .iter()
        .enumerate()
        .filter(|(_, v)| v.capacity() >= cap)
        .min_by_key(|(_, v)| v.capacity())
        .map(|(i, _)| i);
    match best {
        Some(i) => kept.swap_remove(i),
        None => {
            // None is large enough: grow the largest rather than keep it idle.
            let largest = kept
                .iter()
                .enumerate()
                .max_by_key(|(_, v)| v.capacity())
                .map(|(i, _)| i);
            let mut v = largest.map(|i| kept.swap_remove(i)).unwrap_or_default();
            v.reserve_exact(cap);
            v
        }
    }
}

/// Gives `v` back to `pool` (emptied), unless the pool is full or `v` has no memory.
fn give<T>(pool: &RefCell<Vec<Vec<T>>>, mut v: Vec<T>) {
    if v.capacity() == 0 {
        return;
    }
    if let Ok(mut kept) = pool.try_borrow_mut() {
        if kept.len() < MAX_KEPT {
            v.clear();
            kept.push(v);
        }
    }
}

/// An empty `f64` vector with room for `cap` values.
pub(crate) fn f64s(cap: usize) -> Vec<f64> {
    F64S.with(|p| take(p, cap))
}

/// An empty `u32` vector with room for `cap` values.
pub(crate) fn u32s(cap: usize) -> Vec<u32> {
    U32S.with(|p| take(p, cap))
}

/// Returns an `f64` vector's memory to this thread's pool.
pub(crate) fn give_f64s(v: Vec<f64>) {
    F64S.with(|p| give(p, v));
}

/// Returns a `u32` vector's memory to this thread's pool.
pub(crate) fn give_u32s(v: Vec<u32>) {
    U32S.with(|p| give(p, v));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taken_vectors_are_empty_and_large_enough() {
        let mut v = f64s(100);
        v.extend([1.0, 2.0, 3.0]);
        let ptr = v.as_ptr();
        give_f64s(v);
        let w = f64s(50);
        assert!(w.is_empty());
        assert!(w.capacity() >= 50);
        // The kept buffer is reused rather than a new one allocated.
        assert_eq!(w.as_ptr(), ptr);
        let big = u32s(1000);
        assert!(big.is_empty() && big.capacity() >= 1000);
        give_u32s(big);
        assert!(u32s(10).capacity() >= 10);
    }
}
