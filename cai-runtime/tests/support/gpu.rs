//! What the driver tests of cai-runtime and cai-gt share: the device they run on, and streams.
//! Included by path (`#[path] mod gpu;`) into each crate's tests/cuda.rs.

use cai_runtime::cuda;
use cust::context::Context;
use cust::stream::{Stream as CuStream, StreamFlags};

/// The primary context of device 0, or `None` (with the reason printed) when this machine has
/// no usable driver or device.
pub fn gpu(test: &str) -> Option<Context> {
    match cuda::init() {
        Err(e) if e.is_no_device() => {
            eprintln!("skipped {test}: no CUDA device here ({e})");
            None
        }
        Err(e) => panic!("cuInit failed unexpectedly: {e}"),
        Ok(()) => {
            let dev = cust::device::Device::get_device(0).expect("device 0");
            Some(Context::new(dev).expect("primary context"))
        }
    }
}

/// A new cust stream: a blocking one whatever the flags (cust 0.3 drops `NON_BLOCKING`), which
/// is what users of cust get. Two of them do not wait for each other.
pub fn stream() -> CuStream {
    let s = CuStream::new(StreamFlags::NON_BLOCKING, None).expect("stream");
    assert_eq!(s.get_flags().expect("flags"), StreamFlags::DEFAULT);
    s
}
