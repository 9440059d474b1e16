//! [`AutoSampler`]: a sampler that chooses, trial by trial, among GP, TPE
//! and CMA-ES from the shape of the study, as OptunaHub's `AutoSampler`.

use super::{
    CmaEsConfig, CmaEsSampler, GpSampler, RelativeSample, Sampler, SamplerConfig, TpeSampler,
};
use crate::distribution::{Distribution, Support};
use crate::error::{Error, Result};
use crate::sampler::stream::os_seed;
use crate::trial::{FrozenTrial, TrialState};
use crate::view::StudyView;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// System attribute naming the sampler [`AutoSampler`] chose for a trial.
pub const AUTO_CHOICE_ATTR: &str = "auto:sampler";

/// What [`AutoSampler`] switches to once the GP's share of the study is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AutoLate {
    /// TPE, which models the whole history.
    Tpe,
    /// CMA-ES (default), as OptunaHub's AutoSampler, but warm-started at the
    /// switch from the study's own trials
    /// ([`CmaEsConfig::warm_start_from_study`]): its first distribution is
    /// that of the GP's best tenth, where OptunaHub's starts from the box's
    /// centre.
    #[default]
    CmaEs,
}

/// What [`AutoSampler`] uses, before the threshold, on a space with a
/// categorical or a conditional parameter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum AutoMixed {
    /// TPE (default), as OptunaHub's AutoSampler: the default TPE is no
    /// worse than Optuna's default TPE on every mixed space of the sampler
    /// suite's fine-tuning kind.
    #[default]
    Tpe,
    /// The GP, which models categorical parameters with its own kernel and
    /// samples conditional ones independently. On the suite's tuning half it
    /// reached better medians than TPE on the mixed spaces at 25 to 100
    /// trials, but on the held-out half it was worse than Optuna's TPE on
    /// `mixed8_small_card` (the book's Performance chapter).
    Gp,
}

/// Settings of [`AutoSampler`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AutoConfig {
    /// The seed of every inner sampler; `None` draws one from the operating system.
    pub seed: Option<u64>,
    /// COMPLETE trials up to which a numeric, unconditional study uses the GP
    /// (default 50; OptunaHub's is 250).
    pub gp_until: usize,
    /// The sampler past `gp_until` on a numeric, unconditional space (a
    /// space with a categorical or conditional parameter gets TPE there).
    pub late: AutoLate,
    /// The sampler before `gp_until` on a space with a categorical or
    /// conditional parameter.
    pub mixed: AutoMixed,
    /// COMPLETE trials per parameter that a numeric, unconditional study
    /// samples with CMA-ES started from the box's centre, before the GP
    /// (default 1: a 10-parameter study's first 10 trials; 0: none). The
    /// study's first trial, whose space is not known yet, is then CMA-ES's
    /// too (sampled independently, as every sampler's first trial is).
    pub cma_es_first: f64,
}

impl Default for AutoConfig {
    fn default() -> Self {
        AutoConfig {
            seed: None,
            gp_until: 50,
            late: AutoLate::CmaEs,
            mixed: AutoMixed::Tpe,
            cma_es_first: 1.0,
        }
    }
}

impl AutoConfig {
    /// The defaults with a seed.
    pub fn seeded(seed: u64) -> Self {
        AutoConfig {
            seed: Some(seed),
            ..AutoConfig::default()
        }
    }
}

/// The sampler chosen for one trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    Gp,
    Tpe,
    CmaEs,
    /// [`AutoConfig::cma_es_first`]'s CMA-ES, before the GP.
    CmaEsFirst,
}

impl Choice {
    fn as_str(self) -> &'static str {
        match self {
            Choice::Gp => "gp",
            Choice::Tpe => "tpe",
            Choice::CmaEs => "cma_es",
            Choice::CmaEsFirst => "cma_es_first",
        }
    }

    fn parse(s: &str) -> Option<Choice> {
        Some(match s {
            "gp" => Choice::Gp,
            "tpe" => Choice::Tpe,
            "cma_es" => Choice::CmaEs,
            "cma_es_first" => Choice::CmaEsFirst,
            _ => return None,
        })
    }
}

/// The attribute prefix of [`AutoConfig::cma_es_first`]'s CMA-ES state, apart
/// from the late CMA-ES's (Optuna's `cma:`), so the late one starts its own
/// run, warm-started from every trial before it.
const FIRST_CMA_PREFIX: &str = "auto_first_cma:";

/// Chooses the sampler for each trial from the study's shape, as OptunaHub's
/// `AutoSampler` does:
///
/// * **CMA-ES from the box's centre** for the first
///   [`AutoConfig::cma_es_first`] trials per parameter of a numeric,
///   unconditional space (one per parameter by default): fewer than one
///   generation, so in effect an opening of points drawn around the middle
///   of every range, which the GP then models;
/// * **GP** ([`GpSampler`]) while every parameter is numeric, every COMPLETE
///   trial has the same parameters (no conditional ones) and fewer than
///   [`AutoConfig::gp_until`] trials are COMPLETE: the expensive studies of
///   tens to a few hundred trials where a GP needs the fewest trials;
/// * **TPE** ([`TpeSampler`], hpo's defaults, which are Optuna's settings) as
///   soon as the space has a categorical or a conditional parameter
///   ([`AutoConfig::mixed`] can give the GP there instead, before the
///   threshold), and for several objectives;
/// * past the threshold on a numeric, unconditional space,
///   [`AutoConfig::late`]: CMA-ES by default, started from the distribution
///   of the GP's best trials, or TPE.
///
/// The opening (one trial per parameter), the threshold (50) and the late
/// sampler were chosen on the sampler suite's tuning half at 25 to 300
/// trials; OptunaHub's rule (the GP from the first trial to 250, then
/// CMA-ES from the box's centre) ranked worse there, as the book's
/// Performance chapter records.
///
/// The choice is a function of the history the trial starts with, and it is
/// recorded on the trial ([`AUTO_CHOICE_ATTR`]), so a study resumed in
/// another process continues with the same samplers.
///
/// ```
/// use hpo_core::{AutoConfig, AutoSampler, Direction, Study};
/// use std::sync::Arc;
///
/// # fn main() -> hpo_core::Result<()> {
/// let study = Study::builder()
///     .direction(Direction::Minimize)
///     .sampler(Arc::new(AutoSampler::with_config(AutoConfig::seeded(1))?))
///     .build()?;
/// study.optimize(20, |trial| {
///     let x = trial.suggest_float("x", -3.0, 3.0)?;
///     Ok((x - 1.0).powi(2))
/// })?;
/// let chosen = &study.trials()?[19].system_attrs["auto:sampler"];
/// assert_eq!(chosen, "gp");
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct AutoSampler {
    config: AutoConfig,
    seed: u64,
    gp: GpSampler,
    tpe: TpeSampler,
    cmaes: CmaEsSampler,
    cmaes_first: CmaEsSampler,
}

impl Default for AutoSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl AutoSampler {
    /// A sampler with the default settings, seeded from the operating system.
    pub fn new() -> Self {
        Self::build(AutoConfig::default())
    }

    /// A sampler with `config`.
    pub fn with_config(config: AutoConfig) -> Result<Self> {
        if config.gp_until == 0 {
            return Err(Error::InvalidConfig(
                "auto sampler: `gp_until` must be at least 1 (use TpeSampler for no GP at all)"
                    .into(),
            ));
        }
        if !(config.cma_es_first.is_finite() && config.cma_es_first >= 0.0) {
            return Err(Error::InvalidConfig(format!(
                "auto sampler: `cma_es_first` must be a finite number of trials per parameter, at least 0 (got {})",
                config.cma_es_first
            )));
        }
        Ok(Self::build(config))
    }

    fn build(config: AutoConfig) -> Self {
        let seed = config.seed.unwrap_or_else(os_seed);
        AutoSampler {
            gp: GpSampler::seeded(seed),
            tpe: TpeSampler::seeded(seed),
            cmaes: CmaEsSampler::with_config(CmaEsConfig {
                warm_start_from_study: true,
                ..CmaEsConfig::seeded(seed)
            })
            .unwrap_or_else(|_| CmaEsSampler::new()),
            cmaes_first: CmaEsSampler::with_config(CmaEsConfig::seeded(seed))
                .unwrap_or_else(|_| CmaEsSampler::new())
                .keyed(FIRST_CMA_PREFIX),
            config,
            seed,
        }
    }

    /// The settings.
    pub fn config(&self) -> &AutoConfig {
        &self.config
    }

    /// The sampler for a trial starting with `study` as its history.
    fn choose(&self, study: &StudyView<'_>) -> Choice {
        if study.directions().len() != 1 {
            return Choice::Tpe;
        }
        let mut complete = study.trials_in(&[TrialState::Complete]).peekable();
        let Some(first) = complete.peek() else {
            return if self.config.cma_es_first > 0.0 {
                Choice::CmaEsFirst
            } else {
                Choice::Gp
            };
        };
        let space: BTreeMap<String, Distribution> = first.distributions.clone();
        let mut n = 0usize;
        let mut conditional = false;
        for t in complete {
            n += 1;
            conditional |= t.distributions != space;
        }
        let categorical = space
            .values()
            .any(|d| matches!(d, Distribution::Categorical(_)));
        // A conditional parameter may also show only in trials that did not
        // complete.
        let mixed = conditional
            || categorical
            || study
                .trials_in(&[TrialState::Pruned, TrialState::Fail, TrialState::Running])
                .any(|t| t.distributions.keys().any(|k| !space.contains_key(k)));
        if n >= self.config.gp_until {
            if mixed {
                return Choice::Tpe;
            }
            return match self.config.late {
                AutoLate::Tpe => Choice::Tpe,
                AutoLate::CmaEs => Choice::CmaEs,
            };
        }
        let first_trials = (self.config.cma_es_first * space.len() as f64).ceil();
        match (mixed, self.config.mixed) {
            (true, AutoMixed::Tpe) => Choice::Tpe,
            (false, _) if (n as f64) < first_trials => Choice::CmaEsFirst,
            _ => Choice::Gp,
        }
    }

    fn inner(&self, choice: Choice) -> &dyn Sampler {
        match choice {
            Choice::Gp => &self.gp,
            Choice::Tpe => &self.tpe,
            Choice::CmaEs => &self.cmaes,
            Choice::CmaEsFirst => &self.cmaes_first,
        }
    }

    /// The recorded choice for `trial`, or the one its history gives.
    fn choice_for(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Choice {
        trial
            .system_attrs
            .get(AUTO_CHOICE_ATTR)
            .and_then(Value::as_str)
            .and_then(Choice::parse)
            .unwrap_or_else(|| self.choose(study))
    }
}

impl Sampler for AutoSampler {
    fn infer_relative_search_space(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
    ) -> BTreeMap<String, Distribution> {
        self.inner(self.choose(study))
            .infer_relative_search_space(study, trial)
    }

    fn sample_relative(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        space: &BTreeMap<String, Distribution>,
    ) -> Result<RelativeSample> {
        let choice = self.choose(study);
        let mut sample = self.inner(choice).sample_relative(study, trial, space)?;
        sample
            .system_attrs
            .push((AUTO_CHOICE_ATTR.to_owned(), Value::from(choice.as_str())));
        Ok(sample)
    }

    fn sample_independent(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        name: &str,
        dist: &Distribution,
        support: &Support,
    ) -> Result<f64> {
        self.inner(self.choice_for(study, trial))
            .sample_independent(study, trial, name, dist, support)
    }

    fn after_trial(&self, study: &StudyView<'_>, trial: &FrozenTrial) {
        self.inner(self.choice_for(study, trial))
            .after_trial(study, trial);
    }

    fn to_config(&self) -> Option<SamplerConfig> {
        Some(SamplerConfig::Auto(AutoConfig {
            seed: Some(self.seed),
            ..self.config.clone()
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::direction::Direction;
    use crate::distribution::{CategoricalDistribution, FloatDistribution};
    use std::sync::Arc;

    fn complete(number: u64, params: &[(&str, Distribution, f64)]) -> Arc<FrozenTrial> {
        let mut t = FrozenTrial::new(number, number, TrialState::Complete);
        for (name, d, x) in params {
            t.internal_params.insert((*name).into(), *x);
            t.distributions.insert((*name).into(), d.clone());
        }
        t.values = Some(vec![number as f64]);
        Arc::new(t)
    }

    #[test]
    fn chooses_by_the_shape_of_the_study() {
        let x: Distribution = FloatDistribution::new(0.0, 1.0).unwrap().into();
        let c: Distribution = CategoricalDistribution::new(["a", "b"]).unwrap().into();
        let s = AutoSampler::with_config(AutoConfig {
            gp_until: 5,
            late: AutoLate::Tpe,
            ..AutoConfig::seeded(1)
        })
        .unwrap();
        let dirs = [Direction::Minimize];
        let numeric: Vec<_> = (0..3)
            .map(|i| complete(i, &[("x", x.clone(), 0.5)]))
            .collect();
        assert_eq!(s.choose(&StudyView::new("s", &dirs, &numeric)), Choice::Gp);
        // The default opening: CMA-ES for the first trial of a one-parameter
        // space (its space unknown), none with `cma_es_first` 0.
        assert_eq!(
            s.choose(&StudyView::new("s", &dirs, &[])),
            Choice::CmaEsFirst
        );
        let no_opening = AutoSampler::with_config(AutoConfig {
            cma_es_first: 0.0,
            ..AutoConfig::seeded(1)
        })
        .unwrap();
        assert_eq!(
            no_opening.choose(&StudyView::new("s", &dirs, &[])),
            Choice::Gp
        );
        let many: Vec<_> = (0..5)
            .map(|i| complete(i, &[("x", x.clone(), 0.5)]))
            .collect();
        assert_eq!(s.choose(&StudyView::new("s", &dirs, &many)), Choice::Tpe);
        let cat: Vec<_> = (0..2)
            .map(|i| complete(i, &[("x", x.clone(), 0.5), ("c", c.clone(), 0.0)]))
            .collect();
        let mut cond = numeric.clone();
        cond.push(complete(3, &[("x", x.clone(), 0.5), ("y", x.clone(), 0.1)]));
        // Categorical and conditional spaces: TPE by default, the GP before
        // the threshold if asked, and TPE past it (never CMA-ES).
        assert_eq!(s.choose(&StudyView::new("s", &dirs, &cat)), Choice::Tpe);
        assert_eq!(s.choose(&StudyView::new("s", &dirs, &cond)), Choice::Tpe);
        let gp_mixed = AutoSampler::with_config(AutoConfig {
            gp_until: 5,
            mixed: AutoMixed::Gp,
            ..AutoConfig::seeded(1)
        })
        .unwrap();
        assert_eq!(
            gp_mixed.choose(&StudyView::new("s", &dirs, &cat)),
            Choice::Gp
        );
        assert_eq!(
            gp_mixed.choose(&StudyView::new("s", &dirs, &cond)),
            Choice::Gp
        );
        assert_eq!(
            gp_mixed.choose(&StudyView::new("s", &dirs, &numeric)),
            Choice::Gp
        );
        let many_cat: Vec<_> = (0..5)
            .map(|i| complete(i, &[("x", x.clone(), 0.5), ("c", c.clone(), 0.0)]))
            .collect();
        let two = [Direction::Minimize, Direction::Minimize];
        assert_eq!(s.choose(&StudyView::new("s", &two, &numeric)), Choice::Tpe);
        // The default past the threshold: CMA-ES.
        let cma = AutoSampler::with_config(AutoConfig {
            gp_until: 5,
            ..AutoConfig::seeded(1)
        })
        .unwrap();
        assert_eq!(
            cma.choose(&StudyView::new("s", &dirs, &many)),
            Choice::CmaEs
        );
        // Its CMA-ES starts from the study's own trials, not the box's centre.
        assert!(cma.cmaes.config().warm_start_from_study);
        assert_eq!(
            cma.choose(&StudyView::new("s", &dirs, &many_cat)),
            Choice::Tpe
        );
        let gp_mixed_late = AutoSampler::with_config(AutoConfig {
            gp_until: 5,
            late: AutoLate::CmaEs,
            mixed: AutoMixed::Gp,
            ..AutoConfig::seeded(1)
        })
        .unwrap();
        assert_eq!(
            gp_mixed_late.choose(&StudyView::new("s", &dirs, &many_cat)),
            Choice::Tpe
        );
        assert!(AutoSampler::with_config(AutoConfig {
            gp_until: 0,
            ..AutoConfig::default()
        })
        .is_err());
    }

    #[test]
    fn cma_es_opens_a_numeric_study_for_its_trials_per_parameter() {
        let x: Distribution = FloatDistribution::new(0.0, 1.0).unwrap().into();
        let c: Distribution = CategoricalDistribution::new(["a", "b"]).unwrap().into();
        let s = AutoSampler::with_config(AutoConfig {
            gp_until: 8,
            cma_es_first: 1.5,
            ..AutoConfig::seeded(1)
        })
        .unwrap();
        let dirs = [Direction::Minimize];
        let two = |n: u64| -> Vec<_> {
            (0..n)
                .map(|i| complete(i, &[("x", x.clone(), 0.5), ("y", x.clone(), 0.5)]))
                .collect()
        };
        // No trial yet: the space is unknown, CMA-ES's first trial.
        assert_eq!(
            s.choose(&StudyView::new("s", &dirs, &[])),
            Choice::CmaEsFirst
        );
        // 1.5 per parameter of two: the first 3 trials.
        let choices: Vec<Choice> = [1, 2, 3, 7, 8]
            .iter()
            .map(|&n| s.choose(&StudyView::new("s", &dirs, &two(n))))
            .collect();
        assert_eq!(
            choices,
            [
                Choice::CmaEsFirst,
                Choice::CmaEsFirst,
                Choice::Gp,
                Choice::Gp,
                Choice::CmaEs
            ]
        );
        // A categorical space gets TPE as before.
        let cat: Vec<_> = (0..2)
            .map(|i| complete(i, &[("x", x.clone(), 0.5), ("c", c.clone(), 0.0)]))
            .collect();
        assert_eq!(s.choose(&StudyView::new("s", &dirs, &cat)), Choice::Tpe);
        // The choice survives a round trip through its name.
        assert_eq!(
            Choice::parse(Choice::CmaEsFirst.as_str()),
            Some(Choice::CmaEsFirst)
        );
        for bad in [-1.0, f64::NAN, f64::INFINITY] {
            let e = AutoSampler::with_config(AutoConfig {
                cma_es_first: bad,
                ..AutoConfig::default()
            })
            .unwrap_err()
            .to_string();
            assert!(e.contains("`cma_es_first`"), "{e}");
        }
    }
}
