//! The producer option to always export `stream: None` (spec: "Producers may provide a
//! configuration option to always set stream to None"; off by default). A process-wide switch,
//! so it is tested in its own test binary (its own process), in one test, in order.

use cai_gt::{
    Buffers, DeviceBufferHandle, Dim, ElementType, Managed, PerDim, Side, Storage, StorageDevice,
};
use cai_runtime::Layout;
use cai_runtime::TypeStr;
use cai_runtime::sync::{
    EXPORT_STREAM_NONE_ENV, export_stream_none, ignore_streams, set_export_stream_none,
    set_ignore_streams,
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

/// What a storage wrapping device memory on a stream exports (storages build their
/// descriptors themselves, not through the derive's builder).
fn exported_by_storage() -> Option<Stream> {
    let buffers = Buffers {
        items: None,
        host: None,
        device: Some(Side {
            buffer: DeviceBufferHandle {
                ptr: 0x1000,
                len: 32,
                keep: Box::new(()),
            },
            origin: 0,
        }),
        span: 32,
        sync: None,
        device_kind: StorageDevice::Gpu,
        managed: Managed::None,
        readonly: false,
        stream: Some(Stream::PerThreadDefault),
    };
    let element = ElementType::new(TypeStr::parse("<f8").unwrap(), None).unwrap();
    let layout = Layout::c_contiguous(&[4], 8).unwrap();
    let (halo, dims, order) = (
        PerDim::from_slice(&[(0, 0)]),
        PerDim::from_slice(&[Dim::I]),
        PerDim::from_slice(&[0]),
    );
    let s = Storage::wrap(buffers, layout, element, halo, dims, order).unwrap();
    let d = s.device_descriptor().expect("a device side").unwrap();
    assert_eq!(d.data.ptr, 0x1000);
    d.stream()
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
    assert_eq!((exported(), exported_by_storage()), (None, None));
    // The API overrides the environment, both ways.
    set_export_stream_none(false);
    let stream = Some(Stream::PerThreadDefault);
    assert_eq!((exported(), exported_by_storage()), (stream, stream));
    set_export_stream_none(true);
    assert_eq!((exported(), exported_by_storage()), (None, None));
    set_export_stream_none(false);
    set_ignore_streams(true);
    assert!(ignore_streams());
    set_ignore_streams(false);
    assert!(!ignore_streams());
}
