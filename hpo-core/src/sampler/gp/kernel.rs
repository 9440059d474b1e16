//! The Matérn-5/2 kernel with a lengthscale per parameter (automatic
//! relevance determination), as Optuna's `GPRegressor`:
//!
//! `k(x, x') = s · m(Σ_j λ_j d_j(x, x'))`, `m(r²) = (1 + √5 r + 5r²/3) e^{-√5 r}`,
//!
//! with `λ_j` the inverse squared lengthscale of parameter `j`, `s` the
//! kernel scale and `d_j` the squared difference of numeric coordinates or,
//! for a categorical parameter, the Hamming distance `[x_j ≠ x'_j]`.
//!
//! Why Hamming for categoricals: a categorical's choices have no order, so
//! any distance built on their indices would invent one; one-hot coordinates
//! would add a dimension per choice and, with one lengthscale per dimension,
//! parameters the data cannot pin down. The Hamming distance inside the same
//! Matérn form keeps one lengthscale per categorical ("how much does changing
//! this choice change the loss"), is exactly Optuna's choice (so the fitted
//! hyperparameters can be checked against Optuna's), and costs nothing extra.

use super::exp::exp;
use super::wide::dispatched;

/// `m(r²)` of the Matérn-5/2 kernel, from the squared distance `s = r²`.
#[inline(always)]
pub(super) fn matern52(s: f64) -> f64 {
    let r5 = (5.0 * s).sqrt();
    (1.0 + r5 + 5.0 / 3.0 * s) * exp(-r5)
}

/// `dm/ds` (with respect to the squared distance, finite at 0); the tests'
/// definition of [`matern52_with_ds`]'s second value.
#[cfg(test)]
pub(super) fn matern52_ds(s: f64) -> f64 {
    let r5 = (5.0 * s).sqrt();
    -5.0 / 6.0 * (1.0 + r5) * exp(-r5)
}

/// [`matern52`] and [`matern52_ds`] at once, the same values for one
/// square root and one exponential instead of two each.
#[inline(always)]
pub(super) fn matern52_with_ds(s: f64) -> (f64, f64) {
    let r5 = (5.0 * s).sqrt();
    let e = exp(-r5);
    ((1.0 + r5 + 5.0 / 3.0 * s) * e, -5.0 / 6.0 * (1.0 + r5) * e)
}

/// The kernel's hyperparameters.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct KernelParams {
    /// Inverse squared lengthscales `λ_j`, one per parameter.
    pub(super) inv_sq_lengthscales: Vec<f64>,
    /// The kernel scale `s` (prior variance of the function).
    pub(super) scale: f64,
    /// The observation noise variance (on standardised values).
    pub(super) noise: f64,
}

impl KernelParams {
    /// Optuna's starting point: every hyperparameter 1.
    pub(super) fn initial(d: usize) -> KernelParams {
        KernelParams {
            inv_sq_lengthscales: vec![1.0; d],
            scale: 1.0,
            noise: 1.0,
        }
    }

    /// The weighted squared distance `Σ_j λ_j d_j(a, b)`.
    pub(super) fn sq_dist(&self, categorical: &[bool], a: &[f64], b: &[f64]) -> f64 {
        let mut s = 0.0;
        for (((&l, &c), x), y) in self
            .inv_sq_lengthscales
            .iter()
            .zip(categorical)
            .zip(a)
            .zip(b)
        {
            s += l * sq_diff(c, *x, *y);
        }
        s
    }

    /// `k(a, b)`, without noise.
    pub(super) fn cov(&self, categorical: &[bool], a: &[f64], b: &[f64]) -> f64 {
        self.scale * matern52(self.sq_dist(categorical, a, b))
    }

    /// Every hyperparameter positive and finite.
    pub(super) fn is_valid(&self) -> bool {
        let ok = |v: f64| v > 0.0 && v.is_finite();
        self.inv_sq_lengthscales.iter().all(|&l| ok(l)) && ok(self.scale) && ok(self.noise)
    }
}

/// Points stored by coordinate (`cols[j][i]` is coordinate `j` of point
/// `i`), so that the covariances of one point with many run along
/// contiguous memory and vectorise.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Columns {
    n: usize,
    cols: Vec<Vec<f64>>,
}

impl Columns {
    /// The columns of `x` (rows of `d` coordinates).
    pub(super) fn new(x: &[Vec<f64>], d: usize) -> Columns {
        let mut c = Columns {
            n: 0,
            cols: vec![Vec::with_capacity(x.len()); d],
        };
        for p in x {
            c.push(p);
        }
        c
    }

    /// Appends a point.
    pub(super) fn push(&mut self, p: &[f64]) {
        for (col, v) in self.cols.iter_mut().zip(p) {
            col.push(*v);
        }
        self.n += 1;
    }

    /// The number of points.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.n
    }
}

/// What a row of covariances is taken against: the first `upto` points of
/// `cols`, under `params`, with `categorical` marking the Hamming
/// coordinates.
#[derive(Debug, Clone, Copy)]
pub(super) struct Against<'a> {
    pub(super) params: &'a KernelParams,
    pub(super) categorical: &'a [bool],
    pub(super) cols: &'a Columns,
    pub(super) upto: usize,
}

dispatched! {
    /// `k(p, x_i)` for each point `x_i` of `to`, written to `k`; each the
    /// same bits as [`KernelParams::cov`].
    pub(super) fn cov_row(to: Against<'_>, p: &[f64], k: &mut Vec<f64>) => cov_row_kernel
}

dispatched! {
    /// [`cov_row`] and, in `dk_ds`, `s m'(r²)` for each point (the slope
    /// with respect to the squared distance, as [`matern52_with_ds`]).
    pub(super) fn cov_row_with_ds(
        to: Against<'_>,
        p: &[f64],
        k: &mut Vec<f64>,
        dk_ds: &mut Vec<f64>,
    ) => cov_row_with_ds_kernel
}

/// `Σ_j λ_j d_j(p, x_i)` for each point of `to` into `s`, each summed over
/// `j` in order from 0, as [`KernelParams::sq_dist`].
#[inline(always)]
fn sq_dists(to: Against<'_>, p: &[f64], s: &mut Vec<f64>) {
    s.clear();
    s.resize(to.upto, 0.0);
    for (((col, &l), &cat), &pj) in to
        .cols
        .cols
        .iter()
        .zip(&to.params.inv_sq_lengthscales)
        .zip(to.categorical)
        .zip(p)
    {
        let col = &col[..to.upto];
        if cat {
            for (si, &x) in s.iter_mut().zip(col) {
                *si += l * if pj == x { 0.0 } else { 1.0 };
            }
        } else {
            // `sq_diff`'s numeric case, written out so that the loop has no
            // branch to vectorise around.
            for (si, &x) in s.iter_mut().zip(col) {
                *si += l * ((pj - x) * (pj - x));
            }
        }
    }
}

#[inline(always)]
fn cov_row_kernel(to: Against<'_>, p: &[f64], k: &mut Vec<f64>) {
    sq_dists(to, p, k);
    for v in k.iter_mut() {
        *v = to.params.scale * matern52(*v);
    }
}

#[inline(always)]
fn cov_row_with_ds_kernel(to: Against<'_>, p: &[f64], k: &mut Vec<f64>, dk_ds: &mut Vec<f64>) {
    sq_dists(to, p, k);
    dk_ds.clear();
    dk_ds.resize(k.len(), 0.0);
    for (v, ds) in k.iter_mut().zip(dk_ds.iter_mut()) {
        let (m, m_ds) = matern52_with_ds(*v);
        *v = to.params.scale * m;
        *ds = to.params.scale * m_ds;
    }
}

/// `d_j`: the squared difference, or the Hamming distance for a categorical.
pub(super) fn sq_diff(categorical: bool, x: f64, y: f64) -> f64 {
    if categorical {
        if x == y {
            0.0
        } else {
            1.0
        }
    } else {
        (x - y) * (x - y)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matern_values_and_slope() {
        assert_eq!(matern52(0.0), 1.0);
        // m(1) = (1 + √5 + 5/3) e^{-√5}.
        let r5 = 5f64.sqrt();
        assert!((matern52(1.0) - (1.0 + r5 + 5.0 / 3.0) * (-r5).exp()).abs() < 1e-15);
        assert_eq!(matern52_ds(0.0), -5.0 / 6.0);
        for s in [1e-6f64, 0.01, 0.3, 1.0, 4.0, 30.0] {
            assert_eq!(matern52_with_ds(s), (matern52(s), matern52_ds(s)));
            let h = 1e-6 * s.max(1e-3);
            let fd = (matern52(s + h) - matern52(s - h)) / (2.0 * h);
            assert!(
                (fd - matern52_ds(s)).abs() < 1e-6 * (1.0 + fd.abs()),
                "{s}: {fd} vs {}",
                matern52_ds(s)
            );
        }
    }

    #[test]
    fn rows_of_covariances_are_each_pairs_bit_for_bit() {
        let p = KernelParams {
            inv_sq_lengthscales: vec![2.0, 3.0, 0.7],
            scale: 1.5,
            noise: 1e-3,
        };
        let cat = [false, true, false];
        let x: Vec<Vec<f64>> = (0..37)
            .map(|i| {
                let t = f64::from(i) / 37.0;
                vec![t, f64::from(i % 3), (7.0 * t).sin().abs()]
            })
            .collect();
        let cols = Columns::new(&x, 3);
        assert_eq!(cols.len(), 37);
        let q = [0.41, 1.0, 0.2];
        let (mut k, mut k2, mut ds) = (Vec::new(), Vec::new(), Vec::new());
        let to = |upto| Against {
            params: &p,
            categorical: &cat,
            cols: &cols,
            upto,
        };
        for upto in [0, 1, 9, 37] {
            cov_row(to(upto), &q, &mut k);
            let want: Vec<f64> = x[..upto].iter().map(|xi| p.cov(&cat, &q, xi)).collect();
            assert_eq!(k, want);
        }
        cov_row_with_ds(to(37), &q, &mut k2, &mut ds);
        assert_eq!(k2, k);
        for (xi, d) in x.iter().zip(&ds) {
            assert_eq!(*d, p.scale * matern52_with_ds(p.sq_dist(&cat, &q, xi)).1);
        }
    }

    #[test]
    fn categoricals_count_a_mismatch_as_one() {
        let p = KernelParams {
            inv_sq_lengthscales: vec![2.0, 3.0],
            scale: 1.5,
            noise: 1e-3,
        };
        let cat = [false, true];
        assert!((p.sq_dist(&cat, &[0.1, 0.0], &[0.4, 2.0]) - (2.0 * 0.09 + 3.0)).abs() < 1e-12);
        assert_eq!(p.sq_dist(&cat, &[0.1, 1.0], &[0.1, 1.0]), 0.0);
        assert_eq!(p.cov(&cat, &[0.1, 1.0], &[0.1, 1.0]), 1.5);
    }
}
