//! The modelled domain of one parameter: the transformed units TPE works in
//! (`ln` for log distributions, half a step beyond the ends of stepped ones),
//! the magic clip's smallest bandwidth, and where samples may fall under a
//! narrowed support.

use super::truncnorm::log_gauss_mass;
use crate::distribution::{Distribution, Support};
use crate::sampler::bounds;

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
pub(super) fn adapted(low: f64, high: f64, step: Option<f64>) -> (f64, f64) {
    let s0 = step.unwrap_or(0.0);
    (low - s0 / 2.0, high + s0 / 2.0)
}

/// The magic clip's smallest bandwidth once there are 99 or more observations.
pub(super) fn clip_sigma(lo: f64, hi: f64) -> f64 {
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
