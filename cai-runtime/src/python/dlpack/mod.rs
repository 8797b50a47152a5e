//! DLPack, beside the array interfaces: `__dlpack__` / `__dlpack_device__` for every exporter
//! (`export.rs`: the capsule of an export, which `protocol.rs`'s methods call), and
//! imports of any DLPack producer into the same [`ForeignArray`](super::ForeignArray) views
//! (`import.rs`: [`ForeignArray::from_dlpack`](super::ForeignArray::from_dlpack); an exact
//! NumPy array's tensor read from its fields, `numpy_array.rs`).
//!
//! The C structures are dlpark's bindings of `dlpack.h` (version 1.3, its `ffi` module only):
//! its Python layer raises its own errors, refuses `copy=True`, and holds imports in its own
//! type, where cai's errors name the field and value, a copy is made when asked for, and an
//! import is a [`ForeignArray`](super::ForeignArray) like any other.
//!
//! Type codes come from type strings, so no list of element types is kept here: integers,
//! unsigned integers, floats, complex and `|b1` map to their codes by kind; the element table's
//! [`Extended`](crate::Extended) types (bfloat16, the float8 formats) to their own codes, both
//! ways; and a bare `<V2`, the type string PyTorch's bfloat16 has in a dict, to `kDLBfloat`
//! (other `|V<n>` items stay refused: DLPack has no structured types).

mod exchange;
mod export;
mod import;
mod method;
mod numpy_array;

use std::ffi::CStr;
use std::fmt;

use dlpark::ffi::{DLDataType, DLDataTypeCode, DLDeviceType};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};

use crate::shown::Shown;
use crate::structured::Descr;
use crate::typestr::{ByteOrder, Kind, TypeStr};

pub use exchange::{AnyForeignArray, DlpackView, ExchangeViewFn};
#[doc(hidden)]
pub use exchange::{ExchangeClass, exchange_api, set_exchange_view, wrong_type};
pub(crate) use export::descriptor_dlpack_device;
pub use export::{DlpackRequest, live_exports};
pub(crate) use export::{ManagedExport, Template, dlpack_managed};
pub use import::dlpack_device_of;
#[cfg(feature = "testing")]
pub(crate) use import::numpy_array_import;
pub(crate) use import::{ImportedTensor, Producer};
#[cfg(feature = "ndarray")]
pub(crate) use import::{describe_lent, lent, unlent};
#[doc(hidden)]
pub use method::dlpack_method;
pub(crate) use numpy_array::is_ndarray;

/// The DLPack version cai implements: written into its versioned capsules and offered to
/// producers as `max_version`.
pub const DLPACK_VERSION: (u32, u32) = (
    dlpark::ffi::DLPACK_MAJOR_VERSION,
    dlpark::ffi::DLPACK_MINOR_VERSION,
);

const DLTENSOR: &CStr = c"dltensor";
const USED_DLTENSOR: &CStr = c"used_dltensor";
const DLTENSOR_VERSIONED: &CStr = c"dltensor_versioned";
const USED_DLTENSOR_VERSIONED: &CStr = c"used_dltensor_versioned";

/// Where a DLPack tensor's memory is (`__dlpack_device__`'s answer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DlpackDevice {
    /// `kDLCPU`: host memory.
    Cpu,
    /// `kDLCUDA`: memory of the device with this ordinal.
    Cuda(u32),
    /// `kDLCUDAHost`: page-locked host memory registered with CUDA.
    CudaHost,
    /// `kDLCUDAManaged`: managed memory, attached to the device with this ordinal.
    CudaManaged(u32),
}

impl DlpackDevice {
    /// DLPack's `(device_type, device_id)`.
    pub fn to_pair(self) -> (i32, i32) {
        let (kind, id) = match self {
            DlpackDevice::Cpu => (DLDeviceType::CPU, 0),
            DlpackDevice::Cuda(n) => (DLDeviceType::CUDA, n),
            DlpackDevice::CudaHost => (DLDeviceType::CUDAHOST, 0),
            DlpackDevice::CudaManaged(n) => (DLDeviceType::CUDAMANAGED, n),
        };
        (kind.0 as i32, id as i32)
    }

    /// The device DLPack's `(device_type, device_id)` names, among those cai reads; `None` for
    /// others (OpenCL, ROCm...), negative ids, and host memory with an id other than 0.
    pub fn from_pair(kind: i64, id: i64) -> Option<DlpackDevice> {
        let id = u32::try_from(id).ok();
        match u32::try_from(kind).ok().map(DLDeviceType)? {
            DLDeviceType::CPU if id == Some(0) => Some(DlpackDevice::Cpu),
            DLDeviceType::CUDA => Some(DlpackDevice::Cuda(id?)),
            DLDeviceType::CUDAHOST if id == Some(0) => Some(DlpackDevice::CudaHost),
            DLDeviceType::CUDAMANAGED => Some(DlpackDevice::CudaManaged(id?)),
            _ => None,
        }
    }

    /// Whether the memory is a CUDA device's concern (device or managed memory, or host memory
    /// registered with CUDA): exported and imported as `__cuda_array_interface__` is.
    pub fn is_cuda(self) -> bool {
        self != DlpackDevice::Cpu
    }
}

impl fmt::Display for DlpackDevice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (kind, id) = self.to_pair();
        let name = match self {
            DlpackDevice::Cpu => "kDLCPU",
            DlpackDevice::Cuda(_) => "kDLCUDA",
            DlpackDevice::CudaHost => "kDLCUDAHost",
            DlpackDevice::CudaManaged(_) => "kDLCUDAManaged",
        };
        write!(f, "({kind}, {id}) ({name})")
    }
}

/// Why a DLPack export or import was refused. In Python a `BufferError` where a request
/// cannot be met (as the Array API standard says), a `ValueError` for a malformed tensor or
/// argument value, a `TypeError` for an argument of the wrong type.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DlpackError {
    /// The array's items have no DLPack type.
    #[error("DLPack has no type for typestr '{typestr}'{why}")]
    NoDlpackType {
        /// The type string.
        typestr: String,
        /// Why (structured items, byte order...).
        why: &'static str,
    },
    /// A mask cannot travel through DLPack.
    #[error(
        "the array has a mask, which DLPack cannot carry: export it through __cuda_array_interface__ / __array_interface__"
    )]
    Mask,
    /// Byte strides that are not whole items.
    #[error(
        "strides {} (bytes) are not multiples of the item size {itemsize}: DLPack counts strides in items", Shown(.strides)
    )]
    ByteStrides {
        /// The byte strides.
        strides: Vec<isize>,
        /// The item size.
        itemsize: usize,
    },
    /// A request `__dlpack__` cannot meet (`dl_device`, `copy`, `stream`).
    #[error("{0}")]
    Unmet(String),
    /// An argument of the right type but a wrong value.
    #[error("`{key}` = {value}: {expected}")]
    Argument {
        /// The keyword.
        key: &'static str,
        /// Its value, as `repr()` shows it.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// An argument of the wrong type.
    #[error("`{key}` must be {expected}, not {value}")]
    ArgumentType {
        /// The keyword.
        key: &'static str,
        /// Its value, as `repr()` shows it.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// What `__dlpack__` returned is not a DLPack capsule, or one already consumed.
    #[error("{0}")]
    Capsule(String),
    /// A field of the tensor with a value the standard does not allow.
    #[error("DLPack tensor field `{field}` = {value}: {why}")]
    Field {
        /// The field (`dl_tensor.shape[1]`, `version.major`...).
        field: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// A tensor on a device this import does not read.
    #[error("{0}")]
    Device(String),
}

crate::impl_pyerr! {
    /// `BufferError` for requests and tensors cai cannot serve, `ValueError` for malformed values,
    /// `TypeError` for arguments of the wrong type.
    DlpackError {
        DlpackError::ArgumentType { .. } => PyTypeError,
        DlpackError::Argument { .. } | DlpackError::Field { .. } | DlpackError::Capsule(_) => PyValueError,
        _ => PyBufferError,
    }
}

/// DLPack's type for items of type string `t` (with `descr`, where the array has one).
fn dl_dtype(t: &TypeStr, descr: Option<&Descr>) -> Result<DLDataType, DlpackError> {
    let refuse = |why| DlpackError::NoDlpackType {
        typestr: t.to_string(),
        why,
    };
    if descr.is_some_and(|d| !d.is_simple()) {
        return Err(refuse(
            ": its items are structured (a descr with fields), and DLPack has no structured types",
        ));
    }
    let bits = u8::try_from(t.itemsize() * 8).map_err(|_| refuse(": too wide"))?;
    if let Some(e) = t.stands_for() {
        return Ok(DLDataType {
            code: DLDataTypeCode(e.dlpack_code()),
            bits,
            lanes: 1,
        });
    }
    let native = matches!(t.byte_order(), ByteOrder::NotApplicable) || t.itemsize() == 1 || {
        t.byte_order() == ByteOrder::HOST || t.byte_order() == ByteOrder::Native
    };
    let code = match t.kind() {
        Kind::Bool if bits == 8 => DLDataTypeCode::BOOL,
        Kind::Int if matches!(bits, 8 | 16 | 32 | 64) => DLDataTypeCode::INT,
        Kind::UInt if matches!(bits, 8 | 16 | 32 | 64) => DLDataTypeCode::UINT,
        Kind::Float if matches!(bits, 16 | 32 | 64) => DLDataTypeCode::FLOAT,
        Kind::Complex if matches!(bits, 64 | 128) => DLDataTypeCode::COMPLEX,
        Kind::Void => {
            return Err(refuse(
                ": opaque or structured items (DLPack has no structured types; bfloat16 is '<V2')",
            ));
        }
        _ => {
            return Err(refuse(
                ": DLPack has bool, int, uint, float, complex and bfloat16",
            ));
        }
    };
    if !native {
        return Err(refuse(
            ": DLPack data is in the host's byte order, and this typestr is not",
        ));
    }
    Ok(DLDataType {
        code,
        bits,
        lanes: 1,
    })
}

/// The type string of DLPack type `t`, the way cai's exports write it (native byte order; an
/// [`Extended`](crate::Extended) type's own), or the field that has no type string.
#[inline]
pub(crate) fn typestr_of(t: DLDataType) -> Result<TypeStr, DlpackError> {
    let field = |field: &str, value: String, why: &str| DlpackError::Field {
        field: format!("dl_tensor.dtype.{field}"),
        value,
        why: why.to_owned(),
    };
    if t.lanes != 1 {
        return Err(field(
            "lanes",
            t.lanes.to_string(),
            "vector types (lanes != 1) have no array-interface type",
        ));
    }
    let bytes = usize::from(t.bits) / 8;
    if let Some(e) = crate::Extended::from_dlpack_code(t.code.0) {
        if usize::from(t.bits) != e.itemsize() * 8 {
            return Err(field(
                "bits",
                t.bits.to_string(),
                &format!(
                    "type code {} ({}) has {} bits",
                    t.code.0,
                    e.name(),
                    e.itemsize() * 8
                ),
            ));
        }
        return Ok(TypeStr::extended(e));
    }
    let kind = match (t.code, t.bits) {
        (DLDataTypeCode::INT, 8 | 16 | 32 | 64) => Kind::Int,
        (DLDataTypeCode::UINT, 8 | 16 | 32 | 64) => Kind::UInt,
        (DLDataTypeCode::FLOAT, 16 | 32 | 64) => Kind::Float,
        (DLDataTypeCode::COMPLEX, 64 | 128) => Kind::Complex,
        (DLDataTypeCode::BOOL, 8) => Kind::Bool,
        (
            DLDataTypeCode::INT
            | DLDataTypeCode::UINT
            | DLDataTypeCode::FLOAT
            | DLDataTypeCode::COMPLEX
            | DLDataTypeCode::BOOL,
            bits,
        ) => {
            return Err(field(
                "bits",
                bits.to_string(),
                &format!("type code {} has no such width here", t.code.0),
            ));
        }
        (code, _) => {
            let name = match code.0 {
                3 => "opaque handle",
                7..=14 => "float8",
                15 | 16 => "float6",
                17 => "float4",
                _ => "unknown",
            };
            let (names, codes): (Vec<_>, Vec<_>) = [
                ("int", 0),
                ("uint", 1),
                ("float", 2),
                ("complex", 5),
                ("bool", 6),
            ]
            .into_iter()
            .chain(
                crate::Extended::TABLE
                    .iter()
                    .map(|&(_, name, _, code)| (name, code)),
            )
            .map(|(name, code)| (name, code.to_string()))
            .unzip();
            return Err(field(
                "code",
                code.0.to_string(),
                &format!(
                    "{name} type: cai reads {} (codes {})",
                    names.join(", "),
                    codes.join(", ")
                ),
            ));
        }
    };
    Ok(TypeStr::new(ByteOrder::HOST, kind, bytes).canonical())
}

/// The `n` int64 values a tensor's `shape` or `strides` points to, read one by one: a producer's
/// pointer need not be aligned (a slice of it would have to be, or be undefined behaviour).
///
/// # Safety
/// `p` points to `n` readable int64 values, aligned or not, that stay alive and unchanged while
/// the iterator is used.
pub(crate) unsafe fn int64s(p: *const i64, n: usize) -> impl Iterator<Item = i64> {
    // SAFETY: this function's contract: `p + i` for `i < n` is readable.
    (0..n).map(move |i| unsafe { p.add(i).read_unaligned() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> TypeStr {
        TypeStr::parse(s).unwrap()
    }

    #[test]
    fn type_strings_and_codes_round_trip() {
        for s in [
            "|b1", "|i1", "<i2", "<i4", "<i8", "|u1", "<u2", "<u4", "<u8", "<f2", "<f4", "<f8",
            "<c8", "<c16",
        ] {
            let t = ts(s);
            let dl = dl_dtype(&t, None).unwrap();
            assert_eq!(typestr_of(dl).unwrap(), t, "{s}");
        }
        // The extended types keep their identity both ways; a bare `<V2` (PyTorch's bfloat16
        // in a dict) is exported as bfloat16 and comes back as it.
        use crate::Extended;
        for e in [
            Extended::Bfloat16,
            Extended::Float8E4M3Fn,
            Extended::Float8E5M2,
        ] {
            let t = TypeStr::extended(e);
            let dl = dl_dtype(&t, None).unwrap();
            assert_eq!(
                (dl.code.0, usize::from(dl.bits)),
                (e.dlpack_code(), e.itemsize() * 8)
            );
            assert_eq!(typestr_of(dl).unwrap(), t, "{e:?}");
        }
        let bf16 = dl_dtype(&ts("<V2"), None).unwrap();
        assert_eq!((bf16.code, bf16.bits), (DLDataTypeCode::BFLOAT, 16));
        assert_eq!(
            typestr_of(bf16).unwrap(),
            TypeStr::extended(Extended::Bfloat16)
        );
    }

    #[test]
    fn what_dlpack_cannot_say_is_refused_naming_the_type() {
        for s in ["|V2", "|V8", ">f4", "<M8[s]", "|S3", "<U2", "|O", "<f16"] {
            let e = dl_dtype(&ts(s), None).unwrap_err();
            assert!(e.to_string().contains(s), "{e}");
        }
        let d = Descr::simple(ts("<f8"));
        assert!(dl_dtype(&ts("<f8"), Some(&d)).is_ok());
        let code = |code, bits, lanes| DLDataType {
            code: DLDataTypeCode(code),
            bits,
            lanes,
        };
        for (t, field) in [
            (code(2, 32, 4), "lanes"),
            (code(8, 8, 1), "code"),
            (code(10, 16, 1), "bits"),
            (code(99, 8, 1), "code"),
            (code(2, 8, 1), "bits"),
            (code(4, 32, 1), "bits"),
        ] {
            let e = typestr_of(t).unwrap_err().to_string();
            assert!(e.contains(&format!("dl_tensor.dtype.{field}")), "{e}");
        }
    }
}
