//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong in `hpo-burn` outside of a trial's outcome.
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
    /// A model or training configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The device ran out of memory (real allocation failure or the simulated
    /// budget); the OOM ladder turns this into retries or `TrialError::Oom`.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// The device is unusable for the rest of this process (for example a
    /// CUDA device-side assert); the trial fails with this cause.
    #[error("device failure: {0}")]
    Device(String),
    /// Training produced a non-finite loss.
    #[error("training diverged: {0}")]
    Diverged(String),
    /// The pruner stopped the run after `epoch`.
    #[error("pruned after epoch {epoch}")]
    Pruned {
        /// The last epoch reported.
        epoch: u64,
    },
    /// Out of memory even at the smallest allowed micro-batch.
    #[error("out of memory at the smallest micro-batch ({} x {} tokens): {message}", config.batch, config.max_len)]
    OomExhausted {
        /// What did not fit.
        config: crate::oom::OomConfig,
        /// The last out-of-memory message.
        message: String,
    },
    /// Recording on the trial failed (a storage error from hpo-core).
    #[error(transparent)]
    Core(#[from] hpo_core::Error),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// The trial outcome this error stands for: `Pruned` → `TrialError::Pruned`,
    /// `OomExhausted` → `TrialError::Oom` with the config as JSON (a
    /// constraint violation for the sampler), anything else →
    /// `TrialError::Failed` with the message.
    pub fn into_trial_error(self) -> hpo_core::TrialError {
        use hpo_core::TrialError;
        match self {
            Error::Pruned { .. } => TrialError::Pruned,
            Error::OomExhausted { config, message } => TrialError::Oom {
                config: serde_json::to_value(&config).unwrap_or(serde_json::Value::Null),
                message,
            },
            other => TrialError::Failed(other.to_string()),
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
