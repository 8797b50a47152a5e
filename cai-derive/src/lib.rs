//! Derive macros for cai; use them through `cai-runtime`, which re-exports them.
extern crate proc_macro;
use proc_macro::TokenStream;

#[proc_macro_derive(CudaArrayInterface, attributes(cai))]
pub fn derive_cuda_array_interface(input: TokenStream) -> TokenStream {
    TokenStream::new()
}
#[proc_macro_derive(ArrayInterface, attributes(cai))]
pub fn derive_array_interface(input: TokenStream) -> TokenStream {
    TokenStream::new()
}
#[proc_macro_derive(Element, attributes(cai))]
pub fn derive_element(input: TokenStream) -> TokenStream {
    TokenStream::new()
}
