use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
enum Buffer {
    F32(RawDeviceMemory<f32>),
    F64(RawDeviceMemory<f64>),
}

fn main() {}
