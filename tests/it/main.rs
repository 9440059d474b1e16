//! Integration tests of the `hpo` facade, one binary (one link step):
//!
//! * `ui`: misuse of `#[hpo::search_space]` and `#[derive(hpo::Choice)]`,
//!   compiled with trybuild against the `.stderr` files in `tests/ui/`;
//! * `search_space`: behaviour of the generated code, on the same `Criteria`
//!   space as `examples/search_space.rs` and the book;
//! * `objective`: the obvious objective closures compile as written
//!   (`|trial| { ...; Ok(loss) }`, no type annotations);
//! * `cli`: the `hpo` command on fixture studies (hpo- and Optuna-written);
//! * `runner`: a study run from its flags through `hpo::cli::StudyRunner`;
//! * `slurm` (feature `postgres`): `deploy/slurm/`'s job arrays on a real
//!   one-node Slurm cluster (`.ci/slurm.sh`);
//! * `tracking` (feature `mlflow`): `hpo::tracking::Mlflow` against a real
//!   MLflow server, started by `servers` from the project's venv;
//! * `dashboard`: optuna-dashboard (from the same venv) on hpo-written
//!   studies in SQLite and PostgreSQL: its API and a Chromium screenshot.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[cfg(feature = "cli")]
mod cli;
#[cfg(feature = "cli")]
mod dashboard;
mod objective;
#[cfg(feature = "cli")]
mod runner;
mod search_space;
#[cfg(feature = "cli")]
mod servers;
#[cfg(all(feature = "cli", feature = "postgres"))]
mod slurm;
#[cfg(feature = "mlflow")]
mod tracking;
mod ui;
