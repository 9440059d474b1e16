//! optuna-dashboard reads hpo-written studies: started from the project's
//! venv (`.ci/python-venv.sh`) on the CLI tests' fixture study, in SQLite
//! and (feature `postgres`) in PostgreSQL, it lists the study, serves its
//! trials with their parameters, intermediate values and attributes, and
//! computes its parameter importances; headless Chromium renders its trial
//! list and its plots (PNGs kept under the target folder's
//! `tmp/dashboard/`). Skipped without optuna-dashboard in the venv unless
//! `HPO_REQUIRE_DASHBOARD=1` (CI).

use crate::cli::fixture::{self, HPO_STUDY, N_TRIALS};
use crate::servers::{browse, chromium, free_port, python_with, temp_dir, Server};
use hpo::{Study, TrialState};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// Runs optuna-dashboard's command (the venv has no `python -m` entry).
const DASHBOARD: &str = "import sys; from optuna_dashboard._cli import main; \
                         sys.argv[0] = 'optuna-dashboard'; main()";

fn dashboard(py: &Path, storage: &str, dir: &Path) -> Server {
    let port = free_port();
    let args = [
        "-c",
        DASHBOARD,
        storage,
        "--host",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--server",
        "wsgiref",
    ]
    .map(String::from)
    .to_vec();
    Server::start(py, args, port, "/api/meta", dir.join("dashboard.log"))
}

fn get(url: &str) -> Value {
    ureq::get(url)
        .call()
        .unwrap_or_else(|e| panic!("{url}: {e}"))
        .into_json()
        .unwrap()
}

/// Where the screenshots are kept.
fn artifacts() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Checks what the dashboard at `base` shows of `study` (as hpo reads
/// it), and takes its screenshots, named after `tag`.
fn check(base: &str, study: &Study, tag: &str) {
    let list = get(&format!("{base}/api/studies"));
    let summaries = list["study_summaries"].as_array().unwrap();
    let summary = summaries
        .iter()
        .find(|s| s["study_name"] == study.name())
        .unwrap_or_else(|| panic!("{} not listed: {list}", study.name()));
    let id = summary["study_id"].as_u64().unwrap();
    assert_eq!(summary["directions"], serde_json::json!(["minimize"]));

    let detail = get(&format!("{base}/api/studies/{id}?after=0"));
    let shown = detail["trials"].as_array().unwrap();
    let trials = study.trials().unwrap();
    assert_eq!(shown.len(), trials.len());
    for (t, s) in trials.iter().zip(shown) {
        assert_eq!(s["number"].as_u64(), Some(t.number));
        let state = match t.state {
            TrialState::Complete => "Complete",
            TrialState::Pruned => "Pruned",
            TrialState::Fail => "Fail",
            TrialState::Running => "Running",
            TrialState::Waiting => "Waiting",
        };
        assert_eq!(s["state"], state, "trial {}", t.number);
        // In the order they were suggested; compared by name.
        let mut params: Vec<(String, f64)> = s["params"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_owned(),
                    p["param_internal_value"].as_f64().unwrap(),
                )
            })
            .collect();
        params.sort_by(|a, b| a.0.cmp(&b.0));
        let ours: Vec<(String, f64)> = t
            .internal_params
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
        assert_eq!(params, ours, "trial {}", t.number);
        let steps: Vec<(u64, f64)> = s["intermediate_values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| (p["step"].as_u64().unwrap(), p["value"].as_f64().unwrap()))
            .collect();
        let ours: Vec<(u64, f64)> = t
            .intermediate_values
            .iter()
            .map(|(s, v)| (*s, *v))
            .collect();
        assert_eq!(steps, ours, "trial {}", t.number);
        let attrs = s["user_attrs"].as_array().unwrap();
        for (k, v) in &t.user_attrs {
            let shown = attrs.iter().find(|a| a["key"] == k.as_str());
            let value = shown.map(|a| a["value"].clone()).unwrap_or_default();
            // The dashboard shows an attribute as text, JSON for non-strings.
            let expected = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            assert_eq!(
                value.as_str(),
                Some(expected.as_str()),
                "trial {} `{k}`",
                t.number
            );
        }
        if t.state == TrialState::Complete {
            assert_eq!(s["values"][0].as_f64(), t.value());
        }
    }
    let attrs = detail["user_attrs"].as_array().unwrap();
    assert!(attrs.iter().any(|a| a["key"] == "owner"), "{attrs:?}");

    let importances = get(&format!("{base}/api/studies/{id}/param_importances"));
    let names: Vec<&str> = importances["param_importances"][0]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for p in ["lr", "layers", "activation", "dropout"] {
        assert!(names.contains(&p), "{p} missing from {importances}");
    }

    let Some(chrome) = chromium() else { return };
    let dir = artifacts();
    // optuna-dashboard 0.21 lists trials on its "Trials (List)" page (its
    // old `trialTable` route renders nothing, for any study).
    let trials = dir.join(format!("trials-{tag}.png"));
    let dom = browse(
        &chrome,
        &format!("{base}/dashboard/studies/{id}/trials"),
        &trials,
        (1280, 800),
        15_000,
    );
    for text in [
        "40 Trials",
        "Intermediate Values",
        "Parameter",
        "layers",
        "User Attributes",
        "estimated_peak_bytes",
        "Pruned",
    ] {
        assert!(dom.contains(text), "the trial list lacks {text}");
    }
    let plots = dir.join(format!("study-{tag}.png"));
    let dom = browse(
        &chrome,
        &format!("{base}/dashboard/studies/{id}"),
        &plots,
        (1280, 2200),
        15_000,
    );
    for text in [
        "History",
        "Hyperparameter Importance",
        "Timeline",
        "Intermediate values",
        "Study User Attributes",
    ] {
        assert!(dom.contains(text), "the study page lacks {text}");
    }
    // Plotly draws each plot into an SVG of this class.
    assert!(
        dom.matches("class=\"main-svg\"").count() >= 4,
        "plots not drawn"
    );
    for png in [trials, plots] {
        let size = std::fs::metadata(&png).unwrap().len();
        assert!(size > 40_000, "{} is {size} bytes: blank?", png.display());
        eprintln!("screenshot: {}", png.display());
    }
}

#[test]
fn optuna_dashboard_shows_an_hpo_study_in_sqlite() {
    let Some(py) = python_with("optuna_dashboard", "HPO_REQUIRE_DASHBOARD") else {
        return;
    };
    let dir = temp_dir("dashboard-sqlite");
    let db = dir.join("hpo.db");
    fixture::make_hpo_db(&db, HPO_STUDY, 2);
    let study = Study::builder()
        .name(HPO_STUDY)
        .storage_url(format!("sqlite:{}", db.display()))
        .load()
        .unwrap();
    assert_eq!(study.trials().unwrap().len(), N_TRIALS);
    let server = dashboard(&py, &format!("sqlite:///{}", db.display()), &dir);
    check(&server.url, &study, "sqlite");
}

#[cfg(any(feature = "postgres", feature = "postgres-tls"))]
#[test]
fn optuna_dashboard_shows_an_hpo_study_in_postgresql() {
    let Some(py) = python_with("optuna_dashboard", "HPO_REQUIRE_DASHBOARD") else {
        return;
    };
    let admin = std::env::var("HPO_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgresql://postgres@127.0.0.1:5432/test".to_owned());
    let name = format!("hpo_dashboard_{}", std::process::id());
    // psycopg (in the venv for Optuna) creates and drops the database.
    let sql = |statement: String| {
        let script =
            "import psycopg, sys\nwith psycopg.connect(sys.argv[1], autocommit=True) as c: \
                      c.execute(sys.argv[2])";
        let out = std::process::Command::new(&py)
            .args(["-c", script, &admin, &statement])
            .output()
            .unwrap();
        out.status
            .success()
            .then_some(())
            .ok_or_else(|| String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let _ = sql(format!("DROP DATABASE IF EXISTS {name}"));
    if let Err(e) = sql(format!("CREATE DATABASE {name}")) {
        assert!(
            std::env::var("HPO_REQUIRE_POSTGRES").as_deref() != Ok("1"),
            "no PostgreSQL at {admin}: {e}"
        );
        eprintln!("skipped: no PostgreSQL at {admin}");
        return;
    }
    let (base, _) = admin.rsplit_once('/').unwrap();
    let url = format!("{base}/{name}");
    fixture::make_hpo_study(&url, HPO_STUDY, 2);
    let study = Study::builder()
        .name(HPO_STUDY)
        .storage_url(&url)
        .load()
        .unwrap();
    let dir = temp_dir("dashboard-postgres");
    let sqlalchemy = url.replacen("postgresql://", "postgresql+psycopg://", 1);
    let server = dashboard(&py, &sqlalchemy, &dir);
    check(&server.url, &study, "postgresql");
    drop(server);
    let _ = sql(format!("DROP DATABASE IF EXISTS {name}"));
}
