//! The CUDA driver (feature `cuda`), loaded at run time: the spec's Synchronization and
//! Lifetime sections and its pointer attributes, for real.
//!
//! - `ffi.rs`: the driver entry points this module calls, loaded from `libcuda.so.1`, each
//!   checked ([`DRIVER_ENTRY_POINTS`]).
//! - `device_memory.rs`: [`DeviceAllocation`]; copies ([`copy_to_host`], [`copy_ranges`]...).
//! - `stream.rs`: [`DriverStream`]; [`PendingStreams`] for data with work pending on several
//!   streams; [`order_after`], the event wait.
//! - `cudarc.rs` (feature `cudarc`): cudarc 0.19's `CudaSlice`, `CudaView`, `CudaViewMut` as
//!   [`crate::DeviceMemory`], its `CudaStream` as a derive's `#[cai(stream)]` field.
//! - `cust.rs` (feature `cust`): cust 0.3's `DeviceBuffer`, `DeviceBox` and `UnifiedBuffer` as
//!   [`crate::DeviceMemory`], its `Stream` as a derive's `#[cai(stream)]` field.
//! - `synchronize.rs`: what an import does about the producer's stream
//!   ([`crate::sync::plan`]), done ([`synchronize_import`]); [`release_import`], the
//!   producer's stream ordered after the consumer's work.
//! - `pointer_attributes.rs`: [`pointer_attributes`] and the import checks built on them.
//!
//! Nothing here needs CUDA to compile, link or load: without a driver every call fails with
//! [`crate::DriverError::NO_DRIVER`] (with the stub from `scripts/cuda-stub.sh`, which the
//! feature `cust` links against where CUDA is not installed, `CUDA_ERROR_STUB_LIBRARY`), which
//! [`crate::DriverError::is_no_device`] recognizes so that tests skip.

#[cfg(feature = "cudarc")]
mod cudarc;
#[cfg(feature = "cust")]
mod cust;
mod device_memory;
mod ffi;
mod pointer_attributes;
mod stream;
mod synchronize;

use std::sync::{Mutex, OnceLock};

use crate::driver_error::DriverError;

#[cfg(feature = "cudarc")]
pub use cudarc::ForeignCudaSlice;
pub use device_memory::{
    DeviceAllocation, copy_async, copy_from_host, copy_ranges, copy_to_host, copy_to_host_into,
    gather_to_host, memset_async, synchronize_context,
};
pub use ffi::ENTRY_POINTS as DRIVER_ENTRY_POINTS;
pub use pointer_attributes::{ImportCheckError, check_device_pointer, pointer_attributes};
pub use stream::{
    DriverStream, ExportStream, PendingStreams, from_raw_handle, order_after, order_after_on,
    stream_device, stream_device_mismatch, synchronize_stream, synchronize_stream_on,
};
pub use synchronize::{execute, release_import, synchronize_import};

/// Initializes the driver API once (`cuInit(0)`); later calls return the first outcome. Every
/// function of this module calls it first.
pub fn init() -> Result<(), DriverError> {
    static INIT: OnceLock<Result<(), DriverError>> = OnceLock::new();
    // SAFETY: cuInit takes flags by value and may be called from any thread, any number of
    // times.
    *INIT.get_or_init(|| unsafe { ffi::cuInit(0) })
}

/// How many CUDA devices the driver sees.
pub fn device_count() -> Result<u32, DriverError> {
    init()?;
    let mut count = 0;
    // SAFETY: `count` is a valid out-pointer for one int.
    unsafe { ffi::cuDeviceGetCount(&mut count) }?;
    Ok(u32::try_from(count).unwrap_or(0))
}

/// Device `ordinal`'s name, as the driver gives it (`cuDeviceGetName`: "NVIDIA H100 80GB
/// HBM3"...).
pub fn device_name(ordinal: u32) -> Result<String, DriverError> {
    let dev = device(ordinal)?;
    let mut name = [0u8; 256];
    // SAFETY: `name` is writable for its length, which is passed (one less: the last byte
    // stays NUL whatever the driver writes).
    unsafe { ffi::cuDeviceGetName(name.as_mut_ptr().cast(), name.len() as i32 - 1, dev) }?;
    let name = std::ffi::CStr::from_bytes_until_nul(&name).unwrap_or_default();
    Ok(name.to_string_lossy().into_owned())
}

/// The driver's own name and description of a result code (`cuGetErrorName`,
/// `cuGetErrorString`), where it knows the code; [`DriverError`]'s messages use this crate's
/// table ([`crate::driver_error_name`]), which needs no driver.
pub fn driver_error_text(code: u32) -> Result<(String, String), DriverError> {
    let code = i32::try_from(code).map_err(|_| DriverError {
        operation: "cuGetErrorName",
        code: DriverError::CUDA_ERROR_INVALID_VALUE,
    })?;
    let text = |name: bool| -> Result<String, DriverError> {
        let mut s: *const std::ffi::c_char = std::ptr::null();
        // SAFETY: a valid out-pointer; on success the driver points it at a static
        // NUL-terminated string.
        unsafe {
            if name {
                ffi::cuGetErrorName(code, &mut s)
            } else {
                ffi::cuGetErrorString(code, &mut s)
            }
        }?;
        if s.is_null() {
            return Ok(String::new());
        }
        // SAFETY: non-null: the driver's static NUL-terminated string.
        Ok(unsafe { std::ffi::CStr::from_ptr(s) }
            .to_string_lossy()
            .into_owned())
    };
    Ok((text(true)?, text(false)?))
}

/// Device `ordinal`'s handle (`cuDeviceGet`); an ordinal past the last is
/// `CUDA_ERROR_INVALID_DEVICE`.
fn device(ordinal: u32) -> Result<ffi::CUdevice, DriverError> {
    init()?;
    let ordinal = i32::try_from(ordinal).map_err(|_| DriverError {
        operation: "cuDeviceGet",
        code: DriverError::CUDA_ERROR_INVALID_DEVICE,
    })?;
    let mut dev: ffi::CUdevice = 0;
    // SAFETY: `dev` is a valid out-pointer; the ordinal is checked by the driver.
    unsafe { ffi::cuDeviceGet(&mut dev, ordinal) }?;
    Ok(dev)
}

/// Makes the primary context of device `ordinal` current on this thread if no context is
/// (what the runtime API, CuPy and PyTorch do), retaining it for the life of the process.
/// A thread that already has a current context keeps it.
pub fn ensure_context(ordinal: u32) -> Result<(), DriverError> {
    init()?;
    let mut current: ffi::CUcontext = std::ptr::null_mut();
    // SAFETY: `current` is a valid out-pointer for one CUcontext.
    unsafe { ffi::cuCtxGetCurrent(&mut current) }?;
    if !current.is_null() {
        return Ok(());
    }
    let ctx = primary_context(ordinal)?;
    // SAFETY: `ctx` is a primary context retained below and never released.
    unsafe { ffi::cuCtxSetCurrent(ctx as ffi::CUcontext) }
}

/// The primary context of device `ordinal`, retained once per process (never released, like
/// the runtime API's), as an address.
fn primary_context(ordinal: u32) -> Result<usize, DriverError> {
    init()?;
    static RETAINED: Mutex<Vec<(u32, usize)>> = Mutex::new(Vec::new());
    let mut retained = RETAINED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(&(_, ctx)) = retained.iter().find(|(o, _)| *o == ordinal) {
        return Ok(ctx);
    }
    let dev = device(ordinal)?;
    let mut ctx: ffi::CUcontext = std::ptr::null_mut();
    // SAFETY: `ctx` is a valid out-pointer, `dev` a device handle from cuDeviceGet.
    unsafe { ffi::cuDevicePrimaryCtxRetain(&mut ctx, dev) }?;
    retained.push((ordinal, ctx as usize));
    Ok(ctx as usize)
}

/// The current context (device 0's primary context made current when none is), which must be
/// its device's primary context: this crate then retains it for the process, so that nothing
/// made in it can outlive it. A context of the caller's own (`cuCtxCreate`) is
/// [`DriverError::NOT_PRIMARY_CONTEXT`]: another owner may destroy it while a value of this
/// crate still names it, and the driver's behaviour for a destroyed context is undefined.
pub(crate) fn current_primary_context() -> Result<ffi::CUcontext, DriverError> {
    ensure_context(0)?;
    let mut current: ffi::CUcontext = std::ptr::null_mut();
    // SAFETY: `current` is a valid out-pointer for one CUcontext.
    unsafe { ffi::cuCtxGetCurrent(&mut current) }?;
    let primary = primary_context(device_of_current_context()?)? as ffi::CUcontext;
    if current == primary {
        Ok(primary)
    } else {
        Err(DriverError::NOT_PRIMARY_CONTEXT)
    }
}

/// The current context, whatever it is (device 0's primary context made current when none is).
fn current_context() -> Result<ffi::CUcontext, DriverError> {
    ensure_context(0)?;
    let mut current: ffi::CUcontext = std::ptr::null_mut();
    // SAFETY: `current` is a valid out-pointer for one CUcontext.
    unsafe { ffi::cuCtxGetCurrent(&mut current) }?;
    Ok(current)
}

/// The device of the current context, or 0 (its primary context made current) when none is:
/// "the current device", as CuPy and PyTorch say.
pub fn current_device() -> Result<u32, DriverError> {
    ensure_context(0)?;
    device_of_current_context()
}

/// The device of the current context, or `ordinal` when none is current (nothing is made
/// current): the device whose default streams a consumer means.
pub fn current_device_or(ordinal: u32) -> Result<u32, DriverError> {
    init()?;
    let mut current: ffi::CUcontext = std::ptr::null_mut();
    // SAFETY: `current` is a valid out-pointer for one CUcontext.
    unsafe { ffi::cuCtxGetCurrent(&mut current) }?;
    if current.is_null() {
        return Ok(ordinal);
    }
    device_of_current_context()
}

/// `cuCtxGetDevice`, with a context current.
fn device_of_current_context() -> Result<u32, DriverError> {
    let mut device: ffi::CUdevice = 0;
    // SAFETY: `device` is a valid out-pointer; a context is current (the callers').
    unsafe { ffi::cuCtxGetDevice(&mut device) }?;
    u32::try_from(device).map_err(|_| DriverError {
        operation: "cuCtxGetDevice",
        code: DriverError::CUDA_ERROR_INVALID_DEVICE,
    })
}

/// Runs `f` (which may make another context current, as cudarc's calls do), then makes the
/// context before it current again (even if `f` panics), through the driver's own record of it
/// ([`Restore`]): the context current now is pushed again before `f` and popped back to after.
/// (Where another thread destroyed that context while it was current here, the driver says so,
/// `CUDA_ERROR_CONTEXT_IS_DESTROYED`, as its documentation gives for such a context: then there
/// is nothing to restore.)
#[cfg(feature = "cudarc")]
pub(crate) fn keeping_current_context<R>(f: impl FnOnce() -> R) -> R {
    let mut previous: ffi::CUcontext = std::ptr::null_mut();
    // SAFETY: a valid out-pointer.
    let restore = match unsafe { ffi::cuCtxGetCurrent(&mut previous) } {
        Err(_) => Restore::Nothing,
        Ok(()) if previous.is_null() => Restore::Unbind,
        // SAFETY: the context current this moment (the driver just said so), pushed again.
        Ok(()) => match unsafe { ffi::cuCtxPushCurrent_v2(previous) } {
            Ok(()) => Restore::PopTo(previous),
            Err(_) => Restore::Nothing,
        },
    };
    let guard = RestoreGuard(restore);
    let out = f();
    let _ = guard.finish();
    out
}

/// How the context current before a call is made current again after it, whatever the call did
/// to this thread's context stack, and without handing the driver a context the call may have
/// destroyed meanwhile.
#[derive(Clone, Copy)]
enum Restore {
    /// A context was pushed over `previous`: pop until `previous` is current again (the
    /// driver's own record of it), at most [`Restore::MAX_POPS`] times; what the call pushed
    /// and left is popped too.
    PopTo(ffi::CUcontext),
    /// `ctx`, a live context (a retained primary context, or the caller's), was current
    /// before and nothing was pushed: made current again if the call changed that.
    Reset(ffi::CUcontext),
    /// No context was current before: none is again.
    #[cfg_attr(not(feature = "cudarc"), allow(dead_code))]
    Unbind,
    /// Nothing to do.
    Nothing,
}

impl Restore {
    const MAX_POPS: usize = 16;

    fn apply(self) -> Result<(), DriverError> {
        let current = || -> Result<ffi::CUcontext, DriverError> {
            let mut now: ffi::CUcontext = std::ptr::null_mut();
            // SAFETY: a valid out-pointer.
            unsafe { ffi::cuCtxGetCurrent(&mut now) }?;
            Ok(now)
        };
        match self {
            Restore::Nothing => Ok(()),
            Restore::Unbind => {
                if !current()?.is_null() {
                    // SAFETY: null unbinds whatever context is current (no handle is passed).
                    unsafe { ffi::cuCtxSetCurrent(std::ptr::null_mut()) }?;
                }
                Ok(())
            }
            Restore::Reset(ctx) => {
                if current()? != ctx {
                    // SAFETY: `ctx` is live (this variant's contract).
                    unsafe { ffi::cuCtxSetCurrent(ctx) }?;
                }
                Ok(())
            }
            Restore::PopTo(previous) => {
                for _ in 0..Self::MAX_POPS {
                    if current()?.is_null() {
                        // The stack is empty: the call took the context before off it (it
                        // destroyed it, say), and there is none to make current again.
                        return Ok(());
                    }
                    let mut popped: ffi::CUcontext = std::ptr::null_mut();
                    // SAFETY: a valid out-pointer; pops this thread's top context (no handle
                    // is passed).
                    unsafe { ffi::cuCtxPopCurrent_v2(&mut popped) }?;
                    if current()? == previous {
                        return Ok(());
                    }
                }
                Err(DriverError {
                    operation: "cuCtxPopCurrent (the context before was not found again)",
                    code: DriverError::CUDA_ERROR_INVALID_CONTEXT,
                })
            }
        }
    }
}

/// Applies its [`Restore`] when dropped, so that a panic restores the context too.
struct RestoreGuard(Restore);

impl RestoreGuard {
    fn finish(mut self) -> Result<(), DriverError> {
        std::mem::replace(&mut self.0, Restore::Nothing).apply()
    }
}

impl Drop for RestoreGuard {
    fn drop(&mut self) {
        let _ = std::mem::replace(&mut self.0, Restore::Nothing).apply();
    }
}

/// Runs `f` with device `ordinal`'s primary context current on this thread (retained for the
/// process), then restores the previous context: driver work for data on that device, whatever
/// device is current.
pub fn with_device<R, E: From<DriverError>>(
    ordinal: u32,
    f: impl FnOnce() -> Result<R, E>,
) -> Result<R, E> {
    init()?;
    let ctx = primary_context(ordinal)?;
    with_context(ctx as ffi::CUcontext, f)
}

/// Runs `f` with `ctx` current on this thread, then makes the context before current again
/// (even if `f` panics). `ctx` is pushed on the driver's context stack, and popped back to the
/// context before after `f` ([`Restore`]), so that one `f` (or another thread) destroys
/// meanwhile is never handed to the driver by this crate; where `ctx` is current already, it is
/// made current again if `f` changed that.
fn with_context<R, E: From<DriverError>>(
    ctx: ffi::CUcontext,
    f: impl FnOnce() -> Result<R, E>,
) -> Result<R, E> {
    if ctx.is_null() {
        return f();
    }
    let mut previous: ffi::CUcontext = std::ptr::null_mut();
    // SAFETY: valid out-pointer.
    unsafe { ffi::cuCtxGetCurrent(&mut previous) }?;
    let restore = if previous == ctx {
        Restore::Reset(ctx)
    } else {
        // SAFETY: `ctx` comes from the driver (a stream's or a pointer's context, or a primary
        // context this crate retains) and is alive while the object it was read from is.
        unsafe { ffi::cuCtxPushCurrent_v2(ctx) }?;
        Restore::PopTo(previous)
    };
    let guard = RestoreGuard(restore);
    let out = f();
    let restored = guard.finish();
    let out = out?;
    restored.map(|()| out).map_err(E::from)
}
