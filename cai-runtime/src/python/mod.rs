//! Python glue (feature `python`), on PyO3:
//!
//! - `protocol.rs`: the one protocol surface: [`Exporter`] (what a Python object exports, side
//!   by side) and the body of every protocol method, which `#[cai_runtime::pymethods]` and
//!   `#[cai(python)]` generate for every class (derived or not).
//! - `export.rs`: descriptors as the dicts that `__cuda_array_interface__` /
//!   `__array_interface__` properties return ([`cuda_array_interface`], [`to_dict`]).
//! - `array_struct.rs`: NumPy's `__array_struct__` capsule, which NumPy reads before the
//!   `__array_interface__` dict.
//! - `parse.rs`: reading foreign descriptor dicts (`parse()`), collecting every problem with
//!   its exception type and spec rule (`rules.rs`); `fast.rs`: the fast path for plain dicts.
//! - `foreign.rs`: [`ForeignArray`], the spec's `from_cuda_array_interface` / `as_cuda_array`
//!   in Rust: a validated, typed view that keeps what it reads through alive (`buffer.rs`:
//!   [`Held`]).
//! - `claim.rs`: which imports Rust code reads, writes and views, so that no two imports of
//!   the same bytes give safe Rust aliasing views (rust-numpy's borrow checking).
//! - `check.rs`: the conformance checker ([`check()`]).
//! - `dlpack/`: DLPack, both directions: capsules for `__dlpack__` ([`DlpackRequest`]) and
//!   imports of any producer ([`ForeignArray::from_dlpack_with`]), with
//!   [`DlpackError`] naming the field and value.
//! - `errors.rs`: cai's errors as Python exceptions, one `From<E> for PyErr` per error type
//!   ([`impl_pyerr!`](crate::impl_pyerr)), and the context-naming [`export_error`].
//! - `testing.rs` (feature `testing`): hooks for the `cai` package's tests; not an API.
//! - `memo.rs`: `Memo`, the small most-recently-used caches behind the statics that remember
//!   dicts, type strings and dtypes, with their thread-safety argument.
//!
//! # Exceptions
//!
//! Every error type converts into `PyErr` (`?` in a `#[pyfunction]`). The exception is chosen as NumPy and the array libraries raise it for the same fault:
//!
//! | error | exception | why |
//! |---|---|---|
//! | [`DescriptorError`](crate::DescriptorError), [`LayoutError`](crate::LayoutError), [`StreamError`](crate::StreamError), [`DescrNameError`](crate::DescrNameError) | `ValueError` | values of the right types that break a rule (a shape too large, a stream of 0) |
//! | [`TypeStrError`](crate::TypeStrError) | `TypeError` | not a type string, as NumPy's `dtype("x")` is a `TypeError` |
//! | [`ViewError`] | `TypeError` for an element type or a dimensionality that is not the array's, `MemoryError` for a copy too big, else `ValueError` | an element type that is not the array's is a type mismatch; writing read-only data, a layout a view cannot take, memory another import views are bad values |
//! | [`DlpackError`] | `BufferError` for requests and tensors cai cannot serve, `ValueError` for malformed values, `TypeError` for arguments of the wrong type | as the Array API standard's `__dlpack__` says |
//! | [`AllocError`](crate::AllocError) | `MemoryError` | as NumPy raises when an array cannot be allocated |
//! | [`DriverError`](crate::DriverError) | `RuntimeError` | the CUDA driver failed, whatever the arguments |
//! | [`CopyToHostError`](crate::CopyToHostError) | `RuntimeError` (the driver) or `MemoryError` (the host buffer) | as its two causes |
//! | `cuda::ImportCheckError` | `ValueError` (the driver says the pointer is unusable) or `RuntimeError` (the driver could not be asked) | a bad `data` value, or a failing driver |
//!
//! The message is always the error's `Display` text. Where a message names its context
//! ("cannot export `__array_interface__`: ..."), [`export_error`] (and the import's stream errors)
//! add it, choosing the exception the same way. cai-gt maps its storage errors with the same macro,
//! [`impl_pyerr!`](crate::impl_pyerr).
//!
//! Properties on a `#[pyclass]`, without `multiple-pymethods`:
//! - `#[cai(python)]` on a derived struct generates the class's `#[pymethods]` block with the
//!   getter — for classes that have no `#[pymethods]` block of their own;
//! - `#[cai_runtime::pymethods(cuda)]` (or `host`, or both) in place of `#[pymethods]` on the
//!   class's own block adds the getter to it.
//!
//! Both also add DLPack's `__dlpack__` and `__dlpack_device__` (the device memory's where a
//! class exports both), unless told `no_dlpack`: `#[cai(python, no_dlpack)]`,
//! `#[cai_runtime::pymethods(cuda, no_dlpack)]`; `host` adds NumPy's `__array_struct__` beside
//! `__array_interface__`. A class whose sides are known only at run time implements
//! [`Exporter`] and says so: `#[cai_runtime::pymethods(cuda, host, exporter)]` adds the
//! protocols of both sides, each raising `AttributeError` where the object has no such side.
//! Any DLPack producer is imported with [`ForeignArray::from_dlpack`].

// The buffer protocol (host descriptors whose `data` is a buffer, `buffer.rs`) entered the
// stable ABI in Python 3.11.
#[cfg(all(Py_LIMITED_API, not(Py_3_11)))]
compile_error!(
    "cai-runtime's `python` feature needs PyO3's `abi3-py311` or later (the buffer protocol entered the stable ABI in Python 3.11), or a build for one Python version"
);

pub(crate) mod array_struct;
mod buffer;
mod check;
pub(crate) mod claim;
pub(crate) mod dlpack;
pub(crate) mod errors;
pub(crate) mod export;
pub(crate) mod fast;
pub(crate) mod foreign;
pub(crate) mod interp;
pub(crate) mod memo;
pub(crate) mod parse;
pub(crate) mod protocol;
mod rules;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;

pub use buffer::{Held, HeldBuffer};
/// The bounds of [`Typed::get`] and [`TypedMut::set`], re-exported so that generic code over
/// them needs no dependency on bytemuck.
pub use bytemuck::{AnyBitPattern, NoUninit};
pub use check::{Violation, check, check_descriptor};
pub use dlpack::{
    AnyForeignArray, DLPACK_VERSION, DlpackDevice, DlpackError, DlpackRequest, DlpackView,
    ExchangeViewFn, dlpack_device_of, live_exports,
};
pub use errors::export_error;
pub use export::{add_classes, array_interface, cuda_array_interface, to_dict};
pub use foreign::{ForeignArray, ForeignDeviceArray, ForeignHostArray, Typed, TypedMut, ViewError};
pub(crate) use memo::Memo;
pub use parse::stream_argument;
pub use protocol::{DlpackCache, Export, Exporter, Side};
