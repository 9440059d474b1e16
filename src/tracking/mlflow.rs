//! [`Mlflow`]: the [`Tracker`] that logs a study to an MLflow tracking
//! server from a thread of its own, through a bounded queue.

use super::records::{self, now_ms};
use super::rest::{Batch, Client, Failure};
use crate::storage::redact;
use crate::{Error, Result};
use crate::{FrozenTrial, Study, Tracker};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The study system attribute that keeps the study's parent run:
/// `{"tracking_uri": ..., "experiment_id": ..., "run_id": ...}` (the URI
/// without credentials). Every process that opens the study logs under it.
pub const MLFLOW_ATTR: &str = "hpo:mlflow";

/// How long a record is retried before it is given up (default of
/// [`MlflowBuilder::bound`]).
pub const DEFAULT_BOUND: Duration = Duration::from_secs(120);

/// The longest a worker process waits at exit for its records to be sent
/// (its coordinator waits for the process before it admits another trial).
pub const WORKER_FLUSH: Duration = Duration::from_secs(10);

/// Records waiting to be sent, at most (more are dropped and counted).
const QUEUE: usize = 10_000;

/// Logs a study to MLflow: one experiment per study, a parent run with
/// the study's counts, a nested run per trial (see [`crate::tracking`]).
///
/// Register it with [`crate::StudyBuilder::tracker`]. Cheap to clone (a
/// handle on one sending thread); `Send + Sync`. `Study::optimize_with`
/// waits for its queue when it returns; code that drives a study with
/// `ask` and `tell` calls [`Tracker::flush`] before the process exits.
#[derive(Clone)]
pub struct Mlflow {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Mlflow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mlflow")
            .field("url", &self.inner.shown)
            .field("bound", &self.inner.bound)
            .finish_non_exhaustive()
    }
}

/// Builds an [`Mlflow`] tracker: `Mlflow::builder(url).bound(...).build()`.
#[derive(Debug, Clone)]
pub struct MlflowBuilder {
    url: String,
    token: Option<String>,
    basic: Option<(String, String)>,
    bound: Duration,
    experiment: Option<String>,
}

impl MlflowBuilder {
    /// A bearer token sent with every request (instead of
    /// `MLFLOW_TRACKING_TOKEN`).
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// Basic-auth credentials (instead of `MLFLOW_TRACKING_USERNAME` and
    /// `MLFLOW_TRACKING_PASSWORD`).
    pub fn basic_auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
        self.basic = Some((user.into(), password.into()));
        self
    }

    /// How long a record is retried while MLflow is down or failing before
    /// it is given up and counted (default [`DEFAULT_BOUND`]); also the
    /// longest [`Tracker::flush`] waits, outside worker processes.
    pub fn bound(mut self, bound: Duration) -> Self {
        self.bound = bound;
        self
    }

    /// The experiment's name (default: the study's name).
    pub fn experiment(mut self, name: impl Into<String>) -> Self {
        self.experiment = Some(name.into());
        self
    }

    /// Starts the sending thread. Credentials not given to the builder are
    /// read from MLflow's variables; a `user:password@` in the URL is used
    /// as basic auth and removed from the URL.
    pub fn build(self) -> Result<Mlflow> {
        let shown = redact(&self.url);
        let bad = |reason: &str| {
            Error::InvalidConfig(format!(
                "MLflow tracking URI `{shown}`: {reason}; give it as http://host:port or https://host/path"
            ))
        };
        let mut parsed = url::Url::parse(&self.url).map_err(|_| bad("not a URL"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(bad("hpo logs to a tracking server over HTTP(S) only"));
        }
        let user = percent_decode(parsed.username());
        let password = parsed.password().map(percent_decode);
        let _ = parsed.set_username("");
        let _ = parsed.set_password(None);
        let base = parsed.as_str().trim_end_matches('/').to_owned();
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let token = self.token.or_else(|| env("MLFLOW_TRACKING_TOKEN"));
        let basic = self
            .basic
            .or_else(|| password.map(|p| (user.clone(), p)))
            .or_else(|| {
                Some((
                    env("MLFLOW_TRACKING_USERNAME")?,
                    env("MLFLOW_TRACKING_PASSWORD")?,
                ))
            });
        let auth = match (token, basic) {
            (Some(t), _) => Some(format!("Bearer {t}")),
            (None, Some((u, p))) => Some(format!("Basic {}", base64(&format!("{u}:{p}")))),
            (None, None) => None,
        };
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let inner = Arc::new(Inner {
            tx: Mutex::new(Some(tx)),
            pending: Mutex::new(0),
            idle: Condvar::new(),
            dropped: AtomicUsize::new(0),
            reported: AtomicUsize::new(0),
            shown: base.clone(),
            bound: self.bound,
        });
        let sender = Sender {
            client: Client::new(base, auth),
            inner: Arc::downgrade(&inner),
            experiment: self.experiment,
            studies: HashMap::new(),
        };
        // The thread logs where its creator's logs go.
        let dispatch = tracing::dispatcher::get_default(|d| d.clone());
        std::thread::Builder::new()
            .name("hpo-mlflow".into())
            .spawn(move || tracing::dispatcher::with_default(&dispatch, || sender.run(rx)))
            .map_err(|e| Error::InvalidConfig(format!("cannot start the MLflow thread: {e}")))?;
        Ok(Mlflow { inner })
    }
}

impl Mlflow {
    /// A tracker logging to the server at `url`, credentials from MLflow's
    /// variables, default bound.
    pub fn new(url: impl Into<String>) -> Result<Mlflow> {
        Mlflow::builder(url).build()
    }

    /// A builder for a tracker logging to the server at `url`.
    pub fn builder(url: impl Into<String>) -> MlflowBuilder {
        MlflowBuilder {
            url: url.into(),
            token: None,
            basic: None,
            bound: DEFAULT_BOUND,
            experiment: None,
        }
    }

    /// A tracker for `url` if given, else for `MLFLOW_TRACKING_URI` if set;
    /// `None` when neither is.
    pub fn from_flag_or_env(url: Option<&str>) -> Result<Option<Mlflow>> {
        let url = match url {
            Some(u) => u.to_owned(),
            None => match std::env::var("MLFLOW_TRACKING_URI") {
                Ok(u) if !u.is_empty() => u,
                _ => return Ok(None),
            },
        };
        Mlflow::new(url).map(Some)
    }

    /// The server's URL as messages show it (no credentials).
    pub fn url(&self) -> &str {
        &self.inner.shown
    }

    /// Records given up so far (not sent within the bound, or dropped
    /// because the queue was full).
    pub fn dropped(&self) -> usize {
        self.inner.dropped.load(Ordering::SeqCst)
    }

    fn send(&self, job: Job) {
        let Ok(tx) = self.inner.tx.lock() else {
            return;
        };
        let Some(tx) = tx.as_ref() else { return };
        if let Ok(mut p) = self.inner.pending.lock() {
            *p += 1;
        }
        match tx.try_send((Instant::now(), job)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.inner.done(false);
            }
        }
    }
}

impl Tracker for Mlflow {
    fn study_opened(&self, study: &Study) {
        self.send(Job::Opened(study.clone()));
    }

    fn trial_finished(&self, study: &Study, trial: &Arc<FrozenTrial>) {
        self.send(Job::Trial(study.clone(), Arc::clone(trial)));
    }

    fn run_ended(&self, study: &Study) {
        self.send(Job::Ended(study.clone()));
        self.flush();
    }

    fn flush(&self) {
        let bound = if crate::executor::is_worker() {
            self.inner.bound.min(WORKER_FLUSH)
        } else {
            self.inner.bound
        };
        let deadline = Instant::now() + bound;
        if let Ok(mut p) = self.inner.pending.lock() {
            while *p > 0 {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                match self.inner.idle.wait_timeout(p, left) {
                    Ok((g, _)) => p = g,
                    Err(_) => return,
                }
            }
            let unsent = *p;
            drop(p);
            self.inner.report(unsent);
            // Those still queued are counted in this report, not again.
            self.inner.reported.fetch_add(unsent, Ordering::SeqCst);
        }
    }
}

/// What the hooks share with the sending thread.
struct Inner {
    tx: Mutex<Option<SyncSender<(Instant, Job)>>>,
    /// Records queued and not yet sent or given up.
    pending: Mutex<usize>,
    idle: Condvar,
    dropped: AtomicUsize,
    /// How many of `dropped` were logged already.
    reported: AtomicUsize,
    shown: String,
    bound: Duration,
}

impl Inner {
    /// One record is done with: sent, or given up.
    fn done(&self, sent: bool) {
        if !sent {
            self.dropped.fetch_add(1, Ordering::SeqCst);
        }
        if let Ok(mut p) = self.pending.lock() {
            *p = p.saturating_sub(1);
            if *p == 0 {
                self.idle.notify_all();
            }
        }
    }

    /// Logs, once, what was given up since the last report, and `unsent`
    /// records still queued after a flush's wait.
    fn report(&self, unsent: usize) {
        let dropped = self.dropped.load(Ordering::SeqCst);
        let new = dropped - self.reported.swap(dropped, Ordering::SeqCst).min(dropped);
        if new + unsent > 0 {
            tracing::warn!(
                "MLflow at {}: {} record(s) of trials and study counts could not be sent within {:?} \
                 ({new} given up, {unsent} still queued); the study's own records are complete",
                self.shown,
                new + unsent,
                self.bound
            );
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let dropped = self.dropped.load(Ordering::SeqCst);
        let reported = self.reported.load(Ordering::SeqCst);
        if dropped > reported {
            self.report(0);
        }
    }
}

/// A record for the sending thread.
enum Job {
    Opened(Study),
    Trial(Study, Arc<FrozenTrial>),
    Ended(Study),
}

/// The study's parent run, once resolved.
#[derive(Clone)]
struct Parent {
    experiment_id: String,
    run_id: String,
}

/// The sending thread's state.
struct Sender {
    client: Client,
    inner: std::sync::Weak<Inner>,
    experiment: Option<String>,
    /// Parent runs by study id.
    studies: HashMap<u64, Parent>,
}

impl Sender {
    fn run(mut self, rx: Receiver<(Instant, Job)>) {
        let bound = match self.inner.upgrade() {
            Some(i) => i.bound,
            None => return,
        };
        while let Ok((queued, job)) = rx.recv() {
            // A record keeps being retried until its bound since it was
            // queued; one already past it is still tried once.
            let deadline = (queued + bound).max(Instant::now() + Duration::from_millis(1));
            let sent = self.handle(&job, deadline);
            if let Err(f) = &sent {
                tracing::debug!("MLflow: a record was given up: {}", f.message);
            }
            match self.inner.upgrade() {
                Some(inner) => inner.done(sent.is_ok()),
                None => return,
            }
        }
    }

    fn handle(&mut self, job: &Job, deadline: Instant) -> Result<(), Failure> {
        match job {
            Job::Opened(study) => {
                let parent = self.parent(study, deadline)?;
                if !crate::executor::is_worker() {
                    self.client
                        .update_run(&parent.run_id, "RUNNING", None, deadline)?;
                }
                Ok(())
            }
            Job::Trial(study, trial) => {
                let parent = self.parent(study, deadline)?;
                self.log_trial(study, trial, &parent, deadline)?;
                self.log_counts(study, &parent, deadline)
            }
            Job::Ended(study) => {
                let parent = self.parent(study, deadline)?;
                self.log_counts(study, &parent, deadline)?;
                self.client
                    .update_run(&parent.run_id, "FINISHED", Some(now_ms()), deadline)
            }
        }
    }

    fn log_trial(
        &self,
        study: &Study,
        t: &FrozenTrial,
        parent: &Parent,
        deadline: Instant,
    ) -> Result<(), Failure> {
        let tags = records::trial_tags(study.name(), t, &parent.run_id);
        let start = t
            .datetime_start
            .map_or_else(now_ms, |d| d.timestamp_millis());
        let run_id = self.client.create_run(
            &parent.experiment_id,
            &format!("trial {}", t.number),
            start,
            &tags,
            deadline,
        )?;
        for part in records::trial_batch(t).split() {
            self.client.log_batch(&run_id, &part, deadline)?;
        }
        let end = t.datetime_complete.map(|d| d.timestamp_millis());
        self.client.update_run(
            &run_id,
            records::status(t),
            end.or(Some(now_ms())),
            deadline,
        )
    }

    fn log_counts(&self, study: &Study, parent: &Parent, deadline: Instant) -> Result<(), Failure> {
        let trials = study.trials().map_err(|e| Failure {
            retryable: false,
            code: None,
            message: format!("reading the study's trials for its counts: {e}"),
        })?;
        let single = match study.directions() {
            [d] => Some(*d),
            _ => None,
        };
        let batch = Batch {
            metrics: records::study_metrics(&trials, single),
            ..Batch::default()
        };
        self.client.log_batch(&parent.run_id, &batch, deadline)
    }

    /// The study's parent run: remembered, kept in the study, or created
    /// (and kept in the study for every other process).
    fn parent(&mut self, study: &Study, deadline: Instant) -> Result<Parent, Failure> {
        if let Some(p) = self.studies.get(&study.id()) {
            return Ok(p.clone());
        }
        let shown = self
            .inner
            .upgrade()
            .map(|i| i.shown.clone())
            .unwrap_or_default();
        let stored = |study: &Study| -> Option<Parent> {
            let attrs = study.system_attrs().ok()?;
            let v = attrs.get(MLFLOW_ATTR)?;
            if v.get("tracking_uri")?.as_str()? != shown {
                return None;
            }
            Some(Parent {
                experiment_id: v.get("experiment_id")?.as_str()?.to_owned(),
                run_id: v.get("run_id")?.as_str()?.to_owned(),
            })
        };
        if crate::executor::is_worker() {
            // A worker's coordinator creates the parent when it opens the
            // study, before it starts workers: wait for it rather than race.
            loop {
                if let Some(p) = stored(study) {
                    self.studies.insert(study.id(), p.clone());
                    return Ok(p);
                }
                if Instant::now() >= deadline {
                    return Err(Failure {
                        retryable: false,
                        code: None,
                        message: "the coordinator kept no parent run in the study".into(),
                    });
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        }
        if let Some(p) = stored(study) {
            if self.client.run_exists(&p.run_id, deadline)? {
                self.studies.insert(study.id(), p.clone());
                return Ok(p);
            }
        }
        let name = self
            .experiment
            .clone()
            .unwrap_or_else(|| study.name().to_owned());
        let experiment_id = self.client.experiment(&name, deadline)?;
        let directions: Vec<String> = study
            .directions()
            .iter()
            .map(|d| format!("{d:?}"))
            .collect();
        let tags = vec![
            ("hpo.study".to_owned(), study.name().to_owned()),
            ("hpo.directions".to_owned(), directions.join(",")),
        ];
        let run_id =
            self.client
                .create_run(&experiment_id, study.name(), now_ms(), &tags, deadline)?;
        let mine = Parent {
            experiment_id,
            run_id,
        };
        let value = json!({
            "tracking_uri": shown,
            "experiment_id": mine.experiment_id,
            "run_id": mine.run_id,
        });
        // Another process may have kept its parent meanwhile: the one the
        // study holds after this write wins, and a losing run is deleted.
        let kept = match stored(study) {
            Some(theirs) => theirs,
            None => {
                let _ = study
                    .storage()
                    .set_study_system_attr(study.id(), MLFLOW_ATTR, &value);
                stored(study).unwrap_or_else(|| mine.clone())
            }
        };
        if kept.run_id != mine.run_id {
            let _ = self.client.delete_run(&mine.run_id, deadline);
        }
        self.studies.insert(study.id(), kept.clone());
        Ok(kept)
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1..i + 3)) {
            (b'%', Some(hex)) => match std::str::from_utf8(hex)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                Some(b) => {
                    out.push(b);
                    i += 3;
                }
                None => {
                    out.push(b'%');
                    i += 1;
                }
            },
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Standard base64 with padding, for the basic-auth header.
fn base64(text: &str) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in text.as_bytes().chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_is_standard_base64() {
        assert_eq!(base64("user:pass"), "dXNlcjpwYXNz");
        assert_eq!(base64("a"), "YQ==");
        assert_eq!(base64("ab"), "YWI=");
        assert_eq!(percent_decode("p%40ss%3Aw"), "p@ss:w");
    }

    #[test]
    fn credentials_in_the_url_never_show() {
        let m = Mlflow::builder("http://alice:s3cr%40t@127.0.0.1:9/prefix/")
            .bound(Duration::from_millis(10))
            .build()
            .unwrap();
        assert_eq!(m.url(), "http://127.0.0.1:9/prefix");
        assert!(!format!("{m:?}").contains("s3cr"));
        let e = Mlflow::new("ftp://bob:hunter2@host/")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter2") && e.contains("HTTP"), "{e}");
    }
}
