//! GDP-3 storages in Python: `Storage`, `SyncState`, `GTNoSuchBufferError`, and the functions
//! `empty`, `zeros`, `ones`, `full`, their `_like` forms, `as_storage` and `storage`. The
//! storage itself (allocation, views, descriptors) is `cai_runtime::storage`; this file reads
//! the arguments, applies GDP-3's lookup order, and forwards element writes to NumPy (host) or
//! CuPy (device), as GDP-3 does.

use crate::args::{self, is_int, show, size, sizes};
use crate::fastcall::{self, Args};
use cai_runtime::descriptor::{ArrayDescriptor, Space};
use cai_runtime::python::array_struct::ArrayStruct;
use cai_runtime::python::parse::parse_descr;
use cai_runtime::python::{self as cpy, GtData, HookKind};
use cai_runtime::storage::array::{AllocInfo, layout_following, stride_order};
use cai_runtime::storage::gt::GtDataDescriptor;
use cai_runtime::storage::{
    Buffers, DeviceBufferHandle, Dim, ElementType, GtDevice, HostBuffer, IndexItem, Init, Managed,
    PerDim, Preset, Selected, Side, Storage, StorageDevice, StorageError, StorageParams, SyncState,
    SyncStatus, check_alignment, parse_dims,
};
use cai_runtime::sync::ImportOptions;
use cai_runtime::typestr::{ByteOrder, Kind};
use cai_runtime::{DescriptorError, TypeStr};
use pyo3::exceptions::{
    PyAttributeError, PyException, PyIndexError, PyMemoryError, PyOverflowError, PyRuntimeError,
    PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{
    PyComplex, PyDict, PyEllipsis, PyFloat, PyInt, PySlice, PyString, PyTuple, PyType,
};
use std::collections::VecDeque;
use std::ffi::CStr;
use std::sync::Mutex;

pyo3::create_exception!(
    cai,
    GTNoSuchBufferError,
    PyException,
    "The storage has no buffer on the side asked for (to_numpy() of a device-only storage...)."
);

/// A `StorageError` as the Python exception that fits it.
fn err(e: StorageError) -> PyErr {
    let msg = e.to_string();
    match e {
        StorageError::NoSuchBuffer(_) => GTNoSuchBufferError::new_err(msg),
        StorageError::Alloc(_) => PyMemoryError::new_err(msg),
        StorageError::NoGpu(_) | StorageError::Transfer(_) => PyRuntimeError::new_err(msg),
        StorageError::Dtype(_) => PyTypeError::new_err(msg),
        _ => PyValueError::new_err(msg),
    }
}

fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NUMPY: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    NUMPY
        .get_or_try_init(py, || Ok::<_, PyErr>(py.import("numpy")?.unbind()))
        .map(|m| m.bind(py))
}

/// Whether `v` is read through GDP-3's data interface, its `acquire` first: it speaks it
/// ([`GtData::speaks_gt`]: `__gt_data_interface__`, or an xarray `DataArray`), and is neither
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
    GtData::speaks_gt(v)
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

/// A resolved dtype: the element type and the NumPy dtype object.
/// The NumPy object is held as a `Bound`: a reference of the current call.
struct Dtype<'py> {
    element: ElementType,
    numpy: Bound<'py, PyAny>,
}

/// What a remembered dtype was resolved from.
enum DtypeKey {
    /// An argument object, held so that its address stays its own: the same object again
    /// means the same dtype (only objects whose dtype cannot change are remembered).
    Object(Py<PyAny>),
    /// A plain type string from a foreign descriptor.
    TypeStr(TypeStr),
}

/// Recently resolved dtypes. Resolving asks NumPy (`numpy.dtype(v)`, then `.str` and
/// `.fields`), about 1 us, four times a small `zeros` call; programs pass a handful of dtypes.
/// The oldest is forgotten first.
static DTYPES: Mutex<VecDeque<(DtypeKey, ElementType, Py<PyAny>)>> = Mutex::new(VecDeque::new());
const DTYPES_SIZE: usize = 32;

fn known_dtype<'py>(py: Python<'py>, found: impl Fn(&DtypeKey) -> bool) -> Option<Dtype<'py>> {
    let memo = DTYPES.lock().unwrap_or_else(|e| e.into_inner());
    memo.iter()
        .find(|(key, _, _)| found(key))
        .map(|(_, element, numpy)| Dtype {
            element: element.clone(),
            numpy: numpy.bind(py).clone(),
        })
}

fn remember_dtype(key: DtypeKey, d: &Dtype<'_>) {
    let entry = (key, d.element.clone(), d.numpy.clone().unbind());
    let forgotten = {
        let mut memo = DTYPES.lock().unwrap_or_else(|e| e.into_inner());
        memo.push_back(entry);
        (memo.len() > DTYPES_SIZE).then(|| memo.pop_front())
    };
    // Released after the lock: dropping the last reference to an object can run Python code.
    drop(forgotten);
}

/// Whether `numpy.dtype(v)` is the same dtype whenever it is asked of this object: an exact
/// `str`, a NumPy scalar type or a Python number type, or a plain (field-less) `numpy.dtype`
/// (a structured one's field names can be reassigned).
fn dtype_is_fixed(py: Python<'_>, v: &Bound<'_, PyAny>, resolved: &Dtype<'_>) -> PyResult<bool> {
    if v.is_exact_instance_of::<PyString>() {
        return Ok(true);
    }
    let np = numpy(py)?;
    if let Ok(t) = v.cast::<pyo3::types::PyType>() {
        return Ok(t.is_subclass(&np.getattr("generic")?)?
            || [
                py.get_type::<pyo3::types::PyFloat>(),
                py.get_type::<pyo3::types::PyInt>(),
                py.get_type::<pyo3::types::PyComplex>(),
                py.get_type::<pyo3::types::PyBool>(),
            ]
            .iter()
            .any(|builtin| t.is(builtin)));
    }
    Ok(resolved.element.descr.is_none() && v.is_instance(&np.getattr("dtype")?)?)
}

/// `numpy.dtype(value)`, refusing types a storage cannot hold; `None` is float64.
fn dtype_of<'py>(py: Python<'py>, value: Option<&Bound<'py, PyAny>>) -> PyResult<Dtype<'py>> {
    let Some(v) = value else {
        // The default, float64, resolved once.
        static F64: PyOnceLock<(ElementType, Py<PyAny>)> = PyOnceLock::new();
        let (element, numpy) = F64.get_or_try_init(py, || {
            let f64 = TypeStr::new(ByteOrder::HOST, Kind::Float, 8);
            dtype_from_typestr(py, &f64, None).map(|d| (d.element, d.numpy.unbind()))
        })?;
        return Ok(Dtype {
            element: element.clone(),
            numpy: numpy.bind(py).clone(),
        });
    };
    if let Some(d) = known_dtype(py, |k| matches!(k, DtypeKey::Object(o) if o.is(v))) {
        return Ok(d);
    }
    let d = describe_dtype(dtype_arg(py, v)?)?;
    if dtype_is_fixed(py, v, &d)? {
        remember_dtype(DtypeKey::Object(v.clone().unbind()), &d);
    }
    Ok(d)
}

/// `numpy.dtype(v)` and the element type it describes.
fn resolve_dtype<'py>(py: Python<'py>, v: &Bound<'py, PyAny>) -> PyResult<Dtype<'py>> {
    describe_dtype(numpy(py)?.getattr("dtype")?.call1((v,))?)
}

/// `numpy.dtype(v)` of the argument `dtype`: NumPy's error says what it cannot read, not that
/// it was the argument `dtype`, so it is named.
fn dtype_arg<'py>(py: Python<'py>, v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    numpy(py)?
        .getattr("dtype")?
        .call1((v,))
        .map_err(|e| numpy_error_named(py, e, &format!("dtype = {}", show(v))))
}

/// A `numpy.dtype` and the element type it describes.
fn describe_dtype(dt: Bound<'_, PyAny>) -> PyResult<Dtype<'_>> {
    let typestr: String = dt.getattr("str")?.extract()?;
    let typestr = TypeStr::parse(&typestr).map_err(|e| PyTypeError::new_err(e.to_string()))?;
    let descr = if dt.getattr("fields")?.is_none() {
        None
    } else {
        Some(parse_descr(&dt.getattr("descr")?)?)
    };
    let element = ElementType::new(typestr, descr).map_err(err)?;
    Ok(Dtype { element, numpy: dt })
}

/// A dtype from a foreign descriptor's typestr / descr.
fn dtype_from_typestr<'py>(
    py: Python<'py>,
    typestr: &TypeStr,
    descr: Option<&cai_runtime::Descr>,
) -> PyResult<Dtype<'py>> {
    match descr.filter(|d| !d.is_simple()) {
        None => {
            let key = |k: &DtypeKey| matches!(k, DtypeKey::TypeStr(t) if t == typestr);
            if let Some(d) = known_dtype(py, key) {
                return Ok(d);
            }
            let d = resolve_dtype(py, PyString::new(py, &typestr.to_string()).as_any())?;
            remember_dtype(DtypeKey::TypeStr(*typestr), &d);
            Ok(d)
        }
        Some(d) => {
            let mut text = String::new();
            d.write_python(&mut text)
                .map_err(|_| PyValueError::new_err("descr cannot be written"))?;
            let list = py.eval(&std::ffi::CString::new(text)?, None, None)?;
            resolve_dtype(py, &list)
        }
    }
}

/// The dtype of `data`, whose interface says `typestr` and `descr`. For a structured type, the
/// object's own `dtype` where it has one describing the same bytes (a NumPy or CuPy array's):
/// NumPy names the gaps of the `descr` list `f<index>` and drops `align=True`, and cannot copy
/// items between the dtype it makes and the array's own.
fn data_dtype<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    typestr: &TypeStr,
    descr: Option<&cai_runtime::Descr>,
) -> PyResult<Dtype<'py>> {
    if descr.is_some_and(|d| !d.is_simple())
        && let Ok(Some(own)) = data.getattr_opt(pyo3::intern!(py, "dtype"))
        && let Ok(d) = describe_dtype(own)
        && d.element.typestr == *typestr
        && d.element.descr.as_ref() == descr
    {
        return Ok(d);
    }
    dtype_from_typestr(py, typestr, descr)
}

/// `dims`: a str of one-letter dims (`"IJK"`) or a sequence of names.
fn dims_arg(v: &Bound<'_, PyAny>) -> PyResult<PerDim<Dim>> {
    if let Ok(s) = v.extract::<String>() {
        let letters: PerDim<&str> = s
            .char_indices()
            .map(|(i, c)| &s[i..i + c.len_utf8()])
            .collect();
        return parse_dims(&letters).map_err(err);
    }
    let names: Vec<String> = v.extract().map_err(|_| {
        PyTypeError::new_err(format!(
            "dims = {}: expected a str such as \"IJK\" or a sequence of str",
            show(v)
        ))
    })?;
    parse_dims(&names).map_err(err)
}

/// A storage's dims by name, as Python sees them.
fn dim_names(dims: &[Dim]) -> Vec<String> {
    dims.iter().map(ToString::to_string).collect()
}

fn opt_str(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if v.is_none() {
        return Ok(None);
    }
    v.extract::<String>()
        .map(Some)
        .map_err(|_| PyTypeError::new_err(format!("{key} = {}: expected a str or None", show(v))))
}

/// Every keyword a storage function takes: the creators' own parameters, then GDP-3's
/// common keyword arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keyword {
    Shape,
    Data,
    FillValue,
    Dtype,
    AlignedIndex,
    AlignmentSize,
    Defaults,
    Device,
    Dims,
    Halo,
    Layout,
    Managed,
}

impl Keyword {
    const ALL: [Keyword; 12] = [
        Keyword::Shape,
        Keyword::Data,
        Keyword::FillValue,
        Keyword::Dtype,
        Keyword::AlignedIndex,
        Keyword::AlignmentSize,
        Keyword::Defaults,
        Keyword::Device,
        Keyword::Dims,
        Keyword::Halo,
        Keyword::Layout,
        Keyword::Managed,
    ];

    fn name(self) -> &'static str {
        match self {
            Keyword::Shape => "shape",
            Keyword::Data => "data",
            Keyword::FillValue => "fill_value",
            Keyword::Dtype => "dtype",
            Keyword::AlignedIndex => "aligned_index",
            Keyword::AlignmentSize => "alignment_size",
            Keyword::Defaults => "defaults",
            Keyword::Device => "device",
            Keyword::Dims => "dims",
            Keyword::Halo => "halo",
            Keyword::Layout => "layout",
            Keyword::Managed => "managed",
        }
    }

    /// The keyword `k` names (`Err` with the name when none). Keyword names at call sites are
    /// interned strings, so comparing pointers with the interned names usually decides
    /// without reading the text.
    fn of(k: &Bound<'_, PyAny>) -> PyResult<Result<Keyword, String>> {
        static INTERNED: PyOnceLock<[Py<PyString>; 12]> = PyOnceLock::new();
        let py = k.py();
        let interned = INTERNED.get_or_init(py, || {
            Keyword::ALL.map(|kw| PyString::intern(py, kw.name()).unbind())
        });
        if let Some(i) = interned.iter().position(|n| n.as_ptr() == k.as_ptr()) {
            return Ok(Ok(Keyword::ALL[i]));
        }
        let key: String = k
            .extract()
            .map_err(|_| PyTypeError::new_err("keywords must be strings"))?;
        Ok(Keyword::ALL
            .into_iter()
            .find(|kw| kw.name() == key)
            .ok_or(key))
    }
}

fn unexpected_keyword(func: &str, key: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "{func}() got an unexpected keyword argument '{key}'"
    ))
}

/// Sets GDP-3 keyword argument `kw` in `p`; false when `kw` is not one. `None` means "not
/// given" except where None is a value of its own (`defaults`, `device`, `managed`: explicit
/// `managed=None` is `Some(Managed::None)`).
fn set_param(p: &mut StorageParams, kw: Keyword, v: &Bound<'_, PyAny>) -> PyResult<bool> {
    let given = !v.is_none();
    let name = kw.name();
    match kw {
        Keyword::AlignedIndex if given => p.aligned_index = Some(sizes(name, v)?),
        Keyword::AlignmentSize if given => p.alignment_size = Some(size(name, v)?),
        Keyword::Defaults => {
            p.defaults = opt_str(name, v)?
                .map(|s| Preset::parse(&s))
                .transpose()
                .map_err(err)?;
        }
        Keyword::Device => {
            p.device = Some(StorageDevice::parse(opt_str(name, v)?.as_deref()).map_err(err)?);
        }
        Keyword::Dims if given => p.dims = Some(dims_arg(v)?),
        Keyword::Halo if given => p.halo = Some(args::halo(v)?),
        Keyword::Layout if given => p.layout = Some(sizes(name, v)?),
        Keyword::Managed => {
            p.managed = Some(Managed::parse(opt_str(name, v)?.as_deref()).map_err(err)?);
        }
        Keyword::AlignedIndex
        | Keyword::AlignmentSize
        | Keyword::Dims
        | Keyword::Halo
        | Keyword::Layout => {}
        Keyword::Shape | Keyword::Data | Keyword::FillValue | Keyword::Dtype => {
            return Ok(false);
        }
    }
    Ok(true)
}

/// GDP-3's common keyword arguments (its "optional keyword-only parameters") from a
/// `**kwargs` dict; each `None` when not given.
fn read_kwargs(func: &str, kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<StorageParams> {
    let mut p = StorageParams::default();
    for (k, v) in kwargs.into_iter().flat_map(|kw| kw.iter()) {
        let kw = Keyword::of(&k)?.map_err(|key| unexpected_keyword(func, &key))?;
        if !set_param(&mut p, kw, &v)? {
            return Err(unexpected_keyword(func, kw.name()));
        }
    }
    Ok(p)
}

/// The arguments of a creator, read straight from its call: `required` then `optional`
/// parameters, each by position or by keyword (an optional one is `None` when not given or
/// given as None), then GDP-3's keyword arguments (into `p`, which the caller owns: the
/// parameters are a few hundred bytes, not worth moving). Errors are worded as Python's own.
///
/// The creators are fast-call functions (`fastcall.rs`) rather than `#[pyfunction]`s: GDP-3's
/// keywords would go through a `**kwargs` dict, and `None` given for `device` or `managed`
/// must differ from not giving them.
#[allow(clippy::type_complexity)]
fn read_call<'py, const R: usize, const O: usize>(
    func: &str,
    required: [Keyword; R],
    optional: [Keyword; O],
    args: Args<'py>,
    p: &mut StorageParams,
) -> PyResult<([Bound<'py, PyAny>; R], [Option<Bound<'py, PyAny>>; O])> {
    let n = args.positional.len();
    if n > R + O {
        let takes = if O == 0 {
            format!("{R}")
        } else {
            format!("from {R} to {}", R + O)
        };
        return Err(PyTypeError::new_err(format!(
            "{func}() takes {takes} positional arguments but {n} were given"
        )));
    }
    let mut req: [Option<Bound<'py, PyAny>>; R] = std::array::from_fn(|_| None);
    let mut opt: [Option<Bound<'py, PyAny>>; O] = std::array::from_fn(|_| None);
    for (slot, v) in req.iter_mut().chain(opt.iter_mut()).zip(args.positional) {
        *slot = Some(v);
    }
    for (k, v) in args.keywords {
        let kw = Keyword::of(&k)?.map_err(|key| unexpected_keyword(func, &key))?;
        let slot = match required.iter().position(|r| *r == kw) {
            Some(i) => Some(&mut req[i]),
            None => optional.iter().position(|o| *o == kw).map(|i| &mut opt[i]),
        };
        match slot {
            Some(slot) if slot.is_some() => {
                return Err(PyTypeError::new_err(format!(
                    "{func}() got multiple values for argument '{}'",
                    kw.name()
                )));
            }
            Some(slot) => *slot = Some(v),
            None if set_param(p, kw, &v)? => {}
            None => return Err(unexpected_keyword(func, kw.name())),
        }
    }
    let given: smallvec::SmallVec<[Bound<'py, PyAny>; R]> = req.iter().flatten().cloned().collect();
    let Ok(req_values) = given.into_inner() else {
        let missing: Vec<String> = required
            .iter()
            .zip(&req)
            .filter(|(_, v)| v.is_none())
            .map(|(kw, _)| format!("'{}'", kw.name()))
            .collect();
        let list = match missing.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => missing.concat(),
        };
        let s = if missing.len() == 1 { "" } else { "s" };
        return Err(PyTypeError::new_err(format!(
            "{func}() missing {} required positional argument{s}: {list}",
            missing.len()
        )));
    };
    // An optional parameter given as None takes its default.
    let opt = opt.map(|v| v.filter(|v| !v.is_none()));
    Ok((req_values, opt))
}

fn shape_arg(v: &Bound<'_, PyAny>) -> PyResult<PerDim<usize>> {
    sizes("shape", v)
}

#[cfg(feature = "cuda")]
fn allocate_gpu(
    shape: &[usize],
    element: ElementType,
    params: &cai_runtime::storage::params::ResolvedParams,
    init: Init,
) -> Result<Storage, StorageError> {
    cai_runtime::cuda::storage::allocate(shape, element, params, init)
}

#[cfg(not(feature = "cuda"))]
fn allocate_gpu(
    _: &[usize],
    _: ElementType,
    _: &cai_runtime::storage::params::ResolvedParams,
    _: Init,
) -> Result<Storage, StorageError> {
    Err(StorageError::NoGpu(
        "this build of cai has no CUDA support; install the CUDA build (README, \"CUDA\")".into(),
    ))
}

/// The mirror operations; without CUDA no storage has a device side, so they do nothing.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
enum MirrorOp {
    HostToDevice(bool),
    DeviceToHost(bool),
    Synchronize,
}

#[cfg(feature = "cuda")]
fn mirror(s: &Storage, op: MirrorOp) -> PyResult<bool> {
    use cai_runtime::cuda::storage as cs;
    match op {
        MirrorOp::HostToDevice(force) => cs::host_to_device(s, force),
        MirrorOp::DeviceToHost(force) => cs::device_to_host(s, force),
        MirrorOp::Synchronize => cs::synchronize(s),
    }
    .map_err(err)
}

#[cfg(not(feature = "cuda"))]
fn mirror(_: &Storage, _: MirrorOp) -> PyResult<bool> {
    Ok(false)
}

#[cfg(feature = "cuda")]
fn copy_storage(s: &Storage) -> Result<Storage, StorageError> {
    if s.has_device() {
        cai_runtime::cuda::storage::copy(s)
    } else {
        s.copy_host()
    }
}

#[cfg(not(feature = "cuda"))]
fn copy_storage(s: &Storage) -> Result<Storage, StorageError> {
    s.copy_host()
}

/// The shared host/device state of a mirrored storage (`managed="gt4py"`): which buffer was
/// modified last. Every view of one buffer shares one.
#[pyclass(module = "cai", name = "SyncState", frozen)]
pub struct PySyncState(SyncState);

#[pymethods]
impl PySyncState {
    /// Both buffers hold the same data.
    #[classattr]
    const SYNC_CLEAN: u8 = 0;
    /// The host buffer was modified.
    #[classattr]
    const SYNC_HOST_DIRTY: u8 = 1;
    /// The device buffer was modified.
    #[classattr]
    const SYNC_DEVICE_DIRTY: u8 = 2;

    /// A state, for `as_storage(..., sync_state=...)`: which of the wrapped buffers is newest.
    #[new]
    #[pyo3(signature = (state = None), text_signature = "(state=0)")]
    fn new(state: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let status = match state {
            None => SyncStatus::Clean,
            Some(v) => status_of(v)?,
        };
        Ok(PySyncState(SyncState::new(status)))
    }

    /// SYNC_CLEAN, SYNC_HOST_DIRTY or SYNC_DEVICE_DIRTY.
    #[getter]
    fn state(&self) -> u8 {
        match self.0.status() {
            SyncStatus::Clean => 0,
            SyncStatus::HostDirty => 1,
            SyncStatus::DeviceDirty => 2,
        }
    }

    fn __repr__(&self) -> String {
        format!("SyncState({})", self.0.status().name())
    }

    /// Pickles (and `copy`s) by value: `SyncState(state)`, a state of its own with the same
    /// value. Sharing is a matter of one process's views of one buffer, which a copy is not.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> (Bound<'py, PyType>, (u8,)) {
        (slf.get_type(), (slf.get().state(),))
    }
}

/// The state an int names; any other value, of any size or type, is an error naming it.
fn status_of(state: &Bound<'_, PyAny>) -> PyResult<SyncStatus> {
    const USE: &str = "use SyncState.SYNC_CLEAN (0), SYNC_HOST_DIRTY (1) or SYNC_DEVICE_DIRTY (2)";
    if !is_int(state) {
        return Err(PyTypeError::new_err(format!(
            "state = {}: {USE}",
            show(state)
        )));
    }
    match state.extract::<i64>() {
        Ok(0) => Ok(SyncStatus::Clean),
        Ok(1) => Ok(SyncStatus::HostDirty),
        Ok(2) => Ok(SyncStatus::DeviceDirty),
        // The value as the int it is (`str(state)` would call a custom `__repr__`, and one
        // that raises would be printed as an ignored exception).
        Ok(n) => Err(PyValueError::new_err(format!("state = {n}: {USE}"))),
        Err(e) if e.is_instance_of::<PyOverflowError>(state.py()) => Err(PyValueError::new_err(
            format!("state = {}: {USE}", show(state)),
        )),
        // `__index__` itself raised: its error says more than ours would.
        Err(e) => Err(e),
    }
}

/// A GDP-3 storage: an n-dimensional array in host memory, device memory, or both kept in
/// step, with a halo, semantic dims, and an aligned layout. NumPy reads host storages
/// zero-copy (`__array_interface__`), CuPy and friends device storages
/// (`__cuda_array_interface__`), and GT4Py-style consumers both (`__gt_data_interface__`).
///
/// Every storage is an instance of one of GDP-3's storage types, subclasses of `Storage`
/// chosen by where its buffers are ([`StorageType`]).
#[pyclass(module = "cai", name = "Storage", weakref, subclass)]
pub struct PyStorage {
    inner: Storage,
    dtype: Py<PyAny>,
}

/// GDP-3's storage types ("Storage Types"): the class of a storage says where its buffers are
/// and who keeps them in step. Storages are made by the creation functions only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StorageType {
    /// `CPUStorage`: a host buffer only (`device=None`).
    Cpu,
    /// `GPUStorage`: a device buffer only (`device="gpu", managed=None`, or wrapped device
    /// memory).
    Gpu,
    /// `SoftwareManagedGPUStorage`: a host and a device buffer that this package keeps in step
    /// (`managed="gt4py"`).
    SoftwareManaged,
    /// `CUDAManagedGPUStorage`: unified memory, which CUDA keeps in step (`managed="cuda"`).
    CudaManaged,
}

impl StorageType {
    fn of(s: &Storage) -> StorageType {
        match (s.buffers().managed, s.has_host(), s.has_device()) {
            (Managed::Cuda, _, _) => StorageType::CudaManaged,
            (_, true, true) => StorageType::SoftwareManaged,
            (_, false, true) => StorageType::Gpu,
            _ => StorageType::Cpu,
        }
    }
}

/// A GDP-3 storage with a host buffer only (`device=None`).
#[pyclass(module = "cai", name = "CPUStorage", extends = PyStorage)]
pub struct CpuStorage;

/// A GDP-3 storage with a device buffer only (`device="gpu", managed=None`).
#[pyclass(module = "cai", name = "GPUStorage", extends = PyStorage)]
pub struct GpuStorage;

/// A GDP-3 storage with a host and a device buffer kept in step by this package
/// (`managed="gt4py"`); GDP-3 also calls it `GT4PySyncedGPUStorage`.
#[pyclass(module = "cai", name = "SoftwareManagedGPUStorage", extends = PyStorage)]
pub struct SoftwareManagedGpuStorage;

/// A GDP-3 storage in CUDA unified memory, which CUDA keeps in step (`managed="cuda"`);
/// GDP-3 also calls it `CUDASyncedGPUStorage` and `CudaManagedGPUStorage`.
#[pyclass(module = "cai", name = "CUDAManagedGPUStorage", extends = PyStorage)]
pub struct CudaManagedGpuStorage;

impl PyStorage {
    /// GDP-3's `__array__` view: the host buffer's (NumPy, brought up to date) wherever there
    /// is one, else the device buffer's (CuPy).
    fn array_view<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if slf.borrow().inner.has_host() {
            Self::to_numpy(slf)
        } else {
            Self::to_cupy(slf)
        }
    }

    /// The items as a NumPy array: [`Self::array_view`], copied to the host (through CuPy, as
    /// every device read here) for a device-only storage.
    fn host_items<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let view = Self::array_view(slf)?;
        if slf.borrow().inner.has_host() {
            Ok(view)
        } else {
            view.call_method0("get")
        }
    }

    fn new_py(py: Python<'_>, inner: Storage, dtype: &Dtype) -> PyResult<Py<PyStorage>> {
        let dtype = dtype.numpy.clone().unbind();
        PyStorage { inner, dtype }.into_object(py)
    }

    fn view(&self, py: Python<'_>, inner: Storage) -> PyResult<Py<PyStorage>> {
        let dtype = self.dtype.clone_ref(py);
        PyStorage { inner, dtype }.into_object(py)
    }

    /// The Python object, of the storage type its buffers make it.
    fn into_object(self, py: Python<'_>) -> PyResult<Py<PyStorage>> {
        let kind = StorageType::of(&self.inner);
        let base = PyClassInitializer::from(self);
        let object = match kind {
            StorageType::Cpu => Bound::new(py, base.add_subclass(CpuStorage))?.into_super(),
            StorageType::Gpu => Bound::new(py, base.add_subclass(GpuStorage))?.into_super(),
            StorageType::SoftwareManaged => {
                Bound::new(py, base.add_subclass(SoftwareManagedGpuStorage))?.into_super()
            }
            StorageType::CudaManaged => {
                Bound::new(py, base.add_subclass(CudaManagedGpuStorage))?.into_super()
            }
        };
        Ok(object.unbind())
    }

    /// One side's interface dict (`attribute`), that side brought up to date first (GDP-3: a
    /// read); `AttributeError` with `missing` when the storage has no buffer there.
    fn interface<'py, S: Space>(
        &self,
        py: Python<'py>,
        attribute: &str,
        missing: &'static str,
        bring_up_to_date: MirrorOp,
        describe: impl FnOnce(&Storage) -> Option<Result<ArrayDescriptor<S>, DescriptorError>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let d = describe(&self.inner)
            .ok_or_else(|| PyAttributeError::new_err(missing))?
            .map_err(|e| cpy::export::export_error(e, attribute))?;
        mirror(&self.inner, bring_up_to_date)?;
        cpy::to_dict(py, &d)
    }

    fn dtype<'py>(&self, py: Python<'py>) -> Dtype<'py> {
        Dtype {
            element: self.inner.element().clone(),
            numpy: self.dtype.bind(py).clone(),
        }
    }

    /// GDP-3, for a value without a data interface: a mirrored storage is on the GPU unless
    /// its host side is newer; anything else if it has a CUDA interface.
    fn value_on_gpu(value: &Bound<'_, PyAny>) -> PyResult<bool> {
        if let Ok(s) = value.cast::<PyStorage>() {
            let s = s.borrow();
            return Ok(match s.inner.sync_status() {
                Some(st) => st != SyncStatus::HostDirty,
                None => s.inner.has_device(),
            });
        }
        value.hasattr(pyo3::intern!(value.py(), "__cuda_array_interface__"))
    }
}

/// A buffer read as GDP-3 says a consumer reads one, its `acquire` called first: the device
/// entry when `on_device` and there is one, else the host entry (a NumPy array), else the
/// device entry (a CuPy array).
fn gt_ndarray<'py>(
    py: Python<'py>,
    mut gt: GtData,
    on_device: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let device = match (&gt.host, &gt.gpu) {
        (_, Some(_)) if on_device => GtDevice::Gpu,
        (Some(_), _) => GtDevice::Host,
        _ => GtDevice::Gpu,
    };
    gt.call(py, device, HookKind::Acquire)?;
    match (device, gt.host.take(), gt.gpu.take()) {
        (GtDevice::Host, Some(h), _) => numpy(py)?
            .getattr("asarray")?
            .call1((crate::new_host_view(py, h)?,)),
        (_, _, Some(g)) => cupy(py)?
            .getattr("asarray")?
            .call1((crate::new_cuda_view(py, g)?,)),
        _ => Err(PyValueError::new_err("the data describes no buffer")),
    }
}

/// An index key for NumPy (CuPy, `on_device`), with GDP-3's addition: wherever an array may
/// be, so may any object with a data interface, read as GDP-3 says a consumer reads one (see
/// [`read_through_gt`]) from the buffer on the indexed side, else the other. Everything else
/// passes as it is, for NumPy or CuPy to read or refuse.
fn gt_index_arrays<'py>(key: &Bound<'py, PyAny>, on_device: bool) -> PyResult<Bound<'py, PyAny>> {
    let py = key.py();
    // What passes as it is, checked cheapest first: item reads come this way.
    let plain = |k: &Bound<'py, PyAny>| -> PyResult<bool> {
        Ok(k.is_none()
            || k.is_instance_of::<PySlice>()
            || k.is_instance_of::<PyEllipsis>()
            || !read_through_gt(k)?)
    };
    let read = |k: Bound<'py, PyAny>| -> PyResult<Bound<'py, PyAny>> {
        if plain(&k)? {
            return Ok(k);
        }
        gt_ndarray(py, GtData::from_object(&k, &no_sync())?, on_device)
    };
    let Ok(t) = key.cast::<PyTuple>() else {
        return read(key.clone());
    };
    for k in t.iter_borrowed() {
        if !plain(&k)? {
            let items = t.iter().map(read).collect::<PyResult<Vec<_>>>()?;
            return Ok(PyTuple::new(py, items)?.into_any());
        }
    }
    Ok(key.clone())
}

/// Parses a basic index; `None` when the key needs NumPy (arrays, `None`, booleans...).
fn basic_index(key: &Bound<'_, PyAny>) -> PyResult<Option<Vec<IndexItem>>> {
    let one = |k: &Bound<'_, PyAny>| -> PyResult<Option<IndexItem>> {
        if k.is_instance_of::<PyEllipsis>() {
            return Ok(Some(IndexItem::Ellipsis));
        }
        if let Ok(s) = k.cast::<PySlice>() {
            let part = |name: &str| -> PyResult<Option<isize>> {
                let v = s.getattr(name)?;
                if v.is_none() {
                    return Ok(None);
                }
                // A bool is a slice index, as in Python and NumPy (`a[True:]`).
                if !args::scalar(&v) {
                    return Err(PyTypeError::new_err(format!(
                        "slice indices must be integers or None, not {}",
                        show(&v)
                    )));
                }
                match v.extract::<isize>() {
                    Ok(n) => Ok(Some(n)),
                    // Beyond the index range: Python clamps it (`slice.indices`), and so
                    // does NumPy; the slice then starts, stops or steps past every item.
                    Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => {
                        Ok(Some(if v.lt(0)? { isize::MIN } else { isize::MAX }))
                    }
                    Err(e) => Err(e),
                }
            };
            return Ok(Some(IndexItem::Slice {
                start: part("start")?,
                stop: part("stop")?,
                step: part("step")?,
            }));
        }
        if k.is_instance_of::<pyo3::types::PyBool>() {
            return Ok(None);
        }
        if is_int(k) {
            // PyO3 reads ints through `__index__`, so NumPy integers work too.
            return match k.extract() {
                Ok(i) => Ok(Some(IndexItem::Int(i))),
                Err(e) if e.is_instance_of::<PyOverflowError>(k.py()) => {
                    Err(PyIndexError::new_err(format!(
                        "index {k} is out of bounds: no axis is that long"
                    )))
                }
                Err(e) => Err(e),
            };
        }
        Ok(None)
    };
    match key.cast::<PyTuple>() {
        Ok(t) => {
            let mut out = Vec::with_capacity(t.len());
            for k in t.iter() {
                match one(&k)? {
                    Some(i) => out.push(i),
                    None => return Ok(None),
                }
            }
            Ok(Some(out))
        }
        Err(_) => Ok(one(key)?.map(|i| vec![i])),
    }
}

fn index_error(e: cai_runtime::storage::IndexError) -> PyErr {
    if e.is_index_error() {
        PyIndexError::new_err(e.to_string())
    } else {
        PyValueError::new_err(e.to_string())
    }
}

/// Why a device-only storage has no host interface (an `AttributeError`, so that NumPy goes
/// on to `__array__`).
const NO_HOST_BUFFER: &str =
    "this storage has no host buffer (device=\"gpu\", managed=None): use __cuda_array_interface__";

#[pymethods]
impl PyStorage {
    /// The NumPy array interface of the host buffer (read after copying newer device data).
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.interface(
            py,
            "__array_interface__",
            NO_HOST_BUFFER,
            MirrorOp::DeviceToHost(false),
            Storage::host_descriptor,
        )
    }

    /// NumPy's C-struct form of `__array_interface__` (a capsule), which NumPy reads first
    /// and faster (`array_struct.rs`); after copying newer device data, as the dict.
    #[getter]
    fn __array_struct__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let data = self
            .inner
            .host_ptr()
            .ok_or_else(|| PyAttributeError::new_err(NO_HOST_BUFFER))?;
        mirror(&self.inner, MirrorOp::DeviceToHost(false))?;
        ArrayStruct {
            shape: self.inner.shape(),
            strides: self.inner.strides(),
            data,
            readonly: self.inner.buffers().readonly,
            typestr: self.inner.element().typestr,
            descr: self.dtype.bind(py),
        }
        .into_capsule()
    }

    /// The CUDA Array Interface of the device buffer (read after copying newer host data).
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.interface(
            py,
            "__cuda_array_interface__",
            "this storage has no device buffer (it lives in host memory): use __array_interface__",
            MirrorOp::HostToDevice(false),
            Storage::device_descriptor,
        )
    }

    /// GDP-3's data interface: `{None: host entry, "gpu": device entry}`, each with `dims`,
    /// `halo`, `acquire` (device_to_host / host_to_device) and `touch` (set_host_modified /
    /// set_device_modified).
    #[getter]
    fn __gt_data_interface__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let py = slf.py();
        let this = slf.borrow();
        let host = this.inner.host_descriptor().transpose();
        let gpu = this.inner.device_descriptor().transpose();
        let export = |e| cpy::export::export_error(e, "__gt_data_interface__");
        let d = GtDataDescriptor::new(
            host.map_err(export)?,
            gpu.map_err(export)?,
            Some(dim_names(this.inner.dims())),
            Some(this.inner.halo().to_vec()),
        )
        .map_err(cpy::gt::gt_error)?;
        drop(this);
        cpy::gt::gt_dict(py, &d, |device, kind| {
            let name = match (device, kind) {
                (GtDevice::Host, HookKind::Acquire) => "device_to_host",
                (GtDevice::Gpu, HookKind::Acquire) => "host_to_device",
                (GtDevice::Host, HookKind::Touch) => "set_host_modified",
                (GtDevice::Gpu, HookKind::Touch) => "set_device_modified",
                (_, HookKind::Release) => return Ok(None),
            };
            slf.getattr(name).map(Some)
        })
    }

    /// A NumPy view of the host buffer, or a CuPy view of a device-only storage (GDP-3: the
    /// host's wherever there is one, unlike `to_ndarray`), with NumPy's `__array__` protocol:
    /// `dtype` converts (a view when it is the storage's own), `copy` None copies only to
    /// convert, True always, False never (ValueError when converting).
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        #[pyo3(from_py_with = args::arg::array_copy)] copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let view = Self::array_view(slf)?;
        let arr = match dtype {
            Some(d) => {
                let kwargs = PyDict::new(py);
                kwargs.set_item(pyo3::intern!(py, "copy"), false)?;
                view.call_method("astype", (dtype_arg(py, d)?,), Some(&kwargs))?
            }
            None => view.clone(),
        };
        let converted = !arr.is(&view);
        match copy {
            Some(false) if converted => Err(PyValueError::new_err(format!(
                "__array__(copy=False): unable to avoid a copy: the storage holds {} and dtype = {} \
                 needs a conversion",
                slf.borrow().dtype(py).numpy,
                arr.getattr("dtype")?
            ))),
            Some(true) if !converted => arr.call_method0("copy"),
            _ => Ok(arr),
        }
    }

    /// A NumPy view of the host buffer (after copying newer device data);
    /// `GTNoSuchBufferError` without one.
    fn to_numpy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if !slf.borrow().inner.has_host() {
            return Err(err(StorageError::NoSuchBuffer("host")));
        }
        numpy(slf.py())?.getattr("asarray")?.call1((slf,))
    }

    /// A CuPy view of the device buffer (after copying newer host data);
    /// `GTNoSuchBufferError` without one.
    fn to_cupy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if !slf.borrow().inner.has_device() {
            return Err(err(StorageError::NoSuchBuffer("device")));
        }
        cupy(slf.py())?.getattr("asarray")?.call1((slf,))
    }

    /// `to_cupy()` when there is a device buffer, else `to_numpy()`.
    fn to_ndarray<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if slf.borrow().inner.has_device() {
            Self::to_cupy(slf)
        } else {
            Self::to_numpy(slf)
        }
    }

    fn __getitem__<'py>(
        slf: &Bound<'py, Self>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        if let Some(items) = basic_index(key)? {
            let this = slf.borrow();
            match this.inner.select(&items).map_err(index_error)? {
                Selected::View(v) => return Ok(this.view(py, v)?.into_bound(py).into_any()),
                Selected::Item(_) => {}
            }
        }
        // Items, and indices NumPy handles (arrays, None, booleans): through the ndarray.
        let on_device = slf.borrow().inner.has_device();
        Self::to_ndarray(slf)?.get_item(gt_index_arrays(key, on_device)?)
    }

    fn __setitem__(
        slf: &Bound<'_, Self>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = slf.py();
        let (has_host, has_device) = {
            let s = &slf.borrow().inner;
            (s.has_host(), s.has_device())
        };
        if let Some(items) = basic_index(key)? {
            // Validate first, so a bad index raises IndexError as for a read.
            slf.borrow().inner.select(&items).map_err(index_error)?;
        }
        // GDP-3 ("Choosing the Device"): a value with a data interface (an xarray DataArray
        // through its data) is on the GPU if it has a "gpu" entry, and is read through the
        // interface, `acquire` first; a storage value is read as the storage it is.
        let gt_value = if read_through_gt(value)? {
            Some(GtData::from_object(value, &no_sync())?)
        } else {
            None
        };
        // (Asked only where it decides: a failed attribute lookup costs an exception.)
        let on_gpu = has_device
            && (!has_host
                || match &gt_value {
                    Some(gt) => gt.gpu.is_some(),
                    None => Self::value_on_gpu(value)?,
                });
        let key = gt_index_arrays(key, on_gpu)?;
        let value = match gt_value {
            Some(gt) => {
                let device_only = gt.host.is_none();
                let array = gt_ndarray(py, gt, on_gpu)?;
                if device_only && !on_gpu {
                    array.call_method0("get")?
                } else {
                    array
                }
            }
            None => value.clone(),
        };
        if on_gpu {
            let target = Self::to_cupy(slf)?;
            target.set_item(key, cupy(py)?.getattr("asarray")?.call1((value,))?)?;
            if let Some(state) = slf.borrow().inner.sync_state() {
                state.set_device_modified();
            }
        } else {
            let value = match value.cast::<PyStorage>() {
                Ok(s) => Self::host_items(s)?,
                _ => value,
            };
            Self::to_numpy(slf)?.set_item(key, value)?;
            if let Some(state) = slf.borrow().inner.sync_state() {
                state.set_host_modified();
            }
        }
        Ok(())
    }

    /// The truth value as NumPy (CuPy, for a device storage) gives it: the item's for a
    /// storage of one item, a ValueError for any other size. Without this, Python would ask
    /// `__len__`, and a storage holding a single 0.0 would be true.
    fn __bool__(slf: &Bound<'_, Self>) -> PyResult<bool> {
        Self::to_ndarray(slf)?.is_truthy()
    }

    fn __len__(&self) -> PyResult<usize> {
        self.inner
            .shape()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d storage"))
    }

    /// A new storage with the same parameters and a copy of the data (its own sync state).
    fn copy(&self, py: Python<'_>) -> PyResult<Py<PyStorage>> {
        mirror(&self.inner, MirrorOp::DeviceToHost(false))?;
        let c = copy_storage(&self.inner).map_err(err)?;
        self.view(py, c)
    }

    /// Pickling, as NumPy and CuPy pickle their arrays: by value. The items go as a NumPy
    /// array ([`Self::host_items`]) and come back through `storage(items, **parameters)`
    /// with this storage's parameters (layout, halo, dims, alignment, device, managed), so
    /// the copy has the same type and geometry in a buffer of its own.
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py>> {
        let py = slf.py();
        let parameters = PyDict::new(py);
        for name in [
            "layout",
            "halo",
            "dims",
            "alignment_size",
            "aligned_index",
            "defaults",
            "device",
            "managed",
        ] {
            parameters.set_item(name, slf.getattr(name)?)?;
        }
        let rebuild = REBUILD_STORAGE
            .get(py)
            .ok_or_else(|| PyTypeError::new_err("cannot pickle a storage: cai is not initialized"))?
            .bind(py)
            .clone();
        Ok((rebuild, (Self::host_items(slf)?, parameters)))
    }

    fn __copy__(&self, py: Python<'_>) -> PyResult<Py<PyStorage>> {
        self.copy(py)
    }

    #[pyo3(signature = (memo = None))]
    fn __deepcopy__(
        &self,
        py: Python<'_>,
        memo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyStorage>> {
        let _ = memo;
        self.copy(py)
    }

    /// A view with the dimensions permuted: `transpose()`, `transpose(1, 0, 2)` or
    /// `transpose((1, 0, 2))` (reversed when no axes are given).
    #[pyo3(signature = (*axes))]
    fn transpose(&self, py: Python<'_>, axes: &Bound<'_, PyTuple>) -> PyResult<Py<PyStorage>> {
        let axes: Option<PerDim<usize>> = match axes.len() {
            0 => None,
            1 if axes.get_item(0)?.is_none() => None,
            1 if axes.get_item(0)?.try_iter().is_ok() => Some(sizes("axes", &axes.get_item(0)?)?),
            _ => Some(sizes("axes", axes.as_any())?),
        };
        let t = self.inner.transpose(axes.as_deref()).map_err(index_error)?;
        self.view(py, t)
    }

    /// `transpose()`.
    #[getter(T)]
    fn t(&self, py: Python<'_>) -> PyResult<Py<PyStorage>> {
        let t = self.inner.transpose(None).map_err(index_error)?;
        self.view(py, t)
    }

    /// A view of the domain: the halo removed, `[0, ..., 0]` its first point.
    #[getter]
    fn domain_view(&self, py: Python<'_>) -> PyResult<Py<PyStorage>> {
        self.view(py, self.inner.domain_view())
    }

    /// The shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.shape())
    }

    /// Byte strides.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.strides())
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.inner.shape().len()
    }

    /// Number of items.
    #[getter]
    fn size(&self) -> usize {
        self.inner.shape().iter().product()
    }

    /// Bytes of the items (padding excluded).
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.nbytes()
    }

    /// Bytes per item.
    #[getter]
    fn itemsize(&self) -> usize {
        self.inner.element().itemsize()
    }

    /// The NumPy dtype.
    #[getter(dtype)]
    fn get_dtype(&self, py: Python<'_>) -> Py<PyAny> {
        self.dtype.clone_ref(py)
    }

    /// (start, end) halo per dimension.
    #[getter]
    fn halo<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.halo())
    }

    /// Sets the halo (ints or (start, end) pairs); the aligned point does not move.
    #[setter]
    fn set_halo(&mut self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let halo = args::halo(value)?;
        self.inner.set_halo(halo).map_err(err)
    }

    /// The semantic dims.
    #[getter]
    fn dims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, dim_names(self.inner.dims()))
    }

    /// The stride order (0: largest stride).
    #[getter]
    fn layout<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.layout_order())
    }

    /// The alignment the buffer was allocated with, in bytes.
    #[getter]
    fn alignment_size(&self) -> usize {
        self.inner.info().alignment_size
    }

    /// The aligned index (None for views).
    #[getter]
    fn aligned_index<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.inner
            .info()
            .aligned_index
            .as_ref()
            .map(|a| PyTuple::new(py, a))
            .transpose()
    }

    /// The `defaults` preset used, if any.
    #[getter]
    fn defaults(&self) -> Option<&'static str> {
        self.inner.info().defaults.map(Preset::name)
    }

    /// `"gpu"` when the storage has a device buffer, else None.
    #[getter]
    fn device(&self) -> Option<&'static str> {
        self.inner.has_device().then_some("gpu")
    }

    /// None, "gt4py" or "cuda".
    #[getter]
    fn managed(&self) -> Option<&'static str> {
        match self.inner.buffers().managed {
            Managed::None => None,
            Managed::Gt4Py => Some("gt4py"),
            Managed::Cuda => Some("cuda"),
        }
    }

    /// The host buffer as a memoryview (None without one).
    #[getter]
    fn data<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if !slf.borrow().inner.has_host() {
            return Ok(None);
        }
        Self::to_numpy(slf)?.getattr("data").map(Some)
    }

    /// The device buffer: CuPy's `MemoryPointer` when CuPy is installed, else the address.
    #[getter]
    fn device_data<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = slf.py();
        let Some(ptr) = slf.borrow().inner.device_ptr() else {
            return Ok(None);
        };
        match py.import("cupy") {
            Ok(_) => Self::to_cupy(slf)?.getattr("data").map(Some),
            Err(_) => Ok(Some(ptr.into_pyobject(py)?.into_any())),
        }
    }

    /// The shared SyncState (mirrored storages), else None.
    #[getter]
    fn sync_state(&self) -> Option<PySyncState> {
        self.inner.sync_state().map(|s| PySyncState(s.clone()))
    }

    /// Copies device to host if the device was modified (or `force`); no action unless
    /// mirrored.
    #[pyo3(signature = (*, force = false))]
    fn device_to_host(&self, #[pyo3(from_py_with = args::arg::force)] force: bool) -> PyResult<()> {
        mirror(&self.inner, MirrorOp::DeviceToHost(force)).map(drop)
    }

    /// Copies host to device if the host was modified (or `force`); no action unless mirrored.
    #[pyo3(signature = (*, force = false))]
    fn host_to_device(&self, #[pyo3(from_py_with = args::arg::force)] force: bool) -> PyResult<()> {
        mirror(&self.inner, MirrorOp::HostToDevice(force)).map(drop)
    }

    /// Copies whichever side was modified to the other.
    fn synchronize(&self) -> PyResult<()> {
        mirror(&self.inner, MirrorOp::Synchronize).map(drop)
    }

    /// Marks the host buffer modified: the next device read copies it first.
    fn set_host_modified(&self) {
        if let Some(s) = self.inner.sync_state() {
            s.set_host_modified();
        }
    }

    /// Marks the device buffer modified: the next host read copies it first.
    fn set_device_modified(&self) {
        if let Some(s) = self.inner.sync_state() {
            s.set_device_modified();
        }
    }

    /// Marks both buffers equal (after a manual synchronization).
    fn set_synchronized(&self) {
        if let Some(s) = self.inner.sync_state() {
            s.set_synchronized();
        }
    }

    /// `CPUStorage(shape=(2, 3), dtype=float64, ...)`: the class says where the buffers are.
    fn __repr__(slf: &Bound<'_, Self>) -> String {
        let this = slf.borrow();
        let dtype = this
            .dtype
            .bind(slf.py())
            .str()
            .map(|s| s.to_string())
            .unwrap_or_default();
        let class = slf
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "Storage".into());
        // The attributes as Python shows them, whole (`show` would cut them for a message).
        let py = slf.py();
        let tuple = |t: PyResult<Bound<'_, PyTuple>>| {
            t.and_then(|t| t.as_any().repr().map(|r| r.to_string()))
                .unwrap_or_else(|_| "?".into())
        };
        format!(
            "{class}(shape={}, dtype={dtype}, halo={}, dims={}, layout={})",
            tuple(this.shape(py)),
            tuple(this.halo(py)),
            tuple(this.dims(py)),
            tuple(this.layout(py)),
        )
    }
}

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
    let resolved = explicit.resolve(shape, data);
    let params = resolved.as_ref().map_err(|e| err(e.clone()))?;
    let allocated = match params.device {
        StorageDevice::Host => Storage::allocate_host(shape, dtype.element.clone(), params, init),
        StorageDevice::Gpu => allocate_gpu(shape, dtype.element.clone(), params, init),
    };
    match allocated {
        Ok(inner) => PyStorage::new_py(py, inner, dtype),
        Err(e) => Err(err(e)),
    }
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

fn one(py: Python<'_>, dtype: &Dtype) -> PyResult<Vec<u8>> {
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

/// The creators: name (for messages, and for the function object), from a template or a
/// shape, fill, docstring (with the text signature Python's `inspect` reads).
#[allow(clippy::type_complexity)]
const CREATORS: [(&str, &CStr, bool, Fill, &CStr); 8] = [
    (
        "empty",
        c"empty",
        false,
        Fill::Empty,
        c"empty(shape, dtype=None, **kwargs)\n--\n\nAllocate a storage with undefined values (GDP-3 `empty`).",
    ),
    (
        "zeros",
        c"zeros",
        false,
        Fill::Zeros,
        c"zeros(shape, dtype=None, **kwargs)\n--\n\nAllocate a storage of zeros (GDP-3 `zeros`).",
    ),
    (
        "ones",
        c"ones",
        false,
        Fill::Ones,
        c"ones(shape, dtype=None, **kwargs)\n--\n\nAllocate a storage of ones (GDP-3 `ones`).",
    ),
    (
        "full",
        c"full",
        false,
        Fill::Full,
        c"full(shape, fill_value, dtype=None, **kwargs)\n--\n\nAllocate a storage with every item `fill_value` (GDP-3 `full`).",
    ),
    (
        "empty_like",
        c"empty_like",
        true,
        Fill::Empty,
        c"empty_like(data, dtype=None, **kwargs)\n--\n\n`empty` with the shape, dtype and parameters of `data`.",
    ),
    (
        "zeros_like",
        c"zeros_like",
        true,
        Fill::Zeros,
        c"zeros_like(data, dtype=None, **kwargs)\n--\n\n`zeros` with the shape, dtype and parameters of `data`.",
    ),
    (
        "ones_like",
        c"ones_like",
        true,
        Fill::Ones,
        c"ones_like(data, dtype=None, **kwargs)\n--\n\n`ones` with the shape, dtype and parameters of `data`.",
    ),
    (
        "full_like",
        c"full_like",
        true,
        Fill::Full,
        c"full_like(data, fill_value, dtype=None, **kwargs)\n--\n\n`full` with the shape, dtype and parameters of `data`.",
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
        return Ok((s.inner.shape().to_vec(), s.dtype(py), s.inner.data_params()));
    }
    let gt = GtData::from_object(data, &no_sync())?;
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
        dims: gt
            .dims
            .as_deref()
            .map(parse_dims)
            .transpose()
            .map_err(err)?,
        halo: gt.halo.as_deref().map(PerDim::from),
        layout: Some(stride_order(&strides)),
        device: Some(if gt.host.is_some() {
            StorageDevice::Host
        } else {
            StorageDevice::Gpu
        }),
        ..Default::default()
    };
    Ok((shape, dtype, params))
}

/// The argument `sync_state`: None, or a `SyncState` the wrapped buffers will share.
fn sync_state_arg(v: &Bound<'_, PyAny>) -> PyResult<Option<SyncState>> {
    if v.is_none() {
        return Ok(None);
    }
    v.cast::<PySyncState>()
        .map(|s| Some(s.get().0.clone()))
        .map_err(|_| {
            PyTypeError::new_err(format!(
                "sync_state = {}: expected a cai.SyncState or None",
                show(v)
            ))
        })
}

/// Import options for wrapping: the producer's stream is waited for (as any import).
fn no_sync() -> ImportOptions {
    ImportOptions::default()
}

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
    wrap(py, "as_storage", data, device_data, sync_state, &p)
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

/// What `device_data` must be.
const NO_DEVICE_BUFFER: &str =
    "device_data describes no device buffer (no \"gpu\" entry or __cuda_array_interface__)";

/// `as_storage`, or `storage(copy=False)` (`function`, named in errors).
fn wrap(
    py: Python<'_>,
    function: &str,
    data: Option<&Bound<'_, PyAny>>,
    device_data: Option<&Bound<'_, PyAny>>,
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
    let options = no_sync();
    let mut from = data
        .map(|d| GtData::from_object(d, &options).map_err(|e| not_wrappable(function, d, e)))
        .transpose()?;
    // Bytes shared through the buffer protocol stay put only while their buffers are held:
    // the storage holds them from here on, with the data object.
    let held = from
        .as_mut()
        .and_then(|g| g.host.as_mut())
        .map(|h| h.take_buffers())
        .unwrap_or_default();
    let from_dev = device_data
        .map(|d| GtData::from_object(d, &options))
        .transpose()?;
    let host = from.as_ref().and_then(|g| g.host.as_ref());
    let gpu = from_dev
        .as_ref()
        .and_then(|g| g.gpu.as_ref())
        .or_else(|| from.as_ref().and_then(|g| g.gpu.as_ref()));
    if device_data.is_some() && from_dev.as_ref().is_some_and(|g| g.gpu.is_none()) {
        return Err(PyValueError::new_err(NO_DEVICE_BUFFER));
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
    let dtype = data_dtype(py, source, &typestr, descr.as_ref())?;
    let shape = layout.shape().to_vec();
    let meta = from.as_ref().or(from_dev.as_ref()).expect("one given");
    // Lookup order: explicit, then the preset, then the data, then the fallback.
    let data_params = StorageParams {
        dims: meta
            .dims
            .as_deref()
            .map(parse_dims)
            .transpose()
            .map_err(err)?,
        halo: meta.halo.as_deref().map(PerDim::from),
        // A storage knows the order its strides do not tell (where they tie).
        layout: Some(match source.cast::<PyStorage>() {
            Ok(s) => s.borrow().inner.layout_order(),
            Err(_) => stride_order(layout.strides()),
        }),
        ..Default::default()
    };
    let resolved = p.clone().resolve(&shape, &data_params).map_err(err)?;
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
    )
    .map_err(err)?;
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
                        Box::new((data.expect("host data").clone().unbind(), held)),
                    )
                },
                None => HostBuffer::zeroed(0).map_err(|e| err(e.into()))?,
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
                keep: Box::new(owner),
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
    )
    .map_err(err)?
    .with_info(AllocInfo {
        alignment_size: resolved.alignment_size,
        aligned_index: Some(resolved.aligned_index),
        defaults: resolved.defaults,
    });
    PyStorage::new_py(py, inner, &dtype)
}

/// `v`, or `numpy.asarray(v)` where it has no data interface (a plain list...). An xarray
/// `DataArray` is kept, to be read with its dims as GDP-3 says.
fn readable<'py>(py: Python<'py>, v: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    if v.is_instance_of::<PyStorage>()
        || GtData::speaks_gt(v)?
        || v.hasattr("__array_interface__")?
        || v.hasattr("__cuda_array_interface__")?
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

/// A storage initialized with a copy of `data` (or `device_data`) (GDP-3 `storage`);
/// `copy=False` wraps them as `as_storage` does.
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
        if dtype.is_some() {
            return Err(PyValueError::new_err(
                "storage(copy=False) wraps the buffer as it is: dtype cannot be changed without a copy",
            ));
        }
        return wrap(py, "storage", data, device_data, sync_state, &p);
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
    target.set_item(PyEllipsis::get(py), source)?;
    Ok(out)
}

/// What `Storage.__reduce__` gives pickle: the function that remakes a storage and its
/// arguments (the items, the parameters).
type Reduced<'py> = (Bound<'py, PyAny>, (Bound<'py, PyAny>, Bound<'py, PyDict>));

/// `_rebuild_storage` as the module holds it (what pickle finds again by its module and
/// name).
static REBUILD_STORAGE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Unpickles a storage (`Storage.__reduce__`): `storage(items, **parameters)`.
#[pyfunction(name = "_rebuild_storage")]
fn rebuild_storage(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    parameters: &Bound<'_, PyDict>,
) -> PyResult<Py<PyStorage>> {
    storage(py, Some(items), None, None, true, None, Some(parameters))
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
    for ((name, c_name, _, _, doc), entry) in CREATORS.into_iter().zip(CREATOR_ENTRIES) {
        m.add(name, fastcall::function(m, c_name, doc, entry)?)?;
    }
    m.add_function(wrap_pyfunction!(as_storage, m)?)?;
    m.add_function(wrap_pyfunction!(storage, m)?)?;
    let rebuild = wrap_pyfunction!(rebuild_storage, m)?;
    m.add_function(rebuild.clone())?;
    let _ = REBUILD_STORAGE.set(m.py(), rebuild.into_any().unbind());
    Ok(())
}
