//! A fitted Gaussian-process regressor: the posterior mean and variance at a
//! point, with their gradients, and the "believer" copy that stands in for
//! trials still running.

use super::fit;
use super::kernel::{cov_row, cov_row_with_ds, matern52, sq_diff, Against, Columns, KernelParams};
use super::linalg::{dot, Cholesky, LANES};
use super::wide::dispatched;

/// What [`Model::posterior_kept`] computes on its way to the value and
/// [`Model::gradient_kept`] goes on from.
#[derive(Debug, Default)]
pub(super) struct Kept {
    /// `s m'(r²)` for each observation.
    dk_ds: Vec<f64>,
    /// `L⁻¹ k`.
    w: Vec<f64>,
    /// The variance before it is clamped at 0.
    var: f64,
}

/// A GP conditioned on observations `(x, y)` under fixed hyperparameters.
#[derive(Debug, Clone)]
pub(super) struct Model {
    params: KernelParams,
    categorical: Vec<bool>,
    x: Vec<Vec<f64>>,
    /// `x` by coordinate.
    cols: Columns,
    y: Vec<f64>,
    chol: Cholesky,
    /// `K⁻¹ y`.
    alpha: Vec<f64>,
}

impl Model {
    /// The model of `(x, y)`, reusing `prefix` (a factor of the first rows of
    /// `x` under the same `params`) and extending it by the rest; `None` if
    /// the covariance cannot be factored even with jitter.
    pub(super) fn new(
        params: KernelParams,
        categorical: Vec<bool>,
        x: Vec<Vec<f64>>,
        y: Vec<f64>,
        prefix: Option<Cholesky>,
    ) -> Option<Model> {
        let cols = Columns::new(&x, categorical.len());
        let chol = match prefix.filter(|c| c.len() <= x.len()) {
            Some(mut c) => {
                let mut ok = true;
                let mut cov = Vec::with_capacity(x.len());
                for (i, xi) in x.iter().enumerate().skip(c.len()) {
                    let to = Against {
                        params: &params,
                        categorical: &categorical,
                        cols: &cols,
                        upto: i,
                    };
                    cov_row(to, xi, &mut cov);
                    if c.push(&cov, params.scale + params.noise).is_err() {
                        ok = false;
                        break;
                    }
                }
                if ok {
                    c
                } else {
                    fit::factor_columns(&params, &x, &cols, &categorical)?
                }
            }
            None => fit::factor_columns(&params, &x, &cols, &categorical)?,
        };
        let mut alpha = y.clone();
        chol.solve(&mut alpha);
        if alpha.iter().any(|a| !a.is_finite()) {
            return None;
        }
        Some(Model {
            params,
            categorical,
            x,
            cols,
            y,
            chol,
            alpha,
        })
    }

    /// Every observation, as a row of covariances is taken against them.
    fn against(&self) -> Against<'_> {
        Against {
            params: &self.params,
            categorical: &self.categorical,
            cols: &self.cols,
            upto: self.x.len(),
        }
    }

    /// The hyperparameters.
    pub(super) fn params(&self) -> &KernelParams {
        &self.params
    }

    /// The factor of the covariance of the observations.
    pub(super) fn factor(&self) -> &Cholesky {
        &self.chol
    }

    /// Which coordinates are categorical.
    #[cfg(test)]
    pub(super) fn categorical(&self) -> &[bool] {
        &self.categorical
    }

    /// The posterior mean and variance of `f(p)` (variance clamped at 0).
    pub(super) fn posterior(&self, p: &[f64]) -> (f64, f64) {
        let mut k: Vec<f64> = self
            .x
            .iter()
            .map(|xi| self.params.cov(&self.categorical, p, xi))
            .collect();
        let mean = dot(&k, &self.alpha);
        self.chol.solve_lower(&mut k);
        let var = self.params.scale - dot(&k, &k);
        (mean, var.max(0.0))
    }

    /// [`Model::posterior`] at many points, [`LANES`] at a time: the
    /// covariances of a block with each observation are computed lane by
    /// lane (coordinates transposed, so the distances vectorise), then the
    /// block's triangular solve reads the factor once. Each value is the
    /// one [`Model::posterior`] computes, up to the order of the variance's
    /// sums (within 1e-12).
    pub(super) fn posterior_many(&self, points: &[Vec<f64>]) -> Vec<(f64, f64)> {
        posterior_many(self, points)
    }

    #[inline(always)]
    fn posterior_many_kernel(&self, points: &[Vec<f64>]) -> Vec<(f64, f64)> {
        let n = self.x.len();
        let d = self.categorical.len();
        let mut out = Vec::with_capacity(points.len());
        let mut block = vec![0.0; n * LANES];
        // coords[j][k]: coordinate j of lane k.
        let mut coords = vec![[0.0; LANES]; d];
        for chunk in points.chunks(LANES) {
            for (j, c) in coords.iter_mut().enumerate() {
                for (k, v) in c.iter_mut().enumerate() {
                    // Missing lanes repeat the first point; they are dropped.
                    *v = chunk.get(k).unwrap_or(&chunk[0])[j];
                }
            }
            // The block's squared distances, then its covariances in one
            // pass over contiguous memory (the exponential's polynomial is a
            // chain of dependent steps: a long loop lets the compiler
            // interleave independent chunks), then the means.
            for (xi, row) in self.x.iter().zip(block.as_chunks_mut::<LANES>().0) {
                let mut s = [0.0; LANES];
                for (((c, &l), &cat), &xj) in coords
                    .iter()
                    .zip(&self.params.inv_sq_lengthscales)
                    .zip(&self.categorical)
                    .zip(xi)
                {
                    if cat {
                        for k in 0..LANES {
                            s[k] += l * sq_diff(true, c[k], xj);
                        }
                    } else {
                        // `sq_diff`'s numeric case, written out so that the
                        // lane loop has no branch to vectorise around.
                        for k in 0..LANES {
                            s[k] += l * ((c[k] - xj) * (c[k] - xj));
                        }
                    }
                }
                *row = s;
            }
            for v in block.iter_mut() {
                *v = self.params.scale * matern52(*v);
            }
            let mut means = [0.0; LANES];
            for (row, alpha) in block.as_chunks::<LANES>().0.iter().zip(&self.alpha) {
                for k in 0..LANES {
                    means[k] += row[k] * alpha;
                }
            }
            self.chol.solve_lower_lanes(&mut block);
            let mut sq = [0.0; LANES];
            for row in block.chunks_exact(LANES) {
                for (s, v) in sq.iter_mut().zip(row) {
                    *s += v * v;
                }
            }
            for k in 0..chunk.len() {
                out.push((means[k], (self.params.scale - sq[k]).max(0.0)));
            }
        }
        out
    }

    /// The posterior mean and variance at `p` and their gradients with
    /// respect to `p`'s numeric coordinates (categorical ones get 0).
    #[cfg(test)]
    pub(super) fn posterior_grad(
        &self,
        p: &[f64],
        dmean: &mut [f64],
        dvar: &mut [f64],
    ) -> (f64, f64) {
        let mut kept = Kept::default();
        let out = self.posterior_kept(p, &mut kept);
        self.gradient_kept(p, &mut kept, dmean, dvar);
        out
    }

    /// The posterior mean and variance at `p` (the same bits as
    /// [`Model::posterior`]), keeping in `kept` what
    /// [`Model::gradient_kept`] needs.
    pub(super) fn posterior_kept(&self, p: &[f64], kept: &mut Kept) -> (f64, f64) {
        let Kept { dk_ds, w, var } = kept;
        cov_row_with_ds(self.against(), p, w, dk_ds);
        let mean = dot(w, &self.alpha);
        self.chol.solve_lower(w);
        *var = self.params.scale - dot(w, w);
        (mean, var.max(0.0))
    }

    /// The gradients of the posterior mean and variance at `p`, the point of
    /// the last [`Model::posterior_kept`] call, which filled `kept`.
    pub(super) fn gradient_kept(
        &self,
        p: &[f64],
        kept: &mut Kept,
        dmean: &mut [f64],
        dvar: &mut [f64],
    ) {
        let Kept { dk_ds, w, var } = kept;
        // w = K⁻¹ k.
        self.chol.solve_upper(w);
        dmean.fill(0.0);
        dvar.fill(0.0);
        for (i, xi) in self.x.iter().enumerate() {
            let (a, ww, g) = (self.alpha[i], w[i], dk_ds[i]);
            for j in 0..p.len() {
                if self.categorical[j] {
                    continue;
                }
                // ∂k_i/∂p_j = s m'(·) λ_j 2 (p_j - x_ij).
                let dk = g * self.params.inv_sq_lengthscales[j] * 2.0 * (p[j] - xi[j]);
                dmean[j] += a * dk;
                dvar[j] -= 2.0 * ww * dk;
            }
        }
        if *var <= 0.0 {
            dvar.fill(0.0);
        }
    }

    /// This model with `points` added as observations of their own
    /// posterior mean, capped at `cap` (the "Kriging believer", with the
    /// constant liar's lie where the model expects better than the
    /// incumbent): the variance at and near them shrinks to the noise and
    /// no improvement is expected there, so a proposal made while they run
    /// looks elsewhere. Points whose row cannot be factored are left out.
    pub(super) fn believing(&self, points: &[Vec<f64>], cap: f64) -> Model {
        let mut m = self.clone();
        let mut cov = Vec::new();
        for p in points {
            let mean = m.posterior(p).0.min(cap);
            cov_row(m.against(), p, &mut cov);
            if m.chol.push(&cov, m.params.scale + m.params.noise).is_ok() {
                m.x.push(p.clone());
                m.cols.push(p);
                m.y.push(mean);
            }
        }
        let mut alpha = m.y.clone();
        m.chol.solve(&mut alpha);
        m.alpha = alpha;
        m
    }
}

dispatched! {
    fn posterior_many(m: &Model, points: &[Vec<f64>]) -> Vec<(f64, f64)> => Model::posterior_many_kernel
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model() -> Model {
        let x: Vec<Vec<f64>> = (0..10)
            .map(|i| vec![(i as f64 * 0.31) % 1.0, (i % 2) as f64])
            .collect();
        let y: Vec<f64> = x.iter().map(|r| (5.0 * r[0]).cos() + r[1]).collect();
        let p = KernelParams {
            inv_sq_lengthscales: vec![4.0, 0.5],
            scale: 1.3,
            noise: 1e-4,
        };
        Model::new(p, vec![false, true], x, y, None).unwrap()
    }

    #[test]
    fn the_posterior_interpolates_and_its_gradient_matches_finite_differences() {
        let m = model();
        let (mean, var) = m.posterior(&[0.0, 0.0]);
        assert!((mean - 1.0).abs() < 1e-2 && var < 1e-3, "{mean} {var}");
        for p in [[0.37, 1.0], [0.05, 0.0], [0.93, 1.0]] {
            let mut dm = [0.0; 2];
            let mut dv = [0.0; 2];
            let (m0, v0) = m.posterior_grad(&p, &mut dm, &mut dv);
            let (m1, v1) = m.posterior(&p);
            assert!((m0 - m1).abs() < 1e-12 && (v0 - v1).abs() < 1e-12);
            let h = 1e-6;
            let (a, b) = (
                m.posterior(&[p[0] + h, p[1]]),
                m.posterior(&[p[0] - h, p[1]]),
            );
            let (fdm, fdv) = ((a.0 - b.0) / (2.0 * h), (a.1 - b.1) / (2.0 * h));
            assert!(
                (fdm - dm[0]).abs() < 1e-5 * (1.0 + fdm.abs()),
                "{fdm} {}",
                dm[0]
            );
            assert!(
                (fdv - dv[0]).abs() < 1e-5 * (1.0 + fdv.abs()),
                "{fdv} {}",
                dv[0]
            );
            assert_eq!(dm[1], 0.0);
        }
    }

    #[test]
    fn many_points_at_once_agree_with_one_at_a_time() {
        let m = model();
        let pts: Vec<Vec<f64>> = (0..19)
            .map(|i| vec![i as f64 / 19.0, (i % 2) as f64])
            .collect();
        let many = m.posterior_many(&pts);
        for (p, (mean, var)) in pts.iter().zip(&many) {
            let (m1, v1) = m.posterior(p);
            assert!((m1 - mean).abs() < 1e-12 && (v1 - var).abs() < 1e-12);
        }
        // Lane by lane, bit for bit what one point at a time computes with
        // the same sums: `cov` per observation, the mean in row order.
        for (p, (mean, _)) in pts.iter().zip(&many) {
            let mut want = 0.0;
            for (xi, a) in m.x.iter().zip(&m.alpha) {
                want += m.params.cov(&m.categorical, p, xi) * a;
            }
            assert_eq!(want, *mean);
        }
    }

    #[test]
    fn a_believed_point_keeps_the_mean_and_loses_its_variance() {
        let m = model();
        let p = vec![0.5, 1.0];
        let (mean, var) = m.posterior(&p);
        let b = m.believing(std::slice::from_ref(&p), f64::INFINITY);
        let (mean2, var2) = b.posterior(&p);
        assert!((mean - mean2).abs() < 1e-9);
        assert!(var > 1e-3 && var2 < 1e-3, "{var} -> {var2}");
    }

    #[test]
    fn a_prefix_factor_is_extended_to_the_same_model() {
        let m = model();
        let x: Vec<Vec<f64>> = m.x.clone();
        let prefix = fit::factor(m.params(), &x[..6], m.categorical()).unwrap();
        let grown = Model::new(
            m.params().clone(),
            m.categorical().to_vec(),
            x,
            m.y.clone(),
            Some(prefix),
        )
        .unwrap();
        assert_eq!(grown.factor(), m.factor());
        assert_eq!(grown.alpha, m.alpha);
    }
}
