//! Optuna 5.0's schema on PostgreSQL: recognising a database hpo may write
//! to, and creating the schema in one transaction.
//!
//! The version rules are the SQLite storage's (`codec::schema_refusal`): an
//! empty schema gets Optuna's tables, an Optuna study database of schema
//! version 12 is used, anything else is an [`Error::UnusableDatabase`] and
//! nothing is written.

use super::conn::{Db, OpResult};
use crate::error::Error;
use crate::storage::codec::{self, ALEMBIC_VERSION, LIBRARY_VERSION, SCHEMA_VERSION};
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
    match codec::schema_refusal(&tables, version, alembic.as_deref(), target) {
        None => Ok(()),
        Some(reason) => Err(Error::UnusableDatabase {
            target: target.to_owned(),
            reason,
        }
        .into()),
    }
}
