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

use std::collections::{HashMap, VecDeque};

#[derive(Debug, Clone, Default)]
struct Family {
    ratios: VecDeque<f64>,
    oom_boost: f64,
}

/// Per-family correction of memory estimates, fitted from finished trials.
#[derive(Debug, Clone, Default)]
pub struct Correction {
    families: HashMap<String, Family>,
}

impl Correction {
    /// Ratios kept per family.
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
        if estimate == 0 || measured == 0 {
            return;
        }
        let ratio = measured as f64 / estimate as f64;
        if !ratio.is_finite() {
            return;
        }
        let f = self.families.entry(family.to_owned()).or_default();
        f.ratios.push_back(ratio);
        if f.ratios.len() > Self::WINDOW {
            f.ratios.pop_front();
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
        let fitted = f.ratios.iter().copied().fold(f64::NAN, f64::max);
        let fitted = if fitted.is_nan() { 1.0 } else { fitted };
        let boost = if f.oom_boost > 0.0 { f.oom_boost } else { 1.0 };
        fitted * boost
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
