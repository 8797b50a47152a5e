//! cai's errors as Python exceptions, in one place: `impl From<E> for PyErr` for each error
//! type of the crate, so that code reading or making Python objects returns them with `?`.
//!
//! The table of exceptions is in the `python` module's docs.
//!
//! The impls are made by [`impl_pyerr!`](crate::impl_pyerr), which a crate defining its own
//! error types can use too (the orphan rule puts `impl From<E> for PyErr` in `E`'s crate).

use pyo3::PyErr;
use pyo3::exceptions::{PyMemoryError, PyRuntimeError, PyTypeError, PyValueError};

use super::foreign::ViewError;
use crate::driver_error::DriverError;
use crate::error::{AllocError, CopyToHostError, DescriptorError};
use crate::layout::LayoutError;
use crate::stream::StreamError;
use crate::structured::DescrNameError;
use crate::typestr::TypeStrError;

/// Implements `From<E> for PyErr` for error types, each with the Python exception it becomes;
/// the message is the error's `Display` text.
///
/// Each entry is `Type => Exception;`, or, where the exception depends on the variant, a
/// match on the error: `Type { pattern => Exception, ... }` (arms may have `if` guards; the
/// first matching arm wins).
/// Attributes (docs, `#[cfg]`) before an entry go on its impl. Usable from any crate that
/// depends on `cai-runtime` with the `python` feature, for its own error types:
///
/// ```no_run
/// use pyo3::exceptions::{PyKeyError, PyValueError};
/// use std::fmt;
///
/// #[derive(Debug)]
/// pub struct BadParam(u32);
///
/// #[derive(Debug)]
/// pub enum Lookup {
///     Missing(String),
///     Invalid,
/// }
/// # impl fmt::Display for BadParam {
/// #     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { write!(f, "bad parameter {}", self.0) }
/// # }
/// # impl fmt::Display for Lookup {
/// #     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { write!(f, "{self:?}") }
/// # }
///
/// cai_runtime::impl_pyerr! {
///     /// A bad parameter: ValueError.
///     BadParam => PyValueError;
///     /// A missing key: KeyError; anything else: ValueError.
///     Lookup {
///         Lookup::Missing(_) => PyKeyError,
///         _ => PyValueError,
///     }
/// }
///
/// fn read(n: u32) -> pyo3::PyResult<u32> {
///     if n > 3 {
///         return Err(BadParam(n).into());
///     }
///     Ok(n)
/// }
/// ```
#[macro_export]
macro_rules! impl_pyerr {
    () => {};
    ($(#[$attr:meta])* $ty:ty => $exc:ty; $($rest:tt)*) => {
        $(#[$attr])*
        impl ::core::convert::From<$ty> for $crate::__private::pyo3::PyErr {
            fn from(e: $ty) -> Self {
                <$exc>::new_err(::std::string::ToString::to_string(&e))
            }
        }
        $crate::impl_pyerr!($($rest)*);
    };
    ($(#[$attr:meta])* $ty:ty { $($pat:pat $(if $guard:expr)? => $exc:ty),+ $(,)? } $($rest:tt)*) => {
        $(#[$attr])*
        impl ::core::convert::From<$ty> for $crate::__private::pyo3::PyErr {
            fn from(e: $ty) -> Self {
                let message = ::std::string::ToString::to_string(&e);
                match e {
                    $($pat $(if $guard)? => <$exc>::new_err(message),)+
                }
            }
        }
        $crate::impl_pyerr!($($rest)*);
    };
}

impl_pyerr! {
    /// `ValueError`: the descriptor's values break a rule.
    DescriptorError => PyValueError;
    /// `ValueError`: a shape and strides that no memory can have.
    LayoutError => PyValueError;
    /// `ValueError`: a stream value the spec forbids (0).
    StreamError => PyValueError;
    /// `ValueError`: a `descr` field name that is not one.
    DescrNameError => PyValueError;
    /// `TypeError`, as NumPy's `dtype("x")`.
    TypeStrError => PyTypeError;
    /// `ValueError` for mutable access to read-only data, a layout or a stream a view cannot
    /// take, memory another import views; `TypeError` for an element type or a
    /// dimensionality that is not the array's; `MemoryError` for a copy too big.
    ViewError {
        ViewError::Dtype { .. } | ViewError::Descr { .. } => PyTypeError,
        ViewError::Dimensionality { .. } => PyTypeError,
        ViewError::Backend { .. } => PyRuntimeError,
        ViewError::Alloc(_) => PyMemoryError,
        _ => PyValueError,
    }
    /// `MemoryError`, as NumPy raises when an array cannot be allocated.
    AllocError => PyMemoryError;
    /// `RuntimeError`: the CUDA driver failed.
    DriverError => PyRuntimeError;
    /// `RuntimeError` for the driver's failure, `MemoryError` for the host's.
    CopyToHostError {
        CopyToHostError::Driver(_) => PyRuntimeError,
        CopyToHostError::HostAlloc(_) => PyMemoryError,
    }
    /// `ValueError` when the driver says the pointer is unusable; `RuntimeError` when the
    /// driver could not be asked.
    crate::cuda::ImportCheckError {
        crate::cuda::ImportCheckError::Pointer(_) => PyValueError,
        crate::cuda::ImportCheckError::Driver(_) => PyRuntimeError,
    }
    /// `ValueError`: the driver says the pointer is unusable.
    crate::pointer::PointerError => PyValueError;
}

/// A `DescriptorError` met while exporting, as the `ValueError` the property raises, naming
/// the attribute. (Not `AttributeError`: `hasattr()` would then report the interface as
/// absent.)
pub fn export_error(e: DescriptorError, attribute: &str) -> PyErr {
    PyValueError::new_err(format!("cannot export {attribute}: {e}"))
}

/// `what` could not be done: the driver's `e` (a `RuntimeError`, as every driver failure),
/// after what was attempted (where there is no driver, `e` says why).
pub fn driver_error(what: impl std::fmt::Display, e: DriverError) -> PyErr {
    PyRuntimeError::new_err(format!("{what}: {e}"))
}

/// `what` failed with the driver's `e`: `ValueError` when the driver did not know a stream
/// handle (`CUDA_ERROR_INVALID_HANDLE`), which is then a bad value; `RuntimeError` otherwise.
pub(crate) fn stream_error(what: String, e: DriverError) -> PyErr {
    if e.is_invalid_handle() {
        PyValueError::new_err(format!(
            "{what}: {e}; a stream must be 1, 2 or the handle of a live CUDA stream of this process"
        ))
    } else {
        PyRuntimeError::new_err(format!("{what}: {e}"))
    }
}

/// Runs `f`, foreign code that may run Python (a DLPack producer's deleter, the release of an
/// import's owner or of a buffer), with this thread's pending exception put aside and restored
/// afterwards, as NumPy and DLPack's reference deleter do: a drop can run while the user's
/// exception is being raised (the `TypeError` of `float(view)` with the view a temporary), and
/// Python code run then would see it as its own, then lose it (`SystemError: error return
/// without exception set`). An exception `f` leaves set is reported through
/// `sys.unraisablehook`, naming `what`, as CPython reports the errors of destructors.
///
/// Where the thread has no Python state (a Rust thread), `f` runs as it is, taking no GIL.
/// (PyO3 runs the releases it deferred from such threads whenever a thread attaches, before any
/// code of the caller's: those run with a pending exception set, as in every PyO3 extension,
/// whose deallocations attach that way too.)
#[allow(deprecated)] // PyErr_Fetch/Restore: the stable ABI of Python 3.11 has no other.
#[inline]
pub fn calling_foreign_code<R>(what: &str, f: impl FnOnce() -> R) -> R {
    use pyo3::ffi;
    // SAFETY: may be called without the GIL: it reads this thread's slot.
    if unsafe { ffi::PyGILState_GetThisThreadState() }.is_null() {
        return f();
    }
    let mut f = Some(f);
    let attached = pyo3::Python::try_attach(|py| {
        let f = f.take()?;
        let mut pending = None;
        // SAFETY: attached; PyErr_Occurred only reads the thread's state, and PyErr_Fetch moves
        // the pending exception into the valid out-pointers, its references now ours.
        unsafe {
            if !ffi::PyErr_Occurred().is_null() {
                let mut e = [std::ptr::null_mut(); 3];
                ffi::PyErr_Fetch(&mut e[0], &mut e[1], &mut e[2]);
                pending = Some(e);
            }
        }
        let out = f();
        // SAFETY: attached. An exception `f` left is reported and cleared (WriteUnraisable takes
        // a live context object), then the pending one handed back.
        unsafe {
            if !ffi::PyErr_Occurred().is_null() {
                let context = pyo3::types::PyString::new(py, what);
                ffi::PyErr_WriteUnraisable(context.as_ptr());
            }
            if let Some([kind, value, traceback]) = pending {
                ffi::PyErr_Restore(kind, value, traceback);
            }
        }
        Some(out)
    });
    match (attached.flatten(), f) {
        (Some(out), _) => out,
        // Not attachable (the interpreter stopped, or a garbage collector's traversal): as it is.
        (None, Some(f)) => f(),
        // `f` is taken only by the closure, whose result is then `Some`.
        (None, None) => unreachable!("the foreign code ran but returned nothing"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TypeStr;
    use pyo3::Python;
    use pyo3::types::PyTypeMethods;

    /// The exception's type name and message.
    fn raised(py: Python<'_>, e: impl Into<PyErr>) -> (String, String) {
        let e: PyErr = e.into();
        let name = e.get_type(py).name().map(|n| n.to_string()).unwrap();
        (name, e.value(py).to_string())
    }

    #[test]
    fn foreign_code_runs_with_the_pending_exception_put_aside_and_restored() {
        Python::initialize();
        Python::attach(|py| {
            PyValueError::new_err("the user's").restore(py);
            let seen = calling_foreign_code("a test", || PyErr::occurred(py));
            assert!(!seen, "the foreign code saw the user's exception");
            let e = PyErr::take(py).expect("the user's exception, restored");
            assert_eq!(e.value(py).to_string(), "the user's");
            // What foreign code leaves set is reported (sys.unraisablehook), not left pending.
            calling_foreign_code("a test", || PyValueError::new_err("left").restore(py));
            assert!(!PyErr::occurred(py));
        });
    }

    #[test]
    fn a_thread_python_has_no_state_for_runs_foreign_code_without_the_gil() {
        Python::initialize();
        Python::attach(|_| {
            let (tx, rx) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                let _ = tx.send(calling_foreign_code("a test", || 7));
            });
            // This thread holds the GIL meanwhile: a worker that took it would wait for ever.
            let done = rx.recv_timeout(std::time::Duration::from_secs(20));
            assert_eq!(done, Ok(7), "the worker waited for the GIL");
        });
    }

    #[test]
    fn each_error_is_the_exception_its_table_row_says_with_its_own_message() {
        Python::initialize();
        Python::attach(|py| {
            let shown = |e: &dyn std::fmt::Display| e.to_string();
            let alloc = AllocError(1 << 40);
            assert_eq!(raised(py, alloc), ("MemoryError".into(), shown(&alloc)));
            let bad = TypeStr::parse("x").unwrap_err();
            assert_eq!(raised(py, bad.clone()), ("TypeError".into(), shown(&bad)));
            assert_eq!(raised(py, ViewError::ReadOnly).0, "ValueError");
            let mismatch = ViewError::Descr {
                rust: "f64",
                expected: "<f8".into(),
                found: "<f4".into(),
            };
            assert_eq!(raised(py, mismatch).0, "TypeError");
            let driver = DriverError {
                operation: "cuInit",
                code: 100,
            };
            assert_eq!(raised(py, driver).0, "RuntimeError");
            assert_eq!(
                raised(py, CopyToHostError::Driver(driver)).0,
                "RuntimeError"
            );
            assert_eq!(
                raised(py, CopyToHostError::HostAlloc(alloc)).0,
                "MemoryError"
            );
        });
    }
}
