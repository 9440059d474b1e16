//! How an objective says a trial did not complete.

use serde_json::Value;
use std::fmt;

/// The non-success outcomes of an objective.
///
/// Any `std::error::Error` converts into [`TrialError::Failed`], so `?` works
/// inside objectives. `TrialError` deliberately does not implement
/// `std::error::Error` itself (as `anyhow::Error` does not), which is what makes
/// that blanket conversion possible.
#[derive(Debug, Clone, PartialEq)]
pub enum TrialError {
    /// The pruner asked the trial to stop; it is stored PRUNED.
    Pruned,
    /// The configuration did not fit in device memory even after recovery.
    /// Stored FAIL with `oom_config`; samplers treat it as a constraint violation.
    Oom {
        /// The configuration that did not fit (model, batch, accumulation, length, ...).
        config: Value,
        /// What ran out.
        message: String,
    },
    /// The configuration is infeasible (for example, an empty support under a
    /// constraint). Stored FAIL; samplers treat it as a constraint violation.
    Infeasible(String),
    /// Any other failure, with its message. Stored FAIL.
    Failed(String),
}

impl TrialError {
    /// A [`TrialError::Failed`] from anything displayable (handy with `map_err`).
    pub fn failed(e: impl fmt::Display) -> Self {
        TrialError::Failed(e.to_string())
    }
}

impl fmt::Display for TrialError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrialError::Pruned => write!(f, "pruned"),
            TrialError::Oom { message, config } => {
                write!(f, "out of memory: {message} (config {config})")
            }
            TrialError::Infeasible(m) => write!(f, "infeasible: {m}"),
            TrialError::Failed(m) => write!(f, "failed: {m}"),
        }
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for TrialError {
    fn from(e: E) -> Self {
        // Walk the source chain so the stored reason is complete.
        let mut msg = e.to_string();
        let mut src = e.source();
        while let Some(s) = src {
            msg.push_str(": ");
            msg.push_str(&s.to_string());
            src = s.source();
        }
        // Errors that carry their own trial outcome keep it: anywhere in the
        // chain, a `TrialOutcome` (how other crates' errors say "pruned" or
        // "out of memory") or hpo-core's own empty-support error.
        let mut link: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(err) = link {
            if let Some(outcome) = err.downcast_ref::<TrialOutcome>() {
                return outcome.0.clone();
            }
            if let Some(crate::Error::EmptySupport { .. }) = err.downcast_ref::<crate::Error>() {
                return TrialError::Infeasible(msg);
            }
            link = err.source();
        }
        TrialError::Failed(msg)
    }
}

/// A [`TrialError`] that can stand in an error's source chain.
///
/// `TrialError` itself is not a `std::error::Error` (that is what lets every
/// error convert into it with `?`), so a library whose errors mean "pruned"
/// or "out of memory" puts a `TrialOutcome` in their source chain:
///
/// ```
/// use hpo_core::{TrialError, TrialOutcome};
///
/// #[derive(Debug, thiserror::Error)]
/// #[error("stopped by the pruner after epoch {epoch}")]
/// struct Stopped {
///     epoch: u64,
///     #[source]
///     outcome: TrialOutcome,
/// }
///
/// let e = Stopped { epoch: 3, outcome: TrialOutcome(TrialError::Pruned) };
/// // `?` in an objective performs this conversion.
/// assert_eq!(TrialError::from(e), TrialError::Pruned);
/// ```
///
/// The blanket conversion looks through the whole chain, so the outcome
/// survives wrapping by other error types too.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialOutcome(pub TrialError);

impl fmt::Display for TrialOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl std::error::Error for TrialOutcome {}

/// What an objective may return: one value, several values, or a [`TrialError`].
///
/// Implemented for `f64` and for `Result<V, TrialError>` where `V` is `f64`,
/// `Vec<f64>` or `[f64; N]`. The error type is fixed on purpose: an objective
/// closure that ends in `Ok(loss)` then needs no annotation, because
/// `Result<f64, _>` matches exactly one implementation and the compiler takes
/// `TrialError` from it; `?` inside converts any `std::error::Error` (hpo's
/// own errors included) through `From`.
///
/// ```
/// # use hpo_core::{Study, Trial, TrialError};
/// # fn main() -> hpo_core::Result<()> {
/// let study = Study::builder().build()?;
/// study.optimize(3, |trial| {
///     let x = trial.suggest_float("x", -1.0, 1.0)?;
///     Ok(x * x)
/// })?;
/// // A named function spells the same type out.
/// fn objective(trial: &mut Trial) -> Result<f64, TrialError> {
///     let x = trial.suggest_float("x", -1.0, 1.0)?;
///     Ok(x * x)
/// }
/// study.optimize(3, objective)?;
/// # Ok(())
/// # }
/// ```
///
/// A function that returns another error type (`anyhow::Result<f64>`, a
/// crate's own `Result`) is passed as `|t| Ok(objective(t)?)`, or declared to
/// return `Result<f64, TrialError>`. Implementing this trait for
/// `Result<f64, E>` with any other `E` would make the error type of every
/// `Ok(loss)` objective ambiguous again, so there is one implementation per
/// value type. (`anyhow::Error` cannot convert with `?` at all: it is not a
/// `std::error::Error`, and `From<anyhow::Error>` would overlap the blanket
/// conversion; use `.map_err(TrialError::failed)`.)
#[diagnostic::on_unimplemented(
    message = "an objective returns `f64` or `Result<V, TrialError>` (V: f64, Vec<f64>, [f64; N]), not `{Self}`",
    label = "this objective's result",
    note = "declare the function `-> Result<f64, TrialError>`, or pass `|t| Ok(f(t)?)`: `?` converts any `std::error::Error` into `TrialError`"
)]
pub trait IntoTrialResult {
    /// Converts into objective values or a [`TrialError`].
    fn into_trial_result(self) -> Result<Vec<f64>, TrialError>;
}

impl IntoTrialResult for f64 {
    fn into_trial_result(self) -> Result<Vec<f64>, TrialError> {
        Ok(vec![self])
    }
}

impl IntoTrialResult for Result<f64, TrialError> {
    fn into_trial_result(self) -> Result<Vec<f64>, TrialError> {
        self.map(|v| vec![v])
    }
}

impl IntoTrialResult for Result<Vec<f64>, TrialError> {
    fn into_trial_result(self) -> Result<Vec<f64>, TrialError> {
        self
    }
}

impl<const N: usize> IntoTrialResult for Result<[f64; N], TrialError> {
    fn into_trial_result(self) -> Result<Vec<f64>, TrialError> {
        self.map(|v| v.to_vec())
    }
}
