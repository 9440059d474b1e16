//! One level of threads on the CPU backend.
//!
//! burn's ndarray backend runs a batched matrix product as one rayon task
//! per matrix of the batch (the batch of sequences in every linear layer,
//! batch × heads in attention), on rayon's pool of one thread per core. Each
//! task then calls matrixmultiply, whose `threading` feature (switched on
//! with burn-ndarray's multi-threading) starts its own threads, one per
//! physical core, inside every product. Nested, the two levels ask for the
//! square of the cores and mostly wait on each other (the book's
//! performance page has the measurement; the results are the same either
//! way, since each output element is still computed by one thread).
//!
//! [`single_level_matmul`] keeps rayon's level and makes matrixmultiply's
//! products single-threaded, unless the user chose a number.

use std::sync::OnceLock;

/// The variable matrixmultiply reads (once, at its first product) for its
/// thread count.
pub const MATMUL_NUM_THREADS: &str = "MATMUL_NUM_THREADS";

/// Makes matrixmultiply single-threaded inside rayon's tasks (see the
/// [module docs](self)), by setting [`MATMUL_NUM_THREADS`] to 1 when it is
/// not set. The trainer calls it before its first step.
///
/// It takes effect only if it runs before the process's first matrix
/// product; idempotent. Returns the value in force afterwards.
pub fn single_level_matmul() -> String {
    static VALUE: OnceLock<String> = OnceLock::new();
    VALUE
        .get_or_init(|| match std::env::var(MATMUL_NUM_THREADS) {
            Ok(chosen) if !chosen.is_empty() => chosen,
            _ => {
                // Setting a variable races with C code reading the
                // environment in other threads; this runs once, before
                // training starts its threads' work, and burn's threads do
                // not read the environment.
                std::env::set_var(MATMUL_NUM_THREADS, "1");
                "1".to_string()
            }
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_one_thread_unless_chosen_and_keeps_its_answer() {
        let chosen = std::env::var(MATMUL_NUM_THREADS)
            .ok()
            .filter(|v| !v.is_empty());
        let value = single_level_matmul();
        assert_eq!(value, chosen.unwrap_or_else(|| "1".into()));
        assert_eq!(std::env::var(MATMUL_NUM_THREADS).unwrap(), value);
        assert_eq!(single_level_matmul(), value);
    }
}
