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
//!   one-node Slurm cluster (`.ci/slurm.sh`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[cfg(feature = "cli")]
mod cli;
mod objective;
#[cfg(feature = "cli")]
mod runner;
mod search_space;
#[cfg(all(feature = "cli", feature = "postgres"))]
mod slurm;
mod ui;
