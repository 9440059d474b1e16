//! The finished trials a persistent storage has read, per study: read once,
//! never again (finished trials never change), and shared with every
//! snapshot through a [`SettledTrials`] front.

use crate::trial::{FrozenTrial, SettledTrials, TrialSnapshot};
use std::collections::BTreeMap;
use std::sync::Arc;

/// A study's finished trials by number: the settled front (trials `0..k`,
/// all finished) and the finished trials after it that wait for an
/// unfinished trial before them to finish.
#[derive(Debug, Default)]
pub(crate) struct FinishedTrials {
    settled: SettledTrials,
    beyond: BTreeMap<u64, Arc<FrozenTrial>>,
}

impl FinishedTrials {
    /// Whether trial `number` is held.
    pub(crate) fn contains(&self, number: u64) -> bool {
        number < self.settled.len() as u64 || self.beyond.contains_key(&number)
    }

    /// Adds a finished trial (one already held is kept: it cannot have
    /// changed) and settles the front as far as it now reaches.
    pub(crate) fn insert(&mut self, t: Arc<FrozenTrial>) {
        if t.number < self.settled.len() as u64 || !t.state.is_finished() {
            return;
        }
        self.beyond.insert(t.number, t);
        while let Some(next) = self.beyond.remove(&(self.settled.len() as u64)) {
            if self.settled.push(Arc::clone(&next)).is_err() {
                self.beyond.insert(next.number, next);
                break;
            }
        }
    }

    /// Every held trial and the `current` unfinished ones, by number: the
    /// front shared, the rest copied.
    pub(crate) fn snapshot(&self, current: Vec<Arc<FrozenTrial>>) -> TrialSnapshot {
        let mut rest = current;
        rest.extend(self.beyond.values().cloned());
        rest.sort_by_key(|t| t.number);
        self.settled.snapshot(rest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::TrialState;

    fn trial(number: u64, state: TrialState) -> Arc<FrozenTrial> {
        Arc::new(FrozenTrial::new(number, number, state))
    }

    #[test]
    fn out_of_order_finishes_settle_once_the_gap_closes() {
        let mut f = FinishedTrials::default();
        f.insert(trial(0, TrialState::Complete));
        f.insert(trial(2, TrialState::Complete));
        assert!(f.contains(0) && f.contains(2) && !f.contains(1));
        let snap = f.snapshot(vec![trial(1, TrialState::Running)]);
        assert_eq!(snap.settled_len(), 1);
        let numbers: Vec<u64> = snap.iter().map(|t| t.number).collect();
        assert_eq!(numbers, vec![0, 1, 2]);
        f.insert(trial(1, TrialState::Fail));
        let snap = f.snapshot(Vec::new());
        assert_eq!(snap.settled_len(), 3);
        assert_eq!(snap.copied(), 3);
        // Held trials are not replaced; unfinished ones are not held.
        f.insert(trial(3, TrialState::Running));
        assert!(!f.contains(3));
    }
}
