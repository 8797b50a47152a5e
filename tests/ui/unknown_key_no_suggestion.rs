use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
#[cai(device = 0)]
struct Matrix {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
}

fn main() {}
