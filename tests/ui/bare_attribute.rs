use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
struct Matrix {
    #[cai]
    buf: RawDeviceMemory<f32>,
}

fn main() {}
