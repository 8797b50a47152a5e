//! Descriptors as the Python dicts the properties return: a fresh dict on every access, with
//! tuples of ints for `shape` and `strides`, `strides` always present, `stream` only on the
//! device at version 3, and the mask as an object exposing the same interface.
//!
//! Nothing mutable is shared between two results, at any depth: each result is a new dict
//! with a new `descr` list, and a mask is a new holder whose dict is built anew on each access.
//! A mask holder keeps the exporting object alive (where the getter passes it), as the mask's
//! memory is the exporter's: `numpy.asarray(d['mask'])` stays valid after the exporter is
//! dropped, as NumPy's own arrays stay valid through their base.

use pyo3::intern;
use std::any::Any;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};

use crate::descriptor::{ArrayDescriptor, DescriptorBuilder, Device, Host, Space};
use crate::interface::{ArrayInterface, CudaArrayInterface};
use crate::structured::{Descr, DescrFormat};

use super::Memo;
pub use super::errors::export_error;

/// A `descr` as the dict's list of `(name, format[, shape])` tuples.
pub(crate) fn descr_list<'py>(py: Python<'py>, d: &Descr) -> PyResult<Bound<'py, PyList>> {
    list_of(py, d, false)
}

/// `numpy.dtype` of a `descr` whose fields may be of extended types: such a field's format is
/// ml_dtypes' dtype where it is installed (a bare `<V2` field is bfloat16, as
/// [`crate::TypeStr::stands_for`] says), so that the items keep their identity. NumPy's refusal
/// (a name twice) is raised.
pub fn descr_dtype<'py>(py: Python<'py>, d: &Descr) -> PyResult<Bound<'py, PyAny>> {
    let list = list_of(py, d, true)?;
    py.import("numpy")?.getattr("dtype")?.call1((list,))
}

fn list_of<'py>(py: Python<'py>, d: &Descr, typed: bool) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for f in &d.0 {
        let name = match &f.title {
            Some(t) => PyTuple::new(py, [t.as_str(), f.name.as_str()])?.into_any(),
            None => PyString::new(py, &f.name).into_any(),
        };
        let format = match &f.format {
            DescrFormat::Type(t) => match t.stands_for().filter(|_| typed) {
                Some(e) => match super::array_struct::extended_dtype(py, e)? {
                    Some(dtype) => dtype,
                    None => PyString::new(py, &t.to_string()).into_any(),
                },
                None => PyString::new(py, &t.to_string()).into_any(),
            },
            DescrFormat::Nested(n) => list_of(py, n, typed)?.into_any(),
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

/// A dict built before for an equal key. Building is a pure function of the key (a
/// descriptor, or the builder that builds one), so a copy is exactly what building would give.
struct Template {
    dict: Py<PyDict>,
    /// The dict's `descr` list, replaced by a copy in every result so no caller shares it.
    descr: Option<Py<PyList>>,
}

/// Keyed on descriptors and builders of either space, compared by type, then `==` (Rust
/// values: no Python code runs under the memo's lock). Repeated exports of the same arrays (a
/// kernel launched in a loop) hit; a miss costs one comparison per entry on top of building.
static MEMO: Memo<Box<dyn Any + Send>, Template, 16> = Memo::new();

/// A new dict on every call, whose mutable parts (the dict and its `descr` list) are never
/// shared with another call's result; built by `build` unless an equal key was seen recently
/// (a dict with a mask is built every time: its holder keeps the caller's exporter).
fn memoized<'py, K: MemoKey>(
    py: Python<'py>,
    key: &K,
    build: impl FnOnce() -> PyResult<Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let hit = MEMO.get(
        |k| {
            k.downcast_ref::<K::Stored>()
                .is_some_and(|k| key.matches(k))
        },
        |t| {
            (
                t.dict.clone_ref(py),
                t.descr.as_ref().map(|d| d.clone_ref(py)),
            )
        },
    );
    let (template, descr) = match hit {
        Some(h) => h,
        None => {
            let built = build()?;
            // A mask holder keeps its exporter: such dicts are never kept (nor shared).
            if built.contains(intern!(py, "mask"))? {
                return Ok(built);
            }
            let descr = match built.get_item(intern!(py, "descr"))? {
                None => None,
                Some(l) => {
                    let l = l.cast_into::<PyList>()?;
                    // Nested lists would be shared by a shallow copy: such dicts are not kept.
                    if l.iter().any(|f| {
                        f.cast::<PyTuple>()
                            .is_ok_and(|t| t.iter().any(|x| x.is_instance_of::<PyList>()))
                    }) {
                        return Ok(built);
                    }
                    Some(l.unbind())
                }
            };
            MEMO.insert(
                Box::new(key.stored()),
                Template {
                    dict: built.clone().unbind(),
                    descr: descr.as_ref().map(|d| d.clone_ref(py)),
                },
            );
            (built.unbind(), descr)
        }
    };
    let dict = template.bind(py).copy()?;
    if let Some(descr) = descr {
        let descr = descr.bind(py);
        dict.set_item(intern!(py, "descr"), descr.get_slice(0, descr.len()))?;
    }
    Ok(dict)
}

/// What the memo is keyed on: a descriptor, or a builder, whose lifetime (what it borrows) a
/// stored key cannot have.
pub(crate) trait MemoKey {
    /// The key as the memo keeps it.
    type Stored: Any + Send;
    /// The key to keep.
    fn stored(&self) -> Self::Stored;
    /// Whether a kept key is this one.
    fn matches(&self, stored: &Self::Stored) -> bool;
}

impl<S: Space> MemoKey for ArrayDescriptor<S> {
    type Stored = Self;
    fn stored(&self) -> Self {
        self.clone()
    }
    fn matches(&self, stored: &Self) -> bool {
        self == stored
    }
}

impl<S: Space> MemoKey for DescriptorBuilder<'_, S> {
    /// Vouching for nothing, with whether this one vouches for its bytes and its stream.
    type Stored = (DescriptorBuilder<'static, S>, bool, bool);
    fn stored(&self) -> Self::Stored {
        self.memo_key()
    }
    fn matches(&self, (builder, vouched, stream_live): &Self::Stored) -> bool {
        self.vouched() == *vouched && self.stream_live() == *stream_live && self.same_build(builder)
    }
}

/// The dict for a descriptor (a new one on every call). A mask's holder keeps nothing alive:
/// see [`to_dict_kept`].
pub fn to_dict<'py, S: Space>(
    py: Python<'py>,
    d: &ArrayDescriptor<S>,
) -> PyResult<Bound<'py, PyDict>> {
    to_dict_kept(py, d, None)
}

/// The dict for a descriptor (a new one on every call) whose mask holders keep `keep` alive:
/// the object the mask's memory depends on (the exporter, an import's view).
pub fn to_dict_kept<'py, S: Space>(
    py: Python<'py>,
    d: &ArrayDescriptor<S>,
    keep: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    memoized(py, d, || build_dict(py, d, keep))
}

/// The dict for what a builder builds (a new one on every call); export errors raise
/// `ValueError`.
pub(crate) fn builder_to_dict<'py, S: Space>(
    py: Python<'py>,
    b: &DescriptorBuilder<'_, S>,
    keep: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    memoized(py, b, || {
        let d = b
            .clone()
            .build()
            .map_err(|e| export_error(e, S::ATTRIBUTE))?;
        if S::DEVICE {
            refuse_stream_of_another_device(&d)?;
        }
        build_dict(py, &d, keep)
    })
}

/// A stream of one device exported for data on another is a producer's mistake no consumer
/// can repair (its wait would order the wrong device's work): `ValueError` naming both. Only
/// the streams this crate made are asked about ([`crate::cuda::stream_device`]), and only for
/// derived exports (a hand-written `CudaArrayInterface` answers for its own stream).
pub(crate) fn refuse_stream_of_another_device<S: Space>(d: &ArrayDescriptor<S>) -> PyResult<()> {
    let Some(stream) = d.stream() else {
        return Ok(());
    };
    match crate::cuda::stream_device_mismatch(stream, d.data.ptr) {
        None => Ok(()),
        Some((stream_device, data_device)) => {
            Err(pyo3::exceptions::PyValueError::new_err(format!(
                "cannot export {}: `stream` = {:#x} is a stream of device {stream_device}, and the \
             data (`data` = {:#x}) is on device {data_device}; export a stream of device \
             {data_device} (or None)",
                S::ATTRIBUTE,
                stream.as_raw(),
                d.data.ptr
            )))
        }
    }
}

/// Builds the dict for a descriptor from scratch; mask holders keep `keep`.
fn build_dict<'py, S: Space>(
    py: Python<'py>,
    d: &ArrayDescriptor<S>,
    keep: Option<&Bound<'py, PyAny>>,
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
        dict.set_item(intern!(py, "mask"), mask_holder(py, mask, keep)?)?;
    }
    dict.set_item(intern!(py, "version"), d.version)?;
    if S::DEVICE && d.version >= 3 {
        dict.set_item(intern!(py, "stream"), d.stream().map(|s| s.as_raw()))?;
    }
    Ok(dict)
}

/// The object standing for mask `d` in a dict: it exposes `d` and keeps `keep` alive.
fn mask_holder<'py, S: Space>(
    py: Python<'py>,
    d: &ArrayDescriptor<S>,
    keep: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let keep = keep.map(|k| k.clone().unbind());
    // `Space` has two implementations; the descriptor is moved into the holder of its own.
    let any: &dyn Any = d;
    if let Some(d) = any.downcast_ref::<ArrayDescriptor<Device>>() {
        let holder = CudaMask {
            descriptor: d.clone(),
            keep,
        };
        Ok(Bound::new(py, holder)?.into_any())
    } else if let Some(d) = any.downcast_ref::<ArrayDescriptor<Host>>() {
        let holder = HostMask {
            descriptor: d.clone(),
            keep,
        };
        Ok(Bound::new(py, holder)?.into_any())
    } else {
        unreachable!("Space is Device or Host")
    }
}

/// A mask exported inside a `__cuda_array_interface__` dict: an object exposing the mask's
/// descriptor, as the spec requires, keeping alive what its memory depends on.
#[pyclass(frozen, module = "cai", name = "CudaMask")]
pub struct CudaMask {
    descriptor: ArrayDescriptor<Device>,
    keep: Option<Py<PyAny>>,
}

#[pymethods]
impl CudaMask {
    /// The mask's descriptor (a new dict on every access).
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        to_dict_kept(py, &self.descriptor, self.keep.as_ref().map(|k| k.bind(py)))
    }
}

/// A mask exported inside an `__array_interface__` dict.
#[pyclass(frozen, module = "cai", name = "HostMask")]
pub struct HostMask {
    descriptor: ArrayDescriptor<Host>,
    keep: Option<Py<PyAny>>,
}

#[pymethods]
impl HostMask {
    /// The mask's descriptor (a new dict on every access).
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        to_dict_kept(py, &self.descriptor, self.keep.as_ref().map(|k| k.bind(py)))
    }
}

/// The `__cuda_array_interface__` dict of `value`; mask holders keep `exporter` (the Python
/// object holding `value`, whose memory the mask is) alive. The derives' getter passes itself.
pub fn cuda_array_interface<'py, T: CudaArrayInterface + ?Sized>(
    py: Python<'py>,
    value: &T,
    exporter: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let err = |e| export_error(e, Device::ATTRIBUTE);
    match value.__cai_builder() {
        Some(b) => builder_to_dict(py, &b.map_err(err)?, exporter),
        None => to_dict_kept(py, &value.cuda_array_interface().map_err(err)?, exporter),
    }
}

/// The `__array_interface__` dict of `value`; see [`cuda_array_interface`].
pub fn array_interface<'py, T: ArrayInterface + ?Sized>(
    py: Python<'py>,
    value: &T,
    exporter: Option<&Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let err = |e| export_error(e, Host::ATTRIBUTE);
    match value.__cai_builder() {
        Some(b) => builder_to_dict(py, &b.map_err(err)?, exporter),
        None => to_dict_kept(py, &value.array_interface().map_err(err)?, exporter),
    }
}

/// Adds the mask holder classes to a module (for `isinstance` checks and pickling names).
pub fn add_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<CudaMask>()?;
    m.add_class::<HostMask>()?;
    Ok(())
}
