//! Compile-fail cases with PyO3 classes: one file per mistake in `cases/`, with the exact message
//! the user sees in the `.stderr` beside it. Regenerate with
//! `TRYBUILD=overwrite cargo test -p cai-ui-python` and review every changed message.

#[test]
fn ui() {
    trybuild::TestCases::new().compile_fail("cases/*.rs");
}
