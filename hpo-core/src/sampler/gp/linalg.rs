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
            let v = (c - dot(new, &lj[..j])) / lj[j];
            self.packed.push(v);
        }
        let new = &self.packed[start..];
        let d = var + self.jitter - dot(new, new);
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
            b[i] = (b[i] - dot(&r[..i], &b[..i])) / r[i];
        }
    }

    /// Solves `L X = B` in place for [`LANES`] right-hand sides at once,
    /// `b` row-major (`b[i * LANES + k]` is row `i` of column `k`): each row
    /// of `L` is read once for all of them, and the sums over the columns are
    /// independent, so the loop runs at the machine's arithmetic rate.
    pub(super) fn solve_lower_lanes(&self, b: &mut [f64]) {
        debug_assert_eq!(b.len(), self.n * LANES);
        for i in 0..self.n {
            let r = self.row(i);
            let mut acc = [0.0; LANES];
            let (done, rest) = b.split_at_mut(i * LANES);
            for (l, row) in r[..i].iter().zip(done.chunks_exact(LANES)) {
                for (a, x) in acc.iter_mut().zip(row) {
                    *a += l * x;
                }
            }
            for (x, a) in rest[..LANES].iter_mut().zip(acc) {
                *x = (*x - a) / r[i];
            }
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

    /// `A⁻¹`, dense and row-major: `X = L⁻¹` row by row (row `i` is
    /// `(e_i - Σ_k L[i][k] X[k]) / L[i][i]`, a sum of rows), then
    /// `A⁻¹ = Xᵀ X` as a sum of outer products of `X`'s rows; both inner
    /// loops are independent updates of contiguous memory.
    pub(super) fn inverse(&self) -> Vec<f64> {
        let n = self.n;
        // x[i][..=i] is row i of L⁻¹ (lower triangular), row-major n x n.
        let mut x = vec![0.0; n * n];
        for i in 0..n {
            let r = self.row(i);
            let (above, row) = x.split_at_mut(i * n);
            let row = &mut row[..=i];
            row[i] = 1.0;
            for (k, lik) in r[..i].iter().enumerate() {
                if *lik == 0.0 {
                    continue;
                }
                for (v, xk) in row[..=k].iter_mut().zip(&above[k * n..k * n + k + 1]) {
                    *v -= lik * xk;
                }
            }
            let d = r[i];
            for v in row.iter_mut() {
                *v /= d;
            }
        }
        // A⁻¹[a][b] = Σ_{k ≥ max(a, b)} X[k][a] X[k][b].
        let mut out = vec![0.0; n * n];
        for k in 0..n {
            let xk = &x[k * n..k * n + k + 1];
            for a in 0..=k {
                let xa = xk[a];
                if xa == 0.0 {
                    continue;
                }
                for (o, xb) in out[a * n..a * n + a + 1].iter_mut().zip(xk) {
                    *o += xa * xb;
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

/// Right-hand sides solved together by [`Cholesky::solve_lower_lanes`].
pub(super) const LANES: usize = 8;

/// `Σ a_i b_i` over the shorter of the two, with eight independent partial
/// sums: one running sum is a chain of dependent additions, which the
/// compiler may not reorder, so it runs at the adder's latency, not its rate.
pub(super) fn dot(a: &[f64], b: &[f64]) -> f64 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
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
    fn lanes_solve_as_one_at_a_time_and_dot_sums() {
        let n = 11;
        let a = spd(n);
        let c = Cholesky::factor(n, |i, j| a[i * n + j]).unwrap();
        let cols: Vec<Vec<f64>> = (0..LANES)
            .map(|k| (0..n).map(|i| ((i * 3 + k * 5) % 7) as f64 - 3.0).collect())
            .collect();
        let mut b = vec![0.0; n * LANES];
        for (k, col) in cols.iter().enumerate() {
            for i in 0..n {
                b[i * LANES + k] = col[i];
            }
        }
        c.solve_lower_lanes(&mut b);
        for (k, col) in cols.iter().enumerate() {
            let mut one = col.clone();
            c.solve_lower(&mut one);
            for i in 0..n {
                assert!((one[i] - b[i * LANES + k]).abs() < 1e-12);
            }
        }
        let x: Vec<f64> = (0..19).map(|i| i as f64).collect();
        assert_eq!(dot(&x, &x), (0..19).map(|i| (i * i) as f64).sum::<f64>());
        assert_eq!(dot(&x[..3], &x), 5.0);
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
