//! Trials as data: the stored record ([`FrozenTrial`]), states, outcomes
//! ([`TrialError`], [`TrialOutcome`]) and Optuna's system-attribute keys. The
//! live handle an objective gets, [`crate::Trial`], belongs to the study
//! (`study/`), which sits above this module.

mod attrs;
mod error;
mod frozen;
mod snapshot;
mod state;

pub use self::attrs::{
    FAILED_TRIAL_ATTR, FIXED_PARAMS_ATTR, RELATIVE_SAMPLE_ATTR, RETRY_HISTORY_ATTR,
};
pub use self::error::{IntoTrialResult, TrialError, TrialOutcome};
pub use self::frozen::FrozenTrial;
pub use self::snapshot::{SettledTrials, TrialSnapshot};
pub use self::state::{FailureKind, TrialState};
