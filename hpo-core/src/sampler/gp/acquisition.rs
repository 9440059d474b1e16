//! Log expected improvement, and its constrained form: `log EI(x) + log
//! P(feasible | x)`, with gradients.
//!
//! `log EI` is computed as in "Unexpected Improvements to Expected
//! Improvement for Bayesian Optimization" (Ament et al., 2023) and Optuna's
//! `standard_logei`: directly while `z ≥ -25`, and from the asymptotic
//! series of `erfcx` below, where `EI` itself underflows but its logarithm,
//! and the gradient that drives the local search, stay finite. `log Φ` for
//! the feasibility term likewise switches to its asymptotic series far in
//! the tail.

use super::model::{Kept, Model};
use std::f64::consts::FRAC_1_SQRT_2;

/// Added to the posterior variance before dividing by it (Optuna's).
const STABILIZING_NOISE: f64 = 1e-12;
/// `ln √(2π)`.
const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// `Φ(z)`.
fn norm_cdf(z: f64) -> f64 {
    0.5 * libm::erfc(-z * FRAC_1_SQRT_2)
}

/// `φ(z)`.
fn norm_pdf(z: f64) -> f64 {
    (-0.5 * z * z - LN_SQRT_2PI).exp()
}

/// `log h(z)` with `h(z) = E[max(0, Z + z)] = z Φ(z) + φ(z)`, and its
/// derivative `Φ(z) / h(z)`.
pub(super) fn log_h(z: f64) -> (f64, f64) {
    if z >= -25.0 {
        let h = z * norm_cdf(z) + norm_pdf(z);
        return (h.ln(), norm_cdf(z) / h);
    }
    // h(z) = φ(z) S(u), u = -z/√2, S(u) = Σ c_k u^{-2k} (the series of
    // 1 + √(π/2) z erfcx(u)).
    const C: [f64; 5] = [0.5, -0.75, 1.875, -6.5625, 29.53125];
    let u = -z * FRAC_1_SQRT_2;
    let inv2 = 1.0 / (u * u);
    let (mut s, mut ds, mut pow) = (0.0, 0.0, inv2);
    for (k, c) in C.iter().enumerate() {
        s += c * pow;
        // d/du u^{-2(k+1)} = -2(k+1) u^{-2(k+1)-1}.
        ds += c * -2.0 * (k + 1) as f64 * pow / u;
        pow *= inv2;
    }
    let value = -0.5 * z * z - LN_SQRT_2PI + s.ln();
    let slope = -z + ds / s * -FRAC_1_SQRT_2;
    (value, slope)
}

/// `log Φ(z)` and its derivative `φ(z) / Φ(z)`.
pub(super) fn log_cdf(z: f64) -> (f64, f64) {
    if z >= -30.0 {
        let c = norm_cdf(z);
        let v = c.ln();
        return (v, (-0.5 * z * z - LN_SQRT_2PI - v).exp());
    }
    // Φ(z) = φ(z)/(-z) T(z), T = 1 - z⁻² + 3z⁻⁴ - 15z⁻⁶.
    let zi2 = 1.0 / (z * z);
    let t = 1.0 - zi2 + 3.0 * zi2 * zi2 - 15.0 * zi2 * zi2 * zi2;
    let dt = 2.0 * zi2 / z - 12.0 * zi2 * zi2 / z + 90.0 * zi2 * zi2 * zi2 / z;
    let value = -0.5 * z * z - (-z).ln() - LN_SQRT_2PI + t.ln();
    (value, -z - 1.0 / z + dt / t)
}

/// `log EI` of a normal `N(mean, var)` over `best`, and its partial
/// derivatives with respect to the mean and the variance.
pub(super) fn log_ei(mean: f64, var: f64, best: f64) -> (f64, f64, f64) {
    let sigma = (var + STABILIZING_NOISE).sqrt();
    let z = (mean - best) / sigma;
    let (lh, dlh) = log_h(z);
    let value = lh + sigma.ln();
    let d_mean = dlh / sigma;
    // ∂/∂σ = (1 - z dlh) / σ; ∂σ/∂var = 1 / (2σ).
    let d_var = (1.0 - z * dlh) / sigma / (2.0 * sigma);
    (value, d_mean, d_var)
}

/// `log P(g ≥ threshold)` of `g ~ N(mean, var)`, with its partials.
pub(super) fn log_pi(mean: f64, var: f64, threshold: f64) -> (f64, f64, f64) {
    let sigma = (var + STABILIZING_NOISE).sqrt();
    let z = (mean - threshold) / sigma;
    let (lc, dlc) = log_cdf(z);
    (lc, dlc / sigma, -dlc * z / sigma / (2.0 * sigma))
}

/// What the local search climbs.
#[derive(Debug)]
pub(super) struct Acquisition<'m> {
    /// The objective's model (values standardised, larger is better).
    pub(super) objective: &'m Model,
    /// The best feasible standardised value, `None` when no trial is
    /// feasible yet (then only the feasibility term counts, as in Optuna).
    pub(super) best: Option<f64>,
    /// The feasibility model and the level above which a point is feasible.
    pub(super) feasibility: Option<(&'m Model, f64)>,
}

impl Acquisition<'_> {
    /// The acquisition at `p`.
    pub(super) fn value(&self, p: &[f64]) -> f64 {
        let mut v = 0.0;
        if let Some(best) = self.best {
            let (m, s2) = self.objective.posterior(p);
            v += log_ei(m, s2, best).0;
        }
        if let Some((model, threshold)) = self.feasibility {
            let (m, s2) = model.posterior(p);
            v += log_pi(m, s2, threshold).0;
        }
        v
    }

    /// The acquisition at each of `points` (eight at a time, see
    /// [`Model::posterior_many`]).
    pub(super) fn values(&self, points: &[Vec<f64>]) -> Vec<f64> {
        let mut v = vec![0.0; points.len()];
        if let Some(best) = self.best {
            for (o, (m, s2)) in v.iter_mut().zip(self.objective.posterior_many(points)) {
                *o += log_ei(m, s2, best).0;
            }
        }
        if let Some((model, threshold)) = self.feasibility {
            for (o, (m, s2)) in v.iter_mut().zip(model.posterior_many(points)) {
                *o += log_pi(m, s2, threshold).0;
            }
        }
        v
    }

    /// The acquisition at `p`, its gradient written to `grad`.
    #[cfg(test)]
    pub(super) fn value_grad(&self, p: &[f64], grad: &mut [f64]) -> f64 {
        let mut kept = KeptAcquisition::default();
        let v = self.value_kept(p, &mut kept);
        self.gradient_kept(p, &mut kept, grad);
        v
    }

    /// The acquisition at `p` (the same bits as [`Acquisition::value_grad`]
    /// gives), keeping in `kept` what [`Acquisition::gradient_kept`] needs.
    pub(super) fn value_kept(&self, p: &[f64], kept: &mut KeptAcquisition) -> f64 {
        let mut v = 0.0;
        if let Some(best) = self.best {
            let (m, s2) = self.objective.posterior_kept(p, &mut kept.objective);
            let (val, a, b) = log_ei(m, s2, best);
            v += val;
            kept.ei = (a, b);
        }
        if let Some((model, threshold)) = self.feasibility {
            let (m, s2) = model.posterior_kept(p, &mut kept.feasibility);
            let (val, a, b) = log_pi(m, s2, threshold);
            v += val;
            kept.pi = (a, b);
        }
        v
    }

    /// The gradient at `p`, the point of the last
    /// [`Acquisition::value_kept`] call, which filled `kept`.
    pub(super) fn gradient_kept(&self, p: &[f64], kept: &mut KeptAcquisition, grad: &mut [f64]) {
        let d = p.len();
        let mut dm = vec![0.0; d];
        let mut dv = vec![0.0; d];
        grad.fill(0.0);
        if self.best.is_some() {
            self.objective
                .gradient_kept(p, &mut kept.objective, &mut dm, &mut dv);
            let (a, b) = kept.ei;
            for j in 0..d {
                grad[j] += a * dm[j] + b * dv[j];
            }
        }
        if let Some((model, _)) = self.feasibility {
            model.gradient_kept(p, &mut kept.feasibility, &mut dm, &mut dv);
            let (a, b) = kept.pi;
            for j in 0..d {
                grad[j] += a * dm[j] + b * dv[j];
            }
        }
    }
}

/// What [`Acquisition::value_kept`] keeps for
/// [`Acquisition::gradient_kept`]: each model's, and the partials of log EI
/// and log PI with respect to the mean and the variance.
#[derive(Debug, Default)]
pub(super) struct KeptAcquisition {
    objective: Kept,
    feasibility: Kept,
    ei: (f64, f64),
    pi: (f64, f64),
}

#[cfg(test)]
mod tests {
    use super::super::kernel::KernelParams;
    use super::*;

    #[test]
    fn log_h_is_continuous_across_the_switch_and_matches_its_slope() {
        let (a, _) = log_h(-25.0 + 1e-9);
        let (b, _) = log_h(-25.0 - 1e-9);
        assert!((a - b).abs() < 1e-7, "{a} {b}");
        for z in [-60.0, -30.0, -24.0, -5.0, -1.0, 0.0, 0.5, 3.0, 20.0] {
            let h = 1e-5;
            let fd = (log_h(z + h).0 - log_h(z - h).0) / (2.0 * h);
            let (_, slope) = log_h(z);
            assert!(
                (fd - slope).abs() < 1e-5 * (1.0 + fd.abs()),
                "{z}: {fd} {slope}"
            );
        }
        // h(0) = φ(0) = 1/√(2π).
        assert!((log_h(0.0).0 + LN_SQRT_2PI).abs() < 1e-15);
        // Deep in the tail EI underflows but its log does not.
        assert!(log_h(-100.0).0.is_finite() && log_h(-100.0).0 < -5000.0);
    }

    #[test]
    fn log_cdf_is_continuous_and_matches_its_slope() {
        let (a, _) = log_cdf(-30.0 + 1e-9);
        let (b, _) = log_cdf(-30.0 - 1e-9);
        assert!((a - b).abs() < 1e-6, "{a} {b}");
        for z in [-80.0, -31.0, -10.0, -1.0, 0.0, 2.0, 9.0] {
            let h = 1e-5;
            let fd = (log_cdf(z + h).0 - log_cdf(z - h).0) / (2.0 * h);
            let (_, slope) = log_cdf(z);
            assert!(
                (fd - slope).abs() < 1e-5 * (1.0 + fd.abs()),
                "{z}: {fd} {slope}"
            );
        }
        assert!((log_cdf(0.0).0 - 0.5f64.ln()).abs() < 1e-15);
        // Φ(-2) by a table: 0.022750131948179195.
        assert!((log_cdf(-2.0).0 - 0.022_750_131_948_179_195f64.ln()).abs() < 1e-12);
    }

    #[test]
    fn the_kept_gradient_matches_finite_differences_of_the_value() {
        let x: Vec<Vec<f64>> = (0..9)
            .map(|i| {
                let t = f64::from(i) / 8.0;
                vec![t, (5.0 * t).cos().abs(), f64::from(i % 2)]
            })
            .collect();
        let y: Vec<f64> = x
            .iter()
            .map(|r| r[0] - 2.0 * r[1] * r[1] + 0.3 * r[2])
            .collect();
        let feasible: Vec<f64> = x
            .iter()
            .map(|r| if r[1] < 0.6 { 1.0 } else { -1.0 })
            .collect();
        let params = KernelParams {
            inv_sq_lengthscales: vec![3.0, 2.0, 0.5],
            scale: 1.2,
            noise: 1e-3,
        };
        let cat = vec![false, false, true];
        let objective = Model::new(params.clone(), cat.clone(), x.clone(), y, None).unwrap();
        let feasibility = Model::new(params, cat, x, feasible, None).unwrap();
        let acq = Acquisition {
            objective: &objective,
            best: Some(0.4),
            feasibility: Some((&feasibility, 0.0)),
        };
        for p in [[0.3, 0.2, 1.0], [0.77, 0.55, 0.0]] {
            let mut g = [0.0; 3];
            let v = acq.value_grad(&p, &mut g);
            assert_eq!(v, acq.value(&p));
            for j in 0..2 {
                let h = 1e-6;
                let (mut a, mut b) = (p, p);
                a[j] += h;
                b[j] -= h;
                let fd = (acq.value(&a) - acq.value(&b)) / (2.0 * h);
                assert!(
                    (fd - g[j]).abs() < 1e-5 * (1.0 + fd.abs()),
                    "{j}: {fd} {}",
                    g[j]
                );
            }
            assert_eq!(g[2], 0.0);
        }
    }

    #[test]
    fn log_ei_partials_match_finite_differences() {
        for (m, v, best) in [(0.3, 0.2, 0.5), (-2.0, 0.01, 1.0), (1.0, 1.5, 0.0)] {
            let (_, dm, dv) = log_ei(m, v, best);
            let h = 1e-7;
            let fdm = (log_ei(m + h, v, best).0 - log_ei(m - h, v, best).0) / (2.0 * h);
            let fdv = (log_ei(m, v + h, best).0 - log_ei(m, v - h, best).0) / (2.0 * h);
            assert!((fdm - dm).abs() < 1e-5 * (1.0 + fdm.abs()), "{fdm} {dm}");
            assert!((fdv - dv).abs() < 1e-5 * (1.0 + fdv.abs()), "{fdv} {dv}");
            let (_, pm, pv) = log_pi(m, v, best);
            let fdm = (log_pi(m + h, v, best).0 - log_pi(m - h, v, best).0) / (2.0 * h);
            let fdv = (log_pi(m, v + h, best).0 - log_pi(m, v - h, best).0) / (2.0 * h);
            assert!((fdm - pm).abs() < 1e-5 * (1.0 + fdm.abs()), "{fdm} {pm}");
            assert!((fdv - pv).abs() < 1e-5 * (1.0 + fdv.abs()), "{fdv} {pv}");
        }
    }
}
