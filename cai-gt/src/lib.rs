//! # cai-gt
//!
//! GT4Py's GDP-3 storages for cai: N-dimensional storages on the host, on a CUDA device, or on
//! both with a mirror kept in step, allocated with GDP-3's alignment, layout, halo and dims
//! parameters (and its `"C"`, `"F"`, `"gtx86"`, `"gtcuda"` presets); and the
//! `__gt_data_interface__` protocol, exported with `#[derive(GtDataInterface)]` and read with
//! [`python::GtData`]. Built on `cai-runtime`, whose descriptors every storage exports as
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
//! Where things live (every module is private; its items are re-exported here):
//! - `params`: [`StorageParams`] and the presets, resolved per dimension; `dims`: semantic
//!   [`Dim`]s; `alloc`: the aligned [`AllocationPlan`].
//! - `host_buffer`: [`HostBuffer`], aligned host memory (allocated here, or wrapped).
//! - `storage`: [`Storage`], its [`Buffers`] and element type; `geometry`: indexing and views.
//! - `wrap`: storages over memory allocated elsewhere ([`wrap_foreign`]).
//! - `mirror`: [`SyncState`], which side of a host/device pair is newest.
//! - `interface`: the `__gt_data_interface__` model ([`GtDataDescriptor`], [`GtDataInterface`]).
//! - `cuda.rs` (feature `cuda`): device storages and the mirror copies, through cai-runtime's
//!   driver layer, behind [`Storage::allocate`], [`Storage::copy`], [`Storage::synchronize`]... [`python`] (feature `python`): the protocol's Python side.
//! - `error`: [`StorageError`].

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
