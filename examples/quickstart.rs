//! Quickstart: tune a small analytic function and print the best trial.
//!
//! Run with `cargo run --release --example quickstart`.

use hpo::{Direction, Optimize, Study};

fn main() -> anyhow::Result<()> {
    // ANCHOR: study
    let study = Study::builder()
        .name("quickstart")
        .direction(Direction::Minimize)
        .build()?;
    // ANCHOR_END: study

    // ANCHOR: objective
    let opts = Optimize::new().trials(100).callback(|_, t| {
        if t.number % 10 == 9 {
            println!("trial {:>3}: {:?} {:?}", t.number, t.state, t.values);
        }
    });
    // A stand-in for a training run: a noise-free "validation loss" with a
    // known optimum at lr = 1e-3, layers = 3, activation = "gelu", dropout = 0.1.
    study.optimize_with(opts, |trial| {
        let lr = trial.suggest_float_log("lr", 1e-5, 1e-1)?;
        let layers = trial.suggest_int("layers", 1, 8)?;
        let activation = trial.suggest_categorical("activation", &["relu", "tanh", "gelu"])?;
        let dropout = trial.suggest_float_step("dropout", 0.0, 0.5, 0.05)?;

        let penalty = match activation {
            "gelu" => 0.0,
            "relu" => 0.05,
            _ => 0.2,
        };
        let loss = (lr.log10() + 3.0).powi(2)
            + 0.1 * (layers as f64 - 3.0).powi(2)
            + (dropout - 0.1).powi(2)
            + penalty;
        Ok(loss)
    })?;
    // ANCHOR_END: objective

    // ANCHOR: best
    let best = study.best_trial()?;
    println!(
        "best trial: #{} with loss {:.5}",
        best.number,
        best.value().unwrap_or(f64::NAN)
    );
    for (name, value) in best.params() {
        println!("  {name} = {value}");
    }
    // ANCHOR_END: best
    Ok(())
}
