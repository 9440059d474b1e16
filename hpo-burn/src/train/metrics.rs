//! Classification metrics: accuracy and macro-F1.

use serde::{Deserialize, Serialize};

/// Validation metrics of one epoch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Fraction of correct predictions.
    pub accuracy: f64,
    /// Unweighted mean of per-class F1 (a class never predicted and never
    /// present scores 0, as scikit-learn's `zero_division=0`).
    pub macro_f1: f64,
    /// Mean cross-entropy loss.
    pub loss: f64,
}

/// Accuracy and macro-F1 of `predicted` against `actual` over `classes` classes.
pub fn accuracy_and_macro_f1(predicted: &[usize], actual: &[usize], classes: usize) -> (f64, f64) {
    if actual.is_empty() || classes == 0 {
        return (0.0, 0.0);
    }
    let mut tp = vec![0usize; classes];
    let mut fp = vec![0usize; classes];
    let mut fn_ = vec![0usize; classes];
    let mut correct = 0;
    for (&p, &a) in predicted.iter().zip(actual) {
        if p == a {
            correct += 1;
            tp[a] += 1;
        } else {
            if p < classes {
                fp[p] += 1;
            }
            fn_[a] += 1;
        }
    }
    let f1: f64 = (0..classes)
        .map(|c| {
            let denom = 2 * tp[c] + fp[c] + fn_[c];
            if denom == 0 {
                0.0
            } else {
                2.0 * tp[c] as f64 / denom as f64
            }
        })
        .sum::<f64>()
        / classes as f64;
    (correct as f64 / actual.len() as f64, f1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macro_f1_matches_hand_computation() {
        // class 1: tp=2 fp=1 fn=1 -> f1 = 4/6; class 0: tp=1 fp=1 fn=1 -> 2/4.
        let (acc, f1) = accuracy_and_macro_f1(&[1, 1, 0, 1, 0], &[1, 1, 0, 0, 1], 2);
        assert!((acc - 0.6).abs() < 1e-12);
        assert!((f1 - (4.0 / 6.0 + 0.5) / 2.0).abs() < 1e-12);
        // Predicting the majority class only gives half credit at best.
        let (_, f1) = accuracy_and_macro_f1(&[0, 0, 0, 0], &[0, 0, 0, 1], 2);
        assert!((f1 - (6.0 / 7.0) / 2.0).abs() < 1e-12);
    }
}
