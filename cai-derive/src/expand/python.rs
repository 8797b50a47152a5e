//! PyO3 properties: the getter the interface derives add with `#[cai(python)]`, and the
//! `#[cai_runtime::pymethods(...)]` attribute that adds it to a class's own `#[pymethods]`
//! block (so users never need PyO3's `multiple-pymethods` feature).

use proc_macro2::{Span, TokenStream};
use quote::{quote, quote_spanned};

use crate::internals::check::Protocol;

/// A property the derives can add.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Property {
    /// `__cuda_array_interface__`
    Cuda,
    /// `__array_interface__`
    Host,
    /// `__gt_data_interface__`
    Gt,
}

impl From<Protocol> for Property {
    fn from(p: Protocol) -> Self {
        match p {
            Protocol::Device => Property::Cuda,
            Protocol::Host => Property::Host,
        }
    }
}

/// Where the generated methods find what the object exports.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The derived traits (`CudaArrayInterface`, `ArrayInterface`) the class implements, one per
    /// property asked for.
    Traits,
    /// The class implements `cai_runtime::python::Exporter` (`exporter`).
    #[cfg_attr(not(feature = "python"), allow(dead_code))]
    Exporter,
}

/// The getters each property adds (`Gt`'s is cai-gt's, below): name and doc. Each is the
/// runtime's `__private::protocol::<name>` over the object's `Exporter`: a protocol getter is
/// one line here.
const GETTERS: &[(Property, &str, &str)] = &[
    (
        Property::Cuda,
        "__cuda_array_interface__",
        "The CUDA Array Interface (version 3) descriptor of this object's device memory.",
    ),
    (
        Property::Host,
        "__array_interface__",
        "The NumPy array interface (version 3) descriptor of this object's host memory.",
    ),
    (
        Property::Host,
        "__array_struct__",
        "NumPy's C-struct form of `__array_interface__` (a capsule), which NumPy reads first.",
    ),
];

/// Every protocol method for `properties`, in one `impl` body: their getters, and DLPack's
/// `__dlpack__` and `__dlpack_device__` (where `dlpack` and a property has memory to export).
/// The same for every class, derived or not; only `source` differs.
pub fn methods(
    properties: &[Property],
    dlpack: bool,
    source: Source,
    krate: &TokenStream,
    self_ty: &TokenStream,
) -> TokenStream {
    let pyo3 = quote!(#krate::__private::pyo3);
    let has = |p| properties.contains(&p);
    let side = |p, tr| {
        if has(p) {
            quote!(::core::option::Option::Some(&*this as &dyn #krate::#tr))
        } else {
            quote!(::core::option::Option::None)
        }
    };
    let bind = match source {
        Source::Exporter => quote! {
            let this = slf.try_borrow()?;
            let e: &dyn #krate::python::Exporter = &*this;
        },
        Source::Traits => {
            let (device, host) = (
                side(Property::Cuda, quote!(CudaArrayInterface)),
                side(Property::Host, quote!(ArrayInterface)),
            );
            quote! {
                let this = slf.try_borrow()?;
                let e = &#krate::__private::Derived { device: #device, host: #host };
            }
        }
    };
    let protocol = quote!(#krate::__private::protocol);
    // (An exporter of its own may keep what a lent tensor points at: it says so.)
    let lends = match source {
        Source::Exporter => quote! {
            fn lends() -> bool {
                <#self_ty as #krate::python::Exporter>::lends()
            }
        },
        Source::Traits => TokenStream::new(),
    };
    let mut out = TokenStream::new();
    for (_, name, doc) in GETTERS.iter().filter(|(p, _, _)| has(*p)) {
        let name = syn::Ident::new(name, Span::call_site());
        out.extend(quote! {
            #[doc = #doc]
            #[getter]
            fn #name<'py>(slf: &#pyo3::Bound<'py, Self>) -> #pyo3::PyResult<#pyo3::Bound<'py, #pyo3::PyAny>> {
                #bind
                #protocol::#name(slf.as_any(), e).map(#pyo3::Bound::into_any)
            }
        });
    }
    if dlpack && (has(Property::Cuda) || has(Property::Host)) {
        // How the table and the fast `__dlpack__` reach an instance's exporter (in each
        // class attribute's body: an `impl` block holds no other item).
        let class = quote! {
            struct Class;
            impl #krate::__private::ExchangeClass for Class {
                #lends
                fn with_exporter<R, F: ::core::ops::FnOnce(&dyn #krate::python::Exporter) -> #pyo3::PyResult<R>>(
                    obj: &#pyo3::Bound<'_, #pyo3::PyAny>,
                    f: F,
                ) -> #pyo3::PyResult<R> {
                    let slf = obj.cast::<#self_ty>()
                        .map_err(|_| #krate::__private::wrong_type::<#self_ty>(obj))?;
                    #bind
                    f(e)
                }
            }
        };
        out.extend(quote! {
            // `__dlpack__(*, stream, max_version, dl_device, copy)`: a method descriptor of
            // cai's own in CPython's fast calling convention (its docstring says what it does).
            #[classattr]
            fn __dlpack__(py: #pyo3::Python<'_>) -> #pyo3::PyResult<#pyo3::Py<#pyo3::PyAny>> {
                #class
                let ty = <Self as #pyo3::PyTypeInfo>::type_object(py);
                #krate::__private::dlpack_method::<Class>(&ty).map(#pyo3::Bound::unbind)
            }
            #[doc = "DLPack's `(device_type, device_id)` of the memory `__dlpack__` exports: `(1, 0)` for host memory, `(2, n)` for device `n`'s, `(13, n)` managed, `(3, 0)` registered host memory."]
            fn __dlpack_device__(slf: &#pyo3::Bound<'_, Self>) -> #pyo3::PyResult<(i32, i32)> {
                #bind
                #protocol::__dlpack_device__(e)
            }
            #[doc = "DLPack's C exchange table (`DLPackExchangeAPI`, DLPack 1.3): a capsule named `dlpack_exchange_api`, for consumers that skip `__dlpack__`."]
            #[classattr]
            fn __dlpack_c_exchange_api__(py: #pyo3::Python<'_>) -> #pyo3::PyResult<#pyo3::Py<#pyo3::PyAny>> {
                #class
                #krate::__private::exchange_api::<Class>(py).map(#pyo3::Bound::unbind)
            }
        });
    }
    if has(Property::Gt) {
        out.extend(quote! {
            #[doc = "GDP-3's data interface: the buffers per device (None: host, \"gpu\"), with dims, halo and hooks."]
            #[getter]
            fn __gt_data_interface__<'py>(slf: &#pyo3::Bound<'py, Self>) -> #pyo3::PyResult<#pyo3::Bound<'py, #pyo3::types::PyDict>> {
                ::cai_gt::python::gt_data_interface(slf)
            }
        });
    }
    out
}

/// What `#[cai(python)]` adds: `items` in a `#[pymethods]` block of `ident` (spanned at the
/// `python` key, `at`), after a check that `ident` is a `#[pyclass]`, so that forgetting it is
/// cai's error at `python` (PyO3's own about the methods follow).
pub fn derived_pymethods(
    ident: &syn::Ident,
    items: TokenStream,
    krate: &TokenStream,
    at: Span,
) -> TokenStream {
    let check = quote_spanned!(at=> python_needs_pyclass::<#ident>);
    let block = pymethods_block(quote!(impl #ident { #items }), krate, Some(at));
    quote! {
        const _: () = {
            fn python_needs_pyclass<T: #krate::__private::PythonNeedsPyClass>() {}
            let _ = #check;
        };
        #block
    }
}

/// Wraps an impl block in PyO3's `#[pymethods]`, pointing PyO3 at the re-exported crate.
///
/// `at` is the span of the derive's `python` key: PyO3 spans the `PyMethods` impl it writes at
/// its attribute, so when the class also has a `#[pymethods]` block of its own, PyO3's E0119
/// ("conflicting implementations") says "first implementation here" under `python` rather than
/// under the derive's name (`None`: the attribute macro, spanned at the user's block).
pub fn pymethods_block(block: TokenStream, krate: &TokenStream, at: Option<Span>) -> TokenStream {
    let pyo3 = quote!(#krate::__private::pyo3);
    let path = pyo3.to_string().replace(' ', "");
    let attribute = quote_spanned!(at.unwrap_or_else(Span::call_site)=> #[#pyo3::pymethods]);
    quote! {
        #attribute
        #[pyo3(crate = #path)]
        #block
    }
}

/// `#[cai_runtime::pymethods(cuda, host, crate = "...")]` on an impl block.
#[cfg(feature = "python")]
pub fn attribute(args: TokenStream, item: TokenStream) -> TokenStream {
    match attribute_inner(args, item.clone()) {
        Ok(ts) => ts,
        Err(e) => {
            let err = e.to_compile_error();
            quote!(#err #item)
        }
    }
}

#[cfg(feature = "python")]
fn attribute_inner(args: TokenStream, item: TokenStream) -> syn::Result<TokenStream> {
    let mut protocols = Vec::new();
    let mut dlpack = true;
    let mut source = Source::Traits;
    let mut krate = quote!(::cai_runtime);
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("cuda") {
            protocols.push(Property::Cuda);
        } else if meta.path.is_ident("host") {
            protocols.push(Property::Host);
        } else if meta.path.is_ident("gt") {
            protocols.push(Property::Gt);
        } else if meta.path.is_ident("no_dlpack") {
            dlpack = false;
        } else if meta.path.is_ident("exporter") {
            source = Source::Exporter;
        } else if meta.path.is_ident("crate") {
            let s: syn::LitStr = meta.value()?.parse()?;
            let p: syn::Path = s.parse()?;
            krate = quote!(#p);
        } else {
            let key = meta
                .path
                .get_ident()
                .map(ToString::to_string)
                .unwrap_or_default();
            let hint = ["cuda", "host", "gt", "no_dlpack", "exporter"]
                .into_iter()
                .find(|k| strsim::jaro_winkler(k, &key) > 0.8)
                .map(|k| format!("; did you mean `{k}`?"))
                .unwrap_or_default();
            return Err(meta.error(format!(
                "unknown argument `{key}`{hint} expected `cuda` (adds __cuda_array_interface__), `host` (adds __array_interface__), `gt` (adds __gt_data_interface__), `no_dlpack` (no __dlpack__ beside `cuda` or `host`), `exporter` (the class implements `cai_runtime::python::Exporter`), or `crate = \"...\"`"
            )));
        }
        Ok(())
    });
    syn::parse::Parser::parse2(parser, args.clone())?;
    if protocols.is_empty() {
        return Err(syn::Error::new(
            proc_macro2::Span::call_site(),
            "say which property to add: `#[cai_runtime::pymethods(cuda)]` for __cuda_array_interface__, `(host)` for __array_interface__, `(gt)` for __gt_data_interface__, or several: `(cuda, host)`",
        ));
    }
    let mut block: syn::ItemImpl = syn::parse2(item).map_err(|e| {
        syn::Error::new(
            e.span(),
            "#[cai_runtime::pymethods] goes on an `impl` block of a #[pyclass], in place of #[pymethods]",
        )
    })?;
    if let Some((path, _)) = &block.trait_ {
        return Err(syn::Error::new_spanned(
            path,
            "#[cai_runtime::pymethods] goes on an inherent `impl` block (as #[pymethods] does), not a trait impl",
        ));
    }
    let self_ty = &block.self_ty;
    let m = methods(&protocols, dlpack, source, &krate, &quote!(#self_ty));
    let methods: syn::ItemImpl = syn::parse2(quote!(impl __Protocols { #m }))?;
    block.items.extend(methods.items);
    Ok(pymethods_block(quote!(#block), &krate, None))
}
