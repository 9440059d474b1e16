//! QMC, CMA-ES, GP and AutoSampler resumed in a new process: two worker processes, one after
//! the other, on one SQLite study file propose exactly what one uninterrupted
//! study does. The worker is this test binary run again
//! (`sampler_processes::worker`), configured through environment variables.

use hpo_core::storage::SqliteStorage;
use hpo_core::{
    AutoConfig, AutoLate, AutoSampler, CmaEsConfig, CmaEsSampler, Direction, GpConfig, GpSampler,
    QmcConfig, QmcSampler, Sampler, Study, TrialError,
};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

fn sampler(kind: &str) -> Arc<dyn Sampler> {
    match kind {
        "qmc" => Arc::new(QmcSampler::with_config(QmcConfig::seeded(21))),
        "cmaes" => Arc::new(CmaEsSampler::with_config(CmaEsConfig::seeded(21)).unwrap()),
        "cmawm" => Arc::new(
            CmaEsSampler::with_config(CmaEsConfig {
                with_margin: true,
                ..CmaEsConfig::seeded(21)
            })
            .unwrap(),
        ),
        // Refits every 4th observation past 20: the uninterrupted study grows
        // its cached factor between fits, the resumed one builds it afresh.
        "gp" => Arc::new(
            GpSampler::with_config(GpConfig {
                n_startup_trials: 6,
                n_preliminary_samples: 128,
                n_local_search: 3,
                refit_fraction: 0.2,
                ..GpConfig::seeded(21)
            })
            .unwrap(),
        ),
        // CMA-ES for 9 trials (3 per parameter), the GP to 12, then
        // CMA-ES warm-started from them.
        "auto" => Arc::new(
            AutoSampler::with_config(AutoConfig {
                gp_until: 12,
                late: AutoLate::CmaEs,
                cma_es_first: 3.0,
                ..AutoConfig::seeded(21)
            })
            .unwrap(),
        ),
        other => panic!("unknown sampler {other}"),
    }
}

fn study(db: &Path, kind: &str) -> Study {
    Study::builder()
        .name("resume")
        .storage(Arc::new(SqliteStorage::open(db).unwrap()))
        .sampler(sampler(kind))
        .direction(Direction::Minimize)
        .load_if_exists(true)
        .build()
        .unwrap()
}

fn objective(t: &mut hpo_core::Trial) -> Result<f64, TrialError> {
    let x = t.suggest_float("x", -3.0, 3.0)?;
    let y = t.suggest_float_log("y", 1e-3, 10.0)?;
    let k = t.suggest_int("k", 0, 12)?;
    Ok((x - 1.0).powi(2) + y.ln().powi(2) + (k as f64 - 5.0).abs())
}

/// The worker: `HPO_RESUME_TRIALS` trials of sampler `HPO_RESUME_SAMPLER`
/// on `HPO_RESUME_DB`.
#[test]
#[ignore = "run by the other tests as a separate process"]
fn worker() {
    let db = std::env::var("HPO_RESUME_DB").unwrap();
    let kind = std::env::var("HPO_RESUME_SAMPLER").unwrap();
    let trials: usize = std::env::var("HPO_RESUME_TRIALS").unwrap().parse().unwrap();
    study(Path::new(&db), &kind)
        .optimize(trials, objective)
        .unwrap();
}

fn run_worker(db: &Path, kind: &str, trials: usize) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "sampler_processes::worker",
            "--exact",
            "--ignored",
            "--test-threads=1",
        ])
        .env("HPO_RESUME_DB", db)
        .env("HPO_RESUME_SAMPLER", kind)
        .env("HPO_RESUME_TRIALS", trials.to_string())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "worker for {kind} failed");
}

fn temp_db(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hpo-sampler-proc-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("study.db")
}

fn params(study: &Study) -> Vec<Vec<(String, u64)>> {
    study
        .trials()
        .unwrap()
        .iter()
        .map(|t| {
            t.internal_params
                .iter()
                .map(|(k, v)| (k.clone(), v.to_bits()))
                .collect()
        })
        .collect()
}

/// Runs `kind` for `first` trials in one worker process and `second` in
/// another on one study, checks that they proposed exactly what one
/// uninterrupted study does, and returns the resumed study.
fn assert_resumes(kind: &str, first: usize, second: usize) -> Study {
    let db = temp_db(kind);
    run_worker(&db, kind, first);
    run_worker(&db, kind, second);
    let resumed = study(&db, kind);
    let whole = study(&temp_db(&format!("{kind}-whole")), kind);
    whole.optimize(first + second, objective).unwrap();
    let (r, w) = (params(&resumed), params(&whole));
    assert_eq!(r.len(), first + second, "{kind}");
    assert_eq!(
        r, w,
        "{kind}: the second process did not continue the first's search"
    );
    resumed
}

#[test]
fn qmc_and_cmaes_resumed_in_new_processes_continue_the_search() {
    for kind in ["qmc", "cmaes", "cmawm"] {
        assert_resumes(kind, 40, 40);
    }
}

#[test]
fn gp_resumed_in_a_new_process_continues_the_search() {
    assert_resumes("gp", 14, 14);
}

#[test]
fn auto_resumed_in_a_new_process_continues_past_its_switch() {
    // The first process runs the first CMA-ES's 9 trials, the GP's 3 and the
    // late CMA-ES's first 4; the second restores the late CMA-ES's
    // warm-started state from the study.
    let trials = assert_resumes("auto", 16, 24).trials().unwrap();
    // (The first trial, with no space to model yet, is sampled
    // independently and records no choice.)
    let chosen: Vec<Option<&str>> = trials
        .iter()
        .map(|t| t.system_attrs.get("auto:sampler").and_then(|c| c.as_str()))
        .collect();
    let chosen: Vec<&str> = chosen.iter().map(|c| c.unwrap_or("none")).collect();
    assert_eq!(chosen[0], "none");
    assert!(
        chosen[1..9].iter().all(|c| *c == "cma_es_first"),
        "{chosen:?}"
    );
    assert!(chosen[9..12].iter().all(|c| *c == "gp"), "{chosen:?}");
    assert!(chosen[12..].iter().all(|c| *c == "cma_es"), "{chosen:?}");
    // The two CMA-ES runs keep their states apart: the late one starts at
    // generation 0 under Optuna's keys, after the first one's generation 1.
    assert_eq!(trials[8].system_attrs["auto_first_cma:generation"], 1);
    assert!(!trials[8].system_attrs.contains_key("cma:generation"));
    assert_eq!(trials[12].system_attrs["cma:generation"], 0);
    // Stopped inside the first CMA-ES's generation, it resumes there too.
    assert_resumes("auto", 5, 11);
}
