//! CMA-ES with margin (CMAwM) for integer and stepped parameters.
//!
//! Hamano, Saito, Nomura and Shirakawa (2022), "CMA-ES with margin:
//! lower-bounding marginal probability for mixed-integer black-box
//! optimization", as the `cmaes` library's `CMAwM` class. Plain CMA-ES on a
//! rounded coordinate stalls once its step size shrinks below the step: every
//! sample rounds to the same value. The margin keeps the probability of
//! moving to a neighbouring value above `1 / (n * popsize)` by widening that
//! coordinate's spread (the affine factor `A`) or nudging the mean.
//!
//! Samples are drawn in the continuous space; the trial gets the value
//! encoded onto the step grid, and the raw sample (what the update needs) is
//! stored on the trial beside it.

use super::cma::Cma;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The CMAwM state: CMA-ES plus the discrete coordinates' grids and scaling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct CmaWm {
    cma: Cma,
    /// Per coordinate: its step on the grid from its lower bound (0: continuous).
    #[serde(with = "super::exact::floats")]
    steps: Vec<f64>,
    #[serde(with = "super::exact::pairs")]
    bounds: Vec<(f64, f64)>,
    #[serde(with = "super::exact::float")]
    margin: f64,
    /// The affine scaling of each coordinate (1 for continuous ones).
    #[serde(with = "super::exact::floats")]
    a: Vec<f64>,
    n_max_resampling: usize,
}

impl CmaWm {
    /// Wraps `cma`; `steps[i] > 0` makes coordinate `i` discrete with that
    /// step from its lower bound.
    pub(super) fn new(cma: Cma, bounds: Vec<(f64, f64)>, steps: &[f64]) -> CmaWm {
        let n = cma.dim();
        let margin = 1.0 / (n as f64 * cma.popsize() as f64);
        CmaWm {
            cma,
            steps: steps.to_vec(),
            bounds,
            margin,
            a: vec![1.0; n],
            n_max_resampling: 10 * n,
        }
    }

    /// The number of coordinates.
    pub(super) fn dim(&self) -> usize {
        self.cma.dim()
    }

    /// Coordinate `i`'s grid `(low, step, number of values)`, if it is discrete.
    fn grid(&self, i: usize) -> Option<(f64, f64, usize)> {
        let s = *self.steps.get(i)?;
        let (lo, hi) = *self.bounds.get(i)?;
        (s > 0.0).then(|| (lo, s, ((hi + s / 2.0 - lo) / s).ceil().max(2.0) as usize))
    }

    /// The population size.
    pub(super) fn popsize(&self) -> usize {
        self.cma.popsize()
    }

    /// A candidate: `(encoded, raw)`, the value to evaluate (discrete
    /// coordinates on their grid) and the raw sample to tell.
    pub(super) fn ask<R: Rng>(&mut self, rng: &mut R) -> (Vec<f64>, Vec<f64>) {
        let continuous_ok = |s: &Self, x: &[f64]| {
            x.iter()
                .zip(&s.bounds)
                .zip(&s.steps)
                .all(|((v, (lo, hi)), step)| *step > 0.0 || (lo <= v && v <= hi))
        };
        let mut x = self.cma.sample_solution(rng);
        let mut ok = continuous_ok(self, &x);
        for _ in 1..self.n_max_resampling {
            if ok {
                break;
            }
            x = self.cma.sample_solution(rng);
            ok = continuous_ok(self, &x);
        }
        if !ok {
            x = self.cma.sample_solution(rng);
            for ((v, (lo, hi)), step) in x.iter_mut().zip(&self.bounds).zip(&self.steps) {
                if *step <= 0.0 {
                    *v = v.clamp(*lo, *hi);
                }
            }
        }
        let mean = self.cma.mean();
        let encoded = x
            .iter()
            .enumerate()
            .map(|(i, &v)| match self.grid(i) {
                None => v,
                Some(grid) => {
                    let scaled = (v - mean[i]) * self.a[i] + mean[i];
                    grid_value(grid, grid_index(grid, scaled))
                }
            })
            .collect();
        (encoded, x)
    }

    /// Updates CMA-ES, then the margin correction of every discrete coordinate.
    pub(super) fn tell(&mut self, solutions: Vec<(Vec<f64>, f64)>) {
        self.cma.tell(solutions);
        let sigma = self.cma.sigma();
        let c_diag = self.cma.c_diag();
        let mut mean = self.cma.mean().to_vec();
        let margin = self.margin;
        for i in 0..self.dim() {
            let Some(grid) = self.grid(i) else {
                continue;
            };
            let m = mean[i];
            let (lim_low, lim_up) = limits(grid, m);
            let z_scale = sigma * self.a[i] * c_diag[i].sqrt();
            let low_cdf = norm_cdf((lim_low - m) / z_scale);
            let up_cdf = 1.0 - norm_cdf((lim_up - m) / z_scale);
            let mid_cdf = 1.0 - (low_cdf + up_cdf);
            if low_cdf.max(up_cdf) > 0.5 {
                // At an edge of the grid: pull the mean back towards the limit.
                if low_cdf.min(up_cdf) < margin {
                    let sign = (m - lim_up).signum();
                    let dist =
                        sigma * self.a[i] * (chi2_ppf(1.0 - 2.0 * margin) * c_diag[i]).sqrt();
                    mean[i] = lim_up + sign * dist;
                }
                continue;
            }
            let low = low_cdf.max(margin / 2.0);
            let up = up_cdf.max(margin / 2.0);
            let denom = low + mid_cdf + up - 3.0 * margin / 2.0;
            let rest = 1.0 - low - up - mid_cdf;
            let mod_low = (low + rest * (low - margin / 2.0) / denom).clamp(1e-10, 0.5 - 1e-10);
            let mod_up = (up + rest * (up - margin / 2.0) / denom).clamp(1e-10, 0.5 - 1e-10);
            let chi_low = chi2_ppf(1.0 - 2.0 * mod_low).sqrt();
            let chi_up = chi2_ppf(1.0 - 2.0 * mod_up).sqrt();
            self.a[i] = (lim_up - lim_low) / ((chi_low + chi_up) * sigma * c_diag[i].sqrt());
            mean[i] = (lim_low * chi_up + lim_up * chi_low) / (chi_low + chi_up);
        }
        self.cma.set_mean(mean);
    }

    /// The wrapped CMA-ES and the coordinates' scaling.
    #[cfg(test)]
    pub(super) fn parts(&self) -> (&Cma, &[f64]) {
        (&self.cma, &self.a)
    }

    /// Whether CMA-ES has converged or degenerated.
    pub(super) fn should_stop(&mut self) -> bool {
        self.cma.should_stop()
    }
}

/// The index of the grid value nearest `v`, preferring the lower on ties.
fn grid_index((low, step, size): (f64, f64, usize), v: f64) -> usize {
    let last = size - 1;
    let mut i = (((v - low) / step + 0.5).floor().max(0.0) as usize).min(last);
    let mid = |k: usize| low + (k as f64 + 0.5) * step;
    if i > 0 && v <= mid(i - 1) {
        i -= 1;
    }
    if i < last && v > mid(i) {
        i += 1;
    }
    i
}

fn grid_value((low, step, _): (f64, f64, usize), i: usize) -> f64 {
    low + i as f64 * step
}

/// The midpoints around the grid cell of `m`: where a sample stops rounding
/// to `m`'s value (clamped to the grid's inner midpoints).
fn limits(grid: (f64, f64, usize), m: f64) -> (f64, f64) {
    let (low, step, size) = grid;
    let i = grid_index(grid, m);
    let mid = |k: usize| low + (k as f64 + 0.5) * step;
    let lower = i.saturating_sub(1).min(size - 2);
    let upper = i.min(size - 2);
    (mid(lower), mid(upper))
}

/// The standard normal CDF (`cmaes`'s `norm_cdf`, accurate in the tails).
fn norm_cdf(x: f64) -> f64 {
    let x = x / std::f64::consts::SQRT_2;
    if x.abs() < std::f64::consts::FRAC_1_SQRT_2 {
        0.5 + 0.5 * libm::erf(x)
    } else {
        let y = 0.5 * libm::erfc(x.abs());
        if x > 0.0 {
            1.0 - y
        } else {
            y
        }
    }
}

/// The quantile of the chi-squared distribution with one degree of freedom
/// (`cmaes`'s `chi2_ppf`: bisection on `erf(sqrt(x / 2)) = q`).
fn chi2_ppf(q: f64) -> f64 {
    if q <= 0.0 {
        return 0.0;
    }
    if q >= 1.0 {
        return f64::INFINITY;
    }
    let (mut a, mut b) = (0.0f64, 100.0f64);
    let mut m = 0.0;
    for _ in 0..100 {
        m = (a + b) / 2.0;
        let below = if q < 0.9 {
            libm::erf((m / 2.0).sqrt()) < q
        } else {
            libm::erfc((m / 2.0).sqrt()) > 1.0 - q
        };
        if below {
            a = m;
        } else {
            b = m;
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::cmaes::cma::default_popsize;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn statistics_match_known_values() {
        assert!((norm_cdf(0.0) - 0.5).abs() < 1e-15);
        assert!((norm_cdf(1.96) - 0.975_002_104_851_779_5).abs() < 1e-12);
        assert!((norm_cdf(-6.0) - 9.865_876_450_376_946e-10).abs() < 1e-20);
        // SciPy 1.17: `norm.cdf`, `chi2.ppf(q, 1)`.
        assert!((chi2_ppf(0.95) - 3.841_458_820_694_124).abs() < 1e-9);
        assert!((chi2_ppf(0.5) - 0.454_936_423_119_572).abs() < 1e-9);
    }

    #[test]
    fn grid_rounding_prefers_the_lower_value_on_ties() {
        let g = (0.0, 1.0, 5);
        assert_eq!(grid_index(g, 1.4), 1);
        assert_eq!(grid_index(g, 1.5), 1);
        assert_eq!(grid_index(g, 1.6), 2);
        assert_eq!(grid_index(g, -3.0), 0);
        assert_eq!(grid_index(g, 9.0), 4);
        assert_eq!(limits(g, 0.1), (0.5, 0.5));
        assert_eq!(limits(g, 2.2), (1.5, 2.5));
    }

    /// An integer problem whose optimum plain rounding CMA-ES reaches only by
    /// luck once its step collapses: every coordinate must move by several
    /// steps, and the margin keeps them moving.
    #[test]
    fn reaches_an_integer_optimum() {
        let n = 6;
        let f = |x: &[f64]| -> f64 { x.iter().map(|v| (v - 7.0).powi(2)).sum() };
        let bounds = vec![(0.0, 10.0); n];
        let popsize = default_popsize(n);
        for seed in 0..3 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let cma = Cma::new(vec![2.0; n], 1.0, None, bounds.clone(), popsize, false);
            let mut wm = CmaWm::new(cma, bounds.clone(), &vec![1.0; n]);
            let mut best = f64::MAX;
            for _ in 0..200 {
                let sols = (0..popsize)
                    .map(|_| {
                        let (enc, raw) = wm.ask(&mut rng);
                        assert!(enc
                            .iter()
                            .all(|v| v.fract() == 0.0 && (0.0..=10.0).contains(v)));
                        let v = f(&enc);
                        best = best.min(v);
                        (raw, v)
                    })
                    .collect();
                wm.tell(sols);
            }
            assert_eq!(best, 0.0, "seed {seed}");
        }
    }
}
