//! Parameter importance by PED-ANOVA.
//!
//! PED-ANOVA (Watanabe, Bansal and Hutter, "PED-ANOVA: Efficiently
//! Quantifying Hyperparameter Importance in Arbitrary Subspaces", IJCAI 2023;
//! conditional parameters as in "Conditional PED-ANOVA", KDD 2026) measures
//! how much the distribution of a parameter among the top `γ'` quantile of
//! trials differs from its distribution among the top `γ` quantile (here, as
//! in Optuna's default, `γ' = 0.1` and `γ = 1`: all trials). The difference is
//! the Pearson divergence `Σ p_region (p_top / p_region - 1)²` between two 1-D
//! Parzen estimators on a 50-point grid (Scott's rule bandwidth, a uniform
//! prior kernel), which the paper proves equals the local functional-ANOVA
//! variance of the indicator "this trial is in the top quantile".
//!
//! This follows Optuna 5.0's `PedAnovaImportanceEvaluator` step by step (grid,
//! bandwidth, prior weight 1, regimes of at least 2 trials, the final
//! `(γ'/γ)²` factor), so that `hpo plot importance` and Optuna's
//! `get_param_importances(study, evaluator=PedAnovaImportanceEvaluator())`
//! agree on the same study. Multi-objective studies are ranked by their first
//! objective (Optuna's `target=lambda t: t.values[0]`).

use crate::open::StudyData;
use hpo::distribution::Distribution;
use hpo::{Direction, FrozenTrial, TrialState};
use std::sync::Arc;

/// Optuna's default `target_quantile` (γ').
pub const TARGET_QUANTILE: f64 = 0.1;
const N_STEPS: usize = 50;
const PRIOR_WEIGHT: f64 = 1.0;
const MIN_TRIALS_IN_REGIME: usize = 2;

/// Importance of each parameter, normalised to sum to 1 (equal shares when
/// all are 0), most important first. Empty when the study has no parameters.
pub fn importances(study: &StudyData) -> Vec<(String, f64)> {
    let raw = raw_importances(study, TARGET_QUANTILE);
    normalise(raw)
}

/// How many complete trials fall in the top quantile (ties aside): PED-ANOVA
/// needs about 5 for a stable ranking.
pub fn top_count(study: &StudyData) -> usize {
    let n = study
        .trials
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .count();
    (TARGET_QUANTILE * n as f64).ceil() as usize
}

/// Importances as a table, CSV or a JSON object (most important first).
pub fn render(imp: &[(String, f64)], format: crate::show::Format) -> String {
    use crate::show::{csv_field, table, Format};
    match format {
        Format::Json => {
            let map: serde_json::Map<String, serde_json::Value> = imp
                .iter()
                .map(|(k, v)| (k.clone(), crate::study::finite_json(*v)))
                .collect();
            let mut s = serde_json::to_string_pretty(&map).unwrap_or_default();
            s.push('\n');
            s
        }
        Format::Csv => {
            let mut s = String::from("param,importance\n");
            for (k, v) in imp {
                s.push_str(&format!("{},{}\n", csv_field(k), crate::study::num(*v)));
            }
            s
        }
        Format::Table => {
            let mut rows = vec![vec!["param".to_owned(), "importance".to_owned()]];
            rows.extend(
                imp.iter()
                    .map(|(k, v)| vec![crate::study::clean(k), format!("{v:.4}")]),
            );
            table(&rows)
        }
    }
}

fn normalise(mut raw: Vec<(String, f64)>) -> Vec<(String, f64)> {
    let sum: f64 = raw.iter().map(|(_, v)| v).sum();
    let n = raw.len() as f64;
    for (_, v) in &mut raw {
        *v = if sum > 0.0 { *v / sum } else { 1.0 / n };
    }
    raw.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    raw
}

/// Unnormalised PED-ANOVA importances with region quantile 1.
pub fn raw_importances(study: &StudyData, target_quantile: f64) -> Vec<(String, f64)> {
    let sign = match study.directions.first() {
        Some(Direction::Maximize) => -1.0,
        _ => 1.0,
    };
    let trials: Vec<(&Arc<FrozenTrial>, f64)> = study
        .trials
        .iter()
        .filter(|t| t.state == TrialState::Complete)
        .filter_map(|t| {
            let v = t.values.as_ref()?;
            v.iter()
                .all(|x| x.is_finite())
                .then(|| Some((t, sign * *v.first()?)))?
        })
        .collect();
    let names = crate::study::param_names(&StudyData {
        trials: trials.iter().map(|(t, _)| Arc::clone(t)).collect(),
        ..study.clone()
    });
    if trials.len() <= 1 {
        return names.into_iter().map(|n| (n, 0.0)).collect();
    }
    // Optuna's quantile filter: the cut-off is the ceil(q n)-th smallest loss,
    // ties kept.
    let mut losses: Vec<f64> = trials.iter().map(|(_, l)| *l).collect();
    losses.sort_by(f64::total_cmp);
    let cut_index = ((target_quantile * losses.len() as f64).ceil() as usize).max(1) - 1;
    let cutoff = losses[cut_index];
    let is_top: Vec<bool> = trials.iter().map(|(_, l)| *l <= cutoff).collect();
    let n_top = is_top.iter().filter(|b| **b).count();
    let quantile = n_top as f64 / trials.len() as f64;

    names
        .into_iter()
        .map(|name| {
            // Regimes: trials grouped by the parameter's distribution
            // (None when the parameter is inactive).
            let mut regimes: Vec<(Option<&Distribution>, Vec<usize>)> = Vec::new();
            for (i, (t, _)) in trials.iter().enumerate() {
                let d = t.distributions.get(&name);
                match regimes.iter_mut().find(|(rd, _)| *rd == d) {
                    Some((_, v)) => v.push(i),
                    None => regimes.push((d, vec![i])),
                }
            }
            let mut total = 0.0;
            for (dist, members) in regimes {
                let Some(dist) = dist else { continue };
                if members.len() < MIN_TRIALS_IN_REGIME || is_single(dist) {
                    continue;
                }
                let top: Vec<usize> = members.iter().copied().filter(|i| is_top[*i]).collect();
                if top.is_empty() {
                    continue;
                }
                let alpha = top.len() as f64 / n_top as f64;
                let beta = members.len() as f64 / trials.len() as f64;
                let values = |idx: &[usize]| -> Vec<f64> {
                    idx.iter()
                        .filter_map(|i| trials[*i].0.internal_params.get(&name).copied())
                        .collect()
                };
                let div = pearson_divergence(dist, &values(&top), &values(&members));
                total += alpha * alpha / beta * div;
            }
            (name, total * quantile * quantile)
        })
        .collect()
}

fn is_single(d: &Distribution) -> bool {
    match d {
        Distribution::Float(f) => f.low() == f.high(),
        Distribution::Int(i) => i.low() == i.high(),
        Distribution::Categorical(c) => c.choices().len() <= 1,
    }
}

/// `Σ_grid p_region (p_top / p_region - 1)²`.
fn pearson_divergence(dist: &Distribution, top: &[f64], region: &[f64]) -> f64 {
    let p_top = grid_pdf(dist, top);
    let p_region = grid_pdf(dist, region);
    p_top
        .iter()
        .zip(&p_region)
        .map(|(t, r)| {
            let (t, r) = (t + 1e-12, r + 1e-12);
            r * (t / r - 1.0).powi(2)
        })
        .sum()
}

/// The Parzen estimator's probability of each grid cell.
fn grid_pdf(dist: &Distribution, values: &[f64]) -> Vec<f64> {
    match dist {
        Distribution::Categorical(c) => {
            let n = c.choices().len();
            let mut counts = vec![0usize; n];
            for v in values {
                let i = *v as usize;
                if i < n {
                    counts[i] += 1;
                }
            }
            categorical_pdf(&counts)
        }
        Distribution::Float(_) | Distribution::Int(_) => numeric_pdf(&numeric_counts(dist, values)),
    }
}

/// Counts of values per grid cell (Optuna's `_count_numerical_param_in_grid`).
fn numeric_counts(dist: &Distribution, values: &[f64]) -> Vec<usize> {
    let (low, high, log, n_steps) = match dist {
        Distribution::Float(f) => {
            let n = match f.step() {
                Some(s) if !f.is_log() => {
                    (((f.high() - f.low()) / s).round() as usize + 1).min(N_STEPS)
                }
                _ => N_STEPS,
            };
            (f.low(), f.high(), f.is_log(), n)
        }
        Distribution::Int(i) => {
            let (lo, hi) = (i.low() as f64, i.high() as f64);
            let n = if i.is_log() {
                let log2 = ((hi - lo + 1.0).ln() / 2f64.ln()).ceil() as usize + 1;
                log2.min(N_STEPS)
            } else {
                (((hi - lo) / i.step() as f64).round() as usize + 1).min(N_STEPS)
            };
            (lo, hi, i.is_log(), n)
        }
        Distribution::Categorical(_) => return Vec::new(),
    };
    let n_steps = n_steps.max(2);
    let t = |x: f64| if log { x.ln() } else { x };
    let (lo, hi) = (t(low), t(high));
    let step = (hi - lo) / (n_steps - 1) as f64;
    let mut counts = vec![0usize; n_steps];
    for v in values {
        let idx = if step > 0.0 {
            ((t(*v) - lo) / step - 0.5).ceil()
        } else {
            0.0
        };
        let idx = idx.clamp(0.0, (n_steps - 1) as f64) as usize;
        counts[idx] += 1;
    }
    counts
}

/// Optuna's `ScottParzenEstimator` on the grid `0..counts.len()`: one
/// discretised truncated-normal kernel per occupied cell (weighted by its
/// count) with Scott's-rule bandwidth, plus a wide prior kernel.
fn numeric_pdf(counts: &[usize]) -> Vec<f64> {
    let n = counts.len();
    let (low, high) = (0.0, (n - 1) as f64);
    let obs: Vec<(f64, f64)> = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(i, c)| (i as f64, *c as f64))
        .collect();
    let mut kernels: Vec<(f64, f64, f64)> = Vec::new(); // (weight, mu, sigma)
    if obs.is_empty() {
        kernels.push((1.0, (low + high) / 2.0, high - low + 1.0));
    } else {
        let w_sum: f64 = obs.iter().map(|(_, w)| w).sum();
        let mean = obs.iter().map(|(x, w)| x * w).sum::<f64>() / w_sum;
        let var =
            obs.iter().map(|(x, w)| (x - mean).powi(2) * w).sum::<f64>() / (w_sum - 1.0).max(1.0);
        let mut cum = Vec::with_capacity(obs.len());
        let mut acc = 0.0;
        for (_, w) in &obs {
            acc += w;
            cum.push(acc);
        }
        // numpy searchsorted: side="left" (first cum >= v), "right" (first cum > v).
        let q1v = (w_sum / 4.0).floor();
        let q3v = (w_sum * 3.0 / 4.0).floor();
        let q1 = cum.iter().position(|c| *c >= q1v).unwrap_or(cum.len());
        let q3 = cum.iter().position(|c| *c > q3v).unwrap_or(cum.len());
        let at = |i: usize| obs[i.min(obs.len() - 1)].0;
        let iqr = at(q3) - at(q1);
        let sigma = 1.059 * (iqr / 1.34).min(var.sqrt()) * w_sum.powf(-0.2);
        let sigma = sigma.max(0.5 / 1.64);
        let total = w_sum + PRIOR_WEIGHT;
        for (x, w) in &obs {
            kernels.push((w / total, *x, sigma));
        }
        kernels.push((PRIOR_WEIGHT / total, (low + high) / 2.0, high - low + 1.0));
    }
    (0..n)
        .map(|g| {
            let x = g as f64;
            kernels
                .iter()
                .map(|(w, mu, s)| {
                    let mass = gauss_mass((x - 0.5 - mu) / s, (x + 0.5 - mu) / s);
                    let norm = gauss_mass((low - 0.5 - mu) / s, (high + 0.5 - mu) / s);
                    w * mass / norm
                })
                .sum()
        })
        .collect()
}

/// Optuna's categorical Parzen estimator: each observed choice's kernel puts
/// `1 + prior/(n+1)` on it and `prior/(n+1)` on the others; the prior kernel
/// is uniform.
fn categorical_pdf(counts: &[usize]) -> Vec<f64> {
    let k = counts.len();
    let obs: Vec<(usize, f64)> = counts
        .iter()
        .enumerate()
        .filter(|(_, c)| **c > 0)
        .map(|(i, c)| (i, *c as f64))
        .collect();
    if obs.is_empty() {
        return vec![1.0 / k as f64; k];
    }
    let n_kernels = (obs.len() + 1) as f64;
    let base = PRIOR_WEIGHT / n_kernels;
    let row_sum = base * k as f64 + 1.0;
    let w_sum: f64 = obs.iter().map(|(_, w)| w).sum::<f64>() + PRIOR_WEIGHT;
    (0..k)
        .map(|c| {
            let mut p = PRIOR_WEIGHT / w_sum / k as f64;
            for (i, w) in &obs {
                let cell = if *i == c { base + 1.0 } else { base };
                p += w / w_sum * cell / row_sum;
            }
            p
        })
        .collect()
}

/// `Φ(b) - Φ(a)` for standard-normal bounds, accurate in the tails.
fn gauss_mass(a: f64, b: f64) -> f64 {
    if a >= 0.0 {
        0.5 * (libm::erfc(a / std::f64::consts::SQRT_2) - libm::erfc(b / std::f64::consts::SQRT_2))
    } else if b <= 0.0 {
        0.5 * (libm::erfc(-b / std::f64::consts::SQRT_2)
            - libm::erfc(-a / std::f64::consts::SQRT_2))
    } else {
        1.0 - 0.5 * libm::erfc(-a / std::f64::consts::SQRT_2)
            - 0.5 * libm::erfc(b / std::f64::consts::SQRT_2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hpo::distribution::{CategoricalDistribution, FloatDistribution};
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    /// Uniform random trials of `f` over `[0, 1]^d` (random search: the
    /// setting in which PED-ANOVA's importances have a closed form).
    fn study_of(d: usize, n: usize, f: impl Fn(&[f64]) -> f64) -> StudyData {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let dist = Distribution::Float(FloatDistribution::new(0.0, 1.0).unwrap());
        let trials = (0..n)
            .map(|i| {
                let x: Vec<f64> = (0..d).map(|_| rng.random::<f64>()).collect();
                let mut t = FrozenTrial::new(i as u64, i as u64, TrialState::Complete);
                for (j, xj) in x.iter().enumerate() {
                    t.internal_params.insert(format!("x{j}"), *xj);
                    t.distributions.insert(format!("x{j}"), dist.clone());
                }
                t.values = Some(vec![f(&x)]);
                Arc::new(t)
            })
            .collect();
        StudyData {
            name: "analytic".into(),
            directions: vec![Direction::Minimize],
            user_attrs: BTreeMap::new(),
            trials,
        }
    }

    fn get(imp: &[(String, f64)], name: &str) -> f64 {
        imp.iter().find(|(n, _)| n == name).unwrap().1
    }

    #[test]
    fn a_parameter_the_function_ignores_has_no_importance() {
        // f = x0: the top 10% is x0 < 0.1, so x0 carries all the importance.
        let imp = importances(&study_of(2, 1000, |x| x[0]));
        assert!(get(&imp, "x0") > 0.97, "{imp:?}");
        assert!(get(&imp, "x1") < 0.03, "{imp:?}");
    }

    #[test]
    fn raw_importance_matches_the_closed_form() {
        // For f = x0 under uniform sampling, the top-γ set is x0 < γ: its
        // density is 1/γ on [0, γ], so the Pearson divergence to the uniform
        // density is (1 - γ)/γ = 9 for γ = 0.1, and PED-ANOVA's importance is
        // γ² (1 - γ)/γ = γ (1 - γ) = 0.09 (the variance of the indicator
        // "in the top 10%", as the paper's Theorem says). The grid and the
        // kernels smooth the step, so the estimate is a little lower.
        let raw = raw_importances(&study_of(1, 2000, |x| x[0]), 0.1);
        let v = get(&raw, "x0");
        assert!(
            (0.06..=0.095).contains(&v),
            "importance {v}, expected ~0.09"
        );
    }

    #[test]
    fn symmetric_parameters_share_importance_and_scale_orders_them() {
        let imp = importances(&study_of(2, 2000, |x| {
            (x[0] - 0.5).abs() + (x[1] - 0.5).abs()
        }));
        let (a, b) = (get(&imp, "x0"), get(&imp, "x1"));
        assert!((a - b).abs() < 0.15, "{imp:?}");
        // f = 10 x0 + x1: x0 dominates the ranking; x2 is noise.
        let imp = importances(&study_of(3, 2000, |x| 10.0 * x[0] + x[1]));
        assert_eq!(imp[0].0, "x0", "{imp:?}");
        assert_eq!(imp[2].0, "x2", "{imp:?}");
    }

    #[test]
    fn categorical_parameters_count_too() {
        // Five choices; the loss is 0 for "a" and 1 otherwise, whatever x0.
        // The top quantile (ties kept) is exactly the "a" trials, in which x0
        // is still uniform: all the importance is `opt`'s. (Optuna's
        // categorical estimator smooths with a prior kernel, so the raw
        // divergence is well below the 0.2 (5 - 1)² + 0.8 = 4 of the exact
        // densities; the share is what is known.)
        let mut s = study_of(1, 2000, |x| x[0]);
        let cat = Distribution::Categorical(
            CategoricalDistribution::new(["a", "b", "c", "d", "e"]).unwrap(),
        );
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        for t in &mut s.trials {
            let mut u = (**t).clone();
            let c: usize = rng.random_range(0..5);
            u.internal_params.insert("opt".into(), c as f64);
            u.distributions.insert("opt".into(), cat.clone());
            u.values = Some(vec![if c == 0 { 0.0 } else { 1.0 }]);
            *t = Arc::new(u);
        }
        let imp = importances(&s);
        assert_eq!(imp[0].0, "opt", "{imp:?}");
        assert!(imp[0].1 > 0.95, "{imp:?}");
    }

    #[test]
    fn gauss_mass_is_a_probability() {
        assert!((gauss_mass(f64::NEG_INFINITY, f64::INFINITY) - 1.0).abs() < 1e-12);
        assert!((gauss_mass(-1.0, 1.0) - 0.682_689_492).abs() < 1e-8);
        assert!(gauss_mass(8.0, 9.0) > 0.0);
        let p = numeric_pdf(&[3, 0, 0, 1, 0]);
        assert!((p.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{p:?}");
        let c = categorical_pdf(&[2, 0, 1]);
        assert!((c.iter().sum::<f64>() - 1.0).abs() < 1e-9, "{c:?}");
    }
}
