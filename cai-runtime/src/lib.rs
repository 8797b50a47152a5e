//! # cai-runtime
//!
//! Make Rust types that hold GPU (or host) memory speak the CUDA Array Interface
//! (`__cuda_array_interface__`, version 3) and the NumPy array interface
//! (`__array_interface__`), so that CuPy, Numba, PyTorch, JAX and NumPy can use them zero-copy.
//!
//! ```
//! use cai_runtime::{CudaArrayInterface, RawDeviceMemory};
//!
//! #[derive(CudaArrayInterface)]
//! struct Matrix {
//!     #[cai(data)]
//!     buf: RawDeviceMemory<f32>,
//!     #[cai(shape)]
//!     dims: [usize; 2],
//! }
//!
//! // SAFETY: illustration only; the address is never dereferenced.
//! let buf = unsafe { RawDeviceMemory::from_raw_parts(0x7f00_0000_0000, 6) };
//! let m = Matrix { buf, dims: [2, 3] };
//! let d = m.cuda_array_interface().unwrap();
//! assert_eq!(d.shape, [2, 3]);
//! assert_eq!(d.typestr.to_string(), "<f4");
//! assert_eq!(d.strides, None); // C-contiguous
//! ```
//!
//! ## Exporting
//!
//! - [`CudaArrayInterface`] and [`ArrayInterface`]: the derives (attributes: `#[cai(...)]`, in
//!   the derives' documentation) and the traits they implement, giving
//!   `cuda_array_interface()` / `array_interface()`; [`DescriptorBuilder`] builds the same
//!   descriptors by hand.
//! - Memory a `#[cai(data)]` field may hold: [`DeviceMemory`] (with [`RawDeviceMemory`] for a
//!   bare address; cust's and cudarc's buffers with their features; `cuda::DeviceAllocation`),
//!   [`HostMemory`] (`Vec`, slices, arrays, `Box`, ndarray's arrays with their own
//!   [`OwnLayout`]).
//! - The other fields: [`AsShape`], [`AsStrides`], [`AsOffset`], [`AsReadonly`], [`AsMask`],
//!   and [`AsStream`] for the stream the data is ready on ([`Stream`], [`LiveStream`]).
//! - Element types: [`Element`] (derivable for `#[repr(C)]` structs: a structured dtype), the
//!   list of scalar types in [`for_each_element!`], [`DType`].
//!
//! ## The descriptor model
//!
//! [`ArrayDescriptor`] ([`CudaArrayDescriptor`], [`HostArrayDescriptor`]) is one array as the
//! protocols describe it, validated by the rules of the CUDA Array Interface v3 and NumPy:
//! [`Data`], [`TypeStr`] (the type-string grammar), [`Descr`] (structured `descr` lists),
//! [`Layout`] (shape, byte strides, contiguity, extents), [`Stream`].
//!
//! ## Importing (feature `python`)
//!
//! `python::ForeignArray` reads anything that exports `__cuda_array_interface__`,
//! `__array_interface__` or DLPack (CuPy, PyTorch, JAX, NumPy, cuda.core...) into a validated
//! view that keeps its producer alive and orders its stream: typed views (`typed`,
//! `typed_mut`), copies (`to_bytes`), and ndarray views (`as_array`, feature `ndarray`). The
//! `python` module also holds the PyO3 side of exports (`#[cai(python)]`,
//! `#[cai_runtime::pymethods]`) and the conformance checker (`python::check`).
//!
//! ## Errors
//!
//! [`DescriptorError`], [`LayoutError`], [`TypeStrError`], [`DescrNameError`],
//! [`StreamError`], [`PointerError`] ([`check_pointer`]), [`DriverError`] (the driver's named
//! result codes), [`AllocError`], [`CopyToHostError`]; in Python, each maps to one exception
//! type (the `python` module's table).
//!
//! ## Feature flags
//!
//! | feature | adds |
//! |---|---|
//! | `derive` (default) | the derives, re-exported from `cai-derive` |
//! | `cuda` | the `cuda` module: the CUDA driver loaded at run time (no CUDA toolkit to build), device allocations, copies, streams, events, pointer attributes |
//! | `cudarc` | cudarc 0.19's slices, views and streams as device memory and exported streams |
//! | `cust` | cust 0.3's buffers and streams (cust links libcuda when built) |
//! | `python` | the `python` module (PyO3 0.30): Python properties and methods, imports, DLPack both ways, the checker; includes `cuda` |
//! | `half`, `bf16` | `half::f16` (`<f2`) and `half::bf16` (`<V2`, DLPack's bfloat16) as elements |
//! | `float8` | `float8::F8E4M3` and `F8E5M2` as elements (`\|V1`, DLPack's float8 codes) |
//! | `complex` | `num_complex::Complex<f32>` / `<f64>` (`<c8`, `<c16`) |
//! | `ndarray` | ndarray 0.17's arrays as host memory with their own layout, and imports as `ArrayView`s |
//! | `testing` | hooks for the `cai` package's tests; not an API |
//!
//! GT4Py's GDP-3 storages and `__gt_data_interface__` are the `cai-gt` crate, built on this one.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(feature = "cuda")]
pub mod cuda;
mod descriptor;
mod driver_error;
mod element;
mod error;
mod interface;
mod layout;
mod memory;
#[cfg(feature = "ndarray")]
mod ndarray;
mod pointer;
#[cfg(feature = "python")]
pub mod python;
mod shown;
mod stream;
mod structured;
pub mod sync;
mod typestr;

pub use descriptor::{
    ArrayDescriptor, CudaArrayDescriptor, Data, DescriptorBuilder, Device, Host,
    HostArrayDescriptor, NoStream, Space,
};
pub use driver_error::{DriverError, driver_error_name};
pub use element::{DType, Element, Extended, FieldDType, StructDType};
pub use error::{AllocError, CopyToHostError, DescriptorError};
pub use interface::{
    ArrayInterface, AsMask, AsOffset, AsReadonly, AsShape, AsStrides, CudaArrayInterface,
};
pub use layout::{Extent, Layout, LayoutError, MAX_NDIM, Order, Runs};
pub use memory::{DeviceMemory, HostMemory, OwnLayout, RawDeviceMemory};
pub use pointer::{MemoryType, PointerAttributes, PointerError, check_pointer};
pub use stream::{AsStream, LiveStream, Stream, StreamError, StreamHandle};
pub use structured::{Descr, DescrField, DescrFormat, DescrNameError};
pub use typestr::{ByteOrder, Kind, TimeUnit, TimeUnitBase, TypeStr, TypeStrError};

/// `#[cai_runtime::pymethods(cuda | host)]`: use in place of PyO3's `#[pymethods]` on a class's
/// own block to add the `__cuda_array_interface__` / `__array_interface__` property to it
/// (`host` adds NumPy's `__array_struct__` too).
#[cfg(all(feature = "derive", feature = "python"))]
pub use cai_derive::pymethods;
/// The derives, re-exported so that users depend on this crate alone (as with serde).
#[cfg(feature = "derive")]
pub use cai_derive::{ArrayInterface, CudaArrayInterface, Element};

/// Support for the derives' generated code and `for_each_element!`; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use core::mem::{offset_of, size_of};
    pub use core::result::Result;
    // The feature-gated element types, for `for_each_element!`'s callers (element.rs).
    #[allow(unused_imports)] // (empty without the features)
    pub use crate::element::feature_types::*;
    #[cfg(feature = "python")]
    pub use pyo3;

    /// `#[cai(python)]`'s check that the struct is a `#[pyclass]`.
    #[cfg(feature = "python")]
    #[diagnostic::on_unimplemented(
        message = "`{Self}` has `#[cai(python)]` but is not a `#[pyclass]`",
        label = "`python` adds methods to a PyO3 class",
        note = "put PyO3's `#[pyclass]` on `{Self}`, or leave `python` out of `#[cai(...)]`"
    )]
    pub trait PythonNeedsPyClass {}
    #[cfg(feature = "python")]
    impl<T: pyo3::PyClass> PythonNeedsPyClass for T {}

    // What the generated protocol methods call.
    #[cfg(feature = "python")]
    pub use crate::python::dlpack::{
        ExchangeClass, dlpack_method, exchange_api, set_exchange_view, wrong_type,
    };
    #[cfg(feature = "python")]
    pub use crate::python::protocol::{Derived, methods as protocol};

    // For cai's own crates (cai-gt, cai-py): not a public API.
    #[cfg(feature = "python")]
    pub use crate::python::array_struct::{extended_dtype, extended_of, items_descr};
    #[cfg(feature = "python")]
    pub use crate::python::errors::{calling_foreign_code, driver_error};
    #[cfg(feature = "python")]
    pub use crate::python::export::{descr_dtype, to_dict_kept};
    #[cfg(feature = "python")]
    pub use crate::python::fast::exact_int;
    #[cfg(feature = "python")]
    pub use crate::python::memo::Memo;
    #[cfg(feature = "python")]
    pub use crate::python::parse::{
        Parsed, Problem, address_argument, dimension_items, dimension_letters, int, int_like,
        parse, parse_descr, show, size_pairs, type_error_or, type_name,
    };
    pub use crate::shown::Shown;
}
