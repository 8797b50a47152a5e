//! `__dlpack__` as CPython calls it: a method descriptor in the fast calling convention
//! (`METH_FASTCALL | METH_KEYWORDS`), its four keyword-only arguments matched here.
//!
//! PyO3's generated argument handling compares each keyword's text with each parameter's
//! (about 25 ns for NumPy's three keywords, a third of NumPy's own `__dlpack__`). Callers pass
//! interned names (NumPy's `from_dlpack`, and every keyword in Python source), so a name is
//! matched here by address first and by text only where that fails. The method's body is
//! [`protocol::methods::__dlpack__`](crate::python::protocol::methods::__dlpack__), as for any
//! other protocol method.

use std::ffi::CStr;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};
use pyo3::{ffi, intern};

use super::exchange::{ExchangeClass, on_callers_gil};

/// The keyword-only parameters, in the order [`crate::python::protocol::methods::__dlpack__`]
/// takes them.
const KEYWORDS: [&str; 4] = ["stream", "max_version", "dl_device", "copy"];

/// The docstring, with the signature `inspect.signature` reads.
const DOC: &CStr = c"__dlpack__($self, /, *, stream=None, max_version=None, dl_device=None, copy=None)
--

DLPack (the Python Array API standard's `__dlpack__`): this object's memory as a capsule, shared (or copied with `copy=True`, or to the host with `dl_device=(1, 0)`), the consumer's `stream` made to wait for pending work.";

/// `__dlpack__` of class `C` (whose type is `ty`): a method descriptor of a method definition
/// made now and never freed (one per class, made when Python makes the class's type object).
pub fn dlpack_method<'py, C: ExchangeClass>(
    ty: &Bound<'py, PyType>,
) -> PyResult<Bound<'py, PyAny>> {
    let def: &'static mut ffi::PyMethodDef = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: c"__dlpack__".as_ptr(),
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: entry::<C>,
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: DOC.as_ptr(),
    }));
    // SAFETY: a type object, and a method definition that is never freed (CPython keeps the
    // pointer), whose function has the signature its flags say.
    let descriptor = unsafe { ffi::PyDescr_NewMethod(ty.as_type_ptr(), def) };
    if descriptor.is_null() {
        return Err(PyErr::fetch(ty.py()));
    }
    // SAFETY: a new reference, just made.
    Ok(unsafe { Bound::from_owned_ptr(ty.py(), descriptor) })
}

/// The method's C function.
///
/// # Safety
/// Called by CPython (through the descriptor [`dlpack_method`] makes) on a thread holding the
/// GIL, with `slf` an instance of `C`'s type and the arguments of a fast call.
unsafe extern "C" fn entry<C: ExchangeClass>(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    // SAFETY: CPython calls a method with the GIL held; the arguments are this call's,
    // borrowed for it (this function's contract).
    let made = unsafe {
        on_callers_gil("__dlpack__", |py| {
            call::<C>(py, slf, args, nargs, kwnames).map(Bound::into_ptr)
        })
    };
    made.unwrap_or(std::ptr::null_mut())
}

/// The call: its arguments read, then the protocol's method on the instance's exporter.
///
/// # Safety
/// As [`entry`]'s, `py` the GIL held.
unsafe fn call<'py, C: ExchangeClass>(
    py: Python<'py>,
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<Bound<'py, PyAny>> {
    // SAFETY: `slf` is the instance the method was called on, alive for the call.
    let slf = unsafe { Bound::from_borrowed_ptr(py, slf) };
    // (Named as Python names a method in its argument errors: `Storage.__dlpack__()`.)
    let name = || match slf.get_type().qualname() {
        Ok(q) => format!("{q}.__dlpack__()"),
        Err(_) => "__dlpack__()".to_owned(),
    };
    // SAFETY: this function's contract.
    let keywords = unsafe { keywords(py, args, nargs, kwnames, name)? };
    let [stream, max_version, dl_device, copy] = keywords.each_ref().map(|k| k.as_deref());
    C::with_exporter(&slf, |e| {
        crate::python::protocol::methods::__dlpack__(&slf, e, stream, max_version, dl_device, copy)
    })
}

/// The keyword arguments of a fast call, by [`KEYWORDS`]' order: a `TypeError` as Python's
/// own for a positional argument, an unknown keyword, or one given twice, naming the method
/// as `what()` does.
///
/// # Safety
/// `args` holds `nargs` positional values then one value per name in `kwnames` (a tuple of
/// strings, or NULL), all alive for the call.
unsafe fn keywords<'a, 'py>(
    py: Python<'py>,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
    what: impl Fn() -> String,
) -> PyResult<[Option<Borrowed<'a, 'py, PyAny>>; 4]> {
    // (A method's `nargs` counts the arguments after `self`, without vectorcall's flag.)
    if nargs > 0 {
        return Err(PyTypeError::new_err(format!(
            "{} takes 0 positional arguments but {nargs} {} given",
            what(),
            if nargs == 1 { "was" } else { "were" }
        )));
    }
    let mut out: [Option<Borrowed<'a, 'py, PyAny>>; 4] = [None; 4];
    if kwnames.is_null() {
        return Ok(out);
    }
    let interned: [&Bound<'py, PyString>; 4] = [
        intern!(py, "stream"),
        intern!(py, "max_version"),
        intern!(py, "dl_device"),
        intern!(py, "copy"),
    ];
    // SAFETY: `kwnames` is a tuple (this function's contract), borrowed for the call.
    let names = unsafe { Borrowed::from_ptr(py, kwnames).cast_unchecked::<PyTuple>() };
    for (i, name) in PyTupleMethods::iter_borrowed(&*names).enumerate() {
        let slot = match interned.iter().position(|k| k.is(name)) {
            Some(slot) => slot,
            None => {
                // (Not a string, or not UTF-8: no keyword of ours.)
                let string = name.cast::<PyString>().ok();
                let text = string.as_ref().and_then(|s| s.to_str().ok());
                match text.and_then(|t| KEYWORDS.iter().position(|k| *k == t)) {
                    Some(slot) => slot,
                    None => {
                        return Err(PyTypeError::new_err(format!(
                            "{} got an unexpected keyword argument {}",
                            what(),
                            name.repr()?
                        )));
                    }
                }
            }
        };
        if out[slot].is_some() {
            return Err(PyTypeError::new_err(format!(
                "{} got multiple values for argument '{}'",
                what(),
                KEYWORDS[slot]
            )));
        }
        // SAFETY: the value of the `i`th keyword follows the positional ones (none), alive
        // for the call (this function's contract).
        out[slot] = Some(unsafe { Borrowed::from_ptr(py, *args.add(i)) });
    }
    Ok(out)
}
