//! Creating and resuming studies.

use super::{Heartbeat, RetryPolicy, Study, StudyCore, Tracker};
use crate::direction::Direction;
use crate::error::{Error, Result};
use crate::pruner::{MedianPruner, Pruner};
use crate::sampler::{default_sampler, Sampler};
use crate::storage::{InMemoryStorage, Storage};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Builds a [`Study`]: `Study::builder().name("x").direction(Direction::Maximize).build()`.
#[derive(Default)]
pub struct StudyBuilder {
    name: Option<String>,
    storage: Option<Arc<dyn Storage>>,
    sampler: Option<Arc<dyn Sampler>>,
    pruner: Option<Arc<dyn Pruner>>,
    directions: Option<Vec<Direction>>,
    load_if_exists: bool,
    heartbeat: Option<Heartbeat>,
    retry: Option<RetryPolicy>,
    storage_url: Option<String>,
    trackers: Vec<Arc<dyn Tracker>>,
}

impl StudyBuilder {
    /// The study name (default: a fresh random name).
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Where the study lives (default: a new in-memory storage).
    pub fn storage(mut self, storage: Arc<dyn Storage>) -> Self {
        self.storage = Some(storage);
        self
    }

    /// Where the study lives, as a URL (`sqlite:study.db`, `sqlite::memory:`);
    /// opened by [`StudyBuilder::build`] with [`crate::storage::storage_from_url`].
    /// An explicit [`StudyBuilder::storage`] takes precedence.
    pub fn storage_url(mut self, url: impl Into<String>) -> Self {
        self.storage_url = Some(url.into());
        self
    }

    /// The sampler (default: [`crate::sampler::TpeSampler`] with default
    /// settings). A sampler shared with other studies is passed as an
    /// `Arc<dyn Sampler>` (or `Arc<S>`), which is itself a sampler.
    pub fn sampler(mut self, sampler: impl Sampler + 'static) -> Self {
        self.sampler = Some(Arc::new(sampler));
        self
    }

    /// The pruner (default: [`MedianPruner::default()`], as in Optuna; it only
    /// acts when the objective calls `should_prune`). A shared pruner is
    /// passed as an `Arc<dyn Pruner>` (or `Arc<P>`), which is itself a pruner.
    pub fn pruner(mut self, pruner: impl Pruner + 'static) -> Self {
        self.pruner = Some(Arc::new(pruner));
        self
    }

    /// A single objective's direction (default: minimise).
    pub fn direction(mut self, direction: Direction) -> Self {
        self.directions = Some(vec![direction]);
        self
    }

    /// One direction per objective, for multi-objective studies.
    pub fn directions(mut self, directions: impl IntoIterator<Item = Direction>) -> Self {
        self.directions = Some(directions.into_iter().collect());
        self
    }

    /// Resume the study if one with this name exists (default: false, which
    /// makes an existing name an error rather than silently mixing studies).
    pub fn load_if_exists(mut self, yes: bool) -> Self {
        self.load_if_exists = yes;
        self
    }

    /// Records a heartbeat for each running trial every `interval`, and fails
    /// RUNNING trials whose heartbeat is older than `grace` (see
    /// [`crate::Study::fail_stale_trials`]). Off by default; needs a storage
    /// with heartbeat support (SQLite) to survive a crash.
    pub fn heartbeat(mut self, interval: Duration, grace: Duration) -> Self {
        self.heartbeat = Some(Heartbeat { interval, grace });
        self
    }

    /// Re-enqueues trials failed as stale, with the same parameters, up to
    /// `policy.max_retries` times each (needs [`StudyBuilder::heartbeat`]).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }

    /// Adds a [`Tracker`] told of the study's opening and of every trial
    /// this handle ends (MLflow's, in the facade's `hpo::tracking`). May be
    /// given several times. Worker processes get theirs through
    /// [`crate::executor::worker_main_with`].
    pub fn tracker(mut self, tracker: impl Tracker + 'static) -> Self {
        self.trackers.push(Arc::new(tracker));
        self
    }

    /// Creates the study, or loads it when `load_if_exists` is set.
    pub fn build(self) -> Result<Study> {
        let storage = match (self.storage, &self.storage_url) {
            (Some(s), _) => s,
            (None, Some(url)) => crate::storage::storage_from_url(url)?,
            (None, None) => Arc::new(InMemoryStorage::new()),
        };
        let name = self.name.unwrap_or_else(fresh_name);
        if let Some(ds) = &self.directions {
            if ds.is_empty() {
                return Err(Error::InvalidConfig(
                    "a study needs at least one direction".into(),
                ));
            }
        }
        if let Some(hb) = &self.heartbeat {
            if hb.interval.is_zero() || hb.grace <= hb.interval {
                return Err(Error::InvalidConfig(format!(
                    "heartbeat interval {:?} must be positive and shorter than the grace period {:?}",
                    hb.interval, hb.grace
                )));
            }
        }
        if self.retry.is_some() && self.heartbeat.is_none() {
            return Err(Error::InvalidConfig(
                "a retry policy re-runs trials failed by heartbeat expiry; set `heartbeat(interval, grace)` too".into(),
            ));
        }
        let requested = self
            .directions
            .clone()
            .unwrap_or_else(|| vec![Direction::Minimize]);
        let (id, directions) = match storage.find_study(&name)? {
            Some(found) => {
                if !self.load_if_exists {
                    return Err(Error::StudyExists(name));
                }
                check_directions(&name, &found.directions, self.directions.as_deref())?;
                (found.id, found.directions)
            }
            None => match storage.create_study(&name, &requested) {
                Ok(id) => (id, requested),
                // Another process created it between our look-up and our insert.
                Err(Error::StudyExists(_)) if self.load_if_exists => {
                    let found = storage
                        .find_study(&name)?
                        .ok_or_else(|| Error::StudyNotFound(name.clone()))?;
                    check_directions(&name, &found.directions, self.directions.as_deref())?;
                    (found.id, found.directions)
                }
                Err(e) => return Err(e),
            },
        };
        let study = Study {
            core: Arc::new(StudyCore {
                name,
                id,
                directions,
                storage,
                sampler: self.sampler.unwrap_or_else(default_sampler),
                pruner: self
                    .pruner
                    .unwrap_or_else(|| Arc::new(MedianPruner::default())),
                stop: AtomicBool::new(false),
                heartbeat: self.heartbeat,
                retry: self.retry,
                beats: Mutex::new(Default::default()),
                best_settled: Mutex::new(Default::default()),
                trackers: self.trackers,
            }),
        };
        for t in study.trackers() {
            t.study_opened(&study);
        }
        Ok(study)
    }

    /// Loads an existing study; its name must exist in the storage.
    pub fn load(self) -> Result<Study> {
        let storage = match (self.storage.clone(), &self.storage_url) {
            (Some(s), _) => s,
            (None, Some(url)) => crate::storage::storage_from_url(url)?,
            (None, None) => Arc::new(InMemoryStorage::new()),
        };
        let name = self
            .name
            .clone()
            .ok_or_else(|| Error::InvalidConfig("`load` needs a study name".into()))?;
        if storage.find_study(&name)?.is_none() {
            return Err(Error::StudyNotFound(name));
        }
        self.storage(storage).load_if_exists(true).build()
    }
}

fn check_directions(
    name: &str,
    stored: &[Direction],
    requested: Option<&[Direction]>,
) -> Result<()> {
    match requested {
        Some(r) if r != stored => Err(Error::DirectionMismatch {
            name: name.to_owned(),
            stored: stored.to_vec(),
            requested: r.to_vec(),
        }),
        _ => Ok(()),
    }
}

fn fresh_name() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    format!(
        "no-name-{:016x}{:016x}",
        rng.random::<u64>(),
        rng.random::<u64>()
    )
}
