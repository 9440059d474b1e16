//! Measured peak device memory: what a trial really used, for the executor
//! to learn its correction from.
//!
//! On a GPU the figure is the allocator's: cubecl's `memory_usage()` for the
//! device, `bytes_reserved` (what cubecl holds from the driver, pages in
//! use and pages kept for reuse alike: what another process cannot have).
//! The training loop samples it after every optimizer step and after
//! evaluation, and keeps the maximum ([`PeakTracker`]). NVML's figure for
//! this process (which adds the CUDA context and anything the driver holds
//! for us) is sampled beside it as a cross-check where the driver reports
//! per-process use. On the CPU there are no allocator statistics: the
//! worker's peak resident memory stands in (recorded by hpo-core's worker).
//!
//! The source is a trait ([`MemoryStats`]) so that tests (and backends
//! hpo-burn does not know) can supply one; [`backend_stats`] picks cubecl's
//! for CUDA devices.

use burn::tensor::backend::Backend;
use std::sync::Arc;

/// A source of a device's allocator statistics.
pub trait MemoryStats: std::fmt::Debug + Send + Sync {
    /// Bytes the allocator holds on the device now, or `None` when it cannot
    /// say (then nothing is recorded).
    fn reserved_bytes(&self) -> Option<u64>;

    /// What the figure is, for people reading the record (`"cubecl reserved"`).
    fn describe(&self) -> &'static str;

    /// Bytes of live allocations now, without the pages kept for reuse or
    /// padding (cubecl's `bytes_in_use`), or `None` when the source cannot
    /// say. Beside [`MemoryStats::reserved_bytes`] it tells how much of a
    /// footprint is the allocator's own slack.
    fn in_use_bytes(&self) -> Option<u64> {
        None
    }
}

/// The statistics of `device`'s allocator when hpo-burn knows how to read
/// them: cubecl's for a CUDA device (`cuda` feature); `None` on the CPU.
pub fn backend_stats<B: Backend>(device: &B::Device) -> Option<Arc<dyn MemoryStats>> {
    #[cfg(feature = "cuda")]
    {
        let any: &dyn std::any::Any = device;
        if let Some(d) = any.downcast_ref::<burn::backend::cuda::CudaDevice>() {
            return Some(Arc::new(CubeclStats { device: d.clone() }));
        }
    }
    let _ = device;
    None
}

/// The CUDA index of `device` for NVML's per-process figure; `None` for
/// devices that are not CUDA's.
pub fn backend_nvml_index<B: Backend>(device: &B::Device) -> Option<u32> {
    #[cfg(feature = "cuda")]
    {
        let any: &dyn std::any::Any = device;
        if let Some(d) = any.downcast_ref::<burn::backend::cuda::CudaDevice>() {
            return u32::try_from(d.index).ok();
        }
    }
    let _ = device;
    None
}

/// cubecl's allocator statistics for one CUDA device.
#[cfg(feature = "cuda")]
#[derive(Debug)]
pub struct CubeclStats {
    device: burn::backend::cuda::CudaDevice,
}

#[cfg(feature = "cuda")]
impl MemoryStats for CubeclStats {
    fn reserved_bytes(&self) -> Option<u64> {
        self.usage().map(|(reserved, _)| reserved)
    }

    fn describe(&self) -> &'static str {
        "cubecl reserved"
    }

    fn in_use_bytes(&self) -> Option<u64> {
        self.usage().map(|(_, in_use)| in_use)
    }
}

#[cfg(feature = "cuda")]
impl CubeclStats {
    /// cubecl's reserved bytes and bytes in use for the device.
    fn usage(&self) -> Option<(u64, u64)> {
        use burn::cubecl::cuda::CudaRuntime;
        use burn::cubecl::Runtime;
        // A poisoned client can panic on the calling thread; a statistic is
        // never worth a crash.
        std::panic::catch_unwind(|| {
            CudaRuntime::client(&self.device)
                .memory_usage()
                .ok()
                .map(|u| (u.bytes_reserved, u.bytes_in_use))
        })
        .ok()
        .flatten()
    }
}

/// The highest figure seen from a [`MemoryStats`], and NVML's figure for
/// this process beside it.
#[derive(Debug, Clone, Default)]
pub struct PeakTracker {
    stats: Option<Arc<dyn MemoryStats>>,
    nvml_device: Option<u32>,
    peak: Option<u64>,
    in_use_peak: Option<u64>,
    nvml_peak: Option<u64>,
}

impl PeakTracker {
    /// Tracks `stats` (nothing when `None`); with `nvml_device`, also NVML's
    /// per-process figure on that CUDA device.
    pub fn new(stats: Option<Arc<dyn MemoryStats>>, nvml_device: Option<u32>) -> Self {
        PeakTracker {
            stats,
            nvml_device,
            peak: None,
            in_use_peak: None,
            nvml_peak: None,
        }
    }

    /// Takes one sample of the allocator's figures.
    pub fn sample(&mut self) {
        let Some(stats) = self.stats.as_ref() else {
            return;
        };
        if let Some(now) = stats.reserved_bytes() {
            self.peak = Some(self.peak.map_or(now, |p| p.max(now)));
        }
        if let Some(now) = stats.in_use_bytes() {
            self.in_use_peak = Some(self.in_use_peak.map_or(now, |p| p.max(now)));
        }
    }

    /// Takes one sample of NVML's per-process figure (a driver call: once
    /// per epoch, not per step).
    pub fn sample_nvml(&mut self) {
        let Some(index) = self.nvml_device else {
            return;
        };
        if let Ok(Some(now)) = crate::nvml::process_used_bytes(index, std::process::id()) {
            self.nvml_peak = Some(self.nvml_peak.map_or(now, |p| p.max(now)));
        }
    }

    /// The highest allocator figure sampled.
    pub fn peak(&self) -> Option<u64> {
        self.peak
    }

    /// The most bytes of live allocations sampled. Samples are taken
    /// between optimizer steps and after evaluation, so this is what
    /// outlives a step (weights, gradients, optimizer state), not the
    /// activations' transient peak inside one.
    pub fn in_use_peak(&self) -> Option<u64> {
        self.in_use_peak
    }

    /// The highest NVML per-process figure sampled.
    pub fn nvml_peak(&self) -> Option<u64> {
        self.nvml_peak
    }

    /// What the allocator figure is.
    pub fn describe(&self) -> Option<&'static str> {
        self.stats.as_ref().map(|s| s.describe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[derive(Debug, Default)]
    struct Script(AtomicU64);

    impl MemoryStats for Script {
        fn reserved_bytes(&self) -> Option<u64> {
            let n = self.0.fetch_add(1, Ordering::SeqCst);
            Some([100, 300, 200][(n % 3) as usize])
        }
        fn describe(&self) -> &'static str {
            "scripted"
        }
        fn in_use_bytes(&self) -> Option<u64> {
            let n = self.0.load(Ordering::SeqCst);
            Some([40, 90, 60][(n % 3) as usize])
        }
    }

    #[test]
    fn the_tracker_keeps_the_maximum() {
        let mut t = PeakTracker::new(Some(Arc::new(Script::default())), None);
        assert_eq!(t.peak(), None);
        for _ in 0..5 {
            t.sample();
        }
        assert_eq!(t.peak(), Some(300));
        assert_eq!(t.in_use_peak(), Some(90));
        assert_eq!(t.describe(), Some("scripted"));
        t.sample_nvml();
        assert_eq!(t.nvml_peak(), None);
    }

    #[test]
    fn the_cpu_backend_has_no_allocator_statistics() {
        assert!(backend_stats::<crate::Cpu>(&Default::default()).is_none());
    }
}
