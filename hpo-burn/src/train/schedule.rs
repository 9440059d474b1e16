//! Learning-rate schedule: linear warm-up, then linear decay.

/// Linear warm-up over `warmup` steps to `peak`, then linear decay towards 0
/// at `total` steps (the last step still has a positive rate).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WarmupLinear {
    /// Peak learning rate.
    pub peak: f64,
    /// Warm-up steps.
    pub warmup: usize,
    /// Total optimizer steps.
    pub total: usize,
}

impl WarmupLinear {
    /// A schedule with `warmup_ratio` of `total` steps of warm-up.
    pub fn new(peak: f64, warmup_ratio: f64, total: usize) -> Self {
        let total = total.max(1);
        let warmup =
            ((warmup_ratio.clamp(0.0, 1.0) * total as f64).round() as usize).min(total - 1);
        WarmupLinear {
            peak,
            warmup,
            total,
        }
    }

    /// Learning rate at optimizer step `step` (0-based).
    pub fn lr(&self, step: usize) -> f64 {
        if step < self.warmup {
            self.peak * (step + 1) as f64 / self.warmup as f64
        } else {
            let left = self.total.saturating_sub(step).max(1);
            self.peak * left as f64 / (self.total - self.warmup).max(1) as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warms_up_then_decays() {
        let s = WarmupLinear::new(1.0, 0.1, 100);
        assert_eq!(s.warmup, 10);
        assert!((s.lr(0) - 0.1).abs() < 1e-12);
        assert!((s.lr(9) - 1.0).abs() < 1e-12);
        assert!((s.lr(10) - 1.0).abs() < 1e-12);
        assert!(s.lr(50) < s.lr(20));
        assert!(s.lr(99) > 0.0 && s.lr(99) < 0.02);
        let none = WarmupLinear::new(2.0, 0.0, 10);
        assert!((none.lr(0) - 2.0).abs() < 1e-12);
    }
}
