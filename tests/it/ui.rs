//! Misuse of `#[hpo::search_space]` and `#[derive(hpo::Choice)]`: one mistake
//! per file under `tests/ui/<kind of mistake>/`, each with the compiler output
//! users see (`.stderr`). After a deliberate message change, or a toolchain
//! upgrade in `rust-toolchain.toml`, regenerate with
//! `TRYBUILD=overwrite cargo test -p hpo --test it ui` and review every changed
//! `.stderr` (CONTRIBUTING.md).
//!
//! The output is compared against the toolchain pinned in
//! `rust-toolchain.toml`; rustc's own wording changes between releases.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*/*.rs");
}
