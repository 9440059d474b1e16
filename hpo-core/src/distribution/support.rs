//! Narrowed supports: the part of a declared distribution that a constraint allows.

use super::Distribution;
use crate::error::{Error, Result};

/// The subset of a declared distribution a parameter may take in this trial.
///
/// Bounds are in the distribution's own units (internal values); for
/// categoricals the allowed choices are given by index. Build one with
/// [`Support::range`] or [`Support::choices`] and check it against the declared
/// distribution with [`Support::normalize`], which snaps ranges onto the step
/// grid and fails with [`Error::EmptySupport`] when nothing is left.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Support {
    /// The whole declared distribution.
    #[default]
    Full,
    /// A sub-range `[low, high]` of a float or int distribution.
    Range {
        /// Lower bound (inclusive).
        low: f64,
        /// Upper bound (inclusive).
        high: f64,
    },
    /// A subset of a categorical's choices, as sorted indices.
    Choices(Vec<usize>),
}

impl Support {
    /// A sub-range.
    pub fn range(low: f64, high: f64) -> Self {
        Support::Range { low, high }
    }

    /// A subset of categorical choices by index.
    pub fn choices(indices: impl IntoIterator<Item = usize>) -> Self {
        let mut v: Vec<usize> = indices.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        Support::Choices(v)
    }

    /// Whether this is the full declared support.
    pub fn is_full(&self) -> bool {
        matches!(self, Support::Full)
    }

    /// Intersects this support with `dist`: ranges are clipped to the bounds and
    /// snapped inwards onto the step / integer grid; choices are checked. Returns
    /// [`Support::Full`] when nothing is excluded.
    pub fn normalize(&self, name: &str, dist: &Distribution) -> Result<Support> {
        let empty = |reason: String| Error::EmptySupport {
            name: name.to_owned(),
            reason,
        };
        match (self, dist) {
            (Support::Full, _) => Ok(Support::Full),
            (Support::Range { low, high }, Distribution::Float(d)) => {
                let mut lo = low.max(d.low());
                let mut hi = high.min(d.high());
                if let Some(s) = d.step() {
                    lo = d.low() + ((lo - d.low()) / s - 1e-9).ceil() * s;
                    hi = d.low() + ((hi - d.low()) / s + 1e-9).floor() * s;
                }
                if lo > hi || lo.is_nan() || hi.is_nan() {
                    return Err(empty(format!(
                        "[{low}, {high}] does not intersect the declared {dist}"
                    )));
                }
                if lo <= d.low() && hi >= d.high() {
                    return Ok(Support::Full);
                }
                Ok(Support::Range { low: lo, high: hi })
            }
            (Support::Range { low, high }, Distribution::Int(d)) => {
                let step = d.step() as f64;
                let base = d.low() as f64;
                let lo = base + ((low.max(base) - base) / step - 1e-9).ceil() * step;
                let hi = base + ((high.min(d.high() as f64) - base) / step + 1e-9).floor() * step;
                if lo > hi || lo.is_nan() || hi.is_nan() {
                    return Err(empty(format!(
                        "[{low}, {high}] does not intersect the declared {dist}"
                    )));
                }
                if lo <= base && hi >= d.high() as f64 {
                    return Ok(Support::Full);
                }
                Ok(Support::Range { low: lo, high: hi })
            }
            (Support::Choices(ix), Distribution::Categorical(d)) => {
                if ix.is_empty() {
                    return Err(empty("no choice is allowed".into()));
                }
                if let Some(bad) = ix.iter().find(|i| **i >= d.choices().len()) {
                    return Err(empty(format!(
                        "choice index {bad} is out of range for {} choices",
                        d.choices().len()
                    )));
                }
                if ix.len() == d.choices().len() {
                    return Ok(Support::Full);
                }
                Ok(Support::Choices(ix.clone()))
            }
            (s, d) => Err(Error::InvalidDistribution(format!(
                "support {s:?} does not apply to a {} distribution",
                d.kind()
            ))),
        }
    }

    /// Whether `internal` is allowed (assumes it is already in the declared distribution).
    pub fn allows(&self, internal: f64) -> bool {
        match self {
            Support::Full => true,
            Support::Range { low, high } => {
                let tol = 1e-12 * low.abs().max(high.abs()).max(1.0);
                internal >= low - tol && internal <= high + tol
            }
            Support::Choices(ix) => ix.binary_search(&(internal as usize)).is_ok(),
        }
    }
}
