//! Device storages (GDP-3 `device="gpu"`): the allocation for each `managed` mode, and the
//! host/device mirror copies of `managed="gt4py"`.
//!
//! - `managed=None`: device memory only (`cuMemAlloc`).
//! - `managed="gt4py"`: device memory plus a host mirror of the same size; item `[0, ..., 0]`
//!   sits at the same offset in both (aligned on the device), so a mirror copy moves the whole
//!   buffer (of a wrapped pair, exactly its items). A shared [`SyncState`] says which side is
//!   newest.
//! - `managed="cuda"`: unified memory (`cuMemAllocManaged`), one address for host and device.
//!
//! A storage is on one device (`device="gpu:N"`, or the current one when allocated): its
//! allocation, copies, fills and synchronization run in that device's primary context
//! ([`with_device`]), whatever context the calling thread has current.

use std::ptr::NonNull;

use cai_runtime::cuda::{self as driver_api, DeviceAllocation, with_device};
use cai_runtime::{DriverError, Stream};

use crate::params::ResolvedParams;
use crate::{
    Buffers, DeviceBufferHandle, ElementType, HostBuffer, Init, Managed, Mirror, Side, Storage,
    StorageDevice, StorageError, SyncState, SyncStatus,
};

/// The current device (device 0's primary context made current if none is).
pub(crate) fn current_device() -> Result<u32, StorageError> {
    // No usable driver or device at all: say so, whatever the code.
    driver_api::current_device().map_err(StorageError::NoGpu)
}

/// The device a new storage goes on: the one asked for (which must exist), or the current
/// one.
fn device_of(params: &ResolvedParams) -> Result<u32, StorageError> {
    let Some(device) = params.device_id else {
        return current_device();
    };
    let count = driver_api::device_count().map_err(StorageError::NoGpu)?;
    if device >= count {
        return Err(StorageError::NoSuchDevice { device, count });
    }
    Ok(device)
}

fn alloc(device: u32, len: usize, managed: bool) -> Result<DeviceAllocation, StorageError> {
    DeviceAllocation::on_device(device, len, managed).map_err(|e| {
        if e.code == DriverError::CUDA_ERROR_OUT_OF_MEMORY {
            StorageError::Alloc(len)
        } else {
            e.into()
        }
    })
}

fn memset_zero(device: u32, ptr: u64, len: usize) -> Result<(), StorageError> {
    with_device(device, || {
        // SAFETY: `ptr .. ptr + len` is an allocation made above on `device` (current here)
        // and not yet shared; the context is synchronized right after.
        unsafe { driver_api::memset_async(ptr, 0, len, Stream::LegacyDefault) }?;
        driver_api::synchronize_context()
    })
    .map_err(StorageError::from)
}

/// A new device storage (`params.device` must be `Gpu`) in the `params.managed` mode.
pub(crate) fn allocate(
    shape: &[usize],
    element: ElementType,
    params: &ResolvedParams,
    init: Init,
) -> Result<Storage, StorageError> {
    let plan = Storage::plan(shape, &element, params)?;
    let len = plan.buffer_bytes();
    let managed = params.managed;
    let unified = managed == Managed::Cuda;
    let device_id = device_of(params)?;
    let a = alloc(device_id, len, unified)?;
    let ptr = a.device_ptr();
    let origin = plan.byte_offset(ptr as usize);
    if init != Init::Uninit {
        memset_zero(device_id, ptr, len)?;
    }
    let (host, device, sync) = match managed {
        Managed::Cuda => {
            let host_ptr = NonNull::new(ptr as usize as *mut u8)
                .ok_or_else(|| StorageError::Transfer("cuMemAllocManaged gave 0".into()))?;
            // SAFETY: unified memory is addressable from the host at the same address, valid
            // for `len` bytes until `a` (moved into the buffer) frees it.
            let host = unsafe { HostBuffer::foreign(host_ptr, len, Box::new(a)) };
            let device = DeviceBufferHandle {
                ptr,
                len,
                device_id,
                keep: Box::new(()),
            };
            (Some(host), device, None)
        }
        Managed::Gt4Py => {
            // Congruent with the device buffer modulo the alignment: both sides put item
            // `[0, ..., 0]` at `origin`, so the host's aligned item is aligned too.
            let (alignment, at) = (plan.alignment(), ptr as usize);
            let zeroed = init != Init::Uninit;
            let host = HostBuffer::congruent(len, zeroed, alignment, at)?;
            let device = DeviceBufferHandle {
                ptr,
                len,
                device_id,
                keep: Box::new(a),
            };
            (Some(host), device, Some(SyncState::new(SyncStatus::Clean)))
        }
        Managed::None => {
            let device = DeviceBufferHandle {
                ptr,
                len,
                device_id,
                keep: Box::new(a),
            };
            (None, device, None)
        }
    };
    let has_host = host.is_some();
    let storage = Storage::from_plan(
        plan,
        element,
        params,
        Buffers {
            sync,
            managed,
            ..Buffers::new(host, Some(device), len, origin)
        },
    );
    if let Init::Fill(item) = init {
        if has_host {
            storage.fill_host(&item)?;
            if managed == Managed::Gt4Py {
                Copier(storage.buffers()).copy_host_to_device()?;
            }
        } else {
            // Device only: fill a host staging buffer laid out the same way, then copy it.
            let staging = staged(&storage)?;
            staging.fill_host(&item)?;
            upload(&staging, &storage)?;
        }
    }
    Ok(storage)
}

/// A host storage with the same layout and origin as `s`'s device side (for staging).
fn staged(s: &Storage) -> Result<Storage, StorageError> {
    let b = s.buffers();
    let dev = b
        .device
        .as_ref()
        .ok_or(StorageError::NoSuchBuffer("device"))?;
    // Zeroed, not uninitialized: an upload reads the whole span, padding included, as bytes.
    let host = HostBuffer::zeroed(b.span)?;
    let params = s.like_params(StorageDevice::Host);
    let plan = Storage::plan(s.shape(), s.element(), &params)?;
    Ok(Storage::from_plan(
        plan,
        s.element().clone(),
        &params,
        Buffers::new(Some(host), None, b.span, dev.origin),
    ))
}

/// Copies the whole host buffer of `src` to the device buffer of `dst` (same span).
fn upload(src: &Storage, dst: &Storage) -> Result<(), StorageError> {
    let h = src
        .buffers()
        .host
        .as_ref()
        .ok_or(StorageError::NoSuchBuffer("host"))?;
    let d = dst
        .buffers()
        .device
        .as_ref()
        .ok_or(StorageError::NoSuchBuffer("device"))?;
    let n = src.buffers().span.min(dst.buffers().span);
    let _access = src.buffers().lock_host();
    // SAFETY: the host buffer holds `span` >= n initialized bytes (allocated zeroed or
    // copied in), lives through the call (copy_from_host waits for the copy), and no access
    // of this crate writes it meanwhile (its lock is held).
    let bytes = unsafe { std::slice::from_raw_parts(h.buffer.ptr(), n) };
    with_device(d.buffer.device_id, || {
        // SAFETY: the device buffer is `dst`'s own, `span` >= n bytes, alive while `dst` is,
        // and written by nothing else during a copy into it; its device is current.
        unsafe { driver_api::copy_from_host(d.buffer.ptr, bytes, Stream::LegacyDefault) }
    })
    .map_err(StorageError::from)
}

/// The mirror copies of a `managed="gt4py"` storage's buffers: the whole span of memory
/// allocated here, exactly the items of wrapped memory ([`Buffers::items`]).
pub(crate) struct Copier<'a>(pub &'a Buffers);

impl Copier<'_> {
    /// Copies one way what the buffers' copies move, enqueued on the legacy default stream,
    /// which is then synchronized once. Item `[0, ..., 0]` sits at the same offset (`origin`)
    /// in both buffers (module docs), so a range is at the same offset on both sides.
    fn copy(&self, to_device: bool) -> Result<(), StorageError> {
        let (Some(h), Some(d)) = (&self.0.host, &self.0.device) else {
            return Ok(());
        };
        let _access = self.0.lock_host();
        match &self.0.items {
            None => copy_ranges(h, d, std::iter::once((0, self.0.span)), to_device),
            Some(items) => {
                let origin = h.origin as isize;
                let runs = items.runs().map(|(o, n)| ((origin + o) as usize, n));
                copy_ranges(h, d, runs, to_device)
            }
        }
    }
}

/// Copies the byte ranges `(offset from each buffer's start, length)` between the two sides.
fn copy_ranges(
    h: &Side<HostBuffer>,
    d: &Side<DeviceBufferHandle>,
    ranges: impl Iterator<Item = (usize, usize)>,
    to_device: bool,
) -> Result<(), StorageError> {
    with_device(d.buffer.device_id, || {
        // SAFETY: the ranges lie inside both buffers' `span` bytes (the whole span, or the
        // items the wrapped views describe, checked when they were wrapped); the host buffer
        // is alive while the buffers are borrowed, and no other mirror copy touches it
        // (`SyncState` holds its lock across the copy); its bytes are plain bytes, so a
        // concurrent reader of the host side (as with NumPy arrays sharing memory) sees old or
        // new values. The device buffer's device is current.
        unsafe { driver_api::copy_ranges(h.buffer.ptr(), d.buffer.ptr, ranges, to_device) }
    })
    .map_err(StorageError::from)
}

impl Mirror for Copier<'_> {
    type Error = StorageError;

    fn copy_host_to_device(&self) -> Result<(), StorageError> {
        self.copy(true)
    }

    fn copy_device_to_host(&self) -> Result<(), StorageError> {
        self.copy(false)
    }
}

/// GDP-3's `host_to_device(force)`: no action unless the storage is mirrored.
pub(crate) fn host_to_device(s: &Storage, force: bool) -> Result<bool, StorageError> {
    match s.sync_state() {
        Some(state) => state.host_to_device(&Copier(s.buffers()), force),
        None => Ok(false),
    }
}

/// GDP-3's `device_to_host(force)`.
pub(crate) fn device_to_host(s: &Storage, force: bool) -> Result<bool, StorageError> {
    match s.sync_state() {
        Some(state) => state.device_to_host(&Copier(s.buffers()), force),
        None => Ok(false),
    }
}

/// GDP-3's `synchronize()`; for unified memory, waits for the device (so host reads are safe).
pub(crate) fn synchronize(s: &Storage) -> Result<bool, StorageError> {
    match s.sync_state() {
        Some(state) => state.synchronize(&Copier(s.buffers())),
        None if s.buffers().managed == Managed::Cuda => {
            let device = s.device_id().ok_or(StorageError::NoSuchBuffer("device"))?;
            with_device(device, driver_api::synchronize_context)?;
            Ok(false)
        }
        None => Ok(false),
    }
}

/// A device storage's copy: same parameters, its own buffers (and sync state). The source is
/// read where its newest data is.
pub(crate) fn copy(s: &Storage) -> Result<Storage, StorageError> {
    if s.has_host() {
        if let Some(state) = s.sync_state() {
            state.acquire_host(&Copier(s.buffers()))?;
        } else {
            synchronize(s)?;
        }
    }
    let params = s.like_params(StorageDevice::Gpu);
    let out = allocate(s.shape(), s.element().clone(), &params, Init::Uninit)?;
    let src_host = if s.has_host() {
        s.clone()
    } else {
        // Device only: bring the source's buffer to a staging host storage first.
        let staging = staged(s)?;
        let d = s
            .buffers()
            .device
            .as_ref()
            .ok_or(StorageError::NoSuchBuffer("device"))?;
        let h = staging.buffers().host.as_ref().expect("staged on the host");
        with_device(d.buffer.device_id, || {
            // SAFETY: the staging buffer holds `span` bytes, is new, and is used by nothing
            // else; the source's device is current.
            unsafe {
                driver_api::copy_to_host_into(
                    h.buffer.ptr(),
                    d.buffer.ptr,
                    s.buffers().span,
                    Stream::LegacyDefault,
                )
            }
        })
        .map_err(StorageError::from)?;
        s.on_buffers(staging.buffers().clone())
    };
    if out.has_host() {
        src_host.copy_items_host(&out)?;
        if out.sync_state().is_some() {
            Copier(out.buffers()).copy_host_to_device()?;
        }
    } else {
        let staging = staged(&out)?;
        src_host.copy_items_host(&staging)?;
        upload(&staging, &out)?;
    }
    Ok(out)
}
