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

/// A run on cubecl's device threads keeps no copy of the epoch's start (a
/// failed allocation there ends the process's device, so the executor
/// relaunches instead of rerunning the epoch): it trains exactly as a run
/// that keeps one, epoch after epoch, and returns its best epoch's model.
/// Under a simulated cap, refused before anything is allocated, the ladder
/// still reruns the epoch on those threads.
#[test]
fn without_the_ladder_training_is_unchanged_and_a_simulated_cap_still_halves() {
    use hpo_burn::burn::tensor::{Bool, Int, Tensor};
    use hpo_burn::panic_guard::BackendThreads;
    let _lock = crate::backend_lock();
    let device = Default::default();
    let (train, valid) = data();
    let run = |threads: BackendThreads| {
        Cpu::seed(&device, 3);
        let model = config().init::<Cpu>(&device).unwrap();
        let cfg = TrainConfig {
            epochs: 3,
            ..train_config(8, 1)
        };
        let mut trainer = Trainer::<Cpu>::new(cfg, config(), "toy", device);
        trainer.backend_threads = threads;
        let (model, report) = trainer
            .fit(model, train_data(&train, &valid), &mut Recorder::new())
            .unwrap();
        let ids = Tensor::<Cpu, 1, Int>::arange(1..13, &device).reshape([1, 12]);
        let segments = Tensor::<Cpu, 2, Int>::zeros([1, 12], &device);
        let pad: Tensor<_, 2, Bool> = segments.clone().equal_elem(1);
        // No dropout in the toy model: the training-mode forward is exact.
        let logits: Vec<f32> = model
            .forward(ids, segments, pad)
            .into_data()
            .to_vec()
            .unwrap();
        (report, logits)
    };
    let (kept, kept_logits) = run(BackendThreads::None);
    let (moved, moved_logits) = run(BackendThreads::cuda(0));
    assert_eq!(kept.history.len(), 3);
    for (a, b) in kept.history.iter().zip(&moved.history) {
        assert_eq!(
            (a.train_loss, a.valid, a.tokens),
            (b.train_loss, b.valid, b.tokens)
        );
    }
    assert_eq!(kept.best_epoch, moved.best_epoch);
    assert_eq!(kept_logits, moved_logits);

    let capacity = estimate_training_memory(&config(), 4, LEN, Precision::F32).total();
    Cpu::seed(&device, 3);
    let model = config().init::<Cpu>(&device).unwrap();
    let mut trainer = Trainer::<Cpu>::new(train_config(16, 1), config(), "toy", device)
        .with_guard(MemoryGuard::simulated(capacity));
    trainer.backend_threads = BackendThreads::cuda(0);
    let (_, report) = trainer
        .fit(model, train_data(&train, &valid), &mut Recorder::new())
        .unwrap();
    assert_eq!((report.oom_retries, report.micro_batch), (2, 4));
}
