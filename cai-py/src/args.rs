//! Python arguments read into Rust values, with errors that name the argument and the value:
//! a TypeError for what is not an int (or a sequence of them), a bool or a str, a ValueError
//! for an int out of range or a str that is none of the choices. Never PyO3's bare
//! OverflowError ("can't convert negative int to unsigned") or its extraction error ("'int'
//! object is not an instance of 'str'"), which name neither (PyO3 puts the argument's name in
//! a note, which a log line or an error dialog does not show).
//!
//! Ints are read through `__index__`, so NumPy integers are ints too; bools are not ints here,
//! as NumPy refuses `numpy.zeros((True, 2))`: `layout=(True, False)` must not read as the
//! permutation `(1, 0)`. A choice is returned as its name, so that a signature's default stays
//! a literal; the callers then tell the names apart knowing no other gets through.

use cai_gt::PerDim;
use cai_runtime::__private::{dimension_items, int, int_like, type_error_or};
use num_complex::Complex;
// A float narrowed from `f64` as NumPy narrows (beyond float32's range is inf): `as`, which
// half implements for its types too.
use num_traits::AsPrimitive;
use pyo3::IntoPyObjectExt;
use pyo3::exceptions::{PyOverflowError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};

/// `repr(v)` for messages, shortened; a placeholder when `repr` itself raises.
pub use cai_runtime::__private::show;

/// An int or an object with `__index__` (NumPy integers), not a bool, and not a sequence
/// (an ndarray has `__index__` too, but is read as the sequence it is).
pub fn is_int(v: &Bound<'_, PyAny>) -> bool {
    // An exact `int` first: a pointer comparison, where the general test makes C calls.
    v.is_exact_instance_of::<PyInt>()
        || int_like(v)
            && (v.is_instance_of::<PyInt>()
                || !v.hasattr(pyo3::intern!(v.py(), "__len__")).unwrap_or(true))
}

/// Whether `v` stands where one int would: an int, or a bool, which [`int_in`] then refuses by
/// name rather than as "not a sequence" (and which a slice bound may be).
pub fn scalar(v: &Bound<'_, PyAny>) -> bool {
    is_int(v) || v.is_instance_of::<PyBool>()
}

/// `v` as an int from `lo` to `hi`, the argument being `key`, read by cai-runtime's one
/// integer reader (an exact `int` in one C call; else through `__index__`, whose own error,
/// a KeyboardInterrupt too, says more than ours would and is raised once).
fn int_in<T: TryFrom<i128>>(key: &str, v: &Bound<'_, PyAny>, lo: i128, hi: i128) -> PyResult<T> {
    let n = match int(v)? {
        Ok((n, _)) => Some(n),
        // `int` refuses bools; `extract::<i64>` would read one as 0 or 1.
        Err(_) if v.is_instance_of::<PyBool>() => {
            return Err(PyTypeError::new_err(format!(
                "{key}: {} is a bool, not an int",
                show(v)
            )));
        }
        Err("not an int") => {
            return Err(PyTypeError::new_err(format!(
                "{key}: {} is not an int",
                show(v)
            )));
        }
        // Beyond i128 is beyond every range here, on the side of its sign.
        Err(_) => None,
    };
    let below = match n {
        Some(n) if (lo..=hi).contains(&n) => {
            return T::try_from(n).map_err(|_| {
                PyValueError::new_err(format!("{key}: {n} does not fit (a bug in its range)"))
            });
        }
        Some(n) => n < lo,
        None => v.lt(0)?,
    };
    let value = n.map_or_else(|| show(v), |n| n.to_string());
    Err(PyValueError::new_err(if below && lo == 0 {
        format!("{key}: {value} must be a non-negative int")
    } else if below {
        format!("{key}: {value} must be at least {lo}")
    } else {
        format!("{key}: {value} is too large (at most {hi})")
    }))
}

/// A size or count: an int from 0 to 2**64 - 1.
pub fn size(key: &str, v: &Bound<'_, PyAny>) -> PyResult<usize> {
    int_in(key, v, 0, usize::MAX as i128)
}

/// A byte stride or other signed offset: an int from -2**63 to 2**63 - 1.
fn signed(key: &str, v: &Bound<'_, PyAny>) -> PyResult<isize> {
    int_in(key, v, isize::MIN as i128, isize::MAX as i128)
}

/// `f` applied to each item of a sequence argument `key` (at most NumPy's 64 dimensions: see
/// [`dimension_items`]).
fn each_item<'py, T, C: FromIterator<T>>(
    key: &str,
    v: &Bound<'py, PyAny>,
    bad: impl FnOnce() -> PyErr,
    mut f: impl FnMut(&Bound<'py, PyAny>) -> PyResult<T>,
) -> PyResult<C> {
    dimension_items(key, v, bad, |_, i| f(i))
}

/// A sequence of ints read by `item` (one int alone is a sequence of one, as NumPy reads a
/// shape), the argument being `key`.
fn int_sequence<T>(
    key: &str,
    v: &Bound<'_, PyAny>,
    item: impl Fn(&str, &Bound<'_, PyAny>) -> PyResult<T>,
) -> PyResult<PerDim<T>> {
    let bad = || PyTypeError::new_err(format!("{key} = {}: expected a sequence of ints", show(v)));
    if v.is_instance_of::<PyString>() {
        return Err(bad());
    }
    if scalar(v) {
        return Ok(std::iter::once(item(key, v)?).collect());
    }
    each_item(key, v, bad, |i| item(key, i))
}

/// A sequence of sizes (a shape, an index, a layout).
pub fn sizes(key: &str, v: &Bound<'_, PyAny>) -> PyResult<PerDim<usize>> {
    int_sequence(key, v, size)
}

/// A sequence of signed ints (byte strides).
fn signed_ints(key: &str, v: &Bound<'_, PyAny>) -> PyResult<PerDim<isize>> {
    int_sequence(key, v, signed)
}

/// `halo`: one int (symmetric) or one (start, end) pair per dimension.
pub fn halo(v: &Bound<'_, PyAny>) -> PyResult<PerDim<(usize, usize)>> {
    let bad = || {
        PyTypeError::new_err(format!(
            "halo = {}: expected a sequence of one int (symmetric) or (start, end) pair per dimension",
            show(v)
        ))
    };
    each_item("halo", v, bad, |i| {
        if scalar(i) {
            let n = size("halo", i)?;
            return Ok((n, n));
        }
        match each_item::<_, PerDim<_>>("halo", i, bad, |x| Ok(x.clone()))?.as_slice() {
            [a, b] => Ok((size("halo", a)?, size("halo", b)?)),
            _ => Err(bad()),
        }
    })
}

/// `v` as a bool: Python's, or NumPy's `bool_` (as PyO3 reads one). An int is not a flag, as
/// PyO3 itself refuses one: `sync=0` would read as a silent "no".
pub fn flag(key: &str, v: &Bound<'_, PyAny>) -> PyResult<bool> {
    v.extract::<bool>().map_err(|e| {
        type_error_or(e, || {
            PyTypeError::new_err(format!("{key}: {} is not a bool", show(v)))
        })
    })
}

/// `v` as a str.
pub fn text(key: &str, v: &Bound<'_, PyAny>) -> PyResult<String> {
    v.extract::<String>()
        .map_err(|_| PyTypeError::new_err(format!("{key}: {} is not a str", show(v))))
}

/// `v` as one of `names`, returned as the name itself, so that a signature's default stays a
/// literal Python can show (`mode='enqueue'`): a TypeError for what is not a str, a
/// ValueError for any other str, both listing the choices.
pub fn one_of(
    key: &str,
    v: &Bound<'_, PyAny>,
    names: &'static [&'static str],
) -> PyResult<&'static str> {
    let s = v.cast::<PyString>().ok().and_then(|s| s.to_str().ok());
    names
        .iter()
        .copied()
        .find(|n| Some(*n) == s)
        .ok_or_else(|| bad_choice(key, v, names, false))
}

/// None, or `v` as one of `names` (see [`one_of`]).
pub fn none_or_one_of(
    key: &str,
    v: &Bound<'_, PyAny>,
    names: &'static [&'static str],
) -> PyResult<Option<&'static str>> {
    if v.is_none() {
        return Ok(None);
    }
    one_of(key, v, names)
        .map(Some)
        .map_err(|_| bad_choice(key, v, names, true))
}

/// "`key` = `v`: expected 'a', 'b' or 'c'" (None first where it is a choice).
fn bad_choice(key: &str, v: &Bound<'_, PyAny>, names: &[&str], none: bool) -> PyErr {
    let choices: Vec<String> = none
        .then(|| "None".to_owned())
        .into_iter()
        .chain(names.iter().map(|n| format!("'{n}'")))
        .collect();
    let expected = match choices.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => "no value".to_owned(),
    };
    let msg = format!("{key} = {}: expected {expected}", show(v));
    if v.is_instance_of::<PyString>() {
        PyValueError::new_err(msg)
    } else {
        PyTypeError::new_err(msg)
    }
}

/// An item's value, written into an array of the type as NumPy writes one (`a[i] = value`):
/// any int (a bool too) into an integer type, an OverflowError naming the value and the type
/// where it does not fit (PyO3 alone says "Python int too large to convert to C long",
/// naming neither); any real number into a float type; any number into a complex type. And
/// read back as the Python value NumPy's `a[i].item()` is.
pub trait ItemValue: Sized {
    /// `v` as an item of this type, the argument being `key`.
    fn read(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Self>;
    /// The item as a Python `int`, `float` or `complex`.
    fn to_py<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>>;
}

/// NumPy's name of the dtype of `T`, an item of `kind` (`"int"`, `"float"`...): `int8`,
/// `float16`, `complex128`.
fn dtype_name<T>(kind: &str) -> String {
    format!("{kind}{}", 8 * std::mem::size_of::<T>())
}

/// Why `v` is no item of a float or complex type (`items`, NumPy's name): an int too large for
/// a float64 is an OverflowError naming the argument and the items (Python's own names
/// neither); a value of no numeric type a TypeError saying it is not `expected`; any other
/// error (a `__float__`'s own) as it is.
fn not_a_number(key: &str, v: &Bound<'_, PyAny>, e: PyErr, expected: &str, items: &str) -> PyErr {
    if e.is_instance_of::<PyOverflowError>(v.py()) && v.is_instance_of::<pyo3::types::PyInt>() {
        return PyOverflowError::new_err(format!(
            "{key}: {} is too large for a float (the items are {items})",
            show(v)
        ));
    }
    type_error_or(e, || {
        PyTypeError::new_err(format!(
            "{key}: {} is not {expected} (the items are {items})",
            show(v)
        ))
    })
}

/// `x` rounded once to the float type `T`, as NumPy narrows a float64 (beyond `T`'s range it
/// is inf). To a type narrower than float32 (float16) `as` would round twice, through float32
/// (half converts so): `x` goes to float32 rounded to odd (toward zero, the last bit set where
/// that was inexact), whose extra bits make the second rounding the only one.
fn narrow<T: Copy + 'static>(x: f64) -> T
where
    f64: AsPrimitive<T>,
    f32: AsPrimitive<T>,
{
    if std::mem::size_of::<T>() >= 4 {
        return x.as_();
    }
    let f = x as f32;
    if !f.is_finite() || f64::from(f) == x {
        return f.as_();
    }
    let mut bits = f.to_bits();
    if f64::from(f).abs() > x.abs() {
        bits -= 1; // toward zero (the sign is apart from the magnitude)
    }
    f32::from_bits(bits | 1).as_()
}

/// `ItemValue` for every element type that `HostArrayView.get`/`set` reach (cai-runtime's one
/// list of them): all but bool and opaque bytes.
macro_rules! item_value {
    (Int, $ty:ty) => {
        int_item!($ty, "int");
    };
    (UInt, $ty:ty) => {
        int_item!($ty, "uint");
    };
    (Float, $ty:ty) => {
        float_item!($ty);
    };
    (Complex, $ty:ty) => {
        complex_item!($ty);
    };
    (Void, $ty:ty, $ext:ident) => {};
    ($kind:ident, $ty:ty) => {};
}

macro_rules! int_item {
    ($ty:ty, $kind:literal) => {
        impl ItemValue for $ty {
            fn read(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Self> {
                let not_int = || {
                    PyTypeError::new_err(format!(
                        "{key}: {} is not an int (the items are {})",
                        show(v),
                        dtype_name::<$ty>($kind)
                    ))
                };
                if !scalar(v) {
                    return Err(not_int());
                }
                // A bool is 0 or 1 here, as NumPy stores one into an int array.
                let n = if let Ok(b) = v.cast::<PyBool>() {
                    Some(i128::from(b.is_true()))
                } else {
                    match int(v)? {
                        Ok((n, _)) => Some(n),
                        Err("not an int") => return Err(not_int()),
                        Err(_) => None,
                    }
                };
                n.and_then(|n| <$ty>::try_from(n).ok()).ok_or_else(|| {
                    PyOverflowError::new_err(format!(
                        "{key}: {} is out of bounds for {} ({} to {})",
                        show(v),
                        dtype_name::<$ty>($kind),
                        <$ty>::MIN,
                        <$ty>::MAX
                    ))
                })
            }

            fn to_py<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                self.into_bound_py_any(py)
            }
        }
    };
}

macro_rules! float_item {
    ($ty:ty) => {
        impl ItemValue for $ty {
            fn read(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Self> {
                v.extract::<f64>().map(narrow::<$ty>).map_err(|e| {
                    not_a_number(key, v, e, "a real number", &dtype_name::<$ty>("float"))
                })
            }

            fn to_py<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                f64::from(self).into_bound_py_any(py)
            }
        }
    };
}

macro_rules! complex_item {
    ($ty:ty) => {
        impl ItemValue for $ty {
            fn read(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Self> {
                v.extract::<Complex<f64>>()
                    .map(|z| <$ty>::new(narrow(z.re), narrow(z.im)))
                    .map_err(|e| not_a_number(key, v, e, "a number", &dtype_name::<$ty>("complex")))
            }

            fn to_py<'py>(self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                self.into_bound_py_any(py)
            }
        }
    };
}

cai_runtime::for_each_element!(item_value);

/// The most fills one `DeviceArray.fill` call enqueues: enough to keep a stream busy for a
/// test, few enough that a mistyped count cannot queue work for hours.
const MAX_ROUNDS: usize = 1 << 16;

/// Readers under one argument's name, for `#[pyo3(from_py_with = arg::rows)]`:
/// PyO3 gives such a reader the value only, so each carries the name it reports.
macro_rules! named_readers {
    ($($(#[$attr:meta])* $name:ident: $ty:ty = $read:expr;)*) => {$(
        #[doc = concat!("The argument `", stringify!($name), "`.")]
        $(#[$attr])*
        pub fn $name(v: &Bound<'_, PyAny>) -> PyResult<$ty> {
            $read(stringify!($name), v)
        }
    )*};
}

/// The package's arguments that PyO3 would otherwise read itself: ints, bools, strs and
/// choices.
pub mod arg {
    use super::*;

    /// None, or a device ordinal.
    fn optional_device(k: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<u32>> {
        if v.is_none() {
            return Ok(None);
        }
        int_in(k, v, 0, i32::MAX.into()).map(Some)
    }

    /// None, or what `read` makes of `v`.
    fn optional<T>(
        v: &Bound<'_, PyAny>,
        read: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<PerDim<T>>,
    ) -> PyResult<Option<Vec<T>>> {
        if v.is_none() {
            return Ok(None);
        }
        read(v).map(|r| Some(r.into_vec()))
    }

    named_readers! {
        rows: usize = size;
        cols: usize = size;
        i: usize = size;
        j: usize = size;
        ni: usize = size;
        nj: usize = size;
        nk: usize = size;
        nbytes: usize = size;
        offset: usize = size;
        n: u32 = |k, v| int_in(k, v, 0, u32::MAX.into());
        value: u8 = |k, v| int_in(k, v, 0, u8::MAX.into());
        rounds: usize = |k, v| int_in(k, v, 1, MAX_ROUNDS as i128);
        ptr: u64 = cai_runtime::__private::address_argument;
        shape: Vec<usize> = |k, v| sizes(k, v).map(PerDim::into_vec);
        index: Vec<usize> = |k, v| sizes(k, v).map(PerDim::into_vec);
        strides: Option<Vec<isize>> = |k, v| optional(v, |v| signed_ints(k, v));
        halo: Option<Vec<(usize, usize)>> = |_, v| optional(v, super::halo);
        typestr: String = text;
        sync: bool = flag;
        check_pointer: bool = flag;
        readonly: bool = flag;
        copy: bool = flag;
        force: bool = flag;
        on: bool = flag;
        on_side_stream: bool = flag;
        non_blocking: bool = flag;
        device_id: Option<u32> = optional_device;
        order: &'static str = |k, v| one_of(k, v, &["C", "F"]);
        mode: &'static str = |k, v| one_of(k, v, &["enqueue", "synchronize"]);
        interface: &'static str = |k, v| one_of(k, v, &["cuda", "host"]);
        device: Option<&'static str> = |k, v| none_or_one_of(k, v, &["gpu"]);
    }

    /// The argument `copy` of `__array__`: None, True or False (NumPy's protocol).
    pub fn array_copy(v: &Bound<'_, PyAny>) -> PyResult<Option<bool>> {
        if v.is_none() {
            return Ok(None);
        }
        v.extract::<bool>()
            .map(Some)
            .map_err(|_| PyTypeError::new_err(format!("copy: {} is not a bool or None", show(v))))
    }

    /// The argument `value` of `Grid.set`: a float64 item (`value` is `DeviceArray.fill`'s
    /// byte).
    pub fn item(v: &Bound<'_, PyAny>) -> PyResult<f64> {
        <f64 as ItemValue>::read("value", v)
    }
}
