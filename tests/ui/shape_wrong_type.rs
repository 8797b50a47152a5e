use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
struct Matrix {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
    #[cai(shape)]
    dims: [u32; 2],
}

fn main() {}
