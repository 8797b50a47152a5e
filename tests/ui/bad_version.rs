use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
#[cai(version = 4)]
struct Matrix {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
}

fn main() {}
