//! What the driver tests of cai-runtime and cai-gt share: the device they run on, streams, and
//! whether the driver is the emulator. Included by path (`#[path] mod gpu;`) into each crate's
//! tests/cuda.rs (and cai-runtime's tests/cust.rs).

#![allow(dead_code)]

use cai_runtime::cuda::{self, DriverStream};

/// Device 0, its primary context made current (`Some`), or `None` when this machine has no
/// usable driver or device (the test's name printed, the reason once per test binary).
pub fn gpu(test: &str) -> Option<()> {
    match cuda::ensure_context(0) {
        Err(e) if e.is_no_device() => {
            skipped(test, &e);
            None
        }
        Err(e) => panic!("no context on device 0: {e}"),
        Ok(()) => Some(()),
    }
}

/// Says `test` was skipped for want of a device: the reason with the first, the name alone
/// after it (a run without a device skips dozens).
pub fn skipped(test: &str, why: &dyn std::fmt::Display) {
    static SAID: std::sync::Once = std::sync::Once::new();
    let mut first = false;
    // (Printed inside: other threads wait for the reason before printing their names.)
    SAID.call_once(|| {
        first = true;
        eprintln!(
            "skipped {test}, and every test below that says 'skipped': no CUDA device here ({why})"
        );
    });
    if !first {
        eprintln!("skipped {test}");
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
