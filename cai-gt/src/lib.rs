//! # cai-gt
//!
//! GT4Py's GDP-3 storages for cai: N-dimensional storages on the host, on a CUDA device, or on
//! both with a mirror kept in step, allocated with GDP-3's alignment, layout, halo and dims
//! parameters (and its `"C"`, `"F"`, `"gtx86"`, `"gtcuda"` presets); and the
//! `__gt_data_interface__` protocol, exported with `#[derive(GtDataInterface)]` and read with
//! `python::GtData` (feature `python`). Built on `cai-runtime`, whose descriptors every storage exports as
//! `__cuda_array_interface__` / `__array_interface__`.
//!
//! ```
//! use cai_gt::{ElementType, Init, Preset, Storage, StorageParams};
//! use cai_runtime::TypeStr;
//!
//! let shape = [4, 6];
//! // GDP-3's `zeros(shape, dtype="<f8", defaults="gtx86", halo=...)`.
//! let params = StorageParams {
//!     defaults: Some(Preset::parse("gtx86")?),
//!     halo: Some([(1, 1), (2, 2)].into_iter().collect()),
//!     ..Default::default()
//! }
//! .resolve(&shape, 8, &StorageParams::default())?;
//! let f8 = ElementType::new(TypeStr::parse("<f8").unwrap(), None)?;
//! let s = Storage::allocate(&shape, f8, &params, Init::Zeros)?;
//! assert_eq!(s.shape(), [4, 6]);
//! assert_eq!(s.halo(), [(1, 1), (2, 2)]);
//! let exported = s.host_descriptor().unwrap().unwrap(); // its `__array_interface__`
//! assert_eq!(exported.typestr.to_string(), "<f8");
//! # Ok::<(), cai_gt::StorageError>(())
//! ```
//!
//! ## Storages
//!
//! - [`Storage`]: allocated ([`Storage::allocate`], with [`Init`]) on the host, a device or both
//!   ([`StorageDevice`], [`Buffers`]), or over memory allocated elsewhere ([`wrap_foreign`],
//!   [`ForeignBuffer`]); its descriptors ([`Storage::host_descriptor`]), views and indexing
//!   ([`Geometry`], [`IndexItem`]), copies and the mirror's state ([`Storage::synchronize`],
//!   [`SyncState`], [`Mirror`]).
//! - Parameters: [`StorageParams`] and the [`Preset`]s, resolved per dimension
//!   ([`ResolvedParams`]); semantic dimensions ([`Dim`], [`parse_dims`]); the aligned
//!   [`AllocationPlan`]; the element type ([`ElementType`]); aligned host memory
//!   ([`HostBuffer`]).
//!
//! ## `__gt_data_interface__`
//!
//! [`GtDataInterface`] (derivable: `#[derive(GtDataInterface)]`, feature `derive`) and its
//! descriptor [`GtDataDescriptor`] ([`GtDevice`], [`HaloEntry`], hooks: [`GtHooks`]); the
//! fields' traits [`AsDims`] and [`AsHalo`]. The `python` module (feature `python`) holds the
//! Python property and `GtData`, which reads any object as GDP-3 says.
//!
//! ## Errors
//!
//! [`StorageError`], [`GtError`], [`HookError`], [`IndexError`].
//!
//! ## Feature flags
//!
//! | feature | adds |
//! |---|---|
//! | `derive` (default) | `#[derive(GtDataInterface)]`, re-exported from `cai-derive` |
//! | `python` | the `python` module (PyO3 0.30): `__gt_data_interface__` for classes, `GtData` |
//!
//! Device storages use `cai-runtime`'s driver layer (loaded at run time: no CUDA toolkit to
//! build); where there is no driver or device, allocating one is an error that says so.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod alloc;
mod cuda;
mod dims;
mod error;
mod geometry;
mod host_buffer;
mod interface;
mod mirror;
mod params;
#[cfg(feature = "python")]
pub mod python;
mod storage;
mod wrap;

pub use alloc::{AllocationPlan, check_alignment};
pub use dims::{Dim, PerDim, parse_dims};
pub use error::StorageError;
pub use geometry::{Geometry, IndexError, IndexItem};
pub use host_buffer::HostBuffer;
pub use interface::{
    AsDims, AsHalo, GtDataDescriptor, GtDataInterface, GtDevice, GtError, GtHooks, HaloEntry,
    HookError,
};
pub use mirror::{Mirror, SyncState, SyncStatus};
pub use params::{
    GpuDevice, Managed, Preset, ResolvedParams, StorageDevice, StorageParams, check_halo,
};
pub use storage::{
    Buffers, DeviceBufferHandle, ElementType, Init, Selected, Side, Storage, stride_order,
};
pub use wrap::{ForeignBuffer, check_mirror_pair, wrap_foreign};

/// `#[derive(GtDataInterface)]`, re-exported so that users depend on this crate alone.
#[cfg(feature = "derive")]
pub use cai_derive::GtDataInterface;

/// Support for the derive's generated code and for the `cai` package; not a public API.
#[doc(hidden)]
pub mod __private {
    pub use cai_runtime;
}
