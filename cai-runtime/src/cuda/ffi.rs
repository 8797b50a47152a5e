//! The driver entry points this crate calls, loaded from the machine's driver (`libcuda.so.1`)
//! at first use, as CuPy, PyTorch and cudarc's dynamic loading do; each is a checked function
//! here (cudarc's `result` layer): it names itself in its error, so call sites say only what
//! they call.
//!
//! Our own declarations over libloading rather than cudarc's `driver::sys`: cudarc (like
//! cust_raw) declares `CUresult` as a Rust enum, and a driver newer than its bindings can return
//! a code the enum lacks, which would be undefined behaviour; declared as `c_int`, every code is
//! representable. An entry point the driver lacks is `CUDA_ERROR_NOT_FOUND` naming it, a
//! machine without a driver is [`DriverError::NO_DRIVER`]: errors, never a crash.

use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::sync::OnceLock;

use crate::driver_error::DriverError;

pub type CUcontext = *mut c_void;
pub type CUstream = *mut c_void;
pub type CUevent = *mut c_void;
pub type CUdevice = c_int;
pub type CUdeviceptr = u64;

/// `CU_STREAM_LEGACY` and `CU_STREAM_PER_THREAD` from `cuda.h`.
pub const CU_STREAM_LEGACY: CUstream = 0x1 as CUstream;
pub const CU_STREAM_PER_THREAD: CUstream = 0x2 as CUstream;
pub const CU_EVENT_DISABLE_TIMING: c_uint = 0x2;
pub const CU_STREAM_NON_BLOCKING: c_uint = 0x1;
pub const CU_MEM_ATTACH_GLOBAL: c_uint = 0x1;

pub const CU_POINTER_ATTRIBUTE_CONTEXT: c_int = 1;
pub const CU_POINTER_ATTRIBUTE_MEMORY_TYPE: c_int = 2;
pub const CU_POINTER_ATTRIBUTE_IS_MANAGED: c_int = 8;
pub const CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: c_int = 9;
pub const CU_MEMORYTYPE_HOST: c_uint = 1;
pub const CU_MEMORYTYPE_DEVICE: c_uint = 2;
pub const CU_MEMORYTYPE_ARRAY: c_uint = 3;
pub const CU_MEMORYTYPE_UNIFIED: c_uint = 4;
pub const CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: c_int = 88;

/// The driver's library: the name a machine with the NVIDIA driver installed has (the
/// unversioned `libcuda.so` comes only with development files).
const LIBRARY: &str = "libcuda.so.1";

/// Declares each entry point once: its slot in the table loaded from the library, its checked
/// function, and its line in [`ENTRY_POINTS`].
macro_rules! driver_entry_points {
    ($(fn $name:ident as $shown:literal($($arg:ident: $ty:ty),*);)*) => {
        /// The entry points, loaded once; `None` where the driver lacks one.
        #[allow(non_snake_case)]
        struct Api {
            $($name: Option<unsafe extern "C" fn($($ty),*) -> c_int>,)*
            /// Keeps the library, and so every entry point above, loaded for good.
            _library: libloading::Library,
        }

        impl Api {
            fn load(library: libloading::Library) -> Api {
                Api {
                    $($name: {
                        // SAFETY: the symbol, where the library has it, is the driver's entry
                        // point of this name, whose C signature (cuda.h) the declaration matches
                        // with `c_int` for `CUresult`; the pointer is used only while `_library`
                        // keeps the library loaded, which is for the life of the process.
                        let symbol = unsafe {
                            library.get::<unsafe extern "C" fn($($ty),*) -> c_int>(
                                concat!(stringify!($name), "\0").as_bytes(),
                            )
                        };
                        symbol.ok().map(|f| *f)
                    },)*
                    _library: library,
                }
            }

            /// The entry points the loaded driver lacks.
            #[cfg(test)]
            fn missing(&self) -> Vec<&'static str> {
                let mut missing = Vec::new();
                $(if self.$name.is_none() {
                    missing.push(stringify!($name));
                })*
                missing
            }
        }

        $(
            /// The driver's entry point of this name (cuda.h), checked: an error names it and
            /// the result code.
            ///
            /// # Safety
            /// As the driver's documentation of this entry point asks: pointer arguments valid
            /// for what it reads and writes, handles (contexts, streams, events) alive.
            #[allow(non_snake_case)]
            pub unsafe fn $name($($arg: $ty),*) -> Result<(), DriverError> {
                let f = api()?.$name.ok_or(DriverError {
                    operation: $shown,
                    code: DriverError::CUDA_ERROR_NOT_FOUND,
                })?;
                // SAFETY: the caller's contract, for the entry point it names.
                check($shown, unsafe { f($($arg),*) })
            }
        )*

        /// Every driver entry point this crate calls (the feature `cust` adds cust's own).
        pub const ENTRY_POINTS: &[&str] = &[$(stringify!($name)),*];
    };
}

/// The loaded entry points, or why there are none.
fn api() -> Result<&'static Api, DriverError> {
    static API: OnceLock<Result<Api, DriverError>> = OnceLock::new();
    API.get_or_init(|| load(LIBRARY)).as_ref().map_err(|e| *e)
}

/// The entry points of the driver library `name`.
fn load(name: &str) -> Result<Api, DriverError> {
    // SAFETY: loading a driver library runs its initializers, which have no preconditions
    // (every CUDA program loads it).
    let library = unsafe { libloading::Library::new(name) }.map_err(|_| DriverError::NO_DRIVER)?;
    Ok(Api::load(library))
}

driver_entry_points! {
    fn cuInit as "cuInit"(flags: c_uint);
    fn cuDeviceGetCount as "cuDeviceGetCount"(count: *mut c_int);
    fn cuDeviceGet as "cuDeviceGet"(device: *mut CUdevice, ordinal: c_int);
    fn cuDeviceGetName as "cuDeviceGetName"(name: *mut c_char, len: c_int, dev: CUdevice);
    fn cuDeviceGetAttribute as "cuDeviceGetAttribute"(pi: *mut c_int, attrib: c_int, dev: CUdevice);
    fn cuDevicePrimaryCtxRetain as "cuDevicePrimaryCtxRetain"(pctx: *mut CUcontext, dev: CUdevice);
    fn cuCtxGetCurrent as "cuCtxGetCurrent"(pctx: *mut CUcontext);
    fn cuCtxSetCurrent as "cuCtxSetCurrent"(ctx: CUcontext);
    fn cuCtxPushCurrent_v2 as "cuCtxPushCurrent"(ctx: CUcontext);
    fn cuCtxPopCurrent_v2 as "cuCtxPopCurrent"(pctx: *mut CUcontext);
    fn cuCtxGetDevice as "cuCtxGetDevice"(device: *mut CUdevice);
    fn cuStreamGetCtx as "cuStreamGetCtx"(stream: CUstream, pctx: *mut CUcontext);
    fn cuStreamSynchronize as "cuStreamSynchronize"(stream: CUstream);
    fn cuStreamCreate as "cuStreamCreate"(stream: *mut CUstream, flags: c_uint);
    fn cuStreamDestroy_v2 as "cuStreamDestroy"(stream: CUstream);
    fn cuStreamWaitEvent as "cuStreamWaitEvent"(stream: CUstream, event: CUevent, flags: c_uint);
    fn cuEventCreate as "cuEventCreate"(event: *mut CUevent, flags: c_uint);
    fn cuEventRecord as "cuEventRecord"(event: CUevent, stream: CUstream);
    fn cuEventDestroy_v2 as "cuEventDestroy"(event: CUevent);
    fn cuPointerGetAttributes as "cuPointerGetAttributes"(num: c_uint, attributes: *mut c_int, data: *mut *mut c_void, ptr: CUdeviceptr);
    fn cuMemGetAddressRange_v2 as "cuMemGetAddressRange"(base: *mut CUdeviceptr, size: *mut usize, ptr: CUdeviceptr);
    fn cuMemcpyDtoHAsync_v2 as "cuMemcpyDtoHAsync"(dst: *mut c_void, src: CUdeviceptr, bytes: usize, stream: CUstream);
    fn cuMemcpyHtoDAsync_v2 as "cuMemcpyHtoDAsync"(dst: CUdeviceptr, src: *const c_void, bytes: usize, stream: CUstream);
    fn cuMemcpyDtoDAsync_v2 as "cuMemcpyDtoDAsync"(dst: CUdeviceptr, src: CUdeviceptr, bytes: usize, stream: CUstream);
    fn cuMemsetD8Async as "cuMemsetD8Async"(dst: CUdeviceptr, value: u8, n: usize, stream: CUstream);
    fn cuMemAlloc_v2 as "cuMemAlloc"(dptr: *mut CUdeviceptr, bytes: usize);
    fn cuMemAllocManaged as "cuMemAllocManaged"(dptr: *mut CUdeviceptr, bytes: usize, flags: c_uint);
    fn cuMemFree_v2 as "cuMemFree"(dptr: CUdeviceptr);
    fn cuCtxSynchronize as "cuCtxSynchronize"();
    fn cuGetErrorName as "cuGetErrorName"(code: c_int, name: *mut *const c_char);
    fn cuGetErrorString as "cuGetErrorString"(code: c_int, description: *mut *const c_char);
}

/// `Ok` for `CUDA_SUCCESS`, else the error naming the call.
fn check(operation: &'static str, code: c_int) -> Result<(), DriverError> {
    match code as u32 {
        DriverError::CUDA_SUCCESS => Ok(()),
        code => Err(DriverError { operation, code }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_driver_is_an_error_that_says_so() {
        let e = load("libcuda-that-is-not-here.so.1")
            .err()
            .expect("no such library");
        assert_eq!(e, DriverError::NO_DRIVER);
        assert!(e.is_no_device(), "tests needing a GPU skip");
        assert_eq!(
            e.to_string(),
            "loading libcuda.so.1 failed: CUDA_ERROR_INSUFFICIENT_DRIVER (35): no NVIDIA driver here; install it to use a GPU"
        );
    }

    /// The libcuda this test finds (the stub in CI, the emulator, a driver) has every entry
    /// point this crate calls: a lost or misspelt name shows here, not on a user's machine.
    #[test]
    fn the_driver_found_has_every_entry_point() {
        match api() {
            Ok(api) => assert_eq!(api.missing(), Vec::<&str>::new()),
            Err(e) => eprintln!("skipped: {e}"),
        }
        assert_eq!(ENTRY_POINTS.len(), 31);
        assert!(ENTRY_POINTS.contains(&"cuMemAlloc_v2"));
    }
}
