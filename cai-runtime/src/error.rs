//! [`DescriptorError`]: every way a descriptor can break the spec, each naming the key and the
//! offending value.

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
            DescriptorError::OutOfBounds { .. } | DescriptorError::BufferNotWhole { .. } => "shape",
        }
    }
}

/// A CUDA driver call that failed: which call, and the `CUresult` it returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
#[error("{operation} failed: {} ({code}){}", driver_error_name(*code), driver_error_hint(*code))]
pub struct DriverError {
    /// The driver call (`"cuInit"`, `"cuEventRecord"`...).
    pub operation: &'static str,
    /// The `CUresult` it returned: one of the `CUDA_ERROR_*` constants below where this crate
    /// knows it.
    pub code: u32,
}

/// Defines each `CUresult` code this crate meets in one line: an associated constant of
/// [`DriverError`] named as in `cuda.h`, and [`driver_error_name`]'s table from the same lines.
macro_rules! cu_results {
    ($($(#[$doc:meta])* $name:ident = $code:literal,)*) => {
        /// The `CUresult` codes this crate meets, named as in `cuda.h` (tests check the names
        /// against cust's bindings of `cuda.h` and against a driver).
        impl DriverError {
            $($(#[$doc])* pub const $name: u32 = $code;)*
        }

        /// The `CUresult` name for the codes this crate meets (`cuGetErrorName` needs a driver,
        /// and a message about a missing driver must not).
        pub fn driver_error_name(code: u32) -> &'static str {
            match code {
                $(DriverError::$name => stringify!($name),)*
                _ => "CUDA error",
            }
        }
    };
}

cu_results! {
    /// Success (never the code of a `DriverError`).
    CUDA_SUCCESS = 0,
    /// An argument is out of range.
    CUDA_ERROR_INVALID_VALUE = 1,
    /// An allocation failed: device memory is exhausted.
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    /// `cuInit` has not been called (or failed).
    CUDA_ERROR_NOT_INITIALIZED = 3,
    /// The driver is shutting down.
    CUDA_ERROR_DEINITIALIZED = 4,
    /// The libcuda found is a stub (a build machine's), not a driver.
    CUDA_ERROR_STUB_LIBRARY = 34,
    /// The installed driver is older than the CUDA version needs.
    CUDA_ERROR_INSUFFICIENT_DRIVER = 35,
    /// No CUDA-capable device is visible.
    CUDA_ERROR_NO_DEVICE = 100,
    /// A device ordinal that is no device.
    CUDA_ERROR_INVALID_DEVICE = 101,
    /// A kernel image that is not valid for the device.
    CUDA_ERROR_INVALID_IMAGE = 200,
    /// No context is current, or the context given is not one.
    CUDA_ERROR_INVALID_CONTEXT = 201,
    /// A handle (stream, event) that is not, or no longer, alive.
    CUDA_ERROR_INVALID_HANDLE = 400,
    /// A named symbol (a driver entry point, a module's global) was not found.
    CUDA_ERROR_NOT_FOUND = 500,
    /// Work is still pending (an event or stream query).
    CUDA_ERROR_NOT_READY = 600,
    /// A kernel accessed an invalid address; the context is unusable.
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    /// The context was destroyed.
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    /// A kernel failed; the context is unusable.
    CUDA_ERROR_LAUNCH_FAILED = 719,
    /// The operation is not supported here.
    CUDA_ERROR_NOT_SUPPORTED = 801,
    /// An unknown internal error (what a driver without a usable device may report).
    CUDA_ERROR_UNKNOWN = 999,
}

impl DriverError {
    /// Whether the error means there is no usable CUDA driver or device here, so that tests
    /// needing one are skipped rather than failed.
    pub fn is_no_device(&self) -> bool {
        matches!(
            self.code,
            Self::CUDA_ERROR_STUB_LIBRARY
                | Self::CUDA_ERROR_INSUFFICIENT_DRIVER
                | Self::CUDA_ERROR_NO_DEVICE
                | Self::CUDA_ERROR_UNKNOWN
        )
    }

    /// Whether the driver did not know a handle it was given (`CUDA_ERROR_INVALID_HANDLE`): a
    /// stream or event that is not, or no longer, alive.
    pub fn is_invalid_handle(&self) -> bool {
        self.code == Self::CUDA_ERROR_INVALID_HANDLE
    }
}

fn driver_error_hint(code: u32) -> &'static str {
    match code {
        DriverError::CUDA_ERROR_STUB_LIBRARY => {
            ": this libcuda is a stub (a build without the CUDA driver); install the NVIDIA driver to use a GPU"
        }
        DriverError::CUDA_ERROR_INSUFFICIENT_DRIVER => {
            ": the installed NVIDIA driver is older than this CUDA version needs"
        }
        DriverError::CUDA_ERROR_NO_DEVICE => {
            ": no CUDA-capable device is visible (check CUDA_VISIBLE_DEVICES)"
        }
        _ => "",
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

#[cfg(test)]
mod driver_error_tests {
    use super::*;

    #[test]
    fn messages_name_the_call_the_code_and_what_to_do() {
        let e = |code| DriverError {
            operation: "cuInit",
            code,
        };
        assert_eq!(
            e(100).to_string(),
            "cuInit failed: CUDA_ERROR_NO_DEVICE (100): no CUDA-capable device is visible (check CUDA_VISIBLE_DEVICES)"
        );
        assert!(
            e(34)
                .to_string()
                .starts_with("cuInit failed: CUDA_ERROR_STUB_LIBRARY (34): this libcuda is a stub")
        );
        assert!(e(35).to_string().starts_with(
            "cuInit failed: CUDA_ERROR_INSUFFICIENT_DRIVER (35): the installed NVIDIA driver is older"
        ));
        assert_eq!(
            e(400).to_string(),
            "cuInit failed: CUDA_ERROR_INVALID_HANDLE (400)"
        );
        assert_eq!(e(12345).to_string(), "cuInit failed: CUDA error (12345)");
        let no_device: Vec<u32> = (0..1000).filter(|c| e(*c).is_no_device()).collect();
        assert_eq!(no_device, [34, 35, 100, 999]);
        let invalid: Vec<u32> = (0..1000).filter(|c| e(*c).is_invalid_handle()).collect();
        assert_eq!(invalid, [400]);
    }

    /// Each name is checked against cust_raw's bindings of `cuda.h`, and every code the table
    /// names is one of these (or 35, which cust_raw 0.11 predates). tests/cuda.rs asks a real
    /// driver (`cuGetErrorName`), but skips codes the table lacks and needs a GPU; this needs
    /// neither, so a lost arm shows in CI.
    #[cfg(feature = "cuda")]
    #[test]
    fn names_match_the_driver_bindings() {
        use cust::sys::cudaError_enum as R;
        let bound = [
            (R::CUDA_SUCCESS, "CUDA_SUCCESS"),
            (R::CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"),
            (R::CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"),
            (R::CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"),
            (R::CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED"),
            (R::CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY"),
            (R::CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"),
            (R::CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"),
            (R::CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE"),
            (R::CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"),
            (R::CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"),
            (R::CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"),
            (R::CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY"),
            (R::CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS"),
            (
                R::CUDA_ERROR_CONTEXT_IS_DESTROYED,
                "CUDA_ERROR_CONTEXT_IS_DESTROYED",
            ),
            (R::CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED"),
            (R::CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"),
            (R::CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN"),
        ];
        for (code, name) in bound {
            assert_eq!(driver_error_name(code as u32), name);
        }
        let named: Vec<u32> = (0..1000)
            .filter(|c| driver_error_name(*c) != "CUDA error")
            .collect();
        let mut expected: Vec<u32> = bound.iter().map(|(code, _)| *code as u32).collect();
        expected.push(35);
        expected.sort_unstable();
        assert_eq!(named, expected);
    }
}
