//! GT4Py GDP-3 storages: parameters and their presets ([`params`]), semantic dims ([`dims`]), the aligned allocation
//! plan ([`alloc`]), host buffers ([`buffer`]), view arithmetic ([`view`]), the storage itself
//! ([`array`](mod@array)), the host/device mirror's state machine ([`sync_state`]) and the
//! `__gt_data_interface__` model ([`gt`]). Nothing here needs a GPU: device buffers come from
//! the `cuda` module, and the Python package wraps [`Storage`].

pub mod alloc;
pub mod array;
pub mod buffer;
pub mod dims;
pub mod gt;
pub mod params;
pub mod sync_state;
pub mod view;

use crate::error::{DriverError, Shown};

pub use alloc::{AllocationPlan, check_alignment};
pub use array::{Buffers, DeviceBufferHandle, ElementType, Init, Selected, Side, Storage};
pub use buffer::HostBuffer;
pub use dims::{Dim, PerDim, parse_dims};
pub use gt::{GtDataDescriptor, GtDevice};
pub use params::{Managed, Preset, StorageDevice, StorageParams, check_halo};
pub use sync_state::{Mirror, SyncState, SyncStatus};
pub use view::{Geometry, IndexError, IndexItem};

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
    /// An unknown `defaults` preset.
    #[error("defaults = {} is not a preset: use \"C\", \"F\", \"gtx86\" or \"gtcuda\"", Shown(.0))]
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
    #[error("device = {}: use None (host memory) or \"gpu\"", Shown(.0))]
    Device(String),
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
    /// A device storage was asked for where none can be made, whatever the machine: a build
    /// without CUDA, or a host allocation given device parameters (the reason says which).
    #[error("device=\"gpu\" needs a CUDA device: {0}")]
    NoCuda(&'static str),
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
        let no_cuda = StorageError::NoCuda("this build has no CUDA support");
        assert_eq!(
            no_cuda.to_string(),
            "device=\"gpu\" needs a CUDA device: this build has no CUDA support"
        );
        assert!(no_cuda.source().is_none());
    }
}
