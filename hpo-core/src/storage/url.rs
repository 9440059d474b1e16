//! Opening a storage from a URL.

use super::{InMemoryStorage, SqliteStorage, Storage};
use crate::error::{Error, Result};
use std::sync::Arc;

/// Opens the storage a URL names.
///
/// | URL | storage |
/// | --- | --- |
/// | `sqlite:path/to/study.db` | [`SqliteStorage`] on that file (relative to the working directory) |
/// | `sqlite:///path/to/study.db`, `sqlite:////abs/study.db` | the same, in SQLAlchemy's (Optuna's) spelling |
/// | `sqlite::memory:` | a private in-memory SQLite database |
/// | `memory:` | an [`InMemoryStorage`] |
///
/// | `postgresql://user@host:5432/db` (also `postgres://`, `postgresql+psycopg://`) | `PostgresStorage` (feature `postgres`) |
///
/// `mysql://` is recognised and rejected with "not supported yet"; anything
/// else is an [`Error::InvalidStorageUrl`] that says what was expected. A
/// password in a URL is never repeated in an error.
///
/// ```
/// # fn main() -> hpo_core::Result<()> {
/// let storage = hpo_core::storage::storage_from_url("sqlite::memory:")?;
/// assert!(storage.studies()?.is_empty());
/// /// # Ok(())
/// # }
/// ```
pub fn storage_from_url(url: &str) -> Result<Arc<dyn Storage>> {
    let bad = |reason: &str| Error::InvalidStorageUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let Some((scheme, rest)) = url.split_once(':') else {
        return Err(bad(
            "it has no scheme; write `sqlite:path/to/study.db` or `sqlite::memory:`",
        ));
    };
    match scheme.to_ascii_lowercase().as_str() {
        "sqlite" => {
            if rest == ":memory:" || rest == "///:memory:" {
                return Ok(Arc::new(SqliteStorage::in_memory()?));
            }
            // SQLAlchemy spelling: `sqlite:///relative.db`, `sqlite:////absolute.db`.
            let path = rest.strip_prefix("///").unwrap_or(rest);
            if path.starts_with("//") && !rest.starts_with("///") {
                return Err(bad("a SQLite URL names a file: `sqlite:study.db` or `sqlite:////abs/study.db`"));
            }
            if path.is_empty() {
                return Err(bad("the SQLite file path is empty"));
            }
            Ok(Arc::new(SqliteStorage::open(path)?))
        }
        "memory" | "inmemory" if rest.is_empty() => Ok(Arc::new(InMemoryStorage::new())),
        "postgresql" | "postgres" | "postgresql+psycopg" | "postgresql+psycopg2" => open_postgres(url),
        "mysql" | "mysql+pymysql" => Err(bad(&format!(
            "the `{scheme}` storage is not supported yet; use `sqlite:path/to/study.db`"
        ))),
        _ => Err(bad(&format!(
            "unknown scheme `{scheme}`; supported: `sqlite:path/to/study.db`, `sqlite::memory:`, `memory:`"
        ))),
    }
}

/// A `postgresql://` URL: the PostgreSQL storage, when built in.
#[cfg(feature = "postgres")]
fn open_postgres(url: &str) -> Result<Arc<dyn Storage>> {
    Ok(Arc::new(super::PostgresStorage::open(url)?))
}

/// A `postgresql://` URL in a build without the `postgres` feature.
#[cfg(not(feature = "postgres"))]
fn open_postgres(url: &str) -> Result<Arc<dyn Storage>> {
    Err(Error::InvalidStorageUrl {
        url: redact_password(url),
        reason: "this build of hpo has no PostgreSQL storage; enable the `postgres` feature \
                 (`hpo = { features = [\"postgres\"] }`)"
            .to_owned(),
    })
}

#[cfg(not(feature = "postgres"))]
fn redact_password(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => match rest.split_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split(':').next().unwrap_or_default();
                format!("{scheme}://{user}:***@{host}")
            }
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(url: &str) -> String {
        match storage_from_url(url) {
            Err(Error::InvalidStorageUrl { reason, .. }) => reason,
            Err(other) => panic!("expected an invalid-URL error for {url}, got {other}"),
            Ok(_) => panic!("{url} opened a storage"),
        }
    }

    #[test]
    fn memory_urls_open() {
        assert!(storage_from_url("sqlite::memory:")
            .unwrap()
            .studies()
            .unwrap()
            .is_empty());
        assert!(storage_from_url("memory:")
            .unwrap()
            .studies()
            .unwrap()
            .is_empty());
    }

    #[test]
    fn file_urls_open_in_both_spellings() {
        let dir = std::env::temp_dir().join(format!("hpo-url-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a.db");
        storage_from_url(&format!("sqlite:{}", a.display())).unwrap();
        assert!(a.exists());
        let b = dir.join("b.db");
        storage_from_url(&format!("sqlite:///{}", b.display())).unwrap();
        assert!(b.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_and_unsupported_schemes_are_explained() {
        assert!(reason("mysql://u@h/db").contains("not supported yet"));
        assert!(reason("redis://x").contains("unknown scheme `redis`"));
        assert!(reason("study.db").contains("no scheme"));
        assert!(reason("sqlite:").contains("empty"));
    }
}
