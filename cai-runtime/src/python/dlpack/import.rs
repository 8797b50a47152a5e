//! Importing DLPack producers: [`ForeignArray::from_dlpack`].
//!
//! The producer's `__dlpack__` is asked for a versioned capsule (`max_version` = cai's
//! version), then, where it rejects the keywords (a `TypeError`), for a legacy one; a CUDA
//! producer gets the consumer's stream, and makes it wait for its work before returning. The
//! capsule is renamed `used_...` as the protocol says, and from then on its tensor is held by
//! an [`ImportedTensor`], whose drop calls the producer's deleter exactly once: when the last
//! view drops, or at once where the tensor is refused. An exact ndarray is read where it lies
//! instead (`numpy_array.rs`).

use std::ffi::c_void;
use std::fmt;
use std::ptr::NonNull;

use dlpark::DlpackFlags;
use dlpark::ffi::{DLManagedTensor, DLManagedTensorVersioned, DLTensor};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyString, PyTuple};
use pyo3::{ffi, intern};

use super::{
    DLPACK_VERSION, DLTENSOR, DLTENSOR_VERSIONED, DlpackDevice, DlpackError, USED_DLTENSOR,
    USED_DLTENSOR_VERSIONED, typestr_of,
};
use crate::descriptor::{Data, Space};
use crate::layout::MAX_NDIM;
use crate::layout::{Dims, Layout};
use crate::python::ForeignArray;
use crate::python::foreign::TensorHead;
use crate::sync::ImportOptions;

/// A consumed DLPack tensor: its producer's deleter runs exactly once, when this drops, on
/// whatever thread (DLPack's deleters may be called from any thread).
pub(crate) struct ImportedTensor {
    ptr: NonNull<c_void>,
    versioned: bool,
}

// SAFETY: DLPack requires a tensor's deleter to be callable from any thread, and the tensor's
// fields are only read (never written) through this handle.
unsafe impl Send for ImportedTensor {}
// SAFETY: as above; shared access only reads.
unsafe impl Sync for ImportedTensor {}

impl fmt::Debug for ImportedTensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImportedTensor")
            .field("ptr", &self.ptr)
            .field("versioned", &self.versioned)
            .finish()
    }
}

impl Drop for ImportedTensor {
    fn drop(&mut self) {
        // The deleter is the producer's code, which may run Python (a ctypes or Cython
        // deleter, cuda.core's buffer freeing itself): a tensor is held by an import's `Held`,
        // whose release puts the user's pending exception aside meanwhile (one refused while
        // being imported is dropped before any exception is set).
        //
        // SAFETY: `ptr` is the managed tensor a consumed capsule held, whose deleter nobody
        // has called (the capsule was renamed, so its destructor does not): called once, here.
        // The deleter field is at the same place in every version of the versioned struct, so
        // it is read even where the version is one cai does not read otherwise.
        unsafe {
            if self.versioned {
                let p = self.ptr.as_ptr().cast::<DLManagedTensorVersioned>();
                if let Some(deleter) = (*p).deleter {
                    deleter(p);
                }
            } else {
                let p = self.ptr.as_ptr().cast::<DLManagedTensor>();
                if let Some(deleter) = (*p).deleter {
                    deleter(p);
                }
            }
        }
    }
}

impl ImportedTensor {
    /// An owning versioned tensor handed over by C code (the exchange table).
    ///
    /// # Safety
    /// `ptr` is an owning versioned tensor whose deleter nobody else calls.
    pub(crate) unsafe fn from_raw(ptr: NonNull<DLManagedTensorVersioned>) -> Self {
        ImportedTensor {
            ptr: ptr.cast(),
            versioned: true,
        }
    }

    /// The tensor's device, among those cai reads (after checking the version).
    pub(crate) fn device(&self) -> Result<DlpackDevice, DlpackError> {
        self.flags()?;
        device_of(self.tensor())
    }

    /// Takes the tensor out of a capsule returned by `__dlpack__`, renaming it `used_...`.
    fn consume(capsule: &Bound<'_, PyAny>) -> Result<Self, DlpackError> {
        let p = capsule.as_ptr();
        // SAFETY: `p` is a live object: its type is read.
        let name = if unsafe { ffi::PyCapsule_CheckExact(p) } == 1 {
            // SAFETY: a capsule: GetName returns its name, or null for a nameless one (it
            // sets no exception for a capsule).
            let name = unsafe { ffi::PyCapsule_GetName(p) };
            // SAFETY: a capsule's name is a NUL-terminated C string that it keeps.
            (!name.is_null()).then(|| unsafe { std::ffi::CStr::from_ptr(name) })
        } else {
            None
        };
        for (want, used, versioned) in [
            (DLTENSOR_VERSIONED, USED_DLTENSOR_VERSIONED, true),
            (DLTENSOR, USED_DLTENSOR, false),
        ] {
            if name == Some(used) {
                return Err(DlpackError::Capsule(format!(
                    "__dlpack__ returned a capsule named '{}': it was consumed already",
                    used.to_string_lossy()
                )));
            }
            if name != Some(want) {
                continue;
            }
            // SAFETY: a capsule of this name (read above): GetPointer returns its non-null
            // pointer (a valid capsule never holds null).
            let tensor = unsafe { ffi::PyCapsule_GetPointer(p, want.as_ptr()) };
            let ptr = NonNull::new(tensor).ok_or_else(|| {
                // SAFETY: clears a possible exception (no Python code runs).
                unsafe { ffi::PyErr_Clear() };
                DlpackError::Capsule("__dlpack__ returned a capsule holding NULL".into())
            })?;
            // SAFETY: renaming a valid capsule to a static name. From here on its destructor
            // leaves the tensor to us.
            if unsafe { ffi::PyCapsule_SetName(p, used.as_ptr()) } != 0 {
                // SAFETY: clears the exception SetName set (no Python code runs).
                unsafe { ffi::PyErr_Clear() };
                return Err(DlpackError::Capsule(
                    "the capsule returned by __dlpack__ could not be renamed".into(),
                ));
            }
            return Ok(ImportedTensor { ptr, versioned });
        }
        let kind = capsule
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_default();
        let named = match (kind.as_str(), name) {
            ("PyCapsule", None) => " with no name".to_owned(),
            (_, Some(n)) => format!(" named '{}'", n.to_string_lossy()),
            _ => String::new(),
        };
        Err(DlpackError::Capsule(format!(
            "__dlpack__ returned a {kind}{named}, not a capsule named 'dltensor_versioned' or 'dltensor'"
        )))
    }

    /// The versioned struct's version and flags, after checking the major version; the legacy
    /// struct has neither.
    fn flags(&self) -> Result<DlpackFlags, DlpackError> {
        if !self.versioned {
            return Ok(DlpackFlags::empty());
        }
        // SAFETY: a versioned tensor: `version` is its first field in every version.
        let v = unsafe { (*self.ptr.as_ptr().cast::<DLManagedTensorVersioned>()).version };
        if v.major != DLPACK_VERSION.0 {
            return Err(DlpackError::Field {
                field: "version".into(),
                value: format!("{}.{}", v.major, v.minor),
                why: format!(
                    "cai reads DLPack {}.x; another major version has another layout",
                    DLPACK_VERSION.0
                ),
            });
        }
        // SAFETY: a version 1.x struct, whose layout this is.
        let f = unsafe { (*self.ptr.as_ptr().cast::<DLManagedTensorVersioned>()).flags };
        Ok(f)
    }

    /// The tensor (only after [`Self::flags`] accepted the version).
    fn tensor(&self) -> &DLTensor {
        // SAFETY: the managed tensor is alive until this handle drops; for a versioned one
        // `flags` checked its major version, so the layout is DLPack 1.x's.
        unsafe {
            if self.versioned {
                &(*self.ptr.as_ptr().cast::<DLManagedTensorVersioned>()).dl_tensor
            } else {
                &(*self.ptr.as_ptr().cast::<DLManagedTensor>()).dl_tensor
            }
        }
    }
}

/// The device a tensor names, among those cai reads (else the field's error).
#[inline]
fn device_of(t: &DLTensor) -> Result<DlpackDevice, DlpackError> {
    let d = &t.device;
    DlpackDevice::from_pair(d.device_type.0 as i64, d.device_id as i64).ok_or_else(|| {
        field(
            "dl_tensor.device",
            format!("({}, {})", d.device_type.0, d.device_id),
            "cai reads kDLCPU (1), kDLCUDA (2), kDLCUDAHost (3) and kDLCUDAManaged (13) tensors",
        )
    })
}

fn field(
    field: impl Into<String>,
    value: impl fmt::Display,
    why: impl Into<String>,
) -> DlpackError {
    DlpackError::Field {
        field: field.into(),
        value: value.to_string(),
        why: why.into(),
    }
}

/// What a DLPack tensor describes, and its layout (strides converted to bytes; C order where
/// the producer gave none), checked field by field. Nothing is allocated up to 4 dimensions.
/// (Inlined where it is called: its answer, returned through memory, made a profile-guided
/// build of `cai.from_dlpack` through a table wait on its stores, about 60 ns. Its errors
/// are boxed for the same reason: [`unboxed`].)
#[inline(always)]
fn describe<S: Space>(
    t: &DLTensor,
    readonly: bool,
) -> Result<(TensorHead<S>, Layout), Box<DlpackError>> {
    check_space::<S>(device_of(t)?)?;
    if !(0..=MAX_NDIM as i32).contains(&t.ndim) {
        return Err(field(
            "dl_tensor.ndim",
            t.ndim,
            format!("expected 0 to {MAX_NDIM} dimensions"),
        )
        .into());
    }
    let ndim = t.ndim as usize;
    let typestr = typestr_of(t.dtype)?;
    let itemsize = typestr.itemsize();
    let read = |p: *mut i64, name: &str| -> Result<_, DlpackError> {
        if p.is_null() && ndim > 0 {
            return Err(field(
                format!("dl_tensor.{name}"),
                "NULL",
                "null with ndim > 0",
            ));
        }
        // SAFETY: DLPack: a non-null shape or strides points to `ndim` int64 values, alive
        // while the tensor is (it is: we hold it, and read them here only); none are read
        // where `ndim` is 0.
        Ok(unsafe { super::int64s(p, ndim) })
    };
    let mut shape = Dims::<usize>::new();
    for (i, n) in read(t.shape, "shape")?.enumerate() {
        shape.push(
            usize::try_from(n)
                .map_err(|_| field(format!("dl_tensor.shape[{i}]"), n, "negative"))?,
        );
    }
    let strided = !t.strides.is_null();
    // Before DLPack 1.2, null strides meant C order.
    let mut strides = Dims::<isize>::new();
    if strided {
        for (i, s) in read(t.strides, "strides")?.enumerate() {
            let b = isize::try_from(s)
                .ok()
                .and_then(|s| s.checked_mul(itemsize as isize))
                .ok_or_else(|| {
                    field(
                        format!("dl_tensor.strides[{i}]"),
                        s,
                        format!("times the item size {itemsize} overflows"),
                    )
                })?;
            strides.push(b);
        }
    }
    let empty = shape.contains(&0);
    if t.data.is_null() && !empty {
        return Err(field(
            "dl_tensor.data",
            "NULL",
            format!("a tensor of shape {shape:?} has items, so it needs an address"),
        )
        .into());
    }
    let ptr = (t.data as u64).checked_add(t.byte_offset).ok_or_else(|| {
        field(
            "dl_tensor.byte_offset",
            t.byte_offset,
            format!("added to data = {:#x} overflows", t.data as u64),
        )
    })?;
    let layout = match if strided {
        Layout::from_dims(shape, strides, itemsize)
    } else {
        Layout::c_contiguous(&shape, itemsize)
    } {
        Ok(layout) => layout,
        // (The error by reference, out of line, as `unboxed` says.)
        // SAFETY: `read` accepted the shape, and the strides where `strided`, of `ndim`
        // (checked above) values.
        Err(e) => return Err(unsafe { layout_refused(t, strided, itemsize, &e) }.into()),
    };
    let head = TensorHead::new(typestr, Data { ptr, readonly }, strided);
    Ok((head, layout))
}

/// Whether a tensor on `device` can be an import of space `S`: device, managed and registered
/// host memory are the CUDA Array Interface's; host memory, and the host-accessible kinds,
/// NumPy's.
fn check_space<S: Space>(device: DlpackDevice) -> Result<(), DlpackError> {
    let ok = if S::DEVICE {
        device.is_cuda()
    } else {
        !matches!(device, DlpackDevice::Cuda(_))
    };
    if ok {
        return Ok(());
    }
    Err(DlpackError::Device(format!(
        "the tensor is on {device}: {}",
        if S::DEVICE {
            "a device import takes CUDA memory (kDLCUDA, kDLCUDAHost, kDLCUDAManaged); import host memory as a host array"
        } else {
            "a host import takes host-accessible memory (kDLCPU, kDLCUDAHost, kDLCUDAManaged); import device memory as a device array"
        }
    )))
}

/// `obj.__dlpack_device__()`, as a device cai reads (`BufferError` for another answer).
pub fn dlpack_device_of(obj: &Bound<'_, PyAny>) -> PyResult<DlpackDevice> {
    let d = obj.call_method0(intern!(obj.py(), "__dlpack_device__"))?;
    let bad = || {
        DlpackError::Device(format!(
            "__dlpack_device__() returned {}: cai reads kDLCPU (1), kDLCUDA (2), kDLCUDAHost (3) and kDLCUDAManaged (13) with a device id >= 0",
            d.repr().map(|r| r.to_string()).unwrap_or_default()
        ))
    };
    let t = d.cast::<PyTuple>().map_err(|_| bad())?;
    if t.len() != 2 {
        return Err(bad().into());
    }
    let kind: i64 = t.get_item(0)?.extract().map_err(|_| bad())?;
    let id: i64 = t.get_item(1)?.extract().map_err(|_| bad())?;
    Ok(DlpackDevice::from_pair(kind, id).ok_or_else(bad)?)
}

/// The names of `__dlpack__`'s keywords, in the order their values are passed: `stream` (for
/// CUDA memory), `copy` (where given), `max_version` (but in the legacy call); each tuple made
/// once.
fn dlpack_keywords(
    py: Python<'_>,
    stream: bool,
    copy: bool,
    versioned: bool,
) -> PyResult<Bound<'_, PyTuple>> {
    static NAMES: [PyOnceLock<Py<PyTuple>>; 8] = [const { PyOnceLock::new() }; 8];
    let which = usize::from(stream) | usize::from(copy) << 1 | usize::from(versioned) << 2;
    let names = NAMES[which].get_or_try_init(py, || {
        let mut names = Vec::with_capacity(3);
        if stream {
            names.push(intern!(py, "stream"));
        }
        if copy {
            names.push(intern!(py, "copy"));
        }
        if versioned {
            names.push(intern!(py, "max_version"));
        }
        PyTuple::new(py, names).map(Bound::unbind)
    })?;
    Ok(names.bind(py).clone())
}

/// `obj.name(**dict(zip(names, values)))`: through `PyObject_VectorcallMethod` where the
/// interpreter has it, which makes no bound method and no keyword dict (together they cost
/// more than NumPy's whole `__dlpack__`); else through `getattr` and a call with a dict.
fn call_method<'py>(
    obj: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
    names: &Bound<'py, PyTuple>,
    values: &[Bound<'py, PyAny>],
) -> PyResult<Bound<'py, PyAny>> {
    call_method_through(
        crate::python::interp::vectorcall_method(),
        obj,
        name,
        names,
        values,
    )
}

/// [`call_method`] through `vectorcall`, or through a dict where `None`.
fn call_method_through<'py>(
    vectorcall: Option<crate::python::interp::VectorcallMethod>,
    obj: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
    names: &Bound<'py, PyTuple>,
    values: &[Bound<'py, PyAny>],
) -> PyResult<Bound<'py, PyAny>> {
    let py = obj.py();
    debug_assert_eq!(names.len(), values.len());
    let Some(vectorcall) = vectorcall else {
        let kwargs = PyDict::new(py);
        for (k, v) in names.iter().zip(values) {
            kwargs.set_item(k, v)?;
        }
        return obj.call_method(name, (), Some(&kwargs));
    };
    let mut args: smallvec::SmallVec<[*mut ffi::PyObject; 4]> = smallvec::smallvec![obj.as_ptr()];
    args.extend(values.iter().map(Bound::as_ptr));
    // SAFETY: attached (`py`); `name` is a str; `args` holds `obj` (the one positional
    // argument, counted in `nargsf`) and then one value per name of `names`, a tuple of
    // distinct exact strs (`dlpack_keywords`), all borrowed and alive for the call. The result
    // is a new reference or NULL with an exception set, which `from_owned_ptr_or_err` takes.
    unsafe {
        Bound::from_owned_ptr_or_err(
            py,
            vectorcall(name.as_ptr(), args.as_ptr(), 1, names.as_ptr()),
        )
    }
}

impl<S: Space> ForeignArray<S> {
    /// Imports any object with `__dlpack__` (`cai.from_dlpack`) with default options: for
    /// device memory, the legacy default stream waits for the producer's work.
    pub fn from_dlpack(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        Self::from_dlpack_with(obj, &ImportOptions::default(), None)
    }

    /// Imports any object with `__dlpack__`: a versioned capsule is asked for (or a legacy one,
    /// from producers that reject the keywords), CUDA producers are passed
    /// `options.consumer` (or -1 with `sync=false`) and make it wait for their work, and the
    /// producer's deleter is called exactly once, when the last view drops (or at once if the
    /// tensor is refused). `copy` is passed on (`True`: the producer copies; `False`: it must
    /// not). A read-only tensor (versioned flag), and any legacy one (which cannot say whether
    /// it is: NumPy reads it read-only too), refuses `typed_mut`. The view keeps `obj`
    /// alive besides the tensor. An exact `numpy.ndarray` is not asked: the tensor its
    /// `__dlpack__` would export is read from the array's fields, with NumPy's rules (an array
    /// NumPy would refuse or export otherwise is asked, and NumPy's error raised).
    ///
    /// Errors name the field and value: a tensor on a device of the other space (`BufferError`);
    /// a capsule with another name or consumed already, a device cai does not read, a type
    /// code with no type string, `lanes` other than 1, a major version cai does not read, null
    /// data with items, a negative shape, strides or `byte_offset` that overflow, more than 64
    /// dimensions, extents outside the device allocation, a device id the pointer is not on
    /// (`ValueError`).
    pub fn from_dlpack_with(
        obj: &Bound<'_, PyAny>,
        options: &ImportOptions,
        copy: Option<bool>,
    ) -> PyResult<Self> {
        if copy.is_none()
            && let Some(t) = super::numpy_array::read::<S>(obj)
        {
            return Self::from_numpy(obj, t, options);
        }
        // The producer's exchange table, where its type has one (the table has no `copy`).
        if copy.is_none()
            && let Some(table) = super::exchange::Table::of(obj)?
        {
            let mut t = unlent();
            if let Some((_, producer)) = own_lent(obj, table, &mut t, check_space::<S>)? {
                return Self::from_own_lent(&t, obj, options, producer);
            }
            let (tensor, _, producer) = from_table(obj, table, check_space::<S>)?;
            return Self::from_tensor(tensor, Some(obj), options, producer);
        }
        Self::from_dunder_dlpack(obj, options, copy, None)
    }

    /// The import through `obj.__dlpack__`; `device`: what `__dlpack_device__` said, where the
    /// caller asked already.
    fn from_dunder_dlpack(
        obj: &Bound<'_, PyAny>,
        options: &ImportOptions,
        copy: Option<bool>,
        device: Option<DlpackDevice>,
    ) -> PyResult<Self> {
        let py = obj.py();
        let ordered = options.sync && !crate::sync::ignore_streams();
        if S::DEVICE {
            // Before asking the producer for work: a stream is passed only for CUDA memory.
            // (A host import reads the device from the tensor instead: one call fewer.)
            let device = match device {
                Some(d) => d,
                None => dlpack_device_of(obj)?,
            };
            check_space::<S>(device)?;
        }
        // The keywords: a stream for CUDA memory, `copy` if given, and `max_version` in the
        // first call (a producer that predates it is called again without).
        static VERSION: PyOnceLock<Py<PyTuple>> = PyOnceLock::new();
        let version = VERSION.get_or_try_init(py, || {
            PyTuple::new(py, [DLPACK_VERSION.0, DLPACK_VERSION.1]).map(Bound::unbind)
        })?;
        let mut values: smallvec::SmallVec<[Bound<'_, PyAny>; 3]> = smallvec::SmallVec::new();
        if S::DEVICE {
            let stream = if ordered {
                options.consumer.stream().as_raw() as i128
            } else {
                -1
            };
            values.push(stream.into_pyobject(py)?.into_any());
        }
        if let Some(c) = copy {
            values.push(PyBool::new(py, c).to_owned().into_any());
        }
        values.push(version.bind(py).clone().into_any());
        let method = intern!(py, "__dlpack__");
        let names = |versioned| dlpack_keywords(py, S::DEVICE, copy.is_some(), versioned);
        let capsule = match call_method(obj, method, &names(true)?, &values) {
            Ok(c) => c,
            // A producer that predates `max_version` (and `copy`) rejects the keyword.
            Err(e) if e.is_instance_of::<PyTypeError>(py) && copy.is_none() => {
                call_method(obj, method, &names(false)?, &values[..values.len() - 1])
                    .inspect_err(|e2| e2.set_cause(py, Some(e)))?
            }
            Err(e) => return Err(e),
        };
        let tensor = ImportedTensor::consume(&capsule)?;
        Self::from_tensor(tensor, Some(obj), options, Producer::Ordered(ordered))
    }

    /// Runs `f` on a view of `obj`'s memory that lasts for the call: lent by the producer's
    /// exchange table (`dltensor_from_py_object_no_sync`: no tensor is made, and no deleter
    /// runs) where its type has one that lends tensors, else (and where the producer refuses
    /// to lend this object with a `BufferError`: cai's own, for read-only memory) an import as
    /// [`Self::from_dlpack_with`]. Device memory is ordered as any import's (the consumer's
    /// stream waits for the producer's current work stream). The view is read-only when lent
    /// (the lent tensor cannot say whether its memory may be written: import with
    /// [`Self::from_dlpack_with`] to write) and has no owner ([`Self::owner`] is `None`: `obj`,
    /// borrowed for the call, is what keeps it), and cannot leave `f`, which borrows it:
    ///
    /// ```compile_fail
    /// use cai_runtime::python::ForeignArray;
    /// use cai_runtime::Host;
    /// use cai_runtime::__private::pyo3::prelude::*;
    /// use cai_runtime::sync::ImportOptions;
    ///
    /// fn escape<'a>(obj: &Bound<'_, PyAny>) -> PyResult<&'a ForeignArray<Host>> {
    ///     // SAFETY: `f` runs no Python code.
    ///     unsafe { ForeignArray::<Host>::with_dlpack(obj, &ImportOptions::default(), |a| a) }
    /// }
    /// ```
    ///
    /// # Safety
    /// A lent tensor is valid only until control returns to Python: nothing but `obj` keeps
    /// its memory (no tensor holds the producer's storage), so Python code run while `f` runs
    /// (by `f`, or by another thread while `f` lets the GIL go) could free or move it, a
    /// PyTorch `resize_` say. `f` must run no Python code that may change `obj`'s memory, and
    /// must not let the GIL go while other threads could.
    pub unsafe fn with_dlpack<R>(
        obj: &Bound<'_, PyAny>,
        options: &ImportOptions,
        f: impl FnOnce(&ForeignArray<S>) -> R,
    ) -> PyResult<R> {
        let mut t = unlent();
        match lent(obj, &mut t)? {
            // SAFETY: this function's contract.
            Some(table) => unsafe { Self::with_lent(obj, table, &t, options, f) },
            None => Ok(f(&Self::from_dlpack_with(obj, options, None)?)),
        }
    }

    /// [`Self::with_dlpack`]'s view of `t`, the tensor `obj`'s `table` lent.
    ///
    /// # Safety
    /// As [`Self::with_dlpack`]'s, `t` lent by `table` for `obj` in this call.
    pub(crate) unsafe fn with_lent<R>(
        obj: &Bound<'_, PyAny>,
        table: super::exchange::Table,
        t: &DLTensor,
        options: &ImportOptions,
        f: impl FnOnce(&ForeignArray<S>) -> R,
    ) -> PyResult<R> {
        let (head, layout, device_id) = match describe_placed::<S>(t, true) {
            Ok(described) => described,
            Err(e) => return Err(unboxed(e)),
        };
        // (`describe` accepted the device.)
        let producer = table_producer(obj, table, device_of(t)?, |_| Ok(()))?;
        // (No owner: `obj`, borrowed for the call, is what keeps the lent memory alive.)
        let a = ForeignArray::from_dlpack_parts(
            head, layout, None, None, options, producer, device_id,
        )?;
        Ok(f(&a))
    }

    /// The import of an exact ndarray, from the tensor its `__dlpack__` would export
    /// (`numpy_array.rs`), kept alive with the array.
    fn from_numpy(
        obj: &Bound<'_, PyAny>,
        (head, layout): (TensorHead<S>, Layout),
        options: &ImportOptions,
    ) -> PyResult<Self> {
        let producer = Producer::Current(None);
        ForeignArray::from_dlpack_parts(head, layout, None, Some(obj), options, producer, None)
    }

    /// The import of a consumed tensor (whose deleter runs exactly once from here: when the
    /// import, or the error, drops), kept alive with `owner`.
    pub(crate) fn from_tensor(
        tensor: ImportedTensor,
        owner: Option<&Bound<'_, PyAny>>,
        options: &ImportOptions,
        producer: Producer,
    ) -> PyResult<Self> {
        let flags = tensor.flags()?;
        // A legacy capsule cannot say "read-only" (JAX exports only those, and its arrays are
        // immutable): imported read-only, as NumPy imports it.
        let readonly = !tensor.versioned || flags.contains(DlpackFlags::READ_ONLY);
        let (head, layout, device_id) = match describe_placed::<S>(tensor.tensor(), readonly) {
            Ok(described) => described,
            Err(e) => return Err(unboxed(e)),
        };
        ForeignArray::from_dlpack_parts(
            head,
            layout,
            Some(tensor),
            owner,
            options,
            producer,
            device_id,
        )
    }

    /// The import of a tensor one of cai's own classes lent ([`own_lent`]): it holds `obj`
    /// alone, as the tensor the class would export holds it. Writable: a lent tensor is never
    /// of read-only memory, which cai's classes refuse to lend.
    fn from_own_lent(
        t: &DLTensor,
        obj: &Bound<'_, PyAny>,
        options: &ImportOptions,
        producer: Producer,
    ) -> PyResult<Self> {
        let (head, layout, device_id) = match describe_placed::<S>(t, false) {
            Ok(described) => described,
            Err(e) => return Err(unboxed(e)),
        };
        ForeignArray::from_dlpack_parts(head, layout, None, Some(obj), options, producer, device_id)
    }
}

/// [`describe`]'s error as Python's. (`describe` boxes its errors: a `DlpackError` beside its
/// answer in one result shares that result's bytes in pieces of odd sizes, which each import
/// then copied a few bytes at a time, every load waiting on the narrower stores before it.)
#[cold]
#[allow(clippy::boxed_local)] // (The box is `describe`'s error, as it comes.)
fn unboxed(e: Box<DlpackError>) -> PyErr {
    PyErr::from(*e)
}

/// The error of a tensor whose shape and strides make no layout: it names them (the strides
/// in bytes, as read), read again from `t`.
///
/// # Safety
/// `t`'s shape, and its strides where `strided`, point to `t.ndim` (0 to `MAX_NDIM`) values,
/// as [`describe`] checked before it calls this.
#[cold]
#[inline(never)]
unsafe fn layout_refused(
    t: &DLTensor,
    strided: bool,
    itemsize: usize,
    e: &crate::layout::LayoutError,
) -> DlpackError {
    let ndim = t.ndim as usize;
    // SAFETY: this function's contract.
    let shape: Vec<i64> = unsafe { super::int64s(t.shape, ndim) }.collect();
    let strides = if strided {
        // SAFETY: as above.
        let s = unsafe { super::int64s(t.strides, ndim) };
        let bytes: Vec<i128> = s.map(|s| i128::from(s) * itemsize as i128).collect();
        format!("{bytes:?} (bytes)")
    } else {
        "NULL (C order)".to_owned()
    };
    field(
        "dl_tensor.shape and strides",
        format!("{shape:?} and {strides}"),
        e.to_string(),
    )
}

/// [`describe`], with the CUDA device the tensor names (`None` for the host's memory).
#[inline(always)]
fn describe_placed<S: Space>(
    t: &DLTensor,
    readonly: bool,
) -> Result<(TensorHead<S>, Layout, Option<u32>), Box<DlpackError>> {
    let (head, layout) = describe::<S>(t, readonly)?;
    let device_id = match device_of(t)? {
        DlpackDevice::Cuda(n) | DlpackDevice::CudaManaged(n) => Some(n),
        _ => None,
    };
    Ok((head, layout, device_id))
}

/// The tensor one of cai's own classes lends of `obj` ([`Table::own_lend`]), written to
/// `out`, with its device (which `check` accepted) and the producer's current work stream;
/// `None` where `table` is not such a table, or `obj` lends nothing (read-only memory, which a
/// lent tensor cannot mark: its managed tensor says it). Such a tensor is valid for as long as
/// `obj` lives: the import reads it and holds `obj`, where the managed tensor's export would
/// make a tensor that holds `obj` and nothing else, and a deleter to free it.
///
/// [`Table::own_lend`]: super::exchange::Table::own_lend
fn own_lent(
    obj: &Bound<'_, PyAny>,
    table: super::exchange::Table,
    out: &mut DLTensor,
    check: impl FnOnce(DlpackDevice) -> Result<(), DlpackError>,
) -> PyResult<Option<(DlpackDevice, Producer)>> {
    let Some(lend) = table.own_lend() else {
        return Ok(None);
    };
    match lend(obj, out) {
        Ok(true) => {}
        Ok(false) => return Ok(None),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyBufferError>(obj.py()) => {
            return Ok(None);
        }
        Err(e) => return Err(e),
    }
    let device = device_of(out)?;
    Ok(Some((device, table_producer(obj, table, device, check)?)))
}

/// A tensor for a table's `dltensor_from_py_object_no_sync` to write, all zeros.
pub(crate) fn unlent() -> DLTensor {
    DLTensor {
        data: std::ptr::null_mut(),
        device: dlpark::ffi::DLDevice {
            device_type: dlpark::ffi::DLDeviceType(0),
            device_id: 0,
        },
        ndim: 0,
        dtype: dlpark::ffi::DLDataType {
            code: dlpark::ffi::DLDataTypeCode(0),
            bits: 0,
            lanes: 0,
        },
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    }
}

/// The table of `obj`'s type, where it lent a tensor of `obj` (`dltensor_from_py_object_no_sync`),
/// written to `out` and valid until control returns to Python; `None` where its type has no
/// table, the table lends none, or the producer cannot lend this object (a `BufferError`:
/// cai's own for read-only memory, which a lent tensor cannot mark, though it may still
/// export it).
#[inline]
pub(crate) fn lent(
    obj: &Bound<'_, PyAny>,
    out: &mut DLTensor,
) -> PyResult<Option<super::exchange::Table>> {
    let Some(table) = super::exchange::Table::of(obj)? else {
        return Ok(None);
    };
    match table.borrowed(obj, out) {
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyBufferError>(obj.py()) => Ok(None),
        got => Ok(got?.then_some(table)),
    }
}

/// What an import reads of a lent host tensor ([`lent`]): its head and layout, checked
/// field by field as any import's tensor, read-only as [`ForeignArray::with_dlpack`]'s lent
/// views are.
#[cfg(feature = "ndarray")]
pub(crate) fn describe_lent(t: &DLTensor) -> PyResult<(TensorHead<crate::Host>, Layout)> {
    describe::<crate::Host>(t, true).map_err(unboxed)
}

/// The tensor a producer's exchange table gives for `obj`, its device, and the producer's
/// current work stream (where streams are ordered: the table orders nothing, so the import
/// orders it before the consumer's stream, as a CUDA Array Interface stream).
fn from_table(
    obj: &Bound<'_, PyAny>,
    table: super::exchange::Table,
    check: impl FnOnce(DlpackDevice) -> Result<(), DlpackError>,
) -> PyResult<(ImportedTensor, DlpackDevice, Producer)> {
    let tensor = table.managed(obj)?;
    let device = tensor.device()?;
    Ok((tensor, device, table_producer(obj, table, device, check)?))
}

/// What a table's producer did about streams, once `check` accepted the tensor's `device`:
/// nothing (the table orders nothing), its current work stream given for CUDA memory, which
/// the import orders before the consumer's stream. (Asked even where streams are not
/// ordered: the import's plan says why it orders none.)
fn table_producer(
    obj: &Bound<'_, PyAny>,
    table: super::exchange::Table,
    device: DlpackDevice,
    check: impl FnOnce(DlpackDevice) -> Result<(), DlpackError>,
) -> PyResult<Producer> {
    check(device)?;
    let stream = if device.is_cuda() {
        Some(table.current_work_stream(obj.py(), device)?)
    } else {
        None
    };
    Ok(Producer::Current(stream))
}

impl super::AnyForeignArray {
    /// Imports any DLPack producer on the side its memory is (`cai.from_dlpack`): a device
    /// array for CUDA memory (`kDLCUDA`, `kDLCUDAManaged`, `kDLCUDAHost`), a host array for
    /// `kDLCPU`; through the producer's exchange table where its type has one (and `copy` is
    /// `None`), else as [`ForeignArray::from_dlpack_with`].
    pub fn from_dlpack_with(
        obj: &Bound<'_, PyAny>,
        options: &ImportOptions,
        copy: Option<bool>,
    ) -> PyResult<Self> {
        use super::AnyForeignArray as A;
        if copy.is_none()
            && let Some(t) = super::numpy_array::read::<crate::Host>(obj)
        {
            return Ok(A::Host(ForeignArray::from_numpy(obj, t, options)?));
        }
        if copy.is_none()
            && let Some(table) = super::exchange::Table::of(obj)?
        {
            let mut t = unlent();
            if let Some((device, producer)) = own_lent(obj, table, &mut t, |_| Ok(()))? {
                return Ok(if device.is_cuda() {
                    A::Device(ForeignArray::from_own_lent(&t, obj, options, producer)?)
                } else {
                    A::Host(ForeignArray::from_own_lent(&t, obj, options, producer)?)
                });
            }
            let (tensor, device, producer) = from_table(obj, table, |_| Ok(()))?;
            return Ok(if device.is_cuda() {
                A::Device(ForeignArray::from_tensor(
                    tensor,
                    Some(obj),
                    options,
                    producer,
                )?)
            } else {
                A::Host(ForeignArray::from_tensor(
                    tensor,
                    Some(obj),
                    options,
                    producer,
                )?)
            });
        }
        // (The table was looked for: `__dlpack__` is next.)
        let device = if super::numpy_array::is_numpy_array(obj) {
            // (NumPy's memory is the host's, or host-accessible: NumPy imports no other. Its
            // tensor says which.)
            DlpackDevice::Cpu
        } else {
            dlpack_device_of(obj)?
        };
        Ok(if device.is_cuda() {
            A::Device(ForeignArray::from_dunder_dlpack(
                obj,
                options,
                copy,
                Some(device),
            )?)
        } else {
            A::Host(ForeignArray::from_dunder_dlpack(
                obj,
                options,
                copy,
                Some(device),
            )?)
        })
    }
}

/// The import [`ForeignArray::from_dlpack_with`] makes of an exact ndarray from its fields,
/// or `None` where it asks its `__dlpack__` (test support: `testing::both_numpy_paths`).
#[cfg(feature = "testing")]
pub(crate) fn numpy_array_import(
    obj: &Bound<'_, PyAny>,
    options: &ImportOptions,
) -> Option<PyResult<ForeignArray<crate::Host>>> {
    super::numpy_array::read::<crate::Host>(obj).map(|t| ForeignArray::from_numpy(obj, t, options))
}

/// What a DLPack producer did about streams.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Producer {
    /// `__dlpack__`: ordered its work before the consumer's stream, where `true`.
    Ordered(bool),
    /// The exchange table: nothing; its current work stream (where streams are ordered) is
    /// ordered before the consumer's by the import, as a CUDA Array Interface stream is.
    Current(Option<crate::stream::Stream>),
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A producer's shape and strides need not be 8-byte aligned: they are read one by one
    /// (a slice of them was undefined behaviour, which a debug build stops at).
    #[test]
    fn misaligned_shape_and_strides_are_read() {
        let dims: [i64; 4] = [4, 3, 1, 4];
        // 8-aligned words, the dims written from their second byte on: misaligned for sure.
        let mut words = [0u64; 5];
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(&mut words);
        for (i, d) in dims.iter().enumerate() {
            bytes[1 + 8 * i..9 + 8 * i].copy_from_slice(&d.to_ne_bytes());
        }
        let base = bytes.as_mut_ptr().wrapping_add(1).cast::<i64>();
        assert!(!base.is_aligned());
        let data = [0f64; 12];
        let t = DLTensor {
            data: data.as_ptr().cast_mut().cast(),
            device: dlpark::ffi::DLDevice {
                device_type: dlpark::ffi::DLDeviceType::CPU,
                device_id: 0,
            },
            ndim: 2,
            dtype: dlpark::ffi::DLDataType {
                code: dlpark::ffi::DLDataTypeCode::FLOAT,
                bits: 64,
                lanes: 1,
            },
            shape: base,
            strides: base.wrapping_add(2),
            byte_offset: 0,
        };
        let (_, layout) = describe::<crate::Host>(&t, true).unwrap();
        assert_eq!(layout.shape(), [4, 3]);
        assert_eq!(layout.strides(), [8, 32]);
    }

    /// Both ways of calling `__dlpack__` pass the same keywords, return what it returns, and
    /// propagate what it raises; the interpreter's `PyObject_VectorcallMethod` is found.
    #[test]
    fn vectorcall_and_dict_calls_agree() {
        Python::initialize();
        Python::attach(|py| {
            assert!(
                crate::python::interp::vectorcall_method().is_some(),
                "PyObject_VectorcallMethod not found"
            );
            let ns = pyo3::types::PyDict::new(py);
            py.run(
                c"class P:\n    def __dlpack__(self, **kw):\n        if kw.get('copy'):\n            raise KeyError('no copies')\n        return sorted(kw.items())\n",
                Some(&ns),
                None,
            )
            .unwrap();
            let p = ns.get_item("P").unwrap().unwrap().call0().unwrap();
            let method = intern!(py, "__dlpack__");
            let version = PyTuple::new(py, [1u32, 3]).unwrap().into_any();
            for (stream, copy, versioned) in [
                (false, false, true),
                (true, false, true),
                (true, false, false),
                (false, true, true),
            ] {
                let mut values = Vec::new();
                if stream {
                    values.push(7i64.into_pyobject(py).unwrap().into_any());
                }
                if copy {
                    values.push(PyBool::new(py, true).to_owned().into_any());
                }
                if versioned {
                    values.push(version.clone());
                }
                let names = dlpack_keywords(py, stream, copy, versioned).unwrap();
                let fast = call_method_through(
                    crate::python::interp::vectorcall_method(),
                    &p,
                    method,
                    &names,
                    &values,
                );
                let dict = call_method_through(None, &p, method, &names, &values);
                match (fast, dict) {
                    (Ok(a), Ok(b)) => {
                        assert!(a.eq(&b).unwrap(), "{a} != {b}");
                        assert_eq!(a.len().unwrap(), values.len());
                    }
                    (Err(a), Err(b)) => {
                        assert!(copy);
                        assert!(a.is_instance_of::<pyo3::exceptions::PyKeyError>(py));
                        assert!(b.is_instance_of::<pyo3::exceptions::PyKeyError>(py));
                    }
                    (a, b) => panic!("the two calls disagree: {a:?} and {b:?}"),
                }
            }
        });
    }
}
