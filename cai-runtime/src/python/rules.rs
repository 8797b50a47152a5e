//! The spec rules a descriptor can break, quoted, so that every problem says which rule it
//! breaks. Texts are from the CUDA Array Interface v3 (seeds/003) unless they name NumPy.

use crate::error::DescriptorError;
use crate::layout::LayoutError;

/// One rule: a short stable id and the spec's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    /// Stable identifier, e.g. `"shape"` or `"data-zero-size"`.
    pub id: &'static str,
    /// The rule as the spec states it.
    pub text: &'static str,
}

macro_rules! rules {
    ($($name:ident = $id:literal : $text:literal;)*) => {$(
        #[doc = $text]
        pub const $name: Rule = Rule { id: $id, text: $text };
    )*};
}

rules! {
    DICT = "dict": "The __cuda_array_interface__ attribute returns a dictionary (dict) that must contain the entries shape, typestr, data and version.";
    SHAPE = "shape": "shape: (integer, ...) — a tuple of int representing the size of each dimension.";
    SHAPE_SIZE = "shape-size": "The array's size in bytes must be representable (NumPy: fit in a signed pointer-sized integer).";
    TYPESTR = "typestr": "typestr: str — the type string, with the same definition as typestr in the NumPy array interface.";
    DATA = "data": "data: (integer, boolean) — a 2-tuple: the data pointer as a Python int, and the read-only flag as a Python bool.";
    DATA_ZERO = "data-zero-size": "data: for zero-size arrays, use 0 here.";
    DATA_BUFFER = "data-buffer": "data (NumPy array interface): a (pointer, read-only flag) tuple, or an object exposing the buffer interface, whose buffer is shared; absent or None, the buffer of the object exposing __array_interface__ itself. offset: an integer offset into that buffer, used only with a buffer.";
    DATA_NULL = "data-null": "data: the data must be device-accessible; a null pointer is only allowed for zero-size arrays.";
    DATA_BOUNDS = "data-bounds": "The bytes described by shape, strides and typestr must lie inside the allocation the data pointer points into.";
    VERSION = "version": "version: integer — the version of the interface being exported (the current version is 3; consumers accept 0 to 3).";
    STRIDES = "strides": "strides: None or (integer, ...) — a tuple of int giving the number of bytes to skip to reach the next element in each dimension; None means C-contiguous.";
    DESCR = "descr": "descr: describes more complicated types, following the NumPy array interface (a list of (name, format[, shape]) tuples whose sizes add up to the item size).";
    MASK = "mask": "mask: None or an object exposing the same interface, whose items are interpreted as true or not true; it must broadcast to shape (NumPy array interface).";
    STREAM = "stream": "stream: None or integer; 0 is disallowed, 1 is the legacy default stream, 2 the per-thread default stream, any other integer a cudaStream_t.";
    STREAM_V3 = "stream-version": "stream is part of version 3 of the interface: a descriptor declaring an earlier version has no stream entry.";
    STRIDES_KEY = "interop-strides-key": "Interoperability: cuDF reads the strides key directly, so producers should always send it (None when C-contiguous).";
    STRIDES_ITEMSIZE = "interop-strides-itemsize": "Interoperability: PyTorch's torch.as_tensor refuses strides that are not multiples of the item size.";
    READONLY = "interop-readonly": "Interoperability: PyTorch's torch.as_tensor refuses read-only data.";
    BIG_ENDIAN = "interop-byte-order": "Interoperability: CuPy refuses big-endian type strings.";
    MASK_INTEROP = "interop-mask": "Interoperability: Numba raises NotImplementedError for masked arrays, CuPy raises ValueError.";
    DESCR_NAMES = "interop-descr-names": "Interoperability: numpy.dtype(descr) refuses a list whose field names and titles are not all different, where an unnamed entry is named f and its index (f0, f1, ...); NumPy then cannot read the array, and NumPy's own descr of a padded struct with fields named f0, f1, ... is such a list.";
    VERSION_LEGACY = "interop-version": "Interoperability: version 3 is current; JAX accepts only versions 2 and 3, and Numba's cuda.core launches need 3.";
}

/// The innermost error of a chain of `mask` errors.
pub(crate) fn innermost(mut e: &DescriptorError) -> &DescriptorError {
    while let DescriptorError::Mask(inner) = e {
        e = inner;
    }
    e
}

/// The rule a descriptor error breaks.
pub fn for_error(e: &DescriptorError, _attribute: &str) -> Rule {
    match innermost(e) {
        DescriptorError::TypeStr(_) => TYPESTR,
        DescriptorError::Layout(LayoutError::ShapeOverflow { .. }) => SHAPE_SIZE,
        DescriptorError::Layout(
            LayoutError::StridesLength { .. } | LayoutError::ExtentOverflow { .. },
        ) => STRIDES,
        DescriptorError::Layout(_) => SHAPE,
        DescriptorError::Stream(_) => STREAM,
        DescriptorError::StreamNeedsV3 { .. } => STREAM_V3,
        DescriptorError::Version { .. } => VERSION,
        DescriptorError::NullData { .. } => DATA_NULL,
        DescriptorError::ZeroSizeData { .. } => DATA_ZERO,
        DescriptorError::DescrSize { .. } => DESCR,
        DescriptorError::MaskShape { .. } => MASK,
        DescriptorError::OutOfBounds { .. } | DescriptorError::BufferNotWhole { .. } => DATA_BOUNDS,
        // `DescriptorError` is non-exhaustive; `Mask` is unwrapped by `innermost`.
        _ => DICT,
    }
}
