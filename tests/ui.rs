//! Compile-fail suite: one small file per mistake in `tests/ui/`, with the exact message the
//! user sees in the `.stderr` beside it. Regenerate with `TRYBUILD=overwrite cargo test --test ui`
//! and review every changed message as a user would read it.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
