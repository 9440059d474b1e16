//! Per-study observation arrays, kept incrementally, and the good/bad split.
//!
//! Finished trials never change, so each one is read once: its outcome (loss,
//! pruned step, or constraint violation) goes into an array indexed by trial
//! number, and each parameter value, already in modelled units, into a column
//! per `(name, distribution)`. A suggestion then costs one pass over the
//! trial list to pick up what finished since the last call, a linear-time
//! partial selection for the split, and arithmetic on the columns: no
//! re-reading of parameters, no sorting of the whole history.
//!
//! The split follows Optuna's `_split_trials`: COMPLETE trials ranked by loss
//! (direction-aware), then PRUNED trials by (last step descending, loss at
//! that step); the best `n_below` form the "good" group. Trials that violated
//! a constraint (OOM, infeasible, or a positive `constraints` attribute) are
//! always "bad", so the sampler learns to stay away from them (c-TPE /
//! Optuna's constraints semantics with feasible before infeasible). Other
//! failures (errors, panics, stale workers) carry no information about the
//! objective and are ignored.
//!
//! With several objectives the good group is made of whole non-dominated
//! fronts, the boundary front cut by the smallest sum of min-max normalised
//! losses (a simpler, documented stand-in for Optuna's hypervolume subset
//! selection); pruned trials are bad there.

use super::domain::{clipped_log_norm, transform};
use super::group::{Intersection, SearchSpaceGroup};
use super::kept::KeptSlot;
use crate::direction::Direction;
use crate::distribution::Distribution;
use crate::trial::{FrozenTrial, TrialState};
use crate::view::StudyView;
use std::cmp::Ordering;
use std::collections::HashMap;

/// Most joint-space row tables kept per study.
const MAX_ROW_TABLES: usize = 32;

/// Marks a trial number not (yet) seen finished.
const UNSEEN: u64 = u64::MAX;

/// What a finished trial tells the sampler.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// COMPLETE and feasible: one loss per objective (smaller is better).
    Complete(Vec<f64>),
    /// PRUNED: the last reported step (if any) and the loss there.
    Pruned(Option<(u64, f64)>),
    /// Violated a constraint by this much: always a bad observation.
    Infeasible(f64),
}

impl Outcome {
    /// The outcome of a finished trial, or `None` if it carries no information.
    pub(crate) fn of(t: &FrozenTrial, directions: &[Direction]) -> Option<Outcome> {
        let violation = t.constraint_violation().unwrap_or(0.0);
        let flagged = t.failure().is_some_and(|f| f.is_constraint_violation());
        if violation > 0.0 || flagged {
            return Some(Outcome::Infeasible(violation.max(f64::MIN_POSITIVE)));
        }
        match t.state {
            TrialState::Complete => {
                let values = t.values.as_ref()?;
                if values.len() != directions.len() || values.iter().any(|v| !v.is_finite()) {
                    return None;
                }
                Some(Outcome::Complete(
                    values
                        .iter()
                        .zip(directions)
                        .map(|(v, d)| d.to_loss(*v))
                        .collect(),
                ))
            }
            TrialState::Pruned => {
                let dir = directions.first().copied().unwrap_or_default();
                Some(Outcome::Pruned(t.last_intermediate().map(|(s, v)| {
                    (
                        s,
                        if v.is_nan() {
                            f64::INFINITY
                        } else {
                            dir.to_loss(v)
                        },
                    )
                })))
            }
            _ => None,
        }
    }
}

/// One parameter's values (modelled units) under one distribution, by trial number.
#[derive(Debug, Clone)]
struct Column {
    dist: Distribution,
    values: Vec<f64>,
    /// `(value, number)` sorted by value, so bandwidths need no sort per suggestion.
    sorted: Vec<(f64, u32)>,
    /// How much of `sorted` is in order (new entries are appended, then settled).
    sorted_len: usize,
    /// Log normaliser of each value's kernel at the clip bandwidth, by number.
    log_norms: Vec<f64>,
}

/// The observations of one joint space (the trials that have every one of
/// its parameters), kept across suggestions: values and log normalisers by
/// row, and each dimension's rows sorted by value. A suggestion copies the
/// bad group out of these in one sequential pass instead of gathering it
/// trial by trial from the columns.
#[derive(Debug, Default)]
pub(crate) struct Rows {
    /// The space: `(name, distribution)` per dimension.
    key: Vec<(String, Distribution)>,
    /// Trial number of each row, ascending.
    pub(crate) numbers: Vec<u32>,
    /// `values[d][r]`: row `r`'s value in dimension `d` (modelled units).
    pub(crate) values: Vec<Vec<f64>>,
    /// `norms[d][r]`: row `r`'s clip-bandwidth log normaliser in dimension `d`.
    pub(crate) norms: Vec<Vec<f64>>,
    /// `order[d]`: rows sorted by `(value, number)` in dimension `d`.
    pub(crate) order: Vec<Vec<u32>>,
    /// How many of the study's observations (`members`) are accounted for.
    seen: usize,
    /// The last of them.
    last: Option<u32>,
    /// The bad group's estimator over these rows, kept between suggestions
    /// (dropped when the rows are rebuilt).
    pub(crate) kept: KeptSlot,
}

impl Rows {
    fn new(key: Vec<(String, Distribution)>) -> Rows {
        let d = key.len();
        Rows {
            key,
            numbers: Vec::new(),
            values: vec![Vec::new(); d],
            norms: vec![Vec::new(); d],
            order: vec![Vec::new(); d],
            seen: 0,
            last: None,
            kept: KeptSlot::Empty,
        }
    }

    fn matches(&self, space: &[(&str, &Distribution)]) -> bool {
        self.key.len() == space.len()
            && self
                .key
                .iter()
                .zip(space)
                .all(|((n, d), (m, e))| n == m && d == *e)
    }

    /// Brings the table up to date with `members` (all observations,
    /// ascending): appends rows for new trials numbered above every row,
    /// rebuilds from the columns otherwise (a trial finished out of order).
    fn update(&mut self, members: &[u32], cols: &[Option<&Column>], n_numbers: usize) {
        let at = |c: &Option<&Column>, n: u32| {
            c.and_then(|c| c.values.get(n as usize).copied())
                .unwrap_or(f64::NAN)
        };
        let norm = |c: &Option<&Column>, n: u32| {
            c.and_then(|c| c.log_norms.get(n as usize).copied())
                .unwrap_or(f64::NAN)
        };
        // Nothing was inserted before the members already read iff the last
        // of them is still at the same place (members are distinct, ascending).
        let appends = self.seen <= members.len()
            && (self.seen == 0 || members.get(self.seen - 1) == self.last.as_ref());
        if appends && self.seen == members.len() {
            return;
        }
        if appends && members.len() - self.seen <= 32 {
            for n in &members[self.seen..] {
                if !cols.iter().all(|c| !at(c, *n).is_nan()) {
                    continue;
                }
                let r = self.numbers.len() as u32;
                self.numbers.push(*n);
                for (d, c) in cols.iter().enumerate() {
                    let v = at(c, *n);
                    let vals = &self.values[d];
                    // Ties go after existing rows: they have smaller numbers.
                    let pos =
                        self.order[d].partition_point(|j| vals[*j as usize].total_cmp(&v).is_le());
                    self.order[d].insert(pos, r);
                    self.values[d].push(v);
                    self.norms[d].push(norm(c, *n));
                }
            }
            self.seen = members.len();
            self.last = members.last().copied();
            return;
        }
        // Rebuild from the columns.
        self.kept = KeptSlot::Empty;
        self.numbers.clear();
        let mut row_of = vec![u32::MAX; n_numbers];
        for v in self.values.iter_mut().chain(self.norms.iter_mut()) {
            v.clear();
        }
        for n in members {
            if !cols.iter().all(|c| !at(c, *n).is_nan()) {
                continue;
            }
            if let Some(slot) = row_of.get_mut(*n as usize) {
                *slot = self.numbers.len() as u32;
            }
            self.numbers.push(*n);
            for (d, c) in cols.iter().enumerate() {
                self.values[d].push(at(c, *n));
                self.norms[d].push(norm(c, *n));
            }
        }
        for (d, c) in cols.iter().enumerate() {
            self.order[d] = c
                .map(|c| &c.sorted[..])
                .unwrap_or(&[])
                .iter()
                .filter_map(|(_, n)| row_of.get(*n as usize).copied().filter(|r| *r != u32::MAX))
                .collect();
        }
        self.seen = members.len();
        self.last = members.last().copied();
    }
}

/// Everything TPE remembers about one study's finished trials.
#[derive(Debug, Default)]
pub(crate) struct StudyObservations {
    /// Storage id of each finished trial seen, by number (`UNSEEN` otherwise).
    ids: Vec<u64>,
    outcomes: Vec<Option<Outcome>>,
    n_seen: usize,
    /// Numbers of all observations, ascending.
    members: Vec<u32>,
    /// How much of `members` is in order.
    members_sorted: usize,
    /// Every observation that can be good with one objective, ranked best
    /// first (see [`rank`]), so the split needs no selection over all of them.
    ranked: Vec<Rank>,
    /// How much of `ranked` is in order.
    ranked_sorted: usize,
    /// Every trial numbered below this was finished when last read.
    settled: u64,
    columns: HashMap<String, Vec<Column>>,
    /// Row tables of the joint spaces sampled so far.
    rows: Vec<Rows>,
    group: SearchSpaceGroup,
    intersection: Intersection,
}

impl StudyObservations {
    /// Picks up trials that finished since the last call and returns the
    /// numbers of the finished observations in `view`, ascending.
    pub(crate) fn sync(&mut self, view: &StudyView<'_>) -> Vec<u32> {
        let directions = view.directions();
        // A view holding every number 0..=max is the whole study. There, all
        // trials numbered below `settled` were finished and read at the last
        // call, so the scan starts after them (finished trials never change).
        // The view is read by position, never as one slice, which for a
        // study's snapshot would cost a copy of every trial pointer.
        let n = view.len();
        let dense = is_dense(view);
        if dense && self.settled > 0 {
            // Sentinel: the same study still (ids match where we skip).
            let same = view.get(0).is_none_or(|t| self.ids.first() == Some(&t.id));
            if !same {
                *self = StudyObservations::default();
                return self.sync(view);
            }
        }
        // In a dense view the trial at position i is numbered i.
        let start = if dense {
            (self.settled as usize).min(n)
        } else {
            0
        };
        let mut in_view = start;
        let mut settled = None;
        for t in view.iter_from(start) {
            if !t.state.is_finished() {
                settled.get_or_insert(t.number);
                continue;
            }
            in_view += 1;
            let num = t.number as usize;
            match self.ids.get(num) {
                Some(id) if *id == t.id => continue,
                Some(id) if *id != UNSEEN => {
                    // Same name, different trial: another study with this name. Start over.
                    *self = StudyObservations::default();
                    return self.sync(view);
                }
                _ => self.insert(t, directions),
            }
        }
        if dense {
            self.settled = settled.unwrap_or(n as u64);
        }
        self.settle_order();
        if in_view == self.n_seen {
            // The view holds every trial seen: no need to filter.
            return self.members.clone();
        }
        view.iter()
            .filter(|t| t.state.is_finished())
            .map(|t| t.number as usize)
            .filter(|n| self.outcomes.get(*n).is_some_and(Option::is_some))
            .map(|n| n as u32)
            .collect()
    }

    fn insert(&mut self, t: &FrozenTrial, directions: &[Direction]) {
        let num = t.number as usize;
        if self.ids.len() <= num {
            self.ids.resize(num + 1, UNSEEN);
            self.outcomes.resize(num + 1, None);
        }
        self.ids[num] = t.id;
        self.n_seen += 1;
        let outcome = Outcome::of(t, directions);
        if outcome.is_none() {
            return;
        }
        if let Some(r) = outcome.as_ref().and_then(|o| rank(o, num as u32)) {
            self.ranked.push(r);
        }
        self.outcomes[num] = outcome;
        self.members.push(num as u32);
        for (name, x) in &t.internal_params {
            let Some(dist) = t.distributions.get(name) else {
                continue;
            };
            if !self.columns.contains_key(name) {
                self.columns.insert(name.clone(), Vec::new());
            }
            let Some(cols) = self.columns.get_mut(name) else {
                continue;
            };
            let col = match cols.iter_mut().position(|c| &c.dist == dist) {
                Some(i) => &mut cols[i],
                None => {
                    cols.push(Column {
                        dist: dist.clone(),
                        values: Vec::new(),
                        sorted: Vec::new(),
                        sorted_len: 0,
                        log_norms: Vec::new(),
                    });
                    let last = cols.len() - 1;
                    &mut cols[last]
                }
            };
            if col.values.len() <= num {
                col.values.resize(num + 1, f64::NAN);
            }
            let y = transform(dist, *x);
            col.values[num] = y;
            if col.log_norms.len() <= num {
                col.log_norms.resize(num + 1, f64::NAN);
            }
            col.log_norms[num] = clipped_log_norm(dist, y);
            col.sorted.push((y, num as u32));
        }
        self.group.add(&t.distributions);
        self.intersection.add(&t.distributions);
    }

    /// Index in `view.trials()` of the first trial that may be unfinished:
    /// in a view of the whole study, every trial numbered below the point
    /// settled at the last [`StudyObservations::sync`] of that view was
    /// finished (finished trials never change state); otherwise 0.
    pub(crate) fn first_unsettled(&self, view: &StudyView<'_>) -> usize {
        if is_dense(view) {
            (self.settled as usize).min(view.len())
        } else {
            0
        }
    }

    /// Brings the row table of the joint space `space` up to date with every
    /// observation seen (call after [`StudyObservations::sync`]) and returns
    /// its index for [`StudyObservations::rows`].
    pub(crate) fn update_rows(&mut self, space: &[(&str, &Distribution)]) -> usize {
        let i = match self.rows.iter().position(|r| r.matches(space)) {
            Some(i) => i,
            None => {
                // Spaces come and go as a conditional space's groups refine:
                // keep a bounded number of tables, dropping the oldest.
                if self.rows.len() >= MAX_ROW_TABLES {
                    self.rows.remove(0);
                }
                let key = space
                    .iter()
                    .map(|(n, d)| ((*n).to_owned(), (*d).clone()))
                    .collect();
                self.rows.push(Rows::new(key));
                self.rows.len() - 1
            }
        };
        let cols: Vec<Option<&Column>> = space
            .iter()
            .map(|(n, d)| {
                self.columns
                    .get(*n)
                    .and_then(|cs| cs.iter().find(|c| &c.dist == *d))
            })
            .collect();
        if let Some(rows) = self.rows.get_mut(i) {
            rows.update(&self.members, &cols, self.outcomes.len());
        }
        i
    }

    /// The row table at `index` (from [`StudyObservations::update_rows`]).
    pub(crate) fn rows(&self, index: usize) -> Option<&Rows> {
        self.rows.get(index)
    }

    /// The row table at `index`, to update its kept estimator.
    pub(crate) fn rows_mut(&mut self, index: usize) -> Option<&mut Rows> {
        self.rows.get_mut(index)
    }

    /// How many observations there are in all (a view's members are all
    /// of them exactly when there are as many).
    pub(crate) fn n_members(&self) -> usize {
        self.members.len()
    }

    /// Values of `name` under `dist` by trial number (NaN where missing).
    pub(crate) fn column(&self, name: &str, dist: &Distribution) -> &[f64] {
        self.columns
            .get(name)
            .and_then(|cs| cs.iter().find(|c| &c.dist == dist))
            .map_or(&[], |c| &c.values[..])
    }

    /// Puts entries appended since the last call in order: a few are
    /// inserted one by one, many (reading a long history) sorted at once.
    fn settle_order(&mut self) {
        settle(&mut self.members, &mut self.members_sorted, |a, b| a.cmp(b));
        settle(&mut self.ranked, &mut self.ranked_sorted, rank_order);
        for cols in self.columns.values_mut() {
            for c in cols {
                settle(&mut c.sorted, &mut c.sorted_len, |a, b| {
                    a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
                });
            }
        }
    }

    /// Clip-bandwidth log normalisers of `name` under `dist`, by number.
    pub(crate) fn log_norms(&self, name: &str, dist: &Distribution) -> &[f64] {
        self.columns
            .get(name)
            .and_then(|cs| cs.iter().find(|c| &c.dist == dist))
            .map_or(&[], |c| &c.log_norms[..])
    }

    /// `(value, number)` of `name` under `dist`, sorted by value.
    pub(crate) fn sorted(&self, name: &str, dist: &Distribution) -> &[(f64, u32)] {
        self.columns
            .get(name)
            .and_then(|cs| cs.iter().find(|c| &c.dist == dist))
            .map_or(&[], |c| &c.sorted[..])
    }

    /// One past the largest trial number seen.
    pub(crate) fn n_numbers(&self) -> usize {
        self.outcomes.len()
    }

    /// The group decomposition of every observation seen.
    pub(crate) fn group(&self) -> &SearchSpaceGroup {
        &self.group
    }

    /// The intersection search space of every observation seen.
    pub(crate) fn intersection(&self) -> &Intersection {
        &self.intersection
    }

    /// Splits `members` (numbers of finished observations, ascending) into the
    /// good group of at most `n_below` trials and the rest, both ascending.
    pub(crate) fn split(
        &self,
        members: &[u32],
        n_below: usize,
        n_objectives: usize,
    ) -> (Vec<u32>, Vec<u32>) {
        let mut below = if n_objectives > 1 {
            self.below_multi(members, n_below)
        } else {
            self.below_single(members, n_below)
        };
        below.sort_unstable();
        let mut above = Vec::with_capacity(members.len() - below.len().min(members.len()));
        let mut j = 0;
        for m in members {
            if j < below.len() && below[j] == *m {
                j += 1;
            } else {
                above.push(*m);
            }
        }
        (below, above)
    }

    fn below_single(&self, members: &[u32], n_below: usize) -> Vec<u32> {
        if n_below == 0 {
            return Vec::new();
        }
        // `members` are distinct observations: as many as were seen means
        // all of them, already ranked (every key is distinct, so the best
        // `n_below` are the same set a selection finds).
        if members.len() == self.members.len() && self.ranked_sorted == self.ranked.len() {
            return self.ranked.iter().take(n_below).map(|r| r.3).collect();
        }
        let mut ranked: Vec<Rank> = members
            .iter()
            .filter_map(|m| rank(self.outcomes[*m as usize].as_ref()?, *m))
            .collect();
        if ranked.len() > n_below {
            ranked.select_nth_unstable_by(n_below - 1, rank_order);
            ranked.truncate(n_below);
        }
        ranked.into_iter().map(|r| r.3).collect()
    }

    fn below_multi(&self, members: &[u32], n_below: usize) -> Vec<u32> {
        let mut rest: Vec<(u32, &[f64])> = members
            .iter()
            .filter_map(|m| match self.outcomes[*m as usize].as_ref()? {
                Outcome::Complete(l) => Some((*m, &l[..])),
                _ => None,
            })
            .collect();
        let mut below = Vec::new();
        while below.len() < n_below && !rest.is_empty() {
            let (front, others): (Vec<_>, Vec<_>) = rest
                .iter()
                .partition(|(_, a)| !rest.iter().any(|(_, b)| dominates(b, a)));
            rest = others;
            let need = n_below - below.len();
            if front.len() <= need {
                below.extend(front.iter().map(|(m, _)| *m));
            } else {
                below.extend(cut_front(&front, need));
            }
        }
        below
    }
}

/// A single-objective observation's place in the ranking: (class, primary,
/// secondary, number), complete trials by loss, then pruned ones by
/// (-step, loss), pruned ones without reports last.
type Rank = (u8, f64, f64, u32);

/// The rank of observation `number` with `outcome`; `None` for a
/// constraint violation, which is never good.
fn rank(outcome: &Outcome, number: u32) -> Option<Rank> {
    match outcome {
        Outcome::Complete(l) => Some((0, l.first().copied().unwrap_or(f64::NAN), 0.0, number)),
        Outcome::Pruned(Some((s, l))) => Some((1, -(*s as f64), *l, number)),
        Outcome::Pruned(None) => Some((1, 1.0, 0.0, number)),
        Outcome::Infeasible(_) => None,
    }
}

/// Best first; every key is distinct (the number breaks ties).
fn rank_order(a: &Rank, b: &Rank) -> Ordering {
    a.0.cmp(&b.0)
        .then(a.1.total_cmp(&b.1))
        .then(a.2.total_cmp(&b.2))
        .then(a.3.cmp(&b.3))
}

/// Whether `view` holds every trial number from 0 to its largest (the whole
/// study, ordered by number, so position and number agree).
fn is_dense(view: &StudyView<'_>) -> bool {
    let n = view.len();
    n.checked_sub(1)
        .and_then(|i| view.get(i))
        .is_none_or(|t| t.number as usize + 1 == n)
}

/// Sorts `v[sorted_len..]` into the sorted prefix `v[..sorted_len]`.
fn settle<T: Copy>(v: &mut [T], sorted_len: &mut usize, cmp: impl Fn(&T, &T) -> Ordering) {
    let new = v.len() - (*sorted_len).min(v.len());
    if new > 32 {
        v.sort_unstable_by(&cmp);
    } else {
        for i in *sorted_len..v.len() {
            let e = v[i];
            let at = v[..i].partition_point(|x| cmp(x, &e).is_lt());
            v[at..=i].rotate_right(1);
        }
    }
    *sorted_len = v.len();
}

/// Whether loss vector `a` Pareto-dominates `b`.
fn dominates(a: &[f64], b: &[f64]) -> bool {
    a.iter().zip(b).all(|(x, y)| x <= y) && a.iter().zip(b).any(|(x, y)| x < y)
}

/// The `need` members of a front with the smallest sum of min-max normalised losses.
fn cut_front(front: &[(u32, &[f64])], need: usize) -> Vec<u32> {
    let m = front.first().map_or(0, |f| f.1.len());
    let (mut lo, mut hi) = (vec![f64::INFINITY; m], vec![f64::NEG_INFINITY; m]);
    for (_, l) in front {
        for i in 0..m {
            lo[i] = lo[i].min(l[i]);
            hi[i] = hi[i].max(l[i]);
        }
    }
    let mut scored: Vec<(f64, u32)> = front
        .iter()
        .map(|(n, l)| {
            let s = (0..m)
                .map(|i| {
                    if hi[i] > lo[i] {
                        (l[i] - lo[i]) / (hi[i] - lo[i])
                    } else {
                        0.0
                    }
                })
                .sum();
            (s, *n)
        })
        .collect();
    scored.sort_by(|a, b| {
        a.0.partial_cmp(&b.0)
            .unwrap_or(Ordering::Equal)
            .then(a.1.cmp(&b.1))
    });
    scored.into_iter().take(need).map(|s| s.1).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::FloatDistribution;
    use crate::trial::FailureKind;
    use std::sync::Arc;

    fn trial(number: u64, state: TrialState, value: Option<f64>) -> FrozenTrial {
        let mut t = FrozenTrial::new(number + 100, number, state);
        t.values = value.map(|v| vec![v]);
        let d: Distribution = FloatDistribution::new(0.0, 1.0).unwrap().into();
        t.internal_params.insert("x".into(), number as f64 / 100.0);
        t.distributions.insert("x".into(), d);
        t
    }

    fn pruned(number: u64, step: u64, value: f64) -> FrozenTrial {
        let mut t = trial(number, TrialState::Pruned, Some(value));
        t.intermediate_values.insert(step, value);
        t
    }

    fn oom(number: u64) -> FrozenTrial {
        let mut t = trial(number, TrialState::Fail, None);
        t.system_attrs
            .insert(FailureKind::ATTR.into(), "oom".into());
        t.system_attrs.insert(
            FailureKind::CONSTRAINTS_ATTR.into(),
            serde_json::json!([1.0]),
        );
        t
    }

    fn split_of(trials: Vec<FrozenTrial>, n_below: usize, dir: Direction) -> (Vec<u32>, Vec<u32>) {
        let trials: Vec<Arc<FrozenTrial>> = trials.into_iter().map(Arc::new).collect();
        let dirs = [dir];
        let view = StudyView::new("s", &dirs, &trials);
        let mut obs = StudyObservations::default();
        let members = obs.sync(&view);
        obs.split(&members, n_below, 1)
    }

    #[test]
    fn complete_trials_split_by_direction() {
        let ts = || {
            vec![
                trial(0, TrialState::Complete, Some(3.0)),
                trial(1, TrialState::Complete, Some(1.0)),
                trial(2, TrialState::Complete, Some(2.0)),
                trial(3, TrialState::Complete, Some(0.5)),
            ]
        };
        assert_eq!(
            split_of(ts(), 2, Direction::Minimize),
            (vec![1, 3], vec![0, 2])
        );
        assert_eq!(
            split_of(ts(), 2, Direction::Maximize),
            (vec![0, 2], vec![1, 3])
        );
        assert_eq!(split_of(ts(), 0, Direction::Minimize).0, Vec::<u32>::new());
    }

    #[test]
    fn pruned_rank_after_complete_by_step_then_value() {
        let ts = vec![
            pruned(0, 3, 0.1),
            trial(1, TrialState::Complete, Some(9.0)),
            pruned(2, 5, 0.9),
            pruned(3, 5, 0.2),
            trial(4, TrialState::Pruned, None),
        ];
        // Complete 1 first, then pruned at step 5 by value (3, 2), then step 3 (0), then no report (4).
        assert_eq!(split_of(ts.clone(), 1, Direction::Minimize).0, vec![1]);
        assert_eq!(split_of(ts.clone(), 2, Direction::Minimize).0, vec![1, 3]);
        assert_eq!(
            split_of(ts.clone(), 3, Direction::Minimize).0,
            vec![1, 2, 3]
        );
        assert_eq!(
            split_of(ts.clone(), 4, Direction::Minimize).0,
            vec![0, 1, 2, 3]
        );
        assert_eq!(split_of(ts, 5, Direction::Minimize).0, vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn the_kept_ranking_splits_as_a_selection_does() {
        // Ties in loss, pruned trials with and without reports, violations;
        // arriving in bulk, then one by one, one of them out of order.
        let make = |i: u64| match i % 9 {
            0 => pruned(i, i % 4, (i % 5) as f64),
            1 => trial(i, TrialState::Pruned, None),
            2 => oom(i),
            _ => trial(i, TrialState::Complete, Some(((i * 7) % 13) as f64)),
        };
        // The best `n_below` of `members` by sorting them all.
        let brute = |obs: &StudyObservations, members: &[u32], n_below: usize| {
            let mut r: Vec<Rank> = members
                .iter()
                .filter_map(|m| rank(obs.outcomes[*m as usize].as_ref()?, *m))
                .collect();
            r.sort_by(rank_order);
            let mut b: Vec<u32> = r.iter().take(n_below).map(|r| r.3).collect();
            b.sort_unstable();
            b
        };
        let dirs = [Direction::Minimize];
        let mut obs = StudyObservations::default();
        let mut trials: Vec<Arc<FrozenTrial>> = (0..200).map(|i| Arc::new(make(i))).collect();
        trials[150] = Arc::new(trial(150, TrialState::Running, None));
        for extra in 0..5 {
            let members = obs.sync(&StudyView::new("s", &dirs, &trials));
            // All members (the kept ranking) and some (a selection).
            let some: Vec<u32> = members.iter().copied().filter(|m| m % 3 != 0).collect();
            for n_below in [0, 1, 5, 25, 190, 400] {
                assert_eq!(
                    obs.split(&members, n_below, 1).0,
                    brute(&obs, &members, n_below)
                );
                assert_eq!(obs.split(&some, n_below, 1).0, brute(&obs, &some, n_below));
            }
            trials.push(Arc::new(make(200 + extra)));
            if extra == 2 {
                trials[150] = Arc::new(trial(150, TrialState::Complete, Some(-1.0)));
            }
        }
    }

    #[test]
    fn constraint_violations_are_always_bad_and_other_failures_ignored() {
        let mut err = trial(3, TrialState::Fail, None);
        err.system_attrs
            .insert(FailureKind::ATTR.into(), "error".into());
        let mut infeasible_complete = trial(4, TrialState::Complete, Some(-100.0));
        infeasible_complete.system_attrs.insert(
            FailureKind::CONSTRAINTS_ATTR.into(),
            serde_json::json!([0.0, 2.5]),
        );
        let ts = vec![
            oom(0),
            trial(1, TrialState::Complete, Some(5.0)),
            oom(2),
            err,
            infeasible_complete,
        ];
        let (below, above) = split_of(ts, 10, Direction::Minimize);
        assert_eq!(below, vec![1]);
        assert_eq!(above, vec![0, 2, 4]);
    }

    #[test]
    fn sync_is_incremental_and_detects_a_recreated_study() {
        let dirs = [Direction::Minimize];
        let mut obs = StudyObservations::default();
        let mut trials: Vec<Arc<FrozenTrial>> = (0..3)
            .map(|i| Arc::new(trial(i, TrialState::Complete, Some(i as f64))))
            .collect();
        trials.push(Arc::new(trial(3, TrialState::Running, None)));
        assert_eq!(
            obs.sync(&StudyView::new("s", &dirs, &trials)),
            vec![0, 1, 2]
        );
        trials[3] = Arc::new(trial(3, TrialState::Complete, Some(7.0)));
        assert_eq!(
            obs.sync(&StudyView::new("s", &dirs, &trials)),
            vec![0, 1, 2, 3]
        );
        assert_eq!(obs.n_seen, 4);
        let d: Distribution = FloatDistribution::new(0.0, 1.0).unwrap().into();
        assert_eq!(obs.column("x", &d)[3], 0.03);
        // A filtered view (a Hyperband bracket) sees only its own trials.
        let sub = vec![trials[1].clone(), trials[3].clone()];
        assert_eq!(obs.sync(&StudyView::new("s", &dirs, &sub)), vec![1, 3]);
        // Different ids under the same numbers: start over.
        let mut other = trial(0, TrialState::Complete, Some(1.0));
        other.id = 999;
        let fresh = vec![Arc::new(other)];
        assert_eq!(obs.sync(&StudyView::new("s", &dirs, &fresh)), vec![0]);
        assert_eq!(obs.n_seen, 1);
    }

    #[test]
    fn columns_stay_sorted_for_bulk_and_single_arrivals() {
        let dirs = [Direction::Minimize];
        let d: Distribution = FloatDistribution::new(0.0, 1.0).unwrap().into();
        let make = |i: u64| {
            let mut t = trial(i, TrialState::Complete, Some(1.0));
            t.internal_params
                .insert("x".into(), ((i * 37) % 101) as f64 / 101.0);
            Arc::new(t)
        };
        let mut obs = StudyObservations::default();
        let mut trials: Vec<Arc<FrozenTrial>> = (0..80).map(make).collect();
        obs.sync(&StudyView::new("s", &dirs, &trials));
        for i in 80..85 {
            trials.push(make(i));
            assert_eq!(
                obs.sync(&StudyView::new("s", &dirs, &trials)).len(),
                i as usize + 1
            );
        }
        let sorted = obs.sorted("x", &d);
        assert_eq!(sorted.len(), 85);
        assert!(sorted.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(obs.members.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn multi_objective_below_takes_whole_fronts_first() {
        let dirs = [Direction::Minimize, Direction::Minimize];
        let pts = [(1.0, 4.0), (2.0, 2.0), (4.0, 1.0), (3.0, 3.0), (5.0, 5.0)];
        let trials: Vec<Arc<FrozenTrial>> = pts
            .iter()
            .enumerate()
            .map(|(i, (a, b))| {
                let mut t = trial(i as u64, TrialState::Complete, None);
                t.values = Some(vec![*a, *b]);
                Arc::new(t)
            })
            .collect();
        let mut obs = StudyObservations::default();
        let members = obs.sync(&StudyView::new("s", &dirs, &trials));
        assert_eq!(obs.split(&members, 3, 2).0, vec![0, 1, 2]);
        assert_eq!(obs.split(&members, 4, 2).0, vec![0, 1, 2, 3]);
        // Cutting the first front keeps the most balanced point.
        assert_eq!(obs.split(&members, 1, 2).0, vec![1]);
    }
}
