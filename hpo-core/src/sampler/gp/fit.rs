//! Fitting the kernel's hyperparameters: the maximum a posteriori estimate
//! under Optuna's priors, by L-BFGS on log-transformed parameters.
//!
//! The loss is `-log p(y | X, θ) - log p(θ)`:
//!
//! * the marginal likelihood of the standardised values, up to a constant,
//!   `½ yᵀK⁻¹y + ½ log det K` with `K = s·M + σ²I`;
//! * Optuna's priors (`optuna/_gp/prior.py`): `-(0.1/λ + 0.1 λ)` on each
//!   inverse squared lengthscale, Gamma(2, 1) on the kernel scale and
//!   Gamma(1.1, 30) on the noise variance; the noise is kept above a minimum
//!   (1e-6) by writing it `σ² = e^r + min`.
//!
//! The raw variables are `[ln λ_1..ln λ_d, ln s, r]`, exactly Optuna's, so
//! the loss and its gradient can be checked against Optuna's own at the same
//! point (`tests/it/gp.rs`). The gradient is analytic:
//! `∂/∂θ = ½ tr((K⁻¹ - ααᵀ) ∂K/∂θ) - ∂ log p(θ)/∂θ`, `α = K⁻¹y`.

use super::kernel::{cov_row, cov_row_with_ds, sq_diff, Against, Columns, KernelParams};
use super::lbfgs;
use super::linalg::Cholesky;

/// Optuna's `DEFAULT_MINIMUM_NOISE_VAR`.
pub(super) const MIN_NOISE: f64 = 1e-6;
/// Optuna's `gtol` for the hyperparameter fit.
const GTOL: f64 = 1e-2;
/// Iterations of one fit at most.
const MAX_ITER: usize = 300;

/// Points (unit-cube coordinates) and their standardised values.
#[derive(Debug, Clone, Copy)]
pub(super) struct Data<'a> {
    /// One row per observation.
    pub(super) x: &'a [Vec<f64>],
    /// Standardised values, larger is better.
    pub(super) y: &'a [f64],
    /// Which coordinates are categorical.
    pub(super) categorical: &'a [bool],
    /// Whether the noise is pinned at its minimum (a deterministic objective).
    pub(super) deterministic: bool,
}

/// The raw variables of `p` (Optuna's, with its `0.99 · min` offset on the noise).
pub(super) fn to_raw(p: &KernelParams) -> Vec<f64> {
    let mut raw: Vec<f64> = p.inv_sq_lengthscales.iter().map(|l| l.ln()).collect();
    raw.push(p.scale.ln());
    raw.push((p.noise - 0.99 * MIN_NOISE).max(f64::MIN_POSITIVE).ln());
    raw
}

/// The hyperparameters at raw variables `raw`.
pub(super) fn from_raw(raw: &[f64], deterministic: bool) -> KernelParams {
    let d = raw.len() - 2;
    KernelParams {
        inv_sq_lengthscales: raw[..d].iter().map(|r| r.exp()).collect(),
        scale: raw[d].exp(),
        noise: if deterministic {
            MIN_NOISE
        } else {
            raw[d + 1].exp() + MIN_NOISE
        },
    }
}

/// `log p(θ)` up to a constant (Optuna's `default_log_prior`).
pub(super) fn log_prior(p: &KernelParams) -> f64 {
    let gamma = |x: f64, k: f64, rate: f64| (k - 1.0) * x.ln() - rate * x;
    -p.inv_sq_lengthscales
        .iter()
        .map(|l| 0.1 / l + 0.1 * l)
        .sum::<f64>()
        + gamma(p.scale, 2.0, 1.0)
        + gamma(p.noise, 1.1, 30.0)
}

/// The factor of `K = s·M + σ²I` over `x`.
#[cfg(test)]
pub(super) fn factor(p: &KernelParams, x: &[Vec<f64>], categorical: &[bool]) -> Option<Cholesky> {
    factor_columns(p, x, &Columns::new(x, categorical.len()), categorical)
}

/// The factor of `K = s·M + σ²I` over `x`, with `x` by coordinate at hand.
pub(super) fn factor_columns(
    p: &KernelParams,
    x: &[Vec<f64>],
    cols: &Columns,
    categorical: &[bool],
) -> Option<Cholesky> {
    Cholesky::factor_rows(
        x.len(),
        |_| p.scale + p.noise,
        |i, row| {
            let to = Against {
                params: p,
                categorical,
                cols,
                upto: i,
            };
            cov_row(to, &x[i], row);
        },
    )
}

/// The loss at raw variables `raw`, its gradient written to `grad`; infinite
/// where `K` cannot be factored.
#[cfg(test)]
pub(super) fn loss(data: Data<'_>, raw: &[f64], grad: &mut [f64]) -> f64 {
    use lbfgs::Objective;
    let mut l = Loss::new(data);
    let value = l.value(raw);
    if value.is_finite() {
        l.gradient(grad);
    } else {
        grad.fill(f64::NAN);
    }
    value
}

/// The loss as [`lbfgs::Objective`]: the value factors `K` and solves for
/// `α`; the gradient, which needs `K⁻¹` (twice the factor's work), reuses
/// them at the points the line search accepts.
struct Loss<'a> {
    data: Data<'a>,
    /// `data.x` by coordinate.
    cols: Columns,
    /// The raw variables, hyperparameters, factor and `α` of the last
    /// finite value.
    at: Option<(Vec<f64>, KernelParams, Cholesky, Vec<f64>)>,
}

impl<'a> Loss<'a> {
    fn new(data: Data<'a>) -> Loss<'a> {
        Loss {
            data,
            cols: Columns::new(data.x, data.categorical.len()),
            at: None,
        }
    }
}

impl lbfgs::Objective for Loss<'_> {
    fn value(&mut self, raw: &[f64]) -> f64 {
        self.at = None;
        let data = self.data;
        let p = from_raw(raw, data.deterministic);
        if !p.is_valid() {
            return f64::INFINITY;
        }
        let Some(chol) = factor_columns(&p, data.x, &self.cols, data.categorical) else {
            return f64::INFINITY;
        };
        let mut alpha = data.y.to_vec();
        chol.solve(&mut alpha);
        let quad = super::linalg::dot(&alpha, data.y);
        let value = 0.5 * quad + chol.half_log_det() - log_prior(&p);
        self.at = Some((raw.to_vec(), p, chol, alpha));
        value
    }

    fn gradient(&mut self, grad: &mut [f64]) {
        let Some((raw, p, chol, alpha)) = &self.at else {
            grad.fill(f64::NAN);
            return;
        };
        let data = self.data;
        let d = raw.len() - 2;
        let n = data.x.len();
        // W = K⁻¹ - ααᵀ; ∂loss/∂θ = ½ Σ_ab W_ab ∂K_ab/∂θ.
        let kinv = chol.inverse();
        grad.fill(0.0);
        let mut diag_w = 0.0;
        let mut diffs = vec![0.0; d];
        // Row a's covariances and slopes with every b < a, vectorised.
        let (mut k, mut k_ds) = (Vec::with_capacity(n), Vec::with_capacity(n));
        for a in 0..n {
            let waa = kinv[a * n + a] - alpha[a] * alpha[a];
            diag_w += waa;
            let xa = &data.x[a];
            let to = Against {
                params: p,
                categorical: data.categorical,
                cols: &self.cols,
                upto: a,
            };
            cov_row_with_ds(to, xa, &mut k, &mut k_ds);
            for b in 0..a {
                let w = kinv[a * n + b] - alpha[a] * alpha[b];
                // Both (a, b) and (b, a): ½ · 2 = 1.
                let xb = &data.x[b];
                for (j, dj) in diffs.iter_mut().enumerate() {
                    *dj = sq_diff(data.categorical[j], xa[j], xb[j]);
                }
                let kab = k[b];
                let dm = w * k_ds[b];
                for ((g, dj), l) in grad.iter_mut().zip(&diffs).zip(&p.inv_sq_lengthscales) {
                    if *dj != 0.0 {
                        *g += dm * l * dj;
                    }
                }
                grad[d] += w * kab;
            }
        }
        grad[d] += 0.5 * diag_w * p.scale;
        if !data.deterministic {
            grad[d + 1] += 0.5 * diag_w * raw[d + 1].exp();
        }
        // Minus the prior's gradient.
        for (g, l) in grad.iter_mut().zip(&p.inv_sq_lengthscales) {
            *g -= 0.1 / l - 0.1 * l;
        }
        grad[d] -= 1.0 - p.scale;
        if !data.deterministic {
            grad[d + 1] -= (0.1 / p.noise - 30.0) * raw[d + 1].exp();
        }
    }
}

/// The fitted hyperparameters and their raw variables, starting from
/// `start` (the last fit's raw variables, or those of
/// [`KernelParams::initial`]); from Optuna's starting point again if that
/// fails, and that starting point itself if both do.
pub(super) fn fit(data: Data<'_>, start: &[f64]) -> (KernelParams, Vec<f64>) {
    let d = data.categorical.len();
    let initial = to_raw(&KernelParams::initial(d));
    let starts = if start == initial.as_slice() || start.len() != d + 2 {
        vec![initial.clone()]
    } else {
        vec![start.to_vec(), initial.clone()]
    };
    for s in starts {
        let m = lbfgs::minimize(&mut Loss::new(data), &s, None, GTOL, MAX_ITER);
        if m.f.is_finite() {
            let p = from_raw(&m.x, data.deterministic);
            if p.is_valid() {
                return (p, m.x);
            }
        }
    }
    tracing::warn!("the GP's kernel could not be fitted; using the default hyperparameters");
    (from_raw(&initial, data.deterministic), initial)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_points() -> (Vec<Vec<f64>>, Vec<f64>) {
        let x: Vec<Vec<f64>> = (0..12)
            .map(|i| {
                let t = i as f64 / 11.0;
                vec![t, (3.0 * t).sin().abs(), (i % 3) as f64]
            })
            .collect();
        let mut y: Vec<f64> = x
            .iter()
            .map(|r| -(r[0] - 0.3).powi(2) - 0.5 * r[1] + 0.2 * r[2])
            .collect();
        let m = y.iter().sum::<f64>() / y.len() as f64;
        let sd = (y.iter().map(|v| (v - m).powi(2)).sum::<f64>() / y.len() as f64).sqrt();
        for v in &mut y {
            *v = (*v - m) / sd;
        }
        (x, y)
    }

    #[test]
    fn the_gradient_matches_finite_differences() {
        let (x, y) = data_points();
        let cat = [false, false, true];
        for deterministic in [false, true] {
            let data = Data {
                x: &x,
                y: &y,
                categorical: &cat,
                deterministic,
            };
            let raw = [0.3, -0.7, 0.1, 0.2, -2.0];
            let mut g = vec![0.0; raw.len()];
            loss(data, &raw, &mut g);
            for k in 0..raw.len() {
                let h = 1e-6;
                let (mut a, mut b) = (raw, raw);
                a[k] += h;
                b[k] -= h;
                let mut tmp = vec![0.0; raw.len()];
                let fd = (loss(data, &a, &mut tmp) - loss(data, &b, &mut tmp)) / (2.0 * h);
                assert!(
                    (fd - g[k]).abs() < 1e-5 * (1.0 + fd.abs()),
                    "deterministic={deterministic} raw[{k}]: {fd} vs {}",
                    g[k]
                );
            }
        }
    }

    #[test]
    fn fitting_lowers_the_loss_and_finds_the_irrelevant_parameter() {
        // y depends on x0 only: x1's lengthscale grows (λ shrinks).
        let x: Vec<Vec<f64>> = (0..25)
            .map(|i| vec![(i as f64 * 0.37) % 1.0, (i as f64 * 0.61) % 1.0])
            .collect();
        let y: Vec<f64> = x.iter().map(|r| (6.0 * r[0]).sin()).collect();
        let cat = [false, false];
        let data = Data {
            x: &x,
            y: &y,
            categorical: &cat,
            deterministic: false,
        };
        let (p, raw) = fit(data, &to_raw(&KernelParams::initial(2)));
        assert_eq!(p, from_raw(&raw, false));
        let mut g = vec![0.0; 4];
        let before = loss(data, &to_raw(&KernelParams::initial(2)), &mut g);
        let after = loss(data, &raw, &mut g);
        assert!(after < before, "{after} !< {before}");
        assert!(
            p.inv_sq_lengthscales[0] > 10.0 * p.inv_sq_lengthscales[1],
            "{p:?}"
        );
    }

    /// Optuna 5.0's own numbers on fixed histories (`bench/gp_fixture.py`):
    /// the loss and its gradient at Optuna's starting point, the fitted
    /// hyperparameters, and the posterior and log EI under them.
    #[test]
    fn matches_optunas_gp_on_its_fixture() {
        use crate::sampler::gp::acquisition::log_ei;
        use crate::sampler::gp::model::Model;
        let fixture: serde_json::Value =
            serde_json::from_str(include_str!("../../../tests/data/gp_optuna_fit.json")).unwrap();
        let rows = |v: &serde_json::Value| -> Vec<Vec<f64>> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    r.as_array()
                        .unwrap()
                        .iter()
                        .map(|x| x.as_f64().unwrap())
                        .collect()
                })
                .collect()
        };
        let nums = |v: &serde_json::Value| -> Vec<f64> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap())
                .collect()
        };
        let cases = fixture["cases"].as_array().unwrap();
        assert!(cases.len() >= 4);
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let x = rows(&case["x"]);
            let y = nums(&case["y"]);
            let cat: Vec<bool> = case["is_categorical"]
                .as_array()
                .unwrap()
                .iter()
                .map(|b| b.as_bool().unwrap())
                .collect();
            let data = Data {
                x: &x,
                y: &y,
                categorical: &cat,
                deterministic: false,
            };
            // The loss and gradient at Optuna's starting point.
            let raw0 = nums(&case["initial"]["raw_params"]);
            let start = to_raw(&KernelParams::initial(cat.len()));
            assert_eq!(
                start,
                nums(&case["initial_optimizer_start"]["raw_params"]),
                "{name}"
            );
            let mut g = vec![0.0; raw0.len()];
            let l0 = loss(data, &raw0, &mut g);
            let want = case["initial"]["loss"].as_f64().unwrap();
            assert!(
                (l0 - want).abs() < 1e-9 * want.abs().max(1.0),
                "{name}: {l0} vs {want}"
            );
            for (a, b) in g.iter().zip(nums(&case["initial"]["grad"])) {
                assert!(
                    (a - b).abs() < 1e-8 * b.abs().max(1.0),
                    "{name}: grad {a} vs {b}"
                );
            }
            // The fit: as low a loss as Optuna's, at nearly the same point.
            let (_, raw) = fit(data, &start);
            let theirs = nums(&case["fitted"]["raw_params"]);
            let their_loss = case["fitted"]["loss"].as_f64().unwrap();
            let ours = loss(data, &raw, &mut g);
            assert!(
                ours <= their_loss + 1e-3,
                "{name}: loss {ours} vs Optuna's {their_loss}"
            );
            if !name.starts_with("e_") {
                // (e: a constant objective, whose scale and noise are only
                // bounded by the priors; the loss is what is compared there.)
                for (a, b) in raw.iter().zip(&theirs) {
                    assert!(
                        (a - b).abs() < 0.15,
                        "{name}: raw {raw:?} vs Optuna's {theirs:?}"
                    );
                }
            }
            // The posterior and log EI under Optuna's fitted kernel.
            let p = from_raw(&theirs, false);
            let model = Model::new(p, cat.clone(), x.clone(), y.clone(), None).unwrap();
            let points = &case["points"];
            let threshold = points["threshold"].as_f64().unwrap();
            for (i, pt) in rows(&points["x"]).iter().enumerate() {
                let (m, v) = model.posterior(pt);
                let (wm, wv) = (
                    points["mean"][i].as_f64().unwrap(),
                    points["var"][i].as_f64().unwrap(),
                );
                assert!(
                    (m - wm).abs() < 1e-7 * wm.abs().max(1.0),
                    "{name}: mean {m} vs {wm}"
                );
                assert!(
                    (v - wv).abs() < 1e-7 * wv.abs().max(1e-3),
                    "{name}: var {v} vs {wv}"
                );
                let le = log_ei(m, v, threshold).0;
                let want = points["log_ei"][i].as_f64().unwrap();
                assert!(
                    (le - want).abs() < 1e-6 * want.abs().max(1.0),
                    "{name}: log EI {le} vs {want}"
                );
            }
        }
    }

    #[test]
    fn duplicate_points_and_constant_values_do_not_break_the_fit() {
        let x = vec![vec![0.5, 0.5]; 6];
        let y = vec![0.0; 6];
        let cat = [false, false];
        let (p, _) = fit(
            Data {
                x: &x,
                y: &y,
                categorical: &cat,
                deterministic: true,
            },
            &to_raw(&KernelParams::initial(2)),
        );
        assert!(p.is_valid(), "{p:?}");
    }
}
