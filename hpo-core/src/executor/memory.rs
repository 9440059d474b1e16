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

    /// `config` with this memory on each of `gpus` (a node's GPUs, as
    /// [`node_gpus`](super::node_gpus) lists them): one budget per GPU, each
    /// that of this device (capped at `cap`), the GPUs of one node being
    /// alike. Trials on the CPU are refused: there is one host.
    pub fn apply_on_gpus(
        &self,
        config: ProcessConfig,
        cap: Option<u64>,
        gpus: &[String],
    ) -> Result<ProcessConfig> {
        let budget = self.budget(cap)?;
        match self {
            Memory::Host => Err(Error::InvalidConfig(
                "trials run on the CPU here, so there are no GPUs to spread them over; \
                 leave out `--all-gpus`, or run the experiment on a GPU"
                    .into(),
            )),
            Memory::Device {
                context, headroom, ..
            } if !gpus.is_empty() => Ok(config
                .devices(vec![budget; gpus.len()])
                .visible_devices(gpus.iter().cloned())
                .context(*context)
                .headroom(*headroom)),
            Memory::Device { .. } => Err(Error::InvalidConfig(
                "no GPU to run trials on: the node's GPU list is empty".into(),
            )),
        }
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

    #[test]
    fn a_node_gets_one_budget_per_gpu_each_named_as_the_scheduler_named_it() {
        let memory = Memory::Device {
            total: Some(80 * GIB),
            visible: "2".into(),
            context: GIB / 2,
            headroom: GIB / 2,
        };
        let gpus = vec!["2".to_owned(), "3".to_owned()];
        struct Fixed;
        impl crate::executor::MemoryEstimator for Fixed {
            fn propose(
                &self,
                _trial: &mut crate::study::Trial,
            ) -> std::result::Result<crate::executor::Shape, crate::TrialError> {
                Ok(crate::executor::Shape::new(
                    "f",
                    crate::executor::Batch::new(1, 1),
                ))
            }
            fn peak_bytes(
                &self,
                _params: &std::collections::BTreeMap<String, crate::ParamValue>,
                _batch: crate::executor::Batch,
            ) -> u64 {
                GIB
            }
        }
        let estimator: std::sync::Arc<dyn crate::executor::MemoryEstimator> =
            std::sync::Arc::new(Fixed);
        let config = memory
            .apply_on_gpus(
                ProcessConfig::new("sqlite:x.db", estimator.clone()),
                Some(24 * GIB),
                &gpus,
            )
            .unwrap();
        let shown = format!("{config:?}");
        assert!(
            shown.contains(&format!("totals: [{}, {}]", 24 * GIB, 24 * GIB)),
            "{shown}"
        );
        assert!(shown.contains(r#"visible_devices: ["2", "3"]"#), "{shown}");
        let e = Memory::Host
            .apply_on_gpus(ProcessConfig::new("sqlite:x.db", estimator), None, &gpus)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no GPUs to spread them over"), "{e}");
    }
}
