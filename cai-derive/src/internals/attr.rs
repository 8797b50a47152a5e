//! `#[cai(...)]` attributes, parsed into typed structs. Unknown keys get a suggestion, keys in
//! the wrong place say where they go, duplicates are reported; all without stopping, so every
//! mistake is reported at once.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::Token;
use syn::meta::ParseNestedMeta;

use super::ctxt::Ctxt;

/// Which keys a derive accepts, where.
pub struct Keys {
    /// The derive's name, for messages.
    pub derive: &'static str,
    /// Keys allowed on the struct.
    pub container: &'static [&'static str],
    /// Keys allowed on fields.
    pub field: &'static [&'static str],
    /// Keys other derives of the family accept but this one refuses, with the reason.
    pub refused: &'static [(&'static str, &'static str)],
}

/// One attribute value, remembering the key's tokens for spans.
pub struct Attr<T> {
    name: &'static str,
    value: Option<(TokenStream, T)>,
}

impl<T> Attr<T> {
    fn none(name: &'static str) -> Self {
        Attr { name, value: None }
    }

    fn set(&mut self, cx: &Ctxt, key: &syn::Path, v: T) {
        if self.value.is_some() {
            cx.error_spanned_by(key, format!("duplicate cai attribute `{}`", self.name));
        } else {
            self.value = Some((key.to_token_stream(), v));
        }
    }

    /// The value, if given.
    pub fn get(&self) -> Option<&T> {
        self.value.as_ref().map(|(_, v)| v)
    }

    /// The tokens of the key that set it (for error spans).
    pub fn key_tokens(&self) -> Option<&TokenStream> {
        self.value.as_ref().map(|(t, _)| t)
    }

    /// Whether it was given.
    pub fn is_set(&self) -> bool {
        self.value.is_some()
    }
}

/// Memory order requested with `order = "C" | "F"`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Order {
    C,
    F,
}

/// Attributes on the struct.
pub struct ContainerAttrs {
    pub shape: Attr<syn::Expr>,
    pub strides: Attr<syn::Expr>,
    pub offset: Attr<syn::Expr>,
    pub order: Attr<Order>,
    pub readonly: Attr<()>,
    pub version: Attr<u32>,
    pub python: Attr<()>,
    /// `no_dlpack`: `python` adds no `__dlpack__` / `__dlpack_device__`.
    pub no_dlpack: Attr<()>,
    pub krate: Attr<syn::Path>,
    /// `dims = ...` (GtDataInterface).
    pub dims: Attr<syn::Expr>,
    /// `halo = ...` (GtDataInterface).
    pub halo: Attr<syn::Expr>,
    /// `hooks`: the struct's `GtHooks` impl provides acquire/touch/release.
    pub hooks: Attr<()>,
    /// `data` was put on the struct (already reported; a missing-data error would repeat it).
    pub misplaced_data: bool,
}

/// Attributes on a field.
pub struct FieldAttrs {
    pub data: Attr<()>,
    pub element: Attr<syn::Type>,
    pub shape: Attr<()>,
    pub strides: Attr<()>,
    pub offset: Attr<()>,
    pub stream: Attr<()>,
    pub mask: Attr<()>,
    pub readonly: Attr<()>,
    /// GtDataInterface: the host buffer, the device buffer, dims, halo.
    pub host: Attr<()>,
    pub gpu: Attr<()>,
    pub dims: Attr<()>,
    pub halo: Attr<()>,
    /// A refused `data` key was given (already reported; a missing-buffer error would repeat
    /// it).
    pub refused_data: bool,
}

impl FieldAttrs {
    /// The roles (`data`, `shape`...) this field was given, with their key tokens.
    pub fn roles(&self) -> Vec<(&'static str, &TokenStream)> {
        [
            (&self.data, "data"),
            (&self.shape, "shape"),
            (&self.strides, "strides"),
            (&self.offset, "offset"),
            (&self.stream, "stream"),
            (&self.mask, "mask"),
            (&self.readonly, "readonly"),
            (&self.host, "host"),
            (&self.gpu, "gpu"),
            (&self.dims, "dims"),
            (&self.halo, "halo"),
        ]
        .into_iter()
        .filter_map(|(a, n)| a.key_tokens().map(|t| (n, t)))
        .collect()
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Container,
    Field,
}

/// Runs `f` on every `key` inside every `#[cai(...)]`, recording syntax errors.
fn for_each_key(
    cx: &Ctxt,
    attrs: &[syn::Attribute],
    mut f: impl FnMut(&str, &ParseNestedMeta) -> syn::Result<()>,
) {
    for attr in attrs.iter().filter(|a| a.path().is_ident("cai")) {
        if let syn::Meta::Path(p) = &attr.meta {
            cx.error_spanned_by(
                p,
                "expected `#[cai(...)]` with keys inside the parentheses, such as `#[cai(data)]`",
            );
            continue;
        }
        let r = attr.parse_nested_meta(|meta| {
            let Some(key) = meta.path.get_ident().map(|i| i.to_string()) else {
                cx.error_spanned_by(
                    &meta.path,
                    "expected a single word as cai attribute key, such as `data` or `shape`",
                );
                return skip_value(&meta);
            };
            f(&key, &meta)
        });
        if let Err(e) = r {
            cx.syn_error(e);
        }
    }
}

/// Consumes `= value` or `(...)` after a key that is being rejected, so parsing goes on.
fn skip_value(meta: &ParseNestedMeta) -> syn::Result<()> {
    if meta.input.peek(Token![=]) {
        meta.value()?.parse::<syn::Expr>()?;
    } else if meta.input.peek(syn::token::Paren) {
        meta.input.parse::<proc_macro2::TokenTree>()?;
    }
    Ok(())
}

/// A key given as a bare flag; reports `key = value` and `key(...)` forms.
fn flag(cx: &Ctxt, meta: &ParseNestedMeta, key: &str, hint: &str) -> syn::Result<bool> {
    if meta.input.peek(Token![=]) || meta.input.peek(syn::token::Paren) {
        cx.error_spanned_by(&meta.path, format!("`{key}` takes no value here: {hint}"));
        skip_value(meta)?;
        return Ok(false);
    }
    Ok(true)
}

/// A key that needs `= value`.
fn value<T: syn::parse::Parse>(
    cx: &Ctxt,
    meta: &ParseNestedMeta,
    key: &str,
    example: &str,
) -> syn::Result<Option<T>> {
    if !meta.input.peek(Token![=]) {
        cx.error_spanned_by(&meta.path, format!("`{key}` needs a value: `{example}`"));
        skip_value(meta)?;
        return Ok(None);
    }
    meta.value()?.parse().map(Some)
}

/// Reports a key not valid at `place` for this derive, saying where it belongs if anywhere.
fn misplaced(
    cx: &Ctxt,
    meta: &ParseNestedMeta,
    key: &str,
    place: Place,
    keys: &Keys,
) -> syn::Result<()> {
    let (here, there) = match place {
        Place::Container => (keys.container, keys.field),
        Place::Field => (keys.field, keys.container),
    };
    let msg = if let Some((_, why)) = keys.refused.iter().find(|(k, _)| *k == key) {
        format!(
            "`{key}` has no meaning for #[derive({})]: {why}",
            keys.derive
        )
    } else if there.contains(&key) {
        match place {
            Place::Container => format!(
                "`{key}` goes on a field, not on the struct: put `#[cai({key})]` on the field"
            ),
            Place::Field => format!(
                "`{key}` goes on the struct, not on a field: put `#[cai({key} = ...)]` above the struct"
            ),
        }
    } else {
        let best = here
            .iter()
            .map(|k| (strsim::jaro_winkler(k, key), *k))
            .filter(|(score, _)| *score > 0.8)
            .max_by(|a, b| a.0.total_cmp(&b.0));
        let where_ = match place {
            Place::Container => "on the struct",
            Place::Field => "on a field",
        };
        match best {
            Some((_, k)) => format!("unknown cai attribute `{key}`; did you mean `{k}`?"),
            None if here.is_empty() => format!(
                "unknown cai attribute `{key}`: #[derive({})] takes no cai attributes {where_}",
                keys.derive
            ),
            None => format!(
                "unknown cai attribute `{key}`; expected one of {} {where_}",
                here.iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    };
    cx.error_spanned_by(&meta.path, msg);
    skip_value(meta)
}

impl ContainerAttrs {
    pub fn from_ast(cx: &Ctxt, attrs: &[syn::Attribute], keys: &Keys) -> Self {
        let mut out = ContainerAttrs {
            shape: Attr::none("shape"),
            strides: Attr::none("strides"),
            offset: Attr::none("offset"),
            order: Attr::none("order"),
            readonly: Attr::none("readonly"),
            version: Attr::none("version"),
            python: Attr::none("python"),
            no_dlpack: Attr::none("no_dlpack"),
            krate: Attr::none("crate"),
            dims: Attr::none("dims"),
            halo: Attr::none("halo"),
            hooks: Attr::none("hooks"),
            misplaced_data: false,
        };
        for_each_key(cx, attrs, |key, meta| {
            if !keys.container.contains(&key) {
                out.misplaced_data |= key == "data";
                return misplaced(cx, meta, key, Place::Container, keys);
            }
            match key {
                "shape" => {
                    if let Some(e) = value(cx, meta, key, "shape = [self.rows, self.cols]")? {
                        out.shape.set(cx, &meta.path, e);
                    }
                }
                "strides" => {
                    if let Some(e) = value(cx, meta, key, "strides = [8, 64]")? {
                        out.strides.set(cx, &meta.path, e);
                    }
                }
                "offset" => {
                    if let Some(e) = value(cx, meta, key, "offset = self.first_item_byte")? {
                        out.offset.set(cx, &meta.path, e);
                    }
                }
                "order" => {
                    if let Some(s) = value::<syn::LitStr>(cx, meta, key, "order = \"F\"")? {
                        match s.value().as_str() {
                            "C" => out.order.set(cx, &meta.path, Order::C),
                            "F" => out.order.set(cx, &meta.path, Order::F),
                            other => cx.error_spanned_by(
                                &s,
                                format!("unknown order {other:?}: expected \"C\" (row-major) or \"F\" (column-major)"),
                            ),
                        }
                    }
                }
                "readonly" => {
                    if flag(
                        cx,
                        meta,
                        key,
                        "write `#[cai(readonly)]`, or mark a `bool` field with `#[cai(readonly)]`",
                    )? {
                        out.readonly.set(cx, &meta.path, ());
                    }
                }
                "version" => {
                    if let Some(v) = value::<syn::LitInt>(cx, meta, key, "version = 2")? {
                        match v.base10_parse::<u32>() {
                            Ok(n @ (2 | 3)) => out.version.set(cx, &meta.path, n),
                            _ => cx.error_spanned_by(
                                &v,
                                format!("cannot export CUDA Array Interface version {v}: the versions exported are 3 (the default) and 2 (for consumers that predate streams)"),
                            ),
                        }
                    }
                }
                "python" => {
                    if flag(cx, meta, key, "write `#[cai(python)]`")? {
                        out.python.set(cx, &meta.path, ());
                    }
                }
                "no_dlpack" => {
                    if flag(cx, meta, key, "write `#[cai(python, no_dlpack)]`")? {
                        out.no_dlpack.set(cx, &meta.path, ());
                    }
                }
                "dims" => {
                    if let Some(e) = value(cx, meta, key, "dims = \"IJK\"")? {
                        out.dims.set(cx, &meta.path, e);
                    }
                }
                "halo" => {
                    if let Some(e) = value(cx, meta, key, "halo = [(1, 1), (1, 1), (0, 0)]")? {
                        out.halo.set(cx, &meta.path, e);
                    }
                }
                "hooks" => {
                    if flag(
                        cx,
                        meta,
                        key,
                        "write `#[cai(hooks)]` and implement `GtHooks` for the struct",
                    )? {
                        out.hooks.set(cx, &meta.path, ());
                    }
                }
                "crate" => {
                    if let Some(s) =
                        value::<syn::LitStr>(cx, meta, key, "crate = \"my_crate::cai\"")?
                    {
                        match s.parse::<syn::Path>() {
                            Ok(p) => out.krate.set(cx, &meta.path, p),
                            Err(_) => cx.error_spanned_by(
                                &s,
                                format!("{:?} is not a path to the cai-runtime crate", s.value()),
                            ),
                        }
                    }
                }
                _ => unreachable!("key listed in Keys but not parsed: {key}"),
            }
            Ok(())
        });
        out
    }
}

impl FieldAttrs {
    pub fn from_ast(cx: &Ctxt, attrs: &[syn::Attribute], keys: &Keys) -> Self {
        let mut out = FieldAttrs {
            data: Attr::none("data"),
            element: Attr::none("element"),
            shape: Attr::none("shape"),
            strides: Attr::none("strides"),
            offset: Attr::none("offset"),
            stream: Attr::none("stream"),
            mask: Attr::none("mask"),
            readonly: Attr::none("readonly"),
            host: Attr::none("host"),
            gpu: Attr::none("gpu"),
            dims: Attr::none("dims"),
            halo: Attr::none("halo"),
            refused_data: false,
        };
        for_each_key(cx, attrs, |key, meta| {
            if !keys.field.contains(&key) {
                out.refused_data |= key == "data";
                return misplaced(cx, meta, key, Place::Field, keys);
            }
            if key == "element" {
                if let Some(t) = value::<syn::Type>(cx, meta, key, "element = f32")? {
                    out.element.set(cx, &meta.path, t);
                }
                return Ok(());
            }
            let slot = match key {
                "data" => &mut out.data,
                "shape" => &mut out.shape,
                "strides" => &mut out.strides,
                "offset" => &mut out.offset,
                "stream" => &mut out.stream,
                "mask" => &mut out.mask,
                "readonly" => &mut out.readonly,
                "host" => &mut out.host,
                "gpu" => &mut out.gpu,
                "dims" => &mut out.dims,
                "halo" => &mut out.halo,
                _ => unreachable!("key listed in Keys but not parsed: {key}"),
            };
            let hint = if matches!(key, "shape" | "strides" | "offset" | "dims" | "halo") {
                format!(
                    "on a field, `#[cai({key})]` uses the field's value; an expression goes on the struct: `#[cai({key} = ...)]`"
                )
            } else {
                format!("write `#[cai({key})]`")
            };
            if flag(cx, meta, key, &hint)? {
                slot.set(cx, &meta.path, ());
            }
            Ok(())
        });
        out
    }
}

/// Reads `#[repr(...)]`: whether `C` is among the representations, and the span to blame.
pub fn repr_c(attrs: &[syn::Attribute]) -> bool {
    let mut c = false;
    for attr in attrs.iter().filter(|a| a.path().is_ident("repr")) {
        let _ = attr.parse_nested_meta(|meta| {
            if meta.path.is_ident("C") {
                c = true;
            }
            if meta.input.peek(syn::token::Paren) {
                meta.input.parse::<proc_macro2::TokenTree>()?;
            }
            Ok(())
        });
    }
    c
}
