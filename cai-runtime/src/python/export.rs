//! Descriptors as the Python dicts the properties return: a fresh dict on every access, with
//! tuples of ints for `shape` and `strides`, `strides` always present, `stream` only on the
//! device at version 3, and the mask as an object exposing the same interface.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::descr::{Descr, DescrFormat};
use crate::descriptor::{ArrayDescriptor, Device, Host, Space};
use crate::error::DescriptorError;
use crate::interface::{ArrayInterface, CudaArrayInterface};

/// A `DescriptorError` met while exporting, as the `ValueError` the property raises. (Not
/// `AttributeError`: `hasattr()` would then report the interface as absent.)
pub fn export_error(e: DescriptorError, attribute: &str) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(format!("cannot export {attribute}: {e}"))
}

fn descr_list<'py>(py: Python<'py>, d: &Descr) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for f in &d.0 {
        let name = match &f.title {
            Some(t) => PyTuple::new(py, [t.as_str(), f.name.as_str()])?.into_any(),
            None => PyString::new(py, &f.name).into_any(),
        };
        let format = match &f.format {
            DescrFormat::Type(t) => PyString::new(py, &t.to_string()).into_any(),
            DescrFormat::Nested(n) => descr_list(py, n)?.into_any(),
        };
        let item = if f.shape.is_empty() {
            PyTuple::new(py, [name, format])?
        } else {
            PyTuple::new(py, [name, format, PyTuple::new(py, &f.shape)?.into_any()])?
        };
        list.append(item)?;
    }
    Ok(list)
}

/// The dict for a descriptor.
pub fn to_dict<'py, S: Space>(
    py: Python<'py>,
    d: &ArrayDescriptor<S>,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item(intern!(py, "shape"), PyTuple::new(py, &d.shape)?)?;
    dict.set_item(intern!(py, "typestr"), d.typestr.to_string())?;
    if let Some(descr) = &d.descr {
        dict.set_item(intern!(py, "descr"), descr_list(py, descr)?)?;
    }
    dict.set_item(intern!(py, "data"), (d.data.ptr, d.data.readonly))?;
    match &d.strides {
        None => dict.set_item(intern!(py, "strides"), py.None())?,
        Some(s) => dict.set_item(intern!(py, "strides"), PyTuple::new(py, s)?)?,
    }
    if let Some(mask) = &d.mask {
        let inner = to_dict(py, mask)?.unbind();
        let holder: Py<PyAny> = if S::ATTRIBUTE == Device::ATTRIBUTE {
            Py::new(py, CudaMask { dict: inner })?.into_any()
        } else {
            Py::new(py, HostMask { dict: inner })?.into_any()
        };
        dict.set_item(intern!(py, "mask"), holder)?;
    }
    dict.set_item(intern!(py, "version"), d.version)?;
    if S::ATTRIBUTE == Device::ATTRIBUTE && d.version >= 3 {
        dict.set_item(intern!(py, "stream"), d.stream().map(|s| s.as_raw()))?;
    }
    Ok(dict)
}

/// A mask exported inside a `__cuda_array_interface__` dict: an object exposing the mask's
/// descriptor, as the spec requires.
#[pyclass(frozen, module = "cai", name = "CudaMask")]
pub struct CudaMask {
    dict: Py<PyDict>,
}

#[pymethods]
impl CudaMask {
    /// The mask's descriptor (a fresh copy on every access).
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.dict.bind(py).copy()
    }
}

/// A mask exported inside an `__array_interface__` dict.
#[pyclass(frozen, module = "cai", name = "HostMask")]
pub struct HostMask {
    dict: Py<PyDict>,
}

#[pymethods]
impl HostMask {
    /// The mask's descriptor (a fresh copy on every access).
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.dict.bind(py).copy()
    }
}

/// Body of a generated `__cuda_array_interface__` getter.
pub fn cuda_array_interface<'py, T: CudaArrayInterface + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyDict>> {
    let d = value
        .cuda_array_interface()
        .map_err(|e| export_error(e, Device::ATTRIBUTE))?;
    to_dict(py, &d)
}

/// Body of a generated `__array_interface__` getter.
pub fn array_interface<'py, T: ArrayInterface + ?Sized>(
    py: Python<'py>,
    value: &T,
) -> PyResult<Bound<'py, PyDict>> {
    let d = value
        .array_interface()
        .map_err(|e| export_error(e, Host::ATTRIBUTE))?;
    to_dict(py, &d)
}

/// Adds the mask holder classes to a module (for `isinstance` checks and pickling names).
pub fn add_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CudaMask>()?;
    m.add_class::<HostMask>()?;
    Ok(())
}
