//! `#[derive(Element)]`: a `#[repr(C)]` struct becomes a structured dtype whose sizes and
//! offsets come from the compiler (`size_of`, `offset_of!`), so the descr cannot drift from the
//! real layout.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::krate;
use crate::internals::ast::Container;
use crate::internals::check::{self, ELEMENT_KEYS};
use crate::internals::ctxt::Ctxt;

pub fn derive(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let cont = Container::from_ast(&cx, input, "Element", &ELEMENT_KEYS);
    if let Some(cont) = &cont {
        check::element(&cx, cont);
    }
    let krate = krate(cont.as_ref().map(|c| &c.attrs));
    match (cx.check(), cont) {
        (Ok(()), Some(cont)) => expand(&cont, &krate),
        (result, _) => {
            let errors = result.err().map(|e| e.to_compile_error());
            let ident = &input.ident;
            let (impl_generics, ty_generics, _) = input.generics.split_for_impl();
            // `Self: Copy + 'static` keeps the fallback itself from adding errors on generic
            // or non-Copy structs.
            let mut where_clause = input
                .generics
                .where_clause
                .clone()
                .unwrap_or_else(|| syn::parse_quote!(where));
            where_clause
                .predicates
                .push(syn::parse_quote!(Self: ::core::marker::Copy + 'static));
            quote! {
                #errors
                // SAFETY: never compiled into a program: the errors above stop the build.
                unsafe impl #impl_generics #krate::Element for #ident #ty_generics #where_clause {
                    const DTYPE: #krate::DType = #krate::DType::Scalar(#krate::TypeStr::void(0));
                }
            }
        }
    }
}

/// `[[T; 3]; 2]` -> (`T`, [2, 3]).
fn split_array(mut ty: &syn::Type) -> (&syn::Type, Vec<&syn::Expr>) {
    let mut dims = Vec::new();
    loop {
        match ty {
            syn::Type::Array(a) => {
                dims.push(&a.len);
                ty = &a.elem;
            }
            syn::Type::Paren(p) => ty = &p.elem,
            syn::Type::Group(g) => ty = &g.elem,
            _ => return (ty, dims),
        }
    }
}

fn expand(cont: &Container, krate: &TokenStream) -> TokenStream {
    let ident = cont.ident;
    let fields = cont.fields.iter().map(|f| {
        let name = f.numpy_name();
        let member = &f.member;
        let (base, dims) = split_array(f.ty);
        let dtype = quote_spanned!(base.span()=> &<#base as #krate::Element>::DTYPE);
        quote! {
            #krate::FieldDType {
                name: #name,
                offset: #krate::__private::offset_of!(#ident, #member),
                dtype: #dtype,
                shape: &[#(#dims),*],
            }
        }
    });
    // A struct whose fields all have zero bytes (`[T; 0]`) passes the field-count check; the
    // compiler knows its size, so a constant refuses it where the user wrote it.
    let zero_size = format!(
        "#[derive(Element)] on `{ident}`: its fields take zero bytes, and an element of zero bytes cannot be stored in an array"
    );
    let size_check = quote_spanned! {ident.span()=>
        const _: () = ::core::assert!(#krate::__private::size_of::<#ident>() != 0, #zero_size);
    };
    quote! {
        #size_check
        #[automatically_derived]
        // SAFETY: the struct is #[repr(C)] (checked by the derive) and every size and offset
        // below comes from the compiler, so the dtype describes the real layout.
        unsafe impl #krate::Element for #ident {
            const DTYPE: #krate::DType = {
                const FIELDS: &[#krate::FieldDType] = &[#(#fields),*];
                #krate::DType::Struct(#krate::StructDType {
                    size: #krate::__private::size_of::<#ident>(),
                    fields: FIELDS,
                })
            };
        }
    }
}
