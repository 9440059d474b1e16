//! The OOM ladder on the memory-capped simulated device.

use crate::toy_examples;
use hpo_burn::batch::EncodedExample;
use hpo_burn::burn::tensor::backend::Backend;
use hpo_burn::{
    estimate_training_memory, Cpu, Error, FitReport, MemoryGuard, ModelConfig, Precision, Recorder,
    TrainConfig, TrainData, Trainer,
};

pub fn config() -> ModelConfig {
    ModelConfig::new(40, 2, 2, 32, 4, 64)
        .with_dropout(0.0)
        .with_head_dropout(0.0)
}

pub fn train_config(micro: usize, accumulation: usize) -> TrainConfig {
    TrainConfig {
        epochs: 1,
        micro_batch: micro,
        accumulation,
        learning_rate: 1e-3,
        seed: 3,
        ..TrainConfig::default()
    }
}

pub const LEN: usize = 12;

pub fn data() -> (Vec<EncodedExample>, Vec<EncodedExample>) {
    (toy_examples(64, LEN), toy_examples(16, LEN))
}

/// The toy task's two splits as the trainer takes them (two classes, pad 0).
pub fn train_data<'a>(train: &'a [EncodedExample], valid: &'a [EncodedExample]) -> TrainData<'a> {
    TrainData {
        train,
        valid,
        pad_id: 0,
        classes: 2,
    }
}

pub fn fit(
    micro: usize,
    accumulation: usize,
    guard: MemoryGuard,
    sink: &mut Recorder,
) -> hpo_burn::Result<FitReport> {
    let device = Default::default();
    Cpu::seed(&device, 3);
    let model = config().init::<Cpu>(&device).unwrap();
    let (train, valid) = data();
    let trainer = Trainer::<Cpu>::new(train_config(micro, accumulation), config(), "toy", device)
        .with_guard(guard);
    let data = train_data(&train, &valid);
    trainer.fit(model, data, sink).map(|(_, r)| r)
}

#[test]
fn ladder_halves_micro_batch_and_keeps_the_effective_batch() {
    let _lock = crate::backend_lock();
    // Micro-batch 4 fits, 8 and 16 do not.
    let capacity = estimate_training_memory(&config(), 4, LEN, Precision::F32).total();
    let mut sink = Recorder::new();
    let report = fit(16, 1, MemoryGuard::simulated(capacity), &mut sink).unwrap();
    assert_eq!(report.oom_retries, 2);
    assert_eq!(report.micro_batch, 4);
    assert_eq!(report.accumulation, 4);
    assert_eq!(report.micro_batch * report.accumulation, 16);
    assert_eq!(sink.attrs["oom_retries"], 2);
    assert_eq!(sink.attrs["micro_batch"], 4);

    // Same steps, same examples: the run matches one configured at 4 x 4
    // from the start (up to float summation order).
    let reference = fit(4, 4, MemoryGuard::Unlimited, &mut Recorder::new()).unwrap();
    let (a, b) = (&report.history[0], &reference.history[0]);
    assert!(
        (a.train_loss - b.train_loss).abs() < 1e-4,
        "{} vs {}",
        a.train_loss,
        b.train_loss
    );
    assert_eq!(a.tokens, b.tokens);
    assert!((a.valid.loss - b.valid.loss).abs() < 1e-3);
}

#[test]
fn below_the_floor_the_run_ends_as_oom_with_its_config() {
    let _lock = crate::backend_lock();
    let capacity = estimate_training_memory(&config(), 1, LEN, Precision::F32).total() - 1;
    let mut sink = Recorder::new();
    let err = fit(16, 1, MemoryGuard::simulated(capacity), &mut sink).unwrap_err();
    let Error::OomExhausted(exhausted) = err else {
        panic!("expected OomExhausted, got {err}");
    };
    let (config, message) = (exhausted.config, exhausted.message);
    assert!(message.contains("simulated device"), "{message}");
    assert_eq!(
        (config.batch, config.accumulation, config.retries),
        (1, 16, 4)
    );
    assert_eq!(
        (config.effective_batch, config.max_len, config.initial_batch),
        (16, 128, 16)
    );
    assert_eq!(config.model, "toy");
    assert_eq!(sink.attrs["oom_retries"], 4);
    assert!(sink.reports.is_empty(), "no epoch completed");
}
