use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
#[cai(data)]
struct Matrix {
    #[cai(order = "F")]
    buf: RawDeviceMemory<f32>,
}

fn main() {}
