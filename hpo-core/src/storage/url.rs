//! Opening a storage from a URL.
//!
//! URLs are parsed by the `url` crate (WHATWG URL parsing), never sliced as
//! strings, and checked against a small grammar: everything outside it is
//! refused with the URL that was probably meant, so a typo never silently
//! creates a file. Passwords never appear in an error.

use super::{InMemoryStorage, SqliteOptions, SqliteStorage, Storage};
use crate::error::{Error, Result};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Opens the storage a URL names.
///
/// | URL | storage |
/// | --- | --- |
/// | `sqlite:study.db`, `sqlite:path/to/study.db` | [`SqliteStorage`] on that file, relative to the working directory |
/// | `sqlite:/abs/path/study.db` | the same, absolute |
/// | `sqlite:///study.db`, `sqlite:////abs/study.db` | the same, in SQLAlchemy's (Optuna's) spelling |
/// | `sqlite::memory:`, `sqlite:///:memory:` | a private in-memory SQLite database |
/// | `memory:` | an [`InMemoryStorage`] |
///
/// A SQLite file URL takes two query parameters: `mode=ro` opens the file
/// read-only ([`SqliteStorage::open_read_only`]), and `timeout=SECONDS` sets the
/// busy timeout ([`SqliteOptions::busy_timeout`]); for example
/// `sqlite:study.db?mode=ro&timeout=5`. Percent escapes in the path are
/// decoded (`my%20study.db` is `my study.db`).
///
/// Refused, each with the URL that was probably meant: spaces before or
/// after the URL, `sqlite::memory`, `sqlite:memory:`, `sqlite:/:memory:` and
/// other near-misses of `sqlite::memory:`, unknown or repeated query
/// parameters, `mode` other than `ro`, a host, user, password, port or
/// fragment in a SQLite URL, an empty path, and a path starting with `~`
/// (not expanded: write the full path).
///
/// `postgresql://user@host:5432/database` (also `postgres://`, and
/// SQLAlchemy's `postgresql+psycopg://` and `postgresql+psycopg2://`) opens a
/// `PostgresStorage` when hpo is built with the `postgres` feature, and is
/// refused with what to enable otherwise. Other schemes of storages hpo may
/// support later (`mysql://`) are rejected with "not supported yet". Every refusal is an
/// [`Error::InvalidStorageUrl`], with any password in the URL replaced by `***`.
///
/// ```
/// # fn main() -> hpo_core::Result<()> {
/// let storage = hpo_core::storage::storage_from_url("sqlite::memory:")?;
/// assert!(storage.studies()?.is_empty());
/// let Err(typo) = hpo_core::storage::storage_from_url("sqlite::memory") else {
///     unreachable!("a typo is refused")
/// };
/// assert!(typo.to_string().contains("did you mean `sqlite::memory:`"));
/// assert!(hpo_core::storage::storage_from_url("mysql://host/db").is_err());
/// # Ok(())
/// # }
/// ```
pub fn storage_from_url(url: &str) -> Result<Arc<dyn Storage>> {
    open(url, false)
}

/// Opens the storage a URL names for reading only, whatever the URL says:
/// a SQLite file is opened as with `mode=ro` ([`SqliteStorage::open_read_only`]:
/// never a byte written, no `-wal`/`-shm` left behind, a missing file is an
/// error rather than a new database). Everything that only reads (the `hpo`
/// command's read-only subcommands) opens storages this way.
pub fn storage_from_url_read_only(url: &str) -> Result<Arc<dyn Storage>> {
    open(url, true)
}

/// Opens what `url` names; `read_only` forces read-only mode whatever the
/// URL says (a URL's own `mode=ro` is kept either way).
fn open(url: &str, read_only: bool) -> Result<Arc<dyn Storage>> {
    Ok(match parse(url)? {
        Target::Memory => Arc::new(InMemoryStorage::new()),
        Target::SqliteMemory => Arc::new(SqliteStorage::in_memory()?),
        Target::SqliteFile { path, options } => {
            let options = if read_only {
                options.read_only(true)
            } else {
                options
            };
            Arc::new(SqliteStorage::open_with(path, options)?)
        }
        #[cfg(feature = "postgres")]
        Target::Postgres => Arc::new(super::PostgresStorage::open_with(
            url,
            super::PostgresOptions::default().read_only(read_only),
        )?),
    })
}

/// What a URL names.
#[derive(Debug)]
enum Target {
    /// `memory:`
    Memory,
    /// `sqlite::memory:`
    SqliteMemory,
    /// A SQLite file.
    SqliteFile {
        path: PathBuf,
        options: SqliteOptions,
    },
    /// A PostgreSQL database (the URL is parsed by the storage).
    #[cfg(feature = "postgres")]
    Postgres,
}

/// Schemes of storages hpo may support later.
const LATER: [&str; 3] = ["mysql", "mysql+pymysql", "redis"];

/// Schemes of the PostgreSQL storage (SQLAlchemy's driver spellings included).
const POSTGRES: [&str; 4] = [
    "postgresql",
    "postgres",
    "postgresql+psycopg",
    "postgresql+psycopg2",
];

/// The SQLite file a storage URL names, as opening it would (the path
/// percent-decoded, the query left out); `None` for in-memory databases and
/// other storages. An invalid URL is the error opening it would give.
/// Tools that look at the file before opening it (the `hpo` command
/// refuses a missing one) read it here, so they read URLs as the library does.
pub fn sqlite_file(url: &str) -> Result<Option<PathBuf>> {
    Ok(match parse(url)? {
        Target::SqliteFile { path, .. } => Some(path),
        _ => None,
    })
}

/// Removes a storage URL's password from any text that might repeat it:
/// the URL itself becomes [`redact`]'s, and the password, as written and
/// percent-decoded, becomes `***` wherever else it appears.
pub fn scrub(text: &str, url: &str) -> String {
    let mut out = text.replace(url, &redact(url));
    if let Some(raw) = ::url::Url::parse(url.trim())
        .ok()
        .and_then(|u| u.password().map(str::to_owned))
    {
        let decoded = percent_decode(&raw).unwrap_or_else(|| raw.clone());
        for password in [raw, decoded] {
            if !password.is_empty() {
                out = out.replace(&password, "***");
            }
        }
    }
    out
}

/// `url` with any password replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    if let Ok(mut parsed) = ::url::Url::parse(url) {
        if parsed.password().is_some() && parsed.set_password(Some("***")).is_ok() {
            return parsed.to_string();
        }
    }
    // Unparsable: hide whatever sits between `scheme://user:` and `@`.
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url.to_owned();
    };
    let rest = &url[start..];
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..auth_end].rfind('@') {
        Some(at) => match rest[..at].find(':') {
            Some(colon) => format!("{}{}:***{}", &url[..start], &rest[..colon], &rest[at..]),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

fn parse(url: &str) -> Result<Target> {
    let shown = redact(url);
    let bad = |reason: String| Error::InvalidStorageUrl {
        url: shown.clone(),
        reason,
    };
    let trimmed = url.trim();
    if trimmed != url {
        return Err(bad(format!(
            "it has spaces before or after it; did you mean `{}`?",
            redact(trimmed)
        )));
    }
    let parsed = match ::url::Url::parse(url) {
        Ok(u) => u,
        Err(::url::ParseError::RelativeUrlWithoutBase) => {
            return Err(bad(format!(
                "it has no scheme; did you mean `sqlite:{url}`? (or `sqlite::memory:`, `memory:`)"
            )))
        }
        Err(e) => return Err(bad(format!("it is not a URL: {e}"))),
    };
    match parsed.scheme() {
        "sqlite" => sqlite(url, &parsed).map_err(bad),
        "memory" | "inmemory" if parsed.path().is_empty() && parsed.query().is_none() => {
            Ok(Target::Memory)
        }
        "memory" | "inmemory" => Err(bad("did you mean `memory:` (nothing after the colon)?".into())),
        #[cfg(feature = "postgres")]
        s if POSTGRES.contains(&s) => Ok(Target::Postgres),
        #[cfg(not(feature = "postgres"))]
        s if POSTGRES.contains(&s) => Err(bad(
            "this build of hpo has no PostgreSQL storage; enable the `postgres` feature \
             (`hpo = { features = [\"postgres\"] }`)"
                .to_owned(),
        )),
        s if LATER.contains(&s) => Err(bad(format!(
            "the `{s}` storage is not supported yet; use `sqlite:path/to/study.db`"
        ))),
        s => Err(bad(format!(
            "unknown scheme `{s}`; supported: `sqlite:path/to/study.db`, `sqlite::memory:`, `memory:`"
        ))),
    }
}

/// Parses a `sqlite:` URL; the error is the reason, with the probable URL.
fn sqlite(raw: &str, u: &::url::Url) -> std::result::Result<Target, String> {
    if u.fragment().is_some() {
        return Err(format!(
            "a SQLite URL has no `#` fragment; did you mean `{}`?",
            raw.split('#').next().unwrap_or(raw)
        ));
    }
    // `sqlite://...` has an authority: SQLAlchemy's spelling, host empty.
    let has_authority = raw["sqlite:".len()..].starts_with("//");
    let decoded = percent_decode(u.path())
        .ok_or_else(|| "its path is not valid UTF-8 once percent escapes are decoded".to_owned())?;
    // `sqlite: study.db` would be a file named " study.db".
    let after = raw["sqlite:".len()..].trim_start_matches('/');
    if after.starts_with(char::is_whitespace) {
        return Err(format!(
            "the path starts with a space; did you mean `sqlite:{}`?",
            after.trim_start()
        ));
    }
    let query = u.query().map(|q| format!("?{q}")).unwrap_or_default();
    let database = if has_authority {
        let host = u.host_str().unwrap_or("");
        if !host.is_empty()
            || !u.username().is_empty()
            || u.password().is_some()
            || u.port().is_some()
        {
            let rest = format!("{host}{decoded}");
            return Err(format!(
                "a SQLite URL names a file, not a host, user, password or port; did you mean \
                 `sqlite:///{rest}{query}` (relative) or `sqlite:////{rest}{query}` (absolute)?"
            ));
        }
        // `sqlite:///relative.db` -> `relative.db`, `sqlite:////abs.db` -> `/abs.db`.
        decoded.strip_prefix('/').unwrap_or(&decoded).to_owned()
    } else {
        if decoded == "/:memory:" {
            return Err(format!(
                "`/:memory:` would be a file at the filesystem root; did you mean `sqlite::memory:{query}`?"
            ));
        }
        decoded
    };
    if database == ":memory:" {
        return match u.query() {
            None => Ok(Target::SqliteMemory),
            Some(_) => Err(
                "an in-memory SQLite database takes no query parameters; did you mean `sqlite::memory:`?"
                    .into(),
            ),
        };
    }
    if database.trim_matches(':').eq_ignore_ascii_case("memory") {
        return Err(format!(
            "did you mean `sqlite::memory:` (an in-memory database)? For a file, give it an \
             extension: `sqlite:{}.db`",
            database.trim_matches(':')
        ));
    }
    if database.is_empty() {
        return Err("the SQLite file path is empty; did you mean `sqlite:study.db`?".into());
    }
    if database.starts_with('~') {
        let home = std::env::var("HOME").unwrap_or_else(|_| "/home/you".into());
        let rest = database.trim_start_matches('~').trim_start_matches('/');
        return Err(format!(
            "`~` is not expanded in a storage URL; write the full path: `sqlite:{home}/{rest}{query}`"
        ));
    }
    let mut options = SqliteOptions::default();
    let mut seen: Vec<String> = Vec::new();
    let base = if has_authority {
        format!("sqlite://{}", u.path())
    } else {
        format!("sqlite:{}", u.path())
    };
    for (key, value) in u.query_pairs() {
        if seen.iter().any(|k| *k == key) {
            return Err(format!("the query parameter `{key}` is given twice"));
        }
        seen.push(key.to_string());
        match (key.as_ref(), value.as_ref()) {
            ("mode", "ro") => options = options.read_only(true),
            ("mode", other) => {
                return Err(format!(
                    "`mode={other}` is not a mode hpo knows: `mode=ro` opens the file read-only, \
                     and without `mode` it is read and written; did you mean `{base}?mode=ro`?"
                ))
            }
            ("timeout", v) => {
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s >= 0.0 && *s <= 1e6)
                    .ok_or_else(|| {
                        format!(
                            "`timeout={v}` is not a number of seconds; did you mean `{base}?timeout=30`?"
                        )
                    })?;
                options = options.busy_timeout(Duration::from_secs_f64(secs));
            }
            (other, _) => {
                return Err(format!(
                    "unknown query parameter `{other}`; a SQLite URL takes `mode=ro` and \
                     `timeout=SECONDS` (did you mean `{base}?mode=ro`?)"
                ))
            }
        }
    }
    Ok(Target::SqliteFile {
        path: PathBuf::from(database),
        options,
    })
}

/// Decodes `%HH` escapes; `None` when the bytes are not UTF-8. A `%` not
/// followed by two hex digits stays as it is.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                let v = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                out.push(v as u8);
                i += 3;
            }
            (b, ..) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
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

    fn file(url: &str) -> (PathBuf, SqliteOptions) {
        match parse(url) {
            Ok(Target::SqliteFile { path, options }) => (path, options),
            other => panic!("{url}: {other:?}"),
        }
    }

    #[test]
    fn memory_urls_open() {
        for url in ["sqlite::memory:", "sqlite:///:memory:", "memory:"] {
            assert!(storage_from_url(url).unwrap().studies().unwrap().is_empty());
        }
        assert!(matches!(parse("sqlite::memory:"), Ok(Target::SqliteMemory)));
        assert!(matches!(
            parse("sqlite:///:memory:"),
            Ok(Target::SqliteMemory)
        ));
        assert!(matches!(parse("memory:"), Ok(Target::Memory)));
    }

    #[test]
    fn file_urls_in_every_documented_spelling() {
        assert_eq!(file("sqlite:study.db").0, PathBuf::from("study.db"));
        assert_eq!(file("sqlite:runs/a.db").0, PathBuf::from("runs/a.db"));
        assert_eq!(file("sqlite:/abs/a.db").0, PathBuf::from("/abs/a.db"));
        assert_eq!(
            file("sqlite:///relative.db").0,
            PathBuf::from("relative.db")
        );
        assert_eq!(
            file("sqlite:////absolute.db").0,
            PathBuf::from("/absolute.db")
        );
        assert_eq!(file("sqlite:my%20study.db").0, PathBuf::from("my study.db"));
        assert_eq!(file("sqlite:my study.db").0, PathBuf::from("my study.db"));
        let (p, o) = file("sqlite:study.db?mode=ro&timeout=2.5");
        assert_eq!(p, PathBuf::from("study.db"));
        assert!(o.read_only);
        assert_eq!(o.busy_timeout, Duration::from_millis(2500));
        assert!(file("sqlite:////abs/s.db?mode=ro").1.read_only);
        assert!(!file("sqlite:study.db").1.read_only);
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
    fn typos_are_refused_with_the_probable_url() {
        for (url, meant) in [
            ("sqlite::memory", "did you mean `sqlite::memory:`"),
            ("sqlite:memory:", "did you mean `sqlite::memory:`"),
            ("sqlite:/:memory:", "did you mean `sqlite::memory:`"),
            (
                "sqlite:study.db?mode=rw2",
                "did you mean `sqlite:study.db?mode=ro`",
            ),
            (
                "sqlite:study.db?mod=ro",
                "did you mean `sqlite:study.db?mode=ro`",
            ),
            (
                "sqlite:study.db?timeout=soon",
                "`timeout=soon` is not a number",
            ),
            ("sqlite:study.db?mode=ro&mode=ro", "given twice"),
            (" sqlite:study.db", "did you mean `sqlite:study.db`"),
            ("sqlite:study.db ", "did you mean `sqlite:study.db`"),
            ("sqlite: study.db", "did you mean `sqlite:study.db`"),
            ("sqlite:/// study.db", "did you mean `sqlite:study.db`"),
            ("sqlite:~/study.db", "`~` is not expanded"),
            (
                "sqlite://host/study.db",
                "did you mean `sqlite:///host/study.db`",
            ),
            ("sqlite:study.db#x", "did you mean `sqlite:study.db`"),
            ("study.db", "did you mean `sqlite:study.db`"),
            ("sqlite:", "did you mean `sqlite:study.db`"),
            ("sqlite:///", "did you mean `sqlite:study.db`"),
            ("sqlite::memory:?mode=ro", "takes no query parameters"),
            ("memory:x", "did you mean `memory:`"),
        ] {
            let r = reason(url);
            assert!(r.contains(meant), "{url}: {r}");
        }
        // None of them created a file.
        for name in [
            ":memory",
            "memory:",
            "study.db?mode=rw2",
            " study.db",
            "study.db ",
        ] {
            assert!(!std::path::Path::new(name).exists(), "{name} created");
        }
    }

    #[test]
    fn unknown_and_unsupported_schemes_are_explained() {
        assert!(reason("mysql://u@h/db").contains("not supported yet"));
        #[cfg(not(feature = "postgres"))]
        assert!(reason("postgresql://u@h/db").contains("`postgres` feature"));
        assert!(reason("redis://x").contains("not supported yet"));
        assert!(reason("ftp://x").contains("unknown scheme `ftp`"));
    }

    #[test]
    fn the_sqlite_file_is_read_as_opening_reads_it() {
        assert_eq!(
            sqlite_file("sqlite:dir/my%20study.db?timeout=30&mode=ro").unwrap(),
            Some(PathBuf::from("dir/my study.db"))
        );
        assert_eq!(
            sqlite_file("sqlite:////abs/study.db").unwrap(),
            Some(PathBuf::from("/abs/study.db"))
        );
        assert_eq!(sqlite_file("sqlite::memory:").unwrap(), None);
        assert_eq!(sqlite_file("memory:").unwrap(), None);
        assert!(sqlite_file("sqlite: study.db").is_err());
    }

    #[test]
    fn scrubbing_removes_the_password_in_every_spelling() {
        let url = "postgresql://alice:p%40ss%20word@db.example.invalid/optuna";
        let text = format!("cannot reach {url}: server said p@ss word and p%40ss%20word");
        let out = scrub(&text, url);
        assert!(
            !out.contains("p@ss word") && !out.contains("p%40ss"),
            "{out}"
        );
        assert!(out.contains("alice:***@db.example.invalid"), "{out}");
    }

    #[test]
    fn passwords_are_never_printed() {
        for url in [
            "postgresql://alice:s3cret@db.example.invalid/optuna",
            "mysql+pymysql://alice:s3cret@db/optuna",
            "sqlite://alice:s3cret@host/study.db",
            "postgresql://alice:s3cret@ho st/db",
            " postgresql://alice:s3cret@db/optuna",
        ] {
            let msg = storage_from_url(url).err().unwrap().to_string();
            assert!(!msg.contains("s3cret"), "{msg}");
            assert!(msg.contains("***"), "{msg}");
        }
    }
}
