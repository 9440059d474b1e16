//! What a trial's attributes say about its artifacts, in Optuna's format.
//!
//! Optuna's `upload_artifact` registers an artifact as the trial system
//! attribute `artifacts:<artifact_id>` whose value is a JSON *string*: the
//! text `json.dumps(dataclasses.asdict(ArtifactMeta(...)))`, with the keys
//! `artifact_id`, `filename`, `mimetype` and `encoding` (a string or
//! `null`). hpo writes exactly that text, so Optuna's
//! `get_all_artifact_meta` and optuna-dashboard list hpo's artifacts, and
//! hpo reads the ones Optuna uploaded.

use super::id;
use crate::error::{Error, Result};
use crate::trial::FrozenTrial;
use serde_json::Value;
use std::collections::BTreeMap;

/// Prefix of the system attributes that register artifacts (Optuna's
/// `ARTIFACTS_ATTR_PREFIX`); the key is the prefix and the artifact id.
pub const ARTIFACTS_ATTR_PREFIX: &str = "artifacts:";

/// The MIME type of a file whose type is not guessed from its name
/// (Optuna's `DEFAULT_MIME_TYPE`).
pub const DEFAULT_MIME_TYPE: &str = "application/octet-stream";

/// One artifact as registered on a trial (Optuna's `ArtifactMeta`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactMeta {
    /// The file's name in the store; checked to be a plain file name when
    /// read back ([`ArtifactMeta::from_attr`]).
    pub artifact_id: String,
    /// The name the artifact was uploaded under.
    pub filename: String,
    /// Its MIME type, guessed from the name's extension for common types as
    /// Python's `mimetypes` guesses them (`application/octet-stream` otherwise).
    pub mimetype: String,
    /// Its content encoding (`gzip` for `.gz`, ...), if any.
    pub encoding: Option<String>,
}

impl ArtifactMeta {
    /// The metadata of a new artifact `name`, type and encoding guessed
    /// from its extension.
    pub(crate) fn new(artifact_id: String, name: &str) -> Self {
        let (mimetype, encoding) = guess_type(name);
        ArtifactMeta {
            artifact_id,
            filename: name.to_owned(),
            mimetype: mimetype.unwrap_or(DEFAULT_MIME_TYPE).to_owned(),
            encoding: encoding.map(str::to_owned),
        }
    }

    /// The system attribute key registering this artifact.
    pub fn attr_key(&self) -> String {
        format!("{ARTIFACTS_ATTR_PREFIX}{}", self.artifact_id)
    }

    /// The attribute's value as Optuna writes it: a JSON string holding the
    /// text Python's `json.dumps` gives for the metadata (`", "` and `": "`
    /// separators, non-ASCII escaped as `\uXXXX`).
    pub fn to_attr(&self) -> Value {
        let encoding = self
            .encoding
            .as_deref()
            .map_or_else(|| "null".to_owned(), python_json_string);
        Value::String(format!(
            "{{\"artifact_id\": {}, \"filename\": {}, \"mimetype\": {}, \"encoding\": {}}}",
            python_json_string(&self.artifact_id),
            python_json_string(&self.filename),
            python_json_string(&self.mimetype),
            encoding
        ))
    }

    /// Reads the attribute `key` = `value` registering an artifact. The value
    /// is Optuna's JSON string (a JSON object is accepted too); the id must
    /// be a plain file name ([`Error::InvalidArtifactId`] otherwise) and
    /// agree with the key.
    pub fn from_attr(key: &str, value: &Value) -> Result<Self> {
        let bad = |reason: String| Error::Parse {
            what: format!("artifact attribute `{}`", key.escape_debug()),
            reason,
            source: None,
        };
        let parsed;
        let object = match value {
            Value::String(text) => {
                parsed = serde_json::from_str::<Value>(text).map_err(|e| Error::Parse {
                    what: format!("artifact attribute `{}`", key.escape_debug()),
                    reason: "its value is not the JSON text Optuna writes".into(),
                    source: Some(Box::new(e)),
                })?;
                &parsed
            }
            other => other,
        };
        let object = object
            .as_object()
            .ok_or_else(|| bad(format!("expected a JSON object, found {object}")))?;
        let text = |field: &str| -> Result<String> {
            match object.get(field) {
                Some(Value::String(s)) => Ok(s.clone()),
                other => Err(bad(format!(
                    "`{field}` must be a string, found {}",
                    other.map_or_else(|| "nothing".to_owned(), Value::to_string)
                ))),
            }
        };
        let artifact_id = text("artifact_id")?;
        id::check(&artifact_id)?;
        let from_key = key.strip_prefix(ARTIFACTS_ATTR_PREFIX).unwrap_or(key);
        if from_key != artifact_id {
            return Err(bad(format!(
                "the key names id `{}` but the value `{}`",
                from_key.escape_debug(),
                artifact_id
            )));
        }
        let encoding = match object.get("encoding") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(other) => {
                return Err(bad(format!(
                    "`encoding` must be a string or null, found {other}"
                )))
            }
        };
        Ok(ArtifactMeta {
            artifact_id,
            filename: text("filename")?,
            mimetype: text("mimetype")?,
            encoding,
        })
    }

    /// Every artifact registered on `trial` (or in any attribute map with
    /// Optuna's keys), each once, in upload order for hpo's ids (which sort
    /// by time). A name uploaded twice appears twice.
    pub fn all(trial: &FrozenTrial) -> Result<Vec<ArtifactMeta>> {
        Self::from_attrs(&trial.system_attrs)
    }

    /// [`ArtifactMeta::all`] on an attribute map: a trial's system attributes, or a
    /// study's (Optuna also registers artifacts on studies).
    pub fn from_attrs(attrs: &BTreeMap<String, Value>) -> Result<Vec<ArtifactMeta>> {
        attrs
            .iter()
            .filter(|(k, _)| k.starts_with(ARTIFACTS_ATTR_PREFIX))
            .map(|(k, v)| ArtifactMeta::from_attr(k, v))
            .collect()
    }

    /// The artifacts of `trial`, one per name (the latest upload of each),
    /// sorted by name.
    pub fn list(trial: &FrozenTrial) -> Result<Vec<ArtifactMeta>> {
        let mut latest: BTreeMap<String, ArtifactMeta> = BTreeMap::new();
        for meta in Self::all(trial)? {
            // `all` is ordered by id, so a later entry is a later upload.
            latest.insert(meta.filename.clone(), meta);
        }
        Ok(latest.into_values().collect())
    }

    /// The latest artifact of `trial` named `name`.
    pub fn find(trial: &FrozenTrial, name: &str) -> Result<ArtifactMeta> {
        let list = Self::list(trial)?;
        let available: Vec<String> = list.iter().map(|m| m.filename.clone()).collect();
        list.into_iter()
            .find(|m| m.filename == name)
            .ok_or_else(|| Error::ArtifactNotFound {
                trial: trial.number,
                name: name.to_owned(),
                available,
            })
    }
}

/// Checks a name given to an upload: a plain file name (Optuna's `filename`
/// is a base name), so that whoever saves the artifact under its name
/// writes inside the folder they chose.
pub(crate) fn check_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("it is empty")
    } else if name == "." || name == ".." {
        Some("it is `.` or `..`")
    } else if name.contains(['/', '\\']) {
        Some("it contains a path separator")
    } else if name.chars().any(char::is_control) {
        Some("it contains a control character")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(Error::InvalidOperation(format!(
            "artifact name `{}` is refused: {reason}; name an artifact as a plain file name \
             (`model.safetensors`, `predictions.csv`)",
            name.escape_debug()
        ))),
        None => Ok(()),
    }
}

/// A JSON string literal as Python's `json.dumps` writes it (`ensure_ascii`),
/// through the storage codec's own writer.
fn python_json_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    crate::distribution::python_json_string(s, &mut out);
    out
}

/// The MIME type and encoding of a file name, for the types a training run
/// stores, as Python's `mimetypes.guess_type` gives them.
fn guess_type(name: &str) -> (Option<&'static str>, Option<&'static str>) {
    let lower = name.to_ascii_lowercase();
    let (stem, encoding) = match lower.rsplit_once('.') {
        Some((stem, "gz")) => (stem, Some("gzip")),
        Some((stem, "bz2")) => (stem, Some("bzip2")),
        Some((stem, "xz")) => (stem, Some("xz")),
        Some((stem, "br")) => (stem, Some("br")),
        _ => (lower.as_str(), None),
    };
    let mime = match stem.rsplit_once('.').map(|(_, ext)| ext) {
        Some("json") => Some("application/json"),
        Some("txt") => Some("text/plain"),
        Some("csv") => Some("text/csv"),
        Some("tsv") => Some("text/tab-separated-values"),
        Some("html" | "htm") => Some("text/html"),
        Some("md") => Some("text/markdown"),
        Some("png") => Some("image/png"),
        Some("jpg" | "jpeg") => Some("image/jpeg"),
        Some("gif") => Some("image/gif"),
        Some("svg") => Some("image/svg+xml"),
        Some("pdf") => Some("application/pdf"),
        Some("zip") => Some("application/zip"),
        Some("tar") => Some("application/x-tar"),
        _ => None,
    };
    (mime, encoding)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trial::TrialState;

    /// What Python Optuna 5.0 stores for `upload_artifact(..., file_path="model.pt")`:
    /// `json.dumps(asdict(ArtifactMeta(...)))`, then the storage's own
    /// `json.dumps` of that string in `trial_system_attributes.value_json`.
    const OPTUNA_VALUE_JSON: &str = r#""{\"artifact_id\": \"0b5e5a4e-3c4f-4b9e-9a51-2f1a9f0c8d7e\", \"filename\": \"model.pt\", \"mimetype\": \"application/octet-stream\", \"encoding\": null}""#;
    const OPTUNA_ID: &str = "0b5e5a4e-3c4f-4b9e-9a51-2f1a9f0c8d7e";

    #[test]
    fn optunas_value_is_read() {
        let value: Value = serde_json::from_str(OPTUNA_VALUE_JSON).unwrap();
        let meta = ArtifactMeta::from_attr(&format!("artifacts:{OPTUNA_ID}"), &value).unwrap();
        assert_eq!(
            meta,
            ArtifactMeta {
                artifact_id: OPTUNA_ID.into(),
                filename: "model.pt".into(),
                mimetype: "application/octet-stream".into(),
                encoding: None,
            }
        );
        // And written back byte for byte as Optuna wrote it.
        assert_eq!(
            serde_json::to_string(&meta.to_attr()).unwrap(),
            OPTUNA_VALUE_JSON
        );
        assert_eq!(meta.attr_key(), format!("artifacts:{OPTUNA_ID}"));
    }

    #[test]
    fn the_value_is_pythons_json_dumps() {
        let meta = ArtifactMeta::new("id-1".into(), "prédictions \"v2\".csv.gz");
        assert_eq!(
            meta.to_attr(),
            Value::String(
                r#"{"artifact_id": "id-1", "filename": "pr\u00e9dictions \"v2\".csv.gz", "mimetype": "text/csv", "encoding": "gzip"}"#
                    .into()
            )
        );
        // Round trip, astral characters as surrogate pairs as Python writes them.
        let meta = ArtifactMeta::new("id-2".into(), "🙂.json");
        let Value::String(text) = meta.to_attr() else {
            unreachable!()
        };
        assert!(text.contains(r#""\ud83d\ude42.json""#), "{text}");
        assert_eq!(
            ArtifactMeta::from_attr("artifacts:id-2", &meta.to_attr()).unwrap(),
            meta
        );
        assert_eq!(meta.mimetype, "application/json");
        assert_eq!(meta.encoding, None);
        assert_eq!(
            ArtifactMeta::new("x".into(), "weights.safetensors").mimetype,
            DEFAULT_MIME_TYPE
        );
    }

    #[test]
    fn a_traversal_in_a_stored_id_is_refused() {
        for id in ["../../etc/passwd", "/etc/passwd", "..", "a\\b", ""] {
            let value = Value::String(format!(
                r#"{{"artifact_id": "{}", "filename": "x", "mimetype": "a/b", "encoding": null}}"#,
                id.replace('\\', "\\\\")
            ));
            let err = ArtifactMeta::from_attr(&format!("artifacts:{id}"), &value).unwrap_err();
            assert!(
                matches!(err, Error::InvalidArtifactId { .. }),
                "{id}: {err}"
            );
        }
    }

    #[test]
    fn malformed_values_are_parse_errors() {
        for (key, value) in [
            ("artifacts:a", Value::String("not json".into())),
            ("artifacts:a", Value::from(3)),
            (
                "artifacts:a",
                Value::String(r#"{"artifact_id": "a", "filename": 1, "mimetype": "x"}"#.into()),
            ),
            (
                "artifacts:b",
                Value::String(
                    r#"{"artifact_id": "a", "filename": "f", "mimetype": "x", "encoding": null}"#
                        .into(),
                ),
            ),
        ] {
            let err = ArtifactMeta::from_attr(key, &value).unwrap_err();
            assert!(matches!(err, Error::Parse { .. }), "{value}: {err}");
        }
    }

    #[test]
    fn the_latest_upload_of_a_name_wins() {
        let mut t = FrozenTrial::new(1, 4, TrialState::Complete);
        let first = ArtifactMeta::new(id::new(None), "model.bin");
        let other = ArtifactMeta::new(id::new(Some(&first.artifact_id)), "preds.csv");
        let second = ArtifactMeta::new(id::new(Some(&other.artifact_id)), "model.bin");
        for m in [&second, &first, &other] {
            t.system_attrs.insert(m.attr_key(), m.to_attr());
        }
        t.system_attrs.insert("fixed_params".into(), Value::Null);
        assert_eq!(ArtifactMeta::all(&t).unwrap().len(), 3);
        assert_eq!(ArtifactMeta::list(&t).unwrap(), [second.clone(), other]);
        assert_eq!(ArtifactMeta::find(&t, "model.bin").unwrap(), second);
        let err = ArtifactMeta::find(&t, "nope").unwrap_err().to_string();
        assert!(
            err.contains("trial 4 has no artifact named `nope`; it has model.bin, preds.csv"),
            "{err}"
        );
    }

    #[test]
    fn upload_names_are_plain_file_names() {
        for bad in ["", ".", "..", "a/b", "..\\x", "a\nb"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        for good in ["model.safetensors", "a b.txt", "é.csv", "..x"] {
            check_name(good).unwrap();
        }
    }
}
