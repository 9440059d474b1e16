//! The Parzen estimator: a weighted mixture of product kernels, one kernel per
//! observation plus a wide prior kernel, as in Optuna's `_ParzenEstimator`.
//!
//! Numeric parameters are modelled in a transformed space (`ln` for log
//! distributions) by Gaussians truncated to the declared range; stepped
//! parameters (stepped floats, ints) by the Gaussian's mass over each grid
//! cell, so the density is a proper probability mass function; log-scaled ints
//! are continuous on `[ln(low - 1/2), ln(high + 1/2)]` and rounded. Categorical
//! parameters get Optuna's kernel: every choice gets `prior_weight / n_kernels`
//! and the observed one gets 1 more, normalised per kernel.
//!
//! Densities are always those of the *declared* distribution; sampling can be
//! restricted to a narrowed [`Support`] (kernels truncated to the range,
//! excluded choices zeroed), which is how a constraint narrows a parameter
//! without changing what the sampler learns.
//!
//! Evaluation is the hot loop of TPE (candidates x kernels x dimensions), so
//! per-kernel constants (weights, log normalisers, bandwidths) are precomputed,
//! and stepped dimensions compute one cell mass per distinct kernel (grid
//! observations repeat), not one per kernel.

use super::config::TpeConfig;
use super::domain::{Dim, SampleRange};
use super::kernels::{categorical, draw, numeric, term, Kernels};
use super::scratch;
use rand::Rng;

/// A mixture term this many nats below the largest adds less than 1e-17.
const LOG_NEGLIGIBLE: f64 = 40.0;
/// Continuous dimensions evaluated for every kernel before any is abandoned.
/// Where the check happens does not change the result (a kernel's sum only
/// falls, so it is kept exactly when its full sum reaches the bar); three
/// measured faster than two or four on the 10-D overhead benchmark.
const PASS_ONE_DIMS: usize = 3;

/// A mixture of product kernels over several dimensions.
#[derive(Debug, Clone)]
pub(crate) struct ParzenEstimator {
    weights: Vec<f64>,
    /// Per kernel: log weight plus every dimension's constant log terms.
    consts: Vec<f64>,
    kernels: Vec<Kernels>,
    /// Continuous dimensions.
    cont_dims: Vec<usize>,
    /// Discrete and categorical dimensions.
    other_dims: Vec<usize>,
}

impl ParzenEstimator {
    /// Builds the estimator from observations in modelled units
    /// (`obs[d][i]` is observation `i` of dimension `d`) with their
    /// unnormalised `obs_weights`.
    #[cfg(test)]
    pub(crate) fn new(
        obs: &[Vec<f64>],
        obs_weights: &[f64],
        dims: &[Dim],
        cfg: &TpeConfig,
    ) -> Self {
        Self::with_order(obs.to_vec(), obs_weights, dims, cfg, None, None)
    }

    /// As [`ParzenEstimator::new`], with each dimension's observation indices
    /// already sorted by value (`order[d]`), which saves a sort per dimension.
    /// `log_norms[d][k]`, when given, is observation `k`'s log normaliser
    /// in dimension `d` at the clip bandwidth (`NaN` where unknown).
    pub(crate) fn with_order(
        obs: Vec<Vec<f64>>,
        obs_weights: &[f64],
        dims: &[Dim],
        cfg: &TpeConfig,
        order: Option<&[Vec<u32>]>,
        log_norms: Option<&[Vec<f64>]>,
    ) -> Self {
        let n = obs_weights.len();
        let mut weights: Vec<f64> = scratch::f64s(n + 1);
        weights.extend_from_slice(obs_weights);
        weights.push(if n == 0 { 1.0 } else { cfg.prior_weight });
        let total: f64 = weights.iter().sum();
        for w in &mut weights {
            *w /= total;
        }
        let mut consts: Vec<f64> = scratch::f64s(weights.len());
        consts.extend(weights.iter().map(|w| w.ln()));
        // Product of each kernel's continuous bandwidths: one `ln` per kernel, not per dimension.
        let mut scale = scratch::f64s(consts.len());
        scale.resize(consts.len(), 1.0);
        let kernels: Vec<Kernels> = dims
            .iter()
            .zip(obs)
            .enumerate()
            .map(|(d, (dim, xs))| match *dim {
                Dim::Numeric { low, high, step } => {
                    let ord = order.and_then(|o| o.get(d)).filter(|o| o.len() == xs.len());
                    let norms = log_norms
                        .and_then(|o| o.get(d))
                        .filter(|o| o.len() == xs.len());
                    let k = numeric(
                        xs,
                        ord,
                        norms,
                        low,
                        high,
                        step,
                        dims.len(),
                        cfg,
                        &mut consts,
                        &mut scale,
                    );
                    for (c, sc) in consts.iter_mut().zip(&mut scale) {
                        if !(1e-150..=1e150).contains(sc) {
                            *c -= sc.ln();
                            *sc = 1.0;
                        }
                    }
                    k
                }
                Dim::Categorical { n: nc } => categorical(&xs, nc, cfg),
            })
            .collect();
        for (c, sc) in consts.iter_mut().zip(&scale) {
            *c -= sc.ln();
        }
        scratch::give_f64s(scale);
        let is_cont = |k: &Kernels| matches!(k, Kernels::Numeric { step: None, .. });
        let cont_dims: Vec<usize> = (0..kernels.len())
            .filter(|d| is_cont(&kernels[*d]))
            .collect();
        let other_dims: Vec<usize> = (0..kernels.len())
            .filter(|d| !is_cont(&kernels[*d]))
            .collect();
        ParzenEstimator {
            weights,
            consts,
            kernels,
            cont_dims,
            other_dims,
        }
    }

    /// Number of kernels (observations plus the prior).
    #[cfg(test)]
    pub(crate) fn n_kernels(&self) -> usize {
        self.weights.len()
    }

    /// `n` joint draws restricted to `ranges` (one per dimension); returns
    /// `out[d][i]`, draw `i` of dimension `d`, in modelled units.
    pub(crate) fn sample<R: Rng + ?Sized>(
        &self,
        rng: &mut R,
        n: usize,
        ranges: &[SampleRange],
    ) -> Vec<Vec<f64>> {
        let mut cum = scratch::f64s(self.weights.len());
        let mut acc = 0.0;
        for w in &self.weights {
            acc += w;
            cum.push(acc);
        }
        let active: Vec<usize> = (0..n)
            .map(|_| {
                let u = rng.random::<f64>() * acc;
                cum.partition_point(|c| *c <= u).min(cum.len() - 1)
            })
            .collect();
        scratch::give_f64s(cum);
        self.kernels
            .iter()
            .zip(ranges)
            .map(|(ks, range)| active.iter().map(|k| draw(ks, *k, range, rng)).collect())
            .collect()
    }

    /// Log density of each point (`xs[d][i]`, modelled units) under the declared space.
    ///
    /// Every per-dimension term is a log density or mass of at most 0 once
    /// the kernel's constants are in, so a kernel's partial sum only falls;
    /// a kernel already more than 40 nats below the best complete one adds
    /// less than 1e-17 relative to the mixture and is abandoned there. In a
    /// long history almost every kernel is abandoned after one dimension.
    pub(crate) fn log_pdf(&self, xs: &[Vec<f64>]) -> Vec<f64> {
        let n_points = xs.first().map_or(0, Vec::len);
        let nk = self.consts.len();
        let cont: Vec<(&[f64], &[f64])> = self
            .cont_dims
            .iter()
            .filter_map(|d| match &self.kernels[*d] {
                Kernels::Numeric {
                    mus, inv_sigmas, ..
                } => Some((&mus[..], &inv_sigmas[..])),
                Kernels::Categorical { .. } => None,
            })
            .collect();
        // Cell masses of discrete dimensions, per distinct kernel, computed on first use.
        let mut caches: Vec<Vec<f64>> = self
            .other_dims
            .iter()
            .map(|d| match &self.kernels[*d] {
                Kernels::Numeric { pairs, .. } => vec![f64::NAN; pairs.len()],
                Kernels::Categorical { .. } => Vec::new(),
            })
            .collect();
        let mut vals = scratch::f64s(nk);
        let mut partial: Vec<f64> = scratch::f64s(nk);
        let mut xc = vec![0.0; cont.len()];
        // Dimensions summed for every kernel in a branch-free (vectorisable) pass.
        let head = cont.len().min(PASS_ONE_DIMS);
        let out = (0..n_points)
            .map(|i| {
                for (x, d) in xc.iter_mut().zip(&self.cont_dims) {
                    *x = xs[*d][i];
                }
                for c in &mut caches {
                    c.fill(f64::NAN);
                }
                partial.clear();
                match (&cont[..head], &xc[..head]) {
                    // The usual cases in one pass over the kernels (same
                    // operations, in the same order, as the general one).
                    ([(m0, i0), (m1, i1)], [x0, x1]) => partial.extend(
                        self.consts
                            .iter()
                            .zip(m0.iter().zip(i0.iter()))
                            .zip(m1.iter().zip(i1.iter()))
                            .map(|((c, (mu0, inv0)), (mu1, inv1))| {
                                let z0 = (x0 - mu0) * inv0;
                                let z1 = (x1 - mu1) * inv1;
                                c - 0.5 * z0 * z0 - 0.5 * z1 * z1
                            }),
                    ),
                    ([(m0, i0), (m1, i1), (m2, i2)], [x0, x1, x2]) => partial.extend(
                        self.consts
                            .iter()
                            .zip(m0.iter().zip(i0.iter()))
                            .zip(m1.iter().zip(i1.iter()))
                            .zip(m2.iter().zip(i2.iter()))
                            .map(|(((c, (mu0, inv0)), (mu1, inv1)), (mu2, inv2))| {
                                let z0 = (x0 - mu0) * inv0;
                                let z1 = (x1 - mu1) * inv1;
                                let z2 = (x2 - mu2) * inv2;
                                c - 0.5 * z0 * z0 - 0.5 * z1 * z1 - 0.5 * z2 * z2
                            }),
                    ),
                    _ => {
                        partial.extend_from_slice(&self.consts);
                        for (x, (mus, invs)) in xc.iter().zip(&cont).take(head) {
                            for ((p, mu), inv) in
                                partial.iter_mut().zip(mus.iter()).zip(invs.iter())
                            {
                                let z = (x - mu) * inv;
                                *p -= 0.5 * z * z;
                            }
                        }
                    }
                }
                vals.clear();
                // The prior first: it is never far, so it sets a useful bar at once.
                let prior = nk - 1;
                let mut best = f64::NEG_INFINITY;
                if let Some(a) = self.finish(
                    prior,
                    partial[prior],
                    best,
                    head,
                    &xc,
                    &cont,
                    xs,
                    i,
                    &mut caches,
                ) {
                    vals.push(a);
                    best = a;
                }
                let mut bar = best - LOG_NEGLIGIBLE;
                for (k, p) in partial[..prior].iter().enumerate() {
                    if *p < bar {
                        continue;
                    }
                    if let Some(a) = self.finish(k, *p, bar, head, &xc, &cont, xs, i, &mut caches) {
                        vals.push(a);
                        if a > best {
                            best = a;
                            bar = best - LOG_NEGLIGIBLE;
                        }
                    }
                }
                log_sum_exp(&vals)
            })
            .collect();
        scratch::give_f64s(vals);
        scratch::give_f64s(partial);
        out
    }

    /// Adds kernel `k`'s remaining dimensions (all but the first `head`
    /// continuous ones) to `a`; `None` once it falls below `bar`.
    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        k: usize,
        mut a: f64,
        bar: f64,
        head: usize,
        xc: &[f64],
        cont: &[(&[f64], &[f64])],
        xs: &[Vec<f64>],
        i: usize,
        caches: &mut [Vec<f64>],
    ) -> Option<f64> {
        for (x, (mus, invs)) in xc.iter().zip(cont).skip(head) {
            let z = (x - mus[k]) * invs[k];
            a -= 0.5 * z * z;
            if a < bar {
                return None;
            }
        }
        for (d, cache) in self.other_dims.iter().zip(caches.iter_mut()) {
            a += term(&self.kernels[*d], k, xs[*d][i], cache);
            if a < bar {
                return None;
            }
        }
        Some(a)
    }
}

impl Drop for ParzenEstimator {
    /// The large arrays go back to the thread's scratch pool.
    fn drop(&mut self) {
        scratch::give_f64s(std::mem::take(&mut self.weights));
        scratch::give_f64s(std::mem::take(&mut self.consts));
        for k in std::mem::take(&mut self.kernels) {
            match k {
                Kernels::Numeric {
                    mus,
                    inv_sigmas,
                    pair_of,
                    ..
                } => {
                    scratch::give_f64s(mus);
                    scratch::give_f64s(inv_sigmas);
                    scratch::give_u32s(pair_of);
                }
                Kernels::Categorical { obs, .. } => scratch::give_u32s(obs),
            }
        }
    }
}

/// `ln(sum(exp(a)))`, stable.
fn log_sum_exp(a: &[f64]) -> f64 {
    let m = a.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if !m.is_finite() {
        return m;
    }
    // Terms below e^-40 of the largest change nothing in f64; skipping them
    // also avoids libm's slow underflow path for far-away kernels.
    let floor = m - LOG_NEGLIGIBLE;
    let s: f64 = a
        .iter()
        .filter(|x| **x > floor)
        .map(|x| (x - m).exp())
        .sum();
    m + s.ln()
}

#[cfg(test)]
mod tests {
    use super::super::config::TpeBandwidth;
    use super::super::domain::{clipped_log_norm, transform, untransform};
    use super::super::kernels::neighbour_gaps;
    use super::*;
    use crate::distribution::{CategoricalDistribution, FloatDistribution, IntDistribution};
    use crate::distribution::{Distribution, Support};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn cfg(scott: bool) -> TpeConfig {
        let bandwidth = if scott {
            TpeBandwidth::Scott
        } else {
            TpeBandwidth::NeighbourGap
        };
        TpeConfig {
            bandwidth,
            ..TpeConfig::optuna()
        }
    }

    fn estimator(dist: &Distribution, obs: &[f64], scott: bool) -> ParzenEstimator {
        let dims = [Dim::of(dist)];
        let xs: Vec<f64> = obs.iter().map(|x| transform(dist, *x)).collect();
        ParzenEstimator::new(&[xs], &vec![1.0; obs.len()], &dims, &cfg(scott))
    }

    #[test]
    fn continuous_density_integrates_to_one() {
        for mv in [true, false] {
            let d: Distribution = FloatDistribution::new(-2.0, 3.0).unwrap().into();
            let pe = estimator(&d, &[-1.9, 0.0, 0.2, 2.9], mv);
            assert_eq!(pe.n_kernels(), 5);
            let n = 20_000;
            let h = 5.0 / n as f64;
            let xs: Vec<f64> = (0..n).map(|i| -2.0 + (i as f64 + 0.5) * h).collect();
            let total: f64 = pe.log_pdf(&[xs]).iter().map(|l| l.exp() * h).sum();
            assert!((total - 1.0).abs() < 1e-6, "scott={mv}: {total}");
        }
    }

    #[test]
    fn log_float_density_integrates_in_log_space() {
        let d: Distribution = FloatDistribution::log(1e-4, 1.0).unwrap().into();
        let pe = estimator(&d, &[1e-3, 2e-3, 0.5], true);
        let (a, b) = (1e-4f64.ln(), 0.0);
        let n = 20_000;
        let h = (b - a) / n as f64;
        let xs: Vec<f64> = (0..n).map(|i| a + (i as f64 + 0.5) * h).collect();
        let total: f64 = pe.log_pdf(&[xs]).iter().map(|l| l.exp() * h).sum();
        assert!((total - 1.0).abs() < 1e-6, "{total}");
    }

    #[test]
    fn discrete_masses_sum_to_one() {
        let cases: Vec<Distribution> = vec![
            IntDistribution::new(0, 20).unwrap().into(),
            IntDistribution::stepped(8, 64, 8).unwrap().into(),
            FloatDistribution::stepped(0.0, 1.0, 0.1).unwrap().into(),
        ];
        for d in cases {
            for mv in [true, false] {
                let (lo, hi, s) = match Dim::of(&d) {
                    Dim::Numeric { low, high, step } => (low, high, step.unwrap()),
                    Dim::Categorical { .. } => unreachable!(),
                };
                let grid: Vec<f64> = (0..=((hi - lo) / s).round() as usize)
                    .map(|k| lo + k as f64 * s)
                    .collect();
                let obs = [grid[1], grid[grid.len() / 2], grid[grid.len() - 1]];
                let pe = estimator(&d, &obs, mv);
                let total: f64 = pe
                    .log_pdf(std::slice::from_ref(&grid))
                    .iter()
                    .map(|l| l.exp())
                    .sum();
                assert!((total - 1.0).abs() < 1e-9, "{d} mv={mv}: {total}");
            }
        }
    }

    #[test]
    fn stored_log_normalisers_match_computed_ones() {
        // 150 observations: most kernels sit at the clip bandwidth, where the
        // observation store's normalisers are used.
        for d in [
            Distribution::from(FloatDistribution::new(-2.0, 3.0).unwrap()),
            IntDistribution::stepped(0, 300, 3).unwrap().into(),
        ] {
            let xs: Vec<f64> = (0..150)
                .map(|i| {
                    let u = (i as f64 * 0.618).fract();
                    match &d {
                        Distribution::Int(_) => d.snap(300.0 * u),
                        _ => -2.0 + 5.0 * u,
                    }
                })
                .collect();
            let norms: Vec<f64> = xs.iter().map(|x| clipped_log_norm(&d, *x)).collect();
            let dims = [Dim::of(&d)];
            let w = vec![1.0; xs.len()];
            let plain =
                ParzenEstimator::with_order(vec![xs.clone()], &w, &dims, &cfg(false), None, None);
            let cached = ParzenEstimator::with_order(
                vec![xs.clone()],
                &w,
                &dims,
                &cfg(false),
                None,
                Some(&[norms]),
            );
            let probe: Vec<f64> = xs.iter().take(40).copied().collect();
            for (a, b) in plain
                .log_pdf(std::slice::from_ref(&probe))
                .iter()
                .zip(cached.log_pdf(&[probe]))
            {
                assert!((a - b).abs() < 1e-12, "{d}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn repeated_grid_observations_share_kernels() {
        let d: Distribution = IntDistribution::new(0, 30).unwrap().into();
        let obs = [3.0, 3.0, 3.0, 17.0, 17.0, 30.0];
        let pe = estimator(&d, &obs, true);
        match &pe.kernels[0] {
            // 3, 17, 30 share one bandwidth (Scott); the prior is its own.
            Kernels::Numeric { pairs, pair_of, .. } => {
                assert_eq!(pairs.len(), 4);
                assert_eq!(pair_of, &vec![0, 0, 0, 1, 1, 2, 3]);
            }
            Kernels::Categorical { .. } => unreachable!(),
        }
    }

    #[test]
    fn categorical_kernels_follow_optuna() {
        let d: Distribution = CategoricalDistribution::new(["a", "b", "c"])
            .unwrap()
            .into();
        // Observations a, a: 3 kernels; each row has 1/3 prior mass per choice.
        let pe = estimator(&d, &[0.0, 0.0], true);
        let p: Vec<f64> = pe
            .log_pdf(&[vec![0.0, 1.0, 2.0]])
            .iter()
            .map(|l| l.exp())
            .collect();
        let row_obs = [
            (1.0 / 3.0 + 1.0) / 2.0,
            (1.0 / 3.0) / 2.0,
            (1.0 / 3.0) / 2.0,
        ];
        let expect_a = (2.0 * row_obs[0] + 1.0 / 3.0) / 3.0;
        assert!((p[0] - expect_a).abs() < 1e-12);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-12);
        assert!(p[0] > p[1] && (p[1] - p[2]).abs() < 1e-15);
    }

    #[test]
    fn sampling_respects_narrowed_support_and_grids() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let cases: Vec<(Distribution, Support, Vec<f64>)> = vec![
            (
                FloatDistribution::new(0.0, 10.0).unwrap().into(),
                Support::range(7.0, 8.0),
                vec![1.0, 2.0],
            ),
            (
                FloatDistribution::log(1e-5, 1.0).unwrap().into(),
                Support::range(1e-5, 1e-4),
                vec![0.5, 0.9],
            ),
            (
                IntDistribution::stepped(0, 100, 5).unwrap().into(),
                Support::range(40.0, 60.0),
                vec![0.0, 100.0],
            ),
            (
                IntDistribution::log(1, 1024).unwrap().into(),
                Support::range(100.0, 200.0),
                vec![1.0, 2.0],
            ),
            (
                CategoricalDistribution::new([1, 2, 3, 4]).unwrap().into(),
                Support::choices([2, 3]),
                vec![0.0, 0.0],
            ),
        ];
        for (d, s, obs) in cases {
            let s = s.normalize("p", &d).unwrap();
            let pe = estimator(&d, &obs, true);
            let draws = pe.sample(&mut rng, 300, &[SampleRange::of(&d, &s)]);
            for y in &draws[0] {
                let x = untransform(&d, &s, *y);
                assert!(d.contains(x) && s.allows(x), "{x} from {d} / {s:?}");
            }
        }
    }

    #[test]
    fn samples_concentrate_near_observations() {
        let d: Distribution = FloatDistribution::new(0.0, 100.0).unwrap().into();
        let obs: Vec<f64> = (0..30).map(|i| 20.0 + 0.1 * i as f64).collect();
        let pe = estimator(&d, &obs, false);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        let draws = pe.sample(&mut rng, 1000, &[SampleRange::of(&d, &Support::Full)]);
        let near = draws[0]
            .iter()
            .filter(|x| (**x - 21.5).abs() < 10.0)
            .count();
        assert!(near > 800, "{near}");
    }

    #[test]
    fn bandwidths_are_neighbour_gaps() {
        // Observations 6, 2, 3 on [0, 10]: sorted 2, 3, 6.
        // Without endpoints the outermost use the gap to their inner
        // neighbour: 2 -> 1, 6 -> 3; the middle one the larger gap: 3 -> 3.
        assert_eq!(
            neighbour_gaps(&[6.0, 2.0, 3.0], 0.0, 10.0, false),
            vec![3.0, 1.0, 3.0]
        );
        // With endpoints: 2 -> max(2, 1) = 2, 6 -> max(3, 4) = 4.
        assert_eq!(
            neighbour_gaps(&[6.0, 2.0, 3.0], 0.0, 10.0, true),
            vec![4.0, 2.0, 3.0]
        );
        // One observation: the larger distance to an end.
        assert_eq!(neighbour_gaps(&[2.0], 0.0, 10.0, false), vec![8.0]);
        assert!(neighbour_gaps(&[], 0.0, 10.0, false).is_empty());
    }
}
