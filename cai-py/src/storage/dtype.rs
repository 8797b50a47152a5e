//! Dtypes: a `dtype=` argument or a foreign typestr resolved through NumPy into the
//! runtime's element type and the NumPy dtype object, recent ones remembered.

use super::{numpy, numpy_error_named};
use crate::args::show;
use cai_gt::ElementType;
use cai_runtime::__private::{
    Memo, descr_dtype, extended_dtype, extended_of, items_descr, parse_descr,
};
use cai_runtime::TypeStr;
use cai_runtime::{ByteOrder, Kind};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;

/// A resolved dtype: the element type and the NumPy dtype object.
/// The NumPy object is held as a `Bound`: a reference of the current call.
pub(super) struct Dtype<'py> {
    pub(super) element: ElementType,
    pub(super) numpy: Bound<'py, PyAny>,
}

/// What a remembered dtype was resolved from.
enum DtypeKey {
    /// An argument object, held so that its address stays its own: the same object again
    /// means the same dtype (only objects whose dtype cannot change are remembered).
    Object(Py<PyAny>),
    /// A plain type string from a foreign descriptor.
    TypeStr(TypeStr),
}

/// Recently resolved dtypes: the element type and the NumPy dtype object. Resolving asks NumPy
/// (`numpy.dtype(v)`, then `.str` and `.fields`), about 1 us, four times a small `zeros` call;
/// programs pass a handful of dtypes. Keys are compared by identity or as type strings (no
/// Python code runs under the memo's lock).
static DTYPES: Memo<DtypeKey, (ElementType, Py<PyAny>), 32> = Memo::new();

fn known_dtype<'py>(py: Python<'py>, found: impl Fn(&DtypeKey) -> bool) -> Option<Dtype<'py>> {
    DTYPES.get(found, |(element, numpy)| Dtype {
        element: element.clone(),
        numpy: numpy.bind(py).clone(),
    })
}

fn remember_dtype(key: DtypeKey, d: &Dtype<'_>) {
    DTYPES.insert(key, (d.element.clone(), d.numpy.clone().unbind()));
}

/// Whether `numpy.dtype(v)` is the same dtype whenever it is asked of this object: an exact
/// `str`, a NumPy scalar type or a Python number type, or a plain (field-less) `numpy.dtype`
/// (a structured one's field names can be reassigned).
fn dtype_is_fixed(py: Python<'_>, v: &Bound<'_, PyAny>, resolved: &Dtype<'_>) -> PyResult<bool> {
    if v.is_exact_instance_of::<PyString>() {
        return Ok(true);
    }
    let np = numpy(py)?;
    if let Ok(t) = v.cast::<pyo3::types::PyType>() {
        return Ok(t.is_subclass(&np.getattr("generic")?)?
            || [
                py.get_type::<pyo3::types::PyFloat>(),
                py.get_type::<pyo3::types::PyInt>(),
                py.get_type::<pyo3::types::PyComplex>(),
                py.get_type::<pyo3::types::PyBool>(),
            ]
            .iter()
            .any(|builtin| t.is(builtin)));
    }
    Ok(resolved.element.descr().is_none() && v.is_instance(&np.getattr("dtype")?)?)
}

/// `numpy.dtype(value)`, refusing types a storage cannot hold; `None` is float64.
pub(super) fn dtype_of<'py>(
    py: Python<'py>,
    value: Option<&Bound<'py, PyAny>>,
) -> PyResult<Dtype<'py>> {
    let Some(v) = value else {
        // The default, float64, resolved once.
        static F64: PyOnceLock<(ElementType, Py<PyAny>)> = PyOnceLock::new();
        let (element, numpy) = F64.get_or_try_init(py, || {
            let f64 = TypeStr::new(ByteOrder::HOST, Kind::Float, 8);
            dtype_from_typestr(py, &f64, None).map(|d| (d.element, d.numpy.unbind()))
        })?;
        return Ok(Dtype {
            element: element.clone(),
            numpy: numpy.bind(py).clone(),
        });
    };
    if let Some(d) = known_dtype(py, |k| matches!(k, DtypeKey::Object(o) if o.is(v))) {
        return Ok(d);
    }
    let d = describe_dtype(dtype_arg(py, v)?)?;
    if dtype_is_fixed(py, v, &d)? {
        remember_dtype(DtypeKey::Object(v.clone().unbind()), &d);
    }
    Ok(d)
}

/// `numpy.dtype(v)` and the element type it describes.
fn resolve_dtype<'py>(py: Python<'py>, v: &Bound<'py, PyAny>) -> PyResult<Dtype<'py>> {
    describe_dtype(numpy(py)?.getattr("dtype")?.call1((v,))?)
}

/// `numpy.dtype(v)` of the argument `dtype`: NumPy's error says what it cannot read, not that
/// it was the argument `dtype`, so it is named.
pub(super) fn dtype_arg<'py>(
    py: Python<'py>,
    v: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    numpy(py)?
        .getattr("dtype")?
        .call1((v,))
        .map_err(|e| numpy_error_named(py, e, &format!("dtype = {}", show(v))))
}

/// A `numpy.dtype` and the element type it describes; a dtype holding Python objects anywhere
/// (NumPy's `hasobject`: a field, a sub-array such as `('O', (2,))`, whose `str` is `|V16`)
/// is refused.
fn describe_dtype(dt: Bound<'_, PyAny>) -> PyResult<Dtype<'_>> {
    let py = dt.py();
    if dt.getattr(pyo3::intern!(py, "hasobject"))?.is_truthy()? {
        return Err(PyErr::from(cai_gt::StorageError::Dtype(
            dt.repr()?.to_string(),
        )));
    }
    // NumPy turns a sub-array dtype into more dimensions of its base wherever it makes an
    // array, so a storage of one would not read back as itself (pickling, `full`, wrapping).
    let sub = dt.getattr(pyo3::intern!(py, "subdtype"))?;
    if !sub.is_none() {
        let (base, shape): (Bound<'_, PyAny>, Bound<'_, PyAny>) = sub.extract()?;
        return Err(PyTypeError::new_err(format!(
            "dtype {} is a sub-array dtype: give its shape {} as the storage's last dimensions, with dtype {} (as NumPy makes such arrays)",
            dt.repr()?,
            shape.repr()?,
            base.repr()?
        )));
    }
    let typestr: String = dt.getattr("str")?.extract()?;
    // ml_dtypes' types (bfloat16, float8...) are `|V<n>` to NumPy's `str`: their identity.
    let typestr = match extended_of(&dt)? {
        Some(e) => TypeStr::extended(e),
        None => TypeStr::parse(&typestr)?,
    };
    let descr = if dt.getattr("fields")?.is_none() {
        None
    } else {
        Some(parse_descr(&dt.getattr("descr")?)?)
    };
    let element = ElementType::new(typestr, descr)?;
    Ok(Dtype { element, numpy: dt })
}

/// A dtype from a foreign descriptor's typestr / descr.
fn dtype_from_typestr<'py>(
    py: Python<'py>,
    typestr: &TypeStr,
    descr: Option<&cai_runtime::Descr>,
) -> PyResult<Dtype<'py>> {
    match items_descr(typestr, descr) {
        None => {
            let key = |k: &DtypeKey| matches!(k, DtypeKey::TypeStr(t) if t == typestr);
            if let Some(d) = known_dtype(py, key) {
                return Ok(d);
            }
            let d = match typestr.extended_type() {
                // ml_dtypes' dtype where it is installed; else its opaque bytes (`|V2`), the
                // element keeping its identity.
                Some(e) => match extended_dtype(py, e)? {
                    Some(dt) => describe_dtype(dt)?,
                    None => Dtype {
                        element: ElementType::new(*typestr, None)?,
                        numpy: resolve_dtype(py, PyString::new(py, &typestr.to_string()).as_any())?
                            .numpy,
                    },
                },
                None => resolve_dtype(py, PyString::new(py, &typestr.to_string()).as_any())?,
            };
            remember_dtype(DtypeKey::TypeStr(*typestr), &d);
            Ok(d)
        }
        // Fields of extended types keep their identity: ml_dtypes' dtypes, and in the element
        // type even without ml_dtypes (where NumPy's dtype has their bytes).
        Some(d) => {
            let mut dtype = describe_dtype(descr_dtype(py, d)?)?;
            dtype.element = ElementType::new(*typestr, Some(d.clone()))?;
            Ok(dtype)
        }
    }
}

/// The dtype of `data`, whose interface says `typestr` and `descr`: the object's own `dtype`
/// where it has one describing the same bytes (a NumPy or CuPy array's) and the interface
/// cannot say it all: a structured type (NumPy names the gaps of the `descr` list `f<index>`
/// and drops `align=True`, and cannot copy items between the dtype it makes and the array's
/// own), or opaque bytes that are an ml_dtypes type (bfloat16, a float8: `|V2`, `|V1` in a
/// dict).
pub(super) fn data_dtype<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    typestr: &TypeStr,
    descr: Option<&cai_runtime::Descr>,
) -> PyResult<Dtype<'py>> {
    let descr = items_descr(typestr, descr);
    let structured = descr.is_some();
    let opaque = typestr.kind() == Kind::Void
        && typestr.extended_type().is_none()
        && typestr.itemsize() <= 2
        && !structured;
    if (structured || opaque)
        // The object's own `dtype`: an error its getter raises propagates (only a missing one
        // means none); one that is no NumPy dtype is passed over.
        && let Some(own) = data.getattr_opt(pyo3::intern!(py, "dtype"))?
    {
        match describe_dtype(own) {
            Ok(d)
                if structured
                    && d.element.typestr() == *typestr
                    && d.element
                        .descr()
                        .zip(descr)
                        .is_some_and(|(own, described)| own.same_items(described)) =>
            {
                return Ok(d);
            }
            Ok(d)
                if opaque
                    && d.element
                        .typestr()
                        .extended_type()
                        .is_some_and(|e| e.itemsize() == typestr.itemsize()) =>
            {
                return Ok(d);
            }
            Ok(_) => {}
            Err(e)
                if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py)
                    || e.is_instance_of::<PyTypeError>(py)
                    || e.is_instance_of::<PyValueError>(py) => {}
            Err(e) => return Err(e),
        }
    }
    dtype_from_typestr(py, typestr, descr)
}

/// The NumPy dtype of an imported array's items (`view.dtype`): its owner's own where that
/// describes the same items (see [`data_dtype`]), else the one its typestr and descr make.
pub(crate) fn numpy_dtype<'py>(
    py: Python<'py>,
    owner: Option<&Bound<'py, PyAny>>,
    typestr: &TypeStr,
    descr: Option<&cai_runtime::Descr>,
) -> PyResult<Bound<'py, PyAny>> {
    match owner {
        Some(owner) => data_dtype(py, owner, typestr, descr),
        None => dtype_from_typestr(py, typestr, descr),
    }
    .map(|d| d.numpy)
}
