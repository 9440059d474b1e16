//! The search space as the GP sees it: every parameter a coordinate of the
//! unit cube, as Optuna's `_gp/search_space.py`.
//!
//! * A float is scaled to `[0, 1]`, in log units when it is log-scaled.
//! * An integer or stepped float covers its values' rounding cells
//!   (`[low - step/2, high + step/2]`, in log units for log integers), so its
//!   values sit on a grid inside `(0, 1)`; proposals are always grid points.
//! * A categorical is its choice's index (`0, 1, ...`): the kernel compares
//!   indices for equality only (see `kernel`).

use crate::distribution::Distribution;
use crate::sampler::transform::{bounds, transform, untransform};

/// Exhaustive search below this many values; a line search above.
pub(super) const EXHAUSTIVE_UP_TO: usize = 16;

/// How a coordinate may move.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    /// Anywhere in `[0, 1]`.
    Continuous,
    /// On the grid of `count` values.
    Discrete {
        /// How many values the parameter has.
        count: usize,
    },
    /// One of `count` choice indices.
    Categorical {
        /// How many choices.
        count: usize,
    },
}

/// One parameter as a coordinate.
#[derive(Debug, Clone)]
pub(super) struct Axis {
    /// The parameter's name.
    pub(super) name: String,
    /// Its declared distribution.
    pub(super) dist: Distribution,
    /// How the coordinate moves.
    pub(super) kind: Kind,
    lo: f64,
    hi: f64,
}

impl Axis {
    /// The coordinate of `name` drawn from `dist`.
    pub(super) fn new(name: &str, dist: &Distribution) -> Axis {
        let (lo, hi) = bounds(dist);
        let kind = match dist {
            Distribution::Categorical(c) => Kind::Categorical {
                count: c.choices().len(),
            },
            Distribution::Float(f) => match f.step() {
                Some(s) => Kind::Discrete {
                    count: ((f.high() - f.low()) / s + 1e-9).floor() as usize + 1,
                },
                None => Kind::Continuous,
            },
            Distribution::Int(i) => Kind::Discrete {
                count: ((i.high() - i.low()) / i.step()) as usize + 1,
            },
        };
        Axis {
            name: name.to_owned(),
            dist: dist.clone(),
            kind,
            lo,
            hi,
        }
    }

    /// Whether the kernel treats it as categorical.
    pub(super) fn is_categorical(&self) -> bool {
        matches!(self.kind, Kind::Categorical { .. })
    }

    /// The coordinate of internal value `x`.
    pub(super) fn to_unit(&self, x: f64) -> f64 {
        match self.kind {
            Kind::Categorical { .. } => x,
            _ if self.hi > self.lo => {
                ((transform(&self.dist, x) - self.lo) / (self.hi - self.lo)).clamp(0.0, 1.0)
            }
            _ => 0.5,
        }
    }

    /// The internal value at coordinate `u` (the nearest valid one).
    pub(super) fn value_at(&self, u: f64) -> f64 {
        match self.kind {
            Kind::Categorical { count } => u.round().clamp(0.0, (count - 1) as f64),
            _ => untransform(
                &self.dist,
                self.lo + u.clamp(0.0, 1.0) * (self.hi - self.lo),
            ),
        }
    }

    /// `u` moved onto the nearest valid coordinate.
    pub(super) fn snap(&self, u: f64) -> f64 {
        match self.kind {
            Kind::Continuous => u.clamp(0.0, 1.0),
            _ => self.to_unit(self.value_at(u)),
        }
    }

    /// The coordinate of grid value `i` (a discrete or categorical axis).
    pub(super) fn grid(&self, i: usize) -> f64 {
        match (self.kind, &self.dist) {
            (Kind::Categorical { .. }, _) => i as f64,
            (_, Distribution::Float(f)) => {
                self.to_unit(self.dist.snap(f.low() + i as f64 * f.step().unwrap_or(0.0)))
            }
            (_, Distribution::Int(d)) => {
                self.to_unit(d.low() as f64 + (i as i64 * d.step()) as f64)
            }
            _ => 0.5,
        }
    }

    /// The index of the grid value nearest coordinate `u`.
    pub(super) fn grid_index(&self, u: f64) -> usize {
        let count = match self.kind {
            Kind::Continuous => return 0,
            Kind::Discrete { count } | Kind::Categorical { count } => count,
        };
        if let Kind::Categorical { .. } = self.kind {
            return (u.round().max(0.0) as usize).min(count - 1);
        }
        let x = self.value_at(u);
        let i = match &self.dist {
            Distribution::Float(f) => ((x - f.low()) / f.step().unwrap_or(1.0)).round(),
            Distribution::Int(d) => ((x - d.low() as f64) / d.step() as f64).round(),
            Distribution::Categorical(_) => 0.0,
        };
        (i.max(0.0) as usize).min(count - 1)
    }

    /// The coordinate at fraction `q ∈ [0, 1)` of the axis (a QMC point).
    pub(super) fn at_fraction(&self, q: f64) -> f64 {
        match self.kind {
            Kind::Continuous => q,
            Kind::Categorical { count } => {
                ((q * count as f64).floor() as usize).min(count - 1) as f64
            }
            Kind::Discrete { .. } => self.snap(q),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::{CategoricalDistribution, FloatDistribution, IntDistribution};

    #[test]
    fn values_round_trip_and_grids_are_the_values() {
        let axes = [
            Axis::new("a", &FloatDistribution::new(-2.0, 3.0).unwrap().into()),
            Axis::new("b", &FloatDistribution::log(1e-5, 1.0).unwrap().into()),
            Axis::new(
                "c",
                &FloatDistribution::stepped(0.0, 1.0, 0.25).unwrap().into(),
            ),
            Axis::new("d", &IntDistribution::new(1, 10).unwrap().into()),
            Axis::new("e", &IntDistribution::log(1, 1024).unwrap().into()),
            Axis::new("f", &IntDistribution::stepped(8, 128, 8).unwrap().into()),
            Axis::new(
                "g",
                &CategoricalDistribution::new(["x", "y", "z"])
                    .unwrap()
                    .into(),
            ),
        ];
        assert_eq!(axes[2].kind, Kind::Discrete { count: 5 });
        assert_eq!(axes[5].kind, Kind::Discrete { count: 16 });
        assert!(axes[6].is_categorical());
        for a in &axes {
            for i in 0..=100 {
                let x = a.value_at(i as f64 / 100.0);
                assert!(a.dist.contains(x), "{}: {x}", a.name);
                assert_eq!(a.value_at(a.to_unit(x)), x, "{}: {x}", a.name);
                let u = a.at_fraction(i as f64 / 101.0);
                assert_eq!(a.snap(u), u, "{}: {u}", a.name);
            }
            if let Kind::Discrete { count } | Kind::Categorical { count } = a.kind {
                for i in 0..count {
                    let u = a.grid(i);
                    assert_eq!(a.grid_index(u), i, "{}: grid {i}", a.name);
                    assert_eq!(a.snap(u), u, "{}: grid {i}", a.name);
                }
            }
        }
        // A value's cell is centred on it: 1..10 has 10 equal cells.
        assert!((axes[3].to_unit(1.0) - 0.05).abs() < 1e-12);
        assert!((axes[3].to_unit(10.0) - 0.95).abs() < 1e-12);
    }
}
