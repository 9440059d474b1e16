//! Benchmark support shared by the benchmarks and the integration tests
//! (included with `#[path]`, so it stays out of hpo-core's public API).

pub mod bbob;
pub mod finetune;
pub mod parallel;
pub mod suite;
