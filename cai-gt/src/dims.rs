//! A storage's semantic dimensions (GDP-3's `dims`: `"I"`, `"J"`, `"K"`, then data dimensions
//! `"0"`, `"1"`, ...) and [`PerDim`], the small vector every per-dimension parameter is kept
//! in, so that creating and viewing storages of up to four dimensions allocates nothing for
//! them.

use std::fmt;

use smallvec::SmallVec;

use crate::StorageError;
use cai_runtime::__private::Shown;

/// One value per dimension; up to four held inline.
pub type PerDim<T> = SmallVec<[T; 4]>;

/// One semantic dimension.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dim {
    /// `"I"`.
    I,
    /// `"J"`.
    J,
    /// `"K"`.
    K,
    /// A data dimension, `"0"`, `"1"`, ...
    Data(u32),
}

impl Dim {
    /// `"I"`, `"J"`, `"K"` or a non-negative integer written in decimal digits (`"0"`, `"12"`;
    /// no sign, no spaces).
    pub fn parse(name: &str) -> Option<Dim> {
        match name {
            "I" => Some(Dim::I),
            "J" => Some(Dim::J),
            "K" => Some(Dim::K),
            n if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                n.parse().ok().map(Dim::Data)
            }
            _ => None,
        }
    }
}

/// The name, as GDP-3 writes it (`I`, `0`).
impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::I => f.write_str("I"),
            Dim::J => f.write_str("J"),
            Dim::K => f.write_str("K"),
            Dim::Data(n) => write!(f, "{n}"),
        }
    }
}

/// The name in quotes (`"I"`), as a list of dims reads in Python.
impl fmt::Debug for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// `dims` from their names: `I`, `J`, `K` at most once each, other dims non-negative
/// integers, none repeated (`"0"` and `"00"` are the same data dimension).
pub fn parse_dims<S: AsRef<str>>(names: &[S]) -> Result<PerDim<Dim>, StorageError> {
    let bad = |why: String| StorageError::Dims {
        dims: names.iter().map(|n| n.as_ref().to_string()).collect(),
        why,
    };
    let mut dims = PerDim::with_capacity(names.len());
    for name in names {
        let name = name.as_ref();
        let d = Dim::parse(name).ok_or_else(|| {
            bad(format!(
                "{} is not a dimension: use \"I\", \"J\", \"K\" or data dimensions \"0\", \"1\", ...",
                Shown(name)
            ))
        })?;
        if dims.contains(&d) {
            return Err(bad(format!("{d:?} appears twice")));
        }
        dims.push(d);
    }
    Ok(dims)
}

/// The default dims for `ndim` dimensions: I, J, K, then data dimensions 0, 1, ...
pub fn default_dims(ndim: usize) -> PerDim<Dim> {
    (0..ndim)
        .map(|i| match i {
            0 => Dim::I,
            1 => Dim::J,
            2 => Dim::K,
            // `ndim` is at most a few dozen (NumPy's limit is 64).
            n => Dim::Data(u32::try_from(n - 3).unwrap_or(u32::MAX)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in ["I", "J", "K", "0", "1", "17"] {
            assert_eq!(Dim::parse(name).unwrap().to_string(), name);
        }
        assert_eq!(Dim::parse("007"), Some(Dim::Data(7)));
        for bad in ["", "i", "IJ", "-1", "+1", " 1", "1.0", "99999999999", "X"] {
            assert_eq!(Dim::parse(bad), None, "{bad:?}");
        }
        assert_eq!(
            format!("{:?}", default_dims(5)),
            r#"["I", "J", "K", "0", "1"]"#
        );
    }

    #[test]
    fn bad_dims_name_the_entry() {
        let e = parse_dims(&["I", "X"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"dims = ["I", "X"]: "X" is not a dimension: use "I", "J", "K" or data dimensions "0", "1", ..."#
        );
        let e = parse_dims(&["0", "I", "00"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"dims = ["0", "I", "00"]: "0" appears twice"#
        );
        assert_eq!(parse_dims::<&str>(&[]).unwrap().len(), 0);
    }
}
