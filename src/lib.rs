//! # hpo
//!
//! Hyperparameter search for GPU deep-learning training that does not fall over.
//!
//! This is the facade crate: it re-exports [`hpo_core`] (studies, trials,
//! samplers, pruners, storages) and the `#[search_space]` macro of
//! `hpo-macros`, which turns a plain struct into a typed, compile-time checked
//! search space.
//!
//! ```
//! use hpo::{Direction, Study};
//!
//! # fn main() -> hpo::Result<()> {
//! let study = Study::builder().direction(Direction::Minimize).build()?;
//! study.optimize(20, |trial| {
//!     let x = trial.suggest_float("x", -10.0, 10.0)?;
//!     Ok((x - 2.0).powi(2))
//! })?;
//! println!("best: {:?}", study.best_params()?);
//! # Ok(())
//! # }
//! ```
//!
//! ## Typed search spaces
//!
//! ```
//! use hpo::{Direction, SearchSpace, Study};
//!
//! #[hpo::search_space]
//! #[constraint(if layers > 2 { width <= 256 })]
//! #[derive(Debug, Clone, PartialEq)]
//! struct Net {
//!     #[param(float(1e-5..=1e-1, log))]
//!     lr: f64,
//!     #[param(int(1..=4))]
//!     layers: u32,
//!     #[param(choice(64, 128, 256, 512))]
//!     width: usize,
//! }
//!
//! # fn main() -> hpo::Result<()> {
//! let study = Study::builder().direction(Direction::Minimize).build()?;
//! study.optimize(20, |trial| {
//!     let net = Net::sample(trial)?;
//!     assert!(net.layers <= 2 || net.width <= 256);
//!     Ok(net.lr * net.width as f64)
//! })?;
//! let best = Net::from_params(&study.best_trial()?.params())?;
//! println!("{}\nbest: {best:?}", Net::describe());
//! # Ok(())
//! # }
//! ```
//!
//! ## Features
//!
//! | feature | what it adds |
//! | --- | --- |
//! | `cli` (default) | [`cli`]: an experiment's study flags and the one call that runs them; the `hpo` command |
//! | `burn` | the burn training backend, as `hpo::burn` |
//! | `cuda` | burn's CUDA backend (implies `burn`) |
//! | `postgres` | `hpo::storage::PostgresStorage`: one study across many machines in a PostgreSQL database, in Optuna's schema (`postgresql://` URLs) |
//! | `postgres-tls` | TLS to the PostgreSQL server (`sslmode=require`, `verify-full`) |
//! | `mlflow` | `hpo::tracking::Mlflow`: the study and each trial logged to an MLflow tracking server (`--mlflow URL`; implies `cli`) |

pub use hpo_core::*;
pub use hpo_macros::{search_space, Choice};

#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "progress")]
pub mod progress;
#[cfg(feature = "mlflow")]
pub mod tracking;

/// The burn training backend: BERT-style classifiers, memory estimates and
/// OOM recovery (feature `burn`; `cuda` adds the GPU backend).
#[cfg(feature = "burn")]
pub use hpo_burn as burn;

/// Paths used by code that `hpo` macros generate. Not public API.
#[doc(hidden)]
pub mod __private {
    pub use hpo_core;
    pub use hpo_core::space::runtime;
    pub use hpo_core::{
        Choice, ChoiceEnum, Error, ParamValue, SearchSpace, SpaceDescription, Trial, TrialError,
    };
    pub use std::collections::BTreeMap;
    pub use std::option::Option;
    pub use std::result::Result;
    pub use std::string::String;
    pub use std::vec::Vec;
}
