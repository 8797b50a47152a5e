use cai_runtime::{CudaArrayInterface, RawDeviceMemory};

#[derive(CudaArrayInterface)]
struct Queued {
    #[cai(data)]
    buf: RawDeviceMemory<f32>,
    #[cai(stream)]
    stream: u64,
}

fn main() {}
