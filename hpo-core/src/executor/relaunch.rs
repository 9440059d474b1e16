//! OOM as a relaunch: shrinking the batch of a configuration that did not fit.
//!
//! A trial ran out of memory when its objective returned
//! [`TrialError::Oom`](crate::TrialError::Oom), when it panicked with an
//! allocation failure, or when its worker died with such a message on
//! standard error ([`super::is_oom_text`]). The same configuration is then
//! re-enqueued with [`shrink`]: micro-batch halved, accumulation doubled, the
//! effective batch unchanged. A micro-batch that is odd or at the floor
//! cannot be halved exactly: the configuration then ends as Oom.
//!
//! Where the estimator offers activation recomputation
//! ([`super::MemoryEstimator::relative_time`]), it is the other lever:
//! [`fit_options`] lists every way to run a configuration (each rung of
//! the shrink ladder, with and without recomputation) fastest first, the
//! scheduler starts the first that fits, and after an OOM
//! [`smaller_option`] relaunches at the fastest one that needs less memory
//! than the one that failed.

use super::Batch;

/// The next smaller batch with the same effective batch, or `None` at the
/// floor (`micro` would drop below `min_micro`, or is odd).
pub fn shrink(batch: Batch, min_micro: u32) -> Option<Batch> {
    let half = batch.micro / 2;
    (batch.micro.is_multiple_of(2) && half >= min_micro.max(1)).then(|| Batch {
        micro: half,
        accumulation: batch.accumulation.saturating_mul(2),
        ..batch
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

/// Every way to run `batch` down its [`shrink_ladder`], each rung as it is
/// and with activation recomputation, that `time` prices (per example;
/// `None`: not offered), fastest first; equal times keep the ladder's order,
/// recomputation after. A batch that already recomputes keeps recomputing.
pub fn fit_options(
    batch: Batch,
    min_micro: u32,
    time: impl Fn(Batch) -> Option<f64>,
) -> Vec<Batch> {
    let levers: &[bool] = if batch.recompute {
        &[true]
    } else {
        &[false, true]
    };
    let mut options: Vec<(f64, Batch)> = shrink_ladder(batch, min_micro)
        .into_iter()
        .flat_map(|b| levers.iter().map(move |&r| b.with_recompute(r)))
        .filter_map(|b| time(b).filter(|t| t.is_finite()).map(|t| (t, b)))
        .collect();
    if options.is_empty() {
        // An estimator that prices nothing still gets the ladder.
        return shrink_ladder(batch, min_micro);
    }
    options.sort_by(|a, b| a.0.total_cmp(&b.0));
    options.into_iter().map(|(_, b)| b).collect()
}

/// After `failed` ran out of memory: the fastest of its [`fit_options`]
/// that needs less memory than `failed` by `peak`, or `None` when nothing
/// smaller is left.
pub fn smaller_option(
    failed: Batch,
    min_micro: u32,
    time: impl Fn(Batch) -> Option<f64>,
    peak: impl Fn(Batch) -> u64,
) -> Option<Batch> {
    let limit = peak(failed);
    fit_options(failed, min_micro, time)
        .into_iter()
        .find(|&b| b != failed && peak(b) < limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Per example: a fixed cost per pass worth 6 examples, and
    /// recomputation a third more.
    fn time(b: Batch) -> Option<f64> {
        let per_example = 1.0 + 6.0 / f64::from(b.micro);
        Some(per_example * if b.recompute { 4.0 / 3.0 } else { 1.0 })
    }

    #[test]
    fn options_are_ordered_by_time_and_keep_the_effective_batch() {
        let options = fit_options(Batch::new(32, 1), 4, time);
        assert!(options.iter().all(|b| b.effective() == 32));
        // 32: 1.19; 16: 1.38; 32+r: 1.58; 8: 1.75; 16+r: 1.83; 8+r: 2.33;
        // 4: 2.5; 4+r: 3.33.
        let shown: Vec<(u32, bool)> = options.iter().map(|b| (b.micro, b.recompute)).collect();
        assert_eq!(
            shown,
            vec![
                (32, false),
                (16, false),
                (32, true),
                (8, false),
                (16, true),
                (8, true),
                (4, false),
                (4, true)
            ]
        );
        // Without the lever: the ladder as it was.
        let plain = fit_options(Batch::new(32, 1), 4, |b| (!b.recompute).then_some(1.0));
        assert_eq!(plain, shrink_ladder(Batch::new(32, 1), 4));
        // A recomputing batch keeps recomputing.
        let r = fit_options(Batch::new(8, 2).with_recompute(true), 4, time);
        assert!(r.iter().all(|b| b.recompute));
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn an_oom_relaunches_at_the_fastest_option_needing_less_memory() {
        // Memory: activations 1 per example, halved by recomputation.
        let peak = |b: Batch| {
            let per = if b.recompute { 1 } else { 2 };
            u64::from(b.micro) * per
        };
        let next = smaller_option(Batch::new(32, 1), 4, time, peak).unwrap();
        assert_eq!((next.micro, next.recompute), (16, false));
        // Where halving is dear (a fixed cost worth 64 examples per pass),
        // recomputation at the same micro-batch comes first.
        let dear = |b: Batch| {
            let per_example = 1.0 + 64.0 / f64::from(b.micro);
            Some(per_example * if b.recompute { 1.3 } else { 1.0 })
        };
        let next = smaller_option(Batch::new(32, 1), 4, dear, peak).unwrap();
        assert_eq!((next.micro, next.recompute), (32, true));
        // At the floor, recomputation is what is left; then nothing.
        let floor = Batch::new(4, 8);
        let next = smaller_option(floor, 4, time, peak).unwrap();
        assert!(next.recompute && next.micro == 4);
        assert_eq!(smaller_option(next, 4, time, peak), None);
    }

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
