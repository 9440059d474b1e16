//! Maximising the acquisition function over the search space, as Optuna's
//! `optimize_acqf_mixed`:
//!
//! 1. evaluate it at `n_preliminary` scrambled Sobol points (snapped to the
//!    grids of discrete parameters);
//! 2. start local searches from the best of them, from others drawn by
//!    roulette (probability `∝ exp(a(x) - max a)`, without replacement), and
//!    from the best trial's point;
//! 3. each local search alternates L-BFGS on the continuous coordinates
//!    (scaled by their lengthscales, so the problem is better conditioned)
//!    with a search along each discrete coordinate: every value when there
//!    are at most [`EXHAUSTIVE_UP_TO`] (and always for a categorical), a
//!    golden-section search over the grid's indices otherwise, until a round
//!    of the discrete searches changes nothing;
//! 4. return the best point found.

use super::acquisition::{Acquisition, KeptAcquisition};
use super::lbfgs;
use super::space::{Axis, Kind, EXHAUSTIVE_UP_TO};
use crate::sampler::qmc::sobol::Sobol;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::HashMap;

/// Rounds of continuous and discrete steps per local search at most.
const MAX_ROUNDS: usize = 100;
/// L-BFGS iterations per continuous step at most.
const MAX_LBFGS: usize = 200;

/// How hard to search.
#[derive(Debug, Clone, Copy)]
pub(super) struct Effort {
    /// Points evaluated before the local searches.
    pub(super) n_preliminary: usize,
    /// Local searches (including the one from the best trial).
    pub(super) n_local: usize,
    /// Gradient tolerance of the continuous steps.
    pub(super) tol: f64,
}

/// The best point found, and the acquisition there.
pub(super) fn maximize(
    acq: &Acquisition<'_>,
    axes: &[Axis],
    lengthscales: &[f64],
    warm: &[Vec<f64>],
    rng: &mut ChaCha8Rng,
    effort: Effort,
) -> (Vec<f64>, f64) {
    let d = axes.len();
    let n = effort.n_preliminary.max(1);
    let points: Vec<Vec<f64>> = match Sobol::scrambled(d, |j| {
        ChaCha8Rng::seed_from_u64(rng.random::<u64>() ^ j as u64)
    }) {
        Ok(sobol) => (0..n as u64)
            .map(|i| {
                let q = sobol.point(i);
                axes.iter().zip(q).map(|(a, q)| a.at_fraction(q)).collect()
            })
            .collect(),
        // More dimensions than the Sobol table: uniform points.
        Err(_) => (0..n)
            .map(|_| axes.iter().map(|a| a.at_fraction(rng.random())).collect())
            .collect(),
    };
    let values = acq.values(&points);
    let best = argmax(&values);
    let mut starts = vec![points[best].clone()];
    let room = effort.n_local.saturating_sub(1 + warm.len());
    starts.extend(
        roulette(&values, best, room, rng)
            .into_iter()
            .map(|i| points[i].clone()),
    );
    starts.extend(warm.iter().cloned());

    let mut out = (points[best].clone(), values[best]);
    for s in starts {
        let (p, v) = local_search(acq, axes, lengthscales, s, effort.tol);
        if v > out.1 || !out.1.is_finite() {
            out = (p, v);
        }
    }
    out
}

fn argmax(values: &[f64]) -> usize {
    let mut best = 0;
    for (i, v) in values.iter().enumerate() {
        if *v > values[best] || (values[best].is_nan() && !v.is_nan()) {
            best = i;
        }
    }
    best
}

/// Up to `k` indices other than `best`, drawn without replacement with
/// probability `∝ exp(values[i] - values[best])` (none with probability 0).
fn roulette(values: &[f64], best: usize, k: usize, rng: &mut ChaCha8Rng) -> Vec<usize> {
    let top = values[best];
    let mut w: Vec<f64> = values
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let e = (v - top).exp();
            if i == best || !e.is_finite() {
                0.0
            } else {
                e
            }
        })
        .collect();
    let mut out = Vec::with_capacity(k);
    for _ in 0..k {
        let total: f64 = w.iter().sum();
        if total.is_nan() || total <= 0.0 {
            break;
        }
        let mut r = rng.random::<f64>() * total;
        let mut pick = None;
        for (i, wi) in w.iter().enumerate() {
            if *wi <= 0.0 {
                continue;
            }
            pick = Some(i);
            if r < *wi {
                break;
            }
            r -= wi;
        }
        let Some(i) = pick else { break };
        out.push(i);
        w[i] = 0.0;
    }
    out
}

/// Minus the acquisition over the continuous coordinates `cont` of `trial`,
/// each divided by its lengthscale, as [`lbfgs::minimize`] climbs it.
struct Climb<'a, 'm> {
    acq: &'a Acquisition<'m>,
    cont: &'a [usize],
    scale: &'a [f64],
    /// The point valued last: the start's other coordinates, and the
    /// continuous ones L-BFGS asked for.
    trial: Vec<f64>,
    grad: Vec<f64>,
    kept: KeptAcquisition,
}

impl lbfgs::Objective for Climb<'_, '_> {
    fn value(&mut self, z: &[f64]) -> f64 {
        for ((&j, zi), s) in self.cont.iter().zip(z).zip(self.scale) {
            self.trial[j] = zi * s;
        }
        -self.acq.value_kept(&self.trial, &mut self.kept)
    }

    fn gradient(&mut self, g: &mut [f64]) {
        self.acq
            .gradient_kept(&self.trial, &mut self.kept, &mut self.grad);
        for ((gi, &j), s) in g.iter_mut().zip(self.cont).zip(self.scale) {
            *gi = -self.grad[j] * s;
        }
    }
}

/// One local search from `x`.
fn local_search(
    acq: &Acquisition<'_>,
    axes: &[Axis],
    lengthscales: &[f64],
    mut x: Vec<f64>,
    tol: f64,
) -> (Vec<f64>, f64) {
    let cont: Vec<usize> = (0..axes.len())
        .filter(|&j| axes[j].kind == Kind::Continuous)
        .collect();
    let mut f = acq.value(&x);
    if !f.is_finite() {
        return (x, f);
    }
    for _ in 0..MAX_ROUNDS {
        if !cont.is_empty() {
            let scale: Vec<f64> = cont.iter().map(|&j| lengthscales[j]).collect();
            let z0: Vec<f64> = cont.iter().zip(&scale).map(|(&j, s)| x[j] / s).collect();
            let bounds: Vec<(f64, f64)> = scale.iter().map(|s| (0.0, 1.0 / s)).collect();
            let mut climb = Climb {
                acq,
                cont: &cont,
                scale: &scale,
                trial: x.clone(),
                grad: vec![0.0; axes.len()],
                kept: KeptAcquisition::default(),
            };
            let m = lbfgs::minimize(&mut climb, &z0, Some(&bounds), tol, MAX_LBFGS);
            if -m.f > f {
                for ((&j, zi), s) in cont.iter().zip(&m.x).zip(&scale) {
                    x[j] = (zi * s).clamp(0.0, 1.0);
                }
                f = acq.value(&x);
            }
        }
        let mut changed = false;
        for (j, axis) in axes.iter().enumerate() {
            let count = match axis.kind {
                Kind::Continuous => continue,
                Kind::Discrete { count } | Kind::Categorical { count } => count,
            };
            if count < 2 {
                continue;
            }
            let (u, v) = if axis.is_categorical() || count <= EXHAUSTIVE_UP_TO {
                exhaustive(acq, axis, &x, j, count)
            } else {
                golden(acq, axis, &x, j, count)
            };
            if v > f && u != x[j] {
                x[j] = u;
                f = v;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    (x, f)
}

/// The best value of coordinate `j` over every grid value.
fn exhaustive(acq: &Acquisition<'_>, axis: &Axis, x: &[f64], j: usize, count: usize) -> (f64, f64) {
    let points: Vec<Vec<f64>> = (0..count)
        .map(|i| {
            let mut p = x.to_vec();
            p[j] = axis.grid(i);
            p
        })
        .collect();
    let mut best = (x[j], f64::NEG_INFINITY);
    for (p, v) in points.iter().zip(acq.values(&points)) {
        if v > best.1 {
            best = (p[j], v);
        }
    }
    best
}

/// A golden-section search over the grid's indices of coordinate `j`.
fn golden(acq: &Acquisition<'_>, axis: &Axis, x: &[f64], j: usize, count: usize) -> (f64, f64) {
    let mut p = x.to_vec();
    let mut cache: HashMap<usize, f64> = HashMap::new();
    let mut eval = |i: usize| -> f64 {
        *cache.entry(i).or_insert_with(|| {
            p[j] = axis.grid(i);
            acq.value(&p)
        })
    };
    let (mut lo, mut hi) = (0usize, count - 1);
    while hi - lo > 3 {
        let span = (hi - lo) as f64;
        let m1 = lo + (0.381_966 * span).round() as usize;
        let m2 = lo + (0.618_034 * span).round() as usize;
        let (m1, m2) = if m1 == m2 { (m1, m1 + 1) } else { (m1, m2) };
        if eval(m1) >= eval(m2) {
            hi = m2;
        } else {
            lo = m1;
        }
    }
    let mut best = (axis.grid_index(x[j]), f64::NEG_INFINITY);
    for i in (lo..=hi).chain(std::iter::once(axis.grid_index(x[j]))) {
        let v = eval(i);
        if v > best.1 {
            best = (i, v);
        }
    }
    (axis.grid(best.0), best.1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roulette_draws_distinct_indices_and_never_the_best_or_impossible_ones() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let values = [0.0, -1.0, f64::NEG_INFINITY, -0.5, -2.0];
        for _ in 0..50 {
            let picks = roulette(&values, 0, 3, &mut rng);
            assert_eq!(picks.len(), 3);
            let mut sorted = picks.clone();
            sorted.sort_unstable();
            sorted.dedup();
            assert_eq!(sorted.len(), 3);
            assert!(!picks.contains(&0) && !picks.contains(&2), "{picks:?}");
        }
        // Fewer possible than asked: as many as there are.
        assert_eq!(roulette(&values, 0, 10, &mut rng).len(), 3);
    }

    #[test]
    fn argmax_skips_nan() {
        assert_eq!(argmax(&[f64::NAN, 1.0, 3.0, 2.0]), 2);
    }
}
