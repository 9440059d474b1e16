//! Warm starting CMA-ES from an earlier study (WS-CMA-ES).
//!
//! Nomura, Watanabe, Akimoto, Ozaki and Onishi (2021), "Warm starting CMA-ES
//! for hyperparameter optimization", as the `cmaes` library's
//! `get_warm_start_mgd`: the mean and covariance of the best `gamma` share
//! of the source solutions, widened by a prior `alpha^2 I`, split into a step
//! size and a covariance of determinant 1.

use super::linalg::symmetric_eigen;

/// Share of the source solutions taken as good.
const GAMMA: f64 = 0.1;
/// Prior spread added to the covariance.
const ALPHA: f64 = 0.1;

/// `(mean, sigma, covariance)` from `(point, value to minimise)` pairs, or
/// `None` when there are none (fewer than 10 keep the single best).
pub(super) fn warm_start(mut solutions: Vec<(Vec<f64>, f64)>) -> Option<(Vec<f64>, f64, Vec<f64>)> {
    solutions.sort_by(|a, b| a.1.total_cmp(&b.1));
    let n = solutions.first()?.0.len();
    // `cmaes` asserts floor(len * gamma) >= 1; a small source still has a best point.
    let top = ((solutions.len() as f64 * GAMMA).floor() as usize).max(1);
    let good = &solutions[..top];
    let k = top as f64;
    let mean: Vec<f64> = (0..n)
        .map(|i| good.iter().map(|(x, _)| x[i]).sum::<f64>() / k)
        .collect();
    let big_sigma: Vec<f64> = (0..n * n)
        .map(|idx| {
            let (i, j) = (idx / n, idx % n);
            let second: f64 = good.iter().map(|(x, _)| x[i] * x[j]).sum::<f64>() / k;
            let prior = if i == j { ALPHA * ALPHA } else { 0.0 };
            prior + second - mean[i] * mean[j]
        })
        .collect();
    let log_det: f64 = symmetric_eigen(&big_sigma, n)
        .values
        .iter()
        .map(|e| e.max(f64::MIN_POSITIVE).ln())
        .sum();
    let sigma = (log_det / 2.0 / n as f64).exp();
    let scale = (log_det / n as f64).exp();
    let cov = big_sigma.iter().map(|v| v / scale).collect();
    Some((mean, sigma, cov))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn centres_on_the_good_solutions() {
        // 100 points on a line; the best ten are near x = 0.8.
        let sols: Vec<(Vec<f64>, f64)> = (0..100)
            .map(|i| {
                let x = i as f64 / 100.0;
                (vec![x, 0.5], (x - 0.8).abs())
            })
            .collect();
        let (mean, sigma, cov) = warm_start(sols).unwrap();
        assert!((mean[0] - 0.8).abs() < 0.01, "{mean:?}");
        assert!((mean[1] - 0.5).abs() < 1e-12);
        // det(cov) = 1 and sigma^2n = det(Sigma).
        let det = cov[0] * cov[3] - cov[1] * cov[2];
        assert!((det - 1.0).abs() < 1e-9, "{det}");
        assert!(sigma > 0.0 && sigma < ALPHA * 1.5, "{sigma}");
        assert!(warm_start(Vec::new()).is_none());
    }
}
