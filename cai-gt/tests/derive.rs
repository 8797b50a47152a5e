//! `#[derive(GtDataInterface)]`: host and/or device buffers with shared layout keys, dims,
//! halo and hooks.

use std::cell::Cell;

use cai_gt::{GtDataInterface, GtDevice, GtError, GtHooks, HookError};
use cai_runtime::{RawDeviceMemory, Stream};

fn dev(len: usize) -> RawDeviceMemory<f64> {
    // SAFETY: never dereferenced; the tests only read descriptors.
    unsafe { RawDeviceMemory::from_raw_parts(0x7f00_0000_0000, len) }
}

/// A mirrored field: the same F-ordered layout on both sides.
#[derive(GtDataInterface)]
#[cai(shape = [self.ni, self.nj], order = "F", dims = "IJ", halo = [(1, 1), (0, 2)], hooks)]
struct Mirrored {
    #[cai(host)]
    host: Vec<f64>,
    #[cai(gpu)]
    device: RawDeviceMemory<f64>,
    #[cai(stream)]
    stream: Option<Stream>,
    ni: usize,
    nj: usize,
    acquired: Cell<Vec<GtDevice>>,
}

impl GtHooks for Mirrored {
    fn acquire(&self, device: GtDevice) -> Result<(), HookError> {
        let mut seen = self.acquired.take();
        seen.push(device);
        self.acquired.set(seen);
        Ok(())
    }
}

#[test]
fn mirrored_buffers_share_layout_dims_and_halo() {
    let m = Mirrored {
        host: vec![0.0; 12],
        device: dev(12),
        stream: Some(Stream::PerThreadDefault),
        ni: 3,
        nj: 4,
        acquired: Cell::new(Vec::new()),
    };
    let d = m.gt_data_interface().unwrap();
    let (h, g) = (d.host.as_ref().unwrap(), d.gpu.as_ref().unwrap());
    assert_eq!(
        (h.shape.as_slice(), g.shape.as_slice()),
        (&[3, 4][..], &[3, 4][..])
    );
    assert_eq!(h.strides, Some(vec![8, 24]));
    assert_eq!(g.strides, h.strides);
    assert_eq!(h.data.ptr, m.host.as_ptr() as u64);
    assert_eq!(g.data.ptr, 0x7f00_0000_0000);
    assert_eq!(g.stream, Some(Stream::PerThreadDefault));
    assert_eq!(d.dims, Some(vec!["I".to_string(), "J".to_string()]));
    assert_eq!(d.halo, Some(vec![(1, 1), (0, 2)]));
    let hooks = m.gt_hooks().expect("#[cai(hooks)]");
    hooks.acquire(GtDevice::Gpu).unwrap();
    hooks.touch(GtDevice::Gpu).unwrap(); // default: no action
    assert_eq!(m.acquired.take(), [GtDevice::Gpu]);
}

/// Host only, dims and halo from fields.
#[derive(GtDataInterface)]
struct HostOnly {
    #[cai(host)]
    values: Vec<f32>,
    #[cai(shape)]
    shape: (usize, usize, usize),
    #[cai(dims)]
    dims: Vec<String>,
    #[cai(halo)]
    halo: Vec<usize>,
}

#[test]
fn host_only_with_field_dims_and_halo() {
    let h = HostOnly {
        values: vec![1.0; 24],
        shape: (2, 3, 4),
        dims: vec!["K".into(), "J".into(), "I".into()],
        halo: vec![0, 1, 2],
    };
    let d = h.gt_data_interface().unwrap();
    assert!(d.gpu.is_none());
    assert_eq!(d.host.as_ref().unwrap().typestr.to_string(), "<f4");
    assert_eq!(d.halo, Some(vec![(0, 0), (1, 1), (2, 2)]));
    assert!(h.gt_hooks().is_none());

    // Bad runtime values are typed errors naming the parameter, never panics.
    let wide = HostOnly {
        halo: vec![0, 2, 0],
        ..h
    };
    let e = wide.gt_data_interface().unwrap_err();
    assert!(matches!(e, GtError::Param(_)), "{e}");
    assert_eq!(
        e.to_string(),
        "halo = (2, 2) on dimension 1 needs 4 points but the dimension has 3"
    );
    let short = HostOnly {
        values: vec![1.0; 4],
        dims: vec!["I".into(), "J".into(), "K".into()],
        halo: vec![0, 0, 0],
        shape: (2, 3, 4),
    };
    assert!(matches!(
        short.gt_data_interface().unwrap_err(),
        GtError::Descriptor(_)
    ));
}

/// Device only, generic over the buffer.
#[derive(GtDataInterface)]
#[cai(dims = ["I"])]
struct DeviceOnly<M> {
    #[cai(gpu)]
    buf: M,
}

#[test]
fn device_only_generic() {
    let d = DeviceOnly { buf: dev(5) }.gt_data_interface().unwrap();
    assert!(d.host.is_none());
    assert_eq!(d.gpu.unwrap().shape, [5]);
}
