//! Sizing trials for the process executor: hpo-core's
//! [`MemoryEstimator`] from a run's model and the analytic estimate, and the
//! memory budget to admit them by.
//!
//! The executor asks the estimator two things before it starts a worker:
//! *which configuration is this trial* (drawn on the trial with the same
//! `suggest_*` calls the objective makes) and *how much device memory does it
//! need at this micro-batch*. [`TrainingEstimator`] answers the first with a
//! function the user gives (typically the objective's own sampling, ending in
//! [`Sizing::of_run`]) and the second with
//! [`crate::memory::estimate_training_memory_with`] at the micro-batch (and
//! activation recomputation) the executor asks about,
//! so shrinking (micro-batch halved, accumulation doubled) is priced
//! correctly. The trial's *family* is its model (preset or checkpoint name):
//! the analytic estimate misses the same buffers for every configuration of
//! one model, so the executor's learned correction is kept per family.
//!
//! The budget is the device's total from NVML (`cuda` feature), capped by a
//! number the user gives ([`device_budget`]); without NVML the user's number
//! is the budget. On the CPU the "device" is the machine's memory
//! ([`host_budget`]).

use crate::error::{Error, Result};
use crate::memory::{device_memory, estimate_training_memory_with, Precision};
use crate::model::ModelConfig;
use crate::task::{RunSpec, TextTask};
use hpo_core::executor::{Batch, MemoryEstimator, Shape};
use hpo_core::{ParamValue, Trial, TrialError};
use std::collections::{BTreeMap, VecDeque};
use std::sync::Mutex;

/// What the executor needs to know of one configuration to size it.
#[derive(Debug, Clone, PartialEq)]
pub struct Sizing {
    /// The family the learned correction is kept for (the model's name).
    pub family: String,
    /// The model trained.
    pub model: ModelConfig,
    /// Sequence length the memory is sized for (the longest batch).
    pub max_len: usize,
    /// The batch the configuration asks for.
    pub batch: Batch,
    /// Training precision.
    pub precision: Precision,
    /// What the backend really holds over the analytic estimate, before any
    /// measurement of this family: 1 (the analytic figure as is) unless set
    /// with [`Sizing::calibrated`]. The executor's learned correction
    /// applies on top.
    pub calibration: f64,
    /// How time per example depends on the micro-batch and on activation
    /// recomputation, by which the executor chooses how to fit a
    /// configuration that does not fit as asked; `None` offers no
    /// recomputation (the executor then only shrinks the micro-batch).
    pub step_time: Option<StepTime>,
}

/// How a run's time per example depends on its micro-batch and on
/// activation recomputation ([`crate::train::recompute`]): per example, a
/// pass of `m` sequences of `s` tokens costs `1 + pass_tokens / (m·s)`
/// (a fixed cost per pass, worth `pass_tokens` tokens of work, shared by
/// fewer examples when the micro-batch shrinks), times
/// `recompute_factor` with recomputation (its extra forward pass).
///
/// The executor runs a configuration that does not fit as asked the
/// fastest way that fits ([`hpo_core::executor::fit_options`]): with these
/// figures, halving the micro-batch first while a pass still holds
/// thousands of tokens, recomputation first once halving would cost more
/// than the extra forward pass, and recomputation alone at the
/// micro-batch floor.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTime {
    /// The fixed cost of a pass, in tokens.
    pub pass_tokens: f64,
    /// Step time with recomputation over step time without.
    pub recompute_factor: f64,
}

impl StepTime {
    /// Measured on the CPU backend (`cargo run --release -p hpo-burn
    /// --example recompute`, `bench/results/recompute.md`, 2 cores, CPU
    /// time): a pass's fixed cost is worth 154 tokens (BERT-base's time per
    /// example at micro-batch 4 against 16 x 128 tokens), and recomputation
    /// costs 1.30x (the median over BERT-base, DeBERTa-v3-base and
    /// BERT-large at eight shapes; 1.25-1.41). So halving the micro-batch
    /// is the faster lever while a pass holds more than about 360 tokens.
    /// A GPU's are [`StepTime::MEASURED_CUDA`]
    /// (`experiment::DeviceArg::sized` chooses by device).
    pub const MEASURED_CPU: StepTime = StepTime {
        pass_tokens: 154.0,
        recompute_factor: 1.30,
    };

    /// Measured on CUDA (`bench/gpu/check.sh`'s steptime step, NVIDIA H200,
    /// burn-cuda 0.21 f32 with hpo-burn's product kernels, 2026-11-27, one
    /// call; `bench/results/gpu/h200_nov27_call1_steptime.json`): BERT-base
    /// at 8, 16 and 32 x 512 trained 32,614, 41,070 and 47,741 tokens/s,
    /// which `1 + pass_tokens / tokens` fits within 0.5% at 2,970 tokens
    /// (a kernel launch per op and AdamW's per-parameter ops do not shrink
    /// with the batch); recomputing at 32 x 512 trained 36,020 tokens/s,
    /// 1.33x the time. So on this GPU halving the micro-batch is the faster
    /// lever only while a pass holds more than about 6,200 tokens.
    pub const MEASURED_CUDA: StepTime = StepTime {
        pass_tokens: 2970.0,
        recompute_factor: 1.33,
    };

    /// Time per example of `batch` at sequences of `len` tokens (relative).
    pub fn per_example(&self, batch: Batch, len: usize) -> f64 {
        let tokens = (f64::from(batch.micro) * len as f64).max(1.0);
        let pass = 1.0 + self.pass_tokens.max(0.0) / tokens;
        if batch.recompute {
            pass * self.recompute_factor
        } else {
            pass
        }
    }
}

/// burn-cuda 0.21's measured peak (cubecl's reserved bytes) over the
/// analytic estimate, f32 training of BERT presets from scratch: 1.45-2.00,
/// median 1.73, over 53 trials on an NVIDIA H200 (book: "Parallel trials on
/// one GPU", GPU check of 2026-11-27 evening, call 2; BERT-base's median
/// 1.86, BERT-large's 1.70). It was 2.1 (1.88-2.34) while the training loop
/// kept each epoch's starting weights and optimizer state for its
/// in-process retry, which a CUDA process can never use. Without a
/// calibration the executor's first trials of each model are admitted at
/// about half their real size: five started at once on the H200 and the
/// device went 58% over a 24 GiB budget before the first measurement arrived.
pub const BURN_CUDA_F32_CALIBRATION: f64 = 1.73;

/// One worker process's CUDA context and what the driver holds for it:
/// NVML's per-process figure minus cubecl's reserved bytes, products by
/// hpo-burn's table (the default): median 0.54 GiB (575 MB; 558-588 MB) over
/// 51 trials of one call on an NVIDIA H200 (driver 580.159.04, CUDA 13.0;
/// book: "Parallel trials on one GPU"); earlier calls 555-560 MB, the
/// constant until then (560 MB).
pub const CUDA_CONTEXT_BYTES: u64 = 575_000_000;

/// [`CUDA_CONTEXT_BYTES`] with cuBLAS loaded for the products
/// (`HPO_CUDA_MATMUL=cublas`): median 0.60 GiB (642 MB; 625-654 MB) over 30
/// trials of the next call on the same card.
pub const CUDA_CONTEXT_BYTES_CUBLAS: u64 = 640_000_000;

/// The context a CUDA worker of this process's environment holds:
/// [`CUDA_CONTEXT_BYTES_CUBLAS`] where `HPO_CUDA_MATMUL=cublas` (workers
/// inherit the coordinator's environment), else [`CUDA_CONTEXT_BYTES`].
pub fn cuda_context_bytes() -> u64 {
    if crate::model::matmul::requested_kernel() == crate::model::matmul::Kernel::Cublas {
        CUDA_CONTEXT_BYTES_CUBLAS
    } else {
        CUDA_CONTEXT_BYTES
    }
}

impl Sizing {
    /// The sizing of `spec` run on `task` (as [`crate::run`] would run it):
    /// the model's name as family, f32 training, sized for the longest batch
    /// the run will really see (`max_len`, or the task's longest training
    /// example when that is shorter: batches are padded to their own
    /// longest sequence, so a study on tweets at `max_len` 384 never holds
    /// activations for 384 tokens).
    pub fn of_run(task: &TextTask, spec: &RunSpec) -> Result<Self> {
        let model = spec.model_config(task);
        let micro = u32::try_from(spec.train.micro_batch)
            .ok()
            .filter(|&m| m > 0);
        let accumulation = u32::try_from(spec.train.accumulation)
            .ok()
            .filter(|&a| a > 0);
        let (Some(micro), Some(accumulation)) = (micro, accumulation) else {
            return Err(Error::config(format!(
                "micro-batch {} and accumulation {} must be positive and below 2^32",
                spec.train.micro_batch, spec.train.accumulation
            )));
        };
        Ok(Sizing {
            family: spec.model_name(task),
            max_len: spec
                .train
                .max_len
                .min(model.max_len())
                .min(task.longest_train_tokens()?.max(1)),
            model,
            batch: Batch::new(micro, accumulation).with_recompute(spec.train.recompute),
            precision: Precision::F32,
            calibration: 1.0,
            step_time: Some(StepTime::MEASURED_CPU),
        })
    }

    /// The same sizing with `step_time` (`None`: no recomputation offered).
    pub fn timed(mut self, step_time: Option<StepTime>) -> Self {
        self.step_time = step_time;
        self
    }

    /// Time per example at `batch`, relative, or `None` when `batch`
    /// recomputes and this sizing offers no recomputation.
    pub fn relative_time(&self, batch: Batch) -> Option<f64> {
        match self.step_time {
            Some(t) => Some(t.per_example(batch, self.max_len)),
            None => (!batch.recompute).then_some(1.0),
        }
    }

    /// The same sizing with the backend's measured calibration (for
    /// burn-cuda f32: [`BURN_CUDA_F32_CALIBRATION`]); factors that are not
    /// finite and positive leave it as it was.
    pub fn calibrated(mut self, factor: f64) -> Self {
        if factor.is_finite() && factor > 0.0 {
            self.calibration = factor;
        }
        self
    }

    /// Estimated peak device memory at `batch` (its micro-batch and whether
    /// it recomputes), times the calibration.
    pub fn peak_bytes(&self, batch: Batch) -> u64 {
        let analytic = estimate_training_memory_with(
            &self.model,
            batch.micro as usize,
            self.max_len,
            self.precision,
            batch.recompute,
        )
        .total();
        (analytic as f64 * self.calibration).round() as u64
    }
}

type Propose = dyn Fn(&mut Trial) -> Result<Sizing, TrialError> + Send + Sync;

/// A [`MemoryEstimator`] for hpo-burn training runs.
///
/// ```no_run
/// # use hpo_burn::{Preset, Pooling, RunSpec, TextTask, TrainConfig};
/// use hpo_burn::estimator::{Sizing, TrainingEstimator};
/// # fn make(task: std::sync::Arc<TextTask>) -> TrainingEstimator {
/// // The same sampling the objective does, ending in the run's sizing.
/// TrainingEstimator::new(move |trial| {
///     let batch = trial.suggest_categorical("batch", &[8i64, 16, 32])? as usize;
///     let spec = RunSpec {
///         preset: Preset::Mini,
///         head_layers: 0,
///         head_width: 128,
///         dropout: 0.1,
///         pooling: Pooling::Mean,
///         train: TrainConfig { micro_batch: batch, ..TrainConfig::default() },
///     };
///     Ok(Sizing::of_run(&task, &spec)?)
/// })
/// # }
/// ```
///
/// The executor calls [`MemoryEstimator::peak_bytes`] with the parameters of
/// a trial it has just proposed; the sizings of the last
/// [`TrainingEstimator::REMEMBERED`] proposals are kept for that. Parameters
/// it never proposed are priced at `u64::MAX` bytes, so such a trial is
/// refused as infeasible instead of being admitted blind.
pub struct TrainingEstimator {
    propose: Box<Propose>,
    sized: Mutex<VecDeque<(BTreeMap<String, ParamValue>, Sizing)>>,
}

impl std::fmt::Debug for TrainingEstimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrainingEstimator").finish_non_exhaustive()
    }
}

impl TrainingEstimator {
    /// Proposals whose sizing is remembered.
    pub const REMEMBERED: usize = 1024;

    /// An estimator that draws each trial's configuration with `propose`.
    pub fn new(
        propose: impl Fn(&mut Trial) -> Result<Sizing, TrialError> + Send + Sync + 'static,
    ) -> Self {
        TrainingEstimator {
            propose: Box::new(propose),
            sized: Mutex::new(VecDeque::new()),
        }
    }

    /// The sizing proposed for `params`, if remembered.
    pub fn sizing(&self, params: &BTreeMap<String, ParamValue>) -> Option<Sizing> {
        let sized = self.sized.lock().ok()?;
        sized
            .iter()
            .rev()
            .find(|(p, _)| p == params)
            .map(|(_, s)| s.clone())
    }
}

impl MemoryEstimator for TrainingEstimator {
    fn propose(&self, trial: &mut Trial) -> Result<Shape, TrialError> {
        let sizing = (self.propose)(trial)?;
        let shape = Shape::new(sizing.family.clone(), sizing.batch);
        if let Ok(mut sized) = self.sized.lock() {
            sized.push_back((trial.params(), sizing));
            while sized.len() > Self::REMEMBERED {
                sized.pop_front();
            }
        }
        Ok(shape)
    }

    fn peak_bytes(&self, params: &BTreeMap<String, ParamValue>, batch: Batch) -> u64 {
        self.sizing(params)
            .map_or(u64::MAX, |sizing| sizing.peak_bytes(batch))
    }

    fn relative_time(&self, params: &BTreeMap<String, ParamValue>, batch: Batch) -> Option<f64> {
        self.sizing(params)?.relative_time(batch)
    }
}

/// The memory budget of CUDA device `index`: its total from NVML, capped at
/// `cap` when given (to reproduce a smaller card on a bigger one). Without
/// NVML (built without `cuda`, no driver) the budget is `cap`, and an error
/// says so when there is none.
pub fn device_budget(index: u32, cap: Option<u64>) -> Result<u64> {
    match (device_memory(index), cap) {
        (Ok(mem), Some(cap)) => Ok(mem.total.min(cap)),
        (Ok(mem), None) => Ok(mem.total),
        (Err(_), Some(cap)) => Ok(cap),
        (Err(e), None) => Err(Error::Device(format!(
            "no memory budget for GPU {index}: its total is unknown ({e}); give one \
             (for example 24GiB)"
        ))),
    }
}

/// The memory budget of the machine itself (trials on the CPU): its total
/// memory, or its control group's limit when that is smaller, capped at
/// `cap` when given ([`hpo_core::executor::host_budget`]).
pub fn host_budget(cap: Option<u64>) -> Result<u64> {
    hpo_core::executor::host_budget(cap).map_err(|e| Error::Device(e.to_string()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::memory::estimate_training_memory;
    use crate::model::Preset;
    use hpo_core::executor::GIB;
    use hpo_core::{RandomSampler, Study};

    /// What the executor tries first when `sizing` does not fit at
    /// micro-batch `micro` (no accumulation): the micro-batch and whether
    /// it recomputes.
    pub(crate) fn first_fallback(sizing: &Sizing, micro: u32) -> (u32, bool) {
        let o =
            hpo_core::executor::fit_options(Batch::new(micro, 1), 1, |b| sizing.relative_time(b));
        (o[1].micro, o[1].recompute)
    }

    fn sizing(preset: Preset, micro: u32) -> Sizing {
        Sizing {
            family: preset.name().to_owned(),
            model: ModelConfig::preset(preset, 30522, 2),
            max_len: 128,
            batch: Batch::new(micro, 1),
            precision: Precision::F32,
            calibration: 1.0,
            step_time: Some(StepTime {
                pass_tokens: 512.0,
                recompute_factor: 1.3,
            }),
        }
    }

    fn estimator() -> TrainingEstimator {
        TrainingEstimator::new(|trial| {
            let large = trial.suggest_categorical("model", &["base", "large"])? == "large";
            let micro = trial.suggest_categorical("batch", &[8i64, 32])?;
            let preset = if large { Preset::Large } else { Preset::Base };
            Ok(sizing(preset, micro as u32))
        })
    }

    #[test]
    fn proposes_the_family_and_batch_and_prices_every_micro_batch() {
        let e = estimator();
        let study = Study::builder()
            .sampler(RandomSampler::seeded(3))
            .build()
            .unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..12 {
            let mut trial = study.ask().unwrap();
            let shape = e.propose(&mut trial).unwrap();
            seen.insert(shape.family.clone());
            let params = trial.params();
            let s = e.sizing(&params).unwrap();
            assert_eq!(shape.batch, s.batch);
            // The price is the analytic estimate at the micro-batch asked
            // about: shrinking lowers it, accumulation does not count.
            let full = e.peak_bytes(&params, shape.batch);
            assert_eq!(
                full,
                estimate_training_memory(&s.model, s.batch.micro as usize, 128, Precision::F32)
                    .total()
            );
            let half = Batch::new(shape.batch.micro / 2, shape.batch.accumulation * 2);
            assert!(e.peak_bytes(&params, half) < full);
            assert_eq!(
                e.peak_bytes(&params, half),
                e.peak_bytes(&params, Batch::new(half.micro, 64))
            );
            study.tell(trial, Ok::<f64, TrialError>(0.0)).unwrap();
        }
        assert_eq!(seen.len(), 2, "both models proposed: {seen:?}");
        // Families are the model names, so the correction is per model.
        let base = sizing(Preset::Base, 8);
        let large = sizing(Preset::Large, 8);
        assert_ne!(base.family, large.family);
        assert!(large.peak_bytes(base.batch) > base.peak_bytes(base.batch));
    }

    #[test]
    fn recomputation_is_priced_in_memory_and_time_and_can_be_withheld() {
        let s = sizing(Preset::Large, 32);
        let (kept, again) = (Batch::new(32, 1), Batch::new(32, 1).with_recompute(true));
        assert!(s.peak_bytes(again) < s.peak_bytes(kept));
        // 512 tokens per pass against 4,096 per pass: 1.125; x 1.3 recomputed.
        assert!((s.relative_time(kept).unwrap() - 1.125).abs() < 1e-12);
        assert!((s.relative_time(again).unwrap() - 1.4625).abs() < 1e-12);
        // Halving to 16 (1.25) is faster than recomputing at 32 (1.46);
        // halving again to 8 (1.5) is not.
        let options = hpo_core::executor::fit_options(kept, 1, |b| s.relative_time(b));
        let order: Vec<(u32, bool)> = options.iter().map(|b| (b.micro, b.recompute)).collect();
        assert_eq!(
            &order[..4],
            &[(32, false), (16, false), (32, true), (8, false)]
        );
        // With the CPU's measured figures at 128 tokens: halving 4 -> 2
        // (512 -> 256 tokens a pass) costs 1.23x, less than recomputation;
        // halving 2 -> 1 costs 1.38x, more.
        let cpu = s.clone().timed(Some(StepTime::MEASURED_CPU));
        assert_eq!(first_fallback(&cpu, 4), (2, false));
        assert_eq!(first_fallback(&cpu, 2), (2, true));
        // With the H200's: a pass's fixed cost is 2,970 tokens, so from
        // 32 x 512 (16,384 tokens) halving to 16 costs 1.15x and is taken
        // first; from 16 x 512, halving to 8 (1.27x) still beats
        // recomputing (1.33x); from 8 x 512 (4,096 tokens, under the
        // ~6,200-token crossover) recomputing comes first.
        let gpu = sizing(Preset::Large, 32).timed(Some(StepTime::MEASURED_CUDA));
        let gpu = Sizing {
            max_len: 512,
            ..gpu
        };
        assert_eq!(first_fallback(&gpu, 32), (16, false));
        assert_eq!(first_fallback(&gpu, 16), (8, false));
        assert_eq!(first_fallback(&gpu, 8), (8, true));
        let plain = s.clone().timed(None);
        assert_eq!(plain.relative_time(again), None);
        assert_eq!(plain.relative_time(kept), Some(1.0));
    }

    #[test]
    fn the_calibration_scales_the_price() {
        let plain = sizing(Preset::Base, 16);
        let b = plain.batch;
        let cal = plain.clone().calibrated(BURN_CUDA_F32_CALIBRATION);
        let ratio = cal.peak_bytes(b) as f64 / plain.peak_bytes(b) as f64;
        assert!((ratio - BURN_CUDA_F32_CALIBRATION).abs() < 1e-6, "{ratio}");
        // Nonsense leaves it alone.
        assert_eq!(plain.clone().calibrated(f64::NAN).calibration, 1.0);
        assert_eq!(plain.calibrated(-2.0).calibration, 1.0);
    }

    #[test]
    fn a_run_is_sized_for_its_longest_real_example() {
        use crate::data::{Dataset, Example, Text};
        use crate::task::{RunSpec, TextTask};
        use crate::train::TrainConfig;
        let ex = |t: &str, label| Example {
            text: Text::Single(t.into()),
            label,
        };
        let train = Dataset {
            examples: (0..20)
                .map(|i| ex(&"word ".repeat(3 + i % 5), i % 2))
                .collect(),
            classes: vec!["a".into(), "b".into()],
        };
        let valid = Dataset {
            examples: vec![ex("word word", 0), ex("word", 1)],
            classes: train.classes.clone(),
        };
        let task = TextTask::new(train, valid, None, 200).unwrap();
        let longest = task.longest_train_tokens().unwrap();
        // Seven words and [CLS]/[SEP], give or take the vocabulary's pieces.
        assert!((9..=16).contains(&longest), "{longest}");
        let spec = |max_len| RunSpec {
            preset: Preset::Tiny,
            head_layers: 0,
            head_width: 64,
            dropout: 0.1,
            pooling: crate::model::Pooling::Mean,
            train: TrainConfig {
                max_len,
                ..TrainConfig::default()
            },
        };
        assert_eq!(Sizing::of_run(&task, &spec(384)).unwrap().max_len, longest);
        assert_eq!(Sizing::of_run(&task, &spec(8)).unwrap().max_len, 8);
    }

    #[test]
    fn parameters_never_proposed_are_refused_not_admitted_blind() {
        let e = estimator();
        let mut params = BTreeMap::new();
        params.insert("model".to_owned(), ParamValue::from("base"));
        assert_eq!(e.peak_bytes(&params, Batch::new(8, 1)), u64::MAX);
    }

    #[test]
    fn a_sampling_error_fails_the_proposal() {
        let e = TrainingEstimator::new(|_| Err(TrialError::Infeasible("empty".into())));
        let study = Study::builder().build().unwrap();
        let mut trial = study.ask().unwrap();
        assert_eq!(
            e.propose(&mut trial),
            Err(TrialError::Infeasible("empty".into()))
        );
    }

    #[test]
    fn budgets_are_capped_by_the_given_number() {
        assert_eq!(host_budget(Some(GIB)).unwrap(), GIB);
        assert!(
            host_budget(None).unwrap() > GIB / 4,
            "a machine with memory"
        );
        assert!(device_budget(0, Some(24 * GIB)).unwrap() <= 24 * GIB);
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn without_nvml_a_gpu_budget_must_be_given() {
        assert_eq!(device_budget(0, Some(24 * GIB)).unwrap(), 24 * GIB);
        let e = device_budget(0, None).unwrap_err().to_string();
        assert!(
            e.contains("no memory budget for GPU 0") && e.contains("24GiB"),
            "{e}"
        );
    }
}
