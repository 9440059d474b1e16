//! NVML, the driver's own view of NVIDIA GPUs: totals, per-process use, names.
//!
//! Three things go wrong when a program opens NVML the obvious way, and each
//! is handled here once:
//!
//! * **The library's name.** nvml-wrapper opens `libnvidia-ml.so`, which only
//!   the driver's development files provide; a machine with the driver alone
//!   has `libnvidia-ml.so.1`. [`LIBRARY_NAMES`] are tried in order, and the
//!   error names both when neither opens.
//! * **The device's index.** NVML numbers every GPU of the machine and ignores
//!   `CUDA_VISIBLE_DEVICES`; CUDA numbers only the visible ones. `cuda:0` in a
//!   process started with `CUDA_VISIBLE_DEVICES=3` is NVML's device 3
//!   ([`nvml_device`]), and a worker given device 0 of a coordinator that
//!   itself sees `CUDA_VISIBLE_DEVICES=2,3` must be told `2`, not `0`
//!   ([`visible_entry`]).
//! * **Opening it once.** The library is loaded once per process and kept.
//!
//! Without the `cuda` feature every query returns an error saying so; the
//! index arithmetic is plain code and tested on any machine.

use crate::error::{Error, Result};

/// The NVML library names tried, in order: the development symlink, then the
/// driver's own soname (all a driver-only machine has).
pub const LIBRARY_NAMES: [&str; 2] = ["libnvidia-ml.so", "libnvidia-ml.so.1"];

/// How NVML is to find a CUDA device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvmlDevice {
    /// By NVML's index.
    Index(u32),
    /// By UUID (`GPU-…`), as `CUDA_VISIBLE_DEVICES` may name devices.
    Uuid(String),
}

/// The NVML device behind CUDA device `index` of a process whose
/// `CUDA_VISIBLE_DEVICES` is `visible` (`None`: unset, all devices visible
/// in NVML's order).
pub fn nvml_device(visible: Option<&str>, index: u32) -> Result<NvmlDevice> {
    let Some(list) = visible.map(str::trim) else {
        return Ok(NvmlDevice::Index(index));
    };
    let entries: Vec<&str> = list
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .collect();
    let entry = entries.get(index as usize).ok_or_else(|| {
        Error::Device(format!(
            "CUDA device {index} does not exist: CUDA_VISIBLE_DEVICES={list:?} makes {} device(s) \
             visible to this process",
            entries.len()
        ))
    })?;
    if let Ok(n) = entry.parse::<u32>() {
        Ok(NvmlDevice::Index(n))
    } else if entry.starts_with("GPU-") || entry.starts_with("MIG-") {
        Ok(NvmlDevice::Uuid((*entry).to_owned()))
    } else {
        Err(Error::Device(format!(
            "CUDA_VISIBLE_DEVICES entry {entry:?} is neither an index nor a GPU-/MIG- UUID"
        )))
    }
}

/// What to put in a child process's `CUDA_VISIBLE_DEVICES` so that it sees
/// exactly this process's CUDA device `index`: the inherited entry when this
/// process itself was given `CUDA_VISIBLE_DEVICES` (`visible`), else the index.
pub fn visible_entry(visible: Option<&str>, index: u32) -> Result<String> {
    match visible {
        None => Ok(index.to_string()),
        Some(list) => {
            let entries: Vec<&str> = list
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .collect();
            entries
                .get(index as usize)
                .map(|e| (*e).to_owned())
                .ok_or_else(|| {
                    Error::Device(format!(
                        "CUDA device {index} does not exist: CUDA_VISIBLE_DEVICES={list:?} makes \
                         {} device(s) visible to this process",
                        entries.len()
                    ))
                })
        }
    }
}

/// This process's `CUDA_VISIBLE_DEVICES`, if set.
pub fn inherited_visible() -> Option<String> {
    std::env::var("CUDA_VISIBLE_DEVICES").ok()
}

/// What NVML reports for one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvmlReport {
    /// The device's name as the driver reports it (`NVIDIA H100 80GB HBM3`).
    pub name: String,
    /// Total memory, bytes.
    pub total: u64,
    /// Used memory (every process), bytes.
    pub used: u64,
    /// Free memory, bytes.
    pub free: u64,
    /// The library that opened (one of [`LIBRARY_NAMES`]).
    pub library: &'static str,
}

#[cfg(feature = "cuda")]
mod imp {
    use super::{NvmlDevice, NvmlReport, LIBRARY_NAMES};
    use crate::error::{Error, Result};
    use nvml_wrapper::enums::device::UsedGpuMemory;
    use nvml_wrapper::{Device, Nvml};
    use std::ffi::OsStr;
    use std::sync::OnceLock;

    static NVML: OnceLock<std::result::Result<(Nvml, &'static str), String>> = OnceLock::new();

    fn nvml() -> Result<&'static (Nvml, &'static str)> {
        NVML.get_or_init(|| {
            let mut errors = Vec::new();
            for name in LIBRARY_NAMES {
                match Nvml::builder().lib_path(OsStr::new(name)).init() {
                    Ok(n) => return Ok((n, name)),
                    Err(e) => errors.push(format!("{name}: {e}")),
                }
            }
            Err(format!(
                "NVML could not be opened ({}); it ships with the NVIDIA driver: install the \
                 driver, or put the folder holding libnvidia-ml.so.1 on LD_LIBRARY_PATH",
                errors.join("; ")
            ))
        })
        .as_ref()
        .map_err(|e| Error::Device(e.clone()))
    }

    fn device<'n>(nvml: &'n Nvml, which: &NvmlDevice) -> Result<Device<'n>> {
        match which {
            NvmlDevice::Index(i) => nvml.device_by_index(*i),
            NvmlDevice::Uuid(u) => nvml.device_by_uuid(u.as_str()),
        }
        .map_err(|e| Error::Device(format!("NVML: no GPU {which:?}: {e}")))
    }

    pub(super) fn report(which: &NvmlDevice) -> Result<NvmlReport> {
        let (nvml, library) = nvml()?;
        let d = device(nvml, which)?;
        let info = d
            .memory_info()
            .map_err(|e| Error::Device(format!("NVML: memory of GPU {which:?}: {e}")))?;
        Ok(NvmlReport {
            name: d.name().unwrap_or_else(|_| "unknown NVIDIA GPU".into()),
            total: info.total,
            used: info.used,
            free: info.free,
            library,
        })
    }

    pub(super) fn process_used(which: &NvmlDevice, pid: u32) -> Result<Option<u64>> {
        let (nvml, _) = nvml()?;
        let d = device(nvml, which)?;
        let procs = d
            .running_compute_processes()
            .map_err(|e| Error::Device(format!("NVML: processes on GPU {which:?}: {e}")))?;
        Ok(procs
            .iter()
            .find(|p| p.pid == pid)
            .and_then(|p| match p.used_gpu_memory {
                UsedGpuMemory::Used(b) => Some(b),
                UsedGpuMemory::Unavailable => None,
            }))
    }
}

/// NVML's report on CUDA device `index` of this process (honouring an
/// inherited `CUDA_VISIBLE_DEVICES`).
pub fn report(index: u32) -> Result<NvmlReport> {
    let which = nvml_device(inherited_visible().as_deref(), index)?;
    #[cfg(feature = "cuda")]
    {
        imp::report(&which)
    }
    #[cfg(not(feature = "cuda"))]
    {
        Err(unavailable(&which))
    }
}

/// Device memory NVML attributes to process `pid` on CUDA device `index`
/// (`None` when the process holds none there or the driver does not say:
/// some containers hide other namespaces' pids).
pub fn process_used_bytes(index: u32, pid: u32) -> Result<Option<u64>> {
    let which = nvml_device(inherited_visible().as_deref(), index)?;
    #[cfg(feature = "cuda")]
    {
        imp::process_used(&which, pid)
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = pid;
        Err(unavailable(&which))
    }
}

#[cfg(not(feature = "cuda"))]
fn unavailable(which: &NvmlDevice) -> Error {
    Error::Device(format!(
        "device memory of {which:?} not available: hpo-burn was built without the `cuda` feature"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_indices_map_through_visible_devices() {
        assert_eq!(nvml_device(None, 2).unwrap(), NvmlDevice::Index(2));
        assert_eq!(nvml_device(Some("3"), 0).unwrap(), NvmlDevice::Index(3));
        assert_eq!(nvml_device(Some("2, 5"), 1).unwrap(), NvmlDevice::Index(5));
        assert_eq!(
            nvml_device(Some("GPU-8a1b,1"), 0).unwrap(),
            NvmlDevice::Uuid("GPU-8a1b".into())
        );
        let e = nvml_device(Some("3"), 1).unwrap_err().to_string();
        assert!(
            e.contains("CUDA device 1 does not exist") && e.contains("1 device"),
            "{e}"
        );
        let e = nvml_device(Some("x"), 0).unwrap_err().to_string();
        assert!(e.contains("\"x\""), "{e}");
        // An empty list hides every device.
        assert!(nvml_device(Some(""), 0).is_err());
    }

    #[test]
    fn a_child_sees_the_inherited_entry() {
        assert_eq!(visible_entry(None, 1).unwrap(), "1");
        assert_eq!(visible_entry(Some("2,3"), 0).unwrap(), "2");
        assert_eq!(visible_entry(Some("GPU-aa,GPU-bb"), 1).unwrap(), "GPU-bb");
        assert!(visible_entry(Some("2"), 1).is_err());
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn queries_say_the_feature_is_missing() {
        let e = report(0).unwrap_err().to_string();
        assert!(e.contains("without the `cuda` feature"), "{e}");
    }
}
