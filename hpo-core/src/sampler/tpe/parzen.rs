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

use super::config::{TpeBandwidth, TpeConfig};
use super::scratch;
use super::truncnorm::{log_gauss_mass, sample_standard, LN_SQRT_2PI};
use crate::distribution::{Distribution, Support};
use crate::sampler::bounds;
use rand::Rng;

/// Smallest bandwidth without the magic clip (Optuna's `EPS`).
const EPS: f64 = 1e-12;
/// Beyond this many standard deviations the normal tail is below 1e-16.
const FULL_MASS_Z: f64 = 8.3;
/// A mixture term this many nats below the largest adds less than 1e-17.
const LOG_NEGLIGIBLE: f64 = 40.0;
/// Continuous dimensions evaluated for every kernel before any is abandoned.
/// Where the check happens does not change the result (a kernel's sum only
/// falls, so it is kept exactly when its full sum reaches the bar); three
/// measured faster than two or four on the 10-D overhead benchmark.
const PASS_ONE_DIMS: usize = 3;

/// One parameter's modelled domain, in transformed units.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Dim {
    /// A (possibly log-transformed) range; `step` makes it discrete.
    Numeric {
        /// Lower end of the transformed range.
        low: f64,
        /// Upper end of the transformed range.
        high: f64,
        /// Grid step, for stepped floats and non-log ints.
        step: Option<f64>,
    },
    /// `n` choices, by index.
    Categorical {
        /// Number of choices.
        n: usize,
    },
}

impl Dim {
    /// The modelled domain of `dist`.
    pub(crate) fn of(dist: &Distribution) -> Dim {
        match dist {
            Distribution::Float(d) if d.is_log() => Dim::Numeric {
                low: d.low().ln(),
                high: d.high().ln(),
                step: None,
            },
            Distribution::Float(d) => Dim::Numeric {
                low: d.low(),
                high: d.high(),
                step: d.step(),
            },
            Distribution::Int(d) if d.is_log() => Dim::Numeric {
                low: (d.low() as f64 - 0.5).ln(),
                high: (d.high() as f64 + 0.5).ln(),
                step: None,
            },
            Distribution::Int(d) => Dim::Numeric {
                low: d.low() as f64,
                high: d.high() as f64,
                step: Some(d.step() as f64),
            },
            Distribution::Categorical(d) => Dim::Categorical {
                n: d.choices().len(),
            },
        }
    }
}

/// The range kernels are truncated to: stepped dimensions reach half a step
/// beyond their ends.
fn adapted(low: f64, high: f64, step: Option<f64>) -> (f64, f64) {
    let s0 = step.unwrap_or(0.0);
    (low - s0 / 2.0, high + s0 / 2.0)
}

/// The magic clip's smallest bandwidth once there are 99 or more observations.
fn clip_sigma(lo: f64, hi: f64) -> f64 {
    (hi - lo) / 100.0
}

/// Log normaliser of a kernel at `y` (modelled units) with the clip
/// bandwidth: nearly every kernel of a long history has that bandwidth, so
/// the observation store computes this once per observation (`NaN` for
/// categoricals).
pub(crate) fn clipped_log_norm(dist: &Distribution, y: f64) -> f64 {
    match Dim::of(dist) {
        Dim::Numeric { low, high, step } => {
            let (lo, hi) = adapted(low, high, step);
            let sigma = clip_sigma(lo, hi);
            log_gauss_mass((lo - y) / sigma, (hi - y) / sigma)
        }
        Dim::Categorical { .. } => f64::NAN,
    }
}

/// An internal value of `dist` in modelled units.
pub(crate) fn transform(dist: &Distribution, x: f64) -> f64 {
    match dist {
        Distribution::Float(d) if d.is_log() => x.ln(),
        Distribution::Int(d) if d.is_log() => x.ln(),
        _ => x,
    }
}

/// A modelled value back to an internal value of `dist` inside `support`.
pub(crate) fn untransform(dist: &Distribution, support: &Support, y: f64) -> f64 {
    let (lo, hi) = bounds(dist, support);
    let x = match dist {
        Distribution::Float(d) if d.is_log() => y.exp(),
        Distribution::Int(d) if d.is_log() => y.exp().round(),
        Distribution::Categorical(_) => y.round(),
        _ => dist.snap(y),
    };
    let x = x.clamp(lo, hi);
    if dist.contains(x) {
        x
    } else {
        dist.snap(x).clamp(lo, hi)
    }
}

/// Where samples of one dimension may fall, in modelled units.
#[derive(Debug, Clone)]
pub(crate) enum SampleRange {
    /// Kernels are truncated to `[lo, hi]`; discrete draws are snapped to the
    /// grid `grid_low + k * step` and clamped to `[grid_lo, grid_hi]`.
    Numeric {
        /// Lower truncation point.
        lo: f64,
        /// Upper truncation point.
        hi: f64,
        /// Grid origin and step, for discrete dimensions.
        grid: Option<(f64, f64)>,
        /// Smallest allowed grid value.
        grid_lo: f64,
        /// Largest allowed grid value.
        grid_hi: f64,
    },
    /// Only the choices marked `true` (all when `None`).
    Categorical(Option<Vec<bool>>),
}

impl SampleRange {
    /// The sampling range of `dist` restricted to a normalised `support`.
    pub(crate) fn of(dist: &Distribution, support: &Support) -> SampleRange {
        let (lo, hi) = bounds(dist, support);
        match (Dim::of(dist), dist) {
            (Dim::Categorical { n }, _) => match support {
                Support::Choices(ix) => {
                    let mut mask = vec![false; n];
                    for i in ix.iter().filter(|i| **i < n) {
                        mask[*i] = true;
                    }
                    SampleRange::Categorical(Some(mask))
                }
                _ => SampleRange::Categorical(None),
            },
            (
                Dim::Numeric {
                    low, step: Some(s), ..
                },
                _,
            ) => SampleRange::Numeric {
                lo: lo - s / 2.0,
                hi: hi + s / 2.0,
                grid: Some((low, s)),
                grid_lo: lo,
                grid_hi: hi,
            },
            (Dim::Numeric { .. }, Distribution::Int(_)) => {
                // Log int: the rounding cells of lo..=hi.
                let (a, b) = ((lo - 0.5).ln(), (hi + 0.5).ln());
                SampleRange::Numeric {
                    lo: a,
                    hi: b,
                    grid: None,
                    grid_lo: a,
                    grid_hi: b,
                }
            }
            (Dim::Numeric { .. }, _) => {
                let (a, b) = (transform(dist, lo), transform(dist, hi));
                SampleRange::Numeric {
                    lo: a,
                    hi: b,
                    grid: None,
                    grid_lo: a,
                    grid_hi: b,
                }
            }
        }
    }
}

/// The kernels of one dimension.
#[derive(Debug, Clone)]
enum Kernels {
    Numeric {
        mus: Vec<f64>,
        inv_sigmas: Vec<f64>,
        step: Option<f64>,
        /// Distinct (mu, sigma) of a discrete dimension, and each kernel's index into them.
        pairs: Vec<(f64, f64)>,
        pair_of: Vec<u32>,
    },
    /// Kernel `k < obs.len()` gives `p_match` to choice `obs[k]` and
    /// `p_other` to every other choice; the last kernel (the prior) is uniform.
    Categorical {
        n: usize,
        obs: Vec<u32>,
        p_match: f64,
        p_other: f64,
        /// `ln` of `p_match`, `p_other` and `1 / n`.
        logs: [f64; 3],
    },
}

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

/// Kernel `k`'s log mass at `x` in a discrete or categorical dimension.
fn term(ks: &Kernels, k: usize, x: f64, cache: &mut [f64]) -> f64 {
    match ks {
        Kernels::Numeric {
            step,
            pairs,
            pair_of,
            ..
        } => {
            let s = step.unwrap_or(0.0);
            let p = pair_of[k] as usize;
            if cache[p].is_nan() {
                let (mu, sigma) = pairs[p];
                cache[p] = log_gauss_mass((x - s / 2.0 - mu) / sigma, (x + s / 2.0 - mu) / sigma);
            }
            cache[p]
        }
        Kernels::Categorical { obs, logs, .. } => match obs.get(k) {
            Some(c) if *c as usize == x as usize => logs[0],
            Some(_) => logs[1],
            None => logs[2],
        },
    }
}

/// Bandwidths and constants of a numeric dimension.
#[allow(clippy::too_many_arguments)]
fn numeric(
    mut xs: Vec<f64>,
    order: Option<&Vec<u32>>,
    log_norms: Option<&Vec<f64>>,
    low: f64,
    high: f64,
    step: Option<f64>,
    n_dims: usize,
    cfg: &TpeConfig,
    consts: &mut [f64],
    scale: &mut [f64],
) -> Kernels {
    let (lo, hi) = adapted(low, high, step);
    let width = hi - lo;
    let n = xs.len();
    let mut sigmas: Vec<f64> = scratch::f64s(n + 1);
    // Observation indices sorted by value: for neighbour gaps, and for
    // finding repeated (mu, sigma) pairs of discrete dimensions.
    let sorted_here;
    let order: &[u32] = match order {
        Some(o) => o,
        None => {
            let mut o: Vec<u32> = (0..n as u32).collect();
            o.sort_by(|a, b| xs[*a as usize].total_cmp(&xs[*b as usize]));
            sorted_here = o;
            &sorted_here
        }
    };
    match cfg.bandwidth {
        TpeBandwidth::Scott => {
            let sigma =
                cfg.sigma0_magnitude * (n.max(1) as f64).powf(-1.0 / (n_dims as f64 + 4.0)) * width;
            sigmas.resize(n, sigma);
        }
        _ => gaps_in_order(&xs, order, lo, hi, cfg.consider_endpoints, &mut sigmas),
    }
    let max_sigma = width;
    let min_sigma = if cfg.consider_magic_clip {
        width / (100.0f64).min(1.0 + (n + 1) as f64)
    } else {
        EPS
    };
    for s in &mut sigmas {
        *s = s.clamp(min_sigma, max_sigma.max(min_sigma));
    }
    let mut mus = {
        xs.reserve_exact(1);
        xs
    };
    mus.push(0.5 * (lo + hi));
    sigmas.push(width.max(EPS));
    let continuous = step.is_none();
    let clip = clip_sigma(lo, hi);
    for (k, ((c, sc), (mu, sigma))) in consts
        .iter_mut()
        .zip(scale.iter_mut())
        .zip(mus.iter().zip(&sigmas))
        .enumerate()
    {
        // Kernels well inside the range have all their mass: skip the erfc.
        let reach = FULL_MASS_Z * sigma;
        if mu - lo < reach || hi - mu < reach {
            let known = log_norms
                .and_then(|l| l.get(k))
                .copied()
                .filter(|l| *sigma == clip && !l.is_nan());
            *c -= known.unwrap_or_else(|| log_gauss_mass((lo - mu) / sigma, (hi - mu) / sigma));
        }
        if continuous {
            *c -= LN_SQRT_2PI;
            *sc *= sigma;
        }
    }
    // Discrete dimensions evaluate one cell mass per distinct (mu, sigma):
    // observations on a grid repeat, so there are far fewer than kernels.
    let (pairs, pair_of) = if continuous {
        (Vec::new(), Vec::new())
    } else {
        distinct_pairs(&mus, &sigmas, order)
    };
    // Keep only the inverse bandwidths (evaluation multiplies by them).
    for s in &mut sigmas {
        *s = 1.0 / *s;
    }
    Kernels::Numeric {
        mus,
        inv_sigmas: sigmas,
        step,
        pairs,
        pair_of,
    }
}

/// The distinct `(mu, sigma)` pairs of a discrete dimension's kernels and
/// each kernel's index into them. `order` sorts the observation kernels by
/// `mu`, so equal centres are adjacent and each run of them is searched
/// only among itself; the prior kernel (the last one) comes after them.
fn distinct_pairs(mus: &[f64], sigmas: &[f64], order: &[u32]) -> (Vec<(f64, f64)>, Vec<u32>) {
    let mut pairs: Vec<(f64, f64)> = Vec::new();
    let mut pair_of = scratch::u32s(mus.len());
    pair_of.resize(mus.len(), 0);
    // Pairs from this index on share the current run's centre.
    let mut run = 0;
    let prior = mus.len().saturating_sub(1);
    let ks = order
        .iter()
        .map(|k| *k as usize)
        .filter(|k| *k < prior)
        .chain((prior < mus.len()).then_some(prior));
    for k in ks {
        let (m, s) = (mus[k], sigmas[k]);
        if pairs.get(run).is_some_and(|p| p.0.to_bits() != m.to_bits()) {
            run = pairs.len();
        }
        let found = pairs[run.min(pairs.len())..]
            .iter()
            .position(|p| p.0.to_bits() == m.to_bits() && p.1.to_bits() == s.to_bits());
        pair_of[k] = match found {
            Some(i) => (run + i) as u32,
            None => {
                pairs.push((m, s));
                (pairs.len() - 1) as u32
            }
        };
    }
    (pairs, pair_of)
}

/// Optuna 5.0's bandwidths: for each observation, the larger gap to its
/// neighbours among the sorted observations and the range ends `lo`, `hi`;
/// without `endpoints`, the outermost use the gap to their inner neighbour.
/// `order` lists the observations' indices sorted by value.
fn gaps_in_order(
    xs: &[f64],
    order: &[u32],
    lo: f64,
    hi: f64,
    endpoints: bool,
    sigmas: &mut Vec<f64>,
) {
    let m = xs.len();
    sigmas.clear();
    sigmas.resize(m, 0.0);
    if m == 0 || order.len() != m {
        return;
    }
    // The sorted values between the range ends, read once in order.
    let mut sv: Vec<f64> = scratch::f64s(m + 2);
    sv.push(lo);
    sv.extend(order.iter().map(|o| xs[*o as usize]));
    sv.push(hi);
    for (w, o) in sv.windows(3).zip(order) {
        sigmas[*o as usize] = (w[1] - w[0]).max(w[2] - w[1]);
    }
    if !endpoints && m >= 2 {
        // The outermost use the gap to their inner neighbour.
        sigmas[order[0] as usize] = sv[2] - sv[1];
        sigmas[order[m - 1] as usize] = sv[m] - sv[m - 1];
    }
    scratch::give_f64s(sv);
}

#[cfg(test)]
fn neighbour_gaps(xs: &[f64], lo: f64, hi: f64, endpoints: bool) -> Vec<f64> {
    let mut o: Vec<u32> = (0..xs.len() as u32).collect();
    o.sort_by(|a, b| xs[*a as usize].total_cmp(&xs[*b as usize]));
    let mut sigmas = Vec::new();
    gaps_in_order(xs, &o, lo, hi, endpoints, &mut sigmas);
    sigmas
}

/// Optuna's categorical kernels and their (zero) constants.
fn categorical(xs: &[f64], nc: usize, cfg: &TpeConfig) -> Kernels {
    // Optuna: every choice gets prior_weight / n_kernels, the observed one 1
    // more, rows normalised. All observation rows share the two values.
    let nk = xs.len() + 1;
    let base = cfg.prior_weight / nk as f64;
    let row = base * nc as f64 + 1.0;
    let (p_match, p_other) = ((base + 1.0) / row, base / row);
    let uniform = 1.0 / nc as f64;
    Kernels::Categorical {
        n: nc,
        obs: xs
            .iter()
            .map(|x| (*x as usize).min(nc - 1) as u32)
            .collect(),
        p_match,
        p_other,
        logs: [p_match.ln(), p_other.ln(), uniform.ln()],
    }
}

/// One draw of kernel `k` of one dimension inside `range`.
fn draw<R: Rng + ?Sized>(ks: &Kernels, k: usize, range: &SampleRange, rng: &mut R) -> f64 {
    match (ks, range) {
        (
            Kernels::Numeric {
                mus, inv_sigmas, ..
            },
            SampleRange::Numeric {
                lo,
                hi,
                grid,
                grid_lo,
                grid_hi,
            },
        ) => {
            let (mu, sigma) = (mus[k], 1.0 / inv_sigmas[k]);
            let z = sample_standard((lo - mu) / sigma, (hi - mu) / sigma, rng.random::<f64>());
            let y = (mu + sigma * z).clamp(*lo, *hi);
            match grid {
                Some((g0, s)) => (g0 + ((y - g0) / s).round() * s).clamp(*grid_lo, *grid_hi),
                None => y.clamp(*grid_lo, *grid_hi),
            }
        }
        (
            Kernels::Categorical {
                n,
                obs,
                p_match,
                p_other,
                ..
            },
            SampleRange::Categorical(mask),
        ) => {
            let row: Vec<f64> = match obs.get(k) {
                Some(o) => (0..*n)
                    .map(|c| if c == *o as usize { *p_match } else { *p_other })
                    .collect(),
                None => vec![1.0 / *n as f64; *n],
            };
            let allowed = |c: usize| mask.as_ref().is_none_or(|m| m[c]);
            let total: f64 = (0..*n).filter(|c| allowed(*c)).map(|c| row[c]).sum();
            let options: Vec<usize> = (0..*n).filter(|c| allowed(*c)).collect();
            if total.is_nan() || total <= 0.0 {
                // Nothing left with mass: uniform over the allowed choices.
                let i = rng.random_range(0..options.len().max(1));
                return options.get(i).copied().unwrap_or(0) as f64;
            }
            let mut u = rng.random::<f64>() * total;
            for c in &options {
                u -= row[*c];
                if u < 0.0 {
                    return *c as f64;
                }
            }
            options.last().copied().unwrap_or(0) as f64
        }
        // Mismatched shapes cannot be built; fall back to the kernel centre.
        (Kernels::Numeric { mus, .. }, _) => mus[k],
        (Kernels::Categorical { .. }, _) => 0.0,
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
    use super::*;
    use crate::distribution::{CategoricalDistribution, FloatDistribution, IntDistribution};
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
