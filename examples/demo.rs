//! `cargo run --example demo`: derived structs and the descriptors they export.
//!
//! Host part (any machine): a struct holding a `Vec<f32>` derives `ArrayInterface`; the demo
//! prints its `__array_interface__` and then reads every item back through nothing but the
//! descriptor's pointer and strides, as NumPy would, to show the descriptor is right.
//! Device part: with a CUDA driver (loaded at run time; feature `cuda`), a struct holding a
//! driver allocation and its stream derives `CudaArrayInterface`: the demo copies a matrix to
//! the device, prints the descriptor and reads the items back through it. Without a driver it
//! says why, and shows the descriptor a struct over a raw device address would export.

use cai_runtime::cuda::{self, DeviceAllocation, DriverStream};
use cai_runtime::{
    ArrayInterface, CudaArrayInterface, Element, HostArrayDescriptor, RawDeviceMemory, Stream,
};

/// A matrix in host memory, exported in either order.
#[derive(ArrayInterface)]
#[cai(shape = [self.rows, self.cols], strides = self.strides())]
struct HostMatrix {
    #[cai(data)]
    values: Vec<f32>,
    rows: usize,
    cols: usize,
    column_major: bool,
}

impl HostMatrix {
    fn new(rows: usize, cols: usize, column_major: bool) -> Self {
        let mut values = vec![0.0; rows * cols];
        for i in 0..rows {
            for j in 0..cols {
                let k = if column_major {
                    j * rows + i
                } else {
                    i * cols + j
                };
                values[k] = (10 * i + j) as f32;
            }
        }
        HostMatrix {
            values,
            rows,
            cols,
            column_major,
        }
    }

    /// `None` (C order) or explicit F-order byte strides.
    fn strides(&self) -> Option<[isize; 2]> {
        self.column_major.then(|| [4, 4 * self.rows as isize])
    }
}

/// A structured element: NumPy sees `[('id', '<u4'), ('', '|V4'), ('pos', '<f8', (3,))]`.
#[derive(Clone, Copy, Element)]
#[repr(C)]
struct Particle {
    id: u32,
    pos: [f64; 3],
}

#[derive(ArrayInterface)]
struct Particles {
    #[cai(data)]
    items: Vec<Particle>,
}

/// A device-side struct: data, shape, and the stream its last kernel ran on.
#[derive(CudaArrayInterface)]
#[cai(order = "F")]
struct DeviceMatrix {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
    #[cai(shape)]
    dims: [usize; 2],
    #[cai(stream)]
    stream: Option<Stream>,
}

/// Device memory the driver allocated, exported with the stream its work runs on.
#[derive(CudaArrayInterface)]
#[cai(shape = [2, 3])]
struct OnDevice {
    #[cai(data, element = f32)]
    buf: DeviceAllocation,
    #[cai(stream)]
    stream: DriverStream,
}

/// Reads item `(i, j)` using only the descriptor, as a zero-copy consumer does.
fn read_through(d: &HostArrayDescriptor, i: usize, j: usize) -> f32 {
    let layout = d.layout().expect("valid descriptor");
    let s = layout.strides();
    let offset = i as isize * s[0] + j as isize * s[1];
    let ptr = (d.data.ptr as usize as *const u8).wrapping_offset(offset) as *const f32;
    // SAFETY: `d` was exported from a live `HostMatrix` whose buffer outlives this call, and
    // (i, j) is inside the shape, so the validated layout keeps `ptr` inside that buffer.
    unsafe { ptr.read() }
}

fn host_part() -> Result<(), Box<dyn std::error::Error>> {
    println!("== host: #[derive(ArrayInterface)] over Vec<f32>");
    for column_major in [false, true] {
        let m = HostMatrix::new(2, 3, column_major);
        let d = m.array_interface()?;
        println!("__array_interface__ = {d}");
        for i in 0..m.rows {
            for j in 0..m.cols {
                let v = read_through(&d, i, j);
                assert_eq!(v, (10 * i + j) as f32, "item ({i}, {j})");
            }
        }
        println!(
            "   read all {} items back through pointer + strides: ok",
            m.rows * m.cols
        );
    }
    let p = Particles {
        items: vec![
            Particle {
                id: 7,
                pos: [1.0, 2.0, 3.0]
            };
            4
        ],
    };
    println!("structured: {}", p.array_interface()?);
    println!(
        "   (examples/demo.py shows NumPy reading such memory zero-copy, through the cai package)"
    );
    Ok(())
}

fn device_part() -> Result<(), Box<dyn std::error::Error>> {
    println!("== device: #[derive(CudaArrayInterface)]");
    match cuda::device_count().and_then(|n| {
        if n > 0 {
            cuda::device_name(0)
        } else {
            Ok(String::new())
        }
    }) {
        Ok(name) if !name.is_empty() => {
            cuda::ensure_context(0)?;
            let items: Vec<f32> = (0..6).map(|k| k as f32).collect();
            let bytes: Vec<u8> = items.iter().flat_map(|v| v.to_le_bytes()).collect();
            let m = OnDevice {
                buf: DeviceAllocation::new(bytes.len(), false)?,
                stream: DriverStream::new(true)?,
            };
            // SAFETY: the allocation is ours and `bytes.len()` long; the copy is waited for.
            unsafe { cuda::copy_from_host(m.buf.device_ptr(), &bytes, m.stream.stream())? };
            let d = m.cuda_array_interface()?;
            println!("on {name}: __cuda_array_interface__ = {d}");
            // SAFETY: the descriptor's extent is inside the allocation, read on its stream.
            let back = unsafe { cuda::copy_to_host(d.data.ptr, bytes.len(), m.stream.stream())? };
            println!(
                "   read back through the descriptor: {:?}",
                back.chunks(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect::<Vec<_>>()
            );
        }
        outcome => {
            let why = match outcome {
                Err(e) => e.to_string(),
                Ok(_) => "the driver sees no device".to_owned(),
            };
            println!("device part skipped: no CUDA device here ({why}).");
            println!(
                "   the descriptor a struct over a device address would export (never dereferenced):"
            );
            // SAFETY: the address is only printed, never dereferenced.
            let buf = unsafe { RawDeviceMemory::from_raw_parts(0x7f3a_0000_0000, 6) };
            let m = DeviceMatrix {
                buf,
                dims: [2, 3],
                stream: Some(Stream::PerThreadDefault),
            };
            println!("__cuda_array_interface__ = {}", m.cuda_array_interface()?);
        }
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    host_part()?;
    device_part()
}
