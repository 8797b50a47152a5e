//! Module functions in CPython's fast calling convention (`METH_FASTCALL | METH_KEYWORDS`, in
//! the stable ABI since Python 3.10): the positional arguments and the keyword values arrive in
//! one array and the keyword names in a tuple, so CPython builds no argument tuple and no
//! keyword dict for the call. PyO3 registers closures as `(args, kwargs)` functions only; the
//! storage creators, called often with keywords and small shapes, use this instead.

use pyo3::ffi;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use smallvec::SmallVec;
use std::any::Any;
use std::ffi::CStr;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The arguments of one call: the positional values, then `(name, value)` per keyword.
pub struct Args<'py> {
    pub positional: SmallVec<[Bound<'py, PyAny>; 4]>,
    pub keywords: SmallVec<[(Bound<'py, PyAny>, Bound<'py, PyAny>); 8]>,
}

/// A function in the fast calling convention, as CPython calls it.
pub type Entry = ffi::PyCFunctionFastWithKeywords;

/// Runs `f` on the arguments CPython passed to a fast-call function and returns its result in
/// CPython's convention: a new reference, or NULL with the exception set. A panic in `f`
/// becomes a `PanicException` instead of unwinding into CPython.
///
/// # Safety
///
/// Call only from an [`Entry`] registered with `METH_FASTCALL | METH_KEYWORDS` (by
/// [`function`]), passing on the arguments CPython gave it.
pub unsafe fn call(
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
    f: impl for<'py> FnOnce(Python<'py>, Args<'py>) -> PyResult<Py<PyAny>>,
) -> *mut ffi::PyObject {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        // CPython calls a module function with the thread attached, but PyO3 does not know it
        // until told: with its own count left at zero (as `assume_attached` leaves it), every
        // `Py` dropped in `f` (the view a `_like` creator reads its template through, say)
        // would be queued for a later decref instead of released now, keeping the template
        // alive until some later call into PyO3 code. `attach` finds the thread attached
        // (PyGILState_Ensure only counts then) and raises PyO3's count for the call.
        Python::attach(|py| {
            // SAFETY: this function's contract: the arguments are CPython's for this call.
            let arguments = unsafe { arguments(py, args, nargs, kwnames) };
            match f(py, arguments) {
                Ok(value) => value.into_ptr(),
                Err(e) => {
                    e.restore(py);
                    std::ptr::null_mut()
                }
            }
        })
    }));
    outcome.unwrap_or_else(|payload| {
        // SAFETY: CPython calls a module function with the thread attached, and `py` does not
        // outlive this call.
        let py = unsafe { Python::assume_attached() };
        panic_error(payload).restore(py);
        std::ptr::null_mut()
    })
}

/// The arguments of a fast call, borrowed for its duration.
///
/// # Safety
///
/// The convention's contract: `kwnames` is NULL or a tuple of the keyword names (`str`), and
/// `args` holds `nargs` positional values followed by one value per name, all valid for the
/// call. `args` may be NULL when there are no values at all, so no slice is made then.
unsafe fn arguments<'py>(
    py: Python<'py>,
    args: *const *mut ffi::PyObject,
    nargs: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> Args<'py> {
    // SAFETY: as this function's contract says; each value is taken as a new reference.
    unsafe {
        let names = Bound::from_borrowed_ptr_or_opt(py, kwnames)
            .map(|n| n.cast_into_unchecked::<PyTuple>());
        let nargs = usize::try_from(nargs).unwrap_or(0);
        let total = nargs + names.as_ref().map_or(0, |n| n.len());
        let values: &[*mut ffi::PyObject] = if total == 0 || args.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(args, total)
        };
        let (positional, keyword_values) = values.split_at(nargs.min(values.len()));
        Args {
            positional: positional
                .iter()
                .map(|&p| Bound::from_borrowed_ptr(py, p))
                .collect(),
            keywords: names
                .iter()
                .flat_map(|n| n.iter())
                .zip(
                    keyword_values
                        .iter()
                        .map(|&p| Bound::from_borrowed_ptr(py, p)),
                )
                .collect(),
        }
    }
}

fn panic_error(payload: Box<dyn Any + Send>) -> PyErr {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic with a non-text payload".into());
    PanicException::new_err(msg)
}

/// A function object of module `m` named `name` that CPython calls as `entry`. `doc` starts
/// with the text signature (`name(a, b=None, **kwargs)\n--\n\n`) that `inspect` reads.
pub fn function<'py>(
    m: &Bound<'py, PyModule>,
    name: &'static CStr,
    doc: &'static CStr,
    entry: Entry,
) -> PyResult<Bound<'py, PyAny>> {
    // A function object keeps a pointer to its definition: one per function and module
    // object, so it is leaked (a few dozen bytes; CPython's own module functions are static).
    let def = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth: ffi::PyMethodDefPointer {
            PyCFunctionFastWithKeywords: entry,
        },
        ml_flags: ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ml_doc: doc.as_ptr(),
    }));
    let module_name = m.name()?;
    // SAFETY: `def` lives for the rest of the process and says how `entry` is called;
    // `m` and `module_name` are live objects, which the new function references itself.
    unsafe {
        Bound::from_owned_ptr_or_err(
            m.py(),
            ffi::PyCFunction_NewEx(def, m.as_ptr(), module_name.as_ptr()),
        )
    }
}
