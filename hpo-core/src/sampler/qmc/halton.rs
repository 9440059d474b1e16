//! The Halton sequence, with optional random digit permutations (as SciPy's
//! `scipy.stats.qmc.Halton(scramble=True)`).
//!
//! Dimension `j` is the radical inverse of the point's index in the `j`-th
//! prime base. Scrambled, every digit position of every dimension gets its own
//! random permutation of the base's digits (Matoušek's random linear
//! scrambling without the linear part, the scheme SciPy uses), which breaks
//! the strong correlations between high-base dimensions of the plain
//! sequence. Point `i` is computed directly from its index.

use rand::seq::SliceRandom;
use rand::Rng;

/// The Halton sequence in `d` dimensions, with its digit permutations.
#[derive(Debug, Clone)]
pub(super) struct Halton {
    /// Per dimension: its base and, when scrambled, one permutation of
    /// `0..base` per digit position (most significant first).
    dims: Vec<(u64, Vec<Vec<u64>>)>,
}

impl Halton {
    /// The plain sequence in `d` dimensions.
    pub(super) fn new(d: usize) -> Halton {
        Halton {
            dims: primes(d).into_iter().map(|p| (p, Vec::new())).collect(),
        }
    }

    /// The sequence in `d` dimensions with random digit permutations drawn
    /// from `rng_for(j)`, one generator per dimension.
    pub(super) fn scrambled<R: Rng>(d: usize, mut rng_for: impl FnMut(usize) -> R) -> Halton {
        let dims = primes(d)
            .into_iter()
            .enumerate()
            .map(|(j, base)| {
                let mut rng = rng_for(j);
                let perms = (0..digits(base))
                    .map(|_| {
                        let mut p: Vec<u64> = (0..base).collect();
                        p.shuffle(&mut rng);
                        p
                    })
                    .collect();
                (base, perms)
            })
            .collect();
        Halton { dims }
    }

    /// The number of dimensions.
    pub(super) fn dims(&self) -> usize {
        self.dims.len()
    }

    /// Point number `index` (the first is 0), each coordinate in `[0, 1)`.
    pub(super) fn point(&self, index: u64) -> Vec<f64> {
        self.dims
            .iter()
            .map(|(base, perms)| radical_inverse(index, *base, perms))
            .collect()
    }
}

/// Digit positions that matter in an `f64` for `base`: `ceil(53 / log2(base))`.
fn digits(base: u64) -> usize {
    (53.0 / (base as f64).log2()).ceil() as usize
}

/// `index`'s digits in `base`, reversed behind the radix point, each mapped
/// through its position's permutation when there are any. Scrambled, the
/// (infinitely many) leading zeros of `index` are permuted too, up to the
/// precision of an `f64`.
fn radical_inverse(index: u64, base: u64, perms: &[Vec<u64>]) -> f64 {
    let inv = 1.0 / base as f64;
    let mut scale = inv;
    let mut x = 0.0;
    let mut rest = index;
    let positions = if perms.is_empty() {
        usize::MAX
    } else {
        perms.len()
    };
    let mut k = 0;
    while k < positions && (rest > 0 || !perms.is_empty()) {
        let digit = rest % base;
        let digit = perms.get(k).map_or(digit, |p| p[digit as usize]);
        x += digit as f64 * scale;
        scale *= inv;
        rest /= base;
        k += 1;
    }
    // Rounding in the sum may reach 1 when every digit is base - 1.
    x.min(1.0 - f64::EPSILON / 2.0)
}

/// The first `n` primes.
fn primes(n: usize) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::with_capacity(n);
    let mut candidate = 2u64;
    while out.len() < n {
        if out
            .iter()
            .take_while(|p| **p * **p <= candidate)
            .all(|p| !candidate.is_multiple_of(*p))
        {
            out.push(candidate);
        }
        candidate += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_unscrambled_sequence_is_scipys() {
        // `scipy.stats.qmc.Halton(3, scramble=False).random(5)` (SciPy 1.17).
        let expected = [
            [0.0, 0.0, 0.0],
            [0.5, 1.0 / 3.0, 0.2],
            [0.25, 2.0 / 3.0, 0.4],
            [0.75, 1.0 / 9.0, 0.6],
            [0.125, 4.0 / 9.0, 0.8],
        ];
        let h = Halton::new(3);
        for (i, row) in expected.iter().enumerate() {
            for (x, want) in h.point(i as u64).iter().zip(row) {
                assert!((x - want).abs() < 1e-15, "point {i}: {x} vs {want}");
            }
        }
    }

    #[test]
    fn primes_are_primes() {
        assert_eq!(primes(10), [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]);
        assert_eq!(primes(1000).last(), Some(&7919));
    }

    /// Scrambled: the first `b^k` points of dimension `j` (base `b`) still
    /// fall one in each interval of width `b^-k`.
    #[test]
    fn scrambled_points_stratify_each_dimension() {
        let h = Halton::scrambled(4, |j| ChaCha8Rng::seed_from_u64(j as u64));
        for (j, base, k) in [(0, 2u64, 7u32), (1, 3, 4), (2, 5, 3), (3, 7, 2)] {
            let n = base.pow(k) as usize;
            let mut seen = vec![false; n];
            for i in 0..n {
                let x = h.point(i as u64)[j];
                assert!((0.0..1.0).contains(&x), "{x}");
                let cell = (x * n as f64) as usize;
                assert!(!seen[cell], "dimension {j}: two points in cell {cell}");
                seen[cell] = true;
            }
        }
        assert_ne!(Halton::new(4).point(5), h.point(5));
    }
}
