//! The kernels of one dimension: neighbour-gap (or Scott) bandwidths with the
//! magic clip, step-aware truncated Gaussians, Optuna's categorical kernel,
//! the distinct (mu, sigma) pairs of discrete dimensions, one kernel's log
//! mass at a point, and one kernel's draw inside a sample range.

use super::config::{TpeBandwidth, TpeConfig};
use super::domain::{adapted, clip_sigma, SampleRange};
use super::scratch;
use super::truncnorm::{log_gauss_mass, sample_standard, LN_SQRT_2PI};
use rand::Rng;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Smallest bandwidth without the magic clip (Optuna's `EPS`).
pub(super) const EPS: f64 = 1e-12;
/// Beyond this many standard deviations the normal tail is below 1e-16.
pub(super) const FULL_MASS_Z: f64 = 8.3;

/// The kernels of one dimension.
#[derive(Debug, Clone)]
pub(super) enum Kernels {
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

/// Log cell masses of one discrete dimension's kernels, computed on first
/// use: per distinct `(mu, sigma)` pair at the current point, and across
/// points by the standardised cell ends (grid values repeat, so the same
/// cell, relative to a kernel, recurs for many pairs and points). A mass is
/// a function of the cell ends alone, so reusing it changes no bit.
#[derive(Debug, Default)]
pub(super) struct CellMasses {
    /// By pair at the current point; `NaN`: not computed yet.
    by_pair: Vec<f64>,
    /// By the bits of the standardised cell ends `(a, b)`.
    by_cell: HashMap<(u64, u64), f64, BuildHasherDefault<CellHasher>>,
}

impl CellMasses {
    /// Room for the pairs of `ks` (nothing for a categorical dimension).
    pub(super) fn of(ks: &Kernels) -> Self {
        let n = match ks {
            Kernels::Numeric { pairs, .. } => pairs.len(),
            Kernels::Categorical { .. } => 0,
        };
        CellMasses {
            by_pair: vec![f64::NAN; n],
            by_cell: HashMap::default(),
        }
    }

    /// Forgets the per-pair masses of the previous point.
    pub(super) fn next_point(&mut self) {
        self.by_pair.fill(f64::NAN);
    }
}

/// A multiply-rotate hash of the two `u64` words of a cell key (FxHash's
/// step): the keys are float bits, not attacker-chosen.
#[derive(Debug, Default)]
pub(super) struct CellHasher(u64);

impl Hasher for CellHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

/// Kernel `k`'s log mass at `x` in a discrete or categorical dimension.
pub(super) fn term(ks: &Kernels, k: usize, x: f64, masses: &mut CellMasses) -> f64 {
    match ks {
        Kernels::Numeric {
            step,
            pairs,
            pair_of,
            ..
        } => {
            let s = step.unwrap_or(0.0);
            let p = pair_of[k] as usize;
            if masses.by_pair[p].is_nan() {
                let (mu, sigma) = pairs[p];
                let (a, b) = ((x - s / 2.0 - mu) / sigma, (x + s / 2.0 - mu) / sigma);
                masses.by_pair[p] = *masses
                    .by_cell
                    .entry((a.to_bits(), b.to_bits()))
                    .or_insert_with(|| log_gauss_mass(a, b));
            }
            masses.by_pair[p]
        }
        Kernels::Categorical { obs, logs, .. } => match obs.get(k) {
            Some(c) if *c as usize == x as usize => logs[0],
            Some(_) => logs[1],
            None => logs[2],
        },
    }
}

/// What a numeric dimension's build takes into each kernel's constant, per
/// kernel (the prior last), for an owner that keeps the estimator (`kept`).
#[derive(Debug, Default)]
pub(super) struct DimRecord {
    /// Clamped bandwidths.
    pub(super) sigmas: Vec<f64>,
    /// Edge normalisers subtracted (0 where none).
    pub(super) norms: Vec<f64>,
    /// Logs of the bandwidth product taken out after this dimension (0 where none).
    pub(super) rescales: Vec<f64>,
}

/// Bandwidths and constants of a numeric dimension; `record`, when given,
/// receives its bandwidths and edge normalisers.
#[allow(clippy::too_many_arguments)]
pub(super) fn numeric(
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
    mut record: Option<&mut DimRecord>,
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
    let (min_sigma, max_sigma) = sigma_bounds(lo, hi, n, cfg);
    for s in &mut sigmas {
        *s = s.clamp(min_sigma, max_sigma);
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
        let known = log_norms.and_then(|l| l.get(k)).copied();
        let norm = edge_norm(*mu, *sigma, lo, hi, clip, known);
        if let Some(norm) = norm {
            *c -= norm;
        }
        if let Some(r) = record.as_mut() {
            r.norms.push(norm.unwrap_or(0.0));
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
    if let Some(r) = record {
        r.sigmas.extend_from_slice(&sigmas);
    }
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

/// The smallest and largest bandwidth of `n` observation kernels on the
/// (adapted) range `[lo, hi]`: the magic clip's `range / min(100, n + 2)`
/// (or [`EPS`] without it) and the range, never below the smallest.
pub(super) fn sigma_bounds(lo: f64, hi: f64, n: usize, cfg: &TpeConfig) -> (f64, f64) {
    let width = hi - lo;
    let min_sigma = if cfg.consider_magic_clip {
        width / (100.0f64).min(1.0 + (n + 1) as f64)
    } else {
        EPS
    };
    (min_sigma, width.max(min_sigma))
}

/// The log normaliser a kernel at `mu` with bandwidth `sigma` takes from
/// its constant: its log mass inside `[lo, hi]`, or `None` when it is well
/// inside and has all of it (no erfc). `known` is the observation store's
/// normaliser at the clip bandwidth `clip`, used when `sigma` is that.
pub(super) fn edge_norm(
    mu: f64,
    sigma: f64,
    lo: f64,
    hi: f64,
    clip: f64,
    known: Option<f64>,
) -> Option<f64> {
    let reach = FULL_MASS_Z * sigma;
    if mu - lo < reach || hi - mu < reach {
        let known = known.filter(|l| sigma == clip && !l.is_nan());
        Some(known.unwrap_or_else(|| log_gauss_mass((lo - mu) / sigma, (hi - mu) / sigma)))
    } else {
        None
    }
}

/// An observation's neighbour-gap bandwidth: the larger gap to its sorted
/// neighbours `left` and `right` (a range end where it has none).
pub(super) fn gap(left: f64, x: f64, right: f64) -> f64 {
    (x - left).max(right - x)
}

/// Takes the logarithm of a running bandwidth product `sc` out (returned,
/// for the kernel's constant) and restarts it at 1 once it leaves
/// `[1e-150, 1e150]`, so the product never under- or overflows.
pub(super) fn rescale(sc: &mut f64) -> Option<f64> {
    if (1e-150..=1e150).contains(sc) {
        None
    } else {
        let l = sc.ln();
        *sc = 1.0;
        Some(l)
    }
}

/// Optuna's categorical kernel probabilities for `n_kernels` kernels over
/// `nc` choices: `(p_match, p_other)` of an observation's row and the logs
/// of those two and of the prior's `1 / nc`.
pub(super) fn categorical_probs(
    n_kernels: usize,
    nc: usize,
    cfg: &TpeConfig,
) -> (f64, f64, [f64; 3]) {
    // Optuna: every choice gets prior_weight / n_kernels, the observed one 1
    // more, rows normalised. All observation rows share the two values.
    let base = cfg.prior_weight / n_kernels as f64;
    let row = base * nc as f64 + 1.0;
    let (p_match, p_other) = ((base + 1.0) / row, base / row);
    let uniform = 1.0 / nc as f64;
    (p_match, p_other, [p_match.ln(), p_other.ln(), uniform.ln()])
}

/// The distinct `(mu, sigma)` pairs of a discrete dimension's kernels and
/// each kernel's index into them. `order` sorts the observation kernels by
/// `mu`, so equal centres are adjacent and each run of them is searched
/// only among itself; the prior kernel (the last one) comes after them.
pub(super) fn distinct_pairs(
    mus: &[f64],
    sigmas: &[f64],
    order: &[u32],
) -> (Vec<(f64, f64)>, Vec<u32>) {
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
pub(super) fn gaps_in_order(
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
        sigmas[*o as usize] = gap(w[0], w[1], w[2]);
    }
    if !endpoints && m >= 2 {
        // The outermost use the gap to their inner neighbour.
        sigmas[order[0] as usize] = sv[2] - sv[1];
        sigmas[order[m - 1] as usize] = sv[m] - sv[m - 1];
    }
    scratch::give_f64s(sv);
}

#[cfg(test)]
pub(super) fn neighbour_gaps(xs: &[f64], lo: f64, hi: f64, endpoints: bool) -> Vec<f64> {
    let mut o: Vec<u32> = (0..xs.len() as u32).collect();
    o.sort_by(|a, b| xs[*a as usize].total_cmp(&xs[*b as usize]));
    let mut sigmas = Vec::new();
    gaps_in_order(xs, &o, lo, hi, endpoints, &mut sigmas);
    sigmas
}

/// Optuna's categorical kernels and their (zero) constants.
pub(super) fn categorical(xs: &[f64], nc: usize, cfg: &TpeConfig) -> Kernels {
    let (p_match, p_other, logs) = categorical_probs(xs.len() + 1, nc, cfg);
    Kernels::Categorical {
        n: nc,
        obs: xs.iter().map(|x| choice(*x, nc)).collect(),
        p_match,
        p_other,
        logs,
    }
}

/// An observed categorical value (modelled units) as a choice index below `nc`.
pub(super) fn choice(x: f64, nc: usize) -> u32 {
    (x as usize).min(nc - 1) as u32
}

/// One draw of kernel `k` of one dimension inside `range`.
pub(super) fn draw<R: Rng + ?Sized>(
    ks: &Kernels,
    k: usize,
    range: &SampleRange,
    rng: &mut R,
) -> f64 {
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
