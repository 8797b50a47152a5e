//! Cross-checks between attributes, in one place; each produces a spanned error, and all of
//! them run even after the first failure.

use proc_macro2::Span;
use quote::ToTokens;
use syn::spanned::Spanned;

use super::ast::{Container, Field};
use super::attr::{self, Order};
use super::ctxt::Ctxt;

/// Which interface is derived.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `__cuda_array_interface__`
    Device,
    /// `__array_interface__`
    Host,
}

impl Protocol {
    pub fn derive_name(self) -> &'static str {
        match self {
            Protocol::Device => "CudaArrayInterface",
            Protocol::Host => "ArrayInterface",
        }
    }

    pub fn keys(self) -> &'static attr::Keys {
        match self {
            Protocol::Device => &DEVICE_KEYS,
            Protocol::Host => &HOST_KEYS,
        }
    }
}

static DEVICE_KEYS: attr::Keys = attr::Keys {
    derive: "CudaArrayInterface",
    container: &[
        "shape",
        "strides",
        "offset",
        "order",
        "readonly",
        "version",
        "python",
        "no_dlpack",
        "crate",
    ],
    field: &[
        "data", "element", "shape", "strides", "offset", "stream", "mask", "readonly",
    ],
    refused: &[],
};

static HOST_KEYS: attr::Keys = attr::Keys {
    derive: "ArrayInterface",
    container: &[
        "shape",
        "strides",
        "offset",
        "order",
        "readonly",
        "python",
        "no_dlpack",
        "crate",
    ],
    field: &[
        "data", "element", "shape", "strides", "offset", "mask", "readonly",
    ],
    refused: &[
        (
            "stream",
            "the NumPy array interface describes host memory and has no `stream`",
        ),
        (
            "version",
            "the NumPy `__array_interface__` is always version 3",
        ),
    ],
};

/// Keys of `#[derive(GtDataInterface)]`.
pub static GT_KEYS: attr::Keys = attr::Keys {
    derive: "GtDataInterface",
    container: &[
        "shape", "strides", "offset", "order", "readonly", "dims", "halo", "hooks", "python",
        "crate",
    ],
    field: &[
        "host", "gpu", "shape", "strides", "offset", "stream", "readonly", "dims", "halo",
    ],
    refused: &[
        (
            "data",
            "a __gt_data_interface__ has one buffer per device: mark the host buffer `#[cai(host)]` and the device buffer `#[cai(gpu)]`",
        ),
        ("mask", "GDP-3's __gt_data_interface__ entries have no mask"),
        (
            "version",
            "__gt_data_interface__ entries are always version 3",
        ),
        (
            "element",
            "the buffers' element types are exported as they are",
        ),
    ],
};

/// Keys of `#[derive(Element)]`.
pub static ELEMENT_KEYS: attr::Keys = attr::Keys {
    derive: "Element",
    container: &["crate"],
    field: &[],
    refused: &[],
};

/// Where a shape or strides value comes from.
pub enum Source<'a> {
    Default,
    Field(&'a Field<'a>),
    Expr(&'a syn::Expr),
}

/// Where the read-only flag comes from.
pub enum Readonly<'a> {
    No,
    Always,
    Field(&'a Field<'a>),
}

/// The layout and export options both kinds of derive share, checked.
pub struct Common<'a> {
    pub shape: Source<'a>,
    pub strides: Source<'a>,
    pub offset: Source<'a>,
    pub order: Order,
    pub readonly: Readonly<'a>,
    pub stream: Option<&'a Field<'a>>,
    /// `python`, with the key's span: the `#[pymethods]` block it adds is spanned there, so
    /// PyO3's E0119 (a class with a `#[pymethods]` block of its own) points at `python`.
    pub python: Option<Span>,
    /// `python` without `__dlpack__` / `__dlpack_device__` (`no_dlpack`).
    pub dlpack: bool,
}

/// Everything the interface expansion needs, checked.
pub struct Plan<'a> {
    pub data: &'a Field<'a>,
    pub element: Option<&'a syn::Type>,
    pub common: Common<'a>,
    pub version: Option<u32>,
    pub mask: Option<&'a Field<'a>>,
}

/// Everything the `GtDataInterface` expansion needs, checked.
pub struct GtPlan<'a> {
    pub host: Option<&'a Field<'a>>,
    pub gpu: Option<&'a Field<'a>>,
    pub common: Common<'a>,
    pub dims: Source<'a>,
    pub halo: Source<'a>,
    pub hooks: bool,
}

/// The one field with a role, reporting every extra one.
fn unique<'a>(
    cx: &Ctxt,
    cont: &'a Container<'a>,
    role: &str,
    has: impl Fn(&Field) -> bool,
) -> Option<&'a Field<'a>> {
    let mut found: Option<&Field> = None;
    for f in cont.fields.iter().filter(|f| has(f)) {
        match found {
            None => found = Some(f),
            Some(first) => cx.error_spanned_by(
                f.original
                    .ident
                    .as_ref()
                    .map_or_else(|| f.ty.to_token_stream(), |i| i.to_token_stream()),
                format!(
                    "only one field can be `#[cai({role})]`, and `{}` already is",
                    first.numpy_name()
                ),
            ),
        }
    }
    found
}

/// Shape or strides from a field or a struct-level expression, never both.
fn source<'a>(
    cx: &Ctxt,
    key: &str,
    field: Option<&'a Field<'a>>,
    expr: &'a attr::Attr<syn::Expr>,
) -> Source<'a> {
    match (field, expr.get()) {
        (Some(f), Some(e)) => {
            cx.error_spanned_by(
                expr.key_tokens().cloned().unwrap_or_default(),
                format!(
                    "`{key}` is given twice: by `#[cai({key} = ...)]` here and by the field `{}`; keep one",
                    f.numpy_name()
                ),
            );
            let _ = e;
            Source::Field(f)
        }
        (Some(f), None) => Source::Field(f),
        (None, Some(e)) => Source::Expr(e),
        (None, None) => Source::Default,
    }
}

/// Checks a struct for `#[derive(CudaArrayInterface)]` or `#[derive(ArrayInterface)]`.
pub fn interface<'a>(cx: &Ctxt, cont: &'a Container<'a>, protocol: Protocol) -> Option<Plan<'a>> {
    let what = match protocol {
        Protocol::Device => "device memory, e.g. `#[cai(data)] buf: RawDeviceMemory<f32>`",
        Protocol::Host => "host memory, e.g. `#[cai(data)] buf: Vec<f32>`",
    };
    let data = unique(cx, cont, "data", |f| f.attrs.data.is_set());
    if data.is_none() && !cont.attrs.misplaced_data {
        cx.error_spanned_by(
            cont.ident,
            format!(
                "#[derive({})] needs a `#[cai(data)]` field: mark the field that holds the {what}",
                protocol.derive_name()
            ),
        );
    }
    for f in &cont.fields {
        if let Some(tokens) = f.attrs.element.key_tokens()
            && !f.attrs.data.is_set()
        {
            cx.error_spanned_by(
                tokens,
                "`element` overrides the element type of the data: use it with `data`, as in `#[cai(data, element = f32)]`",
            );
        }
    }
    let common = common(cx, cont);
    let mask = unique(cx, cont, "mask", |f| f.attrs.mask.is_set());
    let version = cont.attrs.version.get().copied();
    if let (Some(2), Some(s)) = (version, common.stream) {
        cx.error_spanned_by(
            s.attrs.stream.key_tokens().cloned().unwrap_or_default(),
            "a stream cannot be exported with `version = 2`: CUDA Array Interface version 2 has no `stream` key, so consumers would not synchronize; export version 3 (the default)",
        );
    }
    Some(Plan {
        data: data?,
        element: data.and_then(|d| d.attrs.element.get()),
        common,
        version,
        mask,
    })
}

/// Checks a struct for `#[derive(GtDataInterface)]`.
pub fn gt<'a>(cx: &Ctxt, cont: &'a Container<'a>) -> Option<GtPlan<'a>> {
    let host = unique(cx, cont, "host", |f| f.attrs.host.is_set());
    let gpu = unique(cx, cont, "gpu", |f| f.attrs.gpu.is_set());
    let reported = cont.attrs.misplaced_data || cont.fields.iter().any(|f| f.attrs.refused_data);
    if host.is_none() && gpu.is_none() && !reported {
        cx.error_spanned_by(
            cont.ident,
            "#[derive(GtDataInterface)] needs a buffer: mark the field holding host memory `#[cai(host)]` (e.g. `Vec<f64>`) and/or the one holding device memory `#[cai(gpu)]`",
        );
    }
    let common = common(cx, cont);
    if let (Some(s), None) = (common.stream, gpu) {
        cx.error_spanned_by(
            s.attrs.stream.key_tokens().cloned().unwrap_or_default(),
            "`stream` belongs to a device buffer, and this struct has no `#[cai(gpu)]` field",
        );
    }
    let dims_field = unique(cx, cont, "dims", |f| f.attrs.dims.is_set());
    let halo_field = unique(cx, cont, "halo", |f| f.attrs.halo.is_set());
    Some(GtPlan {
        host,
        gpu,
        dims: source(cx, "dims", dims_field, &cont.attrs.dims),
        halo: source(cx, "halo", halo_field, &cont.attrs.halo),
        hooks: cont.attrs.hooks.is_set(),
        common,
    })
}

/// Roles, shape, strides, offset, order, readonly, stream and python: checks shared by all
/// derives that export descriptors.
fn common<'a>(cx: &Ctxt, cont: &'a Container<'a>) -> Common<'a> {
    for f in &cont.fields {
        let roles = f.attrs.roles();
        if roles.len() > 1 {
            cx.error_spanned_by(
                roles[1].1,
                format!(
                    "field `{}` is already `#[cai({})]`: a field has one role",
                    f.numpy_name(),
                    roles[0].0
                ),
            );
        }
    }
    let shape_field = unique(cx, cont, "shape", |f| f.attrs.shape.is_set());
    let strides_field = unique(cx, cont, "strides", |f| f.attrs.strides.is_set());
    let offset_field = unique(cx, cont, "offset", |f| f.attrs.offset.is_set());
    let stream = unique(cx, cont, "stream", |f| f.attrs.stream.is_set());
    let ro_field = unique(cx, cont, "readonly", |f| f.attrs.readonly.is_set());

    let shape = source(cx, "shape", shape_field, &cont.attrs.shape);
    let strides = source(cx, "strides", strides_field, &cont.attrs.strides);
    let offset = source(cx, "offset", offset_field, &cont.attrs.offset);
    let order = cont.attrs.order.get().copied().unwrap_or(Order::C);
    if let (Some(tokens), false) = (
        cont.attrs.order.key_tokens(),
        matches!(strides, Source::Default),
    ) {
        cx.error_spanned_by(
            tokens,
            "`order` has no effect when `strides` are given: the strides already fix the layout; remove one of them",
        );
    }
    let readonly = match (cont.attrs.readonly.key_tokens(), ro_field) {
        (Some(tokens), Some(f)) => {
            cx.error_spanned_by(
                tokens,
                format!(
                    "`readonly` is given twice: on the struct, and by the field `{}`; keep one",
                    f.numpy_name()
                ),
            );
            Readonly::Always
        }
        (Some(_), None) => Readonly::Always,
        (None, Some(f)) => Readonly::Field(f),
        (None, None) => Readonly::No,
    };
    let python = cont.attrs.python.key_tokens().map(Spanned::span);
    if let Some(tokens) = cont.attrs.python.key_tokens() {
        if !cfg!(feature = "python") {
            cx.error_spanned_by(
                tokens,
                "`python` generates a PyO3 property and needs the `python` feature of cai-runtime: add `features = [\"python\"]` to the `cai-runtime` dependency in Cargo.toml",
            );
        }
        if !cont.generics.params.is_empty() {
            cx.error_spanned_by(
                cont.generics,
                "`python` generates a PyO3 property, but PyO3 classes cannot be generic; remove `#[cai(python)]` or the type parameters",
            );
        }
    }
    if let Some(tokens) = cont.attrs.no_dlpack.key_tokens()
        && python.is_none()
    {
        cx.error_spanned_by(
            tokens,
            "`no_dlpack` leaves `__dlpack__` out of the methods `python` adds; without `python` there are none: write `#[cai(python, no_dlpack)]`",
        );
    }
    Common {
        shape,
        strides,
        offset,
        order,
        readonly,
        stream,
        python,
        dlpack: !cont.attrs.no_dlpack.is_set(),
    }
}

/// Checks a struct for `#[derive(Element)]`.
pub fn element(cx: &Ctxt, cont: &Container) {
    if !attr::repr_c(&cont.original.attrs) {
        cx.error_spanned_by(
            cont.ident,
            "#[derive(Element)] needs `#[repr(C)]` on the struct: NumPy structured types have fixed field offsets, and Rust's default layout may reorder fields",
        );
    }
    if !cont.generics.params.is_empty() {
        cx.error_spanned_by(
            cont.generics,
            "#[derive(Element)] does not support generic structs: an element's type string must be one constant; derive it on a concrete struct",
        );
    }
    if cont.fields.is_empty() {
        cx.error_spanned_by(
            cont.ident,
            "#[derive(Element)] needs at least one field: an element of zero bytes cannot be stored in an array",
        );
    }
}
