//! Typed search spaces: the heavy-model rule as one line, a warm start from a
//! known-good configuration, and the best trial read back as a typed config.
//!
//! Run with `cargo run --example search_space`.

use hpo::{Direction, RandomSampler, SearchSpace, Study, TrialError};

// ANCHOR: backbone
#[derive(Debug, Clone, Copy, PartialEq, hpo::Choice)]
enum Backbone {
    BertBase,
    RobertaBase,
    DebertaV3Base,
    BertLarge,
    RobertaLarge,
    DebertaV3Large,
}

impl Backbone {
    fn is_heavy(self) -> bool {
        matches!(
            self,
            Self::BertLarge | Self::RobertaLarge | Self::DebertaV3Large
        )
    }
}
// ANCHOR_END: backbone

// ANCHOR: criteria
/// Hyperparameters of the criteria classifier.
#[hpo::search_space]
#[constraint(if model.is_heavy() { batch_size <= 16, max_len <= 384, grad_accum <= 4 })]
#[derive(Debug, Clone, PartialEq)]
struct Criteria {
    #[param(choice)]
    model: Backbone,
    #[param(float(1e-6..=5e-4, log))]
    lr: f64,
    #[param(choice(8, 12, 16, 24, 32, 48, 64))]
    batch_size: usize,
    #[param(int(128..=512, step = 32))]
    max_len: usize,
    #[param(int(1..=8))]
    grad_accum: usize,
    #[param(int(0..=3))]
    head_layers: usize,
    #[param(int(64..=1024, log), active_if = head_layers > 0)]
    head_hidden: Option<usize>,
    #[param(fixed = 100)]
    epochs: usize,
}
// ANCHOR_END: criteria

/// A stand-in for training: pretends DeBERTa-v3-large at lr 2e-5 with a long
/// context is best.
fn train(c: &Criteria) -> f64 {
    let model = if c.model == Backbone::DebertaV3Large {
        0.0
    } else {
        0.3
    };
    model + (c.lr.log10() + 4.7).powi(2) + (512.0 - c.max_len as f64) / 1024.0
}

fn main() -> anyhow::Result<()> {
    // ANCHOR: describe
    println!("{}", Criteria::describe());
    // ANCHOR_END: describe

    // ANCHOR: study
    let study = Study::builder()
        .direction(Direction::Minimize)
        .sampler(RandomSampler::seeded(7))
        .build()?;
    // A warm start from a configuration known to work.
    let known_good = Criteria {
        model: Backbone::RobertaBase,
        lr: 3e-5,
        batch_size: 32,
        max_len: 256,
        grad_accum: 1,
        head_layers: 0,
        head_hidden: None,
        epochs: 100,
    };
    study.enqueue(known_good.to_params())?;
    study.optimize(60, |trial| -> Result<f64, TrialError> {
        let config = Criteria::sample(trial)?;
        Ok(train(&config))
    })?;
    let best = Criteria::from_params(&study.best_trial()?.params())?;
    println!("best: {best:?}");
    // ANCHOR_END: study
    Ok(())
}
