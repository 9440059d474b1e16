//! Exhaustive search over a grid.

use super::{Sampler, SamplerConfig};
use crate::distribution::{Distribution, ParamValue, Support};
use crate::error::{Error, Result};
use crate::trial::FrozenTrial;
use crate::view::StudyView;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

/// Visits every point of a Cartesian grid once, in a seeded random order.
///
/// Each trial is assigned the first grid point (in that order) that no other
/// trial of the study has taken, judged from the trials' parameters and from
/// points handed out in this process but not yet written. Once every point has
/// been visited it starts again with the least-visited points. A trial that
/// already holds some of the grid's parameters (suggested in another process,
/// as an executor's memory estimator does before the worker runs the
/// objective) is assigned a point that agrees with them.
#[derive(Debug)]
pub struct GridSampler {
    /// The space as given: parameter names (in the grid's column order)
    /// and their values; also what [`Sampler::to_config`] returns.
    space: BTreeMap<String, Vec<ParamValue>>,
    seed: u64,
    grid: Vec<Vec<ParamValue>>,
    order: Vec<usize>,
    assigned: Mutex<HashMap<u64, usize>>,
}

impl GridSampler {
    /// A grid over `space` (parameter name -> values to try).
    pub fn new<K: Into<String>>(
        space: impl IntoIterator<Item = (K, Vec<ParamValue>)>,
        seed: u64,
    ) -> Result<Self> {
        let space: BTreeMap<String, Vec<ParamValue>> =
            space.into_iter().map(|(k, v)| (k.into(), v)).collect();
        if space.is_empty() {
            return Err(Error::InvalidConfig(
                "a grid needs at least one parameter".into(),
            ));
        }
        if let Some((k, _)) = space.iter().find(|(_, v)| v.is_empty()) {
            return Err(Error::InvalidConfig(format!(
                "grid parameter `{k}` has no values"
            )));
        }
        let mut grid: Vec<Vec<ParamValue>> = vec![Vec::new()];
        for values in space.values() {
            grid = grid
                .into_iter()
                .flat_map(|prefix| {
                    values.iter().map(move |v| {
                        let mut p = prefix.clone();
                        p.push(v.clone());
                        p
                    })
                })
                .collect();
        }
        let mut order: Vec<usize> = (0..grid.len()).collect();
        order.shuffle(&mut ChaCha8Rng::seed_from_u64(seed));
        Ok(GridSampler {
            space,
            seed,
            grid,
            order,
            assigned: Mutex::new(HashMap::new()),
        })
    }

    /// Number of grid points.
    pub fn len(&self) -> usize {
        self.grid.len()
    }

    /// Whether the grid is empty (never: construction requires values).
    pub fn is_empty(&self) -> bool {
        self.grid.is_empty()
    }

    fn point_of(&self, t: &FrozenTrial) -> Option<usize> {
        let values: Option<Vec<ParamValue>> = self.space.keys().map(|n| t.param(n)).collect();
        let values = values?;
        self.grid
            .iter()
            .position(|p| p.iter().zip(&values).all(|(a, b)| same(a, b)))
    }

    fn assign(&self, study: &StudyView<'_>, trial: &FrozenTrial) -> Result<usize> {
        let mut assigned = self.assigned.lock()?;
        if let Some(p) = assigned.get(&trial.id) {
            return Ok(*p);
        }
        let mut visits = vec![0usize; self.grid.len()];
        let mut counted = std::collections::HashSet::new();
        for t in study.trials().iter().filter(|t| t.id != trial.id) {
            if let Some(p) = self.point_of(t) {
                visits[p] += 1;
                counted.insert(t.id);
            }
        }
        // Points handed out in this process whose trials had not written them
        // in this snapshot (or started after it). Entries are kept for the
        // sampler's lifetime: a snapshot can be older than a trial's end.
        for (tid, p) in assigned.iter() {
            if *tid != trial.id && !counted.contains(tid) {
                visits[*p] += 1;
            }
        }
        // The points that agree with the grid parameters the trial already
        // holds (all of them when it holds none, or none agree).
        let held: Vec<(usize, ParamValue)> = self
            .space
            .keys()
            .enumerate()
            .filter_map(|(col, n)| Some((col, trial.param(n)?)))
            .collect();
        let agrees = |p: usize| held.iter().all(|(col, v)| same(&self.grid[p][*col], v));
        let any_agrees = self.order.iter().any(|p| agrees(*p));
        let open = |p: &usize| !any_agrees || agrees(*p);
        let least = self
            .order
            .iter()
            .filter(|p| open(p))
            .map(|p| visits[*p])
            .min()
            .unwrap_or(0);
        let p = self
            .order
            .iter()
            .copied()
            .find(|p| open(p) && visits[*p] == least)
            .unwrap_or(0);
        assigned.insert(trial.id, p);
        Ok(p)
    }
}

fn same(a: &ParamValue, b: &ParamValue) -> bool {
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-12 * x.abs().max(1.0),
        _ => a.to_choice().same_as(&b.to_choice()),
    }
}

impl Sampler for GridSampler {
    fn sample_independent(
        &self,
        study: &StudyView<'_>,
        trial: &FrozenTrial,
        name: &str,
        dist: &Distribution,
        support: &Support,
    ) -> Result<f64> {
        let Some(col) = self.space.keys().position(|n| n == name) else {
            return Err(Error::InvalidConfig(format!(
                "parameter `{name}` is not in the grid (grid parameters: {})",
                self.space.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        };
        let p = self.assign(study, trial)?;
        let v = &self.grid[p][col];
        let x = dist.to_internal(v)?;
        if !support.allows(x) {
            return Err(Error::EmptySupport {
                name: name.to_owned(),
                reason: format!("grid value {v} is excluded by the constraint ({support:?})"),
            });
        }
        Ok(x)
    }

    fn to_config(&self) -> Option<SamplerConfig> {
        let space = self
            .space
            .iter()
            .map(|(k, vs)| {
                (
                    k.clone(),
                    vs.iter().map(ParamValue::to_json_value).collect(),
                )
            })
            .collect();
        Some(SamplerConfig::Grid {
            space,
            seed: self.seed,
        })
    }
}
