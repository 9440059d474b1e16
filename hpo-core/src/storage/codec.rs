//! Optuna's value conventions in the RDB schema, shared by every SQL dialect
//! (SQLite and PostgreSQL), and the schema's identity (version, alembic
//! revision, tables) that both dialects check before writing.
//!
//! * Floats that may be infinite or NaN are stored as `NULL` plus a type
//!   column (`FINITE`, `INF_POS`, `INF_NEG`, `NAN`).
//! * Datetimes are naive UTC text with microseconds, `YYYY-MM-DD HH:MM:SS.ffffff`,
//!   as SQLAlchemy writes them.
//! * Attribute values are JSON text written as Python's `json.dumps` writes it
//!   (separators `", "` and `": "`, `repr` floats, ASCII escapes), so rows
//!   written by hpo are byte-identical to Optuna's.

use crate::distribution::{python_float_repr, python_json_string};
use crate::error::{Error, Result};
use chrono::{DateTime, NaiveDateTime, Utc};
use serde_json::Value;

/// The schema version in `version_info` (Optuna's `SCHEMA_VERSION`).
pub(crate) const SCHEMA_VERSION: i64 = 12;
/// The alembic revision Optuna 5.0 stamps on its databases.
pub(crate) const ALEMBIC_VERSION: &str = "v3.2.0.a";
/// The Optuna version whose schema this is, written to `version_info.library_version`.
pub(crate) const LIBRARY_VERSION: &str = "5.0.0";

/// Tables every Optuna study database has.
pub(crate) const REQUIRED_TABLES: [&str; 12] = [
    "studies",
    "version_info",
    "study_directions",
    "study_user_attributes",
    "study_system_attributes",
    "trials",
    "trial_user_attributes",
    "trial_system_attributes",
    "trial_params",
    "trial_values",
    "trial_intermediate_values",
    "alembic_version",
];

/// The SQLAlchemy datetime text format.
const DATETIME_FORMAT: &str = "%Y-%m-%d %H:%M:%S%.6f";

/// The current time at the stored precision (microseconds), so a record
/// returned by a write equals the record read back later.
pub(crate) fn now() -> DateTime<Utc> {
    use chrono::DurationRound;
    let t = Utc::now();
    t.duration_trunc(chrono::TimeDelta::microseconds(1))
        .unwrap_or(t)
}

/// `2026-11-22 01:49:28.860921` for a UTC instant.
pub(crate) fn format_datetime(t: DateTime<Utc>) -> String {
    t.naive_utc().format(DATETIME_FORMAT).to_string()
}

/// Parses a stored datetime (with or without fractional seconds) as UTC.
pub(crate) fn parse_datetime(s: &str) -> Result<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f")
        .or_else(|_| NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S%.f"))
        .map(|n| n.and_utc())
        .map_err(|e| Error::Parse {
            what: format!("datetime `{s}`"),
            reason: "it is not a date and time as hpo or Optuna store them".into(),
            source: Some(Box::new(e)),
        })
}

/// A float as `(value, type)` columns.
pub(crate) fn encode_float(x: f64) -> (Option<f64>, &'static str) {
    if x.is_nan() {
        (None, "NAN")
    } else if x == f64::INFINITY {
        (None, "INF_POS")
    } else if x == f64::NEG_INFINITY {
        (None, "INF_NEG")
    } else {
        (Some(x), "FINITE")
    }
}

/// The float stored as `(value, type)` columns.
pub(crate) fn decode_float(value: Option<f64>, kind: &str) -> Result<f64> {
    match (kind, value) {
        ("FINITE", Some(v)) => Ok(v),
        ("INF_POS", _) => Ok(f64::INFINITY),
        ("INF_NEG", _) => Ok(f64::NEG_INFINITY),
        ("NAN", _) => Ok(f64::NAN),
        (k, v) => Err(Error::Parse {
            what: "stored value".into(),
            reason: format!(
                "value {v:?} with type `{k}` (expected FINITE, INF_POS, INF_NEG or NAN)"
            ),
            source: None,
        }),
    }
}

/// JSON text exactly as Python's `json.dumps(value)` writes it.
pub(crate) fn python_json(v: &Value) -> String {
    let mut out = String::new();
    write_json(v, &mut out);
    out
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (None, Some(u), _) => out.push_str(&u.to_string()),
            (None, None, Some(f)) => out.push_str(&python_float_repr(f)),
            _ => out.push_str(&n.to_string()),
        },
        Value::String(s) => python_json_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_json_string(k, out);
                out.push_str(": ");
                write_json(item, out);
            }
            out.push('}');
        }
    }
}

/// Parses attribute JSON. Python writes non-finite floats as the bare tokens
/// `NaN`, `Infinity` and `-Infinity`, which are not JSON; as a fallback those
/// tokens (outside strings) are read as `null`, the value serde_json uses for them.
pub(crate) fn parse_json(what: &str, text: &str) -> Result<Value> {
    serde_json::from_str(text).or_else(|first| {
        let cleaned = replace_non_finite_tokens(text);
        serde_json::from_str(&cleaned).map_err(|_| Error::Parse {
            what: what.to_owned(),
            reason: format!("`{text}` is not JSON"),
            source: Some(Box::new(first)),
        })
    })
}

fn replace_non_finite_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        if in_string {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
            }
            rest = &rest[c.len_utf8()..];
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        let token = ["-Infinity", "Infinity", "NaN"]
            .into_iter()
            .find(|t| rest.starts_with(t));
        match token {
            Some(t) => {
                out.push_str("null");
                rest = &rest[t.len()..];
            }
            None => {
                out.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_is_written_like_python() {
        assert_eq!(
            python_json(&json!({"a": [1, 2], "b": null})),
            r#"{"a": [1, 2], "b": null}"#
        );
        assert_eq!(
            python_json(&json!(["ref", 1, 2.5, null])),
            r#"["ref", 1, 2.5, null]"#
        );
        assert_eq!(
            python_json(&json!([1.0, 1e-5, "é"])),
            r#"[1.0, 1e-05, "\u00e9"]"#
        );
        assert_eq!(python_json(&json!("trial 0")), r#""trial 0""#);
    }

    #[test]
    fn python_non_finite_tokens_read_as_null() {
        let v = parse_json("attr", r#"{"a": NaN, "b": [-Infinity, "NaN"]}"#).unwrap();
        assert_eq!(v, json!({"a": null, "b": [null, "NaN"]}));
        assert!(parse_json("attr", "{oops").is_err());
    }

    #[test]
    fn datetimes_round_trip_with_microseconds() {
        let t = parse_datetime("2026-11-22 01:49:28.860921").unwrap();
        assert_eq!(format_datetime(t), "2026-11-22 01:49:28.860921");
        let t = parse_datetime("2026-11-22 01:49:28").unwrap();
        assert_eq!(format_datetime(t), "2026-11-22 01:49:28.000000");
    }

    #[test]
    fn floats_round_trip_through_type_columns() {
        for x in [1.5, f64::INFINITY, f64::NEG_INFINITY] {
            let (v, k) = encode_float(x);
            assert_eq!(decode_float(v, k).unwrap(), x);
        }
        let (v, k) = encode_float(f64::NAN);
        assert!(decode_float(v, k).unwrap().is_nan());
        assert!(decode_float(None, "FINITE").is_err());
    }
}
