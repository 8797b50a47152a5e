//! Indexing a storage: basic indices (ints, slices, `...`) make views in Rust; anything else
//! goes to NumPy or CuPy, with GDP-3's data-interface objects read as arrays.

use super::{cupy, numpy, read_options, read_through_gt};
use crate::args::{self, is_int, show};
use cai_gt::python::{GtData, HookKind};
use cai_gt::{GtDevice, IndexItem};
use pyo3::exceptions::{PyIndexError, PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyEllipsis, PySlice, PyTuple};

/// A buffer read as GDP-3 says a consumer reads one, its `acquire` called first: the device
/// entry when `on_device` and there is one, else the host entry (a NumPy array), else the
/// device entry (a CuPy array).
pub(super) fn gt_ndarray<'py>(
    py: Python<'py>,
    mut gt: GtData,
    on_device: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let device = match (&gt.host, &gt.gpu) {
        (_, Some(_)) if on_device => GtDevice::Gpu,
        (Some(_), _) => GtDevice::Host,
        _ => GtDevice::Gpu,
    };
    gt.call(py, device, HookKind::Acquire)?;
    match (device, gt.host.take(), gt.gpu.take()) {
        (GtDevice::Host, Some(h), _) => numpy(py)?
            .getattr("asarray")?
            .call1((crate::import::new_host_view(py, h)?,)),
        (_, _, Some(g)) => cupy(py)?
            .getattr("asarray")?
            .call1((crate::import::new_cuda_view(py, g)?,)),
        _ => Err(PyValueError::new_err("the data describes no buffer")),
    }
}

/// An index key for NumPy (CuPy, `on_device`), with GDP-3's addition: wherever an array may
/// be, so may any object with a data interface, read as GDP-3 says a consumer reads one (see
/// [`read_through_gt`]) from the buffer on the indexed side, else the other. Everything else
/// passes as it is, for NumPy or CuPy to read or refuse.
pub(super) fn gt_index_arrays<'py>(
    key: &Bound<'py, PyAny>,
    on_device: bool,
) -> PyResult<Bound<'py, PyAny>> {
    let py = key.py();
    // What passes as it is, checked cheapest first: item reads come this way.
    let plain = |k: &Bound<'py, PyAny>| -> PyResult<bool> {
        Ok(k.is_none()
            || k.is_instance_of::<PySlice>()
            || k.is_instance_of::<PyEllipsis>()
            || !read_through_gt(k)?)
    };
    let read = |k: Bound<'py, PyAny>| -> PyResult<Bound<'py, PyAny>> {
        if plain(&k)? {
            return Ok(k);
        }
        gt_ndarray(py, GtData::from_object(&k, &read_options())?, on_device)
    };
    let Ok(t) = key.cast::<PyTuple>() else {
        return read(key.clone());
    };
    for k in t.iter_borrowed() {
        if !plain(&k)? {
            let items = t.iter().map(read).collect::<PyResult<Vec<_>>>()?;
            return Ok(PyTuple::new(py, items)?.into_any());
        }
    }
    Ok(key.clone())
}

/// Parses a basic index; `None` when the key needs NumPy (arrays, `None`, booleans...).
pub(super) fn basic_index(key: &Bound<'_, PyAny>) -> PyResult<Option<Vec<IndexItem>>> {
    let one = |k: &Bound<'_, PyAny>| -> PyResult<Option<IndexItem>> {
        if k.is_instance_of::<PyEllipsis>() {
            return Ok(Some(IndexItem::Ellipsis));
        }
        if let Ok(s) = k.cast::<PySlice>() {
            let part = |name: &str| -> PyResult<Option<isize>> {
                let v = s.getattr(name)?;
                if v.is_none() {
                    return Ok(None);
                }
                // A bool is a slice index, as in Python and NumPy (`a[True:]`).
                if !args::scalar(&v) {
                    return Err(PyTypeError::new_err(format!(
                        "slice indices must be integers or None, not {}",
                        show(&v)
                    )));
                }
                match v.extract::<isize>() {
                    Ok(n) => Ok(Some(n)),
                    // Beyond the index range: Python clamps it (`slice.indices`), and so
                    // does NumPy; the slice then starts, stops or steps past every item.
                    Err(e) if e.is_instance_of::<PyOverflowError>(v.py()) => {
                        Ok(Some(if v.lt(0)? { isize::MIN } else { isize::MAX }))
                    }
                    Err(e) => Err(e),
                }
            };
            return Ok(Some(IndexItem::Slice {
                start: part("start")?,
                stop: part("stop")?,
                step: part("step")?,
            }));
        }
        if k.is_instance_of::<pyo3::types::PyBool>() {
            return Ok(None);
        }
        if is_int(k) {
            // PyO3 reads ints through `__index__`, so NumPy integers work too.
            return match k.extract() {
                Ok(i) => Ok(Some(IndexItem::Int(i))),
                Err(e) if e.is_instance_of::<PyOverflowError>(k.py()) => {
                    Err(PyIndexError::new_err(format!(
                        "index {k} is out of bounds: no axis is that long"
                    )))
                }
                Err(e) => Err(e),
            };
        }
        Ok(None)
    };
    match key.cast::<PyTuple>() {
        Ok(t) => {
            let mut out = Vec::with_capacity(t.len());
            for k in t.iter() {
                match one(&k)? {
                    Some(i) => out.push(i),
                    None => return Ok(None),
                }
            }
            Ok(Some(out))
        }
        Err(_) => Ok(one(key)?.map(|i| vec![i])),
    }
}
