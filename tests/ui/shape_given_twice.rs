use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
#[cai(shape = [2, 3])]
struct Matrix {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
    #[cai(shape)]
    dims: [usize; 2],
}

fn main() {}
