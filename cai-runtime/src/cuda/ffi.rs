//! The few driver entry points this crate calls itself, declared with an integer result.
//!
//! cust_raw declares `CUresult` as a Rust enum; a driver newer than its bindings can return a
//! code the enum lacks, which would be undefined behaviour. Declaring the result as `c_int`
//! makes every code representable. The symbols come from the libcuda that cust_raw links.

use std::os::raw::{c_int, c_uint, c_void};

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

unsafe extern "C" {
    pub fn cuInit(flags: c_uint) -> c_int;
    pub fn cuDeviceGet(device: *mut CUdevice, ordinal: c_int) -> c_int;
    pub fn cuDeviceGetAttribute(pi: *mut c_int, attrib: c_int, dev: CUdevice) -> c_int;
    pub fn cuDevicePrimaryCtxRetain(pctx: *mut CUcontext, dev: CUdevice) -> c_int;
    pub fn cuCtxGetCurrent(pctx: *mut CUcontext) -> c_int;
    pub fn cuCtxSetCurrent(ctx: CUcontext) -> c_int;
    pub fn cuStreamGetCtx(stream: CUstream, pctx: *mut CUcontext) -> c_int;
    pub fn cuStreamSynchronize(stream: CUstream) -> c_int;
    pub fn cuStreamCreate(stream: *mut CUstream, flags: c_uint) -> c_int;
    pub fn cuStreamDestroy_v2(stream: CUstream) -> c_int;
    pub fn cuStreamWaitEvent(stream: CUstream, event: CUevent, flags: c_uint) -> c_int;
    pub fn cuEventCreate(event: *mut CUevent, flags: c_uint) -> c_int;
    pub fn cuEventRecord(event: CUevent, stream: CUstream) -> c_int;
    pub fn cuEventDestroy_v2(event: CUevent) -> c_int;
    pub fn cuPointerGetAttributes(
        num: c_uint,
        attributes: *mut c_int,
        data: *mut *mut c_void,
        ptr: CUdeviceptr,
    ) -> c_int;
    pub fn cuMemGetAddressRange_v2(
        base: *mut CUdeviceptr,
        size: *mut usize,
        ptr: CUdeviceptr,
    ) -> c_int;
    pub fn cuMemcpyDtoHAsync_v2(
        dst: *mut c_void,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    ) -> c_int;
    pub fn cuMemcpyHtoDAsync_v2(
        dst: CUdeviceptr,
        src: *const c_void,
        bytes: usize,
        stream: CUstream,
    ) -> c_int;
    pub fn cuMemcpyDtoDAsync_v2(
        dst: CUdeviceptr,
        src: CUdeviceptr,
        bytes: usize,
        stream: CUstream,
    ) -> c_int;
    pub fn cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, stream: CUstream) -> c_int;
    pub fn cuMemAlloc_v2(dptr: *mut CUdeviceptr, bytes: usize) -> c_int;
    pub fn cuMemAllocManaged(dptr: *mut CUdeviceptr, bytes: usize, flags: c_uint) -> c_int;
    pub fn cuMemFree_v2(dptr: CUdeviceptr) -> c_int;
    pub fn cuCtxSynchronize() -> c_int;
}

/// `Ok` for `CUDA_SUCCESS`, else the error naming the call.
pub fn check(operation: &'static str, code: c_int) -> Result<(), DriverError> {
    match code as u32 {
        DriverError::CUDA_SUCCESS => Ok(()),
        code => Err(DriverError { operation, code }),
    }
}
