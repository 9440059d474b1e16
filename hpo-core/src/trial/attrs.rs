//! Optuna's system-attribute keys that hpo reads and writes on trials.

/// System attribute of an enqueued trial holding its fixed parameters (Optuna's key).
pub const FIXED_PARAMS_ATTR: &str = "fixed_params";

/// System attribute naming the first failed trial of a retry chain (Optuna's key).
pub const FAILED_TRIAL_ATTR: &str = "failed_trial";

/// System attribute listing the numbers of every failed attempt (Optuna's key).
pub const RETRY_HISTORY_ATTR: &str = "retry_history";

/// System attribute (hpo's own) of a trial handed to another process (an
/// executor's worker) holding the joint values its sampler drew when the
/// trial started and nobody has suggested yet: `{name: {"value": internal
/// value, "distribution": Optuna's distribution JSON}}`. The process that
/// continues the trial suggests from it instead of sampling the trial again.
pub const RELATIVE_SAMPLE_ATTR: &str = "hpo:relative_sample";
