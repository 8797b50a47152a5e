//! Device storages and the derived `__gt_data_interface__` over driver allocations, against
//! the driver. On a machine without one the tests that need a device print why they were
//! skipped and return.
//!
//! On the GPU machine these run from the bundle (scripts/gpu-bundle.sh); in CI, against the
//! emulated driver (with one device and with two).

use cai_gt::{
    ElementType, GtDataInterface, GtDevice, GtHooks, HookError, Init, Managed, Storage,
    StorageDevice, StorageError, StorageParams, SyncStatus,
};
use cai_runtime::cuda::{self, DeviceAllocation, DriverStream};
use cai_runtime::{RawDeviceMemory, Stream};

#[path = "../../cai-runtime/tests/support/gpu.rs"]
mod gpu;
use gpu::{gpu, stream};

#[test]
fn without_a_driver_device_storages_are_typed_errors() {
    let Err(no_driver) = cuda::init() else {
        return;
    };
    // Device storages: a clear "no device" error for every managed mode.
    for managed in [Managed::None, Managed::Gt4Py, Managed::Cuda] {
        let e = gpu_storage(&[4], managed, Init::Zeros).unwrap_err();
        assert!(matches!(e, StorageError::NoGpu(_)), "{e}");
        // No library at all (a machine without the NVIDIA driver), or the stub's `cuInit`.
        assert!(
            e.to_string()
                .starts_with(&format!("device=\"gpu\" needs a CUDA device: {no_driver}")),
            "{e}"
        );
        // The driver's error is kept as the source, not only as text.
        let source = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<cai_runtime::DriverError>());
        assert_eq!(source, Some(&no_driver), "{e}");
    }
}

fn f64s() -> ElementType {
    ElementType::new(cai_runtime::TypeStr::parse("<f8").unwrap(), None).unwrap()
}

fn gpu_storage(shape: &[usize], managed: Managed, init: Init) -> Result<Storage, StorageError> {
    storage_on(None, shape, managed, init)
}

/// A device storage on device `device_id` (`None`: the current device).
fn storage_on(
    device_id: Option<u32>,
    shape: &[usize],
    managed: Managed,
    init: Init,
) -> Result<Storage, StorageError> {
    let params = StorageParams {
        device: Some(StorageDevice::Gpu),
        device_id: device_id.map(cai_gt::GpuDevice::Ordinal),
        managed: Some(managed),
        alignment_size: Some(64),
        halo: Some(cai_gt::PerDim::from_elem((1, 1), shape.len())),
        ..Default::default()
    }
    .resolve(shape, 8, &StorageParams::default())
    .unwrap();
    Storage::allocate(shape, f64s(), &params, init)
}

/// The view's items on the device, in C order.
fn device_items(s: &Storage) -> Vec<f64> {
    let layout = s.geometry().layout.clone();
    // SAFETY: the storage's own device buffer holds the view's items, alive while `s` is.
    let bytes =
        unsafe { cuda::gather_to_host(s.device_ptr().unwrap(), &layout, Stream::LegacyDefault) }
            .expect("gather");
    bytes
        .chunks_exact(8)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn host_items(s: &Storage) -> Vec<f64> {
    let base = s.host_ptr().unwrap();
    s.geometry()
        .layout
        .item_offsets()
        // SAFETY: item offsets of a live storage's view lie inside its host buffer.
        .map(|o| unsafe { ((base as i64 + o as i64) as *const f64).read_unaligned() })
        .collect()
}

#[test]
fn mirrored_storages_copy_only_when_the_other_side_changed() {
    let Some(_ctx) = gpu("mirrored_storages_copy_only_when_the_other_side_changed") else {
        return;
    };
    let s = gpu_storage(
        &[3, 5],
        Managed::Gt4Py,
        Init::Fill(1.5f64.to_le_bytes().to_vec()),
    )
    .expect("allocate");
    // The aligned item (the halo's start) is aligned on the device.
    let dom = s.domain_view();
    assert_eq!(dom.device_ptr().unwrap() % 64, 0);
    assert_eq!(s.sync_status(), Some(SyncStatus::Clean));
    assert_eq!(device_items(&s), vec![1.5; 15]);
    // Host write, marked: the next device read copies it.
    dom.fill_host(&2.0f64.to_le_bytes()).unwrap();
    s.sync_state().unwrap().set_host_modified();
    assert!(s.host_to_device(false).unwrap());
    assert!(!s.host_to_device(false).unwrap(), "clean: no second copy");
    let dev = device_items(&s);
    assert_eq!(dev.iter().filter(|&&x| x == 2.0).count(), 3);
    // Device write, marked: the next host read copies it.
    let b = s.buffers();
    let d = b.device().unwrap();
    // SAFETY: the storage's own device buffer, alive while `s` is.
    unsafe { cuda::memset_async(d.buffer().ptr(), 0, b.span(), Stream::LegacyDefault).unwrap() };
    s.sync_state().unwrap().set_device_modified();
    assert!(s.device_to_host(false).unwrap());
    assert_eq!(host_items(&s), vec![0.0; 15]);
    // A copy has its own buffers and its own state.
    let c = s.copy().unwrap();
    assert!(!c.sync_state().unwrap().same_as(s.sync_state().unwrap()));
    assert_ne!(c.device_ptr(), s.device_ptr());
    assert_eq!(device_items(&c), vec![0.0; 15]);
}

#[test]
fn unified_and_device_only_storages() {
    let Some(_ctx) = gpu("unified_and_device_only_storages") else {
        return;
    };
    let u = gpu_storage(&[4, 4], Managed::Cuda, Init::Zeros).expect("unified");
    assert_eq!(u.host_ptr(), u.device_ptr(), "one address for both");
    u.fill_host(&3.0f64.to_le_bytes()).unwrap();
    u.synchronize().unwrap();
    assert_eq!(device_items(&u), vec![3.0; 16]);
    let d = gpu_storage(
        &[2, 3],
        Managed::None,
        Init::Fill(7.0f64.to_le_bytes().to_vec()),
    )
    .expect("device only");
    assert!(!d.has_host() && d.has_device() && d.sync_state().is_none());
    assert!(u.has_host() && u.has_device());
    assert_eq!(device_items(&d), vec![7.0; 6]);
    let view = d.transpose(None).unwrap();
    let c = view.copy().unwrap();
    assert_eq!(c.shape(), [3, 2]);
    assert_eq!(device_items(&c), vec![7.0; 6]);
    let desc = d.device_descriptor().unwrap().unwrap();
    assert_eq!(desc.shape, [2, 3]);
    assert!(d.host_descriptor().is_none());
}

/// A host mirror the hooks may write through `&self`: its items are `UnsafeCell`s.
struct HostMirror(Box<[std::cell::UnsafeCell<f64>]>);

// SAFETY: `UnsafeCell<f64>` has the layout of `f64`, so the boxed slice is `len` f64s at
// `host_ptr`, alive while `self` is, and writable through it.
unsafe impl cai_runtime::HostMemory for HostMirror {
    type Elem = f64;
    fn host_ptr(&self) -> *const f64 {
        self.0.as_ptr().cast()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

impl HostMirror {
    fn items(&self) -> Vec<f64> {
        // SAFETY: single-threaded test; no write is in progress while reading.
        self.0.iter().map(|c| unsafe { *c.get() }).collect()
    }
    fn bytes(&self) -> Vec<u8> {
        self.items().iter().flat_map(|x| x.to_le_bytes()).collect()
    }
}

/// A user's mirrored field: `#[derive(GtDataInterface)]` over a host mirror and device memory
/// from the driver, whose hooks copy to the side about to be read when the other was modified.
#[derive(GtDataInterface)]
#[cai(shape = [self.n], dims = "I", hooks)]
struct MirroredField {
    #[cai(host)]
    host: HostMirror,
    #[cai(gpu)]
    device: RawDeviceMemory<f64>,
    #[cai(stream)]
    stream: DriverStream,
    n: usize,
    dirty: std::cell::Cell<Option<GtDevice>>,
    /// The memory `device` points at.
    allocation: DeviceAllocation,
}

impl MirroredField {
    fn stream(&self) -> Stream {
        self.stream.stream()
    }
}

impl GtHooks for MirroredField {
    fn acquire(&self, device: GtDevice) -> Result<(), HookError> {
        let ptr = self.allocation.device_ptr();
        match (self.dirty.get(), device) {
            (Some(GtDevice::Host), GtDevice::Gpu) => {
                // SAFETY: the field's own device buffer of `n` items and its live stream;
                // nothing else uses the buffer during the hook.
                unsafe { cuda::copy_from_host(ptr, &self.host.bytes(), self.stream()) }?;
            }
            (Some(GtDevice::Gpu), GtDevice::Host) => {
                // SAFETY: as above.
                let got = unsafe { cuda::copy_to_host(ptr, self.n * 8, self.stream()) }?;
                for (cell, b) in self.host.0.iter().zip(got.chunks_exact(8)) {
                    // SAFETY: single-threaded test; nothing else reads the cell meanwhile.
                    unsafe { *cell.get() = f64::from_le_bytes(b.try_into().unwrap()) };
                }
            }
            _ => return Ok(()),
        }
        self.dirty.set(None);
        Ok(())
    }

    fn touch(&self, device: GtDevice) -> Result<(), HookError> {
        self.dirty.set(Some(device));
        Ok(())
    }
}

#[test]
fn derived_gt_data_interface_over_driver_allocations() {
    let Some(_ctx) = gpu("derived_gt_data_interface_over_driver_allocations") else {
        return;
    };
    let n = 6;
    let allocation = DeviceAllocation::new(n * 8, false).unwrap();
    let f = MirroredField {
        host: HostMirror((0..n).map(|i| (i as f64).into()).collect()),
        // SAFETY: `n` f64 items at the allocation's start; the struct holds the allocation.
        device: unsafe { RawDeviceMemory::from_raw_parts(allocation.device_ptr(), n) },
        stream: stream(),
        n,
        dirty: std::cell::Cell::new(None),
        allocation,
    };
    let d = f.gt_data_interface().unwrap();
    let (h, g) = (d.host.as_ref().unwrap(), d.gpu.as_ref().unwrap());
    assert_eq!(
        (h.shape.as_slice(), g.shape.as_slice()),
        (&[n][..], &[n][..])
    );
    assert_eq!(h.data.ptr, f.host.0.as_ptr() as u64);
    assert_eq!(g.data.ptr, f.allocation.device_ptr());
    assert_eq!(g.stream, Some(f.stream()));
    assert_eq!(d.dims, Some(vec!["I".to_string()]));

    // The host was written: acquiring the device copies it there.
    let hooks = f.gt_hooks().expect("hooks");
    hooks.touch(GtDevice::Host).unwrap();
    hooks.acquire(GtDevice::Gpu).unwrap();
    // SAFETY: the field's own device buffer of `n` items, alive while `f` is; its live stream.
    let on_device = unsafe { cuda::copy_to_host(g.data.ptr, n * 8, f.stream()) }.unwrap();
    assert_eq!(on_device, f.host.bytes());

    // The device was written: acquiring the host copies it back.
    // SAFETY: the field's own buffer, alive while `f` is; the stream is synchronized by the
    // copy in `acquire`, which is enqueued after the memset on the same stream.
    unsafe { cuda::memset_async(g.data.ptr, 0, n * 8, f.stream()).unwrap() };
    hooks.touch(GtDevice::Gpu).unwrap();
    hooks.acquire(GtDevice::Host).unwrap();
    assert_eq!(f.host.items(), vec![0.0; n]);
}

/// Every device: a storage on device 1, made while device 0 is current, is allocated, filled,
/// mirrored, copied and synchronized there (the emulated suite runs once with two devices; with
/// one device this checks the error and says the rest was skipped).
#[test]
fn storages_on_another_device_stay_there() {
    let Some(_ctx) = gpu("storages_on_another_device_stay_there") else {
        return;
    };
    let n = cuda::device_count().unwrap();
    let past = storage_on(Some(n), &[2], Managed::None, Init::Zeros).unwrap_err();
    assert_eq!(
        past,
        StorageError::NoSuchDevice {
            device: n,
            count: n
        }
    );
    if n < 2 {
        eprintln!("skipped storages_on_another_device_stay_there: one device here");
        return;
    }
    assert_eq!(cuda::current_device().unwrap(), 0);
    let on_device = |s: &Storage| {
        cuda::pointer_attributes(s.device_ptr().unwrap())
            .unwrap()
            .device_ordinal
    };
    for managed in [Managed::None, Managed::Gt4Py, Managed::Cuda] {
        let s = storage_on(
            Some(1),
            &[3, 4],
            managed,
            Init::Fill(2.5f64.to_le_bytes().to_vec()),
        )
        .expect("allocate on device 1");
        assert_eq!(
            (s.device_id(), on_device(&s)),
            (Some(1), Some(1)),
            "{managed:?}"
        );
        if s.has_host() {
            s.fill_host(&4.0f64.to_le_bytes()).unwrap();
            if let Some(state) = s.sync_state() {
                state.set_host_modified();
            }
            s.host_to_device(false).unwrap();
            s.synchronize().unwrap();
        }
        let want = if s.has_host() { 4.0 } else { 2.5 };
        let read = cuda::with_device(1, || Ok::<_, cai_runtime::DriverError>(device_items(&s)));
        assert_eq!(read.unwrap(), vec![want; 12], "{managed:?}");
        let c = s.copy().unwrap();
        assert_eq!(
            (c.device_id(), on_device(&c)),
            (Some(1), Some(1)),
            "{managed:?}"
        );
        assert_eq!(cuda::current_device().unwrap(), 0, "device 0 stays current");
    }
    assert_eq!(
        gpu_storage(&[2], Managed::None, Init::Zeros)
            .unwrap()
            .device_id(),
        Some(0)
    );
}
