//! Storages in new buffers: `empty`, `zeros`, `ones`, `full`, their `_like` forms, and
//! `storage(data)`, which copies, each under GDP-3's lookup order.

use super::class::PyStorage;
use super::dtype::{Dtype, data_dtype, dtype_of};
use super::keywords::{Keyword, read_call, read_kwargs, shape_arg};
use super::mirror::sync_state_arg;
use super::wrap::{NO_DEVICE_BUFFER, wrap};
use super::{numpy, numpy_error_named, read_options};
use crate::args::{self, show};
use crate::fastcall::{self, Args};
use cai_gt::python::GtData;
use cai_gt::stride_order;
use cai_gt::{
    GpuDevice, Init, PerDim, Storage, StorageDevice, StorageParams, SyncState, SyncStatus,
    parse_dims,
};
use cai_runtime::Host;
use cai_runtime::python::ForeignArray;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyEllipsis};
use std::ffi::CStr;

/// Allocates a storage: GDP-3's lookup order over `explicit`, the preset, `data`.
fn create(
    py: Python<'_>,
    shape: &[usize],
    dtype: &Dtype,
    explicit: &StorageParams,
    data: &StorageParams,
    init: Init,
) -> PyResult<Py<PyStorage>> {
    // Borrowed out of the results rather than moved out with `?`: each move copies a few
    // hundred bytes (counted with `perf probe` on `memmove`: 13 per call before, 10 after).
    let resolved = explicit.resolve(shape, dtype.element.itemsize(), data);
    let params = resolved.as_ref().map_err(|e| PyErr::from(e.clone()))?;
    match Storage::allocate(shape, dtype.element.clone(), params, init) {
        Ok(inner) => PyStorage::new_py(py, inner, dtype),
        Err(e) => Err(PyErr::from(e)),
    }
}

/// One item of `dtype` holding `value`, as bytes (NumPy converts, its errors named by
/// [`numpy_error_named`], as `numpy.full` raises them).
fn item_bytes(py: Python<'_>, dtype: &Dtype, value: &Bound<'_, PyAny>) -> PyResult<Vec<u8>> {
    let a = numpy(py)?
        .getattr("asarray")?
        .call1((value, &dtype.numpy))
        .map_err(|e| {
            let what = format!(
                "fill_value = {}: cannot be stored as {}",
                show(value),
                dtype.numpy
            );
            numpy_error_named(py, e, &what)
        })?;
    if a.getattr("ndim")?.extract::<usize>()? != 0 {
        return Err(PyValueError::new_err(format!(
            "fill_value = {} is not a scalar",
            show(value)
        )));
    }
    a.call_method0("tobytes")?.extract()
}

pub(super) fn one(py: Python<'_>, dtype: &Dtype) -> PyResult<Vec<u8>> {
    numpy(py)?
        .getattr("ones")?
        .call1(((), &dtype.numpy))?
        .call_method0("tobytes")?
        .extract()
}

/// How a creator sets its items.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    Empty,
    Zeros,
    Ones,
    Full,
}

/// A creator's call: `empty`, `zeros`, `ones`, `full` (`like` false: from a shape) or their
/// `_like` forms (`like` true: from a template). Arguments as GDP-3 names them:
/// `(shape | data, [fill_value,] dtype=None, **kwargs)`.
fn creator(
    py: Python<'_>,
    func: &'static str,
    like: bool,
    fill: Fill,
    args: Args<'_>,
) -> PyResult<Py<PyStorage>> {
    let first = if like { Keyword::Data } else { Keyword::Shape };
    let mut p = StorageParams::default();
    let (source, fill_value, dtype) = if fill == Fill::Full {
        let ([source, value], [dtype]) = read_call(
            func,
            [first, Keyword::FillValue],
            [Keyword::Dtype],
            args,
            &mut p,
        )?;
        (source, Some(value), dtype)
    } else {
        let ([source], [dtype]) = read_call(func, [first], [Keyword::Dtype], args, &mut p)?;
        (source, None, dtype)
    };
    let init = |d: &Dtype| {
        Ok::<_, PyErr>(match (&fill_value, fill) {
            (Some(v), _) => Init::Fill(item_bytes(py, d, v)?),
            (None, Fill::Empty) => Init::Uninit,
            (None, Fill::Zeros) => Init::Zeros,
            // `full` always has its value; `ones` is the value 1.
            (None, Fill::Ones | Fill::Full) => Init::Fill(one(py, d)?),
        })
    };
    if like {
        let (shape, data_dtype, data_params) = template(py, &source)?;
        let dtype = match dtype {
            Some(d) => dtype_of(py, Some(&d))?,
            None => data_dtype,
        };
        let init = init(&dtype)?;
        create(py, &shape, &dtype, &p, &data_params, init)
    } else {
        let dtype = dtype_of(py, dtype.as_ref())?;
        let init = init(&dtype)?;
        let shape = shape_arg(&source)?;
        create(py, &shape, &dtype, &p, &StorageParams::default(), init)
    }
}

/// A creator's docstring: the text signature Python's `inspect` reads, its summary, and the
/// keyword arguments every storage function takes (one text, in every creator's docstring).
macro_rules! doc {
    ($signature:literal, $summary:literal) => {
        match CStr::from_bytes_with_nul(
            concat!($signature, "\n--\n\n", $summary, storage_keywords!(), "\0").as_bytes(),
        ) {
            Ok(doc) => doc,
            Err(_) => panic!("a docstring holds no NUL"),
        }
    };
}

/// The storage functions' keyword arguments, for their docstrings.
macro_rules! storage_keywords {
    () => {
        "\n\nKeyword arguments (GDP-3; each optional, resolved in GDP-3's lookup order: given, then the `defaults` preset, then `data` for the `_like` forms): `dims` (dimension names, a str such as \"IJK\" or a sequence of str), `halo` (per dimension an int or a (start, end) pair of items outside the compute domain), `layout` (the stride order, a permutation of range(ndim): the dimension with the largest entry is contiguous), `alignment_size` (bytes), `aligned_index` (the item, per dimension, that lies on an aligned address: the first interior point), `defaults` (a preset: GT4Py's backend names, e.g. \"numpy\", \"gt:cpu_ifirst\", \"gt:gpu\"), `device` (None, host memory, the default; \"gpu\", the current device; \"gpu:N\"), `managed` (on the GPU: \"gt4py\", host and device mirrors kept in step, the default; \"cuda\", unified memory; None, device memory only)."
    };
}
pub(super) use storage_keywords;

/// The creators: name (for messages, and for the function object), from a template or a
/// shape, fill, docstring (with the text signature Python's `inspect` reads).
#[allow(clippy::type_complexity)]
const CREATORS: [(&str, &CStr, bool, Fill, &CStr); 8] = [
    (
        "empty",
        c"empty",
        false,
        Fill::Empty,
        doc!(
            "empty(shape, dtype=None, **kwargs)",
            "Allocate a storage with undefined values (GDP-3 `empty`): `shape` an int or a sequence of int, `dtype` anything numpy.dtype takes (default float64)."
        ),
    ),
    (
        "zeros",
        c"zeros",
        false,
        Fill::Zeros,
        doc!(
            "zeros(shape, dtype=None, **kwargs)",
            "Allocate a storage of zeros (GDP-3 `zeros`): `shape` an int or a sequence of int, `dtype` anything numpy.dtype takes (default float64)."
        ),
    ),
    (
        "ones",
        c"ones",
        false,
        Fill::Ones,
        doc!(
            "ones(shape, dtype=None, **kwargs)",
            "Allocate a storage of ones (GDP-3 `ones`): `shape` an int or a sequence of int, `dtype` anything numpy.dtype takes (default float64)."
        ),
    ),
    (
        "full",
        c"full",
        false,
        Fill::Full,
        doc!(
            "full(shape, fill_value, dtype=None, **kwargs)",
            "Allocate a storage with every item `fill_value` (GDP-3 `full`): `shape` an int or a sequence of int, `fill_value` a scalar `dtype` can hold, `dtype` anything numpy.dtype takes (default: NumPy's for `fill_value`)."
        ),
    ),
    (
        "empty_like",
        c"empty_like",
        true,
        Fill::Empty,
        doc!(
            "empty_like(data, dtype=None, **kwargs)",
            "`empty` with the shape, dtype and parameters of `data` (a storage, an array, any object with a data interface); `dtype` overrides its dtype."
        ),
    ),
    (
        "zeros_like",
        c"zeros_like",
        true,
        Fill::Zeros,
        doc!(
            "zeros_like(data, dtype=None, **kwargs)",
            "`zeros` with the shape, dtype and parameters of `data` (a storage, an array, any object with a data interface); `dtype` overrides its dtype."
        ),
    ),
    (
        "ones_like",
        c"ones_like",
        true,
        Fill::Ones,
        doc!(
            "ones_like(data, dtype=None, **kwargs)",
            "`ones` with the shape, dtype and parameters of `data` (a storage, an array, any object with a data interface); `dtype` overrides its dtype."
        ),
    ),
    (
        "full_like",
        c"full_like",
        true,
        Fill::Full,
        doc!(
            "full_like(data, fill_value, dtype=None, **kwargs)",
            "`full` with the shape, dtype and parameters of `data` (a storage, an array, any object with a data interface), every item `fill_value`; `dtype` overrides its dtype."
        ),
    ),
];

/// The C entry point of `CREATORS[I]`.
unsafe extern "C" fn creator_entry<const I: usize>(
    _module: *mut pyo3::ffi::PyObject,
    args: *const *mut pyo3::ffi::PyObject,
    nargs: pyo3::ffi::Py_ssize_t,
    kwnames: *mut pyo3::ffi::PyObject,
) -> *mut pyo3::ffi::PyObject {
    let (name, _, like, fill, _) = CREATORS[I];
    // SAFETY: registered by `fastcall::function` as a fast-call function; CPython's arguments
    // are passed on unchanged.
    unsafe {
        fastcall::call(args, nargs, kwnames, |py, args| {
            creator(py, name, like, fill, args).map(Py::into_any)
        })
    }
}

const CREATOR_ENTRIES: [fastcall::Entry; 8] = [
    creator_entry::<0>,
    creator_entry::<1>,
    creator_entry::<2>,
    creator_entry::<3>,
    creator_entry::<4>,
    creator_entry::<5>,
    creator_entry::<6>,
    creator_entry::<7>,
];

/// Shape, dtype and "data" parameters of a `*_like` template: a storage, or any object with
/// one of the interfaces.
fn template<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
) -> PyResult<(Vec<usize>, Dtype<'py>, StorageParams)> {
    if let Ok(s) = data.cast::<PyStorage>() {
        let s = s.borrow();
        return Ok((
            s.inner.shape().to_vec(),
            s.dtype(py),
            s.storage().data_params(),
        ));
    }
    let gt = GtData::from_object(data, &read_options())?;
    let (shape, typestr, descr, strides) = match (&gt.host, &gt.gpu) {
        (Some(h), _) => {
            let d = h.descriptor();
            (
                d.shape.clone(),
                d.typestr,
                d.descr.clone(),
                h.layout().strides().to_vec(),
            )
        }
        (None, Some(g)) => {
            let d = g.descriptor();
            (
                d.shape.clone(),
                d.typestr,
                d.descr.clone(),
                g.layout().strides().to_vec(),
            )
        }
        // GtData::from_object reads one buffer at least; an error rather than a panic if not.
        (None, None) => return Err(PyValueError::new_err("the data describes no buffer")),
    };
    let dtype = data_dtype(py, data, &typestr, descr.as_ref())?;
    let params = StorageParams {
        dims: gt.dims.as_deref().map(parse_dims).transpose()?,
        halo: gt.halo.as_deref().map(PerDim::from),
        layout: Some(stride_order(&strides)),
        device: Some(if gt.host.is_some() {
            StorageDevice::Host
        } else {
            StorageDevice::Gpu
        }),
        // A copy of device memory stays on its device.
        device_id: gt
            .gpu
            .as_ref()
            .and_then(|g| g.pointer_attributes())
            .and_then(|a| a.device_ordinal)
            .map(GpuDevice::Ordinal),
        ..Default::default()
    };
    Ok((shape, dtype, params))
}

/// `v`, or `numpy.asarray(v)` where it has no data interface and no DLPack (a plain list...). An xarray
/// `DataArray` is kept, to be read with its dims as GDP-3 says, and so is a GT4Py field (its
/// `__gt_dims__`, its buffer in `ndarray`).
fn readable<'py>(py: Python<'py>, v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if v.is_instance_of::<PyStorage>()
        || GtData::speaks_gt(v)?
        || v.hasattr("__dlpack__")?
        || v.hasattr("__array_interface__")?
        || v.hasattr("__cuda_array_interface__")?
        || cai_gt::python::gt4py_field_buffer(v)?.is_some()
    {
        Ok(v.clone())
    } else {
        numpy(py)?.getattr("asarray")?.call1((v,))
    }
}

/// A buffer's shape, dtype and parameters, as [`template`] reads them.
type Template<'py> = (Vec<usize>, Dtype<'py>, StorageParams);

/// For `storage(data, device_data)`: `device_data` must be device memory, and the two must
/// hold one array (shape and dtype).
fn check_pair(data: &Template<'_>, device_data: &Template<'_>) -> PyResult<()> {
    if device_data.2.device != Some(StorageDevice::Gpu) {
        return Err(PyValueError::new_err(NO_DEVICE_BUFFER));
    }
    if data.0 != device_data.0 || data.1.element != device_data.1.element {
        return Err(PyValueError::new_err(format!(
            "data and device_data must be two copies of one array: shape {:?} {} on the host, shape {:?} {} on the device",
            data.0, data.1.numpy, device_data.0, device_data.1.numpy
        )));
    }
    Ok(())
}

/// A storage initialized with a copy of `data` (or `device_data`) (GDP-3 `storage`): any
/// object with a data interface, DLPack, an array interface, or anything `numpy.asarray` reads;
/// `dtype` the storage's dtype (default: the data's); `copy=False` wraps them as `as_storage`
/// does; `sync_state` (a `SyncState`) the state a host and device pair starts in.
#[doc = storage_keywords!()]
#[pyfunction]
#[pyo3(signature = (data = None, device_data = None, *, dtype = None, copy = true, sync_state = None, **kwargs))]
pub fn storage(
    py: Python<'_>,
    data: Option<&Bound<'_, PyAny>>,
    device_data: Option<&Bound<'_, PyAny>>,
    dtype: Option<&Bound<'_, PyAny>>,
    #[pyo3(from_py_with = args::arg::copy)] copy: bool,
    #[pyo3(from_py_with = sync_state_arg)] sync_state: Option<SyncState>,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<Py<PyStorage>> {
    let p = read_kwargs("storage", kwargs)?;
    if !copy {
        return wrap(py, "storage", data, device_data, dtype, sync_state, &p);
    }
    let data = data.filter(|d| !d.is_none());
    let device_data = device_data.filter(|d| !d.is_none());
    // GDP-3: given both, `sync_state` says which of them is up to date (the host, unless the
    // device was modified). The copy is made from that one alone (the other is not touched,
    // where wrapping would bring it up to date), into host and device memory, as
    // `as_storage(data, device_data)` would hold them.
    let (source, other, source_is_data) = match (data, device_data) {
        (Some(host), Some(dev)) => {
            let device_newer = sync_state
                .as_ref()
                .is_some_and(|s| s.status() == SyncStatus::DeviceDirty);
            if device_newer {
                (dev, Some(host), false)
            } else {
                (host, Some(dev), true)
            }
        }
        (Some(host), None) => (host, None, true),
        (None, Some(dev)) => (dev, None, false),
        (None, None) => {
            return Err(PyTypeError::new_err(
                "storage() needs data or device_data to copy from (copy=False wraps them; cai.empty(shape, ...) allocates without either)",
            ));
        }
    };
    let source = readable(py, source)?;
    // A device-only source makes a device storage unless `device` or `defaults` say otherwise.
    let read = template(py, &source)?;
    if let Some(other) = other {
        let other = template(py, &readable(py, other)?)?;
        if source_is_data {
            check_pair(&read, &other)?;
        } else {
            check_pair(&other, &read)?;
        }
    }
    let (shape, data_dtype, mut data_params) = read;
    if other.is_some() {
        data_params.device = Some(StorageDevice::Gpu);
    }
    let dtype = match dtype {
        Some(d) => dtype_of(py, Some(d))?,
        None => data_dtype,
    };
    let out = create(py, &shape, &dtype, &p, &data_params, Init::Uninit)?;
    let target = out.bind(py);
    let items = cai_gt::python::gt4py_field_buffer(&source)?.unwrap_or(source);
    target.set_item(PyEllipsis::get(py), with_identity(py, items)?)?;
    Ok(out)
}

/// `items` as cai reads them, for copying into the storage: an object exposing
/// `__array_interface__` (other than an ndarray) through a view of it, whose `__array_struct__`
/// carries what the dict could not (bfloat16's `<V2`, opaque bytes to NumPy, also as a
/// structured type's field; float8_e5m2's `<f1`, which NumPy cannot read), and which reads the
/// dict where NumPy would read a buffer or `__array_struct__` first: a copy holds what
/// `as_storage` of the same object would. Errors (the producer's own) propagate.
fn with_identity<'py>(py: Python<'py>, items: Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    let np = numpy(py)?;
    if items.is_instance(&np.getattr(intern!(py, "ndarray"))?)? || !has_host_interface(&items)? {
        return Ok(items);
    }
    let view = crate::import::new_host_view(py, ForeignArray::<Host>::from_object(&items, false)?)?;
    np.getattr(intern!(py, "asarray"))?.call1((view,))
}

/// Whether `v` exposes `__array_interface__`.
fn has_host_interface(v: &Bound<'_, PyAny>) -> PyResult<bool> {
    v.hasattr(intern!(v.py(), "__array_interface__"))
}

/// Adds the creators to the module, as fast-call functions.
pub(super) fn add_creators(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for ((name, c_name, _, _, doc), entry) in CREATORS.into_iter().zip(CREATOR_ENTRIES) {
        m.add(name, fastcall::function(m, c_name, doc, entry)?)?;
    }
    Ok(())
}
