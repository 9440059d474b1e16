//! hpo-core's integration tests: one binary (one link step), a module per
//! subject.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers
// only the test functions themselves).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

/// The benchmarks' support (BBOB functions, the sampler suite), shared with
/// `benches/`; each test module uses part of it.
#[allow(dead_code)]
#[path = "../../benches/support/mod.rs"]
mod support;

mod artifacts;
mod bbob;
mod cmaes;
mod crash_points;
mod executor;
mod gp;
mod grid_sampler;
mod heartbeat_retry;
mod layers;
mod optuna_interop;
mod parallel_proposals;
#[cfg(feature = "postgres")]
mod postgres_processes;
#[cfg(feature = "postgres")]
mod postgres_server;
#[cfg(feature = "postgres")]
mod postgres_storage;
mod pruner_fixtures;
mod pruning_study;
mod qmc;
mod sampler_conformance;
mod sampler_processes;
mod sampler_streams;
mod sampler_suite;
mod signals;
mod sqlite_bad_input;
mod sqlite_optuna_reference;
mod sqlite_processes;
mod sqlite_read_only;
mod storage_conformance;
mod study_budget;
mod study_cost;
mod tpe;
