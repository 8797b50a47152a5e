//! The `cai` Python package's native module: example classes built with the derives, the
//! import functions, and the conformance checker. See `python/cai/__init__.py` for the API.

use cai_runtime::python::{
    self as cpy, ForeignArray, GtData, HookKind, HostArrayView as HostImport, Plain, Violation,
};
use cai_runtime::storage::GtDevice;
use cai_runtime::storage::gt::HookError;
use cai_runtime::{
    AllocError, ArrayInterface, CudaArrayInterface, DType, DescriptorBuilder, DescriptorError,
    Device, Element, Host, HostArrayDescriptor, RawDeviceMemory, Stream, TypeStr,
};
use num_complex::Complex;
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyTuple};

mod args;
mod cuda;
mod fastcall;
mod storage;

use args::arg;

/// `n` zeros, or MemoryError naming the bytes: `vec![0; n]` aborts the process when the
/// allocation fails. Zeroed by the allocator (`calloc`), so a large vector stays fresh pages
/// until written, as `vec!` and `numpy.zeros` leave it.
fn zeros<T: bytemuck::Zeroable>(n: usize) -> PyResult<Vec<T>> {
    match bytemuck::allocation::try_zeroed_slice_box(n) {
        Ok(b) => Ok(b.into_vec()),
        Err(()) => Err(AllocError(n.saturating_mul(std::mem::size_of::<T>())).into()),
    }
}

fn checked_len(rows: usize, cols: usize) -> PyResult<usize> {
    rows.checked_mul(cols)
        .filter(|&n| n <= isize::MAX as usize / 8)
        .ok_or_else(|| PyValueError::new_err(format!("shape ({rows}, {cols}) is too large")))
}

/// A 2-D float64 matrix in host memory that NumPy reads and writes zero-copy.
///
/// Made with `#[derive(ArrayInterface)]`; its own methods live in a
/// `#[cai_runtime::pymethods(host)]` block, which adds `__array_interface__` to them.
#[pyclass(module = "cai", weakref)]
#[derive(ArrayInterface)]
#[cai(shape = [self.rows, self.cols], strides = self.byte_strides())]
pub struct Grid {
    #[cai(data)]
    values: Vec<f64>,
    rows: usize,
    cols: usize,
    fortran: bool,
}

impl Grid {
    fn byte_strides(&self) -> Option<[isize; 2]> {
        self.fortran.then(|| [8, 8 * self.rows as isize])
    }

    fn index(&self, i: usize, j: usize) -> PyResult<usize> {
        if i >= self.rows || j >= self.cols {
            return Err(PyIndexError::new_err(format!(
                "index ({i}, {j}) is out of bounds for shape ({}, {})",
                self.rows, self.cols
            )));
        }
        Ok(if self.fortran {
            j * self.rows + i
        } else {
            i * self.cols + j
        })
    }
}

#[cai_runtime::pymethods(host)]
impl Grid {
    /// A rows x cols matrix of zeros in C (row-major) or F (column-major) order.
    #[new]
    #[pyo3(signature = (rows, cols, order = "C"))]
    fn new(
        #[pyo3(from_py_with = arg::rows)] rows: usize,
        #[pyo3(from_py_with = arg::cols)] cols: usize,
        #[pyo3(from_py_with = arg::order)] order: &str,
    ) -> PyResult<Self> {
        let fortran = order == "F";
        Ok(Grid {
            values: zeros(checked_len(rows, cols)?)?,
            rows,
            cols,
            fortran,
        })
    }

    /// Item (i, j), read by Rust.
    fn get(
        &self,
        #[pyo3(from_py_with = arg::i)] i: usize,
        #[pyo3(from_py_with = arg::j)] j: usize,
    ) -> PyResult<f64> {
        Ok(self.values[self.index(i, j)?])
    }

    /// Sets item (i, j) from Rust.
    fn set(
        &mut self,
        #[pyo3(from_py_with = arg::i)] i: usize,
        #[pyo3(from_py_with = arg::j)] j: usize,
        #[pyo3(from_py_with = arg::item)] value: f64,
    ) -> PyResult<()> {
        let k = self.index(i, j)?;
        self.values[k] = value;
        Ok(())
    }

    /// Sum of all items, computed in Rust.
    fn sum(&self) -> f64 {
        self.values.iter().sum()
    }

    /// (rows, cols).
    #[getter]
    fn shape(&self) -> (usize, usize) {
        (self.rows, self.cols)
    }
}

/// A 1-D uint32 array with no methods of its own: `#[cai(python)]` generates its only
/// `#[pymethods]` block, holding `__array_interface__`. Made by `cai.counts(n)`.
#[pyclass(module = "cai", frozen, weakref)]
#[derive(ArrayInterface)]
#[cai(python, readonly)]
pub struct Counts {
    #[cai(data)]
    values: Vec<u32>,
}

/// `Counts` holding 0, 1, ..., n - 1 (exported read-only).
#[pyfunction]
fn counts(#[pyo3(from_py_with = arg::n)] n: u32) -> Counts {
    Counts {
        values: (0..n).collect(),
    }
}

/// A float32 matrix in device memory allocated elsewhere (CuPy, Numba, PyTorch...), exported
/// through `__cuda_array_interface__` with its stream. Rust never dereferences the pointer; the
/// object keeps `owner` alive so the memory outlives every export.
#[pyclass(module = "cai", weakref)]
#[derive(CudaArrayInterface)]
#[cai(shape = [self.rows, self.cols], strides = self.byte_strides())]
pub struct DeviceMatrix {
    #[cai(data)]
    memory: RawDeviceMemory<f32>,
    rows: usize,
    cols: usize,
    fortran: bool,
    #[cai(stream)]
    stream: Option<Stream>,
    #[cai(readonly)]
    readonly: bool,
    owner: Option<Py<PyAny>>,
}

impl DeviceMatrix {
    fn byte_strides(&self) -> Option<[isize; 2]> {
        self.fortran.then(|| [4, 4 * self.rows as isize])
    }
}

#[cai_runtime::pymethods(cuda)]
impl DeviceMatrix {
    /// Wraps `rows * cols` float32 items at device address `ptr`, in C or F order. `stream`
    /// is where pending work on the data was enqueued (None: none; 0 is refused).
    #[new]
    #[pyo3(signature = (ptr, rows, cols, *, order = "C", stream = None, readonly = false, owner = None))]
    fn new(
        #[pyo3(from_py_with = arg::ptr)] ptr: u64,
        #[pyo3(from_py_with = arg::rows)] rows: usize,
        #[pyo3(from_py_with = arg::cols)] cols: usize,
        #[pyo3(from_py_with = arg::order)] order: &str,
        stream: Option<&Bound<'_, PyAny>>,
        #[pyo3(from_py_with = arg::readonly)] readonly: bool,
        owner: Option<Py<PyAny>>,
    ) -> PyResult<Self> {
        let fortran = order == "F";
        let len = checked_len(rows, cols)?;
        let stream = stream
            .filter(|v| !v.is_none())
            .map(cai_runtime::python::stream_argument)
            .transpose()?;
        if ptr == 0 && len != 0 {
            return Err(PyValueError::new_err(format!(
                "ptr is 0 but shape ({rows}, {cols}) has items"
            )));
        }
        // SAFETY: the address is only exported, never dereferenced by Rust; validity of the
        // memory is the caller's promise, kept by holding `owner`.
        let memory = unsafe { RawDeviceMemory::from_raw_parts(ptr, len) };
        Ok(DeviceMatrix {
            memory,
            rows,
            cols,
            fortran,
            stream,
            readonly,
            owner,
        })
    }

    /// The object that owns the memory, if given.
    #[getter]
    fn owner(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.owner.as_ref().map(|o| o.clone_ref(py))
    }
}

/// A structured element for `Buffer` (`"|V16"`): NumPy's
/// `[("id", "<i4"), ("", "|V4"), ("value", "<f8")]`, padding included.
#[repr(C)]
#[derive(Clone, Copy, Element)]
struct Record {
    id: i32,
    value: f64,
}

/// The elements `Buffer` can hold, looked up by type string.
fn dtype_for(typestr: &str) -> PyResult<&'static DType> {
    static TABLE: [&DType; 16] = [
        &<bool as Element>::DTYPE,
        &<i8 as Element>::DTYPE,
        &<i16 as Element>::DTYPE,
        &<i32 as Element>::DTYPE,
        &<i64 as Element>::DTYPE,
        &<u8 as Element>::DTYPE,
        &<u16 as Element>::DTYPE,
        &<u32 as Element>::DTYPE,
        &<u64 as Element>::DTYPE,
        &<half::f16 as Element>::DTYPE,
        &<f32 as Element>::DTYPE,
        &<f64 as Element>::DTYPE,
        &<Complex<f32> as Element>::DTYPE,
        &<Complex<f64> as Element>::DTYPE,
        &<usize as Element>::DTYPE,
        &<Record as Element>::DTYPE,
    ];
    let t = TypeStr::parse(typestr).map_err(|e| PyTypeError::new_err(e.to_string()))?;
    TABLE
        .iter()
        .copied()
        .find(|d| d.typestr().same_type(&t))
        .ok_or_else(|| {
            PyTypeError::new_err(format!(
                "Buffer has no element type for typestr {typestr:?}"
            ))
        })
}

/// Host memory of any supported type string with any layout (strides, offset): the
/// descriptor is built at run time with `DescriptorBuilder`, as code without a fixed element
/// type would. Used to round-trip every dtype and layout.
#[pyclass(module = "cai", weakref)]
pub struct Buffer {
    /// 8-byte aligned storage.
    storage: Vec<u64>,
    nbytes: usize,
    dtype: &'static DType,
    shape: Vec<usize>,
    strides: Option<Vec<isize>>,
    offset: usize,
}

impl Buffer {
    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: `storage` holds at least `nbytes` initialised bytes (u64s are plain data) and
        // is borrowed mutably for the slice's lifetime.
        unsafe {
            std::slice::from_raw_parts_mut(self.storage.as_mut_ptr().cast::<u8>(), self.nbytes)
        }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: as in `bytes_mut`, borrowed shared.
        unsafe { std::slice::from_raw_parts(self.storage.as_ptr().cast::<u8>(), self.nbytes) }
    }
}

impl ArrayInterface for Buffer {
    fn array_interface(&self) -> Result<HostArrayDescriptor, DescriptorError> {
        DescriptorBuilder::<Host>::new(
            self.storage.as_ptr() as usize as u64,
            self.nbytes,
            self.dtype,
            true,
        )
        .shape(self.shape.clone())
        .strides(self.strides.clone())
        .offset(self.offset)
        .build()
    }
}

#[cai_runtime::pymethods(host)]
impl Buffer {
    /// `nbytes` zeroed bytes viewed as `shape` items of `typestr`, with optional byte `strides`
    /// and the first item `offset` bytes in. Raises ValueError if the view leaves the buffer.
    #[new]
    #[pyo3(signature = (nbytes, typestr, shape, strides = None, offset = 0))]
    fn new(
        #[pyo3(from_py_with = arg::nbytes)] nbytes: usize,
        #[pyo3(from_py_with = arg::typestr)] typestr: String,
        #[pyo3(from_py_with = arg::shape)] shape: Vec<usize>,
        #[pyo3(from_py_with = arg::strides)] strides: Option<Vec<isize>>,
        #[pyo3(from_py_with = arg::offset)] offset: usize,
    ) -> PyResult<Self> {
        if nbytes > isize::MAX as usize / 2 {
            return Err(PyValueError::new_err(format!(
                "nbytes = {nbytes} is too large"
            )));
        }
        let b = Buffer {
            storage: zeros(nbytes.div_ceil(8))?,
            nbytes,
            dtype: dtype_for(&typestr)?,
            shape,
            strides,
            offset,
        };
        b.array_interface()
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(b)
    }

    /// Overwrites the whole buffer (its `nbytes` raw bytes, not the view).
    fn write(&mut self, data: &[u8]) -> PyResult<()> {
        if data.len() != self.nbytes {
            return Err(PyValueError::new_err(format!(
                "expected {} bytes, got {}",
                self.nbytes,
                data.len()
            )));
        }
        self.bytes_mut().copy_from_slice(data);
        Ok(())
    }

    /// The whole buffer's raw bytes (not the view).
    fn raw<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, self.bytes())
    }
}

/// What an [`ArrayView`] holds: one imported array of either protocol.
enum Imported {
    Cuda(ForeignArray<Device>),
    Host(ForeignArray<Host>),
}

/// An imported array: a validated descriptor and a strong reference to its owner. Base class
/// of `CudaArrayView` and `HostArrayView`.
#[pyclass(module = "cai", frozen, subclass)]
pub struct ArrayView(Imported);

impl ArrayView {
    fn descriptor_parts(&self) -> (&cai_runtime::Layout, &TypeStr, cai_runtime::Data, u32) {
        match &self.0 {
            Imported::Cuda(a) => (
                a.layout(),
                &a.descriptor().typestr,
                a.descriptor().data,
                a.descriptor().version,
            ),
            Imported::Host(a) => (
                a.layout(),
                &a.descriptor().typestr,
                a.descriptor().data,
                a.descriptor().version,
            ),
        }
    }
}

#[pymethods]
impl ArrayView {
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
        self.descriptor_parts().3
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
            Imported::Cuda(a) => a.owner(py),
            Imported::Host(a) => a.owner(py),
        }
    }
    /// The mask's descriptor as a dict, or None.
    #[getter]
    fn mask<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        match &self.0 {
            Imported::Cuda(a) => a
                .descriptor()
                .mask
                .as_deref()
                .map(|m| cpy::to_dict(py, m))
                .transpose(),
            Imported::Host(a) => a
                .descriptor()
                .mask
                .as_deref()
                .map(|m| cpy::to_dict(py, m))
                .transpose(),
        }
    }
    fn __repr__(&self) -> String {
        let (layout, typestr, data, _) = self.descriptor_parts();
        let kind = match self.0 {
            Imported::Cuda(_) => "CudaArrayView",
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

fn cuda_of<'a>(slf: &'a Bound<'_, CudaArrayView>) -> &'a ForeignArray<Device> {
    match &slf.as_super().get().0 {
        Imported::Cuda(a) => a,
        // Only `new_cuda_view` makes a CudaArrayView, always around `Imported::Cuda`.
        Imported::Host(_) => unreachable!("CudaArrayView holds a CUDA import"),
    }
}

fn host_of<'a>(slf: &'a Bound<'_, HostArrayView>) -> &'a ForeignArray<Host> {
    match &slf.as_super().get().0 {
        Imported::Host(a) => a,
        // Only `new_host_view` makes a HostArrayView, always around `Imported::Host`.
        Imported::Cuda(_) => unreachable!("HostArrayView holds a host import"),
    }
}

pub(crate) fn new_cuda_view(
    py: Python<'_>,
    a: ForeignArray<Device>,
) -> PyResult<Py<CudaArrayView>> {
    Py::new(
        py,
        PyClassInitializer::from(ArrayView(Imported::Cuda(a))).add_subclass(CudaArrayView),
    )
}

pub(crate) fn new_host_view(py: Python<'_>, a: ForeignArray<Host>) -> PyResult<Py<HostArrayView>> {
    Py::new(
        py,
        PyClassInitializer::from(ArrayView(Imported::Host(a))).add_subclass(HostArrayView),
    )
}

#[pymethods]
impl CudaArrayView {
    /// The producer's stream (None: no synchronization needed).
    #[getter]
    fn stream(slf: &Bound<'_, Self>) -> Option<u64> {
        cuda_of(slf).stream().map(Stream::as_raw)
    }
    /// Whether the import called for synchronization with the producer's stream.
    #[getter]
    fn needs_sync(slf: &Bound<'_, Self>) -> bool {
        cuda_of(slf).needs_sync()
    }
    /// What the import decided about the producer's stream: `"event-wait"`, `"synchronize"`,
    /// or `"none: <why>"` (no stream, sync=False, streams ignored, same stream).
    #[getter]
    fn sync_plan(slf: &Bound<'_, Self>) -> String {
        cuda::plan_name(cuda_of(slf).sync_plan())
    }
    /// Whether the plan was carried out (a build with the `cuda` feature) rather than left to
    /// the caller.
    #[getter]
    fn synchronized(slf: &Bound<'_, Self>) -> bool {
        cuda_of(slf).synchronized()
    }
    /// The consumer stream the import ordered the data for.
    #[getter]
    fn consumer_stream(slf: &Bound<'_, Self>) -> u64 {
        cuda_of(slf).options().consumer.as_raw()
    }
    /// What the CUDA driver said about `data` (a dict), or None (no check made).
    #[getter]
    fn pointer_attributes<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyDict>>> {
        cuda_of(slf)
            .pointer_attributes()
            .map(|a| cuda::attributes_dict(slf.py(), a))
            .transpose()
    }
    /// The items' bytes in C order, copied from the device on the consumer stream.
    fn copy_to_host<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyBytes>> {
        cuda::copy_view_to_host(slf.py(), cuda_of(slf))
    }
    /// The descriptor, re-exported (the view keeps the owner alive, so consumers of the view
    /// are safe).
    #[getter]
    fn __cuda_array_interface__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        cpy::to_dict(slf.py(), cuda_of(slf).descriptor())
    }
}

fn read_item<'py, T>(
    py: Python<'py>,
    a: &ForeignArray<Host>,
    index: &[usize],
) -> PyResult<Bound<'py, PyAny>>
where
    T: Plain + IntoPyObject<'py>,
{
    let v = a.typed::<T>()?.get(index).ok_or_else(|| {
        PyIndexError::new_err(format!(
            "index {index:?} is out of bounds for shape {:?}",
            a.layout().shape()
        ))
    })?;
    v.into_bound_py_any(py)
}

#[pymethods]
impl HostArrayView {
    /// The items' bytes in C order (a copy), read through the imported descriptor;
    /// MemoryError when they do not fit in memory.
    fn tobytes<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(slf.py(), &host_of(slf).to_bytes()?))
    }

    /// Item `index`, read through a typed view (integer, float and complex types).
    fn get<'py>(
        slf: &Bound<'py, Self>,
        #[pyo3(from_py_with = arg::index)] index: Vec<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (py, a) = (slf.py(), host_of(slf));
        let t = a.descriptor().typestr;
        macro_rules! try_types {
            ($($ty:ty),*) => {$(
                if <$ty as Element>::DTYPE.typestr().same_type(&t) {
                    return read_item::<$ty>(py, a, &index);
                }
            )*};
        }
        try_types!(
            i8,
            i16,
            i32,
            i64,
            u8,
            u16,
            u32,
            u64,
            f32,
            f64,
            Complex<f32>,
            Complex<f64>
        );
        Err(PyTypeError::new_err(format!(
            "get() reads native-order integer, float and complex items; typestr is '{t}'"
        )))
    }

    /// Writes item `index` through a mutable typed view (float64, float32 and integer items);
    /// read-only data is refused with ValueError.
    fn set(
        slf: &Bound<'_, Self>,
        #[pyo3(from_py_with = arg::index)] index: Vec<usize>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let a = host_of(slf);
        // A mutable view needs an owned import: import the same descriptor again, with the
        // same owner kept alive.
        let desc = cpy::to_dict(slf.py(), a.descriptor())?;
        let owner = a.owner(slf.py());
        let mut fresh = ForeignArray::<Host>::from_interface(&desc, owner.as_ref(), false)?;
        let t = fresh.descriptor().typestr;
        let shape = fresh.layout().shape().to_vec();
        macro_rules! try_types {
            ($($ty:ty),*) => {$(
                if <$ty as Element>::DTYPE.typestr().same_type(&t) {
                    let v = <$ty as args::ItemValue>::read("value", value)?;
                    return if fresh.typed_mut::<$ty>()?.set(&index, v) {
                        Ok(())
                    } else {
                        Err(PyIndexError::new_err(format!("index {index:?} is out of bounds for shape {shape:?}")))
                    };
                }
            )*};
        }
        try_types!(f64, f32, i8, i16, i32, i64, u8, u16, u32, u64);
        Err(PyTypeError::new_err(format!(
            "set() writes native-order integer and float items; typestr is '{t}'"
        )))
    }

    /// The descriptor, re-exported (the view keeps the owner alive).
    #[getter]
    fn __array_interface__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        cpy::to_dict(slf.py(), host_of(slf).descriptor())
    }
}

/// Imports a `__cuda_array_interface__` dict (the spec's `from_cuda_array_interface`); see
/// `cuda::import_options` for the keyword arguments.
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
    new_cuda_view(
        desc.py(),
        ForeignArray::from_interface_with(desc, owner, &options)?,
    )
}

/// Imports an object exposing `__cuda_array_interface__`, keeping it alive (the spec's
/// `as_cuda_array`).
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

/// Imports an `__array_interface__` dict.
#[pyfunction]
#[pyo3(signature = (desc, owner = None))]
fn from_array_interface(
    desc: &Bound<'_, PyAny>,
    owner: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<HostArrayView>> {
    new_host_view(desc.py(), ForeignArray::from_interface(desc, owner, false)?)
}

/// Imports an object exposing `__array_interface__`, keeping it alive.
#[pyfunction]
fn as_host_array(obj: &Bound<'_, PyAny>) -> PyResult<Py<HostArrayView>> {
    new_host_view(obj.py(), ForeignArray::from_object(obj, false)?)
}

/// Every violation of the spec in `obj`'s `__cuda_array_interface__` and/or
/// `__array_interface__`, each with the rule it breaks.
#[pyfunction]
fn check(obj: &Bound<'_, PyAny>) -> Vec<Violation> {
    cpy::check(obj)
}

/// Check a descriptor dict itself: ``interface`` is ``"cuda"`` (``__cuda_array_interface__``)
/// or ``"host"`` (``__array_interface__``).
#[pyfunction]
#[pyo3(signature = (desc, interface = "cuda"))]
fn check_descriptor(
    desc: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = arg::interface)] interface: &str,
) -> Vec<Violation> {
    cpy::check_descriptor(desc, interface == "cuda")
}

/// Sum of a 1-D float64 array from any object exposing `__array_interface__`, read in Rust
/// through a typed view (the README's import example).
#[pyfunction]
fn total(a: HostImport) -> PyResult<f64> {
    let t = a.typed::<f64>()?;
    let n = a.layout().shape().first().copied().unwrap_or(1);
    if a.layout().ndim() != 1 {
        return Err(PyValueError::new_err("total() takes a 1-D array"));
    }
    Ok((0..n).filter_map(|i| t.get(&[i])).sum())
}

/// Test support: `(fast, full)`, what import's fast path and its full parser make of a
/// descriptor (`Debug` text, `None` where the fast path declines or the parser refuses).
#[pyfunction]
fn _import_paths(desc: &Bound<'_, PyAny>, device: bool) -> (Option<String>, Option<String>) {
    if device {
        cai_runtime::python::both_paths::<cai_runtime::Device>(desc)
    } else {
        cai_runtime::python::both_paths::<cai_runtime::Host>(desc)
    }
}

/// Benchmark support: nanoseconds per `ForeignArray::<Host>::from_object(obj)` over `n` runs
/// in Rust, without the Python call and the view object around each import.
#[pyfunction]
fn _import_ns(obj: &Bound<'_, PyAny>, n: u32) -> PyResult<f64> {
    let start = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(ForeignArray::<Host>::from_object(obj, false)?);
    }
    Ok(start.elapsed().as_nanos() as f64 / f64::from(n.max(1)))
}

/// A 3-D float64 field in host memory exporting `__gt_data_interface__` (dims "IJK", a halo,
/// and hooks that record their calls): `#[derive(GtDataInterface)]` with `#[cai(hooks)]`, its
/// property added by `#[cai_runtime::pymethods(gt)]`.
#[pyclass(module = "cai", frozen, weakref)]
#[derive(cai_runtime::GtDataInterface)]
#[cai(hooks, shape = [self.ni, self.nj, self.nk], dims = "IJK", halo = self.halo)]
pub struct Field {
    #[cai(host)]
    values: Vec<f64>,
    ni: usize,
    nj: usize,
    nk: usize,
    halo: Vec<(usize, usize)>,
    calls: std::sync::Mutex<Vec<String>>,
}

impl Field {
    fn record(&self, what: &str, device: GtDevice) {
        let key = match device.key() {
            None => "None",
            Some(k) => k,
        };
        let mut calls = self.calls.lock().unwrap_or_else(|e| e.into_inner());
        calls.push(format!("{what}:{key}"));
    }
}

impl cai_runtime::GtHooks for Field {
    fn acquire(&self, device: GtDevice) -> Result<(), HookError> {
        self.record("acquire", device);
        Ok(())
    }
    fn touch(&self, device: GtDevice) -> Result<(), HookError> {
        self.record("touch", device);
        Ok(())
    }
    fn release(&self, device: GtDevice) -> Result<(), HookError> {
        self.record("release", device);
        Ok(())
    }
}

#[cai_runtime::pymethods(gt)]
impl Field {
    /// An ni x nj x nk field of zeros with `halo` ((start, end) per dimension; default none).
    #[new]
    #[pyo3(signature = (ni, nj, nk, halo = None))]
    fn new(
        #[pyo3(from_py_with = arg::ni)] ni: usize,
        #[pyo3(from_py_with = arg::nj)] nj: usize,
        #[pyo3(from_py_with = arg::nk)] nk: usize,
        #[pyo3(from_py_with = arg::halo)] halo: Option<Vec<(usize, usize)>>,
    ) -> PyResult<Self> {
        let n = ni
            .checked_mul(nj)
            .and_then(|n| n.checked_mul(nk))
            .filter(|&n| n <= isize::MAX as usize / 8)
            .ok_or_else(|| {
                PyValueError::new_err(format!("shape ({ni}, {nj}, {nk}) is too large"))
            })?;
        let halo = halo.unwrap_or_else(|| vec![(0, 0); 3]);
        // Refused here rather than at the first export, where it would name no argument.
        cai_runtime::storage::check_halo(&halo, &[ni, nj, nk])
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Field {
            values: zeros(n)?,
            ni,
            nj,
            nk,
            halo,
            calls: Default::default(),
        })
    }

    /// The hooks called so far, as "acquire:None", "touch:None"...
    #[getter]
    fn calls(&self) -> Vec<String> {
        self.calls.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Sum of all items, computed in Rust.
    fn sum(&self) -> f64 {
        self.values.iter().sum()
    }
}

/// An object read as GDP-3 says (`cai.gt_data(obj)`): its `__gt_data_interface__`, or else its
/// `__array_interface__` (device None) and `__cuda_array_interface__` ("gpu").
#[pyclass(module = "cai", frozen)]
pub struct GtDataView {
    inner: GtData,
    host: Option<Py<HostArrayView>>,
    gpu: Option<Py<CudaArrayView>>,
}

fn gt_device(device: Option<&str>) -> GtDevice {
    match device {
        None => GtDevice::Host,
        Some(_) => GtDevice::Gpu,
    }
}

#[pymethods]
impl GtDataView {
    /// The host buffer (`None` entry), as an imported view.
    #[getter]
    fn host(&self, py: Python<'_>) -> Option<Py<HostArrayView>> {
        self.host.as_ref().map(|h| h.clone_ref(py))
    }

    /// The device buffer (`"gpu"` entry), as an imported view.
    #[getter]
    fn gpu(&self, py: Python<'_>) -> Option<Py<CudaArrayView>> {
        self.gpu.as_ref().map(|g| g.clone_ref(py))
    }

    /// `dims`, when given.
    #[getter]
    fn dims(&self) -> Option<Vec<String>> {
        self.inner.dims.clone()
    }

    /// `halo`, when given.
    #[getter]
    fn halo(&self) -> Option<Vec<(usize, usize)>> {
        self.inner.halo.clone()
    }

    /// Whether `__gt_data_interface__` was read (False: the array-interface fallback).
    #[getter(from_gt)]
    fn read_through_gt(&self) -> bool {
        self.inner.from_gt
    }

    /// Calls the entry's `acquire` (no action if absent).
    #[pyo3(signature = (device = None))]
    fn acquire(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg::device)] device: Option<&str>,
    ) -> PyResult<()> {
        self.inner.call(py, gt_device(device), HookKind::Acquire)
    }

    /// Calls the entry's `touch` (no action if absent).
    #[pyo3(signature = (device = None))]
    fn touch(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg::device)] device: Option<&str>,
    ) -> PyResult<()> {
        self.inner.call(py, gt_device(device), HookKind::Touch)
    }

    /// Calls the entry's `release` (no action if absent).
    #[pyo3(signature = (device = None))]
    fn release(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg::device)] device: Option<&str>,
    ) -> PyResult<()> {
        self.inner.call(py, gt_device(device), HookKind::Release)
    }
}

/// Reads any object as GDP-3 says: `__gt_data_interface__` first, else the array interfaces.
#[pyfunction]
#[pyo3(signature = (obj, sync = true))]
fn gt_data(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = arg::sync)] sync: bool,
) -> PyResult<GtDataView> {
    let options = cai_runtime::sync::ImportOptions {
        sync,
        ..Default::default()
    };
    let mut inner = GtData::from_object(obj, &options)?;
    let host = inner
        .host
        .take()
        .map(|h| new_host_view(py, h))
        .transpose()?;
    let gpu = inner.gpu.take().map(|g| new_cuda_view(py, g)).transpose()?;
    Ok(GtDataView { inner, host, gpu })
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Grid>()?;
    m.add_class::<Counts>()?;
    m.add_class::<DeviceMatrix>()?;
    m.add_class::<Buffer>()?;
    m.add_class::<ArrayView>()?;
    m.add_class::<CudaArrayView>()?;
    m.add_class::<HostArrayView>()?;
    m.add_class::<Violation>()?;
    m.add_class::<Field>()?;
    m.add_class::<GtDataView>()?;
    m.add_function(wrap_pyfunction!(gt_data, m)?)?;
    cpy::export::add_classes(m)?;
    cpy::gt::add_classes(m)?;
    storage::add(m)?;
    m.add_function(wrap_pyfunction!(counts, m)?)?;
    m.add_function(wrap_pyfunction!(from_cuda_array_interface, m)?)?;
    m.add_function(wrap_pyfunction!(as_cuda_array, m)?)?;
    m.add_function(wrap_pyfunction!(from_array_interface, m)?)?;
    m.add_function(wrap_pyfunction!(as_host_array, m)?)?;
    m.add_function(wrap_pyfunction!(check, m)?)?;
    m.add_function(wrap_pyfunction!(check_descriptor, m)?)?;
    m.add_function(wrap_pyfunction!(total, m)?)?;
    m.add_function(wrap_pyfunction!(_import_ns, m)?)?;
    m.add_function(wrap_pyfunction!(_import_paths, m)?)?;
    cuda::register(m)?;
    Ok(())
}
