//! The Sobol sequence, with optional linear matrix scrambling and a digital
//! shift (as SciPy's `scipy.stats.qmc.Sobol(scramble=True)`).
//!
//! Point `i` is computed directly from its index: the XOR of the direction
//! numbers selected by the bits of `i`'s Gray code (Antonov and Saleev's
//! ordering, the one SciPy uses), so any point costs `O(d * 64)` and nothing
//! depends on which points were drawn before, in this process or another.
//! Coordinates carry 64 bits; they are rounded to the 53 of an `f64` in
//! `[0, 1)`.

use super::joe_kuo::{DIMS, DIRECTIONS};
use crate::error::{Error, Result};
use rand::Rng;

/// Bits per coordinate.
const BITS: usize = 64;

/// The direction numbers of one Sobol sequence in `d` dimensions, scrambled
/// or not, and each dimension's digital shift.
#[derive(Debug, Clone)]
pub(in crate::sampler) struct Sobol {
    /// `directions[j][c]`: dimension `j`'s direction number for bit `c` of
    /// the Gray code, as a 64-bit binary fraction.
    directions: Vec<[u64; BITS]>,
    /// XOR-ed into every point of dimension `j` (zero when not scrambled).
    shifts: Vec<u64>,
}

impl Sobol {
    /// The plain (unscrambled) sequence in `d` dimensions.
    pub(super) fn new(d: usize) -> Result<Sobol> {
        if d > DIMS {
            return Err(Error::InvalidConfig(format!(
                "the Sobol sequence supports at most {DIMS} dimensions (Joe & Kuo's table as \
                 shipped), but the search space has {d} parameters; use the Halton sequence \
                 (`QmcKind::Halton`) for larger spaces"
            )));
        }
        Ok(Sobol {
            directions: (0..d).map(unscrambled_directions).collect(),
            shifts: vec![0; d],
        })
    }

    /// The sequence in `d` dimensions scrambled by `rng_for(j)`, one generator
    /// per dimension (so a dimension's scrambling never depends on how many
    /// others there are): a random lower-triangular binary matrix with unit
    /// diagonal applied to the direction numbers, then a random digital shift.
    pub(in crate::sampler) fn scrambled<R: Rng>(
        d: usize,
        mut rng_for: impl FnMut(usize) -> R,
    ) -> Result<Sobol> {
        let mut sobol = Sobol::new(d)?;
        for (j, (dirs, shift)) in sobol
            .directions
            .iter_mut()
            .zip(sobol.shifts.iter_mut())
            .enumerate()
        {
            let mut rng = rng_for(j);
            // Row `r` of the matrix as a mask over digits, digit `r` being bit
            // 63 - r: the unit diagonal plus random bits for the more
            // significant digits.
            let rows: Vec<u64> = (0..BITS)
                .map(|r| {
                    let diagonal = 1u64 << (BITS - 1 - r);
                    let above = if r == 0 { 0 } else { !((diagonal << 1) - 1) };
                    diagonal | (rng.random::<u64>() & above)
                })
                .collect();
            for v in dirs.iter_mut() {
                *v = rows.iter().enumerate().fold(0u64, |acc, (r, row)| {
                    acc | (u64::from((row & *v).count_ones() & 1) << (BITS - 1 - r))
                });
            }
            *shift = rng.random();
        }
        Ok(sobol)
    }

    /// The number of dimensions.
    pub(super) fn dims(&self) -> usize {
        self.directions.len()
    }

    /// Point number `index` (the first is 0), each coordinate in `[0, 1)`.
    pub(in crate::sampler) fn point(&self, index: u64) -> Vec<f64> {
        let gray = index ^ (index >> 1);
        self.directions
            .iter()
            .zip(&self.shifts)
            .map(|(dirs, shift)| {
                let mut bits = gray;
                let mut x = *shift;
                while bits != 0 {
                    x ^= dirs[bits.trailing_zeros() as usize];
                    bits &= bits - 1;
                }
                to_unit(x)
            })
            .collect()
    }
}

/// A 64-bit binary fraction as an `f64` in `[0, 1)` (its 53 leading bits).
fn to_unit(x: u64) -> f64 {
    (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Dimension `j`'s direction numbers (Bratley and Fox's recurrence).
fn unscrambled_directions(j: usize) -> [u64; BITS] {
    let mut v = [0u64; BITS];
    let Some(&(s, a, m)) = j.checked_sub(1).and_then(|k| DIRECTIONS.get(k)) else {
        // The first dimension: van der Corput's sequence in base 2.
        for (c, vc) in v.iter_mut().enumerate() {
            *vc = 1u64 << (BITS - 1 - c);
        }
        return v;
    };
    let s = s as usize;
    for (c, mc) in m.iter().enumerate().take(BITS) {
        v[c] = u64::from(*mc) << (BITS - 1 - c);
    }
    for c in s..BITS {
        let mut x = v[c - s] ^ (v[c - s] >> s);
        for i in 1..s {
            if (a >> (s - 1 - i)) & 1 == 1 {
                x ^= v[c - i];
            }
        }
        v[c] = x;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn the_unscrambled_sequence_is_scipys() {
        // `scipy.stats.qmc.Sobol(6, scramble=False).random(8) * 8` (SciPy 1.17).
        let expected = [
            [0, 0, 0, 0, 0, 0],
            [4, 4, 4, 4, 4, 4],
            [6, 2, 2, 2, 6, 6],
            [2, 6, 6, 6, 2, 2],
            [3, 3, 5, 7, 3, 1],
            [7, 7, 1, 3, 7, 5],
            [5, 1, 7, 5, 5, 7],
            [1, 5, 3, 1, 1, 3],
        ];
        let sobol = Sobol::new(6).unwrap();
        for (i, row) in expected.iter().enumerate() {
            let p: Vec<f64> = sobol.point(i as u64).iter().map(|x| x * 8.0).collect();
            let want: Vec<f64> = row.iter().map(|&x| f64::from(x)).collect();
            assert_eq!(p, want, "point {i}");
        }
        // Far into the sequence and high dimensions: `Sobol(1024,
        // scramble=False)` fast-forwarded to points 37 and 1000, dimensions
        // 0, 1, 2, 9, 500 and 1023.
        let sobol = Sobol::new(1024).unwrap();
        let dims = [0, 1, 2, 9, 500, 1023];
        let at = |i| {
            let p = sobol.point(i);
            dims.map(|j| p[j])
        };
        assert_eq!(
            at(37),
            [0.921875, 0.640625, 0.578125, 0.171875, 0.171875, 0.734375]
        );
        assert_eq!(
            at(1000),
            [
                0.2197265625,
                0.0966796875,
                0.5185546875,
                0.0693359375,
                0.7255859375,
                0.7138671875
            ]
        );
    }

    #[test]
    fn too_many_dimensions_is_a_clear_error() {
        let e = Sobol::new(DIMS + 1).unwrap_err().to_string();
        assert!(e.contains("at most 1024 dimensions"), "{e}");
        assert!(e.contains("1025 parameters"), "{e}");
    }

    /// Scrambling keeps the net property: the first 2^m points put exactly one
    /// point in each of the 2^m intervals of width 2^-m, in every dimension.
    #[test]
    fn scrambled_points_stratify_every_dimension() {
        let sobol = Sobol::scrambled(8, |j| ChaCha8Rng::seed_from_u64(j as u64 + 1)).unwrap();
        let m = 6;
        let n = 1usize << m;
        for j in 0..8 {
            let mut seen = vec![false; n];
            for i in 0..n {
                let x = sobol.point(i as u64)[j];
                assert!((0.0..1.0).contains(&x));
                let cell = (x * n as f64) as usize;
                assert!(!seen[cell], "dimension {j}: two points in cell {cell}");
                seen[cell] = true;
            }
        }
        // And it moves the points: not the plain sequence.
        let plain = Sobol::new(8).unwrap();
        assert_ne!(plain.point(3), sobol.point(3));
    }

    /// Two-dimensional projections stay nets too: 2^m points, 2^(m/2) x
    /// 2^(m/2) boxes, one point each, for the first dimensions.
    #[test]
    fn scrambled_points_stratify_pairs_of_dimensions() {
        let sobol = Sobol::scrambled(4, |j| ChaCha8Rng::seed_from_u64(99 + j as u64)).unwrap();
        let (m, side) = (8, 16usize);
        for (a, b) in [(0, 1), (0, 2), (1, 2)] {
            let mut count = vec![0; side * side];
            for i in 0..(1u64 << m) {
                let p = sobol.point(i);
                let cell = (p[a] * side as f64) as usize * side + (p[b] * side as f64) as usize;
                count[cell] += 1;
            }
            assert!(
                count.iter().all(|&c| c == 1),
                "dimensions {a}, {b}: {count:?}"
            );
        }
    }
}
