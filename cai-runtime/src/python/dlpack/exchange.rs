//! DLPack's C exchange table (`DLPackExchangeAPI`, DLPack 1.3), both ways.
//!
//! - Producer: every cai class has `__dlpack_c_exchange_api__`, a capsule named
//!   `dlpack_exchange_api` pointing at a table of its own, made once per class and never freed
//!   ([`exchange_api`], which the generated methods call). Its functions:
//!   - `managed_tensor_from_py_object_no_sync`: the tensor `__dlpack__(max_version=(1, 3))`
//!     gives, device memory ordered before cai's current work stream (below) with an event,
//!     never a host wait;
//!   - `managed_tensor_to_py_object_no_sync`: a cai view owning the tensor (the `cai` package's
//!     `HostArrayView` / `CudaArrayView`; in another extension, a [`DlpackView`]);
//!   - `managed_tensor_allocator`: new C-contiguous host memory, or memory of the CUDA device
//!     asked for (managed memory for `kDLCUDAManaged`);
//!   - `current_work_stream`: the legacy default stream (`0x1`) for CUDA devices, the stream
//!     cai's imports order their work on by default; NULL for the host;
//!   - `dltensor_from_py_object_no_sync`: for the classes whose sides never change and say so
//!     (`Exporter::lends`, `dlpack_cache`: the `cai` package's storages and views), a tensor
//!     lent from what the object keeps (its shape and strides made at the first export), no
//!     allocation, device memory ordered as above; read-only memory is refused, as a lent
//!     tensor cannot say it is. Other classes (derived classes build their layout on every
//!     export) have nothing to lend that outlives the call: theirs is NULL, as the standard
//!     allows, and a consumer uses `managed_tensor_from_py_object_no_sync`.
//!
//!   Errors are Python exceptions (the allocator's go through `set_error`), a panic included;
//!   nothing unwinds into the consumer.
//! - Consumer: [`Table::of`] finds a producer's table on its type (cached per type), and
//!   `ForeignArray::from_dlpack` uses it in place of `__dlpack__`.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::mem::MaybeUninit;
use std::ptr::NonNull;

use dlpark::ffi::{
    DLDeviceType, DLManagedTensorVersioned, DLPackExchangeAPI, DLPackExchangeAPIHeader,
    DLPackVersion, DLTensor,
};
use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::{ffi, intern};

use super::import::ImportedTensor;
use super::{DLPACK_VERSION, DlpackDevice, DlpackError};
use crate::descriptor::{Device, Host};
use crate::python::protocol::Exporter;
use crate::python::{ForeignArray, Memo};
use crate::sync::ImportOptions;

/// The capsule's name.
const EXCHANGE_API: &CStr = c"dlpack_exchange_api";

/// The first DLPack version with the exchange table: tables of older versions are not read.
const FIRST_VERSION: (u32, u32) = (1, 2);

/// How a class's table reaches an instance's [`Exporter`]: the generated methods implement it
/// for each class. Not an API.
#[doc(hidden)]
pub trait ExchangeClass: 'static {
    /// Whether the table lends tensors (`dltensor_from_py_object_no_sync`): the class's
    /// `Exporter::lends`.
    fn lends() -> bool {
        false
    }

    /// What `f` makes of the exporter of `obj`, an instance of the class (a `TypeError` for
    /// any other object: a consumer may pass one). Generic, not a `dyn` callback: a callback
    /// shared by every caller let the profile-guided build guess its targets and inline all
    /// of them into each caller (the storage's `managed_tensor_from_py_object_no_sync` was
    /// 12.5 KB of code with a 2.6 KB stack frame, `__dlpack__` 16.6 KB).
    fn with_exporter<R, F: FnOnce(&dyn Exporter) -> PyResult<R>>(
        obj: &Bound<'_, PyAny>,
        f: F,
    ) -> PyResult<R>;
}

/// `__dlpack_c_exchange_api__` of class `C`: a capsule of a table made now and never freed
/// (DLPack: a table lives as long as the process). Called once per class, when Python makes
/// the class's type object.
pub fn exchange_api<C: ExchangeClass>(py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
    let table: &'static DLPackExchangeAPI = Box::leak(Box::new(DLPackExchangeAPI {
        header: DLPackExchangeAPIHeader {
            version: DLPackVersion {
                major: DLPACK_VERSION.0,
                minor: DLPACK_VERSION.1,
            },
            prev_api: std::ptr::null_mut(),
        },
        managed_tensor_allocator: Some(allocate),
        managed_tensor_from_py_object_no_sync: Some(from_py_object::<C>),
        managed_tensor_to_py_object_no_sync: Some(to_py_object),
        dltensor_from_py_object_no_sync: if C::lends() { Some(lend::<C>) } else { None },
        current_work_stream: Some(current_work_stream),
    }));
    let p = std::ptr::from_ref(table).cast_mut().cast::<c_void>();
    if C::lends() {
        OWN_LENDING_TABLES
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((p as usize, own_lend::<C>));
    }
    // SAFETY: a non-null pointer to a table that is never freed, and a static name; no
    // destructor (the table outlives the capsule).
    let capsule = unsafe { ffi::PyCapsule_New(p, EXCHANGE_API.as_ptr(), None) };
    if capsule.is_null() {
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference, just made.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) })
}

/// Runs `f` for C code that calls cai holding the GIL (a table function taking or giving a
/// Python object, whose caller must hold it to hand one over and to be given an exception;
/// CPython calling cai's `__dlpack__`): on that GIL, without PyO3's `PyGILState_Ensure`
/// (~20 ns a call). `None` once `f`'s error is set as the Python exception; a panic becomes a
/// `RuntimeError` naming `what`, never an unwind into C.
///
/// PyO3's own count of attached frames stays zero while `f` runs, so a `Py` dropped in `f`
/// would wait in PyO3's pool for its next attach. A call that succeeds drops none; one that
/// fails may (an error raised, or one put aside while its message was made), so the error is
/// set attached: that releases them at once.
///
/// # Safety
/// The calling thread holds the GIL.
pub(super) unsafe fn on_callers_gil<R>(
    what: &str,
    f: impl FnOnce(Python<'_>) -> PyResult<R>,
) -> Option<R> {
    caught(what, || {
        // SAFETY: this function's contract.
        let py = unsafe { Python::assume_attached() };
        f(py).map_err(|e| Python::attach(|py| e.restore(py))).ok()
    })
}

/// `run`, a panic in it set as a `RuntimeError` naming `what` (`None`), never unwound into C.
fn caught<R>(what: &str, run: impl FnOnce() -> Option<R>) -> Option<R> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|_| {
        Python::attach(|py| {
            PyRuntimeError::new_err(format!("cai's {what} panicked (a bug in cai)")).restore(py)
        });
        None
    })
}

/// Runs a table function: 0 on success, -1 with the error set as the Python exception.
/// `holds_gil`: the function takes or gives a Python object, so its caller holds the GIL
/// ([`on_callers_gil`]); else the thread is attached first.
fn guarded(what: &str, holds_gil: bool, f: impl FnOnce(Python<'_>) -> PyResult<()>) -> c_int {
    let done = if holds_gil {
        // SAFETY: the caller holds the GIL (above).
        unsafe { on_callers_gil(what, f) }
    } else {
        caught(what, || {
            Python::attach(|py| f(py).map_err(|e| e.restore(py)).ok())
        })
    };
    if done.is_some() { 0 } else { -1 }
}

/// `managed_tensor_from_py_object_no_sync`.
///
/// # Safety
/// Called by a consumer holding the GIL, with `obj` a live object and `out` writable or null.
unsafe extern "C" fn from_py_object<C: ExchangeClass>(
    obj: *mut c_void,
    out: *mut *mut DLManagedTensorVersioned,
) -> c_int {
    // SAFETY: this function's contract.
    unsafe {
        write_made::<C, _, _>(
            "managed_tensor_from_py_object_no_sync",
            obj,
            out,
            |obj, e, _| crate::python::protocol::exchange_tensor(obj, e),
            |made, out| {
                out.write(made.into_raw());
            },
        )
    }
}

/// What one of this extension's own tables lends, called from Rust by cai's imports
/// ([`Table::own_lend`]): `false`, nothing written and no exception made, for read-only
/// memory, which the table's C function refuses with a `BufferError`.
pub(crate) type OwnLend = for<'py> fn(&Bound<'py, PyAny>, &mut DLTensor) -> PyResult<bool>;

/// [`OwnLend`] of class `C`.
fn own_lend<C: ExchangeClass>(obj: &Bound<'_, PyAny>, out: &mut DLTensor) -> PyResult<bool> {
    // SAFETY: `MaybeUninit<DLTensor>` has `DLTensor`'s layout, and only whole tensors are
    // written through it: `out` stays initialized.
    let out = unsafe { &mut *std::ptr::from_mut(out).cast::<MaybeUninit<DLTensor>>() };
    C::with_exporter(obj, |e| {
        crate::python::protocol::lend_tensor(obj, e, out, true)
    })
}

/// `dltensor_from_py_object_no_sync`: a tensor lent while `obj` lives unchanged (until control
/// returns to Python).
///
/// # Safety
/// Called by a consumer holding the GIL, with `obj` a live object and `out` writable or null.
unsafe extern "C" fn lend<C: ExchangeClass>(obj: *mut c_void, out: *mut DLTensor) -> c_int {
    // SAFETY: this function's contract.
    unsafe {
        write_made::<C, _, _>(
            "dltensor_from_py_object_no_sync",
            obj,
            out,
            crate::python::protocol::lent_tensor,
            |(), _| {},
        )
    }
}

/// A table function: what `make` makes of `obj`, an instance of `C`, handed over to `out` by
/// `finish` once the exporter is done with (what owns anything is dropped, not handed over,
/// where the exporter fails after `make`). `make` may write plain values to `out` itself: a
/// lent tensor is written where the consumer reads it, not moved there through each layer.
///
/// # Safety
/// Called by a consumer holding the GIL, with `obj` a live object and `out` writable or null.
unsafe fn write_made<C: ExchangeClass, M, T>(
    what: &str,
    obj: *mut c_void,
    out: *mut T,
    make: impl FnOnce(&Bound<'_, PyAny>, &dyn Exporter, &mut MaybeUninit<T>) -> PyResult<M>,
    finish: impl FnOnce(M, &mut MaybeUninit<T>),
) -> c_int {
    guarded(what, true, |py| {
        if obj.is_null() || out.is_null() {
            return Err(PyValueError::new_err(format!(
                "{what}: {} is NULL",
                if obj.is_null() { "py_object" } else { "out" }
            )));
        }
        // SAFETY: a live object (the caller's contract), borrowed for this call.
        let obj = unsafe { Bound::from_borrowed_ptr(py, obj.cast()) };
        // SAFETY: `out` is writable (checked non-null; the caller's contract); as a
        // `MaybeUninit` it is only written, whatever it held.
        let out = unsafe { &mut *out.cast::<MaybeUninit<T>>() };
        let made = C::with_exporter(&obj, |e| make(&obj, e, &mut *out))?;
        finish(made, out);
        Ok(())
    })
}

/// The function making the view `managed_tensor_to_py_object_no_sync` returns: the `cai`
/// package's own view classes where it set one ([`set_exchange_view`]), else [`DlpackView`].
pub type ExchangeViewFn = for<'py> fn(Python<'py>, AnyForeignArray) -> PyResult<Bound<'py, PyAny>>;

static VIEW: std::sync::OnceLock<ExchangeViewFn> = std::sync::OnceLock::new();

/// Sets the class `managed_tensor_to_py_object_no_sync` makes, for this extension module (each
/// extension has its own copy of cai-runtime); the first call wins. Not an API: the `cai`
/// package's.
#[doc(hidden)]
pub fn set_exchange_view(f: ExchangeViewFn) {
    let _ = VIEW.set(f);
}

/// An import of either space.
pub enum AnyForeignArray {
    /// Device memory (`kDLCUDA`, `kDLCUDAManaged`, `kDLCUDAHost`).
    Device(ForeignArray<Device>),
    /// Host memory (`kDLCPU`).
    Host(ForeignArray<Host>),
}

/// `managed_tensor_to_py_object_no_sync`: the tensor's ownership passes to a cai view; on
/// error, its deleter is called (the tensor was ours).
///
/// # Safety
/// Called by a consumer holding the GIL, with `tensor` an owning versioned tensor or null and
/// `out` writable or null.
unsafe extern "C" fn to_py_object(
    tensor: *mut DLManagedTensorVersioned,
    out: *mut *mut c_void,
) -> c_int {
    guarded("managed_tensor_to_py_object_no_sync", true, |py| {
        let Some(tensor) = NonNull::new(tensor) else {
            return Err(PyValueError::new_err(
                "managed_tensor_to_py_object_no_sync: tensor is NULL",
            ));
        };
        // SAFETY: an owning tensor whose ownership the caller hands over (the standard's
        // "stolen"): its deleter runs once, when the import drops.
        let tensor = unsafe { ImportedTensor::from_raw(tensor) };
        if out.is_null() {
            return Err(PyValueError::new_err(
                "managed_tensor_to_py_object_no_sync: out_py_object is NULL",
            ));
        }
        let device = tensor.device()?;
        let options = ImportOptions {
            sync: false,
            ..ImportOptions::default()
        };
        let array = if device.is_cuda() {
            AnyForeignArray::Device(ForeignArray::from_tensor(
                tensor,
                None,
                &options,
                super::Producer::Ordered(false),
            )?)
        } else {
            AnyForeignArray::Host(ForeignArray::from_tensor(
                tensor,
                None,
                &options,
                super::Producer::Ordered(false),
            )?)
        };
        let view = match VIEW.get() {
            Some(f) => f(py, array)?,
            None => Bound::new(py, DlpackView(array))?.into_any(),
        };
        // SAFETY: `out` is writable (checked non-null); the new reference is the caller's.
        unsafe { *out = view.into_ptr().cast() };
        Ok(())
    })
}

/// `current_work_stream`: the legacy default stream for CUDA memory, NULL for the host.
///
/// # Safety
/// Called by a consumer holding the GIL, with `out` writable or null.
unsafe extern "C" fn current_work_stream(
    device_type: DLDeviceType,
    device_id: i32,
    out: *mut *mut c_void,
) -> c_int {
    guarded("current_work_stream", false, |_| {
        if out.is_null() {
            return Err(PyValueError::new_err(
                "current_work_stream: out_current_stream is NULL",
            ));
        }
        let device = DlpackDevice::from_pair(device_type.0 as i64, device_id as i64)
            .ok_or_else(|| {
                DlpackError::Device(format!(
                    "current_work_stream of device ({}, {device_id}): cai works on kDLCPU (1, 0), kDLCUDA (2, n), kDLCUDAHost (3, 0) and kDLCUDAManaged (13, n)",
                    device_type.0
                ))
            })?;
        let stream = if device.is_cuda() {
            crate::stream::Stream::LegacyDefault.as_raw() as usize
        } else {
            0
        };
        // SAFETY: `out` is writable (checked non-null).
        unsafe { *out = stream as *mut c_void };
        Ok(())
    })
}

/// `managed_tensor_allocator`: errors go to `set_error` (no Python needed), kind `ValueError`
/// for a prototype cai cannot allocate, `MemoryError` where the memory is not there.
///
/// # Safety
/// `prototype` is a valid tensor or null, `out` writable or null, `set_error` callable with
/// `error_ctx` or null.
unsafe extern "C" fn allocate(
    prototype: *mut DLTensor,
    out: *mut *mut DLManagedTensorVersioned,
    error_ctx: *mut c_void,
    set_error: Option<unsafe extern "C" fn(*mut c_void, *const c_char, *const c_char)>,
) -> c_int {
    let made = std::panic::catch_unwind(|| {
        if prototype.is_null() || out.is_null() {
            return Err((
                "ValueError",
                "managed_tensor_allocator: prototype or out is NULL".to_owned(),
            ));
        }
        // SAFETY: a valid tensor (the caller's contract), read during this call.
        let prototype = unsafe { &*prototype };
        super::export::allocate(prototype)
    })
    .unwrap_or_else(|_| {
        Err((
            "RuntimeError",
            "cai's managed_tensor_allocator panicked (a bug in cai)".to_owned(),
        ))
    });
    match made {
        Ok(tensor) => {
            // SAFETY: `out` is writable (checked non-null above, or `made` is an error).
            unsafe { *out = tensor.into_raw() };
            0
        }
        Err((kind, message)) => {
            if !out.is_null() {
                // SAFETY: as above.
                unsafe { *out = std::ptr::null_mut() };
            }
            if let Some(set_error) = set_error {
                let kind = CString::new(kind).unwrap_or_default();
                let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
                // SAFETY: the consumer's callback with its context (the caller's contract) and
                // two NUL-terminated strings alive during the call.
                unsafe { set_error(error_ctx, kind.as_ptr(), message.as_ptr()) };
            }
            -1
        }
    }
}

/// A view of a tensor handed to cai through `managed_tensor_to_py_object_no_sync` in an
/// extension that set no view class of its own: it owns the tensor (the producer's deleter runs
/// when it is collected) and exports it through every protocol of its memory's side.
#[pyclass(frozen, module = "cai", name = "DlpackView")]
pub struct DlpackView(AnyForeignArray);

/// An import's one side. Its descriptor is vouched for: the producer answers for its memory
/// and stream (the protocols' trust), and the import keeps alive what it read through (owner,
/// dicts, buffers, tensors), which every export of it keeps in turn.
impl Exporter for AnyForeignArray {
    fn device(
        &self,
    ) -> Option<Result<super::super::Export<'_, Device>, crate::error::DescriptorError>> {
        match self {
            // SAFETY: as above: a producer's descriptor, of memory the import keeps alive.
            AnyForeignArray::Device(a) => Some(Ok(unsafe {
                super::super::Export::vouched(std::borrow::Cow::Borrowed(a.descriptor()))
            })),
            AnyForeignArray::Host(_) => None,
        }
    }
    fn host(
        &self,
    ) -> Option<Result<super::super::Export<'_, Host>, crate::error::DescriptorError>> {
        match self {
            // SAFETY: as above.
            AnyForeignArray::Host(a) => Some(Ok(unsafe {
                super::super::Export::vouched(std::borrow::Cow::Borrowed(a.descriptor()))
            })),
            AnyForeignArray::Device(_) => None,
        }
    }
    fn dlpack_side(&self, _: Option<DlpackDevice>) -> super::super::Side {
        match self {
            AnyForeignArray::Device(_) => super::super::Side::Device,
            AnyForeignArray::Host(_) => super::super::Side::Host,
        }
    }
}

impl Exporter for DlpackView {
    fn device(
        &self,
    ) -> Option<Result<super::super::Export<'_, Device>, crate::error::DescriptorError>> {
        self.0.device()
    }
    fn host(
        &self,
    ) -> Option<Result<super::super::Export<'_, Host>, crate::error::DescriptorError>> {
        self.0.host()
    }
    fn dlpack_side(&self, wants: Option<DlpackDevice>) -> super::super::Side {
        self.0.dlpack_side(wants)
    }
}

#[crate::pymethods(cuda, host, exporter, crate = "crate")]
impl DlpackView {
    /// Size of each dimension.
    #[getter]
    fn shape(&self) -> Vec<usize> {
        match &self.0 {
            AnyForeignArray::Device(a) => a.layout().shape().to_vec(),
            AnyForeignArray::Host(a) => a.layout().shape().to_vec(),
        }
    }
}

/// A producer's table, found on its type ([`Table::of`]); the capsule holding it is kept by
/// the cache, so the table outlives every use even where a producer frees it with its capsule.
#[derive(Clone, Copy)]
pub(crate) struct Table {
    api: &'static DLPackExchangeAPI,
    /// Where this is one of this extension's own tables that lend ([`OWN_LENDING_TABLES`]):
    /// its lending, called from Rust.
    own: Option<OwnLend>,
}

/// The addresses of the tables [`exchange_api`] made for classes that lend, with their
/// lending: theirs lend a tensor valid for as long as the object lives, since their sides never
/// change (a lent tensor is valid only until control returns to Python, for any other
/// producer). Read when a type's table is first found, never on an exchange.
static OWN_LENDING_TABLES: std::sync::Mutex<Vec<(usize, OwnLend)>> =
    std::sync::Mutex::new(Vec::new());

/// A table found on a type, with the capsule holding it.
struct Found {
    _capsule: Py<PyAny>,
    table: Table,
}

// SAFETY: `Table` points at a table that lives as long as the process (the standard's
// contract), or as long as its capsule, which is held beside it; it is only read.
unsafe impl Send for Found {}

/// Types seen lately, with their table (or none): a type is held, so its address is never
/// another type's while cached. (DLPack lets consumers cache the table per type; a table set on
/// a type cai has cached is seen once the type leaves this memo, and is no longer the last
/// type looked up on the thread: [`Table::of`].)
static TABLES: Memo<Py<PyAny>, Option<Found>, 16> = Memo::new();

impl Table {
    /// The table on `obj`'s type, walked back (`prev_api`) to a version cai reads; `None` where
    /// the type has none, or none cai reads. A malformed table (a capsule of another name, a
    /// NULL function the standard requires) is an error naming it.
    pub(crate) fn of(obj: &Bound<'_, PyAny>) -> PyResult<Option<Table>> {
        let py = obj.py();
        let ty = obj.get_type();
        let key = ty.as_ptr();
        // The type this thread looked up last, with the memo's answer and its capsule, held as
        // the memo holds them (its address names no other type while kept): found without the
        // memo's lock.
        type Last = std::cell::RefCell<Option<(Py<PyAny>, Option<(Py<PyAny>, Table)>)>>;
        thread_local! {
            static LAST: Last = const { std::cell::RefCell::new(None) };
        }
        let last = |l: &Last| {
            let l = l.try_borrow().ok()?;
            let (_, found) = l.as_ref().filter(|(t, _)| t.as_ptr() == key)?;
            Some(found.as_ref().map(|(_, table)| *table))
        };
        if let Some(table) = LAST.try_with(last).ok().flatten() {
            return Ok(table);
        }
        let cached = TABLES.get(
            |k| k.as_ptr() == key,
            |f| f.as_ref().map(|f| (f._capsule.clone_ref(py), f.table)),
        );
        let found = match cached {
            Some(found) => found,
            None => {
                let found = match ty.getattr_opt(intern!(py, "__dlpack_c_exchange_api__"))? {
                    None => None,
                    Some(capsule) => Self::read(&capsule)?.map(|table| (capsule.unbind(), table)),
                };
                let stored = found.as_ref().map(|(capsule, table)| Found {
                    _capsule: capsule.clone_ref(py),
                    table: *table,
                });
                TABLES.insert(ty.clone().into_any().unbind(), stored);
                found
            }
        };
        let table = found.as_ref().map(|(_, table)| *table);
        let entry = (ty.into_any().unbind(), found);
        // (What it held is released once the slot is let go: its release may run Python code,
        // a weakref's callback, which may look a table up again.)
        let old = LAST
            .try_with(|l| l.try_borrow_mut().ok().map(|mut l| l.replace(entry)))
            .ok()
            .flatten();
        drop(old);
        Ok(table)
    }

    /// The table a `__dlpack_c_exchange_api__` value points at, of a version cai reads.
    fn read(capsule: &Bound<'_, PyAny>) -> PyResult<Option<Table>> {
        let bad = |why: String| {
            DlpackError::Capsule(format!(
                "__dlpack_c_exchange_api__ of the producer's type: {why}"
            ))
        };
        let p = capsule.as_ptr();
        // SAFETY: `p` is a live object: PyCapsule_CheckExact reads its type.
        if unsafe { ffi::PyCapsule_CheckExact(p) } == 0 {
            // Not a capsule (None: a type without a table; an address as an int, which cai does
            // not dereference, since any Python code can write one): no table cai reads. (As
            // for any change of the attribute, a type cai has cached keeps its first answer
            // until it leaves the cache: see `TABLES`.)
            return Ok(None);
        }
        // SAFETY: `p` is a live capsule; PyCapsule_IsValid raises nothing.
        if unsafe { ffi::PyCapsule_IsValid(p, EXCHANGE_API.as_ptr()) } != 1 {
            // SAFETY: `p` is a capsule: GetName returns its name, or null (an invalid capsule:
            // one holding NULL) with an exception set, cleared here (no Python code runs).
            let name = unsafe { ffi::PyCapsule_GetName(p) };
            let why = if name.is_null() {
                // SAFETY: as above.
                unsafe { ffi::PyErr_Clear() };
                "a capsule holding NULL (or with no name), not a valid 'dlpack_exchange_api' capsule".to_owned()
            } else {
                // SAFETY: a capsule's name is a NUL-terminated string it keeps.
                let name = unsafe { CStr::from_ptr(name) }.to_string_lossy();
                format!("a capsule named '{name}', not 'dlpack_exchange_api'")
            };
            return Err(bad(why).into());
        }
        // SAFETY: a valid capsule of this name: its pointer is non-null.
        let mut header = unsafe { ffi::PyCapsule_GetPointer(p, EXCHANGE_API.as_ptr()) }
            .cast::<DLPackExchangeAPIHeader>();
        // A chain of versions, newest first; a cycle or an endless chain stops here.
        for _ in 0..16 {
            if header.is_null() {
                return Ok(None);
            }
            // SAFETY: the producer's table, alive for the process (the standard's contract);
            // its header is laid out the same in every version.
            let h = unsafe { &*header };
            let v = (h.version.major, h.version.minor);
            if v.0 == DLPACK_VERSION.0 && v >= FIRST_VERSION {
                // SAFETY: a table of DLPack 1.2 or later, 1.x: the layout of `DLPackExchangeAPI`
                // (later minor versions only add at the end).
                let t = unsafe { &*header.cast::<DLPackExchangeAPI>() };
                for (name, missing) in [
                    (
                        "managed_tensor_from_py_object_no_sync",
                        t.managed_tensor_from_py_object_no_sync.is_none(),
                    ),
                    ("current_work_stream", t.current_work_stream.is_none()),
                ] {
                    if missing {
                        return Err(bad(format!(
                            "version {}.{}, `{name}` is NULL, which the standard does not allow",
                            v.0, v.1
                        ))
                        .into());
                    }
                }
                let own = OWN_LENDING_TABLES
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .iter()
                    .find(|(table, _)| *table == header as usize)
                    .map(|(_, lend)| *lend);
                return Ok(Some(Table { api: t, own }));
            }
            header = h.prev_api;
        }
        Ok(None)
    }

    /// `managed_tensor_from_py_object_no_sync(obj)`: the owning tensor; the producer's
    /// exception where it raised one.
    pub(crate) fn managed(self, obj: &Bound<'_, PyAny>) -> PyResult<ImportedTensor> {
        let py = obj.py();
        let f = self
            .api
            .managed_tensor_from_py_object_no_sync
            .expect("checked by `read`");
        let mut out: *mut DLManagedTensorVersioned = std::ptr::null_mut();
        // SAFETY: the producer's function, given an instance of the type its table was found
        // on and a writable out-pointer; called holding the GIL, with no exception pending.
        let rc = unsafe { f(obj.as_ptr().cast(), &mut out) };
        // Only a call that returned 0 hands a tensor over ("NULL on failure": a producer that
        // failed after writing `out` may have freed it already).
        let tensor = NonNull::new(out)
            .filter(|_| rc == 0)
            // SAFETY: an owning tensor the producer handed over: ours to delete, once (also
            // where it returned 0 with an exception set, which is refused below).
            .map(|p| unsafe { ImportedTensor::from_raw(p) });
        check_call(py, "managed_tensor_from_py_object_no_sync", rc)?;
        tensor.ok_or_else(|| {
            DlpackError::Capsule(
                "the producer's managed_tensor_from_py_object_no_sync returned 0 but no tensor (out = NULL)".into(),
            )
            .into()
        })
    }

    /// The lending of one of this extension's own tables that lend (`None` for any other
    /// table): its lent tensor is valid for as long as the object lives (not only until
    /// control returns to Python), as the managed tensor it would export is, which holds
    /// nothing but the object.
    pub(crate) fn own_lend(self) -> Option<OwnLend> {
        self.own
    }

    /// `dltensor_from_py_object_no_sync(obj)`, where the table has it: a tensor written to
    /// `out`, valid until this call's caller returns (`false`: the producer does not lend
    /// tensors, and `out` is as it was).
    pub(crate) fn borrowed(self, obj: &Bound<'_, PyAny>, out: &mut DLTensor) -> PyResult<bool> {
        let Some(f) = self.api.dltensor_from_py_object_no_sync else {
            return Ok(false);
        };
        // SAFETY: the producer's function, given an instance of the type its table was found
        // on and a writable tensor; called holding the GIL, with no exception pending.
        let rc = unsafe { f(obj.as_ptr().cast(), out) };
        check_call(obj.py(), "dltensor_from_py_object_no_sync", rc)?;
        Ok(true)
    }

    /// `current_work_stream` of `device`: the producer's stream (NULL: the legacy default
    /// stream, as the driver reads a NULL stream).
    pub(crate) fn current_work_stream(
        self,
        py: Python<'_>,
        device: DlpackDevice,
    ) -> PyResult<crate::stream::Stream> {
        let f = self.api.current_work_stream.expect("checked by `read`");
        let (kind, id) = device.to_pair();
        let mut out: *mut c_void = std::ptr::null_mut();
        // SAFETY: the producer's function with a device and a writable out-pointer, called
        // holding the GIL.
        let rc = unsafe { f(DLDeviceType(kind as u32), id, &mut out) };
        check_call(py, "current_work_stream", rc)?;
        if out.is_null() {
            return Ok(crate::stream::Stream::LegacyDefault);
        }
        crate::stream::Stream::from_raw(out as usize as u64).map_err(|e| {
            DlpackError::Capsule(format!(
                "the producer's current_work_stream gave {:#x}: {e}",
                out as usize
            ))
            .into()
        })
    }
}

/// The outcome of a producer's table function: `Ok` where it returned 0 and set no exception
/// (asked of the thread's state, a read), else [`call_failed`]'s error.
#[inline]
fn check_call(py: Python<'_>, name: &str, rc: c_int) -> PyResult<()> {
    // SAFETY: attached (`py`); PyErr_Occurred only reads the thread's pending exception.
    if rc == 0 && unsafe { ffi::PyErr_Occurred() }.is_null() {
        return Ok(());
    }
    Err(call_failed(py, name, rc))
}

/// The error of a producer's table function that failed: its own exception where it raised
/// one, a `RuntimeError` where it said -1 without one or 0 with one (that exception its cause).
/// (Out of line: taken as an `Option<PyErr>` on every call, the exception that was not there
/// went through the stack as 64 bytes, written a word and read back whole, the read waiting
/// for the write to reach the cache.)
#[cold]
#[inline(never)]
fn call_failed(py: Python<'_>, name: &str, rc: c_int) -> PyErr {
    match (rc, PyErr::take(py)) {
        (0, Some(e)) => {
            let err = PyRuntimeError::new_err(format!(
                "the producer's {name} returned 0 (success) with an exception set"
            ));
            err.set_cause(py, Some(e));
            err
        }
        (_, Some(e)) => e,
        (rc, None) => PyRuntimeError::new_err(format!(
            "the producer's {name} returned {rc} without setting an exception"
        )),
    }
}

/// The `TypeError` of a class's table given an object of another type (the generated
/// `ExchangeClass::with_exporter`'s).
pub fn wrong_type<T: pyo3::PyTypeInfo>(obj: &Bound<'_, PyAny>) -> PyErr {
    let name = |t: Bound<'_, pyo3::types::PyType>| {
        t.qualname()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".to_owned())
    };
    let class = name(T::type_object(obj.py()));
    PyTypeError::new_err(format!(
        "the exchange table of {class} was given a {}, not a {class}",
        name(obj.get_type())
    ))
}
