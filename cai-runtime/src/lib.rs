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
//! Where things live:
//! - [`typestr`]: the type-string grammar; [`descr`]: `descr` lists; [`element`]: the
//!   [`Element`] trait mapping Rust types to type strings, and [`for_each_element!`], the one
//!   list of scalar element types.
//! - [`layout`]: shapes, byte strides, contiguity, extents (pure arithmetic, NumPy's rules).
//! - [`descriptor`]: the descriptor model, validation and the export builder.
//! - [`stream`]: the `stream` entry; [`memory`]: what may back device and host arrays.
//! - [`interface`]: the traits the derives implement and the traits annotated fields need.
//! - [`sync`]: stream synchronization policy (producer and consumer), pure decisions;
//!   [`pointer`](mod@pointer): pointer attributes and the import checks on them.
//! - [`storage`]: GT4Py GDP-3 storages: parameters and presets, the aligned allocation plan,
//!   the host/device mirror's state.
//! - `cuda` (feature `cuda`): the CUDA driver through cust: cust buffers and streams, the
//!   event wait, pointer attributes. `python` (feature `python`): the PyO3 glue.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

#[cfg(feature = "cuda")]
pub mod cuda;
pub mod descr;
pub mod descriptor;
pub mod element;
pub mod error;
pub mod interface;
pub mod layout;
pub mod memory;
pub mod pointer;
#[cfg(feature = "python")]
pub mod python;
pub mod storage;
pub mod stream;
pub mod sync;
pub mod typestr;

pub use descr::{Descr, DescrField, DescrFormat, DescrNameError};
pub use descriptor::{
    ArrayDescriptor, CudaArrayDescriptor, Data, DescriptorBuilder, Device, Host,
    HostArrayDescriptor, NoStream, Space,
};
pub use element::{DType, Element, FieldDType, StructDType};
pub use error::{AllocError, CopyToHostError, DescriptorError, DriverError};
pub use interface::{
    ArrayInterface, AsMask, AsOffset, AsReadonly, AsShape, AsStrides, CudaArrayInterface,
};
pub use layout::{Extent, Layout, LayoutError, Order};
pub use memory::{DeviceMemory, HostMemory, RawDeviceMemory};
pub use storage::gt::{AsDims, AsHalo, GtDataInterface, GtHooks};
pub use stream::{AsStream, Stream, StreamError, StreamHandle};
pub use typestr::{ByteOrder, Kind, TypeStr, TypeStrError};

/// `#[cai_runtime::pymethods(cuda | host)]`: use in place of PyO3's `#[pymethods]` on a class's
/// own block to add the `__cuda_array_interface__` / `__array_interface__` property to it
/// (`host` adds NumPy's `__array_struct__` too).
#[cfg(all(feature = "derive", feature = "python"))]
pub use cai_derive::pymethods;
/// The derives, re-exported so that users depend on this crate alone (as with serde).
#[cfg(feature = "derive")]
pub use cai_derive::{ArrayInterface, CudaArrayInterface, Element, GtDataInterface};

/// Support for the derives' generated code and `for_each_element!`; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use core::mem::{offset_of, size_of};
    pub use core::result::Result;
    // The feature-gated element types, for `for_each_element!`'s callers that depend on neither
    // crate. Aliases, not re-exports of the crates: rustc would then name the types by this
    // path in users' error messages (`cai_runtime::__private::half::f16`).
    #[cfg(feature = "bf16")]
    pub type Bf16 = half::bf16;
    #[cfg(feature = "complex")]
    pub type Complex32 = num_complex::Complex<f32>;
    #[cfg(feature = "complex")]
    pub type Complex64 = num_complex::Complex<f64>;
    #[cfg(feature = "half")]
    pub type F16 = half::f16;
    #[cfg(feature = "python")]
    pub use pyo3;
}
