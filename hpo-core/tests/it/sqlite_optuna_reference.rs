//! Reading a database written by Optuna 5.0.0 (`tests/data/optuna_5_0_schema_ref.db`),
//! field by field, and checking that files hpo creates have exactly Optuna's
//! schema and write Optuna's rows byte for byte.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).

use hpo_core::storage::SqliteStorage;
use hpo_core::{Direction, Distribution, FloatDistribution, FrozenTrial, Storage, TrialState};
use rusqlite::Connection;
use serde_json::json;
use std::path::{Path, PathBuf};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/optuna_5_0_schema_ref.db")
}

/// A private copy of the fixture, for tests that write (read-only tests read
/// the committed file itself, which read-only mode leaves untouched).
fn copy_of_fixture(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hpo-ref-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ref.db");
    std::fs::copy(fixture(), &path).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    #[allow(clippy::permissions_set_readonly_false)]
    perms.set_readonly(false);
    std::fs::set_permissions(&path, perms).unwrap();
    path
}

fn trials_of(s: &SqliteStorage, name: &str) -> (u64, Vec<std::sync::Arc<FrozenTrial>>) {
    let id = s.find_study(name).unwrap().unwrap().id;
    (id, s.trials(id).unwrap())
}

#[test]
fn studies_directions_and_study_attributes() {
    let s = SqliteStorage::open_read_only(fixture()).unwrap();
    let studies = s.studies().unwrap();
    assert_eq!(studies.len(), 2);
    assert_eq!((studies[0].id, studies[0].name.as_str()), (1, "single_obj"));
    assert_eq!(studies[0].directions, vec![Direction::Minimize]);
    assert_eq!((studies[1].id, studies[1].name.as_str()), (2, "multi_obj"));
    assert_eq!(
        studies[1].directions,
        vec![Direction::Minimize, Direction::Maximize]
    );
    let user = s.study_user_attrs(1).unwrap();
    assert_eq!(user.len(), 2);
    assert_eq!(user["owner"], json!("bench"));
    assert_eq!(user["tags"], json!(["ref", 1, 2.5, null]));
    assert!(s.study_system_attrs(1).unwrap().is_empty());
    assert_eq!(
        s.study_system_attrs(2).unwrap()["study:metric_names"],
        json!(["loss", "accuracy"])
    );
    assert!(s.study_user_attrs(2).unwrap().is_empty());
}

#[test]
fn trials_states_datetimes_and_values() {
    let s = SqliteStorage::open_read_only(fixture()).unwrap();
    let (_, single) = trials_of(&s, "single_obj");
    let states: Vec<TrialState> = single.iter().map(|t| t.state).collect();
    use TrialState::*;
    assert_eq!(
        states,
        vec![Complete, Complete, Complete, Pruned, Fail, Fail, Complete, Running]
    );
    let ids: Vec<u64> = single.iter().map(|t| t.id).collect();
    assert_eq!(ids, (1..=8).collect::<Vec<_>>());
    let fmt = |t: &FrozenTrial| {
        (
            t.datetime_start
                .map(|d| d.format("%Y-%m-%d %H:%M:%S%.6f").to_string()),
            t.datetime_complete
                .map(|d| d.format("%Y-%m-%d %H:%M:%S%.6f").to_string()),
        )
    };
    assert_eq!(
        fmt(&single[0]),
        (
            Some("2026-11-22 01:49:28.860921".into()),
            Some("2026-11-22 01:49:29.183534".into())
        )
    );
    assert_eq!(
        fmt(&single[7]),
        (Some("2026-11-22 01:49:31.267777".into()), None)
    );
    let values: Vec<Option<Vec<f64>>> = single.iter().map(|t| t.values.clone()).collect();
    assert_eq!(
        values,
        vec![
            Some(vec![19.119140625]),
            Some(vec![104.82422036669931]),
            Some(vec![37.88716146525303]),
            Some(vec![18.38424612668055]),
            None,
            None,
            Some(vec![42.55912266380501]),
            None,
        ]
    );
    let (_, multi) = trials_of(&s, "multi_obj");
    assert_eq!(
        multi.iter().map(|t| t.number).collect::<Vec<_>>(),
        vec![0, 1, 2]
    );
    assert_eq!(
        multi[0].values,
        Some(vec![0.417022004702574, 1.165955990594852])
    );
    assert_eq!(
        multi[1].values,
        Some(vec![f64::INFINITY, f64::NEG_INFINITY])
    );
    assert_eq!(
        multi[2].values,
        Some(vec![0.1862602113776709, 0.8137397886223291])
    );
    assert!(multi.iter().all(|t| t.state == Complete));
}

#[test]
fn every_parameter_and_distribution() {
    let s = SqliteStorage::open_read_only(fixture()).unwrap();
    let expected = include_str!("../data/optuna_5_0_schema_ref_params.txt");
    let mut all: Vec<std::sync::Arc<FrozenTrial>> = trials_of(&s, "single_obj").1;
    all.extend(trials_of(&s, "multi_obj").1);
    let mut count = 0;
    for line in expected.lines() {
        let mut parts = line.splitn(4, '|');
        let (tid, name, value, json) = (
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
            parts.next().unwrap(),
        );
        let tid: u64 = tid.parse().unwrap();
        let t = all.iter().find(|t| t.id == tid).unwrap();
        assert_eq!(
            t.internal_params[name],
            value.parse::<f64>().unwrap(),
            "trial {tid} {name}"
        );
        let dist = &t.distributions[name];
        assert_eq!(
            dist.to_json(),
            json,
            "trial {tid} {name}: distribution_json round trip"
        );
        assert_eq!(*dist, Distribution::from_json(json).unwrap());
        count += 1;
    }
    assert_eq!(count, 63);
    let total: usize = all.iter().map(|t| t.internal_params.len()).sum();
    assert_eq!(total, 63, "no parameter more or less than Optuna wrote");
    let t0 = &all[0];
    assert_eq!(t0.param("act").unwrap(), hpo_core::ParamValue::from("relu"));
    assert_eq!(t0.param("n_layers").unwrap().as_i64(), Some(3));
}

#[test]
fn intermediate_values_and_trial_attributes() {
    let s = SqliteStorage::open_read_only(fixture()).unwrap();
    let (_, single) = trials_of(&s, "single_obj");
    let iv = |i: usize| {
        single[i]
            .intermediate_values
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        iv(0),
        vec![(0, 22.119140625), (1, 21.119140625), (2, 20.119140625)]
    );
    let third = iv(2);
    assert_eq!(third.len(), 5);
    assert_eq!(third[3], (3, f64::INFINITY));
    assert!(third[4].1.is_nan() && third[4].0 == 4);
    assert_eq!(
        iv(6),
        vec![
            (0, 45.55912266380501),
            (1, 44.55912266380501),
            (2, 43.55912266380501)
        ]
    );
    assert!(single[7].intermediate_values.is_empty());
    for (i, t) in single.iter().enumerate().take(7) {
        assert_eq!(t.user_attrs["note"], json!(format!("trial {i}")));
        assert_eq!(t.user_attrs["nested"], json!({"a": [1, 2], "b": null}));
    }
    assert!(single[7].user_attrs.is_empty());
    let fixed = &single[0].system_attrs["fixed_params"];
    assert_eq!(
        fixed,
        &json!({"x": 0.5, "lr": 0.001, "n_layers": 3, "act": "relu"})
    );
    assert_eq!(single[0].fixed_params().len(), 4);
    assert!(single[1..].iter().all(|t| t.system_attrs.is_empty()));
}

#[test]
fn an_optuna_study_resumes_with_contiguous_numbers() {
    let s = SqliteStorage::open(copy_of_fixture("resume")).unwrap();
    let (id, before) = trials_of(&s, "single_obj");
    let t = s.create_trial(id, None).unwrap();
    assert_eq!(t.number, 8);
    assert_eq!(t.id, 12);
    s.finish_trial(t.id, TrialState::Complete, Some(&[1.0]), &[])
        .unwrap();
    let after = s.trials(id).unwrap();
    assert_eq!(after.len(), before.len() + 1);
    // (Debug text, because trial 2 holds a NaN intermediate value.)
    assert_eq!(
        format!("{:?}", &after[..before.len()]),
        format!("{:?}", &before[..])
    );
}

fn schema_of(path: &Path) -> Vec<(String, String, Option<String>)> {
    let c = Connection::open(path).unwrap();
    let mut st = c
        .prepare("SELECT type, name, sql FROM sqlite_master ORDER BY type, name")
        .unwrap();
    st.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

#[test]
fn new_files_get_exactly_optunas_schema_and_rows() {
    let dir = copy_of_fixture("new").parent().unwrap().to_path_buf();
    let path = dir.join("hpo.db");
    let s = SqliteStorage::open(&path).unwrap();
    assert_eq!(schema_of(&path), schema_of(&fixture()));
    let c = Connection::open(&path).unwrap();
    let version: (i64, String) = c
        .query_row(
            "SELECT schema_version, library_version FROM version_info",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(version, (12, "5.0.0".into()));
    let alembic: String = c
        .query_row("SELECT version_num FROM alembic_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(alembic, "v3.2.0.a");

    // Write what Optuna wrote for trial 0 and compare the stored text.
    let id = s
        .create_study("single_obj", &[Direction::Minimize])
        .unwrap();
    s.set_study_user_attr(id, "tags", &json!(["ref", 1, 2.5, null]))
        .unwrap();
    let t = s.create_trial(id, None).unwrap();
    let x = Distribution::Float(FloatDistribution::new(-10.0, 10.0).unwrap());
    s.set_trial_param(t.id, "x", 0.5, &x).unwrap();
    s.set_trial_user_attr(t.id, "nested", &json!({"a": [1, 2], "b": null}))
        .unwrap();
    s.set_trial_intermediate_value(t.id, 3, f64::INFINITY)
        .unwrap();
    s.finish_trial(t.id, TrialState::Complete, Some(&[19.119140625]), &[])
        .unwrap();
    let text = |sql: &str| -> String { c.query_row(sql, [], |r| r.get(0)).unwrap() };
    assert_eq!(
        text("SELECT value_json FROM study_user_attributes"),
        r#"["ref", 1, 2.5, null]"#
    );
    assert_eq!(
        text("SELECT value_json FROM trial_user_attributes"),
        r#"{"a": [1, 2], "b": null}"#
    );
    assert_eq!(
        text("SELECT distribution_json FROM trial_params"),
        r#"{"name": "FloatDistribution", "attributes": {"step": null, "low": -10.0, "high": 10.0, "log": false}}"#
    );
    assert_eq!(text("SELECT direction FROM study_directions"), "MINIMIZE");
    assert_eq!(text("SELECT state FROM trials"), "COMPLETE");
    assert_eq!(text("SELECT typeof(param_value) FROM trial_params"), "real");
    assert_eq!(
        text("SELECT intermediate_value_type || ':' || typeof(intermediate_value) FROM trial_intermediate_values"),
        "INF_POS:null"
    );
    assert_eq!(
        text("SELECT value_type || ':' || value FROM trial_values"),
        "FINITE:19.119140625"
    );
    let start = text("SELECT datetime_start FROM trials");
    assert_eq!(start.len(), "2026-11-22 01:49:28.860921".len(), "{start}");
    assert_eq!(&start[10..11], " ");
    std::fs::remove_dir_all(&dir).unwrap();
}
