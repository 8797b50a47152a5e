//! The `Storage` class and its GDP-3 storage-type subclasses: the interfaces
//! (`__array_interface__`, `__cuda_array_interface__`, `__gt_data_interface__`), item
//! access, views, the mirror methods, copying and pickling.

use super::create::storage;
use super::dtype::{Dtype, dtype_arg};
use super::index::{basic_index, gt_index_arrays, gt_ndarray};
use super::keywords::dim_names;
use super::mirror::PySyncState;
use super::{cupy, numpy, read_options, read_through_gt};
use crate::args::{self, sizes};
use cai_gt::GtDataDescriptor;
use cai_gt::python::{GtData, HookKind};
use cai_gt::{GtDevice, Managed, PerDim, Preset, Selected, Storage, StorageError, SyncStatus};
use cai_runtime::DescriptorError;
use cai_runtime::python as cpy;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple};

/// A GDP-3 storage: an n-dimensional array in host memory, device memory, or both kept in
/// step, with a halo, semantic dims, and an aligned layout. NumPy reads host storages
/// zero-copy (`__array_interface__`), CuPy and friends device storages
/// (`__cuda_array_interface__`), and GT4Py-style consumers both (`__gt_data_interface__`).
///
/// Every storage is an instance of one of GDP-3's storage types, subclasses of `Storage`
/// chosen by where its buffers are ([`StorageType`]).
// `sequence`: `len()` fills the C sequence slot (PyO3 fills the mapping one otherwise), which
// the C API's sequence functions (pyarrow's `PySequence_Size`) read.
// `frozen`: exports borrow no cell (PyO3's borrow flag costs two atomic operations a call);
// the one attribute Python sets, `halo`, is kept in `halo_set` below.
#[pyclass(module = "cai", name = "Storage", weakref, subclass, sequence, frozen)]
pub struct PyStorage {
    /// The storage as it was made. Its buffers, layout and element never change: exports
    /// read them here. Its halo is the one it was made with: what depends on the halo reads
    /// [`Self::storage`] (or [`Self::current_halo`]).
    pub(super) inner: Storage,
    /// The storage with the halo `halo = ...` set last (GDP-3's setter), if it was set.
    halo_set: std::sync::Mutex<Option<Storage>>,
    dtype: Py<PyAny>,
    /// DLPack's exports of the host side (which never changes) share what this keeps.
    dlpack: cpy::DlpackCache,
}

/// GDP-3's storage types ("Storage Types"): the class of a storage says where its buffers are
/// and who keeps them in step. Storages are made by the creation functions only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StorageType {
    /// `CPUStorage`: a host buffer only (`device=None`).
    Cpu,
    /// `GPUStorage`: a device buffer only (`device="gpu", managed=None`, or wrapped device
    /// memory).
    Gpu,
    /// `SoftwareManagedGPUStorage`: a host and a device buffer that this package keeps in step
    /// (`managed="gt4py"`).
    SoftwareManaged,
    /// `CUDAManagedGPUStorage`: unified memory, which CUDA keeps in step (`managed="cuda"`).
    CudaManaged,
}

impl StorageType {
    fn of(s: &Storage) -> StorageType {
        match (s.buffers().managed(), s.has_host(), s.has_device()) {
            (Managed::Cuda, _, _) => StorageType::CudaManaged,
            (_, true, true) => StorageType::SoftwareManaged,
            (_, false, true) => StorageType::Gpu,
            _ => StorageType::Cpu,
        }
    }
}

/// A GDP-3 storage with a host buffer only (`device=None`).
#[pyclass(module = "cai", name = "CPUStorage", extends = PyStorage, frozen)]
pub struct CpuStorage;

/// A GDP-3 storage with a device buffer only (`device="gpu", managed=None`).
#[pyclass(module = "cai", name = "GPUStorage", extends = PyStorage, frozen)]
pub struct GpuStorage;

/// A GDP-3 storage with a host and a device buffer kept in step by this package
/// (`managed="gt4py"`); GDP-3 also calls it `GT4PySyncedGPUStorage`.
#[pyclass(module = "cai", name = "SoftwareManagedGPUStorage", extends = PyStorage, frozen)]
pub struct SoftwareManagedGpuStorage;

/// A GDP-3 storage in CUDA unified memory, which CUDA keeps in step (`managed="cuda"`);
/// GDP-3 also calls it `CUDASyncedGPUStorage` and `CudaManagedGPUStorage`.
#[pyclass(module = "cai", name = "CUDAManagedGPUStorage", extends = PyStorage, frozen)]
pub struct CudaManagedGpuStorage;

impl PyStorage {
    /// GDP-3's `__array__` view: the host buffer's (NumPy, brought up to date) wherever there
    /// is one, else the device buffer's (CuPy).
    fn array_view<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if slf.borrow().inner.has_host() {
            Self::to_numpy(slf)
        } else {
            Self::to_cupy(slf)
        }
    }

    /// The items as a NumPy array: [`Self::array_view`], copied to the host (through CuPy, as
    /// every device read here) for a device-only storage.
    fn host_items<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        let view = Self::array_view(slf)?;
        if slf.borrow().inner.has_host() {
            Ok(view)
        } else {
            view.call_method0("get")
        }
    }

    pub(super) fn new_py(py: Python<'_>, inner: Storage, dtype: &Dtype) -> PyResult<Py<PyStorage>> {
        let dtype = dtype.numpy.clone().unbind();
        PyStorage {
            inner,
            halo_set: std::sync::Mutex::new(None),
            dtype,
            dlpack: cpy::DlpackCache::default(),
        }
        .into_object(py)
    }

    fn view(&self, py: Python<'_>, inner: Storage) -> PyResult<Py<PyStorage>> {
        let dtype = self.dtype.clone_ref(py);
        PyStorage {
            inner,
            halo_set: std::sync::Mutex::new(None),
            dtype,
            dlpack: cpy::DlpackCache::default(),
        }
        .into_object(py)
    }

    /// [`Self::halo_set`], locked (a poisoned lock still holds a storage made whole).
    fn lock_halo_set(&self) -> std::sync::MutexGuard<'_, Option<Storage>> {
        self.halo_set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The halo now: the one `halo = ...` set last, else the one the storage was made with.
    pub(super) fn current_halo(&self) -> PerDim<(usize, usize)> {
        let set = self.lock_halo_set();
        set.as_ref()
            .unwrap_or(&self.inner)
            .halo()
            .iter()
            .copied()
            .collect()
    }

    /// The storage with its current halo: what views, copies, `*_like` parameters and the
    /// data interface are made from.
    pub(super) fn storage(&self) -> std::borrow::Cow<'_, Storage> {
        match &*self.lock_halo_set() {
            Some(s) => std::borrow::Cow::Owned(s.clone()),
            None => std::borrow::Cow::Borrowed(&self.inner),
        }
    }

    /// The Python object, of the storage type its buffers make it.
    fn into_object(self, py: Python<'_>) -> PyResult<Py<PyStorage>> {
        let kind = StorageType::of(&self.inner);
        let base = PyClassInitializer::from(self);
        let object = match kind {
            StorageType::Cpu => Bound::new(py, base.add_subclass(CpuStorage))?.into_super(),
            StorageType::Gpu => Bound::new(py, base.add_subclass(GpuStorage))?.into_super(),
            StorageType::SoftwareManaged => {
                Bound::new(py, base.add_subclass(SoftwareManagedGpuStorage))?.into_super()
            }
            StorageType::CudaManaged => {
                Bound::new(py, base.add_subclass(CudaManagedGpuStorage))?.into_super()
            }
        };
        Ok(object.unbind())
    }

    pub(super) fn dtype<'py>(&self, py: Python<'py>) -> Dtype<'py> {
        Dtype {
            element: self.inner.element().clone(),
            numpy: self.dtype.bind(py).clone(),
        }
    }

    /// GDP-3, for a value without a data interface: a mirrored storage is on the GPU unless
    /// its host side is newer; anything else if it has a CUDA interface.
    fn value_on_gpu(value: &Bound<'_, PyAny>) -> PyResult<bool> {
        if let Ok(s) = value.cast::<PyStorage>() {
            let s = s.borrow();
            return Ok(match s.inner.sync_status() {
                Some(st) => st != SyncStatus::HostDirty,
                None => s.inner.has_device(),
            });
        }
        value.hasattr(pyo3::intern!(value.py(), "__cuda_array_interface__"))
    }
}

/// A storage's sides are its buffers, each vouched for: its own allocations (or the foreign
/// memory it wraps, kept alive by it), described by its geometry. A side is brought up to date
/// (GDP-3: a read) before a protocol hands it out.
impl cpy::Exporter for PyStorage {
    fn device(&self) -> Option<Result<cpy::Export<'_, cai_runtime::Device>, DescriptorError>> {
        let d = self.inner.device_descriptor()?;
        // SAFETY: the storage's device buffer, alive while the storage is (every export keeps
        // the storage), described by its geometry; it exports no stream.
        Some(d.map(|d| unsafe { cpy::Export::vouched(std::borrow::Cow::Owned(d)) }))
    }
    fn host(&self) -> Option<Result<cpy::Export<'_, cai_runtime::Host>, DescriptorError>> {
        let d = self.inner.host_descriptor()?;
        // SAFETY: as above, the host buffer.
        Some(d.map(|d| unsafe { cpy::Export::vouched(std::borrow::Cow::Owned(d)) }))
    }
    /// The only side, or of a mirror the one the consumer asks for (`dl_device`), else the
    /// device's unless the host side is newer.
    fn dlpack_side(&self, wants: Option<cpy::DlpackDevice>) -> cpy::Side {
        let host = if !self.inner.has_device() {
            true
        } else if !self.inner.has_host() {
            false
        } else {
            match wants {
                Some(d) => !d.is_cuda(),
                None => self.inner.sync_status() == Some(SyncStatus::HostDirty),
            }
        };
        if host {
            cpy::Side::Host
        } else {
            cpy::Side::Device
        }
    }
    /// An `AttributeError`, so that NumPy goes on to `__array__`.
    fn absent(&self, side: cpy::Side) -> String {
        match side {
            cpy::Side::Host => "this storage has no host buffer (device=\"gpu\", managed=None): use __cuda_array_interface__",
            cpy::Side::Device => "this storage has no device buffer (it lives in host memory): use __array_interface__",
        }
        .into()
    }
    fn prepare(&self, side: cpy::Side) -> PyResult<()> {
        match side {
            cpy::Side::Host => self.inner.device_to_host(false)?,
            cpy::Side::Device => self.inner.host_to_device(false)?,
        };
        Ok(())
    }
    /// The storage's own `numpy.dtype` (structured types, bf16 and datetimes exactly).
    fn numpy_dtype<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        Ok(Some(self.dtype.bind(py).clone()))
    }
    /// A storage's buffers, geometry and element type are fixed when it is made.
    fn dlpack_cache(&self) -> Option<&cpy::DlpackCache> {
        Some(&self.dlpack)
    }
    fn lends() -> bool {
        true
    }
}

/// The protocols are the generated methods: each side's, raising `AttributeError` where the
/// storage has no buffer there, and DLPack's.
#[cai_runtime::pymethods(cuda, host, exporter)]
impl PyStorage {
    /// GDP-3's data interface: `{None: host entry, "gpu": device entry}`, each with `dims`,
    /// `halo`, `acquire` (device_to_host / host_to_device) and `touch` (set_host_modified /
    /// set_device_modified).
    #[getter]
    fn __gt_data_interface__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyDict>> {
        let py = slf.py();
        let this = slf.borrow();
        let host = this.inner.host_descriptor().transpose();
        let gpu = this.inner.device_descriptor().transpose();
        let export = |e| cpy::export_error(e, "__gt_data_interface__");
        let d = GtDataDescriptor::new(
            host.map_err(export)?,
            gpu.map_err(export)?,
            Some(dim_names(this.inner.dims())),
            Some(this.current_halo().to_vec()),
        )
        .map_err(cai_gt::python::gt_error)?;
        drop(this);
        // (A storage exports no mask: nothing for a mask holder to keep.)
        cai_gt::python::gt_dict(py, &d, None, |device, kind| {
            let name = match (device, kind) {
                (GtDevice::Host, HookKind::Acquire) => "device_to_host",
                (GtDevice::Gpu, HookKind::Acquire) => "host_to_device",
                (GtDevice::Host, HookKind::Touch) => "set_host_modified",
                (GtDevice::Gpu, HookKind::Touch) => "set_device_modified",
                (_, HookKind::Release) => return Ok(None),
            };
            slf.getattr(name).map(Some)
        })
    }

    /// A NumPy view of the host buffer, or a CuPy view of a device-only storage (GDP-3: the
    /// host's wherever there is one, unlike `to_ndarray`), with NumPy's `__array__` protocol:
    /// `dtype` converts (a view when it is the storage's own), `copy` None copies only to
    /// convert, True always, False never (ValueError when converting).
    #[pyo3(signature = (dtype = None, copy = None))]
    fn __array__<'py>(
        slf: &Bound<'py, Self>,
        dtype: Option<&Bound<'py, PyAny>>,
        #[pyo3(from_py_with = args::arg::array_copy)] copy: Option<bool>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let view = Self::array_view(slf)?;
        let arr = match dtype {
            Some(d) => {
                let kwargs = PyDict::new(py);
                kwargs.set_item(pyo3::intern!(py, "copy"), false)?;
                view.call_method("astype", (dtype_arg(py, d)?,), Some(&kwargs))?
            }
            None => view.clone(),
        };
        let converted = !arr.is(&view);
        match copy {
            Some(false) if converted => Err(PyValueError::new_err(format!(
                "__array__(copy=False): unable to avoid a copy: the storage holds {} and dtype = {} \
                 needs a conversion",
                slf.borrow().dtype(py).numpy,
                arr.getattr("dtype")?
            ))),
            Some(true) if !converted => arr.call_method0("copy"),
            _ => Ok(arr),
        }
    }

    /// A NumPy view of the host buffer (after copying newer device data);
    /// `GTNoSuchBufferError` without one.
    fn to_numpy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if !slf.borrow().inner.has_host() {
            return Err(PyErr::from(StorageError::NoSuchBuffer("host")));
        }
        numpy(slf.py())?.getattr("asarray")?.call1((slf,))
    }

    /// A CuPy view of the device buffer (after copying newer host data);
    /// `GTNoSuchBufferError` without one.
    fn to_cupy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if !slf.borrow().inner.has_device() {
            return Err(PyErr::from(StorageError::NoSuchBuffer("device")));
        }
        cupy(slf.py())?.getattr("asarray")?.call1((slf,))
    }

    /// `to_cupy()` when there is a device buffer, else `to_numpy()`.
    fn to_ndarray<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if slf.borrow().inner.has_device() {
            Self::to_cupy(slf)
        } else {
            Self::to_numpy(slf)
        }
    }

    fn __getitem__<'py>(
        slf: &Bound<'py, Self>,
        key: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        if let Some(items) = basic_index(key)? {
            let this = slf.borrow();
            match this.storage().select(&items)? {
                Selected::View(v) => return Ok(this.view(py, v)?.into_bound(py).into_any()),
                Selected::Item(_) => {}
            }
        }
        // Items, and indices NumPy handles (arrays, None, booleans): through the ndarray.
        let on_device = slf.borrow().inner.has_device();
        Self::to_ndarray(slf)?.get_item(gt_index_arrays(key, on_device)?)
    }

    fn __setitem__(
        slf: &Bound<'_, Self>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let py = slf.py();
        let (has_host, has_device) = {
            let s = &slf.borrow().inner;
            (s.has_host(), s.has_device())
        };
        if let Some(items) = basic_index(key)? {
            // Validate first, so a bad index raises IndexError as for a read.
            slf.borrow().inner.select(&items)?;
        }
        // GDP-3 ("Choosing the Device"): a value with a data interface (an xarray DataArray
        // through its data) is on the GPU if it has a "gpu" entry, and is read through the
        // interface, `acquire` first; a storage value is read as the storage it is.
        let gt_value = if read_through_gt(value)? {
            Some(GtData::from_object(value, &read_options())?)
        } else {
            None
        };
        // (Asked only where it decides: a failed attribute lookup costs an exception.)
        let on_gpu = has_device
            && (!has_host
                || match &gt_value {
                    Some(gt) => gt.gpu.is_some(),
                    None => Self::value_on_gpu(value)?,
                });
        let key = gt_index_arrays(key, on_gpu)?;
        let value = match gt_value {
            Some(gt) => {
                let device_only = gt.host.is_none();
                let array = gt_ndarray(py, gt, on_gpu)?;
                if device_only && !on_gpu {
                    array.call_method0("get")?
                } else {
                    array
                }
            }
            None => value.clone(),
        };
        if on_gpu {
            let cp = cupy(py)?;
            let target = Self::to_cupy(slf)?;
            target.set_item(key, cp.getattr("asarray")?.call1((value,))?)?;
            // CuPy wrote on its current stream, which the storage's mirror copies (on the
            // legacy default stream) and its consumers (told `stream: None`) need not wait
            // for, a non-blocking one least of all: the write is done before this returns.
            cp.getattr(pyo3::intern!(py, "cuda"))?
                .call_method0(pyo3::intern!(py, "get_current_stream"))?
                .call_method0(pyo3::intern!(py, "synchronize"))?;
            if let Some(state) = slf.borrow().inner.sync_state() {
                state.set_device_modified();
            }
        } else {
            let value = match value.cast::<PyStorage>() {
                Ok(s) => Self::host_items(s)?,
                _ => value,
            };
            Self::to_numpy(slf)?.set_item(key, value)?;
            if let Some(state) = slf.borrow().inner.sync_state() {
                state.set_host_modified();
            }
        }
        Ok(())
    }

    /// The truth value as NumPy (CuPy, for a device storage) gives it: the item's for a
    /// storage of one item, a ValueError for any other size. Without this, Python would ask
    /// `__len__`, and a storage holding a single 0.0 would be true.
    fn __bool__(slf: &Bound<'_, Self>) -> PyResult<bool> {
        Self::to_ndarray(slf)?.is_truthy()
    }

    fn __len__(&self) -> PyResult<usize> {
        self.inner
            .shape()
            .first()
            .copied()
            .ok_or_else(|| PyTypeError::new_err("len() of a 0-d storage"))
    }

    /// Iterates over the first dimension (`storage[0]`, `storage[1]`...), as NumPy does; a
    /// TypeError for a 0-d storage, as NumPy's (without this, Python's fallback iteration
    /// would end at once, as if it were empty).
    fn __iter__<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        if slf.borrow().inner.shape().is_empty() {
            return Err(PyTypeError::new_err("iteration over a 0-d storage"));
        }
        // SAFETY: `slf` is a live object; PySeqIter_New returns a new reference to an iterator
        // calling its `__getitem__` with 0, 1... until IndexError, or NULL with an exception.
        unsafe { Bound::from_owned_ptr_or_err(slf.py(), pyo3::ffi::PySeqIter_New(slf.as_ptr())) }
    }

    /// A new storage with the same parameters and a copy of the data (its own sync state).
    fn copy(&self, py: Python<'_>) -> PyResult<Py<PyStorage>> {
        self.inner.device_to_host(false)?;
        let c = self.storage().copy()?;
        self.view(py, c)
    }

    /// Pickling, as NumPy and CuPy pickle their arrays: by value. The items go as a NumPy
    /// array ([`Self::host_items`]) and come back through `storage(items, **parameters)`
    /// with this storage's parameters (layout, halo, dims, alignment, device, managed), so
    /// the copy has the same type and geometry in a buffer of its own, on the same device
    /// (`"gpu:N"`, as PyTorch keeps a tensor's device; `copy.copy` and `deepcopy` keep it too).
    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py>> {
        let py = slf.py();
        let parameters = PyDict::new(py);
        for name in [
            "layout",
            "halo",
            "dims",
            "alignment_size",
            "aligned_index",
            "defaults",
            "device",
            "managed",
        ] {
            parameters.set_item(name, slf.getattr(name)?)?;
        }
        if let Some(id) = slf.borrow().inner.device_id() {
            parameters.set_item("device", format!("gpu:{id}"))?;
        }
        let rebuild = REBUILD_STORAGE
            .get(py)
            .ok_or_else(|| PyTypeError::new_err("cannot pickle a storage: cai is not initialized"))?
            .bind(py)
            .clone();
        Ok((rebuild, (Self::host_items(slf)?, parameters)))
    }

    fn __copy__(&self, py: Python<'_>) -> PyResult<Py<PyStorage>> {
        self.copy(py)
    }

    #[pyo3(signature = (memo = None))]
    fn __deepcopy__(
        &self,
        py: Python<'_>,
        memo: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Py<PyStorage>> {
        let _ = memo;
        self.copy(py)
    }

    /// A view with the dimensions permuted: `transpose()`, `transpose(1, 0, 2)` or
    /// `transpose((1, 0, 2))` (reversed when no axes are given).
    #[pyo3(signature = (*axes))]
    fn transpose(&self, py: Python<'_>, axes: &Bound<'_, PyTuple>) -> PyResult<Py<PyStorage>> {
        let axes: Option<PerDim<usize>> = match axes.len() {
            0 => None,
            1 if axes.get_item(0)?.is_none() => None,
            1 => {
                // One sequence of axes, or one axis; an error of the item's own `__iter__`
                // propagates.
                let first = axes.get_item(0)?;
                match first.try_iter() {
                    Ok(_) => Some(sizes("axes", &first)?),
                    Err(e) if e.is_instance_of::<PyTypeError>(py) => {
                        Some(sizes("axes", axes.as_any())?)
                    }
                    Err(e) => return Err(e),
                }
            }
            _ => Some(sizes("axes", axes.as_any())?),
        };
        let t = self.storage().transpose(axes.as_deref())?;
        self.view(py, t)
    }

    /// `transpose()`.
    #[getter(T)]
    fn t(&self, py: Python<'_>) -> PyResult<Py<PyStorage>> {
        let t = self.storage().transpose(None)?;
        self.view(py, t)
    }

    /// A view of the domain: the halo removed, `[0, ..., 0]` its first point.
    #[getter]
    fn domain_view(&self, py: Python<'_>) -> PyResult<Py<PyStorage>> {
        self.view(py, self.storage().domain_view())
    }

    /// The shape.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.shape())
    }

    /// Byte strides.
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.strides())
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.inner.shape().len()
    }

    /// Number of items.
    #[getter]
    fn size(&self) -> usize {
        self.inner.shape().iter().product()
    }

    /// Bytes of the items (padding excluded).
    #[getter]
    fn nbytes(&self) -> usize {
        self.inner.nbytes()
    }

    /// Bytes per item.
    #[getter]
    fn itemsize(&self) -> usize {
        self.inner.element().itemsize()
    }

    /// The NumPy dtype.
    #[getter(dtype)]
    fn get_dtype(&self, py: Python<'_>) -> Py<PyAny> {
        self.dtype.clone_ref(py)
    }

    /// (start, end) halo per dimension.
    #[getter]
    fn halo<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.current_halo())
    }

    /// Sets the halo (ints or (start, end) pairs); the aligned point does not move.
    #[setter]
    fn set_halo(&self, value: &Bound<'_, PyAny>) -> PyResult<()> {
        let halo = args::halo(value)?;
        // (Checked once, here: the storage kept is whole.)
        let mut s = self.inner.clone();
        s.set_halo(halo)?;
        *self.lock_halo_set() = Some(s);
        Ok(())
    }

    /// The semantic dims.
    #[getter]
    fn dims<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, dim_names(self.inner.dims()))
    }

    /// GT4Py's `__gt_dims__`: the dims, as GT4Py names them (`"I"`, `"J"`, `"K"`, `"0"`...),
    /// which its stencils read to order a field's axes.
    #[getter]
    fn __gt_dims__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        self.dims(py)
    }

    /// GT4Py's `__gt_origin__`: the first item of the compute domain, the halo's start in
    /// every dimension, which its stencils take as the field's origin when none is given. In
    /// the order they apply it: I, J, K, then the data dimensions
    /// ([`cai_gt::python::gt4py_order`]; the storage's own order when its dims are in that
    /// order).
    #[getter]
    fn __gt_origin__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let halo = self.current_halo();
        let order = cai_gt::python::gt4py_order(self.inner.dims());
        PyTuple::new(py, order.into_iter().map(|axis| halo[axis].0))
    }

    /// The stride order (0: largest stride).
    #[getter]
    fn layout<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.inner.layout_order())
    }

    /// The alignment the buffer was allocated with, in bytes.
    #[getter]
    fn alignment_size(&self) -> usize {
        self.inner.info().alignment_size
    }

    /// The aligned index (None for views).
    #[getter]
    fn aligned_index<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyTuple>>> {
        self.inner
            .info()
            .aligned_index
            .as_ref()
            .map(|a| PyTuple::new(py, a))
            .transpose()
    }

    /// The `defaults` preset used, if any.
    #[getter]
    fn defaults(&self) -> Option<&'static str> {
        self.inner.info().defaults.map(Preset::name)
    }

    /// `"gpu"` when the storage has a device buffer, else None.
    #[getter]
    fn device(&self) -> Option<&'static str> {
        self.inner.has_device().then_some("gpu")
    }

    /// The device the device buffer is on (`device="gpu:N"` made it there, `"gpu"` on the
    /// device current then), or None without a device buffer.
    #[getter]
    fn device_id(&self) -> Option<u32> {
        self.inner.device_id()
    }

    /// None, "gt4py" or "cuda".
    #[getter]
    fn managed(&self) -> Option<&'static str> {
        match self.inner.buffers().managed() {
            Managed::None => None,
            Managed::Gt4Py => Some("gt4py"),
            Managed::Cuda => Some("cuda"),
        }
    }

    /// The host buffer as a memoryview (None without one).
    #[getter]
    fn data<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if !slf.borrow().inner.has_host() {
            return Ok(None);
        }
        Self::to_numpy(slf)?.getattr("data").map(Some)
    }

    /// The device buffer: CuPy's `MemoryPointer` when CuPy is installed, else the address.
    #[getter]
    fn device_data<'py>(slf: &Bound<'py, Self>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let py = slf.py();
        let Some(ptr) = slf.borrow().inner.device_ptr() else {
            return Ok(None);
        };
        match py.import("cupy") {
            Ok(_) => Self::to_cupy(slf)?.getattr("data").map(Some),
            Err(_) => Ok(Some(ptr.into_pyobject(py)?.into_any())),
        }
    }

    /// The shared SyncState (mirrored storages), else None.
    #[getter]
    fn sync_state(&self) -> Option<PySyncState> {
        self.inner.sync_state().map(|s| PySyncState(s.clone()))
    }

    /// Copies device to host if the device was modified (or `force`); no action unless
    /// mirrored.
    #[pyo3(signature = (*, force = false))]
    fn device_to_host(&self, #[pyo3(from_py_with = args::arg::force)] force: bool) -> PyResult<()> {
        self.inner.device_to_host(force)?;
        Ok(())
    }

    /// Copies host to device if the host was modified (or `force`); no action unless mirrored.
    #[pyo3(signature = (*, force = false))]
    fn host_to_device(&self, #[pyo3(from_py_with = args::arg::force)] force: bool) -> PyResult<()> {
        self.inner.host_to_device(force)?;
        Ok(())
    }

    /// Copies whichever side was modified to the other.
    fn synchronize(&self) -> PyResult<()> {
        self.inner.synchronize()?;
        Ok(())
    }

    /// Marks the host buffer modified: the next device read copies it first.
    fn set_host_modified(&self) {
        if let Some(s) = self.inner.sync_state() {
            s.set_host_modified();
        }
    }

    /// Marks the device buffer modified: the next host read copies it first.
    fn set_device_modified(&self) {
        if let Some(s) = self.inner.sync_state() {
            s.set_device_modified();
        }
    }

    /// Marks both buffers equal (after a manual synchronization).
    fn set_synchronized(&self) {
        if let Some(s) = self.inner.sync_state() {
            s.set_synchronized();
        }
    }

    /// `CPUStorage(shape=(2, 3), dtype=float64, ...)`: the class says where the buffers are.
    fn __repr__(slf: &Bound<'_, Self>) -> String {
        let this = slf.borrow();
        let dtype = this
            .dtype
            .bind(slf.py())
            .str()
            .map(|s| s.to_string())
            .unwrap_or_default();
        let class = slf
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "Storage".into());
        // The attributes as Python shows them, whole (`show` would cut them for a message).
        let py = slf.py();
        let tuple = |t: PyResult<Bound<'_, PyTuple>>| {
            t.and_then(|t| t.as_any().repr().map(|r| r.to_string()))
                .unwrap_or_else(|_| "?".into())
        };
        format!(
            "{class}(shape={}, dtype={dtype}, halo={}, dims={}, layout={})",
            tuple(this.shape(py)),
            tuple(this.halo(py)),
            tuple(this.dims(py)),
            tuple(this.layout(py)),
        )
    }
}

/// What `Storage.__reduce__` gives pickle: the function that remakes a storage and its
/// arguments (the items, the parameters).
type Reduced<'py> = (Bound<'py, PyAny>, (Bound<'py, PyAny>, Bound<'py, PyDict>));

/// `_rebuild_storage` as the module holds it (what pickle finds again by its module and
/// name).
pub(super) static REBUILD_STORAGE: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// Unpickles a storage (`Storage.__reduce__`): `storage(items, **parameters)`.
#[pyfunction(name = "_rebuild_storage")]
pub(super) fn rebuild_storage(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    parameters: &Bound<'_, PyDict>,
) -> PyResult<Py<PyStorage>> {
    storage(py, Some(items), None, None, true, None, Some(parameters))
}
