//! PyO3 properties: the getter the interface derives add with `#[cai(python)]`, and the
//! `#[cai_runtime::pymethods(...)]` attribute that adds it to a class's own `#[pymethods]`
//! block (so users never need PyO3's `multiple-pymethods` feature).

use proc_macro2::TokenStream;
use quote::quote;

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

/// The getter methods for one property (`Host`: `__array_interface__` and NumPy's
/// `__array_struct__`). `krate` is the path to cai-runtime; `Gt`'s getter is cai-gt's.
pub fn getter(property: Property, krate: &TokenStream) -> TokenStream {
    let pyo3 = quote!(#krate::__private::pyo3);
    let (name, body, doc) = match property {
        Property::Cuda => (
            quote!(__cuda_array_interface__),
            quote!(#krate::python::cuda_array_interface(slf.py(), &*slf.try_borrow()?, Some(slf.as_any()))),
            "The CUDA Array Interface (version 3) descriptor of this object's device memory.",
        ),
        Property::Host => (
            quote!(__array_interface__),
            quote!(#krate::python::array_interface(slf.py(), &*slf.try_borrow()?, Some(slf.as_any()))),
            "The NumPy array interface (version 3) descriptor of this object's memory.",
        ),
        Property::Gt => {
            return quote! {
                #[doc = "GDP-3's data interface: the buffers per device (None: host, \"gpu\"), with dims, halo and hooks."]
                #[getter]
                fn __gt_data_interface__<'py>(slf: &#pyo3::Bound<'py, Self>) -> #pyo3::PyResult<#pyo3::Bound<'py, #pyo3::types::PyDict>> {
                    ::cai_gt::python::gt_data_interface(slf)
                }
            };
        }
    };
    let dict_getter = quote! {
        #[doc = #doc]
        #[getter]
        fn #name<'py>(slf: &#pyo3::Bound<'py, Self>) -> #pyo3::PyResult<#pyo3::Bound<'py, #pyo3::types::PyDict>> {
            #body
        }
    };
    if property != Property::Host {
        return dict_getter;
    }
    // NumPy reads the C-struct form first (cai_runtime::python::array_struct).
    quote! {
        #dict_getter
        #[doc = "NumPy's C-struct form of `__array_interface__` (a capsule), which NumPy reads first."]
        #[getter]
        fn __array_struct__<'py>(slf: &#pyo3::Bound<'py, Self>) -> #pyo3::PyResult<#pyo3::Bound<'py, #pyo3::PyAny>> {
            #krate::python::array_struct(slf.as_any(), &*slf.try_borrow()?)
        }
    }
}

/// Wraps an impl block in PyO3's `#[pymethods]`, pointing PyO3 at the re-exported crate.
pub fn pymethods_block(block: TokenStream, krate: &TokenStream) -> TokenStream {
    let pyo3 = quote!(#krate::__private::pyo3);
    let path = pyo3.to_string().replace(' ', "");
    quote! {
        #[#pyo3::pymethods]
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
    let mut krate = quote!(::cai_runtime);
    let parser = syn::meta::parser(|meta| {
        if meta.path.is_ident("cuda") {
            protocols.push(Property::Cuda);
        } else if meta.path.is_ident("host") {
            protocols.push(Property::Host);
        } else if meta.path.is_ident("gt") {
            protocols.push(Property::Gt);
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
            let hint = ["cuda", "host", "gt"]
                .into_iter()
                .find(|k| strsim::jaro_winkler(k, &key) > 0.8)
                .map(|k| format!("; did you mean `{k}`?"))
                .unwrap_or_default();
            return Err(meta.error(format!(
                "unknown argument `{key}`{hint} expected `cuda` (adds __cuda_array_interface__), `host` (adds __array_interface__), `gt` (adds __gt_data_interface__), or `crate = \"...\"`"
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
    for p in protocols {
        let g = getter(p, &krate);
        // One property may need several methods (`host`: the dict and the C struct).
        let methods: syn::ItemImpl = syn::parse2(quote!(impl __Getters { #g }))?;
        block.items.extend(methods.items);
    }
    Ok(pymethods_block(quote!(#block), &krate))
}
