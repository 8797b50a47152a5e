//! The [`Element`] trait: which Rust types can be array items, and their NumPy type strings.
//!
//! Like rust-numpy's `Element`, each implementation states the dtype that describes the type's
//! memory exactly. Scalars map to NumPy's `dtype.str`; `#[repr(C)]` structs get one from
//! `#[derive(Element)]`, with typestr `|V<size>` and a `descr` equal to NumPy's, padding included.
//! The scalar element types are listed once, in [`for_each_element!`](crate::for_each_element),
//! which makes their implementations here and every per-type dispatch elsewhere.
//!
//! ## bfloat16 and the float8 formats
//! NumPy has no type string for them: they are [`Extended`] element types. `half::bf16` (feature
//! `bf16`) is written `<V2`, the type string recent PyTorch versions export (earlier ones used
//! `<f2`, which consumers then read as float16: silently wrong values); `float8::F8E4M3` and
//! `float8::F8E5M2` (feature `float8`) are written `|V1`. Consumers that do not know them see
//! raw bytes instead of wrong numbers. Their identity travels where a protocol can carry it:
//! DLPack's type codes (`kDLBfloat`, `kDLFloat8_e4m3fn`, `kDLFloat8_e5m2`), and, in Python,
//! ml_dtypes' `numpy.dtype`s (`.dtype` of storages and views, `__array_struct__`, the storage
//! creators). A CAI or `__array_interface__` dict cannot: there they are their bytes. Without
//! the feature, using the type as an element is a compile error that names the feature.

use crate::structured::{Descr, DescrField, DescrFormat};
use crate::typestr::{ByteOrder, Kind, TypeStr};

/// A Rust type that can be an item of an exported array.
///
/// # Safety
/// [`Element::DTYPE`] must describe `Self`'s memory exactly: its size equals
/// `size_of::<Self>()` and, for structs, every field's offset, type and sub-array shape are the
/// real ones. `#[derive(Element)]` guarantees this with `offset_of!` and `size_of`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be an array element: it has no NumPy type string",
    label = "not an array element",
    note = "elements are bool, i8..i64, u8..u64, isize, usize, f32, f64, `half::f16` (feature `half`), `num_complex::Complex<f32 | f64>` (feature `complex`), and `#[repr(C)]` structs with `#[derive(Element)]`",
    note = "`half::bf16` has no NumPy type string; enable the `bf16` feature of cai-runtime to export it as `<V2` as PyTorch does"
)]
pub unsafe trait Element: Copy + 'static {
    /// The dtype describing `Self`.
    const DTYPE: DType;
}

/// The element types NumPy has no type string for, kept apart from the opaque bytes their type
/// string says (one table: the name ml_dtypes gives each, its size, its DLPack type code). Each
/// Rust type for one is a line of [`for_each_element!`](crate::for_each_element).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Extended {
    /// bfloat16 (`half::bf16`, ml_dtypes' `bfloat16`, `kDLBfloat`).
    Bfloat16,
    /// float8 E4M3, finite (no infinities; `float8::F8E4M3`, ml_dtypes' `float8_e4m3fn`,
    /// `kDLFloat8_e4m3fn`).
    Float8E4M3Fn,
    /// float8 E5M2 (`float8::F8E5M2`, ml_dtypes' `float8_e5m2`, `kDLFloat8_e5m2`).
    Float8E5M2,
}

impl Extended {
    /// Every extended type, with ml_dtypes' name, its size in bytes and DLPack's type code.
    pub(crate) const TABLE: [(Extended, &'static str, usize, u8); 3] = [
        (Extended::Bfloat16, "bfloat16", 2, 4),
        (Extended::Float8E4M3Fn, "float8_e4m3fn", 1, 10),
        (Extended::Float8E5M2, "float8_e5m2", 1, 12),
    ];

    const fn row(self) -> (Extended, &'static str, usize, u8) {
        match self {
            Extended::Bfloat16 => Self::TABLE[0],
            Extended::Float8E4M3Fn => Self::TABLE[1],
            Extended::Float8E5M2 => Self::TABLE[2],
        }
    }

    /// The name of its `numpy.dtype` in ml_dtypes (and in JAX): `"bfloat16"`...
    pub const fn name(self) -> &'static str {
        self.row().1
    }

    /// Its size in bytes.
    pub const fn itemsize(self) -> usize {
        self.row().2
    }

    /// DLPack's type code for it (its `bits` are 8 times its size).
    pub const fn dlpack_code(self) -> u8 {
        self.row().3
    }

    /// The type of ml_dtypes name `name`.
    pub fn from_name(name: &str) -> Option<Extended> {
        Self::TABLE.iter().find(|r| r.1 == name).map(|r| r.0)
    }

    /// The type of DLPack type code `code` (whatever its `bits`).
    pub fn from_dlpack_code(code: u8) -> Option<Extended> {
        Self::TABLE.iter().find(|r| r.3 == code).map(|r| r.0)
    }
}

/// A compile-time description of an element type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    /// A plain type with a type string (already canonical).
    Scalar(TypeStr),
    /// A `#[repr(C)]` struct.
    Struct(StructDType),
}

/// A structured element: size and fields in declaration order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StructDType {
    /// `size_of::<Self>()`, trailing padding included.
    pub size: usize,
    /// The fields.
    pub fields: &'static [FieldDType],
}

/// One field of a [`StructDType`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldDType {
    /// The field name (`f0`, `f1`... for tuple structs, as NumPy names unnamed fields).
    pub name: &'static str,
    /// Byte offset in the struct.
    pub offset: usize,
    /// The field's item type.
    pub dtype: &'static DType,
    /// Sub-array shape for array fields such as `[[f32; 3]; 2]` (here `[2, 3]`); empty otherwise.
    pub shape: &'static [usize],
}

impl DType {
    /// Size of one item in bytes.
    pub const fn itemsize(&self) -> usize {
        match self {
            DType::Scalar(t) => t.itemsize(),
            DType::Struct(s) => s.size,
        }
    }

    /// The type string: the scalar's own, or `|V<size>` for structs.
    pub const fn typestr(&self) -> TypeStr {
        match self {
            DType::Scalar(t) => *t,
            DType::Struct(s) => TypeStr::void(s.size),
        }
    }

    /// The `descr` list NumPy gives for this dtype: `[('', typestr)]` for scalars; for structs
    /// the fields with `('', '|V<n>')` entries for every gap and for trailing padding.
    pub fn descr(&self) -> Descr {
        match self {
            DType::Scalar(t) => Descr::simple(*t),
            DType::Struct(s) => s.descr(),
        }
    }
}

impl StructDType {
    fn descr(&self) -> Descr {
        let mut fields: Vec<&FieldDType> = self.fields.iter().collect();
        fields.sort_by_key(|f| f.offset);
        let mut out = Vec::with_capacity(fields.len() * 2);
        let mut at = 0usize;
        for f in fields {
            if f.offset > at {
                out.push(DescrField::padding(f.offset - at));
            }
            let format = match f.dtype {
                DType::Scalar(t) => DescrFormat::Type(*t),
                DType::Struct(s) => DescrFormat::Nested(s.descr()),
            };
            out.push(DescrField {
                name: f.name.to_owned(),
                title: None,
                format,
                shape: f.shape.to_vec(),
            });
            let count: usize = f.shape.iter().product();
            at = f.offset + f.dtype.itemsize() * count;
        }
        if self.size > at {
            out.push(DescrField::padding(self.size - at));
        }
        name_clashing_padding(&mut out);
        Descr(out)
    }
}

/// Names the padding entries that NumPy could not read back. NumPy names an unnamed entry
/// `f<its index>`, so in `[('f0', '<u2'), ('', '|V6'), ('f1', '<f8')]` (a tuple struct, and
/// NumPy's own `dtype.descr` of it) the padding becomes a second `f1` and `numpy.dtype(descr)`
/// raises "field 'f1' occurs more than once". Such padding is named `_pad<index>` instead (with
/// `_` appended while a field has that name); every other list stays exactly NumPy's.
fn name_clashing_padding(out: &mut [DescrField]) {
    let taken = |out: &[DescrField], name: &str| out.iter().any(|f| f.name == name);
    for i in 0..out.len() {
        if out[i].name.is_empty() && taken(out, &format!("f{i}")) {
            let mut name = format!("_pad{i}");
            while taken(out, &name) {
                name.push('_');
            }
            out[i].name = name;
        }
    }
}

/// Calls `$callback!(Kind, Type);` once for every scalar element type: the one list of them,
/// which [`Element`]'s own implementations and every other per-type dispatch (the `cai`
/// package's typed `get`/`set`, its `Buffer` dtypes, the NumPy oracle) are made from, so that a
/// new element type is added here and nowhere else.
///
/// `Kind` is the [`Kind`] variant of the type's type string (`Bool`, `Int`, `UInt`, `Float`,
/// `Complex`), or `Void` for a type NumPy has no type string for, exported as opaque bytes,
/// whose [`Extended`] variant follows (`$callback!(Void, Type, Bfloat16)`; see the module
/// documentation); a callback matches it to pick the types it handles. `Type` is a path the
/// caller can use without depending on `half`, `num-complex` or `float8`. The types behind a
/// feature of cai-runtime (`half`, `complex`, `bf16`, `float8`) are listed where cai-runtime
/// was built with that feature, whatever the caller's own features.
///
/// ```
/// use cai_runtime::Element;
///
/// fn itemsizes() -> Vec<(&'static str, usize)> {
///     let mut out = Vec::new();
///     macro_rules! note {
///         (Void, $ty:ty, $ext:ident) => {}; // no NumPy type
///         ($kind:ident, $ty:ty) => {
///             out.push((stringify!($kind), <$ty as Element>::DTYPE.itemsize()));
///         };
///     }
///     cai_runtime::for_each_element!(note);
///     out
/// }
/// assert_eq!(itemsizes()[..2], [("Bool", 1), ("Int", 1)]);
/// ```
#[macro_export]
macro_rules! for_each_element {
    ($callback:ident) => {
        $callback!(Bool, bool);
        $callback!(Int, i8);
        $callback!(Int, i16);
        $callback!(Int, i32);
        $callback!(Int, i64);
        $callback!(Int, isize);
        $callback!(UInt, u8);
        $callback!(UInt, u16);
        $callback!(UInt, u32);
        $callback!(UInt, u64);
        $callback!(UInt, usize);
        $callback!(Float, f32);
        $callback!(Float, f64);
        $crate::__if_feature_half! {
            $callback!(Float, $crate::__private::F16);
        }
        $crate::__if_feature_complex! {
            $callback!(Complex, $crate::__private::Complex32);
            $callback!(Complex, $crate::__private::Complex64);
        }
        $crate::__if_feature_bf16! {
            $callback!(Void, $crate::__private::Bf16, Bfloat16);
        }
        $crate::__if_feature_float8! {
            $callback!(Void, $crate::__private::F8E4M3, Float8E4M3Fn);
            $callback!(Void, $crate::__private::F8E5M2, Float8E5M2);
        }
    };
}

/// The feature-gated element types, for `for_each_element!`'s callers that depend on neither
/// crate (`cai_runtime::__private::Bf16`...). Aliases, not re-exports of the crates: rustc
/// would then name the types by that path in users' error messages
/// (`cai_runtime::__private::half::f16`).
#[doc(hidden)]
pub mod feature_types {
    #[cfg(feature = "bf16")]
    pub type Bf16 = half::bf16;
    #[cfg(feature = "complex")]
    pub type Complex32 = num_complex::Complex<f32>;
    #[cfg(feature = "complex")]
    pub type Complex64 = num_complex::Complex<f64>;
    #[cfg(feature = "half")]
    pub type F16 = half::f16;
    #[cfg(feature = "float8")]
    pub type F8E4M3 = float8::F8E4M3;
    #[cfg(feature = "float8")]
    pub type F8E5M2 = float8::F8E5M2;
}

// `for_each_element!`'s feature gates: each expands to its input where cai-runtime has the
// feature and to nothing otherwise (a `#[cfg]` in `for_each_element!`'s expansion would test the
// calling crate's features instead). Written out, not generated: a macro-expanded
// `#[macro_export]` macro cannot be named by path (`$crate::...`) in its own crate.

#[cfg(feature = "half")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_feature_half {
    ($($tokens:tt)*) => { $($tokens)* };
}
#[cfg(not(feature = "half"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_feature_half {
    ($($tokens:tt)*) => {};
}

#[cfg(feature = "complex")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_feature_complex {
    ($($tokens:tt)*) => { $($tokens)* };
}
#[cfg(not(feature = "complex"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_feature_complex {
    ($($tokens:tt)*) => {};
}

#[cfg(feature = "float8")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_feature_float8 {
    ($($tokens:tt)*) => { $($tokens)* };
}
#[cfg(not(feature = "float8"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_feature_float8 {
    ($($tokens:tt)*) => {};
}

#[cfg(feature = "bf16")]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_feature_bf16 {
    ($($tokens:tt)*) => { $($tokens)* };
}
#[cfg(not(feature = "bf16"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __if_feature_bf16 {
    ($($tokens:tt)*) => {};
}

macro_rules! impl_element {
    (Void, $ty:ty, $ext:ident) => {
        // SAFETY: the type is the extended type's bits (its crate's documented layout), of its
        // size (checked below).
        unsafe impl Element for $ty {
            const DTYPE: DType = DType::Scalar(TypeStr::extended(Extended::$ext));
        }
        const _: () = assert!(std::mem::size_of::<$ty>() == Extended::$ext.itemsize());
    };
    ($kind:ident, $ty:ty) => {
        // SAFETY: a primitive of this size and kind; NumPy's dtype of the same kind and size
        // has the same bit layout in the host's byte order.
        unsafe impl Element for $ty {
            const DTYPE: DType = DType::Scalar(
                TypeStr::new(ByteOrder::HOST, Kind::$kind, std::mem::size_of::<$ty>()).canonical(),
            );
        }
    };
}

for_each_element!(impl_element);

#[cfg(test)]
mod tests {
    use super::*;

    fn ts<T: Element>() -> String {
        T::DTYPE.typestr().to_string()
    }

    #[test]
    fn scalars_match_numpy_dtype_str() {
        assert_eq!(ts::<bool>(), "|b1");
        assert_eq!(ts::<i8>(), "|i1");
        assert_eq!(ts::<u8>(), "|u1");
        #[cfg(target_endian = "little")]
        {
            assert_eq!(ts::<i16>(), "<i2");
            assert_eq!(ts::<u64>(), "<u8");
            assert_eq!(ts::<f32>(), "<f4");
            assert_eq!(ts::<f64>(), "<f8");
        }
        assert_eq!(<f32 as Element>::DTYPE.descr().to_string(), "[('', '<f4')]");
    }

    #[cfg(feature = "bf16")]
    #[test]
    fn bf16_is_two_opaque_bytes_like_pytorch() {
        assert_eq!(ts::<half::bf16>(), "<V2");
        assert_eq!(<half::bf16 as Element>::DTYPE.itemsize(), 2);
        // ... and itself: not any two opaque bytes.
        let t = <half::bf16 as Element>::DTYPE.typestr();
        assert_eq!(t.extended_type(), Some(Extended::Bfloat16));
        assert!(!t.same_type(&TypeStr::void(2)));
        assert!(!t.same_type(&"<V2".parse().unwrap()));
    }

    #[cfg(feature = "float8")]
    #[test]
    fn the_float8_formats_are_one_byte_each_and_not_each_other() {
        let a = <float8::F8E4M3 as Element>::DTYPE.typestr();
        let b = <float8::F8E5M2 as Element>::DTYPE.typestr();
        assert_eq!((a.to_string(), b.to_string()), ("|V1".into(), "|V1".into()));
        assert!(!a.same_type(&b) && !a.same_type(&TypeStr::void(1)));
        assert_eq!(a.extended_type(), Some(Extended::Float8E4M3Fn));
        assert_eq!(b.extended_type(), Some(Extended::Float8E5M2));
    }

    #[test]
    fn the_extended_table_reads_both_ways() {
        for e in [
            Extended::Bfloat16,
            Extended::Float8E4M3Fn,
            Extended::Float8E5M2,
        ] {
            assert_eq!(Extended::from_name(e.name()), Some(e));
            let bits = u8::try_from(e.itemsize() * 8).unwrap();
            assert_eq!(Extended::from_dlpack_code(e.dlpack_code()), Some(e));
            assert_eq!(e.itemsize() * 8, usize::from(bits));
        }
        assert_eq!(Extended::from_dlpack_code(2), None);
        assert_eq!(Extended::from_name("float8_e4m3"), None);
    }

    #[test]
    fn struct_descr_has_gaps_and_trailing_padding() {
        static F: [FieldDType; 2] = [
            FieldDType {
                name: "a",
                offset: 0,
                dtype: &<u8 as Element>::DTYPE,
                shape: &[],
            },
            FieldDType {
                name: "b",
                offset: 8,
                dtype: &<i16 as Element>::DTYPE,
                shape: &[2, 3],
            },
        ];
        let d = DType::Struct(StructDType {
            size: 24,
            fields: &F,
        });
        assert_eq!(d.typestr().to_string(), "|V24");
        #[cfg(target_endian = "little")]
        assert_eq!(
            d.descr().to_string(),
            "[('a', '|u1'), ('', '|V7'), ('b', '<i2', (2, 3)), ('', '|V4')]"
        );
        assert_eq!(d.descr().itemsize(), Some(24));
    }

    fn field(name: &'static str, offset: usize, dtype: &'static DType) -> FieldDType {
        FieldDType {
            name,
            offset,
            dtype,
            shape: &[],
        }
    }

    /// The descr of a struct of `size` bytes with these fields.
    fn descr_of(size: usize, fields: Vec<FieldDType>) -> Descr {
        // `StructDType` wants `'static` fields (a derive's are in a static): lend it the slice
        // as `'static` for this call only, then free it, so that tests leak nothing (Miri
        // checks).
        let raw = Box::into_raw(fields.into_boxed_slice());
        // SAFETY: `raw` is a live, unaliased allocation until it is freed below.
        let fields: &'static [FieldDType] = unsafe { &*raw };
        let descr = DType::Struct(StructDType { size, fields }).descr();
        // SAFETY: `raw` came from `Box::into_raw`, and no borrow of it outlives this line: the
        // descr owns its names and formats, and `fields` is not used again.
        drop(unsafe { Box::from_raw(raw) });
        descr
    }

    #[test]
    fn padding_numpy_would_misname_is_named() {
        // `struct T(u16, f64, u8)`: NumPy would read the first gap as a second 'f1'.
        let d = descr_of(
            24,
            vec![
                field("f0", 0, &<u16 as Element>::DTYPE),
                field("f1", 8, &<f64 as Element>::DTYPE),
                field("f2", 16, &<u8 as Element>::DTYPE),
            ],
        );
        #[cfg(target_endian = "little")]
        assert_eq!(
            d.to_string(),
            "[('f0', '<u2'), ('_pad1', '|V6'), ('f1', '<f8'), ('f2', '|u1'), ('', '|V7')]"
        );
        assert_eq!(d.name_error(), None);
        // A field already named `_pad1` pushes the padding's name on.
        let d = descr_of(
            5,
            vec![
                field("f1", 0, &<u8 as Element>::DTYPE),
                field("_pad1", 4, &<u8 as Element>::DTYPE),
            ],
        );
        assert_eq!(
            d.to_string(),
            "[('f1', '|u1'), ('_pad1_', '|V3'), ('_pad1', '|u1')]"
        );
        assert_eq!(d.name_error(), None);
    }

    use proptest::strategy::Strategy as _;

    proptest::proptest! {
        /// Whatever the field names and gaps, NumPy can read the descr back, and only padding
        /// is renamed.
        #[test]
        fn every_struct_descr_has_names_numpy_reads(
            names in proptest::sample::subsequence(
                vec!["f0", "f1", "f2", "f3", "f4", "f5", "_pad1", "_pad1_", "_pad2", "a"], 1..6,
            ).prop_shuffle(),
            gaps in proptest::collection::vec(0usize..3, 6),
        ) {
            let mut at = 0;
            let fields: Vec<FieldDType> = names
                .iter()
                .zip(&gaps)
                .map(|(&name, gap)| {
                    at += gap + 1;
                    field(name, at - 1, &<u8 as Element>::DTYPE)
                })
                .collect();
            let size = at + gaps[5];
            let d = descr_of(size, fields);
            proptest::prop_assert_eq!(d.name_error(), None, "{}", d);
            proptest::prop_assert_eq!(d.itemsize(), Some(size));
            let kept: Vec<&str> = d.0.iter()
                .filter(|f| matches!(f.format, DescrFormat::Type(t) if t.kind() != Kind::Void))
                .map(|f| f.name.as_str())
                .collect();
            proptest::prop_assert_eq!(kept, names);
        }
    }
}
