//! Tracking hooks: a study tells an outside tracker (MLflow, say) about
//! itself and each trial that finishes.
//!
//! The contract is one-way and cannot fail a trial: the hooks return
//! nothing, run after the trial's record is written (outside every storage
//! transaction) and must return at once, leaving slow work (HTTP) to a
//! thread of the tracker's own. The study's records never depend on what a
//! tracker did.
//!
//! Every process that finishes a trial reports it: the thread or worker
//! process that told it, or, when a worker died without telling its
//! trial, the coordinator that failed it. A trial is reported once, by the
//! process that wrote its end. Worker processes get the trackers through
//! [`crate::executor::worker_main_with`] and flush them before they exit.

use super::Study;
use crate::trial::FrozenTrial;
use std::sync::Arc;

/// Receives a study's events, registered with [`super::StudyBuilder::tracker`].
///
/// Thread safety: hooks are called from any thread that runs or ends a
/// trial of the study, concurrently; an implementation keeps its own
/// synchronisation. Hooks must not block for long and cannot fail the
/// study: an implementation that sends records over a network queues them
/// and reports its own failures (once, with a count) rather than return
/// them.
pub trait Tracker: Send + Sync {
    /// The study was opened (created or resumed) in this process, by
    /// [`super::StudyBuilder::build`]. Default: nothing.
    fn study_opened(&self, study: &Study) {
        let _ = study;
    }

    /// `trial` ended (COMPLETE, PRUNED or FAIL) and its record is stored;
    /// `study` is the study it belongs to, whose storage holds every other
    /// trial (for running counts, say).
    fn trial_finished(&self, study: &Study, trial: &Arc<FrozenTrial>);

    /// A [`Study::optimize_with`] call of this process is returning (or a
    /// signal is ending the process): the study's run here is over, though
    /// other processes may go on. Default: [`Tracker::flush`].
    fn run_ended(&self, study: &Study) {
        let _ = study;
        self.flush();
    }

    /// Sends what is queued, blocking for at most the tracker's own bound.
    /// Called by the default [`Tracker::run_ended`] and before a worker
    /// process exits. Default: nothing.
    fn flush(&self) {}
}

impl<T: Tracker + ?Sized> Tracker for Arc<T> {
    fn study_opened(&self, study: &Study) {
        (**self).study_opened(study)
    }

    fn trial_finished(&self, study: &Study, trial: &Arc<FrozenTrial>) {
        (**self).trial_finished(study, trial)
    }

    fn run_ended(&self, study: &Study) {
        (**self).run_ended(study)
    }

    fn flush(&self) {
        (**self).flush()
    }
}

impl Study {
    /// The trackers registered on this study handle
    /// ([`super::StudyBuilder::tracker`]).
    pub fn trackers(&self) -> &[Arc<dyn Tracker>] {
        &self.core.trackers
    }

    /// Tells every tracker that `trial` ended.
    pub(crate) fn track_finished(&self, trial: &Arc<FrozenTrial>) {
        for t in &self.core.trackers {
            t.trial_finished(self, trial);
        }
    }

    /// Tells every tracker that this process's run of the study is over
    /// ([`Tracker::run_ended`]), which flushes them, each within its own
    /// bound.
    pub(crate) fn end_tracking(&self) {
        for t in &self.core.trackers {
            t.run_ended(self);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::TrialState;
    use crate::TrialError;
    use std::sync::Mutex;

    #[derive(Default)]
    struct Log(Mutex<Vec<String>>);

    impl Tracker for Log {
        fn study_opened(&self, study: &Study) {
            self.0
                .lock()
                .unwrap()
                .push(format!("open {}", study.name()));
        }
        fn trial_finished(&self, _study: &Study, trial: &Arc<FrozenTrial>) {
            self.0
                .lock()
                .unwrap()
                .push(format!("{} {:?}", trial.number, trial.state));
        }
        fn flush(&self) {
            self.0.lock().unwrap().push("flush".into());
        }
    }

    #[test]
    fn every_trial_end_is_reported_once_and_the_study_flushes() {
        let log = Arc::new(Log::default());
        let study = Study::builder()
            .name("tracked")
            .tracker(Arc::clone(&log))
            .build()
            .unwrap();
        study
            .optimize(4, |trial| {
                let x = trial.suggest_float("x", 0.0, 1.0)?;
                match trial.number() {
                    1 => Err(TrialError::Pruned),
                    2 => Err(TrialError::Failed("bad".into())),
                    _ => Ok(x),
                }
            })
            .unwrap();
        let t = study.ask().unwrap();
        study.tell(t, 0.5).unwrap();
        let got = log.0.lock().unwrap().clone();
        assert_eq!(
            got,
            vec![
                "open tracked".to_owned(),
                format!("0 {:?}", TrialState::Complete),
                format!("1 {:?}", TrialState::Pruned),
                format!("2 {:?}", TrialState::Fail),
                format!("3 {:?}", TrialState::Complete),
                "flush".to_owned(),
                format!("4 {:?}", TrialState::Complete),
            ]
        );
        assert_eq!(study.trackers().len(), 1);
    }
}
