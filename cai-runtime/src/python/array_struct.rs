//! NumPy's `__array_struct__`: the array interface as a C struct in a capsule (NumPy's
//! "array interface protocol", its C-struct access). NumPy looks for it before
//! `__array_interface__` and reads it with no dict to build or parse: `numpy.asarray` of a host
//! storage went from 0.70 us to 0.24 us (`benches/storage_bench.py`), of the derived example
//! `Grid` from 0.68 us to 0.41 us (`benches/python_bench.py`). The derives' `host`
//! property comes with it ([`array_struct`]).
//!
//! The struct's `descr` (flag `ARR_HAS_DESCR`) is what NumPy gives `PyArray_DescrConverter`: a
//! storage's own `numpy.dtype`; for a descriptor, what NumPy makes of its dict: the
//! `numpy.dtype` of its `descr` list for a void type string whose list is not the default
//! `[('', typestr)]` (NumPy's refusal of the list raised here, as the dict's is), else of its
//! type string (ml_dtypes' for an extended type; the string itself where NumPy cannot be
//! imported).
//! Datetime units, byte order and fields come back exactly. `typekind`, `itemsize` and `NOTSWAPPED` still describe a plain element for a
//! reader that ignores `descr`.
//!
//! NumPy copies shape and strides into the new array and keeps the exporting object (and, in
//! NumPy 2, the capsule) as the array's base. The capsule itself holds the exporting object, as
//! NumPy's own capsules hold their array: a consumer that keeps only the capsule (reading it
//! after the exporter is dropped) still reads live memory.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyString;
use std::ffi::{c_char, c_int, c_void};

use super::Memo;
use super::export::{descr_dtype, descr_list};
use crate::descriptor::HostArrayDescriptor;
use crate::element::Extended;
use crate::layout::Layout;
use crate::structured::{Descr, DescrFormat};
use crate::typestr::{ByteOrder, Kind, TypeStr};

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
/// its pointers point into. `interface.descr` and `exporter` are strong references, released
/// by `destroy`.
#[repr(C)]
struct Contents {
    interface: PyArrayInterface,
    /// `nd` extents, then `nd` byte strides.
    dims: Box<[isize]>,
    /// The object whose memory `interface.data` points into.
    exporter: *mut ffi::PyObject,
}

/// An array as `__array_struct__` describes it.
pub(crate) struct ArrayStruct<'a, 'py> {
    /// Extents and byte strides (one per extent: the capsule never leaves them out, unlike the
    /// dict).
    pub layout: &'a Layout,
    /// Address of item `[0, ..., 0]`.
    pub data: u64,
    /// Consumers must not write.
    pub readonly: bool,
    /// The element's type string.
    pub typestr: TypeStr,
    /// What NumPy makes the dtype from: a `numpy.dtype`, a type string, or a `descr` list.
    pub descr: &'a Bound<'py, PyAny>,
    /// The object whose memory `data` points into: the capsule keeps it alive.
    pub exporter: &'a Bound<'py, PyAny>,
}

impl<'py> ArrayStruct<'_, 'py> {
    /// The capsule (unnamed, as NumPy asks for it). Like a descriptor dict, it describes:
    /// NumPy trusts `data` as it trusts the dict's, so the address must be the exporter's
    /// memory (as the derives' [`crate::HostMemory`] fields promise).
    pub(crate) fn into_capsule(self) -> PyResult<Bound<'py, PyAny>> {
        let py = self.descr.py();
        let too_large = |what: &str, n: usize| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "__array_struct__: {what} {n} does not fit a C int"
            ))
        };
        let (shape, strides) = (self.layout.shape(), self.layout.strides());
        let nd = c_int::try_from(shape.len()).map_err(|_| too_large("ndim", shape.len()))?;
        let itemsize = self.typestr.itemsize();
        let itemsize = c_int::try_from(itemsize).map_err(|_| too_large("itemsize", itemsize))?;
        let mut dims = Vec::with_capacity(2 * shape.len());
        for &n in shape {
            dims.push(isize::try_from(n).map_err(|_| too_large("extent", n))?);
        }
        dims.extend_from_slice(strides);
        let dims = dims.into_boxed_slice();
        let swapped = matches!(
            self.typestr.byte_order(),
            ByteOrder::Little | ByteOrder::Big
        ) && self.typestr.byte_order() != ByteOrder::HOST;
        // The protocols give an array without items the address 0, but NumPy takes a NULL
        // `data` here for "allocate": its array would be memory of its own, writable whatever
        // the flags say. No item is read at a zero-size array's address, so it gets one that
        // is not NULL, aligned for any item (the item size rounded up to a power of two),
        // and NumPy keeps the flags (read-only above all) and the exporter as the base.
        let data = match self.data {
            0 if shape.contains(&0) => (itemsize.max(1) as usize).next_power_of_two(),
            ptr => ptr as usize,
        };
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
                strides: dims[shape.len()..].as_ptr(),
                data: data as *mut c_void,
                // A new reference, owned by the capsule.
                descr: self.descr.clone().into_ptr(),
            },
            // Moving the box does not move the slice its pointers point into.
            dims,
            // A new reference, owned by the capsule.
            exporter: self.exporter.clone().into_ptr(),
        });
        let raw = Box::into_raw(contents);
        // SAFETY: `raw` is a live `Contents` (its `interface` first, `#[repr(C)]`), owned by
        // the capsule from here on and freed by `destroy`, which is its destructor. The name is
        // NULL because NumPy asks for the pointer with a NULL name.
        let capsule = unsafe { ffi::PyCapsule_New(raw.cast(), std::ptr::null(), Some(destroy)) };
        if capsule.is_null() {
            // SAFETY: the capsule was not made, so `raw` and its reference are still only ours.
            unsafe { release(raw) };
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
    if !raw.is_null() {
        // SAFETY: as above; nothing else frees it.
        unsafe { release(raw.cast()) };
    }
}

/// Frees `raw` and releases its `descr` reference with the C API, not through PyO3: a capsule
/// can be destroyed while the interpreter shuts down (an array kept in a module global), when
/// PyO3 refuses to attach (a panic, which cannot unwind out of a destructor: an abort). CPython
/// destroys objects with the thread attached.
///
/// # Safety
/// `raw` came from `Box::into_raw` in `into_capsule`, is freed nowhere else, and the thread is
/// attached.
unsafe fn release(raw: *mut Contents) {
    // SAFETY: this function's contract.
    let contents = unsafe { Box::from_raw(raw) };
    // SAFETY: `descr` and `exporter` are the strong references `into_capsule` took,
    // released once, here.
    unsafe {
        ffi::Py_DecRef(contents.interface.descr);
        ffi::Py_DecRef(contents.exporter);
    }
}

/// Recently used `numpy.dtype`s by type string: NumPy makes a dtype from a dtype object at
/// once, but parses a string each time (~0.3 us of a ~0.6 us `numpy.asarray`).
static DTYPES: Memo<TypeStr, Py<PyAny>, 16> = Memo::new();

/// `numpy.dtype(typestr)`, remembered; the type string itself where NumPy cannot be imported
/// (a consumer other than NumPy reading the struct). An extended type's is ml_dtypes' where it
/// can be imported ([`extended_dtype`]).
fn numpy_dtype(py: Python<'_>, typestr: TypeStr) -> PyResult<Bound<'_, PyAny>> {
    if let Some(dtype) = DTYPES.get(|t| *t == typestr, |d| d.bind(py).clone()) {
        return Ok(dtype);
    }
    let text = PyString::new(py, &typestr.to_string()).into_any();
    let Ok(numpy) = py.import("numpy") else {
        return Ok(text);
    };
    let own = match typestr.extended_type() {
        Some(e) => extended_dtype(py, e)?,
        None => None,
    };
    let dtype = match own {
        Some(dtype) => dtype,
        None => numpy.getattr("dtype")?.call1((text,))?,
    };
    DTYPES.insert(typestr, dtype.clone().unbind());
    Ok(dtype)
}

/// ml_dtypes' `numpy.dtype` of `e` (`numpy.dtype(ml_dtypes.bfloat16)`), or `None` where
/// ml_dtypes is not installed (or has no such type): then `e` is its opaque bytes. Other errors
/// (a broken installation) propagate.
pub fn extended_dtype(py: Python<'_>, e: Extended) -> PyResult<Option<Bound<'_, PyAny>>> {
    let module = match py.import("ml_dtypes") {
        Ok(m) => m,
        Err(err) if err.is_instance_of::<pyo3::exceptions::PyImportError>(py) => return Ok(None),
        Err(err) => return Err(err),
    };
    let Some(scalar) = module.getattr_opt(e.name())? else {
        return Ok(None);
    };
    let dtype = py.import("numpy")?.getattr("dtype")?.call1((scalar,))?;
    // Only what is the type (its name and size): a module of that name whose `bfloat16` were
    // float32 would otherwise have NumPy read four bytes an item over two-byte items.
    Ok((extended_of(&dtype)? == Some(e)).then_some(dtype))
}

/// The extended type a `numpy.dtype` is: ml_dtypes' (its `name`, no fields, the type's size;
/// ml_dtypes gives its types kind `V`, except `float8_e5m2`, whose `str` is `<f1`), else
/// `None`.
pub fn extended_of(dtype: &Bound<'_, PyAny>) -> PyResult<Option<Extended>> {
    let py = dtype.py();
    // A byte-swapped one is not the type: its bytes would be read as the native type's.
    if !dtype.getattr(pyo3::intern!(py, "fields"))?.is_none()
        || !dtype.getattr(pyo3::intern!(py, "isnative"))?.is_truthy()?
    {
        return Ok(None);
    }
    let name = dtype.getattr(pyo3::intern!(py, "name"))?;
    let Some(e) = name.extract::<&str>().ok().and_then(Extended::from_name) else {
        return Ok(None);
    };
    let size: usize = dtype.getattr(pyo3::intern!(py, "itemsize"))?.extract()?;
    Ok((e.itemsize() == size).then_some(e))
}

/// The `descr` that says what the items are, as NumPy reads a dict: that of a void type string
/// only, and only where it is not the default `[('', typestr)]` (`<i4` with a `descr` of fields
/// is int32 to NumPy; `|V4` with `[('', '<i4')]` a structured type of one field).
pub fn items_descr<'a>(typestr: &TypeStr, descr: Option<&'a Descr>) -> Option<&'a Descr> {
    descr.filter(|list| {
        typestr.kind() == Kind::Void
            && !(list.is_simple()
                && matches!(&list.0[0].format, DescrFormat::Type(t) if same_as_written(t, typestr)))
    })
}

/// Whether two type strings are the same as written (NumPy compares the strings) and stand for
/// the same element (`<f1`, float8_e5m2, is written `|V1` in a dict).
fn same_as_written(a: &TypeStr, b: &TypeStr) -> bool {
    a.extended_type() == b.extended_type() && a.to_string() == b.to_string()
}

/// The capsule for `d`, whose layout is `layout`, keeping `exporter`; NumPy makes the dtype
/// from `dtype` where the exporter has its own, else from `d`'s type string or `descr`.
pub(crate) fn capsule<'py>(
    exporter: &Bound<'py, PyAny>,
    d: &HostArrayDescriptor,
    layout: &Layout,
    dtype: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    let py = exporter.py();
    let fields = items_descr(&d.typestr, d.descr.as_ref());
    let descr = match (dtype, fields) {
        (Some(dtype), _) => dtype,
        // Made here, so that NumPy's refusal (a name twice) is raised as the dict's is: given
        // the list, NumPy would drop the refusal and read opaque bytes. (Without NumPy, the
        // list.)
        (None, Some(list)) => match py.import("numpy") {
            Ok(_) => descr_dtype(py, list)?,
            Err(e) if e.is_instance_of::<pyo3::exceptions::PyImportError>(py) => {
                descr_list(py, list)?.into_any()
            }
            Err(e) => return Err(e),
        },
        (None, None) => numpy_dtype(py, d.typestr)?,
    };
    ArrayStruct {
        layout,
        data: d.data.ptr,
        readonly: d.data.readonly,
        typestr: d.typestr,
        descr: &descr,
        exporter,
    }
    .into_capsule()
}
