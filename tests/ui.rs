//! Misuse of `#[hpo::search_space]` and `#[derive(hpo::Choice)]`: one mistake
//! per file under `tests/ui/<kind of mistake>/`, each with the compiler output
//! users see (`.stderr`). Regenerate after a deliberate message change with
//! `TRYBUILD=overwrite cargo test --test ui`, then review the diff.
//!
//! The messages are pinned to the toolchain in `rust-version`-compatible
//! stable; a compiler upgrade may change rustc's own wording (not ours).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*/*.rs");
}
