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
//! Where things live (modules are private; their items are re-exported here, one path each):
//! - `typestr.rs`: the type-string grammar ([`TypeStr`]); `structured.rs`: `descr` lists
//!   ([`Descr`]); `element.rs`: the [`Element`] trait and [`for_each_element!`], the one
//!   list of scalar element types.
//! - `layout.rs`: shapes, byte strides, contiguity, extents ([`Layout`]; NumPy's rules).
//! - `descriptor.rs`: the descriptor model, validation and the export builder
//!   ([`ArrayDescriptor`], [`DescriptorBuilder`]).
//! - `stream.rs`: the `stream` entry ([`Stream`]); `memory.rs`: what may back device and host
//!   arrays ([`DeviceMemory`], [`HostMemory`]).
//! - `interface.rs`: the traits the derives implement and the traits annotated fields need.
//! - `ndarray.rs` (feature `ndarray`): ndarray's arrays as host memory with their own layout,
//!   and imports as `ArrayView`s (`python::ForeignArray::as_array`).
//! - `pointer.rs`: pointer attributes and the import checks on them ([`check_pointer`]).
//! - `error.rs`: the descriptor's and memory errors ([`DescriptorError`], [`AllocError`]...);
//!   `driver_error.rs`: [`DriverError`], the named CUDA result codes.
//! - [`sync`]: stream synchronization policy (producer and consumer), pure decisions.
//! - `cuda/` (module `cuda`, feature `cuda`): the CUDA driver, loaded at run time (feature
//!   `cust`: cust's buffers and streams), the event wait, pointer attributes, device
//!   allocations and copies. `python/` (module `python`, feature `python`): the PyO3 glue.
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
    pub use crate::python::dlpack::{ExchangeClass, exchange_api, set_exchange_view, wrong_type};
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
