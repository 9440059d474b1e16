//! The QMC sampler: its points cover the space more evenly than random ones
//! (centred L2 discrepancy), and a study resumed in a new process continues
//! the sequence instead of restarting it.

use hpo_core::storage::SqliteStorage;
use hpo_core::{
    Direction, QmcConfig, QmcKind, QmcSampler, RandomSampler, Sampler, Study, TrialError,
};
use std::sync::Arc;

const DIMS: usize = 4;

fn unit_objective(trial: &mut hpo_core::Trial) -> Result<f64, TrialError> {
    let mut sum = 0.0;
    for j in 0..DIMS {
        sum += trial.suggest_float(&format!("x{j}"), 0.0, 1.0)?;
    }
    Ok(sum)
}

/// The points of trials `from..from + n` of a study sampled by `sampler`.
fn points(sampler: Arc<dyn Sampler>, from: usize, n: usize) -> Vec<Vec<f64>> {
    let study = Study::builder()
        .direction(Direction::Minimize)
        .sampler(sampler)
        .build()
        .unwrap();
    study.optimize(from + n, unit_objective).unwrap();
    study.trials().unwrap()[from..]
        .iter()
        .map(|t| t.internal_params.values().copied().collect())
        .collect()
}

/// Hickernell's centred L2 discrepancy (squared), as `scipy.stats.qmc.discrepancy(method="CD")`.
fn centred_l2(points: &[Vec<f64>]) -> f64 {
    let n = points.len() as f64;
    let d = points[0].len() as i32;
    let c = |x: f64| (x - 0.5).abs();
    let single: f64 = points
        .iter()
        .map(|p| {
            p.iter()
                .map(|&x| 1.0 + 0.5 * c(x) - 0.5 * c(x) * c(x))
                .product::<f64>()
        })
        .sum();
    let mut pairs = 0.0;
    for p in points {
        for q in points {
            pairs += p
                .iter()
                .zip(q)
                .map(|(&x, &y)| 1.0 + 0.5 * c(x) + 0.5 * c(y) - 0.5 * (x - y).abs())
                .product::<f64>();
        }
    }
    (13.0f64 / 12.0).powi(d) - 2.0 / n * single + pairs / (n * n)
}

#[test]
fn the_discrepancy_formula_matches_scipy() {
    // `scipy.stats.qmc.discrepancy([[0.1, 0.2], [0.7, 0.4], [0.35, 0.9]])`
    // (method "CD", SciPy 1.17) = 0.05187777777777747.
    let d = centred_l2(&[vec![0.1, 0.2], vec![0.7, 0.4], vec![0.35, 0.9]]);
    assert!((d - 0.051_877_777_777_777_47).abs() < 1e-14, "{d}");
}

#[test]
fn qmc_points_cover_the_space_more_evenly_than_random_ones() {
    // 256 points in 4-D from trials 1..=256 (trial 0 is drawn at random
    // before the search space is known), over five seeds.
    let n = 256;
    let random: Vec<f64> = (0..5)
        .map(|s| centred_l2(&points(Arc::new(RandomSampler::seeded(s)), 1, n)))
        .collect();
    for kind in [QmcKind::Sobol, QmcKind::Halton] {
        let qmc: Vec<f64> = (0..5)
            .map(|s| {
                let config = QmcConfig {
                    kind,
                    ..QmcConfig::seeded(s)
                };
                centred_l2(&points(Arc::new(QmcSampler::with_config(config)), 1, n))
            })
            .collect();
        let worst_qmc = qmc.iter().copied().fold(f64::MIN, f64::max);
        let best_random = random.iter().copied().fold(f64::MAX, f64::min);
        assert!(
            worst_qmc < best_random,
            "{kind:?}: QMC discrepancies {qmc:?} not all below random's {random:?}"
        );
    }
}

#[test]
fn a_resumed_study_continues_the_sequence() {
    let dir = std::env::temp_dir().join(format!("hpo-qmc-resume-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("study.db");
    let study = |sampler: QmcSampler| {
        Study::builder()
            .name("qmc")
            .storage(Arc::new(SqliteStorage::open(&db).unwrap()))
            .sampler(Arc::new(sampler))
            .direction(Direction::Minimize)
            .load_if_exists(true)
            .build()
            .unwrap()
    };
    for kind in [QmcKind::Sobol, QmcKind::Halton] {
        let _ = std::fs::remove_file(&db);
        let config = QmcConfig {
            kind,
            ..QmcConfig::seeded(9)
        };
        // Ten trials, then a fresh sampler and storage handle (as a new
        // process would have) for ten more.
        let first = study(QmcSampler::with_config(config.clone()));
        first.optimize(10, unit_objective).unwrap();
        drop(first);
        let resumed = study(QmcSampler::with_config(config.clone()));
        resumed.optimize(10, unit_objective).unwrap();
        let params = |ts: Vec<Arc<hpo_core::FrozenTrial>>| {
            ts.iter()
                .map(|t| t.internal_params.values().copied().collect::<Vec<f64>>())
                .collect::<Vec<_>>()
        };
        let resumed = params(resumed.trials().unwrap());
        // The same as twenty trials in one go: the sequence went on.
        let whole = points(Arc::new(QmcSampler::with_config(config)), 0, 20);
        assert_eq!(
            resumed, whole,
            "{kind:?}: the resumed study restarted or skipped"
        );
        for i in 10..20 {
            for j in 0..10 {
                assert_ne!(
                    resumed[i], resumed[j],
                    "{kind:?}: trial {i} repeats trial {j}"
                );
            }
        }
    }
}
