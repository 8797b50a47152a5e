//! Storages over existing buffers, without a copy: `as_storage` and `storage(copy=False)`.

use super::class::PyStorage;
use super::dtype::{data_dtype, dtype_of};
use super::keywords::read_kwargs;
use super::mirror::sync_state_arg;
use super::{numpy, numpy_array_or_scalar, read_options, read_through_gt};
use crate::args::show;
use std::any::Any;

use cai_gt::python::GtData;
use cai_gt::{
    ForeignBuffer, PerDim, StorageError, StorageParams, SyncState, check_mirror_pair, parse_dims,
    stride_order, wrap_foreign,
};
use cai_runtime::__private::items_descr;
use cai_runtime::Space;
use cai_runtime::python::{ForeignArray, Held};
use cai_runtime::sync::{ImportOptions, SyncMode};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Wraps existing buffers in a storage without copying (GDP-3 `as_storage`): `data` (host, or
/// any object with a data interface, DLPack or an array interface) and/or `device_data`
/// (device memory); the storage keeps them alive. `sync_state` (a `SyncState`) is the state a
/// host and device pair starts in.
#[doc = super::create::storage_keywords!()]
#[pyfunction]
#[pyo3(signature = (data = None, device_data = None, *, sync_state = None, **kwargs))]
pub fn as_storage(
    py: Python<'_>,
    data: Option<&Bound<'_, PyAny>>,
    device_data: Option<&Bound<'_, PyAny>>,
    #[pyo3(from_py_with = sync_state_arg)] sync_state: Option<SyncState>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyStorage>> {
    let p = read_kwargs("as_storage", kwargs)?;
    wrap(py, "as_storage", data, device_data, None, sync_state, &p)
}

/// A memory buffer given as the data to wrap (an object with the buffer protocol and none of
/// the interfaces: a `bytearray`, a `memoryview`, an `array.array`) as NumPy views it, format
/// and shape included, without a copy (through a `memoryview`, so that `bytes` is a buffer of
/// bytes too, where `numpy.asarray` would copy it into a string scalar). None for anything
/// else. The array holds the buffer's export, and the storage the array.
fn buffer_as_array<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    // (NumPy's own arrays and scalars, the most common data, are told from their type.)
    if numpy_array_or_scalar(data)? || !has_buffer(data) || read_through_gt(data)? {
        return Ok(None);
    }
    for name in [
        pyo3::intern!(py, "__array_interface__"),
        pyo3::intern!(py, "__cuda_array_interface__"),
    ] {
        // The type first: asking a NumPy array itself builds its dict (~1 us).
        if data.get_type().hasattr(name)? || data.hasattr(name)? {
            return Ok(None);
        }
    }
    let view = pyo3::types::PyMemoryView::from(data)?;
    numpy(py)?.getattr("asarray")?.call1((view,)).map(Some)
}

/// Whether `data` exports the buffer protocol.
fn has_buffer(data: &Bound<'_, PyAny>) -> bool {
    // SAFETY: `data` is a live object (borrowed for the call) and the thread is attached to
    // the interpreter (a `Bound` proves both); PyObject_CheckBuffer only reads its type's
    // buffer slot, and cannot fail.
    unsafe { pyo3::ffi::PyObject_CheckBuffer(data.as_ptr()) != 0 }
}

/// The error `e` of reading `data` to wrap, told apart where `data` is no memory at all (a
/// list, a str): such data has no interface and no buffer, and the message says so and how to
/// copy it instead (GtData's own message lists only the interfaces).
fn not_wrappable(function: &str, data: &Bound<'_, PyAny>, e: PyErr) -> PyErr {
    let py = data.py();
    let buffer = has_buffer(data);
    let has = |name: &str| data.hasattr(name).unwrap_or(true);
    if !e.is_instance_of::<PyTypeError>(py)
        || buffer
        || has("__gt_data_interface__")
        || has("__dlpack__")
        || has("__array_interface__")
        || has("__cuda_array_interface__")
    {
        return e;
    }
    let type_name = data
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    // (`storage` wraps only when asked not to copy.)
    let call = match function {
        "storage" => "storage(copy=False)",
        _ => "as_storage()",
    };
    PyTypeError::new_err(format!(
        "{function}(): data of type {type_name} exposes none of __gt_data_interface__, __dlpack__, \
         __array_interface__ and __cuda_array_interface__, and is no memory buffer (the buffer \
         protocol); {call} wraps memory without copying it: storage(data) copies data into a \
         new storage"
    ))
}

/// An imported view as the memory a storage stands on, kept alive by `keep`.
fn foreign<S: Space>(v: &ForeignArray<S>, keep: Box<dyn Any + Send + Sync>) -> ForeignBuffer {
    ForeignBuffer {
        ptr: v.ptr(),
        layout: v.layout().clone(),
        typestr: v.descriptor().typestr,
        // The descr that says what the items are, as NumPy reads the dict (none for a plain
        // type string's, whatever it lists).
        descr: items_descr(&v.descriptor().typestr, v.descriptor().descr.as_ref()).cloned(),
        readonly: v.readonly(),
        device_id: v.pointer_attributes().and_then(|a| a.device_ordinal),
        keep,
    }
}

/// What `device_data` must be.
pub(super) const NO_DEVICE_BUFFER: &str =
    "device_data describes no device buffer (no \"gpu\" entry or __cuda_array_interface__)";

/// `as_storage`, or `storage(copy=False)` (`function`, named in errors), which may name the
/// `dtype` the data must already have.
pub(super) fn wrap(
    py: Python<'_>,
    function: &str,
    data: Option<&Bound<'_, PyAny>>,
    device_data: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    sync_state: Option<SyncState>,
    p: &StorageParams,
) -> PyResult<Py<PyStorage>> {
    let data = data.filter(|d| !d.is_none());
    let device_data = device_data.filter(|d| !d.is_none());
    if data.is_none() && device_data.is_none() {
        return Err(PyTypeError::new_err(format!(
            "{function}() needs data (a host array or any object with a data interface) and/or device_data"
        )));
    }
    // A memory buffer (GDP-3: "the memory buffer or storage") is wrapped as NumPy views it.
    let buffer_view = data.map(|d| buffer_as_array(py, d)).transpose()?.flatten();
    let data = buffer_view.as_ref().or(data);
    // The storage exports its device buffer with `stream: None`, which tells consumers on any
    // stream that no work on the data is pending: so the host waits here for the producer's
    // stream (an event wait would order only the legacy default stream after it).
    let options = ImportOptions {
        mode: SyncMode::Synchronize,
        ..read_options()
    };
    let mut from = data
        .map(|d| GtData::from_object(d, &options).map_err(|e| not_wrappable(function, d, e)))
        .transpose()?;
    let mut from_dev = device_data
        .map(|d| GtData::from_object(d, &options))
        .transpose()?;
    // What the bytes depend on besides the data objects (their dicts, buffers shared through
    // the buffer protocol, which stay put only while held): the storage holds it from here on.
    // (Each take_held: what is taken goes into the `keep` of the storage's buffer below, with
    // the owner, and the views are only asked for their addresses and layouts until then, so
    // the storage reads through the memory only while it holds them.)
    let held_host = from
        .as_mut()
        .and_then(|g| g.host.as_mut())
        // SAFETY: see above.
        .map(|h| unsafe { h.take_held() })
        .unwrap_or_default();
    let held_device = match from_dev.as_mut().and_then(|g| g.gpu.as_mut()) {
        // SAFETY: see above.
        Some(g) => unsafe { g.take_held() },
        None => from
            .as_mut()
            .and_then(|g| g.gpu.as_mut())
            // SAFETY: see above.
            .map(|g| unsafe { g.take_held() })
            .unwrap_or_default(),
    };
    let host = from.as_ref().and_then(|g| g.host.as_ref());
    let gpu = from_dev
        .as_ref()
        .and_then(|g| g.gpu.as_ref())
        .or_else(|| from.as_ref().and_then(|g| g.gpu.as_ref()));
    if device_data.is_some() && from_dev.as_ref().is_some_and(|g| g.gpu.is_none()) {
        return Err(PyValueError::new_err(NO_DEVICE_BUFFER));
    }
    // Each side keeps its data object, the object its view was read from (a GT4Py field's
    // `ndarray`, which the field may make anew on each access), and what its bytes were read
    // through.
    // (All in a `Held`, whose release puts the user's pending exception aside: a data object's
    // own deallocation may run Python code.)
    let keep = |mut held: Held, owner: &Bound<'_, PyAny>, read_from: Option<Bound<'_, PyAny>>| {
        held.object(owner);
        if let Some(r) = read_from {
            held.object(&r);
        }
        Box::new(held)
    };
    let host = host.map(|h| foreign(h, keep(held_host, data.expect("host data"), h.owner(py))));
    let gpu = gpu.map(|g| {
        let owner = device_data.or(data).expect("one given");
        foreign(g, keep(held_device, owner, g.owner(py)))
    });
    if let (Some(h), Some(g)) = (&host, &gpu) {
        check_mirror_pair(h, g)?;
    }
    let Some(first) = host.as_ref().or(gpu.as_ref()) else {
        return Err(StorageError::NothingToWrap.into());
    };
    let source = data.or(device_data).expect("one given");
    let data_type = data_dtype(py, source, &first.typestr, first.descr.as_ref())?;
    // `storage(copy=False, dtype=...)`: the data's own dtype is no change.
    if let Some(asked) = dtype
        && dtype_of(py, Some(asked))?.element != data_type.element
    {
        return Err(PyValueError::new_err(format!(
            "{function}(copy=False) wraps the buffer as it is: dtype = {} (the data's is {}) cannot be changed without a copy",
            show(asked),
            data_type.numpy
        )));
    }
    let meta = from.as_ref().or(from_dev.as_ref()).expect("one given");
    // Lookup order: explicit, then the preset, then the data, then the fallback.
    let data_params = StorageParams {
        dims: meta.dims.as_deref().map(parse_dims).transpose()?,
        halo: meta.halo.as_deref().map(PerDim::from),
        // A storage knows the order its strides do not tell (where they tie).
        layout: Some(match source.cast::<PyStorage>() {
            Ok(s) => s.borrow().inner.layout_order(),
            Err(_) => stride_order(first.layout.strides()),
        }),
        ..Default::default()
    };
    // SAFETY: each side's address and layout come from an import that validated them (a
    // ForeignArray), and `keep` holds the object that owns the memory and everything its bytes
    // were read through (`take_held`), so the memory stays put while the storage uses it.
    let inner = unsafe {
        wrap_foreign(
            host,
            gpu,
            data_type.element.clone(),
            sync_state,
            p,
            &data_params,
        )
    }?;
    PyStorage::new_py(py, inner, &data_type)
}
