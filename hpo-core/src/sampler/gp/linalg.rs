//! The Cholesky factor of a covariance matrix, grown one row at a time.
//!
//! The factor is computed row by row (Cholesky–Banachiewicz): row `i` needs
//! only the rows above it, so appending a point to a fitted model costs
//! `O(n²)` instead of refactoring in `O(n³)`, *and* the appended rows are bit
//! for bit the rows a factorisation from scratch computes. That is what lets
//! the sampler keep a factor between trials and still propose exactly what a
//! fresh process reading the same history proposes.
//!
//! A pivot that is not positive (a covariance matrix made indefinite by
//! rounding, two identical points with almost no noise) is never a panic:
//! [`Cholesky::factor`] starts again with jitter added to the diagonal, ten
//! times more each time, and gives up with `None` past a bound.

/// Smallest jitter tried after a failed pivot, relative to the mean diagonal.
const FIRST_JITTER: f64 = 1e-10;
/// Largest jitter tried, relative to the mean diagonal.
const LAST_JITTER: f64 = 1e-2;

/// The lower-triangular factor `L` of `A = L Lᵀ`, packed by rows.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Cholesky {
    n: usize,
    /// Row `i` holds `L[i][0..=i]` at `i (i + 1) / 2`.
    packed: Vec<f64>,
    /// Added to every diagonal entry (0 unless a pivot failed).
    jitter: f64,
}

/// A pivot that was not positive.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct NotPositive;

impl Cholesky {
    /// The factor of the `n x n` matrix whose lower triangle is `entry(i, j)`
    /// (`j <= i`), with the least jitter that makes it positive definite, or
    /// `None` if even [`LAST_JITTER`] times the mean diagonal does not.
    pub(super) fn factor(n: usize, entry: impl Fn(usize, usize) -> f64) -> Option<Cholesky> {
        let scale = if n == 0 {
            1.0
        } else {
            ((0..n).map(|i| entry(i, i).abs()).sum::<f64>() / n as f64).max(f64::MIN_POSITIVE)
        };
        let mut jitter = 0.0;
        loop {
            let mut chol = Cholesky {
                n: 0,
                packed: Vec::with_capacity(n * (n + 1) / 2),
                jitter,
            };
            let mut row = Vec::with_capacity(n);
            let ok = (0..n).all(|i| {
                row.clear();
                row.extend((0..i).map(|j| entry(i, j)));
                chol.push(&row, entry(i, i)).is_ok()
            });
            if ok {
                return Some(chol);
            }
            jitter = if jitter == 0.0 {
                FIRST_JITTER * scale
            } else {
                jitter * 10.0
            };
            if jitter > LAST_JITTER * scale * (1.0 + 1e-9) {
                return None;
            }
        }
    }

    /// The order of the factored matrix.
    pub(super) fn len(&self) -> usize {
        self.n
    }

    /// The jitter added to the diagonal.
    #[cfg(test)]
    pub(super) fn jitter(&self) -> f64 {
        self.jitter
    }

    /// Row `i` of `L` (its `i + 1` entries up to the diagonal).
    pub(super) fn row(&self, i: usize) -> &[f64] {
        &self.packed[i * (i + 1) / 2..(i + 1) * (i + 2) / 2]
    }

    /// Appends the row of a new point: `cov` its covariances with the points
    /// already factored, `var` its variance (noise included). On a pivot
    /// that is not positive the factor is left as it was.
    pub(super) fn push(&mut self, cov: &[f64], var: f64) -> Result<(), NotPositive> {
        debug_assert_eq!(cov.len(), self.n);
        let start = self.packed.len();
        for (j, &c) in cov.iter().enumerate() {
            let lj = self.row(j);
            let new = &self.packed[start..];
            let dot: f64 = new.iter().zip(&lj[..j]).map(|(a, b)| a * b).sum();
            let v = (c - dot) / lj[j];
            self.packed.push(v);
        }
        let new = &self.packed[start..];
        let d = var + self.jitter - new.iter().map(|a| a * a).sum::<f64>();
        if !(d > 0.0 && d.is_finite()) {
            self.packed.truncate(start);
            return Err(NotPositive);
        }
        self.packed.push(d.sqrt());
        self.n += 1;
        Ok(())
    }

    /// Solves `L x = b` in place.
    pub(super) fn solve_lower(&self, b: &mut [f64]) {
        for i in 0..self.n {
            let r = self.row(i);
            let dot: f64 = r[..i].iter().zip(&b[..i]).map(|(a, x)| a * x).sum();
            b[i] = (b[i] - dot) / r[i];
        }
    }

    /// Solves `Lᵀ x = b` in place.
    pub(super) fn solve_upper(&self, b: &mut [f64]) {
        for i in (0..self.n).rev() {
            b[i] /= self.row(i)[i];
            let xi = b[i];
            for (bj, lij) in b[..i].iter_mut().zip(&self.row(i)[..i]) {
                *bj -= lij * xi;
            }
        }
    }

    /// Solves `A x = b` in place.
    pub(super) fn solve(&self, b: &mut [f64]) {
        self.solve_lower(b);
        self.solve_upper(b);
    }

    /// `log det(A) / 2`, the sum of the logs of `L`'s diagonal.
    pub(super) fn half_log_det(&self) -> f64 {
        (0..self.n).map(|i| self.row(i)[i].ln()).sum()
    }

    /// `A⁻¹`, dense and row-major: `L⁻¹` by forward substitution, then
    /// `L⁻ᵀ L⁻¹`.
    pub(super) fn inverse(&self) -> Vec<f64> {
        let n = self.n;
        // inv[i][j] = (L⁻¹)[i][j], lower triangular, row-major n x n.
        let mut inv = vec![0.0; n * n];
        for j in 0..n {
            inv[j * n + j] = 1.0 / self.row(j)[j];
            for i in j + 1..n {
                let r = self.row(i);
                let mut s = 0.0;
                for (k, rk) in r.iter().enumerate().take(i).skip(j) {
                    s += rk * inv[k * n + j];
                }
                inv[i * n + j] = -s / r[i];
            }
        }
        // A⁻¹[a][b] = Σ_k≥max(a,b) L⁻¹[k][a] L⁻¹[k][b].
        let mut out = vec![0.0; n * n];
        for k in 0..n {
            let lk = &inv[k * n..k * n + k + 1];
            for a in 0..=k {
                let la = lk[a];
                if la == 0.0 {
                    continue;
                }
                let row = &mut out[a * n..a * n + a + 1];
                for (o, lb) in row.iter_mut().zip(lk) {
                    *o += la * lb;
                }
            }
        }
        for a in 0..n {
            for b in 0..a {
                out[b * n + a] = out[a * n + b];
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spd(n: usize) -> Vec<f64> {
        // A = B Bᵀ + n I for a fixed B.
        let b: Vec<f64> = (0..n * n)
            .map(|k| ((k * 7919 % 13) as f64 - 6.0) / 5.0)
            .collect();
        let mut a = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..n {
                a[i * n + j] = (0..n).map(|k| b[i * n + k] * b[j * n + k]).sum::<f64>()
                    + if i == j { n as f64 } else { 0.0 };
            }
        }
        a
    }

    #[test]
    fn factor_reconstructs_solves_and_inverts() {
        let n = 7;
        let a = spd(n);
        let c = Cholesky::factor(n, |i, j| a[i * n + j]).unwrap();
        assert_eq!(c.jitter(), 0.0);
        for i in 0..n {
            for j in 0..=i {
                let s: f64 = (0..=j).map(|k| c.row(i)[k] * c.row(j)[k]).sum();
                assert!((s - a[i * n + j]).abs() < 1e-10, "({i},{j})");
            }
        }
        let x: Vec<f64> = (0..n).map(|i| i as f64 - 2.5).collect();
        let mut b: Vec<f64> = (0..n)
            .map(|i| (0..n).map(|j| a[i * n + j] * x[j]).sum())
            .collect();
        c.solve(&mut b);
        for (u, v) in b.iter().zip(&x) {
            assert!((u - v).abs() < 1e-10);
        }
        let inv = c.inverse();
        for i in 0..n {
            for j in 0..n {
                let s: f64 = (0..n).map(|k| a[i * n + k] * inv[k * n + j]).sum();
                let want = if i == j { 1.0 } else { 0.0 };
                assert!((s - want).abs() < 1e-10, "({i},{j}) {s}");
            }
        }
        // log det by the product of the pivots against a 2x2 by hand.
        let c2 = Cholesky::factor(2, |i, j| [[4.0, 0.0], [2.0, 5.0]][i][j]).unwrap();
        assert!((c2.half_log_det() - 0.5 * (4.0f64 * 5.0 - 4.0).ln()).abs() < 1e-12);
    }

    #[test]
    fn rows_pushed_one_by_one_are_the_rows_of_a_fresh_factor() {
        let n = 9;
        let a = spd(n);
        let full = Cholesky::factor(n, |i, j| a[i * n + j]).unwrap();
        let mut grown = Cholesky::factor(4, |i, j| a[i * n + j]).unwrap();
        for i in 4..n {
            let cov: Vec<f64> = (0..i).map(|j| a[i * n + j]).collect();
            grown.push(&cov, a[i * n + i]).unwrap();
        }
        // Bit for bit, not within a tolerance.
        assert_eq!(grown, full);
    }

    #[test]
    fn a_singular_matrix_gets_jitter_and_a_hopeless_one_none() {
        // Two identical points, no noise: rank 1.
        let c = Cholesky::factor(3, |_, _| 1.0).unwrap();
        assert!(c.jitter() > 0.0 && c.jitter() <= 1e-2);
        assert_eq!(c.len(), 3);
        // Indefinite beyond any jitter: [[1, 2], [2, 1]].
        assert!(Cholesky::factor(2, |i, j| if i == j { 1.0 } else { 2.0 }).is_none());
        // NaN entries are refused, never a panic.
        assert!(Cholesky::factor(2, |_, _| f64::NAN).is_none());
        // A failed push leaves the factor as it was.
        let mut c = Cholesky::factor(1, |_, _| 1.0).unwrap();
        let before = c.clone();
        assert_eq!(c.push(&[2.0], 1.0), Err(NotPositive));
        assert_eq!(c, before);
    }
}
