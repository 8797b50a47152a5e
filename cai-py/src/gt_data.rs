//! Reading any object as GDP-3 says: `gt_data(obj)` and the `GtDataView` it returns.

use crate::args::arg;
use crate::import::{CudaArrayView, HostArrayView, cuda_of, new_cuda_view, new_host_view};
use cai_gt::GtDevice;
use cai_gt::python::{GtData, HookKind};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// An object read as GDP-3 says (`cai.gt_data(obj)`): its `__gt_data_interface__`, or else its
/// DLPack, or else its `__array_interface__` (device None) and `__cuda_array_interface__`
/// ("gpu"): `host` and `gpu` views, `dims`, `halo`, and the entries' hooks.
#[pyclass(module = "cai", frozen)]
pub struct GtDataView {
    inner: GtData,
    host: Option<Py<HostArrayView>>,
    gpu: Option<Py<CudaArrayView>>,
}

fn gt_device(device: Option<&str>) -> GtDevice {
    match device {
        None => GtDevice::Host,
        Some(_) => GtDevice::Gpu,
    }
}

#[pymethods]
impl GtDataView {
    /// The host buffer (`None` entry), as an imported view.
    #[getter]
    fn host(&self, py: Python<'_>) -> Option<Py<HostArrayView>> {
        self.host.as_ref().map(|h| h.clone_ref(py))
    }

    /// The device buffer (`"gpu"` entry), as an imported view.
    #[getter]
    fn gpu(&self, py: Python<'_>) -> Option<Py<CudaArrayView>> {
        self.gpu.as_ref().map(|g| g.clone_ref(py))
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let show = |v: Option<Bound<'_, PyAny>>| -> PyResult<String> {
            Ok(match v {
                Some(v) => v.repr()?.to_string(),
                None => "None".to_owned(),
            })
        };
        let host = show(self.host.as_ref().map(|h| h.bind(py).clone().into_any()))?;
        let gpu = show(self.gpu.as_ref().map(|g| g.bind(py).clone().into_any()))?;
        let dims = show(
            self.dims()
                .map(|d| PyTuple::new(py, d))
                .transpose()?
                .map(Bound::into_any),
        )?;
        let halo = show(
            self.halo()
                .map(|h| PyTuple::new(py, h))
                .transpose()?
                .map(Bound::into_any),
        )?;
        let from_gt = if self.inner.from_gt { "True" } else { "False" };
        Ok(format!(
            "GtDataView(host={host}, gpu={gpu}, dims={dims}, halo={halo}, from_gt={from_gt})"
        ))
    }

    /// `dims`, when given.
    #[getter]
    fn dims(&self) -> Option<Vec<String>> {
        self.inner.dims.clone()
    }

    /// `halo`, when given.
    #[getter]
    fn halo(&self) -> Option<Vec<(usize, usize)>> {
        self.inner.halo.clone()
    }

    /// Whether `__gt_data_interface__` was read (False: the array-interface fallback).
    #[getter(from_gt)]
    fn read_through_gt(&self) -> bool {
        self.inner.from_gt
    }

    /// Calls the entry's `acquire` (no action if absent).
    #[pyo3(signature = (device = None))]
    fn acquire(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg::device)] device: Option<&str>,
    ) -> PyResult<()> {
        self.inner.call(py, gt_device(device), HookKind::Acquire)
    }

    /// Calls the entry's `touch` (no action if absent).
    #[pyo3(signature = (device = None))]
    fn touch(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg::device)] device: Option<&str>,
    ) -> PyResult<()> {
        self.inner.call(py, gt_device(device), HookKind::Touch)
    }

    /// Calls the entry's `release` (no action if absent). For `"gpu"`, the device view is
    /// released first (`CudaArrayView.release()`): the producer's stream waits for the work
    /// enqueued on the consumer's stream, so the producer's hook, and its next write, come
    /// after the consumer's reads.
    #[pyo3(signature = (device = None))]
    fn release(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = arg::device)] device: Option<&str>,
    ) -> PyResult<()> {
        let device = gt_device(device);
        if let (GtDevice::Gpu, Some(gpu)) = (device, &self.gpu) {
            cuda_of(gpu.bind(py))?.release()?;
        }
        self.inner.call(py, device, HookKind::Release)
    }
}

/// Reads any object `obj` as GDP-3 says: `__gt_data_interface__` first, else DLPack, else the
/// array interfaces: a `GtDataView`. The `"gpu"` entry is imported as `as_cuda_array` imports,
/// with the same keywords.
#[doc = crate::import::import_keywords!()]
#[pyfunction]
#[pyo3(signature = (obj, sync = true, *, stream = None, mode = "enqueue", check_pointer = true))]
fn gt_data(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    #[pyo3(from_py_with = arg::sync)] sync: bool,
    stream: Option<&Bound<'_, PyAny>>,
    #[pyo3(from_py_with = arg::mode)] mode: &str,
    #[pyo3(from_py_with = arg::check_pointer)] check_pointer: bool,
) -> PyResult<GtDataView> {
    let options = crate::cuda::import_options(sync, stream, mode, check_pointer)?;
    let mut inner = GtData::from_object(obj, &options)?;
    let host = inner
        .host
        .take()
        .map(|h| new_host_view(py, h))
        .transpose()?;
    let gpu = inner.gpu.take().map(|g| new_cuda_view(py, g)).transpose()?;
    Ok(GtDataView { inner, host, gpu })
}

/// Adds these to the module.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<GtDataView>()?;
    m.add_function(wrap_pyfunction!(gt_data, m)?)?;
    Ok(())
}
