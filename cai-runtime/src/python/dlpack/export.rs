//! `__dlpack__` and `__dlpack_device__`: a descriptor as a DLPack capsule.
//!
//! A capsule owns one heap block, [`Exported`]: the managed tensor (legacy or versioned) first,
//! then the shape and strides it points to, then what keeps the memory alive (the exporting
//! Python object, or the copy). The tensor's deleter frees the block, on any thread, with or
//! without the GIL (a Python object released without it is released when a thread next holds
//! it); a capsule dropped unconsumed (still named `dltensor...`) calls the deleter itself.

use std::borrow::Cow;
use std::ffi::CStr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use dlpark::DlpackFlags;
use dlpark::ffi::{
    DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion, DLTensor,
};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;

use super::{DLPACK_VERSION, DLTENSOR, DLTENSOR_VERSIONED, DlpackDevice, DlpackError, dl_dtype};
use crate::descriptor::{ArrayDescriptor, Space};
use crate::layout::Layout;
use crate::python::protocol::Resolved;
use crate::stream::Stream;

/// What `__dlpack__`'s consumer asked for, read from its keyword arguments
/// ([`DlpackRequest::from_args`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DlpackRequest {
    stream: ConsumerStream,
    max_version: Option<(u32, u32)>,
    dl_device: Option<DlpackDevice>,
    copy: Option<bool>,
}

/// The consumer's `stream`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum ConsumerStream {
    /// `None`: the legacy default stream for CUDA, nothing for the host.
    #[default]
    Unspecified,
    /// `-1`: the consumer orders the streams itself.
    NoSync,
    /// A stream of the data's device the consumer will work on.
    On(Stream),
}

impl std::fmt::Display for ConsumerStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConsumerStream::Unspecified => f.write_str("None"),
            ConsumerStream::NoSync => f.write_str("-1"),
            ConsumerStream::On(s) => write!(f, "{}", s.as_raw()),
        }
    }
}

fn repr(v: &Bound<'_, PyAny>) -> String {
    v.repr()
        .map(|r| crate::shown::shorten(&r.to_string_lossy()).into_owned())
        .unwrap_or_else(|_| "<unprintable>".to_owned())
}

/// An int argument, read once through the one integer reader (`__index__` included; an error
/// it raises propagates); `None` where `v` is not an int (a bool is not); one beyond i128 as
/// `i128::MAX`, which every range here refuses.
fn int_arg(v: &Bound<'_, PyAny>) -> PyResult<Option<i128>> {
    Ok(match crate::python::parse::int(v)? {
        Ok((n, _)) => Some(n),
        Err("not an int") => None,
        Err(_) => Some(i128::MAX),
    })
}

fn int_pair(v: &Bound<'_, PyAny>, key: &'static str) -> PyResult<(i128, i128)> {
    if let Some((a, b)) = crate::python::fast::exact_int_pair(v) {
        return Ok((a.into(), b.into()));
    }
    let wrong = || DlpackError::ArgumentType {
        key,
        value: repr(v),
        expected: "None or a tuple of two ints",
    };
    let t = v.cast::<PyTuple>().map_err(|_| wrong())?;
    if t.len() != 2 {
        return Err(wrong().into());
    }
    let int = |i| -> PyResult<i128> { int_arg(&t.get_item(i)?)?.ok_or_else(|| wrong().into()) };
    Ok((int(0)?, int(1)?))
}

/// An exact tuple of two exact ints (`max_version` as consumers send it), read at most once
/// per object in a row: such a tuple never changes, so the object seen last on this thread
/// (kept alive here, so that its address names no other object) has the value read then.
/// NumPy's `from_dlpack` passes one tuple on every call; reading one costs more than the rest
/// of the arguments together through the stable ABI. (A thread that ends without the GIL
/// leaves its tuple to PyO3's pool, released at PyO3's next call on any thread.)
fn known_pair(v: &Bound<'_, PyAny>) -> Option<(i64, i64)> {
    type Last = std::cell::RefCell<Option<(Py<PyAny>, (i64, i64))>>;
    thread_local! {
        static LAST: Last = const { std::cell::RefCell::new(None) };
    }
    LAST.try_with(|last| {
        let mut last = last.try_borrow_mut().ok()?;
        if let Some((o, pair)) = &*last
            && o.as_ptr() == v.as_ptr()
        {
            return Some(*pair);
        }
        let pair = crate::python::fast::exact_int_pair(v)?;
        // (Released here, attached: an exact tuple of ints runs no code as it goes.)
        let old = last.replace((v.clone().unbind(), pair));
        drop(old.map(|(o, _)| o.into_bound(v.py())));
        Some(pair)
    })
    .ok()
    .flatten()
}

impl DlpackRequest {
    /// A consumer that asks for nothing: the legacy capsule, no copy, the data's own device,
    /// the legacy default stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// The request `__dlpack__(*, stream, max_version, dl_device, copy)` makes; each argument
    /// `None` when not given. A value of the wrong type is a `TypeError`, a wrong value (a
    /// `stream` of 0, as the standard says; a negative version) a `ValueError`, each naming the
    /// keyword and value; a device cai cannot export to is a `BufferError`. An exception an
    /// argument's `__index__` raises propagates.
    pub fn from_args(
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<&Bound<'_, PyAny>>,
        dl_device: Option<&Bound<'_, PyAny>>,
        copy: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let mut out = DlpackRequest::default();
        out.read_args(stream, max_version, dl_device, copy)?;
        Ok(out)
    }

    /// [`Self::from_args`], read into `self` (a default request). (Returned in a result, a
    /// request went through the stack a few bytes at a time, each load waiting for the
    /// narrower stores before it to reach the cache.)
    pub(crate) fn read_args(
        &mut self,
        stream: Option<&Bound<'_, PyAny>>,
        max_version: Option<&Bound<'_, PyAny>>,
        dl_device: Option<&Bound<'_, PyAny>>,
        copy: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let out = self;
        if let Some(s) = stream.filter(|s| !s.is_none()) {
            out.stream = consumer_stream(s)?;
        }
        if let Some(v) = max_version.filter(|v| !v.is_none()) {
            let (major, minor) = match known_pair(v) {
                Some((a, b)) => (a.into(), b.into()),
                None => int_pair(v, "max_version")?,
            };
            match (u32::try_from(major), u32::try_from(minor)) {
                (Ok(a), Ok(b)) => out.max_version = Some((a, b)),
                _ => {
                    return Err(DlpackError::Argument {
                        key: "max_version",
                        value: repr(v),
                        expected: "a (major, minor) version of ints from 0 to 2**32 - 1",
                    }
                    .into());
                }
            }
        }
        if let Some(v) = dl_device.filter(|v| !v.is_none()) {
            let (kind, id) = int_pair(v, "dl_device")?;
            let pair = i64::try_from(kind).ok().zip(i64::try_from(id).ok());
            out.dl_device = Some(pair.and_then(|(k, i)| DlpackDevice::from_pair(k, i)).ok_or_else(|| {
                DlpackError::Unmet(format!(
                    "cannot export to dl_device {}: cai exports to kDLCPU (1, 0), kDLCUDA (2, n), kDLCUDAHost (3, 0) and kDLCUDAManaged (13, n) with a device id n >= 0",
                    repr(v)
                ))
            })?);
        }
        if let Some(v) = copy.filter(|v| !v.is_none()) {
            // (A NumPy bool too, as NumPy's own `__dlpack__` takes.)
            let b = v.extract::<bool>().map_err(|_| DlpackError::ArgumentType {
                key: "copy",
                value: repr(v),
                expected: "None, True or False",
            })?;
            out.copy = Some(b);
        }
        Ok(())
    }

    /// What the exchange table's `managed_tensor_from_py_object_no_sync` asks for: a versioned
    /// tensor of the data where it is, ordered (for device memory) before cai's current work
    /// stream, the legacy default stream ([`super::exchange`]).
    pub(crate) fn exchange(device: bool) -> Self {
        DlpackRequest {
            stream: if device {
                ConsumerStream::On(Stream::LegacyDefault)
            } else {
                ConsumerStream::Unspecified
            },
            max_version: Some(DLPACK_VERSION),
            dl_device: None,
            copy: None,
        }
    }

    /// Whether a host export for this request shares the memory as it is (no stream, no other
    /// device, no copy): what a [`Template`] serves.
    pub(crate) fn shares_host(&self) -> bool {
        matches!(
            self.stream,
            ConsumerStream::Unspecified | ConsumerStream::NoSync
        ) && matches!(self.dl_device, None | Some(DlpackDevice::Cpu))
            && self.copy != Some(true)
    }

    /// What the consumer said of copies (`copy`): `None` (copy if needed), `True`, `False`.
    pub fn copy(&self) -> Option<bool> {
        self.copy
    }

    /// The device the consumer asked for (`dl_device`), if any.
    pub fn dl_device(&self) -> Option<DlpackDevice> {
        self.dl_device
    }

    /// Whether the consumer reads versioned capsules (`max_version` of major 1 or more).
    fn versioned(&self) -> bool {
        self.max_version.is_some_and(|(major, _)| major >= 1)
    }
}

fn consumer_stream(s: &Bound<'_, PyAny>) -> PyResult<ConsumerStream> {
    // Read once: an `__index__` may answer differently each time.
    let n = int_arg(s)?.ok_or_else(|| DlpackError::ArgumentType {
        key: "stream",
        value: repr(s),
        expected: "None or an int",
    })?;
    Ok(match n {
        -1 => ConsumerStream::NoSync,
        0 => {
            return Err(DlpackError::Argument {
                key: "stream",
                value: "0".into(),
                expected: "0 is ambiguous and disallowed by the standard: pass 1 (legacy default stream), 2 (per-thread default stream), a stream handle, -1 (no synchronization) or None",
            }
            .into());
        }
        _ => u64::try_from(n)
            .ok()
            .and_then(|raw| Stream::from_raw(raw).ok())
            .map(ConsumerStream::On)
            .ok_or_else(|| DlpackError::Argument {
                key: "stream",
                value: if n == i128::MAX {
                    repr(s)
                } else {
                    n.to_string()
                },
                expected: "None, -1, or a CUDA stream (1, 2, or a handle below 2**64)",
            })?,
    })
}

/// Exported tensors not yet deleted, for leak tests: every tensor cai exports (a capsule, or
/// through the exchange table) adds one until its deleter runs (by the consumer, or by the
/// capsule when it is dropped unconsumed).
///
/// The count begins at the first call: the tensors exported before it are not counted, so
/// call it once before what a test measures (as `before = live_exports()` does). Until a
/// program asks, its exports pay no shared counter (two locked instructions on every export).
pub fn live_exports() -> usize {
    COUNTING.store(true, Ordering::SeqCst);
    LIVE.load(Ordering::SeqCst)
}

/// Whether [`live_exports`] was called: exports are counted from then on.
static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicUsize = AtomicUsize::new(0);

/// What keeps an exported tensor's memory alive.
enum Keep {
    /// The exporting object (and through it the memory and the exported stream).
    Object(#[allow(dead_code)] Py<PyAny>),
    /// A copy in host memory (16-byte units: aligned for every DLPack type).
    Host(#[allow(dead_code)] Vec<u128>),
    /// A copy in device memory.
    Device(#[allow(dead_code)] crate::cuda::DeviceAllocation),
    /// Nothing: what kept the memory was released already (by the deleter).
    Released,
}

/// The two managed-tensor ABIs.
trait Managed: Sized + 'static {
    /// The capsule's name.
    const NAME: &'static CStr;
    fn new(tensor: DLTensor, flags: DlpackFlags, deleter: unsafe extern "C" fn(*mut Self)) -> Self;
    fn tensor(&mut self) -> &mut DLTensor;
}

impl Managed for DLManagedTensor {
    const NAME: &'static CStr = DLTENSOR;
    fn new(tensor: DLTensor, _: DlpackFlags, deleter: unsafe extern "C" fn(*mut Self)) -> Self {
        DLManagedTensor {
            dl_tensor: tensor,
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(deleter),
        }
    }
    fn tensor(&mut self) -> &mut DLTensor {
        &mut self.dl_tensor
    }
}

impl Managed for DLManagedTensorVersioned {
    const NAME: &'static CStr = DLTENSOR_VERSIONED;
    fn new(tensor: DLTensor, flags: DlpackFlags, deleter: unsafe extern "C" fn(*mut Self)) -> Self {
        DLManagedTensorVersioned {
            version: DLPackVersion {
                major: DLPACK_VERSION.0,
                minor: DLPACK_VERSION.1,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(deleter),
            flags,
            dl_tensor: tensor,
        }
    }
    fn tensor(&mut self) -> &mut DLTensor {
        &mut self.dl_tensor
    }
}

/// A tensor's shape and strides as a block or a [`Template`] holds them: up to 8 dimensions in
/// place, the entries past `ndim` zero, so that an export copies them as two arrays of fixed
/// size (copied by length, each took a `memcpy` call and a trip through the stack); more
/// dimensions on the heap, the shape then the strides. Whole words only: a template's are
/// copied field by field into each block ([`Dims::clone_to`]), and a field of one byte (an
/// enum's tag, `ndim` as a `u8`) was copied a few bytes at a time through the stack, each
/// load waiting for the narrower stores before it to reach the cache.
#[derive(Clone)]
struct Dims {
    ndim: usize,
    /// The shape then the strides, up to 8 dimensions.
    inline: [[i64; 8]; 2],
    /// The shape then the strides, past 8 dimensions.
    heap: Option<Box<[i64]>>,
}

impl Dims {
    /// `ndim` dimensions, all zero, for the caller to write ([`Self::parts_mut`]).
    fn zeroed(ndim: usize) -> Dims {
        Dims {
            ndim,
            inline: [[0; 8]; 2],
            heap: (ndim > 8).then(|| vec![0; 2 * ndim].into_boxed_slice()),
        }
    }

    /// The shape and the strides, to write.
    fn parts_mut(&mut self) -> (&mut [i64], &mut [i64]) {
        let n = self.ndim;
        match &mut self.heap {
            None => {
                let [shape, strides] = &mut self.inline;
                (&mut shape[..n], &mut strides[..n])
            }
            Some(b) => b.split_at_mut(n),
        }
    }

    fn ndim(&self) -> usize {
        self.ndim
    }

    /// Writes a clone of `self` to `dst`, field by field.
    ///
    /// # Safety
    /// `dst` is valid for writes of a `Dims`, and holds none to drop.
    unsafe fn clone_to(&self, dst: *mut Dims) {
        // SAFETY: this function's contract: each field written once.
        unsafe {
            std::ptr::addr_of_mut!((*dst).ndim).write(self.ndim);
            std::ptr::addr_of_mut!((*dst).inline).write(self.inline);
            std::ptr::addr_of_mut!((*dst).heap).write(self.heap.clone());
        }
    }

    /// The tensor's `shape` and `strides` pointers: NULL for no dimensions (DLPack 1.3 allows
    /// it, and older consumers read none).
    fn pointers(&self) -> (*mut i64, *mut i64) {
        let (shape, strides) = match &self.heap {
            None => (self.inline[0].as_ptr(), self.inline[1].as_ptr()),
            Some(b) => (b.as_ptr(), b[self.ndim..].as_ptr()),
        };
        if self.ndim == 0 {
            (std::ptr::null_mut(), std::ptr::null_mut())
        } else {
            // (Lent, never written: DLPack's fields are `*mut` for C's sake.)
            (shape.cast_mut(), strides.cast_mut())
        }
    }
}

/// The heap block a capsule owns (one allocation up to 8 dimensions); `managed` first, so the
/// tensor's address is the block's.
#[repr(C)]
struct Exported<M> {
    managed: M,
    dims: Dims,
    _keep: Keep,
    /// Whether this export counts in [`LIVE`] (it was made once counting began).
    counted: bool,
}

impl<M> Drop for Exported<M> {
    fn drop(&mut self) {
        if self.counted {
            LIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// The tensor's deleter: frees the block (and with it what kept the memory alive).
///
/// # Safety
/// `p` is null or a tensor made by [`into_capsule`], not deleted before.
unsafe extern "C" fn delete<M: Managed>(p: *mut M) {
    if p.is_null() {
        return;
    }
    // A panic must not unwind into the consumer's C code.
    let dropped = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `p` is the address of a leaked `Box<Exported<M>>` (`managed` is its first
        // field, at offset 0 of the `repr(C)` struct), deleted once (this function's contract).
        let mut block = unsafe { Box::from_raw(p.cast::<Exported<M>>()) };
        if crate::python::interp::holds_gil() {
            // The usual case (a consumer deleting from Python code's thread): the exporter is
            // released at once, without PyO3's attach (`PyGILState_Ensure`, ~20 ns).
            if let Keep::Object(o) = std::mem::replace(&mut block._keep, Keep::Released) {
                // SAFETY: this thread holds the GIL (checked above); the reference is the
                // block's own, given up here.
                unsafe { ffi::Py_DecRef(o.into_ptr()) };
            }
            drop(block);
            return;
        }
        // Attached (on any thread, the consumer not holding the GIL), the exporter is
        // released now; an interpreter shutting down takes no thread, and the release waits
        // for PyO3's pool.
        let mut block = Some(block);
        let _ = Python::try_attach(|_| drop(block.take()));
        drop(block);
    }));
    if dropped.is_err() {
        std::process::abort();
    }
}

/// A capsule's destructor: an unconsumed capsule deletes its tensor; a consumed one (renamed
/// `used_...`) belongs to its consumer, which deletes it.
///
/// # Safety
/// Called by Python with a capsule made by [`into_capsule`].
unsafe extern "C" fn capsule_destructor<M: Managed>(capsule: *mut ffi::PyObject) {
    // SAFETY: `capsule` is a live capsule (Python calls this while destroying it); while it is
    // still named `M::NAME` nobody took its tensor, which is ours to delete.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, M::NAME.as_ptr()) == 1 {
            let p = ffi::PyCapsule_GetPointer(capsule, M::NAME.as_ptr());
            delete::<M>(p.cast());
        }
    }
}

/// A managed tensor cai made, not yet handed out: deleted when dropped, unless handed out as a
/// capsule ([`Self::into_capsule`]) or to a C consumer ([`Self::into_raw`]).
pub(crate) struct ManagedExport {
    ptr: *mut std::ffi::c_void,
    versioned: bool,
}

impl Drop for ManagedExport {
    fn drop(&mut self) {
        // SAFETY: a tensor made by `ManagedExport::new`, never handed out (the hand-outs forget
        // `self`): deleted once, here.
        unsafe {
            if self.versioned {
                delete::<DLManagedTensorVersioned>(self.ptr.cast());
            } else {
                delete::<DLManagedTensor>(self.ptr.cast());
            }
        }
    }
}

impl ManagedExport {
    /// `tensor` (whose shape and strides pointers are set here, into `dims`) in a new block
    /// that owns `dims` (moved, or a template's cloned there) and `keep`.
    fn new<M: Managed>(
        tensor: DLTensor,
        flags: DlpackFlags,
        dims: Cow<'_, Dims>,
        keep: Keep,
        versioned: bool,
    ) -> Self {
        // (A plain load: the counter itself is touched only once a test asked for it.)
        let counted = COUNTING.load(Ordering::Relaxed);
        if counted {
            LIVE.fetch_add(1, Ordering::SeqCst);
        }
        // Each field written where it stays (a block is ~300 bytes, moved otherwise), and the
        // dimensions' pointers taken there.
        let mut block = Box::<Exported<M>>::new_uninit();
        let p = block.as_mut_ptr();
        // SAFETY: `p` points to the block's memory, allocated for an `Exported<M>`; each field
        // is written once, in place, before the block is taken as initialized.
        let block = unsafe {
            std::ptr::addr_of_mut!((*p).managed).write(M::new(tensor, flags, delete::<M>));
            let to = std::ptr::addr_of_mut!((*p).dims);
            match dims {
                Cow::Owned(d) => to.write(d),
                Cow::Borrowed(d) => d.clone_to(to),
            }
            std::ptr::addr_of_mut!((*p)._keep).write(keep);
            std::ptr::addr_of_mut!((*p).counted).write(counted);
            block.assume_init()
        };
        let block = Box::into_raw(block);
        // SAFETY: the block just made, not shared yet.
        let b = unsafe { &mut *block };
        let (shape, strides) = b.dims.pointers();
        let t = b.managed.tensor();
        t.shape = shape;
        t.strides = strides;
        ManagedExport {
            ptr: block.cast(),
            versioned,
        }
    }

    /// The versioned tensor, for a C consumer, who calls its deleter.
    pub(crate) fn into_raw(self) -> *mut DLManagedTensorVersioned {
        debug_assert!(self.versioned);
        let p = self.ptr.cast();
        std::mem::forget(self);
        p
    }

    /// A capsule named `dltensor_versioned` or `dltensor`, which owns the tensor.
    pub(crate) fn into_capsule(self, py: Python<'_>) -> PyResult<Bound<'_, PyAny>> {
        let (name, destructor): (&CStr, ffi::PyCapsule_Destructor) = if self.versioned {
            (
                DLManagedTensorVersioned::NAME,
                capsule_destructor::<DLManagedTensorVersioned>,
            )
        } else {
            (DLManagedTensor::NAME, capsule_destructor::<DLManagedTensor>)
        };
        // SAFETY: `self.ptr` is a valid block whose first field is the managed tensor; the
        // capsule owns it from here (its destructor deletes it unless a consumer renamed it).
        let capsule = unsafe { ffi::PyCapsule_New(self.ptr, name.as_ptr(), Some(destructor)) };
        if capsule.is_null() {
            // (`self` drops: the block is deleted.)
            return Err(PyErr::fetch(py));
        }
        std::mem::forget(self);
        // SAFETY: a new reference, just made.
        Ok(unsafe { Bound::from_owned_ptr(py, capsule) })
    }
}

/// A new tensor of `prototype`'s dtype, shape and device, C-contiguous, in memory cai allocates
/// (host memory, or the CUDA device's, managed or not): the exchange table's allocator.
pub(crate) fn allocate(prototype: &DLTensor) -> Result<ManagedExport, (&'static str, String)> {
    let value = |m: String| ("ValueError", m);
    let device = DlpackDevice::from_pair(
        prototype.device.device_type.0 as i64,
        prototype.device.device_id as i64,
    )
    .ok_or_else(|| {
        value(format!(
            "prototype.device = ({}, {}): cai allocates on kDLCPU (1, 0), kDLCUDA (2, n) and kDLCUDAManaged (13, n)",
            prototype.device.device_type.0, prototype.device.device_id
        ))
    })?;
    let typestr = super::typestr_of(prototype.dtype)
        .map_err(|e| value(e.to_string().replace("dl_tensor.", "prototype.")))?;
    let ndim = usize::try_from(prototype.ndim)
        .ok()
        .filter(|&n| n <= crate::layout::MAX_NDIM)
        .ok_or_else(|| {
            value(format!(
                "prototype.ndim = {}: expected 0 to {}",
                prototype.ndim,
                crate::layout::MAX_NDIM
            ))
        })?;
    if ndim > 0 && prototype.shape.is_null() {
        return Err(value(format!("prototype.shape = NULL with ndim = {ndim}")));
    }
    let mut dims = Dims::zeroed(ndim);
    let (shape, strides) = dims.parts_mut();
    // SAFETY: DLPack: a non-null shape points to `ndim` int64 values, which the caller keeps
    // alive during this call (checked non-null above where `ndim` > 0; none read at 0).
    let given = unsafe { super::int64s(prototype.shape, ndim) };
    for (d, n) in shape.iter_mut().zip(given) {
        *d = n;
    }
    let mut items: usize = 1;
    for (i, &n) in shape.iter().enumerate() {
        let u = usize::try_from(n)
            .map_err(|_| value(format!("prototype.shape[{i}] = {n}: negative")))?;
        items = items
            .checked_mul(u)
            .ok_or_else(|| value(format!("prototype.shape = {shape:?}: too many items")))?;
    }
    let len = items
        .checked_mul(typestr.itemsize())
        .filter(|&l| l <= isize::MAX as usize)
        .ok_or_else(|| value(format!("prototype.shape = {shape:?}: too many bytes")))?;
    let mut n = 1i64;
    for (s, &dim) in strides.iter_mut().zip(&*shape).rev() {
        *s = n;
        n = n.saturating_mul(dim.max(1));
    }
    let (ptr, keep) = match device {
        DlpackDevice::Cpu => {
            let mut buf: Vec<u128> = Vec::new();
            buf.try_reserve_exact(len.div_ceil(16))
                .map_err(|_| ("MemoryError", crate::error::AllocError(len).to_string()))?;
            buf.resize(len.div_ceil(16), 0);
            (buf.as_mut_ptr() as u64, Keep::Host(buf))
        }
        DlpackDevice::Cuda(n) | DlpackDevice::CudaManaged(n) => {
            let managed = matches!(device, DlpackDevice::CudaManaged(_));
            let a = crate::cuda::DeviceAllocation::on_device(n, len, managed).map_err(|e| {
                (
                    "RuntimeError",
                    format!("cannot allocate {len} bytes on {device}: {e}"),
                )
            })?;
            (a.device_ptr(), Keep::Device(a))
        }
        DlpackDevice::CudaHost => {
            return Err(value(
                "prototype.device = kDLCUDAHost (3, 0): cai allocates no registered host memory; ask for kDLCPU (1, 0) or kDLCUDAManaged (13, n)".into(),
            ));
        }
    };
    let tensor = DLTensor {
        data: ptr as *mut std::ffi::c_void,
        device: prototype.device,
        ndim: ndim as i32,
        dtype: prototype.dtype,
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    Ok(ManagedExport::new::<DLManagedTensorVersioned>(
        tensor,
        DlpackFlags::empty(),
        Cow::Owned(dims),
        keep,
        true,
    ))
}

/// Where a descriptor's memory is: DLPack's device for it, the device whose context the
/// driver's work on it runs in (`None` for host memory), and what the driver said about the
/// pointer (its allocation's range, where it knows one).
struct Place {
    device: DlpackDevice,
    ordinal: Option<u32>,
    attributes: Option<crate::pointer::PointerAttributes>,
}

/// The [`Place`] of `d`'s memory. Device memory is asked about with the driver (its device,
/// and whether it is managed or registered host memory); an array with no items is on the
/// current device.
fn place_of<S: Space>(d: &ArrayDescriptor<S>) -> PyResult<Place> {
    if !S::DEVICE {
        return Ok(Place {
            device: DlpackDevice::Cpu,
            ordinal: None,
            attributes: None,
        });
    }
    use crate::pointer::MemoryType;
    let no_place = |e| {
        super::super::errors::driver_error(
            format_args!(
                "cannot export `data` = {:#x} through DLPack: asking the CUDA driver which device holds it failed",
                d.data.ptr
            ),
            e,
        )
    };
    if d.data.ptr == 0 {
        let n = crate::cuda::current_device_or(0).map_err(no_place)?;
        return Ok(Place {
            device: DlpackDevice::Cuda(n),
            ordinal: Some(n),
            attributes: None,
        });
    }
    let a = crate::cuda::pointer_attributes(d.data.ptr).map_err(no_place)?;
    let ordinal = match a.device_ordinal {
        Some(n) => n,
        None => crate::cuda::current_device_or(0).map_err(no_place)?,
    };
    let device = match a.memory_type {
        MemoryType::Device => DlpackDevice::Cuda(ordinal),
        MemoryType::Managed => DlpackDevice::CudaManaged(ordinal),
        MemoryType::Host => DlpackDevice::CudaHost,
        MemoryType::Unregistered => {
            return Err(DlpackError::Unmet(format!(
                "`data` = {:#x} is memory the CUDA driver does not know: not device memory",
                d.data.ptr
            ))
            .into());
        }
    };
    Ok(Place {
        device,
        ordinal: Some(ordinal),
        attributes: Some(a),
    })
}

/// `__dlpack_device__` of a descriptor.
pub(crate) fn descriptor_dlpack_device<S: Space>(d: &ArrayDescriptor<S>) -> PyResult<(i32, i32)> {
    Ok(place_of(d)?.device.to_pair())
}

/// How the exported tensor gets its bytes.
enum Source {
    /// The exporter's own memory.
    Share,
    /// A copy in host memory.
    HostCopy,
    /// A copy in new memory of the data's device (managed memory, like the data, or not).
    DeviceCopy { managed: bool },
}

/// What cai itself may do with an export's memory and stream: read the bytes (a copy), and hand
/// the stream to the driver. A hand-written interface's bare address and bare stream number
/// are only described to the consumer, as its dict describes them.
#[derive(Clone, Copy)]
struct Trust {
    bytes: bool,
    stream: bool,
}

/// The tensor `__dlpack__` exports for `x` of `owner`'s memory, as `request` asks (the
/// capsule it returns wraps it; the exchange table's `managed_tensor_from_py_object_no_sync`
/// hands it to a C consumer): versioned when the consumer's `max_version` allows, the memory
/// shared (the tensor keeps `owner` alive until the consumer's deleter call) or copied
/// (`copy=True`, or a `dl_device` of `kDLCPU` for device memory), the consumer's stream
/// ordered after the producer's `stream`. A copy is made, and the producer's stream handed to
/// the driver, only where `x` vouches for them.
pub(crate) fn dlpack_managed<S: Space>(
    owner: &Bound<'_, PyAny>,
    x: &Resolved<S>,
    request: &DlpackRequest,
) -> PyResult<ManagedExport> {
    let trust = Trust {
        bytes: x.vouched,
        stream: x.stream_live && S::DEVICE,
    };
    // SAFETY: `Resolved`'s flags are set only where something vouches: a builder's `unsafe`
    // memory traits (`DeviceMemory`, `HostMemory`) and `stream_vouched_by`, or the `unsafe`
    // `Export::vouched`'s caller, for memory and a stream valid while `owner` lives; without
    // them, the descriptor is only described to the consumer, as its dict describes it.
    unsafe { export_with(owner, &x.descriptor, &x.layout, request, trust) }
}

/// [`dlpack_managed`]'s tensor, with its layout, within what `trust` allows.
///
/// # Safety
/// `d` describes memory valid for reads (and writes unless read-only) while `owner` lives,
/// and its stream, if a handle, is a live stream while it lives, for what `trust` says: the bytes are not read here unless
/// `trust.bytes`, the stream not handed to the driver unless `trust.stream` (or a default
/// stream).
unsafe fn export_with<'py, S: Space>(
    owner: &Bound<'py, PyAny>,
    d: &ArrayDescriptor<S>,
    layout: &Layout,
    request: &DlpackRequest,
    trust: Trust,
) -> PyResult<ManagedExport> {
    let (dtype, dims) = tensor_parts(d, layout)?;
    if !S::DEVICE
        && !matches!(
            request.stream,
            ConsumerStream::Unspecified | ConsumerStream::NoSync
        )
    {
        return Err(DlpackError::Argument {
            key: "stream",
            value: request.stream.to_string(),
            expected: "None (or -1) for host memory, which has no stream",
        }
        .into());
    }
    let place = place_of(d)?;
    let here = place.device;
    let target = request.dl_device.unwrap_or(here);
    let (source, device) = match (here, target, request.copy) {
        (h, t, Some(true)) if h == t => match h {
            DlpackDevice::Cpu => (Source::HostCopy, h),
            DlpackDevice::Cuda(_) => (Source::DeviceCopy { managed: false }, h),
            DlpackDevice::CudaManaged(_) => (Source::DeviceCopy { managed: true }, h),
            DlpackDevice::CudaHost => {
                return Err(DlpackError::Unmet(
                    "copy=True of registered host memory (kDLCUDAHost): cai allocates none; ask for a host copy with dl_device=(1, 0)".into(),
                )
                .into());
            }
        },
        (_, DlpackDevice::Cpu, Some(true)) => (Source::HostCopy, target),
        (h, t, _) if h == t => (Source::Share, t),
        // Host-accessible CUDA memory is the CPU's too.
        (DlpackDevice::CudaHost | DlpackDevice::CudaManaged(_), DlpackDevice::Cpu, _) => {
            (Source::Share, DlpackDevice::Cpu)
        }
        (DlpackDevice::Cuda(_), DlpackDevice::Cpu, Some(false)) => {
            return Err(DlpackError::Unmet(format!(
                "copy=False, but the data is on {here} and dl_device {target} asks for host memory: only a copy can give it"
            ))
            .into());
        }
        (DlpackDevice::Cuda(_), DlpackDevice::Cpu, None) => (Source::HostCopy, target),
        _ => {
            return Err(DlpackError::Unmet(format!(
                "the data is on {here}: cai exports it there, or copies it to kDLCPU (1, 0), not to dl_device {target}"
            ))
            .into());
        }
    };
    if !trust.bytes && !matches!(source, Source::Share) {
        return Err(DlpackError::Unmet(
            "a copy (copy=True, or another dl_device) is made only of exporters whose memory is vouched for by cai's `unsafe` memory traits (the derives' fields); this one describes a bare address".into(),
        )
        .into());
    }
    let readonly = d.data.readonly && matches!(source, Source::Share);
    if readonly && !request.versioned() {
        return Err(legacy_cannot_say_read_only());
    }
    let (ptr, keep) = match source {
        Source::Share => {
            order_streams(d, &place, target, request, trust)?;
            (d.data.ptr, Keep::Object(owner.clone().unbind()))
        }
        // SAFETY: the memory `d` describes is readable (`trust.bytes`, checked above).
        Source::HostCopy => unsafe { host_copy(d, layout, &place, trust)? },
        // SAFETY: as above; device data (a copy on a device is of device data).
        Source::DeviceCopy { managed } => unsafe {
            device_copy(d, layout, &place, managed, request, trust)?
        },
    };
    let copied = !matches!(source, Source::Share);
    let (kind, id) = device.to_pair();
    let tensor = DLTensor {
        data: ptr as *mut std::ffi::c_void,
        device: DLDevice {
            device_type: DLDeviceType(kind as u32),
            device_id: id,
        },
        ndim: dims.ndim() as i32,
        dtype,
        shape: std::ptr::null_mut(),
        strides: std::ptr::null_mut(),
        byte_offset: 0,
    };
    let mut flags = DlpackFlags::empty();
    flags.set(DlpackFlags::READ_ONLY, readonly);
    flags.set(DlpackFlags::IS_COPIED, copied);
    let dims = Cow::Owned(dims);
    Ok(if request.versioned() {
        ManagedExport::new::<DLManagedTensorVersioned>(tensor, flags, dims, keep, true)
    } else {
        ManagedExport::new::<DLManagedTensor>(tensor, flags, dims, keep, false)
    })
}

/// The refusal of read-only data through a legacy capsule.
fn legacy_cannot_say_read_only() -> PyErr {
    DlpackError::Unmet(
        "the data is read-only, and the legacy DLPack capsule cannot say so: ask for a versioned one (max_version=(1, 0) or later), or for a copy (copy=True)".into(),
    )
    .into()
}

/// A tensor's DLPack type, shape and strides (in items; C order where there are no items) for
/// a descriptor and its layout: what DLPack cannot say (a mask, a type, byte strides that are
/// not whole items) is an error naming it.
fn tensor_parts<S: Space>(
    d: &ArrayDescriptor<S>,
    layout: &Layout,
) -> Result<(dlpark::ffi::DLDataType, Dims), DlpackError> {
    if d.mask.is_some() {
        return Err(DlpackError::Mask);
    }
    let dtype = dl_dtype(&d.typestr, d.descr.as_ref())?;
    let itemsize = layout.itemsize();
    let empty = layout.size() == 0;
    let mut dims = Dims::zeroed(layout.ndim());
    let (shape, strides) = dims.parts_mut();
    for (i, (&n, &s)) in layout.shape().iter().zip(layout.strides()).enumerate() {
        if s % itemsize as isize != 0 && !empty {
            return Err(DlpackError::ByteStrides {
                strides: layout.strides().to_vec(),
                itemsize,
            });
        }
        shape[i] = n as i64;
        strides[i] = (s / itemsize as isize) as i64;
    }
    if empty {
        // Any strides describe no items: C order, in items.
        let mut n = 1i64;
        for (s, &dim) in strides.iter_mut().zip(&*shape).rev() {
            *s = n;
            n = n.saturating_mul(dim.max(1));
        }
    }
    Ok((dtype, dims))
}

/// What every export of a side that never changes shares, made once
/// ([`crate::python::DlpackCache`]): the tensor's address, place, type, shape and strides, and
/// its read-only flag. Its shape and strides stay where they are while the exporter lives: the
/// exchange table lends them (`dltensor_from_py_object_no_sync`).
pub(crate) struct Template {
    data: u64,
    /// Where the memory is, and the device whose context the driver's work on it runs in.
    device: DlpackDevice,
    ordinal: Option<u32>,
    dtype: dlpark::ffi::DLDataType,
    dims: Dims,
    readonly: bool,
}

impl Template {
    /// The template of a resolved host export, where DLPack can say it (else `None`: the full
    /// export raises the error).
    pub(crate) fn of(x: &Resolved<crate::descriptor::Host>) -> Option<Template> {
        let (dtype, dims) = tensor_parts(&x.descriptor, &x.layout).ok()?;
        Some(Template {
            data: x.descriptor.data.ptr,
            device: DlpackDevice::Cpu,
            ordinal: None,
            dtype,
            dims,
            readonly: x.descriptor.data.readonly,
        })
    }

    /// The template of a resolved device export (its place asked of the driver); an error
    /// where DLPack cannot say it, or the driver cannot place it.
    pub(crate) fn of_device(x: &Resolved<crate::descriptor::Device>) -> PyResult<Template> {
        let (dtype, dims) = tensor_parts(&x.descriptor, &x.layout)?;
        let place = place_of(&x.descriptor)?;
        Ok(Template {
            data: x.descriptor.data.ptr,
            device: place.device,
            ordinal: place.ordinal,
            dtype,
            dims,
            readonly: x.descriptor.data.readonly,
        })
    }

    /// Whether the memory is read-only (which a lent tensor cannot say: [`Self::lend`] refuses
    /// it).
    pub(crate) fn readonly(&self) -> bool {
        self.readonly
    }

    /// The tensor `dltensor_from_py_object_no_sync` lends, written to `out`: this template's,
    /// its shape and strides pointing into it (valid while it is, as long as the exporter). For device
    /// memory, `x` is the export now: cai's current work stream (the legacy default stream)
    /// is made to wait for its stream, as the table's owning export does. Read-only memory is
    /// refused, since a lent tensor has no flags to say so.
    pub(crate) fn lend(
        &self,
        x: Option<&Resolved<crate::descriptor::Device>>,
        out: &mut std::mem::MaybeUninit<DLTensor>,
    ) -> PyResult<()> {
        if self.readonly {
            return Err(DlpackError::Unmet(
                "the data is read-only, and a lent DLTensor (dltensor_from_py_object_no_sync) cannot say so: use managed_tensor_from_py_object_no_sync, whose tensor has the read-only flag".into(),
            )
            .into());
        }
        if let Some(x) = x {
            let place = Place {
                device: self.device,
                ordinal: self.ordinal,
                attributes: None,
            };
            let trust = Trust {
                bytes: x.vouched,
                stream: x.stream_live,
            };
            order_streams(
                &x.descriptor,
                &place,
                self.device,
                &DlpackRequest::exchange(true),
                trust,
            )?;
        }
        let (kind, id) = self.device.to_pair();
        let (shape, strides) = self.dims.pointers();
        out.write(DLTensor {
            data: self.data as *mut std::ffi::c_void,
            device: DLDevice {
                device_type: DLDeviceType(kind as u32),
                device_id: id,
            },
            ndim: self.dims.ndim() as i32,
            dtype: self.dtype,
            shape,
            strides,
            byte_offset: 0,
        });
        Ok(())
    }

    /// The tensor a request that shares host memory ([`DlpackRequest::shares_host`]) gets:
    /// the same as from the full export, `owner` kept alive by it.
    pub(crate) fn export(
        &self,
        owner: &Bound<'_, PyAny>,
        request: &DlpackRequest,
    ) -> PyResult<ManagedExport> {
        if self.readonly && !request.versioned() {
            return Err(legacy_cannot_say_read_only());
        }
        let tensor = DLTensor {
            data: self.data as *mut std::ffi::c_void,
            device: DLDevice {
                device_type: DLDeviceType::CPU,
                device_id: 0,
            },
            ndim: self.dims.ndim() as i32,
            dtype: self.dtype,
            shape: std::ptr::null_mut(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        };
        let mut flags = DlpackFlags::empty();
        flags.set(DlpackFlags::READ_ONLY, self.readonly);
        let keep = Keep::Object(owner.clone().unbind());
        let dims = Cow::Borrowed(&self.dims);
        Ok(if request.versioned() {
            ManagedExport::new::<DLManagedTensorVersioned>(tensor, flags, dims, keep, true)
        } else {
            ManagedExport::new::<DLManagedTensor>(tensor, flags, dims, keep, false)
        })
    }
}

/// The producer's stream for cai's own driver calls: a default stream, or a handle `trust`
/// vouches for; a bare handle number is refused rather than handed to the driver (which
/// behaves undefinedly for a handle that is no live stream).
fn producer_stream<S: Space>(
    d: &ArrayDescriptor<S>,
    trust: Trust,
) -> PyResult<Option<crate::LiveStream<'static>>> {
    match d.stream() {
        Some(s @ Stream::Handle(_)) if !trust.stream => Err(DlpackError::Unmet(format!(
            "the exported stream {s} is a bare number cai cannot vouch for, so it cannot order the consumer's stream after it: give the struct a stream field that owns its stream (cai's DriverStream, cust's or cudarc's), or export no stream"
        ))
        .into()),
        // SAFETY: a default stream, or one the exporter's builder vouched for
        // (`stream_vouched_by`: a stream its value owns), alive while the exporter is, which
        // the export holds (the `'static` lasts only for this export's driver calls).
        s => Ok(s.map(|s| unsafe { crate::LiveStream::new(s) })),
    }
}

/// The stream the consumer passed to `__dlpack__` (the legacy default stream where it passed
/// none).
fn consumer_live(request: &DlpackRequest) -> crate::LiveStream<'static> {
    match request.stream {
        // SAFETY: the stream the consumer says it will use: DLPack makes the consumer answer
        // for it, as CAI makes a producer answer for its own (the `'static` lasts only for this
        // export's driver calls).
        ConsumerStream::On(s) => unsafe { crate::LiveStream::new(s) },
        _ => crate::LiveStream::LEGACY_DEFAULT,
    }
}

/// The consumer's stream waits for the producer's (an event, never a host block) when the
/// consumer reads on a CUDA device; a host consumer of host-accessible CUDA memory (one that
/// asked for `kDLCPU`, or named no stream for managed or registered host memory) waits for the
/// producer's stream to finish.
fn order_streams<S: Space>(
    d: &ArrayDescriptor<S>,
    place: &Place,
    target: DlpackDevice,
    request: &DlpackRequest,
    trust: Trust,
) -> PyResult<()> {
    if d.stream().is_none() || request.stream == ConsumerStream::NoSync {
        return Ok(());
    }
    let Some(producer) = producer_stream(d, trust)? else {
        return Ok(());
    };
    let device = place.ordinal;
    let consumer = consumer_live(request);
    // A host consumer, or one of host-accessible memory that named no stream (NumPy never
    // does), may read as soon as this returns: the producer's work must be done.
    let host_reader = target == DlpackDevice::Cpu
        || request.stream == ConsumerStream::Unspecified
            && matches!(
                target,
                DlpackDevice::CudaHost | DlpackDevice::CudaManaged(_)
            );
    let ordered = if host_reader {
        crate::cuda::synchronize_stream_on(producer, device)
    } else {
        crate::cuda::order_after_on(consumer, device, producer, device)
    };
    ordered.map_err(|e| {
        super::super::errors::stream_error(
            format!(
                "cannot order the consumer's stream {} after the producer's stream {}",
                consumer.stream(),
                producer.stream()
            ),
            e,
        )
    })
}

/// The span of device memory a copy reads, checked against its allocation where the driver
/// knows the allocation's range: a descriptor larger than its memory is refused, not copied.
fn checked_span(place: &Place, extent: crate::layout::Extent) -> PyResult<()> {
    if let Some(a) = &place.attributes {
        crate::pointer::check_pointer(a, Some(extent))?;
    }
    Ok(())
}

/// Copies the bytes `layout` spans around `d`'s data into new host memory, strides kept; from
/// device memory through the driver (in the data's device's context), after the producer's
/// stream's work.
///
/// # Safety
/// The span is readable: host memory by this thread, device memory by the driver.
unsafe fn host_copy<S: Space>(
    d: &ArrayDescriptor<S>,
    layout: &Layout,
    place: &Place,
    trust: Trust,
) -> PyResult<(u64, Keep)> {
    let Some(extent) = layout.extent() else {
        return Ok((0, Keep::Host(Vec::new())));
    };
    let len = extent.len();
    let src = d.data.ptr.wrapping_add_signed(extent.lo as i64);
    let mut buf: Vec<u128> = Vec::new();
    buf.try_reserve_exact(len.div_ceil(16))
        .map_err(|_| crate::error::AllocError(len))?;
    buf.resize(len.div_ceil(16), 0);
    let dst = buf.as_mut_ptr().cast::<u8>();
    if S::DEVICE {
        {
            checked_span(place, extent)?;
            let stream = producer_stream(d, trust)?.map_or(Stream::LegacyDefault, |s| s.stream());
            let copy = || {
                // SAFETY: `dst` has room for `len` bytes and is ours; the source span is
                // readable by the driver (this function's contract) and inside its allocation
                // where the driver knows it; the copy runs on the producer's stream, after its
                // work, and is complete when this returns.
                unsafe { crate::cuda::copy_to_host_into(dst, src, len, stream) }
            };
            match place.ordinal {
                Some(n) => crate::cuda::with_device(n, copy)?,
                None => copy()?,
            }
        }
    } else {
        // SAFETY: the span is readable host memory (this function's contract) and `dst` a new
        // buffer of at least `len` bytes: the two do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src as usize as *const u8, dst, len) };
    }
    let ptr = (dst as u64).wrapping_add_signed(-(extent.lo as i64));
    Ok((ptr, Keep::Host(buf)))
}

/// Copies the bytes `layout` spans around `d`'s data into new memory of the data's device
/// (managed where `managed`), strides kept, enqueued on the consumer's stream after the
/// producer's work (on the producer's stream, waited for, where the consumer passed -1; and
/// waited for where a managed copy's consumer named no stream, as a host reader does).
///
/// # Safety
/// The span is device memory the driver can read.
unsafe fn device_copy<S: Space>(
    d: &ArrayDescriptor<S>,
    layout: &Layout,
    place: &Place,
    managed: bool,
    request: &DlpackRequest,
    trust: Trust,
) -> PyResult<(u64, Keep)> {
    use crate::cuda;
    let ordinal = place.ordinal.unwrap_or(0);
    let Some(extent) = layout.extent() else {
        let none = cuda::DeviceAllocation::on_device(ordinal, 0, managed)?;
        return Ok((0, Keep::Device(none)));
    };
    checked_span(place, extent)?;
    let producer = producer_stream(d, trust)?.unwrap_or(crate::LiveStream::LEGACY_DEFAULT);
    let len = extent.len();
    let copy = cuda::DeviceAllocation::on_device(ordinal, len, managed)?;
    let src = d.data.ptr.wrapping_add_signed(extent.lo as i64);
    let device = Some(ordinal);
    match request.stream {
        ConsumerStream::NoSync => cuda::with_device(ordinal, || {
            // SAFETY: `copy` is ours, `len` bytes; the source span is readable (contract) and
            // inside its allocation where the driver knows it.
            unsafe { cuda::copy_async(copy.device_ptr(), src, len, producer.stream()) }?;
            cuda::synchronize_stream_on(producer, device)
        })?,
        s => {
            let consumer = consumer_live(request);
            cuda::order_after_on(consumer, device, producer, device)?;
            cuda::with_device(ordinal, || {
                // SAFETY: as above; the consumer's stream now runs after the producer's work.
                unsafe { cuda::copy_async(copy.device_ptr(), src, len, consumer.stream()) }?;
                // A managed copy is host memory too, and a consumer that named no stream
                // (NumPy) reads it on the host as soon as this returns.
                if managed && s == ConsumerStream::Unspecified {
                    cuda::synchronize_stream_on(consumer, device)?;
                }
                Ok::<(), crate::DriverError>(())
            })?;
        }
    }
    let ptr = copy.device_ptr().wrapping_add_signed(-(extent.lo as i64));
    Ok((ptr, Keep::Device(copy)))
}

#[cfg(test)]
mod tests {
    use super::Dims;

    /// What a tensor's pointers read back: the shape and strides written, in place up to 8
    /// dimensions and on the heap past them, NULL for none; and the same of a clone written
    /// field by field (`clone_to`, as an export from a template makes), whose pointers are
    /// its own.
    #[test]
    fn dims_point_at_the_shape_and_strides_given() {
        for ndim in [0usize, 1, 3, 8, 9, 64] {
            let shape: Vec<i64> = (1..=ndim as i64).collect();
            let strides: Vec<i64> = shape.iter().map(|n| -7 * n).collect();
            let mut dims = Dims::zeroed(ndim);
            let (sh, st) = dims.parts_mut();
            sh.copy_from_slice(&shape);
            st.copy_from_slice(&strides);
            let mut clone = std::mem::MaybeUninit::<Dims>::uninit();
            // SAFETY: `clone` is writable and holds nothing; `clone_to` writes every field.
            let clone = unsafe {
                dims.clone_to(clone.as_mut_ptr());
                clone.assume_init()
            };
            for d in [&dims, &clone] {
                assert_eq!(d.ndim(), ndim);
                assert_eq!(d.heap.is_none(), ndim <= 8);
                let (sh, st) = d.pointers();
                if ndim == 0 {
                    assert!(sh.is_null() && st.is_null());
                    continue;
                }
                // SAFETY: both point at `ndim` values inside `d`, which lives.
                let (sh, st) = unsafe {
                    (
                        std::slice::from_raw_parts(sh, ndim),
                        std::slice::from_raw_parts(st, ndim),
                    )
                };
                assert_eq!((sh, st), (&shape[..], &strides[..]), "ndim {ndim}");
            }
            if ndim > 0 {
                assert_ne!(dims.pointers().0, clone.pointers().0, "ndim {ndim}");
            }
        }
    }
}
