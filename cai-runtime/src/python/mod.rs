//! Python glue (feature `python`), on PyO3:
//!
//! - [`export`]: descriptors as the dicts that `__cuda_array_interface__` /
//!   `__array_interface__` properties return; the bodies of the getters the derives generate.
//! - [`array_struct`](mod@array_struct): NumPy's `__array_struct__` capsule, which NumPy reads
//!   before the `__array_interface__` dict.
//! - [`parse`](mod@parse): reading foreign descriptor dicts, collecting every problem with its exception
//!   type and spec rule ([`rules`]).
//! - [`view`]: [`ForeignArray`], the spec's `from_cuda_array_interface` / `as_cuda_array` in
//!   Rust: a validated, typed view that keeps the owner alive.
//! - [`check`](mod@check): the conformance checker.
//! - [`Memo`]: the small most-recently-used caches behind the statics that remember dicts,
//!   type strings and dtypes, with their thread-safety argument.
//! - [`gt`]: GDP-3's `__gt_data_interface__`: the exported dict with hook callables, and
//!   [`GtData`], reading any object through it or the array interfaces.
//!
//! Properties on a `#[pyclass]`, without `multiple-pymethods`:
//! - `#[cai(python)]` on a derived struct generates the class's `#[pymethods]` block with the
//!   getter — for classes that have no `#[pymethods]` block of their own;
//! - `#[cai_runtime::pymethods(cuda)]` (or `host`, or both) in place of `#[pymethods]` on the
//!   class's own block adds the getter to it.

// The buffer protocol (host descriptors whose `data` is a buffer, `buffer.rs`) entered the
// stable ABI in Python 3.11.
#[cfg(all(Py_LIMITED_API, not(Py_3_11)))]
compile_error!(
    "cai-runtime's `python` feature needs PyO3's `abi3-py311` or later (the buffer protocol entered the stable ABI in Python 3.11), or a build for one Python version"
);

pub mod array_struct;
mod buffer;
pub mod check;
pub mod export;
mod fast;
pub mod gt;
mod memo;
pub mod parse;
pub mod rules;
pub mod view;

pub use array_struct::array_struct;
pub use buffer::{Held, HeldBuffer};
pub use check::{Violation, check, check_descriptor};
pub use export::{array_interface, cuda_array_interface, to_dict, to_dict_kept};
#[doc(hidden)]
pub use fast::{both_paths, exact_int};
pub use gt::{GtData, GtHook, HookKind, gt_data_interface};
pub use memo::Memo;
pub use parse::{
    Parsed, Problem, address_argument, int_like, parse, show, stream_argument, type_error_or,
};
pub use view::{CudaArrayView, ForeignArray, HostArrayView, Plain, Typed, TypedMut, ViewError};
