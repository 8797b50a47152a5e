//! What the driver tests of cai-runtime and cai-gt share: the device they run on, streams, and
//! whether the driver is the emulator. Included by path (`#[path] mod gpu;`) into each crate's
//! tests/cuda.rs (and cai-runtime's tests/cust.rs).

#![allow(dead_code)]

use cai_runtime::cuda::{self, DriverStream};

/// Device 0, its primary context made current (`Some`), or `None` (with the reason printed)
/// when this machine has no usable driver or device.
pub fn gpu(test: &str) -> Option<()> {
    match cuda::ensure_context(0) {
        Err(e) if e.is_no_device() => {
            eprintln!("skipped {test}: no CUDA device here ({e})");
            None
        }
        Err(e) => panic!("no context on device 0: {e}"),
        Ok(()) => Some(()),
    }
}

/// A new blocking stream of the current context: two of them do not wait for each other.
pub fn stream() -> DriverStream {
    DriverStream::new(false).expect("stream")
}

/// Whether the driver is the emulator (tests/cuda-emu), which names its device so.
pub fn emulated() -> bool {
    cuda::device_name(0).is_ok_and(|name| name.contains("emulator"))
}
