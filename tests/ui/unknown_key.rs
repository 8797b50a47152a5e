use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
struct Matrix {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
    #[cai(strdes)]
    strides: [isize; 2],
}

fn main() {}
