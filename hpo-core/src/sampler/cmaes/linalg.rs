//! The little dense linear algebra CMA-ES needs: symmetric matrices stored
//! row-major in a `Vec<f64>`, and their eigen decomposition by the cyclic
//! Jacobi method.
//!
//! Jacobi is slower than Householder tridiagonalisation + QL for large
//! matrices, but it is short, unconditionally stable and accurate to working
//! precision in every eigenvalue (small ones included), and search spaces
//! here have tens of dimensions, not thousands: a 50 x 50 decomposition takes
//! a few milliseconds, once per trial.

/// Eigenvalues and eigenvectors of a symmetric `n x n` matrix.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Eigen {
    /// Eigenvalues, in no particular order.
    pub(super) values: Vec<f64>,
    /// Eigenvectors as columns, row-major: `vectors[i * n + k]` is component
    /// `i` of eigenvector `k`.
    pub(super) vectors: Vec<f64>,
}

/// The eigen decomposition of the symmetric matrix `a` (`n x n`, row-major;
/// only its upper triangle is read). `a = V diag(values) V^T`.
pub(super) fn symmetric_eigen(a: &[f64], n: usize) -> Eigen {
    let mut m: Vec<f64> = (0..n * n)
        .map(|k| {
            let (i, j) = (k / n, k % n);
            if i <= j {
                a[i * n + j]
            } else {
                a[j * n + i]
            }
        })
        .collect();
    let mut v = identity(n);
    // Cyclic sweeps until the off-diagonal mass is negligible against the
    // diagonal; quadratic convergence makes 6-10 sweeps typical.
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| ((i + 1)..n).map(move |j| (i, j)))
            .map(|(i, j)| m[i * n + j] * m[i * n + j])
            .sum();
        let diag: f64 = (0..n).map(|i| m[i * n + i] * m[i * n + i]).sum();
        if off <= f64::EPSILON * f64::EPSILON * diag || off == 0.0 {
            break;
        }
        for p in 0..n {
            for q in (p + 1)..n {
                rotate(&mut m, &mut v, n, p, q);
            }
        }
    }
    Eigen {
        values: (0..n).map(|i| m[i * n + i]).collect(),
        vectors: v,
    }
}

/// One Jacobi rotation zeroing `m[p][q]` (Rutishauser's stable formulas).
fn rotate(m: &mut [f64], v: &mut [f64], n: usize, p: usize, q: usize) {
    let apq = m[p * n + q];
    if apq == 0.0 {
        return;
    }
    let (app, aqq) = (m[p * n + p], m[q * n + q]);
    let theta = (aqq - app) / (2.0 * apq);
    let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
    // theta == 0 gives signum 1: t = 1, a 45-degree rotation, as it should.
    let c = 1.0 / (t * t + 1.0).sqrt();
    let s = t * c;
    for k in 0..n {
        let (mkp, mkq) = (m[k * n + p], m[k * n + q]);
        m[k * n + p] = c * mkp - s * mkq;
        m[k * n + q] = s * mkp + c * mkq;
    }
    for k in 0..n {
        let (mpk, mqk) = (m[p * n + k], m[q * n + k]);
        m[p * n + k] = c * mpk - s * mqk;
        m[q * n + k] = s * mpk + c * mqk;
    }
    // Exact zero and symmetry where the rotation put them.
    m[p * n + q] = 0.0;
    m[q * n + p] = 0.0;
    for k in 0..n {
        let (vkp, vkq) = (v[k * n + p], v[k * n + q]);
        v[k * n + p] = c * vkp - s * vkq;
        v[k * n + q] = s * vkp + c * vkq;
    }
}

/// The `n x n` identity.
pub(super) fn identity(n: usize) -> Vec<f64> {
    (0..n * n)
        .map(|k| if k / n == k % n { 1.0 } else { 0.0 })
        .collect()
}

/// `a * x` for an `n x n` row-major `a`.
pub(super) fn mat_vec(a: &[f64], x: &[f64]) -> Vec<f64> {
    let n = x.len();
    (0..n)
        .map(|i| (0..n).map(|k| a[i * n + k] * x[k]).sum())
        .collect()
}

/// The Euclidean norm.
pub(super) fn norm(x: &[f64]) -> f64 {
    x.iter().map(|v| v * v).sum::<f64>().sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// `V diag(values) V^T`.
    fn reassemble(e: &Eigen, n: usize) -> Vec<f64> {
        (0..n * n)
            .map(|k| {
                let (i, j) = (k / n, k % n);
                (0..n)
                    .map(|l| e.vectors[i * n + l] * e.values[l] * e.vectors[j * n + l])
                    .sum()
            })
            .collect()
    }

    #[test]
    fn decomposes_random_symmetric_matrices() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for n in [1, 2, 3, 5, 10, 30] {
            let mut a = vec![0.0; n * n];
            for i in 0..n {
                for j in i..n {
                    let x: f64 = rng.random_range(-1.0..1.0);
                    a[i * n + j] = x;
                    a[j * n + i] = x;
                }
            }
            let e = symmetric_eigen(&a, n);
            let back = reassemble(&e, n);
            for (x, y) in a.iter().zip(&back) {
                assert!((x - y).abs() < 1e-12, "n={n}: {x} vs {y}");
            }
            // Orthonormal eigenvectors.
            for k in 0..n {
                for l in 0..n {
                    let dot: f64 = (0..n)
                        .map(|i| e.vectors[i * n + k] * e.vectors[i * n + l])
                        .sum();
                    let want = if k == l { 1.0 } else { 0.0 };
                    assert!(
                        (dot - want).abs() < 1e-12,
                        "n={n}: V^T V [{k}][{l}] = {dot}"
                    );
                }
            }
        }
    }

    #[test]
    fn known_eigenvalues_and_ill_conditioned_matrices() {
        // [[2, 1], [1, 2]] has eigenvalues 1 and 3.
        let mut e = symmetric_eigen(&[2.0, 1.0, 1.0, 2.0], 2).values;
        e.sort_by(f64::total_cmp);
        assert!(
            (e[0] - 1.0).abs() < 1e-15 && (e[1] - 3.0).abs() < 1e-15,
            "{e:?}"
        );
        // A rotated diag(1e-10, 1, 1e6): small eigenvalues stay accurate.
        let (c, s) = (0.6f64, 0.8f64);
        let r = [c, -s, 0.0, s, c, 0.0, 0.0, 0.0, 1.0];
        let d = [1e-10, 1.0, 1e6];
        let a: Vec<f64> = (0..9)
            .map(|k| {
                let (i, j) = (k / 3, k % 3);
                (0..3).map(|l| r[i * 3 + l] * d[l] * r[j * 3 + l]).sum()
            })
            .collect();
        let mut e = symmetric_eigen(&a, 3).values;
        e.sort_by(f64::total_cmp);
        assert!((e[0] - 1e-10).abs() < 1e-16, "{e:?}");
        assert!(
            (e[1] - 1.0).abs() < 1e-12 && (e[2] - 1e6).abs() < 1e-8,
            "{e:?}"
        );
    }
}
