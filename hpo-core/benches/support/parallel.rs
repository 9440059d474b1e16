//! Issue 17's parallel-proposals measure: how many finished trials a sampler
//! needs with several trials in flight to match what it reaches sequentially.
//!
//! Per problem, sampler and budget `B` (50, 100, 200):
//!
//! * the **target** is the sequential runs' median (over seeds) best-so-far
//!   after `B` finished trials;
//! * `T` is the smallest number of finished trials at which the in-flight
//!   runs' median best-so-far (over the same seeds) is at or below the
//!   target; the in-flight runs go to [`OVERRUN`] x the largest budget so
//!   that `T` can exceed `B`, and a target not reached by then counts as
//!   beyond it (an infinite ratio);
//! * the **efficiency ratio** is `T / B`: 1 is as efficient per finished
//!   trial as sequential, 1.10 needs 10 % more finished trials.
//!
//! `T / B` leans below 1 where the sequential median curve is flat before
//! `B` (it reached the target earlier), so each row also gives `T / T_seq`,
//! with `T_seq` the sequential curve's own first count at the target: the
//! in-flight runs' trials against the sequential runs' trials to the same
//! level, exactly 1 for identical runs.
//!
//! A summary per budget gives the median ratio over problems and the share of
//! problems at or below [`TOLERANCE`], for the whole suite and each half. The
//! target ("within 10 % of sequential") is met where the median ratio is at
//! most [`TOLERANCE`] at every budget.
//!
//! The medians treat a run with no feasible trial yet as the worst value, as
//! the rest of the suite does. A median best-so-far curve never rises (each
//! run's never does), so `T` is well defined; because the curve can be flat,
//! `T` may be below `B` even for identical runs, where the ratio is at most 1.

use super::suite::{or_worst, percentile, Half, Record};
use anyhow::{bail, Result};
use std::collections::BTreeMap;

/// How far past the largest budget the in-flight runs go, so that a target
/// reached late is still found.
pub const OVERRUN: f64 = 1.25;

/// The ratio `T / B` that still counts as "within 10 % of sequential".
pub const TOLERANCE: f64 = 1.10;

/// The length of the in-flight runs for budgets up to `largest`.
pub fn overrun_trials(largest: usize) -> usize {
    (largest as f64 * OVERRUN).ceil() as usize
}

/// One (problem, sampler, budget): the target and when the in-flight runs
/// reached it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reach {
    /// The problem's name.
    pub problem: String,
    /// Its half.
    pub half: Half,
    /// The sampler's name.
    pub sampler: String,
    /// The budget `B`, in finished trials.
    pub budget: usize,
    /// The sequential median best-so-far at `B`.
    pub target: f64,
    /// The in-flight median best-so-far at `B`, for reference.
    pub parallel_at_budget: f64,
    /// `T`: the first finished-trial count whose in-flight median reaches the
    /// target (`None`: not within the runs' length).
    pub reached_at: Option<usize>,
    /// `T_seq`: the first finished-trial count whose sequential median
    /// reaches the target (at most `B`; below it where the curve is flat).
    pub sequential_reached_at: usize,
    /// How long the in-flight runs were.
    pub horizon: usize,
}

impl Reach {
    /// `T / B`; infinite where the target was not reached.
    pub fn ratio(&self) -> f64 {
        self.reached_at
            .map_or(f64::INFINITY, |t| t as f64 / self.budget as f64)
    }

    /// `T / T_seq`: in-flight against sequential trials to the same level,
    /// without `T / B`'s lean below 1 where the sequential curve is flat
    /// before `B` (identical runs give exactly 1); infinite where the target
    /// was not reached.
    pub fn paired_ratio(&self) -> f64 {
        self.reached_at.map_or(f64::INFINITY, |t| {
            t as f64 / self.sequential_reached_at.max(1) as f64
        })
    }
}

/// The median over runs of the best-so-far after each finished trial (the
/// shortest run's length); a missing value counts as the worst.
pub fn median_trajectory(runs: &[&Record]) -> Vec<f64> {
    let len = runs.iter().map(|r| r.trajectory.len()).min().unwrap_or(0);
    let mut column = Vec::with_capacity(runs.len());
    (0..len)
        .map(|t| {
            column.clear();
            column.extend(runs.iter().map(|r| or_worst(r.trajectory[t])));
            column.sort_by(f64::total_cmp);
            percentile(&column, 50.0)
        })
        .collect()
}

/// The first count of finished trials (1-based) at which `curve` is at or
/// below `target`.
pub fn first_reaching(curve: &[f64], target: f64) -> Option<usize> {
    curve.iter().position(|v| *v <= target).map(|i| i + 1)
}

/// Pairs the `sequential` and `parallel` records by (problem, sampler) and
/// measures each budget of `budgets`. Both sets must hold the same seeds;
/// the sequential runs must reach every budget.
pub fn reaches(
    sequential: &[Record],
    parallel: &[Record],
    budgets: &[usize],
) -> Result<Vec<Reach>> {
    let (seq, par) = (by_study(sequential), by_study(parallel));
    let mut out = Vec::new();
    // In the records' order (problems as the spec lists them).
    let mut seen = std::collections::BTreeSet::new();
    for r in sequential {
        let key = (r.problem.as_str(), r.sampler.as_str());
        if !seen.insert(key) {
            continue;
        }
        let s = &seq[&key];
        let Some(p) = par.get(&key) else {
            bail!("no in-flight runs of {} / {}", key.0, key.1);
        };
        let seeds = |runs: &[&Record]| {
            let mut v: Vec<u64> = runs.iter().map(|r| r.seed).collect();
            v.sort_unstable();
            v
        };
        if seeds(s) != seeds(p) {
            bail!("{} / {}: the two sets hold other seeds", key.0, key.1);
        }
        let seq_curve = median_trajectory(s);
        let par_curve = median_trajectory(p);
        for &budget in budgets {
            let Some(&target) = seq_curve.get(budget.wrapping_sub(1)) else {
                bail!(
                    "{} / {}: sequential runs shorter than {budget}",
                    key.0,
                    key.1
                );
            };
            out.push(Reach {
                problem: r.problem.clone(),
                half: r.half,
                sampler: r.sampler.clone(),
                budget,
                target,
                parallel_at_budget: par_curve
                    .get(budget.wrapping_sub(1))
                    .copied()
                    .unwrap_or(f64::NAN),
                reached_at: first_reaching(&par_curve, target),
                sequential_reached_at: first_reaching(&seq_curve, target).unwrap_or(budget),
                horizon: par_curve.len(),
            });
        }
    }
    Ok(out)
}

/// Records by (problem, sampler).
fn by_study(records: &[Record]) -> BTreeMap<(&str, &str), Vec<&Record>> {
    let mut out: BTreeMap<(&str, &str), Vec<&Record>> = BTreeMap::new();
    for r in records {
        out.entry((r.problem.as_str(), r.sampler.as_str()))
            .or_default()
            .push(r);
    }
    out
}

/// The median of ratios that may be infinite (a not-reached target):
/// infinite when a middle value is.
pub fn median_ratio(ratios: &[f64]) -> f64 {
    let mut s = ratios.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return f64::NAN;
    }
    let n = s.len();
    let (a, b) = (s[(n - 1) / 2], s[n / 2]);
    if a.is_infinite() || b.is_infinite() {
        f64::INFINITY
    } else {
        (a + b) / 2.0
    }
}

/// One row of the summary: a sampler, a half (`None`: both), a budget.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The sampler's name.
    pub sampler: String,
    /// The half, or `None` for the whole suite.
    pub half: Option<Half>,
    /// The budget `B`.
    pub budget: usize,
    /// Problems measured.
    pub problems: usize,
    /// The median over problems of `T / B` (infinite: more than half not reached).
    pub median_ratio: f64,
    /// Problems with `T / B` at most [`TOLERANCE`].
    pub within: usize,
    /// The median over problems of `T / T_seq` ([`Reach::paired_ratio`]).
    pub median_paired_ratio: f64,
    /// Problems with `T / T_seq` at most [`TOLERANCE`].
    pub paired_within: usize,
    /// Problems whose target was not reached at all.
    pub not_reached: usize,
}

impl Summary {
    /// Whether the median `T / B` is within [`TOLERANCE`].
    pub fn met(&self) -> bool {
        self.median_ratio <= TOLERANCE
    }

    /// Whether the median `T / T_seq` is within [`TOLERANCE`].
    pub fn paired_met(&self) -> bool {
        self.median_paired_ratio <= TOLERANCE
    }
}

/// Per sampler, half (whole suite first, then tuning, held out) and budget.
pub fn summarize(reaches: &[Reach]) -> Vec<Summary> {
    let mut samplers: Vec<&str> = Vec::new();
    let mut budgets: Vec<usize> = Vec::new();
    for r in reaches {
        if !samplers.contains(&r.sampler.as_str()) {
            samplers.push(&r.sampler);
        }
        if !budgets.contains(&r.budget) {
            budgets.push(r.budget);
        }
    }
    budgets.sort_unstable();
    let mut out = Vec::new();
    for s in samplers {
        for half in [None, Some(Half::Tuning), Some(Half::HeldOut)] {
            for &budget in &budgets {
                let mine: Vec<&Reach> = reaches
                    .iter()
                    .filter(|r| r.sampler == s && r.budget == budget)
                    .filter(|r| half.is_none_or(|h| r.half == h))
                    .collect();
                if mine.is_empty() {
                    continue;
                }
                let ratios: Vec<f64> = mine.iter().map(|r| r.ratio()).collect();
                let paired: Vec<f64> = mine.iter().map(|r| r.paired_ratio()).collect();
                out.push(Summary {
                    sampler: s.to_owned(),
                    half,
                    budget,
                    problems: ratios.len(),
                    median_ratio: median_ratio(&ratios),
                    within: ratios.iter().filter(|x| **x <= TOLERANCE).count(),
                    median_paired_ratio: median_ratio(&paired),
                    paired_within: paired.iter().filter(|x| **x <= TOLERANCE).count(),
                    not_reached: ratios.iter().filter(|x| x.is_infinite()).count(),
                });
            }
        }
    }
    out
}

/// Whether `sampler` meets the target: the whole suite's median `T / B`
/// (`paired`: `T / T_seq`) within [`TOLERANCE`] at every budget.
pub fn target_met(summaries: &[Summary], sampler: &str, paired: bool) -> bool {
    let mine: Vec<&Summary> = summaries
        .iter()
        .filter(|s| s.sampler == sampler && s.half.is_none())
        .collect();
    !mine.is_empty()
        && mine
            .iter()
            .all(|s| if paired { s.paired_met() } else { s.met() })
}
