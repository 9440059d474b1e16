//! Parameters as coordinates of a box: the space QMC and CMA-ES sample in.
//!
//! As Optuna's `_SearchSpaceTransform`: a log-scaled parameter is a coordinate
//! in log units; an integer or stepped parameter covers its values' rounding
//! cells (`[low - step/2, high + step/2]`), so every value gets the same share
//! of the box; a categorical covers `[0, choices)`, one unit per choice.
//! Coordinates map back to the nearest valid internal value.

use crate::distribution::Distribution;

/// The coordinate range of `dist`.
pub(crate) fn bounds(dist: &Distribution) -> (f64, f64) {
    bounds_with(dist, true)
}

/// The coordinate range of `dist`, with or without the half steps around the
/// end values of integer and stepped parameters (CMA-ES with margin handles
/// the grid itself and wants its end values on the bounds).
pub(crate) fn bounds_with(dist: &Distribution, step_cells: bool) -> (f64, f64) {
    match dist {
        Distribution::Float(d) => match d.step() {
            Some(s) if step_cells => (d.low() - s / 2.0, d.high() + s / 2.0),
            Some(_) => (d.low(), d.high()),
            None if d.is_log() => (d.low().ln(), d.high().ln()),
            None => (d.low(), d.high()),
        },
        Distribution::Int(d) => {
            let half = if step_cells {
                d.step() as f64 / 2.0
            } else {
                0.0
            };
            let (lo, hi) = (d.low() as f64 - half, d.high() as f64 + half);
            if d.is_log() {
                (lo.ln(), hi.ln())
            } else {
                (lo, hi)
            }
        }
        Distribution::Categorical(d) => (0.0, d.choices().len() as f64),
    }
}

/// The internal value at coordinate `t` (clamped into the distribution).
pub(crate) fn untransform(dist: &Distribution, t: f64) -> f64 {
    let log = match dist {
        Distribution::Float(d) => d.is_log() && d.step().is_none(),
        Distribution::Int(d) => d.is_log(),
        Distribution::Categorical(_) => false,
    };
    match dist {
        Distribution::Categorical(_) => dist.snap(t.floor()),
        _ if log => dist.snap(t.exp()),
        _ => dist.snap(t),
    }
}

/// The coordinate of internal value `x` (a categorical's index at the centre of its unit).
pub(crate) fn transform(dist: &Distribution, x: f64) -> f64 {
    match dist {
        Distribution::Float(d) if d.is_log() && d.step().is_none() => x.ln(),
        Distribution::Int(d) if d.is_log() => x.ln(),
        Distribution::Categorical(_) => x + 0.5,
        _ => x,
    }
}

/// The internal value at fraction `u` in `[0, 1)` of `dist`'s box.
pub(crate) fn from_unit(dist: &Distribution, u: f64) -> f64 {
    let (lo, hi) = bounds(dist);
    untransform(dist, lo + u * (hi - lo))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::{CategoricalDistribution, FloatDistribution, IntDistribution};

    fn cases() -> Vec<Distribution> {
        vec![
            FloatDistribution::new(-2.0, 3.0).unwrap().into(),
            FloatDistribution::log(1e-5, 1.0).unwrap().into(),
            FloatDistribution::stepped(0.0, 1.0, 0.25).unwrap().into(),
            IntDistribution::new(1, 10).unwrap().into(),
            IntDistribution::log(1, 1024).unwrap().into(),
            IntDistribution::stepped(8, 128, 8).unwrap().into(),
            CategoricalDistribution::new(["a", "b", "c"])
                .unwrap()
                .into(),
        ]
    }

    #[test]
    fn every_coordinate_maps_into_the_distribution_and_back() {
        for d in cases() {
            for i in 0..1000 {
                let x = from_unit(&d, i as f64 / 1000.0);
                assert!(d.contains(x), "{x} not in {d}");
                let (lo, hi) = bounds(&d);
                let t = transform(&d, x);
                assert!(lo <= t && t <= hi, "{t} outside [{lo}, {hi}] for {d}");
                assert_eq!(untransform(&d, t), x, "{d}: {x} does not round-trip");
            }
        }
    }

    #[test]
    fn values_share_the_box_equally() {
        // Ten integers, ten equal cells; three choices, three equal cells.
        let d: Distribution = IntDistribution::new(1, 10).unwrap().into();
        let mut count = [0; 10];
        for i in 0..10_000 {
            count[from_unit(&d, i as f64 / 10_000.0) as usize - 1] += 1;
        }
        assert!(count.iter().all(|&c| c == 1000), "{count:?}");
        let c: Distribution = CategoricalDistribution::new(["a", "b", "c"])
            .unwrap()
            .into();
        let mut count = [0; 3];
        for i in 0..3000 {
            count[from_unit(&c, i as f64 / 3000.0) as usize] += 1;
        }
        assert_eq!(count, [1000, 1000, 1000]);
    }
}
