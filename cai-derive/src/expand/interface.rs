//! `#[derive(CudaArrayInterface)]` and `#[derive(ArrayInterface)]`: both expand to a chain of
//! `DescriptorBuilder` calls, so all layout logic lives (and is tested) in the runtime.

use std::collections::HashSet;

use proc_macro2::{TokenStream, TokenTree};
use quote::{ToTokens, quote, quote_spanned};
use syn::spanned::Spanned;

use super::krate;
use crate::internals::ast::{Container, Field};
use crate::internals::attr::Order;
use crate::internals::check::{self, Common, Plan, Protocol, Readonly, Source};
use crate::internals::ctxt::Ctxt;

pub fn derive(input: &syn::DeriveInput, protocol: Protocol) -> TokenStream {
    let cx = Ctxt::new();
    let cont = Container::from_ast(&cx, input, protocol.derive_name(), protocol.keys());
    let plan = cont
        .as_ref()
        .and_then(|c| check::interface(&cx, c, protocol));
    let krate = krate(cont.as_ref().map(|c| &c.attrs));
    match (cx.check(), cont.as_ref(), plan) {
        (Ok(()), Some(cont), Some(plan)) => expand(cont, &plan, protocol, &krate),
        (result, _, _) => {
            let errors = result.err().map(|e| e.to_compile_error());
            let fallback = fallback(input, protocol, &krate);
            quote!(#errors #fallback)
        }
    }
}

struct Names {
    trait_: TokenStream,
    method: TokenStream,
    descriptor: TokenStream,
    space: TokenStream,
    memory: TokenStream,
}

fn names(protocol: Protocol, krate: &TokenStream) -> Names {
    match protocol {
        Protocol::Device => Names {
            trait_: quote!(#krate::CudaArrayInterface),
            method: quote!(cuda_array_interface),
            descriptor: quote!(#krate::CudaArrayDescriptor),
            space: quote!(#krate::Device),
            memory: quote!(#krate::DeviceMemory),
        },
        Protocol::Host => Names {
            trait_: quote!(#krate::ArrayInterface),
            method: quote!(array_interface),
            descriptor: quote!(#krate::HostArrayDescriptor),
            space: quote!(#krate::Host),
            memory: quote!(#krate::HostMemory),
        },
    }
}

/// The where-clause bounds an expansion collects (only for types that mention a parameter).
pub struct Bounds {
    params: HashSet<String>,
    pub bounds: Vec<TokenStream>,
}

impl Bounds {
    pub fn new(generics: &syn::Generics) -> Self {
        Bounds {
            params: generics
                .type_params()
                .map(|p| p.ident.to_string())
                .collect(),
            bounds: Vec::new(),
        }
    }

    /// Requires `ty: tr` when `ty` is generic.
    pub fn bound(&mut self, ty: &syn::Type, tr: TokenStream) {
        if mentions(ty, &self.params) {
            self.bounds.push(quote_spanned!(ty.span()=> #ty: #tr));
        }
    }

    /// The struct's where clause plus the collected bounds.
    pub fn where_clause(self, generics: &syn::Generics) -> syn::WhereClause {
        let mut where_clause = generics
            .where_clause
            .clone()
            .unwrap_or_else(|| syn::parse_quote!(where));
        for b in self.bounds {
            where_clause.predicates.push(syn::parse_quote!(#b));
        }
        where_clause
    }
}

/// The builder calls for the shared layout options: shape, strides, offset, order, readonly,
/// and, for device memory (`device`: its field), the stream, which the memory then orders
/// after its own pending work (`DeviceMemory::order_export`).
pub fn layout_calls(
    common: &Common,
    krate: &TokenStream,
    bounds: &mut Bounds,
    device: Option<&Field>,
) -> Vec<TokenStream> {
    let mut calls: Vec<TokenStream> = Vec::new();
    let value_of = |src: &Source, tr: TokenStream, m: TokenStream, bounds: &mut Bounds| match src {
        Source::Default => None,
        Source::Field(f) => Some(field_call(f, &tr, m, bounds)),
        Source::Expr(e) => Some(quote_spanned!(e.span()=> #tr::#m(&(#e)))),
    };
    if let Some(v) = value_of(
        &common.shape,
        quote!(#krate::AsShape),
        quote!(to_shape),
        bounds,
    ) {
        calls.push(quote!(.shape(#v)));
    }
    if let Some(v) = value_of(
        &common.strides,
        quote!(#krate::AsStrides),
        quote!(to_strides),
        bounds,
    ) {
        calls.push(quote!(.strides(#v)));
    }
    if let Some(v) = value_of(
        &common.offset,
        quote!(#krate::AsOffset),
        quote!(to_offset),
        bounds,
    ) {
        calls.push(quote!(.offset(#v)));
    }
    if common.order == Order::F {
        calls.push(quote!(.order(#krate::Order::F)));
    }
    match common.readonly {
        Readonly::No => {}
        Readonly::Always => calls.push(quote!(.readonly(true))),
        Readonly::Field(f) => {
            let tr = quote!(#krate::AsReadonly);
            let v = field_call(f, &tr, quote!(is_readonly), bounds);
            calls.push(quote!(.readonly(#v)));
        }
    }
    if let Some(data) = device {
        let (ty, mem) = (data.ty, &data.member);
        let err = quote!(<#krate::DescriptorError as ::core::convert::From<_>>::from);
        // No stream field exports `stream: None`, "no synchronization needed": the memory's
        // pending work (cudarc's) is finished first.
        let (stream, live) = match common.stream {
            Some(f) => {
                let tr = quote!(#krate::AsStream);
                let v = field_call(f, &tr, quote!(prepare_export), bounds);
                let live = field_call(f, &tr, quote!(live_stream), bounds);
                (quote!(#v.map_err(#err)?), live)
            }
            None => (
                quote!(::core::option::Option::None),
                quote!(::core::option::Option::None),
            ),
        };
        calls.push(quote!(.stream({
            let stream = #stream;
            <#ty as #krate::DeviceMemory>::order_export(&self.#mem, stream, #live).map_err(#err)?;
            stream
        })));
        // A stream field that owns its stream vouches for it (DLPack hands it to the driver).
        if common.stream.is_some() {
            calls.push(quote!(.stream_vouched_by(#live)));
        }
    }
    calls
}

/// Whether a type mentions one of the struct's type parameters (then a where-clause bound is
/// needed; on concrete types a bound would only add a "trivial bounds" note to the error).
fn mentions(ty: &syn::Type, params: &HashSet<String>) -> bool {
    fn walk(ts: TokenStream, params: &HashSet<String>) -> bool {
        ts.into_iter().any(|t| match t {
            TokenTree::Ident(i) => params.contains(&i.to_string()),
            TokenTree::Group(g) => walk(g.stream(), params),
            _ => false,
        })
    }
    walk(ty.to_token_stream(), params)
}

fn expand(cont: &Container, plan: &Plan, protocol: Protocol, krate: &TokenStream) -> TokenStream {
    let Names {
        trait_,
        method,
        descriptor,
        space,
        memory,
    } = names(protocol, krate);
    let ident = cont.ident;
    let mut bounds = Bounds::new(cont.generics);

    let data_ty = plan.data.ty;
    let data = &plan.data.member;
    bounds.bound(data_ty, memory.clone());
    let ctor = match protocol {
        Protocol::Device => quote!(device),
        Protocol::Host => quote!(host),
    };
    let start = match plan.element {
        None => {
            quote_spanned!(data_ty.span()=> #krate::DescriptorBuilder::#ctor::<#data_ty>(&self.#data))
        }
        Some(elem) => {
            bounds.bound(elem, quote!(#krate::Element));
            let ctor_as = quote::format_ident!("{}_as", ctor.to_string());
            quote_spanned!(elem.span()=> #krate::DescriptorBuilder::#ctor_as::<#elem, #data_ty>(&self.#data))
        }
    };

    let (refusal_item, start) = if protocol == Protocol::Host {
        refuse_own_layout_keys(&plan.common, data_ty, krate, cont.generics, start)
    } else {
        (None, start)
    };

    let mut calls = layout_calls(
        &plan.common,
        krate,
        &mut bounds,
        (protocol == Protocol::Device).then_some(plan.data),
    );
    if let Some(v) = plan.version {
        calls.push(quote!(.version(#v)));
    }
    if let Some(f) = plan.mask {
        let tr = quote!(#krate::AsMask<#space>);
        let v = field_call(f, &tr, quote!(mask_descriptor), &mut bounds);
        calls.push(quote!(.mask(#v?)));
    }

    let (impl_generics, ty_generics, _) = cont.generics.split_for_impl();
    let where_clause = bounds.where_clause(cont.generics);
    let python = plan.common.python.map(|at| {
        let property = super::python::Property::from(protocol);
        let methods = super::python::methods(
            &[property],
            plan.common.dlpack,
            super::python::Source::Traits,
            krate,
            &quote!(#ident),
        );
        super::python::derived_pymethods(ident, methods, krate, at)
    });
    quote! {
        #refusal_item
        #[automatically_derived]
        impl #impl_generics #trait_ for #ident #ty_generics #where_clause {
            fn #method(&self) -> #krate::__private::Result<#descriptor, #krate::DescriptorError> {
                #start #(#calls)* .build()
            }
            fn __cai_builder(&self) -> ::core::option::Option<#krate::__private::Result<#krate::DescriptorBuilder<'_, #space>, #krate::DescriptorError>> {
                ::core::option::Option::Some((|| #krate::__private::Result::Ok(#start #(#calls)*))())
            }
        }
        #python
    }
}

/// Memory that carries its own layout (ndarray's arrays) takes no layout keys: where `common`
/// has one, a compile error for host memory `ty`. A struct without generics gets a constant
/// item (returned), which `cargo check` evaluates; a generic one an inline constant in `start`
/// (returned wrapped), evaluated where the type is known (a build). The builder refuses the
/// same at run time (`DescriptorError::OwnLayout`).
pub fn refuse_own_layout_keys(
    common: &Common,
    ty: &syn::Type,
    krate: &TokenStream,
    generics: &syn::Generics,
    start: TokenStream,
) -> (Option<TokenStream>, TokenStream) {
    let layout_keys = !matches!(common.shape, Source::Default)
        || !matches!(common.strides, Source::Default)
        || !matches!(common.offset, Source::Default)
        || common.order == Order::F;
    if !layout_keys {
        return (None, start);
    }
    let refused = quote_spanned! {ty.span()=>
        ::core::assert!(
            !<#ty as #krate::HostMemory>::OWN_LAYOUT,
            "this buffer field carries its own shape and strides (an ndarray array): remove `shape`, `strides`, `offset` and `order` from `#[cai(...)]`"
        )
    };
    if generics.params.is_empty() {
        (
            Some(quote_spanned!(ty.span()=> const _: () = #refused;)),
            start,
        )
    } else {
        (
            None,
            quote_spanned!(ty.span()=> { const { #refused }; #start }),
        )
    }
}

/// `<FieldTy as Trait>::method(&self.field)`, spanned at the field's type so that a missing
/// impl is reported there; adds the where-clause bound when the type is generic.
pub fn field_call(f: &Field, tr: &TokenStream, m: TokenStream, bounds: &mut Bounds) -> TokenStream {
    let (ty, mem) = (f.ty, &f.member);
    bounds.bound(ty, tr.clone());
    quote_spanned!(ty.span()=> <#ty as #tr>::#m(&self.#mem))
}

/// The impl emitted beside errors, so uses of the trait elsewhere do not fail too.
fn fallback(input: &syn::DeriveInput, protocol: Protocol, krate: &TokenStream) -> TokenStream {
    let Names {
        trait_,
        method,
        descriptor,
        ..
    } = names(protocol, krate);
    let ident = &input.ident;
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    quote! {
        #[automatically_derived]
        impl #impl_generics #trait_ for #ident #ty_generics #where_clause {
            fn #method(&self) -> #krate::__private::Result<#descriptor, #krate::DescriptorError> {
                ::core::unreachable!()
            }
        }
    }
}
