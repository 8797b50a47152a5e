//! The `cai` Python package's native module. See `python/cai/__init__.py` for the API.
//!
//! - `examples.rs`: the worked example of the derives (`Grid`, `DeviceMatrix`...), which
//!   `python/cai/examples.py` exposes as `cai.examples`.
//! - `import.rs`: importing foreign arrays (`as_cuda_array`, `CudaArrayView`...); `gt_data.rs`:
//!   reading any object as GDP-3 says (`gt_data`).
//! - `cuda.rs`: the stream options, pointer attributes and `DeviceArray`.
//! - `storage/`: GDP-3 storages (`zeros`, `as_storage`, `Storage`...).
//! - `args.rs`: arguments read with errors naming them; `fastcall.rs`: fast-call functions.
//! - Here: the conformance checker and the module's registration.

use cai_runtime::python::{self as cpy, Violation};
use pyo3::prelude::*;

mod args;
mod cuda;
mod examples;
mod fastcall;
mod gt_data;
mod import;
mod storage;

use args::arg;

/// Every violation of the spec in `obj`'s `__cuda_array_interface__` and/or
/// `__array_interface__`, each with the rule it breaks.
#[pyfunction]
fn check(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Violation>> {
    cpy::check(obj)
}

/// Check a descriptor dict itself: ``interface`` is ``"cuda"`` (``__cuda_array_interface__``)
/// or ``"host"`` (``__array_interface__``).
#[pyfunction]
#[pyo3(signature = (desc, interface = "cuda"))]
fn check_descriptor(
    desc: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = arg::interface)] interface: &str,
) -> PyResult<Vec<Violation>> {
    cpy::check_descriptor(desc, interface == "cuda")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    // How this wheel was built, which the benchmarks print above their figures:
    // `profile-guided` where scripts/pgo-wheel.sh built it (it sets `CAI_WHEEL_BUILD`), else
    // `plain`.
    m.add("_build", option_env!("CAI_WHEEL_BUILD").unwrap_or("plain"))?;
    examples::add(m)?;
    import::add(m)?;
    gt_data::add(m)?;
    m.add_class::<Violation>()?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(check_descriptor, m)?)?;
    cpy::add_classes(m)?;
    cai_gt::python::add_classes(m)?;
    storage::add(m)?;
    cuda::register(m)?;
    Ok(())
}
