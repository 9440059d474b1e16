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

use super::wide::dispatched;

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
    /// (`j <= i`); see [`Cholesky::factor_rows`].
    #[cfg(test)]
    pub(super) fn factor(n: usize, entry: impl Fn(usize, usize) -> f64) -> Option<Cholesky> {
        Cholesky::factor_rows(
            n,
            |i| entry(i, i),
            |i, row| {
                row.clear();
                row.extend((0..i).map(|j| entry(i, j)));
            },
        )
    }

    /// The factor of the `n x n` matrix with diagonal `diag(i)` whose row
    /// `i` left of the diagonal `row(i, buffer)` writes, with the least
    /// jitter that makes it positive definite, or `None` if even
    /// [`LAST_JITTER`] times the mean diagonal does not.
    pub(super) fn factor_rows(
        n: usize,
        diag: impl Fn(usize) -> f64,
        mut row: impl FnMut(usize, &mut Vec<f64>),
    ) -> Option<Cholesky> {
        let scale = if n == 0 {
            1.0
        } else {
            ((0..n).map(|i| diag(i).abs()).sum::<f64>() / n as f64).max(f64::MIN_POSITIVE)
        };
        let mut jitter = 0.0;
        let mut buf = Vec::with_capacity(n);
        loop {
            let mut chol = Cholesky {
                n: 0,
                packed: Vec::with_capacity(n * (n + 1) / 2),
                jitter,
            };
            let ok = (0..n).all(|i| {
                row(i, &mut buf);
                chol.push(&buf, diag(i)).is_ok()
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
        // The new row solves `L r = cov`: `r_j = (c_j - r[..j] · L[j][..j]) /
        // L[j][j]`, the forward substitution's sums, bit for bit.
        let mut r = cov.to_vec();
        self.solve_lower(&mut r);
        self.packed.extend_from_slice(&r);
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
        solve_lower(self, b);
    }

    /// Solves `L X = B` in place for [`LANES`] right-hand sides at once,
    /// `b` row-major (`b[i * LANES + k]` is row `i` of column `k`): each row
    /// of `L` is read once for all of them, and the sums over the columns are
    /// independent, so the loop runs at the machine's arithmetic rate. Each
    /// column is the same, bit for bit, as a sum taken in row order.
    pub(super) fn solve_lower_lanes(&self, b: &mut [f64]) {
        solve_lower_lanes(self, b);
    }

    /// Solves `Lᵀ x = b` in place.
    pub(super) fn solve_upper(&self, b: &mut [f64]) {
        solve_upper(self, b);
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

/// Rows of `L` whose sums [`lower_lanes_kernel`] accumulates together, so
/// that each solved row of `X` is read once for all of them: four rows of
/// eight lanes are 32 independent sums, enough to keep AVX2's adders busy
/// (one row's eight sums wait on the adder's latency).
const ROWS: usize = 4;

dispatched! {
    fn solve_lower(c: &Cholesky, b: &mut [f64]) => lower_kernel
}

dispatched! {
    fn solve_lower_lanes(c: &Cholesky, b: &mut [f64]) => lower_lanes_kernel
}

dispatched! {
    fn solve_upper(c: &Cholesky, b: &mut [f64]) => upper_kernel
}

/// `L x = b` by rows: `x_i = (b_i - L[i][..i] · x[..i]) / L[i][i]`, each
/// sum taken as [`dot`] takes it. [`ROWS`] rows at a time share the loads
/// of `x`: rows `4t..4t+3` have the same whole chunks of eight (`8q ≤ 4t`),
/// whose partial sums run side by side (four chains instead of one waiting
/// on the adder), then each row adds its own tail in order.
#[inline(always)]
fn lower_kernel(c: &Cholesky, b: &mut [f64]) {
    let n = c.n;
    let mut i0 = 0;
    while i0 + ROWS <= n {
        let q = i0 / 8;
        let l = |r: usize| c.row(i0 + r)[..8 * q].as_chunks::<8>().0;
        let (l0, l1, l2, l3) = (l(0), l(1), l(2), l(3));
        let x = b[..8 * q].as_chunks::<8>().0;
        let [mut s0, mut s1, mut s2, mut s3] = [[0.0; 8]; ROWS];
        for ((((x, a0), a1), a2), a3) in x.iter().zip(l0).zip(l1).zip(l2).zip(l3) {
            mul_add8(&mut s0, a0, x);
            mul_add8(&mut s1, a1, x);
            mul_add8(&mut s2, a2, x);
            mul_add8(&mut s3, a3, x);
        }
        for (r, a) in [s0, s1, s2, s3].iter().enumerate() {
            let i = i0 + r;
            let row = c.row(i);
            let mut s = combine(a);
            for (l, x) in row[8 * q..i].iter().zip(&b[8 * q..i]) {
                s += l * x;
            }
            b[i] = (b[i] - s) / row[i];
        }
        i0 += ROWS;
    }
    for i in i0..n {
        let r = c.row(i);
        b[i] = (b[i] - dot(&r[..i], &b[..i])) / r[i];
    }
}

/// `L X = B` for [`LANES`] columns, [`ROWS`] rows at a time: the rows' sums
/// over the rows solved before the block share each solved row's load, then
/// the block's own triangle is finished row by row. Every sum runs over `j`
/// in increasing order, as one row at a time would take it.
#[inline(always)]
fn lower_lanes_kernel(c: &Cholesky, b: &mut [f64]) {
    debug_assert_eq!(b.len(), c.n * LANES);
    let mut i0 = 0;
    while i0 < c.n {
        let rows = ROWS.min(c.n - i0);
        let mut acc = [[0.0; LANES]; ROWS];
        let (done, rest) = b.split_at_mut(i0 * LANES);
        let done = done.as_chunks::<LANES>().0;
        if rows == ROWS {
            let l = |r: usize| &c.row(i0 + r)[..i0];
            let (l0, l1, l2, l3) = (l(0), l(1), l(2), l(3));
            let [mut s0, mut s1, mut s2, mut s3] = acc;
            for ((((x, a0), a1), a2), a3) in done.iter().zip(l0).zip(l1).zip(l2).zip(l3) {
                axpy(&mut s0, *a0, x);
                axpy(&mut s1, *a1, x);
                axpy(&mut s2, *a2, x);
                axpy(&mut s3, *a3, x);
            }
            acc = [s0, s1, s2, s3];
        } else {
            for (r, sums) in acc.iter_mut().enumerate().take(rows) {
                for (l, x) in c.row(i0 + r)[..i0].iter().zip(done) {
                    axpy(sums, *l, x);
                }
            }
        }
        let block = rest[..rows * LANES].as_chunks_mut::<LANES>().0;
        for (r, sums) in acc.iter_mut().enumerate().take(rows) {
            let row = c.row(i0 + r);
            let (solved, this) = block.split_at_mut(r);
            for (l, x) in row[i0..i0 + r].iter().zip(solved.iter()) {
                axpy(sums, *l, x);
            }
            let d = row[i0 + r];
            for (x, s) in this[0].iter_mut().zip(sums.iter()) {
                *x = (*x - s) / d;
            }
        }
        i0 += rows;
    }
}

/// [`dot`]'s sum of its eight partial sums. Not inlined: the kernels keep
/// their partial sums in vector registers, lane by lane, which the compiler
/// otherwise shuffles into the order this sum reads them in.
#[inline(never)]
fn combine(a: &[f64; 8]) -> f64 {
    ((a[0] + a[4]) + (a[1] + a[5])) + ((a[2] + a[6]) + (a[3] + a[7]))
}

/// `s += a ⊙ x`, element by element.
#[inline(always)]
fn mul_add8(s: &mut [f64; 8], a: &[f64; 8], x: &[f64; 8]) {
    for k in 0..8 {
        s[k] += a[k] * x[k];
    }
}

/// `s += a x` over one row of lanes.
#[inline(always)]
fn axpy(s: &mut [f64; LANES], a: f64, x: &[f64; LANES]) {
    for k in 0..LANES {
        s[k] += a * x[k];
    }
}

/// `Lᵀ x = b` by columns of `L`, last first: `x_i = b_i / L[i][i]`, then
/// `b_j -= L[i][j] x_i` for every `j < i`. [`ROWS`] columns at a time: their
/// own triangle first, then one pass over the `b_j` below it applying the
/// four updates in the same order, so each `b_j` is loaded and stored once
/// instead of four times.
#[inline(always)]
fn upper_kernel(c: &Cholesky, b: &mut [f64]) {
    let mut top = c.n;
    while top >= ROWS {
        let i0 = top - ROWS;
        let (r3, r2, r1, r0) = (c.row(i0 + 3), c.row(i0 + 2), c.row(i0 + 1), c.row(i0));
        // The triangle: rows i0+3 down to i0.
        let x3 = b[i0 + 3] / r3[i0 + 3];
        let x2 = (b[i0 + 2] - r3[i0 + 2] * x3) / r2[i0 + 2];
        let x1 = ((b[i0 + 1] - r3[i0 + 1] * x3) - r2[i0 + 1] * x2) / r1[i0 + 1];
        let x0 = (((b[i0] - r3[i0] * x3) - r2[i0] * x2) - r1[i0] * x1) / r0[i0];
        b[i0..top].copy_from_slice(&[x0, x1, x2, x3]);
        for ((((bj, l3), l2), l1), l0) in b[..i0]
            .iter_mut()
            .zip(&r3[..i0])
            .zip(&r2[..i0])
            .zip(&r1[..i0])
            .zip(&r0[..i0])
        {
            *bj = (((*bj - l3 * x3) - l2 * x2) - l1 * x1) - l0 * x0;
        }
        top = i0;
    }
    for i in (0..top).rev() {
        let r = c.row(i);
        b[i] /= r[i];
        let xi = b[i];
        for (bj, lij) in b[..i].iter_mut().zip(&r[..i]) {
            *bj -= lij * xi;
        }
    }
}

/// `Σ a_i b_i` over the shorter of the two, with eight independent partial
/// sums: one running sum is a chain of dependent additions, which the
/// compiler may not reorder, so it runs at the adder's latency, not its rate.
#[inline(always)]
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
    fn every_vector_unit_solves_bit_for_bit_as_the_baseline() {
        // 37 rows: nine blocks of four and a partial one.
        let n = 37;
        let a = spd(n);
        let c = Cholesky::factor(n, |i, j| a[i * n + j]).unwrap();
        let rhs: Vec<f64> = (0..n * LANES)
            .map(|k| ((k * 7919 % 101) as f64 - 50.0) / 7.0)
            .collect();
        // The dispatched solves (AVX-512 or AVX2 where the CPU has them)
        // against the kernels built for the baseline.
        let (mut wide, mut base) = (rhs.clone(), rhs.clone());
        c.solve_lower_lanes(&mut wide);
        lower_lanes_kernel(&c, &mut base);
        assert_eq!(wide, base);
        // Each column as a plain sum in row order.
        for k in 0..LANES {
            let mut x: Vec<f64> = (0..n).map(|i| rhs[i * LANES + k]).collect();
            for i in 0..n {
                let r = c.row(i);
                let mut s = 0.0;
                for j in 0..i {
                    s += r[j] * x[j];
                }
                x[i] = (x[i] - s) / r[i];
            }
            let col: Vec<f64> = (0..n).map(|i| wide[i * LANES + k]).collect();
            assert_eq!(col, x, "column {k}");
        }
        // One right-hand side: row by row with `dot`, and by columns, as
        // the blocked kernels must reproduce exactly.
        for n in [3, 4, 8, 13, 37] {
            let c = Cholesky::factor(n, |i, j| a[i * 37 + j]).unwrap();
            let (mut wide, mut base) = (rhs[..n].to_vec(), rhs[..n].to_vec());
            c.solve_lower(&mut wide);
            lower_kernel(&c, &mut base);
            assert_eq!(wide, base);
            let mut plain = rhs[..n].to_vec();
            for i in 0..n {
                let r = c.row(i);
                plain[i] = (plain[i] - dot(&r[..i], &plain[..i])) / r[i];
            }
            assert_eq!(wide, plain, "lower, n = {n}");
            c.solve_upper(&mut wide);
            upper_kernel(&c, &mut base);
            assert_eq!(wide, base);
            for i in (0..n).rev() {
                let r = c.row(i);
                plain[i] /= r[i];
                let xi = plain[i];
                for (bj, lij) in plain[..i].iter_mut().zip(&r[..i]) {
                    *bj -= lij * xi;
                }
            }
            assert_eq!(wide, plain, "upper, n = {n}");
        }
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
