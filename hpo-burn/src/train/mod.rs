//! The training loop: AdamW, warm-up and linear decay, gradient
//! accumulation, per-epoch evaluation and reporting, early stopping, and the
//! out-of-memory ladder.
//!
//! One epoch is planned as optimizer steps of `micro_batch × accumulation`
//! examples (see [`crate::batch`]). Each step runs its micro-batches
//! forward and backward, with every micro-batch's mean loss scaled by its
//! share of the step, so the accumulated gradient is the step's mean
//! gradient whatever the micro-batch size. When a micro-batch runs out of
//! memory the epoch is abandoned, device memory released, the model and
//! optimizer rewound to the epoch's start, the micro-batch halved and the
//! epoch run again: same steps, same examples, same effective batch. Below
//! `min_micro_batch` the run ends with [`Error::OomExhausted`].
//!
//! Runs are deterministic under [`TrainConfig::seed`] on the CPU backend:
//! the backend RNG (initialisation, dropout) is seeded per epoch and the
//! shuffling uses its own ChaCha stream, so a restarted epoch replays the
//! same order and masks.

mod adamw;
mod clip;
mod metrics;
pub mod recompute;
mod schedule;
mod sink;

pub use self::adamw::{AdamW, AdamWState};
pub use self::clip::{clip_factor, global_norm, ClipScope, GradScale};
pub use self::metrics::{accuracy_and_macro_f1, Metrics};
pub use self::schedule::WarmupLinear;
pub use self::sink::{Recorder, TrialSink, DEVICE_PEAK_KEY};

use crate::batch::{make_batch, plan_batches, EncodedExample};
use crate::error::OomConfig;
use crate::error::{Error, Result};
use crate::fault::{Fault, Injected};
use crate::memory::{estimate_training_memory_with, process_peak_rss, MemoryGuard, Precision};
use crate::model::{BertClassifier, ModelConfig};
use crate::oom::{classify, panic_message};
use crate::panic_guard::{self, BackendThreads, PanicWatch};
use crate::peak::{backend_nvml_index, backend_stats, MemoryStats, PeakTracker};
use crate::read;
use crate::threads::on_cpu_threads;
use burn::module::AutodiffModule;
use burn::nn::loss::{CrossEntropyLoss, CrossEntropyLossConfig};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{GradientsAccumulator, GradientsParams, Optimizer};
use burn::tensor::backend::{AutodiffBackend, Backend};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Instant;

/// Training hyperparameters of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    /// Maximum epochs.
    pub epochs: usize,
    /// Peak learning rate.
    pub learning_rate: f64,
    /// Examples per forward/backward pass.
    pub micro_batch: usize,
    /// Micro-batches per optimizer step.
    pub accumulation: usize,
    /// Maximum sequence length (tokens, including `[CLS]`/`[SEP]`).
    pub max_len: usize,
    /// Fraction of all steps spent warming up.
    pub warmup_ratio: f64,
    /// AdamW decoupled weight decay.
    pub weight_decay: f64,
    /// Gradient norm clip; `None` leaves gradients as they are.
    pub grad_clip: Option<f32>,
    /// What `grad_clip` measures: all parameters' gradients as one vector
    /// (the default: PyTorch's `clip_grad_norm_` over the model, Hugging
    /// Face's `max_grad_norm`), or each parameter tensor on its own (burn's
    /// `GradientClipping::Norm`).
    #[serde(default)]
    pub grad_clip_scope: ClipScope,
    /// AdamW's `ε`, added to the root of the second moment: PyTorch's and
    /// Hugging Face's default (1e-8) unless set; burn's `AdamWConfig` uses
    /// 1e-5, which on the book's training benchmark gave a higher loss at
    /// every one of four seeds (book: training).
    #[serde(default = "default_adam_epsilon")]
    pub adam_epsilon: f64,
    /// Stop after this many epochs without a better validation macro-F1.
    pub patience: Option<usize>,
    /// The OOM ladder's floor.
    pub min_micro_batch: usize,
    /// Group similar lengths into batches.
    pub bucket_by_length: bool,
    /// Evaluation batch size.
    pub eval_batch: usize,
    /// Weight the loss by inverse class frequency (`n / (k · n_c)`), so
    /// rare classes count as much as common ones, as macro-F1 does.
    #[serde(default)]
    pub balanced_loss: bool,
    /// Recompute each encoder layer's activations in the backward pass
    /// instead of keeping them (Hugging Face's `gradient_checkpointing`;
    /// [`recompute`]): less memory, about a third more time per step.
    #[serde(default)]
    pub recompute: bool,
    /// Seed for initialisation, dropout and shuffling.
    pub seed: u64,
}

/// PyTorch's `AdamW` default `ε`.
fn default_adam_epsilon() -> f64 {
    1e-8
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            epochs: 3,
            learning_rate: 5e-4,
            micro_batch: 32,
            accumulation: 1,
            max_len: 128,
            warmup_ratio: 0.1,
            weight_decay: 0.01,
            grad_clip: Some(1.0),
            grad_clip_scope: ClipScope::default(),
            adam_epsilon: default_adam_epsilon(),
            patience: None,
            min_micro_batch: 1,
            bucket_by_length: true,
            eval_batch: 64,
            balanced_loss: false,
            recompute: false,
            seed: 0,
        }
    }
}

impl TrainConfig {
    /// Examples per optimizer step.
    pub fn effective_batch(&self) -> usize {
        self.micro_batch * self.accumulation
    }

    fn validate(&self) -> Result<()> {
        let mut problems = Vec::new();
        if self.epochs == 0 {
            problems.push("epochs must be positive".to_string());
        }
        if self.micro_batch == 0 || self.accumulation == 0 || self.eval_batch == 0 {
            problems.push("micro_batch, accumulation and eval_batch must be positive".into());
        }
        if self.min_micro_batch == 0 {
            problems.push("min_micro_batch must be positive".into());
        }
        if !(self.learning_rate.is_finite() && self.learning_rate > 0.0) {
            problems.push(format!(
                "learning rate {} must be positive",
                self.learning_rate
            ));
        }
        if !(self.adam_epsilon.is_finite() && self.adam_epsilon > 0.0) {
            problems.push(format!(
                "AdamW epsilon {} must be positive",
                self.adam_epsilon
            ));
        }
        if let Some(clip) = self.grad_clip {
            if !(clip.is_finite() && clip > 0.0) {
                problems.push(format!("gradient clip {clip} must be positive"));
            }
        }
        if !(0.0..=1.0).contains(&self.warmup_ratio) {
            problems.push(format!(
                "warmup ratio {} is outside [0, 1]",
                self.warmup_ratio
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Error::config(problems.join("; ")))
        }
    }
}

/// Train and validation examples, already tokenized.
#[derive(Debug, Clone, Copy)]
pub struct TrainData<'a> {
    /// Training examples.
    pub train: &'a [EncodedExample],
    /// Validation examples.
    pub valid: &'a [EncodedExample],
    /// Padding token id.
    pub pad_id: u32,
    /// Number of classes.
    pub classes: usize,
}

/// One epoch's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EpochReport {
    /// 1-based epoch.
    pub epoch: u64,
    /// Mean training loss.
    pub train_loss: f64,
    /// Validation metrics.
    pub valid: Metrics,
    /// Micro-batch the epoch completed with.
    pub micro_batch: usize,
    /// Wall time of training (not evaluation) in seconds.
    pub train_seconds: f64,
    /// Wall time of the validation pass in seconds.
    #[serde(default)]
    pub eval_seconds: f64,
    /// Real (non-padding) tokens trained on.
    pub tokens: u64,
    /// Tokens including padding.
    pub padded_tokens: u64,
}

/// The outcome of a completed run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FitReport {
    /// Best validation macro-F1.
    pub best_macro_f1: f64,
    /// Epoch that reached it.
    pub best_epoch: u64,
    /// Every epoch, in order.
    pub history: Vec<EpochReport>,
    /// Micro-batch at the end (smaller than configured after OOM retries).
    pub micro_batch: usize,
    /// Accumulation at the end.
    pub accumulation: usize,
    /// OOM retries taken.
    pub oom_retries: usize,
    /// Whether patience ended the run before `epochs`.
    pub stopped_early: bool,
}

/// Runs training for one model configuration on one device.
#[derive(Debug, Clone)]
pub struct Trainer<B: Backend> {
    /// Hyperparameters.
    pub config: TrainConfig,
    /// The model's configuration (for the memory estimate and OOM record).
    pub model_config: ModelConfig,
    /// A name for the model in records (preset or checkpoint).
    pub model_name: String,
    /// Out-of-memory source (real device, or a simulated cap).
    pub guard: MemoryGuard,
    /// The device.
    pub device: B::Device,
    /// Where the measured peak device memory comes from: the backend's
    /// allocator statistics ([`backend_stats`]: cubecl's on CUDA, none on
    /// the CPU) unless replaced.
    pub memory_stats: Option<Arc<dyn MemoryStats>>,
    /// The backend threads whose panics belong to this run
    /// ([`crate::panic_guard`]): cubecl's of its CUDA device, none on the CPU.
    pub backend_threads: BackendThreads,
    /// A replay of a GPU failure sequence, armed by the environment for tests
    /// ([`crate::fault`]); `None` in normal runs.
    pub fault: Option<Fault>,
}

struct EpochRun<B: AutodiffBackend, O> {
    model: BertClassifier<B>,
    optim: O,
    loss_sum: f64,
    examples: usize,
    tokens: u64,
    padded: u64,
}

impl<B: AutodiffBackend> Trainer<B> {
    /// A trainer with an unlimited memory guard.
    pub fn new(
        config: TrainConfig,
        model_config: ModelConfig,
        model_name: impl Into<String>,
        device: B::Device,
    ) -> Self {
        Trainer {
            config,
            model_config,
            model_name: model_name.into(),
            guard: MemoryGuard::Unlimited,
            memory_stats: backend_stats::<B>(&device),
            backend_threads: BackendThreads::of_device::<B>(&device),
            fault: None,
            device,
        }
        .with_fault(Fault::from_env())
    }

    /// Arms (or disarms, with `None`) a replayed failure sequence; a run
    /// with one armed watches the replay's backend thread as its own.
    pub fn with_fault(mut self, fault: Option<Fault>) -> Self {
        if fault.is_some() {
            self.backend_threads = Fault::threads();
        }
        self.fault = fault;
        self
    }

    /// Replaces where the measured peak device memory comes from.
    pub fn with_memory_stats(mut self, stats: Option<Arc<dyn MemoryStats>>) -> Self {
        self.memory_stats = stats;
        self
    }

    /// Replaces the memory guard (for example a simulated device).
    pub fn with_guard(mut self, guard: MemoryGuard) -> Self {
        self.guard = guard;
        self
    }

    /// Trains `model`, reporting each epoch's validation macro-F1 to `sink`.
    ///
    /// Returns the model as it was after its best epoch (highest validation
    /// macro-F1, the one the report's `best_macro_f1` measures) and the
    /// report; [`Error::Pruned`] when the
    /// sink asks to stop, [`Error::OomExhausted`] when even the smallest
    /// micro-batch does not fit, [`Error::Device`] for failures that are not
    /// out-of-memory (never retried), and [`Error::Execution`] or
    /// [`Error::BackendPanics`] when the backend failed while results were
    /// read back (never retried in this process: see [`crate::oom`]). It
    /// never returns `Ok` after a backend thread panicked during the run,
    /// and once a backend thread failed an allocation it returns an
    /// out-of-memory error whatever the calling thread saw next (a failed
    /// read, a "Memory page" error, a NaN loss): [`PanicWatch::settle`].
    ///
    /// The peak device memory measured during the run ([`crate::peak`]) is
    /// recorded through [`TrialSink::record_device_peak`].
    pub fn fit<S: TrialSink>(
        &self,
        model: BertClassifier<B>,
        data: TrainData<'_>,
        sink: &mut S,
    ) -> Result<(BertClassifier<B>, FitReport)> {
        let watch = PanicWatch::start_for(self.backend_threads.clone());
        let result = self.fit_watched(model, data, sink, &watch);
        panic_guard::report();
        watch.settle(result)
    }

    fn fit_watched<S: TrialSink>(
        &self,
        model: BertClassifier<B>,
        data: TrainData<'_>,
        sink: &mut S,
        watch: &PanicWatch,
    ) -> Result<(BertClassifier<B>, FitReport)> {
        let cfg = &self.config;
        cfg.validate()?;
        crate::allocator::keep_freed_memory();
        if data.train.is_empty() || data.valid.is_empty() {
            return Err(Error::Data(
                "training and validation sets must not be empty".into(),
            ));
        }
        // Sized for the longest batch this run will see: batches are padded
        // to their own longest example.
        let longest = data
            .train
            .iter()
            .map(EncodedExample::len)
            .max()
            .unwrap_or(1);
        let sized_len = cfg.max_len.min(longest);
        let estimate = estimate_training_memory_with(
            &self.model_config,
            cfg.micro_batch,
            sized_len,
            Precision::F32,
            cfg.recompute,
        );
        sink.record("estimated_peak_bytes", json!(estimate.total()))?;
        // The estimate's part that grows with the micro-batch, and the
        // length it was sized for: what a measured peak is fitted against
        // beyond one ratio per model (the GPU check's summary reads them).
        sink.record("estimated_activation_bytes", json!(estimate.activations))?;
        sink.record("sized_len", json!(sized_len))?;

        let effective = cfg.effective_batch();
        let steps_per_epoch = data.train.len().div_ceil(effective);
        let schedule = WarmupLinear::new(
            cfg.learning_rate,
            cfg.warmup_ratio,
            steps_per_epoch * cfg.epochs,
        );
        let (per_parameter, global) = match cfg.grad_clip_scope {
            ClipScope::PerParameter => (cfg.grad_clip, None),
            ClipScope::Global => (None, cfg.grad_clip),
        };
        let adamw = AdamW::new(cfg.weight_decay as f32, per_parameter)
            .with_epsilon(cfg.adam_epsilon as f32);
        let global_clip = global.map(|max| (max, adamw.grad_scale.clone()));
        let optim: OptimizerAdaptor<AdamW, BertClassifier<B>, B> = adamw.into();
        // The epoch's starting point, kept while the epoch runs only where
        // an out-of-memory epoch can be rerun in this process.
        let ladder = self.retries_in_process();
        let (mut model, mut optim) = (Some(model), Some(optim));
        let mut micro = cfg.micro_batch;
        let mut retries = 0usize;
        let mut history = Vec::new();
        let mut best = (f64::NEG_INFINITY, 0u64);
        // Parameter tensors are shared handles: keeping the best epoch's
        // model costs one copy of the weights once the optimizer moves on.
        let mut best_model = None;
        let mut stopped_early = false;
        let mut peaks = PeakTracker::new(
            self.memory_stats.clone(),
            backend_nvml_index::<B>(&self.device),
        );

        for epoch in 1..=cfg.epochs as u64 {
            let plan = self.epoch_plan(data.train, epoch);
            let step0 = (epoch as usize - 1) * steps_per_epoch;
            let started = Instant::now();
            let run = loop {
                // Parameters and optimizer state are shared handles, and the
                // optimizer replaces them step by step: holding the epoch's
                // start costs a second copy of the weights and of both AdamW
                // moments by the epoch's end (on BERT-large 3.7 GiB of the
                // 11 GiB a small trial reserved on an H200). On cubecl a
                // failed allocation ends the process's device, so the rerun
                // it pays for could never happen: the executor relaunches in
                // a fresh process instead.
                let (start_model, start_optim) = if ladder {
                    (model.clone(), optim.clone())
                } else {
                    (model.take(), optim.take())
                };
                let (Some(start_model), Some(start_optim)) = (start_model, start_optim) else {
                    return Err(Error::Device(
                        "the training loop lost its model between epochs (a bug in hpo-burn)"
                            .into(),
                    ));
                };
                let attempt = on_cpu_threads::<B, _>(|| {
                    self.run_epoch(
                        start_model,
                        start_optim,
                        epoch,
                        micro,
                        &plan,
                        step0,
                        &schedule,
                        global_clip.as_ref(),
                        data,
                        &mut peaks,
                    )
                });
                match attempt {
                    Ok(run) => break run,
                    // A backend thread failed an allocation: on cubecl the
                    // device is gone for this process, so the ladder cannot
                    // help here; a fresh process can (the executor's relaunch).
                    Err(e) if watch.saw_allocation_failure() => return Err(watch.out_of_memory(&e)),
                    // Nothing to rerun from: the executor's relaunch, as for
                    // a failed allocation.
                    Err(e @ Error::OutOfMemory(_)) if !ladder => return Err(e),
                    Err(Error::OutOfMemory(message)) => {
                        B::memory_cleanup(&self.device);
                        let accumulation = effective.div_ceil(micro);
                        if micro / 2 < cfg.min_micro_batch.max(1) {
                            let config = OomConfig {
                                model: self.model_name.clone(),
                                batch: micro,
                                accumulation,
                                max_len: cfg.max_len,
                                effective_batch: effective,
                                initial_batch: cfg.micro_batch,
                                retries,
                            };
                            tracing::warn!(?config, %message, "out of memory at the smallest micro-batch; giving up");
                            sink.record("oom_retries", json!(retries))?;
                            return Err(Error::oom_exhausted(config, message));
                        }
                        micro /= 2;
                        retries += 1;
                        tracing::warn!(
                            epoch,
                            micro_batch = micro,
                            accumulation = effective.div_ceil(micro),
                            effective_batch = effective,
                            %message,
                            "out of memory: halving the micro-batch and restarting the epoch"
                        );
                        sink.record("oom_retries", json!(retries))?;
                        sink.record("micro_batch", json!(micro))?;
                        sink.record("accumulation", json!(effective.div_ceil(micro)))?;
                    }
                    Err(other) => return Err(other),
                }
            };
            let train_seconds = started.elapsed().as_secs_f64();
            let model_now = run.model;
            optim = Some(run.optim);
            let eval_started = Instant::now();
            let valid = self.evaluate(&model_now.valid(), data)?;
            let eval_seconds = eval_started.elapsed().as_secs_f64();
            peaks.sample();
            peaks.sample_nvml();
            // Nothing computed while a backend thread was failing is reported.
            watch.check()?;
            let report = EpochReport {
                epoch,
                train_loss: run.loss_sum / run.examples.max(1) as f64,
                valid,
                micro_batch: micro,
                train_seconds,
                eval_seconds,
                tokens: run.tokens,
                padded_tokens: run.padded,
            };
            tracing::debug!(?report, "epoch done");
            history.push(report);
            if valid.macro_f1 > best.0 {
                best = (valid.macro_f1, epoch);
                best_model = Some(model_now.clone());
            }
            model = Some(model_now);
            if sink.report_epoch(epoch, valid.macro_f1)? {
                self.record_final(sink, micro, retries, &peaks)?;
                return Err(Error::pruned(epoch));
            }
            if let Some(p) = cfg.patience {
                if epoch - best.1 >= p as u64 && (epoch as usize) < cfg.epochs {
                    stopped_early = true;
                    break;
                }
            }
        }
        watch.check()?;
        self.record_final(sink, micro, retries, &peaks)?;
        let report = FitReport {
            best_macro_f1: best.0,
            best_epoch: best.1,
            history,
            micro_batch: micro,
            accumulation: effective.div_ceil(micro),
            oom_retries: retries,
            stopped_early,
        };
        match best_model.or(model) {
            Some(model) => Ok((model, report)),
            None => Err(Error::Device(
                "the training loop lost its model (a bug in hpo-burn)".into(),
            )),
        }
    }

    /// Whether an out-of-memory epoch can be rerun in this process at a
    /// smaller micro-batch (the in-process ladder): on the CPU, and under a
    /// simulated memory cap (refused before anything is allocated); not on
    /// cubecl's devices, where a failed allocation leaves every later
    /// operation of the process failing (GPU checks on the H100 and H200),
    /// nor under a replay of that ([`crate::fault`]).
    fn retries_in_process(&self) -> bool {
        matches!(self.guard, MemoryGuard::Simulated { .. })
            || !matches!(self.backend_threads, BackendThreads::Cubecl(_))
    }

    /// The optimizer steps of 1-based `epoch` over `train`: each step's
    /// example indices, in the order [`fit`](Self::fit) trains on them
    /// (shuffled by the seed and the epoch, bucketed by length when
    /// configured). A benchmark replays exactly these batches elsewhere.
    pub fn epoch_plan(&self, train: &[EncodedExample], epoch: u64) -> Vec<Vec<usize>> {
        let cfg = &self.config;
        let lengths: Vec<usize> = train.iter().map(EncodedExample::len).collect();
        plan_batches(
            &lengths,
            cfg.effective_batch(),
            Some(cfg.seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            cfg.bucket_by_length,
        )
    }

    fn record_final<S: TrialSink>(
        &self,
        sink: &mut S,
        micro: usize,
        retries: usize,
        peaks: &PeakTracker,
    ) -> Result<()> {
        sink.record("oom_retries", json!(retries))?;
        sink.record("micro_batch", json!(micro))?;
        sink.record(
            "accumulation",
            json!(self.config.effective_batch().div_ceil(micro)),
        )?;
        if let Some(peak) = process_peak_rss() {
            // The CPU backend has no allocator statistics: the process's
            // peak resident set is the measurable stand-in.
            sink.record("peak_rss_bytes", json!(peak))?;
        }
        if let Some(peak) = peaks.peak() {
            sink.record_device_peak(peak)?;
        }
        if let Some(in_use) = peaks.in_use_peak() {
            // Live allocations between steps: beside the reserved peak, how
            // much of the footprint is the allocator's pages kept for reuse.
            sink.record("peak_in_use_bytes", json!(in_use))?;
        }
        if let Some(nvml) = peaks.nvml_peak() {
            // The driver's figure for this process: the allocator's plus
            // the CUDA context and what the driver holds for us.
            sink.record("nvml_process_peak_bytes", json!(nvml))?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn run_epoch<O: Optimizer<BertClassifier<B>, B>>(
        &self,
        mut model: BertClassifier<B>,
        mut optim: O,
        epoch: u64,
        micro: usize,
        plan: &[Vec<usize>],
        step0: usize,
        schedule: &WarmupLinear,
        global_clip: Option<&(f32, GradScale)>,
        data: TrainData<'_>,
        peaks: &mut PeakTracker,
    ) -> Result<EpochRun<B, O>> {
        B::seed(&self.device, self.config.seed.wrapping_add(epoch));
        let mut loss_config = CrossEntropyLossConfig::new();
        if self.config.balanced_loss {
            let mut counts = vec![0usize; data.classes];
            for e in data.train {
                if let Some(c) = counts.get_mut(e.label) {
                    *c += 1;
                }
            }
            let n = data.train.len() as f32;
            let k = data.classes as f32;
            loss_config.weights = Some(
                counts
                    .iter()
                    .map(|&c| if c == 0 { 0.0 } else { n / (k * c as f32) })
                    .collect(),
            );
        }
        let criterion = loss_config.init::<B>(&self.device);
        let started = Instant::now();
        let mut run_loss = 0.0;
        let (mut examples, mut tokens, mut padded) = (0usize, 0u64, 0u64);
        // A replayed failure fires once, at the run's first micro-batch.
        let mut fault = self.fault;
        for (k, step) in plan.iter().enumerate() {
            let lr = schedule.lr(step0 + k);
            let mut accumulator = GradientsAccumulator::<BertClassifier<B>>::new();
            let step_size = step.len() as f32;
            for chunk in step.chunks(micro) {
                let exs: Vec<&EncodedExample> = chunk.iter().map(|&i| &data.train[i]).collect();
                let len = exs.iter().map(|e| e.len()).max().unwrap_or(1);
                self.guard
                    .check(&self.model_config, exs.len(), len, self.config.recompute)?;
                let device = &self.device;
                let m = &model;
                let criterion = &criterion;
                let injected = match fault.take() {
                    Some(f) => f.inject(exs.len())?,
                    None => None,
                };
                let recompute = self.config.recompute;
                let (loss, grads, batch_tokens) = guarded(|| -> Result<_> {
                    let batch = make_batch::<B>(&exs, data.pad_id, device);
                    let (labels, share, tokens) = (
                        batch.labels.clone(),
                        batch.size as f32 / step_size,
                        batch.tokens,
                    );
                    let loss = |logits| -> Result<_> {
                        let loss = criterion.forward(logits, labels);
                        let value = read::scalar("the training loss", loss.clone())?;
                        Ok((value, loss * share))
                    };
                    let (value, grads) = if recompute {
                        recompute::recomputed_gradients(m, batch, loss)?
                    } else {
                        let logits = m.forward(batch.input_ids, batch.segment_ids, batch.mask_pad);
                        let (value, scaled) = loss(logits)?;
                        (value, GradientsParams::from_grads(scaled.backward(), m))
                    };
                    let value = match injected {
                        Some(Injected::Loss(l)) => l,
                        None => value,
                    };
                    Ok((value, grads, tokens))
                })??;
                if !loss.is_finite() {
                    return Err(Error::Diverged(format!(
                        "loss {loss} at epoch {epoch}, step {k} (learning rate {lr:.2e})"
                    )));
                }
                accumulator.accumulate(&model, grads);
                run_loss += loss * exs.len() as f64;
                examples += exs.len();
                tokens += batch_tokens as u64;
                padded += (exs.len() * len) as u64;
            }
            let grads = accumulator.grads();
            let (m, o) = guarded(move || -> Result<_> {
                if let Some((max, scale)) = global_clip {
                    scale.set(clip_factor(*max, global_norm(&model, &grads)?));
                }
                let m = optim.step(lr, model, grads);
                Ok((m, optim))
            })??;
            model = m;
            optim = o;
            read::sync::<B>("the optimizer step", &self.device)?;
            peaks.sample();
            tracing::debug!(
                epoch,
                step = k,
                of = plan.len(),
                micro_batch = micro,
                seconds = started.elapsed().as_secs_f64(),
                "optimizer step done"
            );
        }
        Ok(EpochRun {
            model,
            optim,
            loss_sum: run_loss,
            examples,
            tokens,
            padded,
        })
    }

    /// Validation metrics of `model` (an inference model: no dropout).
    pub fn evaluate(
        &self,
        model: &BertClassifier<B::InnerBackend>,
        data: TrainData<'_>,
    ) -> Result<Metrics> {
        on_cpu_threads::<B, _>(|| {
            evaluate_here(
                model,
                data.valid,
                data.pad_id,
                data.classes,
                self.config.eval_batch,
                &self.device,
                &self.backend_threads,
            )
        })
    }
}

/// Accuracy, macro-F1 and mean loss of `model` on `examples`, in batches of
/// `batch` (grouped by length). Use an inference model (`model.valid()`):
/// no dropout, no autodiff graph.
///
/// On the CPU ([`crate::host::is_cpu`]) the batches are dealt out to
/// rayon's threads and evaluated side by side (burn-flex runs most ops on
/// one thread); the metrics are the same, the mean loss up to the order of
/// a floating-point sum. Called from outside any rayon pool, it runs on
/// hpo-burn's CPU pool, as training does ([`on_cpu_threads`]); called from
/// inside a pool, on that pool's threads.
pub fn evaluate<B: Backend>(
    model: &BertClassifier<B>,
    examples: &[EncodedExample],
    pad_id: u32,
    classes: usize,
    batch: usize,
    device: &B::Device,
) -> Result<Metrics> {
    let threads = BackendThreads::of_device::<B>(device);
    on_cpu_threads::<B, _>(|| {
        evaluate_here(model, examples, pad_id, classes, batch, device, &threads)
    })
}

/// [`evaluate`] on the calling thread and its rayon pool.
fn evaluate_here<B: Backend>(
    model: &BertClassifier<B>,
    examples: &[EncodedExample],
    pad_id: u32,
    classes: usize,
    batch: usize,
    device: &B::Device,
    threads: &BackendThreads,
) -> Result<Metrics> {
    if examples.is_empty() || batch == 0 {
        return Err(Error::Data(
            "evaluation needs at least one example and a positive batch size".into(),
        ));
    }
    let watch = PanicWatch::start_for(threads.clone());
    let lengths: Vec<usize> = examples.iter().map(EncodedExample::len).collect();
    let plan = plan_batches(&lengths, batch, None, true);
    let shares = if crate::host::is_cpu::<B>() {
        rayon::current_num_threads().clamp(1, plan.len().max(1))
    } else {
        1
    };
    // Share k takes batches k, k + shares, ...: the plan is sorted by
    // length, so every share gets long and short ones.
    let parts: Vec<Result<Part>> = (0..shares)
        .into_par_iter()
        .map(|k| {
            let mine = plan.iter().skip(k).step_by(shares);
            evaluate_batches(model, examples, mine, pad_id, device)
        })
        .collect();
    let (mut predicted, mut actual, mut loss_sum) = (Vec::new(), Vec::new(), 0.0);
    for part in parts {
        let part = watch.settle(part)?;
        predicted.extend(part.predicted);
        actual.extend(part.actual);
        loss_sum += part.loss_sum;
    }
    watch.check()?;
    let (accuracy, macro_f1) = accuracy_and_macro_f1(&predicted, &actual, classes);
    Ok(Metrics {
        accuracy,
        macro_f1,
        loss: loss_sum / examples.len() as f64,
    })
}

/// Predictions, labels and summed loss of some evaluation batches.
struct Part {
    predicted: Vec<usize>,
    actual: Vec<usize>,
    loss_sum: f64,
}

fn evaluate_batches<'a, B: Backend>(
    model: &BertClassifier<B>,
    examples: &[EncodedExample],
    batches: impl Iterator<Item = &'a Vec<usize>>,
    pad_id: u32,
    device: &B::Device,
) -> Result<Part> {
    let mut part = Part {
        predicted: Vec::new(),
        actual: Vec::new(),
        loss_sum: 0.0,
    };
    for batch_idx in batches {
        let exs: Vec<&EncodedExample> = batch_idx.iter().map(|&i| &examples[i]).collect();
        let (loss, preds) = guarded(|| -> Result<_> {
            let batch = make_batch::<B>(&exs, pad_id, device);
            let logits = model.forward(batch.input_ids, batch.segment_ids, batch.mask_pad);
            let loss = CrossEntropyLoss::new(None, device).forward(logits.clone(), batch.labels);
            let loss = read::scalar("the validation loss", loss)?;
            let preds = read::values::<i64, B, 2, _>("the predictions", logits.argmax(1))?;
            Ok((loss, preds))
        })??;
        part.loss_sum += loss * exs.len() as f64;
        part.predicted
            .extend(preds.into_iter().map(|p| p.max(0) as usize));
        part.actual.extend(exs.iter().map(|e| e.label));
    }
    Ok(part)
}

/// Runs `f`, turning a panic into a classified error (out-of-memory, device
/// failure) instead of unwinding through the study.
fn guarded<T>(f: impl FnOnce() -> T) -> Result<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| classify(&panic_message(payload.as_ref())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guarded_turns_backend_panics_into_classified_errors() {
        assert_eq!(guarded(|| 7).unwrap(), 7);
        let oom =
            guarded(|| -> () { std::panic::panic_any("CUDA_ERROR_OUT_OF_MEMORY".to_string()) });
        assert!(matches!(oom, Err(Error::OutOfMemory(_))));
        // A poisoned device is not an OOM: the ladder does not retry it.
        let poisoned = guarded(|| -> () { std::panic::panic_any("device-side assert triggered") });
        assert!(matches!(poisoned, Err(Error::Device(ref m)) if m.contains("device-side assert")));
        assert!(matches!(
            hpo_core::TrialError::from(Error::Device("x".into())),
            hpo_core::TrialError::Failed(_)
        ));
    }

    #[test]
    fn config_validation_names_problems() {
        let bad = TrainConfig {
            epochs: 0,
            learning_rate: -1.0,
            adam_epsilon: 0.0,
            grad_clip: Some(f32::NAN),
            ..TrainConfig::default()
        };
        let e = bad.validate().unwrap_err().to_string();
        assert!(
            e.contains("epochs")
                && e.contains("learning rate -1")
                && e.contains("epsilon 0")
                && e.contains("gradient clip NaN"),
            "{e}"
        );
    }

    #[test]
    fn older_configs_read_with_the_global_clip() {
        let mut json = serde_json::to_value(TrainConfig::default()).expect("json");
        let fields = json.as_object_mut().expect("object");
        assert_eq!(fields.remove("grad_clip_scope"), Some("global".into()));
        let read: TrainConfig = serde_json::from_value(json).expect("read");
        assert_eq!(read.grad_clip_scope, ClipScope::Global);
        let per: ClipScope = serde_json::from_str("\"per_parameter\"").expect("scope");
        assert_eq!(per, ClipScope::PerParameter);
    }
}
