//! A study's trials at one moment, shared rather than copied.
//!
//! A study reads its trials before and after every trial. Copying the whole
//! list each time costs O(trials in the study) per trial, which made a study
//! of 100,000 trials ten times slower per trial than one of 1,000. Finished
//! trials never change, so a storage keeps the finished trials at the front
//! of the study (numbers `0..k`, all finished) in a [`SettledTrials`], an
//! append-only list of immutable chunks, and a [`TrialSnapshot`] shares those
//! chunks: taking one copies only the trials from the first unfinished one on
//! and the newest, not yet sealed, chunk.

use crate::error::{Error, Result};
use crate::trial::FrozenTrial;
use std::sync::{Arc, OnceLock};

/// Trials per sealed chunk. Taking a snapshot copies at most this many
/// settled trials (the open chunk); sealing a chunk while snapshots hold the
/// chunk list copies the list, one pointer per `CHUNK` trials.
const CHUNK: usize = 64;

/// The settled front of a study: trials `0..len`, all finished, appended in
/// number order and never changed. A storage keeps one per study and builds
/// [`TrialSnapshot`]s from it with [`SettledTrials::snapshot`].
#[derive(Debug, Clone, Default)]
pub struct SettledTrials {
    /// Full chunks of `CHUNK` trials each, shared with the snapshots.
    sealed: Arc<Vec<Arc<[Arc<FrozenTrial>]>>>,
    /// The trials after the sealed chunks (fewer than `CHUNK`).
    open: Vec<Arc<FrozenTrial>>,
}

impl SettledTrials {
    /// An empty front.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many trials are settled: trials numbered `0..len()`.
    pub fn len(&self) -> usize {
        self.sealed.len() * CHUNK + self.open.len()
    }

    /// Whether no trial is settled yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the next settled trial: it must be finished and numbered
    /// [`SettledTrials::len`], or [`Error::InvalidOperation`] says which rule
    /// it breaks and nothing changes.
    pub fn push(&mut self, trial: Arc<FrozenTrial>) -> Result<()> {
        let next = self.len() as u64;
        if trial.number != next || !trial.state.is_finished() {
            return Err(Error::InvalidOperation(format!(
                "a settled trial must be finished and numbered {next}, got trial {} in state {}",
                trial.number, trial.state
            )));
        }
        self.open.push(trial);
        if self.open.len() == CHUNK {
            let chunk: Arc<[Arc<FrozenTrial>]> = std::mem::take(&mut self.open).into();
            Arc::make_mut(&mut self.sealed).push(chunk);
        }
        Ok(())
    }

    /// Settles the finished trials at the front of `trials` (the whole
    /// study, by number, element `i` numbered `i`) that are not settled yet,
    /// stopping at the first unfinished one. Costs O(newly settled trials).
    pub fn advance(&mut self, trials: &[Arc<FrozenTrial>]) -> Result<()> {
        while let Some(t) = trials.get(self.len()) {
            if !t.state.is_finished() {
                break;
            }
            self.push(Arc::clone(t))?;
        }
        Ok(())
    }

    /// A snapshot of the study: the settled trials, shared, followed by
    /// `rest`, the trials numbered from [`SettledTrials::len`] on, in number
    /// order. Costs O(`rest` + one chunk).
    pub fn snapshot(&self, rest: Vec<Arc<FrozenTrial>>) -> TrialSnapshot {
        let settled = self.len();
        let mut tail = Vec::with_capacity(self.open.len() + rest.len());
        tail.extend_from_slice(&self.open);
        tail.extend(rest);
        TrialSnapshot {
            sealed: Arc::clone(&self.sealed),
            tail,
            settled,
            flat: Arc::new(OnceLock::new()),
        }
    }
}

/// Every trial of a study at one moment, ordered by number, as
/// [`crate::Storage::trial_snapshot`] returns it.
///
/// The finished trials at the front are shared with the storage and with
/// other snapshots instead of copied, so taking a snapshot after a few new
/// trials costs O(those trials), whatever the size of the study. Read it with
/// [`TrialSnapshot::iter`], [`TrialSnapshot::get`] and
/// [`TrialSnapshot::len`]; [`TrialSnapshot::as_slice`] builds one contiguous
/// slice on first use (O(trials), once per snapshot, shared by its clones).
/// Cloning a snapshot is cheap.
#[derive(Debug, Clone, Default)]
pub struct TrialSnapshot {
    sealed: Arc<Vec<Arc<[Arc<FrozenTrial>]>>>,
    /// The trials after the sealed chunks, by number.
    tail: Vec<Arc<FrozenTrial>>,
    /// Trials `0..settled` are finished.
    settled: usize,
    /// The contiguous copy [`TrialSnapshot::as_slice`] builds.
    flat: Arc<OnceLock<Vec<Arc<FrozenTrial>>>>,
}

impl From<Vec<Arc<FrozenTrial>>> for TrialSnapshot {
    /// A snapshot of a list of trials (ordered by number), sharing nothing:
    /// what a storage without a settled front hands out.
    fn from(trials: Vec<Arc<FrozenTrial>>) -> Self {
        TrialSnapshot {
            sealed: Arc::default(),
            tail: trials,
            settled: 0,
            flat: Arc::new(OnceLock::new()),
        }
    }
}

impl TrialSnapshot {
    /// The number of trials.
    pub fn len(&self) -> usize {
        self.sealed.len() * CHUNK + self.tail.len()
    }

    /// Whether the study has no trial.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many trials at the front are known to be finished (trials
    /// `0..settled_len()` by position); 0 when the storage keeps no settled
    /// front. Finished trials never change, so a reader that has seen them
    /// in an earlier snapshot of the same study need not look at them again.
    pub fn settled_len(&self) -> usize {
        self.settled
    }

    /// The trial at position `index` (ordered by number).
    pub fn get(&self, index: usize) -> Option<&Arc<FrozenTrial>> {
        let in_sealed = self.sealed.len() * CHUNK;
        if index < in_sealed {
            self.sealed
                .get(index / CHUNK)
                .and_then(|c| c.get(index % CHUNK))
        } else {
            self.tail.get(index - in_sealed)
        }
    }

    /// The newest trial.
    pub fn last(&self) -> Option<&Arc<FrozenTrial>> {
        self.len().checked_sub(1).and_then(|i| self.get(i))
    }

    /// Every trial, ordered by number.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Arc<FrozenTrial>> + '_ {
        self.iter_from(0)
    }

    /// The trials from position `start` on, ordered by number; costs
    /// nothing for the trials before `start`.
    pub fn iter_from(
        &self,
        start: usize,
    ) -> impl DoubleEndedIterator<Item = &Arc<FrozenTrial>> + '_ {
        let in_sealed = self.sealed.len() * CHUNK;
        let first_chunk = (start / CHUNK).min(self.sealed.len());
        let skip_in_first = if start < in_sealed { start % CHUNK } else { 0 };
        let chunks = self.sealed.get(first_chunk..).unwrap_or_default();
        chunks
            .iter()
            .enumerate()
            .flat_map(move |(k, c)| {
                let from = if k == 0 { skip_in_first } else { 0 };
                c.get(from..).unwrap_or_default().iter()
            })
            .chain(
                self.tail
                    .get(start.saturating_sub(in_sealed)..)
                    .unwrap_or_default()
                    .iter(),
            )
    }

    /// Every trial as one slice, ordered by number: built on the first call
    /// (O(trials)), then shared by this snapshot and its clones.
    pub fn as_slice(&self) -> &[Arc<FrozenTrial>] {
        if self.sealed.is_empty() {
            return &self.tail;
        }
        self.flat.get_or_init(|| self.iter().cloned().collect())
    }

    /// Every trial as a new vector, ordered by number.
    pub fn to_vec(&self) -> Vec<Arc<FrozenTrial>> {
        self.iter().cloned().collect()
    }

    /// How many trial pointers taking this snapshot copied: the trials it
    /// does not share with the storage. A test hook for the contract that a
    /// snapshot costs O(new and unfinished trials), not O(trials).
    pub fn copied(&self) -> usize {
        self.tail.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::TrialState;

    fn trial(number: u64, state: TrialState) -> Arc<FrozenTrial> {
        Arc::new(FrozenTrial::new(number, number, state))
    }

    fn numbers<'a>(it: impl Iterator<Item = &'a Arc<FrozenTrial>>) -> Vec<u64> {
        it.map(|t| t.number).collect()
    }

    #[test]
    fn snapshot_reads_settled_then_rest_in_order() {
        let mut s = SettledTrials::new();
        for n in 0..(3 * CHUNK as u64 + 5) {
            s.push(trial(n, TrialState::Complete)).unwrap();
        }
        let settled = s.len() as u64;
        let rest = vec![
            trial(settled, TrialState::Running),
            trial(settled + 1, TrialState::Complete),
        ];
        let snap = s.snapshot(rest);
        let all: Vec<u64> = (0..settled + 2).collect();
        assert_eq!(snap.len(), all.len());
        assert_eq!(snap.settled_len(), settled as usize);
        assert_eq!(numbers(snap.iter()), all);
        assert_eq!(numbers(snap.as_slice().iter()), all);
        assert_eq!(
            numbers(snap.iter().rev()),
            all.iter().rev().copied().collect::<Vec<_>>()
        );
        for start in [
            0,
            1,
            CHUNK - 1,
            CHUNK,
            CHUNK + 1,
            3 * CHUNK,
            3 * CHUNK + 6,
            1000,
        ] {
            assert_eq!(
                numbers(snap.iter_from(start)),
                all.get(start..).unwrap_or_default().to_vec(),
                "from {start}"
            );
        }
        for i in 0..all.len() {
            assert_eq!(snap.get(i).map(|t| t.number), Some(i as u64));
        }
        assert!(snap.get(all.len()).is_none());
        assert_eq!(snap.last().map(|t| t.number), Some(settled + 1));
        // Only the open chunk and the rest were copied.
        assert_eq!(snap.copied(), 5 + 2);
    }

    #[test]
    fn a_snapshot_does_not_change_when_the_front_grows() {
        let mut s = SettledTrials::new();
        for n in 0..(CHUNK as u64 - 1) {
            s.push(trial(n, TrialState::Complete)).unwrap();
        }
        let before = s.snapshot(Vec::new());
        for n in (CHUNK as u64 - 1)..(2 * CHUNK as u64 + 1) {
            s.push(trial(n, TrialState::Pruned)).unwrap();
        }
        assert_eq!(before.len(), CHUNK - 1);
        assert_eq!(
            numbers(before.iter()),
            (0..CHUNK as u64 - 1).collect::<Vec<_>>()
        );
        let after = s.snapshot(Vec::new());
        assert_eq!(after.len(), 2 * CHUNK + 1);
        assert_eq!(after.copied(), 1);
    }

    #[test]
    fn push_refuses_a_gap_or_an_unfinished_trial() {
        let mut s = SettledTrials::new();
        let gap = s.push(trial(1, TrialState::Complete)).unwrap_err();
        assert!(gap.to_string().contains("numbered 0"), "{gap}");
        let running = s.push(trial(0, TrialState::Running)).unwrap_err();
        assert!(running.to_string().contains("RUNNING"), "{running}");
        assert!(s.is_empty());
    }

    #[test]
    fn advance_stops_at_the_first_unfinished_trial() {
        let trials = vec![
            trial(0, TrialState::Complete),
            trial(1, TrialState::Fail),
            trial(2, TrialState::Running),
            trial(3, TrialState::Complete),
        ];
        let mut s = SettledTrials::new();
        s.advance(&trials).unwrap();
        assert_eq!(s.len(), 2);
        s.advance(&trials).unwrap();
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn a_plain_list_is_a_snapshot_without_a_settled_front() {
        let snap = TrialSnapshot::from(vec![trial(0, TrialState::Complete)]);
        assert_eq!(snap.settled_len(), 0);
        assert_eq!(snap.copied(), 1);
        assert_eq!(numbers(snap.as_slice().iter()), vec![0]);
    }
}
