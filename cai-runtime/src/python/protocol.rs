//! One protocol surface: what a Python object exports ([`Exporter`]: a descriptor per side,
//! with what vouches for it), and the body of every protocol method, written once over
//! `&dyn Exporter`. `#[cai_runtime::pymethods(...)]` and `#[cai(python)]` generate the methods
//! (cai-derive's `expand/python.rs`), for derived classes and for the `cai` package's own
//! (views, storages, `DeviceArray`) alike: each protocol reads the same way on every class.
//!
//! Adding a protocol: its module beside this one (as `array_struct.rs`, `dlpack/`), its body
//! here (a `__name__` function in [`methods`]), and its stub in the generator's table.

use std::borrow::Cow;

use pyo3::exceptions::PyAttributeError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::descriptor::{ArrayDescriptor, DescriptorBuilder, Device, Host, Space};
use crate::error::DescriptorError;
use crate::interface::{ArrayInterface, CudaArrayInterface};
use crate::layout::Layout;

use super::DlpackDevice;
use super::errors::export_error;

/// A side of an export: device memory (`__cuda_array_interface__`) or host memory
/// (`__array_interface__`, `__array_struct__`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Device memory.
    Device,
    /// Host memory.
    Host,
}

/// One side's descriptor, with what vouches for the memory and stream it describes: what cai
/// may do with them beyond describing them (copy the bytes for DLPack, hand the stream to the
/// driver).
pub struct Export<'a, S: Space>(Source<'a, S>);

// Lives on the stack for one protocol call: boxing the builder would allocate on the hot path.
#[allow(clippy::large_enum_variant)]
enum Source<'a, S: Space> {
    /// A builder, which says what vouches for its memory and stream
    /// ([`DescriptorBuilder::vouched`], [`DescriptorBuilder::stream_live`]).
    Built(DescriptorBuilder<'a, S>),
    /// A descriptor nothing vouches for: described, never read nor handed to the driver.
    Described(Cow<'a, ArrayDescriptor<S>>),
    /// A descriptor whose exporter answers for its memory and stream.
    Vouched(Cow<'a, ArrayDescriptor<S>>),
}

/// What a protocol method works from: the descriptor, its layout, and what is vouched for.
pub(crate) struct Resolved<'a, S: Space> {
    pub descriptor: Cow<'a, ArrayDescriptor<S>>,
    pub layout: Layout,
    /// The bytes may be read by cai (a DLPack copy).
    pub vouched: bool,
    /// The stream may be handed to the driver.
    pub stream_live: bool,
}

impl<'a, S: Space> Export<'a, S> {
    /// What a builder builds; the builder says what vouches for its memory and stream (its
    /// `DeviceMemory` / `HostMemory` data, `stream_vouched_by`).
    pub fn built(builder: DescriptorBuilder<'a, S>) -> Self {
        Export(Source::Built(builder))
    }

    /// A descriptor that is only described to consumers (as its dict describes it): cai neither
    /// reads its bytes nor hands its stream to the driver.
    /// (A descriptor the object holds is lent, `Cow::Borrowed`: no copy per access.)
    pub fn described(descriptor: Cow<'a, ArrayDescriptor<S>>) -> Self {
        Export(Source::Described(descriptor))
    }

    /// A descriptor whose memory and stream the exporting object answers for.
    ///
    /// # Safety
    /// While the Python object exporting it lives, `descriptor` describes memory valid for
    /// reads (and writes unless read-only) by this process (device memory: by the driver), and
    /// its stream, if a handle, is a live stream of this process.
    pub unsafe fn vouched(descriptor: Cow<'a, ArrayDescriptor<S>>) -> Self {
        Export(Source::Vouched(descriptor))
    }

    /// The builder, where it was built (a derived class's export).
    fn builder(&self) -> Option<&DescriptorBuilder<'a, S>> {
        match &self.0 {
            Source::Built(b) => Some(b),
            Source::Described(_) | Source::Vouched(_) => None,
        }
    }

    /// Built, with its layout; export errors name `what`.
    pub(crate) fn resolve(self, what: &str) -> PyResult<Resolved<'a, S>> {
        let err = |e| export_error(e, what);
        let (descriptor, layout, vouched, stream_live) = match self.0 {
            Source::Built(b) => {
                let (vouched, stream_live) = (b.vouched(), b.stream_live());
                let (d, layout) = b.build_with_layout().map_err(err)?;
                if S::DEVICE {
                    super::export::refuse_stream_of_another_device(&d)?;
                }
                (Cow::Owned(d), layout, vouched, stream_live)
            }
            Source::Described(d) => {
                let layout = d.layout().map_err(err)?;
                (d, layout, false, false)
            }
            Source::Vouched(d) => {
                let layout = d.layout().map_err(err)?;
                (d, layout, true, true)
            }
        };
        Ok(Resolved {
            descriptor,
            layout,
            vouched,
            stream_live,
        })
    }

    /// The descriptor's dict (a new one on every call); a mask's holder keeps `exporter`.
    fn to_dict<'py>(&self, exporter: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyDict>> {
        let py = exporter.py();
        match &self.0 {
            Source::Built(b) => super::export::builder_to_dict(py, b, Some(exporter)),
            Source::Described(d) | Source::Vouched(d) => {
                super::export::to_dict_kept(py, d, Some(exporter))
            }
        }
    }
}

/// What a Python object exports, side by side: the one abstraction every protocol method is
/// written over ([`methods`]). Derived classes export through [`Derived`]; a class with sides
/// known only at run time (a storage with a host buffer, a device buffer, or both) implements
/// it and lists the sides it may have: `#[cai_runtime::pymethods(cuda, host, exporter)]`.
pub trait Exporter {
    /// The device side's descriptor, or `None` where this object has no device memory (its
    /// `__cuda_array_interface__` raises `AttributeError` with [`Exporter::absent`]).
    fn device(&self) -> Option<Result<Export<'_, Device>, DescriptorError>> {
        None
    }

    /// The host side's descriptor; see [`Exporter::device`].
    fn host(&self) -> Option<Result<Export<'_, Host>, DescriptorError>> {
        None
    }

    /// The side `__dlpack__` exports for a consumer asking for `wants` (its `dl_device`, or
    /// `None`), and `__dlpack_device__` names (`wants` = `None`).
    fn dlpack_side(&self, wants: Option<DlpackDevice>) -> Side;

    /// Why this object has no `side` (the message of the `AttributeError` that tells Python
    /// it does not expose the protocol).
    fn absent(&self, side: Side) -> String {
        match side {
            Side::Device => "this object exports no device memory".into(),
            Side::Host => "this object exports no host memory".into(),
        }
    }

    /// Called before a protocol hands out `side`'s memory (not by `__dlpack_device__`): a
    /// mirrored storage copies newer data across.
    fn prepare(&self, side: Side) -> PyResult<()> {
        let _ = side;
        Ok(())
    }

    /// The `numpy.dtype` `__array_struct__` gives NumPy for the host side's items, where the
    /// object has its own (`None`: the one of the descriptor's type string or `descr`).
    fn numpy_dtype<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let _ = py;
        Ok(None)
    }

    /// Where an exporter whose sides never change (their memory, layout, type and read-only
    /// flag fixed for its life: a storage, an import's view) keeps what its DLPack exports of
    /// them share, made at the first: `__dlpack__` and the exchange table then build no host
    /// descriptor, and the table lends tensors (`dltensor_from_py_object_no_sync`, for the
    /// classes `#[cai_runtime::pymethods(.., exporter)]` makes, where [`Exporter::lends`]
    /// says so), their shape and strides kept here. `None` (the default): built on every
    /// export, and nothing is lent.
    fn dlpack_cache(&self) -> Option<&DlpackCache> {
        None
    }

    /// Whether every object of this class keeps a [`DlpackCache`], so that its exchange table
    /// lends tensors (`dltensor_from_py_object_no_sync`); `false` (the default): the table has
    /// none to lend, and consumers take an owning tensor.
    fn lends() -> bool
    where
        Self: Sized,
    {
        false
    }
}

/// What an exporter's DLPack exports of its unchanging sides share
/// ([`Exporter::dlpack_cache`]); empty until the first export.
#[derive(Default)]
pub struct DlpackCache {
    /// The host side's template (`None`: DLPack cannot say it). Boxed, as the device's: an
    /// object that keeps a cache stays small until it is exported.
    host: std::sync::OnceLock<Option<Box<super::dlpack::Template>>>,
    /// The device side's, made when a tensor of it is first lent.
    device: std::sync::OnceLock<Box<super::dlpack::Template>>,
}

impl std::fmt::Debug for DlpackCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DlpackCache")
            .field("host", &self.host.get().is_some())
            .field("device", &self.device.get().is_some())
            .finish()
    }
}

impl DlpackCache {
    /// The host side's template, made at the first call (`None`: DLPack cannot say it).
    fn host_template(
        &self,
        e: &dyn Exporter,
        what: &str,
    ) -> PyResult<Option<&super::dlpack::Template>> {
        let template = match self.host.get() {
            Some(t) => t,
            None => self.made_host_template(e, what)?,
        };
        Ok(template.as_deref())
    }

    /// [`Self::host_template`]'s first call. Out of line, as [`built_host_export`] is.
    #[cold]
    #[inline(never)]
    fn made_host_template(
        &self,
        e: &dyn Exporter,
        what: &str,
    ) -> PyResult<&Option<Box<super::dlpack::Template>>> {
        let x = side_of(e, Side::Host, false, what, |e| e.host())?.resolve(what)?;
        Ok(self
            .host
            .get_or_init(|| super::dlpack::Template::of(&x).map(Box::new)))
    }
}

/// The host export of `e` for `request` through its [`DlpackCache`], where it has one and the
/// request shares the memory as it is; `None`: the full export is needed.
fn cached_host_export(
    exporter: &Bound<'_, PyAny>,
    e: &dyn Exporter,
    request: &super::DlpackRequest,
    what: &str,
) -> PyResult<Option<super::dlpack::ManagedExport>> {
    let Some(cache) = e.dlpack_cache().filter(|_| request.shares_host()) else {
        return Ok(None);
    };
    let Some(template) = cache.host_template(e, what)? else {
        return Ok(None);
    };
    e.prepare(Side::Host)?;
    template.export(exporter, request).map(Some)
}

/// The host templates of built exports (derived classes keep no [`DlpackCache`]), keyed on
/// their builders as the export memo keys its dicts: building is a pure function of the
/// builder, so an equal builder's template is what building would give. Repeated exports of
/// the same arrays hit; a miss costs one comparison per entry on top of building.
static HOST_TEMPLATES: super::Memo<Box<dyn std::any::Any + Send>, super::dlpack::Template, 16> =
    super::Memo::new();

/// The host side's tensor for `request`: through `e`'s [`DlpackCache`] where it keeps one, else
/// through [`HOST_TEMPLATES`] where the export is built and the request shares the memory as
/// it is, else exported in full.
fn host_export(
    exporter: &Bound<'_, PyAny>,
    e: &dyn Exporter,
    request: &super::DlpackRequest,
    what: &str,
) -> PyResult<super::dlpack::ManagedExport> {
    if let Some(m) = cached_host_export(exporter, e, request, what)? {
        return Ok(m);
    }
    built_host_export(exporter, e, request, what)
}

/// [`host_export`] where `e` keeps no [`DlpackCache`] or the request does not share the
/// memory as it is. Out of line: inlined, its builders and descriptors gave every caller a
/// stack frame of 2.5 KB, the cached exports' included (`exchange_tensor`'s is 392 bytes
/// without them).
#[inline(never)]
fn built_host_export(
    exporter: &Bound<'_, PyAny>,
    e: &dyn Exporter,
    request: &super::DlpackRequest,
    what: &str,
) -> PyResult<super::dlpack::ManagedExport> {
    use super::export::MemoKey;
    // (The side is read where it lies, not moved out as `side_of` moves it: a builder is
    // ~250 bytes, and a hit needs only to look at it.)
    let got = e.host();
    let refused = |got: Option<Result<Export<'_, Host>, _>>| {
        refusal(e, Side::Host, what, got.and_then(Result::err))
    };
    let Some(Ok(export)) = &got else {
        return Err(refused(got));
    };
    e.prepare(Side::Host)?;
    let builder = export.builder().filter(|_| request.shares_host());
    if let Some(b) = builder {
        let found = |k: &Box<dyn std::any::Any + Send>| {
            k.downcast_ref::<<DescriptorBuilder<'_, Host> as MemoKey>::Stored>()
                .is_some_and(|k| b.matches(k))
        };
        // (Under the memo's lock: a reference taken, a block allocated; no Python code.)
        if let Some(m) = HOST_TEMPLATES.get(found, |t| t.export(exporter, request)) {
            return m;
        }
    }
    let key = builder.map(MemoKey::stored);
    let x = match got {
        Some(Ok(export)) => export.resolve(what)?,
        other => return Err(refused(other)),
    };
    if let Some(key) = key
        && let Some(t) = super::dlpack::Template::of(&x)
    {
        HOST_TEMPLATES.insert(Box::new(key), t);
    }
    super::dlpack::dlpack_managed(exporter, &x, request)
}

/// The [`Exporter`] of a value implementing the derived traits: the sides it implements, the
/// device side's for DLPack where it has both.
pub struct Derived<'a> {
    /// The device side.
    pub device: Option<&'a dyn CudaArrayInterface>,
    /// The host side.
    pub host: Option<&'a dyn ArrayInterface>,
}

impl Exporter for Derived<'_> {
    fn device(&self) -> Option<Result<Export<'_, Device>, DescriptorError>> {
        let v = self.device?;
        Some(match v.__cai_builder() {
            Some(b) => b.map(Export::built),
            None => v
                .cuda_array_interface()
                .map(|d| Export::described(Cow::Owned(d))),
        })
    }

    fn host(&self) -> Option<Result<Export<'_, Host>, DescriptorError>> {
        let v = self.host?;
        Some(match v.__cai_builder() {
            Some(b) => b.map(Export::built),
            None => v
                .array_interface()
                .map(|d| Export::described(Cow::Owned(d))),
        })
    }

    fn dlpack_side(&self, _: Option<DlpackDevice>) -> Side {
        if self.device.is_some() {
            Side::Device
        } else {
            Side::Host
        }
    }
}

/// `side`'s export, prepared for use where `prepare`; `AttributeError` where there is none.
fn side_of<'e, S: Space>(
    e: &'e dyn Exporter,
    side: Side,
    prepare: bool,
    what: &str,
    get: impl FnOnce(&'e dyn Exporter) -> Option<Result<Export<'e, S>, DescriptorError>>,
) -> PyResult<Export<'e, S>> {
    let export = match get(e) {
        Some(Ok(export)) => export,
        other => return Err(refusal(e, side, what, other.and_then(Result::err))),
    };
    if prepare {
        e.prepare(side)?;
    }
    Ok(export)
}

/// Why `side` has no export: the export's error where it refused (`err`), else an
/// `AttributeError` (the exporter has no such side).
fn refusal(e: &dyn Exporter, side: Side, what: &str, err: Option<DescriptorError>) -> PyErr {
    match err {
        Some(err) => export_error(err, what),
        None => PyAttributeError::new_err(e.absent(side)),
    }
}

/// The tensor the exchange table's `managed_tensor_from_py_object_no_sync` hands out: the side
/// `__dlpack_device__` names, versioned, device memory ordered before the legacy default
/// stream (cai's current work stream).
pub(crate) fn exchange_tensor(
    exporter: &Bound<'_, PyAny>,
    e: &dyn Exporter,
) -> PyResult<super::dlpack::ManagedExport> {
    const WHAT: &str = "__dlpack_c_exchange_api__";
    match e.dlpack_side(None) {
        Side::Device => device_export(exporter, e, &super::DlpackRequest::exchange(true), WHAT),
        Side::Host => host_export(exporter, e, &super::DlpackRequest::exchange(false), WHAT),
    }
}

/// The device side's tensor for `request` (`__dlpack__`'s and [`exchange_tensor`]'s). Out of
/// line, as [`built_host_export`] is: the host side's exports are the everyday ones, and
/// inlined, this gave `__dlpack__` a stack frame of 2 KB.
#[inline(never)]
fn device_export(
    exporter: &Bound<'_, PyAny>,
    e: &dyn Exporter,
    request: &super::DlpackRequest,
    what: &str,
) -> PyResult<super::dlpack::ManagedExport> {
    let x = side_of(e, Side::Device, true, what, |e| e.device())?.resolve(what)?;
    super::dlpack::dlpack_managed(exporter, &x, request)
}

/// The tensor the exchange table's `dltensor_from_py_object_no_sync` lends of the side
/// `__dlpack__` exports, written to `out`, its shape and strides kept in `e`'s [`DlpackCache`] (a `BufferError`
/// where `e` keeps none). It is valid while `exporter` lives unchanged: until control returns
/// to Python, as DLPack says.
pub(crate) fn lent_tensor(
    exporter: &Bound<'_, PyAny>,
    e: &dyn Exporter,
    out: &mut std::mem::MaybeUninit<dlpark::ffi::DLTensor>,
) -> PyResult<()> {
    lend_tensor(exporter, e, out, false).map(|_| ())
}

/// [`lent_tensor`]; with `decline_read_only`, read-only memory is declined (`false`, nothing
/// written to `out`) rather than refused with a `BufferError`: cai's own imports then take
/// the managed tensor, with no exception made and dropped on each import of a read-only
/// object (which tripled its cost), and for device memory no stream work done twice.
pub(crate) fn lend_tensor(
    exporter: &Bound<'_, PyAny>,
    e: &dyn Exporter,
    out: &mut std::mem::MaybeUninit<dlpark::ffi::DLTensor>,
    decline_read_only: bool,
) -> PyResult<bool> {
    const WHAT: &str = "dltensor_from_py_object_no_sync";
    let declined = |t: &super::dlpack::Template| decline_read_only && t.readonly();
    let Some(cache) = e.dlpack_cache() else {
        return Err(pyo3::exceptions::PyBufferError::new_err(format!(
            "{WHAT}: this {} keeps no shape and strides to lend (its Exporter has no dlpack_cache): use managed_tensor_from_py_object_no_sync",
            exporter
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default()
        )));
    };
    match e.dlpack_side(None) {
        Side::Host => {
            let Some(template) = cache.host_template(e, WHAT)? else {
                // DLPack cannot say it: the owning export's error says why.
                let x = side_of(e, Side::Host, true, WHAT, |e| e.host())?.resolve(WHAT)?;
                let request = super::DlpackRequest::exchange(false);
                super::dlpack::dlpack_managed(exporter, &x, &request)?;
                return Err(pyo3::exceptions::PyBufferError::new_err(format!(
                    "{WHAT}: DLPack cannot describe this memory"
                )));
            };
            if declined(template) {
                return Ok(false);
            }
            e.prepare(Side::Host)?;
            template.lend(None, out).map(|()| true)
        }
        Side::Device => {
            // (Declined before the export's stream work where the template says read-only.)
            if cache.device.get().is_some_and(|t| declined(t)) {
                return Ok(false);
            }
            // (Resolved on every call: its stream is ordered before cai's current work stream.)
            let x = side_of(e, Side::Device, true, WHAT, |e| e.device())?.resolve(WHAT)?;
            let template = match cache.device.get() {
                Some(t) => t,
                None => {
                    let made = Box::new(super::dlpack::Template::of_device(&x)?);
                    cache.device.get_or_init(|| made)
                }
            };
            if declined(template) {
                return Ok(false);
            }
            template.lend(Some(&x), out).map(|()| true)
        }
    }
}

/// The body of each protocol method the generator adds; `exporter` is the Python object, `e`
/// what it exports. Not an API: the generated code's.
#[doc(hidden)]
pub mod methods {
    #![allow(non_snake_case)]
    use super::*;
    use crate::python::DlpackRequest;

    /// `__cuda_array_interface__`.
    pub fn __cuda_array_interface__<'py>(
        exporter: &Bound<'py, PyAny>,
        e: &dyn Exporter,
    ) -> PyResult<Bound<'py, PyDict>> {
        side_of(e, Side::Device, true, Device::ATTRIBUTE, |e| e.device())?.to_dict(exporter)
    }

    /// `__array_interface__`.
    pub fn __array_interface__<'py>(
        exporter: &Bound<'py, PyAny>,
        e: &dyn Exporter,
    ) -> PyResult<Bound<'py, PyDict>> {
        side_of(e, Side::Host, true, Host::ATTRIBUTE, |e| e.host())?.to_dict(exporter)
    }

    /// `__array_struct__`.
    pub fn __array_struct__<'py>(
        exporter: &Bound<'py, PyAny>,
        e: &dyn Exporter,
    ) -> PyResult<Bound<'py, PyAny>> {
        const WHAT: &str = "__array_struct__";
        let x = side_of(e, Side::Host, true, WHAT, |e| e.host())?.resolve(WHAT)?;
        let dtype = e.numpy_dtype(exporter.py())?;
        super::super::array_struct::capsule(exporter, &x.descriptor, &x.layout, dtype)
    }

    /// `__dlpack__`, from its keyword arguments.
    pub fn __dlpack__<'py>(
        exporter: &Bound<'py, PyAny>,
        e: &dyn Exporter,
        stream: Option<&Bound<'py, PyAny>>,
        max_version: Option<&Bound<'py, PyAny>>,
        dl_device: Option<&Bound<'py, PyAny>>,
        copy: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        const WHAT: &str = "__dlpack__";
        let mut request = DlpackRequest::new();
        request.read_args(stream, max_version, dl_device, copy)?;
        match e.dlpack_side(request.dl_device()) {
            Side::Device => super::device_export(exporter, e, &request, WHAT),
            Side::Host => super::host_export(exporter, e, &request, WHAT),
        }?
        .into_capsule(exporter.py())
    }

    /// `__dlpack_device__`: `(1, 0)` for the host side; the device side's memory asked about.
    pub fn __dlpack_device__(e: &dyn Exporter) -> PyResult<(i32, i32)> {
        const WHAT: &str = "__dlpack_device__";
        match e.dlpack_side(None) {
            Side::Device => {
                let x = side_of(e, Side::Device, false, WHAT, |e| e.device())?.resolve(WHAT)?;
                super::super::dlpack::descriptor_dlpack_device(&x.descriptor)
            }
            Side::Host => Ok(DlpackDevice::Cpu.to_pair()),
        }
    }
}
