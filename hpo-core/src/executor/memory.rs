//! Where the process executor's memory budget comes from: the machine's
//! memory (trials on the CPU) or one GPU's (trials on a device).

use super::coordinator::ProcessConfig;
use super::host::host_budget;
use crate::error::{Error, Result};

/// The memory worker processes are admitted by, as an experiment knows it;
/// [`Memory::apply`] turns it into a [`ProcessConfig`]'s budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Memory {
    /// Trials run on the CPU: the budget is the machine's memory (its
    /// control group's limit in a container), and a worker's peak resident
    /// memory teaches the executor's correction.
    Host,
    /// Trials run on one GPU.
    Device {
        /// The device's total memory (NVML), when known.
        total: Option<u64>,
        /// What `CUDA_VISIBLE_DEVICES` says to a worker to give it this
        /// device.
        visible: String,
        /// Device memory each worker process costs before its trial
        /// allocates anything (a CUDA context).
        context: u64,
        /// Bytes of the device kept free.
        headroom: u64,
    },
}

impl Memory {
    /// The budget: the machine's or the device's total, capped at `cap`
    /// (a user's `--memory-budget`); `cap` alone when the total is unknown.
    pub fn budget(&self, cap: Option<u64>) -> Result<u64> {
        match self {
            Memory::Host => host_budget(cap),
            Memory::Device { total, visible, .. } => match (total, cap) {
                (Some(t), Some(c)) => Ok((*t).min(c)),
                (Some(t), None) => Ok(*t),
                (None, Some(c)) => Ok(c),
                (None, None) => Err(Error::InvalidConfig(format!(
                    "no memory budget for GPU {visible}: its total is unknown (no NVML); \
                     give one (for example 24GiB)"
                ))),
            },
        }
    }

    /// `config` with this memory's budget (capped at `cap`) and settings.
    pub fn apply(&self, config: ProcessConfig, cap: Option<u64>) -> Result<ProcessConfig> {
        let budget = self.budget(cap)?;
        Ok(match self {
            Memory::Host => config.budget(budget).host_memory(true),
            Memory::Device {
                visible,
                context,
                headroom,
                ..
            } => config
                .budget(budget)
                .visible_devices([visible.clone()])
                .context(*context)
                .headroom(*headroom),
        })
    }

    /// Whether trials run on the CPU.
    pub fn is_host(&self) -> bool {
        matches!(self, Memory::Host)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::executor::GIB;

    #[test]
    fn a_device_budget_is_its_total_capped_or_the_cap_alone() {
        let device = |total| Memory::Device {
            total,
            visible: "3".into(),
            context: GIB / 2,
            headroom: GIB / 2,
        };
        assert_eq!(
            device(Some(80 * GIB)).budget(Some(24 * GIB)).unwrap(),
            24 * GIB
        );
        assert_eq!(
            device(Some(16 * GIB)).budget(Some(24 * GIB)).unwrap(),
            16 * GIB
        );
        assert_eq!(device(Some(80 * GIB)).budget(None).unwrap(), 80 * GIB);
        assert_eq!(device(None).budget(Some(GIB)).unwrap(), GIB);
        let e = device(None).budget(None).unwrap_err().to_string();
        assert!(e.contains("no memory budget for GPU 3"), "{e}");
        assert_eq!(Memory::Host.budget(Some(GIB)).unwrap(), GIB);
        assert!(Memory::Host.is_host() && !device(None).is_host());
    }
}
