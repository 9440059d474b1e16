//! Tests of the `hpo` command on fixture studies: one written by hpo (built
//! by a real run in `fixture.rs`), one written by Optuna 5.0
//! (`tests/cli/data/optuna_importance.db`, made by `tests/cli/make_optuna_fixture.py`) and
//! Optuna's schema reference study.

mod artifacts;
mod commands;
mod errors;
pub(crate) mod fixture;
mod importance;
mod plots;
mod readonly;
mod report;
