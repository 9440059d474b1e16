//! hpo-burn inside real hpo studies: pruning, OOM as a constraint
//! violation, and an end-to-end study on the shipped VADER tweets.

use crate::oom::{config, data, train_config, train_data};
use crate::vader_path;
use hpo_burn::burn::module::AutodiffModule;
use hpo_burn::burn::tensor::backend::Backend;
use hpo_burn::{
    estimate_training_memory, load_tsv, run, run_with_model, Cpu, Dataset, MemoryGuard, Precision,
    Preset, Recorder, RunSpec, TextTask, TrainConfig, Trainer, TsvSpec,
};
use hpo_core::{
    FailureKind, FrozenTrial, Pruner, RandomSampler, Study, StudyView, TrialError, TrialState,
};

/// Prunes every trial at its first report: the "bad trial" rule.
struct PruneAtFirstReport;

impl Pruner for PruneAtFirstReport {
    fn prune(
        &self,
        _study: &StudyView<'_>,
        trial: &FrozenTrial,
    ) -> hpo_core::Result<hpo_core::Decision> {
        Ok((!trial.intermediate_values.is_empty()).into())
    }
}

fn toy_objective(
    micro: usize,
    guard: MemoryGuard,
    epochs: usize,
) -> impl Fn(&mut hpo_core::Trial) -> Result<f64, TrialError> + Sync {
    move |trial| {
        let device = Default::default();
        Cpu::seed(&device, 3);
        let model = config().init::<Cpu>(&device)?;
        let (train, valid) = data();
        let cfg = TrainConfig {
            epochs,
            ..train_config(micro, 1)
        };
        let trainer = Trainer::<Cpu>::new(cfg, config(), "toy", device).with_guard(guard);
        let data = train_data(&train, &valid);
        // `?` alone records a pruned run as PRUNED and an exhausted OOM
        // ladder as OOM: the outcome travels in the error's source chain.
        Ok(trainer.fit(model, data, trial)?.1.best_macro_f1)
    }
}

#[test]
fn pruning_stops_a_bad_trial_after_its_first_epoch() {
    let _lock = crate::backend_lock();
    let study = Study::builder().pruner(PruneAtFirstReport).build().unwrap();
    study
        .optimize(1, toy_objective(16, MemoryGuard::Unlimited, 3))
        .unwrap();
    let t = &study.trials().unwrap()[0];
    assert_eq!(t.state, TrialState::Pruned);
    assert_eq!(t.intermediate_values.len(), 1, "stopped after epoch 1 of 3");
    assert!(t.user_attrs.contains_key("micro_batch"));
}

#[test]
fn oom_at_the_floor_is_a_recorded_constraint_violation() {
    let _lock = crate::backend_lock();
    let capacity =
        estimate_training_memory(&config(), 1, crate::oom::LEN, Precision::F32).total() - 1;
    let study = Study::builder().build().unwrap();
    study
        .optimize(1, toy_objective(4, MemoryGuard::simulated(capacity), 1))
        .unwrap();
    let t = &study.trials().unwrap()[0];
    assert_eq!(t.state, TrialState::Fail);
    assert_eq!(t.failure(), Some(FailureKind::Oom));
    assert!(t.constraint_violation().unwrap() > 0.0);
    let oom = &t.system_attrs[FailureKind::OOM_CONFIG_ATTR];
    assert_eq!(oom["batch"], 1);
    assert_eq!(oom["effective_batch"], 4);
    assert_eq!(oom["accumulation"], 4);
    assert_eq!(t.user_attrs["oom_retries"], 2);
}

/// A device allocator that reports a fixed sequence of reserved sizes.
#[derive(Debug, Default)]
struct ScriptedDevice(std::sync::atomic::AtomicU64);

impl hpo_burn::peak::MemoryStats for ScriptedDevice {
    fn reserved_bytes(&self) -> Option<u64> {
        self.read().map(|r| r.reserved)
    }

    fn describe(&self) -> &'static str {
        "scripted"
    }

    fn read(&self) -> Option<hpo_burn::peak::MemoryReading> {
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // Grows, peaks at 3 GiB on the third sample, falls back; half of
        // each is live allocations, the rest pages kept for reuse.
        let reserved = [1u64, 2, 3, 2][(n as usize).min(3)] << 30;
        Some(hpo_burn::peak::MemoryReading {
            reserved,
            in_use: Some(reserved / 2),
        })
    }
}

/// The measured device peak reaches the executor's record: the trial keeps
/// the allocator's highest figure (not the process's resident memory) as
/// `hpo:peak_bytes`, which the executor's correction learns from.
#[test]
fn a_trial_records_the_device_allocators_peak() {
    let _lock = crate::backend_lock();
    let study = Study::builder().build().unwrap();
    study
        .optimize(
            1,
            |trial: &mut hpo_core::Trial| -> Result<f64, TrialError> {
                let device = Default::default();
                Cpu::seed(&device, 3);
                let model = config().init::<Cpu>(&device)?;
                let (train, valid) = data();
                let trainer = Trainer::<Cpu>::new(train_config(16, 1), config(), "toy", device)
                    .with_memory_stats(Some(std::sync::Arc::new(ScriptedDevice::default())));
                let data = train_data(&train, &valid);
                Ok(trainer.fit(model, data, trial)?.1.best_macro_f1)
            },
        )
        .unwrap();
    let t = &study.trials().unwrap()[0];
    assert_eq!(t.state, TrialState::Complete);
    let gib = 1u64 << 30;
    assert_eq!(
        t.system_attrs[hpo_core::executor::PEAK_BYTES_ATTR].as_u64(),
        Some(3 * gib)
    );
    assert_eq!(
        t.user_attrs[hpo_burn::DEVICE_PEAK_KEY].as_u64(),
        Some(3 * gib)
    );
    // The live allocations' peak beside it: the allocator's slack is the rest.
    assert_eq!(
        t.user_attrs["peak_in_use_bytes"].as_u64(),
        Some(3 * gib / 2)
    );
    // The process's resident memory is recorded beside it, not instead.
    // The estimate is recorded with its activation part and the length it
    // was sized for.
    let total = t.user_attrs["estimated_peak_bytes"].as_u64().unwrap();
    let activations = t.user_attrs["estimated_activation_bytes"].as_u64().unwrap();
    assert!(
        activations > 0 && activations < total,
        "{activations} of {total}"
    );
    assert!(t.user_attrs["sized_len"].as_u64().unwrap() > 0);
    let rss = t.user_attrs["peak_rss_bytes"].as_u64().unwrap();
    assert_ne!(rss, 3 * gib);
    // What the executor does with it: the ratio to the estimate is its
    // correction for the family.
    let mut correction = hpo_core::executor::Correction::new();
    correction.observe(
        "toy",
        gib,
        t.system_attrs[hpo_core::executor::PEAK_BYTES_ATTR]
            .as_u64()
            .unwrap(),
    );
    assert!((correction.factor("toy") - 3.0).abs() < 1e-9);
}

/// Each `hpo_burn::Error` that stands for a trial outcome is recorded as that
/// outcome through `?` alone; other errors are plain failures.
#[test]
fn question_mark_keeps_each_outcome() {
    let study = Study::builder().build().unwrap();
    let oom_config = hpo_burn::OomConfig {
        model: "toy".into(),
        batch: 1,
        accumulation: 8,
        max_len: 64,
        effective_batch: 8,
        initial_batch: 8,
        retries: 3,
    };
    study
        .optimize(4, |trial| -> Result<f64, TrialError> {
            match trial.number() {
                0 => Err(hpo_burn::Error::pruned(2))?,
                1 => Err(hpo_burn::Error::oom_exhausted(
                    oom_config.clone(),
                    "simulated",
                ))?,
                // An invalid sampled configuration: hidden 30 over 4 heads.
                2 => {
                    hpo_burn::ModelConfig::new(40, 2, 1, 30, 4, 64)
                        .init::<Cpu>(&Default::default())?;
                }
                _ => Err(hpo_burn::Error::Device("lost".into()))?,
            }
            Ok(0.0)
        })
        .unwrap();
    let t = study.trials().unwrap();
    assert_eq!(t[0].state, TrialState::Pruned);
    assert_eq!(t[1].state, TrialState::Fail);
    assert_eq!(t[1].failure(), Some(FailureKind::Oom));
    let stored = &t[1].system_attrs[FailureKind::OOM_CONFIG_ATTR];
    assert_eq!(stored["batch"], 1);
    assert_eq!(stored["retries"], 3);
    assert_eq!(
        t[2].failure(),
        Some(FailureKind::Infeasible),
        "{:?}",
        t[2].fail_reason()
    );
    assert!(
        t[2].fail_reason().unwrap_or("").contains("not divisible"),
        "{:?}",
        t[2].fail_reason()
    );
    assert_eq!(t[3].failure(), Some(FailureKind::Error));
}

/// The shipped VADER tweets, "neg" as the positive class.
fn vader_tweets() -> Dataset {
    load_tsv(
        vader_path(),
        &TsvSpec::single("text", "label").with_positive("neg"),
    )
    .unwrap()
}

#[test]
fn end_to_end_study_on_the_vader_tweets() {
    let _lock = crate::backend_lock();
    let data = vader_tweets();
    assert_eq!(data.examples.len(), 4200);
    assert_eq!(data.class_counts()[1], 1299);
    let (train, valid) = data.take_per_class(60).split_stratified(0.25, 1).unwrap();
    let task = TextTask::new(train, valid, None, 1500).unwrap();
    let study = Study::builder()
        .sampler(RandomSampler::seeded(0))
        .build()
        .unwrap();
    study
        .optimize(3, |trial| -> Result<f64, TrialError> {
            let spec = RunSpec {
                preset: Preset::Tiny,
                head_layers: trial.suggest_int("head_layers", 0, 1)? as usize,
                head_width: 32,
                dropout: 0.1,
                pooling: hpo_burn::Pooling::Mean,
                train: TrainConfig {
                    epochs: 2,
                    learning_rate: trial.suggest_float_log("lr", 1e-4, 3e-3)?,
                    micro_batch: 16,
                    max_len: 32,
                    seed: trial.number(),
                    ..TrainConfig::default()
                },
            };
            let report = run::<Cpu, _>(
                &task,
                &spec,
                MemoryGuard::Unlimited,
                &Default::default(),
                trial,
            )?;
            Ok(report.best_macro_f1)
        })
        .unwrap();
    let trials = study.trials().unwrap();
    assert_eq!(trials.len(), 3);
    for t in &trials {
        assert_eq!(t.state, TrialState::Complete, "{:?}", t.fail_reason());
        let v = t.value().unwrap();
        assert!((0.0..=1.0).contains(&v));
        assert_eq!(t.intermediate_values.len(), 2);
        assert_eq!(t.user_attrs["oom_retries"], 0);
    }
}

#[test]
fn a_task_scores_a_split_as_training_scores_its_validation() {
    // The held-out score `criteria` prints goes through `TextTask::evaluate`;
    // given the validation split it must agree with training's own
    // evaluation, example for example (the same batches of 64).
    let _lock = crate::backend_lock();
    let data = vader_tweets();
    let (train, valid) = data.take_per_class(40).split_stratified(0.5, 2).unwrap();
    let task = TextTask::new(train, valid.clone(), None, 800).unwrap();
    let spec = RunSpec {
        preset: Preset::Tiny,
        head_layers: 0,
        head_width: 32,
        dropout: 0.1,
        pooling: hpo_burn::Pooling::Mean,
        train: TrainConfig {
            epochs: 1,
            learning_rate: 1e-3,
            micro_batch: 8,
            max_len: 32,
            seed: 5,
            ..TrainConfig::default()
        },
    };
    let device = Default::default();
    let (model, report) = run_with_model::<Cpu, _>(
        &task,
        &spec,
        MemoryGuard::Unlimited,
        &device,
        &mut Recorder::new(),
    )
    .unwrap();
    let trained = &report.history[0].valid;
    let scored = task.evaluate(&model.valid(), &valid, 32, &device).unwrap();
    assert_eq!(scored.accuracy, trained.accuracy);
    assert_eq!(scored.macro_f1, trained.macro_f1);
}
