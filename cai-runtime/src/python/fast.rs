//! Import's fast path, and the one walk over a descriptor dict that both paths use.
//!
//! What NumPy, CuPy, Numba, PyTorch and JAX send is always the same kind of dict: interned
//! keys, exact `tuple`, `int`, `str`, `bool` and `list` values, `descr` of `[('', typestr)]`.
//! The fast path reads such a dict with borrowed references (in the stable ABI every reference
//! count change is a function call) and builds the descriptor. Anything else, and any
//! descriptor that breaks a rule, goes to the full parser ([`super::parse`]), which reads
//! every key with its own references, reports the problem, and is the only source of error
//! messages. So the fast path decides nothing: it returns what the parser would, or `None`.
//!
//! Why borrowed references are safe here: every object is checked to be an exact builtin
//! before any call on it, and the calls made on exact builtins (sizes, items, `int` values,
//! `str` hashes and comparisons) run no Python code and create no object the garbage
//! collector tracks, so nothing can change the dict while its values are in use. The
//! free-threaded build has no such guarantee: there the fast path is off and the parser looks
//! every key up.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyDict, PyInt, PyString, PyTuple};

use super::parse::{is_simple_descr_of, typestr};
use super::rules;
use crate::descriptor::{ArrayDescriptor, Data, Space};
use crate::layout::Layout;
use crate::stream::Stream;
use crate::structured::Descr;

/// The keys a descriptor dict may hold, in the order of [`names`] and [`walk`]'s values.
pub(super) const KEYS: [&str; 8] = [
    "shape", "typestr", "data", "version", "strides", "descr", "mask", "stream",
];

/// [`KEYS`] as interned Python strings, made once (one check per import instead of one per
/// name).
pub(super) fn names(py: Python<'_>) -> &[Py<PyString>; KEYS.len()] {
    static NAMES: PyOnceLock<[Py<PyString>; KEYS.len()]> = PyOnceLock::new();
    NAMES.get_or_init(py, || KEYS.map(|k| PyString::intern(py, k).unbind()))
}

/// A dict's values for [`KEYS`] (null where absent), borrowed from the dict: valid only until
/// Python code runs. A key is found by pointer first (producers' keys are literals or
/// `PyDict_SetItemString` keys, which CPython interns), else, for an exact `str` key, by
/// comparing text (keys some C++ bindings build at run time); keys equal to no name are
/// ignored, as the parser ignores them. The flag says whether some key could not be compared
/// without running Python code (a `str` subclass, or not a `str`): then the caller must look
/// the names up as the dict would.
#[cfg(not(Py_GIL_DISABLED))]
pub(super) fn walk(dict: &Bound<'_, PyDict>) -> ([*mut ffi::PyObject; KEYS.len()], bool) {
    let py = dict.py();
    let names = names(py);
    let mut values = [std::ptr::null_mut(); KEYS.len()];
    let mut unmatched = false;
    let mut pos: ffi::Py_ssize_t = 0;
    let mut key = std::ptr::null_mut();
    let mut value = std::ptr::null_mut();
    // SAFETY: `dict` is a live dict and the GIL is held (this is not the free-threaded build),
    // so no other thread changes it; `pos`, `key` and `value` are valid out-pointers.
    // PyDict_Next only reads the dict and runs no Python code, nor does anything below.
    while unsafe { ffi::PyDict_Next(dict.as_ptr(), &mut pos, &mut key, &mut value) } != 0 {
        let found = names.iter().position(|n| n.as_ptr() == key).or_else(|| {
            // SAFETY: `key` is a live key of `dict`, borrowed for this iteration only.
            let k = unsafe { Borrowed::from_ptr(py, key) };
            if !k.is_exact_instance_of::<PyString>() {
                unmatched = true;
                return None;
            }
            names
                .iter()
                .position(|n| exact_text_eq(&k, n.bind(py)) == Some(true))
        });
        if let Some(i) = found {
            values[i] = value;
        }
    }
    (values, unmatched)
}

/// What the fast path read: the descriptor, its layout, and whether the dict holds keys
/// besides the descriptor's (`'__ref'`...), whose values the data may depend on.
pub(super) type Fast<S> = (ArrayDescriptor<S>, Layout, bool);

/// The descriptor and its layout, when `desc` is a plain dict of exact builtin values that
/// breaks no rule; `None` sends the caller to the full parser. The descriptor's own values
/// (ints, strs, bools, tuples and lists of them) keep no memory alive: only other keys can.
#[cfg(not(Py_GIL_DISABLED))]
pub(super) fn import<S: Space>(desc: &Bound<'_, PyAny>) -> Option<Fast<S>> {
    let dict = desc.cast_exact::<PyDict>().ok()?;
    let (values, unmatched) = walk(dict);
    if unmatched {
        return None;
    }
    // Keys besides the descriptor's own; a host descriptor has no `stream`, whose value is
    // then not read (nor checked) and may be anything.
    let mut others = dict.len() > values.iter().filter(|v| !v.is_null()).count();
    let py = desc.py();
    // SAFETY: borrowed from `dict`, which outlives this function; see the module docs for why
    // nothing below can change the dict or free a value.
    let [
        shape,
        typestr_v,
        data,
        version,
        strides,
        descr,
        mask,
        stream,
    ] = values.map(|p| unsafe { Borrowed::from_ptr_or_opt(py, p) });
    if mask.is_some_and(|m| !m.is_none()) {
        return None;
    }
    let shape = ints::<usize>(&*shape?)?;
    let typestr_v = typestr_v?;
    let t = if typestr_v.is_exact_instance_of::<PyString>() {
        typestr("typestr", &typestr_v, rules::TYPESTR).ok()?
    } else {
        return None;
    };
    let data = data_entry(&*data?)?;
    let version = match version {
        Some(v) => u32::try_from(exact_int(&v)?).ok()?,
        None if S::DEVICE => return None,
        None => S::DEFAULT_VERSION,
    };
    let strides = match strides {
        Some(s) if !s.is_none() => Some(ints::<isize>(&s)?),
        _ => None,
    };
    let descr = match descr {
        Some(d) if is_simple_descr_of(&d, &typestr_v) => Some(Descr::simple(t)),
        Some(_) => return None,
        None => None,
    };
    let stream = match stream {
        Some(s) if S::DEVICE && !s.is_none() => {
            Some(Stream::from_raw(u64::try_from(exact_int(&s)?).ok()?).ok()?)
        }
        Some(_) if !S::DEVICE => {
            others = true;
            None
        }
        _ => None,
    };
    let descriptor = ArrayDescriptor::<S> {
        shape,
        typestr: t,
        descr,
        data,
        strides,
        mask: None,
        version,
        stream: S::stream_entry(stream),
    };
    let layout = descriptor.valid_layout()?;
    Some((descriptor, layout, others))
}

/// The free-threaded build reads every descriptor with the full parser.
#[cfg(Py_GIL_DISABLED)]
pub(super) fn import<S: Space>(_: &Bound<'_, PyAny>) -> Option<Fast<S>> {
    None
}

/// Whether two exact `str`s have the same text, by CPython's text comparison, which runs no
/// Python code and cannot fail; `None` unless both are exact `str`s (a subclass's `__eq__`
/// could run Python code).
pub(super) fn exact_text_eq(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> Option<bool> {
    if !(a.is_exact_instance_of::<PyString>() && b.is_exact_instance_of::<PyString>()) {
        return None;
    }
    // SAFETY: both are live exact `str`s, for which the comparison cannot fail.
    Some(unsafe { ffi::PyUnicode_Compare(a.as_ptr(), b.as_ptr()) } == 0)
}

/// The value of an exact `int` (never a bool, which has its own type) that fits 64 bits, read
/// in one C call with no type-flag lookups: the fast read of an integer, for what callers
/// nearly always pass. `None` for anything else (a bool, an `int` subclass, a NumPy integer,
/// an `int` beyond 64 bits), which the caller then reads the general way ([`int_like`],
/// `__index__`), with its own errors.
///
/// [`int_like`]: super::parse::int_like
pub fn exact_int(v: &Bound<'_, PyAny>) -> Option<i64> {
    if !v.is_exact_instance_of::<PyInt>() {
        return None;
    }
    let mut overflow: std::os::raw::c_int = 0;
    // SAFETY: `v` is a live exact `int`; for an `int` the call cannot fail other than by
    // overflow, which it reports in `overflow` without raising.
    let n = unsafe { ffi::PyLong_AsLongLongAndOverflow(v.as_ptr(), &mut overflow) };
    (overflow == 0).then_some(n)
}

/// An exact 2-tuple of exact ints that fit 64 bits (`__dlpack__`'s `max_version` and
/// `dl_device` as every consumer sends them), read without new references.
pub fn exact_int_pair(v: &Bound<'_, PyAny>) -> Option<(i64, i64)> {
    let t = v.cast_exact::<PyTuple>().ok()?;
    if t.len() != 2 {
        return None;
    }
    let item = |i| t.get_borrowed_item(i).ok().and_then(|x| exact_int(&x));
    Some((item(0)?, item(1)?))
}

/// An exact tuple of exact ints, each converted to `T`.
fn ints<T: TryFrom<i64>>(v: &Bound<'_, PyAny>) -> Option<Vec<T>> {
    let t = v.cast_exact::<PyTuple>().ok()?;
    let mut out = Vec::with_capacity(t.len());
    for item in t.iter_borrowed() {
        out.push(T::try_from(exact_int(&item)?).ok()?);
    }
    Some(out)
}

/// `(pointer, read-only flag)`: an exact 2-tuple of an `int` and a `bool`.
fn data_entry(v: &Bound<'_, PyAny>) -> Option<Data> {
    let t = v.cast_exact::<PyTuple>().ok()?;
    if t.len() != 2 {
        return None;
    }
    let ptr = u64::try_from(exact_int(&*t.get_borrowed_item(0).ok()?)?).ok()?;
    let readonly = t.get_borrowed_item(1).ok()?;
    if !readonly.is_exact_instance_of::<PyBool>() {
        return None;
    }
    Some(Data {
        ptr,
        readonly: readonly.is(PyBool::new(v.py(), true)),
    })
}
