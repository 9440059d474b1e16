//! # hpo
//!
//! Hyperparameter search for GPU deep-learning training that does not fall over.
//!
//! This is the facade crate: it re-exports [`hpo_core`] (studies, trials,
//! samplers, pruners, storages).
//!
//! ```
//! use hpo::{Direction, Study, TrialError};
//!
//! # fn main() -> hpo::Result<()> {
//! let study = Study::builder().direction(Direction::Minimize).build()?;
//! study.optimize(20, |trial| -> Result<f64, TrialError> {
//!     let x = trial.suggest_float("x", -10.0, 10.0)?;
//!     Ok((x - 2.0).powi(2))
//! })?;
//! println!("best: {:?}", study.best_params()?);
//! # Ok(())
//! # }
//! ```

pub use hpo_core::*;

/// The burn training backend: BERT-style classifiers, memory estimates and
/// OOM recovery (feature `burn`; `cuda` adds the GPU backend).
#[cfg(feature = "burn")]
pub use hpo_burn as burn;

/// Paths used by code that `hpo` macros generate. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use hpo_core;
}
