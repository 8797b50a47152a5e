//! Derive macros of cai: `#[derive(CudaArrayInterface)]`, `#[derive(ArrayInterface)]`,
//! `#[derive(GtDataInterface)]` and `#[derive(Element)]`. Use them through `cai-runtime` (and
//! `cai-gt` for `GtDataInterface`), which re-export them; the attribute
//! reference is in the runtime's and the repository's documentation.
//!
//! Layout of this crate (after serde_derive and thiserror-impl): `internals/` parses and checks
//! (`ast` → `attr` → `check`, errors collected in `ctxt`), `expand/` generates code from checked
//! input only, with a fallback impl beside errors.

#![forbid(unsafe_code)]

mod expand;
mod internals;

use proc_macro::TokenStream;
use syn::{DeriveInput, parse_macro_input};

use internals::check::Protocol;

/// Implements `CudaArrayInterface` (the `__cuda_array_interface__` descriptor) for a struct
/// holding device memory.
///
#[doc = include_str!("../ATTRIBUTES.md")]
#[proc_macro_derive(CudaArrayInterface, attributes(cai))]
pub fn derive_cuda_array_interface(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::interface::derive(&input, Protocol::Device).into()
}

/// Implements `ArrayInterface` (NumPy's `__array_interface__` descriptor) for a struct holding
/// host memory, with the same `#[cai(...)]` keys except `stream` and `version`.
///
#[doc = include_str!("../ATTRIBUTES.md")]
#[proc_macro_derive(ArrayInterface, attributes(cai))]
pub fn derive_array_interface(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::interface::derive(&input, Protocol::Host).into()
}

/// Implements `GtDataInterface` (GDP-3's `__gt_data_interface__`) for a struct holding a host
/// buffer (`#[cai(host)]`), a device buffer (`#[cai(gpu)]`) or both, with the layout keys of
/// the interface derives plus `dims`, `halo` and `hooks`.
#[proc_macro_derive(GtDataInterface, attributes(cai))]
pub fn derive_gt_data_interface(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::gt_data::derive(&input).into()
}

/// In place of PyO3's `#[pymethods]` on a `#[pyclass]`'s own impl block: adds the
/// `__cuda_array_interface__` (`cuda`) and/or `__array_interface__` (`host`, with NumPy's
/// `__array_struct__`) property to it, with DLPack's `__dlpack__` and `__dlpack_device__`
/// (the device memory's where both are given; `no_dlpack` leaves them out),
/// so classes with their own methods need neither a second block nor `multiple-pymethods`.
/// The class implements the derived traits of the sides it names, or, with `exporter`,
/// `cai_runtime::python::Exporter` (sides known at run time: each side's methods raise
/// `AttributeError` where the object has none).
#[cfg(feature = "python")]
#[proc_macro_attribute]
pub fn pymethods(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::python::attribute(args.into(), item.into()).into()
}

/// Implements `Element` for a `#[repr(C)]` struct whose fields are elements (or arrays of
/// them): typestr `|V<size>` and a `descr` equal to NumPy's, padding included.
#[proc_macro_derive(Element, attributes(cai))]
pub fn derive_element(input: TokenStream) -> TokenStream {
    let input = parse_macro_input!(input as DeriveInput);
    expand::element::derive(&input).into()
}
