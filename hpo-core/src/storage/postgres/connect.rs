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
    read_only: bool,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            connect_attempts: 6,
            first_backoff: Duration::from_millis(200),
            connect_timeout: Duration::from_secs(10),
            synchronous_commit: false,
            read_only: false,
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

    /// Read only: every transaction of this storage's connections is
    /// read-only (`default_transaction_read_only`), so the server refuses any
    /// write, schema creation included (default `false`). What
    /// [`crate::storage::storage_from_url_read_only`] opens.
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }

    /// How long one connection attempt may take (default 10 s), unless the
    /// URL sets `connect_timeout`.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
}

/// How much of the server's TLS certificate is checked, as libpq's
/// `sslmode` says: `prefer` and `require` encrypt without checking,
/// `verify-ca` checks the chain, `verify-full` the chain and the host name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verify {
    Nothing,
    Chain,
    ChainAndHost,
}

/// A parsed server address with a printable, password-free form.
#[derive(Clone)]
pub(super) struct Target {
    pub(super) config: Config,
    /// `postgresql://user@host:port/db`: never the password.
    pub(super) shown: String,
    /// What TLS checks (`sslmode=verify-ca`, `verify-full`).
    verify: Verify,
    /// A CA certificate file that signs the server's (`sslrootcert=PATH`).
    root_cert: Option<std::path::PathBuf>,
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
        // libpq's `verify-ca` / `verify-full` and `sslrootcert` are hpo's to
        // handle (the client library knows `disable`, `prefer`, `require`).
        let (head, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut verify = Verify::Nothing;
        let mut root_cert = None;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("sslmode", "verify-ca")) => {
                    verify = Verify::Chain;
                    kept.push("sslmode=require".to_owned());
                }
                Some(("sslmode", "verify-full")) => {
                    verify = Verify::ChainAndHost;
                    kept.push("sslmode=require".to_owned());
                }
                Some(("sslrootcert", path)) => root_cert = Some(std::path::PathBuf::from(path)),
                _ => kept.push(pair.to_owned()),
            }
        }
        let rebuilt = if kept.is_empty() {
            format!("postgresql://{head}")
        } else {
            format!("postgresql://{head}?{}", kept.join("&"))
        };
        let config = Config::from_str(&rebuilt)
            .map_err(|e| bad(format!("it does not parse as a PostgreSQL URL: {e}")))?;
        if !cfg!(feature = "postgres-tls") && config.get_ssl_mode() == SslMode::Require {
            return Err(bad(
                "it asks for TLS (`sslmode=require` or `verify-*`) but this build of hpo has no \
                 TLS; enable the `postgres-tls` feature"
                    .to_owned(),
            ));
        }
        if config.get_dbname().is_none_or(str::is_empty) {
            return Err(bad(
                "it names no database; write `postgresql://user@host:5432/database`".to_owned(),
            ));
        }
        let shown = show(&config, verify);
        Ok(Target {
            config,
            shown,
            verify,
            root_cert,
        })
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
        let tls = self.tls()?;
        let mut wait = options.first_backoff;
        let mut attempt = 1;
        loop {
            match connect_once(&config, &tls).and_then(|mut client| {
                if !options.synchronous_commit {
                    client.batch_execute("SET synchronous_commit = off")?;
                }
                if options.read_only {
                    client.batch_execute("SET default_transaction_read_only = on")?;
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
                Err(e) => return Err(super::conn::database_error(&self.shown, e)),
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

/// The TLS connector of a build with TLS: certificates checked as the URL's
/// `sslmode` asks, with the URL's `sslrootcert` trusted besides the system's.
#[cfg(feature = "postgres-tls")]
type Tls = postgres_native_tls::MakeTlsConnector;

/// A build without TLS connects in plain TCP (URLs asking for TLS are refused).
#[cfg(not(feature = "postgres-tls"))]
type Tls = postgres::NoTls;

impl Target {
    #[cfg(feature = "postgres-tls")]
    fn tls(&self) -> Result<Tls> {
        let bad = |reason: String| Error::InvalidStorageUrl {
            url: self.shown.clone(),
            reason,
        };
        let mut builder = native_tls::TlsConnector::builder();
        match self.verify {
            Verify::Nothing => {
                builder
                    .danger_accept_invalid_certs(true)
                    .danger_accept_invalid_hostnames(true);
            }
            Verify::Chain => {
                builder.danger_accept_invalid_hostnames(true);
            }
            Verify::ChainAndHost => {}
        }
        if let Some(path) = &self.root_cert {
            let pem = std::fs::read(path).map_err(|e| {
                bad(format!(
                    "its sslrootcert `{}` cannot be read: {e}",
                    path.display()
                ))
            })?;
            let cert = native_tls::Certificate::from_pem(&pem).map_err(|e| {
                bad(format!(
                    "its sslrootcert `{}` is not a PEM certificate: {e}",
                    path.display()
                ))
            })?;
            builder.add_root_certificate(cert);
        }
        let connector = builder
            .build()
            .map_err(|e| bad(format!("no TLS connector could be built: {e}")))?;
        Ok(postgres_native_tls::MakeTlsConnector::new(connector))
    }

    #[cfg(not(feature = "postgres-tls"))]
    fn tls(&self) -> Result<Tls> {
        let _ = (self.verify, &self.root_cert);
        Ok(postgres::NoTls)
    }
}

// `NoTls` is `Copy`, the TLS connector only `Clone`: one spelling for both.
#[allow(clippy::clone_on_copy)]
fn connect_once(config: &Config, tls: &Tls) -> std::result::Result<Client, postgres::Error> {
    config.connect(tls.clone())
}

/// `postgresql://user@host:port/db` from a parsed configuration, without the password.
fn show(config: &Config, verify: Verify) -> String {
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
    let mode = match (config.get_ssl_mode(), verify) {
        (SslMode::Require, Verify::Chain) => "?sslmode=verify-ca",
        (SslMode::Require, Verify::ChainAndHost) => "?sslmode=verify-full",
        (SslMode::Require, Verify::Nothing) => "?sslmode=require",
        (SslMode::Disable, _) => "?sslmode=disable",
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
    fn tls_modes_are_understood() {
        let r = Target::parse("postgresql://u:pw@h/d?sslmode=verify-full&sslrootcert=/ca.pem");
        if cfg!(feature = "postgres-tls") {
            let t = r.unwrap();
            assert_eq!(t.verify, Verify::ChainAndHost);
            assert_eq!(
                t.root_cert.as_deref(),
                Some(std::path::Path::new("/ca.pem"))
            );
            assert_eq!(t.shown, "postgresql://u:***@h:5432/d?sslmode=verify-full");
            let t = Target::parse("postgresql://u@h/d?sslmode=verify-ca").unwrap();
            assert_eq!(t.verify, Verify::Chain);
        } else {
            let e = r.err().unwrap().to_string();
            assert!(e.contains("`postgres-tls` feature"), "{e}");
            assert!(!e.contains("pw@"), "{e}");
        }
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
