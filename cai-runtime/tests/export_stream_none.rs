//! The producer option to always export `stream: None` (spec: "Producers may provide a
//! configuration option to always set stream to None"; off by default). A process-wide switch,
//! so it is tested in its own test binary (its own process), in one test, in order.

use cai_runtime::sync::{
    EXPORT_STREAM_NONE_ENV, export_stream_none, exported_stream, ignore_streams,
    set_export_stream_none, set_ignore_streams,
};
use cai_runtime::{CudaArrayInterface, RawDeviceMemory, Stream};

#[derive(CudaArrayInterface)]
struct OnStream {
    #[cai(data)]
    buf: RawDeviceMemory<u8>,
    #[cai(stream)]
    stream: Stream,
}

fn exported() -> Option<Stream> {
    // SAFETY: never dereferenced.
    let buf = unsafe { RawDeviceMemory::from_raw_parts(0x1000, 4) };
    let a = OnStream {
        buf,
        stream: Stream::PerThreadDefault,
    };
    a.cuda_array_interface().unwrap().stream()
}

#[test]
fn stream_none_option_environment_then_api() {
    // Off by default...
    assert!(std::env::var_os(EXPORT_STREAM_NONE_ENV).is_none());
    assert!(!ignore_streams(), "consumers honour streams by default");
    // ...but the environment is read on first use, so set it before anything exports.
    // SAFETY: this test binary runs this one test; no other thread reads the environment.
    unsafe { std::env::set_var(EXPORT_STREAM_NONE_ENV, "1") };
    assert!(export_stream_none());
    assert_eq!(exported(), None);
    // The API overrides the environment, both ways.
    set_export_stream_none(false);
    let stream = Some(Stream::PerThreadDefault);
    assert_eq!((exported(), exported_stream(stream)), (stream, stream));
    set_export_stream_none(true);
    assert_eq!((exported(), exported_stream(stream)), (None, None));
    set_export_stream_none(false);
    set_ignore_streams(true);
    assert!(ignore_streams());
    set_ignore_streams(false);
    assert!(!ignore_streams());
}
