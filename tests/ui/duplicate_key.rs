use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
#[cai(order = "F", order = "C")]
struct Matrix {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
}

fn main() {}
