//! The NumPy array-interface type string (`typestr`): `<f4`, `|b1`, `>U3`, `<M8[ns]`, `|V12`...
//!
//! Grammar (NumPy array interface, shared by the CUDA Array Interface): one byte-order character
//! (`<` little, `>` big, `|` not applicable, `=` native), one kind character, then the item size
//! as a decimal integer (in characters for `U`, in bits for `t`), and for the datetime kinds `m`
//! and `M` an optional `[unit]` such as `[ns]` or `[10ms]`.
//!
//! [`TypeStr::canonical`] normalises a parsed type string the way NumPy's `dtype(s).str` does,
//! so that two spellings of one type compare equal.

use crate::element::Extended;
use crate::shown::Shown;
use std::fmt;
use std::str::FromStr;

/// Byte order character of a type string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ByteOrder {
    /// `<`
    Little,
    /// `>`
    Big,
    /// `|`: byte order does not apply (one-byte and byte-string types).
    NotApplicable,
    /// `=`: the machine's own order.
    Native,
}

impl ByteOrder {
    /// Every byte order, in the order declared (`Tags` stores the index).
    const ALL: [ByteOrder; 4] = [
        ByteOrder::Little,
        ByteOrder::Big,
        ByteOrder::NotApplicable,
        ByteOrder::Native,
    ];

    /// The machine's own order, spelled explicitly (`<` on little-endian hosts), as NumPy prints it.
    #[cfg(target_endian = "little")]
    pub const HOST: ByteOrder = ByteOrder::Little;
    /// The machine's own order, spelled explicitly (`>` on big-endian hosts), as NumPy prints it.
    #[cfg(target_endian = "big")]
    pub const HOST: ByteOrder = ByteOrder::Big;

    /// The character used in a type string.
    pub const fn as_char(self) -> char {
        match self {
            ByteOrder::Little => '<',
            ByteOrder::Big => '>',
            ByteOrder::NotApplicable => '|',
            ByteOrder::Native => '=',
        }
    }

    const fn from_char(c: char) -> Option<ByteOrder> {
        Some(match c {
            '<' => ByteOrder::Little,
            '>' => ByteOrder::Big,
            '|' => ByteOrder::NotApplicable,
            '=' => ByteOrder::Native,
            _ => return None,
        })
    }
}

/// Kind character of a type string.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// `t`: bit field; the number counts bits (cuDF exports null masks as `<t1`).
    BitField,
    /// `b`: boolean.
    Bool,
    /// `i`: signed integer.
    Int,
    /// `u`: unsigned integer.
    UInt,
    /// `f`: floating point.
    Float,
    /// `c`: complex floating point.
    Complex,
    /// `m`: timedelta.
    TimeDelta,
    /// `M`: datetime.
    DateTime,
    /// `O`: Python object (a pointer).
    Object,
    /// `S`: byte string; the number counts bytes.
    Bytes,
    /// `U`: UCS-4 string; the number counts characters (4 bytes each).
    Unicode,
    /// `V`: raw bytes ("void"), also the type string of structured types.
    Void,
}

impl Kind {
    /// Every kind, in the order declared (`Tags` stores the index).
    const ALL: [Kind; 12] = [
        Kind::BitField,
        Kind::Bool,
        Kind::Int,
        Kind::UInt,
        Kind::Float,
        Kind::Complex,
        Kind::TimeDelta,
        Kind::DateTime,
        Kind::Object,
        Kind::Bytes,
        Kind::Unicode,
        Kind::Void,
    ];

    /// The character used in a type string.
    pub const fn as_char(self) -> char {
        match self {
            Kind::BitField => 't',
            Kind::Bool => 'b',
            Kind::Int => 'i',
            Kind::UInt => 'u',
            Kind::Float => 'f',
            Kind::Complex => 'c',
            Kind::TimeDelta => 'm',
            Kind::DateTime => 'M',
            Kind::Object => 'O',
            Kind::Bytes => 'S',
            Kind::Unicode => 'U',
            Kind::Void => 'V',
        }
    }

    const fn from_char(c: char) -> Option<Kind> {
        Some(match c {
            't' => Kind::BitField,
            'b' => Kind::Bool,
            'i' => Kind::Int,
            'u' => Kind::UInt,
            'f' => Kind::Float,
            'c' => Kind::Complex,
            'm' => Kind::TimeDelta,
            'M' => Kind::DateTime,
            'O' => Kind::Object,
            'S' => Kind::Bytes,
            'U' => Kind::Unicode,
            'V' => Kind::Void,
            _ => return None,
        })
    }

    /// The item sizes this kind allows (`None`: any size).
    fn allowed_sizes(self) -> Option<&'static [usize]> {
        Some(match self {
            Kind::Bool => &[1],
            Kind::Int | Kind::UInt => &[1, 2, 4, 8],
            Kind::Float => &[2, 4, 8, 16],
            Kind::Complex => &[8, 16, 32],
            Kind::TimeDelta | Kind::DateTime => &[8],
            Kind::Object => &[std::mem::size_of::<usize>()],
            Kind::BitField => &[1, 2, 4, 8, 16, 32, 64],
            Kind::Bytes | Kind::Unicode | Kind::Void => return None,
        })
    }
}

/// Base unit of a datetime or timedelta type (`[ns]`, `[D]`...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimeUnitBase {
    /// `Y`
    Year,
    /// `M`
    Month,
    /// `W`
    Week,
    /// `D`
    Day,
    /// `h`
    Hour,
    /// `m`
    Minute,
    /// `s`
    Second,
    /// `ms`
    Milli,
    /// `us` (NumPy also reads `μs`)
    Micro,
    /// `ns`
    Nano,
    /// `ps`
    Pico,
    /// `fs`
    Femto,
    /// `as`
    Atto,
}

impl TimeUnitBase {
    const ALL: [(&'static str, TimeUnitBase); 13] = [
        ("Y", TimeUnitBase::Year),
        ("M", TimeUnitBase::Month),
        ("W", TimeUnitBase::Week),
        ("D", TimeUnitBase::Day),
        ("h", TimeUnitBase::Hour),
        ("m", TimeUnitBase::Minute),
        ("s", TimeUnitBase::Second),
        ("ms", TimeUnitBase::Milli),
        ("us", TimeUnitBase::Micro),
        ("ns", TimeUnitBase::Nano),
        ("ps", TimeUnitBase::Pico),
        ("fs", TimeUnitBase::Femto),
        ("as", TimeUnitBase::Atto),
    ];

    /// The unit's spelling inside `[...]`.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(_, u)| *u == self)
            .map(|(s, _)| *s)
            .unwrap_or("?")
    }

    fn parse(s: &str) -> Option<TimeUnitBase> {
        let s = if s == "μs" { "us" } else { s };
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, u)| *u)
    }
}

/// A datetime unit: a multiplier and a base unit, as in `[10ms]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TimeUnit {
    /// The multiplier (1 when not written).
    pub count: u32,
    /// The base unit.
    pub base: TimeUnitBase,
}

/// A parsed array-interface type string, or the type string of an element type NumPy has no
/// type string for ([`TypeStr::extended`]: bfloat16, the float8 formats), which is written as
/// the opaque bytes it is (`<V2`, `|V1`) and compares unequal to them.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TypeStr {
    /// The number as written: bytes, except characters for `U` and bits for `t`.
    count: usize,
    /// The rest: byte order, kind, datetime unit, and the element's identity for the types the
    /// type string cannot name.
    tags: Tags,
}

/// A type string's fields besides its count, packed into one word: a byte each for the byte
/// order, the kind, the unit's base + 1 and the extended type + 1 (0: none), the unit's
/// multiplier in the high half. A type string is then two words, written and copied whole: as
/// five fields of one to four bytes, every import moved them a few bytes at a time, and each
/// such load waited for the narrower stores before it to reach the cache.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Tags(u64);

impl Tags {
    const fn new(
        order: ByteOrder,
        kind: Kind,
        unit: Option<TimeUnit>,
        ext: Option<Extended>,
    ) -> Tags {
        let (base, multiplier) = match unit {
            Some(u) => (u.base as u64 + 1, u.count as u64),
            None => (0, 0),
        };
        let ext = match ext {
            Some(e) => e as u64 + 1,
            None => 0,
        };
        Tags(order as u64 | (kind as u64) << 8 | base << 16 | ext << 24 | multiplier << 32)
    }

    const fn byte(self, i: u32) -> usize {
        ((self.0 >> (8 * i)) & 0xff) as usize
    }

    const fn order(self) -> ByteOrder {
        ByteOrder::ALL[self.byte(0)]
    }

    const fn kind(self) -> Kind {
        Kind::ALL[self.byte(1)]
    }

    const fn unit(self) -> Option<TimeUnit> {
        match self.byte(2) {
            0 => None,
            b => Some(TimeUnit {
                count: (self.0 >> 32) as u32,
                base: TimeUnitBase::ALL[b - 1].1,
            }),
        }
    }

    const fn ext(self) -> Option<Extended> {
        match self.byte(3) {
            0 => None,
            b => Some(Extended::TABLE[b - 1].0),
        }
    }
}

impl fmt::Debug for TypeStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypeStr")
            .field("order", &self.byte_order())
            .field("kind", &self.kind())
            .field("count", &self.count)
            .field("unit", &self.unit())
            .field("ext", &self.extended_type())
            .finish()
    }
}

/// Why a type string was refused. Every variant carries the offending text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TypeStrError {
    /// Too short to hold byte order, kind and size.
    #[error(
        "typestr {} is too short: expected a byte order (<, >, | or =), a kind letter and an item size, as in '<f4'", Shown(.0)
    )]
    TooShort(String),
    /// The first character is not `<`, `>`, `|` or `=`.
    #[error(
        "typestr {} starts with {found:?}: the first character must be a byte order, one of <, >, | or =", Shown(.value)
    )]
    ByteOrder {
        /// The whole type string.
        value: String,
        /// The character found.
        found: char,
    },
    /// The second character is not a known kind.
    #[error("typestr {} has kind {found:?}: expected one of t b i u f c m M O S U V", Shown(.value))]
    Kind {
        /// The whole type string.
        value: String,
        /// The character found.
        found: char,
    },
    /// The size is missing or not a decimal number.
    #[error(
        "typestr {} has no valid item size: expected decimal digits after the kind letter, as in '<f4'", Shown(.0)
    )]
    Size(String),
    /// The size is not one this kind has.
    #[error("typestr {}: kind '{kind}' has no item size {size} (allowed: {allowed})", Shown(.value))]
    SizeForKind {
        /// The whole type string.
        value: String,
        /// The kind character.
        kind: char,
        /// The size found.
        size: usize,
        /// The sizes allowed, comma separated.
        allowed: String,
    },
    /// A `[unit]` suffix is malformed, unknown, or given to a kind other than `m` and `M`.
    #[error("typestr {} has an invalid datetime unit: {reason}", Shown(.value))]
    Unit {
        /// The whole type string.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The item size in bytes does not fit in `usize`.
    #[error("typestr {}: item size overflows", Shown(.0))]
    Overflow(String),
}

impl TypeStr {
    /// A type string from its parts, unchecked; for constants such as [`crate::Element`] impls.
    /// `count` is in bytes, except characters for [`Kind::Unicode`] and bits for
    /// [`Kind::BitField`].
    pub const fn new(order: ByteOrder, kind: Kind, count: usize) -> TypeStr {
        TypeStr {
            count,
            tags: Tags::new(order, kind, None, None),
        }
    }

    /// The type string of `e`: its bytes (`<V2` for bfloat16, as PyTorch writes it; `|V1` for
    /// a float8), with its identity, which dicts cannot carry but DLPack's codes and NumPy's
    /// dtype objects (ml_dtypes') do.
    pub const fn extended(e: Extended) -> TypeStr {
        let size = e.itemsize();
        let order = if size > 1 {
            ByteOrder::Little
        } else {
            ByteOrder::NotApplicable
        };
        TypeStr {
            count: size,
            tags: Tags::new(order, Kind::Void, None, Some(e)),
        }
    }

    /// The element type, for a type string of [`TypeStr::extended`].
    pub const fn extended_type(&self) -> Option<Extended> {
        self.tags.ext()
    }

    /// The extended type this type string stands for: its own, or bfloat16 for a bare `<V2`,
    /// as PyTorch writes bfloat16 in a dict (NumPy writes its two-byte void `|V2`).
    pub fn stands_for(&self) -> Option<Extended> {
        self.extended_type().or_else(|| {
            (self.kind() == Kind::Void && self.count == 2 && self.byte_order() == ByteOrder::Little)
                .then_some(Extended::Bfloat16)
        })
    }

    /// `|V<size>`: raw bytes, the type string of structured elements.
    pub const fn void(size: usize) -> TypeStr {
        TypeStr::new(ByteOrder::NotApplicable, Kind::Void, size)
    }

    /// The same type with a datetime unit (only meaningful for `m` and `M`).
    pub const fn with_unit(self, unit: TimeUnit) -> TypeStr {
        TypeStr {
            count: self.count,
            tags: Tags::new(
                self.byte_order(),
                self.kind(),
                Some(unit),
                self.extended_type(),
            ),
        }
    }

    /// The byte order as written.
    pub const fn byte_order(&self) -> ByteOrder {
        self.tags.order()
    }

    /// The kind.
    pub const fn kind(&self) -> Kind {
        self.tags.kind()
    }

    /// The number as written after the kind letter.
    pub const fn count(&self) -> usize {
        self.count
    }

    /// The datetime unit, if any.
    pub const fn unit(&self) -> Option<TimeUnit> {
        self.tags.unit()
    }

    /// The size of one item in bytes (`U`: 4 bytes a character; `t`: bits rounded up to bytes).
    pub const fn itemsize(&self) -> usize {
        match self.kind() {
            Kind::Unicode => self.count.saturating_mul(4),
            Kind::BitField => self.count.div_ceil(8),
            _ => self.count,
        }
    }

    /// The spelling NumPy's `dtype(s).str` gives: `=` becomes the host order, types for which
    /// order means nothing (one byte, `S`, `V`, `O`) get `|`, and `|` on a multi-byte number
    /// becomes the host order.
    pub const fn canonical(&self) -> TypeStr {
        if self.extended_type().is_some() {
            // Its spelling is its element's.
            return *self;
        }
        let (kind, order) = (self.kind(), self.byte_order());
        let order = match kind {
            Kind::Bytes | Kind::Void | Kind::Object => ByteOrder::NotApplicable,
            Kind::Unicode => match order {
                ByteOrder::Big | ByteOrder::Little => order,
                _ => ByteOrder::HOST,
            },
            _ if self.count <= 1 && !matches!(kind, Kind::BitField) => ByteOrder::NotApplicable,
            _ => match order {
                ByteOrder::Big | ByteOrder::Little => order,
                _ => ByteOrder::HOST,
            },
        };
        TypeStr {
            count: self.count,
            tags: Tags::new(order, kind, self.unit(), None),
        }
    }

    /// Whether both name the same type once canonical (`=f4` and `<f4` on a little-endian host);
    /// an extended type is itself only (bfloat16 is not any `|V2`).
    pub fn same_type(&self, other: &TypeStr) -> bool {
        self.canonical() == other.canonical()
    }

    /// Parses a type string; see the module documentation for the grammar. `f1` (no such NumPy
    /// type) is ml_dtypes' spelling of float8_e5m2, read as that [`Extended`] type, which is
    /// written as its byte (`|V1`).
    pub fn parse(s: &str) -> Result<TypeStr, TypeStrError> {
        let mut chars = s.chars();
        let (Some(o), Some(k)) = (chars.next(), chars.next()) else {
            return Err(TypeStrError::TooShort(s.to_owned()));
        };
        let order = ByteOrder::from_char(o).ok_or_else(|| TypeStrError::ByteOrder {
            value: s.to_owned(),
            found: o,
        })?;
        let kind = Kind::from_char(k).ok_or_else(|| TypeStrError::Kind {
            value: s.to_owned(),
            found: k,
        })?;
        let rest = chars.as_str();
        let digits_end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let (digits, suffix) = rest.split_at(digits_end);
        let count: usize = if digits.is_empty() && kind == Kind::Object {
            // NumPy spells objects `|O`, without a size: a pointer.
            std::mem::size_of::<usize>()
        } else if digits.is_empty() {
            return Err(TypeStrError::Size(s.to_owned()));
        } else {
            digits
                .parse()
                .map_err(|_| TypeStrError::Overflow(s.to_owned()))?
        };
        let unit = if suffix.is_empty() {
            None
        } else {
            Some(parse_unit(s, kind, suffix)?)
        };
        let ts = TypeStr {
            count,
            tags: Tags::new(order, kind, unit, None),
        };
        if kind == Kind::Unicode && count.checked_mul(4).is_none() {
            return Err(TypeStrError::Overflow(s.to_owned()));
        }
        if kind == Kind::Float && count == 1 && unit.is_none() {
            // NumPy has no one-byte float: `f1` is ml_dtypes' spelling of float8_e5m2 (its
            // other float8 types are `V1`).
            return Ok(TypeStr::extended(Extended::Float8E5M2));
        }
        if let Some(allowed) = kind.allowed_sizes()
            && !allowed.contains(&count)
        {
            return Err(TypeStrError::SizeForKind {
                value: s.to_owned(),
                kind: k,
                size: count,
                allowed: allowed
                    .iter()
                    .map(|n| n.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        Ok(ts)
    }
}

fn parse_unit(s: &str, kind: Kind, suffix: &str) -> Result<TimeUnit, TypeStrError> {
    let err = |reason| TypeStrError::Unit {
        value: s.to_owned(),
        reason,
    };
    if !matches!(kind, Kind::DateTime | Kind::TimeDelta) {
        return Err(err("only kinds 'm' and 'M' take a [unit] suffix"));
    }
    let inner = suffix
        .strip_prefix('[')
        .and_then(|r| r.strip_suffix(']'))
        .ok_or_else(|| err("expected a unit in square brackets, as in '<M8[ns]'"))?;
    let split = inner
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(inner.len());
    let (n, base) = inner.split_at(split);
    let count = if n.is_empty() {
        1
    } else {
        n.parse::<u32>()
            .ok()
            .filter(|c| *c > 0)
            .ok_or_else(|| err("the unit multiplier must be a positive 32-bit integer"))?
    };
    let base = TimeUnitBase::parse(base)
        .ok_or_else(|| err("unknown unit; expected one of Y M W D h m s ms us ns ps fs as"))?;
    Ok(TimeUnit { count, base })
}

impl FromStr for TypeStr {
    type Err = TypeStrError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TypeStr::parse(s)
    }
}

impl fmt::Display for TypeStr {
    /// Writes the type string as parsed or constructed; use [`TypeStr::canonical`] first for
    /// NumPy's spelling. Objects are written `|O` as NumPy does.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{}",
            self.byte_order().as_char(),
            self.kind().as_char()
        )?;
        if self.kind() != Kind::Object {
            write!(f, "{}", self.count)?;
        }
        if let Some(u) = self.unit() {
            if u.count == 1 {
                write!(f, "[{}]", u.base.as_str())?;
            } else {
                write!(f, "[{}{}]", u.count, u.base.as_str())?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(s: &str) -> String {
        TypeStr::parse(s).unwrap().canonical().to_string()
    }

    #[test]
    fn canonical_matches_numpy_spelling() {
        // Expected values are NumPy 2.4's `dtype(s).str` on a little-endian host.
        for (input, numpy) in [
            ("<b1", "|b1"),
            ("=i4", "<i4"),
            ("|i4", "<i4"),
            (">i1", "|i1"),
            ("<S5", "|S5"),
            ("|U3", "<U3"),
            (">U3", ">U3"),
            ("<U1", "<U1"),
            (">U1", ">U1"),
            ("=U1", "<U1"),
            (">f8", ">f8"),
            ("<i2", "<i2"),
            ("<V2", "|V2"),
            ("<O8", "|O"),
            ("M8[ns]", "<M8[ns]"),
            ("<M8[2ms]", "<M8[2ms]"),
            ("f04", "<f4"),
        ] {
            let input = if input.starts_with(['<', '>', '|', '=']) {
                input.to_owned()
            } else {
                format!("={input}")
            };
            assert_eq!(canon(&input), numpy, "{input}");
        }
    }

    #[test]
    fn tags_give_back_every_field() {
        // Each table `Tags` indexes lists its enum in the order declared.
        assert!(
            ByteOrder::ALL
                .iter()
                .enumerate()
                .all(|(i, o)| *o as usize == i)
        );
        assert!(Kind::ALL.iter().enumerate().all(|(i, k)| *k as usize == i));
        assert!(
            TimeUnitBase::ALL
                .iter()
                .enumerate()
                .all(|(i, u)| u.1 as usize == i)
        );
        assert!(
            Extended::TABLE
                .iter()
                .enumerate()
                .all(|(i, e)| e.0 as usize == i)
        );
        let units = TimeUnitBase::ALL
            .iter()
            .flat_map(|u| [1, 7, u32::MAX].map(|count| Some(TimeUnit { count, base: u.1 })));
        let units: Vec<_> = [None].into_iter().chain(units).collect();
        let exts: Vec<_> = [None]
            .into_iter()
            .chain(Extended::TABLE.iter().map(|e| Some(e.0)))
            .collect();
        for order in ByteOrder::ALL {
            for kind in Kind::ALL {
                for unit in &units {
                    for ext in &exts {
                        let t = Tags::new(order, kind, *unit, *ext);
                        assert_eq!(
                            (t.order(), t.kind(), t.unit(), t.ext()),
                            (order, kind, *unit, *ext)
                        );
                    }
                }
            }
        }
        assert_eq!(
            format!("{:?}", TypeStr::parse("<M8[10ms]").unwrap()),
            "TypeStr { order: Little, kind: DateTime, count: 8, unit: Some(TimeUnit { count: 10, \
             base: Milli }), ext: None }"
        );
    }

    #[test]
    fn ml_dtypes_f1_is_float8_e5m2_written_as_its_byte() {
        let t = TypeStr::parse("<f1").unwrap();
        assert_eq!(t.extended_type(), Some(Extended::Float8E5M2));
        assert_eq!(t.to_string(), "|V1");
        assert_eq!(TypeStr::parse("|V1").unwrap(), TypeStr::void(1));
        assert!(!t.same_type(&TypeStr::void(1)));
    }

    #[test]
    fn errors_name_the_value() {
        let e = TypeStr::parse("<f3").unwrap_err();
        assert_eq!(
            e.to_string(),
            "typestr \"<f3\": kind 'f' has no item size 3 (allowed: 2, 4, 8, 16)"
        );
        assert!(matches!(
            TypeStr::parse("f4"),
            Err(TypeStrError::ByteOrder { .. })
        ));
        assert!(matches!(
            TypeStr::parse("<x4"),
            Err(TypeStrError::Kind { .. })
        ));
        assert!(matches!(TypeStr::parse("<f"), Err(TypeStrError::Size(_))));
        assert!(matches!(
            TypeStr::parse("<"),
            Err(TypeStrError::TooShort(_))
        ));
        assert!(matches!(
            TypeStr::parse("<f4[ns]"),
            Err(TypeStrError::Unit { .. })
        ));
        assert!(matches!(
            TypeStr::parse("<M8[xx]"),
            Err(TypeStrError::Unit { .. })
        ));
        // NumPy 2.4 accepts a zero multiplier, then fails on it (`astype` raises SystemError);
        // a unit of zero seconds means nothing, so it is refused here.
        assert!(matches!(
            TypeStr::parse("<M8[0s]"),
            Err(TypeStrError::Unit { .. })
        ));
        assert!(matches!(
            TypeStr::parse("<V99999999999999999999999"),
            Err(TypeStrError::Overflow(_))
        ));
        assert!(matches!(
            TypeStr::parse(&format!("<U{}", usize::MAX / 2)),
            Err(TypeStrError::Overflow(_))
        ));
    }

    #[test]
    fn itemsize_by_kind() {
        assert_eq!(TypeStr::parse("<U3").unwrap().itemsize(), 12);
        assert_eq!(TypeStr::parse("<t1").unwrap().itemsize(), 1);
        // Bits, rounded up to whole bytes.
        assert_eq!(TypeStr::parse("<t2").unwrap().itemsize(), 1);
        assert_eq!(TypeStr::parse("<t16").unwrap().itemsize(), 2);
        assert_eq!(TypeStr::parse("<t64").unwrap().itemsize(), 8);
        assert_eq!(TypeStr::parse("|V12").unwrap().itemsize(), 12);
        assert_eq!(TypeStr::parse("<c16").unwrap().itemsize(), 16);
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "<f4",
            ">i8",
            "|b1",
            "|V0",
            "<U0",
            "<m8[10us]",
            "<M8",
            "<t1",
            "|O",
        ] {
            assert_eq!(TypeStr::parse(s).unwrap().to_string(), s);
        }
        let t = TypeStr::parse("<m8[10us]").unwrap();
        assert_eq!((t.count(), t.kind()), (8, Kind::TimeDelta));
        assert_eq!(
            t.unit(),
            Some(TimeUnit {
                count: 10,
                base: TimeUnitBase::Micro
            })
        );
        assert_eq!(TypeStr::parse("<U3").unwrap().count(), 3);
        assert!(
            !TypeStr::parse("<f4")
                .unwrap()
                .same_type(&TypeStr::parse("<i4").unwrap())
        );
        assert!(
            !TypeStr::parse("<f4")
                .unwrap()
                .same_type(&TypeStr::parse(">f4").unwrap())
        );
        // NumPy prints objects without a size; both spellings are one type.
        assert!(
            TypeStr::parse("|O8")
                .unwrap()
                .same_type(&TypeStr::parse("|O").unwrap())
        );
    }
}
