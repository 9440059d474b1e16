//! Integration tests of the `hpo` facade, one binary (one link step):
//!
//! * `ui`: misuse of `#[hpo::search_space]` and `#[derive(hpo::Choice)]`,
//!   compiled with trybuild against the `.stderr` files in `tests/ui/`;
//! * `search_space`: behaviour of the generated code, on the same `Criteria`
//!   space as `examples/search_space.rs` and the book.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod search_space;
mod ui;
