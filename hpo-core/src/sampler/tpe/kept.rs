//! The bad group's Parzen estimator, kept from one suggestion to the next.
//!
//! In a study that grows one trial at a time, the bad group of the next
//! suggestion is usually the last one's plus the trials that finished in
//! between, appended after it (kernels are in trial-number order). Rebuilding
//! its estimator costs a pass over every observation and dimension: gaps to
//! sorted neighbours, clamps, edge normalisers (erfc), the log of each
//! kernel's bandwidth product, the copy of every value. Kept, the estimator
//! only changes where the new kernels land:
//!
//! * a neighbour-gap bandwidth depends on the kernel's two sorted neighbours
//!   (and, for the outermost ones, on their inner neighbour), so only the new
//!   kernels and their neighbours get a new one; with it, their inverse
//!   bandwidth, edge normaliser, grid-cell pair and the log of their
//!   bandwidth product;
//! * the weights (Optuna's ramp depends on the count) and so every kernel's
//!   constant are recomputed, from the kept per-kernel terms, with the very
//!   operations of a full build in the same order (subtracting a kept 0 where
//!   a full build subtracts nothing leaves every bit as it is);
//! * a categorical dimension appends the new choices and recomputes its two
//!   probabilities.
//!
//! Anything else (the good group changed, the row table was rebuilt because
//! a trial finished out of order, the magic clip's smallest bandwidth moved
//! because the group is still small) drops it: the caller builds afresh, and
//! a kept one is built again (by that same fresh build, recording its terms)
//! once the good group has held for a suggestion. The result is the
//! estimator a full build gives, bit for bit; tests compare the two after
//! every step of a growing history.
//!
//! Only the neighbour-gap bandwidths are kept this way: Scott's bandwidth
//! depends on the count, so every kernel changes anyway.

use super::config::TpeConfig;
use super::domain::{adapted, clip_sigma, Dim};
use super::kernels::{categorical_probs, choice, edge_norm, gap, rescale, sigma_bounds, Kernels};
use super::observations::Rows;
use super::parzen::{mixture_weights, BuildRecord, ParzenEstimator};
use super::scratch;
use super::truncnorm::LN_SQRT_2PI;
use std::collections::HashMap;

/// The bad group's estimator over a row table's rows outside the good
/// group, with what it takes to extend it.
#[derive(Debug)]
pub(crate) struct KeptAbove {
    /// Rows of the table when it was last brought up to date.
    n_rows: usize,
    /// The good group it leaves out (trial numbers, ascending).
    below: Vec<u32>,
    /// The table row of each observation kernel, in kernel order.
    rows: Vec<u32>,
    /// Per dimension; `None` for a categorical one.
    dims: Vec<Option<KeptDim>>,
    /// Per kernel (the prior last): the log of its continuous bandwidth
    /// product after the last rescale, the last term of its constant.
    ln_scale: Vec<f64>,
    estimator: ParzenEstimator,
    /// Updates that appended kernels rather than rebuilding.
    appends: usize,
}

/// A row table's kept bad-group estimator, and what decides to keep one.
#[derive(Debug, Default)]
pub(crate) enum KeptSlot {
    /// Nothing seen yet (or the table was rebuilt).
    #[default]
    Empty,
    /// The good group of the last suggestion, whose estimator was built
    /// afresh by the caller.
    Seen(Vec<u32>),
    /// An estimator kept across suggestions.
    Kept(Box<KeptAbove>),
}

impl KeptSlot {
    /// The bad group's estimator over the rows of `rows` outside `below`
    /// (trial numbers, ascending), kept and brought up to date; `None` when
    /// the caller should build it afresh.
    ///
    /// A kept estimator is built (from `gather`: the rows outside `below` as
    /// a fresh build gathers them) only when the good group is the one of
    /// the previous suggestion: building one costs a little more than a
    /// fresh build and pays off over the appends that follow, which a good
    /// group that changes at every suggestion (each proposal beating a
    /// random history, say) never reaches.
    pub(crate) fn estimator(
        &mut self,
        rows: &Rows,
        below: &[u32],
        dims: &[Dim],
        cfg: &TpeConfig,
        gather: impl FnOnce() -> Gathered,
    ) -> Option<&ParzenEstimator> {
        *self = match std::mem::take(self) {
            KeptSlot::Kept(mut kept) => {
                if kept.update(rows, below, cfg) {
                    KeptSlot::Kept(kept)
                } else {
                    drop(kept);
                    KeptSlot::Seen(below.to_vec())
                }
            }
            KeptSlot::Seen(previous) if previous == below => {
                KeptSlot::Kept(Box::new(KeptAbove::build(rows, below, dims, cfg, gather())))
            }
            _ => KeptSlot::Seen(below.to_vec()),
        };
        match self {
            KeptSlot::Kept(kept) => Some(&kept.estimator),
            _ => None,
        }
    }

    /// How many updates appended kernels to the kept estimator since it was built.
    #[cfg(test)]
    pub(crate) fn appends(&self) -> usize {
        match self {
            KeptSlot::Kept(kept) => kept.appends,
            _ => 0,
        }
    }
}

/// Gathered observations: values by dimension and kernel, each dimension's
/// kernels sorted by value, log normalisers by dimension and kernel.
pub(crate) type Gathered = (Vec<Vec<f64>>, Vec<Vec<u32>>, Vec<Vec<f64>>);

impl Drop for KeptAbove {
    /// The per-kernel arrays go back to the thread's scratch pool.
    fn drop(&mut self) {
        scratch::give_u32s(std::mem::take(&mut self.rows));
        scratch::give_f64s(std::mem::take(&mut self.ln_scale));
    }
}

/// What a numeric dimension keeps per kernel (the prior last).
#[derive(Debug)]
struct KeptDim {
    /// The adapted range, the clip bandwidth and the clamp.
    lo: f64,
    hi: f64,
    clip: f64,
    min_sigma: f64,
    max_sigma: f64,
    continuous: bool,
    /// Observation kernels sorted by (value, kernel index).
    sorted: Vec<u32>,
    /// Clamped bandwidths.
    sigmas: Vec<f64>,
    /// Edge normaliser taken from the constant (0 where none).
    norms: Vec<f64>,
    /// Log of the bandwidth product taken out after this dimension (0 where none).
    rescales: Vec<f64>,
    /// Kernels with a non-zero `rescales` entry.
    n_rescales: usize,
    /// Index of each distinct `(mu, sigma)` bit pattern among the kernels'
    /// pairs (discrete dimensions).
    pair_index: HashMap<(u64, u64), u32>,
}

impl KeptAbove {
    /// A full build over the rows outside `below` (gathered in `gathered`):
    /// the estimator a fresh build gives ([`ParzenEstimator::with_order`]
    /// on the same data), with what went into its constants recorded.
    fn build(
        rows: &Rows,
        below: &[u32],
        dims: &[Dim],
        cfg: &TpeConfig,
        gathered: Gathered,
    ) -> KeptAbove {
        let (values, mut orders, norms) = gathered;
        let n = values.first().map_or(0, Vec::len);
        // The good group's rows (few), then every other row in order.
        let mut skip: Vec<usize> = below
            .iter()
            .filter_map(|b| rows.numbers.binary_search(b).ok())
            .collect();
        skip.sort_unstable();
        let mut kernel_rows = scratch::u32s(n);
        let mut from = 0;
        for r in skip.iter().copied().chain([rows.numbers.len()]) {
            kernel_rows.extend(from as u32..r as u32);
            from = r + 1;
        }
        let mut record = BuildRecord::default();
        let mut estimator = ParzenEstimator::with_order(
            values,
            &cfg.weights.weights(n),
            dims,
            cfg,
            Some(&orders),
            Some(&norms),
            Some(&mut record),
        );
        norms.into_iter().for_each(scratch::give_f64s);
        let (_, _, kernels) = estimator.parts_mut();
        let kept_dims = dims
            .iter()
            .zip(std::mem::take(&mut record.dims))
            .zip(kernels.iter())
            .zip(orders.iter_mut())
            .map(|(((dim, rec), ks), order)| match (dim, rec, ks) {
                (Dim::Numeric { low, high, step }, Some(rec), Kernels::Numeric { pairs, .. }) => {
                    let (lo, hi) = adapted(*low, *high, *step);
                    let (min_sigma, max_sigma) = sigma_bounds(lo, hi, n, cfg);
                    Some(KeptDim {
                        lo,
                        hi,
                        clip: clip_sigma(lo, hi),
                        min_sigma,
                        max_sigma,
                        continuous: step.is_none(),
                        sorted: std::mem::take(order),
                        n_rescales: rec.rescales.iter().filter(|r| **r != 0.0).count(),
                        sigmas: rec.sigmas,
                        norms: rec.norms,
                        rescales: rec.rescales,
                        pair_index: pairs
                            .iter()
                            .enumerate()
                            .map(|(i, (m, s))| ((m.to_bits(), s.to_bits()), i as u32))
                            .collect(),
                    })
                }
                _ => None,
            })
            .collect();
        orders.into_iter().for_each(scratch::give_u32s);
        KeptAbove {
            n_rows: rows.numbers.len(),
            below: below.to_vec(),
            rows: kernel_rows,
            dims: kept_dims,
            ln_scale: std::mem::take(&mut record.ln_scale),
            estimator,
            appends: 0,
        }
    }

    /// Appends the rows added to the table since the last call, if that is
    /// all that changed; `false` when a full build is needed (the kept
    /// state is then dropped).
    fn update(&mut self, rows: &Rows, below: &[u32], cfg: &TpeConfig) -> bool {
        if rows.numbers.len() < self.n_rows || below != self.below.as_slice() {
            return false;
        }
        let new: Vec<u32> = (self.n_rows as u32..rows.numbers.len() as u32)
            .filter(|r| below.binary_search(&rows.numbers[*r as usize]).is_err())
            .collect();
        let old_n = self.rows.len();
        let n = old_n + new.len();
        if self
            .dims
            .iter()
            .flatten()
            .any(|kd| sigma_bounds(kd.lo, kd.hi, n, cfg).0.to_bits() != kd.min_sigma.to_bits())
        {
            return false;
        }
        self.n_rows = rows.numbers.len();
        if new.is_empty() {
            return true;
        }
        self.rows.extend_from_slice(&new);
        let mut dirty: Vec<usize> = (old_n..n).collect();
        let (_, _, kernels) = self.estimator.parts_mut();
        for (d, (kd, ks)) in self.dims.iter_mut().zip(kernels.iter_mut()).enumerate() {
            let values = &rows.values[d];
            match (kd, ks) {
                (
                    Some(kd),
                    Kernels::Numeric {
                        mus,
                        inv_sigmas,
                        pairs,
                        pair_of,
                        ..
                    },
                ) => {
                    // The prior moves to the end, after the new kernels.
                    let prior = (
                        mus.pop().unwrap_or(0.0),
                        inv_sigmas.pop().unwrap_or(0.0),
                        pair_of.pop().unwrap_or(0),
                        kd.sigmas.pop().unwrap_or(0.0),
                        kd.norms.pop().unwrap_or(0.0),
                        kd.rescales.pop().unwrap_or(0.0),
                    );
                    for r in &new {
                        let v = values[*r as usize];
                        // Ties go after the kernels already there (smaller numbers).
                        let at = kd
                            .sorted
                            .partition_point(|j| mus[*j as usize].total_cmp(&v).is_le());
                        kd.sorted.insert(at, mus.len() as u32);
                        mus.push(v);
                    }
                    inv_sigmas.resize(n, 0.0);
                    if !kd.continuous {
                        pair_of.resize(n, 0);
                        pair_of.push(prior.2);
                    }
                    kd.sigmas.resize(n, f64::NAN);
                    kd.norms.resize(n, 0.0);
                    kd.rescales.resize(n, 0.0);
                    mus.push(prior.0);
                    inv_sigmas.push(prior.1);
                    kd.sigmas.push(prior.3);
                    kd.norms.push(prior.4);
                    kd.rescales.push(prior.5);
                    // New bandwidths for the new kernels and their sorted
                    // neighbours: a gap depends on the two neighbours only,
                    // and an outermost kernel's (its inner neighbour's gap)
                    // changes only when a kernel lands next to it.
                    let mut at: Vec<usize> = Vec::with_capacity(3 * new.len());
                    for k in old_n..n {
                        let key = (mus[k], k as u32);
                        let p = kd.sorted.partition_point(|j| {
                            mus[*j as usize]
                                .total_cmp(&key.0)
                                .then(j.cmp(&key.1))
                                .is_lt()
                        });
                        at.extend([p.saturating_sub(1), p, p + 1]);
                    }
                    at.retain(|p| *p < n);
                    at.sort_unstable();
                    at.dedup();
                    for p in at {
                        let k = kd.sorted[p] as usize;
                        let s = kd.gap_at(p, mus, cfg.consider_endpoints);
                        if k >= old_n || s.to_bits() != kd.sigmas[k].to_bits() {
                            let known = self.rows.get(k).map(|r| rows.norms[d][*r as usize]);
                            kd.set_kernel(k, s, mus, known, inv_sigmas);
                            if !kd.continuous {
                                pair_of[k] = kd.pair(mus[k], s, pairs);
                            }
                            dirty.push(k);
                        }
                    }
                }
                (
                    None,
                    Kernels::Categorical {
                        n: nc,
                        obs,
                        p_match,
                        p_other,
                        logs,
                    },
                ) => {
                    obs.extend(new.iter().map(|r| choice(values[*r as usize], *nc)));
                    (*p_match, *p_other, *logs) = categorical_probs(n + 1, *nc, cfg);
                }
                // Kinds never change: a kept numeric dimension holds numeric kernels.
                _ => return false,
            }
        }
        // The prior moved from `old_n` to `n`.
        let prior_scale = self.ln_scale.pop().unwrap_or(0.0);
        self.ln_scale.resize(n, 0.0);
        self.ln_scale.push(prior_scale);
        dirty.sort_unstable();
        dirty.dedup();
        for k in dirty {
            self.rescale_kernel(k);
        }
        self.set_constants(cfg);
        self.appends += 1;
        true
    }

    /// Kernel `k`'s rescales across dimensions and its final log scale, from
    /// its bandwidths, as a full build accumulates them.
    fn rescale_kernel(&mut self, k: usize) {
        let mut sc = 1.0;
        for kd in self.dims.iter_mut().flatten() {
            if kd.continuous {
                sc *= kd.sigmas[k];
            }
            let r = rescale(&mut sc).unwrap_or(0.0);
            kd.n_rescales -= usize::from(kd.rescales[k] != 0.0);
            kd.n_rescales += usize::from(r != 0.0);
            kd.rescales[k] = r;
        }
        self.ln_scale[k] = sc.ln();
    }

    /// The weights and every kernel's constant: `ln(weight)`, then per
    /// numeric dimension the edge normaliser, `ln sqrt(2 pi)` for a
    /// continuous one and any rescale, then the final log scale, in the
    /// order a full build subtracts them.
    fn set_constants(&mut self, cfg: &TpeConfig) {
        let n = self.rows.len();
        let weights = mixture_weights(&cfg.weights.weights(n), cfg);
        let (w, consts, _) = self.estimator.parts_mut();
        consts.clear();
        consts.extend(weights.iter().map(|w| w.ln()));
        scratch::give_f64s(std::mem::replace(w, weights));
        for kd in self.dims.iter().flatten() {
            match (kd.continuous, kd.n_rescales > 0) {
                (true, false) => {
                    for (c, e) in consts.iter_mut().zip(&kd.norms) {
                        *c = *c - e - LN_SQRT_2PI;
                    }
                }
                (true, true) => {
                    for ((c, e), r) in consts.iter_mut().zip(&kd.norms).zip(&kd.rescales) {
                        *c = *c - e - LN_SQRT_2PI - r;
                    }
                }
                (false, _) => {
                    for ((c, e), r) in consts.iter_mut().zip(&kd.norms).zip(&kd.rescales) {
                        *c = *c - e - r;
                    }
                }
            }
        }
        for (c, l) in consts.iter_mut().zip(&self.ln_scale) {
            *c -= l;
        }
    }
}

impl Drop for KeptDim {
    /// The per-kernel arrays go back to the thread's scratch pool.
    fn drop(&mut self) {
        scratch::give_u32s(std::mem::take(&mut self.sorted));
        for v in [&mut self.sigmas, &mut self.norms, &mut self.rescales] {
            scratch::give_f64s(std::mem::take(v));
        }
    }
}

impl KeptDim {
    /// The clamped neighbour-gap bandwidth of the kernel at sorted position
    /// `p`, as a full build computes it.
    fn gap_at(&self, p: usize, mus: &[f64], endpoints: bool) -> f64 {
        let m = self.sorted.len();
        let x = |q: usize| mus[self.sorted[q] as usize];
        let raw = if !endpoints && m >= 2 && p == 0 {
            x(1) - x(0)
        } else if !endpoints && m >= 2 && p == m - 1 {
            x(m - 1) - x(m - 2)
        } else {
            let left = if p == 0 { self.lo } else { x(p - 1) };
            let right = if p + 1 == m { self.hi } else { x(p + 1) };
            gap(left, x(p), right)
        };
        raw.clamp(self.min_sigma, self.max_sigma)
    }

    /// Gives kernel `k` the bandwidth `sigma`: its inverse and its edge
    /// normaliser (`known`: the store's at the clip bandwidth).
    fn set_kernel(
        &mut self,
        k: usize,
        sigma: f64,
        mus: &[f64],
        known: Option<f64>,
        inv_sigmas: &mut [f64],
    ) {
        self.sigmas[k] = sigma;
        inv_sigmas[k] = 1.0 / sigma;
        self.norms[k] = edge_norm(mus[k], sigma, self.lo, self.hi, self.clip, known).unwrap_or(0.0);
    }

    /// The index of the grid pair `(mu, sigma)` in `pairs`, added if new.
    fn pair(&mut self, mu: f64, sigma: f64, pairs: &mut Vec<(f64, f64)>) -> u32 {
        let next = pairs.len() as u32;
        let i = *self
            .pair_index
            .entry((mu.to_bits(), sigma.to_bits()))
            .or_insert(next);
        if i == next {
            pairs.push((mu, sigma));
        }
        i
    }
}
