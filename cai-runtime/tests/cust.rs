//! The `cust` feature: cust 0.3's buffers and streams as device memory and exported streams,
//! against the driver (cust links libcuda at build time: the stub from scripts/cuda-stub.sh
//! where CUDA is not installed; the emulated driver or a GPU at run time). Without a device the
//! tests print why they were skipped and return.

#![cfg(feature = "cust")]

use cai_runtime::cuda::{self, ExportStream, PendingStreams};
use cai_runtime::{CudaArrayInterface, LiveStream, MemoryType, RawDeviceMemory, Stream};
use cust::context::Context;
use cust::memory::{DeviceBox, DeviceBuffer, LockedBuffer, UnifiedBuffer};
use cust::stream::{Stream as CuStream, StreamFlags};

#[path = "support/gpu.rs"]
mod support;

/// Device 0's primary context through cust, or `None` (with the reason printed).
fn gpu(test: &str) -> Option<Context> {
    match cuda::init() {
        Err(e) if e.is_no_device() => {
            support::skipped(test, &e);
            None
        }
        Err(e) => panic!("cuInit failed unexpectedly: {e}"),
        Ok(()) => {
            let dev = cust::device::Device::get_device(0).expect("device 0");
            Some(Context::new(dev).expect("primary context"))
        }
    }
}

/// A new cust stream: a blocking one whatever the flags (cust 0.3 drops `NON_BLOCKING`,
/// Rust-CUDA issue 15), which is what users of cust get.
fn stream() -> CuStream {
    let s = CuStream::new(StreamFlags::NON_BLOCKING, None).expect("stream");
    assert_eq!(s.get_flags().expect("flags"), StreamFlags::DEFAULT);
    s
}

#[derive(CudaArrayInterface)]
struct Image {
    #[cai(data)]
    pixels: DeviceBuffer<f32>,
    #[cai(shape)]
    dims: [usize; 2],
    #[cai(stream)]
    stream: CuStream,
}

#[test]
fn cust_buffers_export_with_their_stream() {
    let Some(_ctx) = gpu("cust_buffers_export_with_their_stream") else {
        return;
    };
    let host: Vec<f32> = (0..6).map(|i| i as f32).collect();
    let img = Image {
        pixels: DeviceBuffer::from_slice(&host).unwrap(),
        dims: [2, 3],
        stream: stream(),
    };
    let d = img.cuda_array_interface().unwrap();
    assert_eq!(d.data.ptr, img.pixels.as_device_ptr().as_raw());
    assert_eq!((d.shape.as_slice(), d.version), (&[2, 3][..], 3));
    let s = d.stream().expect("a stream");
    assert_eq!(s.as_raw(), img.stream.as_inner() as usize as u64);
    assert!(
        s.as_raw() > 2,
        "a created stream is a handle, never 0, 1 or 2"
    );
    // SAFETY: the image's own live buffer, on its live stream.
    let back = unsafe { cuda::copy_to_host(d.data.ptr, 24, s) }.unwrap();
    assert_eq!(
        back,
        host.iter()
            .flat_map(|x| x.to_le_bytes())
            .collect::<Vec<u8>>()
    );

    // DeviceBox and UnifiedBuffer are device memory too, and part of a buffer is a
    // RawDeviceMemory (cust's DeviceSlice is not: it borrows nothing from its buffer).
    let b = DeviceBox::new(&7u64).unwrap();
    let d = cai_runtime::DescriptorBuilder::device(&b).build().unwrap();
    assert_eq!(
        (d.shape.as_slice(), d.data.ptr),
        (&[1][..], b.as_device_ptr().as_raw())
    );
    // SAFETY: items 2..5 of the image's buffer, which outlives the slice (both die below).
    let slice = unsafe {
        RawDeviceMemory::<f32>::from_raw_parts(img.pixels.as_device_ptr().as_raw() + 8, 3)
    };
    let d = cai_runtime::DescriptorBuilder::device(&slice)
        .build()
        .unwrap();
    assert_eq!(d.data.ptr, img.pixels.as_device_ptr().as_raw() + 8);
    assert_eq!(d.shape, [3]);
    let u = UnifiedBuffer::new(&1.5f64, 4).unwrap();
    let d = cai_runtime::DescriptorBuilder::device(&u).build().unwrap();
    assert_eq!(d.data.ptr, u.as_slice().as_ptr() as u64);
    let a = cuda::pointer_attributes(d.data.ptr).unwrap();
    assert_eq!(a.memory_type, MemoryType::Managed);

    // Pinned host memory is device-accessible host memory.
    let pinned = LockedBuffer::new(&0u8, 512).unwrap();
    let a = cuda::pointer_attributes(pinned.as_slice().as_ptr() as u64).unwrap();
    assert_eq!(a.memory_type, MemoryType::Host);
    assert!(a.device_accessible() && a.host_accessible());
}

/// A cust stream in `PendingStreams`, kept alive by its `Arc` until ordered.
#[test]
fn cust_streams_are_pending_streams() {
    let Some(_ctx) = gpu("cust_streams_are_pending_streams") else {
        return;
    };
    let side = std::sync::Arc::new(stream());
    let p = PendingStreams::new(ExportStream::LegacyDefault);
    p.enqueued_on(ExportStream::from(side.clone()));
    let side_value = cuda::from_raw_handle(side.as_inner().cast());
    assert_eq!(p.pending(), [side_value]);
    p.order_pending().unwrap();
    assert!(p.pending().is_empty());
    assert_eq!(p.exported().stream(), Stream::LegacyDefault);
}

/// Mixed backends: a cust buffer exported with a cudarc stream, and a cudarc slice with a cust
/// stream; both export the handle of the stream they hold, over the same primary context.
#[cfg(feature = "cudarc")]
#[test]
fn cust_memory_with_a_cudarc_stream_and_the_other_way_round() {
    use cudarc::driver::{CudaContext, CudaSlice};

    #[derive(CudaArrayInterface)]
    struct CustData {
        #[cai(data)]
        values: DeviceBuffer<u8>,
        #[cai(stream)]
        stream: std::sync::Arc<cudarc::driver::CudaStream>,
    }

    #[derive(CudaArrayInterface)]
    struct CudarcData {
        #[cai(data)]
        values: CudaSlice<u8>,
        #[cai(stream)]
        stream: CuStream,
    }

    let Some(_ctx) = gpu("cust_memory_with_a_cudarc_stream_and_the_other_way_round") else {
        return;
    };
    let ctx = CudaContext::new(0).unwrap();
    let cudarc_stream = ctx.new_stream().unwrap();
    let a = CustData {
        values: DeviceBuffer::from_slice(&[1u8, 2, 3]).unwrap(),
        stream: cudarc_stream.clone(),
    };
    // cust copied on the legacy default stream, which the (non-blocking) cudarc stream does
    // not follow: the producer finishes that work before exporting another stream.
    cuda::synchronize_stream(LiveStream::LEGACY_DEFAULT).unwrap();
    let d = a.cuda_array_interface().unwrap();
    assert_eq!(
        d.stream().unwrap().as_raw(),
        cudarc_stream.cu_stream() as usize as u64
    );
    // SAFETY: the struct's own live buffer, on its live stream.
    let back = unsafe { cuda::copy_to_host(d.data.ptr, 3, d.stream().unwrap()) }.unwrap();
    assert_eq!(back, [1, 2, 3]);
    let b = CudarcData {
        values: cudarc_stream.clone_htod(&[4u8, 5]).unwrap(),
        stream: stream(),
    };
    let d = b.cuda_array_interface().unwrap();
    assert_eq!(
        d.stream().unwrap().as_raw(),
        b.stream.as_inner() as usize as u64
    );
    // SAFETY: as above (the export ordered the cust stream after the slice's own).
    let back = unsafe { cuda::copy_to_host(d.data.ptr, 2, d.stream().unwrap()) }.unwrap();
    assert_eq!(back, [4, 5]);
}
