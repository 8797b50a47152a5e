//! `__gt_data_interface__` in Python: the dict a [`GtDataInterface`] type exports (with hook
//! callables that call back into the Rust object), and [`GtData`], the consumption of any
//! object exposing it, falling back to `__array_interface__` / `__cuda_array_interface__` as
//! GDP-3 says; and the storage errors as Python exceptions (cai-runtime's `impl_pyerr!`):
//!
//! | error | exception |
//! |---|---|
//! | [`StorageError`] | by variant: [`GTNoSuchBufferError`] (a missing buffer), `MemoryError` (an allocation), `RuntimeError` (no GPU, the driver, a failed transfer), `TypeError` (a dtype), else `ValueError` |
//! | [`IndexError`](crate::IndexError) | `IndexError` where NumPy raises it ([`is_index_error`](crate::IndexError::is_index_error)), else `ValueError` |
//! | [`GtError`] | `ValueError`: a data interface whose values disagree |

use pyo3::PyClass;
use pyo3::exceptions::{
    PyException, PyIndexError, PyMemoryError, PyRuntimeError, PyTypeError, PyValueError,
};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple, PyType};

use cai_runtime::__private::{
    dimension_items, dimension_letters, show, size_pairs, to_dict_kept, type_error_or, type_name,
};
use cai_runtime::python::{ForeignDeviceArray, ForeignHostArray};
use cai_runtime::sync::ImportOptions;

use crate::interface::check_dims_and_halo;
use crate::{GtDataDescriptor, GtDataInterface, GtDevice, GtError, GtHooks, StorageError};

// The storages' errors as Python exceptions (cai-runtime's table, `python` module docs):
// GT4Py's exception for a missing buffer, the others as NumPy raises them.

pyo3::create_exception!(
    cai,
    GTNoSuchBufferError,
    PyException,
    "The storage has no buffer on the side asked for (to_numpy() of a device-only storage...)."
);

cai_runtime::impl_pyerr! {
    /// By variant: GT4Py's [`GTNoSuchBufferError`] for a missing buffer, `MemoryError` for a
    /// failed allocation, `RuntimeError` for no GPU or a failed transfer, `TypeError` for a
    /// dtype a storage cannot hold, `ValueError` for any other parameter.
    StorageError {
        StorageError::NoSuchBuffer(_) => GTNoSuchBufferError,
        StorageError::Alloc(_) => PyMemoryError,
        StorageError::NoGpu(_)
        | StorageError::Driver(_)
        | StorageError::Transfer(_) => PyRuntimeError,
        StorageError::Dtype(_) => PyTypeError,
        _ => PyValueError,
    }
    /// `IndexError` where NumPy raises it (an index out of bounds, too many indices, two
    /// `...`), else `ValueError` (a zero step, axes that are no permutation, an overflow).
    crate::IndexError {
        e if e.is_index_error() => PyIndexError,
        _ => PyValueError,
    }
    /// `ValueError`: a data interface whose entries or parameters disagree.
    GtError => PyValueError;
}

/// A `GtError` met while exporting `__gt_data_interface__`, as the `ValueError` the property
/// raises, naming the attribute.
pub fn gt_error(e: GtError) -> PyErr {
    PyValueError::new_err(format!("cannot export __gt_data_interface__: {e}"))
}

/// Which hook.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HookKind {
    /// `acquire`.
    Acquire,
    /// `touch`.
    Touch,
    /// `release`.
    Release,
}

impl HookKind {
    /// All three, in GDP-3's order.
    pub const ALL: [HookKind; 3] = [HookKind::Acquire, HookKind::Touch, HookKind::Release];

    /// The dict key.
    pub fn key(self) -> &'static str {
        match self {
            HookKind::Acquire => "acquire",
            HookKind::Touch => "touch",
            HookKind::Release => "release",
        }
    }

    fn call(self, hooks: &dyn GtHooks, device: GtDevice) -> PyResult<()> {
        let r = match self {
            HookKind::Acquire => hooks.acquire(device),
            HookKind::Touch => hooks.touch(device),
            HookKind::Release => hooks.release(device),
        };
        r.map_err(|e| PyRuntimeError::new_err(format!("{} failed: {e}", self.key())))
    }
}

/// The `acquire` / `touch` / `release` callable of an exported `__gt_data_interface__`: calls
/// the hook of the Rust object it was exported from, which it keeps alive.
#[pyclass(frozen, module = "cai", name = "GtHook")]
pub struct GtHook {
    owner: Py<PyAny>,
    device: GtDevice,
    kind: HookKind,
    call: fn(&Bound<'_, PyAny>, GtDevice, HookKind) -> PyResult<()>,
}

#[pymethods]
impl GtHook {
    fn __call__(&self, py: Python<'_>) -> PyResult<()> {
        (self.call)(self.owner.bind(py), self.device, self.kind)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let device = match self.device.key() {
            None => "None".to_string(),
            Some(k) => format!("{k:?}"),
        };
        format!(
            "<{} hook of the {device} buffer of {}>",
            self.kind.key(),
            type_name(self.owner.bind(py))
        )
    }
}

fn call_hook<T: GtDataInterface + PyClass>(
    owner: &Bound<'_, PyAny>,
    device: GtDevice,
    kind: HookKind,
) -> PyResult<()> {
    let obj = owner.cast::<T>()?;
    let this = obj.try_borrow()?;
    match this.gt_hooks() {
        Some(h) => kind.call(h, device),
        None => Ok(()),
    }
}

/// Builds the `__gt_data_interface__` dict: `{None: {...}, "gpu": {...}}`, each entry the
/// side's array-interface dict plus `dims`, `halo` and the hooks `hook(device, kind)` gives;
/// a mask's holder keeps `exporter` alive (see [`to_dict_kept`]).
pub fn gt_dict<'py>(
    py: Python<'py>,
    d: &GtDataDescriptor,
    exporter: Option<&Bound<'py, PyAny>>,
    mut hook: impl FnMut(GtDevice, HookKind) -> PyResult<Option<Bound<'py, PyAny>>>,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let sides = [
        (
            GtDevice::Host,
            d.host.as_ref().map(|h| to_dict_kept(py, h, exporter)),
        ),
        (
            GtDevice::Gpu,
            d.gpu.as_ref().map(|g| to_dict_kept(py, g, exporter)),
        ),
    ];
    for (device, entry) in sides {
        let Some(entry) = entry else { continue };
        let entry = entry?;
        if let Some(dims) = &d.dims {
            entry.set_item(intern!(py, "dims"), PyTuple::new(py, dims)?)?;
        }
        if let Some(halo) = &d.halo {
            entry.set_item(intern!(py, "halo"), PyTuple::new(py, halo)?)?;
        }
        for kind in HookKind::ALL {
            if let Some(f) = hook(device, kind)? {
                entry.set_item(kind.key(), f)?;
            }
        }
        out.set_item(device.key(), entry)?;
    }
    Ok(out)
}

/// Body of a generated `__gt_data_interface__` getter.
pub fn gt_data_interface<'py, T: GtDataInterface + PyClass>(
    slf: &Bound<'py, T>,
) -> PyResult<Bound<'py, PyDict>> {
    let py = slf.py();
    let (d, has_hooks) = {
        let this = slf.try_borrow()?;
        (
            this.gt_data_interface().map_err(gt_error)?,
            this.gt_hooks().is_some(),
        )
    };
    let owner = slf.clone().into_any().unbind();
    gt_dict(py, &d, Some(slf.as_any()), |device, kind| {
        if !has_hooks {
            return Ok(None);
        }
        let hook = GtHook {
            owner: owner.clone_ref(py),
            device,
            kind,
            call: call_hook::<T>,
        };
        Ok(Some(Bound::new(py, hook)?.into_any()))
    })
}

/// Any object as GDP-3 reads it: its `__gt_data_interface__`, or else its
/// `__array_interface__` (as the `None` entry) and `__cuda_array_interface__` (as `"gpu"`).
#[derive(Debug)]
pub struct GtData {
    /// The host buffer.
    pub host: Option<ForeignHostArray>,
    /// The device buffer.
    pub gpu: Option<ForeignDeviceArray>,
    /// `dims` (agreed by both entries).
    pub dims: Option<Vec<String>>,
    /// `halo` (agreed by both entries).
    pub halo: Option<Vec<(usize, usize)>>,
    /// Hooks: `[host, gpu]`, each `[acquire, touch, release]`.
    hooks: [[Option<Py<PyAny>>; 3]; 2],
    /// Whether `__gt_data_interface__` was read (else the fallback).
    pub from_gt: bool,
}

impl Drop for GtData {
    fn drop(&mut self) {
        // The hooks are the producer's objects (bound methods of its arrays, closures over
        // them): releasing one may run its code, and this may drop while the user's exception
        // is being raised. (The views put it aside themselves.)
        let hooks = std::mem::take(&mut self.hooks);
        if hooks.iter().flatten().any(Option::is_some) {
            cai_runtime::__private::calling_foreign_code(
                "the release of a data interface's hooks",
                move || drop(hooks),
            );
        }
    }
}

fn side(device: GtDevice) -> usize {
    match device {
        GtDevice::Host => 0,
        GtDevice::Gpu => 1,
    }
}

impl GtData {
    /// Whether `obj` speaks GDP-3's data interface itself: it has `__gt_data_interface__`,
    /// or it is an xarray `DataArray` (GDP-3's default xarray data interface).
    pub fn speaks_gt(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(obj.hasattr(intern!(obj.py(), "__gt_data_interface__"))?
            || data_array_dims(obj)?.is_some())
    }

    /// Reads `obj`. Every entry is validated as its protocol's descriptor (a `"gpu"` entry
    /// without `version` is read as version 3: GDP-3 does not require the key); `dims`, `halo`
    /// and the hooks are checked; both entries must agree on shape, dims and halo.
    ///
    /// An xarray `DataArray` without `__gt_data_interface__` of its own (a user's accessor
    /// comes first) is read as GDP-3's default xarray data interface says: its `data` through
    /// `__gt_data_interface__` or the array interfaces, with the `DataArray`'s `dims`, which
    /// must agree with any `dims` the data gives.
    pub fn from_object(obj: &Bound<'_, PyAny>, options: &ImportOptions) -> PyResult<GtData> {
        match data_array_dims(obj)? {
            Some(dims) => Self::from_data_array(obj, dims, options),
            None => Self::read(obj, options),
        }
    }

    /// `obj` through `__gt_data_interface__`, else the array interfaces.
    fn read(obj: &Bound<'_, PyAny>, options: &ImportOptions) -> PyResult<GtData> {
        match gt_interface(obj)? {
            Some(gt) => Self::from_gt(obj, &gt, options),
            None => Self::fallback(obj, options),
        }
    }

    fn from_data_array(
        obj: &Bound<'_, PyAny>,
        dims: Vec<String>,
        options: &ImportOptions,
    ) -> PyResult<GtData> {
        // (`read`, not `from_object`: a `data` that is itself a DataArray is not followed.)
        let mut data = Self::read(&obj.getattr(intern!(obj.py(), "data"))?, options)?;
        if let Some(given) = data.dims.as_ref().filter(|given| **given != dims) {
            return Err(PyValueError::new_err(format!(
                "DataArray.dims = {dims:?} and the `dims` of its data's __gt_data_interface__ = {given:?} disagree"
            )));
        }
        data.dims = Some(dims);
        check_dims_and_halo(data.shape(), data.dims.as_deref(), data.halo.as_deref())
            .map_err(|e| PyValueError::new_err(format!("DataArray: {e}")))?;
        Ok(data)
    }

    fn fallback(obj: &Bound<'_, PyAny>, options: &ImportOptions) -> PyResult<GtData> {
        let (mut source, (mut host, mut gpu)) = (obj.clone(), exposes(obj)?);
        if (host, gpu) == (false, false)
            && let Some(buffer) = gt4py_field_buffer(obj)?
        {
            (host, gpu) = exposes(&buffer)?;
            source = buffer;
        }
        let (host, gpu) = match Self::through_dlpack(&source, options, host || gpu)? {
            Some(sides) => sides,
            None => (
                host.then(|| ForeignHostArray::from_object_with(&source, options))
                    .transpose()?,
                gpu.then(|| ForeignDeviceArray::from_object_with(&source, options))
                    .transpose()?,
            ),
        };
        if host.is_none() && gpu.is_none() {
            return Err(PyTypeError::new_err(format!(
                "object of type {} exposes none of __gt_data_interface__, __dlpack__, __array_interface__ and __cuda_array_interface__",
                type_name(obj)
            )));
        }
        let mut data = GtData {
            host,
            gpu,
            dims: None,
            halo: None,
            hooks: Default::default(),
            from_gt: false,
        };
        data.check_shapes()?;
        data.read_gt4py_attributes(obj)?;
        Ok(data)
    }

    /// GDP-3's fallback, DLPack first: its producer orders the consumer's stream itself, and it
    /// is what JAX and PyTorch export in full (their CUDA Array Interface is version 2, without
    /// streams). `None` where `obj` has no `__dlpack__`, or where its producer cannot export
    /// (a `BufferError`: NumPy's structured or byte-swapped arrays) and an array interface is
    /// there to read instead.
    #[allow(clippy::type_complexity)]
    fn through_dlpack(
        obj: &Bound<'_, PyAny>,
        options: &ImportOptions,
        interfaces: bool,
    ) -> PyResult<Option<(Option<ForeignHostArray>, Option<ForeignDeviceArray>)>> {
        let py = obj.py();
        if !obj.hasattr(intern!(py, "__dlpack__"))? {
            return Ok(None);
        }
        let imported = cai_runtime::python::dlpack_device_of(obj).and_then(|device| {
            Ok(if device.is_cuda() {
                (
                    None,
                    Some(ForeignDeviceArray::from_dlpack_with(obj, options, None)?),
                )
            } else {
                (
                    Some(ForeignHostArray::from_dlpack_with(obj, options, None)?),
                    None,
                )
            })
        });
        match imported {
            Ok(sides) => Ok(Some(sides)),
            Err(e) if interfaces && e.is_instance_of::<pyo3::exceptions::PyBufferError>(py) => {
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn from_gt(
        obj: &Bound<'_, PyAny>,
        gt: &Bound<'_, PyAny>,
        options: &ImportOptions,
    ) -> PyResult<GtData> {
        let py = obj.py();
        let dict = gt.cast::<PyDict>().map_err(|_| {
            PyTypeError::new_err(format!(
                "__gt_data_interface__ has type {}, not dict (a dict mapping device keys None and \"gpu\" to descriptors)",
                type_name(gt)
            ))
        })?;
        let mut data = GtData {
            host: None,
            gpu: None,
            dims: None,
            halo: None,
            hooks: Default::default(),
            from_gt: true,
        };
        // A snapshot: reading an entry runs the producer's code (`__index__`...), which may
        // change the dict.
        let items = dict.items();
        for item in items.iter() {
            let (key, entry) = item.extract::<(Bound<'_, PyAny>, Bound<'_, PyAny>)>()?;
            let device = if key.is_none() {
                GtDevice::Host
            } else if key.extract::<String>().is_ok_and(|k| k == "gpu") {
                GtDevice::Gpu
            } else {
                return Err(PyValueError::new_err(format!(
                    "__gt_data_interface__ key {} is not a device: use None (main memory) or \"gpu\"",
                    key.repr()?
                )));
            };
            let what = match device {
                GtDevice::Host => "__gt_data_interface__[None]".to_string(),
                GtDevice::Gpu => "__gt_data_interface__[\"gpu\"]".to_string(),
            };
            let entry = entry.cast::<PyDict>().map_err(|_| {
                PyTypeError::new_err(format!("{what} has type {}, not dict", type_name(&entry)))
            })?;
            match device {
                GtDevice::Host => {
                    // SAFETY: the entry is what `obj` exposes: the producer answers for it (the
                    // protocol's contract), and the view keeps `obj`, the entry (as read) and
                    // the interface's items.
                    let mut view = unsafe {
                        ForeignHostArray::from_interface_with(entry, Some(obj), options)?
                    };
                    view.hold(items.as_any());
                    data.host = Some(view);
                }
                GtDevice::Gpu => {
                    let entry = if entry.contains(intern!(py, "version"))? {
                        entry.clone()
                    } else {
                        // From the entry's own storage (a subclass's `copy` or `keys` could
                        // leave out what the data depends on).
                        let e = PyDict::from_sequence(entry.items().as_any())?;
                        e.set_item(intern!(py, "version"), 3)?;
                        e
                    };
                    // SAFETY: as for the host entry (a copy with `version` added describes the
                    // same memory).
                    let mut view = unsafe {
                        ForeignDeviceArray::from_interface_with(&entry, Some(obj), options)?
                    };
                    view.hold(items.as_any());
                    data.gpu = Some(view);
                }
            }
            let dims = optional(entry, "dims")?
                .map(|v| {
                    if let Ok(s) = v.cast::<PyString>() {
                        // A str is a sequence of one-letter names ("IJK").
                        return dimension_letters(&format!("{what}['dims']"), s);
                    }
                    str_items(&format!("{what}['dims']"), &v, "")
                })
                .transpose()?;
            let halo = optional(entry, "halo")?
                .map(|v| size_pairs(&format!("{what}['halo']"), &v))
                .transpose()?;
            agree(&mut data.dims, dims, "dims")?;
            agree(&mut data.halo, halo, "halo")?;
            for (i, kind) in HookKind::ALL.into_iter().enumerate() {
                if let Some(f) = optional(entry, kind.key())? {
                    if !f.is_callable() {
                        return Err(PyTypeError::new_err(format!(
                            "{what}['{}'] = {} is not callable (use None for no action)",
                            kind.key(),
                            f.repr()?
                        )));
                    }
                    data.hooks[side(device)][i] = Some(f.unbind());
                }
            }
        }
        if data.host.is_none() && data.gpu.is_none() {
            return Err(GtError::NoBuffer.into());
        }
        data.check_shapes()?;
        check_dims_and_halo(data.shape(), data.dims.as_deref(), data.halo.as_deref())?;
        data.read_gt4py_attributes(obj)?;
        Ok(data)
    }

    /// GT4Py's `__gt_dims__` and `__gt_origin__` (what its stencils read), where the data
    /// interface left `dims` or `halo` out: the dims as given, the origin as the halo's start
    /// (GT4Py says nothing of the end: 0). Only `AttributeError` means "not there".
    ///
    /// Names this crate has no dimension for (gt4py.next's `"IDim"`, `"Vertex"`...) leave the
    /// dims unsaid; a negative origin (a field whose domain starts past 0) is no halo. The
    /// origin is in GT4Py's stencil order ([`gt4py_order`]) where the dims are known.
    fn read_gt4py_attributes(&mut self, obj: &Bound<'_, PyAny>) -> PyResult<()> {
        let py = obj.py();
        // Nothing left to read (a data interface gave both), or nothing to read it from.
        if (self.dims.is_some() && self.halo.is_some()) || is_plain_ndarray(obj)? {
            return Ok(());
        }
        let attribute = |name: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
            match obj.getattr(name) {
                Ok(v) if v.is_none() => Ok(None),
                Ok(v) => Ok(Some(v)),
                Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) => Ok(None),
                Err(e) => Err(e),
            }
        };
        let ndim = self.shape().len();
        let mut order_dims: Option<crate::PerDim<crate::Dim>> = None;
        if let Some(v) = attribute("__gt_dims__")? {
            let names = dim_names(&v)?;
            if names.len() != ndim {
                return Err(PyValueError::new_err(format!(
                    "__gt_dims__ = {} names {} dimensions but the data has {ndim}",
                    show(&v),
                    names.len()
                )));
            }
            if names.iter().all(|n| crate::Dim::parse(n).is_some()) {
                let dims = crate::parse_dims(&names)
                    .map_err(|e| PyValueError::new_err(format!("__gt_dims__: {e}")))?;
                order_dims = Some(dims);
                if self.dims.is_none() {
                    self.dims = Some(names);
                }
            }
        }
        if self.halo.is_none()
            && let Some(v) = attribute("__gt_origin__")?
        {
            let starts = int_list("__gt_origin__", &v)?;
            if starts.len() != ndim {
                return Err(PyValueError::new_err(format!(
                    "__gt_origin__ = {} has {} entries but the data has {ndim} dimensions",
                    show(&v),
                    starts.len()
                )));
            }
            let order_dims = match order_dims {
                Some(d) => Some(d),
                None => self.dims.as_deref().and_then(|d| crate::parse_dims(d).ok()),
            };
            let order: Vec<usize> = match &order_dims {
                Some(d) => gt4py_order(d),
                None => (0..ndim).collect(),
            };
            let mut halo = vec![(0, 0); ndim];
            for (&axis, &start) in order.iter().zip(&starts) {
                halo[axis] = (usize::try_from(start).unwrap_or(0), 0);
            }
            check_dims_and_halo(self.shape(), None, Some(&halo))
                .map_err(|e| PyValueError::new_err(format!("__gt_origin__ = {}: {e}", show(&v))))?;
            self.halo = Some(halo);
        }
        Ok(())
    }

    fn check_shapes(&self) -> PyResult<()> {
        if let (Some(h), Some(g)) = (&self.host, &self.gpu)
            && h.descriptor().shape != g.descriptor().shape
        {
            return Err(GtError::ShapeMismatch {
                host: h.descriptor().shape.clone(),
                gpu: g.descriptor().shape.clone(),
            }
            .into());
        }
        Ok(())
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        match (&self.host, &self.gpu) {
            (Some(h), _) => &h.descriptor().shape,
            (None, Some(g)) => &g.descriptor().shape,
            (None, None) => &[],
        }
    }

    /// The hook for `device`, if the object gave one.
    pub fn hook<'py>(
        &self,
        py: Python<'py>,
        device: GtDevice,
        kind: HookKind,
    ) -> Option<Bound<'py, PyAny>> {
        let i = HookKind::ALL.iter().position(|k| *k == kind)?;
        self.hooks[side(device)][i]
            .as_ref()
            .map(|f| f.bind(py).clone())
    }

    /// Calls the hook (no action when absent, as GDP-3 says). Hooks only: before the `"gpu"`
    /// entry's `release`, release the device view itself (`gpu.release()`) so the producer's stream waits for the consumer's work, as Python's
    /// `GtDataView.release("gpu")` does.
    pub fn call(&self, py: Python<'_>, device: GtDevice, kind: HookKind) -> PyResult<()> {
        if let Some(f) = self.hook(py, device, kind) {
            f.call0()?;
        }
        Ok(())
    }
}

/// `obj.__gt_data_interface__`, or None when it has none.
fn gt_interface<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = obj.py();
    match obj.getattr(intern!(py, "__gt_data_interface__")) {
        Ok(gt) => Ok(Some(gt)),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) => Ok(None),
        Err(e) => Err(e),
    }
}

/// `obj.dims` when `obj` is an xarray `DataArray` that has no `__gt_data_interface__`.
/// xarray is looked up in `sys.modules`, never imported: without it there is no DataArray.
/// Whether `o` has `__array_interface__` and `__cuda_array_interface__`.
fn exposes(o: &Bound<'_, PyAny>) -> PyResult<(bool, bool)> {
    let py = o.py();
    Ok((
        o.hasattr(intern!(py, "__array_interface__"))?,
        o.hasattr(intern!(py, "__cuda_array_interface__"))?,
    ))
}

/// The buffer of a GT4Py field (`gt4py.next`): it has `__gt_dims__` and `__gt_origin__` but no
/// array interface, and its items are its `ndarray`, as GT4Py's own `storage.utils.asarray`
/// reads them. `None` for any other object.
pub fn gt4py_field_buffer<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = obj.py();
    if is_plain_ndarray(obj)?
        || obj.hasattr(intern!(py, "__gt_data_interface__"))?
        || exposes(obj)? != (false, false)
        || !obj.hasattr(intern!(py, "__gt_dims__"))?
    {
        return Ok(None);
    }
    match obj.getattr(intern!(py, "ndarray")) {
        Ok(buffer) => Ok(Some(buffer)),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) => Ok(None),
        Err(e) => Err(e),
    }
}

/// The axes in the order GT4Py's stencils take a field's origin in: I, J, K, then the data
/// dimensions by number (`stencil_object.py`, `_extract_array_infos`, which reorders the
/// array by `__gt_dims__` but not the origin). Storages give `__gt_origin__` so, and read it
/// so: it is the storage's own order whenever the dims are in that order.
pub fn gt4py_order(dims: &[crate::Dim]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..dims.len()).collect();
    order.sort_by_key(|&i| dims[i]);
    order
}

/// Whether `obj` is exactly a NumPy array, which has none of GT4Py's attributes (asking costs
/// an `AttributeError` each, on the common path).
fn is_plain_ndarray(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    static NDARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();
    let py = obj.py();
    let ndarray = NDARRAY.get_or_try_init(py, || -> PyResult<_> {
        Ok(py
            .import("numpy")?
            .getattr("ndarray")?
            .cast_into::<PyType>()?
            .unbind())
    })?;
    Ok(obj.get_type().is(ndarray.bind(py)))
}

/// `__gt_dims__`'s names, as GT4Py reads them (each entry's `str`): a str is one name per
/// character, as GDP-3's `dims`; bytes and unordered collections are refused.
fn dim_names(v: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if let Ok(s) = v.cast::<PyString>() {
        return dimension_letters("__gt_dims__", s);
    }
    let unordered = v.is_instance_of::<pyo3::types::PySet>()
        || v.is_instance_of::<pyo3::types::PyFrozenSet>()
        || v.is_instance_of::<PyDict>();
    if unordered
        || v.is_instance_of::<pyo3::types::PyBytes>()
        || v.is_instance_of::<pyo3::types::PyByteArray>()
    {
        return Err(PyTypeError::new_err(format!(
            "__gt_dims__ = {} is not a sequence of dimension names",
            show(v)
        )));
    }
    let bad = || {
        PyTypeError::new_err(format!(
            "__gt_dims__ = {} is not a sequence of dimension names",
            show(v)
        ))
    };
    dimension_items("__gt_dims__", v, bad, |_, d| d.str().map(|s| s.to_string()))
}

/// `__gt_origin__`'s ints (any iterable, as GT4Py's `get_origin` reads it; NumPy integers too,
/// bools not), each naming its entry in an error.
fn int_list(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<i64>> {
    let py = v.py();
    let bad = || PyTypeError::new_err(format!("{key} = {} is not a sequence of ints", show(v)));
    dimension_items(key, v, bad, |i, x| {
        if x.is_instance_of::<pyo3::types::PyBool>() {
            return Err(PyTypeError::new_err(format!(
                "{key}[{i}] = {} is a bool, not an int",
                show(x)
            )));
        }
        x.extract::<i64>().map_err(|e| {
            if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) {
                PyValueError::new_err(format!("{key}[{i}] = {} is out of range", show(x)))
            } else {
                type_error_or(e, || {
                    PyTypeError::new_err(format!("{key}[{i}] = {} is not an int", show(x)))
                })
            }
        })
    })
}

/// A sequence of str (at most one per dimension), the argument being `key`; `hint` ends the
/// message of a TypeError.
fn str_items(key: &str, v: &Bound<'_, PyAny>, hint: &str) -> PyResult<Vec<String>> {
    let bad = || {
        PyTypeError::new_err(format!(
            "{key} = {} is not a sequence of str{hint}",
            show(v)
        ))
    };
    dimension_items(key, v, bad, |_, x| {
        x.extract::<String>().map_err(|e| type_error_or(e, bad))
    })
}

fn data_array_dims(obj: &Bound<'_, PyAny>) -> PyResult<Option<Vec<String>>> {
    let py = obj.py();
    let name = intern!(py, "xarray");
    // SAFETY: `name` is a live str. PyImport_GetModule returns a new reference to the module,
    // or NULL: with an exception set on an error, without one when it is not imported.
    let xarray =
        unsafe { Bound::from_owned_ptr_or_opt(py, ffi::PyImport_GetModule(name.as_ptr())) };
    let Some(xarray) = xarray else {
        return PyErr::take(py).map_or(Ok(None), Err);
    };
    let Ok(class) = xarray.getattr(intern!(py, "DataArray")) else {
        return Ok(None);
    };
    if !obj.is_instance(&class)? || obj.hasattr(intern!(py, "__gt_data_interface__"))? {
        return Ok(None);
    }
    let dims = obj.getattr(intern!(py, "dims"))?;
    str_items(
        "DataArray.dims",
        &dims,
        " (the dims of GDP-3's data interface are names such as \"I\")",
    )
    .map(Some)
}

/// `entry[key]`, with a `None` value read as absent.
fn optional<'py>(entry: &Bound<'py, PyDict>, key: &str) -> PyResult<Option<Bound<'py, PyAny>>> {
    Ok(entry.get_item(key)?.filter(|v| !v.is_none()))
}

/// Both entries must give the same `dims` / `halo` when both give one.
fn agree<T: PartialEq + std::fmt::Debug>(
    slot: &mut Option<T>,
    value: Option<T>,
    key: &str,
) -> PyResult<()> {
    match (slot.as_ref(), value) {
        (Some(a), Some(b)) if *a != b => Err(PyValueError::new_err(format!(
            "__gt_data_interface__ entries disagree on `{key}`: {a:?} and {b:?}"
        ))),
        (None, Some(b)) => {
            *slot = Some(b);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Adds the hook class to a module.
pub fn add_classes(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GtHook>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IndexError;

    /// The exception's type name and message.
    fn raised(py: Python<'_>, e: impl Into<PyErr>) -> (String, String) {
        let e: PyErr = e.into();
        let name = e.get_type(py).name().map(|n| n.to_string()).unwrap();
        (name, e.value(py).to_string())
    }

    #[test]
    fn each_storage_error_is_the_exception_its_variant_says_with_its_own_message() {
        Python::initialize();
        Python::attach(|py| {
            for (e, exc) in [
                (StorageError::NoSuchBuffer("host"), "GTNoSuchBufferError"),
                (StorageError::Alloc(8), "MemoryError"),
                (
                    StorageError::NoGpu(cai_runtime::DriverError {
                        operation: "cuInit",
                        code: cai_runtime::DriverError::CUDA_ERROR_NO_DEVICE,
                    }),
                    "RuntimeError",
                ),
                (StorageError::Transfer("failed".into()), "RuntimeError"),
                (StorageError::Dtype("object".into()), "TypeError"),
                (StorageError::ReadOnly, "ValueError"),
            ] {
                let message = e.to_string();
                assert_eq!(raised(py, e), (exc.into(), message));
            }
            for (e, exc) in [
                (IndexError::Ellipsis, "IndexError"),
                (IndexError::TooMany { ndim: 1, given: 2 }, "IndexError"),
                (IndexError::ZeroStep, "ValueError"),
            ] {
                assert_eq!(raised(py, e).0, exc);
            }
            assert_eq!(raised(py, GtError::NoBuffer).0, "ValueError");
        });
    }
}
