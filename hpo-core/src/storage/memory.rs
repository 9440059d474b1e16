//! A storage that lives in this process only.

use super::{Storage, StudySummary};
use crate::direction::Direction;
use crate::distribution::Distribution;
use crate::error::{Error, Result};
use crate::trial::{FrozenTrial, SettledTrials, TrialSnapshot, TrialState};
use chrono::Utc;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// Keeps studies in memory: fast, shared by the threads of one process, gone
/// when the process exits. The default storage of a study.
#[derive(Debug, Default)]
pub struct InMemoryStorage {
    inner: RwLock<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    studies: BTreeMap<u64, StudyData>,
    next_study_id: u64,
    /// trial id -> (study id, index in the study's trial list)
    trial_index: Vec<(u64, usize)>,
    heartbeats: BTreeMap<u64, Instant>,
}

#[derive(Debug)]
struct StudyData {
    name: String,
    directions: Vec<Direction>,
    user_attrs: BTreeMap<String, Value>,
    system_attrs: BTreeMap<String, Value>,
    trials: Vec<Arc<FrozenTrial>>,
    /// The finished front of `trials`, shared with every snapshot; kept up
    /// to date by every write that finishes a trial.
    settled: SettledTrials,
}

impl StudyData {
    /// The trials that may still change (WAITING or RUNNING) are all here:
    /// the ones before the settled front are finished.
    fn unsettled(&self) -> &[Arc<FrozenTrial>] {
        self.trials.get(self.settled.len()..).unwrap_or_default()
    }
}

impl InMemoryStorage {
    /// An empty storage.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Inner {
    fn study(&self, id: u64) -> Result<&StudyData> {
        self.studies
            .get(&id)
            .ok_or_else(|| Error::StudyIdNotFound(id))
    }

    fn study_mut(&mut self, id: u64) -> Result<&mut StudyData> {
        self.studies
            .get_mut(&id)
            .ok_or_else(|| Error::StudyIdNotFound(id))
    }

    fn locate(&self, trial_id: u64) -> Result<(u64, usize)> {
        usize::try_from(trial_id)
            .ok()
            .and_then(|i| self.trial_index.get(i).copied())
            .ok_or(Error::TrialNotFound(trial_id))
    }

    fn trial(&self, trial_id: u64) -> Result<&Arc<FrozenTrial>> {
        let (sid, ix) = self.locate(trial_id)?;
        self.study(sid)?
            .trials
            .get(ix)
            .ok_or(Error::TrialNotFound(trial_id))
    }

    /// A RUNNING trial, for writing (copy-on-write: readers keep their snapshot).
    fn running_mut(&mut self, trial_id: u64) -> Result<&mut FrozenTrial> {
        let (sid, ix) = self.locate(trial_id)?;
        let t = self
            .study_mut(sid)?
            .trials
            .get_mut(ix)
            .ok_or(Error::TrialNotFound(trial_id))?;
        if t.state != TrialState::Running {
            return Err(Error::TrialFinished {
                number: t.number,
                state: t.state,
            });
        }
        Ok(Arc::make_mut(t))
    }

    /// A trial that is not finished (WAITING or RUNNING), for attribute writes.
    fn unfinished_mut(&mut self, trial_id: u64) -> Result<&mut FrozenTrial> {
        let (sid, ix) = self.locate(trial_id)?;
        let t = self
            .study_mut(sid)?
            .trials
            .get_mut(ix)
            .ok_or(Error::TrialNotFound(trial_id))?;
        if t.state.is_finished() {
            return Err(Error::TrialFinished {
                number: t.number,
                state: t.state,
            });
        }
        Ok(Arc::make_mut(t))
    }

    /// Creates a trial with the next number (see [`Storage::create_trial`]).
    fn create(&mut self, study_id: u64, template: Option<&FrozenTrial>) -> Result<FrozenTrial> {
        let id = self.trial_index.len() as u64;
        let study = self.study_mut(study_id)?;
        let number = study.trials.len() as u64;
        let now = Utc::now();
        let mut t = match template {
            Some(tpl) => {
                let mut t = tpl.clone();
                t.id = id;
                t.number = number;
                if t.state == TrialState::Running {
                    t.datetime_start = Some(now);
                }
                if t.state == TrialState::Waiting {
                    t.datetime_start = None;
                }
                t
            }
            None => {
                let mut t = FrozenTrial::new(id, number, TrialState::Running);
                t.datetime_start = Some(now);
                t
            }
        };
        if t.state.is_finished() && t.datetime_complete.is_none() {
            t.datetime_complete = Some(now);
        }
        study.trials.push(Arc::new(t.clone()));
        let ix = study.trials.len() - 1;
        // A trial created finished (from a template) may extend the front.
        let settled = study.settled.advance(&study.trials);
        self.trial_index.push((study_id, ix));
        settled?;
        Ok(t)
    }

    /// Moves the oldest WAITING trial to RUNNING.
    fn claim(&mut self, study_id: u64) -> Result<Option<FrozenTrial>> {
        let study = self.study_mut(study_id)?;
        // Settled trials are finished: look only after them.
        let from = study.settled.len();
        let Some(t) = study
            .trials
            .iter_mut()
            .skip(from)
            .find(|t| t.state == TrialState::Waiting)
        else {
            return Ok(None);
        };
        let t = Arc::make_mut(t);
        t.state = TrialState::Running;
        t.datetime_start = Some(Utc::now());
        Ok(Some(t.clone()))
    }

    /// Finishes a RUNNING trial (see [`Storage::finish_trial`]).
    fn finish(
        &mut self,
        trial_id: u64,
        state: TrialState,
        values: Option<&[f64]>,
        system_attrs: &[(String, Value)],
    ) -> Result<Arc<FrozenTrial>> {
        let t = self.running_mut(trial_id)?;
        for (k, v) in system_attrs {
            t.system_attrs.insert(k.clone(), v.clone());
        }
        t.values = values.map(<[f64]>::to_vec);
        t.state = state;
        t.datetime_complete = Some(Utc::now());
        self.heartbeats.remove(&trial_id);
        let (sid, _) = self.locate(trial_id)?;
        let study = self.study_mut(sid)?;
        study.settled.advance(&study.trials)?;
        Ok(Arc::clone(self.trial(trial_id)?))
    }
}

impl Storage for InMemoryStorage {
    fn create_study(&self, name: &str, directions: &[Direction]) -> Result<u64> {
        let mut g = self.inner.write()?;
        if g.studies.values().any(|s| s.name == name) {
            return Err(Error::StudyExists(name.to_owned()));
        }
        g.next_study_id += 1;
        let id = g.next_study_id;
        g.studies.insert(
            id,
            StudyData {
                name: name.to_owned(),
                directions: directions.to_vec(),
                user_attrs: BTreeMap::new(),
                system_attrs: BTreeMap::new(),
                trials: Vec::new(),
                settled: SettledTrials::new(),
            },
        );
        Ok(id)
    }

    fn find_study(&self, name: &str) -> Result<Option<StudySummary>> {
        let g = self.inner.read()?;
        Ok(g.studies
            .iter()
            .find(|(_, s)| s.name == name)
            .map(|(id, s)| StudySummary {
                id: *id,
                name: s.name.clone(),
                directions: s.directions.clone(),
            }))
    }

    fn studies(&self) -> Result<Vec<StudySummary>> {
        let g = self.inner.read()?;
        Ok(g.studies
            .iter()
            .map(|(id, s)| StudySummary {
                id: *id,
                name: s.name.clone(),
                directions: s.directions.clone(),
            })
            .collect())
    }

    fn delete_study(&self, study_id: u64) -> Result<()> {
        let mut g = self.inner.write()?;
        // Trial ids stay allocated (ids are never reused); the trials are dropped.
        g.studies
            .remove(&study_id)
            .map(|_| ())
            .ok_or_else(|| Error::StudyIdNotFound(study_id))
    }

    fn set_study_user_attr(&self, study_id: u64, key: &str, value: &Value) -> Result<()> {
        self.inner
            .write()?
            .study_mut(study_id)?
            .user_attrs
            .insert(key.to_owned(), value.clone());
        Ok(())
    }

    fn set_study_system_attr(&self, study_id: u64, key: &str, value: &Value) -> Result<()> {
        self.inner
            .write()?
            .study_mut(study_id)?
            .system_attrs
            .insert(key.to_owned(), value.clone());
        Ok(())
    }

    fn study_user_attrs(&self, study_id: u64) -> Result<BTreeMap<String, Value>> {
        Ok(self.inner.read()?.study(study_id)?.user_attrs.clone())
    }

    fn study_system_attrs(&self, study_id: u64) -> Result<BTreeMap<String, Value>> {
        Ok(self.inner.read()?.study(study_id)?.system_attrs.clone())
    }

    fn create_trial(&self, study_id: u64, template: Option<&FrozenTrial>) -> Result<FrozenTrial> {
        self.inner.write()?.create(study_id, template)
    }

    fn claim_waiting_trial(&self, study_id: u64) -> Result<Option<FrozenTrial>> {
        self.inner.write()?.claim(study_id)
    }

    fn start_trial(&self, study_id: u64, heartbeat: bool) -> Result<FrozenTrial> {
        let mut g = self.inner.write()?;
        let t = match g.claim(study_id)? {
            Some(t) => t,
            None => g.create(study_id, None)?,
        };
        if heartbeat {
            g.heartbeats.insert(t.id, Instant::now());
        }
        Ok(t)
    }

    fn fail_stale_trial(
        &self,
        trial_id: u64,
        system_attrs: &[(String, Value)],
        retry: &dyn Fn(&FrozenTrial) -> Option<FrozenTrial>,
    ) -> Result<(Arc<FrozenTrial>, Option<FrozenTrial>)> {
        let mut g = self.inner.write()?;
        let failed = g.finish(trial_id, TrialState::Fail, None, system_attrs)?;
        let copy = match retry(&failed) {
            Some(template) => {
                let (sid, _) = g.locate(trial_id)?;
                Some(g.create(sid, Some(&template))?)
            }
            None => None,
        };
        Ok((failed, copy))
    }

    fn set_trial_param(
        &self,
        trial_id: u64,
        name: &str,
        internal: f64,
        dist: &Distribution,
    ) -> Result<()> {
        super::require_in_distribution(internal, dist)?;
        let mut g = self.inner.write()?;
        let t = g.running_mut(trial_id)?;
        t.internal_params.insert(name.to_owned(), internal);
        t.distributions.insert(name.to_owned(), dist.clone());
        Ok(())
    }

    fn set_trial_intermediate_value(&self, trial_id: u64, step: u64, value: f64) -> Result<()> {
        let mut g = self.inner.write()?;
        g.running_mut(trial_id)?
            .intermediate_values
            .insert(step, value);
        Ok(())
    }

    fn set_trial_user_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()> {
        let mut g = self.inner.write()?;
        g.unfinished_mut(trial_id)?
            .user_attrs
            .insert(key.to_owned(), value.clone());
        Ok(())
    }

    fn set_trial_system_attr(&self, trial_id: u64, key: &str, value: &Value) -> Result<()> {
        let mut g = self.inner.write()?;
        g.unfinished_mut(trial_id)?
            .system_attrs
            .insert(key.to_owned(), value.clone());
        Ok(())
    }

    fn finish_trial(
        &self,
        trial_id: u64,
        state: TrialState,
        values: Option<&[f64]>,
        system_attrs: &[(String, Value)],
    ) -> Result<Arc<FrozenTrial>> {
        super::require_finished(state)?;
        self.inner
            .write()?
            .finish(trial_id, state, values, system_attrs)
    }

    fn trial(&self, trial_id: u64) -> Result<Arc<FrozenTrial>> {
        Ok(Arc::clone(self.inner.read()?.trial(trial_id)?))
    }

    fn trials(&self, study_id: u64) -> Result<Vec<Arc<FrozenTrial>>> {
        Ok(self.inner.read()?.study(study_id)?.trials.clone())
    }

    fn trial_snapshot(&self, study_id: u64) -> Result<TrialSnapshot> {
        let g = self.inner.read()?;
        let study = g.study(study_id)?;
        Ok(study.settled.snapshot(study.unsettled().to_vec()))
    }

    fn record_heartbeat(&self, trial_id: u64) -> Result<()> {
        let mut g = self.inner.write()?;
        g.running_mut(trial_id)?;
        g.heartbeats.insert(trial_id, Instant::now());
        Ok(())
    }

    fn stale_trials(&self, study_id: u64, grace: Duration) -> Result<Vec<u64>> {
        let g = self.inner.read()?;
        Ok(g.study(study_id)?
            .unsettled()
            .iter()
            .filter(|t| t.state == TrialState::Running)
            .filter(|t| match g.heartbeats.get(&t.id) {
                Some(hb) => hb.elapsed() > grace,
                // Never beat: stale once it started longer than `grace` ago.
                None => t
                    .datetime_start
                    .and_then(|start| (Utc::now() - start).to_std().ok())
                    .is_some_and(|age| age > grace),
            })
            .map(|t| t.id)
            .collect())
    }
}
