//! Typed search spaces: the heavy-model rule as one line, a warm start from a
//! known-good configuration, and the best trial read back as a typed config.
//!
//! Run with `cargo run --example search_space`. The integration tests
//! (`tests/it/search_space.rs`) include this file, so the space the book
//! shows, the one this example runs and the one the tests check are one
//! definition; that is why its items are `pub(crate)`.

use hpo::{Direction, RandomSampler, SearchSpace, Study};

// ANCHOR: backbone
#[derive(Debug, Clone, Copy, PartialEq, hpo::Choice)]
pub(crate) enum Backbone {
    BertBase,
    RobertaBase,
    DebertaV3Base,
    BertLarge,
    RobertaLarge,
    DebertaV3Large,
}

impl Backbone {
    pub(crate) fn is_heavy(self) -> bool {
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
pub(crate) struct Criteria {
    #[param(choice)]
    pub(crate) model: Backbone,
    #[param(float(1e-6..=5e-4, log))]
    pub(crate) lr: f64,
    #[param(choice(8, 12, 16, 24, 32, 48, 64))]
    pub(crate) batch_size: usize,
    #[param(int(128..=512, step = 32))]
    pub(crate) max_len: usize,
    #[param(int(1..=8))]
    pub(crate) grad_accum: usize,
    #[param(int(0..=3))]
    pub(crate) head_layers: usize,
    #[param(int(64..=1024, log), active_if = head_layers > 0)]
    pub(crate) head_hidden: Option<usize>,
    #[param(fixed = 100)]
    pub(crate) epochs: usize,
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
    // Constraints that contradict each other are found here, before any trial.
    Criteria::check()?;
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
    study.optimize(60, |trial| {
        let config = Criteria::sample(trial)?;
        Ok(train(&config))
    })?;
    let best = Criteria::from_params(&study.best_trial()?.params())?;
    println!("best: {best:?}");
    // ANCHOR_END: study
    Ok(())
}
