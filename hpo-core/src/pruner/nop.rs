//! The pruner that never prunes.

use super::{Decision, Pruner, PrunerConfig};
use crate::error::Result;
use crate::trial::FrozenTrial;
use crate::view::StudyView;

/// Never prunes: every trial runs to the end.
#[derive(Debug, Clone, Copy, Default)]
pub struct NopPruner;

impl Pruner for NopPruner {
    fn prune(&self, _study: &StudyView<'_>, _trial: &FrozenTrial) -> Result<Decision> {
        Ok(Decision::keep())
    }

    fn to_config(&self) -> Option<PrunerConfig> {
        Some(PrunerConfig::Nop)
    }
}
