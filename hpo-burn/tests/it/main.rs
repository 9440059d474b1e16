//! Integration tests of hpo-burn, in one binary so burn is linked once.

// Test helpers outside `#[test]` functions unwrap too: a failing helper
// should fail its test loudly (clippy.toml allows it only inside tests).
#![allow(clippy::unwrap_used)]

mod cache;
mod checkpoint;
mod families;
mod minilm;
mod model;
mod oom;
mod panic_guard;
mod study;

use hpo_burn::batch::EncodedExample;
use hpo_burn::tokenize::Encoded;

/// A separable toy task: class 1 sequences contain token 7, class 0 token 8;
/// all sequences have the same length `len`.
pub fn toy_examples(n: usize, len: usize) -> Vec<EncodedExample> {
    (0..n)
        .map(|i| {
            let label = i % 2;
            let mut ids = vec![2u32];
            for j in 1..len - 1 {
                ids.push(if j == 1 + i % (len - 2) {
                    7 + label as u32
                } else {
                    10 + ((i + j) % 20) as u32
                });
            }
            ids.push(3);
            EncodedExample {
                encoded: Encoded {
                    segments: vec![0; ids.len()],
                    ids,
                },
                label,
            }
        })
        .collect()
}

/// burn's backend RNG (initialisation, dropout) is process-global: tests that
/// train take this lock so that runs in parallel test threads do not draw
/// from each other's stream (which would break the determinism test).
pub fn backend_lock() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The repository's copy of the VADER tweets.
pub fn vader_path() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/vader/tweets.tsv")
}
