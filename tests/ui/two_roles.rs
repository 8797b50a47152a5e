use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
struct Matrix {
    #[cai(data, shape)]
    buf: RawDeviceMemory<f32>,
}

fn main() {}
