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
use super::kernels::{categorical, draw, numeric, rescale, term, CellMasses, DimRecord, Kernels};
use super::scratch;
use rand::Rng;

/// A mixture term this many nats below the largest adds less than 1e-17.
const LOG_NEGLIGIBLE: f64 = 40.0;
/// Continuous dimensions evaluated for every kernel before any is abandoned.
/// Where the check happens does not change the result (a kernel's sum only
/// falls, so it is kept exactly when its full sum reaches the bar); three
/// measured faster than two or four on the 10-D overhead benchmark's random
/// history.
const PASS_ONE_DIMS: usize = 3;
/// Kernels whose remaining continuous dimensions are added together, against
/// the bar at the block's start.
const BLOCK: usize = 256;
/// A block where at least one kernel in this many is still live after the
/// first pass gets its remaining continuous dimensions for every kernel, in
/// a branch-free pass; a sparser one only for its live kernels.
const DENSE: usize = 4;

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
        Self::with_order(obs.to_vec(), obs_weights, dims, cfg, None, None, None)
    }

    /// As [`ParzenEstimator::new`], with each dimension's observation indices
    /// already sorted by value (`order[d]`), which saves a sort per dimension.
    /// `log_norms[d][k]`, when given, is observation `k`'s log normaliser
    /// in dimension `d` at the clip bandwidth (`NaN` where unknown).
    /// `record`, when given, receives what went into each kernel's constant.
    pub(crate) fn with_order(
        obs: Vec<Vec<f64>>,
        obs_weights: &[f64],
        dims: &[Dim],
        cfg: &TpeConfig,
        order: Option<&[Vec<u32>]>,
        log_norms: Option<&[Vec<f64>]>,
        mut record: Option<&mut BuildRecord>,
    ) -> Self {
        let weights = mixture_weights(obs_weights, cfg);
        if let Some(r) = record.as_mut() {
            r.ln_scale = scratch::f64s(weights.len());
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
                    let nk = obs_weights.len() + 1;
                    let mut dim_record = record.as_ref().map(|_| DimRecord {
                        sigmas: scratch::f64s(nk),
                        norms: scratch::f64s(nk),
                        rescales: scratch::f64s(nk),
                    });
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
                        dim_record.as_mut(),
                    );
                    for (c, sc) in consts.iter_mut().zip(&mut scale) {
                        let l = rescale(sc);
                        if let Some(l) = l {
                            *c -= l;
                        }
                        if let Some(r) = dim_record.as_mut() {
                            r.rescales.push(l.unwrap_or(0.0));
                        }
                    }
                    if let Some(r) = record.as_mut() {
                        r.dims.push(dim_record);
                    }
                    k
                }
                Dim::Categorical { n: nc } => {
                    if let Some(r) = record.as_mut() {
                        r.dims.push(None);
                    }
                    categorical(&xs, nc, cfg)
                }
            })
            .collect();
        for (c, sc) in consts.iter_mut().zip(&scale) {
            let l = sc.ln();
            *c -= l;
            if let Some(r) = record.as_mut() {
                r.ln_scale.push(l);
            }
        }
        scratch::give_f64s(scale);
        Self::from_parts(weights, consts, kernels)
    }

    /// The estimator with normalised `weights` (from [`mixture_weights`]),
    /// kernel constants `consts` and each dimension's kernels.
    pub(super) fn from_parts(weights: Vec<f64>, consts: Vec<f64>, kernels: Vec<Kernels>) -> Self {
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

    /// The weights, the kernel constants and each dimension's kernels, for
    /// an owner that updates them in place (see `kept`); the dimensions
    /// keep their kinds.
    pub(super) fn parts_mut(&mut self) -> (&mut Vec<f64>, &mut Vec<f64>, &mut [Kernels]) {
        (&mut self.weights, &mut self.consts, &mut self.kernels)
    }

    /// Whether `other` is the same mixture bit for bit: weights, constants,
    /// centres and inverse bandwidths, each discrete kernel's `(mu, sigma)`
    /// pair (pair numbering may differ), each categorical kernel.
    #[cfg(test)]
    pub(crate) fn same_bits(&self, other: &ParzenEstimator) -> Result<(), String> {
        let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        if bits(&self.weights) != bits(&other.weights) {
            return Err("weights differ".into());
        }
        if bits(&self.consts) != bits(&other.consts) {
            let k = self
                .consts
                .iter()
                .zip(&other.consts)
                .position(|(a, b)| a.to_bits() != b.to_bits());
            return Err(format!(
                "constants differ first at kernel {k:?} of {}",
                self.consts.len()
            ));
        }
        for (d, (a, b)) in self.kernels.iter().zip(&other.kernels).enumerate() {
            match (a, b) {
                (
                    Kernels::Numeric {
                        mus,
                        inv_sigmas,
                        pairs,
                        pair_of,
                        ..
                    },
                    Kernels::Numeric {
                        mus: m2,
                        inv_sigmas: i2,
                        pairs: p2,
                        pair_of: o2,
                        ..
                    },
                ) => {
                    if bits(mus) != bits(m2) || bits(inv_sigmas) != bits(i2) {
                        return Err(format!("dimension {d}: centres or bandwidths differ"));
                    }
                    let pair = |p: &[(f64, f64)], o: &[u32]| {
                        o.iter()
                            .map(|i| {
                                let (m, s) = p[*i as usize];
                                (m.to_bits(), s.to_bits())
                            })
                            .collect::<Vec<_>>()
                    };
                    if pair(pairs, pair_of) != pair(p2, o2) {
                        return Err(format!("dimension {d}: pairs differ"));
                    }
                }
                (
                    Kernels::Categorical { n, obs, logs, .. },
                    Kernels::Categorical {
                        n: n2,
                        obs: b2,
                        logs: l2,
                        ..
                    },
                ) => {
                    if n != n2 || obs != b2 || bits(logs) != bits(l2) {
                        return Err(format!("dimension {d}: categorical kernels differ"));
                    }
                }
                _ => return Err(format!("dimension {d}: kinds differ")),
            }
        }
        Ok(())
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
    /// long random history almost every kernel is abandoned after the first
    /// pass; in one TPE grew around its optimum, about one bad-group kernel
    /// in five is still live there (the 10-D overhead benchmark at 5,000
    /// trials), so the rest of the continuous dimensions go in blocks,
    /// without a branch per kernel.
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
        // Cell masses of discrete dimensions, computed on first use.
        let mut caches: Vec<CellMasses> = self
            .other_dims
            .iter()
            .map(|d| CellMasses::of(&self.kernels[*d]))
            .collect();
        let mut vals = scratch::f64s(nk);
        let mut partial: Vec<f64> = scratch::f64s(nk);
        let mut live: Vec<u32> = scratch::u32s(BLOCK);
        let mut xc = vec![0.0; cont.len()];
        // Dimensions summed for every kernel in a branch-free (vectorisable) pass.
        let head = cont.len().min(PASS_ONE_DIMS);
        let out = (0..n_points)
            .map(|i| {
                for (x, d) in xc.iter_mut().zip(&self.cont_dims) {
                    *x = xs[*d][i];
                }
                for c in &mut caches {
                    c.next_point();
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
                // The other kernels in blocks. The bar only rises as kernels
                // are visited, so every kernel of a block is held at least
                // to the bar at the block's start: the remaining continuous
                // dimensions are added for the block at once (for every
                // kernel where many are still live, as in a history TPE grew
                // around the optimum; else only for the live ones), and then
                // each kernel still live, in kernel order, meets the exact
                // bar of its turn and gets its discrete terms. Continuous
                // terms are at most 0, so a kernel's sum after them is below
                // a bar exactly when one of its partial sums was: the same
                // kernels count, with the same sums, as visiting them one at
                // a time.
                for block in (0..prior).step_by(BLOCK) {
                    let end = (block + BLOCK).min(prior);
                    let ps = &mut partial[block..end];
                    let n_live: usize = ps.iter().map(|p| usize::from(reaches(*p, bar))).sum();
                    if n_live == 0 {
                        continue;
                    }
                    let rest = xc.iter().zip(&cont).skip(head);
                    if n_live * DENSE >= ps.len() {
                        for (x, (mus, invs)) in rest {
                            for ((p, mu), inv) in
                                ps.iter_mut().zip(&mus[block..end]).zip(&invs[block..end])
                            {
                                let z = (x - mu) * inv;
                                *p -= 0.5 * z * z;
                            }
                        }
                        live_in(ps, block, bar, &mut live);
                    } else {
                        live_in(ps, block, bar, &mut live);
                        for (x, (mus, invs)) in rest {
                            let mut kept = 0;
                            for r in 0..live.len() {
                                let k = live[r] as usize;
                                let z = (x - mus[k]) * invs[k];
                                let a = partial[k] - 0.5 * z * z;
                                partial[k] = a;
                                live[kept] = k as u32;
                                kept += usize::from(reaches(a, bar));
                            }
                            live.truncate(kept);
                        }
                    }
                    for k in &live {
                        let k = *k as usize;
                        if partial[k] < bar {
                            continue;
                        }
                        if let Some(a) =
                            self.finish_discrete(k, partial[k], bar, xs, i, &mut caches)
                        {
                            vals.push(a);
                            if a > best {
                                best = a;
                                bar = best - LOG_NEGLIGIBLE;
                            }
                        }
                    }
                }
                log_sum_exp(&vals)
            })
            .collect();
        scratch::give_f64s(vals);
        scratch::give_f64s(partial);
        scratch::give_u32s(live);
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
        caches: &mut [CellMasses],
    ) -> Option<f64> {
        for (x, (mus, invs)) in xc.iter().zip(cont).skip(head) {
            let z = (x - mus[k]) * invs[k];
            a -= 0.5 * z * z;
            if a < bar {
                return None;
            }
        }
        self.finish_discrete(k, a, bar, xs, i, caches)
    }

    /// Adds kernel `k`'s discrete and categorical terms to `a`; `None` once
    /// it falls below `bar`.
    fn finish_discrete(
        &self,
        k: usize,
        mut a: f64,
        bar: f64,
        xs: &[Vec<f64>],
        i: usize,
        caches: &mut [CellMasses],
    ) -> Option<f64> {
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

/// What a build took into each kernel's constant (see
/// [`ParzenEstimator::with_order`]): per dimension, `None` for a
/// categorical one; and per kernel the log of its bandwidth product left
/// after the last rescale.
#[derive(Debug, Default)]
pub(super) struct BuildRecord {
    pub(super) dims: Vec<Option<DimRecord>>,
    pub(super) ln_scale: Vec<f64>,
}

/// The mixture weights of observations with unnormalised `obs_weights` and
/// the prior kernel (last), normalised to sum to 1.
pub(super) fn mixture_weights(obs_weights: &[f64], cfg: &TpeConfig) -> Vec<f64> {
    let n = obs_weights.len();
    let mut weights: Vec<f64> = scratch::f64s(n + 1);
    weights.extend_from_slice(obs_weights);
    weights.push(if n == 0 { 1.0 } else { cfg.prior_weight });
    let total: f64 = weights.iter().sum();
    for w in &mut weights {
        *w /= total;
    }
    weights
}

/// Whether a partial sum `p` is not below `bar`: the negation of the
/// `p < bar` that abandons a kernel, so a NaN stays live as it always has.
#[allow(clippy::neg_cmp_op_on_partial_ord)]
fn reaches(p: f64, bar: f64) -> bool {
    !(p < bar)
}

/// Sets `live` to the kernels (numbered from `first`) whose partial sums in
/// `partial` are not below `bar`, without a branch per kernel.
fn live_in(partial: &[f64], first: usize, bar: f64, live: &mut Vec<u32>) {
    live.clear();
    live.resize(partial.len(), 0);
    let mut n = 0;
    for (k, p) in partial.iter().enumerate() {
        live[n] = (first + k) as u32;
        n += usize::from(reaches(*p, bar));
    }
    live.truncate(n);
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
    use super::super::truncnorm::log_gauss_mass;
    use super::*;
    use crate::distribution::{CategoricalDistribution, FloatDistribution, IntDistribution};
    use crate::distribution::{Distribution, Support};
    use rand::{Rng, SeedableRng};
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

    /// The log density by its plain definition: the prior, then each kernel
    /// in order, its dimensions added one by one (continuous first, then the
    /// others, as `log_pdf` orders them) and checked against the bar after
    /// each. `log_pdf`'s passes must give exactly these bits.
    fn log_pdf_reference(pe: &ParzenEstimator, xs: &[Vec<f64>]) -> Vec<f64> {
        let n_points = xs.first().map_or(0, Vec::len);
        let nk = pe.consts.len();
        let dims: Vec<usize> = pe.cont_dims.iter().chain(&pe.other_dims).copied().collect();
        (0..n_points)
            .map(|i| {
                let mut vals = Vec::new();
                let mut best = f64::NEG_INFINITY;
                for k in std::iter::once(nk - 1).chain(0..nk - 1) {
                    let bar = best - LOG_NEGLIGIBLE;
                    let mut a = pe.consts[k];
                    let mut kept = true;
                    for d in &dims {
                        let x = xs[*d][i];
                        match &pe.kernels[*d] {
                            Kernels::Numeric {
                                mus,
                                inv_sigmas,
                                step: None,
                                ..
                            } => {
                                let z = (x - mus[k]) * inv_sigmas[k];
                                a -= 0.5 * z * z;
                            }
                            Kernels::Numeric {
                                pairs,
                                pair_of,
                                step: Some(s),
                                ..
                            } => {
                                let (mu, sigma) = pairs[pair_of[k] as usize];
                                a += log_gauss_mass(
                                    (x - s / 2.0 - mu) / sigma,
                                    (x + s / 2.0 - mu) / sigma,
                                );
                            }
                            ks => a += term(ks, k, x, &mut CellMasses::of(ks)),
                        }
                        if a < bar {
                            kept = false;
                            break;
                        }
                    }
                    if kept {
                        vals.push(a);
                        best = best.max(a);
                    }
                }
                log_sum_exp(&vals)
            })
            .collect()
    }

    #[test]
    fn log_pdf_matches_its_plain_definition_bit_for_bit() {
        let dists: Vec<Distribution> = vec![
            FloatDistribution::new(-10.0, 10.0).unwrap().into(),
            FloatDistribution::new(-10.0, 10.0).unwrap().into(),
            FloatDistribution::log(1e-5, 1e-1).unwrap().into(),
            IntDistribution::new(1, 100).unwrap().into(),
            FloatDistribution::new(0.0, 1.0).unwrap().into(),
            CategoricalDistribution::new(["a", "b", "c", "d"])
                .unwrap()
                .into(),
            FloatDistribution::stepped(0.0, 0.5, 0.05).unwrap().into(),
            FloatDistribution::new(-3.0, 3.0).unwrap().into(),
            FloatDistribution::new(-3.0, 3.0).unwrap().into(),
        ];
        let dims: Vec<Dim> = dists.iter().map(Dim::of).collect();
        let ranges: Vec<SampleRange> = dists
            .iter()
            .map(|d| SampleRange::of(d, &Support::Full))
            .collect();
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        // Up to eight dimensions, so blocks, the first pass's special cases
        // and its general case all run; observations clustered (as a study
        // TPE grew) or spread, from none to several blocks.
        for n_dims in [1, 2, 3, 4, 8, 9] {
            for n in [0, 1, 7, 300, 1100] {
                for spread in [0.02, 0.3] {
                    let obs: Vec<Vec<f64>> = dists[..n_dims]
                        .iter()
                        .map(|d| {
                            (0..n)
                                .map(|_| {
                                    let u: f64 = 0.5 + spread * (rng.random::<f64>() - 0.5);
                                    let x = match d {
                                        Distribution::Float(f) if f.is_log() => {
                                            (f.low().ln() + u * (f.high() / f.low()).ln()).exp()
                                        }
                                        Distribution::Float(f) => {
                                            f.low() + u * (f.high() - f.low())
                                        }
                                        Distribution::Int(f) => {
                                            f.low() as f64 + u * (f.high() - f.low()) as f64
                                        }
                                        Distribution::Categorical(c) => {
                                            (u * c.choices().len() as f64).floor()
                                        }
                                    };
                                    transform(d, d.snap(x))
                                })
                                .collect()
                        })
                        .collect();
                    let w: Vec<f64> = (0..n).map(|i| 1.0 + (i % 5) as f64).collect();
                    let pe = ParzenEstimator::new(&obs, &w, &dims[..n_dims], &cfg(false));
                    let mut points = pe.sample(&mut rng, 40, &ranges[..n_dims]);
                    let far = ParzenEstimator::new(
                        &vec![Vec::new(); n_dims],
                        &[],
                        &dims[..n_dims],
                        &cfg(false),
                    )
                    .sample(&mut rng, 10, &ranges[..n_dims]);
                    for (p, f) in points.iter_mut().zip(far) {
                        p.extend(f);
                    }
                    let got = pe.log_pdf(&points);
                    let want = log_pdf_reference(&pe, &points);
                    for (g, w) in got.iter().zip(&want) {
                        assert_eq!(
                            g.to_bits(),
                            w.to_bits(),
                            "{n_dims} dims, {n} observations, spread {spread}: {g} vs {w}"
                        );
                    }
                }
            }
        }
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
            let plain = ParzenEstimator::with_order(
                vec![xs.clone()],
                &w,
                &dims,
                &cfg(false),
                None,
                None,
                None,
            );
            let cached = ParzenEstimator::with_order(
                vec![xs.clone()],
                &w,
                &dims,
                &cfg(false),
                None,
                Some(&[norms]),
                None,
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
