//! The server a URL names, the URL shown without its password, and opening
//! a connection with retries and backoff (TLS when the `postgres-tls`
//! feature is on).

use crate::error::{Error, Result};
use crate::storage::url::redact;
use postgres::config::{Host, SslMode};
use postgres::{Client, Config};
use std::str::FromStr;
use std::time::Duration;

/// Options for opening a [`PostgresStorage`](super::PostgresStorage).
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    connect_attempts: u32,
    first_backoff: Duration,
    connect_timeout: Duration,
    synchronous_commit: bool,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            connect_attempts: 6,
            first_backoff: Duration::from_millis(200),
            connect_timeout: Duration::from_secs(10),
            synchronous_commit: false,
        }
    }
}

impl PostgresOptions {
    /// How many times a connection is attempted before opening fails
    /// (default 6: the server has about 6 s to come up, the waits doubling
    /// from 200 ms). At least one attempt is always made.
    pub fn connect_attempts(mut self, attempts: u32) -> Self {
        self.connect_attempts = attempts.max(1);
        self
    }

    /// The wait after the first failed attempt; each further wait doubles
    /// (default 200 ms).
    pub fn first_backoff(mut self, wait: Duration) -> Self {
        self.first_backoff = wait;
        self
    }

    /// Whether every commit waits for the server to flush it to disk
    /// (PostgreSQL's `synchronous_commit`, set for this storage's
    /// connections only).
    ///
    /// The default, `false`, is the durability of the SQLite storage's
    /// default (`synchronous = NORMAL`): a commit is visible to every other
    /// worker at once and survives any crash of a worker, and the database
    /// is never inconsistent, but if the *server* machine crashes or loses
    /// power, the commits of its last fraction of a second
    /// (`wal_writer_delay`, 200 ms by default, at most three times that) may
    /// be lost: those trials are run again. `true` makes every commit
    /// durable on the server's disk, at the cost of a disk flush per write.
    pub fn synchronous_commit(mut self, yes: bool) -> Self {
        self.synchronous_commit = yes;
        self
    }

    /// How long one connection attempt may take (default 10 s), unless the
    /// URL sets `connect_timeout`.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
}

/// A parsed server address with a printable, password-free form.
#[derive(Clone)]
pub(super) struct Target {
    pub(super) config: Config,
    /// `postgresql://user@host:port/db`: never the password.
    pub(super) shown: String,
}

impl Target {
    /// Parses `postgresql://` / `postgres://` URLs (and SQLAlchemy's
    /// `postgresql+psycopg://`, `postgresql+psycopg2://` spellings, which
    /// Optuna users already have). The error never repeats the URL's password.
    pub(super) fn parse(url: &str) -> Result<Target> {
        let shown_input = redact(url);
        let bad = |reason: String| Error::InvalidStorageUrl {
            url: shown_input.clone(),
            reason,
        };
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(bad(
                "a PostgreSQL URL looks like `postgresql://user@host:5432/database`".to_owned(),
            ));
        };
        let base = scheme.split('+').next().unwrap_or(scheme);
        if !matches!(
            base.to_ascii_lowercase().as_str(),
            "postgresql" | "postgres"
        ) {
            return Err(bad(format!("`{scheme}` is not a PostgreSQL scheme")));
        }
        let config = Config::from_str(&format!("postgresql://{rest}"))
            .map_err(|e| bad(format!("it does not parse as a PostgreSQL URL: {e}")))?;
        if config.get_dbname().is_none_or(str::is_empty) {
            return Err(bad(
                "it names no database; write `postgresql://user@host:5432/database`".to_owned(),
            ));
        }
        let shown = show(&config);
        Ok(Target { config, shown })
    }

    /// Opens a connection, retrying with doubling waits while the server
    /// cannot be reached.
    pub(super) fn connect(&self, options: &PostgresOptions) -> Result<Client> {
        let mut config = self.config.clone();
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("hpo");
        }
        let mut wait = options.first_backoff;
        let mut attempt = 1;
        loop {
            match connect_once(&config, &self.shown).and_then(|mut client| {
                if !options.synchronous_commit {
                    client.batch_execute("SET synchronous_commit = off")?;
                }
                Ok(client)
            }) {
                Ok(client) => return Ok(client),
                Err(e) if attempt < options.connect_attempts && retryable(&e) => {
                    tracing::warn!(
                        server = %self.shown,
                        attempt,
                        "PostgreSQL connection failed ({e}); retrying in {wait:?}"
                    );
                    std::thread::sleep(wait);
                    wait = wait.saturating_mul(2).min(Duration::from_secs(10));
                    attempt += 1;
                }
                Err(e) => {
                    return Err(Error::Database {
                        target: self.shown.clone(),
                        source: Box::new(e),
                    })
                }
            }
        }
    }
}

/// Connection failures worth another attempt: the server is unreachable or
/// starting up. Authentication or a missing database are not.
fn retryable(e: &postgres::Error) -> bool {
    match e.code() {
        // The server is starting up, shutting down, or out of connections.
        Some(code) => matches!(code.code(), "57P03" | "53300" | "57P01" | "08006" | "08001"),
        None => true,
    }
}

#[cfg(feature = "postgres-tls")]
fn connect_once(config: &Config, _shown: &str) -> std::result::Result<Client, postgres::Error> {
    match native_tls::TlsConnector::new() {
        Ok(tls) => config.connect(postgres_native_tls::MakeTlsConnector::new(tls)),
        Err(e) => {
            tracing::warn!("no TLS available ({e}); connecting without TLS");
            config.connect(postgres::NoTls)
        }
    }
}

#[cfg(not(feature = "postgres-tls"))]
fn connect_once(config: &Config, shown: &str) -> std::result::Result<Client, postgres::Error> {
    if config.get_ssl_mode() == SslMode::Require {
        tracing::error!(
            server = %shown,
            "the URL requires TLS (sslmode=require) but hpo was built without the \
             `postgres-tls` feature; the connection will fail"
        );
    }
    config.connect(postgres::NoTls)
}

/// `postgresql://user@host:port/db` from a parsed configuration, without the password.
fn show(config: &Config) -> String {
    let password = if config.get_password().is_some() {
        ":***"
    } else {
        ""
    };
    let user = config
        .get_user()
        .map(|u| format!("{u}{password}@"))
        .unwrap_or_default();
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let host = match h {
                Host::Tcp(name) => name.clone(),
                #[cfg(unix)]
                Host::Unix(path) => path.display().to_string(),
            };
            match config.get_ports().get(i).or(config.get_ports().first()) {
                Some(port) => format!("{host}:{port}"),
                None => host,
            }
        })
        .collect();
    let mode = match config.get_ssl_mode() {
        SslMode::Require => "?sslmode=require",
        SslMode::Disable => "?sslmode=disable",
        _ => "",
    };
    format!(
        "postgresql://{user}{}/{}{mode}",
        hosts.join(","),
        config.get_dbname().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_never_shown() {
        let url = "postgresql://alice:s3cr3t@db.example:6543/studies?sslmode=disable";
        let t = Target::parse(url).unwrap();
        assert_eq!(
            t.shown,
            "postgresql://alice:***@db.example:6543/studies?sslmode=disable"
        );
        assert!(!format!("{:?}", t.config).contains("s3cr3t"));
        // A URL that does not parse is reported without its password too.
        let err = Target::parse("postgresql://bob:hunter2@/").err().unwrap();
        assert!(!err.to_string().contains("hunter2"), "{err}");
        let err = Target::parse("postgresql://bob:hunter2@h:notaport/db")
            .err()
            .unwrap();
        assert!(!err.to_string().contains("hunter2"), "{err}");
    }

    #[test]
    fn sqlalchemy_spellings_parse() {
        for url in [
            "postgresql://u@h:5432/d",
            "postgres://u@h/d",
            "postgresql+psycopg://u@h/d",
            "postgresql+psycopg2://u@h/d",
        ] {
            let t = Target::parse(url).unwrap();
            assert_eq!(t.config.get_dbname(), Some("d"), "{url}");
        }
        assert!(Target::parse("mysql://u@h/d").is_err());
        assert!(Target::parse("postgresql://u@h").is_err());
    }
}
