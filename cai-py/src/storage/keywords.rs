//! Reading a storage function's arguments: GDP-3's keyword arguments (`dims`, `halo`,
//! `layout`, `defaults`, `device`, `managed`...) into `StorageParams`, and the creators'
//! own parameters, worded as Python's own errors are.

use crate::args::{self, show, size, sizes};
use crate::fastcall::Args;
use cai_gt::{Dim, Managed, PerDim, Preset, StorageDevice, StorageParams, parse_dims};
use cai_runtime::__private::type_error_or;
use cai_runtime::__private::{dimension_items, dimension_letters};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString};

/// `dims`: a str of one-letter dims (`"IJK"`) or a sequence of names.
fn dims_arg(v: &Bound<'_, PyAny>) -> PyResult<PerDim<Dim>> {
    if let Ok(s) = v.cast::<PyString>() {
        return parse_dims(&dimension_letters("dims", s)?).map_err(PyErr::from);
    }
    let bad = || {
        PyTypeError::new_err(format!(
            "dims = {}: expected a str such as \"IJK\" or a sequence of str",
            show(v)
        ))
    };
    let names: PerDim<String> = dimension_items("dims", v, bad, |_, name| {
        name.extract::<String>().map_err(|e| type_error_or(e, bad))
    })?;
    parse_dims(&names).map_err(PyErr::from)
}

/// A storage's dims by name, as Python sees them.
pub(super) fn dim_names(dims: &[Dim]) -> Vec<String> {
    dims.iter().map(ToString::to_string).collect()
}

fn opt_str(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Option<String>> {
    if v.is_none() {
        return Ok(None);
    }
    v.extract::<String>()
        .map(Some)
        .map_err(|_| PyTypeError::new_err(format!("{key} = {}: expected a str or None", show(v))))
}

/// Every keyword a storage function takes: the creators' own parameters, then GDP-3's
/// common keyword arguments.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Keyword {
    Shape,
    Data,
    FillValue,
    Dtype,
    AlignedIndex,
    AlignmentSize,
    Defaults,
    Device,
    Dims,
    Halo,
    Layout,
    Managed,
}

impl Keyword {
    const ALL: [Keyword; 12] = [
        Keyword::Shape,
        Keyword::Data,
        Keyword::FillValue,
        Keyword::Dtype,
        Keyword::AlignedIndex,
        Keyword::AlignmentSize,
        Keyword::Defaults,
        Keyword::Device,
        Keyword::Dims,
        Keyword::Halo,
        Keyword::Layout,
        Keyword::Managed,
    ];

    fn name(self) -> &'static str {
        match self {
            Keyword::Shape => "shape",
            Keyword::Data => "data",
            Keyword::FillValue => "fill_value",
            Keyword::Dtype => "dtype",
            Keyword::AlignedIndex => "aligned_index",
            Keyword::AlignmentSize => "alignment_size",
            Keyword::Defaults => "defaults",
            Keyword::Device => "device",
            Keyword::Dims => "dims",
            Keyword::Halo => "halo",
            Keyword::Layout => "layout",
            Keyword::Managed => "managed",
        }
    }

    /// The keyword `k` names (`Err` with the name when none). Keyword names at call sites are
    /// interned strings, so comparing pointers with the interned names usually decides
    /// without reading the text.
    fn of(k: &Bound<'_, PyAny>) -> PyResult<Result<Keyword, String>> {
        static INTERNED: PyOnceLock<[Py<PyString>; 12]> = PyOnceLock::new();
        let py = k.py();
        let interned = INTERNED.get_or_init(py, || {
            Keyword::ALL.map(|kw| PyString::intern(py, kw.name()).unbind())
        });
        if let Some(i) = interned.iter().position(|n| n.as_ptr() == k.as_ptr()) {
            return Ok(Ok(Keyword::ALL[i]));
        }
        let key: String = k
            .extract()
            .map_err(|_| PyTypeError::new_err("keywords must be strings"))?;
        Ok(Keyword::ALL
            .into_iter()
            .find(|kw| kw.name() == key)
            .ok_or(key))
    }
}

fn unexpected_keyword(func: &str, key: &str) -> PyErr {
    PyTypeError::new_err(format!(
        "{func}() got an unexpected keyword argument '{key}'"
    ))
}

/// Sets GDP-3 keyword argument `kw` in `p`; false when `kw` is not one. `None` means "not
/// given" except where None is a value of its own (`defaults`, `device`, `managed`: explicit
/// `managed=None` is `Some(Managed::None)`).
fn set_param(p: &mut StorageParams, kw: Keyword, v: &Bound<'_, PyAny>) -> PyResult<bool> {
    let given = !v.is_none();
    let name = kw.name();
    match kw {
        Keyword::AlignedIndex if given => p.aligned_index = Some(sizes(name, v)?),
        Keyword::AlignmentSize if given => p.alignment_size = Some(size(name, v)?),
        Keyword::Defaults => {
            p.defaults = opt_str(name, v)?.map(|s| Preset::parse(&s)).transpose()?;
        }
        Keyword::Device => {
            let (device, id) = StorageDevice::parse(opt_str(name, v)?.as_deref())?;
            (p.device, p.device_id) = (Some(device), id);
        }
        Keyword::Dims if given => p.dims = Some(dims_arg(v)?),
        Keyword::Halo if given => p.halo = Some(args::halo(v)?),
        Keyword::Layout if given => p.layout = Some(sizes(name, v)?),
        Keyword::Managed => {
            p.managed = Some(Managed::parse(opt_str(name, v)?.as_deref())?);
        }
        Keyword::AlignedIndex
        | Keyword::AlignmentSize
        | Keyword::Dims
        | Keyword::Halo
        | Keyword::Layout => {}
        Keyword::Shape | Keyword::Data | Keyword::FillValue | Keyword::Dtype => {
            return Ok(false);
        }
    }
    Ok(true)
}

/// GDP-3's common keyword arguments (its "optional keyword-only parameters") from a
/// `**kwargs` dict; each `None` when not given.
pub(super) fn read_kwargs(
    func: &str,
    kwargs: Option<&Bound<'_, PyDict>>,
) -> PyResult<StorageParams> {
    let mut p = StorageParams::default();
    for (k, v) in kwargs.into_iter().flat_map(|kw| kw.iter()) {
        let kw = Keyword::of(&k)?.map_err(|key| unexpected_keyword(func, &key))?;
        if !set_param(&mut p, kw, &v)? {
            return Err(unexpected_keyword(func, kw.name()));
        }
    }
    Ok(p)
}

/// The arguments of a creator, read straight from its call: `required` then `optional`
/// parameters, each by position or by keyword (an optional one is `None` when not given or
/// given as None), then GDP-3's keyword arguments (into `p`, which the caller owns: the
/// parameters are a few hundred bytes, not worth moving). Errors are worded as Python's own.
///
/// The creators are fast-call functions (`fastcall.rs`) rather than `#[pyfunction]`s: GDP-3's
/// keywords would go through a `**kwargs` dict, and `None` given for `device` or `managed`
/// must differ from not giving them.
#[allow(clippy::type_complexity)]
pub(super) fn read_call<'py, const R: usize, const O: usize>(
    func: &str,
    required: [Keyword; R],
    optional: [Keyword; O],
    args: Args<'py>,
    p: &mut StorageParams,
) -> PyResult<([Bound<'py, PyAny>; R], [Option<Bound<'py, PyAny>>; O])> {
    let n = args.positional.len();
    if n > R + O {
        let takes = if O == 0 {
            format!("{R}")
        } else {
            format!("from {R} to {}", R + O)
        };
        return Err(PyTypeError::new_err(format!(
            "{func}() takes {takes} positional arguments but {n} were given"
        )));
    }
    let mut req: [Option<Bound<'py, PyAny>>; R] = std::array::from_fn(|_| None);
    let mut opt: [Option<Bound<'py, PyAny>>; O] = std::array::from_fn(|_| None);
    for (slot, v) in req.iter_mut().chain(opt.iter_mut()).zip(args.positional) {
        *slot = Some(v);
    }
    for (k, v) in args.keywords {
        let kw = Keyword::of(&k)?.map_err(|key| unexpected_keyword(func, &key))?;
        let slot = match required.iter().position(|r| *r == kw) {
            Some(i) => Some(&mut req[i]),
            None => optional.iter().position(|o| *o == kw).map(|i| &mut opt[i]),
        };
        match slot {
            Some(slot) if slot.is_some() => {
                return Err(PyTypeError::new_err(format!(
                    "{func}() got multiple values for argument '{}'",
                    kw.name()
                )));
            }
            Some(slot) => *slot = Some(v),
            None if set_param(p, kw, &v)? => {}
            None => return Err(unexpected_keyword(func, kw.name())),
        }
    }
    let given: smallvec::SmallVec<[Bound<'py, PyAny>; R]> = req.iter().flatten().cloned().collect();
    let Ok(req_values) = given.into_inner() else {
        let missing: Vec<String> = required
            .iter()
            .zip(&req)
            .filter(|(_, v)| v.is_none())
            .map(|(kw, _)| format!("'{}'", kw.name()))
            .collect();
        let list = match missing.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
            _ => missing.concat(),
        };
        let s = if missing.len() == 1 { "" } else { "s" };
        return Err(PyTypeError::new_err(format!(
            "{func}() missing {} required positional argument{s}: {list}",
            missing.len()
        )));
    };
    // An optional parameter given as None takes its default.
    let opt = opt.map(|v| v.filter(|v| !v.is_none()));
    Ok((req_values, opt))
}

pub(super) fn shape_arg(v: &Bound<'_, PyAny>) -> PyResult<PerDim<usize>> {
    sizes("shape", v)
}
