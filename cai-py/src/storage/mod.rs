//! GDP-3 storages in Python: `Storage`, `SyncState`, `GTNoSuchBufferError`, and the functions
//! `empty`, `zeros`, `ones`, `full`, their `_like` forms, `as_storage` and `storage`. The
//! storage itself (allocation, views, descriptors) is `cai_gt`; this module reads
//! the arguments, applies GDP-3's lookup order, and forwards element writes to NumPy (host) or
//! CuPy (device), as GDP-3 does.
//!
//! - `class.rs`: the `Storage` class and its subclasses (interfaces, items, views, mirror
//!   methods, pickling); `index.rs`: how it reads an index.
//! - `create.rs`: the creators and `storage(data)` (new buffers); `wrap.rs`: `as_storage` and
//!   `storage(copy=False)` (existing buffers).
//! - `keywords.rs`: the arguments and GDP-3's keyword arguments; `dtype.rs`: dtypes through
//!   NumPy; `mirror.rs`: `SyncState`. (Device storages themselves are cai-gt's.)
//! - Here: the NumPy and CuPy modules, and the module's registration. (The storage errors'
//!   Python exceptions are cai-gt's, `cai_gt::python`.)

mod class;
mod create;
mod dtype;
mod index;
mod keywords;
mod mirror;
mod wrap;

use cai_gt::python::{GTNoSuchBufferError, GtData};
use cai_runtime::sync::ImportOptions;
use class::{
    CpuStorage, CudaManagedGpuStorage, GpuStorage, PyStorage, REBUILD_STORAGE,
    SoftwareManagedGpuStorage, rebuild_storage,
};
use create::storage;
pub(crate) use dtype::numpy_dtype;
use mirror::PySyncState;
use pyo3::exceptions::{PyOverflowError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyComplex, PyFloat, PyInt, PyType};
use wrap::as_storage;

fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    NUMPY
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("numpy")?.unbind()))
        .map(|m| m.bind(py))
}

/// Whether `v` is read through GDP-3's data interface, its `acquire` first: it speaks it
/// ([`GtData::speaks_gt`]: `__gt_data_interface__`, or an xarray `DataArray`) or only DLPack
/// (GDP-3's fallback reads that), and is neither
/// a storage (read as the storage it is) nor what NumPy reads itself: Python numbers, NumPy
/// arrays and scalars, told from their type, since asking one for an attribute it lacks costs
/// an exception (as much as the rest of an item write).
fn read_through_gt(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    if v.is_instance_of::<PyFloat>()
        || v.is_instance_of::<PyInt>()
        || v.is_instance_of::<PyComplex>()
        || v.is_instance_of::<PyStorage>()
    {
        return Ok(false);
    }
    if numpy_array_or_scalar(v)? {
        return Ok(false);
    }
    Ok(GtData::speaks_gt(v)? || dlpack_only(v)?)
}

/// Whether `v` speaks DLPack and neither array interface (a CPU tensor of PyTorch, JAX's
/// arrays): GDP-3's fallback reads it, where NumPy would not.
fn dlpack_only(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    let py = v.py();
    Ok(v.hasattr(pyo3::intern!(py, "__dlpack__"))?
        && !v.hasattr(pyo3::intern!(py, "__array_interface__"))?
        && !v.hasattr(pyo3::intern!(py, "__cuda_array_interface__"))?)
}

/// Whether `v` is a NumPy array (its exact type) or scalar, told from its type alone.
fn numpy_array_or_scalar(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    static TYPES: PyOnceLock<(Py<PyType>, Py<PyType>)> = PyOnceLock::new();
    let py = v.py();
    let (ndarray, generic) = TYPES.get_or_try_init(py, || {
        let np = numpy(py)?;
        Ok::<_, PyErr>((
            np.getattr("ndarray")?.cast_into::<PyType>()?.unbind(),
            np.getattr("generic")?.cast_into::<PyType>()?.unbind(),
        ))
    })?;
    Ok(v.get_type().is(ndarray.bind(py)) || v.is_instance(generic.bind(py))?)
}

fn cupy(py: Python<'_>) -> PyResult<Bound<'_, PyModule>> {
    py.import("cupy").map_err(|e| {
        PyRuntimeError::new_err(format!(
            "this operation on a device storage goes through CuPy, which cannot be imported: {e}"
        ))
    })
}

/// NumPy's error `e` about an argument, its message led by `what` (the argument's name and
/// value, which NumPy's messages leave out), its type kept (OverflowError, ValueError and
/// TypeError, as NumPy raises them; any other error passes as it is) and `e` its cause.
fn numpy_error_named(py: Python<'_>, e: PyErr, what: &str) -> PyErr {
    let msg = format!("{what}: {}", e.value(py));
    let named = if e.is_instance_of::<PyOverflowError>(py) {
        PyOverflowError::new_err(msg)
    } else if e.is_instance_of::<PyValueError>(py) {
        PyValueError::new_err(msg)
    } else if e.is_instance_of::<PyTypeError>(py) {
        PyTypeError::new_err(msg)
    } else {
        return e;
    };
    named.set_cause(py, Some(e));
    named
}

/// Import options for reading an argument's buffers: the producer's stream is waited for (as
/// any import).
fn read_options() -> ImportOptions {
    ImportOptions::default()
}

/// Adds the storage API to the module.
pub fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStorage>()?;
    m.add_class::<CpuStorage>()?;
    m.add_class::<GpuStorage>()?;
    m.add_class::<SoftwareManagedGpuStorage>()?;
    m.add_class::<CudaManagedGpuStorage>()?;
    m.add_class::<PySyncState>()?;
    m.add(
        "GTNoSuchBufferError",
        m.py().get_type::<GTNoSuchBufferError>(),
    )?;
    create::add_creators(m)?;
    m.add_function(wrap_pyfunction!(as_storage, m)?)?;
    m.add_function(wrap_pyfunction!(storage, m)?)?;
    let rebuild = wrap_pyfunction!(rebuild_storage, m)?;
    m.add_function(rebuild.clone())?;
    let _ = REBUILD_STORAGE.set(m.py(), rebuild.into_any().unbind());
    Ok(())
}
