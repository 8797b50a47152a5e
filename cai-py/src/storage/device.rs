//! What the `cuda` feature adds to storages: allocating device buffers, the mirror copies,
//! copying a device storage. Without the feature, device requests fail and mirror
//! operations do nothing (no storage has a device side).

use cai_gt::{ElementType, Init, Storage, StorageError};
use pyo3::prelude::*;

#[cfg(feature = "cuda")]
pub(super) fn allocate_gpu(
    shape: &[usize],
    element: ElementType,
    params: &cai_gt::ResolvedParams,
    init: Init,
) -> Result<Storage, StorageError> {
    cai_gt::cuda::allocate(shape, element, params, init)
}

#[cfg(not(feature = "cuda"))]
pub(super) fn allocate_gpu(
    _: &[usize],
    _: ElementType,
    _: &cai_gt::ResolvedParams,
    _: Init,
) -> Result<Storage, StorageError> {
    wrap_device().map(|()| unreachable!("no device without CUDA"))
}

/// Whether a storage may have a device side: not without CUDA, which could neither keep it
/// in step with the host side nor copy it (creating and wrapping device memory are refused
/// alike, with RuntimeError).
pub(super) fn wrap_device() -> Result<(), StorageError> {
    if cfg!(feature = "cuda") {
        return Ok(());
    }
    Err(StorageError::NoCuda(
        "this build of cai has no CUDA support; install the CUDA build (README, \"CUDA\")",
    ))
}

/// The mirror operations; without CUDA no storage has a device side, so they do nothing.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
pub(super) enum MirrorOp {
    HostToDevice(bool),
    DeviceToHost(bool),
    Synchronize,
}

#[cfg(feature = "cuda")]
pub(super) fn mirror(s: &Storage, op: MirrorOp) -> PyResult<bool> {
    use cai_gt::cuda as cs;
    match op {
        MirrorOp::HostToDevice(force) => cs::host_to_device(s, force),
        MirrorOp::DeviceToHost(force) => cs::device_to_host(s, force),
        MirrorOp::Synchronize => cs::synchronize(s),
    }
    .map_err(PyErr::from)
}

#[cfg(not(feature = "cuda"))]
pub(super) fn mirror(_: &Storage, _: MirrorOp) -> PyResult<bool> {
    Ok(false)
}

#[cfg(feature = "cuda")]
pub(super) fn copy_storage(s: &Storage) -> Result<Storage, StorageError> {
    if s.has_device() {
        cai_gt::cuda::copy(s)
    } else {
        s.copy_host()
    }
}

#[cfg(not(feature = "cuda"))]
pub(super) fn copy_storage(s: &Storage) -> Result<Storage, StorageError> {
    s.copy_host()
}
