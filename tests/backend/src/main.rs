//! `cargo run -p cai-outside-backend`: a memory backend that cai does not know, written with
//! cai-runtime's public API alone, as a CUDA crate outside this repository would write it.
//!
//! - `DevBuf` (device memory from the driver) is `DeviceMemory`, `OwnStream` (a stream it
//!   creates) is `AsStream` and vouches for its handle (`LiveStream::new`, its `unsafe` step).
//! - A struct holding both derives `CudaArrayInterface`: exported with its stream, which cai
//!   may hand to the driver (`ExportStream::owned` takes it; a bare number it refuses).
//! - Its dict imported back for work on the legacy default stream: the import orders that
//!   stream after the backend's (an event wait), so a copy sees the bytes the backend's
//!   stream wrote. On the emulated driver, whose streams run work only when something must
//!   observe it, a missing wait would read zeros.
//! - A backend's own errors reach users as `ViewError::Backend`, their source kept.

use std::sync::Arc;

use cai_runtime::cuda::{ExportStream, PendingStreams, from_raw_handle};
use cai_runtime::python::{ForeignDeviceArray, ViewError, cuda_array_interface};
use cai_runtime::sync::ImportOptions;
use cai_runtime::{AsStream, CudaArrayInterface, DeviceMemory, LiveStream, Stream, cuda};
use cudarc::driver::{result, sys};
use pyo3::prelude::*;

/// `len` f32s of device memory, freed on drop.
struct DevBuf {
    ptr: sys::CUdeviceptr,
    len: usize,
}

impl DevBuf {
    fn new(len: usize) -> Result<Self, result::DriverError> {
        // SAFETY: a plain allocation in the current context, freed once in `drop`.
        let ptr = unsafe { result::malloc_sync(len * 4) }?;
        Ok(DevBuf { ptr, len })
    }
}

impl Drop for DevBuf {
    fn drop(&mut self) {
        // SAFETY: ours, freed once; cuMemFree waits for work on it.
        let _ = unsafe { result::free_sync(self.ptr) };
    }
}

// SAFETY: `len` f32s at `ptr`, device memory owned by the value until it is dropped.
unsafe impl DeviceMemory for DevBuf {
    type Elem = f32;
    fn device_ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
}

/// A non-blocking stream, destroyed on drop.
struct OwnStream(sys::CUstream);

// SAFETY: a driver stream handle may be used from any thread.
unsafe impl Send for OwnStream {}
// SAFETY: as above; nothing here mutates it.
unsafe impl Sync for OwnStream {}

impl Drop for OwnStream {
    fn drop(&mut self) {
        // SAFETY: ours, destroyed once; queued work completes first.
        let _ = unsafe { result::stream::destroy(self.0) };
    }
}

impl AsStream for OwnStream {
    fn cai_stream(&self) -> Option<Stream> {
        Some(from_raw_handle(self.0.cast()))
    }
    fn live_stream(&self) -> Option<LiveStream<'_>> {
        // SAFETY: the stream is destroyed only when `self` is dropped, after the borrow.
        Some(unsafe { LiveStream::new(from_raw_handle(self.0.cast())) })
    }
}

/// Device memory with the stream its work is on.
#[derive(CudaArrayInterface)]
struct Signal {
    #[cai(data)]
    samples: DevBuf,
    #[cai(stream)]
    stream: Arc<OwnStream>,
}

/// A backend's own error.
#[derive(Debug)]
struct NoKernels;

impl std::fmt::Display for NoKernels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("this backend runs no kernels")
    }
}

impl std::error::Error for NoKernels {}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if let Err(e) = cuda::init() {
        println!("skipped: no CUDA device here ({e})");
        return Ok(());
    }
    result::init()?;
    let device = result::device::get(0)?;
    // SAFETY: the primary context of device 0, retained for the process, made current here.
    unsafe { result::ctx::set_current(result::primary_ctx::retain(device)?) }?;

    let stream = Arc::new(OwnStream(result::stream::create(
        result::stream::StreamKind::NonBlocking,
    )?));
    let signal = Signal {
        samples: DevBuf::new(8)?,
        stream: stream.clone(),
    };
    let host: Vec<f32> = (0..8).map(|i| i as f32 + 0.5).collect();
    // SAFETY: 8 f32s into the 8 allocated, on our stream; `host` outlives the copy (the
    // import below waits for the stream before `main` returns).
    unsafe { result::memcpy_htod_async(signal.samples.ptr, &host, stream.0) }?;

    // The backend's stream is an exported stream cai may order work after; a number is not.
    let pending = PendingStreams::new(ExportStream::owned(stream.clone()).expect("owns a stream"));
    assert_eq!(
        pending.cai_stream(),
        stream.cai_stream(),
        "the backend's stream is exported"
    );
    assert!(ExportStream::owned(Arc::new(Stream::from_raw(0x1234)?)).is_none());

    let e = ViewError::backend("outside", NoKernels);
    assert_eq!(e.to_string(), "outside: this backend runs no kernels");
    assert!(std::error::Error::source(&e).is_some());

    Python::attach(|py| -> PyResult<()> {
        let dict = cuda_array_interface(py, &signal, None)?;
        let exported = dict
            .get_item("stream")?
            .map(|s| s.extract::<u64>())
            .transpose()?;
        assert_eq!(exported, stream.cai_stream().map(|s| s.as_raw()));
        println!("__cuda_array_interface__ = {dict}");

        // SAFETY: the dict describes `signal`'s memory, which outlives the import.
        let import = unsafe {
            ForeignDeviceArray::from_interface_with(&dict, None, &ImportOptions::default())?
        };
        let plan = format!("{:?}", import.sync_plan());
        let bytes = import.copy_to_host()?;
        let read: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes(b.try_into().expect("4 bytes")))
            .collect();
        println!("imported with plan {plan}, read back {read:?}");
        assert_eq!(read, host, "the import waited for the backend's stream");
        Ok(())
    })?;
    Ok(())
}
