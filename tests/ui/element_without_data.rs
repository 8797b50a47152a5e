use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
struct Matrix {
    #[cai(data)]
    buf: RawDeviceMemory<u8>,
    #[cai(element = f32)]
    dims: [usize; 2],
}

fn main() {}
