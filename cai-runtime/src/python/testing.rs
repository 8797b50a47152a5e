//! Hooks for the `cai` package's tests and benchmarks (feature `testing`, which builds of the
//! package for its test suite enable): not part of the API, and absent from ordinary builds.

use pyo3::prelude::*;

use crate::descriptor::Space;

#[cfg(feature = "ndarray")]
pub use crate::ndarray::lent_plan_paths;

/// What import's fast path and its full parser make of `desc`, as `Debug` text of the
/// descriptor and layout (`None` where the fast path declines or the parser refuses), so a
/// test can check, on the same inputs, that the fast path never returns anything the parser
/// would not.
pub fn both_paths<S: Space>(desc: &Bound<'_, PyAny>) -> (Option<String>, Option<String>) {
    let fast = super::fast::import::<S>(desc).map(|(d, l, _)| format!("{:?}", (d, l)));
    let full = super::parse::parse::<S>(desc)
        .into_result()
        .ok()
        .map(|(descriptor, layout, _)| format!("{:?}", (descriptor, layout)));
    (fast, full)
}

/// Whether this thread holds the GIL as cai's DLPack deleter asks the running interpreter
/// (`false` also where the interpreter's functions for it are not found: the deleter then
/// attaches through PyO3, correct but slower). The suite checks it on every Python it runs on.
pub fn holds_gil() -> bool {
    crate::python::interp::holds_gil()
}

/// What an import of `obj` (an exact ndarray) reads from the array's fields and what its
/// `__dlpack__` gives, as `Debug` text of the descriptor, layout and read-only flag (`None`
/// where the fields are left to `__dlpack__`; an error's text where the import fails), so a
/// test can check, on the same arrays, that both say the same.
pub fn both_numpy_paths(obj: &Bound<'_, PyAny>) -> (Option<String>, String) {
    use crate::Host;
    use crate::python::ForeignArray;
    let show = |a: PyResult<ForeignArray<Host>>| match a {
        Ok(a) => format!("{:?}", (a.descriptor(), a.layout(), a.readonly())),
        Err(e) => format!("error: {e}"),
    };
    let options = crate::sync::ImportOptions::default();
    let fast = super::dlpack::numpy_array_import(obj, &options).map(show);
    let full = show(ForeignArray::<Host>::from_dlpack_with(
        obj,
        &options,
        Some(false),
    ));
    (fast, full)
}
