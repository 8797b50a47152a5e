//! [`DescriptorError`]: every way a descriptor can break the spec, each naming the key and the
//! offending value.

use crate::driver_error::DriverError;
use crate::layout::LayoutError;
use crate::stream::{Stream, StreamError};
use crate::structured::{Descr, py_tuple};
use crate::typestr::{TypeStr, TypeStrError};

/// A descriptor that breaks a rule of the CUDA Array Interface or NumPy array interface.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DescriptorError {
    /// `typestr` does not parse.
    #[error(transparent)]
    TypeStr(#[from] TypeStrError),
    /// `shape`/`strides` arithmetic overflows or does not match.
    #[error(transparent)]
    Layout(#[from] LayoutError),
    /// `stream` = 0.
    #[error(transparent)]
    Stream(#[from] StreamError),
    /// `version` is not one the protocol has.
    #[error("`version` = {version} is not a version of {attribute} (supported: {}..={})", supported.start(), supported.end())]
    Version {
        /// The version declared.
        version: u32,
        /// The protocol's attribute name.
        attribute: &'static str,
        /// The versions allowed.
        supported: std::ops::RangeInclusive<u32>,
    },
    /// A `stream` in a descriptor declaring a version before 3.
    #[error(
        "`stream` = {stream} needs `version` 3 or later, but `version` = {version}: versions before 3 have no `stream` key, so export version 3 or drop the stream"
    )]
    StreamNeedsV3 {
        /// The stream.
        stream: Stream,
        /// The version declared.
        version: u32,
    },
    /// Null `data` pointer for an array that has items.
    #[error(
        "`data` pointer is 0 but `shape` = {} has items: only zero-size arrays may use 0",
        py_tuple(shape)
    )]
    NullData {
        /// The shape.
        shape: Vec<usize>,
    },
    /// Non-null `data` pointer for an array with no items.
    #[error(
        "`data` pointer is {ptr:#x} but `shape` = {} has no items: the spec requires 0 for zero-size arrays",
        py_tuple(shape)
    )]
    ZeroSizeData {
        /// The pointer.
        ptr: u64,
        /// The shape.
        shape: Vec<usize>,
    },
    /// `descr` describes another item size than `typestr`.
    #[error("`descr` = {descr} describes {} bytes but `typestr` = '{typestr}' has item size {itemsize}", descr_size.map_or_else(|| "an overflowing number of".to_owned(), |n| n.to_string()))]
    DescrSize {
        /// The descr list.
        descr: Descr,
        /// Its size (None on overflow).
        descr_size: Option<usize>,
        /// The type string.
        typestr: TypeStr,
        /// The type string's item size.
        itemsize: usize,
    },
    /// `mask` does not broadcast to `shape`.
    #[error(
        "`mask` has shape {} which does not broadcast to `shape` = {}",
        py_tuple(mask_shape),
        py_tuple(shape)
    )]
    MaskShape {
        /// The mask's shape.
        mask_shape: Vec<usize>,
        /// The array's shape.
        shape: Vec<usize>,
    },
    /// The mask descriptor itself is invalid.
    #[error("`mask`: {0}")]
    Mask(Box<DescriptorError>),
    /// The array reaches outside its buffer or allocation.
    #[error(
        "`shape` = {} with `strides` = {} touches bytes [{lo}, {hi}) but the buffer holds {alloc_len} bytes",
        py_tuple(shape),
        py_tuple(strides)
    )]
    OutOfBounds {
        /// The shape.
        shape: Vec<usize>,
        /// The byte strides in effect.
        strides: Vec<isize>,
        /// First byte touched, relative to the buffer start.
        lo: i128,
        /// One past the last byte touched, relative to the buffer start.
        hi: i128,
        /// The buffer's length in bytes.
        alloc_len: usize,
    },
    /// No shape given and the buffer is not a whole number of items.
    #[error(
        "the buffer holds {byte_len} bytes, not a whole number of '{typestr}' items of {itemsize} bytes: give an explicit `shape`"
    )]
    BufferNotWhole {
        /// Buffer length in bytes.
        byte_len: usize,
        /// The element type string.
        typestr: TypeStr,
        /// Its item size.
        itemsize: usize,
    },
    /// A layout or an item size given for memory that carries its own layout
    /// ([`HostMemory::own_layout`](crate::HostMemory::own_layout): ndarray's arrays), which
    /// the export must take as it is.
    #[error(
        "the memory carries its own shape and strides (an ndarray array): {given} cannot be given too"
    )]
    OwnLayout {
        /// What was given: `shape`, `strides`, `offset`, `order`, or an item size.
        given: &'static str,
    },
}

impl DescriptorError {
    /// The descriptor key the error is about (`"shape"`, `"strides"`, `"data"`...).
    pub fn key(&self) -> &'static str {
        match self {
            DescriptorError::TypeStr(_) => "typestr",
            DescriptorError::Layout(
                LayoutError::ShapeOverflow { .. }
                | LayoutError::Index { .. }
                | LayoutError::Axis { .. },
            ) => "shape",
            DescriptorError::Layout(_) => "strides",
            DescriptorError::Stream(_) | DescriptorError::StreamNeedsV3 { .. } => "stream",
            DescriptorError::Version { .. } => "version",
            DescriptorError::NullData { .. } | DescriptorError::ZeroSizeData { .. } => "data",
            DescriptorError::DescrSize { .. } => "descr",
            DescriptorError::MaskShape { .. } | DescriptorError::Mask(_) => "mask",
            DescriptorError::OutOfBounds { .. }
            | DescriptorError::BufferNotWhole { .. }
            | DescriptorError::OwnLayout { .. } => "shape",
        }
    }
}

/// Host memory of this many bytes could not be allocated (or the size exceeds `isize::MAX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot allocate {0} bytes of host memory")]
pub struct AllocError(pub usize);

/// Copying device memory into a new host vector failed: the driver refused the copy, or the
/// host vector could not be allocated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CopyToHostError {
    /// A driver call failed.
    #[error(transparent)]
    Driver(#[from] DriverError),
    /// The host vector could not be allocated.
    #[error(transparent)]
    HostAlloc(#[from] AllocError),
}
