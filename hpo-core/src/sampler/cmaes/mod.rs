//! CMA-ES, after Optuna 5.0's `CmaEsSampler` and the `cmaes` library it uses.
//!
//! The module is split by concept:
//!
//! * [`config`](CmaEsConfig) — settings (serde), Optuna's defaults.
//! * `linalg` — symmetric eigen decomposition (Jacobi) and small helpers.
//! * `cma` — CMA-ES with a full covariance, and learning-rate adaptation.
//! * `sep` — separable CMA-ES (diagonal covariance).
//! * `margin` — CMA-ES with margin for integer and stepped parameters.
//! * `warm` — the warm start from an earlier study's good trials.
//! * `exact` — floats stored bit for bit, so a resumed search continues exactly.
//! * `state` — what is stored on trials between generations, and under which keys.
//! * `sampler` — [`CmaEsSampler`], the [`crate::Sampler`] implementation.
//!
//! ## Faithful to Optuna, and where it differs
//!
//! The updates, constants, stopping rules, bounds handling (resample up to
//! `10 n` times, then clip), the `[0, 1]` scaling of every parameter, the
//! initial mean (the box's centre) and step size (1/6), the intersection
//! search space and the attribute keys are Optuna's. Differences:
//!
//! * the state is stored as JSON, not as a pickled Python object, so an
//!   Optuna study's CMA-ES state cannot be continued here (nor the reverse);
//! * each trial's draws come from a stream derived from the seed and the
//!   trial's number (see `stream`), so proposals are reproducible across
//!   processes; Optuna reseeds from a per-process generator;
//! * IPOP restarts, removed from Optuna in 4.4, are kept as an option
//!   ([`CmaEsConfig::ipop`]), with a generation counter that runs on across
//!   restarts;
//! * a warm start with fewer than ten source trials uses the best one, where
//!   `cmaes` fails.

mod cma;
mod config;
mod exact;
mod linalg;
mod margin;
mod sampler;
mod sep;
mod state;
mod warm;

pub use self::config::CmaEsConfig;
pub use self::sampler::CmaEsSampler;
