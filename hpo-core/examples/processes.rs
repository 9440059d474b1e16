//! Parallel trials in worker processes, admitted by memory.
//!
//! `cargo run -p hpo-core --example processes` runs 16 trials of a pretend
//! transformer fine-tuning on the CPU: each trial in its own process, as
//! many at once as a 24 GiB budget admits by the estimator's numbers. The
//! "training" sleeps instead of computing, and a configuration whose
//! micro-batch is too big for the (pretend) device dies with a CUDA-style
//! out-of-memory message, so the executor relaunches it smaller. No GPU is
//! touched.

// ANCHOR: main
use hpo_core::executor::{self, Batch, MemoryEstimator, ProcessConfig, Shape, GIB};
use hpo_core::{Choice, Direction, Optimize, ParamValue, RandomSampler, Study, Trial, TrialError};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The search space, drawn identically by the estimator and the objective.
fn space(trial: &mut Trial) -> Result<(String, Batch, i64), TrialError> {
    let model = trial.suggest_categorical("model", &["bert-base", "bert-large"])?;
    let batch = trial.suggest_categorical("batch", &[8i64, 16, 32, 64])?;
    let accumulation = trial.suggest_categorical("accumulation", &[1i64, 2, 4])?;
    let length = trial.suggest_categorical("length", &[128i64, 256, 512])?;
    Ok((
        model.to_owned(),
        Batch::new(batch as u32, accumulation as u32),
        length,
    ))
}

/// An analytic estimate of the peak device memory (hpo-burn ships a real one).
fn gib_needed(model: &str, micro: u32, length: i64) -> f64 {
    let (weights, per_token) = match model {
        "bert-large" => (5.4, 0.0019),
        _ => (1.8, 0.0007),
    };
    weights + per_token * f64::from(micro) * length as f64
}

struct Estimator;

impl MemoryEstimator for Estimator {
    fn propose(&self, trial: &mut Trial) -> Result<Shape, TrialError> {
        let (model, batch, _) = space(trial)?;
        Ok(Shape::new(model, batch))
    }

    fn peak_bytes(&self, params: &BTreeMap<String, ParamValue>, batch: Batch) -> u64 {
        let model = params
            .get("model")
            .and_then(ParamValue::as_choice)
            .and_then(Choice::as_str)
            .unwrap_or("bert-large");
        let length = params
            .get("length")
            .and_then(ParamValue::as_i64)
            .unwrap_or(512);
        (gib_needed(model, batch.micro, length) * GIB as f64) as u64
    }
}

fn objective(trial: &mut Trial) -> Result<f64, TrialError> {
    let (model, requested, length) = space(trial)?;
    // The executor sets the batch it admitted (shrunk after an OOM).
    let batch = executor::batch_of(trial).unwrap_or(requested);
    let true_gib = 1.3 * gib_needed(&model, batch.micro, length); // the estimate is 30 % low
    if true_gib > 22.0 {
        eprintln!("CUDA error: out of memory (needed {true_gib:.1} GiB)");
        std::process::abort(); // as a real CUDA OOM poisons the process
    }
    executor::record_peak(trial, (true_gib * GIB as f64) as u64)?;
    std::thread::sleep(Duration::from_millis(200)); // "training"
    let size = if model == "bert-large" { 0.05 } else { 0.0 };
    Ok(0.9 - size - 0.01 * (batch.effective() as f64).log2() + length as f64 / 1e4)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // In a worker process this runs the assigned trial and exits.
    executor::worker_main(objective)?;

    let dir = std::env::temp_dir().join(format!("hpo-processes-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let url = format!("sqlite:{}", dir.join("study.db").display());
    let study = Study::builder()
        .name("processes")
        .storage_url(&url)
        .direction(Direction::Maximize)
        .sampler(RandomSampler::seeded(7))
        .heartbeat(Duration::from_secs(1), Duration::from_secs(10))
        .load_if_exists(true)
        .build()?;
    // The configuration that crashed the seed team's study: it fits neither
    // alone nor by its estimate; the executor shrinks it, then relaunches it.
    study.enqueue([
        ("model", ParamValue::from("bert-large")),
        ("batch", ParamValue::from(64i64)),
        ("accumulation", ParamValue::from(1i64)),
        ("length", ParamValue::from(512i64)),
    ])?;
    let config = ProcessConfig::new(&url, Arc::new(Estimator))
        .budget(24 * GIB) // one 24 GB card
        .context(GIB / 2) // a CUDA context per worker process
        .trial_timeout(Duration::from_secs(60));
    study.optimize_with(Optimize::new().trials(16).processes(config), objective)?;
    // ANCHOR_END: main

    let trials = study.trials()?;
    let relaunched = trials
        .iter()
        .filter(|t| t.system_attrs.contains_key(executor::OOM_RETRIES_ATTR))
        .count();
    let best: Vec<String> = study
        .best_params()?
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    println!(
        "{} trials ({} OOM relaunches); best value {:.3} with {}",
        trials.len(),
        relaunched,
        study.best_value()?,
        best.join(", ")
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
