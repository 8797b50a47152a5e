use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
#[cai(order = "K")]
struct Matrix {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
}

fn main() {}
