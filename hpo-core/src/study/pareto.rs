//! Pareto fronts for multi-objective studies.

use crate::direction::Direction;
use crate::trial::FrozenTrial;
use std::sync::Arc;

/// Whether `a` dominates `b`: no worse in every objective, better in one.
pub(crate) fn dominates(a: &[f64], b: &[f64], directions: &[Direction]) -> bool {
    let mut strictly = false;
    for ((x, y), d) in a.iter().zip(b).zip(directions) {
        if d.is_better(*y, *x) {
            return false;
        }
        if d.is_better(*x, *y) {
            strictly = true;
        }
    }
    strictly
}

/// The non-dominated trials among `trials` (all must have values), by number.
pub(crate) fn front(
    trials: &[Arc<FrozenTrial>],
    directions: &[Direction],
) -> Vec<Arc<FrozenTrial>> {
    let with_values: Vec<(&Arc<FrozenTrial>, &[f64])> = trials
        .iter()
        .filter_map(|t| t.values.as_deref().map(|v| (t, v)))
        .filter(|(_, v)| v.len() == directions.len())
        .collect();
    with_values
        .iter()
        .filter(|(_, v)| !with_values.iter().any(|(_, w)| dominates(w, v, directions)))
        .map(|(t, _)| Arc::clone(t))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::TrialState;

    fn t(n: u64, v: &[f64]) -> Arc<FrozenTrial> {
        let mut f = FrozenTrial::new(n, n, TrialState::Complete);
        f.values = Some(v.to_vec());
        Arc::new(f)
    }

    #[test]
    fn front_of_min_max_keeps_only_non_dominated() {
        let ds = [Direction::Minimize, Direction::Maximize];
        let ts = vec![
            t(0, &[1.0, 1.0]),
            t(1, &[2.0, 2.0]),
            t(2, &[2.0, 0.5]),
            t(3, &[0.5, 0.5]),
        ];
        let f: Vec<u64> = front(&ts, &ds).iter().map(|t| t.number).collect();
        assert_eq!(f, vec![0, 1, 3]);
    }

    #[test]
    fn equal_points_do_not_dominate_each_other() {
        let ds = [Direction::Minimize, Direction::Minimize];
        let ts = vec![t(0, &[1.0, 1.0]), t(1, &[1.0, 1.0])];
        assert_eq!(front(&ts, &ds).len(), 2);
    }
}
