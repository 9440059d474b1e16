//! Relative search spaces inferred from finished trials: Optuna's group
//! decomposition (for conditional spaces) and plain intersection.
//!
//! Both are maintained incrementally, one trial at a time, and neither depends
//! on the order trials arrive in: a group is a maximal set of parameters that
//! appear in exactly the same trials (the atoms of the trials' parameter sets),
//! and the intersection is what every trial has with the same distribution.
//! Groups are reported sorted by their first parameter name so sampling order,
//! and thus a seeded run, is reproducible.

use crate::distribution::Distribution;
use std::collections::{BTreeMap, BTreeSet};

/// Parameters split into groups that always occur together.
#[derive(Debug, Clone, Default)]
pub(crate) struct SearchSpaceGroup {
    groups: Vec<BTreeSet<String>>,
    dists: BTreeMap<String, Distribution>,
}

impl SearchSpaceGroup {
    /// Refines the groups with one trial's parameters (Optuna's `add_distributions`).
    pub(crate) fn add(&mut self, distributions: &BTreeMap<String, Distribution>) {
        let mut rest: BTreeSet<String> = distributions.keys().cloned().collect();
        let mut next = Vec::with_capacity(self.groups.len() + 1);
        for g in self.groups.drain(..) {
            let (inside, outside): (BTreeSet<String>, BTreeSet<String>) =
                g.into_iter().partition(|k| rest.contains(k));
            for k in &inside {
                rest.remove(k);
            }
            next.push(inside);
            next.push(outside);
        }
        next.push(rest);
        next.retain(|g| !g.is_empty());
        self.groups = next;
        for (k, d) in distributions {
            self.dists.entry(k.clone()).or_insert_with(|| d.clone());
        }
    }

    /// The groups as search spaces, sorted by first name, without single-valued parameters.
    pub(crate) fn spaces(&self) -> Vec<BTreeMap<String, Distribution>> {
        let mut out: Vec<BTreeMap<String, Distribution>> = self
            .groups
            .iter()
            .map(|g| {
                g.iter()
                    .filter_map(|k| self.dists.get(k).map(|d| (k.clone(), d.clone())))
                    .filter(|(_, d)| !d.is_single())
                    .collect::<BTreeMap<_, _>>()
            })
            .filter(|m| !m.is_empty())
            .collect();
        out.sort_by(|a, b| a.keys().next().cmp(&b.keys().next()));
        out
    }
}

/// The parameters every trial has, with the same distribution.
#[derive(Debug, Clone, Default)]
pub(crate) struct Intersection {
    space: Option<BTreeMap<String, Distribution>>,
}

impl Intersection {
    /// Intersects with one trial's parameters.
    pub(crate) fn add(&mut self, distributions: &BTreeMap<String, Distribution>) {
        match &mut self.space {
            None => self.space = Some(distributions.clone()),
            Some(s) => s.retain(|k, d| distributions.get(k) == Some(d)),
        }
    }

    /// The intersection, without single-valued parameters.
    pub(crate) fn space(&self) -> BTreeMap<String, Distribution> {
        self.space
            .iter()
            .flatten()
            .filter(|(_, d)| !d.is_single())
            .map(|(k, d)| (k.clone(), d.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::distribution::FloatDistribution;

    fn params(names: &[&str]) -> BTreeMap<String, Distribution> {
        names
            .iter()
            .map(|n| {
                (
                    n.to_string(),
                    FloatDistribution::new(0.0, 1.0).unwrap().into(),
                )
            })
            .collect()
    }

    fn names(spaces: &[BTreeMap<String, Distribution>]) -> Vec<Vec<String>> {
        spaces.iter().map(|s| s.keys().cloned().collect()).collect()
    }

    #[test]
    fn conditional_parameters_form_their_own_groups() {
        let trials = [
            params(&["model", "lr", "svm_c"]),
            params(&["model", "lr", "depth"]),
            params(&["model", "lr"]),
        ];
        let mut g = SearchSpaceGroup::default();
        for t in &trials {
            g.add(t);
        }
        assert_eq!(
            names(&g.spaces()),
            vec![vec!["depth"], vec!["lr", "model"], vec!["svm_c"]]
        );
        // Order of arrival does not matter.
        let mut h = SearchSpaceGroup::default();
        for t in trials.iter().rev() {
            h.add(t);
        }
        assert_eq!(names(&h.spaces()), names(&g.spaces()));
    }

    #[test]
    fn intersection_drops_missing_and_changed_parameters() {
        let mut i = Intersection::default();
        i.add(&params(&["a", "b", "c"]));
        i.add(&params(&["a", "b"]));
        let mut changed = params(&["a", "b"]);
        changed.insert("b".into(), FloatDistribution::new(0.0, 2.0).unwrap().into());
        i.add(&changed);
        assert_eq!(i.space().keys().cloned().collect::<Vec<_>>(), vec!["a"]);
    }
}
