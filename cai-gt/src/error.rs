//! [`StorageError`]: every way a storage parameter, a wrap or a transfer can fail.

use cai_runtime::__private::Shown;
use cai_runtime::DriverError;

/// A storage parameter GDP-3 does not allow; each names the parameter and the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// `layout` is not a permutation of `0..ndim`.
    #[error(
        "layout = {} is not a permutation of 0..{ndim} (one entry per dimension, each once; the largest entry is the contiguous dimension)",
        Shown(.layout)
    )]
    Layout {
        /// The layout given.
        layout: Vec<usize>,
        /// The number of dimensions.
        ndim: usize,
    },
    /// A per-dimension parameter has the wrong length.
    #[error("{param} has {got} entries but the storage has {ndim} dimensions")]
    Length {
        /// `"halo"`, `"aligned_index"`, `"dims"`, `"layout"`.
        param: &'static str,
        /// Its length.
        got: usize,
        /// The number of dimensions.
        ndim: usize,
    },
    /// A halo wider than its dimension.
    // (The sum in u128: two user numbers up to 2**64 - 1 each.)
    #[error("halo = {halo:?} on dimension {axis} needs {} points but the dimension has {size}", halo.0 as u128 + halo.1 as u128)]
    HaloTooLarge {
        /// The dimension.
        axis: usize,
        /// Its (start, end) halo.
        halo: (usize, usize),
        /// Its size.
        size: usize,
    },
    /// `aligned_index` outside the shape.
    #[error("aligned_index = {index:?} is outside the shape {shape:?} (dimension {axis})")]
    AlignedIndex {
        /// The index.
        index: Vec<usize>,
        /// The shape.
        shape: Vec<usize>,
        /// The offending dimension.
        axis: usize,
    },
    /// `alignment_size` that is neither a multiple nor a divisor of the item size.
    #[error(
        "alignment_size = {alignment} is not a multiple of the item size {itemsize} (nor a divisor of it): an aligned item must start every alignment_size bytes"
    )]
    Alignment {
        /// The alignment asked for.
        alignment: usize,
        /// The item size.
        itemsize: usize,
    },
    /// `alignment_size` = 0.
    #[error("alignment_size = 0: use 1 for no alignment")]
    ZeroAlignment,
    /// Sizes overflow.
    #[error(
        "shape {shape:?} of {itemsize}-byte items, padded for alignment, is too large to allocate"
    )]
    Overflow {
        /// The shape.
        shape: Vec<usize>,
        /// The item size.
        itemsize: usize,
    },
    /// Nothing to wrap: neither host nor device memory.
    #[error("data describes no host buffer; pass device memory as device_data")]
    NothingToWrap,
    /// The element type asked for is not the one of the memory to wrap.
    #[error("the storage's element type {element} is not the memory's: {memory}")]
    ElementMismatch {
        /// The storage's element type.
        element: String,
        /// The memory's, as imported.
        memory: String,
    },
    /// Host and device memory to mirror are not one element type.
    #[error(
        "data and device_data must be two copies of one array: {host} on the host, {device} on the device"
    )]
    MirrorType {
        /// The host side's element type.
        host: String,
        /// The device side's.
        device: String,
    },
    /// Memory to mirror is read-only: a mirror copy writes either side.
    #[error(
        "{} is read-only, but a mirrored storage copies each side into the other: wrap read-only memory alone (as_storage(data) or as_storage(device_data=...)), or copy it (storage(data, device_data))",
        if *.host { "data (the host side)" } else { "device_data (the device side)" }
    )]
    MirrorReadOnly {
        /// Whether the host side is the read-only one (else the device side).
        host: bool,
    },
    /// Host and device memory to mirror have different layouts.
    #[error(
        "data and device_data must have the same layout: shape {:?} strides {:?} on the host, shape {:?} strides {:?} on the device",
        .host.0, .host.1, .device.0, .device.1
    )]
    MirrorLayout {
        /// The host side's shape and strides.
        host: (Vec<usize>, Vec<isize>),
        /// The device side's.
        device: (Vec<usize>, Vec<isize>),
    },
    /// A device storage asked for over memory with no device side.
    #[error(
        "{}, but the data to wrap has no device buffer: pass device memory as device_data, or device=None to keep the storage in host memory",
        match .preset { Some(p) => format!("defaults = \"{}\" (a GPU preset)", p.name()), None => "device = \"gpu\"".to_string() }
    )]
    NoDeviceBuffer {
        /// The GPU preset that placed the storage on the device, where no `device` was given.
        preset: Option<crate::Preset>,
    },
    /// A `layout` parameter the wrapped memory's strides do not follow.
    #[error(
        "layout = {layout:?} does not match the buffer's strides {strides:?} (their order is {order:?})"
    )]
    LayoutOrder {
        /// The layout asked for.
        layout: Vec<usize>,
        /// The memory's strides.
        strides: Vec<isize>,
        /// Their order.
        order: Vec<usize>,
    },
    /// Wrapped memory whose aligned item is not at an aligned address.
    #[error(
        "alignment_size = {alignment} with aligned_index = {aligned_index:?}: the buffer's item there is at address {address:#x}, not aligned"
    )]
    Unaligned {
        /// `alignment_size`.
        alignment: usize,
        /// `aligned_index`.
        aligned_index: Vec<usize>,
        /// The item's address.
        address: i128,
    },
    /// An unknown `defaults` preset.
    #[error(
        "defaults = {} is not a preset: use one of {}",
        Shown(.0),
        crate::Preset::ALL.iter().map(|p| format!("\"{}\"", p.name())).collect::<Vec<_>>().join(", ")
    )]
    Preset(String),
    /// A bad `dims` entry.
    #[error("dims = {}: {why}", Shown(.dims))]
    Dims {
        /// The dims given.
        dims: Vec<String>,
        /// What is wrong.
        why: String,
    },
    /// A bad `device`.
    #[error(
        "device = {}: use None (host memory), \"gpu\" (the current device) or \"gpu:N\" (device N)",
        Shown(.0)
    )]
    Device(String),
    /// `device="gpu:N"` past the last device.
    #[error("device = \"gpu:{device}\": no such device (this machine has {count} CUDA devices)")]
    NoSuchDevice {
        /// The ordinal asked for.
        device: u32,
        /// How many devices there are.
        count: u32,
    },
    /// Wrapped device memory is on another device than the one asked for.
    #[error("device = \"gpu:{asked}\", but the device memory given is on device {memory}")]
    WrongDevice {
        /// The device asked for.
        asked: u32,
        /// The memory's device.
        memory: u32,
    },
    /// A bad `managed`.
    #[error(
        "managed = {}: use None, \"gt4py\" (host and device mirror) or \"cuda\" (unified memory)",
        Shown(.0)
    )]
    Managed(String),
    /// A dtype a storage cannot hold.
    #[error(
        "dtype {} cannot be stored: storages hold fixed-size plain data (numbers, booleans, bytes, structured types), not Python objects or zero-size items",
        Shown(.0)
    )]
    Dtype(String),
    /// The host allocation failed.
    #[error("cannot allocate {0} bytes of host memory")]
    Alloc(usize),
    /// A device storage was asked for where there is no usable CUDA driver or device: the
    /// driver's error (`cuInit` failing, no device visible...).
    #[error("device=\"gpu\" needs a CUDA device: {0}")]
    NoGpu(#[source] DriverError),
    /// A fill value of the wrong size.
    #[error("fill value has {got} bytes but an item has {itemsize}")]
    FillValue {
        /// Bytes given.
        got: usize,
        /// The item size.
        itemsize: usize,
    },
    /// A write to wrapped read-only memory.
    #[error("the storage wraps read-only memory")]
    ReadOnly,
    /// The storage has no buffer on that side (GT4Py's `GTNoSuchBufferError`).
    #[error("the storage has no {0} buffer")]
    NoSuchBuffer(&'static str),
    /// A driver call of a device storage failed: copying between host and device, or
    /// allocating or clearing device memory.
    #[error("copy between host and device failed: {0}")]
    Driver(#[source] DriverError),
    /// Copying between host and device (or between two storages' items) cannot be done: why.
    #[error("copy between host and device failed: {0}")]
    Transfer(String),
}

impl From<DriverError> for StorageError {
    /// No usable driver or device is [`StorageError::NoGpu`]; any other failure
    /// [`StorageError::Driver`].
    fn from(e: DriverError) -> Self {
        if e.is_no_device() {
            StorageError::NoGpu(e)
        } else {
            StorageError::Driver(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::StorageError;
    use crate::error::DriverError;
    use std::error::Error;

    #[test]
    fn driver_failures_keep_the_driver_error_as_source() {
        let driver = DriverError {
            operation: "cuInit",
            code: DriverError::CUDA_ERROR_NO_DEVICE,
        };
        let no_gpu = StorageError::NoGpu(driver);
        assert_eq!(
            no_gpu.to_string(),
            format!("device=\"gpu\" needs a CUDA device: {driver}")
        );
        let failed = StorageError::Driver(DriverError {
            operation: "cuMemcpyHtoD",
            code: DriverError::CUDA_ERROR_ILLEGAL_ADDRESS,
        });
        assert_eq!(
            failed.to_string(),
            "copy between host and device failed: cuMemcpyHtoD failed: CUDA_ERROR_ILLEGAL_ADDRESS (700)"
        );
        for (e, operation) in [(no_gpu, "cuInit"), (failed, "cuMemcpyHtoD")] {
            let source = e.source().and_then(|s| s.downcast_ref::<DriverError>());
            assert_eq!(source.map(|d| d.operation), Some(operation));
        }
    }
}
