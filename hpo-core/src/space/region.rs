//! Boxes of range-parameter values in which conditions can hold together.
//!
//! The start-up check that `#[search_space]` generates must decide whether
//! two constraints' conditions can hold in one reachable trial. Fields with
//! few values are enumerated; float fields and wide integer ranges cannot be,
//! so the macro rewrites what the conditions say about them as comparisons
//! with number literals ([`Bound`]s), in disjunctive normal form: a
//! [`Region`] is a list of groups, one per condition, constraint or
//! `active_if` involved, each a list of alternatives of which at least one
//! must hold, each alternative a conjunction of bounds.
//!
//! [`Region::points`] picks one alternative per group in every way, meets the
//! bounds of the choices into one [`Interval`] per field, drops the choices
//! that leave some field empty, and returns one value per field for each
//! remaining box: a value the field's declared distribution contains (on its
//! step grid, an integer for an int), inside every interval. The generated
//! code then binds the fields to each point and evaluates the real
//! conditions and narrowings on it, so a point only proposes a trial; the
//! compiled code decides whether it exists. A rounding in this module can
//! therefore miss a contradiction, never report one that is not real.

use crate::distribution::Distribution;
use crate::error::Result;

/// The most points [`Region::points`] returns (a bound on the work of one
/// check; the macro keeps regions far below it).
const MAX_POINTS: usize = 4_096;

/// One comparison of a range field with a number, as a condition states it
/// (`lr > 1e-3` is `Gt(1e-3)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Bound {
    /// `field < value`.
    Lt(f64),
    /// `field <= value`.
    Le(f64),
    /// `field > value`.
    Gt(f64),
    /// `field >= value`.
    Ge(f64),
    /// `field == value`.
    Eq(f64),
}

/// A set of reals between two ends, each open or closed; empty when the ends
/// cross (or meet with an open end).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    low: f64,
    low_open: bool,
    high: f64,
    high_open: bool,
}

impl Interval {
    /// `[low, high]`.
    pub fn closed(low: f64, high: f64) -> Self {
        Interval {
            low,
            low_open: false,
            high,
            high_open: false,
        }
    }

    /// Every value of a range distribution lies in this interval; `None`
    /// for a categorical.
    pub fn of(dist: &Distribution) -> Option<Self> {
        match dist {
            Distribution::Float(d) => Some(Self::closed(d.low(), d.high())),
            Distribution::Int(d) => Some(Self::closed(d.low() as f64, d.high() as f64)),
            Distribution::Categorical(_) => None,
        }
    }

    /// The part of this interval where `bound` holds.
    pub fn meet(self, bound: Bound) -> Self {
        let mut out = self;
        let mut below = |v: f64, open: bool| {
            if v < out.high || (v == out.high && open) {
                out.high = v;
                out.high_open = open;
            }
        };
        match bound {
            Bound::Lt(v) => below(v, true),
            Bound::Le(v) | Bound::Eq(v) => below(v, false),
            Bound::Gt(_) | Bound::Ge(_) => {}
        }
        let mut above = |v: f64, open: bool| {
            if v > out.low || (v == out.low && open) {
                out.low = v;
                out.low_open = open;
            }
        };
        match bound {
            Bound::Gt(v) => above(v, true),
            Bound::Ge(v) | Bound::Eq(v) => above(v, false),
            Bound::Lt(_) | Bound::Le(_) => {}
        }
        out
    }

    /// Whether `x` lies in the interval.
    pub fn contains(&self, x: f64) -> bool {
        let above = if self.low_open {
            x > self.low
        } else {
            x >= self.low
        };
        let below = if self.high_open {
            x < self.high
        } else {
            x <= self.high
        };
        above && below
    }

    /// Whether no real lies in the interval (a NaN end makes it empty).
    pub fn is_empty(&self) -> bool {
        // Written as what a non-empty interval is, so a NaN end is empty.
        let closed_point = self.low == self.high && !self.low_open && !self.high_open;
        let has_values = self.low < self.high || closed_point;
        !has_values
    }

    /// A value that `dist` contains inside this interval, near its middle;
    /// `None` when there is none (or none this search can find: see the
    /// module docs).
    pub fn point(&self, dist: &Distribution) -> Option<f64> {
        if self.is_empty() {
            return None;
        }
        let candidates: Vec<f64> = match dist {
            Distribution::Float(d) => match d.step() {
                None => {
                    // The middle, else a closed end (the middle of two
                    // neighbouring floats is one of them).
                    let mid = self.low / 2.0 + self.high / 2.0;
                    vec![mid, self.low, self.high]
                }
                Some(s) => {
                    let grid = |k: f64| (d.low() + k * s).clamp(d.low(), d.high());
                    self.grid_steps(d.low(), s).into_iter().map(grid).collect()
                }
            },
            Distribution::Int(d) => {
                let s = d.step() as f64;
                let base = d.low() as f64;
                self.grid_steps(base, s)
                    .into_iter()
                    .map(|k| base + k * s)
                    .collect()
            }
            Distribution::Categorical(_) => return None,
        };
        candidates
            .into_iter()
            .find(|x| self.contains(*x) && dist.contains(*x))
    }

    /// Grid indices `k` (of `base + k * step`) worth trying: those nearest
    /// the middle and the two ends of the interval.
    fn grid_steps(&self, base: f64, step: f64) -> Vec<f64> {
        let index = |x: f64| (x - base) / step;
        let mid = index(self.low / 2.0 + self.high / 2.0).round();
        let first = index(self.low).ceil();
        let last = index(self.high).floor();
        let mut out = Vec::new();
        for k in [mid, first, last] {
            out.extend([k, k + 1.0, k - 1.0]);
        }
        out.retain(|k| k.is_finite() && *k >= 0.0);
        out
    }
}

/// The range fields of a start-up check, and the alternatives that must hold
/// for some trial to meet two constraints' conditions (see the module docs).
#[derive(Debug, Clone)]
pub struct Region {
    /// Each field's declared distribution; `None` when it could not be built
    /// or is not a range (then the region has no points).
    dists: Vec<Option<Distribution>>,
    /// At least one alternative of each group holds; an alternative is a
    /// conjunction of `(field index, bound)`.
    groups: Vec<Vec<Vec<(usize, Bound)>>>,
}

impl Region {
    /// A region over fields with these declared distributions (field `k` of
    /// the bounds is `dists[k]`), with no condition yet.
    pub fn new(dists: Vec<Result<Distribution>>) -> Self {
        Region {
            dists: dists
                .into_iter()
                .map(|d| d.ok().filter(|d| Interval::of(d).is_some()))
                .collect(),
            groups: Vec::new(),
        }
    }

    /// Requires one of `alternatives` to hold (none: the region is empty).
    pub fn any_of(mut self, alternatives: &[&[(usize, Bound)]]) -> Self {
        self.groups
            .push(alternatives.iter().map(|a| a.to_vec()).collect());
        self
    }

    /// One point (a value per field, in the distributions' internal units)
    /// in each box the alternatives allow, without repeats; empty when every
    /// choice of alternatives leaves some field no value.
    pub fn points(&self) -> Vec<Vec<f64>> {
        let mut start = Vec::with_capacity(self.dists.len());
        for d in &self.dists {
            match d.as_ref().and_then(Interval::of) {
                Some(i) => start.push(i),
                None => return Vec::new(),
            }
        }
        let mut out = Vec::new();
        self.walk(0, start, &mut out);
        out
    }

    fn walk(&self, group: usize, boxed: Vec<Interval>, out: &mut Vec<Vec<f64>>) {
        if out.len() >= MAX_POINTS || boxed.iter().any(Interval::is_empty) {
            return;
        }
        let Some(alternatives) = self.groups.get(group) else {
            let point: Option<Vec<f64>> = boxed
                .iter()
                .zip(&self.dists)
                .map(|(i, d)| i.point(d.as_ref()?))
                .collect();
            if let Some(p) = point {
                if !out.contains(&p) {
                    out.push(p);
                }
            }
            return;
        };
        'alternatives: for alt in alternatives {
            let mut next = boxed.clone();
            for &(field, bound) in alt {
                match next.get_mut(field) {
                    Some(i) => *i = i.meet(bound),
                    None => continue 'alternatives,
                }
            }
            self.walk(group + 1, next, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::{FloatDistribution, IntDistribution};

    fn float(low: f64, high: f64) -> Result<Distribution> {
        FloatDistribution::new(low, high).map(Into::into)
    }

    fn region(dists: Vec<Result<Distribution>>, groups: &[&[&[(usize, Bound)]]]) -> Region {
        groups.iter().fold(Region::new(dists), |r, g| r.any_of(g))
    }

    #[test]
    fn bounds_meet_into_an_interval_keeping_the_tighter_end() {
        let i = Interval::closed(0.0, 1.0)
            .meet(Bound::Gt(0.25))
            .meet(Bound::Ge(0.25))
            .meet(Bound::Le(0.5))
            .meet(Bound::Lt(0.5));
        assert!(!i.contains(0.25) && i.contains(0.3) && !i.contains(0.5));
        let point = Interval::closed(0.0, 1.0)
            .meet(Bound::Ge(0.5))
            .meet(Bound::Le(0.5));
        assert!(!point.is_empty() && point.contains(0.5));
        assert_eq!(point, Interval::closed(0.0, 1.0).meet(Bound::Eq(0.5)));
    }

    #[test]
    fn strict_bounds_that_meet_at_one_value_leave_nothing() {
        let base = Interval::closed(0.0, 1.0);
        assert!(base.meet(Bound::Ge(0.5)).meet(Bound::Lt(0.5)).is_empty());
        assert!(base.meet(Bound::Gt(0.5)).meet(Bound::Le(0.5)).is_empty());
        assert!(!base.meet(Bound::Ge(0.5)).meet(Bound::Le(0.5)).is_empty());
        // Beyond the declared range, and at its closed end.
        assert!(base.meet(Bound::Gt(1.0)).is_empty());
        assert!(!base.meet(Bound::Ge(1.0)).is_empty());
        assert!(Interval::closed(f64::NAN, 1.0).is_empty());
    }

    #[test]
    fn a_float_point_lies_inside_open_ends() {
        let d = float(1e-5, 1e-1).unwrap();
        let i = Interval::of(&d).unwrap().meet(Bound::Gt(1e-2));
        let x = i.point(&d).unwrap();
        assert!(x > 1e-2 && x <= 1e-1, "{x}");
        // A single closed value is its own point; an open one has none.
        let at = Interval::of(&d).unwrap().meet(Bound::Ge(1e-1));
        assert_eq!(at.point(&d), Some(1e-1));
        let past = Interval::of(&d).unwrap().meet(Bound::Gt(1e-1));
        assert_eq!(past.point(&d), None);
        // Two neighbouring floats, both ends open: no float between them.
        let next = f64::from_bits(0.5f64.to_bits() + 1);
        let gap = Interval::closed(0.0, 1.0)
            .meet(Bound::Gt(0.5))
            .meet(Bound::Lt(next));
        assert!(!gap.is_empty());
        assert_eq!(gap.point(&float(0.0, 1.0).unwrap()), None);
    }

    #[test]
    fn a_stepped_float_point_is_on_the_grid() {
        let d: Distribution = FloatDistribution::stepped(0.0, 1.0, 0.25).unwrap().into();
        let all = Interval::of(&d).unwrap();
        // Between grid values: nothing.
        assert_eq!(
            all.meet(Bound::Gt(0.3)).meet(Bound::Lt(0.45)).point(&d),
            None
        );
        let x = all.meet(Bound::Gt(0.3)).meet(Bound::Lt(0.55)).point(&d);
        assert_eq!(x, Some(0.5));
        // On a grid value, strictness decides.
        assert_eq!(
            all.meet(Bound::Ge(0.75)).meet(Bound::Le(0.8)).point(&d),
            Some(0.75)
        );
        assert_eq!(
            all.meet(Bound::Gt(0.75)).meet(Bound::Le(0.8)).point(&d),
            None
        );
        let tenth: Distribution = FloatDistribution::stepped(0.0, 1.0, 0.1).unwrap().into();
        let x = Interval::of(&tenth)
            .unwrap()
            .meet(Bound::Gt(0.25))
            .meet(Bound::Lt(0.35))
            .point(&tenth)
            .unwrap();
        assert!((x - 0.3).abs() < 1e-12 && tenth.contains(x), "{x}");
    }

    #[test]
    fn an_int_point_is_an_integer_on_the_step_grid() {
        let d: Distribution = IntDistribution::new(1, 100_000).unwrap().into();
        let all = Interval::of(&d).unwrap();
        // `> 50_000` and `< 50_001` hold for no integer.
        assert_eq!(
            all.meet(Bound::Gt(50_000.0))
                .meet(Bound::Lt(50_001.0))
                .point(&d),
            None
        );
        assert_eq!(
            all.meet(Bound::Gt(50_000.0))
                .meet(Bound::Le(50_001.0))
                .point(&d),
            Some(50_001.0)
        );
        let stepped: Distribution = IntDistribution::stepped(0, 10_000, 100).unwrap().into();
        let all = Interval::of(&stepped).unwrap();
        assert_eq!(
            all.meet(Bound::Gt(150.0))
                .meet(Bound::Lt(200.0))
                .point(&stepped),
            None
        );
        assert_eq!(
            all.meet(Bound::Gt(150.0))
                .meet(Bound::Le(200.0))
                .point(&stepped),
            Some(200.0)
        );
        let log: Distribution = IntDistribution::log(1, 1 << 20).unwrap().into();
        let x = Interval::of(&log)
            .unwrap()
            .meet(Bound::Gt(1000.0))
            .point(&log)
            .unwrap();
        assert!(x > 1000.0 && x.fract() == 0.0, "{x}");
    }

    #[test]
    fn a_region_has_a_point_only_where_every_group_can_hold() {
        // lr in [1e-5, 1e-1], momentum in [0, 1].
        let dists = || vec![float(1e-5, 1e-1), float(0.0, 1.0)];
        // lr > 1e-3 and lr > 1e-2: overlap above 1e-2.
        let both = region(
            dists(),
            &[&[&[(0, Bound::Gt(1e-3))]], &[&[(0, Bound::Gt(1e-2))]]],
        );
        let points = both.points();
        assert_eq!(points.len(), 1);
        assert!(points[0][0] > 1e-2, "{points:?}");
        // lr > 1e-3 and lr < 1e-4: disjoint.
        let disjoint = region(
            dists(),
            &[&[&[(0, Bound::Gt(1e-3))]], &[&[(0, Bound::Lt(1e-4))]]],
        );
        assert!(disjoint.points().is_empty());
        // A third group rules the overlap out: either momentum <= 0.5 (with
        // momentum > 0.9 required) or lr <= 1e-2 (with lr > 1e-2 required).
        let ruled_out = region(
            dists(),
            &[
                &[&[(0, Bound::Gt(1e-2))]],
                &[&[(1, Bound::Gt(0.9))]],
                &[&[(1, Bound::Le(0.5))], &[(0, Bound::Le(1e-2))]],
            ],
        );
        assert!(ruled_out.points().is_empty());
        // One alternative of a group is enough.
        let either = region(
            dists(),
            &[
                &[&[(0, Bound::Gt(1e-2))]],
                &[&[(1, Bound::Le(0.5))], &[(1, Bound::Gt(0.9))]],
            ],
        );
        assert_eq!(either.points().len(), 2);
        // A group with no alternative can never hold.
        assert!(region(dists(), &[&[]]).points().is_empty());
        // With no group at all, any value will do.
        assert_eq!(region(dists(), &[]).points().len(), 1);
    }

    #[test]
    fn a_region_over_a_broken_or_unknown_field_has_no_points() {
        let broken = region(vec![float(1.0, 0.0)], &[]);
        assert!(broken.points().is_empty());
        let out_of_range = region(vec![float(0.0, 1.0)], &[&[&[(3, Bound::Gt(0.5))]]]);
        assert!(out_of_range.points().is_empty());
    }
}
