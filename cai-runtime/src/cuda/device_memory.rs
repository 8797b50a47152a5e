//! Device memory through the driver: [`DeviceAllocation`] (owned, freed on drop) and the
//! copies and fills between host and device.

use super::ffi;
use super::stream::raw_handle;
use crate::driver_error::DriverError;
use crate::error::CopyToHostError;
use crate::layout::Layout;
use crate::memory::byte_vec;
use crate::stream::Stream;

/// Device memory allocated by the driver (`cuMemAlloc`, or `cuMemAllocManaged` attached
/// globally: one address for host and device) and freed on drop, on any thread.
#[derive(Debug)]
pub struct DeviceAllocation {
    ptr: u64,
    len: usize,
    /// The context it was allocated in (an address), where it is freed.
    ctx: usize,
}

impl DeviceAllocation {
    /// Allocates `len` bytes (at least one, so that the address is never null) in the current
    /// context, or device 0's primary context, made current, when none is. The current context
    /// must be its device's primary context (what CuPy, PyTorch, cust's `Context::new` and
    /// cudarc's `CudaContext` make current), which this crate then retains for the process, so
    /// the allocation's context outlives it: in a context of the caller's own
    /// ([`DriverError::NOT_PRIMARY_CONTEXT`]), which could be destroyed first, use
    /// [`DeviceAllocation::in_current_context`].
    pub fn new(len: usize, managed: bool) -> Result<Self, DriverError> {
        let ctx = super::current_primary_context()?;
        Self::in_current(len, managed, ctx)
    }

    /// [`DeviceAllocation::new`] in whatever context is current (one of the caller's own too).
    ///
    /// # Safety
    /// The current context outlives the allocation: it is not destroyed (`cuCtxDestroy`, the
    /// drop of cust's legacy `Context`) before the allocation is dropped, which frees it there.
    pub unsafe fn in_current_context(len: usize, managed: bool) -> Result<Self, DriverError> {
        let ctx = super::current_context()?;
        Self::in_current(len, managed, ctx)
    }

    /// Allocates `len` bytes (at least one) on device `ordinal`, in its primary context,
    /// whatever context is current on this thread (and stays current).
    pub fn on_device(ordinal: u32, len: usize, managed: bool) -> Result<Self, DriverError> {
        let ctx = super::primary_context(ordinal)? as ffi::CUcontext;
        super::with_context(ctx, || Self::in_current(len, managed, ctx))
    }

    /// Allocates in `ctx`, the current context.
    fn in_current(len: usize, managed: bool, ctx: ffi::CUcontext) -> Result<Self, DriverError> {
        let mut ptr = 0;
        // SAFETY: `ptr` is a valid out-pointer; `ctx` is current (the callers').
        unsafe {
            if managed {
                ffi::cuMemAllocManaged(&mut ptr, len.max(1), ffi::CU_MEM_ATTACH_GLOBAL)
            } else {
                ffi::cuMemAlloc_v2(&mut ptr, len.max(1))
            }
        }?;
        Ok(DeviceAllocation {
            ptr,
            len,
            ctx: ctx as usize,
        })
    }

    /// The allocation's device address.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }

    /// The bytes asked for.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no bytes were asked for.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

// SAFETY: `ptr` is device memory of `len` bytes (at least one allocated), alive and writable
// until `self` is dropped.
unsafe impl crate::memory::DeviceMemory for DeviceAllocation {
    type Elem = u8;
    fn device_ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

impl Drop for DeviceAllocation {
    fn drop(&mut self) {
        // Freed in its own context, made current for the call on whichever thread drops it (a
        // primary context stays retained for the process).
        // The context is alive: a primary context this crate retains for the process, or one
        // `in_current_context`'s caller keeps alive until now.
        let _ = super::with_context(self.ctx as ffi::CUcontext, || {
            // SAFETY: `ptr` came from cuMemAlloc/cuMemAllocManaged in `ctx` and is freed only
            // here.
            unsafe { ffi::cuMemFree_v2(self.ptr) }
        });
    }
}

/// Waits for all work in the current context (`cuCtxSynchronize`).
pub fn synchronize_context() -> Result<(), DriverError> {
    // SAFETY: no arguments; without a current context the driver returns an error.
    unsafe { ffi::cuCtxSynchronize() }
}

/// Copies the byte ranges `(offset, length)` between host memory at `host` and device memory
/// at `device` (the same offset on both sides), host to device if `to_device`, enqueued on the
/// legacy default stream of the current context (device 0's primary context, made current,
/// when none is), which is then synchronized once. Stops at the
/// first failing copy (and still synchronizes).
///
/// # Safety
/// Every range lies inside both allocations; the host memory stays alive and is neither freed
/// nor written (read, for a copy to the host) by anyone else until this returns.
pub unsafe fn copy_ranges(
    host: *mut u8,
    device: u64,
    ranges: impl Iterator<Item = (usize, usize)>,
    to_device: bool,
) -> Result<(), DriverError> {
    super::ensure_context(0)?;
    let stream = raw_handle(Stream::LegacyDefault);
    let mut copied = Ok(());
    for (at, len) in ranges.filter(|&(_, len)| len > 0) {
        let h = host.wrapping_add(at);
        let d = device + at as u64;
        // SAFETY: the range lies inside both allocations and the host memory is not used
        // elsewhere while the copy runs (the caller's contract); the stream is synchronized
        // below, before this returns.
        copied = unsafe {
            if to_device {
                ffi::cuMemcpyHtoDAsync_v2(d, h.cast(), len, stream)
            } else {
                ffi::cuMemcpyDtoHAsync_v2(h.cast(), d, len, stream)
            }
        };
        if copied.is_err() {
            break;
        }
    }
    // SAFETY: the legacy default stream of the current context.
    let synced = unsafe { ffi::cuStreamSynchronize(stream) };
    copied.and(synced)
}

/// Copies `len` bytes at device address `src` to a new host vector, enqueued on `stream`,
/// which is then synchronized. The caller's context must be current. A vector that cannot be
/// allocated is an error, not an abort: a device can hold more than the host.
///
/// # Safety
/// `src .. src + len` is memory the driver may read (device memory, or unified or registered
/// host memory that no Rust reference lets anything write meanwhile) until this returns;
/// `stream` must be a live stream.
pub unsafe fn copy_to_host(
    src: u64,
    len: usize,
    stream: Stream,
) -> Result<Vec<u8>, CopyToHostError> {
    let mut out = byte_vec(len)?;
    // SAFETY: `out` has room for `len` bytes (reserved above) and nothing else uses it; `src`
    // and `stream` are as this function's contract says.
    unsafe { copy_to_host_into(out.as_mut_ptr(), src, len, stream)? };
    // SAFETY: the capacity is `len`, and the completed copy wrote all `len` bytes.
    unsafe { out.set_len(len) };
    Ok(out)
}

/// Copies `len` bytes at device address `src` into host memory at `dst`, enqueued on
/// `stream`, which is then synchronized: the bytes are there when this returns. The caller's
/// context must be current. No copy of no bytes reaches the driver.
///
/// # Safety
/// `dst` must be valid for `len` bytes of writes, and not read or written by anything else
/// until this returns; `stream` must be a live stream.
pub unsafe fn copy_to_host_into(
    dst: *mut u8,
    src: u64,
    len: usize,
    stream: Stream,
) -> Result<(), DriverError> {
    super::init()?;
    if len == 0 {
        return Ok(());
    }
    let s = raw_handle(stream);
    // SAFETY: `dst` is valid for `len` bytes of writes until this returns (the caller's
    // contract), and the copy is complete once the stream is synchronized below (on error the
    // stream is synchronized too, so no copy can still be writing into `dst` afterwards).
    let copied = unsafe { ffi::cuMemcpyDtoHAsync_v2(dst.cast(), src, len, s) };
    // SAFETY: the stream is alive (caller's contract).
    let synced = unsafe { ffi::cuStreamSynchronize(s) };
    copied.and(synced)
}

/// The items of an array at device address `ptr` with `layout`, in C order: the bytes the
/// array spans are copied on `stream` (then synchronized) and gathered on the host.
///
/// # Safety
/// The bytes `layout` spans around `ptr` are memory the driver may read, as for
/// [`copy_to_host`]; `stream` must be a live stream.
pub unsafe fn gather_to_host(
    ptr: u64,
    layout: &Layout,
    stream: Stream,
) -> Result<Vec<u8>, CopyToHostError> {
    let Some(extent) = layout.extent() else {
        return Ok(Vec::new());
    };
    // SAFETY: the span of the layout around `ptr`, readable (this function's contract).
    let span = unsafe {
        copy_to_host(
            ptr.wrapping_add_signed(extent.lo as i64),
            extent.len(),
            stream,
        )
    }?;
    let itemsize = layout.itemsize();
    let mut out = byte_vec(layout.nbytes())?;
    for off in layout.item_offsets() {
        // Item offsets lie inside the extent, so this range is inside `span`.
        let at = (off - extent.lo) as usize;
        out.extend_from_slice(&span[at..at + itemsize]);
    }
    Ok(out)
}

/// Copies host bytes to device address `dst` on `stream` and waits for the copy.
///
/// # Safety
/// `dst .. dst + data.len()` is memory the driver may write (device memory, or unified or
/// registered host memory no Rust reference covers) that nothing else reads or writes until
/// this returns; `stream` must be a live stream.
pub unsafe fn copy_from_host(dst: u64, data: &[u8], stream: Stream) -> Result<(), DriverError> {
    super::init()?;
    if data.is_empty() {
        return Ok(());
    }
    let s = raw_handle(stream);
    // SAFETY: `data` is valid for reads of its length until the stream is synchronized below.
    let copied = unsafe { ffi::cuMemcpyHtoDAsync_v2(dst, data.as_ptr().cast(), data.len(), s) };
    // SAFETY: the stream is alive (caller's contract).
    let synced = unsafe { ffi::cuStreamSynchronize(s) };
    copied.and(synced)
}

/// Enqueues setting `len` bytes at `dst` to `value` on `stream`, without waiting. Nothing to
/// set (`len` 0, as for an empty array, whose address may be null) is no call at all.
///
/// # Safety
/// `dst .. dst + len` must be device memory the caller may write, alive until the work
/// completes, and `stream` a live stream.
pub unsafe fn memset_async(
    dst: u64,
    value: u8,
    len: usize,
    stream: Stream,
) -> Result<(), DriverError> {
    enqueue(len, stream, |s| {
        // SAFETY: the caller's contract.
        unsafe { ffi::cuMemsetD8Async(dst, value, len, s) }
    })
}

/// Enqueues copying `len` bytes from device address `src` to device address `dst` on
/// `stream`, without waiting. Nothing to copy (`len` 0) is no call at all.
///
/// # Safety
/// `src .. src + len` must be device memory alive until the work completes, `dst .. dst + len`
/// device memory the caller may write, alive as long, and `stream` a live stream.
pub unsafe fn copy_async(
    dst: u64,
    src: u64,
    len: usize,
    stream: Stream,
) -> Result<(), DriverError> {
    enqueue(len, stream, |s| {
        // SAFETY: the caller's contract.
        unsafe { ffi::cuMemcpyDtoDAsync_v2(dst, src, len, s) }
    })
}

/// Enqueues the driver call `call` (given the stream's raw handle) on `stream` for `len`
/// bytes, or nothing when there are none.
fn enqueue(
    len: usize,
    stream: Stream,
    call: impl FnOnce(ffi::CUstream) -> Result<(), DriverError>,
) -> Result<(), DriverError> {
    super::init()?;
    if len == 0 {
        return Ok(());
    }
    call(raw_handle(stream))
}
