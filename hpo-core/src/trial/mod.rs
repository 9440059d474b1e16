//! Trials: the live handle an objective gets ([`Trial`]), the stored record
//! ([`FrozenTrial`]), states and outcomes.

mod error;
mod frozen;
mod live;
mod state;

pub use self::error::{IntoTrialResult, TrialError, TrialOutcome};
pub use self::frozen::FrozenTrial;
pub(crate) use self::live::attr_json;
pub use self::live::Trial;
pub use self::state::{FailureKind, TrialState};
