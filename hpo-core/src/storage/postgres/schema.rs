//! Optuna 5.0's schema on PostgreSQL: recognising a database hpo may write
//! to, and creating the schema in one transaction.
//!
//! The version rules are the SQLite storage's (the constants of
//! `storage::codec`, the same refusals in PostgreSQL's words): an
//! empty schema gets Optuna's tables, an Optuna study database of schema
//! version 12 is used, anything else is an [`Error::UnusableDatabase`] and
//! nothing is written.

use super::conn::{Db, OpResult};
use crate::error::Error;
use crate::storage::codec::{ALEMBIC_VERSION, LIBRARY_VERSION, REQUIRED_TABLES, SCHEMA_VERSION};
use postgres::GenericClient;

/// Optuna 5.0.0's DDL as SQLAlchemy emits it for PostgreSQL.
const DDL: &str = include_str!("schema.sql");

/// Advisory-lock class of hpo's locks (the first key of the two-key form);
/// the second key is a study id, or 0 for schema creation.
pub(super) const LOCK_CLASS: i32 = 0x6870_6f00; // "hpo\0"

/// Checks the database's current schema and creates Optuna's tables if it
/// has none, all in the caller's transaction under an advisory lock, so two
/// processes opening a new database at once create the schema once.
pub(super) fn prepare<C: GenericClient>(db: &mut Db<'_, C>, target: &str) -> OpResult<()> {
    db.batch(&format!("SELECT pg_advisory_xact_lock({LOCK_CLASS}, 0)"), 1)?;
    let tables: Vec<String> = db
        .query(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'",
            &[],
        )?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if tables.is_empty() {
        db.batch(DDL, DDL.matches(';').count() as u64)?;
        db.batch(
            &format!(
                "INSERT INTO version_info (version_info_id, schema_version, library_version) \
                 VALUES (1, {SCHEMA_VERSION}, '{LIBRARY_VERSION}'); \
                 INSERT INTO alembic_version (version_num) VALUES ('{ALEMBIC_VERSION}')"
            ),
            2,
        )?;
        return Ok(());
    }
    let has = |t: &str| tables.iter().any(|have| have == t);
    let (version, alembic) = if has("version_info") && has("alembic_version") {
        let version: Option<i32> = db
            .query_opt(
                "SELECT schema_version FROM version_info WHERE version_info_id = 1",
                &[],
            )?
            .and_then(|r| r.get(0));
        let alembic: Option<String> = db
            .query_opt("SELECT version_num::text FROM alembic_version", &[])?
            .map(|r| r.get(0));
        (version.map(i64::from), alembic)
    } else {
        (None, None)
    };
    match schema_refusal(&tables, version, alembic.as_deref(), target) {
        None => Ok(()),
        Some(reason) => Err(Error::UnusableDatabase {
            target: target.to_owned(),
            reason,
        }
        .into()),
    }
}

/// Why a database with these tables, `version_info.schema_version` and
/// `alembic_version.version_num` must not be written by hpo (`None`: it may).
/// `tables` are the tables present; the wording completes "cannot use X as a
/// study database: it ...".
fn schema_refusal(
    tables: &[String],
    version: Option<i64>,
    alembic: Option<&str>,
    upgrade_url: &str,
) -> Option<String> {
    let missing: Vec<&str> = REQUIRED_TABLES
        .iter()
        .copied()
        .filter(|t| !tables.iter().any(|have| have == t))
        .collect();
    if !missing.is_empty() {
        return Some(format!(
            "holds tables but is not an Optuna/hpo study database (missing tables: {}); \
             hpo will not write to it",
            missing.join(", ")
        ));
    }
    let alembic_shown = alembic.unwrap_or("?");
    match version {
        Some(v) if v > SCHEMA_VERSION => Some(format!(
            "has schema version {v} (alembic {alembic_shown}), newer than the version \
             {SCHEMA_VERSION} (Optuna {LIBRARY_VERSION}) this hpo supports; upgrade hpo"
        )),
        Some(v) if v < SCHEMA_VERSION => Some(format!(
            "has the old schema version {v} (alembic {alembic_shown}); upgrade it with \
             `optuna storage upgrade --storage {upgrade_url}` first"
        )),
        None => Some("has no schema version in `version_info`".to_owned()),
        Some(_) if alembic != Some(ALEMBIC_VERSION) => Some(format!(
            "has alembic revision {alembic:?}, expected `{ALEMBIC_VERSION}` for schema \
             version {SCHEMA_VERSION}"
        )),
        Some(_) => None,
    }
}
