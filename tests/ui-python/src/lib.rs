//! Compile-fail cases of cai's derives on PyO3 classes (`cases/`, run by `tests/ui.rs`): a
//! package of their own, so that they build with cai-runtime's `python` feature while the root
//! package's cases (`tests/ui/`, among them `python` without that feature) build without it.
