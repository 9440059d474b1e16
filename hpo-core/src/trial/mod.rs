//! Trials: the live handle an objective gets ([`Trial`]), the stored record
//! ([`FrozenTrial`]), states and outcomes.

mod attrs;
mod error;
mod frozen;
mod state;

pub use self::attrs::{FAILED_TRIAL_ATTR, FIXED_PARAMS_ATTR, RETRY_HISTORY_ATTR};
pub use self::error::{IntoTrialResult, TrialError, TrialOutcome};
pub use self::frozen::FrozenTrial;
pub use self::state::{FailureKind, TrialState};
