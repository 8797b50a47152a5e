//! Code generation, one file per derive. Each expands only checked input; on errors it emits
//! the errors plus a fallback impl (as thiserror does), so the user sees their mistake and no
//! cascade of "trait not implemented" errors elsewhere.

pub mod element;
pub mod gt_data;
pub mod interface;
pub mod python;

use proc_macro2::TokenStream;
use quote::quote;

use crate::internals::attr::ContainerAttrs;

/// Path to the runtime crate: `#[cai(crate = "...")]` or `::cai_runtime`.
pub fn krate(attrs: Option<&ContainerAttrs>) -> TokenStream {
    match attrs.and_then(|a| a.krate.get()) {
        Some(p) => quote!(#p),
        None => quote!(::cai_runtime),
    }
}

/// Path to cai-gt, for `#[derive(GtDataInterface)]`: `#[cai(crate = "...")]` or `::cai_gt`.
pub fn gt_krate(attrs: Option<&ContainerAttrs>) -> TokenStream {
    match attrs.and_then(|a| a.krate.get()) {
        Some(p) => quote!(#p),
        None => quote!(::cai_gt),
    }
}
