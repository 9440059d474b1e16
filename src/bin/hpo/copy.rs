//! `hpo copy SRC DST STUDY`: one study, whole, into another storage.

use crate::error::{CliError, Result};
use crate::open::{load_study, open_for_writing, open_read_only, redact, storage_error};
use hpo::Storage;

/// Copies study `name` from `src` to `dst` and returns the number of trials.
///
/// The destination must not hold a study of that name. If any write fails
/// the half-copied study is deleted again, so the destination never keeps
/// half a study.
pub fn copy(src: &str, dst: &str, name: &str) -> Result<usize> {
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
    Ok(data.trials.len())
}
