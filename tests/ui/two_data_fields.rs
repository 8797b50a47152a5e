use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
struct Pair {
    #[cai(data)]
    left: RawDeviceMemory<f32>,
    #[cai(data)]
    right: RawDeviceMemory<f32>,
}

fn main() {}
