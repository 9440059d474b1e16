//! Learning the real footprint: a per-family factor from estimate to measured peak.
//!
//! Each finished trial that recorded its measured peak adds one ratio
//! `measured / estimate` to its family. The factor used for admission is the
//! largest of the family's last [`Correction::WINDOW`] ratios: estimates of
//! one family are off by a roughly constant factor (the analytic model misses
//! the same buffers every time), so the largest recent ratio covers the
//! family with little waste, and it adapts when the workload drifts. An OOM
//! in a family raises its factor by [`Correction::OOM_STEP`] on top (the
//! trial's true peak was higher than admitted, by an unknown amount), so a
//! family with no measurements yet still stops repeating its OOMs. The
//! scheduler multiplies by `1 + margin` on top of the factor.
//!
//! Ratios are also kept per micro-batch ([`Correction::observe_at`],
//! [`Correction::factor_at`]): the analytic estimate is a fixed part
//! (weights, gradients, moments) plus activations that grow with the
//! micro-batch, and what it misses of each differs, so the ratio moves with
//! the micro-batch. On an NVIDIA H200 (burn-cuda 0.21, f32, BERT-base from
//! scratch; `bench/results/gpu/h200_nov27_call1.json`) it was 1.15-1.23 at micro-batch
//! 16, 1.02-1.08 at 32 and 0.84 at 64 over the same family: one factor per
//! family either over-reserves the large micro-batches or under-reserves
//! the small ones. A micro-batch the family has measured uses its own ratios;
//! one it has not falls back to the family's.

use std::collections::{HashMap, VecDeque};

#[derive(Debug, Clone, Default)]
struct Family {
    ratios: VecDeque<f64>,
    by_micro: HashMap<u32, VecDeque<f64>>,
    oom_boost: f64,
}

/// Appends `ratio` to `window`, forgetting the oldest past [`Correction::WINDOW`].
fn push(window: &mut VecDeque<f64>, ratio: f64) {
    window.push_back(ratio);
    if window.len() > Correction::WINDOW {
        window.pop_front();
    }
}

/// The largest ratio of `window`, or `None` when it is empty.
fn largest(window: &VecDeque<f64>) -> Option<f64> {
    window.iter().copied().reduce(f64::max)
}

/// Per-family correction of memory estimates, fitted from finished trials.
#[derive(Debug, Clone, Default)]
pub struct Correction {
    families: HashMap<String, Family>,
}

impl Family {
    fn boost(&self) -> f64 {
        if self.oom_boost > 0.0 {
            self.oom_boost
        } else {
            1.0
        }
    }
}

impl Correction {
    /// Ratios kept per family (and per micro-batch of a family).
    pub const WINDOW: usize = 32;
    /// Factor by which an OOM raises its family's correction.
    pub const OOM_STEP: f64 = 1.15;
    /// Upper bound of the OOM boost (the boost is a stopgap until measurements arrive).
    pub const MAX_BOOST: f64 = 2.0;

    /// No observations: every factor is 1.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records a finished trial of `family` admitted with `estimate` bytes
    /// whose measured peak was `measured` bytes. Zero or non-finite ratios
    /// are ignored.
    pub fn observe(&mut self, family: &str, estimate: u64, measured: u64) {
        self.learn(family, None, estimate, measured);
    }

    /// [`Correction::observe`] for a trial run at micro-batch `micro`: the
    /// ratio counts for the family and for that micro-batch of it.
    pub fn observe_at(&mut self, family: &str, micro: u32, estimate: u64, measured: u64) {
        self.learn(family, Some(micro), estimate, measured);
    }

    fn learn(&mut self, family: &str, micro: Option<u32>, estimate: u64, measured: u64) {
        if estimate == 0 || measured == 0 {
            return;
        }
        let ratio = measured as f64 / estimate as f64;
        if !ratio.is_finite() {
            return;
        }
        let f = self.families.entry(family.to_owned()).or_default();
        push(&mut f.ratios, ratio);
        if let Some(m) = micro {
            push(f.by_micro.entry(m).or_default(), ratio);
        }
        // A measurement supersedes the guesswork of earlier OOMs, unless the
        // measurement itself is above what was admitted.
        f.oom_boost = 1.0;
    }

    /// Records an out-of-memory of a trial of `family`.
    pub fn observe_oom(&mut self, family: &str) {
        let f = self.families.entry(family.to_owned()).or_default();
        let boost = if f.oom_boost > 0.0 { f.oom_boost } else { 1.0 };
        f.oom_boost = (boost * Self::OOM_STEP).min(Self::MAX_BOOST);
    }

    /// The factor an estimate of `family` is multiplied by (1 before any observation).
    pub fn factor(&self, family: &str) -> f64 {
        let Some(f) = self.families.get(family) else {
            return 1.0;
        };
        largest(&f.ratios).unwrap_or(1.0) * f.boost()
    }

    /// The factor an estimate of `family` at micro-batch `micro` is
    /// multiplied by: the largest recent ratio measured at that micro-batch,
    /// or the family's [`Correction::factor`] when none was; an OOM's boost
    /// on top either way.
    pub fn factor_at(&self, family: &str, micro: u32) -> f64 {
        let Some(f) = self.families.get(family) else {
            return 1.0;
        };
        let fitted = f
            .by_micro
            .get(&micro)
            .and_then(largest)
            .or_else(|| largest(&f.ratios))
            .unwrap_or(1.0);
        fitted * f.boost()
    }

    /// Whether anything was learned of `family` (a measurement or an OOM).
    pub fn knows(&self, family: &str) -> bool {
        self.families.contains_key(family)
    }

    /// Measurements recorded for `family` (at most [`Correction::WINDOW`]).
    pub fn observations(&self, family: &str) -> usize {
        self.families.get(family).map_or(0, |f| f.ratios.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forty_percent_underestimate_is_learned_from_one_trial() {
        let mut c = Correction::new();
        assert_eq!(c.factor("deberta-large"), 1.0);
        c.observe("deberta-large", 600, 1000);
        assert!((c.factor("deberta-large") - 1000.0 / 600.0).abs() < 1e-9);
        assert_eq!(c.factor("bert-base"), 1.0, "families are separate");
    }

    #[test]
    fn an_oom_raises_the_factor_until_a_measurement_arrives() {
        let mut c = Correction::new();
        c.observe_oom("x");
        c.observe_oom("x");
        assert!((c.factor("x") - 1.15 * 1.15).abs() < 1e-9);
        c.observe("x", 100, 90);
        assert!((c.factor("x") - 0.9).abs() < 1e-9);
        for _ in 0..20 {
            c.observe_oom("x");
        }
        assert!(c.factor("x") <= 0.9 * Correction::MAX_BOOST + 1e-9);
    }

    /// The H200's pattern: one family, its ratio falling with the
    /// micro-batch. Each measured micro-batch gets its own factor; an
    /// unmeasured one the family's, which covers every ratio seen.
    #[test]
    fn each_measured_micro_batch_gets_its_own_factor() {
        let mut c = Correction::new();
        c.observe_at("base", 16, 100, 120);
        c.observe_at("base", 32, 100, 105);
        c.observe_at("base", 64, 100, 84);
        assert!((c.factor_at("base", 16) - 1.20).abs() < 1e-9);
        assert!((c.factor_at("base", 32) - 1.05).abs() < 1e-9);
        assert!((c.factor_at("base", 64) - 0.84).abs() < 1e-9);
        assert!((c.factor_at("base", 8) - 1.20).abs() < 1e-9);
        assert!((c.factor("base") - 1.20).abs() < 1e-9);
        // An OOM raises every micro-batch's factor until a measurement.
        c.observe_oom("base");
        assert!((c.factor_at("base", 64) - 0.84 * 1.15).abs() < 1e-9);
        c.observe_at("base", 64, 100, 86);
        assert!((c.factor_at("base", 64) - 0.86).abs() < 1e-9);
        assert_eq!(c.factor_at("large", 16), 1.0);
    }

    #[test]
    fn the_window_forgets_old_ratios() {
        let mut c = Correction::new();
        c.observe("x", 100, 300);
        for _ in 0..Correction::WINDOW {
            c.observe("x", 100, 110);
        }
        assert!((c.factor("x") - 1.1).abs() < 1e-9);
        assert_eq!(c.observations("x"), Correction::WINDOW);
    }
}
