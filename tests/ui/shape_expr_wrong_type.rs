use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
#[cai(shape = "2x3")]
struct Matrix {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
}

fn main() {}
