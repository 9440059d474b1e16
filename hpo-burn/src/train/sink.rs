//! Where training reports go: a live hpo trial, or a plain recorder.

use crate::error::Result;
use serde_json::Value;
use std::collections::BTreeMap;

/// Receives per-epoch metrics and run facts from the training loop.
///
/// Implemented for [`hpo_core::Trial`] (report, then ask the pruner; facts
/// become user attributes) and for [`Recorder`] (tests, benchmarks, training
/// outside a study).
pub trait TrialSink {
    /// Reports the validation metric of `epoch`; returns whether to stop
    /// (prune) the run.
    fn report_epoch(&mut self, epoch: u64, metric: f64) -> Result<bool>;

    /// Records a fact about the run (OOM retries, final micro-batch, peaks).
    fn record(&mut self, key: &str, value: Value) -> Result<()>;

    /// Records the run's measured peak device memory in bytes (the
    /// allocator's figure, [`crate::peak`]): the fact [`DEVICE_PEAK_KEY`].
    fn record_device_peak(&mut self, bytes: u64) -> Result<()> {
        self.record(DEVICE_PEAK_KEY, Value::from(bytes))
    }
}

/// The fact (user attribute) holding a run's measured peak device memory.
pub const DEVICE_PEAK_KEY: &str = "peak_device_bytes";

impl TrialSink for hpo_core::Trial {
    fn report_epoch(&mut self, epoch: u64, metric: f64) -> Result<bool> {
        self.report(epoch, metric)?;
        Ok(self.should_prune()?)
    }

    fn record(&mut self, key: &str, value: Value) -> Result<()> {
        Ok(self.set_user_attr(key, value)?)
    }

    /// Also the executor's measured peak, which its correction learns from.
    fn record_device_peak(&mut self, bytes: u64) -> Result<()> {
        self.set_user_attr(DEVICE_PEAK_KEY, bytes)?;
        Ok(hpo_core::executor::record_peak(self, bytes)?)
    }
}

impl<T: TrialSink + ?Sized> TrialSink for &mut T {
    fn report_epoch(&mut self, epoch: u64, metric: f64) -> Result<bool> {
        (**self).report_epoch(epoch, metric)
    }

    fn record(&mut self, key: &str, value: Value) -> Result<()> {
        (**self).record(key, value)
    }

    fn record_device_peak(&mut self, bytes: u64) -> Result<()> {
        (**self).record_device_peak(bytes)
    }
}

/// A sink that keeps everything in memory and prunes when its rule says so.
#[derive(Default)]
pub struct Recorder {
    /// `(epoch, metric)` in report order.
    pub reports: Vec<(u64, f64)>,
    /// Recorded facts, latest value per key.
    pub attrs: BTreeMap<String, Value>,
    prune_rule: Option<Box<dyn FnMut(u64, f64) -> bool + Send>>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("reports", &self.reports)
            .field("attrs", &self.attrs)
            .finish_non_exhaustive()
    }
}

impl Recorder {
    /// A recorder that never prunes.
    pub fn new() -> Self {
        Recorder::default()
    }

    /// A recorder that prunes when `rule(epoch, metric)` returns true.
    pub fn pruning_when(rule: impl FnMut(u64, f64) -> bool + Send + 'static) -> Self {
        Recorder {
            prune_rule: Some(Box::new(rule)),
            ..Recorder::default()
        }
    }
}

impl TrialSink for Recorder {
    fn report_epoch(&mut self, epoch: u64, metric: f64) -> Result<bool> {
        self.reports.push((epoch, metric));
        Ok(self.prune_rule.as_mut().is_some_and(|r| r(epoch, metric)))
    }

    fn record(&mut self, key: &str, value: Value) -> Result<()> {
        self.attrs.insert(key.to_string(), value);
        Ok(())
    }
}
