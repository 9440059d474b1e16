//! Fixture studies for the CLI tests, made by real hpo runs on a toy
//! objective, and helpers to run the `hpo` binary on them.

use hpo::{
    Direction, MedianConfig, MedianPruner, Optimize, RandomSampler, Study, TpeSampler, Trial,
    TrialError,
};
use std::path::{Path, PathBuf};

/// Name of the hpo-written study: untrusted-looking on purpose, so every
/// output path is tested on markup.
pub const HPO_STUDY: &str = "net <script>alert(1)</script>";
/// A two-objective study in the same file.
pub const PARETO_STUDY: &str = "pareto";
/// The Optuna-written study of `data/optuna_importance.db`.
pub const OPTUNA_STUDY: &str = "importance <script>alert(1)</script>";

/// Trials run in the hpo study.
pub const N_TRIALS: usize = 40;
/// Epochs each trial trains (reports) at most.
pub const EPOCHS: u64 = 12;

/// A fresh temporary directory for one test.
pub fn tempdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("hpo-cli-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The quickstart's loss with a learning curve: converges towards it over
/// the epochs. Trials with 8 layers fail (a stand-in for a crash), and the
/// memory a run "needs" grows with layers (test data: recorded as the
/// user attributes burn training records, so the memory plot has input).
fn objective(trial: &mut Trial) -> Result<f64, TrialError> {
    let lr = trial.suggest_float_log("lr", 1e-5, 1e-1)?;
    let layers = trial.suggest_int("layers", 1, 8)?;
    let activation = trial.suggest_categorical("activation", &["relu", "tanh", "<i>gelu</i>"])?;
    let dropout = trial.suggest_float_step("dropout", 0.0, 0.5, 0.05)?;
    trial.set_user_attr("estimated_peak_bytes", (layers as u64) * 300 * 1024 * 1024)?;
    trial.set_user_attr("note", "<script>alert(2)</script>")?;
    if layers == 8 {
        return Err(TrialError::failed("<b>simulated crash</b> at 8 layers"));
    }
    let penalty = match activation {
        "<i>gelu</i>" => 0.0,
        "relu" => 0.05,
        _ => 0.2,
    };
    let floor = (lr.log10() + 3.0).powi(2)
        + 0.1 * (layers as f64 - 3.0).powi(2)
        + (dropout - 0.1).powi(2)
        + penalty;
    let mut loss = f64::NAN;
    for epoch in 1..=EPOCHS {
        loss = floor + 2.0 * (-(epoch as f64) / 3.0).exp();
        trial.report(epoch, loss)?;
        if trial.should_prune()? {
            return Err(TrialError::Pruned);
        }
    }
    trial.set_user_attr(
        "peak_rss_bytes",
        (layers as u64) * 280 * 1024 * 1024 + 50 * 1024 * 1024,
    )?;
    trial.set_user_attr("oom_retries", 0)?;
    Ok(loss)
}

/// Writes the hpo fixture database (two studies) at `path`, the main one
/// named `name` with its trials run on `jobs` threads.
pub fn make_hpo_db(path: &Path, name: &str, jobs: usize) {
    make_hpo_study(&format!("sqlite:{}", path.display()), name, jobs);
}

/// Writes the fixture's two studies into the storage at `url`.
pub fn make_hpo_study(url: &str, name: &str, jobs: usize) {
    let url = url.to_owned();
    let study = Study::builder()
        .name(name)
        .storage_url(url.clone())
        .direction(Direction::Minimize)
        .sampler(TpeSampler::seeded(1))
        .pruner(
            MedianPruner::new(MedianConfig {
                n_startup_trials: 5,
                n_warmup_steps: 3,
                ..MedianConfig::default()
            })
            .unwrap(),
        )
        .build()
        .unwrap();
    study
        .set_user_attr("owner", "<script>alert(3)</script>")
        .unwrap();
    study
        .optimize_with(Optimize::new().trials(N_TRIALS).jobs(jobs), objective)
        .unwrap();

    let pareto = Study::builder()
        .name(PARETO_STUDY)
        .storage_url(url)
        .directions([Direction::Minimize, Direction::Minimize])
        .sampler(RandomSampler::seeded(2))
        .build()
        .unwrap();
    pareto
        .optimize_with(Optimize::new().trials(12), |t: &mut Trial| {
            let x = t.suggest_float("x", 0.0, 1.0)?;
            Ok::<_, TrialError>(vec![x, (1.0 - x).powi(2)])
        })
        .unwrap();
}

/// A shared, lazily built copy of the hpo fixture (building it runs 52
/// trials; tests copy it before use when they need their own file).
pub fn hpo_db() -> &'static Path {
    use std::sync::OnceLock;
    static DB: OnceLock<PathBuf> = OnceLock::new();
    DB.get_or_init(|| {
        let dir = tempdir("fixture");
        let p = dir.join("hpo.db");
        make_hpo_db(&p, HPO_STUDY, 1);
        p
    })
}

/// A private copy of a fixture file in a fresh directory.
pub fn copy_of(src: &Path, tag: &str) -> PathBuf {
    let dir = tempdir(tag);
    let dst = dir.join(src.file_name().unwrap());
    std::fs::copy(src, &dst).unwrap();
    dst
}

/// The Optuna-written fixture (made by `make_optuna_fixture.py`).
pub fn optuna_db() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cli/data/optuna_importance.db")
}

/// Optuna's schema reference study (hpo-core's fixture).
pub fn optuna_ref_db() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("hpo-core/tests/data/optuna_5_0_schema_ref.db")
}

/// `sqlite:` URL of a path.
pub fn url(p: &Path) -> String {
    format!("sqlite:{}", p.display())
}

/// The `hpo` binary.
pub fn hpo() -> assert_cmd::Command {
    assert_cmd::Command::cargo_bin("hpo").unwrap()
}

/// Runs `hpo args...`, asserts success, returns stdout.
pub fn ok(args: &[&str]) -> String {
    let out = hpo().args(args).output().unwrap();
    assert!(
        out.status.success(),
        "hpo {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Runs `hpo args...`, asserts exit status `code`, returns stderr.
pub fn fails(args: &[&str], code: i32) -> String {
    let out = hpo().args(args).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(code),
        "hpo {args:?}: stdout {} stderr {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stderr).unwrap()
}
