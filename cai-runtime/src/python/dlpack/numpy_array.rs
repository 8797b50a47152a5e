//! NumPy's arrays read where they lie: an import of an exact `numpy.ndarray` reads the tensor
//! its `__dlpack__` would export straight from the array's fields (data, shape, strides,
//! dtype, flags), with NumPy's rules, and skips the Python call, the capsule, the managed
//! tensor and its deleter (more than half of such an import). The view holds the array twice,
//! as its owner and as NumPy's tensor would (`buffer.rs`'s `Held::pinned`: NumPy's `resize`
//! counts references).
//!
//! An array whose export NumPy refuses or makes otherwise is left to its `__dlpack__`, which
//! answers for it as NumPy does: a type other than the boolean, integer, float16/32/64 and
//! complex64/128 ones, non-native byte order, strides that are no multiple of the item size,
//! more dimensions than cai's layouts take (64, NumPy's limit too), and memory NumPy itself
//! imported through DLPack (its export reports that tensor's device).
//!
//! The fields are read through rust-numpy's bindings of NumPy's structures, which NumPy keeps
//! stable (the ABI every compiled extension reads); nothing of NumPy's C API is called, so
//! nothing is imported.

use std::ffi::{c_int, c_long, c_longlong};
use std::sync::atomic::{AtomicPtr, Ordering};

use dlpark::ffi::{DLDataType, DLDataTypeCode};
use numpy::npyffi::{self, NPY_TYPES};
use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyString, PyType};

use crate::descriptor::{Data, Space};
use crate::layout::{Dims, Layout};
use crate::python::foreign::TensorHead;

/// Whether `obj`'s type is exactly NumPy's `ndarray` (a subclass may answer `__dlpack__`
/// otherwise): a static (C) type named `numpy.ndarray`, told from the type itself. Nothing is
/// looked up in `sys.modules`, where any module may stand as `numpy`, and no module code runs.
/// The type is kept once seen: later checks are one comparison.
pub(super) fn is_numpy_array(obj: &Bound<'_, PyAny>) -> bool {
    let ty = obj.get_type();
    if let Some(t) = NDARRAY.get(obj.py()) {
        return ty.is(t.bind(obj.py()));
    }
    if is_ndarray_type(&ty) {
        NDARRAY.get_or_init(obj.py(), || ty.clone().unbind());
        return true;
    }
    false
}

/// Whether `obj` is a NumPy array, of `ndarray` or a subclass: one type check once NumPy's type
/// is known, else each type of the chain of base types (`tp_base`, which holds NumPy's type in
/// every subclass: its instances' layout) told as [`is_numpy_array`] tells one. (Not the MRO:
/// reading `__mro__` may run a metaclass's code.)
pub(crate) fn is_ndarray(obj: &Bound<'_, PyAny>) -> bool {
    let py = obj.py();
    if let Some(t) = NDARRAY.get(py) {
        // SAFETY: both are live; PyObject_TypeCheck reads the type's MRO and runs no code.
        return unsafe { ffi::PyObject_TypeCheck(obj.as_ptr(), t.bind(py).as_type_ptr()) } != 0;
    }
    let mut t = obj.get_type().as_type_ptr();
    while !t.is_null() {
        // SAFETY: `t` is a live type: `obj`'s, or a base type, which its subtypes hold.
        let ty = unsafe { Borrowed::from_ptr(py, t.cast()).cast_unchecked::<PyType>() };
        if is_ndarray_type(&ty) {
            NDARRAY.get_or_init(py, || ty.to_owned().unbind());
            return true;
        }
        // SAFETY: a live type's `tp_base` slot, read as the stable ABI allows from 3.10 (for
        // static types too): the base type, or NULL for `object`.
        t = unsafe { ffi::PyType_GetSlot(t, ffi::Py_tp_base) }.cast();
    }
    false
}

/// NumPy's `ndarray` type, once an array was seen.
static NDARRAY: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// The static type last found not to be NumPy's (static types are never freed, so its address
/// names no other): an object of it is told at once, until NumPy's type is known.
static NOT_NDARRAY: AtomicPtr<ffi::PyTypeObject> = AtomicPtr::new(std::ptr::null_mut());

fn is_ndarray_type(ty: &Bound<'_, PyType>) -> bool {
    let py = ty.py();
    // SAFETY: PyType_GetFlags reads the flags of a live type.
    let flags = unsafe { ffi::PyType_GetFlags(ty.as_type_ptr()) };
    // (Every class made in Python, or by most binding generators, is a heap type: those stop
    // here, before their names are asked.)
    let p = ty.as_type_ptr();
    if flags & ffi::Py_TPFLAGS_HEAPTYPE != 0
        || p == &raw mut ffi::PyBaseObject_Type
        || p == NOT_NDARRAY.load(Ordering::Relaxed)
    {
        return false;
    }
    let named = |attr: &Bound<'_, PyString>, want: &str| {
        ty.getattr(attr)
            .ok()
            .and_then(|v| v.cast_into::<PyString>().ok())
            .is_some_and(|v| v.to_str().is_ok_and(|v| v == want))
    };
    let numpy =
        named(intern!(py, "__module__"), "numpy") && named(intern!(py, "__qualname__"), "ndarray");
    if !numpy {
        NOT_NDARRAY.store(p, Ordering::Relaxed);
    }
    numpy
}

/// What an import makes of the tensor NumPy's `__dlpack__` would export for `obj` (as
/// `import.rs`'s `describe` reads a tensor: its type string by the same table, its strides in
/// items times the item size), read from the array; `None` where `obj` is no exact ndarray, or
/// is one whose export `__dlpack__` must answer for (see the module's docs).
pub(super) fn read<S: Space>(obj: &Bound<'_, PyAny>) -> Option<(TensorHead<S>, Layout)> {
    if S::DEVICE || !is_numpy_array(obj) {
        return None;
    }
    let ndarray = NDARRAY.get(obj.py())?.bind(obj.py()).as_type_ptr();
    // SAFETY: `obj` is an exact ndarray (checked above), whose object is NumPy's
    // `PyArrayObject`, alive while borrowed; its fields are read under the GIL, which NumPy
    // holds while it changes them.
    let a = unsafe { &*npyffi::_PyArray_GET_ITEM_DATA(obj.as_ptr().cast()) };
    // SAFETY: an array's `descr` is a live dtype (`PyArray_Descr`) it holds.
    let d = unsafe { &*npyffi::_PyDataType_GET_ITEM_DATA(a.descr) };
    let native = match d.byteorder as u8 {
        b'=' | b'|' => true,
        b'<' => cfg!(target_endian = "little"),
        b'>' => cfg!(target_endian = "big"),
        _ => false,
    };
    if !native {
        return None;
    }
    let (code, itemsize) = dlpack_type(d.type_num)?;
    let typestr = super::typestr_of(DLDataType {
        code,
        bits: (itemsize * 8) as u8,
        lanes: 1,
    })
    .ok()?;
    // (More dimensions than cai's layouts take are refused below, by the layout.)
    let ndim = usize::try_from(a.nd).ok()?;
    // NumPy's `array_get_dl_device`: the device of a tensor NumPy imported, which its export
    // reports, is found at the end of the chain of bases (a capsule): left to `__dlpack__`.
    let mut base = a.base;
    // SAFETY: each base is a live object its array holds; an array's base, read as above, is
    // one of NumPy's (`PyObject_TypeCheck`: an ndarray or a subclass's).
    unsafe {
        while !base.is_null() && ffi::PyObject_TypeCheck(base, ndarray) != 0 {
            base = (*npyffi::_PyArray_GET_ITEM_DATA(base.cast())).base;
        }
        if !base.is_null() && ffi::PyCapsule_CheckExact(base) != 0 {
            return None;
        }
    }
    let layout = if ndim == 0 {
        // (NumPy's tensor has NULL shape and strides: C order.)
        Layout::c_contiguous(&[], itemsize)
    } else {
        // SAFETY: an array of `nd` dimensions points to `nd` extents and strides (npy_intp).
        let (shape, strides) = unsafe {
            (
                std::slice::from_raw_parts(a.dimensions, ndim),
                std::slice::from_raw_parts(a.strides, ndim),
            )
        };
        let size = isize::try_from(itemsize).ok()?;
        // NumPy's `fill_dl_tensor_information_from_array`: strides that are no multiple of
        // the item size are refused (a BufferError) unless the array is C-contiguous or holds
        // one item; the others are exported in items, divided as NumPy divides (truncated).
        let checked = a.flags & npyffi::NPY_ARRAY_C_CONTIGUOUS == 0
            && shape.iter().try_fold(1isize, |n, &e| n.checked_mul(e)) != Some(1);
        let mut extents = Dims::<usize>::new();
        let mut bytes = Dims::<isize>::new();
        for (&n, &s) in shape.iter().zip(strides) {
            if checked && n != 1 && s % size != 0 {
                return None;
            }
            extents.push(usize::try_from(n).ok()?);
            bytes.push(s / size * size);
        }
        Layout::from_dims(extents, bytes, itemsize)
    }
    .ok()?;
    if a.data.is_null() && layout.size() > 0 {
        return None;
    }
    let data = Data {
        ptr: a.data as u64,
        readonly: a.flags & npyffi::NPY_ARRAY_WRITEABLE == 0,
    };
    let head = TensorHead::new(typestr, data, ndim > 0);
    Some((head, layout))
}

/// NumPy's `fill_dl_tensor_information`: the DLPack type code and item size of its built-in
/// types, by their numbers (a user type may call itself a float), at their C sizes;
/// `longdouble` and its complex, and every other type, have none.
fn dlpack_type(type_num: c_int) -> Option<(DLDataTypeCode, usize)> {
    use DLDataTypeCode as C;
    use NPY_TYPES as T;
    use std::mem::size_of;
    const TYPES: [(T, C, usize); 16] = [
        (T::NPY_BOOL, C::BOOL, 1),
        (T::NPY_BYTE, C::INT, 1),
        (T::NPY_UBYTE, C::UINT, 1),
        (T::NPY_SHORT, C::INT, 2),
        (T::NPY_USHORT, C::UINT, 2),
        (T::NPY_INT, C::INT, size_of::<c_int>()),
        (T::NPY_UINT, C::UINT, size_of::<c_int>()),
        (T::NPY_LONG, C::INT, size_of::<c_long>()),
        (T::NPY_ULONG, C::UINT, size_of::<c_long>()),
        (T::NPY_LONGLONG, C::INT, size_of::<c_longlong>()),
        (T::NPY_ULONGLONG, C::UINT, size_of::<c_longlong>()),
        (T::NPY_HALF, C::FLOAT, 2),
        (T::NPY_FLOAT, C::FLOAT, 4),
        (T::NPY_DOUBLE, C::FLOAT, 8),
        (T::NPY_CFLOAT, C::COMPLEX, 8),
        (T::NPY_CDOUBLE, C::COMPLEX, 16),
    ];
    TYPES
        .iter()
        .find(|(n, ..)| *n as c_int == type_num)
        .map(|&(_, code, size)| (code, size))
}
