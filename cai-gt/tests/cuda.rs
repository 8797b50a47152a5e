//! Device storages and the derived `__gt_data_interface__` over cust buffers, against the
//! driver. On a machine without one (CI links the stub from scripts/cuda-stub.sh) the tests
//! that need a device print why they were skipped and return.
//!
//! On the GPU machine these run from the bundle (scripts/gpu-bundle.sh).

#![cfg(feature = "cust")]

use cai_gt::{
    ElementType, GtDataInterface, GtDevice, GtHooks, HookError, Init, Managed, Storage,
    StorageDevice, StorageError, StorageParams, SyncStatus,
};
use cai_runtime::Stream;
use cai_runtime::cuda;
use cust::memory::DeviceBuffer;
use cust::stream::Stream as CuStream;

#[path = "../../cai-runtime/tests/support/gpu.rs"]
mod gpu;
use gpu::{gpu, stream};

#[test]
fn without_a_driver_device_storages_are_typed_errors() {
    if cuda::init().is_ok() {
        return;
    }
    // Device storages: a clear "no device" error for every managed mode.
    for managed in [Managed::None, Managed::Gt4Py, Managed::Cuda] {
        let e = gpu_storage(&[4], managed, Init::Zeros).unwrap_err();
        assert!(matches!(e, StorageError::NoGpu(_)), "{e}");
        assert!(
            e.to_string()
                .starts_with("device=\"gpu\" needs a CUDA device: cuInit failed")
        );
        // The driver's error is kept as the source, not only as text.
        let source = std::error::Error::source(&e)
            .and_then(|s| s.downcast_ref::<cai_runtime::DriverError>());
        assert_eq!(source.map(|d| d.operation), Some("cuInit"), "{e}");
    }
}

fn f64s() -> ElementType {
    ElementType::new(cai_runtime::TypeStr::parse("<f8").unwrap(), None).unwrap()
}

fn gpu_storage(shape: &[usize], managed: Managed, init: Init) -> Result<Storage, StorageError> {
    let params = StorageParams {
        device: Some(StorageDevice::Gpu),
        managed: Some(managed),
        alignment_size: Some(64),
        halo: Some(cai_gt::PerDim::from_elem((1, 1), shape.len())),
        ..Default::default()
    }
    .resolve(shape, &StorageParams::default())
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

/// A user's mirrored field: `#[derive(GtDataInterface)]` over a host mirror and a cust
/// `DeviceBuffer`, whose hooks copy to the side about to be read when the other was modified.
#[derive(GtDataInterface)]
#[cai(shape = [self.n], dims = "I", hooks)]
struct MirroredField {
    #[cai(host)]
    host: HostMirror,
    #[cai(gpu)]
    device: DeviceBuffer<f64>,
    #[cai(stream)]
    stream: CuStream,
    n: usize,
    dirty: std::cell::Cell<Option<GtDevice>>,
}

impl MirroredField {
    fn stream(&self) -> Stream {
        cuda::from_raw_handle(self.stream.as_inner().cast())
    }
}

impl GtHooks for MirroredField {
    fn acquire(&self, device: GtDevice) -> Result<(), HookError> {
        let ptr = self.device.as_device_ptr().as_raw();
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
fn derived_gt_data_interface_over_cust_buffers() {
    let Some(_ctx) = gpu("derived_gt_data_interface_over_cust_buffers") else {
        return;
    };
    let n = 6;
    let f = MirroredField {
        host: HostMirror((0..n).map(|i| (i as f64).into()).collect()),
        device: DeviceBuffer::zeroed(n).unwrap(),
        stream: stream(),
        n,
        dirty: std::cell::Cell::new(None),
    };
    let d = f.gt_data_interface().unwrap();
    let (h, g) = (d.host.as_ref().unwrap(), d.gpu.as_ref().unwrap());
    assert_eq!(
        (h.shape.as_slice(), g.shape.as_slice()),
        (&[n][..], &[n][..])
    );
    assert_eq!(h.data.ptr, f.host.0.as_ptr() as u64);
    assert_eq!(g.data.ptr, f.device.as_device_ptr().as_raw());
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
