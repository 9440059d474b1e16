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

/// `m(r²)` of the Matérn-5/2 kernel, from the squared distance `s = r²`.
pub(super) fn matern52(s: f64) -> f64 {
    let r5 = (5.0 * s).sqrt();
    (1.0 + r5 + 5.0 / 3.0 * s) * (-r5).exp()
}

/// `dm/ds` (with respect to the squared distance, finite at 0); the tests'
/// definition of [`matern52_with_ds`]'s second value.
#[cfg(test)]
pub(super) fn matern52_ds(s: f64) -> f64 {
    let r5 = (5.0 * s).sqrt();
    -5.0 / 6.0 * (1.0 + r5) * (-r5).exp()
}

/// [`matern52`] and [`matern52_ds`] at once, the same values for one
/// square root and one exponential instead of two each.
pub(super) fn matern52_with_ds(s: f64) -> (f64, f64) {
    let r5 = (5.0 * s).sqrt();
    let e = (-r5).exp();
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
