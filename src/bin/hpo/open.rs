//! Opening a storage for reading, and loading one study from it.
//!
//! All opening goes through [`open_read_only`], so that the command has one
//! place where it decides how a database is opened. A missing or empty file
//! is refused before the storage is opened (opening would create a study
//! database there), and so is a file that is not a study database.

use crate::error::{CliError, Result};
use hpo::storage::{storage_from_url, storage_from_url_read_only};
use hpo::{Direction, FrozenTrial, Storage};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// A storage URL with its password (if any) hidden, for messages: the
/// library's redaction, so the command and the library hide the same thing.
pub fn redact(url: &str) -> String {
    hpo::storage::redact(url)
}

/// Removes the URL's password from any message that might repeat it, as
/// written or percent-decoded (the library's [`hpo::storage::scrub`]).
pub fn scrub(message: &str, url: &str) -> String {
    hpo::storage::scrub(message, url)
}

/// Opens an existing study database for reading.
///
/// The storage is opened through [`storage_from_url_read_only`], which never
/// writes a byte (a SQLite file is opened with `mode=ro`); a SQLite file must
/// also exist and be non-empty, which is checked first for a clearer message.
pub fn open_read_only(url: &str) -> Result<Arc<dyn Storage>> {
    // The file as the library reads the URL (query, percent escapes).
    let file = hpo::storage::sqlite_file(url).map_err(|e| storage_error(&e, url))?;
    if let Some(path) = file {
        match std::fs::metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(CliError::MissingFile(path))
            }
            Ok(meta) if meta.is_file() && meta.len() == 0 => {
                return Err(CliError::NotAStudyDatabase {
                    path,
                    reason: "the file is empty".into(),
                })
            }
            _ => {}
        }
    }
    storage_from_url_read_only(url).map_err(|e| storage_error(&e, url))
}

/// Opens a storage to write to (the destination of `hpo copy`).
pub fn open_for_writing(url: &str) -> Result<Arc<dyn Storage>> {
    storage_from_url(url).map_err(|e| storage_error(&e, url))
}

/// A storage error as one line with the URL's password removed.
pub fn storage_error(e: &hpo::Error, url: &str) -> CliError {
    match e {
        hpo::Error::UnusableStorageFile { path, reason, .. } => CliError::NotAStudyDatabase {
            path: path.clone(),
            // The reason, then its causes (what SQLite or the OS said).
            reason: scrub(&format!("{reason}{}", causes(e)), url),
        },
        other => CliError::Storage(scrub(&with_causes(other), url)),
    }
}

/// An error's message followed by its causes, on one line.
fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    format!("{e}{}", causes(e))
}

/// An error's causes as `: cause: cause` (empty when it has none).
fn causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = String::new();
    let mut cause = e.source();
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

/// One study, read whole.
#[derive(Debug, Clone)]
pub struct StudyData {
    /// Its name.
    pub name: String,
    /// One direction per objective.
    pub directions: Vec<Direction>,
    /// Study user attributes.
    pub user_attrs: BTreeMap<String, Value>,
    /// Every trial, by number.
    pub trials: Vec<Arc<FrozenTrial>>,
}

/// Loads the study `name`, or says which studies exist.
pub fn load_study(storage: &dyn Storage, url: &str, name: &str) -> Result<StudyData> {
    let err = |e: hpo::Error| storage_error(&e, url);
    let Some(summary) = storage.find_study(name).map_err(err)? else {
        let existing = storage
            .studies()
            .map_err(err)?
            .into_iter()
            .map(|s| s.name)
            .collect();
        return Err(CliError::StudyNotFound {
            name: name.to_owned(),
            url: redact(url),
            existing,
        });
    };
    let mut trials = storage.trials(summary.id).map_err(err)?;
    trials.sort_by_key(|t| t.number);
    Ok(StudyData {
        name: summary.name,
        directions: summary.directions,
        user_attrs: storage.study_user_attrs(summary.id).map_err(err)?,
        trials,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_survive_redaction() {
        let url = "postgresql://alice:s3cr%40t@db.example:5432/hpo";
        assert_eq!(redact(url), "postgresql://alice:***@db.example:5432/hpo");
        let msg = format!("cannot connect to {url} (password s3cr%40t rejected)");
        let clean = scrub(&msg, url);
        assert!(!clean.contains("s3cr"), "{clean}");
        assert_eq!(redact("sqlite:study.db"), "sqlite:study.db");
        assert_eq!(
            redact("postgresql://bob@host/db"),
            "postgresql://bob@host/db"
        );
    }

    #[test]
    fn a_decoded_password_is_scrubbed_too() {
        let url = "postgresql://alice:s3cr%40t@db.example:5432/hpo";
        let msg = "password authentication failed: s3cr@t";
        assert!(!scrub(msg, url).contains("s3cr@t"));
    }
}
