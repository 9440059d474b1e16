//! Seeded samplers are reproducible and resumable: the same seed and history
//! give the same proposals; a study resumed by a fresh sampler (a new
//! process) never repeats earlier proposals; handles sharing one study with the
//! same seed (several processes) propose different configurations.

use hpo_core::storage::SqliteStorage;
use hpo_core::{
    Direction, QmcConfig, QmcSampler, RandomSampler, Sampler, Storage, Study, TpeConfig,
    TpeSampler, TrialError,
};
use std::path::PathBuf;
use std::sync::Arc;

type Params = Vec<(String, u64)>;

fn objective(trial: &mut hpo_core::Trial) -> Result<f64, TrialError> {
    let x = trial.suggest_float("x", -5.0, 5.0)?;
    let lr = trial.suggest_float_log("lr", 1e-5, 1.0)?;
    let n = trial.suggest_int("n", 1, 1000)?;
    Ok((x - 1.0).powi(2) + lr.ln().abs() * 0.01 + n as f64 * 1e-3)
}

/// Builds a sampler from a seed, as a new process would.
type MakeSampler = fn(u64) -> Arc<dyn Sampler>;

/// Every sampler under test.
fn samplers() -> Vec<(&'static str, MakeSampler)> {
    vec![
        ("random", |s| Arc::new(RandomSampler::seeded(s))),
        ("qmc", |s| {
            Arc::new(QmcSampler::with_config(QmcConfig::seeded(s)))
        }),
        ("tpe", |s| {
            Arc::new(
                TpeSampler::with_config(TpeConfig {
                    n_startup_trials: 5,
                    ..TpeConfig::seeded(s)
                })
                .unwrap(),
            )
        }),
        ("tpe-optuna", |s| {
            Arc::new(
                TpeSampler::with_config(TpeConfig {
                    seed: Some(s),
                    ..TpeConfig::optuna()
                })
                .unwrap(),
            )
        }),
    ]
}

fn temp_db(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hpo-streams-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir.join("study.db")
}

fn study(storage: Arc<dyn Storage>, sampler: Arc<dyn Sampler>) -> Study {
    Study::builder()
        .name("streams")
        .storage(storage)
        .sampler(sampler)
        .direction(Direction::Minimize)
        .load_if_exists(true)
        .build()
        .unwrap()
}

/// The parameters of every trial, by number, as exact bit patterns.
fn proposals(study: &Study) -> Vec<Params> {
    study
        .trials()
        .unwrap()
        .iter()
        .map(|t| {
            t.internal_params
                .iter()
                .map(|(k, v)| (k.clone(), v.to_bits()))
                .collect()
        })
        .collect()
}

#[test]
fn the_same_seed_and_history_give_the_same_proposals() {
    for (name, make) in samplers() {
        let run = || {
            let s = study(Arc::new(SqliteStorage::in_memory().unwrap()), make(11));
            s.optimize(20, objective).unwrap();
            proposals(&s)
        };
        assert_eq!(
            run(),
            run(),
            "{name}: same seed, same history, different proposals"
        );
    }
}

#[test]
fn a_resumed_study_never_repeats_earlier_proposals() {
    for (name, make) in samplers() {
        let db = temp_db(name);
        let first = study(Arc::new(SqliteStorage::open(&db).unwrap()), make(5));
        first.optimize(10, objective).unwrap();
        drop(first);
        // A new process: a fresh sampler with the same seed, the same file.
        let resumed = study(Arc::new(SqliteStorage::open(&db).unwrap()), make(5));
        resumed.optimize(10, objective).unwrap();
        let all = proposals(&resumed);
        assert_eq!(all.len(), 20);
        for (i, later) in all[10..].iter().enumerate() {
            for (j, earlier) in all[..10].iter().enumerate() {
                for ((k, a), (_, b)) in later.iter().zip(earlier) {
                    assert_ne!(a, b, "{name}: trial {} repeats trial {j}'s `{k}`", 10 + i);
                }
            }
        }
    }
}

#[test]
fn handles_sharing_a_study_with_one_seed_propose_different_configurations() {
    for (name, make) in samplers() {
        let db = temp_db(&format!("shared-{name}"));
        // Two "processes": two storage handles on one file, two samplers with one seed.
        let a = study(Arc::new(SqliteStorage::open(&db).unwrap()), make(3));
        let b = study(Arc::new(SqliteStorage::open(&db).unwrap()), make(3));
        for _ in 0..8 {
            for s in [&a, &b] {
                let mut trial = s.ask().unwrap();
                let v = objective(&mut trial);
                s.tell(trial, v).unwrap();
            }
        }
        let all = proposals(&a);
        assert_eq!(all.len(), 16);
        for i in 0..all.len() {
            for j in 0..i {
                assert_ne!(
                    all[i], all[j],
                    "{name}: trials {j} and {i} got the same configuration"
                );
            }
        }
    }
}
