//! Hand-built histories for pruner unit tests.

use crate::direction::Direction;
use crate::trial::{FrozenTrial, TrialState};
use crate::view::StudyView;
use std::sync::Arc;

/// A trial with the given number, state and `(step, value)` curve.
pub(crate) fn trial(number: u64, state: TrialState, curve: &[(u64, f64)]) -> FrozenTrial {
    let mut t = FrozenTrial::new(number, number, state);
    t.intermediate_values = curve.iter().copied().collect();
    if state == TrialState::Complete || state == TrialState::Pruned {
        t.values = t.last_intermediate().map(|(_, v)| vec![v]);
    }
    t
}

/// A COMPLETE trial whose curve reports `values` at steps 0, 1, 2, ...
pub(crate) fn complete(number: u64, values: &[f64]) -> Arc<FrozenTrial> {
    Arc::new(trial(number, TrialState::Complete, &steps(values)))
}

/// A RUNNING trial whose curve reports `values` at steps 0, 1, 2, ...
pub(crate) fn running(number: u64, values: &[f64]) -> FrozenTrial {
    trial(number, TrialState::Running, &steps(values))
}

/// `values` at steps 0, 1, 2, ...
pub(crate) fn steps(values: &[f64]) -> Vec<(u64, f64)> {
    values
        .iter()
        .enumerate()
        .map(|(i, v)| (i as u64, *v))
        .collect()
}

/// The two directions with a readable label, for table-driven tests.
pub(crate) const DIRECTIONS: [Direction; 2] = [Direction::Minimize, Direction::Maximize];

/// Flips a minimisation table into its maximisation mirror.
pub(crate) fn mirror(direction: Direction, v: f64) -> f64 {
    match direction {
        Direction::Minimize => v,
        Direction::Maximize => -v,
    }
}

/// A view named `name` over `trials` with one `direction`.
pub(crate) fn view<'a>(
    name: &'a str,
    directions: &'a [Direction],
    trials: &'a [Arc<FrozenTrial>],
) -> StudyView<'a> {
    StudyView::new(name, directions, trials)
}
