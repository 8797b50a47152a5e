//! What the running interpreter has beyond the stable ABI of Python 3.11, which the `cai`
//! package is built for: functions CPython exports from 3.9 or 3.11 on but declares only in
//! its full API (or in the stable ABI of later versions), looked up once among the process's
//! symbols. Each has a fallback where it is not found.

use pyo3::ffi;

/// CPython's `PyObject_VectorcallMethod` (public since Python 3.9; in the stable ABI from 3.12).
pub(crate) type VectorcallMethod = unsafe extern "C" fn(
    name: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: usize,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// CPython's current thread state, NULL where none is attached: `PyThreadState_GetUnchecked`
/// (3.13), `_PyThreadState_UncheckedGet` before.
type UncheckedGet = unsafe extern "C" fn() -> *mut ffi::PyThreadState;

/// `PyObject_VectorcallMethod` of the running interpreter; `None` where it is not found.
pub(crate) fn vectorcall_method() -> Option<VectorcallMethod> {
    static FOUND: std::sync::OnceLock<Option<VectorcallMethod>> = std::sync::OnceLock::new();
    // SAFETY: where present, the symbol is CPython's `PyObject_VectorcallMethod`, whose
    // signature (above) is its documented one in every version that has it.
    *FOUND.get_or_init(|| unsafe { symbol(b"PyObject_VectorcallMethod\0") })
}

/// Whether this thread holds the GIL, known without taking it; `false` where the interpreter
/// cannot say (then a caller attaches as usual: `false` is never wrong to answer).
///
/// The thread state attached now (CPython's `tstate_current`, the GIL holder's in 3.11, this
/// thread's in 3.12 and later) is this thread's own (`PyGILState_GetThisThreadState`) only
/// where this thread holds the GIL: a thread state belongs to one thread.
pub(crate) fn holds_gil() -> bool {
    static FOUND: std::sync::OnceLock<Option<UncheckedGet>> = std::sync::OnceLock::new();
    let Some(current) = *FOUND.get_or_init(|| {
        // SAFETY: where present, each symbol is CPython's function of that name, which takes
        // nothing and returns the attached thread state or NULL (3.13 made the private one
        // public under the new name).
        unsafe {
            symbol(b"PyThreadState_GetUnchecked\0")
                .or_else(|| symbol(b"_PyThreadState_UncheckedGet\0"))
        }
    }) else {
        return false;
    };
    // SAFETY: both only read the interpreter's thread-state bookkeeping, which any thread may
    // do at any time, with or without the GIL.
    let (now, mine) = unsafe { (current(), ffi::PyGILState_GetThisThreadState()) };
    !now.is_null() && now == mine
}

/// The function named `name` (NUL-terminated) among the running program's symbols.
///
/// # Safety
/// `F` is the type of the function the symbol names, wherever present.
#[cfg(unix)]
unsafe fn symbol<F: Copy>(name: &[u8]) -> Option<F> {
    // SAFETY: `this()` opens the running program itself, whose symbols stay loaded for the
    // life of the process (the handle is leaked, never closed); the type is the caller's.
    unsafe {
        let this = libloading::os::unix::Library::this();
        let f = this.get::<F>(name).ok().map(|s| *s);
        std::mem::forget(this);
        f
    }
}

/// (Elsewhere each caller takes its fallback.)
#[cfg(not(unix))]
unsafe fn symbol<F: Copy>(_: &[u8]) -> Option<F> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use pyo3::prelude::*;

    /// `holds_gil` says true only on the thread holding the GIL: attached here, not once
    /// detached, never on another thread (which the deleter's direct release relies on).
    #[test]
    fn holds_gil_only_where_the_gil_is_held() {
        Python::initialize();
        assert!(
            vectorcall_method().is_some(),
            "PyObject_VectorcallMethod not found"
        );
        Python::attach(|py| {
            assert!(holds_gil(), "attached, but holds_gil() is false");
            assert!(!py.detach(holds_gil), "detached, but holds_gil() is true");
            let elsewhere = py.detach(|| std::thread::spawn(holds_gil).join().unwrap());
            assert!(!elsewhere, "another thread was told it holds the GIL");
            // (In 3.11 the attached thread state is one for the process: this thread's, here.)
            let while_held = std::thread::spawn(holds_gil).join().unwrap();
            assert!(
                !while_held,
                "another thread was told it holds this thread's GIL"
            );
            // Another thread that holds it (this one waiting detached) is told so, and this
            // one, attached again, is too.
            let attached = py.detach(|| {
                std::thread::spawn(|| Python::attach(|_| holds_gil()))
                    .join()
                    .unwrap()
            });
            assert!(attached && holds_gil());
        });
        assert!(
            !holds_gil(),
            "detached after attach, but holds_gil() is true"
        );
    }
}
