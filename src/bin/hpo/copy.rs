//! `hpo copy SRC DST STUDY`: one study, whole, into another storage, with
//! the files its trials stored (artifacts).

use crate::error::{CliError, Result};
use crate::open::{load_study, open_for_writing, open_read_only, redact, storage_error};
use hpo::artifact::{ArtifactMeta, ArtifactStore};
use hpo::Storage;
use std::path::{Path, PathBuf};

/// Where the study's artifacts come from and go to; `None` takes the
/// folder beside the storage's SQLite file.
#[derive(Debug, Default)]
pub struct ArtifactPlaces {
    /// `--artifacts-from`.
    pub from: Option<String>,
    /// `--artifacts-to`.
    pub to: Option<String>,
}

/// What was copied.
#[derive(Debug)]
pub struct Copied {
    /// Trials copied.
    pub trials: usize,
    /// What happened to the artifacts, as a sentence for the user.
    pub artifacts: String,
}

/// Copies study `name` from `src` to `dst`, and its artifacts from the
/// source store to the destination store.
///
/// The destination must not hold a study of that name. If any write fails
/// (a trial, or an artifact's file) the half-copied study is deleted again
/// and the files copied so far are removed, so the destination never keeps
/// half a study.
pub fn copy(src: &str, dst: &str, name: &str, places: &ArtifactPlaces) -> Result<Copied> {
    let from = open_read_only(src)?;
    let data = load_study(from.as_ref(), src, name)?;
    let id = from
        .find_study(name)
        .map_err(|e| storage_error(&e, src))?
        .map(|s| s.id)
        .ok_or_else(|| CliError::Storage(format!("study `{name}` vanished while copying")))?;
    let system_attrs = from
        .study_system_attrs(id)
        .map_err(|e| storage_error(&e, src))?;
    // Every artifact the study and its trials register, read before
    // anything is written.
    let mut metas = ArtifactMeta::from_attrs(&system_attrs).map_err(|e| storage_error(&e, src))?;
    for t in &data.trials {
        metas
            .extend(ArtifactMeta::from_attrs(&t.system_attrs).map_err(|e| storage_error(&e, src))?);
    }
    let plan = plan_artifacts(src, dst, places, &metas)?;
    let to = open_for_writing(dst)?;
    if to
        .find_study(name)
        .map_err(|e| storage_error(&e, dst))?
        .is_some()
    {
        return Err(CliError::Usage(format!(
            "{} already has a study named `{name}`; copy into another storage or delete it there first",
            redact(dst)
        )));
    }
    let new_id = to
        .create_study(name, &data.directions)
        .map_err(|e| storage_error(&e, dst))?;
    let fill = |to: &dyn Storage| -> hpo::Result<()> {
        for (k, v) in &data.user_attrs {
            to.set_study_user_attr(new_id, k, v)?;
        }
        for (k, v) in &system_attrs {
            to.set_study_system_attr(new_id, k, v)?;
        }
        for t in &data.trials {
            to.create_trial(new_id, Some(t))?;
        }
        Ok(())
    };
    if let Err(e) = fill(to.as_ref()) {
        let _ = to.delete_study(new_id);
        return Err(storage_error(&e, dst));
    }
    let artifacts = match plan {
        Plan::Sentence(s) => s,
        Plan::Copy { from, to: into } => match copy_files(&from, &into, &metas) {
            Ok(s) => s,
            Err(e) => {
                let _ = to.delete_study(new_id);
                return Err(e);
            }
        },
    };
    Ok(Copied {
        trials: data.trials.len(),
        artifacts,
    })
}

/// What to do with the artifacts, decided before anything is written.
enum Plan {
    /// Nothing to copy; why, for the user.
    Sentence(String),
    /// Copy every file from one store to the other.
    Copy { from: ArtifactStore, to: PathBuf },
}

fn plan_artifacts(
    src: &str,
    dst: &str,
    places: &ArtifactPlaces,
    metas: &[ArtifactMeta],
) -> Result<Plan> {
    let lib = |e: hpo::Error| CliError::Usage(e.to_string());
    let from = match &places.from {
        Some(location) => {
            let folder = ArtifactStore::folder_of(location).map_err(lib)?;
            if !folder.is_dir() {
                return Err(CliError::Usage(format!(
                    "--artifacts-from: no artifact store at `{}` (no such folder)",
                    folder.display()
                )));
            }
            Some(folder)
        }
        // The default store exists only beside a SQLite file, and only if
        // a trial ever uploaded.
        None => ArtifactStore::folder_beside(src)
            .ok()
            .filter(|f| f.is_dir()),
    };
    let Some(from) = from else {
        return Ok(Plan::Sentence(if metas.is_empty() {
            "no artifact store beside the source; copied the study alone".into()
        } else {
            format!(
                "the study registers {} artifact files but the source has no artifact store \
                 beside it; copied the study alone (give --artifacts-from PATH to carry them)",
                metas.len()
            )
        }));
    };
    if metas.is_empty() {
        return Ok(Plan::Sentence("the study has no artifacts".into()));
    }
    let to = match &places.to {
        Some(location) => ArtifactStore::folder_of(location).map_err(lib)?,
        None => ArtifactStore::folder_beside(dst).map_err(|e| {
            CliError::Usage(format!(
                "{e}; give --artifacts-to PATH for the study's {} artifact files",
                metas.len()
            ))
        })?,
    };
    if same_folder(&from, &to) {
        return Ok(Plan::Sentence(format!(
            "its artifacts stay in {}, shared by both",
            from.display()
        )));
    }
    let from =
        ArtifactStore::open(&from).map_err(|e| storage_error(&e, &from.display().to_string()))?;
    Ok(Plan::Copy { from, to })
}

fn same_folder(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// Copies every registered file that the source store still holds; on an
/// error removes what it copied.
fn copy_files(from: &ArtifactStore, to: &Path, metas: &[ArtifactMeta]) -> Result<String> {
    let lib = |e: hpo::Error| storage_error(&e, &to.display().to_string());
    let created = !to.exists();
    let into = ArtifactStore::open(to).map_err(lib)?;
    let mut copied: Vec<PathBuf> = Vec::new();
    let mut bytes = 0u64;
    let mut removed = 0usize;
    let undo = |copied: &[PathBuf]| {
        for f in copied {
            let _ = std::fs::remove_file(f);
        }
        if created {
            let _ = std::fs::remove_dir(to);
        }
    };
    for meta in metas {
        let dest = into.root().join(&meta.artifact_id);
        let existed = dest.exists();
        match from.copy_into(&into, meta) {
            Ok(Some(n)) => {
                bytes += n;
                if !existed {
                    copied.push(dest);
                }
            }
            Ok(None) => removed += 1,
            Err(e) => {
                undo(&copied);
                return Err(lib(e));
            }
        }
    }
    let mut sentence = format!(
        "{} artifact files ({bytes} bytes) from {} to {}",
        metas.len() - removed,
        from.root().display(),
        into.root().display()
    );
    if removed > 0 {
        sentence.push_str(&format!(
            "; {removed} registered files were not in the source store (removed by cleanup) \
             and were not copied"
        ));
    }
    Ok(sentence)
}
