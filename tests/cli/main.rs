//! Tests of the `hpo` command on fixture studies: one written by hpo (built
//! by a real run in `fixture.rs`), one written by Optuna 5.0
//! (`data/optuna_importance.db`, made by `make_optuna_fixture.py`) and
//! Optuna's schema reference study.

// Test helpers outside #[test] functions may unwrap too (clippy.toml covers
// only the test functions themselves).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod commands;
mod errors;
mod fixture;
mod importance;
mod plots;
mod readonly;
mod report;
