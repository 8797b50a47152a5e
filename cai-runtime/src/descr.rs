//! `descr` lists: the array interface's description of structured types, as NumPy's
//! `dtype.descr` prints them: `[('x', '<f4'), ('', '|V4'), ('pos', [('a', '<i4')]), ('m', '<f4', (3,))]`.
//!
//! A descr list is sequential: fields follow one another with no offsets, so gaps are spelled
//! as unnamed `|V<n>` padding entries.

use std::fmt;

use crate::typestr::TypeStr;

/// A `descr` list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Descr(pub Vec<DescrField>);

/// One entry of a `descr` list: `(name, format)` or `(name, format, shape)`, where the name may
/// be a `(title, name)` pair.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DescrField {
    /// Field name; empty for padding.
    pub name: String,
    /// Optional title (NumPy writes the name as `(title, name)` when present).
    pub title: Option<String>,
    /// The field's type.
    pub format: DescrFormat,
    /// Sub-array shape; empty when the field is a single item.
    pub shape: Vec<usize>,
}

/// A field's type: a type string, or a nested `descr` list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DescrFormat {
    /// A plain type string.
    Type(TypeStr),
    /// A nested structured type.
    Nested(Descr),
}

impl Descr {
    /// The one-entry list NumPy gives for a plain type: `[('', typestr)]`.
    pub fn simple(typestr: TypeStr) -> Descr {
        Descr(vec![DescrField::padding_like(
            "",
            DescrFormat::Type(typestr),
        )])
    }

    /// Total size in bytes of the described item, or `None` on overflow.
    pub fn itemsize(&self) -> Option<usize> {
        self.0.iter().try_fold(0usize, |acc, f| {
            let one = match &f.format {
                DescrFormat::Type(t) => t.itemsize(),
                DescrFormat::Nested(d) => d.itemsize()?,
            };
            let n = f.shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
            acc.checked_add(one.checked_mul(n)?)
        })
    }

    /// Whether this is the descr of a plain (non-structured) type: one unnamed entry.
    pub fn is_simple(&self) -> bool {
        matches!(self.0.as_slice(), [f] if f.name.is_empty() && f.title.is_none() && f.shape.is_empty() && matches!(f.format, DescrFormat::Type(_)))
    }

    /// Writes the list as a Python literal, exactly as `repr(dtype.descr)` does.
    pub fn write_python(&self, out: &mut impl fmt::Write) -> fmt::Result {
        out.write_char('[')?;
        for (i, f) in self.0.iter().enumerate() {
            if i > 0 {
                out.write_str(", ")?;
            }
            out.write_char('(')?;
            match &f.title {
                Some(t) => {
                    out.write_char('(')?;
                    write_py_str(out, t)?;
                    out.write_str(", ")?;
                    write_py_str(out, &f.name)?;
                    out.write_char(')')?;
                }
                None => write_py_str(out, &f.name)?,
            }
            out.write_str(", ")?;
            match &f.format {
                DescrFormat::Type(t) => write_py_str(out, &t.to_string())?,
                DescrFormat::Nested(d) => d.write_python(out)?,
            }
            if !f.shape.is_empty() {
                out.write_str(", ")?;
                write_py_tuple(out, f.shape.iter())?;
            }
            out.write_char(')')?;
        }
        out.write_char(']')
    }
}

impl DescrField {
    fn padding_like(name: &str, format: DescrFormat) -> DescrField {
        DescrField {
            name: name.to_owned(),
            title: None,
            format,
            shape: Vec::new(),
        }
    }

    /// An unnamed `|V<size>` padding entry.
    pub fn padding(size: usize) -> DescrField {
        DescrField::padding_like("", DescrFormat::Type(TypeStr::void(size)))
    }
}

impl fmt::Display for Descr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_python(f)
    }
}

/// Writes a Python string literal with single quotes, escaping like `repr(str)` for the
/// characters that matter in names (backslash, quote, control characters).
pub(crate) fn write_py_str(out: &mut impl fmt::Write, s: &str) -> fmt::Result {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.write_char(quote)?;
    for c in s.chars() {
        match c {
            '\\' => out.write_str("\\\\")?,
            '\n' => out.write_str("\\n")?,
            '\r' => out.write_str("\\r")?,
            '\t' => out.write_str("\\t")?,
            c if c == quote => {
                out.write_char('\\')?;
                out.write_char(c)?;
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => write!(out, "\\x{:02x}", c as u32)?,
            c => out.write_char(c)?,
        }
    }
    out.write_char(quote)
}

/// A Python tuple literal of values, for error messages: `(3,)`, `(2, 3)`.
pub(crate) fn py_tuple<T: fmt::Display>(v: &[T]) -> String {
    let mut s = String::new();
    let _ = write_py_tuple(&mut s, v.iter());
    s
}

/// Writes a Python tuple literal of integers: `()`, `(3,)`, `(2, 3)`.
pub(crate) fn write_py_tuple<T: fmt::Display>(
    out: &mut impl fmt::Write,
    items: impl ExactSizeIterator<Item = T>,
) -> fmt::Result {
    let n = items.len();
    out.write_char('(')?;
    for (i, v) in items.enumerate() {
        if i > 0 {
            out.write_str(", ")?;
        }
        write!(out, "{v}")?;
    }
    if n == 1 {
        out.write_char(',')?;
    }
    out.write_char(')')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_literal_matches_numpy_repr() {
        let f4 = TypeStr::parse("<f4").unwrap();
        let d = Descr(vec![
            DescrField {
                name: "x".into(),
                title: Some("T".into()),
                format: DescrFormat::Type(f4),
                shape: vec![],
            },
            DescrField::padding(4),
            DescrField {
                name: "m".into(),
                title: None,
                format: DescrFormat::Nested(Descr::simple(f4)),
                shape: vec![3],
            },
        ]);
        assert_eq!(
            d.to_string(),
            "[(('T', 'x'), '<f4'), ('', '|V4'), ('m', [('', '<f4')], (3,))]"
        );
        assert_eq!(d.itemsize(), Some(20));
        assert!(!d.is_simple());
        assert!(Descr::simple(f4).is_simple());
    }

    #[test]
    fn quotes_like_python_repr() {
        let mut s = String::new();
        write_py_str(&mut s, "it's").unwrap();
        assert_eq!(s, "\"it's\"");
        s.clear();
        write_py_str(&mut s, "a\\b\n").unwrap();
        assert_eq!(s, "'a\\\\b\\n'");
    }
}
