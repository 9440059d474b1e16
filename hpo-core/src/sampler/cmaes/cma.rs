//! CMA-ES with a full covariance matrix, and its learning-rate adaptation.
//!
//! The update is Hansen's (2016) "The CMA Evolution Strategy: A Tutorial",
//! with negative weights for the worst half of the population (active
//! CMA), exactly as the `cmaes` Python library's `CMA` class that Optuna's
//! `CmaEsSampler` uses; the equation numbers in comments are the tutorial's.
//! Learning-rate adaptation (LRA-CMA-ES) is Nomura, Akimoto and Ono (2023),
//! "CMA-ES with learning rate adaptation: can CMA-ES with default population
//! size solve multimodal and noisy problems?", again as `cmaes` implements it.
//!
//! The state is plain data (serde), stored in the study between generations;
//! the constants that follow from the dimension and the population size are
//! recomputed, never stored.

use super::linalg::{identity, mat_vec, norm, symmetric_eigen};
use rand::Rng;
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

/// Eigenvalues below this are taken as this (a numerically broken C).
const EPS: f64 = 1e-8;
/// Step sizes are capped here (as `cmaes`).
const SIGMA_MAX: f64 = 1e32;

/// The constants of one (dimension, population size).
#[derive(Debug, Clone)]
pub(super) struct Constants {
    pub(super) mu: usize,
    pub(super) mu_eff: f64,
    pub(super) weights: Vec<f64>,
    pub(super) cc: f64,
    pub(super) c1: f64,
    pub(super) cmu: f64,
    pub(super) c_sigma: f64,
    pub(super) d_sigma: f64,
    pub(super) chi_n: f64,
    pub(super) funhist_term: usize,
}

impl Constants {
    fn new(n: usize, popsize: usize) -> Constants {
        let nf = n as f64;
        let mu = popsize / 2;
        let wp: Vec<f64> = (0..popsize)
            .map(|i| ((popsize as f64 + 1.0) / 2.0).ln() - ((i + 1) as f64).ln())
            .collect();
        let eff = |w: &[f64]| {
            let s: f64 = w.iter().sum();
            s * s / w.iter().map(|x| x * x).sum::<f64>()
        };
        let mu_eff = eff(&wp[..mu]);
        let mu_eff_minus = eff(&wp[mu..]);
        let alpha_cov = 2.0;
        let c1 = alpha_cov / ((nf + 1.3).powi(2) + mu_eff);
        let cmu = (1.0 - c1 - 1e-8).min(
            alpha_cov * (mu_eff - 2.0 + 1.0 / mu_eff)
                / ((nf + 2.0).powi(2) + alpha_cov * mu_eff / 2.0),
        );
        let min_alpha = (1.0 + c1 / cmu)
            .min(1.0 + 2.0 * mu_eff_minus / (mu_eff + 2.0))
            .min((1.0 - c1 - cmu) / (nf * cmu));
        let positive: f64 = wp.iter().filter(|w| **w > 0.0).sum();
        let negative: f64 = wp.iter().filter(|w| **w < 0.0).map(|w| w.abs()).sum();
        let weights = wp
            .iter()
            .map(|&w| {
                if w >= 0.0 {
                    w / positive
                } else {
                    min_alpha / negative * w
                }
            })
            .collect();
        let c_sigma = (mu_eff + 2.0) / (nf + mu_eff + 5.0);
        let d_sigma = 1.0 + 2.0 * (((mu_eff - 1.0) / (nf + 1.0)).sqrt() - 1.0).max(0.0) + c_sigma;
        let cc = (4.0 + mu_eff / nf) / (nf + 4.0 + 2.0 * mu_eff / nf);
        Constants {
            mu,
            mu_eff,
            weights,
            cc,
            c1,
            cmu,
            c_sigma,
            d_sigma,
            chi_n: chi_n(n),
            funhist_term: funhist_term(n, popsize),
        }
    }
}

/// `E||N(0, I)||` (approximation used by every CMA-ES implementation).
pub(super) fn chi_n(n: usize) -> f64 {
    let nf = n as f64;
    nf.sqrt() * (1.0 - 1.0 / (4.0 * nf) + 1.0 / (21.0 * nf * nf))
}

/// Generations of best/worst values kept for the `tolfun` stopping rule.
pub(super) fn funhist_term(n: usize, popsize: usize) -> usize {
    10 + (30.0 * n as f64 / popsize as f64).ceil() as usize
}

/// The default population size, `4 + floor(3 ln n)` (eq. 48).
pub(super) fn default_popsize(n: usize) -> usize {
    4 + (3.0 * (n as f64).ln()).floor() as usize
}

/// Learning-rate adaptation state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Lra {
    #[serde(with = "super::exact::floats")]
    e_mean: Vec<f64>,
    #[serde(with = "super::exact::floats")]
    e_sigma: Vec<f64>,
    #[serde(with = "super::exact::float")]
    v_mean: f64,
    #[serde(with = "super::exact::float")]
    v_sigma: f64,
    #[serde(with = "super::exact::float")]
    eta_mean: f64,
    #[serde(with = "super::exact::float")]
    eta_sigma: f64,
}

impl Lra {
    const ALPHA: f64 = 1.4;
    const BETA_MEAN: f64 = 0.1;
    const BETA_SIGMA: f64 = 0.03;
    const GAMMA: f64 = 0.1;

    fn new(n: usize) -> Lra {
        Lra {
            e_mean: vec![0.0; n],
            e_sigma: vec![0.0; n * n],
            v_mean: 0.0,
            v_sigma: 0.0,
            eta_mean: 1.0,
            eta_sigma: 1.0,
        }
    }
}

/// The eigen decomposition `C = B diag(D^2) B^T` used to sample and update.
struct Decomposed {
    /// Eigenvectors as columns, row-major.
    b: Vec<f64>,
    /// Square roots of the eigenvalues.
    d: Vec<f64>,
}

impl Decomposed {
    /// `B diag(scale) B^T`.
    fn compose(&self, scale: impl Fn(f64) -> f64) -> Vec<f64> {
        let n = self.d.len();
        let s: Vec<f64> = self.d.iter().map(|&d| scale(d)).collect();
        (0..n * n)
            .map(|k| {
                let (i, j) = (k / n, k % n);
                (0..n)
                    .map(|l| self.b[i * n + l] * s[l] * self.b[j * n + l])
                    .sum()
            })
            .collect()
    }
}

/// The CMA-ES state (full covariance).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Cma {
    popsize: usize,
    #[serde(with = "super::exact::floats")]
    mean: Vec<f64>,
    #[serde(with = "super::exact::float")]
    sigma: f64,
    /// The covariance matrix, row-major.
    #[serde(with = "super::exact::floats")]
    c: Vec<f64>,
    #[serde(with = "super::exact::floats")]
    p_sigma: Vec<f64>,
    #[serde(with = "super::exact::floats")]
    pc: Vec<f64>,
    /// Lower and upper bound per coordinate.
    #[serde(with = "super::exact::pairs")]
    bounds: Vec<(f64, f64)>,
    n_max_resampling: usize,
    generation: u64,
    /// Best and worst value of the last `funhist_term` generations.
    #[serde(with = "super::exact::floats")]
    funhist: Vec<f64>,
    #[serde(with = "super::exact::float")]
    tolx: f64,
    lra: Option<Lra>,
}

impl Cma {
    /// A fresh state around `mean` with step size `sigma` and covariance
    /// `cov` (the identity when `None`).
    pub(super) fn new(
        mean: Vec<f64>,
        sigma: f64,
        cov: Option<Vec<f64>>,
        bounds: Vec<(f64, f64)>,
        popsize: usize,
        lr_adapt: bool,
    ) -> Cma {
        let n = mean.len();
        Cma {
            popsize,
            sigma,
            c: cov.unwrap_or_else(|| identity(n)),
            p_sigma: vec![0.0; n],
            pc: vec![0.0; n],
            bounds,
            n_max_resampling: 10 * n,
            generation: 0,
            funhist: vec![0.0; 2 * funhist_term(n, popsize)],
            tolx: 1e-12 * sigma,
            lra: lr_adapt.then(|| Lra::new(n)),
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

    /// The mean.
    pub(super) fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The step size.
    pub(super) fn sigma(&self) -> f64 {
        self.sigma
    }

    /// The covariance matrix, row-major.
    #[cfg(test)]
    pub(super) fn c(&self) -> &[f64] {
        &self.c
    }

    /// The covariance's diagonal.
    pub(super) fn c_diag(&self) -> Vec<f64> {
        let n = self.dim();
        (0..n).map(|i| self.c[i * n + i]).collect()
    }

    /// Moves the mean (the integer-margin correction does).
    pub(super) fn set_mean(&mut self, mean: Vec<f64>) {
        self.mean = mean;
    }

    /// Symmetrises C, decomposes it and replaces negative eigenvalues (as `cmaes`).
    fn decompose(&mut self) -> Decomposed {
        let n = self.dim();
        for i in 0..n {
            for j in (i + 1)..n {
                let avg = (self.c[i * n + j] + self.c[j * n + i]) / 2.0;
                self.c[i * n + j] = avg;
                self.c[j * n + i] = avg;
            }
        }
        let e = symmetric_eigen(&self.c, n);
        let dec = Decomposed {
            b: e.vectors,
            d: e.values
                .iter()
                .map(|&v| if v < 0.0 { EPS } else { v }.sqrt())
                .collect(),
        };
        self.c = dec.compose(|d| d * d);
        dec
    }

    /// One draw from `N(mean, sigma^2 C)`, unbounded.
    pub(super) fn sample_solution<R: Rng>(&mut self, rng: &mut R) -> Vec<f64> {
        let dec = self.decompose();
        let n = self.dim();
        let z: Vec<f64> = (0..n).map(|_| rng.sample(StandardNormal)).collect();
        let dz: Vec<f64> = z.iter().zip(&dec.d).map(|(z, d)| z * d).collect();
        let y = mat_vec(&dec.b, &dz);
        self.mean
            .iter()
            .zip(y)
            .map(|(m, y)| m + self.sigma * y)
            .collect()
    }

    /// A candidate inside the bounds: redrawn up to `10 n` times, then clipped.
    pub(super) fn ask<R: Rng>(&mut self, rng: &mut R) -> Vec<f64> {
        for _ in 0..self.n_max_resampling {
            let x = self.sample_solution(rng);
            if self.feasible(&x) {
                return x;
            }
        }
        let x = self.sample_solution(rng);
        self.clip(x)
    }

    fn feasible(&self, x: &[f64]) -> bool {
        x.iter()
            .zip(&self.bounds)
            .all(|(v, (lo, hi))| lo <= v && v <= hi)
    }

    fn clip(&self, x: Vec<f64>) -> Vec<f64> {
        x.into_iter()
            .zip(&self.bounds)
            .map(|(v, (lo, hi))| v.clamp(*lo, *hi))
            .collect()
    }

    /// Updates the distribution from one generation's `(x, value)` pairs
    /// (`popsize` of them, to minimise).
    pub(super) fn tell(&mut self, mut solutions: Vec<(Vec<f64>, f64)>) {
        let n = self.dim();
        let k = Constants::new(n, self.popsize);
        self.generation += 1;
        solutions.sort_by(|a, b| a.1.total_cmp(&b.1));
        record_funhist(
            &mut self.funhist,
            self.generation,
            k.funhist_term,
            &solutions,
        );
        let dec = self.decompose();
        let old = self.lra.is_some().then(|| {
            (
                self.mean.clone(),
                self.sigma,
                self.c
                    .iter()
                    .map(|c| self.sigma * self.sigma * c)
                    .collect::<Vec<f64>>(),
            )
        });
        let y_k: Vec<Vec<f64>> = solutions
            .iter()
            .map(|(x, _)| {
                x.iter()
                    .zip(&self.mean)
                    .map(|(x, m)| (x - m) / self.sigma)
                    .collect()
            })
            .collect();
        // eq. 41
        let mut y_w = vec![0.0; n];
        for (y, w) in y_k.iter().zip(&k.weights).take(k.mu) {
            for (a, b) in y_w.iter_mut().zip(y) {
                *a += w * b;
            }
        }
        for (m, y) in self.mean.iter_mut().zip(&y_w) {
            *m += self.sigma * y;
        }
        // C^(-1/2) = B D^-1 B^T
        let c_2 = dec.compose(|d| 1.0 / d);
        let c2yw = mat_vec(&c_2, &y_w);
        let ps_scale = (k.c_sigma * (2.0 - k.c_sigma) * k.mu_eff).sqrt();
        for (p, v) in self.p_sigma.iter_mut().zip(&c2yw) {
            *p = (1.0 - k.c_sigma) * *p + ps_scale * v;
        }
        let norm_ps = norm(&self.p_sigma);
        self.sigma *= ((k.c_sigma / k.d_sigma) * (norm_ps / k.chi_n - 1.0)).exp();
        self.sigma = self.sigma.min(SIGMA_MAX);
        let h_left =
            norm_ps / (1.0 - (1.0 - k.c_sigma).powf(2.0 * (self.generation + 1) as f64)).sqrt();
        let h_right = (1.4 + 2.0 / (n as f64 + 1.0)) * k.chi_n;
        let h_sigma = if h_left < h_right { 1.0 } else { 0.0 };
        let pc_scale = h_sigma * (k.cc * (2.0 - k.cc) * k.mu_eff).sqrt();
        for (p, y) in self.pc.iter_mut().zip(&y_w) {
            *p = (1.0 - k.cc) * *p + pc_scale * y;
        }
        // Negative weights are rescaled by n / ||C^-1/2 y||^2 (eq. 46).
        let w_io: Vec<f64> = k
            .weights
            .iter()
            .zip(&y_k)
            .map(|(&w, y)| {
                if w >= 0.0 {
                    w
                } else {
                    w * n as f64 / (norm(&mat_vec(&c_2, y)).powi(2) + EPS)
                }
            })
            .collect();
        let delta_h = (1.0 - h_sigma) * k.cc * (2.0 - k.cc);
        let sum_w: f64 = k.weights.iter().sum();
        let decay = 1.0 + k.c1 * delta_h - k.c1 - k.cmu * sum_w;
        for i in 0..n {
            for j in 0..n {
                let rank_mu: f64 = w_io.iter().zip(&y_k).map(|(w, y)| w * y[i] * y[j]).sum();
                let c = &mut self.c[i * n + j];
                *c = decay * *c + k.c1 * self.pc[i] * self.pc[j] + k.cmu * rank_mu;
            }
        }
        if let Some((old_mean, old_sigma, old_big_sigma)) = old {
            let old_inv_sqrt_c = c_2;
            self.adapt_learning_rate(&old_mean, old_sigma, &old_big_sigma, &old_inv_sqrt_c);
        }
    }

    /// LRA-CMA-ES: measures the signal-to-noise ratio of the mean and
    /// covariance updates and scales their learning rates to keep it at
    /// `ALPHA` (`cmaes`'s `_lr_adaptation`).
    fn adapt_learning_rate(
        &mut self,
        old_mean: &[f64],
        old_sigma: f64,
        old_big_sigma: &[f64],
        old_inv_sqrt_c: &[f64],
    ) {
        let n = self.dim();
        let Some(lra) = self.lra.as_mut() else {
            return;
        };
        let delta_mean: Vec<f64> = self.mean.iter().zip(old_mean).map(|(a, b)| a - b).collect();
        let big_sigma: Vec<f64> = self.c.iter().map(|c| self.sigma * self.sigma * c).collect();
        let delta_big_sigma: Vec<f64> = big_sigma
            .iter()
            .zip(old_big_sigma)
            .map(|(a, b)| a - b)
            .collect();
        let inv: Vec<f64> = old_inv_sqrt_c.iter().map(|v| v / old_sigma).collect();
        let loc_mean = mat_vec(&inv, &delta_mean);
        // inv * DeltaSigma * inv, flattened, / sqrt(2)
        let tmp: Vec<f64> = (0..n * n)
            .map(|k| {
                let (i, j) = (k / n, k % n);
                (0..n)
                    .map(|l| inv[i * n + l] * delta_big_sigma[l * n + j])
                    .sum()
            })
            .collect();
        let loc_sigma: Vec<f64> = (0..n * n)
            .map(|k| {
                let (i, j) = (k / n, k % n);
                (0..n).map(|l| tmp[i * n + l] * inv[l * n + j]).sum::<f64>()
                    / std::f64::consts::SQRT_2
            })
            .collect();
        let (bm, bs) = (Lra::BETA_MEAN, Lra::BETA_SIGMA);
        for (e, l) in lra.e_mean.iter_mut().zip(&loc_mean) {
            *e = (1.0 - bm) * *e + bm * l;
        }
        for (e, l) in lra.e_sigma.iter_mut().zip(&loc_sigma) {
            *e = (1.0 - bs) * *e + bs * l;
        }
        lra.v_mean = (1.0 - bm) * lra.v_mean + bm * norm(&loc_mean).powi(2);
        lra.v_sigma = (1.0 - bs) * lra.v_sigma + bs * norm(&loc_sigma).powi(2);
        let sq_e_mean = norm(&lra.e_mean).powi(2);
        let snr_mean = (sq_e_mean - (bm / (2.0 - bm)) * lra.v_mean) / (lra.v_mean - sq_e_mean);
        let sq_e_sigma = norm(&lra.e_sigma).powi(2);
        let snr_sigma = (sq_e_sigma - (bs / (2.0 - bs)) * lra.v_sigma) / (lra.v_sigma - sq_e_sigma);
        let before_eta_mean = lra.eta_mean;
        let rel_mean = (snr_mean / Lra::ALPHA / lra.eta_mean - 1.0).clamp(-1.0, 1.0);
        lra.eta_mean *= ((Lra::GAMMA * lra.eta_mean).min(bm) * rel_mean).exp();
        let rel_sigma = (snr_sigma / Lra::ALPHA / lra.eta_sigma - 1.0).clamp(-1.0, 1.0);
        lra.eta_sigma *= ((Lra::GAMMA * lra.eta_sigma).min(bs) * rel_sigma).exp();
        lra.eta_mean = lra.eta_mean.min(1.0);
        lra.eta_sigma = lra.eta_sigma.min(1.0);
        self.mean = old_mean
            .iter()
            .zip(&delta_mean)
            .map(|(m, d)| m + lra.eta_mean * d)
            .collect();
        let big_sigma: Vec<f64> = old_big_sigma
            .iter()
            .zip(&delta_big_sigma)
            .map(|(s, d)| s + lra.eta_sigma * d)
            .collect();
        let log_det: f64 = symmetric_eigen(&big_sigma, n)
            .values
            .iter()
            .map(|e| e.ln())
            .sum();
        self.sigma = (log_det / 2.0 / n as f64).exp().min(SIGMA_MAX);
        let s2 = self.sigma * self.sigma;
        self.c = big_sigma.iter().map(|v| v / s2).collect();
        self.sigma *= before_eta_mean / lra.eta_mean;
    }

    /// Whether the search has converged or degenerated (`cmaes`'s
    /// `should_stop`: flat values, tiny or huge steps, no effect on the
    /// mean, an ill-conditioned covariance).
    pub(super) fn should_stop(&mut self) -> bool {
        let n = self.dim();
        let k = funhist_term(n, self.popsize);
        let dec = self.decompose();
        let c_diag = self.c_diag();
        if stopped_by_values(&self.funhist, self.generation, k) {
            return true;
        }
        if c_diag.iter().all(|c| self.sigma * c < self.tolx)
            && self.pc.iter().all(|p| self.sigma * p < self.tolx)
        {
            return true;
        }
        let d_max = dec.d.iter().copied().fold(f64::MIN, f64::max);
        let d_min = dec.d.iter().copied().fold(f64::MAX, f64::min);
        if self.sigma * d_max > 1e4 {
            return true;
        }
        if self
            .mean
            .iter()
            .zip(&c_diag)
            .any(|(m, c)| *m == m + 0.2 * self.sigma * c.sqrt())
        {
            return true;
        }
        let i = (self.generation % n as u64) as usize;
        if (0..n)
            .all(|r| self.mean[r] == self.mean[r] + 0.1 * self.sigma * dec.d[i] * dec.b[r * n + i])
        {
            return true;
        }
        d_max / d_min > 1e14
    }
}

/// Records a generation's best and worst values (kept finite, so the state
/// stays valid JSON).
pub(super) fn record_funhist(
    funhist: &mut [f64],
    generation: u64,
    term: usize,
    sorted: &[(Vec<f64>, f64)],
) {
    let i = 2 * (generation % term as u64) as usize;
    if let (Some(best), Some(worst)) = (sorted.first(), sorted.last()) {
        if i + 1 < funhist.len() {
            funhist[i] = best.1.clamp(f64::MIN, f64::MAX);
            funhist[i + 1] = worst.1.clamp(f64::MIN, f64::MAX);
        }
    }
}

/// `tolfun`: the recent generations' values span less than 1e-12.
pub(super) fn stopped_by_values(funhist: &[f64], generation: u64, term: usize) -> bool {
    if generation <= term as u64 {
        return false;
    }
    let max = funhist.iter().copied().fold(f64::MIN, f64::max);
    let min = funhist.iter().copied().fold(f64::MAX, f64::min);
    max - min < 1e-12
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn run(f: impl Fn(&[f64]) -> f64, n: usize, lr_adapt: bool, generations: usize) -> f64 {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let bounds = vec![(-5.0, 5.0); n];
        let mut cma = Cma::new(
            vec![3.0; n],
            2.0,
            None,
            bounds,
            default_popsize(n),
            lr_adapt,
        );
        let mut best = f64::MAX;
        for _ in 0..generations {
            let sols: Vec<(Vec<f64>, f64)> = (0..cma.popsize())
                .map(|_| {
                    let x = cma.ask(&mut rng);
                    let v = f(&x);
                    best = best.min(v);
                    (x, v)
                })
                .collect();
            cma.tell(sols);
        }
        best
    }

    fn ellipsoid(x: &[f64]) -> f64 {
        let n = x.len() as f64;
        x.iter()
            .enumerate()
            .map(|(i, v)| 1e6f64.powf(i as f64 / (n - 1.0)) * v * v)
            .sum()
    }

    #[test]
    fn constants_are_those_of_the_tutorial() {
        // n = 10: popsize 10, mu 5, weights summing to 1 over the best half.
        let k = Constants::new(10, default_popsize(10));
        assert_eq!(default_popsize(10), 10);
        assert_eq!(k.mu, 5);
        let pos: f64 = k.weights[..5].iter().sum();
        assert!((pos - 1.0).abs() < 1e-12);
        assert!(k.weights[5..].iter().all(|w| *w < 0.0));
        assert!((k.mu_eff - 3.1672992).abs() < 1e-6, "{}", k.mu_eff);
    }

    #[test]
    fn solves_an_ill_conditioned_ellipsoid() {
        // Conditioning 1e6 in 6-D: needs the covariance, not just the step size.
        let best = run(ellipsoid, 6, false, 400);
        assert!(best < 1e-8, "{best}");
    }

    #[test]
    fn learning_rate_adaptation_also_converges() {
        let best = run(|x| x.iter().map(|v| v * v).sum(), 5, true, 300);
        assert!(best < 1e-8, "{best}");
    }

    #[test]
    fn the_state_round_trips_through_json() {
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let mut cma = Cma::new(vec![0.5; 3], 0.2, None, vec![(0.0, 1.0); 3], 7, true);
        let sols = (0..7)
            .map(|_| {
                let x = cma.ask(&mut rng);
                let v = x.iter().sum();
                (x, v)
            })
            .collect();
        cma.tell(sols);
        let json = serde_json::to_string(&cma).unwrap();
        let back: Cma = serde_json::from_str(&json).unwrap();
        assert_eq!(back, cma);
    }

    #[test]
    fn stops_when_converged() {
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut cma = Cma::new(vec![0.3; 2], 0.1, None, vec![(-1.0, 1.0); 2], 6, false);
        let mut stopped = false;
        for _ in 0..2000 {
            let sols = (0..6)
                .map(|_| {
                    let x = cma.ask(&mut rng);
                    let v = x.iter().map(|v| v * v).sum();
                    (x, v)
                })
                .collect();
            cma.tell(sols);
            if cma.should_stop() {
                stopped = true;
                break;
            }
        }
        assert!(stopped, "never stopped: sigma {}", cma.sigma());
    }
}
