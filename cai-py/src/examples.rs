//! The worked example of cai's derives: PyO3 classes as a user would write them, each built
//! with a derive, which the package exposes as `cai.examples` (and its tests use as
//! producers). Copy from here:
//!
//! - `Grid`: `#[derive(ArrayInterface)]` (host memory NumPy reads and writes zero-copy), its own
//!   methods in a `#[cai_runtime::pymethods(host)]` block;
//! - `Counts` (made by `counts(n)`): `#[cai(python)]`, for a class with no `#[pymethods]` block
//!   of its own;
//! - `DeviceMatrix`: `#[derive(CudaArrayInterface)]` over device memory allocated elsewhere,
//!   with a stream and an owner kept alive;
//! - `Buffer`: a descriptor built at run time (`DescriptorBuilder`) for any dtype and layout;
//! - `Field`: `#[derive(GtDataInterface)]` with hooks (GDP-3's `__gt_data_interface__`);
//! - `total(a)`: a `#[pyfunction]` taking any object exposing `__array_interface__` as a
//!   typed view (`HostArrayView`);
//! - `Mesh` (made by `mesh(rows, cols)`): an `ndarray::Array2` field, whose own shape and
//!   strides the export takes; `column_sums(a)` and `scale(a, factor)`: any host array as an
//!   `ndarray::ArrayView` / `ArrayViewMut`.
//!
//! Their `#[pyclass(module = "cai.examples")]` names the module Python finds them in
//! (`python/cai/examples.py` re-exports them from the native module).

use crate::args::arg;
use cai_gt::{GtDevice, HookError};
use cai_runtime::python::ForeignHostArray;
use cai_runtime::{
    AllocError, ArrayInterface, CudaArrayInterface, DType, DescriptorBuilder, DescriptorError,
    Element, Host, HostArrayDescriptor, RawDeviceMemory, Stream, TypeStr,
};
use pyo3::exceptions::{PyIndexError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

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
#[pyclass(module = "cai.examples", weakref)]
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
/// `#[pymethods]` block, holding `__array_interface__`. Made by `cai.examples.counts(n)`.
#[pyclass(module = "cai.examples", frozen, weakref)]
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
#[pyclass(module = "cai.examples", weakref)]
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
        // SAFETY: the Python caller handing over an address is its producer and answers for
        // it (as for `from_cuda_array_interface`'s dict), the memory kept valid by holding
        // `owner`. Rust never dereferences it; a DLPack copy reads it through the driver, only
        // inside the allocation the driver finds the address in.
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

/// The elements `Buffer` (and `DeviceArray`) can hold, looked up by type string alone
/// (`descr` None: `Buffer`'s `"|V16"` means `Record`), or by the items a source describes
/// (`descr`: its fields, or the one-entry list of a plain type; a struct of 16 bytes with other
/// fields, or opaque `|V16` bytes, are no `Record`); an error names `class`, the class the user
/// called.
pub(crate) fn dtype_for(
    class: &str,
    typestr: &str,
    descr: Option<&cai_runtime::Descr>,
) -> PyResult<&'static DType> {
    let t = TypeStr::parse(typestr)?;
    let fields = descr;
    // Every element type (cai-runtime's one list of them) but opaque bytes, and `Record`.
    macro_rules! dtype_of {
        (Void, $ty:ty, $ext:ident) => {};
        ($kind:ident, $ty:ty) => {
            let dtype = &<$ty as Element>::DTYPE;
            if dtype.typestr().same_type(&t) && fields.is_none_or(|d| d.same_items(&dtype.descr()))
            {
                return Ok(dtype);
            }
        };
    }
    cai_runtime::for_each_element!(dtype_of);
    dtype_of!(Struct, Record);
    Err(PyTypeError::new_err(
        match fields.filter(|d| !d.is_simple()) {
            Some(d) => format!(
                "{class} has no element type for typestr {typestr:?} with descr {d} (its structured type is {})",
                Record::DTYPE.descr()
            ),
            None => format!("{class} has no element type for typestr {typestr:?}"),
        },
    ))
}

/// Host memory of any supported type string with any layout (strides, offset): the
/// descriptor is built at run time with `DescriptorBuilder`, as code without a fixed element
/// type would. Used to round-trip every dtype and layout.
#[pyclass(module = "cai.examples", weakref)]
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
            dtype: dtype_for("Buffer", &typestr, None)?,
            shape,
            strides,
            offset,
        };
        b.array_interface()?;
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

/// A 3-D float64 field in host memory exporting `__gt_data_interface__` (dims "IJK", a halo,
/// and hooks that record their calls): `#[derive(GtDataInterface)]` with `#[cai(hooks)]`, its
/// property added by `#[cai_runtime::pymethods(gt)]`.
#[pyclass(module = "cai.examples", frozen, weakref)]
#[derive(cai_gt::GtDataInterface)]
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

impl cai_gt::GtHooks for Field {
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
        cai_gt::check_halo(&halo, &[ni, nj, nk])?;
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

/// Sum of a float64 array of any shape and strides, from any object exposing
/// `__array_interface__`.
#[pyfunction]
fn total(a: ForeignHostArray) -> PyResult<f64> {
    // The typestr (byte order included) is checked; `iter` reads the items in C order.
    Ok(a.typed::<f64>()?.iter().sum())
}

/// A float64 matrix held in an `ndarray::Array2`, which gives the export its shape and strides
/// (no `shape` key: C order, or F order for a transposed one). Made by
/// `cai.examples.mesh(rows, cols, transposed=False)`.
#[pyclass(module = "cai.examples", frozen, weakref)]
#[derive(ArrayInterface)]
#[cai(python)]
pub struct Mesh {
    #[cai(data)]
    values: ndarray::Array2<f64>,
}

/// `Mesh` holding `i * cols + j` at (i, j), or its transpose (cols x rows, F order).
#[pyfunction]
#[pyo3(signature = (rows, cols, transposed = false))]
fn mesh(
    #[pyo3(from_py_with = arg::rows)] rows: usize,
    #[pyo3(from_py_with = arg::cols)] cols: usize,
    transposed: bool,
) -> PyResult<Mesh> {
    checked_len(rows, cols)?;
    let values = ndarray::Array2::from_shape_fn((rows, cols), |(i, j)| (i * cols + j) as f64);
    Ok(Mesh {
        values: if transposed {
            values.reversed_axes()
        } else {
            values
        },
    })
}

/// Imports any host array: through DLPack where the object has `__dlpack__` (NumPy, JAX,
/// PyTorch, cai's storages), else through `__array_interface__`.
fn import_any(a: &Bound<'_, PyAny>) -> PyResult<ForeignHostArray> {
    if a.hasattr(pyo3::intern!(a.py(), "__dlpack__"))? {
        ForeignHostArray::from_dlpack(a)
    } else {
        ForeignHostArray::from_object(a, true)
    }
}

/// The column sums of a 2-D float64 array of any layout, from any host array, computed on an
/// `ndarray::ArrayView`.
#[pyfunction]
fn column_sums(a: &Bound<'_, PyAny>) -> PyResult<Vec<f64>> {
    let a = import_any(a)?;
    let view = a.as_array::<f64, ndarray::Ix2>()?;
    // One sum per column, in memory that may not be had (a broadcast's columns can outnumber
    // the bytes they are in): MemoryError then, where `sum_axis` would abort the process.
    let mut sums = zeros::<f64>(view.ncols())?;
    for (sum, column) in sums.iter_mut().zip(view.columns()) {
        *sum = column.sum();
    }
    Ok(sums)
}

/// Multiplies every item of a float64 array of any dimensionality by `factor`, in place,
/// through an `ndarray::ArrayViewMut` (refused for read-only or broadcast arrays).
#[pyfunction]
fn scale(a: &Bound<'_, PyAny>, #[pyo3(from_py_with = arg::item)] factor: f64) -> PyResult<()> {
    let mut a = import_any(a)?;
    a.as_array_mut::<f64, ndarray::IxDyn>()?
        .mapv_inplace(|x| x * factor);
    Ok(())
}

/// Adds these to the module.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Grid>()?;
    m.add_class::<Counts>()?;
    m.add_class::<DeviceMatrix>()?;
    m.add_class::<Buffer>()?;
    m.add_class::<Field>()?;
    m.add_function(wrap_pyfunction!(counts, m)?)?;
    m.add_function(wrap_pyfunction!(total, m)?)?;
    m.add_class::<Mesh>()?;
    m.add_function(wrap_pyfunction!(mesh, m)?)?;
    m.add_function(wrap_pyfunction!(column_sums, m)?)?;
    m.add_function(wrap_pyfunction!(scale, m)?)?;
    Ok(())
}
