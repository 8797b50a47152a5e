//! The `cuda` feature (the driver layer alone: no cust, no libcuda at build time) against the
//! driver. On a machine without one the tests that need a device print why they were skipped
//! and return; the rest check that every driver failure is a typed error, never a panic.
//!
//! On the GPU machine these run from the bundle (scripts/gpu-bundle.sh); in CI, against the
//! emulated driver.

#![cfg(feature = "cuda")]

use std::sync::Arc;

use cai_runtime::Extent;
use cai_runtime::cuda::{self, DeviceAllocation, DriverStream, ExportStream, PendingStreams};
use cai_runtime::sync::{ImportOptions, NoSyncReason, ReleasePlan, SyncMode, SyncPlan};
use cai_runtime::{
    CudaArrayInterface, DescriptorError, DriverError, RawDeviceMemory, Stream, StreamError,
};
use cai_runtime::{LiveStream, MemoryType, PointerError};

#[path = "support/gpu.rs"]
mod gpu;
use gpu::{emulated, gpu, stream};

/// `n` zeroed bytes of device memory, the zeroing finished.
fn zeroed(n: usize) -> DeviceAllocation {
    let a = DeviceAllocation::new(n, false).unwrap();
    // SAFETY: the allocation is new, `n` bytes, and used by nothing else; the legacy stream is
    // synchronized right after.
    unsafe { cuda::memset_async(a.device_ptr(), 0, n, Stream::LegacyDefault).unwrap() };
    cuda::synchronize_stream(LiveStream::LEGACY_DEFAULT).unwrap();
    a
}

#[derive(CudaArrayInterface)]
struct Image {
    #[cai(data)]
    pixels: RawDeviceMemory<f32>,
    #[cai(shape)]
    dims: [usize; 2],
    #[cai(stream)]
    stream: DriverStream,
    /// The memory `pixels` points into.
    _allocation: DeviceAllocation,
}

#[derive(CudaArrayInterface)]
struct MultiStream {
    #[cai(data)]
    bytes: Arc<DeviceAllocation>,
    #[cai(stream)]
    streams: PendingStreams,
}

#[test]
fn without_a_driver_every_call_is_a_typed_error() {
    let Err(e) = cuda::init() else {
        eprintln!("skipped: a driver is present, so driver failures cannot be provoked this way");
        return;
    };
    // No library at all (a machine without the NVIDIA driver), or the stub's `cuInit`.
    assert!(e.is_no_device(), "{e}");
    assert!(
        e == DriverError::NO_DRIVER || e.operation == "cuInit",
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.starts_with(&format!("{} failed: CUDA_ERROR_", e.operation)),
        "{msg}"
    );
    // Each entry point reports the same failure rather than panicking.
    assert_eq!(cuda::pointer_attributes(0x1000).unwrap_err(), e);
    assert!(cuda::order_after(LiveStream::LEGACY_DEFAULT, LiveStream::PER_THREAD_DEFAULT).is_err());
    // SAFETY: an address no allocation has: the driver refuses it (nothing is read).
    assert!(unsafe { cuda::copy_to_host(0x1000, 8, Stream::LegacyDefault) }.is_err());
    let check = cuda::check_device_pointer(0x1000, Some(Extent { lo: 0, hi: 8 })).unwrap_err();
    assert!(
        check
            .to_string()
            .starts_with(&format!("cannot check `data` with the CUDA driver: {e}"))
    );
    // A zero-size array touches no memory: accepted without asking the driver.
    assert_eq!(cuda::check_device_pointer(0, None), Ok(None));
    // Import: no stream means nothing to do; a stream means a driver call, which fails.
    let opts = ImportOptions::default();
    // SAFETY: no stream, then a default stream.
    unsafe {
        assert_eq!(
            cuda::synchronize_import(None, &opts),
            Ok(SyncPlan::Nothing(NoSyncReason::NoStream))
        );
        assert!(cuda::synchronize_import(Some(Stream::PerThreadDefault), &opts).is_err());
    }

    // An export whose pending streams cannot be ordered fails with an error on `stream`.
    let pending = PendingStreams::new(ExportStream::PerThreadDefault);
    pending.enqueued_on(ExportStream::LegacyDefault);
    let err = pending.order_pending().unwrap_err();
    assert_eq!(err, e);
    let as_descriptor = DescriptorError::from(StreamError::from(err));
    assert_eq!(as_descriptor.key(), "stream");
    assert!(as_descriptor.to_string().starts_with(&format!(
        "could not order work on the exported `stream`: {e}"
    )));
    // Still pending: nothing was lost.
    assert_eq!(pending.pending(), [Stream::LegacyDefault]);
}

/// The names our messages give `CUresult` codes (written without a driver, for the messages
/// about a missing one) are the driver's own.
#[test]
fn error_names_are_the_drivers() {
    let Some(_ctx) = gpu("error_names_are_the_drivers") else {
        return;
    };
    let mut checked = 0;
    for code in 0..1000u32 {
        let ours = cai_runtime::driver_error_name(code);
        if ours == "CUDA error" {
            continue;
        }
        let theirs = cuda::driver_error_text(code);
        if code == DriverError::CUDA_ERROR_INSUFFICIENT_DRIVER {
            // The CUDA runtime's code, which cai reports when no driver loads: the driver API
            // has no such code, and a real driver (an H200's) does not name it.
            assert!(theirs.is_err(), "code {code}: {theirs:?}");
            continue;
        }
        if theirs.is_err() && emulated() {
            continue; // the emulator knows only the codes it returns
        }
        let (name, description) = theirs.unwrap_or_else(|e| panic!("code {code} ({ours}): {e}"));
        assert_eq!(name, ours, "code {code}");
        assert!(!description.is_empty(), "code {code}");
        checked += 1;
    }
    eprintln!("{checked} error names checked against the driver");
    assert!(checked >= 8, "{checked}");
}

#[test]
fn driver_allocations_export_with_their_stream() {
    let Some(_ctx) = gpu("driver_allocations_export_with_their_stream") else {
        return;
    };
    let host: Vec<u8> = (0..6).flat_map(|i| (i as f32).to_le_bytes()).collect();
    let allocation = DeviceAllocation::new(host.len(), false).unwrap();
    // SAFETY: the allocation is new, `host.len()` bytes; the copy waits for itself.
    unsafe { cuda::copy_from_host(allocation.device_ptr(), &host, Stream::LegacyDefault) }.unwrap();
    let img = Image {
        // SAFETY: 6 f32 items at the allocation's start, which the struct holds.
        pixels: unsafe { RawDeviceMemory::from_raw_parts(allocation.device_ptr(), 6) },
        dims: [2, 3],
        stream: stream(),
        _allocation: allocation,
    };
    let d = img.cuda_array_interface().unwrap();
    assert_eq!(d.data.ptr, img._allocation.device_ptr());
    assert_eq!((d.shape.as_slice(), d.version), (&[2, 3][..], 3));
    let s = d.stream().expect("a stream");
    assert_eq!(s, img.stream.stream());
    assert!(
        s.as_raw() > 2,
        "a created stream is a handle, never 0, 1 or 2"
    );
    // SAFETY: the image's own live allocation, on its live stream.
    let back = unsafe { cuda::copy_to_host(d.data.ptr, host.len(), s) }.unwrap();
    assert_eq!(back, host);
    // An allocation is device memory of bytes; managed memory is too.
    let u = DeviceAllocation::new(32, true).unwrap();
    let d = cai_runtime::DescriptorBuilder::device(&u).build().unwrap();
    assert_eq!(
        (d.shape.as_slice(), d.data.ptr),
        (&[32][..], u.device_ptr())
    );
    assert_eq!(d.typestr.to_string(), "|u1");
}

#[test]
fn pointer_attributes_for_every_memory_type() {
    let Some(_ctx) = gpu("pointer_attributes_for_every_memory_type") else {
        return;
    };
    let dev = zeroed(4096);
    let base = dev.device_ptr();
    let a = cuda::pointer_attributes(base + 100).unwrap();
    assert_eq!(a.memory_type, MemoryType::Device);
    assert_eq!(a.device_ordinal, Some(0));
    assert!(a.device_accessible() && !a.host_accessible() && !a.is_managed);
    assert_ne!(a.context, 0);
    let (start, size) = a.range.expect("range of a cuMemAlloc allocation");
    assert_eq!(start, base);
    assert!(size >= 4096);

    // The extent check against the allocation's range.
    assert!(
        cuda::check_device_pointer(
            base,
            Some(Extent {
                lo: 0,
                hi: size as isize
            })
        )
        .is_ok()
    );
    let err = cuda::check_device_pointer(
        base,
        Some(Extent {
            lo: 0,
            hi: size as isize + 1,
        }),
    )
    .unwrap_err();
    assert!(matches!(
        err,
        cuda::ImportCheckError::Pointer(PointerError::OutsideAllocation { .. })
    ));
    let err = cuda::check_device_pointer(base, Some(Extent { lo: -8, hi: 8 })).unwrap_err();
    assert!(err.to_string().contains("before the allocation"), "{err}");

    let managed = DeviceAllocation::new(1024, true).unwrap();
    let a = cuda::pointer_attributes(managed.device_ptr()).unwrap();
    assert_eq!(a.memory_type, MemoryType::Managed);
    assert!(a.is_managed && a.device_accessible() && a.host_accessible());
    // (Pinned host memory: tests/cust.rs, through cust's LockedBuffer.)

    let pageable = vec![0u8; 4096];
    let a = cuda::pointer_attributes(pageable.as_ptr() as u64).unwrap();
    assert_eq!(a.memory_type, MemoryType::Unregistered);
    assert_eq!(a.range, None);
    let checked = cuda::check_device_pointer(a.ptr, Some(Extent { lo: 0, hi: 8 }));
    if a.pageable_memory_access {
        eprintln!(
            "note: this device reaches pageable memory (HMM/ATS), so host memory is accepted"
        );
        assert!(checked.is_ok());
    } else {
        let e = checked.unwrap_err();
        assert!(e.to_string().contains("is not device-accessible"), "{e}");
    }
}

/// Fills `n` bytes with `value` on `stream`, after `rounds` slow fills, so that a reader that
/// does not wait for the stream would see old bytes.
fn slow_fill(buf: &DeviceAllocation, value: u8, stream: Stream, rounds: usize) {
    let ptr = buf.device_ptr();
    for _ in 0..rounds {
        // SAFETY: the buffer is ours and outlives the work (the tests synchronize before
        // dropping it).
        unsafe { cuda::memset_async(ptr, value.wrapping_add(1), buf.len(), stream).unwrap() };
    }
    // SAFETY: as above.
    unsafe { cuda::memset_async(ptr, value, buf.len(), stream).unwrap() };
}

/// Large enough that a GPU is still filling it when a reader that does not wait looks. The
/// emulator (scripts/cuda-stub.sh --emulator) runs work only when it must, so a stale read shows
/// there at any size, and a small one keeps the test fast.
fn big() -> usize {
    if emulated() { 1 << 20 } else { 1 << 30 }
}

/// The control for the two stream tests below: without an event wait, a reader on another
/// stream sees the bytes from before the producer's work. Only the emulator shows it every time
/// (on a GPU the outcome is a race), so that a stream test passing there means the wait worked.
#[test]
fn the_emulator_shows_an_unordered_read_as_stale() {
    let Some(_ctx) = gpu("the_emulator_shows_an_unordered_read_as_stale") else {
        return;
    };
    if !emulated() {
        eprintln!("skipped the_emulator_shows_an_unordered_read_as_stale: a real GPU races");
        return;
    }
    let (producer, consumer) = (stream(), stream());
    let (p, c) = (producer.stream(), consumer.stream());
    let buf = zeroed(64);
    slow_fill(&buf, 3, p, 1);
    // SAFETY: this test's own live device buffer, on a live stream.
    let unordered = unsafe { cuda::copy_to_host(buf.device_ptr(), 64, c) }.unwrap();
    assert_eq!(
        unordered, [0u8; 64],
        "the emulator ran the producer's work eagerly"
    );
    cuda::order_after(consumer.live(), producer.live()).unwrap();
    // SAFETY: this test's own live device buffer, on a live stream.
    let ordered = unsafe { cuda::copy_to_host(buf.device_ptr(), 64, c) }.unwrap();
    assert_eq!(ordered, [3u8; 64]);
}

#[test]
fn pending_streams_are_ordered_before_the_exported_stream() {
    let Some(_ctx) = gpu("pending_streams_are_ordered_before_the_exported_stream") else {
        return;
    };
    let side = Arc::new(stream());
    let big = big();
    let bytes = Arc::new(zeroed(big));
    let m = MultiStream {
        bytes: bytes.clone(),
        streams: PendingStreams::new(stream()),
    };
    let side_value = side.stream();
    slow_fill(&bytes, 7, side_value, 20);
    m.streams.enqueued_on(side.clone());
    assert_eq!(m.streams.pending(), [side_value]);
    // Export: the exported stream now waits for the side stream's work.
    let d = m.cuda_array_interface().unwrap();
    assert!(m.streams.pending().is_empty());
    let exported = d.stream().unwrap();
    assert_ne!(exported, side_value);
    // A consumer that only synchronizes the exported stream sees the final bytes.
    // SAFETY: this test's own live device buffer, on a live stream.
    let tail = unsafe { cuda::copy_to_host(d.data.ptr + big as u64 - 64, 64, exported) }.unwrap();
    assert!(tail.iter().all(|&b| b == 7), "stale bytes: {tail:?}");
    cuda::synchronize_stream(side.live()).unwrap();
}

#[test]
fn import_waits_with_an_event_or_synchronizes() {
    let Some(_ctx) = gpu("import_waits_with_an_event_or_synchronizes") else {
        return;
    };
    let producer = stream();
    let consumer = stream();
    let (p, c) = (producer.stream(), consumer.stream());
    let big = big();
    let buf = zeroed(big);
    for (mode, value) in [(SyncMode::Enqueue, 3u8), (SyncMode::Synchronize, 9u8)] {
        slow_fill(&buf, value, p, 20);
        let opts = ImportOptions {
            // SAFETY: `consumer` lives until the end of the test, past every use of `opts`.
            consumer: unsafe { LiveStream::new(c) },
            mode,
            ..ImportOptions::default()
        };
        // SAFETY: `producer` lives until the end of the test.
        let plan = unsafe { cuda::synchronize_import(Some(p), &opts) }.unwrap();
        match mode {
            SyncMode::Enqueue => assert_eq!(
                plan,
                SyncPlan::EventWait {
                    producer: p,
                    consumer: c
                }
            ),
            SyncMode::Synchronize => assert_eq!(plan, SyncPlan::Synchronize { producer: p }),
        }
        let last = buf.device_ptr() + big as u64 - 64;
        // SAFETY: this test's own live device buffer, on a live stream.
        let tail = unsafe { cuda::copy_to_host(last, 64, c) }.unwrap();
        assert!(
            tail.iter().all(|&b| b == value),
            "{mode:?}: stale bytes {tail:?}"
        );
    }
    // SAFETY: this test's own live device buffer.
    let check = unsafe { cuda::copy_to_host(buf.device_ptr(), 16, Stream::LegacyDefault) };
    assert!(check.unwrap().iter().all(|&b| b == 9));
}

#[derive(CudaArrayInterface)]
struct OnNonBlocking {
    #[cai(data)]
    bytes: DeviceAllocation,
    #[cai(stream)]
    stream: DriverStream,
}

/// A non-blocking stream exports its handle, and does not follow
/// the legacy default stream: a read there after legacy-stream work sees the old bytes on the
/// emulator (on a GPU, a race) until it is ordered after that work.
#[test]
fn non_blocking_streams_export_and_do_not_follow_the_legacy_stream() {
    let Some(_ctx) = gpu("non_blocking_streams_export_and_do_not_follow_the_legacy_stream") else {
        return;
    };
    let a = OnNonBlocking {
        bytes: zeroed(64),
        stream: DriverStream::new(true).unwrap(),
    };
    let s = a.stream.stream();
    let d = a.cuda_array_interface().unwrap();
    assert_eq!(d.stream(), Some(s));
    assert!(matches!(s, Stream::Handle(_)));
    let ptr = a.bytes.device_ptr();
    // SAFETY: the buffer outlives the work (the streams are synchronized below).
    unsafe { cuda::memset_async(ptr, 4, 64, Stream::LegacyDefault).unwrap() };
    if emulated() {
        // SAFETY: this test's own live device buffer, on a live stream.
        let unordered = unsafe { cuda::copy_to_host(ptr, 64, s) }.unwrap();
        assert_eq!(
            unordered, [0u8; 64],
            "the non-blocking stream followed the legacy one"
        );
    }
    cuda::order_after(a.stream.live(), LiveStream::LEGACY_DEFAULT).unwrap();
    // SAFETY: this test's own live device buffer, on a live stream.
    let ordered = unsafe { cuda::copy_to_host(ptr, 64, s) }.unwrap();
    assert_eq!(ordered, [4u8; 64]);
    // An exported stream of its own kind in `PendingStreams`, kept alive by the Arc.
    let p = PendingStreams::new(DriverStream::new(true).unwrap());
    p.enqueued_on(ExportStream::from(a.stream));
    assert_eq!(p.pending(), [s]);
    p.order_pending().unwrap();
    assert!(p.pending().is_empty());
}

/// The consumer's other duty: once its work on the data is enqueued, the release makes the
/// producer's stream wait for it, so that the producer's next write cannot overtake the
/// consumer's read. The control (no release) shows the overtaking on the emulator every time;
/// on a GPU it is a race, so only the release is checked there.
#[test]
fn release_orders_the_producer_after_the_consumer() {
    let Some(_ctx) = gpu("release_orders_the_producer_after_the_consumer") else {
        return;
    };
    let (producer, consumer) = (stream(), stream());
    let (p, c) = (producer.stream(), consumer.stream());
    let n = big();
    let data = zeroed(n);
    let read = zeroed(n);
    let (data_ptr, read_ptr) = (data.device_ptr(), read.device_ptr());
    let runs: &[bool] = if emulated() { &[false, true] } else { &[true] };
    for &release in runs {
        slow_fill(&data, 5, p, 1);
        let opts = ImportOptions {
            // SAFETY: `consumer` lives until the end of the test, past every use of `opts`.
            consumer: unsafe { LiveStream::new(c) },
            ..ImportOptions::default()
        };
        // SAFETY: `producer` lives until the end of the test.
        let import = unsafe { cuda::synchronize_import(Some(p), &opts) }.unwrap();
        // The consumer's work: it reads the data on its own stream.
        // SAFETY: both buffers outlive the work (every stream is synchronized below).
        unsafe { cuda::copy_async(read_ptr, data_ptr, n, c).unwrap() };
        if release {
            assert_eq!(
                // SAFETY: `producer` lives until the end of the test.
                unsafe { cuda::release_import(import, consumer.live(), None) }.unwrap(),
                Some(ReleasePlan {
                    producer: p,
                    consumer: c
                })
            );
        }
        // The producer's next work on the data, finished before anyone looks at the read.
        slow_fill(&data, 9, p, 20);
        cuda::synchronize_stream(producer.live()).unwrap();
        // SAFETY: this test's own live device buffer, on a live stream.
        let tail = unsafe { cuda::copy_to_host(read_ptr + n as u64 - 64, 64, c) }.unwrap();
        let expected = if release { 5 } else { 9 };
        assert!(
            tail.iter().all(|&b| b == expected),
            "release {release}: the consumer read {tail:?}"
        );
    }
    // Nothing ordered on import, nothing to release: no driver call, no error.
    let none = SyncPlan::Nothing(NoSyncReason::NoStream);
    // SAFETY: the plan names no stream.
    let released = unsafe { cuda::release_import(none, consumer.live(), None) };
    assert_eq!(released.unwrap(), None);
}

/// Every device: an allocation on device 1 is made in device 1's primary context, which the
/// driver's pointer attributes name, while the thread's current context stays device 0's; an
/// ordinal past the last device is an error naming the call. (The emulated suite runs once
/// with `CUDA_EMU_DEVICES=2`; with one device this says it was skipped.)
#[test]
fn an_allocation_on_another_device_is_made_there() {
    let Some(_ctx) = gpu("an_allocation_on_another_device_is_made_there") else {
        return;
    };
    let n = cuda::device_count().unwrap();
    let past = cuda::DeviceAllocation::on_device(n, 8, false).unwrap_err();
    assert_eq!(
        (past.operation, past.code),
        (
            "cuDeviceGet",
            cai_runtime::DriverError::CUDA_ERROR_INVALID_DEVICE
        )
    );
    if n < 2 {
        eprintln!("skipped an_allocation_on_another_device_is_made_there: one device here");
        return;
    }
    let there = cuda::DeviceAllocation::on_device(1, 64, false).unwrap();
    let here = cuda::DeviceAllocation::new(64, false).unwrap();
    let device = |a: &cuda::DeviceAllocation| {
        cuda::pointer_attributes(a.device_ptr())
            .unwrap()
            .device_ordinal
    };
    assert_eq!((device(&there), device(&here)), (Some(1), Some(0)));
    // Freed in its own context, from a thread where device 0's is current.
    drop(there);
    // Code run on device 1 leaves the thread's context as it was, even if it panics.
    let before = cuda::current_device().unwrap();
    let panicked = std::panic::catch_unwind(|| {
        cuda::with_device(1, || -> Result<(), cai_runtime::DriverError> {
            panic!("in device 1")
        })
    });
    assert!(panicked.is_err());
    assert_eq!(cuda::current_device().unwrap(), before);
    let again = cuda::DeviceAllocation::on_device(1, 64, false).unwrap();
    assert_eq!(device(&again), Some(1));
}

/// Each device has its own legacy default stream: work pending on device 1's, read with device
/// 0 current on device 0's, is ordered only when the producer's `1` is resolved on the data's
/// device (`order_after_on`); `order_after` with both `1`s takes them for one stream and
/// orders nothing (stale bytes on the emulator).
#[test]
fn the_legacy_streams_of_two_devices_are_two_streams() {
    let Some(_ctx) = gpu("the_legacy_streams_of_two_devices_are_two_streams") else {
        return;
    };
    if cuda::device_count().unwrap() < 2 || !emulated() {
        eprintln!(
            "skipped the_legacy_streams_of_two_devices_are_two_streams: needs two emulated devices"
        );
        return;
    }
    let legacy = Stream::LegacyDefault;
    let data = DeviceAllocation::on_device(1, 64, false).unwrap();
    let ptr = data.device_ptr();
    let fill = |value| {
        cuda::with_device(1, || {
            // SAFETY: the allocation is this test's, on device 1 (current here), alive until
            // the end of the test, whose reads all wait for this work.
            unsafe { cuda::memset_async(ptr, value, 64, legacy) }?;
            cuda::synchronize_stream(LiveStream::LEGACY_DEFAULT)?;
            // SAFETY: as above; left pending on device 1's legacy stream.
            unsafe { cuda::memset_async(ptr, value + 1, 64, legacy) }
        })
        .unwrap()
    };
    let read = || {
        // SAFETY: the live allocation, read on device 0's legacy stream (current).
        unsafe { cuda::copy_to_host(ptr, 64, legacy) }.unwrap()
    };
    fill(1);
    let live = LiveStream::LEGACY_DEFAULT;
    cuda::order_after(live, live).unwrap();
    assert_eq!(read(), [1u8; 64], "one `1` for both: nothing ordered");
    fill(5);
    cuda::order_after_on(live, None, live, Some(1)).unwrap();
    assert_eq!(read(), [6u8; 64]);
    cuda::synchronize_stream_on(live, Some(1)).unwrap();
}
