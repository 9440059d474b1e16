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

    /// One reading of the allocator: its reserved bytes and, where the
    /// source can say, its live allocations, from one query (cubecl's is a
    /// blocking round trip to the device's server, taken every step). By
    /// default [`MemoryStats::reserved_bytes`] alone.
    fn read(&self) -> Option<MemoryReading> {
        self.reserved_bytes().map(|reserved| MemoryReading {
            reserved,
            in_use: None,
        })
    }
}

/// One reading of a device's allocator ([`MemoryStats::read`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryReading {
    /// Bytes the allocator holds on the device ([`MemoryStats::reserved_bytes`]).
    pub reserved: u64,
    /// Bytes of live allocations, without the pages kept for reuse or
    /// padding (cubecl's `bytes_in_use`), when the source can say: beside
    /// `reserved`, how much of a footprint is the allocator's own slack.
    pub in_use: Option<u64>,
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
        self.read().map(|r| r.reserved)
    }

    fn describe(&self) -> &'static str {
        "cubecl reserved"
    }

    fn read(&self) -> Option<MemoryReading> {
        use burn::cubecl::cuda::CudaRuntime;
        use burn::cubecl::Runtime;
        // A poisoned client can panic on the calling thread; a statistic is
        // never worth a crash.
        std::panic::catch_unwind(|| {
            CudaRuntime::client(&self.device)
                .memory_usage()
                .ok()
                .map(|u| MemoryReading {
                    reserved: u.bytes_reserved,
                    in_use: Some(u.bytes_in_use),
                })
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
        let Some(now) = self.stats.as_ref().and_then(|s| s.read()) else {
            return;
        };
        self.peak = Some(self.peak.map_or(now.reserved, |p| p.max(now.reserved)));
        if let Some(in_use) = now.in_use {
            self.in_use_peak = Some(self.in_use_peak.map_or(in_use, |p| p.max(in_use)));
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
            self.read().map(|r| r.reserved)
        }
        fn describe(&self) -> &'static str {
            "scripted"
        }
        fn read(&self) -> Option<MemoryReading> {
            let n = (self.0.fetch_add(1, Ordering::SeqCst) % 3) as usize;
            Some(MemoryReading {
                reserved: [100, 300, 200][n],
                in_use: Some([40, 90, 60][n]),
            })
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
