//! The TPE sampler: split, model, propose, pick.

use super::config::{TpeBandwidth, TpeConfig};
use super::domain::{transform, untransform, Dim, SampleRange};
use super::kept::Gathered;
use super::observations::{Rows, StudyObservations};
use super::parzen::ParzenEstimator;
use super::scratch;
use crate::distribution::{Distribution, Support};
use crate::error::Result;
use crate::sampler::stream::{os_seed, trial_rng};
use crate::sampler::{sample_uniform, RelativeSample, Sampler, SamplerConfig};
use crate::trial::{FrozenTrial, TrialState};
use crate::view::StudyView;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// Fewest bad-group kernels for which the bad group's estimator is kept
/// across suggestions (below it a fresh build is cheap, and the magic clip's
/// smallest bandwidth, which depends on the count, still moves).
const KEEP_FROM: usize = 128;

/// Tree-structured Parzen Estimator sampler (Optuna 5.0's `TPESampler`).
///
/// After [`TpeConfig::n_startup_trials`] random trials, each suggestion
/// splits the finished trials into a good group (the best
/// `min(ceil(0.1 n), 25)`) and the rest, fits a Parzen estimator to each,
/// draws [`TpeConfig::n_ei_candidates`] candidates from the good one and
/// returns the candidate with the largest density ratio good / bad.
///
/// * **Multivariate** (default): the relative search space is modelled
///   jointly; with **group decomposition** (default) parameters that occur in
///   different sets of trials (conditional spaces) are modelled in separate
///   groups. Parameters outside the relative space are sampled one at a time.
/// * **Constant liar** (default): other RUNNING trials count as bad
///   observations, so parallel workers do not all propose the same point.
/// * **Constraints**: trials that ran out of memory or were infeasible are
///   always bad observations, so their region is avoided.
/// * **Narrowed supports**: candidates are drawn inside the support a
///   constraint allows; densities stay those of the declared distribution.
///
/// Observations are kept per study (by name) and updated incrementally; the
/// sampler can be shared by threads and studies.
///
/// The defaults ([`TpeConfig::default`]) draw more candidates and weigh the
/// prior less than Optuna, which wins on the benchmark suite;
/// [`TpeConfig::optuna`] reproduces Optuna 5.0's `TPESampler()` settings.
///
/// ```
/// use hpo_core::{Direction, Study, TpeConfig, TpeSampler};
///
/// # fn main() -> hpo_core::Result<()> {
/// let sampler = TpeSampler::with_config(TpeConfig { n_startup_trials: 5, ..TpeConfig::seeded(7) })?;
/// let study = Study::builder().direction(Direction::Minimize).sampler(sampler).build()?;
/// study.optimize(30, |trial| {
///     let x = trial.suggest_float("x", -5.0, 5.0)?;
///     let act = trial.suggest_categorical("act", &["relu", "gelu"])?;
///     Ok((x - 1.0).powi(2) + if act == "gelu" { 0.0 } else { 0.5 })
/// })?;
/// assert!(study.best_value()? < 1.0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TpeSampler {
    config: TpeConfig,
    /// The configured seed, or one drawn from the OS at construction; every
    /// draw comes from a stream derived from it and the trial's number.
    seed: u64,
    studies: Mutex<HashMap<String, StudyObservations>>,
}

impl Default for TpeSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl TpeSampler {
    /// A sampler with the default settings ([`TpeConfig::default`], Optuna
    /// 5.0's `TPESampler()` settings since issue 37; [`TpeConfig`] says why),
    /// seeded from the operating system.
    pub fn new() -> Self {
        Self::build(TpeConfig::default())
    }

    /// A reproducible sampler with the default settings (see [`TpeSampler::new`]).
    pub fn seeded(seed: u64) -> Self {
        Self::build(TpeConfig::seeded(seed))
    }

    /// A sampler with the given settings, which are checked first.
    pub fn with_config(config: TpeConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self::build(config))
    }

    fn build(config: TpeConfig) -> Self {
        TpeSampler {
            seed: config.seed.unwrap_or_else(os_seed),
            config,
            studies: Mutex::new(HashMap::new()),
        }
    }

    /// The settings.
    pub fn config(&self) -> &TpeConfig {
        &self.config
    }

    /// Proposes joint values for `space` (name, declared distribution, support).
    fn sample_joint(
        &self,
        obs: &mut StudyObservations,
        members: &[u32],
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        space: &[(&str, &Distribution, &Support)],
        rng: &mut ChaCha8Rng,
    ) -> Vec<f64> {
        let cfg = &self.config;
        let dims: Vec<Dim> = space.iter().map(|(_, d, _)| Dim::of(d)).collect();
        let key: Vec<(&str, &Distribution)> = space.iter().map(|(n, d, _)| (*n, *d)).collect();
        let rows_at = obs.update_rows(&key);
        let n_below = cfg.gamma(members.len(), study.directions().len());
        let (below, above) = obs.split(members, n_below, study.directions().len());
        let liars = if cfg.constant_liar {
            running(study, obs.first_unsettled(study), trial, space)
        } else {
            Vec::new()
        };
        // The bad group's estimator is kept across suggestions (`kept`) when
        // it is the whole study's finished trials outside the good group;
        // running trials, a filtered view, Scott's bandwidths (which all
        // change with the count) and small groups build it afresh.
        let kept_rows = obs.rows(rows_at).filter(|rows| {
            liars.is_empty()
                && members.len() == obs.n_members()
                && cfg.bandwidth == TpeBandwidth::NeighbourGap
                && above.len() >= KEEP_FROM
                && rows.numbers.len() >= KEEP_FROM + below.len()
        });
        let kept_na = kept_rows.map(|rows| {
            let in_rows = below
                .iter()
                .filter(|b| rows.numbers.binary_search(b).is_ok())
                .count();
            rows.numbers.len() - in_rows
        });
        let (pe_below, fresh_above) = {
            let obs = &*obs;
            let columns: Vec<ColumnRef<'_>> = space
                .iter()
                .map(|(n, d, _)| (obs.column(n, d), obs.sorted(n, d), obs.log_norms(n, d)))
                .collect();
            let build = |gathered| fresh(gathered, &dims, cfg);
            let pe_below = build(gather(&columns, obs.n_numbers(), &below, &[])).0;
            let fresh_above = match (kept_na, obs.rows(rows_at)) {
                (Some(_), _) => None,
                (None, Some(rows)) => {
                    Some(build(gather_rows(rows, obs.n_numbers(), &above, &liars)))
                }
                (None, None) => Some(build(gather(&columns, obs.n_numbers(), &above, &liars))),
            };
            (pe_below, fresh_above)
        };
        let n_numbers = obs.n_numbers();
        let na = fresh_above
            .as_ref()
            .map_or(kept_na.unwrap_or(0), |(_, n)| *n);
        let ranges: Vec<SampleRange> = space
            .iter()
            .map(|(_, d, s)| SampleRange::of(d, s))
            .collect();
        let candidates = pe_below.sample(rng, cfg.candidates(na + 1), &ranges);
        let lb = pe_below.log_pdf(&candidates);
        let la = match (fresh_above, obs.rows_mut(rows_at)) {
            (Some((pe, _)), _) => pe.log_pdf(&candidates),
            (None, Some(rows)) => {
                let mut slot = std::mem::take(&mut rows.kept);
                let gather = || gather_rows(rows, n_numbers, &above, &[]);
                let la = match slot.estimator(rows, &below, &dims, cfg, gather) {
                    Some(pe) => pe.log_pdf(&candidates),
                    None => fresh(gather(), &dims, cfg).0.log_pdf(&candidates),
                };
                rows.kept = slot;
                la
            }
            // The kept path is taken only where the row table exists.
            (None, None) => vec![0.0; lb.len()],
        };
        let mut best = 0;
        let mut best_score = f64::NEG_INFINITY;
        for (i, (b, a)) in lb.iter().zip(&la).enumerate() {
            let score = b - a;
            if score > best_score {
                best = i;
                best_score = score;
            }
        }
        space
            .iter()
            .zip(&candidates)
            .map(|((_, d, s), c)| untransform(d, s, c[best]))
            .collect()
    }
}

/// An estimator built afresh from gathered observations, and their count.
fn fresh((x, order, norms): Gathered, dims: &[Dim], cfg: &TpeConfig) -> (ParzenEstimator, usize) {
    let n = x.first().map_or(0, Vec::len);
    let pe = ParzenEstimator::with_order(
        x,
        &cfg.weights.weights(n),
        dims,
        cfg,
        Some(&order),
        Some(&norms),
        None,
    );
    norms.into_iter().for_each(scratch::give_f64s);
    order.into_iter().for_each(scratch::give_u32s);
    (pe, n)
}

/// One dimension's stored observations: values by trial number,
/// `(value, number)` sorted, and clip-bandwidth log normalisers by number.
type ColumnRef<'a> = (&'a [f64], &'a [(f64, u32)], &'a [f64]);

/// Observations (modelled units, `out[d][k]`) of the trials `numbers` that
/// have every column, in number order, followed by the `extra` rows (the
/// constant liar's running trials); and per dimension the kernel indices
/// sorted by value, taken from the stored sorted columns in linear time.
fn gather(
    columns: &[ColumnRef<'_>],
    n_numbers: usize,
    numbers: &[u32],
    extra: &[(u64, Vec<f64>)],
) -> Gathered {
    // One spare slot per dimension for the prior kernel the estimator appends.
    let cap = numbers.len() + extra.len() + 1;
    let mut out: Vec<Vec<f64>> = (0..columns.len())
        .map(|_| Vec::with_capacity(cap))
        .collect();
    let mut norms: Vec<Vec<f64>> = (0..columns.len())
        .map(|_| Vec::with_capacity(cap))
        .collect();
    let at = |c: &[f64], n: u32| c.get(n as usize).copied().unwrap_or(f64::NAN);
    let mut kernel_of = vec![u32::MAX; n_numbers];
    let mut k = 0u32;
    for n in numbers {
        if columns.iter().all(|(c, _, _)| !at(c, *n).is_nan()) {
            for ((o, l), (c, _, ln)) in out.iter_mut().zip(norms.iter_mut()).zip(columns) {
                o.push(at(c, *n));
                l.push(at(ln, *n));
            }
            if let Some(slot) = kernel_of.get_mut(*n as usize) {
                *slot = k;
            }
            k += 1;
        }
    }
    for (_, row) in extra {
        for ((o, l), v) in out.iter_mut().zip(norms.iter_mut()).zip(row) {
            o.push(*v);
            l.push(f64::NAN);
        }
    }
    let orders = columns
        .iter()
        .zip(&out)
        .map(|((_, sorted, _), xs)| {
            let mut order: Vec<u32> = if (k as usize) * 16 < sorted.len() {
                // A few trials (the good group): sorting them beats a pass over all.
                let mut o: Vec<u32> = (0..k).collect();
                o.sort_by(|a, b| xs[*a as usize].total_cmp(&xs[*b as usize]));
                o
            } else {
                sorted
                    .iter()
                    .filter_map(|(_, n)| {
                        kernel_of
                            .get(*n as usize)
                            .copied()
                            .filter(|k| *k != u32::MAX)
                    })
                    .collect()
            };
            for e in k..(k + extra.len() as u32) {
                let v = xs[e as usize];
                let at = order.partition_point(|j| xs[*j as usize] <= v);
                order.insert(at, e);
            }
            order
        })
        .collect();
    (out, orders, norms)
}

/// As [`gather`], from a joint space's row table: one sequential pass per
/// dimension copies the rows of `numbers` (typically all but a few) and
/// keeps the stored order minus the rows left out.
fn gather_rows(
    rows: &Rows,
    n_numbers: usize,
    numbers: &[u32],
    extra: &[(u64, Vec<f64>)],
) -> Gathered {
    let mut wanted = vec![false; n_numbers];
    for n in numbers {
        if let Some(w) = wanted.get_mut(*n as usize) {
            *w = true;
        }
    }
    // New index of each kept row (u32::MAX: left out).
    let mut k = 0u32;
    let mut new_index: Vec<u32> = scratch::u32s(rows.numbers.len());
    new_index.extend(rows.numbers.iter().map(|n| {
        if wanted.get(*n as usize).copied().unwrap_or(false) {
            k += 1;
            k - 1
        } else {
            u32::MAX
        }
    }));
    let cap = k as usize + extra.len() + 1;
    // The kept rows as runs `[start, end)`: usually a few rows are left out,
    // so each column is copied in a few slices.
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut start = None;
    for (r, i) in new_index.iter().enumerate() {
        match (start, *i != u32::MAX) {
            (None, true) => start = Some(r),
            (Some(s), false) => {
                runs.push((s, r));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        runs.push((s, new_index.len()));
    }
    let pick = |src: &[f64], tail: &mut dyn Iterator<Item = f64>| {
        let mut o = scratch::f64s(cap);
        for (a, b) in &runs {
            o.extend_from_slice(src.get(*a..*b).unwrap_or(&[]));
        }
        o.extend(tail);
        o
    };
    let out: Vec<Vec<f64>> = rows
        .values
        .iter()
        .enumerate()
        .map(|(d, v)| {
            pick(
                v,
                &mut extra
                    .iter()
                    .map(|(_, row)| row.get(d).copied().unwrap_or(f64::NAN)),
            )
        })
        .collect();
    let norms: Vec<Vec<f64>> = rows
        .norms
        .iter()
        .map(|v| pick(v, &mut extra.iter().map(|_| f64::NAN)))
        .collect();
    let orders = rows
        .order
        .iter()
        .zip(&out)
        .map(|(sorted, xs)| {
            let mut order: Vec<u32> = scratch::u32s(cap);
            order.extend(
                sorted
                    .iter()
                    .map(|r| new_index.get(*r as usize).copied().unwrap_or(u32::MAX))
                    .filter(|i| *i != u32::MAX),
            );
            for e in k..(k + extra.len() as u32) {
                let v = xs[e as usize];
                let at = order.partition_point(|j| xs[*j as usize] <= v);
                order.insert(at, e);
            }
            order
        })
        .collect();
    scratch::give_u32s(new_index);
    (out, orders, norms)
}

/// Other RUNNING trials that already have every parameter of `space` (the
/// constant liar's fake bad observations), by number, looking only from
/// index `from` of the study's trials (those before it are finished). They are appended after
/// the finished bad observations (they are usually the newest trials, and
/// Optuna's weights are flat for the newest 25).
fn running(
    study: &StudyView<'_>,
    from: usize,
    trial: &FrozenTrial,
    space: &[(&str, &Distribution, &Support)],
) -> Vec<(u64, Vec<f64>)> {
    let mut out: Vec<(u64, Vec<f64>)> = study
        .iter_from(from)
        .filter(|t| t.state == TrialState::Running && t.id != trial.id)
        .filter_map(|t| {
            let values: Option<Vec<f64>> = space
                .iter()
                .map(
                    |(n, d, _)| match (t.internal_params.get(*n), t.distributions.get(*n)) {
                        (Some(x), Some(td)) if td == *d => Some(transform(d, *x)),
                        _ => None,
                    },
                )
                .collect();
            Some((t.number, values?))
        })
        .collect();
    out.sort_by_key(|(n, _)| *n);
    out
}

impl Sampler for TpeSampler {
    fn infer_relative_search_space(
        &self,
        study: &StudyView<'_>,
        _trial: &FrozenTrial,
    ) -> BTreeMap<String, Distribution> {
        if !self.config.is_multivariate(study.directions().len()) {
            return BTreeMap::new();
        }
        let Ok(mut studies) = self.studies.lock() else {
            return BTreeMap::new();
        };
        let obs = studies.entry(study.name().to_owned()).or_default();
        obs.sync(study);
        if self.config.group {
            obs.group().spaces().into_iter().flatten().collect()
        } else {
            obs.intersection().space()
        }
    }

    fn sample_relative(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        space: &BTreeMap<String, Distribution>,
    ) -> Result<RelativeSample> {
        if space.is_empty() {
            return Ok(RelativeSample::default());
        }
        let mut studies = self.studies.lock()?;
        let obs = studies.entry(study.name().to_owned()).or_default();
        let members = obs.sync(study);
        if members.len() < self.config.n_startup_trials {
            return Ok(RelativeSample::default());
        }
        let groups: Vec<Vec<&str>> = if self.config.group {
            obs.group()
                .spaces()
                .iter()
                .map(|g| {
                    g.keys()
                        .filter(|k| space.contains_key(*k))
                        .map(|k| space_key(space, k))
                        .collect()
                })
                .collect()
        } else {
            vec![space.keys().map(String::as_str).collect()]
        };
        let full = Support::Full;
        let mut out = BTreeMap::new();
        for names in groups.into_iter().filter(|g| !g.is_empty()) {
            let sub: Vec<(&str, &Distribution, &Support)> = names
                .iter()
                .filter_map(|n| space.get(*n).map(|d| (*n, d, &full)))
                .collect();
            // One stream per joint group, named by its members.
            let mut rng = trial_rng(self.seed, trial.number, &names.join("\u{1f}"));
            let values = self.sample_joint(obs, &members, study, trial, &sub, &mut rng);
            for ((n, _, _), v) in sub.iter().zip(values) {
                out.insert((*n).to_owned(), v);
            }
        }
        Ok(out.into())
    }

    fn sample_independent(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        name: &str,
        dist: &Distribution,
        support: &Support,
    ) -> Result<f64> {
        let mut studies = self.studies.lock()?;
        let obs = studies.entry(study.name().to_owned()).or_default();
        let members = obs.sync(study);
        let mut rng = trial_rng(self.seed, trial.number, name);
        if members.len() < self.config.n_startup_trials {
            return Ok(sample_uniform(&mut rng, dist, support));
        }
        let v = self.sample_joint(
            obs,
            &members,
            study,
            trial,
            &[(name, dist, support)],
            &mut rng,
        );
        Ok(v.first()
            .copied()
            .unwrap_or_else(|| sample_uniform(&mut rng, dist, support)))
    }
    fn to_config(&self) -> Option<SamplerConfig> {
        Some(SamplerConfig::Tpe(TpeConfig {
            seed: Some(self.seed),
            ..self.config.clone()
        }))
    }
}

/// `k` as a `&str` borrowed from `space` (so it outlives the group list).
fn space_key<'s>(space: &'s BTreeMap<String, Distribution>, k: &str) -> &'s str {
    space.get_key_value(k).map_or("", |(key, _)| key.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direction::Direction;
    use crate::distribution::{CategoricalDistribution, FloatDistribution, IntDistribution};
    use std::sync::Arc;

    fn float() -> Distribution {
        FloatDistribution::new(0.0, 1.0).unwrap().into()
    }

    fn complete(number: u64, x: f64, value: f64) -> Arc<FrozenTrial> {
        let mut t = FrozenTrial::new(number, number, TrialState::Complete);
        t.internal_params.insert("x".into(), x);
        t.distributions.insert("x".into(), float());
        t.values = Some(vec![value]);
        Arc::new(t)
    }

    fn running_at(number: u64, x: f64) -> Arc<FrozenTrial> {
        let mut t = FrozenTrial::new(number, number, TrialState::Running);
        t.internal_params.insert("x".into(), x);
        t.distributions.insert("x".into(), float());
        Arc::new(t)
    }

    #[test]
    fn gather_skips_incomplete_rows_appends_liars_and_sorts() {
        let a = [0.1, f64::NAN, 0.3, 0.4];
        let b = [1.0, 2.0, 3.0, f64::NAN];
        let sa = [(0.1, 0), (0.3, 2), (0.4, 3)];
        let sb = [(1.0, 0), (2.0, 1), (3.0, 2)];
        let (out, order, _) = gather(
            &[(&a, &sa, &[]), (&b, &sb, &[])],
            4,
            &[0, 1, 2, 3],
            &[(5, vec![0.2, 9.5]), (7, vec![0.0, 0.5])],
        );
        assert_eq!(
            out,
            vec![vec![0.1, 0.3, 0.2, 0.0], vec![1.0, 3.0, 9.5, 0.5]]
        );
        assert_eq!(order, vec![vec![3, 0, 2, 1], vec![3, 0, 1, 2]]);
        // Only the requested trials.
        let (out, order, norms) = gather(&[(&a, &sa, &[0.5, 0.6, 0.7, 0.8])], 4, &[2, 3], &[]);
        assert_eq!(out, vec![vec![0.3, 0.4]]);
        assert_eq!(order, vec![vec![0, 1]]);
        assert_eq!(norms, vec![vec![0.7, 0.8]]);
    }

    #[test]
    fn row_tables_gather_what_the_columns_gather() {
        // Trials with x always and y on even numbers, finishing in order
        // (rows appended) and then one out of order (rows rebuilt).
        let y: Distribution = FloatDistribution::new(-1.0, 1.0).unwrap().into();
        let make = |i: u64, state: TrialState| {
            let mut t = FrozenTrial::new(i, i, state);
            t.internal_params
                .insert("x".into(), ((i * 37) % 11) as f64 / 11.0);
            t.distributions.insert("x".into(), float());
            if i.is_multiple_of(2) {
                t.internal_params
                    .insert("y".into(), ((i * 13) % 7) as f64 / 7.0 - 0.5);
                t.distributions.insert("y".into(), y.clone());
            }
            t.values = (state == TrialState::Complete).then(|| vec![i as f64]);
            Arc::new(t)
        };
        let dirs = [Direction::Minimize];
        let mut trials: Vec<Arc<FrozenTrial>> = (0..60)
            .map(|i| {
                make(
                    i,
                    if i == 7 {
                        TrialState::Running
                    } else {
                        TrialState::Complete
                    },
                )
            })
            .collect();
        let mut obs = StudyObservations::default();
        let f = float();
        let space: [(&str, &Distribution); 2] = [("x", &f), ("y", &y)];
        let check = |obs: &mut StudyObservations, members: &[u32]| {
            let at = obs.update_rows(&space);
            let columns: Vec<ColumnRef<'_>> = space
                .iter()
                .map(|(n, d)| (obs.column(n, d), obs.sorted(n, d), obs.log_norms(n, d)))
                .collect();
            let liars = [(99, vec![0.5, 0.0])];
            for skip in [0, 3, 10] {
                let some: Vec<u32> = members.iter().copied().filter(|m| m % 11 != skip).collect();
                let a = gather(&columns, obs.n_numbers(), &some, &liars);
                let b = gather_rows(obs.rows(at).unwrap(), obs.n_numbers(), &some, &liars);
                assert_eq!(format!("{a:?}"), format!("{b:?}"));
            }
        };
        for n in 60..66 {
            let members = obs.sync(&StudyView::new("s", &dirs, &trials));
            check(&mut obs, &members);
            trials.push(make(n, TrialState::Complete));
        }
        trials[7] = make(7, TrialState::Complete);
        let members = obs.sync(&StudyView::new("s", &dirs, &trials));
        assert!(members.contains(&7));
        check(&mut obs, &members);
    }

    #[test]
    fn the_kept_bad_group_estimator_is_a_full_build_bit_for_bit() {
        // A 6-D mixed space; trials arrive one or three at a time, good ones
        // now and then (the good group changes), one out of order (the row
        // table is rebuilt), clustered like a history TPE grew. After each
        // arrival the kept estimator must equal a fresh build.
        let dists: Vec<Distribution> = vec![
            FloatDistribution::new(-10.0, 10.0).unwrap().into(),
            FloatDistribution::log(1e-5, 1e-1).unwrap().into(),
            IntDistribution::new(1, 100).unwrap().into(),
            CategoricalDistribution::new(["a", "b", "c"])
                .unwrap()
                .into(),
            FloatDistribution::stepped(0.0, 0.5, 0.05).unwrap().into(),
            FloatDistribution::new(0.0, 1.0).unwrap().into(),
        ];
        let names = ["a", "b", "c", "d", "e", "f"];
        let make = |i: u64, state: TrialState| {
            let mut t = FrozenTrial::new(i, i, state);
            let u = |j: u64| {
                let h = (i * 2_654_435_761 + j * 40_503) % 1_000_003;
                let v = h as f64 / 1_000_003.0;
                // Most near the middle, some anywhere, a few at the ends.
                match i % 13 {
                    0 => 0.0,
                    1 => 1.0,
                    2..=4 => v,
                    _ => 0.45 + 0.1 * v,
                }
            };
            for (j, (n, d)) in names.iter().zip(&dists).enumerate() {
                let x = match d {
                    Distribution::Float(f) if f.is_log() => {
                        (f.low().ln() + u(j as u64) * (f.high() / f.low()).ln()).exp()
                    }
                    Distribution::Float(f) => f.low() + u(j as u64) * (f.high() - f.low()),
                    Distribution::Int(f) => {
                        f.low() as f64 + u(j as u64) * (f.high() - f.low()) as f64
                    }
                    Distribution::Categorical(c) => (u(j as u64) * 2.999)
                        .floor()
                        .min(c.choices().len() as f64 - 1.0),
                };
                t.internal_params.insert((*n).into(), d.snap(x));
                t.distributions.insert((*n).into(), d.clone());
            }
            let good = i.is_multiple_of(17);
            t.values = (state == TrialState::Complete)
                .then(|| vec![if good { -(i as f64) } else { (i % 23) as f64 }]);
            Arc::new(t)
        };
        let dirs = [Direction::Minimize];
        // From 60 trials, so the magic clip's smallest bandwidth still moves
        // at first (a rebuild each time) and then settles (appends).
        let trials: Vec<Arc<FrozenTrial>> = (0..60)
            .map(|i| {
                make(
                    i,
                    if i == 50 {
                        TrialState::Running
                    } else {
                        TrialState::Complete
                    },
                )
            })
            .collect();
        // A good group of at most 10, so it settles once there are 100.
        for cfg in [
            TpeConfig {
                gamma_max: 10,
                ..TpeConfig::default()
            },
            TpeConfig {
                gamma_max: 10,
                consider_endpoints: true,
                prior_weight: 1.0,
                ..TpeConfig::optuna()
            },
        ] {
            let mut obs = StudyObservations::default();
            let key: Vec<(&str, &Distribution)> = names.iter().copied().zip(&dists).collect();
            let dims: Vec<Dim> = dists.iter().map(Dim::of).collect();
            let mut trials = trials.clone();
            let mut appends = 0;
            let mut compared = 0;
            for step in 0..80u64 {
                let members = obs.sync(&StudyView::new("s", &dirs, &trials));
                let at = obs.update_rows(&key);
                let (below, above) = obs.split(&members, cfg.gamma(members.len(), 1), 1);
                let rows = obs.rows(at).unwrap();
                let (x, order, norms) = gather_rows(rows, obs.n_numbers(), &above, &[]);
                let n = x[0].len();
                let full = ParzenEstimator::with_order(
                    x,
                    &cfg.weights.weights(n),
                    &dims,
                    &cfg,
                    Some(&order),
                    Some(&norms),
                    None,
                );
                let n_numbers = obs.n_numbers();
                let rows = obs.rows_mut(at).unwrap();
                let mut slot = std::mem::take(&mut rows.kept);
                let gather = || gather_rows(rows, n_numbers, &above, &[]);
                if let Some(kept) = slot.estimator(rows, &below, &dims, &cfg, gather) {
                    if let Err(e) = kept.same_bits(&full) {
                        panic!("step {step}, {n} kernels: {e}");
                    }
                    compared += 1;
                }
                appends = appends.max(slot.appends());
                rows.kept = slot;
                let next = trials.len() as u64;
                let arrivals = if step % 5 == 0 { 3 } else { 1 };
                for j in 0..arrivals {
                    trials.push(make(next + j, TrialState::Complete));
                }
                if step == 60 {
                    trials[50] = make(50, TrialState::Complete);
                }
            }
            // The longest run of appends between rebuilds (a change of the
            // good group, the out-of-order trial).
            assert!(appends >= 5, "{appends} appends");
            assert!(compared >= 40, "kept in {compared} of 80 steps");
        }
    }

    #[test]
    fn constant_liar_pushes_proposals_away_from_running_trials() {
        // Good trials near 0.5; another worker is already evaluating 0.5.
        let mut trials: Vec<Arc<FrozenTrial>> = (0..40)
            .map(|i| {
                let x = i as f64 / 40.0;
                complete(i, x, (x - 0.5).abs())
            })
            .collect();
        let liars: Vec<Arc<FrozenTrial>> = (0..30)
            .map(|i| running_at(100 + i, 0.5 + (i as f64 - 15.0) * 1e-3))
            .collect();
        trials.extend(liars);
        let me = FrozenTrial::new(999, 999, TrialState::Running);
        trials.push(Arc::new(me.clone()));
        let dirs = [Direction::Minimize];
        let view = StudyView::new("s", &dirs, &trials);
        let near = |liar: bool| {
            let s = TpeSampler::with_config(TpeConfig {
                constant_liar: liar,
                ..TpeConfig::seeded(5)
            })
            .unwrap();
            (0..40)
                .filter(|_| {
                    let x = s
                        .sample_independent(&view, &me, "x", &float(), &Support::Full)
                        .unwrap();
                    (x - 0.5).abs() < 0.02
                })
                .count()
        };
        let (with, without) = (near(true), near(false));
        assert!(with < without, "with liar {with}, without {without}");
    }

    #[test]
    fn independent_sampling_respects_narrowed_categorical_support() {
        let cat: Distribution = CategoricalDistribution::new(["a", "b", "c", "d"])
            .unwrap()
            .into();
        let trials: Vec<Arc<FrozenTrial>> = (0..30)
            .map(|i| {
                let mut t = FrozenTrial::new(i, i, TrialState::Complete);
                t.internal_params.insert("c".into(), (i % 4) as f64);
                t.distributions.insert("c".into(), cat.clone());
                // Two trials with choice 0 are best, then choice 2; the
                // support below excludes choice 0.
                let v = match i % 4 {
                    0 if i < 8 => 0.0,
                    2 => 1.0,
                    _ => 5.0,
                };
                t.values = Some(vec![v]);
                Arc::new(t)
            })
            .collect();
        let dirs = [Direction::Minimize];
        let view = StudyView::new("s", &dirs, &trials);
        let me = FrozenTrial::new(99, 99, TrialState::Running);
        let s = TpeSampler::seeded(1);
        let support = Support::choices([2, 3]);
        let mut counts = [0; 4];
        for _ in 0..50 {
            let x = s
                .sample_independent(&view, &me, "c", &cat, &support)
                .unwrap();
            counts[x as usize] += 1;
        }
        assert_eq!(counts[0] + counts[1], 0);
        // Among the allowed choices, the better one (2) is preferred.
        assert!(counts[2] > counts[3], "{counts:?}");
    }
}
