//! Uniform random sampling.

use super::stream::{os_seed, trial_rng};
use super::{bounds, Sampler, SamplerConfig};
use crate::distribution::{Distribution, Support};
use crate::error::Result;
use crate::trial::FrozenTrial;
use crate::view::StudyView;
use rand::Rng;

/// Samples every parameter independently and uniformly (log-uniformly for log
/// distributions), inside the narrowed support.
///
/// Each value is drawn from a stream derived from the seed, the trial's number
/// and the parameter's name: the same seed gives the same values for the same
/// trial numbers, in any process and in any order of suggestion.
#[derive(Debug)]
pub struct RandomSampler {
    seed: u64,
}

impl Default for RandomSampler {
    fn default() -> Self {
        Self::new()
    }
}

impl RandomSampler {
    /// A sampler seeded from the operating system.
    pub fn new() -> Self {
        RandomSampler { seed: os_seed() }
    }

    /// A reproducible sampler.
    pub fn seeded(seed: u64) -> Self {
        RandomSampler { seed }
    }
}

impl Sampler for RandomSampler {
    fn sample_independent(
        &self,
        _study: &StudyView<'_>,
        trial: &FrozenTrial,
        name: &str,
        dist: &Distribution,
        support: &Support,
    ) -> Result<f64> {
        let mut rng = trial_rng(self.seed, trial.number, name);
        Ok(sample_uniform(&mut rng, dist, support))
    }
    fn to_config(&self) -> Option<SamplerConfig> {
        Some(SamplerConfig::Random {
            seed: Some(self.seed),
        })
    }
}

/// One uniform draw from `dist` restricted to a normalised `support`.
pub(crate) fn sample_uniform<R: Rng + ?Sized>(
    rng: &mut R,
    dist: &Distribution,
    support: &Support,
) -> f64 {
    let (lo, hi) = bounds(dist, support);
    match dist {
        Distribution::Float(d) => {
            if lo >= hi {
                return lo;
            }
            if let Some(step) = d.step() {
                let n = ((hi - lo) / step + 1e-9).floor() as u64;
                let k = rng.random_range(0..=n);
                return dist.snap(lo + k as f64 * step);
            }
            let x = if d.is_log() {
                (rng.random_range(lo.ln()..=hi.ln())).exp()
            } else {
                rng.random_range(lo..=hi)
            };
            x.clamp(lo, hi)
        }
        Distribution::Int(d) => {
            if lo >= hi {
                return lo;
            }
            if d.is_log() {
                // Log-uniform over the integers' rounding cells, as Optuna does.
                let x = rng.random_range((lo - 0.5).ln()..(hi + 0.5).ln()).exp();
                return x.round().clamp(lo, hi);
            }
            let step = d.step() as f64;
            let n = ((hi - lo) / step + 1e-9).floor() as u64;
            lo + rng.random_range(0..=n) as f64 * step
        }
        Distribution::Categorical(d) => match support {
            Support::Choices(ix) if !ix.is_empty() => ix[rng.random_range(0..ix.len())] as f64,
            _ => rng.random_range(0..d.choices().len()) as f64,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::{CategoricalDistribution, FloatDistribution, IntDistribution};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn draw(dist: &Distribution, support: &Support, n: usize) -> Vec<f64> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let s = support.normalize("p", dist).unwrap();
        (0..n).map(|_| sample_uniform(&mut rng, dist, &s)).collect()
    }

    #[test]
    fn every_draw_is_inside_distribution_and_support() {
        let cases: Vec<(Distribution, Support)> = vec![
            (
                FloatDistribution::new(-1.0, 3.0).unwrap().into(),
                Support::range(0.5, 1.0),
            ),
            (
                FloatDistribution::log(1e-5, 1.0).unwrap().into(),
                Support::range(1e-3, 1e-2),
            ),
            (
                FloatDistribution::stepped(0.0, 1.0, 0.25).unwrap().into(),
                Support::range(0.3, 0.8),
            ),
            (
                IntDistribution::new(1, 10).unwrap().into(),
                Support::range(3.0, 4.0),
            ),
            (IntDistribution::log(1, 1024).unwrap().into(), Support::Full),
            (
                IntDistribution::stepped(128, 512, 32).unwrap().into(),
                Support::range(100.0, 384.0),
            ),
            (
                CategoricalDistribution::new([8, 16, 32, 64])
                    .unwrap()
                    .into(),
                Support::choices([0, 2]),
            ),
        ];
        for (d, s) in cases {
            let ns = s.normalize("p", &d).unwrap();
            for x in draw(&d, &s, 500) {
                assert!(d.contains(x), "{x} not in {d}");
                assert!(ns.allows(x), "{x} not in {ns:?}");
            }
        }
    }

    #[test]
    fn stepped_float_reaches_both_ends() {
        let d: Distribution = FloatDistribution::stepped(0.0, 1.0, 0.25).unwrap().into();
        let xs = draw(&d, &Support::Full, 400);
        for v in [0.0, 0.25, 0.5, 0.75, 1.0] {
            assert!(xs.contains(&v), "{v} never drawn");
        }
    }

    #[test]
    fn log_int_covers_small_and_large_values() {
        let d: Distribution = IntDistribution::log(1, 1000).unwrap().into();
        let xs = draw(&d, &Support::Full, 2000);
        let small = xs.iter().filter(|x| **x < 10.0).count();
        let large = xs.iter().filter(|x| **x >= 100.0).count();
        // Log-uniform: each decade gets about a third of the draws.
        assert!((500..850).contains(&small), "small={small}");
        assert!((500..850).contains(&large), "large={large}");
    }

    #[test]
    fn seeded_sampler_is_reproducible() {
        let d: Distribution = FloatDistribution::new(0.0, 1.0).unwrap().into();
        let view_trials = Vec::new();
        let view = StudyView::new("s", &[crate::Direction::Minimize], &view_trials);
        let t = FrozenTrial::new(0, 0, crate::TrialState::Running);
        let a = RandomSampler::seeded(3);
        let b = RandomSampler::seeded(3);
        for _ in 0..10 {
            assert_eq!(
                a.sample_independent(&view, &t, "x", &d, &Support::Full)
                    .unwrap(),
                b.sample_independent(&view, &t, "x", &d, &Support::Full)
                    .unwrap()
            );
        }
    }
}
