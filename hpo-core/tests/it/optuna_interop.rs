//! Interop with the real Optuna, both directions, through one SQLite file,
//! and (feature `postgres`) through one PostgreSQL database, where Optuna
//! connects with psycopg.
//!
//! Needs a Python with `optuna` (5.0.0): `$HPO_PYTHON`, or the venv that
//! `.ci/python-venv.sh` creates in `~/.cache/hpo-venv`. Without one the tests
//! print how to get it and pass, unless `HPO_REQUIRE_OPTUNA=1` (set by
//! `.ci/run`), which makes a missing Optuna a failure. The Optuna side is
//! `tests/interop/optuna_interop.py`; both sides dump every study as the same
//! canonical JSON, and the dumps must be equal.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers only the tests).

use hpo_core::distribution::python_float_repr;
use hpo_core::storage::SqliteStorage;
use hpo_core::{
    Direction, FrozenTrial, ParamValue, RandomSampler, Storage, Study, TrialError, TrialState,
};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

fn python() -> Option<PathBuf> {
    let candidate = std::env::var_os("HPO_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/hpo-venv/bin/python"))
        });
    let ok = candidate.as_ref().is_some_and(|p| {
        Command::new(p)
            .args(["-c", "import optuna"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if ok {
        return candidate;
    }
    let msg = format!(
        "Optuna interop test skipped: no Python with optuna at {candidate:?}; \
         run `.ci/python-venv.sh` (creates ~/.cache/hpo-venv with optuna==5.0.0) or set HPO_PYTHON"
    );
    if std::env::var_os("HPO_REQUIRE_OPTUNA").is_some_and(|v| v == "1") {
        panic!("{msg} (HPO_REQUIRE_OPTUNA=1)");
    }
    eprintln!("{msg}");
    None
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/interop/optuna_interop.py")
}

fn run_python(py: &Path, args: &[&str]) {
    let out = Command::new(py).arg(script()).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "optuna_interop.py {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Where the studies live: a SQLite file, or a PostgreSQL database.
enum Place {
    Sqlite(PathBuf),
    #[cfg(feature = "postgres")]
    Postgres(crate::postgres_server::TestDb),
}

impl Place {
    /// The argument the script takes: a file path or a `postgresql://` URL.
    fn arg(&self) -> String {
        match self {
            Place::Sqlite(db) => db.to_str().unwrap().to_owned(),
            #[cfg(feature = "postgres")]
            Place::Postgres(db) => db.url(),
        }
    }

    /// A storage for writing.
    fn open(&self) -> Arc<dyn Storage> {
        match self {
            Place::Sqlite(db) => Arc::new(SqliteStorage::open(db).unwrap()),
            #[cfg(feature = "postgres")]
            Place::Postgres(db) => Arc::new(db.open()),
        }
    }

    /// A storage for reading (read-only where the storage has the mode).
    fn reader(&self) -> Arc<dyn Storage> {
        match self {
            Place::Sqlite(db) => Arc::new(SqliteStorage::open_read_only(db).unwrap()),
            #[cfg(feature = "postgres")]
            Place::Postgres(db) => Arc::new(db.open()),
        }
    }

    /// A file for the script's dump.
    fn dump_file(&self) -> PathBuf {
        match self {
            Place::Sqlite(db) => db.with_extension("optuna.json"),
            #[cfg(feature = "postgres")]
            Place::Postgres(db) => std::env::temp_dir().join(format!("{}.optuna.json", db.name)),
        }
    }
}

/// Every study as Optuna sees it.
fn optuna_dump(py: &Path, place: &Place) -> BTreeMap<String, Value> {
    let out = place.dump_file();
    run_python(py, &["dump", &place.arg(), out.to_str().unwrap()]);
    let studies: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    studies
        .into_iter()
        .map(|s| (s["name"].as_str().unwrap().to_owned(), s))
        .collect()
}

/// Python's `repr(float)`.
fn repr(x: f64) -> Value {
    Value::from(match x {
        x if x.is_nan() => "nan".to_owned(),
        f64::INFINITY => "inf".to_owned(),
        f64::NEG_INFINITY => "-inf".to_owned(),
        x => python_float_repr(x),
    })
}

fn canon(v: Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => repr(n.as_f64().unwrap()),
        Value::Array(a) => Value::Array(a.into_iter().map(canon).collect()),
        Value::Object(o) => Value::Object(o.into_iter().map(|(k, v)| (k, canon(v))).collect()),
        v => v,
    }
}

fn canon_params(t: &FrozenTrial) -> Value {
    let m: Map<String, Value> = t
        .params()
        .into_iter()
        .map(|(k, v)| (k, canon(v.to_json_value())))
        .collect();
    Value::Object(m)
}

fn when(d: Option<chrono::DateTime<chrono::Utc>>) -> Value {
    d.map_or(Value::Null, |d| {
        Value::from(d.format("%Y-%m-%d %H:%M:%S%.6f").to_string())
    })
}

/// Every study as hpo sees it, in the script's canonical form.
fn hpo_dump(place: &Place) -> BTreeMap<String, Value> {
    let s = place.reader();
    let mut out = BTreeMap::new();
    for summary in s.studies().unwrap() {
        let trials = s.trials(summary.id).unwrap();
        let dumped: Vec<Value> = trials
            .iter()
            .map(|t| {
                json!({
                    "number": t.number,
                    "state": t.state.as_str(),
                    "values": t.values.as_ref().map(|vs| vs.iter().map(|v| repr(*v)).collect::<Vec<_>>()),
                    "datetime_start": when(t.datetime_start),
                    "datetime_complete": when(t.datetime_complete),
                    "params": canon_params(t),
                    "distributions": t.distributions.iter().map(|(k, d)| (k.clone(), Value::from(d.to_json()))).collect::<Map<_, _>>(),
                    "intermediate_values": t.intermediate_values.iter().map(|(k, v)| (k.to_string(), repr(*v))).collect::<Map<_, _>>(),
                    "user_attrs": t.user_attrs,
                    "system_attrs": t.system_attrs,
                })
            })
            .collect();
        let mut study = json!({
            "name": summary.name,
            "directions": summary.directions.iter().map(|d| d.as_str()).collect::<Vec<_>>(),
            "user_attrs": s.study_user_attrs(summary.id).unwrap(),
            "system_attrs": s.study_system_attrs(summary.id).unwrap(),
            "trials": dumped,
        });
        if let [dir] = summary.directions.as_slice() {
            let best = trials
                .iter()
                .filter(|t| t.state == TrialState::Complete)
                .filter_map(|t| Some((t, t.value()?)))
                .fold(None::<(&Arc<FrozenTrial>, f64)>, |b, (t, v)| match b {
                    Some((_, bv)) if !dir.is_better(v, bv) => b,
                    _ => Some((t, v)),
                });
            if let Some((t, v)) = best {
                study["best"] =
                    json!({"number": t.number, "value": repr(v), "params": canon_params(t)});
            }
        }
        out.insert(summary.name.clone(), study);
    }
    out
}

fn assert_same(hpo: &BTreeMap<String, Value>, optuna: &BTreeMap<String, Value>) {
    assert_eq!(
        hpo.keys().collect::<Vec<_>>(),
        optuna.keys().collect::<Vec<_>>()
    );
    for (name, h) in hpo {
        let o = &optuna[name];
        for key in ["name", "directions", "user_attrs", "system_attrs", "best"] {
            assert_eq!(h.get(key), o.get(key), "study {name}: `{key}` differs");
        }
        let (ht, ot) = (
            h["trials"].as_array().unwrap(),
            o["trials"].as_array().unwrap(),
        );
        assert_eq!(ht.len(), ot.len(), "study {name}: trial count");
        for (a, b) in ht.iter().zip(ot) {
            assert_eq!(
                a, b,
                "study {name}: trial {} differs (hpo left, Optuna right)",
                a["number"]
            );
        }
    }
}

fn temp(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hpo-interop-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("study.db")
}

#[test]
fn optuna_reads_a_study_written_by_hpo() {
    let Some(py) = python() else { return };
    optuna_reads_hpo(&py, &Place::Sqlite(temp("hpo-writes")));
}

#[test]
fn hpo_reads_and_resumes_a_study_written_by_optuna() {
    let Some(py) = python() else { return };
    hpo_resumes_optuna(&py, &Place::Sqlite(temp("optuna-writes")));
}

#[cfg(feature = "postgres")]
#[test]
fn optuna_reads_a_study_written_by_hpo_on_postgres() {
    let Some(db) = crate::postgres_server::TestDb::create() else {
        return;
    };
    let Some(py) = python() else { return };
    optuna_reads_hpo(&py, &Place::Postgres(db));
}

#[cfg(feature = "postgres")]
#[test]
fn hpo_reads_and_resumes_a_study_written_by_optuna_on_postgres() {
    let Some(db) = crate::postgres_server::TestDb::create() else {
        return;
    };
    let Some(py) = python() else { return };
    hpo_resumes_optuna(&py, &Place::Postgres(db));
}

fn optuna_reads_hpo(py: &Path, place: &Place) {
    let storage = place.open();
    let study = Study::builder()
        .name("hpo_single")
        .storage(Arc::clone(&storage))
        .sampler(RandomSampler::seeded(3))
        .build()
        .unwrap();
    study.set_user_attr("owner", "hpo").unwrap();
    study
        .set_user_attr("tags", json!(["ref", 1, 2.5, null]))
        .unwrap();
    study
        .enqueue([
            ("x", ParamValue::from(0.5)),
            ("n_layers", ParamValue::from(3)),
            ("act", ParamValue::from("relu")),
        ])
        .unwrap();
    study
        .optimize(8, |t| -> Result<f64, TrialError> {
            let x = t.suggest_float("x", -10.0, 10.0)?;
            t.suggest_float_step("x_step", 0.0, 1.0, 0.25)?;
            t.suggest_float_log("lr", 1e-5, 1e-1)?;
            let n = t.suggest_int("n_layers", 1, 8)?;
            t.suggest_int_log("units", 16, 512)?;
            t.suggest_int_step("k_step", 0, 10, 2)?;
            t.suggest_categorical("act", &["relu", "tanh", "gelu"])?;
            t.suggest_categorical(
                "mixed_choice",
                &[
                    hpo_core::Choice::Null,
                    hpo_core::Choice::Bool(true),
                    hpo_core::Choice::Int(3),
                    hpo_core::Choice::Float(1.5),
                    hpo_core::Choice::Str("s".into()),
                ],
            )?;
            t.set_user_attr("note", format!("trial {}", t.number()))?;
            t.set_user_attr("nested", json!({"a": [1, 2], "b": null}))?;
            let value = x * x + n as f64;
            for step in 0..3 {
                t.report(step, value + 3.0 - step as f64)?;
            }
            match t.number() {
                3 => {
                    t.report(3, f64::INFINITY)?;
                    t.report(4, f64::NAN)?;
                    Ok(value)
                }
                4 => Err(TrialError::Pruned),
                5 => Err(TrialError::Failed("a failing trial".into())),
                _ => Ok(value),
            }
        })
        .unwrap();
    // One trial left RUNNING, one left WAITING.
    let running = study.ask().unwrap();
    study.enqueue([("x", ParamValue::from(-1.5))]).unwrap();

    let multi = Study::builder()
        .name("hpo_multi")
        .storage(Arc::clone(&storage))
        .directions([Direction::Minimize, Direction::Maximize])
        .sampler(RandomSampler::seeded(4))
        .build()
        .unwrap();
    for i in 0..3 {
        let mut t = multi.ask().unwrap();
        let a = t.suggest_float("a", 0.0, 1.0).unwrap();
        if i == 1 {
            // hpo's Study fails non-finite objectives; write them straight to
            // the storage to check Optuna reads INF_POS / INF_NEG written by hpo.
            let values = [f64::INFINITY, f64::NEG_INFINITY];
            storage
                .finish_trial(t.id(), TrialState::Complete, Some(&values), &[])
                .unwrap();
        } else {
            multi
                .tell(t, Ok::<_, TrialError>(vec![a, 1.0 - a]))
                .unwrap();
        }
    }
    drop(running);

    let optuna = optuna_dump(py, place);
    let hpo = hpo_dump(place);
    assert_same(&hpo, &optuna);
    let single = &optuna["hpo_single"];
    assert_eq!(single["trials"].as_array().unwrap().len(), 10);
    assert_eq!(
        single["trials"][0]["params"]["act"],
        json!("relu"),
        "the enqueued params were used"
    );
    assert_eq!(single["trials"][4]["state"], json!("PRUNED"));
    assert_eq!(single["trials"][5]["state"], json!("FAIL"));
    assert_eq!(single["trials"][8]["state"], json!("RUNNING"));
    assert_eq!(single["trials"][9]["state"], json!("WAITING"));
    assert_eq!(
        single["best"]["number"],
        json!(study.best_trial().unwrap().number)
    );
    assert_eq!(
        optuna["hpo_multi"]["trials"][1]["values"],
        json!(["inf", "-inf"])
    );
}

fn hpo_resumes_optuna(py: &Path, place: &Place) {
    run_python(py, &["write", &place.arg()]);
    let optuna = optuna_dump(py, place);
    assert_same(&hpo_dump(place), &optuna);
    let before = optuna["optuna_single"]["trials"].as_array().unwrap().len();
    assert_eq!(
        optuna["optuna_single"]["trials"][before - 1]["state"],
        json!("WAITING")
    );

    // Resume in hpo: the WAITING trial Optuna enqueued runs first, with its fixed params.
    let storage = place.open();
    let study = Study::builder()
        .name("optuna_single")
        .storage(storage)
        .sampler(RandomSampler::seeded(5))
        .load()
        .unwrap();
    study
        .optimize(3, |t| -> Result<f64, TrialError> {
            let x = t.suggest_float("x", -10.0, 10.0)?;
            let n = t.suggest_int("n_layers", 1, 8)?;
            t.suggest_categorical("act", &["relu", "tanh", "gelu"])?;
            Ok(x * x + n as f64)
        })
        .unwrap();
    let trials = study.trials().unwrap();
    assert_eq!(
        trials.len(),
        before + 2,
        "the WAITING trial plus two new ones"
    );
    let claimed = &trials[before - 1];
    assert_eq!(claimed.state, TrialState::Complete);
    assert_eq!(claimed.param("x"), Some(ParamValue::from(-1.5)));
    assert_eq!(claimed.param("n_layers"), Some(ParamValue::from(2)));
    assert_eq!(claimed.param("act"), Some(ParamValue::from("gelu")));

    // Optuna reads what hpo wrote, exactly as hpo does ...
    assert_same(&hpo_dump(place), &optuna_dump(py, place));
    // ... and resumes it in turn, with contiguous numbers (checked in the script).
    run_python(py, &["resume", &place.arg(), "optuna_single", "2"]);
    let s = place.open();
    let id = s.find_study("optuna_single").unwrap().unwrap().id;
    let numbers: Vec<u64> = s.trials(id).unwrap().iter().map(|t| t.number).collect();
    assert_eq!(numbers, (0..(before as u64 + 4)).collect::<Vec<_>>());
}
