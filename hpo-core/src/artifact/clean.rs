//! Which trials keep their files after a study, and the sweep of files no
//! trial references.

use super::atomic::TEMP_PREFIX;
use super::id;
use super::meta::{ArtifactMeta, ARTIFACTS_ATTR_PREFIX};
use super::store::ArtifactStore;
use crate::error::{Error, Result};
use crate::storage::Storage;
use crate::study::Study;
use crate::trial::{FrozenTrial, TrialState};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// How long a file must have been untouched before
/// [`ArtifactStore::sweep_orphans`] may take it for an orphan: a worker may
/// be between writing a file and registering it, or copying a large one.
pub const DEFAULT_ORPHAN_GRACE: Duration = Duration::from_secs(3600);

/// Which finished trials keep their artifacts' files ([`ArtifactStore::clean`]).
///
/// RUNNING and WAITING trials always keep theirs (they may be uploading).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeepArtifacts {
    /// Every trial keeps its files.
    All,
    /// COMPLETE trials keep theirs; PRUNED and FAIL trials lose them.
    Finished,
    /// Only the `k` best COMPLETE trials of a single-objective study (by its
    /// direction; ties: lower number first) keep theirs. On a
    /// multi-objective study, where "the k best" is not defined, it is an
    /// [`Error::InvalidOperation`]: use [`KeepArtifacts::Pareto`].
    Best(usize),
    /// Only the Pareto-optimal COMPLETE trials ([`Study::best_trials`]) keep
    /// theirs; on a single-objective study, the trials sharing the best value.
    Pareto,
}

/// What [`ArtifactStore::clean`] or [`ArtifactStore::sweep_orphans`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CleanReport {
    /// Files of trials the policy did not keep: `(trial number, artifact)`.
    pub removed: Vec<(u64, ArtifactMeta)>,
    /// Files no trial or study references, and temporary files a crash left
    /// behind (file names in the store).
    pub orphans: Vec<String>,
    /// Bytes freed.
    pub bytes: u64,
}

impl ArtifactStore {
    /// Deletes the files of `study`'s finished trials that `keep` does not
    /// keep, and reports them.
    ///
    /// A finished trial's attributes cannot change, so its attributes still
    /// register the artifact; looking it up then fails with
    /// [`Error::ArtifactRemoved`]. Files already gone are skipped. The store
    /// must be the one the study's trials uploaded to.
    pub fn clean(&self, study: &Study, keep: KeepArtifacts) -> Result<CleanReport> {
        let trials = study.trials()?;
        let kept: BTreeSet<u64> = match keep {
            KeepArtifacts::All => return Ok(CleanReport::default()),
            KeepArtifacts::Finished => complete(&trials).map(|t| t.id).collect(),
            KeepArtifacts::Best(k) => {
                let [direction] = study.directions() else {
                    return Err(Error::InvalidOperation(format!(
                        "`KeepArtifacts::Best({k})` needs a single-objective study, but `{}` has \
                         {} objectives; keep `KeepArtifacts::Pareto` (the Pareto front) or \
                         `KeepArtifacts::Finished`",
                        study.name(),
                        study.directions().len()
                    )));
                };
                let mut ranked: Vec<(f64, u64, u64)> = complete(&trials)
                    .filter_map(|t| Some((direction.to_loss(t.value()?), t.number, t.id)))
                    .collect();
                ranked.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                ranked.into_iter().take(k).map(|(_, _, id)| id).collect()
            }
            KeepArtifacts::Pareto => study.best_trials()?.iter().map(|t| t.id).collect(),
        };
        let mut report = CleanReport::default();
        for trial in trials.iter().filter(|t| t.state.is_finished()) {
            if kept.contains(&trial.id) {
                continue;
            }
            for meta in ArtifactMeta::all(trial)? {
                let file = self.file(&meta)?;
                if let Some(bytes) = remove(&file)? {
                    report.bytes += bytes;
                    report.removed.push((trial.number, meta));
                }
            }
        }
        Ok(report)
    }

    /// Deletes the files in the store that no trial or study of `storage`
    /// references and that have not been modified for `grace`
    /// ([`DEFAULT_ORPHAN_GRACE`] is an hour), and temporary files older
    /// than `grace`; returns their names.
    ///
    /// A crash between writing an artifact and registering it leaves such
    /// a file. The grace spares a worker that is between the two, or still
    /// copying: make it longer than any upload takes. Only files named as
    /// hpo and Optuna name artifacts (a UUID) are candidates: anything else
    /// in the folder is left alone. The store must serve this one
    /// storage: files registered in another storage would look unreferenced.
    pub fn sweep_orphans(&self, storage: &dyn Storage, grace: Duration) -> Result<CleanReport> {
        let referenced = referenced_ids(storage)?;
        let entries = std::fs::read_dir(self.root()).map_err(|source| Error::ArtifactIo {
            path: self.root().to_path_buf(),
            message: "cannot list the artifact store".into(),
            source,
        })?;
        let now = SystemTime::now();
        let mut report = CleanReport::default();
        for entry in entries {
            let entry = entry.map_err(|source| Error::ArtifactIo {
                path: self.root().to_path_buf(),
                message: "cannot list the artifact store".into(),
                source,
            })?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let orphan = name.starts_with(TEMP_PREFIX)
                || (id::is_uuid(&name) && !referenced.contains(&name));
            if !orphan {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            let age = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or(Duration::ZERO);
            if !meta.is_file() || age < grace {
                continue;
            }
            if let Some(bytes) = remove(&entry.path())? {
                report.bytes += bytes;
                report.orphans.push(name);
            }
        }
        report.orphans.sort();
        Ok(report)
    }
}

/// The COMPLETE trials.
fn complete(trials: &[Arc<FrozenTrial>]) -> impl Iterator<Item = &Arc<FrozenTrial>> {
    trials.iter().filter(|t| t.state == TrialState::Complete)
}

/// Every artifact id any trial or study of `storage` registers, read
/// leniently (the key's id and the value's, even from a malformed value):
/// what might be referenced is never swept.
fn referenced_ids(storage: &dyn Storage) -> Result<BTreeSet<String>> {
    let mut ids = BTreeSet::new();
    let mut add = |attrs: &std::collections::BTreeMap<String, serde_json::Value>| {
        for (key, value) in attrs {
            let Some(from_key) = key.strip_prefix(ARTIFACTS_ATTR_PREFIX) else {
                continue;
            };
            ids.insert(from_key.to_owned());
            let object = match value {
                serde_json::Value::String(text) => serde_json::from_str(text).ok(),
                other => Some(other.clone()),
            };
            if let Some(id) = object
                .as_ref()
                .and_then(|o| o.get("artifact_id"))
                .and_then(serde_json::Value::as_str)
            {
                ids.insert(id.to_owned());
            }
        }
    };
    for study in storage.studies()? {
        add(&storage.study_system_attrs(study.id)?);
        for trial in storage.trials(study.id)? {
            add(&trial.system_attrs);
        }
    }
    Ok(ids)
}

/// Removes `file`; its size, or `None` when it was already gone.
fn remove(file: &std::path::Path) -> Result<Option<u64>> {
    let bytes = match std::fs::metadata(file) {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(_) => 0,
    };
    match std::fs::remove_file(file) {
        Ok(()) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(Error::ArtifactIo {
            path: file.to_path_buf(),
            message: "cannot remove the artifact".into(),
            source,
        }),
    }
}
