//! What a process needs at run time to train on CUDA, checked before the
//! first trial; and the kernel cache every process of a study shares.
//!
//! burn-cuda builds with no CUDA toolkit, but it does not *run* on the
//! driver alone. cubecl-cuda 0.10 compiles its kernels at run time with
//! NVRTC, from CUDA C++ that includes the toolkit's headers:
//!
//! * **headers**: `$CUDA_PATH/include` (else `/usr/local/cuda`, `/opt/cuda`,
//!   or `/usr` when `/usr/bin/nvcc` exists: cubecl's own search), with
//!   `cuda_runtime.h`, `cuda_fp16.h`, `cuda_bf16.h`, and CCCL's
//!   `cuda/pipeline` under `include/cccl` (CUDA 13) or `include` (CUDA 12);
//! * **NVRTC**: `libnvrtc.so` or `libnvrtc.so.<major>` on the dynamic
//!   loader's path (cudarc loads it by name);
//! * **the driver**: `libcuda.so.1`;
//! * **NVML** (device totals, per-process use): `libnvidia-ml.so` or `.so.1`.
//!
//! Missing any of them, cubecl panics on its device thread at the first
//! kernel, and every trial of a study fails the same way. [`check_cuda`]
//! looks for all four the way the loaders will and returns one error naming
//! everything missing, where it looked, and what to set.
//!
//! Every worker process would also compile every kernel again: cubecl's
//! on-disk kernel cache is off by default. [`configure_kernel_cache`] turns
//! it on, with the autotuner's results, in one folder shared by every
//! process (`HPO_KERNEL_CACHE`, else `<user cache>/hpo/cubecl`).

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// The NVRTC library names cudarc 0.19 tries (for a build against CUDA 13).
pub const NVRTC_NAMES: &[&str] = &[
    "libnvrtc.so",
    "libnvrtc.so.13",
    "libnvrtc.so.12",
    "libnvrtc.so.11",
    "libnvrtc.so.1",
];

/// The CUDA driver library names cudarc tries.
pub const DRIVER_NAMES: &[&str] = &["libcuda.so", "libcuda.so.1"];

/// Headers cubecl's generated CUDA C++ includes; each must be under the
/// toolkit's `include` folder.
const HEADERS: &[&str] = &["cuda_runtime.h", "cuda_fp16.h", "cuda_bf16.h"];

/// Where the process will look: the environment and the file system, as
/// values, so that tests can fake them.
#[derive(Debug, Clone, Default)]
pub struct RuntimeProbe {
    /// `CUDA_PATH`, if set.
    pub cuda_path: Option<PathBuf>,
    /// The folders of `LD_LIBRARY_PATH`, in order.
    pub ld_library_path: Vec<PathBuf>,
    /// Folders the loader searches besides: its cache's (`/etc/ld.so.conf`
    /// and `ld.so.conf.d`) and the system's defaults.
    pub loader_dirs: Vec<PathBuf>,
    /// The root of the file system the defaults (`/usr/local/cuda`, ...) are
    /// under: `/` outside tests.
    pub root: PathBuf,
}

/// Where each part of the runtime was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeReport {
    /// The toolkit folder cubecl will use.
    pub cuda_root: PathBuf,
    /// The CCCL include folder (`include/cccl` or `include`).
    pub cccl: PathBuf,
    /// The NVRTC library found.
    pub nvrtc: PathBuf,
    /// The driver library found.
    pub driver: PathBuf,
    /// The NVML library found.
    pub nvml: PathBuf,
}

impl std::fmt::Display for RuntimeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CUDA headers {}, CCCL {}, NVRTC {}, driver {}, NVML {}",
            self.cuda_root.join("include").display(),
            self.cccl.display(),
            self.nvrtc.display(),
            self.driver.display(),
            self.nvml.display()
        )
    }
}

impl RuntimeProbe {
    /// This process's environment and the real file system.
    pub fn from_env() -> Self {
        let ld_library_path = std::env::var_os("LD_LIBRARY_PATH")
            .map(|v| std::env::split_paths(&v).collect())
            .unwrap_or_default();
        let root = PathBuf::from("/");
        RuntimeProbe {
            cuda_path: std::env::var_os("CUDA_PATH").map(PathBuf::from),
            ld_library_path,
            loader_dirs: loader_dirs(&root),
            root,
        }
    }

    fn under_root(&self, absolute: &str) -> PathBuf {
        self.root.join(absolute.trim_start_matches('/'))
    }

    /// The toolkit folder, as cubecl-cuda 0.10's `cuda_path` chooses it.
    pub fn cuda_root(&self) -> Option<PathBuf> {
        if let Some(p) = &self.cuda_path {
            return Some(p.clone());
        }
        for candidate in ["/usr/local/cuda", "/opt/cuda"] {
            let p = self.under_root(candidate);
            if p.exists() {
                return Some(p);
            }
        }
        self.under_root("/usr/bin/nvcc")
            .exists()
            .then(|| self.under_root("/usr"))
    }

    /// The first of `names` in a folder the loader searches.
    fn on_loader_path(&self, names: &[&str]) -> Option<PathBuf> {
        self.ld_library_path
            .iter()
            .chain(&self.loader_dirs)
            .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
            .find(|p| p.exists())
    }

    /// Folders outside the loader's path where a toolkit or Python wheel
    /// often keeps a library: suggested when it is not on the path.
    fn elsewhere(&self, names: &[&str]) -> Option<PathBuf> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(root) = self.cuda_root() {
            dirs.push(root.join("lib64"));
            dirs.push(root.join("lib"));
            dirs.push(root.join("targets/x86_64-linux/lib"));
        }
        for base in ["/usr/local", "/opt"] {
            if let Ok(entries) = std::fs::read_dir(self.under_root(base)) {
                for e in entries.flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    if name.starts_with("cuda-") {
                        dirs.push(e.path().join("lib64"));
                        dirs.push(e.path().join("targets/x86_64-linux/lib"));
                    }
                }
            }
        }
        dirs.iter()
            .flat_map(|dir| names.iter().map(move |n| dir.join(n)))
            .find(|p| p.exists())
    }

    /// Checks headers, NVRTC, driver and NVML; one error lists everything
    /// missing and what to do about each.
    pub fn check(&self) -> Result<RuntimeReport> {
        let mut problems = Vec::new();
        let root = self.cuda_root();
        let mut cccl = None;
        match &root {
            None => problems.push(
                "no CUDA toolkit found (CUDA_PATH is unset and none of /usr/local/cuda, /opt/cuda, \
                 /usr/bin/nvcc exists): cubecl compiles its kernels at run time and needs the \
                 toolkit's headers; install the CUDA toolkit (its headers and NVRTC, no compiler \
                 needed) and set CUDA_PATH to its folder"
                    .to_owned(),
            ),
            Some(root) => {
                let include = root.join("include");
                let missing: Vec<&str> = HEADERS
                    .iter()
                    .copied()
                    .filter(|h| !include.join(h).exists())
                    .collect();
                if !missing.is_empty() {
                    problems.push(format!(
                        "the CUDA headers {} are missing from {}: set CUDA_PATH to a CUDA toolkit \
                         folder whose include/ holds them",
                        missing.join(", "),
                        include.display()
                    ));
                }
                cccl = [include.join("cccl"), include.clone()]
                    .into_iter()
                    .find(|dir| dir.join("cuda/pipeline").exists());
                if cccl.is_none() {
                    problems.push(format!(
                        "CCCL's headers (cuda/pipeline) are in neither {} nor {}: install the \
                         toolkit's CCCL (libcu++) headers",
                        include.join("cccl").display(),
                        include.display()
                    ));
                }
            }
        }
        let mut library = |what: &str, names: &[&str], hint: &str| -> Option<PathBuf> {
            if let Some(p) = self.on_loader_path(names) {
                return Some(p);
            }
            let fix = match self.elsewhere(names) {
                Some(p) => format!(
                    "{} exists but the loader does not search {}: add it to LD_LIBRARY_PATH",
                    p.display(),
                    p.parent()
                        .map_or_else(String::new, |d| d.display().to_string())
                ),
                None => hint.to_owned(),
            };
            problems.push(format!(
                "{what} not found (looked for {} in LD_LIBRARY_PATH and the loader's folders): {fix}",
                names.join(", ")
            ));
            None
        };
        let nvrtc = library(
            "NVRTC",
            NVRTC_NAMES,
            "install the toolkit's NVRTC (or the nvidia-cuda-nvrtc wheel) and put its folder on \
             LD_LIBRARY_PATH",
        );
        let driver = library("the CUDA driver", DRIVER_NAMES, "install the NVIDIA driver");
        let nvml = library(
            "NVML",
            &crate::nvml::LIBRARY_NAMES,
            "it ships with the NVIDIA driver: install the driver",
        );
        match (root, cccl, nvrtc, driver, nvml) {
            (Some(cuda_root), Some(cccl), Some(nvrtc), Some(driver), Some(nvml))
                if problems.is_empty() =>
            {
                Ok(RuntimeReport {
                    cuda_root,
                    cccl,
                    nvrtc,
                    driver,
                    nvml,
                })
            }
            _ => Err(Error::Device(format!(
                "the CUDA runtime is incomplete: {}",
                problems.join("; ")
            ))),
        }
    }
}

/// Checks this process's CUDA runtime ([`RuntimeProbe::from_env`]).
pub fn check_cuda() -> Result<RuntimeReport> {
    RuntimeProbe::from_env().check()
}

/// The loader's folders besides `LD_LIBRARY_PATH`: those `/etc/ld.so.conf`
/// names (following `include` lines one level), then the system defaults.
fn loader_dirs(root: &Path) -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    let conf = root.join("etc/ld.so.conf");
    let mut files = vec![conf];
    if let Ok(entries) = std::fs::read_dir(root.join("etc/ld.so.conf.d")) {
        let mut more: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "conf"))
            .collect();
        more.sort();
        files.extend(more);
    }
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for line in text.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') || line.starts_with("include") {
                continue;
            }
            dirs.push(root.join(line.trim_start_matches('/')));
        }
    }
    for d in [
        "lib/x86_64-linux-gnu",
        "usr/lib/x86_64-linux-gnu",
        "lib64",
        "usr/lib64",
        "lib",
        "usr/lib",
    ] {
        dirs.push(root.join(d));
    }
    dirs
}

/// The kernel cache folder: `HPO_KERNEL_CACHE`, else `<user cache>/hpo/cubecl`.
pub fn kernel_cache_dir() -> Option<PathBuf> {
    std::env::var_os("HPO_KERNEL_CACHE")
        .map(PathBuf::from)
        .or_else(|| dirs::cache_dir().map(|d| d.join("hpo").join("cubecl")))
}

/// Turns on cubecl's on-disk kernel cache and keeps its autotune results in
/// the same folder ([`kernel_cache_dir`]), unless a `cubecl.toml` (or the
/// environment) already chose; call it before the first use of a CUDA
/// device. Returns the folder when it was set here, `None` when cubecl's
/// configuration was already fixed (read or set earlier in this process),
/// and always `None` without the `cuda` feature (no cubecl to configure).
pub fn configure_kernel_cache() -> Option<PathBuf> {
    #[cfg(feature = "cuda")]
    {
        configure_cubecl()
    }
    #[cfg(not(feature = "cuda"))]
    {
        None
    }
}

#[cfg(feature = "cuda")]
fn configure_cubecl() -> Option<PathBuf> {
    use burn::cubecl::config::cache::CacheConfig;
    use burn::cubecl::config::{CubeClRuntimeConfig, RuntimeConfig};
    let dir = kernel_cache_dir()?;
    let storage = CubeClRuntimeConfig::storage();
    let mut slot = storage.lock();
    if slot.is_some() {
        return None;
    }
    let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
    if std::fs::create_dir_all(&dir).is_err() {
        return None;
    }
    if config.compilation.cache.is_none() {
        config.compilation.cache = Some(CacheConfig::File(dir.clone()));
    }
    if matches!(config.autotune.cache, CacheConfig::Target) {
        config.autotune.cache = CacheConfig::File(dir.clone());
    }
    *slot = Some(std::sync::Arc::new(config));
    Some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }

    /// A fake machine with a complete CUDA 13 layout under `root`.
    fn complete(root: &Path) -> RuntimeProbe {
        for h in HEADERS {
            touch(&root.join("usr/local/cuda/include").join(h));
        }
        touch(&root.join("usr/local/cuda/include/cccl/cuda/pipeline"));
        touch(&root.join("usr/local/cuda/lib64/libnvrtc.so.13"));
        touch(&root.join("usr/lib/x86_64-linux-gnu/libcuda.so.1"));
        touch(&root.join("usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1"));
        RuntimeProbe {
            cuda_path: None,
            ld_library_path: vec![root.join("usr/local/cuda/lib64")],
            loader_dirs: loader_dirs(root),
            root: root.to_path_buf(),
        }
    }

    #[test]
    fn a_complete_runtime_is_found_where_the_loaders_look() {
        let dir = tempfile::tempdir().unwrap();
        let probe = complete(dir.path());
        let r = probe.check().unwrap();
        assert_eq!(r.cuda_root, dir.path().join("usr/local/cuda"));
        assert!(r.cccl.ends_with("include/cccl"));
        assert!(r.nvrtc.ends_with("libnvrtc.so.13"));
        // Only the driver's soname: a driver-only machine.
        assert!(r.nvml.ends_with("libnvidia-ml.so.1"));
    }

    #[test]
    fn missing_headers_are_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let probe = complete(dir.path());
        std::fs::remove_file(dir.path().join("usr/local/cuda/include/cuda_bf16.h")).unwrap();
        let e = probe.check().unwrap_err().to_string();
        assert!(e.contains("cuda_bf16.h") && e.contains("CUDA_PATH"), "{e}");
        // No toolkit at all.
        std::fs::remove_dir_all(dir.path().join("usr/local/cuda/include")).unwrap();
        let bare = RuntimeProbe {
            cuda_path: None,
            ..probe.clone()
        };
        std::fs::remove_dir_all(dir.path().join("usr/local/cuda")).unwrap();
        let e = bare.check().unwrap_err().to_string();
        assert!(e.contains("no CUDA toolkit found"), "{e}");
    }

    #[test]
    fn nvrtc_off_the_loader_path_is_pointed_at() {
        let dir = tempfile::tempdir().unwrap();
        let mut probe = complete(dir.path());
        probe.ld_library_path.clear();
        let e = probe.check().unwrap_err().to_string();
        assert!(
            e.contains("NVRTC not found") && e.contains("add it to LD_LIBRARY_PATH"),
            "{e}"
        );
        assert!(e.contains("lib64/libnvrtc.so.13 exists"), "{e}");
        // Nowhere at all: the install hint.
        std::fs::remove_file(dir.path().join("usr/local/cuda/lib64/libnvrtc.so.13")).unwrap();
        let e = probe.check().unwrap_err().to_string();
        assert!(e.contains("nvidia-cuda-nvrtc"), "{e}");
    }

    #[test]
    fn the_loaders_configuration_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut probe = complete(dir.path());
        probe.ld_library_path.clear();
        std::fs::create_dir_all(dir.path().join("etc/ld.so.conf.d")).unwrap();
        std::fs::write(
            dir.path().join("etc/ld.so.conf.d/cuda.conf"),
            "# the toolkit\n/usr/local/cuda/lib64\n",
        )
        .unwrap();
        probe.loader_dirs = loader_dirs(dir.path());
        assert!(probe.check().is_ok());
    }

    #[test]
    fn cuda_path_wins_and_missing_driver_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let mut probe = complete(dir.path());
        probe.cuda_path = Some(dir.path().join("elsewhere"));
        std::fs::remove_file(dir.path().join("usr/lib/x86_64-linux-gnu/libcuda.so.1")).unwrap();
        let e = probe.check().unwrap_err().to_string();
        assert!(e.contains("elsewhere/include"), "{e}");
        assert!(e.contains("the CUDA driver not found"), "{e}");
    }
}
