use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
struct Frozen {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
    #[cai(readonly)]
    flags: u8,
}

fn main() {}
