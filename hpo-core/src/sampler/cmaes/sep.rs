//! Separable CMA-ES (sep-CMA-ES): a diagonal covariance matrix.
//!
//! Ros and Hansen (2008), "A simple modification in CMA-ES achieving linear
//! time and space complexity", as the `cmaes` library's `SepCMA` class:
//! positive weights only, learning rates scaled for `n` variances instead of
//! `n (n + 1) / 2` covariances. It learns faster than full CMA-ES when the
//! parameters barely interact, and costs `O(n)` per sample.

use super::cma::{chi_n, funhist_term, record_funhist, stopped_by_values};
use super::linalg::norm;
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

const EPS: f64 = 1e-8;
const SIGMA_MAX: f64 = 1e32;

/// The sep-CMA-ES state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct SepCma {
    popsize: usize,
    #[serde(with = "super::exact::floats")]
    mean: Vec<f64>,
    #[serde(with = "super::exact::float")]
    sigma: f64,
    /// The covariance's diagonal.
    #[serde(with = "super::exact::floats")]
    c: Vec<f64>,
    #[serde(with = "super::exact::floats")]
    p_sigma: Vec<f64>,
    #[serde(with = "super::exact::floats")]
    pc: Vec<f64>,
    #[serde(with = "super::exact::pairs")]
    bounds: Vec<(f64, f64)>,
    n_max_resampling: usize,
    generation: u64,
    #[serde(with = "super::exact::floats")]
    funhist: Vec<f64>,
    #[serde(with = "super::exact::float")]
    tolx: f64,
}

/// The constants of one (dimension, population size).
struct Constants {
    mu: usize,
    mu_eff: f64,
    weights: Vec<f64>,
    cc: f64,
    c1: f64,
    cmu: f64,
    c_sigma: f64,
    d_sigma: f64,
}

impl Constants {
    fn new(n: usize, popsize: usize) -> Constants {
        let nf = n as f64;
        let mu = popsize / 2;
        let wp: Vec<f64> = (0..mu)
            .map(|i| ((mu + 1) as f64).ln() - ((i + 1) as f64).ln())
            .collect();
        let total: f64 = wp.iter().sum();
        let weights: Vec<f64> = wp.iter().map(|w| w / total).collect();
        let mu_eff = 1.0 / weights.iter().map(|w| w * w).sum::<f64>();
        let c1 = 2.0 / ((nf + 1.3).powi(2) + mu_eff);
        let cmu_full = 2.0 / mu_eff / (nf + std::f64::consts::SQRT_2).powi(2)
            + (1.0 - 1.0 / mu_eff)
                * (1.0f64).min((2.0 * mu_eff - 1.0) / ((nf + 2.0).powi(2) + mu_eff));
        let cmu = (nf + 2.0) / 3.0 * cmu_full;
        let c_sigma = (mu_eff + 2.0) / (nf + mu_eff + 3.0);
        let d_sigma = 1.0 + 2.0 * (((mu_eff - 1.0) / (nf + 1.0)).sqrt() - 1.0).max(0.0) + c_sigma;
        Constants {
            mu,
            mu_eff,
            weights,
            cc: 4.0 / (nf + 4.0),
            c1,
            cmu,
            c_sigma,
            d_sigma,
        }
    }
}

impl SepCma {
    /// A fresh state around `mean` with step size `sigma`.
    pub(super) fn new(
        mean: Vec<f64>,
        sigma: f64,
        bounds: Vec<(f64, f64)>,
        popsize: usize,
    ) -> SepCma {
        let n = mean.len();
        SepCma {
            popsize,
            sigma,
            c: vec![1.0; n],
            p_sigma: vec![0.0; n],
            pc: vec![0.0; n],
            bounds,
            n_max_resampling: 10 * n,
            generation: 0,
            funhist: vec![0.0; 2 * funhist_term(n, popsize)],
            tolx: 1e-12 * sigma,
            mean,
        }
    }

    /// The number of coordinates.
    pub(super) fn dim(&self) -> usize {
        self.mean.len()
    }

    /// The population size.
    pub(super) fn popsize(&self) -> usize {
        self.popsize
    }

    /// Mean, step size and the covariance's diagonal.
    #[cfg(test)]
    pub(super) fn parts(&self) -> (&[f64], f64, &[f64]) {
        (&self.mean, self.sigma, &self.c)
    }

    fn d(&self) -> Vec<f64> {
        self.c
            .iter()
            .map(|&c| if c < 0.0 { EPS } else { c }.sqrt())
            .collect()
    }

    fn sample_solution<R: Rng>(&self, rng: &mut R) -> Vec<f64> {
        self.d()
            .iter()
            .zip(&self.mean)
            .map(|(d, m)| m + self.sigma * d * rng.sample::<f64, _>(StandardNormal))
            .collect()
    }

    /// A candidate inside the bounds: redrawn up to `10 n` times, then clipped.
    pub(super) fn ask<R: Rng>(&self, rng: &mut R) -> Vec<f64> {
        let inside = |x: &[f64]| {
            x.iter()
                .zip(&self.bounds)
                .all(|(v, (lo, hi))| lo <= v && v <= hi)
        };
        for _ in 0..self.n_max_resampling {
            let x = self.sample_solution(rng);
            if inside(&x) {
                return x;
            }
        }
        self.sample_solution(rng)
            .into_iter()
            .zip(&self.bounds)
            .map(|(v, (lo, hi))| v.clamp(*lo, *hi))
            .collect()
    }

    /// Updates the distribution from one generation (`popsize` pairs, to minimise).
    pub(super) fn tell(&mut self, mut solutions: Vec<(Vec<f64>, f64)>) {
        let n = self.dim();
        let k = Constants::new(n, self.popsize);
        self.generation += 1;
        solutions.sort_by(|a, b| a.1.total_cmp(&b.1));
        record_funhist(
            &mut self.funhist,
            self.generation,
            funhist_term(n, self.popsize),
            &solutions,
        );
        let d = self.d();
        let y_k: Vec<Vec<f64>> = solutions
            .iter()
            .map(|(x, _)| {
                x.iter()
                    .zip(&self.mean)
                    .map(|(x, m)| (x - m) / self.sigma)
                    .collect()
            })
            .collect();
        let mut y_w = vec![0.0; n];
        for (y, w) in y_k.iter().zip(&k.weights).take(k.mu) {
            for (a, b) in y_w.iter_mut().zip(y) {
                *a += w * b;
            }
        }
        for (m, y) in self.mean.iter_mut().zip(&y_w) {
            *m += self.sigma * y;
        }
        let ps_scale = (k.c_sigma * (2.0 - k.c_sigma) * k.mu_eff).sqrt();
        for ((p, y), d) in self.p_sigma.iter_mut().zip(&y_w).zip(&d) {
            *p = (1.0 - k.c_sigma) * *p + ps_scale * y / d;
        }
        let norm_ps = norm(&self.p_sigma);
        let chi = chi_n(n);
        self.sigma *= ((k.c_sigma / k.d_sigma) * (norm_ps / chi - 1.0)).exp();
        self.sigma = self.sigma.min(SIGMA_MAX);
        let h_left =
            norm_ps / (1.0 - (1.0 - k.c_sigma).powf(2.0 * (self.generation + 1) as f64)).sqrt();
        let h_sigma = if h_left < (1.4 + 2.0 / (n as f64 + 1.0)) * chi {
            1.0
        } else {
            0.0
        };
        let pc_scale = h_sigma * (k.cc * (2.0 - k.cc) * k.mu_eff).sqrt();
        for (p, y) in self.pc.iter_mut().zip(&y_w) {
            *p = (1.0 - k.cc) * *p + pc_scale * y;
        }
        let delta_h = (1.0 - h_sigma) * k.cc * (2.0 - k.cc);
        let sum_w: f64 = k.weights.iter().sum();
        let decay = 1.0 + k.c1 * delta_h - k.c1 - k.cmu * sum_w;
        for i in 0..n {
            // Optuna's `cmaes` zips all `popsize` solutions with the `mu`
            // weights, which keeps the best `mu`.
            let rank_mu: f64 = k
                .weights
                .iter()
                .zip(&y_k)
                .map(|(w, y)| w * y[i] * y[i])
                .sum();
            self.c[i] = decay * self.c[i] + k.c1 * self.pc[i] * self.pc[i] + k.cmu * rank_mu;
        }
    }

    /// Whether the search has converged or degenerated (as full CMA-ES).
    pub(super) fn should_stop(&self) -> bool {
        let n = self.dim();
        let d = self.d();
        if stopped_by_values(
            &self.funhist,
            self.generation,
            funhist_term(n, self.popsize),
        ) {
            return true;
        }
        if self.c.iter().all(|c| self.sigma * c < self.tolx)
            && self.pc.iter().all(|p| self.sigma * p < self.tolx)
        {
            return true;
        }
        let d_max = d.iter().copied().fold(f64::MIN, f64::max);
        let d_min = d.iter().copied().fold(f64::MAX, f64::min);
        if self.sigma * d_max > 1e4 {
            return true;
        }
        if self
            .mean
            .iter()
            .zip(&self.c)
            .any(|(m, c)| *m == m + 0.2 * self.sigma * c.sqrt())
        {
            return true;
        }
        let i = (self.generation % n as u64) as usize;
        if self.mean.iter().all(|m| *m == m + 0.1 * self.sigma * d[i]) {
            return true;
        }
        d_max / d_min > 1e14
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sampler::cmaes::cma::default_popsize;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn solves_a_separable_ellipsoid() {
        let n = 8;
        let f = |x: &[f64]| -> f64 {
            x.iter()
                .enumerate()
                .map(|(i, v)| 1e4f64.powf(i as f64 / (n - 1) as f64) * (v - 1.0).powi(2))
                .sum()
        };
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let popsize = default_popsize(n);
        let mut cma = SepCma::new(vec![-2.0; n], 2.0, vec![(-5.0, 5.0); n], popsize);
        let mut best = f64::MAX;
        for _ in 0..500 {
            let sols = (0..popsize)
                .map(|_| {
                    let x = cma.ask(&mut rng);
                    let v = f(&x);
                    best = best.min(v);
                    (x, v)
                })
                .collect();
            cma.tell(sols);
        }
        assert!(best < 1e-8, "{best}");
        let back: SepCma = serde_json::from_str(&serde_json::to_string(&cma).unwrap()).unwrap();
        assert_eq!(back, cma);
    }
}
