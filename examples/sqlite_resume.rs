//! A study in a SQLite file that survives restarts and crashes.
//!
//! ```sh
//! cargo run --example sqlite_resume -- study.db   # 20 trials
//! cargo run --example sqlite_resume -- study.db   # 20 more, same study
//! ```
//!
//! The file is an Optuna database: `optuna.load_study(study_name="resume-demo",
//! storage="sqlite:///study.db")` and `optuna-dashboard sqlite:///study.db` read it.

use hpo::{Direction, RandomSampler, RetryPolicy, Study, Trial, TrialError};
use std::time::Duration;

fn objective(trial: &mut Trial) -> Result<f64, TrialError> {
    let lr = trial.suggest_float_log("lr", 1e-5, 1e-1)?;
    let layers = trial.suggest_int("layers", 1, 8)?;
    for epoch in 0..3 {
        trial.report(epoch, (lr.log10() + 3.0).powi(2) + 1.0 / (epoch + 1) as f64)?;
    }
    Ok((lr.log10() + 3.0).powi(2) + 0.1 * (layers as f64 - 3.0).powi(2))
}

fn main() -> anyhow::Result<()> {
    let path = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "resume-demo.db".into());
    // ANCHOR: open
    let study = Study::builder()
        .name("resume-demo")
        .storage_url(format!("sqlite:{path}"))
        .direction(Direction::Minimize)
        .sampler(RandomSampler::new())
        // A crashed worker's trial is failed after 60 s without a heartbeat
        // and re-run with the same parameters, at most twice.
        .heartbeat(Duration::from_secs(10), Duration::from_secs(60))
        .retry(RetryPolicy { max_retries: 2 })
        .load_if_exists(true)
        .build()?;
    // ANCHOR_END: open
    let before = study.trials()?.len();
    study.optimize(20, objective)?;
    let best = study.best_trial()?;
    println!(
        "{} trials in {path} ({before} from earlier runs); best is #{} with {:.4}",
        study.trials()?.len(),
        best.number,
        best.value().unwrap_or(f64::NAN)
    );
    Ok(())
}
