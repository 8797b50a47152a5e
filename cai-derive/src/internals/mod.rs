//! Parsing and checking, separate from code generation (as in serde_derive's `internals`):
//! `ast` is the struct as the derive sees it, `attr` the typed `#[cai(...)]` attributes,
//! `check` the cross-checks, `ctxt` the error collector that lets every mistake be reported
//! at once.

pub mod ast;
pub mod attr;
pub mod check;
pub mod ctxt;
