//! OOM as a relaunch: shrinking the batch of a configuration that did not fit.
//!
//! A trial ran out of memory when its objective returned
//! [`TrialError::Oom`](crate::TrialError::Oom), when it panicked with an
//! allocation failure, or when its worker died with such a message on
//! standard error ([`super::is_oom_text`]). The same configuration is then
//! re-enqueued with [`shrink`]: micro-batch halved, accumulation doubled, the
//! effective batch unchanged. A micro-batch that is odd or at the floor
//! cannot be halved exactly: the configuration then ends as Oom.

use super::Batch;

/// The next smaller batch with the same effective batch, or `None` at the
/// floor (`micro` would drop below `min_micro`, or is odd).
pub fn shrink(batch: Batch, min_micro: u32) -> Option<Batch> {
    let half = batch.micro / 2;
    (batch.micro.is_multiple_of(2) && half >= min_micro.max(1)).then(|| Batch {
        micro: half,
        accumulation: batch.accumulation.saturating_mul(2),
    })
}

/// `batch` and every smaller batch [`shrink`] reaches, largest first.
pub fn shrink_ladder(batch: Batch, min_micro: u32) -> Vec<Batch> {
    let mut out = vec![batch];
    let mut b = batch;
    while let Some(next) = shrink(b, min_micro) {
        out.push(next);
        b = next;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrinking_keeps_the_effective_batch() {
        let ladder = shrink_ladder(Batch::new(48, 2), 4);
        assert_eq!(
            ladder,
            vec![
                Batch::new(48, 2),
                Batch::new(24, 4),
                Batch::new(12, 8),
                Batch::new(6, 16)
            ]
        );
        assert!(ladder.iter().all(|b| b.effective() == 96));
        assert_eq!(shrink(Batch::new(6, 16), 4), None, "3 < floor 4");
        assert_eq!(shrink(Batch::new(3, 1), 1), None, "odd");
    }
}
