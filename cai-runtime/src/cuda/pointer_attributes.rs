//! Pointer attributes from the driver (`cuPointerGetAttributes`, `cuMemGetAddressRange`) and
//! the import check built on them ([`crate::pointer::check_pointer`]).

use std::os::raw::{c_int, c_uint, c_void};

use super::{ffi, init, with_context};
use crate::driver_error::DriverError;
use crate::layout::Extent;
use crate::pointer::{MemoryType, PointerAttributes, PointerError, check_pointer};

/// What the driver knows about `ptr`. Any address may be asked about: one CUDA did not
/// allocate comes back as [`MemoryType::Unregistered`] with no context and no range.
pub fn pointer_attributes(ptr: u64) -> Result<PointerAttributes, DriverError> {
    init()?;
    let mut context: ffi::CUcontext = std::ptr::null_mut();
    let mut memory_type: c_uint = 0;
    let mut is_managed: c_uint = 0;
    let mut ordinal: c_int = -1;
    let mut attributes = [
        ffi::CU_POINTER_ATTRIBUTE_CONTEXT,
        ffi::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
        ffi::CU_POINTER_ATTRIBUTE_IS_MANAGED,
        ffi::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
    ];
    let mut data: [*mut c_void; 4] = [
        (&raw mut context).cast(),
        (&raw mut memory_type).cast(),
        (&raw mut is_managed).cast(),
        (&raw mut ordinal).cast(),
    ];
    // SAFETY: four attributes, each with an out-pointer of the type the driver writes for it
    // (CUcontext, unsigned int, unsigned int used as bool, int). For an address it does not
    // know, cuPointerGetAttributes succeeds and writes null/zero values.
    unsafe { ffi::cuPointerGetAttributes(4, attributes.as_mut_ptr(), data.as_mut_ptr(), ptr) }?;
    let memory_type = match (is_managed != 0, memory_type) {
        (true, _) | (false, ffi::CU_MEMORYTYPE_UNIFIED) => MemoryType::Managed,
        (false, ffi::CU_MEMORYTYPE_DEVICE | ffi::CU_MEMORYTYPE_ARRAY) => MemoryType::Device,
        (false, ffi::CU_MEMORYTYPE_HOST) => MemoryType::Host,
        _ => MemoryType::Unregistered,
    };
    let device_ordinal = u32::try_from(ordinal).ok();
    // The allocation's range. Not every kind of memory has one the driver reports (registered
    // host memory, some virtual-memory mappings): then the range is unknown and only
    // accessibility is checked, rather than refusing memory that may be fine.
    let range = if memory_type == MemoryType::Unregistered || context.is_null() {
        None
    } else {
        with_context(context, || {
            let (mut base, mut size): (ffi::CUdeviceptr, usize) = (0, 0);
            // SAFETY: valid out-pointers; the allocation's context is current.
            let found = unsafe { ffi::cuMemGetAddressRange_v2(&mut base, &mut size, ptr) };
            Ok(found.ok().map(|()| (base, size as u64)))
        })?
    };
    let pageable_memory_access = memory_type == MemoryType::Unregistered
        && pageable_memory_access(device_ordinal.unwrap_or(0)).unwrap_or(false);
    Ok(PointerAttributes {
        ptr,
        context: context as usize as u64,
        device_ordinal,
        memory_type,
        is_managed: is_managed != 0,
        pageable_memory_access,
        range,
    })
}

/// Whether device `ordinal` can dereference pageable host memory (HMM or ATS).
fn pageable_memory_access(ordinal: u32) -> Result<bool, DriverError> {
    let dev = super::device(ordinal)?;
    let mut value: c_int = 0;
    // SAFETY: valid out-pointer; the attribute is a cuda.h constant.
    unsafe {
        ffi::cuDeviceGetAttribute(
            &mut value,
            ffi::CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
            dev,
        )
    }?;
    Ok(value != 0)
}

/// Why an imported pointer was not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ImportCheckError {
    /// The driver could not be asked.
    #[error("cannot check `data` with the CUDA driver: {0}")]
    Driver(#[from] DriverError),
    /// The driver says the pointer is unusable.
    #[error(transparent)]
    Pointer(#[from] PointerError),
}

/// Asks the driver about `ptr` and checks an array spanning `extent` bytes around it (`None`
/// for a zero-size array, which is accepted without asking).
pub fn check_device_pointer(
    ptr: u64,
    extent: Option<Extent>,
) -> Result<Option<PointerAttributes>, ImportCheckError> {
    if extent.is_none() {
        return Ok(None);
    }
    let attrs = pointer_attributes(ptr)?;
    check_pointer(&attrs, extent)?;
    Ok(Some(attrs))
}
