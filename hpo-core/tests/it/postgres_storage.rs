//! The PostgreSQL storage: the conformance suite, Optuna's schema, refusals,
//! URLs and passwords, incremental reads.

use crate::postgres_server::{url_of, TestDb};
use hpo_core::storage::{
    storage_from_url, storage_from_url_read_only, PostgresOptions, PostgresStorage,
};
use hpo_core::{Direction, Error, Storage, TrialState};
use std::time::Duration;

hpo_core::storage_conformance_tests!(conformance, |db: &TestDb| db.fresh_storage(), guard: TestDb::create());

/// The catalog hpo creates: tables, column types and enum labels, compared
/// with what Optuna 5.0.0 (SQLAlchemy) creates on PostgreSQL (taken from
/// `pg_dump --schema-only` of a database Optuna created).
#[test]
fn the_schema_is_optunas() {
    let Some(db) = TestDb::create() else { return };
    let _storage = db.open();
    let mut c = db.client();
    let enums: Vec<(String, String)> = c
        .query(
            "SELECT t.typname::text, string_agg(e.enumlabel::text, ',' ORDER BY e.enumsortorder) \
             FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid GROUP BY t.typname ORDER BY t.typname",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(
        enums,
        [
            ("studydirection", "NOT_SET,MINIMIZE,MAXIMIZE"),
            ("trialintermediatevaluetype", "FINITE,INF_POS,INF_NEG,NAN"),
            ("trialstate", "RUNNING,COMPLETE,PRUNED,FAIL,WAITING"),
            ("trialvaluetype", "FINITE,INF_POS,INF_NEG"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    let columns: Vec<String> = c
        .query(
            "SELECT table_name || '.' || column_name || ' ' || udt_name || ' ' || is_nullable \
             || COALESCE(' ' || character_maximum_length, '') \
             FROM information_schema.columns WHERE table_schema = 'public' \
             ORDER BY table_name, ordinal_position",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let expected = "\
alembic_version.version_num varchar NO 32
studies.study_id int4 NO
studies.study_name varchar NO 512
study_directions.study_direction_id int4 NO
study_directions.direction studydirection NO
study_directions.study_id int4 NO
study_directions.objective int4 NO
study_system_attributes.study_system_attribute_id int4 NO
study_system_attributes.study_id int4 YES
study_system_attributes.key varchar YES 512
study_system_attributes.value_json text YES
study_user_attributes.study_user_attribute_id int4 NO
study_user_attributes.study_id int4 YES
study_user_attributes.key varchar YES 512
study_user_attributes.value_json text YES
trial_heartbeats.trial_heartbeat_id int4 NO
trial_heartbeats.trial_id int4 NO
trial_heartbeats.heartbeat timestamp NO
trial_intermediate_values.trial_intermediate_value_id int4 NO
trial_intermediate_values.trial_id int4 NO
trial_intermediate_values.step int4 NO
trial_intermediate_values.intermediate_value float8 YES
trial_intermediate_values.intermediate_value_type trialintermediatevaluetype NO
trial_params.param_id int4 NO
trial_params.trial_id int4 YES
trial_params.param_name varchar YES 512
trial_params.param_value float8 YES
trial_params.distribution_json text YES
trial_system_attributes.trial_system_attribute_id int4 NO
trial_system_attributes.trial_id int4 YES
trial_system_attributes.key varchar YES 512
trial_system_attributes.value_json text YES
trial_user_attributes.trial_user_attribute_id int4 NO
trial_user_attributes.trial_id int4 YES
trial_user_attributes.key varchar YES 512
trial_user_attributes.value_json text YES
trial_values.trial_value_id int4 NO
trial_values.trial_id int4 NO
trial_values.objective int4 NO
trial_values.value float8 YES
trial_values.value_type trialvaluetype NO
trials.trial_id int4 NO
trials.number int4 YES
trials.study_id int4 YES
trials.state trialstate NO
trials.datetime_start timestamp YES
trials.datetime_complete timestamp YES
version_info.version_info_id int4 NO
version_info.schema_version int4 YES
version_info.library_version varchar YES 256";
    assert_eq!(columns.join("\n"), expected);
    // Constraint names as PostgreSQL derives them for Optuna's tables.
    let constraints: Vec<String> = c
        .query(
            "SELECT conname::text FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace \
             WHERE n.nspname = 'public' ORDER BY conname",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    for name in [
        "alembic_version_pkc",
        "trial_params_trial_id_param_name_key",
        "trial_heartbeats_trial_id_key",
        "trials_study_id_fkey",
        "version_info_version_info_id_check",
    ] {
        assert!(
            constraints.iter().any(|c| c == name),
            "missing {name}: {constraints:?}"
        );
    }
    let version: (i32, String) = c
        .query_one(
            "SELECT schema_version, library_version::text FROM version_info",
            &[],
        )
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(version, (12, "5.0.0".to_owned()));
    let alembic: String = c
        .query_one("SELECT version_num::text FROM alembic_version", &[])
        .unwrap()
        .get(0);
    assert_eq!(alembic, "v3.2.0.a");
}

/// A second handle (another machine) opens the existing schema as is.
#[test]
fn two_handles_share_a_database() {
    let Some(db) = TestDb::create() else { return };
    let a = db.open();
    let b = db.open();
    let id = a.create_study("s", &[Direction::Minimize]).unwrap();
    let t = b.create_trial(id, None).unwrap();
    assert_eq!(t.number, 0);
    b.finish_trial(t.id, TrialState::Complete, Some(&[1.0]), &[])
        .unwrap();
    let seen = a.trials(id).unwrap();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].values, Some(vec![1.0]));
}

/// A read-only handle (what the `hpo` command opens) reads everything and
/// the server refuses every write through it.
#[test]
fn a_read_only_handle_reads_and_never_writes() {
    let Some(db) = TestDb::create() else { return };
    let writer = db.open();
    let id = writer.create_study("s", &[Direction::Minimize]).unwrap();
    let t = writer.create_trial(id, None).unwrap();
    writer
        .finish_trial(t.id, TrialState::Complete, Some(&[2.0]), &[])
        .unwrap();
    let reader = storage_from_url_read_only(&db.url()).unwrap();
    assert_eq!(reader.trials(id).unwrap().len(), 1);
    assert!(reader
        .create_study("other", &[Direction::Minimize])
        .is_err());
    assert!(reader.create_trial(id, None).is_err());
    assert_eq!(writer.studies().unwrap().len(), 1, "nothing was written");
    assert_eq!(writer.trials(id).unwrap().len(), 1);
}

fn refusal(db: &TestDb) -> String {
    match PostgresStorage::open(&db.url()) {
        Err(Error::UnusableDatabase { reason, .. }) => reason,
        Err(other) => panic!("expected a refusal, got {other}"),
        Ok(_) => panic!("opened a database it must refuse"),
    }
}

/// Tables of another application, an older or newer Optuna schema: refused
/// with a clear reason, and nothing written.
#[test]
fn foreign_and_other_version_schemas_are_refused_without_a_write() {
    let Some(db) = TestDb::create() else { return };
    let mut c = db.client();
    c.batch_execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY)")
        .unwrap();
    assert!(refusal(&db).contains("not an Optuna/hpo study database"));
    let tables: i64 = c
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 1, "nothing was created beside the foreign table");
    c.batch_execute("DROP TABLE invoices").unwrap();

    // A real schema, then made newer and older.
    drop(db.open());
    c.batch_execute("UPDATE version_info SET schema_version = 13")
        .unwrap();
    let why = refusal(&db);
    assert!(
        why.contains("newer") && why.contains("upgrade hpo"),
        "{why}"
    );
    c.batch_execute("UPDATE version_info SET schema_version = 11")
        .unwrap();
    let why = refusal(&db);
    assert!(why.contains("optuna storage upgrade"), "{why}");
    let studies: i64 = c
        .query_one("SELECT count(*) FROM studies", &[])
        .unwrap()
        .get(0);
    assert_eq!(studies, 0);
}

/// `storage_from_url` opens PostgreSQL URLs, and no error ever shows the
/// password of the URL.
#[test]
fn urls_open_and_passwords_stay_hidden() {
    let Some(db) = TestDb::create() else { return };
    let s = storage_from_url(&db.url()).unwrap();
    assert!(s.studies().unwrap().is_empty());
    let alt = db.url().replacen("postgresql://", "postgres://", 1);
    assert!(storage_from_url(&alt)
        .unwrap()
        .studies()
        .unwrap()
        .is_empty());

    // A wrong password against a trust server still connects, so use an
    // unreachable port: the error names the server without the password.
    let bad = "postgresql://postgres:pa55w0rd-secret@127.0.0.1:1/nowhere";
    let err = PostgresStorage::open_with(
        bad,
        PostgresOptions::default()
            .connect_attempts(2)
            .first_backoff(Duration::from_millis(10)),
    )
    .unwrap_err();
    let shown = format!("{err} / {err:?}");
    assert!(!shown.contains("pa55w0rd-secret"), "{shown}");
    assert!(
        shown.contains("postgres:***@127.0.0.1:1/nowhere"),
        "{shown}"
    );
    let storage = PostgresStorage::open(&db.url()).unwrap();
    assert!(!format!("{storage:?}").contains("secret"));
    // A URL with a password that opens: Debug and server() hide it.
    let with_password =
        url_of(&db.name).replacen("://postgres@", "://postgres:pa55w0rd-secret@", 1);
    if with_password.contains("pa55w0rd") {
        let s = PostgresStorage::open(&with_password).unwrap();
        assert!(!format!("{s:?} {}", s.server()).contains("pa55w0rd"));
    }
}

/// Reads fetch only what changed: finished trials are loaded once per handle.
#[test]
fn reads_are_incremental() {
    let Some(db) = TestDb::create() else { return };
    let writer = db.open();
    let id = writer.create_study("s", &[Direction::Minimize]).unwrap();
    for i in 0..200 {
        let t = writer.create_trial(id, None).unwrap();
        writer
            .finish_trial(t.id, TrialState::Complete, Some(&[f64::from(i)]), &[])
            .unwrap();
    }
    let reader = db.open();
    assert_eq!(reader.trials(id).unwrap().len(), 200);
    let loaded = reader.stats().trials_loaded;
    assert_eq!(loaded, 200);
    let t = writer.create_trial(id, None).unwrap();
    writer
        .finish_trial(t.id, TrialState::Complete, Some(&[0.5]), &[])
        .unwrap();
    let before = reader.stats();
    assert_eq!(reader.trials(id).unwrap().len(), 201);
    let after = reader.stats();
    assert_eq!(after.trials_loaded - before.trials_loaded, 1);
    assert_eq!(
        after.round_trips - before.round_trips,
        2,
        "rows, then details"
    );
}

/// With `postgres-tls`, `sslmode=require` encrypts the connection (libpq's
/// meaning: encrypted, certificate not checked).
#[cfg(feature = "postgres-tls")]
#[test]
fn tls_connections_are_encrypted() {
    let Some(db) = TestDb::create() else { return };
    let mut c = db.client();
    let ssl: String = c.query_one("SHOW ssl", &[]).unwrap().get(0);
    if ssl != "on" {
        eprintln!("*** SKIPPING the TLS test: the test server has ssl = {ssl} ***");
        return;
    }
    let url = format!("{}?sslmode=require&application_name=hpo-tls-test", db.url());
    let s = PostgresStorage::open(&url).unwrap();
    assert!(s.studies().unwrap().is_empty());
    let encrypted: bool = c
        .query_one(
            "SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = 'hpo-tls-test'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(encrypted);
}

/// Staleness is judged by the server's clock: a heartbeat stamped 10 s ago
/// by the server is stale with a 5 s grace, one stamped now is not, whatever
/// this machine's clock says.
#[test]
fn staleness_uses_the_servers_clock() {
    let Some(db) = TestDb::create() else { return };
    let s = db.open();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let old = s.start_trial(id, true).unwrap();
    let fresh = s.start_trial(id, true).unwrap();
    let mut c = db.client();
    let server_skew: f64 = c
        .query_one(
            "SELECT abs(extract(epoch FROM (SELECT heartbeat FROM trial_heartbeats WHERE trial_id = $1) \
             - timezone('UTC', now())))::float8",
            &[&(fresh.id as i32)],
        )
        .unwrap()
        .get(0);
    assert!(server_skew < 60.0, "the heartbeat is the server's now()");
    c.execute(
        "UPDATE trial_heartbeats SET heartbeat = timezone('UTC', now()) - interval '10 seconds' \
         WHERE trial_id = $1",
        &[&(old.id as i32)],
    )
    .unwrap();
    assert_eq!(
        s.stale_trials(id, Duration::from_secs(5)).unwrap(),
        vec![old.id]
    );
    assert!(s
        .stale_trials(id, Duration::from_secs(30))
        .unwrap()
        .is_empty());
}

/// A connection the server drops (restart, failover, idle kill) is reopened:
/// the operation that met the closed connection fails with the server's
/// reason, the next one runs on a new connection.
#[test]
fn a_dropped_connection_is_reopened() {
    let Some(db) = TestDb::create() else { return };
    let s = PostgresStorage::open(&format!("{}?application_name=hpo-reconnect", db.url())).unwrap();
    let id = s.create_study("s", &[Direction::Minimize]).unwrap();
    let killed: i64 = db
        .client()
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = 'hpo-reconnect'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(killed, 1);
    std::thread::sleep(Duration::from_millis(100));
    let first = s.studies();
    if let Err(e) = &first {
        assert!(matches!(e, Error::Database { .. }), "{e}");
    }
    let again = s.studies().unwrap();
    assert_eq!(again[0].id, id);
    assert!(s.stats().retries >= 1, "a reconnection was counted");
}
