//! Which device an experiment trains on (`cpu` or `cuda:N`), the backend
//! that goes with it, and the memory its worker processes are admitted by.

use crate::error::Result;
use burn::tensor::backend::AutodiffBackend;
use hpo_core::executor::{Memory, GIB};
use std::fmt;
use std::str::FromStr;

/// `cpu`, or `cuda:N` (feature `cuda`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceArg {
    /// burn's CPU backend ([`crate::Cpu`]).
    #[default]
    Cpu,
    /// CUDA device `N` (`hpo_burn::Cuda`, feature `cuda`).
    Cuda(u32),
}

impl FromStr for DeviceArg {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s.trim() {
            "cpu" => Ok(DeviceArg::Cpu),
            d => match d.strip_prefix("cuda:") {
                Some(n) => n.parse().map(DeviceArg::Cuda).map_err(|_| {
                    format!(
                        "bad device `{d}`: expected cuda:N with N a device index, such as cuda:0"
                    )
                }),
                None => Err(format!("unknown device `{d}`; expected cpu or cuda:N")),
            },
        }
    }
}

impl fmt::Display for DeviceArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceArg::Cpu => write!(f, "cpu"),
            DeviceArg::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

/// Work to run on whichever backend the device needs: the experiment's
/// `main`, written once for every backend.
pub trait OnBackend {
    /// What the work returns.
    type Output;
    /// Runs the work on backend `B`'s `device`.
    fn run<B: AutodiffBackend>(self, device: B::Device) -> Self::Output;
}

impl DeviceArg {
    /// Whether this is the CPU.
    pub fn is_cpu(self) -> bool {
        self == DeviceArg::Cpu
    }

    /// Runs `work` on this device's backend. On CUDA, first checks the
    /// runtime (headers, NVRTC, driver, NVML: one clear error instead of a
    /// panic in every trial's worker) and points every process of the study
    /// at one kernel cache, saying so once (not in worker processes). A
    /// worker process sees only its device (`CUDA_VISIBLE_DEVICES`), which
    /// is device 0 inside it.
    pub fn run<W: OnBackend>(self, work: W) -> Result<W::Output> {
        match self {
            DeviceArg::Cpu => Ok(work.run::<crate::Cpu>(Default::default())),
            #[cfg(feature = "cuda")]
            DeviceArg::Cuda(index) => {
                let index = if hpo_core::executor::is_worker() {
                    0
                } else {
                    index
                };
                let runtime = crate::runtime::check_cuda()?;
                let cache = crate::runtime::configure_kernel_cache();
                if !hpo_core::executor::is_worker() {
                    println!("CUDA runtime: {runtime}");
                    if let Some(dir) = cache {
                        println!("kernel cache: {}", dir.display());
                    }
                }
                let device = burn::backend::cuda::CudaDevice::new(index as usize);
                Ok(work.run::<crate::Cuda>(device))
            }
            #[cfg(not(feature = "cuda"))]
            DeviceArg::Cuda(_) => Err(crate::error::Error::Device(format!(
                "device {self}: rebuild with `--features cuda`"
            ))),
        }
    }

    /// The memory worker processes on this device are admitted by: the
    /// machine's on the CPU; on CUDA the device's total (NVML), the device
    /// as this process's `CUDA_VISIBLE_DEVICES` names it, one CUDA context
    /// per worker process ([`crate::estimator::cuda_context_bytes`]) and
    /// half a GiB kept free.
    pub fn memory(self) -> Result<Memory> {
        match self {
            DeviceArg::Cpu => Ok(Memory::Host),
            DeviceArg::Cuda(index) => Ok(Memory::Device {
                total: crate::memory::device_memory(index).ok().map(|m| m.total),
                visible: crate::nvml::visible_entry(
                    crate::nvml::inherited_visible().as_deref(),
                    index,
                )?,
                context: crate::estimator::cuda_context_bytes(),
                headroom: GIB / 2,
            }),
        }
    }

    /// `sizing` as this device runs it: calibrated
    /// ([`DeviceArg::calibration`]) and priced with the device's measured
    /// step times ([`crate::estimator::StepTime::MEASURED_CPU`] or
    /// [`crate::estimator::StepTime::MEASURED_CUDA`]), which decide whether
    /// the executor halves the micro-batch or recomputes activations first.
    pub fn sized(self, sizing: crate::estimator::Sizing) -> crate::estimator::Sizing {
        use crate::estimator::StepTime;
        let step_time = match self {
            DeviceArg::Cpu => StepTime::MEASURED_CPU,
            DeviceArg::Cuda(_) => StepTime::MEASURED_CUDA,
        };
        sizing.calibrated(self.calibration()).timed(Some(step_time))
    }

    /// What the analytic memory estimate is multiplied by before the
    /// executor's correction has measured a model: about 2 on burn's CUDA
    /// backend (measured), 1 on the CPU.
    pub fn calibration(self) -> f64 {
        match self {
            DeviceArg::Cpu => 1.0,
            DeviceArg::Cuda(_) => crate::estimator::BURN_CUDA_F32_CALIBRATION,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_with_clear_errors() {
        assert_eq!("cpu".parse::<DeviceArg>(), Ok(DeviceArg::Cpu));
        assert_eq!("cuda:3".parse::<DeviceArg>(), Ok(DeviceArg::Cuda(3)));
        assert!("cuda:x"
            .parse::<DeviceArg>()
            .unwrap_err()
            .contains("bad device `cuda:x`"));
        assert!("gpu"
            .parse::<DeviceArg>()
            .unwrap_err()
            .contains("unknown device `gpu`"));
        assert_eq!(DeviceArg::Cuda(1).to_string(), "cuda:1");
        assert_eq!(DeviceArg::Cpu.memory().unwrap(), Memory::Host);
    }

    #[test]
    fn each_device_sizes_with_its_own_calibration_and_step_times() {
        use crate::estimator::{Sizing, StepTime};
        use crate::memory::Precision;
        use crate::{ModelConfig, Preset};
        use hpo_core::executor::Batch;
        let plain = Sizing {
            family: "bert-base".into(),
            model: ModelConfig::preset(Preset::Base, 30522, 2),
            max_len: 512,
            batch: Batch::new(8, 1),
            precision: Precision::F32,
            calibration: 1.0,
            step_time: None,
        };
        let cpu = DeviceArg::Cpu.sized(plain.clone());
        assert_eq!(cpu.calibration, 1.0);
        assert_eq!(cpu.step_time, Some(StepTime::MEASURED_CPU));
        let gpu = DeviceArg::Cuda(0).sized(plain);
        assert_eq!(gpu.calibration, crate::estimator::BURN_CUDA_F32_CALIBRATION);
        assert_eq!(gpu.step_time, Some(StepTime::MEASURED_CUDA));
        // At 8 x 512 the CPU's figures halve before recomputing; the GPU's
        // recompute first (a pass's fixed cost is 2,970 tokens there, 154
        // here).
        use crate::estimator::tests::first_fallback;
        assert_eq!(first_fallback(&cpu, 8), (4, false));
        assert_eq!(first_fallback(&gpu, 8), (8, true));
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_the_feature_says_how_to_build() {
        struct Nothing;
        impl OnBackend for Nothing {
            type Output = ();
            fn run<B: AutodiffBackend>(self, _device: B::Device) {}
        }
        let e = DeviceArg::Cuda(0).run(Nothing).unwrap_err().to_string();
        assert!(e.contains("rebuild with `--features cuda`"), "{e}");
    }
}
