//! The PostgreSQL server the tests use, and a database of their own per test.
//!
//! The server is `HPO_TEST_POSTGRES` (default
//! `postgresql://postgres@127.0.0.1:5432/test`: trust auth, an existing
//! database to connect to). Each test creates the database
//! `hpo_test_<pid>_<n>` and drops it when it ends, so runs never collide and
//! leave nothing behind (databases of test processes that no longer run are
//! dropped too). Where no server answers, the tests say so loudly and skip,
//! unless `HPO_REQUIRE_POSTGRES=1` (CI), which makes them fail.

use hpo_core::storage::{PostgresOptions, PostgresStorage};
use postgres::{Client, NoTls};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Once;
use std::time::Duration;

/// The admin URL.
pub fn server_url() -> String {
    std::env::var("HPO_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgresql://postgres@127.0.0.1:5432/test".to_owned())
}

fn required() -> bool {
    std::env::var("HPO_REQUIRE_POSTGRES").is_ok_and(|v| v == "1")
}

/// `url` with the database replaced by `db`.
pub fn url_of(db: &str) -> String {
    let url = server_url();
    let (base, _) = url.rsplit_once('/').unwrap();
    format!("{base}/{db}")
}

fn admin() -> Option<Client> {
    match server_url().parse::<postgres::Config>() {
        Ok(mut config) => {
            config.connect_timeout(Duration::from_secs(3));
            match config.connect(NoTls) {
                Ok(c) => Some(c),
                Err(e) => {
                    skip_or_fail(&format!("no PostgreSQL server at {} ({e})", server_url()));
                    None
                }
            }
        }
        Err(e) => panic!("HPO_TEST_POSTGRES is not a PostgreSQL URL: {e}"),
    }
}

fn skip_or_fail(why: &str) {
    if required() {
        panic!("{why}, and HPO_REQUIRE_POSTGRES=1");
    }
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Straight to the process's stderr: libtest captures `eprintln!` of
        // passing tests, and a skip must be seen.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "\n*** SKIPPING the PostgreSQL tests: {why}. Start a server (see the book's \
             \"Many machines\" chapter) or set HPO_TEST_POSTGRES; CI sets HPO_REQUIRE_POSTGRES=1. ***\n"
        );
    });
}

/// A database of one test, dropped at the end of the test.
pub struct TestDb {
    pub name: String,
    schemas: AtomicUsize,
}

impl TestDb {
    /// A fresh database, or `None` (after a loud message) without a server.
    pub fn create() -> Option<TestDb> {
        static N: AtomicUsize = AtomicUsize::new(0);
        let mut admin = admin()?;
        drop_orphans(&mut admin);
        let name = format!(
            "hpo_test_{}_{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        );
        admin
            .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        admin
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .unwrap();
        Some(TestDb {
            name,
            schemas: AtomicUsize::new(0),
        })
    }

    /// The database's URL.
    pub fn url(&self) -> String {
        url_of(&self.name)
    }

    /// A storage on the database's default schema.
    pub fn open(&self) -> PostgresStorage {
        PostgresStorage::open(&self.url()).unwrap()
    }

    /// A storage on a fresh, empty schema of the database (cheaper than a
    /// database per storage): the conformance suite's factory.
    pub fn fresh_storage(&self) -> PostgresStorage {
        let schema = format!("s{}", self.schemas.fetch_add(1, Ordering::SeqCst));
        let mut c = Client::connect(&self.url(), NoTls).unwrap();
        c.batch_execute(&format!("CREATE SCHEMA {schema}")).unwrap();
        let url = format!("{}?options=-csearch_path%3D{schema}", self.url());
        PostgresStorage::open_with(&url, PostgresOptions::default().connect_attempts(2)).unwrap()
    }

    /// A plain client on the database, for checks in SQL.
    pub fn client(&self) -> Client {
        Client::connect(&self.url(), NoTls).unwrap()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Some(mut admin) = admin() {
            let _ = admin.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// Drops `hpo_test_<pid>_<n>` databases whose process no longer runs (a
/// test run killed before its clean-up).
fn drop_orphans(admin: &mut Client) {
    let Ok(rows) = admin.query(
        "SELECT datname::text FROM pg_database WHERE datname LIKE 'hpo\\_test\\_%'",
        &[],
    ) else {
        return;
    };
    for r in rows {
        let name: String = r.get(0);
        let pid = name.split('_').nth(2).and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                let _ =
                    admin.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"));
            }
        }
    }
}
