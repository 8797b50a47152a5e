//! NumPy's `__array_struct__`: the array interface as a C struct in a capsule (NumPy's
//! "array interface protocol", the C-struct access). NumPy looks for it before
//! `__array_interface__` and reads it without a dict to build or parse: `numpy.asarray` of a
//! host storage went from 0.70 us to 0.28 us, and is 0.55-0.58x NumPy reading an already built
//! dict (`benches/storage_bench.py`).
//!
//! The struct's `descr` holds the storage's own `numpy.dtype` (flag `ARR_HAS_DESCR`), which
//! NumPy turns back into the dtype with `PyArray_DescrConverter`: datetime units, byte order
//! and structured fields come back exactly. `typekind`, `itemsize` and `NOTSWAPPED` still
//! describe a plain element for a reader that ignores `descr`.
//!
//! NumPy copies shape and strides into the new array and keeps the exporting object (and, in
//! NumPy 2, the capsule) as the array's base, so the memory outlives the array.

use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{c_char, c_int, c_void};

use cai_runtime::typestr::{ByteOrder, TypeStr};

/// `PyArrayInterface` of `numpy/ndarraytypes.h`.
#[repr(C)]
struct PyArrayInterface {
    /// Always 2 (NumPy's sanity check).
    two: c_int,
    nd: c_int,
    typekind: c_char,
    itemsize: c_int,
    flags: c_int,
    shape: *const isize,
    strides: *const isize,
    data: *mut c_void,
    descr: *mut ffi::PyObject,
}

// NumPy's flag values (`numpy/ndarraytypes.h`).
const NPY_ARRAY_ALIGNED: c_int = 0x0100;
const NPY_ARRAY_NOTSWAPPED: c_int = 0x0200;
const NPY_ARRAY_WRITEABLE: c_int = 0x0400;
const NPY_ARR_HAS_DESCR: c_int = 0x0800;

/// What the capsule owns: the struct first (the capsule's pointer is the struct's), then what
/// its pointers point into.
#[repr(C)]
struct Contents {
    interface: PyArrayInterface,
    /// `nd` extents, then `nd` byte strides.
    dims: Box<[isize]>,
    /// The reference `interface.descr` borrows.
    dtype: Py<PyAny>,
}

/// An array seen through `__array_struct__`.
pub struct ArrayStruct<'a, 'py> {
    pub shape: &'a [usize],
    pub strides: &'a [isize],
    /// Address of item `[0, ..., 0]`.
    pub data: u64,
    pub readonly: bool,
    pub typestr: TypeStr,
    /// The `numpy.dtype` of the items.
    pub dtype: &'a Bound<'py, PyAny>,
}

impl<'py> ArrayStruct<'_, 'py> {
    /// The capsule (unnamed, as NumPy asks for it).
    pub fn into_capsule(self) -> PyResult<Bound<'py, PyAny>> {
        let py = self.dtype.py();
        let too_large = |what: &str, n: usize| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "__array_struct__: {what} {n} does not fit a C int"
            ))
        };
        let nd =
            c_int::try_from(self.shape.len()).map_err(|_| too_large("ndim", self.shape.len()))?;
        let itemsize = self.typestr.itemsize();
        let itemsize = c_int::try_from(itemsize).map_err(|_| too_large("itemsize", itemsize))?;
        let mut dims = Vec::with_capacity(2 * self.shape.len());
        for &n in self.shape {
            dims.push(isize::try_from(n).map_err(|_| too_large("extent", n))?);
        }
        dims.extend_from_slice(self.strides);
        let dims = dims.into_boxed_slice();
        let swapped = matches!(
            self.typestr.byte_order(),
            ByteOrder::Little | ByteOrder::Big
        ) && self.typestr.byte_order() != ByteOrder::HOST;
        let mut flags = NPY_ARRAY_ALIGNED | NPY_ARR_HAS_DESCR;
        if !swapped {
            flags |= NPY_ARRAY_NOTSWAPPED;
        }
        if !self.readonly {
            flags |= NPY_ARRAY_WRITEABLE;
        }
        let contents = Box::new(Contents {
            interface: PyArrayInterface {
                two: 2,
                nd,
                typekind: self.typestr.kind().as_char() as c_char,
                itemsize,
                flags,
                shape: dims.as_ptr(),
                strides: dims[self.shape.len()..].as_ptr(),
                data: self.data as usize as *mut c_void,
                descr: self.dtype.as_ptr(),
            },
            // Moving the box does not move the slice its pointers point into.
            dims,
            dtype: self.dtype.clone().unbind(),
        });
        let raw = Box::into_raw(contents);
        // SAFETY: `raw` is a live `Contents` (its `interface` first, `#[repr(C)]`), owned by
        // the capsule from here on and freed by `destroy`, which is its destructor. The name is
        // NULL because NumPy asks for the pointer with a NULL name.
        let capsule = unsafe { ffi::PyCapsule_New(raw.cast(), std::ptr::null(), Some(destroy)) };
        if capsule.is_null() {
            // SAFETY: the capsule was not made, so `raw` is still only ours.
            drop(unsafe { Box::from_raw(raw) });
        }
        // SAFETY: a new reference, or NULL with the exception set.
        unsafe { Bound::from_owned_ptr_or_err(py, capsule) }
    }
}

/// The capsule's destructor: frees its `Contents`.
unsafe extern "C" fn destroy(capsule: *mut ffi::PyObject) {
    // SAFETY: CPython calls this once, with the capsule being destroyed, whose pointer (name
    // NULL) is the `Contents` `into_capsule` leaked into it.
    let raw = unsafe { ffi::PyCapsule_GetPointer(capsule, std::ptr::null()) };
    if raw.is_null() {
        return;
    }
    // A capsule is destroyed by CPython with the thread attached; `attach` lets PyO3 release
    // the dtype reference now rather than queue it.
    Python::attach(|_| {
        // SAFETY: see above; nothing else frees it.
        drop(unsafe { Box::from_raw(raw.cast::<Contents>()) });
    });
}
