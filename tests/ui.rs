//! Compile-fail suite: one small file per mistake in `tests/ui/` (those with PyO3 classes are in
//! `tests/ui-python/`, a package of their own, built with cai-runtime's `python` feature), with the exact message the
//! user sees in the `.stderr` beside it. Regenerate with `TRYBUILD=overwrite cargo test --test ui`
//! and review every changed message as a user would read it.
//!
//! The `.stderr` files are those of the test command (`cargo test --workspace --all-features`,
//! docs/testing.md): rustc's lists of implementing types and its path disambiguation depend on which
//! features of cai-runtime are on (with `cuda`, `Device` is spelled `cai_runtime::Device`, and
//! the driver layer's `DeviceAllocation` and `DriverStream` are among the implementors listed;
//! the root package enables `cuda` for the demo's device part).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
}
