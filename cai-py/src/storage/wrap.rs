//! Storages over existing buffers, without a copy: `as_storage` and `storage(copy=False)`.

use super::class::PyStorage;
use super::device::wrap_device;
use super::dtype::{data_dtype, dtype_of};
use super::keywords::read_kwargs;
use super::sync_state::sync_state_arg;
use super::{numpy, numpy_array_or_scalar, read_options, read_through_gt};
use crate::args::show;
use cai_runtime::python::{ForeignArray, GtData};
use cai_runtime::storage::array::{AllocInfo, layout_following, stride_order};
use cai_runtime::storage::{
    Buffers, DeviceBufferHandle, HostBuffer, Managed, PerDim, Side, Storage, StorageDevice,
    StorageParams, SyncState, SyncStatus, check_alignment, parse_dims,
};
use cai_runtime::sync::{ImportOptions, SyncMode};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Wraps existing buffers in a storage without copying (GDP-3 `as_storage`): `data` (host, or
/// any object with a data interface) and/or `device_data`; the storage keeps them alive.
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
    // SAFETY: `data` is a live object; PyObject_CheckBuffer only reads its type's slots.
    if numpy_array_or_scalar(data)?
        || unsafe { pyo3::ffi::PyObject_CheckBuffer(data.as_ptr()) } == 0
        || read_through_gt(data)?
    {
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

/// The error `e` of reading `data` to wrap, told apart where `data` is no memory at all (a
/// list, a str): such data has no interface and no buffer, and the message says so and how to
/// copy it instead (GtData's own message lists only the interfaces).
fn not_wrappable(function: &str, data: &Bound<'_, PyAny>, e: PyErr) -> PyErr {
    let py = data.py();
    // SAFETY: `data` is a live object; PyObject_CheckBuffer only reads its type's slots.
    let buffer = unsafe { pyo3::ffi::PyObject_CheckBuffer(data.as_ptr()) } != 0;
    let has = |name: &str| data.hasattr(name).unwrap_or(true);
    if !e.is_instance_of::<PyTypeError>(py)
        || buffer
        || has("__gt_data_interface__")
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
        "{function}(): data of type {type_name} exposes none of __gt_data_interface__, \
         __array_interface__ and __cuda_array_interface__, and is no memory buffer (the buffer \
         protocol); {call} wraps memory without copying it: storage(data) copies data into a \
         new storage"
    ))
}

/// The host and device views a mirrored storage keeps in step must be one array twice: the
/// same element type (the same layout is checked with the shapes), and both writable, since a
/// mirror copy writes either side.
fn check_mirror_pair(
    host: &ForeignArray<cai_runtime::Host>,
    gpu: &ForeignArray<cai_runtime::Device>,
) -> PyResult<()> {
    let (h, g) = (host.descriptor(), gpu.descriptor());
    let structured = |d: &Option<cai_runtime::Descr>| d.clone().filter(|d| !d.is_simple());
    if !h.typestr.same_type(&g.typestr) || structured(&h.descr) != structured(&g.descr) {
        let show = |t: &cai_runtime::TypeStr, d: &Option<cai_runtime::Descr>| match structured(d) {
            Some(d) => format!("typestr '{t}' with descr {d}"),
            None => format!("typestr '{t}'"),
        };
        return Err(PyValueError::new_err(format!(
            "data and device_data must be two copies of one array: {} on the host, {} on the device",
            show(&h.typestr, &h.descr),
            show(&g.typestr, &g.descr)
        )));
    }
    if host.readonly() || gpu.readonly() {
        let side = if host.readonly() {
            "data (the host side)"
        } else {
            "device_data (the device side)"
        };
        return Err(PyValueError::new_err(format!(
            "{side} is read-only, but a mirrored storage copies each side into the other: wrap \
             read-only memory alone (as_storage(data) or as_storage(device_data=...)), or copy \
             it (storage(data, device_data))"
        )));
    }
    Ok(())
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
    let held_host = from
        .as_mut()
        .and_then(|g| g.host.as_mut())
        .map(|h| h.take_held())
        .unwrap_or_default();
    let held_device = match from_dev.as_mut().and_then(|g| g.gpu.as_mut()) {
        Some(g) => g.take_held(),
        None => from
            .as_mut()
            .and_then(|g| g.gpu.as_mut())
            .map(|g| g.take_held())
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
    if gpu.is_some() {
        // A build without CUDA cannot keep a device side in step (nor copy it): refused as
        // device requests are.
        wrap_device()?;
    }
    if let (Some(h), Some(g)) = (host, gpu) {
        check_mirror_pair(h, g)?;
    }
    let (layout, typestr, descr, readonly) = match (host, gpu) {
        (Some(h), Some(g)) if h.layout() != g.layout() => {
            return Err(PyValueError::new_err(format!(
                "data and device_data must have the same layout: shape {:?} strides {:?} on the host, shape {:?} strides {:?} on the device",
                h.layout().shape(),
                h.layout().strides(),
                g.layout().shape(),
                g.layout().strides()
            )));
        }
        (Some(h), _) => (
            h.layout().clone(),
            h.descriptor().typestr,
            h.descriptor().descr.clone(),
            h.readonly(),
        ),
        (None, Some(g)) => (
            g.layout().clone(),
            g.descriptor().typestr,
            g.descriptor().descr.clone(),
            g.readonly(),
        ),
        (None, None) => {
            return Err(PyValueError::new_err(
                "data describes no host buffer; pass device memory as device_data",
            ));
        }
    };
    let source = data.or(device_data).expect("one given");
    let data_type = data_dtype(py, source, &typestr, descr.as_ref())?;
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
    let dtype = data_type;
    let shape = layout.shape().to_vec();
    let meta = from.as_ref().or(from_dev.as_ref()).expect("one given");
    // Lookup order: explicit, then the preset, then the data, then the fallback.
    let data_params = StorageParams {
        dims: meta.dims.as_deref().map(parse_dims).transpose()?,
        halo: meta.halo.as_deref().map(PerDim::from),
        // A storage knows the order its strides do not tell (where they tie).
        layout: Some(match source.cast::<PyStorage>() {
            Ok(s) => s.borrow().inner.layout_order(),
            Err(_) => stride_order(layout.strides()),
        }),
        ..Default::default()
    };
    let resolved = p.clone().resolve(&shape, &data_params)?;
    // Explicit parameters must agree with the buffers: first where the storage lives (as
    // `storage(copy=True)` and the creators place it), then the layout and the alignment.
    if resolved.device == StorageDevice::Gpu && gpu.is_none() {
        let source = match (p.device, resolved.defaults) {
            (None, Some(preset)) => format!("defaults = \"{}\" (a GPU preset)", preset.name()),
            _ => "device = \"gpu\"".to_string(),
        };
        return Err(PyValueError::new_err(format!(
            "{source}, but the data to wrap has no device buffer: pass device memory as device_data, or device=None to keep the storage in host memory"
        )));
    }
    // (The strides of dimensions of one item address nothing: any place for those follows.)
    if resolved.layout != layout_following(layout.shape(), layout.strides(), &resolved.layout)
        && !layout.is_empty()
    {
        return Err(PyValueError::new_err(format!(
            "layout = {:?} does not match the buffer's strides {:?} (their order is {:?})",
            resolved.layout,
            layout.strides(),
            stride_order(layout.strides())
        )));
    }
    check_alignment(
        &shape,
        dtype.element.itemsize(),
        resolved.alignment_size,
        &resolved.aligned_index,
    )?;
    let extent = layout.extent();
    let (lo, len) = extent.map_or((0, 0), |e| (e.lo, e.len()));
    let origin = usize::try_from(-lo).unwrap_or(0);
    let item_ptr = host.map(|h| h.ptr()).or(gpu.map(|g| g.ptr())).unwrap_or(0);
    if !layout.is_empty() {
        let aligned = resolved
            .aligned_index
            .iter()
            .zip(layout.strides())
            .map(|(&i, &s)| i as i128 * s as i128)
            .sum::<i128>()
            + item_ptr as i128;
        if aligned.rem_euclid(resolved.alignment_size as i128) != 0 {
            return Err(PyValueError::new_err(format!(
                "alignment_size = {} with aligned_index = {:?}: the buffer's item there is at address {aligned:#x}, not aligned",
                resolved.alignment_size, resolved.aligned_index
            )));
        }
    }
    let host_side = match host {
        Some(h) => {
            let start = h.ptr().wrapping_add_signed(lo as i64);
            let buffer = match std::ptr::NonNull::new(start as usize as *mut u8) {
                // SAFETY: the imported layout's bytes [lo, hi) around the data pointer lie in
                // the owner's buffer (validated on import); the owner object, and the buffers
                // its bytes were shared through if any, are kept by the storage (moved into
                // the buffer below) for as long as the buffer is used.
                Some(ptr) => unsafe {
                    HostBuffer::foreign(
                        ptr,
                        len,
                        Box::new((data.expect("host data").clone().unbind(), held_host)),
                    )
                },
                None => HostBuffer::zeroed(0)?,
            };
            Some(Side { buffer, origin })
        }
        None => None,
    };
    let device_side = gpu.map(|g| {
        let owner = device_data.or(data).expect("one given").clone().unbind();
        Side {
            buffer: DeviceBufferHandle {
                ptr: g.ptr().wrapping_add_signed(lo as i64),
                len,
                keep: Box::new((owner, held_device)),
            },
            origin,
        }
    });
    let mirrored = host_side.is_some() && device_side.is_some();
    let managed = if mirrored {
        Managed::Gt4Py
    } else {
        Managed::None
    };
    let sync = mirrored.then(|| sync_state.unwrap_or_else(|| SyncState::new(SyncStatus::Clean)));
    let device_kind = if device_side.is_some() {
        StorageDevice::Gpu
    } else {
        StorageDevice::Host
    };
    let buffers = Buffers {
        host: host_side,
        device: device_side,
        span: len,
        // The bytes between the items belong to whoever else shares the buffers.
        items: Some(layout.clone()),
        sync,
        device_kind,
        managed,
        readonly,
        stream: None,
    };
    let inner = Storage::wrap(
        buffers,
        layout,
        dtype.element.clone(),
        resolved.halo,
        resolved.dims,
        resolved.layout,
    )?
    .with_info(AllocInfo {
        alignment_size: resolved.alignment_size,
        aligned_index: Some(resolved.aligned_index),
        defaults: resolved.defaults,
    });
    PyStorage::new_py(py, inner, &dtype)
}
