//! `#[derive(GtDataInterface)]`: one descriptor builder chain per buffer (`#[cai(host)]`,
//! `#[cai(gpu)]`) with the shared layout options, plus `dims`, `halo` and the hooks; checking
//! that host and device agree, and that dims and halo fit, is cai-gt's
//! `GtDataDescriptor::new`. The generated code names cai-gt (`#[cai(crate = "...")]`, default
//! `::cai_gt`), and cai-runtime through cai-gt's re-export.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::spanned::Spanned;

use super::gt_krate;
use super::interface::{Bounds, field_call, layout_calls, refuse_own_layout_keys};
use crate::internals::ast::Container;
use crate::internals::check::{self, GT_KEYS, GtPlan, Source};
use crate::internals::ctxt::Ctxt;

pub fn derive(input: &syn::DeriveInput) -> TokenStream {
    let cx = Ctxt::new();
    let cont = Container::from_ast(&cx, input, GT_KEYS.derive, &GT_KEYS);
    let plan = cont.as_ref().and_then(|c| check::gt(&cx, c));
    let krate = gt_krate(cont.as_ref().map(|c| &c.attrs));
    match (cx.check(), cont.as_ref(), plan) {
        (Ok(()), Some(cont), Some(plan)) => expand(cont, &plan, &krate),
        (result, _, _) => {
            let errors = result.err().map(|e| e.to_compile_error());
            let fallback = fallback(input, &krate);
            quote!(#errors #fallback)
        }
    }
}

fn expand(cont: &Container, plan: &GtPlan, krate: &TokenStream) -> TokenStream {
    let ident = cont.ident;
    let rt = quote!(#krate::__private::cai_runtime);
    let mut bounds = Bounds::new(cont.generics);
    let mut refusals = Vec::new();
    let mut side = |field: Option<&crate::internals::ast::Field>, device: bool| match field {
        None => quote!(::core::option::Option::None),
        Some(f) => {
            let (ty, member) = (f.ty, &f.member);
            let (ctor, memory) = if device {
                (quote!(device), quote!(#rt::DeviceMemory))
            } else {
                (quote!(host), quote!(#rt::HostMemory))
            };
            bounds.bound(ty, memory);
            let calls = layout_calls(&plan.common, &rt, &mut bounds, device.then_some(f));
            let start =
                quote_spanned!(ty.span()=> #rt::DescriptorBuilder::#ctor::<#ty>(&self.#member));
            let (item, start) = if device {
                (None, start)
            } else {
                refuse_own_layout_keys(&plan.common, ty, &rt, cont.generics, start)
            };
            refusals.extend(item);
            quote_spanned! {ty.span()=>
                ::core::option::Option::Some(#start #(#calls)* .build()?)
            }
        }
    };
    let host = side(plan.host, false);
    let gpu = side(plan.gpu, true);
    let mut value = |src: &Source, tr: TokenStream, m: TokenStream| match src {
        Source::Default => quote!(::core::option::Option::None),
        Source::Field(f) => {
            let v = field_call(f, &tr, m, &mut bounds);
            quote!(::core::option::Option::Some(#v))
        }
        Source::Expr(e) => quote_spanned!(e.span()=> ::core::option::Option::Some(#tr::#m(&(#e)))),
    };
    let dims = value(&plan.dims, quote!(#krate::AsDims), quote!(to_dims));
    let halo = value(&plan.halo, quote!(#krate::AsHalo), quote!(to_halo));
    let hooks = cont
        .attrs
        .hooks
        .key_tokens()
        .filter(|_| plan.hooks)
        .map(|key| {
            // Spanned at `hooks`: a missing `GtHooks` impl is reported there.
            let this = quote_spanned!(key.span()=> self as &dyn #krate::GtHooks);
            quote! {
                fn gt_hooks(&self) -> ::core::option::Option<&dyn #krate::GtHooks> {
                    ::core::option::Option::Some(#this)
                }
            }
        });
    let (impl_generics, ty_generics, _) = cont.generics.split_for_impl();
    let where_clause = bounds.where_clause(cont.generics);
    let python = plan.common.python.map(|at| {
        let getter = super::python::methods(
            &[super::python::Property::Gt],
            false,
            super::python::Source::Traits,
            &rt,
            &quote!(#ident),
        );
        super::python::derived_pymethods(ident, getter, &rt, at)
    });
    quote! {
        #(#refusals)*
        #[automatically_derived]
        impl #impl_generics #krate::GtDataInterface for #ident #ty_generics #where_clause {
            fn gt_data_interface(&self) -> ::core::result::Result<#krate::GtDataDescriptor, #krate::GtError> {
                #krate::GtDataDescriptor::new(#host, #gpu, #dims, #halo)
            }
            #hooks
        }
        #python
    }
}

/// The impl emitted beside errors, so uses of the trait elsewhere do not fail too.
fn fallback(input: &syn::DeriveInput, krate: &TokenStream) -> TokenStream {
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics #krate::GtDataInterface for #ident #ty_generics #where_clause {
            fn gt_data_interface(&self) -> ::core::result::Result<#krate::GtDataDescriptor, #krate::GtError> {
                ::core::unreachable!()
            }
        }
    }
}
