//! Gaussian-process Bayesian optimisation, after Optuna 5.0's `GPSampler`.
//!
//! A GPU fine-tuning trial costs minutes to hours, so most real studies end
//! after 20-100 trials; there a Gaussian process, which models how the loss
//! varies with every parameter at once and knows where it is unsure, finds
//! good configurations in fewer trials than TPE on numeric spaces. The
//! module follows Optuna's design (`optuna/_gp/`), one concept per file:
//!
//! * `space` — parameters as coordinates of the unit cube;
//! * `kernel` — Matérn-5/2 with a lengthscale per parameter, Hamming distance
//!   for categoricals (the file says why), and the covariances of a point
//!   with many, vectorised over points stored by coordinate;
//! * `exp` — the exponential as plain arithmetic, so that those loops
//!   vectorise and give the same bits on every machine;
//! * `linalg` — the Cholesky factor, grown one row per observation, with
//!   jitter instead of a panic;
//! * `fit` — the hyperparameters: maximum a posteriori under Optuna's priors;
//! * `lbfgs` — the quasi-Newton method used for the fit and the acquisition;
//! * `model` — the posterior and its gradient, and the believer copy for
//!   trials in flight;
//! * `acquisition` — log expected improvement times the probability of
//!   feasibility, computed stably in the tails;
//! * `search` — multi-start local search over mixed spaces;
//! * `wide` — the hot kernels (the triangular solves, the covariances, the
//!   posterior at many points) compiled for AVX2 and AVX-512 too, picked at
//!   run time, with the same results bit for bit;
//! * `config` ([`GpConfig`]) and `sampler` ([`GpSampler`]).
//!
//! ## Where it differs from Optuna
//!
//! * **Failures as constraints.** Optuna's constrained GP reads constraint
//!   values that users set and ignores failed trials; hpo also learns from
//!   trials that failed (out of memory, infeasible, a diverged loss, a panic;
//!   not a worker that stopped sending heartbeats), which have no value at
//!   all. All of them train one feasibility model (label +1 feasible, -1 not,
//!   standardised), the acquisition adds `log P(feasible)` as Optuna's
//!   `LogCEI` does per constraint, and a failed trial enters the objective's
//!   model at the worst value seen.
//! * **Pruned trials** count, with their last reported value capped at the
//!   median COMPLETE trial's (Optuna ignores them; under Hyperband most
//!   trials are pruned).
//! * **Trials in flight**: the Kriging believer (the model's own mean taken
//!   as their value) instead of Optuna's Monte Carlo `qLogEI`: one extra row
//!   per running trial, no sampling.
//! * **Cost**: the kernel is refitted every trial only while the history is
//!   short, then on a schedule, warm-started; between fits the factor grows
//!   by a row per trial. Proposals depend only on the seed, the trial's
//!   number and the history (the fitted kernel is recorded on each trial), so
//!   a resumed study continues exactly.

mod acquisition;
mod config;
mod exp;
mod fit;
mod kernel;
mod lbfgs;
mod linalg;
mod model;
mod sampler;
mod search;
mod space;
mod wide;

pub use self::config::GpConfig;
pub use self::sampler::GpSampler;
