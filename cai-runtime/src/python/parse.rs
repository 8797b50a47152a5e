//! Reading a foreign `__cuda_array_interface__` / `__array_interface__` dict.
//!
//! One parser serves import and the conformance checker: it reads every key it can and
//! records every [`Problem`] (key, offending value, exception type, spec rule) instead of
//! stopping at the first, so `check()` reports all of them while import raises the first.
//! It never panics: every value is type-checked before use, and integers are range-checked.

use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use std::sync::Arc;

use pyo3::ffi;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};

use super::Memo;
use super::buffer::{Held, HeldBuffer};
use super::fast::{KEYS, exact_int, exact_text_eq, names};
use super::rules::{self, Rule};
use crate::descriptor::{ArrayDescriptor, Data, Space};
use crate::error::DescriptorError;
use crate::layout::{Layout, MAX_NDIM};
use crate::stream::Stream;
use crate::structured::{Descr, DescrField, DescrFormat};
use crate::typestr::TypeStr;

/// The Python exception a problem raises on import.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExcKind {
    /// `KeyError`: a required key is missing (as CuPy and Numba raise).
    Key,
    /// `TypeError`: a value of the wrong type (and unparsable typestrs, as CuPy and Numba).
    Type,
    /// `ValueError`: a value of the right type that breaks a rule.
    Value,
}

impl ExcKind {
    /// The exception's Python name.
    pub fn name(self) -> &'static str {
        match self {
            ExcKind::Key => "KeyError",
            ExcKind::Type => "TypeError",
            ExcKind::Value => "ValueError",
        }
    }

    /// The exception, with `message`.
    pub fn err(self, message: String) -> PyErr {
        match self {
            ExcKind::Key => PyKeyError::new_err(message),
            ExcKind::Type => PyTypeError::new_err(message),
            ExcKind::Value => PyValueError::new_err(message),
        }
    }
}

/// Whether a problem breaks the spec or only an interoperability expectation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Severity {
    /// Breaks a "must" of the spec.
    Error,
    /// Legal, but a known consumer fails on it (named in the message).
    Warning,
}

/// One thing wrong with a descriptor.
#[derive(Clone, Debug)]
pub struct Problem {
    /// The key, with a path for nested values (`data[0]`, `descr[1]`, `mask.shape`).
    pub key: String,
    /// What is wrong, naming the value.
    pub message: String,
    /// The exception import raises for it.
    pub exc: ExcKind,
    /// The spec rule it breaks.
    pub rule: Rule,
    /// Error or warning.
    pub severity: Severity,
    /// Whether import tolerates it (legacy producers): zero-size arrays with a real pointer,
    /// a stream declared in a version before 3.
    pub tolerated: bool,
    /// The exception the producer's own code raised while the key was read (a getter, an
    /// `__index__`, a key's `__eq__`): import and the checker raise it as it is.
    pub raised: Option<Arc<PyErr>>,
}

impl Problem {
    pub(super) fn new(
        key: impl Into<String>,
        exc: ExcKind,
        rule: Rule,
        message: impl Into<String>,
    ) -> Self {
        Problem {
            key: key.into(),
            message: message.into(),
            exc,
            rule,
            severity: Severity::Error,
            tolerated: false,
            raised: None,
        }
    }

    /// The exception `e` that the producer's code raised while `key` was read.
    pub(crate) fn raised(key: impl Into<String>, e: PyErr) -> Self {
        Problem {
            raised: Some(Arc::new(e)),
            ..Problem::new(key, ExcKind::Type, rules::DICT, "raised an exception")
        }
    }

    fn prefixed(mut self, prefix: &str) -> Self {
        self.key = format!("{prefix}.{}", self.key);
        self
    }

    /// The Python exception import raises: the producer's own exception where it raised one.
    pub fn to_pyerr(&self) -> PyErr {
        if let Some(e) = &self.raised {
            return Python::attach(|py| e.clone_ref(py));
        }
        self.exc.err(if self.key.is_empty() {
            self.message.clone()
        } else {
            format!("{}: {}", self.key, self.message)
        })
    }

    /// A problem for a descriptor that parsed but breaks a rule.
    pub fn from_descriptor_error(e: &DescriptorError, attribute: &str) -> Problem {
        let tolerated = matches!(
            rules::innermost(e),
            DescriptorError::ZeroSizeData { .. } | DescriptorError::StreamNeedsV3 { .. }
        );
        let key = match e {
            DescriptorError::Mask(inner) => format!("mask.{}", inner.key()),
            _ => e.key().to_owned(),
        };
        Problem {
            key,
            message: e.to_string(),
            exc: ExcKind::Value,
            rule: rules::for_error(e, attribute),
            severity: Severity::Error,
            tolerated,
            raised: None,
        }
    }
}

/// `repr()` of a Python value for messages, shortened to 80 characters; never fails (a
/// `repr` that raises gives a placeholder, and is not reported as an ignored exception).
pub fn show(v: &Bound<'_, PyAny>) -> String {
    match v.repr() {
        Ok(r) => crate::shown::shorten(&r.to_string_lossy()).into_owned(),
        Err(_) => "<unrepresentable>".to_owned(),
    }
}

/// `ours` where the conversion's error `e` says only that the value is not of the type asked
/// for (a TypeError), naming what `ours` names; `e` as it is where the value's own code raised
/// something else while it was read (an `__iter__`, `__len__` or `__bool__`; a
/// KeyboardInterrupt), which propagates.
pub fn type_error_or(e: PyErr, ours: impl FnOnce() -> PyErr) -> PyErr {
    if Python::attach(|py| e.is_instance_of::<PyTypeError>(py)) {
        ours()
    } else {
        e
    }
}

/// "`shown`: `count`, but an array has at most 64 dimensions": the words every reader of
/// per-dimension values refuses too many with (`count` says what: "65 entries").
fn too_many_dims(shown: &str, count: impl std::fmt::Display) -> String {
    format!("{shown}: {count}, but an array has at most {MAX_NDIM} dimensions (NumPy's limit)")
}

/// `f` applied to each item of `v`, a foreign sequence or iterable with one entry per
/// dimension (a shape, a halo, dimension names...), the argument being `key`: at most
/// [`MAX_NDIM`] items are read, and one more only to tell that there are more (then a
/// `ValueError` naming `key`), so an endless iterator ends at once. A foreign `__len__` is
/// only ever compared with the limit, never trusted to reserve memory: one over the limit is
/// refused before anything is read, one that raises propagates (but a `TypeError`: no length,
/// the items are counted), one that does not fit an index is refused naming `key`. Tuples and
/// lists are read directly. `not_iterable` makes the error for what is no iterable at all;
/// the iterator's own errors propagate.
pub fn dimension_items<'py, T, C: FromIterator<T>>(
    key: &str,
    v: &Bound<'py, PyAny>,
    not_iterable: impl FnOnce() -> PyErr,
    mut f: impl FnMut(usize, &Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<C> {
    let too_many = |n: &dyn std::fmt::Display| {
        PyValueError::new_err(format!(
            "{key} = {}",
            too_many_dims(&show(v), format!("{n} entries"))
        ))
    };
    if let Ok(t) = v.cast::<PyTuple>() {
        if t.len() > MAX_NDIM {
            return Err(too_many(&t.len()));
        }
        // Borrowed: the tuple holds its items for the call (in the stable ABI each reference
        // count change is a C call).
        return t
            .iter_borrowed()
            .enumerate()
            .map(|(i, x)| f(i, &x))
            .collect();
    }
    if let Ok(l) = v.cast::<PyList>() {
        if l.len() > MAX_NDIM {
            return Err(too_many(&l.len()));
        }
        // A list may grow while its items' own code runs: the bound holds all the same.
        return l
            .iter()
            .take(MAX_NDIM + 1)
            .enumerate()
            .map(|(i, x)| match i {
                MAX_NDIM => Err(too_many(&format!("more than {MAX_NDIM}"))),
                _ => f(i, &x),
            })
            .collect();
    }
    let py = v.py();
    match v.len() {
        Ok(n) if n > MAX_NDIM => return Err(too_many(&n)),
        Ok(_) => {}
        Err(e) if e.is_instance_of::<PyTypeError>(py) => {}
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py) => {
            return Err(too_many(&format!("more than {}", isize::MAX)));
        }
        Err(e) => return Err(e),
    }
    v.try_iter()
        .map_err(|e| type_error_or(e, not_iterable))?
        .take(MAX_NDIM + 1)
        .enumerate()
        .map(|(i, x)| match i {
            MAX_NDIM => Err(too_many(&format!("more than {MAX_NDIM}"))),
            _ => f(i, &x?),
        })
        .collect()
}

/// The one-letter dimension names a str stands for (`"IJK"`), the argument being `key`: as
/// [`dimension_items`], at most [`MAX_NDIM`] (a longer str is a `ValueError` before anything is
/// made of it).
pub fn dimension_letters(key: &str, s: &Bound<'_, PyString>) -> PyResult<Vec<String>> {
    let text = s.to_str()?;
    let n = text.chars().take(MAX_NDIM + 1).count();
    if n > MAX_NDIM {
        let letters = format!("{} letters", text.chars().count());
        let message = too_many_dims(&show(s.as_any()), letters);
        return Err(PyValueError::new_err(format!("{key} = {message}")));
    }
    Ok(text.chars().map(String::from).collect())
}

/// The type's name for messages, with its module unless it is a builtin: `int`,
/// `numpy.int64` (whose own name, `int64`, reads like a kind of `int`), `numpy.bool`.
pub fn type_name(v: &Bound<'_, PyAny>) -> String {
    v.get_type()
        .fully_qualified_name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".to_owned())
}

/// Whether `v` is an integer as NumPy reads one in `shape` and `strides`: an `int` (not a
/// bool), or an object converting to one through `__index__` (NumPy's integer scalars; its
/// type's slot, so the class `int` is not one).
pub fn int_like(v: &Bound<'_, PyAny>) -> bool {
    // SAFETY: `v` is a live object; PyIndex_Check only reads its type.
    !v.is_instance_of::<PyBool>()
        && (v.is_instance_of::<PyInt>() || unsafe { ffi::PyIndex_Check(v.as_ptr()) } != 0)
}

/// Why a value is not an int in range.
enum NotInt {
    /// Not an int, or out of range: the exception to raise and a message naming the value.
    Bad(ExcKind, String),
    /// Its `__index__` raised this.
    Raised(PyErr),
}

impl NotInt {
    /// The problem for `key`.
    fn at(self, key: &str, rule: Rule) -> Problem {
        match self {
            NotInt::Bad(exc, message) => Problem::new(key, exc, rule, message),
            NotInt::Raised(e) => Problem::raised(key, e),
        }
    }
}

/// A Python int (not a bool) as i128, and whether it was read through `__index__` (an
/// integer that is not an `int`, such as `numpy.int64`); or why it is not one (`"not an int"`,
/// `"an int too large"`). The outer error is the exception the value's own `__index__` raised.
/// The one integer reader: descriptors, `__dlpack__`'s arguments and the package's arguments
/// all read ints through it.
pub fn int(v: &Bound<'_, PyAny>) -> PyResult<Result<(i128, bool), &'static str>> {
    // What every producer sends first: an exact `int` that fits 64 bits.
    if let Some(n) = exact_int(v) {
        return Ok(Ok((n.into(), false)));
    }
    if !int_like(v) {
        return Ok(Err("not an int"));
    }
    let loose = !v.is_instance_of::<PyInt>();
    let converted;
    let v = if loose {
        // SAFETY: `v` is a live object; PyNumber_Index returns a new reference to an `int`,
        // or NULL with an exception set, which `from_owned_ptr_or_err` takes.
        converted =
            unsafe { Bound::from_owned_ptr_or_err(v.py(), ffi::PyNumber_Index(v.as_ptr())) }?;
        &converted
    } else {
        v
    };
    // The common case first: i64 extraction is one C call; i128 is the slow path for the rest.
    if let Ok(n) = v.extract::<i64>() {
        return Ok(Ok((n.into(), loose)));
    }
    Ok(v.extract::<i128>()
        .map(|n| (n, loose))
        .map_err(|_| "an int too large"))
}

/// The note for a value import reads although the spec asks for another type: an error of
/// the spec that import tolerates, as NumPy does.
fn tolerated(key: &str, rule: Rule, message: String) -> Problem {
    Problem {
        tolerated: true,
        ..Problem::new(key, ExcKind::Type, rule, message)
    }
}

/// Notes a `shape` or `strides` given as a list, which import reads as Numba does.
fn note_list(key: &str, v: &Bound<'_, PyAny>, rule: Rule, notes: &mut Vec<Problem>) {
    if v.is_instance_of::<PyList>() {
        notes.push(tolerated(
            key,
            rule,
            format!(
                "{} is a list: the spec asks for a tuple; import reads it as Numba does, but NumPy and CuPy refuse it",
                show(v)
            ),
        ));
    }
}

/// An integer in `T`'s range, and whether it was read through `__index__`; or the exception
/// and message (naming the value, not the key) for what is not one.
fn int_value<T: TryFrom<i128>>(v: &Bound<'_, PyAny>, what: &str) -> Result<(T, bool), NotInt> {
    match int(v).map_err(NotInt::Raised)? {
        Ok((n, loose)) => T::try_from(n).map(|n| (n, loose)).map_err(|_| {
            NotInt::Bad(
                ExcKind::Value,
                format!("{} is out of range: expected {what}", show(v)),
            )
        }),
        Err(why) => Err(NotInt::Bad(
            ExcKind::Type,
            format!(
                "{} is {why} (type {}): expected {what}",
                show(v),
                type_name(v)
            ),
        )),
    }
}

/// An integer in `T`'s range; one read through `__index__` is noted in `notes`.
fn int_in<T: TryFrom<i128>>(
    key: &str,
    v: &Bound<'_, PyAny>,
    rule: Rule,
    what: &str,
    notes: &mut Vec<Problem>,
) -> Result<T, Problem> {
    let (n, loose) = int_value(v, what).map_err(|e| e.at(key, rule))?;
    if loose {
        notes.push(tolerated(
            key,
            rule,
            format!(
                "{} is not an int (type {}): the spec asks for a Python int; import reads it through __index__, as NumPy reads shape and strides, but other consumers may refuse it",
                show(v),
                type_name(v)
            ),
        ));
    }
    Ok(n)
}

/// The items of a tuple or list, the sequences the interfaces hold.
fn tuple_or_list<'py>(v: &Bound<'py, PyAny>) -> Option<Vec<Bound<'py, PyAny>>> {
    if let Ok(t) = v.cast::<PyTuple>() {
        Some(t.iter().collect())
    } else {
        v.cast::<PyList>().ok().map(|l| l.iter().collect())
    }
}

/// GDP-3's `halo`: a tuple (or list) of `(start, end)` pairs of non-negative ints, each read
/// as `shape`'s items are (NumPy integers too, bools not). An error is a TypeError or
/// ValueError naming the entry (`key[1][0]`) and its value.
pub fn size_pairs(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Vec<(usize, usize)>> {
    let not_pairs = || {
        PyTypeError::new_err(format!(
            "{key} = {} is not a sequence of (start, end) pairs of non-negative ints",
            show(v)
        ))
    };
    let size = |i: usize, j: usize, x: &Bound<'_, PyAny>| {
        int_value::<usize>(x, "a non-negative int")
            .map(|(n, _)| n)
            .map_err(|e| e.at(&format!("{key}[{i}][{j}]"), rules::DICT).to_pyerr())
    };
    tuple_or_list(v)
        .ok_or_else(not_pairs)?
        .iter()
        .enumerate()
        .map(|(i, pair)| match tuple_or_list(pair).as_deref() {
            Some([start, end]) => Ok((size(i, 0, start)?, size(i, 1, end)?)),
            _ => Err(not_pairs()),
        })
        .collect()
}

/// A tuple (or list, which Numba takes: see [`note_list`]) of ints.
fn int_sequence<T: TryFrom<i128>>(
    key: &str,
    v: &Bound<'_, PyAny>,
    rule: Rule,
    what: &str,
    notes: &mut Vec<Problem>,
) -> Result<Vec<T>, Problem> {
    // At most one entry per dimension of an array (NumPy's limit), told before any is read.
    let len = v
        .cast::<PyTuple>()
        .map(|t| t.len())
        .or_else(|_| v.cast::<PyList>().map(|l| l.len()))
        .unwrap_or(0);
    if len > MAX_NDIM {
        return Err(Problem::new(
            key,
            ExcKind::Value,
            rule,
            too_many_dims(&show(v), format!("{len} entries")),
        ));
    }
    // A problem or note about an item names the sequence and the item's index.
    let at =
        |i: usize, p: &mut Problem| p.message = format!("{} has item {i} = {}", show(v), p.message);
    let mut convert = |i: usize, item: &Bound<'_, PyAny>| {
        let noted = notes.len();
        let n = int_in(key, item, rule, what, notes).map_err(|mut p| {
            at(i, &mut p);
            p
        })?;
        notes[noted..].iter_mut().for_each(|note| at(i, note));
        Ok(n)
    };
    if let Ok(t) = v.cast::<PyTuple>() {
        let mut out = Vec::with_capacity(t.len());
        for (i, item) in t.iter_borrowed().enumerate() {
            out.push(convert(i, &item)?);
        }
        Ok(out)
    } else if let Ok(l) = v.cast::<PyList>() {
        // A snapshot of the items, taken running no Python code: an item's `__index__` may
        // grow the list while it is read, which would then never end.
        let items: Vec<_> = l.iter().collect();
        items
            .iter()
            .enumerate()
            .map(|(i, item)| convert(i, item))
            .collect()
    } else {
        Err(Problem::new(
            key,
            ExcKind::Type,
            rule,
            format!(
                "{} has type {}: expected a tuple of {what}",
                show(v),
                type_name(v)
            ),
        ))
    }
}

/// `dict[key]`, or None; an exception a key's `__eq__` or `__hash__` raised propagates.
fn get<'py>(
    dict: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    dict.get_item(key)
}

/// The values of a descriptor dict's known keys ([`KEYS`]), read in one pass over the dict
/// ([`super::fast::walk`]) and owned. When some key cannot be compared there (a `str`
/// subclass, or not a `str`), the keys not yet found are looked up as the dict would.
struct Entries<'py> {
    values: [Option<Bound<'py, PyAny>>; KEYS.len()],
}

impl<'py> Entries<'py> {
    fn read(dict: &Bound<'py, PyDict>) -> PyResult<Self> {
        let py = dict.py();
        #[cfg(not(Py_GIL_DISABLED))]
        let (mut values, unmatched) = {
            let (borrowed, unmatched) = super::fast::walk(dict);
            // SAFETY: borrowed from `dict` just now, with no Python code run since; each
            // value becomes an owned reference here.
            let owned = borrowed.map(|p| unsafe { Bound::from_borrowed_ptr_or_opt(py, p) });
            (owned, unmatched)
        };
        #[cfg(Py_GIL_DISABLED)]
        let (mut values, unmatched) = (Default::default(), true);
        if unmatched {
            for (value, name) in values.iter_mut().zip(names(py)) {
                if value.is_none() {
                    *value = get(dict, name.bind(py))?;
                }
            }
        }
        Ok(Entries { values })
    }

    /// The value of `key` (one of [`KEYS`]), if the dict has it.
    fn take(&mut self, key: &str) -> Option<Bound<'py, PyAny>> {
        let i = KEYS.iter().position(|k| *k == key)?;
        self.values[i].take()
    }
}

/// Recently seen type strings, keyed on the `str` object and its hash: NumPy and the GPU
/// libraries send a new `str` object on every export, but of a handful of values; comparing
/// with a known one is cheaper than decoding and parsing it.
static TYPESTRS: Memo<(isize, Py<PyString>), TypeStr, 32> = Memo::new();

fn known_typestr(s: &Bound<'_, PyString>) -> Option<TypeStr> {
    // Only exact `str`: a subclass's `__eq__`/`__hash__` could run Python code (and re-enter
    // import) while the memo is locked.
    if !s.is_exact_instance_of::<PyString>() {
        return None;
    }
    let hash = s.hash().ok()?;
    TYPESTRS.get(
        |(h, known)| *h == hash && (known.is(s) || same_text(known.bind(s.py()).as_any(), s)),
        |t| *t,
    )
}

fn remember_typestr(s: &Bound<'_, PyString>, t: TypeStr) {
    if !s.is_exact_instance_of::<PyString>() {
        return;
    }
    if let Ok(hash) = s.hash() {
        TYPESTRS.insert((hash, s.clone().unbind()), t);
    }
}

pub(super) fn typestr(key: &str, v: &Bound<'_, PyAny>, rule: Rule) -> Result<TypeStr, Problem> {
    let s = v.cast::<PyString>().map_err(|_| {
        Problem::new(
            key,
            ExcKind::Type,
            rule,
            format!(
                "{} has type {}: expected a str such as '<f4'",
                show(v),
                type_name(v)
            ),
        )
    })?;
    if let Some(t) = known_typestr(s) {
        return Ok(t);
    }
    let text = s
        .to_cow()
        .map_err(|_| Problem::new(key, ExcKind::Type, rule, "is not valid UTF-8"))?;
    // CuPy and Numba both raise TypeError for type strings NumPy does not understand.
    let t =
        TypeStr::parse(&text).map_err(|e| Problem::new(key, ExcKind::Type, rule, e.to_string()))?;
    remember_typestr(s, t);
    Ok(t)
}

/// Reads a `descr` list (NumPy's `dtype.descr`), raising the import's exception.
pub fn parse_descr(v: &Bound<'_, PyAny>) -> PyResult<Descr> {
    descr_entry(v, &mut Vec::new()).map_err(|p| p.to_pyerr())
}

/// A descriptor's `descr` entry, read with the whole budget of entries.
fn descr_entry(v: &Bound<'_, PyAny>, notes: &mut Vec<Problem>) -> Result<Descr, Problem> {
    let mut budget = MAX_DESCR_ENTRIES;
    descr("descr", v, 0, &mut budget, notes)
}

/// The most entries a `descr` list may have in all, a nested list counted each time it
/// appears: a few shared lists nested in one another stand for exponentially many entries,
/// which are refused rather than built.
const MAX_DESCR_ENTRIES: usize = 1 << 16;

fn descr(
    key: &str,
    v: &Bound<'_, PyAny>,
    depth: usize,
    budget: &mut usize,
    notes: &mut Vec<Problem>,
) -> Result<Descr, Problem> {
    let rule = rules::DESCR;
    if depth > 16 {
        return Err(Problem::new(
            key,
            ExcKind::Value,
            rule,
            "is nested more than 16 levels deep",
        ));
    }
    let list = v.cast::<PyList>().map_err(|_| {
        Problem::new(
            key,
            ExcKind::Type,
            rule,
            format!(
                "{} has type {}: expected a list of (name, format[, shape]) tuples",
                show(v),
                type_name(v)
            ),
        )
    })?;
    if list.len() > *budget {
        return Err(Problem::new(
            key,
            ExcKind::Value,
            rule,
            format!(
                "has more than {MAX_DESCR_ENTRIES} entries in all (a nested list counts each time it appears)"
            ),
        ));
    }
    *budget -= list.len();
    // A snapshot of the entries, taken running no Python code: a sub-array shape's
    // `__index__` may grow the list while it is read, which would then never end.
    let entries: Vec<_> = list.iter().collect();
    let mut fields = Vec::with_capacity(entries.len());
    for (i, item) in entries.into_iter().enumerate() {
        let k = format!("{key}[{i}]");
        let bad = |msg: String| Problem::new(k.clone(), ExcKind::Type, rule, msg);
        let t = item
            .cast::<PyTuple>()
            .ok()
            .filter(|t| (2..=3).contains(&t.len()))
            .ok_or_else(|| {
                bad(format!(
                    "{} is not a (name, format) or (name, format, shape) tuple",
                    show(&item)
                ))
            })?;
        let name_obj = t.get_item(0).map_err(|_| bad("has no name".into()))?;
        let (title, name) = if let Ok(pair) = name_obj.cast::<PyTuple>() {
            let strs: Vec<String> = pair
                .iter()
                .filter_map(|x| x.extract::<String>().ok())
                .collect();
            match strs.as_slice() {
                [title, name] if pair.len() == 2 => (Some(title.clone()), name.clone()),
                _ => {
                    return Err(bad(format!(
                        "name {} is not a str or a (title, name) pair of str",
                        show(&name_obj)
                    )));
                }
            }
        } else {
            let name = name_obj
                .extract::<String>()
                .map_err(|_| bad(format!("name {} is not a str", show(&name_obj))))?;
            (None, name)
        };
        let fmt = t.get_item(1).map_err(|_| bad("has no format".into()))?;
        let format = if fmt.is_instance_of::<PyList>() {
            DescrFormat::Nested(descr(&k, &fmt, depth + 1, budget, notes)?)
        } else {
            DescrFormat::Type(typestr(&k, &fmt, rule)?)
        };
        let shape = match t.get_item(2) {
            Ok(s) if t.len() == 3 => {
                if int_like(&s) {
                    vec![int_in(&k, &s, rule, "a non-negative int", notes)?]
                } else {
                    int_sequence(&k, &s, rule, "non-negative ints", notes)?
                }
            }
            _ => Vec::new(),
        };
        fields.push(DescrField {
            name,
            title,
            format,
            shape,
        });
    }
    Ok(Descr(fields))
}

/// Whether `v` is `[('', t)]` for the type string object `t`: exact types only (`t` too),
/// anything else goes to the full `descr` reader. Runs no Python code: each object is checked
/// to be an exact builtin before any call on it.
pub(super) fn is_simple_descr_of(v: &Bound<'_, PyAny>, t: &Bound<'_, PyAny>) -> bool {
    if !t.is_exact_instance_of::<PyString>() {
        return false;
    }
    let Ok(list) = v.cast_exact::<PyList>() else {
        return false;
    };
    if list.len() != 1 {
        return false;
    }
    // SAFETY: `list` is a live exact list of one item, so index 0 is in range and the call
    // returns a reference borrowed from the list (no error is set); the item stays alive while
    // `list` does, and nothing here runs Python code that could change the list.
    let item = unsafe { Borrowed::from_ptr_or_opt(v.py(), ffi::PyList_GetItem(list.as_ptr(), 0)) };
    let Some(tuple) = item.and_then(|i| i.cast_exact::<PyTuple>().ok()) else {
        return false;
    };
    if tuple.len() != 2 {
        return false;
    }
    let (Ok(name), Ok(format)) = (tuple.get_borrowed_item(0), tuple.get_borrowed_item(1)) else {
        return false;
    };
    name.cast_exact::<PyString>()
        .is_ok_and(|n| n.len().is_ok_and(|l| l == 0))
        && format.is_exact_instance_of::<PyString>()
        && (format.is(t) || same_text(&format, t))
}

/// Whether two exact `str`s have the same text ([`exact_text_eq`]); false for anything else,
/// whose `__eq__` is never run here.
fn same_text(a: &Bound<'_, PyAny>, b: &Bound<'_, PyAny>) -> bool {
    exact_text_eq(a, b) == Some(true)
}

/// What the parser found: the descriptor when every key could be read, and every problem.
pub struct Parsed<S: Space> {
    /// The descriptor, if every key parsed (it may still break rules: see `problems`).
    pub descriptor: Option<ArrayDescriptor<S>>,
    /// Every problem, in key order.
    pub problems: Vec<Problem>,
    /// The layout, when the descriptor has one.
    pub layout: Option<Layout>,
    /// What the bytes depend on besides the dict and its exporter: the masks' objects and
    /// dicts, and the buffers the host descriptor's bytes (and its masks') lie in, when `data`
    /// was a buffer or the exporter's own ([`HeldBuffer`]); the data pointers are valid while
    /// these are held.
    pub held: Held,
}

/// What import keeps of a descriptor: itself, its layout, and what its bytes depend on.
pub type Read<S> = (ArrayDescriptor<S>, Layout, Held);

impl<S: Space> Parsed<S> {
    fn failed(problems: Vec<Problem>) -> Self {
        Parsed {
            descriptor: None,
            problems,
            layout: None,
            held: Held::default(),
        }
    }

    /// The first exception the producer's code raised while the dict was read, if any.
    pub fn raised(&self) -> Option<PyErr> {
        self.problems
            .iter()
            .find(|p| p.raised.is_some())
            .map(Problem::to_pyerr)
    }

    /// The descriptor, or the first problem import does not tolerate, as a Python exception
    /// (an exception the producer's code raised first, as it is).
    pub fn into_result(self) -> PyResult<Read<S>> {
        if let Some(e) = self.raised() {
            return Err(e);
        }
        if let Some(p) = self
            .problems
            .iter()
            .find(|p| p.severity == Severity::Error && !p.tolerated)
        {
            return Err(p.to_pyerr());
        }
        let held = self.held;
        self.descriptor
            .zip(self.layout)
            .map(|(d, l)| (d, l, held))
            .ok_or_else(|| PyValueError::new_err("descriptor could not be read"))
    }
}

const MAX_MASK_DEPTH: usize = 8;

/// Reads the interface attribute of `obj` (`__cuda_array_interface__` or `__array_interface__`).
pub fn interface_of<'py, S: Space>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    match obj.getattr(attribute_name::<S>(obj.py())) {
        Ok(v) => Ok(v),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(obj.py()) => {
            Err(PyTypeError::new_err(format!(
                "object of type {} does not expose {}",
                type_name(obj),
                S::ATTRIBUTE
            )))
        }
        Err(e) => Err(e),
    }
}

/// The interned attribute name of protocol `S` (no string is made or hashed per lookup).
pub(crate) fn attribute_name<S: Space>(py: Python<'_>) -> &Bound<'_, PyString> {
    if S::DEVICE {
        intern!(py, "__cuda_array_interface__")
    } else {
        intern!(py, "__array_interface__")
    }
}

/// Parses a descriptor dict of protocol `S` that no object exposes (a host descriptor without
/// `data` has no buffer to fall back on).
pub fn parse<S: Space>(desc: &Bound<'_, PyAny>) -> Parsed<S> {
    parse_at::<S>(desc, None, 0)
}

/// Parses the descriptor dict `exporter` exposes (or its owner's), if any: a host descriptor
/// whose `data` is absent or `None` shares `exporter`'s buffer, as NumPy reads it.
pub fn parse_exposed<S: Space>(
    desc: &Bound<'_, PyAny>,
    exporter: Option<&Bound<'_, PyAny>>,
) -> Parsed<S> {
    parse_at::<S>(desc, exporter, 0)
}

fn parse_at<S: Space>(
    desc: &Bound<'_, PyAny>,
    exporter: Option<&Bound<'_, PyAny>>,
    depth: usize,
) -> Parsed<S> {
    let mut problems = Vec::new();
    let Ok(dict) = desc.cast::<PyDict>() else {
        problems.push(Problem::new(
            "",
            ExcKind::Type,
            rules::DICT,
            format!("{} has type {}, not dict", S::ATTRIBUTE, type_name(desc)),
        ));
        return Parsed::failed(problems);
    };
    let device = S::DEVICE;
    let mut entries = match Entries::read(dict) {
        Ok(entries) => entries,
        Err(e) => return Parsed::failed(vec![Problem::raised("", e)]),
    };
    fn required<'py, S: Space>(
        entries: &mut Entries<'py>,
        key: &str,
        rule: Rule,
        problems: &mut Vec<Problem>,
    ) -> Option<Bound<'py, PyAny>> {
        let v = entries.take(key);
        if v.is_none() {
            problems.push(Problem::new(
                key,
                ExcKind::Key,
                rule,
                format!(
                    "required key missing: {} must contain '{key}'",
                    S::ATTRIBUTE
                ),
            ));
        }
        v
    }
    let p = &mut problems;
    let e = &mut entries;
    let shape_v = required::<S>(e, "shape", rules::SHAPE, p);
    let typestr_v = required::<S>(e, "typestr", rules::TYPESTR, p);
    // NumPy's host interface may leave `data` out: the exporter's buffer is shared.
    let data_v = if device {
        required::<S>(e, "data", rules::DATA, p)
    } else {
        e.take("data")
    };
    let version_v = if device {
        required::<S>(e, "version", rules::VERSION, p)
    } else {
        e.take("version")
    };
    let typestr_obj = typestr_v.clone();

    let shape = shape_v.and_then(|v| {
        note_list("shape", &v, rules::SHAPE, &mut problems);
        ok(
            int_sequence::<usize>(
                "shape",
                &v,
                rules::SHAPE,
                "non-negative ints",
                &mut problems,
            ),
            &mut problems,
        )
    });
    let typestr = typestr_v.and_then(|v| ok(typestr("typestr", &v, rules::TYPESTR), &mut problems));
    let mut own_buffer = None;
    let data = if device {
        data_v.and_then(|v| ok(data_entry(&v, &mut problems), &mut problems))
    } else {
        let read = host_data(dict, data_v, exporter, &mut problems);
        ok(read, &mut problems).map(|(data, buffer)| {
            own_buffer = buffer;
            data
        })
    };
    let version = match version_v {
        Some(v) => ok(
            int_in::<u32>(
                "version",
                &v,
                rules::VERSION,
                "a non-negative int",
                &mut problems,
            ),
            &mut problems,
        ),
        None => Some(S::DEFAULT_VERSION),
    };
    let strides = match entries.take("strides") {
        None => Some(None),
        Some(v) if v.is_none() => Some(None),
        Some(v) => {
            note_list("strides", &v, rules::STRIDES, &mut problems);
            let read = int_sequence::<isize>(
                "strides",
                &v,
                rules::STRIDES,
                "byte strides (ints)",
                &mut problems,
            );
            ok(read, &mut problems).map(Some)
        }
    };
    let descr = match entries.take("descr") {
        None => Some(None),
        // What NumPy and CuPy send for plain types: `[('', typestr)]`, checked without
        // decoding anything.
        Some(v)
            if typestr.is_some()
                && typestr_obj
                    .as_ref()
                    .is_some_and(|t| is_simple_descr_of(&v, t)) =>
        {
            typestr.map(|t| Some(Descr::simple(t)))
        }
        Some(v) => ok(descr_entry(&v, &mut problems), &mut problems).map(Some),
    };
    let mut held = Held::default();
    let mask = match entries.take("mask") {
        None => Some(None),
        Some(v) if v.is_none() => Some(None),
        Some(v) => ok(mask::<S>(&v, depth), &mut problems).map(|(mask, mask_held)| {
            held.extend(mask_held);
            Some(mask)
        }),
    };
    let stream = if device {
        match entries.take("stream") {
            None => Some(None),
            Some(v) if v.is_none() => Some(None),
            Some(v) => ok(stream_entry(&v, &mut problems), &mut problems).map(Some),
        }
    } else {
        Some(None)
    };

    // The required keys must all be readable to check any rule.
    let (Some(shape), Some(typestr), Some(data), Some(version)) = (shape, typestr, data, version)
    else {
        return Parsed::failed(problems);
    };
    // A buffer's exporter vouches for bytes, not for object references: NumPy would read such
    // items as pointers to objects that were never there.
    let objects = typestr.kind() == crate::typestr::Kind::Object
        || descr
            .as_ref()
            .and_then(Option::as_ref)
            .is_some_and(Descr::has_object);
    if own_buffer.is_some() && objects {
        problems.push(Problem::new(
            "typestr",
            ExcKind::Value,
            rules::DATA_BUFFER,
            format!(
                "'{typestr}' (with its descr) holds Python object references, but data comes through the buffer protocol, whose bytes are no objects"
            ),
        ));
    }
    // An unreadable optional key is already reported; check the other rules as if it were
    // absent, so that every violation is found. Import then fails on the earlier problem.
    let complete = strides.is_some() && descr.is_some() && mask.is_some() && stream.is_some();
    let descriptor = ArrayDescriptor::<S> {
        shape,
        typestr,
        descr: descr.flatten(),
        data,
        strides: strides.flatten(),
        mask: mask.flatten().map(Box::new),
        version,
        stream: S::stream_entry(stream.flatten()),
    };
    let (mut violations, layout) = descriptor.violations_and_layout();
    // Bytes shared through a buffer must lie inside it.
    if let (Some(_), Some(buffer)) = (&layout, &own_buffer)
        && let Err(e) = descriptor.check_within(buffer.start(), buffer.len())
    {
        violations.push(e);
    }
    if let Some(buffer) = own_buffer {
        held.buffer(buffer);
    }
    problems.extend(
        violations
            .iter()
            .map(|e| Problem::from_descriptor_error(e, S::ATTRIBUTE)),
    );
    Parsed {
        descriptor: complete.then_some(descriptor),
        problems,
        layout,
        held,
    }
}

/// The value, or `None` with the problem recorded.
fn ok<T>(r: Result<T, Problem>, problems: &mut Vec<Problem>) -> Option<T> {
    r.map_err(|p| problems.push(p)).ok()
}

/// A `(pointer, read-only flag)` tuple. A pointer read through `__index__` and a flag given as
/// an int (which NumPy reads as a truth value) are noted in `notes`.
fn data_entry(v: &Bound<'_, PyAny>, notes: &mut Vec<Problem>) -> Result<Data, Problem> {
    let rule = rules::DATA;
    let t = v
        .cast::<PyTuple>()
        .ok()
        .filter(|t| t.len() == 2)
        .ok_or_else(|| {
            Problem::new(
                "data",
                ExcKind::Type,
                rule,
                format!("{} is not a 2-tuple (pointer, read-only flag)", show(v)),
            )
        })?;
    let (p, ro) = (t.get_item(0), t.get_item(1));
    let (Ok(p), Ok(ro)) = (p, ro) else {
        return Err(Problem::new(
            "data",
            ExcKind::Type,
            rule,
            "cannot read the tuple's items",
        ));
    };
    let ptr = int_in::<u64>(
        "data[0]",
        &p,
        rule,
        "a pointer between 0 and 2**64 - 1",
        notes,
    )?;
    if ro.is_instance_of::<PyBool>() {
        return Ok(Data {
            ptr,
            readonly: ro.is_truthy().unwrap_or(true),
        });
    }
    let flag = int(&ro).map_err(|e| Problem::raised("data[1]", e))?;
    if let Ok((flag, _)) = flag {
        notes.push(tolerated(
            "data[1]",
            rule,
            format!(
                "{} is not a bool (type {}): the spec asks for a Python bool; import reads it as a truth value, as NumPy does",
                show(&ro),
                type_name(&ro)
            ),
        ));
        return Ok(Data {
            ptr,
            readonly: flag != 0,
        });
    }
    Err(Problem::new(
        "data[1]",
        ExcKind::Type,
        rule,
        format!(
            "{} has type {}: the read-only flag must be a bool",
            show(&ro),
            type_name(&ro)
        ),
    ))
}

/// A host descriptor's `data`: the tuple, or else the buffer of `data` itself or, when it is
/// absent or `None`, of the exporter, advanced by `offset` bytes.
fn host_data(
    dict: &Bound<'_, PyDict>,
    v: Option<Bound<'_, PyAny>>,
    exporter: Option<&Bound<'_, PyAny>>,
    notes: &mut Vec<Problem>,
) -> Result<(Data, Option<HeldBuffer>), Problem> {
    let buffer = match (v, exporter) {
        (Some(v), _) if v.is_instance_of::<PyTuple>() => {
            let noted = notes.len();
            let data = data_entry(&v, notes)?;
            // NumPy itself takes only an `int` as the pointer.
            if let Some(note) = notes[noted..].iter_mut().find(|n| n.key == "data[0]") {
                note.message
                    .push_str(" (NumPy refuses it as __array_interface__'s pointer)");
            }
            return Ok((data, None));
        }
        (Some(v), _) if !v.is_none() => HeldBuffer::get(&v, "")?,
        (_, Some(exporter)) => HeldBuffer::get(
            exporter,
            "missing or None, so the object exposing __array_interface__ shares its own buffer, but ",
        )?,
        (v, None) => {
            return Err(Problem::new(
                "data",
                if v.is_none() {
                    ExcKind::Key
                } else {
                    ExcKind::Type
                },
                rules::DATA_BUFFER,
                format!(
                    "{}: a host descriptor without data shares the buffer of the object exposing __array_interface__, and a dict alone has none: pass that object as `owner`",
                    if v.is_none() { "missing" } else { "None" }
                ),
            ));
        }
    };
    let offset =
        match get(dict, intern!(dict.py(), "offset")).map_err(|e| Problem::raised("offset", e))? {
            Some(o) if !o.is_none() => {
                let n: usize = int_in(
                    "offset",
                    &o,
                    rules::DATA_BUFFER,
                    "a non-negative int",
                    notes,
                )?;
                if n > buffer.len() {
                    return Err(Problem::new(
                        "offset",
                        ExcKind::Value,
                        rules::DATA_BUFFER,
                        format!("{n} is past the end of the {}-byte buffer", buffer.len()),
                    ));
                }
                n
            }
            _ => 0,
        };
    let data = Data {
        ptr: buffer.start() + offset as u64,
        readonly: buffer.readonly(),
    };
    Ok((data, Some(buffer)))
}

/// An address given as an argument named `key`: an int from 0 to 2**64 - 1, read as a
/// descriptor's data pointer is; the error names `key` and the value.
pub fn address_argument(key: &str, v: &Bound<'_, PyAny>) -> PyResult<u64> {
    int_in::<u64>(
        key,
        v,
        rules::DATA,
        "an address between 0 and 2**64 - 1",
        &mut Vec::new(),
    )
    .map_err(|p| p.to_pyerr())
}

/// A stream given as an argument (the import functions' consumer `stream`), read as a
/// descriptor's `stream` entry is: an int from 1 to 2**64 - 1; the error names `stream` and
/// the value (0 and negative numbers are ValueErrors, other types TypeErrors).
pub fn stream_argument(v: &Bound<'_, PyAny>) -> PyResult<Stream> {
    stream_entry(v, &mut Vec::new()).map_err(|p| p.to_pyerr())
}

fn stream_entry(v: &Bound<'_, PyAny>, notes: &mut Vec<Problem>) -> Result<Stream, Problem> {
    let raw = int_in::<u64>(
        "stream",
        v,
        rules::STREAM,
        "None or a stream handle between 1 and 2**64 - 1",
        notes,
    )?;
    Stream::from_raw(raw)
        .map_err(|e| Problem::new("stream", ExcKind::Value, rules::STREAM, e.to_string()))
}

fn mask<S: Space>(
    v: &Bound<'_, PyAny>,
    depth: usize,
) -> Result<(ArrayDescriptor<S>, Held), Problem> {
    if depth >= MAX_MASK_DEPTH {
        return Err(Problem::new(
            "mask",
            ExcKind::Value,
            rules::MASK,
            format!("masks nest more than {MAX_MASK_DEPTH} levels deep"),
        ));
    }
    let py = v.py();
    let inner = v.getattr(attribute_name::<S>(py)).map_err(|e| {
        // Only AttributeError means "does not expose"; the getter's own errors propagate.
        if !e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) {
            return Problem::raised("mask", e);
        }
        Problem::new(
            "mask",
            ExcKind::Type,
            rules::MASK,
            format!(
                "{} ({}) does not expose {}: a mask must be None or an object exposing it",
                show(v),
                type_name(v),
                S::ATTRIBUTE
            ),
        )
    })?;
    // The mask's bytes may depend on the mask object and on what its dict holds (a producer
    // may build both on every access): the view keeps them, the dict as it is before reading.
    let mut held = Held::default();
    held.object(v);
    held.snapshot(&inner)
        .map_err(|e| Problem::raised("mask", e))?;
    let parsed = parse_at::<S>(&inner, Some(v), depth + 1);
    if let Some(e) = parsed.raised() {
        return Err(Problem::raised("mask", e));
    }
    if let Some(first) = parsed
        .problems
        .into_iter()
        .find(|p| p.severity == Severity::Error && !p.tolerated)
    {
        return Err(first.prefixed("mask"));
    }
    held.extend(parsed.held);
    parsed
        .descriptor
        .map(|d| (d, held))
        .ok_or_else(|| Problem::new("mask", ExcKind::Value, rules::MASK, "could not be read"))
}
