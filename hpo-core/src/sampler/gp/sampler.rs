//! [`GpSampler`]: the [`crate::Sampler`] implementation.

use super::acquisition::Acquisition;
use super::config::GpConfig;
use super::fit::{self, Data};
use super::kernel::KernelParams;
use super::linalg::Cholesky;
use super::model::Model;
use super::search::{self, Effort};
use super::space::Axis;
use crate::direction::Direction;
use crate::distribution::{Distribution, Support};
use crate::error::Result;
use crate::sampler::sample_uniform;
use crate::sampler::stream::{os_seed, trial_rng};
use crate::sampler::tpe::truncnorm::ndtri;
use crate::sampler::{intersection_search_space, RelativeSample, Sampler, SamplerConfig};
use crate::trial::{FailureKind, FrozenTrial, TrialState};
use crate::view::StudyView;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Mutex;

/// System attribute with the joint values proposed for a trial (internal
/// values by name), so that trials started elsewhere see where it runs.
pub(super) const PARAMS_ATTR: &str = "gp:params";
/// System attribute with the objective kernel a proposal used:
/// `{"n": observations at the fit, "raw": [ln λ.., ln s, ln(σ² - 0.99·min)]}`.
pub(super) const KERNEL_ATTR: &str = "gp:kernel";
/// As [`KERNEL_ATTR`], for the feasibility model.
pub(super) const FEASIBILITY_ATTR: &str = "gp:feasibility";

/// Gaussian-process Bayesian optimisation, after Optuna 5.0's `GPSampler`.
///
/// After [`GpConfig::n_startup_trials`] random trials, each trial's
/// parameters maximise the log expected improvement of a Gaussian process
/// fitted to the finished trials: inputs in the unit cube (log parameters in
/// log units), a Matérn-5/2 kernel with one lengthscale per parameter
/// (a Hamming distance for categoricals), hyperparameters fitted by
/// maximising the marginal likelihood under Optuna's priors. It suits the
/// studies GPU users run, tens to a few hundred expensive trials over
/// numeric parameters, where it needs fewer trials than TPE.
///
/// * **Failures as constraints**: failed trials (out of memory, infeasible,
///   an error such as a diverged loss, a panic, a value that is not finite;
///   not a worker that stopped sending heartbeats) and COMPLETE trials with
///   violated Optuna constraints train a second GP on feasibility; the
///   acquisition becomes `log EI + log P(feasible)`, so the sampler learns
///   where configurations do not fit or do not work.
/// * **Pruned trials** inform the model with their last reported value,
///   never better than the median COMPLETE trial
///   ([`GpConfig::consider_pruned_trials`]).
/// * **Trials in flight** (threads, worker processes, machines) count as
///   observed at the model's own prediction (the Kriging believer): their
///   uncertainty vanishes, so parallel proposals spread out.
/// * **Conditional parameters** (not in every COMPLETE trial), multi-objective
///   studies and values outside a narrowed support are sampled uniformly at
///   random, with one log line per parameter.
/// * **Cost**: the kernel is refitted on a schedule ([`GpConfig::refit_fraction`])
///   and its Cholesky factor grown row by row in between; each proposal
///   records the kernel it used on its trial, so a study resumed in another
///   process continues the same search, proposal for proposal.
///
/// ```
/// use hpo_core::{Direction, GpConfig, GpSampler, Study};
/// use std::sync::Arc;
///
/// # fn main() -> hpo_core::Result<()> {
/// let sampler = GpSampler::with_config(GpConfig { n_preliminary_samples: 256, ..GpConfig::seeded(3) })?;
/// let study = Study::builder()
///     .direction(Direction::Minimize)
///     .sampler(Arc::new(sampler))
///     .build()?;
/// study.optimize(25, |trial| {
///     let lr = trial.suggest_float_log("lr", 1e-5, 1e-1)?;
///     let x = trial.suggest_float("x", -3.0, 3.0)?;
///     Ok((lr.log10() + 3.0).powi(2) + (x - 1.0).powi(2))
/// })?;
/// assert!(study.best_value()? < 0.5);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct GpSampler {
    config: GpConfig,
    seed: u64,
    /// Per study: the last objective factor, for growing it.
    cache: Mutex<HashMap<String, Cached>>,
    /// Parameters already reported as sampled independently.
    warned: Mutex<HashSet<String>>,
}

/// The objective factor of one proposal, kept for the next.
#[derive(Debug)]
struct Cached {
    space: Vec<(String, Distribution)>,
    rows: Vec<u64>,
    params: KernelParams,
    chol: Cholesky,
}

impl Default for GpSampler {
    fn default() -> Self {
        Self::new()
    }
}

/// Observations of the objective and of feasibility, by trial number.
#[derive(Debug, Default)]
struct Observations {
    /// Objective: numbers, points, values (larger is better, raw; pruned
    /// trials capped at the median, violations at the worst value).
    numbers: Vec<u64>,
    x: Vec<Vec<f64>>,
    y: Vec<f64>,
    /// Whether each objective observation is a feasible COMPLETE trial
    /// (what may set the incumbent).
    incumbent: Vec<bool>,
    /// Feasibility: points and labels (`true`: feasible).
    fx: Vec<Vec<f64>>,
    feasible: Vec<bool>,
}

impl GpSampler {
    /// A sampler with Optuna's defaults, seeded from the operating system.
    pub fn new() -> Self {
        Self::build(GpConfig::default())
    }

    /// A reproducible sampler with the default settings.
    pub fn seeded(seed: u64) -> Self {
        Self::build(GpConfig::seeded(seed))
    }

    /// A sampler with `config`, which is checked first.
    pub fn with_config(config: GpConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self::build(config))
    }

    fn build(config: GpConfig) -> Self {
        GpSampler {
            seed: config.seed.unwrap_or_else(os_seed),
            config,
            cache: Mutex::new(HashMap::new()),
            warned: Mutex::new(HashSet::new()),
        }
    }

    /// The settings.
    pub fn config(&self) -> &GpConfig {
        &self.config
    }

    fn warn_once(&self, key: &str, message: impl FnOnce() -> String) {
        if !self.config.warn_independent_sampling {
            return;
        }
        let Ok(mut warned) = self.warned.lock() else {
            return;
        };
        if warned.insert(key.to_owned()) {
            tracing::warn!("{}", message());
        }
    }

    /// The objective and feasibility observations over `axes`.
    fn observe(&self, study: &StudyView<'_>, axes: &[Axis], current: u64) -> Observations {
        let sign = if study.direction() == Direction::Minimize {
            -1.0
        } else {
            1.0
        };
        let mut obs = Observations::default();
        let mut pruned = Vec::new();
        let mut violated_points = Vec::new();
        for t in study.iter() {
            if t.number == current {
                continue;
            }
            let Some(x) = point(axes, t) else { continue };
            let violated = t.constraint_violation().is_some_and(|v| v > 0.0);
            match t.state {
                TrialState::Complete => {
                    let Some(v) = t.value().filter(|v| !v.is_nan()) else {
                        continue;
                    };
                    obs.numbers.push(t.number);
                    obs.x.push(x.clone());
                    obs.y.push(sign * v);
                    obs.incumbent.push(!violated);
                    obs.fx.push(x);
                    obs.feasible.push(!violated);
                }
                TrialState::Pruned => {
                    obs.fx.push(x.clone());
                    obs.feasible.push(!violated);
                    if self.config.consider_pruned_trials {
                        if let Some((_, v)) = t.last_intermediate().filter(|(_, v)| !v.is_nan()) {
                            pruned.push((t.number, x, sign * v));
                        }
                    }
                }
                // A configuration that failed (out of memory, infeasible, an
                // error such as a diverged loss, a panic, a value that is not
                // finite) does not work there; a worker that stopped sending
                // heartbeats, or a study stopped by a signal, says nothing
                // about its configuration.
                TrialState::Fail if t.failure().is_some_and(FailureKind::blames_configuration) => {
                    obs.fx.push(x.clone());
                    obs.feasible.push(false);
                    violated_points.push((t.number, x));
                }
                _ => {}
            }
        }
        let mut extra = Vec::new();
        if !obs.y.is_empty() {
            let mut sorted = obs.y.clone();
            sorted.sort_by(f64::total_cmp);
            // A pruned trial is never better than the median COMPLETE one.
            let median = sorted[(sorted.len() - 1) / 2];
            extra.extend(pruned.into_iter().map(|(n, x, v)| (n, x, v.min(median))));
            // A configuration that did not fit has no value; it enters as
            // the worst one seen, so the objective's model does not
            // extrapolate into the region (the feasibility model draws its
            // boundary).
            let worst = sorted[0];
            extra.extend(violated_points.into_iter().map(|(n, x)| (n, x, worst)));
        }
        if !extra.is_empty() {
            for (number, x, v) in extra {
                obs.numbers.push(number);
                obs.x.push(x);
                obs.y.push(v);
                obs.incumbent.push(false);
            }
            // Keep trial-number order (what makes cached factors reusable).
            let mut order: Vec<usize> = (0..obs.numbers.len()).collect();
            order.sort_by_key(|&i| obs.numbers[i]);
            obs.numbers = order.iter().map(|&i| obs.numbers[i]).collect();
            obs.x = order.iter().map(|&i| obs.x[i].clone()).collect();
            obs.y = order.iter().map(|&i| obs.y[i]).collect();
            obs.incumbent = order.iter().map(|&i| obs.incumbent[i]).collect();
        }
        obs
    }

    /// The objective model, reusing and updating the cached factor.
    fn objective_model(
        &self,
        study: &StudyView<'_>,
        axes: &[Axis],
        categorical: &[bool],
        obs: &Observations,
        y: &[f64],
        params: KernelParams,
    ) -> Option<Model> {
        let space: Vec<(String, Distribution)> = axes
            .iter()
            .map(|a| (a.name.clone(), a.dist.clone()))
            .collect();
        // The lock is held to take the factor out and to put the new one
        // back, not while factoring: threads proposing at once factor in
        // parallel (the last to finish leaves its factor).
        let prefix = self.cache.lock().ok().and_then(|mut c| {
            let entry = c.remove(study.name())?;
            (entry.space == space
                && entry.params == params
                && entry.rows.len() <= obs.numbers.len()
                && entry.rows[..] == obs.numbers[..entry.rows.len()])
                .then_some(entry.chol)
        });
        let model = Model::new(
            params,
            categorical.to_vec(),
            obs.x.clone(),
            y.to_vec(),
            prefix,
        )?;
        if let Ok(mut c) = self.cache.lock() {
            c.insert(
                study.name().to_owned(),
                Cached {
                    space,
                    rows: obs.numbers.clone(),
                    params: model.params().clone(),
                    chol: model.factor().clone(),
                },
            );
        }
        Some(model)
    }

    /// The kernel for `n` observations: the newest recorded under `key`
    /// (in any trial) when it is recent enough, else a new fit warm-started
    /// from it; with what to record on the trial.
    fn kernel(
        &self,
        study: &StudyView<'_>,
        key: &str,
        data: Data<'_>,
        current: u64,
    ) -> (KernelParams, Value) {
        let d = data.categorical.len();
        let n = data.x.len();
        let recorded = study
            .iter()
            .rev()
            .filter(|t| t.number != current)
            .find_map(|t| {
                let v = t.system_attrs.get(key)?;
                let fitted = v.get("n")?.as_u64()? as usize;
                let raw: Vec<f64> = v
                    .get("raw")?
                    .as_array()?
                    .iter()
                    .map(Value::as_f64)
                    .collect::<Option<_>>()?;
                (raw.len() == d + 2 && raw.iter().all(|r| r.is_finite())).then_some((fitted, raw))
            });
        let (fitted, (params, raw)) = match recorded {
            Some((fitted, raw)) if !self.config.refit_due(fitted, n) => {
                (fitted, (fit::from_raw(&raw, data.deterministic), raw))
            }
            Some((_, raw)) => (n, fit::fit(data, &raw)),
            None => (n, fit::fit(data, &fit::to_raw(&KernelParams::initial(d)))),
        };
        let record = json!({"n": fitted, "raw": raw});
        (params, record)
    }
}

/// `trial`'s point over `axes`, if it has every parameter with the same
/// distribution (a running trial's proposal counts before it is suggested).
fn point(axes: &[Axis], trial: &FrozenTrial) -> Option<Vec<f64>> {
    let proposed = trial.system_attrs.get(PARAMS_ATTR);
    axes.iter()
        .map(|a| {
            match (
                trial.internal_params.get(&a.name),
                trial.distributions.get(&a.name),
            ) {
                (Some(x), Some(d)) if *d == a.dist => Some(a.to_unit(*x)),
                (Some(_), Some(_)) => None,
                _ => proposed
                    .and_then(|p| p.get(&a.name))
                    .and_then(Value::as_f64)
                    .filter(|x| a.dist.contains(*x))
                    .map(|x| a.to_unit(x)),
            }
        })
        .collect()
}

/// `(v - mean) / std` for each value, with the mean and the std.
fn standardize(values: &[f64]) -> (Vec<f64>, f64, f64) {
    let n = values.len().max(1) as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    let sd = var.sqrt().max(1e-10);
    (values.iter().map(|v| (v - mean) / sd).collect(), mean, sd)
}

/// Each value replaced by the standard normal quantile of its rank,
/// `Φ⁻¹((r - ½) / n)` with average ranks for ties (a Gaussian copula): the
/// order of the values is kept, their heavy tails are not.
fn normal_scores(values: &[f64]) -> Vec<f64> {
    let n = values.len();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|a, b| values[*a].total_cmp(&values[*b]));
    let mut ranks = vec![0.0; n];
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        let r = (i + j) as f64 / 2.0 + 1.0;
        for k in i..=j {
            ranks[order[k]] = r;
        }
        i = j + 1;
    }
    ranks.iter().map(|r| ndtri((r - 0.5) / n as f64)).collect()
}

impl Sampler for GpSampler {
    fn infer_relative_search_space(
        &self,
        study: &StudyView<'_>,
        _trial: &FrozenTrial,
    ) -> BTreeMap<String, Distribution> {
        if study.directions().len() != 1 {
            return BTreeMap::new();
        }
        intersection_search_space(study)
    }

    fn sample_relative(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        space: &BTreeMap<String, Distribution>,
    ) -> Result<RelativeSample> {
        if space.is_empty() || study.directions().len() != 1 {
            return Ok(RelativeSample::default());
        }
        let axes: Vec<Axis> = space.iter().map(|(n, d)| Axis::new(n, d)).collect();
        let categorical: Vec<bool> = axes.iter().map(Axis::is_categorical).collect();
        let obs = self.observe(study, &axes, trial.number);
        if obs.y.len() < self.config.n_startup_trials.max(1) {
            return Ok(RelativeSample::default());
        }
        let mut system_attrs = Vec::new();

        // The objective model.
        let (y, _, _) = if self.config.rank_transform {
            standardize(&normal_scores(&obs.y))
        } else {
            standardize(&obs.y)
        };
        let data = Data {
            x: &obs.x,
            y: &y,
            categorical: &categorical,
            deterministic: self.config.deterministic_objective,
        };
        let (params, record) = self.kernel(study, KERNEL_ATTR, data, trial.number);
        system_attrs.push((KERNEL_ATTR.to_owned(), record));
        let Some(objective) = self.objective_model(study, &axes, &categorical, &obs, &y, params)
        else {
            tracing::warn!(
                trial = trial.number,
                "the GP's covariance could not be factored; sampling this trial at random"
            );
            return Ok(RelativeSample::default());
        };

        // The feasibility model, once something did not fit.
        let feasibility = if obs.feasible.iter().any(|f| !f) {
            let labels: Vec<f64> = obs
                .feasible
                .iter()
                .map(|f| if *f { 1.0 } else { -1.0 })
                .collect();
            let (fy, mean, sd) = standardize(&labels);
            let fdata = Data {
                x: &obs.fx,
                y: &fy,
                categorical: &categorical,
                deterministic: self.config.deterministic_objective,
            };
            let (fparams, frecord) = self.kernel(study, FEASIBILITY_ATTR, fdata, trial.number);
            system_attrs.push((FEASIBILITY_ATTR.to_owned(), frecord));
            Model::new(fparams, categorical.clone(), obs.fx.clone(), fy, None)
                .map(|m| (m, -mean / sd))
        } else {
            None
        };

        // Trials in flight, at the models' own predictions.
        let running: Vec<Vec<f64>> = study
            .trials_in(&[TrialState::Running])
            .filter(|t| t.number != trial.number)
            .filter_map(|t| point(&axes, t))
            .collect();
        let best = y
            .iter()
            .zip(&obs.incumbent)
            .enumerate()
            .filter(|(_, (_, inc))| **inc)
            .max_by(|a, b| a.1 .0.total_cmp(b.1 .0));
        let warm: Vec<Vec<f64>> = best.iter().map(|(i, _)| obs.x[*i].clone()).collect();
        let (objective, feasibility) = if running.is_empty() {
            (objective, feasibility)
        } else {
            let cap = best.map_or(f64::INFINITY, |(_, (v, _))| *v);
            (
                objective.believing(&running, cap),
                feasibility.map(|(m, t)| (m.believing(&running, f64::INFINITY), t)),
            )
        };
        let acquisition = Acquisition {
            objective: &objective,
            best: best.map(|(_, (v, _))| *v),
            feasibility: feasibility.as_ref().map(|(m, t)| (m, *t)),
        };
        let lengthscales: Vec<f64> = objective
            .params()
            .inv_sq_lengthscales
            .iter()
            .map(|l| 1.0 / l.sqrt())
            .collect();
        let mut rng = trial_rng(self.seed, trial.number, "gp");
        let (u, _) = search::maximize(
            &acquisition,
            &axes,
            &lengthscales,
            &warm,
            &mut rng,
            Effort {
                n_preliminary: self.config.n_preliminary_samples,
                n_local: self.config.n_local_search,
                tol: self.config.local_search_gtol,
            },
        );
        let params: BTreeMap<String, f64> = axes
            .iter()
            .zip(&u)
            .map(|(a, u)| (a.name.clone(), a.value_at(*u)))
            .collect();
        let proposed: serde_json::Map<String, Value> = params
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(*v)))
            .collect();
        system_attrs.insert(0, (PARAMS_ATTR.to_owned(), Value::Object(proposed)));
        Ok(RelativeSample {
            params,
            system_attrs,
        })
    }

    fn sample_independent(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        name: &str,
        dist: &Distribution,
        support: &Support,
    ) -> Result<f64> {
        if study.directions().len() != 1 {
            self.warn_once("", || {
                format!(
                    "GpSampler models one objective; study `{}` has {}, so every parameter is \
                     sampled at random",
                    study.name(),
                    study.directions().len()
                )
            });
        } else if study.trials_in(&[TrialState::Complete]).count() >= self.config.n_startup_trials {
            self.warn_once(name, || {
                format!(
                    "GpSampler samples `{name}` at random (trial {}): it is not in every \
                     COMPLETE trial with the same distribution (a conditional parameter), or \
                     the value the GP proposed is outside the range allowed here",
                    trial.number
                )
            });
        }
        let mut rng = trial_rng(self.seed, trial.number, name);
        Ok(sample_uniform(&mut rng, dist, support))
    }

    fn to_config(&self) -> Option<SamplerConfig> {
        Some(SamplerConfig::Gp(GpConfig {
            seed: Some(self.seed),
            ..self.config.clone()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::FloatDistribution;
    use std::sync::Arc;

    fn dist() -> Distribution {
        FloatDistribution::new(0.0, 1.0).unwrap().into()
    }

    fn trial(number: u64, state: TrialState, x: f64) -> FrozenTrial {
        let mut t = FrozenTrial::new(number, number, state);
        t.internal_params.insert("x".into(), x);
        t.distributions.insert("x".into(), dist());
        t
    }

    fn complete(number: u64, x: f64) -> Arc<FrozenTrial> {
        let mut t = trial(number, TrialState::Complete, x);
        t.values = Some(vec![(x - 0.3).powi(2)]);
        Arc::new(t)
    }

    fn quick() -> GpSampler {
        GpSampler::with_config(GpConfig {
            n_preliminary_samples: 256,
            n_startup_trials: 5,
            ..GpConfig::seeded(4)
        })
        .unwrap()
    }

    #[test]
    fn pruned_trials_count_no_better_than_the_median_and_failures_by_kind() {
        let mut trials: Vec<Arc<FrozenTrial>> =
            (0..9).map(|i| complete(i, i as f64 / 8.0)).collect();
        let mut pruned = trial(9, TrialState::Pruned, 0.95);
        pruned.intermediate_values.insert(3, -100.0);
        trials.push(Arc::new(pruned));
        let mut oom = trial(10, TrialState::Fail, 0.99);
        oom.system_attrs = FailureKind::Oom
            .attrs("out of memory")
            .into_iter()
            .collect();
        trials.push(Arc::new(oom));
        let mut error = trial(11, TrialState::Fail, 0.5);
        error.system_attrs = FailureKind::Error.attrs("diverged").into_iter().collect();
        trials.push(Arc::new(error));
        let mut stale = trial(12, TrialState::Fail, 0.6);
        stale.system_attrs = FailureKind::Stale
            .attrs("no heartbeat")
            .into_iter()
            .collect();
        trials.push(Arc::new(stale));
        let view = StudyView::new("s", &[Direction::Minimize], &trials);
        let axes = [Axis::new("x", &dist())];
        let obs = quick().observe(&view, &axes, 99);
        // Nine COMPLETE, the pruned one, the OOM one and the error, in
        // trial order.
        assert_eq!(obs.numbers, (0..12).collect::<Vec<u64>>());
        let mut ys: Vec<f64> = obs.y[..9].to_vec();
        ys.sort_by(f64::total_cmp);
        // Minimised values enter negated; the pruned trial's -(-100) = 100
        // is capped at the median, the OOM trial enters at the worst value.
        assert_eq!(obs.y[9], ys[4]);
        assert_eq!(obs.y[10], ys[0]);
        assert!(!obs.incumbent[9] && !obs.incumbent[10]);
        // Feasibility: the OOM trial and the error are violations; a stale
        // trial is ignored.
        assert_eq!(obs.fx.len(), 12);
        assert_eq!(obs.feasible.iter().filter(|f| !**f).count(), 2);
        // Not considered: the pruned trial leaves the objective.
        let off = GpSampler::with_config(GpConfig {
            consider_pruned_trials: false,
            ..GpConfig::seeded(1)
        })
        .unwrap();
        assert_eq!(off.observe(&view, &axes, 99).y.len(), 11);
    }

    fn propose(sampler: &GpSampler, trials: &[Arc<FrozenTrial>], number: u64) -> f64 {
        let view = StudyView::new("s", &[Direction::Minimize], trials);
        let space = BTreeMap::from([("x".to_owned(), dist())]);
        let me = FrozenTrial::new(number, number, TrialState::Running);
        let sample = sampler.sample_relative(&view, &me, &space).unwrap();
        assert_eq!(sample.system_attrs[0].0, PARAMS_ATTR);
        sample.params["x"]
    }

    #[test]
    fn a_trial_in_flight_pushes_the_next_proposal_away() {
        let trials: Vec<Arc<FrozenTrial>> = [0.0, 0.9, 0.5, 0.1, 0.7, 0.25, 0.6, 0.35]
            .iter()
            .enumerate()
            .map(|(i, x)| complete(i as u64, *x))
            .collect();
        let sampler = GpSampler::with_config(GpConfig {
            deterministic_objective: true,
            ..quick().config().clone()
        })
        .unwrap();
        let first = propose(&sampler, &trials, 8);
        assert!((first - 0.3).abs() < 0.1, "{first}");
        // The same proposal again, with that trial running where it went.
        let mut with_running = trials.clone();
        let mut running = trial(8, TrialState::Running, first);
        running.internal_params.clear();
        running.distributions.clear();
        running
            .system_attrs
            .insert(PARAMS_ATTR.into(), json!({ "x": first }));
        with_running.push(Arc::new(running));
        let second = propose(&sampler, &with_running, 9);
        let alone = propose(&sampler, &trials, 9);
        assert!((alone - first).abs() < 0.02, "{alone} {first}");
        assert!((second - first).abs() > 0.02, "{second} {first}");
    }

    #[test]
    fn a_fitted_kernel_is_recorded_and_reused_until_a_refit_is_due() {
        let sampler = GpSampler::with_config(GpConfig {
            refit_fraction: 0.5,
            n_preliminary_samples: 64,
            n_startup_trials: 3,
            ..GpConfig::seeded(2)
        })
        .unwrap();
        let mut trials: Vec<Arc<FrozenTrial>> = (0..6)
            .map(|i| complete(i, (i as f64 * 0.37) % 1.0))
            .collect();
        let view = StudyView::new("s", &[Direction::Minimize], &trials);
        let space = BTreeMap::from([("x".to_owned(), dist())]);
        let me = FrozenTrial::new(6, 6, TrialState::Running);
        let s = sampler.sample_relative(&view, &me, &space).unwrap();
        let kernel = s
            .system_attrs
            .iter()
            .find(|(k, _)| k == KERNEL_ATTR)
            .unwrap()
            .1
            .clone();
        assert_eq!(kernel["n"], 6);
        // Trial 6 finishes with that record; at 7 observations a fit from 6
        // is not due (interval ⌊0.5 · 7⌋ = 3): the record is reused as is.
        let mut t6 = trial(6, TrialState::Complete, s.params["x"]);
        t6.values = Some(vec![0.5]);
        t6.system_attrs.insert(KERNEL_ATTR.into(), kernel.clone());
        trials.push(Arc::new(t6));
        let view = StudyView::new("s", &[Direction::Minimize], &trials);
        let me = FrozenTrial::new(7, 7, TrialState::Running);
        let s = sampler.sample_relative(&view, &me, &space).unwrap();
        let again = s
            .system_attrs
            .iter()
            .find(|(k, _)| k == KERNEL_ATTR)
            .unwrap()
            .1
            .clone();
        assert_eq!(again, kernel);
    }

    #[test]
    fn normal_scores_keep_the_order_and_share_ties() {
        let s = normal_scores(&[1e7, 3.0, 5.0, 3.0, -1.0]);
        assert!(s[4] < s[1] && s[1] == s[3] && s[3] < s[2] && s[2] < s[0]);
        let t = normal_scores(&[4.0, 1e9, -2.0, 0.5]);
        assert!(t.iter().sum::<f64>().abs() < 1e-9, "{t:?}");
    }

    #[test]
    fn multi_objective_studies_and_startup_trials_are_left_to_random_sampling() {
        let trials: Vec<Arc<FrozenTrial>> = (0..3).map(|i| complete(i, 0.1 * i as f64)).collect();
        let sampler = quick();
        let space = BTreeMap::from([("x".to_owned(), dist())]);
        let me = FrozenTrial::new(3, 3, TrialState::Running);
        let view = StudyView::new("s", &[Direction::Minimize], &trials);
        assert!(sampler
            .sample_relative(&view, &me, &space)
            .unwrap()
            .params
            .is_empty());
        let two = [Direction::Minimize, Direction::Maximize];
        let view = StudyView::new("s", &two, &trials);
        assert!(sampler.infer_relative_search_space(&view, &me).is_empty());
        let x = sampler
            .sample_independent(&view, &me, "x", &dist(), &Support::Full)
            .unwrap();
        assert!((0.0..=1.0).contains(&x));
    }
}
