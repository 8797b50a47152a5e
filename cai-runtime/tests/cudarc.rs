//! The `cudarc` feature: cudarc 0.19's slices and views as device memory and its streams as
//! exported streams, against the driver (the emulated one in CI). cudarc panics where it finds
//! no driver library, so each test asks cai's own loader first and says it was skipped.

#![cfg(feature = "cudarc")]

use std::sync::Arc;

use cai_runtime::cuda;
use cai_runtime::{CudaArrayInterface, DescriptorBuilder, Stream};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream};

#[path = "support/gpu.rs"]
mod gpu;

/// cudarc's device 0, or `None` (with the reason printed) where cai's loader finds no usable
/// driver or device (then cudarc is never called).
fn context(test: &str) -> Option<Arc<CudaContext>> {
    gpu::gpu(test).map(|()| CudaContext::new(0).expect("cudarc's context on device 0"))
}

#[derive(CudaArrayInterface)]
struct Image {
    #[cai(data)]
    pixels: CudaSlice<f32>,
    #[cai(shape)]
    dims: [usize; 2],
    #[cai(stream)]
    stream: Arc<CudaStream>,
}

#[test]
fn cudarc_slices_export_with_their_stream() {
    let Some(ctx) = context("cudarc_slices_export_with_their_stream") else {
        return;
    };
    let stream = ctx.new_stream().unwrap();
    let host: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let img = Image {
        pixels: stream.clone_htod(&host).unwrap(),
        dims: [2, 3],
        stream: stream.clone(),
    };
    let d = img.cuda_array_interface().unwrap();
    assert_eq!((d.shape.as_slice(), d.version), (&[2, 3][..], 3));
    assert_eq!(d.typestr.to_string(), "<f4");
    let s = d.stream().expect("a stream");
    assert_eq!(s.as_raw(), stream.cu_stream() as usize as u64);
    assert!(s.as_raw() > 2, "a created stream is a handle");
    // SAFETY: the image's own live slice, on its live stream.
    let back = unsafe { cuda::copy_to_host(d.data.ptr, 24, s) }.unwrap();
    assert_eq!(
        back,
        host.iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>()
    );
    // A view is read-only; part of a slice starts further in.
    let view = img.pixels.slice(2..5);
    let v = DescriptorBuilder::device(&view).build().unwrap();
    assert_eq!((v.shape.as_slice(), v.data.readonly), (&[3][..], true));
    assert_eq!(v.data.ptr, d.data.ptr + 8);
    // cudarc's default stream is the legacy default stream: 1, never 0.
    use cai_runtime::AsStream;
    assert_eq!(
        ctx.default_stream().cai_stream(),
        Some(Stream::LegacyDefault)
    );
    assert_eq!(
        ctx.per_thread_stream().cai_stream(),
        Some(Stream::PerThreadDefault)
    );
}

/// cudarc records the streams a slice was written on: an export on the slice's own stream
/// makes it wait for a write still pending on another, so a consumer synchronizing on the
/// exported stream sees it (the spec's producer rule). The emulator runs work only when it
/// must, so an unordered read would see the old bytes.
#[test]
fn an_export_orders_writes_pending_on_another_stream() {
    let Some(ctx) = context("an_export_orders_writes_pending_on_another_stream") else {
        return;
    };
    let (a, b) = (ctx.new_stream().unwrap(), ctx.new_stream().unwrap());
    let host = vec![7.0f32; 1024];
    let mut pixels = a.clone_htod(&host).unwrap();
    a.synchronize().unwrap();
    // The address, taken before the write below (cudarc orders the stream it is taken for).
    let ptr = DescriptorBuilder::device(&pixels).build().unwrap().data.ptr;
    b.memset_zeros(&mut pixels).unwrap(); // pending on b
    if gpu::emulated() {
        // The control: a reader on a third stream, not ordered after b, sees the old bytes.
        let c = ctx.new_stream().unwrap();
        let c = cuda::from_raw_handle(c.cu_stream().cast());
        // SAFETY: this test's live slice, on a live stream.
        let stale = unsafe { cuda::copy_to_host(ptr, 4, c) }.unwrap();
        assert_eq!(
            stale,
            7.0f32.to_le_bytes(),
            "the emulator ran b's work eagerly"
        );
    }
    let img = Image {
        pixels,
        dims: [32, 32],
        stream: a.clone(),
    };
    let d = img.cuda_array_interface().unwrap();
    let exported = d.stream().unwrap();
    assert_eq!(exported.as_raw(), a.cu_stream() as usize as u64);
    // SAFETY: the image's own live slice, on its exported (live) stream.
    let seen = unsafe { cuda::copy_to_host(d.data.ptr, 4096, exported) }.unwrap();
    assert!(
        seen.iter().all(|&x| x == 0),
        "stale bytes on the exported stream"
    );
}

/// cudarc's copies to a `Vec` are `cuMemcpyDtoHAsync` to pageable memory, which the driver
/// finishes before returning, and cudarc does not synchronize after: the emulator ran such a
/// copy only when its stream was next synchronized, so `clone_dtoh` returned the Vec unwritten
/// (and the copy later wrote into freed memory).
#[test]
fn cudarcs_copies_to_pageable_memory_are_done_on_return() {
    let Some(ctx) = context("cudarcs_copies_to_pageable_memory_are_done_on_return") else {
        return;
    };
    let s = ctx.new_stream().unwrap();
    let mut values = s.clone_htod(&vec![5u32; 4096]).unwrap();
    s.memset_zeros(&mut values).unwrap();
    assert_eq!(s.clone_dtoh(&values).unwrap(), vec![0u32; 4096]);
    ctx.check_err().unwrap();
}

#[derive(CudaArrayInterface)]
struct OnItsOwnStream<S: cai_runtime::AsStream> {
    #[cai(data)]
    values: CudaSlice<f32>,
    #[cai(stream)]
    stream: S,
}

/// A struct exporting another stream than its slice's: that stream waits for the slice's
/// stream, which waited for the write pending on a third (`DeviceMemory::order_export`), where
/// cai can vouch for the exported stream (a default stream, a cai `DriverStream`); another
/// handle is refused rather than handed to the driver.
#[test]
fn an_export_on_another_stream_orders_the_slices_pending_writes() {
    let Some(ctx) = context("an_export_on_another_stream_orders_the_slices_pending_writes") else {
        return;
    };
    let (a, b) = (ctx.new_stream().unwrap(), ctx.new_stream().unwrap());
    let pending = || {
        let mut values = a.clone_htod(&vec![3.0f32; 256]).unwrap();
        a.synchronize().unwrap();
        b.memset_zeros(&mut values).unwrap(); // pending on b
        values
    };
    let ours = Arc::new(cuda::DriverStream::new(true).unwrap());
    let x = OnItsOwnStream {
        values: pending(),
        stream: ours.clone(),
    };
    let d = x.cuda_array_interface().unwrap();
    // SAFETY: the struct's own live slice, on its exported (live) stream.
    let seen = unsafe { cuda::copy_to_host(d.data.ptr, 1024, ours.stream()) }.unwrap();
    assert!(
        seen.iter().all(|&x| x == 0),
        "stale bytes on the exported stream"
    );
    let legacy = OnItsOwnStream {
        values: pending(),
        stream: Stream::LegacyDefault,
    };
    let d = legacy.cuda_array_interface().unwrap();
    // SAFETY: as above.
    let seen = unsafe { cuda::copy_to_host(d.data.ptr, 1024, Stream::LegacyDefault) }.unwrap();
    assert!(
        seen.iter().all(|&x| x == 0),
        "stale bytes on the legacy stream"
    );
    // A cudarc stream the struct holds is live: ordered.
    let theirs = ctx.new_stream().unwrap();
    let held = OnItsOwnStream {
        values: pending(),
        stream: theirs.clone(),
    };
    let d = held.cuda_array_interface().unwrap();
    let s = d.stream().unwrap();
    // SAFETY: as above.
    let seen = unsafe { cuda::copy_to_host(d.data.ptr, 1024, s) }.unwrap();
    assert!(
        seen.iter().all(|&x| x == 0),
        "stale bytes on the held cudarc stream"
    );
    // A bare number may be no stream at all: never handed to the driver, refused.
    let named = OnItsOwnStream {
        values: pending(),
        stream: s,
    };
    let e = named.cuda_array_interface().unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot be ordered after the data's own stream"),
        "{e}"
    );
}

#[derive(CudaArrayInterface)]
struct NoStream {
    #[cai(data)]
    values: CudaSlice<f32>,
}

/// `stream: None` says no synchronization is needed: the slice's pending work is finished
/// first. An export takes no read record away from cudarc (a write after it still waits for
/// a read pending elsewhere), and leaves the thread's current context as it was.
#[test]
fn exports_keep_cudarcs_tracking_and_the_current_context() {
    let Some(ctx) = context("exports_keep_cudarcs_tracking_and_the_current_context") else {
        return;
    };
    let (a, r, w) = (
        ctx.new_stream().unwrap(),
        ctx.new_stream().unwrap(),
        ctx.new_stream().unwrap(),
    );
    let mut values = a.clone_htod(&vec![7.0f32; 64]).unwrap();
    a.synchronize().unwrap();
    b_memset(&w, &mut values);
    let x = NoStream { values };
    let d = x.cuda_array_interface().unwrap();
    assert_eq!(d.stream(), None);
    // SAFETY: the struct's live slice; `stream: None` promises it is ready for any stream.
    let seen = unsafe { cuda::copy_to_host(d.data.ptr, 256, Stream::LegacyDefault) }.unwrap();
    assert!(
        seen.iter().all(|&x| x == 0),
        "stale bytes with `stream: None`"
    );
    let mut values = x.values;
    // A read pending on r, then an export, then a write on w: the write waits for the read.
    let mut copy = a.alloc_zeros::<f32>(64).unwrap();
    a.memcpy_htod(&vec![7.0f32; 64], &mut values).unwrap();
    a.synchronize().unwrap();
    r.memcpy_dtod(&values, &mut copy).unwrap();
    let before = cuda::current_device().unwrap();
    let _ = DescriptorBuilder::device(&values).build().unwrap();
    assert_eq!(cuda::current_device().unwrap(), before);
    w.memset_zeros(&mut values).unwrap();
    w.synchronize().unwrap();
    assert_eq!(
        r.clone_dtoh(&copy).unwrap(),
        vec![7.0f32; 64],
        "the write overtook the read"
    );
}

fn b_memset(s: &Arc<CudaStream>, values: &mut CudaSlice<f32>) {
    s.memset_zeros(values).unwrap();
}

/// Import to cudarc: a foreign array (here a CAI dict over a slice of our own) as a cudarc view
/// on the consumer's stream, typed, contiguous, on the stream the import ordered it for; a
/// copy with cudarc's own functions reads it, a write through the writable view lands in it,
/// and dropping the views frees nothing.
#[cfg(feature = "python")]
#[test]
fn a_foreign_array_imports_as_a_cudarc_view() {
    use cai_runtime::AsStream;
    use cai_runtime::python::{ForeignDeviceArray, ViewError, to_dict};
    use cai_runtime::sync::ImportOptions;
    use pyo3::prelude::*;

    let Some(ctx) = context("a_foreign_array_imports_as_a_cudarc_view") else {
        return;
    };
    let (a, b) = (ctx.new_stream().unwrap(), ctx.new_stream().unwrap());
    let host: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let owner = Image {
        pixels: a.clone_htod(&host).unwrap(),
        dims: [3, 4],
        stream: a.clone(),
    };
    let desc = owner.cuda_array_interface().unwrap();
    let options = ImportOptions {
        // SAFETY: cudarc's stream `a` lives until the end of the test, past every import.
        consumer: unsafe { cai_runtime::LiveStream::new(a.cai_stream().unwrap()) },
        ..ImportOptions::default()
    };
    Python::initialize();
    Python::attach(|py| {
        let dict = to_dict(py, &desc).unwrap();
        // SAFETY: the dict describes `owner`'s slice, alive (and unchanged but for this
        // test's writes) until the end of the test, after every view.
        let mut import =
            unsafe { ForeignDeviceArray::from_interface_with(&dict, None, &options) }.unwrap();
        {
            let view = import.cudarc_view::<f32>(&a).unwrap();
            assert_eq!(view.len(), 12);
            assert_eq!(a.clone_dtoh(&view.view()).unwrap(), host);
        }
        // The checks: element type, stream, layout.
        assert!(matches!(
            import.cudarc_view::<i32>(&a),
            Err(ViewError::Dtype { .. })
        ));
        let other = import.cudarc_view::<f32>(&b).unwrap_err();
        assert!(matches!(other, ViewError::OtherStream { .. }), "{other}");
        assert!(other.to_string().contains("import with stream="), "{other}");
        {
            let mut view = import.cudarc_view_mut::<f32>(&a).unwrap();
            a.memset_zeros(&mut view.view_mut().unwrap()).unwrap();
        }
        // The write landed in the slice, which is still alive and still ours to free.
        assert_eq!(a.clone_dtoh(&owner.pixels).unwrap(), vec![0.0; 12]);
        let strided = cai_runtime::DescriptorBuilder::device(&owner.pixels)
            .shape([3, 2])
            .strides(Some(vec![16, 8]))
            .build()
            .unwrap();
        let dict = to_dict(py, &strided).unwrap();
        // SAFETY: as above: every item of the strided view lies in the live slice.
        let gaps =
            unsafe { ForeignDeviceArray::from_interface_with(&dict, None, &options) }.unwrap();
        let e = gaps.cudarc_view::<f32>(&a).unwrap_err();
        assert!(matches!(e, ViewError::NotContiguous { .. }), "{e}");
        let dict = to_dict(
            py,
            &cai_runtime::DescriptorBuilder::device(&owner.pixels)
                .readonly(true)
                .build()
                .unwrap(),
        )
        .unwrap();
        // SAFETY: as above.
        let mut readonly =
            unsafe { ForeignDeviceArray::from_interface_with(&dict, None, &options) }.unwrap();
        assert!(matches!(
            readonly.cudarc_view_mut::<f32>(&a),
            Err(ViewError::ReadOnly)
        ));
        assert!(
            readonly
                .cudarc_view::<f32>(&a)
                .unwrap()
                .view_mut()
                .is_none()
        );
        // The per-thread stream is each thread's own: a view (which may move) is refused on it.
        let per_thread = ImportOptions {
            consumer: cai_runtime::LiveStream::PER_THREAD_DEFAULT,
            ..ImportOptions::default()
        };
        let dict = to_dict(py, &desc).unwrap();
        // SAFETY: as above.
        let on_2 =
            unsafe { ForeignDeviceArray::from_interface_with(&dict, None, &per_thread) }.unwrap();
        let e = on_2
            .cudarc_view::<f32>(&ctx.per_thread_stream())
            .unwrap_err();
        assert!(matches!(e, ViewError::OtherStream { .. }), "{e}");
        // An error cudarc's context holds is an error here, not a panic, and stays there.
        ctx.record_err::<()>(Err(cudarc::driver::DriverError(
            cudarc::driver::sys::cudaError_enum::CUDA_ERROR_LAUNCH_FAILED,
        )));
        let e = import.cudarc_view::<f32>(&a).unwrap_err();
        assert!(
            matches!(
                e,
                ViewError::Backend {
                    backend: "cudarc",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            std::error::Error::source(&e).is_some(),
            "cudarc's error is the source"
        );
        assert!(
            ctx.check_err().is_err(),
            "the error is still there for its owner"
        );
    });
    ctx.check_err().unwrap();
    drop(owner); // freed once, by its owner
    ctx.synchronize().unwrap();
    ctx.check_err().unwrap();
}

/// Each device has its own legacy default stream: a view on device 1's for an import ordered
/// for device 0's is refused (the emulated suite runs this with two devices).
#[cfg(feature = "python")]
#[test]
fn a_view_on_another_devices_default_stream_is_refused() {
    use cai_runtime::python::{ForeignDeviceArray, ViewError, to_dict};
    use cai_runtime::sync::ImportOptions;
    use pyo3::prelude::*;

    let Some(ctx0) = context("a_view_on_another_devices_default_stream_is_refused") else {
        return;
    };
    if cuda::device_count().unwrap() < 2 {
        eprintln!("skipped a_view_on_another_devices_default_stream_is_refused: one device here");
        return;
    }
    let ctx1 = CudaContext::new(1).unwrap();
    let a = ctx0.new_stream().unwrap();
    let owner = Image {
        pixels: a.clone_htod(&[1.0f32; 4]).unwrap(),
        dims: [2, 2],
        stream: a.clone(),
    };
    let desc = owner.cuda_array_interface().unwrap();
    Python::initialize();
    Python::attach(|py| {
        let dict = to_dict(py, &desc).unwrap();
        ctx0.bind_to_thread().unwrap();
        let options = ImportOptions::default();
        // SAFETY: the dict describes `owner`'s slice, alive until the end of the test.
        let import =
            unsafe { ForeignDeviceArray::from_interface_with(&dict, None, &options) }.unwrap();
        let e = import
            .cudarc_view::<f32>(&ctx1.default_stream())
            .unwrap_err();
        assert!(
            matches!(e, ViewError::OtherDevice { import: 0, view: 1 }),
            "{e}"
        );
        assert!(import.cudarc_view::<f32>(&ctx0.default_stream()).is_ok());
    });
}
