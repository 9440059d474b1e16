//! Pruning: report from a training loop, stop early when the pruner says so,
//! and read how much was pruned.
//!
//! Run with `cargo run --release --example pruning`.

use hpo::{
    Direction, HyperbandConfig, PatientConfig, PatientPruner, Resource, Study, Trial, TrialError,
    TrialState,
};

/// A stand-in for one epoch of training: a noisy loss curve that converges
/// fast to a poor floor for large learning rates and slowly to a good one
/// for small ones.
fn validation_loss(lr: f64, epoch: u64) -> f64 {
    let u = lr.log10();
    let floor = 0.1 + 0.08 * (u + 3.0).powi(2);
    let rate = 0.03 + 0.3 * 10f64.powf(0.7 * (u + 1.0));
    let wobble = 0.01 * ((epoch as f64) * 12.9898 + lr * 78.233).sin();
    floor + (1.0 - floor) * (-rate * epoch as f64).exp() + wobble
}

// ANCHOR: objective
const EPOCHS: u64 = 100;

fn objective(trial: &mut Trial) -> Result<f64, TrialError> {
    let lr = trial.suggest_float_log("lr", 1e-4, 1e-1)?;
    let mut loss = f64::NAN;
    for epoch in 1..=EPOCHS {
        loss = validation_loss(lr, epoch); // train one epoch, then evaluate
        trial.report(epoch, loss)?; // one value per step, steps increasing
        if trial.should_prune()? {
            // Stored PRUNED, with the last reported loss as its value.
            return Err(TrialError::Pruned);
        }
    }
    Ok(loss)
}
// ANCHOR_END: objective

fn main() -> anyhow::Result<()> {
    // ANCHOR: pruner
    // Hyperband over epochs 10..=100, consulted only once a trial has not
    // improved for 10 epochs.
    let hyperband = HyperbandConfig {
        min_resource: 10,
        max_resource: Resource::Steps(EPOCHS),
        reduction_factor: 3,
        bootstrap_count: 0,
    }
    .init()?;
    let pruner = PatientPruner::new(
        hyperband,
        PatientConfig {
            patience: 10,
            min_delta: 0.0,
        },
    )?;
    let study = Study::builder()
        .name("pruning-example")
        .direction(Direction::Minimize)
        .pruner(pruner)
        .build()?;
    study.optimize(60, objective)?;
    // ANCHOR_END: pruner

    // ANCHOR: rates
    let trials = study.trials()?;
    let pruned = trials
        .iter()
        .filter(|t| t.state == TrialState::Pruned)
        .count();
    let epochs: u64 = trials
        .iter()
        .filter_map(|t| t.last_intermediate().map(|(step, _)| step))
        .sum();
    println!(
        "pruned {pruned} of {} trials ({:.0}%), trained {epochs} of {} epochs ({:.0}%)",
        trials.len(),
        100.0 * pruned as f64 / trials.len() as f64,
        trials.len() as u64 * EPOCHS,
        100.0 * epochs as f64 / (trials.len() as u64 * EPOCHS) as f64,
    );
    // Where were trials stopped? A pile-up at the first rungs means the
    // pruner decides before the curves have sorted themselves out.
    let mut stopped_at = std::collections::BTreeMap::new();
    for t in trials.iter().filter(|t| t.state == TrialState::Pruned) {
        if let Some((step, _)) = t.last_intermediate() {
            *stopped_at.entry(step).or_insert(0) += 1;
        }
    }
    println!("pruned at epoch (epoch: trials): {stopped_at:?}");
    // ANCHOR_END: rates

    let best = study.best_trial()?;
    println!(
        "best trial #{}: loss {:.4} with {:?}",
        best.number,
        best.value().unwrap_or(f64::NAN),
        best.params()
    );
    Ok(())
}
