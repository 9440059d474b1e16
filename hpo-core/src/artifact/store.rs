//! The filesystem artifact store: a flat folder, one file per artifact.

use super::meta::{check_name, ArtifactMeta};
use super::{atomic, id};
use crate::error::{Error, Result};
use crate::storage::{redact, sqlite_file};
use crate::study::Trial;
use crate::trial::FrozenTrial;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Suffix of the folder [`ArtifactStore::beside`] a SQLite study file.
pub const BESIDE_SUFFIX: &str = ".artifacts";

/// Files that trials store next to a study (a model's weights, predictions),
/// as Optuna's `FileSystemArtifactStore` keeps them: each artifact is the
/// file `<root>/<artifact_id>`, registered on its trial as the system
/// attribute `artifacts:<artifact_id>` in Optuna's format
/// ([`ArtifactMeta`]), so optuna-dashboard and `optuna.artifacts` read
/// hpo's artifacts and hpo reads theirs.
///
/// Any process can upload (a worker, into its running trial) and read (a
/// fresh process, after the study): the store holds no state but the
/// folder. Files are written atomically and registered only once whole, so
/// a trial never points at half a file; a crash between writing and
/// registering leaves an unreferenced file, which
/// [`ArtifactStore::sweep_orphans`] removes.
///
/// ```
/// use hpo_core::{ArtifactStore, Study, TrialError};
///
/// # fn main() -> hpo_core::Result<()> {
/// # let dir = std::env::temp_dir().join(format!("hpo-doc-artifacts-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let url = format!("sqlite:{}", dir.join("study.db").display());
/// let study = Study::builder().name("doc").storage_url(&url).build()?;
/// let store = ArtifactStore::beside(&url)?; // `study.db.artifacts/`
/// study.optimize(3, |trial| -> Result<f64, TrialError> {
///     let x = trial.suggest_float("x", -1.0, 1.0)?;
///     store.upload_bytes(trial, "prediction.txt", x.to_string().as_bytes())?;
///     Ok(x * x)
/// })?;
/// // Later, in any process:
/// let best = Study::builder().name("doc").storage_url(&url).load()?.best_trial()?;
/// let text = store.read(&best, "prediction.txt")?;
/// assert_eq!(String::from_utf8_lossy(&text).parse::<f64>().ok(), best.param("x").and_then(|p| p.as_f64()));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactStore {
    root: PathBuf,
}

impl ArtifactStore {
    /// The store in the folder `path`, created (with its parents) if missing.
    pub fn open(path: impl Into<PathBuf>) -> Result<Self> {
        let root = path.into();
        std::fs::create_dir_all(&root).map_err(|source| Error::ArtifactIo {
            path: root.clone(),
            message: "cannot create the artifact store's folder".into(),
            source,
        })?;
        Ok(ArtifactStore { root })
    }

    /// The store at `location`: a path, or a `file://` URL
    /// (`file:///shared/artifacts`). Other schemes (`s3://`, `gs://`) are
    /// refused with [`Error::ArtifactLocation`] naming the scheme: this store
    /// is a folder, which may be on a network file system every machine mounts.
    pub fn from_location(location: &str) -> Result<Self> {
        Self::open(Self::folder_of(location)?)
    }

    /// The folder a location names (a path, or a `file://` URL), without
    /// creating it; refused as [`ArtifactStore::from_location`] refuses.
    pub fn folder_of(location: &str) -> Result<PathBuf> {
        location_path(location)
    }

    /// The default store of the study database `storage_url`: the folder
    /// [`ArtifactStore::folder_beside`] names, created if missing.
    pub fn beside(storage_url: &str) -> Result<Self> {
        Self::open(Self::folder_beside(storage_url)?)
    }

    /// The folder beside a SQLite study file: `sqlite:///dir/criteria.db`
    /// gives `dir/criteria.db.artifacts`. The URL is read by the storage's
    /// own parser, as opening it would. An in-memory or PostgreSQL storage
    /// has no folder beside it: that is an [`Error::ArtifactLocation`] saying
    /// to give a location explicitly (a folder every machine running trials
    /// shares). The URL's password is never printed.
    pub fn folder_beside(storage_url: &str) -> Result<PathBuf> {
        match sqlite_file(storage_url)? {
            Some(db) => {
                let mut name = db.file_name().unwrap_or_default().to_os_string();
                name.push(BESIDE_SUFFIX);
                Ok(db.with_file_name(name))
            }
            None => Err(Error::ArtifactLocation {
                location: redact(storage_url),
                reason: "this storage is not a SQLite file, so there is no folder beside it; \
                         give the artifact store's location explicitly \
                         (`ArtifactStore::open(path)`), a folder on storage that every \
                         machine running trials shares"
                    .into(),
            }),
        }
    }

    /// The store's folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Stores the file `source` as the artifact `name` of the running
    /// `trial`, and returns what was registered.
    ///
    /// The file is copied into the store atomically (a temporary file,
    /// synced, renamed to `<root>/<artifact_id>`) and only then registered
    /// on the trial (system attribute `artifacts:<artifact_id>`); if
    /// registering fails, the file is removed again. `name` is a plain file
    /// name (no path separators). Uploading a name the trial already has
    /// replaces it: the new file is registered, then the old one is deleted;
    /// the old attribute stays (attributes are never removed) and lookups by
    /// name return the latest upload.
    pub fn upload(
        &self,
        trial: &mut Trial,
        name: &str,
        source: impl AsRef<Path>,
    ) -> Result<ArtifactMeta> {
        let source = source.as_ref();
        let mut from = File::open(source).map_err(|e| Error::ArtifactIo {
            path: source.to_path_buf(),
            message: format!("cannot read the file to upload as `{name}`"),
            source: e,
        })?;
        self.store(trial, name, |to| std::io::copy(&mut from, to))
    }

    /// Stores `bytes` as the artifact `name` of the running `trial`, as
    /// [`ArtifactStore::upload`] stores a file.
    pub fn upload_bytes(
        &self,
        trial: &mut Trial,
        name: &str,
        bytes: &[u8],
    ) -> Result<ArtifactMeta> {
        self.store(trial, name, |to| {
            to.write_all(bytes).map(|()| bytes.len() as u64)
        })
    }

    fn store(
        &self,
        trial: &mut Trial,
        name: &str,
        fill: impl FnOnce(&mut File) -> std::io::Result<u64>,
    ) -> Result<ArtifactMeta> {
        check_name(name)?;
        let earlier = ArtifactMeta::all(trial.frozen())?;
        let latest = earlier.iter().map(|m| m.artifact_id.as_str()).max();
        let meta = ArtifactMeta::new(id::new(latest), name);
        let file = self.root.join(&meta.artifact_id);
        atomic::write(&file, fill)?;
        if let Err(e) = trial.set_system_attr(&meta.attr_key(), meta.to_attr()) {
            let _ = std::fs::remove_file(&file);
            return Err(e);
        }
        for old in earlier.iter().filter(|m| m.filename == name) {
            let _ = std::fs::remove_file(self.root.join(&old.artifact_id));
        }
        Ok(meta)
    }

    /// The file of `trial`'s artifact `name` (its latest upload), which
    /// exists. A trial without that artifact is [`Error::ArtifactNotFound`];
    /// one whose file is gone (removed by [`ArtifactStore::clean`]) is
    /// [`Error::ArtifactRemoved`]; an id that is not a plain file name is
    /// [`Error::InvalidArtifactId`], and nothing outside the store is touched.
    pub fn path(&self, trial: &FrozenTrial, name: &str) -> Result<PathBuf> {
        let meta = ArtifactMeta::find(trial, name)?;
        self.existing(trial.number, &meta)
    }

    /// The content of `trial`'s artifact `name` (see [`ArtifactStore::path`]).
    pub fn read(&self, trial: &FrozenTrial, name: &str) -> Result<Vec<u8>> {
        let path = self.path(trial, name)?;
        std::fs::read(&path).map_err(|source| Error::ArtifactIo {
            path,
            message: format!("cannot read artifact `{name}` of trial {}", trial.number),
            source,
        })
    }

    /// Copies `trial`'s artifact `name` to the file `dest` (replacing it),
    /// atomically: `dest` is either the whole artifact or as it was.
    /// Returns the number of bytes copied.
    pub fn download(&self, trial: &FrozenTrial, name: &str, dest: impl AsRef<Path>) -> Result<u64> {
        let path = self.path(trial, name)?;
        copy_file(&path, dest.as_ref())
    }

    /// Copies the artifact `meta` into the store `dest` under the same id,
    /// atomically (as `hpo copy` carries a study's files); `Ok(None)` when
    /// this store has no file for it (removed by cleanup), otherwise the
    /// number of bytes copied.
    pub fn copy_into(&self, dest: &ArtifactStore, meta: &ArtifactMeta) -> Result<Option<u64>> {
        id::check(&meta.artifact_id)?;
        let from = self.root.join(&meta.artifact_id);
        if !from.is_file() {
            return Ok(None);
        }
        copy_file(&from, &dest.root.join(&meta.artifact_id)).map(Some)
    }

    /// The file of `meta` in this store, which exists.
    fn existing(&self, trial: u64, meta: &ArtifactMeta) -> Result<PathBuf> {
        let path = self.file(meta)?;
        if path.is_file() {
            Ok(path)
        } else {
            Err(Error::ArtifactRemoved {
                trial,
                name: meta.filename.clone(),
                id: meta.artifact_id.clone(),
                store: self.root.clone(),
            })
        }
    }

    /// Where `meta`'s file is in this store; the id is checked again, so
    /// the path is inside the store whoever built `meta`.
    pub(crate) fn file(&self, meta: &ArtifactMeta) -> Result<PathBuf> {
        id::check(&meta.artifact_id)?;
        Ok(self.root.join(&meta.artifact_id))
    }
}

/// Copies `from` to `to` atomically.
fn copy_file(from: &Path, to: &Path) -> Result<u64> {
    let mut source = File::open(from).map_err(|e| Error::ArtifactIo {
        path: from.to_path_buf(),
        message: "cannot open the artifact".into(),
        source: e,
    })?;
    atomic::write(to, |f| std::io::copy(&mut source, f))
}

/// The folder a store location names: a path, or a `file://` URL.
fn location_path(location: &str) -> Result<PathBuf> {
    let refuse = |reason: String| Error::ArtifactLocation {
        location: redact(location),
        reason,
    };
    if location.is_empty() {
        return Err(refuse("the location is empty; give a folder".into()));
    }
    match ::url::Url::parse(location) {
        // A Windows drive (`C:\...`) parses as a one-letter scheme.
        Ok(url) if url.scheme().len() > 1 => {
            if url.scheme() != "file" {
                return Err(refuse(format!(
                    "the `{}` scheme is not supported; the artifact store is a folder: give a \
                     path or a `file:///absolute/path` URL (a network file system that every \
                     machine mounts works)",
                    url.scheme()
                )));
            }
            url.to_file_path().map_err(|()| {
                refuse(
                    "a `file:` URL here names a local folder: `file:///absolute/path` \
                     (no host)"
                        .into(),
                )
            })
        }
        _ => Ok(PathBuf::from(location)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::study::Study;
    use crate::trial::TrialState;

    fn temp_store(tag: &str) -> ArtifactStore {
        let dir = std::env::temp_dir().join(format!("hpo-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        ArtifactStore::open(dir).unwrap()
    }

    fn files(store: &ArtifactStore) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(store.root())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    fn artifact_attrs(trial: &FrozenTrial) -> usize {
        ArtifactMeta::all(trial).unwrap().len()
    }

    #[test]
    fn an_upload_is_one_file_registered_on_its_trial() {
        let store = temp_store("upload");
        let study = Study::builder().build().unwrap();
        let mut trial = study.ask().unwrap();
        let meta = store
            .upload_bytes(&mut trial, "preds.csv", b"1,2\n")
            .unwrap();
        assert_eq!(files(&store), [meta.artifact_id.as_str()]);
        assert_eq!(meta.mimetype, "text/csv");
        let stored = study.storage().trial(trial.id()).unwrap();
        assert_eq!(
            stored.system_attrs.get(&meta.attr_key()),
            Some(&meta.to_attr())
        );
        // Again under the same name: the new file replaces the old one.
        let again = store
            .upload_bytes(&mut trial, "preds.csv", b"3,4\n")
            .unwrap();
        assert_eq!(files(&store), [again.artifact_id.as_str()]);
        let frozen = study.tell(trial, 1.0).unwrap();
        assert_eq!(store.read(&frozen, "preds.csv").unwrap(), b"3,4\n");
        assert_eq!(artifact_attrs(&frozen), 2);
        std::fs::remove_dir_all(store.root()).unwrap();
    }

    #[test]
    fn a_failed_write_registers_nothing_and_leaves_no_file() {
        let store = temp_store("failed-write");
        let study = Study::builder().build().unwrap();
        let mut trial = study.ask().unwrap();
        // A folder opens but cannot be read as a file: the copy fails midway.
        let err = store.upload(&mut trial, "w.bin", std::env::temp_dir());
        assert!(matches!(err, Err(Error::ArtifactIo { .. })), "{err:?}");
        let err = store.upload(&mut trial, "w.bin", "/no/such/file");
        assert!(err.unwrap_err().to_string().contains("/no/such/file"));
        assert!(files(&store).is_empty(), "{:?}", files(&store));
        assert_eq!(artifact_attrs(trial.frozen()), 0);
        let stored = study.storage().trial(trial.id()).unwrap();
        assert_eq!(artifact_attrs(&stored), 0);
        std::fs::remove_dir_all(store.root()).unwrap();
    }

    #[test]
    fn a_failed_registration_removes_the_file() {
        let store = temp_store("failed-register");
        let study = Study::builder().build().unwrap();
        let mut trial = study.ask().unwrap();
        // Another process finished the trial: its attributes are frozen.
        study
            .storage()
            .finish_trial(trial.id(), TrialState::Fail, None, &[])
            .unwrap();
        let err = store.upload_bytes(&mut trial, "w.bin", b"x").unwrap_err();
        assert!(matches!(err, Error::TrialFinished { .. }), "{err}");
        assert!(files(&store).is_empty(), "{:?}", files(&store));
        let stored = study.storage().trial(trial.id()).unwrap();
        assert_eq!(artifact_attrs(&stored), 0);
        std::fs::remove_dir_all(store.root()).unwrap();
    }

    #[test]
    fn lookups_name_what_is_missing_and_never_leave_the_store() {
        let store = temp_store("lookup");
        let mut t = FrozenTrial::new(7, 3, TrialState::Complete);
        let gone = ArtifactMeta::new("0190b6c4-0000-7000-8000-000000000001".into(), "m.bin");
        t.system_attrs.insert(gone.attr_key(), gone.to_attr());
        let err = store.path(&t, "m.bin").unwrap_err().to_string();
        assert!(
            err.contains("artifact `m.bin` (id 0190b6c4-0000-7000-8000-000000000001) of trial 3")
                && err.contains("removed by a cleanup policy"),
            "{err}"
        );
        // A hand-written attribute pointing outside the store.
        let outside = store.root().join("secret");
        std::fs::write(&outside, b"s").unwrap();
        let evil = serde_json::Value::String(
            r#"{"artifact_id": "../secret", "filename": "e", "mimetype": "x", "encoding": null}"#
                .into(),
        );
        t.system_attrs.insert("artifacts:../secret".into(), evil);
        let err = store.read(&t, "e").unwrap_err();
        assert!(matches!(err, Error::InvalidArtifactId { .. }), "{err}");
        std::fs::remove_dir_all(store.root()).unwrap();
    }

    #[test]
    fn locations_are_paths_or_file_urls() {
        assert_eq!(
            location_path("runs/artifacts").unwrap(),
            PathBuf::from("runs/artifacts")
        );
        assert_eq!(location_path("/abs/a").unwrap(), PathBuf::from("/abs/a"));
        assert_eq!(
            location_path("file:///shared/my%20artifacts").unwrap(),
            PathBuf::from("/shared/my artifacts")
        );
        for (location, says) in [
            ("s3://bucket/prefix", "the `s3` scheme is not supported"),
            ("gs://bucket", "the `gs` scheme is not supported"),
            ("file://host/x", "no host"),
            ("", "empty"),
        ] {
            let err = location_path(location).unwrap_err().to_string();
            assert!(err.contains(says), "{location}: {err}");
        }
        let err = location_path("s3://AKIA:s3cret@bucket/x")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cret") && err.contains("***"), "{err}");
    }

    #[test]
    fn the_default_store_is_beside_a_sqlite_file_only() {
        assert_eq!(
            ArtifactStore::folder_beside("sqlite:///dir/criteria.db").unwrap(),
            PathBuf::from("dir/criteria.db.artifacts")
        );
        assert_eq!(
            ArtifactStore::folder_beside("sqlite:////abs/s.db?timeout=3").unwrap(),
            PathBuf::from("/abs/s.db.artifacts")
        );
        for url in ["sqlite::memory:", "memory:"] {
            let err = ArtifactStore::folder_beside(url).unwrap_err().to_string();
            assert!(
                err.contains("give the artifact store's location explicitly"),
                "{err}"
            );
        }
        #[cfg(feature = "postgres")]
        {
            let err = ArtifactStore::folder_beside("postgresql://alice:s3cret@db/optuna")
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("give the artifact store's location explicitly"),
                "{err}"
            );
            assert!(!err.contains("s3cret"), "{err}");
        }
    }
}
