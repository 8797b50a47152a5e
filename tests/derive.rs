//! The derives as a user's crate uses them: every attribute form, generic and tuple structs,
//! structured elements.

use cai_runtime::{
    ArrayInterface, CudaArrayInterface, DescriptorError, DeviceMemory, Element, RawDeviceMemory,
    Stream,
};
use num_complex::Complex;

const BASE: u64 = 0x7f00_0000_0000;

fn dev<T: Element>(len: usize) -> RawDeviceMemory<T> {
    // SAFETY: never dereferenced; the tests only compute descriptors.
    unsafe { RawDeviceMemory::from_raw_parts(BASE, len) }
}

#[derive(CudaArrayInterface)]
struct Vector {
    #[cai(data)]
    buf: RawDeviceMemory<f64>,
}

#[test]
fn default_shape_covers_the_buffer() {
    let d = Vector { buf: dev(5) }.cuda_array_interface().unwrap();
    assert_eq!(d.shape, [5]);
    assert_eq!(d.typestr.to_string(), "<f8");
    assert_eq!(d.version, 3);
    assert_eq!(d.strides, None);
    assert_eq!(d.stream(), None);
    assert_eq!(d.data.ptr, BASE);
    assert!(!d.data.readonly);
    assert!(d.to_string().contains("'stream': None"));
}

#[derive(CudaArrayInterface)]
#[cai(order = "F", version = 3)]
struct Matrix {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
    #[cai(shape)]
    dims: (usize, usize),
    #[cai(stream)]
    stream: Option<Stream>,
    #[cai(readonly)]
    frozen: bool,
}

#[test]
fn field_shape_f_order_stream_and_readonly_field() {
    let m = Matrix {
        buf: dev(6),
        dims: (2, 3),
        stream: Some(Stream::from_raw(0xabc0).unwrap()),
        frozen: true,
    };
    let d = m.cuda_array_interface().unwrap();
    assert_eq!(d.shape, [2, 3]);
    assert_eq!(d.strides, Some(vec![4, 8]));
    assert_eq!(d.stream().map(Stream::as_raw), Some(0xabc0));
    assert!(d.data.readonly);
}

#[derive(CudaArrayInterface)]
#[cai(shape = [self.rows, self.cols], strides = self.byte_strides(), readonly)]
struct Strided {
    #[cai(data)]
    buf: RawDeviceMemory<u16>,
    rows: usize,
    cols: usize,
    pitch: isize,
}

impl Strided {
    fn byte_strides(&self) -> [isize; 2] {
        [self.pitch, 2]
    }
}

#[test]
fn expression_shape_and_strides() {
    let s = Strided {
        buf: dev(16),
        rows: 3,
        cols: 4,
        pitch: 10,
    };
    let d = s.cuda_array_interface().unwrap();
    assert_eq!(d.shape, [3, 4]);
    assert_eq!(d.strides, Some(vec![10, 2]));
    assert!(d.data.readonly);
    // A pitch that leaves the buffer is an error naming the shape and strides.
    let bad = Strided { pitch: 14, ..s };
    let e = bad.cuda_array_interface().unwrap_err();
    assert!(matches!(e, DescriptorError::OutOfBounds { .. }), "{e}");
    assert_eq!(e.key(), "shape");
}

#[derive(CudaArrayInterface)]
#[cai(version = 2)]
struct Legacy(#[cai(data)] RawDeviceMemory<i32>, #[cai(shape)] [usize; 3]);

#[test]
fn tuple_struct_version_2_has_no_stream_key() {
    let d = Legacy(dev(24), [2, 3, 4]).cuda_array_interface().unwrap();
    assert_eq!(d.version, 2);
    assert_eq!(d.shape, [2, 3, 4]);
    assert!(!d.to_string().contains("stream"));
}

#[derive(CudaArrayInterface)]
struct Generic<T: Element> {
    #[cai(data)]
    buf: RawDeviceMemory<T>,
    #[cai(shape)]
    shape: Vec<usize>,
}

#[test]
fn generic_structs() {
    let g = Generic::<Complex<f32>> {
        buf: dev(4),
        shape: vec![2, 2],
    };
    assert_eq!(g.cuda_array_interface().unwrap().typestr.to_string(), "<c8");
    let h = Generic::<half::f16> {
        buf: dev(4),
        shape: vec![4],
    };
    assert_eq!(h.cuda_array_interface().unwrap().typestr.to_string(), "<f2");
}

#[derive(CudaArrayInterface)]
struct Bytes {
    #[cai(data, element = f32)]
    raw: RawDeviceMemory<u8>,
}

#[test]
fn element_override_reinterprets_bytes() {
    let d = Bytes { raw: dev(16) }.cuda_array_interface().unwrap();
    assert_eq!(
        (d.shape.as_slice(), d.typestr.to_string()),
        (&[4usize][..], "<f4".to_owned())
    );
    let e = Bytes { raw: dev(15) }.cuda_array_interface().unwrap_err();
    assert!(
        matches!(e, DescriptorError::BufferNotWhole { byte_len: 15, .. }),
        "{e}"
    );
}

#[derive(CudaArrayInterface)]
struct Masked {
    #[cai(data)]
    values: RawDeviceMemory<f32>,
    #[cai(mask)]
    valid: Option<Vector8>,
}

#[derive(CudaArrayInterface)]
struct Vector8 {
    #[cai(data)]
    flags: RawDeviceMemory<bool>,
}

#[test]
fn mask_is_a_nested_descriptor() {
    let m = Masked {
        values: dev(8),
        valid: Some(Vector8 { flags: dev(8) }),
    };
    let d = m.cuda_array_interface().unwrap();
    assert_eq!(d.mask.as_ref().unwrap().typestr.to_string(), "|b1");
    let none = Masked {
        values: dev(8),
        valid: None,
    };
    assert!(none.cuda_array_interface().unwrap().mask.is_none());
    let wrong = Masked {
        values: dev(8),
        valid: Some(Vector8 { flags: dev(3) }),
    };
    assert_eq!(wrong.cuda_array_interface().unwrap_err().key(), "mask");
}

#[derive(ArrayInterface)]
#[cai(shape = [2, self.buf.len() / 2])]
struct Host {
    #[cai(data)]
    buf: Vec<i16>,
}

#[test]
fn host_descriptor_points_at_the_vec() {
    let h = Host {
        buf: vec![1, 2, 3, 4, 5, 6],
    };
    let d = h.array_interface().unwrap();
    assert_eq!(d.data.ptr, h.buf.as_ptr() as u64);
    assert_eq!(d.shape, [2, 3]);
    assert_eq!(d.version, 3);
    assert!(!d.to_string().contains("stream"));
}

#[derive(ArrayInterface)]
struct Borrowed<'a> {
    #[cai(data)]
    view: &'a [u8],
}

#[test]
fn shared_slices_are_exported_read_only() {
    let v = [1u8, 2, 3];
    let d = Borrowed { view: &v }.array_interface().unwrap();
    assert!(d.data.readonly);
}

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Particle {
    id: u8,
    pos: [f64; 3],
    flags: [[u16; 2]; 3],
}

#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Pair(f32, Particle);

#[derive(ArrayInterface)]
struct Particles {
    #[cai(data)]
    items: Vec<Particle>,
}

#[test]
fn structured_elements() {
    let dt = Particle::DTYPE;
    assert_eq!(dt.typestr().to_string(), "|V48");
    assert_eq!(
        dt.descr().to_string(),
        "[('id', '|u1'), ('', '|V7'), ('pos', '<f8', (3,)), ('flags', '<u2', (3, 2)), ('', '|V4')]"
    );
    // NumPy would read an unnamed gap at index 1 as a second field 'f1'.
    assert_eq!(
        Pair::DTYPE.descr().to_string(),
        "[('f0', '<f4'), ('_pad1', '|V4'), ('f1', [('id', '|u1'), ('', '|V7'), ('pos', '<f8', (3,)), ('flags', '<u2', (3, 2)), ('', '|V4')])]"
    );
    let p = Particle {
        id: 1,
        pos: [0.0; 3],
        flags: [[0; 2]; 3],
    };
    let d = Particles { items: vec![p; 3] }.array_interface().unwrap();
    assert_eq!(d.typestr.to_string(), "|V48");
    assert_eq!(d.descr.unwrap(), Particle::DTYPE.descr());
}

mod renamed {
    // A crate re-exporting cai-runtime under another path, as `#[serde(crate = "...")]`.
    pub mod reexport {
        pub use cai_runtime as cai;
    }
    use reexport::cai::{CudaArrayInterface, RawDeviceMemory};

    #[derive(CudaArrayInterface)]
    #[cai(crate = "self::reexport::cai")]
    pub struct Renamed {
        #[cai(data)]
        pub buf: RawDeviceMemory<u32>,
    }

    #[test]
    fn crate_path_override() {
        let r = Renamed { buf: super::dev(2) };
        assert_eq!(r.cuda_array_interface().unwrap().shape, [2]);
    }
}

#[derive(CudaArrayInterface)]
#[cai(shape = self.buf.len(), strides = [-4isize], offset = 4 * (self.buf.len() - 1))]
struct Reversed {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
}

#[test]
fn offset_points_inside_the_buffer_for_negative_strides() {
    let d = Reversed { buf: dev(5) }.cuda_array_interface().unwrap();
    assert_eq!(d.data.ptr, BASE + 16);
    assert_eq!(d.strides, Some(vec![-4]));
    d.check_within(BASE, 20).unwrap();
}

/// Every optional field form at once: an offset field, strides that may be absent, a
/// read-only flag that is off, and a mask that is always there.
#[derive(CudaArrayInterface)]
#[cai(shape = [2, 2])]
struct Window {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
    #[cai(offset)]
    skip: usize,
    #[cai(strides)]
    pitch: Option<Vec<isize>>,
    #[cai(readonly)]
    frozen: bool,
    #[cai(mask)]
    valid: Flags2x2,
}

#[derive(CudaArrayInterface)]
#[cai(shape = [2, 2])]
struct Flags2x2 {
    #[cai(data)]
    flags: RawDeviceMemory<bool>,
}

#[test]
fn offset_field_optional_strides_flag_and_plain_mask() {
    let w = |pitch: Option<Vec<isize>>| Window {
        buf: dev(12),
        skip: 8,
        pitch,
        frozen: false,
        valid: Flags2x2 { flags: dev(4) },
    };
    let d = w(None).cuda_array_interface().unwrap();
    assert_eq!((d.data.ptr, d.strides.clone()), (BASE + 8, None));
    assert!(!d.data.readonly);
    assert_eq!(d.mask.as_ref().unwrap().shape, [2, 2]);
    // Rows of 4 items, 2 used: the window of a 3x4 matrix at [0:2, 2:4].
    let d = w(Some(vec![16, 4])).cuda_array_interface().unwrap();
    assert_eq!(d.strides, Some(vec![16, 4]));
    // A pitch of 10 items leaves the 12-item buffer: bytes [8, 52) of 48.
    assert!(w(Some(vec![40, 4])).cuda_array_interface().is_err());
}

#[derive(ArrayInterface)]
struct HostFlags {
    #[cai(data)]
    flags: Vec<bool>,
}

#[derive(ArrayInterface)]
struct HostMasked {
    #[cai(data)]
    values: Vec<f32>,
    #[cai(mask)]
    valid: HostFlags,
}

#[derive(ArrayInterface)]
struct MaybeMasked {
    #[cai(data)]
    values: Vec<f32>,
    #[cai(mask)]
    valid: Option<HostFlags>,
}

#[test]
fn host_masks_plain_and_optional() {
    let flags = || HostFlags {
        flags: vec![true, false, true],
    };
    let d = HostMasked {
        values: vec![1.0, 2.0, 3.0],
        valid: flags(),
    }
    .array_interface()
    .unwrap();
    assert_eq!(d.mask.as_ref().unwrap().typestr.to_string(), "|b1");
    let some = MaybeMasked {
        values: vec![1.0, 2.0, 3.0],
        valid: Some(flags()),
    };
    assert_eq!(some.array_interface().unwrap().mask.unwrap().shape, [3]);
    let none = MaybeMasked {
        values: vec![1.0],
        valid: None,
    };
    assert!(none.array_interface().unwrap().mask.is_none());
}

/// Generic code holding a reference exports what the value itself exports, by both routes
/// (the descriptor, and the builder the Python export memo keeps).
#[test]
fn references_export_like_their_values() {
    fn device<T: CudaArrayInterface>(t: T) -> (String, Option<String>) {
        let built = t
            .__cai_builder()
            .map(|b| b.unwrap().build().unwrap().to_string());
        (t.cuda_array_interface().unwrap().to_string(), built)
    }
    fn host<T: ArrayInterface>(t: T) -> (String, Option<String>) {
        let built = t
            .__cai_builder()
            .map(|b| b.unwrap().build().unwrap().to_string());
        (t.array_interface().unwrap().to_string(), built)
    }
    let v = Vector { buf: dev(5) };
    let direct = v.cuda_array_interface().unwrap().to_string();
    assert_eq!(device(&v), (direct.clone(), Some(direct)));
    let h = Host {
        buf: vec![1, 2, 3, 4],
    };
    let direct = h.array_interface().unwrap().to_string();
    assert_eq!(host(&h), (direct.clone(), Some(direct)));
}

/// A user's own device buffer type implements only what `DeviceMemory` requires; the rest
/// (emptiness, writability) has defaults. Same for host memory.
struct MyDeviceBuffer {
    ptr: u64,
    items: usize,
}

// SAFETY: never dereferenced; the test only computes descriptors.
unsafe impl DeviceMemory for MyDeviceBuffer {
    type Elem = u32;
    fn device_ptr(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.items
    }
}

struct MyHostBuffer(Vec<u32>);

// SAFETY: the Vec's pointer and length, valid while `self` lives.
unsafe impl cai_runtime::HostMemory for MyHostBuffer {
    type Elem = u32;
    fn host_ptr(&self) -> *const u32 {
        self.0.as_ptr()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

#[derive(CudaArrayInterface)]
#[cai(offset = &self.skip)]
struct Mine {
    #[cai(data)]
    buf: MyDeviceBuffer,
    skip: usize,
}

#[derive(ArrayInterface)]
struct MineOnHost {
    #[cai(data)]
    buf: MyHostBuffer,
}

#[test]
fn user_memory_types_get_the_defaults() {
    let buf = MyDeviceBuffer {
        ptr: BASE,
        items: 4,
    };
    assert!(buf.is_writable() && !buf.is_empty());
    let d = Mine { buf, skip: 4 }.cuda_array_interface().unwrap();
    assert_eq!((d.data.ptr, d.shape.as_slice()), (BASE + 4, &[3usize][..]));
    assert!(!d.data.readonly);
    let h = MineOnHost {
        buf: MyHostBuffer(vec![1, 2]),
    };
    assert!(cai_runtime::HostMemory::is_writable(&h.buf));
    assert!(!h.array_interface().unwrap().data.readonly);
    // References forward: the expressions `offset = &...` and `readonly = ...` may borrow.
    assert!(cai_runtime::AsReadonly::is_readonly(&&true));
    assert!(!cai_runtime::AsReadonly::is_readonly(&&false));
}
