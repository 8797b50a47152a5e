//! The conformance checker: every violation of the spec (and every known interoperability
//! hazard) in an object's `__cuda_array_interface__` or `__array_interface__`, each with the
//! rule it breaks.

use pyo3::prelude::*;

use super::parse::{Problem, Severity, parse_exposed, show};
use super::rules::{self, Rule};
use crate::descriptor::{ArrayDescriptor, Device, Host, Space};
use crate::typestr::{ByteOrder, Kind};

/// One finding of `check`: the interface and key it is about, its message, the spec rule it
/// breaks (`rule`, `rule_text`), its `severity` (`"error"` or `"warning"`) and the exception a
/// strict consumer raises.
#[pyclass(frozen, get_all, module = "cai")]
#[derive(Clone, Debug)]
pub struct Violation {
    /// Which interface: `__cuda_array_interface__` or `__array_interface__`.
    pub interface: String,
    /// The key, with a path for nested values (`data[0]`, `mask.shape`).
    pub key: String,
    /// What is wrong, naming the value.
    pub message: String,
    /// The rule's stable id.
    pub rule: String,
    /// The rule as the spec states it.
    pub rule_text: String,
    /// `"error"` (breaks the spec) or `"warning"` (legal, but a named consumer fails on it).
    pub severity: String,
    /// The exception a strict consumer (this package's import) raises for it, or `""`.
    pub exception: String,
}

#[pymethods]
impl Violation {
    fn __repr__(&self) -> String {
        format!(
            "Violation({} {}: {} [{}])",
            self.severity, self.key, self.message, self.rule
        )
    }

    fn __str__(&self) -> String {
        let key = if self.key.is_empty() {
            String::new()
        } else {
            format!("{}: ", self.key)
        };
        format!(
            "{}: {key}{}\n    rule {}: {}",
            self.severity, self.message, self.rule, self.rule_text
        )
    }
}

fn violation(attribute: &str, p: &Problem) -> Violation {
    Violation {
        interface: attribute.to_owned(),
        key: p.key.clone(),
        message: p.message.clone(),
        rule: p.rule.id.to_owned(),
        rule_text: p.rule.text.to_owned(),
        severity: match p.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
        .to_owned(),
        exception: if p.severity == Severity::Error && !p.tolerated {
            p.exc.name().to_owned()
        } else {
            String::new()
        },
    }
}

fn warning(key: &str, rule: Rule, message: String) -> Problem {
    Problem {
        message,
        tolerated: true,
        severity: Severity::Warning,
        ..Problem::new(key, super::parse::ExcKind::Value, rule, "")
    }
}

/// The hazards of one array's item layout: strides that split items, and `descr` names NumPy
/// cannot read back. `prefix` names the mask level (`""` for the array itself).
fn layout_hazards<S: Space>(prefix: &str, d: &ArrayDescriptor<S>, out: &mut Vec<Problem>) {
    let itemsize = d.typestr.itemsize() as isize;
    if let Some(s) = &d.strides
        && itemsize > 0
        && s.iter().any(|&x| x % itemsize != 0)
    {
        out.push(warning(
            &format!("{prefix}strides"),
            rules::STRIDES_ITEMSIZE,
            format!("strides {s:?} are not all multiples of the item size {itemsize}"),
        ));
    }
    if let Some(e) = d.descr.as_ref().and_then(|descr| descr.name_error()) {
        out.push(warning(
            &format!("{prefix}descr"),
            rules::DESCR_NAMES,
            e.to_string(),
        ));
    }
}

/// Interoperability hazards of a descriptor that parsed.
fn hazards<S: Space>(dict: &Bound<'_, PyAny>, d: &ArrayDescriptor<S>) -> Vec<Problem> {
    let mut out = Vec::new();
    let has_strides_key = dict
        .cast::<pyo3::types::PyDict>()
        .map(|d| d.contains("strides").unwrap_or(false))
        .unwrap_or(false);
    if !has_strides_key {
        out.push(warning(
            "strides",
            rules::STRIDES_KEY,
            "the strides key is absent; send None for C-contiguous arrays".into(),
        ));
    }
    // The layout hazards hold for the array and for each mask (`mask.strides`,
    // `mask.mask.descr`, ...).
    let mut prefix = String::new();
    let mut level = Some(d);
    while let Some(d) = level {
        layout_hazards(&prefix, d, &mut out);
        prefix.push_str("mask.");
        level = d.mask.as_deref();
    }
    if S::DEVICE {
        if d.data.readonly {
            out.push(warning(
                "data[1]",
                rules::READONLY,
                "read-only data: torch.as_tensor refuses it".into(),
            ));
        }
        if d.typestr.byte_order() == ByteOrder::Big && d.typestr.kind() != Kind::Void {
            out.push(warning(
                "typestr",
                rules::BIG_ENDIAN,
                format!("'{}' is big-endian: cupy.asarray refuses it", d.typestr),
            ));
        }
        if d.mask.is_some() {
            out.push(warning(
                "mask",
                rules::MASK_INTEROP,
                "a mask is present: Numba and CuPy refuse masked arrays".into(),
            ));
        }
        if d.version < 3 {
            out.push(warning(
                "version",
                rules::VERSION_LEGACY,
                format!("version {} predates streams (version 3)", d.version),
            ));
        }
    }
    out
}

/// The violations of the interface `obj` exposes, if it does (an AttributeError says it does
/// not); any other exception its getter raises propagates.
fn check_interface<S: Space>(obj: &Bound<'_, PyAny>, out: &mut Vec<Violation>) -> PyResult<bool> {
    let py = obj.py();
    match obj.getattr(super::parse::attribute_name::<S>(py)) {
        Ok(dict) => check_dict::<S>(&dict, Some(obj), out).map(|()| true),
        Err(e) if e.is_instance_of::<pyo3::exceptions::PyAttributeError>(py) => Ok(false),
        Err(e) => Err(e),
    }
}

/// The violations in the descriptor `dict`, exposed by `exporter` when one does (a host
/// descriptor without `data` shares the exporter's buffer). An exception the producer's code
/// raised while the dict was read (an `__index__`, a mask's getter) propagates.
fn check_dict<S: Space>(
    dict: &Bound<'_, PyAny>,
    exporter: Option<&Bound<'_, PyAny>>,
    out: &mut Vec<Violation>,
) -> PyResult<()> {
    let parsed = parse_exposed::<S>(dict, exporter);
    if let Some(e) = parsed.raised() {
        return Err(e);
    }
    let mut problems = parsed.problems;
    if let Some(d) = &parsed.descriptor {
        problems.extend(hazards(dict, d));
    }
    out.extend(problems.iter().map(|p| violation(S::ATTRIBUTE, p)));
    Ok(())
}

/// Every violation in a descriptor dict of its own, exposed by no object: of
/// `__cuda_array_interface__` when `device`, else of `__array_interface__`. An exception the
/// dict's own objects raise while it is read propagates.
pub fn check_descriptor(desc: &Bound<'_, PyAny>, device: bool) -> PyResult<Vec<Violation>> {
    let mut out = Vec::new();
    if device {
        check_dict::<Device>(desc, None, &mut out)?;
    } else {
        check_dict::<Host>(desc, None, &mut out)?;
    }
    Ok(out)
}

/// Every violation in `obj`'s `__cuda_array_interface__` and/or `__array_interface__`
/// (whichever it exposes). An object exposing neither gets one violation saying so. Only an
/// AttributeError means "does not expose": any other exception a getter raises propagates.
pub fn check(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Violation>> {
    let mut out = Vec::new();
    let device = check_interface::<Device>(obj, &mut out)?;
    let host = check_interface::<Host>(obj, &mut out)?;
    if !device && !host {
        out.push(Violation {
            interface: String::new(),
            key: String::new(),
            message: format!(
                "{} exposes neither __cuda_array_interface__ nor __array_interface__",
                show(obj)
            ),
            rule: rules::DICT.id.to_owned(),
            rule_text: rules::DICT.text.to_owned(),
            severity: "error".to_owned(),
            exception: "TypeError".to_owned(),
        });
    }
    Ok(out)
}
