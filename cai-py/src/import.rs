//! Importing foreign arrays: `from_cuda_array_interface`, `as_cuda_array`,
//! `from_array_interface` and `as_host_array` make `CudaArrayView` / `HostArrayView` objects (a
//! validated descriptor holding its owner).

use crate::args::{self, arg};
use crate::cuda;
use cai_runtime::python::{self as cpy, AnyBitPattern, ForeignArray};
use cai_runtime::{DescriptorError, Device, Element, Host, Stream, TypeStr};
use pyo3::exceptions::{PyIndexError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

// What an [`ArrayView`] holds: one imported array of either side.
use cpy::AnyForeignArray as Imported;

/// An imported array: a validated descriptor and a strong reference to its owner. Base class
/// of `CudaArrayView` and `HostArrayView`.
// `sequence`: `len()` fills the C sequence slot, which the C API's sequence functions read.
#[pyclass(module = "cai", frozen, subclass, sequence)]
pub struct ArrayView(Imported, cpy::DlpackCache);

impl ArrayView {
    fn descr(&self) -> Option<&cai_runtime::Descr> {
        match &self.0 {
            Imported::Device(a) => a.descr(),
            Imported::Host(a) => a.descr(),
        }
    }

    /// The layout, type string and data, read without the whole descriptor (which a DLPack
    /// import makes only when asked).
    fn descriptor_parts(&self) -> (&cai_runtime::Layout, &TypeStr, cai_runtime::Data) {
        fn parts<S: cai_runtime::Space>(
            a: &ForeignArray<S>,
        ) -> (&cai_runtime::Layout, &TypeStr, cai_runtime::Data) {
            let data = cai_runtime::Data {
                ptr: a.ptr(),
                readonly: a.readonly(),
            };
            (a.layout(), a.typestr(), data)
        }
        match &self.0 {
            Imported::Device(a) => parts(a),
            Imported::Host(a) => parts(a),
        }
    }
}

/// The import's one side. Its descriptor is vouched for: the producer answers for its memory
/// and stream (the protocols' trust), kept alive by this view (owner, dicts, buffers, tensors),
/// which every export keeps.
impl cpy::Exporter for ArrayView {
    fn device(&self) -> Option<Result<cpy::Export<'_, Device>, DescriptorError>> {
        self.0.device()
    }
    fn host(&self) -> Option<Result<cpy::Export<'_, Host>, DescriptorError>> {
        self.0.host()
    }
    fn dlpack_side(&self, wants: Option<cpy::DlpackDevice>) -> cpy::Side {
        self.0.dlpack_side(wants)
    }
    fn absent(&self, side: cpy::Side) -> String {
        match side {
            cpy::Side::Device => "a HostArrayView has no device memory: use __array_interface__",
            cpy::Side::Host => "a CudaArrayView has no host memory: use __cuda_array_interface__",
        }
        .into()
    }
    /// Structured items: the view's `dtype` (its owner's, where that describes the same items:
    /// a dict's `descr` cannot say every field's type, a float8's, say, nor NumPy's titles and
    /// alignment as the owner has them).
    fn numpy_dtype<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let typestr = self.descriptor_parts().1;
        if cai_runtime::__private::items_descr(typestr, self.descr()).is_some() {
            return self.dtype(py).map(Some);
        }
        Ok(None)
    }
    /// An import's descriptor is fixed when it is made.
    fn dlpack_cache(&self) -> Option<&cpy::DlpackCache> {
        Some(&self.1)
    }
    fn lends() -> bool {
        true
    }
}

/// The protocols (the generated methods: `__cuda_array_interface__` of a `CudaArrayView`,
/// `__array_interface__` and `__array_struct__` of a `HostArrayView`, DLPack of both), each
/// re-exporting the imported descriptor; a mask's holder keeps the view.
#[cai_runtime::pymethods(cuda, host, exporter)]
impl ArrayView {
    /// The garbage collector's traversal: what the import holds (its owner, dicts), so that
    /// a cycle through the view (an owner keeping its own view) is collected.
    fn __traverse__(&self, visit: pyo3::PyVisit<'_>) -> Result<(), pyo3::PyTraverseError> {
        match &self.0 {
            Imported::Device(a) => a.traverse(&visit),
            Imported::Host(a) => a.traverse(&visit),
        }
    }
    /// Size of each dimension.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.descriptor_parts().0.shape())
    }
    /// Byte strides in effect (C order computed when the descriptor said None).
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.descriptor_parts().0.strides())
    }
    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.descriptor_parts().0.ndim()
    }
    /// Number of items.
    #[getter]
    fn size(&self) -> usize {
        self.descriptor_parts().0.size()
    }
    /// Bytes per item.
    #[getter]
    fn itemsize(&self) -> usize {
        self.descriptor_parts().0.itemsize()
    }
    /// The items' NumPy dtype (the owner's own where it has one describing the same items;
    /// structured types included).
    #[getter]
    fn dtype<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let owner = self.owner(py);
        crate::storage::numpy_dtype(py, owner.as_ref(), self.descriptor_parts().1, self.descr())
    }
    /// The first dimension's size, as NumPy's `len()`; a TypeError for a 0-d view.
    fn __len__(&self) -> PyResult<usize> {
        self.descriptor_parts()
            .0
            .shape()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of unsized object (a 0-d view)"))
    }
    /// The type string as received.
    #[getter]
    fn typestr(&self) -> String {
        self.descriptor_parts().1.to_string()
    }
    /// The data pointer.
    #[getter]
    fn ptr(&self) -> u64 {
        self.descriptor_parts().2.ptr
    }
    /// Whether the producer declared the data read-only.
    #[getter]
    fn readonly(&self) -> bool {
        self.descriptor_parts().2.readonly
    }
    /// The declared version.
    #[getter]
    fn version(&self) -> u32 {
        match &self.0 {
            Imported::Device(a) => a.descriptor().version,
            Imported::Host(a) => a.descriptor().version,
        }
    }
    /// Bytes of the items.
    #[getter]
    fn nbytes(&self) -> usize {
        self.descriptor_parts().0.nbytes()
    }
    /// The object kept alive for the memory (None if none was given).
    #[getter]
    fn owner<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyAny>> {
        match &self.0 {
            Imported::Device(a) => a.owner(py),
            Imported::Host(a) => a.owner(py),
        }
    }
    /// The mask's descriptor as a dict, or None (its own masks' holders keep the view alive).
    #[getter]
    fn mask<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let (py, keep) = (slf.py(), Some(slf.as_any()));
        match &slf.get().0 {
            Imported::Device(a) => a
                .descriptor()
                .mask
                .as_deref()
                .map(|m| cai_runtime::__private::to_dict_kept(py, m, keep))
                .transpose(),
            Imported::Host(a) => a
                .descriptor()
                .mask
                .as_deref()
                .map(|m| cai_runtime::__private::to_dict_kept(py, m, keep))
                .transpose(),
        }
    }
    fn __repr__(&self) -> String {
        let (layout, typestr, data) = self.descriptor_parts();
        let kind = match self.0 {
            Imported::Device(_) => "CudaArrayView",
            Imported::Host(_) => "HostArrayView",
        };
        let ro = if data.readonly { "True" } else { "False" };
        let dims: Vec<String> = layout.shape().iter().map(ToString::to_string).collect();
        let comma = if dims.len() == 1 { "," } else { "" };
        format!(
            "{kind}(shape=({}{comma}), typestr='{typestr}', ptr={:#x}, readonly={ro})",
            dims.join(", "),
            data.ptr
        )
    }
}

/// An imported `__cuda_array_interface__`.
#[pyclass(module = "cai", frozen, extends = ArrayView)]
pub struct CudaArrayView;

/// An imported `__array_interface__`.
#[pyclass(module = "cai", frozen, extends = ArrayView)]
pub struct HostArrayView;

/// A view's import, whose class was made with it: a TypeError where Python code swapped
/// `__class__` between the two view classes (their layouts are the same).
pub(crate) fn cuda_of<'a>(slf: &'a Bound<'_, CudaArrayView>) -> PyResult<&'a ForeignArray<Device>> {
    match &slf.as_super().get().0 {
        Imported::Device(a) => Ok(a),
        Imported::Host(_) => Err(swapped("CudaArrayView", "host")),
    }
}

fn host_of<'a>(slf: &'a Bound<'_, HostArrayView>) -> PyResult<&'a ForeignArray<Host>> {
    match &slf.as_super().get().0 {
        Imported::Host(a) => Ok(a),
        Imported::Device(_) => Err(swapped("HostArrayView", "device")),
    }
}

fn swapped(class: &str, held: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "this {class} holds an import of {held} memory: its __class__ was changed"
    ))
}

pub(crate) fn new_cuda_view(
    py: Python<'_>,
    a: ForeignArray<Device>,
) -> PyResult<Py<CudaArrayView>> {
    Py::new(
        py,
        PyClassInitializer::from(ArrayView(Imported::Device(a), Default::default()))
            .add_subclass(CudaArrayView),
    )
}

pub(crate) fn new_host_view(py: Python<'_>, a: ForeignArray<Host>) -> PyResult<Py<HostArrayView>> {
    Py::new(
        py,
        PyClassInitializer::from(ArrayView(Imported::Host(a), Default::default()))
            .add_subclass(HostArrayView),
    )
}

#[pymethods]
impl CudaArrayView {
    /// The producer's stream (None: no synchronization needed).
    #[getter]
    fn stream(slf: &Bound<'_, Self>) -> PyResult<Option<u64>> {
        Ok(cuda_of(slf)?.stream().map(Stream::as_raw))
    }
    /// Whether the import called for synchronization with the producer's stream.
    #[getter]
    fn needs_sync(slf: &Bound<'_, Self>) -> PyResult<bool> {
        Ok(cuda_of(slf)?.needs_sync())
    }
    /// What the import decided about the producer's stream: `"event-wait"`, `"synchronize"`,
    /// or `"none: <why>"` (no stream, sync=False, streams ignored, same stream).
    #[getter]
    fn sync_plan(slf: &Bound<'_, Self>) -> PyResult<String> {
        Ok(cuda::plan_name(cuda_of(slf)?.sync_plan()))
    }
    /// The consumer stream the import ordered the data for.
    #[getter]
    fn consumer_stream(slf: &Bound<'_, Self>) -> PyResult<u64> {
        Ok(cuda_of(slf)?.options().consumer.stream().as_raw())
    }
    /// What the CUDA driver said about `data` (a dict), or None (no check made).
    #[getter]
    fn pointer_attributes<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyDict>>> {
        cuda_of(slf)?
            .pointer_attributes()
            .map(|a| cuda::attributes_dict(slf.py(), a))
            .transpose()
    }
    /// The device the data is on (its pointer attributes' ordinal), or None where the import
    /// made no pointer check (`check_pointer=False`).
    #[getter]
    fn device_id(slf: &Bound<'_, Self>) -> PyResult<Option<u32>> {
        Ok(cuda_of(slf)?
            .pointer_attributes()
            .and_then(|a| a.device_ordinal))
    }
    /// The items' bytes in C order, copied from the device on the consumer stream.
    fn copy_to_host<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyBytes>> {
        cuda::copy_view_to_host(slf.py(), cuda_of(slf)?)
    }
    /// Says the consumer's work on the data is enqueued on the consumer stream: the
    /// producer's stream waits for it (an event wait; the host is not blocked), so that work
    /// the producer enqueues later cannot overtake it, as the spec asks of a consumer. Call it
    /// after the last work on the data (again after more); `with` calls it on leaving the
    /// block. Returns `"event-wait"`, or the import's `"none: <why>"` where the import ordered
    /// nothing (then neither does this).
    fn release(slf: &Bound<'_, Self>) -> PyResult<String> {
        cuda::release_view(cuda_of(slf)?)
    }
    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }
    /// `release()`, however the block is left.
    fn __exit__(
        slf: &Bound<'_, Self>,
        _exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        Self::release(slf)?;
        Ok(false)
    }
}

/// `$then!(T)` for the native-order integer, float or complex type `T` whose type string is
/// `$t`'s, where there is one (never bool, not every bit pattern of which is one, nor opaque
/// bytes): the element types `get`, `set` and `_as_array_items` read and write.
macro_rules! with_number_type {
    ($t:expr, $then:ident) => {{
        macro_rules! number_arm {
            (Bool, $ty:ty) => {};
            (Void, $ty:ty, $ext:ident) => {};
            ($kind:ident, $ty:ty) => {
                if <$ty as Element>::DTYPE.typestr().same_type(&$t) {
                    $then!($ty);
                }
            };
        }
        cai_runtime::for_each_element!(number_arm);
    }};
}

fn read_item<'py, T>(
    py: Python<'py>,
    a: &ForeignArray<Host>,
    index: &[usize],
) -> PyResult<Bound<'py, PyAny>>
where
    T: Element + AnyBitPattern + args::ItemValue,
{
    let v = a.typed::<T>()?.get(index).ok_or_else(|| {
        PyIndexError::new_err(format!(
            "index {index:?} is out of bounds for shape {:?}",
            a.layout().shape()
        ))
    })?;
    v.to_py(py)
}

#[pymethods]
impl HostArrayView {
    /// The items' bytes in C order (a copy), read through the imported descriptor;
    /// MemoryError when they do not fit in memory.
    fn tobytes<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(slf.py(), &host_of(slf)?.to_bytes()?))
    }

    /// `view[key]` as NumPy indexes the imported array (zero-copy: a NumPy view keeping this
    /// one alive, read-only where the data is), so that libraries that slice what they are
    /// given (`dask.array.from_array`) read views too.
    fn __getitem__<'py>(
        slf: &Bound<'py, Self>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import(pyo3::intern!(py, "numpy"))?
            .call_method1(pyo3::intern!(py, "asarray"), (slf,))?
            .get_item(key)
    }

    /// Iterates over the first dimension as NumPy does (a TypeError for a 0-d view).
    fn __iter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        py.import(pyo3::intern!(py, "numpy"))?
            .call_method1(pyo3::intern!(py, "asarray"), (slf,))?
            .try_iter()
            .map(Bound::into_any)
    }

    /// Item `index`, read through a typed view (integer, float and complex types) as a Python
    /// `int`, `float` or `complex`.
    fn get<'py>(
        slf: &Bound<'py, Self>,
        #[pyo3(from_py_with = arg::index)] index: Vec<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (py, a) = (slf.py(), host_of(slf)?);
        let t = *a.typestr();
        macro_rules! read_as {
            ($ty:ty) => {
                return read_item::<$ty>(py, a, &index)
            };
        }
        with_number_type!(t, read_as);
        Err(PyTypeError::new_err(format!(
            "get() reads native-order integer, float and complex items; typestr is '{t}'"
        )))
    }

    /// Writes item `index` through a mutable typed view (integer, float and complex items);
    /// read-only data is refused with ValueError.
    fn set(
        slf: &Bound<'_, Self>,
        #[pyo3(from_py_with = arg::index)] index: Vec<usize>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let a = host_of(slf)?;
        // A mutable view needs an owned import: import the same descriptor again, with the
        // same owner kept alive.
        let desc = cpy::to_dict(slf.py(), a.descriptor())?;
        let owner = a.owner(slf.py());
        // SAFETY: `desc` is the descriptor this view imported, of memory the view keeps alive
        // (its owner, dicts, masks, buffers) while `fresh`, a temporary, is used.
        let mut fresh =
            unsafe { ForeignArray::<Host>::from_interface(&desc, owner.as_ref(), false)? };
        let t = *fresh.typestr();
        let shape = fresh.layout().shape().to_vec();
        macro_rules! write_as {
            ($ty:ty) => {{
                let v = <$ty as args::ItemValue>::read("value", value)?;
                return if fresh.typed_mut::<$ty>()?.set(&index, v) {
                    Ok(())
                } else {
                    Err(PyIndexError::new_err(format!(
                        "index {index:?} is out of bounds for shape {shape:?}"
                    )))
                };
            }};
        }
        with_number_type!(t, write_as);
        Err(PyTypeError::new_err(format!(
            "set() writes native-order integer, float and complex items; typestr is '{t}'"
        )))
    }
}

/// Imports a `__cuda_array_interface__` dict `desc` (the spec's `from_cuda_array_interface`):
/// a `CudaArrayView` that keeps `owner` (the object the memory belongs to, if given) and what
/// `desc` holds alive. The caller answers for the address, as a producer does.
#[doc = import_keywords!()]
#[pyfunction]
#[pyo3(signature = (desc, owner = None, sync = true, *, stream = None, mode = "enqueue", check_pointer = true))]
fn from_cuda_array_interface(
    desc: &Bound<'_, PyAny>,
    owner: Option<&Bound<'_, PyAny>>,
    #[pyo3(from_py_with = arg::sync)] sync: bool,
    stream: Option<&Bound<'_, PyAny>>,
    #[pyo3(from_py_with = arg::mode)] mode: &str,
    #[pyo3(from_py_with = arg::check_pointer)] check_pointer: bool,
) -> PyResult<Py<CudaArrayView>> {
    let options = cuda::import_options(sync, stream, mode, check_pointer)?;
    // SAFETY: the Python caller handing over a descriptor dict is its producer and answers for
    // it, as the spec's `from_cuda_array_interface` and NumPy trust a producer's dict; the view
    // keeps `desc` and `owner` alive.
    let view = unsafe { ForeignArray::from_interface_with(desc, owner, &options)? };
    new_cuda_view(desc.py(), view)
}

/// Imports an object exposing `__cuda_array_interface__` (the spec's `as_cuda_array`): a
/// `CudaArrayView` that keeps `obj` alive.
#[doc = import_keywords!()]
#[pyfunction]
#[pyo3(signature = (obj, sync = true, *, stream = None, mode = "enqueue", check_pointer = true))]
fn as_cuda_array(
    obj: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = arg::sync)] sync: bool,
    stream: Option<&Bound<'_, PyAny>>,
    #[pyo3(from_py_with = arg::mode)] mode: &str,
    #[pyo3(from_py_with = arg::check_pointer)] check_pointer: bool,
) -> PyResult<Py<CudaArrayView>> {
    let options = cuda::import_options(sync, stream, mode, check_pointer)?;
    new_cuda_view(obj.py(), ForeignArray::from_object_with(obj, &options)?)
}

/// Imports an `__array_interface__` dict `desc`: a `HostArrayView` that keeps `owner` (the
/// object the memory belongs to, if given; a `desc` without `data` reads its buffer) and what
/// `desc` holds alive. The caller answers for the address, as a producer does.
#[pyfunction]
#[pyo3(signature = (desc, owner = None))]
fn from_array_interface(
    desc: &Bound<'_, PyAny>,
    owner: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<HostArrayView>> {
    // SAFETY: as in `from_cuda_array_interface`.
    let view = unsafe { ForeignArray::from_interface(desc, owner, false)? };
    new_host_view(desc.py(), view)
}

/// Imports an object exposing `__array_interface__` (`obj`): a `HostArrayView` that keeps it
/// alive.
#[pyfunction]
fn as_host_array(obj: &Bound<'_, PyAny>) -> PyResult<Py<HostArrayView>> {
    new_host_view(obj.py(), ForeignArray::from_object(obj, false)?)
}

/// Imports any object with `__dlpack__` (NumPy, PyTorch, CuPy, JAX, a cai array...): a
/// `CudaArrayView` for CUDA memory (kDLCUDA, managed, registered host memory; the producer
/// makes `stream` wait for its work, or nothing is ordered with `sync=False`), a
/// `HostArrayView` for host memory. `copy` is passed to the producer (True: it copies; False:
/// it must not). `check_pointer` (default True): ask the driver whether the tensor's memory is
/// where it says and stays inside its allocation.
#[pyfunction]
#[pyo3(signature = (obj, *, stream = None, copy = None, sync = true, check_pointer = true))]
fn from_dlpack<'py>(
    obj: &Bound<'py, PyAny>,
    stream: Option<&Bound<'py, PyAny>>,
    copy: Option<&Bound<'py, PyAny>>,
    #[pyo3(from_py_with = arg::sync)] sync: bool,
    #[pyo3(from_py_with = arg::check_pointer)] check_pointer: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    // (`copy` read as `__dlpack__` reads it: None, True or False, a TypeError naming it else.)
    let copy = cpy::DlpackRequest::from_args(None, None, None, copy)?.copy();
    let options = cuda::import_options(sync, stream, "enqueue", check_pointer)?;
    exchanged_view(
        py,
        cpy::AnyForeignArray::from_dlpack_with(obj, &options, copy)?,
    )
}

/// The view of an import of either side: what `from_dlpack` returns, and what the exchange
/// table's `managed_tensor_to_py_object_no_sync` makes of a tensor handed to cai.
fn exchanged_view(py: Python<'_>, a: cpy::AnyForeignArray) -> PyResult<Bound<'_, PyAny>> {
    Ok(match a {
        cpy::AnyForeignArray::Device(a) => new_cuda_view(py, a)?.into_bound(py).into_any(),
        cpy::AnyForeignArray::Host(a) => new_host_view(py, a)?.into_bound(py).into_any(),
    })
}

/// Test support (feature `testing`): the DLPack tensors cai exported that no deleter has
/// freed yet (`cai_runtime::python::live_exports`).
#[cfg(feature = "testing")]
#[pyfunction]
fn _dlpack_live_exports() -> usize {
    cpy::live_exports()
}

/// Test support (feature `testing`): a class of one's own in `exporter` mode, as a user writes
/// one: its `Exporter` builds its host side on every export and keeps no `DlpackCache`, so
/// `Exporter::lends` stays false and its exchange table lends nothing.
#[cfg(feature = "testing")]
#[pyclass(module = "cai", name = "_PlainExporter", frozen)]
struct PlainExporter {
    values: Vec<f64>,
}

#[cfg(feature = "testing")]
impl cpy::Exporter for PlainExporter {
    fn host(&self) -> Option<Result<cpy::Export<'_, Host>, DescriptorError>> {
        let b = cai_runtime::DescriptorBuilder::<Host>::host(&self.values);
        Some(Ok(cpy::Export::built(b)))
    }
    fn dlpack_side(&self, _: Option<cpy::DlpackDevice>) -> cpy::Side {
        cpy::Side::Host
    }
}

#[cfg(feature = "testing")]
#[cai_runtime::pymethods(host, exporter)]
impl PlainExporter {
    /// `0.0, 1.0, ... n - 1` as float64.
    #[new]
    fn new(n: usize) -> Self {
        PlainExporter {
            values: (0..n).map(|i| i as f64).collect(),
        }
    }
}

/// Test support (feature `testing`): whether the running interpreter tells cai's DLPack
/// deleter that this thread holds the GIL (`cai_runtime::python::testing::holds_gil`).
#[cfg(feature = "testing")]
#[pyfunction]
fn _holds_gil() -> bool {
    cai_runtime::python::testing::holds_gil()
}

/// Test support (feature `testing`): `(fast, full)`, what import's fast path and its full
/// parser make of a descriptor (`Debug` text, `None` where the fast path declines or the
/// parser refuses).
#[cfg(feature = "testing")]
#[pyfunction]
fn _import_paths(desc: &Bound<'_, PyAny>, device: bool) -> (Option<String>, Option<String>) {
    if device {
        cai_runtime::python::testing::both_paths::<cai_runtime::Device>(desc)
    } else {
        cai_runtime::python::testing::both_paths::<cai_runtime::Host>(desc)
    }
}

/// Test support (feature `testing`): `(fields, dunder)`, what a DLPack import of an exact
/// ndarray reads from its fields (`None` where it asks `__dlpack__`) and what it makes of
/// `__dlpack__`, as `Debug` text of the descriptor, layout and read-only flag (an error's
/// text where the import fails).
#[cfg(feature = "testing")]
#[pyfunction]
fn _numpy_paths(obj: &Bound<'_, PyAny>) -> (Option<String>, String) {
    cai_runtime::python::testing::both_numpy_paths(obj)
}

/// Benchmark support (feature `testing`): nanoseconds per
/// `ForeignArray::<Host>::from_object(obj)` over `n` runs in Rust, without the Python call and
/// the view object around each import.
#[cfg(feature = "testing")]
#[pyfunction]
fn _import_ns(obj: &Bound<'_, PyAny>, n: u32) -> PyResult<f64> {
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(ForeignArray::<Host>::from_object(obj, false)?);
    }
    Ok(start.elapsed().as_nanos() as f64 / f64::from(n.max(1)))
}

/// Benchmark support (feature `testing`): nanoseconds per
/// `ForeignArray::<Host>::from_dlpack(obj)` over `n` runs in Rust (the producer's `__dlpack__`
/// call, the capsule, the view, its drop and the producer's deleter).
#[cfg(feature = "testing")]
#[pyfunction]
fn _import_dlpack_ns(obj: &Bound<'_, PyAny>, n: u32) -> PyResult<f64> {
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(ForeignArray::<Host>::from_dlpack(obj)?);
    }
    Ok(start.elapsed().as_nanos() as f64 / f64::from(n.max(1)))
}

/// Test and benchmark support (feature `testing`): over `n` runs in Rust,
/// `ForeignArray::<Host>::with_dlpack(obj, ..)` reading the first item's address (the
/// producer's table lends the tensor where it can): nanoseconds per run, whether the view was
/// read-only (lent: no deleter) or not (imported, from writable memory), and whether its owner
/// was `obj` (imported) or none (lent).
#[cfg(feature = "testing")]
#[pyfunction]
fn _with_dlpack_ns(obj: &Bound<'_, PyAny>, n: u32) -> PyResult<(f64, bool, bool)> {
    let options = cai_runtime::sync::ImportOptions::default();
    let (mut readonly, mut owned) = (false, false);
    let start = std::time::Instant::now();
    for i in 0..n {
        // SAFETY: the closure runs no Python code and keeps the GIL.
        unsafe {
            ForeignArray::<Host>::with_dlpack(obj, &options, |a| {
                std::hint::black_box(a.ptr());
                // (Asked of the last view only: the owner's reference is no part of the time.)
                if i + 1 == n {
                    (readonly, owned) =
                        (a.readonly(), a.owner(obj.py()).is_some_and(|o| o.is(obj)));
                }
            })
        }?;
    }
    Ok((
        start.elapsed().as_nanos() as f64 / f64::from(n.max(1)),
        readonly,
        owned,
    ))
}

/// Benchmark support (feature `testing`): nanoseconds per
/// `ForeignArray::<Host>::with_dlpack_array::<f64, Ix2>(obj, ..)` over `n` runs in Rust, each
/// reading the view's first item's address (the scoped typed view of a tensor the producer's
/// table lends, where it lends one).
#[cfg(feature = "testing")]
#[pyfunction]
fn _with_dlpack_array_ns(obj: &Bound<'_, PyAny>, n: u32) -> PyResult<f64> {
    let options = cai_runtime::sync::ImportOptions::default();
    let start = std::time::Instant::now();
    for _ in 0..n {
        // SAFETY: the closure runs no Python code and keeps the GIL.
        unsafe {
            ForeignArray::<Host>::with_dlpack_array::<f64, ndarray::Ix2, _>(obj, &options, |v| {
                std::hint::black_box(v.as_ptr());
            })
        }?;
    }
    Ok(start.elapsed().as_nanos() as f64 / f64::from(n.max(1)))
}

/// Test support (feature `testing`): the items of any host DLPack producer in logical order,
/// read through `ForeignArray::with_dlpack_array::<T, IxDyn>` for the `T` its dtype names
/// (`typestr`, as `numpy.dtype(...).str` says it); `while_viewed(obj)` is called while the
/// view is alive where given (to try other imports' claims: the hook's closure runs that
/// Python code, which the function's contract allows only where it leaves `obj`'s memory
/// alone, as the tests' callbacks do).
#[cfg(feature = "testing")]
#[pyfunction]
#[pyo3(signature = (obj, typestr, while_viewed=None))]
fn _with_dlpack_array_items<'py>(
    obj: &Bound<'py, PyAny>,
    typestr: &str,
    while_viewed: Option<&Bound<'py, PyAny>>,
) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let py = obj.py();
    let t: cai_runtime::TypeStr = typestr
        .parse()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("{e}")))?;
    let options = cai_runtime::sync::ImportOptions::default();
    macro_rules! items_as {
        ($ty:ty) => {{
            // SAFETY: the closure runs only `while_viewed`, which the tests make leave `obj`'s
            // memory alone.
            let read = unsafe {
                ForeignArray::<Host>::with_dlpack_array::<$ty, ndarray::IxDyn, _>(
                    obj,
                    &options,
                    |v| -> PyResult<Vec<Bound<'py, PyAny>>> {
                        if let Some(f) = while_viewed {
                            f.call1((obj,))?;
                        }
                        v.iter().map(|x| args::ItemValue::to_py(*x, py)).collect()
                    },
                )
            };
            return read?;
        }};
    }
    with_number_type!(t, items_as);
    Err(PyTypeError::new_err(format!(
        "no item type for typestr '{t}'"
    )))
}

/// Test support (feature `testing`): what `with_dlpack_array::<T, IxDyn>` makes of the host
/// tensor `obj`'s table lends, in one pass and as an import reads it (`T` the type `typestr`
/// names): `None` where nothing is lent, else `(one pass, import)` as
/// `cai_runtime::python::testing::lent_plan_paths` says.
#[cfg(feature = "testing")]
#[pyfunction]
fn _lent_plan_paths(
    obj: &Bound<'_, PyAny>,
    typestr: &str,
) -> PyResult<Option<(Option<String>, String)>> {
    let t: cai_runtime::TypeStr = typestr
        .parse()
        .map_err(|e| pyo3::exceptions::PyValueError::new_err(format!("{e}")))?;
    macro_rules! paths_as {
        ($ty:ty) => {{
            return cai_runtime::python::testing::lent_plan_paths::<$ty>(obj);
        }};
    }
    with_number_type!(t, paths_as);
    Err(PyTypeError::new_err(format!(
        "no item type for typestr '{t}'"
    )))
}

/// Test support (feature `testing`): the items of any host array (`from_object`) in logical
/// order, read through `ForeignArray::as_array::<T, IxDyn>` for the `T` its dtype names (every
/// integer, float and complex type; as `HostArrayView.get` reads them).
#[cfg(feature = "testing")]
#[pyfunction]
fn _as_array_items<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    let (py, a) = (obj.py(), ForeignArray::<Host>::from_object(obj, true)?);
    let t = *a.typestr();
    macro_rules! items_as {
        ($ty:ty) => {{
            let view = a.as_array::<$ty, ndarray::IxDyn>()?;
            return view
                .iter()
                .map(|v| args::ItemValue::to_py(*v, py))
                .collect();
        }};
    }
    with_number_type!(t, items_as);
    Err(PyTypeError::new_err(format!(
        "no item type for typestr '{t}'"
    )))
}

/// The import functions' keyword arguments, for their docstrings.
macro_rules! import_keywords {
    () => {
        "\n\n`sync` (default True): order the consumer's stream after the producer's `stream`; \
         False leaves that to the caller. `stream` (default None: 1, the legacy default stream): \
         the stream the consumer will use, 1, 2 (per-thread default) or the handle of a live \
         stream of this process, which must outlive the view (cai hands it to the driver, as \
         CuPy's ExternalStream does). `mode`: \
         \"enqueue\" (the default) makes the consumer's stream wait on an event, \
         \"synchronize\" blocks the host until the producer's work is done. `check_pointer` \
         (default True): ask the driver whether `data` is device memory and the array stays \
         inside its allocation (builds without CUDA support check nothing)."
    };
}
pub(crate) use import_keywords;

/// Adds these to the module.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<ArrayView>()?;
    m.add_class::<CudaArrayView>()?;
    m.add_class::<HostArrayView>()?;
    m.add_function(wrap_pyfunction!(from_cuda_array_interface, m)?)?;
    m.add_function(wrap_pyfunction!(as_cuda_array, m)?)?;
    m.add_function(wrap_pyfunction!(from_array_interface, m)?)?;
    m.add_function(wrap_pyfunction!(as_host_array, m)?)?;
    m.add_function(wrap_pyfunction!(from_dlpack, m)?)?;
    cai_runtime::__private::set_exchange_view(exchanged_view);
    #[cfg(feature = "testing")]
    {
        m.add_function(wrap_pyfunction!(_dlpack_live_exports, m)?)?;
        m.add_function(wrap_pyfunction!(_holds_gil, m)?)?;
        m.add_class::<PlainExporter>()?;
        m.add_function(wrap_pyfunction!(_import_ns, m)?)?;
        m.add_function(wrap_pyfunction!(_import_dlpack_ns, m)?)?;
        m.add_function(wrap_pyfunction!(_with_dlpack_ns, m)?)?;
        m.add_function(wrap_pyfunction!(_with_dlpack_array_ns, m)?)?;
        m.add_function(wrap_pyfunction!(_with_dlpack_array_items, m)?)?;
        m.add_function(wrap_pyfunction!(_lent_plan_paths, m)?)?;
        m.add_function(wrap_pyfunction!(_import_paths, m)?)?;
        m.add_function(wrap_pyfunction!(_numpy_paths, m)?)?;
        m.add_function(wrap_pyfunction!(_as_array_items, m)?)?;
    }
    Ok(())
}
