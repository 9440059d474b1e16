//! A study run by a scheduler on many nodes: the smallest experiment that
//! `deploy/slurm/` runs, on the CPU, with a stand-in objective that sleeps
//! instead of training. The book's "A study on a Slurm cluster" walks
//! through it; CI submits it to a one-node Slurm cluster.
//!
//! Created once, then joined by every node (the flags come from
//! `hpo::cli::StudyArgs`, as in any experiment):
//!
//! ```sh
//! export HPO_STORAGE=postgresql://hpo@db.internal:5432/studies
//! cargo run --features postgres --example cluster -- --study demo --create --study-trials 40
//! cargo run --features postgres --example cluster -- --study demo --join --jobs 2
//! ```

use clap::Parser;
use hpo::cli::{StudyArgs, StudyRunner};
use hpo::executor::{Batch, Memory, MemoryEstimator, Shape};
use hpo::{Direction, ParamValue, SearchSpace, Trial, TrialError};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// A small CPU study for a cluster's scheduler.
#[derive(Parser)]
struct Args {
    // ANCHOR: flags
    /// The study's flags, `--join` and `--create` among them.
    #[command(flatten)]
    study: StudyArgs,
    // ANCHOR_END: flags
    /// How long each trial "trains", in milliseconds.
    #[arg(long, default_value_t = 300)]
    sleep_ms: u64,
}

#[hpo::search_space]
#[derive(Debug, Clone)]
struct Space {
    #[param(float(1e-5..=1e-1, log))]
    lr: f64,
    #[param(int(1..=8))]
    layers: i64,
}

/// Each trial holds a few MiB of the node's memory.
struct Estimator;

impl MemoryEstimator for Estimator {
    fn propose(&self, trial: &mut Trial) -> Result<Shape, TrialError> {
        Space::sample(trial)?;
        Ok(Shape::new("sleep", Batch::new(1, 1)))
    }

    fn peak_bytes(&self, _params: &BTreeMap<String, ParamValue>, _batch: Batch) -> u64 {
        16 << 20
    }
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let sleep = Duration::from_millis(args.sleep_ms);
    // ANCHOR: run
    StudyRunner::new(&args.study)
        .default_study("cluster")
        .direction(Direction::Minimize)
        .space::<Space>()
        .workers(Arc::new(Estimator), Memory::Host)
        .run(|trial| {
            let s = Space::sample(trial)?;
            // Which array task ran it: the scheduler's variables reach the
            // worker processes.
            if let Ok(task) = std::env::var("SLURM_ARRAY_TASK_ID") {
                trial.set_user_attr("slurm_task", task)?;
            }
            for step in 0..4u32 {
                std::thread::sleep(sleep / 4);
                trial.report(u64::from(step), s.lr.log10().abs())?;
            }
            Ok((s.lr.log10() + 3.0).powi(2) + 0.1 * (s.layers as f64 - 3.0).powi(2))
        })?;
    // ANCHOR_END: run
    Ok(())
}
